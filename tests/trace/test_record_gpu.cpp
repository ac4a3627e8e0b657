// The recorded GPU trace equals the host model (label gpu; SKIPPED without a
// GPU or a CUDA build). For every stage with a recording instance and several
// configurations (dtypes, head sizes, block sizes 8/16/32, GQA/MQA, ragged
// contexts, several selected blocks), each thread's events must be the
// model's, field for field and in program order (epoch, seq_in_thread);
// values (logits, maxima, sums, probabilities, outputs) must agree within the
// dtype's tolerance, since the GPU sums in float and the model in double
// (pa/trace/compare.hpp). Every case is taken from the recording list, so each
// test asserts that it compared every case this build holds (record_check.hpp).
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <map>
#include <tuple>

#include "record_check.hpp"
#include "replay_check.hpp"
#include "gpu_skip.hpp"
#include "pa/index/events.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/kernels/api.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"

using namespace pa;
using namespace pa::trace;

namespace {

using pa::trace::testing::v1_instance_built;

struct Case {
  DType dt;
  int head, block;
  std::vector<int> ctx;
  int heads, kv_heads;
  Selection sel;
  KvDType kv = KvDType::same;
};

// Whether the build must record stage st of s (`recorded`, which can_record
// must agree with); if it does, records the selection and compares it with
// the host model. Counts the cases expected and those compared.
void record_and_compare(Stage st, const ProblemSpec& s, const PagedProblem& p, const Selection& sel, bool recorded,
                        int& expected, int& compared) {
  expected += recorded;
  CHECK(can_record(st, s) == recorded);
  if (!can_record(st, s)) return;
  const RecordResult rec = record_stage(st, p, sel);
  PA_CHECK_REPLAY_ORDER(rec.events);
  PA_CHECK_EVENTS_EQUAL(rec.events, model_events(s, st, sel), s.dtype);
  ++compared;
}

ProblemSpec spec_of(const Case& c, unsigned seed, bool alibi) {
  ProblemSpec s;
  s.dtype = c.dt;
  s.head_size = c.head;
  s.block_size = c.block;
  s.context_lens = c.ctx;
  s.num_heads = c.heads;
  s.num_kv_heads = c.kv_heads;
  s.seed = seed;
  s.alibi = alibi;
  s.kv_dtype = c.kv;
  return s;
}

}  // namespace

TEST_CASE("recorded GPU events equal the host model, stages 1-7", "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  const Case cases[] = {
      {DType::f16, 128, 16, {100}, 4, 4, {}},
      {DType::f16, 128, 8, {37, 300}, 8, 2, {{{0, 3, 0}, {1, 7, 0}}}},
      {DType::f16, 128, 32, {1, 64, 65}, 2, 1, {{{0, 0, 0}, {1, 1, 0}, {2, 0, 0}}}},
      {DType::f16, 64, 16, {129}, 4, 4, {{{0, 2, 0}}}},
      {DType::f16, 256, 16, {33, 16}, 2, 2, {{{0, 1, 0}, {1, 0, 0}}}},
      {DType::f16, 80, 8, {77}, 4, 2, {}},
      {DType::f16, 96, 32, {250, 31}, 4, 4, {{{1, 3, 0}, {0, 0, 0}}}},
      {DType::f16, 112, 16, {48}, 4, 1, {{{0, 3, 0}}}},
      {DType::f16, 192, 32, {95}, 2, 2, {}},
      {DType::bf16, 128, 16, {513}, 4, 2, {{{0, 3, 0}}}},
      {DType::bf16, 64, 8, {9, 100}, 4, 4, {{{0, 0, 0}, {1, 2, 0}}}},
      {DType::bf16, 96, 32, {5, 33}, 2, 1, {{{0, 0, 0}, {1, 1, 0}}}},
      {DType::f32, 128, 16, {100, 7}, 4, 4, {{{1, 1, 0}}}},
      {DType::f32, 256, 8, {70}, 2, 2, {}},
      {DType::f32, 80, 16, {19, 200}, 4, 1, {{{0, 3, 0}, {1, 1, 0}}}},
      {DType::f32, 64, 8, {64}, 4, 4, {}},
      // fp8 caches (the recording list's four: each format, each 16-bit dtype).
      {DType::f16, 128, 16, {100, 33}, 4, 2, {{{0, 1, 0}, {1, 3, 0}}}, KvDType::fp8_e4m3},
      {DType::bf16, 128, 16, {513, 7}, 8, 2, {{{0, 5, 0}, {1, 0, 0}}}, KvDType::fp8_e5m2},
      {DType::bf16, 64, 8, {9, 100}, 4, 1, {{{0, 0, 0}, {1, 2, 0}}}, KvDType::fp8_e4m3},
      {DType::f16, 256, 32, {65}, 2, 2, {}, KvDType::fp8_e5m2},
  };
  // (case, stage) pairs this build must compare: stages 5-7 of each case whose
  // configuration pa_kernels holds, stages 1-4 of those that are also among
  // the configurations recorded for every stage (trace/record/record_configs.hpp).
  auto all_stages = [](const ProblemSpec& s) {
    const std::tuple<DType, int, int, KvDType> listed[] = {
        {DType::f16, 128, 16, KvDType::same},     {DType::bf16, 128, 16, KvDType::same},
        {DType::f32, 128, 16, KvDType::same},     {DType::f16, 128, 16, KvDType::fp8_e4m3},
        {DType::bf16, 128, 16, KvDType::fp8_e5m2}, {DType::f16, 128, 8, KvDType::same},
        {DType::f16, 96, 32, KvDType::same},      {DType::f32, 64, 8, KvDType::same}};
    return std::find(std::begin(listed), std::end(listed),
                     std::tuple{s.dtype, s.head_size, s.block_size, s.kv_dtype}) != std::end(listed);
  };
  int expected = 0, compared = 0;
  for (const Case& c : cases) {
    // Every other case with ALiBi (its slope loads and biased logits).
    const ProblemSpec s = spec_of(c, 11, (&c - cases) % 2 == 1);
    const PagedProblem p = make_problem(s);
    for (Stage st : {Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce,
                     Stage::v2_partition, Stage::cascade_merge}) {
      INFO(to_string(st) << " " << s.describe());
      // The cascade takes no fp8 cache.
      const bool recorded = v1_instance_built(s) && (static_cast<int>(st) >= 5 || all_stages(s)) &&
                            !(st == Stage::cascade_merge && is_fp8(s.kv_dtype));
      record_and_compare(st, s, p, c.sel, recorded, expected, compared);
    }
  }
  // A full build: 16 configurations x 3 stages + 4 fp8 x 2 (no cascade), and
  // stages 1-4 of 8 of them; a quick build: fp32, fp16 and bf16 at head 128 x
  // block 16, 3 x 7, and the two fp8 cases there, 2 x 6.
  CHECK(expected == (kernels::quick_kernels_build() ? 3 * 7 + 2 * 6 : 16 * 3 + 4 * 2 + 8 * 4));
  CHECK(compared == expected);
}

TEST_CASE("recorded GPU events equal the host model, stage 5 on nhd and hnd, stages 1-5 with CSR tables",
          "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  // The entries stage 5 records on token rows (record_configs.hpp's
  // record_token_rows: each 16-bit dtype, each block size).
  const Case cases[] = {
      {DType::f16, 128, 16, {100, 17}, 4, 2, {{{0, 3, 0}, {1, 0, 0}}}},
      {DType::bf16, 128, 16, {1, 513}, 8, 2, {{{0, 1, 0}, {1, 6, 0}}}},
      {DType::f16, 128, 8, {37, 300}, 8, 1, {{{0, 3, 0}, {1, 7, 0}}}},
      {DType::f16, 96, 32, {250, 31}, 4, 4, {{{1, 3, 0}, {0, 0, 0}}}},
  };
  int expected = 0, compared = 0;
  for (const Case& c : cases) {
    ProblemSpec s = spec_of(c, 23, (&c - cases) % 2 == 0);
    for (KvLayout l : {KvLayout::nhd, KvLayout::hnd, KvLayout::vllm})
      for (PageTableForm t : {PageTableForm::padded, PageTableForm::csr}) {
        if (l == KvLayout::vllm && t == PageTableForm::padded) continue;  // the test above
        s.kv_layout = l;
        s.page_table = t;
        const PagedProblem p = make_problem(s);
        // vLLM's layout with CSR: every v1 stage of the first case; token rows: stage 5.
        std::vector<Stage> stages{Stage::warp_reduce};
        if (l == KvLayout::vllm && &c == cases)
          stages = {Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce};
        for (Stage st : stages) {
          INFO(to_string(st) << " " << s.describe() << " layout " << kv_layout_name(l) << " table "
                             << page_table_name(t));
          record_and_compare(st, s, p, c.sel, v1_instance_built(s), expected, compared);
        }
      }
  }
  // Per case: stage 5 on nhd and hnd with both tables (4) and on vLLM's
  // layout with CSR (1), the first case stages 1-4 too. A quick build holds
  // head 128 x block 16 only: the first two cases.
  CHECK(expected == (kernels::quick_kernels_build() ? 2 * 5 + 4 : 4 * 5 + 4));
  CHECK(compared == expected);
}

TEST_CASE("recorded GPU events equal the host model, stage 6 with several partitions", "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  struct V2Case {
    DType dt;
    int head, block, partition_size;
    std::vector<int> ctx;
    Selection sel;
  };
  const V2Case cases[] = {
      {DType::f16, 128, 16, 64, {200, 64}, {{{0, 1, 0}, {0, 1, 1}, {0, 1, 3}, {1, 2, 0}}}},
      {DType::f16, 128, 32, 32, {100}, {{{0, 0, 0}, {0, 0, 3}}}},
      {DType::f16, 128, 8, 128, {300, 129}, {{{0, 3, 2}, {1, 0, 1}}}},
      {DType::bf16, 64, 8, 16, {50}, {{{0, 1, 0}, {0, 1, 3}}}},
      {DType::f32, 256, 8, 64, {129}, {{{0, 0, 2}}}},
  };
  int expected = 0, compared = 0;
  for (const V2Case& c : cases) {
    ProblemSpec s;
    s.dtype = c.dt;
    s.head_size = c.head;
    s.block_size = c.block;
    s.partition_size = c.partition_size;
    s.context_lens = c.ctx;
    s.num_heads = 4;
    s.num_kv_heads = 2;
    s.seed = 5;
    INFO(s.describe());
    expected += v1_instance_built(s);
    CHECK(can_record(Stage::v2_partition, s) == v1_instance_built(s));
    if (!can_record(Stage::v2_partition, s)) continue;
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::v2_partition, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    PA_CHECK_EVENTS_EQUAL(rec.events, model_events(s, Stage::v2_partition, c.sel), s.dtype);
    ++compared;
  }
  // A full build: all 5; a quick build: the fp16 head 128 x block 16 case.
  CHECK(expected >= 1);
  CHECK(compared == expected);
}

TEST_CASE("recorded GPU events equal the host model, stage 6 reduce kernel with many partitions",
          "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  struct V2Case {
    DType dt;
    int head, block, partition_size, heads, kv_heads;
    std::vector<int> ctx;
    Selection sel;
  };
  // Partitions per sequence: 63 (1000 / 16); 19, 2 and 1 (direct: the reduce
  // block only reads the context length); 33 (1050 / 32); 32 and 1 (block 8);
  // 13 (head 192 x block 32); 3 and 8 (partitions of 64).
  const V2Case cases[] = {
      {DType::f16, 128, 16, 16, 4, 1, {1000}, {{{0, 3, 62}}}},
      {DType::bf16, 128, 16, 16, 8, 2, {300, 17, 9}, {{{0, 5, 0}, {1, 1, 1}, {2, 7, 0}}}},
      {DType::f32, 128, 16, 32, 4, 4, {1050}, {{{0, 2, 32}}}},
      {DType::bf16, 64, 8, 8, 4, 2, {250, 8}, {{{0, 1, 31}, {1, 0, 0}}}},
      {DType::f16, 192, 32, 32, 2, 1, {400}, {{{0, 1, 12}}}},
      {DType::f32, 64, 8, 64, 2, 2, {129, 500}, {{{1, 1, 7}}}},
      {DType::f32, 256, 8, 64, 2, 2, {129, 500}, {{{0, 0, 2}}}},
  };
  int expected = 0, compared = 0;
  for (const V2Case& c : cases) {
    ProblemSpec s;
    s.dtype = c.dt;
    s.head_size = c.head;
    s.block_size = c.block;
    s.partition_size = c.partition_size;
    s.context_lens = c.ctx;
    s.num_heads = c.heads;
    s.num_kv_heads = c.kv_heads;
    s.seed = 21;
    INFO(s.describe());
    expected += v1_instance_built(s);
    CHECK(can_record(Stage::v2_partition, s) == v1_instance_built(s));
    if (!can_record(Stage::v2_partition, s)) continue;
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::v2_partition, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    std::size_t reduce_events = 0;
    for (const Event& e : rec.events) reduce_events += e.partition == kReduceBlock;
    CHECK(reduce_events > 0);
    PA_CHECK_EVENTS_EQUAL(rec.events, model_events(s, Stage::v2_partition, c.sel), s.dtype);
    ++compared;
  }
  // A full build: all 7; a quick build: the three head 128 x block 16 cases.
  CHECK(expected >= 3);
  CHECK(compared == expected);
}

TEST_CASE("recorded GPU events equal the host model, stage 7 cascade (suffix V2, reduces, merge)",
          "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  struct CCase {
    DType dt;
    int head, block, partition_size, heads, kv_heads, prefix;
    std::vector<int> ctx;
    Selection sel;
  };
  const CCase cases[] = {
      // GQA, ragged, sequence 2 is all prefix (empty suffix state: lse -inf, weight 0).
      {DType::f16, 128, 16, 32, 4, 2, 64, {96, 130, 64}, {{{0, 1, 0}, {1, 3, 2}, {2, 0, 0}}}},
      // MQA, several suffix partitions, several prefix chunks (64 tokens each).
      {DType::bf16, 128, 16, 64, 8, 1, 192, {400, 260}, {{{0, 5, 3}, {1, 0, 1}}}},
      // fp32: the prefix goes through stage 6's kernels (prefix partition blocks traced).
      {DType::f32, 128, 16, 32, 4, 4, 48, {100, 77}, {{{0, 0, 0}, {1, 2, 0}}}},
      // many suffix partitions
      {DType::f16, 128, 16, 16, 2, 2, 64, {700}, {{{0, 1, 39}}}},
      // no shared prefix: the cascade is plain V2 into the output
      {DType::f16, 128, 16, 32, 4, 2, 0, {70, 20}, {{{0, 1, 2}, {1, 0, 0}}}},
      // other head / block sizes (recordable in full builds)
      {DType::f16, 80, 8, 32, 4, 2, 40, {90, 41}, {{{0, 3, 1}, {1, 0, 0}}}},
      {DType::bf16, 96, 32, 64, 2, 1, 64, {200}, {{{0, 1, 1}}}},
      {DType::f32, 64, 8, 32, 4, 1, 32, {120, 33}, {{{0, 2, 2}, {1, 3, 0}}}},
      {DType::f16, 192, 32, 32, 2, 2, 32, {100}, {{{0, 0, 1}}}},
      {DType::bf16, 64, 8, 16, 4, 4, 24, {60, 24, 41}, {{{0, 1, 2}, {1, 2, 0}, {2, 3, 1}}}},
      {DType::f32, 80, 16, 32, 4, 1, 32, {120, 33}, {{{0, 2, 2}, {1, 3, 0}}}},
  };
  int expected = 0, compared = 0;
  for (const CCase& c : cases) {
    ProblemSpec s;
    s.dtype = c.dt;
    s.head_size = c.head;
    s.block_size = c.block;
    s.partition_size = c.partition_size;
    s.context_lens = c.ctx;
    s.num_heads = c.heads;
    s.num_kv_heads = c.kv_heads;
    s.shared_prefix_len = c.prefix;
    s.seed = 13;
    INFO(s.describe());
    expected += v1_instance_built(s);
    CHECK(can_record(Stage::cascade_merge, s) == v1_instance_built(s));
    if (!can_record(Stage::cascade_merge, s)) continue;
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::cascade_merge, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    std::map<int, int> labels;
    for (const Event& e : rec.events) ++labels[e.partition];
    if (c.prefix > 0) {
      CHECK(labels.count(kMergeBlock) == 1);
      CHECK(labels.count(kPrefixReduceBlock) == 1);
    }
    CHECK(labels.count(kReduceBlock) == 1);
    PA_CHECK_EVENTS_EQUAL(rec.events, model_events(s, Stage::cascade_merge, c.sel), s.dtype);
    ++compared;
  }
  // A full build: all 11; a quick build: the five head 128 x block 16 cases.
  CHECK(expected >= 5);
  CHECK(compared == expected);
}

TEST_CASE("recording never overflows silently: a small buffer is rerun exactly", "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  ProblemSpec s;  // fp16 / 128 / 16, 100 tokens: recordable in every build
  REQUIRE(can_record(Stage::qk, s));
  const PagedProblem p = make_problem(s);
  const RecordResult big = record_stage(Stage::qk, p, {});
  REQUIRE(big.launches == 1);
  for (unsigned long long cap : {0ull, 10ull, static_cast<unsigned long long>(big.events.size() - 1)}) {
    const RecordResult small = record_stage(Stage::qk, p, {}, cap);
    CHECK(small.launches == 2);
    REQUIRE(small.events.size() == big.events.size());
    CHECK(std::memcmp(small.events.data(), big.events.data(), big.events.size() * sizeof(Event)) == 0);
  }
  const RecordResult exact = record_stage(Stage::qk, p, {}, big.events.size());
  CHECK(exact.launches == 1);
  CHECK_FALSE(big.gpu_name.empty());
}

TEST_CASE("record_stage without a GPU or instance says why", "[trace][record]") {
  ProblemSpec s;
  s.head_size = 64;
  s.block_size = 32;
  s.dtype = DType::bf16;  // not in the recording list
  const PagedProblem p = make_problem(s);
  if (recording_built()) {
    CHECK_FALSE(can_record(Stage::qk, s));
    CHECK_THROWS_AS(record_stage(Stage::qk, p, {}), std::invalid_argument);
  } else {
    CHECK_THROWS_AS(record_stage(Stage::qk, p, {}), pa::kernels::NoGpuError);
  }
  CHECK_FALSE(can_record(Stage::v2_partition, s));
  CHECK_FALSE(can_record(Stage::cascade_merge, s));
}
