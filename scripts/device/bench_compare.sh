#!/usr/bin/env bash
# Several versions of the kernels timed against each other in one device call
# on one GPU (GPU machine, repository root). The sides:
#   - before: an older source tree, given as a tarball from
#     `git archive --prefix=before/ REV | gzip` (optional);
#   - after: the working tree;
#   - one side per patch given, named after its file: the working tree with
#     that patch applied (`patch -p1`; a patch that does not apply is reported
#     and its side dropped), so that several changes of one commit are timed
#     in one call without a commit each.
# Each side gets the quick kernel build of pa-bench, all built side by side;
# then the benchmark runs every side in turn, ROUNDS times (so a drift of the
# GPU's clocks shows up as a difference between one side's runs), and
# scripts/device/bench_compare_table.py gives each row's median per side (the
# lowest of its runs) and its time over the base's: before's if given, else
# after's. Every run's JSON and log go into $OUT/bench_compare.tgz as they
# finish, so a call cut short keeps what ran.
#   scripts/device/bench_compare.sh [BEFORE.tgz] [X.patch ...] [pa-bench options...]
# Environment: ROUNDS (default 2), PA_BENCH_LIMIT (s per benchmark run,
# default 100), SHAPES (say "1,32,8,4096,128 8,128,8,1024,256": one pa-bench
# run per shape, --shape added to the options, each round's runs read as one
# by the table; the quick build has heads 64, 128 and 256 at block 16, and
# fp8 at head 128), PATCH_TESTS (test targets, say "pa_optimized_tests
# pa_layouts_gpu_tests": built and run on each patched side after the
# benchmark, a patch's own correctness check).
set -u
FINAL_OUT=${OUT:-/tmp/pa-out}; W=/tmp/bench_compare
rm -rf "$W"; mkdir -p "$W" "$FINAL_OUT"
sides=(); patches=(); before=
while (($#)); do
  case $1 in
    *.tgz) before=$1; shift ;;
    *.patch) patches+=("$(realpath "$1")"); shift ;;
    *) break ;;
  esac
done
nvidia-smi -L | tee "$W/gpu.txt"
((${#patches[@]})) && ! command -v patch >/dev/null && { echo "patches given but no patch program on this machine"; exit 1; }
src_of() { [[ $1 == after ]] && echo "$PWD" || echo "$W/$1"; }
if [[ -n $before ]]; then
  tar xzf "$before" -C "$W" && [[ -d $W/before ]] || { echo "cannot unpack $before (made with --prefix=before/?)"; exit 1; }
  sides+=(before)
fi
sides+=(after)
for p in "${patches[@]}"; do
  name=$(basename "$p" .patch)
  [[ $name == before || $name == after ]] && { echo "patch $p: rename it (before and after are taken)"; exit 2; }
  mkdir -p "$W/$name"
  # The working tree without its builds, dependencies and recorded data.
  tar -c --exclude='./build*' --exclude=./.deps --exclude=./.git --exclude=./assets/traces \
    --exclude=./assets/timelines --exclude=./assets/screenshots --exclude=./trace/results . | tar -x -C "$W/$name"
  if (cd "$W/$name" && patch -p1 -s --dry-run <"$p" >/dev/null && patch -p1 -s <"$p"); then
    sides+=("$name")
  else
    echo "patch $p does not apply to the working tree: side $name dropped"
  fi
done
jobs=$(( $(nproc) / ${#sides[@]} )); ((jobs < 2)) && jobs=2
build() {  # side
  local b="$W/b_$1"
  local tests=OFF
  [[ -n ${PATCH_TESTS:-} ]] && tests=ON  # Catch2 from .deps (scripts/device-deps.sh)
  cmake -S "$(src_of "$1")" -B "$b" -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=$tests \
    -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_QUICK_KERNELS=ON \
    >"$b.cmake.log" 2>&1 && ninja -C "$b" -j"$jobs" pa-bench >"$b.build.log" 2>&1
  echo "build $1: rc=$?"
}
t0=$SECONDS
for s in "${sides[@]}"; do build "$s" & done
wait
echo "builds (${#sides[@]} sides, -j$jobs each): $((SECONDS - t0)) s"
archive() { (cd "$W" && tar czf "$FINAL_OUT/bench_compare.tgz" gpu.txt ./*.json ./*.log 2>/dev/null); }
read -r -a shapes <<<"${SHAPES:-}"
for ((r = 1; r <= ${ROUNDS:-2}; ++r)); do
  for s in "${sides[@]}"; do
    if ((${#shapes[@]} == 0)); then
      timeout "${PA_BENCH_LIMIT:-100}" "$W/b_$s/cli/pa-bench" --json "$W/$s.$r.json" "$@" >"$W/$s.$r.log" 2>&1
      echo "$s.$r rc=$? ($((SECONDS - t0)) s)"
    else
      for i in "${!shapes[@]}"; do
        timeout "${PA_BENCH_LIMIT:-100}" "$W/b_$s/cli/pa-bench" --json "$W/$s.$r.$i.json" "$@" --shape "${shapes[$i]}" \
          >"$W/$s.$r.$i.log" 2>&1
        echo "$s.$r shape ${shapes[$i]} rc=$? ($((SECONDS - t0)) s)"
      done
    fi
    archive
  done
done
for s in "${sides[@]}"; do
  [[ $s == before || $s == after || -z ${PATCH_TESTS:-} ]] && continue
  # shellcheck disable=SC2086  # a list of targets
  ninja -C "$W/b_$s" -j"$(nproc)" $PATCH_TESTS >"$W/$s.tests.build.log" 2>&1
  echo "$s tests build rc=$?"
  for t in $PATCH_TESTS; do
    exe=$(find "$W/b_$s/tests" -name "$t" -type f 2>/dev/null | head -1)
    [[ -z $exe ]] && { echo "$s $t: not built (see $s.tests.build.log)"; continue; }
    timeout 200 "$exe" >"$W/$s.$t.log" 2>&1
    echo "$s $t rc=$?: $(grep -E '^test cases|^All tests passed' "$W/$s.$t.log" | head -1)"
  done
  archive
done
python3 scripts/device/bench_compare_table.py "$W" "${sides[@]}" | tee "$FINAL_OUT/bench_compare.txt"
