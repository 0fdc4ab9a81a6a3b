"""The loop-nest IR: statements over flat 1-D buffers, produced by ``lower`` and consumed by
the code generators.

Expressions are ordinary ``tex.ir`` nodes. A *buffer* is a 1-D placeholder tensor whose one
dimension is the flattened element count, so a load is ``TensorRead(buffer, [flat_index])``
and prints as ``C[i*512 + j]``; the buffer's name is unique within one ``LoweredFunc``.
Loop and let variables are ``Var`` nodes (identity matters, names are for reading).

Invariants the code generators rely on:

- Loops start at ``min`` and run ``extent`` times; ``extent`` is a constant for vectorized
  and unrolled loops.
- A load guarded by a ``Select`` branch (``select(c, A[i], 0)``) or by an ``IfThenElse``
  may be out of bounds where its guard is false: code generators evaluate ``Select``
  branches that read memory (or can fault, like integer division) lazily, never
  speculatively.
- An ``ExternCall`` reads and writes whole buffers outside any loop (at the top of the
  function, between root nests): its inputs are complete before it, its outputs after.
- Every buffer read or written is a parameter or is declared by an enclosing ``Allocate``;
  a read of a ``tex.lower.bounds_check.BoundsReportOp`` tensor is no buffer access but the
  report of a failed bounds check (it gives 0), always the lazily evaluated side of a
  ``select(ok, read, report)``.

Nodes are frozen dataclasses; passes build new trees.
"""
from __future__ import annotations

import enum
import hashlib
import re
from collections.abc import Callable, Generator, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from ..dtype import DType
from ..ir.expr import Const, Expr, Var
from ..ir.tensor import ExternOp, PlaceholderOp, Tensor

__all__ = [
    "ForKind", "Stmt", "For", "Store", "Allocate", "IfThenElse", "LetStmt", "Seq", "Barrier",
    "ExternCall",
    "BufferParam", "ScalarParam", "Param", "LoweredFunc", "make_buffer", "seq",
    "stmt_children", "stmt_exprs", "with_stmt_children", "walk_stmts", "stored_buffers",
    "map_exprs", "map_stmts",
    "symbol_name", "Nested", "run_nested", "each_nested",
]

T = TypeVar("T")
U = TypeVar("U")
# A recursive function written as a generator: where it would call itself (or another
# such function) it yields the callee's generator and receives the callee's result
Nested = Generator["Nested[Any]", Any, T]

# a symbol the code generators may emit as is: an ASCII C identifier of bounded length
_SYMBOL = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,199}")


def symbol_name(name: str) -> str:
    """``name`` as a linker symbol (a function or kernel name): unchanged when it is an ASCII
    C identifier of at most 200 characters; otherwise its ASCII letters, digits and
    underscores (others become ``_``), cut to 160, and a digest of the whole name, so
    distinct names stay distinct (JIT lookups and PTX accept only ASCII identifiers)."""
    if _SYMBOL.fullmatch(name):
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    base = re.sub(r"[^A-Za-z0-9_]", "_", name)[:160]
    return f"{'' if base[:1].isalpha() or base[:1] == '_' else 'f_'}{base}_{digest}"


class ForKind(enum.Enum):
    """How a loop's iterations run."""

    SERIAL = "for"
    PARALLEL = "parallel for"  # iterations split over threads (OpenMP on the CPU)
    VECTORIZED = "vectorized for"  # one SIMD lane per iteration
    UNROLLED = "unrolled for"  # body repeated extent times
    THREAD = "thread for"  # bound to a GPU thread index (``thread_tag``)


class Stmt:
    """Base of statement nodes."""

    __slots__ = ()

    def __str__(self) -> str:
        from .printer import format_stmt
        return format_stmt(self)


@dataclass(frozen=True, slots=True, eq=False)
class For(Stmt):
    """``for var in [min, min + extent): body``."""

    var: Var
    min: Expr
    extent: Expr
    kind: ForKind
    body: Stmt
    thread_tag: str = ""  # "blockIdx.x", "threadIdx.y", ... when kind is THREAD


@dataclass(frozen=True, slots=True, eq=False)
class Store(Stmt):
    """``buffer[index] = value``."""

    buffer: Tensor
    index: Expr
    value: Expr


@dataclass(frozen=True, slots=True, eq=False)
class Allocate(Stmt):
    """A temporary buffer live during ``body``; ``scope`` is "global", "local" or "shared"."""

    buffer: Tensor
    scope: str
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class IfThenElse(Stmt):
    """``if cond: then_case else: else_case`` (``else_case`` may be None)."""

    cond: Expr
    then_case: Stmt
    else_case: Stmt | None = None


@dataclass(frozen=True, slots=True, eq=False)
class LetStmt(Stmt):
    """``var = value`` visible in ``body``."""

    var: Var
    value: Expr
    body: Stmt


@dataclass(frozen=True, slots=True, eq=False)
class Seq(Stmt):
    """Statements run in order."""

    body: tuple[Stmt, ...]


@dataclass(frozen=True, slots=True, eq=False)
class Barrier(Stmt):
    """Every thread of a GPU thread block waits here until all have arrived, and their
    shared-memory writes before it are visible after it (``__syncthreads()``). Inserted
    by ``tex.lower.gpu``; reached by all threads of a block or none (uniform control
    flow)."""


@dataclass(frozen=True, slots=True, eq=False)
class ExternCall(Stmt):
    """One call of the function of the extern operation ``op`` (``te.extern``), the
    ``index``-th extern call of the function: ``buffers`` holds the flat buffer of each of
    its buffer arguments in call order (``written``: whether it is an output), ``scalars``
    the value of each scalar argument. The call reads its inputs and writes its outputs
    whole."""

    op: ExternOp
    index: int
    buffers: tuple[Tensor, ...]
    written: tuple[bool, ...]
    scalars: tuple[Expr, ...]

    @property
    def read_buffers(self) -> tuple[Tensor, ...]:
        return tuple(b for b, w in zip(self.buffers, self.written) if not w)

    @property
    def written_buffers(self) -> tuple[Tensor, ...]:
        return tuple(b for b, w in zip(self.buffers, self.written) if w)


def seq(*stmts: Stmt | None) -> Stmt:
    """A sequence of the given statements, flattened; None entries are dropped."""
    flat: list[Stmt] = []
    for s in stmts:
        if s is None:
            continue
        if isinstance(s, Seq):
            flat.extend(s.body)
        else:
            flat.append(s)
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def make_buffer(name: str, size: int | Expr, dtype: DType) -> Tensor:
    """A flat buffer of ``size`` elements (a 1-D placeholder tensor); a symbolic size
    (an expression over shape variables) gives a buffer sized when the function runs."""
    if isinstance(size, Expr) and not isinstance(size, Const):
        return PlaceholderOp(name, (size,), dtype).output(0)
    return PlaceholderOp(name, (max(int(size), 1),), dtype).output(0)


@dataclass(frozen=True, slots=True, eq=False)
class BufferParam:
    """A tensor argument: ``buffer`` is its flat view, ``tensor`` the user's tensor."""

    buffer: Tensor
    tensor: Tensor
    is_output: bool

    @property
    def name(self) -> str:
        return self.buffer.name


@dataclass(frozen=True, slots=True, eq=False)
class ScalarParam:
    """A scalar argument: the free variable ``var`` (a ``tex.var``) passed by value.
    ``derived``: a shape variable the caller does not pass, whose value the runtime takes
    from the arrays' shapes (it follows the caller's arguments)."""

    var: Var
    derived: bool = False

    @property
    def name(self) -> str:
        return self.var.name


Param = BufferParam | ScalarParam


@dataclass(frozen=True, eq=False)
class LoweredFunc:
    """A lowered function: parameters in call order and the loop nest."""

    name: str
    params: tuple[Param, ...]
    body: Stmt
    attrs: dict = field(default_factory=dict)

    def __getitem__(self, name: str) -> LoweredFunc:
        """The function by name, as in TVM's ``tvm.lower(...)["main"]`` (a lowered module
        holds one function here: this one, under ``"main"`` or its own name)."""
        if name in ("main", self.name):
            return self
        raise KeyError(f"lowered module has no function {name!r}; it holds {self.name!r}")

    def __str__(self) -> str:
        # printed once: ``build`` keys the kernel by it and keeps it for ``get_source``
        text: str | None = self.__dict__.get("_text")
        if text is None:
            from .printer import format_func
            text = format_func(self)
            object.__setattr__(self, "_text", text)
        return text


# --------------------------------------------------------------------------------------
# Generic walks (nesting depth is the loop depth plus one per stage computed inside another)
# --------------------------------------------------------------------------------------

def stmt_children(s: Stmt) -> tuple[Stmt, ...]:
    """The statements directly inside ``s``."""
    match s:
        case For(body=b) | Allocate(body=b) | LetStmt(body=b):
            return (b,)
        case IfThenElse(then_case=t, else_case=e):
            return (t,) if e is None else (t, e)
        case Seq(body=b):
            return b
    return ()


def stmt_exprs(s: Stmt) -> tuple[Expr, ...]:
    """The expressions ``s`` holds directly (not those of its child statements)."""
    match s:
        case For():
            return (s.min, s.extent)
        case Store():
            return (s.index, s.value)
        case IfThenElse():
            return (s.cond,)
        case LetStmt():
            return (s.value,)
        case ExternCall():
            return s.scalars
    return ()


def with_stmt_children(s: Stmt, children: Sequence[Stmt]) -> Stmt:
    """``s`` with its child statements replaced (same order as ``stmt_children``)."""
    old = stmt_children(s)
    if len(old) == len(children) and all(a is b for a, b in zip(old, children)):
        return s
    match s:
        case For():
            return For(s.var, s.min, s.extent, s.kind, children[0], s.thread_tag)
        case Allocate():
            return Allocate(s.buffer, s.scope, children[0])
        case LetStmt():
            return LetStmt(s.var, s.value, children[0])
        case IfThenElse():
            return IfThenElse(s.cond, children[0], children[1] if len(children) > 1 else None)
        case Seq():
            return seq(*children)
    return s


def walk_stmts(root: Stmt) -> Iterator[Stmt]:
    """Every statement under ``root`` (included), parents before children."""
    stack = [root]
    while stack:
        s = stack.pop()
        yield s
        stack.extend(reversed(stmt_children(s)))


def stored_buffers(root: Stmt) -> list[Tensor]:
    """The buffers the ``Store`` statements (and extern calls) under ``root`` write, each
    once, in order."""
    found: dict[Tensor, None] = {}
    for s in walk_stmts(root):
        if isinstance(s, Store):
            found.setdefault(s.buffer, None)
        elif isinstance(s, ExternCall):
            found.update(dict.fromkeys(s.written_buffers))
    return list(found)


def run_nested(call: Nested[T]) -> T:
    """The result of ``call``, a recursive function written as a generator (``Nested``),
    run with an explicit stack: a loop nest as deep as a long program's chain of
    ``compute_at`` stages needs no Python recursion. An exception raised by a callee is
    raised in its caller at the ``yield``, as a recursive call would."""
    stack: list[Nested[Any]] = [call]
    value: Any = None
    error: BaseException | None = None
    while True:
        top = stack[-1]
        try:
            if error is not None:
                failed, error = error, None
                sub = top.throw(failed)
            else:
                sub = top.send(value)
        except StopIteration as stop:
            stack.pop()
            if not stack:
                return stop.value
            value = stop.value
            continue
        except BaseException as exc:
            stack.pop()
            if not stack:
                raise
            error = exc
            continue
        stack.append(sub)
        value = None


def each_nested(fn: Callable[[U], Nested[T]], items: Iterable[U]) -> Nested[list[T]]:
    """``[fn(x) for x in items]`` for a ``Nested`` ``fn``, inside a ``Nested`` function:
    ``results = yield from each_nested(visit, kids)``."""
    out: list[T] = []
    for x in items:
        out.append((yield fn(x)))
    return out


def map_exprs(root: Stmt, fn: Callable[[Expr], Expr]) -> Stmt:
    """``root`` with ``fn`` applied to every expression it holds directly (not recursively
    into expressions; ``fn`` decides that). Iterative."""

    def apply(s: Stmt) -> Stmt:
        match s:
            case For():
                return For(s.var, fn(s.min), fn(s.extent), s.kind, s.body, s.thread_tag)
            case Store():
                return Store(s.buffer, fn(s.index), fn(s.value))
            case IfThenElse():
                return IfThenElse(fn(s.cond), s.then_case, s.else_case)
            case LetStmt():
                return LetStmt(s.var, fn(s.value), s.body)
            case ExternCall():
                return ExternCall(s.op, s.index, s.buffers, s.written,
                                  tuple(fn(e) for e in s.scalars))
        return s

    return map_stmts(root, apply)


def map_stmts(root: Stmt, fn: Callable[[Stmt], Stmt]) -> Stmt:
    """``root`` rebuilt bottom-up: each statement, its children rebuilt first, replaced by
    ``fn`` of it. Iterative."""
    done: dict[int, Stmt] = {}  # id(original) -> rebuilt (originals stay alive in the tree)
    stack: list[tuple[Stmt, bool]] = [(root, False)]
    while stack:
        s, expanded = stack.pop()
        kids = stmt_children(s)
        if not expanded:
            stack.append((s, True))
            stack.extend((c, False) for c in reversed(kids))
            continue
        done[id(s)] = fn(with_stmt_children(s, [done[id(c)] for c in kids]))
    return done[id(root)]
