"""NumPy reference for max and average pooling over any number of spatial dimensions,
TVM's ``topi.testing.poolnd_python``.

Method: the data (transposed to channels-first: N, C, then the spatial dimensions) is
padded, with room for every window that ``ceil_mode`` adds past the padding; then, per
kernel tap, the strided slice the tap reads in every window is folded into the result
(max, or sum and count), with masks saying which points are input and which are padding.
A max ignores padding; an average divides by the points of the window inside the padded
input (``count_include_pad``) or inside the input. A window with no point to count gives 0
(average) or the dtype's lowest value (max).

Output extent per spatial dimension, as TVM's pooling:
``floor_or_ceil((size + pad_before + pad_after - dilation * (kernel - 1) - 1) / stride) + 1``.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Sequence
from typing import Any

import numpy as np

__all__ = ["poolnd_python"]

_CHANNELS_FIRST = {3: "NCW", 4: "NCHW", 5: "NCDHW"}


def _lowest(dtype: np.dtype) -> Any:
    """The lowest finite value of ``dtype``."""
    return np.finfo(dtype).min if np.issubdtype(dtype, np.floating) else np.iinfo(dtype).min


def poolnd_python(np_data: np.ndarray, kernel: Sequence[int], strides: Sequence[int],
                  dilation: Sequence[int], padding_before: Sequence[int],
                  padding_after: Sequence[int], pool_type: str,
                  count_include_pad: bool = True, ceil_mode: bool = False,
                  dtype: str = "float32", layout: str | None = None) -> np.ndarray:
    """Max or average pooling over the spatial dimensions of 3-D, 4-D or 5-D data, as TVM's
    reference.

    Parameters
    ----------
    np_data : numpy.ndarray
        Channels first (NCW, NCHW, NCDHW), or in ``layout``.
    kernel, strides, dilation, padding_before, padding_after : sequence of int
        One entry per spatial dimension (in the order they appear in the layout).
    pool_type : {"max", "avg"}
    count_include_pad : bool
        For "avg": count padded points (True) or only input points (False).
    ceil_mode : bool
        Round the output extent up (TVM's rule: every window that starts inside the padded
        input or past it counts, none is dropped).
    dtype : str
        The result's dtype.
    layout : str, optional
        The layout of ``np_data`` and of the result, e.g. "NHWC" (default: channels first).

    Returns
    -------
    numpy.ndarray
    """
    if pool_type not in ("max", "avg"):
        raise ValueError(f"pool_type must be 'max' or 'avg', got {pool_type!r}")
    if np_data.ndim not in _CHANNELS_FIRST:
        raise ValueError(f"data must be 3-D, 4-D or 5-D, got shape {np_data.shape}")
    first = _CHANNELS_FIRST[np_data.ndim]
    if layout is not None and sorted(layout) != sorted(first):
        raise ValueError(f"layout {layout!r} must order the letters of {first!r}")
    to_first = [layout.index(d) for d in first] if layout else list(range(np_data.ndim))
    x = np_data.transpose(to_first).astype(np.float64)
    spatial = x.shape[2:]
    dims = len(spatial)
    params = [list(map(int, v)) for v in (kernel, strides, dilation, padding_before,
                                          padding_after)]
    if any(len(v) != dims for v in params):
        raise ValueError(f"kernel, strides, dilation and paddings need {dims} entries each")
    kernel, strides, dilation, before, after = params
    rounding = math.ceil if ceil_mode else math.floor
    out = [rounding((e + b + a - d * (k - 1) - 1) / s) + 1
           for e, k, s, d, b, a in zip(spatial, kernel, strides, dilation, before, after)]
    # room past the padding for the windows ceil_mode adds
    extra = [max(0, (o - 1) * s + d * (k - 1) + 1 - (e + b + a))
             for o, e, k, s, d, b, a in zip(out, spatial, kernel, strides, dilation, before,
                                             after)]
    widths = [(b, a + x_) for b, a, x_ in zip(before, after, extra)]
    padded = np.pad(x, [(0, 0), (0, 0), *widths])
    inside = np.pad(np.ones(spatial, dtype=bool), widths)  # input points
    in_padded = np.pad(np.ones([e + b + a for e, b, a in zip(spatial, before, after)],
                               dtype=bool), [(0, x_) for x_ in extra])  # input and padding
    counted = in_padded if count_include_pad else inside

    result = np.full((*x.shape[:2], *out), -np.inf if pool_type == "max" else 0.0)
    count = np.zeros(out)
    for tap in itertools.product(*(range(k) for k in kernel)):
        window = tuple(slice(r * d, r * d + s * (o - 1) + 1, s)
                       for r, d, s, o in zip(tap, dilation, strides, out))
        values, valid = padded[(slice(None), slice(None), *window)], inside[window]
        if pool_type == "max":
            result = np.maximum(result, np.where(valid, values, -np.inf))
        else:
            result += np.where(valid, values, 0.0)
            count += counted[window]
    result_dtype = np.dtype(dtype)
    if pool_type == "max":
        result = np.where(np.isneginf(result), _lowest(result_dtype), result)
    else:
        result = np.divide(result, count, out=np.zeros_like(result), where=count > 0)
    from_first = [first.index(d) for d in layout] if layout else list(range(np_data.ndim))
    return result.transpose(from_first).astype(result_dtype)
