// fault_illegal_address.cu -- a test kernel that writes far outside C: the launch ends
// with CUDA_ERROR_ILLEGAL_ADDRESS, a sticky error that leaves the context unusable.
#ifndef ELEM
#define ELEM float
#endif

extern "C" __global__ void matmul(const ELEM* A, const ELEM* B, ELEM* C, int M, int N, int K)
{
    if (blockIdx.x == 0 && threadIdx.x == 0)
        C[(size_t)1 << 40] = (ELEM)1;
}
