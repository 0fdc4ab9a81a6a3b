"""Padding specs of the window ops, TVM's ``topi.nn.utils``: ``get_pad_tuple``, and
``window_padding``, the checked form through which conv2d and pool2d read ``padding``.

A padding is one of:

- an int: every side;
- a pair ``(height, width)``: top and bottom, left and right;
- a 4-tuple ``(top, left, bottom, right)``;
- TVM's strings ``"VALID"`` (no padding) and ``"SAME"``: ``kernel - 1`` points in all along
  each dimension (``kernel`` dilated: ``dilation * (kernel - 1) + 1``), so an output has
  ``ceil(size / stride)`` points (``size`` at stride 1). An odd total puts the extra point
  *before* (top, left), as TVM's ``get_pad_tuple`` does (TensorFlow puts it after).

Example: kernel 4 with "SAME" pads (2, 1): two rows on top, one at the bottom.
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from ..utils import is_int, pair

__all__ = ["PADDING_STRINGS", "get_pad_tuple", "window_padding"]

PADDING_STRINGS = ("SAME", "VALID")


def window_padding(padding: Any, kernel: Sequence[int], op: str
                   ) -> tuple[int, int, int, int]:
    """``padding`` as ``(top, left, bottom, right)`` for a window of ``kernel`` points
    (``(height, width)``, dilation included), checked: TypeError for a padding of the wrong
    kind, ValueError for a negative one, a tuple of the wrong length or an unknown string;
    the messages name ``op`` and ``padding``."""
    kh, kw = (int(k) for k in kernel)
    if isinstance(padding, str):
        if padding == "VALID":
            return 0, 0, 0, 0
        if padding == "SAME":
            total_h, total_w = kh - 1, kw - 1
            top, left = (total_h + 1) // 2, (total_w + 1) // 2
            return top, left, total_h - top, total_w - left
        raise ValueError(f"{op}: padding {padding!r} is not a padding string; use 'SAME' or "
                         "'VALID' (upper case, as TVM), or ints")
    values = list(padding) if isinstance(padding, (list, tuple)) else [padding]
    for v in values:
        if not is_int(v):
            raise TypeError(f"{op}: padding must be ints or one of 'SAME', 'VALID', got "
                            f"{padding!r}")
        if v < 0:
            raise ValueError(f"{op}: padding must be non-negative, got {padding!r}")
    if len(values) == 1:
        return (int(values[0]),) * 4  # type: ignore[return-value]
    if len(values) == 2:
        return int(values[0]), int(values[1]), int(values[0]), int(values[1])
    if len(values) == 4:
        return tuple(int(v) for v in values)  # type: ignore[return-value]
    raise ValueError(f"{op}: padding must be an int, a pair or a 4-tuple (top, left, bottom, "
                     f"right), or one of 'SAME', 'VALID', got {padding!r}")


def get_pad_tuple(padding: Any, kernel: Any) -> tuple[int, int, int, int]:
    """The padding of a 2-D window as ``(pad_top, pad_left, pad_down, pad_right)``, as TVM's
    ``topi.nn.get_pad_tuple`` (the forms: the module docstring).

    Parameters
    ----------
    padding : int, (int, int), (int, int, int, int) or {"SAME", "VALID"}
    kernel : (int, int)
        The window's (height, width), dilation included; only "SAME" reads it.

    Returns
    -------
    tuple of 4 ints

    Raises
    ------
    TypeError
        ``padding`` or ``kernel`` of the wrong kind.
    ValueError
        A negative padding, a tuple of the wrong length, an unknown string, a kernel
        smaller than 1.

    Example
    -------
    >>> topi.nn.get_pad_tuple("SAME", (4, 3))
    (2, 1, 1, 1)
    """
    op = "topi.nn.get_pad_tuple"
    kh, kw = pair(kernel, op, "kernel")
    if kh < 1 or kw < 1:
        raise ValueError(f"{op}: kernel must be positive, got {kernel!r}")
    return window_padding(padding, (kh, kw), op)
