"""Shapes and programs no benchmark is tuned on: tex against PyTorch, forward and forward +
backward, with the rows that fall behind flagged.

The other benchmarks time fixed programs at fixed shapes; a scheduler tuned on them can
still fall off a cliff one size or one spelling away (a layer norm over 394 rows once
raised RecursionError; a stride-2 depthwise convolution over ``topi.nn.pad`` ran 4x slower
than without padding). Each case here is a small op at an odd shape (convolutions at
widths 9-57, strided, 1 x 1 and 5 x 5; depthwise convolutions written over
``topi.nn.pad``; dense layers of 7, 197 and 333 rows; pooling; softmax over 10 to 30,522
columns; layer norms over 394 and 1,000 rows; GELU; an Elman RNN and an LSTM as
``te.scan``). For each: ``auto_schedule`` and ``tex.build`` of the forward and of
``differentiate(sum(Y * G))`` (the loss and every gradient in one function), checked
against PyTorch's forward and autograd, then timed in turns with PyTorch eager at the same
thread count (median of ``--repeat`` rounds).

    python benchmarks/probe.py                    # every case, 2 threads
    python benchmarks/probe.py --only dw conv     # cases whose name starts so
    TEX_NUM_THREADS=1 python benchmarks/probe.py

A row is flagged (``<<<``) when tex takes more than ``--flag`` (1.3) times PyTorch's time,
forward or forward + backward; a case that fails to build or to match prints its error
and makes the exit status 1.
"""
from __future__ import annotations

from bench_env import mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import os
import statistics
import sys
from collections.abc import Callable
from typing import Any

import numpy as np

import tex
from tex import topi

try:
    import torch
    import torch.nn.functional as F
except ImportError:  # pragma: no cover - the probe compares with PyTorch
    torch = None

Case = tuple[list[tex.Tensor], tex.Tensor, Callable[..., Any]]


def conv(n: int, c: int, h: int, k: int, r: int, s: int, p: int) -> Case:
    X = tex.placeholder((n, c, h, h), name="X")
    W = tex.placeholder((k, c, r, r), name="W")
    return [X, W], topi.nn.conv2d(X, W, s, p), \
        lambda x, w: F.conv2d(x, w, stride=s, padding=p)


def depthwise(n: int, c: int, h: int, s: int, p: int) -> Case:
    """A 3 x 3 depthwise convolution over ``topi.nn.pad``, as TVM's topi writes it."""
    X = tex.placeholder((n, c, h, h), name="X")
    W = tex.placeholder((c, 3, 3), name="W")
    P = topi.nn.pad(X, (0, 0, p, p), (0, 0, p, p)) if p else X
    out = (h + 2 * p - 3) // s + 1
    ry = tex.reduce_axis((0, 3), "ry")
    rx = tex.reduce_axis((0, 3), "rx")
    Y = tex.compute((n, c, out, out), lambda b, ch, i, j: tex.sum(
        P[b, ch, i * s + ry, j * s + rx] * W[ch, ry, rx], axis=[ry, rx]), name="Y")
    return [X, W], Y, lambda x, w: F.conv2d(x, w[:, None], stride=s, padding=p, groups=c)


def dense(m: int, k: int, n: int) -> Case:
    X = tex.placeholder((m, k), name="X")
    W = tex.placeholder((n, k), name="W")
    return [X, W], topi.nn.dense(X, W), lambda x, w: x @ w.T


def batch_matmul(b: int, m: int, k: int, n: int) -> Case:
    A = tex.placeholder((b, m, k), name="A")
    B = tex.placeholder((b, n, k), name="B")
    return [A, B], topi.nn.batch_matmul(A, B), lambda a, bb: a @ bb.transpose(1, 2)


def pool(kind: str, n: int, c: int, h: int, k: int, s: int, p: int) -> Case:
    X = tex.placeholder((n, c, h, h), name="X")
    Y = topi.nn.pool2d(X, (k, k), (s, s), (1, 1), (p,) * 4, kind)
    if kind == "max":
        return [X], Y, lambda x: F.max_pool2d(x, k, s, p)
    return [X], Y, lambda x: F.avg_pool2d(x, k, s, p)


def softmax(m: int, n: int) -> Case:
    X = tex.placeholder((m, n), name="X")
    return [X], topi.nn.softmax(X), lambda x: torch.softmax(x, -1)


def layer_norm(m: int, n: int) -> Case:
    X = tex.placeholder((m, n), name="X")
    g = tex.placeholder((n,), name="g")
    b = tex.placeholder((n,), name="b")
    return [X, g, b], topi.nn.layer_norm(X, g, b), \
        lambda x, gg, bb: F.layer_norm(x, (n,), gg, bb)


def gelu(m: int, n: int) -> Case:
    X = tex.placeholder((m, n), name="X")
    Y = tex.compute((m, n), lambda i, j: 0.5 * X[i, j] * (
        1.0 + tex.erf(X[i, j] * 0.7071067811865476)), name="Y")
    return [X], Y, lambda x: F.gelu(x)


def rnn(t: int, h: int, i: int) -> Case:
    """An Elman RNN as ``te.scan``: ``h[s] = tanh(a W @ h[s-1] + b U @ x[s])`` from ``h0``
    (``a = 0.5 / sqrt(h)``, ``b = 1 / sqrt(i)``: the standard normal weights scaled so that
    the recurrence stays stable, and float32 results comparable across libraries)."""
    a, b = 0.5 / h ** 0.5, 1.0 / i ** 0.5
    X = tex.placeholder((t, i), name="X")
    W = tex.placeholder((h, h), name="W")
    U = tex.placeholder((h, i), name="U")
    H0 = tex.placeholder((1, h), name="H0")
    state = tex.placeholder((t, h), name="state")
    init = tex.compute((1, h), lambda _, j: H0[0, j], name="init")
    k = tex.reduce_axis((0, h), "k")
    pre = tex.compute((t, h), lambda s, j: tex.sum(W[j, k] * state[s - 1, k] * a, axis=k),
                      name="pre")
    m = tex.reduce_axis((0, i), "m")
    ux = tex.compute((t, h), lambda s, j: tex.sum(U[j, m] * X[s, m] * b, axis=m), name="ux")
    upd = tex.compute((t, h), lambda s, j: tex.tanh(pre[s, j] + ux[s, j]), name="upd")

    def reference(x: Any, w: Any, u: Any, h0: Any) -> Any:
        hs = [h0[0]]
        ux_ = (x @ u.T) * b
        for s in range(1, t):
            hs.append(torch.tanh((w @ hs[-1]) * a + ux_[s]))
        return torch.stack(hs)

    return [X, W, U, H0], tex.scan(init, upd, state, name="rnn"), reference


def lstm(t: int, h: int, i: int) -> Case:
    """An LSTM as a two-state ``te.scan`` (h, c), four gates of matrix-vector products
    (weights scaled as ``rnn``'s)."""
    a, b = 0.5 / h ** 0.5, 1.0 / i ** 0.5
    X = tex.placeholder((t, i), name="X")
    Wx = tex.placeholder((4, h, i), name="Wx")
    Wh = tex.placeholder((4, h, h), name="Wh")
    h_st = tex.placeholder((t, h), name="h")
    c_st = tex.placeholder((t, h), name="c")
    h0 = tex.compute((1, h), lambda _, j: X[0, 0] * 0.0, name="h0")
    c0 = tex.compute((1, h), lambda _, j: X[0, 0] * 0.0, name="c0")
    k = tex.reduce_axis((0, h), "k")
    gh = tex.compute((t, 4, h), lambda s, g, j: tex.sum(Wh[g, j, k] * h_st[s - 1, k] * a,
                                                        axis=k), name="gh")
    m = tex.reduce_axis((0, i), "m")
    gx = tex.compute((t, 4, h), lambda s, g, j: tex.sum(Wx[g, j, m] * X[s, m] * b, axis=m),
                     name="gx")
    c_new = tex.compute((t, h), lambda s, j: tex.sigmoid(gh[s, 1, j] + gx[s, 1, j])
                        * c_st[s - 1, j] + tex.sigmoid(gh[s, 0, j] + gx[s, 0, j])
                        * tex.tanh(gh[s, 2, j] + gx[s, 2, j]), name="c_new")
    h_new = tex.compute((t, h), lambda s, j: tex.sigmoid(gh[s, 3, j] + gx[s, 3, j])
                        * tex.tanh(c_new[s, j]), name="h_new")
    hs, _ = tex.scan([h0, c0], [h_new, c_new], [h_st, c_st], name="lstm")

    def reference(x: Any, wx: Any, wh: Any) -> Any:
        hh = torch.zeros(h)
        cc = torch.zeros(h)
        out = [hh]
        gxs = torch.einsum("gjm,sm->sgj", wx, x) * b
        for s in range(1, t):
            g = torch.einsum("gjk,k->gj", wh, hh) * a + gxs[s]
            cc = torch.sigmoid(g[1]) * cc + torch.sigmoid(g[0]) * torch.tanh(g[2])
            hh = torch.sigmoid(g[3]) * torch.tanh(cc)
            out.append(hh)
        return torch.stack(out)

    return [X, Wx, Wh], hs, reference


CASES: dict[str, Callable[[], Case]] = {
    "conv 8x24x27 k48 3x3": lambda: conv(8, 24, 27, 48, 3, 1, 1),
    "conv 4x96x15 k100 3x3": lambda: conv(4, 96, 15, 100, 3, 1, 1),
    "conv 2x3x57 k24 3x3 s2": lambda: conv(2, 3, 57, 24, 3, 2, 1),
    "conv 8x64x33 k64 1x1": lambda: conv(8, 64, 33, 64, 1, 1, 0),
    "conv 4x32x29 k64 3x3 s2": lambda: conv(4, 32, 29, 64, 3, 2, 1),
    "conv 4x40x19 k40 5x5": lambda: conv(4, 40, 19, 40, 5, 1, 2),
    "conv 1x192x9 k320 3x3": lambda: conv(1, 192, 9, 320, 3, 1, 1),
    "dw 8x144x28 p1": lambda: depthwise(8, 144, 28, 1, 1),
    "dw 8x96x55 s2 p1": lambda: depthwise(8, 96, 55, 2, 1),
    "dw 8x96x57 s2": lambda: depthwise(8, 96, 57, 2, 0),
    "dense 7x300x129": lambda: dense(7, 300, 129),
    "dense 197x768x2304": lambda: dense(197, 768, 2304),
    "dense 50x1000x10": lambda: dense(50, 1000, 10),
    "dense 333x513x257": lambda: dense(333, 513, 257),
    "bmm 12x197x64x197": lambda: batch_matmul(12, 197, 64, 197),
    "maxpool 8x64x55 3s2p1": lambda: pool("max", 8, 64, 55, 3, 2, 1),
    "maxpool 4x32x30 2s2": lambda: pool("max", 4, 32, 30, 2, 2, 0),
    "avgpool 8x48x21 3s3": lambda: pool("avg", 8, 48, 21, 3, 3, 0),
    "softmax 2364x197": lambda: softmax(197 * 12, 197),
    "softmax 64x30522": lambda: softmax(64, 30522),
    "softmax 4096x10": lambda: softmax(4096, 10),
    "layernorm 394x768": lambda: layer_norm(394, 768),
    "layernorm 1000x513": lambda: layer_norm(1000, 513),
    "gelu 1576x3072": lambda: gelu(197 * 8, 3072),
    "rnn 100x256x128": lambda: rnn(100, 256, 128),
    "rnn 50x1024x256": lambda: rnn(50, 1024, 256),
    "lstm 50x256x128": lambda: lstm(50, 256, 128),
}


def run_case(name: str, repeat: int, min_time: float, flag: float,
             rng: np.random.Generator) -> str:
    """Build, check and time one case; its table row."""
    ins, Y, reference = CASES[name]()
    G = tex.placeholder(Y.shape, name="G")
    loss = topi.sum(Y * G)
    grads = list(tex.differentiate(loss, ins))
    fwd = tex.build(tex.schedule.auto_schedule([Y]), [*ins, Y])
    fb = tex.build(tex.schedule.auto_schedule([loss, *grads]), [*ins, G, loss, *grads])
    xs = [rng.standard_normal(t.shape).astype("float32") for t in ins]
    g = rng.standard_normal(Y.shape).astype("float32")
    y = np.empty(Y.shape, "float32")
    lo = np.empty((), "float32")
    gs = [np.empty(t.shape, "float32") for t in ins]
    fwd(*xs, y)
    fb(*xs, g, lo, *gs)
    tx = [torch.from_numpy(x).requires_grad_() for x in xs]
    tg = torch.from_numpy(g)
    ty = reference(*tx)
    np.testing.assert_allclose(y, ty.detach().numpy(), rtol=2e-3, atol=2e-3)
    for got, want in zip(gs, torch.autograd.grad((ty * tg).sum(), tx)):
        np.testing.assert_allclose(got, want.numpy(), rtol=3e-3, atol=3e-2)

    def torch_fwd() -> None:
        with torch.no_grad():
            reference(*tx)

    def torch_fb() -> None:
        torch.autograd.grad((reference(*tx) * tg).sum(), tx)

    calls = {"tex fwd": lambda: fwd(*xs, y), "torch fwd": torch_fwd,
             "tex fb": lambda: fb(*xs, g, lo, *gs), "torch fb": torch_fb}
    times: dict[str, list[float]] = {k: [] for k in calls}
    for _ in range(repeat):  # in turns: a slow period of the machine hits them all
        for k, call in calls.items():
            times[k].append(mean_call_time(call, min_time))
    m = {k: statistics.median(v) for k, v in times.items()}
    rf, rb = m["tex fwd"] / m["torch fwd"], m["tex fb"] / m["torch fb"]
    mark = " <<<" if max(rf, rb) > flag else ""
    return (f"| {name} | {m['tex fwd'] * 1e3:.3f} | {rf:.2f} | {m['tex fb'] * 1e3:.3f} | "
            f"{rb:.2f} | {m['tex fb'] / m['tex fwd']:.2f} |{mark}")


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--only", nargs="+", metavar="PREFIX", help="cases whose name starts so")
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.05, help="seconds per timed call")
    ap.add_argument("--flag", type=float, default=1.3, help="tex/PyTorch ratio flagged")
    args = ap.parse_args(argv)
    if torch is None:
        print("probe.py compares with PyTorch, which is not installed", file=sys.stderr)
        return 2
    # PyTorch at the threads tex runs on (all the CPUs this process may use, by default)
    torch.set_num_threads(int(os.environ.get("TEX_NUM_THREADS") or len(os.sched_getaffinity(0))))
    names = [n for n in CASES if not args.only or any(n.startswith(p) for p in args.only)]
    rng = np.random.default_rng(0)
    print("| case | tex fwd ms | tex/torch | tex fb ms | tex/torch | fb/fwd |")
    print("|---|---:|---:|---:|---:|---:|")
    failed = False
    for name in names:
        try:
            print(run_case(name, args.repeat, args.min_time, args.flag, rng), flush=True)
        except Exception as err:  # a probe reports every failure and goes on
            failed = True
            print(f"| {name} | {type(err).__name__}: {str(err)[:200]} |", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
