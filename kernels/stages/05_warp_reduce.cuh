// Stage 5, warp_reduce: the per-warp partial outputs are summed across warps
// and the output row is written. The stage 5 kernel is the complete v1
// paged-attention decode kernel: q_to_smem -> qk -> softmax -> lv -> warp_reduce.
//
// What it adds to stage 4: a tree reduction across the kNumWarps warps through
// shared memory (the logits' space is reused as out scratch, hence the barrier
// before it), and the output store in the query's dtype (fp16, bf16 or fp32;
// with an fp8 cache the output is still the query's 16-bit dtype).
//
// Every layout and table: stage 5 is built for vLLM's layout and, with
// 2-byte caches, for the token-row layouts nhd and hnd (KernelConfig's
// TOKEN_ROWS: the K loads of 02_qk.cuh and lv_accumulate_token_rows of
// 04_lv.cuh); it reads padded and CSR page tables alike (load_seq_pages,
// 02_qk.cuh). The reduction and the store below serve both mappings: they
// read only the row owners (lv_row_owner) and their rows (lv_row).
//
// Thread mapping: round rnd = 0, 1, ..: active = kNumWarps >> rnd warps, mid =
// active / 2. Row-owner lanes (lv_row_owner) of warps [mid, active) store their
// rows to out scratch slot (warp - mid) (reduce_scratch_offset), barrier, the
// row owners of warps [0, mid) add slot warp, barrier. After the last round
// warp 0's row owners hold the output; each writes its rows.
#pragma once
#include "04_lv.cuh"

namespace pa::kernels {

// Step warp_reduce. Events (step warp_reduce):
//   barrier                                  every thread (logits -> out scratch)
//   per round rnd (iter = rnd):
//     shared_store out_scratch  row owners of warps [mid, active), each valid row i in order:
//                               dims [row, 1), byte_offset reduce_scratch_offset(warp - mid, row) * 4, 4 bytes
//     barrier                   every thread
//     shared_load out_scratch   row owners of warps [0, mid), each valid row:
//                               byte_offset reduce_scratch_offset(warp, row) * 4
//     barrier                   every thread
template <class Cfg, class Tracer>
__device__ __forceinline__ void warp_tree_reduce(RowAcc<Cfg>& acc, const ThreadCtx<Cfg>& c, SharedV1<Cfg>& sm,
                                                 Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  // LESSON-BEGIN(warp_reduce.warp_reduce)
  PA_SYNC(tracer, c);  // every warp is done reading logits before they are overwritten
  const bool owner = Map::lv_row_owner(c.lane);
  for (int rnd = 0, active = Cfg::kNumWarps; active > 1; active /= 2, ++rnd) {
    const int mid = active / 2;
    if (owner && c.warp >= mid && c.warp < active) {
#pragma unroll
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(c.lane, i);
        if (Map::lv_row_valid(row)) {
          const int off = Map::reduce_scratch_offset(c.warp - mid, row);
          sm.out_scratch[off] = acc.v[i];
          PA_TRACE(tracer, ev(c.tc, Step::warp_reduce, Op::shared_store, Tensor::out_scratch)
                               .it(rnd).dims(row, 1).at(static_cast<std::int64_t>(off) * 4, 4));
        }
      }
    }
    PA_SYNC(tracer, c);
    if (owner && c.warp < mid) {
#pragma unroll
      for (int i = 0; i < Cfg::kNumRowsPerThread; ++i) {
        const int row = Map::lv_row(c.lane, i);
        if (Map::lv_row_valid(row)) {
          const int off = Map::reduce_scratch_offset(c.warp, row);
          acc.v[i] += sm.out_scratch[off];
          PA_TRACE(tracer, ev(c.tc, Step::warp_reduce, Op::shared_load, Tensor::out_scratch)
                               .it(rnd).dims(row, 1).at(static_cast<std::int64_t>(off) * 4, 4));
        }
      }
    }
    PA_SYNC(tracer, c);
  }
  // LESSON-END(warp_reduce.warp_reduce)
}

// Step out_store: warp 0's row owners write their valid rows (iter = i) in the
// query's dtype (store_owned_rows, 04_lv.cuh): global_store output, dims
// [row, 1), byte_offset = out_offset(seq, head, row) * elem bytes, bytes =
// elem bytes, value = the output (before rounding).
template <class Cfg, class Tracer>
__device__ __forceinline__ void store_output_row(Elem<Cfg>* __restrict__ out, const QueryGeometry& qg,
                                                 const RowAcc<Cfg>& acc, const ThreadCtx<Cfg>& c,
                                                 Tracer& tracer) {
  // LESSON-BEGIN(warp_reduce.out_store)
  store_owned_rows<Cfg>(c.warp == 0, out, [&](int row) { return qg.out_offset(c.seq, c.head, row); },
                        Step::out_store, Tensor::output, acc, c, tracer);
  // LESSON-END(warp_reduce.out_store)
}

// Stage 5 kernel = the complete v1 kernel: one thread block per (head, seq).
// Timed (PA_TIME_*: nothing without a timing tracer), its warps' phases are
// q_to_smem, qk, softmax, lv, warp_reduce, one span each.
template <class Cfg, class Tracer>
__global__ void __launch_bounds__(Cfg::kNumThreads) stage5_v1_kernel(StageArgs a, Tracer tracer) {
  const auto c = ThreadCtx<Cfg>::make(trace::Stage::warp_reduce, a.num_heads, a.num_kv_heads);
  auto sm = shared_v1<Cfg>();
  const V1Range v = v1_logits<Cfg>(a, c, sm, tracer);  // stages 1-2 (02_qk.cuh)
  RowAcc<Cfg> acc;
  softmax_times_v<Cfg>(a, v.r, v.pages, c, sm, acc, tracer);  // stages 3-4 (04_lv.cuh)
  warp_tree_reduce<Cfg>(acc, c, sm, tracer);                   // stage 5
  store_output_row<Cfg>(static_cast<Elem<Cfg>*>(a.out), a.qg, acc, c, tracer);
  PA_TIME_PHASE(tracer, trace::Phase::warp_reduce, -1);
}

}  // namespace pa::kernels
