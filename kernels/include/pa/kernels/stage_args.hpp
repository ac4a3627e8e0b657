// The device views a stage kernel reads and writes: plain data (no CUDA
// types), so host code builds it without nvcc and later stages (V2, cascade,
// optimized) and the recording tracer's launchers take the same struct.
#pragma once
#include <cstdint>
#include <string>

#include "pa/index/dtype.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/index/layout.hpp"

namespace pa::kernels {

struct StageArgs {
  DType dtype = DType::f16;      // Q and the output (and the cache unless kv_dtype says fp8)
  KvDType kv_dtype = KvDType::same;
  float k_scale = 1.0f, v_scale = 1.0f;  // fp8 cache: element = float(code) * scale (else unused)
  int head_size = 0, block_size = 0, num_threads = 128;
  int num_seqs = 0, num_heads = 0, num_kv_heads = 0;
  int max_context_len = 0;
  // Host copy of context_lens [num_seqs], optional: stage 8's split planner
  // replays each sequence's own length (null: every one at max_context_len).
  // Read while planning only.
  const int* host_context_lens = nullptr;
  int partition_size = 0;  // 0 = one partition per sequence (v1)
  float scale = 1.0f;      // 1/sqrt(head_size)

  // Inputs (device pointers).
  const void* q = nullptr;        // [num_seqs, num_heads, head_size], row stride qg.q_stride
  const void* k_cache = nullptr;  // [num_blocks, num_kv_heads, head_size/x, block_size, x], x = 16 / cache elem bytes
  const void* v_cache = nullptr;  // [num_blocks, num_kv_heads, head_size, block_size]
  const int* block_tables = nullptr;  // [num_seqs, max_blocks_per_seq]; CSR: the indices
  const int* context_lens = nullptr;  // [num_seqs]
  // The cache's layout (k_cache: the one K/V tensor for nhd / hnd) and a CSR
  // page table's other arrays (null: padded tables), pa/index/kv_layout.hpp.
  // Stage 8 reads every layout and both forms; stages 1-7 vLLM's padded ones.
  KvLayout kv_layout = KvLayout::vllm;
  PageTableForm page_table = PageTableForm::padded;  // csr: kv_indptr and kv_last_page_len are set once uploaded
  const int* kv_indptr = nullptr;         // [num_seqs + 1]
  const int* kv_last_page_len = nullptr;  // [num_seqs]
  const float* alibi_slopes = nullptr;  // [num_heads] ALiBi slopes (pa/index/alibi.hpp); null: no ALiBi
  QueryGeometry qg;
  CacheGeometry cg;
  BlockTableGeometry btg;

  // Outputs (device pointers), which ones a stage writes: see api.hpp.
  void* out = nullptr;              // stage 5: [num_seqs, num_heads, head_size] in dtype
  float* stage_out = nullptr;       // stages 1-4: see StageOutGeometry
  float* stage_max = nullptr;       // stage 3: [num_seqs, num_heads]
  float* stage_sum = nullptr;       // stage 3
  StageOutGeometry sg;
};

// Empty when the cache geometry agrees with the problem (head size, block
// size, kv heads, x = 16 / cache element bytes), else a sentence naming both
// sides: the kernels take these sizes from their compile-time configuration,
// so a cache laid out otherwise would be read at the wrong addresses.
inline std::string cache_geometry_refusal(const StageArgs& a) {
  const int x = 16 / kv_elem_bytes(a.dtype, a.kv_dtype);
  if (a.cg.head_size == a.head_size && a.cg.block_size == a.block_size && a.cg.num_kv_heads == a.num_kv_heads &&
      a.cg.x == x)
    return {};
  auto four = [](int h, int b, int k, int xx) {
    return std::to_string(h) + ", " + std::to_string(b) + ", " + std::to_string(k) + ", " + std::to_string(xx);
  };
  return "cache geometry does not match the problem: (head size, block size, kv heads, x) is (" +
         four(a.cg.head_size, a.cg.block_size, a.cg.num_kv_heads, a.cg.x) + ") in the cache, (" +
         four(a.head_size, a.block_size, a.num_kv_heads, x) + ") in the problem";
}

}  // namespace pa::kernels
