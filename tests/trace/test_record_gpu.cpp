// The recorded GPU trace equals the host model (label gpu; SKIPPED without a
// GPU or a CUDA build). For every stage with a recording instance and several
// configurations (dtypes, head sizes, block sizes 8/16/32, GQA/MQA, ragged
// contexts, several selected blocks), each thread's events must be the
// model's, field for field and in program order (epoch, seq_in_thread);
// values (logits, maxima, sums, probabilities, outputs) must agree within a
// float tolerance, since the GPU sums in float and the model in double.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <cstring>
#include <map>
#include <sstream>
#include <tuple>

#include "replay_check.hpp"
#include "gpu_skip.hpp"
#include "pa/index/events.hpp"
#include "pa/reference/paged_cache.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/record.hpp"

using namespace pa;
using namespace pa::trace;

namespace {

bool same_fields(Event a, Event b) {
  a.value = b.value = 0.f;  // compared separately
  return std::memcmp(&a, &b, sizeof a) == 0;
}
bool close_values(float got, float want) {
  if (std::isnan(want) || std::isnan(got)) return std::isnan(want) && std::isnan(got);
  if (std::isinf(want) || std::isinf(got)) return got == want;
  return std::abs(got - want) <= 2e-3f * std::max(1.0f, std::abs(want));
}

// Empty when equal; else a report of the first differences.
std::string compare(const std::vector<Event>& got, const std::vector<Event>& want) {
  std::ostringstream os;
  int shown = 0;
  using Key = std::tuple<int, int, int, int, int>;
  std::map<Key, std::pair<std::vector<Event>, std::vector<Event>>> threads;
  for (const Event& e : got) threads[{e.seq, e.head, e.partition, e.warp, e.lane}].first.push_back(e);
  for (const Event& e : want) threads[{e.seq, e.head, e.partition, e.warp, e.lane}].second.push_back(e);
  for (auto& [k, gw] : threads) {
    auto& [g, w] = gw;
    if (g.size() != w.size() && shown < 5) {
      os << "thread (seq " << std::get<0>(k) << ", head " << std::get<1>(k) << ", warp " << std::get<3>(k)
         << ", lane " << std::get<4>(k) << "): " << g.size() << " recorded events, model " << w.size() << "\n";
      ++shown;
    }
    for (std::size_t i = 0; i < std::min(g.size(), w.size()) && shown < 5; ++i) {
      if (!same_fields(g[i], w[i]) || !close_values(g[i].value, w[i].value)) {
        os << "  recorded: " << describe(g[i]) << " value " << g[i].value << "\n  model:    " << describe(w[i])
           << " value " << w[i].value << "\n";
        ++shown;
      }
    }
  }
  if (got.size() != want.size()) os << "total: " << got.size() << " recorded vs " << want.size() << " model\n";
  return os.str();
}

struct Case {
  DType dt;
  int head, block;
  std::vector<int> ctx;
  int heads, kv_heads;
  Selection sel;
};

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
      {DType::f32, 256, 32, {70}, 2, 2, {}},
      {DType::f32, 80, 16, {19, 200}, 4, 1, {{{0, 3, 0}, {1, 1, 0}}}},
      {DType::f32, 64, 8, {64}, 4, 4, {}},
  };
  int compared = 0;
  for (const Case& c : cases) {
    ProblemSpec s;
    s.dtype = c.dt;
    s.head_size = c.head;
    s.block_size = c.block;
    s.context_lens = c.ctx;
    s.num_heads = c.heads;
    s.num_kv_heads = c.kv_heads;
    s.seed = 11;
    const PagedProblem p = make_problem(s);
    for (Stage st : {Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce,
                     Stage::v2_partition, Stage::cascade_merge}) {
      if (!can_record(st, s)) continue;
      INFO(to_string(st) << " " << s.describe());
      const RecordResult rec = record_stage(st, p, c.sel);
      PA_CHECK_REPLAY_ORDER(rec.events);
      const auto model = model_events(s, st, c.sel);
      const std::string diff = compare(rec.events, model);
      INFO(diff);
      CHECK(diff.empty());
      CHECK(rec.events.size() == model.size());
      ++compared;
    }
  }
  if (compared == 0) SKIP("no recording instance for any case (PA_QUICK_KERNELS build?)");
  WARN("recorded == model compared for " << compared << " (configuration, stage) pairs");
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
      {DType::f32, 256, 32, 64, {129}, {{{0, 0, 2}}}},
  };
  int compared = 0;
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
    if (!can_record(Stage::v2_partition, s)) continue;
    INFO(s.describe());
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::v2_partition, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    const auto model = model_events(s, Stage::v2_partition, c.sel);
    const std::string diff = compare(rec.events, model);
    INFO(diff);
    CHECK(diff.empty());
    ++compared;
  }
  if (compared == 0) SKIP("no recording instance for any V2 case (PA_QUICK_KERNELS build?)");
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
  // Partitions per sequence: 63 (1000 / 16), 19 and 2, 1 (direct: the reduce
  // block only reads the context length), 33 for fp32 / block 32.
  const V2Case cases[] = {
      {DType::f16, 128, 16, 16, 4, 1, {1000}, {{{0, 3, 62}}}},
      {DType::bf16, 128, 16, 16, 8, 2, {300, 17, 9}, {{{0, 5, 0}, {1, 1, 1}, {2, 7, 0}}}},
      {DType::f32, 128, 16, 32, 4, 4, {1050}, {{{0, 2, 32}}}},
      {DType::f16, 64, 8, 8, 4, 2, {250, 8}, {{{0, 1, 31}, {1, 0, 0}}}},
      {DType::bf16, 256, 32, 32, 2, 1, {400}, {{{0, 1, 12}}}},
      {DType::f32, 64, 8, 64, 2, 2, {129, 500}, {{{1, 1, 7}}}},
      {DType::f32, 256, 32, 64, 2, 2, {129, 500}, {{{0, 0, 2}}}},
  };
  int compared = 0;
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
    if (!can_record(Stage::v2_partition, s)) continue;
    INFO(s.describe());
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::v2_partition, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    const auto model = model_events(s, Stage::v2_partition, c.sel);
    std::size_t reduce_events = 0;
    for (const Event& e : rec.events) reduce_events += e.partition == kReduceBlock;
    CHECK(reduce_events > 0);
    const std::string diff = compare(rec.events, model);
    INFO(diff);
    CHECK(diff.empty());
    ++compared;
  }
  if (compared == 0) SKIP("no recording instance for any case (PA_QUICK_KERNELS build?)");
  WARN("stage 6 (partition + reduce kernels) recorded == model for " << compared << " configurations");
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
      {DType::f16, 64, 8, 32, 4, 2, 40, {90, 41}, {{{0, 3, 1}, {1, 0, 0}}}},
      {DType::bf16, 256, 32, 64, 2, 1, 64, {200}, {{{0, 1, 1}}}},
      {DType::f32, 64, 8, 32, 4, 1, 32, {120, 33}, {{{0, 2, 2}, {1, 3, 0}}}},
      {DType::f16, 256, 32, 32, 2, 2, 32, {100}, {{{0, 0, 1}}}},
      {DType::bf16, 64, 8, 16, 4, 4, 24, {60, 24, 41}, {{{0, 1, 2}, {1, 2, 0}, {2, 3, 1}}}},
      {DType::f32, 80, 16, 32, 4, 1, 32, {120, 33}, {{{0, 2, 2}, {1, 3, 0}}}},
  };
  int compared = 0;
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
    if (!can_record(Stage::cascade_merge, s)) continue;
    INFO(s.describe());
    const PagedProblem p = make_problem(s);
    const RecordResult rec = record_stage(Stage::cascade_merge, p, c.sel);
    PA_CHECK_REPLAY_ORDER(rec.events);
    const auto model = model_events(s, Stage::cascade_merge, c.sel);
    std::map<int, int> labels;
    for (const Event& e : rec.events) ++labels[e.partition];
    if (c.prefix > 0) {
      CHECK(labels.count(kMergeBlock) == 1);
      CHECK(labels.count(kPrefixReduceBlock) == 1);
    }
    CHECK(labels.count(kReduceBlock) == 1);
    const std::string diff = compare(rec.events, model);
    INFO(diff);
    CHECK(diff.empty());
    CHECK(rec.events.size() == model.size());
    ++compared;
  }
  if (compared == 0) SKIP("no recording instance for any cascade case (PA_QUICK_KERNELS build?)");
  WARN("stage 7 recorded == model for " << compared << " configurations");
}

TEST_CASE("recording never overflows silently: a small buffer is rerun exactly", "[gpu][trace][record]") {
  PA_REQUIRE_GPU();
  ProblemSpec s;  // fp16 / 128 / 16, 100 tokens
  if (!can_record(Stage::qk, s)) SKIP("no recording instance for fp16/128/16");
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
