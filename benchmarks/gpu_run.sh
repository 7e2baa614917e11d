#!/bin/bash
# One device-machine call: GPU tests, then the bench at 1024/2048/4096 for every variant.
# Usage (on the GPU machine, repo root): bash benchmarks/gpu_run.sh [pytest -k expr]
set -o pipefail
OUT=${OUT:-out}; mkdir -p "$OUT"
export PYTHONUNBUFFERED=1
nvidia-smi --query-gpu=name,clocks.sm,clocks.mem,temperature.gpu --format=csv | tee "$OUT/gpu.txt"
python3 -m pytest -q -m gpu tests/ ${1:+-k "$1"} -p no:cacheprovider 2>&1 | tee "$OUT/gpu_tests.log"
python3 main.py bench --backend cuda --sizes 1024,2048,4096 --warmup 3 --repeats 20 \
    --out "$OUT/bench_cuda.json" --quiet 2>&1 | tee "$OUT/bench_cuda.txt"
