# split probes: stage 8 at forced split counts on two README shapes (fp16)
P=build-device/cli/pa-bench; mkdir -p $OUT/probe
for sh in 1,32,8,4096,128 8,32,8,4096,128; do for s in 0 2 3 4 5 6 8 10 11 13 16 20; do
  timeout 30 $P --only optimized --shape $sh --dtypes fp16 --splits $s --iters 50 --warmup-ms 20 --pool-gb 2 --json $OUT/probe/sp_${sh}_$s.json > /dev/null 2>&1
done; done
python3 - <<'PY'
import json,glob,os
rows=[]
for f in sorted(glob.glob(os.environ['OUT']+'/probe/*.json')):
    d=json.load(open(f))
    for r in d['rows']:
        rows.append((r['seqs'],int(f.split('_')[-1][:-5]),r.get('plan','')[:40],round(r['median_us'],2),round(r.get('pct_copy',0),1),r['status'][:20]))
for r in sorted(rows): print(*r)
PY
