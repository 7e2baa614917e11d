/*
+++
name = "tf32_wgmma_rs"
title = "TF32 wgmma with B as the register operand (Cᵀ = Bᵀ·Aᵀ): no transpose of B, TMA in and out"
summary = "wgmma reads a TF32 operand from shared memory only K-major: A (row-major) is, B is not, so the other TF32 wgmma kernels transpose B in a pre-pass. The register operand has no such rule, so each tile is computed transposed, Cᵀ = Bᵀ·Aᵀ: A, as TMA loads it, is wgmma's shared-memory operand, and B, loaded by TMA as it lies (N-major, boxes of 32 × 32 in the 128-byte swizzle), becomes the register operand, its fragments read with conflict-free LDS.64 (permuted rows, so that a0/a1 and a2/a3 are word pairs). The copy engine rounds both to TF32 on the way in (TFLOAT32 tensor maps). Tiles of bm × bn (256 × 128 by default): a producer warpgroup issues TMA loads; two consumer warpgroups (one at bn = 64) run wgmma.m64n{bm}k8 with A from registers, with setmaxnreg moving registers from the producer to the consumers; a persistent, rasterised grid. C leaves by TMA stores from a staging area, so that writing one tile overlaps the next tile's main loop. With pingpong = 1 the two consumers stop sharing a tile: each owns whole bm × bn tiles and they take the CTA's tiles in turn, ordered by named barriers, so that one writes its tile out while the other runs its main loop. For shapes with few tiles: narrower tiles (bm, bn), a cluster of ks CTAs per tile, each a part of K, summed through distributed shared memory, or stream-K (a last partial wave's tiles shared along K with the SMs that would idle, partials summed in k order by the last to arrive). A pre-pass pads A or B only where a row is not a multiple of 16 bytes, as TMA needs, or with rowpad = 128 where a row starts inside a 32-byte sector (onto whole 128-byte lines)."
source = "PTX ISA wgmma.mma_async with the A operand in registers and its .tf32 register fragment layout, setmaxnreg, cp.async.bulk.tensor (loads and shared-to-global stores), cp.async.bulk.wait_group.read; the operand swap Cᵀ = Bᵀ·Aᵀ of column-major BLAS; CUTLASS sm90 register-sourced (RS) GMMA mainloops and TMA-store epilogues; cuda/ladder/23_tf32_wgmma_tma.cu"
role = "rung"
order = 26
dtypes = ["float32"]
precision = "tf32"
arch_suffix = "a"

[params]
persist = [1, 0]
streamk = [0, 1, 2]
bm = [256, 128, 64]
bn = [128, 64]
ks = [1, 2, 4]
pingpong = [0, 1]
rowpad = [16, 128]

[descriptions]
persist = "1: a persistent grid (one CTA per SM, a tile loop, C's stores overlapping the next tile); 0: one tile per CTA"
streamk = "the last partial wave's tiles shared along K with the SMs that would idle (persist=1); 1: a head and tail pieces; 2: g = SMS // rem equal parts each, one part's CTAs at one k"
bm = "rows of C per tile (wgmma's N): narrower tiles give shapes with few tiles more CTAs"
bn = "columns of C per tile: 128 (two consumer warpgroups) or 64 (one: twice the CTAs; persist=0); with pingpong, one consumer's tile"
ks = "CTAs per tile as a cluster, each 1/ks of K, summed through distributed shared memory (persist=0)"
rowpad = "16: the pre-pass pads only the rows TMA cannot read (not a multiple of 16 bytes); 128: rows that start inside a 32-byte sector onto whole 128-byte lines"
pingpong = "1: each consumer warpgroup owns whole bm × bn tiles and the two take the CTA's tiles in turn, one's epilogue under the other's main loop (persist=1)"

[derived]
tiles = "cdiv(M, bm) * cdiv(N, bn)"       # bm (M) × bn (N) tiles of C
# persist=1: as many as fit beside the staging area (one buffer a consumer: 32 KB; a fourth
# stage at bm 256 ran faster than a second buffer, benchmarks/NOTES.md, "TF32's fourth
# stage"); persist=0: 5, the staging area inside the ring (4 at bm 256 × bn 128: 227 KB less
# 32 bytes of static shared memory and 1280 of alignment and mbarriers). pingpong: as many as
# fit beside its staging area (two buffers a consumer, 64 KB), at most 8
stages = "(min(8, (227 * 1024 - 32 - 1280 - 65536) // ((bm + bn) * 128)) if pingpong else 4 if bm == 256 else 6 if bm == 128 else 8) if persist else min(5, (227 * 1024 - 32 - 1280) // ((bm + bn) * 128))"
pe = "rowpad // 4"                        # elements a padded row is a multiple of
pc = "8 if rowpad == 128 else 4"          # rows whose length is not a multiple of pc are padded
kp = "roundup(K, pe) if K % pc else K"    # row length of Ap (when K % pc)
np = "roundup(N, pe) if N % pc else N"    # row length of Bp (when N % pc)
# the pre-pass's padded copies (only where a row stride is not a multiple of 16 bytes as TMA
# needs, or with rowpad 128 of 32 bytes): Ap (M × Kp) when K % pc, then Bp (K × Np) when N % pc
ap_bytes = "4 * M * kp if K % pc else 0"
bp_bytes = "4 * K * np if N % pc else 0"

[[constraints]]
check = "persist == 0 or persist == 1"
reason = "persist must be 0 or 1"

[[constraints]]
check = "streamk == 0 or persist == 1"
reason = "stream-K shares the last wave's tiles between the CTAs of a persistent grid: it needs persist=1"

[[constraints]]
check = "bn == 128 or bn == 64"
reason = "bn must be 128 (two consumer warpgroups) or 64 (one)"

[[constraints]]
check = "bn == 128 or persist == 0 or pingpong == 1"
reason = "64-column tiles are for shapes with few tiles: one tile per CTA (persist=0, no stream-K), or a consumer's own tile (pingpong=1)"

[[constraints]]
check = "pingpong == 0 or (persist == 1 and streamk == 0 and ks == 1)"
reason = "ping-pong consumers take turns at a persistent CTA's whole tiles: it needs persist=1, streamk=0 and ks=1"

[[constraints]]
check = "rowpad == 16 or (persist == 1 and pingpong == 0 and ks == 1)"
reason = "rows copied onto whole lines pay for the copy with long main loops: rowpad=128 needs persist=1, pingpong=0 and ks=1"

[[constraints]]
check = "rowpad == 16 or K % 8 != 0 or N % 8 != 0"
reason = "rowpad=128 pads nothing here: every row of A and B starts on a 32-byte sector (K % 8 == N % 8 == 0)"

[[constraints]]
check = "pingpong == 0 or bm * bn == 16384 or bm * bn == 8192"
reason = "with pingpong one consumer warpgroup holds a whole bm × bn tile: 128 accumulators a thread (bm × bn = 16384), or 64 for shapes with fewer tiles (8192)"

[[constraints]]
check = "ks == 1 or ((ks == 2 or ks == 4) and persist == 0 and bn == 128)"
reason = "ks must be 1, 2 or 4; a tile shared by a cluster needs persist=0 and bn=128"

[[constraints]]
check = "ks == 1 or ks * tiles <= SMS"
reason = "a {ks}-CTA cluster per tile only where the tiles alone leave {ks - 1} of every {ks} of the {SMS} SMs idle ({tiles} tiles)"

# 4-CTA clusters need 4 free SMs of one GPC: a GPU holds fewer of them at once than its SMs
# / 4 (Nsight Compute's launch__cluster_max_active), and more clusters than fit run in two
# waves (benchmarks/NOTES.md, rung 26's clusters); so at most 7/8 of the SMs. bm 128 only:
# the 64- and 256-row tiles were not faster with them
[[constraints]]
check = "ks < 4 or (bm == 128 and ks * tiles <= 7 * SMS // 8)"
reason = "4-CTA clusters only with bm=128 and at most {7 * SMS // 8} CTAs ({ks * tiles} here): a GPC must hold each cluster whole"

[launch]
# persistent: one CTA per SM (with stream-K every SM, so that a last wave has idle SMs to share)
grid = ["(SMS if streamk else min(tiles, SMS)) if persist else tiles * ks", 1]
block = ["384 if pingpong else 128 + 2 * bn", 1]    # a producer warpgroup + bn / 64 consumer warpgroups (2 with pingpong)
# the stages of A (bm × 32) and B (32 × bn) + the C staging area (16 KB per consumer
# warpgroup, 32 KB with pingpong; persist=0: in the ring) + atom alignment + mbarriers (full and empty per stage: at most 96 of the 256 bytes)
shared = "stages * (bm + bn) * 32 * 4 + ((65536 if pingpong else 256 * bn) if persist else 0) + 1024 + 256"
# stream-K: an arrival counter per tile (256-byte aligned), then partial tiles (bm × 128
# floats): one per head (rem < SMS of them) and one per piece of the tails (rem + SMS - rem
# - 1 at most): fewer than 2 · SMS
workspace = "roundup(4 * tiles, 256) + 2 * SMS * bm * 128 * 4 if streamk else 0"

[prepass]            # padded copies only where needed: no blocks (no launch) when K % pc == N % pc == 0
entry = "prepass"
grid = ["cdiv(max(kp if K % pc else 0, np if N % pc else 0), 128)", "(cdiv(M, 32) if K % pc else 0) + (cdiv(K, 32) if N % pc else 0)"]
block = [32, 8]
# the padded copies (at least 256 bytes: S is a device pointer even where nothing is padded,
# and C's stand-in map below lies inside it); the tensor maps are the kernel's first three
# arguments
scratch = "max(ap_bytes + bp_bytes, 256)"
maps_in = "params"

# A (or Ap) as M rows of K (Kp) floats, box 32 (k) × 64 (m), bm / 64 of them a k-tile; 128B
# swizzle; rounded to TF32 by TMA as it copies
[[prepass.tensor_maps]]
base = "'scratch' if K % pc else 'a'"
offset = 0
dims = ["kp", "M"]
stride = "4 * kp"
box = [32, 64]
elem = "tf32"

# B (or Bp) as K rows of N (Np) floats, box 32 (n) × 32 (k); 128B swizzle; rounded to TF32
[[prepass.tensor_maps]]
base = "'scratch' if N % pc else 'b'"
offset = "ap_bytes if N % pc else 0"
dims = ["np", "K"]
stride = "4 * np"
box = [32, 32]
elem = "tf32"

# C as M rows of N floats, box 32 (n) × 64 (m); 128B swizzle: the epilogue's TMA stores.
# TMA needs 16-byte row strides: where N % 4 the kernel stores from registers instead, and
# the map is a one-row stand-in at the scratch's start that nothing uses
[[prepass.tensor_maps]]
base = "'c' if N % 4 == 0 else 'scratch'"
offset = 0
dims = ["N if N % 4 == 0 else 4", "M if N % 4 == 0 else 1"]
stride = "4 * N if N % 4 == 0 else 16"
box = [32, 64]
+++
*/
/*
 * tf32_wgmma_rs.cu -- TF32 GEMM on Hopper without transposing B (sm_90a).
 *
 * Why: wgmma reads a .tf32 operand from shared memory only K-major. A (M x K, row-major) is
 * K-major; B (K x N, row-major) is N-major, so 21-23 transpose B into a scratch buffer in a
 * pre-pass: 8 bytes of traffic per element of B on every launch, a visible part of the time
 * (benchmarks/NOTES.md). The operand that comes from registers (wgmma's A)
 * has no such rule: its fragments can be read from shared memory in any layout. So each
 * tile is computed transposed, C^T = B^T . A^T: wgmma's A (64 x 8 per warpgroup and k-step)
 * is a slice of B^T, read from B's N-major tile by LDS into registers; wgmma's B (8 x 256)
 * is A^T, i.e. A's rows, K-major in shared memory as TMA leaves them. The accumulators hold
 * C^T; the epilogue writes them to C transposed, through shared memory and TMA stores.
 *
 * Tile: BM = 256 (128, 64) rows of C (M: wgmma's N = BM) x BN = 128 columns (N: 2 consumer
 * warpgroups x wgmma's M = 64), K in steps of BK = 32. The narrower tiles give shapes with
 * few 256-row tiles more CTAs (1024^3: 32 tiles of 256 x 128 for 132 SMs, 128 of 64 x 128).
 * BN = 64 (with PERSIST 0): one consumer warpgroup, 64 columns, so twice the CTAs at the
 * same BM (1024^3: 128 tiles of 128 x 64, each CTA reading as many bytes per k-tile as a 64 x
 * 128 tile, the wgmma twice as wide).
 * A block of 3 warpgroups (384 threads; 2 and 256 at BN = 64):
 *  - warpgroup 0, thread 0: the producer. Per stage: mbarrier.arrive.expect_tx (48, 32 or 24
 *    KB), one TMA load of A (box 32 k x BM m) and BN / 32 of B (boxes 32 n x 32 k, 4 KB each), all in
 *    the 128-byte swizzle (16-byte chunk c of 128-byte row r at c ^ (r % 8)); out-of-range
 *    rows, columns and k are zero-filled by TMA. Both tensor maps have the element type
 *    TFLOAT32 (elem = "tf32"), so the copy engine rounds A and B to TF32 (to nearest, ties
 *    to even) as it writes the stage: no thread rounds anything (as 23).
 *  - warpgroup 0, warps 1-3: idle.
 *  - warpgroups 1-2 (consumers cw = 0, 1; only 1 at BN = 64): wait full[s]; per k-step kk (4 per stage) load 4
 *    fragment registers (2 LDS.64) of B^T (rows = columns n of C, columns = k), then wgmma.m64n{BM}k8
 *    (A from registers, B = the A region through a K-major descriptor); one group of 4 in
 *    flight while the next stage's fragments load; arrive on empty[s] when done. After the
 *    last k-tile of a tile, the epilogue (below).
 *
 * Fragment rows and bank conflicts. Fragment registers a0 and a1 of lane (g, t) (g = lane /
 * 4, t = lane % 4) are rows g and g + 8, column k = t of the warp's 16 x 8 slice (a2 and a3
 * the same rows at column t + 4); in the swizzled B box a (k, n) element sits in bank
 * ((n / 4) ^ (k % 8)) * 4 + n % 4. Rows map to columns through a permutation (any
 * permutation of C^T's rows is a permutation of C's columns, undone by the epilogue) chosen
 * so that rows g and g + 8 are the two words of one 8-byte pair, read by one LDS.64:
 * fragment row r = 16 w + g + 8 h of consumer cw is column
 *     n = 32 (2 cw + w / 2) + 4 c + 2 (g % 2) + h,   c = (2 (w % 2) + g / 4) ^ (5 ((g / 2) % 2))
 * of the tile: box 2 cw + w / 2, chunk c (warp w % 2 = 0 takes chunks 0, 5, 1, 4 for g / 2 =
 * 0..3, w % 2 = 1 chunks 2, 7, 3, 6). A half-warp (g / 4 fixed) holds chunks c and c ^ 5,
 * which differ in bit 2, so its 4 k rows (chunk ^ k % 8, k % 8 = t or t + 4) reach all 8
 * chunks x 2 pairs: 16 distinct bank pairs, the minimum 2 wavefronts per LDS.64 (8 loads
 * per stage and thread where 4-byte loads took 16). The chunks also differ in bit 0, which
 * the epilogue's stores need (below). Emulated in tests/test_ladder.py.
 *
 * Registers (BM = 256): 128 accumulators + 2 x 16 fragment registers (the stage being multiplied and
 * the next) exceed the 168 a 384-thread block gets, so the producer warpgroup gives
 * registers back (setmaxnreg.dec 72) and the consumers take them (setmaxnreg.inc 216):
 * 128 x 72 + 256 x 216 <= 384 x 168.
 *
 * Pre-pass: TMA needs every row stride to be a multiple of 16 bytes. Where K % 4 != 0 the
 * pre-pass copies A into Ap (M x Kp, zero-padded); where N % 4 != 0, B into Bp (K x Np).
 * ROWPAD = 128 pads to 32 elements where a row starts inside a 32-byte sector (K % 8, N % 8):
 * such rows cost each box row an extra sector and line in the L2, which the copy pays for
 * (benchmarks/NOTES.md, TF32 rows on whole lines); rows on whole sectors but not lines
 * are read in place (padding them lost). It has no blocks when nothing is padded, and the
 * backend launches nothing then.
 *
 * Tensor maps: the backend encodes A's, B's (from 'a' / 'b' or the padded copies) and C's
 * and passes them as matmul's first three arguments (const __grid_constant__ TensorMapArg):
 * TMA reads them from the parameter space, so no thread fences the tensormap proxy or
 * fetches a descriptor from global memory before the first copy (prefetch.tensormap only).
 *
 * Epilogue: accumulator d[j] of lane (g, t) in warp w is C^T row 16 w + g + 8 ((j / 2) % 2)
 * (column n of C by the map above), C^T column (j / 4) * 8 + 2 t + j % 2 (row m of C).
 * Writing C from the registers (one 4-byte store per accumulator) leaves the tensor cores
 * idle meanwhile: all CTAs finish their tiles together, and the burst of C goes at the
 * memory's write speed (benchmarks/NOTES.md, rung 26's TMA-store epilogue). So C leaves by
 * TMA stores that run on while the next tile's main loop starts: each consumer writes a
 * part of 64 rows of its BM x 64 piece (a quarter at BM = 256) into a staging buffer in shared memory, in the
 * 128B swizzle of C's tensor map (box 32 columns x 64 rows; the lane's two columns are the
 * word pair of its B fragments, so accumulators j and j + 2 leave by one STS.64; a half-warp's
 * 4 rows 2 t + j % 2 swizzle chunks c and c ^ 5 onto all 8 chunks: 2 wavefronts, no
 * conflicts), fences the writes to the async proxy (fence.proxy.async), meets its 127 peers
 * at a named barrier, and its first thread issues two TMA stores (the consumer's 64 columns) and commits them
 * as a bulk group. With PERSIST one buffer per consumer: before writing a part that thread
 * waits until its bulk groups have read shared memory (cp.async.bulk.wait_group.read 0), a
 * copy of 16 KB from shared memory, so a part's stores overlap the next part's accumulator
 * shuffle and the last ones' the next tile; a second buffer would cost the ring its fourth
 * stage at BM 256 (benchmarks/NOTES.md, TF32's fourth stage). With PINGPONG or PERSIST 0
 * (the staging in the drained ring) two buffers, the parts alternating between them (across
 * tiles too), waiting for all but the latest group (wait_group.read 1). TMA clips rows and columns past C's edges.
 * TMA needs 16-byte rows: where N % 4 the consumers store from registers instead (guarded
 * 4-byte stores). Before exiting, each first thread waits for its stores to complete.
 * PERSIST = 1: grid of min(tiles, #SMs), tiles rasterised in groups of GM = 8 tile rows, the
 * stage ring running on across tiles (as 23). PERSIST = 0: one tile per CTA; its epilogue
 * stages C in the ring (drained by then; the two consumers meet first), so that 5 stages fit
 * at every BM and BN (4 at BM 256, BN 128).
 * STREAMK = 1 (with PERSIST): grid of #SMs. When the tiles leave a last partial wave of rem
 * tiles, CTA b < rem computes the head of the wave's tile b (k-tiles [0, qm), qm = rem *
 * ktiles / #SMs) while the #SMs - rem others share the tails (see Walk); each writes its
 * part to a workspace and counts itself in the tile's counter, and the last to arrive sums
 * the parts in k order and stores the tile (partial_arrive in lab_ptx.cuh; sk_sum, then the
 * epilogue, at BM <= 128; sk_store at 256). Only where the heads have
 * >= 8 k-tiles, a tile has at most ~10 parts and a spare SM at most ~4 (else whole tiles).
 * It gains at some shapes and loses at others (benchmarks/NOTES.md, rung 26's stream-K): a
 * parameter for the autotuner, off by default.
 * STREAMK = 2: the last wave's rem tiles are instead cut into g = G / rem equal parts of K
 * each (2 <= g <= 10), CTA b < g rem computing part b / rem of tile dp + b % rem, and the
 * G - g rem others idle. The tails of STREAMK 1 start at G - rem different places along K,
 * so that each CTA reads its own A and B from the memory; here the CTAs of one part all
 * read one slab of K at a time, as in the whole tiles before.
 * KS = 2 or 4 (with PERSIST 0, BN 128): a cluster of KS CTAs per tile (__cluster_dims__), rank
 * r computing k-tiles [r kt / KS, (r + 1) kt / KS). Then the ranks sum their accumulators as
 * a tree through distributed shared memory (st.shared::cluster into the receiver's drained
 * ring, two cluster barriers per round), in one order every launch, and rank 0 stores the
 * tile. Stream-K's fix-up without the partials' round trip through L2: where the tiles
 * alone leave most SMs idle (KS x tiles <= #SMs), every SM streams part of K (small M with
 * long K: benchmarks/NOTES.md, rung 26's clusters). KS = 4 only at bm 128 and up to 7/8 of
 * the SMs (a GPC must hold a cluster whole).
 * PINGPONG = 1 (PERSIST 1, no STREAMK, KS 1): the consumers stop sharing each tile. Each owns
 * whole BM x BN tiles (BN / 64 slabs of 64 columns, each slab a wgmma.m64n{BM}k8 a k-step
 * into BM / 2 accumulators; BM x BN = 16384, or 8192 for shapes with fewer tiles) and the two take the CTA's tiles in turn:
 * consumer 0 items 0, 2, 4, ..., consumer 1 items 1, 3, 5, .... The producer fills the ring
 * with item 0's k-tiles, then item 1's: ring position p = n * ktiles + k-tile. Each stage is
 * read by one consumer (empty barriers count 128 arrivals). A consumer starts an item's main
 * loop only once the other has issued all of its previous item's wgmmas (named barriers 5
 * and 6, 256 threads: bar.sync on its own, which the other bar.arrives), so one runs its
 * main loop while the other writes its tile out; the order also keeps each consumer within
 * one phase of the stages it waits on. The staging buffers are each consumer's own, as
 * before. Why: with the tile shared, the tensor cores idle while both consumers stage C
 * (benchmarks/NOTES.md, TF32 at a locked clock: cuBLAS TF32's ordered consumers).
 *
 * Rounding: the copy engine rounds A and B to TF32 as it lands them (TFLOAT32 tensor maps);
 * threads rounding A in place and the fragments by cvt.rna cost shared-memory traffic and
 * issue time (benchmarks/NOTES.md, rung 26's rounding).
 *
 * Technique and source: NVIDIA PTX ISA (wgmma.mma_async with a register A operand and its
 * fragment layouts, setmaxnreg, cp.async.bulk.tensor, mbarrier expect_tx); column-major
 * BLAS's C^T = B^T A^T; the CUTLASS sm90 "RS" GMMA mainloops (A from registers); written
 * anew for this lab on top of 23_tf32_wgmma_tma.cu.
 *
 * Any M, N, K (TMA zero-fill, guarded stores). Precision "tf32": A and B rounded to nearest
 * TF32 by TMA as cuBLAS does, FP32 accumulation. sm_90a only; elsewhere matmul traps.
 *
 * Compile-time constants (defaults let the file compile alone):
 *   ELEM, ACC  must be float                                      (default float)
 *   PERSIST    1: persistent grid with a tile loop, 0: one tile per CTA (default 1)
 *   STREAMK    1: share a last partial wave along K, heads and tails; 2: in g equal parts
 *              (needs PERSIST 1; default 0)
 *   BM         rows of C per tile: 256, 128 or 64 (default 256)
 *   BN         columns of C per tile: 128 (2 consumer warpgroups) or 64 (1; PERSIST 0) (default 128)
 *   KS         CTAs per tile, each a part of K, as a cluster: 1, 2 or 4 (PERSIST 0, BN 128) (default 1)
 *   PINGPONG   1: each consumer owns whole tiles, the two in turn (PERSIST 1)   (default 0)
 *   ROWPAD     16 or 128: bytes a padded row of A or B is a multiple of (default 16)
 *   L2_KEEP_K  at K up to this, B loads keep their L2 lines (evict_last) and C's TMA
 *              stores give theirs up (evict_first)                  (default 256)
 * Fixed: BK = 32, GM = 8; STAGES = 4, 6, 8 for BM = 256, 128, 64 with PERSIST 1 (as many as
 * fit beside the staging area; with PINGPONG as many as fit beside its two buffers, at most
 * 8), 5 with PERSIST 0 (4 at BM 256, BN 128).
 * Dynamic shared memory: STAGES * (BM + BN) * 128 (+ 32 KB of C staging with PERSIST 1, 64 KB
 * with PINGPONG) + 1024 (atom alignment) + 256 (mbarriers): 225.25 KB at every BM with
 * PERSIST 1 and no PINGPONG. The kernel traps if the launch gave it less than its layout needs.
 *
 * Launch: prepass block (32, 8) over 32 x 128 tiles of Ap then Bp (none when not needed);
 * matmul block (128 + 2 BN, 1; 384 with PINGPONG), grid (PERSIST ? (STREAMK ? SMS : min(tiles, SMS)) : KS tiles, 1),
 * tiles = ceil(M/BM) * ceil(N/BN); args (the maps of A, B and C, A, scratch, C, M, N, K,
 * workspace) (the workspace: stream-K's counters and partial tiles; none without it).
 */
#include "lab_ptx.cuh"

#ifndef ELEM
#define ELEM float
#endif
#ifndef ACC
#define ACC float
#endif
#ifndef PERSIST
#define PERSIST 1
#endif
#ifndef STREAMK
#define STREAMK 0
#endif
#ifndef BM
#define BM 256
#endif
#ifndef BN
#define BN 128
#endif
#ifndef KS
#define KS 1
#endif
#ifndef PINGPONG
#define PINGPONG 0
#endif
#ifndef ROWPAD
#define ROWPAD 16
#endif
#if ROWPAD != 16 && ROWPAD != 128
#error "ROWPAD must be 16 or 128"
#endif
/* L2_KEEP_K: at K <= this, B is loaded with an evict_last policy and C stored with
 * evict_first. With few k-tiles per tile C's writes are most of the traffic (8192 x 8192 x
 * 256: 256 MB of C against 16 MB of A and B) and pushed the A and B panels that the next
 * tiles re-read out of the L2. At longer K the policies gained nothing (benchmarks/NOTES.md,
 * the L2 policies of rung 26). 0 turns them off. */
#ifndef L2_KEEP_K
#define L2_KEEP_K 256
#endif
#define BK 32
#define GM 8
#if PINGPONG
#define CONSUMERS 2                          /* consumer warpgroups, each on its own tiles */
#define SLABS (BN / 64)                      /* 64-column slabs of a tile, all one consumer's */
#else
#define CONSUMERS (BN / 64)                  /* consumer warpgroups, 64 columns of C each */
#define SLABS 1
#endif
#define NT (128 * (1 + CONSUMERS))
#if BN != 128 && BN != 64
#error "BN must be 128 or 64"
#endif
#if BM != 256 && BM != 128 && BM != 64
#error "BM must be 256, 128 or 64"
#endif
#if PERSIST != 0 && PERSIST != 1
#error "PERSIST must be 0 or 1"
#endif
#if STREAMK != 0 && ((STREAMK != 1 && STREAMK != 2) || PERSIST != 1 || BN != 128)
#error "STREAMK must be 0, 1 or 2, and 1 or 2 only with PERSIST 1 and BN 128"
#endif
#if BN == 64 && PERSIST != 0 && !PINGPONG
#error "BN 64 runs one tile per CTA (PERSIST 0) or a consumer's own tiles (PINGPONG 1)"
#endif
#if PINGPONG && (PINGPONG != 1 || PERSIST != 1 || STREAMK != 0 || KS != 1 || (BM * BN != 16384 && BM * BN != 8192))
#error "PINGPONG must be 0 or 1, and 1 only with PERSIST 1, STREAMK 0, KS 1 and BM x BN 16384 or 8192"
#endif
#if KS != 1 && ((KS != 2 && KS != 4) || PERSIST != 0 || BN != 128)
#error "KS must be 1, or 2 or 4 with PERSIST 0 and BN 128"
#endif
#define A_BYTES (BM * BK * 4)                /* 32 KB (BM 256): BM rows of A x 32 k */
#define ABOX_BYTES (64 * BK * 4)             /* 8 KB: one A box, 64 rows x 32 k */
#define A_BOXES (BM / 64)
#define BBOX_BYTES (32 * BK * 4)             /* 4 KB: one B box, 32 k rows x 32 n */
#define B_BOXES (BN / 32)
#define B_BYTES (B_BOXES * BBOX_BYTES)       /* 16 KB (BN 128) */
#define QBOX_BYTES (64 * 32 * 4)             /* 8 KB: a staging box, 64 rows x 32 columns of C */
#define STG_BUFS (PERSIST && !PINGPONG ? 1 : 2)     /* staging buffers per consumer (see the header) */
#define STG_BYTES (CONSUMERS * STG_BUFS * 2 * QBOX_BYTES)   /* 32 KB (BN 128): 2 consumers x 1 buffer x 2 boxes */
#define STAGE_BYTES (A_BYTES + B_BYTES)
#define SMEM_LIMIT (227 * 1024 - 32)         /* dynamic shared memory of a CTA: 227 KB less the static Walk */
#define SMEM_EXTRA (1024 + 256)              /* atom alignment + mbarriers */
#if PERSIST
/* the staging area apart from the ring, so that a tile's stores overlap the next tile */
#define STG_AT (STAGES * STAGE_BYTES)
#if PINGPONG
#define STAGES_FIT ((SMEM_LIMIT - SMEM_EXTRA - STG_BYTES) / STAGE_BYTES)
#define STAGES (STAGES_FIT < 8 ? STAGES_FIT : 8)
#elif BM == 256
#define STAGES 4                             /* 4 x 48 KB + the 32 KB staging area */
#elif BM == 128
#define STAGES 6                             /* 6 x 32 KB + 32 KB */
#elif BM == 64
#define STAGES 8                             /* 8 x 24 KB + 32 KB */
#endif
#define SMEM_NEEDED (STAGES * STAGE_BYTES + STG_BYTES + SMEM_EXTRA)
#else
/* one tile per CTA: its epilogue stages C in the ring, drained by then, so that 5 stages fit
   at every BM and BN (4 at BM 256, BN 128). Up to 14 fit at BM = BN = 64 but more ran
   slower (benchmarks/NOTES.md, rung 26's stages) */
#define STG_AT 0
#define STAGES_FIT ((SMEM_LIMIT - SMEM_EXTRA) / STAGE_BYTES)
#define STAGES (STAGES_FIT < 5 ? STAGES_FIT : 5)
#define SMEM_NEEDED (STAGES * STAGE_BYTES + SMEM_EXTRA)
#define KS_PART_AT STG_BYTES                 /* KS > 1: a peer's accumulators, after the staging area */
#define KS_PART_BYTES (BM * 512)             /* 256 consumer threads x BM / 2 floats */
#if STAGES * STAGE_BYTES < STG_BYTES + (KS > 1 ? KS_PART_BYTES : 0) || 2 * STAGES * 8 > 256
#error "the ring must hold the staging area (and a peer's partial), and the mbarriers their 256 bytes"
#endif
#endif
#if CONSUMERS == 2
/* the consumers need more than the 168 registers a 384-thread block gets (BM 256) */
#define PRODUCER_REGS 72                     /* 128 x 72 + 256 x 216 <= 384 x 168 */
#define CONSUMER_REGS 216
#endif
#define SK_MIN_KTILES 8                      /* stream-K only where a head has >= 8 k-tiles */
#define PART_VECS (BM / 8)                   /* float4s per consumer thread in a partial tile */
#define PARTS (BM / 64)                      /* staging parts of 64 rows of C per tile and consumer */
#define KK_GROUP (BK / 8 / SLABS)            /* k-steps a fragment buffer holds (all slabs) */

/* Ap (M x Kp) and Bp (K x Np), zero-padded copies where rows are padded (see the header),
   32 rows x 128 columns per block */
extern "C" __global__ __launch_bounds__(256)
void prepass(const ELEM* __restrict__ A, const ELEM* __restrict__ B, ELEM* __restrict__ S,
             int M, int N, int K)
{
    pad_for_tma<ROWPAD / 4, ROWPAD == 128 ? 8 : 4>(A, B, S, M, N, K);
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* the 4 KKS fragment registers (KKS k-steps from kk0, a0..a3 each) of one stage: B^T rows of
   this lane (as TMA left them: rounded to TF32), 2 KKS LDS.64. sb: the stage's base (the B
   boxes follow A's region); box: byte offset of the lane's box, chunk: its 16-byte chunk
   before the swizzle, pair: byte offset of its word pair in the chunk (rows g and g + 8 are
   the pair's two words: a0 and a1, or a2 and a3, in one load); t: lane % 4 */
template <int KKS>
__device__ __forceinline__ void load_fragments(unsigned* f, unsigned sb, unsigned box,
                                               unsigned chunk, unsigned pair, int t, int kk0)
{
#pragma unroll
    for (int kk = 0; kk < KKS; ++kk)
#pragma unroll
        for (int q = 0; q < 2; ++q) {           /* column t (q = 0) or t + 4 (q = 1) */
            const unsigned k = (kk0 + kk) * 8 + t + 4 * q;
            const unsigned addr = sb + box + k * 128u + (((chunk ^ (k & 7u)) << 4) | pair);
            asm volatile("ld.shared.v2.u32 {%0, %1}, [%2];\n"
                         : "=r"(f[kk * 4 + 2 * q]), "=r"(f[kk * 4 + 2 * q + 1]) : "r"(addr) : "memory");
        }
}
#endif

/* The work of one CTA, as items (tile, kb, ke): a tile (tile_origin's order) and the k-tiles
 * [kb, ke) of it that this CTA computes. Tiles below dp come whole, CTA b taking b, b + G, ...
 * (G = gridDim.x). With stream-K, the last partial wave's rem tiles (dp = tiles - rem) are
 * shared with the G - rem CTAs that would idle: CTA b < rem computes the head of tile dp + b,
 * its k-tiles [0, qm) with qm = rem ktiles / G, in lock step with the other heads (all CTAs
 * read one slab of K at a time, as in the whole tiles before: L2 keeps it); the tails
 * [qm, ktiles) of the rem tiles, tl = ktiles - qm k-tiles each, L = rem tl in all, are cut
 * into S = G - rem contiguous ranges (tile-major), spare CTA j = b - rem taking
 * [j L / S, (j + 1) L / S). Cutting all of the last wave's k-tiles into G ranges instead
 * has the CTAs read A and B at G different places along K, and L2 loses the slab
 * (benchmarks/NOTES.md, rung 26's stream-K); so do the tails' S ranges, which start at S
 * places. STREAMK 2: CTA b < g rem computes part r = b / rem of tile dp + b % rem, k-tiles
 * [r ktiles / g, (r + 1) ktiles / g), every part's CTAs in lock step on one slab. Producer
 * and consumers walk the same items. Kept in shared memory and read once per item, so that it holds no
 * registers through the main loop (the consumers have none to spare: see sk_store). */
struct Walk {
    int dp, ndp;                                       /* tiles below dp: whole; this CTA's count */
    int rem, qm, tl, L;                                /* stream-K; rem = 0: none */
    int g;                                             /* STREAMK 2: parts a shared tile */

    __device__ __forceinline__ bool item(int n, int ktiles, int& tile, int& kb, int& ke) const
    {
#if KS > 1
        /* one tile per cluster, CTA rank r taking the r-th of KS contiguous parts of K */
        const int r = blockIdx.x % KS;
        tile = blockIdx.x / KS;
        kb = r * ktiles / KS;
        ke = (r + 1) * ktiles / KS;
        return n == 0;
#endif
        if (n < ndp) {
            tile = blockIdx.x + n * gridDim.x; kb = 0; ke = ktiles;
            return true;
        }
        n -= ndp;
        const int b = blockIdx.x;
#if STREAMK == 2
        if (rem == 0 || n > 0 || b >= g * rem)
            return false;
        tile = dp + b % rem;                           /* part b / rem of K */
        kb = (int)((long long)(b / rem) * ktiles / g);
        ke = (int)((long long)(b / rem + 1) * ktiles / g);
        return true;
#else
        if (rem == 0 || (b < rem && n > 0))
            return false;
        if (b < rem) {                                 /* the head of tile dp + b */
            tile = dp + b; kb = 0; ke = qm;
            return true;
        }
        const int S = gridDim.x - rem, j = b - rem;
        const int s = (int)((long long)j * L / S), e = (int)((long long)(j + 1) * L / S);
        const int y = n == 0 ? s : (s / tl + n) * tl;
        if (y >= e)
            return false;
        const int a = y / tl;
        tile = dp + a;
        kb = qm + (y - a * tl);
        ke = qm + min(tl, e - a * tl);
        return true;
#endif
    }
};

/* Accumulator j of consumer lane (g, t4), value v, written to C where it lies inside: it is
 * C^T row g + 8 ((j / 2) % 2), i.e. column col0 + ncol[(j >> 1) & 1] of C (see the header),
 * and C^T column (j / 4) * 8 + 2 t4 + j % 2, i.e. a row of C from row0. */
__device__ __forceinline__ void store_acc_element(float* C, int M, int N, int row0, int col0, int t4,
                                                  const int* ncol, int j, float v)
{
    const int row = row0 + (j >> 2) * 8 + 2 * t4 + (j & 1);
    const int col = col0 + ncol[(j >> 1) & 1];
    if (row < M && col < N)
        C[(size_t)row * N + col] = v;
}

#if STREAMK && defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* the spare CTA (0..S-1) whose range of the tails holds position y: the largest j with
 * j L / S <= y */
__device__ __forceinline__ int sk_spare_of(int y, int L, int S)
{
    return (int)(((long long)(y + 1) * S + L - 1) / L) - 1;
}

/* Stream-K's partial slots: a head's is a (its tile), a tail piece's rem + j + a (spare CTA j,
 * tile a: the pieces of the tails in order, one more per tile or range boundary; at most
 * rem + S of them), in partial_arrive's thread-major layout (word e of consumer thread ct at
 * e * 256 + ct) after the per-tile counters. */

/* A shared tile's partial slots in the order of their k-tiles: the first, then count more,
 * step apart. STREAMK 1: the head's (a), then the tail pieces' of spare CTAs j0..j1 (rem + j
 * + a); STREAMK 2: part r's (CTA r rem + a). */
struct SkParts {
    int first, next, step, count;
};

/* Half h of a stream-K tile's sum for consumer thread ct (float4s h * PART_VECS / 2 ..): its
 * partials in the order of their k-tiles, so that the result does not depend on which CTA
 * came last (bitwise the same every launch). */
__device__ __forceinline__ void sk_sum_half(float4 (&sum)[PART_VECS / 2], const float4* parts,
                                            const SkParts& sp, int h, int ct)
{
    constexpr int HALF = PART_VECS / 2;
    const float4* const head = parts + (size_t)sp.first * PART_VECS * 256 + h * HALF * 256 + ct;
#pragma unroll
    for (int i = 0; i < HALF; ++i)
        sum[i] = __ldcg(head + i * 256);
#pragma unroll 1
    for (int j = 0; j < sp.count; ++j) {
        const float4* const piece = parts + (size_t)(sp.next + j * sp.step) * PART_VECS * 256 + h * HALF * 256 + ct;
        float4 v[HALF];
#pragma unroll
        for (int i = 0; i < HALF; ++i)
            v[i] = __ldcg(piece + i * 256);
#pragma unroll
        for (int i = 0; i < HALF; ++i) {
            sum[i].x += v[i].x; sum[i].y += v[i].y; sum[i].z += v[i].z; sum[i].w += v[i].w;
        }
    }
}

/* The last contributor of stream-K tile a stores it: for each float4 e of a consumer
 * thread's accumulators, the sum of sk_sum_half, written to C as the register epilogue
 * writes acc (guarded 4-byte stores). Straight from the workspace, not through acc: 128
 * accumulators plus the sum's loads did not fit the consumers' registers (ptxas spilled);
 * acc is dead here, so half of a partial (16 float4s) is loaded at once: one L2 round trip
 * per contributor and half (one float4 per contributor and trip would be ~300 dependent
 * round trips). */
__device__ __forceinline__ void sk_store(unsigned char* workspace, int tiles, const SkParts& sp,
                                         int ct, float* C, int M, int N,
                                         int row0, int col0, int t4, const int* ncol)
{
    constexpr int HALF = PART_VECS / 2;
    const float4* const parts = reinterpret_cast<const float4*>(partials_after_counters(workspace, tiles));
#pragma unroll 1
    for (int h = 0; h < 2; ++h) {
        float4 sum[HALF];
        sk_sum_half(sum, parts, sp, h, ct);
#pragma unroll
        for (int i = 0; i < HALF; ++i) {
            const float vals[4] = {sum[i].x, sum[i].y, sum[i].z, sum[i].w};
#pragma unroll
            for (int q = 0; q < 4; ++q)
                store_acc_element(C, M, N, row0, col0, t4, ncol, 4 * (h * HALF + i) + q, vals[q]);
        }
    }
}

/* The last contributor of stream-K tile a, BM <= 128: acc = sk_sum_half's sums (as sk_store
 * adds them: bitwise the same result), so that the tile then leaves by the staged TMA
 * epilogue like any other instead of sk_store's guarded 4-byte stores, faster where every
 * tile is shared (benchmarks/NOTES.md, rung 26's stream-K sum). At BM = 256 the 128
 * accumulators and a half partial's loads do not fit the
 * consumers' registers: sk_store stays. */
__device__ __forceinline__ void sk_sum(float (&acc)[BM / 2], unsigned char* workspace, int tiles,
                                       const SkParts& sp, int ct)
{
    constexpr int HALF = PART_VECS / 2;
    const float4* const parts = reinterpret_cast<const float4*>(partials_after_counters(workspace, tiles));
#pragma unroll
    for (int h = 0; h < 2; ++h) {
        float4 sum[HALF];
        sk_sum_half(sum, parts, sp, h, ct);
#pragma unroll
        for (int i = 0; i < HALF; ++i) {
            const int e = h * HALF + i;
            acc[4 * e] = sum[i].x; acc[4 * e + 1] = sum[i].y; acc[4 * e + 2] = sum[i].z; acc[4 * e + 3] = sum[i].w;
        }
    }
}
#endif

extern "C" __global__ CLUSTER_DIMS_OF(KS) __launch_bounds__(NT, 1)
void matmul(const __grid_constant__ TensorMapArg mapA, const __grid_constant__ TensorMapArg mapB,
            const __grid_constant__ TensorMapArg mapC,
            const ELEM* __restrict__ A, const ELEM* __restrict__ S, ELEM* __restrict__ C,
            int M, int N, int K, unsigned char* __restrict__ workspace)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    extern __shared__ __align__(16) unsigned char smem_raw[];
    const unsigned base = ((unsigned)__cvta_generic_to_shared(smem_raw) + 1023u) & ~1023u;
    /* 1024-aligned: stages are 48, 32, 24 or 16 KB */
    const unsigned stg = base + STG_AT;
    /* full[s] at +8s, empty[s] at +8(STAGES+s) */
    const unsigned bars = base + STAGES * STAGE_BYTES + (PERSIST ? STG_BYTES : 0);

    const int tid = threadIdx.x;
    const int wg = tid >> 7;                            /* 0: producer, 1-2: consumers */
    const int ktiles = (K + BK - 1) / BK;
    const bool short_k = K <= L2_KEEP_K;               /* B kept in the L2, C streamed past */
    const int mt = (M + BM - 1) / BM, nt = (N + BN - 1) / BN;
    const int tiles = mt * nt;
    __shared__ Walk walk;
    if (tid == 0) {
        const int G = gridDim.x, rem = tiles % G, qm = (int)((long long)rem * ktiles / G);
        /* stream-K where the heads are long enough to pay for the partials' traffic, a tile
           has at most ~10 contributors (G <= 9 rem) and a spare CTA writes at most ~4
           partials (4 rem <= 3 G); else whole tiles only */
        const bool sk = STREAMK && rem > 0 && qm >= SK_MIN_KTILES && G <= 9 * rem && 4 * rem <= 3 * G;
        /* STREAMK 2: g parts a tile, each at least SK_MIN_KTILES long, at most ~10 */
        const int g = rem > 0 ? G / rem : 0;
        const bool sk2 = rem > 0 && g >= 2 && g <= 10 && ktiles >= g * SK_MIN_KTILES;
        walk.g = g;
        walk.rem = (STREAMK == 2 ? sk2 : sk) ? rem : 0;
        walk.dp = tiles - walk.rem;
        walk.ndp = walk.dp > (int)blockIdx.x ? (walk.dp - (int)blockIdx.x + G - 1) / G : 0;
        walk.qm = qm;
        walk.tl = ktiles - qm;
        walk.L = rem * (ktiles - qm);
    }

    if (tid == 0) {
        unsigned dyn;
        asm("mov.u32 %0, %%dynamic_smem_size;\n" : "=r"(dyn));
        if (dyn < SMEM_NEEDED)                           /* the header's shared size disagrees */
            __trap();
#pragma unroll
        for (int s = 0; s < STAGES; ++s) {
            mbar_init(bars + 8 * s, 1);                  /* the producer's arrive + tx bytes */
            mbar_init(bars + 8 * (STAGES + s), 128 * (PINGPONG ? 1 : CONSUMERS));   /* its consumers' threads */
        }
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
#if CONSUMERS == 2
    /* register hand-over, warpgroup-uniform (setmaxnreg is .sync.aligned), before the roles
       diverge inside warpgroup 0 */
    if (wg == 0)
        asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" :: "n"(PRODUCER_REGS));
    else
        asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" :: "n"(CONSUMER_REGS));
#endif

    if (wg == 0) {
        if (tid == 0) {
            const void* tmA = &mapA;                    /* in the launch's parameter space */
            const void* tmB = &mapB;
            tensormap_prefetch(tmA);
            tensormap_prefetch(tmB);
            const unsigned long long keep = l2_policy_evict_last();
            int it = 0, t, kb, ke;
            for (int n = 0; walk.item(n, ktiles, t, kb, ke); ++n) {
                int row0, col0;
                tile_origin(t, mt, nt, GM, BM, BN, row0, col0);
                /* only the boxes with rows of A or columns of B inside: a box wholly past M
                   or N is not loaded (its stage bytes hold stale values, which reach only
                   rows or columns of C past M or N, never stored). Zeros past the edge are
                   not free: at full clock a last row of tiles mostly past M held the whole
                   grid back, at the base clock not (benchmarks/NOTES.md) */
                const int a_boxes = min(A_BOXES, (M - row0 + 63) / 64);
                const int b_boxes = min(B_BOXES, (N - col0 + 31) / 32);
                const unsigned tx = a_boxes * ABOX_BYTES + b_boxes * BBOX_BYTES;
                for (int kt = kb; kt < ke; ++kt, ++it) {
                    unsigned full;
                    const unsigned sa = ring_claim_stage<STAGES>(it, base, bars, STAGE_BYTES, full, tx);
#pragma unroll
                    for (int q = 0; q < A_BOXES; ++q)
                        if (q < a_boxes)
                            tma_load_2d(sa + q * ABOX_BYTES, tmA, kt * BK, row0 + 64 * q, full);
#pragma unroll
                    for (int j = 0; j < B_BOXES; ++j) {
                        if (j >= b_boxes)
                            break;
                        if (short_k)                     /* B's panels stay for the next tiles */
                            tma_load_2d_hint(sa + A_BYTES + j * BBOX_BYTES, tmB, col0 + 32 * j, kt * BK, full,
                                             keep);
                        else
                            tma_load_2d(sa + A_BYTES + j * BBOX_BYTES, tmB, col0 + 32 * j, kt * BK, full);
                    }
                }
            }
        }                                                /* warps 1-3 of warpgroup 0: idle */
#if KS > 1
        __syncwarp();
#pragma unroll
        for (int stride = 1; stride < KS; stride *= 2) { /* the consumers' meetings (below) */
            cluster_sync();
            cluster_sync();
        }
#endif
    } else {
        const int cw = wg - 1;
        const int warp = (tid >> 5) & 3, lane = tid & 31;
        const int g = lane >> 2, t4 = lane & 3;
        /* this lane's fragment rows g + 8h as columns of the tile (see the header): of slab
           cw's 64 columns, or with PINGPONG of slab 0's (slab sl: 64 sl columns on) */
        const int slab0 = PINGPONG ? 0 : cw;
        const unsigned box = A_BYTES + (2 * slab0 + warp / 2) * BBOX_BYTES;
        const unsigned chunk = (2 * (warp % 2) + g / 4) ^ (5 * ((g >> 1) & 1));
        const unsigned pair = 8 * (g % 2);
        int ncol[2];
#pragma unroll
        for (int h = 0; h < 2; ++h)
            ncol[h] = 32 * (2 * slab0 + warp / 2) + 4 * chunk + 2 * (g % 2) + h;
        float acc[SLABS * BM / 2];                      /* slab sl's at sl * BM / 2 */
        unsigned fr[2][4 * (BK / 8)];                   /* two buffers of KK_GROUP k-steps x SLABS */
        const bool lead = (tid & 127) == 0;
        const void* tmC = &mapC;
        const bool staged = (N & 3) == 0;              /* TMA stores need 16-byte rows */
        if (staged && lead)
            tensormap_prefetch(tmC);
        int it = 0, t, kb, ke;
        unsigned part = 0;                              /* staged parts so far: buffer part % STG_BUFS */
        /* PINGPONG: consumer cw takes items cw, cw + 2, ... (whole tiles: item n's first
           k-tile is ring position n * ktiles) */
        for (int n = PINGPONG ? cw : 0; walk.item(n, ktiles, t, kb, ke); n += PINGPONG ? 2 : 1) {
            int row0, col0;
            tile_origin(t, mt, nt, GM, BM, BN, row0, col0);
#pragma unroll
            for (int j = 0; j < SLABS * BM / 2; ++j)
                acc[j] = 0.f;
#if PINGPONG
            it = n * ktiles;
            if (n > 0)                                  /* the other has issued item n - 1 */
                consumers_wait<5>(cw);          /* named barriers 5 and 6 */
#endif
            /* two k-tiles per trip so that each fragment buffer is a fixed set of registers.
               A k-tile's k-steps go in SLABS groups of KK_GROUP, each group's fragments (all
               slabs) in one buffer while the other group's wgmmas run: two slabs' fragments
               for a whole k-tile, double-buffered, would not fit beside the accumulators */
            for (int kt = kb; kt < ke; kt += 2) {
#pragma unroll
                for (int u = 0; u < 2; ++u) {
                    if (kt + u < ke) {
                        const int s = it % STAGES;
                        mbar_wait(bars + 8 * s, (it / STAGES) & 1);                 /* A, B landed */
                        const unsigned sa = base + s * STAGE_BYTES;
#pragma unroll
                        for (int grp = 0; grp < SLABS; ++grp) {
                            unsigned* const f = fr[(u * SLABS + grp) & 1];
#pragma unroll
                            for (int sl = 0; sl < SLABS; ++sl)
                                load_fragments<KK_GROUP>(f + sl * 4 * KK_GROUP, sa, box + sl * 2 * BBOX_BYTES,
                                                         chunk, pair, t4, grp * KK_GROUP);
                            asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
#pragma unroll
                            for (int kk = 0; kk < KK_GROUP; ++kk)
#pragma unroll
                                for (int sl = 0; sl < SLABS; ++sl)
                                    wgmma_rs<BM>(acc + sl * (BM / 2), f + sl * 4 * KK_GROUP + kk * 4,
                                                 make_desc(sa + (grp * KK_GROUP + kk) * 32));
                            asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
                            asm volatile("wgmma.wait_group.sync.aligned 1;\n" ::: "memory");
                            if (grp == 0 && kt + u > kb)    /* k-tile it-1 read: release its stage */
                                mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
                        }
                        ++it;
                    }
                }
            }
#if PINGPONG
            if (n + 1 < walk.ndp)                       /* the other's next item: its turn */
                consumers_let_go<5>(1 - cw);
#endif
            asm volatile("wgmma.wait_group.sync.aligned 0;\n" ::: "memory");
            if (ke > kb)
                mbar_arrive(bars + 8 * (STAGES + (it - 1) % STAGES));
#if STREAMK
            if (kb > 0 || ke < ktiles) {                /* part of a tile: the last contributor stores it */
                const int a = t - walk.dp;
#if STREAMK == 2
                const SkParts sp = {a, walk.rem + a, walk.rem, walk.g - 1};
                const int slot = blockIdx.x;
#else
                const int S = gridDim.x - walk.rem;
                const int j0 = sk_spare_of(a * walk.tl, walk.L, S);
                const int j1 = sk_spare_of((a + 1) * walk.tl - 1, walk.L, S);
                const SkParts sp = {a, walk.rem + j0 + a, 1, j1 - j0 + 1};
                const int slot = kb == 0 ? a : walk.rem + ((int)blockIdx.x - walk.rem) + a;
#endif
                /* the 256 consumer threads meet at named barrier 3 */
                float4* const mine = reinterpret_cast<float4*>(partials_after_counters(workspace, tiles))
                                     + (size_t)slot * PART_VECS * 256;
                if (!partial_arrive<BM / 2, 256, 3>(acc, mine, reinterpret_cast<unsigned*>(workspace) + a,
                                                    1u + sp.count, tid - 128))
                    continue;                           /* not the last: its partial is in */
#if BM == 256
                sk_store(workspace, tiles, sp, tid - 128, C, M, N, row0, col0, t4, ncol);
                continue;
#else
                sk_sum(acc, workspace, tiles, sp, tid - 128);   /* then the epilogue */
#endif
            }
#endif

#if !PERSIST
            /* the staging area is the ring's start: every consumer's wgmmas have read it (wait_group 0) */
            asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
#if KS > 1
            {
                /* the CTAs of the cluster sum their parts of K through distributed shared
                   memory, as a tree: in the round of stride d (1, then 2 at KS 4), rank r with
                   r % 2d == d hands its accumulators to rank r - d, past that CTA's staging
                   area (float4 e of consumer thread ct at (e * 256 + ct) * 16: conflict-free),
                   which adds them to its own. The sums go in one order every launch ((r0 + r1)
                   + (r2 + r3)); rank 0 stores the tile. Each round's first meeting: the rings
                   drained (then the last round's reads done); the second: the copy landed */
                const unsigned rank = cluster_rank();
                const unsigned part = base + KS_PART_AT + (unsigned)(tid - 128) * 16u;
#pragma unroll
                for (unsigned d = 1; d < KS; d *= 2) {
                    cluster_sync();
                    if (rank % (2 * d) == d) {
                        const unsigned peer = map_peer(part, rank - d);
#pragma unroll
                        for (int e = 0; e < BM / 8; ++e)
                            asm volatile("st.shared::cluster.v4.f32 [%0], {%1, %2, %3, %4};\n"
                                         :: "r"(peer + e * 4096u), "f"(acc[4 * e]), "f"(acc[4 * e + 1]),
                                            "f"(acc[4 * e + 2]), "f"(acc[4 * e + 3]) : "memory");
                    }
                    cluster_sync();
                    if (rank % (2 * d) == 0 && rank + d < KS) {
#pragma unroll
                        for (int e = 0; e < BM / 8; ++e) {
                            float4 v;
                            asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                                         : "=f"(v.x), "=f"(v.y), "=f"(v.z), "=f"(v.w) : "r"(part + e * 4096u) : "memory");
                            acc[4 * e] += v.x; acc[4 * e + 1] += v.y; acc[4 * e + 2] += v.z; acc[4 * e + 3] += v.w;
                        }
                    }
                }
                if (rank != 0)
                    continue;                           /* rank 0 stores the tile */
            }
#endif
#if CONSUMERS == 2
            asm volatile("bar.sync 4, 256;\n" ::: "memory");
#endif
#endif
            /* d[j]: C^T row (fragment row) g + 8 ((j / 2) % 2) -> column ncol[h] of C;
               C^T column (j / 4) * 8 + 2 t + j % 2 -> row of C */
            if (staged) {
                /* PARTS parts of 64 rows (quarters at BM = 256), a consumer's parts taking its
                   STG_BUFS buffers (2 boxes of 64 rows x 32 columns each) in turn, across
                   tiles too; a buffer is free once all but the latest STG_BUFS - 1 of this
                   warpgroup's store groups have read theirs */
                const unsigned lane_at = (warp / 2) * QBOX_BYTES + pair;
#pragma unroll
                for (int sq = 0; sq < SLABS * PARTS; ++sq, ++part) {
                    const int sl = sq / PARTS, q = sq % PARTS;  /* slab sl's part q */
                    const unsigned buf = stg + (STG_BUFS * cw + part % STG_BUFS) * 2 * QBOX_BYTES;
                    if (lead)
                        bulk_wait_read<STG_BUFS - 1>();
                    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + cw) : "memory");
#pragma unroll
                    for (int jj = 0; jj < 32; jj += (jj & 1) ? 3 : 1) {     /* jj % 4 = 0, 1 */
                        const int j = q * 32 + jj;                         /* with j + 2: h = 0, 1 */
                        const unsigned r = (jj >> 2) * 8 + 2 * t4 + (j & 1);
                        const unsigned addr = buf + lane_at + r * 128u + ((chunk ^ (r & 7u)) << 4);
                        const float* const d = acc + sl * (BM / 2);
                        asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n"
                                     :: "r"(addr), "f"(d[j]), "f"(d[j + 2]) : "memory");
                    }
                    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
                    asm volatile("bar.sync %0, 128;\n" :: "r"(1 + cw) : "memory");
                    if (lead) {
                        const int c0 = col0 + 64 * (slab0 + sl);
                        if (short_k) {                   /* C streams past A's and B's panels */
                            const unsigned long long pass = l2_policy_evict_first();
                            tma_store_2d_hint(tmC, c0, row0 + 64 * q, buf, pass);
                            tma_store_2d_hint(tmC, c0 + 32, row0 + 64 * q, buf + QBOX_BYTES, pass);
                        } else {
                            tma_store_2d(tmC, c0, row0 + 64 * q, buf);
                            tma_store_2d(tmC, c0 + 32, row0 + 64 * q, buf + QBOX_BYTES);
                        }
                        bulk_commit();
                    }
                }
            } else {
#pragma unroll
                for (int sl = 0; sl < SLABS; ++sl)
#pragma unroll
                    for (int j = 0; j < BM / 2; ++j)
                        store_acc_element(C, M, N, row0, col0 + 64 * sl, t4, ncol, j, acc[sl * (BM / 2) + j]);
            }
        }
        if (staged && lead)
            bulk_wait<0>();                             /* the last tile's stores complete */
    }
#else
    __trap();                                           /* built for a target without wgmma */
#endif
}
