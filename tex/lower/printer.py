"""Readable printing of loop nests.

    func dense(X: float32[4, 8], W: float32[3, 8], out T: float32[4, 3]) {
      parallel for (i, 0, 4) {
        for (j, 0, 3) {
          T[i*3 + j] = 0.0
          for (k, 0, 8) {
            T[i*3 + j] = T[i*3 + j] + X[i*8 + k] * W[j*8 + k]
          }
        }
      }
    }
"""
from __future__ import annotations

from ..ir.printer import format_expr
from .stmt import (
    Allocate,
    Barrier,
    BufferParam,
    For,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    ScalarParam,
    Seq,
    Stmt,
    Store,
)

__all__ = ["format_stmt", "format_func"]

_INDENT = "  "


def _lines(s: Stmt, depth: int, out: list[str]) -> None:
    pad = _INDENT * depth
    match s:
        case For():
            head = s.kind.value
            if s.thread_tag:
                head = f"{head} [{s.thread_tag}]"
            out.append(f"{pad}{head} ({s.var.name}, {format_expr(s.min)}, "
                       f"{format_expr(s.extent)}) {{")
            _lines(s.body, depth + 1, out)
            out.append(pad + "}")
        case Store():
            out.append(f"{pad}{s.buffer.name}[{format_expr(s.index)}] = {format_expr(s.value)}")
        case Allocate():
            scope = "" if s.scope == "global" else f" {s.scope}"
            out.append(f"{pad}allocate{scope} {s.buffer.name}: {s.buffer.dtype.name}"
                       f"[{s.buffer.shape[0]}]")
            _lines(s.body, depth, out)
        case IfThenElse():
            out.append(f"{pad}if ({format_expr(s.cond)}) {{")
            _lines(s.then_case, depth + 1, out)
            if s.else_case is not None:
                out.append(pad + "} else {")
                _lines(s.else_case, depth + 1, out)
            out.append(pad + "}")
        case LetStmt():
            out.append(f"{pad}let {s.var.name} = {format_expr(s.value)}")
            _lines(s.body, depth, out)
        case Barrier():
            out.append(f"{pad}__syncthreads()")
        case Seq():
            for child in s.body:
                _lines(child, depth, out)
        case _:
            out.append(f"{pad}<{type(s).__name__}>")


def format_stmt(s: Stmt, depth: int = 0) -> str:
    """The loop nest as indented pseudo-code."""
    out: list[str] = []
    _lines(s, depth, out)
    return "\n".join(out)


def _format_param(p: BufferParam | ScalarParam) -> str:
    if isinstance(p, ScalarParam):
        return f"{p.var.name}: {p.var.dtype.name}"
    shape = ", ".join(str(n) for n in p.tensor.shape)
    prefix = "out " if p.is_output else ""
    return f"{prefix}{p.buffer.name}: {p.tensor.dtype.name}[{shape}]"


def format_func(f: LoweredFunc) -> str:
    """A whole lowered function: signature and body."""
    params = ", ".join(_format_param(p) for p in f.params)
    body = format_stmt(f.body, 1)
    return f"func {f.name}({params}) {{\n{body}\n}}"
