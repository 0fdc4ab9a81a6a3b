"""Timing for the tests that compare the cost of a small and a large program.

A cyclic garbage collection that lands inside a timed region costs time in proportion to
everything the test process holds (the whole suite's objects), not to the code under
test: in a full run one such pass turned a linear 4x into 10x. Timed regions therefore
start from a collected heap and run with the collector paused."""
from __future__ import annotations

import gc
import time
from collections.abc import Callable
from typing import TypeVar

T = TypeVar("T")


def timed(fn: Callable[..., T], *args: object) -> tuple[T, float]:
    """``fn(*args)`` and the seconds it took, with garbage collection kept out of the
    timing."""
    gc.collect()
    enabled = gc.isenabled()
    gc.disable()
    try:
        t0 = time.perf_counter()
        result = fn(*args)
        return result, time.perf_counter() - t0
    finally:
        if enabled:
            gc.enable()


def seconds(fn: Callable[..., object], *args: object) -> float:
    """The seconds ``fn(*args)`` took, with garbage collection kept out of the timing."""
    return timed(fn, *args)[1]
