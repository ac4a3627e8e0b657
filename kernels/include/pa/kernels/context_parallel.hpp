// Context parallelism, the per-device part: one shard of a problem
// (pa/index/shard.hpp's plan, pa/core/shard_problem.hpp's shard_problem)
// uploaded to one device and decoded there by stage 8, which writes the
// shard's attention state; and every shard run in turn on ONE device, merged
// by the merge kernel (pa/kernels/shard_merge.hpp) in shard order. The second
// is what the multi-device path (context_parallel_nccl.hpp) computes without
// the exchange: both run the same ShardDecoder and the same merge, so with
// the all_gather exchange (a fixed merge order) their results are equal bit
// for bit on GPUs of one kind (stage 8's plan depends on the SM count). Plain C++ (no CUDA headers); without CUDA every call throws
// NoGpuError.
#pragma once
#include <cstdint>
#include <cstring>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/index/shard.hpp"
#include "pa/kernels/optimized.hpp"

namespace pa::kernels {

// One shard on the device that is current when it is constructed (its
// launches and its buffers stay there, whatever device is current later). The
// constructor builds the shard's local problem (only its pages; a shard with
// no page at all gets one zero page, never read, so that every device pointer
// is valid), uploads it and waits for the upload, plans stage 8 with state
// output, and then drops its host copy of the pages (a shard of a long
// context holds gigabytes). Throws
// std::invalid_argument for a policy, shard count or configuration that is
// not accepted (naming it), DeviceOutOfMemory when the pages do not fit.
//
// Sequence groups: a batch can also be decoded one group of sequences at a
// time (decode(g, ...)), each group with stage 8's plan for its own sequences,
// so that a multi-device run can exchange one group's states while the next
// group decodes. group_bounds are the groups' first sequences and the end:
// {0, s1, s2, ..., num_seqs}, increasing (empty: one group, the whole batch).
class ShardDecoder {
 public:
  ShardDecoder(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard,
               const std::vector<int>& group_bounds = {});
  ~ShardDecoder();
  ShardDecoder(ShardDecoder&&) noexcept;
  ShardDecoder& operator=(ShardDecoder&&) noexcept;
  ShardDecoder(const ShardDecoder&) = delete;
  ShardDecoder& operator=(const ShardDecoder&) = delete;

  // Stage 8 over the shard's pages of sequence group g (without group
  // bounds, group 0 is the whole batch) on `stream` (a cudaStream_t of the
  // shard's device). state_out / state_lse point at the group's first
  // sequence's state: [group's sequences, num_heads, head_size] fp32 and
  // [group's sequences, num_heads] natural log; a sequence the shard holds no
  // token of gets the empty state (out 0, lse -inf).
  void decode(int g, float* state_out, float* state_lse, void* stream) const;
  int num_groups() const;
  std::string describe() const;   // the groups' plans, "; " between them
  std::int64_t kv_bytes() const;  // K and V bytes of the shard's tokens: what decode reads at least

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every shard decoded in turn on the current device into one shard-major
// state buffer (ShardedStateGeometry), then merged by the merge kernel;
// with sequence_groups > 1 each shard is decoded group by group
// (even_sequence_groups), as the multi-device run with that many groups does.
struct ShardedRun {
  std::vector<float> out;          // merged output [seq][head][head_size], rounded to the problem's dtype, decoded
  std::vector<float> lse;          // merged lse [seq][head]
  std::vector<float> states_out;   // every shard's state, shard-major: [shard][seq][head][head_size]
  std::vector<float> states_lse;   // [shard][seq][head]
  std::vector<std::string> plans;  // stage 8's plan of each shard
};
ShardedRun run_sharded(const PagedProblem& p, ShardPolicy policy, int num_shards, int sequence_groups = 1);

// {0, ..., num_seqs}: num_seqs sequences cut into `groups` groups as even as
// possible (the first num_seqs % groups one sequence longer). Throws
// std::invalid_argument unless 1 <= groups <= num_seqs.
std::vector<int> even_sequence_groups(int num_seqs, int groups);

// How the devices of a multi-GPU run exchange their states
// (context_parallel_nccl.hpp; 07_shard_merge.cuh has the arithmetic):
// all_gather: every state to every device, folded in shard order; sums: an
// all-reduce max of the lse, then an all-reduce sum of the weighted states.
enum class StateExchange : int { all_gather = 0, sums = 1 };
const char* state_exchange_name(StateExchange e);
std::optional<StateExchange> state_exchange_from_name(std::string_view s);  // the names above
inline constexpr const char* kStateExchangeNamesText = "all_gather, sums";

// Equal bit for bit (same size, same bytes; a NaN equals the same NaN): how
// the context-parallel results are compared where the merge order is fixed.
inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

// The state geometry of a problem's shards (rows = num_seqs x num_heads).
ShardedStateGeometry sharded_state_geometry(const PagedProblem& p, int num_shards);

}  // namespace pa::kernels
