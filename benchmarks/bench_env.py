"""Set-up and timing shared by the benchmark scripts; each imports it before anything else.

- The threading environment, before NumPy loads OpenBLAS: its workers spin after each call
  and steal the core tex runs on next (WORKLOADS.md). libgomp's waiting is tex's default
  (``tex.runtime.openmp``): the scripts import tex, which opens libgomp, before torch, which
  would otherwise load it with libgomp's own long spin (shared by tex and torch); a
  ``GOMP_SPINCOUNT`` or ``OMP_WAIT_POLICY`` in the environment is respected.
- ``sys.path``: the working tree's ``tex`` (``ROOT``) and the modules beside the scripts
  (``HERE``: workloads.py, frameworks.py, ...), whatever the current directory.
- tex's disk compile cache (``TEX_CACHE_DIR``, read when tex is imported): a fresh
  temporary directory per process (``CACHE_DIR``, removed at exit), so a compile time
  measured as cold is cold even after an earlier run filled the user's cache, and a
  benchmark never fills the user's cache. ``models.py`` measures the warm (disk) builds
  in it.
"""
from __future__ import annotations

import atexit
import gc
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")

# a benchmark's child process (models.py's warm compile) shares its parent's directory
CHILD_CACHE_ENV = "TEX_BENCH_CACHE_DIR"
if os.environ.get(CHILD_CACHE_ENV):
    CACHE_DIR = os.environ[CHILD_CACHE_ENV]
else:
    CACHE_DIR = tempfile.mkdtemp(prefix="tex-bench-cache-")
    atexit.register(shutil.rmtree, CACHE_DIR, ignore_errors=True)
os.environ["TEX_CACHE_DIR"] = CACHE_DIR
os.environ["TEX_CACHE_RESULTS"] = "1"  # saved results are part of what a warm build uses

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for _p in (str(ROOT), str(HERE)):
    if _p not in sys.path:
        sys.path.insert(0, _p)


def mean_call_time(fn: Callable[[], Any], min_time: float,
                   after: Callable[[], Any] | None = None) -> float:
    """Seconds per call of ``fn`` (followed by ``after``, e.g. a device synchronization),
    run at least once and for at least ``min_time`` seconds.

    As ``timeit`` does, Python's cyclic garbage collector is run first and paused while
    timing: a full collection pending from the builds before (every IR node, sympy's
    caches) otherwise lands in whichever call happens to trigger it (3-4 us per call of a
    tiny kernel, amortized over a round)."""
    enabled = gc.isenabled()
    gc.collect()
    gc.disable()
    try:
        n, start = 0, time.perf_counter()
        while True:
            fn()
            if after is not None:
                after()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                return elapsed / n
    finally:
        if enabled:
            gc.enable()
