// Stage 7 prefix kernels, bf16.
#define PA_CASCADE_DTYPE bf16
#include "07_cascade_prefix_inst.inc"
