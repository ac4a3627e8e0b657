// ProblemSpec: validation (messages name the bad value and what is accepted),
// derived sizes, and the host view of the kernel configurations.
#include <algorithm>
#include <cstdio>
#include <unistd.h>
#include <cmath>
#include <sstream>
#include <stdexcept>
#include <string>

#include "pa/core/config_dispatch.hpp"
#include "pa/core/problem.hpp"

namespace pa {
namespace {

template <class Arr>
std::string list_text(const Arr& arr) {
  std::string s = "{";
  bool first = true;
  for (int v : arr) {
    if (!first) s += ", ";
    s += std::to_string(v);
    first = false;
  }
  return s + "}";
}

template <class Arr>
bool contains(const Arr& arr, int v) {
  return std::find(std::begin(arr), std::end(arr), v) != std::end(arr);
}

[[noreturn]] void bad(const char* field, const std::string& msg) { throw ProblemError(field, "invalid problem: " + msg); }

std::int64_t physical_blocks(const ProblemSpec& s) {
  std::int64_t blocks = s.spare_blocks;
  for (int c : s.context_lens) blocks += ceil_div(c, s.block_size);
  return blocks;
}

std::string gib_text(double bytes) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%.1f GiB", bytes / double(1ull << 30));
  return buf;
}

}  // namespace

std::string supported_configs_text() {
  return "supported: dtype {fp32, fp16, bf16} (fp16 and bf16 also with an fp8_e4m3 or fp8_e5m2 KV cache) x head size " + list_text(kSupportedHeadSizes) +
         " x block size " + list_text(kSupportedBlockSizes) + " x threads " + list_text(kSupportedThreadCounts);
}

int ProblemSpec::max_context_len() const {
  int m = 0;
  for (int c : context_lens) m = std::max(m, c);
  return m;
}

int ProblemSpec::max_blocks_per_seq() const {
  return block_size > 0 ? ceil_div(max_context_len(), block_size) : 0;
}

float ProblemSpec::scale() const { return 1.0f / std::sqrt(static_cast<float>(head_size)); }

int ProblemSpec::max_partitions() const { return num_partitions(max_context_len(), partition_size); }

void ProblemSpec::validate_shape() const {
  if (dtype != DType::f32 && dtype != DType::f16 && dtype != DType::bf16) {
    bad("dtype", "dtype " + std::to_string(int(dtype)) + " is unknown; accepted: fp32, fp16, bf16");
  }
  if (kv_dtype != KvDType::same && kv_dtype != KvDType::fp8_e4m3 && kv_dtype != KvDType::fp8_e5m2) {
    bad("kv_dtype", "kv_dtype " + std::to_string(int(kv_dtype)) + " is unknown; accepted: " + kKvDTypeNamesText);
  }
  if (is_fp8(kv_dtype) && dtype == DType::f32) {
    bad("kv_dtype", std::string("kv_dtype ") + kv_dtype_name(kv_dtype) +
                        " with dtype fp32; accepted: an fp8 cache with fp16 or bf16 queries");
  }
  if (static_cast<unsigned>(kv_layout) > static_cast<unsigned>(KvLayout::hnd)) {
    bad("kv_layout", "kv_layout " + std::to_string(int(kv_layout)) + " is unknown; accepted: " + kKvLayoutNamesText);
  }
  if (page_table != PageTableForm::padded && page_table != PageTableForm::csr) {
    bad("page_table", "page_table " + std::to_string(int(page_table)) + " is unknown; accepted: " + kPageTableNamesText);
  }
  // The token-row kernels copy 16-bit elements (x = 8 per 16 bytes).
  if (kv_layout_token_rows(kv_layout) && (dtype == DType::f32 || is_fp8(kv_dtype))) {
    bad("kv_layout", std::string("kv_layout ") + kv_layout_name(kv_layout) + " with " +
                         (dtype == DType::f32 ? std::string("dtype fp32") : std::string("kv_dtype ") + kv_dtype_name(kv_dtype)) +
                         "; accepted: nhd and hnd with a 16-bit cache (fp16 or bf16, kv_dtype auto), vllm with any");
  }
  for (const auto& [name, v] : {std::pair{"k_scale", k_scale}, std::pair{"v_scale", v_scale}}) {
    if (!(std::isfinite(v) && v >= 0.0f)) {
      bad(name, std::string(name) + " " + std::to_string(v) +
                    "; accepted: finite and > 0, or 0 for the scale chosen from the data");
    }
  }
  if (!contains(kSupportedHeadSizes, head_size)) {
    bad("head_size", "head_size " + std::to_string(head_size) + " is not supported; accepted: " +
        list_text(kSupportedHeadSizes));
  }
  if (!contains(kSupportedBlockSizes, block_size)) {
    bad("block_size", "block_size " + std::to_string(block_size) + " is not supported; accepted: " +
        list_text(kSupportedBlockSizes));
  }
  if (!contains(kSupportedThreadCounts, num_threads)) {
    bad("num_threads", "num_threads " + std::to_string(num_threads) + " is not supported; accepted: " +
        list_text(kSupportedThreadCounts));
  }
  if (num_heads < 1) bad("num_heads", "num_heads " + std::to_string(num_heads) + " must be >= 1");
  if (num_kv_heads < 1) bad("num_kv_heads", "num_kv_heads " + std::to_string(num_kv_heads) + " must be >= 1");
  if (num_heads % num_kv_heads != 0) {
    bad("num_kv_heads", "num_heads " + std::to_string(num_heads) + " is not a multiple of num_kv_heads " +
        std::to_string(num_kv_heads) + "; accepted: num_kv_heads dividing num_heads (1 = MQA)");
  }
  if (context_lens.empty()) bad("context_lens", "no sequences: context_lens is empty; accepted: one length >= 1 per sequence");
  for (std::size_t i = 0; i < context_lens.size(); ++i) {
    if (context_lens[i] < 1) {
      bad("context_lens", "context_lens[" + std::to_string(i) + "] = " + std::to_string(context_lens[i]) +
          "; accepted: every context length >= 1");
    }
  }
  if (partition_size < 0 || partition_size % block_size != 0) {
    bad("partition_size", "partition_size " + std::to_string(partition_size) + " is not a multiple of block_size " +
        std::to_string(block_size) + "; accepted: 0 (one partition) or a positive multiple of block_size");
  }
  if (shared_prefix_len < 0 || shared_prefix_len % block_size != 0) {
    bad("shared_prefix_len", "shared_prefix_len " + std::to_string(shared_prefix_len) + " is not a multiple of block_size " +
        std::to_string(block_size) + "; accepted: 0 or a positive multiple of block_size");
  }
  for (std::size_t i = 0; i < context_lens.size(); ++i) {
    if (context_lens[i] < shared_prefix_len) {
      bad("shared_prefix_len", "shared_prefix_len " + std::to_string(shared_prefix_len) + " exceeds context_lens[" +
          std::to_string(i) + "] = " + std::to_string(context_lens[i]) +
          "; accepted: a prefix no longer than every context");
    }
  }
  if (extra_q_stride < 0) bad("extra_q_stride", "extra_q_stride " + std::to_string(extra_q_stride) + " must be >= 0");
  if (spare_blocks < 0) bad("spare_blocks", "spare_blocks " + std::to_string(spare_blocks) + " must be >= 0");
  if (!(std::isfinite(logit_spread) && logit_spread > 0.0f)) {
    bad("logit_spread", "logit_spread " + std::to_string(logit_spread) + "; accepted: a finite value > 0");
  }
  // Element counts must fit the int32 indices the kernels use for blocks.
  const std::int64_t blocks = physical_blocks(*this);
  if (blocks > (std::int64_t{1} << 31) - 1) {
    bad("context_lens", "the pool needs " + std::to_string(blocks) + " blocks; accepted: < 2^31");
  }
}

void ProblemSpec::validate() const {
  validate_shape();
  const std::int64_t blocks = physical_blocks(*this);
  const double need = host_bytes();
  const std::int64_t limit = host_memory_limit_bytes();
  if (need > static_cast<double>(limit)) {
    bad("host_memory", "the problem needs about " + gib_text(need) + " of host memory (" +
                           std::to_string(blocks) + " KV blocks of " + std::to_string(num_kv_heads) + " KV heads x " +
                           std::to_string(head_size) + " x " + std::to_string(block_size) + ", " +
                           std::to_string(num_seqs()) + " sequences); accepted: at most " + gib_text(double(limit)) +
                           " (half of this machine's memory): fewer or shorter sequences, or fewer KV heads");
  }
}

double ProblemSpec::host_bytes() const {
  const double per_elem = 4.0 + dtype_bytes(dtype);  // float copy + the dtype's bytes
  const double per_kv_elem = 4.0 + kv_elem_bytes(dtype, kv_dtype);
  const double kv = 2.0 * static_cast<double>(physical_blocks(*this)) * num_kv_heads * head_size * block_size;
  const double q = static_cast<double>(num_seqs()) * (static_cast<double>(num_heads) * head_size + extra_q_stride);
  const double tables = static_cast<double>(num_seqs()) * max_blocks_per_seq() * sizeof(int);
  const double out = static_cast<double>(num_seqs()) * num_heads * head_size * 8.0;  // float64 reference output
  return kv * per_kv_elem + q * per_elem + tables + out;
}

std::int64_t ProblemSpec::kv_bytes(bool shared_prefix_once) const {
  std::int64_t tokens = 0;
  for (int c : context_lens) tokens += c;
  if (shared_prefix_once && num_seqs() > 1) tokens -= static_cast<std::int64_t>(num_seqs() - 1) * shared_prefix_len;
  return tokens * 2 * num_kv_heads * head_size * kv_elem_bytes(dtype, kv_dtype);
}

std::int64_t host_memory_limit_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES), page = ::sysconf(_SC_PAGESIZE);
  if (pages <= 0 || page <= 0) return std::int64_t{16} << 30;
  return static_cast<std::int64_t>(pages) * page / 2;
}

std::string head_sizes_text() { return list_text(kSupportedHeadSizes); }
std::string block_sizes_text() { return list_text(kSupportedBlockSizes); }
std::string thread_counts_text() { return list_text(kSupportedThreadCounts); }

std::string ProblemSpec::describe() const {
  std::ostringstream os;
  os << dtype_name(dtype) << " head=" << head_size << " block=" << block_size << " threads=" << num_threads
     << " heads=" << num_heads << "/" << num_kv_heads << " seqs=" << num_seqs() << " ctx=";
  if (context_lens.size() <= 8) {
    os << "[";
    for (std::size_t i = 0; i < context_lens.size(); ++i) os << (i ? "," : "") << context_lens[i];
    os << "]";
  } else {
    const auto [mn, mx] = std::minmax_element(context_lens.begin(), context_lens.end());
    os << "[" << *mn << ".." << *mx << "]";
  }
  os << " part=" << partition_size;
  if (shared_prefix_len > 0) os << " prefix=" << shared_prefix_len;
  if (extra_q_stride > 0) os << " q_pad=" << extra_q_stride;
  if (alibi) os << " alibi";
  if (is_fp8(kv_dtype)) {
    os << " kv=" << kv_dtype_name(kv_dtype);
    if (k_scale > 0.0f) os << " k_scale=" << k_scale;
    if (v_scale > 0.0f) os << " v_scale=" << v_scale;
  }
  os << " seed=" << seed;
  return os.str();
}

std::optional<std::string> problem_flag_error(const ProblemSpec& spec,
                                              const std::map<std::string, std::string>& flag_of) {
  try {
    spec.validate();
  } catch (const ProblemError& e) {
    const auto it = flag_of.find(e.field);
    return (it != flag_of.end() ? it->second : e.field) + ": " + e.what();
  }
  return std::nullopt;
}

namespace detail {
void throw_unsupported_config(DType dtype, KvDType kv, int head_size, int block_size, int num_threads,
                              bool token_rows) {
  throw std::invalid_argument(std::string("unsupported kernel configuration: dtype ") + dtype_name(dtype) +
                              ", kv cache " + kv_dtype_name(kv) + ", head size " + std::to_string(head_size) +
                              ", block size " + std::to_string(block_size) + ", threads " +
                              std::to_string(num_threads) +
                              (token_rows ? ", token-row layout (nhd, hnd: fp16 and bf16 caches only)" : "") + "; " +
                              supported_configs_text());
}
}  // namespace detail

RuntimeConfig make_runtime_config(DType dtype, int head_size, int block_size, int num_threads, KvDType kv,
                                  bool token_rows) {
  RuntimeConfig rc;
  with_kernel_config(dtype, kv, head_size, block_size, num_threads, token_rows,
                     [&](auto cfg) { rc = runtime_config_of<decltype(cfg)>(); });
  return rc;
}

RuntimeConfig make_runtime_config(const ProblemSpec& spec) {
  return make_runtime_config(spec.dtype, spec.head_size, spec.block_size, spec.num_threads, spec.kv_dtype,
                             kv_layout_token_rows(spec.kv_layout));
}

}  // namespace pa
