#!/usr/bin/env bash
# The trace module's GPU session, in one command (run ON the GPU machine from
# the repository root, or from a snapshot of it):
#   1. configure + build (quick kernels, every recording configuration)
#   2. the recorded == host model tests (label gpu) and the host trace tests
#   3. the tracer-overhead proof (NullTracer cubin vs no hooks, per-kernel
#      registers and SASS counts with cuobjdump)
#   4. Nsight Compute counters of the stage 1 and 2 kernels next to the
#      analyses of the host model's trace of the same grid
#   5. recorded traces, one per stage (pa-lab trace --source gpu --check)
# Everything lands in $OUT/trace-device.tgz (+ $OUT/summary.txt); prints a
# short table last. Usage: trace/tools/device_run.sh [build-dir]
set -uo pipefail
B="${1:-build-trace-dev}"
OUTD="${OUT:-$PWD/out/trace-device}"
W=/tmp/trace-device
rm -rf "$W" && mkdir -p "$W/assets" "$OUTD"
export PATH=/usr/local/cuda/bin:$PATH
S="$W/summary.txt"
say() { echo "$*" | tee -a "$S"; }
# What is done so far goes to $OUTD after every step (a killed run still returns it).
save() { tar -C /tmp -czf "$OUTD/trace-device.tgz" trace-device 2>/dev/null; cp "$S" "$OUTD/summary.txt"; }
t0=$SECONDS
nvidia-smi -L | tee -a "$S"
GPU="$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1)"

# The overhead proof needs only nvcc: in the background, beside the build.
trace/tools/tracer_overhead.sh 90 "$W/overhead" >"$W/overhead.log" 2>&1 &
ovh_pid=$!

cmake -S . -B "$B" -G Ninja -DCMAKE_PREFIX_PATH="$PWD/.deps/catch2/usr" -DPA_BUILD_VIEWER=OFF \
  -DCMAKE_CUDA_ARCHITECTURES=90 -DPA_QUICK_KERNELS=ON -DPA_TRACE_FULL_RECORDING=ON \
  -DCMAKE_BUILD_TYPE=Release ${PA_SOURCE_REVISION:+-DPA_SOURCE_REVISION=$PA_SOURCE_REVISION} >"$W/cmake.log" 2>&1 || { tail -20 "$W/cmake.log"; say "configure FAILED"; }
ninja -C "$B" -j16 pa-lab pa_trace_gpu_tests pa_trace_tests >"$W/build.log" 2>&1 \
  && say "build ok ($((SECONDS - t0)) s)" || { grep -E "error|FAILED" "$W/build.log" | head -20; say "build FAILED"; }

save
timeout 200 "$B/tests/trace/pa_trace_gpu_tests" -s -r compact >"$W/gpu_tests.log" 2>&1
say "pa_trace_gpu_tests rc=$? : $(tail -2 "$W/gpu_tests.log" | tr '\n' ' ')"
save

M=l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum
M=$M,l1tex__t_requests_pipe_lsu_mem_global_op_st.sum,l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum
M=$M,smsp__inst_executed_op_shared_ld.sum,smsp__inst_executed_op_shared_st.sum
M=$M,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum,l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum
M=$M,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum
P=(--seqs 1 --context-len 100 --heads 8)
for dt in fp16 fp32; do
  for st in q_to_smem qk; do
    k=$([[ $st == qk ]] && echo stage2_qk_kernel || echo stage1_q_to_smem_kernel)
    timeout 120 ncu --clock-control none --kernel-name "regex:$k" --launch-count 1 --metrics "$M" --csv \
      "$B/cli/pa-lab" run --stage $st --dtype $dt "${P[@]}" --iters 0 >"$W/ncu_${st}_$dt.csv" 2>&1
    "$B/cli/pa-lab" trace --stage $st --dtype $dt "${P[@]}" --select all --source model \
      -o "$W/model_${st}_$dt.patrace" >"$W/model_${st}_$dt.txt" 2>&1
    rm -f "$W/model_${st}_$dt.patrace"
    say "== $st $dt: ncu (metric, value) vs model totals"
    grep -E '"l1tex|"smsp' "$W/ncu_${st}_$dt.csv" | awk -F'","' '{print "  " $(NF-2) " = " $NF}' | tr -d '"' | tee -a "$S"
    grep -A2 "^totals" "$W/model_${st}_$dt.txt" | tee -a "$S"
    save
  done
done

# Recorded traces, one per stage, small problem (checked against the host model).
A=(--dtype fp16 --head-size 128 --block-size 16 --heads 4 --kv-heads 2)
for st in q_to_smem qk softmax lv warp_reduce; do
  "$B/cli/pa-lab" trace --stage $st "${A[@]}" --context-lens 50,20 --select "0,1" --source gpu --check \
    -o "$W/assets/$st.patrace" >"$W/assets_$st.log" 2>&1
  say "record $st rc=$? $(grep -E 'check|wrote' "$W/assets_$st.log" | cut -c1-120 | tr '\n' ' ')"
done
"$B/cli/pa-lab" trace --stage v2_partition "${A[@]}" --context-lens 100,20 --partition-size 32 \
  --select "0,1,3" --source gpu --check -o "$W/assets/v2_partition.patrace" >"$W/assets_v2.log" 2>&1
say "record v2_partition rc=$? $(grep -E 'check|wrote' "$W/assets_v2.log" | cut -c1-120 | tr '\n' ' ')"
save

wait $ovh_pid
say "tracer overhead rc=$? : $(grep -E 'byte-identical|DIFFER|result' "$W/overhead.log" | tr '\n' ' ')"
timeout 100 "$B/tests/trace/pa_trace_tests" >"$W/host_tests.log" 2>&1
say "pa_trace_tests rc=$? : $(tail -2 "$W/host_tests.log" | tr '\n' ' ')"

say "GPU: $GPU; total $((SECONDS - t0)) s"
save
echo "===== summary"; cat "$S"
