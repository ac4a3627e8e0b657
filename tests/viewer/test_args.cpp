// The command line: accepted forms and the usage errors.
#include <catch2/catch_test_macros.hpp>

#include "core/args.hpp"

using namespace pa::viewer;

TEST_CASE("pa-viewer arguments parse", "[viewer][args]") {
  const Args a = parse_args({"--lesson", "2", "--step", "5", "--screenshot", "o.png", "--size", "1280x800", "--select",
                             "warp=1,lane=3", "--context", "100,37", "--dtype", "bf16", "--granularity", "step"});
  CHECK(a.lesson == 2);
  CHECK(a.step == 5);
  CHECK(a.screenshot == "o.png");
  CHECK(a.width == 1280);
  CHECK(a.height == 800);
  CHECK(a.sel_warp == 1);
  CHECK(a.sel_lane == 3);
  CHECK(a.context_lens == std::vector<int>{100, 37});
  CHECK(a.dtype == pa::DType::bf16);
  CHECK(a.coarse);
  const Args k = parse_args({"--select", "k=4,17,3"});
  CHECK(k.sel_kv == 'k');
  CHECK(k.sel_pb == 4);
  CHECK(k.sel_d == 17);
  CHECK(k.sel_t == 3);
  CHECK(parse_args({"--help"}).help);
  CHECK(parse_args({}).lesson == 1);
  CHECK(usage().find("--screenshot") != std::string::npos);
}

TEST_CASE("bad pa-viewer arguments are usage errors naming the problem", "[viewer][args]") {
  CHECK_THROWS_AS(parse_args({"--bogus"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--lesson"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--lesson", "9"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--lesson", "x"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--step", "-1"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--size", "1280"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--size", "10x10"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--select", "lane=3"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--select", "k=1,2"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--select", "thread=3"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--dtype", "fp8"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--granularity", "warp"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--context", "10,,x"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--dump-layout", "x.txt"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--exercise-resize"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--tab", "nope"}), UsageError);
  CHECK(parse_args({"--tab", "partitions"}).tab == "partitions");
  CHECK_THROWS_AS(parse_args({"--block", "1"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--click"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--keys", "R"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--keys", "X", "--screenshot", "o.png"}), UsageError);
  CHECK(parse_args({"--keys", "RL 4?", "--screenshot", "o.png"}).keys == "RL 4?");
  CHECK_THROWS_AS(parse_args({"--mouse", "3"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--scale", "0"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--scale", "abc"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--scale", "2x"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--scale", "5"}), UsageError);
  CHECK(parse_args({"--scale", "1.5"}).scale == 1.5f);
  CHECK_FALSE(parse_args({}).scale.has_value());
  CHECK_THROWS_AS(parse_args({"--bench-while-loading"}), UsageError);
  CHECK(parse_args({"--bench", "5", "--bench-while-loading"}).bench_while_loading);
  CHECK_THROWS_AS(parse_args({"--bench", "5", "--screenshot", "o.png"}), UsageError);
  const Args b = parse_args({"--block", "1,5,2"});
  CHECK(b.block_seq == 1);
  CHECK(b.block_head == 5);
  CHECK(b.block_partition == 2);
  try {
    parse_args({"--lesson", "12"});
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("12") != std::string::npos);
    CHECK(std::string(e.what()).find("[0, 8]") != std::string::npos);
  }
}
