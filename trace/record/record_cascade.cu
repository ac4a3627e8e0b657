// Recording stage 7 (cascade_merge): the cascade as launch_cascade runs it
// (07_cascade_merge.cu), with the recording tracer on every kernel that has
// trace hooks, and the same relabelling as the host model
// (trace/src/host_model_cascade.cpp):
//   prefix_len == 0: stage 6's kernels over the whole context into the output;
//   prefix_len > 0:  1. the prefix state by launch_cascade itself (prefix_only,
//                       untraced: cascade_prefix_kernel has no hooks yet), then
//                       the prefix's stage-6 kernels rerun traced on the same
//                       buffers (fp32: partition kernel + reduce; fp16/bf16: the
//                       reduce of the prefix kernel's chunks): they rewrite the
//                       same values, so the data flow is the cascade's;
//                    2. the suffix state (stage 6's kernels over [prefix, context));
//                    3. the merge.
// EXTENSION POINT: once cascade_prefix_kernel takes a Tracer, launch it here
// with the prefix tracer `tp` (partition_base = kPrefixBlockBase) instead of
// through launch_cascade(prefix_only).
#include <cuda_runtime.h>

#include <stdexcept>
#include <string>

#include "07_cascade_merge.cuh"
#include "pa/kernels/recording_tracer.cuh"
#include "pa/kernels/cascade.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/host_model.hpp"
#include "record_dispatch.hpp"

namespace pa::trace::detail {

bool record_cascade_prefix(const PagedProblem&, const kernels::StageArgs&, const kernels::CascadePlan&, void*,
                           const kernels::RecordingTracer&);  // record_cascade_prefix.cu

namespace {

struct Mem {
  void* p = nullptr;
  explicit Mem(std::size_t bytes) {
    if (bytes) PA_CUDA_CHECK(cudaMalloc(&p, bytes));
  }
  ~Mem() {
    if (p) cudaFree(p);
  }
  Mem(const Mem&) = delete;
  Mem& operator=(const Mem&) = delete;
  template <class T>
  T* at(std::size_t off) const {
    return reinterpret_cast<T*>(static_cast<char*>(p) + off);
  }
};

bool launch_v2_traced(const ProblemSpec& s, const kernels::V2Args& a, const kernels::RecordingTracer& t) {
  return record_launch_v2(s.dtype, s.head_size, s.block_size, a, t, nullptr);
}

// v2 as one stage-6 pass of the cascade over `range`, its partitions in the
// workspace at the plan's offsets for that pass.
kernels::V2Args v2_pass(const kernels::V2Args& v2, const Mem& ws, TokenRange range, int partitions,
                        std::size_t part_out, std::size_t part_max, std::size_t part_sum) {
  kernels::V2Args v = v2;
  v.range = range;
  v.max_partitions = partitions;
  v.part_out = ws.at<float>(part_out);
  v.part_max = ws.at<float>(part_max);
  v.part_sum = ws.at<float>(part_sum);
  v.pg = PartitionGeometry{v.stg.num_heads, partitions, v.stg.head_size};
  return v;
}

template <class F>
void by_dtype(DType t, F&& f) {
  switch (t) {
    case DType::f32: f(float{}); break;
    case DType::f16: f(__half{}); break;
    case DType::bf16: f(__nv_bfloat16{}); break;
  }
}

}  // namespace

// One recording run of the cascade; every launch's events go to t's buffer.
bool record_cascade_launch(const PagedProblem& p, const kernels::StageArgs& args, const kernels::RecordingTracer& t) {
  const ProblemSpec& s = p.spec;
  const CascadeTracePlan tp = cascade_trace_plan(s);
  kernels::StageArgs base = args;
  base.partition_size = s.partition_size;
  const kernels::CascadePlan plan = kernels::plan_cascade(base, tp.prefix_len, tp.chunk_len);
  if (plan.prefix_partitions != tp.prefix_partitions || plan.suffix_partitions != tp.suffix_partitions ||
      (tp.tensor_cores && plan.chunk_len != tp.chunk_len)) {
    throw std::logic_error("record_stage(cascade_merge): the cascade's plan (" + plan.describe() +
                           ") differs from cascade_trace_plan (prefix partitions " +
                           std::to_string(tp.prefix_partitions) + ", suffix partitions " +
                           std::to_string(tp.suffix_partitions) + ", chunk " + std::to_string(tp.chunk_len) + ")");
  }
  const std::size_t rows = static_cast<std::size_t>(p.num_seqs()) * s.num_heads;
  Mem ws(plan.workspace_bytes), lse(rows * sizeof(float));
  PA_CUDA_CHECK(cudaMemset(ws.p, 0xFF, plan.workspace_bytes));
  const StateGeometry stg{s.num_heads, s.head_size};

  kernels::V2Args v2;
  v2.base = base;
  v2.base.out = nullptr;
  v2.stg = stg;
  if (tp.prefix_len == 0) {  // launch_cascade: plain V2 into the output, with lse
    kernels::V2Args whole = v2_pass(v2, ws, TokenRange{0, -1}, plan.suffix_partitions, plan.suffix_part_out,
                                    plan.suffix_part_max, plan.suffix_part_sum);
    whole.base.out = args.out;
    whole.lse = lse.at<float>(0);
    const bool ok = launch_v2_traced(s, whole, t);
    PA_CUDA_CHECK(cudaDeviceSynchronize());
    return ok;
  }

  // 1. Prefix state: fp16/bf16: cascade_prefix_kernel traced (record_cascade_prefix.cu);
  // fp32: the cascade's own launches. Then the traced rerun below.
  if (!record_cascade_prefix(p, base, plan, ws.p, t))
    kernels::launch_cascade(base, plan, ws.p, lse.at<float>(0), nullptr, kernels::CascadeParts::prefix_only);
  PA_CUDA_CHECK(cudaDeviceSynchronize());
  kernels::V2Args pre = v2_pass(v2, ws, TokenRange{0, plan.prefix_len}, plan.prefix_partitions, plan.prefix_part_out,
                                plan.prefix_part_max, plan.prefix_part_sum);
  pre.out_state = ws.at<float>(plan.prefix_state_out);
  pre.lse = ws.at<float>(plan.prefix_state_lse);
  kernels::RecordingTracer tpre = t;
  tpre.partition_base = kPrefixBlockBase;
  tpre.reduce_label = kPrefixReduceBlock;
  tpre.state_out_as = Tensor::prefix_out;
  tpre.state_lse_as = Tensor::prefix_lse;
  bool ok = true;
  if (plan.tensor_cores) {
    pre.base.partition_size = plan.chunk_len;  // as launch_cascade: chunks, never a direct final state
    pre.single_partition_direct = false;
    by_dtype(s.dtype, [&](auto tag) { kernels::launch_v2_reduce<decltype(tag)>(pre, nullptr, tpre); });
  } else {
    ok = launch_v2_traced(s, pre, tpre);
  }
  // 2. Suffix state.
  kernels::V2Args suf = v2_pass(v2, ws, TokenRange{plan.prefix_len, -1}, plan.suffix_partitions, plan.suffix_part_out,
                                plan.suffix_part_max, plan.suffix_part_sum);
  suf.out_state = ws.at<float>(plan.suffix_state_out);
  suf.lse = ws.at<float>(plan.suffix_state_lse);
  kernels::RecordingTracer tsuf = t;
  tsuf.state_out_as = Tensor::suffix_out;
  tsuf.state_lse_as = Tensor::suffix_lse;
  ok = launch_v2_traced(s, suf, tsuf) && ok;
  // 3. Merge into the output (dtype) and the lse.
  kernels::MergeArgs m;
  m.a_out = pre.out_state;
  m.a_lse = pre.lse;
  m.b_out = suf.out_state;
  m.b_lse = suf.lse;
  m.out = args.out;
  m.out_dtype = s.dtype;
  m.out_lse = lse.at<float>(0);
  m.num_seqs = p.num_seqs();
  m.num_heads = s.num_heads;
  m.head_size = s.head_size;
  m.stg = stg;
  by_dtype(s.dtype, [&](auto tag) { kernels::launch_merge_kernel<decltype(tag)>(m, nullptr, t); });
  PA_CUDA_CHECK(cudaDeviceSynchronize());  // before the buffers above are freed
  return ok;
}

}  // namespace pa::trace::detail
