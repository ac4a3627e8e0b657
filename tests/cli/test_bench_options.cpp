// pa-bench's command line and the shapes and KV pool it implies
// (cli/bench_options.hpp), without CUDA. The bad values of every flag are in
// test_bad_flags.cpp; here: what good command lines mean.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <cmath>
#include <string>
#include <vector>

#include "bench_options.hpp"

using namespace pa;
using namespace pa::bench;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::WithinRel;

namespace {

// Each of `others` with `option` added after it is refused with a message
// that `refusal` matches and that names the other option; returns how many
// were tried.
template <class Refusal>
int check_each_refused(const std::vector<std::vector<std::string>>& others, const std::vector<std::string>& option,
                       const Refusal& refusal) {
  int ran = 0;
  for (const std::vector<std::string>& other : others) {
    std::vector<std::string> args = other;
    args.insert(args.end(), option.begin(), option.end());
    INFO(other.front());
    CHECK_THROWS_WITH(parse_bench_options(args), refusal && ContainsSubstring(other.front()));
    ++ran;
  }
  return ran;
}

}  // namespace

TEST_CASE("pa-bench: no arguments are the documented defaults", "[cli][bench]") {
  const BenchOptions o = parse_bench_options({});
  CHECK(o.json == "bench.json");
  CHECK(o.iters == 100);
  CHECK(o.warmup == 10);
  CHECK(o.warmup_ms == 50);
  CHECK(o.pool_gb == 6.0);
  CHECK(o.spin_us == 50);
  CHECK(o.force_splits == 0);
  CHECK_FALSE(o.alibi);
  CHECK_FALSE(o.paged_read);
  CHECK(o.kv_dtypes == std::vector<KvDType>{KvDType::same});
  CHECK(o.layouts == std::vector<KvLayout>{KvLayout::vllm});
  CHECK_FALSE(o.quick);
  CHECK_FALSE(o.only_optimized);
  CHECK_FALSE(o.has_shape);
  CHECK(o.dtypes == std::vector<DType>{DType::f16, DType::bf16});
  CHECK_FALSE(o.help);
}

TEST_CASE("pa-bench: every option is read", "[cli][bench]") {
  const BenchOptions o = parse_bench_options({"--json", "out/r.json", "--iters", "200", "--warmup", "0",
                                              "--warmup-ms", "12.5", "--pool-gb", "0.5", "--spin-us", "0",
                                              "--splits", "4", "--dtypes", "bf16", "--shape", "2,16,4,1000,64",
                                              "--alibi", "--kv-dtypes", "auto,fp8,fp8_e5m2", "--paged-read"});
  CHECK(o.json == "out/r.json");
  CHECK(o.iters == 200);
  CHECK(o.warmup == 0);
  CHECK(o.warmup_ms == 12.5);
  CHECK(o.pool_gb == 0.5);
  CHECK(o.spin_us == 0);
  CHECK(o.force_splits == 4);
  CHECK(o.alibi);
  CHECK(o.paged_read);
  // vLLM's "fp8" is e4m3.
  CHECK(o.kv_dtypes == std::vector<KvDType>{KvDType::same, KvDType::fp8_e4m3, KvDType::fp8_e5m2});
  CHECK(o.dtypes == std::vector<DType>{DType::bf16});
  REQUIRE(o.has_shape);
  CHECK(o.shape.seqs == 2);
  CHECK(o.shape.heads == 16);
  CHECK(o.shape.kv_heads == 4);
  CHECK(o.shape.context == 1000);
  CHECK(o.shape.head_size == 64);
  CHECK(o.shape.prefix == 0);
}

TEST_CASE("pa-bench: --layouts adds layouts after vLLM's, which is always timed", "[cli][bench]") {
  CHECK(parse_bench_options({"--layouts", "hnd,nhd"}).layouts ==
        std::vector<KvLayout>{KvLayout::vllm, KvLayout::hnd, KvLayout::nhd});
  CHECK(parse_bench_options({"--layouts", "vllm,nhd"}).layouts == std::vector<KvLayout>{KvLayout::vllm, KvLayout::nhd});
  auto message = [](std::vector<std::string> args) {
    try {
      (void)parse_bench_options(args);
    } catch (const UsageError& e) {
      return std::string(e.what());
    }
    return std::string("(no error)");
  };
  CHECK_THAT(message({"--layouts", "nhd,foo"}), ContainsSubstring("unknown layout 'foo'") &&
                                                    ContainsSubstring("vllm, nhd, hnd"));
  CHECK_THAT(message({"--layouts", "nhd,nhd"}), ContainsSubstring("nhd twice"));
}

TEST_CASE("pa-bench: --dtypes keeps the order given", "[cli][bench]") {
  CHECK(parse_bench_options({"--dtypes", "bf16,fp16"}).dtypes == std::vector<DType>{DType::bf16, DType::f16});
}

TEST_CASE("pa-bench: --cascade-sweep items become cascade plan options", "[cli][bench]") {
  const BenchOptions o = parse_bench_options({"--cascade-sweep", "wgmma:2:0,mma_4warps:-1:8:optimized_lean"});
  REQUIRE(o.cascade_sweep.size() == 2);
  CHECK(o.cascade_sweep[0].text == "wgmma:2:0");
  CHECK(o.cascade_sweep[0].options.prefix == PrefixKernel::wgmma);
  CHECK(o.cascade_sweep[0].options.streams == 2);
  CHECK(o.cascade_sweep[0].options.chunks == 0);
  CHECK(o.cascade_sweep[0].options.suffix == kernels::CascadeOptions::Suffix::automatic);
  CHECK(o.cascade_sweep[1].options.prefix == PrefixKernel::mma_4warps);
  CHECK(o.cascade_sweep[1].options.streams == -1);
  CHECK(o.cascade_sweep[1].options.chunks == 8);
  CHECK(o.cascade_sweep[1].options.suffix == kernels::CascadeOptions::Suffix::optimized_lean);
}

TEST_CASE("pa-bench: --help is an option, not an error", "[cli][bench]") {
  CHECK(parse_bench_options({"--help"}).help);
  const std::string u = bench_usage();
  for (const char* flag : {"--json", "--iters", "--warmup", "--warmup-ms", "--pool-gb", "--only", "--quick",
                           "--cascade-only", "--multilevel", "--cascade-sweep", "--spin-us", "--splits", "--shape",
                           "--dtypes"}) {
    INFO(flag);
    CHECK_THAT(u, ContainsSubstring(flag));
  }
}

TEST_CASE("pa-bench: the shapes each option set times", "[cli][bench]") {
  const auto all = bench_shapes(parse_bench_options({}));
  REQUIRE(all.size() == 11);  // ten shapes, then the cascade
  CHECK(all.front().seqs == 1);
  CHECK(all.front().context == 4096);
  CHECK(all.back().prefix == 32768);
  CHECK(all.back().context == 32768 + 256);
  for (std::size_t i = 0; i + 1 < all.size(); ++i) CHECK(all[i].prefix == 0);

  CHECK(bench_shapes(parse_bench_options({"--quick"})).size() == 3);
  const auto only = bench_shapes(parse_bench_options({"--only", "optimized"}));
  CHECK(only.size() == 10);
  CHECK(only.back().prefix == 0);
  const auto one = bench_shapes(parse_bench_options({"--shape", "3,8,2,77,128"}));
  REQUIRE(one.size() == 1);
  CHECK(one[0].seqs == 3);
  CHECK(one[0].context == 77);
  const auto casc = bench_shapes(parse_bench_options({"--cascade-only"}));
  REQUIRE(casc.size() == 1);
  CHECK(casc[0].prefix == 32768);
}

TEST_CASE("pa-bench: --multilevel times its own problem, alone", "[cli][bench]") {
  CHECK(parse_bench_options({"--multilevel", "--dtypes", "bf16", "--iters", "20"}).multilevel);
  CHECK_FALSE(parse_bench_options({}).multilevel);
  const int ran = check_each_refused(
      {{"--quick"}, {"--shape", "3,8,2,77,128"}, {"--only", "optimized"}, {"--cascade-only"}, {"--alibi"},
       {"--layouts", "nhd"}, {"--kv-dtypes", "fp8"}, {"--cascade-sweep", "wgmma:1:0"}, {"--splits", "4"},
       {"--pool-gb", "2"}, {"--warmup-ms", "10"}},
      {"--multilevel"}, ContainsSubstring("--multilevel times its own problem alone"));
  CHECK(ran == 11);
}

TEST_CASE("pa-bench: the KV pool is capped by the launches, so small shapes get far less than --pool-gb",
          "[cli][bench]") {
  const BenchOptions o = parse_bench_options({});
  // One sequence of 4096 tokens, 8 KV heads of 128, fp16: 256 blocks of 16
  // tokens, 16.8 MB of K+V per set; 6 GB would be 358 sets, but only
  // iters + warmup = 110 sets are ever read: 1.85 GB.
  const KvPool small = kv_pool_of({1, 32, 8, 4096, 128}, 2, o);
  CHECK(small.set_blocks == 256);
  CHECK(small.set_bytes == 2.0 * 256 * 8 * 128 * 16 * 2);
  CHECK(small.sets == 110);
  CHECK_THAT(small.bytes, WithinRel(1.845e9, 1e-3));

  // 64 x 8192 tokens: 2.1 GB per set, 3 sets reach 6 GB.
  const KvPool big = kv_pool_of({64, 32, 8, 8192, 128}, 2, o);
  CHECK(big.set_blocks == 64 * 512);
  CHECK(big.sets == 3);
  CHECK(big.bytes >= 6e9);

  // A set larger than the pool: still two sets, so consecutive launches differ.
  BenchOptions tiny = o;
  tiny.pool_gb = 0.001;
  CHECK(kv_pool_of({64, 32, 8, 8192, 128}, 2, tiny).sets == 2);

  // The cascade set holds the shared prefix once: 2048 + 128 * 16 blocks.
  const KvPool casc = kv_pool_of(cascade_shape(), 2, o);
  CHECK(casc.set_blocks == 2048 + 128 * 16);
  CHECK(casc.sets == static_cast<int>(std::ceil(6e9 / casc.set_bytes)));

  // --iters and --warmup move the cap.
  const BenchOptions more = parse_bench_options({"--iters", "1000", "--warmup", "0"});
  CHECK(kv_pool_of({1, 32, 8, 4096, 128}, 2, more).sets == 358);
}

TEST_CASE("pa-bench: --split-sweep times its own shapes, alone; --seed needs it", "[cli][bench]") {
  const BenchOptions o = parse_bench_options({"--split-sweep", "40", "--seed", "9", "--kv-dtypes", "auto,fp8"});
  CHECK(o.split_sweep == 40);
  CHECK(o.seed == 9);
  CHECK(parse_bench_options({}).split_sweep == 0);
  CHECK(parse_bench_options({}).seed == 1);
  CHECK_THROWS_WITH(parse_bench_options({"--seed", "3"}), ContainsSubstring("--seed draws the split sweep's shapes"));
  // --multilevel's own exclusion speaks first when both are given.
  const int ran = check_each_refused(
      {{"--quick"}, {"--shape", "3,8,2,77,128"}, {"--only", "optimized"}, {"--cascade-only"}, {"--multilevel"},
       {"--layouts", "nhd"}, {"--splits", "4"}, {"--cascade-sweep", "wgmma:1:0"}},
      {"--split-sweep", "2"},
      ContainsSubstring("--split-sweep times stage 8") || ContainsSubstring("--multilevel times its own problem alone"));
  CHECK(ran == 8);
}

TEST_CASE("pa-bench: --paged-read runs beside the shape set's stage 8 rows only", "[cli][bench]") {
  CHECK(parse_bench_options({"--paged-read", "--only", "optimized", "--quick"}).paged_read);
  CHECK(parse_bench_options({"--paged-read"}).paged_read_step_ns == 0);
  CHECK(parse_bench_options({"--paged-read", "--paged-read-step-ns", "700"}).paged_read_step_ns == 700);
  CHECK_THROWS_WITH(parse_bench_options({"--paged-read-step-ns", "700"}), ContainsSubstring("it needs --paged-read"));
  CHECK_THROWS_WITH(parse_bench_options({"--paged-read", "--paged-read-step-ns", "0"}),
                    ContainsSubstring("--paged-read-step-ns"));
  const int ran = check_each_refused({{"--cascade-only"}, {"--multilevel"}, {"--split-sweep", "2"}}, {"--paged-read"},
                                     ContainsSubstring("--paged-read runs beside stage 8's rows"));
  CHECK(ran == 3);
}

// Seed 1's first split-sweep shape: seqs, context, heads, kv heads, head size.
constexpr int kFirstSweepShape[] = {2, 329, 64, 32, 64};

TEST_CASE("pa-bench: the split sweep's shapes are drawn as documented, the same on every platform", "[cli][bench]") {
  const std::vector<SweepShape> a = split_sweep_shapes(200, 1, {DType::f16, DType::bf16}, {KvDType::same, KvDType::fp8_e4m3});
  REQUIRE(a.size() == 200);
  int ragged = 0, mqa = 0, head128 = 0, short_ctx = 0, long_ctx = 0, one_seq = 0, many_seqs = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const BenchShape& s = a[i].shape;
    INFO("shape " << i);
    CHECK(a[i].dtype == (i % 2 == 0 ? DType::f16 : DType::bf16));
    CHECK(a[i].kv_dtype == ((i / 2) % 2 == 0 ? KvDType::same : KvDType::fp8_e4m3));
    REQUIRE(s.seqs >= 1);
    CHECK(s.seqs <= 256);
    CHECK(s.context >= 128);
    CHECK(s.context <= 131072);
    REQUIRE(static_cast<int>(s.context_lens.size()) == s.seqs);
    CHECK(s.context_lens[0] == s.context);
    double tokens = 0;
    bool differs = false;
    for (int c : s.context_lens) {
      CHECK(c >= s.context / 4);
      CHECK(c <= s.context);
      differs |= c != s.context;
      tokens += c;
    }
    CHECK(2.0 * 2.0 * tokens * s.kv_heads * s.head_size <= 4e9);
    CHECK(s.heads % s.kv_heads == 0);
    CHECK(s.heads / s.kv_heads <= (s.kv_heads == 1 ? 64 : 8));
    CHECK((s.head_size == 64 || s.head_size == 128 || s.head_size == 256));
    CHECK(s.block_size == 16);
    ragged += differs;
    mqa += s.kv_heads == 1;
    head128 += s.head_size == 128;
    short_ctx += s.context < 1024;
    long_ctx += s.context >= 32768;
    one_seq += s.seqs == 1;
    many_seqs += s.seqs >= 64;
  }
  // The draw's proportions (3/4 ragged, 1/5 MQA, 1/2 head 128) and both ends of each range occur.
  CHECK(ragged > 120);
  CHECK(mqa > 20);
  CHECK(mqa < 60);
  CHECK(head128 > 70);
  CHECK(short_ctx > 20);
  CHECK(long_ctx > 20);
  CHECK(one_seq > 5);
  CHECK(many_seqs > 20);
  // The same seed draws the same shapes; the dtypes do not move them.
  const std::vector<SweepShape> b = split_sweep_shapes(200, 1, {DType::bf16}, {KvDType::same});
  const std::vector<SweepShape> c = split_sweep_shapes(200, 2, {DType::bf16}, {KvDType::same});
  int same = 0, same_other_seed = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    same += a[i].shape.context_lens == b[i].shape.context_lens && a[i].shape.heads == b[i].shape.heads;
    same_other_seed += a[i].shape.context_lens == c[i].shape.context_lens;
  }
  CHECK(same == 200);
  CHECK(same_other_seed < 10);
  // Seed 1's first shape, as std::mt19937_64's fixed output sequence draws it on any platform.
  INFO("first shape: seqs " << a[0].shape.seqs << " context " << a[0].shape.context << " heads " << a[0].shape.heads
                            << "/" << a[0].shape.kv_heads << " head " << a[0].shape.head_size);
  CHECK(a[0].shape.seqs == kFirstSweepShape[0]);
  CHECK(a[0].shape.context == kFirstSweepShape[1]);
  CHECK(a[0].shape.heads == kFirstSweepShape[2]);
  CHECK(a[0].shape.kv_heads == kFirstSweepShape[3]);
  CHECK(a[0].shape.head_size == kFirstSweepShape[4]);
}

TEST_CASE("pa-bench: a ragged shape's pool counts each sequence's own blocks", "[cli][bench]") {
  BenchShape s{3, 8, 2, 100, 128};
  s.context_lens = {100, 17, 33};  // 7 + 2 + 3 blocks of 16
  const KvPool p = kv_pool_of(s, 2, parse_bench_options({}));
  CHECK(p.set_blocks == 12);
  CHECK(p.set_bytes == 2.0 * 12 * 2 * 128 * 16 * 2);
}
