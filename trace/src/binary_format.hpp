// The frame the trace module's binary files share (trace files, timeline
// files; trace/FORMAT.md): a magic, a version, a byte-order mark, the record
// size and the header length, a header payload that opens with the problem
// the file came from, a record count, the records and an FNV-1a checksum.
// Each file kind says what differs (FileKind) and encodes its own records;
// the framing, the little-endian cursor, the problem's encoding and the
// checks a reader owes every number it reads live here once, so that the two
// readers cannot drift apart in what they accept. Internal to pa_trace.
#pragma once
#include <cstddef>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/core/event.hpp"
#include "pa/core/problem.hpp"

namespace pa::trace::binary {

// A violation found by the shared code. Every public entry point of a file
// kind rethrows it as that kind's own error (rethrow_as below), so callers
// only ever see TraceFormatError or TimelineFormatError.
class FormatError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

[[noreturn]] void fail(const std::string& what);

template <class Error, class F>
decltype(auto) rethrow_as(const std::string& prefix, F&& f) {
  try {
    return f();
  } catch (const FormatError& e) {
    throw Error(prefix + e.what());
  }
}

// FNV-1a, 64 bit: simple, no table, good enough to catch corruption (not tampering).
std::uint64_t fnv1a64(const std::uint8_t* p, std::size_t n);

class Writer {
 public:
  std::vector<std::uint8_t> buf;
  void u8(std::uint8_t v) { buf.push_back(v); }
  void u16(std::uint16_t v) { put(v, 2); }
  void u32(std::uint32_t v) { put(v, 4); }
  void u64(std::uint64_t v) { put(v, 8); }
  void i32(std::int32_t v) { put(static_cast<std::uint32_t>(v), 4); }
  void i64(std::int64_t v) { put(static_cast<std::uint64_t>(v), 8); }
  void f32(float v);
  void bytes(const void* p, std::size_t n) {
    const auto* b = static_cast<const std::uint8_t*>(p);
    buf.insert(buf.end(), b, b + n);
  }
  void text(const std::string& s) {  // u32 length, then the bytes
    u32(static_cast<std::uint32_t>(s.size()));
    bytes(s.data(), s.size());
  }

 private:
  void put(std::uint64_t v, int n) {
    for (int i = 0; i < n; ++i) buf.push_back(static_cast<std::uint8_t>(v >> (8 * i)));
  }
};

// Bounds-checked little-endian cursor over [p, p + n). `what` names the
// field in the error; offsets in errors are relative to p.
class Reader {
 public:
  Reader(const std::uint8_t* p, std::size_t n) : p_(p), n_(n) {}
  std::size_t pos() const { return pos_; }
  std::size_t left() const { return n_ - pos_; }
  void need(std::size_t k, const char* what) const;
  std::uint8_t u8(const char* what) { return static_cast<std::uint8_t>(get(1, what)); }
  std::uint16_t u16(const char* what) { return static_cast<std::uint16_t>(get(2, what)); }
  std::uint32_t u32(const char* what) { return static_cast<std::uint32_t>(get(4, what)); }
  std::uint64_t u64(const char* what) { return get(8, what); }
  std::int32_t i32(const char* what) { return static_cast<std::int32_t>(u32(what)); }
  std::int64_t i64(const char* what) { return static_cast<std::int64_t>(u64(what)); }
  float f32(const char* what);
  const std::uint8_t* take(std::size_t k, const char* what) {
    need(k, what);
    const std::uint8_t* r = p_ + pos_;
    pos_ += k;
    return r;
  }

 private:
  std::uint64_t get(int k, const char* what);
  const std::uint8_t* p_;
  std::size_t n_;
  std::size_t pos_ = 0;
};

// Longest text field (source, revision) a file may hold.
inline constexpr std::size_t kMaxTextBytes = 256;

void check_range(long long v, long long lo, long long hi, const std::string& what);
// At most kMaxTextBytes, no control bytes.
void check_text(const std::string& s, const char* what);

// What tells one file kind from another. Messages are built from these
// words, so both kinds say the same things in the same way.
struct FileKind {
  const char* magic;              // 8 bytes, ASCII
  std::uint32_t version;
  std::uint32_t record_bytes;
  std::uint32_t min_header_bytes;  // the shortest header payload this kind can have
  std::uint64_t max_file_bytes;    // the largest file a reader accepts
  const char* noun;                // "trace": "not a pa-lab trace", "cannot open trace 'x'"
  const char* record;              // "event": "event record size", "event count"
  const char* extension;           // ".patrace"
  const char* max_bytes_name;      // the constant's name, for the size-limit message
  // Extra words for the refusal of another version ("" for none).
  std::string (*version_note)(std::uint32_t found) = nullptr;
};

// The payload every header opens with: the stage, the problem (dtype, flags,
// the shape fields, seed, logit spread, context lengths), the source (host
// model or GPU name) and the revision. FORMAT.md's "Header payload" table.
inline constexpr std::size_t kRunHeaderFixedBytes = 4 + 9 * 4 + 8 + 4 + 4;  // up to and with num_seqs
inline constexpr std::size_t kRunHeaderMinBytes = kRunHeaderFixedBytes + 8;  // and the two text lengths
void write_run_header(Writer& w, Stage stage, const ProblemSpec& spec, const std::string& source,
                      const std::string& revision);
void read_run_header(Reader& r, Stage& stage, ProblemSpec& spec, std::string& source, std::string& revision);
// The format's bounds on each field, then ProblemSpec::validate (the problem's
// own rules, and that any reader can afford to build it).
void validate_run_header(Stage stage, const ProblemSpec& spec, const std::string& source,
                         const std::string& revision);

// A whole file: prefix, `header` (the payload), the record count, the
// records `write_records` appends, the checksum.
std::vector<std::uint8_t> frame(const FileKind& kind, const std::vector<std::uint8_t>& header, std::uint64_t count,
                                const std::function<void(Writer&)>& write_records);

// The parts of a framed file whose prefix, lengths, count and (if asked)
// checksum have been checked: the header payload and exactly `count`
// records, each cursor bounded to its own part.
struct Unframed {
  Reader header;
  Reader records;
  std::uint64_t count;
};
Unframed unframe(const FileKind& kind, const std::uint8_t* bytes, std::size_t size, bool verify_checksum);

// What every reader checks before reading a byte: a regular file (not a
// folder, device or pipe) of at most kind.max_file_bytes. Returns its size.
// These two throw FormatError with the path in the message.
std::uint64_t check_input_file(const FileKind& kind, const std::string& path);
// The file's bytes, read in chunks (the file's size, never a number inside it,
// bounds the buffer).
std::vector<std::uint8_t> read_input_file(const FileKind& kind, const std::string& path);

// A kind's read_*: the file checked and read, then `parse`d; every error is
// an `Error` that starts with the path.
template <class Error, class Parse>
auto read_file(const FileKind& kind, const std::string& path, Parse&& parse) {
  const std::vector<std::uint8_t> buf = rethrow_as<Error>("", [&] { return read_input_file(kind, path); });
  try {
    return parse(buf.data(), buf.size());
  } catch (const Error& e) {
    throw Error("'" + path + "': " + e.what());
  }
}

// A kind's write_*: the serialized bytes through pa::core::write_file_atomically.
void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes);

}  // namespace pa::trace::binary
