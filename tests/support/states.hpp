// Attention states (pa/reference/attention.hpp) flattened for compare():
// every state's out, then every state's lse, in the states' order.
#pragma once
#include <vector>

#include "pa/reference/attention.hpp"

namespace pa::test {

inline std::vector<double> flat_out(const std::vector<AttentionState>& st) {
  std::vector<double> v;
  for (const auto& s : st) v.insert(v.end(), s.out.begin(), s.out.end());
  return v;
}
inline std::vector<double> flat_lse(const std::vector<AttentionState>& st) {
  std::vector<double> v;
  for (const auto& s : st) v.push_back(s.lse);
  return v;
}

}  // namespace pa::test
