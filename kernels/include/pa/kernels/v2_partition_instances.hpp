// The (head size, block size) pairs compiled for stages 6-7: the shared list
// of instances.hpp, plus, in PA_QUICK_KERNELS builds, two corners that
// exercise other paths of these stages (block size 8: the V tile rows span
// two blocks; head 256 x block 32: 32-token tiles of the prefix kernel), so a
// quick build still tests them on a GPU.
#pragma once
#include "pa/kernels/instances.hpp"

#if defined(PA_QUICK_KERNELS) && PA_QUICK_KERNELS
#define PA_V2_FOR_EACH_HEAD_BLOCK(X) PA_FOR_EACH_HEAD_BLOCK(X) X(64, 8) X(256, 32)
#else
#define PA_V2_FOR_EACH_HEAD_BLOCK(X) PA_FOR_EACH_HEAD_BLOCK(X)
#endif
