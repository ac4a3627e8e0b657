// Host model of stage 8 (trace/src/host_model_optimized.cpp): counts per lane
// and byte offsets worked out by hand for fp16, head 128, block 16, GQA 4:1;
// the swizzle's conflict-free ldmatrix reads; every K/V byte of the context
// copied exactly once over all CTAs; split CTAs, a split with no work, the
// last CTA's merge; the plan equal to the launcher's heuristic; trace files.
#include <catch2/catch_test_macros.hpp>
#include <catch2/matchers/catch_matchers_string.hpp>

#include <algorithm>
#include <cstring>
#include <map>
#include <optional>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "pa/index/optimized.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/analysis.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"
#include "../support/spec_of.hpp"

using namespace pa;
using namespace pa::trace;

namespace {

ProblemSpec opt_spec(DType dt, int head, int block, std::vector<int> ctx, int heads, int kv_heads) {
  return test::spec_of(dt, head, block, heads, kv_heads, std::move(ctx), ProblemSpec{}.seed);
}
ModelOptions splits(int n) {
  ModelOptions o;
  o.optimized.force_splits = n;
  return o;
}
std::vector<Event> lane_events(const std::vector<Event>& ev, int warp, int lane, int partition = 0) {
  std::vector<Event> out;
  for (const Event& e : ev)
    if (e.warp == warp && e.lane == lane && e.partition == partition) out.push_back(e);
  std::sort(out.begin(), out.end(), [](const Event& a, const Event& b) { return a.seq_in_thread < b.seq_in_thread; });
  return out;
}
int count(const std::vector<Event>& ev, Step s, Op o) {
  return static_cast<int>(std::count_if(ev.begin(), ev.end(), [&](const Event& e) { return e.step == s && e.op == o; }));
}
// A copy, not a pointer: callers pass lane_events(...)'s temporary, which dies
// at the end of the statement (a pointer into it was a use-after-free under ASan).
std::optional<Event> find(const std::vector<Event>& ev, Step s, Op o, int iter, int nth) {
  for (const Event& e : ev)
    if (e.step == s && e.op == o && e.iter == iter && nth-- == 0) return e;
  return std::nullopt;
}
// Same rules as the recording tracer: epochs count barriers, seq_in_thread 0..n-1.
void check_program_order(const std::vector<Event>& ev) {
  std::map<std::tuple<int, int, int, int, int>, std::vector<Event>> threads;
  for (const Event& e : ev) threads[{e.seq, e.head, e.partition, e.warp, e.lane}].push_back(e);
  for (auto& [k, v] : threads) {
    std::sort(v.begin(), v.end(), [](const Event& a, const Event& b) { return a.seq_in_thread < b.seq_in_thread; });
    int barriers = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      REQUIRE(v[i].seq_in_thread == static_cast<int>(i));
      REQUIRE(v[i].epoch == barriers);
      if (v[i].op == Op::barrier) ++barriers;
    }
  }
}

}  // namespace

TEST_CASE("stage 8 model, fp16 head 128 block 16, GQA 4:1, 100 tokens, one split: by hand", "[trace][model][optimized]") {
  // OptConfig<f16,128,16,1>: x = 8, 256 chunks per K (or V) tile = 8 per lane,
  // 3 stages per warp, 8 QK k-steps, 2 n-tiles, 1 PV k-step, 8 dim tiles.
  // 7 blocks = 7 steps: warp 0 steps 0 and 4 (blocks 0, 4), warp 1: 1, 5;
  // warp 2: 2, 6; warp 3: 3. The unit is kv head 0 with query heads 0..3.
  using Cfg = OptConfig<DType::f16, 128, 16, 1>;
  static_assert(Cfg::kStages == 3 && Cfg::kTileChunks == 256 && Cfg::kQkKSteps == 8 && Cfg::kDimTiles == 8);
  const ProblemSpec s = opt_spec(DType::f16, 128, 16, {100}, 8, 2);
  const PagedProblem p = make_problem(s);
  const auto ev = model_events(s, Stage::optimized, {}, splits(1));
  check_program_order(ev);
  for (const Event& e : ev) {
    REQUIRE(e.stage == Stage::optimized);
    REQUIRE(e.head == 0);
    REQUIRE(e.kv_head == 0);
    REQUIRE(e.partition == 0);
  }

  // Events per lane: prologue (table entry if the lane's window block exists,
  // context length), Q fragments (lanes 0-15: heads 0..3, 8 k-steps x 2
  // registers), per step: issue = 1 shuffle + 8 chunks x (K copy, K smem,
  // V copy, V smem) = 33; compute = QK 2 n-tiles x 4 x (ldmatrix + 2 mma) =
  // 24, softmax 3 + rescale 3, PV 8 x (ldmatrix + mma) = 16: 46.
  // Epilogue: barrier; 2 shuffles (+ 2 stat stores on lanes 0 mod 4);
  // 2 x 16 O stores = 32; barrier; one item of 4 dims (4 heads x 32 items
  // over 128 threads) x (4 max loads + 4 x (sum load + 16-byte O load) + one
  // 8-byte output store) = 13.
  CHECK(lane_events(ev, 0, 0).size() == 2 + 16 + 2 * 33 + 2 * 46 + 1 + 4 + 32 + 1 + 13);  // 227
  CHECK(lane_events(ev, 0, 1).size() == 225);  // table entry (block 4), no stat stores
  CHECK(lane_events(ev, 0, 2).size() == 224);  // window block 8 does not exist
  CHECK(lane_events(ev, 0, 16).size() == 210);  // no table entry, no Q rows (heads 4..7 are not in the unit)
  CHECK(lane_events(ev, 3, 0).size() == 2 + 16 + 33 + 46 + 1 + 4 + 32 + 1 + 13);  // one step
  CHECK(count(ev, Step::barrier, Op::barrier) == 2 * 128);
  CHECK(count(ev, Step::out_store, Op::global_store) == 128);  // one store of 4 dims a thread
  CHECK(count(ev, Step::q_load, Op::global_load) == 4 * (4 * 128 / 2));  // each warp: 4 heads x 128 dims, 2 per event
  CHECK(count(ev, Step::k_load, Op::async_copy) == 7 * 256);
  CHECK(count(ev, Step::split_arrive, Op::atomic) == 0);  // one split: no arrival, no workspace
  CHECK(count(ev, Step::partition_store, Op::global_store) == 0);

  const int phys0 = p.block_tables[p.table.offset(0, 0)];
  const std::int64_t tile0 = static_cast<std::int64_t>(phys0) * 2 * 2048 * 2;  // (phys*2 kv heads + 0) * 2048 elems * 2 B
  const auto w0l5 = lane_events(ev, 0, 5);
  // K chunk L = 5 (token 5, dims 0..7) and L = 37 (token 5, dims 16..23).
  const std::optional<Event> k0 = find(w0l5, Step::k_load, Op::async_copy, 0, 0);
  REQUIRE(k0);
  CHECK(k0->byte_offset == tile0 + 80);
  CHECK(k0->bytes == 16);
  CHECK(k0->token == 5);
  CHECK(k0->dim_begin == 0);
  CHECK(k0->physical_block == phys0);
  const std::optional<Event> k0s = find(w0l5, Step::k_load, Op::shared_store, 0, 0);
  REQUIRE(k0s);
  CHECK(k0s->tensor == Tensor::kv_smem);
  CHECK(k0s->byte_offset == 80);  // swizzle(5) = 5
  const std::optional<Event> k1 = find(w0l5, Step::k_load, Op::async_copy, 0, 1);
  REQUIRE(k1);
  CHECK(k1->byte_offset == tile0 + 37 * 16);
  CHECK(k1->dim_begin == 16);
  CHECK(find(w0l5, Step::k_load, Op::shared_store, 0, 1).value().byte_offset == 16 * (37 ^ 4));  // swizzle(37) = 33
  // V chunk L = 3 of lane 3: dim 1, tokens 8..15, after the 256 K chunks of the step.
  const auto w0l3 = lane_events(ev, 0, 3);
  const std::optional<Event> v0 = find(w0l3, Step::v_load, Op::async_copy, 0, 0);
  REQUIRE(v0);
  CHECK(v0->byte_offset == tile0 + 3 * 16);
  CHECK(v0->token == 8);
  CHECK(v0->dim_begin == 1);
  CHECK(find(w0l3, Step::v_load, Op::shared_store, 0, 0).value().byte_offset == 16 * (256 + 3));
  // Warp 1's stages start after warp 0's 3 stages x 2 x 256 chunks.
  CHECK(find(lane_events(ev, 1, 0), Step::k_load, Op::shared_store, 0, 0).value().byte_offset == 16 * 1536);

  // Zero fill: block 6 (tokens 96..99, 4 valid) is warp 2's step 1. K chunk
  // of lane 4 (token 100): nothing read; V chunk of lane 0 (tokens 96..103): 8 bytes.
  const std::optional<Event> kz = find(lane_events(ev, 2, 4), Step::k_load, Op::async_copy, 1, 0);
  REQUIRE(kz);
  CHECK(kz->token == 100);
  CHECK(kz->bytes == 0);
  CHECK(kz->byte_offset == -1);
  CHECK(find(lane_events(ev, 2, 4), Step::k_load, Op::shared_store, 1, 0).value().bytes == 16);  // zero-filled
  const std::optional<Event> vz = find(lane_events(ev, 2, 0), Step::v_load, Op::async_copy, 1, 0);
  REQUIRE(vz);
  CHECK(vz->token == 96);
  CHECK(vz->bytes == 8);

  // ldmatrix rows. QK, step 0, n-tile 0, k-steps 0-1, lane 9: token 1, dim
  // chunk 1 = step chunk 17, swizzled to 19.
  const std::optional<Event> lk = find(lane_events(ev, 0, 9), Step::k_smem_load, Op::shared_load, 0, 0);
  REQUIRE(lk);
  CHECK(lk->byte_offset == 16 * 19);
  CHECK(lk->bytes == 16);
  CHECK(lk->token == 1);
  CHECK(lk->dim_begin == 8);
  // PV, step 0, dim tile 0, lane 10: dim 10, tokens 0..7 = step chunk 20, swizzled to 22.
  const std::optional<Event> lv = find(lane_events(ev, 0, 10), Step::v_smem_load, Op::shared_load, 0, 0);
  REQUIRE(lv);
  CHECK(lv->byte_offset == 16 * (256 + 22));
  CHECK(lv->dim_begin == 10);
  CHECK(lv->token == 0);

  // Analyses: the swizzle makes every ldmatrix (4 phases of 8 rows) and every
  // cp.async destination conflict-free; the K/V copies are fully coalesced.
  const auto reqs = memory_requests(ev);
  int ldsm = 0, copies = 0, v_copies = 0;
  for (const auto& r : reqs) {
    const Event& e = ev[r.events.front()];
    if (e.tensor == Tensor::kv_smem) {
      INFO(describe(e));
      CHECK(r.wavefronts == r.ideal_wavefronts);
      if (e.op == Op::shared_load) {
        ++ldsm;
        CHECK(r.wavefronts == 4);
      }
    }
    if (e.op == Op::async_copy && e.tensor == Tensor::k_cache && e.token >= 0 && e.token < 96) {
      ++copies;
      CHECK(r.sectors == r.ideal_sectors);
      CHECK(r.sectors == 16);  // 32 lanes x 16 contiguous bytes, each sector landing whole
      CHECK(r.l2_requests == 4);  // and each 128-byte line in one 128-byte span
    }
    if (e.op == Op::async_copy && e.tensor == Tensor::v_cache && e.token >= 0 && e.token < 96) {
      ++v_copies;
      CHECK(r.sectors == r.ideal_sectors);  // V's destinations keep each sector and line whole too
      CHECK(r.sectors == 16);
      CHECK(r.l2_requests == 4);
    }
  }
  CHECK(ldsm == 7 * (2 * 4 + 8));
  CHECK(copies > 0);
  CHECK(v_copies > 0);
}

TEST_CASE("stage 8 model: bf16 queries with an fp8 cache rescale Q into fp16 after its loads, before the copies",
          "[trace][model][optimized][fp8]") {
  // Per head tile: two q_scale shuffles inside the lane's quad (the row
  // maximum), then one q_scale compute (the fragments rewritten in fp16),
  // right after the Q loads. fp16 queries convert nothing. GQA 4:1 has one head tile, 16:1 two.
  static_assert(OptConfig<DType::bf16, 128, 16, 1, 0, 0, KvDType::fp8_e4m3>::kQkFp16);
  static_assert(!OptConfig<DType::f16, 128, 16, 1, 0, 0, KvDType::fp8_e4m3>::kQkFp16);
  int cases = 0;
  for (const DType dt : {DType::bf16, DType::f16})
    for (const int group : {4, 16}) {
      ProblemSpec s = opt_spec(dt, 128, 16, {70}, group, 1);
      s.kv_dtype = KvDType::fp8_e4m3;
      const int ht = group > 8 ? 2 : 1;
      const bool scaled = dt == DType::bf16;
      const auto ev = model_events(s, Stage::optimized, {}, splits(1));
      check_program_order(ev);
      CHECK(count(ev, Step::q_scale, Op::shuffle) == (scaled ? 2 * ht * 128 : 0));
      CHECK(count(ev, Step::q_scale, Op::compute) == (scaled ? ht * 128 : 0));
      for (const int lane : {0, 5, 31}) {
        INFO(dtype_name(dt) << " group " << group << " lane " << lane);
        const auto le = lane_events(ev, 1, lane);
        std::vector<std::pair<Op, int>> got;  // (op, src lane) of the q_scale events, in order
        std::size_t last_q = 0, first_scale = le.size(), last_scale = 0, first_k = le.size();
        for (std::size_t i = 0; i < le.size(); ++i) {
          if (le[i].step == Step::q_load) last_q = i;
          if (le[i].step == Step::q_scale) {
            got.push_back({le[i].op, le[i].src_lane});
            first_scale = std::min(first_scale, i);
            last_scale = i;
          }
          if (le[i].step == Step::k_load && first_k == le.size()) first_k = i;
        }
        std::vector<std::pair<Op, int>> want;
        if (scaled) {
          for (int h = 0; h < ht; ++h) {
            want.push_back({Op::shuffle, lane ^ 1});
            want.push_back({Op::shuffle, lane ^ 2});
          }
          for (int h = 0; h < ht; ++h) want.push_back({Op::compute, -1});
        }
        CHECK(got == want);
        if (scaled) {
          CHECK(last_q < first_scale);  // after the lane's Q loads
          CHECK(last_scale < first_k);  // Q is in fp16 before the first copy is issued
        }
        ++cases;
      }
    }
  CHECK(cases == 12);
}

TEST_CASE("stage 8 model: without swizzle the V ldmatrix rows would conflict", "[trace][model][optimized]") {
  // The 8 rows of a V ldmatrix phase are 8 dims of one token group: step
  // chunks d*2 + q, 32 bytes apart. Unswizzled they fall into 4 bank groups
  // (2-way conflict); swizzled into 8 (none).
  using Cfg = OptConfig<DType::f16, 128, 16, 1>;
  std::vector<LaneAccess> plain, swz;
  for (int lane = 0; lane < 8; ++lane) {
    const int s = Cfg::v_row_chunk(Cfg::pv_ldsm_dim(0, lane), Cfg::pv_ldsm_group(0, lane));
    plain.push_back({lane, 16 * s, 16});
    swz.push_back({lane, Cfg::v_smem_byte(0, 0, s) - 16 * Cfg::kStepChunks, 16});
  }
  CHECK(shared_wavefronts(plain).wavefronts == 2);
  CHECK(shared_wavefronts(swz).wavefronts == 1);
}

TEST_CASE("stage 8 model: the epilogue's shared, workspace and output accesses, as the viewer's analysis counts them",
          "[trace][model][optimized]") {
  // The analysis behind the viewer's Requests panel (memory_requests,
  // traffic_by_step) on the model's events of one split CTA: the warp
  // merge's fragment stores and item loads pass shared memory in the fewest
  // wavefronts for their bytes (the padded rows), and the split state's
  // stores and the merge's loads fetch the fewest sectors. Heads 80 and 112
  // (20 and 28 items a head) are the exceptions, a cost of the padding: a
  // 16-byte load passes in quarter warps, and where a head's row ends inside
  // one (items 20 and 60 of the CTA's 80; 28 and 84 of its 112), its 8 lanes
  // meet a 2-way conflict: 2 wavefronts more per round of the 4 warps' loads,
  // 4 rounds, 2 CTAs = 16.
  struct Case {
    int head, heads, kv_heads, splits;
    std::int64_t extra_item_load_wavefronts;
  };
  int ran = 0;
  for (const Case& c : {Case{128, 32, 8, 4, 0}, Case{64, 32, 2, 3, 0}, Case{256, 16, 1, 2, 0}, Case{80, 32, 8, 2, 16}, Case{112, 32, 8, 2, 16}}) {
    INFO("head " << c.head << ", " << c.heads << "/" << c.kv_heads << " heads, " << c.splits << " splits");
    const ProblemSpec s = opt_spec(DType::f16, c.head, 16, {900}, c.heads, c.kv_heads);
    Selection sel;
    for (int sp = 0; sp < c.splits; ++sp) sel.blocks.push_back({0, 0, sp});
    const auto ev = model_events(s, Stage::optimized, sel, splits(c.splits));
    const auto req = memory_requests(ev);
    const std::vector<StepTraffic> traffic = traffic_by_step(ev, req);
    auto at = [&](Step step, Tensor tensor, Op op) {
      for (const StepTraffic& t : traffic)
        if (t.step == step && t.tensor == tensor && t.op == op) return t;
      FAIL("no traffic for that step");
      return StepTraffic{};
    };
    const StepTraffic stores = at(Step::warp_reduce, Tensor::out_scratch, Op::shared_store);
    CHECK(stores.requests > 0);
    CHECK(stores.wavefronts == stores.ideal_wavefronts);
    const StepTraffic loads = at(Step::warp_reduce, Tensor::out_scratch, Op::shared_load);
    CHECK(loads.requests > 0);
    CHECK(loads.wavefronts == loads.ideal_wavefronts + c.extra_item_load_wavefronts);
    const StepTraffic ws_stores = at(Step::partition_store, Tensor::workspace, Op::global_store);
    CHECK(ws_stores.sectors == ws_stores.ideal_sectors);
    const StepTraffic merge = at(Step::merge, Tensor::workspace, Op::global_load);
    CHECK(merge.requests > 0);
    CHECK(merge.sectors == merge.ideal_sectors);
    // The merger's output: each lane's four dims in one 8-byte store, a
    // warp's 32 items contiguous where they lie in one head.
    const StepTraffic out = at(Step::out_store, Tensor::output, Op::global_store);
    CHECK(out.requests > 0);
    CHECK(out.sectors == out.ideal_sectors);
    ++ran;
  }
  CHECK(ran == 5);
}

TEST_CASE("stage 8 model: splits, a split with no work, the last CTA's merge", "[trace][model][optimized]") {
  // 3 sequences (600, 1, 37 tokens), forced 4 splits of 10 blocks: sequence 0
  // has 4 active splits, sequence 1 one (split 0), sequence 2 one.
  const ProblemSpec s = opt_spec(DType::f16, 128, 16, {600, 1, 37}, 8, 2);
  const OptimizedModelPlan plan = optimized_model_plan(s, splits(4).optimized);
  REQUIRE(plan.splits == 4);
  REQUIRE(plan.split_blocks == 10);
  Selection sel;
  for (int sp = 0; sp < 4; ++sp) sel.blocks.push_back({0, 5, sp});  // head 5 = unit 1 (heads 4..7)
  sel.blocks.push_back({1, 0, 0});
  sel.blocks.push_back({1, 0, 2});  // no work
  const auto ev = model_events(s, Stage::optimized, sel, splits(4));
  check_program_order(ev);
  std::set<std::tuple<int, int, int>> ctas;
  for (const Event& e : ev) ctas.insert({e.seq, e.head, e.partition});
  CHECK(ctas.size() == 6);
  CHECK(ctas.count({0, 4, 0}) == 1);  // head 5 is named by its unit's first head
  for (const Event& e : ev) CHECK(e.kv_head == (e.seq == 0 ? 1 : 0));

  auto of = [&](int seq, int part) {
    std::vector<Event> out;
    for (const Event& e : ev)
      if (e.seq == seq && e.partition == part) out.push_back(e);
    return out;
  };
  // The no-work split: each thread loads its window entry (blocks 20 + warp
  // + 4 lane below the table's 38 columns: 5 + 5 + 4 + 4 lanes; the entries
  // are unused, -1) and the context length, then returns.
  const auto idle = of(1, 2);
  CHECK(count(idle, Step::block_table_load, Op::global_load) == 128 + 18);
  CHECK(idle.size() == 128 + 18);
  // Sequence 0: every split writes its state and arrives; split 3 (the last
  // active split) merges by default.
  for (int sp = 0; sp < 4; ++sp) {
    const auto c = of(0, sp);
    INFO("split " << sp);
    CHECK(count(c, Step::partition_store, Op::global_store) == 128 + 2 * 4);  // one 16-byte O store a thread
    CHECK(count(c, Step::split_arrive, Op::atomic) == 1);
    // The merger's 128 threads each own 4 dims of one of the 4 heads and
    // load, per split, its head's max and sum and its 4 floats of output (one load).
    CHECK(count(c, Step::merge, Op::global_load) == (sp == 3 ? 128 * 4 * (2 + 1) : 0));
    CHECK(count(c, Step::out_store, Op::global_store) == (sp == 3 ? 128 : 0));
    CHECK(count(c, Step::barrier, Op::barrier) == 4 * 128);  // the merge itself has none
    for (const Event& e : c)
      if (e.op == Op::atomic) CHECK(e.value == (sp == 3 ? 1.f : 0.f));
  }
  // The merger's workspace loads of the partial outputs (16 bytes each, four
  // dims) cover every split's 4 heads x 128 floats exactly once, and a warp's
  // load of them reads 128 consecutive floats of one head; each of the 4
  // splits x 4 heads x (max, sum) stat words is loaded by the 32 threads of
  // its head, and by no other.
  {
    std::set<std::int64_t> out_bytes;
    std::map<std::int64_t, int> stat_loads;
    std::map<std::pair<int, int>, std::vector<std::int64_t>> warp_load;  // (warp, n-th load of its lanes)
    std::map<int, int> nth;  // per thread
    int loads = 0;
    for (const Event& e : of(0, 3)) {
      if (e.step != Step::merge || e.op != Op::global_load) continue;
      if (e.dim_count == 4) {
        CHECK(e.bytes == 16);
        ++loads;
        CHECK(out_bytes.insert(e.byte_offset).second);
        warp_load[{e.warp, nth[e.warp * 32 + e.lane]++}].push_back(e.byte_offset);
      } else {
        CHECK(e.bytes == 4);
        ++stat_loads[e.byte_offset];
      }
    }
    CHECK(loads == 4 * 128);
    CHECK(out_bytes.size() == 4 * 128);
    CHECK(warp_load.size() == 4 * 4);  // 4 warps x 4 splits
    for (auto& [key, bytes] : warp_load) {
      REQUIRE(bytes.size() == 32);
      std::sort(bytes.begin(), bytes.end());
      CHECK(bytes.back() - bytes.front() == 31 * 16);
    }
    CHECK(stat_loads.size() == 4 * 4 * 2);
    for (const auto& [byte, n] : stat_loads) CHECK(n == 32);
  }
  // Sequence 1 (1 token): split 0 is its only active split: it arrives last and merges alone.
  CHECK(count(of(1, 0), Step::merge, Op::global_load) == 128 * (2 + 1));
  // Given another arrival order, another CTA merges, with the same events.
  ModelOptions o = splits(4);
  o.optimized.last_arrivals.push_back({0, 1, 1});
  const auto ev2 = model_events(s, Stage::optimized, sel, o);
  std::vector<Event> m3, m1;
  for (const Event& e : ev)
    if (e.seq == 0 && e.partition == 3 && e.step == Step::merge) m3.push_back(e);
  for (const Event& e : ev2)
    if (e.seq == 0 && e.partition == 1 && e.step == Step::merge) m1.push_back(e);
  REQUIRE(m3.size() == m1.size());
  REQUIRE_FALSE(m1.empty());
  for (std::size_t i = 0; i < m1.size(); ++i) {
    CHECK(m1[i].byte_offset == m3[i].byte_offset);
    CHECK(m1[i].lane == m3[i].lane);
  }
}

TEST_CASE("stage 8 model: every K and V byte of the context is copied exactly once, in every layout",
          "[trace][model][optimized][layouts]") {
  int ran = 0;
  for (const auto& [dt, hs, bs, heads, kvh, nsplit] :
       std::vector<std::tuple<DType, int, int, int, int, int>>{{DType::f16, 128, 16, 8, 2, 3},
                                                               {DType::bf16, 64, 8, 4, 4, 2},
                                                               {DType::f16, 80, 32, 16, 1, 1},
                                                               {DType::bf16, 256, 32, 32, 1, 2}}) {
    for (const KvLayout layout : kAllKvLayouts) {
      ProblemSpec s = opt_spec(dt, hs, bs, {200, 1, 65}, heads, kvh);
      s.kv_layout = layout;
      INFO(s.describe() << " layout " << kv_layout_name(layout));
      const PagedProblem p = make_problem(s);
      const KvLayoutGeometry geo{layout, p.cache};
      const OptimizedModelPlan plan = optimized_model_plan(s, splits(nsplit).optimized);
      Selection all;
      for (int q = 0; q < s.num_seqs(); ++q)
        for (int u = 0; u < plan.units; ++u)
          for (int sp = 0; sp < plan.splits; ++sp)
            all.blocks.push_back({q, opt_unit_first_head(u, plan.head_chunks, plan.group), sp});
      const auto ev = model_events(s, Stage::optimized, all, splits(nsplit));
      check_program_order(ev);
      // Every byte read, keyed by the tensor it lives in: nhd and hnd keep K
      // and V in one tensor, so their K and V bytes share one key space.
      std::map<std::pair<int, std::int64_t>, int> bytes;
      const int elem = dtype_bytes(dt);
      for (const Event& e : ev) {
        if (e.op != Op::async_copy || e.bytes == 0) continue;
        // The copy's first byte is the layout's address of its first
        // element (pa/index/kv_layout.hpp), and its bytes are contiguous.
        const bool k = e.tensor == Tensor::k_cache;
        const std::int64_t want = (k ? geo.k_offset(e.physical_block, e.kv_head, e.dim_begin, e.token % bs)
                                     : geo.v_offset(e.physical_block, e.kv_head, e.dim_begin, e.token % bs)) * elem;
        REQUIRE(e.byte_offset == want);
        const int space = geo.one_tensor() ? 0 : (k ? 0 : 1);
        for (int b = 0; b < e.bytes; ++b) ++bytes[{space, e.byte_offset + b}];
      }
      std::int64_t want = 0;
      for (int c : s.context_lens) want += static_cast<std::int64_t>(c) * hs * elem * kvh * 2;
      CHECK(static_cast<std::int64_t>(bytes.size()) == want);
      for (const auto& [key, n] : bytes) REQUIRE(n == plan.head_chunks);  // once per unit of a kv head
      // Every output element is written once (each store writes 4 dims).
      std::set<std::int64_t> out;
      for (const Event& e : ev)
        if (e.step == Step::out_store && e.op == Op::global_store) {
          REQUIRE(e.bytes == 4 * elem);
          for (int b = 0; b < e.bytes; b += elem) CHECK(out.insert(e.byte_offset + b).second);
        }
      CHECK(static_cast<int>(out.size()) == s.num_seqs() * heads * hs);
      ++ran;
    }
  }
  CHECK(ran == 12);
}

TEST_CASE("stage 8 model: a token-row cache changes the copies' addresses, nothing else a thread computes",
          "[trace][model][optimized][layouts]") {
  // The same CTA over the vLLM and the HND cache: the same events in the same
  // order per thread, except the K/V copies' global and shared addresses, the
  // fragment loads' shared addresses and the (token, dims) each copy and each
  // V fragment load covers; everything else, values included (scores,
  // outputs), equal exactly.
  ProblemSpec s = opt_spec(DType::f16, 128, 16, {100, 37}, 8, 2);
  const Selection sel{{{0, 4, 0}, {1, 0, 0}}};
  const auto a = model_events(s, Stage::optimized, sel, splits(1));
  s.kv_layout = KvLayout::hnd;
  const auto b = model_events(s, Stage::optimized, sel, splits(1));
  REQUIRE(a.size() == b.size());
  std::size_t moved = 0, same = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const Event& x = a[i];
    const Event& y = b[i];
    REQUIRE(x.step == y.step);
    REQUIRE(x.op == y.op);
    REQUIRE(x.warp == y.warp);
    REQUIRE(x.lane == y.lane);
    REQUIRE(x.seq_in_thread == y.seq_in_thread);
    const bool copy = x.step == Step::k_load || x.step == Step::v_load;
    // Shared memory holds each tile in its cache's order: K fragment rows
    // (k_smem_load) move too.
    const bool frag = x.step == Step::v_smem_load || x.step == Step::k_smem_load;
    if (copy || frag) {
      if (x.byte_offset != y.byte_offset || x.token != y.token || x.dim_begin != y.dim_begin) ++moved;
    } else {
      CHECK(x.byte_offset == y.byte_offset);
      CHECK(x.token == y.token);
      CHECK(std::memcmp(&x.value, &y.value, sizeof x.value) == 0);
      ++same;
    }
  }
  CHECK(moved > 0);
  CHECK(same > 0);
}

TEST_CASE("traces refuse the layouts and tables a stage does not read", "[trace][model][layouts]") {
  ProblemSpec s = opt_spec(DType::f16, 128, 16, {40}, 4, 2);
  s.kv_layout = KvLayout::nhd;
  std::size_t refused = 0;
  for (Stage st : {Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::v2_partition,
                   Stage::cascade_merge}) {
    INFO(to_string(st));
    const std::string why = kv_cache_refusal(s, st);
    CHECK_THAT(why, Catch::Matchers::ContainsSubstring("layout nhd"));
    CHECK_THAT(why, Catch::Matchers::ContainsSubstring("layouts nhd and hnd: stages 5 (warp_reduce) and 8"));
    CHECK_THROWS_WITH(model_events(s, st, {}), Catch::Matchers::ContainsSubstring("cannot read a cache in layout nhd"));
    ++refused;
  }
  CHECK(refused == 6);
  CHECK(kv_cache_refusal(s, Stage::warp_reduce).empty());
  CHECK(kv_cache_refusal(s, Stage::optimized).empty());
  s.page_table = PageTableForm::csr;
  CHECK(kv_cache_refusal(s, Stage::warp_reduce).empty());
  CHECK(kv_cache_refusal(s, Stage::optimized).empty());
  // CSR tables with vLLM's layout: the v1 stages 1-5 and stage 8; stages 6-7 refuse.
  s.kv_layout = KvLayout::vllm;
  for (Stage st : {Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce, Stage::optimized})
    CHECK(kv_cache_refusal(s, st).empty());
  for (Stage st : {Stage::v2_partition, Stage::cascade_merge})
    CHECK_THAT(kv_cache_refusal(s, st), Catch::Matchers::ContainsSubstring("csr page tables: stages 1-5 and 8"));
  // A token-row cache holds 16-bit elements only: the problem itself is refused.
  ProblemSpec f = opt_spec(DType::f32, 128, 16, {40}, 4, 2);
  f.kv_layout = KvLayout::hnd;
  CHECK_THROWS_WITH(f.validate(), Catch::Matchers::ContainsSubstring("kv_layout hnd with dtype fp32"));
}

TEST_CASE("stage 8 model: a CSR table's loads (row bounds, indices, last page) replace the padded row's",
          "[trace][model][optimized][layouts]") {
  // Three sequences (40, 100 and 3000 tokens: 3, 7 and 188 pages of 16), one
  // split each: sequence 2's warps (47 blocks each) reload its row start at step 32.
  ProblemSpec s = opt_spec(DType::f16, 128, 16, {40, 100, 3000}, 4, 2);
  ModelOptions o;
  o.optimized.force_splits = 1;
  const Selection sel{{{0, 0, 0}, {1, 2, 0}, {2, 0, 0}}};  // a CTA of each sequence
  const std::vector<Event> padded = model_events(s, Stage::optimized, sel, o);
  s.page_table = PageTableForm::csr;
  const std::vector<Event> csr = model_events(s, Stage::optimized, sel, o);
  std::size_t indptr = 0, last = 0, ctx = 0, tables = 0, reloads = 0;
  for (const Event& e : csr) {
    if (e.tensor == Tensor::context_lens) ++ctx;
    if (e.tensor == Tensor::kv_last_page_len) {
      CHECK(e.byte_offset == e.seq * 4);
      ++last;
    }
    if (e.tensor == Tensor::kv_indptr) {
      CHECK((e.byte_offset == e.seq * 4 || e.byte_offset == (e.seq + 1) * 4));
      if (e.iter > 0) ++reloads;
      ++indptr;
    }
    if (e.tensor == Tensor::block_table) {
      // The indices: sequence s's row starts after the pages of the earlier ones.
      const int row = e.seq == 0 ? 0 : e.seq == 1 ? 3 : 10;
      CHECK(e.byte_offset == (row + e.logical_block) * 4);
      ++tables;
    }
  }
  CHECK(ctx == 0);
  CHECK(last > 0);
  CHECK(reloads > 0);
  CHECK(tables > 0);
  // The same copies and arithmetic: only the table's loads differ.
  std::size_t padded_tables = 0, padded_ctx = 0;
  for (const Event& e : padded) {
    padded_tables += e.tensor == Tensor::block_table;
    padded_ctx += e.tensor == Tensor::context_lens;
  }
  CHECK(last == padded_ctx);  // one last-page load where the padded form loads the length
  // A CSR row's window ends at its pages, a padded one at max_blocks_per_seq.
  CHECK(tables < padded_tables);
  CHECK(csr.size() == padded.size() + indptr - (padded_tables - tables));
}

TEST_CASE("stage 8 model: plan, selection errors, trace file round trip", "[trace][model][optimized]") {
  ProblemSpec s = opt_spec(DType::f16, 128, 16, {600}, 8, 2);
  CHECK(stage_is_modelled(Stage::optimized));
  const OptimizedModelPlan plan = optimized_model_plan(s);
  CHECK(plan.units == 2);
  CHECK(plan.ctas_per_sm == 2);  // 2 x (98304 + 256 + 16 + 1024 reserved) <= 228 KB
  // The default plan for 1 x 600 tokens with 2 units on 132 SMs splits the context.
  CHECK(plan.splits > 1);
  CHECK_THROWS_WITH(model_events(s, Stage::optimized, Selection{{{0, 0, plan.splits}}}),
                    Catch::Matchers::ContainsSubstring("partition (the split) out of range"));
  CHECK_THROWS_WITH(model_events(s, Stage::optimized, Selection{{{0, 8, 0}}}),
                    Catch::Matchers::ContainsSubstring("head out of range"));
  ProblemSpec f32 = s;
  f32.dtype = DType::f32;
  CHECK_THROWS_WITH(model_events(f32, Stage::optimized, {}), Catch::Matchers::ContainsSubstring("fp16 or bf16"));

  TraceData d;
  d.header.spec = s;
  d.header.stage = Stage::optimized;
  d.header.source = kHostModelSource;
  d.events = model_events(s, Stage::optimized, Selection{{{0, 1, plan.splits - 1}}});
  REQUIRE_FALSE(d.events.empty());
  const auto bytes = serialize_trace(d);
  const TraceData back = parse_trace(bytes.data(), bytes.size());
  REQUIRE(back.events.size() == d.events.size());
}

TEST_CASE("stage 8 model: head 64 with an fp8 cache runs 8 warps (a 4 KB step), and its trace file holds them",
          "[trace][model][optimized]") {
  // opt_num_warps: 8 where an fp8 step is 4 KB, else 4 (a 16-bit cache keeps
  // 4 on every layout, so that the layouts' outputs stay bit-equal).
  static_assert(OptConfig<DType::bf16, 64, 16, 1, 0, 0, KvDType::fp8_e4m3>::kNumWarps == 8 &&
                OptConfig<DType::bf16, 64, 16, 1, 0, 0, KvDType::fp8_e4m3>::kStages == 3);
  static_assert(OptConfig<DType::f16, 64, 32, 1, 0, 0, KvDType::fp8_e5m2>::kNumWarps == 8);
  static_assert(OptConfig<DType::f16, 64, 16, 1>::kNumWarps == 4 && OptConfig<DType::f16, 64, 16, 1>::kStages == 6);
  static_assert(OptConfig<DType::f16, 64, 16, 1, 0, 0, KvDType::same, true>::kNumWarps == 4);
  static_assert(OptConfig<DType::f16, 128, 16, 1, 0, 0, KvDType::fp8_e4m3>::kNumWarps == 4);
  int ran = 0;
  for (const KvDType kv : {KvDType::same, KvDType::fp8_e4m3}) {
    ProblemSpec s = opt_spec(DType::bf16, 64, 16, {1000}, 8, 2);
    s.kv_dtype = kv;
    const std::vector<Event> ev = model_events(s, Stage::optimized, Selection{{{0, 1, 0}}}, splits(1));
    REQUIRE_FALSE(ev.empty());
    std::set<int> warps;
    for (const Event& e : ev) warps.insert(e.warp);
    // 1000 tokens = 63 steps of 16 or 32 of 32, so every warp has work.
    if (kv == KvDType::same) CHECK(warps == std::set<int>{0, 1, 2, 3});
    else CHECK(warps == std::set<int>{0, 1, 2, 3, 4, 5, 6, 7});
    TraceData d;
    d.header.spec = s;
    d.header.stage = Stage::optimized;
    d.header.source = kHostModelSource;
    d.events = ev;
    const auto bytes = serialize_trace(d);
    CHECK(parse_trace(bytes.data(), bytes.size()).events.size() == ev.size());
    ++ran;
  }
  CHECK(ran == 2);
}

TEST_CASE("stage 8 model: no cp.async splits a source sector or line across shared memory (every layout, cache dtype, block)",
          "[trace][model][optimized][layouts]") {
  int ran = 0;
  for (const auto& [dt, hs, bs, heads, kvh] : std::vector<std::tuple<DType, int, int, int, int>>{
           {DType::f16, 128, 16, 8, 2}, {DType::bf16, 64, 8, 4, 4}, {DType::f16, 80, 32, 16, 1},
           {DType::bf16, 256, 32, 32, 1}, {DType::f16, 128, 8, 8, 1}})
    for (const KvDType kv : {KvDType::same, KvDType::fp8_e4m3})
      for (const KvLayout layout : kAllKvLayouts) {
        // fp8 caches: vLLM's layout, blocks of 16 and 32.
        if (kv != KvDType::same && (bs < 16 || layout != KvLayout::vllm)) continue;
        ProblemSpec s = opt_spec(dt, hs, bs, {4 * bs + 3, 2 * bs}, heads, kvh);
        s.kv_layout = layout;
        s.kv_dtype = kv;
        INFO(s.describe() << " layout " << kv_layout_name(layout));
        const auto ev = model_events(s, Stage::optimized, {}, splits(1));
        int copies = 0, whole_copies = 0;
        for (const MemoryRequest& r : memory_requests(ev)) {
          if (ev[r.events.front()].op != Op::async_copy) continue;
          std::vector<LaneAccess> src;
          for (std::uint32_t i : r.events) src.push_back({ev[i].lane, ev[i].byte_offset, ev[i].bytes});
          INFO(describe(ev[r.events.front()]));
          CHECK(r.sectors == global_sectors(src));  // the destinations add no sector
          // and no L2 request: each source line lands in one 128-byte span
          // (the fewest possible where 32 lanes read 512 bytes).
          CHECK(r.l2_requests == global_l2_requests(src));
          if (r.bytes_requested == 512) {
            CHECK(r.l2_requests == r.ideal_l2_requests);
            ++whole_copies;
          }
          ++copies;
        }
        CHECK(copies > 0);
        CHECK(whole_copies > 0);
        ++ran;
      }
  CHECK(ran == 5 * 3 + 3);
  // The analysis pairs each copy with its destination in these traces: moving
  // the odd lanes' destinations 2 KB away splits every whole-copy sector, and
  // every line with it: one request per 16-byte piece.
  auto ev = model_events(opt_spec(DType::f16, 128, 16, {64}, 8, 2), Stage::optimized, {}, splits(1));
  for (Event& e : ev)
    if (e.op == Op::shared_store && e.tensor == Tensor::kv_smem && e.lane % 2 == 1) e.byte_offset += 2048;
  int split = 0;
  for (const MemoryRequest& r : memory_requests(ev))
    if (ev[r.events.front()].op == Op::async_copy) {
      CHECK(r.sectors == 2 * r.ideal_sectors);
      CHECK(r.l2_requests == r.lanes);
      CHECK(r.l2_requests == 8 * r.ideal_l2_requests);
      ++split;
    }
  CHECK(split > 0);
}
