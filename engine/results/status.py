"""How a record's run went (:class:`RecordStatus`), apart from the records so that
:mod:`engine.results.derived` can use it below them."""
from __future__ import annotations

from enum import StrEnum


class RecordStatus(StrEnum):
    """How a record's run went. A ``str``, so files keep the plain word."""

    OK = "ok"                   # ran (and, when verified, passed)
    FAILED = "failed"           # ran, wrong result
    ERROR = "error"             # could not run: a build, a launch, the device
    SKIPPED = "skipped"         # does not apply here (a constraint, a library missing)
    UNVERIFIED = "unverified"   # ran without verification


#: Statuses of a record that ran and is not known to be wrong.
RAN = (RecordStatus.OK, RecordStatus.UNVERIFIED)
