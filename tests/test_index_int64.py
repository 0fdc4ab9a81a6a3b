"""Index arithmetic past 2**31 elements is done in int64 (issue 20, item 4).

The tensors are int8 with a little over 2**31 elements, made with ``np.zeros`` (calloc:
only the pages a test writes or the kernel reads are touched), read at a few points."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.lower.stmt import For, Store, walk_stmts
from tex.testing import OutOfBoundsError

from loop_interp import _Machine

ROWS, COLS = 2**16, 2**15 + 16  # 2**31 + 2**20 elements
LAST = ROWS * COLS - 1


@pytest.fixture(scope="module")
def huge() -> tuple[tex.Tensor, np.ndarray]:
    X = tex.placeholder((ROWS, COLS), "int8", name="X")
    x = np.zeros((ROWS, COLS), np.int8)
    x[-1, -4:] = [1, 2, 3, 4]
    x[0, :4] = [5, 6, 7, 8]
    x[40000, 123] = 9
    return X, x


def test_reshape_reads_past_2_31(huge: tuple[tex.Tensor, np.ndarray]) -> None:
    X, x = huge
    R = topi.reshape(X, (COLS, ROWS))
    C = tex.compute((4,), lambda i: R[COLS - 1, i + ROWS - 4], name="C")
    f = tex.build(C)
    out = np.zeros(4, np.int8)
    f(x, out)
    np.testing.assert_array_equal(out, [1, 2, 3, 4])


def test_direct_read_past_2_31(huge: tuple[tex.Tensor, np.ndarray]) -> None:
    X, x = huge
    C = tex.compute((2, 4), lambda i, j: X[i * (ROWS - 1), j + i * (COLS - 4)], name="C")
    f = tex.build(C)
    out = np.zeros((2, 4), np.int8)
    f(x, out)
    np.testing.assert_array_equal(out, [[5, 6, 7, 8], [1, 2, 3, 4]])


def test_flatten_reads_past_2_31(huge: tuple[tex.Tensor, np.ndarray]) -> None:
    X, x = huge
    X3 = topi.reshape(X, (2, ROWS // 2, COLS))
    F = topi.nn.flatten(X3)  # (2, 2**30 + 2**19): row 1 starts past 2**31 - 1 elements
    n = F.shape[1]
    C = tex.compute((4,), lambda i: F[1, n - 4 + i], name="C")
    f = tex.build(C)
    out = np.zeros(4, np.int8)
    f(x, out)
    np.testing.assert_array_equal(out, [1, 2, 3, 4])


@pytest.mark.parametrize("mode", ["clip", "wrap"])
def test_flat_take_past_2_31(huge: tuple[tex.Tensor, np.ndarray], mode: str) -> None:
    X, x = huge
    I = tex.placeholder((3,), "int64", name="I")
    f = tex.build(topi.take(X, I, mode=mode))
    ix = np.array([LAST, 40000 * COLS + 123, 2], np.int64)
    out = np.zeros(3, np.int8)
    f(x, ix, out)
    np.testing.assert_array_equal(out, [4, 9, 7])


@pytest.mark.parametrize("dtype", ["int32", "int8"])
@pytest.mark.parametrize("mode,ix,want", [("clip", [40000 * COLS + 123, 2, -5], [9, 7, 5]),
                                          ("wrap", [-1, 40000 * COLS + 123, 2], [4, 9, 7])])
def test_flat_take_with_narrow_indices_past_2_31(huge: tuple[tex.Tensor, np.ndarray],
                                                 dtype: str, mode: str, ix: list[int],
                                                 want: list[int]) -> None:
    """Clipping or wrapping an int32 (or narrower) index into [0, n) with n past 2**31 - 1
    refused to build ('constant ... does not fit in int32'): the index is widened to int64
    first. -1 wraps to the last element."""
    X, x = huge
    if dtype == "int8":
        ix, want = [v for v in ix if -128 <= v < 128], [w for v, w in zip(ix, want)
                                                          if -128 <= v < 128]
    I = tex.placeholder((len(ix),), dtype, name="I")
    f = tex.build(topi.take(X, I, mode=mode))
    out = np.zeros(len(ix), np.int8)
    f(x, np.array(ix, dtype), out)
    np.testing.assert_array_equal(out, want)


def test_data_index_into_huge_tensor_is_checked(huge: tuple[tex.Tensor, np.ndarray]) -> None:
    X, x = huge
    I = tex.placeholder((2,), "int64", name="I")
    C = tex.compute((2,), lambda i: X[ROWS - 1, I[i]], name="C")
    f = tex.build(C)
    out = np.zeros(2, np.int8)
    f(x, np.array([COLS - 1, COLS - 4], np.int64), out)
    np.testing.assert_array_equal(out, [4, 1])
    with pytest.raises(OutOfBoundsError, match=rf"index {2**40} in dimension 1 of 'X'"):
        f(x, np.array([2**40, 0], np.int64), out)


@pytest.mark.parametrize("factor", [None, 3])
def test_fused_and_split_loops_count_in_int64(factor: int | None) -> None:
    """A fused loop over 2**32 points (split with a remainder, or not): the flat index of
    its last points is right (evaluated, not run: 2**32 iterations)."""
    A = tex.placeholder((2**16, 2**16), "int8", name="A")
    C = tex.compute((2**16, 2**16), lambda i, j: A[i, j] + 1, name="C")
    s = tex.create_schedule(C.op)
    fused = s[C].fuse(*C.op.axis)
    if factor:
        s[C].split(fused, factor=factor)
    func = tex.lower(s, [A, C])
    loops = [st for st in walk_stmts(func.body) if isinstance(st, For)]
    (store,) = [st for st in walk_stmts(func.body) if isinstance(st, Store)]
    m = _Machine()
    for point in (2**32 - 1, 2**31 + 5, 7):
        if factor:
            outer, inner = loops
            assert int(outer.extent.value) == -(-2**32 // factor)
            m.env[outer.var] = outer.var.dtype.numpy.type(point // factor)
            m.env[inner.var] = inner.var.dtype.numpy.type(point % factor)
        else:
            (loop,) = loops
            assert loop.var.dtype.name == "int64" and int(loop.extent.value) == 2**32
            m.env[loop.var] = np.int64(point)
        assert int(m.ev(store.index)) == point
