// Highlight sets: what a thread touches, who touches an element, the decoding
// of traced byte ranges into KV cells, requests of a step.
#include <catch2/catch_test_macros.hpp>

#include <algorithm>
#include <set>
#include <tuple>

#include "core/highlight.hpp"
#include "pa/trace/host_model.hpp"

using namespace pa;
using namespace pa::viewer;

TEST_CASE("for_each_kv_element decodes exactly the elements of the byte range", "[viewer][highlight]") {
  const ConfigInfo c = config_info(DType::f16, 128, 16);
  const KvLayoutGeometry g = c.cache(2);
  trace::Event e{};
  e.tensor = trace::Tensor::k_cache;
  const std::int64_t off = g.k_offset(5, 1, 36, 7);  // dim 36 = chunk 4, element 4
  e.byte_offset = off * c.elem_bytes;
  e.bytes = 8;  // 4 fp16 elements
  std::vector<CacheGeometry::Coords> got;
  for_each_kv_element(e, g, c.elem_bytes, [&](const CacheGeometry::Coords& k) { got.push_back(k); });
  REQUIRE(got.size() == 4);
  for (int i = 0; i < 4; ++i) {
    CHECK(got[i].physical_block == 5);
    CHECK(got[i].kv_head == 1);
    CHECK(got[i].d == 36 + i);
    CHECK(got[i].t == 7);
  }
  e.tensor = trace::Tensor::v_cache;
  e.byte_offset = g.v_offset(2, 0, 100, 8) * c.elem_bytes;
  e.bytes = 16;  // 8 tokens of one dim row
  got.clear();
  for_each_kv_element(e, g, c.elem_bytes, [&](const CacheGeometry::Coords& k) { got.push_back(k); });
  REQUIRE(got.size() == 8);
  CHECK(got[7].d == 100);
  CHECK(got[7].t == 15);
  e.tensor = trace::Tensor::q;
  got.clear();
  for_each_kv_element(e, g, c.elem_bytes, [&](const CacheGeometry::Coords& k) { got.push_back(k); });
  CHECK(got.empty());
}

TEST_CASE("Focus, who_touches and steps_of_thread on the host-model QK trace", "[viewer][highlight]") {
  ProblemSpec spec;
  const auto events = trace::model_events(spec, trace::Stage::qk, trace::Selection{});
  const TraceIndex idx(events, Granularity::instruction);
  const ConfigInfo c = config_info(spec.dtype, spec.head_size, spec.block_size);

  // Pick warp 1 lane 5's first K load; its first element must be touched by it
  // at that step, and every touch listed must really overlap the element.
  int k = -1;
  std::uint32_t pick = 0;
  for (std::uint32_t i = 0; i < events.size(); ++i)
    if (events[i].tensor == trace::Tensor::k_cache && events[i].warp == 1 && events[i].lane == 5) { pick = i; k = idx.step_of_event(i); break; }
  REQUIRE(k >= 0);
  const auto& e = events[pick];
  const auto touches_list = who_touches(events, idx, 0, trace::Tensor::k_cache, e.byte_offset, c.elem_bytes);
  REQUIRE(!touches_list.empty());
  bool found = false;
  for (const Touch& t : touches_list) found |= t.step == k && t.warp == 1 && t.lane == 5;
  CHECK(found);
  // In QK every K element is read by exactly one thread (one thread-group member).
  CHECK(touches_list.size() == 1);
  const Focus f = Focus::element(trace::Tensor::k_cache, e.byte_offset, c.elem_bytes);
  CHECK(f.matches(e));
  CHECK_FALSE(Focus::element(trace::Tensor::v_cache, e.byte_offset, 2).matches(e));

  const auto steps = steps_of_thread(events, idx, 0, 1, 5);
  CHECK(std::find(steps.begin(), steps.end(), k) != steps.end());
  CHECK(std::is_sorted(steps.begin(), steps.end()));
  const auto wsteps = steps_of_thread(events, idx, 0, 1, -1);
  CHECK(wsteps.size() >= steps.size());
  CHECK(Focus::thread(1, 5).matches(e));
  CHECK(Focus::whole_warp(1).matches(e));
  CHECK_FALSE(Focus::thread(1, 6).matches(e));
  CHECK(Focus{}.matches(e));

  // The K load step: one request per warp, perfectly coalesced (lesson 2).
  const auto reqs = requests_of_step(events, idx.events_of(0, k));
  REQUIRE(!reqs.empty());
  for (const Request& r : reqs) {
    CHECK(r.global());
    CHECK(r.lanes == 32);
    CHECK(r.sectors == r.ideal_sectors);
    CHECK(r.l2_requests == r.ideal_l2_requests);
    CHECK(r.events.size() == 32);
  }
}

TEST_CASE("Thread colours are distinct per lane and stable", "[viewer][highlight]") {
  std::set<std::uint32_t> seen;
  for (int l = 0; l < 32; ++l) seen.insert(to_u32(thread_color(0, l, 4)));
  CHECK(seen.size() == 32);
  CHECK(to_u32(thread_color(2, 7, 4)) == to_u32(thread_color(2, 7, 4)));
  CHECK(to_u32(thread_color(0, 7, 4)) != to_u32(thread_color(3, 7, 4)));
  CHECK((to_u32(Rgba{1, 0, 0, 1}) & 0xffu) == 255u);  // IM_COL32 order: R in the low byte
}

TEST_CASE("first_store_steps and stored_dims: each q_vecs word's first store and the Q dims it wrote",
          "[viewer][highlight]") {
  // Stage 1 on the default problem (fp16, head size 128): q_vecs is 256 bytes, 64 words.
  const ProblemSpec spec;
  const auto ev = trace::model_events(spec, trace::Stage::q_to_smem, trace::Selection{});
  const TraceIndex idx(ev, Granularity::instruction);
  const std::vector<int> first = first_store_steps(ev, idx, 0, trace::Tensor::q_smem);
  REQUIRE(first.size() == 64);
  SECTION("the first store step of every word: the tint of earlier stores") {
    int checked = 0;
    for (std::size_t w = 0; w < first.size(); ++w) {
      INFO("word " << w);
      REQUIRE(first[w] >= 0);
      // That step stores the word, and no earlier step does.
      auto stores = [&](int k) {
        for (std::uint32_t i : idx.events_of(0, k)) {
          const trace::Event& e = ev[i];
          if (e.tensor == trace::Tensor::q_smem && e.op == trace::Op::shared_store &&
              overlaps(e.byte_offset, e.bytes, static_cast<std::int64_t>(w) * 4, 4))
            return true;
        }
        return false;
      };
      CHECK(idx.steps(0)[first[w]].step == trace::Step::q_smem_store);
      CHECK(stores(first[w]));
      for (int k = 0; k < first[w]; ++k) CHECK_FALSE(stores(k));
      ++checked;
    }
    CHECK(checked == 64);
    // Loads are not stores; a tensor the block never stores has no words.
    CHECK(first_store_steps(ev, idx, 0, trace::Tensor::logits).empty());
    CHECK(first_store_steps(ev, idx, 0, trace::Tensor::kv_smem).empty());
  }
  SECTION("the dims each word holds, from the store that wrote it (the q_vecs tooltip)") {
    // fp16, head 128, block 16: thread groups of 2 threads, 4-dim (8-byte) vecs, 16 per
    // thread. Slot s = g_off * 16 + i holds dims (g_off + 2 i) * 4 .. + 3, so word w (half
    // w % 2 of slot w / 2) holds two of them: not dims 2w, 2w + 1 of a plain row.
    int checked = 0;
    for (int w = 0; w < 64; ++w) {
      INFO("word " << w);
      const int slot = w / 2, g_off = slot / 16, i = slot % 16;
      const int d0 = (g_off + 2 * i) * 4 + 2 * (w % 2);
      const auto d = stored_dims(ev, idx, 0, first[w], trace::Tensor::q_smem, 4 * w, 2);
      REQUIRE(d.has_value());
      CHECK(d->first == d0);
      CHECK(d->second == d0 + 1);
      ++checked;
    }
    CHECK(checked == 64);
    const auto w2 = stored_dims(ev, idx, 0, first[2], trace::Tensor::q_smem, 8, 2);
    REQUIRE(w2.has_value());
    CHECK(*w2 == std::pair<int, int>{8, 9});
    // A step that stores nothing there, and a step out of range: nothing.
    CHECK_FALSE(stored_dims(ev, idx, 0, 0, trace::Tensor::q_smem, 8, 2).has_value());
    CHECK_FALSE(stored_dims(ev, idx, 0, -1, trace::Tensor::q_smem, 8, 2).has_value());
    CHECK_FALSE(stored_dims(ev, idx, 0, idx.num_steps(0), trace::Tensor::q_smem, 8, 2).has_value());
  }
}
