"""NumPy references for 2-D convolutions under TVM's ``topi.testing`` names: NCHW, NHWC,
HWCN (grouped where TVM's are), depthwise, and ``dilate_python`` (a kernel's dilation).

Method: the data is zero-padded with ``np.pad``; then, per kernel tap ``(ry, rx)``, the
strided slice of the padded data that the tap reads in every window is contracted with the
tap's kernel slice over the input channels (``np.einsum`` in float64). Every layout is
transposed to NCHW/OIHW first and the result back. Padding is TVM's
``get_pad_tuple(padding, (KH, KW))``: an int, a pair (height, width), a 4-tuple (top, left,
bottom, right), "VALID", or "SAME" (``K - 1`` points in all, the odd one on top/left).
"""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = [
    "conv2d_hwcn_python",
    "conv2d_nchw_python",
    "conv2d_nhwc_python",
    "depthwise_conv2d_python_nchw",
    "depthwise_conv2d_python_nhwc",
    "dilate_python",
]


def _pair(value: Any) -> tuple[int, int]:
    """An int or a pair of ints as a pair."""
    return (int(value), int(value)) if np.ndim(value) == 0 else (int(value[0]), int(value[1]))


def _pad_tuple(padding: Any, kh: int, kw: int) -> tuple[int, int, int, int]:
    """(top, left, bottom, right) of ``padding`` for a ``kh`` x ``kw`` window."""
    if isinstance(padding, str):
        if padding not in ("SAME", "VALID"):
            raise ValueError(f"padding must be 'SAME', 'VALID' or ints, got {padding!r}")
        total_h, total_w = (kh - 1, kw - 1) if padding == "SAME" else (0, 0)
        top, left = (total_h + 1) // 2, (total_w + 1) // 2
        return top, left, total_h - top, total_w - left
    if np.ndim(padding) == 0:
        return (int(padding),) * 4  # type: ignore[return-value]
    if len(padding) == 2:
        return int(padding[0]), int(padding[1]), int(padding[0]), int(padding[1])
    if len(padding) == 4:
        return tuple(int(p) for p in padding)  # type: ignore[return-value]
    raise ValueError(f"padding must be an int, a pair or a 4-tuple, got {padding!r}")


def _taps(a_nchw: np.ndarray, kh: int, kw: int, stride: Any, padding: Any
          ) -> tuple[np.ndarray, list[tuple[int, int, np.ndarray]]]:
    """The padded float64 data and, per kernel tap, (ry, rx, the slice it reads in every
    window: shape (N, C, OH, OW))."""
    sh, sw = _pair(stride)
    top, left, bottom, right = _pad_tuple(padding, kh, kw)
    padded = np.pad(a_nchw.astype(np.float64), ((0, 0), (0, 0), (top, bottom), (left, right)))
    oh = (padded.shape[2] - kh) // sh + 1
    ow = (padded.shape[3] - kw) // sw + 1
    if oh < 1 or ow < 1:
        raise ValueError(f"the {kh}x{kw} kernel does not fit the padded input "
                         f"{padded.shape[2:]}: the output would be empty")
    return padded, [(ry, rx, padded[:, :, ry:ry + sh * (oh - 1) + 1:sh,
                                    rx:rx + sw * (ow - 1) + 1:sw])
                    for ry in range(kh) for rx in range(kw)]


def _conv_nchw(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any) -> np.ndarray:
    """One group: NCHW data, OIHW kernel, float64 result."""
    o, c, kh, kw = w_np.shape
    if a_np.shape[1] != c:
        raise ValueError(f"data has {a_np.shape[1]} channels but the kernel expects {c}")
    _, taps = _taps(a_np, kh, kw, stride, padding)
    out = 0.0
    for ry, rx, window in taps:
        out = out + np.einsum("nchw,oc->nohw", window, w_np[:, :, ry, rx].astype(np.float64))
    return np.asarray(out)


def _grouped(a_nchw: np.ndarray, w_oihw: np.ndarray, stride: Any, padding: Any,
             groups: int) -> np.ndarray:
    """Grouped NCHW convolution: group ``g`` convolves its share of the input channels with
    its share of the output channels."""
    if a_nchw.shape[1] % groups or w_oihw.shape[0] % groups:
        raise ValueError(f"groups={groups} must divide the input channels "
                         f"({a_nchw.shape[1]}) and the output channels ({w_oihw.shape[0]})")
    parts = zip(np.split(a_nchw, groups, axis=1), np.split(w_oihw, groups, axis=0))
    return np.concatenate([_conv_nchw(a, w, stride, padding) for a, w in parts], axis=1)


def conv2d_nchw_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                       groups: int = 1) -> np.ndarray:
    """Convolution of NCHW data with an OIHW kernel, as TVM's reference.

    Parameters
    ----------
    a_np : numpy.ndarray
        ``(batch, in_channel, in_height, in_width)``.
    w_np : numpy.ndarray
        ``(num_filter, in_channel // groups, filter_height, filter_width)``.
    stride : int or (int, int)
    padding : int, (int, int), (int, int, int, int), "SAME" or "VALID"
    groups : int
        Channel groups (``in_channel`` and ``num_filter`` divisible by it).

    Returns
    -------
    numpy.ndarray
        ``(batch, num_filter, out_height, out_width)`` in ``a_np``'s dtype.
    """
    return _grouped(a_np, w_np, stride, padding, groups).astype(a_np.dtype)


def conv2d_nhwc_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any,
                       groups: int = 1) -> np.ndarray:
    """Convolution of NHWC data with an HWIO kernel, as TVM's reference.

    Parameters
    ----------
    a_np : numpy.ndarray
        ``(batch, in_height, in_width, in_channel)``.
    w_np : numpy.ndarray
        ``(filter_height, filter_width, in_channel // groups, num_filter)``.
    stride, padding, groups
        As for :func:`conv2d_nchw_python`.

    Returns
    -------
    numpy.ndarray
        ``(batch, out_height, out_width, num_filter)`` in ``a_np``'s dtype.
    """
    out = _grouped(a_np.transpose(0, 3, 1, 2), w_np.transpose(3, 2, 0, 1), stride, padding,
                   groups)
    return out.transpose(0, 2, 3, 1).astype(a_np.dtype)


def conv2d_hwcn_python(a_np: np.ndarray, w_np: np.ndarray, stride: Any, padding: Any
                       ) -> np.ndarray:
    """Convolution of HWCN data with an HWIO kernel, as TVM's reference.

    Parameters
    ----------
    a_np : numpy.ndarray
        ``(in_height, in_width, in_channel, batch)``.
    w_np : numpy.ndarray
        ``(filter_height, filter_width, in_channel, num_filter)``.
    stride, padding
        As for :func:`conv2d_nchw_python`.

    Returns
    -------
    numpy.ndarray
        ``(out_height, out_width, num_filter, batch)`` in ``a_np``'s dtype.
    """
    out = _conv_nchw(a_np.transpose(3, 2, 0, 1), w_np.transpose(3, 2, 0, 1), stride, padding)
    return out.transpose(2, 3, 1, 0).astype(a_np.dtype)


def depthwise_conv2d_python_nchw(input_np: np.ndarray, filter_np: np.ndarray, stride: Any,
                                 padding: Any) -> np.ndarray:
    """Depthwise convolution, NCHW: output channel ``c * M + m`` convolves input channel
    ``c`` with ``filter_np[c, m]`` alone, as TVM's reference.

    Parameters
    ----------
    input_np : numpy.ndarray
        ``(batch, in_channel, in_height, in_width)``.
    filter_np : numpy.ndarray
        ``(in_channel, channel_multiplier, filter_height, filter_width)``.
    stride : int or (int, int)
    padding : int, (int, int), (int, int, int, int), "SAME" or "VALID"

    Returns
    -------
    numpy.ndarray
        ``(batch, in_channel * channel_multiplier, out_height, out_width)``, float64 (as
        TVM's).
    """
    c, m, kh, kw = filter_np.shape
    if input_np.shape[1] != c:
        raise ValueError(f"data has {input_np.shape[1]} channels but the filter has {c}")
    _, taps = _taps(input_np, kh, kw, stride, padding)
    out = 0.0
    for ry, rx, window in taps:
        out = out + np.einsum("nchw,cm->ncmhw", window,
                              filter_np[:, :, ry, rx].astype(np.float64))
    out = np.asarray(out)
    n, _, _, oh, ow = out.shape
    return out.reshape(n, c * m, oh, ow)


def depthwise_conv2d_python_nhwc(input_np: np.ndarray, filter_np: np.ndarray, stride: Any,
                                 padding: Any) -> np.ndarray:
    """Depthwise convolution, NHWC data and an ``(KH, KW, in_channel, channel_multiplier)``
    filter: :func:`depthwise_conv2d_python_nchw` transposed, as TVM's reference."""
    out = depthwise_conv2d_python_nchw(input_np.transpose(0, 3, 1, 2),
                                       filter_np.transpose(2, 3, 0, 1), stride, padding)
    return out.transpose(0, 2, 3, 1)


def dilate_python(input_np: np.ndarray, strides: Any, dilation_value: float = 0.0,
                  out_dtype: Any = None) -> np.ndarray:
    """``input_np`` spread out: element ``idx`` moves to ``idx * strides``, the points
    between are ``dilation_value`` (TVM's reference; a kernel dilated by ``d`` is
    ``dilate_python(w, (1, 1, d, d))`` in OIHW).

    Parameters
    ----------
    input_np : numpy.ndarray
        Any rank and layout.
    strides : sequence of int
        One per dimension, 1 meaning unchanged.
    dilation_value : float
        The fill between the elements.
    out_dtype : str, optional
        Default: ``input_np``'s dtype.

    Returns
    -------
    numpy.ndarray
        Extent ``(e - 1) * stride + 1`` in each dimension.
    """
    if len(strides) != input_np.ndim:
        raise ValueError(f"strides {tuple(strides)} must have one entry per dimension of "
                         f"the input (shape {input_np.shape})")
    shape = tuple((e - 1) * int(s) + 1 for e, s in zip(input_np.shape, strides))
    out = np.full(shape, dilation_value,
                  dtype=input_np.dtype if out_dtype is None else out_dtype)
    out[tuple(slice(None, None, int(s)) for s in strides)] = input_np
    return out
