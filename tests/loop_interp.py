"""A slow, obviously-correct Python interpreter of lowered loop nests (test helper only).

It checks lowering independently of LLVM: every loop iteration runs in Python, every
scalar op through ``tex.ir.semantics``; an out-of-bounds load or store raises IndexError
(so an unguarded read of padding is caught), Select evaluates only the taken branch and
``&&``/``||`` their right side only where the left leaves the result open (as compiled
code does).
"""
from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from tex.debug import OutOfBoundsError
from tex.ir.expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    Op,
    Select,
    TensorRead,
    Unary,
    Var,
)
from tex.ir.semantics import NUMPY_BINARY, NUMPY_UNARY, numpy_cast
from tex.lower.bounds_check import is_report
from tex.lower.stmt import (
    Allocate,
    BufferParam,
    For,
    IfThenElse,
    LetStmt,
    LoweredFunc,
    ScalarParam,
    Seq,
    Stmt,
    Store,
)


class _Machine:
    def __init__(self) -> None:
        self.env: dict[Var, np.generic] = {}
        self.mem: dict[object, np.ndarray] = {}

    def ev(self, e: Expr) -> np.generic:
        match e:
            case Const(value, dtype):
                return np.asarray(value, dtype.numpy)[()]
            case Var():
                return self.env[e]
            case TensorRead(buf, (ix,)) if is_report(buf):
                raise OutOfBoundsError(buf.op.describe(int(self.ev(ix))))
            case TensorRead(buf, (ix,)):
                i = int(self.ev(ix))
                arr = self.mem[buf]
                if not 0 <= i < arr.size:
                    raise IndexError(f"load {buf.name}[{i}] out of bounds ({arr.size})")
                return arr[i]
            case Unary(op, a):
                return NUMPY_UNARY[op](np.asarray(self.ev(a)))[()].astype(e.dtype.numpy)
            case Binary(Op.AND, a, b):
                return np.bool_(bool(self.ev(a)) and bool(self.ev(b)))
            case Binary(Op.OR, a, b):
                return np.bool_(bool(self.ev(a)) or bool(self.ev(b)))
            case Binary(op, a, b) | Compare(op, a, b):
                x, y = np.asarray(self.ev(a)), np.asarray(self.ev(b))
                return np.asarray(NUMPY_BINARY[op](x, y)).astype(e.dtype.numpy)[()]
            case Select(c, a, b):
                return self.ev(a) if bool(self.ev(c)) else self.ev(b)
            case Cast(dtype, a):
                return numpy_cast(np.asarray(self.ev(a)), dtype.numpy)[()]
        raise TypeError(f"cannot interpret {type(e).__name__}")

    def run(self, s: Stmt) -> None:
        match s:
            case For(var, lo, ext, _kind, body):
                start, n = int(self.ev(lo)), int(self.ev(ext))
                for v in range(start, start + n):
                    self.env[var] = np.int32(v)
                    self.run(body)
            case Store(buf, ix, value):
                i = int(self.ev(ix))
                arr = self.mem[buf]
                if not 0 <= i < arr.size:
                    raise IndexError(f"store {buf.name}[{i}] out of bounds ({arr.size})")
                arr[i] = self.ev(value)
            case Allocate(buf, _scope, body):
                # garbage-filled, so a read before write shows up as a wrong value
                self.mem[buf] = np.full(buf.shape[0], 12345, buf.dtype.numpy)
                self.run(body)
            case IfThenElse(cond, then, other):
                if bool(self.ev(cond)):
                    self.run(then)
                elif other is not None:
                    self.run(other)
            case LetStmt(var, value, body):
                self.env[var] = self.ev(value)
                self.run(body)
            case Seq(body):
                for c in body:
                    self.run(c)
            case _:
                raise TypeError(f"cannot interpret {type(s).__name__}")


def run_lowered(func: LoweredFunc, arrays: Sequence[object]) -> None:
    """Run ``func`` on the arguments (NumPy arrays, written in place; scalars by value)."""
    m = _Machine()
    for p, a in zip(func.params, arrays, strict=True):
        if isinstance(p, ScalarParam):
            m.env[p.var] = np.asarray(a, p.var.dtype.numpy)[()]
        else:
            assert isinstance(p, BufferParam)
            assert isinstance(a, np.ndarray) and a.flags.c_contiguous
            m.mem[p.buffer] = a.reshape(-1)
    with np.errstate(all="ignore"):
        m.run(func.body)
