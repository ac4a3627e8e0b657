// One problem description shared by the reference, the kernels, the host
// trace model and the viewer: shapes, dtype, context lengths and the seed
// from which every input is drawn.
#pragma once
#include <cstdint>
#include <map>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "pa/index/config.hpp"
#include "pa/index/dtype.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/index/layout.hpp"

namespace pa {

// What ProblemSpec::validate() throws. The message names the bad value and
// what is accepted; `field` is the ProblemSpec member at fault ("head_size",
// "context_lens", ... or "host_memory" for a problem too large to hold), so
// that a command-line front end can name its own flag for it.
class ProblemError : public std::invalid_argument {
 public:
  ProblemError(std::string field_name, const std::string& what)
      : std::invalid_argument(what), field(std::move(field_name)) {}
  std::string field;
};

// The most host memory one problem may take: half of this machine's physical
// memory (16 GiB where the system does not say), so that a typo in a context
// length is refused with a message instead of ending in std::bad_alloc or the
// out-of-memory killer.
std::int64_t host_memory_limit_bytes();

struct ProblemSpec {
  DType dtype = DType::f16;
  int head_size = 128;
  int block_size = 16;
  int num_threads = 128;
  int num_heads = 8;
  int num_kv_heads = 8;                 // num_heads % num_kv_heads == 0 (GQA; 1 = MQA)
  std::vector<int> context_lens = {100};  // one per sequence, each >= 1
  int partition_size = kDefaultPartitionSize;  // V2; a multiple of block_size
  // Cascade: the first shared_prefix_len tokens of every sequence are the same
  // tokens, stored in the same physical blocks (a multiple of block_size).
  int shared_prefix_len = 0;
  int extra_q_stride = 0;        // Q row stride = num_heads*head_size + extra_q_stride
  int spare_blocks = 3;          // unused physical blocks in the pool (never read)
  // Slots past a sequence's context in its last block hold NaN (a kernel must
  // mask them); false: they hold 0.
  bool nan_tails = true;
  std::uint64_t seed = 1;
  float logit_spread = 4.0f;     // inputs scaled so softmax is far from uniform
  // ALiBi: make_problem gives the problem the paper's slopes for num_heads
  // (pa/core/alibi.hpp), and every stage adds the bias to its logits.
  bool alibi = false;
  // The KV cache's element type: the dtype's own (same), or fp8 (fp16 and
  // bf16 queries only). With fp8, make_problem stores every element as
  // fp8(x / scale) and the problem's float cache holds the read-back values
  // float(code) * scale, so every reference function describes the fp8 cache.
  // Scales: > 0 as given; 0 = chosen from the data (the largest |K| and |V|
  // the sequences read map onto the format's largest finite value).
  KvDType kv_dtype = KvDType::same;
  float k_scale = 0.0f, v_scale = 0.0f;
  // How the device holds the cache and its page table (pa/index/kv_layout.hpp):
  // vLLM's split K/V with padded block tables, or a token-row page tensor
  // (nhd, hnd; 16-bit caches) and/or CSR tables. The problem's own arrays
  // (PagedProblem) are always vLLM's padded form, the reference's; the
  // runner converts on upload. Stage 8 reads every form, stages 1-7 vLLM's
  // padded one (kernels::layout_refusal says so for a stage).
  KvLayout kv_layout = KvLayout::vllm;
  PageTableForm page_table = PageTableForm::padded;

  int num_seqs() const { return static_cast<int>(context_lens.size()); }
  int max_context_len() const;
  int max_blocks_per_seq() const;
  float scale() const;  // 1/sqrt(head_size)
  int max_partitions() const;  // num_partitions(max_context_len, partition_size)
  int shared_prefix_blocks() const { return shared_prefix_len / (block_size > 0 ? block_size : 1); }
  // Throws std::invalid_argument naming the bad value and what is accepted:
  // dtype, head size, block size and thread count from config.hpp's supported
  // lists; num_heads >= 1, num_kv_heads >= 1 dividing num_heads; at least one
  // sequence, every context length >= 1; partition_size 0 (one partition) or
  // a positive multiple of block_size; shared_prefix_len >= 0, a multiple of
  // block_size and <= every context length; extra_q_stride >= 0;
  // spare_blocks >= 0; logit_spread finite and > 0; kv_dtype fp8 only with
  // fp16 or bf16, k_scale and v_scale finite and >= 0; kv_layout nhd or hnd
  // only with a 16-bit cache (fp16 or bf16, kv_dtype auto); host_bytes() at most
  // host_memory_limit_bytes(). Throws ProblemError (a std::invalid_argument).
  void validate() const;
  // The same without the host-memory limit: for a problem whose data lives
  // on the device only (problem_layout).
  void validate_shape() const;
  // Host memory the reference's PagedProblem holds for this problem: K, V and
  // Q as float and in the dtype's bytes, the block tables, the outputs.
  double host_bytes() const;
  // Bytes of K and V that the sequences' contexts cover, each token once per
  // sequence that reads it; with shared_prefix_once, the shared prefix counts
  // once (what the cascade reads). The one formula for KV traffic: the
  // kernels' stage_bytes, pa-lab run and pa-bench all use it.
  std::int64_t kv_bytes(bool shared_prefix_once = false) const;
  std::string describe() const;  // one line, for logs and trace headers
};

// spec.validate() for a command-line front end, whose flags name the fields
// differently (pa-lab's --prefix-len, pa-viewer's --prefix): nullopt when the
// problem is valid, else "<flag>: <message>", <flag> being flag_of's entry
// for ProblemError::field, or the field's own name where flag_of has none.
std::optional<std::string> problem_flag_error(const ProblemSpec& spec,
                                              const std::map<std::string, std::string>& flag_of);

}  // namespace pa
