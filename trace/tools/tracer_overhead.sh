#!/usr/bin/env bash
# Shows that the NullTracer build of the stage kernels is the same machine
# code as a build without any trace hooks: compiles trace/tools/
# overhead_instances.cu twice for one architecture (as is, and with
# -DPA_NO_TRACE_HOOKS so PA_TRACE / PA_TRACE_BARRIER expand to nothing),
# then compares per kernel: registers (cuobjdump -res-usage), the number of
# SASS instructions, and the SASS text itself.
#   trace/tools/tracer_overhead.sh [arch=90] [outdir=out/tracer-overhead]
# No GPU needed (the SASS comes from the compiler). Exit 1 on any difference.
# Then runs stage 8's comparison (tracer_overhead_optimized.sh) unless
# PA_OVERHEAD_SKIP_OPTIMIZED is set, and the stage 6 reduce / stage 7 merge /
# stage 1 one (tracer_overhead_v2.sh) unless PA_OVERHEAD_SKIP_V2 is set.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tracer_overhead_common.sh"
overhead_setup out/tracer-overhead "$@"
CUOBJDUMP="$(dirname "$NVCC")/cuobjdump"
"$NVCC" "${FLAGS[@]}" "${INC[@]}" -o "$OUTDIR/null_tracer.cubin" "$ROOT/trace/tools/overhead_instances.cu"
"$NVCC" "${FLAGS[@]}" "${INC[@]}" -DPA_NO_TRACE_HOOKS -o "$OUTDIR/no_hooks.cubin" "$ROOT/trace/tools/overhead_instances.cu"

if cmp -s "$OUTDIR/null_tracer.cubin" "$OUTDIR/no_hooks.cubin"; then
  echo "cubins byte-identical: the NullTracer build is the build without hooks ($(wc -c <"$OUTDIR/null_tracer.cubin") bytes, sm_$ARCH)" | tee "$OUTDIR/cmp.txt"
  cmp_status=0
else
  echo "cubins DIFFER" | tee "$OUTDIR/cmp.txt"
  cmp_status=1
fi
if [[ ! -x "$CUOBJDUMP" ]]; then
  echo "no cuobjdump next to nvcc: per-kernel registers / SASS counts skipped"
  exit $cmp_status
fi

# Per function: registers, SASS instruction count, SASS text (addresses stripped).
summarize() {  # cubin prefix
  "$CUOBJDUMP" -res-usage "$1" 2>/dev/null | awk '/Function/ {f=$2; sub(":$","",f)} /REG:/ {match($0,/REG:[0-9]+/); print f, substr($0,RSTART+4,RLENGTH-4)}' \
    | sort >"$2.regs"
  "$CUOBJDUMP" -sass "$1" | awk '
    /Function :/ {f=$3; next}
    /^[ \t]*\/\*[0-9a-f]+\*\// { line=$0; sub(/^[ \t]*\/\*[0-9a-f]+\*\/[ \t]*/,"",line); sub(/[ \t]*\/\*.*$/,"",line); print f "\t" line }' >"$2.sass"
  awk -F'\t' '{n[$1]++} END {for (f in n) print f, n[f]}' "$2.sass" | sort >"$2.count"
}
summarize "$OUTDIR/null_tracer.cubin" "$OUTDIR/null"
summarize "$OUTDIR/no_hooks.cubin" "$OUTDIR/nohooks"

status=0
printf '%-90s %6s %6s %8s %8s %s\n' kernel reg_nt reg_nh sass_nt sass_nh same_sass | tee "$OUTDIR/table.txt"
while read -r f regs; do
  r2=$(awk -v f="$f" '$1==f {print $2}' "$OUTDIR/nohooks.regs")
  c1=$(awk -v f="$f" '$1==f {print $2}' "$OUTDIR/null.count")
  c2=$(awk -v f="$f" '$1==f {print $2}' "$OUTDIR/nohooks.count")
  if cmp -s <(awk -F'\t' -v f="$f" '$1==f' "$OUTDIR/null.sass") <(awk -F'\t' -v f="$f" '$1==f' "$OUTDIR/nohooks.sass"); then
    same=yes
  else
    same=NO; status=1
  fi
  [[ "$regs" == "$r2" && "$c1" == "$c2" ]] || status=1
  printf '%-90s %6s %6s %8s %8s %s\n' "$(echo "$f" | cut -c1-90)" "$regs" "$r2" "$c1" "$c2" "$same" | tee -a "$OUTDIR/table.txt"
done <"$OUTDIR/null.regs"
echo "nvcc: $("$NVCC" --version | tail -1), sm_$ARCH; result: $([[ $status == 0 ]] && echo IDENTICAL || echo DIFFERENT)" | tee -a "$OUTDIR/table.txt"
# Stage 8 has its own comparison (also against its pre-hook sources, kernels paired by configuration).
if [[ -z "${PA_OVERHEAD_SKIP_OPTIMIZED:-}" ]]; then
  echo "== stage 8 (trace/tools/tracer_overhead_optimized.sh)" | tee -a "$OUTDIR/table.txt"
  "$ROOT/trace/tools/tracer_overhead_optimized.sh" "$ARCH" "$OUTDIR/optimized" | tee -a "$OUTDIR/table.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
# Stage 6's reduce, stage 7's merge and stage 1 against their pre-hook sources (no cuobjdump needed).
if [[ -z "${PA_OVERHEAD_SKIP_V2:-}" ]]; then
  echo "== stage 6 reduce, stage 7 merge, stage 1 (trace/tools/tracer_overhead_v2.sh)" | tee -a "$OUTDIR/table.txt"
  "$ROOT/trace/tools/tracer_overhead_v2.sh" "$ARCH" "$OUTDIR/v2" | tee -a "$OUTDIR/table.txt"
  [[ ${PIPESTATUS[0]} == 0 ]] || status=1
fi
exit $status
