// Multi-level cascade tables: the levels of shared spans and which group of
// each level every request reads (the data the CPU reference in
// pa/reference/multilevel_cascade.hpp and the GPU cascade in
// pa/kernels/multilevel_cascade.hpp both take). Why levels, and what a level
// group is: pa/reference/multilevel_cascade.hpp.
#pragma once
#include <vector>

#include "pa/core/kv_layout_cache.hpp"

namespace pa {

// One level: a CSR page table whose row g is level group g's span of tokens
// (groups.indptr has num_groups + 1 entries; an empty group has no pages and
// its last_page_len is not read), and the group each request reads here.
struct CascadeLevel {
  CsrTables groups;
  std::vector<int> group_of;  // [num_requests], each in [0, num_groups)
  int num_groups() const { return static_cast<int>(groups.indptr.size()) - 1; }
};

// L >= 1 levels over one pool of num_pages pages of page_size slots, read in
// level order: a request's context is its level-0 group's tokens, then its
// level-1 group's, ..., then its last level's. Pages may appear in any order,
// in several groups and at several levels (the tables only read the pool).
struct MultiLevelCascade {
  int page_size = 0;
  int num_pages = 0;
  int num_requests = 0;
  std::vector<CascadeLevel> levels;

  int num_levels() const { return static_cast<int>(levels.size()); }
  CsrPageTable table(int level) const { return levels[level].groups.view(page_size); }
  // Tokens request r reads at `level` (0 for an empty group).
  int tokens(int level, int request) const { return table(level).seq_len(levels[level].group_of[request]); }
  // Tokens of request r over all levels: the length of its concatenated context.
  int context_len(int request) const;

  // Throws std::invalid_argument naming the level, group or request, the bad
  // value and what is accepted: page_size >= 1, num_pages >= 0,
  // num_requests >= 1, at least one level; per level: indptr of at least one
  // entry, starting at 0, non-decreasing, ending at indices.size();
  // last_page_len one per group, in [1, page_size] for a group with pages;
  // every page index in [0, num_pages); group_of one entry per request, each
  // a group of the level.
  void validate() const;
};

// The same tokens with levels first .. L-1 joined into one level of one group
// per request (its pages at those levels, in level order): levels 0 ..
// first-1 stay shared, the rest is read per request. first = 0 gives the
// plain, non-cascade table; first = L - 1 the cascade itself. A CSR row has
// one partial page at most, its last, so every joined span but a request's
// last non-empty one must fill whole pages: otherwise std::invalid_argument
// naming the level, request and span. Validates c first.
MultiLevelCascade join_levels_from(const MultiLevelCascade& c, int first);

// Pages a span of `tokens` occupies, and how many slots its last page holds
// (0 for no pages, as a CSR table stores an empty span).
constexpr int pages_for_tokens(int tokens, int page_size) { return (tokens + page_size - 1) / page_size; }
constexpr int last_page_len_for_tokens(int tokens, int page_size) {
  return tokens == 0 ? 0 : tokens - (pages_for_tokens(tokens, page_size) - 1) * page_size;
}

}  // namespace pa
