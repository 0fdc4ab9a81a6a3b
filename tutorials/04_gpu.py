"""The dense gradient on a GPU, scheduled by hand
==============================================

A gradient is an ordinary tensor, so it goes to an NVIDIA GPU like any other: bind its
loops to blocks and threads, stage the tiles it reuses in shared memory, keep each
thread's accumulators in registers. ``tex.build(..., target="cuda")`` splits the loop
nest into kernels, inserts the barriers, and compiles them to PTX through LLVM's NVPTX
backend. This script prints the kernel and its PTX, checks it on the CPU with the
lockstep simulator (which fails on races, out-of-bounds accesses and divergent
barriers), and runs it on the GPU when one is present.
"""
# %%
# The gradient
# ------------
# ``Y = X W^T + B``, loss ``L = sum(Y * H)``: the weight gradient ``dW = H^T X`` is a
# matrix product reducing over the batch ``n``.
import ctypes
import os

import numpy as np

import tex
from tex import topi

small = os.environ.get("TEX_TUTORIAL_SMALL") == "1"
n, k, m = (32, 48, 64) if small else (1024, 1024, 1024)
X = tex.placeholder((n, k), name="X")
W = tex.placeholder((m, k), name="W")
B = tex.placeholder((m,), name="B")
H = tex.placeholder((n, m), name="H")
L = topi.sum(topi.nn.dense(X, W, B) * H)
(dW,) = tex.differentiate(L, [W])
print(dW.op.body[0])

# %%
# Blocks, threads, registers
# --------------------------
# Each block computes a 64 x 64 tile of ``dW`` with 16 x 16 threads; each thread owns a
# 4 x 4 sub-tile, accumulated in a ``local`` (register) copy computed at the thread loop.
s = tex.create_schedule(dW.op)
dWL = s.cache_write(dW, "local")
i, j = dW.op.axis
by, yi = s[dW].split(i, factor=64)
ty, vy = s[dW].split(yi, factor=4)
bx, xi = s[dW].split(j, factor=64)
tx, vx = s[dW].split(xi, factor=4)
s[dW].reorder(by, bx, ty, tx, vy, vx)
for axis, tag in ((by, "blockIdx.y"), (bx, "blockIdx.x"), (ty, "threadIdx.y"),
                  (tx, "threadIdx.x")):
    s[dW].bind(axis, tex.thread_axis(tag))
s[dWL].compute_at(s[dW], tx)

# %%
# Shared-memory tiles
# -------------------
# The reduction is split in steps of 8; at each step the block copies the 8 x 64 slices
# of ``H`` and ``X`` it needs into shared memory, every thread fetching a part (the copy's
# loops are bound to the same 16 x 16 threads). Lowering puts a barrier after the copy and
# one before the next step overwrites it.
(r,) = s[dWL].op.reduce_axis
ko, ki = s[dWL].split(r, factor=8)
s[dWL].reorder(ko, ki, *s[dWL].op.axis)
for T in (H, X):
    TS = s.cache_read(T, "shared", [dWL])
    s[TS].compute_at(s[dWL], ko)
    fused = s[TS].fuse(*s[TS].op.axis)
    rest, fx = s[TS].split(fused, factor=16)
    _, fy = s[TS].split(rest, factor=16)
    s[TS].bind(fy, tex.thread_axis("threadIdx.y"))
    s[TS].bind(fx, tex.thread_axis("threadIdx.x"))

f = tex.build(s, [X, W, B, H, dW], target="cuda -arch=sm_80", name="dense_dW")
print(f.get_source("kernels"))
ptx = f.get_source("ptx")
print("\n".join(line for line in ptx.splitlines()
                if ".entry" in line or ".shared" in line or "bar.sync" in line
                or "fma.rn.f32" in line)[:1500])

# %%
# Checking it without a GPU
# -------------------------
# ``f.simulate`` runs every thread of every block in lockstep on the CPU (NumPy) and
# fails on a race, an out-of-bounds access or a barrier some threads skip.
rng = np.random.default_rng(0)
x = rng.standard_normal((n, k)).astype(np.float32)
w = rng.standard_normal((m, k)).astype(np.float32)
b = rng.standard_normal(m).astype(np.float32)
h = rng.standard_normal((n, m)).astype(np.float32)
expected = h.T @ x
dw = np.zeros((m, k), np.float32)
if small:
    f.simulate(x, w, b, h, dw)
    print("simulated: max |error| =", float(np.abs(dw - expected).max()))

# %%
# Running it
# ----------
# NumPy arrays are copied to the device and back; CuPy arrays or torch CUDA tensors
# (``__cuda_array_interface__``) and DLPack objects are used in place.
try:
    ctypes.CDLL("libcuda.so.1")
    has_gpu = True
except OSError:
    has_gpu = False
if has_gpu:
    dw[:] = 0
    f(x, w, b, h, dw)
    print("GPU: max |error| =", float(np.abs(dw - expected).max()))
    seconds = f.benchmark(x, w, b, h, dw, number=5, repeat=3)
    print(f"GPU: {seconds * 1e3:.3f} ms per call, copies included")
else:
    print("no CUDA driver here: the PTX above is what a GPU would run")

# %%
# Or let the auto-scheduler do it
# -------------------------------
auto = tex.build([dW], [X, W, B, H, dW], target="cuda")
print([(kern.grid, kern.block, kern.shared_bytes) for kern in auto.program.kernels])
