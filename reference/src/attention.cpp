// Dense attention and every stage's expected output, float64 accumulation.
#include "pa/reference/attention.hpp"
#include "pa/reference/kv_layouts.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "pa/index/mapping.hpp"
#include "pa/core/config_dispatch.hpp"
#include "pa/core/dtype_convert.hpp"
#include "pa/core/parallel.hpp"
#include "attention_core.hpp"

namespace pa {
using namespace ref_core;

// ---- dense ----------------------------------------------------------------------
std::vector<double> dense_attention(const float* q, const float* k, const float* v, int context_len,
                                    int head_size, int row_stride, double scale, double* lse_out,
                                    double alibi_slope) {
  if (context_len < 0 || head_size < 1 || row_stride < head_size) {
    throw std::invalid_argument("dense_attention: context_len " + std::to_string(context_len) + ", head_size " +
                                std::to_string(head_size) + ", row_stride " + std::to_string(row_stride) +
                                "; accepted: context_len >= 0, head_size >= 1, row_stride >= head_size");
  }
  const auto sm = softmax_of_logits(context_len, [&](int t) {
    double acc = 0.0;
    for (int d = 0; d < head_size; ++d) {
      acc += static_cast<double>(q[d]) * static_cast<double>(k[static_cast<std::size_t>(t) * row_stride + d]);
    }
    return biased_logit(scale * acc, alibi_slope, t, context_len);
  });
  if (lse_out) *lse_out = context_len > 0 ? sm.max + std::log(sm.sum) : kNegInf;
  if (context_len == 0) return std::vector<double>(head_size, 0.0);
  return lv_core(sm, head_size, [&](int t, double w, std::vector<double>& out) {
    for (int d = 0; d < head_size; ++d) {
      out[d] += w * static_cast<double>(v[static_cast<std::size_t>(t) * row_stride + d]);
    }
  });
}

std::vector<double> dense_output(const PagedProblem& p) {
  const ProblemSpec& s = p.spec;
  std::vector<double> out(out_size(p));
  for (int seq = 0; seq < p.num_seqs(); ++seq) {
    const DenseKV kv = make_dense_kv(s, seq);
    const int row_stride = s.num_kv_heads * s.head_size;
    detail::parallel_for(s.num_heads, [&](std::int64_t h64) {
      const int h = static_cast<int>(h64);
      std::vector<float> qrow(s.head_size);
      for (int d = 0; d < s.head_size; ++d) qrow[d] = p.q_at(seq, h, d);
      const std::size_t kvoff = static_cast<std::size_t>(p.kv_head(h)) * s.head_size;
      const auto o = dense_attention(qrow.data(), kv.k.data() + kvoff, kv.v.data() + kvoff, kv.context_len,
                                     s.head_size, row_stride, scale_of(s), nullptr, alibi_slope_of(p, h));
      for (int d = 0; d < s.head_size; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
    });
  }
  return out;
}

// ---- stage 1 ----------------------------------------------------------------------
std::vector<int> q_smem_dim_order(const ProblemSpec& spec) {
  std::vector<int> order(spec.head_size, -1);
  with_kernel_config(spec, [&](auto cfg) {
    using Cfg = decltype(cfg);
    using M = ThreadMapping<Cfg>;
    for (int g = 0; g < Cfg::kThreadGroupSize; ++g)
      for (int i = 0; i < Cfg::kNumVecsPerThread; ++i)
        for (int e = 0; e < Cfg::kVecSize; ++e)
          order.at(static_cast<std::size_t>(M::q_smem_slot(g, i)) * Cfg::kVecSize + e) = M::qk_vec_dim(g, i) + e;
  });
  // The slots must be a permutation of the head dimensions.
  std::vector<bool> seen(spec.head_size, false);
  for (int d : order) {
    if (d < 0 || d >= spec.head_size || seen[d]) {
      throw std::logic_error("q_smem_dim_order: the mapping's Q slots are not a permutation of the head dims (" +
                             spec.describe() + ")");
    }
    seen[d] = true;
  }
  return order;
}

std::vector<float> ref_q_smem(const PagedProblem& p) {
  const auto order = q_smem_dim_order(p.spec);
  std::vector<float> out(out_size(p));
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < p.spec.num_heads; ++h)
      for (int j = 0; j < p.spec.head_size; ++j) out[p.query.out_offset(seq, h, j)] = p.q_at(seq, h, order[j]);
  return out;
}

// ---- stages 2 and 3 -------------------------------------------------------------------
TokenTensor ref_logits(const PagedProblem& p) {
  TokenTensor tt = empty_token_tensor(p);
  for_each_row(p, [&](int seq, int h) {
    const auto sm = paged_softmax(p, seq, h, 0, p.context_len(seq));
    std::copy(sm.logits.begin(), sm.logits.end(), tt.values.begin() + tt.index(seq, h, 0));
  });
  return tt;
}

SoftmaxRef ref_softmax(const PagedProblem& p) {
  SoftmaxRef r;
  r.probs = empty_token_tensor(p);
  const std::size_t nsh = static_cast<std::size_t>(p.num_seqs()) * p.spec.num_heads;
  r.max_logit.assign(nsh, kNegInf);
  r.exp_sum.assign(nsh, 0.0);
  for_each_row(p, [&](int seq, int h) {
    const auto sm = paged_softmax(p, seq, h, 0, p.context_len(seq));
    const std::size_t sh = static_cast<std::size_t>(seq) * p.spec.num_heads + h;
    r.max_logit[sh] = sm.max;
    r.exp_sum[sh] = sm.sum;
    for (int t = 0; t < p.context_len(seq); ++t) {
      r.probs.values[r.probs.index(seq, h, t)] = std::exp(sm.logits[t] - sm.max) / sm.sum;
    }
  });
  return r;
}

// ---- stage 4 ----------------------------------------------------------------------------
std::vector<int> warp_of_logical_block(const ProblemSpec& spec, int num_blocks) {
  std::vector<int> warp(std::max(num_blocks, 0), -1);
  with_kernel_config(spec, [&](auto cfg) {
    using Cfg = decltype(cfg);
    for (int w = 0; w < Cfg::kNumWarps; ++w)
      for (int it = 0;; ++it) {
        const int b = ThreadMapping<Cfg>::warp_block(0, w, it);
        if (b >= num_blocks) break;
        if (warp[b] != -1) throw std::logic_error("warp_of_logical_block: block assigned to two warps");
        warp[b] = w;
      }
  });
  for (int w : warp)
    if (w < 0) throw std::logic_error("warp_of_logical_block: a block is assigned to no warp");
  return warp;
}

WarpPartials ref_warp_partials(const PagedProblem& p) {
  const ProblemSpec& s = p.spec;
  WarpPartials wp;
  wp.num_warps = s.num_threads / kWarpSize;
  wp.num_heads = s.num_heads;
  wp.head_size = s.head_size;
  wp.values.assign(static_cast<std::size_t>(p.num_seqs()) * s.num_heads * wp.num_warps * s.head_size, 0.0);
  std::vector<std::vector<int>> warp_of_seq(p.num_seqs());
  for (int seq = 0; seq < p.num_seqs(); ++seq) warp_of_seq[seq] = warp_of_logical_block(s, p.num_logical_blocks(seq));
  for_each_row(p, [&](int seq, int h) {
    const auto& warp_of = warp_of_seq[seq];
    {
      const auto sm = paged_softmax(p, seq, h, 0, p.context_len(seq));
      const PagedRow row{p, seq, h, p.kv_head(h), 0};
      std::vector<std::vector<double>> acc(wp.num_warps, std::vector<double>(s.head_size, 0.0));
      for (int t = 0; t < p.context_len(seq); ++t) {
        row.vadd(t, std::exp(sm.logits[t] - sm.max) / sm.sum, acc[warp_of[t / s.block_size]]);
      }
      for (int w = 0; w < wp.num_warps; ++w)
        for (int d = 0; d < s.head_size; ++d) wp.values[wp.index(seq, h, w, d)] = acc[w][d];
    }
  });
  return wp;
}

// ---- stage 5 ------------------------------------------------------------------------------
std::vector<double> ref_output(const PagedProblem& p) {
  std::vector<double> out(out_size(p));
  for_each_row(p, [&](int seq, int h) {
    const auto sm = paged_softmax(p, seq, h, 0, p.context_len(seq));
    const auto o = paged_lv(p, seq, h, 0, sm);
    for (int d = 0; d < p.spec.head_size; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
  });
  return out;
}

// ---- any KV layout, any page table (kv_layouts.hpp) -------------------------------------------
LayoutCache convert_layout(const LayoutCache& from, KvLayout to) {
  LayoutCache c;
  c.geo = KvLayoutGeometry{to, from.geo.cache};
  c.k.assign(static_cast<std::size_t>(c.geo.k_tensor_elems()), 0.f);
  if (!c.geo.one_tensor()) c.v.assign(static_cast<std::size_t>(c.geo.page_elems() * c.geo.cache.num_blocks), 0.f);
  move_kv_elements(from.geo, from.k_data(), from.v_data(), c.geo, c.k.data(), c.geo.one_tensor() ? c.k.data() : c.v.data(),
                   sizeof(float));
  return c;
}

LayoutCache to_layout(const PagedProblem& p, KvLayout layout) {
  LayoutCache vllm;  // the problem's own cache (a copy: LayoutCache owns its tensors)
  vllm.geo = KvLayoutGeometry{KvLayout::vllm, p.cache};
  vllm.k = p.k_cache;
  vllm.v = p.v_cache;
  return layout == KvLayout::vllm ? vllm : convert_layout(vllm, layout);
}

std::vector<double> ref_output_paged(const PagedProblem& p, const LayoutCache& cache,
                                     const std::function<int(int, int)>& page_of, const std::vector<int>& lens) {
  if (lens.size() != static_cast<std::size_t>(p.num_seqs()))
    throw std::invalid_argument("ref_output_paged: " + std::to_string(lens.size()) + " lengths for " +
                                std::to_string(p.num_seqs()) + " sequences (accepted: one per sequence)");
  const int hs = p.spec.head_size, bs = p.spec.block_size;
  const float* k = cache.k_data();
  const float* v = cache.v_data();
  std::vector<double> out(out_size(p));
  for_each_row(p, [&](int seq, int h) {
    const int kvh = p.kv_head(h);
    const double slope = alibi_slope_of(p, h);
    const Softmaxed sm = softmax_of_logits(lens[seq], [&](int t) {
      const int page = page_of(seq, t);
      double acc = 0.0;
      for (int d = 0; d < hs; ++d)
        acc += static_cast<double>(p.q_at(seq, h, d)) * static_cast<double>(k[cache.geo.k_offset(page, kvh, d, t % bs)]);
      return biased_logit(scale_of(p.spec) * acc, slope, t, lens[seq]);
    });
    const std::vector<double> o = lv_core(sm, hs, [&](int t, double w, std::vector<double>& acc) {
      const int page = page_of(seq, t);
      for (int d = 0; d < hs; ++d) acc[d] += w * static_cast<double>(v[cache.geo.v_offset(page, kvh, d, t % bs)]);
    });
    for (int d = 0; d < hs; ++d) out[p.query.out_offset(seq, h, d)] = o[d];
  });
  return out;
}

// ---- stage 6 --------------------------------------------------------------------------------
V2Ref ref_v2(const PagedProblem& p, int partition_size) {
  const ProblemSpec& s = p.spec;
  if (partition_size < 0 || partition_size % s.block_size != 0) {
    throw std::invalid_argument("ref_v2: partition_size " + std::to_string(partition_size) +
                                " is not a multiple of block_size " + std::to_string(s.block_size) +
                                "; accepted: 0 (one partition) or a positive multiple of block_size");
  }
  V2Ref r;
  r.partition_size = partition_size;
  r.max_partitions = num_partitions(s.max_context_len(), partition_size);
  r.geom = PartitionGeometry{s.num_heads, r.max_partitions, s.head_size};
  const std::size_t nstat = static_cast<std::size_t>(p.num_seqs()) * s.num_heads * r.max_partitions;
  r.part_out.assign(nstat * s.head_size, 0.0);
  r.part_max.assign(nstat, kNegInf);
  r.part_sum.assign(nstat, 0.0);
  r.out.assign(out_size(p), 0.0);
  for_each_row(p, [&](int seq, int h) {
    {
      const int np = num_partitions(p.context_len(seq), partition_size);
      for (int pi = 0; pi < np; ++pi) {
        const PartitionRange pr = partition_range(p.context_len(seq), s.block_size, partition_size, pi);
        if (pr.empty()) continue;
        const auto sm = paged_softmax(p, seq, h, pr.token_begin, pr.token_end);
        const auto o = paged_lv(p, seq, h, pr.token_begin, sm);
        const auto si = r.geom.stat_offset(seq, h, pi);
        r.part_max[si] = sm.max;
        r.part_sum[si] = sm.sum;
        for (int d = 0; d < s.head_size; ++d) r.part_out[r.geom.out_offset(seq, h, pi, d)] = o[d];
      }
      // The reduce: rescale each partition's exp-sum to the global max.
      double gmax = kNegInf;
      for (int pi = 0; pi < np; ++pi) gmax = std::max(gmax, r.part_max[r.geom.stat_offset(seq, h, pi)]);
      double total = 0.0;
      std::vector<double> acc(s.head_size, 0.0);
      for (int pi = 0; pi < np; ++pi) {
        const auto si = r.geom.stat_offset(seq, h, pi);
        if (r.part_sum[si] == 0.0) continue;
        const double w = r.part_sum[si] * std::exp(r.part_max[si] - gmax);
        total += w;
        for (int d = 0; d < s.head_size; ++d) acc[d] += w * r.part_out[r.geom.out_offset(seq, h, pi, d)];
      }
      for (int d = 0; d < s.head_size; ++d) r.out[p.query.out_offset(seq, h, d)] = acc[d] / total;
    }
  });
  return r;
}

V2Ref ref_v2(const PagedProblem& p) { return ref_v2(p, p.spec.partition_size); }

// ---- stage 7 ----------------------------------------------------------------------------------
AttentionState merge_states(const AttentionState& a, const AttentionState& b) {
  if (std::isnan(a.lse) || std::isnan(b.lse) || a.lse == INFINITY || b.lse == INFINITY) {
    throw std::invalid_argument("merge_states: lse " + std::to_string(a.lse) + " and " + std::to_string(b.lse) +
                                "; accepted: finite values or -inf (empty state)");
  }
  if (a.empty()) return b;
  if (b.empty()) return a;
  if (a.out.size() != b.out.size()) {
    throw std::invalid_argument("merge_states: output sizes " + std::to_string(a.out.size()) + " and " +
                                std::to_string(b.out.size()) + " differ; accepted: equal head sizes");
  }
  const double m = std::max(a.lse, b.lse);
  const double wa = std::exp(a.lse - m), wb = std::exp(b.lse - m);  // one of them is 1
  AttentionState r;
  r.lse = m + std::log(wa + wb);
  r.out.resize(a.out.size());
  for (std::size_t d = 0; d < a.out.size(); ++d) r.out[d] = (wa * a.out[d] + wb * b.out[d]) / (wa + wb);
  return r;
}

std::vector<AttentionState> ref_states(const PagedProblem& p, int token_begin, int token_end) {
  return states_over(p, token_begin, token_end,
                     [&](int seq, int h, int b, int e) { return paged_softmax(p, seq, h, b, e); });
}

CascadeRef ref_cascade(const PagedProblem& p) {
  CascadeRef c;
  const int prefix = p.spec.shared_prefix_len;
  c.prefix = ref_states(p, 0, prefix);
  c.suffix = ref_states(p, prefix, std::numeric_limits<int>::max());
  c.out.assign(out_size(p), 0.0);
  c.lse.assign(c.prefix.size(), kNegInf);
  c.merged.resize(c.prefix.size());
  for (int seq = 0; seq < p.num_seqs(); ++seq)
    for (int h = 0; h < p.spec.num_heads; ++h) {
      const std::size_t sh = static_cast<std::size_t>(seq) * p.spec.num_heads + h;
      c.merged[sh] = merge_states(c.prefix[sh], c.suffix[sh]);
      c.lse[sh] = c.merged[sh].lse;
      for (int d = 0; d < p.spec.head_size; ++d) c.out[p.query.out_offset(seq, h, d)] = c.merged[sh].out[d];
    }
  return c;
}

std::vector<float> round_to_dtype(const std::vector<double>& values, DType t) {
  std::vector<float> out(values.size());
  for (std::size_t i = 0; i < values.size(); ++i) out[i] = round_to_dtype(static_cast<float>(values[i]), t);
  return out;
}

}  // namespace pa
