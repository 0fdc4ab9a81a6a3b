"""The core operator library (tex.topi broadcast / reduce / transform) against NumPy.

One spec table: every case names the op, builds it from placeholders, gives the NumPy
reference and the inputs (shape, dtype, sampler). One parametrized test evaluates each
case with the reference interpreter ``tex.testing.evaluate`` and compares: floats to
rtol 1e-5 (float32), integers and bools exactly, and the result dtype always.
"""
from __future__ import annotations

import itertools
import zlib
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np
import pytest

import tex
import tex.testing
from tex import topi
from tex.ir import Op, Select, post_order
from tex.ir.expr import Binary, Reduce

# -- input samplers (domains) -----------------------------------------------------------

SAMPLERS: dict[str, Callable[[np.random.Generator, tuple[int, ...]], np.ndarray]] = {
    "normal": lambda rng, s: rng.standard_normal(s),
    "positive": lambda rng, s: rng.uniform(0.5, 3.0, s),
    "near_one": lambda rng, s: rng.uniform(0.7, 1.3, s),
    "unit": lambda rng, s: rng.uniform(-0.9, 0.9, s),
    # away from the jumps of floor/ceil/round/trunc
    "off_grid": lambda rng, s: rng.integers(-5, 5, s) + rng.uniform(0.1, 0.4, s)
    * rng.choice([-1, 1], s),
    "int": lambda rng, s: rng.integers(-6, 7, s),
    "small_int": lambda rng, s: rng.integers(0, 3, s),  # many ties
    "nonzero_int": lambda rng, s: rng.choice([-4, -3, -2, -1, 1, 2, 3, 5], s),
    "bool": lambda rng, s: rng.random(s) < 0.5,
    "index": lambda rng, s: rng.integers(-2, 9, s),  # some out of range for take
}


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]
    dtype: str = "float32"
    sampler: str = "normal"


@dataclass
class Case:
    """build(*placeholders) -> Tensor; ref(*arrays) -> ndarray; dtype: expected result dtype
    (default: the reference's)."""

    id: str
    build: Callable[..., Any]
    ref: Callable[..., Any]
    inputs: list[Input]
    dtype: str | None = None
    rtol: float = 1e-5
    atol: float = 1e-6


CASES: list[Case] = []


def case(id: str, build: Callable[..., Any], ref: Callable[..., Any], *inputs: Input,
         **kw: Any) -> None:
    CASES.append(Case(id, build, ref, list(inputs), **kw))


def _sample(inp: Input, rng: np.random.Generator) -> np.ndarray:
    return np.asarray(SAMPLERS[inp.sampler](rng, inp.shape)).astype(inp.dtype)


# -- unary ops ---------------------------------------------------------------------------

UNARY = [  # op, reference, sampler
    ("negative", np.negative, "normal"),
    ("exp", np.exp, "normal"),
    ("log", np.log, "positive"),
    ("log2", np.log2, "positive"),
    ("log10", np.log10, "positive"),
    ("sqrt", np.sqrt, "positive"),
    ("rsqrt", lambda a: 1 / np.sqrt(a), "positive"),
    ("sin", np.sin, "normal"),
    ("cos", np.cos, "normal"),
    ("tan", np.tan, "unit"),
    ("tanh", np.tanh, "normal"),
    ("sigmoid", lambda a: 1 / (1 + np.exp(-a)), "normal"),
    ("erf", np.vectorize(__import__("math").erf, otypes=[np.float64]), "normal"),
    ("abs", np.abs, "normal"),
    ("floor", np.floor, "off_grid"),
    ("ceil", np.ceil, "off_grid"),
    ("round", np.round, "off_grid"),
    ("trunc", np.trunc, "off_grid"),
]
UNARY_SHAPES = [(), (5,), (2, 3, 4)]

for _op, _ref, _smp in UNARY:
    for _shape in UNARY_SHAPES:
        case(f"{_op}-{_shape}", getattr(topi, _op), _ref, Input(_shape, "float32", _smp),
             dtype="float32")
    case(f"{_op}-float64", getattr(topi, _op), _ref, Input((3, 2), "float64", _smp))
# integer inputs: exact for negative/abs/floor..., float32 for the transcendental ones
for _op, _ref in [("negative", np.negative), ("abs", np.abs), ("floor", np.floor),
                  ("round", np.round)]:
    case(f"{_op}-int32", getattr(topi, _op), _ref, Input((4, 3), "int32", "int"),
         dtype="int32")
case("exp-int32", topi.exp, np.exp, Input((4,), "int32", "int"), dtype="float32")
case("sqrt-int8", topi.sqrt, lambda a: np.sqrt(a.astype(np.float32)),
         Input((4,), "int8", "small_int"), dtype="float32")
case("logical_not", topi.logical_not, np.logical_not, Input((3, 4), "bool", "bool"))

# -- binary ops --------------------------------------------------------------------------

BINARY = [  # op, reference, samplers (a, b), dtypes
    ("add", np.add, ("normal", "normal"), ("float32", "int32")),
    ("subtract", np.subtract, ("normal", "normal"), ("float32", "int32")),
    ("multiply", np.multiply, ("normal", "normal"), ("float32", "int32")),
    ("divide", np.divide, ("normal", "positive"), ("float32",)),
    ("floor_divide", lambda a, b: np.floor(a / b), ("normal", "positive"), ("float32",)),
    ("floor_divide", np.floor_divide, ("int", "nonzero_int"), ("int32",)),
    ("floor_mod", np.mod, ("normal", "positive"), ("float32",)),
    ("floor_mod", np.mod, ("int", "nonzero_int"), ("int32",)),
    ("power", np.power, ("positive", "normal"), ("float32",)),
    ("maximum", np.maximum, ("small_int", "small_int"), ("float32", "int32")),
    ("minimum", np.minimum, ("small_int", "small_int"), ("float32", "int32")),
    ("equal", np.equal, ("small_int", "small_int"), ("float32", "int32")),
    ("not_equal", np.not_equal, ("small_int", "small_int"), ("float32", "int32")),
    ("less", np.less, ("small_int", "small_int"), ("float32", "int32")),
    ("less_equal", np.less_equal, ("small_int", "small_int"), ("float32", "int32")),
    ("greater", np.greater, ("small_int", "small_int"), ("float32", "int32")),
    ("greater_equal", np.greater_equal, ("small_int", "small_int"), ("float32", "int32")),
    ("logical_and", np.logical_and, ("bool", "bool"), ("bool",)),
    ("logical_or", np.logical_or, ("bool", "bool"), ("bool",)),
]
BINARY_SHAPES = [((3, 4), (3, 4)), ((3, 1, 4), (2, 1)), ((2, 1), (1, 3)), ((), (2, 3)),
                 ((4,), ()), ((), ())]

for (_op, _ref, (_sa, _sb), _dtypes), (_shape_a, _shape_b), _dt in itertools.product(
        BINARY, BINARY_SHAPES, ("float32", "int32", "bool")):
    if _dt in _dtypes:
        case(f"{_op}-{_dt}-{_shape_a}-{_shape_b}", getattr(topi, _op), _ref,
             Input(_shape_a, _dt, _sa), Input(_shape_b, _dt, _sb))

# the integer divide truncates toward zero, as in C
case("divide-int32-trunc", topi.divide, lambda a, b: np.trunc(a / b).astype(np.int32),
     Input((3, 4), "int32", "int"), Input((4,), "int32", "nonzero_int"))
# two tensors promote per tex/dtype.py (float next to int takes the float, as TVM)
for _da, _db, _out in [("float32", "float64", "float64"), ("int8", "uint8", "int16"),
                       ("int32", "float16", "float16"), ("bool", "int32", "int32"),
                       ("int32", "int64", "int64")]:
    case(f"add-promote-{_da}-{_db}", topi.add, lambda a, b: np.add(a, b),
         Input((2, 3), _da, "small_int"), Input((3,), _db, "small_int"), dtype=_out)
case("less-promote-int32-float32", topi.less, np.less, Input((2, 3), "int32", "int"),
     Input((2, 1), "float32", "normal"))

# Python scalars take the tensor's dtype (a float next to an int tensor gives float32)
SCALAR = [  # id, build, reference, input, expected dtype
    ("add-2.0", lambda a: topi.add(a, 2.0), lambda a: a + 2.0, "float32", "float32"),
    ("2.0-subtract", lambda a: topi.subtract(2.0, a), lambda a: 2.0 - a, "float32",
     "float32"),
    ("multiply-int-3", lambda a: topi.multiply(a, 3), lambda a: a * 3, "int32", "int32"),
    ("multiply-int-2.5", lambda a: topi.multiply(a, 2.5), lambda a: a * 2.5, "int32",
     "float32"),
    ("float64-divide-3", lambda a: topi.divide(a, 3), lambda a: a / 3, "float64", "float64"),
    ("power-2", lambda a: topi.power(a, 2), lambda a: a ** 2, "float32", "float32"),
    ("2-power", lambda a: topi.power(2.0, a), lambda a: 2.0 ** a, "float32", "float32"),
    ("maximum-0", lambda a: topi.maximum(a, 0.0), lambda a: np.maximum(a, 0), "float32",
     "float32"),
    ("greater-0", lambda a: topi.greater(a, 0), lambda a: a > 0, "int32", "bool"),
    ("equal-1", lambda a: topi.equal(1, a), lambda a: a == 1, "int32", "bool"),
    ("add-const-float64", lambda a: topi.add(a, tex.const(1.5, "float64")),
     lambda a: a + 1.5, "float32", "float64"),
    ("logical_or-True", lambda a: topi.logical_or(a, True), lambda a: a | True, "bool",
     "bool"),
]
for _id, _build, _ref, _dt, _out in SCALAR:
    for _shape in [(), (3, 4)]:
        case(f"scalar-{_id}-{_shape}", _build, _ref,
             Input(_shape, _dt, "bool" if _dt == "bool" else "small_int"), dtype=_out)

# -- cast, where, clip, fills, broadcast_to ----------------------------------------------

for _src, _dst in [("float32", "float64"), ("float32", "int32"), ("int32", "float32"),
                   ("int32", "bool"), ("bool", "float32"), ("float64", "float16")]:
    case(f"cast-{_src}-{_dst}", lambda a, d=_dst: topi.cast(a, d),
         lambda a, d=_dst: (a != 0) if d == "bool" else np.trunc(a).astype(d)
         if np.dtype(d).kind == "i" else a.astype(d),
         Input((3, 4), _src, "bool" if _src == "bool" else "off_grid"), dtype=_dst)
case("astype", lambda a: topi.astype(a, "float64"), lambda a: a.astype(np.float64),
     Input((2,), "float32"))
case("where-broadcast", topi.where, np.where, Input((3, 1), "bool", "bool"),
     Input((1, 4)), Input((4,)))
case("where-scalars", lambda c: topi.where(c, 1.0, -1.0),
     lambda c: np.where(c, 1.0, -1.0).astype(np.float32), Input((2, 3), "bool", "bool"))
case("where-numeric-cond", topi.where, lambda c, a, b: np.where(c != 0, a, b),
     Input((5,), "int32", "small_int"), Input((5,)), Input(()))
case("clip-scalars", lambda a: topi.clip(a, -0.5, 0.5),
     lambda a: np.clip(a, -0.5, 0.5), Input((3, 4)))
case("clip-int", lambda a: topi.clip(a, -2, 3), lambda a: np.clip(a, -2, 3),
     Input((6,), "int32", "int"))
case("clip-tensor-bounds", topi.clip, np.clip, Input((3, 4)), Input((4,), "float32", "unit"),
     Input((3, 1), "float32", "positive"))
case("full", lambda: topi.full((2, 3), "int32", 7), lambda: np.full((2, 3), 7, np.int32))
case("full-0d", lambda: topi.full((), "float64", 0.25), lambda: np.array(0.25))
case("full_like", lambda a: topi.full_like(a, 1.5), lambda a: np.full_like(a, 1.5),
     Input((2, 2)))
case("zeros_like", topi.zeros_like, np.zeros_like, Input((3,), "int32", "int"))
case("ones_like", topi.ones_like, np.ones_like, Input((2, 1, 2), "float64"))
for _from, _to in [((3, 1), (2, 3, 4)), ((), (2, 2)), ((4,), (3, 4)), ((2, 3), (2, 3))]:
    case(f"broadcast_to-{_from}-{_to}", lambda a, t=_to: topi.broadcast_to(a, t),
         lambda a, t=_to: np.broadcast_to(a, t), Input(_from))

# -- reductions --------------------------------------------------------------------------


def _np_arg(fn: Callable[..., Any]) -> Callable[..., Any]:
    """NumPy's argmax/argmin extended to a tuple of axes: the row-major position within
    the reduced axes."""
    def ref(a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
        axes = tuple(range(a.ndim)) if axis is None else \
            tuple(sorted(d % a.ndim for d in (axis if isinstance(axis, tuple) else (axis,))))
        if not axes:
            return np.zeros(a.shape, np.int32)
        kept = [d for d in range(a.ndim) if d not in axes]
        moved = np.transpose(a, kept + list(axes)).reshape([a.shape[d] for d in kept] + [-1])
        out = fn(moved, axis=-1).astype(np.int32)
        if keepdims:
            out = out.reshape([1 if d in axes else a.shape[d] for d in range(a.ndim)])
        return out
    return ref


def _np_logsumexp(a: np.ndarray, axis: Any, keepdims: bool) -> np.ndarray:
    a = a.astype(np.float64)
    m = np.max(a, axis=axis, keepdims=True)
    out = np.log(np.sum(np.exp(a - m), axis=axis, keepdims=True)) + m
    return out if keepdims else np.squeeze(out, axis=axis if axis is not None else None)


REDUCTIONS = [  # op, reference(a, axis, keepdims), sampler, input dtypes, out dtype
    ("sum", np.sum, "normal", ("float32", "int32"), None),
    ("prod", np.prod, "near_one", ("float32",), None),
    ("max", np.max, "small_int", ("float32", "int32"), None),
    ("min", np.min, "small_int", ("float32", "int32"), None),
    ("mean", np.mean, "normal", ("float32", "int32"), "float32"),
    ("all", np.all, "bool", ("bool",), "bool"),
    ("any", np.any, "bool", ("bool",), "bool"),
    ("argmax", _np_arg(np.argmax), "small_int", ("float32", "int32"), "int32"),
    ("argmin", _np_arg(np.argmin), "small_int", ("float32", "int32"), "int32"),
    ("logsumexp", _np_logsumexp, "normal", ("float32",), "float32"),
]
REDUCE_AXES = [None, 0, 1, -1, (0, 2), (), (2, 0, 1)]

for (_op, _ref, _smp, _dts, _out), _axis, _keep in itertools.product(
        REDUCTIONS, REDUCE_AXES, (False, True)):
    for _dt in _dts:
        case(f"{_op}-{_dt}-axis{_axis}-keep{_keep}",
             lambda a, o=_op, x=_axis, k=_keep: getattr(topi, o)(a, axis=x, keepdims=k),
             lambda a, f=_ref, x=_axis, k=_keep: np.asarray(f(a, axis=x, keepdims=k)),
             Input((2, 3, 4), _dt, _smp), dtype=_out or _dt)
for (_op, _ref, _smp, _dts, _out), _shape in itertools.product(REDUCTIONS, [(), (5,)]):
    case(f"{_op}-{_shape}", lambda a, o=_op: getattr(topi, o)(a),
         lambda a, f=_ref: np.asarray(f(a, axis=None, keepdims=False)),
         Input(_shape, _dts[0], _smp), dtype=_out or _dts[0])
case("sum-bool-counts", topi.sum, lambda a: np.sum(a).astype(np.int32),
     Input((3, 4), "bool", "bool"), dtype="int32")
case("mean-float64", lambda a: topi.mean(a, axis=0), lambda a: np.mean(a, axis=0),
     Input((4, 2), "float64"))
case("logsumexp-stable", lambda a: topi.logsumexp(a, axis=1),
     lambda a: _np_logsumexp(a, 1, False), Input((2, 5), "float32", "normal"),
     dtype="float32")
case("logsumexp-int", lambda a: topi.logsumexp(a, axis=0),
     lambda a: _np_logsumexp(a, 0, False), Input((3, 2), "int32", "int"), dtype="float32")
case("argmax-first-of-ties", lambda a: topi.argmax(a, axis=1),
     lambda a: np.argmax(a, axis=1).astype(np.int32), Input((4, 6), "int32", "small_int"))
case("argmin-bool", lambda a: topi.argmin(a, axis=0),
     lambda a: np.argmin(a, axis=0).astype(np.int32), Input((5, 3), "bool", "bool"))

# -- shape transforms --------------------------------------------------------------------

for _from, _to in [((2, 3, 4), (6, 4)), ((2, 3, 4), (4, -1)), ((6,), (2, 3)), ((2, 3), (6,)),
                   ((1,), ()), ((), (1, 1)), ((2, 6), (3, 2, 2)), ((12,), (-1,))]:
    case(f"reshape-{_from}-{_to}", lambda a, t=_to: topi.reshape(a, t),
         lambda a, t=_to: a.reshape(t), Input(_from))
case("reshape-int-newshape", lambda a: topi.reshape(a, 6), lambda a: a.reshape(6),
     Input((3, 2), "int32", "int"))
for _shape, _axes in [((2, 3), None), ((2, 3, 4), (1, 0, 2)), ((2, 3, 4), (-1, 0, 1)),
                      ((5,), None), ((), None)]:
    case(f"transpose-{_shape}-{_axes}", lambda a, x=_axes: topi.transpose(a, x),
         lambda a, x=_axes: np.transpose(a, x), Input(_shape))
for _shape, _axis, _n in [((2, 3), 0, 1), ((2, 3), 2, 1), ((2, 3), -1, 1), ((2, 3), 1, 2),
                          ((), 0, 1), ((4,), -2, 3)]:
    case(f"expand_dims-{_shape}-{_axis}-{_n}",
         lambda a, x=_axis, n=_n: topi.expand_dims(a, x, n),
         lambda a, x=_axis, n=_n: np.expand_dims(a, tuple(
             (x % (a.ndim + 1)) + d for d in range(n))) if n else a, Input(_shape))
for _shape, _axis in [((1, 3, 1), None), ((1, 3, 1), 0), ((1, 3, 1), (0, -1)), ((1,), None),
                      ((2, 3), None)]:
    case(f"squeeze-{_shape}-{_axis}", lambda a, x=_axis: topi.squeeze(a, x),
         lambda a, x=_axis: np.squeeze(a, x), Input(_shape))
for _shapes, _axis in [([(2, 3), (4, 3)], 0), ([(2, 3), (2, 1), (2, 2)], 1), ([(3,)], 0),
                       ([(2, 2, 1), (2, 2, 3)], -1), ([(1,), (2,), (1,), (3,)], 0)]:
    case(f"concatenate-{_shapes}-{_axis}",
         lambda *ts, x=_axis: topi.concatenate(list(ts), axis=x),
         lambda *arrs, x=_axis: np.concatenate(arrs, axis=x), *(Input(s) for s in _shapes))
case("concatenate-promotes", lambda a, b: topi.concatenate((a, b), axis=0),
     lambda a, b: np.concatenate([a.astype(np.float32), b]), Input((2,), "int32", "int"),
     Input((3,), "float32"), dtype="float32")
for _shape, _axis in [((2, 3), 0), ((2, 3), 1), ((2, 3), -1), ((), 0), ((4,), -2)]:
    case(f"stack-{_shape}-{_axis}", lambda a, b, c, x=_axis: topi.stack([a, b, c], axis=x),
         lambda a, b, c, x=_axis: np.stack([a, b, c], axis=x), *[Input(_shape)] * 3)
for _shape, _axis in [((4, 3), 0), ((4, 3), 1), ((4, 3), None), ((2, 3, 4), (0, 2)),
                      ((5,), -1)]:
    case(f"flip-{_shape}-{_axis}", lambda a, x=_axis: topi.flip(a, x),
         lambda a, x=_axis: np.flip(a, x), Input(_shape))
for _shape, _sections, _axis in [((6, 2), 3, 0), ((2, 6), [1, 4], 1), ((2, 6), 1, -1),
                                 ((5,), [2], 0)]:
    for _piece in range(_sections if isinstance(_sections, int) else len(_sections) + 1):
        case(f"split-{_shape}-{_sections}-{_axis}-piece{_piece}",
             lambda a, s=_sections, x=_axis, p=_piece: topi.split(a, s, axis=x)[p],
             lambda a, s=_sections, x=_axis, p=_piece: np.split(a, s, axis=x)[p],
             Input(_shape))
for _a, _ind, _axis in [((3, 4), (5,), None), ((3, 4), (2, 2), 1), ((3, 4), (5,), 0),
                        ((2, 3, 4), (2,), -1), ((6,), (), 0), ((2, 3), (4, 1), None)]:
    case(f"take-clip-{_a}-{_ind}-{_axis}",
         lambda a, i, x=_axis: topi.take(a, i, axis=x),
         lambda a, i, x=_axis: np.take(a, i, axis=x, mode="clip"),
         Input(_a), Input(_ind, "int32", "index"))
case("take-wrap", lambda a, i: topi.take(a, i, axis=1, mode="wrap"),
     lambda a, i: np.take(a, i, axis=1, mode="wrap"), Input((2, 5)),
     Input((3,), "int32", "index"))
case("take-int64-indices", lambda a, i: topi.take(a, i, axis=0),
     lambda a, i: np.take(a, i, axis=0, mode="clip"), Input((4, 2)),
     Input((3,), "int64", "index"))
case("take-uint8-indices", lambda a, i: topi.take(a, i), lambda a, i: np.take(a, i, mode="clip"),
     Input((300,)), Input((3,), "uint8", "index"))
case("take-scalar-index", lambda a: topi.take(a, 2, axis=1), lambda a: np.take(a, 2, axis=1),
     Input((3, 4)))

# -- contractions ------------------------------------------------------------------------

for _sa, _sb, _axes in [((2, 3, 4), (3, 4, 5), 2), ((2, 3), (3, 4), 1), ((2,), (3,), 0),
                        ((3, 2, 4), (2, 3, 5), ([1, 0], [0, 1])), ((2, 3), (4, 2), ([0], [1])),
                        ((3, 4), (3, 4), 2)]:
    case(f"tensordot-{_sa}-{_sb}-{_axes}", lambda a, b, x=_axes: topi.tensordot(a, b, x),
         lambda a, b, x=_axes: np.tensordot(a, b, x), Input(_sa), Input(_sb), rtol=1e-4)
for _sa, _sb in [((3, 4), (4, 5)), ((4,), (4, 5)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 5)), ((2, 3, 4), (2, 4, 5)), ((2, 1, 3, 4), (5, 4, 2)),
                 ((4,), (2, 4, 3)), ((2, 3, 4), (4,))]:
    case(f"matmul-{_sa}-{_sb}", topi.matmul, np.matmul, Input(_sa), Input(_sb), rtol=1e-4)
case("matmul-int", topi.matmul, np.matmul, Input((2, 3), "int32", "int"),
     Input((3, 2), "int32", "int"))
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 4)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("i,i->", [(4,), (4,)]),
    ("i,i", [(4,), (4,)]), ("ij->ji", [(2, 3)]), ("ij,kj", [(2, 3), (4, 3)]),
    ("i,j->ij", [(2,), (3,)]), ("iij->j", [(2, 2, 3)]), ("bii->b", [(2, 3, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]), ("ba", [(2, 3)]),
    (" ij , jk -> ik ", [(2, 3), (3, 4)]),
    # '...' broadcast dimensions, extent-1 dimensions broadcasting as in NumPy
    ("...ij,...jk->...ik", [(2, 3, 4), (2, 4, 5)]), ("...ij,jk", [(2, 3, 4), (4, 5)]),
    ("i...->...", [(3, 2, 5)]), ("...j,...j->...", [(3, 1, 4), (2, 4)]),
    ("ij...,jk", [(3, 4, 6), (4, 5)]), ("...,...", [(2, 3), (3,)]),
    ("...ii->...i", [(2, 3, 3)]), ("...ij, ...jk -> ...ik", [(2, 1, 3, 4), (5, 4, 2)]),
]
for _spec, _shapes in EINSUM:
    case(f"einsum-{_spec!r}", lambda *ts, s=_spec: topi.einsum(s, *ts),
         lambda *arrs, s=_spec: np.einsum(s, *arrs), *(Input(x) for x in _shapes), rtol=1e-4)

# -- Python operators on tensors ---------------------------------------------------------

OPERATORS = [  # id, tex expression, NumPy reference (same when None)
    ("A+B", lambda a, b: a + b, None), ("A-B", lambda a, b: a - b, None),
    ("A*B", lambda a, b: a * b, None), ("A/B", lambda a, b: a / b, None),
    ("A//B", lambda a, b: a // b, lambda a, b: np.floor(a / b)),
    ("A%B", lambda a, b: a % b, None), ("A**B", lambda a, b: a ** b, None),
    ("A*2.0", lambda a, b: a * 2.0, None), ("2.0-A", lambda a, b: 2.0 - a, None),
    ("2.0/B", lambda a, b: 2.0 / b, None), ("2.0**A", lambda a, b: 2.0 ** a, None),
    ("-A", lambda a, b: -a, None),
]
for _id, _fn, _ref in OPERATORS:
    case(f"operator-{_id}", _fn, _ref or _fn, Input((3, 4), "float32", "positive"),
         Input((4,), "float32", "positive"))
case("operator-matmul", lambda a, b: a @ b, lambda a, b: a @ b, Input((3, 4)), Input((4, 2)),
     rtol=1e-4)
case("operator-astype", lambda a: a.astype("float64"), lambda a: a.astype(np.float64),
     Input((3,)))
case("operator-int", lambda a: (a * 2 + 1) // 3 % 4, lambda a: (a * 2 + 1) // 3 % 4,
     Input((5,), "int32", "int"))
case("operator-chain", lambda a, b: topi.exp(a) / topi.sum(topi.exp(a), axis=1,
                                                             keepdims=True) - b,
     lambda a, b: np.exp(a) / np.exp(a).sum(axis=1, keepdims=True) - b, Input((2, 3)),
     Input((3,)))


# -- the one parametrized comparison -----------------------------------------------------

def _compare(got: np.ndarray, want: np.ndarray, case_: Case) -> None:
    want = np.asarray(want)
    expected_dtype = np.dtype(case_.dtype) if case_.dtype else want.dtype
    assert got.dtype == expected_dtype, f"dtype {got.dtype}, expected {expected_dtype}"
    assert got.shape == want.shape, f"shape {got.shape}, expected {want.shape}"
    if got.dtype.kind == "f":
        rtol = max(case_.rtol, 1e-3) if got.dtype == np.float16 else case_.rtol
        np.testing.assert_allclose(got, want.astype(np.float64), rtol=rtol, atol=case_.atol)
    else:
        np.testing.assert_array_equal(got, want.astype(got.dtype))


@pytest.mark.parametrize("case_", CASES, ids=[c.id for c in CASES])
def test_op_matches_numpy(case_: Case) -> None:
    rng = np.random.default_rng(zlib.crc32(case_.id.encode()))
    holders = [tex.placeholder(inp.shape, inp.dtype, name=f"in{p}")
               for p, inp in enumerate(case_.inputs)]
    arrays = [_sample(inp, rng) for inp in case_.inputs]
    out = case_.build(*holders)
    got = tex.testing.evaluate(out, dict(zip(holders, arrays)))
    want = case_.ref(*arrays)
    _compare(got, want, case_)


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


# -- structure: names, index maps, graphs ------------------------------------------------

X = tex.placeholder((2, 3, 4), name="X")
Y = tex.placeholder((4, 5), name="Y")


def _nodes(t: tex.Tensor) -> list[Any]:
    return list(post_order(*t.op.body))


def test_output_names_follow_topi() -> None:
    assert topi.add(X, 1.0).name == "T_add"
    assert topi.exp(X).name == "T_exp"
    assert topi.reshape(X, (6, 4)).name == "T_reshape"
    assert topi.sum(X, axis=1).name == "X_red"
    assert topi.argmax(X, axis=1).op.input_tensors[0].name == "X_red_temp.v0"
    assert topi.multiply(X, 2.0, name="scaled").name == "scaled"
    assert [t.name for t in topi.split(X, 3, axis=1)] == ["T_split_0", "T_split_1",
                                                         "T_split_2"]


def test_index_and_reduce_axis_names() -> None:
    assert [iv.name for iv in topi.add(X, 1.0).op.axis] == ["i", "j", "l"]
    assert [iv.name for iv in topi.sum(X, axis=(0, 2)).op.reduce_axis] == ["k0", "k1"]
    assert [iv.name for iv in topi.matmul(X, Y).op.reduce_axis] == ["k"]
    e = topi.einsum("bij,jk->bik", X, Y)
    assert [iv.name for iv in e.op.axis] == ["b", "i", "k"]
    assert [iv.name for iv in e.op.reduce_axis] == ["j"]
    assert str(topi.matmul(Y, tex.placeholder((5, 2), name="Z"))) == \
        "T_matmul[i, j] = sum(Y[i, k] * Z[k, j], k in [0, 5))"


def test_reshape_index_uses_floordiv_floormod_of_flat_index() -> None:
    ops = {n.op for n in _nodes(topi.reshape(X, (4, 6))) if isinstance(n, Binary)}
    assert {Op.FLOORDIV, Op.FLOORMOD} <= ops


def test_concatenate_is_nested_selects() -> None:
    c = topi.concatenate([X, X, X], axis=2)
    assert sum(isinstance(n, Select) for n in _nodes(c)) == 2


def test_multi_compute_ops() -> None:
    lse = topi.logsumexp(X, axis=1)
    big_sum = lse.op.input_tensors
    assert {t.name for t in big_sum} == {"X_red_max", "X_red_sum"}
    mean = topi.mean(X, axis=(0, 1))
    assert [t.name for t in mean.op.input_tensors] == ["X_red_sum"]
    arg = topi.argmax(X, axis=2)
    temp = arg.op.input_tensors[0].op
    assert temp.num_outputs == 2 and isinstance(temp.body[0], Reduce)
    assert len(temp.body[0].combiner) == 2


def test_reduce_over_nothing_is_a_copy() -> None:
    s = topi.sum(tex.placeholder((), name="s"))
    assert s.shape == () and not s.op.reduce_axis


def test_scalar_operands_give_scalar_expression() -> None:
    n = tex.var("n")
    e = topi.add(n, 1)
    assert isinstance(e, tex.Expr) and str(e) == "n + 1"


def test_tensor_operators_dispatch_to_topi() -> None:
    assert (X + 1.0).name == "T_add" and (1.0 - X).name == "T_subtract"
    assert (-X).name == "T_negative" and (X @ Y).name == "T_matmul"
    assert X.astype("float64").dtype.name == "float64"


def test_take_clips_out_of_range_indices() -> None:
    a = tex.placeholder((4,), name="a")
    ind = tex.placeholder((4,), "int32", name="ind")
    data = np.arange(4, dtype=np.float32)
    got = tex.testing.evaluate(topi.take(a, ind), {a: data, ind: np.array([-3, 0, 3, 9],
                                                                           np.int32)})
    np.testing.assert_array_equal(got, [0, 0, 3, 3])


def test_argmax_of_minus_inf_is_first_index() -> None:
    a = tex.placeholder((2, 3), name="a")
    data = np.array([[-np.inf] * 3, [1, np.inf, np.inf]], np.float32)
    got = tex.testing.evaluate([topi.argmax(a, axis=1), topi.argmin(a, axis=1)], {a: data})
    np.testing.assert_array_equal(got[0], [0, 1])
    np.testing.assert_array_equal(got[1], [0, 0])


def test_logsumexp_is_stable_and_handles_infinities() -> None:
    a = tex.placeholder((3, 2), name="a")
    data = np.array([[1000.0, 1000.0], [-np.inf, -np.inf], [np.inf, 0.0]], np.float32)
    got = tex.testing.evaluate(topi.logsumexp(a, axis=1), {a: data})
    np.testing.assert_allclose(got, [1000 + np.log(2), -np.inf, np.inf], rtol=1e-6)


# -- errors: the exception type and a message naming the op and the argument -------------

I32 = tex.placeholder((2, 3), "int32", name="I32")
B23 = tex.placeholder((2, 3), "bool", name="B23")

ERRORS = [  # id, call, exception, substrings of the message
    ("add-list", lambda: topi.add(X, [1, 2]), TypeError, ["topi.add", "'b'"]),
    ("add-shapes", lambda: topi.add(Y, X), ValueError, ["topi.add", "(4, 5)", "(2, 3, 4)"]),
    ("add-scalar-range", lambda: topi.add(tex.placeholder((2,), "uint8", name="u"), 300),
     ValueError, ["topi.add", "300", "uint8"]),
    ("exp-not-tensor", lambda: topi.exp(2.0), TypeError, ["topi.exp", "'x'"]),
    ("where-shapes", lambda: topi.where(B23, X, 0.0), ValueError, ["topi.where"]),
    ("logical_and-float", lambda: topi.logical_and(X, B23), TypeError,
     ["topi.logical_and", "'a'"]),
    ("logical_not-int", lambda: topi.logical_not(I32), TypeError, ["topi.logical_not"]),
    ("cast-unknown", lambda: topi.cast(X, "float8"), ValueError, ["topi.cast", "float8"]),
    ("full-fraction-int", lambda: topi.full((2,), "int32", 1.5), ValueError,
     ["topi.full", "1.5"]),
    ("full-bad-shape", lambda: topi.full((2, 0), "int32", 1), ValueError, ["topi.full"]),
    ("full-tensor-value", lambda: topi.full((2,), "int32", X), TypeError,
     ["topi.full", "fill_value"]),
    ("broadcast_to", lambda: topi.broadcast_to(X, (3, 4)), ValueError,
     ["topi.broadcast_to", "(2, 3, 4)", "(3, 4)"]),
    ("sum-axis-range", lambda: topi.sum(X, axis=3), ValueError, ["topi.sum", "axis 3"]),
    ("sum-axis-type", lambda: topi.sum(X, axis=1.0), TypeError, ["topi.sum", "axis"]),
    ("sum-axis-twice", lambda: topi.sum(X, axis=(1, -2)), ValueError, ["topi.sum", "twice"]),
    ("mean-keepdims", lambda: topi.mean(X, keepdims=1), TypeError, ["topi.mean", "keepdims"]),
    ("argmax-not-tensor", lambda: topi.argmax("X"), TypeError, ["topi.argmax", "'x'"]),
    ("all-float", lambda: topi.all(X), TypeError, ["topi.all", "bool"]),
    ("reshape-size", lambda: topi.reshape(X, (5, 5)), ValueError,
     ["topi.reshape", "(2, 3, 4)", "(5, 5)"]),
    ("reshape-two-minus-one", lambda: topi.reshape(X, (-1, -1)), ValueError,
     ["topi.reshape", "-1"]),
    ("reshape-not-multiple", lambda: topi.reshape(X, (5, -1)), ValueError,
     ["topi.reshape", "multiple"]),
    ("reshape-type", lambda: topi.reshape(X, "6,4"), TypeError, ["topi.reshape", "newshape"]),
    ("transpose-perm", lambda: topi.transpose(X, (0, 0, 1)), ValueError,
     ["topi.transpose", "permutation"]),
    ("expand_dims-axis", lambda: topi.expand_dims(X, 5), ValueError,
     ["topi.expand_dims", "axis 5"]),
    ("squeeze-non-1", lambda: topi.squeeze(X, 1), ValueError,
     ["topi.squeeze", "axis 1", "extent is 3"]),
    ("concatenate-shapes", lambda: topi.concatenate([X, Y]), ValueError,
     ["topi.concatenate", "(2, 3, 4)", "(4, 5)"]),
    ("concatenate-empty", lambda: topi.concatenate([]), ValueError, ["topi.concatenate"]),
    ("concatenate-not-list", lambda: topi.concatenate(X), TypeError, ["topi.concatenate"]),
    ("concatenate-element", lambda: topi.concatenate([X, 1.0]), TypeError,
     ["topi.concatenate", "tensors[1]"]),
    ("split-sections", lambda: topi.split(X, 2, axis=1), ValueError,
     ["topi.split", "2 sections", "extent 3"]),
    ("split-points", lambda: topi.split(X, [3, 2], axis=2), ValueError,
     ["topi.split", "[3, 2]"]),
    ("stack-shapes", lambda: topi.stack([X, Y]), ValueError, ["topi.stack", "(4, 5)"]),
    ("stack-axis", lambda: topi.stack([Y, Y], axis=3), ValueError, ["topi.stack", "axis 3"]),
    ("take-float-indices", lambda: topi.take(X, Y), TypeError, ["topi.take", "float32"]),
    ("take-mode", lambda: topi.take(X, I32, mode="raise"), ValueError,
     ["topi.take", "'raise'"]),
    ("take-axis", lambda: topi.take(X, I32, axis=3), ValueError, ["topi.take", "axis 3"]),
    ("flip-axis", lambda: topi.flip(X, 4), ValueError, ["topi.flip", "axis 4"]),
    ("tensordot-extents", lambda: topi.tensordot(X, Y, 2), ValueError,
     ["topi.tensordot", "(2, 3, 4)", "(4, 5)"]),
    ("tensordot-too-many", lambda: topi.tensordot(X, Y, 3), ValueError,
     ["topi.tensordot", "axes=3"]),
    ("tensordot-pair-lengths", lambda: topi.tensordot(X, Y, ([2, 1], [0])), ValueError,
     ["topi.tensordot", "axes"]),
    ("matmul-extents", lambda: topi.matmul(Y, X), ValueError,
     ["topi.matmul", "(4, 5)", "(2, 3, 4)"]),
    ("matmul-0d", lambda: topi.matmul(tex.placeholder((), name="s"), Y), ValueError,
     ["topi.matmul", "'a'", "0-d"]),
    ("matmul-batch", lambda: topi.matmul(tex.placeholder((2, 3, 4), name="P"),
                                         tex.placeholder((3, 4, 5), name="Q")), ValueError,
     ["topi.matmul", "do not broadcast"]),
    ("matmul-type", lambda: topi.matmul(Y, np.ones((5, 2))), TypeError,
     ["topi.matmul", "'b'"]),
    ("einsum-count", lambda: topi.einsum("ij,jk->ik", Y), ValueError,
     ["topi.einsum", "2 operands"]),
    ("einsum-rank", lambda: topi.einsum("ijk->i", Y), ValueError,
     ["topi.einsum", "'ijk'", "(4, 5)"]),
    ("einsum-extents", lambda: topi.einsum("ij,ij->i", Y,
                                           tex.placeholder((4, 6), name="W")), ValueError,
     ["topi.einsum", "'j'", "5", "6"]),
    ("einsum-output-letter", lambda: topi.einsum("ij->iz", Y), ValueError,
     ["topi.einsum", "'z'"]),
    ("einsum-repeated-output", lambda: topi.einsum("ij->ii", Y), ValueError,
     ["topi.einsum", "'i'"]),
    ("einsum-ellipsis-dropped", lambda: topi.einsum("...j->j", X), ValueError,
     ["topi.einsum", "'...'", "output"]),
    ("einsum-two-ellipses", lambda: topi.einsum("......->...", Y), ValueError,
     ["topi.einsum", "one '...'"]),
    ("einsum-type", lambda: topi.einsum(["ij"], Y), TypeError, ["topi.einsum", "subscripts"]),
    ("einsum-operand", lambda: topi.einsum("ij->ji", "Y"), TypeError,
     ["topi.einsum", "operands[0]"]),
]


@pytest.mark.parametrize("call,exc,words", [e[1:] for e in ERRORS], ids=[e[0] for e in ERRORS])
def test_errors_name_the_op(call: Callable[[], Any], exc: type, words: list[str]) -> None:
    with pytest.raises(exc) as info:
        call()
    for w in words:
        assert w in str(info.value), f"{w!r} not in: {info.value}"
