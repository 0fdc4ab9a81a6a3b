"""Contractions as real models write them: dense layers (``X[i, k] * W[j, k]``), weight
gradients that reduce across long rows, transposing copies, and attention gradients whose
indices go through a head split/merge reshape. The auto-scheduler's choices for each are
checked on the loop nest (register tiles that fit, outer products over transposed copies,
tiled transposes, no phase split of a layout), and every result against the reference
interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import topi
from tex.lower.stmt import For, ForKind, IfThenElse, walk_stmts
from tex.schedule import auto_schedule
from tex.schedule.auto import AutoScheduler
from tex.target import CPUInfo
from tex.testing import evaluate

AVX2 = CPUInfo("avx2", vector_bits=256, cores=2, l2_bytes=512 * 1024, fma=True)


def _check(outs: list[tex.Tensor], ins: list[tex.Tensor], cpu: CPUInfo,
           rng: np.random.Generator) -> str:
    """Build ``outs`` auto-scheduled for ``cpu``, compare with the interpreter; the loops."""
    s = auto_schedule(outs, cpu)
    func = tex.lower(s, [*ins, *outs])
    f = tex.build(s, [*ins, *outs])
    arrays = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    got = [np.full(t.shape, np.nan, "float32") for t in outs]
    f(*arrays, *got)
    want = evaluate(outs, dict(zip(ins, arrays)))
    for g, w in zip(got, want if isinstance(want, list) else [want]):
        np.testing.assert_allclose(g, w, rtol=1e-4, atol=1e-4)
    return str(func)


def _unrolled_pairs(func_text: str) -> list[tuple[int, int]]:
    """Extents of directly nested pairs of unrolled loops, outer first."""
    lines = [ln.strip() for ln in func_text.splitlines()]
    pairs = []
    for a, b in zip(lines, lines[1:]):
        if a.startswith("unrolled for") and b.startswith("unrolled for"):
            pairs.append((int(a.split(", ")[-1].rstrip(") {")),
                          int(b.split(", ")[-1].rstrip(") {"))))
    return pairs


@pytest.mark.parametrize("ea,eb", [(768, 768), (64, 48), (6, 2), (12, 12), (256, 3072)])
def test_dot_tile_keeps_its_live_vectors_in_registers(ea: int, eb: int) -> None:
    """A dot-product block of ta x tb accumulators keeps the shorter side's loaded vectors
    live across the longer side (unrolled outermost): ta*tb + min(ta, tb) + 1 vectors must
    fit, the same count either way round (2 x 6 with the 6 innermost spilled on AVX2: 40
    against 66 GFLOP/s; 6 x 2 was refused)."""
    A = tex.placeholder((4,), name="A")
    sched = AutoScheduler(tex.create_schedule(tex.compute((4,), lambda i: A[i]).op), AVX2)
    (ta, tb), score = sched.dot_tiles(ea, eb)
    assert ta * tb + min(ta, tb) + 1 <= 16
    assert ta * tb >= min(8, ea * eb)  # and still a real tile
    (tb2, ta2), score2 = sched.dot_tiles(eb, ea)
    assert score2 == score and ta2 * tb2 == ta * tb


def test_dense_dot_block_unrolls_the_longer_side_outermost(rng: np.random.Generator) -> None:
    X = tex.placeholder((24, 96), name="X")
    W = tex.placeholder((36, 96), name="W")
    Y = topi.nn.dense(X, W)
    text = _check([Y], [X, W], AVX2, rng)
    pairs = _unrolled_pairs(text)
    assert pairs and all(outer >= inner for outer, inner in pairs), pairs


def test_dense_row_blocks_are_even_and_unguarded(rng: np.random.Generator) -> None:
    """The rows of a dense layer are blocked for the L2 in blocks of equal size, the last
    shifted inwards: no guard inside the reduction loop (a remainder block of 84 rows for
    256 used to test every row at every step)."""
    cpu = CPUInfo("small-l2", vector_bits=256, cores=2, l2_bytes=16 * 1024, fma=True)
    X = tex.placeholder((50, 64), name="X")
    W = tex.placeholder((24, 64), name="W")
    Y = topi.nn.dense(X, W)
    s = auto_schedule([Y], cpu)
    func = tex.lower(s, [X, W, Y])
    for st in walk_stmts(func.body):
        if isinstance(st, For) and st.kind is ForKind.SERIAL and "k" in st.var.name:
            assert not any(isinstance(x, IfThenElse) for x in walk_stmts(st.body)), str(st)
    _check([Y], [X, W], cpu, rng)


@pytest.mark.parametrize("rows,outer", [(512, True), (64, False)])
def test_dense_with_many_rows_is_outer_products_over_a_transposed_weight(
        rows: int, outer: bool, rng: np.random.Generator) -> None:
    """With enough rows to reuse it, the weight is copied once with its output axis last
    and the layer computed as outer products (BERT's dense layers: 63-70 -> 73 GFLOP/s at
    1,024 tokens); a few rows keep the dot products (the copy would cost more)."""
    X = tex.placeholder((rows, 64), name="X")
    W = tex.placeholder((48, 64), name="W")
    B = tex.placeholder((48,), name="B")
    Y = topi.nn.dense(X, W, B)
    text = _check([Y], [X, W, B], AVX2, rng)
    assert ("W.T[" in text) == outer
    assert (".rf" not in text) == outer


@pytest.mark.parametrize("k,outer", [(64, True), (384, False)])
def test_short_dot_products_are_outer_products_from_fewer_rows(
        k: int, outer: bool, rng: np.random.Generator) -> None:
    """``A @ B.T`` over 64-wide rows (attention's Q @ K.T per head) adds each output's
    lanes after 8 vector steps: with 197 rows reusing ``B``, outer products over a copy of
    ``B`` are faster (12 x 197 x 64 x 197: 0.92 -> 0.5 ms), where long dot products (384
    wide) still need 512 rows to pay for the copy."""
    A = tex.placeholder((2, 197, k), name="A")
    B = tex.placeholder((2, 48, k), name="B")
    Y = topi.nn.batch_matmul(A, B)
    text = _check([Y], [A, B], AVX2, rng)
    assert ("B.T[" in text) == outer
    assert (".rf" not in text) == outer


def test_weight_gradient_across_long_rows_reads_a_transposed_copy(
        rng: np.random.Generator) -> None:
    """``dW[p, q] = sum(H[i, p] * X[i, q])``: the register tile's rows ``p`` share a cache
    line of ``H`` at each step, but each step of ``i`` jumps a 1 KiB row, pages apart for
    a wide layer; ``H`` is copied with ``p`` first and read along ``i``."""
    H = tex.placeholder((256, 256), name="H")
    X = tex.placeholder((256, 64), name="X")
    i = tex.reduce_axis((0, 256), name="i")
    dW = tex.compute((256, 64), lambda p, q: tex.sum(H[i, p] * X[i, q], axis=i), name="dW")
    text = _check([dW], [H, X], AVX2, rng)
    assert "H.T[" in text
    # short rows (64 floats, 256 bytes): the cache lines are reused, no copy
    H2 = tex.placeholder((256, 64), name="H2")
    dW2 = tex.compute((64, 64), lambda p, q: tex.sum(H2[i, p] * X[i, q], axis=i), name="dW2")
    assert "H2.T[" not in _check([dW2], [H2, X], AVX2, rng)


@pytest.mark.parametrize("n,m", [(64, 48), (37, 29)])
def test_transposing_copy_is_tiled(n: int, m: int, rng: np.random.Generator) -> None:
    """``T[k, j] = W[j, k]`` in square tiles (the gathered rows stay in L1 while the tile
    walks along them), odd extents through shifted tiles."""
    W = tex.placeholder((n, m), name="W")
    T = tex.compute((m, n), lambda k, j: W[j, k], name="T")
    text = _check([T], [W], AVX2, rng)
    assert "k.outer" in text and "j.outer" in text and "k.inner" in text
    loops = [st for st in walk_stmts(tex.lower(auto_schedule([T], AVX2), [W, T]).body)
             if isinstance(st, For)]
    names = [f.var.name for f in loops]
    assert names.index("k.inner") < names.index("j.inner")  # j innermost: the vectors
    assert [f.kind for f in loops if f.var.name == "j.inner"] == [ForKind.VECTORIZED]


def test_attention_gradient_through_a_head_merge_is_not_phase_split(
        rng: np.random.Generator) -> None:
    """``dQ[p, q] = sum(dP[p // T, q // D, p % T, m] * K[p // T, m, q // D, q % D])`` (a
    head merge of an attention gradient): ``q % D`` with ``D`` a whole number of vector
    tiles is contiguous within each head, so ``q`` carries the vectors in place; splitting
    ``q`` into its ``D`` phases put the vectors across heads, 8 KiB apart."""
    b, heads, t, d = 2, 3, 8, 16
    dP = tex.placeholder((b, heads, t, t), name="dP")
    K = tex.placeholder((b, t, heads, d), name="K")
    m = tex.reduce_axis((0, t), name="m")
    dQ = tex.compute(
        (b * t, heads * d),
        lambda p, q: tex.sum(dP[p // t, q // d, p % t, m] * K[p // t, m, q // d, q % d],
                             axis=m), name="dQ")
    text = _check([dQ], [dP, K], AVX2, rng)
    assert "phases" not in text
    vec = [st for st in walk_stmts(tex.lower(auto_schedule([dQ], AVX2), [dP, K, dQ]).body)
           if isinstance(st, For) and st.kind is ForKind.VECTORIZED]
    assert any(f.var.name.startswith("q") for f in vec)


def test_weight_gradient_through_a_reshape_copies_what_it_reads(
        rng: np.random.Generator) -> None:
    """``dW[p, q] = sum(G[n // 8, n % 8, p // 256, p % 256] * X[n // 8, n % 8, q])`` (a
    projection's weight gradient with its head split and batch reshape inlined): the flat
    address of ``G`` is ``n*1024 + p``, so ``G`` is copied as ``G.T[p, n]`` (rows along
    ``n``), and ``X``, read through the same reshape, is packed into panels like any
    affine read."""
    b, t, heads, d = 8, 8, 4, 256  # 64 rows n of 1,024 floats (4 KiB): 64 Ki elements
    G = tex.placeholder((b, t, heads, d), name="G")
    X = tex.placeholder((b, t, 48), name="X")
    n = tex.reduce_axis((0, b * t), name="n")
    dW = tex.compute(
        (heads * d, 48),
        lambda p, q: tex.sum(G[n // t, n % t, p // d, p % d] * X[n // t, n % t, q], axis=n),
        name="dW")
    text = _check([dW], [G, X], AVX2, rng)
    assert "G.T[" in text and "X.local" in text


def test_long_reduction_is_summed_in_blocks_that_fit_the_l2(rng: np.random.Generator) -> None:
    """A weight gradient over a batch of images streams a panel of ``k x 16`` floats per
    register tile; when that outgrows the L2 it is summed per block of the batch (partial
    results, each with packed panels), then the partials are added: a ResNet block's
    weight gradient at 28 x 28 went from 24 to 74 GFLOP/s."""
    cpu = CPUInfo("small-l2", vector_bits=256, cores=2, l2_bytes=32 * 1024, fma=True)
    H = tex.placeholder((4, 32, 10, 10), name="H")
    X = tex.placeholder((4, 24, 12, 12), name="X")
    n, h, w = (tex.reduce_axis((0, e), name=nm) for e, nm in ((4, "n"), (10, "h"), (10, "w")))
    dW = tex.compute((32, 24, 3, 3), lambda p, q, r, s: tex.sum(
        H[n, p, h, w] * X[n, q, h + r, w + s], axis=[n, h, w]), name="dW")
    text = _check([dW], [H, X], cpu, rng)
    assert ".rf[" in text and "n.outer" in text
    # a panel that fits: one pass, no partials
    assert ".rf[" not in _check([dW], [H, X], AVX2, rng)


@pytest.mark.parametrize("rows", [1031, 1042])
def test_long_reduction_without_a_near_divisor_is_blocked_unevenly(
        rows: int, rng: np.random.Generator) -> None:
    """1,031 (a prime) or 1,042 (2 x 521) rows have no divisor near the 5 blocks the L2
    asks for: 5 blocks, the last shorter (its guard in a peeled remainder loop), not one
    block per row or two."""
    cpu = CPUInfo("small-l2", vector_bits=256, cores=2, l2_bytes=32 * 1024, fma=True)
    H = tex.placeholder((rows, 32), name="H")
    X = tex.placeholder((rows, 24), name="X")
    i = tex.reduce_axis((0, rows), name="i")
    dW = tex.compute((32, 24), lambda p, q: tex.sum(H[i, p] * X[i, q], axis=i), name="dW")
    text = _check([dW], [H, X], cpu, rng)
    assert "allocate dW.rf: float32[3840]" in text, text  # 5 partials of 32 x 24


def test_transposing_copy_of_a_kernel_is_one_of_long_rows(rng: np.random.Generator) -> None:
    """``dW[p, q, r, s] = dW.T[q, r, s, p]`` (a relayout's copy back, 3 x 3 kernel last):
    ``q, r, s`` index ``dW.T``'s first three dimensions in order, so fused they are one
    axis contiguous on both sides, and the copy one of a 35 x 360 matrix in square tiles
    vectorized along it (the kernel's 3 alone was too short: 9 -> 2.4 ns an element for a
    512 x 512 x 3 x 3 kernel, one thread)."""
    T = tex.placeholder((40, 3, 3, 35), name="T")
    out = tex.compute((35, 40, 3, 3), lambda p, q, r, s: T[q, r, s, p], name="O")
    _check([out], [T], AVX2, rng)
    loops = [st for st in walk_stmts(tex.lower(auto_schedule([out], AVX2), [T, out]).body)
             if isinstance(st, For)]
    assert [(f.var.name, f.kind.name) for f in loops] == [
        ("q.r.fused.s.fused.outer", "SERIAL"), ("p.outer", "SERIAL"),
        ("p.inner", "SERIAL"), ("q.r.fused.s.fused.inner", "VECTORIZED")]


def test_transposing_copy_tiles_walk_along_the_input_rows(rng: np.random.Generator) -> None:
    """``Y[n, h, w, c] = X[n, c, h, w]``: the tiles of one band of 16 channels follow one
    another along ``h, w``, so the gathers read 16 rows of ``X`` front to back (streams
    the prefetcher follows) rather than a line of each of the 128 rows per tile step
    (resnet_28's activation copy in its gradient: 12.8 -> 8.4 ms a call, one thread)."""
    X = tex.placeholder((2, 128, 6, 6), name="X")
    out = tex.compute((2, 6, 6, 128), lambda n, h, w, c: X[n, c, h, w], name="Y")
    _check([out], [X], AVX2, rng)
    loops = [st.var.name for st in walk_stmts(
        tex.lower(auto_schedule([out], AVX2), [X, out]).body) if isinstance(st, For)]
    assert loops.index("c.outer") < loops.index("h.w.fused.outer")


@pytest.mark.parametrize("direction", ["forward", "back"])
def test_transposing_copy_fuses_only_axes_contiguous_on_both_sides(
        direction: str, rng: np.random.Generator) -> None:
    """The relayout of a kernel (``W.T[q, r, s, p] = W[p, q, r, s]``) and its copy back fuse
    ``q, r, s``; with ``r, s`` swapped in the output they are not contiguous in ``W``, and
    the short last axis keeps rows of the input innermost, a tile at a time."""
    if direction == "forward":
        W = tex.placeholder((35, 40, 3, 3), name="W")
        out = tex.compute((40, 3, 3, 35), lambda q, r, s, p: W[p, q, r, s], name="O")
        fused = ["q.r.fused.s.fused"]
    else:
        W = tex.placeholder((40, 3, 3, 35), name="W")
        out = tex.compute((35, 40, 3, 3), lambda p, q, s, r: W[q, r, s, p], name="O")
        fused = []
    _check([out], [W], AVX2, rng)
    loops = [st.var.name for st in walk_stmts(
        tex.lower(auto_schedule([out], AVX2), [W, out]).body) if isinstance(st, For)]
    assert [n for n in loops if "fused" in n and n.endswith(".outer")] == \
        [f"{n}.outer" for n in fused]
    if not fused:
        assert loops == ["p.outer", "q", "s", "r", "p.inner"]


@pytest.mark.parametrize("n,rows", [(7, 4), (14, 5), (28, 6), (1024, 6), (5, 5)])
def test_row_tile_weighs_the_shifted_overlap(n: int, rows: int) -> None:
    """Unrolled rows of a spatial-vector tile (at most 6 with two vectors a row): 6 rows
    for a 7-point axis compute 12 points (the last tile shifted inwards); 4 compute 8."""
    from tex.schedule.auto import _row_tile
    assert _row_tile(n, 6, 2) == rows


@pytest.mark.parametrize("batch,moved", [(8, True), (1, False)])
def test_short_rows_with_a_long_axis_elsewhere_are_computed_transposed(
        batch: int, moved: bool, rng: np.random.Generator) -> None:
    """A 7 x 7 convolution: its rows are shorter than a vector, its batch and channels are
    not. With enough reuse of the copies, a long axis is computed innermost over transposed
    copies (batch 8 x 512 channels: 50 -> 67 GFLOP/s); a single image keeps 7 of 8 lanes
    (copying the weight every call would cost more than it saves)."""
    x = tex.placeholder((batch, 64, 7, 7), name="x")
    w = tex.placeholder((64, 64, 3, 3), name="w")
    y = topi.nn.conv2d(x, w, 1, 1)
    text = _check([y], [x, w], AVX2, rng)
    assert ("conv2d_nchw.T[" in text) == moved


def test_panel_is_packed_once_for_the_axes_it_does_not_use(rng: np.random.Generator) -> None:
    """``C[b, i, j] = sum(A[b, i, k] * B[k, j])``: the packed panel of ``B`` does not depend
    on the batch ``b``, so ``b`` runs inside the panel loop and the panel is packed once per
    ``j`` tile, not once per image (when the ``j`` tiles alone give every thread work)."""
    A = tex.placeholder((4, 24, 32), name="A")
    B = tex.placeholder((32, 192), name="B")
    k = tex.reduce_axis((0, 32), name="k")
    C = tex.compute((4, 24, 192), lambda b, i, j: tex.sum(A[b, i, k] * B[k, j], axis=k),
                    name="C")
    _check([C], [A, B], AVX2, rng)
    loops = [st for st in walk_stmts(tex.lower(auto_schedule([C], AVX2), [A, B, C]).body)
             if isinstance(st, For)]
    names = [f.var.name for f in loops]
    assert names.index("j.outer") < names.index("b"), names


def test_few_panels_are_shared_in_chunks_of_tiles(rng: np.random.Generator) -> None:
    """A 100 x 100 matmul has 7 column panels for 2 cores: the parallel loop takes each
    panel's row tiles in a few chunks (each packing the panel once), not one chunk per tile
    (17 packings of every panel)."""
    A = tex.placeholder((100, 100), name="A")
    B = tex.placeholder((100, 100), name="B")
    k = tex.reduce_axis((0, 100), name="k")
    C = tex.compute((100, 100), lambda i, j: tex.sum(A[i, k] * B[k, j], axis=k), name="C")
    _check([C], [A, B], AVX2, rng)
    loops = [st for st in walk_stmts(tex.lower(auto_schedule([C], AVX2), [A, B, C]).body)
             if isinstance(st, For) and st.kind is ForKind.PARALLEL]
    assert len(loops) == 1 and 8 <= loops[0].extent.value <= 16, [str(f.extent) for f in loops]


def _per_channel_sums(n: int, c: int, hw: int) -> tuple[list, list]:
    """Two per-channel reductions over the same activations (a batch norm's gradient
    sums, keepdims), and their inputs."""
    A = tex.placeholder((n, c, hw, hw), name="A")
    B = tex.placeholder((n, c, hw, hw), name="B")
    M = tex.placeholder((1, c, 1, 1), name="M")

    def per_channel(name: str, f) -> tex.Tensor:  # noqa: ANN001
        r = [tex.reduce_axis((0, e), name=f"{name}{k}") for k, e in enumerate((n, hw, hw))]
        return tex.compute((1, c, 1, 1), lambda i, q, j, k: tex.sum(
            f(r[0], q, r[1], r[2]), axis=r), name=name)

    S1 = per_channel("S1", lambda a, q, h, w: (A[a, q, h, w] - M[0, q, 0, 0]) * B[a, q, h, w])
    S2 = per_channel("S2", lambda a, q, h, w: (A[a, q, h, w] - M[0, q, 0, 0]) ** 2
                     * B[a, q, h, w])
    return [S1, S2], [A, B, M]


def test_readers_of_one_transposed_layout_share_its_copy(rng: np.random.Generator) -> None:
    """Per-channel sums over 7 x 7 images (rows shorter than a vector: no axis to
    vectorize in place): the first makes the transposed copies ``A.T``, ``B.T`` (channels
    last), the second reads them instead of copying again (resnet_28's gradient made 10
    copies of 8 x 128 x 28 x 28 a call where 6 tensors; each copy costs about 0.8 ms)."""
    outs, ins = _per_channel_sums(64, 128, 7)
    _check(outs, ins, AVX2, rng)
    copies = [st.op.name for st in auto_schedule(outs, AVX2).stages
              if st.op.tag == "relayout"]
    # (S1, S2: the sums computed channels last, copied back)
    assert sorted(copies) == ["A.T", "B.T", "M.T", "S1", "S2"]


def test_sums_reading_each_element_once_stay_in_place(rng: np.random.Generator) -> None:
    """Per-channel sums over 28 x 28 images, each element read once: summed in place
    along the rows (3.5 vectors each), never over transposed copies, which would cost a
    pass of their own over every input (a batch norm gradient at 8 x 64 x 28 x 28: 0.54 ms
    with the copies, 0.39 ms in place)."""
    outs, ins = _per_channel_sums(8, 64, 28)
    _check(outs, ins, AVX2, rng)
    assert not [st.op.name for st in auto_schedule(outs, AVX2).stages
                if st.op.tag == "relayout"]
