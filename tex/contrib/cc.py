"""TVM's ``tvm.contrib.cc``: shared libraries linked from object files with the system C
compiler, as a ported tutorial writes them (``f.save("x.o")``, then
``cc.create_shared("x.so", ["x.o"])``, then ``tex.runtime.load_module("x.so")``)."""
from __future__ import annotations

import os
from collections.abc import Sequence

from ..runtime.library import link_shared

__all__ = ["create_shared"]


def create_shared(output: str | os.PathLike[str], objects: str | Sequence[str],
                  options: Sequence[str] | None = None, cc: str | None = None) -> None:
    """Link ``objects`` (object file paths) into the shared library ``output``; ``options``
    are passed to the compiler, ``cc`` names it (default ``$CC``, else cc/gcc/clang).

    Raises
    ------
    RuntimeError
        No C compiler, or linking failed (its message included).
    """
    files = [objects] if isinstance(objects, (str, os.PathLike)) else list(objects)
    link_shared(output, [os.fspath(f) for f in files], ["-lm"], "create_shared",
                list(options or ()), [cc] if cc else None)
