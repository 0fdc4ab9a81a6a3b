"""``build``: schedule (or tensors) -> lower -> legalize -> LLVM -> JIT -> callable.

    f = tex.build(s, [X, W, Y], target="llvm", name="dense")
    f(x, w, y)                  # NumPy arrays; outputs written in place
    f.get_source("ll"), f.get_source("asm")

    g = tex.build(s, [X, W, Y], target="cuda -arch=sm_80")   # kernels -> PTX
    g.get_source("ptx"); g(x, w, y)   # NumPy arrays copied in and out, or CUDA arrays

For ``target="cuda"`` the lowered function is split into kernels (``tex.lower.gpu``),
compiled to PTX through LLVM's NVPTX backend (``tex.codegen.ptx``) and run by the CUDA
driver (``tex.runtime.cuda``, loaded on the first call).

Building is cached in-process (``tex.runtime.jit``): the same lowered function with the
same options returns at once, sharing machine code with the first build. Below that, the
disk cache (``tex.runtime.diskcache``) holds the object code other processes compiled:
a hit skips legalization and all LLVM work. A CPU build first looks the schedule itself up
(``tex.schedule.key``, ``jit.FRONT``): a hit skips lowering as well, which is most of what
a second process's build costs.

A CPU build that misses lowers, legalizes and emits one root stage's nest after another
(``_build_streamed``): with several compile jobs, a child compiles the first nests'
functions while Python lowers the next, and the lowered function's key is checked at the
end (a kernel cached under it then, built from another schedule, replaces what was being
compiled). With ``TEX_DUMP`` set, the function is lowered whole first (each pass's dump
shows all of it).
"""
from __future__ import annotations

import contextlib
import gc
import sys
import types
from collections.abc import Iterator, Sequence
from dataclasses import replace
from typing import Any

import numpy as np

from . import debug
from .codegen import CodegenOptions, compile_llvm, compile_nests
from .debug import InternalError
from .ir.expr import Var
from .ir.tensor import Tensor
from .ir.visit import placeholders_of
from .lower.bounds_check import check_program, strip_checks
from .lower.legalize import legalize
from .lower.stmt import Allocate, ExternCall, LoweredFunc, Seq, Stmt, walk_stmts
from .runtime.externs import extern_specs
from .runtime.jit import (
    CACHE,
    FRONT,
    FrontEntry,
    Kernel,
    cache_key,
    front_key,
    jit_compile,
    load_cached,
)
from .runtime.module import BuiltFunction, param_signature
from .runtime.openmp import load_openmp, parallel_allowed
from .target import parse_cuda_target, resolve_target, target_kind

__all__ = ["build", "build_lowered", "build_cuda"]

def _target(target: Any) -> str:
    return target_kind(target, "build")


def _check_flag(value: Any, what: str) -> bool:
    """``value`` when it is a bool (Python or NumPy), else a TypeError naming ``what``:
    ``bool("no")`` is True, so a string must never be read as a switch."""
    if not isinstance(value, (bool, np.bool_)):
        raise TypeError(f"{what} must be a bool (True or False), got "
                        f"{type(value).__name__} {value!r}")
    return bool(value)


def build_cuda(func: LoweredFunc, target: str = "cuda", fastmath: bool = False) -> Any:
    """Compile a lowered function for an NVIDIA GPU: kernels, PTX, a ``CudaFunction``.

    Raises
    ------
    ValueError
        A stage not bound to GPU threads, a thread block or shared memory over the limits,
        a math function that needs libdevice when none was found.
    """
    from .codegen.ptx import compile_ptx
    from .lower.gpu import GPULimits, split_kernels
    from .runtime.cuda import CudaFunction

    cuda = parse_cuda_target(target)
    for st in walk_stmts(func.body):
        if isinstance(st, ExternCall):
            raise ValueError(f"build: '{st.op.name}' is an extern call (te.extern), which runs "
                             "on the host CPU; build functions with extern calls for 'llvm'")
    legal = legalize(func, "cuda")
    debug.dump("legalize", legal)
    limits = GPULimits(max_threads_per_block=cuda.max_threads_per_block,
                       max_shared_bytes=cuda.max_shared_bytes)
    program = split_kernels(legal, limits)
    debug.dump("kernels", program)
    options = CodegenOptions(fastmath=_check_flag(fastmath, "build: fastmath"))
    mod = compile_ptx(program, cuda, options)
    sources = {"ptx": mod.ptx, "ll": mod.llvm_ir_opt, "ll.raw": mod.llvm_ir,
               "kernels": str(program)}
    return CudaFunction(program, sources, str(cuda))


def build_lowered(func: LoweredFunc, target: str = "llvm",
                  fastmath: bool = False, bounds_check: bool = True) -> Any:
    """Compile a lowered function: legalize, generate LLVM, optimize, JIT (cached).

    Parameters
    ----------
    func : LoweredFunc
        The loop nest (from ``tex.lower``).
    target : str
        ``"llvm"`` (alias ``"cpu"``): the host CPU.
    fastmath : bool
        Allow LLVM's fast-math rewrites on float operations.
    bounds_check : bool
        Keep the run-time bounds checks ``lower`` put on reads it could not prove in
        bounds (see ``build``); False removes them.

    Returns
    -------
    BuiltFunction

    Raises
    ------
    ValueError
        For an unknown target, or a loop the target cannot run (GPU thread loops).
    """
    bounds_check = _check_flag(bounds_check, "build: bounds_check")
    if _target(target) == "cuda":
        return build_cuda(strip_checks(func) if not bounds_check else func, target, fastmath)
    target = _target(target)
    options = _cpu_options(_check_flag(fastmath, "build: fastmath"), bounds_check)
    return _build_cpu(func, target, options, None)


def _cpu_options(fastmath: bool, bounds_check: bool) -> CodegenOptions:
    """The code generator's options for a CPU build now."""
    # in a child forked after a parallel loop ran, libgomp's pool is gone: build serially
    openmp = load_openmp() is not None and parallel_allowed()
    return CodegenOptions(fastmath=fastmath, num_threads=debug.current().num_threads,
                          openmp=openmp, bounds_check=bounds_check)


def _kernel(func: LoweredFunc, target: str, options: CodegenOptions) -> tuple[Kernel, str]:
    """The kernel of ``func`` (checks already stripped where asked) and its cache key: from
    the in-process cache, the disk cache, or compiled now (and stored in both)."""
    with debug.timed("build.cache_key"):
        key = cache_key(func, target, options)
    kernel = _cached_kernel(key)
    if kernel is None:
        with debug.timed("legalize"):
            legal = legalize(func, target)
        debug.dump("legalize", legal)
        kernel = CACHE.put(key, jit_compile(compile_llvm(legal, options), key))
    return kernel, key


def _cached_kernel(key: str) -> Kernel | None:
    """The kernel of ``key`` from the in-process cache, else from the disk cache (another
    process compiled it: no LLVM work; then kept in the in-process cache); None."""
    kernel = CACHE.get(key)
    if kernel is None:
        with debug.timed("build.disk_load"):
            kernel = load_cached(key)
        if kernel is not None:
            kernel = CACHE.put(key, kernel)
    return kernel


def _build_cpu(func: LoweredFunc, target: str, options: CodegenOptions, front: str | None
               ) -> BuiltFunction:
    """``func`` built for the host; with ``front`` (the schedule's key), what a later build
    of the same schedule needs is stored under it (``FRONT``)."""
    if not options.bounds_check:
        func = strip_checks(func)
    kernel, key = _kernel(func, target, options)
    return _built(func, kernel, key, target, options, front)


def _build_streamed(sch: Any, args: Sequence[Tensor | Var], name: str, target: str,
                    options: CodegenOptions, front: str | None) -> BuiltFunction:
    """``_build_cpu(lower(sch, args, name=name), ...)``, the passes, legalization and code
    of one root stage's nest after another, so that LLVM compiles the first nests' functions
    (``compile_nests``) while Python lowers the next: the second CPU otherwise idled
    through lowering. The function's key is known only at the end: a kernel cached under
    it then (the same function from another schedule) drops what was compiled."""
    from .codegen.parallel import outlines_nests
    from .lower import stage

    with debug.timed("lower"):
        staged = stage(sch, args, name)
    passed: list[Stmt] = []

    def nests() -> Iterator[Stmt]:
        for raw in staged.nests:
            one = LoweredFunc(name, staged.params, staged.passed(raw))
            if not options.bounds_check:
                one = strip_checks(one)
            passed.append(one.body)
            with debug.timed("legalize"):
                legal = legalize(one, target).body
            yield legal

    found: dict[str, Any] = {}

    def proceed() -> bool:
        func = staged.function(passed)  # (checks stripped already where asked)
        with debug.timed("build.cache_key"):
            key = cache_key(func, target, options)
        found.update(func=func, key=key, kernel=_cached_kernel(key))
        return found["kernel"] is None

    header = LoweredFunc(name, staged.params, Seq(()))
    allocs = tuple(Allocate(buf, "global", Seq(())) for buf in staged.temps)
    # (counted before the passes, which may add loops: ``compile_llvm`` counts the lowered
    # function's; the two agree on the goldens, the model layers and the tutorials)
    outline = outlines_nests(Seq(staged.nests))
    compiled = compile_nests(header, allocs, nests(), outline, options, proceed=proceed)
    func, key, kernel = found["func"], found["key"], found["kernel"]
    if compiled is not None:
        kernel = CACHE.put(key, jit_compile(compiled, key))
    return _built(func, kernel, key, target, options, front)


def _built(func: LoweredFunc, kernel: Kernel, key: str, target: str, options: CodegenOptions,
           front: str | None) -> BuiltFunction:
    """The callable of ``func`` (checks already stripped where asked), compiled to
    ``kernel`` under ``key``; with ``front`` (the schedule's key), what a later build of
    the same schedule needs is stored under it (``FRONT``)."""
    lowered = str(func)
    signature = param_signature(func.params)
    if front is not None:
        FRONT.put(front, FrontEntry(key, lowered, tuple(out for _, out in signature)))
    # the serial variant, for a call in a forked child (compiled there, on first need)
    serial = (lambda: _kernel(func, target, replace(options, openmp=False))[0]) \
        if options.openmp else None
    return BuiltFunction(func.name, signature, lowered, kernel, target, serial,
                         extern_specs(func))


def _front_key(sch: Any, args: Any, name: str, target: str, options: CodegenOptions
               ) -> str | None:
    """The key of building ``sch`` with ``args`` before lowering (``FRONT``); None where
    the front cache does not apply: dumps asked for (they show every pass), arguments that
    are not a list of tensors and variables (``lower`` says what is wrong), something in
    the schedule the key has no place for."""
    from .schedule.key import front_text

    if debug.current().dump or not isinstance(args, (list, tuple)) or \
            not all(isinstance(a, (Tensor, Var)) for a in args) or not isinstance(name, str):
        return None
    with debug.timed("build.front_key"):
        text = front_text(sch, args)
        return None if text is None else front_key(text, name, target, options)


def _build_front(front: str, sch: Any, args: Sequence[Tensor | Var], name: str, target: str,
                 options: CodegenOptions) -> BuiltFunction | None:
    """The function a build of the same schedule made before (in this process or, through
    the disk cache, another), without lowering it again; None when there is none.

    The schedule is lowered only to check the key (``TEX_CACHE_VERIFY=1``), or for the
    serial variant a forked child compiles (``_build_cpu``); it must then still be the
    schedule built (a changed one raises ``RuntimeError``)."""
    from .lower import lower

    entry = FRONT.get(front)
    if entry is None or len(entry.outputs) != len(args):
        return None
    kernel = _cached_kernel(entry.key)
    if kernel is None:
        return None

    def lowered_again() -> LoweredFunc:
        func = lower(sch, args, name=name)
        if not options.bounds_check:
            func = strip_checks(func)
        if cache_key(func, target, options) == entry.key:
            return func
        if _front_key(sch, args, name, target, options) != front:
            raise RuntimeError(f"{name}: its schedule was changed after it was built; build "
                               "it again to run it here (a child process compiles the "
                               "serial variant of a parallel function from its schedule)")
        raise InternalError(f"build '{name}': the schedule lowers to another function than "
                            "the one cached under its key")

    if (debug.env("TEX_CACHE_VERIFY") or "").strip() not in ("", "0"):
        lowered_again()
    serial = (lambda: _kernel(lowered_again(), target, replace(options, openmp=False))[0]) \
        if options.openmp else None
    return BuiltFunction(name, tuple(zip(args, entry.outputs)), entry.lowered, kernel,
                         target, serial)


def _default_args(outputs: Sequence[Tensor]) -> list[Tensor]:
    """The placeholders the outputs depend on, in creation order, then the outputs."""
    outs = list(outputs)
    return [t for t in placeholders_of(outs) if t not in outs] + outs


def build(sch: Any, args: Sequence[Tensor | Var] | None = None, target: Any = None,
          name: str = "main", fastmath: bool = False, bounds_check: bool = True,
          target_host: Any = None) -> BuiltFunction:
    """Compile a schedule (or output tensors) into a callable.

    Parameters
    ----------
    sch : Schedule, Tensor or list of Tensor
        A schedule with ``args``; or the outputs to compute, scheduled by default.
    args : list of Tensor or Var, optional
        The function's arguments in call order. Default for tensors: the placeholders
        they depend on in creation order, then the outputs.
    target : str or tex.target.Target, optional
        ``"llvm"`` (alias ``"cpu"``), ``"cuda"`` (``"cuda -arch=sm_90"``), or a
        ``Target``; default: the enclosing ``with Target(...)`` block's, else ``"llvm"``.
    name : str
        The function name (in the generated code and error messages).
    fastmath : bool
        Allow fast-math float rewrites.
    target_host : str or Target, optional
        TVM's host target of a CUDA build: only the CPU (``"llvm"``) is accepted.
    bounds_check : bool
        Check at run time the reads ``lower`` cannot prove in bounds (indices read from
        data or computed from scalar arguments; reads whose bounds are decided out of
        range are refused at build time). Default True. A checked function that reads
        out of bounds raises ``tex.testing.OutOfBoundsError`` (an ``IndexError`` and a
        ``ValueError``) after the kernel has run to the end, naming the tensor, the
        dimension, the index and the valid range of the first violation; the kernel
        never touches memory outside its buffers: every out-of-bounds read gives 0, and
        the outputs hold exactly what the program computes with those zeros (on CUDA
        too). False removes the checks, for data already
        validated: an out-of-range index then reads whatever memory it reaches.

    Returns
    -------
    BuiltFunction
        ``f(*arrays)`` runs it; ``f.args``, ``f.get_source("ll" | "asm")``.

    Raises
    ------
    TypeError, ValueError
        For bad arguments, an unknown target or a loop the target cannot run; a read
        out of bounds at some point of its stage, unguarded (``ValueError`` naming the
        stage, the tensor, the dimension and the index range against the valid one).

    Example
    -------
    >>> f = tex.build(s, [A, B], name="double")
    >>> f(a, b)
    """
    target = resolve_target(target, "build")
    kind = _target(target)
    if target_host is not None and target_kind(target_host, "build: target_host") != "llvm":
        raise ValueError(f"build: target_host must be a CPU target ('llvm'), got "
                         f"{target_host!r}")
    _check_flag(fastmath, "build: fastmath")
    _check_flag(bounds_check, "build: bounds_check")
    from .lower import lower  # lazily: lower imports the schedule machinery
    from .schedule import Schedule, auto_schedule

    if not isinstance(sch, Schedule):
        tensors = [sch] if isinstance(sch, Tensor) else list(sch) \
            if isinstance(sch, (list, tuple)) else None
        if not tensors or not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError("build: expected a Schedule (with args) or a Tensor / list of "
                            f"Tensors, got {type(sch).__name__} {sch!r}")
        if args is None:
            args = _default_args(tensors)
        check_program(tensors)  # before auto_schedule renames stages (R.rf)
        sch = auto_schedule(tensors, target=target)
    elif args is None:
        raise TypeError("build: a Schedule needs args (the tensors and vars in call order), "
                        "e.g. tex.build(s, [A, B, C])")
    if kind == "cuda":  # lower checks args (a list of tensors and vars, or one of them)
        return build_lowered(lower(sch, args, name=name), target, fastmath, bounds_check)
    options = _cpu_options(bool(fastmath), bool(bounds_check))
    with debug.timed("build"), _collector_paused():
        front = _front_key(sch, args, name, kind, options)
        if front is not None:
            built = _build_front(front, sch, args, name, kind, options)
            if built is not None:
                return built
        if debug.current().dump:  # (every pass's dump shows the whole function)
            return _build_cpu(lower(sch, args, name=name), kind, options, front)
        return _build_streamed(sch, args, name, kind, options, front)


@contextlib.contextmanager
def _collector_paused() -> Iterator[None]:
    """Python's cyclic garbage collector off for the duration (back on after, if it was on).

    Emission builds llvmlite's IR, a graph of cycles (instructions, blocks, functions and
    the module point at each other) that grows through the build, and each of the
    collector's full passes walks all of it again: 0.14-0.31 s of a model gradient's cold
    build went to generation-2 passes. Paused, the garbage is collected once, later. Only
    the thread that turned it off turns it on again; a collector the user turned off stays
    off."""
    paused = gc.isenabled()
    if paused:
        gc.disable()
    try:
        yield
    finally:
        if paused:
            gc.enable()


class _CallableModule(types.ModuleType):
    """``tex.build(...)`` calls ``build``: the module is callable, so the TVM spelling works
    and ``tex.build.build_lowered`` stays reachable."""

    def __call__(self, *args: Any, **kwargs: Any) -> BuiltFunction:
        return build(*args, **kwargs)


sys.modules[__name__].__class__ = _CallableModule
