"""The dtype table: the one place that knows names, kinds, sizes and storage types.

Each row: name, kind, bits, the LLVM register type, the NumPy dtype, and the ctypes type a
scalar argument of the dtype is passed as to compiled code (``bool`` as a byte, ``float16``
as its 16 bits: the ABI of ``tex.codegen``).

Dtypes: ``float16 float32 float64 int8 int16 int32 int64 uint8 bool``.

Promotion rules (``promote(a, b)``), applied by every binary operator:

1. Equal dtypes stay as they are.
2. ``bool`` next to any other dtype takes the other dtype.
3. A float next to an integer takes the float's dtype (``int32 + float16 -> float16``),
   as in TVM (not NumPy, which would widen to float64).
4. Two floats, or two integers of the same signedness, take the wider one.
5. A signed integer next to an unsigned one takes a signed integer wide enough for both
   (``int8 + uint8 -> int16``), capped at ``int64``.
6. Arithmetic (``+ - * / // % **``) on two ``bool`` values works in ``int32``.

Python scalars next to an expression take the expression's dtype, except that a
Python float next to an integer (or bool) expression makes a ``float32`` expression.
"""
from __future__ import annotations

import ctypes
from typing import Any

import numpy as np

__all__ = ["DType", "DTYPES", "as_dtype", "promote", "float32", "int32", "boolean"]


class DType(str):
    """One scalar type: a ``str`` equal to its name (as TVM's dtypes are), with the row of
    the table behind it: ``kind`` ('float' | 'int' | 'uint' | 'bool'), ``bits``, ``llvm``
    (the register type), ``ctype`` (how a scalar argument is passed) and ``numpy``.

    Being a ``str``, a dtype compares equal to its name (``A.dtype == "float32"``), hashes
    as it, prints as it, and NumPy takes it wherever it takes a dtype
    (``np.zeros(3, dtype=A.dtype)``, ``x.astype(A.dtype)``). There is one instance per name
    (``DTYPES``, ``as_dtype``), so ``is`` also works; instances are immutable, and copying
    or unpickling one gives the table's instance back.
    """

    name: str
    kind: str
    bits: int
    llvm: str
    ctype: type
    numpy: np.dtype

    def __new__(cls, name: str, kind: str, bits: int, llvm: str, ctype: type) -> DType:
        self = super().__new__(cls, name)
        # (instance attributes, not properties over a table: the codegen and the simplifier
        # read them in their inner loops)
        self.__dict__.update(name=str.__str__(self), kind=kind, bits=bits, llvm=llvm,
                             ctype=ctype, numpy=np.dtype(name))
        return self

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"dtype {self.name!r} is immutable")

    def __delattr__(self, name: str) -> None:
        raise AttributeError(f"dtype {self.name!r} is immutable")

    def __reduce__(self) -> tuple[Any, tuple[str]]:
        return as_dtype, (self.name,)

    def __copy__(self) -> DType:
        return self

    def __deepcopy__(self, memo: Any) -> DType:
        return self

    @property
    def is_float(self) -> bool:
        return self.kind == "float"

    @property
    def is_int(self) -> bool:
        """True for signed and unsigned integers (not bool)."""
        return self.kind in ("int", "uint")

    @property
    def is_bool(self) -> bool:
        return self.kind == "bool"

    @property
    def is_integral(self) -> bool:
        """True for integers and bool: types usable as exact index values."""
        return self.kind in ("int", "uint", "bool")

    @property
    def itemsize(self) -> int:
        return max(1, self.bits // 8)

    def __str__(self) -> str:
        return self.name


DTYPES: dict[str, DType] = {
    d.name: d
    for d in (
        DType("float16", "float", 16, "half", ctypes.c_uint16),
        DType("float32", "float", 32, "float", ctypes.c_float),
        DType("float64", "float", 64, "double", ctypes.c_double),
        DType("int8", "int", 8, "i8", ctypes.c_int8),
        DType("int16", "int", 16, "i16", ctypes.c_int16),
        DType("int32", "int", 32, "i32", ctypes.c_int32),
        DType("int64", "int", 64, "i64", ctypes.c_int64),
        DType("uint8", "uint", 8, "i8", ctypes.c_uint8),
        DType("bool", "bool", 1, "i1", ctypes.c_uint8),
    )
}

float32 = DTYPES["float32"]
int32 = DTYPES["int32"]
boolean = DTYPES["bool"]

_ALIASES = {"float": "float32", "double": "float64", "half": "float16", "int": "int32",
            "bool_": "bool", "uint8_t": "uint8"}


def as_dtype(value: Any, what: str = "dtype") -> DType:
    """Normalize a dtype name, NumPy dtype or DType; raise ValueError for unknown ones."""
    if isinstance(value, DType):
        return value
    if value is None:  # np.dtype(None) would silently mean float64
        raise TypeError(f"{what}: expected a dtype name such as 'float32', got None")
    if value is bool:
        return boolean
    if value is float:
        return float32
    if value is int:
        return int32
    if isinstance(value, str):
        name = _ALIASES.get(value, value)
    else:
        try:
            name = np.dtype(value).name
        except TypeError:
            raise TypeError(
                f"{what}: expected a dtype name such as 'float32', got {value!r}") from None
    try:
        return DTYPES[name]
    except KeyError:
        raise ValueError(
            f"{what}: unknown dtype {value!r}; supported: {', '.join(DTYPES)}") from None


def promote(a: DType, b: DType) -> DType:
    """The common dtype of two operands (rules in the module docstring)."""
    if a is b:
        return a
    if a.is_bool:
        return b
    if b.is_bool:
        return a
    if a.is_float and b.is_float:
        return a if a.bits >= b.bits else b
    if a.is_float:
        return a
    if b.is_float:
        return b
    if a.kind == b.kind:
        return a if a.bits >= b.bits else b
    signed, unsigned = (a, b) if a.kind == "int" else (b, a)
    bits = max(signed.bits, min(64, 2 * unsigned.bits))
    return DTYPES[f"int{bits}"]


def arith_dtype(a: DType, b: DType) -> DType:
    """Promotion for arithmetic operators: like promote, but bool op bool works in int32."""
    d = promote(a, b)
    return int32 if d.is_bool else d
