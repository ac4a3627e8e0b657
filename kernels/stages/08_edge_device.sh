#!/usr/bin/env bash
# Issue 8's two targets at the edge, in one device call: quick build; stage
# 8's GPU tests and its recorded == model trace tests; the SASS of the stage 8
# prologue (fp16 and bf16, head 128, block 16, head tile 1: where the Q loads,
# the first cp.async and anything waiting on a load sit); (1,32,8,4096) alone
# REPEAT times (with ALT_SRCS, below, alternating with other revisions'
# builds: an A/B from one machine); the cascade alone with a sweep (CASCADE_SWEEP,
# variant:streams:chunks[:suffix],...; empty = no cascade). Logs in
# $OUT/edge.tgz, a summary last.
set -u
FINAL_OUT=${OUT:-/tmp/pa-out}
W=/tmp/edge; rm -rf "$W"; mkdir -p "$W" "$FINAL_OUT"
B=/tmp/q
source trace/tools/device_quick_build.sh
# ALT_SRCS="name=dir ...": source trees of other revisions (e.g. `git archive
# REV` unpacked under the carried .deps), each's pa-bench built (in parallel
# with the main build) into /tmp/qalt_name and timed beside this tree's.
ALT_NAMES=()
for spec in ${ALT_SRCS:-}; do
  name=${spec%%=*}; dir=${spec#*=}; ALT_NAMES+=("$name")
  (cd "$dir" && cmake -S . -B "/tmp/qalt_$name" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF \
    -DPA_BUILD_TESTS=OFF -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_QUICK_KERNELS=ON >"$W/cmake_$name.log" 2>&1 &&
    timeout 400 ninja -C "/tmp/qalt_$name" -j8 pa-bench >"$W/build_$name.log" 2>&1; echo "build $name rc=$?") &
done
device_quick_build "$W" pa_optimized_tests pa_trace_optimized_gpu_tests pa-bench
wait
if [ "${TESTS:-1}" = 1 ]; then
  timeout 150 "$B/tests/kernels/pa_optimized_tests" --reporter compact >"$W/opt_tests.log" 2>&1
  echo "opt tests rc=$? | $(tail -1 "$W/opt_tests.log")"
  timeout 150 "$B/tests/trace/pa_trace_optimized_gpu_tests" --reporter compact >"$W/trace_tests.log" 2>&1
  echo "trace optimized gpu tests rc=$? | $(tail -1 "$W/trace_tests.log")"
fi
cuobjdump -sass "$B/kernels/libpa_kernels_optimized.a" >"$W/opt_sass.txt" 2>/dev/null
cuobjdump --dump-resource-usage "$B/kernels/libpa_kernels_optimized.a" 2>/dev/null |
  grep -oE "(OptConfig[^,]*ELi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+ELi[0-9]+EE|REG:[0-9]+|STACK:[0-9]+|LOCAL:[0-9]+)" |
  paste - - - - >"$W/opt_resources.txt"
# Prologue of the head-128 / block-16 / head-tile-1 kernels: instruction index
# of every global load, the first cp.async, and the first PRMT/SEL (a wait).
python3 - "$W/opt_sass.txt" <<'PY' | tee "$W/prologue.txt"
import re, sys
funcs, cur = {}, None
for line in open(sys.argv[1], errors="replace"):
    m = re.search(r"Function : (\S+)", line)
    if m: cur = m.group(1); funcs[cur] = []; continue
    m = re.match(r"\s+/\*([0-9a-f]{4,})\*/\s+(.*?);", line)
    if cur and m: funcs[cur].append(m.group(2).strip())
for name, ins in funcs.items():
    if "opt_decode_kernel" not in name or "Li128ELi16ELi1E" not in name or "NullTracer" not in name: continue
    dt = "bf16" if "DType2E" in name or "bf16" in name else "fp16?"
    first_ldgsts = next((i for i, s in enumerate(ins) if "LDGSTS" in s), -1)
    loads = [i for i, s in enumerate(ins[:first_ldgsts]) if re.search(r"\bLDG", s)]
    waits = [i for i, s in enumerate(ins[:first_ldgsts]) if re.search(r"\b(PRMT|SEL)\b", s)]
    print(f"{name[:160]}\n  {len(ins)} instr; global loads before the first cp.async at {loads}; "
          f"first cp.async at {first_ldgsts}; PRMT/SEL before it at {waits[:8]}")
PY
# ALONE_ARGS: extra pa-bench arguments, several sets separated by '|' (each set
# is timed by every build; an older build may not know newer options).
IFS='|' read -r -a ARGSETS <<<"${ALONE_ARGS:- }"
for i in $(seq 1 "${REPEAT:-3}"); do
  for args in "${ARGSETS[@]}"; do
    for name in "${ALT_NAMES[@]}"; do
      echo "-- $name $args" >>"$W/alone.txt"
      "/tmp/qalt_$name/cli/pa-bench" --only optimized --shape 1,32,8,4096,128 $args >>"$W/alone.txt" 2>&1
    done
    echo "-- new $args" >>"$W/alone.txt"
    "$B/cli/pa-bench" --only optimized --shape 1,32,8,4096,128 $args >>"$W/alone.txt" 2>&1
  done
done
if [ -n "${CASCADE_SWEEP:-}" ]; then
  timeout 300 "$B/cli/pa-bench" --cascade-only --cascade-sweep "$CASCADE_SWEEP" >"$W/cascade.txt" 2>&1
  echo "cascade bench rc=$?"
fi
tar czf "$FINAL_OUT/edge.tgz" -C "$W" .
echo "==== stage 8 resources (head 128)"; grep "Li128ELi16" "$W/opt_resources.txt" | head -6
echo "==== (1,32,8,4096) alone"; grep -E "^optimized|^--" "$W/alone.txt"
[ -f "$W/cascade.txt" ] && { echo "==== cascade"; grep -vE "^  done" "$W/cascade.txt" | tail -24; }
