// The command line: accepted forms and the usage errors.
#include <catch2/catch_test_macros.hpp>

#include <string>
#include <utility>

#include "core/args.hpp"
#include "pa/index/events.hpp"

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
  CHECK_THROWS_AS(parse_args({"--lesson", "10"}), UsageError);
  CHECK(parse_args({"--lesson", "9"}).lesson == 9);
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
  CHECK(parse_args({"--shards", "8,round_robin"}).shard_gpus == 8);
  CHECK(parse_args({"--shards", "8,round_robin"}).shard_policy == 1);
  CHECK(parse_args({"--shards", "2"}).shard_gpus == 2);
  CHECK_FALSE(parse_args({"--shards", "2"}).shard_policy.has_value());
  CHECK(parse_args({"--levels", "8:1024,4:256,1:37"}).levels == "8:1024,4:256,1:37");
  CHECK_THROWS_AS(parse_args({"--levels", "8x1024"}), UsageError);
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
  CHECK(b.block_label == 2);
  CHECK(parse_args({"--block", "1,5"}).block_label == 0);
  try {
    parse_args({"--lesson", "12"});
  } catch (const UsageError& e) {
    CHECK(std::string(e.what()).find("12") != std::string::npos);
    CHECK(std::string(e.what()).find("[0, 9]") != std::string::npos);
  }
}

TEST_CASE("pa-viewer --block reaches every kind of thread block, SEQ,HEAD,BLOCK as in the Problem tab", "[viewer][args]") {
  // Each accepted spelling, the label it gives (pa/index/events.hpp), the
  // model partition that traces it, and its name in messages.
  struct Case {
    const char* text;
    int label, model_partition;
    const char* name;
  };
  const Case cases[] = {
      {"0", 0, 0, "0"},
      {"7", 7, 7, "7"},
      {"reduce", pa::kReduceBlock, 0, "reduce"},
      {"-1", pa::kReduceBlock, 0, "reduce"},
      {"prefix_reduce", pa::kPrefixReduceBlock, 0, "prefix_reduce"},
      {"-2", pa::kPrefixReduceBlock, 0, "prefix_reduce"},
      {"merge", pa::kMergeBlock, 0, "merge"},
      {"-3", pa::kMergeBlock, 0, "merge"},
      {"prefix:0", pa::kPrefixBlockBase, 0, "prefix:0"},
      {"prefix:3", pa::kPrefixBlockBase + 3, 3, "prefix:3"},
  };
  int ran = 0;
  for (const Case& c : cases) {
    INFO(c.text);
    const Args a = parse_args({"--block", std::string("2,3,") + c.text});
    CHECK(a.block_seq == 2);
    CHECK(a.block_head == 3);
    CHECK(a.block_label == c.label);
    CHECK(parse_block_label(c.text) == c.label);
    CHECK(model_partition_of_label(c.label) == c.model_partition);
    CHECK(block_label_text(c.label) == c.name);
    ++ran;
  }
  CHECK(ran == 10);
  CHECK(pa::block_role(parse_block_label("prefix:2")) == pa::BlockRole::prefix);
  CHECK(pa::block_role(parse_block_label("merge")) == pa::BlockRole::merge);

  // Bad values: the message names the value and what is accepted.
  const std::pair<const char*, const char*> bad[] = {
      {"0,0,-4", "'-4'"}, {"0,0,reduced", "'reduced'"}, {"0,0,prefix:", "'prefix:'"},
      {"0,0,prefix:x", "'prefix:x'"}, {"0,0,2.5", "'2.5'"}, {"0,-1", "'-1'"}, {"x,0", "'x'"},
      {"0", "'0'"}, {"0,0,0,0", "'0,0,0,0'"},
  };
  int refused = 0;
  for (const auto& [arg, named] : bad) {
    INFO(arg);
    try {
      parse_args({"--block", arg});
      FAIL("accepted");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(what.find("--block") != std::string::npos);
      CHECK(what.find(named) != std::string::npos);
      ++refused;
    }
  }
  CHECK(refused == 9);
  try {
    parse_block_label("reduced");
    FAIL("accepted");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    for (const char* word : {"reduce", "prefix_reduce", "merge", "prefix:C", "N >= 0"})
      CHECK(what.find(word) != std::string::npos);
  }
}

TEST_CASE("pa-viewer --timeline and --timeline-view: levels, blocks of any kernel, and what is refused", "[viewer][args]") {
  const Args a = parse_args({"--timeline", "t.patl"});
  CHECK(a.timeline_file == "t.patl");
  CHECK_FALSE(a.timeline_view.has_value());
  struct Good {
    const char* text;
    TimelineLevel level;
    int sm;
    pa::trace::KernelRole kernel;
    std::uint32_t block;
  };
  const Good good[] = {
      {"grid", TimelineLevel::grid, 0, pa::trace::KernelRole::main, 0},
      {"sm:7", TimelineLevel::sm, 7, pa::trace::KernelRole::main, 0},
      {"block:12", TimelineLevel::block, 0, pa::trace::KernelRole::main, 12},
      {"block:reduce:3", TimelineLevel::block, 0, pa::trace::KernelRole::reduce, 3},
      {"block:prefix_reduce:0", TimelineLevel::block, 0, pa::trace::KernelRole::prefix_reduce, 0},
  };
  int n = 0;
  for (const Good& g : good) {
    INFO(g.text);
    const Args v = parse_args({"--timeline", "t.patl", "--timeline-view", g.text});
    REQUIRE(v.timeline_view.has_value());
    CHECK(v.timeline_view->level == g.level);
    CHECK(v.timeline_view->sm == g.sm);
    CHECK(v.timeline_view->kernel == g.kernel);
    CHECK(v.timeline_view->block == g.block);
    ++n;
  }
  CHECK(n == 5);
  const char* bad[] = {"", "grid:1", "sm", "sm:-1", "sm:x", "block", "block:x", "block:warp:1", "block:reduce:1:2", "smx:1"};
  int m = 0;
  for (const char* text : bad) {
    INFO(text);
    try {
      parse_args({"--timeline", "t.patl", "--timeline-view", text});
      FAIL("accepted");
    } catch (const UsageError& e) {
      CHECK(std::string(e.what()).find("--timeline-view") != std::string::npos);
      CHECK(std::string(e.what()).find("accepted: grid, sm:S") != std::string::npos);
    }
    ++m;
  }
  CHECK(m == 10);
  CHECK_THROWS_AS(parse_args({"--timeline-view", "grid"}), UsageError);  // needs --timeline
  CHECK_THROWS_AS(parse_args({"--timeline"}), UsageError);
  CHECK(parse_args({"--keys", "F", "--screenshot", "o.png"}).keys == "F");
  // The scripted wheel and drag the timeline's screenshots use.
  const Args w = parse_args({"--screenshot", "o.png", "--mouse", "5,6", "--wheel", "-3"});
  CHECK(w.wheel == -3);
  const Args d = parse_args({"--screenshot", "o.png", "--mouse", "5,6", "--drag", "-200,7"});
  REQUIRE(d.drag.has_value());
  CHECK(d.drag->first == -200);
  CHECK(d.drag->second == 7);
  CHECK_THROWS_AS(parse_args({"--screenshot", "o.png", "--wheel", "1"}), UsageError);  // needs --mouse
  CHECK_THROWS_AS(parse_args({"--screenshot", "o.png", "--mouse", "5,6", "--drag", "3"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--screenshot", "o.png", "--mouse", "5,6", "--drag", "3,4", "--click"}), UsageError);
  CHECK(usage().find("--timeline FILE") != std::string::npos);
}

TEST_CASE("pa-viewer --kv-dtype, --k-scale, --v-scale: pa-lab's names and values, and what is refused", "[viewer][args]") {
  // Every name the core's one parse accepts (kv_dtype_from_name), as pa-lab takes them.
  const std::pair<const char*, pa::KvDType> good[] = {
      {"auto", pa::KvDType::same},
      {"fp8", pa::KvDType::fp8_e4m3},
      {"fp8_e4m3", pa::KvDType::fp8_e4m3},
      {"fp8_e5m2", pa::KvDType::fp8_e5m2},
  };
  int n = 0;
  for (const auto& [name, kv] : good) {
    INFO(name);
    CHECK(parse_args({"--kv-dtype", name}).kv_dtype == kv);
    ++n;
  }
  CHECK(n == 4);
  CHECK_FALSE(parse_args({}).kv_dtype.has_value());
  const Args s = parse_args({"--kv-dtype", "fp8_e5m2", "--k-scale", "0.25", "--v-scale", "2e-3"});
  CHECK(s.k_scale == 0.25f);
  CHECK(s.v_scale == 2e-3f);
  CHECK_FALSE(parse_args({"--kv-dtype", "fp8"}).k_scale.has_value());  // chosen from the data
  CHECK(usage().find("--kv-dtype") != std::string::npos);
  CHECK(usage().find(pa::kKvDTypeNamesText) != std::string::npos);
  CHECK(usage().find("--k-scale") != std::string::npos);

  // Bad values: the message names the flag, the value and what is accepted.
  struct Bad {
    std::vector<std::string> args;
    const char* flag;
    const char* value;
    const char* accepted;
  };
  const Bad bad[] = {
      {{"--kv-dtype", "fp16"}, "--kv-dtype", "'fp16'", pa::kKvDTypeNamesText},
      {{"--kv-dtype", "FP8"}, "--kv-dtype", "'FP8'", pa::kKvDTypeNamesText},
      {{"--kv-dtype", ""}, "--kv-dtype", "''", pa::kKvDTypeNamesText},
      {{"--kv-dtype", "fp8", "--k-scale", "0"}, "--k-scale", "'0'", "a finite number > 0"},
      {{"--kv-dtype", "fp8", "--k-scale", "-1"}, "--k-scale", "'-1'", "a finite number > 0"},
      {{"--kv-dtype", "fp8", "--v-scale", "inf"}, "--v-scale", "'inf'", "a finite number > 0"},
      {{"--kv-dtype", "fp8", "--v-scale", "nan"}, "--v-scale", "'nan'", "a finite number > 0"},
      {{"--kv-dtype", "fp8", "--v-scale", "0.5x"}, "--v-scale", "'0.5x'", "a finite number > 0"},
      // A scale without an fp8 cache: the scale has nothing to scale.
      {{"--k-scale", "0.5"}, "--k-scale", "no --kv-dtype", "--kv-dtype fp8, fp8_e4m3 or fp8_e5m2"},
      {{"--kv-dtype", "auto", "--v-scale", "0.5"}, "--v-scale", "got auto", "--kv-dtype fp8, fp8_e4m3 or fp8_e5m2"},
  };
  int refused = 0;
  for (const Bad& b : bad) {
    INFO(b.args[0] << " " << b.args[1]);
    try {
      parse_args(b.args);
      FAIL("accepted");
    } catch (const UsageError& e) {
      const std::string what = e.what();
      CHECK(what.find(b.flag) != std::string::npos);
      CHECK(what.find(b.value) != std::string::npos);
      CHECK(what.find(b.accepted) != std::string::npos);
      ++refused;
    }
  }
  CHECK(refused == 10);
  CHECK_THROWS_AS(parse_args({"--kv-dtype"}), UsageError);
  CHECK_THROWS_AS(parse_args({"--kv-dtype", "fp8", "--kv-dtype", "fp8"}), UsageError);

  // The problem check names the flag at fault: fp8 with fp32 queries.
  pa::ProblemSpec spec;
  spec.dtype = pa::DType::f32;
  spec.kv_dtype = pa::KvDType::fp8_e4m3;
  const Args a = parse_args({"--dtype", "fp32", "--kv-dtype", "fp8"});
  try {
    check_args_problem(a, spec);
    FAIL("accepted");
  } catch (const UsageError& e) {
    const std::string what = e.what();
    CHECK(what.find("--kv-dtype") != std::string::npos);
    CHECK(what.find("fp32") != std::string::npos);
    CHECK(what.find("fp16 or bf16") != std::string::npos);
  }
  spec.dtype = pa::DType::bf16;
  CHECK_NOTHROW(check_args_problem(a, spec));
}
