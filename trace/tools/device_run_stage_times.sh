#!/usr/bin/env bash
# One device call (GPU machine, repository root; logs under $OUT): a quick build
# of pa-lab and the GPU trace tests (which also proves the per-entry recording
# instances of record_dispatch.cu on a GPU), the GPU trace tests, the stage 1-4
# times quoted by lessons 1-4 (`pa-lab run`, fp16, head 128, block 16), and the
# cascade_merge traces with a prefix-chunk selection (`--select 1,1,0`: the
# tensor-core prefix kernel's block is in the trace).
set -uo pipefail
export PATH=/usr/local/cuda/bin:$PATH
OUTD="${OUT:-$PWD/out/device-stage-times}"; mkdir -p "$OUTD/assets"
t0=$SECONDS
nvidia-smi -L
source "$(dirname "${BASH_SOURCE[0]}")/device_quick_build.sh"
device_quick_build "$OUTD" pa-lab pa_trace_gpu_tests
L=/tmp/q/cli/pa-lab
A=(--dtype fp16 --head-size 128 --block-size 16 --heads 4 --kv-heads 2 --context-lens 96,130 --prefix-len 64
   --partition-size 32 --select 1,1,0)
$L trace --stage cascade_merge "${A[@]}" --source gpu --check -o "$OUTD/assets/cascade_merge.gpu.patrace" 2>&1 \
  | grep -E "check|wrote|rror|kv_smem|mma" | cut -c1-160
$L trace --stage cascade_merge "${A[@]}" --source model -o "$OUTD/assets/cascade_merge.model.patrace" 2>&1 \
  | grep -E "wrote|rror" | cut -c1-160
timeout 120 /tmp/q/tests/trace/pa_trace_gpu_tests -r compact >"$OUTD/gpu_tests.log" 2>&1
echo "pa_trace_gpu_tests rc=$?"; grep -vE "^Randomness|^$|^Filters" "$OUTD/gpu_tests.log" | tail -4 | cut -c1-200
P=(--dtype fp16 --head-size 128 --block-size 16 --heads 32 --kv-heads 8 --seed 1 --iters 100)
{
  for s in q_to_smem qk softmax lv warp_reduce; do
    echo "== pa-lab run --stage $s ${P[*]} --seqs 8 --context-len 4096"
    timeout 60 $L run --stage $s "${P[@]}" --seqs 8 --context-len 4096 2>&1
  done
  for n in 1 100; do
    echo "== pa-lab run --stage q_to_smem ${P[*]} --seqs $n --context-len 1000"
    timeout 60 $L run --stage q_to_smem "${P[@]}" --seqs $n --context-len 1000 2>&1
  done
} >"$OUTD/stage_times.txt"
grep -E "^==|median|GB/s|PASS|FAIL" "$OUTD/stage_times.txt" | cut -c1-170
echo "total $((SECONDS - t0)) s"
