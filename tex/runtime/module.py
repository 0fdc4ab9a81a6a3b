"""The built function: argument checks, the ctypes call, sources, benchmarking.

``BuiltFunction(*arrays)`` checks every argument against the parameter it binds, then
calls the machine code through a ctypes function pointer (which releases the GIL):

- buffers: a ``numpy.ndarray`` of exactly the parameter's dtype and shape, C-contiguous;
  outputs also writeable and sharing no memory with any other argument (that is what makes
  the generated code's ``noalias`` sound); inputs may overlap each other;
- scalars: a Python or NumPy number (``bool`` for bool parameters; an integer parameter
  refuses floats, bools and values out of its range).

Every violation raises ``TypeError`` (count, type, dtype, scalar kind) or ``ValueError``
(shape, layout, writeability, overlap, range) naming the argument by position and name.
Outputs are written in place; the call returns None.

Cost: the data pointer is read straight from the array object (``PyArrayObject.data``, at
an offset found and checked once at import against ``ndarray.ctypes.data``; ten times
faster than ``.ctypes.data``); the checks are a handful of attribute reads per argument.
"""
from __future__ import annotations

import ctypes
import math
import os
import statistics
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import numpy as np

from ..arith.extent import bind_extent, extent_value, extent_vars
from ..codegen.llvm import CompiledModule
from ..codegen.module import EXTERN_FAILED, EXTERN_SLOT
from ..debug import OutOfBoundsError
from ..dtype import DType
from ..ir.expr import Expr, Var
from ..ir.tensor import Shape, Tensor
from ..lower.stmt import BufferParam, ScalarParam
from ..te.specialize import bind_shape_vars
from .externs import Externs, ExternSpec
from .jit import Kernel
from .ndarray import NDArray
from .openmp import note_parallel_run, parallel_allowed

__all__ = ["BuiltFunction", "SOURCE_FORMATS", "ArgSpec", "BenchmarkResult", "ModuleAPI",
           "Signature", "SymbolicShapes", "arg_specs", "conversion_hint", "data_pointer",
           "param_signature"]

# a function's arguments in call order, each with whether it is an output
Signature = tuple[tuple[Tensor | Var, bool], ...]

SOURCE_FORMATS = {"": "opt", "ll": "opt", "llvm": "opt", "ll.opt": "opt", "ll.raw": "raw",
                  "llvm.raw": "raw", "asm": "asm", "s": "asm"}


def _find_data_offset() -> int | None:
    """Offset of the data pointer inside a NumPy array object, verified on probes."""
    probes = [np.empty(n, dtype) for n, dtype in ((3, np.float32), (7, np.int64), (0, np.int8))]
    for offset in range(8, 64, 8):
        try:
            if all(ctypes.c_void_p.from_address(id(a) + offset).value == a.ctypes.data
                   for a in probes if a.ctypes.data):
                return offset
        except (ValueError, OSError):  # pragma: no cover - unreadable: give up
            return None
    return None  # pragma: no cover - unknown layout: fall back to .ctypes.data


_DATA_OFFSET = _find_data_offset()


class _Sizes(NamedTuple):
    """One call's shape variables: each buffer argument's shape, the derived values."""

    shapes: dict[int, tuple[int, ...]]
    derived: list[int]


class SymbolicShapes:
    """How a function with symbolic shapes gets its shape variables at a call: from the
    arrays' shapes (TVM's rule: a dimension that is a variable binds it, any other is
    checked), and from the scalar arguments that are shape variables. ``derived``: how
    many trailing scalar parameters the caller may leave out (the lowering appends the
    shape variables no argument names)."""

    def __init__(self, signature: Signature, name: str) -> None:
        self.name = name
        self._by_spec: dict[int, Tensor | Var] = {k: a for k, (a, _) in enumerate(signature)}
        # the sizes of recent calls, by their arguments' shapes (a dict kept in insertion
        # order: the oldest entry goes first; per function, not global)
        self._seen: dict[tuple[Any, ...], _Sizes] = {}
        tensors = [a for a, _ in signature if isinstance(a, Tensor)]
        self.symbolic = any(isinstance(n, Expr) for t in tensors for n in t.shape)
        vars_ = set(extent_vars(*[tuple(t.shape) for t in tensors]))
        self.derived = 0
        for a, _ in reversed(signature):
            if isinstance(a, Tensor) or a not in vars_:
                break
            self.derived += 1
        # the fast path of a new size: when every variable is a dimension of some buffer
        # argument (none among the scalars the caller passes), binding is a walk over the
        # arrays' shapes, then compound dimensions evaluated; anything else takes the
        # general rule (which also names what is wrong)
        self._plain: tuple[tuple[int, tuple[int | Expr, ...]], ...] | None = tuple(
            (k, tuple(a.shape)) for k, (a, _) in enumerate(signature) if isinstance(a, Tensor))
        plain_vars = {d for _, dims in self._plain for d in dims if isinstance(d, Var)}
        passed = signature[:len(signature) - self.derived]
        if not vars_ <= plain_vars or any(isinstance(a, Var) and a in vars_ for a, _ in passed):
            self._plain = None

    def check_call(self, specs: Sequence[ArgSpec], arrays: Sequence[Any],
                   signature: Callable[[], str]) -> _Sizes | None:
        """The argument count checked (the derived shape variables may be left out), and
        this call's sizes (None without symbolic shapes); ``signature()`` describes the
        arguments in the message."""
        if len(arrays) != len(specs) and not (
                self.derived and len(arrays) == len(specs) - self.derived):
            takes = f"{len(specs)} arguments" if not self.derived else \
                f"{len(specs) - self.derived} arguments (or {len(specs)}, with the shape " \
                "variables)"
            raise TypeError(f"{self.name}() takes {takes} ({signature()}) but "
                            f"{len(arrays)} were given")
        return self.bind(specs, arrays) if self.symbolic else None

    def bind(self, specs: Sequence[ArgSpec], arrays: Sequence[Any]) -> _Sizes:
        """The shapes every buffer argument must have at this call, and the values of the
        derived parameters; ``ValueError`` naming the arguments that disagree. Remembered
        by the arguments' shapes (and given sizes): a call at sizes seen before costs a
        lookup."""
        key = tuple(getattr(a, "shape", a) if spec.is_buffer else
                    (a if self._var(spec) is not None else None)
                    for spec, a in zip(specs, arrays))
        try:
            hit = self._seen.get(key)
        except TypeError:  # (an unhashable argument: checked in full below)
            hit, key = None, None
        if hit is not None:
            return hit
        sizes = self._bind(specs, arrays)
        if key is not None:
            if len(self._seen) >= _SEEN_SIZES:
                self._seen.pop(next(iter(self._seen)))
            self._seen[key] = sizes
        return sizes

    def _bind(self, specs: Sequence[ArgSpec], arrays: Sequence[Any]) -> _Sizes:
        if self._plain is not None and len(arrays) == len(specs) - self.derived:
            fast = self._plain_bind(specs, arrays)
            if fast is not None:
                return fast
        return self._general_bind(specs, arrays)

    def _plain_bind(self, specs: Sequence[ArgSpec], arrays: Sequence[Any]) -> _Sizes | None:
        """The sizes when every dimension is an int or a variable and the arrays agree
        (None: anything unusual, for the general rule to check and name)."""
        assert self._plain is not None
        bound: dict[Var, int] = {}
        out: dict[int, tuple[int, ...]] = {}
        compound = False
        for k, dims in self._plain:
            shape = getattr(arrays[k], "shape", None)
            if not isinstance(shape, tuple) or len(shape) != len(dims):
                return None
            for d, n in zip(dims, shape):
                if type(d) is int:
                    if d != n:
                        return None
                elif isinstance(d, Var):
                    if bound.setdefault(d, n) != n or n < 1:
                        return None
                else:
                    compound = True
            if math.prod(shape) > _INT32_MAX:
                return None
            out[k] = shape
        if compound:
            for k, dims in self._plain:
                for d, n in zip(dims, out[k]):
                    if isinstance(d, Expr) and not isinstance(d, Var) and (
                            n < 1 or extent_value(d, bound) != n):
                        return None
        try:
            derived = [bound[self._var(s)] for s in specs[len(specs) - self.derived:]]  # type: ignore
        except KeyError:
            return None
        if any(v.kind == "size" and n < 0 or n > _INT32_MAX for v, n in bound.items()):
            return None
        return _Sizes(out, derived)

    def _general_bind(self, specs: Sequence[ArgSpec], arrays: Sequence[Any]) -> _Sizes:
        given: dict[Var, int] = {}
        sources: dict[Var, str] = {}
        placeholders: list[Tensor] = []
        shapes: dict[Tensor, tuple[int, ...]] = {}
        tensors: dict[int, Tensor] = {}
        for spec, a in zip(specs, arrays):
            if spec.is_buffer:
                t = self._tensor(spec)
                tensors[spec.position] = t
                shape = getattr(a, "shape", None)  # (NumPy arrays; device arrays too)
                if isinstance(shape, tuple) or hasattr(shape, "__len__"):
                    placeholders.append(t)
                    shapes[t] = tuple(int(x) for x in shape)  # type: ignore[union-attr]
            elif (v := self._var(spec)) is not None:
                given[v] = spec.convert(a, spec)  # type: ignore[misc]
                sources[v] = spec.where()
        bound = bind_shape_vars(placeholders, shapes, given, self.name, sources)
        out: dict[int, tuple[int, ...]] = {}
        for k, t in tensors.items():
            dims = tuple(v if (v := extent_value(n, bound)) is not None else
                         bind_extent(n, bound) for n in t.shape)
            if not all(isinstance(n, int) for n in dims):
                free = ", ".join(v.name for v in extent_vars(dims))
                raise ValueError(f"{self.name}: no value for the shape variable {free} of "
                                 f"argument {k} ('{t.name}')")
            if math.prod(dims) > _INT32_MAX:
                raise ValueError(f"{self.name}: argument {k} ('{t.name}') of shape {dims} has "
                                 f"more than {_INT32_MAX} elements; a build with symbolic "
                                 "shapes indexes in int32")
            out[k] = dims  # type: ignore[assignment]
        derived = [bound[self._var(s)] for s in specs[len(specs) - self.derived:]]  # type: ignore
        return _Sizes(out, derived)

    def _tensor(self, spec: ArgSpec) -> Tensor:
        return self._by_spec[spec.position]  # type: ignore[no-any-return]

    def _var(self, spec: ArgSpec) -> Var | None:
        a = self._by_spec[spec.position]
        return a if isinstance(a, Var) and a.kind in ("var", "size") else None


_INT32_MAX = 2**31 - 1
_SEEN_SIZES = 256  # the argument shapes a function with symbolic shapes remembers sizes for


class _Entry(NamedTuple):
    """A kernel's entry point (its last argument: the call's error record)."""

    kernel: Kernel  # keeps the machine code alive
    cfunc: Any
    errors: bool  # whether the code writes the error record (else NULL is passed)


# a failure (1: a malloc, EXTERN_FAILED: an extern call); 1 + the first failed check; its
# index; the extern callback (tex.codegen.module)
_Record = ctypes.c_int64 * 4
_from_address = ctypes.c_void_p.from_address


def data_pointer(a: np.ndarray) -> int:
    if _DATA_OFFSET is not None:
        return _from_address(id(a) + _DATA_OFFSET).value or 0
    return a.ctypes.data  # type: ignore[no-any-return]  # pragma: no cover


@dataclass(frozen=True, slots=True)
class ArgSpec:
    """What one argument must be; precomputed at build time."""

    position: int
    name: str
    is_buffer: bool
    is_output: bool
    dtype: np.dtype
    shape: tuple[int, ...]
    convert: Callable[[Any, ArgSpec], Any] | None  # scalars: value -> ctypes argument

    def where(self) -> str:
        return f"argument {self.position} ('{self.name}')"


def _int_converter(d: DType, size: bool = False) -> Callable[[Any, ArgSpec], Any]:
    info = np.iinfo(d.numpy)
    lo, hi = 0 if size else int(info.min), int(info.max)

    def convert(v: Any, spec: ArgSpec) -> Any:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, np.integer)):
            raise TypeError(f"{spec.where()}: expected a Python or NumPy integer for "
                            f"{d.name} scalar parameter, got {type(v).__name__} {v!r}")
        v = int(v)
        if not lo <= v <= hi:
            what = "a size (tex.size_var) of" if size else ""
            raise ValueError(f"{spec.where()}: {v} does not fit in {what}{' ' if size else ''}"
                             f"{d.name} (range [{lo}, {hi}])")
        return v

    return convert


def _float_converter(d: DType) -> Callable[[Any, ArgSpec], Any]:
    def convert(v: Any, spec: ArgSpec) -> Any:
        if isinstance(v, (bool, np.bool_)) or not isinstance(v, (int, float, np.integer,
                                                                   np.floating)):
            raise TypeError(f"{spec.where()}: expected a Python or NumPy number for "
                            f"{d.name} scalar parameter, got {type(v).__name__} {v!r}")
        if d.name == "float16":
            return int(np.array(v, np.float16).view(np.uint16))
        return float(v)

    return convert


def _bool_converter(v: Any, spec: ArgSpec) -> Any:
    if not isinstance(v, (bool, np.bool_, int, np.integer)):
        raise TypeError(f"{spec.where()}: expected a bool for bool scalar parameter, "
                        f"got {type(v).__name__} {v!r}")
    return 1 if v else 0


def _converter(d: DType, size: bool = False) -> Callable[[Any, ArgSpec], Any]:
    if d.is_bool:
        return _bool_converter
    return _float_converter(d) if d.is_float else _int_converter(d, size)


def param_signature(params: Sequence[BufferParam | ScalarParam]) -> Signature:
    """A lowered function's parameters as (argument, whether it is an output) pairs."""
    return tuple((p.tensor, p.is_output) if isinstance(p, BufferParam) else (p.var, False)
                 for p in params)


def arg_specs(signature: Signature) -> tuple[ArgSpec, ...]:
    """What each argument of a function with this signature must be."""
    specs: list[ArgSpec] = []
    for k, (a, is_output) in enumerate(signature):
        if isinstance(a, Tensor):
            specs.append(ArgSpec(k, a.name, True, is_output, a.dtype.numpy,
                                 tuple(n if isinstance(n, Expr) else int(n) for n in a.shape),
                                 None))
        else:
            d = a.dtype
            specs.append(ArgSpec(k, a.name, False, False, d.numpy, (),
                                 _converter(d, a.kind == "size")))
    return tuple(specs)


def _c_strides(shape: tuple[int, ...], itemsize: int) -> tuple[int, ...]:
    """The strides of a C-contiguous array of ``shape`` (what NumPy gives a fresh one)."""
    strides = []
    step = itemsize
    for n in reversed(shape):
        strides.append(step)
        step *= n
    return tuple(reversed(strides))


def check_host_array(fname: str, spec: ArgSpec, a: np.ndarray,
                     shape: tuple[int, ...] | None = None) -> None:
    """``a`` (an ndarray) has the dtype and shape of ``spec`` (``shape``: the shape at this
    call's sizes, for a symbolic one), is C-contiguous and, for an output, writeable; else
    ``TypeError``/``ValueError`` naming the argument."""
    if a.dtype != spec.dtype:
        found = a.dtype.name if a.dtype.name != spec.dtype.name else \
            f"{a.dtype.name} in non-native byte order"
        raise TypeError(f"{fname}: {spec.where()} must have dtype {spec.dtype.name}, "
                        f"got {found} (convert with .astype('{spec.dtype.name}'))")
    want = spec.shape if shape is None else shape
    if a.shape != want:
        shown = want if shape is None else f"{Shape(spec.shape)} = {want}"
        raise ValueError(f"{fname}: {spec.where()} must have shape {shown}, got {a.shape}")
    flags = a.flags
    if not flags.c_contiguous:
        raise ValueError(f"{fname}: {spec.where()} must be C-contiguous "
                         "(pass numpy.ascontiguousarray(x))")
    if spec.is_output and not flags.writeable:
        raise ValueError(f"{fname}: output {spec.where()} is read-only; pass a "
                         "writeable array")


def check_overlap(fname: str, specs: Sequence[ArgSpec], spans: list[tuple[int, int, int]]
                  ) -> None:
    """No output's ``[lo, hi)`` span (``(lo, hi, position)``) overlaps another argument's."""
    for lo, hi, k in spans:
        if not specs[k].is_output:
            continue
        for lo2, hi2, j in spans:
            if j != k and lo < hi2 and lo2 < hi:
                a, b = specs[k], specs[j]
                raise ValueError(
                    f"{fname}: output {a.where()} shares memory with {b.where()}; "
                    "outputs must not overlap other arguments (pass a copy)")


@dataclass(frozen=True)
class BenchmarkResult:
    """What ``time_evaluator``'s function returns, as TVM's: seconds per call, one entry
    per repetition (``results``), and their statistics."""

    results: tuple[float, ...]

    @property
    def mean(self) -> float:
        return statistics.fmean(self.results)

    @property
    def median(self) -> float:
        return statistics.median(self.results)

    @property
    def min(self) -> float:
        return min(self.results)

    @property
    def max(self) -> float:
        return max(self.results)

    @property
    def std(self) -> float:
        return statistics.pstdev(self.results)

    def __repr__(self) -> str:
        return (f"BenchmarkResult(min={self.min:.6g}, mean={self.mean:.6g}, "
                f"median={self.median:.6g}, max={self.max:.6g}, std={self.std:.6g})")


class ModuleAPI:
    """TVM's ``runtime.Module`` spellings of a built function: ``entry_name``,
    ``imported_modules``, ``get_function``/``m[name]``, ``time_evaluator`` (a module holds
    one function here: the built one, under its name)."""

    name: str
    type_key = "llvm"

    @property
    def entry_name(self) -> str:
        """The name of the function (TVM's module's default function)."""
        return self.name

    @property
    def imported_modules(self) -> list[Any]:
        """Device code modules (a CUDA build's PTX); none on the CPU."""
        return []

    def get_function(self, name: str, query_imports: bool = False) -> Any:
        """The function ``name``: this one, when that is its name."""
        if name != self.name:
            raise AttributeError(f"module has no function {name!r}; the built function "
                                 f"is {self.name!r}")
        return self

    def __getitem__(self, name: str) -> Any:
        return self.get_function(name)

    def time_evaluator(self, func_name: str, dev: Any = None, number: int = 10,
                       repeat: int = 1, min_repeat_ms: int = 0, cooldown_interval_ms: int = 0,
                       repeats_to_cooldown: int = 1, f_preproc: str = ""
                       ) -> Callable[..., BenchmarkResult]:
        """A function that times ``func_name`` as TVM's does: one warm-up call, then
        ``repeat`` repetitions of ``number`` calls each (``number`` grows until a
        repetition lasts ``min_repeat_ms``); returns a ``BenchmarkResult`` (seconds per
        call). ``dev`` is accepted for TVM's spelling (the built function's target runs)."""
        fn = self.get_function(func_name)
        for what, value in (("number", number), ("repeat", repeat)):
            _check_count(f"time_evaluator: {what}", value, 1)
        _check_count("time_evaluator: min_repeat_ms", min_repeat_ms, 0)
        _check_count("time_evaluator: cooldown_interval_ms", cooldown_interval_ms, 0)

        def evaluate(*args: Any) -> BenchmarkResult:
            fn(*args)
            results = []
            n = number
            for k in range(repeat):
                if k and cooldown_interval_ms and k % max(1, repeats_to_cooldown) == 0:
                    time.sleep(cooldown_interval_ms / 1e3)
                while True:
                    t0 = time.perf_counter()
                    for _ in range(n):
                        fn(*args)
                    dt = time.perf_counter() - t0
                    if dt * 1e3 >= min_repeat_ms:
                        break
                    # as TVM: scale the count to reach the minimum, at least doubling it
                    n = max(2 * n, int(n * min_repeat_ms / max(dt * 1e3, 1e-3)) + 1)
                results.append(dt / n)
            return BenchmarkResult(tuple(results))

        return evaluate

    def save(self, path: str | os.PathLike[str], fmt: str = "") -> None:
        """Write the code at ``path`` in ``fmt`` (default: the suffix's): ``"o"`` (object
        code), ``"ll"``, ``"s"``, or a CUDA function's ``"ptx"`` (``tex.runtime.library``)."""
        from .library import save
        save(self, path, fmt)


def _check_count(what: str, value: Any, least: int) -> None:
    if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
        raise TypeError(f"{what} must be an int >= {least}, got {type(value).__name__} "
                        f"{value!r}")
    if value < least:
        raise ValueError(f"{what} must be >= {least}, got {value}")


class BuiltFunction(ModuleAPI):
    """A compiled function; call it with NumPy arrays (outputs are written in place).

    Attributes
    ----------
    name : str
        The function name.
    args : list
        The user's ``Tensor``/``Var`` arguments, in call order.
    target : str
        ``"llvm"``.
    """

    def __init__(self, name: str, signature: Signature, lowered: str, kernel: Kernel,
                 target: str = "llvm", serial: Callable[[], Kernel] | None = None,
                 externs: Sequence[ExternSpec] = ()) -> None:
        self.name = name
        self._externs = Externs(externs, name) if externs else None
        self.target = target
        self.args: list[Tensor | Var] = [a for a, _ in signature]
        self._kernel = kernel
        self._lowered_text = lowered
        self._specs = arg_specs(signature)
        ctypes_args = [ctypes.c_void_p if isinstance(a, Tensor) else a.dtype.ctype
                       for a, _ in signature]
        self._outputs = tuple(s.position for s in self._specs if s.is_output)
        self._shapes = SymbolicShapes(signature, name)
        # symbolic shapes: the fast path's entries by argument shapes (_remember_sizes)
        self._fast_sizes: dict[tuple[Any, ...], tuple[Any, Any, list[int]]] = {}
        # what _fast_args compares: only for all-buffer functions with no empty array
        # (an empty one's pointer may be anything: the full checks skip its span)
        specs = self._specs
        itemsize = [np.dtype(s.dtype).itemsize for s in specs]
        if self._shapes.symbolic:
            self._nbytes: tuple[int, ...] = ()
            self._fast = None
        else:
            self._nbytes = tuple(int(np.prod(s.shape, dtype=np.int64)) * n
                                 for s, n in zip(specs, itemsize))
            self._fast = tuple(
                (np.dtype(s.dtype), s.shape, _c_strides(s.shape, n), s.is_output)
                for s, n in zip(specs, itemsize)) \
                if all(s.is_buffer for s in specs) and all(self._nbytes) else None
        self._ctype = ctypes.CFUNCTYPE(None, *ctypes_args, ctypes.c_void_p)
        self._main = self._entry(kernel)
        # a kernel with parallel loops cannot run in a child forked after the OpenMP pool
        # started (tex.runtime.openmp): there it runs ``serial()``, compiled on first need
        self._parallel = serial is not None and kernel.sources.uses_openmp
        self._serial = serial
        self._serial_entry: _Entry | None = None

    @property
    def extern_specs(self) -> tuple[ExternSpec, ...]:
        """The extern calls (``te.extern``) the function makes, by their index."""
        return () if self._externs is None else self._externs.specs

    def _entry(self, kernel: Kernel) -> _Entry:
        """The ctypes function of ``kernel`` and whether it reports errors."""
        return _Entry(kernel, self._ctype(kernel.address), kernel.sources.errors)

    # -- calling ---------------------------------------------------------------------------
    def __call__(self, *arrays: Any) -> None:
        if self._shapes.symbolic:
            cargs = self._fast_symbolic(arrays)
        else:
            cargs = self._fast_args(arrays, self._fast, self._nbytes)
        if cargs is None:
            cargs = self._checked_args(arrays)
        self._run(cargs)

    def _fast_symbolic(self, arrays: tuple[Any, ...]) -> list[Any] | None:
        """``_fast_args`` for symbolic shapes, at argument shapes a full check accepted
        before (remembered, with their sizes, per shapes; the derived sizes appended)."""
        try:
            key = tuple(a.shape for a in arrays)
            entry = self._fast_sizes.get(key)
        except (AttributeError, TypeError):
            return None
        if entry is None:
            return None
        fast, nbytes, derived = entry
        cargs = self._fast_args(arrays, fast, nbytes)
        if cargs is not None:
            cargs.extend(derived)
        return cargs

    def _remember_sizes(self, arrays: tuple[Any, ...], sizes: _Sizes) -> None:
        """After a full check of buffers and derived sizes only: the fast path's entry."""
        specs = self._specs
        if len(arrays) != len(specs) - self._shapes.derived or any(
                not s.is_buffer for s in specs[:len(arrays)]):
            return
        itemsize = [np.dtype(s.dtype).itemsize for s in specs[:len(arrays)]]
        shapes = [sizes.shapes[s.position] for s in specs[:len(arrays)]]
        nbytes = tuple(math.prod(sh) * n for sh, n in zip(shapes, itemsize))
        if not all(nbytes):
            return  # (an empty array's pointer may be anything: the full checks skip it)
        fast = tuple((np.dtype(s.dtype), sh, _c_strides(sh, n), s.is_output)
                     for s, sh, n in zip(specs, shapes, itemsize))
        if len(self._fast_sizes) >= _SEEN_SIZES:
            self._fast_sizes.pop(next(iter(self._fast_sizes)))
        self._fast_sizes[tuple(shapes)] = (fast, nbytes, list(sizes.derived))

    def _fast_args(self, arrays: tuple[Any, ...], fast: Any, nbytes: Any) -> list[Any] | None:
        """The C arguments when every argument is exactly what the build expects
        (``fast``: dtype, shape, strides and whether it is an output, per argument;
        ``nbytes``: their sizes): an ``ndarray`` of the very dtype object, shape and C
        strides (writeable for outputs) and no output overlapping another argument; else
        None (``_checked_args`` then checks in full and names what is wrong). Half the
        time of the full checks, which is most of a tiny kernel's call."""
        if fast is None or len(arrays) != len(fast):
            return None
        cargs: list[Any] = []
        for (dtype, shape, strides, out), a in zip(fast, arrays):
            if (a.__class__ is not np.ndarray and a.__class__ is not NDArray) or \
                    a.dtype is not dtype or a.shape != shape or \
                    a.strides != strides or (out and not a.flags.writeable):
                return None
            cargs.append(data_pointer(a))
        if self._outputs:
            for k in self._outputs:
                lo, hi = cargs[k], cargs[k] + nbytes[k]
                for j, p in enumerate(cargs):
                    if j != k and lo < p + nbytes[j] and p < hi:
                        return None  # the full checks raise, naming both
        return cargs

    def _checked_args(self, arrays: tuple[Any, ...]) -> list[Any]:
        """The C arguments after every check (``TypeError``/``ValueError`` naming the
        argument that fails one)."""
        specs = self._specs
        sizes = self._shapes.check_call(specs, arrays, self._signature)
        cargs: list[Any] = []
        spans: list[tuple[int, int, int]] = []
        for spec, a in zip(specs, arrays):
            if not spec.is_buffer:
                cargs.append(spec.convert(a, spec))  # type: ignore[misc]
                continue
            if not isinstance(a, np.ndarray):
                raise TypeError(f"{self.name}: {spec.where()} must be a numpy.ndarray of "
                                f"{spec.dtype.name}{list(spec.shape)}, got "
                                f"{type(a).__module__}.{type(a).__qualname__}"
                                f"{conversion_hint(a)}")
            check_host_array(self.name, spec, a,
                             None if sizes is None else sizes.shapes[spec.position])
            ptr = data_pointer(a)
            cargs.append(ptr)
            if a.nbytes:
                spans.append((ptr, ptr + a.nbytes, spec.position))
        if self._outputs and len(spans) > 1:
            check_overlap(self.name, self._specs, spans)
        if sizes is not None and len(arrays) < len(specs):
            cargs.extend(sizes.derived)
            self._remember_sizes(arrays, sizes)
        return cargs

    def _run(self, cargs: list[Any]) -> None:
        """Call the kernel (its serial variant in a forked child) and raise what its error
        record reports."""
        entry = self._main
        if self._parallel:
            if parallel_allowed():
                note_parallel_run()
            else:
                entry = self._serial_variant()
        if not entry.errors:
            entry.cfunc(*cargs, None)
            return
        # one error record per call: concurrent calls never see each other's failures
        record = _Record()
        if self._externs is not None:
            record[EXTERN_SLOT] = self._externs.address
        entry.cfunc(*cargs, ctypes.addressof(record))
        failed, number, index = record[:3]
        if failed == EXTERN_FAILED and self._externs is not None:
            self._externs.raise_pending()
        if failed:
            raise MemoryError(f"{self.name}: a temporary buffer could not be allocated; "
                              "the outputs are incomplete")
        if number:
            check = entry.kernel.sources.bounds_checks[number - 1]
            raise OutOfBoundsError.from_kernel(self.name, check.describe(index))

    def _serial_variant(self) -> _Entry:
        if self._serial_entry is None:
            assert self._serial is not None  # only parallel kernels get here
            self._serial_entry = self._entry(self._serial())
        return self._serial_entry

    def _signature(self) -> str:
        parts = []
        for s in self._specs:
            if s.is_buffer:
                parts.append(f"{'out ' if s.is_output else ''}{s.name}: "
                             f"{s.dtype.name}[{', '.join(map(str, s.shape))}]")
            else:
                parts.append(f"{s.name}: {s.dtype.name}")
        return ", ".join(parts)

    # -- inspection -----------------------------------------------------------------------
    def get_source(self, fmt: str = "ll") -> str:
        """The generated code: "ll"/"llvm" (optimized LLVM IR; also "", TVM's default),
        "ll.raw" (as emitted, before optimization) or "asm"/"s" (host assembly)."""
        which = SOURCE_FORMATS.get(fmt)
        src = self._kernel.sources
        if which == "opt":
            return src.llvm_ir_opt
        if which == "raw":
            return src.llvm_ir
        if which == "asm":
            return src.asm
        raise ValueError(f"get_source: unknown format {fmt!r}; expected one of "
                         f"{', '.join(SOURCE_FORMATS)}")

    def benchmark(self, *args: Any, number: int = 10, repeat: int = 5) -> float:
        """Median seconds per call over ``repeat`` timings of ``number`` calls each
        (after one warm-up call)."""
        return time_calls(self, args, number, repeat)

    @property
    def compiled(self) -> CompiledModule:
        """The compiled module behind this function (texts, bounds checks, flags)."""
        return self._kernel.sources

    @property
    def specs(self) -> tuple[ArgSpec, ...]:
        """What each argument must be, in call order."""
        return self._specs

    def export_library(self, path: str | os.PathLike[str]) -> None:
        """Write this function as a shared library (``tex.runtime.library``); load it
        back, in any process, with ``tex.runtime.load_module(path)``."""
        from .library import export_library
        export_library(self, path)

    @property
    def lowered(self) -> str:
        """The loop nest this function was compiled from (printed)."""
        return self._lowered_text

    def __repr__(self) -> str:
        return f"BuiltFunction({self.name}({self._signature()}), target='{self.target}')"


def time_calls(fn: Callable[..., Any], args: Sequence[Any], number: int, repeat: int
               ) -> float:
    """Median seconds per call of ``fn(*args)`` over ``repeat`` timings of ``number`` calls
    (after one warm-up call)."""
    for what, value in (("number", number), ("repeat", repeat)):
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"benchmark: {what} must be an int >= 1, got "
                            f"{type(value).__name__} {value!r}")
    if number < 1 or repeat < 1:
        raise ValueError(f"benchmark: number and repeat must be >= 1, got {number}, {repeat}")
    fn(*args)
    times = []
    for _ in range(repeat):
        t0 = time.perf_counter()
        for _ in range(number):
            fn(*args)
        times.append((time.perf_counter() - t0) / number)
    return statistics.median(times)


def conversion_hint(a: Any) -> str:
    if isinstance(a, (list, tuple)):
        return " (convert it with numpy.asarray(x, dtype=...))"
    if hasattr(a, "numpy") and hasattr(a, "detach"):
        return " (a torch tensor: pass t.detach().cpu().numpy())"
    if hasattr(a, "__array__"):
        return " (convert it with numpy.asarray(x))"
    return ""
