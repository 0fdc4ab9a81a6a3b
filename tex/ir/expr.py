"""Scalar expression nodes.

A handful of node shapes, with an ``Op`` enum for the operator (defined with its
classification sets in ``tex.ir.ops`` and re-exported here, where every layer imports it):

    Const(value, dtype)          Var(name, dtype)            TensorRead(tensor, indices)
    Unary(op, a)                 Binary(op, a, b)            Compare(op, a, b)
    Select(cond, a, b)           Cast(dtype, a)              Reduce(combiner, source, axis,
                                                                    condition, init, value_index)

Invariants:
- Nodes are immutable. Interior nodes and constants are *interned* (hash-consed): two nodes
  with the same fields are the same object, so compiler code compares with ``is`` and uses
  nodes as dict keys (hash is identity). ``Var``/``IterVar``/tensors are unique objects.
- The raw constructors (``Binary(Op.ADD, a, b)``) check dtypes but do not fold or promote;
  the builders in ``tex.ir.fold`` (used by the Python operators) promote and fold.
- ``==`` on expressions builds a ``Compare`` node; ``bool()`` of ``a == b`` is identity
  (``a is b``), ``bool()`` of any other non-constant expression raises with a hint.
"""
from __future__ import annotations

import struct
import weakref
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ..debug import InternalError
from ..dtype import DTYPES, DType, as_dtype, boolean, float32, int32
from .ops import BINARY_OPS, COMMUTATIVE_OPS, COMPARE_OPS, FLOAT_ONLY_OPS, UNARY_OPS, Op

if TYPE_CHECKING:
    from .tensor import Tensor

__all__ = [
    # re-exported from .ops
    "Op", "UNARY_OPS", "BINARY_OPS", "COMPARE_OPS", "FLOAT_ONLY_OPS", "COMMUTATIVE_OPS",
    "ExprOp", "Expr", "Const", "Var", "IterVar", "Range", "TensorRead", "Unary", "Binary",
    "Compare", "Select", "Cast", "Reduce", "CommReducer", "as_expr", "is_const", "const_value",
]


# --------------------------------------------------------------------------------------
# Operator overloads shared by expressions and iteration variables
# --------------------------------------------------------------------------------------

def _operator(op: Op, reflected: bool = False) -> Callable[[Any, Any], Any]:
    """A Python operator method building ``op``; a Tensor operand defers to the Tensor's
    own (broadcasting) operator by returning NotImplemented."""
    is_compare = op in COMPARE_OPS

    def method(self: Any, other: Any) -> Any:
        if getattr(other, "_is_tex_tensor", False):
            return NotImplemented
        build = fold.compare if is_compare else fold.binary
        return build(op, other, self) if reflected else build(op, self, other)

    method.__name__ = f"__{'r' if reflected else ''}{op.value}__"
    return method


class ExprOp:
    """Python operators that build expression nodes (through ``tex.ir.fold``)."""

    __slots__ = ()
    __array_ufunc__ = None  # NumPy scalars defer to our reflected operators

    __add__, __radd__ = _operator(Op.ADD), _operator(Op.ADD, True)
    __sub__, __rsub__ = _operator(Op.SUB), _operator(Op.SUB, True)
    __mul__, __rmul__ = _operator(Op.MUL), _operator(Op.MUL, True)
    __truediv__, __rtruediv__ = _operator(Op.DIV), _operator(Op.DIV, True)
    __floordiv__, __rfloordiv__ = _operator(Op.FLOORDIV), _operator(Op.FLOORDIV, True)
    __mod__, __rmod__ = _operator(Op.FLOORMOD), _operator(Op.FLOORMOD, True)
    __pow__, __rpow__ = _operator(Op.POW), _operator(Op.POW, True)
    __and__, __rand__ = _operator(Op.AND), _operator(Op.AND, True)
    __or__, __ror__ = _operator(Op.OR), _operator(Op.OR, True)
    __lt__, __le__ = _operator(Op.LT), _operator(Op.LE)
    __gt__, __ge__ = _operator(Op.GT), _operator(Op.GE)

    def __neg__(self) -> Expr:
        return fold.unary(Op.NEG, self)

    def __pos__(self) -> Expr:
        return as_expr(self)

    def __abs__(self) -> Expr:
        return fold.unary(Op.ABS, self)

    def __invert__(self) -> Expr:
        return fold.logical_not(self)

    def __eq__(self, other: Any) -> Expr:  # type: ignore[override]
        if other is None:
            return False  # type: ignore[return-value]
        return fold.compare(Op.EQ, self, other)

    def __ne__(self, other: Any) -> Expr:  # type: ignore[override]
        if other is None:
            return True  # type: ignore[return-value]
        return fold.compare(Op.NE, self, other)

    # defining __eq__ drops the inherited hash: restore identity hashing explicitly
    __hash__ = object.__hash__

    def __bool__(self) -> bool:
        raise ValueError(
            f"cannot use the expression '{self}' as a Python bool: its value is only known "
            "when the program runs. Use tex.all(...)/tex.any(...) to combine conditions and "
            "tex.if_then_else(cond, a, b) to choose between values.")

    def astype(self, dtype: Any) -> Expr:
        """This expression converted to ``dtype``."""
        return fold.cast(dtype, self)  # checks dtype, naming astype in errors

    def equal(self, other: Any) -> Expr:
        """Build ``self == other`` explicitly (same as the ``==`` operator)."""
        return fold.compare(Op.EQ, self, other)

    def same_as(self, other: Any) -> bool:
        """Structural identity, as TVM's ``Object.same_as`` (nodes are interned, so this is
        ``is``: ``(i + 1).same_as(i + 1)`` holds)."""
        return as_expr(self) is (as_expr(other) if isinstance(other, ExprOp) else other)


# --------------------------------------------------------------------------------------
# Nodes
# --------------------------------------------------------------------------------------

# The interning table: key -> weak reference to the node. A plain dict of weakrefs (not a
# WeakValueDictionary, whose pure-Python get() dominated node construction); the weakref's
# callback drops the entry when the node dies. A key holds children by id(): while the
# node is alive its children are too, so their ids cannot be reused.
_INTERN: dict[tuple, weakref.ref] = {}


def _forget(key: tuple) -> Callable[[weakref.ref], None]:
    def callback(ref: weakref.ref) -> None:
        if _INTERN.get(key) is ref:
            del _INTERN[key]
    return callback


def _lookup(key: tuple) -> Any:
    """The live node interned under ``key``, or None."""
    ref = _INTERN.get(key)
    return ref() if ref is not None else None


def _store(cls: type, key: tuple, **fields: Any) -> Any:
    """Make the node of ``cls`` with ``fields`` and intern it under ``key``. Constructors
    call _lookup first, so dtype checks and this allocation happen only on a miss."""
    node = object.__new__(cls)
    for name, value in fields.items():
        object.__setattr__(node, name, value)
    new_ref = weakref.ref(node, _forget(key))
    # setdefault: if another thread interned the same key meanwhile, use its node
    ref = _INTERN.setdefault(key, new_ref)
    if ref is not new_ref:
        existing = ref()
        if existing is not None:
            return existing
        _INTERN[key] = new_ref  # a dead entry whose callback has not run yet
    return node


class Expr(ExprOp):
    """Base of every scalar expression node."""

    __slots__ = ("dtype", "__weakref__")
    dtype: DType

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} nodes are immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"{type(self).__name__} nodes are immutable")

    def children(self) -> tuple[Expr, ...]:
        """The sub-expressions, in a fixed order."""
        return ()

    def with_children(self, children: Sequence[Expr]) -> Expr:
        """The same node over new children (this node itself when nothing changed)."""
        return self

    def __str__(self) -> str:
        from .printer import format_expr
        return format_expr(self)

    def __repr__(self) -> str:
        return f"{type(self).__name__}({self})"

    def __reduce__(self) -> Any:
        raise TypeError("tex expressions cannot be pickled")

    def __copy__(self) -> Expr:
        return self

    def __deepcopy__(self, memo: dict) -> Expr:
        return self


def _same(children: Sequence[Expr], old: Sequence[Expr]) -> bool:
    return len(children) == len(old) and all(a is b for a, b in zip(children, old))


_INT_RANGE = {d.name: (int(np.iinfo(d.numpy).min), int(np.iinfo(d.numpy).max))
              for d in DTYPES.values() if d.is_int}


class Const(Expr):
    """A constant of a given dtype (value normalized to int/float/bool)."""

    __slots__ = ("value",)
    __match_args__ = ("value", "dtype")
    value: int | float | bool

    def __new__(cls, value: Any, dtype: DType) -> Const:
        dtype = as_dtype(dtype)
        if dtype.is_float:
            v: Any = float(dtype.numpy.type(value))
            # floats are keyed by bit pattern: 0.0 and -0.0 (and NaNs) stay distinct
            key: tuple = (Const, dtype.name, struct.pack("<d", v))
        elif dtype.is_bool:
            v = bool(value)
            key = (Const, "bool", v)
        else:
            v = int(value)
            lo, hi = _INT_RANGE[dtype.name]
            if not lo <= v <= hi:
                raise ValueError(f"constant {value!r} does not fit in {dtype.name} "
                                 f"(range [{lo}, {hi}])")
            key = (Const, dtype.name, v)
        node = _lookup(key)
        return node if node is not None else _store(cls, key, value=v, dtype=dtype)

    def __bool__(self) -> bool:
        if self.dtype.is_bool:
            return bool(self.value)
        return ExprOp.__bool__(self)

    def __float__(self) -> float:
        return float(self.value)

    def __int__(self) -> int:
        return int(self.value)

    def __index__(self) -> int:
        if not self.dtype.is_integral:
            raise TypeError(f"float constant {self} cannot be used as an integer")
        return int(self.value)


class Var(Expr):
    """A named scalar variable; every call makes a distinct variable.

    ``kind`` is ``"var"`` for free variables (``tex.var``), ``"size"`` for free variables
    known to be non-negative (``tex.size_var``, TVM's ``SizeVar``: a size), ``"axis"`` for a
    compute's data-parallel axis, ``"reduce"`` for a reduction axis and ``"thread"`` for a GPU
    hardware index (``threadIdx.x``, ``blockIdx.y``, ...) in a lowered kernel.
    """

    __slots__ = ("name", "kind")
    __match_args__ = ("name", "dtype")
    name: str
    kind: str

    def __new__(cls, name: str, dtype: DType = int32, kind: str = "var") -> Var:
        if kind not in ("var", "size", "axis", "reduce", "thread"):
            raise InternalError(f"bad Var kind {kind!r}")
        node = object.__new__(cls)
        object.__setattr__(node, "name", str(name))
        object.__setattr__(node, "dtype", as_dtype(dtype))
        object.__setattr__(node, "kind", kind)
        return node


class TensorRead(Expr):
    """``tensor[indices]``: one element of a tensor."""

    __slots__ = ("tensor", "indices")
    __match_args__ = ("tensor", "indices")
    tensor: Tensor
    indices: tuple[Expr, ...]

    def __new__(cls, tensor: Tensor, indices: Sequence[Expr]) -> TensorRead:
        indices = tuple(indices)
        key = (TensorRead, id(tensor), *map(id, indices))
        node = _lookup(key)
        if node is not None:
            return node  # type: ignore[no-any-return]
        if len(indices) != len(tensor.shape):
            raise InternalError(f"TensorRead of {tensor.name} with {len(indices)} indices")
        for ix in indices:
            if not ix.dtype.is_integral:
                raise InternalError(f"non-integer index {ix} into {tensor.name}")
        return _store(cls, key, tensor=tensor, indices=indices, dtype=tensor.dtype)

    def children(self) -> tuple[Expr, ...]:
        return self.indices

    def with_children(self, children: Sequence[Expr]) -> Expr:
        if _same(children, self.indices):
            return self
        return TensorRead(self.tensor, children)


class Unary(Expr):
    """A unary operator or intrinsic: ``-a``, ``not a``, ``exp(a)``..."""

    __slots__ = ("op", "a")
    __match_args__ = ("op", "a")
    op: Op
    a: Expr

    def __new__(cls, op: Op, a: Expr) -> Unary:
        key = (Unary, op, id(a))
        node = _lookup(key)
        if node is not None:
            return node  # type: ignore[no-any-return]
        if op not in UNARY_OPS:
            raise InternalError(f"{op} is not a unary operator")
        if op is Op.NOT and not a.dtype.is_bool:
            raise InternalError(f"not of non-bool {a}")
        if op in FLOAT_ONLY_OPS and not a.dtype.is_float:
            raise InternalError(f"{op.value} of non-float {a}")
        return _store(cls, key, op=op, a=a, dtype=a.dtype)  # type: ignore[no-any-return]

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def with_children(self, children: Sequence[Expr]) -> Expr:
        (a,) = children
        return self if a is self.a else Unary(self.op, a)


class Binary(Expr):
    """A binary operator on two operands of one dtype (AND/OR on bools)."""

    __slots__ = ("op", "a", "b")
    __match_args__ = ("op", "a", "b")
    op: Op
    a: Expr
    b: Expr

    def __new__(cls, op: Op, a: Expr, b: Expr) -> Binary:
        key = (Binary, op, id(a), id(b))
        node = _lookup(key)
        if node is not None:
            return node  # type: ignore[no-any-return]
        if op not in BINARY_OPS:
            raise InternalError(f"{op} is not a binary operator")
        if a.dtype is not b.dtype:
            raise InternalError(f"{op.value} of mismatched dtypes {a.dtype} and {b.dtype}")
        if op in (Op.AND, Op.OR) and not a.dtype.is_bool:
            raise InternalError(f"{op.value} of non-bool operands")
        return _store(cls, key, op=op, a=a, b=b, dtype=a.dtype)  # type: ignore[no-any-return]

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def with_children(self, children: Sequence[Expr]) -> Expr:
        a, b = children
        return self if (a is self.a and b is self.b) else Binary(self.op, a, b)


class Compare(Expr):
    """A comparison of two operands of one dtype; the result is bool."""

    __slots__ = ("op", "a", "b")
    __match_args__ = ("op", "a", "b")
    op: Op
    a: Expr
    b: Expr

    def __new__(cls, op: Op, a: Expr, b: Expr) -> Compare:
        key = (Compare, op, id(a), id(b))
        node = _lookup(key)
        if node is not None:
            return node  # type: ignore[no-any-return]
        if op not in COMPARE_OPS:
            raise InternalError(f"{op} is not a comparison")
        if a.dtype is not b.dtype:
            raise InternalError(f"{op.value} of mismatched dtypes {a.dtype} and {b.dtype}")
        return _store(cls, key, op=op, a=a, b=b, dtype=boolean)  # type: ignore[no-any-return]

    def children(self) -> tuple[Expr, ...]:
        return (self.a, self.b)

    def with_children(self, children: Sequence[Expr]) -> Expr:
        a, b = children
        return self if (a is self.a and b is self.b) else Compare(self.op, a, b)

    def __bool__(self) -> bool:
        # as in TVM: `a == b` used as a Python bool asks whether a and b are the same node
        if self.op is Op.EQ:
            return self.a is self.b
        if self.op is Op.NE:
            return self.a is not self.b
        return ExprOp.__bool__(self)


class Select(Expr):
    """``select(cond, a, b)``: a where cond holds, else b (both evaluated, as in TVM)."""

    __slots__ = ("cond", "a", "b")
    __match_args__ = ("cond", "a", "b")
    cond: Expr
    a: Expr
    b: Expr

    def __new__(cls, cond: Expr, a: Expr, b: Expr) -> Select:
        key = (Select, id(cond), id(a), id(b))
        node = _lookup(key)
        if node is not None:
            return node  # type: ignore[no-any-return]
        if not cond.dtype.is_bool:
            raise InternalError(f"select condition {cond} is not bool")
        if a.dtype is not b.dtype:
            raise InternalError(f"select of mismatched dtypes {a.dtype} and {b.dtype}")
        return _store(cls, key, cond=cond, a=a, b=b, dtype=a.dtype)  # type: ignore[no-any-return]

    def children(self) -> tuple[Expr, ...]:
        return (self.cond, self.a, self.b)

    def with_children(self, children: Sequence[Expr]) -> Expr:
        c, a, b = children
        if c is self.cond and a is self.a and b is self.b:
            return self
        return Select(c, a, b)


class Cast(Expr):
    """``a`` converted to ``dtype`` (float to int truncates toward zero)."""

    __slots__ = ("a",)
    __match_args__ = ("dtype", "a")
    a: Expr

    def __new__(cls, dtype: DType, a: Expr) -> Cast:
        dtype = as_dtype(dtype)
        key = (Cast, dtype.name, id(a))
        node = _lookup(key)
        return node if node is not None else _store(cls, key, a=a, dtype=dtype)

    def children(self) -> tuple[Expr, ...]:
        return (self.a,)

    def with_children(self, children: Sequence[Expr]) -> Expr:
        (a,) = children
        return self if a is self.a else Cast(self.dtype, a)


@dataclass(frozen=True, slots=True)
class Range:
    """The half-open integer interval ``[min, min + extent)``."""

    min: int
    extent: int

    @property
    def stop(self) -> int:
        return self.min + self.extent

    def __str__(self) -> str:
        return f"[{self.min}, {self.stop})"


class IterVar(ExprOp):
    """An iteration axis: a variable with its domain; ``kind`` is "axis" or "reduce".

    Usable in expressions directly (``X[i, k]``): it stands for its ``var``.
    """

    __slots__ = ("var", "dom", "__weakref__")
    var: Var
    dom: Range

    # TVM's iteration types (``Stage.iter_var_attrs``' ``iter_type``), by TVM's numbers
    DataPar = 0
    ThreadIndex = 1
    CommReduce = 2
    Ordered = 3
    DimInfo = 4
    Unrolled = 5
    Vectorized = 6
    Parallelized = 7
    Tensorized = 8

    def __init__(self, var: Var, dom: Range) -> None:
        object.__setattr__(self, "var", var)
        object.__setattr__(self, "dom", dom)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("IterVar is immutable")

    @property
    def name(self) -> str:
        return self.var.name

    @property
    def kind(self) -> str:
        return self.var.kind

    @property
    def dtype(self) -> DType:
        return self.var.dtype

    def __str__(self) -> str:
        return f"{self.var.name} in {self.dom}"

    def __repr__(self) -> str:
        kind = "reduce_axis" if self.kind == "reduce" else "axis"
        return f"IterVar({self.var.name}, {self.dom}, {kind})"


class CommReducer:
    """A commutative reducer: ``result(lhs, rhs)`` combines accumulators (lhs) with new
    values (rhs); ``identity`` is the neutral element. Tuple reducers have several of each.
    """

    __slots__ = ("name", "lhs", "rhs", "result", "identity", "__weakref__")

    def __init__(self, name: str, lhs: Sequence[Var], rhs: Sequence[Var],
                 result: Sequence[Expr], identity: Sequence[Expr]) -> None:
        n = len(lhs)
        if not (len(rhs) == len(result) == len(identity) == n) or n == 0:
            raise InternalError(f"malformed reducer {name}")
        for a, b, r, e in zip(lhs, rhs, result, identity):
            if not (a.dtype is b.dtype is r.dtype is e.dtype):
                raise InternalError(f"reducer {name}: dtypes of lhs/rhs/result/identity differ")
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "lhs", tuple(lhs))
        object.__setattr__(self, "rhs", tuple(rhs))
        object.__setattr__(self, "result", tuple(result))
        object.__setattr__(self, "identity", tuple(identity))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("CommReducer is immutable")

    @property
    def dtypes(self) -> tuple[DType, ...]:
        return tuple(v.dtype for v in self.lhs)

    def __len__(self) -> int:
        return len(self.lhs)

    def slot_combines(self, i: int, op: Op) -> bool:
        """Whether slot ``i``'s result is ``lhs op rhs`` (either order), as the built-in
        ``sum``/``max``/``min`` reducers are."""
        r = self.result[i]
        return isinstance(r, Binary) and r.op is op and \
            {id(r.a), id(r.b)} == {id(self.lhs[i]), id(self.rhs[i])}

    def is_single(self, op: Op) -> bool:
        """One slot, combining as ``lhs op rhs``: ``sum`` for ``Op.ADD``, ``max``..."""
        return len(self) == 1 and self.slot_combines(0, op)

    def __repr__(self) -> str:
        return f"CommReducer({self.name}, {'/'.join(d.name for d in self.dtypes)})"


class Reduce(Expr):
    """A reduction over ``axis`` of ``source`` (one value per reducer slot), restricted to
    the points where ``condition`` holds, starting from ``init`` (or the identity).
    A tuple reducer gives one Reduce per slot, differing only in ``value_index``.
    """

    __slots__ = ("combiner", "source", "axis", "condition", "init", "value_index")
    __match_args__ = ("combiner", "source", "axis", "condition", "init", "value_index")
    combiner: CommReducer
    source: tuple[Expr, ...]
    axis: tuple[IterVar, ...]
    condition: Expr
    init: tuple[Expr, ...]
    value_index: int

    def __new__(cls, combiner: CommReducer, source: Sequence[Expr], axis: Sequence[IterVar],
                condition: Expr, init: Sequence[Expr] = (), value_index: int = 0) -> Reduce:
        source, axis, init = tuple(source), tuple(axis), tuple(init)
        n = len(combiner)
        if len(source) != n or (init and len(init) != n) or not 0 <= value_index < n:
            raise InternalError(f"malformed Reduce over {combiner}")
        for s, d in zip(source, combiner.dtypes):
            if s.dtype is not d:
                raise InternalError(f"Reduce source {s} is {s.dtype}, reducer wants {d}")
        if not condition.dtype.is_bool:
            raise InternalError("Reduce condition is not bool")
        key = (Reduce, id(combiner), *map(id, source), "|", *map(id, axis), "|",
               id(condition), *map(id, init), value_index)
        node = _lookup(key)
        if node is not None:
            return node  # type: ignore[no-any-return]
        return _store(  # type: ignore[no-any-return]
            cls, key, combiner=combiner, source=source, axis=axis, condition=condition,
            init=init, value_index=value_index, dtype=source[value_index].dtype)

    def children(self) -> tuple[Expr, ...]:
        return (*self.source, self.condition, *self.init)

    def with_children(self, children: Sequence[Expr]) -> Expr:
        if _same(children, self.children()):
            return self
        n = len(self.source)
        return Reduce(self.combiner, children[:n], self.axis, children[n],
                      children[n + 1:], self.value_index)


# --------------------------------------------------------------------------------------
# Conversions
# --------------------------------------------------------------------------------------

def as_expr(value: Any, what: str = "value") -> Expr:
    """An expression for ``value``: Expr, IterVar, or a Python/NumPy scalar.

    Python ints become int32 (int64 when they do not fit), floats float32, bools bool.
    """
    if isinstance(value, Expr):
        return value
    if isinstance(value, IterVar):
        return value.var
    if isinstance(value, (bool, np.bool_)):
        return Const(bool(value), boolean)
    if isinstance(value, (int, np.integer)):
        v = int(value)
        if -2**31 <= v < 2**31:
            return Const(v, int32)
        if -2**63 <= v < 2**63:
            return Const(v, as_dtype("int64"))
        raise ValueError(f"{what}: integer {v} does not fit in int64")
    if isinstance(value, (float, np.floating)):
        return Const(float(value), float32)
    from .tensor import Tensor, TensorSlice  # local: tensor.py imports this module
    if isinstance(value, TensorSlice):
        raise value.partial_index_error()
    if isinstance(value, Tensor):
        raise TypeError(
            f"{what}: tensor '{value.name}' was used where a scalar expression is expected; "
            f"index it (e.g. {value.name}[i, j]) or use the topi operators on whole tensors")
    raise TypeError(f"{what}: expected a tex expression or a Python number, "
                    f"got {type(value).__name__} {value!r}")


def is_const(e: Any, value: Any = None) -> bool:
    """Whether ``e`` is a Const (with the given value, if one is given)."""
    if not isinstance(e, Const):
        return False
    if value is None:
        return True
    return bool(e.value == value)


def const_value(e: Expr) -> int | float | bool | None:
    """The Python value of a constant, or None."""
    return e.value if isinstance(e, Const) else None


# The builders that the operators above call; imported last (fold imports this module).
from . import fold  # noqa: E402
