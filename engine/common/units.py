"""Small formatting helpers shared by the readers and the memory checks (no imports of
the engine's own, so that every module can use them)."""
from __future__ import annotations


def format_bytes(n: int) -> str:
    """A byte count in MiB below 1 GiB and in GiB above."""
    if n >= 1024**3:
        return f"{n / 1024**3:.2f} GiB"
    return f"{n / 1024**2:.1f} MiB"
