"""Scheduling a gradient by hand
==============================

A gradient from ``tex.differentiate`` is an ordinary tensor, so it is scheduled like any
other: ``create_schedule`` records how its loops run, ``tex.lower`` shows the loop nest,
``tex.build`` compiles it with LLVM. This tutorial takes the weight gradient of a dense
layer, prints its naive loop nest, then splits, reorders, vectorizes and parallelizes it,
checking the numbers and timing each step.
"""
# %%
# The gradient
# ------------
# ``Y = X W^T + B``, loss ``L = sum(Y * H)``. The weight gradient is ``dW = H^T X``: a
# matrix product whose reduction runs over the batch.
import os
import time

import numpy as np

import tex
from tex import topi
from tex.schedule import create_schedule

small = os.environ.get("TEX_TUTORIAL_SMALL") == "1"
n, k, m = (16, 24, 32) if small else (256, 512, 512)
X = tex.placeholder((n, k), name="X")
W = tex.placeholder((m, k), name="W")
B = tex.placeholder((m,), name="B")
H = tex.placeholder((n, m), name="H")
L = topi.sum(topi.nn.dense(X, W, B) * H)
dW, = tex.differentiate(L, [W])
print(dW)

rng = np.random.default_rng(0)
x, w, h = (rng.standard_normal(t.shape).astype(np.float32) for t in (X, W, H))
expected = h.T.astype(np.float64) @ x


def run(s, label: str) -> float:
    """Build the schedule, check dW against NumPy, return the median time per call."""
    t0 = time.perf_counter()
    f = tex.build(s, [X, H, dW], name="dW")
    built = time.perf_counter() - t0
    out = np.empty(dW.shape, np.float32)
    f(x, h, out)
    np.testing.assert_allclose(out, expected, rtol=1e-4, atol=1e-3)
    seconds = f.benchmark(x, h, out, number=3 if small else 10, repeat=3)
    print(f"{label:>28}: {seconds * 1e3:8.3f} ms per call (build {built:.2f} s), matches NumPy")
    return seconds


# %%
# The naive loop nest
# -------------------
# One loop per axis, the reduction innermost. ``dW[p, q]`` reads ``H[i, p]`` and
# ``X[i, q]`` with a stride of a whole row per ``i``: slow, and serial.
s = create_schedule(dW.op)
print(tex.lower(s, [X, H, dW], name="dW"))
naive = run(s, "naive")

# %%
# Reorder and vectorize
# ---------------------
# Put the reduction outside the ``q`` loop: then ``q`` is contiguous in ``dW`` and in ``X``,
# so it vectorizes (8 float32 lanes), and the row ``dW[p, :]`` stays in cache while ``i``
# runs.
s = create_schedule(dW.op)
p, q = dW.op.axis
(i,) = dW.op.reduce_axis
qo, qi = s[dW].split(q, factor=8)
s[dW].reorder(p, qo, i, qi)
s[dW].vectorize(qi)
print(tex.lower(s, [X, H, dW], name="dW"))
vectorized = run(s, "reorder + vectorize")

# %%
# Parallel, with a register block
# -------------------------------
# Tile ``p`` too and unroll it, so each ``X[i, q..q+7]`` vector load feeds four
# accumulators, and run the outer ``p`` tiles on all cores. ``compute_at`` keeps the
# accumulation of one tile in a small local buffer (``cache_write``) that is copied out
# once, instead of reading and writing ``dW`` in memory at every ``i``.
s = create_schedule(dW.op)
dWl = s.cache_write(dW, "local")
p, q = dW.op.axis
po, pi = s[dW].split(p, factor=4)
qo, qi = s[dW].split(q, factor=8)
s[dW].reorder(po, qo, pi, qi)
s[dW].parallel(po)
s[dW].vectorize(qi)
s[dWl].compute_at(s[dW], qo)
lp, lq = dWl.op.axis
(li,) = dWl.op.reduce_axis
s[dWl].reorder(li, lp, lq)
s[dWl].unroll(lp)
s[dWl].vectorize(lq)
print(tex.lower(s, [X, H, dW], name="dW"))
tuned = run(s, "blocked + parallel")

print(f"\nspeed-up over the naive nest: vectorized {naive / vectorized:.1f}x, "
      f"blocked + parallel {naive / tuned:.1f}x")
