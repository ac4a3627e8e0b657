// Stage 6 kernels, bf16 queries with an fp8_e4m3 cache.
#define PA_V2_DTYPE bf16
#define PA_V2_KV fp8_e4m3
#include "06_v2_partition_inst.inc"
