"""``te.extern``: tensors written by a function outside tex, and the table of named functions.

``extern(shape, inputs, fcompute)`` makes an ``ExternOp``: ``fcompute(ins, outs)`` gets an
``ExternBuffer`` per input and output and returns ``tir.call_packed(func, *args)``, where
``func`` is

- a name registered with ``register_func`` (TVM's packed functions; looked up each time the
  program runs, so a later registration with ``override=True`` takes effect),
- a Python callable, or
- a ctypes function (a C function pointer, e.g. from ``ctypes.CDLL``),

and ``args`` are buffers, scalar expressions (constants, ``tex.var`` arguments) and strings.
A Python function gets each buffer as an ``NDArray`` view of the data (writing an output
view writes the output) and each scalar as a Python number; a ctypes function gets each
buffer's data pointer. Every element of every output must be written: tex never reads
what the function leaves out.

The function table is process-wide by design, as TVM's ``register_func`` is: a program
names a function that another module defines. ``call`` runs one ``PackedCall`` on arrays
for the reference interpreter and the compiled code's callback alike.
"""
from __future__ import annotations

import ctypes
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..dtype import as_dtype
from ..ir.expr import Expr, TensorRead, as_expr
from ..ir.tensor import ExternBuffer, ExternOp, PackedCall, Tensor
from ..ir.visit import post_order
from .operation import check_shape

__all__ = ["extern", "call_packed", "register_func", "get_global_func",
           "list_global_func_names", "remove_global_func", "resolve", "call", "scalar_args",
           "python_value"]



def _blas_matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray, transa: bool = False,
                 transb: bool = False) -> None:
    """``c = op(a) @ op(b)`` through NumPy's BLAS (``op``: transposed when asked)."""
    np.matmul(a.T if transa else a, b.T if transb else b, out=c)


def _blas_batch_matmul(a: np.ndarray, b: np.ndarray, c: np.ndarray, transa: bool = False,
                       transb: bool = False) -> None:
    """``c[k] = op(a[k]) @ op(b[k])`` for each batch ``k`` (a batch of 1 broadcasts)."""
    np.matmul(np.swapaxes(a, -1, -2) if transa else a,
              np.swapaxes(b, -1, -2) if transb else b, out=c)


# name -> function: the built-in ones (``tex.contrib.cblas``'s, also under TVM's names),
# then what register_func adds
_FUNCTIONS: dict[str, Callable[..., Any]] = {
    "tex.contrib.cblas.matmul": _blas_matmul,
    "tex.contrib.cblas.batch_matmul": _blas_batch_matmul,
    "tvm.contrib.cblas.matmul": _blas_matmul,
    "tvm.contrib.cblas.batch_matmul": _blas_batch_matmul,
}


def register_func(func_name: Any, f: Callable[..., Any] | None = None,
                  override: bool = False) -> Any:
    """Register ``f`` under ``func_name`` for ``call_packed``; as TVM's: also a decorator,
    ``@register_func("name")`` or ``@register_func`` (the function's own name).

    Raises ``ValueError`` when the name is taken (unless ``override``)."""
    if callable(func_name) and f is None:
        return register_func(func_name.__name__, func_name, override)
    if not isinstance(func_name, str) or not func_name:
        raise TypeError(f"register_func: the name must be a non-empty string, got "
                        f"{type(func_name).__name__} {func_name!r}")
    if not isinstance(override, bool):
        raise TypeError(f"register_func: override must be a bool, got {override!r}")

    def register(fn: Callable[..., Any]) -> Callable[..., Any]:
        if not callable(fn):
            raise TypeError(f"register_func('{func_name}'): {type(fn).__name__} {fn!r} is "
                            "not callable")
        if func_name in _FUNCTIONS and not override:
            raise ValueError(f"register_func: '{func_name}' is already registered; pass "
                             "override=True to replace it")
        _FUNCTIONS[func_name] = fn
        return fn

    return register if f is None else register(f)


def get_global_func(name: str, allow_missing: bool = False) -> Callable[..., Any] | None:
    """The function registered under ``name``; None when missing and ``allow_missing``,
    else ``ValueError`` naming the registered functions."""
    fn = _FUNCTIONS.get(name)
    if fn is None and not allow_missing:
        raise ValueError(f"no function is registered under '{name}' (tex.register_func "
                         f"registers one); registered: {', '.join(sorted(_FUNCTIONS)) or 'none'}")
    return fn


def list_global_func_names() -> list[str]:
    """The registered names, sorted."""
    return sorted(_FUNCTIONS)


def remove_global_func(name: str) -> None:
    """Forget the function registered under ``name`` (``KeyError`` if there is none)."""
    if name not in _FUNCTIONS:
        raise KeyError(f"no function is registered under '{name}'")
    del _FUNCTIONS[name]


def call_packed(func: Any, *args: Any) -> PackedCall:
    """A call of ``func`` (a registered name, a Python callable or a ctypes function) with
    ``args`` (``ExternBuffer``s, scalars, strings): what ``extern``'s ``fcompute`` returns."""
    if not (isinstance(func, str) and func) and not callable(func):
        raise TypeError(f"call_packed: the function must be a registered name, a Python "
                        f"callable or a ctypes function, got {type(func).__name__} {func!r}")
    checked: list[Any] = []
    for k, a in enumerate(args):
        if isinstance(a, (ExternBuffer, str)):
            checked.append(a)
        elif isinstance(a, Tensor):
            raise TypeError(f"call_packed: argument {k} is the tensor '{a.name}'; pass the "
                            "buffers fcompute(ins, outs) receives (ins[0], outs[0], ...)")
        else:
            e = as_expr(a, f"call_packed argument {k}")
            read = next((n for n in post_order(e) if isinstance(n, TensorRead)), None)
            if read is not None:
                raise TypeError(f"call_packed: argument {k} reads the tensor "
                                f"'{read.tensor.name}'; pass whole tensors as buffers (an "
                                "input of the extern) and scalars as expressions of "
                                "constants and tex.var arguments")
            checked.append(e)
    return PackedCall(func, checked)


def _shapes(shape: Any, what: str) -> list[tuple[int, ...]]:
    """One shape, or a list of shapes (one per output)."""
    if isinstance(shape, (list, tuple)) and shape and \
            all(isinstance(s, (list, tuple)) for s in shape):
        return [check_shape(s, f"{what} output {k}") for k, s in enumerate(shape)]
    return [check_shape(shape, what)]


def extern(shape: Any, inputs: Sequence[Tensor], fcompute: Callable[..., Any],
           name: str = "extern", dtype: Any = None, in_buffers: Any = None,
           out_buffers: Any = None, tag: str = "", attrs: Mapping[str, Any] | None = None
           ) -> Any:
    """Tensors of ``shape`` (or a list of shapes) written by the call ``fcompute(ins, outs)``
    returns (``call_packed``), ``ins``/``outs`` being an ``ExternBuffer`` per input tensor
    and per output. ``dtype``: one for all outputs or a list (default: the first input's,
    else float32). Returns the tensor, or the list of tensors for several shapes.

    ``in_buffers``/``out_buffers`` (TVM's buffer bindings) must be None: tex has no buffer
    objects, every buffer is dense and row-major. The call's effects are not seen by tex:
    a gradient through it needs ``tex.differentiate(..., override={C: ([A, B], fdiff)})``."""
    what = f"extern '{name}'"
    if not isinstance(name, str) or not name:
        raise TypeError(f"extern: name must be a non-empty string, got {name!r}")
    if in_buffers is not None or out_buffers is not None:
        raise ValueError(f"{what}: in_buffers/out_buffers are not supported (tex has no "
                         "buffer objects: every buffer is dense and row-major); leave them None")
    if isinstance(inputs, Tensor):
        inputs = [inputs]
    if not isinstance(inputs, (list, tuple)):
        raise TypeError(f"{what}: inputs must be a list of tensors, got "
                        f"{type(inputs).__name__}")
    for k, t in enumerate(inputs):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: input {k} must be a Tensor, got {type(t).__name__} {t!r}")
    if not callable(fcompute):
        raise TypeError(f"{what}: fcompute must be a function (ins, outs) -> "
                        "tir.call_packed(...)")
    shapes = _shapes(shape, what)
    if dtype is None:
        dtypes = [inputs[0].dtype if inputs else as_dtype("float32")] * len(shapes)
    elif isinstance(dtype, (list, tuple)):
        if len(dtype) != len(shapes):
            raise ValueError(f"{what}: {len(dtype)} dtypes for {len(shapes)} outputs")
        dtypes = [as_dtype(d, what) for d in dtype]
    else:
        dtypes = [as_dtype(dtype, what)] * len(shapes)
    ins = [ExternBuffer(t.name, t.shape, t.dtype, "in", k) for k, t in enumerate(inputs)]
    outs = [ExternBuffer(name if len(shapes) == 1 else f"{name}.v{k}", s, d, "out", k)
            for k, (s, d) in enumerate(zip(shapes, dtypes))]
    result = fcompute(ins, outs)
    if not isinstance(result, PackedCall):
        raise TypeError(f"{what}: fcompute must return tir.call_packed(func, *args) (tex "
                        "calls one function outside tex; ir_builder statements are not "
                        f"supported), got {type(result).__name__} {result!r}")
    mine = {id(b) for b in (*ins, *outs)}
    for k, a in enumerate(result.args):
        if isinstance(a, ExternBuffer) and id(a) not in mine:
            raise ValueError(f"{what}: argument {k} of the call is the buffer '{a.name}' of "
                             "another extern")
    if not any(isinstance(a, ExternBuffer) and a.role == "out" for a in result.args):
        raise ValueError(f"{what}: the call is given no output buffer (pass outs[0])")
    op = ExternOp(name, inputs, ins, outs, result, tag, dict(attrs or {}))
    return op.output(0) if len(shapes) == 1 else list(op.outputs)


def resolve(func: Any) -> Callable[..., Any]:
    """The function a ``PackedCall`` names, looked up now (``ValueError`` when missing)."""
    if isinstance(func, str):
        fn = get_global_func(func)
        assert fn is not None
        return fn
    return func  # type: ignore[no-any-return]


def call(op: ExternOp, arrays: Mapping[ExternBuffer, np.ndarray],
         scalars: Sequence[Any], wrap: Callable[[np.ndarray], Any] = lambda a: a) -> None:
    """Run ``op``'s call: buffer arguments from ``arrays`` (C-contiguous, the outputs
    writeable), scalar arguments from ``scalars`` (Python numbers, in order), strings as
    given. A Python function gets ``wrap(array)``; a ctypes function data pointers."""
    fn = resolve(op.call.func)
    is_c = isinstance(fn, ctypes._CFuncPtr)  # type: ignore[attr-defined]
    values = iter(scalars)
    args: list[Any] = []
    for a in op.call.args:
        if isinstance(a, ExternBuffer):
            arr = arrays[a]
            args.append(ctypes.c_void_p(arr.ctypes.data) if is_c else wrap(arr))
        elif isinstance(a, str):
            args.append(a.encode() if is_c else a)
        else:
            v = next(values)
            if is_c and isinstance(v, float) and not fn.argtypes:
                v = ctypes.c_double(v)
            args.append(v)
    fn(*args)


def scalar_args(op: ExternOp) -> list[Expr]:
    """The scalar expressions among ``op``'s call arguments, in order."""
    return [a for a in op.call.args if isinstance(a, Expr)]


def python_value(e: Expr, value: Any) -> Any:
    """A scalar argument's value as a Python number of its dtype's kind."""
    d = e.dtype
    if d.is_bool:
        return bool(value)
    if d.is_float:
        return float(np.dtype(d.name).type(value))
    return int(value)
