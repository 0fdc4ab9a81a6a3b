"""Vectorized loops: lane plans, lane masks and vector memory access.

A ``For`` VECTORIZED (constant extent) becomes LLVM vector code, ``lanes`` at a time
(twice the host vector register width in 32-bit elements: 16 with AVX2), a serial loop over
full chunks, then the rest (or a loop shorter than ``lanes``) as vectors whose widths are
powers of two (28 = 16 + 8 + 4: LLVM widens a 12-lane vector, at half speed). The loop
variable is ``<base, base+1, ...>``; expressions become vectors where they depend on it
(others stay scalar and are broadcast where combined); a lane-invariant load under a lane
mask is one scalar load, made when any lane is active; a load/store whose index has lane
stride 1 is one unaligned vector access (``align`` = element size), loads with strides 2
to 4 or indices ``lane // k`` read a span and shuffle it, other indices gather/scatter
(``llvm.masked.gather``/``scatter``); an ``IfThenElse`` on a vector condition runs its
branches under a lane mask (masked loads and stores), with an unmasked fast path when
every lane is active; a ``Select`` whose branches load evaluates each branch with its own
mask. An ``Allocate`` inside the body gets one private copy per lane (interleaved, on the
stack).

``vector_plan`` decides, before any code: the loop stays scalar (an ``llvm.loop`` hint
asks LLVM's loop vectorizer for it) when the extent is not constant, an inner loop's
bounds vary across lanes, the private copies would exceed ``MAX_STACK_BYTES``, or lanes
could observe each other through memory (a buffer written at two different indices, read
at an index other than the one it is written at, or written at a lane-invariant index by
more than one store). ``CompiledModule.notes`` records each decision.
"""
from __future__ import annotations

import contextlib
import math
from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass

import llvmlite.ir as ir

from ..arith.logic_rules import chain_operands
from ..dtype import DType
from ..ir.expr import Binary, Cast, Const, Expr, Op, Reduce, TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import collect_vars, post_order, substitute
from ..lower.bounds_check import is_report
from ..lower.stmt import (
    Allocate,
    For,
    ForKind,
    IfThenElse,
    LetStmt,
    Nested,
    Stmt,
    Store,
    stmt_children,
    stmt_exprs,
)
from .emit import FunctionEmitter
from .irtypes import (
    I1,
    I32,
    I64,
    PTR,
    VOID,
    constant,
    lanes_of,
    local_name,
    storage_type,
    undef,
)
from .module import ERRORS, MAX_STACK_BYTES, ModuleEmitter

__all__ = ["VectorEmitter", "TransposePlan", "lane_stride", "dup_factor", "transpose_block",
           "transpose_plan", "vector_plan"]


# --------------------------------------------------------------------------------------
# Lane plans
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
        if isinstance(node, Var):
            s = 1 if node is var else lane_stride(lets[node], var, lets) if node in lets else 0
        elif isinstance(node, Const):
            s = 0
        else:
            s = _node_stride(node, [memo[k] for k in node.children()])
        memo[node] = s
    return memo[root]


def _node_stride(node: Expr, kids: list[int | None]) -> int | None:
    """The lane stride of ``node`` from its children's (``lane_stride``)."""
    if all(k == 0 for k in kids):
        return 0
    if isinstance(node, Binary) and node.op in (Op.ADD, Op.SUB, Op.MUL) \
            and node.dtype.is_int and None not in kids:
        sa, sb = kids
        assert sa is not None and sb is not None
        if node.op is Op.ADD:
            return sa + sb
        if node.op is Op.SUB:
            return sa - sb
        if sb == 0 and isinstance(node.b, Const):
            return sa * int(node.b.value)
        if sa == 0 and isinstance(node.a, Const):
            return sb * int(node.a.value)
        return None
    if isinstance(node, Cast) and node.dtype.is_int and node.a.dtype.is_int \
            and node.dtype.bits >= node.a.dtype.bits:
        return kids[0]
    return None


def dup_factor(index: Expr, var: Var, lets: dict[Var, Expr]) -> int | None:
    """k when ``index`` is lane-invariant terms plus ``var // k`` (a constant k > 1): lane
    l then reads element ``first + l // k`` (with the chunk's base a multiple of k)."""
    varying = [t for t in chain_operands(index, Op.ADD) if lane_stride(t, var, lets) != 0]
    if len(varying) != 1:
        return None
    t = varying[0]
    if isinstance(t, Binary) and t.op is Op.FLOORDIV and t.a is var and \
            isinstance(t.b, Const) and int(t.b.value) > 1:
        return int(t.b.value)
    return None


def _pow2_pieces(n: int) -> list[int]:
    """``n`` lanes as vectors of powers of two, widest first (12 -> 8, 4; 7 -> 4, 2, 1):
    LLVM legalizes a vector of another width by widening it (a 12-lane FMA on 8-lane
    registers ran at half speed) or by taking it apart lane by lane."""
    return [1 << k for k in range(n.bit_length() - 1, -1, -1) if n >> k & 1]


def vector_plan(loop: For, max_lanes: int) -> str | None:
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
    body = _BodyAccesses()
    reason = body.scan(loop, lanes)
    return reason if reason is not None else body.conflict(loop.var)


class _BodyAccesses:
    """What a vectorized loop's body allocates, stores and reads (``vector_plan``)."""

    def __init__(self) -> None:
        self.lets: dict[Var, Expr] = {}
        self.private: set[Tensor] = set()
        # buffer -> (index, inside an inner loop) per store
        self.stores: dict[Tensor, list[tuple[Expr, bool]]] = {}
        self.reads: dict[Tensor, set[Expr]] = {}

    def scan(self, loop: For, lanes: int) -> str | None:
        """Collect the body's accesses; why it cannot be vectorized, if that shows."""
        inner_vars: set[Var] = {loop.var}
        stack: list[tuple[Stmt, bool]] = [(loop.body, False)]
        while stack:
            s, in_loop = stack.pop()
            for e in stmt_exprs(s):
                for node in post_order(e):
                    if isinstance(node, TensorRead):
                        self.reads.setdefault(node.tensor, set()).add(node.indices[0])
                    elif isinstance(node, Reduce):
                        return "a Reduce node is left in the body"
            match s:
                case Allocate():
                    if not isinstance(s.buffer.shape[0], int):
                        return (f"buffer '{s.buffer.name}' allocated in the body has a "
                                "symbolic size")
                    if int(s.buffer.shape[0]) * s.buffer.dtype.itemsize * lanes \
                            > MAX_STACK_BYTES:
                        return (f"buffer '{s.buffer.name}' allocated in the body is too "
                                f"large to keep {lanes} private copies on the stack")
                    self.private.add(s.buffer)
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
                    self.lets[s.var] = s.value
                    inner_vars.add(s.var)
                case Store():
                    self.stores.setdefault(s.buffer, []).append((s.index, in_loop))
            for child in stmt_children(s):
                stack.append((child, in_loop))
        return None

    def conflict(self, var: Var) -> str | None:
        """How lanes could observe each other through a shared buffer, or None."""
        for buf, writes in self.stores.items():
            if buf in self.private:
                continue
            indices = {ix for ix, _ in writes}
            if len(indices) > 1:
                return f"buffer '{buf.name}' is written at {len(indices)} different indices"
            (index,) = indices
            stride = lane_stride(index, var, self.lets)
            if stride in (0, None):
                if buf in self.reads or len(writes) > 1 or writes[0][1]:
                    return (f"buffer '{buf.name}' is written at index {index}, which lanes "
                            "may share, and read or written again")
            elif buf in self.reads and self.reads[buf] != {index}:
                return (f"buffer '{buf.name}' is read at an index other than the one it is "
                        "written at")
        return None


@dataclass(frozen=True)
class TransposePlan:
    """A transposing copy ``for a: vectorized for l: T[t + a*st + l] = X[x + a + l*sx]``
    (``transpose_plan``): ``rows`` x ``rows`` blocks of it are moved through registers."""

    outer: For  # the loop over a (serial or unrolled)
    inner: For  # the vectorized loop over l
    store: Store
    read: TensorRead
    st: int  # the store's stride in a (its stride in l is 1)
    sx: int  # the read's stride in l (its stride in a is 1)
    rows: int  # elements of one vector register: the block's side


def transpose_plan(loop: For, max_lanes: int) -> TransposePlan | None:
    """The block transpose of ``loop``, or None where it does not apply: ``loop`` (serial
    or unrolled, a constant extent) runs a vectorized loop (a constant extent) that copies
    one buffer into another, reading along ``loop``'s variable and writing along its own
    (the read a gather), both extents multiples of a vector register's elements, and the
    stores of a block at distinct addresses (their order is not the loop's).

    Vectorized as written, each vector of the copy gathers its lanes from as many rows
    (scalar loads and inserts: resnet_28's activation copies ran at 5-10x a plain copy's
    time); in blocks, each row is one contiguous load and each output row one contiguous
    store, the block turned in registers by shuffles."""
    inner = loop.body
    if loop.kind not in (ForKind.SERIAL, ForKind.UNROLLED) or not isinstance(inner, For) \
            or inner.kind is not ForKind.VECTORIZED or not isinstance(loop.extent, Const) \
            or not isinstance(inner.extent, Const) or not isinstance(inner.body, Store):
        return None
    store = inner.body
    read = store.value
    if not isinstance(read, TensorRead) or is_report(read.tensor) or \
            read.tensor is store.buffer or read.tensor.dtype != store.buffer.dtype or \
            read.tensor.dtype.is_bool:
        return None
    # (``max_lanes`` is two vector registers of 32-bit lanes)
    rows = 2 * max_lanes // read.tensor.dtype.itemsize
    e_outer, e_inner = int(loop.extent.value), int(inner.extent.value)
    if rows < 2 or e_outer % rows or e_inner % rows:
        return None
    a, v = loop.var, inner.var
    if any(a in collect_vars(e) for e in (inner.min, inner.extent)):
        return None
    ix, sx_index = read.indices[0], store.index
    if lane_stride(sx_index, v, {}) != 1 or lane_stride(ix, a, {}) != 1:
        return None
    st, sx = lane_stride(sx_index, a, {}), lane_stride(ix, v, {})
    # (a stride-1 read is contiguous already; rows of the store closer than a block's
    # width would overlap)
    if st is None or sx is None or sx in (0, 1) or abs(st) < e_inner or \
            vector_plan(inner, max_lanes) is not None:
        return None
    if any(isinstance(n, TensorRead) for n in post_order(ix, sx_index)):
        return None  # (an index read from memory: evaluated once per element as written)
    return TransposePlan(loop, inner, store, read, st, sx, rows)


def _mask(ix: Sequence[int]) -> ir.Constant:
    return ir.Constant(ir.VectorType(I32, len(ix)), [ir.Constant(I32, k) for k in ix])


def transpose_block(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """The columns of the square block whose rows are ``rows`` (vectors of ``len(rows)``
    elements, a power of two): log2(n) rounds of interleaving row i with row i + n/2.
    An 8 x 8 block (32-bit elements on AVX, 64-bit on AVX-512) takes the rounds in the
    order that keeps the first two within 4-element halves (``_transpose_8``): 24
    shuffles where the interleaving rounds cost LLVM 48 on AVX2."""
    n = len(rows)
    if n == 8:
        return _transpose_8(b, rows)
    half = n // 2
    lo = _mask([k // 2 + (n if k % 2 else 0) for k in range(n)])
    hi = _mask([half + k // 2 + (n if k % 2 else 0) for k in range(n)])
    for _ in range(n.bit_length() - 1):
        nxt: list[ir.Value] = []
        for i in range(half):
            nxt.append(b.shuffle_vector(rows[i], rows[i + half], lo))
            nxt.append(b.shuffle_vector(rows[i], rows[i + half], hi))
        rows = nxt
    return rows


def _transpose_8(b: ir.IRBuilder, rows: list[ir.Value]) -> list[ir.Value]:
    """``transpose_block`` of 8 rows: interleave rows 2i, 2i+1 within each 4-element half
    (``unpcklps``/``unpckhps``), then pairs of elements of those two apart (``shufps``),
    then join the halves of rows four apart (``vperm2f128``)."""
    t: list[ir.Value] = []
    for i in range(0, 8, 2):
        t.append(b.shuffle_vector(rows[i], rows[i + 1], _mask([0, 8, 1, 9, 4, 12, 5, 13])))
        t.append(b.shuffle_vector(rows[i], rows[i + 1], _mask([2, 10, 3, 11, 6, 14, 7, 15])))
    # u[k] (k < 4): rows 0-3 of columns k and k + 4, one in each half; u[k + 4]: rows 4-7
    u: list[ir.Value] = []
    for base in (0, 4):
        for j in (0, 1):
            x, y = t[base + j], t[base + j + 2]
            u.append(b.shuffle_vector(x, y, _mask([0, 1, 8, 9, 4, 5, 12, 13])))
            u.append(b.shuffle_vector(x, y, _mask([2, 3, 10, 11, 6, 7, 14, 15])))
    first = [b.shuffle_vector(u[k], u[k + 4], _mask([0, 1, 2, 3, 8, 9, 10, 11]))
             for k in range(4)]
    second = [b.shuffle_vector(u[k], u[k + 4], _mask([4, 5, 6, 7, 12, 13, 14, 15]))
              for k in range(4)]
    return first + second


# --------------------------------------------------------------------------------------
# The emitter
# --------------------------------------------------------------------------------------

class VectorEmitter(FunctionEmitter):
    """``FunctionEmitter`` with vectorized loops (see the module docstring).

    The vector state (``lanes``, 0 outside vector code; the vectorized variable ``vvar``;
    what the chunk base is a multiple of; the active lane ``mask``, None for all lanes)
    changes only through the context managers ``vector_scope`` and ``scope``."""

    def __init__(self, mod: ModuleEmitter, fn: ir.Function, in_parallel: bool) -> None:
        super().__init__(mod, fn, in_parallel)
        self.lanes = 0
        self.vvar: Var | None = None
        self.vbase_align = 1
        self.mask: ir.Value | None = None
        self.lets: dict[Var, Expr] = {}  # let-bound vector variables -> their values
        self.private: set[Tensor] = set()  # buffers allocated inside vector code
        # the first lane's value of ``vvar`` (the chunk base), and per index read or
        # written in vector code, how it is reached and its first lane's expression
        self.lane0_var: Var | None = None
        self.ways: dict[tuple[Expr, bool, bool], tuple[str, Expr | None] | None] = {}
        self.strides: dict[Expr, int | None] = {}  # ``lane_stride`` of indices, memoized

    # -- vector state ------------------------------------------------------------------
    @contextlib.contextmanager
    def vector_scope(self, lanes: int, var: Var, base_align: int) -> Iterator[None]:
        """Vector code of ``lanes`` lanes over ``var``, its chunk base a multiple of
        ``base_align``, every lane active."""
        self.vbase_align = base_align
        self.lanes, self.vvar, self.mask = lanes, var, None
        # (one per vectorized variable: the first-lane indices of a loop's full chunks and
        # of its remainder are the same expressions, computed in int64 once)
        self.lane0_var = self.m.lane0_vars.get(var)
        if self.lane0_var is None:
            self.lane0_var = self.m.lane0_vars[var] = Var(f"{var.name}.lane0", var.dtype)
        try:
            yield
        finally:
            self.lanes, self.vvar, self.mask = 0, None, None
            self.lane0_var = None
            self.lets.clear()
            self.ways.clear()
            self.strides.clear()

    @contextlib.contextmanager
    def scope(self, mask: ir.Value) -> Iterator[None]:
        """Code under the lane mask ``mask`` (one side of a vector branch): on exit the
        outer mask is active again and the memo forgets what was emitted inside."""
        outer = self.mask
        self.mask = mask
        try:
            with self.side():
                yield
        finally:
            self.mask = outer

    def true_mask(self, lanes: int) -> ir.Constant:
        """Every lane active."""
        return constant(ir.VectorType(I1, lanes), 1)

    def and_mask(self, a: ir.Value | None, b: ir.Value) -> ir.Value:
        """The lanes active in both ``a`` (None: all) and ``b``."""
        return b if a is None else self.b.and_(*self.unify(a, b))

    def active(self) -> ir.Value:
        """The active lanes as a vector (``mask`` or every lane)."""
        return self.true_mask(self.lanes) if self.mask is None else \
            self.splat(self.mask, self.lanes)

    # -- expressions and statements on vector conditions -------------------------------
    def choose(self, c: ir.Value, a: Expr, b: Expr) -> ir.Value:
        """A vector ``c``: each side under its own mask, blended by ``c``."""
        if not lanes_of(c):
            return super().choose(c, a, b)
        outer = self.mask
        with self.scope(mask=self.and_mask(outer, c)):
            va = self.value(a)
        with self.scope(mask=self.and_mask(outer, self.not_(c))):
            vb = self.value(b)
        c, va, vb = self.unify(c, va, vb)
        return self.b.select(c, va, vb)

    def conditional(self, s: IfThenElse, c: ir.Value) -> Nested[None]:
        """A vector ``c``: the branches under masks, unmasked when every lane takes the
        then-branch and no outer mask applies."""
        if not lanes_of(c):
            yield super().conditional(s, c)
            return
        b = self.b
        outer = self.mask
        if outer is None:  # every lane on: run the branch unmasked
            allf = self.m.intrinsic("llvm.vector.reduce.and", I1, [c.type], [c.type])
            with b.if_else(b.call(allf, [c], name="all")) as (fast, masked):
                with fast, self.side():
                    yield self.visit(s.then_case)
                with masked:
                    yield self.masked_branches(s, None, c)
            return
        yield self.masked_branches(s, outer, c)

    def masked_branches(self, s: IfThenElse, outer: ir.Value | None, c: ir.Value
                        ) -> Nested[None]:
        """Both branches of ``s``, each under its lanes of ``c`` within ``outer``."""
        with self.scope(mask=self.and_mask(outer, c)):
            yield self.visit(s.then_case)
        if s.else_case is not None:
            with self.scope(mask=self.and_mask(outer, self.not_(c))):
                yield self.visit(s.else_case)

    @contextlib.contextmanager
    def let(self, s: LetStmt) -> Iterator[None]:
        """A let: a vector value's definition is kept for ``lane_stride``."""
        with super().let(s):
            if self.lanes and lanes_of(self.vars[s.var]):
                self.lets[s.var] = s.value
                self.ways.clear()
                self.strides.clear()
            yield
            if self.lets.pop(s.var, None) is not None:
                self.ways.clear()
                self.strides.clear()

    @contextlib.contextmanager
    def allocation(self, s: Allocate) -> Iterator[None]:
        """In vector code, one private copy per lane, interleaved (``vector_plan`` checked
        the size)."""
        if not self.lanes:
            with super().allocation(s):
                yield
            return
        self.forget()
        buf = s.buffer
        n = int(buf.shape[0])
        self.bufs[buf] = self.alloca(storage_type(buf.dtype), buf.name, count=n * self.lanes,
                                     align=64)
        self.private.add(buf)
        yield
        del self.bufs[buf]
        self.private.discard(buf)
        self.forget()

    # -- loops -------------------------------------------------------------------------
    def loop(self, s: For) -> Nested[None]:
        """A VECTORIZED loop outside vector code as vectors, if ``vector_plan`` allows; a
        transposing copy in blocks (``transpose_plan``)."""
        if s.kind is ForKind.VECTORIZED and not self.lanes:
            reason = vector_plan(s, self.m.max_lanes)
            if reason is None:
                self.m.notes.append(f"vectorized {s.var.name}")
                yield self.vectorized(s)
                return
            self.m.notes.append(f"scalar {s.var.name}: {reason}")
        elif not self.lanes:
            plan = transpose_plan(s, self.m.max_lanes)
            if plan is not None:
                self.transposed(plan)
                return
        yield super().loop(s)

    def transposed(self, plan: TransposePlan) -> None:
        """The copy of ``plan`` in square blocks: each block's rows loaded whole (one row
        per element of the vectorized loop), turned by ``transpose_block``, and each
        column stored whole (one per iteration of the outer loop)."""
        s, v, n = plan.outer, plan.inner, plan.rows
        self.m.notes.append(f"transposed {s.var.name} x {v.var.name} in {n} x {n} blocks")
        b = self.b
        read, store = plan.read, plan.store
        d = read.tensor.dtype
        st = storage_type(d)
        vt = ir.VectorType(st, n)
        # the indices of the first element (both loops at their first iteration)
        for loop in (s, v):
            lo, _ = self.bounds(loop)
            self.bind_counter(loop.var, self.to_i64(lo, loop.var.dtype)
                              if self.widens(loop.var) else lo)
        x0 = self.to_i64(self.value(self.address(read.indices[0])), read.indices[0].dtype)
        t0 = self.to_i64(self.index_value(store.buffer, store.index), store.index.dtype)
        for loop in (s, v):
            self.unbind(loop.var)
            self.forget_var(loop.var)
        src, dst = self.buffer(read.tensor), self.buffer(store.buffer)

        def i64(k: int) -> ir.Constant:
            return ir.Constant(I64, k)

        def block(a: ir.Value, lane: ir.Value) -> None:  # (a, lane): the block's corner
            xb = b.add(x0, b.add(a, b.mul(lane, i64(plan.sx))))
            rows = [b.load(self.element_ptr(src, st, b.add(xb, i64(k * plan.sx)),
                                            f"{read.tensor.name}.ptr"),
                           typ=vt, align=d.itemsize, name=local_name(read.tensor.name))
                    for k in range(n)]
            tb = b.add(t0, b.add(b.mul(a, i64(plan.st)), lane))
            for k, col in enumerate(transpose_block(b, rows)):
                b.store(col, self.element_ptr(dst, st, b.add(tb, i64(k * plan.st)),
                                              f"{store.buffer.name}.ptr"), align=d.itemsize)

        def over(count: int, name: str, body: Callable[[ir.Value], None]) -> None:
            # blocks along one side: a loop LLVM keeps rolled (unrolled, the blocks of
            # a 16 x 16 tile made resnet_28's gradient 7% more IR for no speed)
            if count == 1:
                body(i64(0))
                return
            with self.counted(name, i64(0), i64(count), llvm_unrolls=False) as k:
                body(b.mul(k, i64(n)))

        e_a, e_l = int(s.extent.value), int(v.extent.value)  # type: ignore[attr-defined]
        over(e_a // n, f"{s.var.name}.block",
             lambda a: over(e_l // n, f"{v.var.name}.block", lambda lane: block(a, lane)))
        self.forget_loads(store.buffer)

    def vectorized(self, s: For) -> Nested[None]:
        """Full chunks of ``max_lanes`` lanes in a loop, then the rest in chunks of powers
        of two (``_pow2_pieces``)."""
        n = int(s.extent.value)  # type: ignore[attr-defined]
        w = self.m.max_lanes if n >= self.m.max_lanes else _pow2_pieces(n)[0]
        lo, _ = self.bounds(s)
        if self.widens(s.var):  # (the chunk base counts in i64; the lanes stay int32)
            lo = self.to_i64(lo, s.var.dtype)
        full, rest = divmod(n, w)
        t = lo.type
        lo_c = int(s.min.value) if isinstance(s.min, Const) else None
        # what the chunk bases are multiples of (for loads indexed by lane // k)
        align = math.gcd(lo_c, w) if lo_c is not None else 1
        if full == 1:
            yield self.vector_body(s, lo, w, align)
        elif full > 1:
            self.forget_stored(s.body)
            with self.counted(f"{s.var.name}.chunk", ir.Constant(t, 0), ir.Constant(t, full)) \
                    as c:
                base = self.b.add(lo, self.b.mul(c, ir.Constant(t, w)),
                                  name=f"{local_name(s.var.name)}.base")
                yield self.vector_body(s, base, w, align)
        start = full * w
        for piece in _pow2_pieces(rest):
            base = self.b.add(lo, ir.Constant(t, start),
                              name=f"{local_name(s.var.name)}.rest")
            rest_align = math.gcd(lo_c, start) if lo_c is not None else 1
            yield self.vector_body(s, base, piece, rest_align)
            start += piece

    def vector_body(self, s: For, base: ir.Value, w: int, align: int = 1) -> Nested[None]:
        """One chunk of ``w`` lanes from ``base`` (a multiple of ``align``)."""
        self.forget_var(s.var)
        with self.vector_scope(w, s.var, align):
            first = self.lane0_var
            assert first is not None
            self.bind_counter(first, base)
            b0 = self.vars[first]
            t = b0.type
            steps = ir.Constant(ir.VectorType(t, w), [ir.Constant(t, k) for k in range(w)])
            self.vars[s.var] = self.b.add(self.splat(b0, w), steps,
                                          name=local_name(s.var.name))
            yield self.visit(s.body)
            del self.vars[s.var]
            self.unbind(first)
            self.forget_var(first)
        self.forget_var(s.var)

    # -- memory ------------------------------------------------------------------------
    def way(self, index: Expr, load: bool) -> tuple[str, Expr | None] | None:
        """How vector code reaches memory at ``index`` when its lanes differ and one
        address serves them all: ("contiguous", ...), for loads also ("strideK", ...) and
        ("dupK", ...) (``access``), with the index of the first lane as an int64
        expression (``vvar`` replaced by the chunk base, through the lets; None where a
        let would read memory again); None for a gather or a scatter, or an index the
        same for every lane.

        Emitting the first lane's index directly, not the index vector and then its
        first element, keeps vector code's address arithmetic scalar: the IR is smaller
        and LLVM has less to fold (resnet_28's gradient: 7,289 -> 6,780 lines of IR).
        """
        key = (index, load, self.mask is None)
        if key in self.ways:
            return self.ways[key]
        stride = self.stride(index)
        how = None
        if stride == 1:
            how = "contiguous"
        elif load and stride is not None and 2 <= stride <= 4:
            how = f"stride{stride}"
        elif load and stride is None and self.mask is None:
            k = dup_factor(index, self.vvar, self.lets)
            if k and self.lanes % k == 0 and self.vbase_align % k == 0:
                how = f"dup{k}"
        out = None
        if how is not None:
            first = self.first_lane(index)
            out = (how, None if first is None else self.address(first))
        self.ways[key] = out
        return out

    def stride(self, index: Expr) -> int | None:
        """``lane_stride`` of ``index`` in the vector code being emitted."""
        if index not in self.strides:
            assert self.vvar is not None
            self.strides[index] = lane_stride(index, self.vvar, self.lets)
        return self.strides[index]

    def first_lane(self, index: Expr) -> Expr | None:
        """``index`` at the first lane; None when that would read memory again (a let
        that loads: it is not evaluated twice). (A read in ``index`` itself is the same
        for every lane, else ``index`` would have no lane stride: it stays as it is.)"""
        assert self.vvar is not None and self.lane0_var is not None
        mapping: dict[Expr, Expr] = {self.vvar: self.lane0_var}
        for v, val in self.lets.items():  # (in binding order: a let may use earlier ones)
            mapping[v] = substitute(val, mapping)
        used = [mapping[n] for n in post_order(index) if n in self.lets]
        if any(isinstance(n, TensorRead) for n in post_order(*used)):
            return None
        return substitute(index, mapping)

    def vector_index(self, buf: Tensor, index: Expr, load: bool) -> Expr | None:
        """What vector code emits for an access of ``buf`` at ``index``: the first lane's
        index where the lanes share one address (``way``), else the index itself where it
        differs across lanes (a vector of indices); None outside vector code and for an
        index the same in every lane (the scalar code's int64 address)."""
        if not self.lanes:
            return None
        w = None if buf in self.private else self.way(index, load)
        if w is not None and w[1] is not None:
            return w[1]
        return index if self.stride(index) != 0 else None

    def operands(self, node: Expr) -> Sequence[Expr]:
        """In vector code, a read is emitted from ``vector_index``."""
        if isinstance(node, TensorRead) and not is_report(node.tensor):
            ix = self.vector_index(node.tensor, node.indices[0], load=True)
            if ix is not None:
                return (ix,)
        return super().operands(node)

    def index_value(self, buf: Tensor, index: Expr) -> ir.Value:
        """In vector code, a store's index is ``vector_index``."""
        ix = self.vector_index(buf, index, load=False)
        return super().index_value(buf, index) if ix is None else self.value(ix)

    def access(self, buf: Tensor, index: Expr, ix: ir.Value,
               vector_value: bool = False, load: bool = False) -> tuple[str, ir.Value]:
        """In vector code also ("contiguous", i64 index of lane 0) and ("gather",
        <n x i64> indices); for loads ("strideK", lane 0's index: lanes K apart) and
        ("dupK", lane 0's index: lane l reads first + l // K)."""
        d = index.dtype
        n = self.lanes
        if n and buf in self.private:  # lane k's copy of element x lives at x * n + k
            i64 = self.to_i64(ix, d)
            if not lanes_of(i64):
                return "contiguous", self.b.mul(i64, ir.Constant(I64, n))
            steps = ir.Constant(ir.VectorType(I64, n), [ir.Constant(I64, k) for k in range(n)])
            return "gather", self.b.add(self.b.mul(i64, constant(i64.type, n)), steps)
        w = self.way(index, load) if n else None
        if w is not None:  # (``ix`` is the first lane's index: ``operands``, ``index_value``)
            return w[0], self.lane0_index(ix, d) if lanes_of(ix) else self.to_i64(ix, d)
        if n == 0 or (not lanes_of(ix) and self.mask is None and not vector_value):
            return super().access(buf, index, ix, vector_value, load)
        if load and not lanes_of(ix):
            # one element for every lane, under a mask: read once if any lane is on
            return "uniform", self.to_i64(ix, d)
        return "gather", self.to_i64(self.splat(ix, n), d)

    def lane0_index(self, ix: ir.Value, d: DType) -> ir.Value:
        """Lane 0 of the index vector ``ix`` (dtype ``d``) as i64."""
        first = self.derive("lane0", ix, None,
                            lambda: self.b.extract_element(ix, ir.Constant(I32, 0)))
        return self.to_i64(first, d)

    def call_report(self, fn: ir.Function, check: ir.Constant, i64: ir.Value,
                    zero: ir.Constant) -> ir.Value:
        """In vector code, the report of the active lane with the lowest number, if any;
        every lane reads 0."""
        n = self.lanes
        if n == 0 or (not lanes_of(i64) and self.mask is None):
            return super().call_report(fn, check, i64, zero)
        b = self.b
        record = self.bufs[ERRORS]
        bits = b.bitcast(self.active(), ir.IntType(n))
        with b.if_then(b.icmp_unsigned("!=", bits, ir.Constant(ir.IntType(n), 0)),
                       likely=False):
            if lanes_of(i64):
                cttz = self.m.intrinsic("llvm.cttz", ir.IntType(n), [ir.IntType(n), I1],
                                        [ir.IntType(n)])
                lane = b.call(cttz, [bits, ir.Constant(I1, 1)])
                lane32 = b.trunc(lane, I32) if n > 32 else \
                    (b.zext(lane, I32) if n < 32 else lane)
                i64 = b.extract_element(i64, lane32)
            b.call(fn, [record, check, i64])
        return ir.Constant(ir.VectorType(zero.type, n), [zero] * n)

    def load_from(self, buf: Tensor, how: str, p: ir.Value) -> ir.Value:
        """Vector loads: contiguous (masked or not), strided or duplicated spans, gathers."""
        if how == "scalar":
            return super().load_from(buf, how, p)
        d = buf.dtype
        b = self.b
        if how == "uniform":  # (a scalar, broadcast where combined; 0 with no lane on)
            assert self.mask is not None
            anyf = self.m.intrinsic("llvm.vector.reduce.or", I1, [self.mask.type],
                                    [self.mask.type])
            entry = b.block
            with b.if_then(b.call(anyf, [self.mask])):
                v = b.load(p, typ=storage_type(d), align=d.itemsize, name=local_name(buf.name))
                loaded = b.block
            out = b.phi(storage_type(d), name=local_name(buf.name))
            out.add_incoming(v, loaded)
            out.add_incoming(ir.Constant(storage_type(d), 0.0 if d.is_float else 0), entry)
            return b.icmp_unsigned("!=", out, ir.Constant(out.type, 0)) if d.is_bool else out
        vt = ir.VectorType(storage_type(d), self.lanes)
        zero = constant(vt, 0.0 if d.is_float else 0)
        align = ir.Constant(I32, d.itemsize)
        if how == "contiguous" and self.mask is None:
            v = b.load(p, typ=vt, align=d.itemsize, name=local_name(buf.name))
        elif how.startswith("stride"):
            v = self.load_strided(buf, p, int(how[6:]))
        elif how.startswith("dup"):
            v = self.load_duplicated(buf, p, int(how[3:]))
        elif how == "contiguous":
            mask = self.splat(self.mask, self.lanes)
            fn = self.m.intrinsic("llvm.masked.load", vt, [PTR, I32, mask.type, vt],
                                  [vt, PTR])
            v = b.call(fn, [p, align, mask, zero], name=local_name(buf.name))
        else:
            mask = self.active()
            fn = self.m.intrinsic("llvm.masked.gather", vt, [p.type, I32, mask.type, vt],
                                  [vt, p.type])
            v = b.call(fn, [p, align, mask, zero], name=local_name(buf.name))
        return b.icmp_unsigned("!=", v, constant(vt, 0)) if d.is_bool else v

    def load_strided(self, buf: Tensor, p: ir.Value, k: int) -> ir.Value:
        """Lanes ``first + l*k``: the span, then every k-th element."""
        d = buf.dtype
        st = storage_type(d)
        b, n = self.b, self.lanes
        span_t = ir.VectorType(st, (n - 1) * k + 1)
        if self.mask is None:
            span = b.load(p, typ=span_t, align=d.itemsize, name=local_name(buf.name))
        else:
            # the span's element q*k is lane q's (its mask bit); those between are off
            lane_mask = self.splat(self.mask, n)
            with_off = b.shuffle_vector(
                lane_mask, ir.Constant(lane_mask.type, None),
                ir.Constant(ir.VectorType(I32, span_t.count),
                            [ir.Constant(I32, j // k if j % k == 0 else n)
                             for j in range(span_t.count)]))
            fn = self.m.intrinsic("llvm.masked.load", span_t,
                                  [PTR, I32, with_off.type, span_t], [span_t, PTR])
            span = b.call(fn, [p, ir.Constant(I32, d.itemsize), with_off, constant(span_t, 0)],
                          name=local_name(buf.name))
        return b.shuffle_vector(span, undef(span.type),
                                ir.Constant(ir.VectorType(I32, n),
                                            [ir.Constant(I32, q * k) for q in range(n)]))

    def load_duplicated(self, buf: Tensor, p: ir.Value, k: int) -> ir.Value:
        """Lanes ``base//k + l//k``: n/k elements, each k times."""
        d = buf.dtype
        b, n = self.b, self.lanes
        few = b.load(p, typ=ir.VectorType(storage_type(d), n // k), align=d.itemsize,
                     name=local_name(buf.name))
        return b.shuffle_vector(few, undef(few.type),
                                ir.Constant(ir.VectorType(I32, n),
                                            [ir.Constant(I32, q // k) for q in range(n)]))

    def store_to(self, buf: Tensor, how: str, p: ir.Value, val: ir.Value) -> None:
        """Vector stores: contiguous (masked or not) or scattered; a lane-invariant store
        under a mask runs if any lane is active."""
        d = buf.dtype
        b = self.b
        if how == "scalar":
            if self.lanes and self.mask is not None:  # one store if any lane is on
                anyf = self.m.intrinsic("llvm.vector.reduce.or", I1, [self.mask.type],
                                        [self.mask.type])
                with b.if_then(b.call(anyf, [self.mask])):
                    super().store_to(buf, how, p, val)
            else:
                super().store_to(buf, how, p, val)
            return
        n = self.lanes
        vt = ir.VectorType(storage_type(d), n)
        align = ir.Constant(I32, d.itemsize)
        val = self.splat(val, n)
        if how == "contiguous" and self.mask is None:
            b.store(val, p, align=d.itemsize)
        elif how == "contiguous":
            mask = self.splat(self.mask, n)
            fn = self.m.intrinsic("llvm.masked.store", VOID, [vt, PTR, I32, mask.type],
                                  [vt, PTR])
            b.call(fn, [val, p, align, mask])
        else:
            mask = self.active()
            fn = self.m.intrinsic("llvm.masked.scatter", VOID, [vt, p.type, I32, mask.type],
                                  [vt, p.type])
            b.call(fn, [val, p, align, mask])

