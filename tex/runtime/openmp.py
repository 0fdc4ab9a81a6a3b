"""The OpenMP runtime (libgomp) that parallel loops call into, and how its threads wait.

``load_openmp()`` finds libgomp once per process (``ctypes.util.find_library``, then the
usual sonames), makes its symbols visible to JIT-compiled code with
``llvmlite.binding.load_library_permanently`` and checks that ``OPENMP_SYMBOLS`` exist.
Without it, it warns once (``RuntimeWarning``) and returns None; ``tex.build`` then compiles
parallel loops as serial loops.

Waiting: a thread that reaches the end of a parallel region before the others, and an idle
worker between regions, spins ``GOMP_SPINCOUNT`` times before it sleeps. libgomp reads that
once, when the library is loaded, and its default (300 000 spins, about 8 ms on a 2.4 GHz
Zen 2) keeps a core busy long after every region: with another process on one core, the
spinning threads take the CPU from the thread that has work, and each fork/join costs a
scheduler time slice (measured: 20 ms instead of 1 us; ``benchmarks/contention.py``). So
tex opens libgomp when this module is imported (before another library, such as PyTorch,
can load it with libgomp's default) with ``GOMP_SPINCOUNT=DEFAULT_SPINCOUNT`` in the
environment for that moment only, unless the environment sets ``GOMP_SPINCOUNT`` or
``OMP_WAIT_POLICY`` itself: an explicit setting is left to libgomp. There is one libgomp per
process (PyTorch's own copy and the system's share the soname): when another library loaded
it first, its waiting is whatever the environment said then. ``wait_policy()`` tells which
of these happened.

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

from ..debug import env, environment_set

__all__ = ["load_openmp", "OPENMP_SYMBOLS", "DEFAULT_SPINCOUNT", "wait_policy",
           "note_parallel_run", "parallel_allowed"]

OPENMP_SYMBOLS = ("GOMP_parallel", "omp_get_thread_num", "omp_get_num_threads",
                  "omp_get_max_threads")
_CANDIDATES = ("libgomp.so.1", "libgomp.so", "libgomp.1.dylib", "libgomp.dylib")
# spins of a waiting thread before it sleeps, when the environment does not say (about
# 26 us on a 2.4 GHz Zen 2: longer than the gap between the regions of one call, shorter
# than a futex wake-up costs a busy machine; see the module docstring)
DEFAULT_SPINCOUNT = 1000  # quoted in tex/debug.py and README.md

_lock = threading.Lock()
_result: list[str | None] = []  # [path or None] once looked up


def _is_loaded(name: str) -> bool:
    """Whether a library answering to ``name`` is already in this process."""
    if not hasattr(os, "RTLD_NOLOAD"):  # pragma: no cover - not POSIX
        return False
    try:
        ctypes.CDLL(name, mode=os.RTLD_NOLOAD | os.RTLD_LAZY)
    except OSError:
        return False
    return True


def _open(name: str) -> tuple[ctypes.CDLL, str]:
    """``name`` opened (OSError if it cannot be), and how its waiting was set: "tex",
    "environment" or "preloaded" (see ``wait_policy``)."""
    if _is_loaded(name):
        return ctypes.CDLL(name), "preloaded"
    if (env("GOMP_SPINCOUNT") or "").strip() or (env("OMP_WAIT_POLICY") or "").strip():
        return ctypes.CDLL(name), "environment"
    # libgomp reads its settings in its initializer, while being loaded: set ours for that
    # moment only, so that child processes and later programs see the user's environment
    with environment_set("GOMP_SPINCOUNT", str(DEFAULT_SPINCOUNT)):
        return ctypes.CDLL(name), "tex"


def _candidates() -> list[str]:
    names = []
    found = ctypes.util.find_library("gomp")
    if found:
        names.append(found)
    names.extend(n for n in _CANDIDATES if n not in names)
    return names


def _open_first() -> tuple[str, str]:
    """The first libgomp candidate that opens with ``OPENMP_SYMBOLS``, and how its waiting
    was set; ("", "unavailable") when none does."""
    for name in _candidates():
        try:
            lib, how = _open(name)
        except OSError:
            continue
        if all(hasattr(lib, sym) for sym in OPENMP_SYMBOLS):
            return name, how
    return "", "unavailable"


# opened at import, before a library imported later (PyTorch) loads libgomp with its own
# default; per-process by nature: the process has one OpenMP runtime
_opened = _open_first()


def wait_policy() -> str:
    """How the waiting of libgomp's threads was set in this process: ``"tex"``
    (``GOMP_SPINCOUNT=DEFAULT_SPINCOUNT``, tex's default), ``"environment"`` (the user's
    ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY``), ``"preloaded"`` (another library loaded
    libgomp before tex was imported: the environment of that moment applies) or
    ``"unavailable"`` (no libgomp)."""
    return _opened[1]


def _find() -> str | None:
    name = _opened[0]
    if not name:
        return None
    try:
        llvm.load_library_permanently(name)
    except RuntimeError:
        return None
    return name


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
