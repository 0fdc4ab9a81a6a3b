"""Every topi op and its gradient, compiled: ``tex.build`` against ``tex.testing.evaluate``.

The ops come from the spec table of tests/test_autodiff_ops.py (``CASES``: every topi
operator with its input shapes, dtypes and samplers). For each case one function computes
the forward output and the gradients with respect to every float input at once (a random
head); it is built twice, with the default schedule and with a generic hand schedule
(element-wise producers inlined, the last spatial axis split by 4 and vectorized with the
reductions outside it, the outer spatial axes fused and parallel), and every output is
compared with the reference interpreter on the same random inputs. The second-order
(Hessian-vector product) and forward-mode (``jvp``) programs of the autodiff tests build
too.

Then a hypothesis test applies random legal schedules (splits, reorders, fuses, inlines,
compute_at, vectorize, parallel) to a few DAGs, gradient programs among them, and checks
the compiled outputs are unchanged; and targeted tests schedule a padded conv2d (forward
and gradient, the padded input computed at a loop of the convolution), a max-pool gradient
and a softmax gradient by hand.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tex
from tex import topi
from tex.autodiff import jvp
from tex.ir.tensor import PlaceholderOp
from tex.ir.visit import placeholders_of
from tex.lower.stmt import Allocate, walk_stmts
from tex.schedule import Schedule, Stage
from tex.testing import evaluate
from tex.topi import nn

from test_autodiff_ops import CASES, JVP_CASES, SECOND_ORDER, Case, Input, make_inputs, seed_of
from test_lower import _schedules

Array = np.ndarray
Feed = dict[tex.Tensor, Array]


# -- building and comparing --------------------------------------------------------------

def _unique(tensors: Sequence[tex.Tensor]) -> list[tex.Tensor]:
    out: list[tex.Tensor] = []
    for t in tensors:
        if not any(t is u for u in out):
            out.append(t)
    return out


def _computed(tensors: Sequence[tex.Tensor]) -> list[tex.Tensor]:
    """The tensors some stage computes (placeholders are passed through, not built), each
    once."""
    return _unique([t for t in tensors if not isinstance(t.op, PlaceholderOp)])


def _args(inputs: Sequence[tex.Tensor], outs: Sequence[tex.Tensor]) -> list[tex.Tensor]:
    return [*_unique([t for t in inputs if isinstance(t.op, PlaceholderOp)]), *outs]


def _tolerance(dtype: np.dtype) -> dict[str, float]:
    if dtype == np.float64:
        return {"rtol": 1e-9, "atol": 1e-12}
    if dtype == np.float32:
        return {"rtol": 1e-5, "atol": 1e-6}
    if dtype == np.float16:
        return {"rtol": 1e-3, "atol": 1e-3}
    return {"rtol": 0, "atol": 0}  # integers and bools: exact


def build_and_compare(s: Schedule, inputs: Sequence[tex.Tensor], outs: Sequence[tex.Tensor],
                      feed: Feed, name: str = "f",
                      tolerance: Callable[[np.dtype], dict[str, float]] = _tolerance) -> None:
    """Build ``s`` for ``outs`` (each a computed tensor, none twice), run it on ``feed``
    and compare every output with ``evaluate``. Outputs start as NaN (or a marker) so that
    an element the function never writes shows."""
    args = _args(inputs, outs)
    f = tex.build(s, args, name=name)
    arrays = []
    for a in args:
        if a in feed:
            arrays.append(np.array(feed[a], order="C"))
            continue
        dtype = a.dtype.numpy
        fill = np.nan if np.dtype(dtype).kind == "f" else 7
        arrays.append(np.full(a.shape, fill, dtype=dtype))
    f(*arrays)
    ref = evaluate(list(outs), feed)
    for t, r in zip(outs, ref):
        got = arrays[args.index(t)]
        assert got.shape == r.shape and got.dtype == r.dtype, t.name
        np.testing.assert_allclose(got, r, **tolerance(r.dtype), err_msg=f"output {t.name}")


# -- schedules ---------------------------------------------------------------------------

def default_schedule(outs: Sequence[tex.Tensor]) -> Schedule:
    return tex.create_schedule([t.op for t in outs])


def hand_schedule(outs: Sequence[tex.Tensor], factor: int = 4) -> Schedule:
    """What a user would write without looking at the ops: inline every element-wise
    non-output single-output stage; in every other stage split the last spatial axis by
    ``factor`` and vectorize the inner part, with the reduction axes moved outside it, and
    run the outer spatial axes in parallel (the first two fused when there are three or
    more)."""
    s = default_schedule(outs)
    for stage in s.stages:
        if not stage.is_output and not stage.op.reduce_axis and stage.op.num_outputs == 1:
            stage.compute_inline()
    for stage in s.stages:
        if stage.attach_type != "root":
            continue
        axes = list(stage.op.axis)
        if not axes:
            continue
        outer = axes[:-1]
        last = axes[-1]
        if last.dom.extent > 1:
            lo, li = stage.split(last, factor=factor)
            stage.reorder(*outer, lo, *stage.op.reduce_axis, li)
            stage.vectorize(li)
            outer.append(lo)
        else:
            outer.append(last)
        if len(axes) >= 3:
            stage.parallel(stage.fuse(outer[0], outer[1]))
        else:
            stage.parallel(outer[0])
    return s


SCHEDULES = {"default": default_schedule, "hand": hand_schedule}


# -- every topi op and its gradient ------------------------------------------------------

def case_program(case_: Case, rng: np.random.Generator
                 ) -> tuple[list[tex.Tensor], list[tex.Tensor], list[tex.Tensor], Feed]:
    """Placeholders (inputs and head), ``[out, *grads]``, the differentiated inputs, the
    feed."""
    holders, data = make_inputs(case_.inputs, rng)
    out = case_.build(*holders)
    wrt = [h for h, i in zip(holders, case_.inputs) if i.diff]
    head = tex.placeholder(out.shape, out.dtype, name="head")
    grads = list(tex.differentiate(out, wrt, head=head))
    feed = {**data, head: rng.standard_normal(out.shape).astype(out.dtype.numpy)}
    return [*holders, head], [out, *grads], wrt, feed


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("case_", CASES, ids=[c.id for c in CASES])
def test_op_and_gradient_build(case_: Case, schedule: str) -> None:
    rng = np.random.default_rng(seed_of(case_.id) + 11)
    inputs, results, wrt, feed = case_program(case_, rng)
    head = inputs[-1]
    # a gradient that is a placeholder is the head passed through (add, sum over no axis):
    # nothing to compute; one tensor computed as several results is built once
    assert all(t is head for t in results if isinstance(t.op, PlaceholderOp))
    outs = _computed(results)
    build_and_compare(SCHEDULES[schedule](outs), inputs, outs, feed)


# -- second order and forward mode -------------------------------------------------------

@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("name,build,sampler", SECOND_ORDER, ids=[s[0] for s in SECOND_ORDER])
def test_hessian_vector_product_builds(name: str, build: Callable[..., tex.Tensor],
                                       sampler: str, schedule: str) -> None:
    rng = np.random.default_rng(seed_of(name) + 13)
    (x,), data = make_inputs([Input((2, 3), sampler)], rng)
    out = build(x)
    h = tex.placeholder(out.shape, "float64", name="H")
    v = tex.placeholder(x.shape, "float64", name="V")
    (g,) = tex.differentiate(out, [x], head=h)
    s = topi.sum(topi.multiply(g, v))
    (hv,) = tex.differentiate(s, [x])
    feed = {**data, h: rng.standard_normal(out.shape), v: rng.standard_normal(x.shape)}
    outs = _computed([g, hv])
    build_and_compare(SCHEDULES[schedule](outs), [x, h, v], outs, feed)


@pytest.mark.parametrize("schedule", list(SCHEDULES))
@pytest.mark.parametrize("name,build,inputs", JVP_CASES, ids=[c[0] for c in JVP_CASES])
def test_jvp_builds(name: str, build: Callable[..., tex.Tensor], inputs: list[Input],
                    schedule: str) -> None:
    rng = np.random.default_rng(seed_of(name) + 17)
    xs, data = make_inputs(inputs, rng)
    out = build(*xs)
    us = [tex.placeholder(x.shape, x.dtype, name=f"u{p}") for p, x in enumerate(xs)]
    tangent = jvp(out, xs, us)
    feed = {**data, **{t: rng.standard_normal(t.shape) for t in us}}
    outs = _computed([out, tangent])
    build_and_compare(SCHEDULES[schedule](outs), [*xs, *us], outs, feed)


# -- random legal schedules --------------------------------------------------------------

def _random_feed(inputs: Sequence[tex.Tensor], seed: int = 0) -> Feed:
    rng = np.random.default_rng(seed)
    return {a: rng.standard_normal(a.shape).astype(a.dtype.numpy) for a in inputs}


def _float32_tolerance(dtype: np.dtype) -> dict[str, float]:
    return {"rtol": 1e-5, "atol": 1e-5} if dtype.kind == "f" else _tolerance(dtype)


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_schedules())
def test_random_schedules_build_and_match_evaluate(case) -> None:
    """The DAGs and random schedules of tests/test_lower.py, compiled."""
    s, inputs, out = case
    build_and_compare(s, inputs, [out], _random_feed(inputs), tolerance=_float32_tolerance)


def _gradient_dag(which: str) -> tuple[list[tex.Tensor], list[tex.Tensor]]:
    """Inputs (head included) and outputs ``[out, *grads]`` of a small gradient program."""
    if which == "softmax":
        x = tex.placeholder((3, 5), name="x")
        out = nn.softmax(x)
        wrt = [x]
    elif which == "conv2d":
        x = tex.placeholder((1, 2, 5, 4), name="x")
        k = tex.placeholder((2, 2, 3, 3), name="k")
        out = nn.conv2d(x, k, 1, 1)
        wrt = [x, k]
    elif which == "max_pool":
        x = tex.placeholder((1, 2, 5, 5), name="x")
        out = nn.pool2d(x, 3, 2, 1, 1, "max")
        wrt = [x]
    else:  # a two-layer perceptron
        x = tex.placeholder((3, 4), name="x")
        w = tex.placeholder((5, 4), name="w")
        b = tex.placeholder((5,), name="b")
        out = topi.sum(topi.tanh(nn.dense(x, w, b)), axis=1)
        wrt = [w, b]
    head = tex.placeholder(out.shape, out.dtype, name="head")
    outs = _computed([out, *tex.differentiate(out, wrt, head=head)])
    return placeholders_of(outs), outs


GRADIENT_DAGS = ["softmax", "conv2d", "max_pool", "mlp"]


def _randomize(draw: Callable, s: Schedule) -> Schedule:
    """Random legal primitives on every stage of ``s``: splits, a reorder, a fuse of two
    adjacent loops, vectorize / parallel / unroll, then (consumers first) inlines and
    compute_at at a random loop of the only consumer."""
    for stage in list(s.stages):
        if stage.attach_type != "root" or not stage.leaf_iter_vars:
            continue
        for _ in range(draw(st.integers(0, 2))):
            leaves = stage.leaf_iter_vars
            stage.split(leaves[draw(st.integers(0, len(leaves) - 1))],
                        factor=draw(st.integers(1, 4)))
        stage.reorder(*draw(st.permutations(list(stage.leaf_iter_vars))))
        leaves = stage.leaf_iter_vars
        if len(leaves) >= 2 and draw(st.booleans()):
            p = draw(st.integers(0, len(leaves) - 2))
            if leaves[p].kind == leaves[p + 1].kind:
                stage.fuse(leaves[p], leaves[p + 1])
        spatial = [iv for iv in stage.leaf_iter_vars if iv.kind != "reduce"]
        if spatial and draw(st.booleans()):
            stage.vectorize(spatial[-1])
        if len(spatial) > 1 and draw(st.booleans()):
            stage.parallel(spatial[0])
        free = [iv for iv in stage.leaf_iter_vars if iv not in stage.annotations]
        if free and draw(st.booleans()):
            stage.unroll(free[draw(st.integers(0, len(free) - 1))])
    for stage in reversed(s.stages):
        if stage.is_output:
            continue
        readers = [c for c in s.stages if c is not stage and s.reads(c, stage)]
        choice = draw(st.integers(0, 2))
        if choice == 1 and not stage.op.reduce_axis and stage.op.num_outputs == 1:
            stage.compute_inline()
        elif choice == 2 and len(readers) == 1 and readers[0].attach_type != "inline":
            parent = readers[0]
            leaves = parent.leaf_iter_vars
            if leaves:
                stage.compute_at(parent, leaves[draw(st.integers(0, len(leaves) - 1))])
    return s


@st.composite
def _gradient_schedules(draw: Callable) -> tuple[Schedule, list[tex.Tensor], list[tex.Tensor]]:
    inputs, outs = _gradient_dag(draw(st.sampled_from(GRADIENT_DAGS)))
    return _randomize(draw, default_schedule(outs)), inputs, outs


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_gradient_schedules())
def test_random_schedules_of_gradients_match_evaluate(case) -> None:
    """Random legal schedules of gradient programs (several outputs, tuple reductions,
    guarded reads of padding) compiled: the outputs are unchanged."""
    s, inputs, outs = case
    build_and_compare(s, inputs, outs, _random_feed(inputs), tolerance=_float32_tolerance)


# -- targeted hand schedules -------------------------------------------------------------

def _vectorize_last(stage: Stage, factor: int = 4) -> None:
    """Split the last spatial axis by ``factor`` (vectorized, innermost, reductions moved
    outside it) and run the fused outer spatial axes in parallel."""
    axes = list(stage.op.axis)
    lo, li = stage.split(axes[-1], factor=factor)
    stage.reorder(*axes[:-1], lo, *stage.op.reduce_axis, li)
    stage.vectorize(li)
    stage.parallel(stage.fuse(*axes[:-1]) if len(axes) > 2 else axes[0])


def _allocations(s: Schedule, args: Sequence[tex.Tensor]) -> dict[str, int]:
    f = tex.lower(s, list(args))
    return {a.buffer.name: a.buffer.shape[0] for a in walk_stmts(f.body)
            if isinstance(a, Allocate)}


@pytest.mark.parametrize("at", ["h", "w.outer"])
@pytest.mark.parametrize("stride,padding,dilation", [(1, 1, 1), (2, 1, 1), (1, 2, 2)],
                         ids=["s1-p1", "s2-p1", "s1-p2-d2"])
def test_padded_conv2d_and_gradient_with_compute_at(stride: int, padding: int, dilation: int,
                                                     at: str) -> None:
    """The padded input computed at a loop of the convolution (only the rows / the window
    that loop reads), the innermost output axis vectorized, the gradients scheduled the
    same way."""
    x = tex.placeholder((2, 3, 9, 10), name="x")
    k = tex.placeholder((4, 3, 3, 3), name="k")
    y = nn.conv2d(x, k, stride, padding, dilation)
    head = tex.placeholder(y.shape, name="head")
    gx, gk = tex.differentiate(y, [x, k], head=head)
    outs = [y, gx, gk]
    s = default_schedule(outs)
    (pad,) = [t for t in y.op.input_tensors if t.op is not k.op]
    assert not isinstance(pad.op, PlaceholderOp)
    n, c, h, w = y.op.axis
    rc, ry, rx = y.op.reduce_axis
    wo, wi = s[y].split(w, factor=4)
    s[y].reorder(n, c, h, wo, rc, ry, rx, wi)
    s[y].vectorize(wi)
    s[y].parallel(s[y].fuse(n, c))
    s[pad].compute_at(s[y], h if at == "h" else wo)
    _vectorize_last(s[gx])
    _vectorize_last(s[gk])
    args = [x, k, head, *outs]
    allocs = _allocations(s, args)
    full = 3 * (9 + 2 * padding) * (10 + 2 * padding)
    assert 0 < allocs[pad.name] < full, allocs  # only the region one iteration reads
    build_and_compare(s, [x, k, head], outs, _random_feed([x, k, head], 1),
                      tolerance=_float32_tolerance)


def test_max_pool_gradient_hand_schedule() -> None:
    """Padded, overlapping max pooling and its gradient: the argmax selection computed at
    the row loop of the gradient, the column loops vectorized with guarded (padding) and
    non-contiguous reads."""
    x = tex.placeholder((2, 3, 11, 11), name="x")
    y = nn.pool2d(x, 3, 2, 1, 1, "max")
    head = tex.placeholder(y.shape, name="head")
    (gx,) = tex.differentiate(y, [x], head=head)
    s = default_schedule([y, gx])
    _vectorize_last(s[y])
    _vectorize_last(s[gx])
    others = [stage for stage in s.stages if not stage.is_output]
    assert others, "the gradient reads a saved selection"
    for stage in others:
        if [c for c in s.stages if c is not stage and s.reads(c, stage)] == [s[gx]]:
            stage.compute_at(s[gx], s[gx].leaf_iter_vars[1])
        elif not stage.op.reduce_axis:
            stage.compute_inline()
    rng = np.random.default_rng(3)
    # distinct values: no ties, so every element's gradient is unambiguous
    feed = {x: rng.permutation(x.size).reshape(x.shape).astype("float32") / 8,
            head: rng.standard_normal(head.shape).astype("float32")}
    build_and_compare(s, [x, head], [y, gx], feed, tolerance=_float32_tolerance)


def test_softmax_gradient_with_compute_at() -> None:
    """Softmax and its gradient, rows in parallel and columns vectorized (13: a masked
    remainder); every intermediate read by a single stage is computed at the row loop of
    that stage (per-thread buffers inside a parallel loop)."""
    x = tex.placeholder((5, 13), name="x")
    y = nn.softmax(x)
    head = tex.placeholder(y.shape, name="head")
    (gx,) = tex.differentiate(y, [x], head=head)
    s = default_schedule([y, gx])
    for stage in s.stages:
        if stage.op.axis and len(stage.op.axis) == 2:
            i, j = stage.op.axis
            jo, ji = stage.split(j, factor=4)
            stage.reorder(i, jo, *stage.op.reduce_axis, ji)
            stage.vectorize(ji)
        if stage.op.axis and (stage.is_output or len(stage.op.axis) == 2):
            stage.parallel(stage.leaf_iter_vars[0])
    attached = 0
    for stage in reversed(s.stages):
        if stage.is_output:
            continue
        readers = [c for c in s.stages if c is not stage and s.reads(c, stage)]
        if len(readers) == 1 and readers[0].attach_type == "root":
            stage.compute_at(readers[0], readers[0].leaf_iter_vars[0])
            attached += 1
    assert attached >= 2
    allocs = _allocations(s, [x, head, y, gx])
    assert any(n == 1 for n in allocs.values()), allocs  # one row's value per iteration
    build_and_compare(s, [x, head], [y, gx], _random_feed([x, head], 2),
                      tolerance=_float32_tolerance)
