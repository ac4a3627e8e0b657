// Host-side checks shared by the launches of stages 6 and 7 (06_v2_partition.cu,
// 07_cascade_merge.cu): the paged inputs every launch reads, and the
// configuration named in an error. Host C++ only.
#pragma once
#include <stdexcept>
#include <string>

#include "pa/kernels/stage_args.hpp"

namespace pa::kernels::detail {

[[noreturn]] inline void bad(const std::string& what) { throw std::invalid_argument(what); }

inline std::string config_text(const StageArgs& b) {
  return std::string(dtype_name(b.dtype)) + (is_fp8(b.kv_dtype) ? std::string(" kv ") + kv_dtype_name(b.kv_dtype) : "") +
         " head " + std::to_string(b.head_size) + " block " + std::to_string(b.block_size);
}

// Sizes the grids can hold and every input pointer present.
inline void check_base(const StageArgs& b) {
  if (b.num_seqs < 1 || b.num_heads < 1 || b.num_kv_heads < 1 || b.num_heads % b.num_kv_heads != 0)
    bad("v2/cascade: num_seqs " + std::to_string(b.num_seqs) + ", num_heads " + std::to_string(b.num_heads) +
        ", num_kv_heads " + std::to_string(b.num_kv_heads) +
        ": need >= 1 each and num_kv_heads dividing num_heads");
  if (b.num_seqs > 65535) bad("v2/cascade: num_seqs " + std::to_string(b.num_seqs) + " > 65535 (grid y)");
  if (b.q == nullptr || b.k_cache == nullptr || b.v_cache == nullptr || b.block_tables == nullptr ||
      b.context_lens == nullptr)
    bad("v2/cascade: null input pointer (q, k_cache, v_cache, block_tables, context_lens are required)");
}

}  // namespace pa::kernels::detail
