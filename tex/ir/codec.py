"""IR object graphs as JSON-able records and back, for the disk cache of results
(``tex.ir.saved``: ``differentiate``'s and ``auto_schedule``'s).

``encode(value, codecs)`` numbers every object that ``value`` reaches, producers first (an
iterative post-order walk: each shared node once, no recursion a long program can
exhaust), and gives one record per object, ``[class name, field, field, ...]``, with the
fields its ``Codec`` lists. ``decode`` replays the records through each class's
constructor, so interned nodes are interned again and every invariant a constructor checks
is checked again. A field value is encoded as follows (a field its ``Codec`` calls plain
as itself, a DType as its name):

    an object of a listed class  ->  its number (a JSON int)
    None, bool, str, float       ->  itself
    int                          ->  ["i", n]          tuple or list  ->  ["t", item, ...]
    dict                         ->  ["m", key, value, key, value, ...]
    DType                        ->  ["d", name]       enum member    ->  ["e", enum, name]

Anything else makes the value ``Unencodable``; the caller then does not cache it.

``known`` objects (an earlier ``Encoding``'s) keep their numbers and get no record: a
cache encodes its inputs first, hashes those records as its key, then encodes its result
against them, so that the result refers to the inputs by number and decodes onto the
caller's own objects (the inputs a second process built are numbered the same way, by the
same walk). Names are kept, ``PlaceholderOp.seq`` (creation order) is not: a decoded
placeholder is a new one and is never returned in place of the caller's.

``IR_CODECS`` covers the nodes of this package; a layer above passes its own classes too
(``tex.schedule.saved`` adds the stages and loop relations).
"""
from __future__ import annotations

import enum
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..dtype import DType, as_dtype
from .expr import (
    Binary,
    Cast,
    CommReducer,
    Compare,
    Const,
    IterVar,
    Op,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from .tensor import ComputeOp, PlaceholderOp, Shape, Tensor

__all__ = ["Codec", "DERIVED", "Encoding", "IR_CODECS", "ENUMS", "Unencodable", "decode", "encode"]


@dataclass(frozen=True)
class Codec:
    """How one class is stored: the attributes read (``fields``) and the function that
    makes the object again from their values, in that order (``make``). The fields in
    ``plain`` always hold a str, an int, a bool or a DType, stored as themselves (a
    DType as its name, which ``make`` accepts): no tag to decode."""

    fields: tuple[str, ...]
    make: Callable[..., Any]
    plain: frozenset[str] = frozenset()

    @property
    def plain_mask(self) -> tuple[bool, ...]:
        """Per field, whether it is plain."""
        return tuple(f in self.plain for f in self.fields)


def _plain(*names: str) -> frozenset[str]:
    return frozenset(names)


IR_CODECS: dict[type, Codec] = {
    Const: Codec(("value", "dtype"), Const, _plain("dtype")),
    Var: Codec(("name", "dtype", "kind"), Var, _plain("name", "dtype", "kind")),
    TensorRead: Codec(("tensor", "indices"), TensorRead),
    Unary: Codec(("op", "a"), Unary),
    Binary: Codec(("op", "a", "b"), Binary),
    Compare: Codec(("op", "a", "b"), Compare),
    Select: Codec(("cond", "a", "b"), Select),
    Cast: Codec(("dtype", "a"), Cast, _plain("dtype")),
    Reduce: Codec(("combiner", "source", "axis", "condition", "init", "value_index"), Reduce,
                  _plain("value_index")),
    IterVar: Codec(("var", "dom"), IterVar),
    Range: Codec(("min", "extent"), Range, _plain("min", "extent")),
    CommReducer: Codec(("name", "lhs", "rhs", "result", "identity"), CommReducer,
                       _plain("name")),
    # a tensor is its operation's output: the operation made it, decoding must not again
    Tensor: Codec(("op", "value_index"), lambda op, k: op.output(k), _plain("value_index")),
    # a placeholder's tag and attrs are always empty (PlaceholderOp.__init__)
    PlaceholderOp: Codec(("name", "shape", "dtype"), PlaceholderOp, _plain("name", "dtype")),
    # the inputs are stored so that decoding does not walk every body for them
    ComputeOp: Codec(("name", "axis", "_body", "tag", "attrs", "input_tensors"),
                     lambda name, axis, body, tag, attrs, inputs:
                     ComputeOp(name, axis, body, tag, attrs, inputs=inputs),
                     _plain("name", "tag")),
}

# class -> {slot: why it is not a field}: the slots each constructor makes again (a test
# checks that every slot of every class above is a field or listed here)
DERIVED: dict[type, dict[str, str]] = {
    **{cls: {"dtype": "made by the constructor from the operands"}
       for cls in (TensorRead, Unary, Binary, Compare, Select, Reduce)},
    PlaceholderOp: {"tag": "always empty", "attrs": "always empty",
                    "seq": "creation order in this process (a decoded placeholder is new)",
                    "_outputs": "made by the constructor"},
    ComputeOp: {"reduce_axis": "the body's", "_outputs": "made by the constructor",
                "_inputs": "stored as input_tensors", "_shape": "the axes' extents"},
}

# the enumerations a field may hold, by class name
ENUMS: dict[str, type[enum.Enum]] = {"Op": Op}


class Unencodable(Exception):
    """A value reaches an object or a value that no codec or rule covers (or a cycle)."""


@dataclass
class Encoding:
    """The numbered objects (``known`` ones first), the records of those this encoding
    added, and the encoded value."""

    objects: list[Any] = field(default_factory=list)
    records: list[list[Any]] = field(default_factory=list)
    value: Any = None


def _objects_in(value: Any, codecs: Mapping[type, Codec]) -> list[Any]:
    """The objects of listed classes directly in ``value`` (through containers only), in
    order."""
    found: list[Any] = []
    stack = [value]
    while stack:
        v = stack.pop()
        t = type(v)
        if t in codecs:
            found.append(v)
        elif t is tuple or t is list or t is Shape:
            stack.extend(reversed(v))
        elif t is dict:
            for k, x in reversed(list(v.items())):
                stack.append(x)
                stack.append(k)
    return found


def _enc_plain(v: Any, name: str) -> Any:
    t = type(v)
    if t is str or t is int or t is bool:
        return v
    if t is DType:
        return v.name
    raise Unencodable(f"field {name} holds a {t.__name__}, not a plain value")


def encode(value: Any, codecs: Mapping[type, Codec], known: Encoding | None = None
           ) -> Encoding:
    """``value`` as records (module docstring); raises ``Unencodable``."""
    objects = list(known.objects) if known is not None else []
    ids = {id(o): k for k, o in enumerate(objects)}
    records: list[list[Any]] = []

    def enc(v: Any) -> Any:
        t = type(v)
        if t in codecs:
            k = ids.get(id(v))
            if k is None:
                raise Unencodable(f"{t.__name__} reached through a cycle")
            return k
        if v is None or t is bool or t is str or t is float:
            return v
        if t is int:
            return ["i", v]
        if t is tuple or t is list or t is Shape:
            out: list[Any] = ["t"]
            for x in v:  # mostly objects already numbered (indices, axes, bodies)
                k = ids.get(id(x)) if type(x) in codecs else None
                out.append(k if k is not None else enc(x))
            return out
        if t is dict:
            out = ["m"]
            for k2, x in v.items():
                out.append(enc(k2))
                out.append(enc(x))
            return out
        if t is DType:
            return ["d", v.name]
        if isinstance(v, enum.Enum) and ENUMS.get(t.__name__) is t:
            return ["e", t.__name__, v.name]
        raise Unencodable(f"a value of type {t.__name__}")

    # per class: its name, its fields with their plainness, the fields that may refer
    spec = {cls: (cls.__name__, tuple(zip(c.fields, c.plain_mask)),
                  tuple(f for f, p in zip(c.fields, c.plain_mask) if not p))
            for cls, c in codecs.items()}
    expanded: set[int] = set()
    stack = list(reversed(_objects_in(value, codecs)))
    while stack:
        obj = stack[-1]
        oid = id(obj)
        if oid in ids:
            stack.pop()
            continue
        name, fields, refs = spec[type(obj)]
        if oid not in expanded:
            expanded.add(oid)
            todo = []
            for f in refs:
                v = getattr(obj, f)
                t = type(v)
                if t in codecs:
                    if id(v) not in ids:
                        todo.append(v)
                elif t is tuple and all(type(x) in codecs for x in v):
                    todo.extend(x for x in v if id(x) not in ids)
                else:
                    todo.extend(c for c in _objects_in(v, codecs) if id(c) not in ids)
            if todo:
                stack.extend(reversed(todo))
                continue
        stack.pop()
        rec: list[Any] = [name]
        for f, p in fields:
            v = getattr(obj, f)
            t = type(v)
            if p:
                rec.append(v if t is str or t is int or t is bool else _enc_plain(v, f))
            else:  # a reference (numbered above), or a container or tagged value
                k = ids.get(id(v)) if t in codecs else None
                rec.append(k if k is not None else enc(v))
        records.append(rec)
        ids[oid] = len(objects)
        objects.append(obj)
    return Encoding(objects, records, enc(value))


def decode(records: Sequence[Sequence[Any]], value: Any, codecs: Mapping[type, Codec],
           known: Sequence[Any] = ()) -> tuple[Any, list[Any]]:
    """The value ``encode`` encoded, its objects made again after ``known`` (the objects
    the records refer to by the numbers below ``len(known)``), and every numbered object
    (``known``'s, then the new ones: what a later ``encode`` may take as known). Malformed
    records raise ``ValueError`` (or whatever a constructor raises on them)."""
    by_name = {cls.__name__: (codec.make, codec.plain_mask) for cls, codec in codecs.items()}
    objects = list(known)

    def dec(v: Any) -> Any:
        t = type(v)
        if t is int:
            if v < 0:
                raise ValueError(f"reference {v} to no object")
            return objects[v]  # IndexError past the end
        if t is list:
            tag = v[0]
            if tag == "t":
                # most tuples hold references only (indices, axes, bodies)
                return tuple([objects[x] if type(x) is int and x >= 0 else dec(x)
                              for x in v[1:]])
            if tag == "i":
                return int(v[1])
            if tag == "m":
                return {dec(v[i]): dec(v[i + 1]) for i in range(1, len(v), 2)}
            if tag == "d":
                return as_dtype(v[1])
            if tag == "e":
                return ENUMS[v[1]][v[2]]
            raise ValueError(f"unknown tag {tag!r}")
        if v is None or t is bool or t is str or t is float:
            return v
        raise ValueError(f"unknown value {v!r}")

    append = objects.append
    for rec in records:
        entry = by_name.get(rec[0])
        if entry is None or len(rec) != len(entry[1]) + 1:
            raise ValueError(f"malformed record {rec[:1]!r}")
        make, plain = entry
        # a plain field is itself; inline a reference before the general case
        append(make(*[x if p else objects[x] if type(x) is int and x >= 0 else dec(x)
                      for x, p in zip(rec[1:], plain)]))
    return dec(value), objects
