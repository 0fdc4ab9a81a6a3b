"""Cross-check of the vectorized interpreter against a naive one-element-at-a-time
interpreter written here (plain Python over the IR, semantics from tex.ir.semantics).

The two share only the scalar semantics table; the grid broadcasting, masking of guarded
reads and chunked reductions of ``evaluate`` are checked against the obvious loops.
"""
import itertools

import numpy as np
import pytest

import tex
from tex import topi
from tex.ir import (
    Binary,
    Cast,
    Compare,
    ComputeOp,
    Const,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
    topo_sort_ops,
)
from tex.ir.semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast


def _scalar(value, dtype):
    return np.asarray(value, dtype=dtype.numpy)


def _eval_expr(e, env, values):
    """One element: plain recursion (test programs are shallow)."""
    match e:
        case Const(v, d):
            return _scalar(v, d)
        case Var():
            return env[e]
        case TensorRead(t, idx):
            point = tuple(int(_eval_expr(i, env, values)) for i in idx)
            for d, (p, n) in enumerate(zip(point, t.shape)):
                assert 0 <= p < n, f"read {e} out of bounds in dim {d}"
            return values[t][point]
        case Unary(op, a):
            return NUMPY_UNARY[op](_eval_expr(a, env, values))
        case Binary(op, a, b) | Compare(op, a, b):
            return NUMPY_BINARY[op](_eval_expr(a, env, values), _eval_expr(b, env, values))
        case Select(c, a, b):  # only the chosen branch: guarded reads stay in bounds
            chosen = a if bool(_eval_expr(c, env, values)) else b
            return _eval_expr(chosen, env, values)
        case Cast(d, a):
            return numpy_cast(_eval_expr(a, env, values), d.numpy)
        case Reduce():
            return _eval_reduce(e, env, values)
    raise TypeError(type(e))


def _eval_reduce(r, env, values):
    comb = r.combiner
    if r.init:
        acc = [_eval_expr(i, env, values) for i in r.init]
    else:
        acc = [_eval_expr(i, env, values) for i in comb.identity]
    ranges = [range(iv.dom.min, iv.dom.stop) for iv in r.axis]
    for point in itertools.product(*ranges):
        inner = dict(env)
        inner.update({iv.var: _scalar(p, iv.var.dtype) for iv, p in zip(r.axis, point)})
        if not bool(_eval_expr(r.condition, inner, values)):
            continue
        new = [_eval_expr(s, inner, values) for s in r.source]
        scope = dict(inner)
        scope.update(zip(comb.lhs, acc))
        scope.update(zip(comb.rhs, new))
        acc = [_eval_expr(res, scope, values) for res in comb.result]
    return acc[r.value_index]


def pointwise(tensors, feed):
    values = dict(feed)
    with np.errstate(all="ignore"):
        for op in topo_sort_ops(tensors):
            if not isinstance(op, ComputeOp):
                continue
            outs = [np.zeros(t.shape, t.dtype.numpy) for t in op.outputs]
            for point in itertools.product(*(range(n) for n in op.shape)):
                env = {iv.var: _scalar(p, iv.var.dtype) for iv, p in zip(op.axis, point)}
                for t, body in zip(op.outputs, op.body):
                    outs[t.value_index][point] = _eval_expr(body, env, values)
            values.update(zip(op.outputs, outs))
    return [values[t] for t in tensors]


def _programs():
    rng = np.random.default_rng(7)
    d = tex.placeholder((1, 2, 5, 5), name="d")
    k = tex.placeholder((2, 2, 3, 3), name="k")
    x = tex.placeholder((3, 4), name="x")
    g = tex.placeholder((4,), name="g")
    b = tex.placeholder((4,), name="b")
    idx = tex.placeholder((5,), name="idx", dtype="int32")
    feed = {d: rng.standard_normal(d.shape).astype("float32"),
            k: rng.standard_normal(k.shape).astype("float32"),
            x: rng.standard_normal(x.shape).astype("float32"),
            g: rng.standard_normal(g.shape).astype("float32"),
            b: rng.standard_normal(b.shape).astype("float32"),
            idx: np.array([0, 3, -2, 7, 1], dtype="int32")}
    r = tex.reduce_axis((0, 4), name="r")
    programs = {
        "conv_pad_stride": topi.nn.conv2d(d, k, 2, (1, 2, 0, 1)),
        "conv_dilated": topi.nn.conv2d(d, k, 1, 2, dilation=2),
        "maxpool_ceil": topi.nn.pool2d(d, (2, 2), (2, 2), (1, 1), (1, 1, 0, 0), "max",
                                       ceil_mode=True),
        "avgpool_nopad_count": topi.nn.pool2d(d, (3, 3), (2, 2), (1, 1), 1, "avg",
                                              count_include_pad=False),
        "softmax": topi.nn.softmax(x, axis=0),
        "layer_norm": topi.nn.layer_norm(x, g, b),
        "argmax": topi.argmax(x, axis=1),
        "take_clip": topi.take(x, idx, axis=1),
        "reshape_concat": topi.concatenate([topi.reshape(x, (4, 3)), topi.transpose(x)], 1),
        "einsum": topi.einsum("ij,j->i", x, g),
        "masked_max_init": tex.compute((3,), lambda i: tex.max(
            x[i, r], axis=r, where=r > i, init=0.25), name="mm"),
        "logsumexp": topi.logsumexp(x, axis=1, keepdims=True),
        "flatten_pad": topi.nn.flatten(topi.nn.pad(d, (0, 0, 1, 0), (0, 1, 0, 2), 3.0)),
    }
    return programs, feed


PROGRAMS, FEED = _programs()


@pytest.mark.parametrize("name", sorted(PROGRAMS))
def test_evaluate_matches_pointwise(name):
    t = PROGRAMS[name]
    (expected,) = pointwise([t], FEED)
    got = tex.testing.evaluate(t, FEED)
    assert got.dtype == expected.dtype and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=1e-6)
