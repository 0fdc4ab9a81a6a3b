"""TVM's ``contrib.cblas`` wrappers: matrix products as extern calls of NumPy's BLAS.

``matmul(A, B)`` and ``batch_matmul(A, B)`` are ``te.extern`` stages calling the built-in
functions ``"tex.contrib.cblas.matmul"`` / ``"tex.contrib.cblas.batch_matmul"`` (also
registered under TVM's ``"tvm.contrib.cblas..."`` names, so ``tir.call_packed`` with those
names works too). Their outputs are ordinary tensors that later stages read; like every
extern call they run on the CPU, and a gradient through them needs an ``override``.
"""
from __future__ import annotations

from typing import Any

from ..ir.tensor import Tensor
from ..te.extern import call_packed, extern

__all__ = ["matmul", "batch_matmul"]


def _check(name: str, lhs: Any, rhs: Any, ndim: int) -> None:
    for what, t in (("lhs", lhs), ("rhs", rhs)):
        if not isinstance(t, Tensor):
            raise TypeError(f"cblas.{name}: {what} must be a Tensor, got {type(t).__name__}")
        if t.ndim != ndim:
            raise ValueError(f"cblas.{name}: {what} '{t.name}' must have {ndim} dimensions, "
                             f"got shape {t.shape}")
    if lhs.dtype != rhs.dtype or not lhs.dtype.is_float:
        raise TypeError(f"cblas.{name}: '{lhs.name}' ({lhs.dtype}) and '{rhs.name}' "
                        f"({rhs.dtype}) must be float tensors of one dtype")


def matmul(lhs: Tensor, rhs: Tensor, transa: bool = False, transb: bool = False,
           **kwargs: Any) -> Tensor:
    """``op(lhs) @ op(rhs)`` (``op`` transposes when ``transa``/``transb``), as an extern
    call of NumPy's BLAS; ``kwargs`` go to ``te.extern`` (``name``, ``tag``)."""
    _check("matmul", lhs, rhs, 2)
    n = lhs.shape[1] if transa else lhs.shape[0]
    k = lhs.shape[0] if transa else lhs.shape[1]
    k2 = rhs.shape[1] if transb else rhs.shape[0]
    m = rhs.shape[0] if transb else rhs.shape[1]
    if k != k2:
        raise ValueError(f"cblas.matmul: the reduction extents differ ({k} of '{lhs.name}', "
                         f"{k2} of '{rhs.name}')")
    kwargs.setdefault("name", "C")
    return extern((n, m), [lhs, rhs],  # type: ignore[no-any-return]
                  lambda ins, outs: call_packed("tex.contrib.cblas.matmul", ins[0], ins[1],
                                                outs[0], bool(transa), bool(transb)),
                  **kwargs)


def batch_matmul(lhs: Tensor, rhs: Tensor, transa: bool = False, transb: bool = False,
                 iterative: bool = False, **kwargs: Any) -> Tensor:
    """``op(lhs[k]) @ op(rhs[k])`` per batch ``k`` (one batch broadcasts), as an extern
    call of NumPy's BLAS. ``iterative`` (TVM's choice of a loop of GEMMs) changes nothing."""
    _check("batch_matmul", lhs, rhs, 3)
    b = max(lhs.shape[0], rhs.shape[0])
    if {lhs.shape[0], rhs.shape[0]} - {1, b}:
        raise ValueError(f"cblas.batch_matmul: batch extents {lhs.shape[0]} and "
                         f"{rhs.shape[0]} differ")
    n = lhs.shape[2] if transa else lhs.shape[1]
    k = lhs.shape[1] if transa else lhs.shape[2]
    k2 = rhs.shape[2] if transb else rhs.shape[1]
    m = rhs.shape[1] if transb else rhs.shape[2]
    if k != k2:
        raise ValueError(f"cblas.batch_matmul: the reduction extents differ ({k} of "
                         f"'{lhs.name}', {k2} of '{rhs.name}')")
    kwargs.setdefault("name", "C")
    return extern((b, n, m), [lhs, rhs],  # type: ignore[no-any-return]
                  lambda ins, outs: call_packed("tex.contrib.cblas.batch_matmul", ins[0],
                                                ins[1], outs[0], bool(transa), bool(transb)),
                  **kwargs)
