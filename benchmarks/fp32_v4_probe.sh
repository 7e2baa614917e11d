#!/bin/bash
# Ladder v4 FP32 evidence on the GPU machine (kit sourced, nvcc/cuobjdump/ncu on PATH):
# SASS opcode counts, odd-shape tests, a timing sweep, one ncu profile per kernel at 4096.
# Everything lands in $OUT (at most 8 files). Usage: bash benchmarks/fp32_v4_probe.sh
cd "$(dirname "$0")/.." || exit 1
O=${OUT:-/tmp/fp32probe}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
sass() {  # name file defines...
  local n=$1 f=$2; shift 2
  nvcc -arch=sm_90 -cubin -Xptxas -v -Icuda "$@" -o /tmp/$n.cubin "$f" 2>&1 | grep -E "registers|spill" | sed "s/^/$n: /"
  cuobjdump -sass /tmp/$n.cubin > /tmp/$n.sass
  echo "$n opcodes:"; grep -oP '/\*[0-9a-f]{4,}\*/\s+(@!?U?P[T0-9]+\s+)?\K[A-Z][A-Z0-9]*(\.[A-Z0-9.]+)?' /tmp/$n.sass \
    | sed -E 's/\..*//' | sort | uniq -c | sort -rn | head -14 | tr '\n' ' '; echo
  echo "$n FFMA with .reuse: $(grep -c 'FFMA.*reuse' /tmp/$n.sass)  LDS.128: $(grep -c 'LDS.128' /tmp/$n.sass)  BAR: $(grep -c 'BAR.SYNC' /tmp/$n.sass)"
}
{
  sass pipelined cuda/16_pipelined.cu -DBM=64 -DBN=128 -DBK=16 -DWM=64 -DWN=32 -DWNITER=2 -DTM=8 -DTN=4 -DSTAGES=3 -DMINB=2
  sass ffma_tuned cuda/18_ffma_tuned.cu -DBM=128 -DKV=2
  sass regdb_128_8_8 cuda/20_ffma_regdb.cu -DBM=128 -DTN=8 -DBK=8
  sass regdb_128_16_8 cuda/20_ffma_regdb.cu -DBM=128 -DTN=16 -DBK=8
  sass regdb_128_16_16 cuda/20_ffma_regdb.cu -DBM=128 -DTN=16 -DBK=16
} > "$O/sass_counts.txt" 2>&1 &
SASS_PID=$!
timeout 60 python3 -m pytest -q -m gpu tests/test_ladder.py -k "regdb" 2>&1 | tail -5 | tee "$O/pytest.txt"
timeout 120 python3 benchmarks/ladder.py --variants ffma_regdb,pipelined --params 'minb=2' \
  --sizes 1024,2048,4096,8192 --warmup 2 --repeats 5 --no-verify --out "$O/explore" > "$O/explore.log" 2>&1
wait $SASS_PID
timeout 75 ncu --clock-control none -k regex:'matmul|gemm|xmma' -c 8 \
  --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
  --section WarpStateStats --section ComputeWorkloadAnalysis --section MemoryWorkloadAnalysis \
  --metrics smsp__average_warps_issue_stalled_barrier_per_issue_active.ratio,smsp__average_warps_issue_stalled_long_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_short_scoreboard_per_issue_active.ratio,smsp__average_warps_issue_stalled_mio_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_math_pipe_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_not_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_selected_per_issue_active.ratio,smsp__average_warps_issue_stalled_wait_per_issue_active.ratio,smsp__average_warps_issue_stalled_dispatch_stall_per_issue_active.ratio,smsp__average_warps_issue_stalled_no_instruction_per_issue_active.ratio,smsp__average_warps_issue_stalled_lg_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_branch_resolving_per_issue_active.ratio,smsp__average_warps_issue_stalled_drain_per_issue_active.ratio,smsp__average_warps_issue_stalled_membar_per_issue_active.ratio,smsp__average_warps_issue_stalled_tex_throttle_per_issue_active.ratio,smsp__average_warps_issue_stalled_misc_per_issue_active.ratio,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum,l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum,sm__inst_executed_pipe_fma.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum,sm__cycles_elapsed.avg.per_second \
  python3 benchmarks/fp32_v4_ncu.py 4096 cublas_fp32 \
  pipelined:bm=128,bn=128,bk=16,wm=64,wn=32,wniter=2,tm=8,tn=4,stages=3,minb=2 \
  ffma_tuned:bm=128,kv=2,splitk=1 ffma_regdb:bm=128,tn=8,bk=8,splitk=1 ffma_regdb:bm=64,tn=8,bk=8,splitk=1 \
  > "$O/ncu_full.txt" 2>&1
grep -E '^  [a-zA-Z_0-9]+.*\(|SM Frequency|Duration|Registers Per|Shared Memory Config|Dynamic Shared|Block Size|Grid Size|Achieved Occupancy|Theoretical Occupancy|Issue Slots Busy|Issued Warp Per|No Eligible|Active Warps Per|Eligible Warps|Warp Cycles Per Issued|Executed Ipc A|SM Busy|Compute \(SM\) Thr|Memory Through|L1/TEX Hit|L2 Hit|Mem Pipes Busy|Stall|stall|bank|pipe_fma|inst_executed.sum|per_second' "$O/ncu_full.txt" \
  | grep -v '^ *$' | cut -c1-150 > "$O/ncu_summary.txt"
cat "$O/sass_counts.txt" "$O/pytest.txt"; grep -E '^(cublas|ffma|pipelined|variant|  )' "$O/explore/ladder.txt" 2>/dev/null || tail -30 "$O/explore.log"
cat "$O/ncu_summary.txt" | head -150
