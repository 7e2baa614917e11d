"""TMA rounds to TF32 when its tensor map says so: the hardware fact tf32_wgmma_tma relies on.

A tensor map encoded with the element type TFLOAT32 (``elem = "tf32"`` in a kernel header,
``encode_tensor_map_2d(..., elem="tf32")``) makes the copy engine round each float to TF32
as it writes shared memory. What rounding, exactly, is not in the CUDA documentation; this
test measures it bit for bit on the GPU: a kernel TMA-loads 32 x 32 boxes of random bit
patterns (and exact ties, subnormals, infinities, NaN, the largest floats) and writes them
back unswizzled; every finite value must equal round-to-nearest-even with the low 13
mantissa bits cleared (what numpy computes below), and FLOAT32 maps must copy the bits.
Measured on an H100: exactly that (ties to even, not away from zero as cvt.rna; NaN stays
NaN; subnormals rounded like any other bit pattern, not flushed).
"""
from __future__ import annotations

import numpy as np
import pytest

from engine.measure.backends import cuda as cuda_backend

PROBE = r"""
#include "lab_ptx.cuh"
/* one CTA per 32-row band of a (rows x 32) float matrix: TMA-load the band's 32 x 32 box
   (128B swizzle: 16-byte chunk c of row r lands at c ^ (r % 8)) and write it back in place
   order to out */
extern "C" __global__ void copy_through_tma(const unsigned char* map, float* out)
{
#if defined(__CUDA_ARCH_FEAT_SM90_ALL)
    __shared__ __align__(1024) float tile[32 * 32];
    __shared__ __align__(8) unsigned long long bar;
    const unsigned sbar = (unsigned)__cvta_generic_to_shared(&bar);
    const unsigned stile = (unsigned)__cvta_generic_to_shared(tile);
    if (threadIdx.x == 0) {
        mbar_init(sbar, 1);
        asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
    }
    __syncthreads();
    if (threadIdx.x == 0) {
        tensormap_acquire(map);
        mbar_arrive_expect_tx(sbar, 32 * 32 * 4);
        tma_load_2d(stile, map, 0, blockIdx.x * 32, sbar);
    }
    mbar_wait(sbar, 0);
    for (int i = threadIdx.x; i < 32 * 32; i += blockDim.x) {
        const int r = i >> 5, c = i & 31;
        out[(blockIdx.x * 32 + r) * 32 + c] = tile[r * 32 + (((c >> 2) ^ (r & 7)) << 2) + (c & 3)];
    }
#else
    __trap();
#endif
}
"""


def rne_tf32(bits: np.ndarray) -> np.ndarray:
    """FP32 bit patterns rounded to TF32, to nearest, ties to even (low 13 bits cleared)."""
    b = bits.astype(np.uint64)
    return ((b + 0xFFF + ((b >> 13) & 1)) & ~np.uint64(0x1FFF)).astype(np.uint32)


def test_rne_tf32_reference():
    """The reference itself: ties go to the even neighbour, others to the nearest."""
    one = np.float32(1.0).view(np.uint32)
    cases = {one + 0x1000: one, one + 0x3000: one + 0x4000, one + 0x0FFF: one,
             one + 0x1001: one + 0x2000, one + 0x2FFF: one + 0x2000}
    got = rne_tf32(np.array(list(cases), np.uint32))
    assert got.tolist() == [int(v) for v in cases.values()]


def inputs(rows: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    bits = rng.integers(0, 2**32, size=rows * 32, dtype=np.uint64).astype(np.uint32)
    ties = rng.integers(0, 2**32, size=4096, dtype=np.uint64).astype(np.uint32)
    bits[:4096] = (ties & ~np.uint32(0x1FFF)) | np.uint32(0x1000)       # exact ties
    bits[4096:4160] = np.arange(64, dtype=np.uint32) * 977 + 1          # subnormals
    bits[4160:4168] = [0x7F800000, 0xFF800000, 0x7FC00000, 0x7F7FFFFF, 0xFF7FFFFF,
                       0x7F7FF000, 0x00000000, 0x80000000]
    return bits.view(np.float32).reshape(rows, 32)


@pytest.fixture(scope="module")
def hopper(tmp_path_factory):
    """(pycuda driver, the probe kernel) on device 0 in the engine's own context
    (CudaBackend.open / close); skipped without a CUDA device or below sm_90."""
    be = cuda_backend.CudaBackend()
    try:
        be.open(0)
    except cuda_backend.BackendError as exc:
        pytest.skip(f"no CUDA device: {exc}")
    try:
        if int(be.arch[3:]) < 90:
            pytest.skip(f"TMA needs sm_90 ({be.arch})")
        source = tmp_path_factory.mktemp("tma-tf32") / "copy_through_tma.cu"
        source.write_text(PROBE)
        cubin, _log = cuda_backend.nvcc_cubin(source, [], "sm_90a")
        yield be.drv, be.drv.module_from_buffer(cubin).get_function("copy_through_tma")
    finally:
        be.close()


def copy_through_tma(drv, kernel, a: np.ndarray, elem: str) -> np.ndarray:
    rows = a.shape[0]
    da, dout, dmap = drv.mem_alloc(a.nbytes), drv.mem_alloc(a.nbytes), drv.mem_alloc(128)
    try:
        drv.memcpy_htod(da, a)
        blob = cuda_backend.encode_tensor_map_2d(int(da), 32, rows, 128, 32, 32, elem)
        drv.memcpy_htod(dmap, np.frombuffer(blob, np.uint8))
        drv.memset_d32(dout, 0xDEADBEEF, a.size)                 # poison
        kernel(dmap, dout, block=(128, 1, 1), grid=(rows // 32, 1))
        drv.Context.synchronize()
        out = np.empty_like(a)
        drv.memcpy_dtoh(out, dout)
        return out
    finally:
        for buf in (da, dout, dmap):
            buf.free()


@pytest.mark.gpu
@pytest.mark.parametrize("seed", [1, 2])
def test_tf32_maps_round_to_nearest_even_and_float32_maps_copy(hopper, seed):
    drv, kernel = hopper
    a = inputs(32 * 64, seed)
    bits = a.view(np.uint32)
    finite = np.isfinite(a)

    plain = copy_through_tma(drv, kernel, a, "float32").view(np.uint32)
    assert np.array_equal(plain, bits)

    rounded = copy_through_tma(drv, kernel, a, "tf32").view(np.uint32)
    want = rne_tf32(bits)
    bad = np.flatnonzero(finite.ravel() & (rounded.ravel() != want.ravel()))
    assert bad.size == 0, [(hex(bits.ravel()[i]), hex(rounded.ravel()[i]), hex(want.ravel()[i]))
                           for i in bad[:8]]
    assert np.all((rounded & 0x1FFF) == 0)                      # TF32: 10 mantissa bits left
    flat_in, flat_out = bits.ravel(), rounded.ravel()
    assert flat_out[4160] == 0x7F800000 and flat_out[4161] == 0xFF800000      # infinities
    assert np.isnan(flat_out[4162:4163].view(np.float32)).all()               # NaN stays NaN
    assert flat_out[4163] == 0x7F800000            # FLT_MAX rounds up to infinity
    assert np.array_equal(flat_out[4096:4160], rne_tf32(flat_in[4096:4160]))  # not flushed
