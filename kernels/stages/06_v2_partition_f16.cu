// Stage 6 kernels, f16.
#define PA_V2_DTYPE f16
#define PA_V2_KV same
#include "06_v2_partition_inst.inc"
