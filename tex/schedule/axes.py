"""Loop axes of a stage: the relations that derive new axes from old ones (``Split``,
``Fuse``), the GPU thread axes loops are bound to, and the annotation kinds of a loop.

A stage records every relation it was given, in order (``Stage.relations``); lowering
reads them to rebuild the original axes from the loops (``tex.lower.relations``), and
``rfactor`` to rebuild the reduction axes.
"""
from __future__ import annotations

from dataclasses import dataclass

from ..ir.codec import IR_CODECS, Codec
from ..ir.expr import IterVar

__all__ = ["CODECS", "THREAD_TAGS", "Fuse", "PARALLEL", "Relation", "SERIAL", "Split", "THREAD",
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
    (Halide's ``ShiftInwards``; only for data-parallel axes, see ``Stage.split``)."""

    parent: IterVar
    outer: IterVar
    inner: IterVar
    factor: int
    tail: str = "guard"


@dataclass(frozen=True, slots=True, eq=False)
class Fuse:
    """``fused = outer * extent(inner) + inner``."""

    outer: IterVar
    inner: IterVar
    fused: IterVar


Relation = Split | Fuse


@dataclass(frozen=True, slots=True, eq=False)
class ThreadAxis:
    """A GPU thread index (``blockIdx.x``, ``threadIdx.y``, ...) to bind loops to."""

    tag: str

    def __str__(self) -> str:
        return self.tag


def thread_axis(tag: str) -> ThreadAxis:
    """A GPU thread axis for ``Stage.bind``: one of ``THREAD_TAGS``.

    Example
    -------
    >>> s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    """
    if not isinstance(tag, str):
        raise TypeError(f"thread_axis: the tag must be a str like 'threadIdx.x', got "
                        f"{type(tag).__name__}")
    if tag not in THREAD_TAGS:
        raise ValueError(f"thread_axis: unknown tag {tag!r}; expected one of "
                         f"{', '.join(THREAD_TAGS)}")
    return ThreadAxis(tag)


# annotation kinds of a leaf variable
SERIAL, PARALLEL, VECTORIZE, UNROLL, THREAD = "serial", "parallel", "vectorize", "unroll", "thread"


# how a schedule's objects are kept on disk (tex.ir.codec): the IR's and these
CODECS: dict[type, Codec] = {
    **IR_CODECS,
    Split: Codec(("parent", "outer", "inner", "factor", "tail"), Split),
    Fuse: Codec(("outer", "inner", "fused"), Fuse),
    ThreadAxis: Codec(("tag",), ThreadAxis),
}
