"""Losses: ``cross_entropy`` on probabilities and ``cross_entropy_with_logits``.

Both are means over the batch of ``-sum_c log(p[b, c]) * t[b, c]``, returned as 0-d tensors.
The logits form goes through the stable ``log_softmax`` instead of ``log(softmax)``, which
would turn a tiny probability into ``log(0) = -inf``. The probability form takes
``0 * log(0)`` as 0 (its limit, as ``scipy.special.xlogy``): a class whose target and
probability are both 0 (a softmax that underflowed) adds 0 to the loss and to both
gradients instead of a nan.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import Any

from ... import te
from ...ir.expr import Expr, IterVar
from ...ir.tensor import Tensor
from .activation import log_softmax
from .transform import check_float, check_ndim, check_same_dtype, reduce_compute

__all__ = ["cross_entropy", "cross_entropy_with_logits"]


def _check_pair(first: Any, targets: Any, op: str, arg: str) -> tuple[Tensor, Tensor]:
    """Two float 2-D (batch, classes) tensors of one shape and dtype."""
    first = check_float(check_ndim(first, op, arg, 2, "(batch, classes)"), op, arg)
    targets = check_ndim(targets, op, "targets", 2, "(batch, classes)")
    if first.shape != targets.shape:
        raise ValueError(f"{op}: {arg} {first.shape} and targets {targets.shape} must have "
                         "the same shape (batch, classes)")
    check_same_dtype(op, **{arg: first, "targets": targets})
    return first, targets


def _batch_mean_loss(log_prob: Callable[[tuple[Expr, ...]], Expr], targets: Tensor,
                     name: str) -> Tensor:
    """``-sum(log_prob(idx) * targets[idx]) / batch`` as a 0-d tensor."""
    def freduce(idx: tuple[Expr, ...], ks: tuple[IterVar, ...]) -> Expr:
        return te.sum(log_prob(idx) * targets[idx], axis=ks)

    total = reduce_compute(targets.shape, (0, 1), freduce, f"{name}_sum", ("b", "c"))
    n = targets.shape[0]
    batch = float(n) if isinstance(n, int) else n.astype(targets.dtype)  # (symbolic batch)
    return te.compute((), lambda: -total[()] / batch, name=name, tag="loss")


def cross_entropy(predictions: Tensor, targets: Tensor) -> Tensor:
    """``-sum(log(predictions) * targets) / batch``: cross entropy of probabilities, with
    ``0 * log(0) = 0`` (a zero target on a zero probability adds nothing, gradients included).

    Parameters
    ----------
    predictions : Tensor
        2-D ``(batch, classes)`` probabilities (e.g. a softmax output).
    targets : Tensor
        Same shape and dtype: one-hot labels or a target distribution.

    Returns
    -------
    Tensor
        0-d ``T_cross_entropy``.

    Raises
    ------
    TypeError
        An argument is not a Tensor.
    ValueError
        Not 2-D, shapes or dtypes that differ, integer predictions.

    Example
    -------
    >>> p = tex.placeholder((8, 10), name="p")
    >>> t = tex.placeholder((8, 10), name="t")
    >>> topi.nn.cross_entropy(p, t).shape
    ()
    """
    op = "topi.nn.cross_entropy"
    predictions, targets = _check_pair(predictions, targets, op, "predictions")
    zero = te.const(0, predictions.dtype)

    def log_prob(idx: tuple[Expr, ...]) -> Expr:
        # log(1) where p = t = 0, so that the term t * log(p) = 0 * log(0) is 0 and its
        # derivative t / p is 0, not 0 / 0 (see the module docstring)
        p = predictions[idx]
        both_zero = te.all(p == zero, targets[idx] == zero)
        return te.log(te.if_then_else(both_zero, te.const(1, p.dtype), p))

    return _batch_mean_loss(log_prob, targets, "T_cross_entropy")


def cross_entropy_with_logits(logits: Tensor, targets: Tensor) -> Tensor:
    """``-sum(log_softmax(logits, axis=1) * targets) / batch``.

    Parameters
    ----------
    logits : Tensor
        2-D ``(batch, classes)`` unnormalized scores.
    targets : Tensor
        Same shape and dtype.

    Returns
    -------
    Tensor
        0-d ``T_cross_entropy_with_logits``.

    Raises
    ------
    TypeError
        An argument is not a Tensor.
    ValueError
        Not 2-D, shapes or dtypes that differ, integer logits.

    Example
    -------
    >>> z = tex.placeholder((8, 10), name="z")
    >>> t = tex.placeholder((8, 10), name="t")
    >>> loss = topi.nn.cross_entropy_with_logits(z, t)
    """
    op = "topi.nn.cross_entropy_with_logits"
    logits, targets = _check_pair(logits, targets, op, "logits")
    log_probs = log_softmax(logits, axis=1)
    return _batch_mean_loss(lambda idx: log_probs[idx], targets, "T_cross_entropy_with_logits")
