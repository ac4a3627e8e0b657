// ProblemSpec validation and the host paged cache: block tables, spare blocks,
// NaN tails, shared prefix, determinism, the generator.
#include <algorithm>
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>
#include <cmath>
#include <map>
#include <set>
#include <string>

#include "pa/core/config_dispatch.hpp"
#include "pa/core/dtype_convert.hpp"
#include "pa/core/paged_cache.hpp"
#include "require_close.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;

namespace {
ProblemSpec small_spec(std::uint64_t seed) {
  ProblemSpec s;
  s.dtype = DType::f16;
  s.head_size = 64;
  s.block_size = 16;
  s.num_heads = 4;
  s.num_kv_heads = 2;
  s.context_lens = {37, 16, 1, 100};
  s.seed = seed;
  return s;
}

void require_invalid(const ProblemSpec& s, const std::string& value_text, const std::string& accepted_text) {
  REQUIRE_THROWS_AS(s.validate(), std::invalid_argument);
  REQUIRE_THROWS_WITH(s.validate(), ContainsSubstring(value_text) && ContainsSubstring(accepted_text));
  REQUIRE_THROWS_AS(make_problem(s), std::invalid_argument);
}
}  // namespace

TEST_CASE("validation names the bad value and what is accepted", "[reference][problem]") {
  const ProblemSpec good = small_spec(1);
  REQUIRE_NOTHROW(good.validate());
  ProblemSpec s = good;
  s.head_size = 100;
  require_invalid(s, "head_size 100", "64, 80, 96, 112, 128, 192, 256");
  s = good;
  s.block_size = 12;
  require_invalid(s, "block_size 12", "8, 16, 32");
  s = good;
  s.num_threads = 96;
  require_invalid(s, "num_threads 96", "accepted");
  s = good;
  s.num_heads = 6;
  s.num_kv_heads = 4;
  require_invalid(s, "num_heads 6", "num_kv_heads dividing num_heads");
  s = good;
  s.num_kv_heads = 0;
  require_invalid(s, "num_kv_heads 0", ">= 1");
  s = good;
  s.num_heads = -1;
  require_invalid(s, "num_heads -1", ">= 1");
  s = good;
  s.context_lens = {5, 0};
  require_invalid(s, "context_lens[1] = 0", ">= 1");
  s = good;
  s.context_lens = {};
  require_invalid(s, "context_lens is empty", "accepted");
  s = good;
  s.partition_size = 100;
  require_invalid(s, "partition_size 100", "positive multiple of block_size");
  s = good;
  s.partition_size = -16;
  require_invalid(s, "partition_size -16", "multiple of block_size");
  s = good;
  s.shared_prefix_len = 8;
  require_invalid(s, "shared_prefix_len 8", "multiple of block_size");
  s = good;
  s.shared_prefix_len = 32;  // longer than context 16
  require_invalid(s, "context_lens[1] = 16", "no longer than every context");
  s = good;
  s.extra_q_stride = -1;
  require_invalid(s, "extra_q_stride -1", ">= 0");
  s = good;
  s.spare_blocks = -2;
  require_invalid(s, "spare_blocks -2", ">= 0");
  s = good;
  s.logit_spread = 0.0f;
  require_invalid(s, "logit_spread", "finite value > 0");
  s = good;
  s.dtype = static_cast<DType>(7);
  require_invalid(s, "dtype 7", "fp32, fp16, bf16");
  s = good;
  s.partition_size = 0;  // one partition: accepted
  REQUIRE_NOTHROW(s.validate());
}

TEST_CASE("validation says which field is at fault (front ends name their flag from it)", "[reference][problem]") {
  const ProblemSpec good = small_spec(1);
  struct Case {
    const char* field;
    void (*change)(ProblemSpec&);
  };
  const Case cases[] = {
      {"head_size", [](ProblemSpec& s) { s.head_size = 100; }},
      {"block_size", [](ProblemSpec& s) { s.block_size = 12; }},
      {"num_threads", [](ProblemSpec& s) { s.num_threads = 96; }},
      {"num_heads", [](ProblemSpec& s) { s.num_heads = -1; }},
      {"num_kv_heads", [](ProblemSpec& s) { s.num_kv_heads = 0; }},
      {"num_kv_heads", [](ProblemSpec& s) { s.num_heads = 6, s.num_kv_heads = 4; }},
      {"context_lens", [](ProblemSpec& s) { s.context_lens = {5, 0}; }},
      {"context_lens", [](ProblemSpec& s) { s.context_lens = {}; }},
      {"partition_size", [](ProblemSpec& s) { s.partition_size = 100; }},
      {"shared_prefix_len", [](ProblemSpec& s) { s.shared_prefix_len = 8; }},
      {"extra_q_stride", [](ProblemSpec& s) { s.extra_q_stride = -1; }},
      {"spare_blocks", [](ProblemSpec& s) { s.spare_blocks = -2; }},
      {"logit_spread", [](ProblemSpec& s) { s.logit_spread = 0.0f; }},
      {"dtype", [](ProblemSpec& s) { s.dtype = static_cast<DType>(7); }},
      {"context_lens", [](ProblemSpec& s) { s.context_lens.assign(200000, 1 << 24); }},  // > 2^31 blocks
  };
  int n = 0;
  for (const Case& c : cases) {
    ProblemSpec s = good;
    c.change(s);
    std::string field;
    try {
      s.validate();
    } catch (const ProblemError& e) {
      field = e.field;
    }
    INFO("case " << n);
    CHECK(field == c.field);
    ++n;
  }
  CHECK(n == 15);
}

TEST_CASE("problem_flag_error: validate's message under the front end's flag for the field", "[core][problem]") {
  const std::map<std::string, std::string> flag_of = {{"head_size", "--head-size"}, {"num_kv_heads", "--kv-heads"}};
  ProblemSpec s = small_spec(1);
  CHECK_FALSE(problem_flag_error(s, flag_of).has_value());

  s.head_size = 100;
  std::string what;
  try {
    s.validate();
  } catch (const ProblemError& e) {
    what = e.what();
  }
  REQUIRE_FALSE(what.empty());
  CHECK(problem_flag_error(s, flag_of) == "--head-size: " + what);

  s = small_spec(1);
  s.partition_size = 100;  // a field flag_of does not name: the field's own name
  const auto error = problem_flag_error(s, flag_of);
  REQUIRE(error.has_value());
  CHECK_THAT(*error, Catch::Matchers::StartsWith("partition_size: invalid problem: "));
}

TEST_CASE("a problem too large for host memory is refused before anything is allocated", "[reference][problem]") {
  const std::int64_t limit = host_memory_limit_bytes();
  REQUIRE(limit >= std::int64_t{1} << 30);  // half of any machine that builds the lab
  ProblemSpec s = small_spec(1);
  CHECK(s.host_bytes() > 0);
  CHECK(s.host_bytes() < 1e8);
  // host_bytes grows with what the reference holds: twice the KV heads, about twice the bytes.
  ProblemSpec twice = s;
  twice.num_heads *= 2;
  twice.num_kv_heads *= 2;
  CHECK(twice.host_bytes() > 1.9 * s.host_bytes());
  // 64 sequences of 2^24 tokens, 64 KV heads of 256: about 2^40 bytes of K and
  // V alone, under the 2^31-block limit, over any machine's memory.
  s.head_size = 256;
  s.num_heads = s.num_kv_heads = 64;
  s.context_lens.assign(64, 1 << 24);
  REQUIRE(s.host_bytes() > static_cast<double>(limit));
  try {
    s.validate();
    FAIL("validate() accepted a problem of " << s.host_bytes() << " bytes");
  } catch (const ProblemError& e) {
    CHECK(e.field == "host_memory");
    CHECK_THAT(std::string(e.what()), ContainsSubstring("of host memory") && ContainsSubstring("at most") &&
                                          ContainsSubstring("GiB") && ContainsSubstring("64 sequences"));
  }
  CHECK_THROWS_AS(make_problem(s), ProblemError);  // refused, not std::bad_alloc
}

TEST_CASE("derived sizes and describe()", "[reference][problem]") {
  ProblemSpec s = small_spec(3);
  CHECK(s.num_seqs() == 4);
  CHECK(s.max_context_len() == 100);
  CHECK(s.max_blocks_per_seq() == 7);
  CHECK(s.scale() == 1.0f / 8.0f);
  s.partition_size = 32;
  CHECK(s.max_partitions() == 4);
  const std::string d = s.describe();
  CHECK_THAT(d, ContainsSubstring("fp16") && ContainsSubstring("head=64") && ContainsSubstring("ctx=[37,16,1,100]"));
}

TEST_CASE("every supported configuration dispatches to its KernelConfig", "[reference][problem]") {
  for (DType t : kAllDTypes)
    for (int h : kSupportedHeadSizes)
      for (int b : kSupportedBlockSizes) {
        const RuntimeConfig rc = make_runtime_config(t, h, b, 128);
        REQUIRE(rc.dtype == t);
        REQUIRE(rc.head_size == h);
        REQUIRE(rc.block_size == b);
        REQUIRE(rc.num_warps == 4);
        REQUIRE(rc.x * rc.elem_bytes == 16);
        REQUIRE(rc.thread_group_size * b >= 32);
      }
  const RuntimeConfig rc = make_runtime_config(DType::f16, 128, 16, 128);  // config.hpp's worked example
  CHECK(rc.thread_group_size == 2);
  CHECK(rc.x == 8);
  CHECK(rc.vec_size == 4);
  CHECK(rc.num_vecs_per_thread == 16);
  CHECK(rc.v_vec_size == 8);
  CHECK(rc.num_rows_per_thread == 8);
  REQUIRE_THROWS_WITH(make_runtime_config(DType::f16, 100, 16, 128),
                      ContainsSubstring("head size 100") && ContainsSubstring("supported"));
}

TEST_CASE("block tables: shuffled, in range, unused entries -1, spare blocks unreferenced", "[reference][problem]") {
  const auto dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  ProblemSpec s = small_spec(test::fresh_seed(11));
  s.dtype = dt;
  s.spare_blocks = 5;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  const int used = 3 + 1 + 1 + 7;
  REQUIRE(p.num_blocks == used + 5);
  REQUIRE(p.cache.num_blocks == p.num_blocks);
  REQUIRE(p.cache.x == 16 / dtype_bytes(dt));
  REQUIRE(p.max_blocks_per_seq == 7);
  REQUIRE(p.block_tables.size() == 4u * 7u);
  REQUIRE(p.q_bytes.size() == p.q.size() * dtype_bytes(dt));
  REQUIRE(p.k_bytes.size() == static_cast<std::size_t>(p.cache.total_elems()) * dtype_bytes(dt));
  REQUIRE(p.v_bytes.size() == p.k_bytes.size());
  std::set<int> referenced;
  // In place: the k-th block handed out (sequence by sequence, logical block
  // by logical block) is physical block k, as an unshuffled pool gives. (The
  // logical index lb would not do: distinct blocks can match it at most 7
  // times here, so "< 12" could not fail.)
  int identity = 0, handed_out = 0;
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    for (int lb = 0; lb < p.max_blocks_per_seq; ++lb) {
      const int e = p.block_tables[p.table.offset(seq, lb)];
      if (lb < p.num_logical_blocks(seq)) {
        REQUIRE(e >= 0);
        REQUIRE(e < p.num_blocks);
        REQUIRE(referenced.insert(e).second);  // no sharing without a prefix
        identity += e == handed_out++;
      } else {
        REQUIRE(e == kNoBlock);
      }
    }
  }
  REQUIRE(static_cast<int>(referenced.size()) == used);
  REQUIRE(handed_out == used);
  CHECK(identity < used);  // shuffled (all 12 in place: probability 5!/17!, ~3e-13)
  REQUIRE_THROWS_AS(p.physical_block(2, 1), std::out_of_range);  // past context 1
  // Spare blocks: finite garbage of large magnitude, in K and V.
  double spare_abs = 0;
  std::size_t spare_n = 0;
  for (int b = 0; b < p.num_blocks; ++b) {
    if (referenced.count(b)) continue;
    for (std::int64_t e = 0; e < p.cache.block_elems(); ++e) {
      const float k = p.k_cache[b * p.cache.block_elems() + e], v = p.v_cache[b * p.cache.block_elems() + e];
      REQUIRE(std::isfinite(k));
      REQUIRE(std::isfinite(v));
      spare_abs += std::fabs(k);
      ++spare_n;
    }
  }
  CHECK(spare_abs / spare_n > 100.0);
}

TEST_CASE("tail slots hold NaN (or 0), valid slots finite; Q padding is NaN", "[reference][problem]") {
  const bool nan_tails = GENERATE(true, false);
  ProblemSpec s = small_spec(test::fresh_seed(12));
  s.nan_tails = nan_tails;
  s.extra_q_stride = 8;
  const PagedProblem p = make_problem(s);
  REQUIRE(p.q_stride == 4 * 64 + 8);
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    const int c = p.context_len(seq), nb = p.num_logical_blocks(seq);
    for (int kvh = 0; kvh < s.num_kv_heads; ++kvh)
      for (int t = 0; t < nb * s.block_size; ++t)
        for (int d = 0; d < s.head_size; d += 7) {
          const int phys = p.physical_block(seq, t / s.block_size);
          const float k = p.k_cache[p.cache.k_offset(phys, kvh, d, t % s.block_size)];
          const float v = p.v_cache[p.cache.v_offset(phys, kvh, d, t % s.block_size)];
          if (t < c) {
            REQUIRE(std::isfinite(k));
            REQUIRE(k == p.k_at(seq, kvh, t, d));
            REQUIRE(v == p.v_at(seq, kvh, t, d));
          } else if (nan_tails) {
            REQUIRE(std::isnan(k));
            REQUIRE(std::isnan(v));
          } else {
            REQUIRE(k == 0.0f);
            REQUIRE(v == 0.0f);
          }
        }
    for (int j = 0; j < 8; ++j) REQUIRE(std::isnan(p.q[seq * p.q_stride + 4 * 64 + j]));
  }
  // Values are exactly the stored dtype values, and the bytes decode to them.
  for (std::size_t i = 0; i < p.q.size(); ++i) {
    if (!std::isnan(p.q[i])) REQUIRE(round_to_dtype(p.q[i], s.dtype) == p.q[i]);
  }
}

TEST_CASE("shared prefix: every sequence's first blocks are the same physical blocks", "[reference][problem]") {
  ProblemSpec s = small_spec(test::fresh_seed(13));
  s.block_size = 8;
  s.context_lens = {40, 25, 24, 60};
  s.shared_prefix_len = 24;
  const PagedProblem p = make_problem(s);
  const int pb = 3;
  REQUIRE(p.num_blocks == pb + (5 - pb) + (4 - pb) + (3 - pb) + (8 - pb) + s.spare_blocks);
  std::set<int> own;
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    for (int lb = 0; lb < p.num_logical_blocks(seq); ++lb) {
      if (lb < pb) REQUIRE(p.physical_block(seq, lb) == p.physical_block(0, lb));
      else REQUIRE(own.insert(p.physical_block(seq, lb)).second);
    }
    for (int t = 0; t < s.shared_prefix_len; t += 5) REQUIRE(p.k_at(seq, 1, t, 3) == p.k_at(0, 1, t, 3));
  }
  for (int lb = 0; lb < pb; ++lb) REQUIRE(own.count(p.physical_block(0, lb)) == 0);
}

TEST_CASE("problems are deterministic in the seed", "[reference][problem]") {
  const std::uint64_t seed = test::fresh_seed(14);
  ProblemSpec s = small_spec(seed);
  s.dtype = DType::bf16;
  const PagedProblem a = make_problem(s), b = make_problem(s);
  REQUIRE(a.q_bytes == b.q_bytes);
  REQUIRE(a.k_bytes == b.k_bytes);
  REQUIRE(a.v_bytes == b.v_bytes);
  REQUIRE(a.block_tables == b.block_tables);
  s.seed = seed + 1;
  const PagedProblem c = make_problem(s);
  REQUIRE(a.q_bytes != c.q_bytes);
  REQUIRE(a.k_bytes != c.k_bytes);
  // A sequence's values do not depend on the other sequences.
  ProblemSpec s2 = small_spec(seed);
  s2.dtype = DType::bf16;
  s2.context_lens = {37};
  const PagedProblem d = make_problem(s2);
  for (int t = 0; t < 37; ++t) REQUIRE(d.v_at(0, 1, t, 5) == a.v_at(0, 1, t, 5));
  s.seed = seed;
  const DenseKV kv = make_dense_kv(s, 3);
  for (int t = 0; t < 100; t += 3) REQUIRE(kv.k_at(t, 1, 9) == a.k_at(3, 1, t, 9));
}

TEST_CASE("the generator is the standard mt19937_64 with a portable normal transform", "[reference][problem]") {
  NormalRng g(5489u);  // std::mt19937_64's default seed
  std::uint64_t v = 0;
  for (int i = 0; i < 10000; ++i) v = g.next_u64();
  REQUIRE(v == 9981545732273789042ull);  // the value the C++ standard specifies
  NormalRng n(test::fresh_seed(15));
  double sum = 0, sq = 0;
  const int count = 200000;
  for (int i = 0; i < count; ++i) {
    const double x = n.next();
    REQUIRE(std::isfinite(x));
    sum += x;
    sq += x * x;
  }
  CHECK(std::fabs(sum / count) < 0.02);
  CHECK(std::fabs(sq / count - 1.0) < 0.02);
}

TEST_CASE("kv_bytes: every token once per sequence, or the shared prefix once", "[core][problem]") {
  ProblemSpec s;
  s.dtype = DType::bf16;
  s.head_size = 64;
  s.num_heads = 8;
  s.num_kv_heads = 2;
  s.context_lens = {48, 80, 33};
  const std::int64_t per_token = 2 * 2 * 64 * 2;  // K and V, 2 KV heads, head 64, 2 bytes
  CHECK(s.kv_bytes() == (48 + 80 + 33) * per_token);
  CHECK(s.kv_bytes(true) == s.kv_bytes());  // no shared prefix
  s.shared_prefix_len = 32;
  CHECK(s.kv_bytes() == (48 + 80 + 33) * per_token);
  CHECK(s.kv_bytes(true) == (32 + 16 + 48 + 1) * per_token);
  s.context_lens = {32};  // one sequence: nothing is shared
  CHECK(s.kv_bytes(true) == 32 * per_token);
}
