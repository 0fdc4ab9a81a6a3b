"""tex.runtime: argument checks, the compile cache, sources, benchmarking, robustness."""
from __future__ import annotations

import threading
import time

import numpy as np
import pytest

import tex
from tex.build import build, build_lowered
from tex.dtype import DTYPES, float32, int32
from tex.ir.expr import Cast, Const, Var
from tex.ir.tensor import PlaceholderOp, Tensor
from tex.lower.stmt import (
    Allocate,
    BufferParam,
    For,
    ForKind,
    LoweredFunc,
    ScalarParam,
    Store,
    make_buffer,
    seq,
)
from tex.runtime import CACHE, load_openmp
from tex.runtime.module import BuiltFunction

from timing import seconds


def tensor(name: str, shape: tuple[int, ...], dtype=float32) -> Tensor:
    return PlaceholderOp(name, shape, dtype).output(0)


def axpy(name: str = "axpy", shape: tuple[int, ...] = (3, 4), dtype=float32,
         kind: ForKind = ForKind.SERIAL) -> LoweredFunc:
    """Y = X * alpha + n (flat loop over the elements)."""
    X, Y = tensor("X", shape, dtype), tensor("Y", shape, dtype)
    size = int(np.prod(shape))
    bx, by = make_buffer("X", size, dtype), make_buffer("Y", size, dtype)
    alpha, n = Var("alpha", dtype), Var("n", int32)
    i = Var("i", int32, "axis")
    body = For(i, Const(0, int32), Const(size, int32), kind,
               Store(by, i, bx[i] * alpha + Cast(dtype, n)))
    return LoweredFunc(name, (BufferParam(bx, X, False), ScalarParam(alpha), ScalarParam(n),
                              BufferParam(by, Y, True)), body)


@pytest.fixture(scope="module")
def f() -> BuiltFunction:
    return build_lowered(axpy())


def good_args() -> list:
    return [np.ones((3, 4), np.float32), 2.0, 3, np.zeros((3, 4), np.float32)]


def test_call_computes(f: BuiltFunction) -> None:
    x = np.arange(12, dtype=np.float32).reshape(3, 4)
    y = np.zeros((3, 4), np.float32)
    assert f(x, np.float32(0.5), np.int64(-1), y) is None
    np.testing.assert_array_equal(y, x * 0.5 - 1)


def test_args_name_and_repr(f: BuiltFunction) -> None:
    assert [a.name for a in f.args] == ["X", "alpha", "n", "Y"]
    assert isinstance(f.args[0], Tensor) and isinstance(f.args[1], Var)
    assert f.args[0].shape == (3, 4)
    assert f.name == "axpy"
    r = repr(f)
    assert "axpy(" in r and "out Y: float32[3, 4]" in r and "alpha: float32" in r


@pytest.mark.parametrize("position, value, error, pattern", [
    (0, [[1.0] * 4] * 3, TypeError, r"argument 0 \('X'\) must be a numpy.ndarray.*list.*asarray"),
    (0, np.ones((3, 4), np.float64), TypeError, r"argument 0 \('X'\).*float32, got float64"),
    (0, np.ones((4, 3), np.float32), ValueError, r"'X'\).*shape \(3, 4\), got \(4, 3\)"),
    (0, np.ones((3, 8), np.float32)[:, ::2], ValueError, r"argument 0 \('X'\).*C-contiguous"),
    (0, np.asfortranarray(np.ones((3, 4), np.float32)), ValueError, r"'X'.*C-contiguous"),
    (0, np.float32(1.0), TypeError, r"argument 0 \('X'\) must be a numpy.ndarray"),
    (1, "2.0", TypeError, r"argument 1 \('alpha'\).*number.*str"),
    (1, np.ones(1), TypeError, r"argument 1 \('alpha'\)"),
    (2, 2.5, TypeError, r"argument 2 \('n'\).*integer.*float"),
    (2, True, TypeError, r"argument 2 \('n'\).*integer"),
    (2, 2**40, ValueError, r"argument 2 \('n'\).*does not fit in int32"),
    (3, np.ones((3, 4), np.float32).view(np.int32), TypeError, r"argument 3 \('Y'\).*int32"),
    (0, np.ones((3, 4), ">f4"), TypeError, r"'X'.*non-native byte order"),
])
def test_bad_arguments_are_named(f: BuiltFunction, position: int, value, error, pattern) -> None:
    args = good_args()
    args[position] = value
    with pytest.raises(error, match=pattern):
        f(*args)


def test_read_only_output(f: BuiltFunction) -> None:
    args = good_args()
    args[3].setflags(write=False)
    with pytest.raises(ValueError, match=r"output argument 3 \('Y'\) is read-only"):
        f(*args)


def test_wrong_argument_count(f: BuiltFunction) -> None:
    with pytest.raises(TypeError, match=r"takes 4 arguments \(X: float32\[3, 4\].*3 were given"):
        f(*good_args()[:3])
    with pytest.raises(TypeError, match="takes 4 arguments"):
        f(*good_args(), None)


def test_torch_like_objects_get_a_hint(f: BuiltFunction) -> None:
    class FakeTorchTensor:
        def numpy(self) -> np.ndarray:
            return np.ones((3, 4), np.float32)

        def detach(self) -> FakeTorchTensor:
            return self

    args = good_args()
    args[0] = FakeTorchTensor()
    with pytest.raises(TypeError, match=r"'X'.*FakeTorchTensor.*detach\(\).cpu\(\).numpy\(\)"):
        f(*args)


def test_outputs_must_not_overlap_other_arguments(f: BuiltFunction) -> None:
    buf = np.zeros((3, 4), np.float32)
    with pytest.raises(ValueError, match=r"output argument 3 \('Y'\) shares memory with "
                                         r"argument 0 \('X'\)"):
        f(buf, 1.0, 0, buf)
    big = np.zeros(20, np.float32)
    x, y = big[:12].reshape(3, 4), big[6:18].reshape(3, 4)  # partial overlap
    with pytest.raises(ValueError, match="shares memory"):
        f(x, 1.0, 0, y)
    # disjoint views of one array are fine; so are inputs sharing memory with each other
    x, y = big[:12].reshape(3, 4), np.zeros((3, 4), np.float32)
    f(x, 1.0, 1, y)
    assert (y == 1).all()


def test_inputs_may_alias_each_other() -> None:
    A, B, C = (make_buffer(n, 4, float32) for n in "ABC")
    i = Var("i", int32, "axis")
    body = For(i, Const(0, int32), Const(4, int32), ForKind.VECTORIZED, Store(C, i, A[i] + B[i]))
    g = build_lowered(LoweredFunc("add_alias", (BufferParam(A, A, False), BufferParam(B, B, False),
                                                BufferParam(C, C, True)), body))
    a = np.arange(4, dtype=np.float32)
    c = np.zeros(4, np.float32)
    g(a, a, c)
    np.testing.assert_array_equal(c, 2 * a)


def test_zero_size_and_zero_dim_tensors() -> None:
    empty = build_lowered(axpy("empty", (0, 3)))
    y = np.zeros((0, 3), np.float32)
    empty(np.zeros((0, 3), np.float32), 1.0, 1, y)  # nothing to do, nothing to crash
    scalar = build_lowered(axpy("zerod", ()))
    y0 = np.zeros((), np.float32)
    scalar(np.array(4.0, np.float32), 2.0, 1, y0)
    assert y0 == 9.0


def test_cache_returns_the_same_kernel_for_the_same_work() -> None:
    f1 = build_lowered(axpy("cached"))
    f2 = build_lowered(axpy("cached"))  # new tensors and vars, same structure
    assert f1._kernel is f2._kernel
    assert f1.args[0] is not f2.args[0]  # each function lists its own tensors
    f3 = build_lowered(axpy("cached", dtype=DTYPES["float64"]))
    f4 = build_lowered(axpy("cached"), fastmath=True)
    f5 = build_lowered(axpy("cached", kind=ForKind.VECTORIZED))
    assert len({id(g._kernel) for g in (f1, f3, f4, f5)}) == 4
    assert seconds(build_lowered, axpy("cached")) < 0.05
    assert len(CACHE) <= CACHE.size


def test_var_dtypes_are_part_of_the_cache_key() -> None:
    """Two functions that print alike but differ in a loop variable's dtype."""
    funcs = []
    for d in (int32, DTYPES["int64"]):
        A = make_buffer("A", 4, float32)
        i = Var("i", d, "axis")
        funcs.append(LoweredFunc("same_text", (BufferParam(A, A, True),), For(
            i, Const(0, int32), Const(4, int32), ForKind.SERIAL,
            Store(A, i, Const(1.0, float32)))))
    assert str(funcs[0]) == str(funcs[1])
    k0, k1 = (build_lowered(fn)._kernel for fn in funcs)
    assert k0 is not k1


def test_get_source_formats(f: BuiltFunction) -> None:
    assert f.get_source("ll") == f.get_source("llvm")
    assert "define void @axpy" in f.get_source("ll")
    raw = f.get_source("ll.raw")
    assert 'define void @"axpy"' in raw and raw != f.get_source("ll")
    asm = f.get_source("asm")
    assert asm == f.get_source("s") and "axpy" in asm
    with pytest.raises(ValueError, match="unknown format 'ptx'"):
        f.get_source("ptx")


def test_benchmark_and_many_calls(f: BuiltFunction) -> None:
    args = good_args()
    t = f.benchmark(*args, number=5, repeat=3)
    assert isinstance(t, float) and 0 < t < 0.1
    t0 = time.perf_counter()
    for _ in range(1000):
        f(*args)
    per_call = (time.perf_counter() - t0) / 1000
    assert per_call < 100e-6, f"{per_call * 1e6:.1f} us per call"
    np.testing.assert_array_equal(args[3], np.full((3, 4), 5.0, np.float32))


def test_calls_from_several_threads() -> None:
    g = build_lowered(axpy("threads", (64,), kind=ForKind.PARALLEL))
    errors: list[BaseException] = []

    def work(k: int) -> None:
        try:
            x = np.full(64, k, np.float32)
            y = np.zeros(64, np.float32)
            for _ in range(50):
                g(x, 2.0, 1, y)
            np.testing.assert_array_equal(y, 2 * x + 1)
        except BaseException as e:  # noqa: BLE001 - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors


def test_failed_allocation_raises_memory_error() -> None:
    """A temporary of 2**62 bytes cannot be malloc'ed: MemoryError, no crash."""
    X, J, A = make_buffer("X", 4, float32), make_buffer("J", 4, int32), \
        make_buffer("A", 4, float32)
    T = make_buffer("T", 2**60, float32)
    i, j = Var("i", int32, "axis"), Var("j", int32, "axis")
    body = Allocate(T, "global", seq(
        For(i, Const(0, int32), Const(4, int32), ForKind.SERIAL, Store(T, i, X[i])),
        For(j, Const(0, int32), Const(4, int32), ForKind.SERIAL, Store(A, j, T[J[j]]))))
    g = build_lowered(LoweredFunc("huge", (BufferParam(X, X, False), BufferParam(J, J, False),
                                           BufferParam(A, A, True)), body))
    assert "tex_workspace_alloc" in g.get_source("ll")  # malloc when none is kept
    x, idx, a = np.arange(4, dtype=np.float32), np.array([3, 2, 1, 0], np.int32), \
        np.zeros(4, np.float32)
    with pytest.raises(MemoryError, match="huge"):
        g(x, idx, a)
    with pytest.raises(MemoryError):  # the flag was reset and is set again
        g(x, idx, a)


def test_openmp_is_found_here() -> None:
    assert load_openmp() is not None


def test_build_refuses_unknown_targets() -> None:
    # cuda exists since the GPU issue: a CPU loop nest is refused for it, naming the stage
    with pytest.raises(ValueError, match="is not bound to GPU threads"):
        build_lowered(axpy("t"), target="cuda")
    with pytest.raises(ValueError, match="unknown target 'opencl'"):
        build([], target="opencl")
    with pytest.raises(ValueError, match="unknown target"):
        build_lowered(axpy("t"), target="metal")


def test_without_openmp_parallel_loops_run_serially(monkeypatch: pytest.MonkeyPatch) -> None:
    from tex.codegen import CodegenOptions, compile_llvm
    from tex.runtime import openmp

    monkeypatch.setattr(openmp, "_result", [])
    monkeypatch.setattr(openmp, "_find", lambda: None)
    with pytest.warns(RuntimeWarning, match="libgomp"):
        assert openmp.load_openmp() is None
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")  # warned once: a second warning would raise here
        assert openmp.load_openmp() is None
    func = axpy("serial_par", (64,), kind=ForKind.PARALLEL)
    compiled = compile_llvm(func, CodegenOptions(openmp=False))
    assert "GOMP" not in compiled.llvm_ir and "i.cond" in compiled.llvm_ir


def test_build_from_a_schedule_and_from_tensors() -> None:
    import tex

    n, m, kk = 9, 6, 5
    W = tex.placeholder((m, kk), name="W")  # created first: first default argument
    X = tex.placeholder((n, kk), name="X")
    k = tex.reduce_axis((0, kk), name="k")
    T = tex.compute((n, m), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    R = tex.compute((n, m), lambda i, j: tex.sigmoid(T[i, j]), name="R")
    rng = np.random.default_rng(3)
    x = rng.standard_normal((n, kk)).astype(np.float32)
    w = rng.standard_normal((m, kk)).astype(np.float32)
    want = 1 / (1 + np.exp(-(x @ w.T)))

    f = build([R])
    assert [a.name for a in f.args] == ["W", "X", "R"] and f.name == "main"
    r = np.zeros((n, m), np.float32)
    f(w, x, r)
    np.testing.assert_allclose(r, want, rtol=1e-5, atol=1e-6)

    s = tex.create_schedule(R.op)
    jo, ji = s[R].split(R.op.axis[1], factor=4)
    s[R].vectorize(ji)
    s[R].parallel(R.op.axis[0])
    g = build(s, [X, W, R], name="dense_sigmoid")
    assert g.args == [X, W, R] and g.name == "dense_sigmoid"
    r2 = np.zeros((n, m), np.float32)
    g(x, w, r2)
    np.testing.assert_allclose(r2, want, rtol=1e-5, atol=1e-6)
    assert "vectorized j.inner" in g._kernel.sources.notes
    with pytest.raises(TypeError, match="needs args"):
        build(s)
    with pytest.raises(TypeError, match="expected a Schedule"):
        build("not a schedule")


def test_concurrent_builds() -> None:
    results: list[object] = []

    def work(k: int) -> None:
        try:
            g = build_lowered(axpy(f"concurrent{k}", (16 + k,)))
            x = np.ones(16 + k, np.float32)
            y = np.zeros(16 + k, np.float32)
            g(x, 3.0, k, y)
            results.append(bool((y == 3 + k).all()))
        except BaseException as e:  # noqa: BLE001 - reported below
            results.append(e)

    threads = [threading.Thread(target=work, args=(k,)) for k in range(6)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert results == [True] * 6


def test_exact_arguments_take_the_fast_path_and_others_the_full_checks(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Arrays of exactly the build's dtype object, shape and C strides skip the full
    checks; anything else (a subclass, a C-contiguous array whose size-1 dimension has
    another stride, an overlapping output) goes through them: same results, same errors."""
    A = tex.placeholder((1, 5), name="A")
    B = tex.compute((1, 5), lambda i, j: A[i, j] * 2.0, name="B")
    f = tex.build(tex.create_schedule(B.op), [A, B])
    a = np.arange(5, dtype=np.float32).reshape(1, 5)
    out = np.zeros((1, 5), np.float32)
    calls: list[int] = []
    checked = type(f)._checked_args
    monkeypatch.setattr(type(f), "_checked_args",
                        lambda self, arrays: calls.append(1) or checked(self, arrays))
    f(a, out)
    assert calls == [] and out.tolist() == [[0, 2, 4, 6, 8]]
    odd = np.lib.stride_tricks.as_strided(np.arange(5, dtype=np.float32), (1, 5), (4, 4))
    assert odd.flags.c_contiguous and odd.strides != a.strides
    out[:] = 0
    f(odd, out)
    assert calls == [1] and out.tolist() == [[0, 2, 4, 6, 8]]
    with pytest.raises(ValueError, match="shares memory"):
        f(out, out)
    assert calls == [1, 1]


def test_build_pauses_the_garbage_collector_and_restores_it() -> None:
    """The cyclic collector is off during a build (llvmlite's IR is a graph of cycles its
    full passes walked again and again) and on again after, also when the build fails; a
    collector the user turned off stays off."""
    import gc

    from tex.runtime import jit
    from tex.runtime.diskcache import DiskCache

    seen: list[bool] = []
    A = tex.placeholder((16,), "float32", name="A")
    B = tex.compute((16,), lambda i: A[i] * 2.0, name="B")
    jit.clear_cache()
    real = jit.jit_compile

    def spy(*args, **kwargs):
        seen.append(gc.isenabled())
        return real(*args, **kwargs)

    assert gc.isenabled()
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jit, "DISK", DiskCache(None))  # every build compiles
        mp.setattr(tex.build, "jit_compile", spy)
        tex.build([B], name="gc_paused")
        assert seen == [False] and gc.isenabled()
        with pytest.raises(TypeError):
            tex.build([B], [A, "B"], name="gc_failed")
        assert gc.isenabled()
        gc.disable()
        try:
            jit.clear_cache()
            tex.build([B], name="gc_user_off")
            assert seen == [False, False] and not gc.isenabled()
        finally:
            gc.enable()
    jit.clear_cache()
