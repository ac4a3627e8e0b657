// One macro so the index math compiles as host+device code under nvcc and as
// plain C++ under g++ (the reference, the host model and the viewer use it too).
#pragma once

#if defined(__CUDACC__)
#define PA_HD __host__ __device__ __forceinline__
#else
#define PA_HD inline
#endif

namespace pa {

constexpr int kWarpSize = 32;

PA_HD constexpr int ceil_div(int a, int b) { return (a + b - 1) / b; }
PA_HD constexpr int cmax(int a, int b) { return a > b ? a : b; }
PA_HD constexpr int cmin(int a, int b) { return a < b ? a : b; }
PA_HD constexpr bool is_pow2(int v) { return v > 0 && (v & (v - 1)) == 0; }
// The smallest power of two >= v (v >= 1).
PA_HD constexpr int pow2_ceil(int v) { return v <= 1 ? 1 : 2 * pow2_ceil((v + 1) / 2); }

}  // namespace pa
