// The lab's kernels as PyTorch operators, in namespace pa_lab.
//
// How an operator reaches PyTorch, in three parts (lesson 8, "Calling the
// kernels from PyTorch"):
//   1. The SCHEMA (TORCH_LIBRARY below): the operator's name, argument types
//      and which arguments it writes. `Tensor(a!) out` says the op mutates
//      `out` in place (alias set a): the compiler (torch.compile) must keep
//      that write, and nothing is returned, as in vLLM's paged_attention_v1.
//   2. A KERNEL per dispatch key (TORCH_LIBRARY_IMPL): here only CUDA. A call
//      with CUDA tensors is dispatched to the functions in this file; a call
//      with tensors on another device finds no kernel and raises.
//   3. A FAKE implementation (python/pa_lab/_fake.py): what the op does to
//      shapes without running, so torch.compile can trace through it.
// Every CUDA kernel runs on PyTorch's current stream of the tensors' device
// (c10::cuda::getCurrentCUDAStream), so it orders with the model's other
// work and is captured by CUDA graphs; scratch memory comes from PyTorch's
// caching allocator (at::empty), never cudaMalloc.
#include <ATen/ATen.h>
#include <c10/cuda/CUDAGuard.h>
#include <c10/cuda/CUDAStream.h>
#include <torch/library.h>

#include <optional>
#include <stdexcept>
#include <string>

#include "checks.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/cascade.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/stage_launch.hpp"

namespace pa::torch_ops {

namespace {

using kernels::Stage;

Stage stage_of(const std::string& s) {
  if (s == "v1") return Stage::warp_reduce;
  if (s == "v2") return Stage::v2_partition;
  if (s == "optimized") return Stage::optimized;
  TORCH_CHECK_VALUE(false, "stage '", s, "'; accepted: 'v1' (stage 5), 'v2' (stage 6), 'optimized' (stage 8)");
  return Stage::optimized;  // unreachable
}

// Runs a planned launch into `out` on PyTorch's current stream, with a
// workspace from PyTorch's allocator. The kernels' own refusals (a
// configuration not built, a context longer than v1's shared memory holds)
// come back as ValueError with the kernels' message.
void launch_into(const at::Tensor& out, const kernels::StageArgs& a, Stage stage, const kernels::RunOptions& opt,
                 float* lse = nullptr) {
  const c10::cuda::CUDAGuard guard(out.device());
  try {
    if (stage == Stage::warp_reduce) {
      // One attribute query, not gpu_info(): the whole property struct,
      // queried on every call, costs the host far more than the launch.
      const int limit =
          kernels::v1_max_context(a.dtype, a.head_size, a.num_threads, kernels::smem_optin_bytes());
      TORCH_CHECK_VALUE(a.max_context_len <= limit, "max_seq_len ", a.max_context_len,
                        ": stage 'v1' holds a whole context's logits in shared memory, at most ", limit,
                        " tokens here; accepted: 'v2' or 'optimized' for longer contexts");
    }
    const kernels::StageLaunch launch(a, stage, opt);
    at::Tensor ws;
    if (launch.workspace_bytes() > 0)
      ws = at::empty({static_cast<int64_t>(launch.workspace_bytes())}, out.options().dtype(at::kByte));
    void* stream = c10::cuda::getCurrentCUDAStream(out.device().index()).stream();
    launch.launch({out.data_ptr(), lse, ws.defined() ? ws.data_ptr() : nullptr, /*workspace_fresh=*/true}, stream);
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

// paged_attention's inputs checked and turned into the launch shape, for
// stage `s` (shared by paged_attention and describe_plan).
kernels::StageArgs paged_stage_args(const at::Tensor& out, const PagedInputs& in, Stage s,
                                    const std::optional<at::Tensor>& seq_lens_cpu) {
  kernels::StageArgs a = stage_args_of(out, in);
  a.host_context_lens = host_seq_lens_of(seq_lens_cpu, a);
  TORCH_CHECK_TYPE(s != Stage::optimized || a.dtype != DType::f32,
                   "query: dtype torch.float32; accepted by stage 'optimized' (tensor cores): torch.float16, "
                   "torch.bfloat16 ('v1' and 'v2' take float32)");
  // Stage 8's instances, for the cache's element type too (an fp8 cache: blocks
  // of 16 or 32 tokens only, where a V row of a block fills whole 16-byte copies).
  TORCH_CHECK_VALUE(s != Stage::optimized || optimized_supported(a.dtype, a.head_size, a.block_size, a.kv_dtype),
                    "stage 'optimized': no kernel for query dtype ", dtype_name(a.dtype), ", kv_cache_dtype '",
                    in.kv.name, "', head size ", a.head_size, ", block_size ", a.block_size,
                    " in this build; accepted: ", optimized_supported_list(),
                    "; or stage 'v1' / 'v2' where pa_lab.built says this build has them");
  return a;
}

void paged_attention(at::Tensor& out, const at::Tensor& query, const at::Tensor& key_cache,
                     const at::Tensor& value_cache, int64_t num_kv_heads, double scale, const at::Tensor& block_tables,
                     const at::Tensor& seq_lens, int64_t block_size, int64_t max_seq_len,
                     const std::optional<at::Tensor>& alibi_slopes, const std::string& kv_cache_dtype,
                     const at::Tensor& k_scale, const at::Tensor& v_scale, const std::string& stage,
                     const std::optional<at::Tensor>& seq_lens_cpu) {
  const Stage s = stage_of(stage);
  const KvCacheFormat kv = kv_cache_format_of(kv_cache_dtype, k_scale, v_scale);
  kernels::StageArgs a = paged_stage_args(
      out, {query, key_cache, value_cache, block_tables, seq_lens, num_kv_heads, scale, block_size, max_seq_len, kv},
      s, seq_lens_cpu);
  a.alibi_slopes = alibi_slopes_of(alibi_slopes, a, query.device());
  launch_into(out, a, s, {});
}

// What paged_attention would run for these inputs, in words (StageLaunch's
// plan: stage 6's partitions, stage 8's split, head tiles and occupancy; empty
// for v1), planned exactly as the op plans, without launching. Lets a caller
// see what the host copy of seq_lens changes.
std::string describe_plan(const at::Tensor& query, const at::Tensor& key_cache, const at::Tensor& value_cache,
                          int64_t num_kv_heads, const at::Tensor& block_tables, const at::Tensor& seq_lens,
                          int64_t block_size, int64_t max_seq_len, const std::string& kv_cache_dtype,
                          const at::Tensor& k_scale, const at::Tensor& v_scale, const std::string& stage,
                          const std::optional<at::Tensor>& seq_lens_cpu) {
  const Stage s = stage_of(stage);
  const KvCacheFormat kv = kv_cache_format_of(kv_cache_dtype, k_scale, v_scale);
  TORCH_CHECK_VALUE(query.dim() == 3, "query: ", query.dim(),
                    " dimensions; accepted: 3, [num_seqs, num_heads, head_size]");
  const at::Tensor out = at::empty(query.sizes(), query.options());  // shape only: never written
  const kernels::StageArgs a = paged_stage_args(
      out, {query, key_cache, value_cache, block_tables, seq_lens, num_kv_heads, /*scale=*/1.0, block_size,
            max_seq_len, kv},
      s, seq_lens_cpu);
  const c10::cuda::CUDAGuard guard(query.device());
  try {
    return kernels::StageLaunch(a, s, {}).plan();
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
  return {};  // unreachable
}

void cascade_attention(at::Tensor& out, const at::Tensor& query, const at::Tensor& key_cache,
                       const at::Tensor& value_cache, int64_t num_kv_heads, double scale,
                       const at::Tensor& block_tables, const at::Tensor& seq_lens, int64_t block_size,
                       int64_t max_seq_len, int64_t shared_prefix_len,
                       const std::optional<at::Tensor>& alibi_slopes,
                       const std::optional<at::Tensor>& seq_lens_cpu) {
  // Stage 7 reads caches in the query's dtype only (the kernels' cascade
  // refuses fp8; it has no kv_cache_dtype argument to ask for one).
  for (const auto* c : {&key_cache, &value_cache})
    TORCH_CHECK_TYPE(!is_fp8_storage(*c), c == &key_cache ? "key_cache" : "value_cache", ": dtype ",
                     c->scalar_type(), " (an fp8 cache?); accepted by cascade_attention: the query's dtype, ",
                     query.scalar_type(), " (the cascade, stage 7, takes no fp8 cache; paged_attention's stages "
                     "'v1', 'v2' and 'optimized' do, with kv_cache_dtype 'fp8', 'fp8_e4m3' or 'fp8_e5m2')");
  kernels::StageArgs a = stage_args_of(out, {query, key_cache, value_cache, block_tables, seq_lens, num_kv_heads,
                                             scale, block_size, max_seq_len, KvCacheFormat{}});
  a.host_context_lens = host_seq_lens_of(seq_lens_cpu, a);  // the suffix's planner: each sequence's own tokens
  a.alibi_slopes = alibi_slopes_of(alibi_slopes, a, query.device());
  TORCH_CHECK_VALUE(shared_prefix_len >= 0 && shared_prefix_len % block_size == 0 && shared_prefix_len <= max_seq_len,
                    "shared_prefix_len ", shared_prefix_len, "; accepted: 0 to max_seq_len (", max_seq_len,
                    "), a multiple of block_size (", block_size, ")");
  kernels::RunOptions opt;
  opt.shared_prefix_len = static_cast<int>(shared_prefix_len);
  // Every part on PyTorch's stream: the cascade's own side streams (which run
  // the suffix beside the prefix) belong to the process, not to PyTorch's
  // stream of this device, and a CUDA graph or another thread would not see them.
  opt.cascade.streams = 0;
  launch_into(out, a, Stage::cascade_merge, opt);
}

void merge_attn_states(at::Tensor& output, const std::optional<at::Tensor>& output_lse,
                       const at::Tensor& prefix_output, const at::Tensor& prefix_lse,
                       const at::Tensor& suffix_output, const at::Tensor& suffix_lse) {
  TORCH_CHECK_VALUE(output.is_cuda(), "output: a CUDA tensor is needed (got one on ", output.device(), ")");
  const DType dt = dtype_of(output, "output");
  TORCH_CHECK_VALUE(output.dim() == 3, "output: ", output.dim(),
                    " dimensions; accepted: 3, [num_seqs, num_heads, head_size]");
  TORCH_CHECK_VALUE(output.is_contiguous(), "output: not contiguous; accepted: a contiguous tensor");
  check_aligned(output, "output");
  const int64_t ns = output.size(0), nh = output.size(1), hs = output.size(2);
  TORCH_CHECK_VALUE(ns >= 1 && nh >= 1 && hs >= 4 && hs % 4 == 0, "output: sizes [", ns, ", ", nh, ", ", hs,
                    "]; accepted: at least one sequence and head, head_size a positive multiple of 4");
  const at::Device dev = output.device();
  check_f32_state(prefix_output, "prefix_output", {ns, nh, hs}, dev);
  check_f32_state(suffix_output, "suffix_output", {ns, nh, hs}, dev);
  check_f32_state(prefix_lse, "prefix_lse", {ns, nh}, dev);
  check_f32_state(suffix_lse, "suffix_lse", {ns, nh}, dev);
  if (output_lse) check_f32_state(*output_lse, "output_lse", {ns, nh}, dev);
  kernels::MergeArgs m;
  m.a_out = prefix_output.data_ptr<float>();
  m.a_lse = prefix_lse.data_ptr<float>();
  m.b_out = suffix_output.data_ptr<float>();
  m.b_lse = suffix_lse.data_ptr<float>();
  m.out = output.data_ptr();
  m.out_dtype = dt;
  m.out_lse = output_lse ? output_lse->data_ptr<float>() : nullptr;
  m.num_seqs = static_cast<int>(ns);
  m.num_heads = static_cast<int>(nh);
  m.head_size = static_cast<int>(hs);
  m.stg = StateGeometry{m.num_heads, m.head_size};
  const c10::cuda::CUDAGuard guard(dev);
  try {
    kernels::launch_merge_states(m, c10::cuda::getCurrentCUDAStream(dev.index()).stream());
  } catch (const std::invalid_argument& e) {
    TORCH_CHECK_VALUE(false, e.what());
  }
}

// The one tolerance per dtype (pa/core/tolerance.hpp), for Python's tests:
// [abs, rel] of an output stored in `dtype`, and the absolute tolerance of an lse.
std::vector<double> tolerance(const std::string& dtype) {
  const std::optional<DType> t = dtype_from_name(dtype);
  TORCH_CHECK_VALUE(t.has_value(), "dtype '", dtype, "'; accepted: fp32, fp16, bf16");
  const Tolerance out = tolerance_for(*t), lse = lse_tolerance(*t);
  return {out.abs, out.rel, lse.abs};
}

// Whether this build holds a stage's kernel for (dtype, head size, block size,
// cache dtype; kv_cache_dtype as paged_attention takes it).
bool built(const std::string& stage, const std::string& dtype, int64_t head_size, int64_t block_size,
           const std::string& kv_cache_dtype) {
  const Stage s = stage_of(stage);
  const std::optional<DType> t = dtype_from_name(dtype);
  TORCH_CHECK_VALUE(t.has_value(), "dtype '", dtype, "'; accepted: fp32, fp16, bf16");
  const std::optional<KvDType> kv = kv_dtype_from_name(kv_cache_dtype);
  TORCH_CHECK_VALUE(kv.has_value(), "kv_cache_dtype '", kv_cache_dtype, "'; accepted: ", kKvDTypeNamesText);
  if (s == Stage::optimized)
    return optimized_supported(*t, static_cast<int>(head_size), static_cast<int>(block_size), *kv);
  const kernels::KernelKey key{*t, static_cast<int>(head_size), static_cast<int>(block_size), 128, *kv};
  for (const kernels::KernelKey& k : s == Stage::v2_partition ? kernels::v2_built_configs() : kernels::built_configs())
    if (k == key) return true;
  return false;
}

}  // namespace
}  // namespace pa::torch_ops

namespace ops = pa::torch_ops;

TORCH_LIBRARY(pa_lab, m) {
  m.def(
      "paged_attention(Tensor(a!) out, Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, "
      "float scale, Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, Tensor? alibi_slopes, "
      "str kv_cache_dtype, Tensor k_scale, Tensor v_scale, str stage=\"optimized\", Tensor? seq_lens_cpu=None) -> ()");
  m.def(
      "cascade_attention(Tensor(a!) out, Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, "
      "float scale, Tensor block_tables, Tensor seq_lens, int block_size, int max_seq_len, "
      "int shared_prefix_len, Tensor? alibi_slopes=None, Tensor? seq_lens_cpu=None) -> ()");
  m.def(
      "describe_plan(Tensor query, Tensor key_cache, Tensor value_cache, int num_kv_heads, Tensor block_tables, "
      "Tensor seq_lens, int block_size, int max_seq_len, str kv_cache_dtype, Tensor k_scale, Tensor v_scale, "
      "str stage=\"optimized\", Tensor? seq_lens_cpu=None) -> str");
  m.def(
      "merge_attn_states(Tensor(a!) output, Tensor(b!)? output_lse, Tensor prefix_output, Tensor prefix_lse, "
      "Tensor suffix_output, Tensor suffix_lse) -> ()");
  // Plain functions of the build (no tensors): registered without a dispatch key.
  m.def("tolerance(str dtype) -> float[]", &ops::tolerance);
  m.def("built(str stage, str dtype, int head_size, int block_size, str kv_cache_dtype=\"auto\") -> bool",
        &ops::built);
}

TORCH_LIBRARY_IMPL(pa_lab, CUDA, m) {
  m.impl("paged_attention", &ops::paged_attention);
  m.impl("cascade_attention", &ops::cascade_attention);
  m.impl("merge_attn_states", &ops::merge_attn_states);
  m.impl("describe_plan", &ops::describe_plan);
}
