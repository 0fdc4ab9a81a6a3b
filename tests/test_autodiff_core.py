"""tex.differentiate: API semantics, zero elimination bounds, higher order, forward mode,
bad input. Per-op gradient checks live in test_autodiff_ops.py."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.autodiff import DiffBuildingBlock, Jacobian, iteration_count, jvp
from tex.ir.printer import format_program
from tex.testing import check_grad, evaluate

F64 = "float64"


def _feed(rng, *tensors):
    return {t: rng.standard_normal(t.shape) for t in tensors}


# --------------------------------------------------------------------------------------
# API semantics
# --------------------------------------------------------------------------------------

def test_dense_gradients_are_plain_matmuls(rng):
    X = tex.placeholder((4, 5), F64, name="X")
    W = tex.placeholder((3, 5), F64, name="W")
    B = tex.placeholder((3,), F64, name="B")
    H = tex.placeholder((4, 3), F64, name="H")
    dX, dW, dB = tex.differentiate(topi.nn.dense(X, W, B), [X, W, B], H)
    assert "sum(H[i, p] * X[i, q], i in [0, 4))" in str(dW)
    assert iteration_count(dW) == 3 * 5 * 4
    assert iteration_count(dB) == 3 * 4
    f = _feed(rng, X, W, B, H)
    gx, gw, gb = evaluate([dX, dW, dB], f)
    np.testing.assert_allclose(gx, f[H] @ f[W], rtol=1e-12)
    np.testing.assert_allclose(gw, f[H].T @ f[X], rtol=1e-12)
    np.testing.assert_allclose(gb, f[H].sum(0), rtol=1e-12)


def test_iteration_count_given_leaves_out_the_forward():
    """``given=[y]``: the forward's tensors are on a tape; the gradient's own work is left."""
    X = tex.placeholder((5, 7), F64, name="X")
    Y = topi.nn.softmax(X)
    (dX,) = tex.differentiate(Y, [X], tex.placeholder(Y.shape, F64, name="H"))
    # s = sum(H * y) and dX = y * (H - s): two passes; the forward's four are read only
    assert iteration_count(dX, given=[Y]) == 2 * 35
    assert iteration_count(dX) == 2 * 35 + iteration_count(Y)
    assert iteration_count(Y, given=[Y]) == 0
    with pytest.raises(TypeError, match="given must hold Tensors"):
        iteration_count(dX, given=[Y.op])


def test_scalar_loss_head_none_is_gradient(rng):
    X = tex.placeholder((3, 4), F64, name="X")
    L = topi.sum(topi.exp(X))
    (dX,) = tex.differentiate(L, [X])
    assert dX.shape == (3, 4)
    f = _feed(rng, X)
    np.testing.assert_allclose(evaluate(dX, f), np.exp(f[X]), rtol=1e-12)


def test_full_jacobian_without_head(rng):
    X = tex.placeholder((2, 3), F64, name="X")
    Y = tex.compute((3, 2), lambda i, j: X[j, i] * X[j, i], name="Y")
    (J,) = tex.differentiate(Y, [X])
    assert J.shape == (3, 2, 2, 3)
    f = _feed(rng, X)
    want = np.zeros((3, 2, 2, 3))
    for i in range(3):
        for j in range(2):
            want[i, j, j, i] = 2 * f[X][j, i]
    np.testing.assert_allclose(evaluate(J, f), want, rtol=1e-12)
    # the identity head is solved away: one point per Jacobian entry, no reduction
    assert iteration_count(J) == J.size


def test_head_with_prefix(rng):
    X = tex.placeholder((3,), F64, name="X")
    Y = tex.compute((3,), lambda i: X[i] * 3.0, name="Y")
    Hd = tex.placeholder((2, 3), F64, name="Hd")
    (g,) = tex.differentiate(Y, [X], Hd)
    assert g.shape == (2, 3)
    f = _feed(rng, X, Hd)
    np.testing.assert_allclose(evaluate(g, f), 3 * f[Hd], rtol=1e-12)


def test_inputs_none_means_all_placeholders_and_unrelated_input_is_zero(rng):
    A = tex.placeholder((3,), F64, name="A")
    B = tex.placeholder((3,), F64, name="B")
    C = tex.placeholder((2, 2), F64, name="C")
    L = topi.sum(A * B)
    res = tex.differentiate(L)
    f = _feed(rng, A, B, C)
    assert len(res) == 2
    ga, gb = evaluate(list(res), f)
    np.testing.assert_allclose(ga, f[B], rtol=1e-12)
    np.testing.assert_allclose(gb, f[A], rtol=1e-12)
    gc = tex.differentiate(L, [C])[0]
    assert gc.shape == (2, 2)
    np.testing.assert_array_equal(evaluate(gc, f), np.zeros((2, 2)))


def test_adjoints_and_summands(rng):
    X = tex.placeholder((4,), F64, name="X")
    T = topi.exp(X)
    Y = T * T + T
    L = topi.sum(Y)
    res = tex.differentiate(L, [X])
    assert T in res.adjoints and Y in res.adjoints and L in res.adjoints
    assert set(res.adjoint_summands[X]) == {T}
    f = _feed(rng, X)
    e = np.exp(f[X])
    np.testing.assert_allclose(evaluate(res.adjoints[T], f), 2 * e + 1, rtol=1e-12)
    np.testing.assert_allclose(evaluate(res[0], f), (2 * e + 1) * e, rtol=1e-12)


def test_override_blocks_gradient_to_X(rng):
    X = tex.placeholder((4, 3), F64, name="X")
    W = tex.placeholder((2, 3), F64, name="W")
    Y = topi.nn.dense(X, W)
    L = topi.sum(Y * Y)
    calls = []

    def only_w(out, deps, head):
        calls.append((out, tuple(deps)))
        return [DiffBuildingBlock(out, W, head)]

    dX, dW = tex.differentiate(L, [X, W], override={Y: ([W], only_w)})
    assert calls == [(Y, (W,))]
    f = _feed(rng, X, W)
    np.testing.assert_array_equal(evaluate(dX, f), 0.0)
    y = f[X] @ f[W].T
    np.testing.assert_allclose(evaluate(dW, f), 2 * y.T @ f[X], rtol=1e-12)


def test_custom_fdiff_sees_every_edge(rng):
    X = tex.placeholder((3,), F64, name="X")
    T = topi.sin(X)
    L = topi.sum(T * T)
    edges = []

    def fdiff(out, inp, head):
        edges.append((out.name, inp.name))
        return DiffBuildingBlock(out, inp, head)

    (g,) = tex.differentiate(L, [X], fdiff=fdiff)
    assert ("T_sin", "X") in edges and len(edges) == 3
    x = _feed(rng, X)[X]
    np.testing.assert_allclose(evaluate(g, {X: x}), 2 * np.sin(x) * np.cos(x), rtol=1e-12)


def _tensors(*roots: tex.Tensor) -> list[tex.Tensor]:
    from tex.ir.visit import topo_sort_ops
    return [t for op in topo_sort_ops(list(roots)) for t in op.outputs]


def test_zero_contributions_are_symbolic(rng):
    """A cut edge (floor) gives the symbolic Zero, which the adjoint loop drops: no zero
    tensor enters the program. The public DiffBuildingBlock makes it a tensor of zeros,
    and a zero gradient is a tensor only for an input the caller asked for."""
    from tex.autodiff.builders import Zero
    from tex.autodiff.building_block import building_block

    X = tex.placeholder((4,), F64, name="X")
    Fl = topi.floor(X)
    head = tex.placeholder((4,), F64, name="head")
    got, _ = building_block(Fl, X, head)
    assert got == Zero((4,), tex.dtype.DTYPES["float64"])
    zeros = DiffBuildingBlock(Fl, X, head)
    assert zeros.shape == (4,) and zeros.name == "X_grad_T_floor"
    np.testing.assert_array_equal(evaluate(zeros, {X: np.ones(4), head: np.ones(4)}), 0.0)
    L = topi.sum(X * 3.0 + Fl)
    res = tex.differentiate(L, [X])
    assert Fl not in res.adjoint_summands[X]
    assert not any(t.op.tag == "zeros" for t in _tensors(res[0]))
    np.testing.assert_allclose(evaluate(res[0], _feed(rng, X)), 3.0)
    (only,) = tex.differentiate(topi.sum(Fl), [X])
    assert only.op.tag == "zeros" and only.name == "X_grad"


def test_a_constant_zero_from_user_fdiff_is_dropped(rng):
    """A user's fdiff that returns a tensor of zeros for an edge contributes nothing: the
    adjoint is not a sum with a zero tensor in it."""
    X = tex.placeholder((3,), F64, name="X")
    T = topi.sin(X)
    L = topi.sum(T + X)

    def fdiff(out, inp, head):
        if out is T:
            return tex.compute(inp.shape, lambda i: tex.const(0.0, "float64"), name="nil")
        return DiffBuildingBlock(out, inp, head)

    res = tex.differentiate(L, [X], fdiff=fdiff)
    assert T not in res.adjoint_summands[X]
    assert "nil" not in {t.name for t in _tensors(res[0])}
    np.testing.assert_allclose(evaluate(res[0], _feed(rng, X)), 1.0)


def test_jacobian_optimize_false_equals_optimized(rng):
    X = tex.placeholder((2, 5), F64, name="X")
    k = tex.reduce_axis((0, 3), name="k")
    Y = tex.compute((2, 3), lambda i, j: tex.sum(X[i, j + k] * X[i, k], axis=k), name="Y")
    f = _feed(rng, X)
    naive = Jacobian(Y, X, optimize=False)
    fast = Jacobian(Y, X)
    assert naive.shape == fast.shape == (2, 3, 2, 5)
    np.testing.assert_allclose(evaluate(naive, f), evaluate(fast, f), rtol=1e-12)
    assert iteration_count(fast) < iteration_count(naive)


def test_output_is_deterministic():
    def build():
        d = tex.placeholder((1, 2, 6, 6), name="d")
        w = tex.placeholder((3, 2, 3, 3), name="w")
        out = topi.nn.conv2d(d, w, 2, 1)
        return format_program(*tex.differentiate(topi.sum(out), [d, w]))

    assert build() == build()


# --------------------------------------------------------------------------------------
# zero elimination: iteration counts at the WORKLOADS.md shapes (symbolic, no running)
# --------------------------------------------------------------------------------------

def _loss(out):
    H = tex.placeholder(out.shape, name="H")
    return topi.sum(out * H)


def _bound(out, wrt, hand):
    grads = tex.differentiate(_loss(out), wrt)
    got = iteration_count(*grads)
    assert got <= 2 * hand, f"gradient iterations {got} > 2 x hand-written {hand}"
    return got


def test_bound_dense():
    n, m, k = 256, 512, 512
    X, W, B = (tex.placeholder(s, name=nm) for s, nm in (((n, k), "X"), ((m, k), "W"),
                                                          ((m,), "B")))
    # dX = H W (n*m*k), dW = H^T X (m*k*n), dB = column sums of H (n*m)
    assert _bound(topi.nn.dense(X, W, B), [X, W, B], 2 * n * m * k + n * m) == \
        2 * n * m * k + n * m


@pytest.mark.parametrize("shape,kshape,stride,pad,dil", [
    ((8, 32, 32, 32), (32, 32, 3, 3), 1, 1, 1),
    ((8, 16, 64, 64), (32, 16, 5, 5), 2, 2, 1),
    ((2, 8, 16, 16), (8, 8, 3, 3), 2, 1, 1),
    ((2, 8, 16, 16), (8, 8, 3, 3), 1, 2, 2),
], ids=["s1p1", "s2p2k5", "s2p1", "dil2"])
def test_bound_conv2d(shape, kshape, stride, pad, dil):
    n, c, h, w = shape
    o, _, kh, kw = kshape
    d = tex.placeholder(shape, name="data")
    kern = tex.placeholder(kshape, name="kernel")
    out = topi.nn.conv2d(d, kern, stride, pad, dilation=dil)
    oh, ow = out.shape[2:]
    # hand-written: dData scatters every output over the taps (n*o*oh*ow*c*kh*kw), dKernel
    # the same count, plus the zero-padded copy of the data that dKernel reads
    per = n * o * oh * ow * c * kh * kw
    hand = 2 * per + n * c * (h + 2 * pad) * (w + 2 * pad)
    _bound(out, [d, kern], hand)


def test_bound_maxpool_and_avgpool():
    d = tex.placeholder((16, 64, 64, 64), name="data")
    mp = topi.nn.pool2d(d, (2, 2), (2, 2), 1, 0, pool_type="max")
    fwd = iteration_count(mp)
    # hand-written: find each window's argmax (out*4) and route the head to it (in)
    got = _bound(mp, [d], fwd + d.size)
    assert got <= 3 * fwd
    ap = topi.nn.pool2d(d, (2, 2), (2, 2), 1, 0, pool_type="avg")
    _bound(ap, [d], d.size)  # each input point reads one head value


def test_bound_softmax_layernorm_sumsq_elementwise_batch_matmul():
    x = tex.placeholder((1024, 1024), name="x")
    nm = 1024 * 1024
    # y = softmax (max, exp, sum, normalize: 4nm), s = sum(g*y) (nm), dx = y(g - s) (nm)
    _bound(topi.nn.softmax(x), [x], 6 * nm)
    g = tex.placeholder((1024,), name="gamma")
    b = tex.placeholder((1024,), name="beta")
    # mean, var, dgamma, dbeta, two row sums for dx, dx itself
    _bound(topi.nn.layer_norm(x, g, b, axis=-1, epsilon=1e-5), [x, g, b], 7 * nm)
    x2 = tex.placeholder((2048, 2048), name="x2")
    _bound(topi.sum(x2 * x2, axis=1), [x2], 2048 * 2048)  # dx = 2 x h
    xs = [tex.placeholder((4000000,), name=v) for v in "xyz"]
    el = topi.tanh(xs[0] * xs[1] + xs[2]) * topi.sigmoid(xs[0])
    _bound(el, xs, 5 * 4000000)  # t = tanh(.), s = sigmoid(x), dx, dy, dz
    A = tex.placeholder((32, 128, 64), name="A")
    B = tex.placeholder((32, 64, 128), name="B")
    _bound(topi.nn.batch_matmul(A, B, transpose_b=False), [A, B], 2 * 32 * 128 * 64 * 128)


def test_bound_transpose_broadcast_take():
    x = tex.placeholder((64, 48), name="x")
    _bound(topi.transpose(x), [x], x.size)
    b = tex.placeholder((48,), name="b")
    _bound(x + b, [x, b], 2 * x.size)  # dx = h; db = column sums of h
    idx = tex.compute((16,), lambda j: j * 3 + 1, name="idx")  # constant indices
    _bound(topi.take(x, idx, axis=1), [x], x.size)


def test_sum_of_two_reads_is_split():
    A = tex.placeholder((10, 10), name="A")
    B = tex.compute((10, 10), lambda i, j: A[i, j] + A[j, i], name="B")
    (g,) = tex.differentiate(topi.sum(B * B), [A])
    # hand-written: 100 points for dA plus the forward B; TVM needs 10,001
    assert iteration_count(g) <= 2 * 100 + 100


# --------------------------------------------------------------------------------------
# higher order and forward mode
# --------------------------------------------------------------------------------------

def test_hessian_vector_product_of_mlp(rng):
    X = tex.placeholder((4, 3), F64, name="X")
    W1 = tex.placeholder((5, 3), F64, name="W1")
    W2 = tex.placeholder((2, 5), F64, name="W2")
    L = topi.sum(topi.nn.dense(topi.tanh(topi.nn.dense(X, W1)), W2) ** 2.0)
    g1, g2 = tex.differentiate(L, [W1, W2])
    V1 = tex.placeholder(W1.shape, F64, name="V1")
    V2 = tex.placeholder(W2.shape, F64, name="V2")
    h1, h2 = tex.differentiate(topi.sum(g1 * V1) + topi.sum(g2 * V2), [W1, W2])
    f = _feed(rng, X, W1, W2, V1, V2)
    eps = 1e-5

    def grads(s):
        return evaluate([g1, g2], {**f, W1: f[W1] + s * f[V1], W2: f[W2] + s * f[V2]})

    (p1, p2), (m1, m2) = grads(eps), grads(-eps)
    a1, a2 = evaluate([h1, h2], f)
    np.testing.assert_allclose(a1, (p1 - m1) / (2 * eps), rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(a2, (p2 - m2) / (2 * eps), rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("build", [
    lambda x: topi.nn.softmax(x),
    lambda x: topi.max(x, axis=1),
    lambda x: topi.prod(x, axis=1),
    lambda x: topi.nn.layer_norm(x, topi.full((6,), F64, 1.5), topi.full((6,), F64, 0.1),
                                 axis=-1, epsilon=1e-5),
], ids=["softmax", "max", "prod", "layer_norm"])
def test_jvp_matches_finite_differences_and_reverse_mode(rng, build):
    x = tex.placeholder((3, 6), F64, name="x")
    t = tex.placeholder((3, 6), F64, name="t")
    out = build(x)
    tan = jvp(out, [x], [t])
    xv, tv = rng.standard_normal((3, 6)), rng.standard_normal((3, 6))
    eps = 1e-6
    fd = (evaluate(out, {x: xv + eps * tv}) - evaluate(out, {x: xv - eps * tv})) / (2 * eps)
    jv = evaluate(tan, {x: xv, t: tv})
    np.testing.assert_allclose(jv, fd, rtol=1e-6, atol=1e-8)
    v = tex.placeholder(out.shape, F64, name="v")
    vv = rng.standard_normal(out.shape)
    (vjp,) = tex.differentiate(out, [x], v)
    lhs = float(np.sum(vv * jv))
    rhs = float(np.sum(evaluate(vjp, {x: xv, v: vv}) * tv))
    assert lhs == pytest.approx(rhs, rel=1e-10, abs=1e-12)


def test_gradient_through_generic_reducer_and_init(rng):
    x = tex.placeholder((3, 5), F64, name="x")
    k = tex.reduce_axis((0, 5), name="k")
    lse = tex.comm_reducer(lambda a, b: tex.log(tex.exp(a) + tex.exp(b)),
                           lambda t: tex.const(-1e30, t), name="lse")
    out = tex.compute((3,), lambda i: lse(x[i, k], axis=k), name="out")
    check_grad(out, [x])
    s = tex.compute((3,), lambda i: tex.sum(x[i, k], axis=k, init=x[i, 0] * 2.0,
                                            where=k > 1), name="s")
    check_grad(s, [x])
    m = tex.compute((3,), lambda i: tex.max(x[i, k], axis=k, init=0.25), name="m")
    check_grad(m, [x], data={x: rng.permutation(15).reshape(3, 5) * 0.1 - 1.0})


# --------------------------------------------------------------------------------------
# bad input
# --------------------------------------------------------------------------------------

def test_bad_input():
    X = tex.placeholder((3,), name="X")
    Idx = tex.placeholder((3,), "int32", name="I")
    Y = topi.exp(X)
    with pytest.raises(TypeError, match="Tensor"):
        tex.differentiate(Y, [X, "W"])
    with pytest.raises(TypeError, match="output"):
        tex.differentiate("Y", [X])
    with pytest.raises(TypeError, match="int32"):
        tex.differentiate(Idx * 2, [Idx])
    with pytest.raises(TypeError, match="head"):
        tex.differentiate(Y, [X], tex.placeholder((3,), "int32", name="h"))
    with pytest.raises(ValueError, match=r"\(4,\).*\(3,\)"):
        tex.differentiate(Y, [X], tex.placeholder((4,), name="h"))
    with pytest.raises(ValueError, match="override of 'T_exp'.*2 adjoints"):
        tex.differentiate(Y, [X], override={Y: ([X], lambda o, d, h: [h, h])})
    with pytest.raises(ValueError, match="override of 'T_exp'.*shape"):
        tex.differentiate(Y, [X], override={Y: ([X], lambda o, d, h: [
            tex.placeholder((5,), name="bad")])})
    with pytest.raises(ValueError, match="fdiff.*shape"):
        tex.differentiate(Y, [X], fdiff=lambda o, i, h: tex.placeholder((2,), name="bad"))
    with pytest.raises(ValueError, match="direct input"):
        Jacobian(topi.sum(Y), X)
    # an integer input gets a zero gradient, not an error
    L = topi.sum(X * Idx.astype("float32"))
    g = tex.differentiate(L, [Idx])[0]
    np.testing.assert_array_equal(
        evaluate(g, {X: np.ones(3, np.float32), Idx: np.arange(3, dtype=np.int32)}), 0)


def test_missing_rule_names_the_operator(monkeypatch):
    from tex.autodiff import RULES, DifferentiationError
    from tex.ir.expr import Op
    X = tex.placeholder((3,), name="X")
    monkeypatch.delitem(RULES, Op.TANH)
    with pytest.raises(DifferentiationError, match="'tanh'"):
        tex.differentiate(topi.sum(topi.tanh(X)), [X])


def test_tex_dump_prints_the_gradient_program(capsys):
    X = tex.placeholder((3,), name="X")
    with tex.debug.config(dump=frozenset({"differentiate"})):
        tex.differentiate(topi.sum(topi.exp(X)), [X])
    err = capsys.readouterr().err
    assert "=== differentiate ===" in err and "X_grad" in err
