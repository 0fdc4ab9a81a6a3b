"""The reference interpreter: a tensor DAG evaluated with NumPy, vectorized over index grids.

``evaluate(tensors, feed)`` is the independent reference that compiled code is checked
against (STYLE.md §4). It shares nothing with lowering or codegen; what each scalar
operator computes comes from the one table that defines it, ``tex.ir.semantics``.

Design
------
* Operations run once each, producers first (``topo_sort_ops``). Results live in a dict
  local to the call; an intermediate is dropped when its last consumer has run.
* A body is evaluated over an *open grid*: the variable of output dimension ``d`` is
  ``np.arange(extent)`` shaped ``(1, .., extent, .., 1)``, so an intermediate has the
  broadcast shape of the variables it depends on, never more. Nodes are interpreted by a
  table keyed on node type; ``Unary``/``Binary``/``Compare`` go through
  ``NUMPY_UNARY``/``NUMPY_BINARY`` keyed on ``Op``. The walk is iterative (explicit stack,
  one memo entry per node), so deep expressions do not hit Python's recursion limit.
* ``TensorRead`` is fancy indexing with the broadcast index arrays; a read whose indices
  are the compute's own axes (in any order, ``A[j, i]``) is a view instead of a gather.
* **Guarded reads: an active mask.** ``select(c, a, b)`` has both branches evaluated, and a
  branch may read out of bounds where it is not selected (padding:
  ``select(i >= 1, A[i - 1], 0)``). The interpreter carries a boolean *active mask*: the
  branches of a Select that contain reads are evaluated in child scopes whose masks are
  ``mask & c`` and ``mask & ~c``, and the source of a reduction under the mask of its
  ``where=``. A read checks bounds at active points only (an active out-of-bounds read
  raises ``OutOfBoundsError`` naming the tensor, dimension, index value and grid point)
  and clips the indices of inactive points, whose values are discarded. A branch selected
  nowhere is not evaluated. A value computed in a scope is valid in its child scopes (a
  child's active points are a subset), so lookups walk the chain of scope memos; nodes
  without reads do not depend on the mask and are shared by every scope. ``a && b`` with
  reads in ``b`` is ``select(a, b, false)`` and ``a || b`` is ``select(a, true, b)``: the
  right side guarded by the left, as compiled code evaluates it.
* **Reductions.** The reduce axes are flattened (row-major) into one extra grid dimension,
  placed *before* the output dimensions so that NumPy's inner loops run along the output's
  last dimension and the chunk is reduced along axis 0, and walked in chunks so that a
  temporary holds at most ``MAX_TEMP_ELEMENTS`` elements, (output points) x (reduce
  points in the chunk).
  Built-in reducers (one slot, combiner ``x op y`` with op in add/mul/max/min) reduce a
  chunk with ``np.sum``/``np.prod``/``np.max``/``np.min`` in the tensor's dtype, points
  failing ``where`` taking the op's neutral value, and fold the chunk results into an
  accumulator that starts at ``init`` (else at the reducer's identity). Any other reducer
  (tuple reducers such as argmax) is a sequential fold over the reduce points in index
  order, each step vectorized over all output points: ``acc = where(cond, combine(acc,
  value), acc)``; that is the order of the compiled loop, so ties resolve the same way.
* Results are broadcast to the full output shape and copied into a fresh C-contiguous
  array of the tensor's dtype. Everything runs under ``np.errstate(all="ignore")``.
"""
from __future__ import annotations

import math
from collections import Counter, defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..debug import InternalError, OutOfBoundsError
from ..dtype import DTYPES, DType
from ..ir.expr import (
    Binary,
    Cast,
    CommReducer,
    Compare,
    Const,
    Expr,
    IterVar,
    Op,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
    is_const,
)
from ..ir.feed import resolve_feed
from ..ir.semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast
from ..ir.tensor import (
    ComputeOp,
    ExternBuffer,
    ExternOp,
    Operation,
    PlaceholderOp,
    ScanOp,
    Tensor,
    TensorSlice,
)
from ..ir.visit import post_order, topo_sort_ops
from ..te.extern import call, python_value, scalar_args
from ..te.specialize import (
    bind_shape_vars,
    check_binding,
    free_vars,
    shape_vars,
    specialize_dag,
)

__all__ = ["MAX_TEMP_ELEMENTS", "OutOfBoundsError", "bind_feed", "evaluate"]

# Largest temporary of a reduction chunk: (output points) x (reduce points in the chunk).
MAX_TEMP_ELEMENTS = 1 << 24

Array = np.ndarray


# --------------------------------------------------------------------------------------
# Public entry point
# --------------------------------------------------------------------------------------

def evaluate(tensors: Tensor | Sequence[Tensor],
             feed: Mapping[Tensor | str, np.ndarray]) -> np.ndarray | list[np.ndarray]:
    """Evaluate tensors of a DAG with NumPy (the reference interpreter).

    Parameters
    ----------
    tensors : Tensor or list/tuple of Tensor
        The tensors to compute. Every operation they depend on runs once.
    feed : Mapping
        Placeholder -> ``np.ndarray`` with exactly the placeholder's shape and dtype. A key
        may also be the placeholder's name (``{"X": x}``) when no other placeholder of the
        DAG has that name; a placeholder keyed both ways must get the same array. Entries
        the DAG does not use are ignored.

    Returns
    -------
    np.ndarray or list of np.ndarray
        One fresh C-contiguous array per requested tensor (its shape and dtype); a single
        array when ``tensors`` is one Tensor, otherwise a list in the same order.

    Raises
    ------
    TypeError
        ``tensors`` is not a Tensor or a sequence of Tensors; a feed key is neither a
        Tensor nor a str, or is a computed tensor; a feed value is not an ``np.ndarray``.
    ValueError
        A placeholder has no data, or its array has the wrong shape or dtype (the message
        names the placeholder); a name key shared by several placeholders; a placeholder
        fed by tensor and by name with different arrays; a body uses a free variable
        (``tex.var``), which evaluate cannot bind.
    OutOfBoundsError
        (a subclass of IndexError and ValueError) a compute reads a tensor outside its
        shape at a point where the read is used. Reads under a ``tex.if_then_else`` branch
        or a reduction's ``where=`` are checked only where the guard selects them.

    Example
    -------
    >>> X = tex.placeholder((2, 3), name="X")
    >>> k = tex.reduce_axis((0, 3), name="k")
    >>> S = tex.compute((2,), lambda i: tex.sum(X[i, k], axis=k), name="S")
    >>> evaluate(S, {X: np.ones((2, 3), np.float32)})
    array([3., 3.], dtype=float32)
    """
    outputs, single = _as_tensors(tensors)
    if not isinstance(feed, Mapping):
        raise TypeError(f"evaluate: feed must be a mapping {{placeholder: ndarray}}, got "
                        f"{type(feed).__name__}")
    ops = topo_sort_ops(outputs)
    if free_vars(outputs):
        outputs, feed = specialized(outputs, ops, feed, "evaluate")
        ops = topo_sort_ops(outputs)
    values = bind_feed(ops, feed)
    wanted = set(outputs)
    pending: Counter[Tensor] = Counter()
    for op in ops:
        pending.update(op.input_tensors)
    with np.errstate(all="ignore"):
        for op in ops:
            if isinstance(op, PlaceholderOp):
                continue
            if isinstance(op, ExternOp):
                results = _evaluate_extern(op, values)
            elif isinstance(op, ScanOp):
                results = _evaluate_scan(op, values)
            elif isinstance(op, ComputeOp):
                results = _evaluate_compute(op, values)
            else:
                raise TypeError(f"evaluate: operation '{op.name}' of type "
                                f"{type(op).__name__} is not supported")
            for tensor, value in zip(op.outputs, results):
                values[tensor] = value
            for tensor in op.input_tensors:
                pending[tensor] -= 1
                if pending[tensor] == 0 and tensor not in wanted:
                    del values[tensor]
    results: list[np.ndarray] = []
    returned: set[Tensor] = set()
    for tensor in outputs:
        value = values[tensor]
        if isinstance(tensor.op, PlaceholderOp) or tensor in returned:
            value = value.copy()  # never hand out the caller's array or one array twice
        returned.add(tensor)
        results.append(value)
    return results[0] if single else results


def _evaluate_extern(op: ExternOp, values: Mapping[Tensor, np.ndarray]) -> list[np.ndarray]:
    """The outputs of an extern call: its function run on copies of its inputs (read-only
    views, as the compiled code passes) and fresh output arrays."""
    from ..runtime.ndarray import NDArray  # what the function gets, as in compiled code

    arrays: dict[ExternBuffer, np.ndarray] = {}
    for buf, t in zip(op.in_buffers, op.inputs):
        a = np.ascontiguousarray(values[t])
        view = a.view()
        view.flags.writeable = False
        arrays[buf] = view
    outs = [np.zeros(b.shape, np.dtype(b.dtype.name)) for b in op.out_buffers]
    arrays.update(zip(op.out_buffers, outs))
    scalars = []
    for e in scalar_args(op):
        if not isinstance(e, Const):
            free = next((n.name for n in post_order(e) if isinstance(n, Var)), str(e))
            raise ValueError(f"evaluate: the extern call '{op.name}' takes the free variable "
                             f"'{free}' (a tex.var); evaluate has no value for it. Replace "
                             "it by a constant")
        scalars.append(python_value(e, e.value))
    call(op, arrays, scalars, lambda a: a.view(NDArray))
    return outs


def _evaluate_scan(op: ScanOp, values: Mapping[Tensor, np.ndarray]) -> list[np.ndarray]:
    """The outputs of a scan: the inits' rows, then step by step each body operation
    evaluated at its row ``t`` (its time axis the one point ``t``), reading the outputs so
    far as the states, and the updates' rows copied out."""
    outs = [np.zeros(shape, np.dtype(d.name)) for shape, d in zip(op.shapes, op.dtypes)]
    n0 = op.init_len
    for out, init in zip(outs, op.init):
        out[:n0] = values[init]
    local: dict[Tensor, np.ndarray] = dict(values)
    local.update(zip(op.state_placeholder, outs))
    for b in op.body_ops:
        for t in b.outputs:
            local[t] = np.zeros(t.shape, np.dtype(t.dtype.name))
    for step in range(n0, op.shapes[0][0]):
        for b in op.body_ops:
            assert isinstance(b, ComputeOp)  # (te.scan checks)
            row = ComputeOp(b.name, [IterVar(b.axis[0].var, Range(step, 1)), *b.axis[1:]],
                            b.body, b.tag, b.attrs)
            for t, value in zip(b.outputs, _evaluate_compute(row, local)):
                local[t][step] = value[0]
        for out, upd in zip(outs, op.update):
            out[step] = local[upd][step]
    return outs


def specialized(outputs: Sequence[Tensor], ops: Sequence[Operation], feed: Mapping[Any, Any],
                who: str) -> tuple[list[Tensor], dict[Any, Any]]:
    """A DAG with free variables (symbolic shapes, ``tex.var`` in bodies) at the values the
    feed gives (``feed_sizes``), through ``tex.te.specialize``. Returns the specialized
    outputs and the feed keyed by their placeholders."""
    placeholders = [op.output(0) for op in ops if isinstance(op, PlaceholderOp)]
    bound, arrays, _ = feed_sizes(outputs, placeholders, feed, who, "the feed")
    new_outputs, table = specialize_dag(outputs, bound, who)
    return new_outputs, {table[t]: a for t, a in arrays.items()}


def feed_sizes(tensors: Sequence[Tensor], placeholders: Sequence[Tensor],
               feed: Mapping[Any, Any], who: str, where: str
               ) -> tuple[dict[Var, int], dict[Tensor, Any], dict[Any, Any]]:
    """The values of the free variables of the DAG of ``tensors``: the feed's ``{var: int}``
    entries (or by the variable's name, when no placeholder has it) and what the shapes of
    the placeholders' arrays say. Returns them, the arrays by placeholder, and the feed
    without its variable entries; a ``ValueError`` when a shape variable gets no value
    (``where``: how the message names the feed)."""
    names = {t.name for t in placeholders}
    free = {v.name: v for v in free_vars(tensors)}
    given: dict[Var, Any] = {}
    rest: dict[Any, Any] = {}
    for key, value in feed.items():
        if isinstance(key, Var):
            given[key] = value
        elif isinstance(key, str) and key in free and key not in names:
            given[free[key]] = value
        else:
            rest[key] = value
    arrays = resolve_feed(placeholders, rest, who)
    shapes = {t: tuple(a.shape) for t, a in arrays.items() if isinstance(a, np.ndarray)}
    bound = bind_shape_vars([t for t in placeholders if t in shapes], shapes,
                            check_binding(given, who), who)
    for v in shape_vars(tensors):
        if v not in bound:
            raise ValueError(f"{who}: no value for the shape variable '{v.name}' (no array "
                             f"has a dimension that is '{v.name}'); give it in {where}: "
                             f"{{{v.name}: value}}")
    return bound, arrays, rest


def _as_tensors(tensors: Any) -> tuple[list[Tensor], bool]:
    """The requested tensors as a list, and whether a single Tensor was given."""
    if isinstance(tensors, Tensor):
        return [tensors], True
    if isinstance(tensors, (list, tuple)):
        for i, t in enumerate(tensors):
            if not isinstance(t, Tensor):
                raise TypeError(f"evaluate: tensors[{i}] is {_describe(t)}; expected a Tensor")
        return list(tensors), False
    raise TypeError(f"evaluate: expected a Tensor or a list of Tensors, got {_describe(tensors)}")


def _describe(value: Any) -> str:
    if isinstance(value, TensorSlice):
        return f"a slice of tensor '{value.name}' (index it fully, or pass the tensor itself)"
    return f"{type(value).__name__} {value!r}"


def _numpy_name(dtype: DType) -> str:
    """How the dtype is spelled in a fix hint: ``np.float32``."""
    return "np.bool_" if dtype.is_bool else f"np.{dtype.name}"


def bind_feed(ops: Sequence[Operation], feed: Mapping[Any, Any]) -> dict[Tensor, np.ndarray]:
    """The checked array of every placeholder among ``ops``, from ``feed``.

    ``feed`` is keyed by placeholder tensors or their names, under the rule of
    ``tex.ir.feed.resolve_feed`` (entries ``ops`` do not use are ignored; a placeholder fed
    by tensor and by name must get the same array). Each array must be an ``np.ndarray``
    of the placeholder's exact shape and dtype. Raises as ``evaluate`` documents.
    """
    placeholders = [op.output(0) for op in ops if isinstance(op, PlaceholderOp)]
    given = resolve_feed(placeholders, feed, "evaluate")
    values: dict[Tensor, np.ndarray] = {}
    for tensor in placeholders:
        op: PlaceholderOp = tensor.op  # type: ignore[assignment]
        if tensor not in given:
            raise ValueError(
                f"evaluate: no data for placeholder '{op.name}' (shape {op.shape}, dtype "
                f"{op.dtype}); add it to the feed, e.g. {{{op.name}: np.zeros({op.shape}, "
                f"{_numpy_name(op.dtype)})}}")
        values[tensor] = _check_data(op, given[tensor])
    return values


def _check_data(op: PlaceholderOp, value: Any) -> np.ndarray:
    """``value`` if it is an ndarray of the placeholder's exact shape and dtype."""
    fix = _numpy_name(op.dtype)
    if not isinstance(value, np.ndarray):
        raise TypeError(f"evaluate: the data for placeholder '{op.name}' must be a "
                        f"numpy.ndarray (shape {op.shape}, dtype {op.dtype}), got "
                        f"{type(value).__name__}; convert it with np.asarray(x, dtype={fix})")
    if value.dtype != op.dtype.numpy:
        raise ValueError(f"evaluate: placeholder '{op.name}' expects dtype {op.dtype}, got an "
                         f"array of dtype {value.dtype}; convert it with x.astype({fix})")
    if value.shape != op.shape:
        raise ValueError(f"evaluate: placeholder '{op.name}' expects shape {op.shape}, got "
                         f"an array of shape {value.shape}")
    return np.asarray(value)


# --------------------------------------------------------------------------------------
# Grids, scopes and the expression interpreter
# --------------------------------------------------------------------------------------

class _Grid:
    """The index space of one evaluation: each bound variable as a broadcastable array."""

    def __init__(self, op_name: str, ndim: int) -> None:
        self.op_name = op_name
        self.ndim = ndim
        self.env: dict[Var, Array] = {}
        self.dense: dict[Var, int] = {}  # var whose array is arange(extent) along this dim
        self.labels: list[Var] = []  # variables that locate a point, for error messages

    def bind_axis(self, iv: IterVar, dim: int) -> None:
        """Bind an output axis to an arange along grid dimension ``dim``."""
        shape = [1] * self.ndim
        shape[dim] = iv.dom.extent
        values = np.arange(iv.dom.min, iv.dom.stop, dtype=iv.var.dtype.numpy)
        self.env[iv.var] = values.reshape(shape)
        if iv.dom.min == 0:
            self.dense[iv.var] = dim
        self.labels.append(iv.var)


class _Scope:
    """A memo of node values valid where ``mask`` (None: everywhere) is true."""

    __slots__ = ("mask", "memo", "parent", "_top")

    def __init__(self, mask: Array | None, parent: _Scope | None) -> None:
        self.mask = mask
        self.memo: dict[Expr, Array] = {}
        self.parent = parent
        # a root does not store itself: that reference cycle kept its memo (a reduction
        # chunk's temporaries) alive until the cycle collector ran, chunk after chunk
        self._top = None if parent is None else parent.top

    @property
    def top(self) -> _Scope:
        """The outermost scope."""
        return self if self._top is None else self._top

    def get(self, node: Expr) -> Array | None:
        """The node's value from this scope or an enclosing one, or None."""
        scope: _Scope | None = self
        while scope is not None:
            value = scope.memo.get(node)
            if value is not None:
                return value
            scope = scope.parent
        return None


def _reads_below(roots: Sequence[Expr]) -> dict[Expr, bool]:
    """For every node under ``roots``: whether it contains a TensorRead."""
    reads: dict[Expr, bool] = {}
    for node in post_order(*roots):
        reads[node] = isinstance(node, TensorRead) or any(reads[c] for c in node.children())
    return reads


def _as(value: Any, dtype: DType) -> Array:
    """``value`` as an ndarray of ``dtype`` (ufuncs on 0-d arrays return scalars)."""
    arr = np.asarray(value)
    want = dtype.numpy
    return arr if arr.dtype == want else arr.astype(want)


def _pick(arr: Array, point: tuple[int, ...]) -> Any:
    """The element of a broadcastable grid array at a full grid point."""
    if arr.ndim == 0:
        return arr.item()
    return arr[tuple(c if s > 1 else 0 for c, s in zip(point, arr.shape))].item()


_VISIT, _EXIT, _BRANCH, _JOIN = range(4)


_FALSE, _TRUE = Const(False, DTYPES["bool"]), Const(True, DTYPES["bool"])


def _sides(node: Expr) -> tuple[Expr, Expr, Expr]:
    """A guarding node as ``cond ? a : b`` (``a && b`` is ``a ? b : false``)."""
    if type(node) is Select:
        return node.cond, node.a, node.b
    assert isinstance(node, Binary)
    return (node.a, node.b, _FALSE) if node.op is Op.AND else (node.a, _TRUE, node.b)


class _Interpreter:
    """Evaluates expressions over one grid, reading computed tensors from ``values``."""

    def __init__(self, values: Mapping[Tensor, Array], grid: _Grid,
                 roots: Sequence[Expr]) -> None:
        self.values = values
        self.grid = grid
        # the constant sides of guarding && / || are not under the roots: no reads
        self.reads = defaultdict(bool, _reads_below(roots))

    def run(self, roots: Sequence[Expr], scope: _Scope) -> list[Array]:
        """The values of ``roots`` in ``scope`` (an explicit stack; no recursion)."""
        stack: list[tuple[Any, ...]] = [(_VISIT, r, scope) for r in reversed(roots)]
        while stack:
            item = stack.pop()
            tag, node, sc = item[0], item[1], item[2]
            if tag == _VISIT:
                if sc.get(node) is not None:
                    continue
                if self._guards(node):
                    stack.append((_BRANCH, node, sc))
                    stack.append((_VISIT, _sides(node)[0], sc))
                else:
                    stack.append((_EXIT, node, sc))
                    stack.extend((_VISIT, c, sc) for c in reversed(node.children()))
            elif tag == _EXIT:
                if sc.get(node) is None:
                    args = [sc.get(c) for c in node.children()]
                    handler = _HANDLERS.get(type(node))
                    if handler is None:
                        raise InternalError(f"evaluate: no rule for {type(node).__name__}",
                                            node)
                    self._store(node, handler(self, node, args, sc.mask), sc)
            elif tag == _BRANCH:
                if sc.get(node) is None:
                    self._branch(node, sc, stack)
            else:
                self._join(node, sc, item[3], item[4])
        return [_must(scope.get(r)) for r in roots]

    def _store(self, node: Expr, value: Array, scope: _Scope) -> None:
        """Memoize; values of read-free nodes do not depend on the mask: share them."""
        (scope if self.reads[node] else scope.top).memo[node] = value

    def _guards(self, node: Expr) -> bool:
        """Whether ``node`` evaluates a side with reads only where its condition says."""
        if type(node) is Select:
            return self.reads[node.a] or self.reads[node.b]
        return type(node) is Binary and node.op in (Op.AND, Op.OR) and self.reads[node.b]

    def _branch(self, node: Expr, sc: _Scope, stack: list[tuple[Any, ...]]) -> None:
        """Schedule each branch of a guarded node under the mask where it is selected."""
        c, a, b = _sides(node)
        cond = _must(sc.get(c))
        not_cond = np.logical_not(cond)
        if sc.mask is None:
            on_a, on_b = cond, not_cond
        else:
            on_a, on_b = np.logical_and(sc.mask, cond), np.logical_and(sc.mask, not_cond)
        use_a, use_b = bool(on_a.any()), bool(on_b.any())
        # a branch selected at every active point needs no narrower scope
        scope_a = _Scope(on_a, sc) if use_b and self.reads[a] else sc
        scope_b = _Scope(on_b, sc) if use_a and self.reads[b] else sc
        stack.append((_JOIN, node, sc, scope_a if use_a else None,
                      scope_b if use_b else None))
        if use_b:
            stack.append((_VISIT, b, scope_b))
        if use_a:
            stack.append((_VISIT, a, scope_a))

    def _join(self, node: Expr, sc: _Scope, scope_a: _Scope | None,
              scope_b: _Scope | None) -> None:
        """Combine the branches of a guarded node (a branch not evaluated is unused)."""
        if sc.get(node) is not None:
            return
        c, a, b = _sides(node)
        if scope_a is not None and scope_b is not None:
            value = np.where(_must(sc.get(c)), _must(scope_a.get(a)), _must(scope_b.get(b)))
        elif scope_a is not None:
            value = _must(scope_a.get(a))
        elif scope_b is not None:
            value = _must(scope_b.get(b))
        else:  # no active point at all: any value will do
            value = np.zeros((), node.dtype.numpy)
        self._store(node, _as(value, node.dtype), sc)

    # -- tensor reads -------------------------------------------------------------------
    def read(self, node: TensorRead, indices: list[Array], mask: Array | None) -> Array:
        """``tensor[indices]`` with bounds checked at the active points."""
        data = self.values.get(node.tensor)
        if data is None:
            raise InternalError(f"evaluate: tensor '{node.tensor.name}' is read before it "
                                "is computed", node)
        view = self._dense_view(node, data)
        if view is not None:
            return view
        fixed = []
        for dim, (ix, extent) in enumerate(zip(indices, data.shape)):
            if ix.dtype == np.bool_:
                ix = ix.astype(np.intp)  # a bool array would act as a mask in NumPy
            if ix.min() < 0 or ix.max() >= extent:
                bad = (ix < 0) | (ix >= extent)
                if mask is not None:
                    bad = bad & mask
                if bad.any():
                    raise self._out_of_bounds(node, dim, ix, bad, data.shape)
                ix = np.clip(ix.astype(np.intp), 0, extent - 1)  # only inactive points move
            fixed.append(ix)
        return np.asarray(data[tuple(fixed)])

    def _dense_view(self, node: TensorRead, data: Array) -> Array | None:
        """``A[j, i]`` over the grid's own axes: a transposed view of A, else None."""
        dims: list[int] = []
        for d, ix in enumerate(node.indices):
            dim = self.grid.dense.get(ix) if isinstance(ix, Var) else None
            if dim is None or self.grid.env[ix].shape[dim] != data.shape[d] or dim in dims:
                return None
            dims.append(dim)
        order = sorted(range(len(dims)), key=dims.__getitem__)
        shape = [1] * self.grid.ndim
        for d, dim in enumerate(dims):
            shape[dim] = data.shape[d]
        return data.transpose(order).reshape(shape)

    def _out_of_bounds(self, node: TensorRead, dim: int, ix: Array, bad: Array,
                       shape: tuple[int, ...]) -> OutOfBoundsError:
        """The error for an active read outside the tensor, located at its first point."""
        ndim = self.grid.ndim
        first = tuple(int(c) for c in np.argwhere(bad)[0]) if bad.ndim else ()
        point = first + (0,) * (ndim - len(first))
        where = ", ".join(f"{v.name}={_pick(self.grid.env[v], point)}"
                          for v in self.grid.labels if v in self.grid.env)
        read = f"{node.tensor.name}[{', '.join(str(i) for i in node.indices)}]"
        return OutOfBoundsError(
            f"evaluate: compute '{self.grid.op_name}' reads {read} out of bounds at "
            f"{where or 'its only point'}: index {_pick(ix, point)} in dimension {dim} of "
            f"'{node.tensor.name}' (shape {shape}). Fix the index, or guard the read with "
            "tex.if_then_else(cond, read, other) or a reduction's where=; evaluate does not "
            "check reads where their guard is false")


def _must(value: Array | None) -> Array:
    if value is None:
        raise InternalError("evaluate: a node was used before it was evaluated")
    return value


# -- the node table: (interpreter, node, child values, active mask) -> value -------------

def _eval_const(it: _Interpreter, node: Const, args: list[Array], mask: Array | None) -> Array:
    return np.asarray(node.value, dtype=node.dtype.numpy)


def _eval_var(it: _Interpreter, node: Var, args: list[Array], mask: Array | None) -> Array:
    value = it.grid.env.get(node)
    if value is not None:
        return value
    if node.kind in ("var", "size"):
        raise ValueError(f"evaluate: compute '{it.grid.op_name}' uses the free variable "
                         f"'{node.name}' (a tex.var); evaluate has no value for it. Give it "
                         f"in the feed ({{{node.name}: value}}) or replace it by a constant")
    raise ValueError(f"evaluate: compute '{it.grid.op_name}' uses the {node.kind} variable "
                     f"'{node.name}' where it is not bound")


def _eval_read(it: _Interpreter, node: TensorRead, args: list[Array],
               mask: Array | None) -> Array:
    return it.read(node, args, mask)


def _eval_unary(it: _Interpreter, node: Unary, args: list[Array], mask: Array | None) -> Array:
    return _as(NUMPY_UNARY[node.op](args[0]), node.dtype)


def _eval_binary(it: _Interpreter, node: Binary | Compare, args: list[Array],
                 mask: Array | None) -> Array:
    return _as(NUMPY_BINARY[node.op](args[0], args[1]), node.dtype)


def _eval_select(it: _Interpreter, node: Select, args: list[Array],
                 mask: Array | None) -> Array:
    return _as(np.where(args[0], args[1], args[2]), node.dtype)


def _eval_cast(it: _Interpreter, node: Cast, args: list[Array], mask: Array | None) -> Array:
    return _as(numpy_cast(args[0], node.dtype.numpy), node.dtype)


def _eval_reduce(it: _Interpreter, node: Reduce, args: list[Array],
                 mask: Array | None) -> Array:
    raise InternalError(f"evaluate: compute '{it.grid.op_name}' has a reduction inside an "
                        "expression (the verifier should have rejected it)", node)


_HANDLERS: dict[type, Callable[[_Interpreter, Any, list[Array], Array | None], Array]] = {
    Const: _eval_const,
    Var: _eval_var,
    TensorRead: _eval_read,
    Unary: _eval_unary,
    Binary: _eval_binary,
    Compare: _eval_binary,
    Select: _eval_select,
    Cast: _eval_cast,
    Reduce: _eval_reduce,
}


# --------------------------------------------------------------------------------------
# Compute operations
# --------------------------------------------------------------------------------------

def _materialize(value: Array, shape: tuple[int, ...], dtype: DType) -> np.ndarray:
    """A fresh C-contiguous array of ``shape`` and ``dtype`` holding broadcast ``value``."""
    out = np.empty(shape, dtype.numpy)
    out[...] = value
    return out


def _evaluate_compute(op: ComputeOp, values: Mapping[Tensor, Array]) -> list[np.ndarray]:
    """The outputs of one compute, in output order."""
    body = op.body
    if isinstance(body[0], Reduce):
        return _evaluate_reduction(op, body, values)
    grid = _Grid(op.name, len(op.axis))
    for dim, iv in enumerate(op.axis):
        grid.bind_axis(iv, dim)
    results = _Interpreter(values, grid, body).run(body, _Scope(None, None))
    return [_materialize(v, op.shape, e.dtype) for v, e in zip(results, body)]


# Built-in reducers: combiner op -> (chunk reduction over the last axis, neutral value).
_CHUNK_REDUCE: dict[Op, Callable[[Array], Array]] = {
    Op.ADD: lambda v: np.sum(v, axis=0, dtype=v.dtype),
    Op.MUL: lambda v: np.prod(v, axis=0, dtype=v.dtype),
    Op.MAX: lambda v: np.max(v, axis=0),
    Op.MIN: lambda v: np.min(v, axis=0),
}


def _neutral(op: Op, dtype: DType) -> Array:
    """The value that leaves ``x op value`` equal to x."""
    np_dtype = dtype.numpy
    if op in (Op.ADD, Op.MUL):
        return np.asarray(0 if op is Op.ADD else 1, np_dtype)
    lowest = op is Op.MAX
    if dtype.is_float:
        return np.asarray(-np.inf if lowest else np.inf, np_dtype)
    if dtype.is_bool:
        return np.asarray(not lowest)
    info = np.iinfo(np_dtype)
    return np.asarray(info.min if lowest else info.max, np_dtype)


def _builtin_op(combiner: CommReducer) -> Op | None:
    """The op of a one-slot reducer whose combiner is ``x op y`` (op add/mul/max/min)."""
    if len(combiner) != 1:
        return None
    result, x, y = combiner.result[0], combiner.lhs[0], combiner.rhs[0]
    if not isinstance(result, Binary) or result.op not in _CHUNK_REDUCE:
        return None
    if (result.a is x and result.b is y) or (result.a is y and result.b is x):
        return result.op
    return None


def _bind_reduce_chunk(grid: _Grid, axes: Sequence[IterVar], lo: int, hi: int) -> None:
    """Bind the reduce variables to reduce points ``lo..hi-1`` (row-major flat order)."""
    extents = tuple(iv.dom.extent for iv in axes)
    coords = np.unravel_index(np.arange(lo, hi), extents)
    shape = (hi - lo,) + (1,) * (grid.ndim - 1)
    for iv, c in zip(axes, coords):
        grid.env[iv.var] = (c + iv.dom.min).astype(iv.var.dtype.numpy).reshape(shape)


def _evaluate_reduction(op: ComputeOp, body: list[Expr],
                        values: Mapping[Tensor, Array]) -> list[np.ndarray]:
    """A reduction body (one Reduce per slot of its reducer), chunk by chunk."""
    red = body[0]
    if not isinstance(red, Reduce):
        raise InternalError(f"evaluate: compute '{op.name}' is not a reduction", red)
    for other in body[1:]:
        if not isinstance(other, Reduce) or len(other.init) != len(red.init) or any(
                a is not b for a, b in zip(other.init, red.init)):
            raise ValueError(f"evaluate: compute '{op.name}': the slots of its tuple "
                             "reduction have different init values")
    n_out = len(op.axis)
    out_points = math.prod(op.shape)
    total = math.prod(iv.dom.extent for iv in red.axis)
    chunk = max(1, min(total, MAX_TEMP_ELEMENTS // out_points))

    # the accumulator starts at init (else the identity), which depends on the output axes
    out_grid = _Grid(op.name, n_out)
    for dim, iv in enumerate(op.axis):
        out_grid.bind_axis(iv, dim)
    start_exprs = list(red.init or red.combiner.identity)
    acc = _Interpreter(values, out_grid, start_exprs).run(start_exprs, _Scope(None, None))

    grid = _Grid(op.name, n_out + 1)  # dimension 0: the flattened reduce points
    for dim, iv in enumerate(op.axis):
        grid.bind_axis(iv, dim + 1)
    grid.labels.extend(iv.var for iv in red.axis)
    interp = _Interpreter(values, grid, [*red.source, red.condition])
    always = is_const(red.condition, True)
    fast = _builtin_op(red.combiner)
    fold = None if fast is not None else _Fold(red.combiner, values, op.name, n_out)
    for lo in range(0, total, chunk):
        hi = min(total, lo + chunk)
        _bind_reduce_chunk(grid, red.axis, lo, hi)
        top = _Scope(None, None)
        mask = None
        if not always:
            cond = interp.run([red.condition], top)[0]
            if not cond.any():
                continue
            if not cond.all():
                mask = cond
        sources = interp.run(list(red.source), top if mask is None else _Scope(mask, top))
        lane = (hi - lo,) + (1,) * n_out
        if fast is None:
            assert fold is not None  # for the type checker: made above when fast is None
            acc = fold.run(acc, sources, mask, lane)
            del sources, top, mask
            continue
        v = sources[0]
        if mask is not None:
            v = np.where(mask, v, _neutral(fast, red.dtype))
        v = np.broadcast_to(v, np.broadcast_shapes(v.shape, lane))
        part = _CHUNK_REDUCE[fast](v)
        acc = [_as(NUMPY_BINARY[fast](acc[0], part), red.dtype)]
        # this chunk's temporaries go before the next chunk allocates its own
        del v, sources, top, mask
    return [_materialize(acc[e.value_index], op.shape, e.dtype) for e in body]


class _Fold:
    """A general reducer folded point by point: ``acc = combine(acc, value)``."""

    def __init__(self, combiner: CommReducer, values: Mapping[Tensor, Array], op_name: str,
                 ndim: int) -> None:
        self.combiner = combiner
        self.grid = _Grid(op_name, ndim)
        self.results = list(combiner.result)
        self.interp = _Interpreter(values, self.grid, self.results)

    def run(self, acc: list[Array], sources: list[Array], mask: Array | None,
            lane: tuple[int, ...]) -> list[Array]:
        """Fold the reduce points of one chunk (axis 0) into ``acc``, in order."""
        sources = [np.broadcast_to(s, np.broadcast_shapes(s.shape, lane)) for s in sources]
        if mask is not None:
            mask = np.broadcast_to(mask, np.broadcast_shapes(mask.shape, lane))
        env = self.grid.env
        for j in range(lane[0]):
            active = None if mask is None else mask[j]
            if active is not None and not active.any():
                continue
            env.update(zip(self.combiner.lhs, acc))
            env.update(zip(self.combiner.rhs, (s[j] for s in sources)))
            new = self.interp.run(self.results, _Scope(None, None))
            if active is not None:
                new = [np.where(active, n, a) for n, a in zip(new, acc)]
            acc = [_as(n, d) for n, d in zip(new, self.combiner.dtypes)]
        return acc
