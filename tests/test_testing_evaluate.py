"""tex.testing.evaluate, the NumPy reference interpreter, checked against plain NumPy."""
from __future__ import annotations

import importlib
import math
import time

import numpy as np
import pytest

import tex
from tex.testing import OutOfBoundsError, evaluate

# the module (tex.testing.evaluate as an attribute is the function)
evaluate_module = importlib.import_module("tex.testing.interpreter")


def rng(seed: int = 0) -> np.random.Generator:
    return np.random.default_rng(seed)


def uniform(shape: tuple[int, ...], lo: float = -1.0, hi: float = 1.0, seed: int = 0,
            dtype: type = np.float32) -> np.ndarray:
    return rng(seed).uniform(lo, hi, size=shape).astype(dtype)


# --------------------------------------------------------------------------------------
# elementwise and dense
# --------------------------------------------------------------------------------------

def test_dense_layer() -> None:
    X = tex.placeholder((8, 20), name="X")
    W = tex.placeholder((5, 20), name="W")
    B = tex.placeholder((5,), name="B")
    k = tex.reduce_axis((0, 20), name="k")
    T = tex.compute((8, 5), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    Y = tex.compute((8, 5), lambda i, j: tex.max(T[i, j] + B[j], 0.0), name="Y")
    x, w, b = uniform((8, 20), seed=1), uniform((5, 20), seed=2), uniform((5,), seed=3)
    y = evaluate(Y, {X: x, W: w, B: b})
    expected = np.maximum(x.astype(np.float64) @ w.T.astype(np.float64) + b, 0.0)
    assert y.dtype == np.float32 and y.shape == (8, 5)
    np.testing.assert_allclose(y, expected, rtol=1e-5, atol=1e-6)


def _erf(x: np.ndarray) -> np.ndarray:
    return np.array([math.erf(v) for v in x.astype(np.float64).ravel()]).reshape(x.shape)


INTRINSICS = [
    ("exp", tex.exp, np.exp, (-3, 3)),
    ("log", tex.log, np.log, (0.1, 5)),
    ("log2", tex.log2, np.log2, (0.1, 5)),
    ("log10", tex.log10, np.log10, (0.1, 5)),
    ("sqrt", tex.sqrt, np.sqrt, (0, 5)),
    ("rsqrt", tex.rsqrt, lambda x: 1 / np.sqrt(x), (0.1, 5)),
    ("sin", tex.sin, np.sin, (-4, 4)),
    ("cos", tex.cos, np.cos, (-4, 4)),
    ("tan", tex.tan, np.tan, (-1.2, 1.2)),
    ("tanh", tex.tanh, np.tanh, (-4, 4)),
    ("sigmoid", tex.sigmoid, lambda x: 1 / (1 + np.exp(-x)), (-30, 30)),
    ("erf", tex.erf, _erf, (-3, 3)),
    ("abs", tex.abs, np.abs, (-3, 3)),
    ("floor", tex.floor, np.floor, (-3, 3)),
    ("ceil", tex.ceil, np.ceil, (-3, 3)),
    ("trunc", tex.trunc, np.trunc, (-3, 3)),
    ("neg", lambda x: -x, np.negative, (-3, 3)),
]


@pytest.mark.parametrize("name,fn,ref,domain", INTRINSICS, ids=[c[0] for c in INTRINSICS])
def test_intrinsics_match_numpy(name: str, fn, ref, domain: tuple[float, float]) -> None:
    A = tex.placeholder((6, 7), name="A")
    T = tex.compute((6, 7), lambda i, j: fn(A[i, j]), name=name)
    a = uniform((6, 7), *domain, seed=4)
    out = evaluate(T, {A: a})
    assert out.dtype == np.float32
    np.testing.assert_allclose(out, ref(a.astype(np.float64)), rtol=2e-6, atol=1e-6)


def test_round_is_half_to_even_and_power() -> None:
    A = tex.placeholder((8,), name="A")
    B = tex.placeholder((8,), name="B")
    R = tex.compute((8,), lambda i: tex.round(A[i]), name="R")
    P = tex.compute((8,), lambda i: tex.power(tex.abs(A[i]), B[i]), name="P")
    a = np.array([-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 0.4, -3.6], np.float32)
    b = np.array([0.5, 2.0, 3.0, -1.0, 1.5, 0.0, 2.0, 1.0], np.float32)
    r, p = evaluate([R, P], {A: a, B: b})
    np.testing.assert_array_equal(r, [-2, -2, -0, 0, 2, 2, 0, -4])
    np.testing.assert_allclose(p, np.power(np.abs(a), b), rtol=1e-6)


def test_multi_output_compute() -> None:
    A = tex.placeholder((3, 4), name="A")
    B = tex.placeholder((4,), name="B")
    P, Q = tex.compute((3, 4), lambda i, j: (A[i, j] + 1.0, A[i, j] * B[j]), name="PQ")
    a, b = uniform((3, 4), seed=5), uniform((4,), seed=6)
    q, p = evaluate([Q, P], {A: a, B: b})
    np.testing.assert_allclose(p, a + 1, rtol=1e-6)
    np.testing.assert_allclose(q, a * b, rtol=1e-6)
    # an output of a multi-output op consumed by another compute
    S = tex.compute((3,), lambda i: P[i, 0] + Q[i, 3], name="S")
    np.testing.assert_allclose(evaluate(S, {A: a, B: b}), a[:, 0] + 1 + a[:, 3] * b[3],
                               rtol=1e-6)


def test_transposed_read_and_fresh_results() -> None:
    A = tex.placeholder((3, 5), name="A")
    T = tex.compute((5, 3), lambda j, i: A[i, j], name="T")
    C = tex.compute((3, 5), lambda i, j: A[i, j], name="C")
    a = uniform((3, 5), seed=7)
    t, c = evaluate([T, C], {A: a})
    np.testing.assert_array_equal(t, a.T)
    assert t.flags.c_contiguous and t.flags.writeable
    c[0, 0] = 42.0  # results never alias the feed
    assert a[0, 0] != 42.0


# --------------------------------------------------------------------------------------
# reductions
# --------------------------------------------------------------------------------------

NEUTRAL = {"sum": 0.0, "prod": 1.0, "max": -np.inf, "min": np.inf}
NP_REDUCE = {"sum": np.sum, "prod": np.prod, "max": np.max, "min": np.min}
NP_COMBINE = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}


@pytest.mark.parametrize("name", ["sum", "prod", "max", "min"])
@pytest.mark.parametrize("use_where", [False, True])
@pytest.mark.parametrize("init", [None, "const", "tensor"])
def test_builtin_reducers_where_init(name: str, use_where: bool, init: str | None) -> None:
    reducer = getattr(tex, name)
    A = tex.placeholder((5, 7), name="A")
    B = tex.placeholder((5,), name="B")
    k = tex.reduce_axis((0, 7), name="k")
    init_expr = {None: lambda i: None, "const": lambda i: 0.75, "tensor": lambda i: B[i]}[init]

    def body(i):
        where = (A[i, k] > 0.9) if use_where else None
        return reducer(A[i, k], axis=k, where=where, init=init_expr(i))

    T = tex.compute((5,), body, name="T")
    a = uniform((5, 7), 0.5, 1.5, seed=8)
    a[2] = 0.6  # row 2 fails the where everywhere: the result is the identity (or init)
    b = uniform((5,), 0.5, 1.5, seed=9)
    out = evaluate(T, {A: a, B: b})
    values = a.astype(np.float64)
    if use_where:
        values = np.where(a > 0.9, values, NEUTRAL[name])
    expected = NP_REDUCE[name](values, axis=1)
    if init == "const":
        expected = NP_COMBINE[name](0.75, expected)
    elif init == "tensor":
        expected = NP_COMBINE[name](b.astype(np.float64), expected)
    np.testing.assert_allclose(out, expected, rtol=1e-5)
    if use_where and init is None:
        assert out[2] == NEUTRAL[name]


def test_reduction_over_several_axes_with_offset_domains() -> None:
    A = tex.placeholder((4, 6, 5), name="A")
    r = tex.reduce_axis((2, 6), name="r")
    s = tex.reduce_axis((1, 4), name="s")
    T = tex.compute((4,), lambda i: tex.sum(A[i, r, s], axis=[r, s]), name="T")
    M = tex.compute((4,), lambda i: tex.max(A[i, r, s] * s.var.astype("float32"), axis=[r, s]),
                    name="M")
    a = uniform((4, 6, 5), seed=10)
    t, m = evaluate([T, M], {A: a})
    np.testing.assert_allclose(t, a[:, 2:6, 1:4].sum(axis=(1, 2)), rtol=1e-5)
    np.testing.assert_allclose(m, (a[:, 2:6, 1:4] * np.arange(1, 4)).max(axis=(1, 2)),
                               rtol=1e-6)


def test_reduction_source_independent_of_reduce_axis() -> None:
    A = tex.placeholder((3,), name="A")
    k = tex.reduce_axis((0, 9), name="k")
    T = tex.compute((3,), lambda i: tex.sum(A[i], axis=k), name="T")
    C = tex.compute((3,), lambda i: tex.sum(tex.const(2, "int32"), axis=k), name="C")
    a = uniform((3,), seed=11)
    t, c = evaluate([T, C], {A: a})
    np.testing.assert_allclose(t, 9 * a, rtol=1e-6)
    np.testing.assert_array_equal(c, [18, 18, 18])
    assert c.dtype == np.int32


def test_integer_sum_accumulates_in_its_dtype() -> None:
    A = tex.placeholder((2, 3), dtype="int8", name="A")
    k = tex.reduce_axis((0, 3), name="k")
    T = tex.compute((2,), lambda i: tex.sum(A[i, k], axis=k), name="T")
    M = tex.compute((2,), lambda i: tex.max(A[i, k], axis=k, where=A[i, k] > 120), name="M")
    a = np.array([[100, 100, 100], [-100, -100, 5]], np.int8)
    t, m = evaluate([T, M], {A: a})
    assert t.dtype == np.int8
    np.testing.assert_array_equal(t, [44, 61])  # 300 and -195 wrap around in int8
    np.testing.assert_array_equal(m, [-128, -128])  # all-false where: the identity


def _argmax_reducer():
    def fcombine(x, y):
        keep = x[1] >= y[1]  # ties keep the accumulator: the first index wins
        return tex.select(keep, x[0], y[0]), tex.select(keep, x[1], y[1])

    def fidentity(t0, t1):
        return tex.const(-1, t0), tex.min_value(t1)

    return tex.comm_reducer(fcombine, fidentity, name="argmax")


@pytest.mark.parametrize("dtype", ["int32", "float32"])
def test_argmax_tuple_reducer_first_index_on_ties(dtype: str) -> None:
    argmax = _argmax_reducer()
    A = tex.placeholder((6, 9), dtype=dtype, name="A")
    k = tex.reduce_axis((0, 9), name="k")
    idx, val = tex.compute((6,), lambda i: argmax((k.var, A[i, k]), axis=k), name="am")
    a = rng(12).integers(-3, 3, size=(6, 9)).astype(dtype)  # many ties
    got_idx, got_val = evaluate([idx, val], {A: a})
    assert got_idx.dtype == np.int32 and got_val.dtype == np.dtype(dtype)
    np.testing.assert_array_equal(got_idx, np.argmax(a, axis=1))  # np.argmax: first index
    np.testing.assert_array_equal(got_val, a.max(axis=1))


def test_argmax_with_where_and_empty_rows() -> None:
    argmax = _argmax_reducer()
    A = tex.placeholder((4, 8), name="A")
    k = tex.reduce_axis((0, 8), name="k")
    idx, val = tex.compute((4,), lambda i: argmax((k.var, A[i, k]), axis=k,
                                                  where=A[i, k] < 0.5), name="am")
    a = uniform((4, 8), seed=13)
    a[1] = 0.9  # no point passes the where: the identity (-1, lowest float32)
    got_idx, got_val = evaluate([idx, val], {A: a})
    masked = np.where(a < 0.5, a, -np.inf)
    for row in (0, 2, 3):
        assert got_idx[row] == np.argmax(masked[row])
        assert got_val[row] == masked[row].max()
    assert got_idx[1] == -1 and got_val[1] == np.finfo(np.float32).min


def test_generic_reducer_with_where_init_and_small_chunks(monkeypatch) -> None:
    # x (+) y = x*y + x + y  is  (1+x)(1+y) - 1: folds to prod(1 + a) - 1 from identity 0
    combine = tex.comm_reducer(lambda x, y: x * y + x + y,
                               lambda t: tex.const(0, t), name="oplus")
    A = tex.placeholder((3, 4, 5), dtype="float64", name="A")
    r = tex.reduce_axis((0, 4), name="r")
    s = tex.reduce_axis((1, 5), name="s")
    T = tex.compute((3,), lambda i: combine(A[i, r, s], axis=[r, s],
                                            where=A[i, r, s] > 0.0, init=0.5), name="T")
    a = uniform((3, 4, 5), seed=14, dtype=np.float64)
    values = np.where(a > 0, a, 0.0)[:, :, 1:5]
    expected = 1.5 * np.prod(1 + values, axis=(1, 2)) - 1
    np.testing.assert_allclose(evaluate(T, {A: a}), expected, rtol=1e-12)
    monkeypatch.setattr(evaluate_module, "MAX_TEMP_ELEMENTS", 7)  # 2 reduce points/chunk
    np.testing.assert_allclose(evaluate(T, {A: a}), expected, rtol=1e-12)


def test_chunked_builtin_reduction_matches(monkeypatch) -> None:
    A = tex.placeholder((5, 6, 7), name="A")
    r = tex.reduce_axis((0, 6), name="r")
    s = tex.reduce_axis((0, 7), name="s")
    T = tex.compute((5,), lambda i: tex.sum(A[i, r, s], axis=[r, s], where=r != s), name="T")
    a = uniform((5, 6, 7), seed=15)
    mask = np.arange(6)[:, None] != np.arange(7)[None, :]
    expected = (a.astype(np.float64) * mask).sum(axis=(1, 2))
    monkeypatch.setattr(evaluate_module, "MAX_TEMP_ELEMENTS", 12)
    np.testing.assert_allclose(evaluate(T, {A: a}), expected, rtol=1e-5)


# --------------------------------------------------------------------------------------
# integer arithmetic, casts, dtypes
# --------------------------------------------------------------------------------------

def test_integer_division_with_negatives() -> None:
    A = tex.placeholder((12,), dtype="int32", name="A")
    B = tex.placeholder((12,), dtype="int32", name="B")
    ops = {
        "floordiv": lambda i: A[i] // B[i],
        "floormod": lambda i: A[i] % B[i],
        "truncdiv": lambda i: tex.truncdiv(A[i], B[i]),
        "slash": lambda i: A[i] / B[i],
        "tfloordiv": lambda i: tex.floordiv(A[i], 3),
        "tfloormod": lambda i: tex.floormod(A[i], -3),
    }
    tensors = [tex.compute((12,), fn, name=name) for name, fn in ops.items()]
    a = np.array([-7, -7, 7, 7, -1, 0, 5, -6, 6, -9, 13, -13], np.int32)
    b = np.array([2, -2, 2, -2, 3, 4, -5, 4, -4, 3, -4, 4], np.int32)
    fd, fm, td, sl, c_fd, c_fm = evaluate(tensors, {A: a, B: b})
    trunc = (np.sign(a) * np.sign(b) * (np.abs(a) // np.abs(b))).astype(np.int32)
    np.testing.assert_array_equal(fd, np.floor_divide(a, b))
    np.testing.assert_array_equal(fm, np.mod(a, b))
    np.testing.assert_array_equal(td, trunc)
    np.testing.assert_array_equal(sl, trunc)
    np.testing.assert_array_equal(c_fd, np.floor_divide(a, 3))
    np.testing.assert_array_equal(c_fm, np.mod(a, -3))
    assert all(t.dtype == np.int32 for t in (fd, fm, td, sl, c_fd, c_fm))


def test_casts() -> None:
    A = tex.placeholder((6,), name="A")
    a = np.array([-2.7, -0.5, 0.0, 0.5, 2.7, 100.25], np.float32)
    to_int = tex.compute((6,), lambda i: A[i].astype("int32"), name="to_int")
    to_bool = tex.compute((6,), lambda i: A[i].astype("bool"), name="to_bool")
    bool_int = tex.compute((6,), lambda i: (A[i] > 0.0).astype("int32"), name="bool_int")
    to_half = tex.compute((6,), lambda i: A[i].astype("float16"), name="to_half")
    to_u8 = tex.compute((6,), lambda i: tex.abs(A[i]).astype("uint8"), name="to_u8")
    i2f = tex.compute((6,), lambda i: (A[i].astype("int32") * 3).astype("float64") / 2.0,
                      name="i2f")
    outs = evaluate([to_int, to_bool, bool_int, to_half, to_u8, i2f], {A: a})
    np.testing.assert_array_equal(outs[0], [-2, 0, 0, 0, 2, 100])  # truncation toward zero
    np.testing.assert_array_equal(outs[1], a != 0)
    np.testing.assert_array_equal(outs[2], [0, 0, 0, 1, 1, 1])
    np.testing.assert_array_equal(outs[3], a.astype(np.float16))
    np.testing.assert_array_equal(outs[4], [2, 0, 0, 0, 2, 100])
    np.testing.assert_array_equal(outs[5], np.trunc(a).astype(np.int32) * 3 / 2.0)
    expected_dtypes = [np.int32, np.bool_, np.int32, np.float16, np.uint8, np.float64]
    assert [o.dtype for o in outs] == [np.dtype(d) for d in expected_dtypes]


def test_small_dtypes_bool_logic_and_wraparound() -> None:
    U = tex.placeholder((4,), dtype="uint8", name="U")
    H = tex.placeholder((4,), dtype="float16", name="H")
    M = tex.placeholder((4,), dtype="bool", name="M")
    wrap = tex.compute((4,), lambda i: U[i] + U[i], name="wrap")
    half = tex.compute((4,), lambda i: H[i] * H[i] + 1.0, name="half")
    logic = tex.compute((4,), lambda i: tex.all(M[i], U[i] > 100) | ~M[i], name="logic")
    u = np.array([1, 100, 200, 255], np.uint8)
    h = np.array([0.5, 1.5, -2.0, 3.0], np.float16)
    m = np.array([True, True, False, True])
    w, hh, lg = evaluate([wrap, half, logic], {U: u, H: h, M: m})
    np.testing.assert_array_equal(w, (u.astype(np.int64) * 2 % 256).astype(np.uint8))
    assert hh.dtype == np.float16
    np.testing.assert_array_equal(hh, h * h + np.float16(1))
    np.testing.assert_array_equal(lg, (m & (u > 100)) | ~m)


def test_zero_dim_tensors() -> None:
    S = tex.placeholder((), name="S")
    A = tex.placeholder((3, 4), name="A")
    r = tex.reduce_axis((0, 3), name="r")
    c = tex.reduce_axis((0, 4), name="c")
    T = tex.compute((), lambda: tex.sum(A[r, c] * S[()], axis=[r, c]), name="T")
    U = tex.compute((2,), lambda i: T[()] + i.astype("float32"), name="U")
    a, s = uniform((3, 4), seed=16), np.array(2.5, np.float32)
    t, u = evaluate([T, U], {A: a, S: s})
    assert t.shape == () and t.dtype == np.float32
    np.testing.assert_allclose(t, 2.5 * a.astype(np.float64).sum(), rtol=1e-5)
    np.testing.assert_allclose(u, [t, t + 1], rtol=1e-6)
    np.testing.assert_array_equal(evaluate(S, {S: s}), s)


# --------------------------------------------------------------------------------------
# guarded reads and bounds
# --------------------------------------------------------------------------------------

def test_padding_select_reads_out_of_bounds_only_where_guarded() -> None:
    n = 5
    A = tex.placeholder((n, n), name="A")
    P = tex.compute((n + 2, n + 3), lambda i, j: tex.if_then_else(
        tex.all(i >= 1, i <= n, j >= 2, j <= n + 1), A[i - 1, j - 2], -1.0), name="P")
    a = uniform((n, n), seed=17)
    expected = np.pad(a, ((1, 1), (2, 1)), constant_values=-1.0)
    np.testing.assert_array_equal(evaluate(P, {A: a}), expected)


def test_nested_guards_deep_select_chain() -> None:
    # T[i] = select(i == K-1, A[i - (K-1)], select(i == K-2, A[i - (K-2)], ...)): every
    # branch but the selected one reads out of bounds
    K = 300
    A = tex.placeholder((1,), name="A")

    def body(i):
        e = tex.const(0.0, "float32")
        for j in range(K):
            e = tex.if_then_else(i == j, A[i - j] * float(j), e)
        return e

    T = tex.compute((K,), body, name="T")
    out = evaluate(T, {A: np.array([2.0], np.float32)})
    np.testing.assert_array_equal(out, 2.0 * np.arange(K))


def test_reduction_where_guards_reads() -> None:
    n = 7
    A = tex.placeholder((n,), name="A")
    k = tex.reduce_axis((0, 3), name="k")
    # 1-D convolution with implicit zero padding: the read is guarded by where=
    T = tex.compute((n,), lambda i: tex.sum(A[i + k - 1], axis=k,
                                             where=tex.all(i + k >= 1, i + k <= n)), name="T")
    a = uniform((n,), seed=18)
    p = np.pad(a.astype(np.float64), 1)
    np.testing.assert_allclose(evaluate(T, {A: a}), p[:-2] + p[1:-1] + p[2:], rtol=1e-6)


def test_out_of_bounds_read_is_an_error() -> None:
    A = tex.placeholder((5,), name="A")
    B = tex.compute((5,), lambda i: A[i + 1], name="B")
    with pytest.raises(OutOfBoundsError) as info:
        evaluate(B, {A: np.zeros(5, np.float32)})
    message = str(info.value)
    for part in ("'B'", "'A'", "dimension 0", "index 5", "i=4"):
        assert part in message
    assert isinstance(info.value, IndexError) and isinstance(info.value, ValueError)


def test_out_of_bounds_in_reduction_and_unguarded_branch() -> None:
    A = tex.placeholder((4, 3), name="A")
    k = tex.reduce_axis((0, 3), name="k")
    S = tex.compute((4,), lambda i: tex.sum(A[i, k + 1], axis=k), name="S")
    with pytest.raises(OutOfBoundsError, match=r"dimension 1.*'A'|'A'.*dimension 1") as info:
        evaluate(S, {A: np.zeros((4, 3), np.float32)})
    assert "k=2" in str(info.value) and "index 3" in str(info.value)
    # the guard protects the other branch: i = 3 selects the read A[4, 0]
    G = tex.compute((4,), lambda i: tex.if_then_else(i >= 1, A[i + 1, 0], 0.0), name="G")
    with pytest.raises(OutOfBoundsError, match="i=3"):
        evaluate(G, {A: np.zeros((4, 3), np.float32)})
    # a negative index
    N = tex.compute((4,), lambda i: A[i - 1, 0], name="N")
    with pytest.raises(IndexError, match="index -1"):
        evaluate(N, {A: np.zeros((4, 3), np.float32)})


def test_data_dependent_gather_with_guard() -> None:
    A = tex.placeholder((5, 3), name="A")
    Ix = tex.placeholder((6,), dtype="int8", name="Ix")
    a, idx = uniform((5, 3), seed=26), np.array([4, -1, 0, 7, 2, -128], np.int8)
    valid = (idx >= 0) & (idx < 5)
    G = tex.compute((6, 3), lambda i, j: tex.if_then_else(
        tex.all(Ix[i] >= 0, Ix[i] < 5), A[Ix[i].astype("int32"), j], 0.0), name="G")
    np.testing.assert_array_equal(evaluate(G, {A: a, Ix: idx}),
                                  np.where(valid[:, None], a[np.clip(idx, 0, 4)], 0.0))
    U = tex.compute((6, 3), lambda i, j: A[Ix[i], j], name="U")
    with pytest.raises(OutOfBoundsError, match=r"at i=1, j=0: index -1 in dimension 0"):
        evaluate(U, {A: a, Ix: idx})


def test_branch_selected_nowhere_is_not_evaluated() -> None:
    A = tex.placeholder((4,), name="A")
    T = tex.compute((4,), lambda i: tex.if_then_else(i > 10, A[i + 50], A[i]), name="T")
    a = uniform((4,), seed=27)
    np.testing.assert_array_equal(evaluate(T, {A: a}), a)


# --------------------------------------------------------------------------------------
# convolution
# --------------------------------------------------------------------------------------

def _conv2d_padded(shape: tuple[int, int, int, int], kshape: tuple[int, int, int, int],
                   pad: int, stride: int):
    n, c, h, w = shape
    co, _, kh, kw = kshape
    data = tex.placeholder(shape, name="data")
    kernel = tex.placeholder(kshape, name="kernel")
    padded = tex.compute((n, c, h + 2 * pad, w + 2 * pad), lambda b, ci, y, x: tex.select(
        tex.all(y >= pad, y < h + pad, x >= pad, x < w + pad),
        data[b, ci, y - pad, x - pad], 0.0), name="pad")
    rc = tex.reduce_axis((0, c), name="rc")
    ry = tex.reduce_axis((0, kh), name="ry")
    rx = tex.reduce_axis((0, kw), name="rx")
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1
    out = tex.compute((n, co, oh, ow), lambda b, f, y, x: tex.sum(
        padded[b, rc, y * stride + ry, x * stride + rx] * kernel[f, rc, ry, rx],
        axis=[rc, ry, rx]), name="conv")
    return data, kernel, out


def _conv2d_select(shape, kshape, pad: int, stride: int):
    """The same convolution with the padding as a guard inside the reduction."""
    n, c, h, w = shape
    co, _, kh, kw = kshape
    data = tex.placeholder(shape, name="data")
    kernel = tex.placeholder(kshape, name="kernel")
    rc = tex.reduce_axis((0, c), name="rc")
    ry = tex.reduce_axis((0, kh), name="ry")
    rx = tex.reduce_axis((0, kw), name="rx")
    oh = (h + 2 * pad - kh) // stride + 1
    ow = (w + 2 * pad - kw) // stride + 1

    def body(b, f, y, x):
        iy, ix = y * stride + ry - pad, x * stride + rx - pad
        inside = tex.all(iy >= 0, iy < h, ix >= 0, ix < w)
        return tex.sum(tex.select(inside, data[b, rc, iy, ix], 0.0) * kernel[f, rc, ry, rx],
                       axis=[rc, ry, rx])

    return data, kernel, tex.compute((n, co, oh, ow), body, name="conv")


def _conv2d_numpy(d: np.ndarray, k: np.ndarray, pad: int, stride: int) -> np.ndarray:
    d = np.pad(d.astype(np.float64), ((0, 0), (0, 0), (pad, pad), (pad, pad)))
    k = k.astype(np.float64)
    _, _, kh, kw = k.shape
    oh = (d.shape[2] - kh) // stride + 1
    ow = (d.shape[3] - kw) // stride + 1
    out = np.zeros((d.shape[0], k.shape[0], oh, ow))
    for y in range(kh):
        for x in range(kw):
            window = d[:, :, y:y + stride * oh:stride, x:x + stride * ow:stride]
            out += np.einsum("nchw,fc->nfhw", window, k[:, :, y, x])
    return out


@pytest.mark.parametrize("build", [_conv2d_padded, _conv2d_select], ids=["padded", "select"])
@pytest.mark.parametrize("stride", [1, 2])
def test_conv2d_small(build, stride: int) -> None:
    shape, kshape = (2, 3, 7, 6), (4, 3, 3, 3)
    data, kernel, out = build(shape, kshape, 1, stride)
    d, k = uniform(shape, seed=19), uniform(kshape, seed=20)
    np.testing.assert_allclose(evaluate(out, {data: d, kernel: k}),
                               _conv2d_numpy(d, k, 1, stride), rtol=1e-5, atol=1e-5)


@pytest.mark.slow
@pytest.mark.parametrize("build", [_conv2d_padded, _conv2d_select], ids=["padded", "select"])
def test_conv2d_large_is_fast(build) -> None:
    shape, kshape = (8, 32, 32, 32), (32, 32, 3, 3)
    data, kernel, out = build(shape, kshape, 1, 1)
    d, k = uniform(shape, seed=21), uniform(kshape, seed=22)
    start = time.perf_counter()
    got = evaluate(out, {data: d, kernel: k})
    elapsed = time.perf_counter() - start
    np.testing.assert_allclose(got, _conv2d_numpy(d, k, 1, 1), rtol=1e-4, atol=1e-4)
    assert elapsed < 5.0, f"conv2d took {elapsed:.2f} s"


# --------------------------------------------------------------------------------------
# arguments, feed checking, results
# --------------------------------------------------------------------------------------

@pytest.fixture
def simple():
    X = tex.placeholder((2, 3), name="X")
    Y = tex.compute((2, 3), lambda i, j: X[i, j] * 2.0, name="Y")
    return X, Y


def test_missing_placeholder(simple) -> None:
    _, Y = simple
    with pytest.raises(ValueError, match="'X'"):
        evaluate(Y, {})


def test_wrong_shape(simple) -> None:
    X, Y = simple
    with pytest.raises(ValueError, match=r"'X'.*\(2, 3\).*\(3, 2\)"):
        evaluate(Y, {X: np.zeros((3, 2), np.float32)})


def test_wrong_dtype(simple) -> None:
    X, Y = simple
    with pytest.raises(ValueError, match=r"'X'.*float32.*float64.*astype\(np\.float32\)"):
        evaluate(Y, {X: np.zeros((2, 3))})


def test_bad_arguments(simple) -> None:
    X, Y = simple
    x = np.zeros((2, 3), np.float32)
    with pytest.raises(TypeError, match="'X'"):
        evaluate(Y, {X: x.tolist()})
    with pytest.raises(TypeError, match="feed keys"):
        evaluate(Y, {X: x, 3: x})
    with pytest.raises(TypeError, match="Tensor"):
        evaluate("Y", {X: x})
    with pytest.raises(TypeError, match=r"tensors\[1\]"):
        evaluate([Y, X[0]], {X: x})
    with pytest.raises(TypeError, match="mapping"):
        evaluate(Y, [(X, x)])
    with pytest.raises(TypeError, match="'Y'.*computed"):
        evaluate(Y, {X: x, Y: x})


def test_feed_by_name(simple) -> None:
    X, Y = simple
    x = uniform((2, 3), seed=23)
    np.testing.assert_array_equal(evaluate(Y, {"X": x}), 2 * x)
    X2 = tex.placeholder((2, 3), name="X")
    Z = tex.compute((2, 3), lambda i, j: X[i, j] + X2[i, j], name="Z")
    with pytest.raises(ValueError, match="ambiguous"):
        evaluate(Z, {"X": x})
    np.testing.assert_array_equal(evaluate(Z, {X: x, X2: x}), 2 * x)


def test_feed_by_tensor_and_name(simple) -> None:
    """One rule with GradProgram.forward (tex.ir.feed): the same array under both keys is
    one feed; different arrays are an error."""
    X, Y = simple
    x = uniform((2, 3), seed=25)
    np.testing.assert_array_equal(evaluate(Y, {X: x, "X": x}), 2 * x)
    with pytest.raises(ValueError, match="'X' is fed twice, by tensor and by name"):
        evaluate(Y, {X: x, "X": x.copy()})


def test_free_variable_is_an_error() -> None:
    A = tex.placeholder((3,), name="A")
    n = tex.var("n")
    T = tex.compute((3,), lambda i: A[i] * n.astype("float32"), name="T")
    with pytest.raises(ValueError, match=r"free variable 'n'.*|'T'.*'n'"):
        evaluate(T, {A: np.zeros(3, np.float32)})


def test_single_vs_list_results_and_unused_feed(simple) -> None:
    X, Y = simple
    unused = tex.placeholder((9,), name="unused")
    x = uniform((2, 3), seed=24)
    feed = {X: x, unused: np.zeros(1, np.float64), "nothing": 3}  # unused: never checked
    single = evaluate(Y, feed)
    assert isinstance(single, np.ndarray)
    as_list = evaluate([Y], feed)
    assert isinstance(as_list, list) and len(as_list) == 1
    y, x_out, y_again = evaluate((Y, X, Y), feed)
    np.testing.assert_array_equal(y, 2 * x)
    np.testing.assert_array_equal(x_out, x)
    assert x_out is not x and y is not y_again  # copies: no aliasing between results
    np.testing.assert_array_equal(y, y_again)
    assert evaluate([], feed) == []


def test_deep_expression_does_not_recurse() -> None:
    A = tex.placeholder((4,), name="A")
    B = tex.placeholder((4,), name="B")

    def body(i):
        e = A[i]
        for _ in range(5000):
            e = e + B[i]
        return e

    T = tex.compute((4,), body, name="T")
    a, b = np.arange(4, dtype=np.float32), np.full(4, 0.5, np.float32)
    np.testing.assert_allclose(evaluate(T, {A: a, B: b}), a + 2500.0)


def test_shared_intermediates_and_long_chains() -> None:
    A = tex.placeholder((16,), name="A")

    def halve_plus_one(p: tex.Tensor, name: str) -> tex.Tensor:
        return tex.compute((16,), lambda i: p[i] * 0.5 + 1.0, name=name)

    t = A
    for step in range(60):
        t = halve_plus_one(t, f"T{step}")
    total = tex.compute((16,), lambda i: t[i] + A[i], name="total")
    a = uniform((16,), seed=25)
    expected = a.astype(np.float64)
    for _ in range(60):
        expected = expected * 0.5 + 1.0
    np.testing.assert_allclose(evaluate(total, {A: a}), expected + a, rtol=1e-6)


@pytest.mark.parametrize("guarded", [False, True])
def test_reduction_chunks_are_freed_without_the_cycle_collector(monkeypatch, guarded) -> None:
    """A reduction walks its reduce points in chunks of MAX_TEMP_ELEMENTS temporaries; each
    chunk's temporaries must be freed before the next chunk (a scope that referenced itself
    kept them all alive until the garbage collector ran: a 512^3 matmul peaked at 517 MB
    against its 64 MB budget). Measured with the cycle collector off."""
    import gc
    import tracemalloc

    from tex.testing import interpreter

    monkeypatch.setattr(interpreter, "MAX_TEMP_ELEMENTS", 1 << 16)  # 32 chunks below
    n = 128
    A = tex.placeholder((n, n), "float32", name="A")
    B = tex.placeholder((n, n), "float32", name="B")
    k = tex.reduce_axis((0, n), name="k")
    where = (k % 3 != 1) if guarded else None
    C = tex.compute((n, n), lambda i, j: tex.sum(A[i, k] * B[k, j], axis=k, where=where),
                    name="C")
    rng = np.random.default_rng(14)
    a, b = (rng.standard_normal((n, n)).astype("float32") for _ in range(2))
    feed = {A: a, B: b}
    tex.testing.evaluate(C, feed)  # warm caches outside the measurement
    gc.collect()
    gc.disable()
    tracemalloc.start()
    try:
        c = tex.testing.evaluate(C, feed)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
        gc.enable()
    keep = np.arange(n) % 3 != 1 if guarded else np.ones(n, bool)
    np.testing.assert_allclose(c, a[:, keep] @ b[keep], rtol=1e-4, atol=1e-4)
    budget = interpreter.MAX_TEMP_ELEMENTS * 4  # bytes of one float32 temporary
    assert peak < 4 * budget + 2 * c.nbytes, (peak, budget)
