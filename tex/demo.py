"""The end-to-end demonstration behind ``python -m tex demo``.

It defines the dense layer of API.md with a bias and a loss, prints the tensors and the
DAG, evaluates the program with the NumPy reference interpreter and checks it against plain
NumPy; then differentiates the loss, checks the gradients against finite differences,
schedules forward and gradients by hand, prints the gradient's loop nest, builds both with
LLVM, checks them against NumPy and times them next to NumPy.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

import tex
from tex import topi


def build_dense(n: int = 32, d_in: int = 100, d_out: int = 10, dtype: str = "float32"):
    """The dense layer of API.md: Y = X W^T + B and the loss L = sum(Y)."""
    X = tex.placeholder((n, d_in), dtype, name="X")
    W = tex.placeholder((d_out, d_in), dtype, name="W")
    B = tex.placeholder((d_out,), dtype, name="B")
    k = tex.reduce_axis((0, d_in), name="k")
    T = tex.compute((n, d_out), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    Y = topi.add(T, B)
    L = topi.sum(Y)
    return X, W, B, T, Y, L


def run_demo(seed: int = 0, dot_path: str | None = None) -> int:
    """Run the demonstration; returns 0 when every check passes, 1 otherwise."""
    t0 = time.perf_counter()
    X, W, B, T, Y, L = build_dense()
    print("== the program (producers first) ==")
    print(tex.ir.format_program(L))

    g = tex.graph(L)
    print(f"\n== the DAG: {g.number_of_nodes()} operations, {g.number_of_edges()} edges ==")
    for producer, consumer in g.edges:
        print(f"  {g.nodes[producer]['name']:>8} -> {g.nodes[consumer]['name']}")
    if dot_path is None:
        fd, dot_path = tempfile.mkstemp(prefix="tex-demo-", suffix=".dot")
        os.close(fd)
    with open(dot_path, "w", encoding="utf-8") as f:
        f.write(tex.to_dot(L, name="dense"))
    print(f"  Graphviz DOT written to {dot_path}")

    rng = np.random.default_rng(seed)
    x = rng.standard_normal(X.shape).astype(np.float32)
    w = rng.standard_normal(W.shape).astype(np.float32)
    b = rng.standard_normal(B.shape).astype(np.float32)
    print("\n== evaluating with the NumPy reference interpreter ==")
    y, loss = tex.testing.evaluate([Y, L], {X: x, W: w, B: b})
    y_ref = x.astype(np.float64) @ w.astype(np.float64).T + b
    err_y = float(np.max(np.abs(y - y_ref)))
    err_l = abs(float(loss) - float(y_ref.sum()))
    ok = err_y < 1e-3 and err_l < 1e-2 * max(1.0, abs(float(y_ref.sum())))
    print(f"  Y: shape {y.shape}, max |tex - numpy| = {err_y:.2e}")
    print(f"  L = {float(loss):.6f} (numpy {float(y_ref.sum()):.6f}), |diff| = {err_l:.2e}")
    ok = _compiled_gradients(X, W, B, Y, L, x, w, b) and ok
    print(f"\n{'OK' if ok else 'MISMATCH'}: demo finished in {time.perf_counter() - t0:.2f} s")
    return 0 if ok else 1


def _schedule_gradients(dX: tex.Tensor, dW: tex.Tensor, dB: tex.Tensor) -> tex.schedule.Schedule:
    """A hand schedule: vectorize the contiguous axis of each gradient, reductions outside."""
    s = tex.create_schedule([dX.op, dW.op, dB.op])
    for t in (dX, dW):
        p, q = t.op.axis
        qo, qi = s[t].split(q, factor=8)
        s[t].reorder(p, qo, *t.op.reduce_axis, qi)
        s[t].vectorize(qi)
    po, pi = s[dB].split(dB.op.axis[0], factor=8)
    s[dB].reorder(po, *dB.op.reduce_axis, pi)
    s[dB].vectorize(pi)
    return s


def _compiled_gradients(X: tex.Tensor, W: tex.Tensor, B: tex.Tensor, Y: tex.Tensor,
                        L: tex.Tensor, x: np.ndarray, w: np.ndarray, b: np.ndarray) -> bool:
    """Differentiate, check, schedule, lower, build, run and time the dense gradients."""
    print("\n== tex.differentiate(L, [X, W, B]) ==")
    t = time.perf_counter()
    dX, dW, dB = tex.differentiate(L, [X, W, B])
    print(f"  ({(time.perf_counter() - t) * 1e3:.1f} ms)")
    print(tex.ir.format_program(dX, dW, dB))
    print("\n== check_grad: gradients against finite differences ==")
    X64, W64, B64, _, _, L64 = build_dense(dtype="float64")  # the same layer in float64
    tex.testing.check_grad(L64, [X64, W64, B64])
    print("  the float64 twin of the layer: OK")

    print("\n== the gradient loop nest, scheduled by hand ==")
    sg = _schedule_gradients(dX, dW, dB)
    print(tex.lower(sg, [W, X, dX, dW, dB], name="dense_grad"))
    t = time.perf_counter()
    grad = tex.build(sg, [W, X, dX, dW, dB], name="dense_grad")
    sf = tex.create_schedule(Y.op)
    forward = tex.build(sf, [X, W, B, Y], name="dense_fwd")
    print(f"  built forward and gradient with LLVM in {time.perf_counter() - t:.2f} s")

    y = np.empty(Y.shape, np.float32)
    dx, dw, db = (np.empty(t.shape, np.float32) for t in (dX, dW, dB))
    forward(x, w, b, y)
    grad(w, x, dx, dw, db)
    ones = np.ones(Y.shape, np.float32)  # dL/dY for L = sum(Y)
    refs = {"Y": x @ w.T + b, "dX": ones @ w, "dW": ones.T @ x, "dB": ones.sum(axis=0)}
    ok = True
    for name, got in (("Y", y), ("dX", dx), ("dW", dw), ("dB", db)):
        err = float(np.max(np.abs(got - refs[name])))
        good = err <= 1e-3 * max(1.0, float(np.max(np.abs(refs[name]))))
        ok = ok and good
        print(f"  {name}: max |tex - numpy| = {err:.2e} {'ok' if good else 'MISMATCH'}")

    print("\n== time per call (median) ==")
    t_fwd = forward.benchmark(x, w, b, y, number=200, repeat=5)
    t_grad = grad.benchmark(w, x, dx, dw, db, number=200, repeat=5)
    t_np_fwd = _median_time(lambda: x @ w.T + b)
    t_np_grad = _median_time(lambda: (ones @ w, ones.T @ x, ones.sum(axis=0)))
    print(f"  forward : tex {t_fwd * 1e6:8.1f} us   numpy {t_np_fwd * 1e6:8.1f} us")
    print(f"  backward: tex {t_grad * 1e6:8.1f} us   numpy {t_np_grad * 1e6:8.1f} us")
    return ok


def _median_time(fn, number: int = 200, repeat: int = 5) -> float:
    times = []
    for _ in range(repeat):
        t = time.perf_counter()
        for _ in range(number):
            fn()
        times.append((time.perf_counter() - t) / number)
    return sorted(times)[len(times) // 2]
