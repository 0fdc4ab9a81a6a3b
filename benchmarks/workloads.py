"""The nine benchmark workloads of WORKLOADS.md, built as tex tensor expressions.

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

Run ``python benchmarks/workloads.py`` to print the workloads and their shapes.
"""
from __future__ import annotations

import json
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
    "WORKLOADS",
    "Workload",
    "all_workloads",
    "batch_matmul",
    "conv2d",
    "conv2d_strided",
    "dense",
    "elementwise",
    "layernorm",
    "maxpool2d",
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

    @property
    def placeholders(self) -> list[Tensor]:
        """The inputs and the head: everything the loss reads."""
        return [*self.inputs, self.head]


def _finish(name: str, inputs: list[Tensor], wrt: list[Tensor], forward: Tensor,
            handwritten: int, numpy_forward: Callable[[Arrays], np.ndarray],
            numpy_grad: Callable[[Arrays], list[np.ndarray]], forward_flops: int,
            backward_flops: int) -> Workload:
    """``backward_flops``: the gradients' arithmetic; the loss (a multiply and an add per
    output point) and the forward are added here for ``gradient_flops``."""
    head = tex.placeholder(forward.shape, name="H", dtype=DTYPE)
    loss = topi.sum(forward * head)
    loss_flops = 2 * int(np.prod(forward.shape))
    return Workload(name, inputs, wrt, forward, loss, head, int(handwritten), numpy_forward,
                    numpy_grad, int(forward_flops),
                    int(forward_flops + loss_flops + backward_flops))


def _ph(shape: tuple[int, ...], name: str) -> Tensor:
    return tex.placeholder(shape, name=name, dtype=DTYPE)


def random_arrays(w: Workload, seed: int = 0, dtype: str = DTYPE) -> dict[str, np.ndarray]:
    """Standard-normal data for every placeholder of ``w`` (the head included), by name."""
    rng = np.random.default_rng(seed)
    return {t.name: rng.standard_normal(t.shape).astype(dtype) for t in w.placeholders}


# ---------------------------------------------------------------------------------------
# dense: Y = X W^T + B


def dense(small: bool = False) -> Workload:
    n, k, m = (4, 6, 5) if small else (256, 512, 512)
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


def _phase_points(size: int, ksize: int, stride: int, pad: int) -> int:
    """Sum over the stride phases r of (input points y with (y + pad) % stride == r) x
    (kernel taps ky with ky % stride == r): the points x taps of one spatial dimension of
    a polyphase transposed convolution (each phase a dense convolution over a rectangular
    domain). For stride 1 this is ``size * ksize``."""
    total = 0
    for r in range(stride):
        points = sum(1 for y in range(size) if (y + pad) % stride == r)
        taps = sum(1 for ky in range(ksize) if ky % stride == r)
        total += points * taps
    return total


def _conv_numpy(stride: int, pad: int) -> tuple[Callable[[Arrays], np.ndarray],
                                                Callable[[Arrays], list[np.ndarray]]]:
    def windows(a: Arrays) -> np.ndarray:
        d, kern = a["data"], a["kernel"]
        kh, kw = kern.shape[2:]
        padded = np.pad(d, ((0, 0), (0, 0), (pad, pad), (pad, pad)))
        win = np.lib.stride_tricks.sliding_window_view(padded, (kh, kw), axis=(2, 3))
        return win[:, :, ::stride, ::stride]  # (N, C, OH, OW, KH, KW)

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
                dpad[:, :, ky:ky + stride * oh:stride, kx:kx + stride * ow:stride] += (
                    np.einsum("nohw,oc->nchw", h, kern[:, :, ky, kx], optimize=True))
        ddata = dpad[:, :, pad:pad + d.shape[2], pad:pad + d.shape[3]]
        return [np.ascontiguousarray(ddata), dkernel]

    return fwd, grad


def _conv_workload(name: str, data_shape: tuple[int, int, int, int],
                   kernel_shape: tuple[int, int, int, int], stride: int, pad: int) -> Workload:
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


def conv2d(small: bool = False) -> Workload:
    """Stride 1, pad 1, 3x3."""
    if small:
        return _conv_workload("conv2d", (2, 3, 6, 6), (4, 3, 3, 3), 1, 1)
    return _conv_workload("conv2d", (8, 32, 32, 32), (32, 32, 3, 3), 1, 1)


def conv2d_strided(small: bool = False) -> Workload:
    """Stride 2, pad 2, 5x5."""
    if small:
        return _conv_workload("conv2d_strided", (2, 3, 9, 9), (4, 3, 5, 5), 2, 2)
    return _conv_workload("conv2d_strided", (8, 16, 64, 64), (32, 16, 5, 5), 2, 2)


# ---------------------------------------------------------------------------------------
# max pooling, 2x2 window, stride 2


def maxpool2d(small: bool = False) -> Workload:
    shape = (2, 3, 6, 6) if small else (16, 64, 64, 64)
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


def softmax(small: bool = False) -> Workload:
    n, m = (4, 7) if small else (1024, 1024)
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


def layernorm(small: bool = False) -> Workload:
    n, d = (4, 8) if small else (1024, 1024)
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


def elementwise(small: bool = False) -> Workload:
    n = 50 if small else 4_000_000
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


def batch_matmul(small: bool = False) -> Workload:
    b, m, k, n = (2, 3, 4, 5) if small else (32, 128, 64, 128)
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


def sumsq(small: bool = False) -> Workload:
    n, m = (5, 7) if small else (2048, 2048)
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


if __name__ == "__main__":
    import sys

    for wl in all_workloads(small="--small" in sys.argv[1:]):
        shapes = ", ".join(f"{t.name}{t.shape}" for t in wl.inputs)
        print(f"{wl.name:15s} {shapes} -> {wl.forward.shape}; "
              f"hand-written gradient: {wl.handwritten_iterations:,} iterations; "
              f"{wl.forward_flops / 1e6:,.1f} / {wl.gradient_flops / 1e6:,.1f} MFLOP "
              "forward / gradient")
