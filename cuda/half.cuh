/* half.cuh: what the 16-bit (FP16/BF16) kernel files share: the input types, the FP32
 * accumulators' conversion to the output type, and mma.sync's m16n8k16 step per input
 * type. Included by the ladder's 16-bit steps (30_half_wmma.cu, 31_half_mma.cu) only, so
 * that the FP32 kernels including lab_ptx.cuh do not parse cuda_fp16.h / cuda_bf16.h. */
#pragma once
#include <cuda_fp16.h>
#include <cuda_bf16.h>

/* An FP32 accumulator stored in C's type (OUT), rounded to nearest even. */
__device__ __forceinline__ void store_out(float* p, float v) { *p = v; }
__device__ __forceinline__ void store_out(__half* p, float v) { *p = __float2half_rn(v); }
__device__ __forceinline__ void store_out(__nv_bfloat16* p, float v) { *p = __float2bfloat16_rn(v); }

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
