"""Loop IR -> LLVM IR for the host CPU: the driver (emit, verify, optimize).

``compile_llvm(func)`` turns a legalized ``LoweredFunc`` into a ``CompiledModule``: the
unoptimized IR text, the optimized IR (O3, new pass manager, a target machine for the host
CPU name and features: ``tex.codegen.host``), the assembly on request, and the object code
to load. ``emit_llvm`` gives the unoptimized IR text alone. LLVM optimizes and compiles no
module in this process: a module compiles on a compile worker (``jobs.compile_guarded``),
a child process with a deadline, so that LLVM crashing or never finishing on some IR cannot
take the caller with it.

ABI: one function ``void @<name>(...)``, one parameter per ``func.params`` entry in order,
then the caller's error record (``tex.codegen.module``): a ``BufferParam`` is a pointer
to its first element (``noalias captures(none)``: the runtime refuses outputs that
overlap another argument), a ``ScalarParam`` is passed by value (``bool`` as ``i8``,
``float16`` as its ``i16`` bits).

The function is emitted by ``ParallelEmitter`` (``parallel.py``: OpenMP and outlined
nests), over ``VectorEmitter`` (``vector.py``: vectorized loops) over ``FunctionEmitter``
(``emit.py``: statements and expressions; per-op code in ``tables.py`` and ``ops.py``).

A large module (``SPLIT_MIN_CHARS`` characters of IR text or more, with several
``TEX_COMPILE_JOBS``) is split into ``PARTS_PER_JOB`` parts per process (``split.py``: the
entry and its outlined functions in runs of about equal size) that are optimized and turned
into object code by the compile workers at once (``jobs.py``); the ``CompiledModule`` then holds
the parts' object files, which the JIT loads into one engine, and its optimized IR and
assembly are the parts' texts one after the other (each part a module of its own:
``; ModuleID`` starts the next). The unoptimized text (``get_source("ll.raw")``) is
always the whole module as emitted.

With several jobs, the compiling starts while the module is still being emitted
(``_Streamer``): the functions emitted whole (outlined nests and parallel bodies, which
finish before their callers) go in parts of ``STREAM_MIN_CHARS`` to ``STREAM_MAX_CHARS``
to a compile worker whenever one is free, and the final split shares out what is
left. ``compile_nests`` takes the function's top-level nests from a generator:
``tex.build`` lowers each root stage's nest only when the emitter asks for it, so the
worker compiles the first nests while Python runs the passes of the next. LLVM takes
about three times as long over a function as Python takes to lower, emit and print it, so
the worker works through part of the module instead of idling. (A background thread was
tried earlier and removed: llvmlite holds one lock around every call into LLVM, so it
saved no wall time.)

``TEX_DUMP=llvm,llvm.opt,asm`` prints the three texts.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .. import debug
from ..lower.bounds_check import BoundsReportOp
from ..lower.stmt import Allocate, BufferParam, LoweredFunc, Seq, Stmt, symbol_name
from . import jobs
from .host import LLVM_LOCK, HostTarget, host_target
from .irtypes import PTR, VOID, abi_type
from .jobs import PartResult
from .module import ERRORS, CodegenOptions, ModuleEmitter
from .parallel import ParallelEmitter, outlines_nests
from .split import Split, declaration, part_text, split_text

__all__ = ["CompiledModule", "emit_llvm", "emit_module", "emit_nests", "top_nests",
           "compile_llvm", "compile_nests", "SPLIT_MIN_CHARS"]

# a module with less IR text than this compiles whole, in this process: forking and loading
# several objects would cost more than the parallel work saves. Measured on 2 cores (cold
# builds, medians of 3, whole -> split): 17 KB of IR 0.104 -> 0.093 s, 35 KB 0.298 ->
# 0.230 s, 52 KB 0.276 -> 0.220 s, 174 KB 0.907 -> 0.683 s (at the old 200 KB threshold
# that one compiled whole); the CPU time grows by 20-30% on small modules
SPLIT_MIN_CHARS = 16_000
# parts per compile worker: enough for the shared queue to even out parts of unequal
# cost, few enough that each part's fixed cost (its declarations, copied helpers, a pass
# pipeline) stays small
PARTS_PER_JOB = 3
# functions emitted whole go to a worker compiling them while the rest is emitted
# (``_Streamer``) in parts of at least STREAM_MIN_CHARS and at most STREAM_MAX_CHARS of IR
# text (one function larger than that goes alone): LLVM takes about three times as long
# over a function as emitting and printing it, so the worker keeps busy with small parts
# and the functions it has no time for are left to the final split, shared by all
STREAM_MIN_CHARS = SPLIT_MIN_CHARS
STREAM_MAX_CHARS = 48_000


_NO_DEFAULT = object()


class _Deferred:
    """A field of ``CompiledModule`` that may be given as a function of no arguments,
    called on its first read: a kernel loaded from the disk cache decompresses its texts
    only when ``get_source`` asks for them (5 ms of a large gradient's 40 ms load). A
    dataclass field whose default is this descriptor (dataclasses: "descriptor-typed
    fields"; on the class it gives its default, or AttributeError: none)."""

    def __init__(self, default: Any = _NO_DEFAULT) -> None:
        self.default = default
        self.slot = ""

    def __set_name__(self, owner: type, name: str) -> None:
        self.slot = "_deferred_" + name

    def __get__(self, obj: Any, owner: type | None = None) -> Any:
        if obj is None:
            if self.default is _NO_DEFAULT:
                raise AttributeError(self.slot)
            return self.default
        value = obj.__dict__[self.slot]
        if callable(value):
            value = obj.__dict__[self.slot] = value()
        return value

    def __set__(self, obj: Any, value: Any) -> None:
        obj.__dict__[self.slot] = value


@dataclass(repr=False)
class CompiledModule:
    """One compiled function: texts for ``get_source`` and the object code to load (one
    object, or one per part of a split module). A text may be given as a function that
    makes it, called when it is first read (``_Deferred``)."""

    name: str
    llvm_ir: str = _Deferred()  # type: ignore[assignment]
    llvm_ir_opt: str = _Deferred()  # type: ignore[assignment]
    # whether the code writes its error record (a failed malloc, a failed bounds check)
    errors: bool = False
    notes: tuple[str, ...] = ()  # vectorization decisions, for tests and TEX_DUMP
    # the run-time bounds checks (check number k + 1 in the error record is the k-th)
    bounds_checks: tuple[BoundsReportOp, ...] = ()
    _asm: str | None = field(default=None, repr=False)
    # the object code (until the JIT loads it: one per part of a split module), each part's
    # optimized IR text (none for a module compiled whole), and the external functions the
    # objects call (the parts' own functions aside)
    objects: tuple[bytes, ...] = field(default=(), repr=False)
    parts_opt: tuple[str, ...] = _Deferred(())  # type: ignore[assignment]
    externals: tuple[str, ...] = ()
    # whether the code starts OpenMP parallel regions (None: read from llvm_ir when asked)
    openmp: bool | None = field(default=None, repr=False)

    def __repr__(self) -> str:
        return (f"CompiledModule({self.name!r}, parts={len(self.objects) or 1}, "
                f"errors={self.errors}, checks={len(self.bounds_checks)})")

    @property
    def uses_openmp(self) -> bool:
        """Whether the code calls ``GOMP_parallel`` (a parallel loop)."""
        if self.openmp is None:
            self.openmp = "GOMP_parallel" in self.llvm_ir
        return self.openmp

    @property
    def asm(self) -> str:
        """Host assembly of the optimized module, or of each part in turn (generated on
        first use)."""
        if self._asm is None:
            texts = self.parts_opt or (self.llvm_ir_opt,)
            with LLVM_LOCK:
                asm = []
                for text in texts:
                    # a context of its own, freed with the module (the global one keeps
                    # every module's constants and metadata)
                    context = llvm.create_context()
                    mod = llvm.parse_assembly(text, context=context)
                    asm.append(host_target().target_machine().emit_assembly(mod))
                    mod.close()
                    context.close()
            self._asm = "\n".join(asm)
        return self._asm


def emit_llvm(func: LoweredFunc, options: CodegenOptions | None = None,
              host: HostTarget | None = None) -> tuple[str, list[str], bool]:
    """LLVM IR text (unoptimized) for a legalized ``func``, for ``host`` (default: this
    machine's CPU); also the vectorization notes and whether the code writes its error
    record."""
    m = emit_module(func, options, host)
    text = str(m.ir)
    m.release()
    return text, m.notes, m.errors


def top_nests(func: LoweredFunc) -> tuple[tuple[Allocate, ...], tuple[Stmt, ...]]:
    """The allocations around ``func``'s body (outermost first) and the statements of the
    sequence inside them (the root stages' nests, as ``tex.lower`` makes them)."""
    allocs: list[Allocate] = []
    body = func.body
    while isinstance(body, Allocate):
        allocs.append(body)
        body = body.body
    return tuple(allocs), body.body if isinstance(body, Seq) else (body,)


def emit_module(func: LoweredFunc, options: CodegenOptions | None = None,
                host: HostTarget | None = None,
                on_placed: Callable[[ir.Function], None] | None = None) -> ModuleEmitter:
    """The module emitter after emitting ``func`` (its IR, notes, error record, checks);
    ``on_placed``: see ``ModuleEmitter.on_placed``."""
    allocs, nests = top_nests(func)
    return emit_nests(func, allocs, nests, outlines_nests(func.body), options, host,
                      on_placed)


def emit_nests(func: LoweredFunc, allocs: Sequence[Allocate], nests: Iterable[Stmt],
               outline: bool, options: CodegenOptions | None = None,
               host: HostTarget | None = None,
               on_placed: Callable[[ir.Function], None] | None = None) -> ModuleEmitter:
    """The module emitter after emitting the function named and parametrized as ``func``
    (its body is not read) whose body is ``nests`` in sequence inside ``allocs``
    (``top_nests``); ``nests`` may be a generator, lowering each nest when it is due, while
    the nests before it are compiled already (``on_placed``). ``outline``: each loop nest
    is a function of its own (``ParallelEmitter.outline_nests``)."""
    options = options or CodegenOptions()
    host = host or host_target()
    symbol = symbol_name(func.name)
    module = ir.Module(name=symbol)
    module.triple = host.triple
    module.data_layout = host.data_layout
    m = ModuleEmitter(func, options, module, max(4, 2 * host.vector_bits // 32))
    m.on_placed = on_placed
    arg_types = [(PTR if isinstance(p, BufferParam) else abi_type(p.var.dtype))
                 for p in func.params]
    fn = ir.Function(m.ir, ir.FunctionType(VOID, [*arg_types, PTR]), symbol)
    fn.attributes.add("nounwind")
    f = ParallelEmitter(m, fn, in_parallel=False)
    f.bind_params(func.params)
    record = fn.args[-1]
    record.name = ERRORS.name
    record.add_attribute("noalias")
    record.add_attribute("captures(none)")
    f.bufs[ERRORS] = record
    f.outline_nests = outline
    with contextlib.ExitStack() as scopes:
        for a in allocs:
            scopes.enter_context(f.allocation(a))
        for nest in nests:
            m.begin_nest(nest)
            f.stmt(Seq((nest,)))  # (a loop of a sequence: outlined with ``outline``)
    f.finish()
    return m


class _Streamer:
    """Sends the functions emitted whole (``ModuleEmitter.on_placed``: outlined nests and
    parallel bodies) to a ``jobs.Stream`` part by part while the rest of the module is
    emitted, and assembles the module text from the texts printed on the way.

    A part holds the finished functions not sent yet, in emission order, up to
    ``STREAM_MAX_CHARS``; it is sent when a worker is free and it has at least
    ``STREAM_MIN_CHARS`` (``split.part_text``: the declarations so far, one for each
    function an earlier part placed, the helpers it calls). Callees finish before their
    callers, so a part never calls a function a later part places."""

    def __init__(self, entry: str, stream: jobs.Stream) -> None:
        self.entry = entry  # the module's entry function (never finished before the end)
        self.stream = stream
        self.module: ir.Module | None = None  # the module being emitted
        self.texts: dict[str, str] = {}  # every function printed so far, by name
        self.finished: set[str] = set()  # the placed functions emitted so far
        self.unsent: list[str] = []  # those in no part yet, in emission order
        self.unsent_chars = 0
        self.sent: set[str] = set()
        self.failed = False  # a part could not be made: the rest goes to the final split

    def placed(self, fn: ir.Function) -> None:
        """``fn`` is emitted whole: print it, send a part when one is due."""
        self.module = fn.module
        with debug.timed("llvm.print"):
            text = self.texts[fn.name] = str(fn)
        self.finished.add(fn.name)
        self.unsent.append(fn.name)
        self.unsent_chars += len(text)
        if not self.failed and self.unsent_chars >= STREAM_MIN_CHARS and self.stream.ready():
            self.send()

    def text_of(self, fn: ir.Function) -> str:
        """``fn``'s text, printed once."""
        text = self.texts.get(fn.name)
        if text is None:
            text = self.texts[fn.name] = str(fn)
        return text

    def send(self) -> None:
        """Send the oldest unsent functions (``STREAM_MAX_CHARS`` of them, at least one)."""
        n, size = 0, 0
        while n < len(self.unsent) and (n == 0 or size + len(self.texts[self.unsent[n]])
                                        <= STREAM_MAX_CHARS):
            size += len(self.texts[self.unsent[n]])
            n += 1
        place = frozenset(self.unsent[:n])
        with debug.timed("llvm.stream"):
            mod = self.module
            assert mod is not None
            lines = self.header(mod)
            for v in mod.globals.values():
                if not isinstance(v, ir.Function):
                    self.failed = True  # a global variable: split_text keeps it whole
                    return
                if v.is_declaration:
                    lines.append(str(v))
                elif v.name in self.sent:
                    lines.append(declaration(self.texts[v.name]))
                elif v.name in place or (v.name != self.entry and v.name not in self.finished
                                         and "noinline" not in v.attributes):
                    lines.append(self.text_of(v))  # a helper: emitted whole at first use
            lines += self.metadata(mod)
            part = part_text("\n".join(lines), place)
        if part is None:
            self.failed = True
            return
        self.stream.submit(part)
        self.sent |= place
        self.unsent = self.unsent[n:]
        self.unsent_chars -= size

    @staticmethod
    def header(mod: ir.Module) -> list[str]:
        """The module's first lines, as llvmlite prints them."""
        return [f'; ModuleID = "{mod.name}"', f'target triple = "{mod.triple}"',
                f'target datalayout = "{mod.data_layout}"', ""]

    @staticmethod
    def metadata(mod: ir.Module) -> list[str]:
        """The module's metadata lines so far (llvmlite numbers them as they are made)."""
        return [str(md) for md in mod.metadata]

    def module_text(self, mod: ir.Module) -> str:
        """The whole text of ``mod`` (what ``str(mod)`` prints), from the functions' texts
        printed on the way."""
        if mod.get_identified_types() or mod.namedmetadata:
            return str(mod)
        lines = self.header(mod)
        lines += [self.text_of(v) if isinstance(v, ir.Function) else str(v)
                  for v in mod.globals.values()]
        lines += self.metadata(mod)
        return "\n".join(lines)


def _split(text: str, n_jobs: int, placed: frozenset[str]) -> Split | None:
    """``text`` in ``n_jobs`` parts when it is large enough and workers may compile
    them, or when parts of it were streamed already (``placed``: their functions); None
    otherwise."""
    if not placed and (n_jobs < 2 or len(text) < SPLIT_MIN_CHARS or not jobs.can_fork()):
        return None
    with debug.timed("llvm.split"):
        return split_text(text, n_jobs * PARTS_PER_JOB, placed)


def _from_parts(symbol: str, text: str, m: ModuleEmitter, results: Sequence[PartResult],
                defined: frozenset[str]) -> CompiledModule:
    """The compiled module of a split module's parts (``defined``: the functions they
    place, never external symbols)."""
    externals = tuple(dict.fromkeys(e for r in results for e in r.externals
                                    if e not in defined))
    texts = tuple(r.text for r in results)
    return CompiledModule(symbol, text, "\n".join(texts), m.errors, tuple(m.notes),
                          tuple(m.checks), objects=tuple(r.object for r in results),
                          parts_opt=texts, externals=externals)


def compile_llvm(func: LoweredFunc, options: CodegenOptions | None = None,
                 n_jobs: int | None = None) -> CompiledModule:
    """Emit, verify and optimize ``func`` (already legalized) for the host CPU.

    Parameters
    ----------
    func : LoweredFunc
        The loop nest; run ``tex.lower.legalize.legalize`` on it first.
    options : CodegenOptions
        fastmath, the OpenMP thread count and whether OpenMP may be used.
    n_jobs : int, optional
        Processes compiling the parts of a large module (default ``TEX_COMPILE_JOBS``);
        1 compiles it whole.

    Returns
    -------
    CompiledModule

    Raises
    ------
    ValueError
        For loops bound to GPU threads.
    """
    allocs, nests = top_nests(func)
    compiled = compile_nests(func, allocs, nests, outlines_nests(func.body), options, n_jobs)
    assert compiled is not None
    return compiled


def compile_nests(func: LoweredFunc, allocs: Sequence[Allocate], nests: Iterable[Stmt],
                  outline: bool, options: CodegenOptions | None = None,
                  n_jobs: int | None = None,
                  proceed: Callable[[], bool] | None = None) -> CompiledModule | None:
    """``compile_llvm`` of the function ``emit_nests`` emits: compiling starts on the
    functions of the first nests while ``nests`` (a generator) still lowers the next.
    After the last, ``proceed()`` (default: yes) says whether to finish: when it says no,
    what was started is dropped and None returned (a build that found the function's
    kernel in a cache once it knew the whole function)."""
    options = options or CodegenOptions()
    n_jobs = jobs.COMPILE_JOBS if n_jobs is None else n_jobs
    symbol = symbol_name(func.name)
    stream = jobs.Stream(n_jobs)
    streamer = _Streamer(symbol, stream) if stream.enabled else None
    try:
        with debug.timed("llvm.emit"):
            m = emit_nests(func, allocs, nests, outline, options,
                           on_placed=streamer.placed if streamer else None)
        if proceed is not None and not proceed():
            stream.abandon()
            return None
    except BaseException:
        stream.abandon()  # no worker goes on with a failed emission's parts
        raise
    m.on_placed = None
    with debug.timed("llvm.print"):
        text = streamer.module_text(m.ir) if streamer is not None else str(m.ir)
        if streamer is not None:
            streamer.module = None
        m.release()
    debug.dump("llvm", text)
    placed = frozenset(streamer.sent) if streamer is not None else frozenset()
    split = _split(text, n_jobs, placed)
    if split is not None:
        compiled = _from_parts(symbol, text, m, stream.finish(split.texts),
                               split.all_defined | placed)
    else:
        stream.abandon()  # (a module that cannot be split: what was streamed is dropped)
        whole = jobs.compile_guarded(text)
        compiled = CompiledModule(symbol, text, whole.text, m.errors, tuple(m.notes),
                                  tuple(m.checks), objects=(whole.object,),
                                  externals=whole.externals)
    debug.dump("llvm.opt", compiled.llvm_ir_opt)
    if debug.should_dump("asm"):
        debug.dump("asm", compiled.asm)
    return compiled
