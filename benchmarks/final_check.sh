#!/bin/bash
# The closing check on a CUDA machine (kit sourced), in two parts so each fits one call:
#   bash benchmarks/final_check.sh tests    every gpu test + the issue-4 target table
#   bash benchmarks/final_check.sh evidence ncu of the best TF32 kernel vs cuBLAS TF32,
#                                           and compute-sanitizer on every kernel
# Logs go to $OUT (or ./out); the last lines printed are the short tables.
set -o pipefail
cd "$(dirname "$0")/.."
O=${OUT:-out}; mkdir -p "$O"
export PYTHONUNBUFFERED=1
case "${1:-tests}" in
tests)
  nvidia-smi --query-gpu=name,clocks.sm,clocks.max.sm,temperature.gpu --format=csv | tee "$O/gpu.txt"
  timeout 300 python3 -m pytest -q -m gpu tests/ -p no:cacheprovider 2>&1 | tee "$O/gpu_tests.log" | tail -15
  # Best FP32 and TF32 kernels against cuBLAS in one run, every parameter combination.
  timeout 200 python3 benchmarks/ladder.py --variants ffma_regdb,ffma_wide,tf32_wgmma_ws \
      --sizes 1024,1536,1792,2048,4096,8192 --out "$O/targets" > "$O/targets.log" 2>&1
  grep -E 'passed|failed|error' "$O/gpu_tests.log" | tail -3
  cat "$O/targets/ladder.txt" 2>/dev/null || tail -20 "$O/targets.log"
  ;;
evidence)
  timeout 120 ncu --clock-control none -k regex:'matmul|prepass|gemm|xmma|sm90' -c 6 \
    --section SpeedOfLight --section LaunchStats --section Occupancy --section SchedulerStats \
    --section WarpStateStats --section MemoryWorkloadAnalysis \
    --metrics lts__t_bytes.sum.per_second,l1tex__m_xbar2l1tex_read_bytes.sum.per_second,sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active,smsp__inst_executed.sum \
    python3 benchmarks/fp32_v4_ncu.py 4096 cublas_tf32 tf32_wgmma_ws:bn=256,stages=4,cl=1 \
    > "$O/ncu_tf32.txt" 2>&1
  grep -E '^  [a-zA-Z_0-9]+.*\(|Duration|Registers Per|Dynamic Shared|Block Size|Grid Size|Achieved Occupancy|Issue Slots Busy|No Eligible|Compute \(SM\) Thr|Memory Through|L1/TEX Hit|L2 Hit|DRAM Throughput|Stall|lts__t_bytes|xbar2l1tex|tensor_op|inst_executed' \
    "$O/ncu_tf32.txt" | cut -c1-140 > "$O/ncu_tf32_summary.txt"
  timeout 200 bash benchmarks/sanitize.sh 2>&1 | tail -8 | tee "$O/sanitize.txt"
  cat "$O/ncu_tf32_summary.txt" | head -80
  ;;
esac
