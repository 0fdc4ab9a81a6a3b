"""2-D max and average pooling over the H and W dimensions of data in any layout (NCHW,
NHWC, NCHW16c, ...), as TVM's ``topi.nn.pool2d``.

Padding is never materialized: the window reduction carries a ``where=`` condition that
keeps only the in-bounds points, so padded points cannot win a max, add to a sum, or (later)
receive gradient. Average pooling divides the window sum by the number of points counted:
the whole window clipped to the padded input when ``count_include_pad``, else the in-bounds
points only (as PyTorch and TVM do). Tags are TVM's: ``pool_max``, ``pool_sum`` and, for the
average, ``elemwise``.
"""
from __future__ import annotations

import re
from typing import Any

from ... import te
from ...dtype import DType
from ...ir.expr import Expr
from ...ir.tensor import Tensor
from ..tag import ELEMWISE
from ..utils import compute_nd, pair
from .transform import (
    Window,
    check_bool,
    check_float,
    check_ndim,
    check_positive,
    in_bounds,
)
from .utils import window_padding

__all__ = ["pool", "pool2d"]

_POOL_TYPES = ("max", "avg")


def pool2d(data: Tensor, kernel: Any, stride: Any, dilation: Any, padding: Any,
           pool_type: str, ceil_mode: bool = False, layout: str = "NCHW",
           count_include_pad: bool = True) -> Tensor:
    """Max or average pooling over the H and W dimensions of ``data``.

    Window ``(h, w)`` covers the input points ``(h*sh - top + ry*dh, w*sw - left + rx*dw)``
    for ``ry < KH``, ``rx < KW``; the other dimensions are carried through.

    Parameters
    ----------
    data : Tensor
        In ``layout``: 4-D ``(N, C, H, W)`` for NCHW, ``(N, H, W, C)`` for NHWC.
    kernel : int or (int, int)
        Window size (KH, KW).
    stride : int or (int, int)
    dilation : int or (int, int)
    padding : int, (int, int), (int, int, int, int), "SAME" or "VALID"
        All sides, (height, width), or (top, left, bottom, right) as TVM's
        ``[pad_top, pad_left, pad_bottom, pad_right]``; the strings as for ``conv2d``
        (``topi.nn.utils.get_pad_tuple`` on the dilated window).
    pool_type : {"max", "avg"}
    ceil_mode : bool
        Round the output size up instead of down; as in PyTorch, a last window that would
        start in the right padding is dropped.
    layout : str
        One letter per dimension of ``data``, with ``H`` and ``W`` once each: "NCHW",
        "NHWC", "HWCN", or TVM's blocked forms such as "NCHW16c" (a lower-case letter, after
        an optional factor, is an inner dimension; H and W cannot be split).
    count_include_pad : bool
        For "avg": divide by the window size clipped to the padded input (True) or by the
        number of in-bounds points (False).

    Returns
    -------
    Tensor
        ``data``'s layout, with H and W replaced by OH and OW: ``pool_max``, or ``pool_avg``
        (which reads ``pool_sum``).

    Raises
    ------
    TypeError
        Arguments of the wrong kind.
    ValueError
        A rank that does not match the layout, an unknown pool_type or layout, non-positive
        kernel/stride/dilation, an empty output, a window lying entirely in the padding,
        "avg" on integers.

    Example
    -------
    >>> data = tex.placeholder((1, 3, 8, 8), name="data")
    >>> topi.nn.pool2d(data, (2, 2), (2, 2), (1, 1), 0, "max").shape
    (1, 3, 4, 4)
    >>> nhwc = tex.placeholder((1, 8, 8, 3), name="nhwc")
    >>> topi.nn.pool2d(nhwc, 3, 2, 1, "SAME", "avg", layout="NHWC").shape
    (1, 4, 4, 3)
    """
    op = "topi.nn.pool2d"
    letters = _pool_layout(layout, op)
    data = check_ndim(data, op, "data", len(letters), f"({', '.join(letters)})")
    if not isinstance(pool_type, str) or pool_type not in _POOL_TYPES:
        raise ValueError(f"{op}: pool_type must be 'max' or 'avg', got {pool_type!r}")
    if pool_type == "avg":
        check_float(data, op, "data")
    hd, wd = letters.index("H"), letters.index("W")
    rows, cols, include = _pool_windows(op, data, (hd, wd), kernel, stride, dilation, padding,
                                        ceil_mode, count_include_pad)
    ry = te.reduce_axis((0, rows.kernel), name="ry")
    rx = te.reduce_axis((0, cols.kernel), name="rx")
    out_shape = tuple(rows.out if d == hd else cols.out if d == wd else e
                      for d, e in enumerate(data.shape))
    names = _index_names(letters)

    def window(reducer: Any) -> Any:
        def fbody(idx: tuple[Expr, ...]) -> Expr:
            y, x = rows.index(idx[hd], ry), cols.index(idx[wd], rx)
            inside = in_bounds([rows.bounds_term(y), cols.bounds_term(x)])
            src = tuple(y if d == hd else x if d == wd else ix for d, ix in enumerate(idx))
            return reducer(data[src], axis=[ry, rx], where=inside)  # type: ignore[no-any-return]
        return fbody

    if pool_type == "max":
        return compute_nd(out_shape, window(te.max), "pool_max", "pool_max", names)
    total = compute_nd(out_shape, window(te.sum), "pool_sum", "pool_sum", names)
    return _average(total, (hd, wd), rows, cols, include, data.dtype, names)


def _pool_layout(layout: Any, op: str) -> list[str]:
    """The dimension letters of a pooling layout (``"NCHW16c"`` -> N, C, H, W, c), checked:
    H and W once each and not split, no upper-case letter twice."""
    if not isinstance(layout, str):
        raise TypeError(f"{op}: layout must be a string such as 'NCHW' or 'NHWC', got "
                        f"{type(layout).__name__} {layout!r}")
    letters = re.findall(r"\d*([A-Za-z])", layout)
    upper = [d for d in letters if d.isupper()]
    if (not letters or "".join(re.findall(r"\d*[A-Za-z]", layout)) != layout
            or upper.count("H") != 1 or upper.count("W") != 1 or len(set(upper)) != len(upper)
            or "h" in letters or "w" in letters):
        raise ValueError(f"{op}: layout {layout!r} is not supported; give one letter per "
                         "dimension with H and W once each and unsplit (e.g. 'NCHW', 'NHWC', "
                         "'NCHW16c')")
    return letters


def _index_names(letters: list[str]) -> list[str]:
    """Index variable names for a layout's dimensions: the letters in lower case, an inner
    (lower-case) dimension of a split one suffixed ``i`` (``NCHWc``: n, c, h, w, ci)."""
    names: list[str] = []
    for d in letters:
        name = d.lower()
        names.append(name + "i" if name in names else name)
    return names


def _pool_windows(op: str, data: Tensor, spatial: tuple[int, int], kernel: Any, stride: Any,
                  dilation: Any, padding: Any, ceil_mode: Any, count_include_pad: Any
                  ) -> tuple[Window, Window, bool]:
    """The row and column windows of a pooling and ``count_include_pad``, checked: positive
    kernel, stride and dilation, a valid padding, bools, a non-empty output and no window
    lying entirely in the padding."""
    kh, kw = pair(kernel, op, "kernel")
    sh, sw = pair(stride, op, "stride")
    dh, dw = pair(dilation, op, "dilation")
    for values, arg in (((kh, kw), "kernel"), ((sh, sw), "stride"), ((dh, dw), "dilation")):
        check_positive(values, op, arg)
    top, left, bottom, right = window_padding(padding, (dh * (kh - 1) + 1, dw * (kw - 1) + 1),
                                              op)
    ceil_mode = check_bool(ceil_mode, op, "ceil_mode")
    count_include_pad = check_bool(count_include_pad, op, "count_include_pad")
    h_, w_ = data.shape[spatial[0]], data.shape[spatial[1]]
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


def _average(total: Tensor, spatial: tuple[int, int], rows: Window, cols: Window,
             include_pad: bool, dtype: DType, names: list[str]) -> Tensor:
    """``pool_avg``: the window sums ``total`` divided by the points each window counts."""
    hd, wd = spatial

    def average(idx: tuple[Expr, ...]) -> Expr:
        # an int when every window counts the same, else an expression of (h, w)
        count = rows.count(idx[hd], include_pad) * cols.count(idx[wd], include_pad)
        divisor = float(count) if isinstance(count, int) else count.astype(dtype)
        return total[idx] / divisor

    return compute_nd(total.shape, average, "pool_avg", ELEMWISE, names)


def pool(data: Tensor, kernel: Any, stride: Any, padding: Any, pool_type: str,
         ceil_mode: bool = False, layout: str = "NCHW", count_include_pad: bool = True) -> Tensor:
    """Pooling without dilation: ``pool2d(data, kernel, stride, 1, padding, pool_type, ...)``
    (TVM's older signature), in any layout ``pool2d`` takes.

    Example
    -------
    >>> data = tex.placeholder((1, 3, 8, 8), name="data")
    >>> topi.nn.pool(data, 3, 1, 1, "avg").shape
    (1, 3, 8, 8)
    >>> topi.nn.pool(tex.placeholder((1, 8, 8, 3), name="x"), 2, 2, 0, "max", layout="NHWC").shape
    (1, 4, 4, 3)
    """
    return pool2d(data, kernel, stride, 1, padding, pool_type, ceil_mode=ceil_mode,
                  layout=layout, count_include_pad=count_include_pad)
