"""The end-to-end demonstration behind ``python -m tex demo``.

A dense layer ``Y = X W^T + B`` under a softmax cross-entropy loss, on the default CPU:
define it, differentiate the loss, print the gradient expressions, check them against
finite differences, auto-schedule the gradient and print its loop nest, build forward and
gradient with LLVM, check them against NumPy's hand-written gradients, time them next to
NumPy, and write a picture of the forward+backward DAG (SVG when Graphviz's ``dot`` is
installed, DOT text otherwise). Each long step prints a progress line with its time.
"""
from __future__ import annotations

import os
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import tex
from tex import topi

BATCH, D_IN, CLASSES = 64, 256, 10
STEPS = 8


def build_model(n: int = BATCH, d_in: int = D_IN, classes: int = CLASSES,
                dtype: str = "float32") -> dict[str, tex.Tensor]:
    """The dense layer and its loss: ``Y = X W^T + B``, ``L = cross_entropy(Y, T)``."""
    X = tex.placeholder((n, d_in), dtype, name="X")
    W = tex.placeholder((classes, d_in), dtype, name="W")
    B = tex.placeholder((classes,), dtype, name="B")
    T = tex.placeholder((n, classes), dtype, name="T")  # one-hot targets
    k = tex.reduce_axis((0, d_in), name="k")
    XW = tex.compute((n, classes), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="XW")
    Y = tex.compute((n, classes), lambda i, j: XW[i, j] + B[j], name="Y")
    L = topi.nn.cross_entropy_with_logits(Y, T)
    return {"X": X, "W": W, "B": B, "T": T, "Y": Y, "L": L}


class _Progress:
    """``[step/total] what ... done in 0.12 s`` lines, so a slow step is visible."""

    def __init__(self, total: int) -> None:
        self.total, self.n = total, 0

    @contextmanager
    def step(self, what: str) -> Iterator[None]:
        self.n += 1
        print(f"\n[{self.n}/{self.total}] {what} ...", flush=True)
        t = time.perf_counter()
        yield
        print(f"[{self.n}/{self.total}] done in {time.perf_counter() - t:.2f} s", flush=True)


def numpy_reference(x: np.ndarray, w: np.ndarray, b: np.ndarray, t: np.ndarray
                    ) -> tuple[float, np.ndarray, np.ndarray, np.ndarray]:
    """Loss and the hand-written gradients: ``dY = (softmax(Y) - T) / n``."""
    y = x @ w.T + b
    z = y - y.max(axis=1, keepdims=True)
    p = np.exp(z)
    p /= p.sum(axis=1, keepdims=True)
    loss = float(-(t * (z - np.log(np.exp(z).sum(axis=1, keepdims=True)))).sum() / len(x))
    dy = (p - t) / len(x)
    return loss, dy.T @ x, dy.sum(axis=0), y


def run_demo(seed: int = 0, out_path: str | None = None) -> int:
    """Run the demonstration; returns 0 when every check passes, 1 otherwise."""
    t0 = time.perf_counter()
    progress = _Progress(6)
    m = build_model()
    X, W, B, T, Y, L = (m[k] for k in ("X", "W", "B", "T", "Y", "L"))
    print(f"== a dense layer ({BATCH}x{D_IN} -> {CLASSES} classes) and its "
          "softmax cross-entropy loss ==")
    print(tex.ir.format_program(L))

    with progress.step("tex.differentiate(L, [W, B])"):
        dW, dB = tex.differentiate(L, [W, B])
        print(tex.ir.format_program(dW, dB))
        print(f"  iterations: forward {tex.autodiff.iteration_count(L):,}, "
              f"gradients {tex.autodiff.iteration_count(dW, dB):,}")

    with progress.step("check_grad: gradients against finite differences (float64 twin)"):
        _check_small_model(seed)
        print("  OK")

    outs = [L, dW, dB]
    args = [X, W, B, T, *outs]
    with progress.step("auto_schedule and lower the gradient"):
        s = tex.schedule.auto_schedule(outs, target="llvm")
        print(tex.lower(s, args, name="dense_ce_grad"))

    with progress.step("build forward and gradient with LLVM"):
        grad = tex.build(s, args, name="dense_ce_grad")
        fwd = tex.build(tex.schedule.auto_schedule([Y], target="llvm"), [X, W, B, Y],
                        name="dense_fwd")

    a = _Arrays.random(m, seed)
    with progress.step("run and check against NumPy's hand-written gradients"):
        ok = _check_against_numpy(fwd, grad, a)
    with progress.step("time per call (median), next to NumPy"):
        _time_against_numpy(fwd, grad, a)

    picture = _save_picture(outs, out_path)
    print(f"\nthe forward+backward DAG: {picture}"
          + ("" if picture.suffix != ".dot" else
             "  (DOT text: install Graphviz for SVG, or run dot -Tsvg on it)"))
    print(f"\n{'OK' if ok else 'MISMATCH'}: demo finished in {time.perf_counter() - t0:.2f} s")
    return 0 if ok else 1


def _check_small_model(seed: int) -> None:
    """``check_grad`` of a small float64 copy of the model (AssertionError when wrong)."""
    small = build_model(n=4, d_in=6, classes=3, dtype="float64")
    rng = np.random.default_rng(seed)
    feed = {small[k]: rng.standard_normal(small[k].shape) for k in ("X", "W", "B")}
    feed[small["T"]] = np.eye(3)[rng.integers(0, 3, 4)]
    tex.testing.check_grad(small["L"], [small["W"], small["B"]], data=feed)


@dataclass
class _Arrays:
    """The built functions' arguments: inputs ``x, w, b, t`` and output buffers."""

    x: np.ndarray
    w: np.ndarray
    b: np.ndarray
    t: np.ndarray
    y: np.ndarray
    loss: np.ndarray
    dw: np.ndarray
    db: np.ndarray

    @classmethod
    def random(cls, m: dict[str, tex.Tensor], seed: int) -> _Arrays:
        """Seeded inputs of the model's shapes (W scaled by 1/sqrt(D_IN)), empty outputs."""
        X, W, B, Y = (m[k] for k in ("X", "W", "B", "Y"))
        rng = np.random.default_rng(seed)
        x = rng.standard_normal(X.shape).astype(np.float32)
        w = (rng.standard_normal(W.shape) / np.sqrt(D_IN)).astype(np.float32)
        b = rng.standard_normal(B.shape).astype(np.float32)
        t = np.eye(CLASSES, dtype=np.float32)[rng.integers(0, CLASSES, BATCH)]
        return cls(x, w, b, t, np.empty(Y.shape, np.float32), np.empty((), np.float32),
                   np.empty(W.shape, np.float32), np.empty(B.shape, np.float32))


def _check_against_numpy(fwd: Any, grad: Any, a: _Arrays) -> bool:
    """Run forward and gradient, compare with ``numpy_reference``, then take a few SGD
    steps (updating ``a.w`` and ``a.b``); True when all match and the loss goes down."""
    ok = True
    fwd(a.x, a.w, a.b, a.y)
    grad(a.x, a.w, a.b, a.t, a.loss, a.dw, a.db)
    ref_loss, ref_dw, ref_db, ref_y = numpy_reference(*(v.astype(np.float64)
                                                        for v in (a.x, a.w, a.b, a.t)))
    for name, got, want in (("Y", a.y, ref_y), ("L", a.loss, ref_loss), ("dW", a.dw, ref_dw),
                            ("dB", a.db, ref_db)):
        want = np.asarray(want)
        err = float(np.max(np.abs(got - want)))
        good = err <= 1e-4 * max(1.0, float(np.max(np.abs(want))))
        ok = ok and good
        print(f"  {name:>2}: max |tex - numpy| = {err:.1e}  {'ok' if good else 'MISMATCH'}")
    # a few SGD steps with the compiled gradient: the loss goes down
    losses = []
    for _ in range(STEPS):
        grad(a.x, a.w, a.b, a.t, a.loss, a.dw, a.db)
        losses.append(float(a.loss))
        a.w -= 0.5 * a.dw
        a.b -= 0.5 * a.db
    print(f"  {STEPS} SGD steps: loss {losses[0]:.4f} -> {losses[-1]:.4f}")
    return ok and losses[-1] < losses[0]


def _time_against_numpy(fwd: Any, grad: Any, a: _Arrays) -> None:
    """Print the median time per call of the built functions and of NumPy's versions."""
    t_fwd = fwd.benchmark(a.x, a.w, a.b, a.y, number=200, repeat=5)
    t_grad = grad.benchmark(a.x, a.w, a.b, a.t, a.loss, a.dw, a.db, number=200, repeat=5)
    x64 = [v.astype(np.float32) for v in (a.x, a.w, a.b, a.t)]
    t_np_fwd = _median_time(lambda: x64[0] @ x64[1].T + x64[2])
    t_np_grad = _median_time(lambda: numpy_reference(*x64))
    print(f"  forward           : tex {t_fwd * 1e6:8.1f} us   numpy {t_np_fwd * 1e6:8.1f} us")
    print(f"  loss + gradients  : tex {t_grad * 1e6:8.1f} us   numpy "
          f"{t_np_grad * 1e6:8.1f} us")


def _save_picture(tensors: list[tex.Tensor], out_path: str | None) -> Path:
    if out_path is None:
        fd, out_path = tempfile.mkstemp(prefix="tex-demo-", suffix=".svg")
        os.close(fd)
        os.unlink(out_path)  # save() may write the .dot next to it instead
    return tex.viz.save(tensors, out_path, name="dense_cross_entropy")


def _median_time(fn: Callable[[], Any], number: int = 200, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return sorted(times)[len(times) // 2]
