// Host model of stages 1-5: counts derived by hand, coverage (every K / V
// element of the context touched exactly once), every byte offset inside its
// tensor, program order and epochs, and round trips through trace files.
#include <catch2/catch_test_macros.hpp>
#include <catch2/generators/catch_generators.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>

#include "pa/index/events.hpp"
#include "pa/index/mapping.hpp"
#include "pa/core/config_dispatch.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/core/tolerance.hpp"
#include "pa/reference/alibi.hpp"
#include "pa/trace/analysis.hpp"
#include "pa/trace/compare.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"
#include "../support/spec_of.hpp"

using namespace pa;
using namespace pa::trace;

namespace {

ProblemSpec spec_of(DType dt, int head, int block, std::vector<int> ctx, int heads = 4, int kv_heads = 4) {
  return test::spec_of(dt, head, block, heads, kv_heads, std::move(ctx), ProblemSpec{}.seed);
}

std::vector<Event> only(const std::vector<Event>& ev, Step step, Op op) {
  std::vector<Event> out;
  for (const Event& e : ev)
    if (e.step == step && e.op == op) out.push_back(e);
  return out;
}

int count_thread(const std::vector<Event>& ev, int warp, int lane) {
  return static_cast<int>(std::count_if(ev.begin(), ev.end(), [&](const Event& e) { return e.warp == warp && e.lane == lane; }));
}

// Tensor sizes in bytes, to check every offset lands inside.
struct Bounds {
  std::map<Tensor, std::int64_t> bytes;
};
Bounds bounds_of(const PagedProblem& p) {
  Bounds b;
  const int eb = dtype_bytes(p.spec.dtype);
  const int max_ctx = p.spec.max_context_len();
  const int nw = p.spec.num_threads / 32;
  const std::int64_t rows = static_cast<std::int64_t>(p.num_seqs()) * p.spec.num_heads;
  b.bytes[Tensor::q] = static_cast<std::int64_t>(p.q_bytes.size());
  b.bytes[Tensor::k_cache] = static_cast<std::int64_t>(p.k_bytes.size());
  b.bytes[Tensor::v_cache] = static_cast<std::int64_t>(p.v_bytes.size());
  b.bytes[Tensor::block_table] = static_cast<std::int64_t>(p.block_tables.size()) * 4;
  b.bytes[Tensor::context_lens] = p.num_seqs() * 4;
  b.bytes[Tensor::q_smem] = static_cast<std::int64_t>(p.spec.head_size) * eb;
  b.bytes[Tensor::logits] = std::max<std::int64_t>(max_ctx, 1) * 4;
  b.bytes[Tensor::red_scratch] = 2 * nw * 4;
  b.bytes[Tensor::out_scratch] = static_cast<std::int64_t>(nw / 2) * p.spec.head_size * 4;
  b.bytes[Tensor::output] = rows * p.spec.head_size * eb;
  // stage_out: the largest stage output (per-warp partials) or the logits rows.
  b.bytes[Tensor::stage_out] = rows * std::max<std::int64_t>(std::int64_t{nw} * p.spec.head_size, max_ctx) * 4;
  const std::int64_t parts = std::max(1, p.spec.max_partitions());
  b.bytes[Tensor::part_max] = rows * parts * 4;
  b.bytes[Tensor::part_sum] = rows * parts * 4;
  b.bytes[Tensor::part_out] = rows * parts * p.spec.head_size * 4;
  b.bytes[Tensor::state_lse] = rows * 4;
  return b;
}

void check_offsets_inside(const PagedProblem& p, const std::vector<Event>& ev) {
  const Bounds b = bounds_of(p);
  for (const Event& e : ev) {
    if (e.bytes == 0) {
      REQUIRE(e.byte_offset == -1);
      continue;
    }
    INFO(describe(e));
    REQUIRE(b.bytes.count(e.tensor) == 1);
    REQUIRE(e.byte_offset >= 0);
    REQUIRE(e.byte_offset % std::min(e.bytes, 16) == 0);  // aligned vector accesses
    REQUIRE(e.byte_offset + e.bytes <= b.bytes.at(e.tensor));
  }
}

// Epochs never decrease in a thread's program order, seq_in_thread is 0..n-1,
// and every thread passes the same number of barriers.
void check_program_order(const std::vector<Event>& ev) {
  std::map<std::tuple<int, int, int, int, int>, std::vector<Event>> threads;
  for (const Event& e : ev) threads[{e.seq, e.head, e.partition, e.warp, e.lane}].push_back(e);
  std::map<std::tuple<int, int, int>, int> barriers_per_block;
  for (auto& [k, v] : threads) {
    std::sort(v.begin(), v.end(), [](const Event& a, const Event& b) { return a.seq_in_thread < b.seq_in_thread; });
    int barriers = 0;
    for (std::size_t i = 0; i < v.size(); ++i) {
      REQUIRE(v[i].seq_in_thread == static_cast<int>(i));
      REQUIRE(v[i].epoch == barriers);
      if (v[i].op == Op::barrier) ++barriers;
    }
    auto [it, fresh] = barriers_per_block.emplace(std::tuple{std::get<0>(k), std::get<1>(k), std::get<2>(k)}, barriers);
    REQUIRE(it->second == barriers);
  }
}

}  // namespace

TEST_CASE("host model, fp16 head 128 block 16, 100 tokens: counts by hand", "[trace][model]") {
  // thread group 2, 64 groups, K vec 4 elements (8 B), 16 K vecs per thread;
  // 7 blocks: warp 0 gets blocks 0 and 4, warp 1: 1, 5; warp 2: 2, 6; warp 3: 3.
  const ProblemSpec s = spec_of(DType::f16, 128, 16, {100});
  const auto ev = model_events(s, Stage::qk, {});
  REQUIRE_FALSE(ev.empty());

  const auto k = only(ev, Step::k_load, Op::global_load);
  CHECK(k.size() == 7 * 32 * 16);
  CHECK(count_thread(k, 0, 0) == 32);
  CHECK(count_thread(k, 1, 5) == 32);
  CHECK(count_thread(k, 3, 31) == 16);
  std::int64_t kbytes = 0;
  for (const Event& e : k) kbytes += e.bytes;
  CHECK(kbytes == 7 * 16 * 128 * 2);  // the whole blocks, padding tokens 100..111 included

  const auto q = only(ev, Step::q_load, Op::global_load);
  CHECK(q.size() == 32);  // 32 Q slots of 4 elements, loaded by thread groups 0..15 = warp 0
  for (const Event& e : q) CHECK(e.warp == 0);
  CHECK(only(ev, Step::q_smem_store, Op::shared_store).size() == 32);
  CHECK(only(ev, Step::q_smem_load, Op::shared_load).size() == 7 * 32 * 16);
  CHECK(only(ev, Step::qk_group_reduce, Op::shuffle).size() == 7 * 32);  // one xor step (2 threads)
  CHECK(only(ev, Step::logit_store, Op::shared_store).size() == 100);
  CHECK(only(ev, Step::block_table_load, Op::global_load).size() == 128 + 7 * 32);
  CHECK(only(ev, Step::barrier, Op::barrier).size() == 2 * 128);
  CHECK(only(ev, Step::stage_output, Op::global_store).size() == 100);

  // Analyses: every K request is one warp reading 256 contiguous bytes: 8 sectors, ideal 8.
  const auto reqs = memory_requests(ev);
  int k_reqs = 0, q_reqs = 0;
  for (const auto& r : reqs) {
    if (r.key.step == Step::k_load) {
      ++k_reqs;
      CHECK(r.lanes == 32);
      CHECK(r.sectors == 8);
      CHECK(r.ideal_sectors == 8);
    }
    if (r.key.step == Step::q_smem_load) {
      ++q_reqs;
      // The two threads of a group read q_vecs[0][i] and q_vecs[1][i], 16 vecs x 8 B = 128 B
      // apart: same banks, broadcast to the 16 groups: 2 wavefronts per half-warp phase.
      CHECK(r.unique_bytes == 16);
      CHECK(r.wavefronts == 4);
      CHECK(r.ideal_wavefronts == 2);
    }
  }
  CHECK(k_reqs == 7 * 16);
  CHECK(q_reqs == 7 * 16);
  const auto counts = per_thread_counts(ev);
  REQUIRE(counts.size() == 128);
  CHECK(counts[0].global_loads == 1 + 1 + 2 * (1 + 16));  // context len, Q vec, 2 blocks x (table + 16 K)
  CHECK(counts[0].shared_loads == 2 * 16 + 1);            // q_vecs, then the logits read-back (token 0)
  CHECK(counts[0].shared_stores == 1 + 2);                // its Q slot, logits of tokens 0 and 64
  CHECK(counts[1].shared_stores == 1);                    // g_off 1 stores no logit
}

TEST_CASE("host model with ALiBi: each thread loads its head's slope once, the logits carry the bias",
          "[trace][model][alibi]") {
  ProblemSpec s = spec_of(DType::f16, 128, 16, {100}, 4, 2);
  s.alibi = true;
  const Selection sel{{{0, 3, 0}}};
  const auto ev = model_events(s, Stage::qk, sel);
  const auto slopes = only(ev, Step::alibi_bias, Op::global_load);
  REQUIRE(slopes.size() == 128);  // every thread of the block, once
  const PagedProblem p = make_problem(s);
  for (const Event& e : slopes) {
    CHECK(e.tensor == Tensor::alibi_slopes);
    CHECK(e.byte_offset == 3 * 4);
    CHECK(e.value == p.alibi_slopes[3]);
  }
  // After the Q tile, before the first K load of the thread.
  for (int tid : {0, 77}) {
    int slope_at = -1, k_at = -1, q_at = -1;
    for (const Event& e : ev) {
      if (e.warp * 32 + e.lane != tid) continue;
      if (e.step == Step::alibi_bias) slope_at = e.seq_in_thread;
      if (e.step == Step::k_load && k_at < 0) k_at = e.seq_in_thread;
      if (e.step == Step::q_smem_store) q_at = e.seq_in_thread;
    }
    CHECK(slope_at > q_at);
    CHECK(slope_at < k_at);
  }
  // The stored logits are the biased ones: the last token's (99) unbiased,
  // token 0's lowered by 99 slopes.
  const pa::TokenTensor biased = pa::ref_logits(p), unbiased = pa::ref_logits_alibi(p, std::vector<float>(4, 0.0f));
  int checked = 0;
  for (const Event& e : only(ev, Step::logit_store, Op::shared_store)) {
    if (e.token != 0 && e.token != 99) continue;
    CHECK(e.value == static_cast<float>(biased.at(0, 3, e.token)));
    const double bias = double(p.alibi_slopes[3]) * (e.token - 99);
    CHECK(std::abs(biased.at(0, 3, e.token) - bias - unbiased.at(0, 3, e.token)) < 1e-9);
    ++checked;
  }
  CHECK(checked == 2);
}

TEST_CASE("host model: every K element of the context is loaded exactly once (stage 2)", "[trace][model]") {
  const DType dt = GENERATE(DType::f32, DType::f16, DType::bf16);
  const int block = GENERATE(8, 16, 32);
  const int head = GENERATE(64, 80, 128, 256);
  const ProblemSpec s = spec_of(dt, head, block, {1, 37, 130}, 4, 2);
  const PagedProblem p = make_problem(s);
  Selection sel;
  for (int seq = 0; seq < 3; ++seq) sel.blocks.push_back({seq, 3, 0});
  const auto ev = model_events(s, Stage::qk, sel);
  INFO(dtype_name(dt) << " head " << head << " block " << block);
  check_offsets_inside(p, ev);
  check_program_order(ev);
  const int eb = dtype_bytes(dt);
  for (int seq = 0; seq < 3; ++seq) {
    std::vector<int> touched(static_cast<std::size_t>(p.num_logical_blocks(seq)) * block * head, 0);
    for (const Event& e : ev) {
      if (e.seq != seq || e.step != Step::k_load) continue;
      REQUIRE(e.kv_head == 1);  // head 3 of 4, 2 KV heads
      REQUIRE(e.physical_block == p.physical_block(seq, e.logical_block));
      REQUIRE(e.token / block == e.logical_block);
      REQUIRE(e.bytes == e.dim_count * eb);
      REQUIRE(e.byte_offset == p.cache.k_offset(e.physical_block, e.kv_head, e.dim_begin, e.token % block) * eb);
      for (int d = e.dim_begin; d < e.dim_begin + e.dim_count; ++d) {
        // The vec is contiguous in the layout (it never crosses an x chunk).
        REQUIRE(p.cache.k_offset(e.physical_block, e.kv_head, d, e.token % block) * eb ==
                e.byte_offset + (d - e.dim_begin) * eb);
        ++touched[static_cast<std::size_t>(e.token) * head + d];
      }
    }
    for (std::size_t i = 0; i < touched.size(); ++i) {
      INFO("seq " << seq << " token " << i / head << " dim " << i % head);
      REQUIRE(touched[i] == 1);
    }
    // One logit per context token.
    std::set<int> logits;
    for (const Event& e : ev)
      if (e.seq == seq && e.step == Step::logit_store) REQUIRE(logits.insert(e.token).second);
    REQUIRE(static_cast<int>(logits.size()) == s.context_lens[seq]);
  }
}

TEST_CASE("host model: every V element is loaded once, every output row stored once (stages 4, 5)", "[trace][model]") {
  const DType dt = GENERATE(DType::f16, DType::f32);
  const int block = GENERATE(8, 16, 32);
  const int head = GENERATE(80, 128);
  const ProblemSpec s = spec_of(dt, head, block, {45, 3}, 8, 1);  // MQA
  const PagedProblem p = make_problem(s);
  Selection sel{{{0, 5, 0}, {1, 0, 0}}};
  const auto ev = model_events(s, Stage::warp_reduce, sel);
  INFO(dtype_name(dt) << " head " << head << " block " << block);
  check_offsets_inside(p, ev);
  check_program_order(ev);
  const int eb = dtype_bytes(dt);
  for (const BlockId& b : sel.blocks) {
    const int nblocks = p.num_logical_blocks(b.seq);
    std::vector<int> touched(static_cast<std::size_t>(nblocks) * block * head, 0);
    std::vector<int> out_rows(head, 0);
    for (const Event& e : ev) {
      if (e.seq != b.seq || e.head != b.head) continue;
      REQUIRE(e.kv_head == 0);
      if (e.step == Step::v_load) {
        const int t0 = e.token % block;
        REQUIRE(e.byte_offset == p.cache.v_offset(e.physical_block, 0, e.dim_begin, t0) * eb);
        for (int t = 0; t < e.bytes / eb; ++t) ++touched[static_cast<std::size_t>(e.token + t) * head + e.dim_begin];
      }
      if (e.step == Step::out_store) {
        REQUIRE(e.byte_offset == p.query.out_offset(b.seq, b.head, e.dim_begin) * eb);
        ++out_rows[e.dim_begin];
      }
    }
    for (int v : touched) REQUIRE(v == 1);
    for (int v : out_rows) REQUIRE(v == 1);
  }
}

TEST_CASE("host model, stage 5 on nhd and hnd: every K and V element once, at its address, in 16-byte loads",
          "[trace][model][layouts]") {
  const DType dt = GENERATE(DType::f16, DType::bf16);
  const int block = GENERATE(8, 16, 32);
  const int head = GENERATE(64, 80, 128, 192, 256);
  const KvLayout layout = GENERATE(KvLayout::nhd, KvLayout::hnd);
  ProblemSpec s = spec_of(dt, head, block, {1, 37, 130}, 4, 2);
  s.kv_layout = layout;
  const PagedProblem p = make_problem(s);
  const KvLayoutGeometry g{layout, p.cache};
  const RuntimeConfig rc = make_runtime_config(s);
  INFO(dtype_name(dt) << " head " << head << " block " << block << " layout " << kv_layout_name(layout));
  REQUIRE(rc.token_rows);
  // K vecs are whole 16-byte chunks unless the head does not split into the
  // group's chunks (heads 80 and 112 at block 8: 8 bytes); V vecs always are.
  CHECK(rc.vec_bytes == (head % (rc.thread_group_size * 8) == 0 ? 16 : 8));
  CHECK(rc.v_vec_bytes == 16);
  Selection sel;
  for (int seq = 0; seq < 3; ++seq) sel.blocks.push_back({seq, 3, 0});
  const auto ev = model_events(s, Stage::warp_reduce, sel);
  check_program_order(ev);
  for (int seq = 0; seq < 3; ++seq) {
    const int ctx = s.context_lens[seq];
    const std::size_t cells = static_cast<std::size_t>(p.num_logical_blocks(seq)) * block * head;
    std::vector<int> k_touched(cells, 0), v_touched(cells, 0), out_rows(head, 0);
    for (const Event& e : ev) {
      if (e.seq != seq) continue;
      REQUIRE(e.kv_head == 1);  // head 3 of 4, 2 KV heads
      const int t = e.token % block;
      if (e.step == Step::k_load || e.step == Step::v_load) {
        REQUIRE(e.physical_block == p.physical_block(seq, e.logical_block));
        REQUIRE(e.bytes == e.dim_count * 2);
        const bool k = e.step == Step::k_load;
        REQUIRE(e.bytes == (k ? rc.vec_bytes : 16));
        // The vec's dims are contiguous at the layout's address of its first.
        for (int d = e.dim_begin; d < e.dim_begin + e.dim_count; ++d) {
          const std::int64_t off = k ? g.k_offset(e.physical_block, 1, d, t) : g.v_offset(e.physical_block, 1, d, t);
          REQUIRE(off * 2 == e.byte_offset + (d - e.dim_begin) * 2);
          ++(k ? k_touched : v_touched)[static_cast<std::size_t>(e.token) * head + d];
        }
      }
      if (e.step == Step::out_store) ++out_rows[e.dim_begin];
    }
    // K and V: every slot of the context's blocks (the last block's tail
    // too: the load happens, the logit is dropped, the V vec unused); one
    // accumulate per context token and lane of its row.
    for (std::size_t i = 0; i < cells; ++i) {
      INFO("seq " << seq << " token " << i / head << " dim " << i % head);
      REQUIRE(k_touched[i] == 1);
      REQUIRE(v_touched[i] == 1);
    }
    std::vector<int> accumulated(cells, 0);
    for (const Event& e : ev)
      if (e.seq == seq && e.step == Step::accumulate && e.op == Op::compute)
        for (int d = e.dim_begin; d < e.dim_begin + e.dim_count; ++d)
          ++accumulated[static_cast<std::size_t>(e.token) * head + d];
    for (std::size_t i = 0; i < cells; ++i) REQUIRE(accumulated[i] == (static_cast<int>(i / head) < ctx ? 1 : 0));
    for (int v : out_rows) REQUIRE(v == 1);
  }
}

TEST_CASE("host model, stages 2-5 with a CSR table: the padded trace with the table's loads replaced",
          "[trace][model][layouts]") {
  ProblemSpec s = spec_of(DType::f16, 128, 16, {40, 100, 17}, 8, 2);
  const Selection sel{{{0, 1, 0}, {1, 7, 0}, {2, 0, 0}}};
  const int rows[] = {0, 3, 10};  // sequence s's indices start after the pages of the earlier ones
  std::size_t stages = 0;
  for (Stage st : {Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce}) {
    INFO(to_string(st));
    s.page_table = PageTableForm::padded;
    const std::vector<Event> padded = model_events(s, st, sel);
    s.page_table = PageTableForm::csr;
    const std::vector<Event> csr = model_events(s, st, sel);
    auto is_table = [](const Event& e) {
      return e.tensor == Tensor::context_lens || e.tensor == Tensor::kv_indptr ||
             e.tensor == Tensor::kv_last_page_len || e.tensor == Tensor::block_table;
    };
    std::vector<Event> a, b;
    std::size_t indptr = 0, last = 0, tables = 0;
    for (const Event& e : padded)
      if (!is_table(e)) a.push_back(e);
    for (const Event& e : csr) {
      REQUIRE(e.tensor != Tensor::context_lens);
      if (e.tensor == Tensor::kv_indptr) {
        CHECK((e.byte_offset == e.seq * 4 || e.byte_offset == (e.seq + 1) * 4));
        ++indptr;
      } else if (e.tensor == Tensor::kv_last_page_len) {
        CHECK(e.byte_offset == e.seq * 4);
        ++last;
      } else if (e.tensor == Tensor::block_table) {
        CHECK(e.byte_offset == (rows[e.seq] + e.logical_block) * 4);
        ++tables;
      } else {
        b.push_back(e);
      }
    }
    // Every thread of each of the 3 blocks: both row bounds, then the last page's length.
    CHECK(indptr == 3 * 128 * 2);
    CHECK(last == 3 * 128);
    CHECK(tables == static_cast<std::size_t>(std::count_if(padded.begin(), padded.end(), [](const Event& e) {
            return e.tensor == Tensor::block_table;
          })));
    // Everything else is the padded trace, event for event.
    REQUIRE(a.size() == b.size());
    for (std::size_t i = 0; i < a.size(); ++i) {
      REQUIRE(a[i].step == b[i].step);
      REQUIRE(a[i].tensor == b[i].tensor);
      REQUIRE(a[i].byte_offset == b[i].byte_offset);
      REQUIRE(a[i].warp == b[i].warp);
      REQUIRE(a[i].lane == b[i].lane);
    }
    ++stages;
  }
  CHECK(stages == 4);
}

TEST_CASE("host model: every stage, several configurations: valid, ordered, round-trips", "[trace][model][file]") {
  const Stage st = GENERATE(Stage::q_to_smem, Stage::qk, Stage::softmax, Stage::lv, Stage::warp_reduce);
  const int block = GENERATE(8, 32);
  ProblemSpec s = spec_of(DType::bf16, 96, block, {17, 200}, 4, 2);
  s.extra_q_stride = 8;
  const PagedProblem p = make_problem(s);
  Selection sel{{{1, 1, 0}, {0, 2, 0}}};
  const auto ev = model_events(s, st, sel);
  INFO(to_string(st) << " block " << block);
  REQUIRE_FALSE(ev.empty());
  check_offsets_inside(p, ev);
  check_program_order(ev);
  for (const Event& e : ev) REQUIRE(e.stage == st);
  // Replay order: block, epoch, warp, lane, seq_in_thread.
  REQUIRE(ev.front().seq == 0);
  auto sorted = ev;
  sort_replay_order(sorted);
  REQUIRE(std::equal(ev.begin(), ev.end(), sorted.begin(),
                     [](const Event& a, const Event& b) { return std::memcmp(&a, &b, sizeof a) == 0; }));
  // Deterministic.
  const auto again = model_events(s, st, sel);
  REQUIRE(again.size() == ev.size());
  REQUIRE(std::memcmp(again.data(), ev.data(), ev.size() * sizeof(Event)) == 0);
  // Through a file and back.
  TraceData d{{s, st, kHostModelSource, build_revision()}, ev};
  const auto bytes = serialize_trace(d);
  const TraceData back = parse_trace(bytes.data(), bytes.size());
  REQUIRE(back.events.size() == ev.size());
  REQUIRE(std::memcmp(back.events.data(), ev.data(), ev.size() * sizeof(Event)) == 0);
}

TEST_CASE("host model: stage 3 values and reductions", "[trace][model]") {
  const ProblemSpec s = spec_of(DType::f16, 64, 16, {300});
  const auto ev = model_events(s, Stage::softmax, {});
  // Block-wide results: the broadcast shuffle of every thread carries max, then sum.
  std::vector<float> results;
  for (const Event& e : ev)
    if (e.op == Op::shuffle && e.src_lane == 0 && e.warp == 2 && e.lane == 7) results.push_back(e.value);  // the broadcast
  REQUIRE(results.size() == 2);
  float max_seen = -std::numeric_limits<float>::infinity();
  for (const Event& e : ev)
    if (e.step == Step::logit_store) max_seen = std::max(max_seen, e.value);
  CHECK(results[0] == max_seen);
  CHECK(results[1] >= 1.0f);
  // The probabilities, floats the kernel keeps in shared memory, sum to 1.
  double psum = 0;
  for (const Event& e : ev)
    if (e.step == Step::prob_store && e.op == Op::shared_store) psum += e.value;
  CHECK(within(1.0, psum, tolerance_for(DType::f32)));
  // One logit read per token (300 over 128 threads), then lanes 0..3 of each of
  // the 4 warps read the 4 warp maxima from the reduction scratch.
  CHECK(only(ev, Step::max_reduce, Op::shared_load).size() == 300 + 4 * 4);
}

TEST_CASE("host model rejects bad selections and unmodelled stages", "[trace][model]") {
  const ProblemSpec s = spec_of(DType::f16, 128, 16, {10, 20});
  CHECK_THROWS_AS(model_events(s, Stage::qk, Selection{{{2, 0, 0}}}), std::invalid_argument);
  CHECK_THROWS_AS(model_events(s, Stage::qk, Selection{{{0, 4, 0}}}), std::invalid_argument);
  CHECK_THROWS_AS(model_events(s, Stage::qk, Selection{{{0, 0, 1}}}), std::invalid_argument);
  CHECK_THROWS_AS(model_events(s, static_cast<Stage>(0), {}), std::invalid_argument);
  ProblemSpec bad = s;
  bad.head_size = 100;
  CHECK_THROWS_AS(model_events(bad, Stage::qk, {}), std::invalid_argument);
  // Duplicates collapse; the default selection is block (0, 0, 0).
  CHECK(model_events(s, Stage::qk, Selection{{{0, 0, 0}, {0, 0, 0}}}).size() == model_events(s, Stage::qk, {}).size());
}

TEST_CASE("host model, stage 1 read-back: one 4-byte store per float, as the kernel writes", "[trace][model]") {
  // fp16 / 128: 32 q_vecs slots of 4 halves (threads 0..31); fp32 / 128: 64 slots of 2 floats.
  for (const auto& [dt, slots, vec] : {std::tuple{DType::f16, 32, 4}, std::tuple{DType::f32, 64, 2}}) {
    const ProblemSpec s = spec_of(dt, 128, 16, {10}, 2, 2);
    const auto ev = model_events(s, Stage::q_to_smem, Selection{{{0, 1, 0}}});
    int loads = 0, stores = 0;
    std::set<std::int64_t> offsets;
    for (const Event& e : ev) {
      if (e.step != Step::stage_output) continue;
      const int tid = e.warp * 32 + e.lane;
      CHECK(tid < slots);
      if (e.op == Op::shared_load) {
        ++loads;
        CHECK(e.bytes == vec * dtype_bytes(dt));
      } else {
        ++stores;
        CHECK(e.bytes == 4);
        CHECK(e.dim_count == 1);
        // stage_out row (seq 0, head 1) starts at 128 floats; slot tid holds elements [tid*vec, +vec).
        CHECK(e.byte_offset == (128 + e.dim_begin) * 4);
        CHECK(e.dim_begin / vec == tid);
        offsets.insert(e.byte_offset);
      }
    }
    CHECK(loads == slots);
    CHECK(stores == 128);
    CHECK(offsets.size() == 128);
  }
}

TEST_CASE("host model, stage 6 partitions: each partition walks its own tokens", "[trace][model]") {
  const int block = GENERATE(8, 16, 32);
  ProblemSpec s = spec_of(DType::f16, 128, block, {200, 64}, 4, 2);
  s.partition_size = 64;
  const PagedProblem p = make_problem(s);
  // Sequence 0: partitions 0..3 (the last holds 8 tokens); sequence 1: one partition.
  Selection sel{{{0, 1, 0}, {0, 1, 1}, {0, 1, 2}, {0, 1, 3}, {1, 2, 0}}};
  const auto ev = model_events(s, Stage::v2_partition, sel);
  check_offsets_inside(p, ev);
  check_program_order(ev);
  std::vector<int> touched(static_cast<std::size_t>(p.num_logical_blocks(0)) * block * 128, 0);
  std::map<int, std::set<int>> logits_of_part;
  int part_out = 0, part_stats = 0, lse = 0, out_rows = 0;
  std::vector<Event> reduce;
  for (const Event& e : ev) {
    REQUIRE(e.stage == Stage::v2_partition);
    if (e.partition == kReduceBlock) {  // the reduce blocks of (0, 1) and (1, 2): checked below
      reduce.push_back(e);
      continue;
    }
    REQUIRE(e.partition >= 0);
    if (e.seq == 0 && e.step == Step::k_load) {
      for (int d = e.dim_begin; d < e.dim_begin + e.dim_count; ++d) ++touched[static_cast<std::size_t>(e.token) * 128 + d];
    }
    if (e.seq == 0 && e.step == Step::logit_store) {
      REQUIRE(e.token / 64 == e.partition);
      REQUIRE(e.byte_offset == (e.token - 64 * e.partition) * 4);  // partition-relative logits
      logits_of_part[e.partition].insert(e.token);
    }
    if (e.tensor == Tensor::part_out) {
      REQUIRE(e.seq == 0);
      ++part_out;
    }
    if (e.tensor == Tensor::part_max || e.tensor == Tensor::part_sum) ++part_stats;
    if (e.tensor == Tensor::state_lse) {
      REQUIRE(e.seq == 1);  // the single-partition sequence writes its final state directly
      ++lse;
    }
    if (e.step == Step::out_store) ++out_rows;
  }
  for (std::size_t i = 0; i < 200 * 128; ++i) REQUIRE(touched[i] == 1);
  REQUIRE(logits_of_part.size() == 4);
  CHECK(logits_of_part[3].size() == 8);
  CHECK(part_out == 4 * 128);
  CHECK(part_stats == 4 * 2);
  CHECK(lse == 1);
  CHECK(out_rows == 128);
  // A partition past the sequence's context is not a valid selection.
  CHECK_THROWS_AS(model_events(s, Stage::v2_partition, Selection{{{1, 0, 1}}}), std::invalid_argument);

  // The reduce blocks: (1, 2) has one partition written directly, so its
  // reduce block only reads the context length; (0, 1) combines 4 partitions.
  auto count = [&](int seq, Step st, Op op, Tensor t) {
    return std::count_if(reduce.begin(), reduce.end(), [&](const Event& e) {
      return e.seq == seq && e.step == st && e.op == op && e.tensor == t;
    });
  };
  CHECK(std::count_if(reduce.begin(), reduce.end(), [](const Event& e) { return e.seq == 1; }) == 128);
  CHECK(count(1, Step::block_table_load, Op::global_load, Tensor::context_lens) == 128);
  CHECK(count(0, Step::block_table_load, Op::global_load, Tensor::context_lens) == 128);
  CHECK(count(0, Step::max_reduce, Op::global_load, Tensor::part_max) == 4);
  CHECK(count(0, Step::exp_sum_reduce, Op::global_load, Tensor::part_max) == 4);
  CHECK(count(0, Step::exp_sum_reduce, Op::global_load, Tensor::part_sum) == 4);
  CHECK(count(0, Step::exp_sum_reduce, Op::shared_store, Tensor::out_scratch) == 4);
  for (Step st : {Step::max_reduce, Step::exp_sum_reduce}) {
    CHECK(count(0, st, Op::shuffle, Tensor::none) == 10 * 128);
    CHECK(count(0, st, Op::shared_store, Tensor::red_scratch) == 4);   // lane 0 of each warp
    CHECK(count(0, st, Op::shared_load, Tensor::red_scratch) == 16);   // lanes 0..3 of each warp
  }
  CHECK(count(0, Step::barrier, Op::barrier, Tensor::none) == 4 * 128);
  CHECK(count(0, Step::partition_reduce, Op::shared_load, Tensor::out_scratch) == 4 * 128);
  CHECK(count(0, Step::partition_reduce, Op::global_load, Tensor::part_out) == 4 * 128);
  CHECK(count(0, Step::out_store, Op::global_store, Tensor::output) == 128);
  CHECK(count(0, Step::out_store, Op::global_store, Tensor::state_lse) == 1);
  for (const Event& e : reduce) {
    if (e.seq != 0) continue;
    const int tid = e.warp * 32 + e.lane;
    CHECK(e.head == 1);
    CHECK(e.kv_head == 0);
    if (e.tensor == Tensor::part_max || e.tensor == Tensor::part_sum) {
      CHECK(tid < 4);  // thread p reads partition p's statistics
      CHECK(e.byte_offset == ((0 * 4 + 1) * 4 + tid) * 4);
    }
    if (e.tensor == Tensor::part_out) {  // partition e.iter, dim = the thread
      CHECK(e.dim_begin == tid);
      CHECK(e.byte_offset == (((0 * 4 + 1) * 4 + e.iter) * 128 + tid) * 4);
    }
    if (e.tensor == Tensor::output) CHECK(e.byte_offset == p.query.out_offset(0, 1, tid) * 2);
    if (e.tensor == Tensor::state_lse) {
      CHECK(tid == 0);
      CHECK(e.byte_offset == 1 * 4);
    }
    if (e.tensor == Tensor::red_scratch) CHECK(e.byte_offset == 4 * (e.op == Op::shared_store ? e.warp : e.lane));
  }
}

TEST_CASE("host model, stage 7 cascade: suffix V2, prefix reduce, merge threads", "[trace][model]") {
  const DType dt = GENERATE(DType::f32, DType::f16);
  ProblemSpec s = spec_of(dt, 80, 16, {96, 130, 64}, 4, 2);
  s.partition_size = 32;
  s.shared_prefix_len = 64;
  const PagedProblem p = make_problem(s);
  INFO(s.describe());
  // Selection (1, 3, 1): suffix partition 1 of sequence 1 (tokens 96..127).
  const auto ev = model_events(s, Stage::cascade_merge, Selection{{{1, 3, 1}, {2, 0, 0}}});
  check_program_order(ev);
  std::map<int, int> per_label;
  for (const Event& e : ev) ++per_label[e.partition];
  // Labels present: suffix partitions 1 (seq 1) and 0 (seq 2: empty suffix),
  // the reduces, the merge; fp32 also prefix partition 0 and 1.
  CHECK(per_label.count(1) == 1);
  CHECK(per_label.count(0) == 1);
  CHECK(per_label.count(kReduceBlock) == 1);
  CHECK(per_label.count(kPrefixReduceBlock) == 1);
  CHECK(per_label.count(kMergeBlock) == 1);
  CHECK(per_label.count(kPrefixBlockBase + 1) == (dt == DType::f32 ? 1 : 0));  // fp16: one chunk (kCascadeTraceChunkLen)
  // (2, 0, 0): fp32 seq 2's prefix partition 0; fp16 the prefix kernel's block of chunk 0 (label: its first row).
  CHECK(per_label.count(kPrefixBlockBase + 0) == 1);
  // Sequence 2 (context 64 = the prefix): its suffix is empty; its suffix
  // partition block reads the context length and exits.
  int seq2_suffix = 0;
  for (const Event& e : ev) {
    if (e.seq == 2 && e.partition == 0) {
      ++seq2_suffix;
      CHECK(e.tensor == Tensor::context_lens);
    }
  }
  CHECK(seq2_suffix == 128);
  // Merge: head 80 = 20 vectors of 4 per row; row (1, 3) = row 7 -> vectors
  // 140..159 = threads 140..159 of block 0 (warp 4 lanes 12..31); row (2, 0)
  // = row 8 -> vectors 160..179 (warp 5 lanes 0..19).
  std::set<int> merge_tids;
  for (const Event& e : ev) {
    if (e.partition != kMergeBlock) continue;
    CHECK(e.stage == Stage::cascade_merge);
    CHECK(e.step == Step::merge);
    CHECK(e.iter == 0);
    CHECK(e.epoch == 0);
    CHECK(e.kv_head == -1);
    const int tid = e.warp * 32 + e.lane;
    merge_tids.insert(tid);
    const int row = e.seq * 4 + e.head;
    CHECK(tid == row * 20 + (e.dim_begin < 0 ? tid - row * 20 : e.dim_begin / 4));
    if (e.tensor == Tensor::prefix_out || e.tensor == Tensor::suffix_out) {
      CHECK(e.byte_offset == (row * 80 + e.dim_begin) * 4);
      CHECK(e.bytes == 16);
    }
    if (e.tensor == Tensor::output) CHECK(e.byte_offset == (row * 80 + e.dim_begin) * dtype_bytes(dt));
  }
  CHECK(merge_tids.size() == 40);
  CHECK(*merge_tids.begin() == 140);
  CHECK(*merge_tids.rbegin() == 179);
  auto n = [&](int seq, Tensor t) {
    return std::count_if(ev.begin(), ev.end(), [&](const Event& e) {
      return e.partition == kMergeBlock && e.seq == seq && e.tensor == t;
    });
  };
  CHECK(n(1, Tensor::prefix_lse) == 20);
  CHECK(n(1, Tensor::suffix_out) == 20);
  CHECK(n(1, Tensor::prefix_out) == 20);
  CHECK(n(1, Tensor::output) == 20);
  CHECK(n(1, Tensor::state_lse) == 1);  // the thread of d == 0
  CHECK(n(2, Tensor::suffix_out) == 0);  // empty suffix: weight 0, never read
  CHECK(n(2, Tensor::prefix_out) == 20);
  // The suffix's reduce writes the suffix state, the prefix's the prefix state.
  for (const Event& e : ev) {
    if (e.partition == kReduceBlock && e.op == Op::global_store) {
      CHECK((e.tensor == Tensor::suffix_out || e.tensor == Tensor::suffix_lse));
    }
    if (e.partition == kPrefixReduceBlock && e.op == Op::global_store) {
      CHECK((e.tensor == Tensor::prefix_out || e.tensor == Tensor::prefix_lse));
    }
  }
  // Replay order: prefix blocks, prefix reduce, suffix blocks, reduce, merge.
  for (std::size_t i = 1; i < ev.size(); ++i) {
    if (ev[i].seq == ev[i - 1].seq && ev[i].head == ev[i - 1].head)
      CHECK(block_replay_rank(ev[i - 1].partition) <= block_replay_rank(ev[i].partition));
  }
  // Selections name suffix partitions.
  CHECK_THROWS_AS(model_events(s, Stage::cascade_merge, Selection{{{0, 0, 1}}}), std::invalid_argument);
  CHECK(model_events(s, Stage::cascade_merge, Selection{{{0, 0, 0}}}).size() > 0);
  CHECK(model_coverage_note(s, Stage::cascade_merge).empty() == (dt == DType::f32));
}

// compare_events (pa/trace/compare.hpp), the comparison of the recorded GPU
// tests and pa-lab trace --check, on a cascade trace (every kind of value:
// logits, sums, outputs, lse, -inf lse of an empty suffix).
TEST_CASE("compare_events: fields exact, values within the dtype's tolerance, lse absolute", "[trace][compare]") {
  ProblemSpec s = spec_of(DType::f16, 128, 16, {96, 130, 64}, 4, 2);
  s.partition_size = 32;
  s.shared_prefix_len = 64;
  const Selection sel{{{0, 1, 0}, {1, 3, 1}, {2, 0, 0}}};
  const std::vector<Event> model = model_events(s, Stage::cascade_merge, sel);
  REQUIRE(model.size() > 1000);
  const Tolerance out_tol = tolerance_for(DType::f16), lse_tol = lse_tolerance(DType::f16);
  auto find = [&](auto pred) {
    const auto it = std::find_if(model.begin(), model.end(), pred);
    REQUIRE(it != model.end());
    return static_cast<std::size_t>(it - model.begin());
  };
  const std::size_t lse_i = find([](const Event& e) { return e.tensor == Tensor::state_lse && std::isfinite(e.value); });
  const std::size_t out_i = find([](const Event& e) {
    return e.tensor == Tensor::output && std::isfinite(e.value) && e.value != 0.f;
  });
  const std::size_t ninf_i = find([](const Event& e) { return value_is_lse(e) && std::isinf(e.value); });
  CHECK(value_is_lse(model[lse_i]));
  CHECK_FALSE(value_is_lse(model[out_i]));
  CHECK(event_value_tolerance(model[lse_i], DType::f16).rel == 0.0);
  CHECK(event_value_tolerance(model[lse_i], DType::f16).abs == lse_tol.abs);
  CHECK(event_value_tolerance(model[out_i], DType::f16).abs == out_tol.abs);
  CHECK(event_value_tolerance(model[out_i], DType::f16).rel == out_tol.rel);

  SECTION("equal to itself in any order, every value compared") {
    std::vector<Event> shuffled = model;
    std::shuffle(shuffled.begin(), shuffled.end(), std::mt19937(7));
    const EventComparison c = compare_events(shuffled, model, DType::f16);
    INFO(c.report);
    CHECK(c.equal());
    CHECK(c.report.empty());
    CHECK(c.recorded_events == model.size());
    CHECK(c.pairs_compared == model.size());
    std::size_t with_value = 0;
    for (const Event& e : model) with_value += !std::isnan(e.value);
    CHECK(c.values_compared == with_value);
    CHECK(with_value > 0);
  }
  SECTION("one field off by one is a difference, named in the report") {
    std::vector<Event> rec = model;
    rec[out_i].byte_offset += 1;
    const EventComparison c = compare_events(rec, model, DType::f16);
    CHECK_FALSE(c.equal());
    CHECK(c.field_differences == 1);
    CHECK(c.value_differences == 0);
    CHECK(c.report.find("differs in byte_offset") != std::string::npos);
    CHECK(c.report.find(describe(model[out_i])) != std::string::npos);
  }
  SECTION("a missing event: the thread's counts differ") {
    std::vector<Event> rec = model;
    rec.erase(rec.begin() + static_cast<std::ptrdiff_t>(out_i));
    const EventComparison c = compare_events(rec, model, DType::f16);
    CHECK_FALSE(c.equal());
    CHECK(c.threads_count_differ == 1);
    CHECK(c.report.find("recorded events, model") != std::string::npos);
  }
  SECTION("an output value: relative tolerance") {
    std::vector<Event> rec = model;
    const double w = model[out_i].value;
    const double bound = out_tol.abs + out_tol.rel * std::fabs(w);
    rec[out_i].value = static_cast<float>(w + 0.9 * bound);
    CHECK(compare_events(rec, model, DType::f16).equal());
    rec[out_i].value = static_cast<float>(w + 1.1 * bound);
    const EventComparison c = compare_events(rec, model, DType::f16);
    CHECK_FALSE(c.equal());
    CHECK(c.value_differences == 1);
    CHECK(c.report.find("values outside the fp16 tolerance") != std::string::npos);
  }
  SECTION("an lse: absolute tolerance, however large the lse") {
    std::vector<Event> rec = model;
    const double w = model[lse_i].value;
    rec[lse_i].value = static_cast<float>(w + 0.9 * lse_tol.abs);
    CHECK(compare_events(rec, model, DType::f16).equal());
    rec[lse_i].value = static_cast<float>(w + 1.1 * lse_tol.abs);
    const EventComparison c = compare_events(rec, model, DType::f16);
    CHECK(c.value_differences == 1);
    CHECK(c.report.find("(an lse: absolute)") != std::string::npos);
  }
  SECTION("NaN only equals NaN, -inf only -inf") {
    const std::size_t nan_i = find([](const Event& e) { return std::isnan(e.value); });
    std::vector<Event> rec = model;
    rec[nan_i].value = 0.f;  // a value where the model reports none
    CHECK(compare_events(rec, model, DType::f16).value_differences == 1);
    rec = model;
    rec[out_i].value = std::numeric_limits<float>::quiet_NaN();
    CHECK(compare_events(rec, model, DType::f16).value_differences == 1);
    rec = model;
    rec[ninf_i].value = -std::numeric_limits<float>::max();
    CHECK(compare_events(rec, model, DType::f16).value_differences == 1);
  }
  SECTION("the report names at most max_reported differences and counts the rest") {
    std::vector<Event> rec = model;
    for (int k = 0; k < 5; ++k) rec[static_cast<std::size_t>(k)].token += 1;
    const EventComparison c = compare_events(rec, model, DType::f16, 2);
    CHECK(c.field_differences == 5);
    CHECK(c.report.find("(3 more not shown)") != std::string::npos);
  }
}
