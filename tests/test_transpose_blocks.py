"""Transposing copies in register blocks (``tex.codegen.vector.transpose_plan``): a loop
over ``a`` around a vectorized loop over ``l`` copying ``X[x0 + a + l*sx]`` (a gather along
``l``) to ``T[t0 + a*st + l]`` is compiled as square blocks loaded row by row and turned by
shuffles. Every case runs against the loop interpreter (``loop_interp``); the notes say
where the blocks applied, and the cases where they must not (extents that are no multiple
of a block, reads that are contiguous already, rows of the store that overlap, a copy
within one buffer, bounds reports) keep the gathers and their results."""
from __future__ import annotations

import numpy as np
import pytest

from tex.build import build_lowered
from tex.codegen import host_target
from tex.codegen.vector import transpose_plan
from tex.dtype import DTYPES, DType, int32
from tex.ir.expr import Const, Expr, TensorRead, Var
from tex.ir.tensor import Tensor
from tex.lower.stmt import (
    BufferParam,
    For,
    ForKind,
    LoweredFunc,
    Store,
    make_buffer,
)

from loop_interp import run_lowered

F32 = DTYPES["float32"]
# elements of one vector register per dtype on this host: the blocks' side
REGISTER_BITS = host_target().vector_bits


def _rows(d: DType) -> int:
    return REGISTER_BITS // (8 * d.itemsize)


def _copy(name: str, d: DType, e_a: int, e_l: int, sx: int, st: int, *, x0: int = 0,
          t0: int = 0, a_min: int = 0, l_min: int = 0, outer: int = 1,
          kind: ForKind = ForKind.SERIAL) -> tuple[LoweredFunc, Tensor, Tensor]:
    """``for o in [0, outer): for a: vectorized for l: T[t(o, a, l)] = X[x(o, a, l)]``,
    the outer loop moving both by a whole block of rows; buffers sized to fit."""
    o, a, lane = Var("o", int32, "axis"), Var("a", int32, "axis"), Var("l", int32, "axis")
    a_hi, l_hi = a_min + e_a - 1, l_min + e_l - 1
    x_block = a_hi + 1 + l_hi * sx + 1
    t_span = (abs(st) * (a_hi + 1) + l_hi + 1)
    X = make_buffer("X", x0 + outer * x_block, d)
    T = make_buffer("T", t0 + outer * t_span + abs(st) * (a_hi + 1), d)
    xi: Expr = a + lane * sx + o * x_block + x0
    # a negative stride walks T's rows backwards from the top of the outer step's span
    ti: Expr = (a * st + lane + o * t_span + t0) if st > 0 else \
        (Const(t0 + abs(st) * (a_hi + 1), int32) + a * st + lane + o * t_span)
    body = For(lane, Const(l_min, int32), Const(e_l, int32), ForKind.VECTORIZED,
               Store(T, ti, TensorRead(X, [xi])))
    nest = For(o, Const(0, int32), Const(outer, int32), ForKind.SERIAL,
               For(a, Const(a_min, int32), Const(e_a, int32), kind, body))
    params = (BufferParam(X, X, False), BufferParam(T, T, True))
    return LoweredFunc(name, params, nest), X, T


def _arrays(d: DType, X: Tensor, T: Tensor, rng: np.random.Generator
            ) -> tuple[np.ndarray, np.ndarray]:
    n = int(X.shape[0])
    if d.is_float:
        x = rng.standard_normal(n).astype(d.numpy)
    else:
        info = np.iinfo(d.numpy)
        x = rng.integers(info.min, info.max, n, dtype=d.numpy, endpoint=True)
    return x, np.zeros(int(T.shape[0]), d.numpy)


def _run_both(func: LoweredFunc, X: Tensor, T: Tensor, d: DType,
              rng: np.random.Generator) -> tuple[tuple[str, ...], np.ndarray]:
    """Build ``func`` and run it and the interpreter on the same data; equal bit for bit.
    The notes and the output."""
    f = build_lowered(func)
    x, t = _arrays(d, X, T, rng)
    want = t.copy()
    run_lowered(func, [x, want])
    f(x, t)
    np.testing.assert_array_equal(t.view(np.uint8), want.view(np.uint8))
    return f._kernel.sources.notes, t


@pytest.mark.parametrize("dtype", ["float32", "int32", "float64", "int64", "float16",
                                   "uint8", "int16"])
def test_every_width_of_element_is_turned_in_blocks(dtype: str,
                                                    rng: np.random.Generator) -> None:
    """Blocks of one register's elements on a side: 8 x 8 floats, 4 x 4 doubles, 32 x 32
    bytes with AVX2 (log2 of the side rounds of interleaving)."""
    d = DTYPES[dtype]
    n = _rows(d)
    func, X, T = _copy(f"t_{dtype}", d, 2 * n, 2 * n, sx=2 * n + 3, st=2 * n + 5)
    notes, _ = _run_both(func, X, T, d, rng)
    assert f"transposed a x l in {n} x {n} blocks" in notes


@pytest.mark.parametrize("kind", [ForKind.SERIAL, ForKind.UNROLLED])
@pytest.mark.parametrize("blocks_a,blocks_l", [(1, 1), (2, 2), (3, 1), (1, 4), (5, 3)])
def test_block_counts_loops_and_offsets(kind: ForKind, blocks_a: int, blocks_l: int,
                                        rng: np.random.Generator) -> None:
    """Few blocks along a side are unrolled, more are a loop; loops that start past 0 and
    buffers whose copy starts past 0, inside an outer loop that moves both."""
    n = _rows(F32)
    e_a, e_l = blocks_a * n, blocks_l * n
    func, X, T = _copy(f"t_{kind.name}_{blocks_a}_{blocks_l}", F32, e_a, e_l,
                       sx=e_a + 7, st=e_l + 2, x0=5, t0=3, a_min=2, l_min=1, outer=3,
                       kind=kind)
    notes, _ = _run_both(func, X, T, F32, rng)
    assert f"transposed a x l in {n} x {n} blocks" in notes


def test_a_negative_store_stride_walks_rows_backwards(rng: np.random.Generator) -> None:
    n = _rows(F32)
    func, X, T = _copy("t_backwards", F32, 2 * n, 2 * n, sx=2 * n, st=-2 * n)
    notes, _ = _run_both(func, X, T, F32, rng)
    assert any(note.startswith("transposed") for note in notes)


@pytest.mark.parametrize("case,why", [
    ((1.5, 1, 2.5, 1), "the outer extent is no multiple of a block"),
    ((1, 1.5, 2.5, 1.5), "the vectorized extent is no multiple of a block"),
    ((1, 1, None, 8), "the read is contiguous along the vector already"),
    ((1, 1, 2, 0.5), "rows of the store overlap"),
])
def test_copies_that_are_not_blocks_keep_their_gathers(case: tuple, why: str,
                                                       rng: np.random.Generator) -> None:
    """(Extents and strides in blocks of this host's register: ``None`` is stride 1.)"""
    n = _rows(F32)
    e_a, e_l, sx, st = (1 if x is None else int(x * n) for x in case)
    func, X, T = _copy("t_plain", F32, e_a, e_l, sx=sx, st=st)
    notes, _ = _run_both(func, X, T, F32, rng)
    assert not any(note.startswith("transposed") for note in notes), why


def test_plan_refuses_copies_within_one_buffer_and_reads_of_reports() -> None:
    """Loads before stores would read what the copy itself writes; a bounds report is no
    buffer (its read stays a check)."""
    n = _rows(F32)
    func, X, _ = _copy("t_self", F32, n, n, sx=2 * n, st=2 * n)
    outer = func.body
    assert isinstance(outer, For) and isinstance(outer.body, For)
    loop = outer.body
    assert transpose_plan(loop, 2 * n) is not None
    inner = loop.body
    assert isinstance(inner, For) and isinstance(inner.body, Store)
    st = inner.body
    onto_itself = Store(X, st.index, st.value)
    same = For(loop.var, loop.min, loop.extent, loop.kind,
               For(inner.var, inner.min, inner.extent, inner.kind, onto_itself))
    assert transpose_plan(same, 2 * n) is None
    scaled = Store(st.buffer, st.index, st.value * 2.0)  # not a plain copy
    not_copy = For(loop.var, loop.min, loop.extent, loop.kind,
                   For(inner.var, inner.min, inner.extent, inner.kind, scaled))
    assert transpose_plan(not_copy, 2 * n) is None


@pytest.mark.parametrize("seed", range(12))
def test_fuzz_copies_agree_with_the_interpreter(seed: int) -> None:
    """Random extents (multiples of a block or not), strides, offsets and loop kinds: the
    blocks apply exactly where the plan's conditions hold, and every result is the
    interpreter's."""
    rng = np.random.default_rng(seed)
    d = DTYPES[str(rng.choice(["float32", "int32", "float64", "uint8"]))]
    n = _rows(d)
    e_a = int(rng.choice([n, 2 * n, 3 * n, n + 3, max(1, n - 1)]))
    e_l = int(rng.choice([n, 2 * n, 4 * n, n + 1, 3]))
    sx = int(rng.choice([0, 1, 2, e_a, e_a + 5]))
    st = int(rng.choice([e_l, e_l + 9, -(e_l + 1), max(1, e_l - 2)]))
    kind = ForKind.UNROLLED if rng.random() < 0.3 else ForKind.SERIAL
    func, X, T = _copy(f"fuzz{seed}", d, e_a, e_l, sx=sx, st=st, x0=int(rng.integers(4)),
                       t0=int(rng.integers(4)), a_min=int(rng.integers(3)),
                       l_min=int(rng.integers(3)), outer=int(rng.integers(1, 3)), kind=kind)
    notes, _ = _run_both(func, X, T, d, rng)
    expect = e_a % n == 0 and e_l % n == 0 and sx not in (0, 1) and abs(st) >= e_l
    assert any(note.startswith("transposed") for note in notes) == expect, \
        (d.name, e_a, e_l, sx, st, notes)
