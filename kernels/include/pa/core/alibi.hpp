// ALiBi slopes (Press, Smith, Lewis, "Train Short, Test Long", ICLR 2022):
// one per query head. The bias itself is pa/index/alibi.hpp's.
#pragma once
#include <vector>

namespace pa {

// The paper's slopes for n heads. For n a power of two, the geometric
// sequence that starts and has ratio 2^(-8/n): slope_i = 2^(-8 i / n),
// i = 1..n (8 heads: 1/2, 1/4, ..., 1/256). Otherwise, with c the largest
// power of two below n: the c slopes of c heads, then the first n - c of the
// odd-numbered slopes of 2c heads, 2^(-8 i / 2c) for i = 1, 3, 5, ... (those
// fall between the first ones). Computed in float64, rounded once to float
// (the slopes a kernel is given). Throws std::invalid_argument for n < 1.
std::vector<float> alibi_slopes(int num_heads);

// Throws std::invalid_argument, prefixed with `who`, unless `slopes` holds one
// finite value per query head (what every consumer of slopes accepts).
void check_alibi_slopes(const std::vector<float>& slopes, int num_heads, const char* who);

}  // namespace pa
