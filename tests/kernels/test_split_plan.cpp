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

#include "pa/index/dtype.hpp"
#include "pa/index/optimized_split.hpp"
#include "strict_json.hpp"

using namespace pa;
using Catch::Matchers::ContainsSubstring;
using Catch::Matchers::WithinAbs;

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
