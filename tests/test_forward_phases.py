"""Forward programs with stride-parity conditions (transposed convolutions written as a
gather, as users port them from TVM): ``auto_schedule`` computes one dense sum per stride
phase over just the taps of that phase (``tex.schedule.phase.polyphase``), and the result
equals the reference interpreter's (and PyTorch's ``conv_transpose2d`` where installed)."""
from __future__ import annotations

import numpy as np
import pytest

import tex
from tex.arith.phases import split_phases
from tex.lower.stmt import For, ForKind, walk_stmts
from tex.testing import evaluate


def _deconv(n: int, c: int, o: int, h: int, k: int, s: int, p: int, clamp: bool
            ) -> tuple[tex.Tensor, tex.Tensor, tex.Tensor]:
    """``conv_transpose2d(X, W, stride=s, padding=p)`` as a gather with parity tests."""
    X = tex.placeholder((n, c, h, h), name="X")
    W = tex.placeholder((c, o, k, k), name="W")
    oh = (h - 1) * s - 2 * p + k
    rc = tex.reduce_axis((0, c), name="rc")
    ky = tex.reduce_axis((0, k), name="ky")
    kx = tex.reduce_axis((0, k), name="kx")

    def at(e: tex.Expr) -> tex.Expr:
        return tex.min(tex.max(e // s, 0), h - 1) if clamp else e // s

    def body(b: tex.Expr, f: tex.Expr, y: tex.Expr, x: tex.Expr) -> tex.Expr:
        iy, ix = y + p - ky, x + p - kx
        ok = tex.all(iy % s == 0, ix % s == 0, iy >= 0, ix >= 0, iy // s < h, ix // s < h)
        return tex.sum(tex.if_then_else(ok, X[b, rc, at(iy), at(ix)] * W[rc, f, ky, kx], 0.0),
                       axis=[rc, ky, kx])

    return X, W, tex.compute((n, o, oh, oh), body, name="Y")


CASES = [  # (n, c, o, h, k, s, p, clamp)
    (1, 3, 4, 5, 4, 2, 1, False),
    (2, 2, 3, 6, 3, 2, 0, True),
    (1, 2, 2, 4, 3, 3, 1, False),
    (1, 4, 8, 7, 2, 2, 0, False),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: "n{}c{}o{}h{}k{}s{}p{}{}".format(
    *c[:7], "-clamp" if c[7] else ""))
def test_transposed_conv_is_split_by_phase(case: tuple, rng: np.random.Generator) -> None:
    X, W, Y = _deconv(*case)
    s = tex.schedule.auto_schedule([Y])
    func = tex.lower(s, [X, W, Y])
    text = str(func)
    stride = case[5]
    assert ".phase" in text
    # no parity test left where the phases vectorize (only the merge selects a phase)
    for st in walk_stmts(func.body):
        if isinstance(st, For) and st.kind is ForKind.VECTORIZED and ".phase" in str(st) \
                and "Y[" not in str(st):
            assert f"% {stride} ==" not in str(st)
    x = rng.standard_normal(X.shape).astype("float32")
    w = rng.standard_normal(W.shape).astype("float32")
    y = np.full(Y.shape, np.nan, "float32")
    tex.build(s, [X, W, Y])(x, w, y)
    np.testing.assert_allclose(y, evaluate(Y, {X: x, W: w}), rtol=1e-5, atol=1e-5)
    torch = pytest.importorskip("torch")
    want = torch.nn.functional.conv_transpose2d(torch.from_numpy(x), torch.from_numpy(w),
                                                stride=stride, padding=case[6]).numpy()
    np.testing.assert_allclose(y, want, rtol=1e-4, atol=1e-4)


def test_each_phase_sums_only_its_taps() -> None:
    """Stride 2, kernel 4: each of the four output phases sums 2 x 2 of the 16 taps."""
    X, W, Y = _deconv(1, 3, 4, 5, 4, 2, 1, False)
    red = Y.op.body[0]
    value, cond = red.source[0].a, red.source[0].cond
    split = split_phases(Y.op.axis, red.axis, value, cond, taps=True)
    assert split is not None and len(split.phases) == 4
    assert split.moduli == (1, 1, 2, 2)
    for ph in split.phases:
        assert [r.dom.extent for r in ph.reduce] == [3, 2, 2]
    assert split_phases(Y.op.axis, red.axis, value, cond) is None  # taps off: not strided
