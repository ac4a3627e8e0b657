// Internals of the host model shared by its per-stage files: the per-thread
// epoch / program-order bookkeeping (the same rules as the recording tracer:
// record() stamps the thread's current epoch and its next seq_in_thread;
// barrier() records a barrier event, then epoch += 1), and the reference
// values some events carry.
#pragma once
#include <cmath>
#include <limits>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "pa/index/cascade.hpp"
#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/mapping.hpp"
#include "pa/reference/attention.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/event.hpp"
#include "pa/trace/host_model.hpp"

namespace pa::trace::detail {

// The threads of one thread block, each with its own epoch and program order.
class BlockEmitter {
 public:
  BlockEmitter(std::vector<Event>& out, Stage stage, const BlockId& b, int kv_head, int num_threads)
      : out_(out), epoch_(num_threads, 0), seq_(num_threads, 0), stage_(stage), block_(b), kv_head_(kv_head) {}

  int num_threads() const { return static_cast<int>(epoch_.size()); }
  TraceCtx ctx(int tid) const {
    return TraceCtx{stage_, tid / kWarpSize, tid % kWarpSize, block_.seq, block_.head, block_.partition, kv_head_};
  }
  void record(int tid, Event e) {
    e.epoch = epoch_[tid];
    e.seq_in_thread = seq_[tid]++;
    out_.push_back(e);
  }
  // __syncthreads: every thread records its barrier event, then enters the next epoch.
  void barrier_all() {
    for (int tid = 0; tid < num_threads(); ++tid) {
      record(tid, barrier_event(ctx(tid)));
      ++epoch_[tid];
    }
  }

 private:
  std::vector<Event>& out_;
  std::vector<int> epoch_, seq_;
  Stage stage_;
  BlockId block_;
  int kv_head_;
};

// Reference values, computed lazily (only what a stage's events carry).
struct ModelValues {
  const PagedProblem& p;
  std::optional<TokenTensor> logits;
  std::optional<SoftmaxRef> softmax;
  std::optional<WarpPartials> partials;
  std::optional<std::vector<double>> output;
  std::optional<V2Ref> v2;

  explicit ModelValues(const PagedProblem& pp) : p(pp) {}
  float logit(int seq, int head, int token) {
    if (!logits) logits = ref_logits(p);
    return static_cast<float>(logits->at(seq, head, token));
  }
  const SoftmaxRef& sm() {
    if (!softmax) softmax = ref_softmax(p);
    return *softmax;
  }
  float max_logit(int seq, int head) { return static_cast<float>(sm().max_logit[stat(seq, head)]); }
  float exp_sum(int seq, int head) { return static_cast<float>(sm().exp_sum[stat(seq, head)]); }
  float prob(int seq, int head, int token) { return static_cast<float>(sm().probs.at(seq, head, token)); }
  float exp_of(int seq, int head, int token) {
    return static_cast<float>(std::exp(static_cast<double>(logit(seq, head, token)) - max_logit(seq, head)));
  }
  float partial(int seq, int head, int warp, int d) {
    if (!partials) partials = ref_warp_partials(p);
    return static_cast<float>(partials->values[partials->index(seq, head, warp, d)]);
  }
  float out(int seq, int head, int d) {
    if (!output) output = ref_output(p);
    return static_cast<float>((*output)[p.query.out_offset(seq, head, d)]);
  }
  // V2: partition part's output row, normalized within the partition.
  float part_out(int seq, int head, int part, int d) {
    if (!v2) v2 = ref_v2(p);
    return static_cast<float>(v2->part_out[v2->geom.out_offset(seq, head, part, d)]);
  }
  std::int64_t stat(int seq, int head) const { return static_cast<std::int64_t>(seq) * p.spec.num_heads + head; }

  // The attention state of (seq, head) over tokens [begin, end) (clamped to
  // the context): a V2 partition's normalized output, a state's out and lse.
  const AttentionState& state(int seq, int head, int begin, int end) {
    auto it = states_.find({begin, end});
    if (it == states_.end()) it = states_.emplace(std::make_pair(begin, end), ref_states(p, begin, end)).first;
    return it->second[static_cast<std::size_t>(stat(seq, head))];
  }
  float state_out(int seq, int head, int begin, int end, int d) {
    const AttentionState& s = state(seq, head, begin, end);
    return s.out.empty() ? 0.f : static_cast<float>(s.out[static_cast<std::size_t>(d)]);
  }
  float state_lse(int seq, int head, int begin, int end) {
    return static_cast<float>(state(seq, head, begin, end).lse);
  }
  // Max logit and exp sum (relative to that max) over tokens [begin, end):
  // a partition's part_max / part_sum. Empty: (-inf, 0).
  std::pair<float, float> range_stats(int seq, int head, int begin, int end) {
    float m = -std::numeric_limits<float>::infinity();
    for (int t = begin; t < end; ++t) m = std::max(m, logit(seq, head, t));
    double sum = 0;
    for (int t = begin; t < end; ++t) sum += std::exp(static_cast<double>(logit(seq, head, t)) - m);
    return {m, static_cast<float>(sum)};
  }

 private:
  std::map<std::pair<int, int>, std::vector<AttentionState>> states_;
};

// The part of a thread block's model that does not depend on the kernel
// (V1Model: stages 1-5 and stage 6's partition kernel; OptModel: stage 8):
// the problem, its reference values and the block's emitter. A model derives
// from it and adds its block's coordinates and the steps it mirrors.
struct BlockModel {
  const PagedProblem& p;
  ModelValues& vals;
  BlockEmitter& em;

  // An event of thread tid of this block.
  EventBuilder ev_(int tid, Step s, Op o, Tensor t) const { return ev(em.ctx(tid), s, o, t); }
};

// One launch of stage 6's kernels (partition kernel + reduce) as a stage 6 or
// stage 7 run makes it: the V2Args that matter for the events, and the
// relabelling the recording tracer applies (RecordingTracer: partition label
// partition_base + p, reduce label, state tensors renamed).
struct V2Launch {
  TokenRange range{0, -1};
  int partition_size = 0;
  int max_partitions = 1;
  bool direct = true;  // single_partition_direct
  bool out = true, out_state = false, lse = true;
  int partition_base = 0;
  int reduce_label = kReduceBlock;
  Tensor state_out_as = Tensor::state_out;
  Tensor state_lse_as = Tensor::state_lse;
};

// The per-head-size instances behind model_v1_block, model_v2_partition_block
// and model_optimized (host_model_decode_steps.hpp, host_model_optimized.hpp;
// one generated translation unit per head size instantiates them).
template <int HS>
void model_v1_block_head(const PagedProblem& p, Stage stage, const BlockId& b, ModelValues& vals,
                         std::vector<Event>& out);
template <int HS>
void model_v2_partition_block_head(const PagedProblem& p, const V2Launch& l, int seq, int head, int part,
                                   ModelValues& vals, std::vector<Event>& out);
template <int HS>
void model_optimized_head(const PagedProblem& p, const std::vector<BlockId>& blocks,
                          const OptimizedModelPlan& plan, const OptimizedModelOptions& opt, ModelValues& vals,
                          std::vector<Event>& out);

// Per-stage model entry points. Stages 1-5: host_model_decode_steps.cpp (stage 6 goes
// through the V2 functions below).
void model_v1_block(const PagedProblem& p, Stage stage, const BlockId& b, ModelValues& vals,
                    std::vector<Event>& out);
// Stage 6's partition kernel, block (seq, head, partition p) of launch l
// (host_model_decode_steps.cpp: the same steps as v1 on the partition's range).
void model_v2_partition_block(const PagedProblem& p, const V2Launch& l, int seq, int head, int part,
                              ModelValues& vals, std::vector<Event>& out);
// Stage 6's reduce kernel, block (seq, head) of launch l (host_model_v2.cpp).
void model_v2_reduce_block(const PagedProblem& p, const V2Launch& l, int seq, int head, ModelValues& vals,
                           std::vector<Event>& out);
// Stage 6 (v2_partition) traces: the selected partition blocks and the
// reduce blocks of their (seq, head) (host_model_v2.cpp).
V2Launch stage6_launch(const ProblemSpec& spec);
// Stage 7 (cascade_merge) traces (host_model_cascade.cpp).
void model_cascade(const PagedProblem& p, const std::vector<BlockId>& blocks, ModelValues& vals,
                   std::vector<Event>& out);

// Stage 8 (08_optimized.cuh): host_model_optimized.cpp. `blocks` come from
// resolve_optimized_selection (heads normalized to their unit's first head).
std::vector<BlockId> resolve_optimized_selection(const ProblemSpec& spec, const Selection& sel,
                                                 const OptimizedModelOptions& opt);
void model_optimized(const PagedProblem& p, const std::vector<BlockId>& blocks, const OptimizedModelOptions& opt,
                     ModelValues& vals, std::vector<Event>& out);

}  // namespace pa::trace::detail
