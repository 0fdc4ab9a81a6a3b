"""tex.autodiff.zero_proofs.zero_adjoints (adjoints proved identically zero before differentiating)
and tex.arith.float_is_zero, the sympy check it rests on.

Every claim is checked against numbers: the directional derivative ``jvp(out, [m], [D])``
of a proved tensor evaluates to 0 for a random direction D, and that of a refused one (in
the "not zero" cases) does not, so the refusals are right too.
"""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.arith import float_is_zero
from tex.autodiff import jvp
from tex.autodiff.zero_proofs import zero_adjoints
from tex.ir.expr import Const, Op, TensorRead, Var
from tex.ir.tensor import PlaceholderOp, Tensor
from tex.ir.visit import topo_sort_ops
from tex.testing import evaluate

F64 = "float64"


def _order(out: Tensor) -> list[Tensor]:
    """The tensors ``out`` depends on, producers first (as differentiate sorts them)."""
    return [t for op in topo_sort_ops([out]) for t in op.outputs]


def _proved(out: Tensor, wanted: list[Tensor] | None = None,
            override: dict | None = None) -> dict[str, str]:
    """zero_adjoints by tensor name, with ``needed`` built as differentiate builds it."""
    order = _order(out)
    want = set(wanted if wanted is not None else
               [t for t in order if isinstance(t.op, PlaceholderOp)])
    needed: set[Tensor] = set()
    for t in order:
        if t in want or any(d in needed for d in t.op.input_tensors):
            needed.add(t)
    found = zero_adjoints(order, out, needed, override=override)
    return {m.name: why for m, why in found.items()}


def _tensor(out: Tensor, name: str) -> Tensor:
    return next(t for t in _order(out) if t.name == name)


def _directional(out: Tensor, m: Tensor, rng: np.random.Generator) -> np.ndarray:
    """``sum_p d out / d m[p] * D[p]`` for a random D, evaluated on random inputs."""
    d = tex.placeholder(m.shape, m.dtype, name="D")
    feed = {t: rng.standard_normal(t.shape) for t in _order(out)
            if isinstance(t.op, PlaceholderOp)}
    feed[d] = rng.standard_normal(m.shape)
    return evaluate(jvp(out, [m], [d]), feed)


# --------------------------------------------------------------------------------------
# proved: the max-shift of softmax, log_softmax, logsumexp
# --------------------------------------------------------------------------------------

@pytest.mark.parametrize("axis", [-1, 0])
def test_softmax_shift_is_proved_zero(axis, rng):
    x = tex.placeholder((4, 5), F64, name="x")
    y = topi.nn.softmax(x, axis=axis)
    got = _proved(y)
    assert got == {"T_softmax_maxelem": "d T_softmax_norm / d T_softmax_maxelem == 0 "
                                        "(the tangent vanishes at T_softmax_norm)"}
    m = _tensor(y, "T_softmax_maxelem")
    np.testing.assert_allclose(_directional(y, m, rng), 0, atol=1e-12)


@pytest.mark.parametrize("axis", [1, 0])
def test_log_softmax_shift_is_proved_zero(axis, rng):
    x = tex.placeholder((3, 6), F64, name="x")
    y = topi.nn.log_softmax(x, axis=axis)
    assert list(_proved(y)) == ["T_log_softmax_maxelem"]
    np.testing.assert_allclose(_directional(y, _tensor(y, "T_log_softmax_maxelem"), rng), 0,
                               atol=1e-12)


def test_logsumexp_shift_is_proved_zero(rng):
    # the shift is select(abs(m) < inf, m, 0): its tangent select(c, D, 0) cancels too
    x = tex.placeholder((4, 5), F64, name="x")
    y = topi.logsumexp(x, axis=1)
    got = _proved(y)
    assert list(got) == ["x_red_max"]
    assert "vanishes at x_red" in got["x_red_max"]
    np.testing.assert_allclose(_directional(y, _tensor(y, "x_red_max"), rng), 0, atol=1e-12)


def test_softmax_then_cross_entropy(rng):
    x = tex.placeholder((4, 5), F64, name="x")
    t = tex.placeholder((4, 5), F64, name="t")
    loss = topi.nn.cross_entropy(topi.nn.softmax(x), t)
    got = _proved(loss, [x])
    assert got == {"T_softmax_maxelem": "d T_cross_entropy / d T_softmax_maxelem == 0 "
                                        "(the tangent vanishes at T_softmax_norm)"}
    m = _tensor(loss, "T_softmax_maxelem")
    np.testing.assert_allclose(_directional(loss, m, rng), 0, atol=1e-12)


def test_softmax_then_weighted_sum_and_logits_loss():
    x = tex.placeholder((4, 5), F64, name="x")
    w = tex.placeholder((4, 5), F64, name="w")
    y = topi.nn.softmax(x)
    k = tex.reduce_axis((0, 4), name="k")
    c = tex.reduce_axis((0, 5), name="c")
    loss = tex.compute((), lambda: tex.sum(y[k, c] * w[k, c], axis=[k, c]), name="L")
    assert list(_proved(loss, [x, w])) == ["T_softmax_maxelem"]
    logits_loss = topi.nn.cross_entropy_with_logits(x, w)
    assert list(_proved(logits_loss, [x])) == ["T_log_softmax_maxelem"]


def test_a_hand_written_weighted_softmax(rng):
    # e = w * exp(x - m): the tangent of s = sum_k e[i, k] is sum_k -D[i] exp(..) w[i, k],
    # matched to s's source e[i, k] by sympy (no read of e to match structurally); the
    # constant 2 of s2's source is divided out: sum_k 2 * f = s2  ->  sum_k f = s2 / 2
    x = tex.placeholder((3, 4), F64, name="x")
    w = tex.placeholder((3, 4), F64, name="w")
    k = tex.reduce_axis((0, 4), name="k")
    m = tex.compute((3,), lambda i: tex.max(x[i, k], axis=k), name="m")
    e = tex.compute((3, 4), lambda i, j: w[i, j] * tex.exp(x[i, j] - m[i]), name="e")
    k2 = tex.reduce_axis((0, 4), name="k")
    s = tex.compute((3,), lambda i: tex.sum(e[i, k2], axis=k2), name="s")
    y = tex.compute((3, 4), lambda i, j: e[i, j] / s[i], name="y")
    assert list(_proved(y)) == ["m"]
    k3 = tex.reduce_axis((0, 4), name="k")
    s2 = tex.compute((3,), lambda i: tex.sum(2.0 * e[i, k3], axis=k3), name="s2")
    y2 = tex.compute((3, 4), lambda i, j: 2.0 * e[i, j] / s2[i], name="y2")
    assert list(_proved(y2)) == ["m"]
    np.testing.assert_allclose(_directional(y2, m, rng), 0, atol=1e-12)


def test_a_shift_that_cancels_inside_one_tensor(rng):
    # one read m[i] on two paths: exp(x - m) * exp(m) has the tangent
    # exp(x - m) * -D * exp(m) + exp(x - m) * exp(m) * D = 0
    x = tex.placeholder((3, 4), F64, name="x")
    k = tex.reduce_axis((0, 4), name="k")
    m = tex.compute((3,), lambda i: tex.max(x[i, k], axis=k), name="m")
    y = tex.compute((3, 4), lambda i, j: tex.exp(x[i, j] - m[i]) * tex.exp(m[i]), name="y")
    assert _proved(y) == {"m": "d y / d m == 0 (the tangent vanishes at y)"}
    np.testing.assert_allclose(_directional(y, m, rng), 0, atol=1e-12)


def test_a_sum_rewritten_with_another_known_sum(rng):
    # r = sum_k (e + x) has the tangent sum_k -D[i] e[i, k] = -D[i] s[i] (s's source,
    # not r's); out = r - s then has the tangent -D s + D s = 0
    x = tex.placeholder((3, 4), F64, name="x")
    k = tex.reduce_axis((0, 4), name="k")
    m = tex.compute((3,), lambda i: tex.max(x[i, k], axis=k), name="m")
    e = tex.compute((3, 4), lambda i, j: tex.exp(x[i, j] - m[i]), name="e")
    k1 = tex.reduce_axis((0, 4), name="k")
    s = tex.compute((3,), lambda i: tex.sum(e[i, k1], axis=k1), name="s")
    k2 = tex.reduce_axis((0, 4), name="k")
    r = tex.compute((3,), lambda i: tex.sum(e[i, k2] + x[i, k2], axis=k2), name="r")
    out = tex.compute((3,), lambda i: r[i] - s[i], name="out")
    assert list(_proved(out)) == ["m"]
    np.testing.assert_allclose(_directional(out, m, rng), 0, atol=1e-12)


# --------------------------------------------------------------------------------------
# not claimed where the adjoint is not zero
# --------------------------------------------------------------------------------------

def _centered(x: Tensor, w: Tensor) -> tuple[Tensor, str]:
    """Layer-norm-like centering (x - mean) * w, summed: d / d mean = -sum_j w[i, j]."""
    k = tex.reduce_axis((0, 5), name="k")
    mean = tex.compute((4,), lambda i: tex.sum(x[i, k] / 5.0, axis=k), name="mean")
    a = tex.reduce_axis((0, 4), name="a")
    b = tex.reduce_axis((0, 5), name="b")
    out = tex.compute((), lambda: tex.sum((x[a, b] - mean[a]) * w[a, b], axis=[a, b]),
                      name="out")
    return out, "mean"


def _shifted_exp(x: Tensor, w: Tensor) -> tuple[Tensor, str]:
    """e = exp(x - m) as the output: it moves with m."""
    k = tex.reduce_axis((0, 5), name="k")
    m = tex.compute((4,), lambda i: tex.max(x[i, k], axis=k), name="m")
    return tex.compute((4, 5), lambda i, j: tex.exp(x[i, j] - m[i]), name="e"), "m"


def _softmax_plus_one(x: Tensor, w: Tensor) -> tuple[Tensor, str]:
    """e / (s + 1): the shift no longer cancels."""
    k = tex.reduce_axis((0, 5), name="k")
    m = tex.compute((4,), lambda i: tex.max(x[i, k], axis=k), name="m")
    e = tex.compute((4, 5), lambda i, j: tex.exp(x[i, j] - m[i]), name="e")
    k2 = tex.reduce_axis((0, 5), name="k")
    s = tex.compute((4,), lambda i: tex.sum(e[i, k2], axis=k2), name="s")
    return tex.compute((4, 5), lambda i, j: e[i, j] / (s[i] + 1.0), name="y"), "m"


def _max_as_value(x: Tensor, w: Tensor) -> tuple[Tensor, str]:
    """out = m[i] + x[i, j]: the max is used as a value."""
    k = tex.reduce_axis((0, 5), name="k")
    m = tex.compute((4,), lambda i: tex.max(x[i, k], axis=k), name="m")
    return tex.compute((4, 5), lambda i, j: m[i] + x[i, j], name="out"), "m"


@pytest.mark.parametrize("build", [_centered, _shifted_exp, _softmax_plus_one, _max_as_value])
def test_no_claim_where_the_adjoint_is_not_zero(build, rng):
    x = tex.placeholder((4, 5), F64, name="x")
    w = tex.placeholder((4, 5), F64, name="w")
    out, name = build(x, w)
    assert _proved(out) == {}
    # and it is really not zero
    assert np.abs(_directional(out, _tensor(out, name), rng)).max() > 1e-3


def test_refuses_what_it_does_not_handle():
    x = tex.placeholder((4, 5), F64, name="x")
    # a max downstream of the shift (y = e / max_k e is shift-invariant, but a max
    # reduction on the tangent's path is not analysed)
    k = tex.reduce_axis((0, 5), name="k")
    m = tex.compute((4,), lambda i: tex.max(x[i, k], axis=k), name="m")
    e = tex.compute((4, 5), lambda i, j: tex.exp(x[i, j] - m[i]), name="e")
    k2 = tex.reduce_axis((0, 5), name="k")
    top = tex.compute((4,), lambda i: tex.max(e[i, k2], axis=k2), name="top")
    y = tex.compute((4, 5), lambda i, j: e[i, j] / top[i], name="y")
    assert _proved(y) == {}
    # an overridden tensor on the tangent's path: its adjoint rule is the user's
    sm = topi.nn.softmax(x)
    assert _proved(sm, override={sm: ([x], lambda out, deps, head: [head])}) == {}
    # only tensors on a path to a wanted input are candidates
    w = tex.placeholder((4, 5), F64, name="w")
    loss = topi.sum(topi.multiply(topi.nn.softmax(x), w))
    assert _proved(loss, [w]) == {}
    assert list(_proved(loss, [x])) == ["T_softmax_maxelem"]


def test_results_are_deterministic():
    x = tex.placeholder((4, 5), F64, name="x")
    y = topi.nn.softmax(topi.nn.log_softmax(x))
    first = _proved(y)
    assert list(first) == ["T_log_softmax_maxelem", "T_softmax_maxelem"]
    assert _proved(y) == first


# --------------------------------------------------------------------------------------
# float_is_zero
# --------------------------------------------------------------------------------------

def test_float_is_zero():
    x = tex.placeholder((4,), F64, name="x")
    y = tex.placeholder((4,), F64, name="y")
    i, j = Var("i"), Var("j")
    a, b, aj = TensorRead(x, [i]), TensorRead(y, [i]), TensorRead(x, [j])
    c = a < b
    # proved zero
    assert float_is_zero(a * b / b - a) is True
    assert float_is_zero(tex.exp(a) * tex.exp(b) - tex.exp(a + b)) is True
    # the select's condition is an opaque boolean: both branches vanish
    assert float_is_zero(tex.if_then_else(c, a, 0.0) + tex.if_then_else(c, 0.0, a) - a) is True
    assert float_is_zero(-tex.if_then_else(c, a, 0.0) * b / b
                         + tex.if_then_else(c, a, 0.0)) is True
    # a non-zero constant
    assert float_is_zero(a / a + 1.0) is False
    # not decided: not zero as a function of independent atoms...
    assert float_is_zero(a - b) is None
    assert float_is_zero(tex.if_then_else(c, a, 0.0)) is None
    # ...including zeros that need a relation between atoms (x[i] and x[j] with i == j)
    assert float_is_zero(a - aj) is None
    # real algebra says nothing about inf
    assert float_is_zero(a * Const(float("inf"), x.dtype) - a) is None
    with pytest.raises(TypeError, match="float expression"):
        float_is_zero(i + 1)


def _screen_family() -> list:
    """Float expressions of every operator with a sympy form: zeros, constants, non-zeros,
    with selects and conditions (seeded)."""
    from tex.arith.sympy_float import SYMPY_FLOAT_BINARY, SYMPY_FLOAT_UNARY
    from tex.ir.expr import Binary, Unary

    x = tex.placeholder((4,), F64, name="x")
    y = tex.placeholder((4,), F64, name="y")
    i = Var("i")
    a, b = TensorRead(x, [i]), TensorRead(y, [i])
    c = a < b
    rng = np.random.default_rng(5)
    out = [a - a * 1.0, a / a + 1.0, a / a - 1.0, a * 2.0 - a - a, (a + b) * (a - b) - a * a,
           tex.if_then_else(c, a, 0.0) + tex.if_then_else(c, 0.0, a) - a,
           tex.if_then_else(c, a, b), Const(2.5, x.dtype) * 4.0, Const(0.0, x.dtype) * a]
    for op in SYMPY_FLOAT_UNARY:
        e = Unary(op, a) if op is not Op.NEG else -a
        out += [e - e, e + a, e * e / e - e]
    for op in SYMPY_FLOAT_BINARY:
        e = Binary(op, a, b)
        out += [e - Binary(op, a, b * 1.0), e - a, e * 0.5 + e * 0.5 - e]
    leaves = [a, b, Const(1.5, x.dtype), Const(0.25, x.dtype)]
    for _ in range(40):
        e = leaves[rng.integers(4)]
        for _ in range(rng.integers(1, 5)):
            op = list(SYMPY_FLOAT_BINARY)[rng.integers(len(SYMPY_FLOAT_BINARY))]
            e = Binary(op, e, leaves[rng.integers(4)])
        out += [e, e - e]
    return out


def test_float_screen_gives_the_answers_of_sympy(monkeypatch: pytest.MonkeyPatch) -> None:
    """The float screen before the conversion answers only where sympy's path gives the
    same answer (None: not zero, not a constant; False: a non-zero constant)."""
    from tex.arith import sympy_float

    family = _screen_family()
    fast = [float_is_zero(e) for e in family]
    monkeypatch.setattr(sympy_float, "_float_screen", lambda e: None)
    slow = [float_is_zero(e) for e in family]
    assert fast == slow, [(str(e), f, s_) for e, f, s_ in zip(family, fast, slow) if f != s_]
    assert {True, False, None} <= set(slow)


def test_float_screen_skips_sympy_for_expressions_that_vary(monkeypatch: pytest.MonkeyPatch
                                                            ) -> None:
    """Most expressions zero_proofs asks about are not zero: they are answered without the
    conversion to sympy, which was most of a differentiate's time (mobilenet: 0.2 s)."""
    from tex.arith import sympy_float

    def refuse(self, e):
        raise AssertionError(f"converted to sympy: {e}")

    monkeypatch.setattr(sympy_float._FloatToSympy, "convert", refuse)
    x = tex.placeholder((4,), F64, name="x")
    a, b = x[0], x[1]
    assert float_is_zero(a - b) is None
    assert float_is_zero(tex.exp(a) * b - tex.log(b + 2.0)) is None
    assert float_is_zero(tex.if_then_else(a < b, a, b) * 3.0) is None
    assert float_is_zero(Const(2.0, x.dtype) * 3.0 + 1.0) is False


def test_float_is_zero_refuses_expressions_too_big_to_expand() -> None:
    """Expanding a product of sums multiplies their term counts: a fuzzed program's second
    derivative made sympy exhaust the memory. Such an expression is not expanded (None),
    and a big product of selects is not folded into 2**k branches."""
    x = tex.placeholder((16,), "float64", name="x")
    prod = (x[0] + x[1]) * (x[1] - x[0])
    for i in range(2, 16):
        prod = prod * (x[i] + x[i - 1] + x[i - 2])
    # zero but for a term below the screen's tolerance: only expanding would decide it,
    # into 2 * 3**14 terms
    big = prod * (x[0] - x[1]) - prod * x[0] + prod * x[1] + x[2] * 1e-300
    assert float_is_zero(big) is None
    sel = x[0]
    for i in range(1, 10):
        sel = sel * tex.if_then_else(x[i] > 0.0, x[i], 1.0)
    assert float_is_zero(sel - sel * 1.0 + x[0] * 1e-300) is None
