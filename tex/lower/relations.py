"""Index relations through split and fuse: extents passed down from the root axes to the
leaves, index values passed up from the leaves to the roots (TVM's message passing).

A leaf loop runs ``[0, extent)``; the root axes are rebuilt from the leaves by inverting
the relations (split: ``i = i.outer * f + i.inner``; fuse: ``i = f // n_j``, ``j = f % n_j``).
A split whose factor does not divide the extent needs the guard
``i.outer * f + i.inner < extent``.
"""
from __future__ import annotations

from collections.abc import Mapping

from ..ir import fold
from ..ir.expr import Expr, IterVar
from ..schedule import Split, Stage
from .storage import INT32_LIMIT, int64

__all__ = ["leaf_extents", "root_values"]


def leaf_extents(st: Stage, root_ext: Mapping[IterVar, int]) -> dict[IterVar, int]:
    """The extent of every axis of ``st`` (root, intermediate and leaf) given those of its
    root axes: a split's outer loop runs ``ceil(n / factor)`` times, a fused loop over the
    product of its parts."""
    ext: dict[IterVar, int] = dict(root_ext)
    for rel in st.relations:
        if isinstance(rel, Split):
            n = ext[rel.parent]
            ext[rel.inner] = rel.factor
            ext[rel.outer] = max(1, -(-n // rel.factor))
        else:
            ext[rel.fused] = ext[rel.outer] * ext[rel.inner]
    return ext


def root_values(st: Stage, ext: Mapping[IterVar, int], value: dict[IterVar, Expr]
                ) -> list[Expr]:
    """Extends ``value`` (the value of each leaf axis) with the value of every axis above
    the leaves, up to the roots; returns the guards of the splits whose factor does not
    divide their extent (the outer loop overshoots). A split remainder past 2**31 - 1 is
    computed in int64."""
    guards: list[Expr] = []
    for rel in reversed(st.relations):
        if isinstance(rel, Split):
            o, i = value[rel.outer], value[rel.inner]
            if ext[rel.outer] * rel.factor > INT32_LIMIT:  # the remainder overflows
                o, i = fold.cast(int64, o), fold.cast(int64, i)
            v = o * fold.const(rel.factor, o.dtype) + i
            value[rel.parent] = v
            if ext[rel.outer] * rel.factor != ext[rel.parent]:
                guards.append(v < ext[rel.parent])
        else:
            n_in = ext[rel.inner]
            value[rel.outer] = value[rel.fused] // n_in
            value[rel.inner] = value[rel.fused] % n_in
    return guards
