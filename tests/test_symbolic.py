"""Symbolic shapes: extents over tex.var/tex.size_var in the IR and topi, specialize, the
reference interpreter binding shape variables from arrays, the arithmetic that reasons with
symbolic ranges, and gradients over symbolic extents checked at several sizes."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.arith import dom_of, prove, simplify
from tex.autodiff import iteration_count
from tex.testing import OutOfBoundsError, check_grad, evaluate


def _rand(*shape: int, seed: int = 0, dtype: str = "float32") -> np.ndarray:
    return np.random.default_rng(seed).standard_normal(shape).astype(dtype)


# -- the IR ---------------------------------------------------------------------------------

def test_shapes_hold_expressions_and_print_them() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 4), name="A")
    B = tex.compute((n * 2, 4), lambda i, j: A[i // 2, j], name="B")
    assert A.shape[0] is n and A.shape[1] == 4
    assert str(A.shape) == "(n, 4)"
    assert str(B.shape) == "(n * 2, 4)"
    assert A.shape.is_symbolic and not tex.placeholder((2,)).shape.is_symbolic
    assert tex.shape_vars([B]) == [n]
    # a constant expression is an int extent
    assert tex.placeholder((n - n + 3,)).shape == (3,)


def test_equal_extents_are_one_node() -> None:
    n = tex.var("n")
    A = tex.placeholder((2 * n,), name="A")
    B = tex.placeholder((n + n,), name="B")
    assert A.shape[0] is B.shape[0]
    C = A + B  # broadcasts: the same symbol
    assert C.shape[0] is A.shape[0]


@pytest.mark.parametrize("extent, match", [
    (1.5, "expected an int"),
    (tex.var("f", "float32"), "extents are integers"),
])
def test_bad_extents_name_the_dimension(extent: object, match: str) -> None:
    with pytest.raises(TypeError, match=match):
        tex.placeholder((4, extent), name="X")


def test_an_index_variable_is_not_an_extent() -> None:
    n = tex.var("n")
    A = tex.placeholder((n,), name="A")
    with pytest.raises(TypeError, match="index variable 'i'"):
        tex.compute((n,), lambda i: tex.sum(A[i], axis=tex.reduce_axis((0, i), name="k")))
    with pytest.raises(TypeError, match="reads"):
        tex.placeholder((A[0].astype("int32"),), name="B")


def test_symbolic_reduce_axis() -> None:
    n, m = tex.size_var("n"), tex.var("m")
    k = tex.reduce_axis((1, m), name="k")
    assert str(k.dom.extent) == "m - 1"
    A = tex.placeholder((n, m), name="A")
    S = tex.compute((n,), lambda i: tex.sum(A[i, k], axis=k), name="S")
    a = _rand(3, 5)
    np.testing.assert_allclose(evaluate(S, {A: a}), a[:, 1:].sum(1), rtol=1e-5)


# -- topi --------------------------------------------------------------------------------------

def test_broadcast_follows_tvm_rules() -> None:
    n, m = tex.size_var("n"), tex.size_var("m")
    A = tex.placeholder((n, 4), name="A")
    assert (A + tex.placeholder((1, 4))).shape == A.shape
    assert (A + tex.placeholder((4,))).shape == A.shape
    assert (A + tex.placeholder((n, 1))).shape == A.shape
    with pytest.raises(ValueError, match="do not broadcast"):
        A + tex.placeholder((m, 4))  # two symbols: not known equal
    with pytest.raises(ValueError, match=r"shapes \(n, 4\) and \(3, 4\) do not broadcast"):
        A + tex.placeholder((3, 4))  # a symbol against a constant other than 1


def test_reshape_with_symbolic_extents() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 6), name="A")
    R = topi.reshape(A, (-1, 3))
    assert str(R.shape) == "(n * 2, 3)"
    a = _rand(4, 6)
    np.testing.assert_array_equal(evaluate(R, {A: a}), a.reshape(-1, 3))
    with pytest.raises(ValueError, match="not a multiple"):
        topi.reshape(A, (-1, 4))
    with pytest.raises(ValueError, match="cannot reshape"):
        topi.reshape(A, (n, 5))


# -- specialize and evaluate ---------------------------------------------------------------

def test_specialize_binds_extents_and_bodies() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 4), name="A")
    k = tex.reduce_axis((0, n), name="k")
    B = tex.compute((4,), lambda j: tex.sum(A[k, j] * n, axis=k), name="B")
    B3 = tex.specialize(B, {n: 3})
    (A3,) = [t for t in B3.op.input_tensors]
    assert A3.shape == (3, 4) and A3 is not A and A3.name == "A"
    assert tex.free_vars([B3]) == []
    a = _rand(3, 4)
    np.testing.assert_allclose(evaluate(B3, {A3: a}), 3 * a.sum(0), rtol=1e-5)
    # the original is unchanged, and a partial binding keeps the rest symbolic
    assert A.shape[0] is n
    m = tex.var("m")
    C = tex.compute((n, m), lambda i, j: A[i, 0] * j, name="C")
    assert str(tex.specialize(C, {m: 2}).shape) == "(n, 2)"


def test_specialize_refuses_bad_values() -> None:
    n = tex.size_var("n")
    m = tex.var("m")
    A = tex.placeholder((m - 2,), name="A")
    with pytest.raises(ValueError, match=r"dimension 0 of placeholder 'A' is m - 2 = 0"):
        tex.specialize(A, {m: 2})
    with pytest.raises(ValueError, match="size_var and cannot be -1"):
        tex.specialize(tex.placeholder((n,)), {n: -1})
    with pytest.raises(TypeError, match="must be an int"):
        tex.specialize(A, {m: 2.5})


@pytest.mark.parametrize("batch", [1, 7, 64])
def test_evaluate_binds_from_arrays(batch: int) -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 16), name="A")
    W = tex.placeholder((8, 16), name="W")
    b = tex.placeholder((8,), name="b")
    Y = topi.nn.softmax(topi.nn.dense(A, W, b))
    a, w, bb = _rand(batch, 16), _rand(8, 16, seed=1), _rand(8, seed=2)
    z = a @ w.T + bb
    e = np.exp(z - z.max(1, keepdims=True))
    np.testing.assert_allclose(evaluate(Y, {A: a, W: w, b: bb}), e / e.sum(1, keepdims=True),
                               rtol=1e-5, atol=1e-6)


def test_evaluate_names_disagreeing_arrays_and_missing_values() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n,), name="A")
    B = tex.placeholder((n,), name="B")
    with pytest.raises(ValueError, match=r"'B' .* gives n = 4, but .*'A' .* gives n = 3"):
        evaluate(A + B, {A: _rand(3), B: _rand(4)})
    m = tex.var("m")
    C = tex.compute((m,), lambda i: i * 2, name="C")
    with pytest.raises(ValueError, match=r"no value for the shape variable 'm'"):
        evaluate(C, {})
    np.testing.assert_array_equal(evaluate(C, {m: 3}), [0, 2, 4])
    np.testing.assert_array_equal(evaluate(C, {"m": 2}), [0, 2])


def test_evaluate_solves_compound_dimensions() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((2 * n + 1,), name="A")
    B = tex.compute((n,), lambda i: A[2 * i + 1], name="B")
    a = _rand(7)
    np.testing.assert_array_equal(evaluate(B, {A: a}), a[1::2])
    with pytest.raises(ValueError, match=r"cannot tell n|2 \* n \+ 1"):
        evaluate(B, {A: _rand(6)})


# -- arithmetic --------------------------------------------------------------------------------

def test_proofs_over_symbolic_ranges() -> None:
    n, m = tex.size_var("n"), tex.var("m")
    i = tex.reduce_axis((0, n), name="i")
    j = tex.reduce_axis((1, m), name="j")
    dom = dom_of([i, j])
    assert prove(i.var < n, dom) is True
    assert prove(i.var + 1 < n, dom) is None  # i may be n - 1
    assert prove(i.var >= n, dom) is False
    assert prove(j.var < m, dom) is True
    assert str(simplify(tex.min(i.var, n - 1), dom)) == "i"
    assert str(simplify(tex.if_then_else(j.var <= m - 1, 1, 0), dom)) == "1"


# -- gradients ---------------------------------------------------------------------------------

def test_dense_gradient_keeps_the_symbolic_sum() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 16), name="A")
    W = tex.placeholder((8, 16), name="W")
    Y = topi.nn.dense(A, W)
    (g,) = tex.differentiate(topi.sum(Y), [W])
    assert "i in [0, n)" in str(g.op.input_tensors[0].op)
    assert str(iteration_count(Y)) == "n * 128"
    assert iteration_count(Y, bind={n: 64}) == 8192
    assert iteration_count(g, bind={n: 4}) == 4 * 16 + 128


def _dense_relu(n: tex.tir.Var) -> tuple:
    A = tex.placeholder((n, 16), "float64", name="A")
    W = tex.placeholder((8, 16), "float64", name="W")
    b = tex.placeholder((8,), "float64", name="b")
    return topi.sum(topi.nn.relu(topi.nn.dense(A, W, b))), [A, W, b]


def _softmax(n: tex.tir.Var) -> tuple:
    A = tex.placeholder((n, 6), "float64", name="A")
    W = tex.placeholder((5, 6), "float64", name="W")
    return topi.nn.softmax(topi.nn.dense(A, W)), [A, W]


def _conv(n: tex.tir.Var) -> tuple:
    X = tex.placeholder((n, 2, 6, 6), "float64", name="X")
    K = tex.placeholder((3, 2, 3, 3), "float64", name="K")
    return topi.nn.conv2d(X, K, 1, 1, 1), [X, K]


def _layer_norm(n: tex.tir.Var) -> tuple:
    X = tex.placeholder((n, 8), "float64", name="X")
    g = tex.placeholder((8,), "float64", name="g")
    b = tex.placeholder((8,), "float64", name="b")
    return topi.nn.layer_norm(X, g, b, axis=[1]), [X, g, b]


def _pool_reshape(n: tex.tir.Var) -> tuple:
    X = tex.placeholder((n, 2, 4, 4), "float64", name="X")
    P = topi.nn.pool2d(X, (2, 2), (2, 2), (1, 1), (0, 0, 0, 0), "avg")
    return topi.reshape(P, (n, -1)), [X]


def _batch_matmul(n: tex.tir.Var) -> tuple:
    A = tex.placeholder((n, 3, 4), "float64", name="A")
    B = tex.placeholder((n, 5, 4), "float64", name="B")
    return topi.nn.batch_matmul(A, B), [A, B]


@pytest.mark.parametrize("build", [_dense_relu, _softmax, _conv, _layer_norm, _pool_reshape,
                                   _batch_matmul], ids=lambda f: f.__name__.strip("_"))
def test_gradients_over_a_symbolic_batch(build) -> None:  # type: ignore[no-untyped-def]
    n = tex.size_var("n")
    out, inputs = build(n)
    for size in (1, 3):
        check_grad(out, inputs, data={n: size})


# -- building and calling ----------------------------------------------------------------------

def test_a_build_serves_every_size() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 4), name="A")
    B = tex.placeholder((n, 4), name="B")
    C = tex.compute((n, 4), lambda i, j: A[i, j] + B[i, j] * 2.0, name="C")
    f = tex.build(tex.create_schedule(C.op), [A, B, C])
    assert f.args[-1] is n  # the shape variable: taken from the arrays
    text = tex.lower(tex.create_schedule(C.op), [A, B, C], simple_mode=True)
    assert "for (i, 0, n)" in str(text) and "n: int32" in str(text)
    for size in (1, 7, 64, 1000):
        a, b = _rand(size, 4), _rand(size, 4, seed=1)
        c = np.zeros((size, 4), np.float32)
        f(a, b, c)
        np.testing.assert_allclose(c, a + 2 * b, rtol=1e-6)
    f(a, b, c, 1000)  # the shape variable may be passed too, and is checked


def test_calls_check_the_shape_variables() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 4), name="A")
    B = tex.placeholder((n, 4), name="B")
    C = tex.compute((n, 4), lambda i, j: A[i, j] + B[i, j], name="C")
    f = tex.build(tex.create_schedule(C.op), [A, B, C])
    a, c = _rand(3, 4), np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"'B' .* gives n = 2, but .*'A' .* gives n = 3"):
        f(a, _rand(2, 4), c)
    with pytest.raises(ValueError, match=r"'C' must have shape \(n, 4\), got an array of "
                                         r"shape \(3, 5\)"):
        f(a, a, np.zeros((3, 5), np.float32))
    with pytest.raises(ValueError, match=r"gives n = 3, but argument 3 \('n'\) gives n = 4"):
        f(a, a, c, 4)
    with pytest.raises(TypeError, match=r"takes 3 arguments \(or 4, with the shape "
                                        r"variables\) \(A: float32\[n, 4\]"):
        f(a, a)


def test_out_of_bounds_reads_of_symbolic_tensors_are_reported() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n,), name="A")
    D = tex.compute((n,), lambda i: A[i + 1], name="D")
    g = tex.build(tex.create_schedule(D.op), [A, D])
    with pytest.raises(OutOfBoundsError, match=r"index 3 in dimension 0 of 'A' .*"
                                                   r"valid range \[0, n\)"):
        g(_rand(3), np.zeros(3, np.float32))
    E = tex.compute((n - 1,), lambda i: A[i + 1], name="E")  # in bounds: proved, no check
    text = str(tex.lower(tex.create_schedule(E.op), [A, E], simple_mode=True))
    assert "oob" not in text, text


def test_a_shape_variable_only_an_output_has() -> None:
    m = tex.var("m")
    E = tex.compute((m,), lambda i: i * 2, name="E")
    h = tex.build(tex.create_schedule(E.op), [E])
    e = np.zeros(5, np.int32)
    h(e)
    np.testing.assert_array_equal(e, [0, 2, 4, 6, 8])


def _check_sizes(f, out, inputs, sizes) -> None:  # type: ignore[no-untyped-def]
    """``f`` (built over a symbolic batch, or its ``simulate``) equals ``evaluate`` at each
    batch of ``sizes``."""
    for size in sizes:
        feed = {t: _rand(*(size if isinstance(d, tex.tir.Var) else d for d in t.shape),
                         seed=k, dtype="float64") for k, t in enumerate(inputs)}
        want = evaluate(out, feed)
        got = np.zeros_like(want)
        f(*feed.values(), got)
        np.testing.assert_allclose(got, want, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("build", [_dense_relu, _softmax, _conv, _layer_norm, _pool_reshape,
                                   _batch_matmul], ids=lambda f: f.__name__.strip("_"))
def test_default_schedules_at_several_sizes(build) -> None:  # type: ignore[no-untyped-def]
    n = tex.size_var("n")
    out, inputs = build(n)
    f = tex.build(tex.create_schedule(out.op), [*inputs, out])
    _check_sizes(f, out, inputs, (1, 5))


@pytest.mark.parametrize("build", [_dense_relu, _softmax, _conv, _layer_norm, _pool_reshape,
                                   _batch_matmul], ids=lambda f: f.__name__.strip("_"))
def test_auto_schedules_at_several_sizes(build) -> None:  # type: ignore[no-untyped-def]
    n = tex.size_var("n")
    out, inputs = build(n)
    f = tex.build(tex.schedule.auto_schedule(out, hint={n: 16}), [*inputs, out])
    _check_sizes(f, out, inputs, (1, 7, 33))


def test_auto_scheduled_gradient_over_a_symbolic_batch() -> None:
    n = tex.size_var("n")
    X = tex.placeholder((n, 24), name="X")
    W = tex.placeholder((16, 24), name="W")
    L = topi.sum(topi.nn.relu(topi.nn.dense(X, W)))
    dX, dW = tex.differentiate(L, [X, W])
    f = tex.build(tex.schedule.auto_schedule([L, dX, dW]), [X, W, L, dX, dW])
    for size in (1, 9, 70):
        x, w = _rand(size, 24), _rand(16, 24, seed=1)
        want = evaluate([L, dX, dW], {X: x, W: w})
        got = [np.zeros_like(a) for a in want]
        f(x, w, *got)
        for g, e in zip(got, want):
            np.testing.assert_allclose(g, e, rtol=2e-4, atol=2e-4)


# -- grad_program and the PyTorch bridge -------------------------------------------------------

def test_grad_program_serves_every_batch() -> None:
    from tex.autodiff import grad_program

    n = tex.size_var("n")
    X = tex.placeholder((n, 16), name="X")
    W = tex.placeholder((8, 16), name="W")
    Y = topi.nn.dense(X, W)
    L = topi.sum(topi.nn.softmax(Y) * Y)
    p = grad_program(L, [X, W])
    text = str(p.plan)
    assert "(n, 8)" in text and "n * 32" in text  # the plan's sizes are expressions
    want_grads = tex.differentiate(L, [X, W])
    for size in (1, 9, 130):
        x, w = _rand(size, 16), _rand(8, 16, seed=1)
        out, tape = p.forward({X: x, W: w})
        grads = p.backward(tape)
        np.testing.assert_allclose(out, evaluate(L, {X: x, W: w}), rtol=1e-4)
        for g, e in zip(grads, evaluate(list(want_grads), {X: x, W: w})):
            np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)
    with pytest.raises(ValueError, match=r"gives n = 130, but .*'X' .* gives n = 3"):
        p.backward({**tape, "X": _rand(3, 16)})  # a tape of arrays that disagree


def test_torch_function_builds_once_for_every_batch() -> None:
    torch = pytest.importorskip("torch")
    n = tex.size_var("n")
    X = tex.placeholder((n, 16), name="X")
    W = tex.placeholder((8, 16), name="W")
    B = tex.placeholder((8,), name="B")
    fn = tex.contrib.torch.function(topi.nn.relu(topi.nn.dense(X, W, B)), [X, W, B],
                                    hint={n: 32})
    w = torch.randn(8, 16, dtype=torch.float32, requires_grad=True)
    b = torch.randn(8, dtype=torch.float32, requires_grad=True)
    kernel = fn.kernel
    for size in (1, 5, 100):
        x = torch.randn(size, 16, requires_grad=True)
        y = fn(x, w, b)
        xr, wr, br = (t.detach().clone().requires_grad_() for t in (x, w, b))
        ref = torch.relu(xr @ wr.T + br)
        torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
        y.square().sum().backward()
        ref.square().sum().backward()
        for got, want in ((x, xr), (w, wr), (b, br)):
            torch.testing.assert_close(got.grad, want.grad, rtol=1e-4, atol=1e-4)
        w.grad = b.grad = None
    assert fn.kernel is kernel and len(fn.gradients) == 1  # one build of each, every size
    with pytest.raises(ValueError, match=r"'W' must have shape \(8, 16\)"):
        fn(torch.randn(3, 16), torch.randn(8, 15), b.detach())
    with pytest.raises(ValueError, match="no input's shape has"):
        m = tex.size_var("m")
        tex.contrib.torch.function(tex.compute((m,), lambda i: X[0, 0], name="Z"), [X])


# -- GPU --------------------------------------------------------------------------------------

@pytest.mark.parametrize("build", [_dense_relu, _softmax, _conv, _batch_matmul],
                         ids=lambda f: f.__name__.strip("_"))
def test_gpu_grids_are_sized_at_each_call(build) -> None:  # type: ignore[no-untyped-def]
    n = tex.size_var("n")
    out, inputs = build(n)
    f = tex.build(tex.schedule.auto_schedule(out, target="cuda", hint={n: 8}),
                  [*inputs, out], target="cuda")
    assert "n" in str(f)  # the shape variable is a parameter of the host function
    _check_sizes(f.simulate, out, inputs, (1, 6))


def test_gpu_thread_blocks_stay_constant() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n,), name="A")
    B = tex.compute((n,), lambda i: A[i] * 2.0, name="B")
    s = tex.create_schedule(B.op)
    s[B].bind(B.op.axis[0], tex.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match=r"threadIdx.x has the symbolic extent n"):
        tex.build(s, [A, B], target="cuda")


# -- scans ------------------------------------------------------------------------------------

def _rnn(steps, batch):  # type: ignore[no-untyped-def]
    h = 3
    X = tex.placeholder((steps, batch, h), "float64", name="X")
    W = tex.placeholder((h, h), "float64", name="W")
    S = tex.placeholder((steps, batch, h), "float64", name="S")
    init = tex.compute((1, batch, h), lambda _, i, j: X[0, i, j], name="init")
    k = tex.reduce_axis((0, h), name="k")
    mv = tex.compute((steps, batch, h),
                     lambda t, i, j: tex.sum(S[t - 1, i, k] * W[j, k], axis=k), name="mv")
    upd = tex.compute((steps, batch, h), lambda t, i, j: tex.tanh(mv[t, i, j] + X[t, i, j]),
                      name="upd")
    return tex.scan(init, upd, S), X, W


def test_a_recurrence_over_a_symbolic_batch_and_its_gradient() -> None:
    b = tex.size_var("b")
    out, X, W = _rnn(5, b)
    L = topi.sum(out * out)
    for size in (1, 3):
        check_grad(L, [X, W], data={b: size})
    grads = tex.differentiate(L, [X, W])
    f = tex.build(tex.schedule.auto_schedule([L, *grads]), [X, W, L, *grads])
    for size in (1, 4):
        x, w = _rand(5, size, 3, dtype="float64"), _rand(3, 3, seed=1, dtype="float64")
        got = [np.zeros(()), np.zeros((5, size, 3)), np.zeros((3, 3))]
        f(x, w, *got)
        for g, e in zip(got, evaluate([L, *grads], {X: x, W: w})):
            np.testing.assert_allclose(g, e, rtol=1e-10, atol=1e-12)


def test_a_recurrence_over_symbolic_steps() -> None:
    m = tex.size_var("m")
    out, X, W = _rnn(m, 2)
    f = tex.build(tex.schedule.auto_schedule(out), [X, W, out])
    for steps in (1, 6):  # one step: the init only (an empty time axis)
        x, w = _rand(steps, 2, 3, dtype="float64"), _rand(3, 3, seed=1, dtype="float64")
        got = np.zeros((steps, 2, 3))
        f(x, w, got)
        np.testing.assert_allclose(got, evaluate(out, {X: x, W: w}), rtol=1e-12)
    with pytest.raises(tex.autodiff.DifferentiationError, match="runs m steps, a symbolic"):
        tex.differentiate(topi.sum(out), [W])


def test_split_points_simplify() -> None:
    n = tex.size_var("n")
    assert str(simplify(tex.min(n // 8, (n + 7) // 8))) == "n // 8"
    assert str(simplify(tex.max(n // 8, (n + 7) // 8))) == "(n + 7) // 8"
    m = tex.var("m")  # a dimension of an argument: at least 1 in the lowered function
    A = tex.placeholder((m,), name="A")
    C = tex.compute((m,), lambda i: A[i] * 2.0, name="C")
    s = tex.create_schedule(C.op)
    o, i = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(o)
    s[C].vectorize(i)
    text = str(tex.lower(s, [A, C], simple_mode=True))
    assert "parallel for (i.outer, 0, m // 4)" in text, text  # the guard-free part
    assert "for (i.outer, m // 4, (m + 3) // 4 - m // 4)" in text, text  # the tail


def test_calls_at_a_remembered_size_are_still_checked() -> None:
    n = tex.size_var("n")
    A = tex.placeholder((n, 4), name="A")
    C = tex.compute((n, 4), lambda i, j: A[i, j] * 2.0, name="C")
    f = tex.build(tex.create_schedule(C.op), [A, C])
    a, c = _rand(3, 4), np.zeros((3, 4), np.float32)
    f(a, c)  # remembered: the next calls at (3, 4) take the fast path
    f(a, c)
    np.testing.assert_array_equal(c, 2 * a)
    with pytest.raises(ValueError, match="C-contiguous"):
        f(a, np.zeros((4, 3), np.float32).T)
    with pytest.raises(ValueError, match="shares memory"):
        f(a, a)
    with pytest.raises(TypeError, match="dtype float32"):
        f(a.astype(np.float64), c)
    with pytest.raises(ValueError, match="gives n = 2"):
        f(_rand(3, 4), np.zeros((2, 4), np.float32))
