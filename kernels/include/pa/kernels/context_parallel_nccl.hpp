// Context parallelism over several GPUs: a problem's pages sharded over N
// devices (pa/index/shard.hpp), each device decoding its own pages with stage
// 8 (ShardDecoder, context_parallel.hpp), the attention states exchanged
// through NCCL and merged on every device, so that every device ends with
// the whole output (what the next layer, run on every device, needs).
//
// One process drives all N GPUs: one NCCL communicator per device
// (ncclCommInitAll), one stream per device, collectives of all devices issued
// inside one NCCL group. Rank r is device r and shard r.
//
// One sequence group (the default) decodes the whole batch first; with
// several, a group's exchange overlaps the next group's decode
// (ContextParallelOptions::sequence_groups).
//
// Two exchanges (07_shard_merge.cuh explains the arithmetic):
//   all_gather: each device's state (out and lse: two all-gathers in one
//     group) lands in every device's shard-major buffer; the merge kernel
//     folds the N states in shard order. The result equals run_sharded
//     (one device, shards in turn, the same sequence groups) bit for bit.
//   sums: an all-reduce max of the lse, this device's state weighed by
//     e^(lse - max), an all-reduce sum of the weighted states, a divide.
//     Fewer bytes per device for N > 2 (2 (N-1)/N states against N-1), two
//     collectives instead of one, and the sum's order is NCCL's.
//
// Built only where CMake found NCCL (PA_HAVE_NCCL); plain C++ (no CUDA or
// NCCL headers). Every call leaves the caller's current device current.
// NVLink multicast (NVLS) is kept off: the constructor sets
// NCCL_NVLS_ENABLE=0 before NCCL starts, over any other value; the states
// are a few kilobytes, where multicast buys nothing, and on a shared host it
// is not allowed.
#pragma once
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "pa/core/paged_cache.hpp"
#include "pa/index/shard.hpp"
#include "pa/kernels/context_parallel.hpp"

namespace pa::kernels {

struct ContextParallelOptions {
  int devices = 2;  // ranks, one per GPU: devices 0..devices-1 (1..kMaxShards)
  ShardPolicy policy = ShardPolicy::contiguous;
  StateExchange exchange = StateExchange::all_gather;
  // 1: decode the whole batch, then exchange and merge. G > 1: the batch in
  // G groups of sequences (even_sequence_groups), each decoded with its own
  // stage 8 plan; a group's exchange and merge run on a second stream while
  // the next group decodes. Stage 8's split choice then depends on the
  // group, so the result is no longer run_sharded's bit for bit (the ranks
  // still agree with each other).
  int sequence_groups = 1;
};

struct ContextParallelResult {
  std::vector<float> out;  // rank 0's output [seq][head][head_size], decoded from the problem's dtype
  std::vector<float> lse;  // rank 0's merged lse [seq][head]
  // Whether every rank's output and lse equal rank 0's bit for bit (each rank
  // merges the same states in the same order; with `sums` NCCL's all-reduce
  // gives every rank the same sums).
  bool ranks_agree = false;
  std::vector<std::string> plans;  // stage 8's plan on each rank
};

// Medians over the timed iterations (CUDA events on each device's stream;
// every device starts an iteration at the same moment, released together
// by the host: launch_wait_host_flag).
struct ContextParallelTiming {
  float total_ms = 0;            // the slowest rank's time from its start to its merged output
  std::vector<float> decode_ms;  // per rank: stage 8 over its pages
  // From the end of the last decode to the end of the last exchange, on the
  // rank whose decode took longest (started together, it is the last to
  // arrive and waits for nobody): the exchange's time not hidden behind a
  // decode (all of it with one sequence group; with `sums`, the weigh kernel
  // between the two all-reduces too).
  float exchange_ms = 0;
  float merge_ms = 0;                  // the last merge kernel (max over ranks)
  std::vector<std::int64_t> kv_bytes;  // per rank: K and V bytes of its tokens
  std::int64_t exchange_bytes = 0;     // bytes each rank receives: all_gather (N-1) states; sums 2 (N-1)/N (ring)
  int iters = 0;
};

class ContextParallel {
 public:
  // Checks the options (std::invalid_argument naming the value and what is
  // accepted, including more devices than this machine has), builds and
  // uploads each device's shard, starts NCCL. The problem may be dropped
  // after construction (every shard keeps its own copy).
  ContextParallel(const PagedProblem& p, const ContextParallelOptions& opt);
  ~ContextParallel();
  ContextParallel(const ContextParallel&) = delete;
  ContextParallel& operator=(const ContextParallel&) = delete;

  const ContextParallelOptions& options() const;
  // Poison every rank's output with NaN, decode, exchange, merge, copy back.
  ContextParallelResult run();
  // Throws std::runtime_error when a device's wait for the host's release
  // timed out (the devices did not start together); warmup >= 1.
  ContextParallelTiming time(int iters, int warmup = 3);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

std::string nccl_version_text();  // "2.28.9" (the library linked)
int cuda_device_count();          // 0 without a GPU
void set_current_device(int d);   // cudaSetDevice, checked

}  // namespace pa::kernels
