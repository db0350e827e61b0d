"""The engine's kept memory (docs/python.md, "Memory")."""
from . import _core


def release_memory():
    """Returns the tensor storage the engine keeps for reuse to the allocator.

    Freed tensors' storage is kept, up to 256 MiB in the package, to be reused
    by the next tensor of the same size (a training step's sizes repeat). After
    a large cache or analysis, `del` the results and call this to give back
    what is kept; the next call allocates afresh, with the same results."""
    _core.release_memory()
