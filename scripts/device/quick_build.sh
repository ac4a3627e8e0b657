# Sourced by the scripts beside it (GPU machine, repository root):
# device_quick_build OUTDIR TARGET... configures the quick kernel set
# (stages 1-7 at head 128 x block 16; stage 8 at heads 64, 128 and 256 x
# block 16, fp8 caches at head 128) in /tmp/q with Catch2 from .deps/catch2
# and builds the targets, logging to OUTDIR/cmake_q.log and OUTDIR/build_q.log.
# Environment: PA_REV (the source revision for trace headers), BUILD_LIMIT (s).
# device_out_setup WORKDIR: the start of a script whose logs go to WORKDIR and
# whose results to $OUT: sets FINAL_OUT ($OUT, else /tmp/pa-out, created),
# OUT=WORKDIR (emptied), B (the quick build folder) and t0, and names the GPU.
# device_bench_setup WORKDIR: the start of a pa-bench profile: WORKDIR emptied
# and used for the build logs, FINAL_OUT ($OUT, else /tmp/pa-out) created,
# pa-bench built; sets W=WORKDIR, FINAL_OUT and P (pa-bench's path).
device_quick_build() {
  local outd="$1"; shift
  local t0=$SECONDS
  cmake -S . -B /tmp/q -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DCMAKE_CUDA_ARCHITECTURES=90 \
    -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" -DPA_QUICK_KERNELS=ON -DPA_SOURCE_REVISION="${PA_REV:-unknown}" \
    >"$outd/cmake_q.log" 2>&1 || { tail -20 "$outd/cmake_q.log"; echo "configure FAILED"; }
  timeout "${BUILD_LIMIT:-260}" ninja -C /tmp/q -j12 -k 0 "$@" >"$outd/build_q.log" 2>&1
  echo "quick build rc=$? in $((SECONDS - t0)) s"; grep -E "^FAILED|error" "$outd/build_q.log" | head -5
}
device_out_setup() {
  FINAL_OUT=${OUT:-/tmp/pa-out}
  OUT=$1
  rm -rf "$OUT"; mkdir -p "$OUT" "$FINAL_OUT"
  B=/tmp/q
  t0=$(date +%s)
  nvidia-smi -L | tee "$OUT/gpu.txt"
}
device_bench_setup() {
  FINAL_OUT=${OUT:-/tmp/pa-out}
  W=$1; rm -rf "$W"; mkdir -p "$W" "$FINAL_OUT"
  device_quick_build "$W" pa-bench
  P=/tmp/q/cli/pa-bench
}
