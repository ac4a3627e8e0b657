#!/usr/bin/env bash
# Stage 8's trace hooks cost nothing with NullTracer: compiles
# trace/tools/overhead_optimized.cu (3 configurations of opt_decode_kernel)
#   (a) from the current sources (NullTracer, hooks present),
#   (b) the same with -DPA_NO_TRACE_HOOKS (PA_TRACE expands to nothing),
#   (c) from the stage 8 sources of BASE_REV (default: the commit before the
#       hooks, 6b98d0c), i.e. the kernel as it was before any hook existed,
# and compares per kernel: registers, stack/spills (cuobjdump -res-usage),
# the SASS instruction count and the SASS text. Kernel names differ between
# (a) and (c) (the Tracer template parameter), so kernels are paired by
# configuration (their OptConfig template arguments).
#   trace/tools/tracer_overhead_optimized.sh [arch=90] [outdir=out/tracer-overhead-opt] [base_rev=6b98d0c]
# No GPU needed. Exit 1 on any difference.
set -euo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/tracer_overhead_common.sh"
overhead_setup out/tracer-overhead-opt "$@"
BIN="$(dirname "$NVCC")"
FLAGS+=(-Xptxas -v)
SRC="$ROOT/trace/tools/overhead_optimized.cu"

# (c): the pre-hook stage 8 sources shadow the current ones.
OLD="$OUTDIR/base_src"
rm -rf "$OLD" && mkdir -p "$OLD/stages" "$OLD/include/pa/index"
if git -C "$ROOT" show "$BASE_REV:kernels/stages/08_optimized.cuh" >"$OLD/stages/08_optimized.cuh" 2>/dev/null &&
   git -C "$ROOT" show "$BASE_REV:kernels/include/pa/index/optimized.hpp" >"$OLD/include/pa/index/optimized.hpp"; then
  have_old=1
else
  have_old=0; echo "no git revision $BASE_REV here: only (a) vs (b)"
fi
"$NVCC" "${FLAGS[@]}" "${INC[@]}" -o "$OUTDIR/null_tracer.cubin" "$SRC" 2>"$OUTDIR/a.ptxas" &
"$NVCC" "${FLAGS[@]}" "${INC[@]}" -DPA_NO_TRACE_HOOKS -o "$OUTDIR/no_hooks.cubin" "$SRC" 2>"$OUTDIR/b.ptxas" &
if [[ $have_old == 1 ]]; then
  "$NVCC" "${FLAGS[@]}" -I"$OLD/include" -I"$OLD/stages" "${INC[@]}" -o "$OUTDIR/before_hooks.cubin" "$SRC" 2>"$OUTDIR/c.ptxas" &
fi
wait
KEY='DTypeE[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]'  # OptConfig<dtype, head, block, head tiles> in the mangled name
# ptxas -v per kernel: "key regs stack spill_stores spill_loads".
ptxas_summary() {
  awk -v re="$KEY" '
    /Compiling entry function/ {match($0, re); k=substr($0,RSTART,RLENGTH)}
    /bytes stack frame/ {split($0,a,/[ ,]+/); for(i=1;i<=length(a);i++){if(a[i]=="stack")st=a[i-2]; if(a[i]=="spill"&&a[i+1]=="stores")ss=a[i-2]; if(a[i]=="spill"&&a[i+1]=="loads")sl=a[i-2]}}
    /Used [0-9]+ registers/ {match($0,/Used [0-9]+ registers/); r=substr($0,RSTART+5,RLENGTH-15); print k, r, st, ss, sl}' "$1" | sort -u
}
for x in a b c; do [[ -f "$OUTDIR/$x.ptxas" ]] && ptxas_summary "$OUTDIR/$x.ptxas" >"$OUTDIR/$x.regs"; done
# Machine code per kernel (ELF .text sections, no cuobjdump needed): key, bytes, instructions, sha256.
for x in a:null_tracer b:no_hooks c:before_hooks; do
  f="$OUTDIR/${x#*:}.cubin"; [[ -f "$f" ]] && python3 "$ROOT/trace/tools/cubin_text.py" "$f" "$KEY" | sort >"$OUTDIR/${x%%:*}.text"
done
status=0
printf '%-26s %-34s %-34s %-34s %s\n' "kernel (dtype/head/block/HT)" "(a) regs stack spill-st spill-ld / SASS" "(b) no hooks" "(c) before hooks" "code a=b a=c" | tee "$OUTDIR/table.txt"
while read -r k r st ss sl; do
  ia=$(awk -v k="$k" '$1==k {print $3 " " $4}' "$OUTDIR/a.text")
  row() { [[ -f "$OUTDIR/$1.regs" ]] && echo "$(awk -v k="$k" '$1==k {print $2, $3, $4, $5}' "$OUTDIR/$1.regs") / $(awk -v k="$k" '$1==k {print $3}' "$OUTDIR/$1.text")" || echo -; }
  same() { [[ -f "$OUTDIR/$1.text" ]] || { echo -; return; }; [[ "$(awk -v k="$k" '$1==k {print $4}' "$OUTDIR/$1.text")" == "${ia#* }" ]] && echo yes || echo NO; }
  ra="$(row a)"; rb="$(row b)"; rc="$(row c)"; sb=$(same b); sc=$(same c)
  [[ "$ra" == "$rb" && $sb == yes ]] || status=1
  [[ $have_old == 0 || ( "$ra" == "$rc" && $sc == yes ) ]] || status=1
  printf '%-26s %-34s %-34s %-34s %s %s\n' "$k" "$ra" "$rb" "$rc" "$sb" "$sc" | tee -a "$OUTDIR/table.txt"
done <"$OUTDIR/a.regs"
echo "nvcc: $("$NVCC" --version | tail -1), sm_$ARCH, base $BASE_REV; machine code compared byte for byte (sha256 of each kernel's .text); result: $([[ $status == 0 ]] && echo IDENTICAL || echo DIFFERENT)" | tee -a "$OUTDIR/table.txt"
if [[ ! -x "$BIN/cuobjdump" ]]; then exit $status; fi

# With cuobjdump (CUDA toolkits that ship it): the SASS text too.
for x in a:null_tracer b:no_hooks c:before_hooks; do
  f="$OUTDIR/${x#*:}.cubin"; [[ -f "$f" ]] || continue
  "$BIN/cuobjdump" -sass "$f" | awk '/Function :/ {n++} /^[ \t]*\/\*[0-9a-f]+\*\// {c++} END {print n " kernels, " c " SASS lines"}' >"$OUTDIR/${x%%:*}.sasscount"
  echo "cuobjdump -sass ${x#*:}: $(cat "$OUTDIR/${x%%:*}.sasscount")" | tee -a "$OUTDIR/table.txt"
done
exit $status
