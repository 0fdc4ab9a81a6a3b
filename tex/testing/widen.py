"""A float64 copy of a tensor DAG: what ``check_grad`` evaluates by default.

``float64_copy(tensors)`` maps every tensor the given ones depend on to its twin in a new
DAG where every float placeholder and every float computation is float64:

* float placeholders become float64 placeholders of the same name and shape; integer and
  bool placeholders are kept (the same tensors);
* float constants become float64; a float reduction accumulates in float64 (its reducer is
  re-typed slot by slot);
* casts the program asks for stay where they change values: a narrowing float cast
  (``astype("float16")`` of a float32 value) and every cast to an integer or bool; a
  widening float cast (exact in the original program) and an integer-to-float cast become
  float64;
* integer and bool computations stay what they are.

Names, shapes, tags and sharing are kept (each node is converted once, iteratively), so
error messages about the copy name the user's tensors.
"""
from __future__ import annotations

import ctypes
from collections.abc import Sequence

from ..dtype import DType, as_dtype
from ..ir import fold
from ..ir.expr import (
    Binary,
    Cast,
    CommReducer,
    Compare,
    Const,
    Expr,
    IterVar,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from ..ir.tensor import ComputeOp, ExternBuffer, ExternOp, PackedCall, PlaceholderOp, Tensor
from ..ir.visit import post_order, topo_sort_ops
from ..te import compute, placeholder

__all__ = ["float64_copy"]

FLOAT64 = as_dtype("float64")


def _wide(d: DType) -> DType:
    return FLOAT64 if d.is_float else d


def float64_copy(tensors: Sequence[Tensor]) -> dict[Tensor, Tensor]:
    """Every tensor ``tensors`` depend on (themselves included) -> its float64 twin."""
    twin: dict[Tensor, Tensor] = {}
    for op in topo_sort_ops(tensors):
        if isinstance(op, PlaceholderOp):
            t = op.output(0)
            twin[t] = placeholder(op.shape, FLOAT64, name=op.name) if op.dtype.is_float else t
        elif isinstance(op, ComputeOp):
            new = _Widen(twin).compute(op)
            twin.update(zip(op.outputs, new.outputs))
        elif isinstance(op, ExternOp):
            twin.update(zip(op.outputs, _widened_extern(op, twin)))
    return twin


def _widened_extern(op: ExternOp, twin: dict[Tensor, Tensor]) -> list[Tensor]:
    """The float64 twins of an extern call's outputs. A Python function is called on
    float64 buffers (NumPy code runs in the dtype it is given; finite differences through
    float32 would drown in its rounding); a ctypes function, whose C types are fixed, in
    its own dtypes: its inputs cast back, its outputs widened."""
    if isinstance(op.call.func, ctypes._CFuncPtr):  # type: ignore[attr-defined]
        moved = op.with_inputs([_cast_copy(twin[t], t.dtype) for t in op.inputs])
        return [_cast_copy(o, _wide(t.dtype)) for t, o in zip(op.outputs, moved.outputs)]
    bufs = {id(b): ExternBuffer(b.name, b.shape, _wide(b.dtype), b.role, b.index)
            for b in (*op.in_buffers, *op.out_buffers)}
    args = [bufs[id(a)] if isinstance(a, ExternBuffer) else a for a in op.call.args]
    wide = ExternOp(op.name, [twin[t] for t in op.inputs],
                    [bufs[id(b)] for b in op.in_buffers], [bufs[id(b)] for b in op.out_buffers],
                    PackedCall(op.call.func, args), op.tag, dict(op.attrs))
    return list(wide.outputs)


def _cast_copy(t: Tensor, dtype: DType) -> Tensor:
    """``t`` itself if of ``dtype``, else an element-wise cast of it."""
    if t.dtype is dtype:
        return t
    return compute(t.shape, lambda *i: fold.cast(dtype, t[i]), name=f"{t.name}_{dtype.name}")


class _Widen:
    """Converts the expressions of one compute (and its reducers) to the float64 DAG."""

    def __init__(self, twin: dict[Tensor, Tensor]) -> None:
        self.twin = twin
        self.memo: dict[Expr, Expr] = {}
        self.reducers: dict[int, CommReducer] = {}

    def compute(self, op: ComputeOp) -> ComputeOp:
        axis = [self._axis(iv) for iv in op.axis]
        for iv in op.reduce_axis:
            self._axis(iv)
        bodies = self.exprs(op.body)
        return ComputeOp(op.name, axis, bodies, tag=op.tag, attrs=dict(op.attrs))

    def _axis(self, iv: IterVar) -> IterVar:
        """A fresh IterVar for ``iv`` (an IterVar belongs to one op), remembered in memo."""
        new = IterVar(Var(iv.var.name, iv.var.dtype, kind=iv.var.kind),
                      Range(iv.dom.min, iv.dom.extent))
        self.memo[iv.var] = new.var
        self.memo[iv] = new  # type: ignore[index]
        return new

    def exprs(self, roots: Sequence[Expr]) -> list[Expr]:
        memo = self.memo
        for node in post_order(*roots):
            if node not in memo:
                memo[node] = self._node(node)
        return [memo[r] for r in roots]

    def _node(self, node: Expr) -> Expr:
        m = self.memo
        if isinstance(node, Const):
            return Const(node.value, FLOAT64) if node.dtype.is_float else node
        if isinstance(node, Var):
            return node  # a free scalar; axis variables are in memo already
        if isinstance(node, TensorRead):
            return TensorRead(self.twin[node.tensor], [m[i] for i in node.indices])
        if isinstance(node, Unary):
            return fold.unary(node.op, m[node.a])
        if isinstance(node, Compare):
            return fold.compare(node.op, m[node.a], m[node.b])
        if isinstance(node, Binary):
            return fold.binary(node.op, m[node.a], m[node.b])
        if isinstance(node, Select):
            return fold.select(m[node.cond], m[node.a], m[node.b])
        if isinstance(node, Cast):
            return self._cast(node)
        if isinstance(node, Reduce):
            return self._reduce(node)
        raise TypeError(f"check_grad: cannot copy a {type(node).__name__} node to float64")

    def _cast(self, node: Cast) -> Expr:
        a, src, dst = self.memo[node.a], node.a.dtype, node.dtype
        if dst.is_float and (not src.is_float or dst.bits >= src.bits):
            return fold.cast(FLOAT64, a)  # exact in the program (or from an integer)
        return fold.cast(dst, a)  # a narrowing float cast, or to an integer or bool: kept

    def _reduce(self, node: Reduce) -> Expr:
        m = self.memo
        comb = self._reducer(node.combiner)
        sources = [fold.cast(d, m[s]) for s, d in zip(node.source, comb.dtypes)]
        init = [fold.cast(d, m[e]) for e, d in zip(node.init, comb.dtypes)]
        axis = [m[iv] for iv in node.axis]  # type: ignore[index]
        return Reduce(comb, sources, axis, m[node.condition], init,  # type: ignore[arg-type]
                      node.value_index)

    def _reducer(self, c: CommReducer) -> CommReducer:
        """``c`` with its float slots in float64 (one copy per reducer and compute)."""
        got = self.reducers.get(id(c))
        if got is not None:
            return got
        lhs = [Var(v.name, _wide(v.dtype), kind=v.kind) for v in c.lhs]
        rhs = [Var(v.name, _wide(v.dtype), kind=v.kind) for v in c.rhs]
        inner = _Widen(self.twin)
        inner.memo.update(zip(c.lhs, lhs))
        inner.memo.update(zip(c.rhs, rhs))
        result = [fold.cast(v.dtype, e) for v, e in zip(lhs, inner.exprs(c.result))]
        identity = [fold.cast(v.dtype, e) for v, e in zip(lhs, inner.exprs(c.identity))]
        new = CommReducer(c.name, lhs, rhs, result, identity)
        self.reducers[id(c)] = new
        return new
