"""The nine benchmark workloads of WORKLOADS.md, and five model layers, built as tex
tensor expressions.

``WORKLOADS`` holds the nine workloads (what ``run.py``, ``gpu.py`` and the smoke tests
run); ``MODELS`` the model layers of issue 22 (group norm through reshape, multi-head
attention with reshape/transpose head split and merge, a small CNN with flatten before its
dense layer, an embedding bag, product pooling), which only ``differentiate.py`` uses: they
have no PyTorch/JAX/CUDA counterpart in ``schedules.py``/``frameworks.py``.

Every builder returns a fresh ``Workload``: new placeholders and a new forward DAG on each
call, so nothing is shared (or cached) between two builds. ``small=True`` gives tiny shapes
for smoke runs and for checking against NumPy with the reference interpreter.

Each workload also carries

* ``handwritten_iterations``: the iteration count (``tex.autodiff.iteration_count``'s
  measure: output points x reduction points of every tensor, from the placeholders, a
  rectangular domain counting in full even where a guard skips points) of a hand-written
  program computing the gradients of ``loss = sum(forward * H)`` with respect to ``wrt``.
  The program may read the placeholders (inputs and the head ``H``) only, so forward
  intermediates the gradient needs (softmax's output, layer norm's statistics, the pooled
  maxima) are counted; elementwise expressions are taken as inlined, as a hand-written
  kernel would fuse them. The formula is in a comment in each builder.
* ``numpy_forward(arrays)`` and ``numpy_grad(arrays)``: NumPy implementations of the
  forward and of the hand-written gradients, ``arrays`` mapping placeholder names (the head
  is ``"H"``) to arrays; the gradients come back in the order of ``wrt``. They compute in
  the arrays' dtype (pass float64 arrays for a more accurate reference).
* ``forward_flops`` and ``gradient_flops``: the useful floating-point arithmetic of the
  hand-written forward, and of one call computing the loss and every gradient (the forward,
  the loss ``sum(forward * H)`` and the hand-written gradients: what a gradient time
  covers), for GFLOP/s. A multiply-add counts two, any other arithmetic operation,
  comparison (max) or elementary function (exp, tanh, sigmoid) one; for the matrix products
  and convolutions only the multiply-adds matter. The formula is in each builder.
* ``int_ranges``: integer (index) placeholders and the range ``[0, n)`` ``random_arrays``
  draws their data from (the embedding bag's indices).
* ``tvm_iterations``: TVM's published count for the same program and shapes, or None (none
  of these; ``tvm_list.py`` holds the programs TVM published counts for).

Run ``python benchmarks/workloads.py`` to print the workloads, the models and their shapes.
"""
from __future__ import annotations

import json
import math
import os
import platform
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

import tex
from tex import topi
from tex.ir.tensor import Tensor

__all__ = [
    "MODELS",
    "WORKLOADS",
    "Workload",
    "all_models",
    "all_workloads",
    "attention",
    "batch_matmul",
    "cnn",
    "conv2d",
    "conv2d_strided",
    "dense",
    "elementwise",
    "embedding_bag",
    "group_norm",
    "layernorm",
    "maxpool2d",
    "product_pool",
    "random_arrays",
    "softmax",
    "sumsq",
    "write_results",
]

DTYPE = "float32"
Arrays = Mapping[str, np.ndarray]


@dataclass
class Workload:
    """One benchmark: forward tensors, the scalar loss ``sum(forward * head)``, and
    references."""

    name: str
    inputs: list[Tensor]
    wrt: list[Tensor]
    forward: Tensor
    loss: Tensor
    head: Tensor
    handwritten_iterations: int
    numpy_forward: Callable[[Arrays], np.ndarray] = field(repr=False)
    numpy_grad: Callable[[Arrays], list[np.ndarray]] = field(repr=False)
    forward_flops: int = 0
    gradient_flops: int = 0
    # integer placeholders (indices): name -> n, their data is drawn from [0, n)
    int_ranges: Mapping[str, int] = field(default_factory=dict)
    # TVM's published iteration count for the same program and shapes, when there is one
    tvm_iterations: int | None = None

    @property
    def placeholders(self) -> list[Tensor]:
        """The inputs and the head: everything the loss reads."""
        return [*self.inputs, self.head]


def _finish(name: str, inputs: list[Tensor], wrt: list[Tensor], forward: Tensor,
            handwritten: int, numpy_forward: Callable[[Arrays], np.ndarray],
            numpy_grad: Callable[[Arrays], list[np.ndarray]], forward_flops: int,
            backward_flops: int, int_ranges: Mapping[str, int] | None = None) -> Workload:
    """``backward_flops``: the gradients' arithmetic; the loss (a multiply and an add per
    output point) and the forward are added here for ``gradient_flops``."""
    head = tex.placeholder(forward.shape, name="H", dtype=DTYPE)
    loss = topi.sum(forward * head)
    if not forward.shape.is_symbolic:
        loss_flops = 2 * int(np.prod(forward.shape))
        handwritten, forward_flops = int(handwritten), int(forward_flops)
        gradient_flops = int(forward_flops + loss_flops + backward_flops)
    else:  # (a symbolic batch: the counts are expressions, not used)
        handwritten = forward_flops = gradient_flops = 0
    return Workload(name, inputs, wrt, forward, loss, head, handwritten, numpy_forward,
                    numpy_grad, forward_flops, gradient_flops, dict(int_ranges or {}))


# a builder's batch (leading) extent: None for the workload's own, an int, or a tex.var for a
# symbolic batch (``run.py --symbolic``, tests/test_symbolic.py)
Batch = int | tex.tir.PrimExpr | None


def _ph(shape: tuple[int, ...], name: str) -> Tensor:
    return tex.placeholder(shape, name=name, dtype=DTYPE)


def random_arrays(w: Workload, seed: int = 0, dtype: str = DTYPE) -> dict[str, np.ndarray]:
    """Standard-normal data for every placeholder of ``w`` (the head included), by name;
    an integer placeholder named in ``w.int_ranges`` gets uniform integers in ``[0, n)``
    (in its own dtype)."""
    rng = np.random.default_rng(seed)
    ranges = getattr(w, "int_ranges", {})
    return {t.name: (rng.integers(0, ranges[t.name], t.shape).astype(t.dtype.numpy)
                     if t.name in ranges else rng.standard_normal(t.shape).astype(dtype))
            for t in w.placeholders}


# ---------------------------------------------------------------------------------------
# dense: Y = X W^T + B


def dense(small: bool = False, batch: Batch = None) -> Workload:
    n, k, m = (4, 6, 5) if small else (256, 512, 512)
    n = n if batch is None else batch
    X, W, B = _ph((n, k), "X"), _ph((m, k), "W"), _ph((m,), "B")
    Y = topi.nn.dense(X, W, B)
    # dX = H W      : n*m*k  (n x k outputs, m reduced)
    # dW = H^T X    : m*k*n  (m x k outputs, n reduced)
    # dB = sum_i H  : m*n
    handwritten = 2 * n * m * k + m * n
    # flops: forward 2nmk + nm (bias); backward dX 2nmk, dW 2nmk, dB nm
    forward_flops = 2 * n * m * k + n * m
    backward_flops = 4 * n * m * k + n * m

    def fwd(a: Arrays) -> np.ndarray:
        return a["X"] @ a["W"].T + a["B"]

    def grad(a: Arrays) -> list[np.ndarray]:
        h = a["H"]
        return [h @ a["W"], h.T @ a["X"], h.sum(axis=0)]

    return _finish("dense", [X, W, B], [X, W, B], Y, handwritten, fwd, grad, forward_flops,
                   backward_flops)


# ---------------------------------------------------------------------------------------
# 2-D convolution (NCHW, cross-correlation)


def _out_extent(size: int, ksize: int, stride: int, pad: int) -> int:
    return (size + 2 * pad - ksize) // stride + 1


def _phases(size: int, ksize: int, stride: int, pad: int, dilation: int = 1,
            out_size: int | None = None) -> list[tuple[int, int]]:
    """Per stride phase r: (input points y with (y + pad) % stride == r, kernel taps ky with
    (ky * dilation) % stride == r). Input point y meets tap ky in output h when
    y + pad == h * stride + ky * dilation, so only taps of y's own phase can reach it; a
    polyphase transposed convolution is one dense convolution per phase.

    With ``out_size`` (OH), a phase's taps are capped at the most that can reach one point:
    the valid ``ky * dilation`` lie in a window of ``stride * (OH - 1) + 1`` values, and the
    taps of one phase are ``lcm(stride, dilation)`` apart there; a gather loops over that
    many taps from a per-point start (a guard drops the invalid ones). This matters only
    when the output is short next to the dilated kernel (3x3 dilation 3 on 10 points:
    OH = 4, at most 2 of the 3 taps reach a point)."""
    cap = None
    if out_size is not None:
        cap = stride * (out_size - 1) // math.lcm(stride, dilation) + 1
    phases = []
    for r in range(stride):
        points = sum(1 for y in range(size) if (y + pad) % stride == r)
        taps = sum(1 for ky in range(ksize) if (ky * dilation) % stride == r)
        phases.append((points, taps if cap is None else min(taps, cap)))
    return phases


def _phase_points(size: int, ksize: int, stride: int, pad: int, dilation: int = 1,
                  out_size: int | None = None) -> int:
    """Sum over the stride phases r of (input points y with (y + pad) % stride == r) x
    (kernel taps ky with (ky * dilation) % stride == r): the points x taps of one spatial
    dimension of a polyphase transposed convolution (each phase a dense convolution over a
    rectangular domain). For stride 1 this is ``size * ksize`` (``_phases`` for
    ``out_size``)."""
    return sum(points * taps
               for points, taps in _phases(size, ksize, stride, pad, dilation, out_size))


def _gather_iterations(h: int, w: int, kh: int, kw: int, stride: int, pad: int,
                       dilation: int = 1, per_tap: int = 1, out_hw: tuple[int, int] | None
                       = None) -> int:
    """Iterations of a gather-form transposed convolution (or max-pool gradient) over one
    (N, C) plane: each input point reduces over the taps of its phase (capped as in
    ``_phases`` when ``out_hw`` is given), ``per_tap`` points each (O output channels for a
    convolution, 1 for pooling), counted on the phase's rectangular domain; a point of a
    phase pair with no tap reads nothing but is still written (a zero): 1. When every phase
    has a tap this is ``per_tap * _phase_points(h, ...) * _phase_points(w, ...)``."""
    oh, ow = out_hw if out_hw is not None else (None, None)
    return sum(py * px * max(per_tap * ty * tx, 1)
               for py, ty in _phases(h, kh, stride, pad, dilation, oh)
               for px, tx in _phases(w, kw, stride, pad, dilation, ow))


def _conv_numpy(stride: int, pad: int, dilation: int = 1
                ) -> tuple[Callable[[Arrays], np.ndarray], Callable[[Arrays], list[np.ndarray]]]:
    """NumPy forward and gradients (``[ddata, dkernel]`` for the head ``"H"``) of
    ``topi.nn.conv2d(data, kernel, stride, pad, dilation)``."""
    def windows(a: Arrays) -> np.ndarray:
        d, kern = a["data"], a["kernel"]
        kh, kw = kern.shape[2:]
        padded = np.pad(d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        span = ((kh - 1) * dilation + 1, (kw - 1) * dilation + 1)
        win = np.lib.stride_tricks.sliding_window_view(padded, span, axis=(2, 3))
        # (N, C, OH, OW, KH, KW)
        return win[:, :, ::stride, ::stride, ::dilation, ::dilation]

    def fwd(a: Arrays) -> np.ndarray:
        return np.einsum("nchwyx,ocyx->nohw", windows(a), a["kernel"], optimize=True)

    def grad(a: Arrays) -> list[np.ndarray]:
        d, kern, h = a["data"], a["kernel"], a["H"]
        _, _, kh, kw = kern.shape
        oh, ow = h.shape[2:]
        dkernel = np.einsum("nchwyx,nohw->ocyx", windows(a), h, optimize=True)
        dpad = np.zeros((d.shape[0], d.shape[1], d.shape[2] + 2 * pad, d.shape[3] + 2 * pad),
                        dtype=np.result_type(d, kern, h))
        for ky in range(kh):
            for kx in range(kw):
                y0, x0 = ky * dilation, kx * dilation
                dpad[:, :, y0:y0 + stride * (oh - 1) + 1:stride,
                     x0:x0 + stride * (ow - 1) + 1:stride] += (
                    np.einsum("nohw,oc->nchw", h, kern[:, :, ky, kx], optimize=True))
        ddata = dpad[:, :, pad:pad + d.shape[2], pad:pad + d.shape[3]]
        return [np.ascontiguousarray(ddata), dkernel]

    return fwd, grad


def _conv_workload(name: str, data_shape: tuple[int, int, int, int],
                   kernel_shape: tuple[int, int, int, int], stride: int, pad: int,
                   batch: Batch = None) -> Workload:
    if batch is not None:
        data_shape = (batch, *data_shape[1:])  # type: ignore[assignment]
    n, c, h, w = data_shape
    o, _, kh, kw = kernel_shape
    data, kernel = _ph(data_shape, "data"), _ph(kernel_shape, "kernel")
    out = topi.nn.conv2d(data, kernel, stride, pad)
    oh, ow = _out_extent(h, kh, stride, pad), _out_extent(w, kw, stride, pad)
    assert out.shape == (n, o, oh, ow), out.shape
    # dkernel[o,c,ky,kx] = sum_{n,oh,ow} H * data (zero padding as a guard, no pad tensor):
    #     O*C*KH*KW * N*OH*OW
    # ddata: the transposed convolution, done polyphase (one dense convolution per stride
    # phase, as cuDNN/PyTorch do), so it never multiplies the zeros a stride-dilated H
    # would hold: N*C*O * _phase_points(H, KH, s, p) * _phase_points(W, KW, s, p)
    #     (stride 1: N*C*H*W*O*KH*KW; for these shapes both equal the forward's MACs).
    # A dilate-then-convolve ddata would cost N*C*H*W*O*KH*KW (stride^2 times more).
    handwritten = (o * c * kh * kw * n * oh * ow
                   + n * c * o * _phase_points(h, kh, stride, pad)
                   * _phase_points(w, kw, stride, pad))
    # flops: 2 per multiply-add: forward N*O*OH*OW * C*KH*KW; backward dkernel as many as
    # the forward, ddata the polyphase count above
    forward_flops = 2 * n * o * oh * ow * c * kh * kw
    backward_flops = 2 * handwritten
    fwd, grad = _conv_numpy(stride, pad)
    return _finish(name, [data, kernel], [data, kernel], out, handwritten, fwd, grad,
                   forward_flops, backward_flops)


def conv2d(small: bool = False, batch: Batch = None) -> Workload:
    """Stride 1, pad 1, 3x3."""
    if small:
        return _conv_workload("conv2d", (2, 3, 6, 6), (4, 3, 3, 3), 1, 1, batch)
    return _conv_workload("conv2d", (8, 32, 32, 32), (32, 32, 3, 3), 1, 1, batch)


def conv2d_strided(small: bool = False, batch: Batch = None) -> Workload:
    """Stride 2, pad 2, 5x5."""
    if small:
        return _conv_workload("conv2d_strided", (2, 3, 9, 9), (4, 3, 5, 5), 2, 2, batch)
    return _conv_workload("conv2d_strided", (8, 16, 64, 64), (32, 16, 5, 5), 2, 2, batch)


# ---------------------------------------------------------------------------------------
# max pooling, 2x2 window, stride 2


def maxpool2d(small: bool = False, batch: Batch = None) -> Workload:
    shape = (2, 3, 6, 6) if small else (16, 64, 64, 64)
    if batch is not None:
        shape = (batch, *shape[1:])  # type: ignore[assignment]
    n, c, h, w = shape
    data = _ph(shape, "data")
    out = topi.nn.pool2d(data, (2, 2), (2, 2), 1, 0, pool_type="max")
    oh, ow = h // 2, w // 2
    # the pooled maxima (needed to find the winner): N*C*OH*OW * 2*2
    # ddata[n,c,y,x] = H[n,c,y//2,x//2] where data == max, else 0: N*C*H*W
    handwritten = n * c * oh * ow * 4 + n * c * h * w
    # flops: forward 3 max per window; backward the maxima again (3 per window) and one
    # compare-and-select per input point
    forward_flops = 3 * n * c * oh * ow
    backward_flops = 3 * n * c * oh * ow + n * c * h * w

    def fwd(a: Arrays) -> np.ndarray:
        d = a["data"]
        return d.reshape(n, c, oh, 2, ow, 2).max(axis=(3, 5))

    def grad(a: Arrays) -> list[np.ndarray]:
        d = a["data"]
        up = fwd(a).repeat(2, axis=2).repeat(2, axis=3)
        hup = a["H"].repeat(2, axis=2).repeat(2, axis=3)
        # random data has no ties; a tie would send the gradient to every tied point here
        return [np.where(d == up, hup, 0).astype(np.result_type(d, a["H"]))]

    return _finish("maxpool2d", [data], [data], out, handwritten, fwd, grad, forward_flops,
                   backward_flops)


# ---------------------------------------------------------------------------------------
# softmax over the last axis


def softmax(small: bool = False, batch: Batch = None) -> Workload:
    n, m = (4, 7) if small else (1024, 1024)
    n = n if batch is None else batch
    x = _ph((n, m), "x")
    y = topi.nn.softmax(x)
    # forward to y: max n*m, exp n*m, sum n*m, y n*m               4*n*m
    # s[i] = sum_j H*y: n*m;   dx = y * (H - s[i]): n*m            2*n*m
    handwritten = 6 * n * m
    # flops: forward max, subtract, exp, sum, divide: 5nm; backward s = sum H*y 2nm,
    # dx = y * (H - s) 2nm (y kept from the forward)
    forward_flops = 5 * n * m
    backward_flops = 4 * n * m

    def fwd(a: Arrays) -> np.ndarray:
        x_ = a["x"]
        e = np.exp(x_ - x_.max(axis=-1, keepdims=True))
        return e / e.sum(axis=-1, keepdims=True)

    def grad(a: Arrays) -> list[np.ndarray]:
        y_ = fwd(a)
        h = a["H"]
        return [y_ * (h - (h * y_).sum(axis=-1, keepdims=True))]

    return _finish("softmax", [x], [x], y, handwritten, fwd, grad, forward_flops,
                   backward_flops)


# ---------------------------------------------------------------------------------------
# layer normalization over the last axis


def layernorm(small: bool = False, batch: Batch = None) -> Workload:
    n, d = (4, 8) if small else (1024, 1024)
    n = n if batch is None else batch
    eps = 1e-5
    x, gamma, beta = _ph((n, d), "x"), _ph((d,), "gamma"), _ph((d,), "beta")
    y = topi.nn.layer_norm(x, gamma, beta, axis=-1, epsilon=eps)
    # statistics: sum n*d, sum of squared deviations n*d                 2*n*d
    #   (xhat = (x - mean) * rstd and g = H*gamma are inlined)
    # dbeta = sum_i H: n*d;  dgamma = sum_i H*xhat: n*d                  2*n*d
    # row sums sum_j g, sum_j g*xhat: 2*n*d; dx = rstd*(g - mean(g) - xhat*mean(g*xhat)):
    #   n*d                                                                3*n*d
    handwritten = 7 * n * d
    # flops: forward mean nd, variance (subtract, square, add) 3nd, xhat (subtract,
    # multiply) 2nd, *gamma + beta 2nd: 8nd; backward dbeta nd, dgamma 2nd, g = H*gamma nd,
    # sum g nd, sum g*xhat 2nd, dx = rstd*(g - mean(g) - xhat*mean(g*xhat)) 4nd: 11nd
    forward_flops = 8 * n * d
    backward_flops = 11 * n * d

    def stats(a: Arrays) -> tuple[np.ndarray, np.ndarray]:
        x_ = a["x"]
        mean = x_.mean(axis=-1, keepdims=True)
        var = ((x_ - mean) ** 2).mean(axis=-1, keepdims=True)
        rstd = 1 / np.sqrt(var + eps)
        return (x_ - mean) * rstd, rstd

    def fwd(a: Arrays) -> np.ndarray:
        xhat, _ = stats(a)
        return xhat * a["gamma"] + a["beta"]

    def grad(a: Arrays) -> list[np.ndarray]:
        xhat, rstd = stats(a)
        h = a["H"]
        g = h * a["gamma"]
        dx = rstd * (g - g.mean(axis=-1, keepdims=True)
                     - xhat * (g * xhat).mean(axis=-1, keepdims=True))
        return [dx, (h * xhat).sum(axis=0), h.sum(axis=0)]

    return _finish("layernorm", [x, gamma, beta], [x, gamma, beta], y, handwritten, fwd, grad,
                   forward_flops, backward_flops)


# ---------------------------------------------------------------------------------------
# elementwise: tanh(x*y + z) * sigmoid(x)


def elementwise(small: bool = False, batch: Batch = None) -> Workload:
    n = 50 if small else 4_000_000
    n = n if batch is None else batch
    x, y, z = _ph((n,), "x"), _ph((n,), "y"), _ph((n,), "z")
    out = topi.tanh(x * y + z) * topi.sigmoid(x)
    # t = tanh(x*y+z), s = sigmoid(x), g = H*s*(1-t^2), all inlined:
    # dz = g; dy = g*x; dx = g*y + H*t*s*(1-s): three elementwise outputs      3*n
    handwritten = 3 * n
    # flops: forward x*y, +z, tanh, sigmoid, *: 5n; backward g = H*s*(1-t*t) 4n, dy = g*x n,
    # dx = g*y + H*t*s*(1-s) 6n (t and s kept from the forward): 11n
    forward_flops = 5 * n
    backward_flops = 11 * n

    def fwd(a: Arrays) -> np.ndarray:
        return np.tanh(a["x"] * a["y"] + a["z"]) * (1 / (1 + np.exp(-a["x"])))

    def grad(a: Arrays) -> list[np.ndarray]:
        x_, y_, h = a["x"], a["y"], a["H"]
        t = np.tanh(x_ * y_ + a["z"])
        s = 1 / (1 + np.exp(-x_))
        g = h * s * (1 - t * t)
        return [g * y_ + h * t * s * (1 - s), g * x_, g]

    return _finish("elementwise", [x, y, z], [x, y, z], out, handwritten, fwd, grad,
                   forward_flops, backward_flops)


# ---------------------------------------------------------------------------------------
# batch_matmul: C[b] = A[b] @ B[b]


def batch_matmul(small: bool = False, batch: Batch = None) -> Workload:
    b, m, k, n = (2, 3, 4, 5) if small else (32, 128, 64, 128)
    b = b if batch is None else batch
    A, B = _ph((b, m, k), "A"), _ph((b, k, n), "B")
    C = topi.nn.batch_matmul(A, B, transpose_b=False)
    # dA = H B^T: b*m*k * n;   dB = A^T H: b*k*n * m
    handwritten = 2 * b * m * k * n
    # flops: forward 2bmkn; backward dA and dB 2bmkn each
    forward_flops = 2 * b * m * k * n
    backward_flops = 4 * b * m * k * n

    def fwd(a: Arrays) -> np.ndarray:
        return a["A"] @ a["B"]

    def grad(a: Arrays) -> list[np.ndarray]:
        h = a["H"]
        return [h @ a["B"].transpose(0, 2, 1), a["A"].transpose(0, 2, 1) @ h]

    return _finish("batch_matmul", [A, B], [A, B], C, handwritten, fwd, grad, forward_flops,
                   backward_flops)


# ---------------------------------------------------------------------------------------
# sumsq: sum(x*x, axis=1)


def sumsq(small: bool = False, batch: Batch = None) -> Workload:
    n, m = (5, 7) if small else (2048, 2048)
    n = n if batch is None else batch
    x = _ph((n, m), "x")
    out = topi.sum(x * x, axis=1)
    # dx[i, j] = 2 * x[i, j] * H[i]: n*m
    handwritten = n * m
    # flops: forward multiply and add 2nm; backward dx = 2 * x * H 2nm
    forward_flops = 2 * n * m
    backward_flops = 2 * n * m

    def fwd(a: Arrays) -> np.ndarray:
        return (a["x"] * a["x"]).sum(axis=1)

    def grad(a: Arrays) -> list[np.ndarray]:
        return [2 * a["x"] * a["H"][:, None]]

    return _finish("sumsq", [x], [x], out, handwritten, fwd, grad, forward_flops,
                   backward_flops)


# =======================================================================================
# Models (issue 22): real layers written the way users write them (reshape, transpose,
# flatten, take, prod), in ``MODELS``, not in ``WORKLOADS``: ``differentiate.py`` counts and
# times their differentiation, ``run.py``/``gpu.py`` do not run them (they would need
# PyTorch/JAX/CUDA versions of each; ``run.py``'s and the smoke tests' workload set stays
# that of WORKLOADS.md). Same ``Workload`` interface, same conventions for the hand-written
# count and the flops.


def _group_rows(x: np.ndarray, groups: int) -> np.ndarray:
    """(N, C, H, W) -> (N, G, C//G * H * W): one row per (sample, group)."""
    return x.reshape(x.shape[0], groups, -1)


# ---------------------------------------------------------------------------------------
# group norm through reshape: (N, C, H, W) -> (N, G, C//G, H, W) -> stats -> back


def group_norm(small: bool = False) -> Workload:
    n, c, h, w, g = (2, 6, 4, 4, 3) if small else (8, 64, 32, 32, 8)
    eps = 1e-5
    x, gamma, beta = _ph((n, c, h, w), "x"), _ph((c,), "gamma"), _ph((c,), "beta")
    xr = topi.reshape(x, (n, g, c // g, h, w))
    mean = topi.mean(xr, axis=(2, 3, 4), keepdims=True)
    d = xr - mean
    var = topi.mean(d * d, axis=(2, 3, 4), keepdims=True)
    xhat = topi.reshape(d / topi.sqrt(var + eps), (n, c, h, w))
    y = xhat * topi.reshape(gamma, (c, 1, 1)) + topi.reshape(beta, (c, 1, 1))
    s = n * c * h * w
    # layer norm's program with a (sample, group) row of C//G*H*W points (the reshapes are
    # index arithmetic, no pass):
    # statistics: sum S, sum of squared deviations S                          2*S
    # dbeta[c] = sum_{n,h,w} H: S;  dgamma[c] = sum_{n,h,w} H*xhat: S            2*S
    # per-row sums of g = H*gamma and g*xhat: 2*S; dx = rstd*(g - mean(g) - xhat*mean(g*xhat))
    #   (g, xhat inlined): S                                                     3*S
    handwritten = 7 * s
    # flops: as layernorm's: forward 8S, backward 11S
    forward_flops = 8 * s
    backward_flops = 11 * s

    def stats(a: Arrays) -> tuple[np.ndarray, np.ndarray]:
        xr_ = _group_rows(a["x"], g)
        mean_ = xr_.mean(axis=-1, keepdims=True)
        var_ = ((xr_ - mean_) ** 2).mean(axis=-1, keepdims=True)
        rstd = 1 / np.sqrt(var_ + eps)
        return ((xr_ - mean_) * rstd).reshape(n, c, h, w), rstd

    def fwd(a: Arrays) -> np.ndarray:
        xhat_, _ = stats(a)
        return xhat_ * a["gamma"][:, None, None] + a["beta"][:, None, None]

    def grad(a: Arrays) -> list[np.ndarray]:
        xhat_, rstd = stats(a)
        hd = a["H"]
        gr = _group_rows(hd * a["gamma"][:, None, None], g)
        xr_ = _group_rows(xhat_, g)
        dx = rstd * (gr - gr.mean(axis=-1, keepdims=True)
                     - xr_ * (gr * xr_).mean(axis=-1, keepdims=True))
        return [dx.reshape(n, c, h, w), (hd * xhat_).sum(axis=(0, 2, 3)),
                hd.sum(axis=(0, 2, 3))]

    return _finish("group_norm", [x, gamma, beta], [x, gamma, beta], y, handwritten, fwd,
                   grad, forward_flops, backward_flops)


# ---------------------------------------------------------------------------------------
# multi-head self-attention, heads split and merged through reshape + transpose


def attention(small: bool = False) -> Workload:
    """``x (B, T, D)``; Q, K, V = x Wq^T, x Wk^T, x Wv^T on the (B*T, D) token matrix,
    each split into heads (reshape (B, T, h, d), transpose (B, h, T, d)); softmax(Q K^T /
    sqrt(d)) V; heads merged back (transpose, reshape (B*T, D)) and projected by Wo. Full
    size: ViT-Base's (197 tokens, 768 wide, 12 heads), batch 2."""
    b, t, dm, heads = (2, 5, 8, 2) if small else (2, 197, 768, 12)
    dh = dm // heads
    scale = 1.0 / float(np.sqrt(dh))
    x = _ph((b, t, dm), "x")
    wq, wk, wv, wo = (_ph((dm, dm), name) for name in ("Wq", "Wk", "Wv", "Wo"))
    tokens = topi.reshape(x, (b * t, dm))

    def split(m: Tensor) -> Tensor:  # (B*T, D) -> (B, h, T, d)
        return topi.transpose(topi.reshape(m, (b, t, heads, dh)), (0, 2, 1, 3))

    q, k, v = (split(topi.nn.dense(tokens, wm)) for wm in (wq, wk, wv))
    scores = topi.matmul(q, topi.transpose(k, (0, 1, 3, 2))) * scale
    p = topi.nn.softmax(scores, axis=-1)
    o = topi.matmul(p, v)  # (B, h, T, d)
    merged = topi.reshape(topi.transpose(o, (0, 2, 1, 3)), (b * t, dm))
    y = topi.reshape(topi.nn.dense(merged, wo), (b, t, dm))
    nt = b * t  # tokens
    proj = nt * dm * dm  # one projection's multiply-adds
    att = b * heads * t * t * dh  # one attention matrix product's multiply-adds
    sm = b * heads * t * t  # attention matrix points
    # forward intermediates: Q, K, V 3*proj; scores att; softmax to P 4*sm (max, exp, sum,
    #   P, as the softmax workload); O = P V att
    # dWo = H^T merged: proj;  dmerged = H Wo: proj
    # dP = dO V^T: att;  dV = P^T dO: att;  s = sum_j dP*P: sm;  dS = P*(dP - s)*scale
    #   inlined;  dQ = dS K: att;  dK = dS^T Q: att
    # dWq, dWk, dWv = dQ^T x, ...: 3*proj;  dx = dQ Wq + dK Wk + dV Wv: 3*proj
    handwritten = 11 * proj + 6 * att + 5 * sm
    # flops: forward projections 8*proj (4 of them), two attention products 4*att, scale 1
    # and softmax 5 per point (max, subtract, exp, sum, divide) 6*sm; backward dWo, dmerged
    # 4*proj, dP, dV, dQ, dK 8*att, s 2*sm, dS 3*sm, dWq/dWk/dWv 6*proj, dx 6*proj plus two
    # adds per element 2*nt*dm
    forward_flops = 8 * proj + 4 * att + 6 * sm
    backward_flops = 16 * proj + 8 * att + 5 * sm + 2 * nt * dm

    def heads_of(m: np.ndarray) -> np.ndarray:  # (B*T, D) -> (B, h, T, d)
        return m.reshape(b, t, heads, dh).transpose(0, 2, 1, 3)

    def merge(m: np.ndarray) -> np.ndarray:  # (B, h, T, d) -> (B*T, D)
        return m.transpose(0, 2, 1, 3).reshape(nt, dm)

    def forward_parts(a: Arrays) -> tuple[np.ndarray, ...]:
        xs = a["x"].reshape(nt, dm)
        q_, k_, v_ = (heads_of(xs @ a[name].T) for name in ("Wq", "Wk", "Wv"))
        s_ = q_ @ k_.transpose(0, 1, 3, 2) * scale
        e = np.exp(s_ - s_.max(axis=-1, keepdims=True))
        p_ = e / e.sum(axis=-1, keepdims=True)
        return xs, q_, k_, v_, p_, merge(p_ @ v_)

    def fwd(a: Arrays) -> np.ndarray:
        *_, merged_ = forward_parts(a)
        return (merged_ @ a["Wo"].T).reshape(b, t, dm)

    def grad(a: Arrays) -> list[np.ndarray]:
        xs, q_, k_, v_, p_, merged_ = forward_parts(a)
        hd = a["H"].reshape(nt, dm)
        dwo = hd.T @ merged_
        do = heads_of(hd @ a["Wo"])
        dp = do @ v_.transpose(0, 1, 3, 2)
        dv = p_.transpose(0, 1, 3, 2) @ do
        ds = p_ * (dp - (dp * p_).sum(axis=-1, keepdims=True)) * scale
        dq, dk = ds @ k_, ds.transpose(0, 1, 3, 2) @ q_
        dqm, dkm, dvm = merge(dq), merge(dk), merge(dv)
        dx = dqm @ a["Wq"] + dkm @ a["Wk"] + dvm @ a["Wv"]
        return [dx.reshape(b, t, dm), dqm.T @ xs, dkm.T @ xs, dvm.T @ xs, dwo]

    return _finish("attention", [x, wq, wk, wv, wo], [x, wq, wk, wv, wo], y, handwritten,
                   fwd, grad, forward_flops, backward_flops)


# ---------------------------------------------------------------------------------------
# a small CNN: conv 3x3 + bias + relu, max pool 2x2, conv 3x3 + bias + relu, flatten, dense


def cnn(small: bool = False) -> Workload:
    """Gradients with respect to the weights (as in training; the images get none)."""
    n, c, h, w, o1, o2, ncls = ((2, 2, 6, 6, 3, 4, 5) if small
                                else (8, 3, 32, 32, 16, 32, 10))
    h2, w2_ = h // 2, w // 2
    feat = o2 * h2 * w2_
    x = _ph((n, c, h, w), "x")
    k1, b1 = _ph((o1, c, 3, 3), "w1"), _ph((o1,), "b1")
    k2, b2 = _ph((o2, o1, 3, 3), "w2"), _ph((o2,), "b2")
    fw, fb = _ph((ncls, feat), "fw"), _ph((ncls,), "fb")
    c1 = topi.nn.relu(topi.nn.conv2d(x, k1, 1, 1) + topi.reshape(b1, (o1, 1, 1)))
    pooled = topi.nn.pool2d(c1, (2, 2), (2, 2), 1, 0, pool_type="max")
    c2 = topi.nn.relu(topi.nn.conv2d(pooled, k2, 1, 1) + topi.reshape(b2, (o2, 1, 1)))
    y = topi.nn.dense(topi.nn.flatten(c2), fw, fb)
    mac1 = n * o1 * h * w * c * 9  # conv 1 multiply-adds
    mac2 = n * o2 * h2 * w2_ * o1 * 9  # conv 2 multiply-adds
    p1, p2 = n * o1 * h * w, n * o2 * h2 * w2_  # conv output points
    # forward intermediates: conv 1 mac1 (padding as a guard, no pad tensor; bias and relu
    #   inlined), the pooled maxima p1 (4 taps per window, p1/4 windows), conv 2 mac2
    # dfw = H^T flat: ncls*feat*n;  dfb = sum_n H: ncls*n;  dflat = H fw: n*feat*ncls
    # dc2 = dflat * relu'(c2) inlined;  dw2 = sum dc2 * pooled: mac2;  db2: p2
    # dpooled = transposed conv 2 (stride 1: N*O1*H2*W2*O2*9 = mac2)
    # dc1 = dpooled at the window's maximum, times relu'(c1): a select per point, inlined
    # dw1 = sum dc1 * x: mac1;  db1: p1
    handwritten = (mac1 + p1 + mac2
                   + 2 * ncls * feat * n + ncls * n
                   + 2 * mac2 + p2 + mac1 + p1)
    # flops: forward 2*mac per conv, bias and relu 2 per conv output point, 3 max per window,
    # dense 2*n*ncls*feat + bias; backward dense 4*n*ncls*feat + n*ncls, relu masks 1 per
    # point, conv 2 weight and data gradients 4*mac2, db2 p2, pool gradient (maxima again
    # 3 per window, compare-select per point) and relu mask, dw1 2*mac1, db1 p1
    forward_flops = (2 * mac1 + 2 * p1 + 3 * (p1 // 4) + 2 * mac2 + 2 * p2
                     + 2 * n * ncls * feat + n * ncls)
    backward_flops = (4 * n * ncls * feat + n * ncls + p2 + 4 * mac2 + p2
                      + 3 * (p1 // 4) + 2 * p1 + 2 * mac1 + p1)
    conv_fwd, conv_grad = _conv_numpy(1, 1)

    def parts(a: Arrays) -> tuple[np.ndarray, ...]:
        pre1 = conv_fwd({"data": a["x"], "kernel": a["w1"]}) + a["b1"][:, None, None]
        r1 = np.maximum(pre1, 0)
        win = r1.reshape(n, o1, h2, 2, w2_, 2).transpose(0, 1, 2, 4, 3, 5)
        win = win.reshape(n, o1, h2, w2_, 4)
        first = win.argmax(axis=-1)  # the first maximum wins, as in tex
        pooled_ = np.take_along_axis(win, first[..., None], axis=-1)[..., 0]
        pre2 = conv_fwd({"data": pooled_, "kernel": a["w2"]}) + a["b2"][:, None, None]
        return pre1, first, pooled_, pre2

    def fwd(a: Arrays) -> np.ndarray:
        *_, pre2 = parts(a)
        return np.maximum(pre2, 0).reshape(n, feat) @ a["fw"].T + a["fb"]

    def grad(a: Arrays) -> list[np.ndarray]:
        pre1, first, pooled_, pre2 = parts(a)
        hd = a["H"]
        flat = np.maximum(pre2, 0).reshape(n, feat)
        dc2 = (hd @ a["fw"]).reshape(pre2.shape) * (pre2 > 0)
        dpooled, dw2 = conv_grad({"data": pooled_, "kernel": a["w2"], "H": dc2})
        onehot = np.arange(4) == first[..., None]  # (n, o1, h2, w2, 4)
        dwin = onehot * dpooled[..., None]
        dr1 = dwin.reshape(n, o1, h2, w2_, 2, 2).transpose(0, 1, 2, 4, 3, 5)
        dc1 = dr1.reshape(n, o1, h, w) * (pre1 > 0)
        _, dw1 = conv_grad({"data": a["x"], "kernel": a["w1"], "H": dc1})
        return [dw1, dc1.sum(axis=(0, 2, 3)), dw2, dc2.sum(axis=(0, 2, 3)), hd.T @ flat,
                hd.sum(axis=0)]

    return _finish("cnn", [x, k1, b1, k2, b2, fw, fb], [k1, b1, k2, b2, fw, fb], y,
                   handwritten, fwd, grad, forward_flops, backward_flops)


# ---------------------------------------------------------------------------------------
# embedding bag: sum of the embedding rows of each bag's indices (take + sum)


def embedding_bag(small: bool = False) -> Workload:
    vocab, dm, bags, per_bag = (20, 6, 4, 3) if small else (20_000, 64, 512, 20)
    table = _ph((vocab, dm), "W")
    index = tex.placeholder((bags, per_bag), name="I", dtype="int32")
    y = topi.sum(topi.take(table, index, axis=0), axis=1)  # (bags, dm)
    # dW: zeroed (vocab*dm), then every bag's H row added at each of its indices: a
    # scatter, bags*per_bag*dm (no forward pass needed)
    handwritten = vocab * dm + bags * per_bag * dm
    # flops: forward an add per gathered element; backward an add per scattered element
    forward_flops = bags * per_bag * dm
    backward_flops = bags * per_bag * dm

    def fwd(a: Arrays) -> np.ndarray:
        return a["W"][a["I"]].sum(axis=1)

    def grad(a: Arrays) -> list[np.ndarray]:
        hd = a["H"]
        dw = np.zeros((vocab, dm), dtype=np.result_type(a["W"], hd))
        np.add.at(dw, a["I"], np.broadcast_to(hd[:, None, :], (bags, per_bag, dm)))
        return [dw]

    return _finish("embedding_bag", [table, index], [table], y, handwritten, fwd, grad,
                   forward_flops, backward_flops, int_ranges={"I": vocab})


# ---------------------------------------------------------------------------------------
# product pooling: the product of each 2x2 window (reshape, then topi.prod over two axes)


def product_pool(small: bool = False) -> Workload:
    n, c, h, w = (2, 3, 4, 6) if small else (8, 64, 32, 32)
    x = _ph((n, c, h, w), "x")
    y = topi.prod(topi.reshape(x, (n, c, h // 2, 2, w // 2, 2)), axis=(3, 5))
    s = n * c * h * w
    # exact with zeros: one pass over each window computing both the product of its
    # non-zero points and their number of zeros (one two-output reduction): S;
    # dx = H * (no zero: P / x; one zero: P at the zero, else 0; two or more: 0): S
    handwritten = 2 * s
    # flops: forward 3 multiplies per window of 4; backward the product of the non-zeros
    # (3 per window) and a zero test per point, P / x * H per point
    forward_flops = 3 * s // 4
    backward_flops = 3 * s // 4 + s + 2 * s

    def windows(a: Arrays) -> np.ndarray:  # (N, C, H/2, W/2, 4)
        r = a["x"].reshape(n, c, h // 2, 2, w // 2, 2).transpose(0, 1, 2, 4, 3, 5)
        return r.reshape(n, c, h // 2, w // 2, 4)

    def fwd(a: Arrays) -> np.ndarray:
        return windows(a).prod(axis=-1)

    def grad(a: Arrays) -> list[np.ndarray]:
        win = windows(a)
        others = np.stack([np.delete(win, i, axis=-1).prod(axis=-1) for i in range(4)],
                          axis=-1)  # the product of the window's other points: exact
        dwin = others * a["H"][..., None]
        dx = dwin.reshape(n, c, h // 2, w // 2, 2, 2).transpose(0, 1, 2, 4, 3, 5)
        return [np.ascontiguousarray(dx.reshape(n, c, h, w))]

    return _finish("product_pool", [x], [x], y, handwritten, fwd, grad, forward_flops,
                   backward_flops)


# ---------------------------------------------------------------------------------------

WORKLOADS: dict[str, Callable[..., Workload]] = {
    "dense": dense,
    "conv2d": conv2d,
    "maxpool2d": maxpool2d,
    "softmax": softmax,
    "layernorm": layernorm,
    "elementwise": elementwise,
    "batch_matmul": batch_matmul,
    "sumsq": sumsq,
    "conv2d_strided": conv2d_strided,
}

MODELS: dict[str, Callable[..., Workload]] = {
    "group_norm": group_norm,
    "attention": attention,
    "cnn": cnn,
    "embedding_bag": embedding_bag,
    "product_pool": product_pool,
}


def write_results(path: Path, benchmark: str, settings: dict, rows: list[dict]) -> None:
    """Write a benchmark's rows as JSON with the settings and the machine's description."""
    result = {
        "benchmark": benchmark, **settings,
        "tex_version": tex.__version__, "python": platform.python_version(),
        "numpy": np.__version__, "machine": platform.machine(),
        "processor": platform.processor(), "cpus": os.cpu_count(),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"), "workloads": rows,
    }
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(result, indent=2) + "\n")
    print(f"\nwrote {path}")


def all_workloads(small: bool = False) -> list[Workload]:
    """A fresh build of every workload, in WORKLOADS.md order."""
    return [build(small=small) for build in WORKLOADS.values()]


def all_models(small: bool = False) -> list[Workload]:
    """A fresh build of every model of ``MODELS``."""
    return [build(small=small) for build in MODELS.values()]


if __name__ == "__main__":
    import sys

    small_ = "--small" in sys.argv[1:]
    for wl in all_workloads(small_) + all_models(small_):
        shapes = ", ".join(f"{t.name}{t.shape}" for t in wl.inputs)
        print(f"{wl.name:15s} {shapes} -> {wl.forward.shape}; "
              f"hand-written gradient: {wl.handwritten_iterations:,} iterations; "
              f"{wl.forward_flops / 1e6:,.1f} / {wl.gradient_flops / 1e6:,.1f} MFLOP "
              "forward / gradient")
