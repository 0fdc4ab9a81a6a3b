"""2-D max and average pooling over NCHW data, as TVM's ``topi.nn.pool2d``.

Padding is never materialized: the window reduction carries a ``where=`` condition that
keeps only the in-bounds points, so padded points cannot win a max, add to a sum, or (later)
receive gradient. Average pooling divides the window sum by the number of points counted:
the whole window clipped to the padded input when ``count_include_pad``, else the in-bounds
points only (as PyTorch and TVM do).
"""
from __future__ import annotations

from typing import Any

from ... import te
from ...dtype import DType
from ...ir.expr import Expr
from ...ir.tensor import Tensor
from ..utils import padding4, pair
from .transform import (
    Window,
    check_bool,
    check_float,
    check_layout,
    check_ndim,
    check_positive,
    in_bounds,
)

__all__ = ["pool", "pool2d"]

_POOL_TYPES = ("max", "avg")


def pool2d(data: Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any,
           pool_type: str, ceil_mode: bool = False, layout: str = "NCHW",
           count_include_pad: bool = True) -> Tensor:
    """Max or average pooling over the H and W dimensions of NCHW data.

    Window ``(h, w)`` covers the input points ``(h*sh - top + ry*dh, w*sw - left + rx*dw)``
    for ``ry < KH``, ``rx < KW``.

    Parameters
    ----------
    data : Tensor
        4-D ``(N, C, H, W)``.
    kernel : int or (int, int)
        Window size (KH, KW).
    stride : int or (int, int)
    dilation : int or (int, int)
    padding : int, (int, int) or (int, int, int, int)
        All sides, (height, width), or (top, left, bottom, right).
    pool_type : {"max", "avg"}
    ceil_mode : bool
        Round the output size up instead of down; as in PyTorch, a last window that would
        start in the right padding is dropped.
    layout : str
        Only ``"NCHW"``.
    count_include_pad : bool
        For "avg": divide by the window size clipped to the padded input (True) or by the
        number of in-bounds points (False).

    Returns
    -------
    Tensor
        ``(N, C, OH, OW)``: ``pool_max``, or ``pool_avg`` (which reads ``pool_sum``).

    Raises
    ------
    TypeError
        Arguments of the wrong kind.
    ValueError
        Not 4-D, an unknown pool_type or layout, non-positive kernel/stride/dilation, an
        empty output, a window lying entirely in the padding, "avg" on integers.

    Example
    -------
    >>> data = tex.placeholder((1, 3, 8, 8), name="data")
    >>> topi.nn.pool2d(data, (2, 2), (2, 2), (1, 1), 0, "max").shape
    (1, 3, 4, 4)
    """
    op = "topi.nn.pool2d"
    check_layout(layout, op)
    data = check_ndim(data, op, "data", 4, "(N, C, H, W)")
    if not isinstance(pool_type, str) or pool_type not in _POOL_TYPES:
        raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if pool_type == "avg":
        check_float(data, op, "data")
    rows, cols, include = _pool_windows(op, data, kernel, stride, dilation, padding, ceil_mode,
                                        count_include_pad)
    ry = te.reduce_axis((0, rows.kernel), name="ry")
    rx = te.reduce_axis((0, cols.kernel), name="rx")
    out_shape = (data.shape[0], data.shape[1], rows.out, cols.out)

    def window(reducer: Any) -> Any:
        def fcompute(n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
            y, x = rows.index(h, ry), cols.index(w, rx)
            inside = in_bounds([rows.bounds_term(y), cols.bounds_term(x)])
            return reducer(data[n, c, y, x], axis=[ry, rx], where=inside)
        return fcompute

    if pool_type == "max":
        return te.compute(out_shape, window(te.max), name="pool_max", tag="pool_max")
    total = te.compute(out_shape, window(te.sum), name="pool_sum", tag="pool_sum")
    return _average(total, rows, cols, include, data.dtype)


def _pool_windows(op: str, data: Tensor, kernel: Any, stride: Any, dilation: Any,
                  padding: Any, ceil_mode: Any, count_include_pad: Any
                  ) -> tuple[Window, Window, bool]:
    """The row and column windows of a pooling and ``count_include_pad``, checked: positive
    kernel, stride and dilation, non-negative padding, bools, a non-empty output and no
    window lying entirely in the padding."""
    kh, kw = pair(kernel, op, "kernel")
    sh, sw = pair(stride, op, "stride")
    dh, dw = pair(dilation, op, "dilation")
    for values, arg in (((kh, kw), "kernel"), ((sh, sw), "stride"), ((dh, dw), "dilation")):
        check_positive(values, op, arg)
    top, left, bottom, right = padding4(padding, op)
    ceil_mode = check_bool(ceil_mode, op, "ceil_mode")
    count_include_pad = check_bool(count_include_pad, op, "count_include_pad")
    _, _, h_, w_ = data.shape
    shapes = f"data {data.shape}, kernel {(kh, kw)}"
    rows = Window.make(op, "height", h_, kh, sh, dh, top, bottom, bool(ceil_mode), shapes)
    cols = Window.make(op, "width", w_, kw, sw, dw, left, right, bool(ceil_mode), shapes)
    for win, what in ((rows, "row"), (cols, "column")):
        # such a window would have no value to take the max of, and nothing to average
        counts = win.counts(include_pad=False)
        if 0 in counts:
            raise ValueError(f"{op}: the window of output {what} {counts.index(0)} lies "
                             f"entirely in the padding ({shapes}, stride {(sh, sw)}, "
                             f"dilation {(dh, dw)}, padding {(top, left, bottom, right)}); "
                             "use a smaller padding")
    return rows, cols, bool(count_include_pad)


def _average(total: Tensor, rows: Window, cols: Window, include_pad: bool,
             dtype: DType) -> Tensor:
    """``pool_avg``: the window sums ``total`` divided by the points each window counts."""
    def average(n: Expr, c: Expr, h: Expr, w: Expr) -> Expr:
        # an int when every window counts the same, else an expression of (h, w)
        count = rows.count(h, include_pad) * cols.count(w, include_pad)
        divisor = float(count) if isinstance(count, int) else count.astype(dtype)
        return total[n, c, h, w] / divisor

    return te.compute(total.shape, average, name="pool_avg", tag="pool_avg")


def pool(data: Tensor, kernel: Any, stride: Any, padding: Any, pool_type: str,
         ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True) -> Tensor:
    """Pooling without dilation: ``pool2d(data, kernel, stride, 1, padding, pool_type, ...)``.

    Example
    -------
    >>> data = tex.placeholder((1, 3, 8, 8), name="data")
    >>> topi.nn.pool(data, 3, 1, 1, "avg").shape
    (1, 3, 8, 8)
    """
    return pool2d(data, kernel, stride, 1, padding, pool_type, ceil_mode=ceil_mode,
                  layout=layout, count_include_pad=count_include_pad)
