"""Layout transforms (``pad``, ``flatten``) and the helpers every ``topi.nn`` op shares.

The shared helpers sit here, at the bottom of ``topi.nn``, so the op modules import them from
one place instead of repeating them:

- argument checks: tensor rank, float dtypes, equal dtypes, the layout string;
- ``reduce_compute``/``drop_axes``: a reduction over some axes of a tensor and the matching
  indexing of its result (softmax, layer_norm and the losses use them);
- ``Window``: the geometry of one spatial dimension of a sliding window (output size, input
  index of a window point, bounds checks, in-bounds counts), shared by conv2d and pool2d;
- ``in_bounds``: the condition "index lies inside the tensor", with only the comparisons that
  can fail (so unpadded sides add nothing to the IR).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ... import te
from ...dtype import as_dtype
from ...ir.expr import Const, Expr, IterVar
from ...ir.tensor import Tensor
from ..tag import INJECTIVE
from ..utils import check_tensor, compute_nd, prod, reduce_axes

__all__ = ["flatten", "pad"]

# ---------------------------------------------------------------------------------------
# argument checks shared by the nn ops
# ---------------------------------------------------------------------------------------

def check_ndim(x: Any, op: str, arg: str, ndim: int | tuple[int, ...], layout: str = "") -> Tensor:
    """``x`` as a Tensor of one of the ranks in ``ndim`` (``layout`` names the dims)."""
    t = check_tensor(x, op, arg)
    allowed = (ndim,) if isinstance(ndim, int) else ndim
    if t.ndim not in allowed:
        want = " or ".join(f"{n}-D" for n in allowed)
        dims = f" {layout}" if layout else ""
        raise ValueError(f"{op}: {arg} must be {want}{dims}, got '{t.name}' of shape {t.shape}")
    return t


def check_float(x: Tensor, op: str, arg: str) -> Tensor:
    """``x`` itself when its dtype is a float, else a ValueError."""
    if not x.dtype.is_float:
        raise ValueError(f"{op}: {arg} '{x.name}' has dtype {x.dtype}; expected a float dtype "
                         "(cast it with .astype('float32'))")
    return x


def check_same_dtype(op: str, **tensors: Tensor) -> None:
    """A ValueError unless all the named tensors share one dtype."""
    dtypes = {t.dtype for t in tensors.values()}
    if len(dtypes) > 1:
        listed = ", ".join(f"{arg} '{t.name}' is {t.dtype}" for arg, t in tensors.items())
        raise ValueError(f"{op}: arguments must have one dtype, but {listed}")


def check_layout(layout: Any, op: str, letters: str = "NCHW", arg: str = "layout") -> str:
    """``layout`` when it orders the dimension ``letters`` ("NHWC" and "HWCN" order NCHW;
    "HWIO" orders OIHW), else a TypeError (not a string) or ValueError naming ``arg``."""
    if not isinstance(layout, str):
        raise TypeError(f"{op}: {arg} must be a string such as {letters!r}, got "
                        f"{type(layout).__name__} {layout!r}")
    if sorted(layout) != sorted(letters):
        raise ValueError(f"{op}: {arg} {layout!r} is not supported; use an order of the "
                         f"letters {', '.join(letters)} (such as {letters!r})")
    return layout


def check_bool(value: Any, op: str, arg: str) -> bool:
    """``value`` as a bool when it is one (Python or NumPy), else a TypeError: a string
    such as ``"no"`` would otherwise count as true."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{op}: {arg} must be a bool, got {type(value).__name__} {value!r}")
    return bool(value)


def check_positive(values: Sequence[int], op: str, arg: str) -> None:
    """A ValueError unless every value is at least 1 (strides, dilations, kernel sizes)."""
    if any(v < 1 for v in values):
        raise ValueError(f"{op}: {arg} must be positive, got {tuple(values)}")


def out_dtype_of(out_dtype: Any, default: Any, op: str) -> Any:
    """The accumulation dtype: ``out_dtype`` when given, else ``default``."""
    return default if out_dtype is None else as_dtype(out_dtype, f"{op}: out_dtype")


# ---------------------------------------------------------------------------------------
# compute helpers
# ---------------------------------------------------------------------------------------

def drop_axes(indices: Sequence[Expr], axes: Sequence[int]) -> tuple[Expr, ...]:
    """The indices of a tensor reduced over ``axes``, from a full index."""
    return tuple(ix for d, ix in enumerate(indices) if d not in axes)


def reduce_compute(shape: Sequence[int], axes: Sequence[int],
                   freduce: Callable[[tuple[Expr, ...], tuple[IterVar, ...]], Expr],
                   name: str, axis_names: Sequence[str] | None = None) -> Tensor:
    """A reduction over ``axes`` of a tensor of ``shape``: the result drops those axes.

    ``freduce(full_index, reduce_axes)`` returns the reduction (e.g. ``te.sum(...)``), where
    ``full_index`` has the reduce axes in the reduced positions.
    """
    axes = tuple(axes)
    kept = [d for d in range(len(shape)) if d not in axes]
    rvars = tuple(reduce_axes([shape[a] for a in axes], axis_names))

    def fbody(out: tuple[Expr, ...]) -> Expr:
        full: list[Any] = [None] * len(shape)
        for d, ix in zip(kept, out):
            full[d] = ix
        for a, rv in zip(axes, rvars):
            full[a] = rv.var
        return freduce(tuple(full), rvars)

    return compute_nd([shape[d] for d in kept], fbody, name)


def in_bounds(terms: Sequence[tuple[Expr, int, bool, bool]]) -> Expr | None:
    """``tex.all`` of ``0 <= index < extent`` for (index, extent, check_low, check_high)
    terms, keeping only the flagged comparisons; None when nothing can fail."""
    conds: list[Expr] = []
    for index, extent, low, high in terms:
        if low:
            conds.append(index >= 0)
        if high:
            conds.append(index < extent)
    return te.all(*conds) if conds else None


@dataclass(frozen=True)
class Window:
    """One spatial dimension of a sliding window over an input of extent ``size``.

    Window ``o`` covers the input points ``o * stride - pad_before + r * dilation`` for
    ``r`` in ``[0, kernel)``; points outside ``[0, size)`` fall in the padding.
    """

    size: int
    kernel: int
    stride: int
    dilation: int
    pad_before: int
    pad_after: int
    out: int

    @classmethod
    def make(cls, op: str, what: str, size: int, kernel: int, stride: int, dilation: int,
             pad_before: int, pad_after: int, ceil_mode: bool = False,
             context: str = "") -> Window:
        """The window with its output extent; ValueError naming ``what`` (the dimension)
        and ``context`` (the argument shapes) when it is empty.

        Output extent: floor((size + pads - dilation * (kernel - 1) - 1) / stride) + 1, with
        ceil instead of floor in ``ceil_mode``; as in PyTorch, a last window that would start
        in the right padding is dropped.
        """
        span = dilation * (kernel - 1) + 1
        room = size + pad_before + pad_after - span
        if room < 0:
            raise ValueError(f"{op}: the {what} window spans {span} points (kernel {kernel}, "
                             f"dilation {dilation}) but the padded {what} has only "
                             f"{size + pad_before + pad_after} (size {size}, padding "
                             f"{pad_before}+{pad_after}); the output would be empty"
                             + (f" ({context})" if context else ""))
        out = (room + (stride - 1 if ceil_mode else 0)) // stride + 1
        if ceil_mode and (out - 1) * stride >= size + pad_before:
            out -= 1
        return cls(size, kernel, stride, dilation, pad_before, pad_after, out)

    def index(self, o: Any, r: Any) -> Any:
        """The input index of point ``r`` of window ``o`` (ints give an int)."""
        return o * self.stride - self.pad_before + r * self.dilation

    @property
    def may_underflow(self) -> bool:
        """Whether some window point lies before the input (left padding is read)."""
        return self.pad_before > 0

    @property
    def may_overflow(self) -> bool:
        """Whether some window point lies past the input (right padding is read)."""
        return self.index(self.out - 1, self.kernel - 1) >= self.size

    def bounds_term(self, index: Expr) -> tuple[Expr, int, bool, bool]:
        """The ``in_bounds`` term for an input index of this window."""
        return index, self.size, self.may_underflow, self.may_overflow

    def _span(self, o: Any, include_pad: bool) -> tuple[Any, Any]:
        """First and last ``r`` of window ``o`` inside the input (or the padded input when
        ``include_pad``; the extra right padding of ceil_mode never counts)."""
        lo, hi = (-self.pad_before, self.size + self.pad_after) if include_pad else (0, self.size)
        s, d = self.stride, self.dilation
        # start = o*s - pad_before; first: ceil((lo - start) / d), last: floor((hi-1-start) / d)
        # with the constants gathered so that d == 1 needs no division
        up, down = lo + self.pad_before + d - 1 - o * s, hi - 1 + self.pad_before - o * s
        if d != 1:
            up, down = te.floordiv(up, d), te.floordiv(down, d)
        return te.max(up, 0), te.min(down, self.kernel - 1)

    def counts(self, include_pad: bool) -> list[int]:
        """How many points of each window lie in the input (or the padded input)."""
        spans = [self._span(o, include_pad) for o in range(self.out)]
        return [max(int(last) - int(first) + 1, 0) for first, last in spans]

    def count(self, o: Expr, include_pad: bool) -> Expr | int:
        """``counts`` at an output index expression, for windows that all have at least one
        point: an int when it does not depend on ``o``, else an index expression."""
        spans = [self._span(i, include_pad) for i in range(self.out)]
        first, last = self._span(o, include_pad)
        # a side that is the same for every window is a constant (usually first == 0)
        if len({int(f) for f, _ in spans}) == 1:
            first = int(spans[0][0])
        if len({int(b) for _, b in spans}) == 1:
            last = int(spans[0][1])
        n = last - first + 1
        return int(n) if isinstance(n, (int, Const)) else n


# ---------------------------------------------------------------------------------------
# pad, flatten
# ---------------------------------------------------------------------------------------

def _pad_widths(value: Any, ndim: int, arg: str) -> tuple[int, ...]:
    op = "topi.nn.pad"
    if not isinstance(value, (list, tuple)):
        raise TypeError(f"{op}: {arg} must be a list of ints (one per dimension), got "
                        f"{type(value).__name__} {value!r}")
    if len(value) != ndim:
        raise ValueError(f"{op}: {arg} has {len(value)} entries but data has {ndim} "
                         f"dimensions; give one padding width per dimension")
    for v in value:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{op}: {arg} must contain ints, got {value!r}")
        if v < 0:
            raise ValueError(f"{op}: {arg} must be non-negative, got {list(value)}")
    return tuple(int(v) for v in value)


def pad(data: Tensor, pad_before: Sequence[int], pad_after: Sequence[int] | None = None,
        pad_value: float = 0.0, name: str = "PadInput") -> Tensor:
    """Pad a tensor with a constant on both sides of every dimension.

    ``out[idx] = data[idx - pad_before]`` where that lies inside ``data``, else
    ``pad_value``. The read sits in a select on the bounds, so a padded point never
    contributes data (nor, later, gradient).

    Parameters
    ----------
    data : Tensor
    pad_before : list of int
        Width added before each dimension (one entry per dimension).
    pad_after : list of int, optional
        Width added after each dimension; defaults to ``pad_before``.
    pad_value : float
        The fill value, converted to ``data``'s dtype.
    name : str
        The tensor's name (conv2d passes ``"pad_temp"``, as TVM does).

    Returns
    -------
    Tensor
        Shape ``data.shape[d] + pad_before[d] + pad_after[d]`` in every dimension.

    Raises
    ------
    TypeError
        ``data`` is not a Tensor, widths are not ints, ``pad_value`` is not a number.
    ValueError
        A width list has the wrong length or a negative entry.

    Example
    -------
    >>> A = tex.placeholder((2, 3), name="A")
    >>> P = topi.nn.pad(A, [0, 1], [0, 2])
    >>> P.shape
    (2, 6)
    """
    op = "topi.nn.pad"
    data = check_tensor(data, op, "data")
    before = _pad_widths(pad_before, data.ndim, "pad_before")
    after = before if pad_after is None else _pad_widths(pad_after, data.ndim, "pad_after")
    if isinstance(pad_value, (bool, np.bool_)) or not isinstance(pad_value, (int, float,
                                                                           np.number)):
        raise TypeError(f"{op}: pad_value must be a number, got {type(pad_value).__name__} "
                        f"{pad_value!r}")
    return pad_tensor(data, before, after, pad_value, name)


def pad_tensor(data: Tensor, before: Sequence[int], after: Sequence[int], pad_value: float,
               name: str, names: Sequence[str] | None = None) -> Tensor:
    """``pad`` on checked arguments, with the index names to use."""
    fill = te.const(pad_value, data.dtype)
    shape = tuple(e + b + a for e, b, a in zip(data.shape, before, after))

    def fbody(idx: tuple[Expr, ...]) -> Expr:
        src = tuple(ix - b for ix, b in zip(idx, before))
        cond = in_bounds([(s, e, b > 0, a > 0)
                          for s, e, b, a in zip(src, data.shape, before, after)])
        return data[src] if cond is None else te.if_then_else(cond, data[src], fill)

    return compute_nd(shape, fbody, name, tag=f"{INJECTIVE},pad", names=names)  # as TVM


def flatten(data: Tensor) -> Tensor:
    """Collapse all dimensions but the first: shape ``(N, prod(rest))``.

    Column ``j`` of the result reads the row-major position ``j`` of ``data[n]``, unravelled
    with floordiv/floormod (a dimension of extent 1 always reads 0).

    Parameters
    ----------
    data : Tensor
        At least 1-D; a 1-D tensor becomes ``(N, 1)``.

    Returns
    -------
    Tensor
        Named ``T_flatten``.

    Example
    -------
    >>> A = tex.placeholder((8, 3, 4, 4), name="A")
    >>> topi.nn.flatten(A).shape
    (8, 48)
    """
    op = "topi.nn.flatten"
    data = check_tensor(data, op, "data")
    if data.ndim < 1:
        raise ValueError(f"{op}: data must have at least one dimension, got '{data.name}' "
                         "of shape ()")
    rest = data.shape[1:]

    def fcompute(n: Expr, j: Expr) -> Expr:
        # row-major unravel: index d is (j // stride_d) % extent_d, where the outermost
        # needs no modulo (j is below the total) and the innermost no division
        idx: list[Expr] = []
        for d, extent in enumerate(rest):
            stride = prod(rest[d + 1:])
            if extent == 1:
                idx.append(te.const(0, "int32"))
                continue
            ix = j if stride == 1 else te.floordiv(j, stride)
            idx.append(ix if d == 0 else te.floormod(ix, extent))
        return data[(n, *idx)]

    return te.compute((data.shape[0], prod(rest)), fcompute, name="T_flatten", tag=INJECTIVE)
