"""2-D convolution (NCHW data, OIHW kernel), as TVM's ``topi.nn.conv2d_nchw``."""
from __future__ import annotations

from typing import Any

from ... import te
from ...ir.expr import Expr
from ...ir.tensor import Tensor
from ..utils import padding4, pair
from .transform import (
    Window,
    check_layout,
    check_ndim,
    check_positive,
    check_same_dtype,
    out_dtype_of,
    pad_tensor,
)

__all__ = ["conv2d"]


def conv2d(data: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any = 1,
           layout: str = "NCHW", out_dtype: Any = None) -> Tensor:
    """2-D convolution (cross-correlation, as in every DL framework).

    ``out[n, c, h, w] = sum(pad_temp[n, rc, h*sh + ry*dh, w*sw + rx*dw] * kernel[c, rc, ry,
    rx])`` over input channels ``rc`` and kernel points ``ry, rx``, where ``pad_temp`` is
    ``data`` with zero padding (a separate ``pad`` tensor, present only when some padding
    is non-zero).

    Parameters
    ----------
    data : Tensor
        4-D ``(N, C, H, W)``.
    kernel : Tensor
        4-D ``(O, C, KH, KW)``.
    stride : int or (int, int)
        Step between windows, (height, width).
    padding : int, (int, int) or (int, int, int, int)
        Zero padding: all sides, (height, width), or (top, left, bottom, right).
    dilation : int or (int, int)
        Spacing between kernel points.
    layout : str
        Only ``"NCHW"``.
    out_dtype : str, optional
        Accumulation and output dtype (default: the inputs' dtype).

    Returns
    -------
    Tensor
        ``conv2d_nchw`` of shape ``(N, O, OH, OW)`` with
        ``OH = floor((H + top + bottom - dh*(KH-1) - 1) / sh) + 1`` (likewise OW).

    Raises
    ------
    TypeError
        Arguments of the wrong kind.
    ValueError
        Wrong ranks, a channel mismatch, dtypes that differ, non-positive stride or dilation,
        negative padding, an empty output, a layout other than NCHW.

    Example
    -------
    >>> data = tex.placeholder((1, 3, 8, 8), name="data")
    >>> kernel = tex.placeholder((4, 3, 3, 3), name="kernel")
    >>> topi.nn.conv2d(data, kernel, stride=1, padding=1).shape
    (1, 4, 8, 8)
    """
    op = "topi.nn.conv2d"
    check_layout(layout, op)
    data = check_ndim(data, op, "data", 4, "(N, C, H, W)")
    kernel = check_ndim(kernel, op, "kernel", 4, "(O, C, KH, KW)")
    check_same_dtype(op, data=data, kernel=kernel)
    rows, cols = _conv_windows(op, data, kernel, stride, padding, dilation)
    dtype = out_dtype_of(out_dtype, data.dtype, op)
    padded = _pad_input(data, rows, cols)

    rc = te.reduce_axis((0, data.shape[1]), name="rc")
    ry = te.reduce_axis((0, rows.kernel), name="ry")
    rx = te.reduce_axis((0, cols.kernel), name="rx")
    sh, sw, dh, dw = rows.stride, cols.stride, rows.dilation, cols.dilation

    def fcompute(n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
        # pad_temp already holds the padding: window o starts at o*stride in it
        y = h * sh + ry * dh
        x = w * sw + rx * dw
        value = padded[n, rc, y, x].astype(dtype) * kernel[c, rc, ry, rx].astype(dtype)
        return te.sum(value, axis=[rc, ry, rx])

    return te.compute((data.shape[0], kernel.shape[0], rows.out, cols.out), fcompute,
                      name="conv2d_nchw", tag="conv2d_nchw")


def _conv_windows(op: str, data: Tensor, kernel: Tensor, stride: Any, padding: Any,
                  dilation: Any) -> tuple[Window, Window]:
    """The row and column windows of a convolution, checked: positive stride and dilation,
    non-negative padding, matching channels and a non-empty output."""
    sh, sw = pair(stride, op, "stride")
    dh, dw = pair(dilation, op, "dilation")
    check_positive((sh, sw), op, "stride")
    check_positive((dh, dw), op, "dilation")
    top, left, bottom, right = padding4(padding, op)
    _, c_, h_, w_ = data.shape
    _, kc, kh, kw = kernel.shape
    if kc != c_:
        raise ValueError(f"{op}: data has {c_} channels but kernel expects {kc} "
                         f"(data {data.shape}, kernel {kernel.shape})")
    shapes = f"data {data.shape}, kernel {kernel.shape}"
    rows = Window.make(op, "height", h_, kh, sh, dh, top, bottom, context=shapes)
    cols = Window.make(op, "width", w_, kw, sw, dw, left, right, context=shapes)
    return rows, cols


def _pad_input(data: Tensor, rows: Window, cols: Window) -> Tensor:
    """``pad_temp``, ``data`` with the windows' zero padding, or ``data`` itself when no
    side is padded."""
    before, after = (rows.pad_before, cols.pad_before), (rows.pad_after, cols.pad_after)
    if not any((*before, *after)):
        return data
    return pad_tensor(data, (0, 0, *before), (0, 0, *after), 0.0, "pad_temp",
                      ("n", "c", "h", "w"))
