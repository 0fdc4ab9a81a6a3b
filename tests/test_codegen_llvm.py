"""The LLVM backend on hand-built loop nests, checked against NumPy.

Every op of ``tex.ir.expr.Op`` runs for every dtype it applies to, in a serial loop and in
a vectorized one (37 lanes: two full vectors and a remainder), against
``tex.ir.semantics``; then casts, lazy selects guarding far out-of-bounds loads, parallel,
vectorized, unrolled loops, allocations, lets, ifs, scalar parameters, bool/float16
buffers and int64 indices.
"""
from __future__ import annotations

import re
from collections.abc import Callable, Sequence

import llvmlite.ir as ir
import numpy as np
import pytest

import tex
from tex import debug
from tex.build import build_lowered
from tex.codegen import host_target, tables
from tex.codegen.module import CodegenOptions, ModuleEmitter
from tex.codegen.ops import covered_ops
from tex.codegen.parallel import CHUNKS_PER_THREAD, UNIT_CHUNKS_PER_THREAD, chunk_size
from tex.dtype import DTYPES, DType, boolean, float32, int32
from tex.ir import fold
from tex.ir.expr import (
    BINARY_OPS,
    COMPARE_OPS,
    FLOAT_ONLY_OPS,
    UNARY_OPS,
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Op,
    Select,
    Unary,
    Var,
)
from tex.ir.semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast
from tex.ir.tensor import Tensor
from tex.lower.printer import format_func
from tex.lower.stmt import (
    Allocate,
    BufferParam,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    ScalarParam,
    Stmt,
    Store,
    make_buffer,
    seq,
)
from tex.runtime.module import BuiltFunction

from loop_interp import run_lowered

INT64 = DTYPES["int64"]
F16, F64 = DTYPES["float16"], DTYPES["float64"]
NUMERIC = [d for d in DTYPES.values() if not d.is_bool]
FLOATS = [d for d in DTYPES.values() if d.is_float]
N = 37  # two 16-lane vectors and a remainder of 5
RNG = np.random.default_rng(0)


def c32(v: int) -> Const:
    return Const(v, int32)


def loop(var: Var, extent: int, body, kind: ForKind = ForKind.SERIAL, start: int = 0) -> For:
    d = var.dtype
    return For(var, Const(start, d), Const(extent, d), kind, body)


def func(name: str, inputs: Sequence[Tensor], outputs: Sequence[Tensor], body,
         scalars: Sequence[Var] = ()) -> LoweredFunc:
    params = ([BufferParam(b, b, False) for b in inputs] + [ScalarParam(v) for v in scalars]
              + [BufferParam(b, b, True) for b in outputs])
    return LoweredFunc(name, tuple(params), body)


def pointwise(name: str, in_dtypes: Sequence[DType],
              exprs: Callable[..., list[Expr]], kind: ForKind,
              n: int = N) -> tuple[BuiltFunction, list[Tensor]]:
    """out_k[i] = exprs(in_0[i], in_1[i], ...)[k] for i in [0, n)."""
    ins = [make_buffer(f"in{k}", n, d) for k, d in enumerate(in_dtypes)]
    i = Var("i", int32, "axis")
    values = exprs(*(b[i] for b in ins))
    outs = [make_buffer(f"out{k}", n, e.dtype) for k, e in enumerate(values)]
    body = loop(i, n, seq(*(Store(o, i, e) for o, e in zip(outs, values))), kind)
    return build_lowered(func(name, ins, outs, body)), outs


def run(f: BuiltFunction, inputs: Sequence[np.ndarray], outs: Sequence[Tensor]) -> list:
    results = [np.zeros(o.shape, o.dtype.numpy) for o in outs]
    f(*inputs, *results)
    return results


def sample(d: DType, n: int = N, positive: bool = False) -> np.ndarray:
    """Random values of dtype d including negatives, zeros and the extremes of ints."""
    if d.is_bool:
        return RNG.random(n) < 0.5
    if d.is_float:
        x = RNG.standard_normal(n) * 3
        if positive:
            x = np.abs(x) + 0.05
        return x.astype(d.numpy)
    info = np.iinfo(d.numpy)
    lo = 0 if positive else max(info.min, -100)
    x = RNG.integers(lo, min(info.max, 100), n, endpoint=True).astype(d.numpy)
    specials = [1, info.max, 2, 1] if positive else [info.min, info.max, 0, max(info.min, -1)]
    x[:4] = specials
    return x


def tolerance(d: DType, exact: bool) -> dict:
    if exact or not d.is_float:
        return dict(rtol=0, atol=0)
    return {16: dict(rtol=2e-3, atol=1e-3), 32: dict(rtol=3e-6, atol=1e-6),
            64: dict(rtol=1e-13, atol=1e-15)}[d.bits]


KINDS = [ForKind.SERIAL, ForKind.VECTORIZED]
POSITIVE_DOMAIN = {Op.LOG, Op.LOG2, Op.LOG10, Op.SQRT, Op.RSQRT}
EXACT_UNARY = {Op.NEG, Op.NOT, Op.ABS, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC}


def unary_applies(op: Op, d: DType) -> bool:
    if op in FLOAT_ONLY_OPS:
        return d.is_float
    if op is Op.NOT:
        return d.is_bool
    if op is Op.NEG:
        return not d.is_bool
    return True


# --------------------------------------------------------------------------------------
# Every op, every dtype
# --------------------------------------------------------------------------------------

def test_every_op_has_a_backend_rule() -> None:
    cov = covered_ops()
    for op in UNARY_OPS:
        assert op in cov["unary"] or op in cov["legalized"], f"no LLVM rule for unary {op}"
    for op in BINARY_OPS:
        assert (op in cov["float binary"] and op in cov["int binary"]) \
            or op in cov["legalized"], f"no LLVM rule for binary {op}"
    for op in COMPARE_OPS:
        assert op in cov["compare"], f"no LLVM rule for comparison {op}"
    assert not (tables.LEGALIZED & set(tables.FLOAT_INTRINSICS))


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("d", list(DTYPES.values()), ids=str)
def test_unary_ops(d: DType, kind: ForKind) -> None:
    ops = sorted((op for op in UNARY_OPS if unary_applies(op, d)), key=lambda o: o.value)
    f, outs = pointwise(f"unary_{d}", [d, d], lambda x, p: [
        Unary(op, p if op in POSITIVE_DOMAIN else x) for op in ops], kind)
    x, p = sample(d), sample(d, positive=True)
    x[-4:] = x[-4:] if not d.is_float else np.array([0.5, -0.5, 2.5, -0.0], d.numpy)
    results = run(f, [x, p], outs)
    with np.errstate(all="ignore"):
        for op, got in zip(ops, results):
            arg = p if op in POSITIVE_DOMAIN else x
            want = NUMPY_UNARY[op](arg)
            np.testing.assert_allclose(got, want, err_msg=f"{op.value} on {d}",
                                       **tolerance(d, op in EXACT_UNARY))


def _binary_ops(d: DType) -> list[Op]:
    if d.is_bool:
        return [Op.AND, Op.OR, Op.MAX, Op.MIN]
    return [op for op in sorted(BINARY_OPS, key=lambda o: o.value) if op not in (Op.AND, Op.OR)]


def _binary_inputs(d: DType) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    a, b = sample(d), sample(d)
    if d.is_float:
        b[:6] = [0.0, -0.0, np.nan, 1.5, -2.0, 0.0]
        a[:6] = [-0.0, 0.0, 1.0, np.nan, np.nan, np.inf]
    elif d.kind == "int":
        b[:3] = [-1, 0, 0]  # INT_MIN / -1, x / 0
        b[5:9] = [7, -7, 4, -4]
    elif d.kind == "uint":
        b[:3] = [255, 0, 0]
    if d.is_bool:
        exps = sample(d)
    elif d.is_float:
        exps = np.abs(b) % 3
    elif d.kind == "int":
        exps = RNG.integers(-3, 6, N).astype(d.numpy)
    else:
        exps = RNG.integers(0, 9, N).astype(d.numpy)
    return a, b, exps


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("d", list(DTYPES.values()), ids=str)
def test_binary_ops(d: DType, kind: ForKind) -> None:
    ops = _binary_ops(d)
    f, outs = pointwise(f"binary_{d}", [d, d, d], lambda a, b, e: [
        Binary(op, a, e if op is Op.POW else b) for op in ops], kind)
    a, b, e = _binary_inputs(d)
    if d.is_float:
        a_pow = np.abs(a)
    else:
        a_pow = a
    results = run(f, [a, b, e], outs)
    with np.errstate(all="ignore"):
        for op, got in zip(ops, results):
            want = NUMPY_BINARY[op](a, e if op is Op.POW else b)
            if op is Op.POW and d.is_float:
                mask = np.isfinite(a_pow) & (a > 0)
                got, want = got[mask], want[mask]
            np.testing.assert_allclose(got, want, err_msg=f"{op.value} on {d}",
                                       **tolerance(d, op not in (Op.DIV, Op.POW, Op.FLOORMOD)))
            if op in (Op.MAX, Op.MIN) and d.is_float:  # -0.0 versus 0.0 as NumPy picks it
                assert np.array_equal(np.signbit(got), np.signbit(want)), op


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
def test_integer_division_by_constants(kind: ForKind) -> None:
    divisors = [1, 2, 8, 3, 7, -1, -2, -8, -3, 0]
    ops = [Op.DIV, Op.FLOORDIV, Op.FLOORMOD]
    for d in (int32, INT64, DTYPES["int8"]):
        f, outs = pointwise(f"divc_{d}", [d], lambda a, d=d: [
            Binary(op, a, Const(c, d)) for op in ops for c in divisors], kind)
        a = sample(d)
        results = iter(run(f, [a], outs))
        for op in ops:
            for c in divisors:
                with np.errstate(all="ignore"):
                    want = NUMPY_BINARY[op](a, np.full_like(a, c))
                np.testing.assert_array_equal(next(results), want, err_msg=f"{op.value} {c} {d}")


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("d", list(DTYPES.values()), ids=str)
def test_comparisons(d: DType, kind: ForKind) -> None:
    ops = sorted(COMPARE_OPS, key=lambda o: o.value)
    f, outs = pointwise(f"cmp_{d}", [d, d], lambda a, b: [Compare(op, a, b) for op in ops], kind)
    a, b = sample(d), sample(d)
    b[:N // 3] = a[:N // 3]
    if d.is_float:
        a[-1] = np.nan
    results = run(f, [a, b], outs)
    for op, got in zip(ops, results):
        assert got.dtype == np.bool_
        np.testing.assert_array_equal(got, NUMPY_BINARY[op](a, b), err_msg=f"{op.value} {d}")


def _cast_source(src: DType, dst: DType) -> np.ndarray:
    """Values of src that convert to dst the same way in C and NumPy."""
    x = sample(src)
    if src.is_float and dst.is_int:
        info = np.iinfo(dst.numpy)
        lo, hi = max(float(info.min), -2000.0), min(float(info.max), 2000.0)
        if src.name == "float16":
            lo, hi = max(lo, -60000.0), min(hi, 60000.0)
        x = RNG.uniform(lo, hi, N).astype(src.numpy)
        x[:3] = [0.0, -0.7, 0.7]
    if src.is_float and dst.is_bool:
        x[:2] = [0.0, np.nan]
    return x


@pytest.mark.parametrize("kind", KINDS, ids=lambda k: k.name)
@pytest.mark.parametrize("src", list(DTYPES.values()), ids=str)
def test_casts(src: DType, kind: ForKind) -> None:
    dsts = [d for d in DTYPES.values() if d is not src]
    for dst in dsts:  # one function per target type: inputs differ by target range
        f, outs = pointwise(f"cast_{src}_{dst}", [src], lambda a, dst=dst: [Cast(dst, a)],
                            kind)
        x = _cast_source(src, dst)
        (got,) = run(f, [x], outs)
        with np.errstate(all="ignore"):
            want = numpy_cast(x, dst.numpy)
        np.testing.assert_array_equal(got, want, err_msg=f"{src} -> {dst}")


def test_float16_arithmetic_rounds_like_numpy() -> None:
    f, outs = pointwise("half", [F16, F16], lambda a, b: [a + b, a * b, a / b, a - b],
                        ForKind.VECTORIZED)
    a = (RNG.standard_normal(N) * 100).astype(np.float16)
    b = (RNG.standard_normal(N) * 3).astype(np.float16)
    got = run(f, [a, b], outs)
    for g, w in zip(got, [a + b, a * b, a / b, a - b]):
        np.testing.assert_array_equal(g, w)


def test_float16_cast_from_float64_rounds_once() -> None:
    f, outs = pointwise("f64_to_f16", [F64], lambda a: [Cast(F16, a)], ForKind.SERIAL)
    # 1 + 2**-11 + 2**-30 rounds up in one step; through float32 it would too, so also
    # check a value where double rounding differs: 1 + 2**-11 + 2**-40 (ties broken up)
    x = np.array([1 + 2**-11 + 2**-40, 65519.9, 1e-8, -3.14159] * 10, np.float64)[:N]
    (got,) = run(f, [x], outs)
    np.testing.assert_array_equal(got, x.astype(np.float16))


# --------------------------------------------------------------------------------------
# Selects that guard out-of-bounds loads
# --------------------------------------------------------------------------------------

FAR = 10**8  # an eager load at this offset (x4 bytes) is far outside any mapping


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.VECTORIZED, ForKind.UNROLLED,
                                  ForKind.PARALLEL], ids=lambda k: k.name)
def test_select_guards_far_out_of_bounds_loads(kind: ForKind) -> None:
    A = make_buffer("A", 8, float32)
    B, C, D = (make_buffer(n, 16, float32) for n in "BCD")
    i = Var("i", int32, "axis")
    pad = fold.select((i >= 1) & (i < 9), A[fold.binary(Op.SUB, i, 1)], 0.0)
    far = Select(fold.compare(Op.EQ, i, 0), A[i * FAR], Const(-1.0, float32))
    guard = fold.select((i < 1) & (A[fold.binary(Op.MUL, i, FAR)] > 0.0), 1.0, 2.0)
    body = seq(Store(B, i, pad), Store(C, i, far), Store(D, i, guard))
    f = build_lowered(func(f"pad_{kind.name}", [A], [B, C, D], loop(i, 16, body, kind)))
    a = RNG.standard_normal(8).astype(np.float32)
    b, c, d = (np.zeros(16, np.float32) for _ in range(3))
    f(a, b, c, d)
    np.testing.assert_array_equal(b, np.concatenate([[0], a, np.zeros(7)]))
    np.testing.assert_array_equal(c, np.concatenate([[a[0]], -np.ones(15)]))
    want_d = np.full(16, 2.0, np.float32)
    want_d[0] = 1.0 if a[0] > 0 else 2.0
    np.testing.assert_array_equal(d, want_d)


def test_integer_division_in_a_select_is_lazy_and_never_traps() -> None:
    A, Q = make_buffer("A", N, int32), make_buffer("Q", N, int32)
    i = Var("i", int32, "axis")
    body = Store(Q, i, Select(fold.compare(Op.NE, A[i], 0), Binary(Op.DIV, c32(100), A[i]),
                              Binary(Op.FLOORMOD, c32(7), A[i])))
    f = build_lowered(func("lazydiv", [A], [Q], loop(i, N, body)))
    a = sample(int32)
    q = np.zeros(N, np.int32)
    f(a, q)
    with np.errstate(all="ignore"):
        want = np.where(a != 0, NUMPY_BINARY[Op.DIV](np.full_like(a, 100), a), 0)
    np.testing.assert_array_equal(q, want)


def test_int64_indices_far_beyond_int32() -> None:
    A, B = make_buffer("A", 8, float32), make_buffer("B", 8, float32)
    i = Var("i", INT64, "axis")
    big = Const(3 * 2**32, INT64)
    # i + 3*2**32 - 3*2**32 is i only with 64-bit arithmetic; the select reads far away
    idx = fold.binary(Op.SUB, fold.binary(Op.ADD, i, big), big)
    body = Store(B, i, Select(fold.compare(Op.LT, i, Const(8, INT64)), A[idx],
                              A[fold.binary(Op.ADD, i, big)]))
    f = build_lowered(func("i64", [A], [B], loop(i, 8, body)))
    a = RNG.standard_normal(8).astype(np.float32)
    b = np.zeros(8, np.float32)
    f(a, b)
    np.testing.assert_array_equal(a, b)


# --------------------------------------------------------------------------------------
# Loops
# --------------------------------------------------------------------------------------

def _blocked(kind: ForKind, inner_kind: ForKind = ForKind.SERIAL, temp: int = 16,
             name: str = "blocked") -> LoweredFunc:
    """B[io*16 + ii] = T[ii] + T[15 - ii] with T[ii] = 2 * A[io*16 + ii] in a local T."""
    n_outer = 8
    A, B = make_buffer("A", n_outer * 16, float32), make_buffer("B", n_outer * 16, float32)
    T = make_buffer("T", temp, float32)
    io, ii, jj = Var("io", int32, "axis"), Var("ii", int32, "axis"), Var("jj", int32, "axis")
    body = Allocate(T, "local", seq(
        loop(ii, 16, Store(T, ii, A[io * 16 + ii] * 2.0), inner_kind),
        loop(jj, 16, Store(B, io * 16 + jj, T[jj] + T[fold.binary(Op.SUB, c32(15), jj)]),
             inner_kind)))
    return func(name, [A], [B], loop(io, n_outer, body, kind))


def _blocked_want(a: np.ndarray) -> np.ndarray:
    t = (a * 2).reshape(8, 16)
    return (t + t[:, ::-1]).ravel()


@pytest.mark.parametrize("temp", [16, 20000], ids=["stack", "heap"])
@pytest.mark.parametrize("inner", [ForKind.SERIAL, ForKind.PARALLEL, ForKind.VECTORIZED],
                         ids=lambda k: k.name)
def test_parallel_loop_with_allocate(temp: int, inner: ForKind) -> None:
    a = RNG.standard_normal(128).astype(np.float32)
    outs = []
    for kind in (ForKind.SERIAL, ForKind.PARALLEL):
        f = build_lowered(_blocked(kind, inner, temp, f"blocked_{kind.name}_{temp}"))
        b = np.zeros(128, np.float32)
        f(a, b)
        outs.append(b)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_allclose(outs[1], _blocked_want(a), rtol=1e-6)
    raw = f.get_source("ll.raw")
    assert "GOMP_parallel" in raw
    assert ('@"tex_workspace_alloc"' in raw) == (temp * 4 > 64 * 1024)


def test_parallel_loop_captures_scalars_and_outer_variables() -> None:
    A, B = make_buffer("A", 6 * 10, float32), make_buffer("B", 6 * 10, float32)
    n, alpha = Var("n", int32), Var("alpha", float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    inner = loop(j, 10, Store(B, i * 10 + j, A[i * 10 + j] * alpha + Cast(float32, i + n)),
                 ForKind.PARALLEL)
    f = build_lowered(func("capture", [A], [B], loop(i, 6, inner), scalars=[n, alpha]))
    a = RNG.standard_normal(60).astype(np.float32)
    b = np.zeros(60, np.float32)
    f(a, 5, 0.5, b)
    want = a * np.float32(0.5) + (np.arange(60) // 10 + 5).astype(np.float32)
    np.testing.assert_allclose(b, want, rtol=1e-6)


@pytest.mark.parametrize("threads, region", [(3, 3), (1, None), (0, "max")],
                         ids=["three", "one", "default"])
def test_num_threads_option_reaches_gomp(threads: int, region: int | str | None) -> None:
    """The thread count reaches GOMP_parallel; with one thread there is no region (the body
    is called directly); by default the count is libgomp's ``omp_get_max_threads()``, read
    when the loop runs."""
    with debug.config(num_threads=threads):
        f = build_lowered(_blocked(ForKind.PARALLEL, name=f"threads{threads}"))
    ll = f.get_source("ll")
    if region is None:
        assert "GOMP_parallel" not in ll
    elif region == "max":
        assert re.search(r"call i32 @omp_get_max_threads\(\)", ll)
        assert re.search(r"@GOMP_parallel\(ptr [^,]+, ptr [^,]+, i32 %[^,]+, i32 0\)", ll)
    else:
        assert re.search(rf"@GOMP_parallel\(ptr [^,]+, ptr [^,]+, i32 {region}, i32 0\)", ll)
    a = RNG.standard_normal(128).astype(np.float32)
    b = np.zeros(128, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, _blocked_want(a), rtol=1e-6)


def test_parallel_loop_hands_out_chunks_to_threads() -> None:
    """A parallel loop of 37 iterations on 3 threads: the threads claim chunks of it from an
    atomic counter (``chunk_size``: single iterations, at most 16 per thread) until none is
    left; every iteration runs once, computing what it computes serially."""
    A, B = make_buffer("A", 37 * 5, float32), make_buffer("B", 37 * 5, float32)
    io, ii = Var("io", int32, "axis"), Var("ii", int32, "axis")
    body = loop(ii, 5, Store(B, io * 5 + ii, A[io * 5 + ii] * Cast(float32, io) + 1.0))
    a = np.random.default_rng(37).standard_normal(37 * 5).astype(np.float32)
    outs = []
    for kind in (ForKind.SERIAL, ForKind.PARALLEL):
        with debug.config(num_threads=3):
            f = build_lowered(func(f"chunks_{kind.name}", [A], [B], loop(io, 37, body, kind)))
        b = np.full(37 * 5, np.nan, np.float32)
        f(a, b)
        outs.append(b)
    raw = f.get_source("ll.raw")
    assert re.search(r"atomicrmw add ptr %\S+, i64 %\"chunk\" monotonic", raw)
    # the rule of chunk_size: single iterations for at most 16 per thread
    assert re.search(rf"mul i64 %\S+, {UNIT_CHUNKS_PER_THREAD}\b", raw)
    # every element written once, with a * io + 1: one FMA (one rounding; float64 then
    # float32 gives it for these values) or a product and a sum (two). ``contract``
    # allows the fusion, not requires it: LLVM does not fuse where its vectorizer
    # shuffles the products first, as it does in the serial loop (not in the chunks)
    fused = (a.astype(np.float64).reshape(37, 5) * np.arange(37)[:, None] + 1.0)
    apart = a.reshape(37, 5) * np.arange(37, dtype=np.float32)[:, None] + np.float32(1)
    for got in outs:
        got = got.reshape(37, 5)
        assert np.all((got == fused.astype(np.float32)) | (got == apart))


@pytest.mark.parametrize("threads", [2, 3, 4, 8])
def test_chunks_share_a_loop_of_few_iterations_equally(threads: int) -> None:
    """Threads claiming equal iterations in turn: a loop of at most 16 iterations per
    thread is shared as evenly as its iterations allow (14 tiles on 2 threads: 7 each, not
    8 and 6 from chunks of 2), a longer one takes at most ``CHUNKS_PER_THREAD`` + 1 claims
    per thread."""
    for extent in range(1, 40 * threads):
        chunk = chunk_size(extent, threads)
        shares = [0] * threads
        claims = [0] * threads
        for first in range(0, extent, chunk):  # the least loaded thread claims next
            k = shares.index(min(shares))
            shares[k] += min(chunk, extent - first)
            claims[k] += 1
        if extent <= threads * UNIT_CHUNKS_PER_THREAD:
            assert max(shares) == -(-extent // threads), (extent, shares)
        else:
            assert max(claims) <= CHUNKS_PER_THREAD + 1, (extent, claims)


@pytest.mark.parametrize("extent", [1, 2])
def test_parallel_region_has_at_most_one_thread_per_iteration(extent: int) -> None:
    """On 4 threads, a parallel loop of 2 iterations forks 2 threads; of 1, none (no
    region: the body is called directly)."""
    n = 16 * extent
    A, B = make_buffer("A", n, float32), make_buffer("B", n, float32)
    io, ii = Var("io", int32, "axis"), Var("ii", int32, "axis")
    body = loop(ii, 16, Store(B, io * 16 + ii, A[io * 16 + ii] + 1.0))
    with debug.config(num_threads=4):
        f = build_lowered(func(f"few{extent}", [A], [B], loop(io, extent, body,
                                                              ForKind.PARALLEL)))
    ll = f.get_source("ll")
    if extent == 1:
        assert "GOMP_parallel" not in ll
    else:
        assert re.search(r"@GOMP_parallel\(ptr [^,]+, ptr [^,]+, i32 2, i32 0\)", ll)
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros(n, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a + np.float32(1))


@pytest.mark.parametrize("n", [3, 8, 16, 37, 64])
def test_vectorized_elementwise(n: int) -> None:
    A, B = make_buffer("A", n, float32), make_buffer("B", n, float32)
    i = Var("i", int32, "axis")
    f = build_lowered(func(f"axpb{n}", [A], [B],
                           loop(i, n, Store(B, i, A[i] * 2.0 + 1.0), ForKind.VECTORIZED)))
    assert f._kernel.sources.notes == ("vectorized i",)
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros(n, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("n", [3, 5, 6, 7, 12, 13, 28, 30])
def test_vector_chunks_are_powers_of_two_wide(n: int) -> None:
    """A vectorized loop whose extent is no power of two runs in chunks of powers of two
    (12 -> 8 + 4): LLVM widens a 12-lane vector, and an FMA on it ran at half speed."""
    A, B = make_buffer("A", 2 * n, float32), make_buffer("B", 2 * n, float32)
    j, i = Var("j", int32, "axis"), Var("i", int32, "axis")
    idx = j * n + i
    f = build_lowered(func(f"chunks{n}", [A], [B],
                           loop(j, 2, loop(i, n, Store(B, idx, A[idx] * 2.0 + 1.0),
                                           ForKind.VECTORIZED))))
    assert f._kernel.sources.notes == ("vectorized i",)
    widths = {int(w) for w in re.findall(r"<(\d+) x ", f.get_source("ll.raw"))}
    assert widths and all(w & (w - 1) == 0 for w in widths), widths
    a = RNG.standard_normal(2 * n).astype(np.float32)
    b = np.zeros(2 * n, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(2) + np.float32(1))


def test_vectorized_loop_emits_packed_instructions() -> None:
    A, B = make_buffer("A", 8, float32), make_buffer("B", 8, float32)
    i = Var("i", int32, "axis")
    f = build_lowered(func("packed", [A], [B],
                           loop(i, 8, Store(B, i, A[i] * 2.0 + 1.0), ForKind.VECTORIZED)))
    raw = f.get_source("ll.raw")
    assert "<8 x float>" in raw and "load <8 x float>" in raw
    asm = f.get_source("asm")
    if host_target().triple.startswith(("x86_64", "i686")):
        # packed single-precision arithmetic (SSE, AVX or AVX-512 encodings)
        assert re.search(r"\bv?(mul|add|fmadd\w*)ps\b", asm), asm
        assert not re.search(r"\bv?(mul|add)ss\b", asm), asm


def test_vector_splats_print_as_one_value() -> None:
    """A broadcast scalar and a constant vector print as ``splat (x)`` / ``undef``, not lane
    by lane (llvmlite formats every lane; a sixth of a model's IR text was such lanes)."""
    A, B = make_buffer("A", 16, float32), make_buffer("B", 16, float32)
    x = Var("x", float32)
    i = Var("i", int32, "axis")
    f = build_lowered(func("splats", [A], [B],
                           loop(i, 16, Store(B, i, A[i] * x + 1.0), ForKind.VECTORIZED),
                           scalars=[x]))
    raw = f.get_source("ll.raw")
    assert "insertelement <16 x float> undef" in raw and "splat (float" in raw
    assert not re.search(r"<(?:float|i32) ", raw), raw  # (no vector written lane by lane)
    a = np.random.default_rng(3).standard_normal(16).astype(np.float32)
    b = np.zeros(16, np.float32)
    f(a, np.float32(3.0), b)
    # (a * x + 1 may be one fused multiply-add: one rounding; near -1/3 the result is small,
    # so the error bound is absolute, a float32 rounding of the terms)
    np.testing.assert_allclose(b, a.astype(np.float64) * 3 + 1, rtol=1e-6, atol=1e-6)


def test_vectorized_guarded_remainder() -> None:
    """for io: vectorized for ii in [0, 8): if io*8 + ii < 13: B[..] = A[..] * 2 + 1."""
    A, B = make_buffer("A", 13, float32), make_buffer("B", 13, float32)
    io, ii = Var("io", int32, "axis"), Var("ii", int32, "axis")
    idx = io * 8 + ii
    body = loop(io, 2, loop(ii, 8, IfThenElse(fold.compare(Op.LT, idx, 13),
                                              Store(B, idx, A[idx] * 2.0 + 1.0)),
                            ForKind.VECTORIZED))
    f = build_lowered(func("remainder", [A], [B], body))
    assert f._kernel.sources.notes == ("vectorized ii",)
    assert "llvm.masked.store" in f.get_source("ll.raw")
    big = np.full(24, 7.0, np.float32)
    a = RNG.standard_normal(13).astype(np.float32)
    f(a, big[:13])
    np.testing.assert_array_equal(big[:13], a * np.float32(2) + np.float32(1))
    assert (big[13:] == 7.0).all()  # no lane wrote past the end


def test_vectorized_gather_scatter_select_and_else() -> None:
    n = 37  # prime: i*7 % n is a permutation
    A, B, C, D, E = (make_buffer(x, n, float32) for x in "ABCDE")
    i = Var("i", int32, "axis")
    perm = fold.binary(Op.FLOORMOD, i * 7, n)
    body = seq(
        Store(B, i, A[perm]),  # gather
        Store(C, perm, A[i] + 1.0),  # scatter
        Store(D, i, Select(fold.compare(Op.LT, i, 1), A[i * FAR], Const(0.0, float32))),
        IfThenElse(fold.compare(Op.GT, A[i], 0.0), Store(B, i, B[i] * 10.0)),
        IfThenElse(fold.compare(Op.LT, A[i], 0.0), Store(E, i, Const(0.0, float32)),
                   Store(E, i, A[i] + 100.0)),
    )
    f = build_lowered(func("gather", [A], [B, C, D, E], loop(i, n, body, ForKind.VECTORIZED)))
    assert f._kernel.sources.notes == ("vectorized i",)
    raw = f.get_source("ll.raw")
    assert "llvm.masked.gather" in raw and "llvm.masked.scatter" in raw
    a0 = RNG.standard_normal(n).astype(np.float32)
    a, b, c, d, e = a0.copy(), *(np.zeros(n, np.float32) for _ in range(4))
    f(a, b, c, d, e)
    p = (np.arange(n) * 7) % n
    want_b = a0[p] * np.where(a0 > 0, 10, 1).astype(np.float32)
    np.testing.assert_array_equal(b, want_b)
    want_c = np.zeros(n, np.float32)
    want_c[p] = a0 + 1
    np.testing.assert_array_equal(c, want_c)
    np.testing.assert_array_equal(d, np.concatenate([[a0[0]], np.zeros(n - 1)]))
    np.testing.assert_array_equal(e, np.where(a0 < 0, 0, a0 + 100).astype(np.float32))


def test_vectorized_select_masks_each_branch() -> None:
    n = 16
    A, B = make_buffer("A", n, float32), make_buffer("B", n, float32)
    i = Var("i", int32, "axis")
    # even lanes read A[i], odd lanes would read A[i * FAR]; the mask keeps them out
    even = fold.compare(Op.EQ, fold.binary(Op.FLOORMOD, i, 2), 0)
    odd_value = Select(fold.compare(Op.LT, i, 0), A[i * FAR], Const(-5.0, float32))
    body = Store(B, i, Select(even, A[i], odd_value))
    f = build_lowered(func("vsel", [A], [B], loop(i, n, body, ForKind.VECTORIZED)))
    a = RNG.standard_normal(n).astype(np.float32)
    b = np.zeros(n, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, np.where(np.arange(n) % 2 == 0, a, -5.0))


def test_vectorized_with_inner_loop_let_and_reduction() -> None:
    K, n = 5, 8
    A, C = make_buffer("A", K * n, float32), make_buffer("C", n, float32)
    i, k = Var("i", int32, "axis"), Var("k", int32, "reduce")
    x = Var("x", float32)
    body = seq(Store(C, i, Const(0.0, float32)),
               loop(k, K, LetStmt(x, A[k * n + i], Store(C, i, C[i] + x * x))))
    f = build_lowered(func("vred", [A], [C], loop(i, n, body, ForKind.VECTORIZED)))
    assert f._kernel.sources.notes == ("vectorized i",)
    a = RNG.standard_normal(K * n).astype(np.float32)
    c = np.zeros(n, np.float32)
    f(a, c)
    np.testing.assert_allclose(c, (a.reshape(K, n) ** 2).sum(0), rtol=1e-6)


@pytest.mark.parametrize("outer", [ForKind.SERIAL, ForKind.PARALLEL])
def test_loops_count_in_i64_and_addresses_need_no_sign_extension(outer: ForKind) -> None:
    """int32 loops count in i64 and addresses are computed from those counters in i64: no
    ``sext`` between a counter and an address (LLVM's IndVarSimplify spent most of its
    time undoing them); the loop variables' int32 values are still there for data. A
    parallel loop's chunk bounds arrive in int32: widened once, before the loop."""
    A, B = make_buffer("A", 6 * 7, float32), make_buffer("B", 6 * 7, float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    body = loop(i, 6, loop(j, 7, Store(B, i * 7 + j, A[j * 6 + i] + Cast(float32, i - j))),
                outer)
    with debug.config(num_threads=2):
        f = build_lowered(func(f"wide_{outer.name}", [A], [B], body))
    raw = f.get_source("ll.raw")
    assert re.search(r"%\"i\" = load i64", raw) and re.search(r"%\"j\" = load i64", raw)
    if outer is ForKind.SERIAL:
        assert "sext" not in raw
    else:  # the loops are in the parallel body; the runtime's thread counts are elsewhere
        fn = re.search(r"define internal void @\S+\.body\"\(.*?\n}", raw, re.S)
        assert fn is not None
        assert sorted(re.findall(r"sext i32 (%\S+) to i64", fn.group(0))) == \
            ['%"i.hi"', '%"i.lo"']
    assert re.search(r"trunc i64 %\"i\" to i32", raw)  # (i - j as data: int32)
    a = RNG.standard_normal(42).astype(np.float32)
    b = np.zeros(42, np.float32)
    f(a, b)
    ii, jj = np.meshgrid(np.arange(6), np.arange(7), indexing="ij")
    np.testing.assert_array_equal(b.reshape(6, 7), a.reshape(7, 6).T + (ii - jj).astype(np.float32))


def test_int32_data_from_loop_variables_still_wraps() -> None:
    """Only addresses are computed in i64: integer data computed from loop variables keeps
    int32 arithmetic, wrapping as NumPy's int32 does (and as ``evaluate`` does)."""
    n = 40
    B = make_buffer("B", n, int32)
    i = Var("i", int32, "axis")
    big = i * c32(123_456_789)  # wraps past i = 17
    val = Binary(Op.FLOORMOD, Binary(Op.FLOORDIV, big, c32(1000)), c32(9973))
    for kind in (ForKind.SERIAL, ForKind.VECTORIZED):
        f = build_lowered(func(f"wrap_{kind.name}", [], [B], loop(i, n, Store(B, i, val), kind)))
        b = np.zeros(n, np.int32)
        f(b)
        with np.errstate(over="ignore"):
            want = (np.arange(n, dtype=np.int32) * np.int32(123_456_789)) // 1000 % 9973
        np.testing.assert_array_equal(b, want)


@pytest.mark.parametrize("through_let", [False, True])
def test_vector_access_with_one_address_emits_no_index_vector(through_let: bool) -> None:
    """A vectorized read or write whose lanes are consecutive (or 2 apart) computes its
    first lane's address as a scalar: no vector of indices is built to take its first
    element (also through a let that depends on the lanes)."""
    n, m = 24, 16
    A, B = make_buffer("A", 2 * n * m, float32), make_buffer("B", n * m, float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    t = Var("t", int32)
    col = t if through_let else j * 2
    store = Store(B, i * m + j, A[i * 2 * m + col] + A[i * 2 * m + j + m])
    inner = LetStmt(t, j * 2, store) if through_let else store
    f = build_lowered(func(f"one_address_{through_let}", [A], [B],
                           loop(i, n, loop(j, m, inner, ForKind.VECTORIZED))))
    assert f._kernel.sources.notes == ("vectorized j",)
    raw = f.get_source("ll.raw")
    assert "extractelement" not in raw
    if not through_let:  # (a let's vector value is computed where it is bound)
        assert not re.search(r"= (add|mul|insertelement) <\d+ x i32>", raw), raw
    a = RNG.standard_normal(2 * n * m).astype(np.float32)
    b = np.zeros(n * m, np.float32)
    f(a, b)
    a2 = a.reshape(n, 2 * m)
    np.testing.assert_array_equal(b.reshape(n, m), a2[:, 0:2 * m:2] + a2[:, m:])


def test_vector_read_at_a_row_given_by_data_is_one_vector_load() -> None:
    """``W[I[i] * m + j]`` vectorized over j (an embedding's rows): the row is read once
    and the lanes are one vector load at its first lane's address (no gather)."""
    n, m, rows = 6, 16, 10
    W, rows_of = make_buffer("W", rows * m, float32), make_buffer("I", n, int32)
    B = make_buffer("B", n * m, float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    body = loop(i, n, loop(j, m, Store(B, i * m + j, W[rows_of[i] * m + j] * 2.0),
                           ForKind.VECTORIZED))
    f = build_lowered(func("rows", [W, rows_of], [B], body))
    raw = f.get_source("ll.raw")
    assert "gather" not in raw and "extractelement" not in raw
    w = RNG.standard_normal(rows * m).astype(np.float32)
    ix = np.array([3, 0, 9, 3, 5, 1], np.int32)
    b = np.zeros(n * m, np.float32)
    f(w, ix, b)
    np.testing.assert_array_equal(b.reshape(n, m), w.reshape(rows, m)[ix] * 2)


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.VECTORIZED])
def test_a_read_that_feeds_a_store_to_its_buffer_is_not_reused_after_it(kind: ForKind) -> None:
    """acc = -inf; acc = max(acc, A); out = acc: the read of acc made for the update is
    stale once the update is stored (a cache_write'd max reduction of one element gave
    -inf: the store forgot the reads of its buffer before computing its value, not after)."""
    A, acc = make_buffer("A", 8, float32), make_buffer("acc", 8, float32)
    out = make_buffer("out", 8, float32)
    i = Var("i", int32, "axis")
    body = loop(i, 8, seq(Store(acc, i, Const(float("-inf"), float32)),
                          Store(acc, i, Binary(Op.MAX, acc[i], A[i])),
                          Store(out, i, acc[i])), kind)
    f = build_lowered(func(f"stale_{kind.name}", [A], [out], Allocate(acc, "global", body)))
    a = RNG.standard_normal(8).astype(np.float32)
    got = np.zeros(8, np.float32)
    f(a, got)
    np.testing.assert_array_equal(got, a)


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.UNROLLED])
def test_a_read_before_a_loop_is_not_reused_by_a_loop_storing_to_its_buffer(
        kind: ForKind) -> None:
    """out = A[0]; for i: A[0] = A[0] + B[i]: the loop body is emitted once and runs four
    times, so the read of A[0] made before the loop is stale from its second iteration
    (A[0] came out as A[0] + B[3], not A[0] + sum(B))."""
    A, B, C = make_buffer("A", 1, float32), make_buffer("B", 4, float32), \
        make_buffer("C", 1, float32)
    i = Var("i", int32, "axis")
    body = seq(Store(C, c32(0), A[c32(0)]),
               loop(i, 4, Store(A, c32(0), A[c32(0)] + B[i]), kind))
    f = build_lowered(func(f"running_{kind.name}", [B], [A, C], body))
    a, c = np.array([1.0], np.float32), np.zeros(1, np.float32)
    f(np.array([1, 2, 3, 4], np.float32), a, c)
    assert a[0] == 11.0 and c[0] == 1.0


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED])
def test_a_read_before_a_branch_storing_to_its_buffer_is_not_reused_after_it(
        kind: ForKind) -> None:
    """C[i] = A[i]; if (B[i] > 0) A[i] = 5; D[i] = 2 * A[i]: after the branch (a masked one
    in vector code) A[i] is read again. The class of the two bugs above: a read memoized
    across code that may store to its buffer."""
    n = 16
    A, B, C, D = (make_buffer(x, n, float32) for x in "ABCD")
    i = Var("i", int32, "axis")
    body = loop(i, n, seq(Store(C, i, A[i]),
                          IfThenElse(fold.compare(Op.GT, B[i], Const(0.0, float32)),
                                     Store(A, i, Const(5.0, float32))),
                          Store(D, i, A[i] * 2.0)), kind)
    f = build_lowered(func(f"branch_{kind.name}", [B], [A, C, D], body))
    a = np.arange(n, dtype=np.float32)
    b = np.where(np.arange(n) % 2 == 0, 1.0, -1.0).astype(np.float32)
    c, d = np.zeros(n, np.float32), np.zeros(n, np.float32)
    a0 = a.copy()
    f(b, a, c, d)
    np.testing.assert_array_equal(c, a0)
    np.testing.assert_array_equal(d, np.where(b > 0, 5.0, a0) * 2)


def _memo_program(rng: np.random.Generator, n: int = 6) -> LoweredFunc:
    """A random sequence of stores and reads of three small float64 buffers (X read only;
    A and B read and written) inside serial, unrolled and vectorized loops and branches:
    what the emitter's memo of loads must get right (a read stays valid only until a
    store to its buffer, in this iteration or the next)."""
    X, A, B = (make_buffer(name, n, DTYPES["float64"]) for name in "XAB")
    loop_vars = [Var(name, int32, "axis") for name in ("i", "j")]

    def index(bound: list[Var]) -> Expr:
        # (constant indices from a few: a read and a store of one element meet often)
        return bound[int(rng.integers(len(bound)))] if bound and rng.random() < 0.5 \
            else c32(int(rng.integers(3)))

    def value(bound: list[Var]) -> Expr:
        e: Expr = Const(float(rng.integers(-3, 4)), DTYPES["float64"])
        for _ in range(int(rng.integers(1, 4))):
            read = [X, A, B][int(rng.integers(3))][index(bound)]
            e = e + read if rng.random() < 0.6 else e * 0.5 + read
        return e

    def block(depth: int, bound: list[Var]) -> Stmt:
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            r = rng.random()
            if r < 0.3 and depth < 2:
                kind = [ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED][int(rng.integers(3))]
                v = loop_vars[depth]
                parts.append(loop(v, n, block(depth + 1, [*bound, v]), kind))
            elif r < 0.4:
                cond = fold.compare(Op.GT, X[index(bound)], Const(0.0, DTYPES["float64"]))
                parts.append(IfThenElse(cond, block(depth + 1, bound) if depth < 2 else
                                        Store(A, index(bound), value(bound))))
            else:
                parts.append(Store([A, B][int(rng.integers(2))], index(bound), value(bound)))
        return seq(*parts)

    return func("memo", [X], [A, B], block(0, []))


def test_memoized_loads_match_the_interpreter() -> None:
    """Random store and read sequences (``_memo_program``), compiled and interpreted."""
    rng = np.random.default_rng(2026)
    for case in range(150):  # (case 144 caught a1746bd's bug)
        fn = _memo_program(rng)
        _same_as_interpreter(fn, build_lowered(LoweredFunc(f"memo{case}", fn.params, fn.body)),
                             rng)


def _same_as_interpreter(fn: LoweredFunc, f: BuiltFunction, rng: np.random.Generator
                         ) -> None:
    """``f`` (``fn`` compiled) and the loop interpreter on random X, A and B (six
    float64 each) leave the same A and B."""
    x = rng.standard_normal(6)
    a0, b0 = rng.standard_normal(6), rng.standard_normal(6)
    got = [x.copy(), a0.copy(), b0.copy()]
    want = [x.copy(), a0.copy(), b0.copy()]
    f(*got)
    run_lowered(fn, want)
    for g, w in zip(got[1:], want[1:]):
        np.testing.assert_allclose(g, w, rtol=1e-12, atol=1e-12, err_msg=format_func(fn))


def _memo_parallel_program(rng: np.random.Generator, n: int = 6) -> LoweredFunc:
    """``_memo_program``'s stores and reads, in top-level nests of which some are parallel
    loops: race free (an iteration of a parallel loop over ``v`` stores only to ``A[v]``
    and ``B[v]`` and reads ``A``/``B`` only there; ``X`` anywhere), with serial,
    unrolled and vectorized loops and branches inside, and stores and loops between the
    nests that read what the nests wrote."""
    f64 = DTYPES["float64"]
    X, A, B = (make_buffer(name, n, f64) for name in "XAB")
    v, j = Var("v", int32, "axis"), Var("j", int32, "axis")

    def value(own: Expr | None, bound: list[Var]) -> Expr:
        """Reads of X at any index, of A and B at ``own`` (anywhere when None)."""
        e: Expr = Const(float(rng.integers(-3, 4)), f64)
        for _ in range(int(rng.integers(1, 4))):
            t = [X, A, B][int(rng.integers(3))]
            if t is X or own is None:
                ix = bound[int(rng.integers(len(bound)))] if bound and rng.random() < 0.5 \
                    else c32(int(rng.integers(3)))
            else:
                ix = own
            e = e + t[ix] if rng.random() < 0.6 else e * 0.5 + t[ix]
        return e

    def body(depth: int, bound: list[Var]) -> Stmt:
        parts = []
        for _ in range(int(rng.integers(1, 4))):
            r = rng.random()
            if r < 0.25 and depth < 2:
                kind = [ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED][int(rng.integers(3))]
                parts.append(loop(j, n, body(depth + 1, [*bound, j]), kind))
            elif r < 0.35:
                cond = fold.compare(Op.GT, X[bound[-1]], Const(0.0, f64))
                parts.append(IfThenElse(cond, Store(A, v, value(v, bound))))
            else:
                parts.append(Store([A, B][int(rng.integers(2))], v, value(v, bound)))
        return seq(*parts)

    def serial(bound: list[Var]) -> Stmt:
        """Code outside parallel loops: stores anywhere, or a serial loop's."""
        if rng.random() < 0.7:
            return seq(*(Store([A, B][int(rng.integers(2))], c32(int(rng.integers(3))),
                               value(None, bound)) for _ in range(int(rng.integers(1, 3)))))
        return loop(v, n, Store(B, v, value(None, [*bound, v])))

    def region() -> Stmt:
        return loop(v, n, body(1, [v]), ForKind.PARALLEL)

    def nest() -> Stmt:
        r = rng.random()
        if r < 0.35:
            return region()
        if r < 0.8:
            # a serial loop around regions, serial code between them: what it reads before
            # a region is stale after it
            parts = [serial([t])]
            for _ in range(int(rng.integers(1, 3))):
                parts += [region(), serial([t])]
            return loop(t, 2, seq(*parts))
        return serial([])

    t = Var("t", int32, "axis")
    return func("memo_par", [X], [A, B], seq(*(nest() for _ in range(int(rng.integers(2, 5))))))


def test_memoized_loads_in_parallel_and_outlined_nests_match_the_interpreter(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """``_memo_parallel_program``s, compiled (every other one with each nest outlined into
    a function of its own) and interpreted: a read memoized in one nest or parallel body
    must not survive into the next, nor a store in another function be missed."""
    from tex.codegen import parallel
    rng = np.random.default_rng(2027)
    for case in range(48):
        fn = _memo_parallel_program(rng)
        monkeypatch.setattr(parallel, "OUTLINE_MIN_NESTS", 0 if case % 2 else 64)
        f = build_lowered(LoweredFunc(f"memo_par{case}", fn.params, fn.body))
        if case % 2 and parallel.loop_nests(fn.body):
            assert ".nest" in f.get_source("ll.raw"), case
        _same_as_interpreter(fn, f, rng)


def test_cache_written_reduction_of_one_element() -> None:
    """The fuzzer's program: C0[] = max(0.5, k in [0, 1)) through a local copy."""
    P0 = tex.placeholder((), "float64", name="P0")
    k = tex.reduce_axis((0, 1), name="k")
    C0 = tex.compute((), lambda: tex.max(tex.const(0.5, "float64"), axis=k), name="C0")
    s = tex.create_schedule(C0.op)
    s.cache_write(C0, "local")
    f = tex.build(s, [P0, C0])
    out = np.zeros((), np.float64)
    f(np.zeros((), np.float64), out)
    assert out == 0.5


def test_hazards_take_the_ranges_of_the_nest_being_emitted() -> None:
    """One loop variable in two nests, over [0, 4) and over [0, 8): A[i] (4 elements) is
    safe to read eagerly in the first and not in the second, where a select guards it. The
    analysis forgets between nests what it concluded (A[i] is one interned expression)."""
    A = make_buffer("A", 4, float32)
    B, C = make_buffer("B", 4, float32), make_buffer("C", 8, float32)
    i = Var("i", int32, "axis")
    read = A[i]
    first = loop(i, 4, Store(B, i, read * 2.0))
    second = loop(i, 8, Store(C, i, Select(fold.compare(Op.LT, i, 4), read, Const(0.0, float32))))
    fn = func("two_ranges", [A], [B, C], seq(first, second))
    m = ModuleEmitter(fn, CodegenOptions(), ir.Module(name="t"), 16)
    m.begin_nest(first)
    assert m.safe(read)
    m.begin_nest(second)
    assert not m.safe(read) and m.hazard(read)
    f = build_lowered(fn)
    a = RNG.standard_normal(4).astype(np.float32)
    b, c = np.zeros(4, np.float32), np.full(8, np.nan, np.float32)
    f(a, b, c)
    np.testing.assert_array_equal(b, a * np.float32(2))
    np.testing.assert_array_equal(c, np.concatenate([a, np.zeros(4, np.float32)]))


def test_reads_survive_stores_to_other_buffers() -> None:
    """Unrolled stores to B all read A[i]: A is loaded once per row (a store to B cannot
    change A: buffers never overlap). S[i] accumulated by unrolled stores to S is loaded
    again after each store to it, and the numbers are those of the loops."""
    n, m = 5, 6
    A, S = make_buffer("A", n, float32), make_buffer("S", n, float32)
    B = make_buffer("B", n * m, float32)
    i, j, k = (Var(name, int32, "axis") for name in "ijk")
    body = loop(i, n, seq(
        loop(j, m, Store(B, i * m + j, A[i] * Cast(float32, j)), ForKind.UNROLLED),
        loop(k, m, Store(S, i, S[i] + A[i] * B[i * m + k]), ForKind.UNROLLED)))
    f = build_lowered(func("reuse", [A], [B, S], body))
    raw = f.get_source("ll.raw")
    assert len(re.findall(r"= load float, ptr %\"A\.ptr", raw)) == 1  # (one block)
    assert len(re.findall(r"= load float, ptr %\"S\.ptr", raw)) == m
    a = sample(float32, n)
    b, acc = np.zeros(n * m, np.float32), np.ones(n, np.float32)
    f(a, b, acc)
    want_b = a[:, None] * np.arange(m, dtype=np.float32)
    np.testing.assert_array_equal(b.reshape(n, m), want_b)
    want = np.ones(n, np.float32)
    for kk in range(m):
        want = want + a * want_b[:, kk]
    np.testing.assert_allclose(acc, want, rtol=1e-6)  # (LLVM may contract into an FMA)


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.UNROLLED, ForKind.VECTORIZED,
                                  ForKind.PARALLEL])
def test_read_after_a_loop_that_stores_to_its_buffer_loads_again(kind: ForKind) -> None:
    """X[0] read before and after a loop that stores to X (in this function, or in a
    parallel region's function of its own): the second read sees the loop's values, not
    the first read's (the memo of loads keeps reads across stores to other buffers)."""
    n = 1 << 12 if kind is ForKind.PARALLEL else 16
    X = make_buffer("X", n, float32)
    first, second = make_buffer("first", 1, float32), make_buffer("second", 1, float32)
    i = Var("i", int32, "axis")
    zero = c32(0)
    body = seq(Store(first, zero, X[zero] + 1.0),
               loop(i, n, Store(X, i, Const(5.0, float32)), kind),
               Store(second, zero, X[zero] + 1.0))
    f = build_lowered(func("reload", [], [X, first, second], body))
    x, a, b = np.zeros(n, np.float32), np.zeros(1, np.float32), np.zeros(1, np.float32)
    f(x, a, b)
    assert (a[0], b[0]) == (1.0, 6.0) and (x == 5.0).all()


_INVARIANT_REDUCTIONS = """
import sys
import numpy as np
import tex
from tex.testing import evaluate
P0 = tex.placeholder((3,), "float32", name="P0")
p0 = np.array([0.5, -2.0, 3.0], np.float32)
for red in (tex.max, tex.min):
    for n0, n1 in ((4, 7), (5, 4), (2, 16), (3, 3)):
        k0 = tex.reduce_axis((0, n0), name="k0")
        k1 = tex.reduce_axis((0, n1), name="k1")
        C0 = tex.compute((3, 6, 3), lambda a, b, c: red(P0[k0 % 3], axis=[k0, k1]),
                         name="C0")
        out = np.zeros((3, 6, 3), np.float32)
        tex.build([C0])(p0, out)
        np.testing.assert_array_equal(out, evaluate(C0, {P0: p0}))
print("built")
"""


def test_invariant_reductions_in_plain_nests_build() -> None:
    """A max or min reduction whose value does not depend on the outer loops of a plain
    (unscheduled) nest: LLVM unrolls the reduction's loops whole and then vectorized the
    loop around them, where LLVM 22's VPlan walks the chain of uses as a tree (3**28 steps
    for 4 x 7 elements: a build that never ended, found by the fuzzer). Loops around
    longer loops carry a hint keeping LLVM's vectorizer off (``FunctionEmitter.counted``).
    Built in a child process, so that a regression fails instead of hanging the suite."""
    import os
    import subprocess
    import sys

    env = {**os.environ, "TEX_CACHE_DIR": "none"}  # (compiled, not found on disk)
    run = subprocess.run([sys.executable, "-c", _INVARIANT_REDUCTIONS], capture_output=True,
                         text=True, timeout=60, env=env)
    assert run.returncode == 0 and "built" in run.stdout, run.stderr[-2000:]


def test_vectorize_falls_back_when_lanes_would_interfere() -> None:
    """B[i] = B[i + 1] + 1 reads what the next iteration writes: must stay sequential."""
    n = 12
    B = make_buffer("B", n + 1, float32)
    i = Var("i", int32, "axis")
    body = Store(B, i, B[i + 1] + 1.0)
    f = build_lowered(func("carried", [], [B], loop(i, n, body, ForKind.VECTORIZED)))
    (note,) = f._kernel.sources.notes
    assert note.startswith("scalar i:")
    b = np.arange(n + 1, dtype=np.float32)
    want = b.copy()
    for k in range(n):
        want[k] = want[k + 1] + 1
    f(b)
    np.testing.assert_array_equal(b, want)


def test_vectorized_body_with_private_allocation() -> None:
    """Each lane gets its own copy of a temporary allocated inside the vectorized loop."""
    n, m = 19, 3
    A, B = make_buffer("A", n * m, float32), make_buffer("B", n, float32)
    T = make_buffer("T", m, float32)
    i, k, j = Var("i", int32, "axis"), Var("k", int32, "axis"), Var("j", int32, "axis")
    body = Allocate(T, "local", seq(
        loop(k, m, Store(T, k, A[i * m + k] * 2.0)),
        Store(B, i, Const(0.0, float32)),
        loop(j, m, Store(B, i, B[i] + T[fold.binary(Op.SUB, c32(m - 1), j)] * Cast(float32, j))),
    ))
    f = build_lowered(func("private", [A], [B], loop(i, n, body, ForKind.VECTORIZED)))
    assert f._kernel.sources.notes == ("vectorized i",)
    a = RNG.standard_normal(n * m).astype(np.float32)
    b = np.zeros(n, np.float32)
    f(a, b)
    t = a.reshape(n, m) * 2
    np.testing.assert_allclose(b, (t[:, ::-1] * np.arange(m)).sum(1), rtol=1e-6)


def test_vectorize_falls_back_for_variable_extent() -> None:
    n = Var("n", int32)
    A, B = make_buffer("A", 8, float32), make_buffer("B", 8, float32)
    i = Var("i", int32, "axis")
    var_extent = For(i, c32(0), n, ForKind.VECTORIZED, Store(B, i, A[i] + 1.0))
    f = build_lowered(func("var_vec", [A], [B], var_extent, scalars=[n]))
    assert "extent" in f._kernel.sources.notes[0]
    a = RNG.standard_normal(8).astype(np.float32)
    b = np.zeros(8, np.float32)
    f(a, 8, b)
    np.testing.assert_array_equal(b, a + np.float32(1))


def _latch_hints(raw: str) -> list[str]:
    """The ``llvm.loop`` options of each loop latch in ``raw`` (LLVM IR text), in order."""
    nodes = dict(re.findall(r"^(![0-9]+) = (.*)$", raw, re.M))
    hints = []
    for ref in re.findall(r"!llvm\.loop (![0-9]+)", raw):
        options = re.findall(r"![0-9]+", nodes[ref])[1:]  # the first is the ID itself
        hints.append(" ".join(sorted(nodes[o] for o in options)))
    return hints


def _vector_ops(ir_text: str, op: str) -> int:
    """How many ``op`` instructions on float vectors ``ir_text`` holds."""
    return len(re.findall(rf"= {op}\b[^<\n]*<[0-9]+ x float>", ir_text))


@pytest.mark.parametrize("rows, taps, hinted", [(8, 3, True), (4, 3, False), (2, 7, False)])
def test_scheduled_nest_outer_loops_are_not_unrolled_by_llvm(rows: int, taps: int,
                                                              hinted: bool) -> None:
    # a nest the schedule shaped (a vectorized inner loop): a loop around a longer loop
    # nest keeps its shape (LLVM at O3 unrolled outer loops of full unrolls, multiplying
    # the code); the innermost loop (k, the taps) is still LLVM's to unroll, and so is a
    # small nest (at most SMALL_NEST_TRIPS iterations in all: a pooling window)
    from tex.codegen.emit import SMALL_NEST_TRIPS

    assert hinted == (rows * taps > SMALL_NEST_TRIPS)
    A = make_buffer("A", rows * taps * 8, float32)
    B = make_buffer("B", rows * 8, float32)
    i, k, j = (Var(n, int32, "axis") for n in "ikj")
    row = Store(B, i * 8 + j, B[i * 8 + j] + A[(i * taps + k) * 8 + j] * 3.0)
    body = loop(i, rows, loop(k, taps, loop(j, 8, row, ForKind.VECTORIZED)))
    f = build_lowered(func("scheduled_nest", [A], [B], body))
    assert _latch_hints(f.get_source("ll.raw")) == ([
        '!{ !"llvm.loop.unroll.disable" } !{ !"llvm.loop.vectorize.enable", i1 0 }']
        if hinted else [])
    # i kept as a loop: one row's taps; else all unrolled
    assert _vector_ops(f.get_source("ll"), "fmul") == (taps if hinted else rows * taps)
    rng = np.random.default_rng(rows * 100 + taps)
    a = rng.standard_normal(rows * taps * 8).astype(np.float32)
    b = rng.standard_normal(rows * 8).astype(np.float32)
    # exact sums in float64; each of the taps' (fused) multiply-adds rounds the float32
    # accumulator once, so the error bound is taps roundings of the largest partial sum
    want = b.reshape(rows, 8).astype(np.float64) + \
        3.0 * a.reshape(rows, taps, 8).astype(np.float64).sum(axis=1)
    bound = taps * 2.0 ** -23 * (np.abs(b).reshape(rows, 8) +
                                 3 * np.abs(a).reshape(rows, taps, 8).sum(axis=1))
    f(a, b)
    err = np.abs(b.reshape(rows, 8) - want)
    assert (err <= bound).all(), (err.max(), bound.min())


def test_plain_nest_is_left_to_llvm() -> None:
    # every loop serial: no hints, and LLVM's loop vectorizer makes vectors of it (what a
    # TVM user's unscheduled loop gets there)
    A, B = make_buffer("A", 256, float32), make_buffer("B", 256, float32)
    i = Var("i", int32, "axis")
    f = build_lowered(func("plain_nest", [A], [B], loop(i, 256, Store(B, i, A[i] * 3.0))))
    assert _latch_hints(f.get_source("ll.raw")) == []
    assert _vector_ops(f.get_source("ll"), "fmul") >= 1
    a = RNG.standard_normal(256).astype(np.float32)
    b = np.zeros(256, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a * np.float32(3))


def test_vectorized_loop_left_scalar_is_vectorized_by_llvm() -> None:
    # a variable extent keeps tex from making vectors: LLVM is asked to (a hint on that
    # loop only)
    n = Var("n", int32)
    A, B = make_buffer("A", 4 * 64, float32), make_buffer("B", 4 * 64, float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    inner = For(j, c32(0), n, ForKind.VECTORIZED, Store(B, i * 64 + j, A[i * 64 + j] * 3.0))
    f = build_lowered(func("var_vec_nest", [A], [B], loop(i, 4, inner), scalars=[n]))
    assert _latch_hints(f.get_source("ll.raw")) == ['!{ !"llvm.loop.vectorize.enable", i1 1 }']
    assert _vector_ops(f.get_source("ll"), "fmul") >= 1
    a = RNG.standard_normal(256).astype(np.float32)
    b = np.zeros(256, np.float32)
    f(a, 64, b)
    np.testing.assert_array_equal(b, a * np.float32(3))


def test_index_arithmetic_is_emitted_once_across_stores_and_unrolled_copies() -> None:
    # i * 3 feeds the six accesses of three stores and of the copies of an unrolled loop:
    # emitted once; the loads of B after each store to it are emitted again (a store may
    # change what they read)
    A, B = make_buffer("A", 12, float32), make_buffer("B", 12, float32)
    i, k = Var("i", int32, "axis"), Var("k", int32, "axis")
    body = seq(Store(B, i * 3, A[i * 3] * 2.0),
               loop(k, 2, Store(B, i * 3 + 1 + k, A[i * 3 + 1 + k] + B[i * 3 + k]),
                    ForKind.UNROLLED))
    f = build_lowered(func("cse", [A], [B], loop(i, 4, body)))
    raw = f.get_source("ll.raw")
    assert len(re.findall(r"= mul i64 %\"i\", 3", raw)) == 1
    assert len(re.findall(r"= load float, ptr %\"B\.ptr", raw)) == 2
    a = RNG.standard_normal(12).astype(np.float32)
    b = np.zeros(12, np.float32)
    f(a, b)
    want = np.zeros(12, np.float32)
    for r in range(4):
        want[3 * r] = a[3 * r] * np.float32(2)
        for c in range(2):
            want[3 * r + 1 + c] = a[3 * r + 1 + c] + want[3 * r + c]
    np.testing.assert_array_equal(b, want)


def test_unrolled_loop_and_let() -> None:
    A, B = make_buffer("A", 4 * 3, float32), make_buffer("B", 4, float32)
    i, k = Var("i", int32, "axis"), Var("k", int32, "reduce")
    s = Var("s", float32)
    body = seq(Store(B, i, Const(0.0, float32)),
               loop(k, 3, LetStmt(s, A[i * 3 + k], Store(B, i, B[i] + s * 2.0)),
                    ForKind.UNROLLED))
    f = build_lowered(func("unroll", [A], [B], loop(i, 4, body)))
    raw = f.get_source("ll.raw")
    assert "k.cond" not in raw  # no loop left for k
    a = RNG.standard_normal(12).astype(np.float32)
    b = np.zeros(4, np.float32)
    f(a, b)
    np.testing.assert_allclose(b, (a.reshape(4, 3) * 2).sum(1), rtol=1e-6)


def test_if_then_else_and_loop_offsets() -> None:
    A, B = make_buffer("A", 10, int32), make_buffer("B", 10, int32)
    i = Var("i", int32, "axis")
    body = IfThenElse(fold.compare(Op.GT, A[i], 0), Store(B, i, A[i] * 2),
                      Store(B, i, Binary(Op.SUB, c32(0), A[i])))
    f = build_lowered(func("ite", [A], [B], loop(i, 7, body, start=3)))
    a = sample(int32, 10)
    b = np.full(10, 99, np.int32)
    f(a, b)
    want = np.where(a > 0, a * 2, -a).astype(np.int32)
    np.testing.assert_array_equal(b[3:], want[3:])
    assert (b[:3] == 99).all()


def test_scalar_params_of_every_dtype() -> None:
    n = 6
    outs = []
    scalars = []
    stores = []
    i = Var("i", int32, "axis")
    for d in DTYPES.values():
        v = Var(f"s_{d}", d)
        o = make_buffer(f"o_{d}", n, d)
        scalars.append(v)
        outs.append(o)
        stores.append(Store(o, i, v))
    f = build_lowered(func("scalars", [], outs, loop(i, n, seq(*stores)), scalars=scalars))
    values = {"float16": 1.5, "float32": -2.25, "float64": 1e100, "int8": -7, "int16": 300,
              "int32": -70000, "int64": 2**40, "uint8": 250, "bool": True}
    arrays = [np.zeros(n, d.numpy) for d in DTYPES.values()]
    f(*(values[d.name] for d in DTYPES.values()), *arrays)
    for d, arr in zip(DTYPES.values(), arrays):
        assert (arr == np.array(values[d.name], d.numpy)).all(), d


def test_bool_buffers() -> None:
    A, M, B = make_buffer("A", N, boolean), make_buffer("M", N, boolean), \
        make_buffer("B", N, boolean)
    i = Var("i", int32, "axis")
    body = Store(B, i, fold.binary(Op.OR, fold.binary(Op.AND, A[i], M[i]),
                                   fold.logical_not(A[i])))
    for kind in KINDS:
        f = build_lowered(func(f"bools_{kind.name}", [A, M], [B], loop(i, N, body, kind)))
        a, m = RNG.random(N) < 0.5, RNG.random(N) < 0.5
        b = np.zeros(N, bool)
        f(a, m, b)
        np.testing.assert_array_equal(b, (a & m) | ~a)
        assert b.view(np.uint8).max() <= 1  # stored as 0/1 bytes


def test_thread_loops_are_refused_on_the_cpu() -> None:
    A = make_buffer("A", 8, float32)
    i = Var("i", int32, "axis")
    body = For(i, c32(0), c32(8), ForKind.THREAD, Store(A, i, Const(1.0, float32)),
               "blockIdx.x")
    with pytest.raises(ValueError, match=r"blockIdx\.x.*target='cuda'"):
        build_lowered(func("gpu", [], [A], body))


def test_fastmath_flags_only_when_asked() -> None:
    A, B = make_buffer("A", 8, float32), make_buffer("B", 8, float32)
    i = Var("i", int32, "axis")
    body = loop(i, 8, Store(B, i, A[i] * 2.0 + 1.0))
    plain = build_lowered(func("fm", [A], [B], body))
    fast = build_lowered(func("fm", [A], [B], body), fastmath=True)
    assert " fast " not in plain.get_source("ll.raw")
    assert "fmul fast" in fast.get_source("ll.raw")
    a = RNG.standard_normal(8).astype(np.float32)
    b = np.zeros(8, np.float32)
    fast(a, b)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)


def test_dumps_llvm_texts(capsys: pytest.CaptureFixture[str]) -> None:
    A, B = make_buffer("A", 4, float32), make_buffer("B", 4, float32)
    i = Var("i", int32, "axis")
    body = loop(i, 4, Store(B, i, A[i] + 3.0))
    with debug.config(dump="llvm,llvm.opt,asm"):
        build_lowered(func("dumped_once", [A], [B], body))
    err = capsys.readouterr().err
    for name in ("llvm", "llvm.opt", "asm"):
        assert f"=== {name} ===" in err
    assert "define void @dumped_once" in err


@pytest.mark.parametrize(("n", "k", "factor"), [(64, 2, 8), (37, 2, 8), (48, 3, 8),
                                                 (64, 4, 16), (30, 2, 16)])
def test_vector_load_indexed_by_lane_floordiv(n: int, k: int, factor: int) -> None:
    """``A[i // k]`` in a vectorized loop: a load of n/k lanes duplicated k times (or a
    gather where the chunk's base is not a multiple of k) gives NumPy's values."""
    A = tex.placeholder((n,), "float32", name="A")
    B = tex.compute((n,), lambda i: A[i // k] * 2.0, name="B")
    s = tex.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=factor)
    s[B].vectorize(inner)
    f = tex.build(s, [A, B])
    a = np.arange(n, dtype="float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a[np.arange(n) // k] * 2)
    if n % factor == 0 and factor % k == 0:  # no guarded remainder: no gather at all
        assert "gather" not in f.get_source("ll")


@pytest.mark.parametrize(("n", "stride", "factor"), [(32, 2, 8), (30, 3, 8), (40, 4, 16),
                                                      (21, 2, 16)])
def test_vector_load_with_small_stride(n: int, stride: int, factor: int) -> None:
    """``A[stride * i + 1]`` in a vectorized loop: one load of the span and a shuffle (no
    element past the last one read is touched: the span ends at the buffer's end)."""
    A = tex.placeholder((stride * n,), "float32", name="A")
    B = tex.compute((n,), lambda i: A[stride * i + (stride - 1)] + 1.0, name="B")
    s = tex.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=factor)
    s[B].vectorize(inner)
    f = tex.build(s, [A, B])
    a = np.arange(stride * n, dtype="float32")
    b = np.zeros(n, "float32")
    f(a, b)
    np.testing.assert_array_equal(b, a[stride * np.arange(n) + stride - 1] + 1)
    if n % factor == 0:
        assert "gather" not in f.get_source("ll")


def test_store_of_a_lane_invariant_value_at_a_strided_index() -> None:
    """Regression: a store with lane stride 2 of a scalar value once took the strided-load
    path and produced invalid IR (LLVM aborted the process)."""
    n = 16
    A = tex.placeholder((1,), "float32", name="A")
    B = tex.compute((2 * n,), lambda i: tex.if_then_else(i % 2 == 0, A[0], 0.0), name="B")
    s = tex.create_schedule(B.op)
    _, inner = s[B].split(B.op.axis[0], factor=8)
    s[B].vectorize(inner)
    f = tex.build(s, [A, B])
    b = np.ones(2 * n, "float32")
    f(np.array([3.0], "float32"), b)
    np.testing.assert_array_equal(b, np.where(np.arange(2 * n) % 2 == 0, 3.0, 0.0))


def test_emit_llvm_for_a_given_host() -> None:
    """``emit_llvm(func, host=...)`` emits for that CPU: its triple, and vector code as
    wide as its registers (twice the register, as for the host)."""
    from dataclasses import replace

    from tex.codegen.llvm import emit_llvm
    from tex.lower.legalize import legalize

    A = tex.placeholder((64,), name="A")
    B = tex.compute((64,), lambda i: A[i] * 2.0, name="B")
    s = tex.create_schedule(B.op)
    s[B].vectorize(s[B].split(B.op.axis[0], factor=64)[1])
    func = legalize(tex.lower(s, [A, B]), "llvm")
    host = host_target()
    for bits in (128, 512):
        other = replace(host, triple="x86_64-golden-linux-gnu", vector_bits=bits)
        text = emit_llvm(func, host=other)[0]
        assert 'target triple = "x86_64-golden-linux-gnu"' in text
        assert f"<{2 * bits // 32} x float>" in text
        assert f"<{4 * bits // 32} x float>" not in text


def test_cpu_info_is_the_host_as_llvm_sees_it() -> None:
    """``tex.target.cpu_info`` runs the LLVM probe itself (``tex.codegen.host``, imported
    at its first call; nothing registered at import that an import order could miss): the
    host's CPU name, vector width and FMA. A target with no CPU is refused, not answered
    with a generic one."""
    from tex.codegen.host import host_cpu_info
    from tex.target import cpu_info

    host = host_target()
    info = cpu_info("llvm")
    assert info == cpu_info("cpu") == cpu_info() == host_cpu_info()
    assert (info.name, info.vector_bits) == (host.cpu, host.vector_bits)
    assert info.fma == ("+fma" in host.features.split(","))
    with pytest.raises(ValueError, match="no CPU"):
        cpu_info("cuda")


def test_lane_invariant_load_under_a_mask_is_one_scalar_load() -> None:
    """``if (A[i] > 0) B[i] = A[i] + C[k]`` vectorized over ``i``: ``C[k]`` is the same for
    every lane, read once (when some lane is on), not gathered from eight equal addresses;
    with no lane on it is not read at all (``k`` past the end here)."""
    n = 13
    A, B = make_buffer("A", n, float32), make_buffer("B", n, float32)
    C = make_buffer("C", 2, float32)
    i = Var("i", int32, "axis")
    k = Var("k", int32, "axis")
    # k = 0 and 1 read C; k = 2 reads far out of bounds, with no lane on by then
    body = loop(k, 3, loop(i, n, IfThenElse(
        fold.compare(Op.GT, A[i] - fold.cast(float32, k), 0.0),
        Store(B, i, B[i] + C[fold.binary(Op.MIN, k, 1) + k // 2 * FAR]),
    ), ForKind.VECTORIZED))
    f = build_lowered(func("uniform", [A, C], [B], body))
    raw = f.get_source("ll.raw")
    assert "llvm.masked.gather" not in raw and "llvm.vector.reduce.or" in raw
    a = np.linspace(-0.5, 1.5, n).astype(np.float32)
    c = np.array([10.0, 100.0], np.float32)
    b = np.zeros(n, np.float32)
    f(a, c, b)
    want = np.where(a > 0, 10, 0) + np.where(a > 1, 100, 0)
    np.testing.assert_array_equal(b, want.astype(np.float32))


# --------------------------------------------------------------------------------------
# Smaller IR: constants folded as built, identical outlined code emitted once
# --------------------------------------------------------------------------------------

def test_folding_builder_folds_integer_constants_exactly() -> None:
    import llvmlite.ir as ir

    from tex.codegen.builder import FoldingBuilder, int_values

    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [ir.IntType(32)]), "f")
    b = FoldingBuilder(fn.append_basic_block("entry"))
    i8, i32, i1 = ir.IntType(8), ir.IntType(32), ir.IntType(1)
    x = fn.args[0]
    k = lambda t, v: ir.Constant(t, v)  # noqa: E731
    assert int_values(b.add(k(i32, 2**31 - 1), k(i32, 1))) == [-2**31]  # wraps
    assert int_values(b.sub(k(i8, -128), k(i8, 1))) == [127]
    assert int_values(b.mul(k(i32, 0), k(i32, 48))) == [0]
    assert int_values(b.zext(k(i8, -1), i32)) == [255]
    assert int_values(b.sext(k(i8, -1), i32)) == [-1]
    assert int_values(b.trunc(k(i32, 300), i8)) == [44]
    assert int_values(b.icmp_unsigned("<", k(i8, -1), k(i8, 1))) == [0]  # 255 < 1
    assert int_values(b.icmp_signed("<", k(i8, -1), k(i8, 1))) == [-1]  # true
    assert str(b.xor(k(i1, True), k(i1, True))) == "i1 false"
    assert int_values(b.zext(k(i1, True), i8)) == [1]
    assert int_values(b.sext(k(i1, True), i8)) == [-1]
    v = ir.VectorType(i32, 4)
    iota = ir.Constant(v, [k(i32, j) for j in range(4)])
    lanes = b.add(ir.Constant(v, None), iota)
    assert int_values(lanes) == [0, 1, 2, 3]
    assert int_values(b.extract_element(b.mul(lanes, iota), k(i32, 3))) == [9]
    assert b.add(x, k(i32, 0)) is x and b.mul(k(i32, 1), x) is x
    assert b.select(k(i1, False), x, k(i32, 7)).constant == 7
    assert not b.block.instructions  # nothing above needed an instruction
    y = b.add(x, k(i32, 1))  # a variable operand: an instruction
    assert isinstance(y, ir.Instruction) and b.block.instructions == [y]
    f = ir.Constant(ir.FloatType(), 1.0)
    assert isinstance(b.fadd(f, f), ir.Instruction)  # float arithmetic is LLVM's


def test_unrolled_constant_indices_reach_llvm_folded() -> None:
    A, B = make_buffer("A", 4 * 8, float32), make_buffer("B", 4 * 8, float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    body = loop(i, 4, loop(j, 8, Store(B, i * 8 + j, A[i * 8 + j] + 1.0), ForKind.VECTORIZED),
                ForKind.UNROLLED)
    f = build_lowered(func("folded", [A], [B], body))
    raw = f.get_source("ll.raw")
    # no integer instruction of two constants, no lane extracted from a constant vector
    assert not re.search(r"= (add|sub|mul|sext) (nsw )?i\d+ -?\d+, -?\d+", raw)
    assert not re.search(r"= (add|mul) <\d+ x i32> <", raw)
    assert "extractelement <8 x i32> <" not in raw
    a = RNG.standard_normal(32).astype(np.float32)
    b = np.zeros(32, np.float32)
    f(a, b)
    np.testing.assert_array_equal(b, a + np.float32(1.0))


def _copies(kind: ForKind, outer: int | None = None) -> tuple[LoweredFunc, list[Tensor]]:
    """Y1 = X1 * 2, Y2 = X2 * 2 (alike: one function), Y3 = X1 * 3 and Y4 = Z * 2 on a
    longer Z (each its own); ``outer``: all inside a serial loop of that extent, the
    first two loops reading its variable (then their ranges differ: not alike)."""
    n = 64
    x1, x2, y1, y2, y3 = (make_buffer(nm, n, float32) for nm in ("X1", "X2", "Y1", "Y2", "Y3"))
    z, y4 = make_buffer("Z", 2 * n, float32), make_buffer("Y4", 2 * n, float32)
    o = Var("o", int32, "axis")

    def copy(src: Tensor, dst: Tensor, k: float, m: int, shift: Expr | None = None) -> For:
        i = Var("i", int32, "axis")
        value = src[i] * k if shift is None else src[i] * k + Cast(float32, shift)
        return loop(i, m, Store(dst, i, value), kind)

    loops = [copy(x1, y1, 2.0, n), copy(x2, y2, 2.0, n), copy(x1, y3, 3.0, n),
             copy(z, y4, 2.0, 2 * n)]
    if outer is not None:
        o2 = Var("o2", int32, "axis")
        loops[0] = loop(o, outer, copy(x1, y1, 2.0, n, o))
        loops[1] = loop(o2, outer + 1, copy(x2, y2, 2.0, n, o2))
    return func(f"copies_{kind.name}_{outer}", [x1, x2, z], [y1, y2, y3, y4], seq(*loops)), \
        [y1, y2, y3, y4]


@pytest.mark.parametrize("outer", [None, 3])
def test_identical_parallel_loops_share_one_function(outer: int | None) -> None:
    lowered, outs = _copies(ForKind.PARALLEL, outer)
    f = build_lowered(lowered)
    raw = f.get_source("ll.raw")
    bodies = re.findall(r'define internal void @"[^"]*\.par\d+\.body"', raw)
    assert len(bodies) == (3 if outer is None else 4)
    # one wrapper per closure type: (body, source, destination, error record, range),
    # and with ``outer`` the two loops reading its variable add it to theirs
    wrappers = re.findall(r'define internal void @"[^"]*\.wrapper\d+"', raw)
    assert len(wrappers) == (1 if outer is None else 2)
    x1, x2, z = (RNG.standard_normal(s).astype(np.float32) for s in (64, 64, 128))
    y = [np.zeros(o.shape, np.float32) for o in outs]
    f(x1, x2, z, *y)
    shift = np.float32(outer - 1 if outer else 0)
    np.testing.assert_array_equal(y[0], x1 * np.float32(2) + shift)
    np.testing.assert_array_equal(y[1], x2 * np.float32(2) + np.float32(outer or 0))
    np.testing.assert_array_equal(y[2], x1 * np.float32(3))
    np.testing.assert_array_equal(y[3], z * np.float32(2))


def test_identical_outlined_nests_share_one_function() -> None:
    from tex.codegen.parallel import OUTLINE_MIN_NESTS

    n, count = 8, OUTLINE_MIN_NESTS + 2
    src = make_buffer("S", n, float32)
    dsts = [make_buffer(f"D{k}", n, float32) for k in range(count)]
    loops = []
    for k, d in enumerate(dsts):
        i = Var("i", int32, "axis")
        loops.append(loop(i, n, Store(d, i, src[i] * (2.0 if k % 2 else 3.0))))
    f = build_lowered(func("many_nests", [src], dsts, seq(*loops)))
    assert len(re.findall(r'define internal void @"[^"]*\.nest\d+"', f.get_source("ll.raw"))) == 2
    s = RNG.standard_normal(n).astype(np.float32)
    out = [np.zeros(n, np.float32) for _ in dsts]
    f(s, *out)
    for k, o in enumerate(out):
        np.testing.assert_array_equal(o, s * np.float32(2.0 if k % 2 else 3.0))


def test_parallel_loops_with_different_bounds_checks_keep_their_own() -> None:
    A, B = tex.placeholder((5, 16), name="A"), tex.placeholder((5, 16), name="B")
    rows_y, rows_z = (tex.placeholder((8,), "int32", name=nm) for nm in ("I", "J"))
    Y = tex.compute((8, 16), lambda i, j: A[rows_y[i], j] * 2.0, name="Y")
    Z = tex.compute((8, 16), lambda i, j: B[rows_z[i], j] * 2.0, name="Z")
    s = tex.create_schedule([Y.op, Z.op])
    s[Y].parallel(Y.op.axis[0])
    s[Z].parallel(Z.op.axis[0])
    f = tex.build(s, [A, B, rows_y, rows_z, Y, Z])
    a, b = (RNG.standard_normal((5, 16)).astype(np.float32) for _ in range(2))
    good, bad = np.arange(8, dtype=np.int32) % 5, np.full(8, 7, np.int32)
    y, z = np.zeros((8, 16), np.float32), np.zeros((8, 16), np.float32)
    with pytest.raises(tex.testing.OutOfBoundsError, match="dimension 0 of 'B'"):
        f(a, b, good, bad, y, z)
    np.testing.assert_array_equal(y, a[good] * np.float32(2))


def test_parallel_body_is_never_inlined_into_its_wrapper() -> None:
    # inlined, LLVM optimized the body twice (alone, then inside the wrapper)
    f = build_lowered(_blocked(ForKind.PARALLEL, name="outlined_body"))
    (body,) = [line for line in f.get_source("ll.raw").splitlines()
               if line.startswith('define internal void @"outlined_body.par1.body"(')]
    assert body.endswith("noinline nounwind")
    assert "@outlined_body.par1.body(" in f.get_source("ll")  # still a function after O3
