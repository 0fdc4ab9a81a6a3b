"""The function emitter: loop IR statements and expressions -> LLVM IR in one function.

``FunctionEmitter`` emits scalar code; ``tex.codegen.vector`` adds vectorized loops,
``tex.codegen.parallel`` outlined ones (the CPU backend uses both), and
``tex.codegen.ptx`` GPU kernels. Numba style: allocas in the entry block, mem2reg/SROA
promote them; a loop is a context manager yielding its index.

- ``For`` SERIAL: a counted loop. UNROLLED (constant extent up to ``MAX_UNROLL``): the
  body ``extent`` times, the variable replaced by constants. THREAD: ``ValueError``
  (GPU only).
- ``Allocate``: up to ``MAX_STACK_BYTES``, an ``alloca`` in the entry block of the current
  function (per thread inside a parallel loop); larger, the runtime's allocator around
  the body (``WORKSPACE_ALLOC``/``WORKSPACE_FREE``: ``malloc``, keeping freed blocks for the
  next call). When it returns NULL the function sets the first word of its error record
  to 1 and returns at once (the runtime raises ``MemoryError``).
- Expressions: a ``Select`` (or ``&&``/``||``) whose lazily evaluated side is a *hazard*
  (reads memory that may be out of bounds, or divides integers by a non-constant:
  ``ModuleEmitter.hazard``) is compiled as a branch (a phi joins the sides); others become
  ``select``. Ops are looked up in ``tables.py`` (one instruction) and ``ops.py`` (more).
  Fast-math flags only with ``fastmath=True``.

The statement emitters are ``Nested`` generators (``tex.lower.stmt.run_nested``): a loop
nest as deep as a chain of compute_at stages needs no Python recursion. Scopes (a let's
variable, a buffer, one side of a branch, and in ``vector.py`` the vector state and lane
masks) are context managers: what a scope sets up, its end undoes, never by hand.
"""
from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Sequence

import llvmlite.ir as ir

from ..debug import InternalError
from ..dtype import DType, float32
from ..ir.expr import Binary, Cast, Compare, Const, Expr, Op, Select, TensorRead, Unary, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order
from ..lower.bounds_check import BoundsReportOp, is_report, wide_index
from ..lower.stmt import (
    Allocate,
    BufferParam,
    ExternCall,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Nested,
    Param,
    ScalarParam,
    Seq,
    Stmt,
    Store,
    each_nested,
    run_nested,
    stmt_children,
    stored_buffers,
    walk_stmts,
)
from . import ops, tables
from .builder import FoldingBuilder
from .irtypes import (
    I8,
    I32,
    I64,
    PTR,
    VOID,
    Splat,
    constant,
    element_type,
    lanes_of,
    local_name,
    scalar_type,
    storage_type,
    store_atomic,
    undef,
    with_lanes,
)
from .module import (
    ERRORS,
    EXTERN_FAILED,
    EXTERN_SLOT,
    MAX_STACK_BYTES,
    WORKSPACE_ALLOC,
    WORKSPACE_FREE,
    ModuleEmitter,
    lazy_parts,
)

__all__ = ["Callee", "FunctionEmitter", "MAX_UNROLL", "SMALL_NEST_TRIPS", "llvm_unrolls",
           "scheduled_nest"]

MAX_UNROLL = 4096  # UNROLLED loops longer than this stay loops

_SCHEDULED_KINDS = (ForKind.PARALLEL, ForKind.VECTORIZED, ForKind.UNROLLED)


def scheduled_nest(nest: For) -> bool:
    """Whether the schedule shaped the loop nest ``nest``: some loop of it is parallel,
    vectorized or unrolled. LLVM leaves the loops of such a nest that hold longer loops as
    they are (no unrolling or vectorization of its own: the schedule decided; unrolled
    outer loops multiplied the code, and LLVM's unroller took 40% of a model gradient's
    compile time for no speed), and may unroll its innermost and small loops (a GEMM's k
    loop, a 3 x 3 window: that still pays; ``llvm_unrolls``); a plain nest (every loop
    serial) is LLVM's to unroll and vectorize, as at O3."""
    return any(isinstance(s, For) and s.kind in _SCHEDULED_KINDS for s in walk_stmts(nest))


# a loop whose sub-nest of loops runs at most this many iterations in all (a 2 x 2 pooling
# window, 3 x 3 convolution taps) stays LLVM's to unroll whole, as it would at O3
SMALL_NEST_TRIPS = 16


def llvm_unrolls(loop: For) -> bool:
    """Whether LLVM may unroll ``loop`` in a nest the schedule shaped (and vectorize it, in
    any nest: ``FunctionEmitter.counted``): an innermost loop (no serial or parallel loop
    inside: vectorized loops become vector code, unrolled ones copies), or one whose loops,
    with it, run at most ``SMALL_NEST_TRIPS`` iterations on every path (constant extents).
    Unrolling a loop around longer loops multiplied the code and bought no speed (see
    ``scheduled_nest``)."""
    def trips(st: Stmt) -> Nested[int | None]:
        # the most iterations of the serial/parallel loops on a path down from ``st``
        # (None: a variable extent)
        counts = yield from each_nested(trips, stmt_children(st))
        inner = 1
        for c in counts:
            if c is None:
                return None
            inner = max(inner, c)
        if isinstance(st, For) and st.kind in (ForKind.SERIAL, ForKind.PARALLEL):
            if not isinstance(st.extent, Const):
                return None
            return int(st.extent.value) * inner
        return inner

    inside = run_nested(trips(loop.body))
    if inside == 1:
        return True  # innermost
    return inside is not None and isinstance(loop.extent, Const) and \
        int(loop.extent.value) * inside <= SMALL_NEST_TRIPS


class Callee:
    """A function pointer as llvmlite's ``call`` takes a callee: with its function type
    (opaque pointers carry none)."""

    def __init__(self, ptr: ir.Value, function_type: ir.FunctionType) -> None:
        self.ptr = ptr
        self.type = ptr.type
        self.function_type = function_type

    def get_reference(self) -> str:
        return self.ptr.get_reference()  # type: ignore[no-any-return]


class FunctionEmitter:
    """Emits statements and expressions into one LLVM function (scalar code; subclasses
    add vector, parallel and GPU code)."""

    # loops carry ``llvm.loop`` hints (``counted``); GPU kernels keep LLVM's defaults
    LOOP_HINTS = True
    # int32 loops count in i64 and addresses are computed in i64 from those counters
    # (``address``): sign extensions between a loop counter and an address cost LLVM's
    # IndVarSimplify and instruction selection most of their time (a convolution
    # gradient's body: 0.150 s of optimization in i32, 0.040 s in i64). The exact values
    # equal the int32 ones wherever those do not wrap, and a wrapping index is out of
    # bounds: ``tex.lower.bounds_check`` proves or checks indices in exact arithmetic.
    # GPU kernels keep 32-bit index arithmetic (64-bit multiplies are slow there).
    WIDE_INDEX = True

    def __init__(self, mod: ModuleEmitter, fn: ir.Function, in_parallel: bool) -> None:
        self.m = mod
        self.fn = fn
        self.entry = fn.append_basic_block("entry")
        self.start = fn.append_basic_block("start")
        self.b: ir.IRBuilder = FoldingBuilder(self.start)  # constants folded as built
        self.in_parallel = in_parallel
        self.vars: dict[Var, ir.Value] = {}
        # the i64 values of the int32 loop variables in scope (``WIDE_INDEX``)
        self.wide: dict[Var, ir.Value] = {}
        self.bufs: dict[Tensor, ir.Value] = {}
        # values emitted that dominate the builder (``forget`` all when it leaves their
        # block); ``deps``: the variables each depends on (``forget_var`` when one is bound
        # anew); ``impure``: those that read memory, with the buffers they read
        # (``forget_loads`` at a store to one of them: buffers never overlap, as their
        # ``noalias`` pointers say, so a store leaves the reads of the others valid)
        self.memo: dict[Expr, ir.Value] = {}
        self.deps: dict[Expr, frozenset[Var]] = {}
        self.impure: dict[Expr, frozenset[Tensor]] = {}
        # values derived from emitted instructions (splats, widenings, lane 0), under the
        # memo's dominance rules: (what, id of the source, detail) -> (source, value)
        self.derived: dict[tuple[str, int, object], tuple[ir.Value, ir.Value]] = {}
        # whether the loops being emitted belong to a nest the schedule shaped (LLVM then
        # unrolls only its innermost and small loops: ``scheduled_nest``); None
        # outside any nest
        self.scheduled: bool | None = True if in_parallel else None
        # the heap buffers live where the builder is (freed on an early return)
        self.heap: list[tuple[ir.Value, ir.Constant]] = []

    def bind_params(self, params: Sequence[Param]) -> None:
        """Name the function's arguments after ``params`` and make them its buffers and
        variables (buffers are ``noalias``; bool scalars arrive as i8, float16 as i16
        bits)."""
        for arg, p in zip(self.fn.args, params):
            arg.name = local_name(p.name)
            if isinstance(p, BufferParam):
                arg.add_attribute("noalias")
                arg.add_attribute("captures(none)")
                self.bufs[p.buffer] = arg
            elif isinstance(p, ScalarParam):
                d = p.var.dtype
                v: ir.Value = arg
                if d.is_bool:
                    v = self.b.icmp_unsigned("!=", arg, ir.Constant(I8, 0),
                                             name=local_name(p.name))
                elif d.name == "float16":
                    v = self.b.bitcast(arg, ir.HalfType(), name=local_name(p.name))
                self.vars[p.var] = v

    def finish(self) -> None:
        """Close the function (the entry block's allocas then run before ``start``)."""
        if not self.b.block.is_terminated:
            self.b.ret_void()
        ir.IRBuilder(self.entry).branch(self.start)

    # -- small helpers ------------------------------------------------------------------
    def alloca(self, t: ir.Type, name: str, count: int | None = None,
               align: int | None = None) -> ir.AllocaInstr:
        """An alloca in the entry block (promoted by mem2reg or reused per iteration)."""
        with self.b.goto_block(self.entry):
            size = None if count is None else ir.Constant(I64, count)
            a = self.b.alloca(t, size=size, name=local_name(name))
        a.type = PTR  # llvmlite types allocas as typed pointers; LLVM wants opaque ones
        if align:
            a.align = align
        return a

    def derive(self, what: str, v: ir.Value, detail: object,
               make: Callable[[], ir.Value]) -> ir.Value:
        """``make()``, a value computed from the instruction or argument ``v``, emitted
        once while ``v`` dominates the builder (a constant's is made each time: it has no
        lasting identity)."""
        if not isinstance(v, (ir.Instruction, ir.Argument)):
            return make()
        key = (what, id(v), detail)
        hit = self.derived.get(key)
        if hit is not None and hit[0] is v:
            return hit[1]
        out = make()
        self.derived[key] = (v, out)
        return out

    def splat(self, v: ir.Value, lanes: int) -> ir.Value:
        """``v`` broadcast to ``lanes`` lanes (unchanged if it has them, or for 0)."""
        if lanes_of(v) == lanes or lanes == 0:
            return v
        if isinstance(v, ir.Constant):
            return Splat(ir.VectorType(v.type, lanes), [v] * lanes)

        def make() -> ir.Value:
            vt = ir.VectorType(v.type, lanes)
            one = self.b.insert_element(undef(vt), v, ir.Constant(I32, 0))
            return self.b.shuffle_vector(one, undef(vt),
                                         constant(ir.VectorType(I32, lanes), 0))
        return self.derive("splat", v, lanes, make)

    def unify(self, *vals: ir.Value) -> list[ir.Value]:
        """Broadcast scalars next to vectors."""
        n = max(lanes_of(v) for v in vals)
        return [self.splat(v, n) for v in vals] if n else list(vals)

    def to_i64(self, v: ir.Value, d: DType) -> ir.Value:
        """An integer value of dtype ``d`` widened to i64 (lane by lane)."""
        t = element_type(v.type)
        if t == I64:
            return v
        target = with_lanes(I64, lanes_of(v))
        return self.derive("i64", v, d.kind, lambda: self.b.sext(v, target) if d.kind == "int"
                           else self.b.zext(v, target))

    def resize_int(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """An integer value converted to another integer dtype."""
        if src.bits == dst.bits:
            return v
        t = with_lanes(scalar_type(dst), lanes_of(v))
        if dst.bits < src.bits:
            return self.b.trunc(v, t)
        return self.b.sext(v, t) if src.kind == "int" else self.b.zext(v, t)

    def not_(self, v: ir.Value) -> ir.Value:
        """Logical not of a bool (or bool vector)."""
        return self.b.xor(v, constant(v.type, 1))

    def call_float(self, fn: ir.Function, args: Sequence[ir.Value], name: str = "") -> ir.Value:
        """A call of a float function, with the fast-math flags of the options."""
        return self.b.call(fn, list(args), name=name, fastmath=self.m.fm)

    def scalarize(self, f: Callable[..., ir.Value], args: Sequence[ir.Value],
                  rtype: ir.Type) -> ir.Value:
        """Apply a scalar function lane by lane to vector arguments."""
        n = max(lanes_of(a) for a in args)
        if n == 0:
            return f(*args)
        args = self.unify(*args)
        out: ir.Value = undef(ir.VectorType(rtype, n))
        for k in range(n):
            lane = ir.Constant(I32, k)
            r = f(*(self.b.extract_element(a, lane) for a in args))
            out = self.b.insert_element(out, r, lane)
        return out

    def buffer(self, t: Tensor) -> ir.Value:
        """The pointer to the first element of buffer ``t``."""
        ptr = self.bufs.get(t)
        if ptr is None:
            raise InternalError(f"buffer '{t.name}' is neither a parameter nor allocated "
                                "by an enclosing Allocate", self.m.func)
        return ptr

    def forget(self) -> None:
        """Empty the memo: the builder left the block its values dominate (or a buffer
        they may read is bound anew)."""
        self.memo.clear()
        self.deps.clear()
        self.impure.clear()
        self.derived.clear()

    def forget_var(self, v: Var) -> None:
        """Drop the memo's values that depend on ``v``: it is bound anew (the next copy
        of an unrolled body, a let, a loop). The others stay: index arithmetic of outer
        loops is emitted once for all the copies."""
        for e in [e for e, d in self.deps.items() if v in d]:
            del self.memo[e], self.deps[e]
            self.impure.pop(e, None)

    def forget_loads(self, buf: Tensor | None = None) -> None:
        """Drop the memo's values that read ``buf`` (default: any memory): a store to it
        may have changed them."""
        gone = list(self.impure) if buf is None else \
            [e for e, bufs in self.impure.items() if buf in bufs]
        for e in gone:
            del self.memo[e], self.impure[e]
            self.deps.pop(e, None)

    def forget_stored(self, body: Stmt) -> None:
        """Before a loop running ``body`` more than once: forget the memoized reads of the
        buffers ``body`` stores to (from the second iteration on, a read made before the
        loop is stale; the stores inside forget only what follows them)."""
        if self.impure:
            for buf in stored_buffers(body):
                self.forget_loads(buf)

    @contextlib.contextmanager
    def side(self) -> Iterator[None]:
        """One side of a branch: on exit the memo forgets what was emitted inside (it does
        not dominate what follows). The memo is restored in place: ``value`` holds it."""
        tables = (self.memo, self.deps, self.impure, self.derived)
        saved = tuple(t.copy() for t in tables)
        try:
            yield
        finally:
            for now, before in zip(tables, saved):
                now.clear()
                now.update(before)  # type: ignore[attr-defined]

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
                kids = self.operands(node)
                memo[node] = self.emit(node, [memo[k] for k in kids])
                self.record(node, kids)
                continue
            if self.m.is_lazy(node):
                pre = [] if state == 2 else [k for k in self.before_branches(node)
                                             if k not in memo]
                if pre:
                    stack.append((node, 2))
                    stack.extend((k, 0) for k in reversed(pre))
                else:
                    memo[node] = self.lazy(node)
                    # (its sides may read memory; it depends on every variable they use)
                    inner = list(post_order(node))
                    self.impure[node] = frozenset(n.tensor for n in inner
                                                  if isinstance(n, TensorRead))
                    self.deps[node] = frozenset(n for n in inner if isinstance(n, Var))
                continue
            kids = self.operands(node)
            if not kids:
                memo[node] = self.leaf(node)
                self.record(node, kids)
                continue
            stack.append((node, 1))
            stack.extend((k, 0) for k in reversed(kids) if k not in memo)
        return memo[root]

    def operands(self, node: Expr) -> Sequence[Expr]:
        """What ``node`` is emitted from: its children, but a read's index computed in i64
        (``address``; vector code reads some memory through the index of the first lane:
        ``VectorEmitter.operands``)."""
        if isinstance(node, TensorRead) and self.WIDE_INDEX and not is_report(node.tensor):
            return (self.address(node.indices[0]),)
        return node.children()

    def address(self, index: Expr) -> Expr:
        """``index`` computed in int64 (``WIDE_INDEX``; int32 loop variables read as their
        i64 counters)."""
        if not self.WIDE_INDEX:
            return index
        wide = self.m.wide_indices.get(index)
        if wide is None:
            wide = self.m.wide_indices[index] = wide_index(index, folded=False)[0]
        return wide

    def index_value(self, buf: Tensor, index: Expr) -> ir.Value:
        """The emitted index of a store to ``buf`` at ``index``."""
        return self.value(self.address(index))

    def record(self, node: Expr, kids: Sequence[Expr]) -> None:
        """What the memo keeps of ``node`` (emitted from ``kids``): the variables it
        depends on, whether it reads memory."""
        deps = self.deps
        if isinstance(node, Var):
            deps[node] = frozenset((node,))
        else:
            d: frozenset[Var] | None = None
            for k in kids:  # (one child's set is shared, not copied: most nodes have one)
                dk = deps.get(k)
                if dk is not None and dk is not d:
                    d = dk if d is None or d <= dk else d if dk <= d else d | dk
            if d:
                deps[node] = d
        impure = self.impure
        read: frozenset[Tensor] | None = frozenset((node.tensor,)) \
            if isinstance(node, TensorRead) else None
        for k in kids:  # (shared like the dependency sets)
            rk = impure.get(k)
            if rk is not None and rk is not read:
                read = rk if read is None or read <= rk else read if rk <= read else read | rk
        if read is not None:
            impure[node] = read

    def before_branches(self, e: Expr) -> list[Expr]:
        """What a lazy ``e`` evaluates before branching: its condition, the sub-expressions
        both sides use that are safe to evaluate unguarded (``ModuleEmitter.safe``), and
        those both sides evaluate unconditionally, safe or not (they run whichever side is
        taken, so running them first changes nothing: a checked read reports as before).
        Emitted once there, a value shared by the two sides of nested selects is not
        emitted again per side (which doubled the code per level of nesting)."""
        cond, a, b = lazy_parts(e)
        shared = self._frontier(b)
        first = [cond, *(n for n in self._frontier(a) if n in shared)]
        always, taken = self._unconditional(b), set(first)
        return first + [n for n in self._unconditional(a) if n in always and n not in taken]

    def _unconditional(self, root: Expr) -> dict[Expr, None]:
        """What evaluating ``root`` always evaluates: all but the sides of lazy nodes."""
        found: dict[Expr, None] = {}
        stack = [root]
        while stack:
            n = stack.pop()
            if n in found or n in self.memo or not n.children():
                continue
            found[n] = None
            stack.extend([lazy_parts(n)[0]] if self.m.is_lazy(n) else self.operands(n))
        return found

    def _frontier(self, root: Expr) -> dict[Expr, None]:
        """The outermost sub-expressions of ``root`` that are safe to evaluate unguarded."""
        found: dict[Expr, None] = {}
        seen: set[Expr] = set()
        stack = [root]
        while stack:
            n = stack.pop()
            if n in seen or n in self.memo or not n.children():
                continue
            seen.add(n)
            if self.m.safe(n):
                found[n] = None
            elif not self.m.is_lazy(n):  # a nested lazy node guards its own operands
                stack.extend(self.operands(n))
        return found

    def leaf(self, e: Expr) -> ir.Value:
        """A constant or a bound variable."""
        if isinstance(e, Const):
            return ir.Constant(scalar_type(e.dtype), e.value)
        if isinstance(e, Var):
            v = self.vars.get(e)
            if v is None:
                raise InternalError(f"variable '{e.name}' is used outside its scope",
                                    self.m.func)
            return v
        raise InternalError(f"unexpected leaf {e!r}")

    def lazy(self, e: Expr) -> ir.Value:
        """cond ? a : b evaluating only the side taken."""
        cond, a, b = lazy_parts(e)
        return self.choose(self.value(cond), a, b)

    def choose(self, c: ir.Value, a: Expr, b: Expr) -> ir.Value:
        """``c ? a : b`` for the emitted scalar condition ``c``: a branch per side, a phi
        joins them (a side that is a vector makes both vectors)."""
        bb = self.b
        then_bb = bb.append_basic_block("select.true")
        else_bb = bb.append_basic_block("select.false")
        join_bb = bb.append_basic_block("select.end")
        bb.cbranch(c, then_bb, else_bb)
        with self.side():
            bb.position_at_end(then_bb)
            va = self.value(a)
            then_end = bb.block
        with self.side():
            bb.position_at_end(else_bb)
            vb = self.value(b)
            else_end = bb.block
        n = max(lanes_of(va), lanes_of(vb))
        if n:  # (each splat in its side's block: not for the memo of what follows)
            with bb.goto_block(then_end), self.side():
                va = self.splat(va, n)
            with bb.goto_block(else_end), self.side():
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
        """The value of ``e`` from its children's values ``args``."""
        match e:
            case TensorRead() if is_report(e.tensor):
                return self.report(e, args[0])
            case TensorRead():
                return self.load(e.tensor, e.indices[0], args[0])
            case Cast() if e.a in self.wide and e.dtype.bits == 64 and e.dtype.kind == "int":
                return self.wide[e.a]  # (an int32 loop variable in an address)
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

    def unary(self, e: Unary, x: ir.Value) -> ir.Value:
        """``op(x)`` through the per-op table (``ops.UNARY``)."""
        emitter = ops.UNARY.get(e.op)
        if emitter is None:
            raise InternalError(f"op '{e.op.value}' reached the LLVM backend; "
                                "tex.lower.legalize should have rewritten it", self.m.func)
        return emitter(self, e.dtype, x)

    def fmod(self, a: ir.Value, b: ir.Value, d: DType) -> ir.Value:
        """C's fmod (the remainder with the sign of ``a``)."""
        return self.b.frem(a, b, flags=self.m.fm)

    def float_intrinsic(self, name: str, x: ir.Value, *more: ir.Value) -> ir.Value:
        """A call of the float intrinsic ``name`` overloaded on ``x``'s type."""
        fn = self.m.intrinsic(name, x.type, [x.type] * (1 + len(more)), [x.type])
        return self.call_float(fn, [x, *more])

    def libm(self, op: Op, d: DType, x: ir.Value) -> ir.Value:
        """``op(x)`` by a C library call per lane (float16 through float32)."""
        names = tables.LIBM_CALLS[op]
        if d.bits not in names:  # float16: through float32
            wide = self.b.fpext(x, with_lanes(ir.FloatType(), lanes_of(x)))
            return self.b.fptrunc(self.libm(op, float32, wide), x.type)
        t = scalar_type(d)
        fn = self.m.declare(names[d.bits], t, [t])
        return self.scalarize(lambda v: self.call_float(fn, [v]), [x], t)

    def binary(self, e: Binary, a: ir.Value, b: ir.Value) -> ir.Value:
        """``a op b``: one instruction (``tables``) or a per-op emitter (``ops``)."""
        a, b = self.unify(a, b)
        d = e.a.dtype
        if e.op in tables.LOGICAL:
            return getattr(self.b, tables.LOGICAL[e.op])(a, b)
        if d.is_float:
            name = tables.FLOAT_BINARY.get(e.op)
            if name is not None:
                flags = self.m.fm_arith if e.op in (Op.ADD, Op.SUB, Op.MUL) else self.m.fm
                return getattr(self.b, name)(a, b, flags=flags)
            return ops.FLOAT_BINARY[e.op](self, d, a, b)
        name = tables.INT_BINARY.get(e.op)
        if name is not None:
            return getattr(self.b, name)(a, b)
        return ops.INT_BINARY[e.op](self, d, a, b, e.b)

    def compare(self, e: Compare, a: ir.Value, b: ir.Value) -> ir.Value:
        """``a op b`` on floats (ordered but ``!=``) or integers (by signedness)."""
        a, b = self.unify(a, b)
        d = e.a.dtype
        if d.is_float:
            method, sym = tables.FCMP[e.op]
            return getattr(self.b, method)(sym, a, b, flags=self.m.fm)
        sym = tables.ICMP[e.op]
        if d.kind == "int":
            return self.b.icmp_signed(sym, a, b)
        return self.b.icmp_unsigned(sym, a, b)

    def cast(self, v: ir.Value, src: DType, dst: DType) -> ir.Value:
        """``v`` converted from ``src`` to ``dst`` as NumPy's ``astype`` (bool: != 0)."""
        if src is dst:
            return v
        b, n = self.b, lanes_of(v)
        t = with_lanes(scalar_type(dst), n)
        if dst.is_bool:  # x != 0 (NaN != 0 is true)
            if src.is_float:
                return b.fcmp_unordered("!=", v, constant(v.type, 0.0))
            return b.icmp_unsigned("!=", v, constant(v.type, 0))
        if src.is_bool:
            return b.uitofp(v, t) if dst.is_float else b.zext(v, t)
        if src.is_float and dst.is_float:
            return b.fpext(v, t) if dst.bits > src.bits else b.fptrunc(v, t)
        if src.is_float:  # truncation toward zero; narrow ints through i32 as C does
            if dst.bits < 32:
                return b.trunc(b.fptosi(v, with_lanes(I32, n)), t)
            return b.fptosi(v, t)
        if dst.is_float:
            return b.sitofp(v, t) if src.kind == "int" else b.uitofp(v, t)
        return self.resize_int(v, src, dst)

    # -- memory ------------------------------------------------------------------------
    def access(self, buf: Tensor, index: Expr, ix: ir.Value,
               vector_value: bool = False, load: bool = False) -> tuple[str, ir.Value]:
        """How to reach ``buf[ix]``: ``("scalar", its i64 index)`` (vector code adds other
        ways; ``vector_value``: a vector is stored, ``load``: for a load)."""
        return "scalar", self.to_i64(ix, index.dtype)

    def element_ptr(self, base: ir.Value, st: ir.Type, i64: ir.Value, name: str) -> ir.Value:
        """``&base[i64]``; a vector of pointers for a vector of indices."""
        p = self.b.gep(base, [i64], inbounds=True, source_etype=st, name=local_name(name))
        if lanes_of(i64):
            p.type = ir.VectorType(PTR, lanes_of(i64))  # llvmlite types it as a scalar ptr
        return p

    def report(self, e: TensorRead, ix: ir.Value) -> ir.Value:
        """A failed bounds check (the read of a report tensor): record (check, index) in
        the error record; the value read is 0."""
        op = e.tensor.op
        assert isinstance(op, BoundsReportOp)
        d = e.tensor.dtype
        zero = ir.Constant(scalar_type(d), 0.0 if d.is_float else 0)
        fn = self.m.report_fn()
        check = self.m.check_number(op)
        i64 = self.to_i64(ix, e.indices[0].dtype)
        return self.call_report(fn, check, i64, zero)

    def call_report(self, fn: ir.Function, check: ir.Constant, i64: ir.Value,
                    zero: ir.Constant) -> ir.Value:
        """Call the report function ``fn`` for check ``check`` at index ``i64``; ``zero``
        is what the read gives."""
        self.b.call(fn, [self.bufs[ERRORS], check, i64])
        return zero

    def load(self, buf: Tensor, index: Expr, ix: ir.Value) -> ir.Value:
        """``buf[index]``, ``ix`` the emitted index."""
        base = self.buffer(buf)
        how, i64 = self.access(buf, index, ix, load=True)
        p = self.element_ptr(base, storage_type(buf.dtype), i64, f"{buf.name}.ptr")
        return self.load_from(buf, how, p)

    def load_from(self, buf: Tensor, how: str, p: ir.Value) -> ir.Value:
        """The load of ``buf``'s element(s) at ``p``, reached as ``how`` (``access``)."""
        if how != "scalar":
            raise InternalError(f"a {how} access in scalar code", self.m.func)
        d = buf.dtype
        v = self.b.load(p, typ=storage_type(d), align=d.itemsize, name=local_name(buf.name))
        return self.b.icmp_unsigned("!=", v, ir.Constant(I8, 0)) if d.is_bool else v

    def store(self, s: Store) -> None:
        """Emit the ``Store`` ``s``; then forget the memoized reads of its buffer, those
        its own value made among them (``acc = max(acc, x); out = acc`` reads ``acc`` again)."""
        buf, d = s.buffer, s.buffer.dtype
        base = self.buffer(buf)
        ix = self.index_value(buf, s.index)
        val = self.value(s.value)
        if d.is_bool:
            val = self.b.zext(val, with_lanes(I8, lanes_of(val)))
        how, i64 = self.access(buf, s.index, ix, vector_value=bool(lanes_of(val)))
        p = self.element_ptr(base, storage_type(d), i64, f"{buf.name}.ptr")
        self.store_to(buf, how, p, val)
        self.forget_loads(buf)

    def store_to(self, buf: Tensor, how: str, p: ir.Value, val: ir.Value) -> None:
        """The store of ``val`` (storage type) to ``buf`` at ``p``, reached as ``how``."""
        if how != "scalar":
            raise InternalError(f"a {how} access in scalar code", self.m.func)
        self.b.store(val, p, align=buf.dtype.itemsize)

    # -- statements --------------------------------------------------------------------
    def stmt(self, s: Stmt) -> None:
        """Emit ``s`` where the builder is."""
        run_nested(self.visit(s))

    def visit(self, s: Stmt) -> Nested[None]:
        """Emit ``s`` (a ``Nested`` generator: ``yield`` runs a sub-statement)."""
        match s:
            case Seq():
                for child in s.body:
                    yield self.visit(child)
            case Store():
                self.store(s)
            case For() if self.scheduled is None:  # the outermost loop of a nest
                self.scheduled = scheduled_nest(s)
                yield self.loop(s)
                self.scheduled = None
            case For():
                yield self.loop(s)
            case LetStmt():
                with self.let(s):
                    yield self.visit(s.body)
            case Allocate():
                with self.allocation(s):
                    yield self.visit(s.body)
            case IfThenElse():
                yield self.if_then_else(s)
            case ExternCall():
                self.extern_call(s)
            case _:
                raise InternalError(f"unknown statement {type(s).__name__}", self.m.func)

    def if_then_else(self, s: IfThenElse) -> Nested[None]:
        """Emit the ``IfThenElse`` ``s``."""
        self.forget()
        yield self.conditional(s, self.value(s.cond))

    def conditional(self, s: IfThenElse, c: ir.Value) -> Nested[None]:
        """``s``'s branches on its emitted scalar condition ``c``."""
        b = self.b
        if s.else_case is None:
            with b.if_then(c), self.side():
                yield self.visit(s.then_case)
        else:
            with b.if_else(c) as (then, otherwise):
                with then, self.side():
                    yield self.visit(s.then_case)
                with otherwise, self.side():
                    yield self.visit(s.else_case)

    @contextlib.contextmanager
    def let(self, s: LetStmt) -> Iterator[None]:
        """The scope of a ``LetStmt`` (not its body): its variable bound inside."""
        self.forget_var(s.var)
        self.vars[s.var] = self.value(s.value)
        yield
        del self.vars[s.var]
        self.forget_var(s.var)

    @contextlib.contextmanager
    def allocation(self, s: Allocate) -> Iterator[None]:
        """The scope of an ``Allocate`` (not its body): its buffer on the stack, or on the
        heap (freed on the way out) when larger than ``MAX_STACK_BYTES``."""
        buf = s.buffer
        extent = buf.shape[0]
        symbolic = isinstance(extent, Expr)
        n = 0 if symbolic else int(extent)
        nbytes = n * buf.dtype.itemsize
        self.forget()  # (reads of the buffer's earlier binding)
        if not symbolic and nbytes <= MAX_STACK_BYTES:
            self.bufs[buf] = self.alloca(storage_type(buf.dtype), buf.name, count=n, align=64)
            yield
            del self.bufs[buf]
            self.forget()
            return
        b = self.b
        # the runtime's allocator keeps freed blocks for the next call (fresh pages from
        # malloc cost a page fault each: tex.runtime.workspace)
        malloc = self.m.declare(WORKSPACE_ALLOC, PTR, [I64])
        free = self.m.declare(WORKSPACE_FREE, VOID, [PTR, I64])
        if symbolic:  # sized at run time (one element more: never a request of 0 bytes)
            count = self.value(extent)
            if count.type != I64:
                count = b.sext(count, I64)
            size = b.mul(b.add(count, ir.Constant(I64, 1)),
                         ir.Constant(I64, buf.dtype.itemsize), name=f"{buf.name}.bytes")
        else:
            size = ir.Constant(I64, nbytes)
        p = b.call(malloc, [size], name=local_name(buf.name))
        failed = b.icmp_unsigned("==", p, ir.Constant(PTR, None))
        self.m.errors = True
        with b.if_then(failed, likely=False):
            store_atomic(b, ir.Constant(I64, 1), self.bufs[ERRORS], "monotonic")
            b.ret_void()
        self.bufs[buf] = p
        self.heap.append((p, size))
        yield
        self.heap.pop()
        del self.bufs[buf]
        self.forget()
        b.call(free, [p, size])

    # -- extern calls ------------------------------------------------------------------
    def extern_call(self, s: ExternCall) -> None:
        """``s`` as a call of the runtime's extern callback, whose address the caller puts
        in the error record's slot ``EXTERN_SLOT``: ``i32 callback(i64 index, ptr
        buffers, ptr scalars)``, the buffers' data pointers in call order and each scalar
        as 64 bits (a float as a double's bits, an integer widened). A nonzero result (the
        function raised) marks the record (``EXTERN_FAILED``), frees this function's heap
        buffers and returns: the caller raises what the function raised."""
        if self.in_parallel:
            raise InternalError("an extern call inside a parallel loop", self.m.func)
        b = self.b
        self.m.errors = True
        for arg in self.fn.args:  # the callback receives the buffers' pointers
            arg.attributes.discard("captures(none)")
        ptrs = self.alloca(PTR, "extern.buffers", count=max(1, len(s.buffers)), align=8)
        for k, buf in enumerate(s.buffers):
            slot = b.gep(ptrs, [ir.Constant(I64, k)], inbounds=True, source_etype=PTR)
            b.store(self.buffer(buf), slot, align=8)
        vals = self.alloca(I64, "extern.scalars", count=max(1, len(s.scalars)), align=8)
        for k, e in enumerate(s.scalars):
            v = self.value(e)
            if e.dtype.is_float:
                if v.type != ir.DoubleType():
                    v = b.fpext(v, ir.DoubleType())
                v = b.bitcast(v, I64)
            else:
                v = self.to_i64(v, e.dtype) if not e.dtype.is_bool else b.zext(v, I64)
            slot = b.gep(vals, [ir.Constant(I64, k)], inbounds=True, source_etype=I64)
            b.store(v, slot, align=8)
        record = self.bufs[ERRORS]
        cell = b.gep(record, [ir.Constant(I64, EXTERN_SLOT)], inbounds=True, source_etype=I64)
        fn = b.load(cell, typ=PTR, align=8, name="extern.callback")
        rc = b.call(Callee(fn, ir.FunctionType(I32, [I64, PTR, PTR])),
                    [ir.Constant(I64, s.index), ptrs, vals], name=f"extern.{s.index}")
        self.forget()  # the call wrote its outputs
        with b.if_then(b.icmp_unsigned("!=", rc, ir.Constant(I32, 0)), likely=False):
            store_atomic(b, ir.Constant(I64, EXTERN_FAILED), record, "monotonic")
            free = self.m.declare(WORKSPACE_FREE, VOID, [PTR, I64])
            for p, size in reversed(self.heap):
                b.call(free, [p, size])
            b.ret_void()

    # -- loops -------------------------------------------------------------------------
    def bounds(self, s: For) -> tuple[ir.Value, ir.Value]:
        """``[lo, hi)`` of the loop ``s``, in its variable's dtype (emitted before the loop:
        what the memo holds dominates it, but for values of the variable's last binding)."""
        self.forget_var(s.var)
        d = s.var.dtype
        lo = self.cast(self.value(s.min), s.min.dtype, d)
        ext = self.cast(self.value(s.extent), s.extent.dtype, d)
        if isinstance(lo, ir.Constant) and isinstance(ext, ir.Constant):
            return lo, ir.Constant(lo.type, lo.constant + ext.constant)
        return lo, self.b.add(lo, ext, name=f"{local_name(s.var.name)}.end")

    @contextlib.contextmanager
    def counted(self, name: str, lo: ir.Value, hi: ir.Value, vectorize: bool = False,
                llvm_unrolls: bool = True) -> Iterator[ir.Value]:
        """``for name in [lo, hi)``: yields the index; the body goes where the builder is.
        A loop around longer loops (not ``llvm_unrolls``: see that function) carries hints
        keeping LLVM's vectorizer off it, and in a nest the schedule shaped
        (``scheduled``) its unroller too; ``vectorize`` asks LLVM to vectorize the loop in
        any nest.

        (The vectorizer hint holds in plain nests too. LLVM vectorizes a loop whose inner
        loops it unrolled whole; where they accumulate a value that does not depend on
        the outer loop (a max reduction over 28 elements initialized in it), LLVM 22's
        VPlan ``isSingleScalar`` walks the chain of uses as a tree: 3**28 steps, a build
        that never ends. Found by the fuzzer.)"""
        b = self.b
        name = local_name(name)
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
            latch = b.branch(cond)
            hint = "vectorize" if vectorize else None if llvm_unrolls else \
                "scheduled" if self.scheduled else "outer"
            if self.LOOP_HINTS and hint is not None:
                latch.set_metadata("llvm.loop", self.m.loop_id(hint))
        b.position_at_end(end)
        self.forget()  # what the body emitted does not dominate the exit

    def loop(self, s: For) -> Nested[None]:
        """Emit the loop ``s``: unrolled, or a counted loop (subclasses add kinds)."""
        if s.kind is ForKind.THREAD:
            raise ValueError(f"loop '{s.var.name}' is bound to {s.thread_tag or 'a GPU thread'}"
                             ": build with target='cuda' (the CPU target cannot run it)")
        if s.kind is ForKind.UNROLLED and isinstance(s.extent, Const) \
                and int(s.extent.value) <= MAX_UNROLL:
            yield self.unrolled(s)
            return
        lo, hi = self.bounds(s)
        wide = self.widens(s.var)
        if wide:
            lo, hi = self.to_i64(lo, s.var.dtype), self.to_i64(hi, s.var.dtype)
        self.forget_stored(s.body)
        # a vectorized loop emitted here is scalar code (``VectorEmitter`` could not make
        # vectors of it): LLVM's loop vectorizer is asked to
        with self.counted(s.var.name, lo, hi, vectorize=s.kind is ForKind.VECTORIZED,
                          llvm_unrolls=llvm_unrolls(s)) as i:
            self.bind_counter(s.var, i)
            yield self.visit(s.body)
        self.unbind(s.var)

    def widens(self, v: Var) -> bool:
        """Whether loop variable ``v`` counts in i64 (``WIDE_INDEX``)."""
        return self.WIDE_INDEX and v.dtype.kind == "int" and v.dtype.bits == 32

    def bind_counter(self, v: Var, i: ir.Value) -> None:
        """Bind loop variable ``v`` to the counter ``i`` (i64 for a widened int32
        variable, which then also reads as its truncation)."""
        if i.type == I64 and v.dtype.bits == 32:
            self.wide[v] = i
            i = ir.Constant(I32, i.constant) if isinstance(i, ir.Constant) else \
                self.b.trunc(i, I32, name=local_name(v.name))
        self.vars[v] = i

    def unbind(self, v: Var) -> None:
        """Loop variable ``v`` is out of scope."""
        self.vars.pop(v, None)
        self.wide.pop(v, None)

    def unrolled(self, s: For) -> Nested[None]:
        """The body of ``s`` once per value of its variable (a constant extent)."""
        lo, _ = self.bounds(s)
        if self.widens(s.var):
            lo = self.to_i64(lo, s.var.dtype)
        for k in range(int(s.extent.value)):  # type: ignore[attr-defined]
            self.forget_var(s.var)
            if isinstance(lo, ir.Constant):
                self.bind_counter(s.var, ir.Constant(lo.type, lo.constant + k))
            else:
                self.bind_counter(s.var, self.b.add(lo, ir.Constant(lo.type, k),
                                                    name=f"{local_name(s.var.name)}.{k}"))
            yield self.visit(s.body)
        self.unbind(s.var)
        self.forget_var(s.var)
