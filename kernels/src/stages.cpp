// The stage table, the configuration lists and the argument validation: plain
// C++, built with and without CUDA (the no-GPU build validates the same way).
#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <sstream>
#include <string>
#include <utility>

#include "pa/index/config.hpp"
#include "pa/index/layout.hpp"
#include "pa/kernels/api.hpp"
#include "pa/core/alibi.hpp"
#include "pa/kernels/instances.hpp"
#include "pa/kernels/v2_partition_instances.hpp"
#include "pa/core/config_dispatch.hpp"

namespace pa::kernels {

namespace {
// One line per stage.
constexpr StageInfo kStages[] = {
    {Stage::q_to_smem, "q_to_smem", "Q vecs global -> shared memory, thread-group interleaved",
     "Q read back from shared memory (slot order)"},
    {Stage::qk, "qk", "K vecs in registers, thread-group dot product + shuffle reduction",
     "scaled logits per token"},
    {Stage::softmax, "softmax", "block-wide max and sum (warp shuffles + shared memory)",
     "probabilities, max, sum"},
    {Stage::lv, "lv", "V vecs, per-thread row accumulators", "per-warp partial outputs"},
    {Stage::warp_reduce, "warp_reduce", "tree reduction across warps, output write (complete v1)",
     "the attention output"},
    {Stage::v2_partition, "v2_partition", "split-KV partitions + reduce kernel",
     "per-partition out/max/sum, final output"},
    {Stage::cascade_merge, "cascade_merge", "attention states of a shared prefix and suffixes merged",
     "merged output and lse"},
    {Stage::optimized, "optimized", "KV head loaded once per GQA group, loads in flight, split heuristic",
     "the output"},
};

bool is_v1_stage(Stage s) { return static_cast<int>(s) >= 1 && static_cast<int>(s) <= 5; }

template <class T, std::size_t N>
std::string join(const T (&a)[N]) {
  std::string s;
  for (std::size_t i = 0; i < N; ++i) s += (i ? ", " : "") + std::to_string(a[i]);
  return s;
}
}  // namespace

std::span<const StageInfo> stages() { return kStages; }

const StageInfo& stage_info(Stage s) {
  for (const auto& i : kStages)
    if (i.stage == s) return i;
  throw std::invalid_argument("unknown stage number " + std::to_string(static_cast<int>(s)) +
                              "; stages: " + stage_names_text());
}

const char* stage_name(Stage s) { return stage_info(s).name; }

bool stage_reads(Stage s, KvLayout l) {
  return l == KvLayout::vllm || s == Stage::warp_reduce || s == Stage::optimized;
}
bool stage_reads(Stage s, PageTableForm t) {
  return t == PageTableForm::padded || is_v1_stage(s) || s == Stage::optimized;
}

std::string stage_reads_refusal(Stage s, KvLayout l, PageTableForm t) {
  if (stage_reads(s, l) && stage_reads(s, t)) return {};
  return std::string("stage ") + std::to_string(static_cast<int>(s)) + " (" + stage_name(s) +
         ") cannot read a cache in layout " + kv_layout_name(l) + " with " + page_table_name(t) +
         " page tables (accepted: every stage reads layout vllm with padded tables; layouts nhd and hnd: stages 5 "
         "(warp_reduce) and 8 (optimized); csr page tables: stages 1-5 and 8)";
}

std::optional<Stage> parse_stage(std::string_view name) {
  if (name == "v1") return Stage::warp_reduce;
  if (name == "v2") return Stage::v2_partition;
  for (const auto& i : kStages) {
    if (name == i.name || name == std::to_string(static_cast<int>(i.stage))) return i.stage;
  }
  return std::nullopt;
}

std::string stage_names_text() {
  std::string s;
  for (const auto& i : kStages) s += (s.empty() ? "" : ", ") + std::string(i.name);
  return s;
}

namespace {
// Every dtype with each (head size, block size) of a build's instance list,
// then the fp8 caches with fp16 and bf16 queries.
std::vector<KernelKey> keys_of(std::initializer_list<std::pair<int, int>> head_blocks) {
  std::vector<KernelKey> v;
  for (KvDType kv : kAllKvDTypes)
    for (DType dt : kAllDTypes) {
      if (is_fp8(kv) && dt == DType::f32) continue;
      for (const auto& [h, b] : head_blocks) v.push_back({dt, h, b, 128, kv});
    }
  return v;
}
}  // namespace

#define PA_X(H, B) {H, B},
std::vector<KernelKey> built_configs() { return keys_of({PA_FOR_EACH_HEAD_BLOCK(PA_X)}); }
std::vector<KernelKey> v2_built_configs() { return keys_of({PA_V2_FOR_EACH_HEAD_BLOCK(PA_X)}); }
#undef PA_X

bool quick_kernels_build() {
#if defined(PA_QUICK_KERNELS) && PA_QUICK_KERNELS
  return true;
#else
  return false;
#endif
}

std::string describe(const KernelKey& k) {
  return std::string(dtype_name(k.dtype)) + (is_fp8(k.kv_dtype) ? std::string(" kv ") + kv_dtype_name(k.kv_dtype) : "") +
         " head " + std::to_string(k.head_size) + " block " + std::to_string(k.block_size) + " threads " +
         std::to_string(k.num_threads);
}

std::string supported_text() {
  std::string s = "supported: dtypes fp32, fp16, bf16 (fp16 and bf16 also with an fp8_e4m3 or fp8_e5m2 KV cache); "
                  "head sizes " + join(kSupportedHeadSizes) +
                  "; block sizes " + join(kSupportedBlockSizes) + "; threads " + join(kSupportedThreadCounts);
  if (quick_kernels_build()) {
    s += " (this build has PA_QUICK_KERNELS=ON: only head 128 x block 16 x threads 128 is compiled, "
         "for each dtype; reconfigure with -DPA_QUICK_KERNELS=OFF for the rest)";
  }
  return s;
}

std::int64_t v1_smem_bytes(Stage stage, DType dtype, int head_size, int num_threads, int max_context_len) {
  const int warps = num_threads / kWarpSize;
  const int tokens = stage == Stage::q_to_smem ? 0 : max_context_len;
  return v1_static_smem_bytes(head_size, dtype_bytes(dtype), warps) +
         v1_dynamic_smem_bytes(tokens, head_size, warps);
}

int v1_max_context(DType dtype, int head_size, int num_threads, std::int64_t smem_limit_bytes) {
  const int warps = num_threads / kWarpSize;
  const std::int64_t left = smem_limit_bytes - v1_static_smem_bytes(head_size, dtype_bytes(dtype), warps);
  return left <= 0 ? 0 : static_cast<int>(left / 4);  // one float logit per token
}

void validate_problem(Stage stage, const PagedProblem& p, std::int64_t smem_limit_bytes) {
  const ProblemSpec& s = p.spec;
  auto fail = [](const std::string& m) { throw std::invalid_argument(m); };
  if (!is_v1_stage(stage)) {
    fail(std::string("stage ") + stage_name(stage) + " is not launched by the stage 1-5 kernels");
  }
  if (const std::string why = stage_reads_refusal(stage, s.kv_layout, s.page_table); !why.empty()) fail(why);
  // Configuration: supported by the design, then compiled into this build.
  const KernelKey key{s.dtype, s.head_size, s.block_size, s.num_threads, s.kv_dtype};
  const bool known = std::ranges::find(kSupportedHeadSizes, s.head_size) != std::end(kSupportedHeadSizes) &&
                     std::ranges::find(kSupportedBlockSizes, s.block_size) != std::end(kSupportedBlockSizes) &&
                     std::ranges::find(kSupportedThreadCounts, s.num_threads) != std::end(kSupportedThreadCounts) &&
                     (s.dtype == DType::f32 || s.dtype == DType::f16 || s.dtype == DType::bf16);
  if (!known) fail("unsupported kernel configuration " + describe(key) + "; " + supported_text());
  const auto built = built_configs();
  if (std::ranges::find(built, key) == built.end()) {
    fail("kernel configuration " + describe(key) + " is supported but not built in this configuration; " +
         supported_text());
  }
  if (s.num_heads < 1 || s.num_kv_heads < 1 || s.num_heads % s.num_kv_heads != 0) {
    fail("num_heads (" + std::to_string(s.num_heads) + ") must be a positive multiple of num_kv_heads (" +
         std::to_string(s.num_kv_heads) + ")");
  }
  if (p.context_lens.empty()) fail("no sequences: at least one context length is needed");
  if (p.has_alibi()) check_alibi_slopes(p.alibi_slopes, s.num_heads, "ALiBi");
  if (p.block_tables.size() != static_cast<std::size_t>(p.num_seqs()) * p.max_blocks_per_seq) {
    fail("block table has " + std::to_string(p.block_tables.size()) + " entries, expected num_seqs x " +
         "max_blocks_per_seq = " + std::to_string(p.num_seqs()) + " x " + std::to_string(p.max_blocks_per_seq));
  }
  // Q rows must keep every Q vec aligned: the kernels load whole vecs.
  const int vec_bytes = make_runtime_config(s).q_vec_bytes;
  if ((static_cast<std::int64_t>(p.query.q_stride) * dtype_bytes(s.dtype)) % vec_bytes != 0) {
    fail("Q row stride " + std::to_string(p.query.q_stride) + " elements (extra_q_stride " +
         std::to_string(s.extra_q_stride) + ") is not a multiple of the " + std::to_string(vec_bytes) +
         "-byte Q vec; use an extra_q_stride that is a multiple of " +
         std::to_string(vec_bytes / dtype_bytes(s.dtype)) + " elements");
  }
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    const int len = p.context_lens[seq];
    if (len <= 0) {
      fail("context length of sequence " + std::to_string(seq) + " is " + std::to_string(len) +
           "; every context length must be >= 1");
    }
    const std::int64_t capacity = static_cast<std::int64_t>(p.max_blocks_per_seq) * s.block_size;
    if (len > capacity) {
      fail("context length " + std::to_string(len) + " of sequence " + std::to_string(seq) +
           " exceeds what its block table holds: " + std::to_string(p.max_blocks_per_seq) + " blocks x " +
           std::to_string(s.block_size) + " tokens = " + std::to_string(capacity));
    }
    const int nblocks = (len + s.block_size - 1) / s.block_size;
    for (int b = 0; b < nblocks; ++b) {
      const int phys = p.block_tables[p.table.offset(seq, b)];
      if (phys < 0 || phys >= p.cache.num_blocks) {
        fail("block table entry (sequence " + std::to_string(seq) + ", logical block " + std::to_string(b) +
             ") = " + std::to_string(phys) + " is outside the pool of " + std::to_string(p.cache.num_blocks) +
             " physical blocks [0, " + std::to_string(p.cache.num_blocks) + ")");
      }
    }
  }
  check_v1_smem(stage, s.dtype, s.head_size, s.num_threads, *std::ranges::max_element(p.context_lens),
                smem_limit_bytes);
}

void check_v1_smem(Stage stage, DType dtype, int head_size, int num_threads, int max_context_len,
                   std::int64_t smem_limit_bytes) {
  if (smem_limit_bytes <= 0) return;
  const std::int64_t need = v1_smem_bytes(stage, dtype, head_size, num_threads, max_context_len);
  if (need <= smem_limit_bytes) return;
  throw std::invalid_argument(
      std::string("stage ") + stage_name(stage) + ": context length " + std::to_string(max_context_len) + " needs " +
      std::to_string(need) + " bytes of shared memory for the v1 logits, more than this GPU's " +
      std::to_string(smem_limit_bytes) + " per block (v1 holds at most " +
      std::to_string(v1_max_context(dtype, head_size, num_threads, smem_limit_bytes)) +
      " tokens here); use V2, stage v2_partition (pa-lab run --stage v2_partition), which splits the "
      "context into partitions");
}

std::int64_t stage_bytes(Stage stage, const ProblemSpec& s) {
  const std::int64_t eb = dtype_bytes(s.dtype);
  const std::int64_t rows = static_cast<std::int64_t>(s.num_seqs()) * s.num_heads;
  std::int64_t tokens = 0;
  for (int len : s.context_lens) tokens += len;
  // Q in, the stage's KV (K for stages 2-3, K and V from stage 4; the cascade
  // reads the shared prefix once), and what the stage writes: stages 1-4 their
  // float intermediates, stages 5-8 the output in the dtype.
  std::int64_t bytes = rows * s.head_size * eb;
  switch (stage) {
    case Stage::q_to_smem: return bytes + rows * s.head_size * 4;
    case Stage::qk:
    case Stage::softmax: return bytes + s.kv_bytes() / 2 + static_cast<std::int64_t>(s.num_heads) * tokens * 4;
    case Stage::lv: return bytes + s.kv_bytes() + rows * (s.num_threads / kWarpSize) * s.head_size * 4;
    case Stage::warp_reduce:
    case Stage::v2_partition:
    case Stage::optimized: return bytes + s.kv_bytes() + rows * s.head_size * eb;
    case Stage::cascade_merge: return bytes + s.kv_bytes(/*shared_prefix_once=*/true) + rows * s.head_size * eb;
  }
  throw std::invalid_argument("stage_bytes: unknown stage " + std::to_string(static_cast<int>(stage)));
}

StageArgs problem_stage_args(const PagedProblem& p) {
  StageArgs a;
  a.dtype = p.spec.dtype;
  a.kv_dtype = p.spec.kv_dtype;
  a.kv_layout = p.spec.kv_layout;
  a.page_table = p.spec.page_table;
  a.k_scale = p.k_scale;
  a.v_scale = p.v_scale;
  a.head_size = p.spec.head_size;
  a.block_size = p.spec.block_size;
  a.num_threads = p.spec.num_threads;
  a.num_seqs = p.num_seqs();
  a.num_heads = p.spec.num_heads;
  a.num_kv_heads = p.spec.num_kv_heads;
  a.max_context_len = *std::max_element(p.context_lens.begin(), p.context_lens.end());
  a.host_context_lens = p.context_lens.data();
  a.partition_size = p.spec.partition_size;
  a.scale = p.spec.scale();
  a.qg = p.query;
  a.cg = p.cache;
  a.btg = p.table;
  return a;
}

}  // namespace pa::kernels
