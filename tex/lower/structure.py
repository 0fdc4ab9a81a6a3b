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

from ..arith import Interval
from ..ir.expr import Const, Expr, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order
from .stmt import Allocate, For, IfThenElse, LetStmt, Seq, Stmt, Store, walk_stmts

__all__ = ["structure"]


def structure(root: Stmt, args: Sequence[Tensor | Var] = (),
              domains: Mapping[Var, Interval] | None = None) -> str:
    """The canonical text of ``root`` (see the module docstring), ``args`` numbered first;
    with ``domains``, each variable's range too (None where it has none)."""
    ids: dict[int, int] = {}
    out: list[str] = []

    def ref(obj: object) -> str:
        k = ids.get(id(obj))
        if k is None:
            k = ids[id(obj)] = len(ids)
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
            case _:
                out.append(type(s).__name__)
    return "\n".join(out)
