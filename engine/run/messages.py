"""The messages between a run and an engine in another process (a child process,
:mod:`engine.run.process`, or a Ray actor, :mod:`engine.run.cluster`).

Commands go to the engine; replies come back. Each is a small frozen dataclass defined
at module level, so that it pickles through a pipe or Ray's object store, and both ends
match on the type instead of a tuple's first word.
"""
from __future__ import annotations

from dataclasses import dataclass

from engine.measure.backends.base import DeviceInfo
from engine.results.records import ResultRecord
from engine.run.runner import Event, Plan


# --- commands: the run to its engine -------------------------------------------------------

@dataclass(frozen=True)
class OpenDevice:
    """Open ``backend`` device ``device`` (answered by :class:`Opened` or :class:`Failed`)."""

    backend: str
    device: int


@dataclass(frozen=True)
class RunTask:
    """Run one plain plan: :class:`EventMessage` per event, then :class:`Done`,
    :class:`Lost` or :class:`Failed`."""

    plan: Plan


@dataclass(frozen=True)
class Cancel:
    """Cancel the plan running now (what finished stays)."""


@dataclass(frozen=True)
class SetThreads:
    """The CPU threads the engine may keep busy from now on (engine.common.cpus)."""

    count: int


@dataclass(frozen=True)
class Shutdown:
    """Close the backend on the engine's thread and end."""


Command = OpenDevice | RunTask | Cancel | SetThreads | Shutdown


# --- replies: the engine to its run ---------------------------------------------------------

@dataclass(frozen=True)
class Opened:
    """The device is open: what it is, the backend's versions, the engine's host."""

    info: DeviceInfo
    versions: str
    host: str


@dataclass(frozen=True)
class EventMessage:
    """One event of the running sweep."""

    event: Event


@dataclass(frozen=True)
class Done:
    """The plan ended (finished or cancelled): its records."""

    records: list[ResultRecord]


@dataclass(frozen=True)
class Lost:
    """The device context was lost under a kernel (the engine ends itself): ``record``
    is the item it was running, if known."""

    reason: str
    record: ResultRecord | None = None


@dataclass(frozen=True)
class Failed:
    """The engine could not do what it was asked (open a device, preload a module, an
    internal error): the reason, as text."""

    text: str


Reply = Opened | EventMessage | Done | Lost | Failed
