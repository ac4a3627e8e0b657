// Multi-level cascade inference over a paged KV cache, on the CPU: the
// reference the multi-level cascade kernels are checked against.
//
// Why levels: requests served together often share more than one prefix. A
// system prompt is shared by every request, a few-shot block by a subset of
// them, and each request has its own tokens after that. A plain paged kernel
// reads each request's whole context, so a shared prefix is read once per
// request. A cascade stores and reads each shared span once: level 0 holds
// the spans shared widely, later levels the narrower ones, and the last level
// one span per request. Each level is a CSR page table whose rows are "level
// groups" (one shared span each), and every request names the group it reads
// at every level. Attention over a request's whole context then splits into
// one attention state (out, lse) per level (pa/reference/attention.hpp's
// AttentionState: the state over disjoint token sets merges exactly), and the
// states merged level by level give the same output and lse as attention over
// the request's concatenated tokens.
//
// What this file adds to the reference:
// - (MultiLevelCascade, the levels as CSR tables over the groups and request ->
//   group maps, with validate(), lives in pa/core/multilevel_cascade.hpp: the
//   GPU cascade takes the same tables;)
// - ref_multilevel_cascade: every (request, query head)'s state at every level
//   (float64, natural-log lse, an empty group giving (0, -inf)), merged in level
//   order with merge_states, the reference's one merge;
// - flatten_cascade: the same tokens as a non-cascade server stores them (each
//   request's concatenated tokens copied into pages of its own, one CSR row per
//   request), so plain paged attention (ref_output_paged) is the check;
// - make_cascade_problem: a cascade from a ProblemSpec and per-level group
//   sizes and token counts, with its queries, pool and flat equivalent.
#pragma once
#include <string>
#include <vector>

#include "pa/core/multilevel_cascade.hpp"
#include "pa/core/paged_cache.hpp"
#include "pa/reference/attention.hpp"
#include "pa/reference/kv_layouts.hpp"

namespace pa {

// The reference result: per level and merged, index StateGeometry::row
// (request * num_heads + head).
struct MultiLevelRef {
  std::vector<std::vector<AttentionState>> levels;  // [level][row]: the state of the request's group there
  std::vector<AttentionState> merged;               // levels merged in order 0, 1, ..., L-1
  std::vector<double> out;                          // merged outputs, [request][head][head_size]
  std::vector<double> lse;                          // merged lse (natural log), [request][head]
};

// Multi-level cascade attention: request r's query heads are queries' sequence
// r (queries.q_at; its own KV pool is not read), K and V come from `cache`
// through each level's page table. Each group's K/V rows of a KV head are
// gathered once and every query head of every member request attends them
// (the "read once" a kernel does per level), with dense_attention's arithmetic,
// so one level of one group per request gives exactly ref_output_paged.
// Validates c, and throws std::invalid_argument when it does not fit the
// problem: queries.num_seqs() != c.num_requests, or cache's page size, page
// count, KV heads or head size differ from c's and queries'.
MultiLevelRef ref_multilevel_cascade(const PagedProblem& queries, const LayoutCache& cache, const MultiLevelCascade& c);

// The cascade's tokens as a non-cascade server stores them: `cache` is the
// pool with one run of pages appended per request (pages pool.num_blocks ...),
// holding that request's concatenated tokens (level 0's group first) in
// order, slots past its length NaN; `tables` has one row per request over it.
struct FlatTokens {
  LayoutCache cache;
  CsrTables tables;
  int page_size() const { return cache.geo.cache.block_size; }
  // The one-level cascade of these rows: ref_multilevel_cascade over it is
  // plain attention with the lse.
  MultiLevelCascade as_cascade() const;
};
// Validates c (MultiLevelCascade::validate) and that pool has c's pages;
// the copy is made in pool's layout.
FlatTokens flatten_cascade(const MultiLevelCascade& c, const LayoutCache& pool);

// One level of make_cascade_problem: the requests, in order, split into groups
// of group_sizes[g] consecutive requests, group g reading group_tokens[g]
// tokens of its own (0: an empty group).
struct CascadeLevelSpec {
  std::vector<int> group_sizes;
  std::vector<int> group_tokens;
  // num_requests / group_size groups of `tokens` each. Throws
  // std::invalid_argument unless group_size >= 1 divides num_requests >= 1.
  static CascadeLevelSpec uniform(int num_requests, int group_size, int tokens);
};

// "G:T,G:T,...": one uniform level per item over num_requests requests,
// groups of G consecutive requests (G dividing num_requests) each sharing T
// >= 0 tokens; at most 8 items (pa-lab run --levels, the viewer's levels).
// Throws std::invalid_argument naming the text, the item and what is accepted.
std::vector<CascadeLevelSpec> parse_cascade_levels(const std::string& text, int num_requests);

struct CascadeProblem {
  PagedProblem queries;       // Q: sequence r = request r (one token each: its pool is never read)
  PagedProblem pool;          // the pages: one sequence per non-empty group (level by level), its
                              // block-table row that group's pages: shuffled, NaN tails, spare garbage
  MultiLevelCascade cascade;  // over pool's pages
  FlatTokens flat;            // the plain equivalent, in the vllm layout
  LayoutCache cache(KvLayout layout) const { return to_layout(pool, layout); }
};
// Builds the cascade of `levels` with base's dtype, head size, block size
// (the page size), heads, KV heads, spare blocks, NaN tails and seed (base's
// context_lens and shared_prefix_len are replaced: the levels describe the
// tokens). Throws std::invalid_argument when there is no level, a level's
// group sizes are not >= 1 or do not add up to level 0's number of requests,
// its token counts are not one per group and >= 0, or a request would have
// no token at all; and ProblemError for what ProblemSpec::validate refuses.
CascadeProblem make_cascade_problem(const ProblemSpec& base, const std::vector<CascadeLevelSpec>& levels);

}  // namespace pa
