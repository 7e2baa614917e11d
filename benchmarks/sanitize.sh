#!/bin/bash
# compute-sanitizer memcheck, racecheck and synccheck on every CUDA ladder kernel (not
# cuBLAS) at an odd shape, through the engine (main.py bench), float32 and int32.
#   bash benchmarks/sanitize.sh [SHAPE]          (default 127x253x61; needs nvcc/CUDA on PATH)
# Prints one line per tool and dtype with the sanitizer's summary; full logs go to
# $OUT/sanitize_<tool>_<dtype>.log (or ./sanitize-logs/). Exits non-zero on any error.
# memcheck runs with verification (a poisoned C, one checked launch + one timed launch);
# racecheck and synccheck run one launch per kernel (--no-verify, no warm-up): racecheck
# is slow.
set -u
cd "$(dirname "$0")/.."
SHAPE=${1:-127x253x61}
LOGS=${OUT:-sanitize-logs}
mkdir -p "$LOGS"
SAN=$(command -v compute-sanitizer || echo "${CUDA_ROOT:-/usr/local/cuda}/bin/compute-sanitizer")
[ -x "$SAN" ] || { echo "compute-sanitizer not found"; exit 2; }
variants() {  # ladder kernels (library lines excluded) that support dtype $1
  python3 -c "
from engine import ladder, registry
print(','.join(n for n in ladder.LADDER if not registry.get(n).library and '$1' in registry.get(n).dtypes))"
}
status=0
for dtype in float32 int32; do
  names=$(variants $dtype)
  dist=uniform; [ $dtype = int32 ] && dist=int
  for tool in memcheck racecheck synccheck; do
    extra=(--no-verify --warmup 0 --repeats 1)
    [ $tool = memcheck ] && extra=(--warmup 0 --repeats 1)
    log="$LOGS/sanitize_${tool}_${dtype}.log"
    t0=$(date +%s)
    "$SAN" --tool $tool --error-exitcode 99 python3 main.py bench --backend cuda --quiet \
        --sizes "$SHAPE" --dtype $dtype --dist $dist --variants "$names" "${extra[@]}" >"$log" 2>&1
    rc=$?
    summary=$(grep -E "(ERROR|RACECHECK) SUMMARY" "$log" | tail -1)
    [ -n "$summary" ] || summary="(no summary line)"
    echo "$tool $dtype $SHAPE: ${summary#========= } rc=$rc ($(( $(date +%s) - t0 )) s; $names)"
    if [ $rc -ne 0 ] || ! grep -qE "SUMMARY: 0 (errors|hazards)" "$log"; then
      status=1
      grep -E "^=========" "$log" | head -20
    fi
  done
done
exit $status
