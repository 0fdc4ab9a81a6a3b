"""Outlined functions: parallel loops run by OpenMP (``GOMP_parallel``), and loop nests.

A ``For`` PARALLEL is outlined into ``@<name>.parN.body(noalias ptrs..., scalars..., lo,
hi)`` (captured buffers and variables become parameters, so ``noalias`` survives; never
inlined, so LLVM optimizes it once: a third less optimization time on a CNN gradient, for
one call per thread) and run by a wrapper ``@<name>.wrapperK(ptr %closure)`` that unpacks
a struct (the body's address first: loops with closures of one type share the wrapper) and
calls the body on chunks of ``[0, extent)`` claimed from a counter in the closure (an
atomic add; about ``CHUNKS_PER_THREAD`` chunks per thread, single iterations where there
are at most ``UNIT_CHUNKS_PER_THREAD`` per thread), so that a thread sharing its
core with another process takes fewer chunks instead of holding up the region; which
thread runs an iteration never changes what the iteration computes. The parent calls
``GOMP_parallel(wrapper, closure, threads, 0)`` with ``threads`` the smaller of the thread
count (``CodegenOptions.num_threads``, else ``omp_get_max_threads()``) and the loop's
extent, or calls the wrapper itself when that is below 2 (outside a region it is the only
thread and claims every chunk): a thread with no iteration would still cost a wake-up and a
barrier. Nested parallel loops, parallel loops in vector code, and every parallel loop when
OpenMP is unavailable (``CodegenOptions.openmp``) run serially.

A function with more than ``OUTLINE_MIN_NESTS`` loop nests in sequence emits each nest as
an internal ``noinline`` function ``@<name>.nestN``: LLVM's loop passes grow
quadratically with the loops of one function, linearly over many small ones.

Parallel loops and nests that compile alike (the same structure on buffers of the same
dtypes and shapes, variables of the same ranges: ``ModuleEmitter.outline_key``), such as
a layer's three identical projections, share one outlined function, called with their own
buffers: LLVM optimizes and compiles it once.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence

import llvmlite.ir as ir

from ..ir.expr import TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order
from ..lower.stmt import (
    Allocate,
    For,
    ForKind,
    Nested,
    Seq,
    Stmt,
    Store,
    stmt_exprs,
    symbol_name,
    walk_stmts,
)
from .emit import Callee, FunctionEmitter, llvm_unrolls
from .irtypes import I32, I64, PTR, VOID, local_name, scalar_type
from .module import ERRORS, ModuleEmitter
from .vector import VectorEmitter

__all__ = ["ParallelEmitter", "OUTLINE_MIN_NESTS", "CHUNKS_PER_THREAD",
           "UNIT_CHUNKS_PER_THREAD", "chunk_size", "loop_nests", "outlines_nests"]

# chunks of a parallel loop per thread: enough that the threads of an unevenly loaded
# machine even out, few enough that claiming one (an atomic add) costs nothing
CHUNKS_PER_THREAD = 4
# up to this many iterations per thread, each is a chunk: few iterations are long ones,
# and chunks of several leave threads unequal shares (14 tiles of a 100 x 100 matmul on 2
# threads: 7 chunks of 2, 8 tiles for one thread and 6 for the other)
UNIT_CHUNKS_PER_THREAD = 16

# a function with more loop nests than this emits each as a function of its own
OUTLINE_MIN_NESTS = 64


def chunk_size(extent: int, threads: int) -> int:
    """The iterations a thread claims at a time from a parallel loop of ``extent`` on
    ``threads`` threads (what ``ParallelEmitter.parallel_wrapper`` computes at run time)."""
    if extent <= threads * UNIT_CHUNKS_PER_THREAD:
        return 1
    parts = threads * CHUNKS_PER_THREAD
    return max(1, -(-extent // parts))


def loop_nests(body: Stmt) -> int:
    """How many loop nests ``body`` runs in sequence (loops in a ``Seq``, plus one for a
    body that is a loop)."""
    n = 1 if isinstance(body, For) else 0
    for st in walk_stmts(body):
        if isinstance(st, Seq):
            n += sum(1 for c in st.body if isinstance(c, For))
    return n


def outlines_nests(body: Stmt) -> bool:
    """Whether a function running ``body`` emits each loop nest as a function of its own:
    more than ``OUTLINE_MIN_NESTS`` of them (``loop_nests``)."""
    return loop_nests(body) > OUTLINE_MIN_NESTS


class ParallelEmitter(VectorEmitter):
    """The host CPU's function emitter: vector code (``VectorEmitter``) and loops outlined
    into functions of their own (see the module docstring)."""

    def __init__(self, mod: ModuleEmitter, fn: ir.Function, in_parallel: bool) -> None:
        super().__init__(mod, fn, in_parallel)
        # loop nests of this function become functions of their own (``outlined``)
        self.outline_nests = False

    def visit(self, s: Stmt) -> Nested[None]:
        """``s``; with ``outline_nests``, a sequence's loops as calls of outlined nests."""
        if self.outline_nests and isinstance(s, Seq):
            return self.outlined_seq(s)
        return super().visit(s)

    def outlined_seq(self, s: Seq) -> Nested[None]:
        """The ``Seq`` ``s`` with each loop outlined (``outlined``)."""
        for child in s.body:
            if isinstance(child, For):
                self.outlined(child)
            else:
                yield self.visit(child)

    def loop(self, s: For) -> Nested[None]:
        """A PARALLEL loop outside parallel and vector code, with OpenMP: ``parallel``."""
        if s.kind is ForKind.PARALLEL and self.m.options.openmp and not self.in_parallel \
                and not self.lanes:
            self.parallel(s)  # a function of its own: emitted by a run of its own
            return
        yield super().loop(s)

    def captures(self, s: Stmt) -> tuple[list[Tensor], list[Var]]:
        """The buffers and variables ``s`` uses that are bound out here (what an outlined
        copy of ``s`` takes as arguments)."""
        used_vars: dict[Var, None] = {}
        used_bufs: dict[Tensor, None] = {}
        for st in walk_stmts(s):
            if isinstance(st, Store):
                used_bufs.setdefault(st.buffer, None)
            for e in stmt_exprs(st):
                for node in post_order(e):
                    if isinstance(node, Var):
                        used_vars.setdefault(node, None)
                    elif isinstance(node, TensorRead):
                        used_bufs.setdefault(node.tensor, None)
        used_bufs.setdefault(ERRORS, None)  # the error record goes everywhere
        return [x for x in used_bufs if x in self.bufs], \
            [v for v in used_vars if v in self.vars]

    def outline(self, name: str, bufs: Sequence[Tensor], scalars: Sequence[Var],
                extra: Sequence[ir.Type], in_parallel: bool, noinline: bool = False
                ) -> FunctionEmitter:
        """An emitter for the new internal function ``name`` taking the captured buffers
        (``noalias`` pointers, as the caller's parameters), scalars, then ``extra``."""
        m = self.m
        arg_types = [PTR] * len(bufs) + [self.vars[v].type for v in scalars] + list(extra)
        fn = ir.Function(m.ir, ir.FunctionType(VOID, arg_types), name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        if noinline:  # inlined back, the caller would be one function again
            fn.attributes.add("noinline")
        inner = type(self)(m, fn, in_parallel=in_parallel)
        for arg, x in zip(fn.args, bufs):
            arg.name = local_name(x.name)
            arg.add_attribute("noalias")
            arg.add_attribute("captures(none)")
            inner.bufs[x] = arg
        for arg, v in zip(fn.args[len(bufs):], scalars):
            arg.name = local_name(v.name)
            inner.vars[v] = arg
        return inner

    def outlined(self, s: For) -> None:
        """Emit the loop nest ``s`` as a call to an internal function of its own. LLVM's
        loop passes grow quadratically with the loops of one function; over many small
        functions they stay linear. Used for functions with many top-level nests only."""
        m = self.m
        bufs, scalars = self.captures(s)

        def emit() -> ir.Function:
            inner = self.outline(m.next_nest_name(), bufs, scalars, [], self.in_parallel,
                                 noinline=True)
            inner.stmt(s)
            inner.finish()
            return inner.fn

        fn = self.shared("nest", s, [*bufs, *scalars], emit)
        self.forget()
        self.b.call(fn, [*(self.bufs[x] for x in bufs), *(self.vars[v] for v in scalars)])
        if m.errors and any(isinstance(x, Allocate) for x in walk_stmts(s)):
            # a failed malloc returned from the nest: return from here too
            failed = self.b.load_atomic(self.bufs[ERRORS], "monotonic", 8, typ=I64)
            with self.b.if_then(self.b.icmp_unsigned("!=", failed, ir.Constant(I64, 0)),
                                likely=False):
                self.b.ret_void()

    def shared(self, kind: str, s: Stmt, args: Sequence[Tensor | Var],
               emit: Callable[[], ir.Function]) -> ir.Function:
        """The outlined function running ``s`` on ``args``: ``emit()`` the first time, the
        same function for every later ``s`` that compiles alike (``outline_key``), whose
        vectorization notes are repeated."""
        m = self.m
        key = m.outline_key(kind, s, args)
        if key is not None and key in m.outlined:
            fn, notes = m.outlined[key]
            m.notes.extend(notes)
            return fn
        first = len(m.notes)
        fn = emit()
        if key is not None:
            m.outlined[key] = (fn, tuple(m.notes[first:]))
        if m.on_placed is not None:
            m.on_placed(fn)
        return fn

    def parallel(self, s: For) -> None:
        """Outline ``s`` and run it with GOMP_parallel (see the module docstring)."""
        m = self.m
        lo, hi = self.bounds(s)
        t = scalar_type(s.var.dtype)
        ext = self.b.sub(hi, lo, name=f"{local_name(s.var.name)}.extent")
        # captured values: variables and buffers used inside and bound out here
        bufs, scalars = self.captures(s.body)
        scalars = [v for v in scalars if v is not s.var]
        # the closure: the body, captures, start, extent, next unclaimed iteration
        fields = [PTR] * (1 + len(bufs)) + [self.vars[v].type for v in scalars] + [t, t, I64]
        closure_t = ir.LiteralStructType(fields)

        def emit() -> ir.Function:
            name = m.next_parallel_name()
            # the body: noalias buffer pointers, scalars, [lo, hi)
            # noinline: inlined into the wrapper, the body went through LLVM's function
            # simplification twice (as itself, then as part of the wrapper), its noalias
            # parameters turned into scope metadata on every access
            inner = self.outline(f"{name}.body", bufs, scalars, [t, t], in_parallel=True,
                                 noinline=True)
            a_lo, a_hi = inner.fn.args[-2:]
            a_lo.name = f"{local_name(s.var.name)}.lo"
            a_hi.name = f"{local_name(s.var.name)}.hi"
            lo_i, hi_i = a_lo, a_hi
            if inner.widens(s.var):  # (the chunk bounds arrive in int32; counted in i64)
                lo_i, hi_i = inner.to_i64(a_lo, s.var.dtype), inner.to_i64(a_hi, s.var.dtype)
            with inner.counted(s.var.name, lo_i, hi_i, llvm_unrolls=llvm_unrolls(s)) as i:
                inner.bind_counter(s.var, i)
                inner.stmt(s.body)
            inner.finish()
            return inner.fn

        body = self.shared("parallel", s, [*bufs, *scalars], emit)
        # the wrapper GOMP calls on every thread: one per closure type
        wrapper = m.wrappers.get(str(closure_t))
        if wrapper is None:
            wrapper = m.wrappers[str(closure_t)] = self.parallel_wrapper(
                f"{symbol_name(m.func.name)}.wrapper{len(m.wrappers) + 1}", closure_t, t,
                body.function_type)
            if m.on_placed is not None:
                m.on_placed(wrapper)
        # the parent: fill the closure, fork and join
        name = body.name.removesuffix(".body")
        data = self.alloca(closure_t, f"{name}.closure")
        for k, v in enumerate([body, *(self.bufs[x] for x in bufs),
                               *(self.vars[v] for v in scalars), lo, ext, ir.Constant(I64, 0)]):
            p = self.b.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                           source_etype=closure_t, name=f"{name}.field{k}")
            self.b.store(v, p)
        threads = self.region_threads(ext, t)
        with self.b.if_else(self.b.icmp_signed("<", threads, ir.Constant(I32, 2))) \
                as (alone, shared):
            with alone:  # one thread would run every iteration: no region
                self.b.call(wrapper, [data])
            with shared:
                gomp = m.declare("GOMP_parallel", VOID, [PTR, PTR, I32, I32])
                self.b.call(gomp, [wrapper, data, threads, ir.Constant(I32, 0)])
        # the region stored into buffers through its own function: no store here drops
        # what this function loaded from them before
        self.forget_loads()

    def region_threads(self, extent: ir.Value, t: ir.Type) -> ir.Value:
        """The threads of a parallel region over ``extent`` iterations (of type ``t``), as
        an i32: the thread count, at most one per iteration."""
        n = self.m.options.num_threads
        threads: ir.Value = ir.Constant(I32, n) if n else \
            self.b.call(self.m.declare("omp_get_max_threads", I32, []), [], name="max.threads")
        ext64 = self.b.sext(extent, I64) if t != I64 else extent
        threads64 = self.b.sext(threads, I64)
        least = self.b.select(self.b.icmp_signed("<", ext64, threads64), ext64, threads64)
        return self.b.trunc(least, I32)

    def parallel_wrapper(self, name: str, closure_t: ir.LiteralStructType, t: ir.Type,
                         body_t: ir.FunctionType) -> ir.Function:
        """``@<name>(ptr %closure)``, run by every thread: unpack the closure (body,
        captures, start, extent, counter) and call the body (of type ``body_t``) on chunks
        of the range claimed from the counter until none is left. Every parallel loop with
        the same closure type shares it (a call through a pointer once per chunk costs
        nothing; a wrapper of its own per loop was a sixth of a model's LLVM IR)."""
        m = self.m
        wrapper = ir.Function(m.ir, ir.FunctionType(VOID, [PTR]), name)
        wrapper.linkage = "internal"
        wrapper.attributes.add("nounwind")
        # placed once when a module is split (``split.py``), not copied into every part
        # that runs a parallel loop: a copy cost as much LLVM time as a small nest (a
        # quarter of the overhead of bert's split), and inlining it saves nothing
        wrapper.attributes.add("noinline")
        wrapper.args[0].name = "closure"
        wb = ir.IRBuilder(wrapper.append_basic_block("entry"))
        fields = [wb.gep(wrapper.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)],
                         inbounds=True, source_etype=closure_t)
                  for k in range(len(closure_t.elements))]
        vals = [wb.load(p, typ=ft) for p, ft in zip(fields[:-1], closure_t.elements[:-1])]
        counter = fields[-1]
        body_fn, *vals = vals
        start, extent = vals[-2:]
        nth = wb.sext(wb.call(m.declare("omp_get_num_threads", I32, []), [], name="nth"), I64)
        ext64 = wb.sext(extent, I64) if t != I64 else extent
        # the chunk: ``chunk_size(extent, threads)``
        parts = wb.mul(nth, ir.Constant(I64, CHUNKS_PER_THREAD))
        chunk = wb.sdiv(wb.add(ext64, wb.sub(parts, ir.Constant(I64, 1))), parts)
        one = ir.Constant(I64, 1)
        few = wb.icmp_signed("<=", ext64,
                             wb.mul(nth, ir.Constant(I64, UNIT_CHUNKS_PER_THREAD)))
        chunk = wb.select(wb.or_(few, wb.icmp_signed("<", chunk, one)), one, chunk,
                          name="chunk")
        claim = wrapper.append_basic_block("claim")
        run = wrapper.append_basic_block("run")
        done = wrapper.append_basic_block("done")
        wb.branch(claim)
        wb.position_at_end(claim)
        # monotonic: the counter only hands out work; the region's end barrier publishes it
        first = wb.atomic_rmw("add", counter, chunk, "monotonic", name="first")
        wb.cbranch(wb.icmp_signed("<", first, ext64), run, done)
        wb.position_at_end(run)
        end = wb.add(first, chunk)
        last = wb.select(wb.icmp_signed("<", end, ext64), end, ext64, name="last")
        lo_t = wb.trunc(first, t) if t != I64 else first
        hi_t = wb.trunc(last, t) if t != I64 else last
        wb.call(Callee(body_fn, body_t), [*vals[:-2], wb.add(start, lo_t), wb.add(start, hi_t)])
        wb.branch(claim)
        wb.position_at_end(done)
        wb.ret_void()
        return wrapper
