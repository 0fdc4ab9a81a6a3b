"""Elementwise operators with NumPy broadcasting: arithmetic, comparisons, logic, unary
intrinsics, casts, selection, constant fills and ``elemwise_sum``.

Each op is one compute whose body applies a scalar builder to broadcast reads of its
operands (``T_add[i, j] = A[i, 0] + B[j]`` for shapes (3, 1) and (4,)). Operands are
tensors or scalars (Python numbers or scalar expressions). Dtypes follow the scalar IR
(``tex.ir.fold``, rules in ``tex/dtype.py``): two tensors promote, a Python scalar takes
the tensor's dtype (a Python float next to an integer tensor gives float32), integer
``divide`` truncates toward zero as in C, ``floor_divide``/``floor_mod`` round toward minus
infinity. Output tensors are named ``T_<op>``, as in TVM's topi.

The ops are built by three factories from tables (binary, unary, and the n-ary
``_broadcast`` core they share); the Python operators on tensors (``A + B``, ``-A``,
``A.astype``) are registered here with ``register_tensor_operators``.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..dtype import DType, as_dtype
from ..ir import fold
from ..ir.expr import Expr, ExprOp, Op, as_expr
from ..ir.tensor import Tensor, register_tensor_operators
from .tag import BROADCAST, ELEMWISE
from .utils import broadcast_indices, broadcast_shape, check_tensor, compute_nd, is_scalar

__all__ = [
    "abs",
    "add",
    "astype",
    "broadcast_to",
    "cast",
    "ceil",
    "clip",
    "cos",
    "divide",
    "elemwise_sum",
    "equal",
    "erf",
    "exp",
    "floor",
    "floor_divide",
    "floor_mod",
    "full",
    "full_like",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "log",
    "log2",
    "log10",
    "logical_and",
    "logical_not",
    "logical_or",
    "maximum",
    "minimum",
    "multiply",
    "negative",
    "not_equal",
    "ones_like",
    "power",
    "round",
    "rsqrt",
    "sigmoid",
    "sin",
    "sqrt",
    "subtract",
    "tan",
    "tanh",
    "trunc",
    "where",
    "zeros_like",
]

Scalar = Any  # a Python number or a scalar tex expression
Operand = Any  # a Tensor or a Scalar


def _broadcast(op: str, operands: Sequence[tuple[str, Operand]],
               fbody: Callable[..., Expr], name: str | None, tag: str = BROADCAST) -> Any:
    """One compute over the broadcast shape of the tensor operands; ``fbody`` gets one
    scalar per operand (a broadcast read of a tensor, or the scalar itself). With no tensor
    among the operands the result is the scalar expression ``fbody(*operands)``."""
    what = f"topi.{op}"
    shapes = []
    for arg, value in operands:
        if isinstance(value, Tensor):
            shapes.append(value.shape)
        elif not is_scalar(value):
            raise TypeError(f"{what}: argument '{arg}' must be a tex Tensor or a scalar "
                            f"(Python number or expression), got {type(value).__name__} "
                            f"{value!r}")
    values = [v for _, v in operands]
    if not shapes:
        return fbody(*values)
    shape = broadcast_shape(*shapes, op=what)

    def body(idx: tuple[Expr, ...]) -> Expr:
        args = [v[broadcast_indices(idx, v.shape)] if isinstance(v, Tensor) else v
                for v in values]
        try:
            return fbody(*args)
        except (TypeError, ValueError) as err:  # e.g. a scalar that does not fit the dtype
            raise type(err)(f"{what}: {err}") from None

    return compute_nd(shape, body, name or f"T_{op}", tag)


def _check_bool(op: str, operands: Sequence[tuple[str, Operand]]) -> None:
    """TypeError unless every operand is boolean (logical ops do not coerce numbers)."""
    for arg, value in operands:
        dtype = value.dtype if isinstance(value, Tensor) else as_expr(value, f"topi.{op}").dtype
        if not dtype.is_bool:
            raise TypeError(f"topi.{op}: argument '{arg}' must be boolean, got {dtype}; "
                            "compare first (e.g. topi.not_equal(x, 0))")


# -- binary ops ------------------------------------------------------------------------

def _binary(op: str, build: Callable[[Any, Any], Expr], doc: str,
            logical: bool = False) -> Callable[..., Any]:
    def fn(a: Operand, b: Operand, name: str | None = None) -> Any:
        operands = (("a", a), ("b", b))
        if logical:
            _check_bool(op, operands)
        # as TVM's topi: two tensors broadcast; a tensor with a scalar is elementwise
        tensors = isinstance(a, Tensor) + isinstance(b, Tensor)
        return _broadcast(op, operands, build, name, BROADCAST if tensors == 2 else ELEMWISE)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""{doc}, elementwise with NumPy broadcasting.

    Parameters
    ----------
    a, b : Tensor or scalar
        Tensors broadcast against each other; a Python scalar takes the tensor's dtype.
    name : str, optional
        Output name (default ``T_{op}``).

    Returns
    -------
    Tensor
        Over the broadcast shape (a scalar expression if neither operand is a tensor),
        tagged ``"broadcast"`` for two tensors, ``"elemwise"`` for a tensor and a scalar.

    Raises
    ------
    TypeError
        An operand is neither a tensor nor a scalar{"; an operand is not boolean" if logical
                                                    else ""}.
    ValueError
        The shapes do not broadcast.
    """
    return fn


def _binop(op: Op) -> Callable[[Any, Any], Expr]:
    return lambda a, b: fold.binary(op, a, b)


def _cmpop(op: Op) -> Callable[[Any, Any], Expr]:
    return lambda a, b: fold.compare(op, a, b)


add = _binary("add", _binop(Op.ADD), "``a + b``")
subtract = _binary("subtract", _binop(Op.SUB), "``a - b``")
multiply = _binary("multiply", _binop(Op.MUL), "``a * b``")
divide = _binary("divide", _binop(Op.DIV), "``a / b`` (truncating on integers, as in C)")
floor_divide = _binary("floor_divide", _binop(Op.FLOORDIV), "``a // b`` (rounds down)")
floor_mod = _binary("floor_mod", _binop(Op.FLOORMOD), "``a % b`` (sign of ``b``)")
power = _binary("power", _binop(Op.POW), "``a ** b``")
maximum = _binary("maximum", _binop(Op.MAX), "``max(a, b)``")
minimum = _binary("minimum", _binop(Op.MIN), "``min(a, b)``")
equal = _binary("equal", _cmpop(Op.EQ), "``a == b`` (bool result)")
not_equal = _binary("not_equal", _cmpop(Op.NE), "``a != b`` (bool result)")
less = _binary("less", _cmpop(Op.LT), "``a < b`` (bool result)")
less_equal = _binary("less_equal", _cmpop(Op.LE), "``a <= b`` (bool result)")
greater = _binary("greater", _cmpop(Op.GT), "``a > b`` (bool result)")
greater_equal = _binary("greater_equal", _cmpop(Op.GE), "``a >= b`` (bool result)")
logical_and = _binary("logical_and", _binop(Op.AND), "``a and b`` on booleans", logical=True)
logical_or = _binary("logical_or", _binop(Op.OR), "``a or b`` on booleans", logical=True)


# -- unary ops -------------------------------------------------------------------------

def _unary(op: str, build: Callable[[Expr], Expr], doc: str,
           check: Callable[[Tensor], None] | None = None) -> Callable[..., Tensor]:
    def fn(x: Tensor, name: str | None = None) -> Tensor:
        check_tensor(x, f"topi.{op}")
        if check is not None:
            check(x)
        return compute_nd(x.shape, lambda idx: build(x[idx]), name or f"T_{op}",
                          ELEMWISE)

    fn.__name__ = fn.__qualname__ = op
    fn.__doc__ = f"""{doc}, elementwise.

    Parameters
    ----------
    x : Tensor
    name : str, optional
        Output name (default ``T_{op}``).

    Returns
    -------
    Tensor
        Same shape as ``x``; integer inputs of transcendental functions give float32.
    """
    return fn


def _unop(op: Op) -> Callable[[Expr], Expr]:
    return lambda a: fold.unary(op, a)


def _require_bool(x: Tensor) -> None:
    _check_bool("logical_not", (("x", x),))


negative = _unary("negative", _unop(Op.NEG), "``-x``")
logical_not = _unary("logical_not", _unop(Op.NOT), "``not x`` on booleans", _require_bool)
exp = _unary("exp", _unop(Op.EXP), "``e ** x``")
log = _unary("log", _unop(Op.LOG), "Natural logarithm")
log2 = _unary("log2", _unop(Op.LOG2), "Base-2 logarithm")
log10 = _unary("log10", _unop(Op.LOG10), "Base-10 logarithm")
sqrt = _unary("sqrt", _unop(Op.SQRT), "Square root")
rsqrt = _unary("rsqrt", _unop(Op.RSQRT), "``1 / sqrt(x)``")
sin = _unary("sin", _unop(Op.SIN), "Sine")
cos = _unary("cos", _unop(Op.COS), "Cosine")
tan = _unary("tan", _unop(Op.TAN), "Tangent")
tanh = _unary("tanh", _unop(Op.TANH), "Hyperbolic tangent")
sigmoid = _unary("sigmoid", _unop(Op.SIGMOID), "``1 / (1 + exp(-x))``")
erf = _unary("erf", _unop(Op.ERF), "The error function")
abs = _unary("abs", _unop(Op.ABS), "Absolute value")
floor = _unary("floor", _unop(Op.FLOOR), "Round down (identity on integers)")
ceil = _unary("ceil", _unop(Op.CEIL), "Round up (identity on integers)")
round = _unary("round", _unop(Op.ROUND),
               "Round to nearest, ties to even (identity on integers)")
trunc = _unary("trunc", _unop(Op.TRUNC), "Round toward zero (identity on integers)")


def cast(x: Tensor, dtype: Any, name: str | None = None) -> Tensor:
    """``x`` converted elementwise to ``dtype`` (float to integer truncates toward zero;
    to bool means ``!= 0``).

    Parameters
    ----------
    x : Tensor
    dtype : str or dtype
    name : str, optional
        Output name (default ``T_cast``).

    Returns
    -------
    Tensor

    Raises
    ------
    TypeError
        ``x`` is not a tensor or ``dtype`` is not a dtype.
    ValueError
        ``dtype`` is an unknown dtype name.
    """
    check_tensor(x, "topi.cast")
    d = as_dtype(dtype, "topi.cast: dtype")
    return compute_nd(x.shape, lambda idx: fold.cast(d, x[idx]), name or "T_cast", ELEMWISE)


astype = cast


def where(condition: Operand, x: Operand, y: Operand, name: str | None = None) -> Any:
    """``x`` where ``condition`` holds, else ``y``; the three broadcast (``numpy.where``).

    Parameters
    ----------
    condition : Tensor or scalar
        Boolean; a numeric condition means ``condition != 0``, as in NumPy and TVM.
    x, y : Tensor or scalar
        The branches, promoted to a common dtype.
    name : str, optional
        Output name (default ``T_where``).

    Returns
    -------
    Tensor
        Over the broadcast shape of the three operands.

    Raises
    ------
    TypeError, ValueError
        As for the binary ops.
    """
    def body(c: Any, a: Any, b: Any) -> Expr:
        c = as_expr(c, "topi.where: condition")
        if not c.dtype.is_bool:
            c = fold.compare(Op.NE, c, 0)
        return fold.select(c, a, b)

    return _broadcast("where", (("condition", condition), ("x", x), ("y", y)), body, name)


def clip(x: Tensor, a_min: Operand, a_max: Operand, name: str | None = None) -> Tensor:
    """``min(max(x, a_min), a_max)`` elementwise (bounds broadcast, as ``numpy.clip``).

    Parameters
    ----------
    x : Tensor
    a_min, a_max : scalar or Tensor
        Bounds; Python scalars take the dtype of ``x``.
    name : str, optional
        Output name (default ``T_clip``).

    Returns
    -------
    Tensor
    """
    check_tensor(x, "topi.clip")

    def body(v: Any, lo: Any, hi: Any) -> Expr:
        return fold.binary(Op.MIN, fold.binary(Op.MAX, v, lo), hi)

    return _broadcast("clip", (("x", x), ("a_min", a_min), ("a_max", a_max)),
                      body, name, ELEMWISE)


def elemwise_sum(xs: Sequence[Tensor], name: str = "T_elemwise_sum") -> Tensor:
    """The sum of tensors of one shape, elementwise (TVM's ``topi.elemwise_sum``).

    ``out[idx] = xs[0][idx] + xs[1][idx] + ...`` in one compute (no intermediate tensors),
    tagged ``"elemwise"``; dtypes promote as for ``add``.

    Parameters
    ----------
    xs : list or tuple of Tensor
        At least one tensor; all of the same shape (no broadcasting, as in TVM).
    name : str
        Output name.

    Returns
    -------
    Tensor

    Raises
    ------
    TypeError
        ``xs`` is not a list or tuple of tensors.
    ValueError
        ``xs`` is empty or the shapes differ.

    Example
    -------
    >>> A, B = tex.placeholder((2, 3), name="A"), tex.placeholder((2, 3), name="B")
    >>> print(topi.elemwise_sum([A, B, A]))
    T_elemwise_sum[i, j] = A[i, j] + B[i, j] + A[i, j]
    """
    op = "topi.elemwise_sum"
    if not isinstance(xs, (list, tuple)):
        raise TypeError(f"{op}: xs must be a list or tuple of Tensors, got "
                        f"{type(xs).__name__} {xs!r}")
    if not xs:
        raise ValueError(f"{op}: xs is empty; give at least one tensor")
    for i, x in enumerate(xs):
        check_tensor(x, op, f"xs[{i}]")
        if x.shape != xs[0].shape:
            raise ValueError(f"{op}: xs[{i}] '{x.name}' has shape {x.shape} but xs[0] "
                             f"'{xs[0].name}' has {xs[0].shape}; elemwise_sum does not "
                             "broadcast (use topi.add)")

    def body(idx: tuple[Expr, ...]) -> Expr:
        total: Expr = xs[0][idx]
        for x in xs[1:]:
            total = fold.binary(Op.ADD, total, x[idx])
        return total

    return compute_nd(xs[0].shape, body, name, ELEMWISE)


def _fill_value(value: Scalar, dtype: DType, op: str) -> Expr:
    """``value`` as a constant (or scalar expression) of ``dtype``."""
    if isinstance(value, Tensor) or not is_scalar(value):
        raise TypeError(f"topi.{op}: fill_value must be a Python number or a scalar "
                        f"expression, got {type(value).__name__} {value!r}")
    if isinstance(value, ExprOp):
        return fold.cast(dtype, value)
    try:
        return te.const(value, dtype)
    except ValueError as err:
        raise ValueError(f"topi.{op}: fill_value {value!r} does not fit {dtype}: {err}") \
            from None


def full(shape: Sequence[int], dtype: Any, fill_value: Scalar, name: str | None = None
         ) -> Tensor:
    """A tensor of ``shape`` filled with ``fill_value`` (TVM's ``topi.full``).

    Parameters
    ----------
    shape : tuple of int
        ``()`` makes a 0-d tensor.
    dtype : str or dtype
    fill_value : scalar
        A Python number (must be representable in ``dtype``) or a scalar expression.
    name : str, optional
        Output name (default ``T_full``).

    Returns
    -------
    Tensor
    """
    shape = te.check_shape(shape, "topi.full")
    d = as_dtype(dtype, "topi.full: dtype")
    value = _fill_value(fill_value, d, "full")
    return compute_nd(shape, lambda idx: value, name or "T_full", ELEMWISE)


def full_like(x: Tensor, fill_value: Scalar, name: str | None = None) -> Tensor:
    """A tensor with the shape and dtype of ``x``, filled with ``fill_value``."""
    check_tensor(x, "topi.full_like")
    return full(x.shape, x.dtype, fill_value, name or "T_full_like")


def zeros_like(x: Tensor, name: str | None = None) -> Tensor:
    """Zeros with the shape and dtype of ``x``."""
    check_tensor(x, "topi.zeros_like")
    return full(x.shape, x.dtype, 0, name or "T_zeros_like")


def ones_like(x: Tensor, name: str | None = None) -> Tensor:
    """Ones with the shape and dtype of ``x``."""
    check_tensor(x, "topi.ones_like")
    return full(x.shape, x.dtype, 1, name or "T_ones_like")


def broadcast_to(x: Tensor, shape: Sequence[int], name: str | None = None) -> Tensor:
    """``x`` broadcast to ``shape`` (``numpy.broadcast_to``).

    Parameters
    ----------
    x : Tensor
    shape : tuple of int
        The target; ``x``'s shape must broadcast to exactly this shape.
    name : str, optional
        Output name (default ``T_broadcast_to``).

    Returns
    -------
    Tensor

    Raises
    ------
    ValueError
        ``x.shape`` does not broadcast to ``shape``.
    """
    check_tensor(x, "topi.broadcast_to")
    shape = te.check_shape(shape, "topi.broadcast_to")
    if len(x.shape) > len(shape) or broadcast_shape(
            x.shape, shape, op="topi.broadcast_to") != shape:
        raise ValueError(f"topi.broadcast_to: cannot broadcast shape {x.shape} of "
                         f"'{x.name}' to {shape}")
    return compute_nd(shape, lambda idx: x[broadcast_indices(idx, x.shape)],
                      name or "T_broadcast_to", BROADCAST)


register_tensor_operators({
    "add": add, "subtract": subtract, "multiply": multiply, "divide": divide,
    "floor_divide": floor_divide, "floor_mod": floor_mod, "power": power,
    "negative": negative, "astype": astype,
})
