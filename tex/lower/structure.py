"""``structure``: loop IR as canonical text, names left out, for keys of what compiles alike.

Every statement (with its arity, loop kind and buffer scope) and every expression node
(type, dtype, operator or constant) is listed in order; variables and buffers are numbered
by first use, each buffer with its dtype and shape, so two statements print alike exactly
when they differ only in names and in which (same-typed, same-shaped) buffers and
variables they use. The numbering starts with ``args``: an outlined nest's captured
buffers and variables, in argument order, so two nests with equal structures can be one
function called with different arguments. The compile cache's key hashes it with the
printed function (``tex.runtime.jit.cache_key``); the code generator uses it to emit
identical parallel loops and outlined nests once (``tex.codegen.parallel``).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..arith import Interval
from ..ir.expr import Const, Expr, TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order, rewrite
from .stmt import (
    Allocate,
    ExternCall,
    For,
    IfThenElse,
    LetStmt,
    Seq,
    Stmt,
    Store,
    map_stmts,
    walk_stmts,
)

__all__ = ["structure", "renamed"]


def structure(root: Stmt, args: Sequence[Tensor | Var] = (),
              domains: Mapping[Var, Interval] | None = None,
              named: list[Tensor | Var] | None = None) -> str:
    """The canonical text of ``root`` (see the module docstring), ``args`` numbered first;
    with ``domains``, each variable's range too (None where it has none). ``named``
    receives the buffers and variables in the order they are numbered: two statements of
    equal text correspond by position in it (``renamed``)."""
    ids: dict[int, int] = {}
    out: list[str] = []

    def ref(obj: object) -> str:
        k = ids.get(id(obj))
        if k is None:
            k = ids[id(obj)] = len(ids)
            if named is not None and isinstance(obj, (Tensor, Var)):
                named.append(obj)
            if isinstance(obj, Tensor):
                out.append(f"buffer %{k} {obj.dtype.name}{list(obj.shape)}")
            elif isinstance(obj, Var):
                rng = "" if domains is None else f" {domains.get(obj)}"
                out.append(f"var %{k} {obj.dtype.name}{rng}")
        return f"%{k}"

    def expr(e: Expr) -> None:
        for node in post_order(e):
            if id(node) in ids:
                continue
            kids = ",".join(ref(k) for k in node.children())
            if isinstance(node, Var):
                ref(node)
                continue
            extra = ""
            if isinstance(node, Const):
                extra = repr(node.value)
            elif hasattr(node, "tensor"):
                extra = ref(node.tensor)  # type: ignore[attr-defined]
            elif hasattr(node, "op"):
                extra = node.op.value  # type: ignore[attr-defined]
            line = f"{type(node).__name__}:{node.dtype.name}:{extra}({kids})"
            out.append(f"{ref(node)}={line}")

    for a in args:
        ref(a)
    for s in walk_stmts(root):
        match s:
            case For():
                expr(s.var)
                expr(s.min)
                expr(s.extent)
                out.append(f"For {ref(s.var)} {s.kind.name}{s.thread_tag}")
            case Store():
                expr(s.index)
                expr(s.value)
                out.append(f"Store {ref(s.buffer)}")
            case Allocate():
                out.append(f"Allocate {ref(s.buffer)} {s.scope}")
            case IfThenElse():
                expr(s.cond)
                out.append("If else" if s.else_case is not None else "If")
            case LetStmt():
                expr(s.var)
                expr(s.value)
                out.append(f"Let {ref(s.var)}")
            case Seq():
                out.append(f"Seq {len(s.body)}")
            case ExternCall():
                for e in s.scalars:
                    expr(e)
                bufs = " ".join(f"{ref(b)}{'w' if w else 'r'}"
                                for b, w in zip(s.buffers, s.written))
                vals = " ".join(ref(e) for e in s.scalars)
                out.append(f"Extern {s.index} ({bufs}) ({vals})")
            case _:
                out.append(type(s).__name__)
    return "\n".join(out)


def renamed(root: Stmt, mapping: Mapping[Tensor | Var, Tensor | Var]) -> Stmt | None:
    """``root`` with the buffers and variables that are keys of ``mapping`` replaced by
    their values (in reads, stores, allocations, loops and lets); None where ``root``
    holds an expression node other than a read that refers to a buffer (it is not
    renamed here). Iterative: a nest of any depth."""
    memo: dict[Expr, Expr] = {}

    def fn(node: Expr) -> Expr | None:
        if isinstance(node, Var):
            return mapping.get(node)  # type: ignore[return-value]
        if isinstance(node, TensorRead):
            new = mapping.get(node.tensor)
            return None if new is None else TensorRead(new, node.indices)  # type: ignore
        if hasattr(node, "tensor"):
            raise _NotRenamed
        return None

    def ex(e: Expr) -> Expr:
        return rewrite(e, fn, memo)

    def get(obj: Any) -> Any:
        return mapping.get(obj, obj)

    def one(s: Stmt) -> Stmt:  # (its children renamed already)
        match s:
            case For():
                return For(get(s.var), ex(s.min), ex(s.extent), s.kind, s.body, s.thread_tag)
            case Store():
                return Store(get(s.buffer), ex(s.index), ex(s.value))
            case Allocate():
                return Allocate(get(s.buffer), s.scope, s.body)
            case IfThenElse():
                return IfThenElse(ex(s.cond), s.then_case, s.else_case)
            case LetStmt():
                return LetStmt(get(s.var), ex(s.value), s.body)
            case ExternCall():
                return ExternCall(s.op, s.index, tuple(get(b) for b in s.buffers), s.written,
                                  tuple(ex(e) for e in s.scalars))
        return s

    try:
        return map_stmts(root, one)
    except _NotRenamed:
        return None


class _NotRenamed(Exception):
    """An expression ``renamed`` does not rename."""
