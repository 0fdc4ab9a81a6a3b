"""Schedule primitives: what they record, and the errors for every misuse."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex.ir.tensor import PlaceholderOp
from tex.lower.stmt import Allocate, walk_stmts
from tex.schedule import Fuse, Split, create_schedule, thread_axis
from tex.testing import evaluate


def _dense():
    X = tex.placeholder((6, 8), name="X")
    W = tex.placeholder((5, 8), name="W")
    k = tex.reduce_axis((0, 8), name="k")
    T = tex.compute((6, 5), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    R = tex.compute((6, 5), lambda i, j: tex.exp(T[i, j]), name="R")
    return X, W, T, R


def test_create_schedule_has_one_stage_per_compute():
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    assert [st.name for st in s.stages] == ["T", "R"]
    assert s[R].is_output and not s[T].is_output
    assert [iv.name for iv in s[T].leaf_iter_vars] == ["i", "j", "k"]
    assert s[T.op] is s[T]


def test_split_records_relation_and_extents():
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    io, ii = s[T].split(T.op.axis[0], factor=4)
    assert (io.name, io.dom.extent, ii.name, ii.dom.extent) == ("i.outer", 2, "i.inner", 4)
    rel = s[T].relations[0]
    assert isinstance(rel, Split) and rel.parent is T.op.axis[0] and rel.factor == 4
    assert [iv.name for iv in s[T].leaf_iter_vars] == ["i.outer", "i.inner", "j", "k"]
    jo, ji = s[T].split(T.op.axis[1], nparts=2)
    assert (jo.dom.extent, ji.dom.extent) == (2, 3)
    # a factor larger than the extent is clamped: one outer iteration
    ko, ki = s[T].split(T.op.reduce_axis[0], factor=100)
    assert (ko.dom.extent, ki.dom.extent, ko.kind, ki.kind) == (1, 8, "reduce", "reduce")


def test_tile_reorder_fuse():
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    xo, yo, xi, yi = s[R].tile(R.op.axis[0], R.op.axis[1], 2, 3)
    assert [iv.name for iv in s[R].leaf_iter_vars] == ["i.outer", "j.outer", "i.inner",
                                                       "j.inner"]
    f = s[R].fuse(xo, yo)
    assert f.name == "i.outer.j.outer.fused" and f.dom.extent == 3 * 2
    assert isinstance(s[R].relations[-1], Fuse)
    s[R].reorder(yi, xi)
    assert [iv.name for iv in s[R].leaf_iter_vars] == ["i.outer.j.outer.fused", "j.inner",
                                                       "i.inner"]


@pytest.mark.parametrize("case, exc, words", [
    ("split_twice", ValueError, "already been split"),
    ("foreign_axis", ValueError, "not an axis of this stage"),
    ("not_iter_var", TypeError, "expected an IterVar"),
    ("factor_zero", ValueError, "must be positive"),
    ("factor_float", TypeError, "positive int"),
    ("factor_and_nparts", ValueError, "exactly one"),
    ("fuse_not_adjacent", ValueError, "adjacent"),
    ("fuse_mixed", ValueError, "reduction axis with a data-parallel"),
    ("reorder_dup", ValueError, "appears twice"),
    ("vectorize_reduce", ValueError, "reduction axis"),
    ("parallel_reduce", ValueError, "reduction axis"),
    ("parallel_then_vectorize", ValueError, "already marked parallel"),
    ("inline_output", ValueError, "is an output"),
    ("inline_reduction", ValueError, "is a reduction"),
    ("compute_at_self", ValueError, "to itself"),
    ("compute_at_non_consumer", ValueError, "does not read"),
    ("compute_at_cycle", ValueError, "cycle"),
    ("compute_at_foreign_ivar", ValueError, "not an axis"),
    ("compute_at_not_stage", TypeError, "expected a Stage"),
    ("placeholder_stage", ValueError, "placeholder"),
    ("unknown_op", ValueError, "not part of this schedule"),
    ("bind_twice", ValueError, "already bound"),
    ("thread_tag", ValueError, "unknown tag"),
    ("rfactor_spatial", ValueError, "not a reduction axis"),
    ("cache_read_not_reader", ValueError, "does not read"),
    ("cache_write_after_split", ValueError, "before other primitives"),
])
def test_primitive_errors(case, exc, words):
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    i, j = R.op.axis
    k = T.op.reduce_axis[0]
    actions = {
        "split_twice": lambda: (s[R].split(i, 2), s[R].split(i, 2)),
        "foreign_axis": lambda: s[R].split(k, 2),
        "not_iter_var": lambda: s[R].split("i", 2),
        "factor_zero": lambda: s[R].split(i, 0),
        "factor_float": lambda: s[R].split(i, 2.5),
        "factor_and_nparts": lambda: s[R].split(i, factor=2, nparts=2),
        "fuse_not_adjacent": lambda: s[T].fuse(T.op.axis[0], k),
        "fuse_mixed": lambda: s[T].fuse(T.op.axis[1], k),
        "reorder_dup": lambda: s[R].reorder(i, i),
        "vectorize_reduce": lambda: s[T].vectorize(k),
        "parallel_reduce": lambda: s[T].parallel(k),
        "parallel_then_vectorize": lambda: (s[R].parallel(i), s[R].vectorize(i)),
        "inline_output": lambda: s[R].compute_inline(),
        "inline_reduction": lambda: s[T].compute_inline(),
        "compute_at_self": lambda: s[R].compute_at(s[R], i),
        "compute_at_non_consumer": lambda: s[R].compute_at(s[T], T.op.axis[0]),
        "compute_at_cycle": lambda: _cycle(s, T, R),
        "compute_at_foreign_ivar": lambda: s[T].compute_at(s[R], k),
        "compute_at_not_stage": lambda: s[T].compute_at(R, i),
        "placeholder_stage": lambda: s[X],
        "unknown_op": lambda: s[tex.compute((2,), lambda a: a * 1.0, name="other")],
        "bind_twice": lambda: (s[R].bind(i, thread_axis("blockIdx.x")),
                               s[R].bind(j, thread_axis("blockIdx.x"))),
        "thread_tag": lambda: thread_axis("warpIdx.x"),
        "rfactor_spatial": lambda: s.rfactor(T, T.op.axis[0]),
        "cache_read_not_reader": lambda: s.cache_read(X, "shared", [R]),
        "cache_write_after_split": lambda: (s[T].split(T.op.axis[0], 2),
                                            s.cache_write(T, "local")),
    }
    with pytest.raises(exc, match=words):
        actions[case]()


def _cycle(s, T, R):
    # T inside R is fine; then R inside T would be a cycle (T does not read R either,
    # so build a DAG where both directions are reads: a chain A -> B)
    A = tex.placeholder((4,), name="A")
    B = tex.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = tex.compute((4,), lambda i: B[i] + 1.0, name="C")
    D = tex.compute((4,), lambda i: C[i] * B[i], name="D")
    s2 = create_schedule(D.op)
    s2[C].compute_at(s2[D], D.op.axis[0])
    s2[B].compute_at(s2[C], C.op.axis[0])
    s2[C].compute_at(s2[B], B.op.axis[0])


def test_cache_write_keeps_axes_usable():
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    TL = s.cache_write(T, "local")
    assert TL.name == "T.local" and s[TL].scope == "local"
    io, ii = s[T].split(T.op.axis[0], factor=2)  # the original axes still work
    s[TL].compute_at(s[T], io)
    assert s[TL].attach_stage is s[T]
    # R now reads the copy stage's output
    assert s[T].op.output(0) in s[R].op.input_tensors


def test_rfactor_returns_partial_tensor():
    A = tex.placeholder((3, 64), name="A")
    k = tex.reduce_axis((0, 64), name="k")
    S = tex.compute((3,), lambda i: tex.sum(A[i, k], axis=k), name="S")
    s = create_schedule(S.op)
    ko, ki = s[S].split(k, factor=8)
    SF = s.rfactor(S, ki)
    assert SF.shape == (8, 3) and SF.name == "S.rf"
    assert [iv.kind for iv in s[S].leaf_iter_vars] == ["axis", "reduce"]
    assert s[S].leaf_iter_vars[-1].dom.extent == 8


# -- attach points that later loop changes replace ---------------------------------------------
# compute_at(parent, iv) means "once per value of iv": when iv is later split the stage moves
# to the inner loop, when it is fused to the fused loop; rfactor and cache_write move the
# stages computed at loops they take over to the new stage (which now reads them).

def _check_built(s, args, out, seed=0):
    """Build with LLVM, run, and compare ``out`` to the reference interpreter."""
    rng = np.random.default_rng(seed)
    feed = {a: rng.standard_normal(a.shape).astype(a.dtype.numpy) for a in args
            if isinstance(a.op, PlaceholderOp)}
    arrays = [feed[a] if a in feed else np.zeros(a.shape, a.dtype.numpy) for a in args]
    tex.build(s, args)(*arrays)
    np.testing.assert_allclose(arrays[args.index(out)], evaluate(out, feed), rtol=1e-12,
                               atol=1e-12)


def _blur_rows():
    # C[i, j] reads a neighbourhood B[i, j .. j + 2] of its producer
    A = tex.placeholder((5, 23), "float64", name="A")
    B = tex.compute((5, 23), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    C = tex.compute((5, 21), lambda i, j: B[i, j] + B[i, j + 1] - B[i, j + 2] * 0.5, name="C")
    return A, B, C


def _split4(s, C, i, j):
    return s[C].split(j, factor=4)[1]  # 21 = 5 * 4 + 1: a guarded remainder


def _nparts4(s, C, i, j):
    return s[C].split(j, nparts=4)[1]


def _split_twice(s, C, i, j):
    _, ji = s[C].split(j, factor=5)
    return s[C].split(ji, factor=2)[1]


def _tile(s, C, i, j):
    return s[C].tile(i, j, 2, 5)[3]


def _fuse(s, C, i, j):
    return s[C].fuse(i, j)


def _split3_fuse_outer(s, C, i, j):
    jo, ji = s[C].split(j, factor=3)
    s[C].reorder(jo, i, ji)
    s[C].fuse(jo, i)
    return ji


def _split3_fuse_with_i(s, C, i, j):
    jo, ji = s[C].split(j, factor=3)
    s[C].fuse(i, jo)
    return ji


def _split_then_fuse_inner(s, C, i, j):
    jo, ji = s[C].split(j, factor=4)
    s[C].reorder(jo, ji, i)
    return s[C].fuse(ji, i)


@pytest.mark.parametrize("change", [_split4, _nparts4, _split_twice, _tile, _fuse,
                                    _split3_fuse_outer, _split3_fuse_with_i,
                                    _split_then_fuse_inner])
def test_attach_point_follows_split_and_fuse(change):
    A, B, C = _blur_rows()
    s = create_schedule(C.op)
    i, j = C.op.axis
    s[B].compute_at(s[C], j)
    expected = change(s, C, i, j)
    assert s[B].attach_stage is s[C] and s[B].attach_ivar is expected
    assert expected in s[C].leaf_iter_vars
    _check_built(s, [A, C], C)
    # still a window of 3 producer values per value of j
    allocs = {x.buffer.name: x.buffer.shape[0] for x in walk_stmts(tex.lower(s, [A, C]).body)
              if isinstance(x, Allocate)}
    assert allocs == {"B": 3}


def test_attach_at_outer_axis_then_fuse_computes_per_fused_iteration():
    A, B, C = _blur_rows()
    s = create_schedule(C.op)
    i, j = C.op.axis
    s[B].compute_at(s[C], i)
    f = s[C].fuse(i, j)
    assert s[B].attach_ivar is f
    _check_built(s, [A, C], C)


def test_inline_then_compute_at_then_fuse_fuzzer_case():
    # found by the fuzzer: lowering raised "InternalError: no storage for 'C1'"
    P0 = tex.placeholder((), "float64", name="P0")
    P1 = tex.placeholder((), "float64", name="P1")
    T = tex.topi.add(P0, P1)
    C1 = tex.compute((1, 1), lambda i, j: T[()] * 2.0, name="C1")
    C2 = tex.compute((1, 1), lambda i, j: tex.if_then_else(tex.all(i >= 0, i < 1), C1[i, j],
                                                           0.0), name="C2")
    s = create_schedule(C2.op)
    s[C1].compute_inline()
    s[C1].compute_at(s[C2], C2.op.axis[0])  # re-attaches the inlined stage
    assert s[C1].attach_type == "scope"
    fused = s[C2].fuse(*C2.op.axis)
    assert s[C1].attach_ivar is fused
    _check_built(s, [P0, P1, C2], C2)


def _stencil_1d():
    A = tex.placeholder((9,), "float64", name="A")
    B = tex.compute((9,), lambda i: A[i] * 3.0 - 1.0, name="B")
    C = tex.compute((7,), lambda i: B[i] + B[i + 2], name="C")
    return A, B, C


def test_inline_then_compute_at_then_split():
    A, B, C = _stencil_1d()
    s = create_schedule(C.op)
    s[B].compute_inline()
    s[B].compute_at(s[C], C.op.axis[0])
    _, ci = s[C].split(C.op.axis[0], factor=3)
    assert s[B].attach_ivar is ci
    _check_built(s, [A, C], C)


def test_compute_at_then_split_then_inline():
    A, B, C = _stencil_1d()
    s = create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    s[C].split(C.op.axis[0], factor=3)
    s[B].compute_inline()
    assert s[B].attach_type == "inline" and s[B].attach_stage is None
    _check_built(s, [A, C], C)


def _row_sum(n=13):
    A = tex.placeholder((5, n), "float64", name="A")
    B = tex.compute((5, n), lambda i, k: tex.exp(A[i, k]) * 2.0, name="B")
    k = tex.reduce_axis((0, n), name="k")
    S = tex.compute((5,), lambda i: tex.sum(B[i, k], axis=k), name="S")
    return A, B, k, S


def test_attach_at_reduce_axis_then_split_non_dividing():
    A, B, k, S = _row_sum()
    s = create_schedule(S.op)
    s[B].compute_at(s[S], k)
    ko, ki = s[S].split(k, factor=5)
    s[S].reorder(ki, ko)
    assert s[B].attach_ivar is ki
    _check_built(s, [A, S], S)


def test_nested_attach_points_all_split():
    A = tex.placeholder((4, 11), "float64", name="A")
    B = tex.compute((4, 11), lambda i, j: A[i, j] + 1.0, name="B")
    C = tex.compute((4, 10), lambda i, j: B[i, j] * B[i, j + 1], name="C")
    D = tex.compute((4, 9), lambda i, j: C[i, j] - C[i, j + 1], name="D")
    s = create_schedule(D.op)
    s[C].compute_at(s[D], D.op.axis[1])
    s[B].compute_at(s[C], C.op.axis[1])
    _, cji = s[C].split(C.op.axis[1], factor=2)
    jo, dji = s[D].split(D.op.axis[1], factor=4)
    s[D].fuse(D.op.axis[0], jo)
    assert (s[B].attach_ivar, s[C].attach_ivar) == (cji, dji)
    _check_built(s, [A, D], D)


def test_rfactor_moves_attach_points_to_the_partial_results():
    A, B, k, S = _row_sum(12)
    s = create_schedule(S.op)
    ko, ki = s[S].split(k, factor=5)
    s[B].compute_at(s[S], ko)
    SF = s.rfactor(S, ko, factor_axis=1)
    assert s[B].attach_stage is s[SF] and s[B].attach_ivar is SF.op.axis[1]
    s[SF].compute_at(s[S], S.op.axis[0])
    s[SF].split(SF.op.axis[1], factor=2)  # 3 partial sums: a guarded remainder
    _check_built(s, [A, S], S)


def test_rfactor_moves_attach_at_unsplit_spatial_axis():
    A, B, k, S = _row_sum(12)
    s = create_schedule(S.op)
    s[B].compute_at(s[S], S.op.axis[0])
    _, ki = s[S].split(k, factor=4)
    SF = s.rfactor(S, ki)
    assert s[B].attach_stage is s[SF] and s[B].attach_ivar is SF.op.axis[1]
    _check_built(s, [A, S], S)


def test_rfactor_keeps_attach_at_split_spatial_axis_and_lower_explains():
    A, B, k, S = _row_sum(12)
    s = create_schedule(S.op)
    io, _ = s[S].split(S.op.axis[0], factor=2)
    _, ki = s[S].split(k, factor=5)
    s[B].compute_at(s[S], io)
    SF = s.rfactor(S, ki)
    assert s[B].attach_stage is s[S] and s[B].attach_ivar is io
    with pytest.raises(ValueError, match=r"'B' is computed at loop 'i.outer' of 'S', but "
                                         r"'S.rf' reads it outside that loop"):
        tex.lower(s, [A, S])
    s[SF].compute_at(s[S], io)  # what the message asks for
    _check_built(s, [A, S], S)


@pytest.mark.parametrize("at_reduce", [False, True])
def test_cache_write_moves_attach_points_to_the_cache_stage(at_reduce):
    A, B, k, S = _row_sum()
    s = create_schedule(S.op)
    s[B].compute_at(s[S], k if at_reduce else S.op.axis[0])
    SL = s.cache_write(S, "local")
    assert s[B].attach_stage is s[SL]
    assert s[B].attach_ivar is (SL.op.reduce_axis[0] if at_reduce else SL.op.axis[0])
    _check_built(s, [A, S], S)
    _, ii = s[S].split(S.op.axis[0], factor=2)
    s[SL].compute_at(s[S], ii)
    _check_built(s, [A, S], S)


@pytest.mark.parametrize("reduce,steps", [
    (False, ["cache_write", "cache_write", "cache_write"]),
    (True, ["cache_write", "cache_write", "cache_write"]),
    (True, ["rfactor", "cache_write", "cache_write"]),
    (True, ["cache_write", "rfactor", "cache_write"]),
])
def test_chains_of_op_replacing_primitives_write_the_output(reduce, steps):
    """Each primitive replaces an operation; the stages reading it are rebuilt at their
    next use. A stage's operation read while a stale stage above it was pending became
    stale again once that one was rebuilt: lower keyed the output buffer on the old
    operation and the result went to a temporary (found by the fuzzer)."""
    A = tex.placeholder((16,), name="A", dtype="float64")
    k = tex.reduce_axis((0, 16), name="k")
    R = tex.compute((4,), lambda i: tex.sum(A[k] * (i + 1), axis=k), name="R") if reduce \
        else tex.compute((4,), lambda i: A[i] + A[i + 4], name="R")
    s = create_schedule(R.op)
    target = s[R]
    for step in steps:
        if step == "cache_write":
            target = s[s.cache_write(target.op.output(0), "local")]
        else:
            _, ki = target.split(target.op.reduce_axis[0], factor=4)
            target = s[s.rfactor(target.op.output(0), ki)]
    f = tex.build(s, [A, R])
    a = np.linspace(0.5, 2.0, 16)
    got = np.full(4, np.nan)
    f(a, got)
    np.testing.assert_allclose(got, tex.testing.evaluate(R, {A: a}), rtol=1e-12)
