"""TVM's test list: the programs TVM's autodiff published static iteration counts for, at
exactly those shapes, for ``differentiate.py``'s tex / TVM column.

The counts come from the test file of TVM's autodiff fork (``tvm.differentiate``,
``tests/python/unittest/test_pass_autodiff.py``, the ``perf=(iterations, multiplications,
memory)`` tuples checked by ``tvm.testing.estimate_performance``). Each program is
differentiated as TVM's ``check_grad`` does it: ``differentiate(out, inputs,
topi.full_like(out, 1.0))``, a constant ones head. The fork's test exists in two versions:

* ``tvm_iterations`` (used for the ratio): the version ``AUTODIFF_NOTES.md`` (sections 3
  and 4) quotes, sergei-grechanik/tvm @ 881e9c39 (autodiff-dev), whose ``check_grad`` also
  applies ``RemoveUnusedDimsRecursively`` to the gradients: that shrinks the ones head to
  a 0-d tensor (the "+1" of 10 001) and removes other axes a constant head leaves unused.
  These are TVM's lowest published counts.
* ``tvm_iterations_v1``: the earlier version (sergei-grechanik/tvm @ 17c779f2), without
  that pass: the head counts as many points as the output (10 100 for ``A[i,j] +
  A[j,i]``), the conv net 194 865 instead of 181 906. Its ``test_free_vars`` repeats two
  of the 10x10 programs with a symbolic extent ``m`` bound to 10 (10 200 and 11 110
  there); symbolic shapes make those other programs, not used here.

A case carries two tex counts: with the ones head (``gradient_iterations``, TVM's measure:
tex, like TVM's extra pass, does not iterate over axes a constant head makes redundant),
and with a placeholder head ``H`` of the output's shape (``gradient_iterations_head``:
the general vector-Jacobian product). The hand-written count (``handwritten_iterations``,
``workloads.py``'s conventions) is for a general head, so ``tex / hand`` uses the second
and ``tex / TVM`` the first.

``numpy_forward(arrays)`` and ``numpy_grad(arrays)`` are NumPy references for the ones
head (``arrays``: placeholder names to arrays; no ``"H"``), used by ``differentiate.py
--quick`` to check the gradients tex produced with the ones head.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, field

import numpy as np

import tex
from tex import topi
from tex.ir.tensor import Tensor

from workloads import _conv_numpy, _gather_iterations, _out_extent

__all__ = ["CASES", "TvmCase"]

DTYPE = "float32"
Arrays = Mapping[str, np.ndarray]


@dataclass
class TvmCase:
    """One program of TVM's test list; its ``head`` is TVM's ``topi.full_like(out, 1.0)``."""

    name: str
    program: str
    inputs: list[Tensor]  # every placeholder, differentiated or not
    wrt: list[Tensor]
    forward: Tensor
    head: Tensor
    handwritten_iterations: int  # for a general (placeholder) head
    tvm_iterations: int  # autodiff-dev version (AUTODIFF_NOTES.md)
    tvm_iterations_v1: int  # the earlier version
    numpy_forward: Callable[[Arrays], np.ndarray] = field(repr=False)
    numpy_grad: Callable[[Arrays], list[np.ndarray]] = field(repr=False)
    int_ranges: Mapping[str, int] = field(default_factory=dict)

    @property
    def placeholders(self) -> list[Tensor]:
        return list(self.inputs)


def _ph(shape: tuple[int, ...], name: str) -> Tensor:
    return tex.placeholder(shape, name=name, dtype=DTYPE)


def _case(name: str, program: str, inputs: list[Tensor], wrt: list[Tensor], out: Tensor,
          hand: int, tvm: int, tvm_v1: int, fwd: Callable[[Arrays], np.ndarray],
          grad: Callable[[Arrays], list[np.ndarray]]) -> TvmCase:
    return TvmCase(name, program, inputs, wrt, out, topi.full_like(out, 1.0), int(hand), tvm,
                   tvm_v1, fwd, grad)


# ---------------------------------------------------------------------------------------
# test_autodiff: 10x10 programs


def transpose_add() -> TvmCase:
    a = _ph((10, 10), "A")
    b = tex.compute((10, 10), lambda i, j: a[i, j] + a[j, i], name="B")
    # dA = H + H^T: 100
    return _case("tvm_transpose_add", "B[i,j] = A[i,j] + A[j,i]", [a], [a], b, 100,
                 10_001, 10_100, lambda x: x["A"] + x["A"].T,
                 lambda x: [np.full((10, 10), 2.0)])


def sum_of_products() -> TvmCase:
    a = _ph((10, 10), "A")
    k = tex.reduce_axis((0, 10), name="k")
    b = tex.compute((10,), lambda i: tex.sum(a[i, k] * a[k, i], axis=k), name="B")
    # dA[p, q] = (H[p] + H[q]) * A[q, p]: 100
    return _case("tvm_sum_products", "B[i] = sum_k A[i,k] A[k,i]", [a], [a], b, 100,
                 11_001, 11_010, lambda x: np.einsum("ik,ki->i", x["A"], x["A"]),
                 lambda x: [2.0 * x["A"].T])


def max_of_products() -> TvmCase:
    a = _ph((10, 10), "A")
    k = tex.reduce_axis((0, 10), name="k")
    b = tex.compute((10, 10), lambda i, j: tex.max(a[i, k] * a[k, j] + 5, axis=k), name="B")
    # the argmax K[i, j] over k: 1 000; dA zeroed (100), then per (i, j) two scatter updates,
    # H[i,j] * A[K,j] at (i, K) and H[i,j] * A[i,K] at (K, j): 200
    hand = 1_000 + 100 + 200

    def prods(x: Arrays) -> np.ndarray:  # [i, j, k] = A[i,k] * A[k,j]
        return np.einsum("ik,kj->ijk", x["A"], x["A"])

    def grad(x: Arrays) -> list[np.ndarray]:
        arr = x["A"]
        first = prods(x).argmax(axis=-1)  # the first maximum wins, as in tex
        i, j = np.indices((10, 10))
        da = np.zeros_like(arr)
        np.add.at(da, (i, first), arr[first, j])
        np.add.at(da, (first, j), arr[i, first])
        return [da]

    return _case("tvm_max_products", "B[i,j] = max_k A[i,k] A[k,j] + 5", [a], [a], b, hand,
                 110_001, 110_100, lambda x: prods(x).max(axis=-1) + 5, grad)


# ---------------------------------------------------------------------------------------
# test_stride_dilation: conv2d X(1,2,10,10) W(2,2,k,k) pad 0, and max pool, no pad

# (kernel, stride, dilation) -> (autodiff-dev, earlier) iterations, in the test's order
_CONV_TVM = {
    (1, 1, 1): (1_001, 1_404), (1, 2, 1): (505, 928), (1, 3, 1): (469, 932),
    (1, 1, 2): (1_001, 1_404), (1, 2, 2): (505, 928), (1, 3, 2): (469, 932),
    (1, 1, 3): (1_001, 1_404), (1, 2, 3): (505, 928), (1, 3, 3): (469, 932),
    (2, 1, 1): (3_097, 3_922), (2, 2, 1): (1_001, 1_650), (2, 3, 1): (561, 1_146),
    (2, 1, 2): (2_825, 3_500), (2, 2, 2): (1_557, 3_408), (2, 3, 2): (689, 2_254),
    (2, 1, 3): (2_585, 3_138), (2, 2, 3): (913, 3_816), (2, 3, 3): (1_121, 3_834),
    (3, 1, 1): (6_105, 7_420), (3, 2, 1): (2_273, 3_888), (3, 3, 1): (1_049, 1_552),
    (3, 1, 2): (5_097, 5_916), (3, 2, 2): (1_625, 6_736), (3, 3, 2): (689, 2_672),
    (3, 1, 3): (2_377, 2_896), (3, 2, 3): (689, 2_280), (3, 3, 3): (801, 2_224),
}

# (kernel, stride) -> (autodiff-dev, earlier) iterations
_POOL_TVM = {
    (1, 1): (200, 200), (1, 2): (201, 412), (1, 3): (201, 232),
    (2, 1): (4_001, 4_162), (2, 2): (1_001, 1_050), (2, 3): (785, 858),
    (3, 1): (18_001, 18_128), (3, 2): (6_681, 6_712), (3, 3): (1_821, 1_838),
}

_X_SHAPE = (1, 2, 10, 10)


def conv_case(ksize: int, stride: int, dilation: int) -> TvmCase:
    n, c, h, w = _X_SHAPE
    o = 2
    x, wt = _ph(_X_SHAPE, "data"), _ph((o, c, ksize, ksize), "kernel")
    y = topi.nn.conv2d(x, wt, stride, 0, dilation)
    span = (ksize - 1) * dilation + 1
    oh, ow = _out_extent(h, span, stride, 0), _out_extent(w, span, stride, 0)
    assert y.shape == (n, o, oh, ow), y.shape
    # dkernel: the forward's multiply-adds, O*C*K*K * N*OH*OW
    # ddata: the polyphase gather, N*C * (per phase pair: points x O*taps, a tapless point
    #   written once): tap ky is in phase (ky * dilation) % stride, and a phase's taps are
    #   capped at those that can reach one point (workloads._phases)
    hand = (o * c * ksize * ksize * n * oh * ow
            + n * c * _gather_iterations(h, w, ksize, ksize, stride, 0, dilation, per_tap=o,
                                         out_hw=(oh, ow)))
    fwd, grad_h = _conv_numpy(stride, 0, dilation)
    tvm, tvm_v1 = _CONV_TVM[ksize, stride, dilation]
    return _case(f"tvm_conv_k{ksize}_s{stride}_d{dilation}",
                 f"conv2d X{_X_SHAPE} W(2,2,{ksize},{ksize}) stride {stride} dilation "
                 f"{dilation}", [x, wt], [x, wt], y, hand, tvm, tvm_v1, fwd,
                 lambda a: grad_h({**a, "H": np.ones_like(fwd(a))}))


def max_pool_case(ksize: int, stride: int) -> TvmCase:
    """The fork's ``topi.nn.pool(X, [k, k], [s, s], [0, 0, 0, 0], 'max')``: its third
    argument is the stride there (Apache's TVM later rewrote these calls with it as a
    dilation, AUTODIFF_NOTES.md section 5)."""
    n, c, h, w = _X_SHAPE
    x = _ph(_X_SHAPE, "data")
    y = topi.nn.pool2d(x, (ksize, ksize), (stride, stride), 1, 0, pool_type="max")
    oh, ow = _out_extent(h, ksize, stride, 0), _out_extent(w, ksize, stride, 0)
    assert y.shape == (n, c, oh, ow), y.shape
    # the argmax of each window (the forward again): N*C*OH*OW*K*K; none for a 1x1 window
    # (its only point). Then the cheaper of
    #   a gather: each input point reads the windows covering it (the polyphase count,
    #     one tap per window; a point no window covers written once: a zero), one pass over
    #     the input when the windows do not overlap;
    #   a scatter: the input gradient zeroed, N*C*H*W, and one update per window at its
    #     argmax, N*C*OH*OW (what frameworks do for overlapping windows).
    argmax = n * c * oh * ow * ksize * ksize if ksize > 1 else 0
    gather = n * c * _gather_iterations(h, w, ksize, ksize, stride, 0, out_hw=(oh, ow))
    scatter = n * c * h * w + n * c * oh * ow
    hand = argmax + min(gather, scatter)

    def windows(a: Arrays) -> np.ndarray:  # (N, C, OH, OW, K*K)
        win = np.lib.stride_tricks.sliding_window_view(a["data"], (ksize, ksize),
                                                       axis=(2, 3))
        return win[:, :, ::stride, ::stride].reshape(n, c, oh, ow, ksize * ksize)

    def fwd(a: Arrays) -> np.ndarray:
        return windows(a).max(axis=-1)

    def grad(a: Arrays) -> list[np.ndarray]:
        first = windows(a).argmax(axis=-1)  # the first maximum wins, as in tex
        ni, ci, hi, wi = np.indices((n, c, oh, ow))
        dx = np.zeros_like(a["data"])
        np.add.at(dx, (ni, ci, hi * stride + first // ksize, wi * stride + first % ksize), 1.0)
        return [dx]

    tvm, tvm_v1 = _POOL_TVM[ksize, stride]
    return _case(f"tvm_maxpool_k{ksize}_s{stride}",
                 f"max pool X{_X_SHAPE} {ksize}x{ksize} stride {stride}", [x], [x], y, hand,
                 tvm, tvm_v1, fwd, grad)


# ---------------------------------------------------------------------------------------
# test_some_conv2d_net


def conv_net() -> TvmCase:
    """transpose, conv 3x5 + bias + relu, conv 3x5 + bias + relu, 2x2 average pool,
    transpose, flatten, dense + relu, dense, -sum(y * log_softmax) / batch: a scalar loss,
    differentiated with respect to the eight weights (the image ``x`` and the labels ``y``
    are data)."""
    bs, ncls, feat, units = 1, 10, 4, 16
    x, lab = _ph((bs, 28, 14, 1), "x"), _ph((bs, ncls), "y")
    w1, b1 = _ph((feat, 1, 3, 5), "w1"), _ph((feat,), "b1")
    w2, b2 = _ph((feat, feat, 3, 5), "w2"), _ph((feat,), "b2")
    b3, w4, b4 = _ph((units,), "b3"), _ph((ncls, units), "w4"), _ph((ncls,), "b4")
    t = topi.transpose(x, (0, 3, 1, 2))
    t = topi.nn.relu(topi.nn.conv2d(t, w1, 1, 0, 1) + topi.reshape(b1, (1, feat, 1, 1)))
    t = topi.nn.relu(topi.nn.conv2d(t, w2, 1, 0, 1) + topi.reshape(b2, (1, feat, 1, 1)))
    t = topi.nn.pool2d(t, (2, 2), (2, 2), 1, 0, pool_type="avg")
    t = topi.nn.flatten(topi.transpose(t, (0, 2, 3, 1)))
    flat = t.shape[1]
    w3 = _ph((units, flat), "w3")
    t = topi.nn.relu(topi.nn.dense(t, w3, b3))
    t = topi.nn.dense(t, w4, b4)
    loss = -topi.sum(lab * topi.nn.log_softmax(t)) / bs
    # shapes: conv 1 (1, 4, 26, 10) of 1*3*5 taps, conv 2 (1, 4, 24, 6) of 4*3*5 taps,
    # pooled (1, 4, 12, 3), flat 144
    mac1 = bs * feat * 26 * 10 * 1 * 3 * 5
    mac2 = bs * feat * 24 * 6 * feat * 3 * 5
    p1, p2 = bs * feat * 26 * 10, bs * feat * 24 * 6
    # forward intermediates: conv 1 mac1, conv 2 mac2, the pool's window sums p2 (4 taps per
    #   window, p2/4 windows), dense 1 units*flat*bs, dense 2 ncls*units*bs, log_softmax's
    #   max and exp-sum 2*ncls*bs
    # backward: sum_j y 1*ncls*bs (dz = softmax * sum_j y - y, inlined); dw4 = dz^T h1
    #   ncls*units*bs, db4 ncls*bs, dh1 = dz w4 units*ncls*bs; dw3 = dh1'^T flat
    #   units*flat*bs, db3 units*bs, dflat = dh1' w3 flat*units*bs; the pool's and relu's
    #   gradients elementwise, inlined; dw2 mac2, db2 p2, the data gradient of conv 2 (pad 0,
    #   stride 1: the rectangular full convolution N*C*H*W*O*KH*KW = 4*26*10*4*3*5) d1,
    #   dw1 mac1, db1 p1
    d1 = bs * feat * 26 * 10 * feat * 3 * 5
    hand = (mac1 + mac2 + p2 + units * flat * bs + ncls * units * bs + 2 * ncls * bs
            + ncls * bs + ncls * units * bs + ncls * bs + units * ncls * bs
            + units * flat * bs + units * bs + flat * units * bs
            + mac2 + p2 + d1 + mac1 + p1)
    conv_fwd, conv_grad = _conv_numpy(1, 0)

    def parts(a: Arrays) -> dict[str, np.ndarray]:
        v: dict[str, np.ndarray] = {}
        v["xt"] = a["x"].transpose(0, 3, 1, 2)
        v["pre1"] = conv_fwd({"data": v["xt"], "kernel": a["w1"]}) + a["b1"][:, None, None]
        v["r1"] = np.maximum(v["pre1"], 0)
        v["pre2"] = conv_fwd({"data": v["r1"], "kernel": a["w2"]}) + a["b2"][:, None, None]
        r2 = np.maximum(v["pre2"], 0)
        pooled = r2.reshape(bs, feat, 12, 2, 3, 2).mean(axis=(3, 5))
        v["flat"] = pooled.transpose(0, 2, 3, 1).reshape(bs, flat)
        v["pre3"] = v["flat"] @ a["w3"].T + a["b3"]
        v["h1"] = np.maximum(v["pre3"], 0)
        z = v["h1"] @ a["w4"].T + a["b4"]
        zs = z - z.max(axis=1, keepdims=True)
        v["logp"] = zs - np.log(np.exp(zs).sum(axis=1, keepdims=True))
        return v

    def fwd(a: Arrays) -> np.ndarray:
        return np.asarray(-(a["y"] * parts(a)["logp"]).sum() / bs)

    def grad(a: Arrays) -> list[np.ndarray]:
        v = parts(a)
        yv = a["y"]
        dz = (np.exp(v["logp"]) * yv.sum(axis=1, keepdims=True) - yv) / bs
        dw4, db4 = dz.T @ v["h1"], dz.sum(axis=0)
        dpre3 = (dz @ a["w4"]) * (v["pre3"] > 0)
        dw3, db3 = dpre3.T @ v["flat"], dpre3.sum(axis=0)
        dpooled = (dpre3 @ a["w3"]).reshape(bs, 12, 3, feat).transpose(0, 3, 1, 2)
        dr2 = dpooled.repeat(2, axis=2).repeat(2, axis=3) / 4
        dpre2 = dr2 * (v["pre2"] > 0)
        dr1, dw2 = conv_grad({"data": v["r1"], "kernel": a["w2"], "H": dpre2})
        dpre1 = dr1 * (v["pre1"] > 0)
        _, dw1 = conv_grad({"data": v["xt"], "kernel": a["w1"], "H": dpre1})
        return [dw1, dpre1.sum(axis=(0, 2, 3)), dw2, dpre2.sum(axis=(0, 2, 3)), dw3, db3,
                dw4, db4]

    weights = [w1, b1, w2, b2, w3, b3, w4, b4]
    return _case("tvm_conv_net", "test_some_conv2d_net: 2 conv, avg pool, 2 dense, "
                 "log_softmax loss", [x, lab, *weights], weights, loss, hand, 181_906,
                 194_865, fwd, grad)


# ---------------------------------------------------------------------------------------

CASES: dict[str, Callable[[], TvmCase]] = {
    "tvm_transpose_add": transpose_add,
    "tvm_sum_products": sum_of_products,
    "tvm_max_products": max_of_products,
    **{f"tvm_conv_k{k}_s{s}_d{d}": (lambda k=k, s=s, d=d: conv_case(k, s, d))
       for k, s, d in _CONV_TVM},
    **{f"tvm_maxpool_k{k}_s{s}": (lambda k=k, s=s: max_pool_case(k, s))
       for k, s in _POOL_TVM},
    "tvm_conv_net": conv_net,
}
