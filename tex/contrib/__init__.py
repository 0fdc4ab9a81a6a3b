"""Bridges between tex and other frameworks, and TVM's contrib tools.

Each bridge is a module of its own that imports its framework when it is imported, never
before: ``import tex`` and ``import tex.contrib`` import no third-party framework.

- ``tex.contrib.torch``: ``function(outputs, inputs)`` turns tex tensors into a callable on
  PyTorch tensors, differentiable by ``torch.autograd`` (needs ``pip install torch``).
- ``tex.contrib.cblas``: TVM's ``matmul``/``batch_matmul`` extern wrappers over NumPy's BLAS.
- ``tex.contrib.tedd``: TVM's tensor-expression debug display, a schedule's dataflow graph,
  schedule tree and iteration-variable relations as Graphviz DOT text (no dependency).
- ``tex.contrib.cc`` and ``tex.contrib.utils``: TVM's ``create_shared`` (a shared library
  from object files, with the system C compiler) and ``tempdir``.
"""

from __future__ import annotations

import importlib
from types import ModuleType

from . import cblas, cc, tedd, utils

__all__ = ["cblas", "cc", "tedd", "utils"]
_BRIDGES = ("torch",)


def __getattr__(name: str) -> ModuleType:
    """``tex.contrib.torch`` after a bare ``import tex``: the bridge is imported (and with it
    its framework) at first use, not with the package."""
    if name in _BRIDGES:
        return importlib.import_module(f"{__name__}.{name}")
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
