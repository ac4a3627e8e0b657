// Stage 1, q_to_smem: the query row of (sequence, head) goes from global
// memory to shared memory, laid out for the QK step.
//
// What it adds: the thread block's shared memory (q_vecs, reduction scratch,
// logits) and the Q load. Every KV token is later multiplied with the same Q,
// so Q is loaded once per thread block and kept in shared memory.
//
// Thread mapping (ThreadMapping<Cfg>, mapping.hpp): the block's 128 threads
// form kNumThreadGroups thread groups of kThreadGroupSize threads (a group
// owns one token in QK). Shared q_vecs[kThreadGroupSize][kNumVecsPerThread]
// holds K-vec-sized pieces of Q: slot [g_off][i] is the piece that thread g_off
// of every group multiplies with its i-th K vec (head dims qk_vec_dim(g_off, i)).
// Thread (tg, g_off) fills slots [g_off][tg], [g_off][tg + kNumThreadGroups], ...
// so consecutive threads read consecutive Q vecs (coalesced).
//
// Observable output (stage 1 kernel): q_vecs read back in slot order, as
// float, into stage_out [seq][head][head_size] (StageOutGeometry::q_smem_offset).
#pragma once
#include "common.cuh"

namespace pa::kernels {

// The shared memory of a v1-style block. Static parts are declared here (one
// instance per kernel); the logits live in dynamic shared memory, sized by the
// launcher with v1_dynamic_smem_bytes.
template <class Cfg>
__device__ __forceinline__ SharedV1<Cfg> shared_v1() {
  using QVec = typename SharedV1<Cfg>::QVec;
  __shared__ QVec q_vecs_smem[ThreadMapping<Cfg>::kNumQSlots];
  __shared__ float red_smem[2 * Cfg::kNumWarps];
  extern __shared__ float4 dyn_smem[];  // float4: 16-byte aligned logits
  SharedV1<Cfg> s;
  s.q_vecs = q_vecs_smem;
  s.red = red_smem;
  s.logits = reinterpret_cast<float*>(dyn_smem);
  s.out_scratch = reinterpret_cast<float*>(dyn_smem);
  return s;
}

// Step q_to_smem: Q[seq][head] -> q_vecs, then a barrier (all of Q is needed
// by every thread group).
// Events (Stage = the running kernel's):
//   q_load       global_load  q      every thread, once per vec it loads; iter = n
//                (its n-th vec i = tg + n * kNumThreadGroups), dims [qk_vec_dim(g_off, i), +kVecSize),
//                byte_offset = q_offset(seq, head, dim) * elem bytes, bytes = kQVecBytes
//   q_smem_store shared_store q_smem same threads/iter/dims, right after its q_load;
//                byte_offset = q_smem_byte(g_off, i)
//   barrier      every thread, once at the end
template <class Cfg, class Tracer>
__device__ __forceinline__ void q_to_smem(const Elem<Cfg>* __restrict__ q, const QueryGeometry& qg,
                                          const ThreadCtx<Cfg>& c, SharedV1<Cfg>& sm, Tracer& tracer) {
  using Map = ThreadMapping<Cfg>;
  using T = Elem<Cfg>;
  // LESSON-BEGIN(q_to_smem.q_load)
  int n = 0;
  for (int i = Map::q_load_first_vec(c.tid); i < Cfg::kNumVecsPerThread; i += Map::kQLoadStride, ++n) {
    const int dim = Map::qk_vec_dim(c.g_off, i);
    const std::int64_t off = qg.q_offset(c.seq, c.head, dim);
    const auto v = load_vec<T, Cfg::kVecSize>(q + off);
    PA_TRACE(tracer, ev(c.tc, Step::q_load, Op::global_load, Tensor::q)
                         .it(n).dims(dim, Cfg::kVecSize).at(off * Cfg::kElemBytes, Cfg::kQVecBytes));
    // LESSON-END(q_to_smem.q_load)
    // LESSON-BEGIN(q_to_smem.q_smem_store)
    sm.q_vecs[Map::q_smem_slot(c.g_off, i)] = v;
    PA_TRACE(tracer, ev(c.tc, Step::q_smem_store, Op::shared_store, Tensor::q_smem)
                         .it(n).dims(dim, Cfg::kVecSize).at(Map::q_smem_byte(c.g_off, i), Cfg::kQVecBytes));
  }
  PA_SYNC(tracer, c);
  // LESSON-END(q_to_smem.q_smem_store)
}

// Stage 1 kernel: Q to shared memory, then q_vecs read back in slot order.
// Events after q_to_smem (step stage_output): thread tid handles slots
// s = strided_index(tid, k) < kNumQSlots, iter = k:
//   shared_load q_smem (byte_offset s * kQVecBytes, dims of the slot), then
//   kVecSize x global_store stage_out, one per float the kernel stores (element
//   e: byte_offset = (q_smem_offset(seq, head, s * kVecSize) + e) * 4, bytes 4,
//   dims [s * kVecSize + e, 1) of the output row).
template <class Cfg, class Tracer>
__global__ void __launch_bounds__(Cfg::kNumThreads) stage1_q_to_smem_kernel(StageArgs a, Tracer tracer) {
  using Map = ThreadMapping<Cfg>;
  const auto c = ThreadCtx<Cfg>::make(trace::Stage::q_to_smem, a.num_heads, a.num_kv_heads);
  auto sm = shared_v1<Cfg>();
  q_to_smem<Cfg>(static_cast<const Elem<Cfg>*>(a.q), a.qg, c, sm, tracer);

  for (int k = 0, s = Map::strided_index(c.tid, 0); s < Map::kNumQSlots; s = Map::strided_index(c.tid, ++k)) {
    const auto v = sm.q_vecs[s];
    const int e0 = Map::q_readback_elem(s);
    const std::int64_t off = a.sg.q_smem_offset(c.seq, c.head, e0);
    const int g_off = Map::q_slot_g_off(s), i = Map::q_slot_vec(s);
    PA_TRACE(tracer, ev(c.tc, Step::stage_output, Op::shared_load, Tensor::q_smem)
                         .it(k).dims(Map::qk_vec_dim(g_off, i), Cfg::kVecSize)
                         .at(Map::q_smem_byte(g_off, i), Cfg::kQVecBytes));
#pragma unroll
    for (int e = 0; e < Cfg::kVecSize; ++e) {
      a.stage_out[off + e] = to_float(v.e[e]);  // one 4-byte store per element (STG.32), as traced
      PA_TRACE(tracer, ev(c.tc, Step::stage_output, Op::global_store, Tensor::stage_out)
                           .it(k).dims(e0 + e, 1).at((off + e) * 4, 4));
    }
  }
}

}  // namespace pa::kernels
