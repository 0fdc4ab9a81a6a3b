"""tex.testing.check_grad: finite differences against the symbolic gradient.

The argument checks, the finite-difference helpers and the comparison run without
tex.autodiff (the gradient is built by hand and handed in by patching
``gradcheck._differentiate``); the tests named ``test_autodiff_*`` use
``tex.autodiff.differentiate`` itself.
"""
from __future__ import annotations

import importlib
import re

import numpy as np
import pytest

import tex
from tex import topi
from tex.testing import check_grad

gc = importlib.import_module("tex.testing.gradcheck")


def f64(shape: tuple[int, ...], seed: int) -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape)


def square(shape: tuple[int, ...], dtype: str = "float64"):
    """X and X * X."""
    X = tex.placeholder(shape, dtype, name="X")
    return X, tex.compute(shape, lambda i, j: X[i, j] * X[i, j], name="Sq")


def patch_grads(monkeypatch: pytest.MonkeyPatch, build) -> list[tuple]:
    """Make check_grad use ``build(out, inputs, head)`` instead of tex.autodiff; returns
    the list of calls made."""
    calls: list[tuple] = []

    def fake(out, inputs, head):
        calls.append((out, list(inputs), head))
        return build(out, inputs, head)

    monkeypatch.setattr(gc, "_differentiate", fake)
    return calls


def twice_x_head(X):
    """The correct gradient of sum(H * X * X): 2 * X * H."""
    def build(out, inputs, H):
        assert inputs == [X] and H.shape == out.shape and H.name == "check_grad_head"
        return [tex.compute(X.shape, lambda i, j: 2.0 * X[i, j] * H[i, j], name="dX")]
    return build


# --------------------------------------------------------------------------------------
# argument checks (all before differentiation)
# --------------------------------------------------------------------------------------

def test_rejects_non_float_out() -> None:
    A = tex.placeholder((3,), "int32", name="A")
    B = tex.compute((3,), lambda i: A[i] * 2, name="B")
    with pytest.raises(TypeError, match="out 'B' has dtype int32; only a float tensor"):
        check_grad(B, A)
    with pytest.raises(TypeError, match="out must be a Tensor, got ndarray"):
        check_grad(np.zeros(3), A)


def test_rejects_integer_and_bool_inputs() -> None:
    X = tex.placeholder((3,), "float64", name="X")
    Idx = tex.placeholder((2,), "int32", name="I")
    M = tex.placeholder((2,), "bool", name="M")
    Y = tex.compute((2,), lambda i: tex.if_then_else(M[i], X[Idx[i]], 0.0), name="Y")
    with pytest.raises(TypeError,
                       match="cannot differentiate with respect to integer tensor 'I'"):
        check_grad(Y, [X, Idx])
    with pytest.raises(TypeError,
                       match="cannot differentiate with respect to boolean tensor 'M'"):
        check_grad(Y, M)


def test_rejects_non_placeholder_inputs() -> None:
    X, Sq = square((2, 2))
    with pytest.raises(TypeError, match=r"inputs\[1\] is the computed tensor 'Sq'"):
        check_grad(Sq, [X, Sq])
    with pytest.raises(TypeError, match=r"inputs\[0\] is a slice of tensor 'X'"):
        check_grad(Sq, [X[0]])
    with pytest.raises(TypeError, match="inputs must be a placeholder Tensor or a list"):
        check_grad(Sq, "X")
    with pytest.raises(ValueError, match="no inputs to check"):
        check_grad(Sq, [])


def test_rejects_head_of_wrong_shape() -> None:
    X = tex.placeholder((2, 3), "float64", name="X")
    Y = tex.compute((2, 3), lambda i, j: X[i, j] * 3.0, name="Y")
    with pytest.raises(ValueError, match=re.escape(
            "head has shape (3, 2) but 'Y' has shape (2, 3)")):
        check_grad(Y, X, head=np.ones((3, 2)))
    with pytest.raises(TypeError, match="head must be a numpy.ndarray of shape"):
        check_grad(Y, X, head=[[1.0] * 3] * 2)


def test_rejects_bad_options_and_data() -> None:
    X, Sq = square((2, 2))
    with pytest.raises(ValueError, match="eps must be a positive float"):
        check_grad(Sq, X, eps=0.0)
    with pytest.raises(ValueError, match="max_points must be an int >= 0"):
        check_grad(Sq, X, max_points=-1)
    with pytest.raises(TypeError, match="data must be a mapping"):
        check_grad(Sq, X, data=[np.ones((2, 2))])
    # the data goes through evaluate's checks
    with pytest.raises(ValueError, match="placeholder 'X' expects dtype float64"):
        check_grad(Sq, X, data={X: np.ones((2, 2), np.float32)})


def test_rejects_data_outside_the_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    calls = patch_grads(monkeypatch, lambda out, inputs, head: pytest.fail("differentiated"))
    X = tex.placeholder((2, 2), "float64", name="X")
    L = tex.compute((2, 2), lambda i, j: tex.log(X[i, j]), name="L")
    x = np.array([[1.0, 2.0], [-1.0, 3.0]])
    with pytest.raises(ValueError, match=r"'L' is not finite at the data \(L\[1, 0\] = nan\)"):
        check_grad(L, X, {X: x})
    assert calls == []


# --------------------------------------------------------------------------------------
# the finite-difference helpers, against gradients computed with NumPy
# --------------------------------------------------------------------------------------

def test_numeric_grad_of_square_float64() -> None:
    X, Sq = square((3, 4))
    x, head = f64((3, 4), 1), f64((3, 4), 2)
    numeric = gc._numeric_grad(Sq, X, {X: x}, head, 1e-6)
    assert numeric.shape == (3, 4) and numeric.dtype == np.float64
    # central differences are exact for a quadratic up to rounding
    np.testing.assert_allclose(numeric, 2 * x * head, rtol=1e-8, atol=1e-9)


def test_numeric_grad_of_matmul_only_touches_the_input() -> None:
    X = tex.placeholder((4, 6), "float64", name="X")
    W = tex.placeholder((3, 6), "float64", name="W")
    k = tex.reduce_axis((0, 6), name="k")
    T = tex.compute((4, 3), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    x, w, head = f64((4, 6), 3), f64((3, 6), 4), f64((4, 3), 5)
    feed = {X: x, W: w}
    np.testing.assert_allclose(gc._numeric_grad(T, X, feed, head, 1e-6), head @ w,
                               rtol=1e-8, atol=1e-9)
    np.testing.assert_allclose(gc._numeric_grad(T, W, feed, head, 1e-6), head.T @ x,
                               rtol=1e-8, atol=1e-9)
    assert feed[X] is x and np.array_equal(x, f64((4, 6), 3))  # data left as it was


def test_numeric_grad_float32_divides_by_the_step_taken() -> None:
    X = tex.placeholder((2, 3), "float32", name="X")
    Y = tex.compute((2, 3), lambda i, j: X[i, j] * 2.0, name="Y")  # exact in float32
    x = np.array([[1000.0, -3000.0, 0.5], [2500.0, -7.5, 4096.0]], np.float32)
    head = np.array([[1.0, -2.0, 0.5], [1.0, 1.0, -1.0]])
    numeric = gc._numeric_grad(Y, X, {X: x}, head, 1e-3)
    np.testing.assert_allclose(numeric, 2 * head, rtol=1e-12)
    # 1000 + 1e-3 rounds to 1000.0009765625 in float32: dividing by the nominal 2e-3
    # instead of the step taken would be about 2% off there
    taken = float(np.float32(1000 + 1e-3)) - float(np.float32(1000 - 1e-3))
    assert abs(taken / 2e-3 - 1) > 0.02
    with pytest.raises(ValueError, match=re.escape("eps=0.001 does not change 'X'[0, 0]")):
        gc._numeric_grad(Y, X, {X: x * np.float32(1e4)}, head, 1e-3)


def test_directional_agrees_and_detects_a_wrong_gradient() -> None:
    X = tex.placeholder((10, 12), "float64", name="X")
    Y = tex.compute((10, 12), lambda i, j: X[i, j] * X[i, j] + tex.sin(X[i, j]), name="Y")
    x, head = f64((10, 12), 6), f64((10, 12), 7)
    grad = (2 * x + np.cos(x)) * head
    directions = [f64((10, 12), 10 + s) for s in range(3)]
    analytic, numeric = gc._directional(Y, X, {X: x}, head, grad, 1e-6, directions)
    assert analytic.shape == numeric.shape == (3,)
    np.testing.assert_allclose(analytic, [np.sum(grad * t) for t in directions], rtol=1e-9)
    np.testing.assert_allclose(numeric, analytic, rtol=1e-7)
    # one element off by 1e-2 moves every directional derivative by about 1e-2 * |t|
    wrong = grad.copy()
    wrong[4, 5] += 1e-2
    bad, numeric2 = gc._directional(Y, X, {X: x}, head, wrong, 1e-6, directions)
    np.testing.assert_allclose(numeric2, numeric, rtol=1e-12)
    np.testing.assert_allclose(bad - analytic, [1e-2 * t[4, 5] for t in directions],
                               rtol=1e-6)
    with pytest.raises(AssertionError, match="along random direction"):
        gc._assert_close("g", bad, numeric2, 1e-4, 1e-5, directions="(note)")


def test_assert_close_message() -> None:
    analytic = np.array([[1.0, 2.0], [3.0, 4.0]])
    numeric = np.array([[1.0, 2.0000001], [3.0, 5.0]])
    gc._assert_close("g", analytic, analytic + 1e-6, rtol=1e-4, atol=1e-5)  # passes
    with pytest.raises(AssertionError) as info:
        gc._assert_close("the gradient of 'Y' with respect to 'X'", analytic, numeric,
                         rtol=1e-4, atol=1e-5)
    assert str(info.value) == (
        "check_grad: the gradient of 'Y' with respect to 'X' is wrong at index (1, 1): "
        "analytic 4, numeric (finite differences) 5; 1 of 4 values out of tolerance; "
        "max abs error 1, max rel error 0.2 (rtol=0.0001, atol=1e-05)")
    with pytest.raises(AssertionError, match=r"at index \(0,\): analytic nan"):
        gc._assert_close("g", np.array([np.nan, 1.0]), np.array([0.0, 1.0]), 1e-4, 1e-5)


# --------------------------------------------------------------------------------------
# check_grad end to end, with a hand-written gradient in place of tex.autodiff
# --------------------------------------------------------------------------------------

def test_correct_gradient_passes_elementwise_and_directional(
        monkeypatch: pytest.MonkeyPatch) -> None:
    X, Sq = square((3, 4))
    calls = patch_grads(monkeypatch, twice_x_head(X))
    assert check_grad(Sq, X) is None  # 12 points: element by element
    assert check_grad(Sq, [X], {"X": f64((3, 4), 1)}, head=np.ones((3, 4)),
                      max_points=5) is None  # directions
    assert len(calls) == 2 and calls[0][0] is Sq


def test_wrong_element_is_located(monkeypatch: pytest.MonkeyPatch) -> None:
    X, Sq = square((3, 4))

    def off_at_1_2(out, inputs, H):
        return [tex.compute(X.shape, lambda i, j: 2.0 * X[i, j] * H[i, j] + tex.if_then_else(
            tex.all(i == 1, j == 2), 1e-3, 0.0), name="dX")]

    patch_grads(monkeypatch, off_at_1_2)
    x, head = f64((3, 4), 1), f64((3, 4), 2)
    with pytest.raises(AssertionError) as info:
        check_grad(Sq, X, {X: x}, head)
    msg = str(info.value)
    assert msg.startswith("check_grad: the gradient of 'Sq' with respect to 'X' is wrong at "
                          "index (1, 2): analytic ")
    analytic, numeric = (float(v) for v in re.findall(r"(?:analytic|differences\)) (\S+?)[,;]",
                                                      msg))
    right = 2 * x[1, 2] * head[1, 2]
    assert analytic == pytest.approx(right + 1e-3, rel=1e-7)
    assert numeric == pytest.approx(right, rel=1e-7)
    assert "1 of 12 values out of tolerance; max abs error 0.001" in msg
    # with a loose enough tolerance the same gradient passes
    check_grad(Sq, X, {X: x}, head, atol=2e-3)


def test_wrong_gradient_of_large_input_is_caught_by_directions(
        monkeypatch: pytest.MonkeyPatch) -> None:
    X, Sq = square((8, 16))
    patch_grads(monkeypatch, lambda out, inputs, H: [
        tex.compute(X.shape, lambda i, j: 2.01 * X[i, j] * H[i, j], name="dX")])
    with pytest.raises(AssertionError, match=re.escape(
            "of 3 (<grad, t>; 'X' has 128 elements > max_points=64; raise max_points")):
        check_grad(Sq, X)
    patch_grads(monkeypatch, twice_x_head(X))
    check_grad(Sq, X)


def test_gradient_of_the_wrong_shape(monkeypatch: pytest.MonkeyPatch) -> None:
    X, Sq = square((2, 3))
    patch_grads(monkeypatch, lambda out, inputs, H: [tex.compute((3, 2), lambda i, j: 0.0)])
    with pytest.raises(AssertionError, match=re.escape(
            "gradient of shape (3, 2) for 'X' of shape (2, 3)")):
        check_grad(Sq, X)


def test_random_index_data_and_gather(monkeypatch: pytest.MonkeyPatch) -> None:
    """An unfed int32 index placeholder gets values in [0, 3): Y[i] = X[I[i]]."""
    X = tex.placeholder((3,), "float64", name="X")
    Idx = tex.placeholder((5,), "int32", name="I")
    Y = tex.compute((5,), lambda i: X[Idx[i]] * X[Idx[i]], name="Y")

    def scatter(out, inputs, H):
        r = tex.reduce_axis((0, 5), name="r")
        return [tex.compute((3,), lambda j: tex.sum(
            tex.if_then_else(Idx[r] == j, 2.0 * X[j] * H[r], 0.0), axis=r), name="dX")]

    patch_grads(monkeypatch, scatter)
    check_grad(Y, X, seed=3)
    # the same data as check_grad draws: numeric gradient vs a NumPy scatter-add
    rng = np.random.default_rng(3)
    head = rng.standard_normal(5)
    feed = gc._make_feed(Y, [X], {}, rng)
    idx = feed[Idx]
    assert idx.dtype == np.int32 and set(idx.tolist()) <= {0, 1, 2}
    expected = np.zeros(3)
    np.add.at(expected, idx, 2 * feed[X][idx] * head)
    np.testing.assert_allclose(gc._numeric_grad(Y, X, feed, head, 1e-6), expected,
                               rtol=1e-7, atol=1e-9)


# --------------------------------------------------------------------------------------
# with tex.autodiff
# --------------------------------------------------------------------------------------

def test_autodiff_elementwise() -> None:
    import tex.autodiff  # noqa: F401  (fails loudly if autodiff is missing)

    X = tex.placeholder((3, 4), "float64", name="X")
    Y = tex.placeholder((3, 4), "float64", name="Y")
    Z = tex.compute((3, 4), lambda i, j: X[i, j] * X[i, j] + tex.sin(Y[i, j]), name="Z")
    check_grad(Z, [X, Y])
    check_grad(Z, [Y], {X: f64((3, 4), 1)}, head=f64((3, 4), 2), max_points=4)


def test_autodiff_dense_and_scalar_loss() -> None:
    import tex.autodiff  # noqa: F401

    X = tex.placeholder((8, 20), "float64", name="X")  # 160 elements: directions
    W = tex.placeholder((5, 20), "float64", name="W")  # 100 elements: directions
    B = tex.placeholder((5,), "float64", name="B")  # 5 elements: element by element
    k = tex.reduce_axis((0, 20), name="k")
    T = tex.compute((8, 5), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    L = topi.sum(topi.tanh(topi.add(T, B)))
    assert L.shape == ()
    check_grad(L, [X, W, B])
    check_grad(L, [X, W, B], head=np.array(0.5), max_points=200, seed=1)


# --------------------------------------------------------------------------------------
# precision: a float64 copy of the DAG by default
# --------------------------------------------------------------------------------------

def test_float32_program_passes_the_default_tolerances() -> None:
    """Float32 finite differences are noise at ~1e-4: the default float64 copy checks the
    gradient, not the rounding (this failed at index (2, 2) evaluated in float32)."""
    X = tex.placeholder((5, 4), "float32", name="X")
    check_grad(topi.sum(X * X), [X])
    with pytest.raises(AssertionError, match="with respect to 'X' is wrong"):
        check_grad(topi.sum(X * X), [X], precision="native")


@pytest.mark.parametrize("dtype", ["float16", "float32"])
def test_low_precision_programs_with_reductions_pass(dtype: str) -> None:
    X = tex.placeholder((3, 6), dtype, name="X")
    W = tex.placeholder((6, 4), dtype, name="W")
    H = topi.tanh(topi.nn.dense(X, topi.transpose(W)))
    L = topi.sum(topi.nn.softmax(H) * H)
    check_grad(L, [X, W])


def test_float64_mode_evaluates_a_float64_twin(monkeypatch: pytest.MonkeyPatch) -> None:
    X, Y = square((3, 4), "float32")
    seen: list[str] = []

    def build(out, inputs, H):
        seen.extend([out.dtype.name, inputs[0].dtype.name, H.dtype.name])
        (Xc,) = inputs
        return [tex.compute(Xc.shape, lambda i, j: 2.0 * Xc[i, j] * H[i, j], name="dX")]

    patch_grads(monkeypatch, build)
    check_grad(Y, [X])
    assert seen == ["float64"] * 3


def test_wrong_gradient_still_fails_in_float64_mode(monkeypatch: pytest.MonkeyPatch) -> None:
    X, Y = square((3, 4), "float32")

    def build(out, inputs, H):
        (Xc,) = inputs
        return [tex.compute(Xc.shape, lambda i, j: 2.001 * Xc[i, j] * H[i, j], name="dX")]

    patch_grads(monkeypatch, build)
    with pytest.raises(AssertionError, match="with respect to 'X' is wrong"):
        check_grad(Y, [X])


def test_float64_copy_keeps_requested_casts_and_integer_tensors() -> None:
    from tex.testing.widen import float64_copy

    X = tex.placeholder((4,), "float32", name="X")
    I = tex.placeholder((4,), "int32", name="I")  # noqa: E741
    H = tex.compute((4,), lambda i: X[i].astype("float16"), name="H")  # asked: kept
    W = tex.compute((4,), lambda i: H[i].astype("float32") * 3.0, name="W")  # widening
    N = tex.compute((4,), lambda i: (W[i] * 2.0).astype("int32") + I[i], name="N")
    k = tex.reduce_axis((0, 4), name="k")
    S = tex.compute((), lambda: tex.max(W[k] + N[k].astype("float32"), axis=k), name="S")
    twin = float64_copy([S])
    dtypes = {t.name: twin[t].dtype.name for t in (X, I, H, W, N, S)}
    assert dtypes == {"X": "float64", "I": "int32", "H": "float16", "W": "float64",
                      "N": "int32", "S": "float64"}
    assert twin[I] is I and twin[X] is not X and twin[X].name == "X"
    x = np.array([0.1, -2.3, 7.7, 1e-3], "float32")
    i = np.array([1, 0, -2, 5], "int32")
    got = tex.testing.evaluate(twin[S], {twin[X]: x.astype("float64"), I: i})
    h = x.astype("float16").astype("float64")
    w = h * 3.0
    want = (w + ((w * 2.0).astype("int32") + i)).max()
    assert got == want
