"""Property-based fuzzing of the whole pipeline on random programs (``fuzz_programs.py``).

Every generated program is checked for:

(a) the LLVM build, under the auto-schedule and under a random legal schedule, equals the
    reference interpreter ``tex.testing.evaluate``;
(b) ``differentiate`` agrees with central finite differences (float64);
(c) reverse and forward mode agree: ``<v, J u>`` from ``differentiate`` with head ``v``
    and from ``jvp`` with tangents ``u``;
(d) a second differentiation agrees with finite differences of the first;
(e) for programs whose indices are affine, the gradient's ``iteration_count`` is at most
    2 x the forward's times the number of inputs (plus one write per input element).

The examples are derandomized (a fixed seed) and bounded for CI: ``TEX_FUZZ_EXAMPLES=N``
(default 150) runs N programs per property. Every failure found is kept below as an
``@example``-style regression test (``test_regression_*``).
"""
from __future__ import annotations

import os
from typing import Any

import numpy as np
import pytest
from hypothesis import HealthCheck, event, given, note, settings
from hypothesis import strategies as st

import tex
from tex.autodiff import iteration_count, jvp
from tex.ir.tensor import ComputeOp
from tex.schedule import auto_schedule
from tex.testing import OutOfBoundsError, check_grad, evaluate

from fuzz_programs import Program, feed, gather_programs, programs, shifted_programs

EXAMPLES = int(os.environ.get("TEX_FUZZ_EXAMPLES", "150"))

FUZZ = settings(max_examples=EXAMPLES, derandomize=True, database=None, deadline=None,
                suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large,
                                       HealthCheck.filter_too_much])

TOL = {"float64": (1e-9, 1e-9), "float32": (2e-5, 2e-5)}


def assert_matches(got: np.ndarray, want: np.ndarray, dtype: str) -> None:
    rtol, atol = TOL[dtype]
    scale = max(1.0, float(np.max(np.abs(want), initial=0.0)))
    np.testing.assert_allclose(got, want, rtol=rtol, atol=atol * scale)


def run_built(s: Any, prog: Program, data: dict[tex.Tensor, np.ndarray]) -> np.ndarray:
    f = tex.build(s, [*prog.inputs, prog.out], name="fuzz")
    result = np.full(prog.out.shape, np.nan, prog.dtype)
    f(*(data[p] for p in prog.inputs), result)
    return result


# -- random schedules ------------------------------------------------------------------------
def _leaf(data: st.DataObject, stage: Any) -> Any:
    return data.draw(st.sampled_from(stage.leaf_iter_vars))


def _split(data: st.DataObject, s: Any, stage: Any) -> str:
    iv = _leaf(data, stage)
    factor = data.draw(st.integers(1, 6))
    stage.split(iv, factor=factor)
    return f"split({iv.name}, {factor})"


def _reorder(data: st.DataObject, s: Any, stage: Any) -> str:
    order = data.draw(st.permutations(stage.leaf_iter_vars))
    stage.reorder(*order)
    return f"reorder({', '.join(v.name for v in order)})"


def _fuse(data: st.DataObject, s: Any, stage: Any) -> str:
    leaves = stage.leaf_iter_vars
    pos = data.draw(st.integers(0, max(0, len(leaves) - 2)))
    pair = leaves[pos:pos + 2]
    stage.fuse(*pair)
    return f"fuse({', '.join(v.name for v in pair)})"


def _annotate(kind: str) -> Any:
    def apply(data: st.DataObject, s: Any, stage: Any) -> str:
        iv = _leaf(data, stage)
        getattr(stage, kind)(iv)
        return f"{kind}({iv.name})"
    return apply


def _inline(data: st.DataObject, s: Any, stage: Any) -> str:
    stage.compute_inline()
    return "compute_inline()"


def _compute_at(data: st.DataObject, s: Any, stage: Any) -> str:
    parent = data.draw(st.sampled_from(_stages(s)))
    if not parent.leaf_iter_vars:
        return "compute_at: no loops"
    iv = _leaf(data, parent)
    stage.compute_at(parent, iv)
    return f"compute_at({parent.name}, {iv.name})"


def _rfactor(data: st.DataObject, s: Any, stage: Any) -> str:
    iv = _leaf(data, stage)
    s.rfactor(stage.op.output(0), iv)
    return f"rfactor({iv.name})"


def _cache_write(data: st.DataObject, s: Any, stage: Any) -> str:
    s.cache_write(stage.op.output(0), "local")
    return "cache_write(local)"


PRIMITIVES = {
    "split": _split, "reorder": _reorder, "fuse": _fuse, "parallel": _annotate("parallel"),
    "vectorize": _annotate("vectorize"), "unroll": _annotate("unroll"),
    "compute_inline": _inline, "compute_at": _compute_at, "rfactor": _rfactor,
    "cache_write": _cache_write,
}


def _stages(s: Any) -> list[Any]:
    return [stage for stage in s.stages if isinstance(stage.op, ComputeOp)]


def random_schedule(data: st.DataObject, out: tex.Tensor) -> Any:
    """A schedule of ``out`` after 0-8 random primitives; a primitive the schedule refuses
    (``ValueError``/``TypeError``: an illegal choice, such as inlining a reduction) is
    dropped, and the refusal must leave the schedule as it was."""
    s = tex.create_schedule(out.op)
    for _ in range(data.draw(st.integers(0, 8))):
        stage = data.draw(st.sampled_from(_stages(s)))
        name = data.draw(st.sampled_from(sorted(PRIMITIVES)))
        if not stage.leaf_iter_vars and name not in ("compute_inline", "compute_at",
                                                      "cache_write"):
            continue
        before = _state(s)
        try:
            note(f"s[{stage.name}].{PRIMITIVES[name](data, s, stage)}")
        except (ValueError, TypeError) as e:
            assert _state(s) == before, f"refused {name} changed the schedule: {e}"
    return s


def _state(s: Any) -> list[Any]:
    return [(st.name, list(st.leaf_iter_vars), dict(st.annotations), st.attach_type,
             st.attach_stage, st.attach_ivar) for st in s.stages]


# -- properties ------------------------------------------------------------------------------
@FUZZ
@given(programs(dtypes=("float64", "float32")), st.data())
def test_build_matches_interpreter(prog: Program, data: st.DataObject) -> None:
    """(a) the compiled program equals the interpreter, auto-scheduled and randomly
    scheduled."""
    values = feed(prog)
    want = evaluate(prog.out, values)
    assert_matches(run_built(auto_schedule(prog.out), prog, values), want, prog.dtype)
    s = random_schedule(data, prog.out)
    try:
        got = run_built(s, prog, values)
    except ValueError as e:
        # a combination each primitive accepted but lowering refuses, with a message that
        # names the stages (compute_at of a tensor that another stage reads outside the
        # loop); an InternalError is never accepted
        assert any(f"'{st.name}'" in str(e) for st in _stages(s)), e
        event("schedule refused by lower")
        return
    assert_matches(got, want, prog.dtype)


@settings(FUZZ, max_examples=max(10, EXAMPLES // 5))  # two builds per example
@given(gather_programs(dtypes=("float64", "float32")), st.data())
def test_data_dependent_reads_match_interpreter(prog: Program, data: st.DataObject) -> None:
    """Reads through index data, in range or not (int32 and int64, one value at the ends,
    far out, or at the dtype's limits): the compiled program (auto-scheduled and randomly
    scheduled) raises ``OutOfBoundsError`` exactly when the interpreter does, and computes
    the same otherwise."""
    bad = data.draw(st.sampled_from([None, -1, 7, -(2**31), 2**31 - 1, 2**40]))
    values = feed(prog, bad=bad)
    try:
        want = evaluate(prog.out, values)
    except OutOfBoundsError:
        want = None
    event("out of bounds" if want is None else "in bounds")
    for s in (auto_schedule(prog.out), random_schedule(data, prog.out)):
        try:
            got = run_built(s, prog, values)
        except OutOfBoundsError as e:
            assert want is None, f"built raised, evaluate did not: {e}"
            continue
        except ValueError as e:  # a schedule lowering refuses (as in the test above)
            assert any(f"'{st.name}'" in str(e) for st in _stages(s)), e
            continue
        assert want is not None, "evaluate raised OutOfBoundsError, the built function not"
        assert_matches(got, want, prog.dtype)


@settings(FUZZ, max_examples=max(10, EXAMPLES // 5))
@given(shifted_programs(dtypes=("float64",)))
def test_static_reads_out_of_range_are_refused_like_evaluate(prog: Program) -> None:
    """Reads with indices fixed by the program: the build refuses (``ValueError`` naming
    the read) exactly the programs on which the interpreter raises ``OutOfBoundsError``,
    and computes the same on the others (no run-time check fires)."""
    values = feed(prog)
    try:
        want = evaluate(prog.out, values)
    except OutOfBoundsError:
        want = None
    event("out of bounds" if want is None else "in bounds")
    if want is None:
        with pytest.raises(ValueError, match=r"reads '\w+' out of bounds") as info:
            run_built(auto_schedule(prog.out), prog, values)
        assert not isinstance(info.value, OutOfBoundsError), info.value
        return
    assert_matches(run_built(auto_schedule(prog.out), prog, values), want, prog.dtype)


@FUZZ
@given(programs())
def test_gradient_matches_finite_differences(prog: Program) -> None:
    """(b) reverse mode against central differences."""
    inputs = prog.used_inputs()
    if inputs:
        check_grad(prog.out, inputs, data=feed(prog), rtol=1e-5, atol=1e-7)


@FUZZ
@given(programs())
def test_forward_and_reverse_mode_agree(prog: Program) -> None:
    """(c) <v, J u> computed by differentiate (head v) and by jvp (tangents u)."""
    inputs = prog.used_inputs()
    if not inputs:
        return
    rng = np.random.default_rng(1)
    values = feed(prog)
    head = tex.placeholder(prog.out.shape, prog.dtype, name="head")
    tangents = [tex.placeholder(p.shape, prog.dtype, name=f"d{p.name}") for p in inputs]
    values[head] = rng.standard_normal(head.shape)
    values.update({t: rng.standard_normal(t.shape) for t in tangents})
    grads = evaluate(list(tex.differentiate(prog.out, inputs, head)), values)
    reverse = sum(float(np.sum(g * values[t])) for g, t in zip(grads, tangents))
    forward = float(np.sum(evaluate(jvp(prog.out, inputs, tangents), values) * values[head]))
    assert forward == pytest.approx(reverse, rel=1e-9, abs=1e-9)


@FUZZ
@given(programs(max_steps=4))
def test_second_derivative_matches_finite_differences(prog: Program) -> None:
    """(d) the gradient of the gradient against central differences of the gradient."""
    inputs = prog.used_inputs()
    if not inputs:
        return
    head = tex.placeholder(prog.out.shape, prog.dtype, name="head")
    values = feed(prog)
    values[head] = np.random.default_rng(2).standard_normal(head.shape)
    grad = tex.differentiate(prog.out, inputs[:1], head)[0]
    check_grad(grad, inputs, data=values, rtol=1e-5, atol=1e-7)


@FUZZ
@given(programs())
def test_gradient_cost_is_bounded(prog: Program) -> None:
    """(e) affine programs: gradient iterations <= 2 x forward iterations x inputs, plus
    one write per input element: a gradient fills its input's whole shape, zeros included,
    however little the forward reads (``C[] = P[0]`` costs 1, its gradient 3 for a
    3-vector ``P``).

    A max/min reduction's gradient is a one-pass argmax (the forward's cost) and the
    gradient pass, so it is held to the same factor."""
    inputs = prog.used_inputs()
    if not inputs or not prog.affine:
        return
    head = tex.placeholder(prog.out.shape, prog.dtype, name="head")
    forward = iteration_count(prog.out)
    writes = sum(int(np.prod(p.shape)) for p in inputs)
    grads = list(tex.differentiate(prog.out, inputs, head))
    assert iteration_count(*grads) <= 2 * forward * len(inputs) + writes


# -- regressions: failures the fuzzer found, kept as plain tests ------------------------------
def _jvp_value(out: tex.Tensor, x: tex.Tensor, xv: np.ndarray, dv: np.ndarray) -> np.ndarray:
    dx = tex.placeholder(x.shape, x.dtype, name="dx")
    return evaluate(jvp(out, [x], [dx]), {x: xv, dx: dv})


def test_regression_jvp_of_a_tuple_reduction_keeps_its_tangent_slot() -> None:
    """The tangent of ``max`` is slot 1 of a (value, tangent) reduction; tidying the jvp
    rebuilt only body 0, so the jvp returned the value (0.3) instead of the tangent (2)."""
    x = tex.placeholder((1, 1), "float64", name="x")
    red = tex.topi.max(tex.topi.transpose(x, (1, 0)), axis=(0,))
    got = _jvp_value(red, x, np.array([[0.3]]), np.array([[2.0]]))
    np.testing.assert_array_equal(got, [2.0])


def test_regression_max_gradient_guards_reads_at_argsel_indices() -> None:
    """The gradient of a max over a max reads ``C_argsel`` at an index computed from
    ``R_argsel``; its range conditions read too, so nothing guarded the read, and it fell
    outside ``C_argsel`` (the compiled code loaded out of bounds, ``evaluate`` raised)."""
    p = tex.placeholder((), "float64", name="p")
    k = tex.reduce_axis((0, 1), name="k")
    c = tex.compute((2, 2, 2), lambda a, b, d: tex.max(p[()], axis=k), name="c")
    r = tex.topi.max(c, axis=(0, 1, 2))
    head = tex.placeholder((), "float64", name="head")
    grad = tex.differentiate(r, [p], head)[0]
    values = {p: np.array(0.5), head: np.array(2.0)}
    assert evaluate(grad, values) == 2.0
    f = tex.build([grad])
    out = np.zeros(())
    f(values[p], values[head], out)  # placeholders in creation order, then the output
    assert out == 2.0
    check_grad(r, [p], data={p: values[p]})


def test_regression_min_against_padding_sends_the_gradient_to_the_other_operand() -> None:
    """``min(pad(T)[i], q)``: at the padded points the value is 0 and wins when q > 0...
    the gradient of q lost those points when the solved condition was wrapped in a guard
    that made it false wherever the (already select-guarded) read of T fell out of range."""
    p = tex.placeholder((1,), "float64", name="p")
    q = tex.placeholder((), "float64", name="q")
    t = tex.compute((1,), lambda a: p[0] * 2.0, name="t")
    padded = tex.compute((3,), lambda a: tex.if_then_else(tex.all(a >= 0, a < 1), t[a], 0.0),
                         name="padded")
    out = tex.topi.minimum(padded, q)
    head = tex.placeholder((3,), "float64", name="head")
    values = {p: np.array([0.5]), q: np.array(-1.0), head: np.array([1.0, 2.0, 4.0])}
    dq = evaluate(tex.differentiate(out, [q], head)[0], values)
    assert dq == 7.0  # q = -1 is below every element: all of head goes to q
    check_grad(out, [p, q], data={p: values[p], q: values[q]})


@pytest.mark.parametrize("shape, want", [((4, 1), 5), ((2, 2), 9), ((1, 4), 9), ((5, 7), 35)])
def test_regression_broadcast_read_gradient_is_reduced_once(shape: tuple[int, int],
                                                            want: int) -> None:
    """``C[a, b] = P[a, 0]**2`` over a (5, 1) ``P``: the gradient summed ``head`` over
    ``b`` for every one of P's 5 rows, needed or not (15 iterations for (2, 2)); it is now
    reduced over the rows the output covers and selected into the gradient."""
    p = tex.placeholder((5, 1), "float64", name="p")
    c = tex.compute(shape, lambda a, b: p[a, 0] * p[a, 0], name="c")
    head = tex.placeholder(shape, "float64", name="head")
    grad = tex.differentiate(c, [p], head)[0]
    assert iteration_count(grad) == want
    check_grad(c, [p])


def test_regression_gradient_parts_have_their_own_names() -> None:
    """Two sums into one gradient: the first part and the whole were both named
    ``X_grad_Y``, so the program printed ``X_grad_Y[p] = X_grad_Y[p] + X_grad_Y_2[p]``."""
    x = tex.placeholder((8,), "float64", name="X")
    k = tex.reduce_axis((0, 3), name="k")
    y = tex.compute((6,), lambda i: tex.sum(x[i + k] * x[7 - i - k], axis=k), name="Y")
    grad = tex.differentiate(y, [x], tex.placeholder((6,), "float64", name="h"))[0]
    names = [op.name for op in tex.graph(grad).nodes]
    assert len(names) == len(set(names))
    assert grad.name == "X_grad_Y" and {"X_grad_Y_1", "X_grad_Y_2"} <= set(names)
    check_grad(y, [x])


def test_regression_second_derivative_keeps_the_select_condition_of_a_sum() -> None:
    """The derivative of ``select(c, v, 0)`` multiplies every product-rule term by ``[c]``;
    ``c`` was not lifted out of the difference of two such terms, so the second derivative
    read ``head[2 r + s]`` where ``c`` is false, out of bounds."""
    p = tex.placeholder((2, 3), "float64", name="p")
    c = tex.compute((3,), lambda a: 0.5 / (tex.tanh(p[a // 2, a % 2]) + 2.0), name="c")
    head = tex.placeholder((3,), "float64", name="head")
    grad = tex.differentiate(c, [p], head)[0]
    rng = np.random.default_rng(3)
    check_grad(grad, [p], data={p: rng.standard_normal((2, 3)), head: rng.standard_normal(3)})


def test_regression_second_derivative_keeps_the_select_that_guards_a_comparison() -> None:
    """The gradient of ``max(min(T[0, k0 // 2, k0] + ..., 0.5))`` over a padded ``T`` guards
    its data comparison: ``c && select(c, T[0, 1, q + 2] <= ..., False)``. Simplifying
    the second derivative folded the select into ``c && T[0, 1, q + 2] <= ...``, and ``&&``
    does not guard reads, so ``T`` was read at q + 2 = 3, out of bounds."""
    p0 = tex.placeholder((2, 2, 2), "float64", name="P0")
    p1 = tex.placeholder((), "float64", name="P1")
    p2 = tex.placeholder((), "float64", name="P2")
    c0 = tex.compute((2, 6, 3), lambda a, b, c: tex.if_then_else(
        tex.all(a >= 0, a < 2, b >= 2, b < 4, c >= 0, c < 2), p0[a, b - 2, c], 0.0), name="C0")
    t = tex.compute((2, 6, 3), lambda a, b, c: (c0[a, b, c] + p1[()]) * p2[()], name="T")
    k0 = tex.reduce_axis((0, 3), name="k0")
    k1 = tex.reduce_axis((0, 2), name="k1")
    c3 = tex.compute((), lambda: tex.max(tex.min(t[0, k0 // 2, k0] + t[k1 // 2, k0, 0], 0.5),
                                         axis=[k0, k1]), name="C3")
    head = tex.placeholder((), "float64", name="head")
    grad = tex.differentiate(c3, [p0], head)[0]
    rng = np.random.default_rng(0)
    data = {p0: rng.uniform(-1, 1, (2, 2, 2)), p1: np.array(0.3), p2: np.array(0.7),
            head: np.array(1.3)}
    check_grad(grad, [p0, p1, p2], data=data)
    second = tex.differentiate(grad, [p2], tex.placeholder((2, 2, 2), "float64", name="h2"))
    assert "select(" in tex.ir.printer.format_program(second[0]).split("P2_grad_P0_grad_T[] =")[1]


def test_regression_second_derivative_guards_reads_of_each_term_of_a_sum() -> None:
    """Reverse mode sends ``select(c, 1, 0) * head[0, l] * ...`` through each term of a
    sum of selects; the terms' conditions differ, so none was lifted, and the second
    derivative's sum read ``head[0, l]`` at l = 2, where ``c`` (l < 2) is false. Each term
    now keeps its own conditions as a select around its value."""
    p0 = tex.placeholder((3, 4, 3), "float64", name="P0")
    p1 = tex.placeholder((4, 1), "float64", name="P1")
    t = tex.compute((3, 4, 3), lambda i, j, m: p0[i, j, m] + p1[j, 0], name="T_add")
    k0 = tex.reduce_axis((0, 1), name="k0")
    k1 = tex.reduce_axis((0, 1), name="k1")
    c1 = tex.compute((1, 2), lambda a0, a1: tex.max(
        (t[k1 // 2, 0, a0 // 2] + 0.5) /
        (tex.tanh(p0[k1 // 2, k1 % 3, a1] + p0[a0 + a1, 0, 0]) + 2.0), axis=[k0, k1]),
        name="C1")
    head = tex.placeholder((1, 2), "float64", name="head")
    grad = tex.differentiate(c1, [p0], head)[0]
    rng = np.random.default_rng(0)
    data = {p0: rng.uniform(-1, 1, p0.shape), p1: rng.uniform(-1, 1, p1.shape),
            head: rng.uniform(-1, 1, (1, 2))}
    check_grad(grad, [p0, p1], data=data)
