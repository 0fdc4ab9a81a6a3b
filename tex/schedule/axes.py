"""Loop axes of a stage: the relations that derive new axes from old ones (``Split``,
``Fuse``), the GPU thread axes loops are bound to, and the annotation kinds of a loop.

A stage records every relation it was given, in order (``Stage.relations``); lowering
reads them to rebuild the original axes from the loops (``tex.lower.relations``), and
``rfactor`` to rebuild the reduction axes.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtype import int32
from ..error import ScheduleError
from ..ir.codec import IR_CODECS, Codec
from ..ir.expr import IterVar, Range, Var

__all__ = ["CODECS", "THREAD_TAGS", "Fuse", "PARALLEL", "Relation", "SERIAL", "Singleton",
           "Split", "THREAD",
           "ThreadAxis", "UNROLL", "VECTORIZE", "thread_axis"]

THREAD_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z", "threadIdx.x", "threadIdx.y",
               "threadIdx.z", "vthread")


@dataclass(frozen=True, slots=True, eq=False)
class Split:
    """``parent = outer * factor + inner`` (``inner`` in ``[0, factor)``).

    ``tail`` says what the last ``outer`` iteration does when ``factor`` does not divide the
    extent ``n``: ``"guard"`` runs only the points below ``n`` (a condition on every point,
    TVM's behaviour); ``"shift"`` moves the last tile inwards to ``[n - factor, n)``
    (``parent = min(outer * factor, n - factor) + inner``), so every tile is whole and
    unguarded and the points where two tiles overlap are computed twice, to the same value
    (Halide's ``ShiftInwards``; only for data-parallel axes, see ``Stage.split``).

    ``nparts`` (a ``split(nparts=)``) fixes the outer loop's extent, as TVM does: outer
    iterations past the end are guarded off like the rest of the last tile."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int
    tail: str = "guard"
    nparts: int | None = None


@dataclass(frozen=True, slots=True, eq=False)
class Fuse:
    """``fused = outer * extent(inner) + inner``."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


@dataclass(frozen=True, slots=True, eq=False)
class Singleton:
    """A loop of extent 1 made by ``fuse()`` with no axes (TVM's ``Singleton``): it
    derives from no axis and gives none a value."""

    iter: IterVar


Relation = Split | Fuse | Singleton


@dataclass(frozen=True, slots=True, eq=False)
class ThreadAxis:
    """A GPU thread index (``blockIdx.x``, ``threadIdx.y``, ...) to bind loops to; with
    ``extent`` (TVM's ``dom``), a loop bound to it must not run longer."""

    tag: str
    extent: int | None = None
    name: str = ""

    def __str__(self) -> str:
        return self.tag

    @property
    def var(self) -> Var:
        """The hardware index as a variable, for conditions on it (TVM's ``tx.var``:
        ``s[B].set_store_predicate(tx.var.equal(0))``); it stands for the loop bound to
        this tag in the stage the condition is given to."""
        return Var(self.tag, int32, kind="thread")


def thread_axis(dom: Any = None, tag: str = "", name: str = "", span: Any = None
                ) -> ThreadAxis:
    """A GPU thread axis for ``Stage.bind``: its tag one of ``THREAD_TAGS``. As TVM's:
    ``thread_axis("threadIdx.x")``, ``thread_axis((0, 64), "threadIdx.x")``,
    ``thread_axis(tag="blockIdx.x", name="bx")``.

    Example
    -------
    >>> s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    """
    if isinstance(dom, str):
        if tag:
            raise ScheduleError(f"thread_axis: the tag is given twice ({dom!r} and {tag!r})")
        dom, tag = None, dom
    if not isinstance(tag, str):
        raise TypeError(f"thread_axis: the tag must be a str like 'threadIdx.x', got "
                        f"{type(tag).__name__}")
    if tag not in THREAD_TAGS:
        raise ScheduleError(f"thread_axis: unknown tag {tag!r}; expected one of "
                            f"{', '.join(THREAD_TAGS)}")
    if not isinstance(name, str):
        raise TypeError(f"thread_axis: name must be a str, got {type(name).__name__}")
    extent = None
    if dom is not None:
        lo, hi = _bounds(dom)
        if lo != 0 or hi <= 0:
            raise ScheduleError(f"thread_axis: dom must be (0, n) with n >= 1, got {dom!r}")
        extent = hi
    return ThreadAxis(tag, extent, name or tag)


def _bounds(dom: Any) -> tuple[int, int]:
    """``(lo, hi)`` of a ``(lo, hi)`` pair or a ``Range`` (``min``, ``extent``)."""
    if isinstance(dom, Range):
        lo, n = dom.min, dom.extent
        return int(lo), int(lo) + int(n)
    if isinstance(dom, (tuple, list)) and len(dom) == 2 and \
            all(isinstance(v, (int, np.integer)) and not isinstance(v, bool) for v in dom):
        return int(dom[0]), int(dom[1])
    raise TypeError(f"thread_axis: dom must be a pair of ints (0, n), got {dom!r}")


# annotation kinds of a leaf variable
SERIAL, PARALLEL, VECTORIZE, UNROLL, THREAD = "serial", "parallel", "vectorize", "unroll", "thread"


# how a schedule's objects are kept on disk (tex.ir.codec): the IR's and these
CODECS: dict[type, Codec] = {
    **IR_CODECS,
    Split: Codec(("parent", "outer", "inner", "factor", "tail", "nparts"), Split),
    Fuse: Codec(("outer", "inner", "fused"), Fuse),
    Singleton: Codec(("iter",), Singleton),
    ThreadAxis: Codec(("tag", "extent", "name"), ThreadAxis),
}
