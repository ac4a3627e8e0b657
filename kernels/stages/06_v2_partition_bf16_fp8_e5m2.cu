// Stage 6 kernels, bf16 queries with an fp8_e5m2 cache.
#define PA_V2_DTYPE bf16
#define PA_V2_KV fp8_e5m2
#include "06_v2_partition_inst.inc"
