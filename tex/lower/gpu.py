"""GPU kernels from a lowered function: ``split_kernels(func) -> DeviceProgram``.

A lowered function for ``target="cuda"`` is a sequence of root loop nests whose
thread-bound loops (``For`` of kind THREAD, tagged ``blockIdx.x`` ... ``threadIdx.z``) are
the hardware indices. This pass turns each root nest into one kernel (as TVM's
``SplitHostDevice`` with ``thread_extent`` attributes):

1. **Launch configuration.** The grid and block dimensions are the largest extent bound to
   each tag in the nest; a loop with a smaller extent is guarded (``if (threadIdx.x < n)``)
   around its own statements, not around other stages' nests bound to the same index (the
   copy of a shared tile is fetched by all threads).
   A nest without loops (a 0-d value) is one thread's work.
   Limits are checked: at most 1024 threads per block (1024, 1024, 64 per dimension), grid
   dimensions up to (2**31 - 1, 65535, 65535).
2. **Hardware indices.** A thread-bound loop is replaced by its body with the loop variable
   replaced by the index (a ``Var`` of kind ``"thread"`` named after the tag). Vectorized
   and parallel loops run serially in each thread (the threads are the parallelism).
3. **Memory.** ``shared`` buffers are hoisted to the top of the kernel (static shared
   memory, at most ``GPULimits.max_shared_bytes`` per block); ``local`` ones stay (per
   thread). A ``global`` temporary computed inside a kernel is refused (its threads could not
   see each other's writes); root temporaries are device buffers the runtime allocates.
4. **Barriers.** In every statement sequence, a barrier is inserted before a statement that
   reads a shared buffer written since the last barrier, or writes one read or written since
   (other threads of the block do the other accesses); a loop whose body writes and reads
   a shared buffer ends with a barrier (the next iteration overwrites what this one reads).
5. **Uniform barriers.** A barrier must be reached by every thread of a block. A condition
   that differs between threads of a block and holds a barrier is distributed over the
   statements around the barrier: ``if (c) {A; sync; B}`` -> ``if (c) A; sync; if (c) B``
   (``c`` is an index condition, the same at both places). A barrier left inside a
   thread-dependent condition or loop is an internal error.

A root statement that is a serial loop around thread-bound nests (a scan's steps,
``tex.lower.nest``) is a ``HostLoop``: the host runs the loop and launches the kernels of
its statements once per value, the loop variable their scalar argument; the buffers
allocated around it are device temporaries.

Kernel parameters are the buffers and scalars the kernel uses, in the function's parameter
order, then the host loops' variables, then the root temporaries, then (in a kernel with
run-time bounds checks) the error slot: ``DeviceProgram.error_slot``, two int64 in device
memory, zero at the launch; the first failed check (of any thread) stores its number (1 +
its position in ``DeviceProgram.checks``) with a compare-and-swap from 0, then the index
that failed it. The runtime allocates it per call and raises ``OutOfBoundsError`` from it.
"""
from __future__ import annotations

import math
from collections.abc import Iterator, Mapping, Sequence
from dataclasses import dataclass

from ..arith.extent import as_expr_int, bind_extent, extent_value, same_extent
from ..debug import InternalError, OutOfBoundsError
from ..dtype import DTYPES, int32
from ..ir import fold
from ..ir.expr import Const, Expr, Op, TensorRead, Var
from ..ir.tensor import Tensor
from ..ir.visit import post_order, substitute
from .bounds_check import BoundsReportOp, is_report, report_ops
from .stmt import (
    Allocate,
    Barrier,
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
    each_nested,
    make_buffer,
    map_exprs,
    run_nested,
    seq,
    stmt_children,
    stmt_exprs,
    stored_buffers,
    symbol_name,
    walk_stmts,
    with_stmt_children,
)

__all__ = ["GPULimits", "Kernel", "HostLoop", "DeviceProgram", "split_kernels", "BLOCK_TAGS",
           "THREAD_TAGS_HW"]

BLOCK_TAGS = ("blockIdx.x", "blockIdx.y", "blockIdx.z")
THREAD_TAGS_HW = ("threadIdx.x", "threadIdx.y", "threadIdx.z")


@dataclass(frozen=True)
class GPULimits:
    """What one kernel launch may use (CUDA's limits for compute capability 5.0 and up)."""

    max_threads_per_block: int = 1024
    max_block: tuple[int, int, int] = (1024, 1024, 64)
    max_grid: tuple[int, int, int] = (2**31 - 1, 65535, 65535)
    max_shared_bytes: int = 48 * 1024  # static shared memory per block


@dataclass(frozen=True, eq=False)
class Kernel:
    """One kernel: its parameters, body, launch configuration and shared buffers."""

    name: str
    params: tuple[Param, ...]
    body: Stmt
    grid: tuple[int | Expr, int | Expr, int | Expr]  # (symbolic: set at each call)
    block: tuple[int, int, int]
    shared: tuple[Tensor, ...]
    indices: tuple[Var, ...]  # the hardware index variables the body uses
    # the program's error slot when this kernel has bounds checks (also a parameter), and
    # the program's checks (a check's number is 1 + its position)
    error_slot: Tensor | None = None
    checks: tuple[BoundsReportOp, ...] = ()

    def launch_grid(self, values: Mapping[Var, int]) -> tuple[int, int, int]:
        """The grid at a call: a symbolic dimension at the values of its variables."""
        out = []
        for g in self.grid:
            n = g if isinstance(g, int) else bind_extent(g, values)
            if not isinstance(n, int):
                raise InternalError(f"kernel {self.name}: no value for the grid dimension {g}")
            out.append(max(n, 0))
        return out[0], out[1], out[2]

    @property
    def shared_bytes(self) -> int:
        return sum(b.size * b.dtype.itemsize for b in self.shared)

    def as_func(self) -> LoweredFunc:
        """The kernel as a ``LoweredFunc`` (shared buffers allocated at the top)."""
        body = self.body
        for buf in reversed(self.shared):
            body = Allocate(buf, "shared", body)
        return LoweredFunc(self.name, self.params, body,
                           {"grid": self.grid, "block": self.block})

    def __str__(self) -> str:
        head = (f"// kernel {self.name}: grid {self.grid}, block {self.block}, "
                f"shared {self.shared_bytes} bytes")
        return f"{head}\n{self.as_func()}"


@dataclass(frozen=True, eq=False)
class HostLoop:
    """A serial loop the host runs around launches (a scan's steps): ``var`` takes the
    values ``min`` ... ``min + extent - 1`` in order, passed to the kernels of ``steps``
    that use it as a scalar argument."""

    var: Var
    min: int
    extent: int | Expr  # (symbolic: set at each call)
    steps: tuple[Kernel | HostLoop, ...]


@dataclass(frozen=True, eq=False)
class DeviceProgram:
    """A lowered function as GPU kernels run in order, over the function's buffers and the
    device temporaries ``temps``; ``steps`` is the order of the launches when host loops
    repeat some (empty: each kernel once, in order)."""

    func: LoweredFunc
    temps: tuple[Tensor, ...]
    kernels: tuple[Kernel, ...]
    # run-time bounds checks: their reports, and the slot the first failure is stored in
    checks: tuple[BoundsReportOp, ...] = ()
    error_slot: Tensor | None = None
    steps: tuple[Kernel | HostLoop, ...] = ()

    def launches(self, sizes: Mapping[Var, int] | None = None
                 ) -> Iterator[tuple[Kernel, dict[Var, int]]]:
        """Each launch in order: the kernel and the values of the host loops around it
        (``sizes``: the shape variables' values, for a host loop of symbolic extent)."""
        stack: list[tuple[Iterator[Kernel | HostLoop], dict[Var, int]]] = \
            [(iter(self.steps or self.kernels), {})]
        while stack:
            items, env = stack[-1]
            item = next(items, None)
            if item is None:
                stack.pop()
            elif isinstance(item, Kernel):
                yield item, env
            else:
                n = item.extent if isinstance(item.extent, int) else \
                    extent_value(item.extent, sizes or {})
                if n is None:
                    raise InternalError(f"host loop {item.var.name}: no value for its "
                                        f"extent {item.extent}")
                for v in reversed(range(item.min, item.min + n)):
                    stack.append((iter(item.steps), {**env, item.var: v}))

    def bounds_error(self, slot: Sequence[int]) -> OutOfBoundsError | None:
        """The error for the failure recorded in the error slot's two values (after the
        launches), or None when every check passed."""
        number, index = int(slot[0]), int(slot[1])
        if not number:
            return None
        return OutOfBoundsError.from_kernel(self.func.name,
                                            self.checks[number - 1].describe(index))

    def __str__(self) -> str:
        temps = "".join(f"// device buffer {t.name}: {t.dtype.name}[{t.shape[0]}]\n"
                        for t in (*self.temps, *(() if self.error_slot is None
                                                  else (self.error_slot,))))
        loops = [f"// host loop: for ({lp.var.name}, {lp.min}, {lp.extent}) launch "
                 + ", ".join(k.name if isinstance(k, Kernel) else "a host loop"
                             for k in lp.steps) + "\n"
                 for lp in self.steps if isinstance(lp, HostLoop)]
        return temps + "".join(loops) + "\n\n".join(str(k) for k in self.kernels)


# --------------------------------------------------------------------------------------
# Entry point
# --------------------------------------------------------------------------------------

def split_kernels(func: LoweredFunc, limits: GPULimits | None = None) -> DeviceProgram:
    """One kernel per root loop nest of ``func`` (see the module docstring).

    Raises
    ------
    ValueError
        A nest with no thread-bound loop, a block or grid over the limits, shared memory over
        the limit, a global temporary inside a kernel.
    """
    limits = limits or GPULimits()
    body = func.body
    temps: list[Tensor] = []
    while isinstance(body, Allocate) and body.scope == "global":
        temps.append(body.buffer)
        body = body.body
    parts = list(body.body) if isinstance(body, Seq) else [body]
    checks = tuple(report_ops(func))
    slot = None
    if checks:
        names = {p.buffer.name for p in func.params if isinstance(p, BufferParam)}
        names |= {x.buffer.name for x in walk_stmts(func.body) if isinstance(x, Allocate)}
        name = "bounds_error"
        while name in names:
            name += "_"
        slot = make_buffer(name, 2, DTYPES["int64"])
    kernels: list[Kernel] = []

    def split(part: Stmt, loop_vars: tuple[Var, ...]) -> list[Kernel | HostLoop]:
        """The launches of one root statement: a kernel, or a host loop (a serial loop
        around thread-bound nests: a scan's steps) of the launches of its statements."""
        while isinstance(part, Allocate) and part.scope == "global":
            temps.append(part.buffer)  # (a scan's per-step buffers: device temporaries)
            part = part.body
        if isinstance(part, For) and part.kind is ForKind.SERIAL and \
                isinstance(part.min, Const) and any(
                    isinstance(x, For) and x.kind is ForKind.THREAD
                    for x in walk_stmts(part.body)):
            inner = part.body.body if isinstance(part.body, Seq) else (part.body,)
            steps = [x for sub in inner for x in split(sub, (*loop_vars, part.var))]
            extent = int(part.extent.value) if isinstance(part.extent, Const) else part.extent
            return [HostLoop(part.var, int(part.min.value), extent, tuple(steps))]
        k = _kernel(func, part, f"{symbol_name(func.name)}_kernel{len(kernels)}", temps,
                    limits, slot, checks, loop_vars)
        kernels.append(k)
        return [k]

    steps = [x for part in parts for x in split(part, ())]
    looped = any(isinstance(x, HostLoop) for x in steps)
    return DeviceProgram(func, tuple(temps), tuple(kernels), checks, slot,
                         tuple(steps) if looped else ())


def _kernel(func: LoweredFunc, part: Stmt, name: str, temps: Sequence[Tensor],
            limits: GPULimits, slot: Tensor | None = None,
            checks: tuple[BoundsReportOp, ...] = (), loop_vars: Sequence[Var] = ()) -> Kernel:
    loops = [s for s in walk_stmts(part) if isinstance(s, For) and s.kind is ForKind.THREAD]
    what = ", ".join(f"'{b.name}'" for b in stored_buffers(part)[-1:]) or "a loop nest"
    if not loops and any(isinstance(x, For) for x in walk_stmts(part)):
        raise ValueError(
            f"build(target='cuda'): stage {what} is not bound to GPU threads; bind its "
            "loops, e.g. bx, tx = s[T].split(T.op.axis[0], factor=256); "
            "s[T].bind(bx, tex.thread_axis('blockIdx.x')); "
            "s[T].bind(tx, tex.thread_axis('threadIdx.x')); or compute_inline / compute_at "
            "it, or use tex.schedule.auto_schedule(outputs, target='cuda')")
    extent: dict[str, int | Expr] = {}
    for lp in loops:
        if not isinstance(lp.min, Const) or int(lp.min.value) != 0:
            raise InternalError(f"thread loop '{lp.var.name}' does not start at 0")
        n: int | Expr = int(lp.extent.value) if isinstance(lp.extent, Const) else lp.extent
        if not isinstance(n, int) and lp.thread_tag not in BLOCK_TAGS:
            raise ValueError(
                f"build(target='cuda'): the loop '{lp.var.name}' bound to "
                f"{lp.thread_tag} has the symbolic extent {n}; a thread block's size is "
                "fixed when the kernel is compiled: split the axis by a constant factor and "
                "bind the inner loop to threadIdx (the outer one to blockIdx)")
        old = extent.get(lp.thread_tag)
        if old is None:
            extent[lp.thread_tag] = n
        elif isinstance(old, int) and isinstance(n, int):
            extent[lp.thread_tag] = max(old, n)
        elif not same_extent(old, n):  # (the grid covers every loop bound to the index)
            extent[lp.thread_tag] = fold.binary(Op.MAX, as_expr_int(old), as_expr_int(n))
    grid = tuple(extent.get(t, 1) for t in BLOCK_TAGS)
    block = tuple(extent.get(t, 1) for t in THREAD_TAGS_HW)
    threads = math.prod(block)
    if threads > limits.max_threads_per_block or any(
            b > m for b, m in zip(block, limits.max_block)):
        raise ValueError(
            f"build(target='cuda'): the thread block of the stage computing {what} has "
            f"{' x '.join(map(str, block))} = {threads} threads; a block holds at most "
            f"{limits.max_threads_per_block} threads ({' x '.join(map(str, limits.max_block))}"
            " per dimension): split the axes bound to threadIdx with smaller factors")
    if any(isinstance(g, int) and g > m for g, m in zip(grid, limits.max_grid)):
        raise ValueError(
            f"build(target='cuda'): the grid of the stage computing {what} is "
            f"{grid}; the limits are {limits.max_grid}: bind a larger part of the axes to "
            "threads, or loop inside each thread")
    hw = {tag: Var(tag, int32, "thread") for tag in extent}
    body = _bind_indices(part, hw, extent)
    body, shared = _hoist_shared(body, what)
    nbytes = sum(b.size * b.dtype.itemsize for b in shared)
    if nbytes > limits.max_shared_bytes:
        sizes = ", ".join(f"{b.name}: {b.size * b.dtype.itemsize}" for b in shared)
        raise ValueError(
            f"build(target='cuda'): the stage computing {what} uses {nbytes} bytes of shared "
            f"memory ({sizes}); a block has at most {limits.max_shared_bytes}: use smaller "
            "tiles (split factors) for the cache_read(..., 'shared') stages")
    body = _insert_barriers(body, set(shared))
    uniform = {v for t, v in hw.items() if t in BLOCK_TAGS}
    uniform |= {p.var for p in func.params if isinstance(p, ScalarParam)}
    uniform |= set(loop_vars)
    body = _uniform_barriers(body, frozenset(uniform))
    used = _used(body)
    params: list[Param] = []
    for p in func.params:
        if (p.buffer if isinstance(p, BufferParam) else p.var) in used:
            params.append(p)
    params += [ScalarParam(v) for v in loop_vars if v in used]  # (host loops around it)
    params += [BufferParam(t, t, True) for t in temps if t in used]
    checked = slot is not None and any(isinstance(t, Tensor) and is_report(t) for t in used)
    if checked:
        params.append(BufferParam(slot, slot, True))  # type: ignore[arg-type]
    indices = tuple(hw[t] for t in (*BLOCK_TAGS, *THREAD_TAGS_HW) if t in hw)
    return Kernel(name, tuple(params), body, grid, block, tuple(shared),  # type: ignore[arg-type]
                  indices, slot if checked else None, checks if checked else ())


# --------------------------------------------------------------------------------------
# Steps
# --------------------------------------------------------------------------------------

# The walks below are ``Nested`` generators run by ``run_nested`` (one local temporary per
# attached stage nests one Allocate per stage, and a chain of compute_at stages nests as deep
# as it is long): none recurses in Python.

def _bind_indices(s: Stmt, hw: dict[str, Var], extent: dict[str, int]) -> Stmt:
    """Thread loops replaced by their hardware index; SIMD and parallel loops serial."""

    def visit(s: Stmt) -> Nested[Stmt]:
        if isinstance(s, For) and s.kind is ForKind.THREAD:
            index = hw[s.thread_tag]
            body = s.body
            n = int(s.extent.value) if isinstance(s.extent, Const) else s.extent
            full = extent[s.thread_tag]
            if not (same_extent(n, full) if not (isinstance(n, int) and isinstance(full, int))
                    else n >= full):
                body = _guard_own(index < n, body, s.thread_tag)
            body = map_exprs(body, lambda e: substitute(e, {s.var: index}))
            return (yield visit(body))
        s = with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))
        if isinstance(s, For) and s.kind in (ForKind.VECTORIZED, ForKind.PARALLEL):
            return For(s.var, s.min, s.extent, ForKind.SERIAL, s.body)
        return s

    return run_nested(visit(s))


def _guard_own(cond: Expr, s: Stmt, tag: str) -> Stmt:
    """``if (cond) s``, except around the nests of other stages bound to the same thread
    index (a shared tile's copy): those run on their own extent, with every thread."""

    def visit(s: Stmt) -> Nested[Stmt]:
        if not any(isinstance(x, For) and x.kind is ForKind.THREAD and x.thread_tag == tag
                   for x in walk_stmts(s)):
            return IfThenElse(cond, s)
        match s:
            case For() if s.kind is ForKind.THREAD and s.thread_tag == tag:
                return s
            case Seq():
                return seq(*(yield from each_nested(visit, s.body)))
            case IfThenElse():
                return IfThenElse(s.cond, (yield visit(s.then_case)),
                                  None if s.else_case is None else
                                  (yield visit(s.else_case)))
        return with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))

    return run_nested(visit(s))


def _hoist_shared(s: Stmt, what: str) -> tuple[Stmt, list[Tensor]]:
    found: list[Tensor] = []

    def visit(x: Stmt) -> Nested[Stmt]:
        drop = hoisted(x)  # outermost first: the order of the kernel's shared buffers
        body = with_stmt_children(x, (yield from each_nested(visit, stmt_children(x))))
        return body.body if drop else body  # type: ignore[attr-defined]

    def hoisted(x: Stmt) -> bool:
        if isinstance(x, Allocate):
            if x.scope == "shared":
                found.append(x.buffer)
                return True
            if x.scope == "global":
                raise ValueError(
                    f"build(target='cuda'): '{x.buffer.name}' is computed inside the kernel "
                    f"of {what} in global memory, where the threads computing it and those "
                    "reading it cannot synchronize; give it the scope 'shared' or 'local' "
                    "(s[T].set_scope(...)), or compute_root it")
        return False

    return run_nested(visit(s)), found


def _accesses(s: Stmt, shared: set[Tensor]) -> tuple[set[Tensor], set[Tensor]]:
    """(shared buffers read, shared buffers written) anywhere in ``s``."""
    reads: set[Tensor] = set()
    writes: set[Tensor] = set()
    for x in walk_stmts(s):
        if isinstance(x, Store) and x.buffer in shared:
            writes.add(x.buffer)
        for e in stmt_exprs(x):
            for n in post_order(e):
                if isinstance(n, TensorRead) and n.tensor in shared:
                    reads.add(n.tensor)
    return reads, writes


def _ends_with_barrier(s: Stmt) -> bool:
    return isinstance(s, Barrier) or (isinstance(s, Seq) and bool(s.body)
                                      and isinstance(s.body[-1], Barrier))


def _insert_barriers(s: Stmt, shared: set[Tensor]) -> Stmt:
    if not shared:
        return s

    def visit(s: Stmt) -> Nested[Stmt]:
        s = with_stmt_children(s, (yield from each_nested(visit, stmt_children(s))))
        if isinstance(s, Seq):
            out: list[Stmt] = []
            pend_r: set[Tensor] = set()
            pend_w: set[Tensor] = set()
            for c in s.body:
                if isinstance(c, Barrier):
                    pend_r, pend_w = set(), set()
                    out.append(c)
                    continue
                r, w = _accesses(c, shared)
                if (r & pend_w) or (w & (pend_r | pend_w)):
                    out.append(Barrier())
                    pend_r, pend_w = set(), set()
                out.append(c)
                pend_r |= r
                pend_w |= w
            return seq(*out)
        if isinstance(s, For):
            r, w = _accesses(s.body, shared)
            if (r & w) and not _ends_with_barrier(s.body):
                return For(s.var, s.min, s.extent, s.kind, seq(s.body, Barrier()),
                           s.thread_tag)
        return s

    return run_nested(visit(s))


def _has_barrier(s: Stmt) -> bool:
    return any(isinstance(x, Barrier) for x in walk_stmts(s))


def _is_uniform(e: Expr, uniform: frozenset[Var]) -> bool:
    """Whether ``e`` has one value for all threads of a block."""
    for n in post_order(e):
        if isinstance(n, TensorRead):
            return False
        if isinstance(n, Var) and n not in uniform:
            return False
    return True


def _uniform_barriers(s: Stmt, uniform: frozenset[Var]) -> Stmt:
    """Thread-dependent conditions holding barriers distributed around them."""
    return run_nested(_uniform_visit(s, uniform))


def _uniform_visit(s: Stmt, uniform: frozenset[Var]) -> Nested[Stmt]:
    if not _has_barrier(s):
        return s
    match s:
        case IfThenElse() if not _is_uniform(s.cond, uniform):
            then = yield _distribute(s.cond, s.then_case, uniform)
            other = None if s.else_case is None else \
                (yield _distribute(fold.logical_not(s.cond), s.else_case, uniform))
            return seq(then, other)
        case For():
            inner = uniform | {s.var} if _is_uniform(s.min, uniform) and \
                _is_uniform(s.extent, uniform) else uniform
            if inner is uniform:
                raise InternalError(f"a barrier inside loop '{s.var.name}', whose bounds differ "
                                    "between the threads of a block")
            return For(s.var, s.min, s.extent, s.kind, (yield _uniform_visit(s.body, inner)),
                       s.thread_tag)
        case LetStmt() if _is_uniform(s.value, uniform):
            uniform = uniform | {s.var}
    return with_stmt_children(s, (yield from each_nested(
        lambda c: _uniform_visit(c, uniform), stmt_children(s))))


def _distribute(cond: Expr, s: Stmt, uniform: frozenset[Var]) -> Nested[Stmt]:
    """``if (cond) s`` with the condition pushed inside ``s`` around its barriers."""
    if not _has_barrier(s):
        return IfThenElse(cond, s)
    match s:
        case Barrier():
            return s
        case LetStmt() | Allocate():  # the condition does not read the let variable
            inner = uniform | {s.var} if isinstance(s, LetStmt) and \
                _is_uniform(s.value, uniform) else uniform
            return with_stmt_children(s, [(yield _distribute(cond, s.body, inner))])
        case Seq():
            return seq(*(yield from each_nested(lambda c: _distribute(cond, c, uniform),
                                                s.body)))
        case For():
            return (yield _uniform_visit(For(s.var, s.min, s.extent, s.kind,
                                             IfThenElse(cond, s.body), s.thread_tag), uniform))
        case IfThenElse():
            if _is_uniform(s.cond, uniform):
                return (yield _uniform_visit(IfThenElse(
                    s.cond, IfThenElse(cond, s.then_case),
                    None if s.else_case is None else IfThenElse(cond, s.else_case)), uniform))
            then = yield _distribute(cond & s.cond, s.then_case, uniform)
            other = None if s.else_case is None else \
                (yield _distribute(cond & fold.logical_not(s.cond), s.else_case, uniform))
            return seq(then, other)
    raise InternalError(f"a barrier inside {type(s).__name__} under the thread-dependent "
                        f"condition {cond}")


def _used(s: Stmt) -> set[Expr]:
    """Buffers and variables the statement refers to."""
    found: set[Expr] = set()
    for x in walk_stmts(s):
        if isinstance(x, (Store, Allocate)):
            found.add(x.buffer)  # type: ignore[arg-type]
        for e in stmt_exprs(x):
            for n in post_order(e):
                if isinstance(n, TensorRead):
                    found.add(n.tensor)  # type: ignore[arg-type]
                elif isinstance(n, Var):
                    found.add(n)
    return found
