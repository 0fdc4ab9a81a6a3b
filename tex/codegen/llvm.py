"""Loop IR -> LLVM IR for the host CPU: emit with the llvmlite builder, verify, optimize.

``compile_llvm(func)`` turns a legalized ``LoweredFunc`` into a ``CompiledModule``: the
unoptimized IR text, the optimized IR (O3, new pass manager, a target machine for the
host CPU name and features), the assembly on request, and the optimized module to JIT.

ABI: one function ``void @<name>(...)``, one parameter per ``func.params`` entry in order:
a ``BufferParam`` is a pointer to its first element (``noalias captures(none)``: the
runtime refuses outputs that overlap another argument), a ``ScalarParam`` is passed by
value (``bool`` as ``i8``, ``float16`` as its ``i16`` bits).

How statements become code (numba style: allocas in the entry block, mem2reg/SROA
promote them; a loop is a context manager yielding its index):

- ``For`` SERIAL: a counted loop. UNROLLED (constant extent): the body ``extent`` times,
  the variable replaced by constants. THREAD: ``ValueError`` (GPU only).
- ``For`` PARALLEL: outlined into ``@<name>.parN.body(noalias ptrs..., scalars..., lo, hi)``
  (captured buffers and variables become parameters, so ``noalias`` survives) and a
  wrapper ``@<name>.parN(ptr %closure)`` that unpacks a struct, splits ``[0, extent)``
  statically by ``omp_get_thread_num``/``omp_get_num_threads`` and calls the body; the
  parent calls ``GOMP_parallel(wrapper, closure, num_threads, 0)``. Nested parallel
  loops, and every parallel loop when OpenMP is unavailable, run serially.
- ``For`` VECTORIZED (constant extent): LLVM vector code, ``w = min(extent, lanes)``
  lanes at a time (``lanes`` = twice the host vector register width in 32-bit elements:
  16 with AVX2), a serial loop over full chunks and one narrower vector for the rest.
  The loop variable is ``<base, base+1, ...>``; expressions become vectors where they
  depend on it (others stay scalar and are broadcast where combined); a load/store whose
  index has lane stride 1 is one unaligned vector access (``align`` = element size),
  other indices gather/scatter (``llvm.masked.gather``/``scatter``); an ``IfThenElse``
  on a vector condition runs its branches under a lane mask (masked loads and stores),
  with an unmasked fast path when every lane is active; a ``Select`` whose branches
  load evaluates each branch with its own mask. An ``Allocate`` inside the body gets one
  private copy per lane (interleaved, on the stack). Falls back to a scalar loop (which
  LLVM's loop vectorizer may still vectorize) when the extent is not constant, an inner
  loop's bounds vary across lanes, the private copies would exceed 64 KiB, or lanes
  could observe each other through memory (a buffer written at two different indices,
  read at an index other than the one it is written at, or written at a lane-invariant
  index by more than one store). ``CompiledModule.notes`` records each decision.
- ``Allocate``: up to 64 KiB, an ``alloca`` in the entry block of the current function
  (per thread inside a parallel loop); larger, ``malloc``/``free`` around the body. When
  ``malloc`` returns NULL the function sets the first word of its error record to 1 and
  returns at once (the runtime raises ``MemoryError``).

The entry function takes one argument after the parameters: its caller's *error record*,
three int64 (a failed ``malloc``; 1 + the number of the first failed bounds check, stored
by a compare-and-swap from 0 so the first failure of any thread wins; that check's index),
zero at the call. Every outlined and parallel function gets it too. One record per call
(``CompiledModule.errors`` says whether the code writes it; NULL may be passed otherwise),
so concurrent calls of one function never see each other's failures.

Expressions: a ``Select`` (or ``&&``/``||``) whose lazily evaluated side reads memory or
divides integers by a non-constant is compiled as a branch (a phi joins the sides);
others become ``select``. Integer division never traps: a non-constant divisor of 0
gives 0 and -1 is handled without ``idiv`` (``INT_MIN / -1`` wraps). Float max/min
follow ``np.maximum``/``np.minimum`` (NaN in either operand propagates; for equal
operands the second is returned). Fast-math flags only with ``fastmath=True``.

``TEX_DUMP=llvm,llvm.opt,asm`` prints the three texts.
"""
from __future__ import annotations

import contextlib
import functools
import hashlib
import math
import threading
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass, field

import llvmlite.binding as llvm
import llvmlite.ir as ir
from llvmlite.binding.newpassmanagers import NewPassManager

from .. import debug
from ..arith import Analyzer
from ..debug import InternalError
from ..dtype import DTYPES, DType, float32
from ..ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Op,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from ..ir.tensor import Tensor
from ..ir.visit import post_order
from ..lower.bounds_check import BoundsReportOp, is_report
from ..lower.passes import loop_domains
from ..lower.stmt import (
    Allocate,
    BufferParam,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    Nested,
    Param,
    ScalarParam,
    Seq,
    Stmt,
    Store,
    make_buffer,
    run_nested,
    stmt_children,
    stmt_exprs,
    symbol_name,
    walk_stmts,
)
from ..target import CPUInfo, register_probe, with_caches
from . import tables
from .vecmath import VECMATH, vecmath_function

__all__ = ["CodegenOptions", "CompiledModule", "HostTarget", "host_target", "emit_llvm",
           "compile_llvm", "optimize", "run_default_pipeline", "lane_stride", "covered_ops",
           "MAX_STACK_BYTES", "LLVM_LOCK"]

MAX_STACK_BYTES = 64 * 1024  # larger Allocate buffers go to malloc
# the key of the error record (see the module docstring) in the emitters' buffer maps
ERRORS = make_buffer("tex.errors", 3, DTYPES["int64"])
MAX_UNROLL = 4096  # UNROLLED loops longer than this stay loops


# --------------------------------------------------------------------------------------
# Host target
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class HostTarget:
    """The host CPU as LLVM sees it."""

    triple: str
    cpu: str
    features: str
    data_layout: str
    vector_bits: int  # widest SIMD register: 128 (SSE), 256 (AVX), 512 (AVX-512)

    def target_machine(self, jit: bool = False) -> llvm.TargetMachine:
        """A fresh O3 target machine (an execution engine takes ownership of its own)."""
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                            codemodel="jitdefault", jit=jit)


# LLVM's global context is not thread-safe and llvmlite releases the GIL: every parse,
# optimization, code emission and JIT load in tex holds this lock
LLVM_LOCK = threading.RLock()


@functools.cache
def host_target() -> HostTarget:
    """The host CPU (LLVM's native target initialized on first use)."""
    with LLVM_LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        triple = llvm.get_process_triple()
        cpu = llvm.get_host_cpu_name()
        feats = llvm.get_host_cpu_features()
        features = feats.flatten()
        if feats.get("avx512f"):
            bits = 512
        elif feats.get("avx"):
            bits = 256
        else:
            bits = 128
        tm = llvm.Target.from_triple(triple).create_target_machine(
            cpu=cpu, features=features, opt=3, codemodel="jitdefault")
        return HostTarget(triple, cpu, features, str(tm.target_data), bits)


@functools.cache
def host_cpu_info() -> CPUInfo:
    """The host as the auto-scheduler sees it: LLVM's features decide the vector width."""
    host = host_target()
    fma = "+fma" in host.features.split(",")
    return with_caches(host.cpu, host.vector_bits, fma)


register_probe("llvm", host_cpu_info)


# --------------------------------------------------------------------------------------
# Types
# --------------------------------------------------------------------------------------

_I1 = ir.IntType(1)
_I8 = ir.IntType(8)
_I32 = ir.IntType(32)
_I64 = ir.IntType(64)
_PTR = ir.PointerType()
_VOID = ir.VoidType()


def _scalar_type(d: DType) -> ir.Type:
    """The register type of a dtype (bool is i1)."""
    if d.is_float:
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[d.bits]
    return ir.IntType(d.bits)


def _storage_type(d: DType) -> ir.Type:
    """The in-memory element type (bool is one byte, as in NumPy)."""
    return _I8 if d.is_bool else _scalar_type(d)


def _abi_ir_type(d: DType) -> ir.Type:
    """How a scalar parameter is passed (bool as i8, float16 as its i16 bits)."""
    if d.is_bool:
        return _I8
    if d.name == "float16":
        return ir.IntType(16)
    return _scalar_type(d)


def _vec(t: ir.Type, lanes: int) -> ir.Type:
    return ir.VectorType(t, lanes) if lanes else t


def _lanes(v: ir.Value) -> int:
    return v.type.count if isinstance(v.type, ir.VectorType) else 0


def _elem(t: ir.Type) -> ir.Type:
    return t.element if isinstance(t, ir.VectorType) else t


def _mangle(t: ir.Type) -> str:
    """The overload suffix of an intrinsic name: f32, v8f32, i64, p0."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{_mangle(t.element)}"
    if isinstance(t, ir.HalfType):
        return "f16"
    if isinstance(t, ir.FloatType):
        return "f32"
    if isinstance(t, ir.DoubleType):
        return "f64"
    if isinstance(t, ir.IntType):
        return f"i{t.width}"
    if isinstance(t, ir.PointerType):
        return "p0"
    raise InternalError(f"no intrinsic mangling for LLVM type {t}")


def _const(t: ir.Type, value: object) -> ir.Constant:
    """A constant of scalar or vector type (a vector constant is a splat)."""
    if isinstance(t, ir.VectorType):
        return ir.Constant(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


# --------------------------------------------------------------------------------------
# Options and results
# --------------------------------------------------------------------------------------

# LLVM truncates the names of local values (arguments, instructions, blocks) to 1,024
# characters, so two long tensor names sharing a prefix would collide ("redefinition"):
# a long name keeps a prefix and gets a digest of the whole name
_LOCAL_NAME_MAX = 240


def _local(name: str) -> str:
    """``name`` for a local LLVM value: unchanged up to ``_LOCAL_NAME_MAX`` characters,
    else a prefix and a digest of the whole name (distinct for distinct names)."""
    if len(name) <= _LOCAL_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[:_LOCAL_NAME_MAX - 17]}.{digest}"


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


@dataclass
class CompiledModule:
    """One compiled function: texts for ``get_source`` and the optimized module to JIT."""

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

    @property
    def asm(self) -> str:
        """Host assembly of the optimized module (generated on first use)."""
        if self._asm is None:
            with LLVM_LOCK:
                # a context of its own, freed with the module (the global one keeps
                # every module's constants and metadata)
                mod = llvm.parse_assembly(self.llvm_ir_opt, context=llvm.create_context())
                self._asm = host_target().target_machine().emit_assembly(mod)
        return self._asm


def _store_atomic(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, ordering: str) -> None:
    """An atomic store through an opaque pointer, as an exchange whose old value is
    unused (llvmlite's ``store_atomic`` wants a typed pointer)."""
    b.atomic_rmw("xchg", ptr, value, ordering)


# --------------------------------------------------------------------------------------
# Module-level emitter: declarations, helpers, outlined functions
# --------------------------------------------------------------------------------------

class _ModuleEmitter:
    """Owns the llvmlite module and what its functions share."""

    def __init__(self, func: LoweredFunc, options: CodegenOptions, module: ir.Module,
                 max_lanes: int) -> None:
        self.func = func
        self.options = options
        self.ir = module
        self.par_count = 0
        self.nest_count = 0
        self.errors = False  # whether some function writes the error record
        self.checks: dict[BoundsReportOp, int] = {}  # bounds report -> its number
        self._report_fn: ir.Function | None = None
        self.notes: list[str] = []
        self._hazard: dict[Expr, bool] = {}
        self._domains: Analyzer | None = None
        self.fm: tuple[str, ...] = ("fast",) if options.fastmath else ()
        # flags of float add/sub/mul: contraction into FMAs (fast implies it)
        self.fm_arith: tuple[str, ...] = self.fm or (("contract",) if options.contract
                                                     else ())
        self.max_lanes = max_lanes  # widest vector of a vectorized loop

    def declare(self, name: str, ret: ir.Type, args: Sequence[ir.Type]) -> ir.Function:
        """The function ``name`` (declared on first use)."""
        fn = self.ir.globals.get(name)
        if fn is None:
            fn = ir.Function(self.ir, ir.FunctionType(ret, list(args)), name)
        return fn  # type: ignore[no-any-return]

    def intrinsic(self, base: str, ret: ir.Type, args: Sequence[ir.Type],
                  overloads: Sequence[ir.Type]) -> ir.Function:
        name = ".".join([base, *(_mangle(t) for t in overloads)])
        return self.declare(name, ret, args)

    def check_number(self, op: BoundsReportOp) -> ir.Constant:
        """1 + the number of bounds check ``op`` (0 in the record means no violation)."""
        k = self.checks.setdefault(op, len(self.checks))
        return ir.Constant(_I64, k + 1)

    def report_fn(self) -> ir.Function:
        """``@<name>.report(ptr record, i64 check, i64 index)``: the first call (of any
        thread) stores its check number in the error record (compare-and-swap from 0) and
        then its index; later calls change nothing. Cold and out of line: the checked
        paths only branch to it."""
        if self._report_fn is not None:
            return self._report_fn
        self.errors = True
        name = symbol_name(self.func.name)
        fn = ir.Function(self.ir, ir.FunctionType(_VOID, [_PTR, _I64, _I64]), f"{name}.report")
        fn.linkage = "internal"
        for attr in ("nounwind", "cold", "noinline"):
            fn.attributes.add(attr)
        record, check, index = fn.args
        b = ir.IRBuilder(fn.append_basic_block("entry"))
        slot = b.gep(record, [ir.Constant(_I64, 1)], inbounds=True, source_etype=_I64)
        won = b.extract_value(b.cmpxchg(slot, ir.Constant(_I64, 0), check, "seq_cst",
                                        "seq_cst"), 1)
        with b.if_then(won):
            value = b.gep(record, [ir.Constant(_I64, 2)], inbounds=True, source_etype=_I64)
            _store_atomic(b, index, value, "seq_cst")
        b.ret_void()
        self._report_fn = fn
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
            odd = b.trunc(e, _I1)
            minus = b.select(odd, ir.Constant(t, -1), one)
            r = b.select(b.icmp_signed("==", a, one), one,
                         b.select(b.icmp_signed("==", a, ir.Constant(t, -1)), minus, zero))
            b.ret(r)
            entry_pred = fn.entry_basic_block
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
        bit = b.trunc(exp, _I1)
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
            elif (isinstance(node, Binary) and node.op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD)
                  and node.dtype.is_integral and not isinstance(node.b, Const)):
                memo[node] = True
            else:
                memo[node] = any(memo.get(k, False) for k in node.children())
        return memo[root]

    def in_bounds(self, read: TensorRead) -> bool:
        """Whether the flat index of ``read`` stays inside its buffer for every value of
        the loop variables (lets and parameters make it unknown: False)."""
        if len(read.indices) != 1 or len(read.tensor.shape) != 1:
            return False
        if self._domains is None:
            self._domains = Analyzer(loop_domains(self.func.body))
        try:
            iv = self._domains.bounds(read.indices[0])
        except Exception:  # noqa: BLE001 - an index the bounds analysis does not cover
            return False
        return iv.lo is not None and iv.hi is not None and iv.lo >= 0 and \
            iv.hi < read.tensor.shape[0]

    def next_parallel_name(self) -> str:
        self.par_count += 1
        return f"{symbol_name(self.func.name)}.par{self.par_count}"


# --------------------------------------------------------------------------------------
# Lane-stride analysis (vectorized loops)
# --------------------------------------------------------------------------------------

def lane_stride(root: Expr, var: Var, lets: dict[Var, Expr]) -> int | None:
    """s such that ``root`` at lane k equals its value at lane 0 plus ``s * k`` when the
    vectorized variable ``var`` takes lane values ``base + k``; None when not affine.

    ``lets`` maps let-bound variables (inside the vectorized body) to their values.
    Example: ``i.outer*8 + i.inner`` has stride 1 in ``i.inner``, ``2*j`` stride 2,
    ``k`` stride 0 (lane-invariant), ``i.inner // 2`` None.
    """
    memo: dict[Expr, int | None] = {}
    for node in post_order(root):
        s: int | None
        if isinstance(node, Var):
            if node is var:
                s = 1
            elif node in lets:
                s = lane_stride(lets[node], var, lets)
            else:
                s = 0
        elif isinstance(node, Const):
            s = 0
        else:
            kids = [memo[k] for k in node.children()]
            if all(k == 0 for k in kids):
                s = 0
            elif isinstance(node, Binary) and node.op in (Op.ADD, Op.SUB, Op.MUL) \
                    and node.dtype.is_int and None not in kids:
                sa, sb = kids
                assert sa is not None and sb is not None
                if node.op is Op.ADD:
                    s = sa + sb
                elif node.op is Op.SUB:
                    s = sa - sb
                elif sb == 0 and isinstance(node.b, Const):
                    s = sa * int(node.b.value)
                elif sa == 0 and isinstance(node.a, Const):
                    s = sb * int(node.a.value)
                else:
                    s = None
            elif isinstance(node, Cast) and node.dtype.is_int and node.a.dtype.is_int \
                    and node.dtype.bits >= node.a.dtype.bits:
                s = kids[0]
            else:
                s = None
        memo[node] = s
    return memo[root]


def _dup_factor(index: Expr, var: Var, lets: dict[Var, Expr]) -> int | None:
    """k when ``index`` is lane-invariant terms plus ``var // k`` (a constant k > 1): lane
    l then reads element ``first + l // k`` (with the chunk's base a multiple of k)."""
    terms, stack = [], [index]
    while stack:
        e = stack.pop()
        if isinstance(e, Binary) and e.op is Op.ADD:
            stack.extend((e.a, e.b))
        else:
            terms.append(e)
    varying = [t for t in terms if lane_stride(t, var, lets) != 0]
    if len(varying) != 1:
        return None
    t = varying[0]
    if isinstance(t, Binary) and t.op is Op.FLOORDIV and t.a is var and \
            isinstance(t.b, Const) and int(t.b.value) > 1:
        return int(t.b.value)
    return None



def _vector_plan(loop: For, max_lanes: int) -> str | None:
    """Why ``loop`` cannot be vectorized, or None when it can.

    Buffers allocated inside the body are private to each lane (``w`` interleaved copies:
    element ``x`` of lane ``k`` at ``x * w + k``), so only other buffers are checked for
    lanes that could observe each other through memory.
    """
    if not isinstance(loop.extent, Const):
        return "the extent is not a constant"
    if int(loop.extent.value) <= 0:
        return "the extent is not positive"
    lanes = min(int(loop.extent.value), max_lanes)
    lets: dict[Var, Expr] = {}
    inner_vars: set[Var] = {loop.var}
    private: set[Tensor] = set()
    stores: dict[Tensor, list[tuple[Expr, bool]]] = {}
    reads: dict[Tensor, set[Expr]] = {}
    stack: list[tuple[Stmt, bool]] = [(loop.body, False)]
    while stack:
        s, in_loop = stack.pop()
        for e in stmt_exprs(s):
            for node in post_order(e):
                if isinstance(node, TensorRead):
                    reads.setdefault(node.tensor, set()).add(node.indices[0])
                elif isinstance(node, Reduce):
                    return "a Reduce node is left in the body"
        match s:
            case Allocate():
                if int(s.buffer.shape[0]) * s.buffer.dtype.itemsize * lanes > MAX_STACK_BYTES:
                    return (f"buffer '{s.buffer.name}' allocated in the body is too large "
                            f"to keep {lanes} private copies on the stack")
                private.add(s.buffer)
            case For():
                if s.kind is ForKind.THREAD:
                    return "the body has a GPU thread loop"
                used = {n for e in (s.min, s.extent) for n in post_order(e)
                        if isinstance(n, Var)}
                if used & inner_vars:
                    return f"the bounds of inner loop '{s.var.name}' vary across lanes"
                stack.append((s.body, True))
                continue
            case LetStmt():
                lets[s.var] = s.value
                inner_vars.add(s.var)
            case Store():
                stores.setdefault(s.buffer, []).append((s.index, in_loop))
        for child in stmt_children(s):
            stack.append((child, in_loop))
    for buf, writes in stores.items():
        if buf in private:
            continue
        indices = {ix for ix, _ in writes}
        if len(indices) > 1:
            return f"buffer '{buf.name}' is written at {len(indices)} different indices"
        (index,) = indices
        stride = lane_stride(index, loop.var, lets)
        if stride in (0, None):
            if buf in reads or len(writes) > 1 or writes[0][1]:
                return (f"buffer '{buf.name}' is written at index {index}, which lanes may "
                        "share, and read or written again")
        elif buf in reads and reads[buf] != {index}:
            return f"buffer '{buf.name}' is read at an index other than the one it is written at"
    return None


# --------------------------------------------------------------------------------------
# Function-level emitter
# --------------------------------------------------------------------------------------

class _FunctionEmitter:
    """Emits statements and expressions into one LLVM function."""

    def __init__(self, mod: _ModuleEmitter, fn: ir.Function, in_parallel: bool) -> None:
        self.m = mod
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        self.start = fn.append_basic_block("start")
        self.b = ir.IRBuilder(self.start)
        self.in_parallel = in_parallel
        self.vars: dict[Var, ir.Value] = {}
        self.bufs: dict[Tensor, ir.Value] = {}
        self.memo: dict[Expr, ir.Value] = {}
        self._safe: dict[Expr, bool] = {}
        # vectorized-loop state: lanes == 0 outside vector code
        self.lanes = 0
        self.vvar: Var | None = None
        self.vbase_align = 1
        self.mask: ir.Value | None = None
        self.lets: dict[Var, Expr] = {}
        self.private: set[Tensor] = set()  # buffers allocated inside vector code
        # loop nests of this function become functions of their own (``outlined``)
        self.outline_nests = False

    def finish(self) -> None:
        if not self.b.block.is_terminated:
            self.b.ret_void()
        ir.IRBuilder(self.entry).branch(self.start)

    # -- small helpers ------------------------------------------------------------------
    def alloca(self, t: ir.Type, name: str, count: int | None = None,
               align: int | None = None) -> ir.AllocaInstr:
        """An alloca in the entry block (promoted by mem2reg or reused per iteration)."""
        with self.b.goto_block(self.entry):
            size = None if count is None else ir.Constant(_I64, count)
            a = self.b.alloca(t, size=size, name=_local(name))
        a.type = _PTR  # llvmlite types allocas as typed pointers; LLVM wants opaque ones
        if align:
            a.align = align
        return a

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        if _lanes(v) == lanes or lanes == 0:
            return v
        if isinstance(v, ir.Constant):
            return ir.Constant(ir.VectorType(v.type, lanes), [v] * lanes)
        vt = ir.VectorType(v.type, lanes)
        one = self.b.insert_element(ir.Constant(vt, ir.Undefined), v, ir.Constant(_I32, 0))
        return self.b.shuffle_vector(one, ir.Constant(vt, ir.Undefined),
                                     ir.Constant(ir.VectorType(_I32, lanes), [0] * lanes))

    def unify(self, *vals: ir.Value) -> list[ir.Value]:
        """Broadcast scalars next to vectors."""
        n = max(_lanes(v) for v in vals)
        return [self.splat(v, n) for v in vals] if n else list(vals)

    def to_i64(self, v: ir.Value, d: DType) -> ir.Value:
        t = _elem(v.type)
        if t == _I64:
            return v
        target = _vec(_I64, _lanes(v))
        return self.b.sext(v, target) if d.kind == "int" else self.b.zext(v, target)

    def resize_int(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """An integer value converted to another integer dtype."""
        if src.bits == dst.bits:
            return v
        t = _vec(_scalar_type(dst), _lanes(v))
        if dst.bits < src.bits:
            return self.b.trunc(v, t)
        return self.b.sext(v, t) if src.kind == "int" else self.b.zext(v, t)

    def true_mask(self, lanes: int) -> ir.Constant:
        return _const(ir.VectorType(_I1, lanes), 1)

    def not_(self, v: ir.Value) -> ir.Value:
        return self.b.xor(v, _const(v.type, 1))

    def and_mask(self, a: ir.Value | None, b: ir.Value) -> ir.Value:
        return b if a is None else self.b.and_(*self.unify(a, b))

    def call_float(self, fn: ir.Function, args: Sequence[ir.Value], name: str = "") -> ir.Value:
        return self.b.call(fn, list(args), name=name, fastmath=self.m.fm)

    def scalarize(self, f: Callable[..., ir.Value], args: Sequence[ir.Value],
                  rtype: ir.Type) -> ir.Value:
        """Apply a scalar function lane by lane to vector arguments."""
        n = max(_lanes(a) for a in args)
        if n == 0:
            return f(*args)
        args = self.unify(*args)
        out: ir.Value = ir.Constant(ir.VectorType(rtype, n), ir.Undefined)
        for k in range(n):
            lane = ir.Constant(_I32, k)
            r = f(*(self.b.extract_element(a, lane) for a in args))
            out = self.b.insert_element(out, r, lane)
        return out

    def buffer(self, t: Tensor) -> ir.Value:
        ptr = self.bufs.get(t)
        if ptr is None:
            raise InternalError(f"buffer '{t.name}' is neither a parameter nor allocated "
                                "by an enclosing Allocate", self.m.func)
        return ptr

    # -- expressions -------------------------------------------------------------------
    def value(self, root: Expr) -> ir.Value:
        """The LLVM value of ``root`` (a vector where it depends on a vectorized lane)."""
        memo = self.memo
        v = memo.get(root)
        if v is not None:
            return v
        # (node, state): 0 first visit, 1 children emitted, 2 a lazy node whose condition
        # and shared operands are emitted (they are computed once, before its branches)
        stack: list[tuple[Expr, int]] = [(root, 0)]
        while stack:
            node, state = stack.pop()
            if node in memo:
                continue
            if state == 1:
                memo[node] = self.emit(node, [memo[k] for k in node.children()])
                continue
            if self.is_lazy(node):
                pre = [] if state == 2 else [k for k in self.before_branches(node)
                                             if k not in memo]
                if pre:
                    stack.append((node, 2))
                    stack.extend((k, 0) for k in reversed(pre))
                else:
                    memo[node] = self.lazy(node)
                continue
            kids = node.children()
            if not kids:
                memo[node] = self.leaf(node)
                continue
            stack.append((node, 1))
            stack.extend((k, 0) for k in reversed(kids) if k not in memo)
        return memo[root]

    def before_branches(self, e: Expr) -> list[Expr]:
        """What a lazy ``e`` evaluates before branching: its condition, the sub-expressions
        both sides use that are safe to evaluate unguarded (``safe``), and those both sides
        evaluate unconditionally, safe or not (they run whichever side is taken, so
        running them first changes nothing: a checked read reports exactly as before).
        Emitted once there, a value shared by the two sides of nested selects is not
        emitted again per side (which doubled the code per level of nesting)."""
        cond, a, b = _lazy_parts(e)

        def unconditional(root: Expr) -> dict[Expr, None]:
            # what evaluating ``root`` always evaluates: all but the sides of lazy nodes
            found: dict[Expr, None] = {}
            stack = [root]
            while stack:
                n = stack.pop()
                if n in found or n in self.memo or not n.children():
                    continue
                found[n] = None
                stack.extend([_lazy_parts(n)[0]] if self.is_lazy(n) else n.children())
            return found

        def frontier(root: Expr) -> dict[Expr, None]:
            found: dict[Expr, None] = {}
            seen: set[Expr] = set()
            stack = [root]
            while stack:
                n = stack.pop()
                if n in seen or n in self.memo or not n.children():
                    continue
                seen.add(n)
                if self.safe(n):
                    found[n] = None
                elif not self.is_lazy(n):  # a nested lazy node guards its own operands
                    stack.extend(n.children())
            return found

        shared = frontier(b)
        first = [cond, *(n for n in frontier(a) if n in shared)]
        always, taken = unconditional(b), set(first)
        return first + [n for n in unconditional(a) if n in always and n not in taken]

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
            if not self.m.hazard(node):
                memo[node] = True
            elif self.is_lazy(node):
                memo[node] = memo[_lazy_parts(node)[0]]
            elif isinstance(node, TensorRead):
                memo[node] = self.m.in_bounds(node) and all(memo[k] for k in node.indices)
            else:
                memo[node] = not self.hazard_here(node) and \
                    all(memo[k] for k in node.children())
        return memo[root]

    def hazard_here(self, node: Expr) -> bool:
        """Whether ``node`` itself (not its operands) may fault: an integer division by a
        non-constant."""
        return isinstance(node, Binary) and node.op in (Op.DIV, Op.FLOORDIV, Op.FLOORMOD) \
            and node.dtype.is_integral and not isinstance(node.b, Const)

    def leaf(self, e: Expr) -> ir.Value:
        if isinstance(e, Const):
            return ir.Constant(_scalar_type(e.dtype), e.value)
        if isinstance(e, Var):
            v = self.vars.get(e)
            if v is None:
                raise InternalError(f"variable '{e.name}' is used outside its scope",
                                    self.m.func)
            return v
        raise InternalError(f"unexpected leaf {e!r}")

    def is_lazy(self, e: Expr) -> bool:
        if isinstance(e, Select):
            return self.m.hazard(e.a) or self.m.hazard(e.b)
        if isinstance(e, Binary) and e.op in (Op.AND, Op.OR):
            return self.m.hazard(e.b)
        return False

    def lazy(self, e: Expr) -> ir.Value:
        """cond ? a : b evaluating only the side taken (a mask per side in vector code)."""
        cond, a, b = _lazy_parts(e)
        c = self.value(cond)
        memo = self.memo
        saved = dict(memo)
        if _lanes(c):
            outer = self.mask
            self.mask = self.and_mask(outer, c)
            va = self.value(a)
            memo.clear()
            memo.update(saved)
            self.mask = self.and_mask(outer, self.not_(c))
            vb = self.value(b)
            memo.clear()
            memo.update(saved)
            self.mask = outer
            c, va, vb = self.unify(c, va, vb)
            return self.b.select(c, va, vb)
        bb = self.b
        then_bb = bb.append_basic_block("select.true")
        else_bb = bb.append_basic_block("select.false")
        join_bb = bb.append_basic_block("select.end")
        bb.cbranch(c, then_bb, else_bb)
        bb.position_at_end(then_bb)
        va = self.value(a)
        then_end = bb.block
        memo.clear()
        memo.update(saved)
        bb.position_at_end(else_bb)
        vb = self.value(b)
        else_end = bb.block
        memo.clear()
        memo.update(saved)
        n = max(_lanes(va), _lanes(vb))
        if n:
            with bb.goto_block(then_end):
                va = self.splat(va, n)
            with bb.goto_block(else_end):
                vb = self.splat(vb, n)
        bb.branch(join_bb)
        with bb.goto_block(then_end):
            bb.branch(join_bb)
        bb.position_at_end(join_bb)
        phi = bb.phi(va.type, name="select")
        phi.add_incoming(va, then_end)
        phi.add_incoming(vb, else_end)
        return phi

    def emit(self, e: Expr, args: list[ir.Value]) -> ir.Value:
        match e:
            case TensorRead() if is_report(e.tensor):
                return self.report(e, args[0])
            case TensorRead():
                return self.load(e.tensor, e.indices[0], args[0])
            case Unary():
                return self.unary(e, args[0])
            case Binary():
                return self.binary(e, args[0], args[1])
            case Compare():
                return self.compare(e, args[0], args[1])
            case Select():
                c, a, b = self.unify(*args)
                return self.b.select(c, a, b)
            case Cast():
                return self.cast(args[0], e.a.dtype, e.dtype)
        raise InternalError(f"the LLVM backend cannot compile {type(e).__name__} nodes: {e}",
                            self.m.func)

    # unary ------------------------------------------------------------------------------
    def unary(self, e: Unary, x: ir.Value) -> ir.Value:
        op, d = e.op, e.dtype
        emitter = _UNARY_EMITTERS.get(op)
        if emitter is None:
            raise InternalError(f"op '{op.value}' reached the LLVM backend; "
                                "tex.lower.legalize should have rewritten it", self.m.func)
        return emitter(self, d, x)

    def fmod(self, a: ir.Value, b: ir.Value, d: DType) -> ir.Value:
        """C's fmod (the remainder with the sign of ``a``)."""
        return self.b.frem(a, b, flags=self.m.fm)

    def float_intrinsic(self, name: str, x: ir.Value, *more: ir.Value) -> ir.Value:
        fn = self.m.intrinsic(name, x.type, [x.type] * (1 + len(more)), [x.type])
        return self.call_float(fn, [x, *more])

    def libm(self, op: Op, d: DType, x: ir.Value) -> ir.Value:
        names = tables.LIBM_CALLS[op]
        if d.bits not in names:  # float16: through float32
            wide = self.b.fpext(x, _vec(ir.FloatType(), _lanes(x)))
            return self.b.fptrunc(self.libm(op, float32, wide), x.type)
        t = _scalar_type(d)
        fn = self.m.declare(names[d.bits], t, [t])
        return self.scalarize(lambda v: self.call_float(fn, [v]), [x], t)

    # binary -----------------------------------------------------------------------------
    def binary(self, e: Binary, a: ir.Value, b: ir.Value) -> ir.Value:
        a, b = self.unify(a, b)
        d = e.a.dtype
        if e.op in tables.LOGICAL:
            return getattr(self.b, tables.LOGICAL[e.op])(a, b)
        if d.is_float:
            name = tables.FLOAT_BINARY.get(e.op)
            if name is not None:
                flags = self.m.fm_arith if e.op in (Op.ADD, Op.SUB, Op.MUL) else self.m.fm
                return getattr(self.b, name)(a, b, flags=flags)
            return _FLOAT_BINARY_EMITTERS[e.op](self, d, a, b)
        name = tables.INT_BINARY.get(e.op)
        if name is not None:
            return getattr(self.b, name)(a, b)
        return _INT_BINARY_EMITTERS[e.op](self, d, a, b, e.b)

    def compare(self, e: Compare, a: ir.Value, b: ir.Value) -> ir.Value:
        a, b = self.unify(a, b)
        d = e.a.dtype
        if d.is_float:
            method, sym = tables.FCMP[e.op]
            return getattr(self.b, method)(sym, a, b, flags=self.m.fm)
        sym = tables.ICMP[e.op]
        if d.kind == "int":
            return self.b.icmp_signed(sym, a, b)
        return self.b.icmp_unsigned(sym, a, b)

    # casts ------------------------------------------------------------------------------
    def cast(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        if src is dst:
            return v
        b, n = self.b, _lanes(v)
        t = _vec(_scalar_type(dst), n)
        if dst.is_bool:  # x != 0 (NaN != 0 is true)
            if src.is_float:
                return b.fcmp_unordered("!=", v, _const(v.type, 0.0))
            return b.icmp_unsigned("!=", v, _const(v.type, 0))
        if src.is_bool:
            return b.uitofp(v, t) if dst.is_float else b.zext(v, t)
        if src.is_float and dst.is_float:
            return b.fpext(v, t) if dst.bits > src.bits else b.fptrunc(v, t)
        if src.is_float:  # truncation toward zero; narrow ints through i32 as C does
            if dst.bits < 32:
                return b.trunc(b.fptosi(v, _vec(_I32, n)), t)
            return b.fptosi(v, t)
        if dst.is_float:
            return b.sitofp(v, t) if src.kind == "int" else b.uitofp(v, t)
        return self.resize_int(v, src, dst)

    # memory -----------------------------------------------------------------------------
    def access(self, buf: Tensor, index: Expr, ix: ir.Value,
               vector_value: bool = False, load: bool = False) -> tuple[str, ir.Value]:
        """How to reach ``buf[ix]``: ("scalar", i64 index), ("contiguous", i64 index of lane
        0) or ("gather", <n x i64> indices); for loads also ("strideK", lane 0's index:
        lanes K apart) and ("dupK", lane 0's index: lane l reads first + l // K)."""
        d = index.dtype
        n = self.lanes
        if n and buf in self.private:  # lane k's copy of element x lives at x * n + k
            i64 = self.to_i64(ix, d)
            if not _lanes(i64):
                return "contiguous", self.b.mul(i64, ir.Constant(_I64, n))
            steps = ir.Constant(ir.VectorType(_I64, n), [ir.Constant(_I64, k) for k in range(n)])
            return "gather", self.b.add(self.b.mul(i64, _const(i64.type, n)), steps)
        if n == 0 or (not _lanes(ix) and self.mask is None and not vector_value):
            return "scalar", self.to_i64(ix, d)
        if _lanes(ix) and lane_stride(index, self.vvar, self.lets) == 1:  # type: ignore[arg-type]
            first = self.b.extract_element(ix, ir.Constant(_I32, 0))
            return "contiguous", self.to_i64(first, d)
        if load and _lanes(ix):
            # (masked or not: a masked span load enables only the lanes' own elements)
            stride = lane_stride(index, self.vvar, self.lets)  # type: ignore[arg-type]
            if stride is not None and 2 <= stride <= 4:
                first = self.b.extract_element(ix, ir.Constant(_I32, 0))
                return f"stride{stride}", self.to_i64(first, d)
        if load and _lanes(ix) and self.mask is None:
            k = _dup_factor(index, self.vvar, self.lets)  # type: ignore[arg-type]
            if k and n % k == 0 and self.vbase_align % k == 0:
                first = self.b.extract_element(ix, ir.Constant(_I32, 0))
                return f"dup{k}", self.to_i64(first, d)
        return "gather", self.to_i64(self.splat(ix, n), d)

    def element_ptr(self, base: ir.Value, st: ir.Type, i64: ir.Value, name: str) -> ir.Value:
        """``&base[i64]``; a vector of pointers for a vector of indices."""
        p = self.b.gep(base, [i64], inbounds=True, source_etype=st, name=_local(name))
        if _lanes(i64):
            p.type = ir.VectorType(_PTR, _lanes(i64))  # llvmlite types it as a scalar ptr
        return p

    def report(self, e: TensorRead, ix: ir.Value) -> ir.Value:
        """A failed bounds check: record (check, index) for the active lane with the
        lowest number, if any; the value read is 0."""
        op = e.tensor.op
        assert isinstance(op, BoundsReportOp)
        b = self.b
        d = e.tensor.dtype
        st = _scalar_type(d)
        zero = ir.Constant(st, 0.0 if d.is_float else 0)
        fn = self.m.report_fn()
        check = self.m.check_number(op)
        i64 = self.to_i64(ix, e.indices[0].dtype)
        n = self.lanes
        record = self.bufs[ERRORS]
        if n == 0 or (not _lanes(i64) and self.mask is None):
            b.call(fn, [record, check, i64])
            return zero
        mask = self.true_mask(n) if self.mask is None else self.splat(self.mask, n)
        bits = b.bitcast(mask, ir.IntType(n))
        with b.if_then(b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(n), 0)),
                       likely=False):
            if _lanes(i64):
                cttz = self.m.intrinsic("llvm.cttz", ir.IntType(n), [ir.IntType(n), _I1],
                                        [ir.IntType(n)])
                lane = b.call(cttz, [bits, ir.Constant(_I1, 1)])
                lane32 = b.trunc(lane, _I32) if n > 32 else \
                    (b.zext(lane, _I32) if n < 32 else lane)
                i64 = b.extract_element(i64, lane32)
            b.call(fn, [record, check, i64])
        return ir.Constant(ir.VectorType(st, n), [zero] * n)

    def load(self, buf: Tensor, index: Expr, ix: ir.Value) -> ir.Value:
        base = self.buffer(buf)
        d = buf.dtype
        st = _storage_type(d)
        align = ir.Constant(_I32, d.itemsize)
        b = self.b
        how, i64 = self.access(buf, index, ix, load=True)
        p = self.element_ptr(base, st, i64, f"{buf.name}.ptr")
        if how == "scalar":
            v = b.load(p, typ=st, align=d.itemsize, name=_local(buf.name))
            return b.icmp_unsigned("!=", v, ir.Constant(_I8, 0)) if d.is_bool else v
        n = self.lanes
        vt = ir.VectorType(st, n)
        zero = _const(vt, 0.0 if d.is_float else 0)
        if how == "contiguous" and self.mask is None:
            v = b.load(p, typ=vt, align=d.itemsize, name=_local(buf.name))
        elif how.startswith("stride"):  # lanes first + l*k: the span, every k-th element
            k = int(how[6:])
            span_t = ir.VectorType(st, (n - 1) * k + 1)
            if self.mask is None:
                span = b.load(p, typ=span_t, align=d.itemsize, name=_local(buf.name))
            else:
                # the span's element q*k is lane q's (its mask bit); those between are off
                lane_mask = self.splat(self.mask, n)
                with_off = b.shuffle_vector(
                    lane_mask, ir.Constant(lane_mask.type, None),
                    ir.Constant(ir.VectorType(_I32, span_t.count),
                                [ir.Constant(_I32, j // k if j % k == 0 else n)
                                 for j in range(span_t.count)]))
                fn = self.m.intrinsic("llvm.masked.load", span_t,
                                      [_PTR, _I32, with_off.type, span_t], [span_t, _PTR])
                span = b.call(fn, [p, align, with_off, _const(span_t, 0)], name=_local(buf.name))
            v = b.shuffle_vector(span, ir.Constant(span.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(_I32, n),
                                             [ir.Constant(_I32, q * k) for q in range(n)]))
        elif how.startswith("dup"):  # lanes base//k + l//k: n/k elements, each k times
            k = int(how[3:])
            few = b.load(p, typ=ir.VectorType(st, n // k), align=d.itemsize, name=_local(buf.name))
            v = b.shuffle_vector(few, ir.Constant(few.type, ir.Undefined),
                                 ir.Constant(ir.VectorType(_I32, n),
                                             [ir.Constant(_I32, q // k) for q in range(n)]))
        elif how == "contiguous":
            mask = self.splat(self.mask, n)
            fn = self.m.intrinsic("llvm.masked.load", vt, [_PTR, _I32, mask.type, vt],
                                  [vt, _PTR])
            v = b.call(fn, [p, align, mask, zero], name=_local(buf.name))
        else:
            mask = self.true_mask(n) if self.mask is None else self.splat(self.mask, n)
            fn = self.m.intrinsic("llvm.masked.gather", vt, [p.type, _I32, mask.type, vt],
                                  [vt, p.type])
            v = b.call(fn, [p, align, mask, zero], name=_local(buf.name))
        return b.icmp_unsigned("!=", v, _const(vt, 0)) if d.is_bool else v

    def store(self, s: Store) -> None:
        self.memo.clear()
        buf, d = s.buffer, s.buffer.dtype
        base = self.buffer(buf)
        st = _storage_type(d)
        align = ir.Constant(_I32, d.itemsize)
        ix = self.value(s.index)
        val = self.value(s.value)
        b = self.b
        if d.is_bool:
            val = b.zext(val, _vec(_I8, _lanes(val)))
        how, i64 = self.access(buf, s.index, ix, vector_value=bool(_lanes(val)))
        p = self.element_ptr(base, st, i64, f"{buf.name}.ptr")
        if how == "scalar":
            if self.lanes and self.mask is not None:  # one store if any lane is on
                anyf = self.m.intrinsic("llvm.vector.reduce.or", _I1, [self.mask.type],
                                        [self.mask.type])
                with b.if_then(b.call(anyf, [self.mask])):
                    b.store(val, p, align=d.itemsize)
            else:
                b.store(val, p, align=d.itemsize)
            return
        n = self.lanes
        vt = ir.VectorType(st, n)
        val = self.splat(val, n)
        if how == "contiguous" and self.mask is None:
            b.store(val, p, align=d.itemsize)
        elif how == "contiguous":
            mask = self.splat(self.mask, n)
            fn = self.m.intrinsic("llvm.masked.store", _VOID, [vt, _PTR, _I32, mask.type],
                                  [vt, _PTR])
            b.call(fn, [val, p, align, mask])
        else:
            mask = self.true_mask(n) if self.mask is None else self.splat(self.mask, n)
            fn = self.m.intrinsic("llvm.masked.scatter", _VOID, [vt, p.type, _I32, mask.type],
                                  [vt, p.type])
            b.call(fn, [val, p, align, mask])

    # -- statements --------------------------------------------------------------------
    # The statement emitters are ``Nested`` generators (tex.lower.stmt.run_nested): a loop
    # nest as deep as a chain of compute_at stages needs no Python recursion.
    def stmt(self, s: Stmt) -> None:
        """Emit ``s`` where the builder is."""
        run_nested(self.visit(s))

    def visit(self, s: Stmt) -> Nested[None]:
        match s:
            case Seq():
                for child in s.body:
                    if self.outline_nests and isinstance(child, For):
                        self.outlined(child)
                    else:
                        yield self.visit(child)
            case Store():
                self.store(s)
            case For():
                yield self.loop(s)
            case LetStmt() | Allocate():
                leave = self.enter_scope(s)
                yield self.visit(s.body)
                leave()
            case IfThenElse():
                yield self.if_then_else(s)
            case _:
                raise InternalError(f"unknown statement {type(s).__name__}", self.m.func)

    def if_then_else(self, s: IfThenElse) -> Nested[None]:
        self.memo.clear()
        c = self.value(s.cond)
        b = self.b
        if not _lanes(c):
            if s.else_case is None:
                with b.if_then(c):
                    yield self.visit(s.then_case)
            else:
                with b.if_else(c) as (then, otherwise):
                    with then:
                        yield self.visit(s.then_case)
                    with otherwise:
                        yield self.visit(s.else_case)
            return
        outer = self.mask
        if outer is None:  # every lane on: run the branch unmasked
            allf = self.m.intrinsic("llvm.vector.reduce.and", _I1, [c.type], [c.type])
            with b.if_else(b.call(allf, [c], name="all")) as (fast, masked):
                with fast:
                    yield self.visit(s.then_case)
                with masked:
                    yield self.masked_branches(s, None, c)
            return
        yield self.masked_branches(s, outer, c)

    def masked_branches(self, s: IfThenElse, outer: ir.Value | None, c: ir.Value
                        ) -> Nested[None]:
        self.mask = self.and_mask(outer, c)
        yield self.visit(s.then_case)
        if s.else_case is not None:
            self.mask = self.and_mask(outer, self.not_(c))
            yield self.visit(s.else_case)
        self.mask = outer

    def enter_scope(self, s: Stmt) -> Callable[[], None]:
        """Open the scope of a ``LetStmt`` or ``Allocate`` (not its body); the returned
        function closes it."""
        if isinstance(s, LetStmt):
            self.memo.clear()
            v = self.value(s.value)
            self.vars[s.var] = v
            if self.lanes and _lanes(v):
                self.lets[s.var] = s.value

            def leave_let() -> None:
                del self.vars[s.var]
                self.lets.pop(s.var, None)
            return leave_let
        assert isinstance(s, Allocate)
        buf = s.buffer
        st = _storage_type(buf.dtype)
        n = int(buf.shape[0])
        nbytes = n * buf.dtype.itemsize
        if self.lanes:  # one private copy per lane, interleaved (checked by _vector_plan)
            self.bufs[buf] = self.alloca(st, buf.name, count=n * self.lanes, align=64)
            self.private.add(buf)

            def leave_private() -> None:
                del self.bufs[buf]
                self.private.discard(buf)
            return leave_private
        if nbytes <= MAX_STACK_BYTES:
            self.bufs[buf] = self.alloca(st, buf.name, count=n, align=64)

            def leave_stack() -> None:
                del self.bufs[buf]
            return leave_stack
        b = self.b
        malloc = self.m.declare("malloc", _PTR, [_I64])
        free = self.m.declare("free", _VOID, [_PTR])
        p = b.call(malloc, [ir.Constant(_I64, nbytes)], name=_local(buf.name))
        failed = b.icmp_unsigned("==", p, ir.Constant(_PTR, None))
        self.m.errors = True
        with b.if_then(failed, likely=False):
            _store_atomic(b, ir.Constant(_I64, 1), self.bufs[ERRORS], "monotonic")
            b.ret_void()
        self.bufs[buf] = p

        def leave_heap() -> None:
            del self.bufs[buf]
            b.call(free, [p])
        return leave_heap

    # loops ------------------------------------------------------------------------------
    def bounds(self, s: For) -> tuple[ir.Value, ir.Value]:
        self.memo.clear()
        d = s.var.dtype
        lo = self.cast(self.value(s.min), s.min.dtype, d)
        ext = self.cast(self.value(s.extent), s.extent.dtype, d)
        if isinstance(lo, ir.Constant) and isinstance(ext, ir.Constant):
            return lo, ir.Constant(lo.type, lo.constant + ext.constant)
        return lo, self.b.add(lo, ext, name=f"{_local(s.var.name)}.end")

    @contextlib.contextmanager
    def counted(self, name: str, lo: ir.Value, hi: ir.Value) -> Iterator[ir.Value]:
        """``for name in [lo, hi)``: yields the index; the body goes where the builder is."""
        b = self.b
        name = _local(name)
        counter = self.alloca(lo.type, f"{name}.addr")
        b.store(lo, counter)
        cond = b.append_basic_block(f"{name}.cond")
        body = b.append_basic_block(f"{name}.body")
        end = b.append_basic_block(f"{name}.end")
        b.branch(cond)
        b.position_at_end(cond)
        i = b.load(counter, name=name, typ=lo.type)
        b.cbranch(b.icmp_signed("<", i, hi), body, end)
        b.position_at_end(body)
        yield i
        if not b.block.is_terminated:
            b.store(b.add(i, ir.Constant(i.type, 1), name=f"{name}.next", flags=["nsw"]),
                    counter)
            b.branch(cond)
        b.position_at_end(end)

    def loop(self, s: For) -> Nested[None]:
        kind = s.kind
        if kind is ForKind.THREAD:
            raise ValueError(f"loop '{s.var.name}' is bound to {s.thread_tag or 'a GPU thread'}"
                             ": build with target='cuda' (the CPU target cannot run it)")
        if kind is ForKind.PARALLEL and self.m.options.openmp and not self.in_parallel \
                and not self.lanes:
            self.parallel(s)  # a function of its own: emitted by a run of its own
            return
        if kind is ForKind.VECTORIZED and not self.lanes:
            reason = _vector_plan(s, self.m.max_lanes)
            if reason is None:
                self.m.notes.append(f"vectorized {s.var.name}")
                yield self.vectorized(s)
                return
            self.m.notes.append(f"scalar {s.var.name}: {reason}")
        if kind is ForKind.UNROLLED and isinstance(s.extent, Const) \
                and int(s.extent.value) <= MAX_UNROLL:
            yield self.unrolled(s)
            return
        lo, hi = self.bounds(s)
        with self.counted(s.var.name, lo, hi) as i:
            self.vars[s.var] = i
            yield self.visit(s.body)
        del self.vars[s.var]

    def unrolled(self, s: For) -> Nested[None]:
        lo, _ = self.bounds(s)
        for k in range(int(s.extent.value)):  # type: ignore[attr-defined]
            if isinstance(lo, ir.Constant):
                self.vars[s.var] = ir.Constant(lo.type, lo.constant + k)
            else:
                self.vars[s.var] = self.b.add(lo, ir.Constant(lo.type, k),
                                              name=f"{_local(s.var.name)}.{k}")
            yield self.visit(s.body)
        self.vars.pop(s.var, None)

    def vectorized(self, s: For) -> Nested[None]:
        n = int(s.extent.value)  # type: ignore[attr-defined]
        w = min(n, self.m.max_lanes)
        lo, _ = self.bounds(s)
        full, rest = divmod(n, w)
        t = lo.type
        lo_c = int(s.min.value) if isinstance(s.min, Const) else None
        # what the chunk bases are multiples of (for loads indexed by lane // k)
        align = math.gcd(lo_c, w) if lo_c is not None else 1
        if full == 1:
            yield self.vector_body(s, lo, w, align)
        elif full > 1:
            with self.counted(f"{s.var.name}.chunk", ir.Constant(t, 0), ir.Constant(t, full)) \
                    as c:
                base = self.b.add(lo, self.b.mul(c, ir.Constant(t, w)),
                                  name=f"{_local(s.var.name)}.base")
                yield self.vector_body(s, base, w, align)
        if rest:
            base = self.b.add(lo, ir.Constant(t, full * w), name=f"{_local(s.var.name)}.rest")
            rest_align = math.gcd(lo_c, full * w) if lo_c is not None else 1
            yield self.vector_body(s, base, rest, rest_align)

    def vector_body(self, s: For, base: ir.Value, w: int, align: int = 1) -> Nested[None]:
        """One chunk of ``w`` lanes from ``base`` (a multiple of ``align``)."""
        t = base.type
        self.vbase_align = align
        steps = ir.Constant(ir.VectorType(t, w), [ir.Constant(t, k) for k in range(w)])
        self.lanes, self.vvar, self.mask = w, s.var, None
        self.vars[s.var] = self.b.add(self.splat(base, w), steps, name=_local(s.var.name))
        yield self.visit(s.body)
        del self.vars[s.var]
        self.lanes, self.vvar, self.mask = 0, None, None
        self.lets.clear()

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

    def outlined(self, s: For) -> None:
        """Emit the loop nest ``s`` as a call to an internal function of its own. LLVM's
        loop passes grow quadratically with the loops of one function (a chain of 400
        stored stages took 9 s to optimize, 1,500 stages 100 s); over many small functions
        they stay linear. Used for functions with many top-level nests only."""
        m = self.m
        bufs, scalars = self.captures(s)
        m.nest_count += 1
        arg_types = [_PTR] * len(bufs) + [self.vars[v].type for v in scalars]
        fn = ir.Function(m.ir, ir.FunctionType(_VOID, arg_types),
                         f"{symbol_name(m.func.name)}.nest{m.nest_count}")
        fn.linkage = "internal"
        fn.attributes.add("nounwind")
        fn.attributes.add("noinline")  # inlined back, the caller would be one function again
        inner = _FunctionEmitter(m, fn, in_parallel=self.in_parallel)
        for arg, x in zip(fn.args, bufs):
            arg.name = _local(x.name)
            arg.add_attribute("noalias")  # distinct buffers (as the caller's parameters)
            arg.add_attribute("captures(none)")
            inner.bufs[x] = arg
        for arg, v in zip(fn.args[len(bufs):], scalars):
            arg.name = _local(v.name)
            inner.vars[v] = arg
        inner.stmt(s)
        inner.finish()
        self.memo.clear()
        self.b.call(fn, [*(self.bufs[x] for x in bufs), *(self.vars[v] for v in scalars)])
        if m.errors and any(isinstance(x, Allocate) for x in walk_stmts(s)):
            # a failed malloc returned from the nest: return from here too
            failed = self.b.load_atomic(self.bufs[ERRORS], "monotonic", 8, typ=_I64)
            with self.b.if_then(self.b.icmp_unsigned("!=", failed, ir.Constant(_I64, 0)),
                                likely=False):
                self.b.ret_void()

    def parallel(self, s: For) -> None:
        """Outline ``s`` and run it with GOMP_parallel (see the module docstring)."""
        m = self.m
        lo, hi = self.bounds(s)
        d = s.var.dtype
        t = _scalar_type(d)
        ext = self.b.sub(hi, lo, name=f"{_local(s.var.name)}.extent")
        # captured values: variables and buffers used inside and bound out here
        bufs, scalars = self.captures(s.body)
        scalars = [v for v in scalars if v is not s.var]
        name = m.next_parallel_name()
        # the body: noalias buffer pointers, scalars, [lo, hi)
        arg_types = [_PTR] * len(bufs) + [self.vars[v].type for v in scalars] + [t, t]
        body_fn = ir.Function(m.ir, ir.FunctionType(_VOID, arg_types), f"{name}.body")
        body_fn.linkage = "internal"
        body_fn.attributes.add("nounwind")
        inner = _FunctionEmitter(m, body_fn, in_parallel=True)
        for arg, x in zip(body_fn.args, bufs):
            arg.name = _local(x.name)
            arg.add_attribute("noalias")
            arg.add_attribute("captures(none)")
            inner.bufs[x] = arg
        for arg, v in zip(body_fn.args[len(bufs):], scalars):
            arg.name = _local(v.name)
            inner.vars[v] = arg
        a_lo, a_hi = body_fn.args[-2:]
        a_lo.name, a_hi.name = f"{_local(s.var.name)}.lo", f"{_local(s.var.name)}.hi"
        with inner.counted(s.var.name, a_lo, a_hi) as i:
            inner.vars[s.var] = i
            inner.stmt(s.body)
        inner.finish()
        # the closure and the wrapper GOMP calls on every thread
        fields = [_PTR] * len(bufs) + [self.vars[v].type for v in scalars] + [t, t]
        closure_t = ir.LiteralStructType(fields)
        wrapper = ir.Function(m.ir, ir.FunctionType(_VOID, [_PTR]), name)
        wrapper.linkage = "internal"
        wrapper.attributes.add("nounwind")
        wrapper.args[0].name = "closure"
        wb = ir.IRBuilder(wrapper.append_basic_block("entry"))
        vals = []
        for k, ft in enumerate(fields):
            p = wb.gep(wrapper.args[0], [ir.Constant(_I32, 0), ir.Constant(_I32, k)],
                       inbounds=True, source_etype=closure_t)
            vals.append(wb.load(p, typ=ft))
        start, extent = vals[-2:]
        tid = wb.sext(wb.call(m.declare("omp_get_thread_num", _I32, []), [], name="tid"), _I64)
        nth = wb.sext(wb.call(m.declare("omp_get_num_threads", _I32, []), [], name="nth"), _I64)
        ext64 = wb.sext(extent, _I64) if t != _I64 else extent
        chunk = wb.sdiv(wb.add(ext64, wb.sub(nth, ir.Constant(_I64, 1))), nth, name="chunk")

        def smin(x: ir.Value, y: ir.Value) -> ir.Value:
            return wb.select(wb.icmp_signed("<", x, y), x, y)

        first = smin(wb.mul(tid, chunk), ext64)
        last = smin(wb.add(first, chunk), ext64)
        with wb.if_then(wb.icmp_signed("<", first, last)):
            lo_t = wb.trunc(first, t) if t != _I64 else first
            hi_t = wb.trunc(last, t) if t != _I64 else last
            wb.call(body_fn, [*vals[:-2], wb.add(start, lo_t), wb.add(start, hi_t)])
        wb.ret_void()
        # the parent: fill the closure, fork and join
        data = self.alloca(closure_t, f"{name}.closure")
        for k, v in enumerate([*(self.bufs[x] for x in bufs), *(self.vars[v] for v in scalars),
                               lo, ext]):
            p = self.b.gep(data, [ir.Constant(_I32, 0), ir.Constant(_I32, k)], inbounds=True,
                           source_etype=closure_t, name=f"{name}.field{k}")
            self.b.store(v, p)
        gomp = m.declare("GOMP_parallel", _VOID, [_PTR, _PTR, _I32, _I32])
        self.b.call(gomp, [wrapper, data, ir.Constant(_I32, m.options.num_threads),
                           ir.Constant(_I32, 0)])


# --------------------------------------------------------------------------------------
# Per-op emitters (ops with more than one instruction); tables.py has the one-liners
# --------------------------------------------------------------------------------------

UnaryEmitter = Callable[[_FunctionEmitter, DType, ir.Value], ir.Value]
IntBinaryEmitter = Callable[[_FunctionEmitter, DType, ir.Value, ir.Value, Expr], ir.Value]
FloatBinaryEmitter = Callable[[_FunctionEmitter, DType, ir.Value, ir.Value], ir.Value]


def _lazy_parts(e: Expr) -> tuple[Expr, Expr, Expr]:
    """A lazily evaluated node as ``cond ? a : b`` (``a && b`` is ``a ? b : false``)."""
    if isinstance(e, Select):
        return e.cond, e.a, e.b
    assert isinstance(e, Binary)
    if e.op is Op.AND:
        return e.a, e.b, Const(False, e.dtype)
    return e.a, Const(True, e.dtype), e.b  # a || b


def _u_neg(f: _FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
    # -x: fneg for floats, 0 - x (wrapping) for integers
    if d.is_float:
        return f.b.fneg(x, flags=f.m.fm)
    if d.is_bool:
        raise InternalError("negation of a bool value (cast it to int32 first)")
    return f.b.sub(_const(x.type, 0), x)


def _u_not(f: _FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
    return f.not_(x)


def _u_abs(f: _FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
    # |x|: llvm.fabs; integers x < 0 ? 0 - x : x (abs(INT_MIN) wraps to INT_MIN, as NumPy)
    if d.is_float:
        return f.float_intrinsic("llvm.fabs", x)
    if d.kind != "int":
        return x
    neg = f.b.sub(_const(x.type, 0), x)
    return f.b.select(f.b.icmp_signed("<", x, _const(x.type, 0)), neg, x)


def _u_float_intrinsic(op: Op) -> UnaryEmitter:
    name = tables.FLOAT_INTRINSICS[op]

    def emit(f: _FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
        if not d.is_float:
            if op in tables.INT_IDENTITY_UNARY:
                return x  # floor(i) -> i
            raise InternalError(f"{op.value} of a {d} value (float-only intrinsic)")
        if d.bits == 32 and op.value in VECMATH:
            # LLVM would scalarize llvm.exp.v8f32 into libm calls; ours stays vectorized
            return f.b.call(vecmath_function(f.m.ir, op.value, x.type), [x])
        return f.float_intrinsic(name, x)

    return emit


def _u_libm(op: Op) -> UnaryEmitter:
    def emit(f: _FunctionEmitter, d: DType, x: ir.Value) -> ir.Value:
        if not d.is_float:
            raise InternalError(f"{op.value} of a {d} value (float-only intrinsic)")
        return f.libm(op, d, x)

    return emit


_UNARY_EMITTERS: dict[Op, UnaryEmitter] = {
    Op.NEG: _u_neg,
    Op.NOT: _u_not,
    Op.ABS: _u_abs,
    **{op: _u_float_intrinsic(op) for op in tables.FLOAT_INTRINSICS if op is not Op.ABS},
    **{op: _u_libm(op) for op in tables.LIBM_CALLS},
}


def _is_pow2(c: int) -> bool:
    return c > 0 and c & (c - 1) == 0


def _int_division(kind: str) -> IntBinaryEmitter:
    """DIV (trunc), FLOORDIV (floor) or FLOORMOD (mod) on integers; never traps."""

    def emit(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value, bexpr: Expr) -> ir.Value:
        bb, t = f.b, a.type
        zero, one = _const(t, 0), _const(t, 1)
        signed = d.kind == "int"
        if isinstance(bexpr, Const):
            c = int(bexpr.value)
            if c == 0:
                return zero  # x / 0 -> 0
            if not signed:
                return bb.urem(a, b) if kind == "mod" else bb.udiv(a, b)
            if c == -1:  # x / -1 -> -x (INT_MIN wraps), x % -1 -> 0
                return zero if kind == "mod" else bb.sub(zero, a)
            if kind == "trunc":
                return bb.sdiv(a, b)
            if _is_pow2(c):  # floor(x / 2^k) -> x >> k, x mod 2^k -> x & (2^k - 1)
                k = c.bit_length() - 1
                return bb.ashr(a, _const(t, k)) if kind == "floor" else bb.and_(a, _const(t, c - 1))
            q, r = bb.sdiv(a, b), bb.srem(a, b)
            # the remainder has the dividend's sign; floor needs the divisor's
            wrong = bb.icmp_signed("<", r, zero) if c > 0 else bb.icmp_signed(">", r, zero)
            if kind == "floor":
                return bb.sub(q, bb.zext(wrong, t))
            return bb.add(r, bb.select(wrong, b, zero))
        is_zero = bb.icmp_signed("==", b, zero)
        if not signed:
            safe = bb.select(is_zero, one, b)
            q = bb.urem(a, safe) if kind == "mod" else bb.udiv(a, safe)
            return bb.select(is_zero, zero, q)
        minus_one = bb.icmp_signed("==", b, _const(t, -1))
        safe = bb.select(bb.or_(is_zero, minus_one), one, b)  # no idiv by 0 or -1
        if kind == "trunc":
            q = bb.sdiv(a, safe)
            return bb.select(minus_one, bb.sub(zero, a), bb.select(is_zero, zero, q))
        r = bb.srem(a, safe)
        wrong = bb.and_(bb.icmp_signed("!=", r, zero),
                        bb.icmp_signed("<", bb.xor(r, b), zero))
        if kind == "floor":
            q = bb.sub(bb.sdiv(a, safe), bb.zext(wrong, t))
            return bb.select(minus_one, bb.sub(zero, a), bb.select(is_zero, zero, q))
        m = bb.add(r, bb.select(wrong, b, zero))
        return bb.select(is_zero, zero, m)  # b == -1: r == 0 already

    return emit


def _int_pow(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value, bexpr: Expr) -> ir.Value:
    t = _scalar_type(d)
    fn = f.m.ipow(t, d.kind == "int")  # type: ignore[arg-type]
    return f.scalarize(lambda x, y: f.b.call(fn, [x, y]), [a, b], t)


def _int_minmax(sym: str) -> IntBinaryEmitter:
    def emit(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value, bexpr: Expr) -> ir.Value:
        cmp = f.b.icmp_signed if d.kind == "int" else f.b.icmp_unsigned
        return f.b.select(cmp(sym, a, b), a, b)

    return emit


_INT_BINARY_EMITTERS: dict[Op, IntBinaryEmitter] = {
    Op.DIV: _int_division("trunc"),
    Op.FLOORDIV: _int_division("floor"),
    Op.FLOORMOD: _int_division("mod"),
    Op.POW: _int_pow,
    Op.MAX: _int_minmax(">"),
    Op.MIN: _int_minmax("<"),
}


def _f_pow(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
    return f.float_intrinsic(tables.FLOAT_BINARY_INTRINSICS[Op.POW], a, b)


def _f_floordiv(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
    # numpy.floor_divide (Python's float //), not floor(a / b), which rounds the quotient
    # first (-511 // 13.1 in float16 is -40, floor(-39.0) -39): q = (a - fmod(a, b)) / b,
    # minus one when the remainder's sign differs from b's, snapped to the nearest integer;
    # a zero q takes the sign of a / b; b == 0 gives a / b (inf or nan)
    bb, fm = f.b, f.m.fm
    zero, one, half = (_const(a.type, v) for v in (0.0, 1.0, 0.5))
    mod = f.fmod(a, b, d)
    div = bb.fdiv(bb.fsub(a, mod, flags=fm), b, flags=fm)
    flip = bb.and_(bb.fcmp_unordered("!=", mod, zero, flags=fm),
                   bb.xor(bb.fcmp_ordered("<", b, zero, flags=fm),
                          bb.fcmp_ordered("<", mod, zero, flags=fm)))
    div = bb.select(flip, bb.fsub(div, one, flags=fm), div)
    floor = f.float_intrinsic("llvm.floor", div)
    up = bb.fcmp_ordered(">", bb.fsub(div, floor, flags=fm), half, flags=fm)
    snapped = bb.select(up, bb.fadd(floor, one, flags=fm), floor)
    quotient = bb.fdiv(a, b, flags=fm)
    signed_zero = f.float_intrinsic("llvm.copysign", zero, quotient)
    out = bb.select(bb.fcmp_unordered("!=", div, zero, flags=fm), snapped, signed_zero)
    return bb.select(bb.fcmp_ordered("==", b, zero, flags=fm), quotient, out)


def _f_floormod(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
    # numpy.mod: r = fmod(a, b); r != 0 and sign(r) != sign(b) -> r + b; r == 0 -> copysign(0, b)
    bb, fm = f.b, f.m.fm
    zero = _const(a.type, 0.0)
    r = f.fmod(a, b, d)
    wrong = bb.and_(bb.fcmp_ordered("!=", r, zero, flags=fm),
                    bb.xor(bb.fcmp_ordered("<", b, zero, flags=fm),
                           bb.fcmp_ordered("<", r, zero, flags=fm)))
    fixed = bb.select(wrong, bb.fadd(r, b, flags=fm), r)
    signed_zero = f.float_intrinsic("llvm.copysign", zero, b)
    return bb.select(bb.fcmp_ordered("==", r, zero, flags=fm), signed_zero, fixed)


def _f_minmax(sym: str) -> FloatBinaryEmitter:
    # np.maximum: a > b or isnan(a) ? a : b (NaN propagates; max(0.0, -0.0) is -0.0)
    def emit(f: _FunctionEmitter, d: DType, a: ir.Value, b: ir.Value) -> ir.Value:
        bb, fm = f.b, f.m.fm
        take_a = bb.or_(bb.fcmp_ordered(sym, a, b, flags=fm),
                        bb.fcmp_unordered("uno", a, a, flags=fm))
        return bb.select(take_a, a, b)

    return emit


_FLOAT_BINARY_EMITTERS: dict[Op, FloatBinaryEmitter] = {
    Op.POW: _f_pow,
    Op.FLOORDIV: _f_floordiv,
    Op.FLOORMOD: _f_floormod,
    Op.MAX: _f_minmax(">"),
    Op.MIN: _f_minmax("<"),
}


def covered_ops() -> dict[str, frozenset[Op]]:
    """Which ops each emitter table handles (for the every-op coverage test)."""
    return {
        "unary": frozenset(_UNARY_EMITTERS),
        "float binary": frozenset(tables.FLOAT_BINARY) | frozenset(_FLOAT_BINARY_EMITTERS)
        | frozenset(tables.LOGICAL),
        "int binary": frozenset(tables.INT_BINARY) | frozenset(_INT_BINARY_EMITTERS)
        | frozenset(tables.LOGICAL),
        "compare": frozenset(tables.FCMP) & frozenset(tables.ICMP),
        "legalized": tables.LEGALIZED,
    }


# --------------------------------------------------------------------------------------
# Driver
# --------------------------------------------------------------------------------------

def emit_llvm(func: LoweredFunc, options: CodegenOptions | None = None,
              host: HostTarget | None = None) -> tuple[str, list[str], bool]:
    """LLVM IR text (unoptimized) for a legalized ``func``, for ``host`` (default: this
    machine's CPU); also the vectorization notes and whether the code writes its error
    record."""
    m = _emit_module(func, options, host)
    return str(m.ir), m.notes, m.errors


def _emit_module(func: LoweredFunc, options: CodegenOptions | None = None,
                 host: HostTarget | None = None) -> _ModuleEmitter:
    """The module emitter after emitting ``func`` (its IR, notes, error record, checks)."""
    options = options or CodegenOptions()
    host = host or host_target()
    symbol = symbol_name(func.name)
    module = ir.Module(name=symbol)
    module.triple = host.triple
    module.data_layout = host.data_layout
    m = _ModuleEmitter(func, options, module, max(4, 2 * host.vector_bits // 32))
    arg_types = [(_PTR if isinstance(p, BufferParam) else _abi_ir_type(p.var.dtype))
                 for p in func.params]
    fn = ir.Function(m.ir, ir.FunctionType(_VOID, [*arg_types, _PTR]), symbol)
    fn.attributes.add("nounwind")
    f = _FunctionEmitter(m, fn, in_parallel=False)
    bind_params(f, fn, func.params)
    record = fn.args[-1]
    record.name = ERRORS.name
    record.add_attribute("noalias")
    record.add_attribute("captures(none)")
    f.bufs[ERRORS] = record
    f.outline_nests = _loop_nests(func.body) > OUTLINE_MIN_NESTS
    f.stmt(func.body)
    f.finish()
    return m


# a function with more loop nests than this emits each as a function of its own
OUTLINE_MIN_NESTS = 64


def _loop_nests(body: Stmt) -> int:
    """How many loop nests ``body`` runs in sequence (loops in a ``Seq``, plus one for a
    body that is a loop)."""
    n = 1 if isinstance(body, For) else 0
    for st in walk_stmts(body):
        if isinstance(st, Seq):
            n += sum(1 for c in st.body if isinstance(c, For))
    return n


def bind_params(f: _FunctionEmitter, fn: ir.Function, params: Sequence[Param]) -> None:
    """Name ``fn``'s arguments after ``params`` and make them the emitter's buffers and
    variables (buffers are ``noalias``; bool scalars arrive as i8, float16 as i16 bits)."""
    for arg, p in zip(fn.args, params):
        arg.name = _local(p.name)
        if isinstance(p, BufferParam):
            arg.add_attribute("noalias")
            arg.add_attribute("captures(none)")
            f.bufs[p.buffer] = arg
        elif isinstance(p, ScalarParam):
            d = p.var.dtype
            v: ir.Value = arg
            if d.is_bool:
                v = f.b.icmp_unsigned("!=", arg, ir.Constant(_I8, 0), name=_local(p.name))
            elif d.name == "float16":
                v = f.b.bitcast(arg, ir.HalfType(), name=_local(p.name))
            f.vars[p.var] = v


def optimize(text: str, host: HostTarget | None = None,
             context: llvm.ContextRef | None = None) -> llvm.ModuleRef:
    """Parse (into ``context``, default LLVM's global one), verify and optimize (O3 for the
    host) LLVM IR text."""
    host = host or host_target()
    with LLVM_LOCK:
        try:
            mod = llvm.parse_assembly(text, context=context)
            mod.verify()
        except RuntimeError as err:
            raise InternalError(f"generated LLVM IR does not verify: {err}", text) from None
        pto = llvm.create_pipeline_tuning_options(speed_level=3)
        pto.loop_vectorization = True
        pto.slp_vectorization = True
        pto.loop_unrolling = True
        run_default_pipeline(mod, host.target_machine(), pto)
        return mod


def run_default_pipeline(mod: llvm.ModuleRef, tm: llvm.TargetMachine,
                         pto: llvm.PipelineTuningOptions) -> None:
    """Run LLVM's default per-module pipeline (``pto``'s speed level) on ``mod``, then free
    the pipeline.

    llvmlite (0.44 to 0.50 at least) never frees a ``ModulePassManager``: the no-op
    ``ObjectRef._dispose`` comes before ``NewPassManager._dispose`` in its MRO, so every
    optimization leaked its O3 pipeline (73 KB after a small kernel, 400 KB after a dense
    gradient, for good). It is disposed here explicitly; ``detach`` keeps ``__del__`` (and
    a future llvmlite that fixes the MRO) from freeing it twice. A fresh ``PassBuilder``
    per run: a reused one collects instrumentation callbacks from every run, each later
    run slower (each builder still leaks its callbacks object, about 1.5 KB).
    """
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        NewPassManager._dispose(mpm)
        mpm.detach()


def compile_llvm(func: LoweredFunc, options: CodegenOptions | None = None) -> CompiledModule:
    """Emit, verify and optimize ``func`` (already legalized) for the host CPU.

    Parameters
    ----------
    func : LoweredFunc
        The loop nest; run ``tex.lower.legalize.legalize`` on it first.
    options : CodegenOptions
        fastmath, the OpenMP thread count and whether OpenMP may be used.

    Returns
    -------
    CompiledModule

    Raises
    ------
    ValueError
        For loops bound to GPU threads.
    """
    options = options or CodegenOptions()
    m = _emit_module(func, options)
    text, notes, errors, checks = str(m.ir), m.notes, m.errors, tuple(m.checks)
    debug.dump("llvm", text)
    # a context per module: the global one would keep every module's uniqued constants and
    # metadata for good (10 to 15 KB per kernel)
    context = llvm.create_context()
    mod = optimize(text, context=context)
    opt_text = str(mod)
    debug.dump("llvm.opt", opt_text)
    symbol = symbol_name(func.name)
    compiled = CompiledModule(symbol, text, opt_text, mod, errors, tuple(notes), checks,
                              context=context)
    if debug.should_dump("asm"):
        debug.dump("asm", compiled.asm)
    return compiled
