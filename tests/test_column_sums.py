"""Column sums (``auto.py``'s ``column_blocks``): a long sum over the rows of a row-major
input (a bias or layer-norm gradient) is summed in blocks of whole rows, each block adding
its rows into a partial row, then the partials added; results equal the interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex.schedule import auto_schedule
from tex.schedule.axes import VECTORIZE
from tex.testing import evaluate


def _column_sum(rows: int, cols: int, dtype: str = "float32", weighted: bool = False):
    x = tex.placeholder((rows, cols), dtype, name="X")
    w = tex.placeholder((rows,), dtype, name="W")
    i = tex.reduce_axis((0, rows), name="i")
    if weighted:  # dgamma's shape: each row scaled by a per-row statistic
        c = tex.compute((cols,), lambda p: tex.sum(x[i, p] * tex.sqrt(w[i] + 1.0), axis=i),
                        name="C")
    else:
        c = tex.compute((cols,), lambda p: tex.sum(x[i, p], axis=i), name="C")
    return [x, w], c


def _run(s, inputs, out, rng):
    feed = {t: rng.random(t.shape).astype(t.dtype.numpy) for t in inputs}
    f = tex.build(s, [*inputs, out])
    got = np.full(out.shape, np.nan, out.dtype.numpy)
    f(*(feed[t] for t in inputs), got)
    return got, evaluate(out, feed)


def _blocked(s, out) -> bool:
    """Whether ``out`` is summed in row blocks: a partial-sum stage whose reduction loops
    run outside its vectorized column loop."""
    rf = [st for st in s.stages if st.name == f"{out.name}.rf"]
    if not rf:
        return False
    leaves = rf[0].leaf_iter_vars
    vec = [k for k, iv in enumerate(leaves) if rf[0].annotations.get(iv) == VECTORIZE]
    red = [k for k, iv in enumerate(leaves) if iv.kind == "reduce"]
    return bool(vec and red) and max(red) < vec[0]


@pytest.mark.parametrize("dtype", ["float32", "float64"])
@pytest.mark.parametrize("weighted", [False, True])
def test_long_column_sums_are_summed_in_row_blocks(dtype: str, weighted: bool,
                                                   rng: np.random.Generator) -> None:
    inputs, out = _column_sum(512, 256, dtype, weighted)
    s = auto_schedule([out], target="llvm")
    assert _blocked(s, out), [st.name for st in s.stages]
    got, want = _run(s, inputs, out, rng)
    np.testing.assert_allclose(got, want, rtol=1e-5 if dtype == "float32" else 1e-12)


@pytest.mark.parametrize("rows,cols", [(16, 256), (512, 24), (512, 20), (64, 8)])
def test_short_or_narrow_column_sums_keep_their_column_tiles(rows: int, cols: int,
                                                             rng: np.random.Generator) -> None:
    """Few rows, a row of few vectors, or one that vectors do not divide: no blocks."""
    inputs, out = _column_sum(rows, cols)
    s = auto_schedule([out], target="llvm")
    assert not _blocked(s, out)
    got, want = _run(s, inputs, out, rng)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_sums_over_several_outer_axes_are_blocked_over_the_first(
        rng: np.random.Generator) -> None:
    """``sum_{a, b} X[a, b, p]``: blocks of ``a``, each summing its ``b`` rows whole."""
    x = tex.placeholder((64, 32, 128), "float32", name="X")
    a = tex.reduce_axis((0, 64), name="a")
    b = tex.reduce_axis((0, 32), name="b")
    out = tex.compute((128,), lambda p: tex.sum(x[a, b, p], axis=[a, b]), name="C")
    s = auto_schedule([out], target="llvm")
    assert _blocked(s, out)
    got, want = _run(s, [x], out, rng)
    np.testing.assert_allclose(got, want, rtol=1e-5)


def test_layer_norm_parameter_gradients_are_blocked(rng: np.random.Generator) -> None:
    """dgamma and dbeta of a layer norm over 1,024 rows: both blocked, gradients equal the
    interpreter."""
    x = tex.placeholder((1024, 128), "float32", name="x")
    gamma = tex.placeholder((128,), "float32", name="gamma")
    beta = tex.placeholder((128,), "float32", name="beta")
    y = tex.topi.nn.layer_norm(x, gamma, beta, axis=-1, epsilon=1e-5)
    head = tex.placeholder(y.shape, "float32", name="H")
    loss = tex.topi.sum(y * head)
    grads = list(tex.differentiate(loss, [x, gamma, beta]))
    s = auto_schedule(grads, target="llvm")
    assert _blocked(s, grads[1]) and _blocked(s, grads[2])
    inputs = [x, gamma, beta, head]
    feed = {t: rng.standard_normal(t.shape).astype(np.float32) for t in inputs}
    f = tex.build(s, [*inputs, *grads])
    outs = [np.full(g.shape, np.nan, np.float32) for g in grads]
    f(*(feed[t] for t in inputs), *outs)
    for got, want in zip(outs, evaluate(grads, feed)):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("rows", [173, 394, 397, 1000])
def test_row_counts_without_a_small_divisor_are_blocked_unevenly(
        rows: int, rng: np.random.Generator) -> None:
    """A prime row count (173, 397), or 394 = 2 x 197, has no divisor near the blocks
    wanted: the rows go into that many blocks with a shorter last one, never one block
    per row. (394 rows made the sum of 197 partials a long column sum of its own, blocked
    again without end: a RecursionError from ``auto_schedule``.)"""
    inputs, out = _column_sum(rows, 768)
    s = auto_schedule([out], target="llvm")
    assert _blocked(s, out)
    rf = next(st for st in s.stages if st.name == f"{out.name}.rf")
    assert rf.op.axis[0].dom.extent <= 4 * max(2, 2 * tex.target.cpu_info().cores)
    got, want = _run(s, inputs, out, rng)
    np.testing.assert_allclose(got, want, rtol=1e-5)


@pytest.mark.parametrize("cores", [64, 128])
def test_sums_of_partials_are_never_blocked_again(cores: int,
                                                  rng: np.random.Generator) -> None:
    """On a machine of many cores the partials of a blocked sum are at least as many as
    the rows that make a long sum (2 x cores >= 64): their sum must not be blocked again."""
    host = tex.target.cpu_info()
    machine = tex.target.CPUInfo(host.name, host.vector_bits, cores, host.l1d_bytes,
                                 host.l2_bytes, host.l3_bytes, host.fma)
    inputs, out = _column_sum(256, 4096)
    s = auto_schedule([out], target=machine)
    assert _blocked(s, out)
    assert sum(st.name.endswith(".rf") for st in s.stages) == 1
    got, want = _run(s, inputs, out, rng)
    np.testing.assert_allclose(got, want, rtol=1e-5)
