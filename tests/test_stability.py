"""Numerical stability: large inputs, IEEE domain edges and exact ties, in the interpreter
and in compiled code.

1. softmax, log_softmax, logsumexp, sigmoid, tanh and the two cross entropies on float32
   inputs up to +-1e4 (rows mixing -1e4, 0 and 1e4, rows of all +-1e4, large equal
   values): forward and gradient (``tex.differentiate`` with a random head) are finite and
   match hand-written stable float64 NumPy references, in ``tex.testing.evaluate``, in
   ``tex.build`` (default auto schedule) and in ``tex.build(..., fastmath=True)``. The
   stable formulas never form an inf or a nan on these inputs, so fast-math (which lets
   LLVM assume there are none) keeps them finite; it may reassociate ``x - max - log(s)``
   into ``x - (max + log(s))``, so its tolerance is a few ulp of the inputs (1e4), not of
   the outputs. ``cross_entropy`` on probabilities takes ``0 * log(0) = 0``, so a softmax
   that underflowed to 0 where the target is 0 gives a finite loss and gradient.
2. Domain edges follow IEEE: ``sqrt'(0) = log'(0) = +inf``, ``log(-1) = sqrt(-1) = nan``
   and the derivatives computed from them nan, ``rsqrt`` and ``power(x, 0.5)`` likewise
   (``pow(-0, 0.5) = +0``, ``pow(-inf, 0.5) = +inf`` as C's ``pow``; ``d/da a^b = 0`` at
   ``b = 0`` and ``d/db a^b = 0`` at ``a = 0, b >= 0``, PyTorch's conventions);
   the interpreter and the compiled code agree element for element (inf and nan included)
   and neither raises or warns (these tests turn warnings into errors; the interpreter
   evaluates under ``np.errstate(all="ignore")`` because an inf of the user's program is a
   result, not a fault). Only the default build is checked here: ``fastmath=True`` gives
   LLVM the ``nnan``/``ninf`` flags, under which inf and nan results are not guaranteed.
3. Exact ties follow the rule documented in ``tex.autodiff.derivative`` and the README:
   a ``max``/``min`` reduction (and max pooling) sends the whole gradient to the first
   selected element (lowest flat reduce index); binary ``max(a, b)``/``min(a, b)`` and
   ``topi.maximum``/``minimum`` send it to ``a`` on ties; so ``relu = max(x, 0)`` has
   ``relu'(0) = 1`` (as TVM's ``te.gradient``; PyTorch uses 0). Checked in the interpreter
   and in compiled code, float32.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import tex
from tex import topi
from tex.testing import evaluate
from tex.topi import nn

from test_autodiff_ops import ref_max_pool_grad

Array = np.ndarray

# tex itself must not warn on infs and nans (the interpreter evaluates under np.errstate);
# the float64 references below do their own np.errstate
pytestmark = pytest.mark.filterwarnings("error")

MODES = ["interp", "llvm", "llvm-fastmath"]
EXACT_MODES = ["interp", "llvm"]  # inf/nan results: fast-math may legitimately break them
SENTINEL = 12345.0  # compiled outputs start at this, so an unwritten element shows


def run(outs: list[tex.Tensor], feed: dict[tex.Tensor, Array], mode: str) -> list[Array]:
    """The values of ``outs`` in the interpreter or in compiled code (one function). An
    output may be a placeholder (the gradient of ``y = x`` is the head itself): its value
    is what was fed."""
    if mode == "interp":
        return evaluate(list(outs), feed)
    f = tex.build(list(outs), fastmath=(mode == "llvm-fastmath"))
    values = {}
    for a in f.args:
        values[a] = feed[a] if a in feed else np.full(a.shape, SENTINEL, a.dtype.numpy)
    f(*values.values())
    return [values[t] for t in outs]


def value_and_grad(make: Callable[..., tex.Tensor], inputs: list[Array], head: Array,
                   mode: str) -> tuple[Array, list[Array]]:
    """``y = make(*placeholders)`` and the gradients of ``<head, y>`` w.r.t. every input."""
    xs = [tex.placeholder(v.shape, str(v.dtype), name=f"x{k}") for k, v in enumerate(inputs)]
    y = make(*xs)
    h = tex.placeholder(y.shape, y.dtype, name="head")
    grads = list(tex.differentiate(y, xs, h))
    out = run([y, *grads], {**dict(zip(xs, inputs)), h: head}, mode)
    return out[0], out[1:]


# -- 1. large inputs -------------------------------------------------------------------

X = np.array([[-1e4, 0.0, 1e4, 1.0],
              [1e4, 1e4, 1e4, 1e4],
              [-1e4, -1e4, -1e4, -1e4],
              [5e3, 5e3, -3.0, 5e3],
              [1e4, 9999.0, 9998.0, -1e4],
              [0.3, -1.2, 2.5, 0.7]], dtype=np.float32)
# one-hot rows (on a -1e4 entry: loss 2e4, still finite; on a tied max; on the max) and
# soft rows
T = np.array([[1.0, 0.0, 0.0, 0.0],
              [0.25, 0.25, 0.25, 0.25],
              [0.0, 1.0, 0.0, 0.0],
              [0.0, 0.0, 0.0, 1.0],
              [1.0, 0.0, 0.0, 0.0],
              [0.1, 0.2, 0.3, 0.4]], dtype=np.float32)
B = X.shape[0]


def _softmax64(x: Array) -> Array:
    e = np.exp(x - x.max(axis=-1, keepdims=True))
    return e / e.sum(axis=-1, keepdims=True)


def _log_softmax64(x: Array) -> Array:
    s = x - x.max(axis=-1, keepdims=True)
    return s - np.log(np.exp(s).sum(axis=-1, keepdims=True))


def _sigmoid64(x: Array) -> Array:
    e = np.exp(-np.abs(x))
    return np.where(x >= 0, 1.0 / (1.0 + e), e / (1.0 + e))


def _lse64(x: Array, axis: int | None) -> Array:
    m = x.max(axis=axis, keepdims=True)
    out = m + np.log(np.exp(x - m).sum(axis=axis, keepdims=True))
    return out.reshape(()) if axis is None else out.squeeze(axis)


def _lse_vjp64(x: Array, h: Array, axis: int | None) -> Array:
    m = x.max(axis=axis, keepdims=True)
    e = np.exp(x - m)
    p = e / e.sum(axis=axis, keepdims=True)
    return p * (h if axis is None else np.expand_dims(h, axis))


@dataclass(frozen=True)
class Stable:
    name: str
    make: Callable[..., tex.Tensor]
    ref: Callable[[Array, Array], Array]  # (x, t) -> y, float64
    vjp: Callable[[Array, Array, Array], Array]  # (x, t, head) -> dL/dx, float64
    with_targets: bool = False


STABLE = [
    Stable("softmax", nn.softmax, lambda x, t: _softmax64(x),
           lambda x, t, h: _softmax64(x) * (h - (_softmax64(x) * h).sum(-1, keepdims=True))),
    Stable("log_softmax", nn.log_softmax, lambda x, t: _log_softmax64(x),
           lambda x, t, h: h - _softmax64(x) * h.sum(-1, keepdims=True)),
    Stable("logsumexp-axis1", lambda x: topi.logsumexp(x, axis=1),
           lambda x, t: _lse64(x, 1), lambda x, t, h: _lse_vjp64(x, h, 1)),
    Stable("logsumexp-all", lambda x: topi.logsumexp(x),
           lambda x, t: _lse64(x, None), lambda x, t, h: _lse_vjp64(x, h, None)),
    Stable("sigmoid", topi.sigmoid, lambda x, t: _sigmoid64(x),
           # s(x) (1 - s(x)) = s(|x|) s(-|x|), without cancellation
           lambda x, t, h: h * _sigmoid64(np.abs(x)) * _sigmoid64(-np.abs(x))),
    Stable("tanh", topi.tanh, lambda x, t: np.tanh(x),
           lambda x, t, h: h * (1.0 - np.tanh(x) ** 2)),
    Stable("cross_entropy_with_logits", nn.cross_entropy_with_logits,
           lambda x, t: -(_log_softmax64(x) * t).sum() / B,
           lambda x, t, h: h * (_softmax64(x) * t.sum(-1, keepdims=True) - t) / B,
           with_targets=True),
    # probabilities from a softmax of +-1e4 logits are exactly 0 and 1: the loss and its
    # gradient stay finite where the target is 0 (0 * log(0) counts as 0)
    Stable("softmax-cross_entropy", lambda x, t: nn.cross_entropy(nn.softmax(x), t),
           lambda x, t: -(_log_softmax64(x) * t).sum() / B,
           lambda x, t, h: h * (_softmax64(x) * t.sum(-1, keepdims=True) - t) / B,
           with_targets=True),
]


# fast-math may reassociate: ``x - max - log(s)`` may become ``x - (max + log(s))``, which
# rounds at the inputs' magnitude (ulp(1e4) = 2^-10); its tolerance scales with them
FASTMATH_ATOL = 4 * float(np.spacing(np.float32(1e4)))


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("case", STABLE, ids=[c.name for c in STABLE])
def test_large_inputs_forward_and_gradient(case: Stable, mode: str) -> None:
    x64, t64 = X.astype(np.float64), T.astype(np.float64)
    if case.name == "softmax-cross_entropy":
        # targets only where the probability is not 0: log(0) * 1 would be a true +inf
        t64 = (_softmax64(x64) > 0) * t64
    expected = case.ref(x64, t64)
    rng = np.random.default_rng(7)
    head = rng.uniform(-2.0, 2.0, np.shape(expected)).astype(np.float32)
    inputs = [X, t64.astype(np.float32)] if case.with_targets else [X]
    y, grads = value_and_grad(case.make, inputs, head, mode)
    assert np.isfinite(y).all() and np.isfinite(grads[0]).all(), (y, grads[0])
    fast = mode == "llvm-fastmath"
    np.testing.assert_allclose(y, expected, rtol=2e-6, atol=FASTMATH_ATOL if fast else 1e-6)
    np.testing.assert_allclose(grads[0], case.vjp(x64, t64, head.astype(np.float64)),
                               rtol=1e-5, atol=2 * FASTMATH_ATOL if fast else 1e-6)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("op", ["sigmoid", "tanh"])
def test_saturated_activation_gradient_is_zero(op: str, mode: str) -> None:
    """sigmoid/tanh at +-200 and +-1e4 are exactly saturated in float32 and their gradients
    exactly 0 (fast-math: within one ulp of 1, its reciprocal may be approximate)."""
    x = np.array([-1e4, -200.0, 200.0, 1e4, 0.0], np.float32)
    y, (g,) = value_and_grad(getattr(topi, op), [x], np.ones(5, np.float32), mode)
    low, mid, slope = (0.0, 0.5, 0.25) if op == "sigmoid" else (-1.0, 0.0, 1.0)
    atol = float(np.spacing(np.float32(1.0))) if mode == "llvm-fastmath" else 0.0
    np.testing.assert_allclose(y, [low, low, 1.0, 1.0, mid], rtol=0, atol=atol)
    np.testing.assert_allclose(g, [0.0, 0.0, 0.0, 0.0, slope], rtol=0, atol=atol)


@pytest.mark.parametrize("mode", MODES)
def test_softmax_of_equal_large_values_is_uniform(mode: str) -> None:
    x = np.full((2, 8), 1e4, np.float32)
    x[1] = -1e4
    y, (g,) = value_and_grad(nn.softmax, [x], np.arange(16, dtype=np.float32).reshape(2, 8),
                             mode)
    np.testing.assert_array_equal(y, 0.125)
    # p (h - <p, h>) with p = 1/8: (h - mean(h)) / 8
    h = np.arange(16.0).reshape(2, 8)
    np.testing.assert_allclose(g, (h - h.mean(1, keepdims=True)) / 8, rtol=1e-6, atol=1e-6)


@pytest.mark.parametrize("mode", EXACT_MODES)
def test_cross_entropy_zero_probability_zero_target(mode: str) -> None:
    """``0 * log(0)`` is 0 in the loss and in both gradients; a nonzero target on a zero
    probability is a true infinite loss (and an infinite gradient), not a nan."""
    p = np.array([[1.0, 0.0, 0.0], [0.0, 0.5, 0.5]], np.float32)
    t = np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    y, (gp, gt) = value_and_grad(nn.cross_entropy, [p, t], np.array(1.0, np.float32), mode)
    np.testing.assert_allclose(y, np.log(2.0) / 2, rtol=1e-6)
    np.testing.assert_allclose(gp, [[-0.5, 0.0, 0.0], [0.0, -1.0, 0.0]], rtol=1e-6)
    # d/dt = -log(p) / batch; at p = t = 0 the 0 * log(0) convention gives 0
    np.testing.assert_allclose(gt, [[0.0, 0.0, 0.0], [0.0, np.log(2) / 2, np.log(2) / 2]],
                               rtol=1e-6)
    t_bad = np.array([[0.0, 1.0, 0.0], [0.0, 1.0, 0.0]], np.float32)
    y, (gp, _) = value_and_grad(nn.cross_entropy, [p, t_bad], np.array(1.0, np.float32), mode)
    assert y == np.inf
    assert gp[0, 1] == -np.inf and gp[0, 0] == 0.0 and gp[0, 2] == 0.0


# -- 2. domain edges: IEEE inf and nan, never an exception or a warning ---------------------

EDGE_X = np.array([0.0, -1.0, 4.0, 0.25, np.inf], np.float32)


def _ieee(fn: Callable[[Array], Array]) -> Callable[[Array], Array]:
    def call(x: Array) -> Array:
        with np.errstate(divide="ignore", invalid="ignore"):
            return fn(x.astype(np.float64))
    return call


EDGES = [
    # name, op, f(x), f'(x) (float64 references on EDGE_X)
    ("sqrt", topi.sqrt, _ieee(np.sqrt), _ieee(lambda x: 0.5 / np.sqrt(x))),
    ("log", topi.log, _ieee(np.log), _ieee(lambda x: 1.0 / x)),  # log'(-1) = -1, as torch
    ("log2", tex.log2, _ieee(np.log2), _ieee(lambda x: 1.0 / (x * np.log(2.0)))),
    ("log10", tex.log10, _ieee(np.log10), _ieee(lambda x: 1.0 / (x * np.log(10.0)))),
    ("rsqrt", tex.rsqrt, _ieee(lambda x: 1.0 / np.sqrt(x)),
     _ieee(lambda x: -0.5 / (x * np.sqrt(x)))),
    ("power-0.5", lambda x: topi.power(x, 0.5), _ieee(np.sqrt),
     _ieee(lambda x: 0.5 * x ** -0.5)),
    ("power-2", lambda x: topi.power(x, 2.0), _ieee(np.square), _ieee(lambda x: 2.0 * x)),
    ("reciprocal", lambda x: 1.0 / x, _ieee(lambda x: 1.0 / x), _ieee(lambda x: -1.0 / x**2)),
]


def _elementwise(op: Callable[[tex.Expr], tex.Expr]) -> Callable[[tex.Tensor], tex.Tensor]:
    """A tensor op from a scalar intrinsic (``tex.log2`` etc.); tensor ops pass through."""
    def make(x: tex.Tensor) -> tex.Tensor:
        try:
            return op(x)
        except TypeError:
            return tex.compute(x.shape, lambda i: op(x[i]), name="T_edge")
    return make


@pytest.mark.parametrize("mode", EXACT_MODES)
@pytest.mark.parametrize("name,op,f,df", EDGES, ids=[e[0] for e in EDGES])
def test_domain_edges_follow_ieee(name: str, op: Callable, f: Callable, df: Callable,
                                  mode: str) -> None:
    y, (g,) = value_and_grad(_elementwise(op), [EDGE_X], np.ones(5, np.float32), mode)
    expected_y, expected_g = f(EDGE_X), df(EDGE_X)
    # same inf and nan positions (signs included), finite values to float32 rounding
    np.testing.assert_allclose(y, expected_y, rtol=1e-6, atol=0)
    np.testing.assert_allclose(g, expected_g, rtol=1e-6, atol=0)


def _agree(a: Array, b: Array, what: str) -> None:
    """nan where nan, the same infinities, the same signs (-0 is not +0), finite values
    equal up to the libraries' rounding (NumPy's libm against tex's own log, exp)."""
    np.testing.assert_allclose(a, b, rtol=1e-6, atol=0, err_msg=what)
    np.testing.assert_array_equal(np.signbit(a[~np.isnan(a)]), np.signbit(b[~np.isnan(b)]),
                                  err_msg=what)


@pytest.mark.parametrize("name,op,f,df", EDGES, ids=[e[0] for e in EDGES])
def test_domain_edges_interpreter_and_compiled_agree(name: str, op: Callable, f: Callable,
                                                    df: Callable) -> None:
    x = np.array([0.0, -0.0, -1.0, np.inf, -np.inf, np.nan, 1e-45], np.float32)
    head = np.ones(7, np.float32)
    interp = value_and_grad(_elementwise(op), [x], head, "interp")
    llvm = value_and_grad(_elementwise(op), [x], head, "llvm")
    _agree(interp[0], llvm[0], f"{name} forward")
    _agree(interp[1][0], llvm[1][0], f"{name} gradient")


@pytest.mark.parametrize("mode", EXACT_MODES)
def test_power_gradients_at_zero_base_and_exponent(mode: str) -> None:
    """``a ** b`` with both differentiated: ``d/da = b a^(b-1)`` is 0 where ``b = 0`` and
    ``d/db = a^b log(a)`` is 0 where ``a = 0, b >= 0`` (PyTorch's conventions; IEEE would
    give ``0 * inf = nan`` for a function constant there); elsewhere IEEE."""
    a = np.array([0.0, 0.0, 0.0, 0.0, 2.0, -1.0, 0.0], np.float32)
    b = np.array([0.0, 1.0, 2.0, -1.0, 0.0, 0.5, 0.5], np.float32)
    y, (ga, gb) = value_and_grad(topi.power, [a, b], np.ones(7, np.float32), mode)
    np.testing.assert_array_equal(y, [1.0, 0.0, 0.0, np.inf, 1.0, np.nan, 0.0])
    np.testing.assert_array_equal(ga, [0.0, 1.0, 0.0, -np.inf, 0.0, np.nan, np.inf])
    np.testing.assert_allclose(gb, [0.0, 0.0, 0.0, -np.inf, np.log(2.0), np.nan, 0.0],
                               rtol=1e-6)


# -- 3. exact ties ---------------------------------------------------------------------

TIES = np.array([[1.0, 3.0, 3.0, 2.0],
                 [5.0, 5.0, 5.0, 5.0],
                 [0.0, -1.0, 0.0, -1.0]], np.float32)


def _first_one_hot(x: Array, pick: Callable[..., Array]) -> Array:
    """One per row at the first position of the row's extreme (np.argmax/argmin)."""
    out = np.zeros_like(x)
    out[np.arange(x.shape[0]), pick(x, axis=1)] = 1.0
    return out


def _reduce_compute(reducer: Callable) -> Callable[[tex.Tensor], tex.Tensor]:
    def make(x: tex.Tensor) -> tex.Tensor:
        k = tex.reduce_axis((0, x.shape[1]), name="k")
        return tex.compute((x.shape[0],), lambda i: reducer(x[i, k], axis=k), name="R")
    return make


REDUCTION_TIES = [
    ("topi.max", lambda x: topi.max(x, axis=1), np.argmax),
    ("topi.min", lambda x: topi.min(x, axis=1), np.argmin),
    ("tex.max", _reduce_compute(tex.max), np.argmax),
    ("tex.min", _reduce_compute(tex.min), np.argmin),
]


# wide rows with many ties (values 0..3): vectorized loops and their remainders
WIDE_TIES = np.random.default_rng(5).integers(0, 4, (3, 67)).astype(np.float32)


@pytest.mark.parametrize("mode", EXACT_MODES)
@pytest.mark.parametrize("data", [TIES, WIDE_TIES], ids=["3x4", "3x67"])
@pytest.mark.parametrize("name,make,pick", REDUCTION_TIES, ids=[r[0] for r in REDUCTION_TIES])
def test_reduction_tie_goes_to_first_element(name: str, make: Callable, pick: Callable,
                                             data: Array, mode: str) -> None:
    head = np.array([2.0, -3.0, 0.5], np.float32)
    y, (g,) = value_and_grad(make, [data], head, mode)
    np.testing.assert_array_equal(y, np.max(data, 1) if pick is np.argmax else np.min(data, 1))
    np.testing.assert_array_equal(g, _first_one_hot(data, pick) * head[:, None])


@pytest.mark.parametrize("mode", EXACT_MODES)
def test_full_reduction_tie_goes_to_lowest_flat_index(mode: str) -> None:
    x = np.array([[0.0, 7.0, 1.0], [7.0, 7.0, 2.0]], np.float32)
    y, (g,) = value_and_grad(lambda a: topi.max(a), [x], np.array(3.0, np.float32), mode)
    assert y == 7.0
    np.testing.assert_array_equal(g, [[0.0, 3.0, 0.0], [0.0, 0.0, 0.0]])


A_TIE = np.array([1.0, 2.0, -3.0, 0.0, 0.0, 7.5] * 6, np.float32)
B_TIE = np.array([1.0, 1.0, -3.0, 5.0, -0.0, 7.5] * 6, np.float32)  # ties at 0, 2, 4, 5 (mod 6)

BINARY_TIES = [
    ("topi.maximum", topi.maximum, np.greater_equal),
    ("topi.minimum", topi.minimum, np.less_equal),
    ("tex.max-binary", lambda a, b: tex.compute(a.shape, lambda i: tex.max(a[i], b[i])),
     np.greater_equal),
    ("tex.min-binary", lambda a, b: tex.compute(a.shape, lambda i: tex.min(a[i], b[i])),
     np.less_equal),
]


@pytest.mark.parametrize("mode", EXACT_MODES)
@pytest.mark.parametrize("name,make,first", BINARY_TIES, ids=[b[0] for b in BINARY_TIES])
def test_binary_tie_goes_to_first_operand(name: str, make: Callable, first: Callable,
                                          mode: str) -> None:
    head = np.arange(1.0, 37.0, dtype=np.float32)
    y, (ga, gb) = value_and_grad(make, [A_TIE, B_TIE], head, mode)
    ref = np.maximum if first is np.greater_equal else np.minimum
    np.testing.assert_array_equal(y, ref(A_TIE, B_TIE))
    to_a = first(A_TIE, B_TIE)
    assert to_a[[0, 2, 4, 5]].all()
    np.testing.assert_array_equal(ga, np.where(to_a, head, 0.0))
    np.testing.assert_array_equal(gb, np.where(to_a, 0.0, head))


@pytest.mark.parametrize("mode", EXACT_MODES)
def test_maximum_of_a_tensor_with_itself_passes_the_gradient_once(mode: str) -> None:
    x = np.array([1.0, -2.0, 0.0], np.float32)
    _, (g,) = value_and_grad(lambda a: topi.maximum(a, a), [x], np.ones(3, np.float32), mode)
    np.testing.assert_array_equal(g, 1.0)


@pytest.mark.parametrize("mode", EXACT_MODES)
def test_relu_gradient_at_zero_follows_max_rule(mode: str) -> None:
    # relu(x) = max(x, 0): at x = 0 (and -0) the tie sends the gradient to x
    x = np.array([-1.0, -0.0, 0.0, 1e-30, 2.0], np.float32)
    y, (g,) = value_and_grad(nn.relu, [x], np.ones(5, np.float32), mode)
    np.testing.assert_array_equal(y, np.array([0.0, 0.0, 0.0, 1e-30, 2.0], np.float32))
    np.testing.assert_array_equal(g, [0.0, 1.0, 1.0, 1.0, 1.0])


POOL_DATA = np.array([[[[1.0, 1.0, 0.0, 2.0, 2.0],
                        [1.0, 0.0, 2.0, 2.0, 2.0],
                        [3.0, 3.0, 1.0, 1.0, 0.0],
                        [3.0, 3.0, 1.0, 1.0, 0.0],
                        [-1.0, -1.0, -1.0, -1.0, -1.0]]],
                      [[[4.0] * 5] * 5]], np.float32)  # second image: everything tied


@pytest.mark.parametrize("mode", EXACT_MODES)
@pytest.mark.parametrize("kernel,stride,padding", [(2, 2, 0), (2, 1, 0), (3, 2, 1)],
                         ids=["k2-s2", "k2-s1-overlapping", "k3-s2-p1"])
def test_max_pool_tie_goes_to_first_element(kernel: int, stride: int, padding: int,
                                            mode: str) -> None:
    data = POOL_DATA.reshape(1, 2, 5, 5)
    make = lambda x: nn.pool2d(x, kernel, stride, 1, padding, "max")  # noqa: E731
    shape = make(tex.placeholder(data.shape, name="probe")).shape
    head = np.random.default_rng(3).integers(1, 9, shape).astype(np.float32)
    _, (g,) = value_and_grad(make, [data], head, mode)
    np.testing.assert_array_equal(g, ref_max_pool_grad(data, kernel, stride, padding, head))
