// Internals of the host model shared by its per-stage files: the per-thread
// epoch / program-order bookkeeping (the same rules as the recording tracer:
// record() stamps the thread's current epoch and its next seq_in_thread;
// barrier() records a barrier event, then epoch += 1), and the reference
// values some events carry.
#pragma once
#include <cmath>
#include <optional>
#include <vector>

#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/mapping.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/paged_cache.hpp"
#include "pa/trace/event.hpp"
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
};

// Per-stage model entry points. Stages 1-5 and the stage 6 partition kernel
// (the same steps on a partition's token range): host_model_v1.cpp.
void model_v1_block(const PagedProblem& p, Stage stage, const BlockId& b, ModelValues& vals,
                    std::vector<Event>& out);

}  // namespace pa::trace::detail
