"""Memory, file descriptors, threads and child processes: calling, building and dropping
functions many times leaves the process as it found it (once warmed up).

RSS comes from /proc/self/statm; before each reading the garbage collector runs and, on
glibc, ``malloc_trim`` hands freed heap pages back, so a reading is memory in use rather
than what the allocator happens to keep. Growth is measured between warmed-up rounds (the
first round fills sympy's and tex's bounded memo tables, libgomp's thread pool...).
"""
from __future__ import annotations

import ctypes
import gc
import os
import sys
import threading
import weakref
from pathlib import Path

import numpy as np
import pytest

import tex
from tex import topi
from tex.codegen import jobs
from tex.codegen.ptx import assemble, find_ptxas
from tex.runtime import jit
from tex.runtime.module import BuiltFunction
from tex.runtime.openmp import load_openmp
from tex.viz import find_dot, render, save

PROC = Path("/proc/self")
MB = 2 ** 20

needs_proc = pytest.mark.skipif(
    not (PROC / "statm").exists() or not (PROC / "fd").is_dir(),
    reason="needs Linux's /proc/self (statm, fd, task); /proc/self is missing here")

try:
    _malloc_trim = ctypes.CDLL(None).malloc_trim  # glibc
except (OSError, AttributeError):  # pragma: no cover - another C library
    _malloc_trim = None


def rss() -> int:
    """Resident bytes of this process, after a full collection (and malloc_trim)."""
    gc.collect()
    if _malloc_trim is not None:
        _malloc_trim(0)
    with open(PROC / "statm") as f:
        return int(f.read().split()[1]) * os.sysconf("SC_PAGE_SIZE")


def fd_count() -> int:
    return len(os.listdir(PROC / "fd"))


def os_threads() -> int:
    return len(os.listdir(PROC / "task"))


def child_pids() -> list[int]:
    """Processes (zombies included) whose parent is this process, but for the compile
    workers (``tex.codegen.jobs``: children kept between compiles)."""
    me, kids = os.getpid(), []
    workers = set(jobs.worker_pids())
    for entry in os.listdir("/proc"):
        if not entry.isdigit() or int(entry) in workers:
            continue
        try:
            stat = Path("/proc", entry, "stat").read_text()
        except OSError:  # it exited meanwhile
            continue
        # pid (comm) state ppid ...; comm may hold spaces and parentheses
        if int(stat.rsplit(")", 1)[1].split()[1]) == me:
            kids.append(int(entry))
    return kids


# --------------------------------------------------------------------------------------
# Kernels
# --------------------------------------------------------------------------------------

def elementwise(c: float, n: int = 64) -> BuiltFunction:
    """B = A * c + 1 over n floats: a distinct kernel (and cache key) for every c."""
    A = tex.placeholder((n,), name="A")
    B = tex.compute((n,), lambda i: A[i] * float(c) + 1.0, name="B")
    return tex.build(tex.create_schedule(B.op), [A, B], name="scale")


def parallel_kernel() -> BuiltFunction:
    """An auto-scheduled kernel with a parallel loop (when OpenMP is there)."""
    P = tex.placeholder((256, 256), name="P")
    Q = tex.compute((256, 256), lambda i, j: P[i, j] * 2.0 + P[j, i], name="Q")
    return tex.build([Q], name="par")


def cuda_ptx(c: float) -> str:
    A = tex.placeholder((1000,), name="A")
    C = tex.compute((1000,), lambda i: tex.sqrt(A[i]) * float(c), name="C")
    return tex.build([C], target="cuda").get_source("ptx")


@pytest.fixture
def small_cache():
    """The compile cache bounded to 8 entries for the test, restored after."""
    size = jit.CACHE.size
    jit.CACHE.resize(8)
    yield jit.CACHE
    jit.CACHE.resize(size)


@pytest.fixture
def default_cache():
    """The compile cache at its default bound (64, whatever TEX_JIT_CACHE says), restored
    after."""
    size = jit.CACHE.size
    jit.CACHE.resize(jit.DEFAULT_CACHE_SIZE)
    yield jit.CACHE
    jit.CACHE.resize(size)


# --------------------------------------------------------------------------------------
# 1. calling
# --------------------------------------------------------------------------------------

@needs_proc
def test_ten_thousand_calls_do_not_grow_rss() -> None:
    f = elementwise(3.0)
    a = np.arange(64, dtype=np.float32)
    b = np.empty(64, np.float32)
    cases = [("elementwise", f, (a, b), 10_000)]
    g = parallel_kernel()
    if load_openmp() is not None:
        assert "parallel for" in g.lowered
    p = np.random.default_rng(0).standard_normal((256, 256)).astype(np.float32)
    q = np.empty_like(p)
    # fewer calls: each one waits for every OpenMP thread, slow on a loaded machine
    cases.append(("parallel", g, (p, q), 1_000))
    for name, fn, args, calls in cases:
        for _ in range(calls // 10):  # warm-up: ctypes, libgomp's pool, allocator free lists
            fn(*args)
        before = rss()
        for _ in range(calls):
            fn(*args)
        growth = rss() - before
        assert growth < 4 * MB, f"{name}: RSS grew {growth / MB:.1f} MB over {calls} calls"
    np.testing.assert_allclose(b, a * 3.0 + 1.0, rtol=1e-6)
    np.testing.assert_allclose(q, p * 2.0 + p.T, rtol=1e-6)


@needs_proc
def test_calls_with_bad_arguments_release_everything() -> None:
    """Each rejected call raises; neither the exceptions (with their tracebacks) nor the
    checks keep the arguments or anything else alive."""
    f = elementwise(2.0)
    a = np.arange(64, dtype=np.float32)
    b = np.empty(64, np.float32)
    probe = np.ones(64, np.float32)  # passed in bad calls only; must die with our reference
    probe_ref = weakref.ref(probe)
    read_only = np.empty(64, np.float32)
    read_only.setflags(write=False)
    bad = [
        ((a,), TypeError),                                 # count
        ((probe.astype(np.float64), b), TypeError),        # dtype
        ((probe, b[:32]), ValueError),                     # shape
        ((np.ones(128, np.float32)[::2], b), ValueError),  # not contiguous
        ((probe, probe), ValueError),                      # output overlaps an input
        ((probe, read_only), ValueError),                  # read-only output
        (([1.0] * 64, b), TypeError),                      # not an array
    ]

    def round_(n: int) -> int:
        errors = 0
        for _ in range(n):
            for args, kind in bad:
                try:
                    f(*args)
                except kind:
                    errors += 1
        return errors

    assert round_(200) == 200 * len(bad)
    objects = len(gc.get_objects())
    before = rss()
    assert round_(3000) == 3000 * len(bad)
    growth = rss() - before
    assert growth < 4 * MB, f"RSS grew {growth / MB:.1f} MB over {3000 * len(bad)} errors"
    assert len(gc.get_objects()) - objects < 100
    f(a, b)  # still works
    np.testing.assert_array_equal(b, a * 2.0 + 1.0)
    bad.clear()
    del probe
    gc.collect()
    assert probe_ref() is None, "a rejected argument is still referenced"


# --------------------------------------------------------------------------------------
# 2. building
# --------------------------------------------------------------------------------------

@needs_proc
def test_distinct_kernels_are_freed_and_memory_stays_bounded(default_cache) -> None:
    """Three rounds of 200 distinct kernels, each round dropped (the cache at its default
    bound keeps the last ones): RSS after round 3 is within a few MB of RSS after round 2.
    Before the fixes each build left about 75 KB behind for good (an O3 pipeline llvmlite
    never freed, constants and metadata in LLVM's global context): 15 MB a round; now
    under 1 MB."""
    n = 200

    def round_(r: int) -> tuple[int, int]:
        base = rss()
        fns = [elementwise(1000.0 * r + k + 0.5) for k in range(n)]
        sources = {fn.get_source("ll") for fn in fns}
        assert len(sources) == n  # distinct kernels, each compiled (not served from cache)
        kernels = [weakref.ref(fn._kernel) for fn in fns]
        a = np.arange(64, dtype=np.float32)
        b = np.empty(64, np.float32)
        fns[7](a, b)
        np.testing.assert_allclose(b, a * (1000.0 * r + 7.5) + 1.0, rtol=1e-6)
        live = rss() - base
        del fns
        assert len(default_cache) == default_cache.size < n
        gc.collect()
        alive = sum(k() is not None for k in kernels)
        assert alive == default_cache.size  # only the cache's entries survive
        return live, rss()

    round_(1)
    live2, after2 = round_(2)
    live3, after3 = round_(3)
    growth = after3 - after2
    sys.stderr.write(f"\n200 kernels live: +{live3 / MB:.1f} MB; round 3 left "
                     f"{growth / MB:+.2f} MB\n")
    assert growth < 6 * MB, (f"RSS grew {growth / MB:.1f} MB over a round of {n} kernels "
                             "that were all dropped")
    # what a round costs while its kernels live dwarfs what it leaves behind
    assert live3 > 5 * max(growth, 0)


@needs_proc
def test_evicted_kernels_are_garbage(small_cache) -> None:
    """Kernels leaving the cache, with no function using them, are collected (their
    engines with them); functions keep theirs alive."""
    keep = elementwise(0.25)
    kept = weakref.ref(keep._kernel)
    refs = [weakref.ref(elementwise(k + 0.5)._kernel) for k in range(20)]
    assert len(small_cache) == 8
    gc.collect()
    assert sum(r() is not None for r in refs) == 8  # the cache's entries only
    jit.clear_cache()
    gc.collect()
    assert all(r() is None for r in refs)
    assert kept() is not None
    a = np.ones(64, np.float32)
    b = np.empty(64, np.float32)
    keep(a, b)
    np.testing.assert_array_equal(b, np.full(64, 1.25, np.float32))


def test_cache_size_from_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("TEX_JIT_CACHE", raising=False)
    assert jit._cache_size_from_env() == jit.DEFAULT_CACHE_SIZE == 64
    for value, size in (("8", 8), (" 0 ", 0), ("1000", 1000)):
        monkeypatch.setenv("TEX_JIT_CACHE", value)
        assert jit._cache_size_from_env() == size
    for value in ("-1", "lots", "2.5"):
        monkeypatch.setenv("TEX_JIT_CACHE", value)
        with pytest.warns(RuntimeWarning, match="TEX_JIT_CACHE"):
            assert jit._cache_size_from_env() == 64


def test_cache_resize_evicts_least_recently_used(small_cache) -> None:
    jit.clear_cache()
    fns = [elementwise(k + 100.5) for k in range(6)]
    assert len(small_cache) == 6
    again = elementwise(100.5)  # a hit: the first becomes the most recently used
    assert again._kernel is fns[0]._kernel
    small_cache.resize(2)
    assert len(small_cache) == 2
    assert elementwise(100.5)._kernel is fns[0]._kernel  # kept: recently used
    assert elementwise(105.5)._kernel is fns[5]._kernel
    assert elementwise(102.5)._kernel is not fns[2]._kernel  # evicted: compiled anew
    small_cache.resize(0)
    assert len(small_cache) == 0
    assert elementwise(100.5)._kernel is not fns[0]._kernel
    assert len(small_cache) == 0
    with pytest.raises(ValueError, match="non-negative"):
        small_cache.resize(-1)


# --------------------------------------------------------------------------------------
# 3. descriptors, threads, processes
# --------------------------------------------------------------------------------------

@needs_proc
def test_no_descriptor_thread_or_process_leaks(tmp_path: Path) -> None:
    ptxas = find_ptxas()
    dot = find_dot()
    x = np.random.default_rng(1).standard_normal((256, 256)).astype(np.float32)
    y = np.empty_like(x)
    A = tex.placeholder((4, 5), name="A")
    L = topi.sum(topi.tanh(A * A))
    (dA,) = tex.differentiate(L, [A])

    def work(k: int) -> None:
        f = elementwise(k + 0.125)
        a = np.full(64, 2.0, np.float32)
        b = np.empty(64, np.float32)
        f(a, b)
        assert b[0] == np.float32(2.0 * (k + 0.125) + 1.0)
        parallel_kernel()(x, y)
        ptx = cuda_ptx(k + 0.5)
        assert ".entry" in ptx
        if ptxas is not None:
            assert assemble(ptx, "sm_80")
        out = save([L, dA], tmp_path / f"dag{k}.svg")
        if dot is not None:
            assert out.suffix == ".svg" and "<svg" in out.read_text()
            assert b"<svg" in render(tex.to_dot(L, dA), "svg")
        else:
            assert out.suffix == ".dot"

    work(0)  # warm-up: libgomp's threads, libdevice, Graphviz, the CUDA target
    fds, threads, tasks = fd_count(), threading.active_count(), os_threads()
    assert child_pids() == []
    for k in range(1, 9):
        work(k)
    gc.collect()
    assert fd_count() == fds, os.listdir(PROC / "fd")
    assert threading.active_count() == threads
    assert os_threads() <= tasks
    assert child_pids() == [], "unreaped children (ptxas or dot)"



def _cyclic_garbage(work: object) -> list[object]:
    """The objects only the cyclic collector would free after ``work()`` (the collector
    off while it runs, as a build pauses it anyway)."""
    gc.collect()
    was_on = gc.isenabled()
    gc.disable()
    try:
        work()  # type: ignore[operator]
        gc.set_debug(gc.DEBUG_SAVEALL)
        gc.collect()
        return list(gc.garbage)
    finally:
        gc.set_debug(0)
        gc.garbage.clear()
        if was_on:
            gc.enable()


@pytest.mark.parametrize("parallel", [False, True])
def test_a_cold_build_leaves_no_cycles_for_the_collector(parallel: bool) -> None:
    """Lowering and emission free what they make by reference counting: llvmlite's IR
    (cycles between a module, its functions, blocks and instructions) is taken apart once
    its text is printed, and the rule rewriter leaves no closure calling itself. Left to
    the collector, a model gradient's build made 114,000 objects of cyclic garbage whose
    collection took 0.1-0.3 s of every cold build."""
    # (shapes and a constant no other test uses: the build is cold, in memory and on disk
    # of the session's cache)
    X = tex.placeholder((37, 29), name="X")
    W = tex.placeholder((23, 29), name="W")
    Y = topi.nn.relu(topi.nn.dense(X, W) * 2.7183)
    L = topi.sum(Y * Y)
    gW, = tex.differentiate(L, [W])

    def build() -> None:
        s = tex.schedule.auto_schedule([L, gW]) if parallel else \
            tex.create_schedule([L.op, gW.op])
        tex.build(s, [X, W, L, gW])

    garbage = _cyclic_garbage(build)
    ir_objects = [o for o in garbage if type(o).__module__.startswith("llvmlite.ir")]
    settles = [o for o in garbage if callable(o) and
               "fixed_point_rewrite" in getattr(o, "__qualname__", "")]
    assert not ir_objects, f"{len(ir_objects)} llvmlite IR objects in cycles"
    assert not settles, f"{len(settles)} rewrite closures in cycles"
