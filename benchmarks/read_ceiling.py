"""What a plain read of N bytes reaches on this GPU, against the engine's copy probe.

A GEMV reads its matrix once; before blaming a GEMV kernel for the time above the copy
bandwidth's, this times a kernel that only reads the same bytes (16-byte loads, a
grid-stride loop, one partial sum a block) back to back, as the engine times kernels, and
prints its GB/s as a share of the 256 MB device-to-device copy the engine measures.

    python3 benchmarks/read_ceiling.py --sizes 1x2048x2048,1x4096x4096,8192x1x8192
"""
import argparse
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

SOURCE = r"""
extern "C" __global__ void read_all(const float4* __restrict__ x, long long n4, float* out)
{
    float s = 0.f;
    for (long long i = blockIdx.x * (long long)blockDim.x + threadIdx.x; i < n4;
         i += (long long)gridDim.x * blockDim.x) {
        float4 v = __ldg(x + i);
        s += v.x + v.y + v.z + v.w;
    }
    if (s == 12345.f)              /* never true for the data below: keeps the loads */
        out[blockIdx.x] = s;
}
"""


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--sizes", required=True, help="MxNxK shapes; bytes = (MK + KN + MN) * 4")
    ap.add_argument("--launches", type=int, default=200)
    args = ap.parse_args()
    import pycuda.driver as drv
    from pycuda.compiler import SourceModule
    from engine.inputs.sizes import parse_sizes
    from engine.measure.backends.base import copy_bandwidth

    drv.init()
    ctx = drv.Device(0).make_context()
    try:
        dev = drv.Device(0)
        sms = dev.get_attribute(drv.device_attribute.MULTIPROCESSOR_COUNT)
        fn = SourceModule(SOURCE, no_extern_c=True).get_function("read_all")
        nbytes = 256 * 2**20
        src, dst = drv.mem_alloc(nbytes), drv.mem_alloc(nbytes)
        def copy_ms():
            e0, e1 = drv.Event(), drv.Event()
            e0.record(); drv.memcpy_dtod(dst, src, nbytes); e1.record(); e1.synchronize()
            return e0.time_till(e1)
        copy = copy_bandwidth(nbytes, copy_ms)
        out = drv.mem_alloc(4 * 4096)
        print(f"{dev.name()}: copy {copy:.0f} GB/s; read kernel, {args.launches} launches back to back")
        print(f"{'shape':>18} {'MB':>7} {'blocks':>7} {'us':>7} {'GB/s':>7} {'% copy':>7}")
        for shape in parse_sizes(args.sizes):
            m, n, k = shape
            total = (m * k + k * n + m * n) * 4
            buf = drv.mem_alloc(total)
            drv.memset_d32(buf, 0x3F800000, total // 4)
            best = None
            for per_sm in (1, 2, 4, 8):
                grid = sms * per_sm
                launch = lambda: fn(buf, np.int64(total // 16), out, block=(256, 1, 1), grid=(grid, 1))
                for _ in range(5):
                    launch()
                e0, e1 = drv.Event(), drv.Event()
                e0.record()
                for _ in range(args.launches):
                    launch()
                e1.record(); e1.synchronize()
                us = e0.time_till(e1) * 1e3 / args.launches
                if best is None or us < best[1]:
                    best = (grid, us)
            gbps = total / best[1] / 1e3
            print(f"{m}x{n}x{k:>6} {total / 1e6:7.1f} {best[0]:7d} {best[1]:7.2f} {gbps:7.0f} {100 * gbps / copy:7.1f}")
            buf.free()
    finally:
        ctx.pop()
        ctx.detach()
    return 0


if __name__ == "__main__":
    sys.exit(main())
