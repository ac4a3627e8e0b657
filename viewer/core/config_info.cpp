// config_info: the constants of KernelConfig for a run-time choice, through
// the one dispatch over the supported configurations (pa/core/config_dispatch.hpp).
#include "core/config_info.hpp"

#include "pa/core/config_dispatch.hpp"

namespace pa::viewer {

ConfigInfo config_info(DType dtype, int head_size, int block_size, int num_threads, KvDType kv_dtype,
                       bool token_rows) {
  // Throws std::invalid_argument naming the configuration and what is supported.
  const RuntimeConfig r = make_runtime_config(dtype, head_size, block_size, num_threads, kv_dtype, token_rows);
  ConfigInfo c;
  c.dtype = r.dtype;
  c.kv_dtype = r.kv_dtype;
  c.elem_bytes = r.elem_bytes;
  c.kv_elem_bytes = r.kv_elem_bytes;
  c.head_size = r.head_size;
  c.block_size = r.block_size;
  c.num_threads = r.num_threads;
  c.num_warps = r.num_warps;
  c.x = r.x;
  c.thread_group_size = r.thread_group_size;
  c.num_thread_groups = r.num_thread_groups;
  c.thread_groups_per_warp = r.thread_groups_per_warp;
  c.vec_size = r.vec_size;
  c.vec_bytes = r.vec_bytes;
  c.q_vec_bytes = r.q_vec_bytes;
  c.num_vecs_per_thread = r.num_vecs_per_thread;
  c.v_vec_size = r.v_vec_size;
  c.v_vec_bytes = r.v_vec_bytes;
  c.num_v_vecs_per_row = r.num_v_vecs_per_row;
  c.num_rows_per_iter = r.num_rows_per_iter;
  c.num_rows_per_thread = r.num_rows_per_thread;
  c.token_rows = r.token_rows;
  c.lv_lanes_per_token = r.lv_lanes_per_token;
  c.lv_tokens_per_iter = r.lv_tokens_per_iter;
  c.lv_token_steps = r.lv_token_steps;
  return c;
}

ConfigInfo config_info(const ProblemSpec& spec) {
  ConfigInfo c = config_info(spec.dtype, spec.head_size, spec.block_size, spec.num_threads, spec.kv_dtype,
                             kv_layout_token_rows(spec.kv_layout));
  c.kv_layout = spec.kv_layout;
  return c;
}

}  // namespace pa::viewer
