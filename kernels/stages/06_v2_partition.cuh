// Stage 6, v2_partition: split-KV. The context (or a token range of it) is cut
// into partitions of partition_size tokens (512 by default, any multiple of
// the block size); each partition is one thread block, so a few long
// sequences still fill the GPU and no block's logits outgrow shared memory.
//
// What it adds to stage 5: grid z = partition. The partition kernel runs the
// SAME step functions as v1 (q_and_logits = q_to_smem + qk_logits,
// softmax_times_v = softmax_block + lv_accumulate + lv_reduce_rows, then
// warp_tree_reduce, from stages 1-5) on the partition's PartitionRange
// (partition_range_in, pa/index/cascade.hpp) instead of v1_logits' whole
// context, and writes the partition's output (normalized within the
// partition), its max logit and its exp sum (PartitionGeometry, layout.hpp)
// with the row owners' store of v1 (store_owned_rows). The reduce kernel
// (one thread block per (head, sequence)) then combines the partitions:
//   M = max_p max_p,  w_p = exp(max_p - M) * sum_p,
//   out = sum_p w_p out_p / sum_p w_p,  lse = M + log(sum_p w_p)  (natural log).
//
// Thread mapping: the partition kernel is v1's (ThreadMapping, mapping.hpp)
// on the partition's blocks. The reduce kernel: threads stride over the
// partitions for the max and the weights (kept in shared memory), then
// thread d of the block accumulates output dims d, d + blockDim, ... over all
// partitions (consecutive threads read consecutive floats: coalesced).
//
// Edge cases (documented contract):
// - Partitions past a sequence's range (grid z covers the longest sequence)
//   exit at once and write nothing; the reduce only reads a sequence's own
//   num_partitions_in() partitions, so they can never inject NaN.
// - A sequence whose range is ONE partition (single_partition_direct) writes
//   its final output (and lse) straight from the partition kernel; the reduce
//   kernel returns at once for it. So a batch of short contexts costs one
//   near-empty extra launch, not a second pass over the data.
// - An empty range (the cascade suffix of a sequence that is all prefix) gets
//   the empty state from the reduce kernel: out 0, lse -inf.
// - A partition's max/sum are never -inf/0 (a partition holds >= 1 token);
//   the reduce still gives such entries weight 0.
#pragma once
#include <cuda_runtime.h>

#include <cmath>

#include "05_warp_reduce.cuh"
#include "pa/index/cascade.hpp"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/v2_partition_args.hpp"

namespace pa::kernels {

// Stage 6 partition kernel: grid (head, seq, partition). Timed (PA_TIME_*:
// nothing without a timing tracer), a working partition's warps run q_to_smem,
// qk, softmax, lv, warp_reduce, partition_store; the reduce kernel's warps one
// partition_reduce span (kernel role reduce).
template <class Cfg, class Tracer>
__global__ void __launch_bounds__(Cfg::kNumThreads) stage6_v2_partition_kernel(V2Args a, Tracer tracer) {
  PA_TIME_START(tracer);
  const auto c = ThreadCtx<Cfg>::make(trace::Stage::v2_partition, a.base.num_heads, a.base.num_kv_heads);
  const SeqPages pages = load_seq_pages<Cfg>(a.base, c, tracer);
  const int ctx = pages.context_len;
  const int n_parts = num_partitions_in(a.range, ctx, a.base.partition_size);
  if (c.partition >= n_parts) return;  // past this sequence's range: empty, writes nothing
  // LESSON-BEGIN(v2_partition.range)
  const PartitionRange r = partition_range_in(a.range, ctx, Cfg::kBlockSize, a.base.partition_size, c.partition);
  // LESSON-END(v2_partition.range)
  auto sm = shared_v1<Cfg>();
  q_and_logits<Cfg>(a.base, r, pages, c, sm, tracer);  // stages 1-2 (02_qk.cuh)
  RowAcc<Cfg> acc;
  const SoftmaxStats<> st = softmax_times_v<Cfg>(a.base, r, pages, c, sm, acc, tracer);  // stages 3-4 (04_lv.cuh)
  warp_tree_reduce<Cfg>(acc, c, sm, tracer);  // stage 5
  PA_TIME_PHASE(tracer, trace::Phase::warp_reduce, -1);

  // LESSON-BEGIN(v2_partition.partition_store)
  if (n_parts == 1 && a.single_partition_direct) {
    // The partition is the whole range: this is already the final answer.
    if (a.base.out != nullptr)
      store_output_row<Cfg>(static_cast<Elem<Cfg>*>(a.base.out), a.base.qg, acc, c, tracer);
    if (a.out_state != nullptr)
      store_owned_rows<Cfg>(c.warp == 0, a.out_state, [&](int row) { return a.stg.out_offset(c.seq, c.head, row); },
                            Step::partition_store, trace::Tensor::state_out, acc, c, tracer);
    if (a.lse != nullptr && c.tid == 0) {
      const std::int64_t off = a.stg.lse_offset(c.seq, c.head);
      a.lse[off] = st.lse();
      PA_TRACE(tracer, ev(c.tc, Step::partition_store, Op::global_store, trace::Tensor::state_lse)
                           .at(off * 4, 4).val(a.lse[off]));
    }
    PA_TIME_PHASE(tracer, trace::Phase::partition_store, -1);
    return;
  }
  // Warp 0's row owners hold the partition's rows (normalized by its own sum).
  store_owned_rows<Cfg>(c.warp == 0, a.part_out,
                        [&](int row) { return a.pg.out_offset(c.seq, c.head, c.partition, row); },
                        Step::partition_store, trace::Tensor::part_out, acc, c, tracer);
  if (c.tid == 0) {
    const std::int64_t off = a.pg.stat_offset(c.seq, c.head, c.partition);
    a.part_max[off] = st.max;
    PA_TRACE(tracer, ev(c.tc, Step::partition_store, Op::global_store, trace::Tensor::part_max)
                         .at(off * 4, 4).val(st.max));
    a.part_sum[off] = st.sum;
    PA_TRACE(tracer, ev(c.tc, Step::partition_store, Op::global_store, trace::Tensor::part_sum)
                         .at(off * 4, 4).val(st.sum));
  }
  // LESSON-END(v2_partition.partition_store)
  PA_TIME_PHASE(tracer, trace::Phase::partition_store, -1);
}

// Block-wide float reduction for the reduce kernel (any blockDim multiple of 32, <= 1024).
// Events (step `step`, every thread, TraceCtx tc, iter -1): 5 x shuffle
// (src_lane = lane ^ mask, masks 16..1); barrier; lane 0: shared_store red_scratch (red_scratch_byte(warp),
// value = the warp's result); barrier; lanes < num warps: shared_load
// red_scratch (red_scratch_byte(lane), value); 5 x shuffle (masks 16..1;
// the last one's value = the block's result).
template <bool IS_MAX, class Tracer>
__device__ __forceinline__ float reduce_block_any(float v, float* scratch, const TraceCtx& tc, Step step,
                                                  Tracer& tracer) {
  const int warp = threadIdx.x / kWarpSize, lane = threadIdx.x % kWarpSize;
#pragma unroll
  for (int mask = kWarpSize / 2; mask >= 1; mask /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, mask);
    v = IS_MAX ? fmaxf(v, o) : v + o;
    PA_TRACE(tracer, ev(tc, step, Op::shuffle, Tensor::none).src(lane ^ mask));
  }
  const int nw = blockDim.x / kWarpSize;
  __syncthreads();  // scratch may still be read from a previous call
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  if (lane == 0) {
    scratch[warp] = v;
    PA_TRACE(tracer, ev(tc, step, Op::shared_store, Tensor::red_scratch).at(red_scratch_byte(warp), 4).val(v));
  }
  __syncthreads();
  PA_TRACE_BARRIER(tracer, barrier_event(tc));
  v = lane < nw ? scratch[lane] : (IS_MAX ? -INFINITY : 0.f);
  if (lane < nw) {
    PA_TRACE(tracer, ev(tc, step, Op::shared_load, Tensor::red_scratch).at(red_scratch_byte(lane), 4).val(v));
  }
#pragma unroll
  for (int mask = kWarpSize / 2; mask >= 1; mask /= 2) {
    const float o = __shfl_xor_sync(0xffffffffu, v, mask);
    v = IS_MAX ? fmaxf(v, o) : v + o;
    PA_TRACE(tracer, ev(tc, step, Op::shuffle, Tensor::none).src(lane ^ mask).val(mask == 1 ? v : trace_nan()));
  }
  return v;  // every lane of every warp
}

// Stage 6 reduce kernel: grid (head, seq), any block size (128 used); dynamic
// shared memory = max_partitions floats (the weights), rounded up to float4s. T is the output dtype.
// partition_size here is the one the partitions were cut with (the cascade
// also uses this kernel for its prefix chunks, partition_size = chunk length).
//
// Events (stage v2_partition, block label partition = kReduceBlock, kv_head of
// the head; warp/lane of threadIdx.x), per thread in program order
// (kernels/stages/EVENTS.md): block_table_load global_load context_lens;
// nothing more for a single-partition sequence written directly; then
//   max_reduce:     per partition p = tid + k*blockDim (iter k): global_load part_max
//                   (value); reduce_block_any (max_reduce)
//   exp_sum_reduce: per p (iter k): global_load part_max, global_load part_sum,
//                   shared_store out_scratch (the weight w[p], byte p*4, value);
//                   reduce_block_any (exp_sum_reduce)
//   partition_reduce: per dim d = tid + k*blockDim: per partition p (iter p):
//                   shared_load out_scratch w[p]; global_load part_out (dims [d,1))
//                   only if w[p] > 0; then out_store (iter k, dims [d,1), value
//                   = the result): global_store output (elem bytes) if out,
//                   global_store state_out if out_state; thread 0: global_store
//                   state_lse if lse.
template <class T, class Tracer = NullTracer>
__global__ void stage6_v2_reduce_kernel(V2Args a, Tracer tracer) {
  extern __shared__ float4 reduce_smem[];
  float* w = reinterpret_cast<float*>(reduce_smem);
  __shared__ float scratch[32];
  PA_TIME_START(tracer);
  const int head = blockIdx.x, seq = blockIdx.y, tid = threadIdx.x;
  const TraceCtx tc{trace::Stage::v2_partition, tid / kWarpSize, tid % kWarpSize, seq, head, kReduceBlock,
                    kv_head_of(head, a.base.num_heads, a.base.num_kv_heads)};
  const int head_size = a.base.head_size;
  const int ctx = a.base.context_lens[seq];
  PA_TRACE(tracer, ev(tc, Step::block_table_load, Op::global_load, Tensor::context_lens)
                       .at(context_len_offset(seq) * 4, 4));
  const int n_parts = num_partitions_in(a.range, ctx, a.base.partition_size);
  if (n_parts == 1 && a.single_partition_direct) return;  // the partition kernel wrote it

  // LESSON-BEGIN(v2_partition.reduce_max)
  float m = -INFINITY;
  for (int p = tid, k = 0; p < n_parts; p += blockDim.x, ++k) {
    const std::int64_t off = a.pg.stat_offset(seq, head, p);
    const float mp = a.part_max[off];
    m = fmaxf(m, mp);
    PA_TRACE(tracer, ev(tc, Step::max_reduce, Op::global_load, Tensor::part_max).it(k).at(off * 4, 4).val(mp));
  }
  m = reduce_block_any<true>(m, scratch, tc, Step::max_reduce, tracer);
  // LESSON-END(v2_partition.reduce_max)
  // LESSON-BEGIN(v2_partition.reduce_weights)
  float s = 0.f;
  for (int p = tid, k = 0; p < n_parts; p += blockDim.x, ++k) {
    const std::int64_t off = a.pg.stat_offset(seq, head, p);
    const float mp = a.part_max[off];
    const float sp = a.part_sum[off];
    // Rescale each partition from its own max to the global one.
    const float wp = SoftmaxStats<>{mp, sp}.sum_at(m);
    w[p] = wp;
    s += wp;
    PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::global_load, Tensor::part_max).it(k).at(off * 4, 4).val(mp));
    PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::global_load, Tensor::part_sum).it(k).at(off * 4, 4).val(sp));
    PA_TRACE(tracer, ev(tc, Step::exp_sum_reduce, Op::shared_store, Tensor::out_scratch)
                         .it(k).at(static_cast<std::int64_t>(p) * 4, 4).val(wp));
  }
  s = reduce_block_any<false>(s, scratch, tc, Step::exp_sum_reduce, tracer);  // its barriers also publish w[]
  // LESSON-END(v2_partition.reduce_weights)
  // LESSON-BEGIN(v2_partition.partition_reduce)
  const float inv = s > 0.f ? 1.f / s : 0.f;
  for (int d = tid, k = 0; d < head_size; d += blockDim.x, ++k) {
    float acc = 0.f;
    for (int p = 0; p < n_parts; ++p) {
      const float wp = w[p];
      PA_TRACE(tracer, ev(tc, Step::partition_reduce, Op::shared_load, Tensor::out_scratch)
                           .it(p).dims(d, 1).at(static_cast<std::int64_t>(p) * 4, 4).val(wp));
      if (wp > 0.f) {
        const std::int64_t off = a.pg.out_offset(seq, head, p, d);
        const float x = a.part_out[off];
        acc = fmaf(wp, x, acc);
        PA_TRACE(tracer, ev(tc, Step::partition_reduce, Op::global_load, Tensor::part_out)
                             .it(p).dims(d, 1).at(off * 4, 4).val(x));
      }
    }
    acc *= inv;
    // The stores keep their one-statement form (and the hooks recompute the
    // offsets): a separate offset variable changes nvcc's 16-bit store code.
    if (a.base.out != nullptr) {
      static_cast<T*>(a.base.out)[a.base.qg.out_offset(seq, head, d)] = from_float<T>(acc);
      PA_TRACE(tracer, ev(tc, Step::out_store, Op::global_store, Tensor::output)
                           .it(k).dims(d, 1)
                           .at(a.base.qg.out_offset(seq, head, d) * static_cast<std::int64_t>(sizeof(T)), sizeof(T))
                           .val(acc));
    }
    if (a.out_state != nullptr) {
      const std::int64_t off = a.stg.out_offset(seq, head, d);
      a.out_state[off] = acc;
      PA_TRACE(tracer, ev(tc, Step::out_store, Op::global_store, Tensor::state_out)
                           .it(k).dims(d, 1).at(off * 4, 4).val(acc));
    }
  }
  if (a.lse != nullptr && tid == 0) {
    a.lse[a.stg.lse_offset(seq, head)] = SoftmaxStats<>{m, s}.lse();
    PA_TRACE(tracer, ev(tc, Step::out_store, Op::global_store, Tensor::state_lse)
                         .at(a.stg.lse_offset(seq, head) * 4, 4).val(SoftmaxStats<>{m, s}.lse()));
  }
  // LESSON-END(v2_partition.partition_reduce)
  PA_TIME_PHASE(tracer, trace::Phase::partition_reduce, -1);
}

}  // namespace pa::kernels

// ---- launchers (templated so the trace module can instantiate its tracer) ----

namespace pa::kernels {

// Reduce kernel launch: grid (head, seq), kV2ReduceThreads threads, max_partitions weights in shared memory.
inline constexpr int kV2ReduceThreads = 128;
template <class T, class Tracer = NullTracer>
void launch_v2_reduce(const V2Args& a, cudaStream_t stream, Tracer tracer = {}) {
  // Rounded up to whole float4s: the compiler may read the weights 16 bytes
  // at a time (the array is float4-aligned), past the last partition.
  const int parts = ceil_div(a.max_partitions > 0 ? a.max_partitions : 1, 4) * 4;
  const auto dyn = static_cast<std::size_t>(parts) * sizeof(float);
  auto kernel = &stage6_v2_reduce_kernel<T, Tracer>;
  if (dyn > 48 * 1024) {
    PA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dyn)));
  }
  kernel<<<dim3(a.base.num_heads, a.base.num_seqs, 1), kV2ReduceThreads, dyn, stream>>>(a, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
}

// Partition kernel, then the reduce. Grid (head, seq, max_partitions);
// dynamic shared memory holds one partition's logits.
template <class Cfg, class Tracer>
void launch_v2_kernels(const V2Args& a, Tracer tracer, cudaStream_t stream) {
  const auto dyn =
      static_cast<std::size_t>(v1_dynamic_smem_bytes(a.base.partition_size, Cfg::kHeadSize, Cfg::kNumWarps));
  auto kernel = &stage6_v2_partition_kernel<Cfg, Tracer>;
  if (dyn > 48 * 1024) {
    PA_CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(dyn)));
  }
  const dim3 grid(a.base.num_heads, a.base.num_seqs, a.max_partitions > 0 ? a.max_partitions : 1);
  kernel<<<grid, Cfg::kNumThreads, dyn, stream>>>(a, tracer);
  PA_CUDA_CHECK(cudaGetLastError());
  if constexpr (kTimingEnabled<Tracer>) {  // a timeline tells the two kernels apart; the reduce's slots follow
    const unsigned long long partition_warps = static_cast<unsigned long long>(grid.x) * grid.y * grid.z * Cfg::kNumWarps;
    launch_v2_reduce<Elem<Cfg>>(
        a, stream,
        tracer.for_kernel(trace::KernelRole::reduce, tracer.slot_base + tracer.slots(partition_warps), tracer.per_warp));
  } else {
    launch_v2_reduce<Elem<Cfg>>(a, stream, tracer);
  }
}

}  // namespace pa::kernels
