"""Programs that grow (issue 20, items 10-13): long chains of stages, deep expressions and
deeply inlined DAGs go through auto_schedule, lowering, printing, codegen, the interpreter
and differentiation without RecursionError, with cost linear in the program (counted
where a counter exists, timed with generous margins otherwise). Timing curves live in
benchmarks/scaling.py."""
from __future__ import annotations

import contextlib
import inspect
import math
import re
import sys

import numpy as np
import pytest

import tex
from tex import topi
from tex.codegen.llvm import emit_llvm
from tex.ir.visit import post_order
from tex.lower.legalize import legalize
from tex.schedule import auto_schedule

from timing import seconds, timed


def _chain(n: int, size: int = 16) -> tuple[tex.Tensor, tex.Tensor]:
    """``n`` element-wise stages, each reading the previous one once."""
    A = tex.placeholder((size,), name="A")
    x = A
    for i in range(n):
        x = tex.compute((size,), lambda j, x=x, i=i: x[j] * 0.999 + 0.001 * (i % 3),
                        name=f"s{i}")
    return A, x


def _leaky_chain(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    """``n`` chained leaky_relu: each stage reads its input twice (a DAG, 2^n as a tree)."""
    A = tex.placeholder((16,), name="A")
    x = A
    for i in range(n):
        x = topi.nn.leaky_relu(x if i % 2 == 0 else x * -1.0, 0.5)
    return A, x


def test_auto_schedule_is_linear_in_chain_length():
    """The inliner re-expanded the whole upstream chain for every candidate stage (cubic:
    100 stages took 4 s, 200 took 35 s). A reduction at the end makes the scheduler read
    the fully inlined body too. Doubling the length must not more than ~3.5x the time."""
    times = {}
    for n in (60, 120, 240):
        _, out = _chain(n)
        loss = topi.sum(out)
        s, times[n] = timed(auto_schedule, loss)
        assert sum(st.attach_type == "inline" for st in s.stages) == n  # the whole chain
    assert times[120] < 3.5 * times[60] + 0.05 and times[240] < 3.5 * times[120] + 0.05, times


def test_long_chain_end_to_end():
    """1,500 element-wise stages: auto_schedule, lower, print, build, evaluate and
    differentiate (RecursionError in the inliner, lowering and the LLVM emitter before)."""
    n = 1500
    A, out = _chain(n)
    s = auto_schedule(out)
    text = str(tex.lower(s, [A, out]))
    assert text.count("\n") < 20  # one inlined loop nest
    f = tex.build(s, [A, out])
    a = np.random.default_rng(0).random(16).astype("float32")
    got = np.zeros(16, "float32")
    f(a, got)
    want = a.astype(np.float64)
    for i in range(n):
        want = want * 0.999 + 0.001 * (i % 3)
    np.testing.assert_allclose(got, want, rtol=1e-4)
    np.testing.assert_allclose(tex.testing.evaluate(out, {A: a}), want, rtol=1e-4)
    loss = topi.sum(out)
    (grad,) = tex.differentiate(loss, [A])
    np.testing.assert_allclose(tex.testing.evaluate(grad, {A: a}),
                               np.full(16, 0.999 ** n), rtol=1e-3)
    # the whole chain inlined into a reduction: the scheduler reads its expanded body
    f = tex.build(auto_schedule([loss, grad]), [A, loss, grad])
    got_loss, got_grad = np.zeros((), "float32"), np.zeros(16, "float32")
    f(a, got_loss, got_grad)
    np.testing.assert_allclose(got_loss, want.sum(), rtol=1e-4)
    np.testing.assert_allclose(got_grad, np.full(16, 0.999 ** n), rtol=1e-3)


def test_long_chain_of_stored_stages_lowers_and_prints():
    """Without inlining every stage is a temporary: one nested Allocate per stage. The
    lowering passes, map_exprs and the printer walk that chain without recursing."""
    n = 1500
    A, out = _chain(n, size=4)
    func = tex.lower(tex.create_schedule(out.op), [A, out])
    text = str(func)
    assert text.count("allocate ") == n - 1
    assert text.count("for (") == n


@contextlib.contextmanager
def _stack_budget(frames: int):  # type: ignore[no-untyped-def]
    """Allow only ``frames`` more Python frames than the caller's depth: a walk that
    recursed once per stage fails on a program that builds quickly."""
    depth = len(inspect.stack(0))
    old = sys.getrecursionlimit()
    sys.setrecursionlimit(depth + frames)
    try:
        yield
    finally:
        sys.setrecursionlimit(old)


def test_long_chain_of_stored_stages_builds():
    """The LLVM emitter enters and leaves the chain of allocations in a loop (it recursed
    twice per allocation): 150 stages under a budget of 250 frames."""
    n = 150
    A, out = _chain(n, size=4)
    s = tex.create_schedule(out.op)
    func = tex.lower(s, [A, out])
    with _stack_budget(250):
        f = tex.build(s, [A, out])
        text = str(func)
    assert text.count("allocate ") == n - 1
    a = np.arange(4, dtype="float32")
    got = np.zeros(4, "float32")
    f(a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(out, {A: a}), rtol=1e-5)


def _horner(degree: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((8,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = tex.const(1.0, "float64")
        for k in range(degree):
            e = e * A[j] + 1.0 / (k + 2)
        return e

    return A, tex.compute((8,), body, name="P")


def test_horner_polynomial_of_degree_1000_differentiated_and_built():
    """One compute holding a 1,000-deep expression (RecursionError in vjp._lift)."""
    A, P = _horner(1000)
    L = topi.sum(P)
    (g,) = tex.differentiate(L, [A])
    s = auto_schedule([L, g])
    f = tex.build(s, [A, L, g])
    a = np.linspace(-0.9, 0.9, 8)
    lo, go = np.zeros((), "float64"), np.zeros(8, "float64")
    f(a, lo, go)
    coeffs = [1.0] + [1.0 / (k + 2) for k in range(1000)]  # highest power first
    np.testing.assert_allclose(lo, np.polyval(coeffs, a).sum(), rtol=1e-9)
    np.testing.assert_allclose(go, np.polyval(np.polyder(coeffs), a), rtol=1e-9)
    ref_l, ref_g = tex.testing.evaluate([L, g], {A: a})
    np.testing.assert_allclose(ref_g, go, rtol=1e-9)
    np.testing.assert_allclose(ref_l, lo, rtol=1e-9)
    assert "P" in str(P)


def _nested_sin(depth: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((8,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = A[j]
        for _ in range(depth):
            e = tex.sin(e)
        return e

    return A, tex.compute((8,), body, name="S")


@pytest.mark.parametrize("depth, build", [(1000, False), (300, True)])
def test_nested_sin(depth: int, build: bool):
    """1,000 nested sin: differentiated, scheduled, lowered, printed and evaluated
    (RecursionError in vjp._lift). Built at 300 only: LLVM's machine-code generation of
    one long basic block grows faster than linearly (3 s at 1,000: benchmarks/scaling.py)."""
    A, S = _nested_sin(depth)
    (g,) = tex.differentiate(topi.sum(S), [A])
    a = np.linspace(-1.0, 1.0, 8)
    want, dwant = a.copy(), np.ones(8)
    for _ in range(depth):
        dwant = dwant * np.cos(want)
        want = np.sin(want)
    s = auto_schedule([S, g])
    text = str(tex.lower(s, [A, S, g]))
    assert text.count("sin(") >= depth
    np.testing.assert_allclose(tex.testing.evaluate(g, {A: a}), dwant, rtol=1e-9)
    if build:
        f = tex.build(s, [A, S, g])
        got, dgot = np.zeros(8), np.zeros(8)
        f(a, got, dgot)
        np.testing.assert_allclose(got, want, rtol=1e-9)
        np.testing.assert_allclose(dgot, dwant, rtol=1e-9)


def test_inlined_leaky_relu_chain_stays_a_dag():
    """40 chained leaky_relu inlined into one expression: a 40-level DAG, a 2^40 tree.
    Printing (and so the compile-cache key) named the shared values instead of expanding
    them (16 levels took 3 GB to build); the printed and the LLVM text grow linearly."""
    sizes, ir_sizes = {}, {}
    for n in (10, 20, 40):
        A, out = _leaky_chain(n)
        func = tex.lower(auto_schedule(out), [A, out])
        sizes[n] = len(str(func))
        ir_sizes[n] = len(emit_llvm(legalize(func, "llvm"))[0])
    assert sizes[40] < 2.5 * sizes[20] and sizes[20] < 2.5 * sizes[10] + 2000, sizes
    assert ir_sizes[40] < 2.5 * ir_sizes[20] < 6.25 * ir_sizes[10], ir_sizes
    A, out = _leaky_chain(40)
    f = tex.build(auto_schedule(out), [A, out])
    a = np.random.default_rng(1).standard_normal(16).astype("float32")
    got = np.zeros(16, "float32")
    f(a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(out, {A: a}), rtol=1e-6)


def test_printed_expression_names_shared_values():
    x = tex.placeholder((4,), name="x")[0]
    e = x
    for _ in range(30):
        e = tex.if_then_else(e > 0.0, e, e * 0.5)
    text = str(e)
    assert len(text) < 5000 and text.startswith("let %0 = ")
    small = tex.if_then_else(x > 0.0, x, x * 0.5)
    assert str(small) == "select(x[0] > 0.0, x[0], x[0] * 0.5)"  # small DAGs print as before


def _guarded_sum(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    """Nested selects whose taken side reads out of bounds elsewhere (emitted lazily) and
    whose two sides share the inner select (the index never passes the end: the largest,
    j + 16 at k = 0, is below n + 32)."""
    A = tex.placeholder((n + 32,), name="A")

    def body(j):  # type: ignore[no-untyped-def]
        e = tex.const(0.0)
        for k in range(n):
            e = tex.if_then_else(j + 16 - k >= 0, e + A[j + 16 - k] * 0.5, e)
        return e

    return A, tex.compute((16,), body, name="G")


def test_nested_lazy_selects_emit_shared_values_once():
    """The LLVM emitter evaluated the shared inner select once per side of every level
    (2^n code: 50 levels ran out of memory); now once, before the branches."""
    ir_sizes = {}
    for n in (6, 12):
        A, G = _guarded_sum(n)
        ir_sizes[n] = len(emit_llvm(legalize(tex.lower(tex.create_schedule(G.op), [A, G]),
                                             "llvm"))[0])
    assert ir_sizes[12] < 2.5 * ir_sizes[6], ir_sizes
    A, G = _guarded_sum(400)
    f = tex.build(tex.create_schedule(G.op), [A, G])
    a = np.random.default_rng(2).random(432).astype("float32")
    got = np.zeros(16, "float32")
    f(a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(G, {A: a}), rtol=1e-5)


def _nested_selects(levels: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((6,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        x = A[j]
        e = x
        for _ in range(levels):
            e = tex.if_then_else(e > 0.5, e * e, e * x + 0.1)
        return e

    return A, tex.compute((6,), body, name="N")


def test_gradient_of_nested_selects_is_linear_in_depth():
    """Both sides of each select use the inner value: _lift walked the DAG as a tree
    (ten levels took 17 s). Correct at 10 and 20 levels, cost linear in the depth."""
    times = {}
    for levels in (5, 10, 20):
        A, N = _nested_selects(levels)
        times[levels] = seconds(tex.differentiate, topi.sum(N), [A])
    assert times[10] < 3.5 * times[5] + 0.3 and times[20] < 3.5 * times[10] + 0.3, times
    a = np.array([0.1, 0.3, 0.45, 0.6, 0.8, 0.95])
    for levels in (10, 20):
        A, N = _nested_selects(levels)
        tex.testing.check_grad(topi.sum(N), [A], data={A: a})


def _guarded_selects(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    """``n`` nested if_then_else, level k adding ``A[j - k]`` where that is in bounds."""
    A = tex.placeholder((64,), name="A", dtype="float64")

    def body(j):  # type: ignore[no-untyped-def]
        e = tex.const(0.0, "float64")
        for k in range(n):
            e = tex.if_then_else(j - k >= 0, e + A[j - k] * 0.5, e)
        return e

    return A, tex.compute((64,), body, name="guarded")


def test_gradient_of_guarded_selects_folds_both_sides():
    """The adjoint through both sides of each level is select(c, g, 0) + select(!c, g, 0):
    kept as written it nested one level deeper per level (differentiate quadratic: 80
    levels 1.3 s); folded into g it stays one value per level."""
    times = {}
    for n in (20, 80):
        A, out = _guarded_selects(n)
        (g,), times[n] = timed(tex.differentiate, topi.sum(out), [A])
    assert times[80] < 8 * times[20] + 0.1, times  # quadratic: 16x
    # one bounds guard per level: 255 nodes at 80 levels (before: 2,485)
    assert sum(1 for _ in post_order(*g.op.body)) < 4 * 80, str(g.op.body[0])
    A, out = _guarded_selects(6)
    tex.testing.check_grad(topi.sum(out), [A])


def test_long_conjunction():
    """``conjuncts`` of a 3,000-term ``&&`` chain (from ``fold.conjoin``) recursed once per
    term."""
    from tex.ir import fold

    x = tex.placeholder((4,), name="x")
    parts = [x[0] > -1.0 - 0.001 * k for k in range(3000)]
    cond = fold.conjoin(parts)
    assert fold.conjuncts(cond) == parts


def test_inliner_memo_follows_the_inlined_set():
    """The shared memo of ``Inliner`` starts over when a stage whose reads it kept becomes
    inlined, and expands chains and shared reads once."""
    from tex.schedule.inline import Inliner

    A = tex.placeholder((8,), name="A")
    B = tex.compute((8,), lambda i: A[i] * 2.0, name="B")
    C = tex.compute((8,), lambda i: B[i] + B[(i + 1) % 8], name="C")
    s = tex.create_schedule(C.op)
    inliner = Inliner(s)
    assert inliner.expand(C.op.body[0]) is C.op.body[0]  # nothing inlined yet
    s[B].compute_inline()
    inliner.add(s[B])
    got = inliner.expand(C.op.body[0])
    assert {r.tensor.name for r in tex.ir.collect_reads(got)} == {"A"}
    assert str(got) == "A[i] * 2.0 + A[(i + 1) % 8] * 2.0"


def test_many_loop_nests_are_outlined():
    """LLVM's loop passes are quadratic in the loops of one function (400 stored stages:
    9 s to optimize, 1,500: 100 s): past OUTLINE_MIN_NESTS nests, each nest is a function
    of its own (linear: 5 ms per stage); small functions are emitted as before."""
    from tex.codegen.parallel import OUTLINE_MIN_NESTS

    for n, outlined in ((OUTLINE_MIN_NESTS - 1, False), (OUTLINE_MIN_NESTS + 1, True)):
        A, out = _chain(n, size=4)
        ir_text = emit_llvm(legalize(tex.lower(tex.create_schedule(out.op), [A, out]),
                                     "llvm"))[0]
        # every nest a call; nests alike share one function (tex.codegen.parallel)
        assert len(re.findall(r'call void @"main\.nest\d+"', ir_text)) == \
            (n if outlined else 0)
        defined = ir_text.count('define internal void @"main.nest')
        assert (0 < defined < n) if outlined else defined == 0
    times = {}
    for n in (100, 300):
        A, out = _chain(n, size=4)
        s = tex.create_schedule(out.op)
        times[n] = seconds(tex.build, s, [A, out])
    assert times[300] < 4.5 * times[100] + 0.2, times  # 3x the stages: linear


def test_lowering_an_inlined_chain_of_index_maps_is_linear():
    """The reads of an inlined chain of rotated reads (x[(j + 1) % 64] n times) share their
    index expressions; the read-bounds analysis took each index's interval with a fresh
    analysis per read (quadratic: 1,000 stages took 7 s to lower, now 0.3 s)."""
    def lower_time(n: int) -> float:
        A = tex.placeholder((64,), name="A")
        x = A
        for i in range(n):
            x = tex.compute((64,), lambda j, x=x: x[(j + 1) % 64] * 0.999, name=f"r{i}")
        s = auto_schedule([x])
        best = float("inf")
        for _ in range(2):
            best = min(best, seconds(tex.lower, s, [A, x]))
        return best

    small, large = lower_time(150), lower_time(600)
    assert large < 8 * small + 0.05, (small, large)  # quadratic: 16x


def test_lowering_memory_is_linear_in_chain_length():
    """The read-bounds analysis kept every node's guards common to all paths as a tuple as
    long as the path (quadratic memory: a 2,000-stage training step peaked at 44 MB in
    lower, now 17 MB); it keeps the innermost MAX_GUARDS."""
    import tracemalloc

    def lower_peak(n: int) -> int:
        A, x = _chain(n, size=64)
        loss = topi.sum(x)
        (grad,) = tex.differentiate(loss, [A])
        s = auto_schedule([loss, grad])
        tracemalloc.start()
        try:
            tex.lower(s, [A, loss, grad])
            return tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    small, large = lower_peak(300), lower_peak(1200)
    assert large < 6 * small, (small, large)  # quadratic: about 16x


def test_lowering_a_chain_of_compute_at_is_linear():
    """Stage k computed at the loop of stage k+1 nests the stages as deep as the chain:
    lowering, its passes and the LLVM emitter recursed once per stage (RecursionError at
    ~450 stages), and each stage copied the storage map and the list of enclosing loops
    and scanned every stage for readers (2,000 stages: 64 s and 535 MB, now 5.7 s and
    210 MB, most of it LLVM)."""
    import tracemalloc

    def attached(n: int) -> tuple[tex.Tensor, tex.Tensor, tex.schedule.Schedule]:
        A, x = _chain(n)
        s = tex.create_schedule(x.op)
        for prod, cons in zip(s.stages, s.stages[1:]):
            prod.compute_at(cons, cons.op.axis[0])
        return A, x, s

    def lower_cost(n: int) -> tuple[float, int]:
        A, x, s = attached(n)
        best = float("inf")
        for _ in range(2):
            best = min(best, seconds(tex.lower, s, [A, x]))
        tracemalloc.start()
        try:
            tex.lower(s, [A, x])
            return best, tracemalloc.get_traced_memory()[1]
        finally:
            tracemalloc.stop()

    (t_small, m_small), (t_large, m_large) = lower_cost(150), lower_cost(600)
    assert t_large < 8 * t_small + 0.05, (t_small, t_large)  # quadratic: 16x
    assert m_large < 6 * m_small, (m_small, m_large)


def test_compute_at_chain_schedules_in_linear_time():
    """compute_at's cycle check walked up from the new parent to the root: attaching a
    chain consumer first was quadratic (2,000 stages: 0.17 s). It walks up from the parent
    and down from the stage in step, as long as the shorter walk, in either order."""
    def schedule_time(n: int, consumer_first: bool) -> float:
        _, x = _chain(n)
        s = tex.create_schedule(x.op)
        pairs = list(zip(s.stages, s.stages[1:]))
        if consumer_first:
            pairs.reverse()
        def attach() -> None:
            for prod, cons in pairs:
                prod.compute_at(cons, cons.op.axis[0])
        return seconds(attach)

    for consumer_first in (False, True):
        small = min(schedule_time(500, consumer_first) for _ in range(2))
        large = min(schedule_time(2000, consumer_first) for _ in range(2))
        assert large < 8 * small + 0.02, (consumer_first, small, large)  # quadratic: 16x


def _divmod_index(depth: int, shift: int = 1) -> tuple[tex.Tensor, tex.Tensor]:
    """One read whose index nests ``depth`` levels of ``%`` and ``//``."""
    A = tex.placeholder((16,), name="A", dtype="float64")

    def body(i):  # type: ignore[no-untyped-def]
        ix = i
        for k in range(depth):
            ix = (ix + shift) % 16 if k % 2 == 0 else (ix * 3 + 1) // 2 % 16
        return A[ix] * 2.0

    return A, tex.compute((16,), body, name="D")


def test_differentiating_a_deeply_nested_divmod_index_is_linear():
    """solve_domain's div/mod elimination asked, for each // and % of the index, whether
    its argument is affine by rewriting the whole sub-term below it again (200 levels:
    2.8 s, quadratic); the sub-terms' rewrites and unknown-tests are memoized (0.2 s)."""
    times: dict[int, float] = {}
    for depth in (50, 200):
        # the faster of two programs: solve_domain remembers the systems it solved
        for shift in (1, 3):
            A, out = _divmod_index(depth, shift)
            (g,), took = timed(tex.differentiate, topi.sum(out), [A])
            times[depth] = min(times.get(depth, math.inf), took)
            assert tex.autodiff.iteration_count(g) == 512  # unchanged by the memos
    assert times[200] < 8 * times[50] + 0.1, times  # quadratic: 16x
    A, out = _divmod_index(7)
    tex.testing.check_grad(topi.sum(out), [A])


def test_rfactor_by_hand_along_a_chain_is_linear():
    """rfactor replaces a reduction's operation; the stages reading it were rebuilt at
    once, and theirs in turn (outside auto_schedule's deferred block): rfactoring each of
    n chained reductions rebuilt everything below it, 400 reductions 8 s. Stages are now
    rebuilt at their next use, once per change: 0.13 s."""
    def program(n: int) -> tex.Tensor:
        x = tex.placeholder((64,), name="A")
        for i in range(n):
            k = tex.reduce_axis((0, 64), name=f"k{i}")
            r = tex.compute((1,), lambda _, x=x, k=k: tex.sum(x[k], axis=k), name=f"R{i}")
            x = tex.compute((64,), lambda j, x=x, r=r: x[j] - r[0] * 0.01, name=f"X{i}")
        return x

    def rfactored(x: tex.Tensor) -> tuple[tex.schedule.Schedule, float]:
        s = tex.create_schedule(x.op)
        def rfactor_all() -> None:
            for st in [st for st in s.stages if st.op.reduce_axis]:
                _, ki = st.split(st.op.reduce_axis[0], factor=8)
                s.rfactor(st.op.output(0), ki)
        return s, seconds(rfactor_all)

    small = min(rfactored(program(100))[1] for _ in range(2))
    large = min(rfactored(program(400))[1] for _ in range(2))
    assert large < 8 * small + 0.05, (small, large)  # quadratic: 16x
    x = program(3)
    s, _ = rfactored(x)
    A = s.stages[0].op.input_tensors[0]
    f = tex.build(s, [A, x])
    a = np.linspace(-1.0, 1.0, 64, dtype="float32")
    got = np.zeros(64, "float32")
    f(a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(x, {A: a}), rtol=1e-5, atol=1e-6)
