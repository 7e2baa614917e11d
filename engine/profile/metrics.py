"""The curated hardware-counter set of a profile, and how to read it.

Each :class:`Metric` names the Nsight Compute metrics it is computed from, how the values
of several kernels in one profiled launch combine (cuBLAS or a kernel with a pre-pass
launches more than one), what it means and which technique of the source documents moves
it. Nothing here runs ``ncu``: :mod:`engine.profile.nsight` does, and hands its ``--csv --page
raw`` output to :func:`parse_raw_csv` and :func:`summarize`.

The values are kept as a flat ``{key: float}`` mapping (a record's ``profile["counters"]``)
so that results files hold them as plain numbers; texts such as the occupancy limiter or
the top stall reasons are derived from those numbers when shown (:func:`value_text`).
"""
from __future__ import annotations

import csv
import io
import math
from dataclasses import dataclass, field, replace
from typing import Iterable


@dataclass(frozen=True)
class Metric:
    """One row of the profile table.

    ``combine`` says how kernels of one profiled launch combine: ``sum`` (counts, bytes,
    time), ``weighted`` (a percentage or rate, weighted by each kernel's duration),
    ``main`` (a launch property of the longest kernel), ``ratio`` (the sum of ``raw[0]``
    over the sum of ``raw[1]``), ``pct_ratio`` (the same × 100), ``derived`` (computed
    from other metrics' values when shown: the occupancy limiter, the top stalls).
    """

    key: str
    label: str
    unit: str
    raw: tuple[str, ...]
    combine: str
    meaning: str
    technique: str
    group: str
    #: Values are whole numbers (shown without decimals).
    integer: bool = False
    #: Used in place of ``raw[0]`` where the GPU does not have it (older architectures).
    fallback: tuple[str, ...] = ()


#: Warp stall reasons Nsight Compute tells apart on sm_70 and later, with a short gloss.
STALL_REASONS: dict[str, str] = {
    "long_scoreboard": "waiting for a global/local memory (L1TEX) result",
    "short_scoreboard": "waiting for shared memory or a special-function result (MIO)",
    "barrier": "waiting at __syncthreads for the other warps of the block",
    "mio_throttle": "the shared-memory / special-function queue is full",
    "lg_throttle": "the global/local memory queue is full (many small loads)",
    "math_pipe_throttle": "the FMA or tensor pipe is busy (compute-bound: good)",
    "wait": "a fixed-latency dependency (back-to-back dependent math)",
    "not_selected": "ready, another warp was picked (enough parallelism)",
    "selected": "issuing an instruction",
    "dispatch_stall": "the dispatcher could not issue",
    "no_instruction": "instruction cache miss or after a branch",
    "branch_resolving": "waiting for a branch target",
    "membar": "waiting on a memory fence",
    "drain": "waiting for stores to drain after EXIT",
    "sleeping": "in nanosleep or waiting on an mbarrier",
    "tex_throttle": "the texture queue is full",
    "imc_miss": "immediate-constant cache miss",
    "misc": "other",
    "gmma": "waiting for warpgroup MMA (wgmma) operands or results",
}

_STALL_RAW = "smsp__average_warps_issue_stalled_{}_per_issue_active.ratio"
_STALL_RAW_NAMES = tuple(_STALL_RAW.format(r) for r in STALL_REASONS)

#: Occupancy limits Nsight Compute reports (blocks per SM each resource allows).
OCCUPANCY_LIMITS = {
    "registers": "launch__occupancy_limit_registers",
    "shared memory": "launch__occupancy_limit_shared_mem",
    "warps": "launch__occupancy_limit_warps",
    "blocks": "launch__occupancy_limit_blocks",
}

METRICS: tuple[Metric, ...] = (
    Metric("duration_ns", "Duration (profiled launch)", "ns", ("gpu__time_duration.sum",), "sum",
           "GPU time of the one profiled launch (all its kernels); ncu replays it once per "
           "counter pass with caches flushed, so it is near, not equal to, the timed median.",
           "—", "Speed of light"),
    Metric("sm_throughput_pct", "Compute throughput", "% SOL",
           ("sm__throughput.avg.pct_of_peak_sustained_elapsed",), "weighted",
           "The busiest SM unit (FMA, tensor, load/store, issue...) as a share of its peak.",
           "Register tiling and more work per thread raise it; high here with low memory "
           "throughput means compute-bound.", "Speed of light"),
    Metric("memory_throughput_pct", "Memory throughput", "% SOL",
           ("gpu__compute_memory_throughput.avg.pct_of_peak_sustained_elapsed",), "weighted",
           "The busiest of DRAM, L2, L1 and shared memory as a share of its peak.",
           "High with low compute throughput means memory-bound: tiling and reuse cut the "
           "traffic.", "Speed of light"),
    Metric("achieved_occupancy_pct", "Achieved occupancy", "%",
           ("sm__warps_active.avg.pct_of_peak_sustained_active",), "weighted",
           "Resident warps per SM as a share of the most the SM can hold, averaged over the run.",
           "Fewer registers or less shared memory per block raise the limit; a latency-bound "
           "kernel needs more warps, a well-tiled one needs fewer.", "Occupancy"),
    Metric("theoretical_occupancy_pct", "Theoretical occupancy", "%",
           ("sm__maximum_warps_per_active_cycle_pct",), "main",
           "The most warps the launch's registers, shared memory and block size allow.",
           "Set by the occupancy limiter below.", "Occupancy"),
    Metric("occupancy_limiter", "Occupancy limiter", "",
           tuple(OCCUPANCY_LIMITS.values()), "derived",
           "The resource that caps blocks per SM (with that many blocks).",
           "Registers: fewer per thread (launch bounds, smaller thread tiles); shared memory: "
           "smaller tiles or fewer stages.", "Occupancy"),
    Metric("registers_per_thread", "Registers per thread", "", ("launch__registers_per_thread",),
           "main", "Registers each thread of the main kernel holds (from ptxas).",
           "Thread-tile size (TM×TN accumulators) sets most of it; spills beyond 255 cost "
           "local-memory traffic.", "Occupancy", integer=True),
    Metric("shared_per_block", "Shared memory per block", "B",
           ("launch__shared_mem_per_block_static", "launch__shared_mem_per_block_dynamic"),
           "main", "Static plus dynamic shared memory of one thread block of the main kernel.",
           "Tile size × pipeline stages; padding adds a column.", "Occupancy", integer=True),
    Metric("block_threads", "Threads per block", "", ("launch__block_size",), "main",
           "Threads in one block of the main kernel.", "—", "Occupancy", integer=True),
    Metric("gld_sectors_per_request", "Global load sectors / request", "",
           ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum"), "ratio",
           "32-byte sectors one warp-wide global load touches: 4 when 32 threads read 32 "
           "consecutive floats (one 128-byte line), up to 32 when each lands in its own sector.",
           "Coalescing: let consecutive threads read consecutive addresses (naive vs "
           "naive_uncoalesced); 128-bit loads make it 16 per request, still coalesced.",
           "Global memory"),
    Metric("gld_requests", "Global load requests", "",
           ("l1tex__t_requests_pipe_lsu_mem_global_op_ld.sum",), "sum",
           "Warp-wide global load instructions sent to L1 (plain loads; cp.async and TMA "
           "copies are counted apart).",
           "Tiling: each value fetched once per tile and reused from shared memory divides "
           "them by about the tile width.", "Global memory", integer=True),
    Metric("gld_sectors", "Global load sectors", "",
           ("l1tex__t_sectors_pipe_lsu_mem_global_op_ld.sum",), "sum",
           "32-byte sectors requested by global loads (L1 hits included).",
           "Coalescing and tiling both lower it.", "Global memory", integer=True),
    Metric("gst_sectors_per_request", "Global store sectors / request", "",
           ("l1tex__t_sectors_pipe_lsu_mem_global_op_st.sum",
            "l1tex__t_requests_pipe_lsu_mem_global_op_st.sum"), "ratio",
           "32-byte sectors one warp-wide store writes; 4 is a coalesced row of floats.",
           "Coalesced writes of C: consecutive threads own consecutive columns.",
           "Global memory"),
    Metric("cp_async_requests", "cp.async load requests", "",
           ("l1tex__t_requests_pipe_lsu_mem_global_op_ldgsts_cache_access.sum",), "sum",
           "Global→shared asynchronous copies (LDGSTS) sent to L1.",
           "Pipelined kernels move their tiles with cp.async instead of load + store.",
           "Global memory", integer=True),
    Metric("shared_bank_conflicts", "Shared bank conflicts", "",
           ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum"), "sum",
           "Extra shared-memory passes (wavefronts) because threads of a warp hit the same "
           "bank at different addresses (loads and stores).",
           "Pad the tile to [T][T+1] or swizzle it so a column spans all 32 banks "
           "(aat_coalesced vs aat_padded).", "Shared memory", integer=True),
    Metric("shared_conflict_pct", "Bank-conflict share", "%",
           ("l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_ld.sum",
            "l1tex__data_bank_conflicts_pipe_lsu_mem_shared_op_st.sum",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_ld.sum",
            "l1tex__data_pipe_lsu_wavefronts_mem_shared_op_st.sum"), "pct_ratio",
           "Bank conflicts as a share of all shared-memory wavefronts.",
           "Padding or swizzling; 128-bit shared accesses need a conflict-free layout too.",
           "Shared memory"),
    Metric("l1_hit_pct", "L1 hit rate", "%", ("l1tex__t_sector_hit_rate.pct",), "weighted",
           "Sectors found in L1 as a share of those requested.",
           "Reuse within an SM; explicit shared-memory tiles replace it in tiled kernels.",
           "Caches"),
    Metric("l2_hit_pct", "L2 hit rate", "%", ("lts__t_sector_hit_rate.pct",), "weighted",
           "Sectors found in L2 as a share of those requested from it.",
           "Blocks that share tiles running together (rasterisation, swizzled block order).",
           "Caches"),
    Metric("dram_read_bytes", "DRAM bytes read", "B", ("dram__bytes_read.sum",), "sum",
           "Bytes read from device memory; ncu flushes the caches before each pass, so "
           "this is a cold launch.",
           "Tiling: beyond the L2 cache every re-read of A and B is DRAM traffic; larger "
           "tiles re-read less.", "Caches", integer=True),
    Metric("dram_write_bytes", "DRAM bytes written", "B", ("dram__bytes_write.sum",), "sum",
           "Bytes written to device memory (C once, plus any split-K partials).",
           "—", "Caches", integer=True),
    Metric("dram_throughput_pct", "DRAM throughput", "% SOL",
           ("gpu__dram_throughput.avg.pct_of_peak_sustained_elapsed",), "weighted",
           "Device-memory bandwidth used as a share of its peak.",
           "A memory-bound kernel (GEMV, skinny shapes) should sit near the top.", "Caches"),
    Metric("fma_pipe_pct", "FMA pipe", "% busy",
           ("sm__pipe_fma_cycles_active.avg.pct_of_peak_sustained_active",), "weighted",
           "Cycles the FP32 fused multiply-add pipe was busy (SIMT FP32 math).",
           "Register tiling feeds it: more FMAs per shared-memory load.", "Pipes"),
    # The float pipe's counter (hmma_type_hmma_hgmma_qgmma) reads 0% for int8's wgmma on
    # an H200 (its IMMA pipe 80%): the counter of every MMA type first, where the GPU has it.
    Metric("tensor_pipe_pct", "Tensor pipe (MMA)", "% busy",
           ("sm__pipe_tensor_type_hmma_hgmma_qgmma_imma_igmma_bmma_bgmma_cycles_active"
            ".avg.pct_of_peak_sustained_active",),
           "weighted",
           "Cycles the tensor cores were busy with matrix multiply-adds (mma.sync, wgmma; "
           "float and integer); register moves the compiler puts on that pipe (HFMA2.MMA) "
           "are left out.",
           "TF32 tensor-core kernels (mma.sync, wgmma with TMA) move work here from the FMA "
           "pipe.", "Pipes",
           fallback=("sm__pipe_tensor_op_hmma_type_hmma_hgmma_qgmma_cycles_active.avg.pct_of_peak_sustained_active",
                     "sm__pipe_tensor_op_hmma_cycles_active.avg.pct_of_peak_sustained_active")),
    Metric("tf32_tensor_ops", "TF32 tensor-core ops", "",
           ("sm__ops_path_tensor_op_hmma_src_tf32_dst_fp32.sum",
            "sm__ops_path_tensor_op_hgmma_src_tf32_dst_fp32.sum"), "sum",
           "Multiply-add operations the tensor cores did on TF32 inputs (mma.sync and wgmma); "
           "zero for an FP32 SIMT kernel.",
           "Only the TF32 rungs and cuBLAS TF32 reach the tensor cores.", "Pipes", integer=True),
    Metric("instructions", "Instructions executed", "", ("smsp__inst_executed.sum",), "sum",
           "Warp-level instructions issued by the kernel(s).",
           "Vector loads, unrolling and register tiling do the same work with fewer.",
           "Pipes", integer=True),
    Metric("top_stalls", "Top warp stall", "warps/issue",
           _STALL_RAW_NAMES, "derived",
           "Why warps were not issuing: the largest reasons, as warps stalled per issue "
           "cycle.",
           "long_scoreboard: hide memory latency (more warps, cp.async pipelines); barrier: "
           "fewer __syncthreads; mio_throttle: fewer, wider shared accesses.", "Warp stalls"),
)

METRIC_BY_KEY = {m.key: m for m in METRICS}
#: The metrics whose values are stored per stall reason: ``stall.<reason>``.
STALL_KEY = "stall."
LIMIT_KEY = "limit."


def resolved_raw(metric: Metric, has) -> tuple[str, ...]:
    """``metric.raw`` with ``raw[0]`` replaced by the first fallback ``has(name)`` accepts
    when ``raw[0]`` itself is not had (an older GPU lacks it)."""
    if not metric.fallback or has(metric.raw[0]):
        return metric.raw
    return (next((f for f in metric.fallback if has(f)), metric.raw[0]),) + metric.raw[1:]


def raw_metric_names(metrics: Iterable[Metric] = METRICS,
                     available: set[str] | None = None) -> list[str]:
    """The Nsight Compute metric names ``metrics`` need (for ``ncu --metrics``).

    ``available``: the base names the GPU has (``ncu --query-metrics``); a name it lacks is
    left out (or replaced by the metric's fallback) so that one missing counter on an
    older GPU does not stop the whole profile. Launch attributes are always asked for.
    """
    out: list[str] = []
    for m in metrics:
        names = m.raw if available is None else resolved_raw(m, lambda n: has_metric(n, available))
        for name in names:
            if name not in out and (available is None or has_metric(name, available)):
                out.append(name)
    return out


def base_name(metric: str) -> str:
    """``sm__throughput.avg.pct_of_peak_sustained_elapsed`` → ``sm__throughput``."""
    return metric.split(".", 1)[0]


def has_metric(metric: str, available: set[str]) -> bool:
    """Whether ``available`` (base names from ``ncu --query-metrics``) has ``metric``;
    launch attributes and occupancy figures are not in that list but always exist."""
    return (metric.startswith("launch__") or metric == "sm__maximum_warps_per_active_cycle_pct"
            or base_name(metric) in available)


def parse_query_metrics(text: str) -> set[str]:
    """Base metric names of ``ncu --query-metrics`` output (its first column)."""
    out = set()
    for line in text.splitlines():
        word = line.split(" ", 1)[0].strip()
        if "__" in word and not word.startswith("-"):
            out.add(word.rsplit(".", 1)[-1])     # "FBSP.TriageCompute.dramc__..." too
    return out


def select(keys: Iterable[str] | None) -> tuple[Metric, ...]:
    """The metrics named by ``keys`` (all when None); ValueError names an unknown one."""
    if keys is None:
        return METRICS
    keys = list(keys)
    unknown = [k for k in keys if k not in METRIC_BY_KEY]
    if unknown:
        raise ValueError(f"unknown profile metric(s) {', '.join(unknown)}; "
                         f"known: {', '.join(METRIC_BY_KEY)}")
    return tuple(m for m in METRICS if m.key in keys)


# --- reading ncu's CSV --------------------------------------------------------------------

@dataclass
class KernelCounters:
    """One profiled kernel of ``ncu --csv --page raw`` output."""

    id: int
    name: str
    block: str
    grid: str
    values: dict[str, float] = field(default_factory=dict)

    @property
    def duration_ns(self) -> float:
        return self.values.get("gpu__time_duration.sum", math.nan)


#: Scale of the units ncu may print when not asked for base units.
_UNIT_SCALE = {"byte": 1, "Kbyte": 1e3, "Mbyte": 1e6, "Gbyte": 1e9, "Tbyte": 1e12,
               "KB": 1e3, "MB": 1e6, "GB": 1e9, "ns": 1, "us": 1e3, "usecond": 1e3,
               "ms": 1e6, "msecond": 1e6, "nsecond": 1, "second": 1e9, "s": 1e9}
#: Columns of the raw page that describe the kernel, not a metric.
_DESCRIPTIVE = {"ID", "Process ID", "Process Name", "Host Name", "Kernel Name", "Context",
                "Stream", "Block Size", "Grid Size", "Device", "CC", "Function Name",
                "Demangled Name", "Estimated Speedup"}


class ProfileReadError(ValueError):
    """ncu's output could not be read as a raw-page CSV."""


def _number(text: str) -> float:
    text = text.strip().replace(",", "")
    if text in ("", "n/a", "N/A", "nan"):
        return math.nan
    return float(text)


def parse_raw_csv(text: str) -> list[KernelCounters]:
    """The kernels of ``ncu --import REPORT --csv --page raw`` output.

    The first row names the columns (``ID``, ``Kernel Name``, ... then metric names), the
    second gives units, then one row per kernel. Thousands separators are removed and
    scaled units (``Mbyte``, ``usecond``) converted to base units; a metric ncu could not
    collect (``n/a``) is left out of that kernel's values. Lines ncu prints before the
    table (``==PROF==`` ...) are skipped.
    """
    lines = [ln for ln in text.splitlines() if ln.startswith('"')]
    if not lines:
        raise ProfileReadError("ncu printed no CSV table (no kernel was profiled?)")
    rows = list(csv.reader(io.StringIO("\n".join(lines))))
    header = rows[0]
    if "Kernel Name" not in header or "ID" not in header:
        raise ProfileReadError("not ncu raw-page CSV: no 'ID' and 'Kernel Name' columns")
    body = rows[1:]
    units: list[str] = [""] * len(header)
    if body and body[0] and body[0][header.index("ID")] == "":
        units = body[0] + [""] * (len(header) - len(body[0]))
        body = body[1:]
    out = []
    col = {name: i for i, name in enumerate(header)}
    for row in body:
        if len(row) != len(header):
            raise ProfileReadError(f"a row has {len(row)} columns, the header {len(header)}")
        values: dict[str, float] = {}
        for i, name in enumerate(header):
            if name in _DESCRIPTIVE:
                continue
            try:
                val = _number(row[i])
            except ValueError:
                continue                    # a text-valued metric: not one of ours
            if math.isnan(val):
                continue
            values[name] = val * _UNIT_SCALE.get(units[i], 1)
        out.append(KernelCounters(int(_number(row[col["ID"]])), row[col["Kernel Name"]],
                                  row[col["Block Size"]] if "Block Size" in col else "",
                                  row[col["Grid Size"]] if "Grid Size" in col else "",
                                  values))
    return out


def _sum(kernels: list[KernelCounters], name: str) -> float:
    vals = [k.values[name] for k in kernels if name in k.values]
    return float(sum(vals)) if vals else math.nan


def summarize(kernels: list[KernelCounters], metrics: Iterable[Metric] = METRICS
              ) -> dict[str, float]:
    """The curated values of one profiled launch (one or more kernels), as floats.

    Occupancy limits are kept as ``limit.<resource>`` (blocks per SM) and stall reasons as
    ``stall.<reason>``; :func:`value_text` turns them into the limiter and the top stalls.
    """
    if not kernels:
        return {}
    durations = [k.duration_ns if math.isfinite(k.duration_ns) else 0.0 for k in kernels]
    main = kernels[max(range(len(kernels)), key=durations.__getitem__)]
    total = sum(durations)
    out: dict[str, float] = {"kernels": float(len(kernels))}

    def weighted(name: str) -> float:
        pairs = [(k.values[name], d) for k, d in zip(kernels, durations) if name in k.values]
        if not pairs:
            return math.nan
        weight = sum(d for _, d in pairs)
        if weight <= 0:
            return float(sum(v for v, _ in pairs) / len(pairs))
        return float(sum(v * d for v, d in pairs) / weight)

    present = {name for k in kernels for name in k.values}
    for m in metrics:
        m = replace(m, raw=resolved_raw(m, present.__contains__))
        if m.combine == "sum":
            val = sum((_sum(kernels, r) for r in m.raw), 0.0) if len(m.raw) > 1 else _sum(kernels, m.raw[0])
        elif m.combine == "weighted":
            val = weighted(m.raw[0])
        elif m.combine == "main":
            parts = [main.values.get(r, math.nan) for r in m.raw]
            finite = [p for p in parts if math.isfinite(p)]
            val = float(sum(finite)) if finite else math.nan
        elif m.combine in ("ratio", "pct_ratio"):
            half = len(m.raw) // 2
            num = sum(v for v in (_sum(kernels, r) for r in m.raw[:half]) if math.isfinite(v))
            den = sum(v for v in (_sum(kernels, r) for r in m.raw[half:]) if math.isfinite(v))
            # Both sides measured, or no value: a missing counter is not a zero.
            have = (any(r in present for r in m.raw[:half])
                    and any(r in present for r in m.raw[half:]))
            val = (num / den * (100.0 if m.combine == "pct_ratio" else 1.0)) if have and den > 0 \
                else (0.0 if have and m.combine == "pct_ratio" else math.nan)
        elif m.key == "occupancy_limiter":
            for resource, raw in OCCUPANCY_LIMITS.items():
                if raw in main.values:
                    out[LIMIT_KEY + resource] = main.values[raw]
            continue
        elif m.key == "top_stalls":
            for reason in STALL_REASONS:
                val = weighted(_STALL_RAW.format(reason))
                if math.isfinite(val):
                    out[STALL_KEY + reason] = val
            continue
        else:
            continue
        if math.isfinite(val):
            out[m.key] = val
    if total > 0:
        out["main_share_pct"] = 100.0 * max(durations) / total
    return out


# --- showing values --------------------------------------------------------------------

def occupancy_limiter(counters: dict[str, float]) -> tuple[str, float] | None:
    """(resource, blocks per SM) of the tightest occupancy limit, or None."""
    limits = {k[len(LIMIT_KEY):]: v for k, v in counters.items() if k.startswith(LIMIT_KEY)}
    if not limits:
        return None
    resource = min(limits, key=lambda r: (limits[r], list(OCCUPANCY_LIMITS).index(r)
                                          if r in OCCUPANCY_LIMITS else 99))
    return resource, limits[resource]


def top_stalls(counters: dict[str, float], count: int = 3) -> list[tuple[str, float]]:
    """The ``count`` largest stall reasons (reason, warps per issue cycle), 'selected'
    (a warp issuing is not a stall) left out."""
    stalls = [(k[len(STALL_KEY):], v) for k, v in counters.items()
              if k.startswith(STALL_KEY) and k != STALL_KEY + "selected" and v > 0]
    return sorted(stalls, key=lambda kv: -kv[1])[:count]


def _scaled(value: float, unit: str) -> str:
    if unit == "B":
        for scale, name in ((2**30, "GiB"), (2**20, "MiB"), (2**10, "KiB")):
            if abs(value) >= scale:
                return f"{value / scale:.2f} {name}"
        return f"{value:.0f} B"
    if unit == "ns":
        if value >= 1e6:
            return f"{value / 1e6:.3f} ms"
        if value >= 1e3:
            return f"{value / 1e3:.1f} µs"
        return f"{value:.0f} ns"
    return ""


def value_of(metric: Metric, counters: dict[str, float]) -> float:
    """The number a bar chart draws for ``metric`` (NaN when not measured); derived rows:
    the limiter's blocks per SM and the largest stall."""
    if metric.key == "occupancy_limiter":
        lim = occupancy_limiter(counters)
        return lim[1] if lim else math.nan
    if metric.key == "top_stalls":
        stalls = top_stalls(counters, 1)
        return stalls[0][1] if stalls else math.nan
    return counters.get(metric.key, math.nan)


def value_text(metric: Metric, counters: dict[str, float], stalls: int = 3) -> str:
    """``metric``'s value as a table cell shows it ('—' when not measured); ``stalls``:
    how many stall reasons the top-stalls row names."""
    if metric.key == "occupancy_limiter":
        lim = occupancy_limiter(counters)
        return f"{lim[0]} ({lim[1]:.0f} blocks/SM)" if lim else "—"
    if metric.key == "top_stalls":
        top = top_stalls(counters, stalls)
        return ", ".join(f"{r} {v:.2f}" for r, v in top) if top else "—"
    val = counters.get(metric.key, math.nan)
    if not math.isfinite(val):
        return "—"
    scaled = _scaled(val, metric.unit)
    if scaled:
        return scaled
    if metric.integer or (abs(val) >= 1000 and float(val).is_integer()):
        return f"{val:,.0f}"
    if metric.unit.startswith("%"):
        return f"{val:.1f}%"
    return f"{val:.2f}"
