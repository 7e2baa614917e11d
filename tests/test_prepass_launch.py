"""The cuda backend's pre-pass launch, without a GPU: a recording driver stands in for pycuda.

What a kernel file's ``[prepass]`` asks of the backend: launch the pre-pass before the
kernel (same stream), but not when its grid has no blocks at that shape (a pre-pass that
only pads unaligned inputs, as 26_tf32_wgmma_rs's); pass the kernel the scratch
in B's place; encode each tensor map from the device address its ``base`` names (``'a'``,
``'b'``, ``'c'`` or ``'scratch'``) plus its offset, and either copy the maps into the scratch
once per inputs, shape and kernel (whenever they differ from the maps last written there:
23_tf32_wgmma_tma's) or, with ``maps_in = "params"``, pass them as the kernel's first
arguments (tf32_wgmma_rs's, steps 32-35's).
"""
from __future__ import annotations

import struct

import numpy as np
import pytest

from engine.common.dtypes import TypeSpec
from engine.kernels import registry
from engine.measure.backends import cuda as cuda_backend
from engine.measure.backends.base import BackendError, CompiledKernel, Workspace
from engine.kernels.kernel_file import MAP_ELEMS, ExpressionError
from tests.recording_driver import Entry, recording_backend

RS = registry.get("tf32_wgmma_rs")
TMA = registry.get("tf32_wgmma_tma")
WS = registry.get("tf32_wgmma_ws")
FUSED = registry.get("tf32_wgmma_fused")


def fake_encode(addr, dim0, dim1, stride, box0, box1, elem="float32", swizzle=128) -> bytes:
    """128 bytes that say what was asked for (the real one calls libcuda); the element
    type as its index in MAP_ELEMS."""
    return struct.pack("<Q7q", addr, dim0, dim1, stride, box0, box1,
                       MAP_ELEMS.index(elem), swizzle).ljust(128, b"\0")


def decode(blob: bytes, swizzle: bool = False) -> tuple:
    """(address, dim0, dim1, stride, box0, box1, element type[, swizzle bytes]) of a
    fake_encode map."""
    addr, d0, d1, stride, b0, b1, elem, swz = struct.unpack("<Q7q", blob[:64])
    return (addr, d0, d1, stride, b0, b1, MAP_ELEMS[elem]) + ((swz,) if swizzle else ())


@pytest.fixture
def backend(monkeypatch):
    monkeypatch.setattr(cuda_backend, "encode_tensor_map_2d", fake_encode)
    return recording_backend()


def setup(be, variant, m, n, k):
    log: list = []
    kernel = CompiledKernel(variant, variant.default_params(), "float32",
                            (None, Entry("matmul", log), Entry("prepass", log)), "")
    ws = Workspace(np.ones((m, k), np.float32), np.ones((k, n), np.float32))
    ws.a, ws.b, ws.c = (be.drv.mem_alloc(4 * x) for x in (m * k, k * n, m * n))
    ws.c_shape = (m, n)
    return kernel, ws, log


@pytest.mark.parametrize("shape", [(256, 128, 64), (300, 200, 100), (4096, 4096, 4096)])
def test_a_prepass_with_no_blocks_is_not_launched(backend, shape):
    """Aligned shapes: the kernel reads A and B in place (tensor maps from 'a' and 'b'),
    its three maps (A, B, C) its first arguments, nothing copied to the scratch."""
    m, n, k = shape
    kernel, ws, log = setup(backend, RS, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    assert RS.prepass.maps_in == "params"
    assert [e[0] for e in log] == ["matmul"] and backend.drv.copies == []
    name, grid, block, args = log[0]
    scratch = ws.scratch
    assert [len(x) for x in args[:3]] == [128] * 3
    assert args[3] is ws.a and args[4] is scratch and args[5] is ws.c
    assert [int(x) for x in args[6:9]] == [m, n, k]
    assert len(args) == 10 and int(args[9]) == 0      # the workspace: none without stream-K
    assert grid == (min(-(-m // 256) * -(-n // 128), 132), 1, 1) and block == (384, 1, 1)
    assert scratch.nbytes >= 256                      # a device pointer, though nothing is padded
    assert decode(args[0], swizzle=True) == (int(ws.a), k, m, 4 * k, 32, 64, "tf32", 128)
    assert decode(args[1], swizzle=True) == (int(ws.b), n, k, 4 * n, 32, 32, "tf32", 128)
    # C for the epilogue's TMA stores: the output buffer itself, floats copied as they are
    assert decode(args[2], swizzle=True) == (int(ws.c), n, m, 4 * n, 32, 64, "float32", 128)
    # encoded once per buffers and shape, then the same objects every launch
    backend._launch(kernel, ws, m, n, k)
    assert all(x is y for x, y in zip(log[-1][3][:3], args[:3]))
    ws.b = backend.drv.mem_alloc(4 * k * n)           # new B: its map is encoded again
    backend._launch(kernel, ws, m, n, k)
    assert decode(log[-1][3][1])[0] == int(ws.b) and log[-1][3][0] == args[0]
    ws.c = backend.drv.mem_alloc(4 * m * n)           # new C (another output shape): C's map too
    backend._launch(kernel, ws, m, n, k)
    assert decode(log[-1][3][2])[0] == int(ws.c)
    assert backend.drv.copies == [] and [e[0] for e in log] == ["matmul"] * 4


@pytest.mark.parametrize("shape", [(127, 253, 61), (129, 257, 64), (513, 260, 130)])
def test_a_padding_prepass_runs_first_and_the_maps_read_its_copies(backend, shape):
    m, n, k = shape
    kernel, ws, log = setup(backend, RS, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    assert [e[0] for e in log] == ["prepass", "matmul"]
    kp, np_ = -(-k // 4) * 4, -(-n // 4) * 4
    ap = 4 * m * kp if k % 4 else 0
    bp = 4 * k * np_ if n % 4 else 0
    _, pgrid, pblock, pargs = log[0]
    assert pgrid == (-(-max(kp if k % 4 else 0, np_ if n % 4 else 0) // 128),
                     (-(-m // 32) if k % 4 else 0) + (-(-k // 32) if n % 4 else 0), 1)
    assert pblock == (32, 8, 1) and pargs[:3] == (ws.a, ws.b, ws.scratch)
    args = log[1][3]
    assert args[4] is ws.scratch and backend.drv.copies == []    # the maps are arguments
    assert ws.scratch.nbytes >= max(ap + bp, 256)
    base_a = int(ws.scratch) if k % 4 else int(ws.a)
    base_b = int(ws.scratch) + ap if n % 4 else int(ws.b)
    assert decode(args[0]) == (base_a, kp, m, 4 * kp, 32, 64, "tf32")
    assert decode(args[1]) == (base_b, np_, k, 4 * np_, 32, 32, "tf32")
    # C's rows are 16-byte multiples only where N % 4 == 0; else the kernel stores from
    # registers, and its third map is a one-row stand-in inside the scratch
    c_map = ((int(ws.c), n, m, 4 * n) if n % 4 == 0 else (int(ws.scratch), 4, 1, 16))
    assert decode(args[2]) == c_map + (32, 64, "float32")
    for _addr, _d0, _d1, stride, *_ in (decode(x) for x in args[:3]):
        assert stride % 16 == 0          # TMA: row strides in multiples of 16 bytes


def test_maps_are_written_once_per_inputs_and_shape(backend):
    """tf32_wgmma_tma keeps its maps in the scratch: copied there on the first launch, and
    again only when the buffers or the maps change (a new A: its map is encoded again)."""
    m, n, k = 300, 200, 100
    kernel, ws, log = setup(backend, TMA, m, n, k)
    assert TMA.prepass.maps_in == "scratch"
    for _ in range(3):
        backend._launch(kernel, ws, m, n, k)
    assert len(backend.drv.copies) == 1 and [e[0] for e in log] == ["prepass", "matmul"] * 3
    at = -(-4 * k * n // 128) * 128                   # after Bt (N × K floats; K % 4 == 0)
    assert backend.drv.copies[0][0] == int(ws.scratch) + at
    assert [int(x) for x in log[-1][3][:3]] == [int(ws.a), int(ws.scratch), int(ws.c)]
    ws.a = backend.drv.mem_alloc(4 * m * k)      # new A: its map must be encoded again
    backend._launch(kernel, ws, m, n, k)
    assert len(backend.drv.copies) == 2
    assert decode(backend.drv.copies[1][1][:128])[0] == int(ws.a)
    assert backend.drv.copies[1][1][128:] == backend.drv.copies[0][1][128:]      # Bt's: the same


def test_another_kernel_with_the_same_parameters_gets_its_own_maps(backend):
    """Two kernels with maps in the shared scratch: after one, the other must not run with
    the first's maps still there. tf32_wgmma_tma and tf32_wgmma_rs once shared parameter
    names and values (stages=4, persist=1), and the second ran with the first's maps (an
    illegal instruction on the H100, in a sweep of both): the key is the maps, not the
    parameters. Here tma and the experiment tf32_wgmma_fused, both persist=1 (rs now
    takes its maps as arguments)."""
    m, n, k = 512, 512, 512
    tma, ws, _log = setup(backend, TMA, m, n, k)
    fused = CompiledKernel(FUSED, FUSED.default_params(), "float32", tma.handle, "")
    assert FUSED.prepass.maps_in == "scratch" and fused.params["persist"] == tma.params["persist"]
    backend._launch(tma, ws, m, n, k)
    backend._launch(fused, ws, m, n, k)
    backend._launch(fused, ws, m, n, k)
    assert len(backend.drv.copies) == 2
    dst, blob = backend.drv.copies[1]
    assert dst == int(ws.scratch)                       # fused: maps at the scratch's start
    assert decode(blob[:128]) == (int(ws.a), k, m, 4 * k, 32, 128, "float32")
    assert decode(blob[128:256]) == (int(ws.b), n, k, 4 * n, 32, 32, "float32")
    backend._launch(tma, ws, m, n, k)                   # and back
    assert len(backend.drv.copies) == 3
    assert decode(backend.drv.copies[2][1][128:])[4:] == (32, 256, "tf32")


def test_a_prepass_without_maps_makes_the_maps_be_written_again(backend):
    """A pre-pass writes its scratch, perhaps where another kernel's maps lie (the backend
    does not work out where): after tf32_wgmma_ws's, tf32_wgmma_tma writes its maps again
    even though they are the same."""
    m, n, k = 512, 512, 512
    tma, ws, _log = setup(backend, TMA, m, n, k)
    wsk = CompiledKernel(WS, WS.default_params(), "float32", tma.handle, "")
    backend._launch(tma, ws, m, n, k)                   # the larger scratch first: no realloc
    scratch = int(ws.scratch)
    backend._launch(wsk, ws, m, n, k)
    backend._launch(tma, ws, m, n, k)
    assert int(ws.scratch) == scratch
    assert len(backend.drv.copies) == 2 and backend.drv.copies[0] == backend.drv.copies[1]


@pytest.mark.parametrize("shape,pads", [((256, 63, 64), True), ((256, 64, 64), False)])
def test_a_padding_prepass_with_maps_in_params_makes_the_maps_be_written_again(backend, shape, pads):
    """rs takes its maps as arguments, but its pre-pass (where it pads) still writes the
    scratch: at 256 × 63 × 64 its Bp (64 × 64 floats) covers tf32_wgmma_tma's maps (after
    its 63 × 64 Bt) in a scratch of the same size, so tma writes them again; where rs pads
    nothing it writes nothing, and tma's maps stay."""
    m, n, k = shape
    tma, ws, log = setup(backend, TMA, m, n, k)
    rs = CompiledKernel(RS, RS.default_params(), "float32", tma.handle, "")
    backend._launch(tma, ws, m, n, k)                   # the larger scratch first: no realloc
    scratch = int(ws.scratch)
    backend._launch(rs, ws, m, n, k)
    assert (log[-2][0] == "prepass") == pads
    backend._launch(tma, ws, m, n, k)
    assert int(ws.scratch) == scratch
    assert len(backend.drv.copies) == (2 if pads else 1)
    if pads:                                            # Bp (K × Np) overlaps tma's maps
        at, _maps = TMA.prepass.tensor_maps(tma.params, m, n, k)
        assert RS.prepass.scratch_bytes(rs.params, m, n, k) > at
        assert backend.drv.copies[0] == backend.drv.copies[1]


def test_the_transposing_prepass_of_tma_still_runs_every_launch(backend):
    m, n, k = 300, 200, 100
    kernel, ws, log = setup(backend, TMA, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    assert [e[0] for e in log] == ["prepass", "matmul"] * 2


@pytest.mark.parametrize("shape", [(300, 200, 100), (127, 253, 61)])
def test_tma_maps_ask_the_copy_engine_to_round_to_tf32(backend, shape):
    """tf32_wgmma_tma's maps say elem = "tf32": both are encoded with that element type
    (TMA rounds as it copies), from A (or Ap) and from the transposed Bt in the scratch."""
    m, n, k = shape
    kernel, ws, log = setup(backend, TMA, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    (dst, blob), = backend.drv.copies
    kp = -(-k // 4) * 4
    a_map, b_map = decode(blob[:128]), decode(blob[128:])
    assert a_map == ((int(ws.scratch) + 4 * kp * n) if k % 4 else int(ws.a), kp, m, 4 * kp, 32, 128, "tf32")
    assert b_map == (int(ws.scratch), kp, n, 4 * kp, 32, 256, "tf32")


def test_map_element_types_are_checked(tmp_path):
    from engine.kernels.kernel_file import KernelFileError, parse_header
    src = TMA.source_path("cuda").read_text().replace('elem = "tf32"', 'elem = "bf16"', 1)
    path = tmp_path / "tma_bad_elem.cu"
    path.write_text(src.replace('name = "tf32_wgmma_tma"', 'name = "tma_bad_elem"'))
    with pytest.raises(KernelFileError, match="elem must be one of 'float32', 'tf32'"):
        parse_header(path)


def test_a_map_from_c_without_an_output_buffer_is_refused(backend):
    m, n, k = 256, 128, 64
    kernel, ws, _log = setup(backend, RS, m, n, k)
    ws.c = None
    with pytest.raises(BackendError, match="starts from C"):
        backend._launch(kernel, ws, m, n, k)


def test_a_map_from_b_without_b_is_refused(backend):
    m, n, k = 256, 128, 64
    kernel, ws, _log = setup(backend, RS, m, n, k)
    ws.b = None
    with pytest.raises(BackendError, match="no B"):
        backend._launch(kernel, ws, m, n, k)


def _rs_with_a_map(tmp_path, name: str, old: str, new: str):
    """The parsed header of a copy of rung 26 named ``name``, with ``old`` (once in its
    text) replaced by ``new``."""
    from engine.kernels.kernel_file import parse_header
    src = RS.source_path("cuda").read_text()
    assert src.count(old) == 1
    path = tmp_path / f"{name}.cu"
    path.write_text(src.replace(old, new).replace('name = "tf32_wgmma_rs"', f'name = "{name}"'))
    return parse_header(path)


def test_map_bases_are_a_b_c_or_scratch(tmp_path):
    h = _rs_with_a_map(tmp_path, "rs_bad_base", "'scratch' if N % pc else 'b'", "'d'")
    with pytest.raises(ExpressionError, match="'a', 'b', 'c' or 'scratch'"):
        h.prepass.tensor_maps({"persist": 1, "streamk": 0, "bm": 256, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}, 256, 128, 64)


@pytest.mark.parametrize("swizzle", [64, 32])
def test_a_map_may_ask_for_a_narrower_swizzle(backend, tmp_path, swizzle):
    """``swizzle`` (bytes of the span) reaches the encoder; the inner box must fit in it."""
    h = _rs_with_a_map(tmp_path, f"rs_sw{swizzle}", 'box = [32, 32]\nelem = "tf32"',
                       f'box = [{swizzle // 4}, 32]\nelem = "tf32"\nswizzle = {swizzle}')
    _at, maps = h.prepass.tensor_maps({"persist": 1, "streamk": 0, "bm": 256, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}, 256, 128, 64)
    assert (maps[1].box0, maps[1].swizzle) == (swizzle // 4, swizzle)
    assert maps[0].swizzle == maps[2].swizzle == 128          # the default
    blob = fake_encode(*maps[1][1:])                           # the fields after base
    assert decode(blob, swizzle=True)[-1] == swizzle


def test_map_swizzles_and_boxes_are_checked(tmp_path):
    from engine.kernels.kernel_file import KernelFileError
    with pytest.raises(KernelFileError, match="swizzle must be one of 128, 64, 32"):
        _rs_with_a_map(tmp_path, "rs_sw48", 'box = [32, 32]\nelem = "tf32"',
                       'box = [32, 32]\nelem = "tf32"\nswizzle = 48')
    h = _rs_with_a_map(tmp_path, "rs_wide", 'box = [32, 32]\nelem = "tf32"',
                       'box = [32, 32]\nelem = "tf32"\nswizzle = 64')
    with pytest.raises(ExpressionError, match="wider than the map's 64-byte swizzle span"):
        h.prepass.tensor_maps({"persist": 1, "streamk": 0, "bm": 256, "bn": 128, "ks": 1, "pingpong": 0, "rowpad": 16}, 256, 128, 64)


def test_a_prepass_whose_when_is_false_leaves_b_to_the_kernel(backend, tmp_path):
    """``[prepass] when``: where it is false the pre-pass neither runs nor takes B's place
    (no scratch), as if the file had none; where it is true, the scratch replaces B."""
    from engine.kernels.kernel_file import parse_header
    header = parse_header(tmp_path / "k.cu", '/*\n+++\nname = "padded"\ntitle = "t"\n'
                          'source = "s"\n[params]\npad = [0, 1]\n[launch]\ngrid = [1, 1]\n'
                          'block = [32, 1]\n[prepass]\nentry = "prepass"\nwhen = "pad and N % 4"\n'
                          'grid = [1, 1]\nblock = [32, 1]\nscratch = "4 * K * roundup(N, 4)"\n+++\n*/\n')
    variant = registry.variant_from_headers([header], "user")
    for pad, n, runs in ((0, 7, False), (1, 8, False), (1, 7, True)):
        log: list = []
        kernel = CompiledKernel(variant, {"pad": pad}, "float32",
                                (None, Entry("matmul", log), Entry("prepass", log)), "")
        ws = Workspace(np.ones((5, 3), np.float32), np.ones((3, n), np.float32))
        ws.a, ws.b, ws.c = (backend.drv.mem_alloc(4 * x) for x in (15, 3 * n, 5 * n))
        backend._launch(kernel, ws, 5, n, 3)
        assert [e[0] for e in log] == (["prepass", "matmul"] if runs else ["matmul"])
        args = log[-1][3]
        assert (args[1] is not ws.b) if runs else (args[1] is ws.b), (pad, n)


# --- maps_in = "params": the tensor maps as the kernel's first arguments ----------------------

PINGPONG = registry.get("half_wgmma_pingpong")


@pytest.mark.parametrize("shape", [(1024, 1024, 1024), (100, 130, 61)])
def test_maps_in_params_come_first_and_are_never_copied(backend, shape):
    """Steps 32-35 take their maps as arguments (TMA reads them from the parameter space: no
    fence, no fetch from global memory): nothing is copied to the scratch, and the maps
    (A's, then B's) precede A, the scratch, C and the sizes."""
    m, n, k = shape
    kernel, ws, log = setup(backend, PINGPONG, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    assert PINGPONG.prepass.maps_in == "params" and backend.drv.copies == []
    args = log[-1][3]
    assert len(args[0]) == len(args[1]) == 128
    pe = 8                                               # rowpad 16: rows of 8 16-bit elements
    a_base = int(ws.scratch) if k % pe else int(ws.a)
    assert decode(args[0])[:3] == (a_base, -(-k // pe) * pe if k % pe else k, m)
    assert decode(args[1])[1:3] == ((-(-n // pe) * pe if n % pe else n), k)
    assert args[2] is ws.a and args[3] is ws.scratch and args[4] is ws.c
    assert [int(x) for x in args[5:8]] == [m, n, k]
    # encoded once per buffers and shape, then the same objects every launch
    backend._launch(kernel, ws, m, n, k)
    assert log[-1][3][0] is args[0] and log[-1][3][1] is args[1]
    ws.a = backend.drv.mem_alloc(2 * m * k)              # new A: its map encoded again
    backend._launch(kernel, ws, m, n, k)
    assert decode(log[-1][3][0])[0] == (int(ws.scratch) if k % pe else int(ws.a))
    assert log[-1][3][1] == args[1]


STEP32 = registry.get("half_wgmma")


@pytest.mark.parametrize("out, n, whole", [("float32", 1000, True), ("bfloat16", 1000, True),
                                           ("float32", 1001, False), ("bfloat16", 1004, False)])
def test_step_32s_map_of_c_follows_cs_element_bytes(backend, out, n, whole):
    """Step 32's third map is C's, for its TMA stores: counted in 4-byte units (a 16-bit C
    two to a unit: the pre-pass's expressions see OB, C's element bytes, from the run's
    type), rows of N · OB bytes; where those are not whole 16-byte units TMA cannot take C,
    and the map is a 16-byte stand-in at the scratch's start (the kernel stores from
    registers there)."""
    backend.type_spec = TypeSpec("bfloat16", out)
    ob = 4 if out == "float32" else 2
    m, k = 300, 64
    kernel, ws, log = setup(backend, STEP32, m, n, k)
    backend._launch(kernel, ws, m, n, k)
    args = log[-1][3]
    assert [len(x) for x in args[:3]] == [128, 128, 128] and args[5] is ws.c
    addr, d0, d1, stride, b0, b1, elem = decode(args[2])
    assert (b0, b1, elem) == (32, 64, "float32")
    if whole:
        assert (addr, d0, d1, stride) == (int(ws.c), n * ob // 4, m, n * ob)
    else:
        assert (addr, d0, d1, stride) == (int(ws.scratch), 4, 1, 16)
        assert STEP32.prepass.scratch_bytes(kernel.params, m, n, k) >= 16


def test_param_signature_puts_each_argument_where_the_driver_reads_it():
    """sm_90 puts the first 64-byte-aligned map 48 bytes into the launch buffer (the
    parameter bank starts at 0x210): the format pads up to it and to each later offset."""
    sig = cuda_backend.param_signature("PPPiiiP", 2, [48, 176, 304, 312, 320, 328, 332, 336, 344])
    assert sig == "48x128s128sPPPiii4xP" and struct.calcsize(sig) == 352
    assert cuda_backend.param_signature("PPPiii", 2, [0, 128, 256, 264, 272, 280, 284, 288]) == "128s128sPPPiii"
    with pytest.raises(BackendError, match="parameter 2 of the kernel is at byte 300"):
        cuda_backend.param_signature("PPPiii", 2, [48, 176, 300, 312, 320, 328, 332, 336])
    with pytest.raises(BackendError, match="takes 7 parameters; 2 tensor maps and 6 others"):
        cuda_backend.param_signature("PPPiii", 2, [48, 176, 304, 312, 320, 328, 332])


def _pingpong_with(tmp_path, name: str, old: str, new: str):
    from engine.kernels.kernel_file import parse_header
    src = PINGPONG.source_path("cuda").read_text()
    assert src.count(old) == 1
    path = tmp_path / f"{name}.cu"
    path.write_text(src.replace(old, new).replace('name = "half_wgmma_pingpong"', f'name = "{name}"'))
    return parse_header(path)


@pytest.mark.parametrize("old,new,message", [
    ('maps_in = "params"', 'maps_in = "registers"', "maps_in must be 'scratch' or 'params'"),
    ('maps_in = "params"\n', 'maps_in = "params"\n\n[[prepass.tensor_maps]]\nat = 0\nbase = "\'a\'"\n'
     'offset = 0\ndims = [8, 8]\nstride = 16\nbox = [8, 8]\nelem = "b16"\n', "leave 'at' out"),
    ('maps_in = "params"', 'maps_in = "scratch"', "the first map needs 'at'"),
])
def test_maps_in_is_checked(tmp_path, old, new, message):
    from engine.kernels.kernel_file import KernelFileError
    with pytest.raises(KernelFileError, match=message):
        _pingpong_with(tmp_path, "pp_maps", old, new)
