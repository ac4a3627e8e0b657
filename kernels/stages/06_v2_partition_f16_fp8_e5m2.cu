// Stage 6 kernels, f16 queries with an fp8_e5m2 cache.
#define PA_V2_DTYPE f16
#define PA_V2_KV fp8_e5m2
#include "06_v2_partition_inst.inc"
