// MultiLevelCascade's checks and lengths (pa/core/multilevel_cascade.hpp).
#include "pa/core/multilevel_cascade.hpp"

#include <stdexcept>
#include <string>
#include <utility>

namespace pa {
namespace {

std::string str(long long v) { return std::to_string(v); }

[[noreturn]] void refuse(const std::string& what) { throw std::invalid_argument("multi-level cascade: " + what); }

}  // namespace

int MultiLevelCascade::context_len(int request) const {
  int n = 0;
  for (int l = 0; l < num_levels(); ++l) n += tokens(l, request);
  return n;
}

void MultiLevelCascade::validate() const {
  if (page_size < 1) refuse("page_size " + str(page_size) + "; accepted: >= 1");
  if (num_pages < 0) refuse("num_pages " + str(num_pages) + "; accepted: >= 0");
  if (num_requests < 1) refuse("num_requests " + str(num_requests) + "; accepted: >= 1");
  if (levels.empty()) refuse("0 levels; accepted: at least 1");
  for (int l = 0; l < num_levels(); ++l) {
    const CascadeLevel& lv = levels[l];
    const CsrTables& t = lv.groups;
    const std::string at = "level " + str(l);
    if (t.indptr.empty()) refuse(at + ": indptr is empty; accepted: num_groups + 1 entries, at least 1");
    if (t.indptr[0] != 0) refuse(at + ": indptr[0] = " + str(t.indptr[0]) + "; accepted: 0");
    const int ng = lv.num_groups();
    for (int g = 0; g < ng; ++g)
      if (t.indptr[g + 1] < t.indptr[g])
        refuse(at + ": indptr[" + str(g + 1) + "] = " + str(t.indptr[g + 1]) + " < indptr[" + str(g) +
               "] = " + str(t.indptr[g]) + "; accepted: non-decreasing");
    if (static_cast<std::size_t>(t.indptr.back()) != t.indices.size())
      refuse(at + ": indptr ends at " + str(t.indptr.back()) + " but indices holds " + str(t.indices.size()) +
             " pages; accepted: indptr[num_groups] = indices.size()");
    if (t.last_page_len.size() != static_cast<std::size_t>(ng))
      refuse(at + ": " + str(t.last_page_len.size()) + " last_page_len entries for " + str(ng) +
             " groups; accepted: one per group");
    for (int g = 0; g < ng; ++g) {
      for (int i = t.indptr[g]; i < t.indptr[g + 1]; ++i)
        if (t.indices[i] < 0 || t.indices[i] >= num_pages)
          refuse(at + " group " + str(g) + ": page " + str(t.indices[i]) + " (indices[" + str(i) +
                 "]); accepted: 0 <= page < num_pages = " + str(num_pages));
      const int lpl = t.last_page_len[g];
      if (t.indptr[g + 1] > t.indptr[g] && (lpl < 1 || lpl > page_size))
        refuse(at + " group " + str(g) + ": last_page_len " + str(lpl) + "; accepted: 1 .. page_size = " +
               str(page_size) + " for a group with pages");
    }
    if (lv.group_of.size() != static_cast<std::size_t>(num_requests))
      refuse(at + ": group_of names a group for " + str(lv.group_of.size()) + " requests, there are " +
             str(num_requests) + "; accepted: one per request (an empty group where a request shares nothing)");
    for (int r = 0; r < num_requests; ++r)
      if (lv.group_of[r] < 0 || lv.group_of[r] >= ng)
        refuse(at + ": request " + str(r) + " reads group " + str(lv.group_of[r]) + "; accepted: 0 <= group < " +
               str(ng) + " (the level's groups)");
  }
}

MultiLevelCascade join_levels_from(const MultiLevelCascade& c, int first) {
  c.validate();
  if (first < 0 || first >= c.num_levels())
    refuse("join_levels_from level " + str(first) + "; accepted: 0 .. " + str(c.num_levels() - 1));
  MultiLevelCascade j = c;
  j.levels.resize(static_cast<std::size_t>(first));
  CascadeLevel joined;
  joined.groups.indptr.push_back(0);
  for (int r = 0; r < c.num_requests; ++r) {
    int tokens = 0, last_len = 0;
    for (int l = first; l < c.num_levels(); ++l) {
      const int n = c.tokens(l, r);
      if (n == 0) continue;
      if (tokens % c.page_size != 0)
        refuse("join_levels_from: request " + str(r) + " has " + str(tokens) + " tokens before level " + str(l) +
               ", not whole pages of " + str(c.page_size) + "; accepted: spans that fill their pages, but the last");
      const CascadeLevel& lv = c.levels[l];
      const int g = lv.group_of[r];
      joined.groups.indices.insert(joined.groups.indices.end(), lv.groups.indices.begin() + lv.groups.indptr[g],
                                   lv.groups.indices.begin() + lv.groups.indptr[g + 1]);
      tokens += n;
      last_len = lv.groups.last_page_len[g];
    }
    joined.groups.indptr.push_back(static_cast<int>(joined.groups.indices.size()));
    joined.groups.last_page_len.push_back(last_len);
    joined.group_of.push_back(r);
  }
  j.levels.push_back(std::move(joined));
  j.validate();
  return j;
}

}  // namespace pa
