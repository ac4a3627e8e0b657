// Stages 5 and 8 over every KV cache layout (vllm, nhd, hnd) and both
// page-table forms (padded, csr), against the CPU reference over the same
// layout and table. Stage 8 bit for bit against the same kernel on vLLM's
// layout: every layout lands in the same shared-memory order, so the
// arithmetic is the same. Stage 5's token-row mapping sums in another order
// than vLLM's, so there bit for bit holds between nhd and hnd (one mapping,
// other strides) and between the two table forms; stages 2-4 with a CSR
// table equal their padded outputs bit for bit. CSR edge cases (an empty sequence, pages shared across sequences,
// last pages of 1 slot and of a full page, indices in any order: the pool is
// a random permutation) run through hand-made tables. Outputs are poisoned
// with NaN first. GPU cases SKIP without a device.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include "pa/core/kv_layout_cache.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/index/config.hpp"
#include "pa/index/kv_layout.hpp"
#include "pa/kernels/api.hpp"
#include "pa/kernels/optimized.hpp"
#include "pa/kernels/optimized_args.hpp"
#include "pa/kernels/runner.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/kv_layouts.hpp"
#include "../support/gpu_skip.hpp"

namespace {

using namespace pa;

constexpr KvLayout kLayouts[] = {KvLayout::vllm, KvLayout::nhd, KvLayout::hnd};
constexpr PageTableForm kTables[] = {PageTableForm::padded, PageTableForm::csr};
constexpr DType kDTypes[] = {DType::f16, DType::bf16};

// The problem with the device cache in `layout` and the table in `tables`
// (the same elements: the runner converts on upload).
PagedProblem in_form(const PagedProblem& p, KvLayout layout, PageTableForm tables) {
  PagedProblem q = p;
  q.spec.kv_layout = layout;
  q.spec.page_table = tables;
  return q;
}

// Stage 8 through the runner with the cache uploaded in `layout` and the
// table in `tables`; twice (the second run proves the counters reset).
std::vector<float> run_layout(const PagedProblem& p, KvLayout layout, PageTableForm tables, int splits,
                              std::string* plan = nullptr, kernels::Stage stage = kernels::Stage::optimized) {
  kernels::RunOptions o;
  o.splits = splits;
  const PagedProblem q = in_form(p, layout, tables);
  kernels::StageRunner r(q, stage, o);
  (void)r.run();
  const kernels::RunResult got = r.run();
  if (plan) *plan = got.plan;
  return got.out;
}

// The reference over the cache converted to `layout` and the problem's
// table in CSR form: the layouts and tables the kernel reads, independently
// moved (reference/kv_layouts.hpp).
std::vector<double> ref_in_layout(const PagedProblem& p, KvLayout layout, const CsrTables& t) {
  const CsrPageTable view = t.view(p.spec.block_size);
  std::vector<int> lens;
  for (int s = 0; s < p.num_seqs(); ++s) lens.push_back(view.seq_len(s));
  return ref_output_paged(p, to_layout(p, layout), [&](int s, int tok) { return view.page(s, tok); }, lens);
}

bool bit_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

std::vector<int> built_heads() {
  std::vector<int> v;
  for (int h : kSupportedHeadSizes)
    if (optimized_supported(DType::f16, h, 16, KvDType::same, KvLayout::nhd)) v.push_back(h);
  return v;
}
std::vector<int> built_blocks() {
  std::vector<int> v;
  for (int b : kSupportedBlockSizes)
    if (optimized_supported(DType::f16, 128, b, KvDType::same, KvLayout::nhd)) v.push_back(b);
  return v;
}


// A hand-made CSR table over a problem's pool of 5 sequences of {97, 40, 33,
// 32, 17} tokens (pages of 16): sequence 1 has no pages (its output is 0),
// sequence 2 reads sequence 0's first six pages (shared pages, all full:
// slots past a problem's context hold NaN), the rest keep theirs; last pages
// of 1 slot (97, 17) and of a full page (32, 96).
CsrTables edge_case_table(const PagedProblem& p) {
  const CsrTables own = csr_from_block_tables(p);
  CsrTables t;
  t.indptr = {0};
  auto add = [&](int from_seq, int last_len, int pages = -1) {
    const int end = pages < 0 ? own.indptr[from_seq + 1] : own.indptr[from_seq] + pages;
    for (int i = own.indptr[from_seq]; i < end; ++i) t.indices.push_back(own.indices[i]);
    t.indptr.push_back(static_cast<int>(t.indices.size()));
    t.last_page_len.push_back(last_len);
  };
  add(0, 1);                            // 97 tokens: 7 pages, the last of 1 slot
  t.indptr.push_back(t.indptr.back());  // sequence 1: no pages
  t.last_page_len.push_back(1);         // (not read for an empty sequence)
  add(0, 16, 6);                        // sequence 0's first 6 pages: 96 tokens
  add(3, 16);                           // 32 tokens, a full last page
  add(4, 1);                            // 17 tokens
  return t;
}
constexpr int kEdgeCaseLens[] = {97, 40, 33, 32, 17};

// The reference over `t` (its lengths, which the test also checks) in `layout`.
std::vector<double> ref_over_table(const PagedProblem& p, KvLayout layout, const CsrTables& t) {
  const CsrPageTable view = t.view(p.spec.block_size);
  std::vector<int> lens;
  for (int q = 0; q < p.num_seqs(); ++q) lens.push_back(view.seq_len(q));
  REQUIRE(lens == std::vector<int>{97, 0, 96, 32, 17});
  return ref_output_paged(p, to_layout(p, layout), [&](int q, int tok) { return view.page(q, tok); }, lens);
}

// The output against the reference within the dtype's tolerance, no NaN
// (the outputs were poisoned with NaN first).
void check_output(const std::vector<double>& ref, const std::vector<float>& got, DType dt) {
  REQUIRE(ref.size() == got.size());
  const CompareResult r = compare(ref.data(), got.data(), got.size(), tolerance_for(dt));
  INFO(r.summary());
  CHECK(r.num_nan == 0);
  CHECK(r.pass);
}

// The GQA / MQA tests' batch: head 128, pages of 16, one long, one short and
// ragged contexts.
ProblemSpec ragged_spec(DType dt, int heads, int kv_heads, unsigned seed) {
  ProblemSpec s;
  s.dtype = dt;
  s.head_size = 128;
  s.block_size = 16;
  s.num_heads = heads;
  s.num_kv_heads = kv_heads;
  s.context_lens = {5000, 1, 16, 2049, 333};
  s.seed = seed;
  return s;
}

kernels::DeviceBuffer upload_ints(const std::vector<int>& v) {
  kernels::DeviceBuffer b(v.size() * sizeof(int));
  b.upload(v.data(), v.size() * sizeof(int));
  return b;
}
}  // namespace

TEST_CASE("stage 8 builds token-row instances exactly where vLLM-layout ones exist", "[layouts]") {
  std::size_t ran = 0;
  for (DType dt : kAllDTypes)
    for (int hs : kSupportedHeadSizes)
      for (int bs : kSupportedBlockSizes) {
        INFO(dtype_name(dt) << " head " << hs << " block " << bs);
        const bool vllm = optimized_supported(dt, hs, bs);
        CHECK(optimized_supported(dt, hs, bs, KvDType::same, KvLayout::nhd) == vllm);
        CHECK(optimized_supported(dt, hs, bs, KvDType::same, KvLayout::hnd) == vllm);
        // fp8 caches: vLLM's layout only (PV's fp8 fragments need a dim's tokens adjacent).
        CHECK_FALSE(optimized_supported(dt, hs, bs, KvDType::fp8_e4m3, KvLayout::nhd));
        CHECK_FALSE(optimized_supported(dt, hs, bs, KvDType::fp8_e5m2, KvLayout::hnd));
        ++ran;
      }
  CHECK(ran == std::size(kAllDTypes) * std::size(kSupportedHeadSizes) * std::size(kSupportedBlockSizes));
  CHECK(optimized_supported_list().find("nhd") != std::string::npos);
}

TEST_CASE("stages refuse the layouts and tables their kernels do not read, by name", "[layouts]") {
  ProblemSpec s;
  s.context_lens = {20};
  const PagedProblem p = make_problem(s);
  const kernels::RunOptions o;
  kernels::StageArgs a = kernels::problem_stage_args(p);
  a.kv_layout = KvLayout::hnd;
  std::size_t refused = 0;
  for (kernels::Stage st : {kernels::Stage::v2_partition, kernels::Stage::cascade_merge}) {
    try {
      kernels::check_run_options(a, st, o);
      FAIL("no error for layout hnd at stage " << kernels::stage_name(st));
    } catch (const std::invalid_argument& e) {
      CHECK(std::string(e.what()).find("layout hnd") != std::string::npos);
      CHECK(std::string(e.what()).find("layouts nhd and hnd: stages 5 (warp_reduce) and 8 (optimized)") !=
            std::string::npos);
      ++refused;
    }
  }
  CHECK(refused == 2);
  CHECK_NOTHROW(kernels::check_run_options(a, kernels::Stage::warp_reduce, o));
  CHECK_NOTHROW(kernels::check_run_options(a, kernels::Stage::optimized, o));
  a.kv_layout = KvLayout::vllm;
  a.page_table = PageTableForm::csr;
  CHECK_THROWS_AS(kernels::check_run_options(a, kernels::Stage::v2_partition, o), std::invalid_argument);
  CHECK_NOTHROW(kernels::check_run_options(a, kernels::Stage::warp_reduce, o));
  CHECK_NOTHROW(kernels::check_run_options(a, kernels::Stage::optimized, o));
  // stage_reads is the one list: stages 1-4 read CSR tables but only vLLM's layout.
  for (kernels::Stage st : {kernels::Stage::q_to_smem, kernels::Stage::qk, kernels::Stage::softmax,
                            kernels::Stage::lv}) {
    CHECK(kernels::stage_reads(st, PageTableForm::csr));
    CHECK_FALSE(kernels::stage_reads(st, KvLayout::nhd));
    CHECK_FALSE(kernels::stage_reads_refusal(st, KvLayout::hnd, PageTableForm::padded).empty());
  }
  // The problem's own form reaches the check (problem_stage_args).
  const PagedProblem hnd = in_form(p, KvLayout::hnd, PageTableForm::padded);
  CHECK(kernels::problem_stage_args(hnd).kv_layout == KvLayout::hnd);
  CHECK_THROWS_AS(kernels::check_run_options(kernels::problem_stage_args(hnd), kernels::Stage::v2_partition, o),
                  std::invalid_argument);
}

TEST_CASE("stage 8 rejects an fp8 cache in nhd or hnd, naming what is supported", "[layouts]") {
  OptimizedArgs a;
  a.num_seqs = 1;
  a.num_heads = 8;
  a.num_kv_heads = 2;
  a.max_context_len = 40;
  a.kv_dtype = KvDType::fp8_e4m3;
  a.kv_layout = KvLayout::nhd;
  try {
    (void)plan_optimized(a);
    FAIL("no error");
  } catch (const std::invalid_argument& e) {
    const std::string m = e.what();
    CHECK(m.find("layout nhd") != std::string::npos);
    CHECK(m.find("nhd and hnd with 2-byte caches only") != std::string::npos);
  } catch (const kernels::NoGpuError&) {
    SUCCEED("planning needs the device's SM count only after the instance is found");
  }
}

TEST_CASE("stage 8 on every layout and page table: the reference, and vLLM's output bit for bit",
          "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  const int sample = GENERATE(0, 1);
  std::size_t ran = 0;
  for (DType dt : kDTypes)
    for (int hs : built_heads())
      for (int bs : built_blocks()) {
        ProblemSpec s;
        s.dtype = dt;
        s.head_size = hs;
        s.block_size = bs;
        const int ratios[] = {1, 4, 8, 12};  // 12: two head tiles
        const int ratio = ratios[(hs / 16 + bs / 8 + sample) % 4];
        s.num_kv_heads = 2;
        s.num_heads = 2 * ratio;
        s.context_lens = {1, bs - 1 > 0 ? bs - 1 : 2, bs, bs + 1, 300 + 37 * sample, 1000};
        s.seed = 5000 + hs * 3 + bs + 11 * sample + (dt == DType::bf16 ? 7 : 0);
        s.extra_q_stride = sample ? 8 : 0;
        s.alibi = sample == 1;
        const PagedProblem p = make_problem(s);
        const CsrTables csr = csr_from_block_tables(p);
        const int splits = sample == 0 ? 0 : 3;
        const std::vector<float> vllm = run_layout(p, KvLayout::vllm, PageTableForm::padded, splits);
        for (KvLayout l : kLayouts) {
          const std::vector<double> ref = ref_in_layout(p, l, csr);
          for (PageTableForm t : kTables) {
            std::string plan;
            const std::vector<float> got = run_layout(p, l, t, splits, &plan);
            INFO(s.describe() << " layout " << kv_layout_name(l) << " table " << page_table_name(t) << " plan "
                              << plan);
            check_output(ref, got, dt);
            CHECK(bit_equal(got, vllm));
            ++ran;
          }
        }
      }
  CHECK(ran == std::size(kDTypes) * built_heads().size() * built_blocks().size() * std::size(kLayouts) *
                   std::size(kTables));
}

TEST_CASE("stage 8 on nhd and hnd: GQA, MQA, many splits, a long ragged batch", "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  const auto [heads, kv_heads, splits] =
      GENERATE(table<int, int, int>({{8, 8, 0}, {8, 1, 2}, {32, 8, 7}, {48, 1, 0}, {40, 4, 64}, {32, 2, 256}}));
  std::size_t ran = 0;
  for (DType dt : kDTypes) {
    const ProblemSpec s = ragged_spec(dt, heads, kv_heads, 808 + heads + kv_heads + splits);
    const PagedProblem p = make_problem(s);
    const CsrTables csr = csr_from_block_tables(p);
    const std::vector<float> vllm = run_layout(p, KvLayout::vllm, PageTableForm::padded, splits);
    for (KvLayout l : {KvLayout::nhd, KvLayout::hnd})
      for (PageTableForm t : kTables) {
        const std::vector<float> got = run_layout(p, l, t, splits);
        const std::vector<double> ref = ref_in_layout(p, l, csr);
        INFO(s.describe() << " splits " << splits << " layout " << kv_layout_name(l) << " table "
                          << page_table_name(t));
        check_output(ref, got, dt);
        CHECK(bit_equal(got, vllm));
        ++ran;
      }
  }
  CHECK(ran == std::size(kDTypes) * 2 * std::size(kTables));
}

// The hand-made CSR table (edge_case_table), launched directly (the runner
// builds CSR from a problem's own tables).
TEST_CASE("stage 8 with CSR edge cases: empty, shared, 1-slot and full last pages", "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  std::size_t ran = 0;
  for (KvLayout l : kLayouts)
    for (int splits : {0, 1, 4}) {
      ProblemSpec s;
      s.dtype = DType::bf16;
      s.head_size = 128;
      s.block_size = 16;
      s.num_heads = 8;
      s.num_kv_heads = 2;
      s.context_lens.assign(std::begin(kEdgeCaseLens), std::end(kEdgeCaseLens));
      s.seed = 31337 + splits;
      const PagedProblem p = make_problem(s);
      const CsrTables t = edge_case_table(p);

      const PagedProblem q = in_form(p, l, PageTableForm::csr);
      kernels::DeviceInputs in(q);
      kernels::StageArgs a = in.args();
      kernels::DeviceBuffer indices = upload_ints(t.indices), indptr = upload_ints(t.indptr),
                            last = upload_ints(t.last_page_len);
      const std::size_t n = static_cast<std::size_t>(p.num_seqs()) * s.num_heads * s.head_size;
      kernels::DeviceBuffer out(n * dtype_bytes(s.dtype));
      a.block_tables = static_cast<const int*>(indices.get());
      a.kv_indptr = static_cast<const int*>(indptr.get());
      a.kv_last_page_len = static_cast<const int*>(last.get());
      a.out = out.get();
      OptimizedArgs o = kernels::optimized_args(a);
      o.max_context_len = 97;
      const OptimizedPlan plan = plan_optimized(o, splits);
      kernels::DeviceBuffer ws(std::max<std::size_t>(plan.workspace_bytes, 1));
      ws.fill_bytes(0);
      out.fill_bytes(0xFF);
      launch_optimized(o, plan, ws.get());
      const std::vector<float> got = kernels::download_decoded(out, n, s.dtype);

      const std::vector<double> ref = ref_over_table(p, l, t);
      INFO("layout " << kv_layout_name(l) << " splits " << splits << " plan " << plan.describe());
      check_output(ref, got, s.dtype);
      // The empty sequence's output is exactly 0.
      for (int h = 0; h < s.num_heads; ++h)
        for (int d = 0; d < s.head_size; ++d) REQUIRE(got[p.query.out_offset(1, h, d)] == 0.f);
      ++ran;
    }
  CHECK(ran == std::size(kLayouts) * 3);
}

// ---- stage 5 (the complete v1 kernel) ----------------------------------------------

namespace {
// Stage 5 through the runner in `layout` with `tables` (twice, like stage 8's).
std::vector<float> run_v1(const PagedProblem& p, KvLayout layout, PageTableForm tables) {
  return run_layout(p, layout, tables, 0, nullptr, kernels::Stage::warp_reduce);
}
bool v1_built(DType dt, int hs, int bs) {
  const kernels::KernelKey key{dt, hs, bs, 128, KvDType::same};
  const auto built = kernels::built_configs();
  return std::find(built.begin(), built.end(), key) != built.end();
}
}  // namespace

TEST_CASE("stage 5 on every layout and page table: the reference; nhd = hnd and csr = padded bit for bit",
          "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  const int sample = GENERATE(0, 1);
  std::size_t ran = 0, built = 0;
  for (DType dt : kDTypes)
    for (int hs : kSupportedHeadSizes)
      for (int bs : kSupportedBlockSizes) {
        if (!v1_built(dt, hs, bs)) continue;
        ++built;
        ProblemSpec s;
        s.dtype = dt;
        s.head_size = hs;
        s.block_size = bs;
        const int ratios[] = {1, 4, 8};
        const int ratio = ratios[(hs / 16 + bs / 8 + sample) % 3];
        s.num_kv_heads = 2;
        s.num_heads = 2 * ratio;
        s.context_lens = {1, bs - 1, bs, bs + 1, 300 + 37 * sample, 1000};
        s.seed = 7000 + hs * 3 + bs + 11 * sample + (dt == DType::bf16 ? 7 : 0);
        s.extra_q_stride = sample ? 8 : 0;
        s.alibi = sample == 1;
        const PagedProblem p = make_problem(s);
        const CsrTables csr = csr_from_block_tables(p);
        std::vector<float> rows_first;
        for (KvLayout l : kLayouts) {
          const std::vector<double> ref = ref_in_layout(p, l, csr);
          std::vector<float> padded;
          for (PageTableForm t : kTables) {
            const std::vector<float> got = run_v1(p, l, t);
            INFO(s.describe() << " layout " << kv_layout_name(l) << " table " << page_table_name(t));
            check_output(ref, got, dt);
            if (t == PageTableForm::padded) padded = got;
            else CHECK(bit_equal(got, padded));  // the same pages, found through another table
            if (kv_layout_token_rows(l)) {
              if (rows_first.empty()) rows_first = got;
              else CHECK(bit_equal(got, rows_first));  // nhd and hnd: one mapping, other strides
            }
            ++ran;
          }
        }
      }
  CHECK(built > 0);
  CHECK(ran == built * std::size(kLayouts) * std::size(kTables));
}

TEST_CASE("stage 5 on nhd and hnd: GQA, MQA, a long ragged batch", "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  const auto [heads, kv_heads] = GENERATE(table<int, int>({{8, 8}, {8, 1}, {32, 8}, {48, 1}}));
  std::size_t ran = 0;
  for (DType dt : kDTypes) {
    const ProblemSpec s = ragged_spec(dt, heads, kv_heads, 909 + heads + kv_heads);
    const PagedProblem p = make_problem(s);
    const CsrTables csr = csr_from_block_tables(p);
    for (KvLayout l : {KvLayout::nhd, KvLayout::hnd})
      for (PageTableForm t : kTables) {
        const std::vector<float> got = run_v1(p, l, t);
        const std::vector<double> ref = ref_in_layout(p, l, csr);
        INFO(s.describe() << " layout " << kv_layout_name(l) << " table " << page_table_name(t));
        check_output(ref, got, dt);
        ++ran;
      }
  }
  CHECK(ran == std::size(kDTypes) * 2 * std::size(kTables));
}

TEST_CASE("stages 2-4 with a CSR table: their padded outputs bit for bit", "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  ProblemSpec s;
  s.dtype = DType::f16;
  s.head_size = 128;
  s.block_size = 16;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.context_lens = {97, 1, 16, 300};
  s.seed = 4242;
  s.alibi = true;
  const PagedProblem p = make_problem(s);
  std::size_t ran = 0;
  for (kernels::Stage st : {kernels::Stage::qk, kernels::Stage::softmax, kernels::Stage::lv}) {
    const PagedProblem in_csr = in_form(p, KvLayout::vllm, PageTableForm::csr);  // the runners keep references
    kernels::StageRunner padded(p, st), csr(in_csr, st);
    const kernels::RunResult a = padded.run(), b = csr.run();
    INFO(kernels::stage_name(st));
    REQUIRE(a.stage_output.values.size() == b.stage_output.values.size());
    // Logit rows end in NaN past each context (not written): compare as bytes.
    CHECK(std::memcmp(a.stage_output.values.data(), b.stage_output.values.data(),
                      a.stage_output.values.size() * sizeof(float)) == 0);
    CHECK(bit_equal(a.stage_output.max, b.stage_output.max));
    CHECK(bit_equal(a.stage_output.sum, b.stage_output.sum));
    ++ran;
  }
  CHECK(ran == 3);
}

// Stage 5 over the hand-made CSR table of stage 8's edge-case test: an empty
// sequence (output 0), shared pages, last pages of 1 slot and of a full page.
TEST_CASE("stage 5 with CSR edge cases: empty, shared, 1-slot and full last pages", "[layouts][gpu]") {
  PA_REQUIRE_GPU();
  std::size_t ran = 0;
  for (KvLayout l : kLayouts) {
    ProblemSpec s;
    s.dtype = DType::f16;
    s.head_size = 128;
    s.block_size = 16;
    s.num_heads = 8;
    s.num_kv_heads = 2;
    s.context_lens.assign(std::begin(kEdgeCaseLens), std::end(kEdgeCaseLens));
    s.seed = 2718;
    const PagedProblem p = make_problem(s);
    const CsrTables t = edge_case_table(p);

    const PagedProblem in_csr = in_form(p, l, PageTableForm::csr);  // DeviceProblem keeps a reference
    kernels::DeviceProblem d(in_csr);
    kernels::StageArgs a = d.args();
    kernels::DeviceBuffer indices = upload_ints(t.indices), indptr = upload_ints(t.indptr),
                          last = upload_ints(t.last_page_len);
    a.block_tables = static_cast<const int*>(indices.get());
    a.kv_indptr = static_cast<const int*>(indptr.get());
    a.kv_last_page_len = static_cast<const int*>(last.get());
    d.poison_outputs();
    kernels::launch_stage(kernels::Stage::warp_reduce, a);
    const std::size_t n = static_cast<std::size_t>(p.num_seqs()) * s.num_heads * s.head_size;
    const std::vector<float> got = kernels::download_decoded(d.out, n, s.dtype);

    const std::vector<double> ref = ref_over_table(p, l, t);
    INFO("layout " << kv_layout_name(l));
    check_output(ref, got, s.dtype);
    for (int h = 0; h < s.num_heads; ++h)
      for (int dd = 0; dd < s.head_size; ++dd) REQUIRE(got[p.query.out_offset(1, h, dd)] == 0.f);
    ++ran;
  }
  CHECK(ran == std::size(kLayouts));
}
