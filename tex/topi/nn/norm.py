"""Normalization: ``layer_norm`` and inference-time ``batch_norm``.

layer_norm computes the variance in two passes, ``mean((x - mean)^2)``, rather than
``mean(x^2) - mean^2``: the one-pass form cancels catastrophically in float32 when the mean
is large compared with the spread.

batch_norm folds its four per-channel parameters into a scale and a shift, as inference
engines do (Relay's SimplifyInference, BN folded into a convolution): one multiply-add per
element, and a gradient of three passes over the data (``sum(head)``, ``sum(head * x)``,
``head * scale``) from which the four parameters' gradients follow per channel. Written
``(x - mean) * rsqrt(var + eps) * gamma + beta``, beta's and mean's gradients were two
separate sums of the same head, and gamma's and var's two more (five passes).
"""
from __future__ import annotations

from typing import Any

import numpy as np

from ... import te
from ...ir.expr import Expr, IterVar
from ...ir.tensor import Tensor
from ..utils import check_tensor, compute_nd, normalize_axis, normalize_axis_one, prod
from .transform import (
    check_float,
    check_same_dtype,
    drop_axes,
    reduce_compute,
)

__all__ = ["batch_norm", "layer_norm"]


def _check_epsilon(epsilon: Any, op: str) -> float:
    if isinstance(epsilon, (bool, np.bool_)) or not isinstance(epsilon, (int, float, np.number)):
        raise TypeError(f"{op}: epsilon must be a number, got {type(epsilon).__name__} "
                        f"{epsilon!r}")
    if not epsilon >= 0:
        raise ValueError(f"{op}: epsilon must be non-negative, got {epsilon!r}")
    return float(epsilon)


def _check_param(t: Any, op: str, arg: str, shape: tuple[int, ...], what: str) -> Tensor:
    """A parameter tensor that must have exactly ``shape`` (``what`` says why)."""
    t = check_tensor(t, op, arg)
    if t.shape != shape:
        raise ValueError(f"{op}: {arg} must have shape {shape} ({what}), got '{t.name}' of "
                         f"shape {t.shape}")
    return t


def layer_norm(data: Tensor, gamma: Tensor, beta: Tensor, axis: Any = (-1,),
               epsilon: float = 1e-5) -> Tensor:
    """Normalize over ``axis``, then scale and shift:
    ``(x - mean) * rsqrt(var + epsilon) * gamma + beta``.

    Mean and (biased) variance are taken over all the axes in ``axis`` together; the
    variance is the two-pass ``mean((x - mean)^2)``.

    Parameters
    ----------
    data : Tensor
        A float tensor.
    gamma, beta : Tensor
        Shaped like the normalized dimensions, ``tuple(data.shape[a] for a in axis)``
        (axes in increasing order).
    axis : int or sequence of int
        The axes to normalize over (default: the last one).
    epsilon : float
        Added to the variance.

    Returns
    -------
    Tensor
        ``T_layer_norm``, shaped like ``data``; it reads ``T_layer_norm_sum`` (the sum over
        the axes) and ``T_layer_norm_sqsum`` (the sum of squared deviations).

    Raises
    ------
    TypeError
        A non-Tensor argument or a non-numeric epsilon.
    ValueError
        An integer dtype, axes out of range or repeated, gamma/beta of the wrong shape or
        dtype, a negative epsilon.

    Example
    -------
    >>> x = tex.placeholder((1024, 1024), name="x")
    >>> gamma = tex.placeholder((1024,), name="gamma")
    >>> beta = tex.placeholder((1024,), name="beta")
    >>> y = topi.nn.layer_norm(x, gamma, beta)
    """
    op = "topi.nn.layer_norm"
    data = check_float(check_tensor(data, op, "data"), op, "data")
    if data.ndim == 0:
        raise ValueError(f"{op}: data must have at least one dimension, got '{data.name}' "
                         "of shape ()")
    axes = normalize_axis(axis, data.ndim, op)
    if not axes:
        raise ValueError(f"{op}: axis is empty; name at least one axis to normalize over")
    norm_shape = tuple(data.shape[a] for a in axes)
    what = f"the extents of data {data.shape} along axis {axes}"
    gamma = _check_param(gamma, op, "gamma", norm_shape, what)
    beta = _check_param(beta, op, "beta", norm_shape, what)
    check_same_dtype(op, data=data, gamma=gamma, beta=beta)
    eps = _check_epsilon(epsilon, op)
    size = prod(norm_shape)
    count = float(size) if isinstance(size, int) else size.astype(data.dtype)  # (symbolic)

    total = reduce_compute(data.shape, axes, lambda idx, ks: te.sum(data[idx], axis=ks),
                           "T_layer_norm_sum")

    def centered(idx: tuple[Expr, ...]) -> Expr:
        return data[idx] - total[drop_axes(idx, axes)] / count

    def sqsum(idx: tuple[Expr, ...], ks: tuple[IterVar, ...]) -> Expr:
        d = centered(idx)
        return te.sum(d * d, axis=ks)

    squares = reduce_compute(data.shape, axes, sqsum, "T_layer_norm_sqsum")

    def fbody(idx: tuple[Expr, ...]) -> Expr:
        inv_std = te.rsqrt(squares[drop_axes(idx, axes)] / count + eps)
        param_idx = tuple(idx[a] for a in axes)
        return centered(idx) * inv_std * gamma[param_idx] + beta[param_idx]

    return compute_nd(data.shape, fbody, "T_layer_norm", tag="layer_norm")


def batch_norm(data: Tensor, gamma: Tensor, beta: Tensor, moving_mean: Tensor,
               moving_var: Tensor, axis: int = 1, epsilon: float = 1e-5) -> list[Tensor]:
    """Batch normalization in inference form, with the running statistics:
    ``(x - moving_mean) * rsqrt(moving_var + epsilon) * gamma + beta`` along ``axis``,
    computed as ``x * scale + shift`` with ``scale = gamma * rsqrt(moving_var + epsilon)``
    and ``shift = beta - moving_mean * scale`` (see the module docstring).

    Parameters
    ----------
    data : Tensor
        A float tensor with at least one dimension (NCHW: ``axis=1`` is the channels).
    gamma, beta, moving_mean, moving_var : Tensor
        1-D, of extent ``data.shape[axis]``.
    axis : int
        The channel axis.
    epsilon : float

    Returns
    -------
    list of Tensor
        ``[out, moving_mean, moving_var]`` as TVM returns: ``out`` (``T_batch_norm``,
        shaped like ``data``; it reads ``T_batch_norm_scale`` and ``T_batch_norm_shift``)
        and the statistics, unchanged in inference.

    Raises
    ------
    TypeError
        A non-Tensor argument or a non-numeric epsilon.
    ValueError
        An integer dtype, an axis out of range, parameters of the wrong shape or dtype.

    Example
    -------
    >>> x = tex.placeholder((8, 16, 4, 4), name="x")
    >>> g, b, m, v = (tex.placeholder((16,), name=n) for n in "gbmv")
    >>> out, _, _ = topi.nn.batch_norm(x, g, b, m, v)
    """
    op = "topi.nn.batch_norm"
    data = check_float(check_tensor(data, op, "data"), op, "data")
    if data.ndim == 0:
        raise ValueError(f"{op}: data must have at least one dimension, got '{data.name}' "
                         "of shape ()")
    ax = normalize_axis_one(axis, data.ndim, op)
    channels = data.shape[ax]
    what = f"data.shape[{ax}] of data {data.shape}"
    params = {arg: _check_param(t, op, arg, (channels,), what) for arg, t in
              (("gamma", gamma), ("beta", beta), ("moving_mean", moving_mean),
               ("moving_var", moving_var))}
    check_same_dtype(op, data=data, **params)
    eps = _check_epsilon(epsilon, op)

    scale = te.compute((channels,), lambda c: gamma[c] * te.rsqrt(moving_var[c] + eps),
                       name="T_batch_norm_scale", tag="batch_norm")
    shift = te.compute((channels,), lambda c: beta[c] - moving_mean[c] * scale[c],
                       name="T_batch_norm_shift", tag="batch_norm")

    def fbody(idx: tuple[Expr, ...]) -> Expr:
        return data[idx] * scale[idx[ax]] + shift[idx[ax]]

    names = ("n", "c", "h", "w") if (data.ndim, ax) == (4, 1) else None
    out = compute_nd(data.shape, fbody, "T_batch_norm", tag="batch_norm", names=names)
    return [out, moving_mean, moving_var]
