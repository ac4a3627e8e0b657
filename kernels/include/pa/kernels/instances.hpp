// The (head size, block size) pairs compiled for each dtype and stage, as an
// X-macro so that the instance files, the dispatcher and `pa-lab list` share
// one list. PA_QUICK_KERNELS (CMake option, a compile definition of
// pa_kernels) keeps only head 128 x block 16 for a fast edit-compile loop
// (stages 1-7; stage 8's quick set is kernels/stages/optimized.cmake's).
// Threads per block: 128 (kSupportedThreadCounts).
#pragma once

#if defined(PA_QUICK_KERNELS) && PA_QUICK_KERNELS
#define PA_FOR_EACH_HEAD_BLOCK(X) X(128, 16)
#else
#define PA_FOR_EACH_HEAD_BLOCK(X)                                                        \
  X(64, 8) X(64, 16) X(64, 32) X(80, 8) X(80, 16) X(80, 32) X(96, 8) X(96, 16) X(96, 32) \
  X(112, 8) X(112, 16) X(112, 32) X(128, 8) X(128, 16) X(128, 32) X(192, 8) X(192, 16)  \
  X(192, 32) X(256, 8) X(256, 16) X(256, 32)
#endif

#define PA_FOR_EACH_DTYPE(X) X(f32) X(f16) X(bf16)
