"""Storage during lowering: the flat buffer each tensor lives in, unique buffer names, reads
rewritten into reads of those buffers.

Every tensor lives in a 1-D buffer holding a box of it (the whole tensor unless it is
computed at a loop of another stage). Flat offsets into buffers of more than 2**31 - 1
elements are computed in int64.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from collections.abc import Set as AbstractSet
from dataclasses import dataclass

from .. import debug
from ..arith.extent import exceeds_int32, extent_product
from ..dtype import DTYPES, int32
from ..ir import fold
from ..ir.expr import Const, Expr, TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import rewrite
from .bounds_check import is_report

__all__ = ["INT32_LIMIT", "Names", "Storage", "buffer_size", "flatten_reads", "i32", "int64"]

int64 = DTYPES["int64"]
INT32_LIMIT = 2**31 - 1


def i32(v: int) -> Const:
    """The int32 constant ``v``."""
    return fold.const(int(v), int32)


@dataclass(frozen=True)
class Storage:
    """Where a tensor's elements live: a flat buffer holding the box ``offsets + [0, extents)``
    of the tensor (the whole tensor unless computed at a loop of another stage)."""

    buffer: Tensor
    extents: tuple[int, ...]
    offsets: tuple[Expr, ...] | None = None  # None: all zero

    def flat_index(self, indices: Sequence[Expr]) -> Expr:
        """Row-major flat index of ``tensor[indices]`` in the buffer."""
        if not self.extents:
            return i32(0)
        wide = exceeds_int32(extent_product(self.extents))
        acc: Expr | None = None
        for d, (ix, n) in enumerate(zip(indices, self.extents)):
            if self.offsets is not None:
                ix = ix - self.offsets[d]
            if wide:
                ix = fold.cast(int64, ix)
            acc = ix if acc is None else acc * n + ix
        assert acc is not None  # for the type checker: extents is not empty
        return acc


def buffer_size(t: Tensor) -> int | Expr:
    """The elements of a buffer holding all of ``t`` (at least 1; an expression over the
    shape variables when ``t``'s shape is symbolic)."""
    size = extent_product(t.shape)
    return max(size, 1) if isinstance(size, int) else size


class Names:
    """Unique buffer names within one function."""

    def __init__(self) -> None:
        self.used: set[str] = set()

    def fresh(self, name: str) -> str:
        """``name`` (spaces made underscores), suffixed ``_2``, ``_3``, ... if taken."""
        base = name.replace(" ", "_") or "buf"
        cand, n = base, 1
        while cand in self.used:
            n += 1
            cand = f"{base}_{n}"
        self.used.add(cand)
        return cand


def flatten_reads(e: Expr, env: Mapping[Tensor, Storage], scalars: AbstractSet[Var]) -> Expr:
    """``e`` with every tensor read made a read of its flat buffer (``env``); a free
    ``tex.var`` that is not one of the ``scalars`` arguments is a ``ValueError``."""
    def fn(node: Expr) -> Expr | None:
        if isinstance(node, TensorRead) and is_report(node.tensor):
            return None  # a bounds report: its index is a value, not a position
        if isinstance(node, TensorRead):
            where = env.get(node.tensor)
            if where is None:
                raise debug.InternalError(f"lower: no storage for '{node.tensor.name}'")
            return TensorRead(where.buffer, [where.flat_index(node.indices)])
        if isinstance(node, Var) and node.kind in ("var", "size") and node not in scalars:
            raise ValueError(f"lower: the computation uses the free variable '{node.name}' "
                             "(a tex.var); pass it in args to make it a scalar argument")
        return None
    return rewrite(e, fn)
