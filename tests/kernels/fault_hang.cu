// fault_hang.cu -- a test kernel that never finishes (engine isolation tests): it spins
// until C[0] holds 12345, which never happens (C is poisoned before the verified launch).
#ifndef ELEM
#define ELEM float
#endif

extern "C" __global__ void matmul(const ELEM* A, const ELEM* B, ELEM* C, int M, int N, int K)
{
    volatile ELEM* c = C;
    while (c[0] != (ELEM)12345) {
    }
}
