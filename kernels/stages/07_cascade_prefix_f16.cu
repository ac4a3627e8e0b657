// Stage 7 prefix kernels, f16.
#define PA_CASCADE_DTYPE f16
#include "07_cascade_prefix_inst.inc"
