"""TVM's topi names and layouts in tex.topi: the NHWC/HWCN convolutions, NHWC pooling,
"SAME"/"VALID" paddings, ``elemwise_sum``, ``topi.utils``, TVM's tags, the NumPy references of
``topi.testing`` and the AttributeError hints for the names tex lacks.

Each op is checked against its ``topi.testing`` reference through both the reference
interpreter (``tex.testing.evaluate``) and compiled code (``tex.build`` of every case at once,
to keep the file fast); the references themselves against independent NumPy written here
(slow loops over the windows) and against tex's ops. Gradients of the new layouts go through
``tex.testing.check_grad`` on tiny shapes.
"""
from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import numpy as np
import pytest

import tex
import tex.testing
from tex import topi
from tex.topi import nn, tag
from tex.topi import testing as tt
from tex.topi.utils import get_const_int, get_const_tuple

Array = np.ndarray


@pytest.fixture
def rng() -> np.random.Generator:
    return np.random.default_rng(0)


def _rand(rng: np.random.Generator, shape: tuple[int, ...]) -> Array:
    return rng.uniform(-1.0, 1.0, size=shape).astype(np.float32)


def _build_run(outs: list[tex.Tensor], feeds: dict[tex.Tensor, Array]) -> list[Array]:
    """Compile ``outs`` into one function (auto-scheduled) and run it on ``feeds``."""
    f = tex.build(outs)
    arrays = [feeds[t] if t in feeds else np.empty(t.shape, t.dtype) for t in f.args]
    f(*arrays)
    return [arrays[next(i for i, t in enumerate(f.args) if t is o)] for o in outs]


# ---------------------------------------------------------------------------------------
# slow, obviously right references for the references
# ---------------------------------------------------------------------------------------

def _loop_conv_nchw(a: Array, w: Array, stride: int, pads: tuple[int, int, int, int]
                    ) -> Array:
    """Convolution by explicit loops over every output point and tap."""
    top, left, bottom, right = pads
    n, c, h, wd = a.shape
    o, _, kh, kw = w.shape
    padded = np.zeros((n, c, h + top + bottom, wd + left + right))
    padded[:, :, top:top + h, left:left + wd] = a
    oh = (padded.shape[2] - kh) // stride + 1
    ow = (padded.shape[3] - kw) // stride + 1
    out = np.zeros((n, o, oh, ow))
    for b, f, y, x in itertools.product(range(n), range(o), range(oh), range(ow)):
        patch = padded[b, :, y * stride:y * stride + kh, x * stride:x * stride + kw]
        out[b, f, y, x] = np.sum(patch * w[f])
    return out


def _loop_pool_nchw(a: Array, k: int, s: int, pads: tuple[int, int, int, int],
                    pool_type: str, include: bool) -> Array:
    """Pooling by explicit loops (no dilation, no ceil mode)."""
    top, left, bottom, right = pads
    n, c, h, w = a.shape
    oh, ow = (h + top + bottom - k) // s + 1, (w + left + right - k) // s + 1
    out = np.zeros((n, c, oh, ow))
    for y, x in itertools.product(range(oh), range(ow)):
        rows = [r for r in range(y * s - top, y * s - top + k) if 0 <= r < h]
        cols = [q for q in range(x * s - left, x * s - left + k) if 0 <= q < w]
        window = a[:, :, rows][:, :, :, cols]
        if pool_type == "max":
            out[:, :, y, x] = window.max(axis=(2, 3))
        else:
            count = k * k if include else len(rows) * len(cols)
            out[:, :, y, x] = window.sum(axis=(2, 3)) / count
    return out


# ---------------------------------------------------------------------------------------
# get_pad_tuple and the padding strings
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("padding, kernel, expected", [
    (1, (3, 3), (1, 1, 1, 1)),
    ((1, 2), (3, 3), (1, 2, 1, 2)),
    ((0, 1, 2, 3), (3, 3), (0, 1, 2, 3)),
    ("VALID", (5, 5), (0, 0, 0, 0)),
    ("SAME", (3, 3), (1, 1, 1, 1)),
    ("SAME", (4, 2), (2, 1, 1, 0)),  # the odd point on top/left, as TVM
    ("SAME", (1, 1), (0, 0, 0, 0)),
])
def test_get_pad_tuple(padding: Any, kernel: tuple[int, int],
                       expected: tuple[int, int, int, int]) -> None:
    assert nn.utils.get_pad_tuple(padding, kernel) == expected


@pytest.mark.parametrize("padding, exc, match", [
    ("same", ValueError, r"padding 'same' is not a padding string; use 'SAME' or 'VALID'"),
    ((1, 1, 1), ValueError, r"padding must be an int, a pair or a 4-tuple"),
    (-1, ValueError, r"padding must be non-negative"),
    (1.5, TypeError, r"padding must be ints or one of 'SAME', 'VALID'"),
])
def test_get_pad_tuple_errors(padding: Any, exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=r"topi\.nn\.get_pad_tuple: " + match):
        nn.utils.get_pad_tuple(padding, (3, 3))
    with pytest.raises(exc, match=r"topi\.nn\.conv2d_nhwc: " + match):
        nn.conv2d_nhwc(tex.placeholder((1, 5, 5, 2)), tex.placeholder((3, 3, 2, 1)), 1,
                       padding, 1)


@pytest.mark.parametrize("size", [5, 7, 8])
@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("kernel", [1, 2, 3])
def test_same_and_valid_output_sizes(size: int, stride: int, kernel: int) -> None:
    data = tex.placeholder((1, 2, size, size + 2), name="data")
    weight = tex.placeholder((3, 2, kernel, kernel), name="weight")
    same = nn.conv2d_nchw(data, weight, stride, "SAME", 1)
    valid = nn.conv2d_nchw(data, weight, stride, "VALID", 1)
    ceil = -(-size // stride)
    assert same.shape == (1, 3, ceil, -(-(size + 2) // stride))
    assert valid.shape == (1, 3, (size - kernel) // stride + 1,
                           (size + 2 - kernel) // stride + 1)
    pooled = nn.pool2d(tex.placeholder((1, size, size, 2)), kernel, stride, 1, "SAME", "max",
                       layout="NHWC")
    assert pooled.shape == (1, ceil, ceil, 2)


# ---------------------------------------------------------------------------------------
# the references against slow loops
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("stride", [1, 2])
@pytest.mark.parametrize("padding", [0, (1, 2), (0, 1, 2, 1), "SAME", "VALID"])
def test_conv_references_against_loops(rng: np.random.Generator, stride: int,
                                       padding: Any) -> None:
    a = _rand(rng, (2, 3, 7, 5))
    w = _rand(rng, (4, 3, 3, 2))
    pads = nn.utils.get_pad_tuple(padding, (3, 2))
    want = _loop_conv_nchw(a, w, stride, pads)
    np.testing.assert_allclose(tt.conv2d_nchw_python(a, w, stride, padding), want,
                               rtol=1e-5, atol=1e-5)
    nhwc = tt.conv2d_nhwc_python(a.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), stride,
                                 padding)
    np.testing.assert_allclose(nhwc, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    hwcn = tt.conv2d_hwcn_python(a.transpose(2, 3, 1, 0), w.transpose(2, 3, 1, 0), stride,
                                 padding)
    np.testing.assert_allclose(hwcn, want.transpose(2, 3, 1, 0), rtol=1e-5, atol=1e-5)


def test_grouped_and_depthwise_references(rng: np.random.Generator) -> None:
    a = _rand(rng, (1, 4, 6, 5))
    w = _rand(rng, (6, 2, 3, 3))  # two groups: 2 input channels, 3 filters each
    grouped = tt.conv2d_nchw_python(a, w, 1, 1, groups=2)
    halves = [_loop_conv_nchw(a[:, 2 * g:2 * g + 2], w[3 * g:3 * g + 3], 1, (1, 1, 1, 1))
              for g in range(2)]
    np.testing.assert_allclose(grouped, np.concatenate(halves, axis=1), rtol=1e-5, atol=1e-5)
    nhwc = tt.conv2d_nhwc_python(a.transpose(0, 2, 3, 1), w.transpose(2, 3, 1, 0), 1, 1, 2)
    np.testing.assert_allclose(nhwc, grouped.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-5)
    # depthwise, multiplier 2: output channel c*2 + m reads input channel c alone
    f = _rand(rng, (4, 2, 3, 3))
    depthwise = tt.depthwise_conv2d_python_nchw(a, f, 2, "SAME")
    pads = nn.utils.get_pad_tuple("SAME", (3, 3))
    for c, m in itertools.product(range(4), range(2)):
        one = _loop_conv_nchw(a[:, c:c + 1], f[c:c + 1, m:m + 1], 2, pads)
        np.testing.assert_allclose(depthwise[:, 2 * c + m], one[:, 0], rtol=1e-5, atol=1e-5)
    np.testing.assert_allclose(
        tt.depthwise_conv2d_python_nhwc(a.transpose(0, 2, 3, 1), f.transpose(2, 3, 0, 1), 2,
                                        "SAME"),
        depthwise.transpose(0, 2, 3, 1), rtol=1e-6)


def test_dilate_python() -> None:
    x = np.arange(6, dtype=np.float32).reshape(2, 3)
    np.testing.assert_array_equal(tt.dilate_python(x, (2, 1)),
                                  [[0, 1, 2], [0, 0, 0], [3, 4, 5]])
    out = tt.dilate_python(x, (1, 2), dilation_value=-1.0, out_dtype="float64")
    assert out.dtype == np.float64
    np.testing.assert_array_equal(out, [[0, -1, 1, -1, 2], [3, -1, 4, -1, 5]])
    with pytest.raises(ValueError, match="one entry per dimension"):
        tt.dilate_python(x, (2,))


@pytest.mark.parametrize("pool_type", ["max", "avg"])
@pytest.mark.parametrize("include", [True, False])
@pytest.mark.parametrize("pads", [(0, 0, 0, 0), (1, 1, 1, 1), (1, 0, 0, 1)])
def test_poolnd_reference_against_loops(rng: np.random.Generator, pool_type: str,
                                        include: bool, pads: tuple[int, int, int, int]) -> None:
    a = _rand(rng, (2, 3, 7, 5)) - 2.0  # negative: a zero from padding must not win a max
    got = tt.poolnd_python(a, (3, 3), (2, 2), (1, 1), pads[:2], pads[2:], pool_type, include)
    want = _loop_pool_nchw(a, 3, 2, pads, pool_type, include)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)
    nhwc = tt.poolnd_python(a.transpose(0, 2, 3, 1), (3, 3), (2, 2), (1, 1), pads[:2],
                            pads[2:], pool_type, include, layout="NHWC")
    np.testing.assert_allclose(nhwc, want.transpose(0, 2, 3, 1), rtol=1e-5, atol=1e-6)


def test_poolnd_reference_1d_3d_and_ceil(rng: np.random.Generator) -> None:
    x = _rand(rng, (1, 2, 7))
    got = tt.poolnd_python(x, (2,), (2,), (1,), (0,), (0,), "max", ceil_mode=True)
    want = np.stack([x[:, :, 0:2].max(-1), x[:, :, 2:4].max(-1), x[:, :, 4:6].max(-1),
                     x[:, :, 6]], axis=-1)
    np.testing.assert_allclose(got, want)
    v = _rand(rng, (1, 1, 4, 4, 4))
    got = tt.poolnd_python(v, (2, 2, 2), (2, 2, 2), (1, 1, 1), (0, 0, 0), (0, 0, 0), "avg")
    np.testing.assert_allclose(got, v.reshape(1, 1, 2, 2, 2, 2, 2, 2).mean(axis=(3, 5, 7)),
                               rtol=1e-6)


def test_matmul_and_softmax_references(rng: np.random.Generator) -> None:
    x, y, b = _rand(rng, (5, 7)), _rand(rng, (3, 7)), _rand(rng, (3,))
    np.testing.assert_allclose(tt.dense(x, y, b, use_bias=True, use_relu=True),
                               np.maximum(x @ y.T + b, 0), rtol=1e-6)
    assert tt.dense(x, y, None, out_dtype="float64").dtype == np.float64
    p, q = _rand(rng, (2, 5, 7)), _rand(rng, (1, 3, 7))
    np.testing.assert_allclose(tt.batch_matmul(p, q), p @ np.swapaxes(q, 1, 2), rtol=1e-6)
    np.testing.assert_allclose(tt.batch_matmul(np.swapaxes(p, 1, 2), q, trans_x=True),
                               p @ np.swapaxes(q, 1, 2), rtol=1e-6)
    s = tt.softmax_python(x)
    np.testing.assert_allclose(s.sum(axis=-1), 1.0, rtol=1e-6)
    np.testing.assert_allclose(np.log(tt.softmax_python(x, axis=0)),
                               tt.log_softmax_python(x, axis=0), rtol=1e-5, atol=1e-6)
    big = np.array([[1000.0, 1000.0]], dtype=np.float32)  # stable: no overflow
    np.testing.assert_allclose(tt.softmax_python(big), [[0.5, 0.5]])


# ---------------------------------------------------------------------------------------
# tex's ops against the references: evaluate, then everything compiled in one build
# ---------------------------------------------------------------------------------------

CONV_CASES = [  # id, layout, data shape (NCHW order), kernel (OIHW order), stride, padding
    ("nchw-same-s1", "NCHW", (2, 3, 7, 5), (4, 3, 3, 3), 1, "SAME"),
    ("nhwc-same-s2", "NHWC", (2, 3, 7, 5), (4, 3, 3, 3), 2, "SAME"),
    ("hwcn-same-s2-k2", "HWCN", (2, 3, 7, 5), (4, 3, 2, 2), 2, "SAME"),
    ("nchw-valid-s2", "NCHW", (1, 2, 7, 7), (3, 2, 3, 2), 2, "VALID"),
    ("nhwc-valid-s1", "NHWC", (1, 2, 5, 7), (3, 2, 3, 3), 1, "VALID"),
    ("hwcn-pad4-s1", "HWCN", (2, 2, 5, 5), (3, 2, 3, 3), 1, (0, 1, 2, 1)),
    ("nhwc-pad2-s2", "NHWC", (1, 3, 7, 7), (2, 3, 3, 3), 2, (1, 2)),
]
_TO = {"NCHW": (0, 1, 2, 3), "NHWC": (0, 2, 3, 1), "HWCN": (2, 3, 1, 0)}  # from NCHW
_KERNEL_TO = {"NCHW": (0, 1, 2, 3), "NHWC": (2, 3, 1, 0), "HWCN": (2, 3, 1, 0)}  # from OIHW
_OP = {"NCHW": nn.conv2d_nchw, "NHWC": nn.conv2d_nhwc, "HWCN": nn.conv2d_hwcn}
_REF = {"NCHW": tt.conv2d_nchw_python, "NHWC": tt.conv2d_nhwc_python,
        "HWCN": tt.conv2d_hwcn_python}


def _conv_case(rng: np.random.Generator, layout: str, dshape: tuple[int, ...],
               kshape: tuple[int, ...], stride: int, padding: Any
               ) -> tuple[tex.Tensor, dict[tex.Tensor, Array], Array]:
    a = _rand(rng, tuple(dshape[d] for d in _TO[layout]))
    w = _rand(rng, tuple(kshape[d] for d in _KERNEL_TO[layout]))
    A = tex.placeholder(a.shape, name="A")
    W = tex.placeholder(w.shape, name="W")
    out = _OP[layout](A, W, stride, padding, 1)
    return out, {A: a, W: w}, _REF[layout](a, w, stride, padding)


@pytest.mark.parametrize("case", CONV_CASES, ids=[c[0] for c in CONV_CASES])
def test_conv_layouts_evaluate(rng: np.random.Generator, case: tuple) -> None:
    _, layout, dshape, kshape, stride, padding = case
    out, feeds, want = _conv_case(rng, layout, dshape, kshape, stride, padding)
    assert out.shape == want.shape
    assert out.op.tag == out.name == f"conv2d_{layout.lower()}"
    np.testing.assert_allclose(tex.testing.evaluate(out, feeds), want, rtol=1e-4, atol=1e-5)


def test_conv2d_layout_argument_and_dilation(rng: np.random.Generator) -> None:
    a = _rand(rng, (1, 7, 6, 2))
    w = _rand(rng, (3, 2, 2, 3))  # HWIO
    A, W = tex.placeholder(a.shape, name="A"), tex.placeholder(w.shape, name="W")
    want = tt.conv2d_nhwc_python(a, tt.dilate_python(w, (2, 2, 1, 1)), 1, "SAME")
    for out in (nn.conv2d(A, W, 1, "SAME", 2, layout="NHWC"),
                nn.conv2d(A, W, 1, "SAME", 2, data_layout="NHWC", kernel_layout="HWIO"),
                nn.conv2d_nhwc(A, W, 1, "SAME", 2)):
        np.testing.assert_allclose(tex.testing.evaluate(out, {A: a, W: w}), want, rtol=1e-4,
                                   atol=1e-5)
    # any kernel layout: OHWI
    K = tex.placeholder((3, 3, 2, 2), name="K")
    out = nn.conv2d(A, K, 1, 0, 1, "NHWC", "OHWI")
    k = _rand(rng, K.shape)
    np.testing.assert_allclose(tex.testing.evaluate(out, {A: a, K: k}),
                               tt.conv2d_nhwc_python(a, k.transpose(1, 2, 3, 0), 1, 0),
                               rtol=1e-4, atol=1e-5)


def test_conv_dtypes() -> None:
    A = tex.placeholder((1, 5, 5, 2), "float64", name="A")
    W = tex.placeholder((3, 3, 2, 1), "float64", name="W")
    assert nn.conv2d_nhwc(A, W, 1, 1, 1).dtype == "float32"  # TVM's default out_dtype
    assert nn.conv2d_nhwc(A, W, 1, 1, 1, out_dtype=None).dtype == "float64"
    assert nn.conv2d(A, W, 1, 1, layout="NHWC").dtype == "float64"
    with pytest.raises(ValueError, match=r"kernel_layout 'float32' is a dtype; .* out_dtype="):
        nn.conv2d(A, W, 1, 1, 1, "NHWC", "float32")
    with pytest.raises(ValueError, match="auto_scheduler_rewritten_layout"):
        nn.conv2d_nhwc(A, W, 1, 1, 1, auto_scheduler_rewritten_layout="NHWC")


@pytest.mark.parametrize("call, exc, match", [
    (lambda: nn.conv2d(tex.placeholder((1, 5, 5, 2)), tex.placeholder((3, 3, 3, 1)), 1, 0,
                       layout="NHWC"),
     ValueError, r"topi\.nn\.conv2d: data has 2 channels but kernel expects 3 \(data "
                 r"\(1, 5, 5, 2\) in NHWC, kernel \(3, 3, 3, 1\) in HWIO\)"),
    (lambda: nn.conv2d_hwcn(tex.placeholder((5, 5, 2)), tex.placeholder((3, 3, 2, 1)), 1, 0, 1),
     ValueError, r"topi\.nn\.conv2d_hwcn: Input must be 4-D \(H, W, C, N\)"),
    (lambda: nn.conv2d(tex.placeholder((1, 2, 5, 5)), tex.placeholder((1, 2, 3, 3)), 1, 0,
                       layout="NCHW", kernel_layout="OIHWo"),
     ValueError, r"kernel_layout 'OIHWo' is not supported; use an order of the letters "
                 r"O, I, H, W"),
    (lambda: nn.conv2d(tex.placeholder((1, 2, 5, 5)), tex.placeholder((1, 2, 3, 3)), 1, 0,
                       layout=4),
     TypeError, r"topi\.nn\.conv2d: layout must be a string such as 'NCHW', got int 4"),
])
def test_conv_errors(call: Callable[[], Any], exc: type[Exception], match: str) -> None:
    with pytest.raises(exc, match=match):
        call()


POOL_CASES = [  # id, kernel, stride, padding, pool_type, count_include_pad
    ("max-k3-s2-same", 3, 2, "SAME", "max", True),
    ("max-k2-s1-valid", 2, 1, "VALID", "max", True),
    ("avg-k3-s2-p1", 3, 2, 1, "avg", True),
    ("avg-k3-s1-p1-exclude", 3, 1, (1, 1, 1, 1), "avg", False),
    ("avg-k2-s2-pad4", 2, 2, (1, 0, 0, 1), "avg", False),
]


def _pool_case(rng: np.random.Generator, kernel: int, stride: int, padding: Any,
               pool_type: str, include: bool, layout: str = "NHWC"
               ) -> tuple[tex.Tensor, dict[tex.Tensor, Array], Array]:
    a = _rand(rng, (2, 7, 5, 3)) - 2.0  # negative: a padded zero must not win a max
    a = a if layout == "NHWC" else a.transpose(0, 3, 1, 2)
    A = tex.placeholder(a.shape, name="A")
    pads = nn.utils.get_pad_tuple(padding, (kernel, kernel))
    out = nn.pool2d(A, kernel, stride, 1, padding, pool_type, layout=layout,
                    count_include_pad=include)
    want = tt.poolnd_python(a, (kernel, kernel), (stride, stride), (1, 1), pads[:2], pads[2:],
                            pool_type, include, layout=layout)
    return out, {A: a}, want


@pytest.mark.parametrize("case", POOL_CASES, ids=[c[0] for c in POOL_CASES])
@pytest.mark.parametrize("layout", ["NHWC", "NCHW"])
def test_pool_layouts_evaluate(rng: np.random.Generator, case: tuple, layout: str) -> None:
    out, feeds, want = _pool_case(rng, *case[1:], layout=layout)
    assert out.shape == want.shape
    assert out.op.tag == ("pool_max" if case[4] == "max" else tag.ELEMWISE)
    np.testing.assert_allclose(tex.testing.evaluate(out, feeds), want, rtol=1e-5, atol=1e-6)


def test_pool_old_signature_and_blocked_layout(rng: np.random.Generator) -> None:
    a = _rand(rng, (1, 2, 7, 7, 4))  # NCHW4c: 8 channels in blocks of 4
    A = tex.placeholder(a.shape, name="A")
    out = nn.pool(A, 2, 2, 0, "max", ceil_mode=True, layout="NCHW4c")
    nchw = a.transpose(0, 1, 4, 2, 3).reshape(1, 8, 7, 7)
    want = tt.poolnd_python(nchw, (2, 2), (2, 2), (1, 1), (0, 0), (0, 0), "max",
                            ceil_mode=True)
    got = tex.testing.evaluate(out, {A: a})
    assert out.shape == (1, 2, 4, 4, 4)
    np.testing.assert_allclose(got.transpose(0, 1, 4, 2, 3).reshape(want.shape), want)
    x = _rand(rng, (1, 6, 6, 2))
    X = tex.placeholder(x.shape, name="X")
    np.testing.assert_allclose(
        tex.testing.evaluate(nn.pool(X, 3, 3, 0, "avg", layout="NHWC"), {X: x}),
        tt.poolnd_python(x, (3, 3), (3, 3), (1, 1), (0, 0), (0, 0), "avg", layout="NHWC"),
        rtol=1e-6)
    with pytest.raises(ValueError, match=r"topi\.nn\.pool2d: data must be 4-D \(N, H, W, C\)"):
        nn.pool2d(A, 2, 2, 1, 0, "max", layout="NHWC")
    with pytest.raises(TypeError, match=r"topi\.nn\.pool2d: layout must be a string"):
        nn.pool2d(X, 2, 2, 1, 0, "max", layout=None)


def test_references_against_tex_ops(rng: np.random.Generator) -> None:
    x = _rand(rng, (4, 6))
    X = tex.placeholder(x.shape, name="X")
    got = tex.testing.evaluate([nn.softmax(X), nn.log_softmax(X, axis=0)], {X: x})
    np.testing.assert_allclose(got[0], tt.softmax_python(x), rtol=1e-5)
    np.testing.assert_allclose(got[1], tt.log_softmax_python(x, axis=0), rtol=1e-5, atol=1e-6)
    w, b = _rand(rng, (3, 6)), _rand(rng, (3,))
    W, B = tex.placeholder(w.shape, name="W"), tex.placeholder(b.shape, name="B")
    np.testing.assert_allclose(tex.testing.evaluate(nn.dense(X, W, B), {X: x, W: w, B: b}),
                               tt.dense(x, w, b, use_bias=True), rtol=1e-5, atol=1e-6)
    p, q = _rand(rng, (2, 3, 5)), _rand(rng, (2, 4, 5))
    P, Q = tex.placeholder(p.shape, name="P"), tex.placeholder(q.shape, name="Q")
    np.testing.assert_allclose(tex.testing.evaluate(nn.batch_matmul(P, Q), {P: p, Q: q}),
                               tt.batch_matmul(p, q), rtol=1e-5, atol=1e-6)
    # grouped: tex convolves each group and concatenates
    a, k = _rand(rng, (1, 4, 5, 5)), _rand(rng, (6, 2, 3, 3))
    A, K = tex.placeholder(a.shape, name="A"), tex.placeholder(k.shape, name="K")
    groups = [nn.conv2d_nchw(da, dk, 1, "SAME", 1)
              for da, dk in zip(topi.split(A, 2, axis=1), topi.split(K, 2, axis=0))]
    np.testing.assert_allclose(
        tex.testing.evaluate(topi.concatenate(groups, axis=1), {A: a, K: k}),
        tt.conv2d_nchw_python(a, k, 1, "SAME", groups=2), rtol=1e-4, atol=1e-5)
    # depthwise, written as a tex compute
    f = _rand(rng, (4, 2, 3, 3))
    F = tex.placeholder(f.shape, name="F")
    padded = nn.pad(A, [0, 0, 1, 1], [0, 0, 1, 1])
    ry, rx = tex.reduce_axis((0, 3), name="ry"), tex.reduce_axis((0, 3), name="rx")
    depthwise = tex.compute(
        (1, 8, 3, 3), lambda n, c, h, w: tex.sum(
            padded[n, c // 2, h * 2 + ry, w * 2 + rx] * F[c // 2, c % 2, ry, rx],
            axis=[ry, rx]), name="depthwise")
    np.testing.assert_allclose(tex.testing.evaluate(depthwise, {A: a, F: f}),
                               tt.depthwise_conv2d_python_nchw(a, f, 2, 1), rtol=1e-4,
                               atol=1e-5)


def test_everything_compiled_in_one_build(rng: np.random.Generator) -> None:
    """Every conv and pool case, elemwise_sum and the softmax reference, compiled together:
    one build keeps the file fast."""
    outs: list[tex.Tensor] = []
    feeds: dict[tex.Tensor, Array] = {}
    wants: list[Array] = []
    for _, layout, dshape, kshape, stride, padding in CONV_CASES:
        out, feed, want = _conv_case(rng, layout, dshape, kshape, stride, padding)
        outs.append(out), feeds.update(feed), wants.append(want)
    for _, *args in POOL_CASES:
        out, feed, want = _pool_case(rng, *args)
        outs.append(out), feeds.update(feed), wants.append(want)
    xs = [_rand(rng, (3, 5)) for _ in range(3)]
    Xs = [tex.placeholder((3, 5), name=f"X{i}") for i in range(3)]
    outs.append(topi.elemwise_sum(Xs)), feeds.update(zip(Xs, xs)), wants.append(sum(xs))
    outs.append(nn.softmax(Xs[0])), wants.append(tt.softmax_python(xs[0]))
    for got, want in zip(_build_run(outs, feeds), wants):
        np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


# ---------------------------------------------------------------------------------------
# gradients of the new layouts, tiny shapes
# ---------------------------------------------------------------------------------------

@pytest.mark.parametrize("layout, dshape, kshape, stride, padding", [
    ("NHWC", (1, 4, 3, 2), (2, 2, 2, 2), 2, "SAME"),
    ("NHWC", (1, 3, 3, 1), (2, 2, 1, 2), 1, (1, 0, 0, 1)),
    ("HWCN", (3, 4, 2, 1), (3, 3, 2, 1), 2, "SAME"),
    ("HWCN", (3, 3, 1, 2), (2, 2, 1, 1), 1, "VALID"),
])
def test_conv_layout_gradients(layout: str, dshape: tuple[int, ...], kshape: tuple[int, ...],
                               stride: int, padding: Any) -> None:
    A = tex.placeholder(dshape, "float64", name="A")
    W = tex.placeholder(kshape, "float64", name="W")
    out = nn.conv2d(A, W, stride, padding, 1, layout)
    tex.testing.check_grad(out, [A, W])


@pytest.mark.parametrize("pool_type, padding, include", [
    ("max", "SAME", True), ("avg", 1, True), ("avg", (1, 0, 0, 1), False)])
def test_nhwc_pool_gradients(pool_type: str, padding: Any, include: bool) -> None:
    A = tex.placeholder((1, 4, 5, 2), "float64", name="A")
    out = nn.pool2d(A, 2, 2, 1, padding, pool_type, layout="NHWC", count_include_pad=include)
    data = {A: np.random.default_rng(1).permutation(40).reshape(A.shape) / 7.0}  # no ties
    tex.testing.check_grad(out, [A], data)


def test_elemwise_sum() -> None:
    A, B = tex.placeholder((2, 3), "float64", name="A"), tex.placeholder((2, 3), name="B")
    out = topi.elemwise_sum([A, B, A])
    assert out.name == "T_elemwise_sum" and out.op.tag == tag.ELEMWISE
    assert out.dtype == "float64"
    assert str(out) == "T_elemwise_sum[i, j] = A[i, j] + float64(B[i, j]) + A[i, j]"
    tex.testing.check_grad(topi.elemwise_sum([A, A, A]), [A])
    with pytest.raises(ValueError, match=r"topi\.elemwise_sum: xs is empty"):
        topi.elemwise_sum([])
    with pytest.raises(TypeError, match=r"topi\.elemwise_sum: xs must be a list or tuple"):
        topi.elemwise_sum(A)
    with pytest.raises(TypeError, match=r"topi\.elemwise_sum: argument 'xs\[1\]' must be"):
        topi.elemwise_sum([A, 1.0])
    with pytest.raises(ValueError, match=r"xs\[1\] 'C' has shape \(3,\) .* does not broadcast"):
        topi.elemwise_sum([A, tex.placeholder((3,), name="C")])


# ---------------------------------------------------------------------------------------
# topi.utils, tags, AttributeError hints
# ---------------------------------------------------------------------------------------

def test_get_const_tuple_and_int() -> None:
    A = tex.placeholder((2, 3), name="A")
    assert get_const_tuple(A.shape) == (2, 3)
    assert topi.utils.get_const_tuple is get_const_tuple
    got = get_const_tuple((tex.const(4), 2 * tex.const(5), np.int64(7)))
    assert got == (4, 10, 7) and all(type(v) is int for v in got)
    n = tex.var("n")
    sym = get_const_tuple([n, n + 0, 3])
    assert sym[0] is n and sym[1] is n and sym[2] == 3
    assert get_const_int(tex.const(3) * 4) == 12 and get_const_int(np.int32(5)) == 5
    assert topi.utils.equal_const_int(tex.const(2) + 1, 3)
    assert not topi.utils.equal_const_int(n, 3)
    assert topi.utils.get_const_float(tex.const(1.5) * 2) == 3.0
    assert topi.utils.get_float_tuple((1, tex.const(0.5))) == (1.0, 0.5)
    with pytest.raises(ValueError, match=r"get_const_int: expr n \+ 1 is not a constant"):
        get_const_int(n + 1)
    with pytest.raises(TypeError, match=r"get_const_int: expr must be an int .* float 1\.5"):
        get_const_int(1.5)
    with pytest.raises(TypeError, match=r"get_const_tuple: element 1 .* must be an int"):
        get_const_tuple((1, 2.5))
    with pytest.raises(TypeError, match=r"get_const_tuple: in_tuple must be a tuple or list"):
        get_const_tuple(3)


def test_tags_are_tvms() -> None:
    A, B = tex.placeholder((2, 3), name="A"), tex.placeholder((3,), name="B")
    assert topi.add(A, 2.0).op.tag == "elemwise"
    assert topi.multiply(2.0, A).op.tag == "elemwise"
    assert (A + 2.0).op.tag == (2.0 * A).op.tag == (-A).op.tag == "elemwise"
    assert topi.greater(A, 0.0).op.tag == "elemwise"
    assert topi.add(A, B).op.tag == (A + A).op.tag == "broadcast"
    assert topi.exp(A).op.tag == nn.relu(A).op.tag == topi.cast(A, "int32").op.tag == \
        "elemwise"
    assert topi.sum(A, axis=0).op.tag == tag.COMM_REDUCE == "comm_reduce"
    assert topi.transpose(A).op.tag == tag.INJECTIVE == "injective"
    assert nn.pad(A, [1, 0]).op.tag == "injective,pad"
    assert tag.is_injective("injective,pad") and not tag.is_broadcast("injective,pad")
    assert tag.is_broadcast("elemwise") and tag.is_broadcast("broadcast")
    assert not tag.is_injective("conv2d_nchw") and not tag.is_injective("comm_reduce")
    assert topi.ELEMWISE == tag.ELEMWISE and topi.BROADCAST == tag.BROADCAST


@pytest.mark.parametrize("module, name, match", [
    # (topi.cuda, topi.x86 and topi.generic exist: tests/test_topi_schedules.py)
    (topi, "gpu", r"tex\.topi has no 'gpu' \(a TVM name\); use "
                  r"tex\.schedule\.auto_schedule\(outputs, 'cuda'\)"),
    (topi, "arm_cpu", r"use tex\.schedule\.auto_schedule\(outputs, 'llvm'\)"),
    (topi, "bitwise_and", r"there is no equivalent: tex has no bitwise integer operators"),
    (topi, "tanhh", r"module 'tex\.topi' has no attribute 'tanhh'; did you mean tanh"),
    (nn, "conv2d_NCHWc", r"tex\.topi\.nn has no 'conv2d_NCHWc' .* topi\.nn\.conv2d"),
    (nn, "depthwise_conv2d_nchw", r"topi\.nn\.conv2d per group"),
    (nn, "get_pad_tuple", r"use tex\.topi\.nn\.utils\.get_pad_tuple"),
    (nn, "conv2d_nchww", r"did you mean conv2d_nchw"),
    (tt, "pool3d_ncdhw_python", r"use poolnd_python"),
])
def test_missing_names_say_what_to_use(module: Any, name: str, match: str) -> None:
    with pytest.raises(AttributeError, match=match):
        getattr(module, name)
    assert not hasattr(module, name)


def test_submodules_stay_attributes() -> None:
    import tex.topi.nn.utils as nn_utils
    import tex.topi.testing as testing_module
    import tex.topi.utils as topi_utils

    assert topi.nn is nn and topi.tag is tag and topi.testing is testing_module
    assert topi.utils is topi_utils and topi.nn.utils is nn_utils
    assert topi.gradient_cost.GRADIENT_COST and topi.nn.conv.conv2d is nn.conv2d
    assert callable(topi.testing.conv2d_nchw_python)
