"""target="cuda": GPU lowering, PTX generation, the runtime's checks, and execution.

Without a GPU (CI), every program is still built to PTX, assembled by ``ptxas`` when it is
installed, and run by the lockstep simulator (``CudaFunction.simulate``: races,
out-of-bounds accesses and divergent barriers fail), compared with ``tex.testing.evaluate``.
Tests marked ``gpu`` run the same programs on the device.
"""
from __future__ import annotations

import ctypes
import re
from collections.abc import Sequence

import numpy as np
import pytest

import tex
from tex.codegen.ptx import assemble, find_ptxas
from tex.lower.gpu import DeviceProgram, Kernel, split_kernels
from tex.lower.stmt import Barrier, Seq, Stmt, seq, stmt_children, walk_stmts, with_stmt_children
from tex.runtime.gpusim import SimulationError, simulate
from tex.testing import evaluate

from test_autodiff_ops import CASES, Case, seed_of
from test_build_ops import _args, _computed, _tolerance, case_program

Array = np.ndarray


def run_cuda(outs: Sequence[tex.Tensor], inputs: Sequence[tex.Tensor],
             feed: dict[tex.Tensor, Array], s: tex.schedule.Schedule | None = None,
             device: bool = False, arch: str = "sm_80") -> tex.runtime.cuda.CudaFunction:
    """Build for CUDA (auto-scheduled unless ``s``), check the PTX with ptxas, run on the
    simulator (or the device) and compare every output with the reference interpreter."""
    args = _args(inputs, outs)
    target = f"cuda -arch={arch}"
    f = tex.build(s, args, target=target) if s is not None else \
        tex.build(list(outs), args, target=target)
    assemble(f.get_source("ptx"), "sm_90")  # raises when ptxas rejects it
    arrays = []
    for a in args:
        if a in feed:
            arrays.append(np.array(feed[a], order="C"))
        else:
            fill = np.nan if a.dtype.is_float else 7
            arrays.append(np.full(a.shape, fill, a.dtype.numpy))
    (f if device else f.simulate)(*arrays)
    for t, r in zip(outs, evaluate(list(outs), feed)):
        got = arrays[args.index(t)]
        tol = _tolerance(r.dtype)
        if r.dtype == np.float32:  # libdevice's exp/log/tanh: a few ulp
            tol = {"rtol": 2e-5, "atol": 2e-6}
        np.testing.assert_allclose(got, r, **tol, err_msg=f"output {t.name}")
    return f


# -- every topi op and its gradient, auto-scheduled for the GPU --------------------------

@pytest.mark.parametrize("case_", CASES, ids=[c.id for c in CASES])
def test_op_and_gradient_cuda(case_: Case) -> None:
    rng = np.random.default_rng(seed_of(case_.id) + 23)
    inputs, results, _, feed = case_program(case_, rng)
    run_cuda(_computed(results), inputs, feed)


@pytest.mark.gpu
@pytest.mark.parametrize("case_", CASES[::7], ids=[c.id for c in CASES[::7]])
def test_op_and_gradient_on_device(case_: Case) -> None:
    rng = np.random.default_rng(seed_of(case_.id) + 23)
    inputs, results, _, feed = case_program(case_, rng)
    run_cuda(_computed(results), inputs, feed, device=True)


# -- hand schedules ----------------------------------------------------------------------

def tiled_matmul(M: int, N: int, K: int, tile: int = 16
                 ) -> tuple[tex.schedule.Schedule, list[tex.Tensor]]:
    """The classic shared-memory matmul (as tutorials/04_gpu.py)."""
    X = tex.placeholder((M, K), name="X")
    W = tex.placeholder((K, N), name="W")
    k = tex.reduce_axis((0, K), name="k")
    Y = tex.compute((M, N), lambda i, j: tex.sum(X[i, k] * W[k, j], axis=k), name="Y")
    s = tex.create_schedule(Y.op)
    XS = s.cache_read(X, "shared", [Y])
    WS = s.cache_read(W, "shared", [Y])
    YL = s.cache_write(Y, "local")
    i, j = Y.op.axis
    by, ty = s[Y].split(i, factor=tile)
    bx, tx = s[Y].split(j, factor=tile)
    s[Y].reorder(by, bx, ty, tx)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                    (tx, "threadIdx.x")):
        s[Y].bind(ax, tex.thread_axis(tag))
    s[YL].compute_at(s[Y], tx)
    ko, _ = s[YL].split(s[YL].op.reduce_axis[0], factor=tile)
    for S in (XS, WS):
        s[S].compute_at(s[YL], ko)
        fused = s[S].fuse(*s[S].op.axis)
        rest, fx = s[S].split(fused, factor=tile)
        _, fy = s[S].split(rest, factor=tile)
        s[S].bind(fy, tex.thread_axis("threadIdx.y"))
        s[S].bind(fx, tex.thread_axis("threadIdx.x"))
    return s, [X, W, Y]


@pytest.mark.parametrize("shape", [(64, 48, 32), (37, 50, 29)])
def test_tiled_matmul_kernel(shape: tuple[int, int, int], rng: np.random.Generator) -> None:
    M, N, K = shape
    s, (X, W, Y) = tiled_matmul(M, N, K)
    feed = {X: rng.standard_normal((M, K)).astype(np.float32),
            W: rng.standard_normal((K, N)).astype(np.float32)}
    f = run_cuda([Y], [X, W], feed, s=s)
    (kernel,) = f.program.kernels
    assert kernel.block == (16, 16, 1)
    assert kernel.grid == (-(-N // 16), -(-M // 16), 1)
    assert kernel.shared_bytes == 2 * 16 * 16 * 4
    # one barrier after the tiles are fetched, one before the next fetch
    assert sum(isinstance(x, Barrier) for x in walk_stmts(kernel.body)) == 2
    ptx = f.get_source("ptx")
    assert ".shared" in ptx and "bar.sync" in ptx and ".entry main_kernel0" in ptx


def test_kernels_keep_32_bit_index_arithmetic() -> None:
    """GPU kernels compute indices in int32, as CUDA compilers do (the CPU backend counts
    in i64: ``FunctionEmitter.WIDE_INDEX``); an index is widened once, at its access."""
    s, args = tiled_matmul(37, 50, 29)
    raw = tex.build(s, args, target="cuda").get_source("ll.raw")
    assert re.findall(r"= (?:mul|add) i32", raw)
    assert not re.findall(r"= (?:mul|add) i64", raw)


def test_kernels_print_launch_configuration() -> None:
    s, args = tiled_matmul(32, 32, 32)
    text = str(split_kernels(tex.lower(s, args)))
    assert "// kernel main_kernel0: grid (2, 2, 1), block (16, 16, 1), shared 2048 bytes" in text
    assert "__syncthreads()" in text and "threadIdx.x" in text


def row_sum(rows: int, cols: int, threads: int) -> tuple[tex.schedule.Schedule, list]:
    R = tex.placeholder((rows, cols), name="R")
    k = tex.reduce_axis((0, cols), name="k")
    S = tex.compute((rows,), lambda i: tex.sum(R[i, k], axis=k), name="S")
    s = tex.create_schedule(S.op)
    _, ki = s[S].split(k, factor=threads)
    s[S].bind(S.op.axis[0], tex.thread_axis("blockIdx.x"))
    s[S].bind(ki, tex.thread_axis("threadIdx.x"))
    return s, [R, S]


@pytest.mark.parametrize("cols,threads", [(100, 32), (1000, 256), (70, 96), (5, 8)])
def test_cross_thread_reduction(cols: int, threads: int, rng: np.random.Generator) -> None:
    s, (R, S) = row_sum(6, cols, threads)
    feed = {R: rng.standard_normal((6, cols)).astype(np.float32)}
    f = run_cuda([S], [R], feed, s=s)
    assert f.program.kernels[0].block == (min(threads, cols), 1, 1)


def test_cross_thread_reduction_with_init(rng: np.random.Generator) -> None:
    """The initial value is combined once, not once per thread."""
    A = tex.placeholder((5, 40), name="A")
    k = tex.reduce_axis((0, 40), name="k")
    M = tex.compute((5,), lambda i: tex.sum(A[i, k], axis=k, init=tex.const(1.5)), name="M")
    s = tex.create_schedule(M.op)
    _, ki = s[M].split(k, factor=16)
    s[M].bind(M.op.axis[0], tex.thread_axis("blockIdx.x"))
    s[M].bind(ki, tex.thread_axis("threadIdx.x"))
    feed = {A: rng.standard_normal((5, 40)).astype(np.float32)}
    run_cuda([M], [A], feed, s=s)


def test_guarded_thread_extents_and_vthread(rng: np.random.Generator) -> None:
    """Two stages binding threadIdx.x with different extents share one kernel only if
    attached; root stages become separate kernels with their own launch sizes."""
    A = tex.placeholder((50,), name="A")
    B = tex.compute((50,), lambda i: A[i] * 2.0, name="B")
    C = tex.compute((30,), lambda i: B[i] + B[i + 20], name="C")
    s = tex.create_schedule(C.op)
    for T, n in ((B, 64), (C, 32)):
        bx, tx = s[T].split(T.op.axis[0], factor=n)
        s[T].bind(bx, tex.thread_axis("blockIdx.x"))
        s[T].bind(tx, tex.thread_axis("threadIdx.x"))
    f = run_cuda([B, C], [A], {A: rng.standard_normal(50).astype(np.float32)}, s=s)
    assert [k.block[0] for k in f.program.kernels] == [50, 30]


# -- what the simulator catches ----------------------------------------------------------

def test_simulator_catches_a_missing_barrier() -> None:
    s, args = tiled_matmul(32, 32, 32)
    program = split_kernels(tex.lower(s, args))
    kernel = program.kernels[0]
    def strip(st: Stmt) -> Stmt:  # every barrier removed
        if isinstance(st, Seq):
            return seq(*(strip(c) for c in st.body if not isinstance(c, Barrier)))
        kids = stmt_children(st)
        return with_stmt_children(st, [strip(c) for c in kids]) if kids else st

    bad = DeviceProgram(program.func, program.temps, (Kernel(
        kernel.name, kernel.params, strip(kernel.body), kernel.grid, kernel.block,
        kernel.shared, kernel.indices),))
    x = np.ones((32, 32), np.float32)
    with pytest.raises(SimulationError, match="without a barrier"):
        simulate(bad, [x, x, np.zeros((32, 32), np.float32)])


# -- bad input ---------------------------------------------------------------------------

def simple(n: int = 100) -> tuple[tex.Tensor, tex.Tensor, tex.schedule.Schedule]:
    A = tex.placeholder((n,), name="A")
    B = tex.compute((n,), lambda i: A[i] + 1.0, name="B")
    return A, B, tex.create_schedule(B.op)


def test_unbound_stage_is_refused() -> None:
    A, B, s = simple()
    with pytest.raises(ValueError, match="stage 'B' is not bound to GPU threads"):
        tex.build(s, [A, B], target="cuda")


def test_same_thread_axis_twice_in_a_stage() -> None:
    A = tex.placeholder((8, 8), name="A")
    B = tex.compute((8, 8), lambda i, j: A[i, j], name="B")
    s = tex.create_schedule(B.op)
    s[B].bind(B.op.axis[0], tex.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match="threadIdx.x is already bound"):
        s[B].bind(B.op.axis[1], tex.thread_axis("threadIdx.x"))


def test_block_over_1024_threads() -> None:
    A = tex.placeholder((64, 64), name="A")
    B = tex.compute((64, 64), lambda i, j: A[i, j], name="B")
    s = tex.create_schedule(B.op)
    s[B].bind(B.op.axis[0], tex.thread_axis("threadIdx.y"))
    s[B].bind(B.op.axis[1], tex.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match="4096 threads; a block holds at most 1024"):
        tex.build(s, [A, B], target="cuda")


def test_shared_memory_over_the_limit() -> None:
    s, args = tiled_matmul(256, 256, 256, tile=32)  # 32x32 threads: fine
    X, W, Y = args
    # a 128-wide reduction step: 2 x 32 x 128 floats... and a whole-row tile of W
    s2 = tex.create_schedule(Y.op)
    WS = s2.cache_read(W, "shared", [Y])
    by, bx = s2[Y].op.axis
    s2[Y].bind(by, tex.thread_axis("blockIdx.x"))
    s2[WS].compute_at(s2[Y], by)  # every block copies all of W: 256 KiB
    f_ax = s2[WS].fuse(*s2[WS].op.axis)
    _, t = s2[WS].split(f_ax, factor=256)
    s2[WS].bind(t, tex.thread_axis("threadIdx.x"))
    _, t2 = s2[Y].split(bx, factor=256)
    s2[Y].bind(t2, tex.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match=r"262144 bytes of shared memory.*at most 49152"):
        tex.build(s2, [X, W, Y], target="cuda")


def test_bad_target_options() -> None:
    A, B, s = simple()
    with pytest.raises(ValueError, match="-arch must be sm_50 or newer"):
        tex.build(s, [A, B], target="cuda -arch=sm_20")
    with pytest.raises(ValueError, match="unknown option"):
        tex.build(s, [A, B], target="cuda -O3")


def bound_simple() -> tuple[tex.Tensor, tex.Tensor, tex.runtime.cuda.CudaFunction]:
    A, B, s = simple()
    bx, tx = s[B].split(B.op.axis[0], factor=32)
    s[B].bind(bx, tex.thread_axis("blockIdx.x"))
    s[B].bind(tx, tex.thread_axis("threadIdx.x"))
    return A, B, tex.build(s, [A, B], target="cuda")


def test_host_arrays_checked_before_the_driver() -> None:
    _, _, f = bound_simple()
    a = np.zeros(100, np.float32)
    with pytest.raises(ValueError, match=r"argument 1 \('B'\) must have shape \(100,\)"):
        f(a, np.zeros(10, np.float32))
    with pytest.raises(TypeError, match="must have dtype float32, got float64"):
        f(a.astype(np.float64), a)
    with pytest.raises(TypeError, match="takes 2 arguments"):
        f(a)
    with pytest.raises(TypeError, match="numpy.ndarray or a CUDA array"):
        f([0.0] * 100, a)
    with pytest.raises(ValueError, match="read-only"):
        b = np.zeros(100, np.float32)
        b.setflags(write=False)
        f(a, b)


class _FakeCudaArray:
    """An object exposing ``__cuda_array_interface__`` over (simulated) device memory."""

    def __init__(self, ptr: int, shape: tuple[int, ...], typestr: str,
                 strides: tuple[int, ...] | None = None) -> None:
        self.__cuda_array_interface__ = {"shape": shape, "typestr": typestr,
                                         "data": (ptr, False), "strides": strides,
                                         "version": 3}


def test_cuda_array_interface_checked() -> None:
    _, _, f = bound_simple()
    a = np.zeros(100, np.float32)
    with pytest.raises(TypeError, match="must have dtype float32, got int32"):
        f(a, _FakeCudaArray(1 << 20, (100,), "<i4"))
    with pytest.raises(ValueError, match="must have shape"):
        f(a, _FakeCudaArray(1 << 20, (10, 10), "<f4"))
    with pytest.raises(ValueError, match="C-contiguous"):
        f(a, _FakeCudaArray(1 << 20, (100,), "<f4", strides=(8,)))


def test_no_gpu_is_a_runtime_error_at_call_not_import() -> None:
    _, _, f = bound_simple()
    assert ".entry main_kernel0" in f.get_source("ptx")
    try:
        ctypes.CDLL("libcuda.so.1")
    except OSError:
        a = np.zeros(100, np.float32)
        with pytest.raises(RuntimeError, match="no CUDA driver"):
            f(a, np.zeros(100, np.float32))
    else:  # pragma: no cover - a machine with a driver
        pytest.skip("a CUDA driver is installed here")


def test_ptxas_available_where_expected() -> None:
    """CI machines have ptxas: then every PTX test above was assembled."""
    _, _, f = bound_simple()
    cubin = assemble(f.get_source("ptx"), "sm_90")
    assert (cubin is None) == (find_ptxas() is None)


@pytest.mark.gpu
def test_tiled_matmul_on_device(rng: np.random.Generator) -> None:
    s, (X, W, Y) = tiled_matmul(128, 96, 64)
    feed = {X: rng.standard_normal((128, 64)).astype(np.float32),
            W: rng.standard_normal((64, 96)).astype(np.float32)}
    run_cuda([Y], [X, W], feed, s=s, device=True)


def test_without_libdevice(monkeypatch: pytest.MonkeyPatch, rng: np.random.Generator) -> None:
    """float32 math has own implementations (tex.codegen.vecmath, whose accuracy
    test_vecmath checks): no libdevice call, no external function; float64 needs libdevice."""
    import tex.codegen.ptx as ptx
    monkeypatch.setattr(ptx, "find_libdevice", lambda: None)
    A = tex.placeholder((40,), name="A")
    B = tex.compute((40,), lambda i: tex.exp(A[i]) + tex.log(tex.abs(A[i]) + 1.0)
                    + tex.tanh(A[i]) + tex.erf(A[i]) + tex.sigmoid(A[i]), name="B")
    f = run_cuda([B], [A], {A: rng.standard_normal(40).astype(np.float32)})
    assert "__nv_" not in f.get_source("ptx")
    # sin, cos, tan, log2, log10, pow and float % (fmod under numpy.mod's sign fix)
    E = tex.placeholder((40,), name="E")
    fns = {"sin": lambda i: tex.sin(A[i] * 100.0), "cos": lambda i: tex.cos(A[i]),
           "tan": lambda i: tex.tan(A[i]), "log2": lambda i: tex.log2(tex.abs(A[i]) + 0.1),
           "log10": lambda i: tex.log10(tex.abs(A[i]) * 1e3),
           "pow": lambda i: (tex.abs(A[i]) + 0.5) ** E[i], "mod": lambda i: A[i] * 50.0 % E[i]}
    outs = [tex.compute((40,), fn, name=name) for name, fn in fns.items()]
    feed = {A: rng.standard_normal(40).astype(np.float32),
            E: (rng.uniform(0.5, 3.0, 40) * rng.choice([-1.0, 1.0], 40)).astype(np.float32)}
    f = run_cuda(outs, [A, E], feed)  # assembled by ptxas when installed, simulated
    text = f.get_source("ptx")
    assert "__nv_" not in text and ".extern" not in text and "call" not in text
    raw = f.get_source("ll.raw")
    for op in ("sin", "cos", "tan", "log2", "log10", "pow", "fmod"):
        assert f'@"tex.{op}.f32"(' in raw, op  # the fallback (inlined into the kernel)
    # float64 still needs libdevice
    A64 = tex.placeholder((40,), "float64", name="A64")
    for fn, what in ((lambda i: tex.sin(A64[i]), "sin"), (lambda i: A64[i] ** A64[i], "pow"),
                     (lambda i: A64[i] % 3.0, "float %")):
        C = tex.compute((40,), fn, name="C")
        with pytest.raises(ValueError, match=f"{what} on float64 needs CUDA's libdevice"):
            tex.build([C], target="cuda")


def test_rfactor_then_bind_two_level_sum(rng: np.random.Generator) -> None:
    A = tex.placeholder((5000,), name="A")
    k = tex.reduce_axis((0, 5000), name="k")
    S = tex.compute((), lambda: tex.sum(A[k] * A[k], axis=k), name="S")
    s = tex.create_schedule(S.op)
    ko, _ = s[S].split(k, nparts=16)
    SF = s.rfactor(S, ko)
    s[SF].bind(s[SF].op.axis[0], tex.thread_axis("blockIdx.x"))
    _, t = s[SF].split(s[SF].op.reduce_axis[0], factor=128)
    s[SF].bind(t, tex.thread_axis("threadIdx.x"))
    s[S].bind(s[S].op.reduce_axis[0], tex.thread_axis("threadIdx.x"))
    f = run_cuda([S], [A], {A: rng.standard_normal(5000).astype(np.float32)}, s=s)
    assert [(k.grid, k.block) for k in f.program.kernels] == [
        ((16, 1, 1), (128, 1, 1)), ((1, 1, 1), (16, 1, 1))]


def test_auto_schedule_long_reduction_uses_many_blocks(rng: np.random.Generator) -> None:
    A = tex.placeholder((300, 400), name="A")
    L = tex.topi.sum(A * A)
    f = run_cuda([L], [A], {A: rng.standard_normal((300, 400)).astype(np.float32)})
    assert [k.grid[0] for k in f.program.kernels] == [117, 1]


def test_reduction_across_blocks_is_refused() -> None:
    A = tex.placeholder((64,), name="A")
    k = tex.reduce_axis((0, 64), name="k")
    S = tex.compute((1,), lambda i: tex.sum(A[k], axis=k), name="S")
    s = tex.create_schedule(S.op)
    s[S].bind(k, tex.thread_axis("blockIdx.x"))
    with pytest.raises(ValueError, match="blocks cannot combine their results"):
        tex.build(s, [A, S], target="cuda")


def test_tile_copy_uses_all_threads_when_the_stage_uses_fewer(
        rng: np.random.Generator) -> None:
    """The output's threadIdx.x extent (12) is below the block's (16, set by the shared
    copies): the guard must not stop threads 12..15 from fetching their part."""
    M, N, K = 32, 48, 16
    X = tex.placeholder((M, K), name="X")
    W = tex.placeholder((K, N), name="W")
    k = tex.reduce_axis((0, K), name="k")
    Y = tex.compute((M, N), lambda i, j: tex.sum(X[i, k] * W[k, j], axis=k), name="Y")
    s = tex.create_schedule(Y.op)
    YL = s.cache_write(Y, "local")
    i, j = Y.op.axis
    by, yi = s[Y].split(i, factor=32)
    ty, vy = s[Y].split(yi, factor=2)
    bx, xi = s[Y].split(j, factor=48)
    tx, vx = s[Y].split(xi, factor=4)
    s[Y].reorder(by, bx, ty, tx, vy, vx)
    for ax, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                    (tx, "threadIdx.x")):
        s[Y].bind(ax, tex.thread_axis(tag))
    s[YL].compute_at(s[Y], tx)
    ko, ki = s[YL].split(s[YL].op.reduce_axis[0], factor=8)
    s[YL].reorder(ko, ki, *s[YL].op.axis)
    for T in (X, W):
        TS = s.cache_read(T, "shared", [YL])
        s[TS].compute_at(s[YL], ko)
        rest, fx = s[TS].split(s[TS].fuse(*s[TS].op.axis), factor=16)
        _, fy = s[TS].split(rest, factor=16)
        s[TS].bind(fy, tex.thread_axis("threadIdx.y"))
        s[TS].bind(fx, tex.thread_axis("threadIdx.x"))
    feed = {X: rng.standard_normal((M, K)).astype(np.float32),
            W: rng.standard_normal((K, N)).astype(np.float32)}
    f = run_cuda([Y], [X, W], feed, s=s)
    assert f.program.kernels[0].block == (16, 16, 1)
