"""Index relations through split and fuse: extents passed down from the root axes to the
leaves, index values passed up from the leaves to the roots (TVM's message passing).

A leaf loop runs ``[0, extent)``; the root axes are rebuilt from the leaves by inverting
the relations (split: ``i = i.outer * f + i.inner``; fuse: ``i = f // n_j``, ``j = f % n_j``).
A split whose factor does not divide the extent needs the guard
``i.outer * f + i.inner < extent``, unless its tail is shifted inwards
(``i = min(i.outer * f, extent - f) + i.inner``: every tile whole, the last one overlapping
the one before; ``check_shifted`` refuses it where a point would be accumulated twice).
"""
from __future__ import annotations

from collections.abc import Mapping

from ..arith.extent import as_extent, exceeds_int32, extent_product, same_extent
from ..ir import fold
from ..ir.expr import Expr, IterVar, Op
from ..schedule import Fuse, Singleton, Split, Stage
from .storage import int64

__all__ = ["check_shifted", "leaf_extents", "root_values"]


def leaf_extents(st: Stage, root_ext: Mapping[IterVar, int]) -> dict[IterVar, int]:
    """The extent of every axis of ``st`` (root, intermediate and leaf) given those of its
    root axes: a split's outer loop runs ``ceil(n / factor)`` times (``nparts`` times when
    the split fixed that), a fused loop over the product of its parts."""
    ext: dict[IterVar, int] = dict(root_ext)
    for rel in st.relations:
        if isinstance(rel, Singleton):
            ext[rel.iter] = 1
        elif isinstance(rel, Split):
            n = ext[rel.parent]
            ext[rel.inner] = rel.factor
            ext[rel.outer] = rel.nparts if rel.nparts is not None else \
                max(1, -(-n // rel.factor)) if isinstance(n, int) else \
                as_extent((n + (rel.factor - 1)) // rel.factor)
        else:
            ext[rel.fused] = extent_product([ext[rel.outer], ext[rel.inner]])
    return ext


def root_values(st: Stage, ext: Mapping[IterVar, int], value: dict[IterVar, Expr]
                ) -> list[Expr]:
    """Extends ``value`` (the value of each leaf axis) with the value of every axis above
    the leaves, up to the roots; returns the guards of the splits whose factor does not
    divide their extent (the outer loop overshoots). A split remainder past 2**31 - 1 is
    computed in int64."""
    guards: list[Expr] = []
    for rel in reversed(st.relations):
        if isinstance(rel, Singleton):
            continue
        if isinstance(rel, Split):
            o, i = value[rel.outer], value[rel.inner]
            if exceeds_int32(extent_product([ext[rel.outer], rel.factor])):
                o, i = fold.cast(int64, o), fold.cast(int64, i)  # the remainder overflows
            n = ext[rel.parent]
            start = o * (fold.const(rel.factor, o.dtype) if isinstance(rel.factor, int)
                         else fold.cast(o.dtype, rel.factor))
            if same_extent(extent_product([ext[rel.outer], rel.factor]), n):
                value[rel.parent] = start + i
            elif rel.tail == "shift" and isinstance(n, int) and n >= rel.factor:
                # the last tile ends at n: whole tiles, the overlap computed twice
                last = fold.const(n - rel.factor, o.dtype)
                value[rel.parent] = fold.binary(Op.MIN, start, last) + i
            else:
                value[rel.parent] = start + i
                guards.append(value[rel.parent] < n)
        else:
            n_in = ext[rel.inner]
            value[rel.outer] = value[rel.fused] // n_in
            value[rel.inner] = value[rel.fused] % n_in
    return guards


def check_shifted(st: Stage) -> None:
    """Refuse a ``tail="shift"`` split whose outer loop a reduction loop of ``st`` encloses:
    the overlapping tiles would each add their part to the same points (the init of a point
    runs outside the first reduction loop, so an outer loop inside it does not restart it)."""
    shifted = [rel for rel in st.relations if isinstance(rel, Split) and rel.tail == "shift"]
    if not shifted:
        return
    leaves = st.leaf_iter_vars
    first_reduce = next((k for k, iv in enumerate(leaves) if iv.kind == "reduce"), len(leaves))
    for rel in shifted:
        for iv in _leaves_of(st, rel.outer):
            if leaves.index(iv) > first_reduce:
                raise ValueError(
                    f"lower: '{rel.parent.name}' of stage '{st.name}' is split with "
                    f"tail='shift', but its outer loop '{iv.name}' runs inside the reduction "
                    f"loop '{leaves[first_reduce].name}': the overlapping last tile would "
                    "add to points already summed; put the outer loop outside the reduction "
                    "loops, or split with tail='guard'")


def _leaves_of(st: Stage, iv: IterVar) -> list[IterVar]:
    """The leaf loops that ``iv`` became through later splits and fuses."""
    found = [iv]
    for rel in st.relations:
        if isinstance(rel, Split) and rel.parent in found:
            found.remove(rel.parent)
            found += [rel.outer, rel.inner]
        elif isinstance(rel, Fuse) and (rel.outer in found or rel.inner in found):
            found = [x for x in found if x not in (rel.outer, rel.inner)] + [rel.fused]
    return [x for x in found if x in st.leaf_iter_vars]
