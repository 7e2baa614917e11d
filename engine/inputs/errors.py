"""The error type of the inputs, below the modules that raise it."""
from __future__ import annotations

class MatrixInputError(ValueError):
    """A user-facing problem with an input matrix; str(e) is the whole message."""
