#!/usr/bin/env bash
# Runs ON the GPU machine (nvcc, cmake, ninja, compute-sanitizer; no Debian
# packages: Catch2 comes from .deps/catch2, see scripts/device-deps.sh).
#   1. configure (the `device` preset's settings) and build with -j16 (every
#      kernel configuration; --quick builds PA_QUICK_KERNELS=ON, block 16 only)
#   2. the GPU tests (ctest label `gpu`; every test of the device build when no
#      test carries that label)
#   3. compute-sanitizer memcheck, racecheck, synccheck and initcheck over
#      `pa-lab run --stage S ...` for every stage, small problems, in one
#      configuration per dtype and per block size (fp32/8, fp16/16, bf16/32)
#      and one per fp8 cache format (fp16 + fp8_e4m3 / 16, bf16 + fp8_e5m2 / 32;
#      no cascade: it takes no fp8 cache), and again on the other cache forms
#      of the stages asked for (FORMS: CSR tables, token-row layouts, the
#      multi-level cascade)
#   4. a PASS/FAIL table, tool x stage
# Logs go to $OUT/gpu-check when $OUT is set, else out/gpu-check.
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/common.sh"

ALL_STAGES="q_to_smem qk softmax lv warp_reduce v2_partition cascade_merge optimized"
ALL_TOOLS="memcheck racecheck synccheck initcheck"
# Cache forms beyond vLLM's layout with padded tables, run for the stages listed.
FORMS="q_to_smem@csr qk@csr softmax@csr lv@csr warp_reduce@csr warp_reduce@nhd warp_reduce@hnd-csr optimized@nhd-csr"
FORMS+=" optimized@hnd cascade_merge@levels"

usage() {
  cat <<EOF
usage: scripts/gpu-check.sh [options]
  --quick              quick kernel build (PA_QUICK_KERNELS=ON: head 128 x block 16,
                       stage 8 also heads 64 and 256; much faster to build) and two
                       configurations (fp16, block 16; bf16 with an fp8_e5m2 cache, block 16)
  --quick-kernels      the quick kernel build, keeping the configurations given
  --full-kernels       every kernel configuration (the default; needed for blocks 8, 32)
  --full-matrix        every dtype x block size (9 configurations)
  --configs LIST       configurations as dtype:block or dtype-kvdtype:block, comma separated
                       (default fp32:8,fp16:16,bf16:32,fp16-fp8_e4m3:16,bf16-fp8_e5m2:32: each
                       dtype, block size and fp8 format once)
  --stages LIST        comma separated stages (default: all:
                       ${ALL_STAGES// /,}); each with its other cache forms:
                       ${FORMS}
  --tools LIST         comma separated compute-sanitizer tools (default: ${ALL_TOOLS// /,})
  --no-sanitize        skip compute-sanitizer (build and GPU tests only)
  --no-tests           skip ctest
  --no-build           use the existing build
  --build-dir DIR      build directory (default: build-device)
  --jobs N             sanitizer runs in parallel (default 4)
  --timeout S          limit per sanitizer run in seconds (default 240)
  -h, --help           this text
Environment: PA_CUDA_ARCHS (default 90), OUT (log folder root), PA_REV (the source revision
written into trace and timeline files; a copy without .git cannot find it).
Exit status: 0 when every step passed, 1 otherwise.
EOF
}

# ---- one sanitizer run (the script calls itself for parallel runs)
if [[ "${1:-}" == --one ]]; then
  # --one TOOL STAGE DTYPE BLOCK PA_LAB LOGDIR TIMEOUT
  tool=$2 stage=$3 dtype=$4 bs=$5 palab=$6 logdir=$7 limit=$8
  log="$logdir/$tool-$stage-$dtype-b$bs.log"
  # STAGE@FORM: the stage on another cache form (FORMS above): a token-row
  # layout (nhd, hnd), CSR page tables (csr), or the multi-level cascade (levels).
  row=$stage form=""  # row: the summary's row, STAGE or STAGE@FORM
  if [[ $stage == *@* ]]; then form=${stage#*@}; stage=${stage%%@*}; fi
  kv=auto
  if [[ $dtype == *-* ]]; then kv=${dtype#*-}; dtype=${dtype%%-*}; fi
  extra=()
  [[ $tool == memcheck ]] && extra+=(--leak-check full)
  # Small problem: 3 sequences (one token, a partial block, several blocks),
  # GQA 2:1, a seed so a failure can be replayed; --iters 0: one checked run,
  # no timing loop (the sanitizers make every launch slow).
  cmd=("$palab" run --stage "$stage" --dtype "$dtype" --head-size 128 --block-size "$bs"
       --heads 4 --kv-heads 2 --seed 7 --iters 0 --kv-dtype "$kv")
  case $stage in
    # Two partitions for the 100-token sequence.
    v2_partition) cmd+=(--context-lens 1,17,100 --partition-size 64) ;;
    # A 32-token shared prefix (a multiple of every block size) + unique suffixes.
    # Three levels: 2 groups of 2 requests share 32 tokens, each request
    # then 17 more of its own.
    cascade_merge) if [[ $form == levels ]]; then cmd+=(--seqs 4 --levels 2:32,1:17)
                   else cmd+=(--seqs 3 --prefix-len 32 --suffix-lens 1,17,68 --baselines 0); fi ;;
    # Five splits forced (424 to 448 tokens each for blocks 8 to 32): 1 and 17
    # tokens inside split 0 (splits 1-4 return at once), 700 ending in split 1,
    # 2100 over all five; the split merge (the last CTA to arrive) runs for
    # the last two.
    optimized) cmd+=(--context-lens 1,17,700,2100 --splits 5) ;;
    *) cmd+=(--context-lens 1,17,100) ;;
  esac
  case $form in
    nhd|hnd) cmd+=(--layout "$form") ;;
    csr) cmd+=(--page-table csr) ;;
    nhd-csr|hnd-csr) cmd+=(--layout "${form%-csr}" --page-table csr) ;;
  esac
  # bf16 runs with ALiBi: its slope loads (and the cascade's per-row context
  # lengths) go through the sanitizers too; not the multi-level cascade, which
  # refuses ALiBi.
  [[ $dtype == bf16 && $form != levels ]] && cmd+=(--alibi)
  t0=$SECONDS
  {
    echo "# compute-sanitizer --tool $tool ${extra[*]} --error-exitcode 99 ${cmd[*]}"
    timeout "$limit" compute-sanitizer --tool "$tool" "${extra[@]}" --error-exitcode 99 "${cmd[@]}"
  } >"$log" 2>&1
  rc=$?
  case $rc in
    0) res=PASS ;;
    99) res=FAIL ;;           # the sanitizer found errors
    124) res=TIMEOUT ;;
    *) res=ERROR ;;           # pa-lab itself failed (bad flags, wrong result, ...)
  esac
  echo "$tool $row $dtype $bs $res $((SECONDS - t0)) $log"
  exit 0
fi

stages="$ALL_STAGES"; tools="$ALL_TOOLS"; configs="fp32:8 fp16:16 bf16:32 fp16-fp8_e4m3:16 bf16-fp8_e5m2:32"
do_build=1 do_tests=1 do_san=1 jobs=4 limit=240 quick_kernels=0
bdir="$PA_ROOT/build-device"
while [[ $# -gt 0 ]]; do
  case "$1" in
    --quick) configs="fp16:16 bf16-fp8_e5m2:16"; quick_kernels=1 ;;
    --quick-kernels) quick_kernels=1 ;;
    --full-kernels) quick_kernels=0 ;;
    --full-matrix) configs="fp32:8 fp32:16 fp32:32 fp16:8 fp16:16 fp16:32 bf16:8 bf16:16 bf16:32" ;;
    --configs) configs="${2//,/ }"; shift ;;
    --stages) stages="${2//,/ }"; shift ;;
    --tools) tools="${2//,/ }"; shift ;;
    --no-sanitize) do_san=0 ;;
    --no-tests) do_tests=0 ;;
    --no-build) do_build=0 ;;
    --build-dir) bdir="$(realpath -m "$2")"; shift ;;
    --jobs) jobs="$2"; shift ;;
    --timeout) limit="$2"; shift ;;
    -h|--help) usage; exit 0 ;;
    *) usage >&2; pa_die "unknown option '$1' (accepted options above)" ;;
  esac
  shift
done
for s in $stages; do
  [[ " $ALL_STAGES " == *" $s "* ]] || pa_die "unknown stage '$s'; accepted: $ALL_STAGES"
done
for t in $tools; do
  [[ " $ALL_TOOLS " == *" $t "* ]] || pa_die "unknown tool '$t'; accepted: $ALL_TOOLS"
done
for c in $configs; do
  [[ $c =~ ^(fp32|fp16|bf16|fp16-fp8_e4m3|fp16-fp8_e5m2|bf16-fp8_e4m3|bf16-fp8_e5m2):(8|16|32)$ ]] ||
    pa_die "bad configuration '$c'; accepted: dtype:block with dtype fp32|fp16|bf16 or fp16|bf16 followed by -fp8_e4m3|-fp8_e5m2, block 8|16|32"
done

if [[ $quick_kernels -eq 1 && " $configs " =~ :(8|32)\  ]]; then
  pa_warn "the quick kernel build has block size 16 only: configurations with blocks 8 or 32 will report ERROR"
fi

LOGDIR="${OUT:-$PA_ROOT/out}/gpu-check"
mkdir -p "$LOGDIR"
declare -a step_names=() step_results=()
step() { step_names+=("$1"); step_results+=("$2"); }
t_start=$SECONDS

command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader | tee "$LOGDIR/gpu.txt"

# ---- 1. build
if [[ $do_build -eq 1 ]]; then
  nvcc="$(pa_find_nvcc)"
  [[ -n "$nvcc" ]] || pa_die "nvcc not found (PATH, /usr/local/cuda/bin): this script is for the GPU machine"
  prefix=()
  if [[ -f "$PA_ROOT/.deps/catch2/usr/lib/cmake/Catch2/Catch2Config.cmake" ]]; then
    prefix=("-DCMAKE_PREFIX_PATH=$PA_ROOT/.deps/catch2/usr")
  else
    pa_warn "no .deps/catch2 (make it with scripts/device-deps.sh on a Debian machine); relying on a system Catch2 v3"
  fi
  pa_say "gpu-check: configure + build in $bdir (log: $LOGDIR/build.log)"
  t0=$SECONDS
  {
    cmake -S "$PA_ROOT" -B "$bdir" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF \
      "-DPA_QUICK_KERNELS=$([[ $quick_kernels -eq 1 ]] && echo ON || echo OFF)" \
      "-DCMAKE_CUDA_COMPILER=$nvcc" "-DCMAKE_CUDA_ARCHITECTURES=${PA_CUDA_ARCHS:-90}" "${prefix[@]}" \
      "-DPA_SOURCE_REVISION=${PA_REV:-unknown}" \
      && cmake --build "$bdir" -j "${PA_JOBS:-16}" -- -k 0
  } >"$LOGDIR/build.log" 2>&1
  rc=$?
  if [[ $rc -ne 0 ]]; then
    # -k 0: one broken target does not stop the others, so the tests and the
    # sanitizer runs below still use whatever did build.
    grep -E '^FAILED:|error' "$LOGDIR/build.log" | head -20
    step build "FAIL ($((SECONDS - t0))s; failed targets: $(grep -c '^FAILED:' "$LOGDIR/build.log"))"
    pa_warn "build failed; see $LOGDIR/build.log (continuing with what was built)"
  else
    step build "PASS ($((SECONDS - t0))s)"
  fi
fi

palab="$bdir/cli/pa-lab"

# ---- 2. GPU tests
if [[ $do_tests -eq 1 ]]; then
  if [[ ! -f "$bdir/CTestTestfile.cmake" ]]; then
    step tests "NOT RUN (no build in $bdir)"
  else
    n_gpu=$(ctest --test-dir "$bdir" -N -L gpu 2>/dev/null | sed -n 's/^Total Tests: //p')
    filter=(-L gpu); what="label gpu"
    if [[ "${n_gpu:-0}" == 0 ]]; then filter=(); what="all tests (no test is labelled gpu)"; fi
    pa_say "gpu-check: ctest, $what (log: $LOGDIR/ctest.log)"
    t0=$SECONDS
    ctest --test-dir "$bdir" --output-on-failure "${filter[@]}" >"$LOGDIR/ctest.log" 2>&1
    rc=$?
    sed -n '/tests passed, /,$p' "$LOGDIR/ctest.log" | grep -v 'Errors while running' | head -30
    n_skip=$(grep -c '\*\*\*Skipped' "$LOGDIR/ctest.log")
    res="PASS"; [[ $rc -ne 0 ]] && res="FAIL"
    # On a GPU machine a skipped GPU test hides a problem: say so.
    [[ ${n_skip:-0} -gt 0 ]] && res="$res, $n_skip SKIPPED"
    step "tests ($what)" "$res ($((SECONDS - t0))s)"
  fi
fi

# ---- 3. compute-sanitizer
declare -A cell_pass=() cell_total=() cell_bad=() cell_fail=()
if [[ $do_san -eq 1 ]]; then
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    [[ -x /usr/local/cuda/bin/compute-sanitizer ]] && export PATH="/usr/local/cuda/bin:$PATH"
  fi
  if ! command -v compute-sanitizer >/dev/null 2>&1; then
    step sanitizers "NOT RUN (compute-sanitizer not found)"
  elif [[ ! -x "$palab" ]]; then
    step sanitizers "NOT RUN ($palab missing)"
  else
    list="$LOGDIR/runs.txt"; : >"$list"
    # Rows: the stages asked for, then their other cache forms (FORMS: CSR
    # tables on stages 1-5, stages 5 and 8 on token-row layouts, the
    # multi-level cascade).
    rows="$stages"
    for f in $FORMS; do [[ " $stages " == *" ${f%%@*} "* ]] && rows+=" $f"; done
    for t in $tools; do for r in $rows; do for c in $configs; do
      s=${r%%@*} dt=${c%%:*}
      # Token-row caches (nhd, hnd) are 2-byte caches only (kernels/CMakeLists.txt
      # builds no fp32 or fp8 token-row instance).
      rows_form=0; [[ $r == *@nhd* || $r == *@hnd* ]] && rows_form=1
      # The tensor-core kernels (cascade prefix, stage 8) have no fp32 path,
      # nor have token rows: their fp32 configuration runs as fp16, so the
      # block size is still covered.
      if [[ $dt == fp32 && ( $s == cascade_merge || $s == optimized || $rows_form == 1 ) ]]; then dt=fp16; fi
      # fp8 caches: the cascade refuses them, stage 8 takes blocks of 16 and 32,
      # token rows none.
      if [[ $dt == *-fp8_* && ( $s == cascade_merge || ( $s == optimized && ${c##*:} == 8 ) ||
                                $rows_form == 1 ) ]]; then continue; fi
      echo "$t $r $dt ${c##*:}" >>"$list"
    done; done; done
    sort -u -o "$list" "$list"
    n=$(wc -l <"$list")
    pa_say "gpu-check: $n compute-sanitizer runs, $jobs at a time (logs: $LOGDIR/<tool>-<stage>-<dtype>-b<block>.log)"
    t0=$SECONDS
    # Each line gets pa-lab, the log folder and the limit appended.
    sed "s|\$| $palab $LOGDIR $limit|" "$list" \
      | xargs -P "$jobs" -L 1 bash "${BASH_SOURCE[0]}" --one >"$LOGDIR/results.raw"
    while read -r t s dt bs res secs log; do
      k="$t/$s"
      cell_total[$k]=$(( ${cell_total[$k]:-0} + 1 ))
      if [[ $res == PASS ]]; then cell_pass[$k]=$(( ${cell_pass[$k]:-0} + 1 ))
      else
        cell_bad[$k]="${cell_bad[$k]:-}${cell_bad[$k]:+ }$res:$dt/b$bs"
        [[ $res == FAIL ]] && cell_fail[$k]=1
      fi
    done <"$LOGDIR/results.raw"
    n_ok=$(grep -c ' PASS ' "$LOGDIR/results.raw")
    res="PASS"; [[ "$n_ok" -ne "$n" ]] && res="FAIL"
    step sanitizers "$res ($n_ok/$n runs clean, $((SECONDS - t0))s)"
  fi
fi

# ---- 4. summary table
{
  echo
  echo "gpu-check summary ($(date -u +%Y-%m-%dT%H:%MZ), $(cat "$LOGDIR/gpu.txt" 2>/dev/null | head -1 || echo 'GPU unknown'))"
  # The kernel set of the build the steps used (with --no-build: the existing one's).
  if grep -q '^PA_QUICK_KERNELS:BOOL=ON' "$bdir/CMakeCache.txt" 2>/dev/null; then
    echo "kernels: quick (head 128, block 16; stage 8 also heads 64 and 256)"
  elif [[ -f $bdir/CMakeCache.txt ]]; then
    echo "kernels: full (every dtype x head size x block size)"
  fi
  if [[ $do_san -eq 1 && ${#cell_total[@]} -gt 0 ]]; then
    echo "configurations: $configs; problem: head 128, heads 4, kv-heads 2, context lens 1,17,100"
    echo "(v2_partition: partition size 64; cascade_merge: prefix 32 + suffixes 1,17,68;"
    echo " optimized: context lens 1,17,700,2100 over 5 forced splits, so the split merge runs;"
    echo " cascade_merge and optimized have no fp32 path: their fp32 configuration runs as fp16)"
    echo " forms: stage@csr (CSR page tables), @nhd / @hnd (token-row caches, 2-byte only: fp32 runs as fp16),"
    echo " cascade_merge@levels (3 levels)"
    printf '%-22s' stage; for t in $tools; do printf ' %-11s' "$t"; done; echo
    for s in $rows; do
      # A form that no configuration could run (say fp8 only on nhd) has no row.
      [[ $s == *@* && -z ${cell_total[${tools%% *}/$s]:-} ]] && continue
      printf '%-22s' "$s"
      for t in $tools; do
        k="$t/$s"; tot=${cell_total[$k]:-0}; ok=${cell_pass[$k]:-0}
        if [[ $tot -eq 0 ]]; then cell="-"
        elif [[ $ok -eq $tot ]]; then cell="PASS $ok/$tot"
        elif [[ -n ${cell_fail[$k]:-} ]]; then cell="FAIL $ok/$tot"
        else cell="ERROR $ok/$tot"; fi
        printf ' %-11s' "$cell"
      done
      echo
    done
    echo "PASS n/m: m runs, n clean. FAIL: the sanitizer reported errors. ERROR: pa-lab failed (wrong result, bad usage, no GPU) or timed out."
    for k in "${!cell_bad[@]}"; do echo "  not clean: $k: ${cell_bad[$k]}"; done | sort
    [[ ${#cell_bad[@]} -gt 0 ]] && echo "  logs: $LOGDIR/<tool>-<stage>-<dtype>-b<block>.log"
  fi
  for i in "${!step_names[@]}"; do printf '%-40s %s\n' "${step_names[$i]}" "${step_results[$i]}"; done
  echo "total: $((SECONDS - t_start))s; logs: $LOGDIR"
} | tee "$LOGDIR/summary.txt"

for r in "${step_results[@]}"; do [[ $r == PASS* && $r != *SKIPPED* ]] || exit 1; done
exit 0
