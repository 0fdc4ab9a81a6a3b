"""Read bounds (issue 20, items 2 and 3): reads decided out of bounds are refused at build
time; reads through data or scalar arguments are checked when the kernel runs, and the
built function raises the same ``OutOfBoundsError`` as ``tex.testing.evaluate``."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tex
from tex import topi
from tex.codegen import CodegenOptions
from tex.runtime.jit import cache_key
from tex.testing import OutOfBoundsError, evaluate

from timing import seconds

# -- decided at build time ---------------------------------------------------------------

B4 = tex.placeholder((4,), name="B")
A44 = tex.placeholder((4, 4), name="A")


def _k8():
    return tex.reduce_axis((0, 8), name="k")


def _sum_past_end() -> tex.Tensor:
    k = _k8()
    return tex.compute((1,), lambda i: tex.sum(B4[k], axis=k), name="R")


def _inlined_past_end() -> tuple:
    T = tex.compute((4,), lambda i: B4[i + 1] * 2.0, name="T")
    C = tex.compute((4,), lambda i: T[i], name="C")
    s = tex.create_schedule(C.op)
    s[T].compute_inline()
    return s, [B4, C]


STATIC_OOB: list[tuple[str, Callable[[], tex.Tensor], str, int, str]] = [
    # (id, program, tensor, dimension, index range)
    ("shift", lambda: tex.compute((4,), lambda i: B4[i + 10], name="C"), "B", 0, "[10, 13]"),
    ("huge-stride", lambda: tex.compute((4,), lambda i: B4[i * 100000000], name="C"), "B", 0,
     "[0, 300000000]"),
    ("reduction", _sum_past_end, "B", 0, "[0, 7]"),  # auto_schedule rfactors R: named 'R'
    ("negative", lambda: tex.compute((4,), lambda i: B4[i - 1], name="C"), "B", 0, "[-1, 2]"),
    ("second-dim", lambda: tex.compute((4, 4), lambda i, j: A44[i, j + i], name="C"), "A", 1,
     "[0, 6]"),
]


@pytest.mark.parametrize("prog,tensor,dim,span", [c[1:] for c in STATIC_OOB],
                         ids=[c[0] for c in STATIC_OOB])
def test_static_out_of_bounds_read_is_refused(prog: Callable[[], tex.Tensor], tensor: str,
                                              dim: int, span: str) -> None:
    C = prog()
    with pytest.raises(ValueError) as info:
        tex.build(C)
    msg = str(info.value)
    assert f"'{C.name}' reads '{tensor}'" in msg and f"dimension {dim}" in msg and span in msg
    assert "valid range is [0, 3]" in msg or "valid range is [0, 3]" in msg


def test_static_out_of_bounds_read_in_an_inlined_stage_is_refused() -> None:
    s, args = _inlined_past_end()
    with pytest.raises(ValueError, match=r"'T' reads 'B' out of bounds in dimension 0"):
        tex.build(s, args)


def test_non_affine_and_guarded_static_reads_are_decided_exactly() -> None:
    """Indices without data are decided at build time by evaluating them on the domain
    where their guards hold (as evaluate would), however non-affine."""
    past = tex.compute((4,), lambda i: B4[i // 2 + 3], name="C")  # reads B[4] at i = 2, 3
    with pytest.raises(ValueError, match=r"'B' out of bounds in dimension 0: the index "
                                         r"i // 2 \+ 3 ranges over \[3, 4\]"):
        tex.build(past)
    guarded = tex.compute((4,), lambda i: tex.if_then_else(i >= 1, B4[i + 2], 0.0), name="G")
    with pytest.raises(OutOfBoundsError):
        evaluate(guarded, {B4: np.zeros(4, np.float32)})
    with pytest.raises(ValueError, match=r"ranges over \[3, 5\] where its guard holds"):
        tex.build(guarded)
    even = tex.compute((4,), lambda i: tex.if_then_else(tex.floormod(i, 2) == 0, B4[i + 1],
                                                        0.0), name="E")
    f = tex.build(even)  # i + 1 in {1, 3}: in bounds, no check left
    assert ".oob" not in f.lowered
    b, out = np.arange(4, dtype=np.float32), np.zeros(4, np.float32)
    f(b, out)
    np.testing.assert_array_equal(out, evaluate(even, {B4: b}))


def _guarded_shift() -> tex.Tensor:
    return tex.compute((4,), lambda i: tex.if_then_else(i >= 1, B4[i - 1], 0.0), name="C")


def _where_sum() -> tex.Tensor:
    k = _k8()
    return tex.compute((2,), lambda i: tex.sum(B4[k], axis=k, where=k < 4), name="C")


def _split_remainder() -> tuple:
    A = tex.placeholder((10,), name="A")
    C = tex.compute((10,), lambda i: A[i] + 1.0, name="C")
    s = tex.create_schedule(C.op)
    s[C].split(C.op.axis[0], factor=4)
    return s, [A, C]


@pytest.mark.parametrize("prog", [_guarded_shift, _where_sum], ids=["select", "where"])
def test_guarded_reads_build_without_checks(prog: Callable[[], tex.Tensor]) -> None:
    C = prog()
    f = tex.build(C)
    assert ".oob" not in f.lowered
    b = np.arange(1, 5, dtype=np.float32)
    out = np.zeros(C.shape, np.float32)
    f(b, out)
    np.testing.assert_array_equal(out, evaluate(C, {B4: b}))


def test_split_remainder_guard_is_not_a_false_refusal() -> None:
    s, (A, C) = _split_remainder()
    f = tex.build(s, [A, C])
    assert ".oob" not in f.lowered
    a = np.arange(10, dtype=np.float32)
    c = np.zeros(10, np.float32)
    f(a, c)
    np.testing.assert_array_equal(c, a + 1)


# a && b and a || b evaluate b only where a leaves the result open (compiled code branches
# or masks; the interpreters guard b): a read in b is guarded by a, or by !a
SHORT_CIRCUIT = [
    ("and", lambda i, r: tex.all(i < 4, r > 0), lambda i: i < 4),
    ("or", lambda i, r: tex.any(i >= 4, r > 0), lambda i: i >= 4),
]


@pytest.mark.parametrize("index", ["static", "data"])
@pytest.mark.parametrize("name,cond,left", SHORT_CIRCUIT, ids=[c[0] for c in SHORT_CIRCUIT])
def test_right_side_of_and_or_is_guarded_by_the_left(name: str, cond, left, index: str
                                                    ) -> None:
    """lower refused ``all(i < 4, A[i] > 0)`` over 8 points (the read was taken as
    unguarded) and evaluate raised where the left side already decided; both now agree
    with what the compiled code does, and a read out of bounds where it is evaluated is
    still reported by both."""
    A = tex.placeholder((4,), name="A")
    I = tex.placeholder((8,), "int32", name="I")

    def body(i: tex.Var) -> tex.Expr:
        read = A[I[i]] if index == "data" else A[i]
        return tex.if_then_else(cond(i, read), 1.0, 0.0)
    C = tex.compute((8,), body, name="C")
    f = tex.build(C, [A, I, C])
    a = np.array([1.0, -1.0, 2.0, -3.0], np.float32)
    decided = np.array([not left(i) if name == "and" else left(i) for i in range(8)])
    ix = np.where(decided, 10**6, np.arange(8) % 4).astype(np.int32)
    out = np.zeros(8, np.float32)
    f(a, ix, out)
    expected = np.where(decided, 0.0 if name == "and" else 1.0, a[np.arange(8) % 4] > 0)
    np.testing.assert_array_equal(out, expected)
    np.testing.assert_array_equal(evaluate(C, {A: a, I: ix}), expected)
    if index == "data":  # a bad index where the right side is evaluated
        ix[np.flatnonzero(~decided)[0]] = 7
        with pytest.raises(OutOfBoundsError, match="index 7 in dimension 0 of 'A'"):
            evaluate(C, {A: a, I: ix})
        with pytest.raises(OutOfBoundsError, match="index 7 in dimension 0 of 'A'"):
            f(a, ix, out)


def test_data_guarded_read_is_proven() -> None:
    A = tex.placeholder((4,), name="A")
    I = tex.placeholder((6,), "int32", name="I")
    C = tex.compute((6,), lambda i: tex.if_then_else(
        tex.all(I[i] >= 0, I[i] < 4), A[I[i]], -1.0), name="C")
    f = tex.build(C)
    assert ".oob" not in f.lowered
    a = np.arange(4, dtype=np.float32)
    ix = np.array([0, 3, 4, -1, 10**9, 2], np.int32)
    c = np.zeros(6, np.float32)
    f(a, ix, c)
    np.testing.assert_array_equal(c, evaluate(C, {A: a, I: ix}))


# -- checked at run time -----------------------------------------------------------------

def _gather(schedule: str) -> tuple:
    W = tex.placeholder((5, 16), name="W")
    I = tex.placeholder((8,), "int32", name="I")
    C = tex.compute((8, 16), lambda i, j: W[I[i], j] * 2.0, name="C")
    s = tex.create_schedule(C.op)
    if schedule == "vectorize":
        s[C].vectorize(C.op.axis[1])
    elif schedule == "parallel":
        s[C].parallel(C.op.axis[0])
    elif schedule == "lanes":  # the data index varies across vector lanes
        s[C].reorder(C.op.axis[1], C.op.axis[0])
        s[C].vectorize(C.op.axis[0])
    return s, [W, I, C], {"W": (5, 16), "I": (8,)}


def _reduce_gather() -> tuple:
    A = tex.placeholder((5,), name="W")
    I = tex.placeholder((8,), "int64", name="I")
    k = tex.reduce_axis((0, 8), name="k")
    C = tex.compute((3,), lambda i: tex.sum(A[I[k]] * (i + 1), axis=k), name="C")
    return tex.create_schedule(C.op), [A, I, C], {"W": (5,), "I": (8,)}


RUNTIME = {
    "gather": lambda: _gather("none"),
    "gather-vectorized": lambda: _gather("vectorize"),
    "gather-parallel": lambda: _gather("parallel"),
    "gather-lanes": lambda: _gather("lanes"),
    "sum-int64": _reduce_gather,
}


def _feed(args: list[tex.Tensor], bad: int | None, rng: np.random.Generator) -> dict:
    feed = {}
    for t in args[:-1]:
        if t.dtype.is_float:
            feed[t] = rng.standard_normal(t.shape).astype(t.dtype.numpy)
        else:
            ix = rng.integers(0, 5, t.shape).astype(t.dtype.numpy)
            if bad is not None:
                ix[3] = bad
            feed[t] = ix
    return feed


@pytest.mark.parametrize("bad", [None, 5, -1, 10**9], ids=["in-range", "end", "neg", "huge"])
@pytest.mark.parametrize("name", list(RUNTIME))
def test_data_dependent_reads_agree_with_evaluate(name: str, bad: int | None) -> None:
    s, args, _ = RUNTIME[name]()
    rng = np.random.default_rng(7)
    feed = _feed(args, bad, rng)
    f = tex.build(s, args)
    out = np.full(args[-1].shape, np.nan, np.float32)
    arrays = [feed[t] for t in args[:-1]] + [out]
    if bad is None:
        f(*arrays)
        np.testing.assert_allclose(out, evaluate(args[-1], feed), rtol=1e-6)
        return
    with pytest.raises(OutOfBoundsError):
        evaluate(args[-1], feed)
    with pytest.raises(OutOfBoundsError) as info:
        f(*arrays)
    msg = str(info.value)
    assert f"index {bad} in dimension 0 of 'W'" in msg and "[0, 4]" in msg
    # the defined state: every out-of-range read gave 0, everything else was computed
    W, ix = feed[args[0]], feed[args[1]]
    padded = np.concatenate([W, np.zeros((1, *W.shape[1:]), W.dtype)])
    safe = np.where((ix >= 0) & (ix < 5), ix, 5)
    fixed = dict(feed)
    fixed[args[1]] = np.minimum(ix, 4).clip(0)  # a program reading in bounds
    if name == "sum-int64":
        expect = np.array([padded[safe].sum() * (i + 1) for i in range(3)], np.float32)
    else:
        expect = padded[safe] * 2.0
    np.testing.assert_allclose(out, expect, rtol=1e-5, atol=1e-6)
    # a second call with good data runs normally (the error slot was reset)
    good = dict(feed)
    good[args[1]] = fixed[args[1]]
    f(*[good[t] for t in args[:-1]], out)
    np.testing.assert_allclose(out, evaluate(args[-1], good), rtol=1e-6)


def test_scalar_argument_index_is_checked() -> None:
    A = tex.placeholder((4,), name="A")
    n = tex.var("n")
    C = tex.compute((4,), lambda i: A[i + n], name="C")
    f = tex.build(tex.create_schedule(C.op), [A, n, C])
    a = np.arange(1, 5, dtype=np.float32)
    c = np.zeros(4, np.float32)
    f(a, 0, c)
    np.testing.assert_array_equal(c, a)
    with pytest.raises(OutOfBoundsError, match=r"index 4 in dimension 0 of 'A'"):
        f(a, 2, c)  # reads past the end from i = 2 on: the first violation is reported
    np.testing.assert_array_equal(c, [3, 4, 0, 0])
    with pytest.raises(OutOfBoundsError, match=r"index 1073741824 in dimension 0 of 'A'"):
        f(a, 2**30, c)
    np.testing.assert_array_equal(c, 0)


_N = tex.var("n")
# indices through a scalar argument whose int32 arithmetic wraps into bounds or reports a
# wrapped value at n = 2**30: (id, index, the elements read at n = 0, the exact first
# violation at n = 2**30)
WRAPPING: list[tuple[str, Callable[[tex.Expr], tex.Expr], list[int], int]] = [
    ("product", lambda i: i * 4 * _N, [0, 0], 4 * 2**30),  # i = 1: 2**32 wraps to 0
    ("shifted-product", lambda i: (i + _N) * 2, [0, 2], 2**31),  # i = 0: wraps negative
    ("floordiv", lambda i: (i * _N * 4) // 2, [0, 0], 2**31),  # i = 1: wraps, then halves
    ("select", lambda i: tex.if_then_else(i > 0, _N * 8, 0) + i % 2, [0, 1], 2**33 + 1),
]


@pytest.mark.parametrize("index,at0,first", [c[1:] for c in WRAPPING],
                         ids=[c[0] for c in WRAPPING])
def test_scalar_index_is_checked_in_int64(index: Callable[[tex.Expr], tex.Expr],
                                          at0: list[int], first: int) -> None:
    """An index whose interval leaves int32 is checked in int64: computed in int32 it
    wrapped into bounds (a silently wrong element) or reported a wrapped value."""
    B = tex.placeholder((8,), name="B")
    C = tex.compute((2,), lambda i: B[index(i)], name="C")
    f = tex.build(tex.create_schedule(C.op), [B, _N, C])
    b = np.arange(1, 9, dtype=np.float32)
    c = np.zeros(2, np.float32)
    f(b, 0, c)
    np.testing.assert_array_equal(c, b[at0])
    with pytest.raises(OutOfBoundsError, match=rf"index {first} in dimension 0 of 'B'"):
        f(b, 2**30, c)


def test_concurrent_calls_have_their_own_error_records() -> None:
    """Each call passes its own error record (the kernel's last argument): calls from
    several threads run at once (no lock) and each raises for its own data only. With one
    record per compiled function, a good call could raise another call's failure (or clear
    it); the malloc-failure flag had the same race."""
    from concurrent.futures import ThreadPoolExecutor

    A = tex.placeholder((64,), name="A")
    I = tex.placeholder((4096,), "int32", name="I")
    C = tex.compute((4096,), lambda i: A[I[i]] * 2.0, name="C")
    f = tex.build(tex.create_schedule(C.op), [A, I, C])
    a = np.arange(64, dtype=np.float32)

    def call(k: int) -> tuple[int, str]:
        ix = np.random.default_rng(k).integers(0, 64, 4096).astype(np.int32) if k % 3 else \
            np.full(4096, 64 + k, np.int32)
        c = np.zeros(4096, np.float32)
        try:
            f(a, ix, c)
        except OutOfBoundsError as e:
            return k, str(e)
        np.testing.assert_array_equal(c, a[ix] * 2)
        return k, ""

    with ThreadPoolExecutor(4) as pool:
        results = list(pool.map(call, range(60)))
    for k, err in results:
        assert (err != "") == (k % 3 == 0), (k, err)
        if err:
            assert f"index {64 + k} in dimension 0 of 'A'" in err
    assert "@main.oob" not in f.get_source("ll")  # no record shared between calls


def test_read_in_unselected_branch_is_not_reported() -> None:
    A = tex.placeholder((4,), name="A")
    I = tex.placeholder((4,), "int32", name="I")
    C = tex.compute((4,), lambda i: tex.if_then_else(i < 2, A[I[i]], 0.0), name="C")
    f = tex.build(C)
    a = np.arange(4, dtype=np.float32)
    ix = np.array([1, 2, 99, -5], np.int32)  # out of range only where not selected
    c = np.zeros(4, np.float32)
    f(a, ix, c)
    np.testing.assert_array_equal(c, evaluate(C, {A: a, I: ix}))


def test_scatter_gradient_skips_out_of_range_indices_like_evaluate() -> None:
    W = tex.placeholder((5, 3), name="W")
    I = tex.placeholder((6,), "int32", name="I")
    E = tex.compute((6, 3), lambda i, j: W[I[i], j], name="E")
    H = tex.placeholder((6, 3), name="H")
    (gW,) = tex.differentiate(topi.sum(E * H), [W])
    f = tex.build(gW)
    rng = np.random.default_rng(3)
    h = rng.standard_normal((6, 3)).astype(np.float32)
    ix = np.array([0, 4, 5, -1, 2**31 - 1, 4], np.int32)  # a scatter never writes these
    out = np.zeros((5, 3), np.float32)
    f(*[{"H": h, "I": ix}[t.name] for t in f.args[:-1]], out)
    np.testing.assert_allclose(out, evaluate(gW, {H: h, I: ix}), rtol=1e-6)


def test_bounds_check_false_removes_the_checks_and_keys_the_cache() -> None:
    A = tex.placeholder((4,), name="A")
    I = tex.placeholder((4,), "int32", name="I")
    C = tex.compute((4,), lambda i: A[I[i]] + 1.0, name="C")
    checked = tex.build(C)
    unchecked = tex.build(C, bounds_check=False)
    assert "report" in checked.get_source("ll") and "report" not in unchecked.get_source("ll")
    assert checked._kernel is not unchecked._kernel
    func = tex.lower(C, [A, I, C])
    assert cache_key(func, "llvm", CodegenOptions()) != \
        cache_key(func, "llvm", CodegenOptions(bounds_check=False))
    a = np.arange(4, dtype=np.float32)
    c = np.zeros(4, np.float32)
    unchecked(a, np.array([3, 2, 1, 0], np.int32), c)
    np.testing.assert_array_equal(c, a[::-1] + 1)
    with pytest.raises(TypeError, match="bounds_check"):
        tex.build(C, bounds_check="no")
    with pytest.raises(TypeError, match="bounds_check"):
        tex.build.build_lowered(func, bounds_check=1)


def test_out_of_bounds_error_is_index_and_value_error() -> None:
    assert issubclass(OutOfBoundsError, IndexError) and issubclass(OutOfBoundsError,
                                                                   ValueError)
    assert tex.debug.OutOfBoundsError is OutOfBoundsError


# -- found by the fuzzer (test_fuzz.py::test_data_dependent_reads_match_interpreter) -------

def test_read_of_an_inlined_stage_through_data_is_checked() -> None:
    """Inlining ``T[i] = P[0] + 1`` into ``C[j] = T[I[j]]`` leaves no read that depends on
    ``I``: the check of ``T``'s index must survive the inlining."""
    P = tex.placeholder((1,), name="P")
    I = tex.placeholder((2,), "int32", name="I")
    T = tex.compute((3,), lambda i: P[0] + 1.0, name="T")
    C = tex.compute((2,), lambda j: T[I[j]] * 2.0, name="C")
    s = tex.create_schedule(C.op)
    s[T].compute_inline()
    f = tex.build(s, [P, I, C])
    p, c = np.array([1.5], np.float32), np.zeros(2, np.float32)
    f(p, np.array([0, 2], np.int32), c)
    np.testing.assert_array_equal(c, [5, 5])
    bad = {P: p, I: np.array([0, 3], np.int32)}
    with pytest.raises(OutOfBoundsError):
        evaluate(C, bad)
    with pytest.raises(OutOfBoundsError, match=r"index 3 in dimension 0 of 'T'"):
        f(p, bad[I], c)


def test_int64_index_into_an_inlined_select() -> None:
    P = tex.placeholder((2,), name="P")
    I = tex.placeholder((3,), "int64", name="I")
    T = tex.compute((3,), lambda i: tex.if_then_else(i < 1, P[i], P[i - 1]), name="T")
    C = tex.compute((3,), lambda j: T[I[j]], name="C")
    s = tex.create_schedule(C.op)
    s[T].compute_inline()
    f = tex.build(s, [P, I, C])
    p, ix, c = np.array([3, 4], np.float32), np.array([2, 0, 1], np.int64), np.zeros(3, np.float32)
    f(p, ix, c)
    np.testing.assert_array_equal(c, evaluate(C, {P: p, I: ix}))
    with pytest.raises(OutOfBoundsError, match=rf"index {2**32} in dimension 0 of 'T'"):
        f(p, np.array([0, 2**32, 1], np.int64), c)  # would wrap to 0 in int32


def test_compute_at_a_producer_read_at_data_positions() -> None:
    P = tex.placeholder((2, 3), name="P")
    I = tex.placeholder((4,), "int32", name="I")
    T = tex.compute((2, 3), lambda a, b: P[a, b] * 3.0, name="T")
    C = tex.compute((4,), lambda j: T[1, I[j]], name="C")
    s = tex.create_schedule(C.op)
    s[T].compute_at(s[C], C.op.axis[0])
    f = tex.build(s, [P, I, C])
    p = np.arange(6, dtype=np.float32).reshape(2, 3)
    ix, c = np.array([2, 0, 1, 2], np.int32), np.zeros(4, np.float32)
    f(p, ix, c)
    np.testing.assert_array_equal(c, evaluate(C, {P: p, I: ix}))


def _cuda_gather() -> tuple[tex.Tensor, tex.Tensor, tex.Tensor, object]:
    A = tex.placeholder((4,), name="A")
    I = tex.placeholder((32,), "int32", name="I")
    C = tex.compute((32,), lambda i: A[I[i]] + 1.0, name="C")
    s = tex.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    s[C].bind(tx, tex.thread_axis("threadIdx.x"))
    return A, I, C, tex.build(s, [A, I, C], target="cuda -arch=sm_80")


def test_cuda_checked_read_gives_zero_and_is_reported() -> None:
    """On CUDA a failed check reads 0 (never memory outside the buffer) and the first
    failure of the call (the lowest thread here, on the simulator, which flags any access
    outside a buffer) is raised as on the CPU, from an error slot allocated per call."""
    A, I, C, f = _cuda_gather()
    assert "bounds_error" in str(f.program) and "atom" in f.get_source("ptx")
    a = np.arange(1, 5, dtype=np.float32)
    ix = (np.arange(32) % 4).astype(np.int32)
    ix[[3, 17]] = [-7, 10**6]
    c = np.full(32, np.nan, np.float32)
    with pytest.raises(OutOfBoundsError, match=r"index -7 in dimension 0 of 'A'"):
        f.simulate(a, ix, c)
    expect = np.where((ix >= 0) & (ix < 4), a[np.clip(ix, 0, 3)], 0) + 1
    np.testing.assert_array_equal(c, expect)
    with pytest.raises(OutOfBoundsError, match=r"index -7 in dimension 0 of 'A'"):
        evaluate(C, {A: a, I: ix})
    ix[3] = 0  # the next call starts from a clean slot: the other failure
    with pytest.raises(OutOfBoundsError, match=r"index 1000000 in dimension 0 of 'A'"):
        f.simulate(a, ix, c)
    ix[17] = 1
    f.simulate(a, ix, c)
    np.testing.assert_array_equal(c, a[ix] + 1)


def test_cuda_program_without_checks_has_no_error_slot() -> None:
    A = tex.placeholder((32,), name="A")
    C = tex.compute((32,), lambda i: A[31 - i] * 2.0, name="C")
    s = tex.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=8)
    s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    s[C].bind(tx, tex.thread_axis("threadIdx.x"))
    f = tex.build(s, [A, C], target="cuda")
    assert f.program.error_slot is None and "atom" not in f.get_source("ptx")


def _nested_selects(depth: int) -> tex.Tensor:
    A = tex.placeholder((16,), name="A")

    def body(i: tex.Var) -> tex.Expr:
        x = A[i]
        for k in range(depth):  # A[i] under 2**depth different guard sets
            x = tex.if_then_else(tex.floormod(i, k + 2) == 0, x * 2.0 + A[(i + k) % 16],
                                 x - A[(i * 3 + k) % 16])
        return x
    return tex.compute((16,), body, name="C")


def test_bounds_analysis_is_linear_in_nested_selects() -> None:
    """A read shared under many guard sets is analyzed under a few, then under "some
    unknown guard": depth 14 took 13 s (2**14 contexts) without that."""
    def lower_time(depth: int) -> float:
        C = _nested_selects(depth)
        best = float("inf")
        for _ in range(3):
            s = tex.create_schedule(C.op)
            best = min(best, seconds(tex.lower, s, [C.op.input_tensors[0], C]))
        return best

    small, large = lower_time(9), lower_time(14)
    assert large < 8 * small + 0.05, (small, large)  # exponential: 32x


def _guarded_chain(n: int, data: bool) -> tuple[list[tex.Tensor], tex.Tensor]:
    """Nested selects whose two sides share the inner value; level k reads A at j - k
    under the guard j - k >= 0 (in bounds where guarded), or at I[j] - k (data: a run-time
    check)."""
    A = tex.placeholder((16,), name="A")
    I = tex.placeholder((16,), name="I", dtype="int32")

    def body(j):  # type: ignore[no-untyped-def]
        e = tex.const(0.0)
        for k in range(n):
            ix = (I[j] if data else j) - k
            e = tex.if_then_else(j - k >= 0, e + A[ix] * 0.5, e)
        return e

    return [A, I], tex.compute((16,), body, name="G")


def test_guards_of_deeply_shared_reads_still_prove_them() -> None:
    """Past MAX_CONTEXTS guard sets a node was analyzed under "some unknown guard" alone,
    which dropped the guard of its own select: A[j - k] under j - k >= 0 got a run-time
    check at every level of a 20-deep nest. The guards common to every path still prove it."""
    from tex.lower.bounds_check import MAX_CONTEXTS
    ins, G = _guarded_chain(MAX_CONTEXTS + 12, data=False)
    text = str(tex.lower(tex.create_schedule(G.op), [*ins, G]))
    assert ".oob" not in text, text


def test_checked_reads_in_nested_shared_selects_emit_linear_code() -> None:
    """A checked read may not be evaluated eagerly (its report would fire where the select
    does not take its side), so the LLVM emitter did not evaluate the value both sides share
    before branching and emitted it once per side per level (2**n code: 16 levels took
    minutes). Both sides evaluate it whatever the condition, so it goes before the branch."""
    from tex.codegen.llvm import emit_llvm
    from tex.lower.legalize import legalize

    def ir_size(n: int) -> int:
        ins, G = _guarded_chain(n, data=True)
        func = tex.lower(tex.create_schedule(G.op), [*ins, G])
        assert ".oob" in str(func)  # the reads through I are checked
        return len(emit_llvm(legalize(func, "llvm"))[0])

    small, large = ir_size(6), ir_size(12)
    assert large < 2.5 * small, (small, large)
    ins, G = _guarded_chain(24, data=True)
    f = tex.build(tex.create_schedule(G.op), [*ins, G])
    rng = np.random.default_rng(4)
    a = rng.random(16).astype("float32")
    idx = np.arange(16, dtype="int32")
    got = np.zeros(16, "float32")
    f(a, idx, got)
    np.testing.assert_allclose(got, evaluate(G, {ins[0]: a, ins[1]: idx}), rtol=1e-5)
    idx[5] = 40  # read at 40 - k for k <= 5: out of bounds, as evaluate finds
    with pytest.raises(OutOfBoundsError, match="of 'A'"):
        f(a, idx, got)
    with pytest.raises(OutOfBoundsError):
        evaluate(G, {ins[0]: a, ins[1]: idx})
