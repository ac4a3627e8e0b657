// PTX wrappers of the tensor-core stages (7 and 8), one instruction each and
// named after it, so a learner reading a kernel can look each one up in the
// PTX ISA manual. Stages 1-6 need none: they use plain loads, shuffles and
// __syncthreads.
//
//   cp.async        16-byte copies global -> shared that bypass the registers
//                   (and L1: .cg), with zero fill past src_bytes; commit/wait
//                   group them into pipeline stages.
//   ldmatrix        a warp loads 8x8 tiles of 16-bit elements from shared
//                   memory straight into the mma fragment layout (.trans:
//                   each tile transposed on the way).
//   ld.shared.b32   one 32-bit shared-memory load (stage 8's fp8 fragments:
//                   4 one-byte elements).
//   cvt.f16x2.e4m3x2 / .e5m2x2   two fp8 codes to two fp16 values (sm_89+; cuda_fp8.h before),
//                   exact: every fp8 value is an fp16 value.
//   mma.sync        a warp-wide 16x8x16 matrix multiply-accumulate in fp32.
//   wgmma           Hopper's warpgroup (4 warps) mma reading B (and A) from
//                   shared memory through descriptors; fences and groups
//                   order it with the registers it writes.
//   mbarrier        a shared-memory barrier object with a phase, for
//                   producer/consumer pipelines without __syncthreads.
//   cp.async.bulk   one thread moves a whole contiguous region global ->
//                   shared (the TMA engine); it completes on an mbarrier.
//   setmaxnreg      moves registers between the warpgroups of a block.
//   atom.acq_rel    an atomic that also orders this block's memory operations
//                   before it (release) and the others' after it (acquire).
#pragma once
#include <cuda_bf16.h>
#include <cuda_fp16.h>
#include <cuda_fp8.h>

#include <cstdint>
#include <type_traits>

namespace pa::ptx {

// The 32-bit shared-memory address PTX instructions take.
__device__ __forceinline__ std::uint32_t smem_u32(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// ---- cp.async --------------------------------------------------------------
// 16-byte async copy global -> shared; the bytes past src_bytes (0 to 16) are
// zero-filled, so the tokens past a context (stage 8's, the cascade prefix's V)
// reach the math as zeros, never as NaN.
__device__ __forceinline__ void cp_async_16(std::uint32_t dst, const void* src, int src_bytes) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(dst), "l"(src), "r"(src_bytes));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
// Waits until at most N of this thread's committed groups are still in flight.
template <int N>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(N));
}

// ---- ldmatrix --------------------------------------------------------------
// Four (two) 8x8 b16 tiles; lane i gives the row address of row i % 8 of tile i / 8.
__device__ __forceinline__ void ldmatrix_x4(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
// The same four tiles, each transposed: lane l gets the elements (rows
// 2 (l % 4), +1; column l / 4) of each tile, the fragment of the tile's
// transpose (stage 8 reads a token-major V as V^T this way).
__device__ __forceinline__ void ldmatrix_x4_trans(std::uint32_t (&r)[4], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(addr));
}
__device__ __forceinline__ void ldmatrix_x2(std::uint32_t (&r)[2], std::uint32_t addr) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0,%1}, [%2];\n"
               : "=r"(r[0]), "=r"(r[1])
               : "r"(addr));
}

// ---- shared loads and fp8 conversion ---------------------------------------
__device__ __forceinline__ std::uint32_t lds_u32(std::uint32_t addr) {
  std::uint32_t v;
  asm volatile("ld.shared.b32 %0, [%1];\n" : "=r"(v) : "r"(addr));
  return v;
}
// Two fp8 codes (the low byte first) to the two 16-bit halves of a fragment
// register, the low half first; E5M2 false: e4m3. Exact (fp8 values are fp16
// values, and bf16 values too: e4m3 and e5m2 have at most 3 mantissa bits and
// exponents within bf16's range), so T only picks the register format: bf16
// goes through float, since sm_90 has no fp8 -> bf16x2 conversion.
template <bool E5M2, class T>
__device__ __forceinline__ std::uint32_t fp8x2_to(std::uint16_t two_codes) {
  std::uint32_t h;
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ < 890
  // Before sm_89 there is no fp8 cvt: cuda_fp8.h's conversion computes the
  // same exact values in integer code (the build's older targets only).
  const __half2_raw r = __nv_cvt_fp8x2_to_halfraw2(two_codes, E5M2 ? __NV_E5M2 : __NV_E4M3);
  h = static_cast<std::uint32_t>(r.x) | (static_cast<std::uint32_t>(r.y) << 16);
#else
  if constexpr (E5M2)
    asm("cvt.rn.f16x2.e5m2x2 %0, %1;\n" : "=r"(h) : "h"(two_codes));
  else
    asm("cvt.rn.f16x2.e4m3x2 %0, %1;\n" : "=r"(h) : "h"(two_codes));
#endif
  if constexpr (std::is_same_v<T, __half>) {
    return h;
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "fp8x2_to: fp16 or bf16 registers");
    const float2 f = __half22float2(*reinterpret_cast<const __half2*>(&h));
    const __nv_bfloat162 b = __floats2bfloat162_rn(f.x, f.y);
    return *reinterpret_cast<const std::uint32_t*>(&b);
  }
}

// ---- mma.sync m16n8k16, fp32 accumulators; T = __half or __nv_bfloat16 -----
template <class T>
__device__ __forceinline__ void mma_m16n8k16(float (&c)[4], const std::uint32_t (&a)[4], std::uint32_t b0,
                                             std::uint32_t b1) {
  if constexpr (std::is_same_v<T, __half>) {
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  } else {
    static_assert(std::is_same_v<T, __nv_bfloat16>, "mma_m16n8k16: fp16 or bf16 inputs");
    asm volatile(
        "mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
        "{%0,%1,%2,%3};\n"
        : "+f"(c[0]), "+f"(c[1]), "+f"(c[2]), "+f"(c[3])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b0), "r"(b1));
  }
}
// Two floats rounded to T and packed into one 32-bit fragment register (lo first).
template <class T>
__device__ __forceinline__ std::uint32_t pack2(float lo, float hi) {
  if constexpr (std::is_same_v<T, __half>) {
    const __half2 h = __floats2half2_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  } else {
    const __nv_bfloat162 h = __floats2bfloat162_rn(lo, hi);
    return *reinterpret_cast<const std::uint32_t*>(&h);
  }
}

// ---- wgmma (sm_90a) ---------------------------------------------------------
__device__ __forceinline__ void wgmma_fence() { asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_commit() { asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory"); }
__device__ __forceinline__ void wgmma_wait_all() { asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory"); }
// Waits until at most N committed wgmma groups are in flight.
template <int N>
__device__ __forceinline__ void wgmma_wait() { asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(N) : "memory"); }
// Makes this thread's generic-proxy shared-memory writes visible to the async
// proxy (wgmma reads shared memory through it).
__device__ __forceinline__ void fence_proxy_async_smem() { asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory"); }

// ---- mbarrier ---------------------------------------------------------------
__device__ __forceinline__ void mbar_init(std::uint32_t addr, int count) {
  asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(addr), "r"(count) : "memory");
}
__device__ __forceinline__ void mbar_arrive(std::uint32_t addr) {
  asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(addr) : "memory");
}
// Arrives and adds `bytes` to the transactions the current phase waits for
// (a bulk copy's complete_tx pays them off).
__device__ __forceinline__ void mbar_arrive_expect_tx(std::uint32_t addr, std::uint32_t bytes) {
  asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(addr), "r"(bytes) : "memory");
}
// Makes mbarrier.init visible to the async proxy (bulk copies complete on it).
__device__ __forceinline__ void fence_mbarrier_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
// Spins until the barrier's phase `parity` has completed.
__device__ __forceinline__ void mbar_wait(std::uint32_t addr, std::uint32_t parity) {
  std::uint32_t done = 0;
  while (!done)
    asm volatile("{\n.reg .pred p;\nmbarrier.try_wait.parity.shared::cta.b64 p, [%1], %2;\nselp.u32 %0, 1, 0, p;\n}\n"
                 : "=r"(done)
                 : "r"(addr), "r"(parity)
                 : "memory");
}

// ---- cp.async.bulk (sm_90: the TMA engine, no tensor map) -------------------
// `bytes` (a multiple of 16, both addresses 16-byte aligned) from global to
// this CTA's shared memory in one instruction of one thread; completes as
// transactions on the mbarrier at `mbar`.
__device__ __forceinline__ void cp_async_bulk_g2s(std::uint32_t dst, const void* src, std::uint32_t bytes,
                                                  std::uint32_t mbar) {
  asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(dst),
               "l"(src), "r"(bytes), "r"(mbar)
               : "memory");
}

// ---- setmaxnreg (sm_90a): a warpgroup gives registers back or takes more ----
template <int N>
__device__ __forceinline__ void setmaxnreg_dec() { asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(N)); }
template <int N>
__device__ __forceinline__ void setmaxnreg_inc() { asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(N)); }

// ---- atomics ------------------------------------------------------------------
// atomicAdd with acquire-release semantics at GPU scope: no separate fence.
__device__ __forceinline__ int atomic_add_acq_rel_gpu(int* p, int v) {
  int old;
  asm volatile("atom.acq_rel.gpu.global.add.s32 %0, [%1], %2;\n" : "=r"(old) : "l"(p), "r"(v) : "memory");
  return old;
}

}  // namespace pa::ptx
