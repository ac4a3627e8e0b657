// Timeline -> Chrome trace-event JSON (see timeline_export.hpp for the
// mapping). Written in pieces through a small buffer, so the size of the
// output never has to fit in memory; numbers go through std::to_chars and
// times through integer arithmetic, so every value is exact.
#include "pa/trace/timeline_export.hpp"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <tuple>
#include <vector>

#include "pa/core/atomic_file.hpp"

namespace pa::trace {

void append_json_string(std::string& out, std::string_view s) {
  static constexpr char kHex[] = "0123456789abcdef";
  out += '"';
  for (const char ch : s) {
    const auto c = static_cast<unsigned char>(ch);
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (c < 0x20 || c == 0x7f) {  // JSON forbids raw control characters (DEL: escaped for readers' sake)
          out += "\\u00";
          out += kHex[c >> 4];
          out += kHex[c & 15];
        } else {
          out += ch;
        }
    }
  }
  out += '"';
}

namespace {

// Collects output and hands it to the sink in pieces of about kPiece bytes.
class JsonWriter {
 public:
  explicit JsonWriter(const JsonSink& sink) : sink_(sink) { buf_.reserve(kPiece + 4096); }
  ~JsonWriter() = default;
  JsonWriter& raw(std::string_view s) {
    buf_ += s;
    return maybe_flush();
  }
  JsonWriter& str(std::string_view s) {
    append_json_string(buf_, s);
    return maybe_flush();
  }
  JsonWriter& num(std::uint64_t v) { return integer(v); }
  JsonWriter& num(std::int64_t v) { return integer(v); }
  // v / 1000 with exactly three decimals: nanoseconds as microseconds.
  JsonWriter& micros(std::uint64_t ns) {
    integer(ns / 1000);
    char frac[4] = {'.', static_cast<char>('0' + ns % 1000 / 100), static_cast<char>('0' + ns % 100 / 10),
                    static_cast<char>('0' + ns % 10)};
    return raw(std::string_view(frac, 4));
  }
  void flush() {
    if (!buf_.empty()) sink_(buf_);
    buf_.clear();
  }

 private:
  static constexpr std::size_t kPiece = 1 << 16;
  template <class T>
  JsonWriter& integer(T v) {
    char tmp[24];
    const auto r = std::to_chars(tmp, tmp + sizeof tmp, v);
    return raw(std::string_view(tmp, static_cast<std::size_t>(r.ptr - tmp)));
  }
  JsonWriter& maybe_flush() {
    if (buf_.size() >= kPiece) flush();
    return *this;
  }
  const JsonSink& sink_;
  std::string buf_;
};

// One Perfetto thread per warp of a block of a kernel, on the SM it ran on.
struct WarpKey {
  std::uint16_t sm;
  KernelRole kernel;
  std::uint32_t block;
  std::uint16_t warp;
  auto tie() const { return std::tie(sm, kernel, block, warp); }
  bool operator<(const WarpKey& o) const { return tie() < o.tie(); }
  bool operator==(const WarpKey& o) const { return tie() == o.tie(); }
};

WarpKey key_of(const Span& s) { return {s.sm, s.kernel, s.block, s.warp}; }

std::int64_t pid_of(std::uint16_t sm) { return static_cast<std::int64_t>(sm) + 1; }

std::string thread_name(const WarpKey& k) {
  std::string n = k.kernel == KernelRole::main ? "" : std::string(to_string(k.kernel)) + " ";
  return n + "block " + std::to_string(k.block) + " warp " + std::to_string(k.warp);
}

void write_other_data(JsonWriter& w, const TimelineHeader& h, const TimelineExportStats& st) {
  w.raw("\"otherData\":{\"format\":\"pa-lab timeline, version ").num(std::uint64_t{kTimelineVersion}).raw("\"");
  w.raw(",\"source\":").str(h.source);
  w.raw(",\"stage\":").str(to_string(h.stage));
  w.raw(",\"problem\":").str(h.spec.describe());
  w.raw(",\"revision\":").str(h.revision);
  w.raw(",\"launch\":").str(h.launch);
  w.raw(",\"sm_count\":").num(std::uint64_t{h.sm_count});
  w.raw(",\"sm_clock_khz\":").num(std::uint64_t{h.sm_clock_khz});
  w.raw(",\"globaltimer_resolution_ns\":").num(std::uint64_t{h.globaltimer_resolution_ns});
  w.raw(",\"untimed_ns\":").num(h.untimed_ns);
  w.raw(",\"timed_ns\":").num(h.timed_ns);
  w.raw(",\"dropped_spans\":").num(h.dropped_spans);
  w.raw(",\"spans\":").num(st.spans);
  w.raw(",\"time_origin_ns\":").num(st.t0_ns);
  w.raw("}");
}

}  // namespace

TimelineExportStats export_timeline_json(const TimelineData& data, const JsonSink& sink) {
  validate_timeline(data);
  const std::vector<Span>& spans = data.spans;
  TimelineExportStats st;
  st.spans = spans.size();

  // The threads: every distinct (SM, kernel, block, warp), sorted; a span's
  // tid is its key's place in this list + 1.
  std::vector<WarpKey> warps;
  warps.reserve(spans.size());
  for (const Span& s : spans) warps.push_back(key_of(s));
  std::sort(warps.begin(), warps.end());
  warps.erase(std::unique(warps.begin(), warps.end()), warps.end());
  st.threads = warps.size();
  auto tid_of = [&](const Span& s) {
    return static_cast<std::int64_t>(std::lower_bound(warps.begin(), warps.end(), key_of(s)) - warps.begin()) + 1;
  };

  if (!spans.empty()) {
    std::uint64_t t_end = 0;
    st.t0_ns = spans.front().t_begin_ns;
    for (const Span& s : spans) {
      st.t0_ns = std::min(st.t0_ns, s.t_begin_ns);
      t_end = std::max(t_end, s.t_end_ns);
    }
    st.length_ns = t_end - st.t0_ns;
  }

  JsonWriter w(sink);
  w.raw("{\"displayTimeUnit\":\"ns\",\n");
  write_other_data(w, data.header, st);
  w.raw(",\n\"traceEvents\":[");
  bool first = true;
  auto open_event = [&] {
    w.raw(first ? "\n{" : ",\n{");
    first = false;
  };
  // One process per SM, named and ordered by the SM's number; its metadata
  // uses the tid of its first warp, so no thread exists without spans.
  for (std::size_t i = 0; i < warps.size(); ++i) {
    if (i > 0 && warps[i].sm == warps[i - 1].sm) continue;
    const std::int64_t pid = pid_of(warps[i].sm), tid = static_cast<std::int64_t>(i) + 1;
    open_event();
    w.raw("\"name\":\"process_name\",\"ph\":\"M\",\"ts\":0,\"pid\":").num(pid).raw(",\"tid\":").num(tid);
    w.raw(",\"args\":{\"name\":").str("SM " + std::to_string(warps[i].sm)).raw("}}");
    open_event();
    w.raw("\"name\":\"process_sort_index\",\"ph\":\"M\",\"ts\":0,\"pid\":").num(pid).raw(",\"tid\":").num(tid);
    w.raw(",\"args\":{\"sort_index\":").num(pid).raw("}}");
    ++st.sms;
  }
  for (std::size_t i = 0; i < warps.size(); ++i) {
    const std::int64_t pid = pid_of(warps[i].sm), tid = static_cast<std::int64_t>(i) + 1;
    open_event();
    w.raw("\"name\":\"thread_name\",\"ph\":\"M\",\"ts\":0,\"pid\":").num(pid).raw(",\"tid\":").num(tid);
    w.raw(",\"args\":{\"name\":").str(thread_name(warps[i])).raw("}}");
    open_event();
    w.raw("\"name\":\"thread_sort_index\",\"ph\":\"M\",\"ts\":0,\"pid\":").num(pid).raw(",\"tid\":").num(tid);
    w.raw(",\"args\":{\"sort_index\":").num(tid).raw("}}");
  }
  // "stage,kernel role", one string per role.
  std::vector<std::string> cats;
  for (int k = 0; k < static_cast<int>(KernelRole::count_); ++k)
    cats.push_back(std::string(to_string(data.header.stage)) + "," + to_string(static_cast<KernelRole>(k)));
  for (const Span& s : spans) {
    open_event();
    w.raw("\"name\":").str(to_string(s.phase));
    w.raw(",\"cat\":").str(cats[static_cast<std::size_t>(s.kernel)]);
    w.raw(",\"ph\":\"X\",\"ts\":").micros(s.t_begin_ns - st.t0_ns);
    w.raw(",\"dur\":").micros(s.t_end_ns - s.t_begin_ns);
    w.raw(",\"pid\":").num(pid_of(s.sm)).raw(",\"tid\":").num(tid_of(s));
    w.raw(",\"args\":{\"block\":").num(std::uint64_t{s.block});
    w.raw(",\"warp\":").num(std::uint64_t{s.warp});
    w.raw(",\"iter\":").num(std::int64_t{s.iter});
    w.raw(",\"cycles\":").num(s.clk_end - s.clk_begin).raw("}}");
  }
  w.raw("\n]}\n");
  w.flush();
  return st;
}

std::string timeline_json(const TimelineData& data) {
  std::string out;
  export_timeline_json(data, [&](std::string_view piece) { out += piece; });
  return out;
}

TimelineExportStats write_timeline_json(const std::string& path, const TimelineData& data) {
  validate_timeline(data);  // refused before a temporary file exists
  TimelineExportStats st;
  core::write_file_atomically_streamed(path, [&](std::FILE* f) {
    st = export_timeline_json(data, [&](std::string_view piece) {
      // A failed write is sticky (std::ferror), checked once by the caller.
      std::fwrite(piece.data(), 1, piece.size(), f);
    });
  });
  return st;
}

}  // namespace pa::trace
