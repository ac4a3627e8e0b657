// Stage 8's split planner (pa/index/optimized_split.hpp) without a GPU: its
// device inputs, its refusals, and the split sweeps shipped in assets/bench:
// each sweep's "planned_splits" must be what the planner picks today from
// the inputs the file records, so a planner change that is not measured again
// fails here instead of leaving a table that describes another planner.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_floating_point.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "pa/index/dtype.hpp"
#include "pa/index/optimized_split.hpp"
#include "strict_json.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::WithinAbs;
using Catch::Matchers::WithinRel;

namespace {

int as_int(const test::JsonValue& v) { return std::stoi(v.text); }
double as_double(const test::JsonValue& v) { return std::stod(v.text); }

}  // namespace

TEST_CASE("split plan: the DRAM peak from memory clock and bus width", "[kernels][split]") {
  CHECK_THAT(opt_dram_peak_gbps(2619000, 5120), WithinAbs(3352.32, 1e-6));  // H100 SXM, HBM3
  CHECK_THAT(opt_dram_peak_gbps(3201000, 6144), WithinAbs(4916.736, 1e-6));  // H200, HBM3e
  CHECK(kOptModelDramGbps == opt_dram_peak_gbps(2619000, 5120));
  CHECK(opt_dram_peak_gbps(0, 5120) == 0);
}

TEST_CASE("split plan: a device without a DRAM peak is refused, a forced split needs none", "[kernels][split]") {
  OptSplitInput in;
  in.num_seqs = 1;
  in.units = 8;
  in.head_size = 128;
  in.block_size = 16;
  in.max_context_len = 4096;
  in.sm_count = 132;
  in.ctas_per_sm = 2;
  in.dram_gbps = 0;
  CHECK_THROWS_WITH(opt_choose_split(in, 0), ContainsSubstring("dram_gbps 0") && ContainsSubstring("accepted: > 0"));
  const OptSplit forced = opt_choose_split(in, 8);
  CHECK(forced.splits == 8);
  CHECK(forced.split_blocks == 32);
  in.dram_gbps = kOptModelDramGbps;
  const OptSplit planned = opt_choose_split(in, 0);
  CHECK(planned.splits > 1);  // 8 CTAs on 132 SMs: split
  CHECK(planned.splits * planned.split_blocks >= 256);
}

namespace {

// One sequence of `blocks` blocks of head 128, block 16, fp16 (8 KB of K and V
// a block) on `sm` SMs of `cps` slots, an H100's DRAM peak.
OptSplitInput replay_input(int sm, int cps, int units, int blocks) {
  OptSplitInput in;
  in.num_seqs = 1;
  in.units = units;
  in.head_size = 128;
  in.block_size = 16;
  in.unit_heads = 4;
  in.max_context_len = blocks * 16;
  in.sm_count = sm;
  in.ctas_per_sm = cps;
  in.dram_gbps = kOptModelDramGbps;
  return in;
}

}  // namespace

TEST_CASE("split plan: the replay's time, exact where one rate holds", "[kernels][split]") {
  using R = OptReplay;
  constexpr double b = 100 * 8192.0;  // one CTA's bytes: 100 blocks
  const double hbm = R::kHbmFraction * kOptModelDramGbps * 1e3;
  SECTION("one CTA alone: the start, then its bytes at a CTA's rate") {
    const OptSplitInput in = replay_input(1, 1, 1, 100);
    OptReplay m(in);
    CHECK_THAT(m.time_us(100, 1, INFINITY), WithinRel(R::kT0 + b / R::kCtaBw, 1e-12));
  }
  SECTION("two CTAs on one SM share its rate; the longer one ends alone") {
    OptSplitInput in = replay_input(1, 2, 2, 100);
    OptReplay m(in);
    CHECK_THAT(m.time_us(100, 1, INFINITY), WithinRel(R::kT0 + b / (R::kSmBw / 2), 1e-12));
    in.max_context_len = 200 * 16;  // two splits of one unit: 100 + 100 blocks, then the merge
    in.units = 1;
    CHECK_THAT(OptReplay(in).time_us(100, 2, INFINITY),
               WithinRel(R::kT0 + b / (R::kSmBw / 2) + R::kM0 + R::kM1, 1e-12));
    in.max_context_len = 150 * 16;  // 100 + 50 blocks: both at half the SM, then 50 alone
    CHECK_THAT(OptReplay(in).time_us(100, 2, INFINITY),
               WithinRel(R::kT0 + b / 2 / (R::kSmBw / 2) + b / 2 / R::kCtaBw + R::kM0 + R::kM1, 1e-12));
  }
  SECTION("132 CTAs, one per SM, ask for more than the DRAM gives: its rate for all") {
    const OptSplitInput in = replay_input(132, 1, 132, 100);
    REQUIRE(132 * R::kCtaBw > hbm);
    CHECK_THAT(OptReplay(in).time_us(100, 1, INFINITY), WithinRel(R::kT0 + 132 * b / hbm, 1e-12));
  }
  SECTION("a CTA past its sequence's end costs kEmpty") {
    OptSplitInput in = replay_input(1, 1, 1, 1);
    const int len = 16;
    in.context_lens = &len;
    in.first_token = 16;  // a cascade suffix with no token of its own
    in.max_context_len = 1;
    CHECK_THAT(OptReplay(in).time_us(1, 1, INFINITY), WithinRel(R::kEmpty, 1e-12));
  }
  SECTION("more than kReplayWaves waves: the closed form") {
    const OptSplitInput in = replay_input(1, 1, 3, 100);  // 3 CTAs, one slot
    const double slot_us = 3 * (R::kT0 + b / R::kCtaBw);
    REQUIRE(slot_us > 3 * b / hbm);
    CHECK_THAT(OptReplay(in).time_us(100, 1, INFINITY),
               WithinRel(R::kT0 + slot_us + R::kTailCta * b / R::kCtaBw, 1e-12));
  }
  SECTION("a limit below the time stops the replay") {
    const OptSplitInput in = replay_input(132, 1, 132, 100);
    CHECK(OptReplay(in).time_us(100, 1, R::kT0 + 132 * b / hbm - 1) == INFINITY);
  }
}

TEST_CASE("split plan: each sequence's own length", "[kernels][split]") {
  OptSplitInput in = replay_input(132, 2, 8, 2048);  // 8 KV heads, up to 32768 tokens
  in.num_seqs = 64;
  SECTION("every length at the maximum plans as no lengths") {
    int shapes = 0;
    for (int seqs : {1, 8, 64})
      for (int ctx : {100, 4096, 32768}) {
        in.num_seqs = seqs;
        in.max_context_len = ctx;
        const std::vector<int> lens(seqs, ctx);
        in.context_lens = nullptr;
        const OptSplit without = opt_choose_split(in, 0);
        in.context_lens = lens.data();
        const OptSplit with = opt_choose_split(in, 0);
        INFO(seqs << " x " << ctx);
        CHECK(with.splits == without.splits);
        CHECK(with.split_blocks == without.split_blocks);
        ++shapes;
      }
    CHECK(shapes == 9);
  }
  SECTION("one long sequence among short ones is split; planned at the maximum, it is not") {
    std::vector<int> lens(64, 16);
    lens[0] = 32768;
    const OptSplit without = opt_choose_split(in, 0);  // 512 CTAs of 32768 tokens: two waves
    in.context_lens = lens.data();
    const OptSplit with = opt_choose_split(in, 0);  // 8 CTAs stream alone unless split
    CHECK(without.splits == 1);
    CHECK(with.splits >= 8);
  }
  SECTION("a cascade suffix: lengths past first_token plan as those ranges alone") {
    const std::vector<int> full{4096 + 1024, 4096 + 3000, 4096 + 16, 4096 + 2048};
    const std::vector<int> own{1024, 3000, 16, 2048};
    in.num_seqs = 4;
    in.max_context_len = 3000;  // the longest attended range
    in.context_lens = own.data();
    const OptSplit a = opt_choose_split(in, 0);
    in.context_lens = full.data();
    in.first_token = 4096;
    const OptSplit b = opt_choose_split(in, 0);
    CHECK(a.splits == b.splits);
    CHECK(a.split_blocks == b.split_blocks);
    CHECK(a.splits > 1);
  }
  SECTION("a length outside 0 to the maximum is refused by index and value") {
    std::vector<int> lens(64, 100);
    in.max_context_len = 100;
    lens[5] = 101;
    in.context_lens = lens.data();
    CHECK_THROWS_WITH(opt_choose_split(in, 0), ContainsSubstring("context_lens[5] 101") &&
                                                   ContainsSubstring("accepted: 0 to max_context_len 100"));
    lens[5] = -1;
    CHECK_THROWS_WITH(opt_choose_split(in, 0), ContainsSubstring("context_lens[5] -1"));
  }
}

TEST_CASE("split plan: the launcher's cache plans again exactly when an input or a sequence's blocks differ",
          "[kernels][split]") {
  OptSplitInput in = replay_input(132, 2, 8, 2048);
  in.num_seqs = 4;
  const std::vector<int> lens{32768, 100, 9000, 16};
  std::vector<int> copy = lens;  // the same lengths in another array
  in.context_lens = lens.data();
  OptSplitCache cache;
  const OptSplit first = cache.choose(in, 0);
  CHECK(cache.plans() == 1);
  in.context_lens = copy.data();
  const OptSplit again = cache.choose(in, 0);
  CHECK(cache.plans() == 1);  // equal lengths: the kept split
  CHECK(again.splits == first.splits);
  CHECK(again.split_blocks == first.split_blocks);
  copy[2] = 9001;  // one length one token longer, in the same last block (9000 = 562.5 blocks of 16)
  const OptSplit same_blocks = cache.choose(in, 0);
  CHECK(cache.plans() == 1);  // the kept split, which is what planning these lengths gives
  CHECK(same_blocks.splits == opt_choose_split(in, 0).splits);
  CHECK(same_blocks.split_blocks == opt_choose_split(in, 0).split_blocks);
  copy[2] = 9009;  // into the next block
  const OptSplit changed = cache.choose(in, 0);
  CHECK(cache.plans() == 2);
  CHECK(changed.splits == opt_choose_split(in, 0).splits);
  copy[2] = 2048 * 16 + 1;  // past max_context_len: refused although the blocks' count may match a kept plan
  CHECK_THROWS_WITH(cache.choose(in, 0), ContainsSubstring("context_lens[2] 32769"));
  CHECK(cache.plans() == 2);
  copy[2] = 9009;
  in.context_lens = nullptr;  // no lengths: another input, even where the plan is the same
  cache.choose(in, 0);
  CHECK(cache.plans() == 3);
  cache.choose(in, 0);
  CHECK(cache.plans() == 3);
  cache.choose(in, 5);  // a forced split is another input
  CHECK(cache.plans() == 4);
  CHECK(cache.choose(in, 5).splits == 5);
  CHECK(cache.plans() == 4);
  in.dram_gbps = 0;  // refused: nothing kept
  CHECK_THROWS_WITH(cache.choose(in, 0), ContainsSubstring("dram_gbps 0"));
  CHECK(cache.plans() == 4);
  in.dram_gbps = kOptModelDramGbps;
  CHECK(cache.choose(in, 5).splits == 5);
  CHECK(cache.plans() == 4);
  for (int field = 0; field < 6; ++field) {  // each field of the input counts
    OptSplitInput other = in;
    if (field == 0) other.units = 16;
    if (field == 1) other.unit_heads = 8;
    if (field == 2) other.max_context_len = 16384;
    if (field == 3) other.sm_count = 114;
    if (field == 4) other.ctas_per_sm = 1;
    if (field == 5) other.first_token = 16;
    const long long before = cache.plans();
    cache.choose(other, 5);
    INFO("field " << field);
    CHECK(cache.plans() == before + 1);
    cache.choose(in, 5);
  }
}

TEST_CASE("split plan: every shipped split sweep was measured with today's planner", "[kernels][split]") {
  int files = 0;
  for (const auto& e : std::filesystem::directory_iterator(PA_ASSETS_DIR "/bench")) {
    if (e.path().extension() != ".json") continue;
    std::ifstream f(e.path());
    std::stringstream ss;
    ss << f.rdbuf();
    const test::JsonValue j = test::StrictJson::parse(ss.str());
    const test::JsonValue* kind = j.find("benchmark");
    if (kind == nullptr || kind->text != "split_sweep") continue;
    ++files;
    INFO(e.path().filename().string() << " (" << j.at("gpu").text << ")");
    int checked = 0;
    for (const test::JsonValue& s : j.at("shapes").items) {
      if (s.at("status").text != "ok") continue;
      OptSplitInput in;
      in.num_seqs = as_int(s.at("seqs"));
      in.units = as_int(s.at("units"));
      in.head_size = as_int(s.at("head_size"));
      in.block_size = as_int(s.at("block_size"));
      const auto dt = dtype_from_name(s.at("dtype").text);
      const auto kv = kv_dtype_from_name(s.at("kv_dtype").text);
      REQUIRE(dt.has_value());
      REQUIRE(kv.has_value());
      in.elem_bytes = kv_elem_bytes(*dt, *kv);
      in.blocks_per_step = as_int(s.at("blocks_per_step"));
      in.max_context_len = as_int(s.at("context"));
      in.sm_count = as_int(j.at("sm_count"));
      in.ctas_per_sm = as_int(s.at("ctas_per_sm"));
      in.dram_gbps = as_double(j.at("dram_peak_gbps"));
      const int group = as_int(s.at("heads")) / as_int(s.at("kv_heads"));
      in.unit_heads = opt_unit_num_heads(0, opt_head_chunks(group), group);
      std::vector<int> lens;  // pa-bench plans with each sequence's length
      for (const test::JsonValue& c : s.at("context_lens").items) lens.push_back(as_int(c));
      REQUIRE(static_cast<int>(lens.size()) == in.num_seqs);
      in.context_lens = lens.data();
      const OptSplit p = opt_choose_split(in, 0);
      INFO("shape " << s.at("index").text);
      CHECK(p.splits == as_int(s.at("planned_splits")));
      CHECK(p.split_blocks == as_int(s.at("planned_split_blocks")));
      ++checked;
    }
    CHECK(checked == as_int(j.at("shapes_run")));
    CHECK(checked >= 40);
  }
  CHECK(files >= 1);
}
