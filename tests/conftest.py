"""Qt fixtures for the GUI tests (pytest-qt); the engine tests do not use them."""
import os

os.environ.setdefault("QT_QPA_PLATFORM", "offscreen")

import contextlib  # noqa: E402
import gc  # noqa: E402
import importlib.util  # noqa: E402
import stat  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

# The GPU machines have no PySide6: there the GUI tests are not collected at all.
collect_ignore_glob = [] if importlib.util.find_spec("PySide6") else ["test_gui*.py"]

import pytest  # noqa: E402


@pytest.fixture(autouse=True)
def _collect_garbage_between_gui_tests(request):
    """Run Python's cyclic GC only between GUI tests, never in the middle of a Qt call.

    A collection that starts inside a PySide/pyqtgraph call (e.g. while a new chart
    connects its signals) can destroy the previous test's Qt wrappers re-entrantly; we
    saw rare hangs there. Collecting explicitly at the test boundaries avoids that.
    """
    if "test_gui" not in request.module.__name__:
        yield
        return
    with gc_only_between_tests():
        yield


@contextlib.contextmanager
def gc_only_between_tests():
    """Python's cyclic GC off for one test, a collection before and after (see above):
    for window tests in files not named test_gui*."""
    gc.collect()
    gc.disable()
    try:
        yield
    finally:
        gc.enable()
        gc.collect()


@pytest.fixture(autouse=True)
def _user_data_in_tmp(request, tmp_path_factory, monkeypatch):
    """Every test's app data (the results journal) goes to a folder of its own, never
    to the user's, and no test finds another's journals."""
    monkeypatch.setenv("MATMUL_LAB_DATA", str(tmp_path_factory.mktemp("user-data")))
    yield
    # User kernels a test registered (a window reads the user kernel folder) leave with it.
    from engine.kernels.user_kernels import unload_user_kernels
    unload_user_kernels()


#: The session's cubin cache (engine.measure.build_cache) that this process made, if it did.
_SESSION_CACHE: list[str] = []


def pytest_configure(config):
    """Kernel builds go to one folder for the whole session, never to the user's cache:
    each test's backend (and each engine process, each xdist worker, which inherit the
    environment) finds what another built instead of running nvcc again. A folder set
    in MATMUL_LAB_CACHE beforehand is kept (the GPU suite's two steps can share one).

    An xdist worker gets its share of the cores for its BLAS pool and its parallel builds:
    16 workers each running OpenBLAS on every core of a 16-core GPU machine spun 256
    threads, and a test of a few small shapes took minutes."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers > 1:
        import numpy  # noqa: F401, PLC0415  (its BLAS pool loaded, to be bounded)

        from engine.common import cpus
        cpus.set_thread_budget(max(1, cpus.usable_cpus() // workers), environment=False)
    if os.environ.get("MATMUL_LAB_CACHE") is not None:
        return     # set by the user, or by the xdist controller this worker started from
    import tempfile
    _SESSION_CACHE.append(tempfile.mkdtemp(prefix="matmul-lab-test-cubins-"))
    os.environ["MATMUL_LAB_CACHE"] = _SESSION_CACHE[0]


@pytest.hookimpl(trylast=True)     # after -m has deselected
def pytest_collection_modifyitems(config, items):
    """Under xdist, the GPU suite's longest tests first (tests/gpu_durations.py): in
    collection order a worker could start a two-minute test last and run alone to the end."""
    workers = int(os.environ.get("PYTEST_XDIST_WORKER_COUNT") or 0)
    if workers < 2 or not any(item.get_closest_marker("gpu") for item in items):
        return
    from tests import gpu_durations
    order = gpu_durations.longest_first([item.nodeid for item in items], gpu_durations.load(), workers)
    items[:] = [items[i] for i in order]


def pytest_unconfigure(config):
    import shutil
    for folder in _SESSION_CACHE:
        shutil.rmtree(folder, ignore_errors=True)
        os.environ.pop("MATMUL_LAB_CACHE", None)


@pytest.fixture
def shots(tmp_path):
    """Where a test saves its screenshots: ``MATMUL_LAB_SHOTS`` (kept), else a temporary
    folder."""
    folder = Path(os.environ.get("MATMUL_LAB_SHOTS") or tmp_path)
    folder.mkdir(parents=True, exist_ok=True)
    return folder


@pytest.fixture
def questions(monkeypatch):
    """Answer ``gui.dialogs.ask`` without a dialog: ``questions.asked`` collects (title,
    text); the answer is ``questions.answer`` (by default what closing the box answers)."""
    import gui.dialogs

    class Questions:
        answer: str | None = None
        asked: list[tuple[str, str]] = []

    q = Questions()
    q.asked = []

    def ask(parent, title, text, choices, default, escape):
        q.asked.append((title, text))
        return q.answer if q.answer is not None else escape

    monkeypatch.setattr(gui.dialogs, "ask", ask)
    return q


@pytest.fixture
def error_dialogs(monkeypatch):
    """Capture ``gui.dialogs.show_error`` calls as (title, text) instead of showing boxes."""
    import gui.dialogs

    shown: list[tuple[str, str]] = []
    monkeypatch.setattr(gui.dialogs, "show_error",
                        lambda parent, title, text, details="": shown.append((title, text)))
    return shown


@pytest.fixture
def gui_settings(tmp_path):
    """An isolated ini-file QSettings."""
    from gui.settings import ini_settings

    return ini_settings(tmp_path / "settings.ini")


@pytest.fixture
def make_window(qtbot, gui_settings, error_dialogs, questions):
    """Factory: a shown 1280×800 MainWindow whose backends have been probed.

    ``engines``: ``"local"`` (default: in-process engines, fast), ``"process"`` (the
    app's own default, one process per device), or an ``engine_factory``.
    """
    from engine.run.engines import LocalEngine
    from gui.app import MainWindow

    made = []

    def make(settings=None, engines="local"):
        factory = {"local": LocalEngine, "process": None}.get(engines, engines) \
            if isinstance(engines, str) else engines
        win = MainWindow(settings if settings is not None else gui_settings, engine_factory=factory)
        qtbot.addWidget(win)
        made.append(win)
        win.resize(1280, 800)
        win.show()
        # Ray is checked after the backends (importing it takes a moment): wait for both,
        # so that no test times its event loop while an import holds the interpreter.
        qtbot.waitUntil(lambda: win.backends_ready() and win.ray_status is not None,
                        timeout=30_000)
        return win

    yield make
    for win in made:
        win.shutdown()


@pytest.fixture
def configure():
    """Set a window up for a small sweep: configure(win, backend, variants, sizes, ...)."""

    def apply(win, backend="opencl", variants=("naive", "tiled_any"), sizes="32,64,96",
              warmup=0, repeats=2, budget_s=None, params=None, verify=True):
        cfg = win.config
        cfg.select(backend, 0)
        cfg.variants.set_only(variants)
        for (name, pname), values in (params or {}).items():
            cfg.variants.set_param_values(name, pname, values)
        cfg.sizes.set_text(sizes)
        cfg.warmup.setValue(warmup)
        cfg.repeats.setValue(repeats)
        if budget_s is None:
            cfg.repeats_radio.setChecked(True)
        else:
            cfg.budget_radio.setChecked(True)
            cfg.budget.setValue(budget_s)
        cfg.verify.setChecked(verify)
        cfg.inputs.set_mode("random")
        assert cfg.problems() == [], cfg.problems()
        return win

    return apply


@pytest.fixture
def fake_ncu(tmp_path, monkeypatch):
    """An executable ``ncu`` that is tests/fake_ncu.py (it replays a report recorded on
    an H100; FAKE_NCU_MODE picks a failure); NCU points at it."""
    exe = tmp_path / "bin" / "ncu"
    exe.parent.mkdir()
    script = Path(__file__).resolve().parent / "fake_ncu.py"
    exe.write_text(f'#!/bin/sh\nexec "{sys.executable}" "{script}" "$@"\n')
    exe.chmod(exe.stat().st_mode | stat.S_IXUSR)
    monkeypatch.setenv("NCU", str(exe))
    recorded = Path(__file__).resolve().parent / "data" / "ncu" / "h100_2048"
    monkeypatch.setenv("FAKE_NCU_CSV", str(next(recorded.glob("naive-block16-*.csv"))))
    monkeypatch.setenv("FAKE_NCU_LOG", str(tmp_path / "ncu.log"))
    monkeypatch.setenv("FAKE_NCU_MODE", "ok")
    return exe


@pytest.fixture
def nvcc_runs(monkeypatch):
    """The nvcc runs the cuda backend makes from now on (source file names): what the
    build caches save is counted by it."""
    from engine.measure.backends import cuda as cuda_backend  # noqa: PLC0415
    runs: list[str] = []
    real = cuda_backend.nvcc_cubin

    def counting(source, options, arch, **kw):
        runs.append(Path(source).name)
        return real(source, options, arch, **kw)

    monkeypatch.setattr(cuda_backend, "nvcc_cubin", counting)
    return runs
