/* lab_ptx.cuh: the inline-PTX helpers that several kernel files share.
 *
 * Each helper is a __device__ __forceinline__ wrapper around one PTX instruction (or a fixed
 * sequence of a few), written once here instead of copied into every kernel that needs it; the
 * kernels keep their own main loops and the helpers only they use. Kernel files include it as
 * `#include "lab_ptx.cuh"`: every nvcc command of the lab (engine/backends/cuda.py, the tests)
 * passes -I<repo>/cuda, so a copy of a kernel written elsewhere (main.py new-kernel) finds it.
 * A change here changes the SASS of every kernel that includes it: run
 * tests/test_nvcc_compile.py (and time the kernels) after editing.
 */
#pragma once

/* PAD_B = 1 (bcopy = 1 of ffma_regdb and ffma_wide): B arrives as a copy whose rows are padded to LDB =
 * roundup(N, 4) floats with zeros (a pre-pass, pad_b_rows), so every B row is 16-byte aligned
 * and every copy takes the 16-byte path whatever N is; C keeps its N columns. */
#ifndef PAD_B
#define PAD_B 0
#endif
#if PAD_B
#define LDB_OF(n) (((n) + 3) & ~3)
#else
#define LDB_OF(n) (n)
#endif

/* --- cp.async (sm_80+): asynchronous global -> shared copies ------------------------------- */
/* Each copy takes the destination as a 32-bit shared-state-space address (`unsigned`), or as a
 * generic pointer into shared memory, converted with __cvta_generic_to_shared (the same
 * instructions either way once inlined). */

/* cp.async.ca, 4 bytes (.ca: the L1-caching variant, the only one that takes 4-byte copies;
 * for single elements, e.g. where a row is not 16-byte aligned). `in` false zero-fills the
 * destination (src-size 0) instead of reading: bounds checks without branches. */
__device__ __forceinline__ void cp_async4(unsigned s, const void* gmem, bool in)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4, %2;\n" :: "r"(s), "l"(gmem), "r"(in ? 4 : 0));
}

__device__ __forceinline__ void cp_async4(void* smem, const void* gmem, bool in)
{
    cp_async4((unsigned)__cvta_generic_to_shared(smem), gmem, in);
}

/* cp.async.cg, 16 bytes (.cg: cached in L2 only, bypassing L1: a block reads each tile once);
 * `in` false zero-fills. */
__device__ __forceinline__ void cp_async16(unsigned s, const void* gmem, bool in)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" :: "r"(s), "l"(gmem), "r"(in ? 16 : 0));
}

__device__ __forceinline__ void cp_async16(void* smem, const void* gmem, bool in)
{
    cp_async16((unsigned)__cvta_generic_to_shared(smem), gmem, in);
}

/* The same copies for interior tiles: no bounds, no src-size operand (fewer integer
 * instructions per copy). */
__device__ __forceinline__ void cp_async4_full(unsigned s, const void* gmem)
{
    asm volatile("cp.async.ca.shared.global [%0], [%1], 4;\n" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void cp_async4_full(void* smem, const void* gmem)
{
    cp_async4_full((unsigned)__cvta_generic_to_shared(smem), gmem);
}

__device__ __forceinline__ void cp_async16_full(unsigned s, const void* gmem)
{
    asm volatile("cp.async.cg.shared.global [%0], [%1], 16;\n" :: "r"(s), "l"(gmem));
}

__device__ __forceinline__ void cp_async16_full(void* smem, const void* gmem)
{
    cp_async16_full((unsigned)__cvta_generic_to_shared(smem), gmem);
}

/* cp.async.commit_group: closes the group of this thread's copies issued since the last
 * commit (one group per pipeline stage). */
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }

/* cp.async.wait_group N: waits until at most N of this thread's groups are still in flight
 * (e.g. N = STAGES - 2 keeps the next stages loading); other threads' copies need a barrier
 * as well. The "memory" clobber keeps the compiler from moving shared-memory reads above the
 * wait (16_pipelined .. 20_tf32_mma had their own version without it: same SASS either way). */
template <int N_>
__device__ __forceinline__ void cp_async_wait() { asm volatile("cp.async.wait_group %0;\n" :: "n"(N_) : "memory"); }

/* --- ldmatrix (sm_75+): four 8 x 8 matrices of 16-bit elements from shared memory ---------- */
/* Lanes 8i..8i+7 give the row addresses (32-bit shared-state-space) of matrix i; each lane
 * receives, in r[i], two consecutive elements of row lane / 4 of matrix i (.trans: of its
 * transpose) -- the mma.sync fragment layouts. */
__device__ __forceinline__ void ldmatrix_x4(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

__device__ __forceinline__ void ldmatrix_x4_trans(unsigned (&r)[4], unsigned addr)
{
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3]) : "r"(addr));
}

/* --- TF32 (sm_80+) ----------------------------------------------------------------------------- */
/* x rounded to TF32, to nearest with ties away from zero (cvt.rna.tf32.f32): the FP32 bit
 * pattern with the low 13 mantissa bits zero, as a float. cuBLAS's TF32 GEMMs round their
 * inputs so; tensor cores handed plain FP32 bits truncate them instead (2-3x the error). */
__device__ __forceinline__ float tf32_rna(float x)
{
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
    unsigned u;
    asm("cvt.rna.tf32.f32 %0, %1;\n" : "=r"(u) : "f"(x));
    return __uint_as_float(u);
#else
    return x;
#endif
}

/* --- Parallel split-K through the kernel's workspace (launch.workspace) ------------------------ */
/* Layout of a parallel split-K workspace: 4-byte arrival counters, one per tile, padded to a
 * multiple of 256 bytes, then per tile its `slices` partial tiles (tile_elems floats each). A
 * header's launch.workspace asks for roundup(4 * tiles, 256) + slices * tiles * tile_elems * 4
 * bytes; the backend hands it over zeroed (the counters must start at 0, and the fix-up leaves
 * them so). */
template <typename T> struct vec4_of;                 /* float -> float4, int -> int4, unsigned -> uint4 */
template <> struct vec4_of<float> { typedef float4 type; };
template <> struct vec4_of<int> { typedef int4 type; };
template <> struct vec4_of<unsigned> { typedef uint4 type; };   /* int32 runs: wrap-around sums */

/* Element i (0..3) of a 4-vector (float4, int4, uint4), i a compile-time constant once the
 * caller's loop is unrolled (no local-memory indexing). */
template <typename V>
__device__ __forceinline__ auto vget(const V& v, int i) -> decltype(v.x)
{
    return i == 0 ? v.x : i == 1 ? v.y : i == 2 ? v.z : v.w;
}

/* Bytes of dynamic shared memory this launch was given (%dynamic_smem_size): a kernel whose
 * layout the header sizes can trap on a launch that gives it less. */
__device__ __forceinline__ unsigned dyn_smem_bytes()
{
    unsigned r;
    asm("mov.u32 %0, %%dynamic_smem_size;" : "=r"(r));
    return r;
}

/* The padded copy's pre-pass (bcopy = 1): B (K x N) copied into S (K x LDB_OF(N) with PAD_B = 1), columns N
 * .. ldb - 1 zero. Each thread one 16-byte group of a padded row (column c = 4 * (blockIdx.x *
 * blockDim.x + threadIdx.x)), rows blockIdx.y, blockIdx.y + gridDim.y, ... */
template <typename T>
__device__ __forceinline__ void pad_b_rows(const T* __restrict__ B, T* __restrict__ S, int N, int K)
{
    const int ldb = (N + 3) & ~3;
    const int c = (blockIdx.x * blockDim.x + threadIdx.x) * 4;
    if (c >= ldb)
        return;
    for (int k = blockIdx.y; k < K; k += gridDim.y) {
        const T* src = B + (size_t)k * N + c;
        typename vec4_of<T>::type v;
        v.x = c + 0 < N ? src[0] : (T)0;
        v.y = c + 1 < N ? src[1] : (T)0;
        v.z = c + 2 < N ? src[2] : (T)0;
        v.w = c + 3 < N ? src[3] : (T)0;
        *reinterpret_cast<typename vec4_of<T>::type*>(S + (size_t)k * ldb + c) = v;
    }
}

/* The identity, for transpose_tile32 where B's elements go as they are. */
struct AsIs {
    template <typename T> __device__ __forceinline__ T operator()(T x) const { return x; }
};

/* The pre-passes' transpose: the 32 (k) x 32 (n) tile of B (K x N, row-major) at (k0, n0) into
 * S = Bᵀ, rows of ldk (rows n < rows and k < ldk written: zero past N and past K), through
 * shared memory padded by one word (conflict-free column reads), so that B's reads and S's
 * writes are both coalesced. Block (32, TY); `in` maps each element of B on its way (the TF32
 * rungs' rounding). Every thread of the block calls it (one barrier). */
template <int TY, typename T, typename In = AsIs>
__device__ __forceinline__ void transpose_tile32(const T* __restrict__ B, T* __restrict__ S, int N, int K,
                                                 int rows, int ldk, int k0, int n0, In in = In())
{
    __shared__ T tile[32][33];
    const int tx = threadIdx.x, ty = threadIdx.y;
#pragma unroll
    for (int i = 0; i < 32 / TY; ++i) {
        const int k = k0 + ty + TY * i, n = n0 + tx;
        tile[ty + TY * i][tx] = (k < K && n < N) ? in(B[(size_t)k * N + n]) : (T)0;
    }
    __syncthreads();
#pragma unroll
    for (int i = 0; i < 32 / TY; ++i) {
        const int n = n0 + ty + TY * i, k = k0 + tx;
        if (n < rows && k < ldk)
            S[(size_t)n * ldk + k] = tile[tx][ty + TY * i];
    }
}

/* The partial tiles of a workspace laid out as above: after the `tiles` arrival counters. */
__device__ __forceinline__ unsigned char* partials_after_counters(unsigned char* workspace, int tiles)
{
    return workspace + ((4 * tiles + 255) / 256) * 256;
}

/* One CTA's partial tile, acc[COUNT] per thread (NT_ threads take part, this one `tid`; COUNT *
 * NT_ = the tile's elements, COUNT % 4 == 0), written to `mine` thread-major (16-byte word e
 * of thread tid at e * NT_ + tid: coalesced, and read back by the same thread index whatever
 * the fragment layout); then the CTA counts itself in *counter (threadfence first). Returns
 * true in the CTA whose arrival is the `arrivals`-th, which has reset the counter to 0 for
 * the next launch and may then read every partial of the tile. All NT_ threads call it and
 * meet twice: at __syncthreads (BAR 0, the whole CTA) or at named barrier BAR (only the NT_
 * threads that hold the tile, e.g. a warp-specialised kernel's consumers). BAR -1: the named
 * barrier `bar`, chosen at run time, and the verdict passed through `*flag` (shared memory of
 * the caller's, one per group that may arrive at the same time: groups that take turns
 * through one code path, as a ping-pong kernel's consumers). */
template <int COUNT, int NT_, int BAR, typename T>
__device__ __forceinline__ bool partial_arrive(const T (&acc)[COUNT], typename vec4_of<T>::type* mine,
                                               unsigned* counter, unsigned arrivals, int tid,
                                               int bar = BAR, bool* flag = nullptr)
{
    static_assert(COUNT % 4 == 0, "partial_arrive: COUNT must be a multiple of 4");
    typedef typename vec4_of<T>::type V;
    __shared__ bool last_arrival;
#pragma unroll
    for (int e = 0; e < COUNT / 4; ++e) {
        V x;
        x.x = acc[4 * e]; x.y = acc[4 * e + 1]; x.z = acc[4 * e + 2]; x.w = acc[4 * e + 3];
        __stcg(&mine[e * NT_ + tid], x);
    }
    __threadfence();                                  /* the partial is visible before the count */
    if (BAR == 0) __syncthreads();
    else if (BAR > 0) asm volatile("bar.sync %0, %1;\n" :: "n"(BAR), "n"(NT_) : "memory");
    else asm volatile("bar.sync %0, %1;\n" :: "r"(bar), "n"(NT_) : "memory");
    if (tid == 0) {
        const unsigned before = atomicAdd(counter, 1u);
        const bool last = before == arrivals - 1u;
        if constexpr (BAR < 0)
            *flag = last;
        else
            last_arrival = last;
        if (last)
            *counter = 0u;                            /* all counted: ready for the next launch */
    }
    if (BAR == 0) __syncthreads();
    else if (BAR > 0) asm volatile("bar.sync %0, %1;\n" :: "n"(BAR), "n"(NT_) : "memory");
    else asm volatile("bar.sync %0, %1;\n" :: "r"(bar), "n"(NT_) : "memory");
    if constexpr (BAR < 0) {
        if (!*flag)
            return false;
    } else if (!last_arrival) {
        return false;
    }
    __threadfence();                                  /* the others' partials before reading them */
    return true;
}

/* Slice z's partial tile of a parallel split-K (partial_arrive: every thread of the CTA, slice
 * zz's partial of the tile at + zz * COUNT / 4 * NT_). Returns the tile's partials in the CTA
 * that arrived last; nullptr in the others. */
template <int COUNT, int NT_, typename T>
__device__ __forceinline__ const typename vec4_of<T>::type* splitk_arrive(
    const T (&acc)[COUNT], unsigned char* workspace, int tiles, int tile, int slices, int z, int tid)
{
    typedef typename vec4_of<T>::type V;
    constexpr size_t TILE4 = (size_t)(COUNT / 4) * NT_;        /* 16-byte words per partial tile */
    V* const partials = reinterpret_cast<V*>(partials_after_counters(workspace, tiles))
                        + (size_t)tile * slices * TILE4;
    unsigned* const arrivals = reinterpret_cast<unsigned*>(workspace);
    if (!partial_arrive<COUNT, NT_, 0>(acc, partials + (size_t)z * TILE4, &arrivals[tile],
                                       (unsigned)slices, tid))
        return nullptr;
    return partials;
}

/* splitk_arrive, then, in the CTA that arrived last, acc = the sum of the slices' partials in
 * slice order 0, 1, .., slices-1 (the result does not depend on which CTA came last:
 * deterministic, bitwise the same every launch). Returns whether this CTA must store the
 * tile. acc must stay in registers (constant indices after unrolling). The sum runs in PARTS
 * parts of acc (one where acc's 4-vectors do not divide), one slice's loads of a part in
 * flight at a time: whole-acc loads overlapped across slices cost ffma_regdb (BM = 64) a third
 * CTA per SM in registers. A kernel with few accumulators and a short, latency-bound sum
 * takes PARTS = 1 (ffma_small: halves cost time, benchmarks/NOTES.md), and
 * AHEAD > 1: the loads of AHEAD slices go out together before they are added (still in slice
 * order, so the sum is bitwise the same), one L2 round trip per AHEAD slices instead of one
 * per slice; with AHEAD = 1 each slice's loads are added before the next slice's go out. */
template <int COUNT, int NT_, int PARTS = 2, int AHEAD = 1, typename T>
__device__ __forceinline__ bool splitk_fixup(T (&acc)[COUNT], unsigned char* workspace, int tiles,
                                             int tile, int slices, int z, int tid)
{
    static_assert(COUNT % 4 == 0, "splitk_fixup: COUNT must be a multiple of 4");
    typedef typename vec4_of<T>::type V;
    constexpr int VECS = COUNT / 4;
    constexpr int NPARTS = VECS % PARTS == 0 ? PARTS : 1;   /* parts that divide acc */
    constexpr size_t TILE4 = (size_t)VECS * NT_;
    const V* const partials = splitk_arrive<COUNT, NT_>(acc, workspace, tiles, tile, slices, z, tid);
    if (partials == nullptr)
        return false;
#pragma unroll
    for (int e = 0; e < VECS; ++e) {
        const V x = __ldcg(&partials[e * NT_ + tid]);
        acc[4 * e] = x.x; acc[4 * e + 1] = x.y; acc[4 * e + 2] = x.z; acc[4 * e + 3] = x.w;
    }
    static_assert(AHEAD >= 1, "splitk_fixup: AHEAD must be >= 1");
#pragma unroll
    for (int h = 0; h < NPARTS; ++h) {
        if constexpr (AHEAD == 1) {
            /* kept apart from the loop below: that loop at AHEAD = 1 issues all of a part's
               loads before its adds, which changes the code of ffma_regdb, tf32_mma and
               skinny's stream 1 (each load added as it lands is what their registers were measured with) */
#pragma unroll 1
            for (int zz = 1; zz < slices; ++zz) {
                const V* const part = partials + (size_t)zz * TILE4;
#pragma unroll
                for (int i = 0; i < VECS / NPARTS; ++i) {
                    const int e = h * (VECS / NPARTS) + i;
                    const V x = __ldcg(&part[e * NT_ + tid]);
                    acc[4 * e] += x.x; acc[4 * e + 1] += x.y; acc[4 * e + 2] += x.z; acc[4 * e + 3] += x.w;
                }
            }
        } else {
#pragma unroll 1
            for (int z0 = 1; z0 < slices; z0 += AHEAD) {
                V x[AHEAD][VECS / NPARTS];
#pragma unroll
                for (int a = 0; a < AHEAD; ++a)
                    if (z0 + a < slices) {
                        const V* const part = partials + (size_t)(z0 + a) * TILE4;
#pragma unroll
                        for (int i = 0; i < VECS / NPARTS; ++i)
                            x[a][i] = __ldcg(&part[(h * (VECS / NPARTS) + i) * NT_ + tid]);
                    }
#pragma unroll
                for (int a = 0; a < AHEAD; ++a)
                    if (z0 + a < slices) {
#pragma unroll
                        for (int i = 0; i < VECS / NPARTS; ++i) {
                            const int e = h * (VECS / NPARTS) + i;
                            acc[4 * e] += x[a][i].x; acc[4 * e + 1] += x[a][i].y;
                            acc[4 * e + 2] += x[a][i].z; acc[4 * e + 3] += x[a][i].w;
                        }
                    }
            }
        }
    }
    return true;
}

/* Store one warpgroup's wgmma accumulators (f32 D fragments of an m64nCOLS tile) into C
 * (row-major, M x N) at rows row0.., columns col0..: accumulator d[j] of lane (g, t) in warp w
 * (g = lane / 4, t = lane % 4) is row 16 w + g + 8 ((j / 2) % 2), column (j / 4) * 8 + 2 t + j % 2.
 * float2 stores where N is even; rows >= M and columns >= N are not written. */
template <int COLS>
__device__ __forceinline__ void store_wgmma_acc(const float* d, float* C, int row0, int col0,
                                                int M, int N, int warp, int lane)
{
    const bool vec_c = (N & 1) == 0;
#pragma unroll
    for (int j = 0; j < COLS / 2; j += 2) {
        const int row = row0 + warp * 16 + (lane >> 2) + 8 * ((j >> 1) & 1);
        const int col = col0 + (j >> 2) * 8 + (lane & 3) * 2;
        if (row >= M)
            continue;
        if (vec_c && col + 1 < N) {
            *reinterpret_cast<float2*>(&C[(size_t)row * N + col]) = make_float2(d[j], d[j + 1]);
        } else {
            if (col < N)
                C[(size_t)row * N + col] = d[j];
            if (col + 1 < N)
                C[(size_t)row * N + col + 1] = d[j + 1];
        }
    }
}

/* The unsigned type of E bytes (copy_padded_rows's elements) */
template <int E> struct uint_of_bytes;
template <> struct uint_of_bytes<2> { typedef unsigned short type; };
template <> struct uint_of_bytes<4> { typedef unsigned type; };

/* One (32, 8) block's part of a padded copy: rows r0..r0+31 of src (rows x cols elements of
 * E bytes) into dst (row stride ld >= cols, zero past cols), the 32 16-byte words of dst
 * from word w0 on (thread x: word w0 + x). Each thread loads its 4 rows' words before it
 * stores any, 16 bytes at a time where the source row is whole words, so that 64 bytes a
 * thread are in flight: one 4-byte element a thread, a row at a time, left the memory far
 * from its speed (benchmarks/NOTES.md, "The pre-pass at the memory's speed"). */
template <int E>
__device__ __forceinline__ void copy_padded_rows(const void* __restrict__ src, void* __restrict__ dst,
                                                 int rows, int cols, int ld, int r0, int w0)
{
    typedef typename uint_of_bytes<E>::type U;         /* 2- or 4-byte elements */
    constexpr int PER = 16 / E;                         /* elements per word */
    const int c = (w0 + (int)threadIdx.x) * PER;
    if (c >= ld)
        return;
    const bool whole = (cols % PER) == 0 && c + PER <= cols;
    uint4 w[4];
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = r0 + (int)threadIdx.y + 8 * i;
        w[i] = make_uint4(0u, 0u, 0u, 0u);
        if (r >= rows)
            continue;
        const U* from = static_cast<const U*>(src) + (size_t)r * cols + c;
        if (whole) {
            w[i] = __ldg(reinterpret_cast<const uint4*>(from));
        } else {
            __align__(16) U e[PER];
#pragma unroll
            for (int x = 0; x < PER; ++x)
                e[x] = c + x < cols ? from[x] : U(0);
            w[i] = *reinterpret_cast<const uint4*>(e);
        }
    }
#pragma unroll
    for (int i = 0; i < 4; ++i) {
        const int r = r0 + (int)threadIdx.y + 8 * i;
        if (r < rows)                                   /* one 16-byte store: nvcc had split some in four */
            asm volatile("st.global.v4.u32 [%0], {%1, %2, %3, %4};\n"
                         :: "l"(static_cast<U*>(dst) + (size_t)r * ld + c),
                            "r"(w[i].x), "r"(w[i].y), "r"(w[i].z), "r"(w[i].w) : "memory");
    }
}

/* The padding pre-pass of kernels that read A and B in place by TMA, which needs every row
 * stride to be a multiple of 16 bytes: where K % PC != 0, A (M x K) is copied into Ap
 * (M x Kp, Kp = K rounded up to PE, zero-padded) at S; where N % PC != 0, B (K x N) into Bp
 * (K x Np) after it. PE = PC = 4 (16 bytes) pads only what TMA cannot read; PE = 32, PC = 8
 * moves rows that start inside a 32-byte sector onto whole 128-byte lines. Launched as
 * blocks of (32, 8) threads over 32-row x 128-column tiles (copy_padded_rows): grid.y covers
 * cdiv(M, 32) rows of Ap (when K % PC) then cdiv(K, 32) rows of Bp (when N % PC), grid.x
 * the padded width in 128s. */
template <int PE = 4, int PC = PE>
__device__ __forceinline__ void pad_for_tma(const float* __restrict__ A, const float* __restrict__ B,
                                            float* __restrict__ S, int M, int N, int K)
{
    static_assert((PE == 4 || PE == 32) && PC >= 4 && PE % PC == 0, "pad_for_tma pads rows to 16 or 128 bytes");
    const int Kp = (K & (PC - 1)) ? (K + PE - 1) & ~(PE - 1) : K;
    const int Np = (N & (PC - 1)) ? (N + PE - 1) & ~(PE - 1) : N;
    const int ay = (K & (PC - 1)) ? (M + 31) / 32 : 0;   /* block rows of Ap */
    if ((int)blockIdx.y < ay)
        copy_padded_rows<4>(A, S, M, K, Kp, blockIdx.y * 32, blockIdx.x * 32);
    else
        copy_padded_rows<4>(B, S + ((K & (PC - 1)) ? (size_t)M * Kp : 0), K, N, Np,
                            (blockIdx.y - ay) * 32, blockIdx.x * 32);
}

/* Where the tensor maps sit in the scratch S of a pad_for_tma pre-pass (rows padded to 16
 * bytes): after Ap (when K % 4) and Bp (when N % 4), 128-byte aligned (the kernel header's
 * maps_at). */
__device__ __forceinline__ const unsigned char* maps_after_padding(const float* S, int M, int N, int K)
{
    const size_t Kp = (K + 3) & ~3, Np = (N + 3) & ~3;
    const size_t pre = ((K & 3) ? 4 * (size_t)M * Kp : 0) + ((N & 3) ? 4 * (size_t)K * Np : 0);
    return reinterpret_cast<const unsigned char*>(S) + ((pre + 127) & ~(size_t)127);
}

/* A TMA tensor map passed as a kernel argument (a pre-pass's maps_in = "params"): the 128
 * bytes the backend encodes, 64-byte aligned as CUtensorMap. Declared
 * `const __grid_constant__ TensorMapArg map`, it stays in the launch's parameter space, and
 * TMA reads it from there (&map): no copy in global memory to fetch after a proxy fence. */
struct __align__(64) TensorMapArg {
    unsigned long long words[16];
};

/* --- Hopper (sm_90): mbarriers and bulk copies -------------------------------------------------- */
/* Only the sm_90 and newer passes of nvcc define these (the kernels that use them guard their
 * own code); barrier and shared-memory arguments are 32-bit shared-state-space addresses. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900

/* mbarrier.init: a barrier in shared memory whose phase completes after `count` arrivals
 * (and, with expect_tx, the expected transaction bytes). */
__device__ __forceinline__ void mbar_init(unsigned bar, unsigned count)
{
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" :: "r"(bar), "r"(count) : "memory");
}

/* mbarrier.arrive: one arrival on a barrier of this CTA (the state token is discarded). */
__device__ __forceinline__ void mbar_arrive(unsigned bar)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.shared::cta.b64 st, [%0];\n}\n" :: "r"(bar) : "memory");
}

/* mbarrier.arrive.expect_tx: one arrival, and `bytes` more transaction bytes (TMA or bulk
 * copies completing on this barrier) before the phase can complete. */
__device__ __forceinline__ void mbar_arrive_expect_tx(unsigned bar, unsigned bytes)
{
    asm volatile("{\n.reg .b64 st;\nmbarrier.arrive.expect_tx.shared::cta.b64 st, [%0], %1;\n}\n"
                 :: "r"(bar), "r"(bytes) : "memory");
}

/* Spin on mbarrier.try_wait.parity until the phase of parity `parity` has completed
 * (try_wait suspends the thread for a while in hardware before it returns false). */
__device__ __forceinline__ void mbar_wait(unsigned bar, unsigned parity)
{
    asm volatile(
        "{\n.reg .pred P1;\n"
        "LAB_WAIT:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra DONE;\n"
        "bra LAB_WAIT;\n"
        "DONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
}

/* The producer's side of a STAGES_-deep ring of `stage_bytes` stages from `base`, with
 * full[s] / empty[s] mbarriers at bars + 8 s / bars + 8 (STAGES_ + s): the stage of ring
 * position `it`, once the consumers have released its previous use (the empty barrier's
 * phase before this round), with `stage_bytes` announced on its full barrier (`full`, which
 * the stage's TMA copies then complete). Returns the stage's shared address. */
template <int STAGES_>
__device__ __forceinline__ unsigned ring_claim_stage(int it, unsigned base, unsigned bars,
                                                     unsigned stage_bytes, unsigned& full,
                                                     unsigned tx_bytes = 0)
{
    const int s = it % STAGES_;
    if (it >= STAGES_)
        mbar_wait(bars + 8 * (STAGES_ + s), ((it / STAGES_) - 1) & 1);
    full = bars + 8 * s;
    const unsigned sa = base + s * stage_bytes;
    mbar_arrive_expect_tx(full, tx_bytes ? tx_bytes : stage_bytes);   /* less where a stage has room to spare */
    return sa;
}

/* cp.async.bulk (1-D, no tensor map): `bytes` (a multiple of 16) from global `src` (16-byte
 * aligned) to shared `dst` (16-byte aligned), counted on mbarrier `bar` as transaction bytes
 * (complete_tx): the copy engine moves them without registers or L1 request slots. */
__device__ __forceinline__ void bulk_load(unsigned dst, const void* src, unsigned bytes, unsigned bar)
{
    asm volatile("cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n"
                 :: "r"(dst), "l"(src), "r"(bytes), "r"(bar) : "memory");
}

#endif /* __CUDA_ARCH__ >= 900 */

/* A kernel's cluster attribute for a cluster of n CTAs along x (n a literal or a macro that is
 * one: 1, 2 or 4): __cluster_dims__(n, 1, 1) where n > 1 and the target has clusters (sm_90
 * on: the attribute breaks older targets' builds), nothing for n = 1 (the kernel launches as
 * one without clusters). Another n is a compile error. */
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
#define LAB_CLUSTER_DIMS_2 __cluster_dims__(2, 1, 1)
#define LAB_CLUSTER_DIMS_4 __cluster_dims__(4, 1, 1)
#else
#define LAB_CLUSTER_DIMS_2
#define LAB_CLUSTER_DIMS_4
#endif
#define LAB_CLUSTER_DIMS_1
#define LAB_CLUSTER_DIMS_PASTE(n) LAB_CLUSTER_DIMS_##n
#define CLUSTER_DIMS_OF(n) LAB_CLUSTER_DIMS_PASTE(n)

/* --- Hopper (sm_90a): clusters, TMA tensors and wgmma -------------------------------------------- */
/* Only the sm_90a pass of nvcc defines these (as the kernels that use them guard their own
 * code). */
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)

/* mbar_wait with .acquire.cluster semantics: the phase was completed by arrivals of other CTAs
 * of the cluster (remote arrives, bulk copies from a peer), whose writes must be visible. */
__device__ __forceinline__ void mbar_wait_cluster(unsigned bar, unsigned parity)
{
    asm volatile(
        "{\n.reg .pred P1;\n"
        "LAB_WAIT:\n"
        "mbarrier.try_wait.parity.acquire.cluster.shared::cta.b64 P1, [%0], %1;\n"
        "@P1 bra DONE;\n"
        "bra LAB_WAIT;\n"
        "DONE:\n}\n" :: "r"(bar), "r"(parity) : "memory");
}

/* cp.async.bulk.tensor.2d (TMA): the box of a 2-D tensor map at coordinates (x0, y0), x the
 * innermost dimension, copied global -> shared at dst; completes as transaction bytes on the
 * mbarrier bar (see mbar_arrive_expect_tx). tmap: the map's generic address (128 bytes,
 * 64-byte aligned, ordered into the tensormap proxy by the caller). */
__device__ __forceinline__ void tma_load_2d(unsigned dst, const void* tmap, int x0, int y0, unsigned bar)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n"
        :: "r"(dst), "l"(tmap), "r"(x0), "r"(y0), "r"(bar) : "memory");
}

/* tma_load_2d multicast: the box lands at dst in every CTA of the cluster named in `mask`
 * (bit r: rank r) and completes its bytes on the mbarrier at offset `bar` in each of them
 * (dst and bar: this CTA's shared addresses, the same offsets in the others). */
__device__ __forceinline__ void tma_load_2d_multicast(unsigned dst, const void* tmap, int x0, int y0,
                                                      unsigned bar, unsigned short mask)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.multicast::cluster [%0], [%1, {%2, %3}], [%4], %5;\n"
        :: "r"(dst), "l"(tmap), "r"(x0), "r"(y0), "r"(bar), "h"(mask) : "memory");
}

/* L2 eviction policies (createpolicy.fractional, the whole access): evict_last keeps lines
 * past the normal ones, evict_first gives them up first. For the .L2::cache_hint forms below. */
__device__ __forceinline__ unsigned long long l2_policy_evict_last()
{
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_last.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}
__device__ __forceinline__ unsigned long long l2_policy_evict_first()
{
    unsigned long long p;
    asm volatile("createpolicy.fractional.L2::evict_first.b64 %0, 1.0;\n" : "=l"(p));
    return p;
}

/* tma_load_2d with an L2 eviction policy for the lines it reads (l2_policy_*). */
__device__ __forceinline__ void tma_load_2d_hint(unsigned dst, const void* tmap, int x0, int y0, unsigned bar,
                                                 unsigned long long policy)
{
    asm volatile(
        "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes.L2::cache_hint [%0], [%1, {%2, %3}], [%4], %5;\n"
        :: "r"(dst), "l"(tmap), "r"(x0), "r"(y0), "r"(bar), "l"(policy) : "memory");
}

/* --- thread-block clusters ------------------------------------------------------------------- */

/* this CTA's rank in its cluster (%cluster_ctarank) */
__device__ __forceinline__ unsigned cluster_rank()
{
    unsigned r;
    asm volatile("mov.u32 %0, %%cluster_ctarank;\n" : "=r"(r));
    return r;
}

/* this CTA's rank in a kernel's clusters of N CTAs: 0 without clusters (N = 1) */
template <int N>
__device__ __forceinline__ unsigned cluster_rank_of()
{
    if constexpr (N > 1)
        return cluster_rank();
    else
        return 0;
}

/* a shared::cta address of this CTA -> the same offset in CTA `rank` of the cluster
 * (a shared::cluster address, for remote arrives and copies) */
__device__ __forceinline__ unsigned map_peer(unsigned addr, unsigned rank)
{
    unsigned r;
    asm volatile("mapa.shared::cluster.u32 %0, %1, %2;\n" : "=r"(r) : "r"(addr), "r"(rank));
    return r;
}

/* one arrival on an mbarrier of another CTA of the cluster (address from map_peer), .release at
 * cluster scope: this thread's earlier reads of its shared memory are ordered before what the
 * waiting CTA does next (overwrite them). ptxas puts a MEMBAR.ALL.GPU before each such arrive,
 * which is what makes 2-CTA clusters of tf32_wgmma_rs slow. A build with the instruction's
 * default semantics (.release.cta, as CUTLASS's ClusterBarrier::arrive) was faster but failed
 * verification once where this one passed (benchmarks/NOTES.md, issue 11, round 8). */
__device__ __forceinline__ void mbar_arrive_remote(unsigned cluster_bar)
{
    asm volatile("mbarrier.arrive.release.cluster.shared::cluster.b64 _, [%0];\n" :: "r"(cluster_bar) : "memory");
}

/* one arrival on an mbarrier of another CTA of the cluster (address from map_peer) with the
 * instruction's default semantics (.release.cta), as CUTLASS's consumers release a stage
 * that a peer's multicast refills: the arrival carries no data of this thread's, only that
 * its wgmma reads of the stage are done (wgmma.wait_group); no MEMBAR.ALL.GPU in front. */
__device__ __forceinline__ void mbar_arrive_peer(unsigned cluster_bar)
{
    asm volatile("mbarrier.arrive.shared::cluster.b64 _, [%0];\n" :: "r"(cluster_bar) : "memory");
}

/* every thread of every CTA of the cluster meets here (all threads must call it, converged) */
__device__ __forceinline__ void cluster_sync()
{
    asm volatile("barrier.cluster.arrive.release.aligned;\nbarrier.cluster.wait.acquire.aligned;\n" ::: "memory");
}

/* Rasterised tile order of persistent grids: tile t of an mt x nt grid of bm x bn tiles ->
 * its origin (row0, col0). Tiles go in groups of gm tile rows, column by column inside a
 * group, so that the tiles in flight share a few row panels of A and column panels of B in
 * L2 (CUTLASS's swizzle). */
__device__ __forceinline__ void tile_origin(int t, int mt, int nt, int gm, int bm, int bn,
                                            int& row0, int& col0)
{
    const int per_group = gm * nt;
    const int g = t / per_group, r = t - g * per_group;
    const int rows = min(gm, mt - g * gm);
    row0 = (g * gm + r % rows) * bm;
    col0 = (r / rows) * bn;
}

/* A tensor map that came as a kernel argument (a TensorMapArg: maps_in = "params") needs no
 * fence: it was never written through the generic proxy. prefetch.tensormap warms the
 * descriptor cache; pass the argument's address (param space, as a generic address). */
__device__ __forceinline__ void tensormap_prefetch(const void* map)
{
    asm volatile("prefetch.tensormap [%0];\n" :: "l"(map) : "memory");
}

/* A tensor map (CUtensorMap, 128 bytes) written to global memory by the host, made usable by
 * TMA: fence.proxy.tensormap orders those generic-proxy writes before the tensormap proxy's
 * reads, and prefetch.tensormap warms the descriptor cache. Once per thread that issues
 * copies with the map, before the first one. */
__device__ __forceinline__ void tensormap_acquire(const void* map)
{
    asm volatile("fence.proxy.tensormap::generic.acquire.sys [%0], 128;\n" :: "l"(map) : "memory");
    tensormap_prefetch(map);
}

/* Named barrier ID among 256 threads: wait for the others (sync), or count in and go on
 * (arrive). An immediate id, so that ptxas reserves only the barriers a kernel names. */
template <int ID>
__device__ __forceinline__ void bar_sync_256() { asm volatile("bar.sync %0, 256;\n" :: "n"(ID) : "memory"); }

template <int ID>
__device__ __forceinline__ void bar_arrive_256() { asm volatile("bar.arrive %0, 256;\n" :: "n"(ID) : "memory"); }

/* The order of a ping-pong kernel's two consumer warpgroups: named barrier FIRST + c, c the
 * consumer that waits on it (consumers_wait), which the other lets go (consumers_let_go). */
template <int FIRST>
__device__ __forceinline__ void consumers_wait(int c)
{
    c == 0 ? bar_sync_256<FIRST>() : bar_sync_256<FIRST + 1>();
}

template <int FIRST>
__device__ __forceinline__ void consumers_let_go(int c)
{
    c == 0 ? bar_arrive_256<FIRST>() : bar_arrive_256<FIRST + 1>();
}

/* Round a region of CHUNKS 16-byte chunks of shared memory at sa to TF32 in place (to
 * nearest, tf32_rna), shared by THREADS threads: thread rt (0..THREADS-1) takes chunks
 * rt, rt + THREADS, ..., PER at a time (all loads of a pass first, then its stores;
 * elementwise, so a swizzled layout does not matter). Chunk rows that every thread has
 * are not bounds-checked. */
template <int CHUNKS, int THREADS, int PER>
__device__ __forceinline__ void round_tf32_shared(unsigned sa, int rt)
{
#pragma unroll
    for (int pass = 0; pass < (CHUNKS + THREADS * PER - 1) / (THREADS * PER); ++pass) {
        float4 v[PER];
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int i = pass * PER + j, c = rt + i * THREADS;
            if ((i + 1) * THREADS <= CHUNKS || c < CHUNKS)
                asm volatile("ld.shared.v4.f32 {%0, %1, %2, %3}, [%4];\n"
                             : "=f"(v[j].x), "=f"(v[j].y), "=f"(v[j].z), "=f"(v[j].w)
                             : "r"(sa + 16u * c) : "memory");
        }
#pragma unroll
        for (int j = 0; j < PER; ++j) {
            const int i = pass * PER + j, c = rt + i * THREADS;
            if ((i + 1) * THREADS <= CHUNKS || c < CHUNKS)
                asm volatile("st.shared.v4.f32 [%0], {%1, %2, %3, %4};\n"
                             :: "r"(sa + 16u * c), "f"(tf32_rna(v[j].x)), "f"(tf32_rna(v[j].y)),
                                "f"(tf32_rna(v[j].z)), "f"(tf32_rna(v[j].w)) : "memory");
        }
    }
}

/* wgmma shared-memory matrix descriptor for a K-major tile in the 128-byte swizzle (rows of
 * 32 floats = 128 B, 8-row atoms 1024 B apart): start address >> 4 in bits 0-13, leading byte
 * offset (unused with this swizzle) 1 in bits 16-29, stride byte offset 1024 >> 4 in bits
 * 32-45, swizzle mode 1 (128B) in bits 62-63. */
__device__ __forceinline__ unsigned long long make_desc(unsigned addr)
{
    unsigned long long d = 0;
    d |= (unsigned long long)((addr & 0x3FFFF) >> 4);
    d |= (unsigned long long)1 << 16;                  /* leading byte offset (unused here) */
    d |= (unsigned long long)(1024 >> 4) << 32;        /* stride byte offset */
    d |= (unsigned long long)1 << 62;                  /* swizzle mode: 128B */
    return d;
}

/* cp.async.bulk.tensor.2d shared -> global (a TMA store): the box of a 2-D tensor map at
 * coordinates (x0, y0) written from shared memory at src, in the map's swizzle; rows and
 * columns past the tensor's edges are not written. Completes in this thread's bulk
 * async-group (bulk_commit, bulk_wait_read / bulk_wait). The shared-memory writes it reads
 * must be ordered before it by fence.proxy.async.shared::cta in each writing thread and a
 * barrier. */
__device__ __forceinline__ void tma_store_2d(const void* tmap, int x0, int y0, unsigned src)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group [%0, {%1, %2}], [%3];\n"
                 :: "l"(tmap), "r"(x0), "r"(y0), "r"(src) : "memory");
}

/* tma_store_2d with an L2 eviction policy for the lines it writes (l2_policy_*). */
__device__ __forceinline__ void tma_store_2d_hint(const void* tmap, int x0, int y0, unsigned src,
                                                  unsigned long long policy)
{
    asm volatile("cp.async.bulk.tensor.2d.global.shared::cta.bulk_group.L2::cache_hint [%0, {%1, %2}], [%3], %4;\n"
                 :: "l"(tmap), "r"(x0), "r"(y0), "r"(src), "l"(policy) : "memory");
}

/* cp.async.bulk.commit_group: close this thread's bulk async-group of TMA stores. */
__device__ __forceinline__ void bulk_commit() { asm volatile("cp.async.bulk.commit_group;\n" ::: "memory"); }

/* cp.async.bulk.wait_group.read N: wait until at most N of this thread's bulk groups still
 * read shared memory (their sources may then be overwritten; the global writes may still be
 * in flight). */
template <int N_>
__device__ __forceinline__ void bulk_wait_read() { asm volatile("cp.async.bulk.wait_group.read %0;\n" :: "n"(N_) : "memory"); }

/* cp.async.bulk.wait_group N: wait until at most N of this thread's bulk groups are pending
 * (their global writes complete). */
template <int N_>
__device__ __forceinline__ void bulk_wait() { asm volatile("cp.async.bulk.wait_group %0;\n" :: "n"(N_) : "memory"); }

/* wgmma.mma_async m64nNk8 tf32 -> f32: D(64 x N) += A(64 x 8) . B(8 x N), both operands in
 * shared memory through descriptors (da, db); d[] are this thread's N/2 accumulators. The
 * scale-d predicate is 1 (accumulate), the A and B scales +1. Asynchronous: issue between
 * wgmma.fence and wgmma.commit_group, read d[] only after wgmma.wait_group. */
__device__ __forceinline__ void wgmma_n256(float* d, unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_n128(float* d, unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "l"(da), "l"(db), "r"(1));
}

/* wgmma.mma_async m64n256k8 tf32 -> f32 with A from registers: D(64 x 256) += A(64 x 8) .
 * B(8 x 256), A as this thread's 4 fragment registers (per warp of the warpgroup, rows
 * 16w..16w+15 in mma.m16n8k8's .tf32 A layout: a0 (g, t), a1 (g + 8, t), a2 (g, t + 4),
 * a3 (g + 8, t + 4), g = lane / 4, t = lane % 4; TF32 bit patterns), B in shared memory
 * through descriptor db. The registers are read asynchronously: ptxas keeps them (or
 * waits) until the wgmma that reads them has completed. */
__device__ __forceinline__ void wgmma_n256_rs(float* d, const unsigned* a, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %133, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, {%128, %129, %130, %131}, %132, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63]), "+f"(d[64]), "+f"(d[65]), "+f"(d[66]), "+f"(d[67]), "+f"(d[68]), "+f"(d[69]), "+f"(d[70]), "+f"(d[71]), "+f"(d[72]), "+f"(d[73]), "+f"(d[74]), "+f"(d[75]), "+f"(d[76]), "+f"(d[77]), "+f"(d[78]), "+f"(d[79]), "+f"(d[80]), "+f"(d[81]), "+f"(d[82]), "+f"(d[83]), "+f"(d[84]), "+f"(d[85]), "+f"(d[86]), "+f"(d[87]), "+f"(d[88]), "+f"(d[89]), "+f"(d[90]), "+f"(d[91]), "+f"(d[92]), "+f"(d[93]), "+f"(d[94]), "+f"(d[95]), "+f"(d[96]), "+f"(d[97]), "+f"(d[98]), "+f"(d[99]), "+f"(d[100]), "+f"(d[101]), "+f"(d[102]), "+f"(d[103]), "+f"(d[104]), "+f"(d[105]), "+f"(d[106]), "+f"(d[107]), "+f"(d[108]), "+f"(d[109]), "+f"(d[110]), "+f"(d[111]), "+f"(d[112]), "+f"(d[113]), "+f"(d[114]), "+f"(d[115]), "+f"(d[116]), "+f"(d[117]), "+f"(d[118]), "+f"(d[119]), "+f"(d[120]), "+f"(d[121]), "+f"(d[122]), "+f"(d[123]), "+f"(d[124]), "+f"(d[125]), "+f"(d[126]), "+f"(d[127])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* The same with N = 128 and N = 64 (64 and 32 accumulators): rung 26's narrower tiles. */
__device__ __forceinline__ void wgmma_n128_rs(float* d, const unsigned* a, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %69, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, {%64, %65, %66, %67}, %68, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31]), "+f"(d[32]), "+f"(d[33]), "+f"(d[34]), "+f"(d[35]), "+f"(d[36]), "+f"(d[37]), "+f"(d[38]), "+f"(d[39]), "+f"(d[40]), "+f"(d[41]), "+f"(d[42]), "+f"(d[43]), "+f"(d[44]), "+f"(d[45]), "+f"(d[46]), "+f"(d[47]), "+f"(d[48]), "+f"(d[49]), "+f"(d[50]), "+f"(d[51]), "+f"(d[52]), "+f"(d[53]), "+f"(d[54]), "+f"(d[55]), "+f"(d[56]), "+f"(d[57]), "+f"(d[58]), "+f"(d[59]), "+f"(d[60]), "+f"(d[61]), "+f"(d[62]), "+f"(d[63])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_n64_rs(float* d, const unsigned* a, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n64k8.f32.tf32.tf32 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31}, {%32, %33, %34, %35}, %36, p, 1, 1;\n}\n"
        : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]), "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15]), "+f"(d[16]), "+f"(d[17]), "+f"(d[18]), "+f"(d[19]), "+f"(d[20]), "+f"(d[21]), "+f"(d[22]), "+f"(d[23]), "+f"(d[24]), "+f"(d[25]), "+f"(d[26]), "+f"(d[27]), "+f"(d[28]), "+f"(d[29]), "+f"(d[30]), "+f"(d[31])
        : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(db), "r"(1));
}

/* wgmma_n{256,128,64}_rs by N: the accumulator count of a tile BM rows of C wide. */
template <int N_>
__device__ __forceinline__ void wgmma_rs(float* d, const unsigned* a, unsigned long long db)
{
    static_assert(N_ == 256 || N_ == 128 || N_ == 64, "wgmma_rs: N must be 256, 128 or 64");
    if constexpr (N_ == 256)
        wgmma_n256_rs(d, a, db);
    else if constexpr (N_ == 128)
        wgmma_n128_rs(d, a, db);
    else
        wgmma_n64_rs(d, a, db);
}

/* A rounder thread's part of one pipeline stage (rt = 0..THREADS-1 of the threads that round
 * A for wgmma): wait until the stage's TMA bytes have landed (mbarrier `full`, phase parity
 * `parity`), round the CHUNKS 16-byte chunks at sa to TF32 in place (round_tf32_shared), make
 * those generic-proxy writes visible to the async proxy that wgmma reads through
 * (fence.proxy.async.shared::cta), then arrive on the stage's `ready` mbarrier. */
template <int CHUNKS, int THREADS, int PER>
__device__ __forceinline__ void round_stage_tf32(unsigned sa, unsigned full, unsigned parity,
                                                 unsigned ready, int rt)
{
    mbar_wait(full, parity);
    round_tf32_shared<CHUNKS, THREADS, PER>(sa, rt);
    asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
    mbar_arrive(ready);
}

#endif /* __CUDA_ARCH_FEAT_SM90_ALL */
