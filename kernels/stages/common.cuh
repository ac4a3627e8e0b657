// Device helpers shared by every stage: element types, 16-byte (or narrower)
// vector loads, float conversion, warp shuffles, and the per-thread identity
// (ThreadCtx) that the stage step functions and trace hooks use.
// No address math here: addresses come from pa/index (layout.hpp, mapping.hpp).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>

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

// ---- vectors ------------------------------------------------------------------
// The machine word a vector of BYTES bytes is loaded as: one instruction per
// vector (LDG.E.128 / LDS.128 for 16 bytes).
template <int BYTES> struct RawOf;
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

template <class T, int N>
__device__ __forceinline__ float dot(const Vec<T, N>& a, const Vec<T, N>& b) {
  float s = 0.f;
#pragma unroll
  for (int k = 0; k < N; ++k) s = fmaf(to_float(a.e[k]), to_float(b.e[k]), s);
  return s;
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
