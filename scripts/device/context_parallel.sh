#!/usr/bin/env bash
# Runs ON a machine with one or more GPUs (repository root): context
# parallelism through NCCL.
#   1. quick build (head 128 x block 16) of pa-lab and the sharding tests;
#      CMake's line saying whether NCCL was found
#   2. the one-GPU sharding tests and the NCCL tests (the latter SKIP with
#      fewer than 2 GPUs)
#   3. the benchmark: (1, 32, 8, 1048576) and (4, 32, 8, 262144), fp16 and
#      bf16, over 1, 2, 4 and 8 GPUs (those present), both exchanges:
#      `pa-lab run --stage optimized --devices ...`, each run checked against
#      the CPU reference and the one-GPU sharded run; with SEQ_GROUPS set (e.g.
#      "1,2"), batches of more than one sequence also run in that many
#      sequence groups (the exchange overlapping the next group's decode)
#   4. the table of its "row:" lines (scripts/context_parallel_table.py)
# Logs and the table go to $OUT/context-parallel. NVLink multicast stays off.
# Environment: PA_BUILD_DIR (an existing build with the targets, used instead
# of the quick build), ITERS (timed iterations, default 30), SHAPES ("seqs:context ..."),
# DTYPES (default "fp16 bf16"), DEVICES (default 1 and every power of two present),
# SEQ_GROUPS (sequence groups for batches, default 1; not GROUPS, which bash
# sets to the user's group ids), NO_TESTS=1 (skip step 2).
set -uo pipefail
source "$(dirname "${BASH_SOURCE[0]}")/quick_build.sh"
export NCCL_NVLS_ENABLE=0
device_out_setup /tmp/cp-work
nvidia-smi topo -m >"$OUT/topo.txt" 2>&1
targets=(pa-lab pa_sharded_gpu_tests pa_context_parallel_nccl_tests)
if [[ -n "${PA_BUILD_DIR:-}" ]]; then  # an existing build, e.g. the full one gpu-check.sh left in build-device
  B=$(realpath "$PA_BUILD_DIR")
  ninja -C "$B" "${targets[@]}" >"$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; echo "build in $B FAILED"; }
else
  device_quick_build "$OUT" "${targets[@]}"
  grep "pa: " "$OUT/cmake_q.log"
fi
if [[ "${NO_TESTS:-0}" != 1 ]]; then
  (cd "$B" && ctest -R "context parallelism" --output-on-failure) >"$OUT/ctest.log" 2>&1
  echo "tests: $(grep -E "tests passed|tests failed" "$OUT/ctest.log")"
  grep -E "Skipped|Failed" "$OUT/ctest.log" | head -10
fi

n=$(nvidia-smi -L | wc -l)
devs=1
for d in 2 4 8; do [[ $d -le $n ]] && devs="$devs,$d"; done
devs=${DEVICES:-$devs}
for dt in ${DTYPES:-fp16 bf16}; do
  for shape in ${SHAPES:-1:1048576 4:262144}; do
    s=${shape%%:*} c=${shape##*:}
    groups=1
    [[ $s -gt 1 ]] && groups=${SEQ_GROUPS:-1}
    log="$OUT/run_${dt}_${s}x${c}.log"
    t=$SECONDS
    "$B/cli/pa-lab" run --stage optimized --devices "$devs" --exchange all_gather,sums --dtype "$dt" \
      --seqs "$s" --heads 32 --kv-heads 8 --context-len "$c" --iters "${ITERS:-30}" \
      --sequence-groups "$groups" >"$log" 2>&1
    echo "$dt ${s}x${c}: rc=$? in $((SECONDS - t)) s; $(tail -1 "$log")"
  done
done
grep -h '^row:' "$OUT"/run_*.log >"$OUT/rows.txt"
python3 scripts/context_parallel_table.py "$OUT/rows.txt" --json "$OUT/rows.json" >"$OUT/table.md"
rm -rf "$FINAL_OUT/context-parallel"
cp -r "$OUT" "$FINAL_OUT/context-parallel"
echo "total $(( $(date +%s) - t0 )) s"
cat "$OUT/table.md"
