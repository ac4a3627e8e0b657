// Device helpers shared by every stage: element types, 16-byte (or narrower)
// vector loads, float conversion, warp shuffles, and the per-thread identity
// (ThreadCtx) that the stage step functions and trace hooks use.
// No address math here: addresses come from pa/index (layout.hpp, mapping.hpp).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <cstring>

#include "pa/core/timeline.hpp"
#include "pa/index/alibi.hpp"
#include "pa/index/config.hpp"
#include "pa/index/events.hpp"
#include "pa/index/layout.hpp"
#include "pa/index/mapping.hpp"
#include "pa/index/tracer.hpp"
#include "pa/kernels/stage_args.hpp"

namespace pa::kernels {

using trace::Op;
using trace::Step;
using trace::Tensor;

// ---- element types ----------------------------------------------------------
template <DType DT> struct ElemOf;
template <> struct ElemOf<DType::f32> { using type = float; };
template <> struct ElemOf<DType::f16> { using type = __half; };
template <> struct ElemOf<DType::bf16> { using type = __nv_bfloat16; };
template <class Cfg> using Elem = typename ElemOf<Cfg::kDType>::type;

__device__ __forceinline__ float to_float(float v) { return v; }
__device__ __forceinline__ float to_float(__half v) { return __half2float(v); }
__device__ __forceinline__ float to_float(__nv_bfloat16 v) { return __bfloat162float(v); }

template <class T> __device__ __forceinline__ T from_float(float v);
template <> __device__ __forceinline__ float from_float<float>(float v) { return v; }
template <> __device__ __forceinline__ __half from_float<__half>(float v) { return __float2half_rn(v); }
template <> __device__ __forceinline__ __nv_bfloat16 from_float<__nv_bfloat16>(float v) {
  return __float2bfloat16_rn(v);
}
// v rounded to T's precision and back (what storing v as T keeps).
template <class T> __device__ __forceinline__ float round_to(float v) { return to_float(from_float<T>(v)); }

// ---- fp8 cache elements ----------------------------------------------------------
// One byte of an fp8 KV cache, its format in the type so that to_float picks
// the conversion at compile time.
template <KvDType KV>
struct Fp8Elem {
  std::uint8_t code;
};
// fp8 -> float is exact (every fp8 value is a half and a float). On sm_89 and
// later __nv_cvt_fp8_to_halfraw is one cvt instruction; test_fp8_gpu.cpp
// checks that it equals pa/core/fp8.hpp's conversion on all 256 codes.
template <KvDType KV>
__device__ __forceinline__ float to_float(Fp8Elem<KV> v) {
  static_assert(is_fp8(KV), "Fp8Elem holds an fp8 format");
  const __half_raw h = __nv_cvt_fp8_to_halfraw(v.code, KV == KvDType::fp8_e4m3 ? __NV_E4M3 : __NV_E5M2);
  return __half2float(__half(h));
}

template <class Cfg, bool FP8 = is_fp8(Cfg::kKvDType)> struct KvElemOf { using type = Elem<Cfg>; };
template <class Cfg> struct KvElemOf<Cfg, true> { using type = Fp8Elem<Cfg::kKvDType>; };
// The element type of the K and V caches: the query's, or an fp8 byte.
template <class Cfg> using KvElem = typename KvElemOf<Cfg>::type;

// ---- vectors ------------------------------------------------------------------
// The machine word a vector of BYTES bytes is loaded as: one instruction per
// vector (LDG.E.128 / LDS.128 for 16 bytes), two for 32.
// 32 bytes: the Q vec that meets a 16-element fp8 K vec (block size 32, one
// thread per token) is two 16-byte loads.
struct Raw32 {
  uint4 lo, hi;
};
template <int BYTES> struct RawOf;
template <> struct RawOf<32> { using type = Raw32; };
template <> struct RawOf<16> { using type = uint4; };
template <> struct RawOf<8> { using type = uint2; };
template <> struct RawOf<4> { using type = unsigned int; };
template <> struct RawOf<2> { using type = unsigned short; };

template <class T, int N>
struct alignas(sizeof(T) * N) Vec {
  T e[N];
};

// One aligned vector load: the caller's address (from pa/index) is a multiple
// of the vector width by construction of the layouts (validated on the host).
template <class T, int N>
__device__ __forceinline__ Vec<T, N> load_vec(const T* p) {
  using Raw = typename RawOf<sizeof(T) * N>::type;
  const Raw r = *reinterpret_cast<const Raw*>(p);
  Vec<T, N> v;
  memcpy(&v, &r, sizeof(r));
  return v;
}
template <class T, int N>
__device__ __forceinline__ void store_vec(T* p, const Vec<T, N>& v) {
  using Raw = typename RawOf<sizeof(T) * N>::type;
  Raw r;
  memcpy(&r, &v, sizeof(r));
  *reinterpret_cast<Raw*>(p) = r;
}

template <class TA, class TB, int N>
__device__ __forceinline__ float dot(const Vec<TA, N>& a, const Vec<TB, N>& b) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) s = fmaf(to_float(a.e[k]), to_float(b.e[k]), s);
  return s;
}

// A loaded cache vector as the kernel computes with it. A cache in the
// query's dtype is used as loaded. An fp8 cache is dequantized right after
// its load: each code to float, times the tensor's scale, in float: exactly
// pa/core/fp8.hpp's fp8_dequantize, the value the reference reads. (vLLM
// rounds that product to the query dtype first; float keeps it exact.)
template <class T, int N>
__device__ __forceinline__ const Vec<T, N>& dequant(const Vec<T, N>& v, float /*scale*/) {
  return v;
}
template <KvDType KV, int N>
__device__ __forceinline__ Vec<float, N> dequant(const Vec<Fp8Elem<KV>, N>& v, float scale) {
  Vec<float, N> f;
#pragma unroll
  for (int k = 0; k < N; ++k) f.e[k] = to_float(v.e[k]) * scale;
  return f;
}

// ---- shuffles -----------------------------------------------------------------
__device__ __forceinline__ float shfl_xor(float v, int mask) {
  return __shfl_xor_sync(0xffffffffu, v, mask);
}
__device__ __forceinline__ float shfl_from(float v, int src_lane) {
  return __shfl_sync(0xffffffffu, v, src_lane);
}

// ---- who am I -------------------------------------------------------------------
// One thread's identity inside its thread block (one sequence x head x
// partition), plus the trace context its hooks report.
template <class Cfg>
struct ThreadCtx {
  using Map = ThreadMapping<Cfg>;
  int tid, warp, lane, tg, g_off;
  int seq, head, partition, kv_head;
  TraceCtx tc;

  __device__ static ThreadCtx make(trace::Stage stage, int num_heads, int num_kv_heads) {
    ThreadCtx c;
    c.tid = static_cast<int>(threadIdx.x);
    c.warp = Map::warp_of(c.tid);
    c.lane = Map::lane_of(c.tid);
    c.tg = Map::thread_group_of(c.tid);
    c.g_off = Map::thread_group_offset_of(c.tid);
    c.head = static_cast<int>(blockIdx.x);
    c.seq = static_cast<int>(blockIdx.y);
    c.partition = static_cast<int>(blockIdx.z);
    c.kv_head = kv_head_of(c.head, num_heads, num_kv_heads);
    c.tc = TraceCtx{stage, c.warp, c.lane, c.seq, c.head, c.partition, c.kv_head};
    return c;
  }
};

// __syncthreads plus its barrier event (emitted by every thread).
#define PA_SYNC(tracer, ctx)                               \
  do {                                                     \
    __syncthreads();                                       \
    PA_TRACE_BARRIER(tracer, ::pa::barrier_event((ctx).tc)); \
  } while (0)

// The shared memory of a v1-style thread block (see layout.hpp
// v1_static_smem_bytes / v1_dynamic_smem_bytes).
template <class Cfg>
struct SharedV1 {
  using QVec = Vec<Elem<Cfg>, Cfg::kVecSize>;
  QVec* q_vecs;     // [kThreadGroupSize][kNumVecsPerThread]
  float* red;       // [2 * kNumWarps]
  float* logits;    // [tokens of the range] (dynamic)
  float* out_scratch;  // aliases logits after the LV loop
};

}  // namespace pa::kernels
