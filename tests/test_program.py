"""``tex.autodiff.grad_program``: forward and backward programs joined by a tape.

Every program is checked against the reference interpreter (``tex.testing.evaluate`` of the
loss and of ``tex.differentiate``'s gradients), once against finite differences of its own
forward, and its plan against the policy: what is saved, recomputed, the tape's keys and
bytes, the iteration counts.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import tex
import tex.program
from tex import topi
from tex.testing import check_grad, evaluate

RTOL, ATOL = 1e-4, 1e-5


@dataclass
class Case:
    """A small loss, what to differentiate, data, and an explicit tape list."""

    loss: tex.Tensor
    wrt: list[tex.Tensor]
    feed: dict[tex.Tensor, np.ndarray]
    tape_list: list[tex.Tensor]
    tensors: dict[str, tex.Tensor]


def _data(rng: np.random.Generator, *tensors: tex.Tensor) -> dict[tex.Tensor, np.ndarray]:
    return {t: rng.standard_normal(t.shape).astype(t.dtype.numpy) for t in tensors}


def _by_name(loss: tex.Tensor) -> dict[str, tex.Tensor]:
    """Every tensor of the loss's DAG by name (names are unique in these cases)."""
    from tex.ir.visit import topo_sort_ops
    return {op.output(0).name: op.output(0) for op in topo_sort_ops([loss])}


def dense_cross_entropy(dtype: str = "float32") -> Case:
    """Dense + bias, log-softmax, cross entropy against one-hot labels."""
    rng = np.random.default_rng(0)
    X = tex.placeholder((4, 6), dtype, name="X")
    W = tex.placeholder((5, 6), dtype, name="W")
    B = tex.placeholder((5,), dtype, name="B")
    labels = tex.placeholder((4, 5), dtype, name="labels")
    logp = topi.nn.log_softmax(topi.nn.dense(X, W, B))
    loss = topi.sum(-(logp * labels))
    feed = _data(rng, X, W, B)
    feed[labels] = np.eye(5, dtype=dtype)[[0, 3, 1, 4]]
    names = _by_name(loss)
    return Case(loss, [W, B], feed, [names["T_add"], names["T_log_softmax"]], names)


def softmax() -> Case:
    rng = np.random.default_rng(1)
    x = tex.placeholder((4, 7), name="x")
    y = topi.nn.softmax(x)
    loss = topi.sum(y * y)
    names = _by_name(loss)
    return Case(loss, [x], _data(rng, x), [names["T_softmax_exp"]], names)


def layernorm() -> Case:
    rng = np.random.default_rng(2)
    x = tex.placeholder((3, 8), name="x")
    gamma, beta = tex.placeholder((8,), name="gamma"), tex.placeholder((8,), name="beta")
    y = topi.nn.layer_norm(x, gamma, beta)
    loss = topi.sum(y * y)
    names = _by_name(loss)
    return Case(loss, [x, gamma, beta], _data(rng, x, gamma, beta),
                [names["T_layer_norm_sum"], names["T_layer_norm"]], names)


def maxpool() -> Case:
    rng = np.random.default_rng(3)
    data = tex.placeholder((1, 2, 4, 4), name="data")
    pooled = topi.nn.pool2d(data, (2, 2), (2, 2), 1, 0, pool_type="max")
    loss = topi.sum(pooled * pooled)
    names = _by_name(loss)
    return Case(loss, [data], _data(rng, data), [names["T_multiply"]], names)


def conv() -> Case:
    rng = np.random.default_rng(4)
    data = tex.placeholder((1, 2, 5, 5), name="data")
    kernel = tex.placeholder((3, 2, 3, 3), name="kernel")
    loss = topi.sum(topi.tanh(topi.nn.conv2d(data, kernel, 1, 1)))
    names = _by_name(loss)
    return Case(loss, [data, kernel], _data(rng, data, kernel), [names["pad_temp"]], names)


CASES: dict[str, Callable[[], Case]] = {
    "dense_ce": dense_cross_entropy, "softmax": softmax, "layernorm": layernorm,
    "maxpool": maxpool, "conv": conv,
}
TAPES = ("auto", "none", "all", "list")

_PROGRAMS: dict[tuple[str, str], tuple[Case, tex.program.GradProgram]] = {}


def program(case: str, tapes: str) -> tuple[Case, tex.program.GradProgram]:
    """Built once per module run (building is the slow part)."""
    key = (case, tapes)
    if key not in _PROGRAMS:
        c = CASES[case]()
        policy = c.tape_list if tapes == "list" else tapes
        _PROGRAMS[key] = c, tex.autodiff.grad_program(c.loss, wrt=c.wrt, tapes=policy)
    return _PROGRAMS[key]


def _reference(c: Case, head: np.ndarray) -> list[np.ndarray]:
    H = tex.placeholder(c.loss.shape, c.loss.dtype, name="H")
    grads = list(tex.differentiate(c.loss, c.wrt, H))
    return evaluate([c.loss, *grads], {**c.feed, H: head})  # type: ignore[return-value]


# --------------------------------------------------------------------------------------
# values


@pytest.mark.parametrize("tapes", TAPES)
@pytest.mark.parametrize("case", list(CASES))
def test_program_matches_reference(case: str, tapes: str) -> None:
    c, prog = program(case, tapes)
    out, tape = prog.forward(c.feed)
    assert isinstance(out, np.ndarray) and out.shape == c.loss.shape == ()
    ones = np.ones((), np.float32)
    want = _reference(c, ones)
    np.testing.assert_allclose(out, want[0], rtol=RTOL, atol=ATOL)
    grads = prog.backward(tape)
    assert len(grads) == len(c.wrt)
    for t, g, r in zip(c.wrt, grads, want[1:]):
        assert g.shape == t.shape and g.dtype == np.float32
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL, err_msg=f"d{t.name}")
    head = np.asarray(-2.5, np.float32)  # a head other than ones
    for t, g, r in zip(c.wrt, prog.backward(tape, head=head), _reference(c, head)[1:]):
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL, err_msg=f"d{t.name} (head)")
    # the tape: exactly the plan's keys; saved entries are the forward's values
    plan = prog.plan
    assert sorted(tape) == sorted(plan.tape_keys)
    saved = dict(prog.saved)
    assert sorted(saved) == sorted(plan.saved)
    if saved:
        values = evaluate(list(saved.values()), c.feed)
        for k, v in zip(saved, values):
            np.testing.assert_allclose(tape[k], v, rtol=RTOL, atol=ATOL, err_msg=k)
            assert tape[k].nbytes == plan.row(k).nbytes
    assert plan.tape_bytes == sum(tape[k].nbytes for k in plan.saved)
    for row in plan.inputs:  # inputs are carried by reference
        assert tape[row.key] is next(v for t, v in c.feed.items() if t.name == row.name)


def test_auto_recomputes_less_than_none() -> None:
    for case in CASES:
        auto, none = program(case, "auto")[1].plan, program(case, "none")[1].plan
        assert auto.backward_iterations <= none.backward_iterations, case
        assert none.tape_bytes == 0 and not none.saved
    # where a reduction feeds the gradient, saving it is strictly cheaper
    for case in ("softmax", "layernorm", "conv", "dense_ce"):
        auto, none = program(case, "auto")[1].plan, program(case, "none")[1].plan
        assert auto.backward_iterations < none.backward_iterations, case


def test_finite_differences_of_the_program() -> None:
    """Central differences of the program's own forward, in float64."""
    c = dense_cross_entropy("float64")
    check_grad(c.loss, c.wrt, dict(c.feed))  # the symbolic gradient itself
    prog = tex.autodiff.grad_program(c.loss, c.wrt, tapes="auto")
    out, tape = prog.forward(c.feed)
    head = np.asarray(0.75)
    grads = prog.backward(tape, head=head)
    eps = 1e-6
    for t, g in zip(c.wrt, grads):
        numeric = np.zeros(t.shape)
        for idx in np.ndindex(*t.shape):
            plus, minus = dict(c.feed), dict(c.feed)
            plus[t] = c.feed[t].copy()
            minus[t] = c.feed[t].copy()
            plus[t][idx] += eps
            minus[t][idx] -= eps
            numeric[idx] = head * (prog.forward(plus)[0] - prog.forward(minus)[0]) / (2 * eps)
        np.testing.assert_allclose(g, numeric, rtol=1e-6, atol=1e-8, err_msg=f"d{t.name}")


def test_non_scalar_loss_and_repeated_wrt() -> None:
    rng = np.random.default_rng(5)
    x = tex.placeholder((3, 5), name="x")
    y = topi.nn.softmax(x)  # the loss is the softmax itself: the head has its shape
    prog = tex.autodiff.grad_program(y, [x, x])
    feed = _data(rng, x)
    out, tape = prog.forward(feed)
    np.testing.assert_allclose(out, evaluate(y, feed), rtol=RTOL)
    H = tex.placeholder(y.shape, name="H")
    (dx_ref,) = evaluate(list(tex.differentiate(y, [x], H)),
                         {**feed, H: np.ones(y.shape, np.float32)})
    h = rng.standard_normal(y.shape).astype(np.float32)
    (dx_h,) = evaluate(list(tex.differentiate(y, [x], H)), {**feed, H: h})
    d1, d2 = prog.backward(tape)
    np.testing.assert_allclose(d1, dx_ref, rtol=RTOL, atol=ATOL)
    assert d1 is not d2 and np.array_equal(d1, d2)
    np.testing.assert_allclose(prog.backward(tape, head=h)[0], dx_h, rtol=RTOL, atol=ATOL)
    # fresh arrays on every call
    out2, tape2 = prog.forward(feed)
    assert out2 is not out and all(tape2[k] is not tape[k] for k in prog.plan.saved)


# --------------------------------------------------------------------------------------
# the plan


def test_plan_softmax() -> None:
    c, auto = program("softmax", "auto")
    plan = auto.plan
    status = {r.name: r.status for r in plan.rows}
    assert status == {"T_softmax_maxelem": "saved", "T_softmax_exp": "recomputed",
                      "T_softmax_expsum": "saved", "T_softmax_norm": "recomputed"}
    assert plan.saved == ["T_softmax_maxelem", "T_softmax_expsum"]
    assert plan.tape_bytes == 2 * 4 * 4  # two float32[4]
    assert [r.name for r in plan.inputs] == ["x"] and plan.input_bytes == 4 * 7 * 4
    assert plan.tape_keys == ["T_softmax_maxelem", "T_softmax_expsum", "x"]
    r = plan.row("T_softmax_expsum")
    assert (r.shape, r.dtype, r.iterations, r.per_element) == ((4,), "float32", 28, 7)
    assert r.iterations_from_inputs == tex.autodiff.iteration_count(c.tensors["T_softmax_expsum"])
    text = str(plan)
    for word in ("T_softmax_maxelem", "saved", "recomputed", "tape: 2 saved", "x(4, 7)",
                 f"backward {plan.backward_iterations:,}"):
        assert word in text, word
    assert plan.as_dict()["saved"] == plan.saved
    # the backward program reads the saved tensors, never recomputes them
    grads = auto.backward_tensors
    ops = {op.name for op in tex.ir.visit.topo_sort_ops(grads)}
    assert "T_softmax_exp" in ops and "T_softmax_norm" in ops
    assert all(isinstance(t.op, tex.ir.tensor.PlaceholderOp)
               for t in auto.saved_placeholders.values())

    none = program("softmax", "none")[1].plan
    assert none.saved == [] and {r.status for r in none.rows} == {"recomputed"}
    assert none.tape_keys == ["x"]
    every = program("softmax", "all")[1].plan
    # with exp saved, the backward needs no max: the max-shift's adjoint is proved zero
    assert every.saved == ["T_softmax_exp", "T_softmax_expsum", "T_softmax_norm"]
    assert every.recomputed == [] and every.row("T_softmax_maxelem").status == "unused"
    assert every.tape_bytes == (28 + 4 + 28) * 4
    listed = program("softmax", "list")[1].plan
    assert listed.saved == ["T_softmax_exp"]
    # the max-shift has no adjoint (proved zero) and exp is saved: nothing reads the max
    assert set(listed.recomputed) == {"T_softmax_expsum", "T_softmax_norm"}
    assert listed.row("T_softmax_maxelem").status == "unused"


def test_plan_auto_saves_reductions() -> None:
    dense = program("dense_ce", "auto")[1].plan
    assert {"T_dense", "T_log_softmax_maxelem", "T_log_softmax_expsum"} == set(dense.saved)
    assert "T_add" in dense.recomputed  # elementwise: recomputed from the saved matmul
    ln = program("layernorm", "auto")[1].plan
    assert set(ln.saved) == {"T_layer_norm_sum", "T_layer_norm_sqsum"}
    conv_plan = program("conv", "auto")[1].plan
    assert conv_plan.saved == ["conv2d_nchw"]
    # the padded copy feeds only the saved convolution: the backward does not read it
    assert conv_plan.row("pad_temp").status == "unused"
    assert "pad_temp" not in {op.name for op in tex.ir.visit.topo_sort_ops(
        program("conv", "auto")[1].backward_tensors)}
    pool = program("maxpool", "auto")[1].plan
    assert pool.saved == ["pool_max"] and pool.tape_bytes == 2 * 2 * 2 * 4


def test_explicit_list_saves_exactly_those() -> None:
    c = softmax()
    extra = [c.tensors["T_softmax_norm"], c.tensors["T_multiply"], c.loss]
    prog = tex.autodiff.grad_program(c.loss, c.wrt, tapes=extra + extra[:1])
    assert sorted(prog.plan.saved) == sorted(t.name for t in extra)
    # the loss and the product are not read by the backward: saved all the same, flagged
    assert not prog.plan.row(c.loss.name).read_by_backward
    assert prog.plan.row("T_softmax_norm").read_by_backward
    out, tape = prog.forward(c.feed)
    np.testing.assert_allclose(tape[c.loss.name], out)
    (dx,) = prog.backward(tape)
    np.testing.assert_allclose(dx, _reference(c, np.ones((), np.float32))[1], rtol=RTOL,
                               atol=ATOL)


def test_multi_output_operation() -> None:
    """An argmax reducer (index and value outputs): one output saved, the other recomputed
    (the whole operation runs again), or both saved."""
    def combine(x: tuple, y: tuple) -> tuple:
        keep = x[1] >= y[1]
        return tex.select(keep, x[0], y[0]), tex.select(keep, x[1], y[1])

    argmax = tex.comm_reducer(combine, lambda t0, t1: (tex.const(-1, t0), tex.min_value(t1)),
                              name="argmax")
    A = tex.placeholder((3, 5), name="A")
    k = tex.reduce_axis((0, 5), name="k")
    idx, val = tex.compute((3,), lambda i: argmax((k.var, A[i, k]), axis=k), name="am")
    loss = topi.sum(val * val + idx.astype("float32"))
    feed = _data(np.random.default_rng(7), A)
    want = _reference(Case(loss, [A], feed, [], {}), np.ones((), np.float32))[1]
    for tapes, saved, recompute in (("auto", ["am.v0", "am.v1"], 0), ([val], ["am.v1"], 15)):
        prog = tex.autodiff.grad_program(loss, [A], tapes=tapes)
        assert prog.plan.saved == saved
        assert prog.plan.recompute_iterations == recompute  # the operation counted once
        out, tape = prog.forward(feed)
        if "am.v0" in saved:
            assert tape["am.v0"].dtype == np.int32
        np.testing.assert_allclose(prog.backward(tape)[0], want, rtol=RTOL, atol=ATOL)


def test_tape_keys_are_unique() -> None:
    rng = np.random.default_rng(6)
    x = tex.placeholder((6,), name="x")
    k = tex.reduce_axis((0, 6), name="k")
    a = tex.compute((6,), lambda i: tex.sum(x[k] * x[i], axis=k), name="x")  # as the input
    b = tex.compute((6,), lambda i: tex.sum(a[k] * x[i], axis=k), name="x")
    loss = topi.sum(b * b)
    prog = tex.autodiff.grad_program(loss, [x], tapes=[a, b])
    assert prog.plan.saved == ["x_1", "x_2"] and prog.plan.tape_keys[-1] == "x"
    assert "x as x_1" in str(prog.plan)
    feed = _data(rng, x)
    out, tape = prog.forward(feed)
    np.testing.assert_allclose(tape["x_1"], evaluate(a, feed), rtol=RTOL)
    (dx,) = prog.backward(tape)
    np.testing.assert_allclose(dx, _reference(Case(loss, [x], feed, [], {}),
                                              np.ones((), np.float32))[1], rtol=RTOL)


def test_facade() -> None:
    assert tex.autodiff.grad_program is tex.program.grad_program
    assert tex.autodiff.GradProgram is tex.program.GradProgram
    assert "grad_program" in dir(tex.autodiff) and "grad_program" in tex.autodiff.__all__
    with pytest.raises(AttributeError, match="no_such_name"):
        tex.autodiff.no_such_name  # noqa: B018


# --------------------------------------------------------------------------------------
# errors


def test_bad_tapes() -> None:
    c = softmax()
    with pytest.raises(ValueError, match="unknown tapes='some'"):
        tex.autodiff.grad_program(c.loss, c.wrt, tapes="some")
    other = topi.exp(tex.placeholder((4, 7), name="elsewhere"))
    with pytest.raises(ValueError, match="'T_exp' is not an intermediate"):
        tex.autodiff.grad_program(c.loss, c.wrt, tapes=[c.tensors["T_softmax_exp"], other])
    with pytest.raises(ValueError, match="'x' is a placeholder"):
        tex.autodiff.grad_program(c.loss, c.wrt, tapes=c.wrt)
    with pytest.raises(TypeError, match="write \\[T_softmax_exp\\]"):
        tex.autodiff.grad_program(c.loss, c.wrt, tapes=c.tensors["T_softmax_exp"])
    with pytest.raises(TypeError, match="tapes\\[0\\] must be a Tensor"):
        tex.autodiff.grad_program(c.loss, c.wrt, tapes=["T_softmax_exp"])
    with pytest.raises(ValueError, match="wrt\\[0\\] 'T_softmax_exp' is a computed tensor"):
        tex.autodiff.grad_program(c.loss, [c.tensors["T_softmax_exp"]])


def test_bad_feed_head_and_tape() -> None:
    c, prog = program("dense_ce", "auto")
    X, W, B = (c.tensors[n] for n in ("X", "W", "B"))
    feed = dict(c.feed)
    del feed[B]
    with pytest.raises(ValueError, match="no data for placeholder\\(s\\) B"):
        prog.forward(feed)
    with pytest.raises(ValueError, match="placeholder 'W' has shape \\(6, 5\\)"):
        prog.forward({**c.feed, W: c.feed[W].T.copy()})
    with pytest.raises(TypeError, match="placeholder 'X' has dtype float64"):
        prog.forward({**c.feed, X: c.feed[X].astype(np.float64)})
    stranger = tex.placeholder((2,), name="stranger")
    with pytest.raises(ValueError, match="'stranger' is not an input"):
        prog.forward({**c.feed, stranger: np.zeros(2, np.float32)})
    by_name = {t.name: v for t, v in c.feed.items()}  # names work too
    out, tape = prog.forward(by_name)
    with pytest.raises(ValueError, match="head has shape \\(1,\\), expected"):
        prog.backward(tape, head=np.ones(1, np.float32))
    missing = dict(tape)
    del missing["T_dense"]
    with pytest.raises(ValueError, match="no entry 'T_dense'"):
        prog.backward(missing)
    with pytest.raises(ValueError, match="unexpected tape entry 'bogus'"):
        prog.backward({**tape, "bogus": np.zeros(1)})
    with pytest.raises(ValueError, match="tape entry 'T_dense' has shape"):
        prog.backward({**tape, "T_dense": np.zeros((5, 4), np.float32)})
    np.testing.assert_allclose(prog.backward(tape, head=1.0)[0], prog.backward(tape)[0])


def test_feed_by_tensor_and_name() -> None:
    """One rule with evaluate (tex.ir.feed): the same array under both keys is one feed."""
    c, prog = program("dense_ce", "auto")
    X = c.tensors["X"]
    out, _ = prog.forward({**c.feed, "X": c.feed[X]})
    np.testing.assert_array_equal(out, prog.forward(c.feed)[0])
    with pytest.raises(ValueError, match="'X' is fed twice, by tensor and by name, with "
                                         "different arrays"):
        prog.forward({**c.feed, "X": c.feed[X].copy()})
    with pytest.raises(ValueError, match="feed key 'nothing' names no placeholder of the "
                                         "loss"):
        prog.forward({**c.feed, "nothing": c.feed[X]})
