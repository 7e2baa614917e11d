#!/bin/bash
# compute-sanitizer memcheck, racecheck and synccheck on every CUDA kernel (seeds and
# ladder; not cuBLAS) at an odd shape, through the engine (main.py bench), float32 and int32.
#   bash benchmarks/sanitize.sh [SHAPE]          (default 127x253x61; needs nvcc/CUDA on PATH)
#   VARIANTS=skinny,ffma_wide bash benchmarks/sanitize.sh     (only those kernels)
#   DTYPES="bfloat16 float8_e4m3 int8" bash benchmarks/sanitize.sh  (the tensor-core rungs: below)
#   TOOLS=racecheck bash benchmarks/sanitize.sh                  (one tool)
#   PARAMS="cluster=2" DTYPES=bfloat16 VARIANTS=half_wgmma_pingpong bash benchmarks/sanitize.sh
#                                       (the tensor-core rungs: only the parameter sets named)
# 16-bit, FP8 and int8 kernels run in both layouts of B at HALF_SHAPES: K not a multiple of 8 or 16
# (17, 9, 253), M and N not multiples of a tile, rows not 16 bytes long (N = 61: the pre-pass
# pads), and 2000x2100x301 where a persistent grid loops (144 tiles of 128 × 256) and
# stream-K shares the last wave's 12 (132 SMs);
# every parameter set; B as K×N with C in 16 bits, B as N×K with C in FP32 (int8: C int32).
# Kernels made for one class of shapes run at an odd shape of their class: skinny (M or N
# <= 64), both streams: through registers at 61x7x1000 and 4300x13x301 (the rows path, 2 and
# 4 rows per lane), 7x253x1001, 16x300x1100 and 17x97x1543 (the columns path: K % 4 != 0,
# full chunks of A by 16-byte copies with split-K, 4-byte ones), through shared memory (N <=
# 64) at 61x7x1000, 1037x13x301, 777x21x129, 129x9x3001, 300x45x999 and 500x30x1000 (each
# tile width, K % 4 != 0, split-K); ffma_regdb at SHAPE and 1300x2600x37 (split-K of a
# last partial wave), its narrow tiles (N <= 64) at 127x61x253, 1000x7x999, 300x20x5000,
# 300x21x5000 and 130x45x999 (each tile width, split-K 1 and 3, B as it lies and padded), its
# warp-row copies of B at 127x253x61, 90x131x4001, 200x255x37 and 1300x4099x37,
# ffma_wide at SHAPE, 300x253x61, 257x301x77, 2300x1999x77 and 256x131x3080 (each copy of B,
# bcopy 0-2, where N % 4 != 0), ffma_small at SHAPE,
# 200x300x1500, 33x7x1001, 40x41x4100 and 33x7x8193 (split-K 2, 16 and 32); tf32_wgmma_rs
# with and without its ping-pong consumers, rowpad 16 and 128, at SHAPE and 2049x2100x36.
# Prints one line per tool and dtype; full logs go to
# $OUT/sanitize_<tool>_<dtype>_<kernel>.log (or ./sanitize-logs/). Exits non-zero on any error.
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
variants() {  # every CUDA kernel of the registry (cuBLAS lines excluded) that supports dtype $1
  python3 -c "
from engine.kernels import registry
only = set(filter(None, '${VARIANTS:-}'.split(',')))
print(','.join(n for n, v in registry.REGISTRY.items()
               if 'cuda' in v.sources and not v.library and '$1' in v.dtypes
               and (not only or n in only)))"
}
HALF_SHAPES=${HALF_SHAPES:-127x61x253,130x131x17,257x129x9,2000x2100x301}
status=0
# One sanitizer process per kernel: a failure names its kernel, and compute-sanitizer's
# memcheck was seen to crash (SIGSEGV at start-up) when one process loaded all ~60
# modules of the ladder, while each kernel on its own ran clean.
for dtype in ${DTYPES:-float32 int32}; do
  names=$(variants $dtype)
  dist=uniform; [ $dtype = int32 ] && dist=int
  half=0; case $dtype in float16|bfloat16|float8_*|int8) half=1 ;; esac
  for tool in ${TOOLS:-memcheck racecheck synccheck}; do
    # a launch under a sanitizer runs ~100x slower than the engine's timeout expects
    extra=(--no-verify --warmup 0 --repeats 1 --launch-timeout 300)
    [ $tool = memcheck ] && extra=(--warmup 0 --repeats 1 --launch-timeout 300)
    t0=$(date +%s); bad=""; count=0
    for name in ${names//,/ }; do
      shape=$SHAPE  # tiled needs multiples of its block (its declared constraint)
      [ "$name" = tiled ] && shape=96x160x64
      # ffma_small: SHAPE (4-byte copies), then 16-byte copies over 24 stages split across 2
      # CTAs, a group's k slice past K, and 16 and 32 CTAs a tile (N % 4 != 0)
      [ "$name" = ffma_small ] && shape=$SHAPE,200x300x1500,33x7x1001,40x41x4100,33x7x8193
      params=()
      # ffma_regdb: every tile (16-64 columns for N <= 64: each width, N = 21 for a padded 20;
      # 128 columns of each height), split-K 1 and 3, each copy of B where N % 4 != 0 (edge
      # column tiles of 125, 3 and 127 columns), C stored both ways with the warp-row copies,
      # split-K of every tile and of a last partial wave's (1300 rows: 441 tiles of 64 rows for
      # 396 slots on 132 SMs; 1300x4099x37 with the warp-row copies)
      [ "$name" = ffma_regdb ] \
          && shape=$SHAPE,1300x2600x37,127x61x253,1000x7x999,300x20x5000,300x21x5000,130x45x999,90x131x4001,200x255x37,1300x4099x37 \
          && params=(--params "splitk=1,3;bcopy=0,1,2;crows=0,1")
      # ffma_wide, each copy of B (N % 4 != 0 at all but SHAPE's aligned N, if it has one):
      # shifted edge column tiles (253, 301, 1999 and 131 columns), the strip (257 rows), the
      # tail split (2300 rows: 144 tiles), split-K, both bk; with the warp-row copies C by rows
      # (K <= 3072) and from the fragments (K = 3080)
      [ "$name" = ffma_wide ] && shape=$SHAPE,300x253x61,257x301x77,2300x1999x77,256x131x3080 \
          && params=(--params "bk=8,16;splitk=1,4;tailk=1,8;bcopy=0,1,2;crows=0,1")
      # skinny: the register stream (stream 0) at its five shapes, the shared-memory stream
      # (stream 1, N <= 64) at the shape's tile of each width (7, 13, 21, 30 and 45 columns:
      # 8, 16, 24, 32 and 64), K % 4 != 0 (4-byte A copies), split-K (129x9x3001), rows past M
      [ "$name" = skinny ] \
          && shape=61x7x1000,4300x13x301,7x253x1001,16x300x1100,17x97x1543,1037x13x301,777x21x129,129x9x3001,300x45x999,500x30x1000 \
          && params=(--params "stream=0,1")
      # tf32_wgmma_rs: its ping-pong consumers next to the shared tiles, rows padded both ways
      # (rowpad 16 and 128: K % 8 != 0 at both shapes), at SHAPE and where a
      # persistent CTA loops over several tiles (2049x2100x36: 297 tiles of 256 x 64)
      [ "$name" = tf32_wgmma_rs ] && shape=$SHAPE,2049x2100x36 \
          && params=(--params "pingpong=0,1;bm=256,128,64;bn=128,64;rowpad=16,128")
      runs=("")  # extra bench flags per sanitizer process
      if [ $half = 1 ]; then
        shape=$HALF_SHAPES
        # Triton's rungs are not CUDA sources of ours; the dispatch lines run these same files
        case $name in triton_*|lab_*) continue ;; esac
        params=()        # every parameter set of the kernel (PARAMS: those it names)
        [ -n "${PARAMS:-}" ] && params=(--params "$PARAMS")
        out=bfloat16 wide=float32
        case $dtype in float16|bfloat16) out=$dtype ;; int8) out=int32 wide=int32 ;; esac
        runs=("--layout kn --out-dtype $out" "--layout nk --out-dtype $wide")
      fi
      for run in "${runs[@]}"; do
        log="$LOGS/sanitize_${tool}_${dtype}_${name}${run// /}.log"
        # shellcheck disable=SC2086
        "$SAN" --tool $tool --error-exitcode 99 python3 main.py bench --backend cuda --quiet \
            --sizes "$shape" --dtype $dtype --dist $dist --variants "$name" "${params[@]}" $run "${extra[@]}" >"$log" 2>&1
        rc=$?
        count=$((count + 1))
        # rc: the sanitizer's 99, or bench's own 1 for a result that failed verification
        if [ $rc -ne 0 ] || ! grep -qE "SUMMARY: 0 (errors|hazards)" "$log"; then
          bad="$bad $name${run// /}(rc=$rc)"
          grep -E "^=========" "$log" | head -20
        fi
      done
    done
    shown=$SHAPE; [ $half = 1 ] && shown=$HALF_SHAPES
    if [ -z "$bad" ]; then
      echo "$tool $dtype $shown: 0 errors in $count kernel runs ($(( $(date +%s) - t0 )) s)"
    else
      status=1
      echo "$tool $dtype $shown: ERRORS in$bad ($(( $(date +%s) - t0 )) s)"
    fi
  done
done
exit $status
