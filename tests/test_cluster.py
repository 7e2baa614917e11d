"""Engines on a Ray cluster (engine.run.cluster): ``bench --ray local`` on a local cluster of
two worker nodes (one engine slot each) with OpenCL (PoCL) and cpu sweeps, a worker
killed in the middle of a sweep, and the app without Ray. The cluster starts once for
the module; the Ray tests skip cleanly where Ray is not installed."""
from __future__ import annotations

import json
import sys
import threading
import time

import pytest

import main
from engine.run import cluster
from engine.run.dispatch import start_run
from engine.run.engines import EngineLost
from engine.kernels.registry import params_to_str
from engine.run.runner import Plan, expand_items
from tests.helpers import require_backend

RAY_OK, RAY_WHY = cluster.ray_status()
needs_ray = pytest.mark.skipif(not RAY_OK, reason=RAY_WHY)


def bench(capsys, *args):
    code = main.main(["bench", *map(str, args)])
    out, err = capsys.readouterr()
    return code, " ".join(out.split()), " ".join(err.split())


@pytest.fixture(scope="module")
def local_cluster():
    """The two-worker try-out cluster of ``--ray local``, started once, stopped after."""
    if not RAY_OK:
        pytest.skip(RAY_WHY)
    t0 = time.monotonic()
    # Started from a thread that then ends, as the GUI's workers do: the cluster must
    # outlive it (Ray's processes die with the thread that started them otherwise).
    box = {}
    starter = threading.Thread(target=lambda: box.update(address=cluster.start_local()))
    starter.start()
    starter.join()
    address = box["address"]
    res = cluster.connect("local")
    assert res.get(cluster.SLOT) == 2, res
    print(f"local ray cluster at {address} up in {time.monotonic() - t0:.1f} s")
    yield address
    cluster.shutdown_local()


def _key(d):
    return (d["variant"], params_to_str(d["params"]), d["m"], d["n"], d["k"])


@needs_ray
@pytest.mark.slow
def test_bench_ray_local_opencl_share(local_cluster, capsys, tmp_path):
    require_backend("opencl")
    out_file = tmp_path / "ray.json"
    code, out, err = bench(capsys, "--ray", "local", "--backend", "opencl", "--variants",
                           "naive,tiled_any", "--sizes", "64,96", "--warmup", 0, "--repeats", 2,
                           "--out", out_file)
    assert code == 0, err
    data = json.loads(out_file.read_text())["records"]
    keys = [_key(d) for d in data]
    items = expand_items("opencl", ["naive", "tiled_any"])
    assert sorted(keys) == sorted((n, params_to_str(p), s, s, s) for n, p in items for s in (64, 96))
    assert all(d["status"] == "ok" and d["passed"] is True for d in data), data
    workers = {d["worker"] for d in data}
    assert len(workers) == 2 and all(w.startswith("ray ") for w in workers), workers
    assert all(d["host"] for d in data)
    assert "worker" in out and "ray " in out          # the table names each row's worker


@needs_ray
@pytest.mark.slow
def test_bench_ray_local_cpu_compare(local_cluster, capsys, tmp_path):
    out_file = tmp_path / "ray.csv"
    code, out, err = bench(capsys, "--ray", "local", "--backend", "cpu", "--sizes", "64,32x48x40",
                           "--mode", "compare", "--warmup", 0, "--repeats", 3, "--quiet",
                           "--out", out_file)
    assert code == 0, err
    from engine.results import records
    recs = records.load(out_file)
    assert len(recs) == 4 and all(r.status == "ok" and r.passed for r in recs)
    by_worker: dict[str, list] = {}
    for r in recs:
        by_worker.setdefault(r.worker, []).append((r.m, r.n, r.k))
    assert len(by_worker) == 2, by_worker                 # each worker ran each shape
    for shapes in by_worker.values():
        assert sorted(shapes) == [(32, 48, 40), (64, 64, 64)]


@needs_ray
@pytest.mark.slow
def test_worker_killed_mid_sweep(local_cluster, monkeypatch):
    """One worker's actor is killed while it times an item: that item is recorded as an
    error saying the worker was lost, the rest of its task runs elsewhere (a new actor or
    the other worker), and every item has exactly one record."""
    require_backend("opencl")
    from engine.run import dispatch
    # one piece an engine, cut in equal chunks (not shrinking to single items): tasks of
    # several items, so the kill (at most at a task's second item, after a first result)
    # leaves some to go back to the queue
    monkeypatch.setattr(dispatch, "PIECES_PER_ENGINE", 1)

    def equal_chunks(ranked, cost, pieces):
        size = max(1, -(-len(ranked) // max(pieces, 1)))
        return [ranked[i:i + size] for i in range(0, len(ranked), size)]

    monkeypatch.setattr(dispatch, "_guided_chunks", equal_chunks)
    engines = cluster.ray_engines("local", "opencl")
    assert len(engines) == 2
    items = (expand_items("opencl", ["naive", "tiled_any"])
             + expand_items("opencl", ["wpt"], {"ts": (16,)}))
    assert len(items) == 10                  # naive on each device first, the rest in 2 tasks
    plan = Plan("opencl", items, shapes=[(64, 64, 64)], warmup=0, repeats=2,
                time_budget_s=0.3)          # each item times for 0.3 s: the kill lands inside
    killed: dict = {}
    logs: list[str] = []
    results_seen = threading.Event()

    def emit(ev):
        if ev.kind == "log":
            logs.append(ev.message)
        elif ev.kind == "result":
            results_seen.set()
        elif ev.kind == "progress" and results_seen.is_set() and not killed:
            # Runs on the dispatcher thread of the engine whose item just started: kill
            # that engine's actor before the item can finish.
            victim = next(e for e in engines if ev.current.startswith(f"[{e.label}]"))
            killed.update(worker=victim.worker, item=ev.item, engine=victim)
            import ray
            ray.kill(victim.actor)

    t0 = time.monotonic()
    run = start_run(plan, engines, emit, "share")
    try:
        recs = run.result(timeout=120)
    finally:
        for eng in engines:
            eng.close()
    elapsed = time.monotonic() - t0
    assert killed, "no item was in flight after the first result"
    keys = [(r.variant, params_to_str(r.params)) for r in recs]
    assert sorted(keys) == sorted((n, params_to_str(p)) for n, p in items), keys
    errors = [r for r in recs if r.status != "ok"]
    assert len(errors) == 1, [(r.label(), r.status, r.error) for r in errors]
    lost = errors[0]
    name, params, _shape = killed["item"]
    assert (lost.variant, lost.params) == (name, params)
    assert lost.status == "error" and "ray worker" in lost.error and "lost" in lost.error, lost.error
    assert "ray.kill" in lost.error and "restarted" in lost.error
    assert lost.worker == killed["worker"] and lost.host
    assert all(r.passed is True for r in recs if r is not lost)
    # The rest of the killed worker's task went back to the queue and ran elsewhere.
    assert any("go back to the queue" in m for m in logs), logs
    assert any("engine restarted" in m for m in logs), logs
    assert killed["engine"].starts == 2                # a fresh actor took the slot
    assert len({r.worker for r in recs}) >= 2
    assert elapsed < 60, elapsed


@needs_ray
@pytest.mark.slow
def test_no_free_slot_is_engine_lost(local_cluster):
    """A third engine on a two-slot cluster cannot be placed: EngineLost, soon."""
    engines = cluster.ray_engines("local", "cpu")
    extra = cluster.RayEngine("cpu", 0, slot=2, place_timeout_s=1.0)
    try:
        for eng in engines:
            eng.open()
        t0 = time.monotonic()
        with pytest.raises(EngineLost, match="no ray worker with a free 'matmul_lab_slot'"):
            extra.open()
        assert time.monotonic() - t0 < 10
        assert not extra.alive()
    finally:
        for eng in engines + [extra]:
            eng.close()


@needs_ray
def test_unreachable_address_is_bad_input(capsys):
    code, _out, err = bench(capsys, "--ray", "127.0.0.1:1", "--backend", "cpu", "--sizes", "32")
    assert code == 2 and "cannot reach the Ray cluster at 127.0.0.1:1" in err, err


def test_without_ray_the_app_says_why(monkeypatch, capsys):
    monkeypatch.setitem(sys.modules, "ray", None)    # `import ray` fails as if not installed
    ok, why = cluster.ray_status()
    assert not ok and why == "Ray is not installed (pip install -r requirements-cluster.txt)"
    code, _out, err = bench(capsys, "--ray", "local", "--backend", "cpu", "--sizes", "32")
    assert code == 2
    assert "Ray is not installed (pip install -r requirements-cluster.txt)" in err
    # Everything else still works.
    code, out, err = bench(capsys, "--list")
    assert code == 0 and "Ray cluster (--ray): unavailable: Ray is not installed" in out
    code, out, err = bench(capsys, "--backend", "cpu", "--sizes", "32", "--repeats", 1,
                           "--warmup", 0, "--in-process", "--quiet")
    assert code == 0, err


@needs_ray
@pytest.mark.slow
def test_worker_node_leaves_mid_sweep(local_cluster):
    """A worker node goes away in the middle of a sweep: the item its engine was running
    when the loss was seen is an error that says the worker was lost, no slot is left for a
    new actor so that engine leaves the run, and the other worker runs the rest of its
    task. (The module's last Ray test: it leaves a new node in place of the lost one.)"""
    require_backend("opencl")
    ray_cluster = cluster.local_cluster()
    engines = cluster.ray_engines("local", "opencl")
    for eng in engines:
        eng.restart_timeout_s = 2.0
    items = expand_items("opencl", ["naive", "tiled_any"])
    plan = Plan("opencl", items, shapes=[(48, 48, 48)], warmup=0, repeats=2, time_budget_s=0.3)
    gone: dict = {}
    logs: list[str] = []

    def emit(ev):
        if ev.kind == "log":
            logs.append(ev.message)
        elif ev.kind == "progress" and not gone and ev.item is not None:
            victim = next(e for e in engines if ev.current.startswith(f"[{e.label}]"))
            node = next(n for n in ray_cluster.worker_nodes
                        if n.node_id == victim.where["node"])
            gone.update(worker=victim.worker, item=ev.item)
            ray_cluster.remove_node(node, allow_graceful=False)

    try:
        t0 = time.monotonic()
        recs = start_run(plan, engines, emit, "share").result(timeout=120)
        elapsed = time.monotonic() - t0
    finally:
        for eng in engines:
            eng.close()
        # A new worker node in place of the one that left (not waiting until Ray has
        # marked the old one dead: that takes about 10 s).
        ray_cluster.add_node(num_cpus=1, num_gpus=0, resources={cluster.SLOT: 1})
    assert gone
    assert sorted((r.variant, params_to_str(r.params)) for r in recs) == sorted(
        (n, params_to_str(p)) for n, p in items), [(r.label(), r.worker, r.status) for r in recs]
    errors = [r for r in recs if r.status != "ok"]
    assert len(errors) == 1 and errors[0].worker == gone["worker"], [
        (r.label(), r.worker, r.error) for r in errors]
    assert "ray worker on node" in errors[0].error and "lost" in errors[0].error
    assert any("could not restart" in m for m in logs), logs
    assert all(r.passed is True for r in recs if r is not errors[0])
    # The lost engine left the run: everything after the loss ran on the other worker.
    assert any(r.worker != gone["worker"] for r in recs)
    assert elapsed < 60, elapsed


def test_gpu_engines_take_one_gpu_and_report_its_index():
    """No Ray needed: the actor options, and a GPU actor's records carry the GPU's index
    on its host (Ray's id) instead of 0, the index inside its CUDA_VISIBLE_DEVICES."""
    import dataclasses

    from engine.measure.backends.base import DeviceInfo
    from engine.results.records import ResultRecord
    from engine.run.runner import Event

    assert cluster.RayEngine("cuda")._options()["num_gpus"] == 1
    opts = cluster.RayEngine("opencl")._options()
    assert opts["num_cpus"] == 1 and opts["resources"] == {cluster.SLOT: 1}
    assert "num_gpus" not in opts and opts["max_concurrency"] >= 2
    actor = object.__new__(cluster._EngineActor)
    actor.gpu = 3
    rec = ResultRecord(backend="cuda", device="GPU", variant="naive", params={}, m=1, n=1, k=1,
                       dtype="float32", device_index=0)
    ev = actor._fix_event(Event("result", record=rec, records=[rec],
                                device=DeviceInfo("cuda", 0, "GPU")))
    assert ev.record.device_index == 3 and ev.records[0].device_index == 3
    assert ev.device.index == 3 and rec.device_index == 0        # new objects
    actor.gpu = None
    assert actor._fix_event(dataclasses.replace(ev)).record.device_index == 3


def test_ray_error_texts_are_shortened():
    class ActorDiedError(Exception):
        pass
    text = ("The actor died because of an error raised in its creation task, \x1b[36mray::"
            "_EngineActor.__init__()\x1b[39m (pid=1, ip=10.0.0.1)\n  File \"x.py\", line 1\n"
            "ModuleNotFoundError: No module named 'numpy'")
    assert cluster._short(ActorDiedError(text)) == (
        "ActorDiedError: the actor failed to start: ModuleNotFoundError: No module named 'numpy'")
    text = ("The actor died unexpectedly before finishing this task.\n\tclass_name: A\n"
            "The actor is dead because it was killed by `ray.kill`.")
    assert cluster._short(ActorDiedError(text)) == (
        "ActorDiedError: The actor is dead because it was killed by `ray.kill`")


@needs_ray
@pytest.mark.slow
def test_worker_node_joins_mid_sweep(local_cluster, monkeypatch):
    """A worker node that joins the cluster in the middle of a share-mode sweep gets an
    engine (engine.run.cluster.FreeWorkers) and takes queued items: records come from both
    workers, and every item has exactly one record. (After the leave test: it leaves
    the cluster one node larger.)"""
    require_backend("opencl")
    import ray

    from engine.run import dispatch
    monkeypatch.setattr(dispatch, "JOIN_POLL_S", 0.5)
    ray_cluster = cluster.local_cluster()
    cluster.connect("local")
    # Both slots taken (one engine runs, one idles), so only a new node can bring one.
    running, idle = cluster.RayEngine("opencl", slot=0), cluster.RayEngine("opencl", slot=1)
    running.open()
    idle.open()
    end = time.monotonic() + 60        # a node lost by the test before may still count
    while ray.available_resources().get(cluster.SLOT, 0) > 0 and time.monotonic() < end:
        time.sleep(0.5)
    assert ray.available_resources().get(cluster.SLOT, 0) == 0
    joiners = cluster.FreeWorkers("opencl", first_slot=2)
    assert joiners() == []
    items = expand_items("opencl", ["naive", "tiled_any", "wpt"])
    plan = Plan("opencl", items, shapes=[(80, 72, 88)], warmup=0, repeats=2, time_budget_s=0.3)
    logs: list[str] = []

    def emit(ev):
        if ev.kind == "log":
            logs.append(ev.message)
        elif ev.kind == "result":
            first_result.set()

    first_result = threading.Event()
    try:
        run = start_run(plan, [running], emit, "share", joiners)
        assert first_result.wait(120)
        # From this thread: Ray's node start-up sets signal handlers (main thread only).
        ray_cluster.add_node(num_cpus=1, num_gpus=0, resources={cluster.SLOT: 1})
        recs = run.result(timeout=180)
    finally:
        for eng in [running, idle, *joiners.made]:
            eng.close()
    keys = sorted((r.variant, params_to_str(r.params)) for r in recs)
    assert keys == sorted((n, params_to_str(p)) for n, p in items), keys
    assert all(r.status == "ok" and r.passed is True for r in recs), [
        (r.label(), r.status, r.error) for r in recs if r.status != "ok"]
    assert len(joiners.made) >= 1 and any("joined the run" in m for m in logs), logs
    workers = {r.worker for r in recs}
    assert running.worker in workers and len(workers) >= 2, workers
