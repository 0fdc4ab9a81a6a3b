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

from ..ir.expr import Expr
from ..ir.printer import binding_names, format_exprs
from ..ir.tensor import ExternBuffer
from .stmt import (
    Allocate,
    Barrier,
    BufferParam,
    ExternCall,
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


class _Printer:
    """Statement lines, iteratively (a chain of thousands of nested allocations does not
    recurse). Expressions share their big common sub-expressions as ``let %k = ...`` lines
    (``tex.ir.printer.format_exprs``), numbered through the whole function."""

    def __init__(self) -> None:
        self.out: list[str] = []
        self.names = binding_names()

    def exprs(self, pad: str, *roots: Expr) -> list[str]:
        bindings, texts = format_exprs(list(roots), self.names)
        self.out.extend(f"{pad}let {name} = {value}" for name, value in bindings)
        return texts

    def extern(self, pad: str, s: ExternCall) -> str:
        """``extern name(A, C, 1.5f)``: the call with its buffers' and scalars' texts."""
        scalars = iter(self.exprs(pad, *s.scalars))
        buffers = iter(s.buffers)
        args = []
        for a in s.op.call.args:
            if isinstance(a, ExternBuffer):
                args.append(next(buffers).name)
            elif isinstance(a, str):
                args.append(repr(a))
            else:
                args.append(next(scalars))
        return f"extern {s.op.call.func_name}({', '.join(args)})"

    def lines(self, root: Stmt, depth: int) -> None:
        # items: (statement, depth) to print, or a finished line (a closing brace)
        stack: list[tuple[Stmt, int] | str] = [(root, depth)]
        out = self.out
        while stack:
            item = stack.pop()
            if isinstance(item, str):
                out.append(item)
                continue
            s, depth = item
            pad = _INDENT * depth
            match s:
                case For():
                    head = s.kind.value
                    if s.thread_tag:
                        head = f"{head} [{s.thread_tag}]"
                    lo, extent = self.exprs(pad, s.min, s.extent)
                    out.append(f"{pad}{head} ({s.var.name}, {lo}, {extent}) {{")
                    stack.append(pad + "}")
                    stack.append((s.body, depth + 1))
                case Store():
                    index, value = self.exprs(pad, s.index, s.value)
                    out.append(f"{pad}{s.buffer.name}[{index}] = {value}")
                case Allocate():
                    scope = "" if s.scope == "global" else f" {s.scope}"
                    out.append(f"{pad}allocate{scope} {s.buffer.name}: "
                               f"{s.buffer.dtype.name}[{s.buffer.shape[0]}]")
                    stack.append((s.body, depth))
                case IfThenElse():
                    (cond,) = self.exprs(pad, s.cond)
                    out.append(f"{pad}if ({cond}) {{")
                    stack.append(pad + "}")
                    if s.else_case is not None:
                        stack.append((s.else_case, depth + 1))
                        stack.append(pad + "} else {")
                    stack.append((s.then_case, depth + 1))
                case LetStmt():
                    (value,) = self.exprs(pad, s.value)
                    out.append(f"{pad}let {s.var.name} = {value}")
                    stack.append((s.body, depth))
                case Barrier():
                    out.append(f"{pad}__syncthreads()")
                case ExternCall():
                    out.append(f"{pad}{self.extern(pad, s)}")
                case Seq():
                    stack.extend((child, depth) for child in reversed(s.body))
                case _:
                    out.append(f"{pad}<{type(s).__name__}>")


def format_stmt(s: Stmt, depth: int = 0) -> str:
    """The loop nest as indented pseudo-code."""
    p = _Printer()
    p.lines(s, depth)
    return "\n".join(p.out)


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
