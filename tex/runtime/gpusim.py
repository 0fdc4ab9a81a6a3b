"""Run GPU kernels on the CPU, every thread of the grid in lockstep, with NumPy.

``simulate(program, arrays)`` executes a ``tex.lower.gpu.DeviceProgram`` (what
``tex.build(..., target="cuda")`` compiles to PTX) statement by statement for all threads
at once: a thread's registers are one element of a vector over the grid, a condition masks
threads off, a serial loop runs once for all threads. It checks what a GPU would not:

- every load and store in bounds (for the threads that execute it),
- every barrier reached by all threads of their block (uniform control flow),
- no data race: within one kernel, between two barriers, a shared-memory element written
  by one thread is not read or written by another; a global element written by one thread
  is not read or written by another thread in the same kernel;
- no read of uninitialized shared or local memory (float buffers start as NaN; integer
  reads are tracked).

So it tests the GPU lowering (thread binding, shared tiles, barriers, cross-thread
reductions) on machines without a GPU; the NVPTX code generator is shared with the CPU
backend for expressions and checked by ``ptxas``. Kernels are small in tests: the cost is
a few NumPy operations per statement and loop iteration over ``grid x block`` threads.
"""
from __future__ import annotations

import ctypes
import threading
from collections.abc import Generator, Sequence
from typing import Any

import numpy as np

from ..arith.extent import bind_extent
from ..ir.expr import Binary, Cast, Compare, Const, Expr, Op, Select, TensorRead, Unary, Var
from ..ir.semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast
from ..ir.tensor import Tensor
from ..lower.bounds_check import is_report
from ..lower.gpu import DeviceProgram, Kernel
from ..lower.stmt import (
    Allocate,
    Barrier,
    BufferParam,
    For,
    IfThenElse,
    LetStmt,
    ScalarParam,
    Seq,
    Stmt,
    Store,
)

__all__ = ["simulate", "run_kernel", "SimulationError", "SimulatedDriver"]


class SimulationError(AssertionError):
    """The kernel did something a correct GPU kernel must not (a race, an out-of-bounds
    access, a divergent barrier, a read of uninitialized memory)."""


class _Memory:
    """One buffer: values plus, per element, the last writer and reader since the last
    synchronization (-1 none, -2 several readers)."""

    def __init__(self, name: str, data: np.ndarray, space: str, rows: int = 1) -> None:
        self.name = name
        self.space = space  # "global", "shared" (one row per block), "local" (per thread)
        self.data = data.reshape(rows, -1) if space != "global" else data.reshape(1, -1)
        self.writer = np.full(self.data.shape, -1, np.int64)
        self.reader = np.full(self.data.shape, -1, np.int64)
        self.init = np.ones(self.data.shape, bool) if space == "global" else \
            np.zeros(self.data.shape, bool)

    def sync(self) -> None:
        self.writer.fill(-1)
        self.reader.fill(-1)


class _Sim:
    def __init__(self, kernel: Kernel, mem: dict[Tensor, _Memory],
                 scalars: dict[Var, Any], grid: tuple[int, int, int] | None = None) -> None:
        self.k = kernel
        self.mem = dict(mem)
        gx, gy, gz = kernel.grid if grid is None else grid  # type: ignore[misc]
        bx, by, bz = kernel.block
        self.nblocks = gx * gy * gz
        self.bsize = bx * by * bz
        n = self.nblocks * self.bsize
        self.n = n
        tid = np.arange(n, dtype=np.int64)
        blk, loc = tid // self.bsize, tid % self.bsize
        self.block_of = blk
        self.tid = tid
        dims = {"blockIdx.x": blk % gx, "blockIdx.y": (blk // gx) % gy,
                "blockIdx.z": blk // (gx * gy), "threadIdx.x": loc % bx,
                "threadIdx.y": (loc // bx) % by, "threadIdx.z": loc // (bx * by)}
        self.env: dict[Var, Any] = dict(scalars)
        for v in kernel.indices:
            self.env[v] = dims[v.name].astype(np.int32)

    def fail(self, msg: str) -> None:
        raise SimulationError(f"kernel {self.k.name}: {msg}")

    # -- memory ------------------------------------------------------------------------
    def locate(self, m: _Memory, idx: np.ndarray, mask: np.ndarray, what: str
               ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """(rows, columns, thread ids) of the active threads' accesses."""
        idx = np.broadcast_to(idx, (self.n,))[mask].astype(np.int64)
        threads = self.tid[mask]
        size = m.data.shape[1]
        bad = (idx < 0) | (idx >= size)
        if bad.any():
            t = int(threads[bad][0])
            self.fail(f"thread {t} {what} {m.name}[{int(idx[bad][0])}] out of bounds "
                      f"(size {size})")
        rows = {"global": np.zeros_like(threads), "shared": self.block_of[mask],
                "local": threads}[m.space]
        return rows, idx, threads

    def report(self, node: TensorRead, idx: np.ndarray, mask: np.ndarray) -> None:
        """The failed bounds check ``node`` for the threads of ``mask``: the first failure
        of the launch goes into the error slot (the thread with the lowest id wins the
        compare-and-swap), as in the PTX code."""
        slot = self.k.error_slot
        if slot is None or slot not in self.mem:
            self.fail(f"a bounds check on '{node.tensor.name}' without an error slot")
        data = self.mem[slot].data.reshape(-1)  # type: ignore[index]
        if not mask.any() or data[0] != 0:
            return
        t = int(np.flatnonzero(mask)[0])
        data[0] = self.k.checks.index(node.tensor.op) + 1  # type: ignore[arg-type]
        data[1] = int(np.broadcast_to(idx, (self.n,))[t])

    def load(self, node: TensorRead, idx: np.ndarray, mask: np.ndarray) -> np.ndarray:
        if is_report(node.tensor):  # a failed bounds check: recorded, reads 0 (as PTX)
            self.report(node, idx, mask)
            return np.zeros(self.n, node.tensor.dtype.numpy)
        m = self.mem.get(node.tensor)
        if m is None:
            self.fail(f"reads '{node.tensor.name}', which is not a kernel buffer")
        out = np.zeros(self.n, node.tensor.dtype.numpy)
        if not mask.any():
            return out
        rows, cols, threads = self.locate(m, idx, mask, "reads")
        if not m.init[rows, cols].all():
            t = int(threads[~m.init[rows, cols]][0])
            self.fail(f"thread {t} reads uninitialized {m.space} memory {m.name}")
        w = m.writer[rows, cols]
        race = (w >= 0) & (w != threads)
        if race.any():
            j = int(np.flatnonzero(race)[0])
            self.fail(f"thread {int(threads[j])} reads {m.name}[{int(cols[j])}], written by "
                      f"thread {int(w[j])} without a barrier between")
        if m.space != "local":
            r = m.reader[rows, cols]
            m.reader[rows, cols] = np.where((r == -1) | (r == threads), threads, -2)
        out[mask] = m.data[rows, cols]
        return out

    def store(self, s: Store, mask: np.ndarray) -> None:
        m = self.mem.get(s.buffer)
        if m is None:
            self.fail(f"writes '{s.buffer.name}', which is not a kernel buffer")
        idx = self.value(s.index, mask)
        val = np.broadcast_to(self.value(s.value, mask), (self.n,))[mask]
        rows, cols, threads = self.locate(m, idx, mask, "writes")
        if m.space != "local":
            w = m.writer[rows, cols]
            r = m.reader[rows, cols]
            race = ((w >= 0) & (w != threads)) | (r == -2) | ((r >= 0) & (r != threads))
            flat = rows * m.data.shape[1] + cols
            _, first, counts = np.unique(flat, return_index=True, return_counts=True)
            if race.any() or (counts > 1).any():
                j = int(np.flatnonzero(race)[0]) if race.any() else \
                    int(first[np.flatnonzero(counts > 1)[0]])
                self.fail(f"thread {int(threads[j])} writes {m.name}[{int(cols[j])}], which "
                          "another thread accesses without a barrier between")
            m.writer[rows, cols] = threads
        m.data[rows, cols] = val.astype(m.data.dtype, copy=False)
        m.init[rows, cols] = True

    # -- expressions -------------------------------------------------------------------
    def value(self, e: Expr, mask: np.ndarray) -> np.ndarray:
        with np.errstate(all="ignore"):
            return self.eval(e, mask)

    def eval(self, e: Expr, mask: np.ndarray) -> Any:
        """``e`` for the threads of ``mask``, with an explicit stack of node evaluations
        (``_node`` generators yield the children they need). Each node of the expression
        DAG is evaluated at most once per thread: a shared sub-expression met again is
        evaluated only for threads not yet covered, and merged (a select's sides narrow the
        mask, so sharing by node alone would expand a DAG of selects into a tree)."""
        memo: dict[Expr, tuple[np.ndarray, Any]] = {}
        stack = [self._node(e, mask, memo)]
        result: Any = None
        while stack:
            try:
                child, cmask = stack[-1].send(result)
            except StopIteration as stop:
                stack.pop()
                result = stop.value
                continue
            stack.append(self._node(child, cmask, memo))
            result = None
        return result

    def _node(self, e: Expr, mask: np.ndarray, memo: dict[Expr, tuple[np.ndarray, Any]]
              ) -> Generator[tuple[Expr, np.ndarray], Any, Any]:
        """One node for the threads of ``mask`` not yet covered by ``memo`` (its children
        are requested by yielding ``(child, mask)``)."""
        hit = memo.get(e)
        if hit is not None:
            covered, old = hit
            todo = mask & ~covered
            if not todo.any():
                return old
            mask = todo
        d = e.dtype.numpy
        out: Any
        match e:
            case Const():
                out = np.asarray(e.value, d)
            case Var():
                if e not in self.env:
                    self.fail(f"variable '{e.name}' used outside its scope")
                out = self.env[e]
            case TensorRead():
                out = self.load(e, (yield e.indices[0], mask), mask)
            case Select():
                c = np.broadcast_to((yield e.cond, mask), (self.n,))
                a = yield e.a, mask & c
                b = yield e.b, mask & ~c
                out = np.where(c, a, b).astype(d, copy=False)
            case Binary() if e.op in (Op.AND, Op.OR):
                a = np.broadcast_to((yield e.a, mask), (self.n,))
                b = yield e.b, mask & (a if e.op is Op.AND else ~a)
                out = (a & b) if e.op is Op.AND else (a | b)
            case Binary() | Compare():
                x = np.asarray((yield e.a, mask))
                y = np.asarray((yield e.b, mask))
                out = np.asarray(NUMPY_BINARY[e.op](x, y)).astype(d, copy=False)
            case Unary():
                out = np.asarray(NUMPY_UNARY[e.op](np.asarray((yield e.a, mask)))
                                 ).astype(d, copy=False)
            case Cast():
                out = numpy_cast(np.asarray((yield e.a, mask)), d)
            case _:
                self.fail(f"cannot evaluate {type(e).__name__} {e}")
        if hit is not None:
            covered, old = hit
            out = np.where(covered, old, out).astype(d, copy=False)
            mask = covered | mask
        memo[e] = (mask, out)
        return out

    # -- statements --------------------------------------------------------------------
    def run(self, s: Stmt, mask: np.ndarray) -> None:
        """Run ``s`` for the threads of ``mask``, with an explicit stack of statement
        runs (``_stmt`` generators yield the sub-statements to run)."""
        stack = [self._stmt(s, mask)]
        while stack:
            try:
                sub, smask = next(stack[-1])
            except StopIteration:
                stack.pop()
                continue
            stack.append(self._stmt(sub, smask))

    def _stmt(self, s: Stmt, mask: np.ndarray) -> Generator[tuple[Stmt, np.ndarray], None, None]:
        if not mask.any():
            return
        match s:
            case Seq():
                for c in s.body:
                    yield c, mask
            case Store():
                self.store(s, mask)
            case IfThenElse():
                c = np.broadcast_to(self.value(s.cond, mask), (self.n,))
                yield s.then_case, mask & c
                if s.else_case is not None:
                    yield s.else_case, mask & ~c
            case LetStmt():
                self.env[s.var] = self.value(s.value, mask)
                yield s.body, mask
                del self.env[s.var]
            case For():
                lo = np.broadcast_to(self.value(s.min, mask), (self.n,))[mask]
                ext = np.broadcast_to(self.value(s.extent, mask), (self.n,))[mask]
                lo_all = np.broadcast_to(self.value(s.min, mask), (self.n,))
                hi_all = lo_all + np.broadcast_to(self.value(s.extent, mask), (self.n,))
                for i in range(int(lo.min()), int((lo + ext).max())):
                    self.env[s.var] = np.int32(i) if s.var.dtype.bits == 32 else np.int64(i)
                    yield s.body, mask & (lo_all <= i) & (i < hi_all)
                self.env.pop(s.var, None)
            case Allocate():
                rows = self.nblocks if s.scope == "shared" else self.n
                if s.scope not in ("shared", "local"):
                    self.fail(f"allocates '{s.buffer.name}' in {s.scope} memory")
                self.alloc(s.buffer, s.scope, rows)
                yield s.body, mask
                del self.mem[s.buffer]
            case Barrier():
                per_block = np.bincount(self.block_of[mask], minlength=self.nblocks)
                active = per_block[per_block > 0]
                if (active != self.bsize).any():
                    self.fail("a barrier is reached by only some threads of a block")
                for m in self.mem.values():
                    if m.space == "shared":
                        m.sync()
            case _:
                self.fail(f"unknown statement {type(s).__name__}")

    def alloc(self, buf: Tensor, scope: str, rows: int) -> None:
        d = buf.dtype.numpy
        fill = np.nan if d.kind == "f" else 0
        data = np.full((rows, int(buf.shape[0])), fill, d)
        self.mem[buf] = _Memory(buf.name, data, scope, rows)


def simulate(program: DeviceProgram, arrays: Sequence[Any]) -> None:
    """Run ``program`` on NumPy arrays (the function's arguments in order; outputs are
    written in place), checking races, bounds and barriers (``SimulationError``)."""
    func = program.func
    if len(arrays) != len(func.params):
        raise TypeError(f"simulate: {func.name} takes {len(func.params)} arguments, "
                        f"got {len(arrays)}")
    mem: dict[Tensor, _Memory] = {}
    scalars: dict[Var, Any] = {}
    for p, a in zip(func.params, arrays):
        if isinstance(p, ScalarParam):
            scalars[p.var] = np.asarray(a, p.var.dtype.numpy)
            continue
        assert isinstance(p, BufferParam)
        arr = np.asarray(a)
        want = tuple(bind_extent(d, {v: int(x) for v, x in scalars.items()})
                     for d in p.tensor.shape)
        if arr.dtype != p.tensor.dtype.numpy or arr.shape != want:
            raise ValueError(f"simulate: argument '{p.name}' must be "
                             f"{p.tensor.dtype.name}{list(p.tensor.shape)}, got "
                             f"{arr.dtype}{list(arr.shape)}")
        mem[p.buffer] = _Memory(p.name, arr.reshape(-1), "global")
    for t in program.temps:
        d = t.dtype.numpy
        size = bind_extent(t.shape[0], {v: int(x) for v, x in scalars.items()})
        m = _Memory(t.name, np.full(int(size), np.nan if d.kind == "f" else 0, d), "global")
        m.init[:] = False
        mem[t] = m
    slot = program.error_slot
    if slot is not None:
        mem[slot] = _Memory(slot.name, np.zeros(2, np.int64), "global")
    for kernel, loops in program.launches({v: int(x) for v, x in scalars.items()}):
        grid = kernel.launch_grid({v: int(x) for v, x in scalars.items()})
        if 0 in grid:
            continue  # (an empty grid: a symbolic extent of 0)
        _run(kernel, mem, {**scalars, **{v: np.asarray(x, v.dtype.numpy)
                                        for v, x in loops.items()}}, grid)
    for p, a in zip(func.params, arrays):
        if isinstance(p, BufferParam) and p.is_output and isinstance(a, np.ndarray):
            a.reshape(-1)[:] = mem[p.buffer].data.reshape(-1)
    if slot is not None:
        error = program.bounds_error(mem[slot].data.reshape(-1))
        if error is not None:
            raise error




def _run(kernel: Kernel, mem: dict[Tensor, _Memory], scalars: dict[Var, Any],
         grid: tuple[int, int, int] | None = None) -> None:
    for m in mem.values():
        m.sync()
    sim = _Sim(kernel, mem, scalars, grid)
    for buf in kernel.shared:
        sim.alloc(buf, "shared", sim.nblocks)
    sim.run(kernel.body, np.ones(sim.n, bool))


def run_kernel(kernel: Kernel, buffers: dict[Tensor, np.ndarray], scalars: dict[Var, Any],
               grid: tuple[int, int, int] | None = None) -> None:
    """Run one kernel on flat NumPy buffers (keyed by the kernel's buffer tensors; written in
    place) and scalar values (keyed by their variables), with the checks of ``simulate``;
    ``grid``: this launch's (a symbolic grid's values)."""
    mem = {t: _Memory(t.name, a.reshape(-1), "global") for t, a in buffers.items()}
    _run(kernel, mem, {v: np.asarray(x, v.dtype.numpy) for v, x in scalars.items()}, grid)


class SimulatedDriver:
    """The CUDA driver interface ``CudaFunction`` uses, on host memory, launching kernels
    in this simulator: ``f.simulate(*arrays)`` runs a CUDA function without a GPU, through
    the same argument handling as a real call."""

    def __init__(self, program: DeviceProgram) -> None:
        self.program = program
        self.kernels = {k.name: k for k in program.kernels}
        self.memory: dict[int, np.ndarray] = {}
        self.next = 1 << 20
        self.lock = threading.Lock()
        self.launched: list[str] = []

    def activate(self) -> None:
        return None

    def load_module(self, ptx: str) -> str:
        if ".entry" not in ptx:
            raise SimulationError("the module has no kernel entry")
        return "module"

    def function(self, module: str, name: str) -> str:
        if name not in self.kernels:
            raise SimulationError(f"no kernel named {name}")
        return name

    def alloc(self, nbytes: int) -> int:
        ptr = self.next
        self.next += -(-max(nbytes, 1) // 256) * 256 + 256
        self.memory[ptr] = np.zeros(max(nbytes, 1), np.uint8)
        return ptr

    def free(self, ptr: int) -> None:
        del self.memory[ptr]

    def to_device(self, dst: int, src: int, nbytes: int) -> None:
        self.memory[dst][:nbytes] = np.frombuffer((ctypes.c_char * nbytes).from_address(src),
                                                  np.uint8)

    def to_host(self, dst: int, src: int, nbytes: int) -> None:
        np.frombuffer((ctypes.c_char * nbytes).from_address(dst), np.uint8)[:] = \
            self.memory[src][:nbytes]

    def launch(self, fn: str, grid: Sequence[int], block: Sequence[int],
               args: Sequence[Any]) -> None:
        kernel = self.kernels[fn]
        compiled = tuple(g if isinstance(g, int) else grid[k] for k, g in enumerate(kernel.grid))
        if tuple(grid) != compiled or tuple(block) != kernel.block:
            raise SimulationError(f"{fn} launched with grid {tuple(grid)}, block "
                                  f"{tuple(block)}; compiled for {kernel.grid}, {kernel.block}")
        buffers: dict[Tensor, np.ndarray] = {}
        scalars: dict[Var, Any] = {}
        for p, a in zip(kernel.params, args):
            if isinstance(p, BufferParam):
                raw = self.memory.get(a.value)
                if raw is None:
                    raise SimulationError(f"{fn}: parameter {p.name} is not a device pointer")
                view = raw.view(p.buffer.dtype.numpy)
                size = p.buffer.shape[0]  # (symbolic: the allocation's own size)
                buffers[p.buffer] = view[:int(size)] if not isinstance(size, Expr) else view
            else:
                scalars[p.var] = a.value
        run_kernel(kernel, buffers, scalars, tuple(grid))
        self.launched.append(fn)

    def synchronize(self) -> None:
        return None
