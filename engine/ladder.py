"""The CUDA performance ladder: from naive toward cuBLAS, one technique per step.

Registered into :data:`engine.registry.REGISTRY` on import.
"""
from __future__ import annotations
