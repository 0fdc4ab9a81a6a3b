"""2-D convolution in any data layout, as TVM's ``topi.nn`` convolutions: ``conv2d`` (the
layout an argument), ``conv2d_nchw`` (OIHW kernel), ``conv2d_nhwc`` and ``conv2d_hwcn``
(HWIO kernels).

One compute serves every layout: the data layout orders the letters N, C, H, W (the output
has the same layout, C counting output channels), the kernel layout the letters O, I, H, W.
In NCHW/OIHW:

    conv2d_nchw[n, c, h, w] = sum(pad_temp[n, rc, h*sh + ry*dh, w*sw + rx*dw]
                                  * kernel[c, rc, ry, rx], rc, ry, rx)

where ``pad_temp`` is the data zero-padded (present only when some padding is non-zero).
The reduce axes follow the data layout (``rc, ry, rx`` for NCHW, ``ry, rx, rc`` for NHWC),
as TVM's do. Names and tags are TVM's: ``conv2d_<layout in lower case>``.
"""
from __future__ import annotations

from typing import Any

from ... import te
from ...dtype import DTYPES
from ...ir.expr import Expr
from ...ir.tensor import Tensor
from ..utils import compute_nd, pair
from .transform import (
    Window,
    check_layout,
    check_ndim,
    check_positive,
    check_same_dtype,
    out_dtype_of,
    pad_tensor,
)
from .utils import window_padding

__all__ = ["conv2d", "conv2d_hwcn", "conv2d_nchw", "conv2d_nhwc"]


def conv2d(data: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any = 1,
           layout: str = "NCHW", kernel_layout: str = "", out_dtype: Any = None, *,
           data_layout: str | None = None) -> Tensor:
    """2-D convolution (cross-correlation, as in every DL framework), in a chosen layout.

    ``out[n, c, h, w] = sum(pad_temp[n, rc, h*sh + ry*dh, w*sw + rx*dw] * kernel[c, rc, ry,
    rx])`` over input channels ``rc`` and kernel points ``ry, rx`` (written in NCHW/OIHW;
    other layouts permute the indices), where ``pad_temp`` is ``data`` with zero padding
    (a separate ``pad`` tensor, present only when some padding is non-zero).

    Parameters
    ----------
    data : Tensor
        4-D, in ``layout`` (``(N, C, H, W)`` for NCHW, ``(N, H, W, C)`` for NHWC).
    kernel : Tensor
        4-D, in ``kernel_layout`` (``(O, I, KH, KW)`` for OIHW, ``(KH, KW, I, O)`` for HWIO).
    stride : int or (int, int)
        Step between windows, (height, width).
    padding : int, (int, int), (int, int, int, int), "SAME" or "VALID"
        Zero padding: all sides, (height, width), (top, left, bottom, right), or TVM's
        strings (``topi.nn.utils.get_pad_tuple`` on the dilated kernel: "SAME" gives
        ``ceil(H / sh)`` output rows, the odd point of padding on top/left).
    dilation : int or (int, int)
        Spacing between kernel points.
    layout : str
        The data (and output) layout: any order of the letters N, C, H, W ("NCHW",
        "NHWC", "HWCN", ...). ``data_layout=`` is TVM's name for it.
    kernel_layout : str
        Any order of O, I, H, W; ``""`` (the default) means "OIHW" when C comes before H and
        W in ``layout``, else "HWIO", as in TVM.
    out_dtype : str, optional
        Accumulation and output dtype (default: the inputs' dtype).

    Returns
    -------
    Tensor
        ``conv2d_<layout>`` (e.g. ``conv2d_nchw`` of shape ``(N, O, OH, OW)``) with
        ``OH = floor((H + top + bottom - dh*(KH-1) - 1) / sh) + 1`` (likewise OW).

    Raises
    ------
    TypeError
        Arguments of the wrong kind.
    ValueError
        Wrong ranks, a channel mismatch, dtypes that differ, non-positive stride or dilation,
        negative padding or an unknown padding string, an empty output, a layout that is
        not an order of its letters.

    Example
    -------
    >>> data = tex.placeholder((1, 3, 8, 8), name="data")
    >>> kernel = tex.placeholder((4, 3, 3, 3), name="kernel")
    >>> topi.nn.conv2d(data, kernel, stride=1, padding=1).shape
    (1, 4, 8, 8)
    >>> nhwc = tex.placeholder((1, 8, 8, 3), name="nhwc")
    >>> hwio = tex.placeholder((3, 3, 3, 4), name="hwio")
    >>> topi.nn.conv2d(nhwc, hwio, 2, "SAME", layout="NHWC").shape
    (1, 4, 4, 4)
    """
    if data_layout is not None:
        layout = data_layout
    return _conv("topi.nn.conv2d", data, kernel, stride, padding, dilation, layout,
                 kernel_layout, out_dtype)


def conv2d_nchw(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                out_dtype: Any = None) -> Tensor:
    """Convolution of NCHW data with an OIHW kernel (TVM's ``topi.nn.conv2d_nchw``).

    ``conv2d(Input, Filter, stride, padding, dilation, "NCHW", "OIHW", out_dtype)``: shape
    ``(N, O, OH, OW)``, named and tagged ``conv2d_nchw``.

    Example
    -------
    >>> A = tex.placeholder((1, 3, 7, 7), name="A")
    >>> W = tex.placeholder((4, 3, 3, 3), name="W")
    >>> topi.nn.conv2d_nchw(A, W, 2, "SAME", 1).shape
    (1, 4, 4, 4)
    """
    return _conv("topi.nn.conv2d_nchw", Input, Filter, stride, padding, dilation, "NCHW",
                 "OIHW", out_dtype, ("Input", "Filter"))


def conv2d_nhwc(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                out_dtype: Any = "float32", auto_scheduler_rewritten_layout: str = "",
                meta_schedule_original_shape: Any = None) -> Tensor:
    """Convolution of NHWC data with an HWIO kernel (TVM's ``topi.nn.conv2d_nhwc``).

    ``conv2d(Input, Filter, stride, padding, dilation, "NHWC", "HWIO", out_dtype)``: shape
    ``(N, OH, OW, O)``, named and tagged ``conv2d_nhwc``. As in TVM, ``out_dtype``
    defaults to float32. TVM's auto-scheduler arguments are accepted only empty: tex
    schedules with ``tex.schedule.auto_schedule``.

    Example
    -------
    >>> A = tex.placeholder((1, 7, 7, 3), name="A")
    >>> W = tex.placeholder((3, 3, 3, 4), name="W")
    >>> topi.nn.conv2d_nhwc(A, W, 1, "VALID", 1).shape
    (1, 5, 5, 4)
    """
    op = "topi.nn.conv2d_nhwc"
    if auto_scheduler_rewritten_layout or meta_schedule_original_shape is not None:
        raise ValueError(f"{op}: auto_scheduler_rewritten_layout and "
                         "meta_schedule_original_shape are not supported; tex schedules "
                         "with tex.schedule.auto_schedule(outputs, target)")
    return _conv(op, Input, Filter, stride, padding, dilation, "NHWC", "HWIO", out_dtype,
                 ("Input", "Filter"))


def conv2d_hwcn(Input: Tensor, Filter: Tensor, stride: Any, padding: Any, dilation: Any,
                out_dtype: Any = None) -> Tensor:
    """Convolution of HWCN data with an HWIO kernel (TVM's ``topi.nn.conv2d_hwcn``).

    ``conv2d(Input, Filter, stride, padding, dilation, "HWCN", "HWIO", out_dtype)``: shape
    ``(OH, OW, O, N)``, named and tagged ``conv2d_hwcn``.

    Example
    -------
    >>> A = tex.placeholder((7, 7, 3, 2), name="A")
    >>> W = tex.placeholder((3, 3, 3, 4), name="W")
    >>> topi.nn.conv2d_hwcn(A, W, 1, 1, 1).shape
    (7, 7, 4, 2)
    """
    return _conv("topi.nn.conv2d_hwcn", Input, Filter, stride, padding, dilation, "HWCN",
                 "HWIO", out_dtype, ("Input", "Filter"))


def _kernel_layout(kernel_layout: Any, layout: str, op: str) -> str:
    """The kernel layout, checked; ``""`` picks TVM's default for ``layout``."""
    if isinstance(kernel_layout, str) and kernel_layout == "":
        return "OIHW" if layout.index("C") < min(layout.index("H"), layout.index("W")) \
            else "HWIO"
    if isinstance(kernel_layout, str) and kernel_layout in DTYPES:
        raise ValueError(f"{op}: kernel_layout {kernel_layout!r} is a dtype; the argument "
                         "after layout is kernel_layout (as in TVM): pass out_dtype=...")
    return check_layout(kernel_layout, op, "OIHW", "kernel_layout")


def _conv(op: str, data: Tensor, kernel: Tensor, stride: Any, padding: Any, dilation: Any,
          layout: Any, kernel_layout: Any, out_dtype: Any,
          arg_names: tuple[str, str] = ("data", "kernel")) -> Tensor:
    """The convolution of ``data`` (in ``layout``) with ``kernel`` (in ``kernel_layout``),
    every argument checked; errors call the tensors by ``arg_names``."""
    layout = check_layout(layout, op, "NCHW")
    klayout = _kernel_layout(kernel_layout, layout, op)
    data_arg, kernel_arg = arg_names
    data = check_ndim(data, op, data_arg, 4, f"({', '.join(layout)})")
    kernel = check_ndim(kernel, op, kernel_arg, 4,
                        "(" + ", ".join("K" + d if d in "HW" else d for d in klayout) + ")")
    check_same_dtype(op, **{data_arg: data, kernel_arg: kernel})
    dims = dict(zip(layout, data.shape))
    kdims = dict(zip(klayout, kernel.shape))
    rows, cols = _windows(op, dims, kdims, stride, padding, dilation,
                          f"{data_arg} {data.shape}, {kernel_arg} {kernel.shape}",
                          f"({data_arg} {data.shape} in {layout}, {kernel_arg} "
                          f"{kernel.shape} in {klayout})", (data_arg, kernel_arg))
    dtype = out_dtype_of(out_dtype, data.dtype, op)
    padded = _pad_input(data, layout, rows, cols)

    reduce = {"C": te.reduce_axis((0, dims["C"]), name="rc"),
              "H": te.reduce_axis((0, rows.kernel), name="ry"),
              "W": te.reduce_axis((0, cols.kernel), name="rx")}
    axes = [reduce[d] for d in layout if d != "N"]  # in the data layout's order, as TVM
    sh, sw, dh, dw = rows.stride, cols.stride, rows.dilation, cols.dilation
    ry, rx, rc = reduce["H"], reduce["W"], reduce["C"]

    def fbody(idx: tuple[Expr, ...]) -> Expr:
        out = dict(zip(layout, idx))
        # pad_temp already holds the padding: window o starts at o*stride in it
        src = {"N": out["N"], "C": rc, "H": out["H"] * sh + ry * dh, "W": out["W"] * sw + rx * dw}
        taps = {"O": out["C"], "I": rc, "H": ry, "W": rx}
        value = (padded[tuple(src[d] for d in layout)].astype(dtype)
                 * kernel[tuple(taps[d] for d in klayout)].astype(dtype))
        return te.sum(value, axis=axes)  # type: ignore[no-any-return]

    shape = {"N": dims["N"], "C": kdims["O"], "H": rows.out, "W": cols.out}
    name = f"conv2d_{layout.lower()}"
    return compute_nd(tuple(shape[d] for d in layout), fbody, name, name,
                      names=[d.lower() for d in layout])


def _windows(op: str, dims: dict[str, int], kdims: dict[str, int], stride: Any, padding: Any,
             dilation: Any, shapes: str, layouts: str, args: tuple[str, str]
             ) -> tuple[Window, Window]:
    """The row and column windows of a convolution, checked: positive stride and dilation,
    a valid padding, matching channels (``args`` name the tensors, ``layouts`` their shapes
    and layouts) and a non-empty output."""
    sh, sw = pair(stride, op, "stride")
    dh, dw = pair(dilation, op, "dilation")
    check_positive((sh, sw), op, "stride")
    check_positive((dh, dw), op, "dilation")
    kh, kw = kdims["H"], kdims["W"]
    top, left, bottom, right = window_padding(padding, (dh * (kh - 1) + 1, dw * (kw - 1) + 1),
                                              op)
    if kdims["I"] != dims["C"]:
        raise ValueError(f"{op}: {args[0]} has {dims['C']} channels but {args[1]} expects "
                         f"{kdims['I']} {layouts}")
    rows = Window.make(op, "height", dims["H"], kh, sh, dh, top, bottom, context=shapes)
    cols = Window.make(op, "width", dims["W"], kw, sw, dw, left, right, context=shapes)
    return rows, cols


def _pad_input(data: Tensor, layout: str, rows: Window, cols: Window) -> Tensor:
    """``pad_temp``, ``data`` with the windows' zero padding, or ``data`` itself when no
    side is padded."""
    before = {"H": rows.pad_before, "W": cols.pad_before}
    after = {"H": rows.pad_after, "W": cols.pad_after}
    if not any((*before.values(), *after.values())):
        return data
    return pad_tensor(data, [before.get(d, 0) for d in layout], [after.get(d, 0) for d in layout],
                      0.0, "pad_temp", [d.lower() for d in layout])
