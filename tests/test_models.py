"""Small versions of real models (issue 22, item 5): each gradient checked against finite
differences and its iteration count bounded by the hand-written gradient's.

The bounds are ratios to the forward's iterations (``iteration_count``, what the
unscheduled programs do): a hand-written backward pass costs a small multiple of the
forward (two matrix products per matrix product, a few passes per normalization).
Reshape, flatten and the head split/merge of attention must cost nothing beyond one read
per element; a group norm through reshape cost 1.5e17 iterations before (issue 22).
"""
from __future__ import annotations

import math

import numpy as np
import pytest

import tex
from tex import topi
from tex.autodiff import iteration_count
from tex.testing import check_grad


def group_norm(x: tex.Tensor, G: int, eps: float = 1e-5) -> tex.Tensor:  # noqa: N803
    N, C, H, W = x.shape
    xr = topi.reshape(x, (N, G, C // G, H, W))
    mean = topi.mean(xr, axis=(2, 3, 4), keepdims=True)
    d = xr - mean
    var = topi.mean(d * d, axis=(2, 3, 4), keepdims=True)
    return topi.reshape(d / topi.sqrt(var + eps), (N, C, H, W))

def attention(q: tex.Tensor, k: tex.Tensor, v: tex.Tensor, heads: int) -> tex.Tensor:
    B, T, D = q.shape
    d = D // heads
    def split(t: tex.Tensor) -> tex.Tensor:  # (B, T, D) -> (B, h, T, d)
        return topi.transpose(topi.reshape(t, (B, T, heads, d)), (0, 2, 1, 3))
    qs, ks, vs = split(q), split(k), split(v)
    scores = topi.matmul(qs, topi.transpose(ks, (0, 1, 3, 2))) * (1.0 / math.sqrt(d))
    p = topi.nn.softmax(scores, axis=-1)
    o = topi.matmul(p, vs)  # (B, h, T, d)
    return topi.reshape(topi.transpose(o, (0, 2, 1, 3)), (B, T, D))

def cnn(x: tex.Tensor, w: tex.Tensor, fw: tex.Tensor) -> tex.Tensor:
    y = topi.nn.relu(topi.nn.conv2d(x, w, 1, 1))
    return topi.nn.dense(topi.nn.flatten(y), fw)

def embedding_bag(W: tex.Tensor, index: tex.Tensor) -> tex.Tensor:  # noqa: N803
    e = topi.take(W, index, axis=0)  # (bags, per_bag, D)
    return topi.sum(e, axis=1)

def product_pool(x: tex.Tensor) -> tex.Tensor:
    N, C, H, W = x.shape
    r = topi.reshape(x, (N, C, H // 2, 2, W // 2, 2))
    return topi.prod(r, axis=(3, 5))


def _group_norm():
    x = tex.placeholder((2, 8, 3, 4), "float64", name="x")
    return group_norm(x, 4), [x], {}


def _attention():
    q, k, v = (tex.placeholder((2, 5, 8), "float64", name=n) for n in "qkv")
    return attention(q, k, v, 2), [q, k, v], {}


def _cnn():
    x = tex.placeholder((2, 3, 6, 6), "float64", name="x")
    w = tex.placeholder((4, 3, 3, 3), "float64", name="w")
    fw = tex.placeholder((5, 4 * 36), "float64", name="fw")
    return cnn(x, w, fw), [x, w, fw], {}


def _embedding_bag():
    W = tex.placeholder((20, 6), "float64", name="W")
    Ix = tex.placeholder((4, 3), "int32", name="I")
    return embedding_bag(W, Ix), [W], {Ix: np.array([[0, 3, 3], [19, 1, 2], [5, 5, 5],
                                                    [7, 0, 11]], np.int32)}


def _product_pool():
    x = tex.placeholder((2, 3, 4, 6), "float64", name="x")
    return product_pool(x), [x], {}


# model -> (builder, gradient iterations / forward iterations at most: the hand-written
# backward's multiple)
MODELS = {
    "group_norm": (_group_norm, 2.5),
    "attention": (_attention, 2.5),
    "cnn_flatten_dense": (_cnn, 3.0),
    "embedding_bag": (_embedding_bag, 2.0),
    "product_pool": (_product_pool, 2.0),
}


@pytest.mark.parametrize("model", list(MODELS))
def test_model_gradient(model: str) -> None:
    build, ratio = MODELS[model]
    out, wrt, fixed = build()
    head = tex.placeholder(out.shape, out.dtype, name="H")
    loss = topi.sum(out * head)
    grads = tex.differentiate(loss, wrt)
    fwd, bwd = iteration_count(out), iteration_count(*grads)
    assert bwd <= ratio * fwd, (model, fwd, bwd)
    rng = np.random.default_rng(len(model))
    data = {t: rng.uniform(0.5, 1.5, t.shape) for t in wrt}
    data[head] = rng.standard_normal(out.shape)
    check_grad(loss, wrt, data={**data, **fixed}, seed=7)
