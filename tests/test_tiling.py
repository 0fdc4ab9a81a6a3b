"""Tiles that do not divide their extent: ``split(..., tail="shift")`` (the last tile moved
inwards, no guard) and the auto-scheduler's use of it on shapes that are not multiples of
the vector width (ResNet's 56/28/14/7, BERT's 197, odd sizes): results equal the
reference interpreter's, and no guard is left inside a vectorized loop."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.lower.stmt import For, ForKind, IfThenElse, walk_stmts
from tex.testing import evaluate


def _guards_in_vector_loops(func: object) -> list[str]:
    """The conditions of the ``if`` statements inside vectorized loops of ``func``."""
    found = []
    for s in walk_stmts(func.body):  # type: ignore[attr-defined]
        if isinstance(s, For) and s.kind is ForKind.VECTORIZED:
            found += [str(x.cond) for x in walk_stmts(s.body) if isinstance(x, IfThenElse)]
    return found


def _check(s: tex.schedule.Schedule, args: list[tex.Tensor], outs: list[tex.Tensor],
           rng: np.random.Generator) -> None:
    f = tex.build(s, args)
    ins = [rng.standard_normal(t.shape).astype("float32") for t in args[:len(args) - len(outs)]]
    got = [np.full(t.shape, np.nan, "float32") for t in outs]
    f(*ins, *got)
    want = evaluate(outs, dict(zip(args, ins)))
    for g, w in zip(got, want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(g, w, rtol=2e-5, atol=2e-5)


# -- the primitive ------------------------------------------------------------------------

@pytest.mark.parametrize("n", [1, 5, 8, 13, 16, 21])
def test_shifted_elementwise_split(n: int, rng: np.random.Generator) -> None:
    A = tex.placeholder((3, n), name="A")
    B = tex.compute((3, n), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = tex.create_schedule(B.op)
    jo, ji = s[B].split(B.op.axis[1], factor=8, tail="shift")
    s[B].vectorize(ji)
    text = str(tex.lower(s, [A, B]))
    assert "if (" not in text
    if n > 8 and n % 8:
        assert f"min(j.outer * 8, {n - 8})" in text
    _check(s, [A, B], [B], rng)


@pytest.mark.parametrize("n", [6, 10, 17])
def test_shifted_tiles_of_a_cached_reduction(n: int, rng: np.random.Generator) -> None:
    """A matmul's output tiles shifted on both axes, accumulated in a local tile computed
    at the tile loop: the overlapping points are recomputed from scratch, to the same value."""
    A = tex.placeholder((n, 7), name="A")
    B = tex.placeholder((7, n), name="B")
    k = tex.reduce_axis((0, 7), name="k")
    C = tex.compute((n, n), lambda i, j: tex.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tex.create_schedule(C.op)
    CL = s.cache_write(C, "local")
    io, ii = s[C].split(C.op.axis[0], factor=4, tail="shift")
    jo, ji = s[C].split(C.op.axis[1], factor=4, tail="shift")
    s[C].reorder(io, jo, ii, ji)
    s[C].parallel(s[C].fuse(io, jo))
    s[C].vectorize(ji)
    s[CL].compute_at(s[C], s[C].leaf_iter_vars[0])
    s[CL].vectorize(CL.op.axis[1])
    func = tex.lower(s, [A, B, C])
    assert not _guards_in_vector_loops(func)
    assert "if (" not in str(func)
    _check(s, [A, B, C], [C], rng)


def test_shift_is_refused_on_a_reduction_axis() -> None:
    A = tex.placeholder((10,), name="A")
    k = tex.reduce_axis((0, 10), name="k")
    S = tex.compute((), lambda: tex.sum(A[k], axis=k), name="S")
    s = tex.create_schedule(S.op)
    with pytest.raises(ValueError, match="reduction axis would sum twice"):
        s[S].split(k, factor=4, tail="shift")


def test_unknown_tail_is_refused() -> None:
    A = tex.placeholder((10,), name="A")
    B = tex.compute((10,), lambda i: A[i] + 1.0, name="B")
    s = tex.create_schedule(B.op)
    with pytest.raises(ValueError, match="tail must be 'guard' or 'shift'"):
        s[B].split(B.op.axis[0], factor=4, tail="round_up")


def test_shifted_outer_loop_inside_a_reduction_loop_is_refused() -> None:
    """With the reduction loop outside the shifted tile loop, the overlap would be summed
    twice: lowering names the split and the loop."""
    A = tex.placeholder((10, 6), name="A")
    k = tex.reduce_axis((0, 6), name="k")
    S = tex.compute((10,), lambda i: tex.sum(A[i, k], axis=k), name="S")
    s = tex.create_schedule(S.op)
    io, ii = s[S].split(S.op.axis[0], factor=4, tail="shift")
    s[S].reorder(k, io, ii)
    with pytest.raises(ValueError, match="'i' of stage 'S' is split with tail='shift'"):
        tex.lower(s, [A, S])


def test_shift_with_an_extent_below_the_factor_is_one_tile(rng: np.random.Generator) -> None:
    A = tex.placeholder((5,), name="A")
    B = tex.compute((5,), lambda i: A[i] - 1.0, name="B")
    s = tex.create_schedule(B.op)
    s[B].split(B.op.axis[0], factor=8, tail="shift")
    assert "min(" not in str(tex.lower(s, [A, B]))
    _check(s, [A, B], [B], rng)


# -- the auto-scheduler on shapes that are not multiples of the vector -----------------------

@pytest.mark.parametrize("w", [7, 12, 13, 14])
def test_auto_conv2d_odd_widths(w: int, rng: np.random.Generator) -> None:
    X = tex.placeholder((2, 4, w, w), name="X")
    K = tex.placeholder((8, 4, 3, 3), name="K")
    Y = topi.nn.conv2d(X, K, 1, 1)
    s = tex.schedule.auto_schedule([Y])
    assert not _guards_in_vector_loops(tex.lower(s, [X, K, Y]))
    _check(s, [X, K, Y], [Y], rng)


@pytest.mark.parametrize("n", [3, 17, 100, 197])
def test_auto_matmul_odd_sizes(n: int, rng: np.random.Generator) -> None:
    m = min(n, 24)  # the rows and the reduction stay short: the columns are the point
    A = tex.placeholder((m, m), name="A")
    B = tex.placeholder((m, n), name="B")
    k = tex.reduce_axis((0, m), name="k")
    C = tex.compute((m, n), lambda i, j: tex.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = tex.schedule.auto_schedule([C])
    assert not _guards_in_vector_loops(tex.lower(s, [A, B, C]))
    _check(s, [A, B, C], [C], rng)


@pytest.mark.parametrize("n", [9, 20, 197])
def test_auto_elementwise_and_dense_gradients_odd_sizes(n: int, rng: np.random.Generator
                                                        ) -> None:
    X = tex.placeholder((5, n), name="X")
    W = tex.placeholder((11, n), name="W")
    Y = topi.nn.relu(topi.nn.dense(X, W))
    H = tex.placeholder(Y.shape, name="H")
    dX, dW = tex.differentiate(Y, [X, W], H)
    s = tex.schedule.auto_schedule([Y, dX, dW])
    assert not _guards_in_vector_loops(tex.lower(s, [X, W, H, Y, dX, dW]))
    _check(s, [X, W, H, Y, dX, dW], [Y, dX, dW], rng)


# -- the vector axis through a reshape ------------------------------------------------------

def test_statistics_through_a_reshape_are_vectorized(rng: np.random.Generator) -> None:
    """A group norm's statistic sums a reshaped input: its indices divide a flat offset
    (``(j*1024 + l*32 + m) % 32``), which on the axes' domains is the contiguous ``m``: the
    reduction is vectorized along it (rfactor into vector partial sums), not left serial."""
    x = tex.placeholder((2, 8, 4, 16), name="x")
    xr = topi.reshape(x, (2, 2, 4, 4, 16))
    m = topi.sum(xr, axis=(2, 3, 4), keepdims=True)
    s = tex.schedule.auto_schedule([m])
    text = str(tex.lower(s, [x, m]))
    assert ".rf" in text and "vectorized" in text
    _check(s, [x, m], [m], rng)


@pytest.mark.parametrize("n", [197, 1000, 13])
def test_reduction_remainders_are_narrower_vectors(n: int, rng: np.random.Generator) -> None:
    """A row reduction split by the vector width keeps a remainder (no shift: the overlap
    would be summed twice): the peeled last chunk runs as a narrower vector loop over just
    its points, not a full vector blending under the split's guard."""
    A = tex.placeholder((6, n), name="A")
    S = topi.nn.softmax(A)
    s = tex.schedule.auto_schedule([S])
    func = tex.lower(s, [A, S])
    for st in walk_stmts(func.body):
        if isinstance(st, For) and st.kind is ForKind.VECTORIZED:
            assert f"< {n})" not in str(st) and f"< {n}," not in str(st), str(st)
    _check(s, [A, S], [S], rng)


def test_vector_loop_guard_on_two_variables_keeps_its_iterations(rng: np.random.Generator
                                                                 ) -> None:
    """A guarded update in a vectorized loop whose condition also holds another loop's
    variable: the loop shrinks to where the condition can hold for some value of it (j < 6
    here), and keeps the condition where it may still fail."""
    A = tex.placeholder((8, 8), name="A")
    k = tex.reduce_axis((0, 8), name="k")
    C = tex.compute((8,), lambda j: tex.sum(A[k, j], axis=k, where=tex.all(k + j > 2, k + j < 6)),
                    name="C")
    s = tex.create_schedule(C.op)
    s[C].reorder(k, C.op.axis[0])
    s[C].vectorize(C.op.axis[0])
    text = str(tex.lower(s, [A, C]))
    assert "vectorized for (j, 0, 6)" in text and "select(" in text
    _check(s, [A, C], [C], rng)


# -- relayout: transposed copies where no axis is contiguous --------------------------------

def _conv_gradient(xshape: tuple[int, ...], kshape: tuple[int, ...], wrt: str
                   ) -> tuple[tex.Tensor, tex.Tensor, tex.Tensor, tex.Tensor]:
    """(X, K, head, the gradient of a padded 3x3 convolution w.r.t. ``wrt``)."""
    X = tex.placeholder(xshape, name="X")
    K = tex.placeholder(kshape, name="K")
    Y = topi.nn.conv2d(X, K, 1, 1)
    H = tex.placeholder(Y.shape, name="H")
    (grad,) = tex.differentiate(Y, [X if wrt == "X" else K], H)
    return X, K, H, grad


@pytest.mark.parametrize("size", [5, 10])
def test_weight_gradient_on_a_small_image_is_computed_transposed(size: int,
                                                                 rng: np.random.Generator
                                                                 ) -> None:
    """dW of a 3x3 convolution over small images: no axis to vectorize in place (the
    kernel's 3, the image's 5, channels 25 floats apart), or rows too short for full vector
    partial sums (10); it is computed with an output-channel axis innermost over a
    transposed copy, then copied back (``schedule.relayout``)."""
    X, K, H, dK = _conv_gradient((2, 32, size, size), (32, 32, 3, 3), "K")
    s = tex.schedule.auto_schedule([dK])
    func = tex.lower(s, [X, H, dK])
    text = str(func)
    assert ".T[" in text and "vectorized" in text
    _check(s, [X, H, dK], [dK], rng)


def test_data_gradient_reads_a_transposed_kernel(rng: np.random.Generator) -> None:
    """dX of a 96-channel convolution blocks over input channels, which the kernel holds in
    its second dimension: a row of the tile steps over whole output-channel planes; the
    kernel is read from a copy with that dimension first."""
    X, K, H, dX = _conv_gradient((1, 96, 6, 6), (96, 96, 3, 3), "X")
    s = tex.schedule.auto_schedule([dX])
    assert "K.T[" in str(tex.lower(s, [K, H, dX]))
    _check(s, [K, H, dX], [dX], rng)
