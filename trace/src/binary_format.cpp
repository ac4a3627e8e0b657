// The shared frame of the trace module's binary files: see binary_format.hpp.
//
// Reader discipline: every length or count read from a file is bounded by the
// bytes actually present before anything is allocated from it, every enum and
// field is range-checked, and every failure is a FormatError naming the field,
// the value and what is accepted.
#include "binary_format.hpp"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>

#include "pa/core/atomic_file.hpp"

namespace pa::trace::binary {

namespace {
constexpr std::uint32_t kByteOrderMark = 0x01020304u;
constexpr std::size_t kPrefixBytes = 24;  // magic, version, bom, record size, header length
constexpr std::size_t kMaxHeaderBytes = 1u << 24;  // 16 MiB: ~4M sequences, far beyond any lab problem
constexpr int kMaxSeqs = 1 << 20;
constexpr int kMaxContextLen = 1 << 24;
constexpr int kMaxHeads = 1 << 16;
constexpr int kMaxExtraStride = 1 << 20;
constexpr int kMaxSpareBlocks = 1 << 20;
}  // namespace

void fail(const std::string& what) { throw FormatError(what); }

std::uint64_t fnv1a64(const std::uint8_t* p, std::size_t n) {
  std::uint64_t h = 0xcbf29ce484222325ull;
  for (std::size_t i = 0; i < n; ++i) {
    h ^= p[i];
    h *= 0x100000001b3ull;
  }
  return h;
}

void Writer::f32(float v) {
  std::uint32_t u;
  std::memcpy(&u, &v, 4);
  u32(u);
}

void Reader::need(std::size_t k, const char* what) const {
  if (k > left()) {
    fail(std::string("truncated: ") + what + " needs " + std::to_string(k) + " bytes at offset " +
         std::to_string(pos_) + ", only " + std::to_string(left()) + " left");
  }
}

float Reader::f32(const char* what) {
  const std::uint32_t u = u32(what);
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

std::uint64_t Reader::get(int k, const char* what) {
  need(static_cast<std::size_t>(k), what);
  std::uint64_t v = 0;
  for (int i = 0; i < k; ++i) v |= static_cast<std::uint64_t>(p_[pos_ + i]) << (8 * i);
  pos_ += static_cast<std::size_t>(k);
  return v;
}

void check_range(long long v, long long lo, long long hi, const std::string& what) {
  if (v < lo || v > hi) {
    fail(what + " = " + std::to_string(v) + " is out of range (accepted: " + std::to_string(lo) + " .. " +
         std::to_string(hi) + ")");
  }
}

void check_text(const std::string& s, const char* what) {
  if (s.size() > kMaxTextBytes) {
    fail(std::string(what) + " is " + std::to_string(s.size()) + " bytes (accepted: at most " +
         std::to_string(kMaxTextBytes) + ")");
  }
  for (unsigned char c : s) {
    if (c < 0x20 || c == 0x7f) {
      fail(std::string(what) + " contains control byte " + std::to_string(c) + " (accepted: printable text)");
    }
  }
}

// ---- the run header ---------------------------------------------------------

void write_run_header(Writer& w, Stage stage, const ProblemSpec& s, const std::string& source,
                      const std::string& revision) {
  w.u8(static_cast<std::uint8_t>(stage));
  w.u8(static_cast<std::uint8_t>(s.dtype));
  // flags: bit 0 = nan_tails, bit 1 = alibi (the paper's slopes), bits 2-3 =
  // the cache layout (0 vllm, 1 nhd, 2 hnd), bit 4 = CSR page tables: a file
  // of vLLM's padded cache has the bits of the files before them, zero.
  w.u8(static_cast<std::uint8_t>((s.nan_tails ? 1 : 0) | (s.alibi ? 2 : 0) | (static_cast<unsigned>(s.kv_layout) << 2) |
                                 (s.page_table == PageTableForm::csr ? 16 : 0)));
  w.u8(static_cast<std::uint8_t>(s.kv_dtype));  // 0 = the dtype's own cache, 1 fp8_e4m3, 2 fp8_e5m2
  for (int v : {s.head_size, s.block_size, s.num_threads, s.num_heads, s.num_kv_heads, s.partition_size,
                s.shared_prefix_len, s.extra_q_stride, s.spare_blocks}) {
    w.i32(v);
  }
  w.u64(s.seed);
  w.f32(s.logit_spread);
  w.u32(static_cast<std::uint32_t>(s.context_lens.size()));
  for (int c : s.context_lens) w.i32(c);
  w.text(source);
  w.text(revision);
  if (is_fp8(s.kv_dtype)) {  // the spec's scales (0 = from the data): make_problem rebuilds the same codes
    w.f32(s.k_scale);
    w.f32(s.v_scale);
  }
}

void read_run_header(Reader& r, Stage& stage, ProblemSpec& s, std::string& source, std::string& revision) {
  stage = static_cast<Stage>(r.u8("stage"));
  const std::uint8_t dt = r.u8("dtype");
  if (dt > 2) fail("dtype value " + std::to_string(dt) + " is not a dtype (accepted: 0=fp32, 1=fp16, 2=bf16)");
  s.dtype = static_cast<DType>(dt);
  const std::uint8_t flags = r.u8("flags");
  if ((flags & ~31u) != 0 || ((flags >> 2) & 3u) == 3u)
    fail("unknown header flags " + std::to_string(flags) +
         " (accepted: bit 0 = nan_tails, bit 1 = alibi, bits 2-3 = layout 0 vllm / 1 nhd / 2 hnd, bit 4 = csr)");
  s.nan_tails = (flags & 1u) != 0;
  s.alibi = (flags & 2u) != 0;
  s.kv_layout = static_cast<KvLayout>((flags >> 2) & 3u);
  s.page_table = (flags & 16u) != 0 ? PageTableForm::csr : PageTableForm::padded;
  const std::uint8_t kv = r.u8("kv cache dtype");
  if (kv > 2) fail("kv cache dtype value " + std::to_string(kv) + " (accepted: 0 = the dtype's, 1 = fp8_e4m3, 2 = fp8_e5m2)");
  s.kv_dtype = static_cast<KvDType>(kv);
  for (int* f : {&s.head_size, &s.block_size, &s.num_threads, &s.num_heads, &s.num_kv_heads, &s.partition_size,
                 &s.shared_prefix_len, &s.extra_q_stride, &s.spare_blocks}) {
    *f = r.i32("header field");
  }
  s.seed = r.u64("seed");
  s.logit_spread = r.f32("logit_spread");
  const std::uint32_t nseq = r.u32("number of sequences");
  if (nseq == 0 || nseq > static_cast<std::uint32_t>(kMaxSeqs) || nseq > r.left() / 4) {
    fail("number of sequences " + std::to_string(nseq) + " is out of range (accepted: 1 .. " +
         std::to_string(std::min<std::size_t>(kMaxSeqs, r.left() / 4)) + " for this header length)");
  }
  s.context_lens.resize(nseq);
  for (auto& c : s.context_lens) c = r.i32("context length");
  for (std::string* str : {&source, &revision}) {
    const std::uint32_t n = r.u32("string length");
    if (n > kMaxTextBytes || n > r.left()) {
      fail("string length " + std::to_string(n) + " is out of range (accepted: at most " +
           std::to_string(std::min<std::size_t>(kMaxTextBytes, r.left())) + ")");
    }
    const std::uint8_t* p = r.take(n, "string");
    str->assign(reinterpret_cast<const char*>(p), n);
  }
  if (is_fp8(s.kv_dtype)) {
    s.k_scale = r.f32("k_scale");
    s.v_scale = r.f32("v_scale");
  }
}

void validate_run_header(Stage stage, const ProblemSpec& s, const std::string& source,
                         const std::string& revision) {
  if (!is_valid(stage)) {
    fail("stage value " + std::to_string(static_cast<int>(stage)) + " is not a stage (accepted: 1 .. 8)");
  }
  const auto dt = static_cast<unsigned>(s.dtype);
  if (dt > 2) fail("dtype value " + std::to_string(dt) + " is not a dtype (accepted: 0=fp32, 1=fp16, 2=bf16)");
  check_range(s.num_heads, 1, kMaxHeads, "num_heads");
  check_range(s.num_kv_heads, 1, s.num_heads, "num_kv_heads");
  check_range(static_cast<long long>(s.context_lens.size()), 1, kMaxSeqs, "number of sequences");
  int min_ctx = kMaxContextLen;
  for (std::size_t i = 0; i < s.context_lens.size(); ++i) {
    check_range(s.context_lens[i], 1, kMaxContextLen, "context_lens[" + std::to_string(i) + "]");
    min_ctx = std::min(min_ctx, s.context_lens[i]);
  }
  check_range(s.partition_size, 0, kMaxContextLen, "partition_size");
  check_range(s.shared_prefix_len, 0, min_ctx, "shared_prefix_len");
  check_range(s.extra_q_stride, 0, kMaxExtraStride, "extra_q_stride");
  check_range(s.spare_blocks, 0, kMaxSpareBlocks, "spare_blocks");
  if (!std::isfinite(s.logit_spread)) fail("logit_spread is not finite");
  // The format's own bounds above; the problem's rules (supported head,
  // block and thread counts, GQA divisibility, partition and prefix
  // multiples) are ProblemSpec::validate's, once. Every field may be in range
  // and the problem still too large for any reader to build (the viewer builds
  // its reference values and host model from the header): validate refuses
  // that too, naming the limit, before anything is allocated from it.
  try {
    s.validate();
  } catch (const ProblemError& e) {
    fail(e.what());
  }
  check_text(source, "source");
  check_text(revision, "revision");
}

// ---- the frame ----------------------------------------------------------------

std::vector<std::uint8_t> frame(const FileKind& kind, const std::vector<std::uint8_t>& header, std::uint64_t count,
                                const std::function<void(Writer&)>& write_records) {
  Writer w;
  w.buf.reserve(kPrefixBytes + header.size() + 16 + count * kind.record_bytes);
  w.buf.resize(8);
  std::memcpy(w.buf.data(), kind.magic, 8);
  w.u32(kind.version);
  w.u32(kByteOrderMark);
  w.u32(kind.record_bytes);
  w.u32(static_cast<std::uint32_t>(header.size()));
  w.bytes(header.data(), header.size());
  w.u64(count);
  write_records(w);
  w.u64(fnv1a64(w.buf.data(), w.buf.size()));
  return std::move(w.buf);
}

Unframed unframe(const FileKind& kind, const std::uint8_t* bytes, std::size_t size, bool verify_checksum) {
  const std::string magic(kind.magic, 8);
  const std::string noun = kind.noun;
  const std::string record = kind.record;
  if (bytes == nullptr || size == 0) fail("empty: 0 bytes (a " + noun + " starts with \"" + magic + "\")");
  Reader r(bytes, size);
  const std::size_t magic_avail = std::min<std::size_t>(size, 8);
  if (std::memcmp(bytes, kind.magic, magic_avail) != 0) {
    fail("not a pa-lab " + noun + " (bad magic at byte offset 0; expected the file to start with \"" + magic + "\")");
  }
  const std::size_t smallest = kPrefixBytes + kind.min_header_bytes + 16;
  if (size < smallest) {
    fail("truncated: " + std::to_string(size) + " bytes is shorter than the smallest possible " + noun + " (" +
         std::to_string(smallest) + " bytes)");
  }
  r.take(8, "magic");
  const std::uint32_t version = r.u32("version");
  if (version != kind.version) {
    fail("unsupported version " + std::to_string(version) + " (accepted: " + std::to_string(kind.version) +
         (kind.version_note ? kind.version_note(version) : std::string()) + ") at byte offset 8");
  }
  const std::uint32_t bom = r.u32("byte order mark");
  if (bom != kByteOrderMark) {
    fail("bad byte order mark at byte offset 12 (the file is not little-endian or is corrupt)");
  }
  const std::uint32_t rec = r.u32("record size");
  if (rec != kind.record_bytes) {
    fail(record + " record size " + std::to_string(rec) + " at byte offset 16 (accepted: " +
         std::to_string(kind.record_bytes) + ")");
  }
  const std::uint32_t header_len = r.u32("header length");
  if (header_len < kind.min_header_bytes || header_len > kMaxHeaderBytes) {
    fail("header length " + std::to_string(header_len) + " at byte offset 20 is out of range (accepted: " +
         std::to_string(kind.min_header_bytes) + " .. " + std::to_string(kMaxHeaderBytes) + ")");
  }
  // Header, then the count and the checksum must still fit.
  if (static_cast<std::uint64_t>(header_len) + 16 > r.left()) {
    fail("truncated: header length " + std::to_string(header_len) + " at byte offset 20 but only " +
         std::to_string(r.left()) + " bytes follow");
  }
  const std::size_t after_header = r.pos() + header_len;
  Reader header(r.take(header_len, "header"), header_len);
  // The count is bounded by the bytes present before anything is allocated.
  const std::string count_name = record + " count";
  const std::string count_at = " at byte offset " + std::to_string(r.pos());
  const std::uint64_t count = r.u64(count_name.c_str());
  const std::uint64_t room = (size - after_header - 16) / kind.record_bytes;
  if (count > room) {
    fail("truncated or corrupt: " + count_name + " " + std::to_string(count) + count_at +
         " but the file holds at most " + std::to_string(room) + " " + record + "s");
  }
  const std::uint64_t expect = after_header + 8 + count * kind.record_bytes + 8;
  if (expect != size) {
    fail("size mismatch: " + std::to_string(count) + " " + record + "s need a file of " + std::to_string(expect) +
         " bytes, found " + std::to_string(size) + " (trailing bytes or corrupt count)");
  }
  if (verify_checksum) {
    Reader kr(bytes + size - 8, 8);
    const std::uint64_t stored = kr.u64("checksum");
    if (stored != fnv1a64(bytes, size - 8)) {
      fail("checksum mismatch at byte offset " + std::to_string(size - 8) + ": the file is corrupt");
    }
  }
  const auto record_part = static_cast<std::size_t>(count * kind.record_bytes);
  return {header, Reader(r.take(record_part, "records"), record_part), count};
}

// ---- files ----------------------------------------------------------------------

std::uint64_t check_input_file(const FileKind& kind, const std::string& path) {
  const std::string noun = kind.noun;
  std::error_code ec;
  const auto st = std::filesystem::status(path, ec);
  if (ec || !std::filesystem::exists(st)) {
    fail("cannot open " + noun + " '" + path + "': " + (ec ? ec.message() : "no such file"));
  }
  if (std::filesystem::is_directory(st)) fail(noun + " file '" + path + "' is a directory");
  if (!std::filesystem::is_regular_file(st)) {
    fail(noun + " file '" + path + "' is not a regular file (a device, pipe or socket); accepted: a " +
         kind.extension + " file");
  }
  const std::uint64_t size = std::filesystem::file_size(path, ec);
  if (ec) fail("cannot read the size of " + noun + " '" + path + "': " + ec.message());
  if (size > kind.max_file_bytes) {
    fail(noun + " file '" + path + "' is " + std::to_string(size) + " bytes; accepted: at most " +
         std::to_string(kind.max_file_bytes) + " (" + kind.max_bytes_name + ", about " +
         std::to_string(kind.max_file_bytes / kind.record_bytes) + " " + kind.record + "s)");
  }
  return size;
}

std::vector<std::uint8_t> read_input_file(const FileKind& kind, const std::string& path) {
  check_input_file(kind, path);
  const std::string noun = kind.noun;
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) fail("cannot open " + noun + " '" + path + "': " + std::strerror(errno));
  std::vector<std::uint8_t> buf;
  std::uint8_t chunk[1 << 16];
  for (;;) {
    const std::size_t n = std::fread(chunk, 1, sizeof chunk, f);
    buf.insert(buf.end(), chunk, chunk + n);
    if (buf.size() > kind.max_file_bytes) {
      std::fclose(f);
      fail(noun + " file '" + path + "' grew past " + std::to_string(kind.max_file_bytes) +
           " bytes while being read");
    }
    if (n < sizeof chunk) break;
  }
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) fail("cannot read " + noun + " '" + path + "'");
  return buf;
}

void write_file(const std::string& path, const std::vector<std::uint8_t>& bytes) {
  core::write_file_atomically(path, std::string_view(reinterpret_cast<const char*>(bytes.data()), bytes.size()));
}

}  // namespace pa::trace::binary
