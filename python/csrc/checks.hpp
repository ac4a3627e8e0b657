// The PyTorch ops' argument checks and the one place a tensor argument list
// becomes the kernels' launch shape (StageArgs). Every check names the
// argument and what is accepted; a value error raises Python's ValueError, a
// wrong dtype TypeError (TORCH_CHECK_VALUE / TORCH_CHECK_TYPE).
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "pa/index/dtype.hpp"
#include "pa/kernels/stage_args.hpp"

namespace pa::torch_ops {

// vLLM's kv_cache_dtype, k_scale and v_scale as the kernels take them: the
// cache's element type and the per-tensor scales of an fp8 cache (element =
// float(code) * scale; 1 and unused for "auto").
struct KvCacheFormat {
  KvDType kv_dtype = KvDType::same;
  float k_scale = 1.0f, v_scale = 1.0f;
  std::string name = "auto";  // kv_cache_dtype as the caller spelled it (for messages)
};

// The inputs of a decode over a paged cache in vLLM's layout, as vLLM's
// paged_attention_v1 takes them:
//   query        [num_seqs, num_heads, head_size], unit stride in the last two
//                dimensions (rows may be padded: the row stride is read);
//   key_cache    [num_blocks, num_kv_heads, head_size / x, block_size, x],
//                x = 16 bytes / element size, contiguous;
//   value_cache  [num_blocks, num_kv_heads, head_size, block_size], contiguous;
//   block_tables [num_seqs, max_blocks_per_seq] int32, contiguous;
//   seq_lens     [num_seqs] int32, contiguous, each in [1, max_seq_len].
// The caches hold the query's dtype, or with an fp8 kv (KvCacheFormat) one
// byte per element: torch.uint8 (as vLLM stores them) or the format's own
// torch.float8_e4m3fn / torch.float8_e5m2, x = 16, fp16 or bf16 queries.
struct PagedInputs {
  const at::Tensor& query;
  const at::Tensor& key_cache;
  const at::Tensor& value_cache;
  const at::Tensor& block_tables;
  const at::Tensor& seq_lens;
  int64_t num_kv_heads;
  double scale;
  int64_t block_size;
  int64_t max_seq_len;
  KvCacheFormat kv = {};
};

// Checks every tensor (device, dtype, shape, strides) and scalar, and that
// `out` is a contiguous [num_seqs, num_heads, head_size] tensor of the
// query's dtype on its device; returns the launch shape with the input and
// output pointers set, and the cache format (kv_dtype, k_scale, v_scale) of
// `in.kv`. What cannot be checked without reading the tensors on
// the host (a device synchronization, which would also break CUDA graph
// capture) is the caller's promise: every seq_len <= max_seq_len (a longer
// one overruns stage 6's partition buffers, sized by max_seq_len) and every
// used block table entry a block of the cache.
kernels::StageArgs stage_args_of(const at::Tensor& out, const PagedInputs& in);

// The host's copy of seq_lens, optional (vLLM's attention metadata keeps one
// beside the device tensor): stage 8's split planner then replays each
// sequence's own length instead of planning every one at max_seq_len
// (pa/index/optimized_split.hpp), and the cascade's suffix plans its own
// tokens. None -> null. A CPU int32 tensor [num_seqs], contiguous, each value
// 1 to max_seq_len (ValueError / TypeError naming the argument, index and
// value). It is read on the host while planning only: no device
// synchronization, and a CUDA graph keeps the plan made at capture. It steers
// speed, never the result: the kernels read seq_lens on the device, so a copy
// that differs from it gives a worse split, not a wrong output.
const int* host_seq_lens_of(const std::optional<at::Tensor>& seq_lens_cpu, const kernels::StageArgs& a);

// vLLM's cache options: kv_cache_dtype "auto" (the cache in the query's
// dtype), "fp8" or "fp8_e4m3", "fp8_e5m2" (kv_dtype_from_name; anything else:
// ValueError listing kKvDTypeNamesText); k_scale and v_scale one-element
// float32 tensors (TypeError / ValueError otherwise). With "auto" they are
// unused and not read. With fp8 each is read as a float, which for a CUDA
// tensor is a device synchronization (and is refused during CUDA graph
// capture; a CPU tensor costs nothing), and must be finite and > 0.
KvCacheFormat kv_cache_format_of(const std::string& kv_cache_dtype, const at::Tensor& k_scale,
                                 const at::Tensor& v_scale);

// Whether t's dtype is one an fp8 cache is stored in (torch.uint8,
// torch.float8_e4m3fn, torch.float8_e5m2): for the messages of ops that take
// only caches in the query's dtype.
bool is_fp8_storage(const at::Tensor& t);

// ALiBi's slopes as the kernels take them: None -> null, else a contiguous
// float32 tensor [num_heads] on the query's device (ValueError / TypeError
// naming what is accepted).
const float* alibi_slopes_of(const std::optional<at::Tensor>& alibi_slopes, const kernels::StageArgs& a,
                             const at::Device& device);

// The lab's dtype of a tensor (float16, bfloat16 or float32; TypeError otherwise).
DType dtype_of(const at::Tensor& t, const char* name);

// The kernels load and store 16 bytes at a time: a tensor whose data starts
// elsewhere (a view at an odd offset) would fault, and a fault ends the CUDA
// context for every later call, so it is refused (ValueError).
void check_aligned(const at::Tensor& t, const char* name);

// A float32 CUDA tensor on `device`, contiguous, 16-byte aligned, of the given sizes.
void check_f32_state(const at::Tensor& t, const char* name, at::IntArrayRef sizes, const at::Device& device);

}  // namespace pa::torch_ops
