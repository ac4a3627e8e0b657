// Multi-level cascade attention on the CPU (multilevel_cascade.hpp): every
// shared span's K/V gathered once per KV head through its level's page table,
// attended by every query head of every request that shares it, the states
// merged level by level. The attention arithmetic is dense_attention's and the
// merge is merge_states: nothing here computes a softmax or merges on its own.
#include "pa/reference/multilevel_cascade.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <stdexcept>
#include <string>
#include <utility>

#include "pa/core/parallel.hpp"
#include "pa/core/parse_number.hpp"
#include "pa/index/cascade.hpp"

namespace pa {
namespace {

std::string str(long long v) { return std::to_string(v); }

// The requests that read each group of a level, in request order.
std::vector<std::vector<int>> members_of(const CascadeLevel& level) {
  std::vector<std::vector<int>> m(static_cast<std::size_t>(level.num_groups()));
  for (std::size_t r = 0; r < level.group_of.size(); ++r) m[level.group_of[r]].push_back(static_cast<int>(r));
  return m;
}

void check_pool(const char* who, const MultiLevelCascade& c, const CacheGeometry& g) {
  if (g.block_size != c.page_size || g.num_blocks != c.num_pages)
    throw std::invalid_argument(std::string(who) + ": the cache has " + str(g.num_blocks) + " pages of " +
                                str(g.block_size) + " slots; accepted: the cascade's " + str(c.num_pages) +
                                " pages of " + str(c.page_size) + " slots");
}

}  // namespace

MultiLevelRef ref_multilevel_cascade(const PagedProblem& queries, const LayoutCache& cache,
                                     const MultiLevelCascade& c) {
  c.validate();
  const ProblemSpec& s = queries.spec;
  const CacheGeometry& g = cache.geo.cache;
  if (queries.num_seqs() != c.num_requests)
    throw std::invalid_argument("ref_multilevel_cascade: " + str(queries.num_seqs()) + " query sequences for " +
                                str(c.num_requests) + " requests; accepted: one sequence per request");
  check_pool("ref_multilevel_cascade", c, g);
  if (g.num_kv_heads != s.num_kv_heads || g.head_size != s.head_size)
    throw std::invalid_argument("ref_multilevel_cascade: the cache has " + str(g.num_kv_heads) +
                                " KV heads of size " + str(g.head_size) + "; accepted: the queries' " +
                                str(s.num_kv_heads) + " of size " + str(s.head_size));
  const int hs = s.head_size, nkv = s.num_kv_heads;
  const StateGeometry sg{s.num_heads, hs};
  const auto rows = static_cast<std::size_t>(c.num_requests) * s.num_heads;
  const double scale = static_cast<double>(s.scale());
  const float* kdata = cache.k_data();
  const float* vdata = cache.v_data();

  MultiLevelRef r;
  r.levels.assign(static_cast<std::size_t>(c.num_levels()), std::vector<AttentionState>(rows));
  for (int l = 0; l < c.num_levels(); ++l) {
    const std::vector<std::vector<int>> members = members_of(c.levels[l]);
    const CsrPageTable table = c.table(l);
    std::vector<AttentionState>& states = r.levels[l];
    // One task per (group, KV head): its tokens gathered into contiguous rows
    // once, then every member's query heads of that KV head attend them.
    detail::parallel_for(static_cast<std::int64_t>(members.size()) * nkv, [&](std::int64_t task) {
      const int grp = static_cast<int>(task / nkv), kvh = static_cast<int>(task % nkv);
      if (members[grp].empty()) return;
      const int n = table.seq_len(grp);
      std::vector<float> k(static_cast<std::size_t>(n) * hs), v(k.size());
      for (int t = 0; t < n; ++t) {
        const int page = table.page(grp, t), slot = t % c.page_size;
        for (int d = 0; d < hs; ++d) {
          k[static_cast<std::size_t>(t) * hs + d] = kdata[cache.geo.k_offset(page, kvh, d, slot)];
          v[static_cast<std::size_t>(t) * hs + d] = vdata[cache.geo.v_offset(page, kvh, d, slot)];
        }
      }
      std::vector<float> q(static_cast<std::size_t>(hs));
      for (int req : members[grp])
        for (int h = 0; h < s.num_heads; ++h) {
          if (queries.kv_head(h) != kvh) continue;
          for (int d = 0; d < hs; ++d) q[d] = queries.q_at(req, h, d);
          AttentionState& st = states[sg.row(req, h)];
          // n = 0 (an empty group): zeros and lse -inf, the empty state.
          st.out = dense_attention(q.data(), k.data(), v.data(), n, hs, hs, scale, &st.lse);
        }
    });
  }

  // Level by level: the empty-state identity of merge_states lets an empty
  // group pass the other levels through unchanged.
  r.merged.resize(rows);
  r.out.assign(rows * hs, 0.0);
  r.lse.assign(rows, -std::numeric_limits<double>::infinity());
  for (int req = 0; req < c.num_requests; ++req)
    for (int h = 0; h < s.num_heads; ++h) {
      const auto i = static_cast<std::size_t>(sg.row(req, h));
      AttentionState m = r.levels[0][i];
      for (int l = 1; l < c.num_levels(); ++l) m = merge_states(m, r.levels[l][i]);
      r.lse[i] = m.lse;
      for (int d = 0; d < hs; ++d) r.out[queries.query.out_offset(req, h, d)] = m.out[d];
      r.merged[i] = std::move(m);
    }
  return r;
}

MultiLevelCascade FlatTokens::as_cascade() const {
  MultiLevelCascade c;
  c.page_size = page_size();
  c.num_pages = cache.geo.cache.num_blocks;
  c.num_requests = static_cast<int>(tables.indptr.size()) - 1;
  CascadeLevel only{tables, {}};
  for (int r = 0; r < c.num_requests; ++r) only.group_of.push_back(r);
  c.levels.push_back(std::move(only));
  return c;
}

FlatTokens flatten_cascade(const MultiLevelCascade& c, const LayoutCache& pool) {
  c.validate();
  const CacheGeometry& g = pool.geo.cache;
  check_pool("flatten_cascade", c, g);
  const int ps = c.page_size;
  FlatTokens f;
  f.tables.indptr.push_back(0);
  int next = g.num_blocks;
  for (int r = 0; r < c.num_requests; ++r) {
    const int len = c.context_len(r);
    for (int i = 0; i < pages_for_tokens(len, ps); ++i) f.tables.indices.push_back(next++);
    f.tables.indptr.push_back(static_cast<int>(f.tables.indices.size()));
    f.tables.last_page_len.push_back(last_page_len_for_tokens(len, ps));
  }
  // Pages are the outermost index of every layout, so the pool's tensors are
  // the prefix of the bigger ones; the appended pages start as NaN, so a slot
  // the copy below does not fill poisons whoever reads it.
  f.cache.geo = KvLayoutGeometry{pool.geo.layout, CacheGeometry{next, g.num_kv_heads, g.head_size, ps, g.x}};
  const float nan = std::numeric_limits<float>::quiet_NaN();
  f.cache.k.assign(static_cast<std::size_t>(f.cache.geo.k_tensor_elems()), nan);
  std::copy(pool.k.begin(), pool.k.end(), f.cache.k.begin());
  if (!f.cache.geo.one_tensor()) {
    f.cache.v.assign(static_cast<std::size_t>(f.cache.geo.page_elems() * next), nan);
    std::copy(pool.v.begin(), pool.v.end(), f.cache.v.begin());
  }
  float* fv = f.cache.geo.one_tensor() ? f.cache.k.data() : f.cache.v.data();
  const CsrPageTable flat = f.tables.view(ps);
  for (int r = 0; r < c.num_requests; ++r) {
    int to = 0;  // the request's next token in its concatenated context
    for (int l = 0; l < c.num_levels(); ++l) {
      const CsrPageTable t = c.table(l);
      const int grp = c.levels[l].group_of[r];
      for (int from = 0; from < t.seq_len(grp); ++from, ++to) {
        const int sp = t.page(grp, from), ss = from % ps, dp = flat.page(r, to), ds = to % ps;
        for (int kvh = 0; kvh < g.num_kv_heads; ++kvh)
          for (int d = 0; d < g.head_size; ++d) {
            f.cache.k[f.cache.geo.k_offset(dp, kvh, d, ds)] = pool.k_data()[pool.geo.k_offset(sp, kvh, d, ss)];
            fv[f.cache.geo.v_offset(dp, kvh, d, ds)] = pool.v_data()[pool.geo.v_offset(sp, kvh, d, ss)];
          }
      }
    }
  }
  return f;
}

CascadeLevelSpec CascadeLevelSpec::uniform(int num_requests, int group_size, int tokens) {
  if (num_requests < 1 || group_size < 1 || num_requests % group_size != 0)
    throw std::invalid_argument("CascadeLevelSpec::uniform: groups of " + str(group_size) + " over " +
                                str(num_requests) + " requests; accepted: group_size >= 1 dividing num_requests >= 1");
  const int groups = num_requests / group_size;
  return {std::vector<int>(static_cast<std::size_t>(groups), group_size),
          std::vector<int>(static_cast<std::size_t>(groups), tokens)};
}

std::vector<CascadeLevelSpec> parse_cascade_levels(const std::string& text, int num_requests) {
  const std::string accepted = "accepted: G:T,G:T,... (a level per item: groups of G requests, G dividing the " +
                               str(num_requests) + " requests, each sharing T >= 0 tokens; at most 8 levels)";
  auto bad = [&](const std::string& what) { throw std::invalid_argument("levels '" + text + "': " + what + "; " + accepted); };
  std::vector<CascadeLevelSpec> out;
  std::size_t at = 0;
  while (at <= text.size()) {
    const std::size_t comma = std::min(text.find(',', at), text.size());
    const std::string item = text.substr(at, comma - at);
    const std::size_t colon = item.find(':');
    auto number = [&](const std::string& t) {
      const auto v = t.find_first_not_of("0123456789") == std::string::npos ? parse_number<int>(t) : std::nullopt;
      if (!v) bad("item '" + item + "'");
      return *v;
    };
    if (colon == std::string::npos) bad("item '" + item + "'");
    const int g = number(item.substr(0, colon)), tokens = number(item.substr(colon + 1));
    if (g < 1 || num_requests < 1 || num_requests % g != 0) bad("groups of " + str(g));
    out.push_back(CascadeLevelSpec::uniform(num_requests, g, tokens));
    at = comma + 1;
  }
  if (out.size() > 8) bad(str(static_cast<long long>(out.size())) + " levels");
  return out;
}

CascadeProblem make_cascade_problem(const ProblemSpec& base, const std::vector<CascadeLevelSpec>& levels) {
  auto bad = [](const std::string& what) { throw std::invalid_argument("make_cascade_problem: " + what); };
  if (levels.empty()) bad("0 levels; accepted: at least 1");
  int num_requests = 0;
  for (int size : levels[0].group_sizes) num_requests += size;
  std::vector<int> request_tokens(static_cast<std::size_t>(std::max(num_requests, 0)), 0);
  for (std::size_t l = 0; l < levels.size(); ++l) {
    const CascadeLevelSpec& lv = levels[l];
    const std::string at = "level " + str(static_cast<long long>(l));
    if (lv.group_tokens.size() != lv.group_sizes.size())
      bad(at + ": " + str(lv.group_tokens.size()) + " token counts for " + str(lv.group_sizes.size()) +
          " groups; accepted: one per group");
    int first = 0;
    for (std::size_t grp = 0; grp < lv.group_sizes.size(); ++grp) {
      const int size = lv.group_sizes[grp], tokens = lv.group_tokens[grp];
      if (size < 1) bad(at + " group " + str(grp) + ": " + str(size) + " requests; accepted: >= 1");
      if (tokens < 0) bad(at + " group " + str(grp) + ": " + str(tokens) + " tokens; accepted: >= 0");
      for (int i = 0; i < size && first + i < num_requests; ++i) {
        if (tokens > std::numeric_limits<int>::max() - request_tokens[first + i])
          bad(at + " group " + str(grp) + ": request " + str(first + i) + " would read more than " +
              str(std::numeric_limits<int>::max()) + " tokens; accepted: a request's levels add up to at most that");
        request_tokens[first + i] += tokens;
      }
      first += size;
    }
    if (first != num_requests || num_requests < 1)
      bad(at + ": groups cover " + str(first) + " requests; accepted: the " + str(num_requests) +
          " requests of level 0, at least 1");
  }
  for (int r = 0; r < num_requests; ++r)
    if (request_tokens[r] == 0)
      bad("request " + str(r) + " has no token at any level; accepted: at least one token per request");

  // The pool: one sequence per non-empty group, so make_problem draws each
  // shared span once, in shuffled pages, with NaN tails and spare garbage.
  ProblemSpec pool_spec = base;
  pool_spec.shared_prefix_len = 0;
  pool_spec.context_lens.clear();
  for (const CascadeLevelSpec& lv : levels)
    for (int tokens : lv.group_tokens)
      if (tokens > 0) pool_spec.context_lens.push_back(tokens);
  ProblemSpec query_spec = base;
  query_spec.shared_prefix_len = 0;
  query_spec.context_lens.assign(static_cast<std::size_t>(num_requests), 1);
  query_spec.spare_blocks = 0;

  CascadeProblem cp;
  cp.pool = make_problem(pool_spec);
  cp.queries = make_problem(query_spec);
  MultiLevelCascade& c = cp.cascade;
  c.page_size = base.block_size;
  c.num_pages = cp.pool.num_blocks;
  c.num_requests = num_requests;
  int seq = 0;  // the pool's next sequence
  for (const CascadeLevelSpec& lv : levels) {
    CascadeLevel level;
    level.groups.indptr.push_back(0);
    for (std::size_t grp = 0; grp < lv.group_sizes.size(); ++grp) {
      const int tokens = lv.group_tokens[grp];
      if (tokens > 0) {
        for (int b = 0; b < cp.pool.num_logical_blocks(seq); ++b)
          level.groups.indices.push_back(cp.pool.physical_block(seq, b));
        ++seq;
      }
      level.groups.indptr.push_back(static_cast<int>(level.groups.indices.size()));
      level.groups.last_page_len.push_back(last_page_len_for_tokens(tokens, c.page_size));
      level.group_of.insert(level.group_of.end(), static_cast<std::size_t>(lv.group_sizes[grp]),
                            static_cast<int>(grp));
    }
    c.levels.push_back(std::move(level));
  }
  c.validate();
  cp.flat = flatten_cascade(c, cp.cache(KvLayout::vllm));
  return cp;
}

}  // namespace pa
