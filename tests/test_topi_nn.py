"""tex.topi.nn against NumPy references written here, through tex.testing.evaluate.

The references are independent of the implementation: convolution and pooling loop over the
kernel window on an np.pad-ed array (vectorized over the other dimensions), softmax and the
norms run in float64.
"""
from __future__ import annotations

import ast
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import tex
from tex.testing import evaluate
from tex.topi import nn

Array = np.ndarray


def _rand(rng: np.random.Generator, shape: tuple[int, ...], lo: float = -1.0,
          hi: float = 1.0) -> Array:
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def _placeholders(*shapes: tuple[int, ...], names: str = "abcdef") -> list[tex.Tensor]:
    return [tex.placeholder(s, name=n) for s, n in zip(shapes, names)]


def _run(out: tex.Tensor, inputs: list[tex.Tensor], arrays: list[Array]) -> Array:
    return np.asarray(evaluate(out, dict(zip(inputs, arrays))))


# ---------------------------------------------------------------------------------------
# NumPy references
# ---------------------------------------------------------------------------------------

def ref_dense(x: Array, w: Array, b: Array | None = None) -> Array:
    y = x.astype(np.float64) @ w.astype(np.float64).T
    return y if b is None else y + b


def ref_batch_matmul(a: Array, b: Array, transpose_a: bool, transpose_b: bool) -> Array:
    a = np.swapaxes(a, 1, 2) if transpose_a else a
    b = np.swapaxes(b, 1, 2) if transpose_b else b
    return np.matmul(a.astype(np.float64), b.astype(np.float64))


def _pad4(padding: Any) -> tuple[int, int, int, int]:
    if isinstance(padding, int):
        return (padding,) * 4
    if len(padding) == 2:
        return padding[0], padding[1], padding[0], padding[1]
    return tuple(padding)


def ref_conv2d(x: Array, k: Array, stride: Any, padding: Any, dilation: Any) -> Array:
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    top, left, bottom, right = _pad4(padding)
    xp = np.pad(x.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    o, _, kh, kw = k.shape
    oh = (xp.shape[2] - dh * (kh - 1) - 1) // sh + 1
    ow = (xp.shape[3] - dw * (kw - 1) - 1) // sw + 1
    out = np.zeros((x.shape[0], o, oh, ow))
    for ry in range(kh):
        for rx in range(kw):
            patch = xp[:, :, ry * dh: ry * dh + sh * (oh - 1) + 1: sh,
                       rx * dw: rx * dw + sw * (ow - 1) + 1: sw]
            out += np.einsum("nchw,oc->nohw", patch, k[:, :, ry, rx].astype(np.float64))
    return out


def _pool_out(size: int, k: int, s: int, d: int, lo: int, hi: int, ceil_mode: bool) -> int:
    # PyTorch's pooling_output_shape
    span = (size + lo + hi - d * (k - 1) - 1) / s
    out = (math.ceil(span) if ceil_mode else math.floor(span)) + 1
    if ceil_mode and (out - 1) * s >= size + lo:
        out -= 1
    return out


def ref_pool2d(x: Array, kernel: Any, stride: Any, dilation: Any, padding: Any,
               pool_type: str, ceil_mode: bool = False, count_include_pad: bool = True) -> Array:
    kh, kw = (kernel, kernel) if isinstance(kernel, int) else kernel
    sh, sw = (stride, stride) if isinstance(stride, int) else stride
    dh, dw = (dilation, dilation) if isinstance(dilation, int) else dilation
    top, left, bottom, right = _pad4(padding)
    n, c, h, w = x.shape
    oh = _pool_out(h, kh, sh, dh, top, bottom, ceil_mode)
    ow = _pool_out(w, kw, sw, dw, left, right, ceil_mode)
    # room for every window: ceil_mode may reach past the right/bottom padding
    extra_h = max(0, (oh - 1) * sh + dh * (kh - 1) + 1 - (h + top + bottom))
    extra_w = max(0, (ow - 1) * sw + dw * (kw - 1) + 1 - (w + left + right))
    widths = ((0, 0), (0, 0), (top, bottom + extra_h), (left, right + extra_w))
    fill = -np.inf if pool_type == "max" else 0.0
    xp = np.pad(x.astype(np.float64), widths, constant_values=fill)
    inside = np.pad(np.ones((h, w)), widths[2:])  # 1 on input points
    padded = np.pad(np.ones((h + top + bottom, w + left + right)),
                    ((0, extra_h), (0, extra_w)))  # 1 on input and real padding
    counted = padded if count_include_pad else inside
    acc = np.full((n, c, oh, ow), fill)
    count = np.zeros((oh, ow))
    for ry in range(kh):
        for rx in range(kw):
            rows = slice(ry * dh, ry * dh + sh * (oh - 1) + 1, sh)
            cols = slice(rx * dw, rx * dw + sw * (ow - 1) + 1, sw)
            if pool_type == "max":
                acc = np.maximum(acc, xp[:, :, rows, cols])
            else:
                acc += xp[:, :, rows, cols]
                count += counted[rows, cols]
    return acc if pool_type == "max" else acc / count


def ref_softmax(x: Array, axis: int) -> Array:
    x = x.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return e / e.sum(axis=axis, keepdims=True)


def ref_log_softmax(x: Array, axis: int) -> Array:
    x = x.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))


def ref_layer_norm(x: Array, gamma: Array, beta: Array, axis: tuple[int, ...],
                   eps: float) -> Array:
    x = x.astype(np.float64)
    mean = x.mean(axis=axis, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=axis, keepdims=True)
    # gamma/beta cover the normalized axes; broadcast them into x's rank
    shape = [x.shape[d] if d in axis else 1 for d in range(x.ndim)]
    return (x - mean) / np.sqrt(var + eps) * gamma.reshape(shape) + beta.reshape(shape)


def ref_batch_norm(x: Array, gamma: Array, beta: Array, mean: Array, var: Array, axis: int,
                   eps: float) -> Array:
    shape = [-1 if d == axis else 1 for d in range(x.ndim)]
    x = x.astype(np.float64)
    return ((x - mean.reshape(shape)) / np.sqrt(var.reshape(shape) + eps)
            * gamma.reshape(shape) + beta.reshape(shape))


# ---------------------------------------------------------------------------------------
# forward values, table driven: (id, build(placeholders) -> Tensor, input shapes, reference,
# optional input sampler)
# ---------------------------------------------------------------------------------------

Case = tuple[str, Callable[..., tex.Tensor], list[tuple[int, ...]], Callable[..., Array]]


def _conv_case(shape: tuple[int, ...], kshape: tuple[int, ...], stride: Any, padding: Any,
               dilation: Any) -> Case:
    name = f"conv2d-{shape}-{kshape}-s{stride}-p{padding}-d{dilation}"
    return (name,
            lambda d, k: nn.conv2d(d, k, stride, padding, dilation),
            [shape, kshape],
            lambda d, k: ref_conv2d(d, k, stride, padding, dilation))


def _pool_case(shape: tuple[int, ...], kernel: Any, stride: Any, dilation: Any, padding: Any,
               pool_type: str, ceil_mode: bool = False, include: bool = True) -> Case:
    name = (f"pool2d-{pool_type}-{shape}-k{kernel}-s{stride}-d{dilation}-p{padding}"
            f"{'-ceil' if ceil_mode else ''}{'' if include else '-exclude_pad'}")
    return (name,
            lambda d: nn.pool2d(d, kernel, stride, dilation, padding, pool_type,
                                ceil_mode=ceil_mode, count_include_pad=include),
            [shape],
            lambda d: ref_pool2d(d, kernel, stride, dilation, padding, pool_type, ceil_mode,
                                 include))


CASES: list[Case] = [
    ("dense", lambda x, w: nn.dense(x, w), [(4, 6), (3, 6)], ref_dense),
    ("dense-bias", lambda x, w, b: nn.dense(x, w, b), [(5, 7), (2, 7), (2,)], ref_dense),
    ("dense-1x1", lambda x, w: nn.dense(x, w), [(1, 1), (1, 1)], ref_dense),
    ("batch_matmul-NT", lambda a, b: nn.batch_matmul(a, b), [(2, 3, 4), (2, 5, 4)],
     lambda a, b: ref_batch_matmul(a, b, False, True)),
    ("batch_matmul-NN", lambda a, b: nn.batch_matmul(a, b, transpose_b=False),
     [(2, 3, 4), (2, 4, 5)], lambda a, b: ref_batch_matmul(a, b, False, False)),
    ("batch_matmul-TT", lambda a, b: nn.batch_matmul(a, b, True, True),
     [(3, 4, 2), (3, 5, 4)], lambda a, b: ref_batch_matmul(a, b, True, True)),
    ("batch_matmul-broadcast-a", lambda a, b: nn.batch_matmul(a, b), [(1, 3, 4), (3, 2, 4)],
     lambda a, b: ref_batch_matmul(a, b, False, True)),
    ("batch_matmul-broadcast-b", lambda a, b: nn.batch_matmul(a, b, transpose_b=False),
     [(2, 3, 4), (1, 4, 2)], lambda a, b: ref_batch_matmul(a, b, False, False)),
    _conv_case((2, 3, 7, 7), (4, 3, 3, 3), 1, 0, 1),
    _conv_case((1, 2, 6, 5), (3, 2, 3, 3), 1, 1, 1),
    _conv_case((2, 2, 8, 8), (2, 2, 3, 3), 2, 1, 1),
    _conv_case((1, 3, 9, 7), (2, 3, 2, 3), (2, 1), (1, 2), 1),
    _conv_case((1, 2, 8, 9), (3, 2, 3, 2), 1, (0, 1, 2, 3), 1),
    _conv_case((1, 2, 9, 9), (2, 2, 3, 3), 1, 2, 2),
    _conv_case((1, 1, 10, 8), (2, 1, 3, 2), (2, 3), (1, 0, 2, 1), (2, 1)),
    _conv_case((1, 4, 5, 5), (3, 4, 1, 1), 1, 0, 1),
    _conv_case((1, 2, 5, 5), (1, 2, 5, 5), 1, 0, 1),
    _pool_case((2, 2, 8, 8), 2, 2, 1, 0, "max"),
    _pool_case((1, 2, 7, 6), 3, 1, 1, 1, "max"),
    _pool_case((1, 2, 7, 7), 3, 2, 1, (1, 0, 0, 1), "max", ceil_mode=True),
    _pool_case((1, 1, 9, 8), (3, 2), (2, 3), 2, (2, 1), "max"),
    _pool_case((2, 2, 8, 8), 2, 2, 1, 0, "avg"),
    _pool_case((1, 2, 7, 6), 3, 1, 1, 1, "avg"),
    _pool_case((1, 2, 7, 6), 3, 1, 1, 1, "avg", include=False),
    _pool_case((1, 2, 7, 7), 3, 2, 1, 1, "avg", ceil_mode=True),
    _pool_case((1, 2, 7, 7), 3, 2, 1, 1, "avg", ceil_mode=True, include=False),
    _pool_case((1, 2, 6, 6), 2, 2, 1, 0, "avg", ceil_mode=True),
    _pool_case((1, 1, 5, 5), 3, 3, 1, 1, "max", ceil_mode=True),
    _pool_case((1, 1, 9, 8), (3, 2), (2, 3), 2, (2, 1, 1, 0), "avg", include=False),
    _pool_case((1, 1, 9, 8), (3, 2), (2, 1), 2, (2, 1, 1, 0), "avg", ceil_mode=True),
    # the last window reaches past the padding: only the real padding is counted
    _pool_case((1, 2, 6, 6), 3, 2, 1, 1, "avg", ceil_mode=True),
    _pool_case((1, 2, 6, 6), 3, 2, 1, 1, "avg", ceil_mode=True, include=False),
    _pool_case((1, 1, 7, 5), 2, 2, 1, 0, "avg", ceil_mode=True),
    _pool_case((1, 1, 7, 5), 2, 2, 1, 0, "max", ceil_mode=True),
    ("pool-max", lambda d: nn.pool(d, 2, 2, 0, "max"), [(1, 2, 6, 6)],
     lambda d: ref_pool2d(d, 2, 2, 1, 0, "max")),
    ("pool-avg-pad", lambda d: nn.pool(d, 3, 2, 1, "avg"), [(1, 2, 6, 6)],
     lambda d: ref_pool2d(d, 3, 2, 1, 1, "avg")),
    ("relu", nn.relu, [(3, 4, 5)], lambda x: np.maximum(x, 0)),
    ("leaky_relu", lambda x: nn.leaky_relu(x, 0.1), [(3, 7)],
     lambda x: np.where(x > 0, x, 0.1 * x.astype(np.float64))),
    ("softmax-last", nn.softmax, [(4, 9)], lambda x: ref_softmax(x, -1)),
    ("softmax-axis0", lambda x: nn.softmax(x, 0), [(4, 9)], lambda x: ref_softmax(x, 0)),
    ("softmax-3d-middle", lambda x: nn.softmax(x, axis=1), [(2, 5, 3)],
     lambda x: ref_softmax(x, 1)),
    ("softmax-1d", nn.softmax, [(6,)], lambda x: ref_softmax(x, 0)),
    ("log_softmax-last", nn.log_softmax, [(4, 9)], lambda x: ref_log_softmax(x, -1)),
    ("log_softmax-axis0-3d", lambda x: nn.log_softmax(x, 0), [(3, 2, 4)],
     lambda x: ref_log_softmax(x, 0)),
    ("layer_norm-last", lambda x, g, b: nn.layer_norm(x, g, b), [(4, 8), (8,), (8,)],
     lambda x, g, b: ref_layer_norm(x, g, b, (1,), 1e-5)),
    ("layer_norm-two-axes", lambda x, g, b: nn.layer_norm(x, g, b, axis=(1, 2)),
     [(2, 3, 4), (3, 4), (3, 4)], lambda x, g, b: ref_layer_norm(x, g, b, (1, 2), 1e-5)),
    ("layer_norm-outer-axes", lambda x, g, b: nn.layer_norm(x, g, b, axis=(-3, 2), epsilon=0.1),
     [(2, 3, 4), (2, 4), (2, 4)], lambda x, g, b: ref_layer_norm(x, g, b, (0, 2), 0.1)),
    ("layer_norm-int-axis", lambda x, g, b: nn.layer_norm(x, g, b, axis=0),
     [(5, 3), (5,), (5,)], lambda x, g, b: ref_layer_norm(x, g, b, (0,), 1e-5)),
    ("batch_norm-nchw", lambda x, g, b, m, v: nn.batch_norm(x, g, b, m, v)[0],
     [(2, 3, 4, 4), (3,), (3,), (3,), (3,)],
     lambda x, g, b, m, v: ref_batch_norm(x, g, b, m, v, 1, 1e-5)),
    ("batch_norm-last-axis", lambda x, g, b, m, v: nn.batch_norm(x, g, b, m, v, axis=-1,
                                                                epsilon=1e-3)[0],
     [(4, 5), (5,), (5,), (5,), (5,)],
     lambda x, g, b, m, v: ref_batch_norm(x, g, b, m, v, 1, 1e-3)),
    ("cross_entropy", nn.cross_entropy, [(4, 5), (4, 5)],
     lambda p, t: -(np.log(p.astype(np.float64)) * t).sum() / 4),
    ("cross_entropy_with_logits", nn.cross_entropy_with_logits, [(3, 6), (3, 6)],
     lambda z, t: -(ref_log_softmax(z, 1) * t).sum() / 3),
    ("pad-both", lambda x: nn.pad(x, [1, 0, 2], [0, 3, 1]), [(2, 3, 4)],
     lambda x: np.pad(x, ((1, 0), (0, 3), (2, 1)))),
    ("pad-symmetric-value", lambda x: nn.pad(x, [2, 1], pad_value=-5.0), [(3, 2)],
     lambda x: np.pad(x, ((2, 2), (1, 1)), constant_values=-5.0)),
    ("pad-none", lambda x: nn.pad(x, [0, 0]), [(3, 2)], lambda x: x),
    ("flatten-4d", nn.flatten, [(2, 3, 4, 5)], lambda x: x.reshape(2, -1)),
    ("flatten-unit-dims", nn.flatten, [(3, 1, 4, 1)], lambda x: x.reshape(3, -1)),
    ("flatten-2d", nn.flatten, [(3, 4)], lambda x: x),
    ("flatten-1d", nn.flatten, [(5,)], lambda x: x.reshape(5, 1)),
]

# inputs that must stay in a domain: probabilities for cross_entropy, positive variances
_SAMPLERS: dict[str, Callable[[np.random.Generator, list[tuple[int, ...]]], list[Array]]] = {
    "cross_entropy": lambda rng, shapes: [_rand(rng, shapes[0], 0.05, 1.0),
                                          _rand(rng, shapes[1], 0.0, 1.0)],
    "batch_norm-nchw": lambda rng, shapes: [
        *(_rand(rng, s) for s in shapes[:4]), _rand(rng, shapes[4], 0.5, 2.0)],
    "batch_norm-last-axis": lambda rng, shapes: [
        *(_rand(rng, s) for s in shapes[:4]), _rand(rng, shapes[4], 0.5, 2.0)],
}


@pytest.mark.parametrize("name, build, shapes, reference", CASES, ids=[c[0] for c in CASES])
def test_forward_matches_numpy(name: str, build: Callable[..., tex.Tensor],
                               shapes: list[tuple[int, ...]], reference: Callable[..., Array],
                               rng: np.random.Generator) -> None:
    inputs = _placeholders(*shapes)
    sampler = _SAMPLERS.get(name)
    arrays = sampler(rng, shapes) if sampler else [_rand(rng, s) for s in shapes]
    out = build(*inputs)
    got = _run(out, inputs, arrays)
    want = reference(*arrays)
    assert got.shape == want.shape == out.shape
    assert got.dtype == np.float32
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


# ---------------------------------------------------------------------------------------
# shapes pinned by hand (PyTorch's ceil_mode rule, conv arithmetic)
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("size, kernel, stride, padding, ceil_mode, expected", [
    (8, 2, 2, 0, False, 4),
    (7, 2, 2, 0, False, 3),
    (7, 2, 2, 0, True, 4),     # the last window starts inside the input
    (5, 3, 3, 1, True, 2),     # ceil gives 3, but window 2 would start in the padding
    (6, 3, 2, 1, True, 4),
    (6, 3, 2, 1, False, 3),
])
def test_pool_output_size(size: int, kernel: int, stride: int, padding: int, ceil_mode: bool,
                          expected: int) -> None:
    (data,) = _placeholders((1, 1, size, size))
    out = nn.pool2d(data, kernel, stride, 1, padding, "max", ceil_mode=ceil_mode)
    assert out.shape == (1, 1, expected, expected)


def test_conv2d_output_size() -> None:
    data, kernel = _placeholders((1, 2, 32, 32), (4, 2, 5, 5))
    assert nn.conv2d(data, kernel, 2, 2).shape == (1, 4, 16, 16)
    assert nn.conv2d(data, kernel, 1, 0, dilation=2).shape == (1, 4, 24, 24)
    assert nn.conv2d(data, kernel, (1, 3), (0, 1, 2, 3)).shape == (1, 4, 30, 11)


# ---------------------------------------------------------------------------------------
# numerical stability
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("scale", [1e3, 1e4])
@pytest.mark.parametrize("op, reference", [(nn.softmax, ref_softmax),
                                           (nn.log_softmax, ref_log_softmax)],
                         ids=["softmax", "log_softmax"])
def test_softmax_large_inputs(scale: float, op: Callable[..., tex.Tensor],
                              reference: Callable[..., Array], rng: np.random.Generator) -> None:
    (x,) = _placeholders((3, 16))
    data = (rng.uniform(-1, 1, (3, 16)) * scale).astype(np.float32)
    data[0, 3] = scale   # one row dominated by a single huge entry
    data[1] = -scale     # one row of equal, very negative entries
    got = _run(op(x), [x], [data])
    want = reference(data, -1)
    assert np.isfinite(got).all()
    # softmax values are in [0, 1]: absolute tolerance; log_softmax scales with the input
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_layer_norm_large_mean_is_stable(rng: np.random.Generator) -> None:
    # mean(x^2) - mean^2 would lose every digit here in float32; the two-pass form does not
    x, g, b = _placeholders((2, 64), (64,), (64,))
    data = (1e4 + rng.standard_normal((2, 64))).astype(np.float32)
    ones, zeros = np.ones(64, np.float32), np.zeros(64, np.float32)
    got = _run(nn.layer_norm(x, g, b), [x, g, b], [data, ones, zeros])
    np.testing.assert_allclose(got, ref_layer_norm(data, ones, zeros, (1,), 1e-5),
                               rtol=1e-3, atol=2e-3)


def test_cross_entropy_with_logits_large_logits() -> None:
    z, t = _placeholders((2, 3), (2, 3))
    logits = np.array([[1e4, 0.0, -1e4], [-1e4, 1e4, 0.0]], np.float32)
    targets = np.array([[0.0, 0.0, 1.0], [1.0, 0.0, 0.0]], np.float32)
    got = _run(nn.cross_entropy_with_logits(z, t), [z, t], [logits, targets])
    assert got.shape == ()
    np.testing.assert_allclose(got, 2e4, rtol=1e-6)


def test_max_pool_padding_never_wins() -> None:
    # all inputs negative: a zero (or any finite) padded value would win the max
    (x,) = _placeholders((1, 1, 4, 4))
    data = -np.arange(1, 17, dtype=np.float32).reshape(1, 1, 4, 4)
    got = _run(nn.pool2d(x, 3, 2, 1, 1, "max", ceil_mode=True), [x], [data])
    np.testing.assert_array_equal(got, ref_pool2d(data, 3, 2, 1, 1, "max", True))
    assert (got < 0).all()


# ---------------------------------------------------------------------------------------
# structure: names, reduction axes, where the padding lives
# ---------------------------------------------------------------------------------------

def _reads(t: tex.Tensor) -> list[str]:
    return [s.name for s in t.op.input_tensors]


def test_conv2d_structure() -> None:
    data, kernel = _placeholders((1, 3, 8, 8), (4, 3, 3, 3))
    plain = nn.conv2d(data, kernel, 1, 0)
    assert plain.name == "conv2d_nchw" and _reads(plain) == ["a", "b"]
    assert [iv.name for iv in plain.op.reduce_axis] == ["rc", "ry", "rx"]
    assert [iv.name for iv in plain.op.axis] == ["n", "c", "h", "w"]
    padded = nn.conv2d(data, kernel, 1, (1, 0))
    assert _reads(padded) == ["pad_temp", "b"]
    pad_temp = padded.op.input_tensors[0]
    assert pad_temp.shape == (1, 3, 10, 8)
    assert str(pad_temp) == ("pad_temp[n, c, h, w] = select(h - 1 >= 0 && h - 1 < 8, "
                             "data[n, c, h - 1, w], 0.0)".replace("data", "a"))


def test_pool_structure() -> None:
    (data,) = _placeholders((1, 2, 6, 6))
    mx = nn.pool2d(data, 3, 2, 1, 1, "max")
    assert mx.name == "pool_max" and _reads(mx) == ["a"]  # no padded copy of the input
    (body,) = mx.op.body
    assert body.condition is not tex.const(True)  # the bounds live in the where= clause
    avg = nn.pool2d(data, 2, 2, 1, 0, "avg")
    assert avg.name == "pool_avg" and _reads(avg) == ["pool_sum"]
    assert str(avg) == "pool_avg[n, c, h, w] = pool_sum[n, c, h, w] / 4.0"
    (unpadded,) = avg.op.input_tensors[0].op.body
    assert unpadded.condition is tex.const(True)  # nothing to exclude without padding


def test_softmax_structure() -> None:
    (x,) = _placeholders((4, 9))
    out = nn.softmax(x)
    assert out.name == "T_softmax_norm"
    assert _reads(out) == ["T_softmax_exp", "T_softmax_expsum"]
    exps = out.op.input_tensors[0]
    assert _reads(exps) == ["a", "T_softmax_maxelem"]
    assert str(out) == "T_softmax_norm[i, j] = T_softmax_exp[i, j] / T_softmax_expsum[i]"


def test_dense_prints_readably() -> None:
    x, w, b = _placeholders((4, 6), (3, 6), (3,))
    assert str(nn.dense(x, w)) == "T_dense[i, j] = sum(a[i, k] * b[j, k], k in [0, 6))"
    with_bias = nn.dense(x, w, b)
    assert with_bias.name == "T_add" and _reads(with_bias) == ["T_dense", "c"]


def test_out_dtype_accumulates_wider(rng: np.random.Generator) -> None:
    x = tex.placeholder((3, 40), dtype="int8", name="x")
    w = tex.placeholder((2, 40), dtype="int8", name="w")
    xs = rng.integers(-128, 128, (3, 40), dtype=np.int8)
    ws = rng.integers(-128, 128, (2, 40), dtype=np.int8)
    y = nn.dense(x, w, out_dtype="int32")
    assert y.dtype.name == "int32"
    np.testing.assert_array_equal(_run(y, [x, w], [xs, ws]),
                                  xs.astype(np.int32) @ ws.T.astype(np.int32))


def test_nn_builds_only_on_te() -> None:
    # topi.nn stays independent of the core topi modules: inside tex.topi it may import
    # only tex.topi.utils, the tag names of tex.topi.tag and its own modules
    folder = Path(nn.__file__).parent
    for path in sorted(folder.glob("*.py")):
        for node in ast.walk(ast.parse(path.read_text())):
            if not (isinstance(node, ast.ImportFrom) and node.level):
                continue
            package = ["tex", "topi", "nn"][:4 - node.level]
            target = ".".join([*package, *([node.module] if node.module else [])])
            names = [target] if node.module else [f"{target}.{a.name}" for a in node.names]
            for name in names:
                inside_topi = name.startswith("tex.topi")
                assert not inside_topi or name.startswith(("tex.topi.utils", "tex.topi.tag",
                                                             "tex.topi.nn")), \
                    f"{path.name} imports {name}"


def test_batch_norm_returns_statistics() -> None:
    x, g, b, m, v = _placeholders((2, 3, 4, 4), (3,), (3,), (3,), (3,))
    out, mean, var = nn.batch_norm(x, g, b, m, v)
    assert out.name == "T_batch_norm" and out.shape == (2, 3, 4, 4)
    assert mean is m and var is v


def test_losses_are_scalars() -> None:
    p, t = _placeholders((4, 5), (4, 5))
    assert nn.cross_entropy(p, t).shape == ()
    assert nn.cross_entropy_with_logits(p, t).shape == ()


# ---------------------------------------------------------------------------------------
# errors: (call, exception type, words the message must contain)
# ---------------------------------------------------------------------------------------

def _p(*shape: int, dtype: str = "float32", name: str = "t") -> tex.Tensor:
    return tex.placeholder(shape, dtype=dtype, name=name)


ERRORS: list[tuple[str, Callable[[], Any], type[Exception], tuple[str, ...]]] = [
    ("dense-not-tensor", lambda: nn.dense(np.zeros((2, 2)), _p(2, 2)), TypeError,
     ("topi.nn.dense", "data")),
    ("dense-rank", lambda: nn.dense(_p(2, 3, 4), _p(2, 4)), ValueError,
     ("topi.nn.dense", "data", "2-D")),
    ("dense-inner", lambda: nn.dense(_p(2, 3), _p(4, 5)), ValueError,
     ("topi.nn.dense", "3", "5")),
    ("dense-bias", lambda: nn.dense(_p(2, 3), _p(4, 3), _p(3)), ValueError,
     ("topi.nn.dense", "bias", "(4,)")),
    ("dense-dtype", lambda: nn.dense(_p(2, 3), _p(4, 3, dtype="float64")), ValueError,
     ("topi.nn.dense", "dtype", "float64")),
    ("batch_matmul-k", lambda: nn.batch_matmul(_p(2, 3, 4), _p(2, 5, 3)), ValueError,
     ("topi.nn.batch_matmul", "K=4", "K=3")),
    ("batch_matmul-batch", lambda: nn.batch_matmul(_p(2, 3, 4), _p(3, 5, 4)), ValueError,
     ("topi.nn.batch_matmul", "broadcast")),
    ("batch_matmul-rank", lambda: nn.batch_matmul(_p(3, 4), _p(5, 4)), ValueError,
     ("topi.nn.batch_matmul", "tensor_a", "3-D")),
    ("conv2d-channels", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 4, 3, 3), 1, 0), ValueError,
     ("topi.nn.conv2d: data has 3 channels but kernel expects 4", "(1, 3, 8, 8)",
      "(2, 4, 3, 3)")),
    ("conv2d-layout", lambda: nn.conv2d(_p(1, 8, 8, 3), _p(2, 3, 3, 3), 1, 0, layout="NCHWc"),
     ValueError, ("topi.nn.conv2d", "layout 'NCHWc' is not supported", "N, C, H, W")),
    ("conv2d-empty", lambda: nn.conv2d(_p(1, 3, 4, 4), _p(2, 3, 5, 5), 1, 0), ValueError,
     ("topi.nn.conv2d", "empty", "height", "(1, 3, 4, 4)", "(2, 3, 5, 5)")),
    ("conv2d-rank", lambda: nn.conv2d(_p(3, 8, 8), _p(2, 3, 3, 3), 1, 0), ValueError,
     ("topi.nn.conv2d", "data", "4-D")),
    ("conv2d-stride", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 3, 3, 3), 0, 0), ValueError,
     ("topi.nn.conv2d", "stride", "positive")),
    ("conv2d-padding-type", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 3, 3, 3), 1, 1.5),
     TypeError, ("topi.nn.conv2d", "padding")),
    ("conv2d-padding-string", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 3, 3, 3), 1, "same"),
     ValueError, ("topi.nn.conv2d", "padding 'same'", "'SAME' or 'VALID'")),
    ("conv2d-padding-negative", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 3, 3, 3), 1, -1),
     ValueError, ("topi.nn.conv2d", "padding")),
    ("conv2d-padding-3", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 3, 3, 3), 1, (1, 1, 1)),
     ValueError, ("topi.nn.conv2d", "padding", "4-tuple")),
    ("conv2d-dilation-type", lambda: nn.conv2d(_p(1, 3, 8, 8), _p(2, 3, 3, 3), 1, 0, 1.5),
     TypeError, ("topi.nn.conv2d", "dilation")),
    ("pool2d-type", lambda: nn.pool2d(_p(1, 1, 4, 4), 2, 2, 1, 0, "min"), ValueError,
     ("topi.nn.pool2d", "pool_type", "'min'")),
    ("pool2d-layout", lambda: nn.pool2d(_p(1, 4, 4, 1), 2, 2, 1, 0, "max", layout="NCHW4h"),
     ValueError, ("topi.nn.pool2d", "layout 'NCHW4h' is not supported")),
    ("pool2d-all-padding", lambda: nn.pool2d(_p(1, 1, 4, 4), 2, 1, 1, 2, "max"), ValueError,
     ("topi.nn.pool2d", "padding", "row 0")),
    ("pool2d-empty", lambda: nn.pool2d(_p(1, 1, 2, 2), 3, 1, 1, 0, "avg"), ValueError,
     ("topi.nn.pool2d", "empty", "(1, 1, 2, 2)")),
    ("pool2d-kernel", lambda: nn.pool2d(_p(1, 1, 4, 4), 0, 1, 1, 0, "max"), ValueError,
     ("topi.nn.pool2d", "kernel", "positive")),
    ("pool2d-avg-int", lambda: nn.pool(_p(1, 1, 4, 4, dtype="int32"), 2, 2, 0, "avg"),
     ValueError, ("topi.nn.pool2d", "data", "float")),
    ("relu-not-tensor", lambda: nn.relu(1.0), TypeError, ("topi.nn.relu", "x")),
    ("leaky_relu-alpha", lambda: nn.leaky_relu(_p(3), "0.1"), TypeError,
     ("topi.nn.leaky_relu", "alpha")),
    ("softmax-axis", lambda: nn.softmax(_p(2, 3), axis=2), ValueError,
     ("topi.nn.softmax", "axis 2")),
    ("softmax-axis-type", lambda: nn.softmax(_p(2, 3), axis=1.0), TypeError,
     ("topi.nn.softmax", "axis")),
    ("softmax-int", lambda: nn.softmax(_p(2, 3, dtype="int32")), ValueError,
     ("topi.nn.softmax", "int32", "float")),
    ("log_softmax-0d", lambda: nn.log_softmax(_p()), ValueError,
     ("topi.nn.log_softmax", "dimension")),
    ("layer_norm-gamma", lambda: nn.layer_norm(_p(2, 3), _p(2), _p(3)), ValueError,
     ("topi.nn.layer_norm", "gamma", "(3,)")),
    ("layer_norm-two-axes-gamma", lambda: nn.layer_norm(_p(2, 3, 4), _p(4), _p(3, 4),
                                                        axis=(1, 2)),
     ValueError, ("topi.nn.layer_norm", "gamma", "(3, 4)")),
    ("layer_norm-axis-twice", lambda: nn.layer_norm(_p(2, 3), _p(3), _p(3), axis=(1, -1)),
     ValueError, ("topi.nn.layer_norm", "twice")),
    ("layer_norm-epsilon", lambda: nn.layer_norm(_p(2, 3), _p(3), _p(3), epsilon=-1.0),
     ValueError, ("topi.nn.layer_norm", "epsilon")),
    ("batch_norm-shape", lambda: nn.batch_norm(_p(2, 3, 4, 4), _p(3), _p(3), _p(4), _p(3)),
     ValueError, ("topi.nn.batch_norm", "moving_mean", "(3,)")),
    ("batch_norm-not-tensor", lambda: nn.batch_norm(_p(2, 3), _p(3), _p(3), _p(3), [1.0] * 3),
     TypeError, ("topi.nn.batch_norm", "moving_var")),
    ("cross_entropy-shape", lambda: nn.cross_entropy(_p(2, 3), _p(2, 4)), ValueError,
     ("topi.nn.cross_entropy", "predictions", "targets")),
    ("cross_entropy-rank", lambda: nn.cross_entropy_with_logits(_p(6), _p(6)), ValueError,
     ("topi.nn.cross_entropy_with_logits", "logits", "2-D")),
    ("pad-length", lambda: nn.pad(_p(2, 3), [1]), ValueError,
     ("topi.nn.pad", "pad_before", "2 dimensions")),
    ("pad-negative", lambda: nn.pad(_p(2, 3), [1, 1], [0, -1]), ValueError,
     ("topi.nn.pad", "pad_after", "non-negative")),
    ("pad-type", lambda: nn.pad(_p(2, 3), 1), TypeError, ("topi.nn.pad", "pad_before")),
    ("pad-value", lambda: nn.pad(_p(2, 3), [1, 1], pad_value="0"), TypeError,
     ("topi.nn.pad", "pad_value")),
    ("flatten-0d", lambda: nn.flatten(_p()), ValueError, ("topi.nn.flatten", "()")),
]


@pytest.mark.parametrize("name, call, exc, words", ERRORS, ids=[e[0] for e in ERRORS])
def test_errors(name: str, call: Callable[[], Any], exc: type[Exception],
                words: tuple[str, ...]) -> None:
    with pytest.raises(exc) as info:
        call()
    for word in words:
        assert word in str(info.value), f"{word!r} not in {str(info.value)!r}"
