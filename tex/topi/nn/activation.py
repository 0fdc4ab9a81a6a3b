"""Activations: ``relu``, ``leaky_relu``, ``softmax``, ``log_softmax``.

softmax and log_softmax subtract the maximum along the axis before exponentiating, so
``exp`` never overflows (its largest argument is 0) and the sum is at least 1:

    softmax(x)     = exp(x - max) / sum(exp(x - max))
    log_softmax(x) = x - max - log(sum(exp(x - max)))
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from ... import te
from ...ir.expr import Expr, IterVar
from ...ir.tensor import Tensor
from ..utils import check_tensor, compute_nd, normalize_axis_one
from .transform import check_float, drop_axes, reduce_compute

__all__ = ["leaky_relu", "log_softmax", "relu", "softmax"]


def _elementwise(x: Tensor, fbody: Callable[[Expr], Expr], name: str) -> Tensor:
    """``out[idx] = fbody(x[idx])`` over x's shape."""
    return compute_nd(x.shape, lambda idx: fbody(x[idx]), name, tag="elemwise")


def relu(x: Tensor) -> Tensor:
    """``max(x, 0)`` elementwise.

    The gradient follows ``max``'s tie rule (the first operand wins a tie), so
    ``relu'(0) = 1``, as with TVM's ``te.gradient``; PyTorch uses 0, which
    ``tex.if_then_else(x > 0, x, 0)`` gives.

    Example
    -------
    >>> print(topi.nn.relu(tex.placeholder((4,), name="x")))
    T_relu[i] = max(x[i], 0.0)
    """
    x = check_tensor(x, "topi.nn.relu", "x")
    return _elementwise(x, lambda v: te.max(v, te.const(0, x.dtype)), "T_relu")


def leaky_relu(x: Tensor, alpha: float) -> Tensor:
    """``x`` where positive, else ``alpha * x``.

    Parameters
    ----------
    x : Tensor
    alpha : float
        The slope for negative inputs.

    Example
    -------
    >>> y = topi.nn.leaky_relu(tex.placeholder((4,), name="x"), 0.1)
    """
    op = "topi.nn.leaky_relu"
    x = check_tensor(x, op, "x")
    if isinstance(alpha, (bool, np.bool_)) or not isinstance(alpha, (int, float, np.number)):
        raise TypeError(f"{op}: alpha must be a number, got {type(alpha).__name__} {alpha!r}")
    slope = te.const(float(alpha), x.dtype) if x.dtype.is_float else float(alpha)
    return _elementwise(x, lambda v: te.if_then_else(v > 0, v, v * slope), "T_leaky_relu")


Indexer = Callable[[tuple[Expr, ...]], Expr]


def _max_shifted(x: Tensor, axis: int, prefix: str) -> Indexer:
    """Compute the max along ``axis`` (``<prefix>_maxelem``); return ``idx -> x - max``."""
    maxelem = reduce_compute(
        x.shape, (axis,), lambda idx, ks: te.max(x[idx], axis=ks), f"{prefix}_maxelem")

    def shifted(idx: tuple[Expr, ...]) -> Expr:
        return x[idx] - maxelem[drop_axes(idx, (axis,))]

    return shifted


def _exp_sum(source: Indexer, shape: tuple[int, ...], axis: int, name: str) -> Tensor:
    """``sum(source(idx))`` along ``axis``."""
    def freduce(idx: tuple[Expr, ...], ks: tuple[IterVar, ...]) -> Expr:
        return te.sum(source(idx), axis=ks)
    return reduce_compute(shape, (axis,), freduce, name)


def _check(x: Any, axis: Any, op: str) -> tuple[Tensor, int]:
    x = check_float(check_tensor(x, op, "x"), op, "x")
    if x.ndim == 0:
        raise ValueError(f"{op}: x must have at least one dimension, got '{x.name}' of "
                         "shape ()")
    return x, normalize_axis_one(axis, x.ndim, op)


def softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``exp(x) / sum(exp(x))`` along ``axis``, computed stably (see the module docstring).

    Four tensors: ``T_softmax_maxelem`` (max along the axis), ``T_softmax_exp``
    (``exp(x - max)``), ``T_softmax_expsum`` (its sum) and ``T_softmax_norm`` (the ratio).

    Parameters
    ----------
    x : Tensor
        A float tensor with at least one dimension.
    axis : int
        The axis to normalize (negative counts from the end).

    Returns
    -------
    Tensor
        ``T_softmax_norm``, shaped like ``x``.

    Example
    -------
    >>> x = tex.placeholder((1024, 1024), name="x")
    >>> print(topi.nn.softmax(x))
    T_softmax_norm[i, j] = T_softmax_exp[i, j] / T_softmax_expsum[i]
    """
    x, axis = _check(x, axis, "topi.nn.softmax")
    shifted = _max_shifted(x, axis, "T_softmax")
    exps = compute_nd(x.shape, lambda idx: te.exp(shifted(idx)), "T_softmax_exp",
                      tag="elemwise")
    expsum = _exp_sum(lambda idx: exps[idx], x.shape, axis, "T_softmax_expsum")

    def norm(idx: tuple[Expr, ...]) -> Expr:
        return exps[idx] / expsum[drop_axes(idx, (axis,))]

    return compute_nd(x.shape, norm, "T_softmax_norm", tag="softmax_output")


def log_softmax(x: Tensor, axis: int = -1) -> Tensor:
    """``log(softmax(x))`` along ``axis``: ``x - max - log(sum(exp(x - max)))``.

    Three tensors: ``T_log_softmax_maxelem``, ``T_log_softmax_expsum`` (the sum of
    ``exp(x - max)``, exponentiated inside the reduction) and ``T_log_softmax``.

    Parameters
    ----------
    x : Tensor
        A float tensor with at least one dimension.
    axis : int

    Returns
    -------
    Tensor
        ``T_log_softmax``, shaped like ``x``.

    Example
    -------
    >>> x = tex.placeholder((8, 10), name="x")
    >>> y = topi.nn.log_softmax(x)
    """
    x, axis = _check(x, axis, "topi.nn.log_softmax")
    shifted = _max_shifted(x, axis, "T_log_softmax")
    expsum = _exp_sum(lambda idx: te.exp(shifted(idx)), x.shape, axis, "T_log_softmax_expsum")

    def out(idx: tuple[Expr, ...]) -> Expr:
        return shifted(idx) - te.log(expsum[drop_axes(idx, (axis,))])

    return compute_nd(x.shape, out, "T_log_softmax", tag="log_softmax_output")
