"""The real layers ``models.py`` times: each written three times, with tex's public API
(topi), with PyTorch and with JAX, as a user of each would write it.

``LAYERS`` maps a name to a ``Layer``: ``build(small)`` returns a ``workloads.Workload``
(fresh placeholders, ``loss = sum(forward * H)``), ``torch_fn(t)`` and ``jax_fn(t)`` compute
the same forward from a dict of framework arrays keyed by placeholder name, and
``arrays(w, seed)`` draws the data: ``workloads.random_arrays`` with every weight scaled by
``1/sqrt(fan_in)`` (as the frameworks' default initializers do, so activations stay O(1) and
softmax/GELU are not saturated; the checks then compare meaningful numbers).

The workload's NumPy references (``numpy_forward``/``numpy_grad``) are PyTorch eager in
float64 (forward, and ``autograd.grad`` of the loss), so every variant is checked against
an independent float64 implementation. ``handwritten_iterations`` is 0: these layers are
timed, not counted (``differentiate.py`` counts ``workloads.MODELS``). ``w.inputs`` lists the
placeholders in creation order, the argument order of ``tex.build(tensors)``, so the
plain-API builds of ``run.tex_variants`` are served from the cache its cold build filled.

Semantics shared by all three formulations (what the checks hold tex to):

* batch norm in **training mode**: normalized by the batch's mean and biased variance over
  (N, H, W), eps 1e-5, then gamma/beta (``F.batch_norm(training=True)``; running
  statistics are not updated: they do not affect the outputs or gradients);
* GELU in the **erf** form, ``0.5 x (1 + erf(x / sqrt 2))`` (``F.gelu``'s default, BERT's);
* layer norm with BERT's eps 1e-12; ReLU6 is ``clip(x, 0, 6)``;
* ops topi does not have are written with ``tex.compute`` here: the depthwise convolution
  (``topi.nn.conv2d`` has no ``groups``) and the transposed convolution (no
  ``conv2d_transpose``; written as a gather with a stride-parity ``where=``), and GELU and
  training-mode batch norm are compositions of topi ops.

``forward_flops``/``gradient_flops`` count the multiply-adds of the convolutions and matrix
products as two FLOPs each (the embedding bag: one add per gathered or scattered element);
normalizations and elementwise ops are not counted, so GFLOP/s is a lower bound. The
backward counts a data gradient and a weight gradient per contraction (no data gradient
for a first layer whose input is not differentiated).
"""
from __future__ import annotations

import math
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import numpy as np

import tex
from tex import topi
from tex.ir.tensor import Tensor

from workloads import DTYPE, Workload, _finish, random_arrays

__all__ = ["LAYERS", "Layer", "conv2d_transpose", "depthwise_conv2d", "gelu",
           "batch_norm_train"]

BN_EPS = 1e-5
LN_EPS = 1e-12  # BERT's


@dataclass(frozen=True)
class Layer:
    """One model layer in tex, PyTorch and JAX, and how to draw its data."""

    build: Callable[[bool], Workload]
    torch_fn: Callable[[dict[str, Any]], Any]
    jax_fn: Callable[[dict[str, Any]], Any]
    fan_in: Callable[[Workload], dict[str, int]]  # weight name -> fan-in, for scaling
    post: Callable[[dict[str, np.ndarray]], None] | None = None  # fixes data in place

    def arrays(self, w: Workload, seed: int = 0) -> dict[str, np.ndarray]:
        """Standard-normal data, weights scaled by 1/sqrt(fan_in)."""
        a = random_arrays(w, seed)
        for name, fan in self.fan_in(w).items():
            a[name] = (a[name] / np.sqrt(fan)).astype(a[name].dtype)
        if self.post is not None:
            self.post(a)
        return a


def _ph(shape: tuple[int, ...], name: str) -> Tensor:
    return tex.placeholder(shape, name=name, dtype=DTYPE)


# ---------------------------------------------------------------------------------------
# building blocks (tex)


def batch_norm_train(x: Tensor, gamma: Tensor, beta: Tensor, eps: float = BN_EPS) -> Tensor:
    """Training-mode batch norm of NCHW ``x``: the batch's statistics over (N, H, W);
    topi.nn.batch_norm is the inference form (running statistics)."""
    c = x.shape[1]
    mean = topi.mean(x, axis=(0, 2, 3), keepdims=True)
    d = x - mean
    var = topi.mean(d * d, axis=(0, 2, 3), keepdims=True)
    return d * topi.rsqrt(var + eps) * topi.reshape(gamma, (c, 1, 1)) \
        + topi.reshape(beta, (c, 1, 1))


def gelu(x: Tensor) -> Tensor:
    """GELU, erf form (torch's default)."""
    return x * 0.5 * (topi.erf(x * (1.0 / math.sqrt(2.0))) + 1.0)


def depthwise_conv2d(x: Tensor, kernel: Tensor, stride: int, padding: int) -> Tensor:
    """``out[n, c, h, w] = sum_{ry, rx} pad(x)[n, c, h*s + ry, w*s + rx] * kernel[c, 0, ry,
    rx]``: a grouped convolution with one channel per group (torch's (C, 1, KH, KW) weight);
    topi.nn.conv2d has no ``groups``."""
    n, c, h, w = x.shape
    kh, kw = kernel.shape[2], kernel.shape[3]
    xp = topi.nn.pad(x, (0, 0, padding, padding)) if padding else x
    oh = (h + 2 * padding - kh) // stride + 1
    ow = (w + 2 * padding - kw) // stride + 1
    ry = tex.reduce_axis((0, kh), name="ry")
    rx = tex.reduce_axis((0, kw), name="rx")
    return tex.compute(
        (n, c, oh, ow),
        lambda b, ch, i, j: tex.sum(xp[b, ch, i * stride + ry, j * stride + rx]
                                    * kernel[ch, 0, ry, rx], axis=[ry, rx]),
        name="depthwise_conv2d")


def conv2d_transpose(x: Tensor, kernel: Tensor, stride: int, padding: int) -> Tensor:
    """Transposed convolution as torch's ``conv_transpose2d`` (weight (C_in, C_out, KH,
    KW)), written as a gather: ``out[n, o, y, x] = sum_{c, ky, kx} in[n, c, (y + p - ky) /
    s, (x + p - kx) / s] * W[c, o, ky, kx]`` over the taps where the division is exact and
    in range (a ``where=`` on the stride parity); topi has no conv2d_transpose."""
    n, ci, h, w = x.shape
    co, kh, kw = kernel.shape[1], kernel.shape[2], kernel.shape[3]
    oh = (h - 1) * stride - 2 * padding + kh
    ow = (w - 1) * stride - 2 * padding + kw
    rc = tex.reduce_axis((0, ci), name="rc")
    ry = tex.reduce_axis((0, kh), name="ry")
    rx = tex.reduce_axis((0, kw), name="rx")

    def body(b: Any, o: Any, i: Any, j: Any) -> Any:
        sy, sx = i + padding - ry, j + padding - rx
        iy, ix = sy // stride, sx // stride
        ok = tex.all(sy % stride == 0, sx % stride == 0, iy >= 0, iy < h, ix >= 0, ix < w)
        return tex.sum(x[b, rc, iy, ix] * kernel[rc, o, ry, rx], axis=[rc, ry, rx], where=ok)

    return tex.compute((n, co, oh, ow), body, name="conv2d_transpose")


def _bias(b: Tensor) -> Tensor:
    """A (C,) bias shaped to broadcast over NCHW."""
    return topi.reshape(b, (b.shape[0], 1, 1))


def _weights(*names: str) -> Callable[[Workload], dict[str, int]]:
    """Fan-ins of the named weights: the product of their shape but the first axis (a
    transposed convolution's weight is (C_in, C_out, ...): its fan-in is C_in*KH*KW...,
    close enough for scaling)."""
    def fan_in(w: Workload) -> dict[str, int]:
        shapes = {t.name: t.shape for t in w.inputs}
        return {n: int(np.prod(shapes[n][1:])) for n in names}
    return fan_in


# ---------------------------------------------------------------------------------------
# ResNet-18 basic block: relu(bn(conv(relu(bn(conv(x))))) + x), batch 8


def _resnet(size: int, channels: int) -> Callable[[bool], Workload]:
    def build(small: bool = False) -> Workload:
        n, c, hw = (2, 4, 5) if small else (8, channels, size)
        x = _ph((n, c, hw, hw), "x")
        w1, g1, b1 = _ph((c, c, 3, 3), "w1"), _ph((c,), "g1"), _ph((c,), "b1")
        w2, g2, b2 = _ph((c, c, 3, 3), "w2"), _ph((c,), "g2"), _ph((c,), "b2")
        h = topi.nn.relu(batch_norm_train(topi.nn.conv2d(x, w1, 1, 1), g1, b1))
        y = topi.nn.relu(batch_norm_train(topi.nn.conv2d(h, w2, 1, 1), g2, b2) + x)
        mac = n * c * hw * hw * c * 9  # one convolution
        # forward 2 convs; backward data and weight gradient of each
        inputs = [x, w1, g1, b1, w2, g2, b2]
        return _finish(f"resnet_{size}", inputs, inputs, y, 0, _no_ref, _no_ref, 4 * mac,
                       8 * mac)
    return build


def _t_resnet(t: dict) -> Any:
    import torch.nn.functional as F

    def bn(v: Any, g: Any, b: Any) -> Any:
        return F.batch_norm(v, None, None, g, b, training=True, eps=BN_EPS)

    h = F.relu(bn(F.conv2d(t["x"], t["w1"], padding=1), t["g1"], t["b1"]))
    return F.relu(bn(F.conv2d(h, t["w2"], padding=1), t["g2"], t["b2"]) + t["x"])


def _j_bn(v: Any, g: Any, b: Any, eps: float = BN_EPS) -> Any:
    import jax
    mean = v.mean(axis=(0, 2, 3), keepdims=True)
    var = ((v - mean) ** 2).mean(axis=(0, 2, 3), keepdims=True)
    return (v - mean) * jax.lax.rsqrt(var + eps) * g[:, None, None] + b[:, None, None]


def _j_conv(x: Any, w: Any, stride: int = 1, pad: int = 0, groups: int = 1,
            lhs_dilation: int = 1) -> Any:
    import jax
    return jax.lax.conv_general_dilated(
        x, w, window_strides=(stride, stride), padding=[(pad, pad), (pad, pad)],
        lhs_dilation=(lhs_dilation, lhs_dilation), feature_group_count=groups,
        dimension_numbers=("NCHW", "OIHW", "NCHW"))


def _j_resnet(t: dict) -> Any:
    import jax
    h = jax.nn.relu(_j_bn(_j_conv(t["x"], t["w1"], pad=1), t["g1"], t["b1"]))
    return jax.nn.relu(_j_bn(_j_conv(h, t["w2"], pad=1), t["g2"], t["b2"]) + t["x"])


# ---------------------------------------------------------------------------------------
# BERT-base encoder layer (post-LN): self-attention with 12 heads, residual + layer norm,
# GELU MLP 768 -> 3072 -> 768, residual + layer norm; batch 8, sequence 128


HEAD_DIM = 64  # BERT-base: 12 heads of 64; the small shapes keep 64 (2 heads)


def bert(small: bool = False) -> Workload:
    b, t, dm, ff = (2, 5, 128, 256) if small else (8, 128, 768, 3072)
    dh, heads = HEAD_DIM, dm // HEAD_DIM
    x = _ph((b, t, dm), "x")
    wq, wk, wv, wo = (_ph((dm, dm), nm) for nm in ("Wq", "Wk", "Wv", "Wo"))
    bq, bk, bv, bo = (_ph((dm,), nm) for nm in ("bq", "bk", "bv", "bo"))
    g1, be1, g2, be2 = (_ph((dm,), nm) for nm in ("ln1_g", "ln1_b", "ln2_g", "ln2_b"))
    w1, b1, w2, b2 = _ph((ff, dm), "W1"), _ph((ff,), "b1"), _ph((dm, ff), "W2"), _ph((dm,), "b2")
    tokens = topi.reshape(x, (b * t, dm))

    def split(m: Tensor) -> Tensor:  # (B*T, D) -> (B, h, T, d)
        return topi.transpose(topi.reshape(m, (b, t, heads, dh)), (0, 2, 1, 3))

    q, k, v = (split(topi.nn.dense(tokens, wm, bm)) for wm, bm in ((wq, bq), (wk, bk),
                                                                    (wv, bv)))
    scores = topi.matmul(q, topi.transpose(k, (0, 1, 3, 2))) * (1.0 / math.sqrt(dh))
    o = topi.matmul(topi.nn.softmax(scores, axis=-1), v)
    merged = topi.reshape(topi.transpose(o, (0, 2, 1, 3)), (b * t, dm))
    h1 = topi.nn.layer_norm(topi.nn.dense(merged, wo, bo) + tokens, g1, be1, epsilon=LN_EPS)
    mlp = topi.nn.dense(gelu(topi.nn.dense(h1, w1, b1)), w2, b2)
    y = topi.reshape(topi.nn.layer_norm(mlp + h1, g2, be2, epsilon=LN_EPS), (b, t, dm))
    m = b * t
    mac = 4 * m * dm * dm + 2 * m * dm * ff + 2 * b * heads * t * t * dh
    inputs = [x, wq, wk, wv, wo, bq, bk, bv, bo, g1, be1, g2, be2, w1, b1, w2, b2]
    return _finish("bert", inputs, inputs, y, 0, _no_ref, _no_ref, 2 * mac, 4 * mac)


def _t_bert(t: dict) -> Any:
    import torch
    import torch.nn.functional as F
    x = t["x"]
    b, s, dm = x.shape
    heads = dm // HEAD_DIM

    def split(m: Any) -> Any:
        return m.view(b, s, heads, HEAD_DIM).transpose(1, 2)

    q, k, v = (split(F.linear(x, t[f"W{c}"], t[f"b{c}"])) for c in "qkv")
    p = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(HEAD_DIM), dim=-1)
    merged = (p @ v).transpose(1, 2).reshape(b, s, dm)
    h1 = F.layer_norm(F.linear(merged, t["Wo"], t["bo"]) + x, (dm,), t["ln1_g"], t["ln1_b"],
                      eps=LN_EPS)
    mlp = F.linear(F.gelu(F.linear(h1, t["W1"], t["b1"])), t["W2"], t["b2"])
    return F.layer_norm(mlp + h1, (dm,), t["ln2_g"], t["ln2_b"], eps=LN_EPS)


def _j_ln(x: Any, g: Any, b: Any, eps: float) -> Any:
    import jax
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + eps) * g + b


def _j_bert(t: dict) -> Any:
    import jax
    x = t["x"]
    b, s, dm = x.shape
    heads = dm // HEAD_DIM

    def split(m: Any) -> Any:
        return m.reshape(b, s, heads, HEAD_DIM).transpose(0, 2, 1, 3)

    q, k, v = (split(x @ t[f"W{c}"].T + t[f"b{c}"]) for c in "qkv")
    p = jax.nn.softmax(q @ k.transpose(0, 1, 3, 2) / math.sqrt(HEAD_DIM), axis=-1)
    merged = (p @ v).transpose(0, 2, 1, 3).reshape(b, s, dm)
    h1 = _j_ln(merged @ t["Wo"].T + t["bo"] + x, t["ln1_g"], t["ln1_b"], LN_EPS)
    mlp = jax.nn.gelu(h1 @ t["W1"].T + t["b1"], approximate=False) @ t["W2"].T + t["b2"]
    return _j_ln(mlp + h1, t["ln2_g"], t["ln2_b"], LN_EPS)


def _bert_post(a: dict[str, np.ndarray]) -> None:
    """Layer-norm gains around 1, as trained models have them."""
    for name in ("ln1_g", "ln2_g"):
        a[name] = (1.0 + 0.1 * a[name]).astype(a[name].dtype)


# ---------------------------------------------------------------------------------------
# MobileNet-v2 inverted residual at 56x56: 1x1 expand (24 -> 144) + BN + ReLU6, 3x3
# depthwise + BN + ReLU6, 1x1 project (144 -> 24) + BN, plus the input; batch 8


def mobilenet_v2(small: bool = False) -> Workload:
    n, c, e, hw = (2, 3, 6, 5) if small else (8, 24, 144, 56)
    x = _ph((n, c, hw, hw), "x")
    we, wd, wp = _ph((e, c, 1, 1), "w_expand"), _ph((e, 1, 3, 3), "w_dw"), \
        _ph((c, e, 1, 1), "w_project")
    bn = [(_ph((ch,), f"g{i}"), _ph((ch,), f"b{i}")) for i, ch in enumerate((e, e, c))]
    h = topi.clip(batch_norm_train(topi.nn.conv2d(x, we, 1, 0), *bn[0]), 0.0, 6.0)
    h = topi.clip(batch_norm_train(depthwise_conv2d(h, wd, 1, 1), *bn[1]), 0.0, 6.0)
    y = batch_norm_train(topi.nn.conv2d(h, wp, 1, 0), *bn[2]) + x
    p = n * hw * hw
    mac = p * e * c + p * e * 9 + p * c * e
    inputs = [x, we, wd, wp, *bn[0], *bn[1], *bn[2]]
    return _finish("mobilenet_v2", inputs, inputs, y, 0, _no_ref, _no_ref, 2 * mac, 4 * mac)


def _t_mobilenet(t: dict) -> Any:
    import torch.nn.functional as F

    def bn(v: Any, i: int) -> Any:
        return F.batch_norm(v, None, None, t[f"g{i}"], t[f"b{i}"], training=True, eps=BN_EPS)

    e = t["w_dw"].shape[0]
    h = F.relu6(bn(F.conv2d(t["x"], t["w_expand"]), 0))
    h = F.relu6(bn(F.conv2d(h, t["w_dw"], padding=1, groups=e), 1))
    return bn(F.conv2d(h, t["w_project"]), 2) + t["x"]


def _j_mobilenet(t: dict) -> Any:
    import jax.numpy as jnp
    e = t["w_dw"].shape[0]
    h = jnp.clip(_j_bn(_j_conv(t["x"], t["w_expand"]), t["g0"], t["b0"]), 0.0, 6.0)
    h = jnp.clip(_j_bn(_j_conv(h, t["w_dw"], pad=1, groups=e), t["g1"], t["b1"]), 0.0, 6.0)
    return _j_bn(_j_conv(h, t["w_project"]), t["g2"], t["b2"]) + t["x"]


# ---------------------------------------------------------------------------------------
# LSTM step, hidden 512 (input 512, batch 64): gates i, f, g, o (torch's order); the output
# is (h', c') side by side


def lstm(small: bool = False) -> Workload:
    bsz, hid = (3, 4) if small else (64, 512)
    x, h, c = _ph((bsz, hid), "x"), _ph((bsz, hid), "h"), _ph((bsz, hid), "c")
    w_ih, w_hh = _ph((4 * hid, hid), "w_ih"), _ph((4 * hid, hid), "w_hh")
    b_ih, b_hh = _ph((4 * hid,), "b_ih"), _ph((4 * hid,), "b_hh")
    gates = topi.nn.dense(x, w_ih, b_ih) + topi.nn.dense(h, w_hh, b_hh)
    i, f, g, o = topi.split(gates, 4, axis=1)
    c2 = topi.sigmoid(f) * c + topi.sigmoid(i) * topi.tanh(g)
    h2 = topi.sigmoid(o) * topi.tanh(c2)
    y = topi.concatenate([h2, c2], axis=1)
    mac = 2 * bsz * 4 * hid * hid
    inputs = [x, h, c, w_ih, w_hh, b_ih, b_hh]
    return _finish("lstm", inputs, inputs, y, 0, _no_ref, _no_ref, 2 * mac, 4 * mac)


def _t_lstm(t: dict) -> Any:
    import torch
    # what nn.LSTMCell calls: PyTorch's fused cell
    h2, c2 = torch._VF.lstm_cell(t["x"], (t["h"], t["c"]), t["w_ih"], t["w_hh"], t["b_ih"],
                                 t["b_hh"])
    return torch.cat([h2, c2], dim=1)


def _j_lstm(t: dict) -> Any:
    import jax
    import jax.numpy as jnp
    gates = t["x"] @ t["w_ih"].T + t["b_ih"] + t["h"] @ t["w_hh"].T + t["b_hh"]
    i, f, g, o = jnp.split(gates, 4, axis=1)
    c2 = jax.nn.sigmoid(f) * t["c"] + jax.nn.sigmoid(i) * jnp.tanh(g)
    return jnp.concatenate([jax.nn.sigmoid(o) * jnp.tanh(c2), c2], axis=1)


def _lstm_fan_in(w: Workload) -> dict[str, int]:
    hid = w.inputs[0].shape[1]
    return {"w_ih": hid, "w_hh": hid}


# ---------------------------------------------------------------------------------------
# UNet up block: transposed conv 2x2 stride 2 (128 -> 64 channels, 28 -> 56), concatenated
# with the skip connection (64 channels at 56x56), conv 3x3 (128 -> 64) + bias + relu; batch 8


def unet_up(small: bool = False) -> Workload:
    n, ci, co, hw = (2, 4, 2, 3) if small else (8, 128, 64, 28)
    x, skip = _ph((n, ci, hw, hw), "x"), _ph((n, co, 2 * hw, 2 * hw), "skip")
    wt, bt = _ph((ci, co, 2, 2), "w_up"), _ph((co,), "b_up")
    wc, bc = _ph((co, 2 * co, 3, 3), "w_conv"), _ph((co,), "b_conv")
    up = conv2d_transpose(x, wt, 2, 0) + _bias(bt)
    cat = topi.concatenate([up, skip], axis=1)
    y = topi.nn.relu(topi.nn.conv2d(cat, wc, 1, 1) + _bias(bc))
    p = n * (2 * hw) ** 2  # output points per channel
    mac = p * co * ci + p * co * 2 * co * 9  # transposed conv (one tap per point), conv
    inputs = [x, skip, wt, bt, wc, bc]
    return _finish("unet_up", inputs, inputs, y, 0, _no_ref, _no_ref, 2 * mac, 4 * mac)


def _t_unet(t: dict) -> Any:
    import torch
    import torch.nn.functional as F
    up = F.conv_transpose2d(t["x"], t["w_up"], t["b_up"], stride=2)
    return F.relu(F.conv2d(torch.cat([up, t["skip"]], dim=1), t["w_conv"], t["b_conv"],
                           padding=1))


def _j_unet(t: dict) -> Any:
    import jax
    import jax.numpy as jnp
    # conv_transpose2d(x, W, stride 2, k 2) = conv of x dilated by 2, padded by k - 1, with
    # the kernel flipped and its in/out axes swapped
    wt = jnp.flip(t["w_up"], axis=(2, 3)).transpose(1, 0, 2, 3)
    up = _j_conv(t["x"], wt, pad=1, lhs_dilation=2) + t["b_up"][:, None, None]
    cat = jnp.concatenate([up, t["skip"]], axis=1)
    return jax.nn.relu(_j_conv(cat, t["w_conv"], pad=1) + t["b_conv"][:, None, None])


def _unet_fan_in(w: Workload) -> dict[str, int]:
    shapes = {t.name: t.shape for t in w.inputs}
    ci, _, kh, kw = shapes["w_up"]
    return {"w_up": ci * kh * kw, "w_conv": int(np.prod(shapes["w_conv"][1:]))}


# ---------------------------------------------------------------------------------------
# embedding bag: a 30,000 x 256 table, 4,096 indices in 256 bags of 16, summed per bag


def embedding_bag(small: bool = False) -> Workload:
    vocab, dm, bags, per_bag = (20, 6, 4, 3) if small else (30_000, 256, 256, 16)
    table = _ph((vocab, dm), "W")
    index = tex.placeholder((bags, per_bag), name="I", dtype="int32")
    y = topi.sum(topi.take(table, index, axis=0), axis=1)
    adds = bags * per_bag * dm
    return _finish("embedding_bag", [table, index], [table], y, 0, _no_ref, _no_ref, adds,
                   adds, int_ranges={"I": vocab})


def _t_embedding_bag(t: dict) -> Any:
    import torch.nn.functional as F
    return F.embedding_bag(t["I"], t["W"], mode="sum")


def _j_embedding_bag(t: dict) -> Any:
    return t["W"][t["I"]].sum(axis=1)


# ---------------------------------------------------------------------------------------
# 2-layer CNN on MNIST shapes: conv 3x3 (1 -> 32) + relu + max pool 2, conv 3x3 (32 -> 64) +
# relu + max pool 2, dense 3136 -> 10, cross-entropy with one-hot targets; batch 64;
# gradients of the weights


def mnist_cnn(small: bool = False) -> Workload:
    n, c1, c2, hw, ncls = (2, 2, 3, 8, 4) if small else (64, 32, 64, 28, 10)
    feat = c2 * (hw // 4) ** 2
    x, targets = _ph((n, 1, hw, hw), "x"), _ph((n, ncls), "targets")
    w1, b1 = _ph((c1, 1, 3, 3), "w1"), _ph((c1,), "b1")
    w2, b2 = _ph((c2, c1, 3, 3), "w2"), _ph((c2,), "b2")
    fw, fb = _ph((ncls, feat), "fw"), _ph((ncls,), "fb")
    h = topi.nn.pool2d(topi.nn.relu(topi.nn.conv2d(x, w1, 1, 1) + _bias(b1)), (2, 2), (2, 2),
                       1, 0, pool_type="max")
    h = topi.nn.pool2d(topi.nn.relu(topi.nn.conv2d(h, w2, 1, 1) + _bias(b2)), (2, 2), (2, 2),
                       1, 0, pool_type="max")
    logits = topi.nn.dense(topi.nn.flatten(h), fw, fb)
    y = topi.nn.cross_entropy_with_logits(logits, targets)
    mac1, mac2 = n * c1 * hw * hw * 9, n * c2 * (hw // 2) ** 2 * c1 * 9
    macd = n * ncls * feat
    # backward: conv 1 weight gradient only (x is not differentiated)
    return _finish("mnist_cnn", [x, targets, w1, b1, w2, b2, fw, fb],
                   [w1, b1, w2, b2, fw, fb], y, 0, _no_ref, _no_ref,
                   2 * (mac1 + mac2 + macd), 2 * (mac1 + 2 * mac2 + 2 * macd))


def _t_mnist(t: dict) -> Any:
    import torch.nn.functional as F
    h = F.max_pool2d(F.relu(F.conv2d(t["x"], t["w1"], t["b1"], padding=1)), 2)
    h = F.max_pool2d(F.relu(F.conv2d(h, t["w2"], t["b2"], padding=1)), 2)
    logits = F.linear(h.flatten(1), t["fw"], t["fb"])
    return F.cross_entropy(logits, t["targets"])  # probability targets: mean over the batch


def _j_mnist(t: dict) -> Any:
    import jax
    import jax.numpy as jnp

    def pool(v: Any) -> Any:
        return jax.lax.reduce_window(v, -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                     "VALID")

    h = pool(jax.nn.relu(_j_conv(t["x"], t["w1"], pad=1) + t["b1"][:, None, None]))
    h = pool(jax.nn.relu(_j_conv(h, t["w2"], pad=1) + t["b2"][:, None, None]))
    logits = h.reshape(h.shape[0], -1) @ t["fw"].T + t["fb"]
    return -(jax.nn.log_softmax(logits, axis=-1) * t["targets"]).sum() / logits.shape[0]


def _mnist_post(a: dict[str, np.ndarray]) -> None:
    """One-hot targets (random classes)."""
    n, ncls = a["targets"].shape
    labels = np.random.default_rng(1).integers(0, ncls, n)
    a["targets"] = np.eye(ncls, dtype=a["targets"].dtype)[labels]


# ---------------------------------------------------------------------------------------
# the float64 PyTorch reference


def _no_ref(a: Any) -> Any:  # replaced by with_reference
    raise NotImplementedError("the reference is attached by with_reference")


def with_reference(w: Workload, torch_fn: Callable[[dict[str, Any]], Any]) -> Workload:
    """``w`` with ``numpy_forward``/``numpy_grad`` computed by PyTorch eager in the arrays'
    dtype (pass float64 arrays): the forward, and ``autograd.grad`` of ``sum(forward * H)``
    with respect to ``w.wrt``."""
    import torch

    names = [t.name for t in w.inputs]
    wrt = [t.name for t in w.wrt]

    def tensors(a: dict[str, np.ndarray], grad: bool) -> dict[str, Any]:
        return {n: torch.from_numpy(np.ascontiguousarray(a[n]))
                .requires_grad_(grad and n in wrt) for n in names}

    def forward(a: dict[str, np.ndarray]) -> np.ndarray:
        with torch.no_grad():
            return torch_fn(tensors(a, False)).numpy()

    def grads(a: dict[str, np.ndarray]) -> list[np.ndarray]:
        t = tensors(a, True)
        loss = (torch_fn(t) * torch.from_numpy(np.asarray(a["H"]))).sum()
        return [g.numpy() for g in torch.autograd.grad(loss, [t[n] for n in wrt])]

    w.numpy_forward, w.numpy_grad = forward, grads
    return w


LAYERS: dict[str, Layer] = {
    **{f"resnet_{size}": Layer(_resnet(size, ch), _t_resnet, _j_resnet, _weights("w1", "w2"))
       for size, ch in ((56, 64), (28, 128), (14, 256), (7, 512))},
    "bert": Layer(bert, _t_bert, _j_bert, _weights("Wq", "Wk", "Wv", "Wo", "W1", "W2"),
                  _bert_post),
    "mobilenet_v2": Layer(mobilenet_v2, _t_mobilenet, _j_mobilenet,
                          _weights("w_expand", "w_dw", "w_project")),
    "lstm": Layer(lstm, _t_lstm, _j_lstm, _lstm_fan_in),
    "unet_up": Layer(unet_up, _t_unet, _j_unet, _unet_fan_in),
    "embedding_bag": Layer(embedding_bag, _t_embedding_bag, _j_embedding_bag,
                           lambda w: {}),
    "mnist_cnn": Layer(mnist_cnn, _t_mnist, _j_mnist, _weights("w1", "w2", "fw"),
                       _mnist_post),
}
