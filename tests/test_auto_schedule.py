"""auto_schedule: the schedules it picks (vectorized, parallel, blocked, two-level), that they
compute what the reference interpreter computes, and clear errors on bad input."""
from __future__ import annotations

import re

import numpy as np
import pytest

import tex
from tex.lower.stmt import For, ForKind, walk_stmts
from tex.schedule import auto_schedule
from tex.target import CPUInfo
from tex.testing import evaluate


def _kinds(s, args) -> set[ForKind]:
    func = tex.lower(s, args)
    return {st.kind for st in walk_stmts(func.body) if isinstance(st, For)}


def _run(outs, ins, arrays):
    s = auto_schedule(outs)
    f = tex.build(s, [*ins, *outs])
    bufs = [np.zeros(o.shape, o.dtype.name) for o in outs]
    f(*arrays, *bufs)
    ref = evaluate(outs, dict(zip(ins, arrays)))
    ref = ref if isinstance(ref, (list, tuple)) else [ref]
    for b, r in zip(bufs, ref):
        np.testing.assert_allclose(b, r, rtol=1e-4, atol=1e-4)
    return s


@pytest.mark.parametrize("rows, parallel", [(160, False), (176, True)])
def test_stage_below_the_parallel_threshold_opens_no_region(rows: int, parallel: bool) -> None:
    """``A * 2 + 1`` costs 3 per element (a read, a multiply, an add): 160 x 256 elements
    (122 880) stay below PARALLEL_MIN_WORK (131 072) and run serially, with no OpenMP call
    in the built code (its fork/join would cost more than it saves); 176 x 256 run in
    parallel, with the same results bit for bit as on one thread."""
    from tex.schedule.auto import PARALLEL_MIN_WORK

    assert (rows * 256 * 3 >= PARALLEL_MIN_WORK) == parallel
    A = tex.placeholder((rows, 256), name="A")
    B = tex.compute((rows, 256), lambda i, j: A[i, j] * 2.0 + 1.0, name="B")
    s = auto_schedule(B, CPUInfo("test", vector_bits=256, cores=2))
    assert (ForKind.PARALLEL in _kinds(s, [A, B])) == parallel
    a = np.random.default_rng(0).standard_normal((rows, 256)).astype(np.float32)
    outs = []
    for threads in (1, 2):
        with tex.debug.config(num_threads=threads):
            f = tex.build(s, [A, B], name=f"axpb{rows}_{threads}")
        assert ("GOMP_parallel" in f.get_source("ll")) == (parallel and threads == 2)
        b = np.empty((rows, 256), np.float32)
        f(a, b)
        outs.append(b)
    np.testing.assert_array_equal(outs[0], outs[1])
    np.testing.assert_array_equal(outs[0], a * np.float32(2) + np.float32(1))


@pytest.mark.parametrize("bits,cores", [(128, 1), (256, 2), (512, 4)])
def test_target_may_be_a_cpu_description(bits: int, cores: int) -> None:
    """``auto_schedule(outs, CPUInfo(...))`` schedules for that machine, not the host
    (the golden files are made for one fixed machine this way)."""
    A = tex.placeholder((16384,), name="A")  # work 13 x 16384: above PARALLEL_MIN_WORK
    B = tex.compute((16384,), lambda i: tex.exp(A[i]), name="B")
    s = auto_schedule(B, CPUInfo("test", vector_bits=bits, cores=cores))
    loops = [st for st in walk_stmts(tex.lower(s, [A, B]).body) if isinstance(st, For)]
    vector = [f for f in loops if f.kind is ForKind.VECTORIZED]
    assert [f.extent.value for f in vector] == [bits // 32]
    assert any(f.kind is ForKind.PARALLEL for f in loops) == (cores > 1)
    with pytest.raises(TypeError, match="target must be a string such as 'llvm', a "
                                        "tex.target.Target or a CPUInfo, got int 3"):
        auto_schedule(B, 3)  # type: ignore[arg-type]


def test_matmul_is_blocked_vectorized_and_parallel() -> None:
    rng = np.random.default_rng(0)
    A = tex.placeholder((64, 48), "float32", name="A")
    B = tex.placeholder((48, 80), "float32", name="B")
    k = tex.reduce_axis((0, 48), name="k")
    C = tex.compute((64, 80), lambda i, j: tex.sum(A[i, k] * B[k, j], axis=k), name="C")
    s = _run([C], [A, B], [rng.standard_normal((64, 48), "float32"),
                           rng.standard_normal((48, 80), "float32")])
    kinds = _kinds(s, [A, B, C])
    assert {ForKind.VECTORIZED, ForKind.UNROLLED, ForKind.PARALLEL} <= kinds
    assert any(st.scope == "local" for st in s.stages)  # register tile of accumulators


def test_dot_tile_horizontal_sums_are_unrolled() -> None:
    """C[i, j] = sum_k A[i, k] * B[j, k] (k contiguous in both): vector partial sums per
    tile, then one horizontal sum per accumulator; those loops are unrolled (LLVM leaves
    loops around longer nests to the schedule: left loops, batch_matmul's gradient ran
    13% slower)."""
    rng = np.random.default_rng(3)
    A = tex.placeholder((24, 64), "float32", name="A")
    B = tex.placeholder((32, 64), "float32", name="B")
    k = tex.reduce_axis((0, 64), name="k")
    C = tex.compute((24, 32), lambda i, j: tex.sum(A[i, k] * B[j, k], axis=k), name="C")
    s = _run([C], [A, B], [rng.standard_normal((24, 64), "float32"),
                           rng.standard_normal((32, 64), "float32")])
    func = tex.lower(s, [A, B, C])
    final = [st for st in walk_stmts(func.body) if isinstance(st, For)
             and any(isinstance(x, For) and x.var.name.endswith(".r")
                     for x in walk_stmts(st.body))
             and not any(isinstance(x, For) and x.kind is ForKind.VECTORIZED
                         for x in walk_stmts(st.body))]
    # the loops around the horizontal sums: the tile's two axes, both unrolled
    assert [lp.kind for lp in final[-2:]] == [ForKind.UNROLLED, ForKind.UNROLLED], func


def test_row_reduction_is_rfactored_into_vector_lanes() -> None:
    rng = np.random.default_rng(1)
    X = tex.placeholder((128, 256), "float32", name="X")
    k = tex.reduce_axis((0, 256), name="k")
    R = tex.compute((128,), lambda i: tex.sum(X[i, k] * X[i, k], axis=k), name="R")
    s = _run([R], [X], [rng.standard_normal((128, 256), "float32")])
    assert any(st.op.name.endswith(".rf") for st in s.stages)
    assert ForKind.VECTORIZED in _kinds(s, [X, R])


def test_full_reduction_is_two_level_and_parallel() -> None:
    rng = np.random.default_rng(2)
    X = tex.placeholder((1 << 16,), "float32", name="X")
    k = tex.reduce_axis((0, 1 << 16), name="k")
    L = tex.compute((), lambda: tex.sum(X[k] * 2.0, axis=k), name="L")
    s = _run([L], [X], [rng.standard_normal(1 << 16, "float32")])
    kinds = _kinds(s, [X, L])
    assert ForKind.PARALLEL in kinds and ForKind.VECTORIZED in kinds


def test_cheap_elementwise_producers_are_inlined_expensive_reused_ones_kept() -> None:
    rng = np.random.default_rng(3)
    X = tex.placeholder((64, 64), "float32", name="X")
    P = tex.compute((64, 64), lambda i, j: X[i, j] + 1.0, name="P")  # cheap: inlined
    E = tex.compute((64, 64), lambda i, j: tex.exp(X[i, j]), name="E")  # read 4 times
    k = tex.reduce_axis((0, 64), name="k")
    S = tex.compute((64,), lambda i: tex.sum(E[i, k], axis=k), name="S")
    Y = tex.compute((64, 64), lambda i, j: (E[i, j] * P[i, j] + E[j, i] + E[i, 0]) / S[i],
                    name="Y")
    s = _run([Y], [X], [rng.standard_normal((64, 64), "float32")])
    assert s[P].attach_type == "inline"
    assert s[E].attach_type == "root"


@pytest.mark.parametrize("bad", [None, [], [1, 2], "C"])
def test_bad_outputs_are_rejected(bad) -> None:
    with pytest.raises(TypeError, match="auto_schedule"):
        auto_schedule(bad)


def test_unknown_target_is_rejected() -> None:
    A = tex.placeholder((4,), "float32", name="A")
    B = tex.compute((4,), lambda i: A[i] * 2.0, name="B")
    with pytest.raises(ValueError, match="auto_schedule: unknown"):
        auto_schedule([B], target="tpu")
    with pytest.raises(TypeError, match="target"):
        auto_schedule([B], target=3)


def test_build_without_schedule_uses_auto_schedule() -> None:
    A = tex.placeholder((1024,), "float32", name="A")
    B = tex.compute((1024,), lambda i: tex.tanh(A[i]), name="B")
    f = tex.build([B])
    assert "<8 x float>" in f.get_source("ll") or "<16 x float>" in f.get_source("ll")
    a = np.linspace(-3, 3, 1024, dtype="float32")
    b = np.zeros_like(a)
    f(a, b)
    np.testing.assert_allclose(b, np.tanh(a), rtol=1e-6, atol=1e-7)


def _conv_grads(stride: int, pad: int, ksize: int, size: int = 16):
    data = tex.placeholder((2, 3, size, size), "float32", name="data")
    kernel = tex.placeholder((4, 3, ksize, ksize), "float32", name="kernel")
    out = tex.topi.nn.conv2d(data, kernel, stride, pad)
    H = tex.placeholder(out.shape, "float32", name="H")
    loss = tex.topi.sum(out * H)
    ddata, dkernel = tex.differentiate(loss, [data, kernel]).result
    return data, kernel, H, ddata, dkernel


@pytest.mark.parametrize("stride,pad,ksize", [(1, 1, 3), (2, 2, 5)])
def test_conv_gradients_read_zero_padded_copies_not_guards(stride, pad, ksize) -> None:
    """The window-bound guards of the zero elimination become reads of a zero-padded copy
    (what the forward's padding computed); the numbers are the interpreter's."""
    rng = np.random.default_rng(4)
    data, kernel, H, ddata, dkernel = _conv_grads(stride, pad, ksize)
    arrays = [rng.standard_normal(t.shape, "float32") for t in (data, kernel, H)]
    s = _run([dkernel], [data, H], [arrays[0], arrays[2]])
    pads = [st.op.output(0) for st in s.stages if st.op.name == "data.pad"]
    assert len(pads) == 1
    # a stride-2 window reads the copy by phase of its last axis: contiguous again
    assert len(pads[0].shape) == (5 if stride == 2 else 4)
    text = str(tex.lower(s, [data, H, dkernel]))
    updates = [ln for ln in text.splitlines() if "* data.pad[" in ln]
    assert updates and not any("select(" in ln or "if (" in ln for ln in updates)
    s = _run([ddata], [kernel, H], [arrays[1], arrays[2]])
    # a strided data gradient comes from differentiate as one dense sum per stride phase
    # (tex.arith.phases), each scheduled as a stride-1 convolution reading padded copies
    phases = [st for st in s.stages if "_phase" in st.op.name and st.op.reduce_axis]
    assert len(phases) == (4 if stride > 1 else 0)
    # the phases all read one padded copy of the head (its widest margins), not one each
    assert [st.op.name for st in s.stages].count("H.pad") == 1
    text = str(tex.lower(s, [kernel, H, ddata]))
    updates = [ln for ln in text.splitlines() if "* kernel[" in ln]
    assert updates and not any("select(" in ln or "if (" in ln for ln in updates)


@pytest.mark.parametrize("stride,pad,ksize,forward_first", [
    (1, 1, 3, True), (2, 1, 3, True), (1, 2, 5, True), (1, 1, 3, False)])
def test_gradients_read_the_forwards_padded_copy(stride: int, pad: int, ksize: int,
                                                 forward_first: bool) -> None:
    """A program computing the convolution and its gradients pads its input once: the
    weight gradient reads the forward's ``pad_temp`` (at its offsets) instead of making
    ``data.pad``; where the gradient's stage runs before the forward's copy is made (the
    outputs in the other order), it makes its own. The numbers are the interpreter's."""
    rng = np.random.default_rng(5)
    data, kernel, H, _, dkernel = _conv_grads(stride, pad, ksize)
    out = tex.topi.nn.conv2d(data, kernel, stride, pad)
    outs = [out, dkernel] if forward_first else [dkernel, out]
    arrays = [rng.standard_normal(t.shape, "float32") for t in (data, kernel, H)]
    s = _run(outs, [data, kernel, H], arrays)
    names = [st.op.name for st in s.stages]
    copies = [n for n in names if n.startswith("data.pad")]
    if forward_first and stride == 1:
        assert copies == [], names  # (a stride-2 window reads a copy by phase)
    else:
        assert len(copies) == 1, names


def _depthwise(width: int, stride: int, guard: str = "pad", batch: int = 2,
               channels: int = 8):
    """A depthwise 3 x 3 convolution as TVM's topi writes it: a sum of products over
    ``topi.nn.pad(X)`` (inlined into the sum: ``select(bounds, X[..], 0) * W[..]``); with
    ``guard="parity"`` the select tests something else than bounds."""
    X = tex.placeholder((batch, channels, width, width), "float32", name="X")
    W = tex.placeholder((channels, 3, 3), "float32", name="W")
    P = tex.topi.nn.pad(X, (0, 0, 1, 1), (0, 0, 1, 1))
    if guard == "parity":
        P = tex.compute(P.shape, lambda n, c, y, x: tex.if_then_else(
            (x + y) % 2 == 0, P[n, c, y, x], 0.0), name="P2")
    out = (width + 2 - 3) // stride + 1
    ry = tex.reduce_axis((0, 3), name="ry")
    rx = tex.reduce_axis((0, 3), name="rx")
    Y = tex.compute((batch, channels, out, out), lambda n, c, i, j: tex.sum(
        P[n, c, i * stride + ry, j * stride + rx] * W[c, ry, rx], axis=[ry, rx]), name="Y")
    return X, W, Y


@pytest.mark.parametrize("width,stride", [(55, 2), (56, 2), (30, 1), (31, 1)])
def test_forward_sum_over_an_inlined_pad_reads_a_padded_copy(width: int, stride: int
                                                             ) -> None:
    """The pad's bounds test, inlined into a vectorized sum, masked every load (a stride-2
    depthwise convolution at 55 x 55 ran 4x slower than without padding): the sum reads a
    zero-padded copy instead (by phase for a stride of 2: contiguous reads), as the
    gradients' guards do. Where the pad's upper bound never fails (56 at stride 2) the
    check left is the lower one alone."""
    rng = np.random.default_rng(6)
    X, W, Y = _depthwise(width, stride)
    arrays = [rng.standard_normal(t.shape, "float32") for t in (X, W)]
    s = _run([Y], [X, W], arrays)
    if stride == 2:  # (at stride 1 the pad, read 9 times a point, is a copy already)
        pads = [st.op.output(0) for st in s.stages if st.op.name == "X.pad"]
        assert len(pads) == 1 and len(pads[0].shape) == 5
    updates = [ln for ln in str(tex.lower(s, [X, W, Y])).splitlines() if "* W[" in ln]
    assert updates and not any("select(" in ln or "if (" in ln for ln in updates)


def test_inlined_pad_copy_keeps_nan_times_zero() -> None:
    """The select multiplied a NaN weight by 0 at the borders (NaN); the padded copy
    multiplies it by the same 0: the results, NaNs included, are the interpreter's."""
    rng = np.random.default_rng(11)
    X, W, Y = _depthwise(55, 2)
    w = rng.standard_normal(W.shape, "float32")
    w[3, 0, 0] = np.nan
    s = _run([Y], [X, W], [rng.standard_normal(X.shape, "float32"), w])
    assert any(st.op.name == "X.pad" for st in s.stages)


def test_window_sum_over_an_inlined_pad_reads_a_padded_copy() -> None:
    """The same for a sum whose only factor is the pad's select (an average pool's window
    sum written over ``topi.nn.pad``, stride 2): a copy by phase, no select left."""
    rng = np.random.default_rng(12)
    X = tex.placeholder((2, 8, 55, 55), "float32", name="X")
    P = tex.topi.nn.pad(X, (0, 0, 1, 1), (0, 0, 1, 1))
    ry = tex.reduce_axis((0, 3), name="ry")
    rx = tex.reduce_axis((0, 3), name="rx")
    Y = tex.compute((2, 8, 28, 28), lambda n, c, i, j: tex.sum(
        P[n, c, i * 2 + ry, j * 2 + rx], axis=[ry, rx]), name="Y")
    s = _run([Y], [X], [rng.standard_normal(X.shape, "float32")])
    assert any(st.op.name == "X.pad" for st in s.stages)
    updates = [ln for ln in str(tex.lower(s, [X, Y])).splitlines() if "X.pad[" in ln
               and "Y" in ln.split("=")[0]]
    assert updates and not any("select(" in ln for ln in updates)


def test_sum_over_a_select_of_other_guards_keeps_it() -> None:
    """A select whose test is not the read's bounds multiplies by 0 where a ``where=``
    would skip: it stays (with the pad inside it), numbers as the interpreter's."""
    rng = np.random.default_rng(7)
    X, W, Y = _depthwise(30, 1, guard="parity")
    arrays = [rng.standard_normal(t.shape, "float32") for t in (X, W)]
    s = _run([Y], [X, W], arrays)
    assert not any(st.op.name == "X.pad" for st in s.stages)


def _interleave(rows: int, cols: int, batch: int):
    """The merge of four stride-2 phases, as a strided data gradient ends: ``O[b, r, s]``
    from phase ``(r % 2, s % 2)`` at ``(r // 2, s // 2)``; a phase with fewer rows or
    columns would be read past its end at the last ones if every phase were read."""
    shapes = [((rows + 1 - a) // 2, (cols + 1 - b) // 2) for a in (0, 1) for b in (0, 1)]
    P = [tex.placeholder((batch, *sh), "float32", name=f"P{k}") for k, sh in enumerate(shapes)]

    def body(b, r, s):
        at = (b, r // 2, s // 2)
        return tex.if_then_else(tex.all(r % 2 == 0, s % 2 == 0), P[0][at], tex.if_then_else(
            tex.all(r % 2 == 0, s % 2 == 1), P[1][at], tex.if_then_else(
                tex.all(r % 2 == 1, s % 2 == 0), P[2][at], P[3][at])))
    return P, tex.compute((batch, rows, cols), body, name="O")


@pytest.mark.parametrize("rows,cols,batch", [(57, 57, 16), (56, 40, 12), (45, 33, 1),
                                             (9, 9, 2)])
def test_phase_merge_splits_its_rows_by_phase(rows: int, cols: int, batch: int) -> None:
    """The merge's row phase is an unrolled loop (``r = 2*r2 + p``): its tests are decided
    per phase and the phases not taken are not read (6 -> 0.7 ms at 8 x 96 x 57 x 57:
    every read was masked and gathered). With enough batches to share among the cores,
    the rows' guarded last value is peeled too and the main loops test no row phase and
    read no shifted tile. Exact."""
    rng = np.random.default_rng(8)
    P, out = _interleave(rows, cols, batch)
    arrays = [rng.standard_normal(t.shape, "float32") for t in P]
    s = _run([out], P, arrays)
    text = str(tex.lower(s, [*P, out]))
    assert "unrolled for (r.inner, 0, 2)" in text, text
    if batch >= 4 * tex.target.cpu_info().cores:
        main = next(ln for ln in text.splitlines() if "] = select(" in ln)
        assert not re.search(r"\br % 2", main) and "min(" not in main, main


def test_upsampling_main_tiles_read_duplicated_lanes() -> None:
    """``O[r, s] = X[r // 2, s // 2]`` at an odd width: the last column tile is shifted
    (``min(o * 8, 49)``), which kept ``(v + min(..)) // 2`` from simplifying in every tile
    (gathers); ``partition_loops`` peels it, and the tiles before it read
    ``v // 2 + 4 * o`` (0.95 -> 0.42 ms at 8 x 96 x 57 x 57)."""
    rng = np.random.default_rng(9)
    X = tex.placeholder((3, 29, 29), "float32", name="X")
    out = tex.compute((3, 57, 57), lambda c, r, s: X[c, r // 2, s // 2] * 2.0, name="O")
    s = _run([out], [X], [rng.standard_normal(X.shape, "float32")])
    text = str(tex.lower(s, [X, out]))
    stores = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("O[")]
    assert len(stores) >= 2 and any("min(" not in ln and "s.inner // 2" in ln
                                    for ln in stores), stores


def test_depthwise_weight_gradient_at_stride_two_sums_in_place() -> None:
    """A stride-2 depthwise convolution's weight gradient reads each input element about
    twice (9 taps over 4 output points): transposed copies of the input (written, then
    read back) cost more than they save, so the sum runs in place along the output rows
    (5.0 -> 2.3 ms at 8 x 96 x 57 x 57). At stride 1 (9 reads an element) the copies
    stay."""
    rng = np.random.default_rng(10)
    for stride, width, copied in ((2, 57, False), (1, 29, True)):
        X, W, Y = _depthwise(width, stride, batch=4, channels=48)
        H = tex.placeholder(Y.shape, "float32", name="H")
        (dW,) = tex.differentiate(tex.topi.sum(Y * H), [W]).result
        arrays = [rng.standard_normal(t.shape, "float32") for t in (X, H)]
        s = _run([dW], [X, H], arrays)
        names = [st.op.name for st in s.stages]
        assert ("H.T" in names) == copied, names  # (transposed with the input)


def _tile_loops(text: str, name: str) -> list[str]:
    """The unrolled and vectorized loops around the first update of the accumulator tile
    ``<name>.local``, outermost first."""
    lines = text.splitlines()
    tile = f"{name}.local["
    k = next(n for n, ln in enumerate(lines) if f"] = {tile}" in ln)
    loops = []
    for ln in reversed(lines[:k]):
        if "unrolled for" not in ln and "vectorized for" not in ln:
            break
        loops.append(ln.strip().split(" {")[0])
    return loops[::-1]


@pytest.mark.parametrize("width, rows", [(7, 2), (12, 2), (14, 2), (32, 0), (56, 2)])
def test_narrow_convolution_blocks_image_rows_in_registers(width: int, rows: int) -> None:
    """A convolution whose row fits one vector tile (7 to 15 pixels at 8 lanes) keeps two
    image rows besides six output channels in registers: each broadcast weight feeds two
    accumulators (8 loads per 12 multiply-adds, where one row made it 9 per 8). A row of
    two vectors keeps one image row per tile, unless its vectors come in odd numbers
    (56 = 7 x 8: pairs of vectors would overlap). The numbers are the interpreter's."""
    rng = np.random.default_rng(6)
    x = tex.placeholder((2, 16, width, width), "float32", name="x")
    w = tex.placeholder((24, 16, 3, 3), "float32", name="w")
    out = tex.topi.nn.conv2d(x, w, 1, 1)
    cpu = CPUInfo("avx2", vector_bits=256, cores=2)
    s = auto_schedule([out], cpu)
    loops = _tile_loops(str(tex.lower(s, [x, w, out])), out.name)
    if rows:
        assert loops == ["unrolled for (c, 0, 6)", f"unrolled for (h, 0, {rows})",
                         f"vectorized for (w, 0, {min(width, 8)})"]
    else:
        assert loops[-1] == "vectorized for (w, 0, 16)" and "(h, 0," not in " ".join(loops)
    f = tex.build(s, [x, w, out])
    xs, ws = rng.standard_normal(x.shape, "float32"), rng.standard_normal(w.shape, "float32")
    got = np.zeros(out.shape, "float32")
    f(xs, ws, got)
    np.testing.assert_allclose(got, evaluate(out, {x: xs, w: ws}), rtol=1e-4, atol=1e-4)


def test_rows_in_a_guard_are_not_blocked() -> None:
    """The data gradient of an unpadded convolution guards its image rows (the window's
    bounds): blocking them in registers would put the guard in the vector body, so the
    tile keeps one row and ``partition_loops`` peels the guard off the row loop."""
    x = tex.placeholder((1, 2, 9, 9), "float32", name="x")
    w = tex.placeholder((3, 2, 3, 3), "float32", name="w")
    out = tex.topi.nn.conv2d(x, w, 1, 0)
    H = tex.placeholder(out.shape, "float32", name="H")
    dx, = tex.differentiate(tex.topi.sum(out * H), [x]).result
    s = auto_schedule([dx], CPUInfo("avx2", vector_bits=256, cores=2))
    text = str(tex.lower(s, [w, H, dx]))
    assert "if (r >= ry" in text and "unrolled for (r," not in text
    assert "unrolled for (q, 0, 2)" in text  # the input channels are blocked as before
    rng = np.random.default_rng(7)
    _run([dx], [w, H], [rng.standard_normal(w.shape, "float32"),
                        rng.standard_normal(H.shape, "float32")])


def test_guard_that_protects_another_read_is_kept() -> None:
    """Dropping a bounds check is only allowed when every other read stays in bounds."""
    A = tex.placeholder((10,), "float32", name="A")
    B = tex.placeholder((10,), "float32", name="B")
    k = tex.reduce_axis((0, 4), name="k")
    # exp(B[i + k - 1]) is no read to pad, and in bounds only where the guard holds
    C = tex.compute((10,), lambda i: tex.sum(A[i + k - 1] * tex.exp(B[i + k - 1]), axis=k,
                                               where=(i + k >= 1) & (i + k < 11)), name="C")
    rng = np.random.default_rng(5)
    s = _run([C], [A, B], [rng.standard_normal(10, "float32"),
                           rng.standard_normal(10, "float32")])
    assert not any(st.op.name.endswith(".pad") for st in s.stages)


@pytest.mark.parametrize("width, interior", [(7, False), (14, False), (16, True),
                                             (28, True), (30, True), (56, True)])
def test_padded_copy_interior_is_a_plain_vector_copy(width: int, interior: bool) -> None:
    """A padded copy (pad = select(interior, x, 0)) is partitioned like a guard: its middle
    rows and vector columns store x with no select (a blend per vector made mobilenet's
    three 58 x 58 pads 6.5 ms each), its border rows plain zeros; the split's shifted last
    tile (min(o * 8, w - 8)) is a part of its own."""
    from tex import topi

    x = tex.placeholder((2, 3, width, width), "float32", name="x")
    p = topi.nn.pad(x, (0, 0, 1, 1), (0, 0, 1, 1), name="P")
    a = np.random.default_rng(9).standard_normal((2, 3, width, width)).astype("float32")
    s = _run([p], [x], [a])
    text = str(tex.lower(s, [x, p]))
    stores = [ln.strip() for ln in text.splitlines() if ln.strip().startswith("P[")]
    assert any(ln.endswith("= 0.0") for ln in stores), text  # the border rows
    # with a vector wholly inside a row (width + 2 > 2 vectors), it is a plain copy, and
    # the selects left test lanes only, in the border vectors
    assert any("select(" not in ln and "x[" in ln for ln in stores) == interior, text
    if interior:
        for ln in stores:
            if "select(" in ln:
                cond = ln.split("select(")[1].split(",")[0]
                assert "l " not in cond and "m.outer" not in cond, ln


def test_guarded_vector_update_is_peeled_into_an_unguarded_middle() -> None:
    """A lane-varying guard on a vectorized reduction update (a blend) holds on the middle
    iterations of the loop around it: they run without the blend; the border iterations run
    narrower vector loops over just the points where it holds (k in [3, 8) and [32, 37))."""
    A = tex.placeholder((64, 40), "float32", name="A")
    B = tex.placeholder((8, 40), "float32", name="B")
    k = tex.reduce_axis((0, 40), name="k")
    C = tex.compute((64, 8), lambda i, j: tex.sum(A[i, k] * B[j, k], axis=k,
                                                    where=(k >= 3) & (k < 37)), name="C")
    rng = np.random.default_rng(6)
    s = _run([C], [A, B], [rng.standard_normal((64, 40), "float32"),
                           rng.standard_normal((8, 40), "float32")])
    text = str(tex.lower(s, [A, B, C]))
    updates = [ln for ln in text.splitlines() if "C.rf[" in ln and "+ A[" in ln]
    assert updates and not any("select(" in ln for ln in updates)
    assert "vectorized for (k.inner.v, 3, 5)" in text
    assert "vectorized for (k.inner.v, 0, 5)" in text
    assert "vectorized for (k.inner.v, 0, 8)" in text  # the middle


@pytest.mark.parametrize("batch, channels, width", [(2, 3, 17), (2, 3, 56), (8, 32, 13)])
def test_two_output_reductions_are_vectorized_over_the_last_output_axis(
        batch: int, channels: int, width: int) -> None:
    """A max pool's gradient selects through an argsel (index and value: a tuple combiner,
    which rfactor cannot split): each lane reduces one output point, the window loops
    around the vector; odd widths (pooled 9 and 28) through a shifted last tile, a pooled
    width of 7 (shorter than a vector, in a stage big enough) through one narrower vector.
    Same bits as the interpreter."""
    rng = np.random.default_rng(3)
    x = tex.placeholder((batch, channels, width, width), name="x")
    y = tex.topi.nn.pool2d(x, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), pool_type="max")
    L = tex.topi.sum(y * y)
    (g,) = tex.differentiate(L, [x])
    cpu = CPUInfo("avx2", vector_bits=256, cores=2)
    s = auto_schedule([L, g], cpu)
    func = tex.lower(s, [x, L, g])
    argsel = [st for st in walk_stmts(func.body) if isinstance(st, For)
              and st.kind is ForKind.VECTORIZED and "argsel" in str(st.body)]
    assert argsel, "the argsel stage has no vectorized loop"
    a = rng.standard_normal(x.shape).astype("float32")
    out = [np.empty((), "float32"), np.empty(x.shape, "float32")]
    tex.build(s, [x, L, g])(a, *out)
    want = evaluate([L, g], {x: a})
    np.testing.assert_allclose(out[0], want[0], rtol=1e-5)
    np.testing.assert_array_equal(out[1], want[1])


def _weight_gradient(x_shape: tuple[int, ...], w_shape: tuple[int, ...], pad: int,
                     l2_kb: int) -> tuple:
    """A convolution's weight gradient (with a head H), auto-scheduled for a CPU with an
    L2 of ``l2_kb``: x, H, the gradient, the schedule, its loop nest and the sizes of its
    ``.rf`` buffers."""
    from tex import topi
    info = CPUInfo("test", vector_bits=256, cores=2, l2_bytes=l2_kb * 1024)
    x = tex.placeholder(x_shape, name="x")
    w = tex.placeholder(w_shape, name="w")
    y = topi.nn.conv2d(x, w, 1, pad)
    H = tex.placeholder(y.shape, name="H")
    (gw,) = tex.differentiate(topi.sum(y * H), [w])
    s = auto_schedule(gw, info)
    text = str(tex.lower(s, [x, H, gw]))
    sizes = [int(n) for n in re.findall(r"allocate \w+\.rf: float32\[(\d+)\]", text)]
    return x, H, gw, s, text, sizes


@pytest.mark.parametrize("l2_kb", [512, 4096])
def test_weight_gradients_too_long_for_l2_are_summed_in_blocks(l2_kb: int) -> None:
    """A convolution's weight gradient over 2 x 96 x 96 points: a register tile's 4 output
    channels of the head span 295 KB, more than half a 512 KB L2, and would be streamed
    again for each of the 96 tiles of the image side (32 channels x 3 rows of taps). The
    sum runs in blocks of the batch axis (partials, then their sum) and gives the right
    numbers; with a 4 MB L2 it runs whole."""
    x, H, gw, s, text, sizes = _weight_gradient((2, 32, 96, 96), (16, 32, 3, 3), 1, l2_kb)
    # one partial gradient per image
    assert (2 * 16 * 32 * 9 in sizes) == (l2_kb == 512), text
    f = tex.build(s, [x, H, gw])
    rng = np.random.default_rng(7)
    xa = rng.standard_normal(x.shape).astype(np.float32)
    ha = rng.standard_normal(H.shape).astype(np.float32)
    got = np.empty(gw.shape, np.float32)
    f(xa, ha, got)
    xp = np.pad(xa.astype(np.float64), ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = np.stack([np.stack([np.einsum("nohw,nchw->oc", ha, xp[:, :, r:r + 96, c:c + 96])
                               for c in range(3)], -1) for r in range(3)], -2)
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-3)


@pytest.mark.parametrize("width", [40, 48, 56, 72])
def test_rows_replace_a_two_vector_tile_that_would_overhang_the_image(width: int) -> None:
    """An image 40, 56 or 72 wide in tiles two vectors (16 columns) wide computes 48, 64 or
    80 columns, the last tile shifted inwards; 6 channels x 2 image rows of one vector (12
    accumulators, as many as 6 x 2 vectors) cover it in whole 8-column tiles. The rows
    win; at 48 columns the wide tiles fit exactly and stay."""
    from tex import topi
    info = CPUInfo("test", vector_bits=256, cores=2)
    X = tex.placeholder((2, 16, width, width), name="X")
    K = tex.placeholder((32, 16, 3, 3), name="K")
    Y = topi.nn.conv2d(X, K, 1, 1)
    s = auto_schedule([Y], info)
    text = str(tex.lower(s, [X, K, Y]))
    assert "conv2d_nchw.local: float32[96]" in text
    rows = re.search(r"unrolled for \(h, 0, 2\) \{\s+vectorized for \(w, 0, 8\)", text)
    assert bool(rows) == (width % 16 != 0), text
    assert not re.search(r"min\(w\.outer \* \d+, \d+\)\] = conv2d_nchw\.local", text)
    f = tex.build(s, [X, K, Y])
    rng = np.random.default_rng(3)
    x = rng.standard_normal(X.shape).astype(np.float32)
    k = rng.standard_normal(K.shape).astype(np.float32)
    y = np.empty(Y.shape, np.float32)
    f(x, k, y)
    xp = np.pad(x, ((0, 0), (0, 0), (1, 1), (1, 1)))
    want = sum(np.einsum("nchw,oc->nohw", xp[:, :, a:a + width, b:b + width], k[:, :, a, b])
               for a in range(3) for b in range(3))
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-3)


def test_weight_gradients_streamed_few_times_are_summed_whole() -> None:
    """A 1 x 1 convolution's weight gradient (MobileNet's expansion, 24 -> 144 channels)
    over 2 x 112 x 112 points: its tile rows outgrow the L2 too, but the image side has
    only a few tiles to stream them past (24 channels): blocks would add stages and gain
    nothing, so the sum runs whole."""
    *_, sizes = _weight_gradient((2, 24, 112, 112), (144, 24, 1, 1), 0, 512)
    assert sizes and all(n < 2 * 144 * 24 for n in sizes), sizes
