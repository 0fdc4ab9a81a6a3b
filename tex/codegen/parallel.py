"""Outlined functions: parallel loops run by OpenMP (``GOMP_parallel``), and loop nests.

A ``For`` PARALLEL is outlined into ``@<name>.parN.body(noalias ptrs..., scalars..., lo,
hi)`` (captured buffers and variables become parameters, so ``noalias`` survives; never
inlined, so LLVM optimizes it once: a third less optimization time on a CNN gradient, for
one call per thread) and a wrapper ``@<name>.parN(ptr %closure)`` that unpacks a struct,
splits ``[0, extent)`` statically by ``omp_get_thread_num``/``omp_get_num_threads`` and
calls the body; the parent calls ``GOMP_parallel(wrapper, closure, num_threads, 0)``.
Nested parallel loops, parallel loops in vector code, and every parallel loop when OpenMP
is unavailable (``CodegenOptions.openmp``) run serially.

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
from ..lower.stmt import Allocate, For, ForKind, Nested, Seq, Stmt, Store, stmt_exprs, walk_stmts
from .emit import FunctionEmitter
from .irtypes import I32, I64, PTR, VOID, local_name, scalar_type
from .module import ERRORS, ModuleEmitter
from .vector import VectorEmitter

__all__ = ["ParallelEmitter", "OUTLINE_MIN_NESTS", "loop_nests"]

# a function with more loop nests than this emits each as a function of its own
OUTLINE_MIN_NESTS = 64


def loop_nests(body: Stmt) -> int:
    """How many loop nests ``body`` runs in sequence (loops in a ``Seq``, plus one for a
    body that is a loop)."""
    n = 1 if isinstance(body, For) else 0
    for st in walk_stmts(body):
        if isinstance(st, Seq):
            n += sum(1 for c in st.body if isinstance(c, For))
    return n


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
        self.memo.clear()
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
        # the closure: captures, start, extent
        fields = [PTR] * len(bufs) + [self.vars[v].type for v in scalars] + [t, t]
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
            with inner.counted(s.var.name, a_lo, a_hi) as i:
                inner.vars[s.var] = i
                inner.stmt(s.body)
            inner.finish()
            # the wrapper GOMP calls on every thread
            return self.parallel_wrapper(name, inner.fn, closure_t, t)

        wrapper = self.shared("parallel", s, [*bufs, *scalars], emit)
        # the parent: fill the closure, fork and join
        name = wrapper.name
        data = self.alloca(closure_t, f"{name}.closure")
        for k, v in enumerate([*(self.bufs[x] for x in bufs), *(self.vars[v] for v in scalars),
                               lo, ext]):
            p = self.b.gep(data, [ir.Constant(I32, 0), ir.Constant(I32, k)], inbounds=True,
                           source_etype=closure_t, name=f"{name}.field{k}")
            self.b.store(v, p)
        gomp = m.declare("GOMP_parallel", VOID, [PTR, PTR, I32, I32])
        self.b.call(gomp, [wrapper, data, ir.Constant(I32, m.options.num_threads),
                           ir.Constant(I32, 0)])

    def parallel_wrapper(self, name: str, body_fn: ir.Function,
                         closure_t: ir.LiteralStructType, t: ir.Type) -> ir.Function:
        """``@<name>(ptr %closure)``, run by every thread: unpack the closure (captures,
        start, extent) and call ``body_fn`` on this thread's static share of the range."""
        m = self.m
        wrapper = ir.Function(m.ir, ir.FunctionType(VOID, [PTR]), name)
        wrapper.linkage = "internal"
        wrapper.attributes.add("nounwind")
        wrapper.args[0].name = "closure"
        wb = ir.IRBuilder(wrapper.append_basic_block("entry"))
        vals = []
        for k, ft in enumerate(closure_t.elements):
            p = wb.gep(wrapper.args[0], [ir.Constant(I32, 0), ir.Constant(I32, k)],
                       inbounds=True, source_etype=closure_t)
            vals.append(wb.load(p, typ=ft))
        start, extent = vals[-2:]
        tid = wb.sext(wb.call(m.declare("omp_get_thread_num", I32, []), [], name="tid"), I64)
        nth = wb.sext(wb.call(m.declare("omp_get_num_threads", I32, []), [], name="nth"), I64)
        ext64 = wb.sext(extent, I64) if t != I64 else extent
        chunk = wb.sdiv(wb.add(ext64, wb.sub(nth, ir.Constant(I64, 1))), nth, name="chunk")

        def smin(x: ir.Value, y: ir.Value) -> ir.Value:
            return wb.select(wb.icmp_signed("<", x, y), x, y)

        first = smin(wb.mul(tid, chunk), ext64)
        last = smin(wb.add(first, chunk), ext64)
        with wb.if_then(wb.icmp_signed("<", first, last)):
            lo_t = wb.trunc(first, t) if t != I64 else first
            hi_t = wb.trunc(last, t) if t != I64 else last
            wb.call(body_fn, [*vals[:-2], wb.add(start, lo_t), wb.add(start, hi_t)])
        wb.ret_void()
        return wrapper
