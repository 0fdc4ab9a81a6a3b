"""Lowering: schedule + tensor DAG -> loop-nest IR (``stmt.py``), its passes and printer."""
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
    "Allocate", "BufferParam", "For", "ForKind", "IfThenElse", "LetStmt", "LoweredFunc",
    "ScalarParam", "Seq", "Stmt", "Store", "format_func", "format_stmt", "make_buffer", "seq",
]
