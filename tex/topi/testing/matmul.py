"""NumPy references for the dense layer and batched matrix products, TVM's
``topi.testing.dense`` and ``topi.testing.batch_matmul``: products in ``out_dtype`` (the
input's dtype by default), as TVM's."""
from __future__ import annotations

from typing import Any

import numpy as np

__all__ = ["batch_matmul", "dense"]


def dense(x: np.ndarray, y: np.ndarray, bias: np.ndarray | None, use_bias: bool = False,
          use_relu: bool = False, out_dtype: Any = None) -> np.ndarray:
    """``x @ y.T`` (+ ``bias`` when ``use_bias``, then ``max(., 0)`` when ``use_relu``).

    Parameters
    ----------
    x : numpy.ndarray
        ``(M, K)``.
    y : numpy.ndarray
        ``(N, K)``: the weight, as ``topi.nn.dense`` takes it.
    bias : numpy.ndarray or None
        ``(N,)``; read only when ``use_bias``.
    use_bias, use_relu : bool
    out_dtype : str, optional

    Returns
    -------
    numpy.ndarray
        ``(M, N)``.
    """
    dtype = x.dtype if out_dtype is None else np.dtype(out_dtype)
    out = x.astype(dtype) @ y.T.astype(dtype)
    if use_bias:
        out = out + np.asarray(bias).astype(dtype)
    if use_relu:
        out = np.maximum(out, 0)
    return out.astype(dtype)


def batch_matmul(x: np.ndarray, y: np.ndarray, out_dtype: Any = None, trans_x: bool = False,
                 trans_y: bool = True) -> np.ndarray:
    """``x[b] @ y[b]`` per batch, each side transposed when asked; a batch of 1 broadcasts
    (TVM's default ``trans_y=True`` computes ``x[b] @ y[b].T``, as ``topi.nn.batch_matmul``).

    Parameters
    ----------
    x : numpy.ndarray
        ``(batch or 1, M, K)``, or ``(batch, K, M)`` when ``trans_x``.
    y : numpy.ndarray
        ``(batch or 1, N, K)`` when ``trans_y``, else ``(batch, K, N)``.
    out_dtype : str, optional
    trans_x, trans_y : bool

    Returns
    -------
    numpy.ndarray
        ``(batch, M, N)``.
    """
    dtype = x.dtype if out_dtype is None else np.dtype(out_dtype)
    a = np.swapaxes(x, 1, 2) if trans_x else x
    b = np.swapaxes(y, 1, 2) if trans_y else y
    if a.shape[0] != b.shape[0] and 1 not in (a.shape[0], b.shape[0]):
        raise ValueError(f"batches {a.shape[0]} and {b.shape[0]} do not broadcast")
    return np.matmul(a.astype(dtype), b.astype(dtype)).astype(dtype)
