"""Every tensor in a built function's argument list ends up fully written, whatever the
schedule does to its stage (issue 20, item 1), or the build refuses naming the stage."""
from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pytest

import tex
from tex.testing import evaluate

Program = tuple[tex.schedule.Schedule, list[tex.Tensor]]


def _chain(read: Callable[[tex.Tensor, tex.Var], tex.Expr] | None = None, n: int = 16,
           m: int = 16) -> tuple[tex.Tensor, tex.Tensor, tex.Tensor]:
    A = tex.placeholder((n,), name="A")
    B = tex.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    C = tex.compute((m,), (lambda i: read(B, i)) if read else (lambda i: B[i] - 3.0),
                    name="C")
    return A, B, C


def at_loop() -> Program:  # TVM's schedule_primitives tutorial
    A, B, C = _chain()
    s = tex.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, B, C]


def at_inner_split() -> Program:
    A, B, C = _chain()
    s = tex.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[B].compute_at(s[C], xi)
    return s, [A, B, C]


def at_outer_split() -> Program:
    A, B, C = _chain(n=18, m=18)
    s = tex.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)  # a remainder: the last box is clipped
    s[B].compute_at(s[C], xo)
    return s, [A, B, C]


def partial_reader() -> Program:  # C reads every other element: widened to all of B
    A, B, C = _chain(lambda B, i: B[2 * i], n=16, m=8)
    s = tex.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, B, C]


def overlapping_reader() -> Program:  # two iterations compute each element
    A, B, C = _chain(lambda B, i: B[i] + B[i + 1], n=16, m=15)
    s = tex.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, B, C]


def parallel_tiles() -> Program:
    A, B, C = _chain()
    s = tex.create_schedule(C.op)
    xo, xi = s[C].split(C.op.axis[0], factor=4)
    s[C].parallel(xo)
    s[B].compute_at(s[C], xo)
    return s, [A, B, C]


def reduction_at() -> Program:
    A = tex.placeholder((6, 5), name="A")
    k = tex.reduce_axis((0, 5), name="k")
    B = tex.compute((6,), lambda i: tex.sum(A[i, k], axis=k), name="B")
    C = tex.compute((5,), lambda i: B[i] * B[i + 1], name="C")
    s = tex.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, B, C]


def tiles_2d() -> Program:
    A = tex.placeholder((8, 8), name="A")
    B = tex.compute((8, 8), lambda i, j: A[i, j] + 1.0, name="B")
    C = tex.compute((8, 8), lambda i, j: B[i, j] * 3.0, name="C")
    s = tex.create_schedule(C.op)
    io, jo, ii, ji = s[C].tile(C.op.axis[0], C.op.axis[1], 4, 4)
    s[B].compute_at(s[C], jo)
    return s, [A, B, C]


def cache_write_output() -> Program:
    A = tex.placeholder((6, 5), name="A")
    k = tex.reduce_axis((0, 5), name="k")
    B = tex.compute((6,), lambda i: tex.sum(A[i, k], axis=k), name="B")
    s = tex.create_schedule(B.op)
    s.cache_write(B, "local")
    return s, [A, B]


def cache_read_input() -> Program:
    A, B, C = _chain()
    s = tex.create_schedule(C.op)
    AA = s.cache_read(A, "local", [B])
    s[AA].compute_at(s[B], B.op.axis[0])
    return s, [A, B, C]


def rfactor_output() -> Program:
    A = tex.placeholder((16,), name="A")
    k = tex.reduce_axis((0, 16), name="k")
    B = tex.compute((1,), lambda i: tex.sum(A[k], axis=k), name="B")
    s = tex.create_schedule(B.op)
    ko, ki = s[B].split(k, factor=4)
    s.rfactor(B, ki)
    return s, [A, B]


def root_output_and_intermediate() -> Program:
    A, B, C = _chain()
    s = tex.create_schedule(C.op)
    return s, [A, B, C]


def at_fused_loop() -> Program:  # TVM's test_legalize_invalid_attach, case 2
    A = tex.placeholder((10, 10), name="A")
    B = tex.compute((10, 10), lambda i, j: A[i, j] * 2.0, name="B")
    C = tex.compute((10, 10), lambda i, j: B[i, j] + 1.0, name="C")
    s = tex.create_schedule(C.op)
    s[B].compute_at(s[C], C.op.axis[1])
    s[C].fuse(C.op.axis[0], C.op.axis[1])
    return s, [A, B, C]


def at_parallel_fused_loop() -> Program:
    s, args = at_fused_loop()
    C = args[-1]
    s[C].parallel(s[C].leaf_iter_vars[0])
    return s, args


def inlined_output() -> Program:
    """An inlined stage that is an argument: inlined into its readers and stored too (as
    TVM's tutorials expect the argument to hold it)."""
    A, B, C = _chain()
    s = tex.create_schedule(C.op)
    s[B].compute_inline()
    return s, [A, B, C]


WRITTEN = [inlined_output, at_loop, at_inner_split, at_outer_split, partial_reader,
           overlapping_reader,
           parallel_tiles, reduction_at, tiles_2d, cache_write_output, cache_read_input,
           rfactor_output, root_output_and_intermediate, at_fused_loop,
           at_parallel_fused_loop]


@pytest.mark.parametrize("program", [at_fused_loop, at_parallel_fused_loop])
def test_argument_at_a_fused_loop_is_computed_once(program: Callable[[], Program]) -> None:
    """A fused loop's iterations reach each element once (``f // n``, ``f % n``): the
    argument is computed per element, not whole at every iteration (100x the work)."""
    s, args = program()
    text = str(tex.lower(s, args))
    assert text.count("for (") == 1, text
    assert "B[i.j.fused] = A[i.j.fused] * 2.0" in text, text


@pytest.mark.parametrize("program", WRITTEN, ids=[p.__name__ for p in WRITTEN])
def test_every_argument_is_fully_written(program: Callable[[], Program]) -> None:
    s, args = program()
    f = tex.build(s, args)
    rng = np.random.default_rng(5)
    feed = {t: rng.standard_normal(t.shape).astype(np.float32) for t in args
            if isinstance(t.op, tex.ir.tensor.PlaceholderOp)}
    arrays = [feed[t] if t in feed else np.full(t.shape, np.nan, np.float32) for t in args]
    f(*arrays)
    outs = [t for t in args if t not in feed]
    for t, ref in zip(outs, evaluate(outs, feed)):
        np.testing.assert_allclose(arrays[args.index(t)], ref, rtol=1e-5, atol=1e-6,
                                   err_msg=t.name)


def parallel_overlap() -> Program:
    A, B, C = _chain(lambda B, i: B[i] + B[i + 1], n=16, m=15)
    s = tex.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, B, C]


def parallel_partial() -> Program:
    A, B, C = _chain(lambda B, i: B[2 * i], n=16, m=8)
    s = tex.create_schedule(C.op)
    s[C].parallel(C.op.axis[0])
    s[B].compute_at(s[C], C.op.axis[0])
    return s, [A, B, C]


REFUSED = [parallel_overlap, parallel_partial]


@pytest.mark.parametrize("program", REFUSED, ids=[p.__name__ for p in REFUSED])
def test_argument_that_cannot_be_written_is_refused(program: Callable[[], Program]) -> None:
    s, args = program()
    with pytest.raises(ValueError, match="'B'"):
        tex.build(s, args)


def test_gpu_thread_tiles_write_the_argument() -> None:
    A, B, C = _chain(n=64, m=64)
    s = tex.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    s[C].bind(tx, tex.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], tx)
    f = tex.build(s, [A, B, C], target="cuda -arch=sm_80")
    a = np.random.default_rng(1).standard_normal(64).astype(np.float32)
    b, c = np.full(64, np.nan, np.float32), np.full(64, np.nan, np.float32)
    f.simulate(a, b, c)
    np.testing.assert_allclose(b, a * 2 + 1, rtol=1e-6)
    np.testing.assert_allclose(c, a * 2 - 2, rtol=1e-6)


def test_gpu_block_level_argument_is_refused() -> None:
    """Computed at the block loop by the block's threads, an argument would pass between
    threads through global memory without a barrier (the simulator saw the race)."""
    A = tex.placeholder((64,), name="A")
    B = tex.compute((64,), lambda i: A[i] * 2.0 + 1.0, name="B")
    C = tex.compute((64,), lambda i: B[(i // 16) * 16 + 15 - i % 16] - 3.0, name="C")
    s = tex.create_schedule(C.op)
    bx, tx = s[C].split(C.op.axis[0], factor=16)
    s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    s[C].bind(tx, tex.thread_axis("threadIdx.x"))
    s[B].compute_at(s[C], bx)
    s[B].bind(B.op.axis[0], tex.thread_axis("threadIdx.x"))
    with pytest.raises(ValueError, match=r"'B' is an argument computed at 'i.outer' of 'C' "
                                         r"outside 'threadIdx.x'"):
        tex.build(s, [A, B, C], target="cuda -arch=sm_80")
    f = tex.build(s, [A, C], target="cuda -arch=sm_80")  # B a temporary: shared, barrier
    a = np.arange(64, dtype=np.float32)
    c = np.full(64, np.nan, np.float32)
    f.simulate(a, c)
    np.testing.assert_allclose(c, (a * 2 - 2).reshape(4, 16)[:, ::-1].ravel())
