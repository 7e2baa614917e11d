/*
+++
name = "planted_accumulates"
role = "user"
title = "Planted fault: adds A·B to C on every launch after the first"
summary = "A test kernel that is right only on its first launch: it computes C += A·B, treating a NaN in C as empty, so the verified launch (on the poisoned C) is right and every later launch adds the product again. The check of the last timed launch's output (C poisoned before the warm-up) catches it."
source = "tests/test_timed_recheck.py (issue 37: re-check what was timed)"

[params]
block = [16]

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
/*
 * planted_accumulates.cl -- naive matmul with beta = 1 by mistake: C = A·B + C, where a
 * non-finite C (the lab's poison) counts as 0. Float only (isfinite).
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef BLOCK
#define BLOCK 16
#endif

__kernel __attribute__((reqd_work_group_size(BLOCK, BLOCK, 1)))
void matmul(__global const ELEM* A, __global const ELEM* B, __global ELEM* C,
            const int M, const int N, const int K)
{
    const int col = get_group_id(0) * BLOCK + get_local_id(0);
    const int row = get_group_id(1) * BLOCK + get_local_id(1);
    if (row >= M || col >= N)
        return;
    const float old = C[row * N + col];
    float acc = isfinite(old) ? old : 0.0f;   /* the fault: C is read, not overwritten */
    for (int k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
