"""What the functions of one LLVM module share: options, declarations, helpers, hazards.

``ModuleEmitter`` owns the llvmlite module of one compiled function: declarations of
functions and intrinsics (on first use), the out-of-line helpers (``@<name>.report`` for
failed bounds checks, ``@tex.ipow.iN``), the numbering of bounds checks and outlined
functions, the vectorization notes, and the analysis deciding which expressions are
*hazards* (may read memory out of bounds or divide by a variable integer), which the
function emitters evaluate lazily.

The error record: the entry function takes one argument after the parameters, its
caller's error record, four int64 (a failure: a failed ``malloc`` or a raising extern
call; 1 + the number of the first failed bounds check, stored by a compare-and-swap from 0
so the first failure of any thread wins; that check's index; the address of the runtime's
extern callback, which the caller sets and a function with ``te.extern`` calls reads),
zero at the call but for the callback. Every outlined and parallel function
gets it too. One record per call (``errors`` says whether the code writes it; NULL may be
passed otherwise), so concurrent calls of one function never see each other's failures.
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import llvmlite.ir as ir

from ..arith import Analyzer, Interval
from ..dtype import DTYPES
from ..ir.expr import Binary, Const, Expr, Op, Select, TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order
from ..lower.bounds_check import BoundsReportOp, is_report
from ..lower.passes import loop_domains
from ..lower.stmt import LoweredFunc, Stmt, make_buffer, stmt_exprs, symbol_name, walk_stmts
from ..lower.structure import structure
from .irtypes import I1, I64, PTR, VOID, mangle, store_atomic

__all__ = ["CodegenOptions", "ModuleEmitter", "ERRORS", "EXTERN_FAILED", "EXTERN_SLOT",
           "MAX_STACK_BYTES", "WORKSPACE_ALLOC", "WORKSPACE_FREE", "lazy_parts"]

MAX_STACK_BYTES = 64 * 1024  # larger Allocate buffers go to the runtime's allocator:
# ``ptr WORKSPACE_ALLOC(i64 bytes)`` and ``void WORKSPACE_FREE(ptr, i64 bytes)``, which keep
# freed blocks for the next call (``tex.runtime.workspace``)
WORKSPACE_ALLOC = "tex_workspace_alloc"
WORKSPACE_FREE = "tex_workspace_free"
# the key of the error record (see the module docstring) in the emitters' buffer maps
ERRORS = make_buffer("tex.errors", 4, DTYPES["int64"])
# the error record (int64[4]): slot 0 a failure (1: a buffer could not be allocated,
# EXTERN_FAILED: an extern call raised), slot 1 one plus the first failed bounds check,
# slot 2 its index, EXTERN_SLOT the runtime's extern callback (te.extern)
EXTERN_FAILED = 2
EXTERN_SLOT = 3


def lazy_parts(e: Expr) -> tuple[Expr, Expr, Expr]:
    """A lazily evaluated node as ``cond ? a : b`` (``a && b`` is ``a ? b : false``)."""
    if isinstance(e, Select):
        return e.cond, e.a, e.b
    assert isinstance(e, Binary)
    if e.op is Op.AND:
        return e.a, e.b, Const(False, e.dtype)
    return e.a, Const(True, e.dtype), e.b  # a || b


def _divides_by_variable(node: Expr) -> bool:
    """Whether ``node`` itself (not its operands) may fault: an integer division by a
    non-constant."""
    return isinstance(node, Binary) and node.op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD) \
        and node.dtype.is_integral and not isinstance(node.b, Const)


@dataclass(frozen=True)
class CodegenOptions:
    """Code generation switches (part of the compile cache key)."""

    fastmath: bool = False
    # a * b + c may become one fused multiply-add (one rounding, as C compilers' default
    # -ffp-contract): the reductions' multiply-adds then cost one instruction and one
    # latency, not two
    contract: bool = True
    num_threads: int = 0  # passed to GOMP_parallel; 0 = the OpenMP default
    openmp: bool = True  # False: parallel loops run serially
    # run-time bounds checks kept (``build(bounds_check=...)``; the checks themselves are
    # in the lowered function, which ``tex.lower.bounds_check.strip_checks`` removes)
    bounds_check: bool = True


class _LoopID(ir.MDValue):
    """An ``llvm.loop`` ID: a node whose first operand is itself (LangRef), which makes
    each one distinct; compared and hashed by identity (llvmlite's by operands would
    recurse)."""

    def __eq__(self, other: object) -> bool:
        return self is other

    def __hash__(self) -> int:
        return id(self)


# the loop hints (``llvm.loop`` metadata) of each kind of ``ModuleEmitter.loop_id``:
# (option, its i1 value or None)
LOOP_OPTIONS: dict[str, tuple[tuple[str, int | None], ...]] = {
    "vectorize": (("llvm.loop.vectorize.enable", 1),),
    "scheduled": (("llvm.loop.unroll.disable", None), ("llvm.loop.vectorize.enable", 0)),
    "outer": (("llvm.loop.vectorize.enable", 0),),
}


def _reads_report(s: Stmt) -> bool:
    """Whether ``s`` reads a bounds report (a run-time check's)."""
    return any(isinstance(n, TensorRead) and is_report(n.tensor)
               for st in walk_stmts(s) for n in post_order(*stmt_exprs(st)))


class ModuleEmitter:
    """Owns the llvmlite module and what its functions share."""

    def __init__(self, func: LoweredFunc, options: CodegenOptions, module: ir.Module,
                 max_lanes: int) -> None:
        self.func = func
        self.options = options
        self.ir = module
        self.errors = False  # whether some function writes the error record
        self.checks: dict[BoundsReportOp, int] = {}  # bounds report -> its number
        self.notes: list[str] = []  # vectorization decisions
        self.fm: tuple[str, ...] = ("fast",) if options.fastmath else ()
        # flags of float add/sub/mul: contraction into FMAs (fast implies it)
        self.fm_arith: tuple[str, ...] = self.fm or (("contract",) if options.contract
                                                     else ())
        self.max_lanes = max_lanes  # widest vector of a vectorized loop
        self._par_count = 0
        self._nest_count = 0
        self._report_fn: ir.Function | None = None
        self._hazard: dict[Expr, bool] = {}
        self._safe: dict[Expr, bool] = {}
        self._analyzer: Analyzer | None = None
        self._domains: dict[Var, Interval] | None = None
        self._reads_reports: bool | None = None
        # the top-level statement (a root stage's nest) being emitted: ``begin_nest``
        self._nest: Stmt | None = None
        # outlined functions by ``outline_key``, with the notes emitting them made: an
        # identical parallel loop or nest calls the same function
        self.outlined: dict[str, tuple[ir.Function, tuple[str, ...]]] = {}
        self._loop_options: dict[str, tuple[ir.MDValue, ...]] = {}  # ``loop_id``'s
        # the parallel loops' wrappers by closure type (``ParallelEmitter.parallel``)
        self.wrappers: dict[str, ir.Function] = {}
        # indices computed in int64 (``FunctionEmitter.address``), by index; the variable
        # standing for the first lane of each vectorized variable (``VectorEmitter.way``)
        self.wide_indices: dict[Expr, Expr] = {}
        self.lane0_vars: dict[Var, Var] = {}
        # called with each outlined function placed on its own (a nest, a parallel body)
        # once it is emitted whole: ``compile_llvm`` streams them to compiling processes
        self.on_placed: Callable[[ir.Function], None] | None = None

    def release(self) -> None:
        """Take the module's IR apart once its text is printed (the emitter is done).

        llvmlite's IR is one web of reference cycles (a function and its module, a block
        and its function, an instruction and its block point at each other), left whole
        for Python's cyclic collector: after a model gradient's build, 100,000 objects of
        it, and the collection that walked and freed them took 0.1-0.18 s of the build.
        Emptied here (with the metadata: a loop ID lists itself), each object is freed by
        reference counting as soon as its last user goes, and the collector never sees
        them."""
        for fn in self.ir.functions:
            for block in fn.blocks:
                for instr in block.instructions:
                    instr.__dict__.clear()
                block.__dict__.clear()
            fn.__dict__.clear()
        for md in self.ir.metadata:
            md.__dict__.clear()
        self.ir.__dict__.clear()
        self.outlined.clear()
        self.wrappers.clear()
        self._loop_options.clear()
        self._report_fn = None
        self.on_placed = None

    # -- declarations and helper functions ---------------------------------------------
    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """The function ``name`` (declared on first use)."""
        fn = self.ir.globals.get(name)
        if fn is None:
            fn = ir.Function(self.ir, ir.FunctionType(ret, list(args)), name)
        return fn  # type: ignore[no-any-return]

    def intrinsic(self, base: str, ret: ir.Type, args: Sequence[ir.Type],
                  overloads: Sequence[ir.Type]) -> ir.Function:
        """The overloaded intrinsic ``base`` for ``overloads`` (``llvm.fabs.v8f32``)."""
        name = ".".join([base, *(mangle(t) for t in overloads)])
        return self.declare(name, ret, args)

    def loop_id(self, key: str) -> ir.MDValue:
        """A fresh ``llvm.loop`` ID of one of ``LOOP_OPTIONS``' kinds: "vectorize" asks LLVM
        to vectorize the loop (a vectorized loop tex emits scalar), "scheduled" tells it
        neither to unroll nor to vectorize it (a loop of a nest the schedule shaped:
        ``emit.scheduled_nest``), "outer" not to vectorize it (a plain loop around long
        loops: ``emit.llvm_unrolls``)."""
        if key not in self._loop_options:
            def option(name: str, *value: ir.Value) -> ir.MDValue:
                return self.ir.add_metadata([ir.MetaDataString(self.ir, name), *value])
            self._loop_options[key] = tuple(
                option(name) if value is None else option(name, ir.Constant(I1, value))
                for name, value in LOOP_OPTIONS[key])
        loop_id = _LoopID(self.ir, [], name=str(len(self.ir.metadata)))
        loop_id.operands = (loop_id, *self._loop_options[key])
        return loop_id

    def check_number(self, op: BoundsReportOp) -> ir.Constant:
        """1 + the number of bounds check ``op`` (0 in the record means no violation)."""
        k = self.checks.setdefault(op, len(self.checks))
        return ir.Constant(I64, k + 1)

    def report_fn(self) -> ir.Function:
        """``@<name>.report(ptr record, i64 check, i64 index)``: the first call (of any
        thread) stores its check number in the error record (compare-and-swap from 0) and
        then its index; later calls change nothing. Cold and out of line: the checked
        paths only branch to it."""
        if self._report_fn is not None:
            return self._report_fn
        self.errors = True
        name = symbol_name(self.func.name)
        fn = ir.Function(self.ir, ir.FunctionType(VOID, [PTR, I64, I64]), f"{name}.report")
        fn.linkage = "internal"
        for attr in ("nounwind", "cold", "noinline"):
            fn.attributes.add(attr)
        record, check, index = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = b.gep(record, [ir.Constant(I64, 1)], inbounds=True, source_etype=I64)
        won = b.extract_value(b.cmpxchg(slot, ir.Constant(I64, 0), check, "seq_cst",
                                        "seq_cst"), 1)
        with b.if_then(won):
            value = b.gep(record, [ir.Constant(I64, 2)], inbounds=True, source_etype=I64)
            store_atomic(b, index, value, "seq_cst")
        b.ret_void()
        self._report_fn = fn
        if self.on_placed is not None:  # emitted whole, placed on its own (noinline)
            self.on_placed(fn)
        return fn

    def ipow(self, t: ir.IntType, signed: bool) -> ir.Function:
        """``@tex.ipow.iN(a, b)``: a ** b with wrap-around; negative b as in semantics.py."""
        name = f"tex.{'i' if signed else 'u'}pow.i{t.width}"
        fn = self.ir.globals.get(name)
        if fn is not None:
            return fn  # type: ignore[no-any-return]
        fn = ir.Function(self.ir, ir.FunctionType(t, [t, t]), name)
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        a, e = fn.args
        a.name, e.name = "a", "b"
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        zero, one = ir.Constant(t, 0), ir.Constant(t, 1)
        loop = fn.append_basic_block("loop")
        done = fn.append_basic_block("done")
        if signed:
            neg = fn.append_basic_block("negative")
            b.cbranch(b.icmp_signed("<", e, zero), neg, loop)
            b.position_at_end(neg)
            # 1 / a**|b| truncates to 0 unless |a| == 1
            odd = b.trunc(e, I1)
            minus = b.select(odd, ir.Constant(t, -1), one)
            r = b.select(b.icmp_signed("==", a, one), one,
                         b.select(b.icmp_signed("==", a, ir.Constant(t, -1)), minus, zero))
            b.ret(r)
        else:
            b.branch(loop)
        entry_pred = fn.entry_basic_block
        b.position_at_end(loop)
        acc = b.phi(t, "acc")
        base = b.phi(t, "base")
        exp = b.phi(t, "exp")
        acc.add_incoming(one, entry_pred)
        base.add_incoming(a, entry_pred)
        exp.add_incoming(e, entry_pred)
        is_zero = b.icmp_unsigned("==", exp, zero)
        body = fn.append_basic_block("body")
        b.cbranch(is_zero, done, body)
        b.position_at_end(body)
        bit = b.trunc(exp, I1)
        acc2 = b.select(bit, b.mul(acc, base), acc)
        base2 = b.mul(base, base)
        exp2 = b.lshr(exp, one)
        b.branch(loop)
        acc.add_incoming(acc2, body)
        base.add_incoming(base2, body)
        exp.add_incoming(exp2, body)
        b.position_at_end(done)
        b.ret(acc)
        return fn

    def next_parallel_name(self) -> str:
        """The name of the next outlined parallel loop: ``<name>.parN``."""
        self._par_count += 1
        return f"{symbol_name(self.func.name)}.par{self._par_count}"

    def next_nest_name(self) -> str:
        """The name of the next outlined loop nest: ``<name>.nestN``."""
        self._nest_count += 1
        return f"{symbol_name(self.func.name)}.nest{self._nest_count}"

    # -- hazards -----------------------------------------------------------------------
    def hazard(self, root: Expr) -> bool:
        """Whether evaluating ``root`` may read memory or divide by a variable integer."""
        memo = self._hazard
        if root in memo:
            return memo[root]
        for node in post_order(root):
            if node in memo:
                continue
            if isinstance(node, TensorRead) and is_report(node.tensor):
                memo[node] = True  # a bounds report runs only where its check fails
            elif isinstance(node, TensorRead):
                # a read in bounds over its loops' whole domains is safe to evaluate
                # eagerly (a blend of both sides instead of masked loads and branches)
                memo[node] = not self.in_bounds(node) or \
                    any(memo.get(k, False) for k in node.indices)
            elif _divides_by_variable(node):
                memo[node] = True
            else:
                memo[node] = any(memo.get(k, False) for k in node.children())
        return memo[root]

    def is_lazy(self, e: Expr) -> bool:
        """Whether ``e`` (a select, ``&&``, ``||``) evaluates a side only when it is taken:
        where that side is a hazard."""
        if isinstance(e, Select):
            return self.hazard(e.a) or self.hazard(e.b)
        if isinstance(e, Binary) and e.op in (Op.AND, Op.OR):
            return self.hazard(e.b)
        return False

    def safe(self, root: Expr) -> bool:
        """Whether evaluating ``root`` unguarded can neither fault nor read out of bounds:
        free of hazards, or a lazily evaluated select/``&&``/``||`` (which guards its own
        sides) whose condition is safe."""
        memo = self._safe
        if root in memo:
            return memo[root]
        for node in post_order(root):
            if node in memo:
                continue
            if not self.hazard(node):
                memo[node] = True
            elif self.is_lazy(node):
                memo[node] = memo[lazy_parts(node)[0]]
            elif isinstance(node, TensorRead):
                memo[node] = self.in_bounds(node) and all(memo[k] for k in node.indices)
            else:
                memo[node] = not _divides_by_variable(node) and \
                    all(memo[k] for k in node.children())
        return memo[root]

    def begin_nest(self, nest: Stmt) -> None:
        """The function's next top-level statement (a root stage's nest) is ``nest``: the
        analyses that follow take the ranges of its loops alone (the code emitted before
        it is the only thing known while later nests are still being lowered), and forget
        what they concluded under the previous nest's ranges."""
        self._nest = nest
        self._domains = None
        self._analyzer = None
        self._reads_reports = None
        self._hazard.clear()
        self._safe.clear()

    def domains(self) -> dict[Var, Interval]:
        """The ranges of the variables the indices use: the loop variables of the nest
        being emitted (``begin_nest``; else of the function), a backend with hardware
        indices adds its own."""
        if self._domains is None:
            self._domains = loop_domains(self.func.body if self._nest is None else self._nest)
        return self._domains

    def outline_key(self, kind: str, s: Stmt, args: Sequence[Tensor | Var]) -> str | None:
        """The key under which an outlined function running ``s`` with arguments ``args``
        (its captured buffers and variables) is shared by every loop or nest of the same
        ``kind`` that compiles to the same code: equal structure (``tex.lower.structure``:
        dtypes, buffer shapes), variable ranges (the hazard analysis reads them). None for
        code that reads a bounds report: each check reports its own number."""
        # (the nest is searched once: most have no run-time checks, and their loops need
        # not be searched)
        if self._reads_reports is None:
            self._reads_reports = _reads_report(self.func.body if self._nest is None
                                                else self._nest)
        if self._reads_reports and _reads_report(s):
            return None
        return f"{kind}\n{structure(s, args, self.domains())}"

    def in_bounds(self, read: TensorRead) -> bool:
        """Whether the flat index of ``read`` stays inside its buffer for every value of
        the loop variables (lets and parameters make it unknown: False)."""
        if len(read.indices) != 1 or len(read.tensor.shape) != 1:
            return False
        if self._analyzer is None:
            self._analyzer = Analyzer(self.domains())
        iv = self._analyzer.try_bounds(read.indices[0])
        size = read.tensor.shape[0]
        if not isinstance(size, int):  # a buffer of symbolic size: proved on linear forms
            return iv is not None and iv.lo is not None and iv.lo >= 0 and \
                self._analyzer.at_most(read.indices[0], size - 1)
        return iv is not None and iv.lo is not None and iv.hi is not None and \
            iv.lo >= 0 and iv.hi < size
