"""Lowering: schedule + tensor DAG -> loop-nest IR (``stmt.py``), its passes and printer.

``tex.lower(s, args)`` calls ``lower.lower``: this package is callable (its module class
has a ``__call__``), so the TVM spelling works and ``tex.lower.stmt`` stays importable.
"""
import sys
import types

from .lower import StagedFunc, lower, stage
from .passes import PASSES
from .printer import format_func, format_stmt
from .stmt import (
    Allocate,
    BufferParam,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    ScalarParam,
    Seq,
    Stmt,
    Store,
    make_buffer,
    seq,
)

__all__ = [
    "PASSES", "lower", "stage", "StagedFunc", "Allocate", "BufferParam", "For", "ForKind",
    "IfThenElse", "LetStmt", "LoweredFunc",
    "ScalarParam", "Seq", "Stmt", "Store", "format_func", "format_stmt", "make_buffer", "seq",
]


class _CallableModule(types.ModuleType):
    def __call__(self, *args: object, **kwargs: object) -> LoweredFunc:
        return lower(*args, **kwargs)  # type: ignore[arg-type]


sys.modules[__name__].__class__ = _CallableModule
