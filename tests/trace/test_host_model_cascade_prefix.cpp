// Host model of cascade_prefix_kernel (stage 7's tensor-core prefix kernel):
// its blocks are in a cascade trace, each thread's program order and epochs
// are consistent, the K/V tile copies cover every 16-byte slot of a tile
// exactly once, and the traced block is the one that computes the selected row.
#include <catch2/catch_test_macros.hpp>

#include <map>
#include <set>
#include <tuple>

#include "pa/index/cascade.hpp"
#include "pa/index/events.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/analysis.hpp"
#include "pa/trace/host_model.hpp"
#include "../support/spec_of.hpp"

using namespace pa;
using namespace pa::trace;

namespace {
// Every context is the shared prefix followed by its own suffix.
ProblemSpec cascade_spec(DType dt, int head, int block, int heads, int kv, int prefix, std::vector<int> suffixes) {
  for (int& x : suffixes) x += prefix;
  ProblemSpec s = test::spec_of(dt, head, block, heads, kv, std::move(suffixes), 5);
  s.shared_prefix_len = prefix;
  return s;
}
}  // namespace

TEST_CASE("host model: cascade prefix kernel blocks", "[trace][cascade]") {
  struct C {
    DType dt;
    int head, block, heads, kv, prefix;
    std::vector<int> suffixes;
    Selection sel;
  };
  const C cases[] = {
      {DType::f16, 128, 16, 4, 4, 100 - 100 % 16, {5, 40}, {}},                      // 2 tiles, partial last chunk
      {DType::bf16, 64, 8, 8, 2, 8, {3}, {{{0, 5, 0}}}},                              // one block, GQA 4
      {DType::f16, 256, 32, 2, 1, 96, std::vector<int>(40, 2), {{{37, 1, 0}}}},       // head 256 (32-token tiles, 2 buffers), 80 rows
  };
  int ran = 0;
  for (const C& c : cases) {
    const ProblemSpec s = cascade_spec(c.dt, c.head, c.block, c.heads, c.kv, c.prefix, c.suffixes);
    INFO(s.describe());
    const auto events = model_events(s, Stage::cascade_merge, c.sel);
    const CascadeTracePlan plan = cascade_trace_plan(s);
    REQUIRE(plan.tensor_cores);
    std::map<std::tuple<int, int, int, int, int>, std::vector<Event>> threads;
    std::set<std::tuple<int, int, int>> prefix_blocks;
    for (const Event& e : events)
      if (is_prefix_block(e.partition)) {
        threads[{e.seq, e.head, e.partition, e.warp, e.lane}].push_back(e);
        prefix_blocks.insert({e.seq, e.head, e.partition});
      }
    REQUIRE(!prefix_blocks.empty());
    // The selected row's block: chunk 0 of the query tile holding the row.
    const BlockId sel = c.sel.blocks.empty() ? BlockId{0, 0, 0} : c.sel.blocks[0];
    const int ratio = s.num_heads / s.num_kv_heads;
    const PrefixBlockLabel lab = prefix_block_label_of(sel.seq, sel.head, ratio,
                                                       prefix_rows_per_block(kCascadeTracePrefixVariant, s.head_size));
    CHECK(prefix_blocks.count({lab.seq, lab.head, kPrefixBlockBase}) == 1);
    const int tile_tokens = prefix_variant_tile_tokens(kCascadeTracePrefixVariant, s.head_size, s.block_size);
    const int n_tiles = ceil_div(std::min(plan.chunk_len, plan.prefix_len), tile_tokens);
    for (auto& [k, ev] : threads) {
      int barriers = 0;
      for (std::size_t i = 0; i < ev.size(); ++i) {
        REQUIRE(ev[i].seq_in_thread == static_cast<int>(i));
        REQUIRE(ev[i].epoch == barriers);
        if (ev[i].op == Op::barrier) ++barriers;
      }
      CHECK(barriers == n_tiles);  // one barrier per tile (variant 1: Q from shared memory)
    }
    // Each tile's K and V copies fill every 16-byte slot of their buffers once.
    std::map<std::tuple<int, int, int>, std::multiset<std::int64_t>> slots;  // (block chunk, tile) -> smem bytes
    for (auto& [k, ev] : threads)
      for (const Event& e : ev)
        if (e.op == Op::shared_store && e.tensor == Tensor::kv_smem) slots[{e.partition, e.iter, 0}].insert(e.byte_offset);
    for (auto& [k, bytes] : slots) {
      CHECK(std::set<std::int64_t>(bytes.begin(), bytes.end()).size() == bytes.size());
      CHECK(bytes.size() % 2 == 0);  // K and V chunks alike
    }
    // The copies keep each source sector in one 32-byte span of shared memory
    // and each line in one 128-byte span (the swizzle stays inside 128-byte
    // lines): delivered sectors and L2 requests = ideal.
    int copies = 0;
    for (const MemoryRequest& r : memory_requests(events))
      if (events[r.events.front()].op == Op::async_copy && is_prefix_block(events[r.events.front()].partition)) {
        ++copies;
        CHECK(r.sectors == r.ideal_sectors);
        CHECK(r.l2_requests == r.ideal_l2_requests);
      }
    CHECK(copies > 0);
    ++ran;
  }
  CHECK(ran == 3);
}
