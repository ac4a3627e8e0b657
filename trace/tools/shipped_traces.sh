#!/usr/bin/env bash
# Writes the traces shipped in assets/traces (assets/traces/README.md says
# what each holds): one per stage, the same problems whatever the source, so a
# GPU folder and host-model/ compare event for event.
#
#   trace/tools/shipped_traces.sh PA_LAB OUT_DIR model   # host model (any machine)
#   trace/tools/shipped_traces.sh PA_LAB OUT_DIR gpu     # recorded on the GPU, each
#                                                        # checked equal to the host model
set -euo pipefail
if [[ $# -ne 3 || ( $3 != model && $3 != gpu ) ]]; then
  echo "usage: $0 PA_LAB OUT_DIR model|gpu" >&2
  exit 2
fi
L="$1" D="$2" SRC="$3"
mkdir -p "$D"
check=()
[[ $SRC == gpu ]] && check=(--check)
P=(--dtype fp16 --head-size 128 --block-size 16 --heads 4 --kv-heads 2 --seed 1 --source "$SRC" "${check[@]}")
for s in q_to_smem qk softmax lv warp_reduce; do
  "$L" trace --stage "$s" "${P[@]}" --context-lens 50,20 --select 0,1 -o "$D/$s.patrace"
done
# The last partition (4 tokens) and the reduce block of (seq 0, head 1).
"$L" trace --stage v2_partition "${P[@]}" --context-lens 100,20 --partition-size 32 --select 0,1,3 \
  -o "$D/v2_partition.patrace"
# Suffix partition 0 of (seq 1, head 1), the reduces, the merge threads and the
# prefix kernel's block of chunk 0.
"$L" trace --stage cascade_merge "${P[@]}" --context-lens 96,130 --prefix-len 64 --partition-size 32 \
  --select 1,1,0 -o "$D/cascade_merge.patrace"
# Both splits of head 1's unit; two splits forced (the planner would not split
# this small grid) so the trace shows the arrival and the merge.
"$L" trace --stage optimized "${P[@]}" --context-lens 50,20 --splits 2 --select "0,1,0;0,1,1" \
  -o "$D/optimized.patrace"
