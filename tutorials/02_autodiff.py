"""Automatic differentiation of tensor expressions
=================================================

``tex.differentiate`` turns a tensor expression into new tensor expressions for its
gradients. Each edge of the DAG is differentiated without ever building its Jacobian: the
Kronecker deltas of the Jacobian are solved away, so a gradient does the work a hand-written
one would. Gradients are ordinary tensors: print them, evaluate them, differentiate them again.
"""
# %%
# A scalar loss
# -------------
# A dense layer ``Y = X W^T + B`` and a loss ``L = sum(Y * H)`` with fixed weights ``H``.
# Float64 placeholders keep the NumPy comparisons below exact to the last bits.
import numpy as np

import tex
import tex.testing
from tex import topi
from tex.autodiff import DiffBuildingBlock, iteration_count, jvp
from tex.ir import format_program
from tex.topi.gradient_cost import handwritten_gradient_iterations

n, k, m = 4, 3, 2
X = tex.placeholder((n, k), "float64", name="X")
W = tex.placeholder((m, k), "float64", name="W")
B = tex.placeholder((m,), "float64", name="B")
H = tex.placeholder((n, m), "float64", name="H")
Y = topi.nn.dense(X, W, B)
L = topi.sum(Y * H)
dW, dB = tex.differentiate(L, [W, B])
print(dW)  # one tensor's definition
print(format_program(dW, dB))  # everything the gradients read, producers first

# %%
# ``check_grad`` compares the gradients against finite differences (random data, seeded);
# ``evaluate`` runs them with the NumPy reference interpreter: ``dW = H^T X``, ``dB = sum_i H``.
tex.testing.check_grad(L, [X, W, B])
rng = np.random.default_rng(0)
feed = {t: rng.standard_normal(t.shape) for t in (X, W, B, H)}
dw, db = tex.testing.evaluate([dW, dB], feed)
np.testing.assert_allclose(dw, feed[H].T @ feed[X])
np.testing.assert_allclose(db, feed[H].sum(axis=0))
print("check_grad and the NumPy gradients agree")

# %%
# ``check_grad`` evaluates both sides on a float64 copy of the DAG by default (float
# placeholders and computations re-typed; an explicit narrowing ``astype`` and integer
# tensors kept), so a float32 program passes with the default tolerances: float32 finite
# differences are noise at about 1e-4 relative. ``precision="native"`` evaluates in the
# program's own dtypes and then needs looser ``rtol``/``atol``.
X32 = tex.placeholder((n, k), "float32", name="X32")
tex.testing.check_grad(topi.sum(X32 * X32), [X32])
tex.testing.check_grad(topi.sum(X32 * X32), [X32], precision="native", rtol=1e-2, atol=1e-3)

# %%
# Jacobians and heads
# -------------------
# Without a head, a non-scalar output gives the full Jacobian, of shape ``Y.shape + W.shape``.
# A head of shape ``prefix + Y.shape`` gives the vector-Jacobian products instead.
J = tex.differentiate(Y, [W])[0]
print(f"Jacobian of shape {J.shape}:\n{format_program(J)}")
G = tex.placeholder((5, n, m), "float64", name="G")
vjp = tex.differentiate(Y, [W], G)[0]
print(f"vector-Jacobian products of shape {vjp.shape}:\n{format_program(vjp)}")

# %%
# Adjoints of intermediates
# -------------------------
# The result also holds every intermediate's adjoint and, per tensor, the contribution
# each consumer sent it (they are summed when a tensor has several consumers).
res = tex.differentiate(L, [W, B])
T_dense = Y.op.input_tensors[0]  # Y = T_add reads T_dense (X W^T) and B
for t in (Y, T_dense):
    print(f"adjoint of {t.name}:", res.adjoints[t])
    print(f"  from consumers {[c.name for c in res.adjoint_summands[t]]}")

# %%
# No Jacobian remains
# -------------------
# ``iteration_count`` counts the iteration points of the unscheduled program. Each gradient
# below matches a hand-written one. Matmul ``C = A Bm``, head ``HC``: ``dA = HC Bm^T`` costs
# n*p*k, as does ``dBm``. The literal Jacobian (TVM's starting point) would cost n*k*n*p*k.
p = 5
A = tex.placeholder((n, k), "float64", name="A")
Bm = tex.placeholder((k, p), "float64", name="Bm")
C = topi.matmul(A, Bm)
HC = tex.placeholder(C.shape, "float64", name="HC")
dA, dBm = tex.differentiate(C, [A, Bm], HC)
print(format_program(dA, dBm))
print("dA:", iteration_count(dA), "dBm:", iteration_count(dBm), "hand-written", n * p * k,
      "| literal Jacobian:", iteration_count(tex.autodiff.Jacobian(C, A, optimize=False)))

# %%
# Max pooling (2x2 windows, stride 2): the gradient goes to the element that won the window,
# found by ``pool_max_argsel``, a one-pass argmax (the first maximum wins ties). Hand-written:
# the argmax scans every window, N*C*OH*OW*KH*KW; then each input point, N*C*H*W.
data = tex.placeholder((1, 2, 4, 4), "float64", name="data")
P = topi.nn.pool2d(data, (2, 2), (2, 2), 1, 0, pool_type="max")
HP = tex.placeholder(P.shape, "float64", name="HP")
dd = tex.differentiate(P, [data], HP)[0]
print(format_program(dd))
print("d data:", iteration_count(dd), "hand-written", 1 * 2 * 2 * 2 * 4 + 1 * 2 * 4 * 4)

# %%
# Conv2d with stride 2 and padding 1. The data gradient iterates over the data itself
# (not the padded copy), each point receiving from O * ceil(KH/2) * ceil(KW/2) outputs;
# the kernel gradient is one sum over N*OH*OW per kernel element.
x = tex.placeholder((1, 2, 5, 5), "float64", name="x")
K = tex.placeholder((3, 2, 3, 3), "float64", name="K")
Z = topi.nn.conv2d(x, K, stride=2, padding=1)  # (1, 3, 3, 3)
HZ = tex.placeholder(Z.shape, "float64", name="HZ")
dx, dK = tex.differentiate(Z, [x, K], HZ)
print(format_program(dx, dK))
print("dx:", iteration_count(dx), "hand-written", (1 * 2 * 5 * 5) * 3 * 2 * 2)
print("dK:", iteration_count(dK), "hand-written", (3 * 2 * 3 * 3) * 1 * 3 * 3)
tex.testing.check_grad(Z, [x, K])


# %%
# What a gradient costs: the report
# ---------------------------------
# ``tex.autodiff.report(result)`` prints, per adjoint contribution ``input <- consumer``, the
# iterations of the gradient tensors made for it, the forward op's own iterations, their
# ratio and the zero-elimination steps that fired; then the adjoints proved identically
# zero, and every place a gradient was zeroed by convention (floor/round, casts to
# integers, comparisons that decide a value alone, inputs the output does not use).
tex.autodiff.report(tex.differentiate(L, [W, B]))  # dense
tex.autodiff.report(tex.differentiate(Z, [x, K], HZ))  # conv2d, stride 2, padding 1
tex.autodiff.report(tex.differentiate(P, [data], HP))  # max pooling

# %%
# Every topi op has a hand-written reference: the iterations of a careful hand-written
# backward (``tex.topi.gradient_cost``; the forward's tensors on a tape, a strided
# window's input gradient gathered per stride phase). Given it, the report prints the
# backward's ratio to it; ``tests/test_gradient_cost.py`` holds every op within 1.25x.
hand = handwritten_gradient_iterations(topi.nn.pool2d, data, (2, 2), (2, 2), 1, 0, "max")
tex.autodiff.report(tex.differentiate(P, [data], HP), reference=hand)

# %%
# The stable softmax subtracts the row maximum ``m`` before ``exp``; the result does not
# depend on ``m``, and tex proves it (forward-mode tangents of ``m``, simplified with
# sympy): ``m`` gets no adjoint, no argmax is computed, and the gradient is the
# hand-written ``y * (g - sum(g * y))``: the forward (4 passes over the rows) plus 2.
S = tex.placeholder((4, 10), "float64", name="S")
Ysm = topi.nn.softmax(S)
HS = tex.placeholder(Ysm.shape, "float64", name="HS")
sm = tex.differentiate(Ysm, [S], HS)
print(format_program(sm[0]))
tex.autodiff.report(sm)
print("softmax gradient:", iteration_count(sm[0]), "hand-written", 4 * 4 * 10 + 2 * 4 * 10)

# %%
# ``strict=True`` raises instead of zeroing a float path through a piecewise-constant op:
Q = topi.sum(topi.floor(X) * X)
try:
    tex.differentiate(Q, [X], strict=True)
except tex.autodiff.DifferentiationError as err:
    print("strict:", err)
tex.autodiff.report(tex.differentiate(Q, [X]))

# %%
# Custom differentiation
# ----------------------
# ``fdiff(out, inp, head)`` is called for every edge on the way from the output to the
# inputs; this one wraps the default ``DiffBuildingBlock`` and reports the edges.
def verbose_fdiff(out, inp, head):
    print(f"  differentiating {out.name} with respect to {inp.name}")
    return DiffBuildingBlock(out, inp, head)


dX = tex.differentiate(L, [X], fdiff=verbose_fdiff)[0]

# %%
# ``override={t: (deps, fn)}`` differentiates ``t`` as a function of ``deps`` only. As in
# TVM's tutorial, declaring the layer a function of W and B blocks the gradient to X. The
# building block needs direct inputs, so the layer is one compute here (bias as ``init``).
r = tex.reduce_axis((0, k), name="r")
Y1 = tex.compute((n, m), lambda i, j: tex.sum(X[i, r] * W[j, r], axis=r, init=B[j]), name="Y1")
L1 = topi.sum(Y1 * H)


def through_weights(out, deps, head):
    return [DiffBuildingBlock(out, W, head), DiffBuildingBlock(out, B, head)]


dX1, dW1, dB1 = tex.differentiate(L1, [X, W, B], override={Y1: ([W, B], through_weights)})
print(format_program(dX1, dW1))
assert not tex.testing.evaluate(dX1, feed).any()

# %%
# Forward mode
# ------------
# ``jvp(L, [W], [T])`` is the directional derivative of L along T; it equals ``<dW, T>``.
T = tex.placeholder((m, k), "float64", name="T")
feed[T] = rng.standard_normal(T.shape)
forward, reverse = tex.testing.evaluate([jvp(L, [W], [T]), topi.sum(dW * T)], feed)
print("jvp:", forward, " <dW, T>:", reverse)
np.testing.assert_allclose(forward, reverse)

# %%
# Second order
# ------------
# A gradient is a tensor expression, so it can be differentiated again: differentiating
# ``sum(dW * V)`` gives the Hessian-vector product ``Hess(L2) V`` (L2 has a tanh, so it is
# not zero), checked against finite differences of dW along V.
L2 = topi.sum(topi.tanh(Y) * H)
dW2 = tex.differentiate(L2, [W])[0]
V = tex.placeholder((m, k), "float64", name="V")
hvp = tex.differentiate(topi.sum(dW2 * V), [W])[0]
print(format_program(hvp))
feed[V] = rng.standard_normal(V.shape)
eps = 1e-6
plus, minus = (tex.testing.evaluate(dW2, {**feed, W: feed[W] + s * feed[V]}) for s in (eps, -eps))
np.testing.assert_allclose(tex.testing.evaluate(hvp, feed), (plus - minus) / (2 * eps), atol=1e-7)
print("Hessian-vector product OK")
