"""The OpenMP runtime (libgomp) that parallel loops call into.

``load_openmp()`` finds libgomp once per process (``ctypes.util.find_library``, then the
usual sonames), makes its symbols visible to JIT-compiled code with
``llvmlite.binding.load_library_permanently`` and checks that ``GOMP_parallel``,
``omp_get_thread_num`` and ``omp_get_num_threads`` exist. Without it, it warns once
(``RuntimeWarning``) and returns None; ``tex.build`` then compiles parallel loops as
serial loops.

Fork safety: libgomp keeps its worker threads in a pool that ``fork`` does not copy, so a
child forked after the parent ran a parallel loop would wait forever for them in its own
first parallel loop. ``note_parallel_run()`` records that this process started the pool; an
``os.register_at_fork`` hook marks such a child, where ``parallel_allowed()`` is then False:
built functions run a serial variant of their kernel there (same results) and new builds
compile parallel loops serially. This is per-process state by nature (it describes the
process's threads), hence the module-level flags.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os
import threading
import warnings

import llvmlite.binding as llvm

__all__ = ["load_openmp", "OPENMP_SYMBOLS", "note_parallel_run", "parallel_allowed"]

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


# this process has run a parallel loop (libgomp's pool exists); this process is a child forked
# after its parent (or an ancestor) did, and must not enter a parallel region
_pool_started = False
_forked_after_pool = False


def note_parallel_run() -> None:
    """Record that a parallel loop ran in this process (its thread pool now exists)."""
    global _pool_started
    _pool_started = True


def parallel_allowed() -> bool:
    """False in a process forked after a parallel loop ran: its kernels must run serially."""
    return not _forked_after_pool


def _after_fork_in_child() -> None:
    global _forked_after_pool
    if _pool_started:
        _forked_after_pool = True


if hasattr(os, "register_at_fork"):  # POSIX
    os.register_at_fork(after_in_child=_after_fork_in_child)
