"""Deep programs through every public entry point (issue 20, items 11 and 12): no walk may
recurse once per stage or per expression level, and none may expand a shared
sub-expression into a tree.

Each program family (a long element-wise chain, one deep expression: Horner, nested sin,
nested selects, a long sum of terms, a chain of shifted reads, a chain of reductions and
broadcasts through topi) goes through each entry point under a frame budget: only
``BUDGET`` Python frames above the test's own depth. The programs are deeper than the budget,
so a walk that recursed once per stage or per level fails here at sizes that run in a
fraction of a second (the absolute sizes of tests/test_scaling.py are not needed for
that). Results are checked against the interpreter or NumPy where the entry point computes
numbers. Shared sub-expressions are checked with a chain of leaky_relu (a DAG of n levels,
a tree of 2^n nodes)."""
from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass

import numpy as np
import pytest

import tex
from tex import topi
from tex.arith import prove, simplify
from tex.arith.sympy_bridge import sympy_prove, sympy_simplify
from tex.arith.sympy_float import float_is_zero
from tex.ir.printer import format_program
from tex.lower.legalize import legalize
from tex.schedule import auto_schedule

from test_scaling import _horner, _stack_budget
from timing import seconds, timed

BUDGET = 100  # frames; every program below is deeper than this
DEPTH = 200  # levels of one expression / stages of a chain


@dataclass
class Program:
    A: tex.Tensor
    out: tex.Tensor
    a: np.ndarray

    @property
    def loss(self) -> tex.Tensor:
        return topi.sum(self.out)


def _data(shape: tuple[int, ...]) -> np.ndarray:
    return np.linspace(-0.9, 0.9, int(np.prod(shape))).reshape(shape)


def chain(n: int = DEPTH) -> Program:
    """``n`` element-wise stages, each reading the previous one once."""
    A = tex.placeholder((8,), name="A", dtype="float64")
    x = A
    for i in range(n):
        x = tex.compute((8,), lambda j, x=x, i=i: x[j] * 0.999 + 0.001 * (i % 3),
                        name=f"s{i}")
    return Program(A, x, _data((8,)))


def shifted(n: int = DEPTH) -> Program:
    """``n`` stages each reading the previous one at a rotated index."""
    A = tex.placeholder((16,), name="A", dtype="float64")
    x = A
    for i in range(n):
        x = tex.compute((16,), lambda j, x=x: x[(j + 1) % 16] * 0.999, name=f"r{i}")
    return Program(A, x, _data((16,)))


def horner(n: int = DEPTH) -> Program:
    """One compute: a Horner polynomial of degree ``n``."""
    return Program(*_horner(n), _data((8,)))


def nested_sin(n: int = DEPTH) -> Program:
    A = tex.placeholder((8,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = A[j]
        for _ in range(n):
            e = tex.sin(e)
        return e

    return Program(A, tex.compute((8,), body, name="S"), _data((8,)))


def selects(n: int = DEPTH) -> Program:
    """``n`` nested if_then_else, each testing the value built so far."""
    A = tex.placeholder((8,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = A[j]
        for k in range(n):
            e = tex.if_then_else(e > 0.01 * (k % 7), e * 0.5, e + 0.25)
        return e

    return Program(A, tex.compute((8,), body, name="Q"), _data((8,)))


def terms(n: int = DEPTH) -> Program:
    """One compute summing ``n`` terms (a left-leaning sum ``n`` deep)."""
    A = tex.placeholder((8,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = A[j]
        for k in range(1, n):
            e = e + A[(j + k) % 8] * (1.0 / k)
        return e

    return Program(A, tex.compute((8,), body, name="T"), _data((8,)))


def topi_chain(n: int = DEPTH // 8) -> Program:
    """``n`` rounds of a row sum, a broadcast back and element-wise ops through topi
    (about 5 stages a round)."""
    A = tex.placeholder((4, 4), name="A", dtype="float64")
    x = A
    for _ in range(n):
        m = topi.sum(x, axis=1, keepdims=True)
        x = topi.nn.relu(x - m * 0.25) + topi.broadcast_to(m, (4, 4)) * 0.01
    return Program(A, x, _data((4, 4)))


def _leaky_chain(n: int) -> Program:
    """``n`` chained leaky_relu: each level reads the one below twice (2^n as a tree)."""
    A = tex.placeholder((16,), name="A", dtype="float64")
    x = A
    for i in range(n):
        x = topi.nn.leaky_relu(x if i % 2 == 0 else x * -1.0, 0.5)
    return Program(A, x, _data((16,)))


def leaky(n: int = DEPTH // 3) -> Program:
    """``n`` chained leaky_relu stages (every other one negated: about 1.5 n stages), each
    reading its input twice: a DAG whose tree has 2^n nodes."""
    return _leaky_chain(n)


def shared_selects(n: int = DEPTH) -> Program:
    """One compute: ``n`` nested selects, both sides of each using the value below (a DAG
    ``n`` deep whose tree has 2^n nodes)."""
    A = tex.placeholder((8,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = A[j]
        for i in range(n):
            e = tex.if_then_else(e > 0, e, e * 0.5) * (1.0 if i % 2 == 0 else -1.0)
        return e

    return Program(A, tex.compute((8,), body, name="L"), _data((8,)))


FAMILIES: dict[str, Callable[[], Program]] = {
    "chain": chain, "shifted": shifted, "horner": horner, "nested_sin": nested_sin,
    "selects": selects, "terms": terms, "topi_chain": topi_chain, "leaky": leaky,
    "shared_selects": shared_selects}


def _printing(p: Program) -> None:
    body = p.out.op.body[0]
    assert p.out.name in str(p.out) and p.out.name in repr(p.out)
    assert len(repr(body)) > 10 and str(body)
    text = format_program(p.out)
    assert len(text) > 10 * len(tex.ir.visit.topo_sort_ops([p.out]))
    assert "digraph" in tex.to_dot(p.out) and "digraph" in tex.viz.DAG(p.out).to_dot()
    g = tex.graph(p.out)
    assert g.number_of_nodes() == len(tex.ir.visit.topo_sort_ops([p.out]))


def _evaluate(p: Program) -> None:
    got = tex.testing.evaluate(p.out, {p.A: p.a})
    assert got.shape == p.out.shape and np.isfinite(got).all()


def _gradients(p: Program) -> None:
    res = tex.differentiate(p.loss, [p.A])
    (g,) = res
    rep = tex.autodiff.report(res, file=None)
    assert rep is not None
    want = tex.testing.evaluate(g, {p.A: p.a})
    # forward mode: the directional derivative along e_0 is the first gradient element
    t = tex.placeholder(p.A.shape, name="tA", dtype="float64")
    tan = tex.autodiff.jvp(p.loss, [p.A], [t])
    e0 = np.zeros(p.a.shape)
    e0.flat[0] = 1.0
    np.testing.assert_allclose(tex.testing.evaluate(tan, {p.A: p.a, t: e0}), want.flat[0],
                               rtol=1e-9, atol=1e-12)
    J = tex.autodiff.Jacobian(p.out, p.out.op.input_tensors[0])
    assert J.shape == p.out.shape + p.out.op.input_tensors[0].shape
    assert tex.autodiff.iteration_count(p.loss, g) > 0


def _second_derivative(p: Program) -> None:
    (g,) = tex.differentiate(p.loss, [p.A])
    (h,) = tex.differentiate(topi.sum(g), [p.A])
    assert np.isfinite(tex.testing.evaluate(h, {p.A: p.a})).all()


def _check_grad(p: Program) -> None:
    tex.testing.check_grad(p.loss, [p.A], {p.A: p.a}, max_points=2)


def _grad_program(p: Program) -> None:
    prog = tex.autodiff.grad_program(p.loss, [p.A])
    assert "saved" in str(prog.plan) or "recomputed" in str(prog.plan) or str(prog.plan)
    out, tape = prog.forward({p.A: p.a})
    (dA,) = prog.backward(tape)
    (g,) = tex.differentiate(p.loss, [p.A])
    # atol: a sum of symmetric data can cancel to rounding noise
    np.testing.assert_allclose(out, tex.testing.evaluate(p.loss, {p.A: p.a}), rtol=1e-9,
                               atol=1e-12)
    np.testing.assert_allclose(dA, tex.testing.evaluate(g, {p.A: p.a}), rtol=1e-9,
                               atol=1e-12)


def _arith(p: Program) -> None:
    body = p.out.op.body[0]
    simplify(body)
    assert prove(body == body) in (True, None)
    # the sympy bridges may refuse by their caps, never by recursing
    assert float_is_zero(body * 1.5 - body) is None  # too deep for sympy: not decided
    idx = p.out.op.axis[0].var
    deep = idx
    for k in range(DEPTH):
        deep = (deep + k) % 97 if k % 2 else deep * 3 - k
    dom = {idx: p.out.op.axis[0]}
    for use_sympy in (False, True):
        simplify(deep, dom, use_sympy=use_sympy)
        assert prove(deep >= 0, dom, use_sympy=use_sympy) in (True, None)
    # the sympy bridge refuses what sympy would recurse through (simplify/prove skip it)
    with pytest.raises(NotImplementedError, match="deep"):
        sympy_simplify(deep, dom)
    with pytest.raises(NotImplementedError, match="deep"):
        sympy_prove(deep >= 0, dom)


def _lower_stored(p: Program) -> None:
    s = tex.create_schedule(p.out.op)
    ax = s[p.out].op.axis[0]
    s[p.out].split(ax, factor=2)
    func = tex.lower(s, [p.A, p.out])
    assert "for (" in str(func)
    legalize(func)


def _manual_build(p: Program) -> None:
    """create_schedule, every other stage inlined, the output split and parallel."""
    s = tex.create_schedule(p.out.op)
    for i, st in enumerate(s.stages):
        if not st.is_output and i % 2 == 0 and len(st.op.body) == 1 \
                and not isinstance(st.op.body[0], tex.ir.expr.Reduce):
            st.compute_inline()
    xo, _ = s[p.out].split(p.out.op.axis[0], factor=2)
    s[p.out].parallel(xo)
    f = tex.build(s, [p.A, p.out])
    assert "define" in f.get_source("ll")
    got = np.zeros(p.out.shape)
    f(p.a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-9)


def _auto_build(p: Program) -> None:
    s = auto_schedule(p.out)
    f = tex.build(s, [p.A, p.out])
    got = np.zeros(p.out.shape)
    f(p.a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-9)


def _cuda(p: Program) -> None:
    """auto_gpu scheduling, the GPU lowering, PTX text and the lockstep simulator."""
    f = tex.build([p.out], target="cuda")
    assert ".entry" in f.get_source("ptx")
    got = np.zeros(p.out.shape)
    f.simulate(p.a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-9)


def _attach_chain(p: Program) -> tex.schedule.Schedule:
    """Each stage computed at the first loop of the stage reading it (a chain: stage k+1
    reads stage k): the loop nest is as deep as the chain is long."""
    s = tex.create_schedule(p.out.op)
    for prod, cons in zip(s.stages, s.stages[1:]):
        prod.compute_at(cons, cons.op.axis[0])
    return s


def _compute_at(p: Program) -> None:
    s = _attach_chain(p)
    f = tex.build(s, [p.A, p.out])
    assert str(tex.lower(s, [p.A, p.out])).count("for (") == 1  # one loop, stages inside
    got = np.zeros(p.out.shape)
    f(p.a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-9)


def _compute_at_cuda(p: Program) -> None:
    """The same chain inside a GPU thread: the kernel split, its thread binding and
    barrier passes, PTX and the simulator on a nest as deep as the chain."""
    s = _attach_chain(p)
    out = s[p.out]
    bx, tx = out.split(p.out.op.axis[0], factor=4)
    out.bind(bx, tex.thread_axis("blockIdx.x"))
    out.bind(tx, tex.thread_axis("threadIdx.x"))
    s.stages[-2].compute_at(out, tx)
    f = tex.build(s, [p.A, p.out], target="cuda")
    assert ".entry" in f.get_source("ptx")
    got = np.zeros(p.out.shape)
    f.simulate(p.a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-9)


ENTRY_POINTS: dict[str, Callable[[Program], None]] = {
    "printing": _printing, "evaluate": _evaluate, "gradients": _gradients,
    "second_derivative": _second_derivative, "check_grad": _check_grad,
    "grad_program": _grad_program, "arith": _arith, "lower_stored": _lower_stored,
    "manual_build": _manual_build, "auto_build": _auto_build, "cuda": _cuda,
    "compute_at": _compute_at, "compute_at_cuda": _compute_at_cuda}

# the expensive entry points on the families where they meet something new; the rest on all
_SKIP = {
    "second_derivative": {"terms", "shifted", "topi_chain", "chain", "nested_sin"},
    "check_grad": {"terms", "shifted", "topi_chain", "chain", "leaky", "horner"},
    "grad_program": {"terms", "shifted", "nested_sin", "horner", "chain", "shared_selects",
                     "topi_chain"},
    "arith": {"chain", "shifted", "topi_chain", "leaky"},
    # a chain of stages each reading the one before at the same point (a shifted read
    # would make every stage compute the whole tensor per point of the next: 16^n)
    "compute_at": set(FAMILIES) - {"chain"},
    "compute_at_cuda": set(FAMILIES) - {"chain"},
}


@pytest.mark.parametrize("entry", list(ENTRY_POINTS))
@pytest.mark.parametrize("family", list(FAMILIES))
def test_deep_program(family: str, entry: str) -> None:
    if family in _SKIP.get(entry, ()):
        return  # covered on the other families (keeps the file within its time budget)
    p = FAMILIES[family]()
    with _stack_budget(BUDGET):
        ENTRY_POINTS[entry](p)


def test_torch_bridge_on_a_deep_chain() -> None:
    torch = pytest.importorskip("torch", reason="torch is not installed")
    p = chain()
    fn = tex.contrib.torch.function(p.out, p.A)
    x = torch.tensor(p.a, requires_grad=True)
    with _stack_budget(BUDGET):
        y = fn(x)
        y.sum().backward()
    np.testing.assert_allclose(y.detach().numpy(), tex.testing.evaluate(p.out, {p.A: p.a}),
                               rtol=1e-9)
    (g,) = tex.differentiate(p.loss, [p.A])
    np.testing.assert_allclose(x.grad.numpy(), tex.testing.evaluate(g, {p.A: p.a}), rtol=1e-9)


def test_gpu_simulator_keeps_shared_selects_shared() -> None:
    """The simulator evaluated a select's sides recursively, each side re-evaluating the
    value both share: 14 chained leaky_relu took 47 s (2^n). Now each node is evaluated
    once per thread: 40 levels in milliseconds."""
    p = _leaky_chain(40)
    f = tex.build([p.out], target="cuda")
    got = np.zeros(16)
    t0 = time.perf_counter()
    f.simulate(p.a, got)
    assert time.perf_counter() - t0 < 5.0
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-12)


# -- growth: doubling the program must not more than ~3x the time (linear with margin) ----

def _best_of(fn: Callable[[], float], repeat: int = 3) -> float:
    """The fastest of ``repeat`` runs (each timed with ``timing.seconds``)."""
    return min(fn() for _ in range(repeat))


def _inline_all(n: int) -> float:
    A = tex.placeholder((4,), name="A")
    x = A
    for i in range(n):
        x = tex.compute((4,), lambda j, x=x: x[j] * 0.5, name=f"s{i}")
    s = tex.create_schedule(x.op)
    def inline() -> None:
        for st in s.stages[:-1]:
            st.compute_inline()
    return seconds(inline)


def test_compute_inline_of_every_stage_is_linear() -> None:
    """compute_inline scanned every stage for stages attached to it (quadratic: 4,000
    stages 0.32 s, 2,000 0.08 s); the schedule now indexes attached stages per parent."""
    t1, t2 = _best_of(lambda: _inline_all(2000), 2), _best_of(lambda: _inline_all(4000), 2)
    assert t2 < 3.0 * t1 + 0.01, (t1, t2)


def _jvp_time(n: int) -> float:
    p = chain(n)
    t = tex.placeholder(p.A.shape, name="tA", dtype="float64")
    tan, elapsed = timed(tex.autodiff.jvp, p.out, [p.A], [t])
    np.testing.assert_allclose(tex.testing.evaluate(tan, {p.A: p.a, t: np.ones(8)}),
                               np.full(8, 0.999 ** n), rtol=1e-9)
    return elapsed


def test_jvp_of_a_chain_is_linear() -> None:
    """tidy rebuilt every inlined tangent tensor with its whole expanded upstream body
    (quadratic: a 600-stage chain took 3.5 s, 300 took 0.84 s; now 0.07 s)."""
    t1, t2 = _best_of(lambda: _jvp_time(200), 2), _best_of(lambda: _jvp_time(400), 2)
    assert t2 < 3.0 * t1 + 0.02, (t1, t2)


def test_delta_system_of_a_repeated_stage_is_solved_once(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Differentiating a chain of shifted reads solved the same system (up to the names of
    fresh axes) once per stage: ~3 ms a stage. solve_domain memoizes it."""
    import tex.arith.solve as solve
    calls = []
    real = solve._solve_domain

    def counted(*args):  # type: ignore[no-untyped-def]
        calls.append(1)
        return real(*args)

    monkeypatch.setattr(solve, "_solve_domain", counted)
    monkeypatch.setattr(solve, "_SOLVED", type(solve._SOLVED)())
    p = shifted(60)
    (g,) = tex.differentiate(p.loss, [p.A])
    assert len(calls) <= 3, len(calls)
    np.testing.assert_allclose(tex.testing.evaluate(g, {p.A: p.a}), np.full(16, 0.999 ** 60),
                               rtol=1e-9)


def test_gpu_kernel_holding_a_chain_of_local_stages() -> None:
    """200 stages computed at the output's thread loop in local memory: one kernel with
    200 nested local allocations. The GPU lowering's statement walks (thread binding,
    shared-memory hoisting, barriers) recursed once per allocation."""
    n = 200
    A = tex.placeholder((64,), name="A", dtype="float64")
    x, stages = A, []
    for i in range(n):
        x = tex.compute((64,), lambda j, x=x: x[j] * 0.999 + 0.5 * (x[j] > 0.1), name=f"s{i}")
        stages.append(x)
    s = tex.create_schedule(x.op)
    bx, tx = s[x].split(x.op.axis[0], factor=32)
    s[x].bind(bx, tex.thread_axis("blockIdx.x"))
    s[x].bind(tx, tex.thread_axis("threadIdx.x"))
    for t in reversed(stages[:-1]):
        s[t].set_scope("local")
        s[t].compute_at(s[x], tx)
    a = _data((64,))
    with _stack_budget(BUDGET):
        f = tex.build(s, [A, x], target="cuda")
        assert f.get_source("ptx").count(".entry") == 1
        got = np.zeros(64)
        f.simulate(a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(x, {A: a}), rtol=1e-12)


def _auto_schedule_time(rounds: int) -> float:
    p = topi_chain(rounds)
    s, elapsed = timed(auto_schedule, p.out)
    f = tex.build(s, [p.A, p.out])
    got = np.zeros(p.out.shape)
    f(p.a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(p.out, {p.A: p.a}), rtol=1e-9)
    return elapsed


def test_auto_schedule_of_a_chain_of_reductions_is_linear() -> None:
    """Each rfactor replaced a reduction's operation and rebuilt every stage below it at
    once (80 rounds of topi.sum: 6.5 s, 40: 1.6 s); inside auto_schedule the stages below
    are rebuilt at their next use, each once (80 rounds: 0.4 s)."""
    t1 = _best_of(lambda: _auto_schedule_time(20), 2)
    t2 = _best_of(lambda: _auto_schedule_time(40), 2)
    assert t2 < 3.0 * t1 + 0.05, (t1, t2)
