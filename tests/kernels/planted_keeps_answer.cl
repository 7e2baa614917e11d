/*
+++
name = "planted_keeps_answer"
role = "user"
title = "Planted fault: skips every element of C that already holds a finite value"
summary = "A test kernel that is right only when verified: it computes an element of C only where C does not hold a finite number yet, so it passes on the poisoned C of the verified launch and then keeps whatever answer it finds. The re-check on fresh inputs from a second seed, which writes over the first inputs' answer, catches it."
source = "tests/test_timed_recheck.py (issue 37: re-check what was timed)"

[params]
block = [16]

[launch]
grid = ["cdiv(N, block)", "cdiv(M, block)"]
block = ["block", "block"]
+++
*/
/*
 * planted_keeps_answer.cl -- naive matmul that "caches" its result in C: an element that
 * already holds a finite value is taken as computed. Float only (isfinite).
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
    if (isfinite(C[row * N + col]))
        return;                       /* the fault: an answer is already there */
    float acc = 0.0f;
    for (int k = 0; k < K; ++k)
        acc += A[row * K + k] * B[k * N + col];
    C[row * N + col] = acc;
}
