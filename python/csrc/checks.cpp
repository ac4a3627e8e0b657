// The PyTorch ops' argument checks (checks.hpp).
#include "checks.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iterator>
#include <limits>
#include <sstream>

#include "pa/index/config.hpp"

namespace pa::torch_ops {

namespace {

std::string sizes_text(at::IntArrayRef s) {
  std::ostringstream o;
  o << "[";
  for (std::size_t i = 0; i < s.size(); ++i) o << (i ? ", " : "") << s[i];
  o << "]";
  return o.str();
}

template <class Arr>
std::string list_text(const Arr& a) {
  std::ostringstream o;
  for (std::size_t i = 0; i < std::size(a); ++i) o << (i ? ", " : "") << a[i];
  return o.str();
}

template <class Arr>
bool contains(const Arr& a, int64_t v) {
  return std::find(std::begin(a), std::end(a), v) != std::end(a);
}

void check_cuda_on(const at::Tensor& t, const char* name, const at::Device& device) {
  TORCH_CHECK_VALUE(t.is_cuda(), name, ": a CUDA tensor is needed (got one on ", t.device(), ")");
  TORCH_CHECK_VALUE(t.device() == device, name, ": on ", t.device(), "; accepted: the query's device, ", device);
}

void check_sizes(const at::Tensor& t, const char* name, at::IntArrayRef sizes, const char* layout) {
  TORCH_CHECK_VALUE(t.sizes() == sizes, name, ": sizes ", sizes_text(t.sizes()), "; accepted: ",
                    sizes_text(sizes), " (", layout, ")");
}

void check_int32_vector_like(const at::Tensor& t, const char* name, const at::Device& device) {
  check_cuda_on(t, name, device);
  TORCH_CHECK_TYPE(t.scalar_type() == at::kInt, name, ": dtype ", t.scalar_type(), "; accepted: torch.int32");
  TORCH_CHECK_VALUE(t.is_contiguous(), name, ": not contiguous; accepted: a contiguous tensor");
}

int to_int(int64_t v, const char* name) {
  TORCH_CHECK_VALUE(v >= 0 && v <= std::numeric_limits<int>::max(), name, " ", v,
                    "; accepted: 0 to ", std::numeric_limits<int>::max());
  return static_cast<int>(v);
}

}  // namespace

void check_aligned(const at::Tensor& t, const char* name) {
  TORCH_CHECK_VALUE(reinterpret_cast<std::uintptr_t>(t.data_ptr()) % 16 == 0, name,
                    ": data at an address not a multiple of 16 bytes (a view at an offset?); accepted: 16-byte "
                    "aligned data (a fresh tensor is)");
}

DType dtype_of(const at::Tensor& t, const char* name) {
  switch (t.scalar_type()) {
    case at::kHalf: return DType::f16;
    case at::kBFloat16: return DType::bf16;
    case at::kFloat: return DType::f32;
    default:
      TORCH_CHECK_TYPE(false, name, ": dtype ", t.scalar_type(),
                       "; accepted: torch.float16, torch.bfloat16, torch.float32");
  }
  return DType::f32;  // unreachable
}

void check_f32_state(const at::Tensor& t, const char* name, at::IntArrayRef sizes, const at::Device& device) {
  check_cuda_on(t, name, device);
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, name, ": dtype ", t.scalar_type(),
                   "; accepted: torch.float32 (attention states are kept in float32)");
  check_sizes(t, name, sizes, "an attention state");
  TORCH_CHECK_VALUE(t.is_contiguous(), name, ": not contiguous; accepted: a contiguous tensor");
  check_aligned(t, name);
}

const float* alibi_slopes_of(const std::optional<at::Tensor>& alibi_slopes, const kernels::StageArgs& a,
                             const at::Device& device) {
  if (!alibi_slopes.has_value()) return nullptr;
  const at::Tensor& t = *alibi_slopes;
  check_cuda_on(t, "alibi_slopes", device);
  TORCH_CHECK_TYPE(t.scalar_type() == at::kFloat, "alibi_slopes: dtype ", t.scalar_type(),
                   "; accepted: torch.float32, one slope per query head");
  check_sizes(t, "alibi_slopes", {a.num_heads}, "[num_heads]");
  TORCH_CHECK_VALUE(t.is_contiguous(), "alibi_slopes: not contiguous; accepted: a contiguous tensor");
  return t.data_ptr<float>();
}

const int* host_seq_lens_of(const std::optional<at::Tensor>& seq_lens_cpu, const kernels::StageArgs& a) {
  if (!seq_lens_cpu.has_value()) return nullptr;
  const at::Tensor& t = *seq_lens_cpu;
  TORCH_CHECK_VALUE(t.device().is_cpu(), "seq_lens_cpu: on ", t.device(),
                    "; accepted: a CPU tensor (the host's copy of seq_lens, read while planning)");
  TORCH_CHECK_TYPE(t.scalar_type() == at::kInt, "seq_lens_cpu: dtype ", t.scalar_type(), "; accepted: torch.int32");
  check_sizes(t, "seq_lens_cpu", {a.num_seqs}, "[num_seqs], the host's copy of seq_lens");
  TORCH_CHECK_VALUE(t.is_contiguous(), "seq_lens_cpu: not contiguous; accepted: a contiguous tensor");
  const int* lens = t.data_ptr<int>();
  for (int i = 0; i < a.num_seqs; ++i)
    TORCH_CHECK_VALUE(lens[i] >= 1 && lens[i] <= a.max_context_len, "seq_lens_cpu[", i, "] ", lens[i],
                      "; accepted: 1 to max_seq_len (", a.max_context_len, ")");
  return lens;
}

bool is_fp8_storage(const at::Tensor& t) {
  const at::ScalarType st = t.scalar_type();
  return st == at::ScalarType::Byte || st == at::ScalarType::Float8_e4m3fn || st == at::ScalarType::Float8_e5m2;
}

KvCacheFormat kv_cache_format_of(const std::string& kv_cache_dtype, const at::Tensor& k_scale,
                                 const at::Tensor& v_scale) {
  const std::optional<KvDType> kv = kv_dtype_from_name(kv_cache_dtype);
  TORCH_CHECK_VALUE(kv.has_value(), "kv_cache_dtype '", kv_cache_dtype, "'; accepted: ", kKvDTypeNamesText);
  KvCacheFormat f;
  f.kv_dtype = *kv;
  f.name = kv_cache_dtype;
  const char* use = is_fp8(*kv) ? "element = float(code) * scale" : "unused with kv_cache_dtype 'auto'";
  for (const auto* s : {&k_scale, &v_scale}) {
    const char* name = s == &k_scale ? "k_scale" : "v_scale";
    TORCH_CHECK_TYPE(s->scalar_type() == at::kFloat, name, ": dtype ", s->scalar_type(),
                     "; accepted: a one-element torch.float32 tensor (", use, ")");
    TORCH_CHECK_VALUE(s->numel() == 1, name, ": ", s->numel(),
                      " elements; accepted: a one-element torch.float32 tensor (", use, ")");
    if (!is_fp8(*kv)) continue;  // unused: not read (a CUDA tensor's read would synchronize)
    // The kernels take the scale as a launch argument: read on the host (a
    // device synchronization when the tensor is on a GPU).
    const float v = s->item().toFloat();
    TORCH_CHECK_VALUE(std::isfinite(v) && v > 0, name, " ", v, "; accepted: finite and > 0 (kv_cache_dtype '",
                      kv_cache_dtype, "': element = float(code) * ", name, ")");
    (s == &k_scale ? f.k_scale : f.v_scale) = v;
  }
  return f;
}

kernels::StageArgs stage_args_of(const at::Tensor& out, const PagedInputs& in) {
  const at::Tensor& q = in.query;
  TORCH_CHECK_VALUE(q.is_cuda(), "query: a CUDA tensor is needed (got one on ", q.device(), ")");
  const at::Device device = q.device();
  const DType dt = dtype_of(q, "query");
  TORCH_CHECK_VALUE(q.dim() == 3, "query: ", q.dim(),
                    " dimensions; accepted: 3, [num_seqs, num_heads, head_size]");
  const int64_t num_seqs = q.size(0), num_heads = q.size(1), head_size = q.size(2);
  TORCH_CHECK_VALUE(num_seqs >= 1 && num_heads >= 1, "query: sizes ", sizes_text(q.sizes()),
                    "; accepted: at least one sequence and one head");
  TORCH_CHECK_VALUE(contains(kSupportedHeadSizes, head_size), "query: head size ", head_size,
                    "; accepted: ", list_text(kSupportedHeadSizes));
  TORCH_CHECK_VALUE(q.stride(2) == 1 && q.stride(1) == head_size && q.stride(0) >= num_heads * head_size,
                    "query: strides ", sizes_text(q.strides()), "; accepted: [row stride >= ",
                    num_heads * head_size, ", ", head_size, ", 1] (heads and dimensions dense)");
  TORCH_CHECK_VALUE(q.stride(0) * q.element_size() % 16 == 0, "query: row stride ", q.stride(0),
                    " elements; accepted: a multiple of 16 bytes (", 16 / q.element_size(), " elements)");
  check_aligned(q, "query");
  TORCH_CHECK_VALUE(contains(kSupportedBlockSizes, in.block_size), "block_size ", in.block_size, "; accepted: ",
                    list_text(kSupportedBlockSizes));
  TORCH_CHECK_VALUE(in.num_kv_heads >= 1 && num_heads % in.num_kv_heads == 0, "num_kv_heads ", in.num_kv_heads,
                    "; accepted: a divisor of the query's ", num_heads, " heads (1 = MQA)");
  TORCH_CHECK_VALUE(std::isfinite(in.scale) && in.scale > 0, "scale ", in.scale, "; accepted: finite and > 0");

  const at::Tensor& k = in.key_cache;
  const at::Tensor& v = in.value_cache;
  const KvDType kv = in.kv.kv_dtype;
  check_cuda_on(k, "key_cache", device);
  check_cuda_on(v, "value_cache", device);
  if (is_fp8(kv)) {
    // One byte per element: vLLM's torch.uint8 codes, or the format's own dtype.
    TORCH_CHECK_TYPE(dt != DType::f32, "query: dtype ", q.scalar_type(), "; accepted with kv_cache_dtype '",
                     in.kv.name, "': torch.float16, torch.bfloat16 (an fp8 cache takes fp16 or bf16 queries)");
    const at::ScalarType own =
        kv == KvDType::fp8_e5m2 ? at::ScalarType::Float8_e5m2 : at::ScalarType::Float8_e4m3fn;
    const char* own_name = kv == KvDType::fp8_e5m2 ? "torch.float8_e5m2" : "torch.float8_e4m3fn";
    for (const auto* c : {&k, &v}) {
      const char* name = c == &k ? "key_cache" : "value_cache";
      TORCH_CHECK_TYPE(c->scalar_type() == at::ScalarType::Byte || c->scalar_type() == own, name, ": dtype ",
                       c->scalar_type(), "; accepted with kv_cache_dtype '", in.kv.name, "': torch.uint8 or ",
                       own_name, " (one byte per element)");
    }
  } else {
    const char* hint = is_fp8_storage(k) || is_fp8_storage(v)
                           ? " (an fp8 cache needs kv_cache_dtype 'fp8', 'fp8_e4m3' or 'fp8_e5m2')"
                           : "";
    TORCH_CHECK_TYPE(k.scalar_type() == q.scalar_type(), "key_cache: dtype ", k.scalar_type(),
                     "; accepted: the query's, ", q.scalar_type(), hint);
    TORCH_CHECK_TYPE(v.scalar_type() == q.scalar_type(), "value_cache: dtype ", v.scalar_type(),
                     "; accepted: the query's, ", q.scalar_type(), hint);
  }
  const int64_t x = 16 / kv_elem_bytes(dt, kv);
  TORCH_CHECK_VALUE(k.dim() == 5, "key_cache: ", k.dim(),
                    " dimensions; accepted: 5, [num_blocks, num_kv_heads, head_size / x, block_size, x]");
  const int64_t num_blocks = k.size(0);
  TORCH_CHECK_VALUE(num_blocks >= 1, "key_cache: no blocks; accepted: at least one");
  const std::string k_layout = std::string("[num_blocks, num_kv_heads, head_size / x, block_size, x], x = ") +
                               std::to_string(x) + " (16 bytes of " +
                               (is_fp8(kv) ? std::string("one-byte ") + kv_dtype_name(kv) + " codes" :
                                             std::string(dtype_name(dt)) + " elements") + ")";
  check_sizes(k, "key_cache", {num_blocks, in.num_kv_heads, head_size / x, in.block_size, x}, k_layout.c_str());
  check_sizes(v, "value_cache", {num_blocks, in.num_kv_heads, head_size, in.block_size},
              "[num_blocks, num_kv_heads, head_size, block_size]");
  TORCH_CHECK_VALUE(k.is_contiguous(), "key_cache: not contiguous; accepted: a contiguous tensor");
  TORCH_CHECK_VALUE(v.is_contiguous(), "value_cache: not contiguous; accepted: a contiguous tensor");
  check_aligned(k, "key_cache");
  check_aligned(v, "value_cache");

  check_int32_vector_like(in.block_tables, "block_tables", device);
  check_int32_vector_like(in.seq_lens, "seq_lens", device);
  TORCH_CHECK_VALUE(in.block_tables.dim() == 2 && in.block_tables.size(0) == num_seqs &&
                        in.block_tables.size(1) >= 1,
                    "block_tables: sizes ", sizes_text(in.block_tables.sizes()), "; accepted: [", num_seqs,
                    ", max_blocks_per_seq >= 1]");
  check_sizes(in.seq_lens, "seq_lens", {num_seqs}, "[num_seqs]");
  const int64_t max_blocks = in.block_tables.size(1);
  TORCH_CHECK_VALUE(in.max_seq_len >= 1 && in.max_seq_len <= max_blocks * in.block_size, "max_seq_len ",
                    in.max_seq_len, "; accepted: 1 to max_blocks_per_seq x block_size = ", max_blocks * in.block_size);

  TORCH_CHECK_VALUE(out.is_cuda() && out.device() == device, "out: on ", out.device(),
                    "; accepted: the query's device, ", device);
  TORCH_CHECK_TYPE(out.scalar_type() == q.scalar_type(), "out: dtype ", out.scalar_type(),
                   "; accepted: the query's, ", q.scalar_type());
  check_sizes(out, "out", {num_seqs, num_heads, head_size}, "[num_seqs, num_heads, head_size]");
  TORCH_CHECK_VALUE(out.is_contiguous(), "out: not contiguous; accepted: a contiguous tensor");
  check_aligned(out, "out");

  kernels::StageArgs a;
  a.dtype = dt;
  a.kv_dtype = kv;
  a.k_scale = in.kv.k_scale;
  a.v_scale = in.kv.v_scale;
  a.head_size = static_cast<int>(head_size);
  a.block_size = static_cast<int>(in.block_size);
  a.num_threads = 128;
  a.num_seqs = to_int(num_seqs, "num_seqs");
  a.num_heads = to_int(num_heads, "num_heads");
  a.num_kv_heads = static_cast<int>(in.num_kv_heads);
  a.max_context_len = to_int(in.max_seq_len, "max_seq_len");
  a.partition_size = kDefaultPartitionSize;
  a.scale = static_cast<float>(in.scale);
  a.q = q.data_ptr();
  a.k_cache = k.data_ptr();
  a.v_cache = v.data_ptr();
  a.block_tables = in.block_tables.data_ptr<int>();
  a.context_lens = in.seq_lens.data_ptr<int>();
  a.qg = QueryGeometry{a.num_seqs, a.num_heads, a.head_size, to_int(q.stride(0), "query row stride")};
  a.cg = CacheGeometry{to_int(num_blocks, "num_blocks"), a.num_kv_heads, a.head_size, a.block_size,
                       static_cast<int>(x)};
  a.btg = BlockTableGeometry{to_int(max_blocks, "max_blocks_per_seq")};
  a.out = out.data_ptr();
  return a;
}

}  // namespace pa::torch_ops
