// One trace event: one thread's access (or reduction step) at one step of a
// stage. Plain data, written by the recording tracer on the GPU and by the
// host model on the CPU, read by the analyses and the viewer.
//
// Order: events of one thread are in program order (seq_in_thread) within
// barrier epochs (epoch = number of __syncthreads the thread has passed), so
// sorting by (block, epoch, warp, lane, seq_in_thread) gives a deterministic replay.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

namespace pa::trace {

enum class Stage : std::uint8_t {
  q_to_smem = 1, qk = 2, softmax = 3, lv = 4, warp_reduce = 5, v2_partition = 6,
  cascade_merge = 7, optimized = 8
};

// The step of a stage that an event belongs to. Lessons refer to these names.
enum class Step : std::uint8_t {
  q_load,           // Q vec global -> registers
  q_smem_store,     // Q vec registers -> q_vecs (shared)
  q_smem_load,      // q_vecs (shared) -> registers, in the QK loop
  block_table_load, // block table entry global -> register
  k_load,           // K vec global -> registers
  qk_dot,           // thread's partial dot product over its K vecs
  qk_group_reduce,  // shuffle reduction inside a thread group
  logit_store,      // scaled logit -> logits (shared)
  max_reduce,       // warp / block max (shuffles + reduction scratch)
  exp_sum_reduce,   // exp(logit - max) and the block-wide sum
  prob_store,       // normalized probability -> logits (shared) / global
  logit_load,       // probabilities (shared) -> registers, in the LV loop
  v_load,           // V vec global -> registers
  accumulate,       // per-thread row accumulators
  warp_reduce,      // cross-warp tree reduction through out scratch
  out_store,        // final output row -> global
  partition_store,  // V2: per-partition out / max / sum -> global
  partition_reduce, // V2 reduce kernel
  merge,            // attention-state merge (cascade)
  stage_output,     // a stage's observable output written for checking
  barrier,          // __syncthreads
  // Added for the tensor-core kernels (stage 7 prefix, stage 8); appended so
  // the values above keep their numbers in files.
  k_smem_load,      // K tile (shared) -> mma fragments (ldmatrix; fp8: 4-byte loads)
  v_smem_load,      // V tile (shared) -> mma fragments (ldmatrix; fp8: 4-byte loads)
  rescale,          // online softmax: accumulators scaled by exp(m_old - m_new)
  split_arrive,     // split-KV: a CTA counts itself in (atomic), the last one merges
  alibi_bias,       // ALiBi: the head's slope global -> register (the bias joins the logit)
  dequant,          // fp8 cache: loaded codes -> float (or mma inputs), times the tensor's scale
  q_scale,          // stage 8, bf16 queries with an fp8 cache: Q rescaled per head into fp16 mma inputs
  count_
};

enum class Op : std::uint8_t {
  global_load, global_store, shared_load, shared_store, shuffle, barrier, compute,
  async_copy,  // cp.async: global -> shared without registers (byte_offset: the global side)
  mma,         // a warp-wide tensor-core mma.sync
  atomic       // global atomic read-modify-write
};

enum class Tensor : std::uint8_t {
  none, q, k_cache, v_cache, block_table, context_lens, q_smem, logits, red_scratch,
  out_scratch, output, part_out, part_max, part_sum, state_out, state_lse, stage_out,
  kv_smem,    // K/V tiles staged in shared memory (cp.async pipeline buffers)
  workspace,  // split-KV states in global memory (unnormalized O, max, sum)
  counter,    // split-KV arrival counters
  // Stage 7's two attention states as the merge reads them (float; out
  // [seq][head][head_size], lse [seq][head]); appended like the values above.
  // In a cascade trace state_out / state_lse are not used for them: state_lse
  // is the merged lse output.
  prefix_out, prefix_lse, suffix_out, suffix_lse,
  alibi_slopes,  // [num_heads] float, ALiBi's slope per query head
  // A CSR page table's row starts [num_seqs + 1] and last-page lengths
  // [num_seqs] (int32; its indices are block_table's events).
  kv_indptr, kv_last_page_len
};

struct Event {
  Stage stage;
  Step step;
  Op op;
  Tensor tensor;
  std::uint16_t warp;
  std::uint16_t lane;
  std::int32_t seq;        // sequence (blockIdx.y)
  std::int32_t head;       // query head (blockIdx.x)
  std::int32_t partition;  // V2 partition (blockIdx.z), 0 for v1
  std::int32_t kv_head;
  std::int32_t iter;       // loop iteration of the step (-1 if none); never a shuffle mask (src_lane)
  std::int32_t epoch;      // barriers passed by this thread
  std::int32_t seq_in_thread;  // program order within the thread
  std::int32_t token;      // token index in the sequence (-1 if none)
  std::int32_t logical_block;   // -1 if none
  std::int32_t physical_block;  // -1 if none
  std::int32_t dim_begin;  // first head dimension touched (-1 if none)
  std::int16_t dim_count;  // number of head dimensions (elements) touched
  // Shuffles: the lane whose register this lane reads (lane ^ mask for a
  // butterfly, the owner lane for a broadcast); -1 for every other op. The
  // replay puts a shuffle after the source lane's earlier events.
  std::int8_t src_lane;
  // The iteration of a lane-strided loop inside the step's iteration (chunk
  // L = lane + 32 * lane_iter), whose trip count differs between lanes; -1 if
  // none. With iter it tells one instruction of a thread from another.
  std::int8_t lane_iter;
  std::int64_t byte_offset;  // from the tensor's base pointer (-1 if none)
  std::int32_t bytes;        // width of the access in bytes (0 for compute)
  float value;               // a telling value where cheap (logit, max, sum), else NaN
};

static_assert(sizeof(Event) == 72, "Event is part of the trace file format: change the version if it changes");
static_assert(alignof(Event) == 8);

const char* to_string(Stage);
const char* to_string(Step);
const char* to_string(Op);
const char* to_string(Tensor);

// Enum values read from files or command lines must be checked before use.
bool is_valid(Stage);
bool is_valid(Step);
bool is_valid(Op);
bool is_valid(Tensor);

// Inverse of to_string (exact enumerator names); nullopt for an unknown name.
std::optional<Stage> stage_from_string(std::string_view name);
std::optional<Step> step_from_string(std::string_view name);
std::optional<Op> op_from_string(std::string_view name);
std::optional<Tensor> tensor_from_string(std::string_view name);

// One line for logs and test failure messages.
std::string describe(const Event& e);

}  // namespace pa::trace
