"""Lowering: loop nests checked by running them in a Python loop interpreter (no LLVM)
against ``tex.testing.evaluate``, plus the printed form and the errors."""
from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

import tex
from tex.ir.tensor import PlaceholderOp
from tex.ir.visit import post_order
from tex.lower.lower import lower
from tex.lower.stmt import Allocate, For, ForKind, IfThenElse, stmt_exprs, walk_stmts
from tex.schedule import auto_schedule, create_schedule
from tex.target import with_caches
from tex.testing import evaluate

from loop_interp import run_lowered


def _run(s, args, outs, seed=0):
    rng = np.random.default_rng(seed)
    feed = {a: rng.standard_normal(a.shape).astype(a.dtype.numpy)
            for a in args if isinstance(a.op, PlaceholderOp)}
    arrays = [feed[a] if a in feed else np.zeros(a.shape, a.dtype.numpy) for a in args]
    f = lower(s, args, "f")
    run_lowered(f, arrays)
    ref = evaluate(outs, feed)
    for o, r in zip(outs, ref):
        np.testing.assert_allclose(arrays[args.index(o)], r, rtol=1e-5, atol=1e-5)
    return f


def _dense(n=5, m=3, kk=8):
    X = tex.placeholder((n, kk), name="X")
    W = tex.placeholder((m, kk), name="W")
    k = tex.reduce_axis((0, kk), name="k")
    T = tex.compute((n, m), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    R = tex.compute((n, m), lambda i, j: tex.exp(T[i, j]) * 2.0, name="R")
    return X, W, T, R


def test_default_schedule_prints_readable_nest():
    X, W, T, R = _dense()
    f = lower(create_schedule(T.op), [X, W, T], "dense")
    assert str(f) == """\
func dense(X: float32[5, 8], W: float32[3, 8], out T: float32[5, 3]) {
  for (i, 0, 5) {
    for (j, 0, 3) {
      T[i * 3 + j] = 0.0
      for (k, 0, 8) {
        T[i * 3 + j] = T[i * 3 + j] + X[i * 8 + k] * W[j * 8 + k]
      }
    }
  }
}"""


def test_split_reorder_annotations_become_loop_kinds():
    X, W, T, R = _dense()
    s = create_schedule(T.op)
    io, ii = s[T].split(T.op.axis[0], factor=2)
    s[T].reorder(io, T.op.reduce_axis[0], T.op.axis[1], ii)
    s[T].parallel(io)
    s[T].vectorize(ii)
    f = _run(s, [X, W, T], [T])
    kinds = [(x.var.name, x.kind) for x in walk_stmts(f.body) if isinstance(x, For)]
    assert ("i.outer", ForKind.PARALLEL) in kinds and ("i.inner", ForKind.VECTORIZED) in kinds
    # 5 is not a multiple of 2: the remainder is guarded
    guards = [str(x.cond) for x in walk_stmts(f.body) if isinstance(x, IfThenElse)]
    assert "i.inner + i.outer * 2 < 5" in guards


def test_divisible_split_has_no_guard():
    X, W, T, R = _dense(n=6)
    s = create_schedule(T.op)
    s[T].split(T.op.axis[0], factor=3)
    f = _run(s, [X, W, T], [T])
    assert not any(isinstance(x, IfThenElse) for x in walk_stmts(f.body))


def test_compute_at_allocates_only_the_needed_region():
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    io, ii = s[R].split(R.op.axis[0], factor=2)
    s[T].compute_at(s[R], io)
    f = _run(s, [X, W, R], [R])
    allocs = {x.buffer.name: x.buffer.shape[0] for x in walk_stmts(f.body)
              if isinstance(x, Allocate)}
    assert allocs == {"T": 2 * 3}


def test_compute_at_stencil_region_and_clipping():
    A = tex.placeholder((10,), name="A")
    B = tex.compute((10,), lambda i: A[i] * 3.0, name="B")
    C = tex.compute((8,), lambda i: B[i] + B[i + 2], name="C")
    s = create_schedule(C.op)
    co, ci = s[C].split(C.op.axis[0], factor=3)
    s[B].compute_at(s[C], co)
    f = _run(s, [A, C], [C])
    allocs = {x.buffer.name: x.buffer.shape[0] for x in walk_stmts(f.body)
              if isinstance(x, Allocate)}
    assert allocs == {"B": 3 + 2}  # a window of 3 outputs reads 5 inputs


def test_inline_pad_keeps_guarded_reads():
    X = tex.placeholder((5, 8), name="X")
    P = tex.topi.nn.pad(X, (1, 2), (1, 2))
    Y = tex.compute(P.shape, lambda i, j: P[i, j] * 3.0, name="Y")
    s = create_schedule(Y.op)
    s[P].compute_inline()
    f = _run(s, [X, Y], [Y])  # the interpreter raises on an out-of-bounds load
    assert "select(" in str(f) and "PadInput" not in str(f)


def test_tuple_reduction_argmax():
    A = tex.placeholder((4, 6), name="A")
    am = tex.topi.argmax(A, axis=1)
    _run(create_schedule(am.op), [A, am], [am])


def test_rfactor_parallel_partial_sums():
    A = tex.placeholder((3, 64), name="A")
    k = tex.reduce_axis((0, 64), name="k")
    S = tex.compute((3,), lambda i: tex.sum(A[i, k], axis=k), name="S")
    s = create_schedule(S.op)
    ko, ki = s[S].split(k, factor=8)
    SF = s.rfactor(S, ki)
    s[SF].parallel(SF.op.axis[0])
    _run(s, [A, S], [S])


def test_rfactor_non_divisible_and_init():
    A = tex.placeholder((3, 13), name="A")
    k = tex.reduce_axis((0, 13), name="k")
    S = tex.compute((3,), lambda i: tex.max(A[i, k], axis=k), name="S")
    s = create_schedule(S.op)
    ko, ki = s[S].split(k, factor=4)
    s.rfactor(S, ko, factor_axis=1)
    _run(s, [A, S], [S])


@pytest.mark.parametrize("factor_outer", [False, True], ids=["inner", "outer"])
def test_rfactor_non_divisible_where_reads_a_tensor(factor_outer: bool) -> None:
    """The split guard of a non-divisible reduction went after the ``where=`` in the
    partial results' condition, so the condition's read of ``M`` at the padded index was
    unguarded and lower refused the schedule (auto_schedule made it for the gradient of
    ``where(c, x, y)`` over 5 elements): the guard now comes first."""
    A = tex.placeholder((3, 13), name="A")
    M = tex.placeholder((13,), name="M")
    k = tex.reduce_axis((0, 13), name="k")
    S = tex.compute((3,), lambda i: tex.sum(A[i, k], axis=k, where=M[k] > 0), name="S")
    s = create_schedule(S.op)
    ko, ki = s[S].split(k, factor=4)
    SF = s.rfactor(S, ko if factor_outer else ki)
    assert "&&" in str(SF.op.body[0].condition)
    _run(s, [A, M, S], [S])
    f = tex.build(s, [A, M, S])
    a, m = np.random.default_rng(3).standard_normal((2, 3, 13))
    out = np.zeros(3, np.float32)
    f(a.astype(np.float32), m[0].astype(np.float32), out)
    np.testing.assert_allclose(out, (a * (m[0] > 0)).sum(1), rtol=1e-5)


def test_cache_write_and_cache_read_at():
    X, W, T, R = _dense()
    s = create_schedule(T.op)
    TL = s.cache_write(T, "local")
    XX = s.cache_read(X, "shared", [TL])
    io, ii = s[T].split(T.op.axis[0], factor=2)
    s[TL].compute_at(s[T], io)
    s[XX].compute_at(s[TL], TL.op.reduce_axis[0])
    _run(s, [X, W, T], [T])


def test_fuse_then_split_and_reduce_init_inside():
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    f = s[R].fuse(*R.op.axis)
    fo, fi = s[R].split(f, factor=4)
    s[T].compute_at(s[R], fi)
    s[T].reorder(T.op.reduce_axis[0], *T.op.axis)
    _run(s, [X, W, R], [R])


def test_reduce_axis_with_nonzero_min_and_where():
    A = tex.placeholder((4, 10), name="A")
    k = tex.reduce_axis((2, 9), name="k")
    S = tex.compute((4,), lambda i: tex.sum(A[i, k], axis=k, where=k % 2 == 0), name="S")
    s = create_schedule(S.op)
    s[S].split(k, factor=3)
    _run(s, [A, S], [S])


def test_gradient_of_dense_lowers():
    X, W, T, R = _dense()
    H = tex.placeholder(R.shape, name="H")
    dW, = tex.differentiate(R, [W], H)
    _run(create_schedule(dW.op), [X, W, H, dW], [dW])


@pytest.mark.parametrize("case, exc, words", [
    ("missing_input", ValueError, "not in args"),
    ("duplicate", ValueError, "appears twice"),
    ("not_tensor", TypeError, "expected a Tensor"),
    ("free_var", ValueError, "free variable"),
    ("bad_name", ValueError, "identifier"),
])
def test_lower_errors(case, exc, words):
    X, W, T, R = _dense()
    s = create_schedule(R.op)
    n = tex.var("n")
    Z = tex.compute((3,), lambda i: i * n, name="Z")
    actions = {
        "missing_input": lambda: lower(s, [X, R]),
        "duplicate": lambda: lower(s, [X, W, X, R]),
        "not_tensor": lambda: lower(s, [X, W, np.zeros(3)]),
        "free_var": lambda: lower(create_schedule(Z.op), [Z]),
        "bad_name": lambda: lower(s, [X, W, R], name="my func"),
    }
    with pytest.raises(exc, match=words):
        actions[case]()


def test_scalar_var_argument():
    n = tex.var("n")
    A = tex.placeholder((4,), name="A")
    B = tex.compute((4,), lambda i: A[i] * n.astype("float32"), name="B")
    f = lower(create_schedule(B.op), [A, n, B])
    a = np.arange(4, dtype=np.float32)
    b = np.zeros(4, np.float32)
    run_lowered(f, [a, 3, b])
    np.testing.assert_array_equal(b, a * 3)


# --------------------------------------------------------------------------------------
# Random legal schedules do not change results
# --------------------------------------------------------------------------------------

def _dag(which: int):
    if which == 0:
        X, W, T, R = _dense(n=4, m=3, kk=5)
        return [X, W], R
    if which == 1:
        A = tex.placeholder((6, 5), name="A")
        P = tex.topi.nn.pad(A, (1, 1), (1, 1))
        r = tex.reduce_axis((0, 3), name="r")
        C = tex.compute((6, 5), lambda i, j: tex.sum(P[i + r, j + 2] * 0.5, axis=r), name="C")
        D = tex.compute((6, 5), lambda i, j: tex.max(C[i, j], 0.0) + A[i, j], name="D")
        return [A], D
    A = tex.placeholder((4, 6), name="A")
    m = tex.topi.max(A, axis=1, keepdims=True)
    e = tex.compute((4, 6), lambda i, j: tex.exp(A[i, j] - m[i, 0]), name="e")
    k = tex.reduce_axis((0, 6), name="k")
    z = tex.compute((4,), lambda i: tex.sum(e[i, k], axis=k), name="z")
    y = tex.compute((4, 6), lambda i, j: e[i, j] / z[i], name="y")
    return [A], y


@st.composite
def _schedules(draw):
    which = draw(st.integers(0, 2))
    inputs, out = _dag(which)
    s = create_schedule(out.op)
    for stage in list(s.stages):
        if stage.attach_type != "root":
            continue
        for _ in range(draw(st.integers(0, 2))):
            leaves = stage.leaf_iter_vars
            iv = leaves[draw(st.integers(0, len(leaves) - 1))]
            stage.split(iv, factor=draw(st.integers(1, 4)))
        leaves = list(stage.leaf_iter_vars)
        perm = draw(st.permutations(leaves))
        stage.reorder(*perm)
        if draw(st.booleans()) and len(stage.leaf_iter_vars) >= 2:
            a, b = stage.leaf_iter_vars[:2]
            if a.kind == b.kind:
                stage.fuse(a, b)
        spatial = [iv for iv in stage.leaf_iter_vars if iv.kind != "reduce"]
        if spatial and draw(st.booleans()):
            stage.vectorize(spatial[-1])
        if len(spatial) > 1 and draw(st.booleans()):
            stage.parallel(spatial[0])
    for stage in reversed(s.stages):
        if stage.is_output:
            continue
        readers = [c for c in s.stages if c is not stage and s.reads(c, stage)]
        choice = draw(st.integers(0, 2))
        reducing = stage.op.reduce_axis
        if choice == 1 and not reducing and len(stage.op.outputs) == 1:
            stage.compute_inline()
        elif choice == 2 and len(readers) == 1 and readers[0].attach_type != "inline":
            parent = readers[0]
            leaves = parent.leaf_iter_vars
            stage.compute_at(parent, leaves[draw(st.integers(0, len(leaves) - 1))])
    return s, inputs, out


@settings(max_examples=40, deadline=None, derandomize=True,
          suppress_health_check=[HealthCheck.too_slow])
@given(_schedules())
def test_random_schedules_match_evaluate(case):
    s, inputs, out = case
    _run(s, [*inputs, out], [out])


def _softmax_rows():
    A = tex.placeholder((4, 6), name="A")
    m = tex.topi.max(A, axis=1, keepdims=True)
    e = tex.compute((4, 6), lambda i, j: tex.exp(A[i, j] - m[i, 0]), name="e")
    k = tex.reduce_axis((0, 6), name="k")
    z = tex.compute((4,), lambda i: tex.sum(e[i, k], axis=k), name="z")
    y = tex.compute((4, 6), lambda i, j: e[i, j] / z[i], name="y")
    return A, m, e, z, y


def test_compute_at_producer_shared_by_siblings_fuses_softmax_rows():
    # e is read by y and by z, m only by e: all three computed per row of y
    A, m, e, z, y = _softmax_rows()
    s = create_schedule(y.op)
    i = y.op.axis[0]
    s[z].compute_at(s[y], i)
    s[e].compute_at(s[y], i)
    s[m].compute_at(s[y], i)
    f = _run(s, [A, y], [y])
    allocs = {x.buffer.name: x.buffer.shape[0] for x in walk_stmts(f.body)
              if isinstance(x, Allocate)}
    assert allocs == {m.name: 1, "e": 6, "z": 1}


def test_compute_at_reader_outside_the_loop_is_an_error():
    A, m, e, z, y = _softmax_rows()
    s = create_schedule(y.op)
    i, j = y.op.axis
    s[e].compute_at(s[y], j)  # one element of e per (i, j)...
    s[z].compute_at(s[y], i)  # ...but z, at the outer loop, sums a whole row of it
    with pytest.raises(ValueError, match="reads it outside that loop"):
        lower(s, [A, y])


def test_compute_at_root_reader_lowered_first_is_an_error():
    # C (a root stage lowered before D) reads B, which only exists inside D's loop: a
    # clear error, not an internal "no storage for 'B'"
    A = tex.placeholder((6,), name="A")
    B = tex.compute((6,), lambda i: A[i] * 2.0, name="B")
    C = tex.compute((6,), lambda i: B[i] + 1.0, name="C")
    D = tex.compute((6,), lambda i: B[i] * C[i], name="D")
    s = create_schedule(D.op)
    s[B].compute_at(s[D], D.op.axis[0])
    with pytest.raises(ValueError, match="'B' is computed at loop 'i' of 'D', but 'C' reads "
                                         "it outside that loop"):
        lower(s, [A, D])
    s[C].compute_at(s[D], D.op.axis[0])  # what the message asks for
    _run(s, [A, D], [D])


def test_partition_peels_the_split_remainder():
    X = tex.placeholder((5, 100), name="X")
    W = tex.placeholder((3, 5), name="W")
    k = tex.reduce_axis((0, 5), name="k")
    T = tex.compute((3, 100), lambda p, q: tex.sum(W[p, k] * X[k, q], axis=k), name="T")
    s = create_schedule(T.op)
    p, q = T.op.axis
    qo, qi = s[T].split(q, factor=8)
    s[T].reorder(p, qo, k, qi)
    s[T].vectorize(qi)
    f = _run(s, [W, X, T], [T])
    loops = [x for x in walk_stmts(f.body) if isinstance(x, For) and x.var.name == "q.outer"]
    assert [(int(x.min.value), int(x.extent.value)) for x in loops] == [(0, 12), (12, 1)]
    main, tail = loops
    assert not any(isinstance(x, IfThenElse) for x in walk_stmts(main))
    # the remainder's vector loop runs over its 4 points (tighten_vector_loops), unguarded
    assert not any(isinstance(x, IfThenElse) for x in walk_stmts(tail))
    vec = [x for x in walk_stmts(tail) if isinstance(x, For) and x.kind is ForKind.VECTORIZED]
    assert vec and all((int(x.min.value), int(x.extent.value)) == (0, 4) for x in vec)


AVX2 = with_caches("avx2-host", 256, True)


@pytest.mark.parametrize("n", [28, 13, 20])
def test_partition_decides_the_guards_of_inlined_reads(n: int):
    # a row reduction of relu(X) * H: the split's guard of the inlined relu is a select in
    # the update's value, not an if. simplify_pass saw the hull of the peeled loops and
    # kept it; in the main loop and in the tightened remainder it holds everywhere (a
    # resnet block's loss reduction was 3,097 lines of LLVM IR with them, 785 without)
    X = tex.placeholder((3, 4, n), name="X")
    H = tex.placeholder((3, 4, n), name="H")
    L = tex.topi.sum(tex.topi.nn.relu(X) * H)
    f = _run(auto_schedule([L], AVX2), [X, H, L], [L])  # relu inlined, rows split by 8
    loops = [x for x in walk_stmts(f.body) if isinstance(x, For) and x.var.name == "k2.outer"]
    assert len(loops) == 2  # peeled: the main part and the remainder
    assert not any(isinstance(e, tex.ir.expr.Select) for x in walk_stmts(f.body)
                   for e in stmt_exprs(x) for e in post_order(e))


def test_partition_keeps_conjuncts_on_other_variables():
    # the data gradient of an unpadded convolution guards r and s together: peeling r must
    # keep the conditions on s (and the reads they guard) in the middle part
    d = tex.placeholder((1, 2, 5, 5), name="d")
    w = tex.placeholder((3, 2, 3, 3), name="w")
    out = tex.topi.nn.conv2d(d, w, 1, 0, 1)
    H = tex.placeholder(out.shape, name="H")
    dd, dw = tex.differentiate(out, [d, w], H)
    s = create_schedule([dd.op, dw.op])
    n, q, r, x = dd.op.axis
    xo, xi = s[dd].split(x, factor=4)
    s[dd].reorder(n, q, r, xo, *dd.op.reduce_axis, xi)
    s[dd].vectorize(xi)
    f = _run(s, [d, w, H, dd, dw], [dd, dw])
    spans = sorted((int(v.min.value), int(v.extent.value)) for v in walk_stmts(f.body)
                   if isinstance(v, For) and v.var.name == "r")
    # dd's r loop peeled into [0, 2) guarded, [2, 3) free of r's guards, [3, 5) guarded;
    # dw's own axis r in [0, 3)
    assert spans == [(0, 2), (0, 3), (2, 1), (3, 2)]


def test_partition_leaves_scalar_loops_alone():
    # without vector code a guard is a cheap branch: no copies (compile time)
    X, W, T, R = _dense()
    s = create_schedule(T.op)
    s[T].split(T.op.axis[0], factor=2)
    f = _run(s, [X, W, T], [T])
    assert sum(isinstance(v, For) and v.var.name == "i.outer" for v in walk_stmts(f.body)) == 1


def test_an_inlined_stage_in_the_arguments_is_still_stored() -> None:
    A = tex.placeholder((6,), name="A")
    B = tex.compute((6,), lambda i: A[i] + 1, name="B")
    C = tex.compute((6,), lambda i: B[i] * 2, name="C")
    s = tex.create_schedule(C.op)
    s[B].compute_inline()
    f = tex.build(s, [A, B, C])
    a = np.arange(6, dtype="float32")
    b, c = np.full(6, np.nan, "float32"), np.zeros(6, "float32")
    f(a, b, c)
    np.testing.assert_array_equal(b, a + 1)
    np.testing.assert_array_equal(c, (a + 1) * 2)
