"""Loop IR -> LLVM IR for the host CPU: the driver (emit, verify, optimize).

``compile_llvm(func)`` turns a legalized ``LoweredFunc`` into a ``CompiledModule``: the
unoptimized IR text, the optimized IR (O3, new pass manager, a target machine for the
host CPU name and features: ``tex.codegen.host``), the assembly on request, and the
optimized module to JIT. ``emit_llvm`` gives the unoptimized IR text alone.

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
into object code by parallel processes (``jobs.py``); the ``CompiledModule`` then holds
the parts' object files, which the JIT loads into one engine, and its optimized IR and
assembly are the parts' texts one after the other (each part a module of its own:
``; ModuleID`` starts the next). The unoptimized text (``get_source("ll.raw")``) is
always the whole module as emitted. (Compiling finished functions in a background thread
while Python emits the rest was tried and removed: each part's fixed cost made the six
largest model gradients' builds take 30% more CPU time and no less wall time on 2 cores.)

``TEX_DUMP=llvm,llvm.opt,asm`` prints the three texts.
"""
from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import llvmlite.binding as llvm
import llvmlite.ir as ir

from .. import debug
from ..lower.bounds_check import BoundsReportOp
from ..lower.stmt import BufferParam, LoweredFunc, symbol_name
from . import jobs
from .host import LLVM_LOCK, HostTarget, host_target, optimize
from .irtypes import PTR, VOID, abi_type
from .jobs import PartResult
from .module import ERRORS, CodegenOptions, ModuleEmitter
from .parallel import OUTLINE_MIN_NESTS, ParallelEmitter, loop_nests
from .split import Split, split_text

__all__ = ["CompiledModule", "emit_llvm", "emit_module", "compile_llvm", "SPLIT_MIN_CHARS"]

# a module with less IR text than this compiles whole, in this process: forking and loading
# several objects would cost more than the parallel work saves. Measured on 2 cores (cold
# builds, medians of 3, whole -> split): 17 KB of IR 0.104 -> 0.093 s, 35 KB 0.298 ->
# 0.230 s, 52 KB 0.276 -> 0.220 s, 174 KB 0.907 -> 0.683 s (at the old 200 KB threshold
# that one compiled whole); the CPU time grows by 20-30% on small modules
SPLIT_MIN_CHARS = 16_000
# parts per compiling process: enough for the shared queue to even out parts of unequal
# cost, few enough that each part's fixed cost (its declarations, copied helpers, a pass
# pipeline) stays small
PARTS_PER_JOB = 3


@dataclass
class CompiledModule:
    """One compiled function: texts for ``get_source`` and the optimized module to JIT (or,
    for a split module, the parts' object code)."""

    name: str
    llvm_ir: str
    llvm_ir_opt: str
    module: llvm.ModuleRef | None  # the optimized module; the JIT takes ownership
    # whether the code writes its error record (a failed malloc, a failed bounds check)
    errors: bool = False
    notes: tuple[str, ...] = ()  # vectorization decisions, for tests and TEX_DUMP
    # the run-time bounds checks (check number k + 1 in the error record is the k-th)
    bounds_checks: tuple[BoundsReportOp, ...] = ()
    _asm: str | None = field(default=None, repr=False)
    # the module's own LLVM context (LLVM uniques constants and metadata per context and
    # frees them only with it); the JIT disposes module and context once the code is emitted
    context: llvm.ContextRef | None = field(default=None, repr=False)
    # a split module: each part's object code (until the JIT loads them), optimized IR text,
    # and the external functions the parts call (the parts' own functions aside)
    objects: tuple[bytes, ...] = field(default=(), repr=False)
    parts_opt: tuple[str, ...] = field(default=(), repr=False)
    externals: tuple[str, ...] = ()

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
    return str(m.ir), m.notes, m.errors


def emit_module(func: LoweredFunc, options: CodegenOptions | None = None,
                host: HostTarget | None = None) -> ModuleEmitter:
    """The module emitter after emitting ``func`` (its IR, notes, error record, checks)."""
    options = options or CodegenOptions()
    host = host or host_target()
    symbol = symbol_name(func.name)
    module = ir.Module(name=symbol)
    module.triple = host.triple
    module.data_layout = host.data_layout
    m = ModuleEmitter(func, options, module, max(4, 2 * host.vector_bits // 32))
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
    f.outline_nests = loop_nests(func.body) > OUTLINE_MIN_NESTS
    f.stmt(func.body)
    f.finish()
    return m


def _split(text: str, n_jobs: int) -> Split | None:
    """``text`` in ``n_jobs`` parts when it is large enough and children may compile
    them; None otherwise."""
    if n_jobs < 2 or len(text) < SPLIT_MIN_CHARS or not jobs.can_fork():
        return None
    with debug.timed("llvm.split"):
        return split_text(text, n_jobs * PARTS_PER_JOB)


def _from_parts(symbol: str, text: str, m: ModuleEmitter, results: Sequence[PartResult],
                defined: frozenset[str]) -> CompiledModule:
    """The compiled module of a split module's parts (``defined``: the functions they
    place, never external symbols)."""
    externals = tuple(dict.fromkeys(e for r in results for e in r.externals
                                    if e not in defined))
    texts = tuple(r.text for r in results)
    return CompiledModule(symbol, text, "\n".join(texts), None, m.errors, tuple(m.notes),
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
    options = options or CodegenOptions()
    n_jobs = jobs.COMPILE_JOBS if n_jobs is None else n_jobs
    with debug.timed("llvm.emit"):
        m = emit_module(func, options)
    with debug.timed("llvm.print"):
        text = str(m.ir)
    debug.dump("llvm", text)
    symbol = symbol_name(func.name)
    split = _split(text, n_jobs)
    if split is not None:
        compiled = _from_parts(symbol, text, m, jobs.compile_parts(split.texts, n_jobs),
                               split.all_defined)
    else:
        # a context per module: the global one would keep every module's uniqued constants
        # and metadata for good (10 to 15 KB per kernel)
        context = llvm.create_context()
        mod = optimize(text, context=context)
        with debug.timed("llvm.print"):
            opt_text = str(mod)
        compiled = CompiledModule(symbol, text, opt_text, mod, m.errors, tuple(m.notes),
                                  tuple(m.checks), context=context)
    debug.dump("llvm.opt", compiled.llvm_ir_opt)
    if debug.should_dump("asm"):
        debug.dump("asm", compiled.asm)
    return compiled
