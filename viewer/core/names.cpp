#include "core/names.hpp"

namespace pa::viewer {

const char* step_summary(trace::Step s) {
  using S = trace::Step;
  switch (s) {  // every Step: the compiler names one added without a line here
    case S::q_load: return "Q vec: global memory -> registers";
    case S::q_smem_store: return "Q vec: registers -> q_vecs in shared memory, thread-group interleaved";
    case S::q_smem_load: return "Q vec: q_vecs (shared) -> registers, to meet a K vec";
    case S::block_table_load: return "page table: a block's page, a row's length or bounds";
    case S::k_load: return "K: global memory -> registers (or shared tiles)";
    case S::qk_dot: return "a thread's partial dot product of Q and K";
    case S::qk_group_reduce: return "shuffles sum the thread group's partials: the token's logit";
    case S::logit_store: return "the scaled logit -> logits in shared memory";
    case S::max_reduce: return "the block-wide max of the logits (shuffles, then reduction scratch)";
    case S::exp_sum_reduce: return "exp(logit - max) and the block-wide sum";
    case S::prob_store: return "the normalized probability -> logits (shared) or global memory";
    case S::logit_load: return "probabilities (shared) -> registers, for the LV loop";
    case S::v_load: return "V: global memory -> registers (or shared tiles)";
    case S::accumulate: return "row accumulators += probability * V";
    case S::warp_reduce: return "the warps' partial outputs summed through out scratch";
    case S::out_store: return "the output row -> global memory";
    case S::partition_store: return "a partition's output, max and sum -> global memory";
    case S::partition_reduce: return "the partitions' states combined into the output";
    case S::merge: return "two attention states (out, lse) merged into one";
    case S::stage_output: return "the stage's own output, written for checking";
    case S::barrier: return "__syncthreads: the block waits for every thread";
    case S::k_smem_load: return "K tile (shared) -> mma fragments";
    case S::v_smem_load: return "V tile (shared) -> mma fragments";
    case S::rescale: return "online softmax: accumulators scaled by exp(m_old - m_new)";
    case S::split_arrive: return "split-KV: the CTA counts itself in (atomic); the last one merges";
    case S::alibi_bias: return "ALiBi: the head's slope -> register; the bias joins each logit";
    case S::dequant: return "fp8 cache: codes to float, times the scale";
    case S::q_scale: return "bf16 Q, fp8 cache: each head's Q times a power of two, into fp16 mma inputs";
    case S::count_: break;
  }
  return "";
}

}  // namespace pa::viewer
