"""A custom PyTorch op written in tex
===================================

``tex.contrib.torch.function`` turns tex tensor expressions into a function of torch
tensors that ``torch.autograd`` can differentiate: the forward is one tex-compiled kernel,
and the backward runs gradients that ``tex.differentiate`` derived and tex compiled, so you
write only the forward. This script defines a fused "dense + bias + GELU" layer, uses it
inside a ``torch.nn.Module``, trains a few steps with a torch optimizer, and checks first
and second derivatives with ``torch.autograd.gradcheck`` and ``gradgradcheck``.
"""
# %%
# PyTorch is optional for tex
# ---------------------------
import os
import sys

try:
    import torch
except ImportError:
    print("This tutorial needs PyTorch (pip install torch); skipping.")
    sys.exit(0)

import math

import tex
import tex.contrib.torch
from tex import topi

small = os.environ.get("TEX_TUTORIAL_SMALL") == "1"
batch, features, hidden = (32, 8, 16) if small else (256, 64, 256)
steps = 30 if small else 100
torch.manual_seed(0)

# %%
# The op: ``gelu(X W^T + B)``, fused
# ----------------------------------
# GELU in its tanh form, ``0.5 y (1 + tanh(sqrt(2/pi) (y + 0.044715 y^3)))`` over the dense
# layer ``y = X W^T + B``. The tanh gets a tensor of its own so that the gradient reads it
# instead of differentiating (and repeating) the whole formula; the auto-scheduler still
# inlines the bias and the elementwise tensors where recomputing them is cheaper than
# storing them. Shapes are static, so the op is built for one batch size.


def dense_gelu(n: int, k: int, m: int, dtype: str):
    """The placeholders ``(X, W, B)`` and ``gelu(X W^T + B)``."""
    X = tex.placeholder((n, k), dtype, name="X")
    W = tex.placeholder((m, k), dtype, name="W")
    B = tex.placeholder((m,), dtype, name="B")
    Y = topi.nn.dense(X, W, B)
    c = math.sqrt(2.0 / math.pi)
    T = tex.compute(Y.shape, lambda i, j: tex.tanh(c * Y[i, j] * (1.0 + 0.044715 * Y[i, j]
                                                                  * Y[i, j])), name="T")
    G = tex.compute(Y.shape, lambda i, j: 0.5 * Y[i, j] * (1.0 + T[i, j]), name="gelu")
    return (X, W, B), G


inputs, G = dense_gelu(batch, features, hidden, "float32")
print(tex.ir.format_program(G))
fused = tex.contrib.torch.function(G, list(inputs), name="dense_gelu")
print(fused)

# %%
# Same numbers as PyTorch
# -----------------------
# ``fused(x, w, b)`` takes torch tensors with the placeholders' dtypes and shapes and
# returns a new torch tensor. The kernel reads the arguments' memory in place and writes
# straight into the tensor it returns: there is no copy on either side.
x = torch.randn(batch, features)
w = torch.randn(hidden, features) / math.sqrt(features)
b = torch.zeros(hidden)
reference = torch.nn.functional.gelu(torch.nn.functional.linear(x, w, b), approximate="tanh")
torch.testing.assert_close(fused(x, w, b), reference, rtol=1e-5, atol=1e-5)
print("forward matches torch.nn.functional.gelu(linear(x, w, b), approximate='tanh')")

# %%
# In a module, trained by a torch optimizer
# -----------------------------------------
# The tex layer holds its parameters as ``torch.nn.Parameter``s like any torch layer; a
# plain ``torch.nn.Linear`` reads its output. The target is a fixed random network of the
# same shape, so the loss can go to zero.


class Model(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.weight = torch.nn.Parameter(torch.randn(hidden, features) / math.sqrt(features))
        self.bias = torch.nn.Parameter(torch.zeros(hidden))
        self.head = torch.nn.Linear(hidden, 1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.head(fused(x, self.weight, self.bias))


with torch.no_grad():
    teacher = Model()
    targets = teacher(x)
model = Model()
opt = torch.optim.Adam(model.parameters(), lr=1e-2)
losses = []
for step in range(steps):
    opt.zero_grad()
    loss = torch.nn.functional.mse_loss(model(x), targets)
    loss.backward()  # dW and dB come from a tex-compiled gradient function
    opt.step()
    losses.append(loss.item())
    if step % (steps // 5) == 0 or step == steps - 1:
        print(f"step {step:3d}  loss {loss.item():.5f}")
assert losses[-1] < losses[0], losses

# %%
# What backward ran
# -----------------
# torch asked for the gradients of ``W`` and ``B`` only (``x`` needs none), so the bridge
# built one gradient function for that pattern: a tex function of ``(X, W, B, head)``
# whose outputs are the vector-Jacobian products. It was built on the first backward and
# reused afterwards.
for mask, grad in fused.gradients.items():
    print(f"needs_input_grad {mask}: {grad}")
    print(tex.ir.format_program(*grad.outputs))

# %%
# First and second derivatives, checked by torch
# ----------------------------------------------
# torch's checks compare against finite differences, which need float64. The backward is
# itself a bridged tex function, so ``gradgradcheck`` differentiates it again with tex.
inputs64, G64 = dense_gelu(3, 4, 2, "float64")
fused64 = tex.contrib.torch.function(G64, list(inputs64), name="dense_gelu64")
args = [torch.randn(t.shape, dtype=torch.float64, requires_grad=True) for t in inputs64]
print("gradcheck:", torch.autograd.gradcheck(fused64, args))
print("gradgradcheck:", torch.autograd.gradgradcheck(fused64, args))
