// Stage 6 kernels, f16.
#define PA_V2_DTYPE f16
#include "06_v2_partition_inst.inc"
