// The PyTorch ops' argument checks and the one place a tensor argument list
// becomes the kernels' launch shape (StageArgs). Every check names the
// argument and what is accepted; a value error raises Python's ValueError, a
// wrong dtype TypeError (TORCH_CHECK_VALUE / TORCH_CHECK_TYPE).
#pragma once
#include <ATen/ATen.h>

#include <optional>
#include <string>

#include "pa/kernels/stage_args.hpp"

namespace pa::torch_ops {

// The inputs of a decode over a paged cache in vLLM's layout, as vLLM's
// paged_attention_v1 takes them:
//   query        [num_seqs, num_heads, head_size], unit stride in the last two
//                dimensions (rows may be padded: the row stride is read);
//   key_cache    [num_blocks, num_kv_heads, head_size / x, block_size, x],
//                x = 16 bytes / element size, contiguous;
//   value_cache  [num_blocks, num_kv_heads, head_size, block_size], contiguous;
//   block_tables [num_seqs, max_blocks_per_seq] int32, contiguous;
//   seq_lens     [num_seqs] int32, contiguous, each in [1, max_seq_len].
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
};

// Checks every tensor (device, dtype, shape, strides) and scalar, and that
// `out` is a contiguous [num_seqs, num_heads, head_size] tensor of the
// query's dtype on its device; returns the launch shape with the input and
// output pointers set. What cannot be checked without reading the tensors on
// the host (a device synchronization, which would also break CUDA graph
// capture) is the caller's promise: every seq_len <= max_seq_len (a longer
// one overruns stage 6's partition buffers, sized by max_seq_len) and every
// used block table entry a block of the cache.
kernels::StageArgs stage_args_of(const at::Tensor& out, const PagedInputs& in);

// vLLM's options that the kernels do not have yet: kv_cache_dtype "auto" (the
// cache in the query's dtype; k_scale and v_scale, one-element float32
// tensors, are then unused).
void check_vllm_options(const std::string& kv_cache_dtype, const at::Tensor& k_scale, const at::Tensor& v_scale);

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
