// Timeline file writer and reader (trace/FORMAT.md, "Timeline files"). The
// frame, the problem's encoding and the reader's discipline are the trace
// files' (binary_format.hpp); this file adds what a timeline has beyond them:
// the GPU's clocks, the tracer's overhead and dropped spans in the header,
// and the 48-byte span record with its checks.
#include "pa/trace/timeline_file.hpp"

#include <limits>
#include <string>
#include <utility>

#include "binary_format.hpp"

namespace pa::trace {

namespace {

using binary::check_range;
using binary::fail;
using binary::Reader;
using binary::Writer;

constexpr std::size_t kPrefixBytes = 24;  // magic .. header length: where the header payload starts
// What the header holds after the run header: sm_count, sm_clock_khz,
// globaltimer_resolution_ns, reserved, untimed_ns, timed_ns, dropped_spans,
// the launch text's length.
constexpr std::size_t kExtraFixedBytes = 4 * 4 + 3 * 8 + 4;

// Bounds of the header's numbers: far beyond any GPU, so that only a corrupt
// file hits them.
constexpr long long kMaxSmClockKhz = 10'000'000;        // 10 GHz
constexpr long long kMaxTimerResolutionNs = 1'000'000'000;  // 1 s
constexpr std::uint64_t kMaxKernelNs = 1'000'000'000'000;   // 1000 s for one launch
constexpr std::uint64_t kMaxDroppedSpans = std::uint64_t{1} << 40;  // 48 TiB of spans

constexpr binary::FileKind kTimelineFile{kTimelineMagic,
                                         kTimelineVersion,
                                         kTimelineSpanBytes,
                                         binary::kRunHeaderMinBytes + kExtraFixedBytes,
                                         kTimelineMaxFileBytes,
                                         "timeline",
                                         "span",
                                         ".patl",
                                         "kTimelineMaxFileBytes"};

template <class F>
decltype(auto) as_timeline_error(F&& f) {
  return binary::rethrow_as<TimelineFormatError>("timeline file: ", std::forward<F>(f));
}

// The timeline's texts also go into JSON (timeline_export.hpp), which must be
// UTF-8: printable (binary::check_text) and well-formed UTF-8.
void check_utf8(const std::string& s, const char* what) {
  for (std::size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    const int extra = c < 0x80 ? 0 : (c >> 5) == 0x6 ? 1 : (c >> 4) == 0xe ? 2 : (c >> 3) == 0x1e ? 3 : -1;
    bool ok = extra >= 0 && i + extra < s.size();
    for (int k = 1; ok && k <= extra; ++k) ok = (static_cast<unsigned char>(s[i + k]) & 0xc0) == 0x80;
    // Overlong forms and surrogates are not UTF-8 either.
    if (ok && extra == 1) ok = c >= 0xc2;
    if (ok && extra == 2) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = !(c == 0xe0 && c1 < 0xa0) && !(c == 0xed && c1 >= 0xa0);
    }
    if (ok && extra == 3) {
      const auto c1 = static_cast<unsigned char>(s[i + 1]);
      ok = c <= 0xf4 && !(c == 0xf0 && c1 < 0x90) && !(c == 0xf4 && c1 >= 0x90);
    }
    if (!ok) {
      fail(std::string(what) + " is not UTF-8 (byte " + std::to_string(i) + " of it, value " + std::to_string(c) +
           "; accepted: UTF-8 text)");
    }
    i += static_cast<std::size_t>(extra) + 1;
  }
}

void validate_header(const TimelineHeader& h) {
  binary::validate_run_header(h.stage, h.spec, h.source, h.revision);
  binary::check_text(h.launch, "launch");
  check_utf8(h.source, "source");
  check_utf8(h.revision, "revision");
  check_utf8(h.launch, "launch");
  check_range(h.sm_count, 0, 65536, "sm_count");
  check_range(h.sm_clock_khz, 0, kMaxSmClockKhz, "sm_clock_khz");
  check_range(h.globaltimer_resolution_ns, 0, kMaxTimerResolutionNs, "globaltimer_resolution_ns");
  for (const auto& [v, name] : {std::pair{h.untimed_ns, "untimed_ns"}, std::pair{h.timed_ns, "timed_ns"}}) {
    if (v > kMaxKernelNs) {
      fail(std::string(name) + " = " + std::to_string(v) + " is out of range (accepted: 0 .. " +
           std::to_string(kMaxKernelNs) + ")");
    }
  }
  if (h.dropped_spans > kMaxDroppedSpans) {
    fail("dropped_spans = " + std::to_string(h.dropped_spans) + " is out of range (accepted: 0 .. " +
         std::to_string(kMaxDroppedSpans) + ")");
  }
}

// Span `index`; `offset` is its byte offset in a file, 0 for one in memory.
// The name is only built for a span that fails: a file holds millions.
void validate_span(const Span& s, const TimelineHeader& h, std::size_t index, std::size_t offset) {
  auto where = [&] {
    return "span " + std::to_string(index) +
           (offset ? " (byte offset " + std::to_string(offset) + ")" : std::string()) + ": ";
  };
  auto range = [&](long long v, long long lo, long long hi, const char* what) {
    if (v < lo || v > hi) check_range(v, lo, hi, where() + what);  // throws, naming the span
  };
  if (s.stage != h.stage) {
    fail(where() + "stage value " + std::to_string(static_cast<int>(s.stage)) +
         " is not the header's stage (accepted: " + std::to_string(static_cast<int>(h.stage)) + " = " +
         to_string(h.stage) + ")");
  }
  range(static_cast<int>(s.phase), 0, static_cast<int>(Phase::count_) - 1, "phase");
  range(static_cast<int>(s.kernel), 0, static_cast<int>(KernelRole::count_) - 1, "kernel role");
  range(s.reserved, 0, 0, "reserved byte");
  range(s.warp, 0, kTimelineMaxWarps - 1, "warp");
  if (h.sm_count > 0) range(s.sm, 0, static_cast<long long>(h.sm_count) - 1, "sm (the header's sm_count bounds it)");
  range(s.iter, -1, std::numeric_limits<std::int32_t>::max(), "iter");
  // A warp's clocks do not run backwards within a span (it never leaves its SM).
  if (s.t_end_ns < s.t_begin_ns) {
    fail(where() + "t_end_ns " + std::to_string(s.t_end_ns) + " is before t_begin_ns " + std::to_string(s.t_begin_ns));
  }
  if (s.clk_end < s.clk_begin) {
    fail(where() + "clk_end " + std::to_string(s.clk_end) + " is before clk_begin " + std::to_string(s.clk_begin));
  }
}

void write_span(Writer& w, const Span& s) {
  w.u64(s.t_begin_ns);
  w.u64(s.t_end_ns);
  w.u64(s.clk_begin);
  w.u64(s.clk_end);
  w.u32(s.block);
  w.u16(s.sm);
  w.u16(s.warp);
  w.u8(static_cast<std::uint8_t>(s.stage));
  w.u8(static_cast<std::uint8_t>(s.phase));
  w.u8(static_cast<std::uint8_t>(s.kernel));
  w.u8(s.reserved);
  w.i32(s.iter);
}

Span read_span(Reader& r) {
  Span s{};
  s.t_begin_ns = r.u64("span");
  s.t_end_ns = r.u64("span");
  s.clk_begin = r.u64("span");
  s.clk_end = r.u64("span");
  s.block = r.u32("span");
  s.sm = r.u16("span");
  s.warp = r.u16("span");
  s.stage = static_cast<Stage>(r.u8("span"));
  s.phase = static_cast<Phase>(r.u8("span"));
  s.kernel = static_cast<KernelRole>(r.u8("span"));
  s.reserved = r.u8("span");
  s.iter = r.i32("span");
  return s;
}

TimelineData parse_impl(const std::uint8_t* bytes, std::size_t size) {
  binary::Unframed f = binary::unframe(kTimelineFile, bytes, size, true);
  const std::size_t header_len = f.header.left();
  const std::string region =
      " (in the header payload, bytes " + std::to_string(kPrefixBytes) + " .. " +
      std::to_string(kPrefixBytes + header_len - 1) + ")";
  TimelineData d;
  TimelineHeader& h = d.header;
  try {
    binary::read_run_header(f.header, h.stage, h.spec, h.source, h.revision);
  } catch (const binary::FormatError& e) {
    fail(e.what() + region);
  }
  // The timeline's own fields: each error names the field's byte offset.
  auto offset = [&] { return " at byte offset " + std::to_string(kPrefixBytes + f.header.pos()); };
  if (f.header.left() < kExtraFixedBytes) {
    fail("truncated: the timeline fields need " + std::to_string(kExtraFixedBytes) + " bytes" + offset() +
         ", the header length leaves " + std::to_string(f.header.left()));
  }
  h.sm_count = f.header.u32("sm_count");
  h.sm_clock_khz = f.header.u32("sm_clock_khz");
  h.globaltimer_resolution_ns = f.header.u32("globaltimer_resolution_ns");
  const std::string reserved_at = offset();
  if (f.header.u32("reserved") != 0) fail("reserved header field" + reserved_at + " is not zero");
  h.untimed_ns = f.header.u64("untimed_ns");
  h.timed_ns = f.header.u64("timed_ns");
  h.dropped_spans = f.header.u64("dropped_spans");
  const std::string launch_at = offset();
  const std::uint32_t n = f.header.u32("launch length");
  if (n > binary::kMaxTextBytes || n != f.header.left()) {
    fail("launch length " + std::to_string(n) + launch_at + " is out of range (accepted: at most " +
         std::to_string(binary::kMaxTextBytes) + ", and exactly the " + std::to_string(f.header.left()) +
         " bytes left in the header)");
  }
  h.launch.assign(reinterpret_cast<const char*>(f.header.take(n, "launch")), n);
  try {
    validate_header(h);
  } catch (const binary::FormatError& e) {
    fail(e.what() + region);
  }

  const std::size_t first_span = kPrefixBytes + header_len + 8;
  d.spans.reserve(static_cast<std::size_t>(f.count));
  for (std::uint64_t i = 0; i < f.count; ++i) {
    d.spans.push_back(read_span(f.records));
    validate_span(d.spans.back(), h, static_cast<std::size_t>(i),
                  first_span + static_cast<std::size_t>(i) * kTimelineSpanBytes);
  }
  return d;
}

}  // namespace

void validate_timeline(const TimelineData& data) {
  as_timeline_error([&] {
    validate_header(data.header);
    for (std::size_t i = 0; i < data.spans.size(); ++i) {
      validate_span(data.spans[i], data.header, i, 0);
    }
  });
}

std::vector<std::uint8_t> serialize_timeline(const TimelineData& data) {
  validate_timeline(data);
  const TimelineHeader& h = data.header;
  Writer hw;
  binary::write_run_header(hw, h.stage, h.spec, h.source, h.revision);
  hw.u32(h.sm_count);
  hw.u32(h.sm_clock_khz);
  hw.u32(h.globaltimer_resolution_ns);
  hw.u32(0);  // reserved
  hw.u64(h.untimed_ns);
  hw.u64(h.timed_ns);
  hw.u64(h.dropped_spans);
  hw.text(h.launch);
  return binary::frame(kTimelineFile, hw.buf, data.spans.size(), [&](Writer& w) {
    for (const Span& s : data.spans) write_span(w, s);
  });
}

TimelineData parse_timeline(const std::uint8_t* bytes, std::size_t size) {
  return as_timeline_error([&] { return parse_impl(bytes, size); });
}

void write_timeline(const std::string& path, const TimelineData& data) {
  binary::write_file(path, serialize_timeline(data));  // validated before the disk is touched
}

std::uint64_t check_timeline_file(const std::string& path) {
  return binary::rethrow_as<TimelineFormatError>("", [&] { return binary::check_input_file(kTimelineFile, path); });
}

TimelineData read_timeline(const std::string& path) {
  return binary::read_file<TimelineFormatError>(kTimelineFile, path, parse_timeline);
}

}  // namespace pa::trace
