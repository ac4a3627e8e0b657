// Host side of stage 7's merge across devices: argument checks, dtype
// dispatch and launches of 07_shard_merge.cuh (pa/kernels/shard_merge.hpp).
#include <initializer_list>
#include <stdexcept>
#include <utility>
#include <string>
#include <type_traits>

#include "07_shard_merge.cuh"
#include "pa/kernels/cuda_check.hpp"
#include "pa/kernels/shard_merge.hpp"

namespace pa::kernels {
namespace {

// The merge grid (pa/index/merge.hpp) for rows of head_size floats.
dim3 grid_for(std::int64_t rows, int head_size) {
  return dim3(static_cast<unsigned>(merge_grid(rows, head_size).blocks));
}

void check_rows(const char* who, std::int64_t rows, int head_size) {
  if (rows < 1 || head_size < 4 || head_size % 4 != 0)
    throw std::invalid_argument(std::string(who) + ": rows " + std::to_string(rows) + ", head_size " +
                                std::to_string(head_size) +
                                "; accepted: rows >= 1 and head_size a positive multiple of 4 (float4 vectors)");
}

// Every named device pointer set, or an error naming the first null one.
void require_set(const char* who, std::initializer_list<std::pair<const char*, const void*>> pointers) {
  for (const auto& [name, ptr] : pointers)
    if (ptr == nullptr) throw std::invalid_argument(std::string(who) + ": " + name + " is null (a device pointer)");
}

template <class F>
void dispatch_out(const char* who, DType t, F&& f) {
  switch (t) {
    case DType::f32:
      f(static_cast<float*>(nullptr));
      return;
    case DType::f16:
      f(static_cast<__half*>(nullptr));
      return;
    case DType::bf16:
      f(static_cast<__nv_bfloat16*>(nullptr));
      return;
  }
  throw std::invalid_argument(std::string(who) + ": output dtype " + dtype_name(t) + " (" +
                              std::to_string(static_cast<int>(t)) + "); accepted: fp32, fp16, bf16");
}

}  // namespace

void launch_merge_shards(const ShardMergeArgs& a, void* stream) {
  const char* who = "merge of shard states";
  check_rows(who, a.g.rows_per_shard(), a.g.state.head_size);
  if (a.g.num_shards < 1 || a.g.num_shards > kMaxShards)
    throw std::invalid_argument(std::string(who) + ": num_shards " + std::to_string(a.g.num_shards) +
                                "; accepted: 1.." + std::to_string(kMaxShards));
  require_set(who, {{"states_out", a.states_out}, {"states_lse", a.states_lse}, {"out", a.out}});
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_out(who, a.out_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    merge_shards_kernel<T><<<grid_for(a.g.rows_per_shard(), a.g.state.head_size), MergeGrid::kThreads, 0, s>>>(
        a.states_out, a.states_lse, a.g, a.source_seq, static_cast<T*>(a.out), a.out_lse);
  });
  PA_CUDA_CHECK(cudaGetLastError());
}

void launch_weigh_state(const StateSumArgs& a, void* stream) {
  check_rows("weigh state", a.rows, a.head_size);
  require_set("weigh state",
              {{"state_out", a.state_out}, {"state_lse", a.state_lse}, {"max_lse", a.max_lse}, {"sums", a.sums}});
  weigh_state_kernel<<<grid_for(a.rows, a.head_size), MergeGrid::kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      a.state_out, a.state_lse, a.max_lse, a.sums, a.rows, a.head_size);
  PA_CUDA_CHECK(cudaGetLastError());
}

void launch_normalize_sums(const StateSumArgs& a, void* stream) {
  const char* who = "normalize state sums";
  check_rows(who, a.rows, a.head_size);
  require_set(who, {{"sums", a.sums}, {"max_lse", a.max_lse}, {"out", a.out}});
  const auto s = static_cast<cudaStream_t>(stream);
  dispatch_out(who, a.out_dtype, [&](auto* tag) {
    using T = std::remove_pointer_t<decltype(tag)>;
    normalize_sums_kernel<T><<<grid_for(a.rows, a.head_size), MergeGrid::kThreads, 0, s>>>(
        a.sums, a.max_lse, static_cast<T*>(a.out), a.out_lse, a.rows, a.head_size);
  });
  PA_CUDA_CHECK(cudaGetLastError());
}

void launch_wait_host_flag(const volatile int* flag, int value, unsigned long long timeout_ns,
                           volatile int* timed_out, void* stream) {
  if (!flag || !timed_out)
    throw std::invalid_argument(std::string("wait for the host: ") + (!flag ? "flag" : "timed_out") +
                                " is null (ints in host memory mapped for the device, cudaHostAllocMapped)");
  wait_host_flag_kernel<<<1, 1, 0, static_cast<cudaStream_t>(stream)>>>(flag, value, timeout_ns, timed_out);
  PA_CUDA_CHECK(cudaGetLastError());
}

}  // namespace pa::kernels
