// A seeded mutation fuzzer for the trace reader, shared by the short Catch2
// run (label fuzz) and the long-run driver (pa_trace_fuzz_driver). Mutations
// aim at what a reader gets wrong: lengths and counts (overwritten with 0, -1,
// huge, off-by-one values), enum bytes, truncation, insertion, splicing. Half
// of the mutants get their checksum recomputed so that they get past the
// checksum and exercise the field validation.
#pragma once
#include <cstdint>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"
#include "trace_samples.hpp"

namespace pa::trace::testing {

struct FuzzStats {
  std::uint64_t inputs = 0, accepted = 0, rejected = 0;
};

inline std::vector<std::uint8_t> mutate(const std::vector<std::vector<std::uint8_t>>& corpus,
                                        std::mt19937_64& rng) {
  auto pick = [&](std::uint64_t n) { return n == 0 ? 0 : static_cast<std::size_t>(rng() % n); };
  std::vector<std::uint8_t> b = corpus[pick(corpus.size())];
  static constexpr std::uint64_t kInteresting[] = {0,          1,          2,          0x7f,
                                                   0x80,       0xff,       0x100,      0x7fff,
                                                   0xffff,     0x7fffffff, 0x80000000, 0xffffffff,
                                                   0x100000000ull, 0x7fffffffffffffffull,
                                                   0xffffffffffffffffull, 72, 73, 71};
  const int rounds = 1 + static_cast<int>(pick(4));
  for (int r = 0; r < rounds; ++r) {
    switch (pick(9)) {
      case 0:  // bit flip
        if (!b.empty()) b[pick(b.size())] ^= static_cast<std::uint8_t>(1u << pick(8));
        break;
      case 1:  // random byte
        if (!b.empty()) b[pick(b.size())] = static_cast<std::uint8_t>(rng());
        break;
      case 2: {  // interesting little-endian integer of 1, 2, 4 or 8 bytes
        const std::size_t w = std::size_t{1} << pick(4);
        if (b.size() >= w) {
          const std::size_t at = pick(b.size() - w + 1);
          std::uint64_t v = kInteresting[pick(std::size(kInteresting))];
          if (rng() & 1) v += pick(3) - 1;
          for (std::size_t i = 0; i < w; ++i) b[at + i] = static_cast<std::uint8_t>(v >> (8 * i));
        }
        break;
      }
      case 3:  // truncate
        b.resize(pick(b.size() + 1));
        break;
      case 4: {  // insert random bytes
        const std::size_t at = pick(b.size() + 1), n = 1 + pick(16);
        std::vector<std::uint8_t> ins(n);
        for (auto& x : ins) x = static_cast<std::uint8_t>(rng());
        b.insert(b.begin() + static_cast<std::ptrdiff_t>(at), ins.begin(), ins.end());
        break;
      }
      case 5: {  // erase a range
        if (!b.empty()) {
          const std::size_t at = pick(b.size()), n = 1 + pick(std::min<std::size_t>(b.size() - at, 80));
          b.erase(b.begin() + static_cast<std::ptrdiff_t>(at), b.begin() + static_cast<std::ptrdiff_t>(at + n));
        }
        break;
      }
      case 6: {  // duplicate a chunk (e.g. an event record) in place
        if (b.size() > 2) {
          const std::size_t at = pick(b.size()), n = 1 + pick(std::min<std::size_t>(b.size() - at, 144));
          std::vector<std::uint8_t> chunk(b.begin() + static_cast<std::ptrdiff_t>(at),
                                          b.begin() + static_cast<std::ptrdiff_t>(at + n));
          b.insert(b.begin() + static_cast<std::ptrdiff_t>(pick(b.size() + 1)), chunk.begin(), chunk.end());
        }
        break;
      }
      case 7: {  // splice with another corpus entry
        const auto& o = corpus[pick(corpus.size())];
        const std::size_t cut = pick(std::min(b.size(), o.size()) + 1);
        b.resize(cut);
        b.insert(b.end(), o.begin() + static_cast<std::ptrdiff_t>(cut), o.end());
        break;
      }
      case 8:  // enum byte of an event record: stage, step, op or tensor
        if (b.size() > 120) {
          const std::size_t at = b.size() - 8 - 72 * (1 + pick(std::max<std::size_t>(1, (b.size() - 120) / 72)));
          if (at < b.size()) b[at + pick(4)] = static_cast<std::uint8_t>(pick(40));
        }
        break;
    }
  }
  if (rng() & 1) fix_checksum(b);
  return b;
}

// Feeds one input to both parsers. Returns true if it was accepted. Anything
// but a parse or a TraceFormatError is a failure (throws std::logic_error).
inline bool fuzz_one(const std::vector<std::uint8_t>& in, FuzzStats& st) {
  ++st.inputs;
  bool accepted = false;
  for (int checked = 0; checked < 2; ++checked) {
    TraceData d;
    try {
      d = checked ? parse_trace(in.data(), in.size()) : parse_trace_unchecked_for_fuzzing(in.data(), in.size());
    } catch (const TraceFormatError&) {
      continue;  // rejected with a clear error: fine
    }
    // Whatever the reader accepts must be valid and must round-trip exactly.
    try {
      validate_trace(d);
      const auto again = serialize_trace(d);
      TraceData d2 = parse_trace(again.data(), again.size());
      if (d2.events.size() != d.events.size()) throw std::logic_error("round trip changed the event count");
      for (std::size_t i = 0; i < d.events.size(); ++i) {
        if (!same_event(d.events[i], d2.events[i])) throw std::logic_error("round trip changed an event");
      }
      if (checked && again != in) throw std::logic_error("accepted input does not re-serialize to itself");
    } catch (const TraceFormatError& e) {
      throw std::logic_error(std::string("reader accepted an input that fails validation: ") + e.what());
    }
    if (checked) accepted = true;
  }
  if (accepted) ++st.accepted; else ++st.rejected;
  return accepted;
}

// Hand-made samples plus real events: every 50th event of the host model's
// trace of each stage 1-5 on a small problem (real field patterns, small files).
inline std::vector<std::vector<std::uint8_t>> default_corpus() {
  std::vector<std::vector<std::uint8_t>> c;
  for (int n : {0, 1, 3, 7}) c.push_back(serialize_trace(sample_trace(n)));
  for (int st = 1; st <= 5; ++st) {
    ProblemSpec s;
    s.dtype = DType::f32;
    s.head_size = 64;
    s.block_size = 8;
    s.num_heads = 2;
    s.num_kv_heads = 1;
    s.context_lens = {3, 9};
    const auto stage = static_cast<Stage>(st);
    const auto all = model_events(s, stage, Selection{{{1, 1, 0}}});
    TraceData d{{s, stage, kHostModelSource, "fuzz-seed"}, {}};
    for (std::size_t i = 0; i < all.size(); i += 50) d.events.push_back(all[i]);
    c.push_back(serialize_trace(d));
  }
  return c;
}

}  // namespace pa::trace::testing
