"""Tensor expressions and the operator library
============================================

A tex program is a DAG of tensors. ``tex.placeholder`` declares an input; ``tex.compute``
defines a tensor by an index expression, one value per point of its shape; reductions run
over ``tex.reduce_axis``. ``tex.topi`` builds the common operators (broadcasting
arithmetic, dense, conv2d, pooling, softmax, ...) from the same pieces. Nothing runs until
you evaluate (the NumPy reference interpreter) or build (LLVM) the tensors.
"""
# %%
# Placeholders, computes, reductions
# ----------------------------------
import os

import numpy as np

import tex
import tex.testing
from tex import topi
from tex.ir import format_program

small = os.environ.get("TEX_TUTORIAL_SMALL") == "1"
n, m, k = (8, 6, 5) if small else (256, 128, 64)

A = tex.placeholder((n, k), "float32", name="A")
B = tex.placeholder((k, m), "float32", name="B")
r = tex.reduce_axis((0, k), name="r")
# C[i, j] = sum_r A[i, r] * B[r, j]: the lambda's arguments are the output's indices
C = tex.compute((n, m), lambda i, j: tex.sum(A[i, r] * B[r, j], axis=r), name="C")
# elementwise maths and conditions on indices: a ReLU, then zero below the diagonal
D = tex.compute((n, m), lambda i, j: tex.if_then_else(j >= i, tex.max(C[i, j], 0.0), 0.0),
                name="D")
print(D)  # one tensor's definition
print(format_program(D))  # the whole program, producers first

# %%
# The reference interpreter
# -------------------------
# ``tex.testing.evaluate`` runs any tensors with NumPy: the ground truth every compiled
# kernel (and every gradient) is checked against.
rng = np.random.default_rng(0)
a = rng.standard_normal((n, k)).astype(np.float32)
b = rng.standard_normal((k, m)).astype(np.float32)
d = tex.testing.evaluate(D, {A: a, B: b})
want = np.triu(np.maximum(a @ b, 0.0))
np.testing.assert_allclose(d, want, rtol=1e-5, atol=1e-5)
print("evaluate agrees with NumPy:", d.shape, d.dtype)

# %%
# Compiling
# ---------
# ``tex.build`` with a list of tensors schedules them automatically and compiles with LLVM.
# The arguments are the placeholders in creation order, then the outputs, which are
# written in place.
f = tex.build([D], name="triu_relu_matmul")
print("arguments:", [t.name for t in f.args])
out = np.empty((n, m), np.float32)
f(a, b, out)
np.testing.assert_allclose(out, want, rtol=1e-4, atol=1e-4)
print("the compiled kernel agrees too")

# %%
# Other reducers
# --------------
# ``tex.max``/``tex.min``/``tex.prod`` reduce like ``tex.sum``; ``tex.comm_reducer`` makes
# a new one from a combiner and an identity, here the sum of absolute values.
abs_sum = tex.comm_reducer(lambda x, y: x + y, lambda dtype: tex.const(0, dtype),
                           name="abs_sum")
c = tex.reduce_axis((0, k), name="c")
L1 = tex.compute((n,), lambda i: abs_sum(tex.abs(A[i, c]), axis=c), name="L1")
np.testing.assert_allclose(tex.testing.evaluate(L1, {A: a}), np.abs(a).sum(axis=1),
                           rtol=1e-5)
print(L1)

# %%
# The operator library
# --------------------
# ``tex.topi`` broadcasts like NumPy and provides the neural-network operators. Tensors also
# support ``+ - * /`` and ``@``, which call topi.
X = tex.placeholder((2, 3, 9, 9), "float32", name="X")  # NCHW
K = tex.placeholder((4, 3, 3, 3), "float32", name="K")  # OIHW
bias = tex.placeholder((4,), "float32", name="bias")
conv = topi.nn.conv2d(X, K, stride=1, padding=1)
act = topi.nn.relu(conv + topi.reshape(bias, (1, 4, 1, 1)))
pooled = topi.nn.pool2d(act, kernel=(2, 2), stride=(2, 2), dilation=(1, 1),
                        padding=(0, 0, 0, 0), pool_type="max")
logits = topi.sum(pooled, axis=(2, 3))  # (2, 4)
probs = topi.nn.softmax(logits, axis=1)
print(f"conv {conv.shape} -> pool {pooled.shape} -> softmax {probs.shape}")

x = rng.standard_normal(X.shape).astype(np.float32)
kk = rng.standard_normal(K.shape).astype(np.float32)
bb = rng.standard_normal(bias.shape).astype(np.float32)
p = tex.testing.evaluate(probs, {X: x, K: kk, bias: bb})
np.testing.assert_allclose(p.sum(axis=1), 1.0, rtol=1e-5)
g = tex.build([probs], name="tiny_cnn")
got = np.empty(probs.shape, np.float32)
g(x, kk, bb, got)
np.testing.assert_allclose(got, p, rtol=1e-4, atol=1e-5)
print("softmax rows sum to one; compiled == interpreted")

# %%
# Mistakes are reported where they happen
# ---------------------------------------
# A wrong index count, a shape mismatch or a wrong array all raise a Python exception
# naming the culprit; nothing crashes.
for what, bad in [
    ("index count", lambda: tex.compute((n,), lambda i: A[i, 0, 1], name="bad")),
    ("broadcast", lambda: topi.add(A, B)),
    ("argument shape", lambda: f(b, a, out)),
]:
    try:
        bad()
    except (TypeError, ValueError) as err:
        print(f"{what}: {type(err).__name__}: {err}")
