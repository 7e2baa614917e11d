"""The Profile flow: the Profile action's timing run, then Nsight Compute on each launch,
then the counters in the Profile tab.

:class:`ProfileFlow` owns the :class:`~gui.profile_runner.ProfileRunner` and the report
folder of the profile in progress; the window lends it its widgets and starts the timing
run for it (:attr:`ProfileFlow.run_plan`), like any other run.
"""
from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Callable

from PySide6.QtCore import QObject, Signal

from engine.inputs.sizes import format_shape
from engine.kernels import user_kernels
from engine.measure.backends import BackendStatus
from engine.profile import nsight as profile
from engine.results.records import ResultRecord
from engine.run.runner import HOST

from . import dialogs
from .profile_runner import ProfileRunner
from .run_bar import format_duration

if TYPE_CHECKING:
    from .main_window import MainWindow

#: The Profile action's tooltip while it can run.
PROFILE_TIP = ("Time the chosen variants at one size, then profile one launch of each with "
               "Nsight Compute: hardware counters side by side in the Profile tab")


class ProfileFlow(QObject):
    """Signals
    -------
    running_changed(bool)
        The profiling itself (after the timing run) began or ended: the window holds
        its controls meanwhile.
    """

    running_changed = Signal(bool)

    def __init__(self, window: MainWindow, run_plan: Callable[[object], bool]):
        super().__init__(window)
        self.window = window
        #: Starts the timing run of a plan (the window's run path); False if it cannot.
        self.run_plan = run_plan
        self.runner = ProfileRunner(self)
        #: The report folder of the Profile in progress (its timing run, then ncu).
        self.folder: Path | None = None
        self.runner.progress.connect(self._progress)
        self.runner.log.connect(window.log.append)
        self.runner.finished.connect(self._finished)
        window.profile_view.open_report_failed.connect(
            lambda text: dialogs.show_error(window, "Cannot open the report", text))

    @property
    def busy(self) -> bool:
        """A profile is in progress (its timing run or its ncu launches)."""
        return self.runner.running or self.folder is not None

    def status(self) -> tuple[bool, str]:
        """(whether Profile can run for the chosen backend, why not)."""
        win = self.window
        if not win.statuses:
            return False, "the backends are still being probed"
        backend = win.config.backend_name()
        if backend == "cuda" and not win.statuses.get("cuda", BackendStatus("cuda", False)).available:
            return False, "the cuda backend is unavailable"
        if win.config.target().ray_address is not None:
            return False, "profiles are taken on this machine's GPUs, not on a Ray cluster"
        return profile.availability(backend, with_version=False)

    def refresh(self, idle: bool) -> None:
        """The Profile action and tab say whether a profile can start now."""
        ok, why = self.status()
        action = self.window.profile_action
        action.setEnabled(ok and idle)
        action.setToolTip(PROFILE_TIP if ok else f"Profile is unavailable: {why}")
        action.setStatusTip(action.toolTip())
        self.window.profile_view.set_availability(ok, why)

    def start(self, shape: tuple[int, int, int] | None = None) -> bool:
        """The chosen variants are timed and verified at one size (``shape``, or the one
        the user picks when several are set), then one launch of each is profiled under
        Nsight Compute and the counters shown in the Profile tab."""
        win = self.window
        ok, why = self.status()
        if not ok:
            dialogs.show_error(win, "Cannot profile", why)
            return False
        try:
            plan = win.config.build_plan()
        except ValueError as exc:
            dialogs.show_error(win, "Cannot profile", str(exc))
            return False
        if plan.matrices is None and shape is None:
            shapes = list(plan.shapes)
            if len(shapes) > 1:
                names = [format_shape(s) for s in shapes]
                largest = max(shapes, key=lambda s: s[0] * s[1] * s[2])
                picked = dialogs.choose(win, "Profile at which size?",
                                        "Each variant is profiled at one size:", names,
                                        format_shape(largest))
                if picked is None:
                    return False
                shape = shapes[names.index(picked)]
            else:
                shape = shapes[0]
        if shape is not None:
            plan.shapes = [tuple(shape)]
        folder = profile.new_report_folder()
        win.log.append("info", f"profile: timing {len(plan.items)} parameter set(s) first; "
                               f"reports go to {folder}")
        if plan.matrices is not None:
            win.log.append("info", "profile: the timing run uses the loaded matrices; the "
                                   "profiled launch uses random inputs of their shape (memory "
                                   "and instruction counts follow the shape, not the values)")
        self.folder = folder
        if not self.run_plan(plan):
            self.folder = None
            return False
        return True

    def timing_cancelled(self) -> None:
        """The timing run is cancelled: no profile follows it."""
        self.folder = None

    def timing_finished(self, recs: list[ResultRecord], ran: bool) -> None:
        """The timing run ended (``ran``: it started, was not cancelled and the window
        stays): profile what it measured."""
        folder, self.folder = self.folder, None
        if folder is None or not ran:
            return
        if all(profile.why_not_profiled(r, HOST) for r in recs):
            self.window.log.append("error", "profile: nothing ran that could be profiled")
            return
        # profile_records says why it leaves a record out, and counts what it profiles.
        self.running_changed.emit(True)
        self.runner.start(recs, folder, user_kernels.kernel_files_of(r.variant for r in recs))

    def cancel(self) -> bool:
        """Cancel the profiling in flight (its ncu is killed); False when none runs."""
        if not self.runner.running:
            return False
        self.runner.cancel()
        return True

    def stop(self, timeout: float) -> None:
        """Cancel the profiling in flight and wait for its thread (the window closes)."""
        if self.runner.running:
            self.runner.cancel()
            self.runner.wait(timeout)

    def _progress(self, done: int, total: int, what: str) -> None:
        if what:
            self.window.run_bar.progressed(done, total, f"profiling {what}", None)
        else:
            self.window.run_bar.result_in(done, total)

    def _finished(self, results, seconds: float, cancelled: bool) -> None:
        win = self.window
        self.running_changed.emit(False)
        failed = [r for r in results if not r.ok]
        text = (f"Profiled {len(results) - len(failed)} kernel launch"
                f"{'es' if len(results) - len(failed) != 1 else ''} in {format_duration(seconds)}")
        if failed:
            text += f" ({len(failed)} failed)"
        if cancelled:
            text = "Profile cancelled: " + text[0].lower() + text[1:]
        win.run_bar.finished(text)
        win.statusBar().showMessage(text, 10_000)
        win.log.append("error" if failed else "info", text)
        win.files.live_changed()           # the records now carry their counters
        if results:
            req = results[0].request
            win.profile_view.show_shape(req.m, req.n, req.k, req.dtype)
            win.bottom_tabs.setCurrentWidget(win.profile_view)
            sizes = win.splitter.sizes()       # counters need room: half the height at least
            if sum(sizes) and sizes[1] < sum(sizes) // 2:
                win.splitter.setSizes([sum(sizes) - sum(sizes) // 2, sum(sizes) // 2])
        if failed and not cancelled and not win.closing:
            dialogs.show_error(win, "Some profiles failed", failed[0].error,
                               "\n".join(f"{r.request.label()}: {r.error}" for r in failed))
