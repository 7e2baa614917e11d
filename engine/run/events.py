"""The words a sweep's events use, as enums: what happened (:class:`EventKind`), what the
engine is doing to the item in flight (:class:`Phase`), and how loud a log line is
(:class:`LogLevel`). They subclass ``str`` so that logs, files and old comparisons with
the plain text keep working."""
from __future__ import annotations

from enum import StrEnum


class EventKind(StrEnum):
    """What an :class:`~engine.run.runner.Event` reports."""

    STARTED = "started"      # the sweep opened its device: ``total`` runs, ``device``
    PROGRESS = "progress"    # an item starts: ``done`` of ``total``, ``item``, ``eta_s``
    LOG = "log"              # a line for the log, at ``level``
    RESULT = "result"        # one item's ``record``
    FINISHED = "finished"    # the end: ``records`` (final), ``cancelled``
    PHASE = "phase"          # the item in flight enters a :class:`Phase`


class Phase(StrEnum):
    """What the engine is doing to the item in flight (a phase event's ``message``); a
    supervisor times each against its ``expected_s``."""

    COMPILE = "compile"
    VERIFY = "verify"
    CHECK = "check"
    TIME = "time"


class LogLevel(StrEnum):
    """The level of a ``log`` event."""

    INFO = "info"
    WARNING = "warning"
    ERROR = "error"
