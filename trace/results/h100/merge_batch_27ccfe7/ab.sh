#!/usr/bin/env bash
# Session A/B (not committed): the batched split merge (working tree, build-device from
# verify.sh, or built here) against the tree with merge.patch reversed, alternating rounds.
set -u
t0=$SECONDS
O=${OUT:-/tmp/pa-out}; mkdir -p $O
nvidia-smi -L
W=/tmp/ab; mkdir -p $W
NEW=build-device/cli/pa-bench
if [[ ! -x $NEW ]]; then
  cmake -S . -B /tmp/ab_new -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=OFF \
    -DCMAKE_CUDA_ARCHITECTURES=90 >$W/new.cmake.log 2>&1
  NEW=/tmp/ab_new/cli/pa-bench; NB="ninja -C /tmp/ab_new -j8 pa-bench"
else NB=true; fi
rm -rf /tmp/ab_old; mkdir -p /tmp/ab_old
tar -c --exclude='./build*' --exclude=./.deps --exclude=./.git --exclude=./assets --exclude=./trace/results . | tar -x -C /tmp/ab_old
(cd /tmp/ab_old && patch -R -p1 -s < $PWD/merge.patch) || { echo "reverse patch failed"; exit 1; }
cmake -S /tmp/ab_old -B /tmp/ab_old/b -G Ninja -DCMAKE_BUILD_TYPE=Release -DPA_BUILD_VIEWER=OFF -DPA_BUILD_TESTS=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 >$W/old.cmake.log 2>&1
(timeout 400 ninja -C /tmp/ab_old/b -j8 pa-bench >$W/old.build.log 2>&1; echo "old build rc=$?") &
(timeout 400 $NB >$W/new.build.log 2>&1; echo "new build rc=$?") &
wait
echo "builds $((SECONDS-t0)) s"
OLD=/tmp/ab_old/b/cli/pa-bench
S=("8,128,8,1024,256 auto 2" "8,128,8,1024,128 auto 2" "8,128,8,1024,256 auto 0" "1,64,8,4096,128 auto 0"
   "4,64,8,4096,128 auto 0" "1,64,8,4096,256 auto 0" "2,128,8,8192,128 auto 0" "1,64,8,4096,128 fp8_e4m3 0"
   "1,32,8,4096,128 auto 0" "8,32,8,4096,128 auto 0" "41,64,2,1474,256 auto 3" "1,128,8,16384,128 auto 0")
for r in 1 2; do for side in old new; do
  P=$OLD; [[ $side == new ]] && P=$NEW
  for i in "${!S[@]}"; do set -- ${S[$i]}
    timeout 30 $P --only optimized --shape $1 --dtypes fp16 --kv-dtypes $2 --splits $3 --iters 50 --pool-gb 2 \
      --json $W/${side}_r${r}_$i.json >$W/${side}_r${r}_$i.log 2>&1 || echo "$side r$r #$i rc=$?"
  done
  timeout 60 $P --cascade-only --dtypes fp16 --iters 50 --json $W/${side}_r${r}_cascade.json >$W/${side}_r${r}_cascade.log 2>&1 || echo "$side r$r cascade rc=$?"
done; done
echo "runs $((SECONDS-t0)) s"
(cd $W && tar czf $O/ab.tgz .)
python3 - $W "${S[@]}" <<'PY'
import json, sys, glob
W, shapes = sys.argv[1], sys.argv[2:]
print(f"{'shape':<28}{'kv':<9}{'sp':>3}{'old r1':>9}{'old r2':>9}{'new r1':>9}{'new r2':>9}{'new/old':>9}  plan")
for i, s in enumerate(shapes):
    t = {}; plan = ""
    for side in ("old", "new"):
        for r in (1, 2):
            try:
                d = json.load(open(f"{W}/{side}_r{r}_{i}.json"))
                row = [x for x in d["rows"] if x["kernel"] == "optimized"][0]
                t[side, r] = row["median_us"] if row["status"] == "ok" else float("nan"); plan = row.get("plan", "")
            except Exception as e:
                t[side, r] = float("nan")
    o = min(t["old", 1], t["old", 2]); n = min(t["new", 1], t["new", 2])
    a = s.split()
    print(f"{a[0]:<28}{a[1]:<9}{a[2]:>3}{t['old',1]:>9.1f}{t['old',2]:>9.1f}{t['new',1]:>9.1f}{t['new',2]:>9.1f}{n/o:>9.3f}  {str(plan)[:40]}")
for side in ("old", "new"):
    for r in (1, 2):
        try:
            d = json.load(open(f"{W}/{side}_r{r}_cascade.json"))
            print("cascade", side, r, [round(c["cascade_us"], 1) for c in d.get("cascade", [])])
        except Exception as e:
            print("cascade", side, r, "error", e)
PY
echo "total $((SECONDS-t0)) s"
