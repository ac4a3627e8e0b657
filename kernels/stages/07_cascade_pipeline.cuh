// Stage 7's pipeline, host side: which kernels the cascade launches, on which
// streams, in which order, and where in the workspace each reads and writes.
// It is written once, as a template over the launchers of its parts, so that
// the same pipeline runs with the normal kernels (launch_cascade,
// 07_cascade_merge.cu) and with the timing instances of a timeline
// (trace/record/timeline_cascade.cu): what a timeline shows is this launch
// sequence, not a copy of it.
//
// The launchers (a struct L with these members; each checks and launches one
// part on the stream it is given):
//   L.prefix(const StageArgs&, const CascadePlan&, const PrefixArgs&, cudaStream_t)
//                                                     the tensor-core prefix kernel (plan.prefix_kernel)
//   L.prefix_reduce(const V2Args&, cudaStream_t)      the reduce of its chunks
//   L.suffix(const OptimizedArgs&, const OptimizedPlan&, void* ws, cudaStream_t)   stage 8 over the suffix
//   L.v2(const V2Args&, cudaStream_t)                 V2 (and its reduce): the suffix or the fp32 prefix
//   L.merge(const MergeArgs&, cudaStream_t)           the merge of the two states
#pragma once
#include <cuda_runtime.h>

#include <cstddef>

#include "07_cascade_host.cuh"
#include "07_cascade_prefix_mma.cuh"
#include "host_checks.hpp"
#include "pa/kernels/cascade.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/optimized_args.hpp"

namespace pa::kernels::cascade_pipeline {

using detail::at;  // the workspace's buffers, by offset (07_cascade_host.cuh)

// The cascade's side streams and their fork/join events: created once per
// process on first use (the lab runs on one device, from one host thread:
// concurrent cascades from several threads would share them) and kept.
// `stream` (lowest priority) runs the suffix; `high` (highest priority) the
// prefix when plan.streams == 2, so the block scheduler places the long prefix
// blocks first and fills the SMs' remaining room with suffix blocks.
struct SideStream {
  cudaStream_t stream = nullptr, high = nullptr;
  cudaEvent_t fork = nullptr, join = nullptr, join_high = nullptr;
  SideStream() {
    int least = 0, greatest = 0;
    PA_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    PA_CUDA_CHECK(cudaStreamCreateWithPriority(&stream, cudaStreamNonBlocking, least));
    PA_CUDA_CHECK(cudaStreamCreateWithPriority(&high, cudaStreamNonBlocking, greatest));
    PA_CUDA_CHECK(cudaEventCreateWithFlags(&fork, cudaEventDisableTiming));
    PA_CUDA_CHECK(cudaEventCreateWithFlags(&join, cudaEventDisableTiming));
    PA_CUDA_CHECK(cudaEventCreateWithFlags(&join_high, cudaEventDisableTiming));
  }
};
inline SideStream& side_stream() {  // inline: one instance for every translation unit
  static SideStream s;
  return s;
}

template <class Launchers>
CascadeStates run(const StageArgs& b, const CascadePlan& p, void* ws, float* lse_out, void* stream,
                  CascadeParts parts, Launchers& L) {
  detail::check_base(b);
  if (b.out == nullptr) detail::bad("cascade: null output pointer");
  if (ws == nullptr && p.workspace_bytes > 0) detail::bad("cascade: null workspace (plan.workspace_bytes needed)");
  const auto s = static_cast<cudaStream_t>(stream);
  const StateGeometry stg{b.num_heads, b.head_size};

  StageArgs inputs = b;  // the sub-launches write states, never base.out
  inputs.out = nullptr;
  // V2 over `range` with `n_parts` partitions in the workspace's buffers at
  // out/max/sum (the suffix's, or the prefix's chunks).
  auto v2_over = [&](TokenRange range, int n_parts, std::size_t out, std::size_t max, std::size_t sum) {
    V2Args a;
    a.base = inputs;
    a.stg = stg;
    a.range = range;
    a.max_partitions = n_parts;
    a.part_out = at<float>(ws, out);
    a.part_max = at<float>(ws, max);
    a.part_sum = at<float>(ws, sum);
    a.pg = {b.num_heads, n_parts, b.head_size};
    return a;
  };

  if (p.prefix_len == 0) {  // nothing shared: plain V2 straight into the output
    V2Args v2 = v2_over({0, -1}, p.suffix_partitions, p.suffix_part_out, p.suffix_part_max, p.suffix_part_sum);
    v2.base.out = b.out;
    v2.lse = lse_out;
    L.v2(v2, s);
    return {};
  }

  CascadeStates st;
  st.prefix_out = at<float>(ws, p.prefix_state_out);
  st.prefix_lse = at<float>(ws, p.prefix_state_lse);
  st.suffix_out = at<float>(ws, p.suffix_state_out);
  st.suffix_lse = at<float>(ws, p.suffix_state_lse);

  // 3. Suffix states over tokens [prefix_len, context): stage 8 (p.suffix),
  // else V2; on the side
  // stream (forked from `stream`, joined before the merge). With
  // plan.streams == 2 the prefix goes first, on the high-priority stream.
  const bool fork = parts == CascadeParts::all && p.streams > 0;
  const bool high = fork && p.streams == 2;
  SideStream* side = fork ? &side_stream() : nullptr;
  if (fork) {
    PA_CUDA_CHECK(cudaEventRecord(side->fork, s));
    PA_CUDA_CHECK(cudaStreamWaitEvent(side->stream, side->fork, 0));
    if (high) PA_CUDA_CHECK(cudaStreamWaitEvent(side->high, side->fork, 0));
  }
  const cudaStream_t prefix_stream = high ? side->high : s;
  auto launch_suffix = [&] {
    const cudaStream_t ss = fork ? side->stream : s;
    if (p.suffix != CascadePlan::Suffix::v2) {  // stage 8 over [prefix_len, context), writing the state
      OptimizedArgs o = optimized_args(b, p.prefix_len);
      o.out = nullptr;  // the state instead
      o.state_out = at<float>(ws, p.suffix_state_out);
      o.state_lse = at<float>(ws, p.suffix_state_lse);
      void* ows = p.suffix_opt.workspace_bytes > 0 ? at<char>(ws, p.suffix_opt_ws) : nullptr;
      // Stage 8 leaves its arrival counters at zero, but this workspace is the
      // caller's: zero them (a few bytes) before every launch.
      if (ows != nullptr)
        PA_CUDA_CHECK(cudaMemsetAsync(static_cast<char*>(ows) + p.suffix_opt.counter_offset, 0,
                                      p.suffix_opt.workspace_bytes - p.suffix_opt.counter_offset, ss));
      L.suffix(o, p.suffix_opt, ows, ss);
      if (fork) PA_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
      return;
    }
    V2Args suf =
        v2_over({p.prefix_len, -1}, p.suffix_partitions, p.suffix_part_out, p.suffix_part_max, p.suffix_part_sum);
    suf.out_state = at<float>(ws, p.suffix_state_out);
    suf.lse = at<float>(ws, p.suffix_state_lse);
    L.v2(suf, ss);
    if (fork) PA_CUDA_CHECK(cudaEventRecord(side->join, side->stream));
  };
  if (parts != CascadeParts::prefix_only && !high) launch_suffix();
  if (parts == CascadeParts::suffix_only) return st;

  // 1-2. Prefix state: chunks (or fp32 partitions), then their reduce, on `stream`.
  V2Args pre =
      v2_over({0, p.prefix_len}, p.prefix_partitions, p.prefix_part_out, p.prefix_part_max, p.prefix_part_sum);
  pre.out_state = at<float>(ws, p.prefix_state_out);
  pre.lse = at<float>(ws, p.prefix_state_lse);
  if (p.tensor_cores) {
    L.prefix(b, p, prefix_args(b, p, ws), prefix_stream);
    pre.base.partition_size = p.chunk_len;  // the reduce counts chunks with the chunk length
    pre.single_partition_direct = false;    // the prefix kernel never writes a final state
    if (high) launch_suffix();  // after the prefix kernel: its blocks are placed first
    L.prefix_reduce(pre, prefix_stream);
  } else {
    if (high) launch_suffix();
    L.v2(pre, prefix_stream);
  }

  if (parts == CascadeParts::prefix_only) return st;
  if (fork) PA_CUDA_CHECK(cudaStreamWaitEvent(s, side->join, 0));
  if (high) {
    PA_CUDA_CHECK(cudaEventRecord(side->join_high, side->high));
    PA_CUDA_CHECK(cudaStreamWaitEvent(s, side->join_high, 0));
  }

  // 4. Merge.
  MergeArgs m;
  m.a_out = st.prefix_out;
  m.a_lse = st.prefix_lse;
  m.b_out = st.suffix_out;
  m.b_lse = st.suffix_lse;
  m.out = b.out;
  m.out_dtype = b.dtype;
  m.out_lse = lse_out;
  m.num_seqs = b.num_seqs;
  m.num_heads = b.num_heads;
  m.head_size = b.head_size;
  m.stg = stg;
  L.merge(m, s);
  return st;
}

}  // namespace pa::kernels::cascade_pipeline
