#!/usr/bin/env bash
# The trace hooks of stage 6's reduce kernel, stage 7's merge kernel and stage
# 1's read-back cost nothing with NullTracer: compiles
# trace/tools/overhead_v2_merge.cu from the current sources and from BASE_REV
# (default 6b98d0c: before those hooks) and compares each kernel's machine
# code (.text section bytes, via cubin_text.py: no cuobjdump needed). Kernel
# names differ (the added Tracer template parameter), so they are paired by
# kernel and element type.
#   trace/tools/tracer_overhead_v2.sh [arch=90] [outdir=out/tracer-overhead-v2] [base_rev=6b98d0c]
# No GPU needed. Exit 1 on any difference.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tracer_overhead_common.sh"
overhead_setup out/tracer-overhead-v2 "$@"
rm -rf "$OUTDIR/base" && mkdir -p "$OUTDIR/base"
git -C "$ROOT" archive "$BASE_REV" kernels trace reference | tar -x -C "$OUTDIR/base"
for t in now base; do
  R="$ROOT"; [[ $t == base ]] && R="$OUTDIR/base"
  overhead_includes "$R"
  "$NVCC" "${FLAGS[@]}" "${INC[@]}" -o "$OUTDIR/$t.cubin" "$ROOT/trace/tools/overhead_v2_merge.cu" &
done
wait
KEY='(stage6_v2_reduce_kernel|merge_states_kernel)I[0-9]*[A-Za-z_0-9]*?(?=NS_10NullTracer|EEv|Ev)|stage1_q_to_smem_kernelINS_12KernelConfigILNS_5DTypeE[0-9]ELi[0-9]+ELi[0-9]+'
python3 "$ROOT/trace/tools/cubin_text.py" "$OUTDIR/now.cubin" "$KEY" | sort >"$OUTDIR/now.txt"
python3 "$ROOT/trace/tools/cubin_text.py" "$OUTDIR/base.cubin" "$KEY" | sort >"$OUTDIR/base.txt"
echo "kernel bytes sass_instructions regs sha256 (now | $BASE_REV)" | tee "$OUTDIR/table.txt"
paste -d'|' "$OUTDIR/now.txt" "$OUTDIR/base.txt" | tee -a "$OUTDIR/table.txt"
if cmp -s <(cut -d' ' -f1-5 "$OUTDIR/now.txt") <(cut -d' ' -f1-5 "$OUTDIR/base.txt"); then
  echo "result: IDENTICAL machine code ($(wc -l <"$OUTDIR/now.txt") kernels, sm_$ARCH, $("$NVCC" --version | tail -1))" | tee -a "$OUTDIR/table.txt"
else
  echo "result: DIFFERENT" | tee -a "$OUTDIR/table.txt"
  exit 1
fi
