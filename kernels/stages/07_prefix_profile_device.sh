#!/usr/bin/env bash
# Prefix-kernel profiling round (session 5): the default build with the
# [cascade] tests, a variant sweep and per-instruction ncu stall samples
# (NCU_VARIANTS), then an experiment build (EXP_FLAGS as CUDAFLAGS, its own
# build dir) with its own sweep. Summary last; every file goes into one
# tarball $OUT/profile.tgz (the device tool returns at most 8 files).
set -u
FINAL_OUT=${OUT:-/tmp/pa-out}
W=/tmp/prof; rm -rf "$W"; mkdir -p "$W/exp"
OUT="$W" TEST_TIMEOUT=240 BENCH_TIMEOUT=150 CASCADE_SWEEP="${SWEEP:-4:1:0:2,7:1:0:2,7:0:0:0}" NCU=0 NCU_SOURCE=1 \
  NCU_VARIANTS="${NCU_VARIANTS:-7}" bash kernels/stages/07_cascade_prefix_device.sh >"$W/main.txt" 2>&1
if [ -n "${EXP_FLAGS:-}" ]; then
  OUT="$W/exp" B=/tmp/bexp TESTS=0 BENCH_TIMEOUT=120 CASCADE_SWEEP="${EXP_SWEEP:-7:1:0:2,7:0:0:0}" TARGETS=pa-bench \
    CUDAFLAGS="$EXP_FLAGS" bash kernels/stages/07_cascade_prefix_device.sh >"$W/exp/main.txt" 2>&1
fi
mkdir -p "$FINAL_OUT"; tar czf "$FINAL_OUT/profile.tgz" -C "$W" .
echo "=== default build"; grep -E "build done|sweep|^cascade |ncu source" "$W/main.txt"
echo "=== resources"; cat "$W/resource.txt" | head -8
if [ -n "${EXP_FLAGS:-}" ]; then echo "=== experiment $EXP_FLAGS"; grep -E "build done|sweep|FAILED|error" "$W/exp/main.txt" | head; fi
echo "=== tests"; grep -E "FAILED|failed" "$W/tests.log" | head -5; tail -2 "$W/tests.log"
