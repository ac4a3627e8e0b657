#include "core/trace_load.hpp"

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <future>
#include <stdexcept>

#include "core/highlight.hpp"
#include "pa/index/optimized.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/trace/host_model.hpp"
#include "pa/trace/trace_file.hpp"

namespace pa::viewer {
namespace {
double ms_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

std::string LoadRequest::describe() const {
  switch (kind) {
    case Kind::model: return std::string("host model, stage ") + trace::to_string(stage);
    case Kind::file: return "trace file " + path;
    case Kind::reindex: return "re-indexing the trace";
  }
  return {};
}

long long problem_k_elements(const ProblemSpec& spec) {
  long long tokens = 0;
  for (int c : spec.context_lens) tokens += c;
  return tokens * spec.num_kv_heads * spec.head_size;
}

std::vector<std::vector<int>> problem_tables(const ProblemSpec& spec) {
  std::vector<std::vector<int>> tables;
  try {
    long long tokens = 0;
    for (int c : spec.context_lens) tokens += c;
    // make_problem draws every K/V value too: only worth it for the picture
    // of the tables up to this size (it costs ~0.3 s per million elements).
    if (tokens * spec.num_kv_heads * spec.head_size > (1ll << 22)) return {};
    const PagedProblem p = make_problem(spec);
    for (int q = 0; q < p.num_seqs(); ++q) {
      std::vector<int> row;
      for (int l = 0; l < p.num_logical_blocks(q); ++l) row.push_back(p.physical_block(q, l));
      tables.push_back(std::move(row));
    }
  } catch (const std::exception&) {
    tables.clear();  // an invalid problem is reported by the trace loader
  }
  return tables;
}

BlockCaches compute_block_caches(const ProblemSpec& spec, trace::Stage stage, const ConfigInfo& cfg,
                                 const std::vector<trace::Event>& events, const TraceIndex& index,
                                 const std::vector<std::vector<int>>& tables, int block) {
  BlockCaches c;
  if (index.num_blocks() == 0 || block < 0 || block >= index.num_blocks()) {
    // No trace: still show sequence 0's blocks as the problem lays them out.
    if (!tables.empty()) {
      c.slot_physical = tables[0];
      c.slot_from_problem.assign(c.slot_physical.size(), 1);
    }
    return c;
  }
  const BlockKey key = index.block(block);
  const int ctx = key.seq >= 0 && key.seq < spec.num_seqs() ? spec.context_lens[key.seq] : 0;
  // A V2 partition block covers its partition's tokens; the other kernels'
  // blocks (reduce, merge: negative labels) and v1 the whole context.
  const bool split = spec.partition_size > 0 && key.partition >= 0 &&
                     (stage == trace::Stage::v2_partition || stage == trace::Stage::cascade_merge);
  const auto pr = partition_range(ctx, spec.block_size, split ? spec.partition_size : 0, split ? key.partition : 0);
  c.token_begin = pr.token_begin;
  c.token_end = pr.token_end;
  const int nlog = ceil_div(std::max(ctx, 1), spec.block_size);
  c.slot_physical.assign(nlog, -1);
  c.kv_head = spec.num_kv_heads > 0 && key.head >= 0 && key.head < spec.num_heads
                  ? kv_head_of(key.head, spec.num_heads, spec.num_kv_heads) : 0;
  c.logit_value.assign(std::max(ctx, 0), NAN);
  c.prob_value.assign(std::max(ctx, 0), NAN);
  c.logit_step.assign(std::max(ctx, 0), -1);
  c.prob_step.assign(std::max(ctx, 0), -1);

  // One pass over the block's events: block table, values, what it reads.
  c.reads_k = c.reads_v = false;
  for (std::uint32_t i = 0; i < events.size(); ++i) {
    if (index.block_of_event(i) != block) continue;
    const auto& e = events[i];
    c.reads_k |= e.tensor == trace::Tensor::k_cache;
    c.reads_v |= e.tensor == trace::Tensor::v_cache;
    c.traced_warps = std::max(c.traced_warps, static_cast<int>(e.warp) + 1);
    if (e.tensor != trace::Tensor::none && e.byte_offset >= 0 && e.bytes > 0) {
      BlockCaches::Extent* x = nullptr;
      for (auto& ex : c.extents)
        if (ex.tensor == e.tensor) x = &ex;
      if (!x) {
        c.extents.push_back({e.tensor, e.byte_offset, e.byte_offset + e.bytes});
      } else {
        x->begin = std::min(x->begin, e.byte_offset);
        x->end = std::max(x->end, e.byte_offset + e.bytes);
      }
    }
    if (e.logical_block >= 0 && e.logical_block < nlog && e.physical_block >= 0)
      c.slot_physical[e.logical_block] = e.physical_block;
    if (!std::isfinite(e.value)) continue;
    const int step = index.step_of_event(i);
    const bool tok_ok = e.token >= 0 && e.token < ctx;
    if (e.step == trace::Step::logit_store && tok_ok) {
      c.logit_value[e.token] = e.value;
      c.logit_step[e.token] = step;
    } else if (e.step == trace::Step::prob_store && tok_ok) {
      c.prob_value[e.token] = e.value;
      c.prob_step[e.token] = step;
    } else if (c.stats.size() < 4096) {
      c.stats.push_back({step, e.step, e.tensor, e.warp, e.lane, e.value, e.dim_begin, e.dim_count});
    }
  }
  std::sort(c.extents.begin(), c.extents.end(),
            [](const BlockCaches::Extent& a, const BlockCaches::Extent& b) { return a.tensor < b.tensor; });
  c.slot_from_problem.assign(nlog, 0);
  if (key.seq >= 0 && key.seq < static_cast<int>(tables.size()))
    for (int l = 0; l < nlog && l < static_cast<int>(tables[key.seq].size()); ++l)
      if (c.slot_physical[l] < 0) {
        c.slot_physical[l] = tables[key.seq][l];
        c.slot_from_problem[l] = 1;
      }

  // First step that touches each K / V element of each slot (progress shading).
  const int H = cfg.head_size, B = cfg.block_size;
  for (int l = 0; l < nlog; ++l)
    if (c.slot_physical[l] >= 0) c.slot_of_physical.emplace(c.slot_physical[l], l);
  if (!c.reads_k && !c.reads_v) return c;
  const std::size_t cells = static_cast<std::size_t>(nlog) * H * B;
  if (c.reads_k) c.k_first_step.assign(cells, -1);
  if (c.reads_v) c.v_first_step.assign(cells, -1);
  const KvLayoutGeometry g = cfg.cache(spec.num_kv_heads);
  for (std::uint32_t i = 0; i < events.size(); ++i) {
    const auto& e = events[i];
    if (e.tensor != trace::Tensor::k_cache && e.tensor != trace::Tensor::v_cache) continue;
    if (index.block_of_event(i) != block) continue;
    auto& arr = e.tensor == trace::Tensor::k_cache ? c.k_first_step : c.v_first_step;
    const int step = index.step_of_event(i);
    for_each_kv_element(e, g, cfg.kv_elem_bytes, [&](const CacheGeometry::Coords& k) {
      auto it = c.slot_of_physical.find(k.physical_block);
      if (it == c.slot_of_physical.end() || k.kv_head != c.kv_head || k.d >= H || k.t >= B) return;
      int& v = arr[(static_cast<std::size_t>(it->second) * H + k.d) * B + k.t];
      if (v < 0 || step < v) v = step;
    });
  }
  return c;
}

std::vector<std::uint8_t> read_file_chunked(const std::string& path, LoadControl& ctl, float lo, float hi) {
  // A regular file within the readers' limit (trace::check_trace_file); its
  // own size bounds the buffer, nothing inside it is trusted here.
  const std::uint64_t size = trace::check_trace_file(path);
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) throw std::runtime_error("cannot open '" + path + "': " + std::strerror(errno));
  std::vector<std::uint8_t> buf;
  buf.reserve(static_cast<std::size_t>(size));
  constexpr std::size_t kChunk = 4u << 20;
  std::size_t have = 0;
  try {
    for (;;) {
      ctl.check();
      buf.resize(have + kChunk);
      const std::size_t n = std::fread(buf.data() + have, 1, kChunk, f);
      have += n;
      buf.resize(have);
      if (have > trace::kTraceMaxFileBytes) throw std::runtime_error("'" + path + "' grew past the trace size limit while being read");
      if (size > 0) ctl.set_progress(lo + (hi - lo) * static_cast<float>(static_cast<double>(have) / size));
      if (n < kChunk) break;
    }
  } catch (...) {
    std::fclose(f);
    throw;
  }
  const bool err = std::ferror(f) != 0;
  std::fclose(f);
  if (err) throw std::runtime_error("cannot read '" + path + "'");
  return buf;
}

trace::Selection viewer_selection(const ProblemSpec& spec, trace::Stage stage, int seq, int head, int partition) {
  trace::Selection sel;
  sel.blocks.push_back(trace::BlockId{seq, head, partition});
  if (stage == trace::Stage::optimized && seq >= 0 && seq < spec.num_seqs()) {
    const trace::OptimizedModelPlan plan = trace::optimized_model_plan(spec);
    const int merger = opt_active_splits(spec.context_lens[seq], spec.block_size, plan.split_blocks) - 1;
    if (merger > partition) sel.blocks.push_back(trace::BlockId{seq, head, merger});
  }
  return sel;
}

LoadedTrace load_trace(const LoadRequest& req, LoadControl& ctl) {
  const auto t_all = std::chrono::steady_clock::now();
  LoadedTrace out;
  out.kind = req.kind;
  out.step_after = req.step_after;
  out.sel_seq = req.sel_seq;
  out.sel_head = req.sel_head;
  out.sel_partition = req.sel_partition;
  const auto t0 = std::chrono::steady_clock::now();
  float index_lo = 0.6f;
  switch (req.kind) {
    case LoadRequest::Kind::model: {
      ctl.set_phase("host model: generating the events");
      out.spec = req.spec;
      out.stage = req.stage;
      out.source = trace::kHostModelSource;
      req.spec.validate();  // first: it says what is wrong with the problem, config_info only "unsupported"
      out.cfg = config_info(req.spec);
      if (const std::string why = kv_cache_refusal(req.spec, req.stage); !why.empty()) throw std::invalid_argument(why);
      // The problem's block tables are built from the reference problem; on
      // another thread, so they overlap with the host model (both draw the
      // problem's values, the two largest costs of a load).
      // The problem's block tables come from the reference problem, whose
      // values make_problem draws on every core: the host model does the
      // same, so a large problem's tables are built after the trace is shown
      // (tables_pending) instead of competing with the model for the cores.
      const bool small = problem_k_elements(req.spec) <= kTablesInLoadElements;
      out.tables_pending = !small;
      auto tables = std::async(small ? std::launch::deferred : std::launch::async, [spec = req.spec, small] {
        return small ? problem_tables(spec) : std::vector<std::vector<int>>{};
      });
      if (!trace::stage_is_modelled(req.stage)) {
        out.message = std::string("No replay for stage ") + trace::to_string(req.stage) +
                      ": it has no host model in this build (trace library). The memory and partition panels "
                      "show the problem and the CPU reference.";
      } else {
        trace::Selection sel;
        const int seq = std::clamp(req.sel_seq, 0, std::max(0, req.spec.num_seqs() - 1));
        const int head = std::clamp(req.sel_head, 0, std::max(0, req.spec.num_heads - 1));
        out.sel_seq = seq;
        out.sel_head = head;
        out.sel_partition = std::max(0, req.sel_partition);
        sel = viewer_selection(req.spec, req.stage, seq, head, out.sel_partition);
        // What this stage's trace leaves out (kernels without trace hooks): shown as a note.
        const std::string note = trace::model_coverage_note(req.spec, req.stage);
        if (!note.empty()) out.message = std::string("Partial trace: ") + note + ".";
        try {
          out.events = trace::model_events(req.spec, req.stage, sel);
        } catch (...) {
          tables.wait();
          throw;
        }
      }
      out.tables = tables.get();
      break;
    }
    case LoadRequest::Kind::file: {
      ctl.set_phase("reading the trace file");
      std::vector<std::uint8_t> bytes = read_file_chunked(req.path, ctl, 0.0f, 0.35f);
      ctl.check();
      ctl.set_phase("checking the trace file");
      trace::TraceData d;
      try {
        d = trace::parse_trace(bytes.data(), bytes.size());
      } catch (const std::exception& e) {
        throw std::runtime_error("'" + req.path + "': " + e.what());
      }
      std::vector<std::uint8_t>().swap(bytes);
      out.cfg = config_info(d.header.spec);
      out.spec = d.header.spec;
      out.stage = d.header.stage;
      out.source = d.header.source;
      out.revision = d.header.revision;
      out.path = req.path;
      out.events = std::move(d.events);
      ctl.set_progress(0.6f);
      ctl.check();
      // The problem's block tables, drawn from the reference problem, overlap with the indexing.
      if (problem_k_elements(out.spec) <= kTablesInLoadElements)
        out.tables = problem_tables(out.spec);
      else
        out.tables_pending = true;
      break;
    }
    case LoadRequest::Kind::reindex: {
      out.spec = req.spec;
      out.stage = req.stage;
      out.source = req.source;
      out.revision = req.revision;
      out.path = req.path;
      out.cfg = config_info(req.spec);
      if (req.events) out.events = *req.events;
      out.tables = req.tables;
      index_lo = 0.05f;
      break;
    }
  }
  out.load_ms = ms_since(t0);
  ctl.check();
  ctl.set_progress(index_lo);
  ctl.set_phase("indexing the replay steps");
  const auto t1 = std::chrono::steady_clock::now();
  ctl.set_range(index_lo, 0.93f);
  out.index = TraceIndex(out.events, req.granularity, &ctl);
  out.index_ms = ms_since(t1);
  ctl.check();
  ctl.set_phase("per-block caches");
  // Stages 6 and 7 trace several kernels per (seq, head) (partition blocks,
  // reduce, merge): show the selected thread block first, not the first kernel's.
  if (req.kind == LoadRequest::Kind::model) {
    const int b = out.index.find_block(BlockKey{out.sel_seq, out.sel_head, out.sel_partition});
    if (b >= 0) out.block = b;
  }
  out.block0 = compute_block_caches(out.spec, out.stage, out.cfg, out.events, out.index, out.tables, out.block);
  ctl.set_progress(1.0f);
  out.total_ms = ms_since(t_all);
  return out;
}

}  // namespace pa::viewer
