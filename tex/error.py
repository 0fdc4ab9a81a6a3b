"""TVM's error classes, as tex raises them: ``TVMError`` and ``ScheduleError``.

TVM raises ``TVMError`` (a ``RuntimeError``) for a bad schedule, and its tests say
``pytest.raises(RuntimeError)``; tex names what is wrong with a ``ValueError``. A schedule
primitive's error is both: ``ScheduleError(ValueError, TVMError)``, so ``except
ValueError``, ``except RuntimeError`` and ``except tex.error.TVMError`` all catch it.
"""
from __future__ import annotations

__all__ = ["ScheduleError", "TVMError"]


class TVMError(RuntimeError):
    """TVM's base error class (``tvm.error.TVMError``)."""


class ScheduleError(ValueError, TVMError):
    """A schedule primitive refused its arguments (an axis of another stage, a cycle, ...)."""
