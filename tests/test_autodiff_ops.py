"""Gradients of every tex.topi operator against finite differences (and PyTorch if present).

One spec table, in the style of tests/test_topi_core.py: every case names the op, builds it
from float64 placeholders and gives each input's shape, dtype and sampler (the domain the
input is drawn from). One parametrized test runs ``tex.testing.check_grad`` on each case,
differentiating with respect to every float input at once; integer inputs (``take``
indices) and boolean conditions are fed as data.

Domains: positive for log/sqrt/rsqrt/power bases; ``distinct`` for anything with a kink
(max/min, relu, abs, clip, max pool): one seeded permutation of the values
``(k + 1/2) / 4`` shared by all such inputs of a case, so no two values tie, none is 0 or
+-0.5 (the kinks of relu/abs and of the clip bounds used here), and a finite-difference
step of 1e-6 never crosses a kink.

Then: gradients with respect to several inputs equal those taken one at a time; second
order (Hessian-vector products of the intrinsics and softmax against finite differences of
the first gradient); forward mode (``jvp`` against finite differences and against the
reverse mode through ``<v, J u> = <J^T v, u>``); the documented tie conventions; and, when
PyTorch is installed, gradients against ``torch.autograd``.
"""
from __future__ import annotations

import math
import zlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
import pytest

import tex
from tex import topi
from tex.autodiff import iteration_count, jvp
from tex.testing import check_grad, evaluate
from tex.topi import nn

Array = np.ndarray

# -- input samplers (domains) -----------------------------------------------------------

SAMPLERS: dict[str, Callable[[np.random.Generator, tuple[int, ...]], Array]] = {
    "normal": lambda rng, s: rng.standard_normal(s),
    "positive": lambda rng, s: rng.uniform(0.5, 2.0, s),
    "near_one": lambda rng, s: rng.uniform(0.7, 1.3, s),
    "unit": lambda rng, s: rng.uniform(-0.9, 0.9, s),  # tan
    "prob": lambda rng, s: rng.uniform(0.05, 1.0, s),
    # away from the jumps of floor/ceil/round/trunc (and of floor_divide by ~2)
    "off_grid": lambda rng, s: rng.integers(-4, 4, s) + rng.uniform(0.2, 0.4, s)
    * rng.choice([-1, 1], s),
    # floor_mod(a, b) with b in [1.9, 2.1]: a / b stays within 0.15 of k + [0.3, 0.7]
    "mod_a": lambda rng, s: 2.0 * (rng.integers(-3, 3, s) + rng.uniform(0.3, 0.7, s)),
    "mod_b": lambda rng, s: rng.uniform(1.9, 2.1, s),
    "bool": lambda rng, s: rng.random(s) < 0.5,
    "one_zero_per_row": lambda rng, s: rng.uniform(0.7, 1.3, s) * (np.arange(s[-1]) != 1),
}
DISTINCT = "distinct"  # the shared permutation, see the module docstring


def distinct_values(rng: np.random.Generator, n: int) -> Array:
    """``n`` distinct values ``(k + 1/2) / 4`` (k in a shuffled range centred on 0): spaced
    0.25 apart, none equal to 0 or +-0.5."""
    return (rng.permutation(n) - n // 2 + 0.5) * 0.25


@dataclass(frozen=True)
class Input:
    shape: tuple[int, ...]
    sampler: str = "normal"
    dtype: str = "float64"
    value: Any = None  # fixed data (take indices); such an input is never differentiated

    @property
    def diff(self) -> bool:
        return self.value is None and np.dtype(self.dtype).kind == "f"


@dataclass
class Case:
    """``build(*placeholders) -> Tensor``; the gradient is checked with respect to every
    float input without fixed data."""

    id: str
    build: Callable[..., tex.Tensor]
    inputs: list[Input]
    rtol: float = 1e-5
    atol: float = 1e-6
    eps: float | None = None
    zero: bool = False  # the gradient must be exactly zero


CASES: list[Case] = []


def case(id: str, build: Callable[..., tex.Tensor], *inputs: Input, **kw: Any) -> None:
    CASES.append(Case(id, build, list(inputs), **kw))


def make_inputs(inputs: list[Input], rng: np.random.Generator
                ) -> tuple[list[tex.Tensor], dict[tex.Tensor, Array]]:
    """Placeholders ``in0, in1, ...`` and their data."""
    holders = [tex.placeholder(i.shape, i.dtype, name=f"in{p}") for p, i in enumerate(inputs)]
    n_distinct = sum(math.prod(i.shape) for i in inputs if i.sampler == DISTINCT)
    pool = list(distinct_values(rng, n_distinct))
    data: dict[tex.Tensor, Array] = {}
    for h, i in zip(holders, inputs):
        if i.value is not None:
            arr = np.asarray(i.value)
        elif i.sampler == DISTINCT:
            n = math.prod(i.shape)
            arr, pool = np.array(pool[:n]).reshape(i.shape), pool[n:]
        else:
            arr = np.asarray(SAMPLERS[i.sampler](rng, i.shape))
        data[h] = arr.astype(i.dtype)
    return holders, data


def seed_of(id: str) -> int:
    return zlib.crc32(id.encode())


# -- elementwise unary ops ---------------------------------------------------------------

UNARY = [  # op, sampler
    ("negative", "normal"), ("exp", "normal"), ("log", "positive"), ("log2", "positive"),
    ("log10", "positive"), ("sqrt", "positive"), ("rsqrt", "positive"), ("sin", "normal"),
    ("cos", "normal"), ("tan", "unit"), ("tanh", "normal"), ("sigmoid", "normal"),
    ("erf", "normal"), ("abs", DISTINCT),
]
ROUNDING = ["floor", "ceil", "round", "trunc"]  # gradient exactly zero

for _op, _smp in UNARY:
    for _shape in [(), (2, 3)]:
        case(f"{_op}-{_shape}", getattr(topi, _op), Input(_shape, _smp))
for _op in ROUNDING:
    for _shape in [(), (2, 3)]:
        case(f"{_op}-{_shape}", getattr(topi, _op), Input(_shape, "off_grid"), zero=True)

# -- binary broadcasting ops -------------------------------------------------------------

BINARY = [  # op, samplers (a, b)
    ("add", ("normal", "normal")),
    ("subtract", ("normal", "normal")),
    ("multiply", ("normal", "normal")),
    ("divide", ("normal", "positive")),
    ("power", ("positive", "normal")),
    ("maximum", (DISTINCT, DISTINCT)),
    ("minimum", (DISTINCT, DISTINCT)),
    ("floor_mod", ("mod_a", "mod_b")),
]
BINARY_SHAPES = [((2, 3), (2, 3)), ((3, 1, 4), (2, 1)), ((2, 1), (1, 3)), ((), (2, 3)),
                 ((4,), ())]

for (_op, (_sa, _sb)), (_shape_a, _shape_b) in [(b, s) for b in BINARY for s in BINARY_SHAPES]:
    case(f"{_op}-{_shape_a}-{_shape_b}", getattr(topi, _op), Input(_shape_a, _sa),
         Input(_shape_b, _sb))
case("floor_divide", topi.floor_divide, Input((2, 3), "mod_a"), Input((3,), "mod_b"),
     zero=True)

SCALAR = [  # id, build, sampler: one operand a Python scalar
    ("add-2.0", lambda a: topi.add(a, 2.0), "normal"),
    ("2.0-subtract", lambda a: topi.subtract(2.0, a), "normal"),
    ("multiply-3.0", lambda a: topi.multiply(a, 3.0), "normal"),
    ("2.0-divide", lambda a: topi.divide(2.0, a), "positive"),
    ("power-2.0-negative-base", lambda a: topi.power(a, 2.0), "normal"),
    ("power-0.5", lambda a: topi.power(a, 0.5), "positive"),
    ("2.0-power", lambda a: topi.power(2.0, a), "normal"),
    ("maximum-0.0", lambda a: topi.maximum(a, 0.0), DISTINCT),
    ("0.0-minimum", lambda a: topi.minimum(0.0, a), DISTINCT),
    ("floor_mod-2.0", lambda a: topi.floor_mod(a, 2.0), "off_grid"),
    ("operators", lambda a: (a * a - 1.0) / (a ** 2.0 + 1.0) + -a, "normal"),
]
for _id, _build, _smp in SCALAR:
    case(f"scalar-{_id}", _build, Input((2, 3), _smp))
case("same-tensor-both-operands", lambda a: topi.multiply(a, topi.exp(a)), Input((2, 3)))

# -- cast, where, clip, broadcast_to, fills ----------------------------------------------

# float32 rounding of a 1e-6 step is noisy: cast cases use a step of 1e-2 (cast is linear)
case("cast-float64-float32", lambda a: topi.cast(a, "float32"), Input((2, 3)), eps=1e-2,
     rtol=1e-4)
case("cast-roundtrip-float32", lambda a: topi.multiply(
    topi.cast(topi.cast(a, "float32"), "float64"), topi.sin(a)), Input((2, 3)), eps=1e-2,
    rtol=1e-3, atol=1e-4)
case("cast-float32-float64", lambda a: topi.exp(topi.cast(a, "float64")),
     Input((2, 3), dtype="float32"), rtol=1e-3, atol=1e-4)
case("astype-float32", lambda a: topi.astype(a, "float32"), Input((3,)), eps=1e-2, rtol=1e-4)
case("cast-through-int32", lambda a: topi.cast(topi.cast(a, "int32"), "float64"),
     Input((2, 3), "off_grid"), zero=True)
case("where-broadcast", topi.where, Input((3, 1), "bool", "bool"), Input((1, 4)),
     Input((4,)))
case("where-scalar-branch", lambda c, a: topi.where(c, a, 0.0),
     Input((2, 3), "bool", "bool"), Input((2, 3)))
case("where-numeric-cond", lambda c, a, b: topi.where(c, topi.exp(a), b),
     Input((5,), "int32", value=np.array([0, 2, 0, -1, 1])), Input((5,)), Input(()))
case("clip-scalars", lambda a: topi.clip(a, -0.5, 0.5), Input((3, 4), DISTINCT))
case("clip-tensor-bounds", topi.clip, Input((3, 4), DISTINCT), Input((4,), DISTINCT),
     Input((3, 1), DISTINCT))
for _from, _to in [((3, 1), (2, 3, 4)), ((), (2, 2)), ((4,), (3, 4))]:
    case(f"broadcast_to-{_from}-{_to}", lambda a, t=_to: topi.broadcast_to(a, t),
         Input(_from))
case("full_like", lambda a: topi.full_like(a, 1.5), Input((2, 3)), zero=True)
case("zeros_like", topi.zeros_like, Input((2, 3)), zero=True)
case("ones_like", topi.ones_like, Input((3,)), zero=True)

# -- reductions --------------------------------------------------------------------------

REDUCTIONS = [("sum", "normal"), ("prod", "near_one"), ("max", DISTINCT), ("min", DISTINCT),
              ("mean", "normal"), ("logsumexp", "normal")]
REDUCE_AXES = [None, 1, -1, (0, 2), ()]

for (_op, _smp), _axis, _keep in [(r, a, k) for r in REDUCTIONS for a in REDUCE_AXES
                                  for k in (False, True)]:
    case(f"{_op}-axis{_axis}-keep{_keep}",
         lambda a, o=_op, x=_axis, k=_keep: getattr(topi, o)(a, axis=x, keepdims=k),
         Input((2, 3, 4), _smp))
for _op, _smp in REDUCTIONS:
    case(f"{_op}-0d", lambda a, o=_op: getattr(topi, o)(a), Input((), _smp))
# an exact zero among the factors: its gradient is the product of the others (not 0/0)
case("prod-exact-zero", lambda a: topi.prod(a, axis=1), Input((2, 3), "one_zero_per_row"))

# -- shape transforms --------------------------------------------------------------------

for _from, _to in [((2, 3, 4), (6, 4)), ((2, 3, 4), (4, -1)), ((2, 6), (3, 2, 2)),
                   ((1,), ()), ((), (1, 1))]:
    case(f"reshape-{_from}-{_to}", lambda a, t=_to: topi.reshape(a, t), Input(_from))
for _shape, _axes in [((2, 3), None), ((2, 3, 4), (1, 0, 2)), ((2, 3, 4), (-1, 0, 1))]:
    case(f"transpose-{_shape}-{_axes}", lambda a, x=_axes: topi.transpose(a, x), Input(_shape))
for _axis, _n in [(1, 2), (-1, 1), (0, 1)]:
    case(f"expand_dims-axis{_axis}-n{_n}", lambda a, x=_axis, n=_n: topi.expand_dims(a, x, n),
         Input((2, 3)))
for _shape, _axis in [((3, 1, 4, 1), None), ((3, 1, 4, 1), 1), ((1,), None)]:
    case(f"squeeze-{_shape}-{_axis}", lambda a, x=_axis: topi.squeeze(a, x), Input(_shape))
case("concatenate-axis1", lambda a, b, c: topi.concatenate([a, b, c], axis=1),
     Input((2, 3)), Input((2, 1)), Input((2, 2)))
case("concatenate-axis0", lambda a, b: topi.concatenate([a, b]), Input((1, 3)), Input((2, 3)))
case("concatenate-same-tensor", lambda a: topi.concatenate([a, a, a], axis=-1), Input((2, 2)))
for _k in range(3):
    case(f"split-sections-out{_k}", lambda a, k=_k: topi.split(a, 3, axis=1)[k],
         Input((2, 6, 2)))
    case(f"split-points-out{_k}", lambda a, k=_k: topi.split(a, [1, 3], axis=-1)[k],
         Input((3, 5)))
case("split-all-outputs", lambda a: (lambda p: topi.add(topi.multiply(p[0], p[2]), p[1]))(
    topi.split(a, 3, axis=0)), Input((6, 2)))
case("stack-axis0", lambda a, b: topi.stack([a, b]), Input((2, 3)), Input((2, 3)))
case("stack-axis-last", lambda a, b, c: topi.stack([a, b, c], axis=-1), Input((2, 3)),
     Input((2, 3)), Input((2, 3)))
case("stack-same-tensor", lambda a: topi.stack([a, topi.exp(a)], axis=1), Input((2, 3)))
for _axis in [0, (0, 2), None]:
    case(f"flip-{_axis}", lambda a, x=_axis: topi.flip(a, x), Input((2, 3, 2)))
TAKE = [  # id, a shape, indices, axis: out-of-range and repeated indices in each
    ("flat", (3, 4), [-2, 0, 5, 11, 20, 5], None),
    ("axis1", (3, 4), [[0, 3, 3], [-1, 5, 1]], 1),
    ("axis0", (3, 4), [2, 2, -4, 7], 0),
    ("axis-last-3d", (2, 2, 3), [1, -1, 4, 1], -1),
]
for (_id, _shape, _ind, _axis), _mode in [(t, m) for t in TAKE for m in ("clip", "wrap")]:
    case(f"take-{_id}-{_mode}", lambda a, i, x=_axis, m=_mode: topi.take(a, i, x, m),
         Input(_shape), Input(np.shape(_ind), dtype="int32", value=np.array(_ind)))
case("take-scalar-index", lambda a: topi.take(a, 2, axis=1), Input((3, 4)))
# int8 indices: the flat wrap-mode gradient stays small (see take-flat-wrap with int32)
case("take-flat-wrap-int8", lambda a, i: topi.take(a, i, mode="wrap"), Input((3, 4)),
     Input((6,), dtype="int8", value=np.array([-2, 0, 5, 11, 20, 5])))
case("take-int64-indices", lambda a, i: topi.take(a, i), Input((5,)),
     Input((3,), dtype="int64", value=np.array([4, 4, 0])))

# -- contractions ------------------------------------------------------------------------

for _sa, _sb, _axes in [((2, 3, 4), (3, 4, 2), 2), ((2, 3), (3, 4), 1), ((2,), (3,), 0),
                        ((3, 2, 4), (2, 3, 2), ([1, 0], [0, 1])), ((2, 3), (4, 2), ([0], [1]))]:
    case(f"tensordot-{_sa}-{_sb}-{_axes}", lambda a, b, x=_axes: topi.tensordot(a, b, x),
         Input(_sa), Input(_sb))
for _sa, _sb in [((3, 4), (4, 2)), ((4,), (4, 2)), ((3, 4), (4,)), ((4,), (4,)),
                 ((2, 3, 4), (4, 2)), ((2, 1, 3, 4), (2, 4, 2)), ((4,), (2, 4, 3))]:
    case(f"matmul-{_sa}-{_sb}", topi.matmul, Input(_sa), Input(_sb))
case("matmul-same-tensor", lambda a: topi.matmul(a, a), Input((3, 3)))
case("matmul-operator", lambda a, b: a @ b, Input((2, 3)), Input((3, 2)))
EINSUM = [
    ("ij,jk->ik", [(2, 3), (3, 4)]), ("bij,bjk->bik", [(2, 2, 3), (2, 3, 2)]),
    ("ii->i", [(3, 3)]), ("ii", [(3, 3)]), ("ij->", [(2, 3)]), ("ij->ji", [(2, 3)]),
    ("i,j->ij", [(2,), (3,)]), ("iij->j", [(2, 2, 3)]), ("ij,ij->i", [(2, 3), (2, 3)]),
    ("ij,jk,kl->il", [(2, 3), (3, 2), (2, 2)]),
    ("...ij,...jk->...ik", [(2, 1, 2, 3), (3, 3, 2)]), ("...j,...j->...", [(3, 1, 4), (2, 4)]),
    ("i...->...", [(3, 2, 2)]),
]
for _spec, _shapes in EINSUM:
    case(f"einsum-{_spec}", lambda *ts, s=_spec: topi.einsum(s, *ts),
         *(Input(s) for s in _shapes))
case("einsum-same-tensor", lambda a: topi.einsum("ij,jk,ki->", a, a, a), Input((2, 2)))

# -- topi.nn -----------------------------------------------------------------------------

case("dense", nn.dense, Input((4, 5)), Input((3, 5)))
case("dense-bias", nn.dense, Input((4, 5)), Input((3, 5)), Input((3,)))
for _ta, _tb, _sa, _sb in [(False, True, (2, 3, 4), (2, 2, 4)),
                           (False, False, (2, 3, 4), (2, 4, 2)),
                           (True, True, (2, 4, 3), (2, 2, 4)),
                           (True, False, (2, 4, 3), (2, 4, 2)),
                           (False, True, (1, 3, 4), (2, 2, 4)),
                           (False, False, (2, 3, 4), (1, 4, 2))]:
    _flags = ("T" if _ta else "N") + ("T" if _tb else "N")
    case(f"batch_matmul-{_flags}-{_sa}-{_sb}",
         lambda a, b, x=_ta, y=_tb: nn.batch_matmul(a, b, x, y), Input(_sa), Input(_sb))
CONV = [  # data, kernel, stride, padding, dilation
    ((1, 2, 5, 5), (3, 2, 3, 3), 1, 0, 1),
    ((1, 2, 5, 5), (3, 2, 3, 3), 2, 1, 1),
    ((1, 2, 6, 6), (2, 2, 3, 3), 1, 1, 2),
    ((2, 1, 5, 4), (2, 1, 2, 3), (2, 1), (0, 1, 2, 1), 1),
    ((1, 2, 6, 5), (2, 2, 2, 2), 2, (1, 0), (2, 1)),
]
for _d, _k, _s, _p, _dl in CONV:
    case(f"conv2d-{_d}-{_k}-s{_s}-p{_p}-d{_dl}",
         lambda d, k, s=_s, p=_p, dl=_dl: nn.conv2d(d, k, s, p, dl), Input(_d), Input(_k))
POOL = [  # data shape, kernel, stride, dilation, padding, type, ceil_mode, count_include_pad
    ((1, 2, 4, 4), 2, 2, 1, 0, "max", False, True),
    ((1, 2, 4, 4), 2, 1, 1, 0, "max", False, True),
    ((1, 2, 5, 5), 3, 2, 1, 1, "max", False, True),
    ((1, 1, 5, 5), 3, 3, 1, 1, "max", True, True),
    ((1, 1, 6, 5), (3, 2), (2, 1), 2, (1, 0), "max", False, True),
    ((1, 2, 4, 4), 2, 2, 1, 0, "avg", False, True),
    ((1, 2, 5, 5), 3, 2, 1, 1, "avg", False, True),
    ((1, 2, 5, 5), 3, 2, 1, 1, "avg", False, False),
    ((1, 1, 6, 6), 3, 2, 1, 1, "avg", True, False),
    ((1, 1, 6, 6), 3, 2, 1, 1, "avg", True, True),
]
for _d, _k, _s, _dl, _p, _t, _ceil, _inc in POOL:
    case(f"pool2d-{_t}-{_d}-k{_k}-s{_s}-d{_dl}-p{_p}{'-ceil' if _ceil else ''}"
         f"{'' if _inc else '-exclude_pad'}",
         lambda d, k=_k, s=_s, dl=_dl, p=_p, t=_t, c=_ceil, i=_inc:
         nn.pool2d(d, k, s, dl, p, t, ceil_mode=c, count_include_pad=i),
         Input(_d, DISTINCT if _t == "max" else "normal"))
case("pool-avg", lambda d: nn.pool(d, 2, 2, 0, "avg"), Input((1, 1, 4, 4)))
case("relu", nn.relu, Input((3, 4), DISTINCT))
case("leaky_relu", lambda a: nn.leaky_relu(a, 0.1), Input((3, 4), DISTINCT))
for _shape, _axis in [((3, 4), -1), ((3, 4), 0), ((2, 3, 2), 1), ((5,), 0)]:
    case(f"softmax-{_shape}-axis{_axis}", lambda a, x=_axis: nn.softmax(a, x), Input(_shape))
    case(f"log_softmax-{_shape}-axis{_axis}", lambda a, x=_axis: nn.log_softmax(a, x),
         Input(_shape))
case("layer_norm-last", nn.layer_norm, Input((3, 4)), Input((4,)), Input((4,)))
case("layer_norm-two-axes", lambda a, g, b: nn.layer_norm(a, g, b, axis=(1, 2)),
     Input((2, 3, 2)), Input((3, 2)), Input((3, 2)))
case("layer_norm-outer-axes", lambda a, g, b: nn.layer_norm(a, g, b, axis=(0, 2), epsilon=0.1),
     Input((2, 3, 2)), Input((2, 2)), Input((2, 2)))
case("batch_norm-nchw", lambda *t: nn.batch_norm(*t)[0], Input((2, 3, 2, 2)), Input((3,)),
     Input((3,)), Input((3,)), Input((3,), "positive"))
case("batch_norm-last-axis", lambda *t: nn.batch_norm(*t, axis=-1, epsilon=1e-3)[0],
     Input((4, 3)), Input((3,)), Input((3,)), Input((3,)), Input((3,), "positive"))
case("cross_entropy", nn.cross_entropy, Input((3, 4), "prob"), Input((3, 4), "prob"))
case("cross_entropy_with_logits", nn.cross_entropy_with_logits, Input((3, 4)),
     Input((3, 4), "prob"))
case("pad", lambda a: nn.pad(a, [1, 0, 2], [0, 2, 1]), Input((2, 3, 2)))
case("pad-value", lambda a: nn.pad(a, [2, 1], pad_value=-5.0), Input((3, 2)))
case("flatten", nn.flatten, Input((2, 3, 2, 2)))
case("flatten-1d", nn.flatten, Input((5,)))
# a small network: gradient through several ops and all parameters at once
case("mlp-loss", lambda x, w1, b1, w2, t: nn.cross_entropy_with_logits(
    nn.dense(topi.tanh(nn.dense(x, w1, b1)), w2), t),
    Input((3, 4)), Input((5, 4)), Input((5,)), Input((2, 5)), Input((3, 2), "prob"))
case("conv-pool-relu", lambda x, k: topi.sum(nn.relu(nn.pool2d(
    nn.conv2d(x, k, 1, 1), 2, 2, 1, 0, "avg")), axis=(2, 3)),
    Input((1, 1, 4, 4)), Input((2, 1, 3, 3)))


# -- the table-driven gradient check -----------------------------------------------------

def _zero_check(out: tex.Tensor, wrt: list[tex.Tensor], data: dict[tex.Tensor, Array],
                rng: np.random.Generator) -> None:
    head = tex.placeholder(out.shape, out.dtype, name="head")
    grads = tex.differentiate(out, wrt, head=head)
    values = evaluate(list(grads), {**data, head: rng.standard_normal(out.shape)
                                    .astype(out.dtype.numpy)})
    for x, g in zip(wrt, values):
        assert g.shape == x.shape
        np.testing.assert_array_equal(g, np.zeros(x.shape), err_msg=f"d/d{x.name}")


# The gradient of these small ops costs at most this many iteration points, and at most
# COST_RATIO times the forward's (prod's Jacobian-based gradient is ~30x): a gradient far
# beyond it would take the reference interpreter minutes or hours, so the test fails on
# the count instead of hanging.
COST_FLOOR = 10_000
COST_RATIO = 100


def _check_cost(out: tex.Tensor, wrt: list[tex.Tensor]) -> None:
    head = tex.placeholder(out.shape, out.dtype, name="head")
    grads = tex.differentiate(out, wrt, head=head)
    forward, backward = iteration_count(out), iteration_count(*grads)
    assert backward <= max(COST_FLOOR, COST_RATIO * forward), (
        f"the gradient program has {backward} iteration points for a forward of {forward}:\n"
        + "\n".join(str(g) for g in grads))


@pytest.mark.parametrize("case_", CASES, ids=[c.id for c in CASES])
def test_grad_matches_finite_differences(case_: Case) -> None:
    rng = np.random.default_rng(seed_of(case_.id))
    holders, data = make_inputs(case_.inputs, rng)
    out = case_.build(*holders)
    wrt = [h for h, i in zip(holders, case_.inputs) if i.diff]
    _check_cost(out, wrt)
    check_grad(out, wrt, data=data, rtol=case_.rtol, atol=case_.atol, eps=case_.eps,
               seed=seed_of(case_.id) % 1000)
    if case_.zero:
        _zero_check(out, wrt, data, rng)


def test_case_ids_are_unique() -> None:
    ids = [c.id for c in CASES]
    assert len(ids) == len(set(ids))


MULTI = [c for c in CASES if sum(i.diff for i in c.inputs) > 1]


@pytest.mark.parametrize("case_", MULTI, ids=[c.id for c in MULTI])
def test_grad_of_several_inputs_equals_one_at_a_time(case_: Case) -> None:
    """``differentiate(out, [a, b, ...])`` gives, input by input, what
    ``differentiate(out, [a])``, ``differentiate(out, [b])``, ... give."""
    rng = np.random.default_rng(seed_of(case_.id) + 1)
    holders, data = make_inputs(case_.inputs, rng)
    out = case_.build(*holders)
    wrt = [h for h, i in zip(holders, case_.inputs) if i.diff]
    _check_cost(out, wrt)
    head = tex.placeholder(out.shape, out.dtype, name="head")
    feed = {**data, head: rng.standard_normal(out.shape)}
    together = evaluate(list(tex.differentiate(out, wrt, head=head)), feed)
    for x, g in zip(wrt, together):
        (alone,) = evaluate(list(tex.differentiate(out, [x], head=head)), feed)
        np.testing.assert_allclose(g, alone, rtol=1e-12, atol=1e-12, err_msg=f"d/d{x.name}")


# -- second order: Hessian-vector products -----------------------------------------------

SECOND_ORDER = [  # id, build, sampler
    *((_op, getattr(topi, _op), _smp) for _op, _smp in UNARY),
    *((_op, getattr(topi, _op), "off_grid") for _op in ROUNDING),
    ("power-3.0", lambda a: topi.power(a, 3.0), "normal"),
    ("power-x-x", lambda a: topi.power(a, a), "positive"),
    ("softmax", lambda a: nn.softmax(a), "normal"),
    ("softmax-axis0", lambda a: nn.softmax(a, 0), "normal"),
    ("log_softmax", lambda a: nn.log_softmax(a), "normal"),
    ("logsumexp", lambda a: topi.logsumexp(a, axis=1), "normal"),
]


@pytest.mark.parametrize("name,build,sampler", SECOND_ORDER, ids=[s[0] for s in SECOND_ORDER])
def test_hessian_vector_product(name: str, build: Callable[..., tex.Tensor],
                                sampler: str) -> None:
    """With ``G(x) = differentiate(f(x), x, head=H)``, the gradient of ``sum(G * V)`` is
    the Hessian-vector product of ``sum(H * f)``: it equals the central difference
    ``(G(x + eps v) - G(x - eps v)) / (2 eps)``."""
    rng = np.random.default_rng(seed_of(name) + 7)
    (x,), data = make_inputs([Input((2, 3), sampler)], rng)
    out = build(x)
    h = tex.placeholder(out.shape, "float64", name="H")
    v = tex.placeholder(x.shape, "float64", name="V")
    (g,) = tex.differentiate(out, [x], head=h)
    s = topi.sum(topi.multiply(g, v))
    (hv,) = tex.differentiate(s, [x])
    assert hv.shape == x.shape
    data[h] = rng.standard_normal(out.shape)
    data[v] = rng.standard_normal(x.shape)
    eps = 1e-5
    got = evaluate(hv, data)
    plus = evaluate(g, {**data, x: data[x] + eps * data[v]})
    minus = evaluate(g, {**data, x: data[x] - eps * data[v]})
    np.testing.assert_allclose(got, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)
    # the second-order graph is an ordinary one: its gradients in x, H and V all check
    check_grad(s, [x, h, v], data=data, rtol=1e-5, atol=1e-6)


# -- forward mode ------------------------------------------------------------------------

JVP_CASES = [
    ("dense-bias", nn.dense, [Input((3, 4)), Input((2, 4)), Input((2,))]),
    ("conv2d-stride2", lambda d, k: nn.conv2d(d, k, 2, 1),
     [Input((1, 2, 5, 5)), Input((2, 2, 3, 3))]),
    ("max-pool", lambda d: nn.pool2d(d, 2, 2, 1, 0, "max"), [Input((1, 2, 4, 4), DISTINCT)]),
    ("max-pool-padded", lambda d: nn.pool2d(d, 3, 2, 1, 1, "max"),
     [Input((1, 2, 5, 5), DISTINCT)]),
    ("softmax", nn.softmax, [Input((3, 4))]),
    ("layer_norm", nn.layer_norm, [Input((3, 4)), Input((4,)), Input((4,))]),
    ("prod", lambda a: topi.prod(a, axis=1), [Input((3, 4), "near_one")]),
    ("max-reduce", lambda a: topi.max(a, axis=(0, 2)), [Input((2, 3, 2), DISTINCT)]),
]


@pytest.mark.parametrize("name,build,inputs", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_jvp_matches_finite_differences_and_vjp(name: str, build: Callable[..., tex.Tensor],
                                                inputs: list[Input]) -> None:
    rng = np.random.default_rng(seed_of(name) + 5)
    xs, data = make_inputs(inputs, rng)
    out = build(*xs)
    us = [tex.placeholder(x.shape, x.dtype, name=f"u{p}") for p, x in enumerate(xs)]
    u = {t: rng.standard_normal(t.shape) for t in us}
    tangent = jvp(out, xs, us)
    assert tangent.shape == out.shape and tangent.dtype == out.dtype
    ju = evaluate(tangent, {**data, **u})
    # J u by central differences, all inputs moved at once
    eps = 1e-6
    plus = evaluate(out, {**data, **{x: data[x] + eps * u[t] for x, t in zip(xs, us)}})
    minus = evaluate(out, {**data, **{x: data[x] - eps * u[t] for x, t in zip(xs, us)}})
    np.testing.assert_allclose(ju, (plus - minus) / (2 * eps), rtol=1e-6, atol=1e-8)
    # <v, J u> = <J^T v, u>
    head = tex.placeholder(out.shape, out.dtype, name="v")
    v = rng.standard_normal(out.shape)
    vjps = evaluate(list(tex.differentiate(out, xs, head=head)), {**data, head: v})
    lhs = float(np.sum(v * ju))
    rhs = float(sum(np.sum(g * u[t]) for g, t in zip(vjps, us)))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)


def test_jvp_of_independent_output_is_zero() -> None:
    a = tex.placeholder((2, 3), "float64", name="a")
    b = tex.placeholder((2, 3), "float64", name="b")
    t = tex.placeholder((2, 3), "float64", name="t")
    got = evaluate(jvp(topi.exp(b), [a], [t]), {a: np.ones((2, 3)), b: np.ones((2, 3)),
                                                 t: np.ones((2, 3))})
    np.testing.assert_array_equal(got, np.zeros((2, 3)))


# -- tie conventions ---------------------------------------------------------------------

TIES = np.array([[1.0, 3.0, 3.0, 2.0],
                 [5.0, 5.0, 5.0, 5.0],
                 [0.0, -1.0, 0.0, -1.0]])


def _grad_ones(out: tex.Tensor, wrt: list[tex.Tensor], data: dict[tex.Tensor, Array]
               ) -> list[Array]:
    """The gradients of ``sum(out)`` (head of ones)."""
    head = tex.placeholder(out.shape, out.dtype, name="head")
    return evaluate(list(tex.differentiate(out, wrt, head=head)),
                    {**data, head: np.ones(out.shape)})


@pytest.mark.parametrize("op,expected", [
    ("max", [[0, 1, 0, 0], [1, 0, 0, 0], [1, 0, 0, 0]]),
    ("min", [[1, 0, 0, 0], [1, 0, 0, 0], [0, 1, 0, 0]]),
], ids=["max", "min"])
def test_reduction_tie_goes_to_first_element(op: str, expected: list[list[int]]) -> None:
    x = tex.placeholder((3, 4), "float64", name="x")
    (g,) = _grad_ones(getattr(topi, op)(x, axis=1), [x], {x: TIES})
    np.testing.assert_array_equal(g, np.array(expected, dtype=np.float64))


def test_reduction_tie_over_several_axes_goes_to_lowest_flat_index() -> None:
    x = tex.placeholder((2, 2, 2), "float64", name="x")
    data = np.array([[[0.0, 4.0], [4.0, 1.0]], [[4.0, 4.0], [0.0, 0.0]]])
    # reduce over axes (0, 2): for j=0 the points (i, k) = (0, 1), (1, 0), (1, 1) tie;
    # the first in row-major order of the reduce axes is (0, 1)
    (g,) = _grad_ones(topi.max(x, axis=(0, 2)), [x], {x: data})
    expected = np.zeros((2, 2, 2))
    expected[0, 0, 1] = 1.0
    expected[0, 1, 0] = 1.0
    np.testing.assert_array_equal(g, expected)


def ref_max_pool_grad(x: Array, kernel: int, stride: int, padding: int,
                      head: Array) -> Array:
    """The gradient of max pooling (square kernel, no dilation) with ties to the first
    maximal element of the window in row-major order; padding never wins."""
    n, c, h, w = x.shape
    oh = (h + 2 * padding - kernel) // stride + 1
    ow = (w + 2 * padding - kernel) // stride + 1
    grad = np.zeros_like(x)
    for b, ch, i, j in np.ndindex(n, c, oh, ow):
        best = None
        for ry, rx in np.ndindex(kernel, kernel):
            y, z = i * stride - padding + ry, j * stride - padding + rx
            if 0 <= y < h and 0 <= z < w and (best is None or x[b, ch, y, z] > x[b, ch][best]):
                best = (y, z)
        grad[b, ch][best] += head[b, ch, i, j]
    return grad


@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (2, 1, 0), (3, 2, 1)],
                         ids=["k2-s2", "k2-s1-overlapping", "k3-s2-p1"])
def test_max_pool_tie_goes_to_first_element(kernel: int, stride: int, padding: int) -> None:
    data = np.array([[[[1.0, 1.0, 0.0, 2.0],
                       [1.0, 0.0, 2.0, 2.0],
                       [3.0, 3.0, 1.0, 1.0],
                       [3.0, 3.0, 1.0, 1.0]]]])
    x = tex.placeholder(data.shape, "float64", name="x")
    out = nn.pool2d(x, kernel, stride, 1, padding, "max")
    (g,) = _grad_ones(out, [x], {x: data})
    np.testing.assert_array_equal(g, ref_max_pool_grad(data, kernel, stride, padding,
                                                       np.ones(out.shape)))


@pytest.mark.parametrize("op", ["maximum", "minimum"])
def test_binary_tie_goes_to_first_operand(op: str) -> None:
    a = tex.placeholder((4,), "float64", name="a")
    b = tex.placeholder((4,), "float64", name="b")
    va = np.array([1.0, 2.0, -3.0, 0.0])
    vb = np.array([1.0, 1.0, -3.0, 5.0])  # ties at 0 and 2
    ga, gb = _grad_ones(getattr(topi, op)(a, b), [a, b], {a: va, b: vb})
    first = (va >= vb) if op == "maximum" else (va <= vb)
    np.testing.assert_array_equal(ga, first.astype(np.float64))
    np.testing.assert_array_equal(gb, (~first).astype(np.float64))
    np.testing.assert_array_equal(ga[[0, 2]], [1.0, 1.0])
    np.testing.assert_array_equal(gb[[0, 2]], [0.0, 0.0])


def test_abs_gradient_at_zero_is_zero() -> None:
    x = tex.placeholder((5,), "float64", name="x")
    (g,) = _grad_ones(topi.abs(x), [x], {x: np.array([-2.0, -0.0, 0.0, 1e-300, 3.0])})
    np.testing.assert_array_equal(g, [-1.0, 0.0, 0.0, 1.0, 1.0])


# -- PyTorch (skipped when torch is not installed) ---------------------------------------

@dataclass
class TorchCase:
    """``build(*placeholders)`` in tex and ``torch_fn(F, torch, *tensors)`` in PyTorch
    (``F`` is ``torch.nn.functional``) compute the same function."""

    id: str
    build: Callable[..., tex.Tensor]
    torch_fn: Callable[..., Any]
    inputs: list[Input] = field(default_factory=list)


TORCH_UNARY = [  # tex op, torch function name, sampler
    ("exp", "exp", "normal"), ("log", "log", "positive"), ("log2", "log2", "positive"),
    ("log10", "log10", "positive"), ("sqrt", "sqrt", "positive"),
    ("rsqrt", "rsqrt", "positive"), ("sin", "sin", "normal"), ("cos", "cos", "normal"),
    ("tan", "tan", "unit"), ("tanh", "tanh", "normal"), ("sigmoid", "sigmoid", "normal"),
    ("erf", "erf", "normal"), ("abs", "abs", DISTINCT), ("negative", "neg", "normal"),
]
TORCH_CASES: list[TorchCase] = [
    *(TorchCase(_op, getattr(topi, _op), lambda F, torch, a, n=_name: getattr(torch, n)(a),
                [Input((2, 3), _smp)]) for _op, _name, _smp in TORCH_UNARY),
    TorchCase("dense", nn.dense, lambda F, torch, x, w: F.linear(x, w),
              [Input((4, 5)), Input((3, 5))]),
    TorchCase("dense-bias", nn.dense, lambda F, torch, x, w, b: F.linear(x, w, b),
              [Input((4, 5)), Input((3, 5)), Input((3,))]),
    TorchCase("conv2d-s1-p0", lambda d, k: nn.conv2d(d, k, 1, 0),
              lambda F, torch, d, k: F.conv2d(d, k), [Input((1, 2, 5, 5)), Input((3, 2, 3, 3))]),
    TorchCase("conv2d-s2-p1", lambda d, k: nn.conv2d(d, k, 2, 1),
              lambda F, torch, d, k: F.conv2d(d, k, stride=2, padding=1),
              [Input((2, 2, 5, 5)), Input((3, 2, 3, 3))]),
    TorchCase("conv2d-d2", lambda d, k: nn.conv2d(d, k, 1, 1, 2),
              lambda F, torch, d, k: F.conv2d(d, k, padding=1, dilation=2),
              [Input((1, 2, 6, 6)), Input((2, 2, 3, 3))]),
    TorchCase("max_pool-k2-s2", lambda d: nn.pool2d(d, 2, 2, 1, 0, "max"),
              lambda F, torch, d: F.max_pool2d(d, 2, 2), [Input((1, 2, 4, 4), DISTINCT)]),
    TorchCase("max_pool-k3-s2-p1", lambda d: nn.pool2d(d, 3, 2, 1, 1, "max"),
              lambda F, torch, d: F.max_pool2d(d, 3, 2, 1), [Input((1, 2, 5, 5), DISTINCT)]),
    TorchCase("avg_pool-k3-s2-p1-exclude_pad",
              lambda d: nn.pool2d(d, 3, 2, 1, 1, "avg", count_include_pad=False),
              lambda F, torch, d: F.avg_pool2d(d, 3, 2, 1, count_include_pad=False),
              [Input((1, 2, 5, 5))]),
    TorchCase("softmax", nn.softmax, lambda F, torch, a: F.softmax(a, dim=-1),
              [Input((3, 4))]),
    TorchCase("log_softmax-axis0", lambda a: nn.log_softmax(a, 0),
              lambda F, torch, a: F.log_softmax(a, dim=0), [Input((3, 4))]),
    TorchCase("layer_norm", nn.layer_norm,
              lambda F, torch, a, g, b: F.layer_norm(a, (4,), g, b, eps=1e-5),
              [Input((3, 4)), Input((4,)), Input((4,))]),
    TorchCase("cross_entropy_with_logits", nn.cross_entropy_with_logits,
              lambda F, torch, z, t: -(F.log_softmax(z, dim=1) * t).sum() / z.shape[0],
              [Input((3, 4)), Input((3, 4), "prob")]),
]


@pytest.mark.parametrize("case_", TORCH_CASES, ids=[c.id for c in TORCH_CASES])
def test_grad_matches_torch(case_: TorchCase) -> None:
    torch = pytest.importorskip("torch")
    functional = torch.nn.functional
    rng = np.random.default_rng(seed_of(case_.id) + 3)
    holders, data = make_inputs(case_.inputs, rng)
    out = case_.build(*holders)
    head = tex.placeholder(out.shape, out.dtype, name="head")
    head_value = rng.standard_normal(out.shape)
    grads = evaluate(list(tex.differentiate(out, holders, head=head)),
                     {**data, head: head_value})
    tensors = [torch.tensor(data[h], dtype=torch.float64, requires_grad=True) for h in holders]
    y = case_.torch_fn(functional, torch, *tensors)
    assert tuple(y.shape) == out.shape
    np.testing.assert_allclose(evaluate(out, data), y.detach().numpy(), rtol=1e-10, atol=1e-12)
    (y * torch.tensor(head_value, dtype=torch.float64)).sum().backward()
    for h, g, t in zip(holders, grads, tensors):
        np.testing.assert_allclose(g, t.grad.numpy(), rtol=1e-9, atol=1e-12,
                                   err_msg=f"d/d{h.name}")
