// Stage 6 kernels, f32.
#define PA_V2_DTYPE f32
#define PA_V2_KV same
#include "06_v2_partition_inst.inc"
