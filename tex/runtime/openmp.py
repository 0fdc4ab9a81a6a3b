"""The OpenMP runtime (libgomp) that parallel loops call into.

``load_openmp()`` finds libgomp once per process (``ctypes.util.find_library``, then the
usual sonames), makes its symbols visible to JIT-compiled code with
``llvmlite.binding.load_library_permanently`` and checks that ``GOMP_parallel``,
``omp_get_thread_num`` and ``omp_get_num_threads`` exist. Without it, it warns once
(``RuntimeWarning``) and returns None; ``tex.build`` then compiles parallel loops as
serial loops.

Caveat (libgomp's, not ours): a process that forks after running a parallel loop may hang
in the child when the child runs a parallel loop too; use the "spawn" start method.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import threading
import warnings

import llvmlite.binding as llvm

__all__ = ["load_openmp", "OPENMP_SYMBOLS"]

OPENMP_SYMBOLS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads")
_CANDIDATES = ("libgomp.so.1", "libgomp.so", "libgomp.1.dylib", "libgomp.dylib")

_lock = threading.Lock()
_result: list[str | None] = []  # [path or None] once looked up


def _find() -> str | None:
    names = []
    found = ctypes.util.find_library("gomp")
    if found:
        names.append(found)
    names.extend(n for n in _CANDIDATES if n not in names)
    for name in names:
        try:
            lib = ctypes.CDLL(name)
        except OSError:
            continue
        if not all(hasattr(lib, sym) for sym in OPENMP_SYMBOLS):
            continue
        try:
            llvm.load_library_permanently(name)
        except RuntimeError:
            continue
        return name
    return None


def load_openmp() -> str | None:
    """The libgomp library name made available to the JIT, or None (warned once)."""
    with _lock:
        if not _result:
            path = _find()
            _result.append(path)
            if path is None:
                warnings.warn("tex: the OpenMP runtime (libgomp) was not found; parallel loops "
                              "of built functions will run serially", RuntimeWarning,
                              stacklevel=3)
        return _result[0]
