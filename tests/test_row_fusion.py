"""Row fusion (``tex.schedule.rows``): the reductions along a tensor's last axes run inside
the loop over the rows of their element-wise consumer, with one parallel region and the
expensive shared producers stored per row; the results are those of the unfused schedule,
bit for bit, and of the reference interpreter."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex import diskstore, topi
from tex.lower.stmt import For, ForKind, walk_stmts
from tex.schedule import auto, auto_schedule
from tex.testing import evaluate


@pytest.fixture(autouse=True)
def no_saved_schedules(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each schedule made anew (a saved one would answer for the unfused twin)."""
    monkeypatch.setattr(diskstore.RESULTS, "limit", 0)


def _parallel_loops(s: tex.schedule.Schedule, args: list) -> int:
    body = tex.lower(s, args).body
    return sum(1 for st in walk_stmts(body) if isinstance(st, For) and
               st.kind is ForKind.PARALLEL)


def _outputs(s: tex.schedule.Schedule, args: list, arrays: list[np.ndarray]
             ) -> list[np.ndarray]:
    f = tex.build(s, args)
    outs = [np.zeros(tuple(int(d) for d in t.shape), t.dtype.name) for t in args[len(arrays):]]
    f(*arrays, *outs)
    return outs


def _check(make, shapes: list[tuple[int, ...]], monkeypatch: pytest.MonkeyPatch,
           seed: int = 0) -> tuple[tex.schedule.Schedule, list]:
    """Build ``make(*placeholders)`` auto-scheduled with and without row fusion: the same
    numbers bit for bit, and the interpreter's within rounding. Returns the fused
    schedule and its arguments."""
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(shape).astype(np.float32) for shape in shapes]
    results = []
    for fused in (True, False):
        ins = [tex.placeholder(shape, name=f"x{k}") for k, shape in enumerate(shapes)]
        outs = make(*ins)
        with monkeypatch.context() as patch:
            if not fused:
                patch.setattr(auto, "fuse_rows", lambda *a: None)
            s = auto_schedule(outs)
        results.append(_outputs(s, [*ins, *outs], arrays))
        if fused:
            kept = (s, [*ins, *outs])
            want = evaluate(outs, dict(zip(ins, arrays)))
            for got, ref in zip(results[0], want):
                np.testing.assert_allclose(got, ref, rtol=2e-5, atol=2e-6)
    for a, b in zip(*results):
        np.testing.assert_array_equal(a, b)
    return kept


@pytest.mark.parametrize("shape", [(256, 1000), (64, 768), (40, 13, 50)])
def test_softmax_is_one_parallel_loop_with_one_exponential_per_element(
        shape: tuple[int, ...], monkeypatch: pytest.MonkeyPatch) -> None:
    s, args = _check(lambda x: [topi.nn.softmax(x)], [shape], monkeypatch)
    text = str(tex.lower(s, args))
    assert _parallel_loops(s, args) <= 1
    # the exponential stored in a row buffer, computed once per element
    assert text.count("exp(") == 1, text
    assert "allocate T_softmax_maxelem: float32[1]" in text


def test_rows_shorter_than_a_vector_keep_their_lanes_across_rows(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows of 7: each reduction puts its vector lanes on 16 rows at once (no per-row
    partial sums); such a reduction does not join a loop over one row."""
    s, args = _check(lambda x: [topi.nn.softmax(x)], [(96, 7)], monkeypatch)
    assert "allocate T_softmax_maxelem: float32[96]" in str(tex.lower(s, args))


def test_layer_norm_statistics_join_the_normalization(monkeypatch: pytest.MonkeyPatch
                                                      ) -> None:
    s, args = _check(lambda x, g, b: [topi.nn.layer_norm(x, g, b)],
                     [(192, 768), (768,), (768,)], monkeypatch)
    assert _parallel_loops(s, args) == 1
    text = str(tex.lower(s, args))
    assert "allocate T_layer_norm_sum: float32[1]" in text


def test_attention_softmax_fuses_at_the_row_loop(monkeypatch: pytest.MonkeyPatch) -> None:
    """Rows indexed by three axes (batch, head, query): the reductions join at the
    innermost of them, inside the consumer's parallel loop."""
    s, args = _check(lambda x: [topi.nn.softmax(x, axis=-1)], [(4, 6, 64, 64)], monkeypatch)
    assert _parallel_loops(s, args) == 1
    assert "allocate T_softmax_exp: float32[64]" in str(tex.lower(s, args))


def test_softmax_gradient_matches(monkeypatch: pytest.MonkeyPatch) -> None:
    def make(x: tex.Tensor) -> list[tex.Tensor]:
        y = topi.nn.softmax(x)
        loss = topi.sum(y * y)
        return [loss, *tex.differentiate(loss, [x])]

    _check(make, [(512, 300)], monkeypatch)


def test_few_long_rows_stay_unfused(monkeypatch: pytest.MonkeyPatch) -> None:
    """Two rows of 100,000: the consumer runs its columns in parallel, and fused passes
    over a row would run serially inside no region; each reduction keeps its own."""
    s, args = _check(lambda x: [topi.nn.softmax(x)], [(2, 100_000)], monkeypatch)
    text = str(tex.lower(s, args))
    assert "allocate T_softmax_maxelem: float32[2]" in text
    assert {st.op.name: st.attach_type for st in s.stages}["T_softmax_maxelem"] == "root"


def test_a_reduction_that_is_an_output_or_read_elsewhere_stays(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """The row maximum asked for as an output, and a row sum read one row further on:
    neither joins the consumer's loop (an output is stored whole; a shifted row is not
    the row the loop is on)."""
    def make(x: tex.Tensor) -> list[tex.Tensor]:
        n, m = (int(d) for d in x.shape)
        k = tex.reduce_axis((0, m), name="k")
        mx = tex.compute((n,), lambda i: tex.max(x[i, k], axis=k), name="mx")
        k2 = tex.reduce_axis((0, m), name="k2")
        sm = tex.compute((n,), lambda i: tex.sum(x[i, k2], axis=k2), name="sm")
        y = tex.compute((n, m), lambda i, j: tex.exp(x[i, j] - mx[i]) +
                        sm[(i + 1) % n], name="y")
        return [y, mx]

    s, args = _check(make, [(128, 512)], monkeypatch)
    attach = {st.op.name: st.attach_type for st in s.stages}
    assert attach["mx"] == attach["sm"] == "root"
    assert "allocate sm: float32[128]" in str(tex.lower(s, args))
