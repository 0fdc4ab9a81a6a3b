"""``te.scan`` (issue 24, item 9): recurrences over time, scheduled, compiled, interpreted
and differentiated (the adjoint is a scan backward in time)."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import te
from tex.error import ScheduleError
from tex.ir.visit import placeholders_of


def _cumsum(m=10, n=7, dtype="float32"):
    X = te.placeholder((m, n), name="X", dtype=dtype)
    state = te.placeholder((m, n), name="state", dtype=dtype)
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    update = te.compute((m, n), lambda t, i: state[t - 1, i] + X[t, i], name="update")
    return X, state, init, update, te.scan(init, update, state, inputs=[X])


def _rnn(T=5, H=4, I=3, dtype="float64"):  # noqa: E741
    """h[t] = tanh(W @ h[t-1] + U @ x[t]), h[0] = h0: a body of three stages."""
    X = te.placeholder((T, I), name="X", dtype=dtype)
    W = te.placeholder((H, H), name="W", dtype=dtype)
    U = te.placeholder((H, I), name="U", dtype=dtype)
    h0 = te.placeholder((1, H), name="h0", dtype=dtype)
    state = te.placeholder((T, H), name="h", dtype=dtype)
    init = te.compute((1, H), lambda _, j: h0[0, j], name="init")
    k = te.reduce_axis((0, H), "k")
    pre = te.compute((T, H), lambda t, j: te.sum(W[j, k] * state[t - 1, k], axis=k), name="pre")
    m = te.reduce_axis((0, I), "m")
    ux = te.compute((T, H), lambda t, j: te.sum(U[j, m] * X[t, m], axis=m), name="ux")
    upd = te.compute((T, H), lambda t, j: te.tanh(pre[t, j] + ux[t, j]), name="upd")
    hs = te.scan(init, upd, state, name="rnn")
    return (X, W, U, h0), hs


def _weighted_square_sum(S):
    """sum over t, i of (t + 1) * S[t, i]^2: every row matters, each differently."""
    k1, k2 = te.reduce_axis((0, S.shape[0]), "k1"), te.reduce_axis((0, S.shape[1]), "k2")
    return te.compute((), lambda: te.sum(S[k1, k2] * S[k1, k2] * (k1 + 1).astype(S.dtype),
                                         axis=[k1, k2]), name="L")


def _feed(tensors, seed=0):
    rng = np.random.default_rng(seed)
    return {t: rng.standard_normal(t.shape).astype(t.dtype) for t in tensors}


# -- the builder ----------------------------------------------------------------------------
def test_scan_output_and_printing():
    X, state, init, update, S = _cumsum()
    assert (S.shape, S.dtype, S.name) == ((10, 7), "float32", "scan")
    assert S.op.input_tensors == [init, X]  # the body and the state are the scan's own
    assert S.op.scan_axis.dom.min == 1 and S.op.scan_axis.dom.extent == 9
    assert str(S).splitlines() == [
        "scan = scan(init init, update update, state state) over scan.idx in [1, 10)",
        "  update[t, i] = state[t - 1, i] + X[t, i]"]
    assert placeholders_of([S]) == [X]
    assert tex.graph(S).nodes[S.op]["kind"] == "scan" and "#ece4f4" in tex.to_dot(S)


def test_scan_builder_refuses_what_cannot_run():
    m, n = 6, 3
    X = te.placeholder((m, n), name="X")
    st = te.placeholder((m, n), name="st")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    good = te.compute((m, n), lambda t, i: st[t - 1, i] + X[t, i], name="good")
    with pytest.raises(ValueError, match="reads the state 'st' at row t, not provably before"):
        te.scan(init, te.compute((m, n), lambda t, i: st[t, i] * 2, name="now"), st)
    with pytest.raises(ValueError, match="reads the state 'st' at row t \\+ 1"):
        te.scan(init, te.compute((m, n), lambda t, i: st[t + 1, i], name="later"), st)
    s1 = te.compute((m, n), lambda t, i: st[t - 1, i] * 2, name="s1")
    with pytest.raises(ValueError, match="reads 's1' at row t - 1; at each step"):
        te.scan(init, te.compute((m, n), lambda t, i: s1[t - 1, i], name="lag"), st)
    with pytest.raises(TypeError, match="must be a placeholder"):
        te.scan(init, good, good)
    with pytest.raises(ValueError, match="the update 'short' is float32\\[5, 3\\]"):
        te.scan(init, te.compute((m - 1, n), lambda t, i: st[t, i], name="short"), st)
    with pytest.raises(ValueError, match="the init 'wide' is float32\\[1, 4\\]"):
        te.scan(te.compute((1, n + 1), lambda _, i: 0.0, name="wide"), good, st)
    with pytest.raises(ValueError, match="the init 'st0' depends on a state"):
        te.scan(te.compute((1, n), lambda _, i: st[0, i], name="st0"), good, st)
    with pytest.raises(ValueError, match="the inits have 7 rows for 6 steps"):
        te.scan(te.compute((m + 1, n), lambda t, i: 0.0, name="all"), good, st)
    with pytest.raises(ValueError, match="2 inits, 1 updates and 1 states"):
        te.scan([init, init], [good], [st])


# -- compiled and interpreted -------------------------------------------------------------------
def test_cumsum_compiles_in_place_and_agrees_with_evaluate():
    X, state, init, update, S = _cumsum()
    s = te.create_schedule(S.op)
    assert [(st.name, st.attach_type) for st in s.stages] == [
        ("init", "root"), ("update", "scan"), ("scan", "root")]
    text = str(tex.lower(s, [X, S]))
    # the init writes the first row, each step its row of the output: no copies
    assert "scan[i] = X[i]" in text and "for (scan.idx, 1, 9)" in text
    assert "scan[i + scan.idx * 7] = scan[i + scan.idx * 7 - 7] + X[i + scan.idx * 7]" in text
    assert "allocate" not in text
    f = tex.build(s, [X, S])
    x = _feed([X])[X]
    out = np.zeros_like(x)
    f(x, out)
    np.testing.assert_allclose(out, np.cumsum(x, axis=0), rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(tex.testing.evaluate(S, {X: x}), out, rtol=1e-5, atol=1e-6)


def test_multi_stage_body_with_compute_at_as_in_tvms_tutorial():
    m, n = 12, 40
    X = te.placeholder((m, n), name="X")
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update_s1 = te.compute((m, n), lambda t, i: s_state[t - 1, i] * 2, name="s1")
    s_update_s2 = te.compute((m, n), lambda t, i: s_update_s1[t, i] + X[t, i], name="s2")
    s_scan = te.scan(s_init, s_update_s2, s_state, inputs=[X])
    s = te.create_schedule(s_scan.op)
    xo, xi = s[s_update_s2].split(s_update_s2.op.axis[1], factor=32)
    s[s_update_s1].compute_at(s[s_update_s2], xo)
    text = str(tex.lower(s, [X, s_scan]))
    assert "allocate s1: float32[32]" in text  # one tile of s1 per tile of s2, per step
    f = tex.build(s, [X, s_scan])
    x = _feed([X])[X]
    out = np.zeros_like(x)
    f(x, out)
    ref = np.zeros_like(x)
    ref[0] = x[0]
    for t in range(1, m):
        ref[t] = ref[t - 1] * 2 + x[t]
    np.testing.assert_allclose(out, ref, rtol=1e-5)
    np.testing.assert_allclose(tex.testing.evaluate(s_scan, {X: x}), ref, rtol=1e-5)


def test_two_states_and_a_lag_of_two():
    m, n, k = 9, 4, 3
    X = te.placeholder((m, n), name="X")
    s1 = te.placeholder((m, n), name="s1")
    s2 = te.placeholder((m, k), name="s2")
    # two initial rows; the second state reads the first two rows back
    i1 = te.compute((2, n), lambda t, i: X[t, i], name="i1")
    i2 = te.compute((2, k), lambda t, i: (t + i).astype("float32"), name="i2")
    u1 = te.compute((m, n), lambda t, i: s1[t - 1, i] + s1[t - 2, i] * 0.5 + X[t, i], name="u1")
    u2 = te.compute((m, k), lambda t, j: s2[t - 2, j] - s1[t - 1, 0], name="u2")
    o1, o2 = te.scan([i1, i2], [u1, u2], [s1, s2], name="fib")
    assert o1.name == "fib.v0" and o2.shape == (m, k)
    x = _feed([X])[X]
    r1 = np.zeros((m, n), "float32")
    r2 = np.zeros((m, k), "float32")
    r1[:2] = x[:2]
    r2[:2] = np.add.outer(np.arange(2), np.arange(k))
    for t in range(2, m):
        r1[t] = r1[t - 1] + r1[t - 2] * 0.5 + x[t]
        r2[t] = r2[t - 2] - r1[t - 1, 0]
    for f in (tex.build(te.create_schedule([o1.op]), [X, o1, o2]), tex.build([o1, o2])):
        got1, got2 = np.zeros_like(r1), np.zeros_like(r2)
        f(x, got1, got2)
        np.testing.assert_allclose(got1, r1, rtol=1e-5)
        np.testing.assert_allclose(got2, r2, rtol=1e-5)
    e1, e2 = tex.testing.evaluate([o1, o2], {X: x})
    np.testing.assert_allclose(e1, r1, rtol=1e-5)
    np.testing.assert_allclose(e2, r2, rtol=1e-5)


def test_rnn_forward_compiled_and_auto_scheduled():
    inputs, hs = _rnn(T=7, H=16, I=8, dtype="float32")
    X, W, U, h0 = inputs
    feed = _feed(inputs)
    ref = np.zeros((7, 16), "float32")
    ref[0] = feed[h0][0]
    for t in range(1, 7):
        ref[t] = np.tanh(feed[W] @ ref[t - 1] + feed[U] @ feed[X][t])
    f = tex.build([hs])
    out = np.zeros_like(ref)
    f(*[feed[a] for a in f.args[:-1]], out)
    np.testing.assert_allclose(out, ref, rtol=1e-5, atol=1e-6)
    # auto_schedule vectorizes each step: the matrix-vector product as lane partial sums,
    # the update in place into the output
    text = str(tex.lower(tex.schedule.auto_schedule([hs]), [X, W, U, h0, hs]))
    step = text[text.index("for (rnn.idx"):]
    assert "allocate pre.rf" in step and step.count("vectorized for") >= 3
    assert "rnn.idx * 16] = tanh(" in step
    s = te.create_schedule(hs.op)
    upd = hs.op.update[0]
    s[upd].vectorize(upd.op.axis[1])  # a body stage keeps its own schedule
    g = tex.build(s, [X, W, U, h0, hs])
    out2 = np.zeros_like(ref)
    g(feed[X], feed[W], feed[U], feed[h0], out2)
    np.testing.assert_allclose(out2, ref, rtol=1e-5, atol=1e-6)


# -- schedules --------------------------------------------------------------------------------
def test_schedule_primitives_on_scans_and_their_bodies():
    X, state, init, update, S = _cumsum()
    s = te.create_schedule(S.op)
    with pytest.raises(ScheduleError, match="'scan' is a scan"):
        s[S].fuse()
    with pytest.raises(ScheduleError, match="'scan' is a scan"):
        s[update].compute_at(s[S], S.op.scan_axis)
    Y = te.compute(X.shape, lambda t, i: X[t, i] + 1, name="Y")
    s2 = te.create_schedule([S.op, Y.op])
    with pytest.raises(ScheduleError, match="'scan' is a scan"):
        s2[S].compute_at(s2[Y], Y.op.axis[0])
    with pytest.raises(ScheduleError, match="computed at each step of the scan 'scan'"):
        s2[update].compute_at(s2[Y], Y.op.axis[0])
    s2[update].compute_inline()
    s2[update].compute_root()  # back to the steps
    assert s2[update].attach_type == "scan" and s2[update].scan is s2[S]
    x = _feed([X])[X]
    out, y = np.zeros_like(x), np.zeros_like(x)
    tex.build(s2, [X, S, Y])(x, out, y)
    np.testing.assert_allclose(out, np.cumsum(x, 0), rtol=1e-5, atol=1e-6)


def test_a_state_read_outside_its_scan_is_refused():
    m, n = 5, 3
    X = te.placeholder((m, n), name="X")
    st = te.placeholder((m, n), name="st")
    init = te.compute((1, n), lambda _, i: X[0, i], name="init")
    upd = te.compute((m, n), lambda t, i: st[t - 1, i] + X[t, i], name="upd")
    S = te.scan(init, upd, st)
    spy = te.compute((m, n), lambda t, i: upd[t, i] * 2, name="spy")  # the body, outside
    for outputs in ([S.op, spy.op], [spy.op, S.op]):
        with pytest.raises(ScheduleError, match="'upd' is computed at each step of the scan "
                                                "'scan' .* and is also read outside it"):
            te.create_schedule(outputs)


def test_scan_on_a_gpu_is_a_host_loop_of_launches():
    """TVM's scan tutorial schedule: each step launches the update's kernel (the simulator
    runs what the GPU would)."""
    m, n = 6, 300
    X, state, init, update, S = _cumsum(m, n)
    s = te.create_schedule(S.op)
    for st in (init, update):
        xo, xi = s[st].split(st.op.axis[1], factor=256)
        s[st].bind(xo, te.thread_axis("blockIdx.x"))
        s[st].bind(xi, te.thread_axis("threadIdx.x"))
    f = tex.build(s, [X, S], "cuda", name="myscan")
    text = f.get_source("kernels")
    assert "host loop: for (scan.idx, 1, 5) launch myscan_kernel1" in text
    x = _feed([X])[X]
    out = np.zeros_like(x)
    f.simulate(x, out)
    np.testing.assert_allclose(out, np.cumsum(x, 0), rtol=1e-5, atol=1e-5)
    # an inlined init is copied into the first rows by a kernel of its own
    s2 = te.create_schedule(S.op)
    s2[init].compute_inline()
    xo, xi = s2[update].split(update.op.axis[1], factor=128)
    s2[update].bind(xo, te.thread_axis("blockIdx.x"))
    s2[update].bind(xi, te.thread_axis("threadIdx.x"))
    out2 = np.zeros_like(x)
    tex.build(s2, [X, S], "cuda").simulate(x, out2)
    np.testing.assert_allclose(out2, out, rtol=1e-6)


def test_rnn_and_its_gradient_auto_scheduled_for_a_gpu():
    inputs, hs = _rnn(T=4, H=24, I=3, dtype="float32")
    feed = _feed(inputs)
    f = tex.build(tex.schedule.auto_schedule([hs], "cuda"), [*inputs, hs], "cuda")
    out = np.zeros(hs.shape, "float32")
    f.simulate(*[feed[t] for t in inputs], out)
    np.testing.assert_allclose(out, tex.testing.evaluate(hs, feed), rtol=1e-3, atol=1e-4)
    grads = list(tex.differentiate(_weighted_square_sum(hs), list(inputs)))
    g = tex.build(tex.schedule.auto_schedule(grads, "cuda"), [*inputs, *grads], "cuda")
    outs = [np.zeros(t.shape, "float32") for t in grads]
    g.simulate(*[feed[t] for t in inputs], *outs)
    for got, ref in zip(outs, tex.testing.evaluate(grads, feed)):
        np.testing.assert_allclose(got, ref, rtol=1e-3, atol=1e-3)


# -- gradients --------------------------------------------------------------------------------
def test_gradient_of_a_linear_recurrence():
    X, state, init, update, S = _cumsum(m=6, n=4, dtype="float64")
    L = _weighted_square_sum(S)
    tex.testing.check_grad(L, [X])
    (dX,) = tex.differentiate(L, [X])
    # Λ[t] = sum over t' >= t of 2 (t' + 1) S[t']: the gradient of a cumulative sum
    x = _feed([X])[X]
    s = np.cumsum(x, 0)
    lam = np.cumsum((2 * (np.arange(6) + 1)[:, None] * s)[::-1], 0)[::-1]
    np.testing.assert_allclose(tex.testing.evaluate(dX, {X: x}), lam, rtol=1e-10)
    f = tex.build([dX])
    got = np.zeros_like(x)
    f(x, got)
    np.testing.assert_allclose(got, lam, rtol=1e-10)


def test_rnn_gradient_matches_finite_differences_and_torch():
    torch = pytest.importorskip("torch")
    inputs, hs = _rnn()
    L = _weighted_square_sum(hs)
    tex.testing.check_grad(L, list(inputs))
    grads = tex.differentiate(L, list(inputs))
    # the adjoint recurrence is a scan of its own, backward in time
    assert any("adjoint" in line and "scan(" in line
               for line in tex.ir.printer.format_program(*grads).splitlines())
    feed = _feed(inputs, seed=3)
    f = tex.build(list(grads))
    outs = [np.zeros(g.shape) for g in grads]
    f(*[feed[a] for a in f.args[:4]], *outs)
    X, W, U, h0 = inputs
    tx, tw, tu, th = (torch.tensor(feed[t], requires_grad=True) for t in (X, W, U, h0))
    h = th[0]
    loss = (h * h).sum()
    for t in range(1, 5):
        h = torch.tanh(tw @ h + tu @ tx[t])
        loss = loss + (h * h).sum() * (t + 1)
    loss.backward()
    for got, ref in zip(outs, (tx, tw, tu, th)):
        np.testing.assert_allclose(got, ref.grad.numpy(), rtol=1e-9, atol=1e-12)


def test_gradient_through_two_states_and_lags():
    m, n = 7, 3
    X = te.placeholder((m, n), name="X", dtype="float64")
    A = te.placeholder((n,), name="A", dtype="float64")
    s1 = te.placeholder((m, n), name="s1", dtype="float64")
    s2 = te.placeholder((m, n), name="s2", dtype="float64")
    i1 = te.compute((2, n), lambda t, i: X[t, i] * A[i], name="i1")
    i2 = te.compute((2, n), lambda t, i: X[t, i] * 0.5, name="i2")
    u1 = te.compute((m, n), lambda t, i: te.sin(s1[t - 1, i]) * s2[t - 2, i] + X[t, i],
                    name="u1")
    u2 = te.compute((m, n), lambda t, i: s1[t - 2, (i + 1) % n] * A[i] + s2[t - 1, i],
                    name="u2")
    o1, o2 = te.scan([i1, i2], [u1, u2], [s1, s2], name="pair")
    k1, k2 = te.reduce_axis((0, m), "k1"), te.reduce_axis((0, n), "k2")
    L = te.compute((), lambda: te.sum(o1[k1, k2] * o2[k1, k2], axis=[k1, k2]), name="L")
    tex.testing.check_grad(L, [X, A])


def test_scan_gradient_refusals():
    X, state, init, update, S = _cumsum(m=4, n=3, dtype="float64")
    with pytest.raises(tex.autodiff.DifferentiationError, match="only a head of the output"):
        tex.differentiate(S, [X])  # a Jacobian: the head has a prefix


def test_grad_program_through_a_scan():
    inputs, hs = _rnn()
    L = _weighted_square_sum(hs)
    prog = tex.autodiff.grad_program(L, list(inputs))
    assert prog.plan.row("rnn").status == "saved"
    feed = _feed(inputs, seed=5)
    out, tape = prog.forward(feed)
    grads = prog.backward(tape)
    ref = tex.testing.evaluate(list(tex.differentiate(L, list(inputs))), feed)
    for g, r in zip(grads, ref):
        np.testing.assert_allclose(g, r, rtol=1e-9)


# -- a family of random recurrences --------------------------------------------------------
def _random_recurrence(seed: int):
    """A seeded random scan: 1 or 2 initial rows, state reads at lags up to the initial
    rows, a body of one to three stages (element-wise, a matrix-vector product over the
    state, an intermediate read by the update), outside inputs X, W, b; and its loss."""
    rng = np.random.default_rng(seed)
    T = int(rng.integers(3, 7))
    n = int(rng.integers(1, 5))
    n0 = int(rng.integers(1, 3))
    f64 = "float64"
    X = te.placeholder((T, n), name="X", dtype=f64)
    W = te.placeholder((n, n), name="W", dtype=f64)
    b = te.placeholder((n,), name="b", dtype=f64)
    st = te.placeholder((T, n), name="st", dtype=f64)
    init = te.compute((n0, n), lambda t, i: X[t, i] * 0.5 + b[i], name="init")
    lag = int(rng.integers(1, n0 + 1))
    shape = int(rng.integers(0, 5))
    if shape == 0:  # element-wise
        upd = te.compute((T, n), lambda t, i: te.sin(st[t - lag, i]) * 0.8 + X[t, i] * b[i],
                         name="upd")
    elif shape == 1:  # a matrix-vector product over the state, then tanh
        k = te.reduce_axis((0, n), "k")
        pre = te.compute((T, n), lambda t, j: te.sum(W[j, k] * st[t - 1, k] * 0.5, axis=k),
                         name="pre")
        upd = te.compute((T, n), lambda t, j: te.tanh(pre[t, j] + X[t, j])
                         + st[t - lag, j] * 0.1, name="upd")
    elif shape == 4:  # two matrix-vector products in a chain, both read by the update
        k = te.reduce_axis((0, n), "k")
        p1 = te.compute((T, n), lambda t, j: te.sum(W[j, k] * st[t - 1, k] * 0.5, axis=k),
                        name="p1")
        k2 = te.reduce_axis((0, n), "k2")
        p2 = te.compute((T, n), lambda t, j: te.sum(W[k2, j] * p1[t, k2] * 0.5, axis=k2),
                        name="p2")
        upd = te.compute((T, n), lambda t, j: te.tanh(p1[t, j] + p2[t, j] + X[t, j]),
                         name="upd")
    elif shape == 3:  # a diamond: the update reads a stage directly and through another
        a = te.compute((T, n), lambda t, i: te.sin(st[t - 1, i]), name="a")
        bb = te.compute((T, n), lambda t, i: a[t, i] * X[t, i] + st[t - lag, i] * 0.5,
                        name="bb")
        upd = te.compute((T, n), lambda t, i: a[t, i] * bb[t, i] + b[i], name="upd")
    else:  # an intermediate read twice, and a state read at another column
        mid = te.compute((T, n), lambda t, i: st[t - 1, (i + 1) % n] * X[t, i], name="mid")
        upd = te.compute((T, n), lambda t, i: mid[t, i] * mid[t, i] * 0.3 + st[t - lag, i]
                         * 0.5 + W[i, i], name="upd")
    S = te.scan(init, upd, st, name="rec")
    k1, k2 = te.reduce_axis((0, T), "k1"), te.reduce_axis((0, n), "k2")
    L = te.compute((), lambda: te.sum(S[k1, k2] * S[k1, k2] * (k1 + 1).astype(f64),
                                      axis=[k1, k2]), name="L")
    return [X, W, b], S, L


@pytest.mark.parametrize("seed", [*range(10), 42, 47])  # (42, 47: one step)
def test_random_recurrences_compile_evaluate_and_differentiate(seed):
    inputs, S, L = _random_recurrence(seed)
    feed = _feed(inputs, seed)
    want = tex.testing.evaluate(S, feed)
    f = tex.build([S])
    got = np.zeros(S.shape)
    f(*[feed[a] for a in f.args[:-1]], got)
    np.testing.assert_allclose(got, want, rtol=1e-12, atol=1e-12)
    used = [t for t in inputs if t in placeholders_of([L])]
    tex.testing.check_grad(L, used, data=feed)
    grads = list(tex.differentiate(L, used))
    g = tex.build(grads)
    outs = [np.zeros(t.shape) for t in grads]
    g(*[feed[a] for a in g.args[:len(used)]], *outs)
    for o, r in zip(outs, tex.testing.evaluate(grads, feed)):
        np.testing.assert_allclose(o, r, rtol=1e-10, atol=1e-12)
    # forward mode: the tangent scan against central differences, compiled = evaluated
    used = [t for t in inputs if t in placeholders_of([S])]
    tans = [te.placeholder(t.shape, name=f"T{t.name}", dtype="float64") for t in used]
    J = tex.autodiff.jvp(S, used, tans)
    dirs = _feed(tans, seed + 100)
    tangent = tex.testing.evaluate(J, {**feed, **dirs})
    eps = 1e-6
    moved = [{**feed, **{t: feed[t] + s * eps * dirs[d] for t, d in zip(used, tans)}}
             for s in (1, -1)]
    fd = (tex.testing.evaluate(S, moved[0]) - tex.testing.evaluate(S, moved[1])) / (2 * eps)
    np.testing.assert_allclose(tangent, fd, rtol=1e-6, atol=1e-8)
    j = tex.build([J])
    got_j = np.zeros(S.shape)
    j(*[{**feed, **dirs}[a] for a in j.args[:-1]], got_j)
    np.testing.assert_allclose(got_j, tangent, rtol=1e-10, atol=1e-12)


def test_an_update_that_reads_no_state_and_a_one_dimensional_state():
    m, n = 6, 3
    X = te.placeholder((m, n), name="X", dtype="float64")
    st = te.placeholder((m, n), name="st", dtype="float64")
    init = te.compute((2, n), lambda t, i: X[t, i] * 2, name="init")
    upd = te.compute((m, n), lambda t, i: te.sin(X[t, i]), name="upd")
    S = te.scan(init, upd, st)
    assert upd in S.op.input_tensors  # computed before the scan, its rows copied
    x = _feed([X])[X]
    ref = np.sin(x)
    ref[:2] = 2 * x[:2]
    out = np.zeros_like(x)
    tex.build([S])(x, out)
    np.testing.assert_allclose(out, ref, rtol=1e-12)
    np.testing.assert_allclose(tex.testing.evaluate(S, {X: x}), ref, rtol=1e-12)
    tex.testing.check_grad(_weighted_square_sum(S), [X])
    Y = te.placeholder((m,), name="Y", dtype="float64")
    s1 = te.placeholder((m,), name="s1", dtype="float64")
    S1 = te.scan(te.compute((1,), lambda t: Y[0], name="i1"),
                 te.compute((m,), lambda t: s1[t - 1] * 0.9 + Y[t], name="u1"), s1)
    y = _feed([Y])[Y]
    o = np.zeros(m)
    tex.build([S1])(y, o)
    r = np.zeros(m)
    r[0] = y[0]
    for t in range(1, m):
        r[t] = r[t - 1] * 0.9 + y[t]
    np.testing.assert_allclose(o, r, rtol=1e-12)
    kk = te.reduce_axis((0, m), "kk")
    tex.testing.check_grad(te.compute((), lambda: te.sum(S1[kk] * S1[kk], axis=kk),
                                      name="L1"), [Y])


def test_rnn_as_a_torch_autograd_function():
    torch = pytest.importorskip("torch")
    from tex.contrib import torch as tex_torch

    inputs, hs = _rnn(dtype="float32")
    fn = tex_torch.function(hs, list(inputs))
    feed = _feed(inputs, seed=1)
    tx = [torch.tensor(feed[t], requires_grad=True) for t in inputs]
    y = fn(*tx)
    (y * y).sum().backward()
    got = [t.grad.clone() for t in tx]
    for t in tx:
        t.grad = None
    X, W, U, h0 = tx
    h = h0[0]
    ref = [h]
    for t in range(1, 5):
        h = torch.tanh(W @ h + U @ X[t])
        ref.append(h)
    ref = torch.stack(ref)
    torch.testing.assert_close(y, ref, rtol=1e-5, atol=1e-5)
    (ref * ref).sum().backward()
    for g, t in zip(got, tx):
        torch.testing.assert_close(g, t.grad, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("seed", [1, 4, 6, 42])
def test_random_recurrences_on_the_gpu_simulator(seed):
    """The same family auto-scheduled for CUDA (host loops of launches, the body rows over
    threads), forward and gradient, run by the simulator against evaluate."""
    inputs, S, L = _random_recurrence(seed)
    feed = _feed(inputs, seed)
    used = [t for t in inputs if t in placeholders_of([L])]
    f = tex.build(tex.schedule.auto_schedule([S], "cuda"), [*used, S], "cuda")
    out = np.zeros(S.shape)
    f.simulate(*[feed[t] for t in used], out)
    np.testing.assert_allclose(out, tex.testing.evaluate(S, feed), rtol=1e-10, atol=1e-12)
    grads = list(tex.differentiate(L, used))
    g = tex.build(tex.schedule.auto_schedule(grads, "cuda"), [*used, *grads], "cuda")
    outs = [np.zeros(t.shape) for t in grads]
    g.simulate(*[feed[t] for t in used], *outs)
    for o, r in zip(outs, tex.testing.evaluate(grads, feed)):
        np.testing.assert_allclose(o, r, rtol=1e-9, atol=1e-11)


def _lstm(T=4, H=3, I=2):  # noqa: E741
    """An LSTM as a scan of two states (h, c): four gates of matrix-vector products."""
    f64 = "float64"
    X = te.placeholder((T, I), name="X", dtype=f64)
    Wx = te.placeholder((4, H, I), name="Wx", dtype=f64)
    Wh = te.placeholder((4, H, H), name="Wh", dtype=f64)
    h_st = te.placeholder((T, H), name="h", dtype=f64)
    c_st = te.placeholder((T, H), name="c", dtype=f64)
    h0 = te.compute((1, H), lambda _, j: 0.0 * X[0, 0], name="h0")
    c0 = te.compute((1, H), lambda _, j: 0.0 * X[0, 0], name="c0")
    k = te.reduce_axis((0, H), "k")
    gh = te.compute((T, 4, H), lambda t, g, j: te.sum(Wh[g, j, k] * h_st[t - 1, k], axis=k),
                    name="gh")
    m = te.reduce_axis((0, I), "m")
    gx = te.compute((T, 4, H), lambda t, g, j: te.sum(Wx[g, j, m] * X[t, m], axis=m),
                    name="gx")
    gate = te.compute((T, 4, H), lambda t, g, j: gh[t, g, j] + gx[t, g, j], name="gate")
    c_new = te.compute((T, H), lambda t, j: te.sigmoid(gate[t, 1, j]) * c_st[t - 1, j]
                       + te.sigmoid(gate[t, 0, j]) * te.tanh(gate[t, 2, j]), name="c_new")
    h_new = te.compute((T, H), lambda t, j: te.sigmoid(gate[t, 3, j]) * te.tanh(c_new[t, j]),
                       name="h_new")
    hs, cs = te.scan([h0, c0], [h_new, c_new], [h_st, c_st], name="lstm")
    return [X, Wx, Wh], hs, cs


def test_lstm_two_states_forward_and_gradient_match_torch():
    torch = pytest.importorskip("torch")
    inputs, hs, cs = _lstm()
    L = _weighted_square_sum(hs)
    tex.testing.check_grad(L, inputs)
    feed = _feed(inputs, seed=11)
    grads = list(tex.differentiate(L, inputs))
    f = tex.build([hs, cs, *grads])
    outs = [np.zeros(t.shape) for t in (hs, cs, *grads)]
    f(*[feed[t] for t in inputs], *outs)
    X, Wx, Wh = (torch.tensor(feed[t], requires_grad=True) for t in inputs)
    h = torch.zeros(3, dtype=torch.float64)
    c = torch.zeros(3, dtype=torch.float64)
    hs_ref, loss = [h], (h * h).sum()
    for t in range(1, 4):
        g = torch.einsum("gjk,k->gj", Wh, h) + torch.einsum("gjm,m->gj", Wx, X[t])
        c = torch.sigmoid(g[1]) * c + torch.sigmoid(g[0]) * torch.tanh(g[2])
        h = torch.sigmoid(g[3]) * torch.tanh(c)
        hs_ref.append(h)
        loss = loss + (h * h).sum() * (t + 1)
    loss.backward()
    np.testing.assert_allclose(outs[0], torch.stack(hs_ref).detach().numpy(), rtol=1e-12)
    for got, ref in zip(outs[2:], (X, Wx, Wh)):
        np.testing.assert_allclose(got, ref.grad.numpy(), rtol=1e-9, atol=1e-12)
