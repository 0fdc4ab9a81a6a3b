"""``schedule_text``: a schedule and its arguments as canonical text, the build cache's key
before lowering.

``tex.build`` looks a program up twice: by this text (what the user built: the DAG, every
stage's loops, annotations and attach point, the argument list), and, when that misses, by
the lowered function (``tex.runtime.jit.cache_key``). A hit on the first skips ``lower``,
which is most of a second process's build (``tex.runtime.jit.FrontCache``).

The text lists every object the schedule reaches, numbered in the order a walk from the
arguments, the outputs and the stages meets them: one line per object with its class and
the fields ``FIELDS`` names for that class, references to other objects as ``%k``. Names
are kept (the lowered function prints them), so the text is exactly as specific as the
lowered key. ``IGNORED`` lists the fields left out, each with the reason; a test checks
that every slot of every class is in one table or the other, so a field added later must
be decided on. An object of a class in neither table makes the schedule unkeyable
(``None``): the build then lowers, as it always did.

The walk is iterative (no recursion a long program can exhaust) and visits each shared
node once, so the text grows with the DAG, not with the expression trees it would expand
to.

``front_text`` is what the build hashes: for a schedule ``auto_schedule`` found in or
stored to the disk cache (``Schedule.saved``), the entry's key plus what differs from the
entry (its objects are numbered by the entry, ``tex.ir.codec``), which walks only what
changed since instead of the whole DAG (bert's gradient: 6 ms instead of 21); for any
other schedule, ``schedule_text``.
"""
from __future__ import annotations

import enum
import json
from collections.abc import Sequence
from typing import Any

from ..dtype import DType
from ..ir.codec import Unencodable, encode
from ..ir.expr import (
    Binary,
    Cast,
    CommReducer,
    Compare,
    Const,
    IterVar,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from ..ir.tensor import ComputeOp, PlaceholderOp, Shape, Tensor
from .axes import CODECS, Fuse, Singleton, Split, ThreadAxis
from .schedule import SNAPSHOT_FIELDS, Schedule, Stage

__all__ = ["FIELDS", "IGNORED", "STAGE_FIELDS", "STAGE_IGNORED", "front_text",
           "schedule_text"]

# class -> the fields that decide what lowering makes of an object of it (the class itself
# is always part of the line); every class that may be reached must be listed
FIELDS: dict[type, tuple[str, ...]] = {
    Const: ("dtype", "value"),
    Var: ("dtype", "name", "kind"),
    TensorRead: ("dtype", "tensor", "indices"),
    Unary: ("dtype", "op", "a"),
    Binary: ("dtype", "op", "a", "b"),
    Compare: ("dtype", "op", "a", "b"),
    Select: ("dtype", "cond", "a", "b"),
    Cast: ("dtype", "a"),
    Reduce: ("dtype", "combiner", "source", "axis", "condition", "init", "value_index"),
    IterVar: ("var", "dom"),
    Range: ("min", "extent"),
    CommReducer: ("name", "lhs", "rhs", "result", "identity"),
    Tensor: ("op", "value_index"),
    PlaceholderOp: ("name", "tag", "attrs", "shape", "dtype"),
    ComputeOp: ("name", "tag", "attrs", "axis", "reduce_axis", "_body"),
    Split: ("parent", "outer", "inner", "factor", "tail", "nparts"),
    Fuse: ("outer", "inner", "fused"),
    Singleton: ("iter",),
    ThreadAxis: ("tag", "extent"),
}

# class -> {slot: why it is not part of the text}
IGNORED: dict[type, dict[str, str]] = {
    PlaceholderOp: {
        "seq": "creation order in this process; the argument list is explicit",
        "_outputs": "the tensors of the operation, reached from their readers"},
    ComputeOp: {
        "_outputs": "the tensors of the operation, reached from their readers",
        "_inputs": "derived from the body",
        "_shape": "derived from the axes"},
    ThreadAxis: {"name": "a label (TVM's); the tag decides the hardware index"},
}

# the attributes of a Stage left out of the text (with the reason); the text has the others
# of its snapshot (Schedule.snapshot), in that order
STAGE_IGNORED: dict[str, str] = {
    "schedule": "the schedule being keyed",
    "_op": "read through the property op (refreshed first)",
    "_attach_stage": "read through the property attach_stage",
    "origin_op": "the operation before the schedule rewrote it; lowering reads op",
    "pragmas": "recorded for iter_var_attrs (TVM's pragmas); lowering does not read them",
}
STAGE_FIELDS = tuple(f for f in SNAPSHOT_FIELDS if f not in STAGE_IGNORED)

_PLAIN = (type(None), bool, int, float, str)


class _Unkeyable(Exception):
    """An object of a class neither table knows."""


def front_text(sch: Schedule, args: Sequence[Any]) -> str | None:
    """The build's key text for ``sch`` with ``args``. A schedule ``auto_schedule`` found
    in or stored to the disk cache (``Schedule.saved``) is keyed by that entry's key plus
    its snapshot and the arguments encoded against the entry's objects (``tex.ir.codec``):
    the entry's key decides those objects, so only what changed since (a split, a new
    stage) is walked, not the whole DAG again. Any other schedule: ``schedule_text``."""
    saved = sch.saved
    if saved is not None and saved.full is not None:
        try:
            enc = encode((list(args), sch.snapshot()), CODECS, saved.full)
        except Unencodable:
            return schedule_text(sch, args)
        return f"saved {saved.key}\n" + json.dumps([enc.records, enc.value],
                                                    separators=(",", ":"))
    return schedule_text(sch, args)


def schedule_text(sch: Schedule, args: Sequence[Any]) -> str | None:
    """The canonical text of ``sch`` built with ``args`` (see the module docstring); None
    when something in it has no place in the text."""
    ids: dict[int, str] = {}  # id -> "%k"
    queue: list[Any] = []  # objects numbered, in number order; their lines come in order
    keep: list[Any] = []  # what ids refers to, alive until the walk ends

    def ref(obj: Any) -> str:
        r = ids.get(id(obj))
        if r is None:
            if type(obj) not in FIELDS:
                raise _Unkeyable(type(obj).__name__)
            r = ids[id(obj)] = f"%{len(queue)}"
            queue.append(obj)
            keep.append(obj)
        return r

    def enc(value: Any) -> str:
        cls = type(value)
        if cls in FIELDS:
            r = ids.get(id(value))
            return r if r is not None else ref(value)
        if cls in _PLAIN:
            return repr(value)
        if cls is tuple or cls is list or cls is Shape:
            return "[" + ",".join([enc(v) for v in value]) + "]"
        if cls is dict:
            return "{" + ",".join([f"{enc(k)}:{enc(v)}" for k, v in value.items()]) + "}"
        if cls is DType:
            return value.name
        if isinstance(value, enum.Enum):
            return f"{cls.__name__}.{value.name}"
        if isinstance(value, Stage):
            return f"stage{positions[value]}"
        raise _Unkeyable(cls.__name__)

    positions = {st: k for k, st in enumerate(sch.stages)}
    try:
        head = ["args " + enc(list(args)), "outputs " + enc(list(sch.outputs))]
        for st in sch.stages:
            head.append("stage " + ",".join([enc(getattr(st, f)) for f in STAGE_FIELDS]))
        lines: list[str] = []
        done = 0
        while done < len(queue):  # ref() appends while the lines are made
            obj = queue[done]
            cls = type(obj)
            lines.append(f"%{done}={cls.__name__}("
                         + ",".join([enc(getattr(obj, f)) for f in FIELDS[cls]]) + ")")
            done += 1
    except _Unkeyable:
        return None
    return "\n".join(head + lines)
