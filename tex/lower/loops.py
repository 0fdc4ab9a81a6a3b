"""Loop levels of a stage's nest (``Level``) and their assembly into statements: loops with
their guards, let-bound values and the producers computed at the start of their bodies."""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

from ..arith.extent import is_one
from ..dtype import DType
from ..ir import fold
from ..ir.expr import Expr, IterVar, Var
from ..ir.tensor import Tensor
from .stmt import Allocate, For, ForKind, IfThenElse, LetStmt, Stmt, Store, seq

__all__ = ["Level", "assemble", "copy_level", "loops", "store_all", "wrap_guards",
           "wrap_lets"]


@dataclass
class Level:
    """One leaf loop of a stage: the loop, then what runs at the start of its body."""

    iv: IterVar
    var: Var
    extent: int
    kind: ForKind
    tag: str
    guards: list[Expr] = field(default_factory=list)
    # producers computed at the start of this loop's body: (nest, its buffers, their scope)
    attached: list[tuple[Stmt, list[Tensor], str]] = field(default_factory=list)
    # values bound inside the guards, each with its own guard or None (a scatter's index)
    lets: list[tuple[Var, Expr, Expr | None]] = field(default_factory=list)

    @property
    def is_thread(self) -> bool:
        """Bound to a GPU thread or block index (a hardware index, not a loop)."""
        return self.kind is ForKind.THREAD

    @property
    def is_thread_index(self) -> bool:
        """Bound to a ``threadIdx`` (a thread of the block, not the block itself)."""
        return self.is_thread and self.tag.startswith("threadIdx")

    def relaxed_by(self, scope: str) -> bool:
        """Whether a buffer of ``scope`` computed inside this loop is shared by the
        loop's iterations (they run on other threads): ``shared`` memory by the threads of
        a block, ``global`` memory by every thread."""
        if not self.is_thread:
            return False
        if scope == "shared":
            return self.tag.startswith("threadIdx")
        return scope == "global"


def loops(levels: Sequence[Level]) -> list[Level]:
    """The levels that are loops: a one-iteration level (not a GPU index) is the
    constant 0 in the stage's indices, and no loop in the nest."""
    return [lv for lv in levels if not is_one(lv.extent) or lv.is_thread]


def copy_level(lv: Level, kind: ForKind | None = None) -> Level:
    """The same loop (its guards, not its producers) for a second nest over it."""
    return Level(lv.iv, lv.var, lv.extent, kind or lv.kind, lv.tag, list(lv.guards))


def wrap_guards(guards: Sequence[Expr], body: Stmt) -> Stmt:
    """``body`` under ``if (g)`` for each guard, the first outermost."""
    for g in reversed(guards):
        body = IfThenElse(g, body)
    return body


def wrap_lets(lets: Sequence[tuple[Var, Expr, Expr | None]], body: Stmt) -> Stmt:
    """``let v = value; if (guard) body`` for each binding, the first outermost."""
    for var, value, guard in reversed(lets):
        if guard is not None:
            body = IfThenElse(guard, body)
        body = LetStmt(var, value, body)
    return body


def extent_expr(extent: int | Expr, dtype: DType) -> Expr:
    """A loop extent as an expression of the loop variable's dtype."""
    if isinstance(extent, Expr):
        return extent if extent.dtype is dtype else fold.cast(dtype, extent)
    return fold.const(extent, dtype)


def assemble(levels: Sequence[Level], inner: Stmt) -> Stmt:
    """Loops ``levels`` around ``inner``, with each level's lets, guards and attached
    producers at the start of its body."""
    body = inner
    for lv in reversed(levels):
        body = wrap_lets(lv.lets, body)
        for g in reversed(lv.guards):
            body = IfThenElse(g, body)
        if lv.attached:
            body = seq(*(nest for nest, _, _ in lv.attached), body)
            for _, bufs, scope in reversed(lv.attached):
                for buf in reversed(bufs):
                    body = Allocate(buf, scope, body)
        if is_one(lv.extent) and lv.kind is not ForKind.THREAD:
            continue
        body = For(lv.var, fold.const(0, lv.var.dtype), extent_expr(lv.extent, lv.var.dtype),
                   lv.kind, body, lv.tag)
    return body


def store_all(targets: Sequence[tuple[Tensor, Expr]], values: Sequence[Expr],
              names: Sequence[str]) -> Stmt:
    """``buf[ix] = value`` for each target; several at once through let-bound temporaries,
    so every value is computed from the old contents (a multi-value combiner's update)."""
    if len(targets) == 1:
        return Store(targets[0][0], targets[0][1], values[0])
    tmps = [Var(n, v.dtype) for n, v in zip(names, values)]
    out: Stmt = seq(*(Store(b, ix, tmp) for (b, ix), tmp in zip(targets, tmps)))
    for tmp, v in reversed(list(zip(tmps, values))):
        out = LetStmt(tmp, v, out)
    return out
