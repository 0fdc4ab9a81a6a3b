"""The cost certificate: every topi op's gradient within 1.25x of a hand-written one.

Every case differentiates one topi op with respect to all its float tensor arguments, with a
placeholder head, and compares the backward's iterations, ``iteration_count(*grads,
given=[output])`` (the forward's tensors are on the tape), with the hand-written reference
``tex.topi.gradient_cost.handwritten_gradient_iterations`` (its conventions are in that
module's docstring). Shapes mix non-powers of two (5, 7, 13) and degenerate extents: 0-d
and extent-1 tensors, single-point reductions and windows, kernel 1, stride > kernel.

A case above 1.25x is named in ``DOCUMENTED`` with its bound and why (the README's autodiff
section names it too); a documented case that meets 1.25x fails as stale. Nothing is
skipped. Only counts are taken: nothing is compiled or evaluated.
"""
from __future__ import annotations

import inspect
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest

import tex
from tex import topi
from tex.autodiff import iteration_count
from tex.topi import nn
from tex.topi.gradient_cost import GRADIENT_COST, handwritten_gradient_iterations

RATIO = 1.25


@dataclass(frozen=True)
class F:
    """A float placeholder argument (differentiated)."""

    shape: tuple[int, ...]
    dtype: str = "float64"


@dataclass(frozen=True)
class Data:
    """A placeholder argument that is data, not differentiated (indices, conditions)."""

    shape: tuple[int, ...]
    dtype: str


@dataclass
class Case:
    id: str
    op: Callable[..., Any]
    args: tuple[Any, ...]
    kwargs: dict[str, Any] = field(default_factory=dict)
    pick: int | None = None  # which output of an op that returns a list


CASES: list[Case] = []


def case(id: str, op: Callable[..., Any], *args: Any, pick: int | None = None,
         **kwargs: Any) -> None:
    CASES.append(Case(id, op, args, kwargs, pick))


# -- elementwise -------------------------------------------------------------------------

UNARY = ["negative", "exp", "log", "log2", "log10", "sqrt", "rsqrt", "sin", "cos", "tan",
         "tanh", "sigmoid", "erf", "abs", "floor", "ceil", "round", "trunc"]
for _name in UNARY:
    for _shape in [(), (13,), (5, 1, 7)]:
        case(f"{_name}-{_shape}", getattr(topi, _name), F(_shape))
case("cast-f64-f32-(5, 7)", topi.cast, F((5, 7)), "float32")
case("cast-f32-f64-(13,)", topi.cast, F((13,), "float32"), "float64")
case("cast-f64-f64-()", topi.cast, F(()), "float64")  # astype is cast

BINARY = ["add", "subtract", "multiply", "divide", "power", "maximum", "minimum",
          "floor_mod", "floor_divide"]
BINARY_ARGS: list[tuple[str, tuple[Any, Any]]] = [
    ("same", (F((5, 7)), F((5, 7)))),
    ("broadcast", (F((5, 1, 7)), F((3, 1)))),
    ("0d", (F(()), F((13,)))),
    ("scalar", (F((7, 1)), 2.0)),
]
for _name in BINARY:
    for _id, _args in BINARY_ARGS:
        case(f"{_name}-{_id}", getattr(topi, _name), *_args)
case("clip-tensor-bounds", topi.clip, F((5, 7)), F((7,)), F((5, 1)))
case("clip-scalar-bounds", topi.clip, F((13,)), -0.5, 0.5)
case("clip-1", topi.clip, F((1,)), F(()), 0.5)
case("where-broadcast", topi.where, Data((5, 1), "bool"), F((1, 7)), F((7,)))
case("where-scalar-branch", topi.where, Data((13,), "bool"), F((13,)), 0.0)
case("where-0d", topi.where, Data((), "bool"), F((5, 7)), F(()))
case("elemwise_sum-3", topi.elemwise_sum, [F((5, 7)), F((5, 7)), F((5, 7))])
case("elemwise_sum-1", topi.elemwise_sum, [F((13,))])
case("elemwise_sum-data", topi.elemwise_sum, [F((5, 1, 7)), Data((5, 1, 7), "int32")])
case("broadcast_to-new-axes", topi.broadcast_to, F((5, 1)), (3, 5, 7))
case("broadcast_to-0d", topi.broadcast_to, F(()), (13,))
case("broadcast_to-same", topi.broadcast_to, F((7,)), (7,))
for _op in (topi.zeros_like, topi.ones_like):
    for _shape in [(), (13,), (5, 7)]:
        case(f"{_op.__name__}-{_shape}", _op, F(_shape))
for _shape in [(), (13,), (5, 7)]:
    case(f"full_like-{_shape}", topi.full_like, F(_shape), 1.5)

# -- reductions --------------------------------------------------------------------------

REDUCE_ARGS: list[tuple[str, tuple[int, ...], dict[str, Any]]] = [
    ("axis1", (5, 7, 3), {"axis": 1}),
    ("all", (13,), {}),
    ("single-point", (5, 1, 7), {"axis": 1}),
    ("outer-keepdims", (5, 7, 3), {"axis": (0, 2), "keepdims": True}),
    ("0d", (), {}),
]
for _name in ["sum", "mean", "max", "min", "prod", "logsumexp"]:
    for _id, _shape, _kw in REDUCE_ARGS:
        case(f"{_name}-{_id}", getattr(topi, _name), F(_shape), **_kw)

# -- shape transforms --------------------------------------------------------------------

case("reshape-2d", topi.reshape, F((5, 7)), (7, 5))
case("reshape-infer", topi.reshape, F((2, 3, 5)), (6, -1))
case("reshape-ones", topi.reshape, F((13,)), (1, 13, 1))
case("reshape-to-0d", topi.reshape, F((1,)), ())
case("transpose-reverse", topi.transpose, F((5, 7, 3)))
case("transpose-perm", topi.transpose, F((5, 7, 3)), (1, 0, 2))
case("transpose-1", topi.transpose, F((1, 13)))
case("expand_dims-middle", topi.expand_dims, F((5, 7)), 1, 2)
case("expand_dims-0d", topi.expand_dims, F(()), 0)
case("expand_dims-end", topi.expand_dims, F((13,)), -1)
case("squeeze-all", topi.squeeze, F((5, 1, 7, 1)))
case("squeeze-axis", topi.squeeze, F((1, 13)), 0)
case("squeeze-to-0d", topi.squeeze, F((1, 1)))
case("flip-0", topi.flip, F((5, 7)))
case("flip-all", topi.flip, F((5, 7, 3)), None)
case("flip-1", topi.flip, F((1, 13)), 0)
for _p in range(3):
    case(f"split-points-{_p}", topi.split, F((5, 7)), [2, 3], 1, pick=_p)
case("split-one-section", topi.split, F((13,)), 1, pick=0)
case("split-sections-1", topi.split, F((6, 5)), 3, pick=1)
case("concatenate-axis1", topi.concatenate, [F((5, 7)), F((5, 3))], 1)
case("concatenate-axis0", topi.concatenate, [F((1, 7)), F((13, 7)), F((2, 7))])
case("concatenate-one", topi.concatenate, [F((5,))])
case("stack-axis0", topi.stack, [F((5, 7)), F((5, 7))])
case("stack-last", topi.stack, [F((13,)), F((13,)), F((13,))], -1)
case("stack-0d", topi.stack, [F(()), F(())])
case("take-axis0", topi.take, F((5, 7)), Data((4,), "int32"), 0)
case("take-flat", topi.take, F((13,)), Data((2, 3), "int32"))
case("take-last-wrap", topi.take, F((5, 7, 3)), Data((1,), "int32"), 2, "wrap")

# -- contractions ------------------------------------------------------------------------

case("einsum-matmul", topi.einsum, "ij,jk->ik", F((5, 7)), F((7, 3)))
case("einsum-diagonal", topi.einsum, "ii->i", F((5, 5)))
case("einsum-total", topi.einsum, "ij->", F((13, 1)))
case("einsum-ellipsis-broadcast", topi.einsum, "...ij,...jk->...ik", F((2, 1, 5, 7)),
     F((3, 7, 3)))
case("einsum-chain", topi.einsum, "ij,jk,kl->il", F((5, 7)), F((7, 3)), F((3, 2)))
case("einsum-outer", topi.einsum, "i,j->ij", F((13,)), F((1,)))
case("tensordot-1", topi.tensordot, F((5, 7)), F((7, 3)), 1)
case("tensordot-0", topi.tensordot, F((5,)), F((3,)), 0)
case("tensordot-2", topi.tensordot, F((5, 7, 3)), F((7, 3, 2)), 2)
case("tensordot-pairs", topi.tensordot, F((3, 5, 7)), F((5, 3, 2)), ([1, 0], [0, 1]))
case("matmul-2d", topi.matmul, F((5, 7)), F((7, 3)))
case("matmul-vectors", topi.matmul, F((13,)), F((13,)))
case("matmul-batch-broadcast", topi.matmul, F((2, 1, 5, 7)), F((3, 7, 1)))
case("matmul-vector-matrix", topi.matmul, F((7,)), F((2, 7, 5)))
case("dense", nn.dense, F((5, 7)), F((3, 7)))
case("dense-bias", nn.dense, F((5, 7)), F((3, 7)), F((3,)))
case("dense-1", nn.dense, F((1, 13)), F((1, 13)), F((1,)))
case("batch_matmul-NT", nn.batch_matmul, F((2, 5, 7)), F((2, 3, 7)))
case("batch_matmul-NN-broadcast", nn.batch_matmul, F((1, 5, 7)), F((3, 7, 3)), False, False)
case("batch_matmul-TN-broadcast", nn.batch_matmul, F((3, 7, 5)), F((1, 7, 2)), True, False)
case("batch_matmul-1", nn.batch_matmul, F((1, 1, 13)), F((1, 1, 13)))

# -- windows: conv2d, pool2d -------------------------------------------------------------

CONV = [  # id, data, kernel, stride, padding, dilation
    ("k3-s1-p1", (2, 3, 7, 7), (4, 3, 3, 3), 1, 1, 1),
    ("k3-s1-p0-13x5", (1, 2, 13, 5), (3, 2, 3, 3), 1, 0, 1),
    ("k1", (2, 3, 7, 5), (4, 3, 1, 1), 1, 0, 1),
    ("k2-s2", (2, 3, 7, 7), (4, 3, 2, 2), 2, 0, 1),
    ("k3-s2-p1", (2, 3, 7, 7), (4, 3, 3, 3), 2, 1, 1),
    ("k5-s2-p2", (1, 2, 13, 13), (3, 2, 5, 5), 2, 2, 1),
    ("k1-s3", (2, 3, 7, 7), (4, 3, 1, 1), 3, 0, 1),
    ("k2-s3", (1, 2, 13, 7), (2, 2, 2, 2), 3, 0, 1),
    ("k3-d2", (1, 2, 7, 7), (2, 2, 3, 3), 1, 1, 2),
    ("k3-s2-d2", (1, 2, 13, 13), (2, 2, 3, 3), 2, 2, 2),
    ("k2-s2-d3", (1, 2, 7, 7), (2, 2, 2, 2), 2, 0, 3),
    ("mixed", (2, 1, 5, 4), (2, 1, 2, 3), (2, 1), (0, 1, 2, 1), 1),
    ("whole-input", (1, 3, 5, 5), (2, 3, 5, 5), 1, 0, 1),
]
for _id, _d, _k, _s, _p, _dl in CONV:
    case(f"conv2d-{_id}", nn.conv2d, F(_d), F(_k), _s, _p, _dl)

POOL = [  # id, data, kernel, stride, dilation, padding, type, keywords
    ("max-k2-s2", (2, 3, 7, 7), 2, 2, 1, 0, "max", {}),
    ("max-k3-s1-p1", (1, 2, 7, 5), 3, 1, 1, 1, "max", {}),
    ("max-k3-s2-p1", (2, 3, 7, 7), 3, 2, 1, 1, "max", {}),
    ("max-k1", (1, 2, 7, 5), 1, 1, 1, 0, "max", {}),
    ("max-k1-s3", (1, 2, 7, 7), 1, 3, 1, 0, "max", {}),
    ("max-k2-s3", (1, 2, 13, 13), 2, 3, 1, 0, "max", {}),
    ("max-global", (2, 3, 5, 7), (5, 7), 1, 1, 0, "max", {}),
    ("max-k3-s3-ceil", (1, 1, 7, 7), 3, 3, 1, 1, "max", {"ceil_mode": True}),
    ("max-dilated", (1, 1, 7, 5), (3, 2), (2, 1), 2, (1, 0), "max", {}),
    ("avg-k2-s2", (2, 3, 5, 5), 2, 2, 1, 0, "avg", {}),
    ("avg-k3-s1-p1", (1, 2, 13, 5), 3, 1, 1, 1, "avg", {}),
    ("avg-k3-s2-p1", (2, 3, 7, 7), 3, 2, 1, 1, "avg", {}),
    ("avg-k3-s2-p1-exclude", (2, 3, 7, 7), 3, 2, 1, 1, "avg", {"count_include_pad": False}),
    ("avg-k3-s2-ceil", (1, 1, 6, 6), 3, 2, 1, 1, "avg", {"ceil_mode": True}),
    ("avg-global", (2, 3, 7, 5), (7, 5), 1, 1, 0, "avg", {}),
    ("avg-k1-s2", (1, 2, 7, 7), 1, 2, 1, 0, "avg", {}),
]
for _id, _d, _k, _s, _dl, _p, _t, _kw in POOL:
    case(f"pool2d-{_id}", nn.pool2d, F(_d), _k, _s, _dl, _p, _t, **_kw)
case("pool-avg-k2-s2", nn.pool, F((1, 1, 4, 4)), 2, 2, 0, "avg")
# the layouts TVM names: the same windows over other dimension orders
case("conv2d-nhwc-same-s2", nn.conv2d, F((2, 7, 5, 3)), F((3, 3, 3, 4)), 2, "SAME",
     layout="NHWC")
case("conv2d-hwcn-ohwi", nn.conv2d, F((7, 7, 3, 2)), F((4, 3, 3, 3)), 1, 1, 1, "HWCN", "OHWI")
CONV_TVM = [  # id, data (NCHW), kernel (OIHW), stride, padding, dilation
    ("k3-s1-same", (2, 3, 7, 5), (4, 3, 3, 3), 1, "SAME", 1),
    ("k2-s2-valid", (1, 2, 7, 7), (3, 2, 2, 2), 2, "VALID", 1),
    ("k3-s2-d2-p1", (1, 2, 13, 7), (2, 2, 3, 3), 2, (1, 0, 2, 1), 2),
]
for _id, (_n, _c, _h, _w), (_o, _i, _kh, _kw), _s, _p, _dl in CONV_TVM:
    case(f"conv2d_nchw-{_id}", nn.conv2d_nchw, F((_n, _c, _h, _w)), F((_o, _i, _kh, _kw)), _s,
         _p, _dl)
    case(f"conv2d_nhwc-{_id}", nn.conv2d_nhwc, F((_n, _h, _w, _c)), F((_kh, _kw, _i, _o)), _s,
         _p, _dl, "float64")
    case(f"conv2d_hwcn-{_id}", nn.conv2d_hwcn, F((_h, _w, _c, _n)), F((_kh, _kw, _i, _o)), _s,
         _p, _dl)
case("pool2d-nhwc-max-same-s2", nn.pool2d, F((2, 7, 5, 3)), 3, 2, 1, "SAME", "max",
     layout="NHWC")
case("pool2d-nhwc-avg-k3-s1-p1", nn.pool2d, F((1, 7, 7, 2)), 3, 1, 1, 1, "avg",
     layout="NHWC", count_include_pad=False)
case("pool-max-k3-s1-p1", nn.pool, F((1, 2, 5, 7)), 3, 1, 1, "max")
case("pool-max-k1", nn.pool, F((2, 1, 13, 1)), 1, 1, 0, "max")

# -- activations, normalization, losses --------------------------------------------------

for _shape in [(), (13,), (5, 1, 7)]:
    case(f"relu-{_shape}", nn.relu, F(_shape))
    case(f"leaky_relu-{_shape}", nn.leaky_relu, F(_shape), 0.1)
for _shape, _axis in [((5, 7), -1), ((5, 7), 0), ((13,), 0), ((5, 1), 1)]:
    case(f"softmax-{_shape}-axis{_axis}", nn.softmax, F(_shape), _axis)
    case(f"log_softmax-{_shape}-axis{_axis}", nn.log_softmax, F(_shape), _axis)
case("layer_norm-last", nn.layer_norm, F((5, 7)), F((7,)), F((7,)))
case("layer_norm-two-axes", nn.layer_norm, F((2, 3, 5)), F((3, 5)), F((3, 5)), (1, 2))
case("layer_norm-outer-axes", nn.layer_norm, F((2, 3, 5)), F((2, 5)), F((2, 5)), (0, 2))
case("layer_norm-single-point", nn.layer_norm, F((13, 1)), F((1,)), F((1,)))
case("batch_norm-nchw", nn.batch_norm, F((2, 3, 5, 5)), F((3,)), F((3,)), F((3,)), F((3,)),
     pick=0)
case("batch_norm-last-axis", nn.batch_norm, F((13, 3)), F((3,)), F((3,)), F((3,)), F((3,)),
     -1, pick=0)
case("batch_norm-axis0", nn.batch_norm, F((7, 5)), F((7,)), F((7,)), F((7,)), F((7,)), 0,
     pick=0)
case("batch_norm-1", nn.batch_norm, F((1, 1, 1, 1)), F((1,)), F((1,)), F((1,)), F((1,)),
     pick=0)
case("flatten-4d", nn.flatten, F((2, 3, 5, 7)))
case("flatten-1d", nn.flatten, F((13,)))
case("flatten-ones", nn.flatten, F((1, 1, 1)))
case("pad-2d", nn.pad, F((5, 7)), [1, 2], [2, 0])
case("pad-1d", nn.pad, F((13,)), [0], [3])
case("pad-value", nn.pad, F((2, 3, 5)), [1, 0, 1], None, -5.0)
for _shape in [(5, 7), (1, 13), (13, 1)]:
    case(f"cross_entropy-{_shape}", nn.cross_entropy, F(_shape), F(_shape))
    case(f"cross_entropy_with_logits-{_shape}", nn.cross_entropy_with_logits, F(_shape),
         F(_shape))


# -- cases above 1.25x -------------------------------------------------------------------

# case id -> (the ratio it is held to, why it cannot meet 1.25x); the README's autodiff
# section names each. None today: every op meets 1.25x but the strided windows below.
# strided average pooling with overlapping windows: the gradient's stride phases are dense
# sums over their own taps, merged into the input gradient by one select pass; a
# hand-written polyphase loop stores each phase in place (strided) instead. With only
# k^2/s^2 taps per point to sum (2.25 for 3x3/2), that pass is a third of the work.
_MERGE = "the stride phases are merged by one more pass over the input gradient"
DOCUMENTED: dict[str, tuple[float, str]] = {
    "pool2d-avg-k3-s2-p1": (1.34, _MERGE),
    "pool2d-avg-k3-s2-p1-exclude": (1.34, _MERGE),
    "pool2d-avg-k3-s2-ceil": (1.34, _MERGE),
}


# -- the test ----------------------------------------------------------------------------

def _materialize(value: Any, holders: list[tex.Tensor], wrt: list[tex.Tensor]) -> Any:
    """Placeholders ``in0, in1, ...`` for the ``F``/``Data`` markers in an argument."""
    if isinstance(value, (list, tuple)) and any(isinstance(v, (F, Data)) for v in value):
        return type(value)(_materialize(v, holders, wrt) for v in value)
    if isinstance(value, F):
        t = tex.placeholder(value.shape, value.dtype, name=f"in{len(holders)}")
        wrt.append(t)
    elif isinstance(value, Data):
        t = tex.placeholder(value.shape, value.dtype, name=f"in{len(holders)}")
    else:
        return value
    holders.append(t)
    return t


def measure(c: Case) -> tuple[int, int]:
    """(tex's backward iterations, the hand-written reference) of one case."""
    holders: list[tex.Tensor] = []
    wrt: list[tex.Tensor] = []
    args = tuple(_materialize(a, holders, wrt) for a in c.args)
    kwargs = {k: _materialize(v, holders, wrt) for k, v in c.kwargs.items()}
    out = c.op(*args, **kwargs)
    y = out[c.pick] if c.pick is not None else out
    head = tex.placeholder(y.shape, y.dtype, name="head")
    grads = tex.differentiate(y, wrt, head=head)
    return (iteration_count(*grads, given=[y]),
            handwritten_gradient_iterations(c.op, *args, **kwargs))


@pytest.mark.parametrize("c", [pytest.param(c, id=c.id) for c in CASES])
def test_gradient_within_bound_of_handwritten(c: Case) -> None:
    got, hand = measure(c)
    bound, why = DOCUMENTED.get(c.id, (RATIO, ""))
    assert hand > 0
    assert got <= bound * hand, (
        f"{c.id}: the gradient takes {got} iterations, {got / hand:.2f}x the hand-written "
        f"{hand} (bound {bound}x{'; ' + why if why else ''})")


def test_documented_bounds_are_needed() -> None:
    """A documented exception that meets 1.25x now is stale: remove it (and its README
    line)."""
    stale = []
    for c in CASES:
        if c.id in DOCUMENTED:
            got, hand = measure(c)
            if got <= RATIO * hand:
                stale.append(c.id)
    assert not stale, f"these cases meet {RATIO}x now: {stale}"


def test_exception_names_are_cases() -> None:
    ids = {c.id for c in CASES}
    assert len(ids) == len(CASES), "case ids must be unique"
    assert set(DOCUMENTED) <= ids


# -- the table is complete ---------------------------------------------------------------

# public topi functions without a gradient, and why
NOT_DIFFERENTIABLE: dict[Callable[..., Any], str] = {
    **{getattr(topi, name): "bool-valued comparison: its gradient is zero by convention"
       for name in ("equal", "not_equal", "greater", "greater_equal", "less",
                    "less_equal")},
    **{getattr(topi, name): "logical op on bool tensors: nothing to differentiate"
       for name in ("logical_and", "logical_or", "logical_not", "all", "any")},
    topi.argmax: "integer-valued (an index): its gradient is zero by convention",
    topi.argmin: "integer-valued (an index): its gradient is zero by convention",
    topi.full: "no tensor argument: nothing to differentiate",
}


def _public_functions() -> dict[str, Callable[..., Any]]:
    found = {}
    for module in (topi, nn):
        for name in module.__all__:
            f = getattr(module, name)
            if inspect.isfunction(f):
                found[f"{module.__name__}.{name}"] = f
    return found


def test_every_public_topi_function_has_a_reference() -> None:
    missing = [name for name, f in _public_functions().items()
               if f not in GRADIENT_COST and f not in NOT_DIFFERENTIABLE]
    assert not missing, (f"no hand-written gradient cost for {missing}: add a formula to "
                         "tex.topi.gradient_cost.GRADIENT_COST, or an entry with its reason "
                         "to NOT_DIFFERENTIABLE here")
    both = [f.__name__ for f in NOT_DIFFERENTIABLE if f in GRADIENT_COST]
    assert not both, f"{both} have a formula: remove them from NOT_DIFFERENTIABLE"


def test_every_reference_is_measured_at_three_shapes() -> None:
    count: dict[Callable[..., Any], int] = {}
    for c in CASES:
        count[c.op] = count.get(c.op, 0) + 1
    few = [f.__name__ for f in GRADIENT_COST if count.get(f, 0) < 3]
    assert not few, f"fewer than three cases for {few}"


def test_unknown_op_is_refused() -> None:
    with pytest.raises(ValueError, match="no hand-written reference for 'argmax'"):
        handwritten_gradient_iterations(topi.argmax, tex.placeholder((3,)))


def test_report_prints_the_ratio_to_a_reference() -> None:
    x = tex.placeholder((5, 7), "float64", name="x")
    y = topi.max(x, axis=1)
    res = tex.differentiate(y, [x], head=tex.placeholder(y.shape, y.dtype, name="H"))
    hand = handwritten_gradient_iterations(topi.max, x, axis=1)
    assert hand == 2 * 35  # the argmax found again, then one pass
    rep = tex.autodiff.report(res, file=None, reference=hand)
    assert rep.backward_iterations == iteration_count(*res, given=[y]) == 70
    assert rep.reference_ratio == 1.0
    assert "hand-written reference: 70 (1.00x)" in str(rep)
    assert tex.autodiff.report(res, file=None).reference_ratio is None
    with pytest.raises(TypeError, match="reference must be a non-negative int"):
        tex.autodiff.report(res, file=None, reference=1.5)  # type: ignore[arg-type]
