// Context parallelism, the per-device part: one shard of a problem
// (pa/index/shard.hpp's plan, pa/reference/sharded.hpp's shard_problem)
// uploaded to one device and decoded there by stage 8, which writes the
// shard's attention state; and every shard run in turn on ONE device, merged
// by the merge kernel (pa/kernels/shard_merge.hpp) in shard order. The second
// is what the multi-device path (context_parallel_nccl.hpp) computes without
// the exchange: both run the same ShardDecoder and the same merge, so their
// results are equal bit for bit on GPUs of one kind (stage 8's plan depends on
// the SM count). Plain C++ (no CUDA headers); without CUDA every call throws
// NoGpuError.
#pragma once
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/index/shard.hpp"
#include "pa/kernels/optimized.hpp"

namespace pa::kernels {

// One shard on the device that is current when it is constructed. The
// constructor builds the shard's local problem (only its pages; a shard with
// no page at all gets one zero page, never read, so that every device pointer
// is valid), uploads it, and plans stage 8 with state output. Throws
// std::invalid_argument for a policy, shard count or configuration that is
// not accepted (naming it), DeviceOutOfMemory when the pages do not fit.
class ShardDecoder {
 public:
  ShardDecoder(const PagedProblem& p, ShardPolicy policy, int num_shards, int shard);
  ~ShardDecoder();
  ShardDecoder(ShardDecoder&&) noexcept;
  ShardDecoder& operator=(ShardDecoder&&) noexcept;
  ShardDecoder(const ShardDecoder&) = delete;
  ShardDecoder& operator=(const ShardDecoder&) = delete;

  // Stage 8 over the shard's pages on `stream` (a cudaStream_t of the
  // shard's device): state_out [num_seqs, num_heads, head_size] fp32,
  // state_lse [num_seqs, num_heads] natural log; a sequence the shard holds
  // no token of gets the empty state (out 0, lse -inf).
  void decode(float* state_out, float* state_lse, void* stream) const;

  int device() const;
  int shard() const;
  const PagedProblem& local() const;   // the shard's problem (its pages, compact tables)
  const OptimizedPlan& plan() const;
  std::int64_t kv_bytes() const;       // K and V bytes of the shard's tokens: what decode reads at least

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// Every shard decoded in turn on the current device into one shard-major
// state buffer (ShardedStateGeometry), then merged by the merge kernel.
struct ShardedRun {
  std::vector<float> out;         // merged output [seq][head][head_size], rounded to the problem's dtype, decoded
  std::vector<float> lse;         // merged lse [seq][head]
  std::vector<float> states_out;  // every shard's state, shard-major: [shard][seq][head][head_size]
  std::vector<float> states_lse;  // [shard][seq][head]
  std::vector<std::string> plans; // stage 8's plan of each shard
};
ShardedRun run_sharded(const PagedProblem& p, ShardPolicy policy, int num_shards);

// How the devices of a multi-GPU run exchange their states
// (context_parallel_nccl.hpp; 07_shard_merge.cuh has the arithmetic):
// all_gather: every state to every device, folded in shard order; sums: an
// all-reduce max of the lse, then an all-reduce sum of the weighted states.
enum class StateExchange : int { all_gather = 0, sums = 1 };
const char* state_exchange_name(StateExchange e);
std::optional<StateExchange> state_exchange_from_name(std::string_view s);  // the names above
inline constexpr const char* kStateExchangeNamesText = "all_gather, sums";

// The state geometry of a problem's shards (rows = num_seqs x num_heads).
ShardedStateGeometry sharded_state_geometry(const PagedProblem& p, int num_shards);

}  // namespace pa::kernels
