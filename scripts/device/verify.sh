#!/usr/bin/env bash
# The check a change ends with, in one device call (GPU machine, repository
# root): scripts/gpu-check.sh builds the full kernel matrix in build-device
# and runs compute-sanitizer on the stages asked for (STAGES, default all;
# say STAGES=optimized after a change of stage 8 alone), then the GPU tests
# (ctest -L gpu) and the PyTorch ops' pytest suite run side by side on that
# build. The device tool brings back at most eight files, so everything lands
# in one archive, $OUT/verify.tgz (gpu-check's summary and logs, ctest.log,
# pytest.log), and the call prints a short table last.
#   PA_REV=<rev> [STAGES=optimized] bash scripts/device/verify.sh
# On an H100 (STAGES=optimized, f8390ec) the full build took 191 s, the
# sanitizers on stage 8 and its two other cache forms 11 s, ctest (-j4) 154 s
# beside pytest 107 s: 357 s in all, inside one call's 600 (an earlier H100
# machine built in 285 s).
set -u
t0=$SECONDS
FINAL=${OUT:-/tmp/pa-out}
W=/tmp/pa-verify
rm -rf "$W"; mkdir -p "$W" "$FINAL"
nvidia-smi -L | tee "$W/gpu.txt"
stages=()
[[ -n "${STAGES:-}" ]] && stages=(--stages "$STAGES")
OUT=$W bash scripts/gpu-check.sh --no-tests --jobs 14 "${stages[@]}" >"$W/gpu-check.log" 2>&1
gc=$?
echo "gpu-check rc=$gc $((SECONDS - t0)) s"
# Side by side: the GPU tests are small, and pytest is mostly host time.
(timeout 300 ctest --test-dir build-device -L gpu -j4 --timeout 200 >"$W/ctest.log" 2>&1; echo "ctest rc=$?" >>"$W/ctest.log") &
# build-device's op, named: without PA_LAB_LIBRARY the package would load the
# newest build*/ folder's, which may be another build.
(PA_LAB_LIBRARY=$PWD/build-device/python/libpa_lab_torch.so PYTHONPATH=$PWD/python timeout 300 \
   python3 -m pytest -q -rs python/tests >"$W/pytest.log" 2>&1
 echo "pytest rc=$?" >>"$W/pytest.log") &
wait
echo "tests done $((SECONDS - t0)) s"
(cd "$W" && tar czf "$FINAL/verify.tgz" ./*.log gpu.txt gpu-check)
echo
echo "verify ${PA_REV:-unknown} on $(head -1 "$W/gpu.txt")"
grep -E '^(build|sanitizers) ' "$W/gpu-check/summary.txt" 2>/dev/null || echo "gpu-check: no summary (rc=$gc)"
grep -E 'tests passed|tests failed' "$W/ctest.log" || tail -3 "$W/ctest.log"
grep -E '\*\*\*Failed|Not Run|Timeout' "$W/ctest.log" | head -10
tail -2 "$W/pytest.log"
echo "total $((SECONDS - t0)) s; archive: verify.tgz"
