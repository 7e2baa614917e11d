/* half.cuh: what the 16-bit (FP16/BF16) kernel files share: the input types, the FP32
 * accumulators' conversion to the output type (and int8's int32 sums' store), and
 * mma.sync's m16n8k16 step per input type; the persistent wgmma steps' walk over tiles and
 * stream-K pieces. Included by the ladder's 16-bit and 8-bit steps only, so that the FP32
 * kernels including lab_ptx.cuh do not parse cuda_fp16.h / cuda_bf16.h. */
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>
#include "lab_ptx.cuh"

/* An FP32 accumulator stored in C's type (OUT), rounded to nearest even. */
__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }
/* Two neighbours in one store (p aligned to the pair): C in 16-bit types is written in
 * 4-byte words, not 2-byte ones. */
__device__ __forceinline__ void store_out_pair(float* p, float x, float y)
{ *reinterpret_cast<float2*>(p) = make_float2(x, y); }
__device__ __forceinline__ void store_out_pair(__half* p, float x, float y)
{ *reinterpret_cast<__half2*>(p) = __floats2half2_rn(x, y); }
__device__ __forceinline__ void store_out_pair(__nv_bfloat16* p, float x, float y)
{ *reinterpret_cast<__nv_bfloat162*>(p) = __floats2bfloat162_rn(x, y); }
/* int8's exact int32 sums, stored as they are (no scale, no rounding) */
__device__ __forceinline__ void store_out(int* p, int v) { *p = v; }
__device__ __forceinline__ void store_out_pair(int* p, int x, int y)
{ *reinterpret_cast<int2*>(p) = make_int2(x, y); }
__device__ __forceinline__ float scaled(float v, float scale) { return scale * v; }
__device__ __forceinline__ int scaled(int v, float) { return v; }

/* Two neighbours rounded to a 16-bit C's type, as one 32-bit word (the lower column low). */
__device__ __forceinline__ unsigned pack_out_pair(const __half*, float x, float y)
{ const __half2 h = __floats2half2_rn(x, y); return *reinterpret_cast<const unsigned*>(&h); }
__device__ __forceinline__ unsigned pack_out_pair(const __nv_bfloat16*, float x, float y)
{ const __nv_bfloat162 h = __floats2bfloat162_rn(x, y); return *reinterpret_cast<const unsigned*>(&h); }

/* A 16-bit C where N % 4 == 0: a quad's two pairs of a row in two 8-column blocks (16 bytes
 * each, half a sector) become, after two shuffles, 4 consecutive columns a lane, so that one
 * 8-byte store a lane writes the row's 32 bytes, a whole sector: lane t takes columns
 * 4t..4t+3 of the 16. */
template <int COLS, typename OUT_T>
__device__ __forceinline__ void store_wgmma_out_quads(const float* d, OUT_T* C, int row0, int col0,
                                                      int M, int N, int warp, int lane, float scale)
{
    const int t = lane & 3;
#pragma unroll
    for (int j = 0; j < COLS / 2; j += 8) {
#pragma unroll
        for (int h = 0; h < 2; ++h) {                 /* rows g and g + 8 */
            const int ja = j + 2 * h, jb = ja + 4;    /* the row's pairs in blocks 2 j/8 and 2 j/8 + 1 */
            const unsigned a = pack_out_pair(C, scale * d[ja], scale * d[ja + 1]);
            const unsigned b = pack_out_pair(C, scale * d[jb], scale * d[jb + 1]);
            /* lanes t and t ^ 2 swap: 0, 1 keep their first block's pair and take the
             * partner's; 2, 3 the second block's */
            const unsigned got = __shfl_xor_sync(0xffffffffu, t < 2 ? b : a, 2);
            unsigned w0 = t < 2 ? a : got, w1 = t < 2 ? got : b;
            /* lanes t and t ^ 1 swap: even lanes keep their lower pair, odd their upper */
            const unsigned got2 = __shfl_xor_sync(0xffffffffu, (t & 1) ? w0 : w1, 1);
            if (t & 1) w0 = got2; else w1 = got2;
            const int row = row0 + warp * 16 + (lane >> 2) + 8 * h;
            const int col = col0 + (j >> 3) * 16 + 4 * t;
            if (row < M && col < N)                   /* N % 4 == 0: col + 3 < N too */
                *reinterpret_cast<uint2*>(C + (size_t)row * N + col) = make_uint2(w0, w1);
        }
    }
}

/* A warpgroup's wgmma accumulators (f32 D fragments of an m64nCOLS tile times scale, or
 * int8's s32 ones as they are) into C (row-major M x N, of type OUT_T) at rows row0..,
 * columns col0..: d[j] of lane (g, t) in
 * warp w is row 16 w + g + 8 ((j / 2) % 2), column (j / 4) * 8 + 2 t + j % 2 (the layout of
 * lab_ptx.cuh's FP32 store_wgmma_acc); pairs in one store where N is even (col is), a 16-bit
 * C's 4 columns a lane where N % 4 == 0; rows >= M and columns >= N are not written. */
template <int COLS, typename OUT_T, typename ACC_T>
__device__ __forceinline__ void store_wgmma_out(const ACC_T* d, OUT_T* C, int row0, int col0,
                                                int M, int N, int warp, int lane, float scale = 1.0f)
{
    if constexpr (sizeof(OUT_T) == 2) {
        if ((N & 3) == 0) {
            store_wgmma_out_quads<COLS>(d, C, row0, col0, M, N, warp, lane, scale);
            return;
        }
    }
    const bool pairs = (N & 1) == 0;
#pragma unroll
    for (int j = 0; j < COLS / 2; j += 2) {
        const int row = row0 + warp * 16 + (lane >> 2) + 8 * ((j >> 1) & 1);
        const int col = col0 + (j >> 2) * 8 + (lane & 3) * 2;
        if (row >= M)
            continue;
        const size_t at = (size_t)row * N + col;
        const ACC_T x = scaled(d[j], scale), y = scaled(d[j + 1], scale);
        if (pairs && col + 1 < N) {
            store_out_pair(C + at, x, y);
        } else if (col + 1 < N) {
            store_out(C + at, x);
            store_out(C + at + 1, y);
        } else if (col < N) {
            store_out(C + at, x);
        }
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* Bytes of one consumer warpgroup's staging for TMA stores of C: two buffers of one box (64
 * rows × 128 bytes). */
#define C_STAGE_BYTES (2 * 64 * 128)

/* Whether a consumer's 64 × COLS tile of C in OUT_T fills whole 128-byte boxes (a 16-bit C
 * at a width of 160 or 224 would leave half a box, whose store would cross into the next
 * tile: those keep store_wgmma_out). */
template <int COLS, typename OUT_T>
__device__ constexpr bool c_boxes_whole() { return (COLS * sizeof(OUT_T)) % 128 == 0; }

/* A warpgroup's wgmma accumulators (64 × COLS of C at rows row0.., columns col0..; lane
 * layout as store_wgmma_out's) out by TMA stores through its staging (stg: 2 boxes of 64
 * rows × 128 bytes, 1024-aligned), a box (32 floats or 64 16-bit values a row) at a time:
 * the lanes write a box into a free buffer in the 128-byte swizzle (16-byte chunk c of row r
 * at c ^ (r % 8): a warp's 8 rows of a store fall in different banks), fence the writes to
 * the async proxy, meet at named barrier `bar` (the warpgroup's 128 threads), and the lead
 * thread stores the box (tmC: C in 4-byte units, box 32 × 64; rows and columns past C are
 * not written) and commits it. The warpgroup goes on to its next tile while the copy engine
 * writes C: the buffers alternate (part counts boxes across tiles), and a buffer is reused
 * once all but the latest of the lead's store groups have read theirs. The lead waits for
 * the last group before the CTA exits (bulk_wait<0>). */
template <int COLS, typename OUT_T>
__device__ __forceinline__ void store_wgmma_out_tma(const float* d, unsigned stg, const void* tmC,
                                                    int row0, int col0, int warp, int lane,
                                                    bool lead, unsigned bar, unsigned& part)
{
    constexpr int OB = sizeof(OUT_T), BOX_COLS = 128 / OB, BLOCKS = BOX_COLS / 8;
    static_assert(c_boxes_whole<COLS, OUT_T>(), "a 64 x COLS tile of C in whole 128-byte boxes");
    const int g = lane >> 2, t = lane & 3;
#pragma unroll
    for (int box = 0; box < COLS / BOX_COLS; ++box, ++part) {
        const unsigned buf = stg + (part & 1) * (64 * 128);
        if (lead)
            bulk_wait_read<1>();
        asm volatile("bar.sync %0, 128;\n" :: "r"(bar) : "memory");
#pragma unroll
        for (int b = 0; b < BLOCKS; ++b) {           /* the box's 8-column blocks */
#pragma unroll
            for (int h = 0; h < 2; ++h) {            /* rows g and g + 8 */
                const int j = 4 * (box * BLOCKS + b) + 2 * h;
                const unsigned r = warp * 16 + g + 8 * h;
                /* the pair's byte offset in the row: (8 b + 2 t) OB */
                const unsigned at = (8 * b + 2 * t) * OB, chunk = at >> 4;
                const unsigned addr = buf + r * 128 + ((chunk ^ (r & 7)) << 4) + (at & 15);
                if constexpr (OB == 4)
                    asm volatile("st.shared.v2.f32 [%0], {%1, %2};\n"
                                 :: "r"(addr), "f"(d[j]), "f"(d[j + 1]) : "memory");
                else
                    asm volatile("st.shared.b32 [%0], %1;\n"
                                 :: "r"(addr), "r"(pack_out_pair((const OUT_T*)nullptr, d[j], d[j + 1]))
                                 : "memory");
            }
        }
        asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
        asm volatile("bar.sync %0, 128;\n" :: "r"(bar) : "memory");
        if (lead) {
            tma_store_2d(tmC, (col0 + box * BOX_COLS) * OB / 4, row0, buf);
            bulk_commit();
        }
    }
}

/* A consumer's release of the stage whose empty barrier is `bar`: its threads arrive here
 * and, in a cluster of two (CLUSTER_ 2, this CTA `rank`), lane 0 of each warp on the peer's
 * barrier too, since the peer's multicast refills this CTA's stage as well (an arrive with
 * the default semantics: it says only that this warp's wgmma reads of the stage are done). */
template <int CLUSTER_>
__device__ __forceinline__ void release_stage(unsigned bar, unsigned rank, int lane)
{
    static_assert(CLUSTER_ == 1 || CLUSTER_ == 2, "release_stage: one CTA or a pair (the peer is rank ^ 1)");
    mbar_arrive(bar);
    if constexpr (CLUSTER_ > 1) {
        if (lane == 0)
            mbar_arrive_peer(map_peer(bar, rank ^ 1));
    }
}

/* The 16-bit TMA steps' producer, ring position `it` of a STAGES_-deep ring of stages of
 * BM_ × 64 of A and 64 × BN_ of B (16-bit, 128-byte swizzle) from `base`, full[s] / empty[s]
 * mbarriers at bars + 8 s / + 8 (STAGES_ + s): once the stage's previous use is released,
 * its bytes announced and k-tile kt of A's rows row0.. and B's columns col0.. copied in
 * (B as N×K one box of BN_ rows; as K×N cdiv(BN_, 64) boxes of 64 columns, 8 KB each). In a
 * cluster of CLUSTER_ CTAs (rank: this CTA's) the operand they share is loaded 1/CLUSTER_ by
 * each into every CTA of the cluster: A's rows (SHARED_B_ = 0: CTAs on the same rows, A's
 * map has boxes of BM_ / CLUSTER_ rows) or B's (1: CTAs on the same columns, B's boxes of
 * BN_ / CLUSTER_ rows as N×K, of 64 / CLUSTER_ k as K×N). */
template <int STAGES_, int BM_, int BN_, int B_NK_, int CLUSTER_ = 1, int SHARED_B_ = 0>
__device__ __forceinline__ void load_half_k_tile(int it, unsigned base, unsigned bars, const void* tmA,
                                                 const void* tmB, int row0, int col0, int kt,
                                                 unsigned rank = 0)
{
    /* a stage has room for B in whole 64-column boxes (both layouts: the same ring for
       either); B as N×K fills BN_ rows of it */
    constexpr unsigned A_BYTES_ = BM_ * 64 * 2, B_ROOM_ = 64 * ((BN_ + 63) / 64) * 64 * 2;
    constexpr unsigned STAGE_BYTES_ = A_BYTES_ + B_ROOM_;
    constexpr unsigned TX_BYTES_ = A_BYTES_ + (B_NK_ ? BN_ * 64 * 2 : B_ROOM_);
    constexpr unsigned short ALL = (unsigned short)((1u << CLUSTER_) - 1);
    unsigned full;
    const unsigned sa = ring_claim_stage<STAGES_>(it, base, bars, STAGE_BYTES_, full, TX_BYTES_);
    if constexpr (CLUSTER_ == 1 || SHARED_B_) {
        tma_load_2d(sa, tmA, kt * 64, row0, full);
    } else {
        constexpr int ROWS = BM_ / CLUSTER_;        /* whole 8-row swizzle atoms: the halves
                                                       lie as one box of BM_ rows would */
        tma_load_2d_multicast(sa + rank * ROWS * 128, tmA, kt * 64, row0 + rank * ROWS, full, ALL);
    }
    if constexpr (CLUSTER_ > 1 && SHARED_B_) {
        if constexpr (B_NK_) {                       /* BN_ / CLUSTER_ rows of N: whole atoms */
            constexpr int ROWS = BN_ / CLUSTER_;
            tma_load_2d_multicast(sa + A_BYTES_ + rank * ROWS * 128, tmB, kt * 64, col0 + rank * ROWS,
                                  full, ALL);
        } else {                                     /* each 64-column box's k rows in parts */
            constexpr int KS = 64 / CLUSTER_;
#pragma unroll
            for (int j = 0; j < (BN_ + 63) / 64; ++j)
                tma_load_2d_multicast(sa + A_BYTES_ + j * 8192 + rank * KS * 128, tmB, col0 + 64 * j,
                                      kt * 64 + rank * KS, full, ALL);
        }
    } else if constexpr (B_NK_) {
        tma_load_2d(sa + A_BYTES_, tmB, kt * 64, col0, full);
    } else {
#pragma unroll
        for (int j = 0; j < (BN_ + 63) / 64; ++j)
            tma_load_2d(sa + A_BYTES_ + j * 8192, tmB, col0 + 64 * j, kt * 64, full);
    }
}
#endif

/* The work of one CTA of a persistent grid (G = gridDim.x CTAs) as pieces: a tile (in
 * tile_origin's order) and the k-tiles [kb, ke) of it that this CTA computes. Tiles below dp
 * come whole, CTA b taking b, b + G, ... With stream-K (sk), the last partial wave's rem
 * tiles (dp = tiles - rem) are shared along K: their k-tiles, L = rem · ktiles in tile-major
 * order, are cut into S = min(G, max(1, L / MIN_RANGE)) contiguous ranges, none empty and
 * none shorter than MIN_RANGE k-tiles where L allows, CTA b < S taking [b L / S,
 * (b + 1) L / S) (a longer least range: fewer partials for the CTA that sums a tile to read
 * back, at the price of fewer CTAs sharing the tail). A tile's pieces then come from CTAs
 * first(a) .. last(a), in k order; a piece's partial slot is b + a (each next piece of the
 * order starts a new CTA's range or a new tile: unique, and fewer than 2 G). Producer and
 * consumers walk the same pieces. */
template <int MIN_RANGE = 1>
struct TileWalk {
    int ktiles, G, b, dp, rem, ndp, S;

    /* G CTAs, this one b (gridDim.x, blockIdx.x; host code: tests/test_half_streamk.py) */
    __host__ __device__ __forceinline__ TileWalk(int tiles, int ktiles_, bool sk, int G_, int b_)
        : ktiles(ktiles_), G(G_), b(b_)
    {
        rem = sk ? tiles % G : 0;
        dp = tiles - rem;
        ndp = dp > b ? (dp - b + G - 1) / G : 0;
        if constexpr (MIN_RANGE == 1) {              /* as before the least range: the general
                                                        form costs step 32's 64 × 128 build a spill */
            S = (long long)G < (long long)rem * ktiles ? G : rem * ktiles;
        } else {                                     /* ranges of MIN_RANGE k-tiles up */
            const long long L = (long long)rem * ktiles;
            const long long most = L / MIN_RANGE > 1 ? L / MIN_RANGE : (L > 0 ? 1 : 0);
            S = (long long)G < most ? G : (int)most;
        }
    }
    /* the CTA whose range of the shared k-tiles holds position y: the largest b with
       b L / S <= y */
    __host__ __device__ __forceinline__ int owner(int y) const
    {
        const long long L = (long long)rem * ktiles;
        return (int)(((long long)(y + 1) * S + L - 1) / L) - 1;
    }
    /* piece n of this CTA (false: none): its tile, k-tiles and, for a shared tile, its index
       a among the rem (-1 for a whole tile) */
    __host__ __device__ __forceinline__ bool piece(int n, int& tile, int& kb, int& ke, int& a) const
    {
        if (n < ndp) {
            tile = b + n * G; kb = 0; ke = ktiles; a = -1;
            return true;
        }
        n -= ndp;
        if (b >= S)                                  /* S = 0 without stream-K */
            return false;
        const long long L = (long long)rem * ktiles;
        const int s = (int)(b * L / S), e = (int)((b + 1) * L / S);
        const int y = n == 0 ? s : (s / ktiles + n) * ktiles;
        if (y >= e)
            return false;
        a = y / ktiles;
        tile = dp + a;
        kb = y - a * ktiles;
        ke = e - a * ktiles < ktiles ? e - a * ktiles : ktiles;
        return true;
    }
};

/* A stream-K piece's accumulators (COUNT a consumer thread, NT_ consumer threads, this one
 * ct) into its partial slot, counted in its tile's arrivals (named barrier BAR among the
 * consumers); in the CTA that arrives last, acc becomes the sum of the tile's partials in k
 * order (CTAs first .. last: bitwise the same whoever came last) and true is returned: it
 * stores the tile. Workspace: rem counters (256-byte aligned, as partials_after_counters
 * with `tiles`), then 16-byte-word-major slots of COUNT · NT_ floats. BAR -1: the barrier
 * `bar` and the verdict's `flag` chosen at run time (partial_arrive). */
template <int COUNT, int NT_, int BAR, int MIN_RANGE>
__device__ __forceinline__ bool streamk_piece(float (&acc)[COUNT], const TileWalk<MIN_RANGE>& walk, int a,
                                              unsigned char* workspace, int tiles, int ct,
                                              int bar = BAR, bool* flag = nullptr)
{
    constexpr size_t SLOT4 = (size_t)(COUNT / 4) * NT_;          /* 16-byte words a slot */
    float4* const slots = reinterpret_cast<float4*>(partials_after_counters(workspace, tiles));
    const int first = walk.owner(a * walk.ktiles), last = walk.owner(a * walk.ktiles + walk.ktiles - 1);
    if (!partial_arrive<COUNT, NT_, BAR>(acc, slots + (size_t)(walk.b + a) * SLOT4,
                                         reinterpret_cast<unsigned*>(workspace) + a,
                                         (unsigned)(last - first + 1), ct, bar, flag))
        return false;
#pragma unroll
    for (int j = 0; j < COUNT; ++j)
        acc[j] = 0.f;
#pragma unroll 1
    for (int b = first; b <= last; ++b) {
        const float4* const part = slots + (size_t)(b + a) * SLOT4;
#pragma unroll
        for (int e = 0; e < COUNT / 4; ++e) {
            const float4 x = __ldcg(&part[e * NT_ + ct]);
            acc[4 * e] += x.x; acc[4 * e + 1] += x.y; acc[4 * e + 2] += x.z; acc[4 * e + 3] += x.w;
        }
    }
    return true;
}

/* The 16-bit TMA steps' pre-pass (a (32, 8) block each): Ap (M × Kp) where K % PE_, then Bp
 * where B's rows are short of a multiple of PEB_ elements (B_NK_: B stored N×K, padded to
 * Kp; else K×N, padded to Np), zero-padded. PE_ = 8: every row TMA reads a multiple of 16 bytes
 * (TMA needs it); 64: of 128, so that no row starts inside an L2 line. A block copies 32 rows
 * x 256 elements (lab_ptx.cuh's copy_padded_rows: 8 elements a thread and row, 16 bytes at a
 * time where the source rows allow it). grid.y covers A's 32-row tiles (when padded) then
 * B's, grid.x the padded row length in 256s. */
template <int B_NK_, int PE_, int PEB_ = PE_, typename ELEM_T>
__device__ __forceinline__ void pad_short_rows(const ELEM_T* __restrict__ A, const ELEM_T* __restrict__ B,
                                               ELEM_T* __restrict__ S, int M, int N, int K)
{
    static_assert(PE_ % 8 == 0 && PEB_ % 8 == 0 && sizeof(ELEM_T) == 2,
                  "padded rows are whole 16-byte words of 16-bit elements");
    const int Kp = (K + PE_ - 1) & ~(PE_ - 1);
    const int Kpb = (K + PEB_ - 1) & ~(PEB_ - 1), Np = (N + PEB_ - 1) & ~(PEB_ - 1);
    const bool pad_a = K % PE_ != 0, pad_b = B_NK_ ? K % PEB_ != 0 : N % PEB_ != 0;
    const int ay = pad_a ? (M + 31) / 32 : 0;
    if ((int)blockIdx.y < ay)
        copy_padded_rows<2>(A, S, M, K, Kp, blockIdx.y * 32, blockIdx.x * 32);
    else if (pad_b)
        copy_padded_rows<2>(B, S + (pad_a ? (size_t)M * Kp : 0), B_NK_ ? N : K, B_NK_ ? K : N,
                            B_NK_ ? Kpb : Np, (blockIdx.y - ay) * 32, blockIdx.x * 32);
}

/* D = A·B + D for one m16n8k16 fragment (sm_80+), FP32 accumulators; the input type
 * (the last argument, a tag: ELEM()) picks the instruction. */
__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], __half)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

__device__ __forceinline__ void mma16816(float (&d)[4], const unsigned (&a)[4], const unsigned (&b)[2], __nv_bfloat16)
{
    asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.bf16.bf16.f32 "
                 "{%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, {%0, %1, %2, %3};\n"
                 : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
                 : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "r"(b[0]), "r"(b[1]));
}

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* wgmma.mma_async m64nNk16, FP16 or BF16 inputs (T) -> FP32: D(64 x N) += A(64 x 16) .
 * B(16 x N), both from shared memory through descriptors; A K-major, B K-major (TNSP_B_ = 0:
 * B stored N x K) or MN-major (1: B stored K x N, rows of N). d[] are this thread's N / 2
 * accumulators (lane layout as store_wgmma_acc's). N is any multiple of 32 from 64 to 256:
 * the tile width is a parameter, so one asm form serves them all; its register list is
 * built from blocks of 16 operands (%3 on: the descriptors and the scale flag come first,
 * as read-write operands, so that their numbers do not depend on N). accumulate = 0 (a
 * tile's first k-step) sets D = A.B: zeroing d[] by ordinary instructions instead makes
 * ptxas serialize every wgmma of the loop (warning C7515). Asynchronous: issue
 * between wgmma.fence and wgmma.commit_group, read d[] only after wgmma.wait_group. */
#define HALF_WG_O16(i) "+f"(d[(i) + 0]), "+f"(d[(i) + 1]), "+f"(d[(i) + 2]), "+f"(d[(i) + 3]), \
    "+f"(d[(i) + 4]), "+f"(d[(i) + 5]), "+f"(d[(i) + 6]), "+f"(d[(i) + 7]), "+f"(d[(i) + 8]), \
    "+f"(d[(i) + 9]), "+f"(d[(i) + 10]), "+f"(d[(i) + 11]), "+f"(d[(i) + 12]), "+f"(d[(i) + 13]), \
    "+f"(d[(i) + 14]), "+f"(d[(i) + 15])
#define HALF_WG_O1 HALF_WG_O16(0)
#define HALF_WG_O2 HALF_WG_O1, HALF_WG_O16(16)
#define HALF_WG_O3 HALF_WG_O2, HALF_WG_O16(32)
#define HALF_WG_O4 HALF_WG_O3, HALF_WG_O16(48)
#define HALF_WG_O5 HALF_WG_O4, HALF_WG_O16(64)
#define HALF_WG_O6 HALF_WG_O5, HALF_WG_O16(80)
#define HALF_WG_O7 HALF_WG_O6, HALF_WG_O16(96)
#define HALF_WG_O8 HALF_WG_O7, HALF_WG_O16(112)
#define HALF_WG_D1 "%3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18"
#define HALF_WG_D2 HALF_WG_D1 ", %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34"
#define HALF_WG_D3 HALF_WG_D2 ", %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50"
#define HALF_WG_D4 HALF_WG_D3 ", %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66"
#define HALF_WG_D5 HALF_WG_D4 ", %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82"
#define HALF_WG_D6 HALF_WG_D5 ", %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98"
#define HALF_WG_D7 HALF_WG_D6 ", %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114"
#define HALF_WG_D8 HALF_WG_D7 ", %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127, %128, %129, %130"
#define HALF_WGMMA_ASM(NSTR, BLOCKS, TY, TN)                                                   \
    asm volatile("{\n.reg .pred p;\nsetp.ne.b32 p, %2, 0;\n"                                   \
                 "wgmma.mma_async.sync.aligned.m64n" NSTR "k16.f32." TY "." TY " "              \
                 "{" HALF_WG_D##BLOCKS "}, %0, %1, p, 1, 1, 0, " TN ";\n}\n"                    \
                 : "+l"(da), "+l"(db), "+r"(one), HALF_WG_O##BLOCKS)
#define HALF_WGMMA_CASE(NN, NSTR, BLOCKS)                                                      \
    if constexpr (N_ == NN) {                                                                  \
        if constexpr (BF16 && TNSP_B_) HALF_WGMMA_ASM(NSTR, BLOCKS, "bf16", "1");              \
        else if constexpr (BF16) HALF_WGMMA_ASM(NSTR, BLOCKS, "bf16", "0");                    \
        else if constexpr (TNSP_B_) HALF_WGMMA_ASM(NSTR, BLOCKS, "f16", "1");                  \
        else HALF_WGMMA_ASM(NSTR, BLOCKS, "f16", "0");                                         \
    }
template <typename T> struct IsBf16 { static constexpr bool value = false; };
template <> struct IsBf16<__nv_bfloat16> { static constexpr bool value = true; };
template <typename T> struct IsHalf { static constexpr bool value = false; };
template <> struct IsHalf<__half> { static constexpr bool value = true; };
template <int N_, int TNSP_B_, typename T>
__device__ __forceinline__ void wgmma_k16(float* d, unsigned long long da, unsigned long long db,
                                          unsigned accumulate = 1)
{
    static_assert(N_ % 32 == 0 && N_ >= 64 && N_ <= 256, "wgmma_k16: N is a multiple of 32, 64..256");
    constexpr bool BF16 = IsBf16<T>::value;
    static_assert(BF16 || IsHalf<T>::value, "wgmma_k16: T is __half or __nv_bfloat16");
    unsigned one = accumulate;                          /* scale-d: D += A.B, or 0: D = A.B */
    HALF_WGMMA_CASE(64, "64", 2)
    HALF_WGMMA_CASE(96, "96", 3)
    HALF_WGMMA_CASE(128, "128", 4)
    HALF_WGMMA_CASE(160, "160", 5)
    HALF_WGMMA_CASE(192, "192", 6)
    HALF_WGMMA_CASE(224, "224", 7)
    HALF_WGMMA_CASE(256, "256", 8)
}
#undef HALF_WGMMA_CASE

/* wgmma descriptor of an MN-major operand in the 128-byte swizzle (B stored K x N): rows of
 * 64 elements (128 B) along N, one per k, 8-row atoms 1024 B apart (stride byte offset) and
 * the next 64 columns lbo bytes on (leading byte offset); swizzle mode 1 (128B). */
__device__ __forceinline__ unsigned long long make_desc_mn(unsigned addr, unsigned lbo)
{
    unsigned long long d = 0;
    d |= (unsigned long long)((addr & 0x3FFFF) >> 4);
    d |= (unsigned long long)((lbo >> 4) & 0x3FFF) << 16;
    d |= (unsigned long long)(1024 >> 4) << 32;
    d |= (unsigned long long)1 << 62;
    return d;
}
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */
