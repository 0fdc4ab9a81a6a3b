"""The extern calls of a built function: what each passes, and the callback that runs them.

A function with ``te.extern`` stages calls back into Python once per extern call
(``tex.codegen.emit``: ``i32 callback(i64 index, ptr buffers, ptr scalars)``, its address
in the call's error record). ``ExternSpec`` describes one call site as plain values (the
function, or its registered name; each argument: a buffer's dtype, shape and whether it is
written, a scalar's dtype, a string), so that ``export_library`` can write it and
``load_module`` run it in another process. ``Externs`` turns the pointers and 64-bit
scalar slots the code passes into arrays and numbers and calls the function
(``tex.te.extern.call``); what it raises is kept (per thread) and raised by the caller
after the compiled code returned.
"""
from __future__ import annotations

import ctypes
import math
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..dtype import DType, as_dtype
from ..ir.expr import Expr
from ..ir.tensor import ExternBuffer, ExternOp
from ..lower.stmt import ExternCall, LoweredFunc, walk_stmts
from ..te.extern import resolve
from .ndarray import NDArray

__all__ = ["ExternSpec", "Externs", "CALLBACK", "extern_specs"]

# i32 callback(i64 index, ptr buffers, ptr scalars)
CALLBACK = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int64, ctypes.c_void_p, ctypes.c_void_p)


@dataclass(frozen=True)
class ExternSpec:
    """One extern call site: ``func`` (a registered name or a callable), ``name`` (the
    stage's), and its arguments in call order, each ``("buffer", dtype, shape, written)``,
    ``("scalar", dtype)`` or ``("string", text)``."""

    name: str
    func: Any
    args: tuple[tuple[Any, ...], ...]

    @classmethod
    def of(cls, op: ExternOp) -> ExternSpec:
        args: list[tuple[Any, ...]] = []
        for a in op.call.args:
            if isinstance(a, ExternBuffer):
                args.append(("buffer", a.dtype, a.shape, a.role == "out"))
            elif isinstance(a, Expr):
                args.append(("scalar", a.dtype))
            else:
                args.append(("string", a))
        return cls(op.name, op.call.func, tuple(args))

    def as_record(self) -> dict[str, Any]:
        """The spec as JSON values (a registered name only: ``ValueError`` for a callable,
        which another process could not find)."""
        if not isinstance(self.func, str):
            raise ValueError(f"the extern call '{self.name}' calls the Python object "
                             f"{self.func!r}, which another process cannot find; register it "
                             "(tex.register_func(name, f)) and call it by name to export")
        args: list[list[Any]] = []
        for a in self.args:
            if a[0] == "buffer":
                args.append(["buffer", a[1].name, list(a[2]), a[3]])
            elif a[0] == "scalar":
                args.append(["scalar", a[1].name])
            else:
                args.append(["string", a[1]])
        return {"name": self.name, "func": self.func, "args": args}

    @classmethod
    def from_record(cls, rec: dict[str, Any]) -> ExternSpec:
        args: list[tuple[Any, ...]] = []
        for a in rec["args"]:
            if a[0] == "buffer":
                args.append(("buffer", as_dtype(a[1]), tuple(int(n) for n in a[2]), bool(a[3])))
            elif a[0] == "scalar":
                args.append(("scalar", as_dtype(a[1])))
            else:
                args.append(("string", str(a[1])))
        return cls(str(rec["name"]), str(rec["func"]), tuple(args))


def extern_specs(func: LoweredFunc) -> list[ExternSpec]:
    """The extern call sites of ``func`` by their index (``ExternCall.index``)."""
    calls = {s.index: s.op for s in walk_stmts(func.body) if isinstance(s, ExternCall)}
    if sorted(calls) != list(range(len(calls))):
        raise ValueError(f"{func.name}: extern calls numbered {sorted(calls)}")
    return [ExternSpec.of(calls[k]) for k in range(len(calls))]


def _scalar(d: DType, bits: int) -> Any:
    """A scalar argument's 64-bit slot as a Python number of its dtype."""
    if d.is_float:
        value = float(np.array(bits, dtype=np.int64).view(np.float64))
        return float(np.dtype(d.name).type(value))
    if d.is_bool:
        return bool(bits)
    return int(bits)


class Externs:
    """The extern calls of one built function and the ctypes callback running them
    (``address`` goes into the error record). What each call passes is worked out once
    (``_plan``): a call converts pointers and slots, nothing more."""

    def __init__(self, specs: Sequence[ExternSpec], function: str) -> None:
        self.specs = tuple(specs)
        self.function = function
        self._plans = [_plan(s) for s in self.specs]
        self._pending = threading.local()
        self._callback = CALLBACK(self._call)  # kept alive as long as this object
        self.address = ctypes.cast(self._callback, ctypes.c_void_p).value

    def _call(self, index: int, buffers: int, scalars: int) -> int:
        try:
            self.run(index, buffers, scalars)
            return 0
        except BaseException as exc:  # noqa: BLE001 - raised again by the caller
            self._pending.error = exc
            return 1

    def run(self, index: int, buffers: int, scalars: int) -> None:
        """Call extern ``index``'s function on the buffers at the pointers in ``buffers``
        and the scalars in the 64-bit slots at ``scalars``."""
        spec = self.specs[index]
        pointers, slots, steps = self._plans[index]
        fn = resolve(spec.func)
        is_c = isinstance(fn, ctypes._CFuncPtr)  # type: ignore[attr-defined]
        ptrs = pointers.from_address(buffers)
        vals = slots.from_address(scalars)
        args: list[Any] = []
        kb = ks = 0
        for kind, a, b, c, written in steps:
            if kind == 0:  # a buffer: its bytes as a ctypes type, shape, dtype
                p = ptrs[kb]
                kb += 1
                if is_c:
                    args.append(ctypes.c_void_p(p))
                elif p and a is not None:
                    arr = np.ndarray.__new__(NDArray, b, c, a.from_address(p))
                    if not written:
                        arr.flags.writeable = False  # an input: the caller's data
                    args.append(arr)
                else:  # an empty buffer
                    args.append(np.empty(b, c).view(NDArray))
            elif kind == 1:  # a scalar of dtype a
                v = _scalar(a, vals[ks])
                ks += 1
                if is_c and isinstance(v, float) and not fn.argtypes:
                    v = ctypes.c_double(v)
                args.append(v)
            else:  # a string
                args.append(a.encode() if is_c else a)
        fn(*args)

    def raise_pending(self) -> None:
        """Raise what the extern call of this thread's last run raised."""
        exc = getattr(self._pending, "error", None)
        self._pending.error = None
        if exc is None:
            raise RuntimeError(f"{self.function}: an extern call failed")
        exc.add_note(f"(raised by an extern call of the built function '{self.function}'; "
                     "its outputs are incomplete)")
        raise exc


def _plan(spec: ExternSpec) -> tuple[Any, Any, list[tuple[int, Any, Any, Any, bool]]]:
    """The ctypes array types of a call's pointer and scalar slots, and one step per
    argument: ``(0, bytes type or None, shape, dtype, written)`` for a buffer, ``(1,
    dtype, ...)`` for a scalar, ``(2, text, ...)`` for a string."""
    nb = sum(1 for a in spec.args if a[0] == "buffer")
    ns = sum(1 for a in spec.args if a[0] == "scalar")
    steps: list[tuple[int, Any, Any, Any, bool]] = []
    for a in spec.args:
        if a[0] == "buffer":
            dtype = np.dtype(a[1].name)
            nbytes = math.prod(a[2]) * dtype.itemsize
            steps.append((0, ctypes.c_char * nbytes if nbytes else None, a[2], dtype, a[3]))
        elif a[0] == "scalar":
            steps.append((1, a[1], None, None, False))
        else:
            steps.append((2, a[1], None, None, False))
    return ctypes.c_void_p * max(nb, 1), ctypes.c_int64 * max(ns, 1), steps
