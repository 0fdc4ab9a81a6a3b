"""The end-to-end demonstration behind ``python -m tex demo``.

Today it defines the dense layer of API.md with a bias and a loss, prints the tensors
and the DAG, evaluates the program with the NumPy reference interpreter on random data,
and checks the result against plain NumPy. Later stages (autodiff, schedules, LLVM)
extend it.
"""
from __future__ import annotations

import os
import tempfile
import time

import numpy as np

import tex
from tex import topi


def build_dense(n: int = 32, d_in: int = 100, d_out: int = 10):
    """The dense layer of API.md: Y = X W^T + B and the loss L = sum(Y)."""
    X = tex.placeholder((n, d_in), name="X")
    W = tex.placeholder((d_out, d_in), name="W")
    B = tex.placeholder((d_out,), name="B")
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
    print(f"\n{'OK' if ok else 'MISMATCH'}: demo finished in {time.perf_counter() - t0:.2f} s")
    return 0 if ok else 1
