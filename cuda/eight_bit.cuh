/* eight_bit.cuh: what the 8-bit tensor-core steps share (33_fp8_wgmma.cu, 35_int8_wgmma.cu):
 * wgmma reads 8-bit operands from shared memory K-major only, so both steps feed it A's rows
 * and B's columns as rows of K bytes: the pre-pass below (B as K×N transposed, short rows
 * padded to 16 bytes for TMA), where its tensor maps lie, the TMA producer's k-tile of 128
 * bytes, and the integer wgmma steps. */
#pragma once
#include "lab_ptx.cuh"

/* Ap (M × Kp, Kp = roundup(K, 16)) where K % 16, then Bt (N × Kp): B as K×N transposed
 * (always), B as N×K (B_NK_) padded where K % 16. grid.y covers A's 32-row tiles (when
 * padded) then Bt's, grid.x Kp in 32s, block (32, 8). B as K×N goes through a 32 × 32 tile
 * in shared memory, so that both its reads (along n) and its writes (along k) are contiguous. */
template <int B_NK_>
__device__ __forceinline__ void pad_or_transpose_bytes(const void* A, const void* B, void* S,
                                                       int M, int N, int K)
{
    const unsigned char* a = reinterpret_cast<const unsigned char*>(A);
    const unsigned char* b = reinterpret_cast<const unsigned char*>(B);
    unsigned char* s = reinterpret_cast<unsigned char*>(S);
    const int Kp = (K + 15) & ~15;
    const bool pad_a = K % 16 != 0;
    const int ay = pad_a ? (M + 31) / 32 : 0;
    const int tx = threadIdx.x, ty = threadIdx.y;
    const int c0 = blockIdx.x * 32;
    if ((int)blockIdx.y < ay) {
        const int r0 = blockIdx.y * 32;
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int r = r0 + ty + 8 * i, c = c0 + tx;
            if (r < M && c < Kp)
                s[(size_t)r * Kp + c] = c < K ? a[(size_t)r * K + c] : 0;
        }
        return;
    }
    unsigned char* bt = s + (pad_a ? (size_t)M * Kp : 0);
    const int n0 = (blockIdx.y - ay) * 32;
    if constexpr (B_NK_ != 0) {
#pragma unroll
        for (int i = 0; i < 4; ++i) {
            const int n = n0 + ty + 8 * i, k = c0 + tx;
            if (n < N && k < Kp)
                bt[(size_t)n * Kp + k] = k < K ? b[(size_t)n * K + k] : 0;
        }
    } else {
        __shared__ unsigned char tile[32][33];
#pragma unroll
        for (int i = 0; i < 4; ++i) {               /* rows k of B, columns n: along n */
            const int k = c0 + ty + 8 * i, n = n0 + tx;
            tile[ty + 8 * i][tx] = (k < K && n < N) ? b[(size_t)k * N + n] : 0;
        }
        __syncthreads();
#pragma unroll
        for (int i = 0; i < 4; ++i) {               /* rows n of Bt, columns k: along k */
            const int n = n0 + ty + 8 * i, k = c0 + tx;
            if (n < N && k < Kp)
                bt[(size_t)n * Kp + k] = tile[tx][ty + 8 * i];
        }
    }
}

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
/* The 8-bit steps' producer, ring position `it` of a STAGES_-deep ring of stages of BM_ × 128
 * bytes of A then BN_ × 128 of B (both K-major, 128-byte swizzle) from `base`, full[s] /
 * empty[s] mbarriers at bars + 8 s / + 8 (STAGES_ + s): once the stage's previous use is
 * released, its bytes announced and k-tile kt of A's rows row0.. and B's rows col0.. copied in. */
template <int STAGES_, int BM_, int BN_>
__device__ __forceinline__ void load_byte_k_tile(int it, unsigned base, unsigned bars, const void* tmA,
                                                 const void* tmB, int row0, int col0, int kt)
{
    unsigned full;
    const unsigned sa = ring_claim_stage<STAGES_>(it, base, bars, (BM_ + BN_) * 128, full);
    tma_load_2d(sa, tmA, kt * 128, row0, full);
    tma_load_2d(sa + BM_ * 128, tmB, kt * 128, col0, full);
}
#endif

#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
/* wgmma.mma_async m64n256k32 (m64n128k32), int8 inputs -> int32: D(64 × N) += A(64 × 32) ·
 * B(32 × N), both from shared memory through K-major descriptors (integer wgmma takes no
 * transpose). Integer sums are exact and wrap modulo 2³², so they go straight into C's
 * sums. d[] are this thread's N / 2 accumulators (lane layout as store_wgmma_acc's).
 * Asynchronous: issue between wgmma.fence and wgmma.commit_group, read d[] only after
 * wgmma.wait_group. */
__device__ __forceinline__ void wgmma_s8_n256k32(int* d, unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %130, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n256k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63, %64, %65, %66, %67, %68, %69, %70, %71, %72, %73, %74, %75, %76, %77, %78, %79, %80, %81, %82, %83, %84, %85, %86, %87, %88, %89, %90, %91, %92, %93, %94, %95, %96, %97, %98, %99, %100, %101, %102, %103, %104, %105, %106, %107, %108, %109, %110, %111, %112, %113, %114, %115, %116, %117, %118, %119, %120, %121, %122, %123, %124, %125, %126, %127}, %128, %129, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63]), "+r"(d[64]), "+r"(d[65]), "+r"(d[66]), "+r"(d[67]), "+r"(d[68]), "+r"(d[69]), "+r"(d[70]), "+r"(d[71]), "+r"(d[72]), "+r"(d[73]), "+r"(d[74]), "+r"(d[75]), "+r"(d[76]), "+r"(d[77]), "+r"(d[78]), "+r"(d[79]), "+r"(d[80]), "+r"(d[81]), "+r"(d[82]), "+r"(d[83]), "+r"(d[84]), "+r"(d[85]), "+r"(d[86]), "+r"(d[87]), "+r"(d[88]), "+r"(d[89]), "+r"(d[90]), "+r"(d[91]), "+r"(d[92]), "+r"(d[93]), "+r"(d[94]), "+r"(d[95]), "+r"(d[96]), "+r"(d[97]), "+r"(d[98]), "+r"(d[99]), "+r"(d[100]), "+r"(d[101]), "+r"(d[102]), "+r"(d[103]), "+r"(d[104]), "+r"(d[105]), "+r"(d[106]), "+r"(d[107]), "+r"(d[108]), "+r"(d[109]), "+r"(d[110]), "+r"(d[111]), "+r"(d[112]), "+r"(d[113]), "+r"(d[114]), "+r"(d[115]), "+r"(d[116]), "+r"(d[117]), "+r"(d[118]), "+r"(d[119]), "+r"(d[120]), "+r"(d[121]), "+r"(d[122]), "+r"(d[123]), "+r"(d[124]), "+r"(d[125]), "+r"(d[126]), "+r"(d[127])
        : "l"(da), "l"(db), "r"(1));
}

__device__ __forceinline__ void wgmma_s8_n128k32(int* d, unsigned long long da, unsigned long long db)
{
    asm volatile(
        "{\n.reg .pred p;\nsetp.ne.b32 p, %66, 0;\n"
        "wgmma.mma_async.sync.aligned.m64n128k32.s32.s8.s8 "
        "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, %22, %23, %24, %25, %26, %27, %28, %29, %30, %31, %32, %33, %34, %35, %36, %37, %38, %39, %40, %41, %42, %43, %44, %45, %46, %47, %48, %49, %50, %51, %52, %53, %54, %55, %56, %57, %58, %59, %60, %61, %62, %63}, %64, %65, p;\n}\n"
        : "+r"(d[0]), "+r"(d[1]), "+r"(d[2]), "+r"(d[3]), "+r"(d[4]), "+r"(d[5]), "+r"(d[6]), "+r"(d[7]), "+r"(d[8]), "+r"(d[9]), "+r"(d[10]), "+r"(d[11]), "+r"(d[12]), "+r"(d[13]), "+r"(d[14]), "+r"(d[15]), "+r"(d[16]), "+r"(d[17]), "+r"(d[18]), "+r"(d[19]), "+r"(d[20]), "+r"(d[21]), "+r"(d[22]), "+r"(d[23]), "+r"(d[24]), "+r"(d[25]), "+r"(d[26]), "+r"(d[27]), "+r"(d[28]), "+r"(d[29]), "+r"(d[30]), "+r"(d[31]), "+r"(d[32]), "+r"(d[33]), "+r"(d[34]), "+r"(d[35]), "+r"(d[36]), "+r"(d[37]), "+r"(d[38]), "+r"(d[39]), "+r"(d[40]), "+r"(d[41]), "+r"(d[42]), "+r"(d[43]), "+r"(d[44]), "+r"(d[45]), "+r"(d[46]), "+r"(d[47]), "+r"(d[48]), "+r"(d[49]), "+r"(d[50]), "+r"(d[51]), "+r"(d[52]), "+r"(d[53]), "+r"(d[54]), "+r"(d[55]), "+r"(d[56]), "+r"(d[57]), "+r"(d[58]), "+r"(d[59]), "+r"(d[60]), "+r"(d[61]), "+r"(d[62]), "+r"(d[63])
        : "l"(da), "l"(db), "r"(1));
}
#endif /* __CUDA_ARCH_FEAT_SM90_ALL */
