#include "pa/core/alibi.hpp"

#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace pa {

std::vector<float> alibi_slopes(int num_heads) {
  if (num_heads < 1) {
    throw std::invalid_argument("alibi_slopes: " + std::to_string(num_heads) + " heads (accepted: at least 1)");
  }
  int c = 1;  // the largest power of two <= num_heads
  while (c * 2 <= num_heads) c *= 2;
  std::vector<float> slopes;
  for (int i = 1; i <= c; ++i) slopes.push_back(static_cast<float>(std::exp2(-8.0 * i / c)));
  for (int i = 1; static_cast<int>(slopes.size()) < num_heads; i += 2)
    slopes.push_back(static_cast<float>(std::exp2(-8.0 * i / (2 * c))));
  return slopes;
}

void check_alibi_slopes(const std::vector<float>& slopes, int num_heads, const char* who) {
  if (slopes.size() != static_cast<std::size_t>(num_heads)) {
    throw std::invalid_argument(std::string(who) + ": " + std::to_string(slopes.size()) + " slopes for " +
                                std::to_string(num_heads) + " query heads (accepted: one slope per query head)");
  }
  for (std::size_t h = 0; h < slopes.size(); ++h) {
    if (!std::isfinite(slopes[h])) {
      char buf[64];
      std::snprintf(buf, sizeof buf, "%g", static_cast<double>(slopes[h]));
      throw std::invalid_argument(std::string(who) + ": slope of head " + std::to_string(h) + " is " + buf +
                                  " (accepted: finite values)");
    }
  }
}

}  // namespace pa
