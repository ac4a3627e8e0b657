// Analyses on hand-built event sets with numbers worked out by hand.
#include <catch2/catch_test_macros.hpp>

#include <vector>

#include "pa/trace/analysis.hpp"

using namespace pa::trace;

namespace {
// One warp-level access: lane l touches [base + l*stride, + bytes).
std::vector<Event> warp_access(Op op, Tensor t, int bytes, std::int64_t base, std::int64_t stride, int lanes = 32,
                               int iter = 0, int warp = 0, int first_seq_in_thread = 0) {
  std::vector<Event> v;
  for (int l = 0; l < lanes; ++l) {
    Event e{};
    e.stage = Stage::qk;
    e.step = op == Op::global_load ? Step::k_load : Step::q_smem_load;
    e.op = op;
    e.tensor = t;
    e.warp = static_cast<std::uint16_t>(warp);
    e.lane = static_cast<std::uint16_t>(l);
    e.iter = iter;
    e.seq_in_thread = first_seq_in_thread;
    e.logical_block = -1;
    e.physical_block = -1;
    e.token = -1;
    e.byte_offset = base + l * stride;
    e.bytes = bytes;
    v.push_back(e);
  }
  return v;
}
MemoryRequest one_request(const std::vector<Event>& ev) {
  auto r = memory_requests(ev);
  REQUIRE(r.size() == 1);
  return r[0];
}
}  // namespace

TEST_CASE("global coalescing: sectors vs ideal", "[trace][analysis]") {
  SECTION("16 B x 32 lanes, contiguous: 16 sectors, ideal 16") {
    auto r = one_request(warp_access(Op::global_load, Tensor::k_cache, 16, 0, 16));
    CHECK(r.lanes == 32);
    CHECK(r.unique_bytes == 512);
    CHECK(r.sectors == 16);
    CHECK(r.ideal_sectors == 16);
    CHECK(r.efficiency() == 1.0);
    CHECK(r.l2_requests == 4);  // one per 128-byte line
    CHECK(r.ideal_l2_requests == 4);
  }
  SECTION("16 B x 32 lanes starting 16 B into a sector: 17 sectors") {
    auto r = one_request(warp_access(Op::global_load, Tensor::k_cache, 16, 16, 16));
    CHECK(r.sectors == 17);
    CHECK(r.ideal_sectors == 16);
  }
  SECTION("8 B x 32 lanes contiguous (the fp16/block-16 K load): 8 sectors") {
    auto r = one_request(warp_access(Op::global_load, Tensor::k_cache, 8, 4096, 8));
    CHECK(r.sectors == 8);
    CHECK(r.ideal_sectors == 8);
  }
  SECTION("4 B x 32 lanes, stride 128 B: 32 sectors, ideal 4") {
    auto r = one_request(warp_access(Op::global_load, Tensor::v_cache, 4, 0, 128));
    CHECK(r.sectors == 32);
    CHECK(r.ideal_sectors == 4);
    CHECK(r.efficiency() == 0.125);
    CHECK(r.l2_requests == 32);  // a line each
    CHECK(r.ideal_l2_requests == 1);
  }
  SECTION("4 B x 32 lanes, stride 8 B: 8 sectors, ideal 4") {
    auto r = one_request(warp_access(Op::global_load, Tensor::q, 4, 0, 8));
    CHECK(r.sectors == 8);
    CHECK(r.ideal_sectors == 4);
  }
  SECTION("broadcast: 32 lanes read the same 4 B: 1 sector, ideal 1") {
    auto r = one_request(warp_access(Op::global_load, Tensor::block_table, 4, 12, 0));
    CHECK(r.bytes_requested == 128);
    CHECK(r.unique_bytes == 4);
    CHECK(r.sectors == 1);
    CHECK(r.ideal_sectors == 1);
    CHECK(r.l2_requests == 1);
    CHECK(r.ideal_l2_requests == 1);
  }
  SECTION("an access straddling a sector boundary touches 2") {
    auto r = one_request(warp_access(Op::global_store, Tensor::output, 16, 24, 0, 1));
    CHECK(r.store);
    CHECK(r.sectors == 2);
    CHECK(r.ideal_sectors == 1);
    CHECK(r.l2_requests == 1);  // both sectors in line 0
  }
  SECTION("L2 requests: one per distinct 128-byte line, direct calls") {
    const std::vector<LaneAccess> a = {{0, 120, 16}, {1, 0, 4}, {2, 1000, 8}, {3, 1001, 0}};
    CHECK(global_l2_requests(a) == 3);  // lines 0, 1 (the straddle) and 7; the empty access none
    CHECK(global_sectors(a) == 4);      // sectors 0, 3, 4 and 31
  }
}

namespace {
// One warp's cp.async of 32 x 16 contiguous source bytes: lane l copies bytes
// [16 l, 16 l + 16) to shared byte dst(l), recorded as the kernels do (the
// async_copy, then its shared_store). Returns the copy's request.
template <class Dst>
MemoryRequest copy_request(Dst dst, bool record_destination = true) {
  std::vector<Event> ev;
  for (int l = 0; l < 32; ++l) {
    Event c{};
    c.stage = Stage::optimized;
    c.step = Step::v_load;
    c.op = Op::async_copy;
    c.tensor = Tensor::v_cache;
    c.lane = static_cast<std::uint16_t>(l);
    c.logical_block = 3;
    c.byte_offset = 4096 + 16 * l;
    c.bytes = 16;
    ev.push_back(c);
    if (!record_destination) continue;
    Event d = c;
    d.op = Op::shared_store;
    d.tensor = Tensor::kv_smem;
    d.seq_in_thread = 1;
    d.byte_offset = dst(l);
    ev.push_back(d);
  }
  const auto reqs = memory_requests(ev);
  REQUIRE(reqs.size() == (record_destination ? 2u : 1u));
  for (const auto& r : reqs)
    if (!r.shared) return r;
  FAIL("no cp.async request");
  return {};
}
}  // namespace

// The destinations of the diagnosis in kernels/NOTES.md (cascade change 20),
// as its patches place one block's 16-byte chunks (lane l: chunk l), with what
// Nsight Compute counted per warp copy: sectors, and requests from the SMs to L2.
TEST_CASE("cp.async: where the pieces land sets the sectors and L2 requests (the measured layouts)",
          "[trace][analysis]") {
  struct Layout {
    const char* name;
    std::int64_t (*dst)(int lane);
    int sectors, l2_requests;
  };
  const Layout layouts[] = {
      {"base: each sector's halves 2 KB apart (rows of 8 tokens)",
       [](int l) -> std::int64_t { return (l % 2) * 2048 + (l / 2) * 16; }, 32, 32},
      {"ident: in source order", [](int l) -> std::int64_t { return 16 * l; }, 16, 4},
      {"swap: each sector's halves swapped inside its 32-byte span",
       [](int l) -> std::int64_t { return (l / 2) * 32 + (1 - l % 2) * 16; }, 16, 4},
      {"sw32: the 32-byte swizzle",
       [](int l) -> std::int64_t { return (l / 2) * 32 + ((l % 2) ^ ((l / 8) % 2)) * 16; }, 16, 4},
      {"sector: sectors whole, a line's four sectors 1 KB apart",
       [](int l) -> std::int64_t { return ((l / 2) % 4) * 1024 + (l / 8) * 32 + (l % 2) * 16; }, 16, 16},
      {"sw128: the 128-byte swizzle, a line over four rows 128 bytes apart",
       [](int l) -> std::int64_t { return (l / 2) * 128 + ((l % 2) ^ ((l / 2) % 8)) * 16; }, 16, 16},
  };
  int ran = 0;
  for (const Layout& layout : layouts) {
    INFO(layout.name);
    const auto r = copy_request(layout.dst);
    CHECK(r.sectors == layout.sectors);
    CHECK(r.ideal_sectors == 16);
    CHECK(r.l2_requests == layout.l2_requests);
    CHECK(r.ideal_l2_requests == 4);
    CHECK(r.efficiency() == 16.0 / layout.sectors);
    ++ran;
  }
  CHECK(ran == 6);
}

TEST_CASE("cp.async: unknown destinations, partial copies and lines split part-way", "[trace][analysis]") {
  SECTION("no destination recorded: the source sectors and lines alone") {
    const auto r = copy_request([](int) -> std::int64_t { return 0; }, false);
    CHECK(r.sectors == 16);
    CHECK(r.l2_requests == 4);
    CHECK(r.ideal_l2_requests == 4);
  }
  SECTION("partial copies: a sector's pieces of 10 and 16 bytes") {
    const CopyAccess whole[] = {{0, 16, 64}, {16, 10, 80}};
    CHECK(async_copy_sectors(whole) == 1);
    CHECK(async_copy_l2_requests(whole) == 1);
    const CopyAccess split[] = {{0, 16, 64}, {16, 10, 512}};
    CHECK(async_copy_sectors(split) == 2);
    CHECK(async_copy_l2_requests(split) == 2);  // the line split, its one sector split: one per piece
    const CopyAccess unknown[] = {{0, 16, -1}, {16, 16, 512}};
    CHECK(async_copy_sectors(unknown) == 1);
    CHECK(async_copy_l2_requests(unknown) == 1);
  }
  SECTION("a copy of 8 bytes; a zero-byte copy (it only zero-fills) is no piece") {
    const CopyAccess eight[] = {{200, 8, 1000}};
    CHECK(async_copy_sectors(eight) == 1);
    CHECK(async_copy_l2_requests(eight) == 1);
    const CopyAccess with_zero_fill[] = {{0, 16, 0}, {16, 0, 4096}};
    CHECK(async_copy_sectors(with_zero_fill) == 1);
    CHECK(async_copy_l2_requests(with_zero_fill) == 1);
    CHECK(async_copy_sectors({}) == 0);
    CHECK(async_copy_l2_requests({}) == 0);
  }
  SECTION("one line: three sectors whole in three 1 KB rows, the fourth split: 3 + 2 requests") {
    std::vector<CopyAccess> c;
    for (int k = 0; k < 8; ++k) {
      const int sector = k / 2, half = k % 2;
      const std::int64_t dst = sector < 3 ? sector * 1024 + half * 16 : 3072 + half * (1024 + 16);
      c.push_back({16 * k, 16, dst});
    }
    CHECK(async_copy_sectors(c) == 5);
    CHECK(async_copy_l2_requests(c) == 5);
  }
  SECTION("one line landing in one 128-byte span in reverse chunk order: 1 request, 4 sectors") {
    std::vector<CopyAccess> c;
    for (int k = 0; k < 8; ++k) c.push_back({16 * k, 16, 256 + (7 - k) * 16});
    CHECK(async_copy_sectors(c) == 4);
    CHECK(async_copy_l2_requests(c) == 1);
  }
}

TEST_CASE("shared memory: bank wavefronts per request", "[trace][analysis]") {
  SECTION("4 B x 32 lanes consecutive: 1 wavefront") {
    auto r = one_request(warp_access(Op::shared_load, Tensor::logits, 4, 0, 4));
    CHECK(r.shared);
    CHECK(r.wavefronts == 1);
    CHECK(r.ideal_wavefronts == 1);
  }
  SECTION("4 B, stride 8 B: 2-way conflict") {
    auto r = one_request(warp_access(Op::shared_load, Tensor::logits, 4, 0, 8));
    CHECK(r.wavefronts == 2);
    CHECK(r.ideal_wavefronts == 1);
    CHECK(r.efficiency() == 0.5);
  }
  SECTION("4 B, stride 128 B: 32-way conflict") {
    auto r = one_request(warp_access(Op::shared_store, Tensor::red_scratch, 4, 0, 128));
    CHECK(r.wavefronts == 32);
    CHECK(r.ideal_wavefronts == 1);
  }
  SECTION("broadcast: every lane reads the same word: 1 wavefront") {
    auto r = one_request(warp_access(Op::shared_load, Tensor::q_smem, 4, 64, 0));
    CHECK(r.wavefronts == 1);
    CHECK(r.ideal_wavefronts == 1);
  }
  SECTION("16 B x 32 lanes contiguous: 4 quarter-warp phases, 4 wavefronts, ideal 4") {
    auto r = one_request(warp_access(Op::shared_load, Tensor::q_smem, 16, 0, 16));
    CHECK(r.wavefronts == 4);
    CHECK(r.ideal_wavefronts == 4);
  }
  SECTION("16 B, stride 32 B: each quarter warp 2-way: 8 wavefronts") {
    auto r = one_request(warp_access(Op::shared_load, Tensor::q_smem, 16, 0, 32));
    CHECK(r.wavefronts == 8);
    CHECK(r.ideal_wavefronts == 4);
  }
  SECTION("8 B, 2 slots 128 B apart, lanes alternating (q_vecs, fp16 block 16): 2 per half warp") {
    std::vector<Event> ev = warp_access(Op::shared_load, Tensor::q_smem, 8, 0, 0);
    for (auto& e : ev) e.byte_offset = (e.lane % 2) * 128 + 24;
    auto r = one_request(ev);
    CHECK(r.unique_bytes == 16);
    CHECK(r.wavefronts == 4);
    CHECK(r.ideal_wavefronts == 2);
  }
  SECTION("direct bank-model calls") {
    std::vector<LaneAccess> a = {{0, 0, 4}, {1, 128, 4}, {2, 256, 4}, {3, 4, 4}};
    CHECK(shared_wavefronts(a).wavefronts == 3);
    CHECK(shared_wavefronts(a).ideal == 1);
    CHECK(global_sectors(a) == 3);  // sectors 0, 4, 8
  }
}

TEST_CASE("request grouping, per-thread counts and traffic", "[trace][analysis]") {
  // Warp 0: two 8 B K loads per lane in iter 0 (two instructions), one in iter 1;
  // warp 1: one load in iter 0. 16 lanes each.
  std::vector<Event> ev;
  auto add = [&](std::vector<Event> v) { ev.insert(ev.end(), v.begin(), v.end()); };
  add(warp_access(Op::global_load, Tensor::k_cache, 8, 0, 8, 16, 0, 0, 0));
  add(warp_access(Op::global_load, Tensor::k_cache, 8, 1024, 8, 16, 0, 0, 1));
  add(warp_access(Op::global_load, Tensor::k_cache, 8, 2048, 8, 16, 1, 0, 2));
  add(warp_access(Op::global_load, Tensor::k_cache, 8, 4096, 8, 16, 0, 1, 0));
  add(warp_access(Op::shared_load, Tensor::q_smem, 8, 0, 0, 16, 0, 0, 3));
  Event bar{};
  bar.stage = Stage::qk;
  bar.step = Step::barrier;
  bar.op = Op::barrier;
  bar.seq_in_thread = 4;
  bar.byte_offset = -1;
  ev.push_back(bar);

  const auto reqs = memory_requests(ev);
  REQUIRE(reqs.size() == 5);
  int occ1 = 0;
  for (const auto& r : reqs) {
    CHECK(r.lanes == 16);
    if (!r.shared) {
      CHECK(r.sectors == 4);
      CHECK(r.ideal_sectors == 4);
      CHECK(r.l2_requests == 1);  // 16 x 8 B = one aligned 128-byte line
      CHECK(r.ideal_l2_requests == 1);
    } else {
      CHECK(r.l2_requests == 0);
    }
    if (r.key.warp == 0 && r.key.iter == 0 && !r.shared) {
      // The two instructions of iter 0 are told apart by their occurrence.
      CHECK(ev[r.events.front()].byte_offset == (r.key.occurrence == 0 ? 0 : 1024));
      occ1 += r.key.occurrence;
    }
  }
  CHECK(occ1 == 1);
  const auto idx = request_index_of_events(reqs, ev.size());
  CHECK(idx.back() == -1);  // the barrier
  CHECK(request_of(reqs, 0) == &reqs[static_cast<std::size_t>(idx[0])]);

  const auto threads = per_thread_counts(ev);
  REQUIRE(threads.size() == 32);  // 16 lanes x 2 warps
  const ThreadCounts& t0 = threads[0];
  CHECK(t0.warp == 0);
  CHECK(t0.lane == 0);
  CHECK(t0.global_loads == 3);
  CHECK(t0.global_load_bytes == 24);
  CHECK(t0.shared_loads == 1);
  CHECK(t0.barriers == 1);
  CHECK(threads[16].warp == 1);
  CHECK(threads[16].global_loads == 1);

  const auto tot = traffic_totals(ev, reqs);
  CHECK(tot.global_load_bytes == 4 * 16 * 8);
  CHECK(tot.global_requests == 4);
  CHECK(tot.global_load_requests == 4);
  CHECK(tot.global_store_requests == 0);
  CHECK(tot.shared_load_requests == 1);
  CHECK(tot.shared_load_wavefronts == 1);
  CHECK(tot.global_sectors == 16);
  CHECK(tot.global_l2_requests == 4);
  CHECK(tot.global_ideal_l2_requests == 4);
  CHECK(tot.global_load_l2_requests == 4);
  CHECK(tot.global_store_l2_requests == 0);
  CHECK(tot.shared_requests == 1);
  CHECK(tot.shared_load_bytes == 128);
  CHECK(tot.shared_wavefronts == 1);  // broadcast; lanes 0-15 = the first half-warp phase only
  const auto steps = traffic_by_step(ev, reqs);
  REQUIRE(steps.size() == 3);
  int k_steps = 0;
  for (const StepTraffic& t : steps)
    if (t.op == Op::global_load) {
      CHECK(t.l2_requests == 4);
      CHECK(t.ideal_l2_requests == 4);
      ++k_steps;
    } else {
      CHECK(t.l2_requests == 0);
    }
  CHECK(k_steps == 1);
}
