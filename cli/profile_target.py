"""``python main.py profile-target``: the process Nsight Compute profiles, one kernel at
one shape, launched by :func:`engine.profile.nsight.run_profile`."""
from __future__ import annotations

import argparse
import json
import sys

from engine.common.files import write_atomic
from engine.kernels.registry import params_from_str

def _target_parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="main.py profile-target", description=(
        "Launch one kernel once inside a profiler range (for ncu --profile-from-start off); "
        "started by the lab's Profile action and bench --profile, not by hand."))
    p.add_argument("--variant", required=True)
    p.add_argument("--params", default="")
    p.add_argument("--shape", required=True, help="MxNxK")
    p.add_argument("--dtype", default="float32")
    p.add_argument("--out-dtype", default="", help="C's type (default: the input type's)")
    p.add_argument("--layout", default="", help="B as K×N (kn, default) or N×K (nk)")
    p.add_argument("--device", type=int, default=0)
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--kernel-file", action="append", default=[])
    p.add_argument("--json", required=True, help="where to write what happened")
    return p


def target_main(argv: list[str]) -> int:
    """``python main.py profile-target``: build, launch once unprofiled, once profiled."""
    args = _target_parser().parse_args(argv)
    said: dict = {"ok": False}
    try:
        said.update(_profile_target(args))
        said["ok"] = True
    except Exception as exc:  # noqa: BLE001  (every failure is reported to the parent)
        said["error"] = str(exc) or type(exc).__name__
    try:
        write_atomic(args.json, json.dumps(said), f"the profile target's report {args.json}",
                     OSError)
    except OSError as exc:      # the parent then says the target wrote nothing
        print(f"profile-target: {exc}", file=sys.stderr)
        return 1
    return 0 if said["ok"] else 1


def _profile_target(args) -> dict:
    from engine.common.dtypes import TypeSpec  # noqa: PLC0415
    from engine.inputs import matrices  # noqa: PLC0415
    from engine.kernels import registry  # noqa: PLC0415
    from engine.measure.backends.cuda import CudaBackend  # noqa: PLC0415

    if args.kernel_file:
        _names, problems = registry.load_kernel_files(args.kernel_file)
        if problems:
            raise RuntimeError("; ".join(problems))
    v = registry.get(args.variant)
    params = params_from_str(args.params) if args.params else v.default_params()
    m, n, k = (int(x) for x in args.shape.lower().split("x"))
    backend = CudaBackend()
    # the run's types and layout, as the engine sets them: C's type is a build constant
    # (-DOUT) and sizes C's buffer, B as N×K a build constant (-DB_NK) and an upload
    backend.type_spec = TypeSpec(args.dtype, args.out_dtype or None, args.layout or "kn")
    info = backend.open(args.device)   # this main thread owns the context
    ws = None
    try:
        # a value left to the shape (auto): the shape's; a dispatch line (the lab's own GEMM):
        # the kernel its table picks on this device, as the engine runs it
        name, params = registry.concrete(args.variant, params, m, n, k, sms=info.compute_units,
                                         arch=backend.arch, dtype=args.dtype,
                                         layout=args.layout or "kn")
        v = registry.get(name)
        reason = v.check("cuda", params, m, n, k, args.dtype)
        if reason:
            raise RuntimeError(f"{v.label(params)} cannot run at {m}×{n}×{k}: {reason}")
        kernel = backend.compile(v, params, args.dtype)
        ops = matrices.generate_operands(m, n, k, args.dtype, seed=args.seed)
        ws = backend.prepare(ops.a, None if v.kind == "aat" else ops.b)
        ws.scale_a, ws.scale_b = ops.scale_a, ops.scale_b    # FP8's per-tensor scales (else 1)
        backend.ensure_output(ws, v.output_shape(m, n, k))
        backend.poison_output(ws)
        backend.run_once(kernel, ws, m, n, k)        # outside the range: loads, heuristics
        backend.poison_output(ws)
        backend.profile_launch(kernel, ws, m, n, k)
        return {"kernel": kernel.report}
    finally:
        if ws is not None:
            backend.release(ws)
        backend.close()
