#!/usr/bin/env bash
# The PyTorch ops on the GPU machine (repository root): build libpa_lab_torch
# (the quick kernel set unless PA_BUILD_DIR names a build that has it, e.g.
# gpu-check's full one), then the pytest suite, the example and, unless
# NO_BENCH is set, the benchmark against SDPA (fp16 and bf16) as JSON.
# Logs and results under $OUT/torch_ops.
#   scripts/device/torch_ops.sh
# Environment: PA_BUILD_DIR (default build-torch, quick kernels), NO_BENCH, BENCH_DTYPES (default
# "fp16 bf16"), PYTEST_ARGS.
set -u
OUTD=${OUT:-/tmp/pa-out}/torch_ops; mkdir -p "$OUTD"
B=${PA_BUILD_DIR:-build-torch}
t0=$SECONDS
if [ ! -f "$B/CMakeCache.txt" ]; then
  cmake -S . -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_QUICK_KERNELS=ON >"$OUTD/cmake.log" 2>&1 || { tail -20 "$OUTD/cmake.log"; exit 1; }
fi
grep "pa: PyTorch" "$OUTD/cmake.log" 2>/dev/null
ninja -C "$B" pa_lab_torch >"$OUTD/build.log" 2>&1; rc=$?
echo "build pa_lab_torch: rc=$rc ($((SECONDS - t0)) s)"
[ $rc -eq 0 ] || { grep -B2 -A12 "error" "$OUTD/build.log" | head -80; exit 1; }
export PA_LAB_LIBRARY=$(realpath "$B")/python/libpa_lab_torch.so PYTHONPATH=$PWD/python
python3 -m pytest -q -rs ${PYTEST_ARGS:-} python/tests >"$OUTD/pytest.log" 2>&1; echo "pytest: rc=$? ($((SECONDS - t0)) s)"
tail -30 "$OUTD/pytest.log"
python3 python/examples/check_against_sdpa.py 2>&1 | tee "$OUTD/example.log"
if [ -z "${NO_BENCH:-}" ]; then
  for dt in ${BENCH_DTYPES:-fp16 bf16}; do
    python3 python/benchmarks/bench_vs_sdpa.py --dtype $dt --json "$OUTD/bench_$dt.json" >"$OUTD/bench_$dt.log" 2>&1
    echo "bench $dt: rc=$? ($((SECONDS - t0)) s)"; cat "$OUTD/bench_$dt.log" | tail -14
  done
fi
