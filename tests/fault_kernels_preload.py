"""Imported by an engine process (``preload``): registers the fault kernels there."""
from engine.kernels import registry
from tests.fault_kernels import variants

for _v in variants():
    if _v.name not in registry.REGISTRY:
        registry.register(_v)
