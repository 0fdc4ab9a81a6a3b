"""Symbolic shapes bound to sizes: ``specialize`` (a concrete copy of a DAG) and the
binding of shape variables from the arrays a program is given.

A DAG whose extents use ``tex.var``/``tex.size_var`` variables (``A = placeholder((n,
128))``) describes a program for every ``n``. ``specialize(tensors, {n: 64})`` is that
program at one size: every operation rebuilt with the variables replaced by their values,
in extents and in bodies alike. The reference interpreter and ``check_grad`` run symbolic
DAGs this way, binding the variables from the feed's arrays with ``bind_shape_vars``, the
same rule a built function follows at its call (TVM's: a dimension that is a variable
binds it; any other dimension is checked once its variables are known).
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from ..arith.extent import Extent, bind_extent, extent_value, extent_vars
from ..ir.expr import Const, Expr, IterVar, Range, Reduce, TensorRead, Var
from ..ir.tensor import (
    ComputeOp,
    ExternBuffer,
    ExternOp,
    Operation,
    PackedCall,
    PlaceholderOp,
    ScanOp,
    Shape,
    Tensor,
)
from ..ir.visit import post_order, rewrite, topo_sort_ops

__all__ = ["free_vars", "shape_vars", "specialize", "specialize_dag", "bind_shape_vars",
           "check_binding"]

_FREE = ("var", "size")
_INT32_MAX = 2**31 - 1


def _op_exprs(op: Operation) -> list[Any]:
    """The extents and expressions of one operation (not those of its inputs)."""
    out = _extents(op)
    if isinstance(op, ComputeOp):
        out += op.body
    elif isinstance(op, ExternOp):
        out += [a for a in op.call.args if isinstance(a, Expr)]
    elif isinstance(op, ScanOp):
        out += [e for b in op.body_ops if isinstance(b, ComputeOp) for e in b.body]
    return out


def free_vars(tensors: Sequence[Tensor]) -> list[Var]:
    """The ``tex.var``/``tex.size_var`` variables a DAG uses, in shapes, extents and
    bodies, in the order operations and expressions meet them."""
    seen: dict[Var, None] = {}
    for op in topo_sort_ops(list(tensors)):
        for e in _op_exprs(op):
            if isinstance(e, Expr):
                seen.update((n, None) for n in post_order(e)
                            if isinstance(n, Var) and n.kind in _FREE)
    return list(seen)


def shape_vars(tensors: Sequence[Tensor]) -> list[Var]:
    """The variables the DAG's extents use (symbolic shapes), in order of first use."""
    seen: dict[Var, None] = {}
    for op in topo_sort_ops(list(tensors)):
        seen.update(dict.fromkeys(extent_vars(*_extents(op))))
    return list(seen)


def _extents(op: Operation) -> list[Any]:
    """The extents (and range minimums) of one operation, not its bodies."""
    if isinstance(op, PlaceholderOp):
        return list(op.shape)
    if isinstance(op, ComputeOp):
        return [e for iv in (*op.axis, *op.reduce_axis) for e in (iv.dom.min, iv.dom.extent)]
    if isinstance(op, ExternOp):
        return [e for b in (*op.in_buffers, *op.out_buffers) for e in b.shape]
    if isinstance(op, ScanOp):
        out = [op.scan_axis.dom.min, op.scan_axis.dom.extent]
        out += [e for s in op.shapes for e in s]
        for b in op.body_ops:
            out += _extents(b)
        return out
    return []


def _value(var: Var, value: Any, who: str) -> int:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{who}: the value of '{var.name}' must be an int, got "
                        f"{type(value).__name__} {value!r}")
    v = int(value)
    if var.kind == "size" and v < 0:
        raise ValueError(f"{who}: '{var.name}' is a size_var and cannot be {v}")
    lo, hi = -(2 ** (var.dtype.bits - 1)), 2 ** (var.dtype.bits - 1) - 1
    if not lo <= v <= hi:
        raise ValueError(f"{who}: {var.name} = {v} does not fit its dtype {var.dtype}")
    return v


def check_binding(bind: Mapping[Any, Any], who: str) -> dict[Var, int]:
    """``bind`` with Var keys and int values, checked (a size_var is not negative)."""
    out: dict[Var, int] = {}
    for var, value in bind.items():
        if not isinstance(var, Var) or var.kind not in _FREE:
            raise TypeError(f"{who}: a binding's key must be a tex.var or tex.size_var, got "
                            f"{type(var).__name__} {var!r}")
        out[var] = _value(var, value, who)
    return out


class _Specializer:
    """Rebuilds operations with bound variables replaced by constants."""

    def __init__(self, bind: Mapping[Var, int], who: str) -> None:
        self.who = who
        self.consts: dict[Expr, Expr] = {v: Const(n, v.dtype) for v, n in bind.items()}
        self.bind = dict(bind)
        self.table: dict[Tensor, Tensor] = {}
        self.iter_vars: dict[IterVar, IterVar] = {}

    # -- extents and expressions -------------------------------------------------------
    def extent(self, e: Extent, where: str, least: int = 1) -> Extent:
        got = bind_extent(e, self.bind)
        if isinstance(got, int) and not isinstance(e, int):
            if got < least:
                raise ValueError(f"{self.who}: {where} is {e} = {got} with "
                                 f"{self._show_bind(e)}; extents must be positive")
            if got > _INT32_MAX:
                raise ValueError(f"{self.who}: {where} is {e} = {got} with "
                                 f"{self._show_bind(e)}; extents must fit in int32")
        return got

    def _show_bind(self, e: Expr) -> str:
        return ", ".join(f"{v.name} = {self.bind[v]}" for v in extent_vars(e) if v in self.bind)

    def shape(self, shape: Sequence[Extent], what: str) -> Shape:
        return Shape(self.extent(d, f"dimension {k} of {what}") for k, d in enumerate(shape))

    def iter_var(self, iv: IterVar, what: str, least: int = 1) -> IterVar:
        new = self.iter_vars.get(iv)
        if new is None:
            lo = bind_extent(iv.dom.min, self.bind)
            extent = self.extent(iv.dom.extent, f"the extent of {what} '{iv.var.name}'",
                                 least)
            var = Var(iv.var.name, iv.var.dtype, iv.var.kind)
            new = self.iter_vars[iv] = IterVar(var, Range(lo, extent))
            self.consts[iv.var] = var
        return new

    def expr(self, e: Expr, memo: dict[Expr, Expr]) -> Expr:
        table, consts = self.table, self.consts

        def fn(n: Expr) -> Expr | None:
            if isinstance(n, TensorRead):
                t = table.get(n.tensor)
                return TensorRead(t, n.indices) if t is not None and t is not n.tensor \
                    else None
            if isinstance(n, Reduce):
                axis = tuple(self.iter_var(iv, "the reduce axis") for iv in n.axis)
                if all(a is b for a, b in zip(axis, n.axis)):
                    return None
                return Reduce(n.combiner, n.source, axis, n.condition, n.init, n.value_index)
            return consts.get(n)

        # reduce axes first, so that their variables are replaced inside the reductions
        for node in post_order(e):
            if isinstance(node, Reduce):
                for iv in node.axis:
                    self.iter_var(iv, "the reduce axis")
        return rewrite(e, fn, memo)

    # -- operations --------------------------------------------------------------------
    def op(self, op: Operation) -> None:
        if isinstance(op, PlaceholderOp):
            shape = self.shape(op.shape, f"placeholder '{op.name}'")
            new: Operation = op if tuple(shape) == tuple(op.shape) else \
                PlaceholderOp(op.name, shape, op.dtype, seq=op.seq)
        elif isinstance(op, ComputeOp):
            axis = [self.iter_var(iv, f"compute '{op.name}', axis") for iv in op.axis]
            memo: dict[Expr, Expr] = {}
            body = [self.expr(b, memo) for b in op.body]
            same = all(a is b for a, b in zip(axis, op.axis)) and \
                all(a is b for a, b in zip(body, op.body))
            new = op if same else ComputeOp(op.name, axis, body, op.tag, op.attrs)
        elif isinstance(op, ExternOp):
            new = self._extern(op)
        elif isinstance(op, ScanOp):
            new = self._scan(op)
        else:
            raise TypeError(f"{self.who}: cannot specialize operation '{op.name}' of type "
                            f"{type(op).__name__}")
        self.table.update(zip(op.outputs, new.outputs))

    def _extern(self, op: ExternOp) -> ExternOp:
        def buf(b: ExternBuffer) -> ExternBuffer:
            return ExternBuffer(b.name, self.shape(b.shape, f"buffer '{b.name}'"), b.dtype,
                                b.role, b.index)

        ins = [buf(b) for b in op.in_buffers]
        outs = [buf(b) for b in op.out_buffers]
        by_old = dict(zip((*op.in_buffers, *op.out_buffers), (*ins, *outs)))
        memo: dict[Expr, Expr] = {}
        args = [by_old[a] if isinstance(a, ExternBuffer) else
                self.expr(a, memo) if isinstance(a, Expr) else a for a in op.call.args]
        return ExternOp(op.name, [self.table.get(t, t) for t in op.inputs], ins, outs,
                        PackedCall(op.call.func, args), op.tag, op.attrs)

    def _scan(self, op: ScanOp) -> ScanOp:
        for s in op.state_placeholder:
            self.op(s.op)
        for b in op.body_ops:
            self.op(b)
        # (a scan of as many rows as its inits has no steps: its time axis may be empty)
        axis = self.iter_var(op.scan_axis, f"scan '{op.name}', the time axis", least=0)
        t = self.table
        return ScanOp(op.name, axis, [t.get(x, x) for x in op.init],
                      [t.get(x, x) for x in op.update],
                      [t.get(x, x) for x in op.state_placeholder],
                      [t.get(x, x) for x in op.inputs],
                      [t[b.output(0)].op for b in op.body_ops], op.tag, op.attrs)


def specialize_dag(tensors: Sequence[Tensor], bind: Mapping[Var, int],
                   who: str = "specialize") -> tuple[list[Tensor], dict[Tensor, Tensor]]:
    """The tensors with the bound variables replaced, and the map from every tensor of
    the DAG to its counterpart (the tensor itself where nothing changed)."""
    s = _Specializer(check_binding(bind, who), who)
    for op in topo_sort_ops(list(tensors)):
        s.op(op)
    return [s.table[t] for t in tensors], s.table


def specialize(tensors: Any, bind: Mapping[Var, int]) -> Any:
    """The DAG of ``tensors`` with the variables of ``bind`` replaced by their values.

    Parameters
    ----------
    tensors : Tensor or sequence of Tensor
        Outputs of a DAG whose shapes (or bodies) use ``tex.var``/``tex.size_var``.
    bind : Mapping
        ``{var: int}``; variables left out stay symbolic.

    Returns
    -------
    Tensor or list of Tensor
        The same structure as ``tensors``: new operations (placeholders too) wherever a
        bound variable occurs, the same objects elsewhere.

    Raises
    ------
    TypeError
        A key is not a free variable, or a value is not an int.
    ValueError
        An extent is not positive at these values (naming it), or a size_var is bound to a
        negative value.

    Example
    -------
    >>> n = tex.size_var("n")
    >>> A = tex.placeholder((n, 4), name="A")
    >>> B = tex.compute((n, 4), lambda i, j: A[i, j] * 2, name="B")
    >>> tex.specialize(B, {n: 3}).shape
    (3, 4)
    """
    single = isinstance(tensors, Tensor)
    items = [tensors] if single else list(tensors)
    for k, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"specialize: tensors[{k}] must be a Tensor, got "
                            f"{type(t).__name__}")
    if not isinstance(bind, Mapping):
        raise TypeError(f"specialize: bind must be a mapping {{var: int}}, got "
                        f"{type(bind).__name__}")
    out, _ = specialize_dag(items, bind)
    return out[0] if single else out


def bind_shape_vars(placeholders: Sequence[Tensor], shapes: Mapping[Tensor, tuple[int, ...]],
                    given: Mapping[Var, int], who: str,
                    sources: Mapping[Var, str] | None = None) -> dict[Var, int]:
    """The values of the shape variables, from the arrays' shapes and ``given``.

    A dimension that is a variable binds it (two arrays that bind one variable to different
    values are a ValueError naming both); a dimension ``a*n + b`` binds ``n`` when nothing
    else does; every other dimension is checked once its variables are known."""
    bound: dict[Var, int] = dict(given)
    # where each value came from: a message, or (tensor, dimension, shape) formatted only
    # for an error (a call binds its sizes on every new shape: no text made otherwise)
    source: dict[Var, Any] = {v: (sources or {}).get(v, "the value given") for v in given}
    pending: list[tuple[Tensor, int, Expr, int]] = []

    def bind(var: Var, value: int, origin: Any) -> None:
        if var in bound:
            if bound[var] != value:
                raise ValueError(f"{who}: {where(*origin)} gives {var.name} = {value}, but "
                                 f"{said(source[var])} gives {var.name} = {bound[var]}")
            return
        if var.kind == "size" and value < 0 or not -2**31 <= value < 2**31:
            _value(var, value, f"{who}: {where(*origin)}")  # (raises, naming the value)
        bound[var] = value
        source[var] = origin

    def where(t: Tensor, d: int, got: tuple[int, ...]) -> str:
        return f"dimension {d} of '{t.name}' (shape {t.shape}, got {got})"

    def said(origin: Any) -> str:
        return origin if isinstance(origin, str) else where(*origin)

    for t in placeholders:
        got = shapes[t]
        if len(got) != len(t.shape):
            raise ValueError(f"{who}: '{t.name}' has {len(t.shape)} dimensions {t.shape}, "
                             f"got an array of shape {got}")
        for d, (e, n) in enumerate(zip(t.shape, got)):
            if isinstance(e, int):
                if e != n:
                    raise ValueError(f"{who}: '{t.name}' must have shape {t.shape}, got an "
                                     f"array of shape {got} (dimension {d})")
            elif isinstance(e, Var):
                bind(e, int(n), (t, d, got))
            elif isinstance(e, Expr):
                pending.append((t, d, e, int(n)))
            if not isinstance(e, int) and n < 1:
                # (the bounds proofs assume what static shapes require: positive extents)
                raise ValueError(f"{who}: {where(t, d, got)}: extents must be positive, got "
                                 f"{n} for {e}")
    # compound dimensions: solve a*n + b for a variable nothing bound, then check
    progress = True
    while progress:
        progress = False
        for item in list(pending):
            t, d, e, n = item
            free = [v for v in extent_vars(e) if v not in bound]
            if len(free) == 1:
                value = _solve_linear(bind_extent(e, bound), free[0], n)
                if value is not None:
                    bind(free[0], value, (t, d, shapes[t]))
                    progress = True
    for t, d, e, n in pending:
        value = extent_value(e, bound)
        got = value if value is not None else bind_extent(e, bound)
        if not isinstance(got, int):
            free = ", ".join(v.name for v in extent_vars(got))
            raise ValueError(f"{who}: cannot tell {free} from {where(t, d, shapes[t])}; "
                             f"pass its value")
        if got != n:
            vals = ", ".join(f"{v.name} = {bound[v]}" for v in extent_vars(e))
            raise ValueError(f"{who}: {where(t, d, shapes[t])}: {e} is {got} with {vals}")
    return bound


def _solve_linear(e: Extent, var: Var, value: int) -> int | None:
    """An integer ``var`` with ``e == value`` when ``e`` behaves as ``a*var + b`` (the
    caller checks the result by substitution, so a non-linear ``e`` only fails later)."""
    at = [bind_extent(e, {var: x}) for x in (0, 1)]
    if not all(isinstance(x, int) for x in at):
        return None
    b, a = at[0], at[1] - at[0]
    if a == 0 or (value - b) % a:
        return None
    return (value - b) // a
