// Stage 8 host side: runtime dispatch (dtype x head size x block size x head
// tiles -> template instance), the split planner and the launch.
#include <cuda_runtime.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <iomanip>
#include <iterator>
#include <mutex>
#include <sstream>
#include <stdexcept>
#include <string>
#include <utility>

#include "08_optimized_cta.cuh"
#include "opt_built_sizes.hpp"
#include "pa/index/optimized_split.hpp"
#include "pa/kernels/optimized.hpp"

namespace pa {
namespace opt {
// The kernel's parameters for a plan (also used by the trace module's
// recording launch, so both launch the same grid with the same arguments).
OptParams opt_make_params(const OptimizedArgs& a, const OptimizedPlan& plan, void* workspace) {
  OptParams p{};
  p.out = a.out;
  p.q = a.q;
  p.k_cache = a.k_cache;
  // nhd / hnd: one K/V tensor, V's offsets count from its start too.
  p.v_cache = kv_layout_token_rows(a.kv_layout) ? a.k_cache : a.v_cache;
  p.block_tables = a.block_tables;
  p.context_lens = a.context_lens;
  p.kv_indptr = a.kv_indptr;
  p.kv_last_page_len = a.kv_last_page_len;
  p.alibi_slopes = a.alibi_slopes;
  p.kv = KvLayoutGeometry{a.kv_layout, CacheGeometry{a.num_blocks, a.num_kv_heads, a.head_size, a.block_size,
                                                     16 / kv_elem_bytes(a.dtype, a.kv_dtype)}};
  p.kv_token_stride = p.kv.token_stride();
  p.qg = QueryGeometry{a.num_seqs, a.num_heads, a.head_size, a.q_stride};
  p.btg = BlockTableGeometry{a.max_blocks_per_seq};
  p.wsg = OptWorkspaceGeometry{a.num_seqs, plan.units, plan.splits, a.head_size};
  if (plan.splits > 1) {
    auto* base = static_cast<unsigned char*>(workspace);
    p.ws_out = reinterpret_cast<float*>(base);
    p.ws_stat = reinterpret_cast<float*>(base + p.wsg.out_bytes());
    p.ws_counter = reinterpret_cast<int*>(base + p.wsg.out_bytes() + p.wsg.stat_bytes());
  }
  p.group = a.num_heads / a.num_kv_heads;
  p.head_chunks = plan.head_chunks;
  p.split_blocks = plan.split_blocks;
  // fp8: S = Q . (codes * k_scale) = k_scale * (Q . codes): the K scale joins
  // the softmax scale once instead of multiplying every element.
  p.scale_log2 = a.scale * (is_fp8(a.kv_dtype) ? a.k_scale : 1.0f) * kLog2e;
  p.v_scale = is_fp8(a.kv_dtype) ? a.v_scale : 1.0f;
  p.first_block = a.first_token / a.block_size;
  p.state_out = a.state_out;
  p.state_lse = a.state_lse;
  p.stg = StateGeometry{a.num_heads, a.head_size};
  return p;
}
}  // namespace opt
namespace {

using opt::OptEntry;

void check_cuda(cudaError_t e, const char* what) {
  if (e != cudaSuccess)
    throw std::runtime_error(std::string("stage 8: ") + what + ": " + cudaGetErrorString(e));
}

// The head and block sizes stage 8 is built for (opt_built_sizes.hpp, generated
// by optimized.cmake, which also compiles one instance file per head size of
// the list): the registry's (pa/index/config.hpp) in full builds, fewer in
// quick builds; for fp8 caches, block sizes 16 and 32 only. The dispatch
// below names an instance for every pair of the lists, so the link fails if
// an instance file misses one.
constexpr int kHeadSizes[] = {PA_OPT_HEAD_SIZES};
constexpr int kBlockSizes[] = {PA_OPT_BLOCK_SIZES};
constexpr int kFp8HeadSizes[] = {PA_OPT_FP8_HEAD_SIZES};
constexpr int kFp8BlockSizes[] = {PA_OPT_FP8_BLOCK_SIZES};

// Calls pick.operator()<HS, BS>() for the pair of the lists Heads x Blocks
// equal to (hs, bs); false if none is.
template <const auto& Blocks, int HS, class Pick, std::size_t... B>
bool dispatch_block(int bs, Pick& pick, std::index_sequence<B...>) {
  return ((bs == Blocks[B] && (pick.template operator()<HS, Blocks[B]>(), true)) || ...);
}
template <const auto& Heads, const auto& Blocks, class Pick, std::size_t... H>
bool dispatch_head(int hs, int bs, Pick& pick, std::index_sequence<H...>) {
  return ((hs == Heads[H] &&
           dispatch_block<Blocks, Heads[H]>(bs, pick, std::make_index_sequence<std::size(Blocks)>{})) ||
          ...);
}
template <const auto& Heads = kHeadSizes, const auto& Blocks = kBlockSizes, class Pick>
bool dispatch_sizes(int hs, int bs, Pick&& pick) {
  return dispatch_head<Heads, Blocks>(hs, bs, pick, std::make_index_sequence<std::size(Heads)>{});
}

template <DType DT, bool ROWS>
bool entry_of(int hs, int bs, int ht, OptEntry& e) {
  return dispatch_sizes(hs, bs, [&]<int HS, int BS>() {
    e = ht == 1 ? opt::opt_entry<DT, HS, BS, 1, KvDType::same, ROWS>()
                : opt::opt_entry<DT, HS, BS, 2, KvDType::same, ROWS>();
  });
}
template <DType DT, KvDType KV>
bool fp8_entry_of(int hs, int bs, int ht, OptEntry& e) {
  return dispatch_sizes<kFp8HeadSizes, kFp8BlockSizes>(hs, bs, [&]<int HS, int BS>() {
    e = ht == 1 ? opt::opt_entry<DT, HS, BS, 1, KV>() : opt::opt_entry<DT, HS, BS, 2, KV>();
  });
}
bool find_entry(DType dt, KvDType kv, KvLayout layout, int hs, int bs, int ht, OptEntry& e) {
  const bool rows = kv_layout_token_rows(layout);
  if (rows && kv != KvDType::same) return false;  // token rows: 2-byte caches only
  switch (kv) {
    case KvDType::same:
      if (dt == DType::f16) return rows ? entry_of<DType::f16, true>(hs, bs, ht, e) : entry_of<DType::f16, false>(hs, bs, ht, e);
      if (dt == DType::bf16) return rows ? entry_of<DType::bf16, true>(hs, bs, ht, e) : entry_of<DType::bf16, false>(hs, bs, ht, e);
      return false;
    case KvDType::fp8_e4m3:
      if (dt == DType::f16) return fp8_entry_of<DType::f16, KvDType::fp8_e4m3>(hs, bs, ht, e);
      if (dt == DType::bf16) return fp8_entry_of<DType::bf16, KvDType::fp8_e4m3>(hs, bs, ht, e);
      return false;
    case KvDType::fp8_e5m2:
      if (dt == DType::f16) return fp8_entry_of<DType::f16, KvDType::fp8_e5m2>(hs, bs, ht, e);
      if (dt == DType::bf16) return fp8_entry_of<DType::bf16, KvDType::fp8_e5m2>(hs, bs, ht, e);
      return false;
  }
  return false;
}

// The lean instances: head 128, head tiles 1, every built block size.
template <DType DT>
bool lean_entry_of(int bs, OptEntry& e) {
  return dispatch_sizes(128, bs, [&]<int HS, int BS>() {
    if constexpr (HS == 128) e = opt::opt_entry_lean<DT, 128, BS, 1>();
  });
}
bool find_lean_entry(DType dt, int hs, int bs, int ht, OptEntry& e) {
  if (hs != 128 || ht != 1) return false;
  if (dt == DType::f16) return lean_entry_of<DType::f16>(bs, e);
  if (dt == DType::bf16) return lean_entry_of<DType::bf16>(bs, e);
  return false;
}

OptEntry require_entry(DType dt, KvDType kv, KvLayout layout, int hs, int bs, int ht,
                       OptPipeline pipe = OptPipeline::automatic) {
  OptEntry e{};
  if (pipe == OptPipeline::lean) {
    if (is_fp8(kv) || layout != KvLayout::vllm || !find_lean_entry(dt, hs, bs, ht, e))
      throw std::invalid_argument("stage 8: the plan asks for the lean pipeline, which is built for fp16/bf16 x "
                                  "head 128 x at most 8 query heads per KV head x vLLM's cache layout only");
    return e;
  }
  if (!find_entry(dt, kv, layout, hs, bs, ht, e)) {
    std::ostringstream m;
    m << "stage 8 (optimized) has no kernel for dtype " << dtype_name(dt) << ", kv cache " << kv_dtype_name(kv)
      << ", layout " << kv_layout_name(layout) << ", head size " << hs << ", block size " << bs
      << "; this build supports " << optimized_supported_list();
    throw std::invalid_argument(m.str());
  }
  return e;
}

// What the split planner needs of the current device: its SM count and
// its DRAM peak (opt_dram_peak_gbps; a device that reports no memory clock
// gets the host model's, an H100's, which the plan records). Read once per
// device and kept: every launch plans, and asking the driver for the three
// attributes on each plan costs a PyTorch call ~550 us of host time on an
// H200 (kernels/NOTES.md), 30 times the kernel at small shapes.
struct DeviceFacts {
  int sm_count = 0;
  double dram_gbps = 0;
};
DeviceFacts query_device_facts(int dev) {
  DeviceFacts f;
  int khz = 0, bits = 0;
  check_cuda(cudaDeviceGetAttribute(&f.sm_count, cudaDevAttrMultiProcessorCount, dev), "SM count");
  check_cuda(cudaDeviceGetAttribute(&khz, cudaDevAttrMemoryClockRate, dev), "memory clock");
  check_cuda(cudaDeviceGetAttribute(&bits, cudaDevAttrGlobalMemoryBusWidth, dev), "memory bus width");
  const double peak = opt_dram_peak_gbps(khz, bits);
  f.dram_gbps = peak > 0 ? peak : kOptModelDramGbps;
  return f;
}
DeviceFacts device_facts() {
  constexpr int kCachedDevices = 64;  // as opt_entry_of's
  static std::once_flag once[kCachedDevices];
  static DeviceFacts facts[kCachedDevices];
  int dev = 0;
  check_cuda(cudaGetDevice(&dev), "cudaGetDevice");
  if (dev < 0 || dev >= kCachedDevices) return query_device_facts(dev);
  std::call_once(once[dev], [&] { facts[dev] = query_device_facts(dev); });
  return facts[dev];
}

}  // namespace

bool optimized_supported(DType dtype, int head_size, int block_size, KvDType kv, KvLayout layout) {
  if (dtype == DType::f32) return false;
  if (kv_layout_token_rows(layout) && is_fp8(kv)) return false;
  if (is_fp8(kv))
    return std::ranges::find(kFp8HeadSizes, head_size) != std::end(kFp8HeadSizes) &&
           std::ranges::find(kFp8BlockSizes, block_size) != std::end(kFp8BlockSizes);
  return std::ranges::find(kHeadSizes, head_size) != std::end(kHeadSizes) &&
         std::ranges::find(kBlockSizes, block_size) != std::end(kBlockSizes);
}

std::string optimized_supported_list() {
  std::ostringstream m;
  m << "dtypes {fp16, bf16} (fp32 is not supported by the tensor-core path), head sizes {";
  for (int h : kHeadSizes) m << h << (h == kHeadSizes[std::size(kHeadSizes) - 1] ? "" : ", ");
  m << "}, block sizes {";
  for (int b : kBlockSizes) m << b << (b == kBlockSizes[std::size(kBlockSizes) - 1] ? "" : ", ");
  m << "}; with an fp8_e4m3 or fp8_e5m2 KV cache: head sizes {";
  for (int h : kFp8HeadSizes) m << h << (h == kFp8HeadSizes[std::size(kFp8HeadSizes) - 1] ? "" : ", ");
  m << "}, block sizes {";
  for (int b : kFp8BlockSizes) m << b << (b == kFp8BlockSizes[std::size(kFp8BlockSizes) - 1] ? "" : ", ");
  m << "} (a V row of a block must fill whole 16-byte copies); cache layouts {vllm, nhd, hnd} (nhd and hnd "
       "with 2-byte caches only) and page tables {padded, csr}";
#if defined(PA_QUICK_KERNELS)
  m << " (quick build: configure with -DPA_QUICK_KERNELS=OFF for all)";
#endif
  return m.str();
}

std::string OptimizedPlan::describe() const {
  std::ostringstream m;
  m << "splits=" << splits << " split_blocks=" << split_blocks << " units=" << units
    << " head_tiles=" << head_tiles << " head_chunks=" << head_chunks << " stages=" << stages
    << " smem=" << smem_bytes << " ctas/SM=" << ctas_per_sm << " SMs=" << sm_count << " dram=" << std::fixed
    << std::setprecision(0) << dram_gbps << "GB/s" << (pipeline == OptPipeline::lean ? " pipeline=lean" : "");
  return m.str();
}

namespace {
// The range and state fields of OptimizedArgs (the cascade suffix's).
void check_range_and_state(const OptimizedArgs& a) {
  if (a.first_token < 0 || a.block_size < 1 || a.first_token % a.block_size != 0)
    throw std::invalid_argument("stage 8: first_token=" + std::to_string(a.first_token) +
                                ": need >= 0 and a multiple of the block size " + std::to_string(a.block_size));
  if ((a.state_out == nullptr) != (a.state_lse == nullptr))
    throw std::invalid_argument("stage 8: state_out and state_lse go together (both set: write the attention "
                                "state; both null: write out)");
}
// The cache pointers for the layout and the page table's arrays for its form.
void check_cache_and_table(const OptimizedArgs& a) {
  const bool rows = kv_layout_token_rows(a.kv_layout);
  if (a.k_cache == nullptr || (!rows && a.v_cache == nullptr))
    throw std::invalid_argument(std::string("stage 8: a cache pointer is null (layout ") +
                                kv_layout_name(a.kv_layout) +
                                (rows ? ": k_cache holds the one K/V tensor)" : ": k_cache and v_cache)"));
  if (rows && a.v_cache != nullptr && a.v_cache != a.k_cache)
    throw std::invalid_argument(std::string("stage 8: layout ") + kv_layout_name(a.kv_layout) +
                                " keeps K and V in one tensor (k_cache); v_cache must be null or the same pointer");
  if (a.block_tables == nullptr)
    throw std::invalid_argument("stage 8: block_tables is null (the padded table, or CSR's indices)");
  if (a.kv_indptr != nullptr) {
    if (a.kv_last_page_len == nullptr)
      throw std::invalid_argument("stage 8: a CSR page table (kv_indptr set) needs kv_last_page_len");
  } else if (a.context_lens == nullptr) {
    throw std::invalid_argument("stage 8: a padded page table (kv_indptr null) needs context_lens");
  }
}
}  // namespace

OptimizedPlan plan_optimized(const OptimizedArgs& a, int force_splits, OptPipeline pipeline) {
  check_range_and_state(a);
  if (a.num_seqs < 1 || a.num_heads < 1 || a.num_kv_heads < 1 || a.num_heads % a.num_kv_heads != 0) {
    std::ostringstream m;
    m << "stage 8: num_seqs=" << a.num_seqs << ", num_heads=" << a.num_heads << ", num_kv_heads="
      << a.num_kv_heads << ": need >= 1 each and num_heads a multiple of num_kv_heads";
    throw std::invalid_argument(m.str());
  }
  if (a.max_context_len < 1)
    throw std::invalid_argument("stage 8: max_context_len=" + std::to_string(a.max_context_len) +
                                ": need >= 1 (the host copy of the longest context)");
  const int group = a.num_heads / a.num_kv_heads;
  OptimizedPlan plan;
  plan.head_tiles = opt_head_tiles(group);
  plan.head_chunks = opt_head_chunks(group);
  plan.units = a.num_kv_heads * plan.head_chunks;
  OptEntry e{};
  if (pipeline == OptPipeline::lean && !is_fp8(a.kv_dtype) && a.kv_layout == KvLayout::vllm &&
      find_lean_entry(a.dtype, a.head_size, a.block_size, plan.head_tiles, e))
    plan.pipeline = OptPipeline::lean;
  else
    e = require_entry(a.dtype, a.kv_dtype, a.kv_layout, a.head_size, a.block_size, plan.head_tiles);
  plan.smem_bytes = e.smem_bytes;
  plan.stages = e.stages;
  plan.ctas_per_sm = std::max(1, e.ctas_per_sm);
  const DeviceFacts dev = device_facts();
  plan.sm_count = dev.sm_count;
  plan.dram_gbps = dev.dram_gbps;
  plan.blocks_per_step = e.blocks_per_step;

  // The planner itself is plain host code in pa/index/optimized_split.hpp
  // (opt_choose_split), shared with the trace host model; its last answer is
  // kept (OptSplitCache).
  OptSplitInput in;
  in.num_seqs = a.num_seqs;
  in.units = plan.units;
  in.head_size = a.head_size;
  in.block_size = a.block_size;
  in.elem_bytes = kv_elem_bytes(a.dtype, a.kv_dtype);
  in.blocks_per_step = e.blocks_per_step;
  in.max_context_len = std::max(1, a.max_context_len - a.first_token);  // the attended range
  in.context_lens = a.host_context_lens;
  in.first_token = a.first_token;
  in.unit_heads = opt_unit_num_heads(0, plan.head_chunks, group);  // the largest unit: the first
  in.sm_count = plan.sm_count;
  in.ctas_per_sm = plan.ctas_per_sm;
  in.dram_gbps = plan.dram_gbps;
  thread_local OptSplitCache last_plan;
  const OptSplit split = last_plan.choose(in, force_splits);
  plan.split_blocks = split.split_blocks;
  plan.splits = split.splits;
  if (plan.splits > 1) {
    OptWorkspaceGeometry wsg{a.num_seqs, plan.units, plan.splits, a.head_size};
    plan.workspace_bytes = wsg.total_bytes();
    plan.counter_offset = wsg.out_bytes() + wsg.stat_bytes();
  }
  return plan;
}

void launch_optimized(const OptimizedArgs& a, const OptimizedPlan& plan, void* workspace, void* stream) {
  check_range_and_state(a);
  if (plan.splits > 1 && workspace == nullptr)
    throw std::invalid_argument("stage 8: plan has " + std::to_string(plan.splits) +
                                " splits but no workspace was given (need plan.workspace_bytes)");
  // Pointers the kernel accesses in wide units, refused before any device
  // call where an address is not a multiple of the unit.
  const auto check_aligned = [](const void* ptr, int width, const char* name, const char* why) {
    if (ptr == nullptr || reinterpret_cast<std::uintptr_t>(ptr) % width == 0) return;
    std::ostringstream m;
    m << "stage 8: " << name << " at " << ptr << " is not " << width << "-byte aligned (accepted: a " << width
      << "-byte aligned address, as cudaMalloc returns; " << why << ")";
    throw std::invalid_argument(m.str());
  };
  if (plan.splits > 1)
    check_aligned(workspace, 16, "workspace", "the split states are stored and merged 16 bytes at a time");
  check_aligned(a.out, 8, "out", "a thread stores four consecutive outputs at once");
  check_aligned(a.state_out, 16, "state_out", "a thread stores four consecutive floats of a state at once");
  const OptEntry e =
      require_entry(a.dtype, a.kv_dtype, a.kv_layout, a.head_size, a.block_size, plan.head_tiles, plan.pipeline);
  check_cache_and_table(a);
  if ((!a.out && !a.state_out) || !a.q)
    throw std::invalid_argument("stage 8: a device pointer is null (out or state_out/state_lse, q)");
  const opt::OptParams p = opt::opt_make_params(a, plan, workspace);
  if (a.num_seqs > 65535)
    throw std::invalid_argument("stage 8: num_seqs=" + std::to_string(a.num_seqs) + ": at most 65535");
  const dim3 grid(plan.splits, plan.units, a.num_seqs);
  e.launch(p, grid, static_cast<cudaStream_t>(stream));
  check_cuda(cudaGetLastError(), "launch");
}

}  // namespace pa
