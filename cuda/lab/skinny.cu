/*
+++
name = "skinny"
title = "Skinny GEMM (M or N ≤ 64) as one stream of its large operand: registers, shared memory or many warps"
summary = "With M or N at most 64 a GEMM is a copy of its large operand with a little arithmetic on the way, so what decides it is that the large operand is read exactly once, by 16-byte loads, with enough bytes in flight on every SM to cover DRAM latency; the small operand is staged once per block in shared memory and read from there. The stream is a parameter. stream = 0 keeps the bytes in flight in registers: a rolling prefetch ring of 16-byte loads, each register reloaded with the next chunk right after its last use; it streams B where M <= N (the columns path: M-groups of A staged by cp.async) and A where M > N (the rows path: B staged in a swizzled layout), K split over the warps of a block and, where the grid is short, serially over blocks. stream = 1 keeps them in shared memory: a ring of chunks of A filled by cp.async (or one bulk copy a row on sm_90), B transposed once by a pre-pass so that the lanes of a warp can split K and every 16-byte shared read is a distinct word, a butterfly of shuffles at the end, and split-K across blocks through the workspace where it fills the waves better. stream = 2 is for matrix-vector products (M = 1 or N = 1): 4 accumulators a thread fit 64 registers, so 4 blocks of 256 threads run on each SM and keep the loads in flight between them, and K is split into as many slices as fill one wave of those blocks, the tile's last block adding the slices' sums in slice order. The shape picks the stream: many warps at M = 1 or N = 1, shared memory where A is the large operand and N is 5 to 64 (more FFMAs per byte than the register path's broadcasts of B can feed), registers for N = 2 to 4 and wherever B is the large operand (M <= N). Every reduction runs in a fixed order: the results are deterministic."
source = "cuBLAS gemv and split-K GEMV kernels (one pass over the matrix, K split over threads and reduced in a fixed order); CUTLASS serial split-K; CUTLASS and the CUDA programming guide's multistage cp.async pipelines; operand transposition as a pre-pass; the seeds' effective-bandwidth lesson: a GEMM with M or N small is a copy of its large operand"
role = "rung"
order = 24
dtypes = ["float32", "int32"]
precision = "fp32"

[params]             # the first value of each list is the default
stream = [0, 1, 2]
tile = [16, 32, 8, 24, 64]
unroll = [8, 4]
fill = [2, 1]
stages = [3, 4, 6]

[descriptions]
stream = "how the large operand streams: 0 through registers (a rolling ring of 16-byte loads), 1 through a shared-memory ring of async copies (N ≤ 64), 2 through many small warps (M = 1 or N = 1)"
tile = "the small side's tile: stream 0 caps it at 16 or 32 rows (M ≤ N) or columns (M > N) a block; stream 1 takes 8, 16, 24, 32 or 64 columns of B a block"
unroll = "stream 0: depth of the load rings, 8 the full depth (up to 16 loads of 16 bytes in flight a thread), 4 half of it; stream 2: loads a thread issues before their first use"
fill = "blocks per SM to size for: stream 0 aims grid and split-K at fill x SMs blocks of 8 warps; stream 1 runs fill blocks of 8 / fill warps an SM"
stages = "stream 1: depth of the shared-memory ring in units of 128 k (3, 4 or 6), at most what fits"

[defaults.sm_90]     # H100, H200: stream 1 in 8-warp blocks (benchmarks/NOTES.md, "Bulk copies want a shallow ring")
fill = 1

[derived]
# the shape's stream: shared memory where A is the large operand and N is 5-64, else registers
stream_pick = "1 if M > N and N > 4 and N <= 64 else 0"

# --- stream 0 (registers) ---
cols = "M <= N"      # columns path (B streamed); else the rows path (A streamed)
# columns path: blocks of 32 columns x tile rows of A, the M-group fastest in grid.x
cblocks = "cdiv(M, tile) * cdiv(N, 32)"
# rows path: rtn columns of B per block (N-tiles fastest in grid.x), 4 or 2 rows per lane
rtn = "1 if N == 1 else 4 if N <= 4 else 8 if N <= 8 else 16 if (N <= 16 or tile == 16) else 32"
rnt = "cdiv(N, rtn)"
# rows per lane: 4 below 16 columns, 2 at 32; at 16, 4 where A is tall (each word of B read
# from shared memory then feeds 4 rows, not 2), where its blocks bl4 are >= 66 (a short A
# keeps 2) and fill their waves (one block per SM) within 5% as well as those of 2 rows, bl2,
# do; a grid of one wave or less is split across K anyway. wr4, wr2: wr below at rpw 16 and
# 8 (at rtn >= 16 it is 4 or 8). The kernel tells which from its grid.
tgt = "fill * SMS"
wr4 = "8 if cdiv(M, 128) * rnt * 4 >= 3 * tgt else 4"
wr2 = "8 if cdiv(M, 64) * rnt * 4 >= 3 * tgt else 4"
bl4 = "cdiv(M, 16 * wr4) * rnt"
bl2 = "cdiv(M, 8 * wr2) * rnt"
rr = "4 if rtn < 16 or (rtn == 16 and 2 * bl4 >= SMS and (bl4 <= SMS or 20 * bl4 * cdiv(bl2, SMS) >= 19 * bl2 * cdiv(bl4, SMS))) else 2"
rpw = "4 * rr"                                 # rows per warp: 4 row groups x rr
# warps along rows (the other 8 / wr split K in the block): the most that keep >= 3/4 of tgt
# blocks; at least 4 at rtn >= 16 (bounds a B stage to the shared memory below)
wr = "8 if cdiv(M, 8 * rpw) * rnt * 4 >= 3 * tgt else 4 if (cdiv(M, 4 * rpw) * rnt * 4 >= 3 * tgt or rtn >= 16) else 2 if cdiv(M, 2 * rpw) * rnt * 4 >= 3 * tgt else 1"
r_blocks = "cblocks if cols else cdiv(M, wr * rpw) * rnt"
# serial split-K slices (grid.y): only on grids short of 3/4 of tgt, >= 512 k per slice
r_splits = "1 if (r_blocks * 4 >= 3 * tgt or r_blocks > 1024) else max(1, min((tgt + r_blocks // 2) // r_blocks, K // 512, 32))"

# --- stream 1 (shared memory) ---
warps = "8 // fill"                     # warps per block, each streaming its own rows of A
tn_pick = "8 if N <= 8 else 16 if N <= 16 else 24 if N <= 24 else 32 if N <= 32 else 64"   # the tile that holds N
tl = "8 if tile == 8 else 12 if tile == 24 else 16"   # columns per lane
rw = "16 if tl == 8 else 8"             # rows per warp (and per lane): 128 accumulators a lane (96 at tl = 12)
kl = "32 * tl // tile"                  # k-lanes: the warp's lanes are kl x (tile / tl) column groups
kc = "4 * kl"                           # k per chunk
rb = "warps * rw"                       # rows per block
ntiles = "cdiv(N, tile)"
s_blocks = "cdiv(M, rb) * ntiles"
ldk = "roundup(K, kc)"                  # k per row of the transposed B (zero past K)
np = "ntiles * tile"                    # its rows (zero past N)
chunks = "ldk // kc"
chunk = "4 * kc * (rb + tile)"          # bytes of a chunk: A's rb rows and B's tile rows of kc k
# the ring: stages x 128 k, or as many chunks as fit where fewer do (16 rows a warp at tile 8
# and 8 warps: 3 of 68 KB)
fit = "(227 * 1024) // chunk"
ring = "min(stages * 128 // kc, fit)"
# blocks per SM: 4 warps (<= 255 registers a thread) fit twice where shared memory allows
bps = "min(2 if warps == 4 else 1, (228 * 1024) // (ring * chunk + 1024))"
slots = "bps * SMS"
# split K across blocks (grid.y): the slices s (1-8, 12 or 16; >= 512 k each) that minimise
# waves x (k a slice + 256): a stream is paced per SM, so an SM without a block loses its
# share, and each slice costs about 256 k of filling and draining its ring (fitted on the
# H200 to the best of 1-12 slices: benchmarks/NOTES.md, "Splitting K for whole waves"). At tile 8
# (half the FMAs: closer to DRAM's pace than the SMs') one wave of slices where the grid is
# short, else none.
smax = "max(1, min(16, ldk // 512))"
c1 = "cdiv(s_blocks, slots) * (chunks * kc + 256)"
c2 = "cdiv(2 * s_blocks, slots) * (cdiv(chunks, 2) * kc + 256) if smax >= 2 else c1 + 1"
c3 = "cdiv(3 * s_blocks, slots) * (cdiv(chunks, 3) * kc + 256) if smax >= 3 else c1 + 1"
c4 = "cdiv(4 * s_blocks, slots) * (cdiv(chunks, 4) * kc + 256) if smax >= 4 else c1 + 1"
c5 = "cdiv(5 * s_blocks, slots) * (cdiv(chunks, 5) * kc + 256) if smax >= 5 else c1 + 1"
c6 = "cdiv(6 * s_blocks, slots) * (cdiv(chunks, 6) * kc + 256) if smax >= 6 else c1 + 1"
c7 = "cdiv(7 * s_blocks, slots) * (cdiv(chunks, 7) * kc + 256) if smax >= 7 else c1 + 1"
c8 = "cdiv(8 * s_blocks, slots) * (cdiv(chunks, 8) * kc + 256) if smax >= 8 else c1 + 1"
c12 = "cdiv(12 * s_blocks, slots) * (cdiv(chunks, 12) * kc + 256) if smax >= 12 else c1 + 1"
c16 = "cdiv(16 * s_blocks, slots) * (cdiv(chunks, 16) * kc + 256) if smax >= 16 else c1 + 1"
# the least cost, then the fewest slices: (cost, s) packed in one integer, s < 32
s_best = "min(32 * c1 + 1, 32 * c2 + 2, 32 * c3 + 3, 32 * c4 + 4, 32 * c5 + 5, 32 * c6 + 6, 32 * c7 + 7, 32 * c8 + 8, 32 * c12 + 12, 32 * c16 + 16) % 32"
split_want = "(max(1, min(slots // s_blocks, smax)) if 2 * s_blocks <= slots else 1) if tile == 8 else s_best"
# then as few slices as give every one the same whole chunks, the last maybe fewer (none empty)
s_splits = "cdiv(chunks, cdiv(chunks, split_want))"

# --- stream 2 (many warps; M = 1 or N = 1) ---
# 32-column strips of B (M = 1; 124 columns where N % 4 != 0) or 8-row groups of A (N = 1),
# 256 threads a block; K split into as many slices as keep the grid within one wave of 4
# blocks an SM (>= 128 k a slice): more slices, each block's fix-up and a second wave, cost
# more than the SMs they fill (slicing the rows at N = 1 to end on whole waves was slower:
# benchmarks/NOTES.md)
g_out = "(32 if N % 4 == 0 else 124) if M == 1 else 8"
g_tiles = "cdiv(N, g_out) if M == 1 else cdiv(M, 8)"
g_splits = "max(1, min(cdiv(K, 128), 4 * SMS // g_tiles))"

# --- the launch ---
blocks = "r_blocks if stream == 0 else s_blocks if stream == 1 else g_tiles"
splits = "r_splits if stream == 0 else s_splits if stream == 1 else g_splits"
# stream 0: two stages of its largest instantiation; stream 1: the ring; stream 2: static only
shared_bytes = "8192 * unroll if stream == 0 else ring * chunk if stream == 1 else 0"
# stream 1's split-K: per-block arrival counters (256-byte aligned), then each slice's
# partial (rw * tl / kl outputs a thread, rounded up to 4); stream 0's serial split-K
# keeps its counters in a __device__ array of its own
workspace = "0 if stream == 0 else (0 if s_splits == 1 else roundup(4 * s_blocks, 256) + s_splits * s_blocks * warps * 32 * roundup(rw * tl // kl, 4) * 4) if stream == 1 else (0 if g_splits == 1 else roundup(4 * g_tiles, 256) + g_splits * g_tiles * g_out * 4)"

[chosen]             # the values a run that leaves them to the shape (auto) gets, in this order
stream = "2 if M == 1 or N == 1 else stream_pick"
# stream 1: the tile that holds N; stream 0: 16 (in the H100 and H200 sweeps 32 was ahead
# only within noise at matrix-vector shapes, or where another kernel was faster still)
tile = "tn_pick if stream == 1 else 16"

[[constraints]]
check = "min(M, N) <= 64"
reason = "made for skinny shapes (M or N ≤ 64); use ffma_wide"

[[constraints]]
check = "stream != 1 or N <= 64"
reason = "the shared-memory stream (stream = 1) is for N ≤ 64, A the large operand; use stream = 0"

[[constraints]]
check = "stream != 2 or M == 1 or N == 1"
reason = "the many-warps stream (stream = 2) is for matrix-vector products (M = 1 or N = 1); use stream = 0"

[[constraints]]
check = "stream != 2 or (tile == 16 and fill == 1)"
reason = "tile and fill size the other streams' blocks: the many-warps stream (stream = 2) is built once, at tile = 16, fill = 1"

[[constraints]]
check = "stream == 1 or tile == 16 or tile == 32"
reason = "the register stream (stream = 0) takes tile = 16 or 32"

[[constraints]]
check = "stream != 1 or tile == tn_pick or (ntiles == 2 and (tile == 16 or tile == 32))"
reason = "N = {N} takes {tn_pick}-column tiles (or two of 16 or 32 columns), not {ntiles} of {tile}"

[[constraints]]
check = "stream != 1 or stages == 3 or (4 if stages == 6 else 3) * 128 // kc < fit"
reason = "N = {N} in {tile}-column tiles of {rb} rows: {stages} stages make the ring of {4 if stages == 6 else 3} ({fit} chunks of {chunk // 1024} KB fill the shared memory), built once, at the fewer stages"

[[constraints]]
check = "stream != 1 or unroll == 8"
reason = "unroll sets the register stream's rings (stream = 0) and the many-warps stream's loads (stream = 2): the shared-memory stream is built once, at unroll = 8"

[[constraints]]
check = "stream == 1 or stages == 3"
reason = "stages sets the shared-memory stream's ring (stream = 1): the register stream is built once, at stages = 3"

[launch]
grid = ["blocks", "splits"]
block = ["(8 if cols else 32 * wr) if stream == 0 else 32 * warps if stream == 1 else 256", "(32 if cols else 8 // wr) if stream == 0 else 1"]
shared = "shared_bytes"
workspace = "workspace"

[prepass]            # stream 1: B (K x N) -> S (np x ldk), Bᵀ zero past N and K; 32x32 tiles through shared memory
when = "stream == 1"
entry = "transpose_b"
grid = ["ldk // 32", "cdiv(np, 32)"]
block = [32, 4]
scratch = "4 * np * ldk"
+++
*/
/*
 * skinny.cu -- C (M x N) = A (M x K) . B (K x N), row-major, for the memory-bound regime
 * where M or N is at most 64 (matrix-vector and skinny products). FP32 and int32 (wrapping).
 *
 * Technique: such a product is a copy of its large operand with a little arithmetic on the
 * way (effective bandwidth = (M*K + K*N + M*N) * 4 bytes / time, the seeds' lesson). What
 * decides it is that the large operand is read exactly once, by 16-byte loads, with enough of
 * them in flight on every SM to cover DRAM latency (Little's law: bandwidth x latency bytes in
 * flight, tens of KB per SM). The small operand is staged in shared memory once per block and
 * read from there. A square-ish tile would not do: at M = 1 a 256x128 tile is nearly all
 * padding, and at M = 16 or N = 7 every tile column re-reads the large operand from L2 and
 * starves DRAM of requests; here each element of the large operand is loaded by one thread,
 * once.
 *
 * STREAM picks where the bytes in flight wait (the header's [chosen] picks by shape):
 *   0  in registers: a rolling prefetch ring of 16-byte loads per thread, K split over the
 *      warps of a block and, on short grids, serially over blocks (section "stream 0");
 *   1  in shared memory: a ring of chunks of A filled by asynchronous copies, B transposed by
 *      a pre-pass, the lanes of a warp splitting K (section "stream 1"). A streamed through
 *      registers leaves 8 warps per SM latency-bound and reads B by broadcasts that feed only
 *      a few FMAs each; through shared memory the bytes in flight need no registers and every
 *      shared read is a distinct word, which pays where N is 5-64.
 * Both reduce in a fixed order: the results are deterministic. Tails: any M, N, K.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  element and accumulator types (int32: int, unsigned)         (float)
 *   STREAM     0 registers, 1 shared memory                                   (0)
 *   TILE       the small side's tile: stream 0 16 or 32, stream 1 8-64        (16)
 *   UNROLL     stream 0: 8 or 4, scales the load-ring depths U_*              (8)
 *   FILL       blocks per SM the launch is sized for, 2 or 1: stream 0's header
 *              sizes its grid by it; stream 1 runs 8 / FILL warps a block (WARPS)  (2)
 *   STAGES     stream 1: 3, 4 or 6, the ring in 128-k units (RING)             (3)
 * One signature, matmul(A, B, C, M, N, K, workspace), in each stream's section: stream 1
 * reads the pre-pass's Bᵀ in B's place and keeps its split-K partials in the workspace;
 * stream 0 gets a null workspace. The pre-pass transpose_b is built with either stream (the
 * engine loads it by name) and runs only for stream 1. Needs sm_80 or newer (cp.async; bulk
 * copies on sm_90).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef STREAM
#define STREAM 0
#endif
#ifndef TILE
#define TILE 16
#endif
#ifndef UNROLL
#define UNROLL 8
#endif
#ifndef FILL
#define FILL 2
#endif
#ifndef STAGES
#define STAGES 3
#endif
#if STREAM != 0 && STREAM != 1 && STREAM != 2
#error "STREAM must be 0 (registers), 1 (shared memory) or 2 (many warps, matrix-vector)"
#endif
#define VEC vec4_of<ELEM>::type

/* A compile-time bool for the bodies of chunks (stream 0) and passes (stream 2): full = what
 * is fetched lies wholly in the slice (no bounds checks: rows past M and columns past N read
 * clamped, valid addresses, and their accumulators are never stored); else every load is
 * checked and zero (or left out) outside. */
template <bool F> struct Full { static constexpr bool value = F; };

#if STREAM == 0
/* ==== stream 0: the large operand through registers ========================================
 *
 * Two paths, chosen at run time from the shape (the header's [launch] says the same):
 *
 * Columns path (M <= N; B is the large operand), block (8, 32) = 256 threads:
 *   thread (x, y) owns the 4 columns col0 + 4x of a 32-column strip and k-lane y (K split 32
 *   ways in the block): step u = 4g + j of chunk c reads row kbeg + c*KC + 128g + 4y + j, so a
 *   thread takes its rows in groups of 4 consecutive k. A warp reads 4 rows of B, 128 bytes
 *   each, per 16-byte load (LDG.128; 4 scalar loads, merged in L1, when N % 4 != 0). The
 *   block's M-group of A (TMB = 4, 8, 16 or 32 rows, from the rows left in the group of TILE)
 *   is copied per chunk of KC = 32*U rows into shared memory as it lies, As[m][k], by 16-byte
 *   cp.async (a warp copies 512 contiguous bytes of one row; 4-byte copies when K % 4 != 0,
 *   A's rows then being unaligned), double-buffered, one barrier per chunk. Per group of 4 k:
 *   4 loads of B, TMB LDS.128 of A (4 consecutive k of one row; the warp's 4 k-lanes read 64
 *   contiguous bytes, a broadcast over x), 16*TMB FMAs. B's ring of U registers rolls: each
 *   is reloaded with the next chunk's row right after its last use, so U loads per thread
 *   stay in flight, across the barriers too. End: shuffles add the 4 k-lanes of a warp,
 *   shared memory the 8 warps in a fixed order. Grid.x = ceil(M/TILE) * ceil(N/32), M-group
 *   fastest: the groups of one strip run together and B comes from DRAM once (the other
 *   groups hit L2). A goes as it lies rather than transposed: 16-byte copies are a quarter of
 *   the copy instructions of 4-byte transposing ones, which had kept the LSU queue full.
 *
 * Rows path (M > N; A is the large operand), block (32*WR, 8/WR):
 *   lane = (kl, rg): kl = lane % 8 reads A[m][k + 4kl .. +3] (LDG.128: 8 lanes = one 128-byte
 *   line per row; 4 scalar loads, merged in L1, when K % 4 != 0), rg = lane / 8 one of 4 row
 *   groups; a lane holds R rows (4; 2 at TN = 32, and at TN = 16 unless A is tall: the
 *   header's rr) x TN columns (TN = 1, 4, 8, 16, or 32 at TILE = 32, from N; wider N takes
 *   ceil(N/TN) N-tiles, tile fastest in grid.x so that A's re-reads come from L2). WR warps
 *   along rows, WK = 8/WR along K (interleaved 32-k steps). The chunk of B (WK*32*U rows x
 *   TN) is copied by cp.async (16 bytes when N % 4 == 0) into a swizzled layout
 *   [step][j][q][kl ^ c(j, q)] (k = 32 step + 4 kl + j, n = 4q + e): the 8 k-lanes of a read
 *   hit 8 distinct 16-byte slots (a broadcast over the 4 row groups: one wavefront per
 *   LDS.128) and the copies of a warp land on distinct banks too. Per LDS.128 of B: 4*R FMAs.
 *   A's ring (R*U registers of 16 bytes) rolls like B's above. End: shuffles over the 8
 *   k-lanes, then the WK warps through shared memory in a fixed order. WR: the most of 8, 4,
 *   2, 1 that keeps >= 3/4 of FILL*SMs blocks (>= 4 at TN >= 16).
 *
 * Split-K across blocks (both paths): grid.y = S slices of whole chunks; S > 1 only when the
 * grid has < 3/4 of FILL*SMs blocks (then S ~ FILL*SMs / blocks, <= 32, >= 512 k a slice).
 * Slice 0 stores (C may hold NaN); slice z > 0 waits for tile_counter[tile] == z, adds its part
 * to C (L2 loads and stores) and passes the counter on; the last slice resets it to 0. The
 * slice is grid.y, the slowest-varying index: a waiting block never holds a slot that an
 * earlier slice still needs (blocks are dispatched in increasing linear index).
 *
 * Full chunks and the tail: a chunk that lies wholly in the slice is fetched without bounds
 * checks (rows past M and columns past N read clamped, valid addresses; their accumulators are
 * never stored), and only a slice's last, partial chunk is loaded with checks, without the
 * prefetch: the hot loops stay nearly all FFMA.
 *
 * Register budget: one block of 256 threads per SM, <= 255 registers. At two blocks per SM
 * (<= 128) ptxas spilled in the combined kernel however shallow the rings, so the rings are
 * deep instead: U_* below (16 loads per thread at up to 16 rows, 12 at 16 rows in the int32
 * and sm_80 builds, 4 at 32 rows; rows path R*U = 16, 12 at TN = 16 with 4 rows, 8 at
 * TN = 32), i.e. 32-64 KB per SM in flight from 8 warps. TILE = 32: 32-row M-groups (half of
 * B's L2 re-reads at M = 64) and 32-column rows-path tiles (half of A's at N = 64); TILE = 16:
 * 16-row groups, TN <= 16.
 *
 * Tails: loads past K or the slice are zero (cp.async src-size 0, or no load), loads past M or
 * N are clamped to valid addresses and never stored; stores are guarded. Launch geometry
 * (header): columns path grid (ceil(M/TILE)*ceil(N/32), S), block (8, 32); rows path grid
 * (ceil(M/(WR*4R))*ceil(N/TN), S), block (32*WR, 8/WR). Dynamic shared memory 8192*UNROLL
 * bytes (two stages of the largest instantiation; reused for the reductions).
 */
#if (TILE != 16 && TILE != 32) || (UNROLL != 4 && UNROLL != 8) || FILL < 1
#error "inconsistent parameters"
#endif
#define NT 256
#define MAX_TILES 1024                 /* split-K only on grids of < 3/4 * FILL*SMs blocks */
#define SMEM_WORDS (2048 * UNROLL)    /* = the header's shared bytes / 4: two stages */

/* Ring depths (loads in flight per thread) of each instantiation at UNROLL = 8 (halved at 4):
 * deep where the accumulators are few. One block of 256 threads per SM (<= 255 registers):
 * with 8 warps per SM the rings must hold 32-64 KB per SM in flight on their own. */
#define DEPTH(d) ((d) * UNROLL / 8 > 0 ? (d) * UNROLL / 8 : 1)
#define CDEPTH(d) (DEPTH(d) < 4 ? 4 : DEPTH(d))   /* columns path: groups of 4 k */
#define U_C4 CDEPTH(16)                /* columns path, TMB = 4: 16 accumulators */
#define U_C8 CDEPTH(16)                /*   TMB = 8: 32 */
#define U_C16 (LEAN && UNROLL == 8 ? 12 : CDEPTH(16))   /*   TMB = 16: 64 */
#define U_C32 CDEPTH(4)                /*   TMB = 32: 128 (TILE = 32) */
#define U_R1 DEPTH(4)                  /* rows path, TN = 1, R = 4 (R*U loads in flight) */
#define U_R4 DEPTH(4)                  /*   TN = 4, R = 4 */
#define U_R8 DEPTH(4)                  /*   TN = 8, R = 4 */
#define U_R16 DEPTH(4)                 /*   TN = 16, R = 2 */
#define U_R16T DEPTH(3)                /*   TN = 16, R = 4 (tall A, the header's rr; 4 spilled) */
#define U_R32 DEPTH(2)                 /*   TN = 32, R = 2: 64 accumulators (TILE = 32) */

/* The 16-deep ring at TMB = 16 fits 255 registers without spills only in the FP32 build for
 * sm_90, where it is measurably faster than 12; the int32 build (IMADs) and sm_80's spill
 * with it, none with 12: they take 12 (LEAN; benchmarks/NOTES.md, "skinny's ring depth per build"). */
template <class T> struct IsFloat { static constexpr bool value = false; };
template <> struct IsFloat<float> { static constexpr bool value = true; };
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LEAN (!IsFloat<ELEM>::value)
#else
#define LEAN true
#endif
__device__ unsigned tile_counter[MAX_TILES];     /* split-K order; 0 between launches */


__device__ __forceinline__ VEC vzero()
{
    VEC v;
    v.x = v.y = v.z = v.w = (ELEM)0;
    return v;
}


/* [kbeg, kend) of slice z: whole chunks of kc rows, ceil(chunks / splits) per slice */
__device__ __forceinline__ void slice_range(int K, int kc, int z, int splits, int& kbeg, int& kend)
{
    const long long chunks = ((long long)K + kc - 1) / kc;
    const long long per = (chunks + splits - 1) / splits;
    const long long b = min((long long)K, (long long)z * per * kc);
    kbeg = (int)b;
    kend = (int)min((long long)K, b + per * kc);
}

/* Serial split-K, before touching C: slice z > 0 waits until slice z - 1 has added its part. */
__device__ __forceinline__ void slice_wait(int tile, int z, int tid)
{
    if (z > 0) {
        if (tid == 0) {
            while (*reinterpret_cast<volatile unsigned*>(&tile_counter[tile]) != (unsigned)z)
                __nanosleep(64);
            __threadfence();
        }
        __syncthreads();
    }
}

/* ... and after: pass the tile to slice z + 1 (the last slice resets the counter to 0). */
__device__ __forceinline__ void slice_pass(int tile, int z, int splits, int tid)
{
    if (splits > 1) {
        __threadfence();
        __syncthreads();
        if (tid == 0)
            atomicExch(&tile_counter[tile], z + 1 == splits ? 0u : (unsigned)(z + 1));
    }
}

__device__ __forceinline__ void put(ELEM* c, ACC v, bool add)
{
    if (add)
        v += (ACC)__ldcg(c);
    __stcg(c, (ELEM)v);
}


/* Both paths' pipeline over a slice: full chunks with the staged operand copied one chunk
 * ahead (double buffer, one barrier per chunk; `chunk` rolls the streamed operand's ring on
 * to the next chunk as it goes), then the slice's last, partial chunk, every load
 * bounds-checked, without the prefetch. copy(c, full) stages chunk c of the small operand,
 * fill(c, full) loads chunk c of the large one into the ring. */
template <class Copy, class Fill, class Chunk>
__device__ __forceinline__ void run_chunks(int nchunks, int nfull, Copy copy, Fill fill, Chunk chunk)
{
    if (nfull > 0) {
        copy(0, Full<true>());
        fill(0, Full<true>());
    }
    for (int c = 0; c < nfull; ++c) {
        cp_async_wait<0>();
        __syncthreads();                   /* chunk c is staged; stage (c+1)&1 is free */
        if (c + 1 < nfull) {
            copy(c + 1, Full<true>());
            chunk(c, Full<true>());
        } else {
            chunk(c, Full<false>());
        }
    }
    if (nchunks > nfull) {
        copy(nfull, Full<false>());
        fill(nfull, Full<false>());
        cp_async_wait<0>();
        __syncthreads();
        chunk(nfull, Full<false>());
    }
}

/* ---- columns path: M <= N, B streamed -------------------------------------------------- */

template <int TMB, int U, bool VB>     /* VB: N % 4 == 0, B read by 16-byte loads */
__device__ __forceinline__ void cols_path(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int M, int N, int K, int m0, int col0,
                                          int tile, int z, int splits, unsigned char* smem_raw)
{
    constexpr int KC = 32 * U;                     /* k rows per chunk */
    constexpr int STAGE = TMB * KC;                /* words per stage: As[m][k], unpadded */
    constexpr int QPR = KC / 4;                    /* 16-byte quads per row of a stage */
    constexpr int AQT = TMB * QPR / NT;            /* quads of A per thread per chunk */
    static_assert(U % 4 == 0, "a thread takes its k rows in groups of 4");
    static_assert(TMB * QPR % NT == 0, "A copies must split evenly");
    static_assert(2 * STAGE <= SMEM_WORDS && 8 * TMB * 32 <= SMEM_WORDS, "shared memory");

    ELEM* const As = reinterpret_cast<ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int x = threadIdx.x, y = threadIdx.y;
    const int tid = y * 8 + x;
    const int col = col0 + 4 * x;
    int kbeg, kend;
    slice_range(K, KC, z, splits, kbeg, kend);
    const int span = max(kend - kbeg, 0);          /* k rows of this slice */
    const int nchunks = (span + KC - 1) / KC, nfull = span / KC;
    const bool kvec = (K & 3) == 0;                /* A's rows 16-byte aligned */

    /* A copies: quad e = tid + i*NT of the stage is row e / QPR (past M: row M - 1, never
     * stored), k 4 * (e % QPR) .. +3 of the chunk; a warp copies 512 contiguous bytes */
    auto copy_a = [&](int c, auto full) {
        const int rem = span - c * KC;             /* k rows of this chunk in the slice */
        const unsigned dst0 = sbase + 4u * (unsigned)((c & 1) * STAGE);
#pragma unroll
        for (int i = 0; i < AQT; ++i) {
            const int e = tid + i * NT;
            const int am = e / QPR, kq = 4 * (e % QPR);
            const ELEM* src = A + ((unsigned)min(m0 + am, M - 1) * (unsigned)K
                                   + (unsigned)(kbeg + c * KC + kq));
            const unsigned dst = dst0 + 4u * (unsigned)(am * KC + kq);
            if (kvec) {
                if (decltype(full)::value)
                    cp_async16_full(dst, src);
                else
                    cp_async16(dst, kq < rem ? src : A, kq < rem);
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    if (decltype(full)::value) {
                        cp_async4_full(dst + 4u * j, src + j);
                    } else {
                        const bool in = kq + j < rem;
                        cp_async4(dst + 4u * j, in ? src + j : A, in);
                    }
                }
            }
        }
        cp_async_commit();
    };

    /* B row kbeg + c*KC + 128g + 4y + j of step u = 4g + j, columns col..col+3 (clamped to N:
     * never stored) */
    const unsigned brow0 = (unsigned)(kbeg + 4 * y) * (unsigned)N;
    auto load_b = [&](int c, int u, auto full) -> VEC {
        const int du = 128 * (u >> 2) + (u & 3);
        const int kr = c * KC + du + 4 * y;        /* row within the slice */
        VEC v;
        if (decltype(full)::value || kr < span) {
            const unsigned off = brow0 + (unsigned)(c * KC + du) * (unsigned)N;
            if (VB) {
                v = __ldg(reinterpret_cast<const VEC*>(B + (off + (unsigned)min(col, N - 4))));
            } else {
                v.x = __ldg(B + (off + (unsigned)min(col, N - 1)));
                v.y = __ldg(B + (off + (unsigned)min(col + 1, N - 1)));
                v.z = __ldg(B + (off + (unsigned)min(col + 2, N - 1)));
                v.w = __ldg(B + (off + (unsigned)min(col + 3, N - 1)));
            }
        } else {
            v = vzero();                   /* past the slice: A is zero there too */
        }
        return v;
    };

    ACC acc[TMB][4];
#pragma unroll
    for (int i = 0; i < TMB; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            acc[i][j] = (ACC)0;

    /* U steps of chunk c from stage c&1; with PF, each step's B register is reloaded with
     * chunk c+1's row (a full chunk) right after its last use: the rolling prefetch */
    VEC b[U];
    auto chunk = [&](int c, auto PF) {
        const ELEM* as = As + (c & 1) * STAGE + 4 * y;
#pragma unroll
        for (int g = 0; g < U / 4; ++g) {
            ACC bb[4][4];
#pragma unroll
            for (int j = 0; j < 4; ++j) {
                const VEC bv = b[4 * g + j];
                if (decltype(PF)::value)
                    b[4 * g + j] = load_b(c + 1, 4 * g + j, Full<true>());
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    bb[j][e] = (ACC)vget(bv, e);
            }
#pragma unroll
            for (int m = 0; m < TMB; ++m) {
                const VEC av = *reinterpret_cast<const VEC*>(as + m * KC + 128 * g);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const ACC a = (ACC)vget(av, j);
#pragma unroll
                    for (int e = 0; e < 4; ++e)
                        acc[m][e] += a * bb[j][e];
                }
            }
        }
    };

    /* B's ring filled with chunk c: the first, then the slice's last, partial chunk */
    run_chunks(nchunks, nfull, copy_a, [&](int c, auto full) {
#pragma unroll
        for (int u = 0; u < U; ++u)
            b[u] = load_b(c, u, full);
    }, chunk);

    /* the 4 k-lanes of a warp (lanes x, x+8, x+16, x+24), then the 8 warps in order */
#pragma unroll
    for (int i = 0; i < TMB; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
            acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], 8);
            acc[i][j] += __shfl_xor_sync(0xffffffffu, acc[i][j], 16);
        }
    cp_async_wait<0>();
    __syncthreads();                       /* everyone is done with As */
    ACC* const red = reinterpret_cast<ACC*>(smem_raw);    /* [8 warps][TMB][32] */
    const int w = tid >> 5, lane = tid & 31;
    if (lane < 8) {
#pragma unroll
        for (int i = 0; i < TMB; ++i)
#pragma unroll
            for (int j = 0; j < 4; ++j)
                red[(w * TMB + i) * 32 + 4 * lane + j] = acc[i][j];
    }
    __syncthreads();
    slice_wait(tile, z, tid);
#pragma unroll
    for (int o = tid; o < TMB * 32; o += NT) {
        const int m = o >> 5, cc = o & 31;
        ACC v = red[m * 32 + cc];
#pragma unroll
        for (int ww = 1; ww < 8; ++ww)
            v += red[(ww * TMB + m) * 32 + cc];
        if (m0 + m < M && col0 + cc < N)
            put(C + (size_t)(m0 + m) * N + col0 + cc, v, z > 0);
    }
    slice_pass(tile, z, splits, tid);
}

/* ---- rows path: M > N, A streamed ----------------------------------------------------- */

/* Word of element (k, n) of a B stage, k = 32*s + 4*kl + j within the chunk. TN == 1: k.
 * Else [s][j][q][kl ^ c][4], q = n / 4, c = (QN*j + q) % 8 (2*j % 8 when QN == 1): the 8 kl
 * of one (s, j, q) are 8 distinct 16-byte slots (reads), and the copies of one warp (8, 4, 2
 * or 1 consecutive k by 4*QN columns) land on distinct slots too. */
template <int TN>
__device__ __forceinline__ int bs_word(int k, int n)
{
    if (TN == 1)
        return k;
    constexpr int QN = TN / 4;
    const int s = k >> 5, kl = (k >> 2) & 7, j = k & 3;
    const int q = n >> 2, e = n & 3;
    const int c = (QN == 1 ? 2 * j : QN * j + q) & 7;
    return ((((s * 4 + j) * QN + q) * 8 + (kl ^ c)) << 2) + e;
}

template <int TN, int R, int U, bool KV>   /* KV: K % 4 == 0, A read by 16-byte loads */
__device__ __forceinline__ void rows_path(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int M, int N, int K, int row0, int n0,
                                          int tile, int z, int splits, unsigned char* smem_raw)
{
    constexpr int QN = TN >= 4 ? TN / 4 : 1;
    /* words of one 32-k step in a B stage: 32 k x TN columns (bs_word's layout) */
    constexpr int STEPW = TN == 1 ? 32 : 128 * QN;
    static_assert(32 * R * TN <= SMEM_WORDS, "shared memory");

    ELEM* const Bs = reinterpret_cast<ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int WR = blockDim.x >> 5, WK = blockDim.y;
    const int tid = threadIdx.y * blockDim.x + threadIdx.x;
    const int lane = threadIdx.x & 31, wr = threadIdx.x >> 5, wk = threadIdx.y;
    const int kl = lane & 7, rg = lane >> 3;
    const int KCR = WK * 32 * U;                   /* k rows per chunk (U 32-k steps per warp) */
    constexpr int STAGE = SMEM_WORDS / 2;          /* words per stage (KCR * TN are used) */
    const int RB = WR * 4 * R;                     /* rows per block */
    const bool bvec = TN >= 4 && (N & 3) == 0;
    int kbeg, kend;
    slice_range(K, KCR, z, splits, kbeg, kend);
    const int span = max(kend - kbeg, 0);
    const int nchunks = (span + KCR - 1) / KCR, nfull = span / KCR;

    /* a launch that does not match the header would overflow the stages */
    if (KCR * TN > STAGE || 4u * SMEM_WORDS > dyn_smem_bytes())
        __trap();

    /* the lane's rows row0 + wr*4R + 4r + rg (past M: row M - 1, never stored); its k in
     * chunk c, step u: kbeg + c*KCR + 32*(u*WK + wk) + 4*kl */
    const int mb = row0 + wr * 4 * R + rg;
    unsigned ro[R];
#pragma unroll
    for (int r = 0; r < R; ++r)
        ro[r] = (unsigned)min(mb + 4 * r, M - 1) * (unsigned)K + (unsigned)kbeg;
    const int kl0 = 32 * wk + 4 * kl, ustep = 32 * WK;

    auto copy_b = [&](int c, auto full) {
        const int kc0 = kbeg + c * KCR;
        const int rem = span - c * KCR;            /* rows of this chunk in the slice */
        const unsigned sst = sbase + 4u * (unsigned)((c & 1) * STAGE);
        if (bvec) {
            for (int e = tid; e < KCR * QN; e += NT) {
                const int kk = e / QN, q = e % QN;
                const int n = n0 + 4 * q;
                const bool in = (decltype(full)::value || kk < rem) && n < N;
                cp_async16(sst + 4u * (unsigned)bs_word<TN>(kk, 4 * q),
                           in ? B + (size_t)(kc0 + kk) * N + n : B, in);
            }
        } else {
            for (int e = tid; e < KCR * TN; e += NT) {
                const int kk = e / TN, nn = e % TN;
                const int n = n0 + nn;
                const bool in = (decltype(full)::value || kk < rem) && n < N;
                cp_async4(sst + 4u * (unsigned)bs_word<TN>(kk, nn),
                          in ? B + (size_t)(kc0 + kk) * N + n : B, in);
            }
        }
        cp_async_commit();
    };

    auto load_a = [&](int c, int u, int r, auto full) -> VEC {
        const int kr = c * KCR + u * ustep + kl0;  /* k within the slice */
        const ELEM* p = A + (ro[r] + (unsigned)kr);
        VEC v;
        if (decltype(full)::value) {
            if (KV) {
                v = __ldg(reinterpret_cast<const VEC*>(p));
            } else {
                v.x = __ldg(p); v.y = __ldg(p + 1); v.z = __ldg(p + 2); v.w = __ldg(p + 3);
            }
        } else {
            v = vzero();
            if (kr < span) {
                if (KV) {                          /* span % 4 == 0: whole quad in */
                    v = __ldg(reinterpret_cast<const VEC*>(p));
                } else {
                    v.x = __ldg(p);
                    if (kr + 1 < span) v.y = __ldg(p + 1);
                    if (kr + 2 < span) v.z = __ldg(p + 2);
                    if (kr + 3 < span) v.w = __ldg(p + 3);
                }
            }
        }
        return v;
    };

    ACC acc[R][TN];
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < TN; ++n)
            acc[r][n] = (ACC)0;

    /* U steps of chunk c from stage c&1; with PF, each A register is reloaded with chunk
     * c+1's quad (a full chunk) right after its last use: the rolling prefetch */
    VEC a[U][R];
    auto chunk = [&](int c, auto PF) {
        const ELEM* bs = Bs + (c & 1) * STAGE + wk * STEPW;
#pragma unroll
        for (int u = 0; u < U; ++u) {
            ACC xa[R][4];
#pragma unroll
            for (int r = 0; r < R; ++r) {
                const VEC t = a[u][r];
                if (decltype(PF)::value)
                    a[u][r] = load_a(c + 1, u, r, Full<true>());
#pragma unroll
                for (int j = 0; j < 4; ++j)
                    xa[r][j] = (ACC)vget(t, j);
            }
            const ELEM* bu = bs + u * WK * STEPW;      /* the warp's 32-k step u*WK + wk */
            if (TN == 1) {
                const VEC bv = *reinterpret_cast<const VEC*>(bu + 4 * kl);
#pragma unroll
                for (int j = 0; j < 4; ++j) {
                    const ACC bj = (ACC)vget(bv, j);
#pragma unroll
                    for (int r = 0; r < R; ++r)
                        acc[r][0] += xa[r][j] * bj;
                }
            } else {
#pragma unroll
                for (int j = 0; j < 4; ++j)
#pragma unroll
                    for (int q = 0; q < QN; ++q) {
                        const int cc = (QN == 1 ? 2 * j : QN * j + q) & 7;
                        const VEC bv = *reinterpret_cast<const VEC*>(
                            bu + (((j * QN + q) * 8 + (kl ^ cc)) << 2));
#pragma unroll
                        for (int e = 0; e < 4; ++e) {
                            const ACC be = (ACC)vget(bv, e);
#pragma unroll
                            for (int r = 0; r < R; ++r)
                                acc[r][4 * q + e] += xa[r][j] * be;
                        }
                    }
            }
        }
    };

    /* A's ring filled with chunk c: the first, then the slice's last, partial chunk */
    run_chunks(nchunks, nfull, copy_b, [&](int c, auto full) {
#pragma unroll
        for (int u = 0; u < U; ++u)
#pragma unroll
            for (int r = 0; r < R; ++r)
                a[u][r] = load_a(c, u, r, full);
    }, chunk);

    /* the 8 k-lanes of a row group (lane bits 0-2), then the WK warps in order */
#pragma unroll
    for (int r = 0; r < R; ++r)
#pragma unroll
        for (int n = 0; n < TN; ++n) {
            acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], 1);
            acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], 2);
            acc[r][n] += __shfl_xor_sync(0xffffffffu, acc[r][n], 4);
        }
    cp_async_wait<0>();
    __syncthreads();                       /* everyone is done with Bs */
    ACC* const red = reinterpret_cast<ACC*>(smem_raw);    /* [WK][RB][TN] */
    if (kl == 0) {
#pragma unroll
        for (int r = 0; r < R; ++r)
#pragma unroll
            for (int n = 0; n < TN; ++n)
                red[(wk * RB + wr * 4 * R + 4 * r + rg) * TN + n] = acc[r][n];
    }
    __syncthreads();
    slice_wait(tile, z, tid);
    for (int o = tid; o < RB * TN; o += NT) {
        const int row = o / TN, n = o % TN;
        ACC v = red[o];
        for (int ww = 1; ww < WK; ++ww)
            v += red[ww * RB * TN + o];
        if (row0 + row < M && n0 + n < N)
            put(C + (size_t)(row0 + row) * N + n0 + n, v, z > 0);
    }
    slice_pass(tile, z, splits, tid);
}

/* ---- entry -------------------------------------------------------------------------------- */

template <int TMB, int U>
__device__ __forceinline__ void cols(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                     ELEM* __restrict__ C, int M, int N, int K, int m0, int col0,
                                     int tile, int z, int splits, unsigned char* smem_raw)
{
    if ((N & 3) == 0)
        cols_path<TMB, U, true>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
    else
        cols_path<TMB, U, false>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
}

template <int TN, int R, int U>
__device__ __forceinline__ void rows(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                     ELEM* __restrict__ C, int M, int N, int K, int row0, int n0,
                                     int tile, int z, int splits, unsigned char* smem_raw)
{
    if ((K & 3) == 0)
        rows_path<TN, R, U, true>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
    else
        rows_path<TN, R, U, false>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
}

/* 16 columns: 4 rows per lane where A is tall (the header's rr), else 2 */
__device__ __forceinline__ void rows16(bool tall, const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                       ELEM* __restrict__ C, int M, int N, int K, int row0, int n0,
                                       int tile, int z, int splits, unsigned char* smem_raw)
{
    if (tall)
        rows<16, 4, U_R16T>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
    else
        rows<16, 2, U_R16>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
}

/* The entry (the same signature in both streams). B: B itself here; workspace: none (null),
 * the serial split-K keeps its counters in tile_counter. */
extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    (void)workspace;
    const int splits = gridDim.y, z = blockIdx.y;
    const int tile = blockIdx.x;
    if (splits > 1 && tile >= MAX_TILES)
        __trap();                          /* the header never splits a grid this wide */
    if (M <= N) {
        /* columns path: block (8, 32); grid.x = M-groups (fastest) x 32-column strips */
        if (blockDim.x != 8 || blockDim.y != 32)
            __trap();
        const int mg = (M + TILE - 1) / TILE;
        const int g = blockIdx.x % mg, cb = blockIdx.x / mg;
        const int m0 = g * TILE, col0 = cb * 32;
        const int rows = min(TILE, M - m0);
        if (rows <= 4)
            cols<4, U_C4>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
        else if (rows <= 8)
            cols<8, U_C8>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
#if TILE >= 32
        else if (rows <= 16)
            cols<16, U_C16>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
        else
            cols<32, U_C32>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
#else
        else
            cols<16, U_C16>(A, B, C, M, N, K, m0, col0, tile, z, splits, smem_raw);
#endif
    } else {
        /* rows path: block (32*WR, 8/WR); grid.x = row blocks x N-tiles (fastest) */
        if (blockDim.x * blockDim.y != NT || (blockDim.x & 31))
            __trap();
        const int tn = N == 1 ? 1 : N <= 4 ? 4 : N <= 8 ? 8 : (N <= 16 || TILE < 32) ? 16 : 32;
        const int nt = (N + tn - 1) / tn;
        /* the header's rr (4 rows per lane at 16 columns where A is tall), read from the grid:
         * ceil(M / (WR*4*rr)) row blocks per N-tile (where both counts agree, both cover M) */
        const int wr = blockDim.x >> 5;
        const int g4 = (M + 16 * wr - 1) / (16 * wr) * nt, g2 = (M + 8 * wr - 1) / (8 * wr) * nt;
        const bool tall = tn == 16 && (int)gridDim.x == g4 && g4 != g2;
        if ((int)gridDim.x != (tn < 16 ? g4 : tall ? g4 : g2))
            __trap();                      /* a launch that does not match the header */
        const int r = tn < 16 || tall ? 4 : 2;
        const int nti = blockIdx.x % nt, rb = blockIdx.x / nt;
        const int row0 = rb * (wr * 4 * r), n0 = nti * tn;
        switch (tn) {
        case 1:
            rows<1, 4, U_R1>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
        case 4:
            rows<4, 4, U_R4>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
        case 8:
            rows<8, 4, U_R8>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
#if TILE >= 32
        case 16:
            rows16(tall, A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
        default:
            rows<32, 2, U_R32>(A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
#else
        default:
            rows16(tall, A, B, C, M, N, K, row0, n0, tile, z, splits, smem_raw);
            break;
#endif
        }
    }
}

#endif /* STREAM == 0 */

/* ==== stream 1: the large operand (A, N <= 64) through shared memory =======================
 *
 *  - A goes to shared memory asynchronously, in a ring of chunks of KC k (STAGES x 128 k in
 *    all): the bytes in flight need no registers, and a block holds (ring - 1) chunks of its
 *    RB rows in flight. Each warp copies its own RW rows: on sm_90 at TN <= 16, a whole chunk
 *    is one cp.async.bulk a row (512 bytes) completing on the slot's mbarrier; else (and for a
 *    chunk cut by K, and where K % 4 != 0, A's rows then being unaligned) cp.async of 16 bytes
 *    (4 where K % 4 != 0), zero past K and M. B's chunk is copied by the whole block
 *    (cp.async), one barrier a chunk.
 *  - The pre-pass writes Bᵀ (np rows of ldk = roundup(K, KC) k, zero past N and past K) to
 *    the scratch buffer, so that B's chunk is TN rows of 4 KC contiguous bytes (16-byte
 *    copies, no bounds: the zeros are there) and k-lane kl reads the same 4 k, 4 kl .. +3, of
 *    A's rows and of Bᵀ's: one LDS.128 a lane, KL distinct 16-byte words a warp (4 wavefronts,
 *    no conflicts). Reading B in place instead would save the pre-pass but take 4-byte copies
 *    wherever N % 4 != 0.
 *  - The warp's 32 lanes are KL k-lanes x NL column groups (32 x 1 up to 16 columns, 16 x 2
 *    at 24 and 32, 8 x 4 at 64); lane (kl, nl) holds RW rows x TL columns (16 x 8 at TN = 8,
 *    8 x 12 at 24, else 8 x 16: 128 accumulators, 96 at 24). Per chunk RW + TL LDS.128 and
 *    4 RW TL FMAs: the smaller of the two operands' 4-vectors is held (A's RW at TL >= 12,
 *    B's TL at TL = 8), the other streamed. The 24-column tile is for N = 17-24, where 32
 *    columns would compute up to 15 empty ones. At TN = 32, column groups rather than two
 *    16-column tiles: B's chunk per row of the block halves.
 *  - At the end the KL k-lanes' partial sums are added by a butterfly (shuffles at distances
 *    KL / 2 .. 1, each halving what a lane holds): lane (kl, nl) is left with V = RW TL / KL
 *    consecutive outputs, V kl .. V kl + V - 1 of its group's RW x TL (row-major): 16-byte
 *    stores (V = 6 at TN = 24: 4-byte ones).
 *  - Split-K across blocks (grid.y, the header's splits: the slice count of least waves x (k a
 *    slice + 256), a model of a stream paced per SM): each slice's V outputs a thread (padded
 *    to whole 4-vectors) go to the workspace; the block that arrives last sums them in slice
 *    order (lab_ptx.cuh's splitk_fixup: deterministic).
 *
 * Tails: rows past M are not read (src-size 0, or no bulk copy; their accumulators are never
 * stored: copying row M - 1 into them instead made one block's spare rows all read the same
 * bytes, a hot spot); k past K is zero in A's chunk (cp.async src-size 0) and in Bᵀ (the
 * pre-pass); columns past N are Bᵀ's zero rows, never stored. Any M, N <= 64 (two tiles past
 * that: the constraints), K.
 *
 * Launch (header): grid (ceil(M / RB) * ceil(N / TN), splits), block (32 WARPS); dynamic shared
 * memory RING * 4 * KC * (RB + TN) bytes (static: the ring's mbarriers). Pre-pass
 * transpose_b(A, B, S, M, N, K): grid (ldk / 32, ceil(np / 32)), block (32, 4); then
 * matmul(A, S, C, M, N, K, workspace).
 *
 * The lanes (TILE alone decides them) come first, outside STREAM == 1: the pre-pass pads Bᵀ
 * to them, and every build holds the pre-pass.
 */
#define TN TILE                         /* columns of B per block */
#define TL (TN == 8 ? 8 : TN == 24 ? 12 : 16)   /* columns per lane */
#define RW (TL == 8 ? 16 : 8)           /* rows per warp (and per lane): 128 accumulators (96 at TL = 12) */
#define NL (TN / TL)                    /* column groups of a warp: 1, 1, 2, 2, 4 */
#define KL (32 / NL)                    /* k-lanes: 32, 32, 16, 16, 8 */
#define KC (4 * KL)                     /* k per chunk */
#define V (RW * TL / KL)                /* outputs a lane holds after the butterfly: 4, 4, 6, 8, 16 */
#define VP ((V + 3) / 4 * 4)            /* ... in whole 4-vectors (split-K's partials) */

/* ------------------------------------------------------------------------------------------ */
/* Pre-pass: S = Bᵀ, np = ceil(N / TN) * TN rows of ldk = roundup(K, KC), zero past N and K
 * (lab_ptx.cuh's transpose_tile32, a 32 x 32 tile a block). */
extern "C" __global__ __launch_bounds__(128)
void transpose_b(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
                 int M, int N, int K)
{
    (void)A; (void)M;
    transpose_tile32<4>(B, S, N, K, (N + TN - 1) / TN * TN, (K + KC - 1) / KC * KC, blockIdx.x * 32,
                        blockIdx.y * 32);
}

#if STREAM == 1
#if (TN != 8 && TN != 16 && TN != 24 && TN != 32 && TN != 64) || (FILL != 1 && FILL != 2) || STAGES < 2
#error "inconsistent parameters"
#endif
#define WARPS (8 / FILL)                /* warps per block: FILL blocks of 8 warps' worth per SM */
#define RB (WARPS * RW)                 /* rows per block */
#define NT (32 * WARPS)
#define A_WORDS (RB * KC)
#define STAGE_WORDS ((RB + TN) * KC)
#define FIT ((227 * 1024) / (4 * STAGE_WORDS))
/* chunks in the ring: STAGES x 128 k whatever KC, or as many as fit (the header's ring) */
#define RING (STAGES * 128 / KC < FIT ? STAGES * 128 / KC : FIT)
/* A's whole chunks by bulk copies (sm_90+, tn <= 16: rows of 512 bytes, a ring of 2-3
 * chunks): one cp.async.bulk a row into an mbarrier, no L1 request a 16-byte piece. With a
 * deeper ring the bulk copies held up the warps that issue them, and rows of 256 or 128 bytes
 * (TN = 32, 64) were slower by bulk copies: those keep cp.async (benchmarks/NOTES.md, "Bulk
 * copies want a shallow ring"). */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define BULK_A (TN <= 16 && RING <= 3)
#else
#define BULK_A 0
#endif
/* ------------------------------------------------------------------------------------------ */
/* One chunk (KC k from kc) into ring slot `st`: the warp's RW rows of A, KL 16-byte pieces a
 * row, piece q = lane + 32 i of the warp's (row q / KL, k 4 (q % KL)) where K % 4 == 0, zero
 * past K and past M (src-size 0: rows past M are not read); else 4-byte copies, element e =
 * lane + 32 j; and, shared by the block, Bᵀ's TN rows (always whole: the pre-pass padded
 * them). */
__device__ __forceinline__ void load_chunk(unsigned sbase, int st, int kc, const ELEM* __restrict__ A,
                                           const ELEM* __restrict__ S, int M, int K, int ldk,
                                           int mw, int n0, bool kvec, int warp, int lane, int tid,
                                           unsigned long long* full_bar)
{
    (void)full_bar;
    const unsigned sa = sbase + 4u * (unsigned)(st * STAGE_WORDS + warp * RW * KC);
#if BULK_A
    if (kvec && kc + KC <= K) {                      /* a whole chunk: one bulk copy a row < M */
        const unsigned bar = (unsigned)__cvta_generic_to_shared(&full_bar[st]);
        if (tid == 0)                                /* the block's rows < M, whole */
            mbar_arrive_expect_tx(bar, (unsigned)(min(RB, M - (mw - warp * RW)) * KC * 4));
        if (lane < RW && mw + lane < M)
            bulk_load(sa + 4u * (unsigned)(lane * KC), A + (size_t)(mw + lane) * K + kc, KC * 4, bar);
    } else
#endif
    if (kvec) {
#pragma unroll
        for (int i = 0; i < RW * KL / 32; ++i) {
            const int q = lane + 32 * i, r = q / KL, k = kc + 4 * (q % KL), m = mw + r;
            const bool in = k < K && m < M;          /* K % 4 == 0: the whole 4 k are in or out */
            cp_async16(sa + 4u * (unsigned)(4 * q), A + (in ? (size_t)m * K + k : 0), in);
        }
    } else {
#pragma unroll
        for (int j = 0; j < RW * KC / 32; ++j) {
            const int e = lane + 32 * j, r = e / KC, k = kc + e % KC, m = mw + r;
            const bool in = k < K && m < M;
            cp_async4(sa + 4u * (unsigned)e, A + (in ? (size_t)m * K + k : 0), in);
        }
    }
    const unsigned sb = sbase + 4u * (unsigned)(st * STAGE_WORDS + A_WORDS);
#pragma unroll
    for (int i = 0; i < (TN * KL + NT - 1) / NT; ++i) {   /* TN rows x KL 16-byte pieces */
        const int q = tid + i * NT, n = q / KL, p = q % KL;
        if ((TN * KL) % NT != 0 && q >= TN * KL)
            break;
        cp_async16_full(sb + 4u * (unsigned)(n * KC + 4 * p), S + (size_t)(n0 + n) * ldk + kc + 4 * p);
    }
}

/* acc[r][n] += A[r][k..k+3] . Bᵀ[n][k..k+3] for the lane's 4 k of one chunk. */
__device__ __forceinline__ void fma4(ACC& acc, const VEC& a, const VEC& b)
{
    acc += (ACC)a.x * (ACC)b.x;
    acc += (ACC)a.y * (ACC)b.y;
    acc += (ACC)a.z * (ACC)b.z;
    acc += (ACC)a.w * (ACC)b.w;
}

/* as: the warp's RW rows of A in the slot, bs: the lane's TL rows of Bᵀ, kl: its k-lane. */
__device__ __forceinline__ void compute_chunk(ACC (&acc)[RW * TL], const ELEM* as, const ELEM* bs, int kl)
{
    if constexpr (TL >= RW) {                        /* hold A's RW vectors, stream Bᵀ's */
        VEC a[RW];
#pragma unroll
        for (int r = 0; r < RW; ++r)
            a[r] = *reinterpret_cast<const VEC*>(as + r * KC + 4 * kl);
#pragma unroll
        for (int n = 0; n < TL; ++n) {
            const VEC b = *reinterpret_cast<const VEC*>(bs + n * KC + 4 * kl);
#pragma unroll
            for (int r = 0; r < RW; ++r)
                fma4(acc[r * TL + n], a[r], b);
        }
    } else {                                         /* hold Bᵀ's TL vectors, stream A's */
        VEC b[TL];
#pragma unroll
        for (int n = 0; n < TL; ++n)
            b[n] = *reinterpret_cast<const VEC*>(bs + n * KC + 4 * kl);
#pragma unroll
        for (int r = 0; r < RW; ++r) {
            const VEC a = *reinterpret_cast<const VEC*>(as + r * KC + 4 * kl);
#pragma unroll
            for (int n = 0; n < TL; ++n)
                fma4(acc[r * TL + n], a, b[n]);
        }
    }
}

/* One level of the butterfly at distance D (a k-lane bit): acc[0, 2 D V) holds the lane's
 * share on entry, of which it keeps the upper half where its bit D is set (else the lower),
 * sends the other half to lane ^ D and adds what comes back: acc[0, D V) on exit. One
 * template per level: written as one loop over the levels, the compiler left it rolled and
 * put acc in local memory. */
template <int D>
__device__ __forceinline__ void butterfly(ACC (&acc)[RW * TL], int lane)
{
    const bool up = (lane & D) != 0;
#pragma unroll
    for (int i = 0; i < D * V; ++i) {
        const ACC send = up ? acc[i] : acc[i + D * V];
        const ACC keep = up ? acc[i + D * V] : acc[i];
        acc[i] = keep + __shfl_xor_sync(0xffffffffu, send, D);
    }
}

/* The entry (the same signature in both streams). S: the pre-pass's Bᵀ in B's place;
 * workspace: split-K's counters and partials (null where K is not split). */
extern "C" __global__ __launch_bounds__(NT, 1)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ S, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    extern __shared__ __align__(16) unsigned char smem_raw[];
    /* a launch that does not match the header would overflow the ring */
    if (blockDim.x != NT || 4u * RING * STAGE_WORDS > dyn_smem_bytes())
        __trap();
    const ELEM* const sm = reinterpret_cast<const ELEM*>(smem_raw);
    const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem_raw);
    const int tid = threadIdx.x, warp = tid >> 5, lane = tid & 31;
    const int kl = lane % KL, nl = lane / KL;
    const int ntiles = (N + TN - 1) / TN;
    const int nt = blockIdx.x % ntiles, mb = blockIdx.x / ntiles;   /* N-tiles fastest: A's re-read hits L2 */
    const int m0 = mb * RB, n0 = nt * TN, mw = m0 + warp * RW;
    const int ldk = (K + KC - 1) / KC * KC;
    const bool kvec = (K & 3) == 0;

    /* this slice's chunks [c0, c1) */
    const int chunks = ldk / KC, splits = gridDim.y, z = blockIdx.y;
    const int per = (chunks + splits - 1) / splits;
    const int c0 = min(chunks, z * per), c1 = min(chunks, c0 + per);

    /* the ring slots' barriers for bulk copies (one arrival: thread 0's expect_tx) */
    __shared__ __align__(8) unsigned long long full_bar[RING];
#if BULK_A
    if (tid < RING)
        mbar_init((unsigned)__cvta_generic_to_shared(&full_bar[tid]), 1);
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    __syncthreads();
#endif

    ACC acc[RW * TL];
#pragma unroll
    for (int i = 0; i < RW * TL; ++i)
        acc[i] = (ACC)0;

#pragma unroll 1
    for (int s = 0; s < RING - 1; ++s) {
        if (c0 + s < c1)
            load_chunk(sbase, s, (c0 + s) * KC, A, S, M, K, ldk, mw, n0, kvec, warp, lane, tid, full_bar);
        cp_async_commit();
    }
    int st = 0;                                      /* ring slot of chunk c */
    for (int c = c0; c < c1; ++c) {
        cp_async_wait<RING - 2>();                   /* chunk c has landed (this thread's copies) */
#if BULK_A
        if (kvec && c * KC + KC <= K)                /* ... and its bulk copies: the slot's n-th fill */
            mbar_wait((unsigned)__cvta_generic_to_shared(&full_bar[st]), (unsigned)(((c - c0) / RING) & 1));
#endif
        __syncthreads();                             /* ... everyone's; and slot st - 1 is free */
        const int cn = c + RING - 1;
        if (cn < c1)
            load_chunk(sbase, st == 0 ? RING - 1 : st - 1, cn * KC, A, S, M, K, ldk, mw, n0, kvec,
                       warp, lane, tid, full_bar);
        cp_async_commit();
        compute_chunk(acc, sm + st * STAGE_WORDS + warp * RW * KC,
                      sm + st * STAGE_WORDS + A_WORDS + nl * TL * KC, kl);
        st = st + 1 == RING ? 0 : st + 1;
    }
    cp_async_wait<0>();

    /* Butterfly over the KL k-lanes (distances KL / 2 .. 1): lane (kl, nl) ends with outputs
     * V kl .. V kl + V - 1 of its column group's RW x TL (row-major), each the sum of all KL
     * k-lanes in a fixed order. */
    if constexpr (KL == 32) butterfly<16>(acc, lane);
    if constexpr (KL >= 16) butterfly<8>(acc, lane);
    butterfly<4>(acc, lane);
    butterfly<2>(acc, lane);
    butterfly<1>(acc, lane);
    ACC out[VP];
#pragma unroll
    for (int e = 0; e < VP; ++e)
        out[e] = e < V ? acc[e] : (ACC)0;

    if (splits > 1 && !splitk_fixup<VP, NT, 1>(out, workspace, gridDim.x, blockIdx.x, splits, z, tid))
        return;

    const int r = (V * kl) / TL, c = (V * kl) % TL;
    const int m = mw + r, n = n0 + nl * TL + c;
    if (m >= M)
        return;
    ELEM* dst = C + (size_t)m * N + n;
    if constexpr (V % 4 != 0) {                      /* TL = 12: 6 columns from 0 or 6 of the group */
#pragma unroll
        for (int e = 0; e < V; ++e)
            if (n + e < N)
                dst[e] = (ELEM)out[e];
    } else {
#pragma unroll
        for (int q = 0; q < V / 4; ++q) {
            if ((N & 3) == 0 && n + 4 * q < N) {     /* N % 4 == 0: the 4 columns are in */
                VEC o;
                o.x = (ELEM)out[4 * q]; o.y = (ELEM)out[4 * q + 1]; o.z = (ELEM)out[4 * q + 2]; o.w = (ELEM)out[4 * q + 3];
                *reinterpret_cast<VEC*>(dst + 4 * q) = o;
            } else {
#pragma unroll
                for (int e = 0; e < 4; ++e)
                    if (n + 4 * q + e < N)
                        dst[4 * q + e] = (ELEM)out[4 * q + e];
            }
        }
    }
}
#endif /* STREAM == 1 */


#if STREAM == 2
/* ==== stream 2: matrix-vector products, the bytes in flight held by many warps ============
 *
 * At M = 1 or N = 1 there is one output per column (or row) of the large operand, so a
 * thread needs 4 accumulators, not 64-128: the kernel fits 64 registers and 4 or more blocks
 * of 256 threads run on each SM. The loads in flight then come from many warps (UNROLL
 * 16-byte loads each, issued before their first use) instead of one block's deep ring, and
 * the grid is sized in whole waves of such blocks by splitting K: stream 0's one block per
 * SM leaves SMs without work where the columns (rows) give fewer blocks than SMs.
 *
 * Columns path (M = 1; B streamed), block 256 over a 32-column strip: N % 4 == 0, 8 column
 * threads (4 columns each) x 32 k-lanes, a warp reads 4 rows of B, 128 bytes each, per
 * 16-byte load; N % 4 != 0, a 124-column strip, a warp reads one row's 512 bytes from the
 * 16-byte word its strip starts in (strip_shifted). The vector A goes through L1 (every
 * block reads it).
 * Rows path (N = 1; A streamed), block 256 = 8 warps, one row each: a warp reads 512
 * contiguous bytes of its row per load (128 bytes by scalar loads when K % 4 != 0) and the
 * vector B through L1.
 * Grid (tiles, S): tiles = ceil(N / 32) (ceil(N / 124)) strips or ceil(M / 8) row groups, S slices of K (the
 * header's rule: the most that keep the grid within one wave of 4 blocks an SM, >= 128 k a
 * slice). A block sums its k-lanes in a fixed order (shuffles, then its 8 warps through
 * shared memory); with S > 1 each block writes its 32 (8) sums to the workspace, and the
 * block of a tile that arrives last adds the S partials in slice order and stores them:
 * deterministic, and no block ever waits for another.
 */
#if UNROLL != 4 && UNROLL != 8
#error "inconsistent parameters"
#endif
#define NT 256

/* The tile's OUT sums (thread tid < OUT holds output out0 + tid of C, stored where < count):
 * stored at once without split-K, else through the workspace (counters, then partials
 * [slice][tile][OUT]) by the tile's last block, summed in slice order. */
template <int OUT>
__device__ __forceinline__ void finish(ACC v, ELEM* __restrict__ C, int out0, int count,
                                       unsigned char* __restrict__ workspace, int tid)
{
    const int tiles = gridDim.x, tile = blockIdx.x, splits = gridDim.y, z = blockIdx.y;
    if (splits > 1) {
        __shared__ bool last;
        ACC* const part = reinterpret_cast<ACC*>(partials_after_counters(workspace, tiles));
        unsigned* const counter = reinterpret_cast<unsigned*>(workspace) + tile;
        if (tid < OUT)
            __stcg(&part[((size_t)z * tiles + tile) * OUT + tid], v);
        __threadfence();                          /* the partial is visible before the count */
        __syncthreads();
        if (tid == 0) {
            const unsigned before = atomicAdd(counter, 1u);
            last = before == (unsigned)splits - 1u;
            if (last)
                *counter = 0u;                    /* ready for the next launch */
        }
        __syncthreads();
        if (!last)
            return;
        __threadfence();                          /* the others' partials before reading them */
        if (tid < OUT) {
            /* 16 slices' loads in flight, then added in slice order (adding 0 past the last
               leaves the sum as it is): one L2 round trip per 16 slices, not per 4 */
            v = (ACC)0;
#pragma unroll 1
            for (int s0 = 0; s0 < splits; s0 += 16) {
                ACC x[16];
#pragma unroll
                for (int i = 0; i < 16; ++i)
                    x[i] = s0 + i < splits ? __ldcg(&part[((size_t)(s0 + i) * tiles + tile) * OUT + tid]) : (ACC)0;
#pragma unroll
                for (int i = 0; i < 16; ++i)
                    v += x[i];
            }
        }
    }
    if (tid < OUT && out0 + tid < count)
        C[out0 + tid] = (ELEM)v;
}

/* [kbeg, kend) of slice z: ceil(K / splits) rounded up to `align` k a slice */
__device__ __forceinline__ void gemv_slice(int K, int align, int& kbeg, int& kend)
{
    const int per = ((K + gridDim.y - 1) / gridDim.y + align - 1) / align * align;
    kbeg = min(K, (int)blockIdx.y * per);
    kend = min(K, kbeg + per);
}


/* pass(base, Full<true>()) for each whole STEP of [beg, end), then pass(base, Full<false>())
 * once over what is left: the last pass is predicated, not a serial tail of single rows. */
template <int STEP, typename Pass>
__device__ __forceinline__ void whole_passes_then_rest(int beg, int end, Pass pass)
{
    int base = beg;
#pragma unroll 1
    for (; base + STEP <= end; base += STEP)
        pass(base, Full<true>());
    if (base < end)
        pass(base, Full<false>());
}

/* The 8 warps' sums of 32 outputs (red[warp][out]) added in warp order; thread tid < 32
 * returns output tid. */
__device__ __forceinline__ ACC add_warps(const ACC (&red)[8][32], int tid)
{
    __syncthreads();
    ACC v = (ACC)0;
    if (tid < 32) {
#pragma unroll
        for (int w = 0; w < 8; ++w)
            v += red[w][tid];
    }
    return v;
}

/* M = 1, N % 4 == 0: thread x = tid % 8 holds columns 4x..4x+3 of the strip for k-lane
 * y = tid / 8 (rows kbeg + y, + 32, ...), UNROLL 16-byte loads of B issued before their
 * first use; the last pass of the slice predicated (not a serial tail of single rows). */
__device__ __forceinline__ ACC strip_vec(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                         int N, int col0, int kbeg, int kend, ACC (&red)[8][32], int tid)
{
    const int x = tid & 7, y = tid >> 3;
    const int col = min(col0 + 4 * x, N - 4);     /* past N: a valid address, never stored */
    ACC a0 = (ACC)0, a1 = (ACC)0, a2 = (ACC)0, a3 = (ACC)0;
    auto pass = [&](int base, auto full) {
        VEC b[UNROLL];
        ELEM a[UNROLL];
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            const int k = decltype(full)::value ? base + y + 32 * u : min(base + y + 32 * u, kend - 1);
            b[u] = __ldg(reinterpret_cast<const VEC*>(B + (size_t)k * N + col));
            a[u] = __ldg(A + k);
        }
#pragma unroll
        for (int u = 0; u < UNROLL; ++u) {
            if (decltype(full)::value || base + y + 32 * u < kend) {
                a0 += (ACC)a[u] * (ACC)b[u].x; a1 += (ACC)a[u] * (ACC)b[u].y;
                a2 += (ACC)a[u] * (ACC)b[u].z; a3 += (ACC)a[u] * (ACC)b[u].w;
            }
        }
    };
    whole_passes_then_rest<32 * UNROLL>(kbeg, kend, pass);
    /* the 4 k-lanes of a warp (lanes 8 apart), then the 8 warps in order */
#pragma unroll
    for (int d = 8; d < 32; d <<= 1) {
        a0 += __shfl_xor_sync(0xffffffffu, a0, d); a1 += __shfl_xor_sync(0xffffffffu, a1, d);
        a2 += __shfl_xor_sync(0xffffffffu, a2, d); a3 += __shfl_xor_sync(0xffffffffu, a3, d);
    }
    const int warp = tid >> 5, lane = tid & 31;
    if (lane < 8) {
        red[warp][4 * lane] = a0; red[warp][4 * lane + 1] = a1;
        red[warp][4 * lane + 2] = a2; red[warp][4 * lane + 3] = a3;
    }
    return add_warps(red, tid);
}

/* M = 1, N % 4 != 0 (B's rows start anywhere in a 16-byte word): strips of SHIFTED = 124
 * columns. Row k of the strip starts at element e = k N + col0, o = e % 4 into its word; lane
 * L loads the word at e - o + 4L, so one load instruction is 512 contiguous bytes (as on the
 * 16-byte path) and the 32 words cover the strip's 124 columns for every o. The column a
 * lane's element j holds moves with o, and o depends only on k % 4 (passes start at
 * multiples of 4): the sums are kept per residue r, acc[r][j] holding column 4L + j - o_r,
 * and put in place once, through shared memory. Warp w reads rows base + U w .. + U - 1 of
 * each pass of 8 U rows. Rows from ksafe on may reach past B's last element: their loads
 * are checked one by one (the predicated passes, as is the end of the slice). */
#define SHIFTED 124
__device__ __forceinline__ ACC strip_shifted(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                             int N, int K, int col0, int kbeg, int kend,
                                             ACC (&red)[8][SHIFTED + 8], int tid)
{
    const int warp = tid >> 5, lane = tid & 31;
    const size_t total = (size_t)K * N;
    /* a word past the end reaches at most N + 127 elements past its row's start */
    const int ksafe = max(0, K - (128 + N - 1) / N);
    ACC acc[4][4];
#pragma unroll
    for (int r = 0; r < 4; ++r)
#pragma unroll
        for (int j = 0; j < 4; ++j)
            acc[r][j] = (ACC)0;
    /* a warp's U rows a pass (a multiple of 4): UNROLL, 4 in the predicated passes (8 with
       their checks would spill) */
    auto pass = [&](int base, auto full) {
        constexpr int U = decltype(full)::value ? UNROLL : 4;
        const int k0 = base + U * warp;
        VEC b[U];
        ELEM a[U];
#pragma unroll
        for (int i = 0; i < U; ++i) {
            const size_t e = (size_t)(k0 + i) * N + col0;
            const size_t w = (e & ~(size_t)3) + 4 * lane;
            if (decltype(full)::value) {
                b[i] = __ldg(reinterpret_cast<const VEC*>(B + w));
            } else if (k0 + i < kend && w + 4 <= total) {
                b[i] = __ldg(reinterpret_cast<const VEC*>(B + w));
            } else {                              /* past the slice or B's end: zeros */
                const bool in = k0 + i < kend;
                b[i].x = in && w < total ? __ldg(B + w) : (ELEM)0;
                b[i].y = in && w + 1 < total ? __ldg(B + w + 1) : (ELEM)0;
                b[i].z = in && w + 2 < total ? __ldg(B + w + 2) : (ELEM)0;
                b[i].w = (ELEM)0;
            }
        }
        if (decltype(full)::value) {
#pragma unroll
            for (int i = 0; i < U; i += 4) {
                const VEC a4 = __ldg(reinterpret_cast<const VEC*>(A + k0 + i));
                a[i] = a4.x; a[i + 1] = a4.y; a[i + 2] = a4.z; a[i + 3] = a4.w;
            }
        } else {
#pragma unroll
            for (int i = 0; i < U; ++i)
                a[i] = k0 + i < kend ? __ldg(A + k0 + i) : (ELEM)0;
        }
#pragma unroll
        for (int i = 0; i < U; ++i) {
            acc[i & 3][0] += (ACC)a[i] * (ACC)b[i].x; acc[i & 3][1] += (ACC)a[i] * (ACC)b[i].y;
            acc[i & 3][2] += (ACC)a[i] * (ACC)b[i].z; acc[i & 3][3] += (ACC)a[i] * (ACC)b[i].w;
        }
    };
    int base = kbeg;
    const int fend = min(kend, ksafe);
#pragma unroll 1
    for (; base + 8 * UNROLL <= fend; base += 8 * UNROLL)
        pass(base, Full<true>());
#pragma unroll 1
    for (; base < kend; base += 8 * 4)
        pass(base, Full<false>());
    /* residue r's sums to their columns: red[warp][4L + j - o_r + 3], each round's positions
       distinct across the warp; then the 8 warps in order */
#pragma unroll
    for (int p = lane; p < SHIFTED + 8; p += 32)
        red[warp][p] = (ACC)0;
    __syncwarp();
#pragma unroll
    for (int r = 0; r < 4; ++r) {
        const int o = (int)(((size_t)r * N + col0) & 3);
#pragma unroll
        for (int j = 0; j < 4; ++j)
            red[warp][4 * lane + j - o + 3] += acc[r][j];
        __syncwarp();
    }
    __syncthreads();
    ACC v = (ACC)0;
    if (tid < SHIFTED) {
#pragma unroll
        for (int w = 0; w < 8; ++w)
            v += red[w][tid + 3];
    }
    return v;
}

/* M = 1: C (1 x N) = A (1 x K) . B (K x N), a strip of 32 columns (124 where N % 4 != 0) a
 * block, its slice of K. */
__device__ __forceinline__ void gemv_cols(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int N, int K,
                                          unsigned char* __restrict__ workspace, int tid)
{
    int kbeg, kend;
    /* slices of whole 4-row groups where N % 4 != 0 (the residues' need): the grid is one
       wave, so the longest slice sets the time and rounding to 32 rows made it longer */
    gemv_slice(K, (N & 3) == 0 ? 32 : 4, kbeg, kend);
    if ((N & 3) == 0) {
        __shared__ ACC red[8][32];
        const int col0 = blockIdx.x * 32;
        finish<32>(strip_vec(A, B, N, col0, kbeg, kend, red, tid), C, col0, N, workspace, tid);
    } else {
        __shared__ ACC red[8][SHIFTED + 8];
        const int col0 = blockIdx.x * SHIFTED;
        finish<SHIFTED>(strip_shifted(A, B, N, K, col0, kbeg, kend, red, tid), C, col0,
                        min(N, col0 + SHIFTED), workspace, tid);
    }
}

/* One warp's part of its row for N = 1: the body of the row (`body` elements from `off`, the
 * row's first 16-byte boundary) in this slice, by 16-byte loads of A, UA of them issued
 * before their first use. The vector's words line up with them only where off == 0 (XV);
 * else they are 4 single loads (L1 hits: every warp of the SM reads the vector). */
template <bool XV>
__device__ __forceinline__ ACC gemv_row(const ELEM* __restrict__ arow, const ELEM* __restrict__ B,
                                        int off, int body, int lane)
{
    constexpr int UA = UNROLL == 8 ? 6 : UNROLL;  /* 8 spill beside the vector's loads */
    const ELEM* const a0 = arow + off;
    const ELEM* const x0 = B + off;
    auto load_x = [&](int j) -> VEC {
        if (XV)
            return __ldg(reinterpret_cast<const VEC*>(x0 + j));
        VEC v;
        v.x = __ldg(x0 + j); v.y = __ldg(x0 + j + 1); v.z = __ldg(x0 + j + 2); v.w = __ldg(x0 + j + 3);
        return v;
    };
    int jbeg, jend;
    gemv_slice(body, 128, jbeg, jend);
    ACC acc = (ACC)0;
    auto pass = [&](int base, auto full) {
        VEC a[UA];
#pragma unroll
        for (int u = 0; u < UA; ++u) {            /* jend is a whole 16-byte word: clamp to the last */
            const int j = decltype(full)::value ? base + 4 * lane + 128 * u
                                                : min(base + 4 * lane + 128 * u, jend - 4);
            a[u] = __ldg(reinterpret_cast<const VEC*>(a0 + j));
        }
#pragma unroll
        for (int u = 0; u < UA; ++u) {
            const int j = base + 4 * lane + 128 * u;
            if (decltype(full)::value || j < jend) {
                const VEC x = load_x(j);
                acc += (ACC)a[u].x * (ACC)x.x + (ACC)a[u].y * (ACC)x.y
                     + (ACC)a[u].z * (ACC)x.z + (ACC)a[u].w * (ACC)x.w;
            }
        }
    };
    whole_passes_then_rest<128 * UA>(jbeg, jend, pass);
    return acc;
}

/* N = 1: C (M x 1) = A (M x K) . B (K x 1), one row a warp. Where K % 4 != 0 the rows start
 * at different offsets from a 16-byte boundary: each warp reads its row's body by 16-byte
 * loads from its first boundary and the at most 3 + 3 elements around it by single loads
 * (in slice 0). */
__device__ __forceinline__ void gemv_rows(const ELEM* __restrict__ A, const ELEM* __restrict__ B,
                                          ELEM* __restrict__ C, int M, int K,
                                          unsigned char* __restrict__ workspace, int tid)
{
    const int warp = tid >> 5, lane = tid & 31;
    const int row0 = blockIdx.x * 8, m = min(row0 + warp, M - 1);   /* past M: clamped, never stored */
    const size_t start = (size_t)m * K;
    const ELEM* const arow = A + start;
    const int off = min((int)((4 - (start & 3)) & 3), K);   /* elements before the boundary */
    const int body = (K - off) / 4 * 4;
    ACC acc = off == 0 ? gemv_row<true>(arow, B, 0, body, lane) : gemv_row<false>(arow, B, off, body, lane);
    if (blockIdx.y == 0) {
        if (lane < off)
            acc += (ACC)__ldg(arow + lane) * (ACC)__ldg(B + lane);
        const int t = off + body + lane;         /* the tail: fewer than 4 elements */
        if (lane < 3 && t < K)
            acc += (ACC)__ldg(arow + t) * (ACC)__ldg(B + t);
    }
#pragma unroll
    for (int d = 16; d > 0; d >>= 1)
        acc += __shfl_xor_sync(0xffffffffu, acc, d);
    __shared__ ACC red[8];
    if (lane == 0)
        red[warp] = acc;
    __syncthreads();
    finish<8>(tid < 8 ? red[tid] : (ACC)0, C, row0, M, workspace, tid);
}

/* The entry (the same signature in every stream). workspace: split-K's counters and
 * partials (null where K is not split). */
extern "C" __global__ __launch_bounds__(NT, 4)
void matmul(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
    const int tid = threadIdx.x;
    if (blockDim.x != NT || blockDim.y != 1 || (M != 1 && N != 1))
        __trap();                                 /* a launch that does not match the header */
    if (M == 1) {
        gemv_cols(A, B, C, N, K, workspace, tid);
    } else {
        gemv_rows(A, B, C, M, K, workspace, tid);
    }
}
#endif /* STREAM == 2 */
