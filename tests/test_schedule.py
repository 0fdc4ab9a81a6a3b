"""Schedule primitives: what they record, and the errors for every misuse."""
from __future__ import annotations

import pytest

import tex
from tex.schedule import Fuse, Split, create_schedule, thread_axis


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
