# Sourced by tracer_overhead.sh, tracer_overhead_optimized.sh and
# tracer_overhead_v2.sh (beside it): the command line and compiler settings
# they share.
#   overhead_setup DEFAULT_OUTDIR "$@"
# reads the caller's arguments [arch=90] [outdir=$ROOT/DEFAULT_OUTDIR]
# [base_rev=6b98d0c] into ARCH, OUTDIR (created) and BASE_REV (for the scripts
# that compare with the sources before the trace hooks: 6b98d0c is the commit
# before them), and sets NVCC ($NVCC, else nvcc on the PATH, else
# /usr/local/cuda/bin/nvcc), INC (this checkout's include folders) and FLAGS
# (nvcc flags for one cubin). ROOT: the repository root.
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"

# overhead_includes DIR: INC for the sources under DIR (this checkout, or an
# older revision's copy).
overhead_includes() {
  INC=(-I"$1/kernels/include" -I"$1/kernels/stages" -I"$1/trace/include" -I"$1/reference/include")
}

overhead_setup() {
  local default_outdir=$1; shift
  ARCH="${1:-90}"
  OUTDIR="${2:-$ROOT/$default_outdir}"
  BASE_REV="${3:-6b98d0c}"
  NVCC="${NVCC:-$(command -v nvcc || echo /usr/local/cuda/bin/nvcc)}"
  mkdir -p "$OUTDIR"
  overhead_includes "$ROOT"
  FLAGS=(-std=c++20 --expt-relaxed-constexpr -O3 -arch=sm_$ARCH -cubin)
}
