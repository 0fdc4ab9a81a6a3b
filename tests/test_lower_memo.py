"""Nests of the same structure are passed once (``tex.lower.StagedFunc.passed``): the second
of two identical blocks (a ResNet block's two convolutions, a transformer's Q/K/V
projections) is the first one's result with its buffers and loop variables renamed. The
lowered text must be exactly what running the passes on every nest gives, the passes must
run fewer times, and the built code must compute what the interpreter computes."""
from __future__ import annotations

import importlib

import numpy as np
import pytest

import tex
from tex import debug, topi
from tex.schedule import auto_schedule
from tex.testing import evaluate

LOWER = importlib.import_module("tex.lower.lower")


def _conv_block(x: tex.Tensor, c: int, tag: str) -> tuple[tex.Tensor, tex.Tensor]:
    """conv 3x3 (pad 1) -> per-channel mean subtracted -> relu; its weight."""
    w = tex.placeholder((c, c, 3, 3), name=f"w_{tag}")
    y = topi.nn.conv2d(x, w, 1, 1)
    mean = topi.sum(y, axis=(0, 2, 3), keepdims=True) * (1.0 / (y.shape[0] * y.shape[2]
                                                                * y.shape[3]))
    return topi.nn.relu(y - mean), w


def _twin_program(seed: int) -> tuple[list[tex.Tensor], list[tex.Tensor]]:
    """The same random chain of element-wise, reduction, transposing and padding steps
    applied to two inputs of the same shape (nests of equal structure), summed."""
    rng = np.random.default_rng(seed)
    shape = tuple(int(n) for n in rng.choice([3, 4, 8, 12], size=3))
    steps = [str(s) for s in rng.choice(["exp", "mul", "sum", "transpose", "pad", "relu",
                                         "max"], size=int(rng.integers(2, 5)))]

    def chain(t: tex.Tensor) -> tex.Tensor:
        for s in steps:
            if s == "exp":
                t = topi.exp(topi.tanh(t))
            elif s == "mul":
                t = t * t + 1.0
            elif s == "sum":
                t = topi.sum(t, axis=len(t.shape) - 1, keepdims=True) + t
            elif s == "transpose":
                t = topi.transpose(t, tuple(reversed(range(len(t.shape)))))
            elif s == "pad":
                t = topi.nn.pad(t, [0] * (len(t.shape) - 1) + [1], [0] * len(t.shape))
            elif s == "relu":
                t = topi.nn.relu(t - 0.5)
            else:
                t = topi.max(t, axis=0, keepdims=True) - t
        return t

    a = tex.placeholder(shape, name="a")
    b = tex.placeholder(shape, name="b")
    out = topi.sum(chain(a)) + topi.sum(chain(b))
    return [a, b], [out]


def _lowered_both_ways(s: object, args: list, monkeypatch: pytest.MonkeyPatch
                       ) -> tuple[str, str, int, int]:
    """The lowered text with the memo and with every nest passed, and how many times the
    simplify pass ran each way."""
    def runs() -> tuple[str, int]:
        with debug.timings() as t:
            text = str(tex.lower(s, args, name="f"))
        return text, sum(1 for name, _, _ in t.rows if name == "lower.simplify")

    memo, memo_runs = runs()
    with monkeypatch.context() as m:
        m.setattr(LOWER, "_renamed_result", lambda *a: None)
        plain, plain_runs = runs()
    return memo, plain, memo_runs, plain_runs


def test_two_identical_blocks_are_passed_once(monkeypatch: pytest.MonkeyPatch,
                                              rng: np.random.Generator) -> None:
    x = tex.placeholder((2, 8, 10, 10), name="x")
    h, w1 = _conv_block(x, 8, "1")
    y, w2 = _conv_block(h, 8, "2")
    loss = topi.sum(y * y)
    g1, g2 = tex.differentiate(loss, [w1, w2])
    outs = [loss, g1, g2]
    s = auto_schedule(outs)
    args = [x, w1, w2, *outs]
    memo, plain, memo_runs, plain_runs = _lowered_both_ways(s, args, monkeypatch)
    assert memo == plain
    assert memo_runs < plain_runs, (memo_runs, plain_runs)  # (15 of 20 when written)
    f = tex.build(s, args)
    arrays = [rng.standard_normal(t.shape).astype("float32") * 0.3 for t in (x, w1, w2)]
    got = [np.empty(t.shape, "float32") for t in outs]
    f(*arrays, *got)
    want = evaluate(outs, dict(zip((x, w1, w2), arrays)))
    for g, wv in zip(got, want):
        np.testing.assert_allclose(g, wv, rtol=2e-3, atol=2e-3)


@pytest.mark.parametrize("seed", range(10))
def test_fuzz_twins_lower_as_if_each_nest_were_passed(seed: int,
                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """Random chains built twice: the default and the auto schedules lower to the same
    text with the memo as without, and the auto-scheduled build matches the interpreter."""
    ins, outs = _twin_program(seed)
    for s in (tex.create_schedule([o.op for o in outs]), auto_schedule(outs)):
        memo, plain, memo_runs, plain_runs = _lowered_both_ways(s, [*ins, *outs],
                                                                monkeypatch)
        assert memo == plain
        assert memo_runs < plain_runs
    rng = np.random.default_rng(seed)
    arrays = [rng.standard_normal(t.shape) .astype("float32") for t in ins]
    got = np.empty(outs[0].shape, "float32")
    tex.build(s, [*ins, *outs])(*arrays, got)
    want = evaluate(outs, dict(zip(ins, arrays)))
    np.testing.assert_allclose(got, want[0] if isinstance(want, list) else want,
                               rtol=1e-3, atol=1e-3)


def test_nests_differing_in_a_shape_or_a_name_are_passed_apart(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Another extent, or loop variables of other names (the simplifier orders a sum's
    terms by name), is another key: each nest is passed itself."""
    a = tex.placeholder((8, 6), name="a")
    b = tex.placeholder((8, 7), name="b")
    c = tex.placeholder((8, 6), name="c")
    ya = tex.compute((8, 6), lambda i, j: a[i, j] * 2.0, name="ya")
    yb = tex.compute((8, 7), lambda i, j: b[i, j] * 2.0, name="yb")
    yc = tex.compute((8, 6), lambda p, q: c[p, q] * 2.0, name="yc")
    s = tex.create_schedule([ya.op, yb.op, yc.op])
    memo, plain, memo_runs, plain_runs = _lowered_both_ways(s, [a, b, c, ya, yb, yc],
                                                            monkeypatch)
    assert memo == plain
    assert memo_runs == plain_runs == 3
