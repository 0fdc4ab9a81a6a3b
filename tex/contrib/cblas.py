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


def _product(what: str, lhs: Tensor, rhs: Tensor, transa: bool, transb: bool,
             kwargs: dict[str, Any]) -> Tensor:
    """The extern call of ``tex.contrib.cblas.<what>`` for ``op(lhs) @ op(rhs)`` over the
    last two axes (``batch_matmul``: a batch axis first, one batch broadcasting)."""
    batched = what == "batch_matmul"
    _check(what, lhs, rhs, 3 if batched else 2)
    lead: tuple[int, ...] = ()
    if batched:
        b = max(lhs.shape[0], rhs.shape[0])
        if {lhs.shape[0], rhs.shape[0]} - {1, b}:
            raise ValueError(f"cblas.{what}: batch extents {lhs.shape[0]} and "
                             f"{rhs.shape[0]} differ")
        lead = (b,)
    (n, k) = lhs.shape[-2:][::-1] if transa else lhs.shape[-2:]
    (k2, m) = rhs.shape[-2:][::-1] if transb else rhs.shape[-2:]
    if k != k2:
        raise ValueError(f"cblas.{what}: the reduction extents differ ({k} of "
                         f"'{lhs.name}', {k2} of '{rhs.name}')")
    kwargs.setdefault("name", "C")
    return extern((*lead, n, m), [lhs, rhs],  # type: ignore[no-any-return]
                  lambda ins, outs: call_packed(f"tex.contrib.cblas.{what}", ins[0], ins[1],
                                                outs[0], bool(transa), bool(transb)),
                  **kwargs)


def matmul(lhs: Tensor, rhs: Tensor, transa: bool = False, transb: bool = False,
           **kwargs: Any) -> Tensor:
    """``op(lhs) @ op(rhs)`` (``op`` transposes when ``transa``/``transb``), as an extern
    call of NumPy's BLAS; ``kwargs`` go to ``te.extern`` (``name``, ``tag``)."""
    return _product("matmul", lhs, rhs, transa, transb, kwargs)


def batch_matmul(lhs: Tensor, rhs: Tensor, transa: bool = False, transb: bool = False,
                 iterative: bool = False, **kwargs: Any) -> Tensor:
    """``op(lhs[k]) @ op(rhs[k])`` per batch ``k`` (one batch broadcasts), as an extern
    call of NumPy's BLAS. ``iterative`` (TVM's choice of a loop of GEMMs) changes nothing."""
    return _product("batch_matmul", lhs, rhs, transa, transb, kwargs)
