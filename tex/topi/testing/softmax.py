"""NumPy references for softmax and log-softmax, TVM's ``topi.testing.softmax_python`` and
``log_softmax_python``: computed in float64 from the maximum-shifted input, returned in the
input's dtype."""
from __future__ import annotations

import numpy as np

__all__ = ["log_softmax_python", "softmax_python"]


def softmax_python(a_np: np.ndarray, axis: int = -1) -> np.ndarray:
    """``exp(a) / sum(exp(a))`` along ``axis`` (TVM's reference takes 2-D data and the last
    axis; any rank and axis here).

    Parameters
    ----------
    a_np : numpy.ndarray
        At least 1-D.
    axis : int

    Returns
    -------
    numpy.ndarray
        Shaped and typed like ``a_np``.
    """
    x = a_np.astype(np.float64)
    e = np.exp(x - x.max(axis=axis, keepdims=True))
    return (e / e.sum(axis=axis, keepdims=True)).astype(a_np.dtype)


def log_softmax_python(a_np: np.ndarray, axis: int = -1) -> np.ndarray:
    """``a - max - log(sum(exp(a - max)))`` along ``axis`` (as :func:`softmax_python`)."""
    x = a_np.astype(np.float64)
    shifted = x - x.max(axis=axis, keepdims=True)
    return (shifted - np.log(np.exp(shifted).sum(axis=axis, keepdims=True))).astype(a_np.dtype)
