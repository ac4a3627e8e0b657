// Stage 6 kernels, bf16.
#define PA_V2_DTYPE bf16
#define PA_V2_KV same
#include "06_v2_partition_inst.inc"
