/*
 * fault_hang.cl -- a test kernel that never finishes (engine isolation tests).
 * It spins until C[0] holds 12345, which never happens: the engine poisons C before the
 * verified launch. The read is volatile so the compiler cannot drop the loop.
 */
#ifndef ELEM
#define ELEM float
#endif
#ifndef BLOCK
#define BLOCK 16
#endif

__kernel void matmul(__global const ELEM* A, __global const ELEM* B, __global ELEM* C,
                     const int M, const int N, const int K)
{
    volatile __global ELEM* c = C;
    while (c[0] != (ELEM)12345) {
    }
}
