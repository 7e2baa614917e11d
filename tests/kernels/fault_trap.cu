// fault_trap.cu -- a test kernel that executes a trap instruction: the launch fails and
// the context is lost (a sticky error), as a device-side assert would.
#ifndef ELEM
#define ELEM float
#endif

extern "C" __global__ void matmul(const ELEM* A, const ELEM* B, ELEM* C, int M, int N, int K)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        __trap();
}
