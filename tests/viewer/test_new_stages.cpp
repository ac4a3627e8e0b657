// The tensor-core stages' events (stage 7's kernels, stage 8) in the viewer's
// data layer, on synthetic events: names and colours of the new tensors and
// ops, cp.async / atomic requests measured as global requests, the per-block
// extents that size the kv_smem and global-buffer views, the state flow the
// partitions picture draws, and the block labels of the extra kernels.
#include <catch2/catch_test_macros.hpp>

#include <cmath>
#include <set>
#include <string>

#include "core/highlight.hpp"
#include "core/layout.hpp"
#include "core/trace_index.hpp"
#include "core/trace_load.hpp"

using namespace pa;
using namespace pa::viewer;
using trace::Event;
using trace::Op;
using trace::Step;
using trace::Tensor;

namespace {
Event ev(int warp, int lane, Step step, Op op, Tensor t, std::int64_t byte, int bytes, int seq_in_thread, int partition = 0) {
  Event e{};
  e.stage = trace::Stage::optimized;
  e.step = step;
  e.op = op;
  e.tensor = t;
  e.warp = static_cast<std::uint16_t>(warp);
  e.lane = static_cast<std::uint16_t>(lane);
  e.partition = partition;
  e.iter = 0;
  e.seq_in_thread = seq_in_thread;
  e.token = -1;
  e.logical_block = -1;
  e.physical_block = -1;
  e.dim_begin = -1;
  e.byte_offset = byte;
  e.bytes = bytes;
  e.value = NAN;
  return e;
}
bool same(Rgba a, Rgba b) { return a.r == b.r && a.g == b.g && a.b == b.b; }
}  // namespace

TEST_CASE("new tensors get their own colours; new ops their names", "[viewer][stages]") {
  const Rgba grey = tensor_color(Tensor::none);
  for (Tensor t : {Tensor::kv_smem, Tensor::workspace, Tensor::counter, Tensor::prefix_out, Tensor::suffix_lse})
    CHECK_FALSE(same(tensor_color(t), grey));
  CHECK_FALSE(same(tensor_color(Tensor::kv_smem), tensor_color(Tensor::k_cache)));
  CHECK_FALSE(same(tensor_color(Tensor::workspace), tensor_color(Tensor::counter)));
  CHECK(std::string(access_verb(Op::global_load)) == "ld");
  CHECK(std::string(access_verb(Op::shared_store)) == "st");
  CHECK(std::string(access_verb(Op::async_copy)) == "cp.async");
  CHECK(std::string(access_verb(Op::atomic)) == "atom");
  CHECK(std::string(access_verb(Op::mma)) == "mma");
  CHECK(is_shared_tensor(Tensor::kv_smem));
  CHECK_FALSE(is_shared_tensor(Tensor::workspace));
  CHECK(is_global_buffer(Tensor::workspace));
  CHECK(is_global_buffer(Tensor::counter));
  CHECK_FALSE(is_global_buffer(Tensor::k_cache));
  // Every enumerator of every enum has a name (the viewer labels with them).
  for (int v = 0; v < static_cast<int>(Step::count_); ++v) CHECK(std::string(trace::to_string(static_cast<Step>(v))).size() > 0);
  CHECK(std::string(trace::to_string(Tensor::kv_smem)) == "kv_smem");
  CHECK(std::string(trace::to_string(Op::async_copy)) == "async_copy");
}

TEST_CASE("cp.async and atomics are global requests (sectors); kv_smem stores are shared (wavefronts)", "[viewer][stages]") {
  std::vector<Event> v;
  // A warp's cp.async of 32 x 16 contiguous bytes: 16 sectors, ideal 16; 4 L2
  // requests (one per 128-byte line; no destination recorded), ideal 4.
  for (int l = 0; l < 32; ++l) v.push_back(ev(0, l, Step::k_load, Op::async_copy, Tensor::k_cache, 4096 + 16 * l, 16, 0));
  std::vector<std::uint32_t> idx;
  for (std::uint32_t i = 0; i < v.size(); ++i) idx.push_back(i);
  auto reqs = requests_of_step(v, idx);
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].global());
  CHECK_FALSE(reqs[0].shared());
  CHECK(reqs[0].sectors == 16);
  CHECK(reqs[0].ideal_sectors == 16);
  CHECK(reqs[0].l2_requests == 4);
  CHECK(reqs[0].ideal_l2_requests == 4);
  // The same bytes stored to kv_smem with a 256-byte row stride: lanes 0, 2, 4...
  // share banks -> more wavefronts than the ideal.
  std::vector<Event> w;
  for (int l = 0; l < 32; ++l) w.push_back(ev(0, l, Step::k_load, Op::shared_store, Tensor::kv_smem, 256 * l, 16, 1));
  idx.clear();
  for (std::uint32_t i = 0; i < w.size(); ++i) idx.push_back(i);
  reqs = requests_of_step(w, idx);
  REQUIRE(reqs.size() == 1);
  CHECK(reqs[0].shared());
  CHECK(reqs[0].wavefronts > reqs[0].ideal_wavefronts);
  // An atomic on a counter: the trace analyses do not count it as a memory
  // request (trace/ANALYSIS.md); if they ever do, it is a global one.
  std::vector<Event> a{ev(0, 0, Step::split_arrive, Op::atomic, Tensor::counter, 64, 4, 2)};
  reqs = requests_of_step(a, std::vector<std::uint32_t>{0});
  for (const Request& r : reqs) CHECK(r.global());
  Request ra;
  ra.op = Op::atomic;
  CHECK(ra.global());
}

TEST_CASE("block caches: extents of kv_smem, workspace and counter; traced warps", "[viewer][stages]") {
  std::vector<Event> v;
  int seq = 0;
  for (int w = 0; w < 8; ++w)  // 8 warps: more than KernelConfig's 4
    for (int l = 0; l < 32; ++l) {
      v.push_back(ev(w, l, Step::k_load, Op::async_copy, Tensor::k_cache, 16 * (w * 32 + l), 16, seq));
      v.push_back(ev(w, l, Step::k_load, Op::shared_store, Tensor::kv_smem, 1024 + 16 * (w * 32 + l), 16, seq + 1));
      v.push_back(ev(w, l, Step::partition_store, Op::global_store, Tensor::workspace, 8192 + 4 * (w * 32 + l), 4, seq + 2));
    }
  v.push_back(ev(0, 0, Step::split_arrive, Op::atomic, Tensor::counter, 12, 4, 3));
  const TraceIndex idx(v, Granularity::instruction);
  ProblemSpec spec;
  const ConfigInfo cfg = config_info(spec.dtype, spec.head_size, spec.block_size);
  const BlockCaches c = compute_block_caches(spec, trace::Stage::optimized, cfg, v, idx, {}, 0);
  CHECK(c.traced_warps == 8);
  const auto* k = c.extent(Tensor::kv_smem);
  REQUIRE(k != nullptr);
  CHECK(k->begin == 1024);
  CHECK(k->end == 1024 + 16 * 256);
  const auto* ws = c.extent(Tensor::workspace);
  REQUIRE(ws != nullptr);
  CHECK(ws->begin == 8192);
  CHECK(ws->end == 8192 + 4 * 256);
  const auto* ct = c.extent(Tensor::counter);
  REQUIRE(ct != nullptr);
  CHECK(ct->begin == 12);
  CHECK(ct->end == 16);
  CHECK(c.extent(Tensor::q_smem) == nullptr);
  // Banks of kv_smem bytes: word = byte / 4, bank = word % 32.
  BankGridLayout g;
  g.words = static_cast<int>((k->end + 3) / 4);
  const Rect r = g.word_rect(static_cast<int>(1040 / 4));  // byte 1040: word 260, bank 4, row 8
  CHECK(r.x0 == 4 * g.cell_w);
  CHECK(r.y0 == g.header_h + 8 * g.cell_h);
}

TEST_CASE("block caches: recorded values keep the dims of their event", "[viewer][stages]") {
  // Stage 8 stores four dims of the output at once and reports the first
  // one's value; the Values panel names the dims from the stat.
  std::vector<Event> v;
  int n = 0;
  for (int l = 0; l < 4; ++l) {
    Event e = ev(0, l, Step::out_store, Op::global_store, Tensor::output, 8 * l, 8, 0);
    e.dim_begin = 4 * l;
    e.dim_count = 4;
    e.value = 0.5f + l;
    v.push_back(e);
  }
  Event m = ev(0, 0, Step::warp_reduce, Op::shared_store, Tensor::red_scratch, 0, 4, 1);
  m.value = 3.f;  // a max: no dims
  v.push_back(m);
  const TraceIndex idx(v, Granularity::instruction);
  ProblemSpec spec;
  const ConfigInfo cfg = config_info(spec.dtype, spec.head_size, spec.block_size);
  const BlockCaches c = compute_block_caches(spec, trace::Stage::optimized, cfg, v, idx, {}, 0);
  REQUIRE(c.stats.size() == 5);
  for (const auto& st : c.stats) {
    if (st.what != Step::out_store) {
      CHECK(st.dim_begin == -1);
      CHECK(st.value == 3.f);
      continue;
    }
    CHECK(st.dim_count == 4);
    CHECK(st.dim_begin == 4 * st.lane);
    CHECK(st.value == 0.5f + st.lane);
    ++n;
  }
  CHECK(n == 4);
}

TEST_CASE("state flow: the reduce block reads partitions; stores, merges and atomics are seen", "[viewer][stages]") {
  PartitionGeometry g{2, 4, 128};  // 2 heads, 4 partitions, head 128
  // Row (seq 1, head 0): stat offset (1*2+0)*4 = 8 -> partitions at floats 8..11.
  CHECK(partition_of(g, Tensor::part_max, 4 * 9, 1, 0) == 1);
  CHECK(partition_of(g, Tensor::part_sum, 4 * 11, 1, 0) == 3);
  CHECK(partition_of(g, Tensor::part_max, 4 * 12, 1, 0) == -1);  // the next row's
  CHECK(partition_of(g, Tensor::part_out, 4 * (10 * 128 + 5), 1, 0) == 2);
  CHECK(partition_of(g, Tensor::k_cache, 0, 1, 0) == -1);
  std::vector<Event> v;
  for (int p = 0; p < 3; ++p) {
    v.push_back(ev(0, p, Step::partition_reduce, Op::global_load, Tensor::part_max, 4 * (8 + p), 4, 0, BlockLabel::kReduce));
    v.push_back(ev(0, p, Step::partition_reduce, Op::global_load, Tensor::part_sum, 4 * (8 + p), 4, 1, BlockLabel::kReduce));
  }
  v.push_back(ev(0, 0, Step::out_store, Op::global_store, Tensor::output, 0, 2, 2, BlockLabel::kReduce));
  v.push_back(ev(0, 0, Step::split_arrive, Op::atomic, Tensor::counter, 0, 4, 3, BlockLabel::kReduce));
  v.push_back(ev(1, 0, Step::merge, Op::global_load, Tensor::prefix_lse, 0, 4, 0, BlockLabel::kMerge));
  std::vector<std::uint32_t> all;
  for (std::uint32_t i = 0; i < v.size(); ++i) all.push_back(i);
  const StateFlow f = state_flow(v, all, g, 1, 0);
  REQUIRE(f.part_read.size() == 4);
  CHECK(f.part_read[0] == 1);
  CHECK(f.part_read[2] == 1);
  CHECK(f.part_read[3] == 0);
  CHECK(f.output_written);
  CHECK(f.counter_atomics == 1);
  CHECK(f.states_read == 1);
  CHECK(f.prefix_read == 1);
  CHECK(f.suffix_read == 0);
  CHECK(f.any());
  CHECK_FALSE(state_flow(v, {}, g, 1, 0).any());
  // The index keeps the kernels' blocks apart and names them.
  const TraceIndex idx(v, Granularity::instruction);
  CHECK(idx.num_blocks() == 2);
  CHECK(describe_block(idx.block(0), trace::Stage::v2_partition) == "seq 0 head 0 reduce");
  CHECK(describe_block(idx.block(1), trace::Stage::cascade_merge) == "seq 0 head 0 merge");
  CHECK(describe_block({0, 1, 2}, trace::Stage::v2_partition) == "seq 0 head 1 part 2");
  CHECK(describe_block({0, 1, 2}, trace::Stage::optimized) == "seq 0 head 1 split 2");
  CHECK(describe_block({0, 0, BlockLabel::kPrefixBase + 3}, trace::Stage::cascade_merge) == "seq 0 head 0 prefix chunk 3");
  CHECK(describe_block({0, 0, BlockLabel::kPrefixReduce}, trace::Stage::cascade_merge) == "seq 0 head 0 prefix reduce");
  // Block caches of a reduce block: the whole context, no partition range error.
  ProblemSpec spec;
  spec.partition_size = 32;
  const ConfigInfo cfg = config_info(spec.dtype, spec.head_size, spec.block_size);
  const BlockCaches c = compute_block_caches(spec, trace::Stage::v2_partition, cfg, v, idx, {}, 0);
  CHECK(c.token_begin == 0);
  CHECK(c.token_end == spec.context_lens[0]);
}
