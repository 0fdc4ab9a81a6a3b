"""LLVM types of dtypes and values, shared by the CPU and PTX emitters.

A value is a scalar, or a vector in vectorized code (``lanes_of`` is its lane count, 0 for
a scalar). Registers hold a dtype's ``scalar_type`` (bool is ``i1``), memory its
``storage_type`` (bool is one byte, as in NumPy), and a scalar parameter arrives as its
``abi_type`` (bool as ``i8``, float16 as its ``i16`` bits: what ``DType.ctype`` passes).
"""
from __future__ import annotations

import hashlib

import llvmlite.ir as ir

from ..debug import InternalError
from ..dtype import DType

__all__ = ["I1", "I8", "I32", "I64", "PTR", "VOID", "scalar_type", "storage_type", "abi_type",
           "with_lanes", "lanes_of", "element_type", "mangle", "constant", "undef", "Splat",
           "local_name", "store_atomic"]

I1 = ir.IntType(1)
I8 = ir.IntType(8)
I32 = ir.IntType(32)
I64 = ir.IntType(64)
PTR = ir.PointerType()
VOID = ir.VoidType()


def scalar_type(d: DType) -> ir.Type:
    """The register type of a dtype (bool is i1)."""
    if d.is_float:
        return {16: ir.HalfType(), 32: ir.FloatType(), 64: ir.DoubleType()}[d.bits]
    return ir.IntType(d.bits)


def storage_type(d: DType) -> ir.Type:
    """The in-memory element type (bool is one byte, as in NumPy)."""
    return I8 if d.is_bool else scalar_type(d)


def abi_type(d: DType) -> ir.Type:
    """How a scalar parameter is passed (bool as i8, float16 as its i16 bits)."""
    if d.is_bool:
        return I8
    if d.name == "float16":
        return ir.IntType(16)
    return scalar_type(d)


def with_lanes(t: ir.Type, lanes: int) -> ir.Type:
    """``<lanes x t>``, or ``t`` itself for 0 lanes (scalar code)."""
    return ir.VectorType(t, lanes) if lanes else t


def lanes_of(v: ir.Value) -> int:
    """The lanes of a vector value; 0 for a scalar."""
    return v.type.count if isinstance(v.type, ir.VectorType) else 0


def element_type(t: ir.Type) -> ir.Type:
    """The lane type of a vector type; a scalar type itself."""
    return t.element if isinstance(t, ir.VectorType) else t


def mangle(t: ir.Type) -> str:
    """The overload suffix of an intrinsic name: f32, v8f32, i64, p0."""
    if isinstance(t, ir.VectorType):
        return f"v{t.count}{mangle(t.element)}"
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


class Splat(ir.Constant):
    """A vector constant with one value in every lane, printed as LLVM's ``splat (x)`` or
    ``undef``: llvmlite prints a vector lane by lane (a sixth of a model's IR text was
    ``<16 x i32> <i32 undef, i32 undef, ...>`` and zero vectors), and every lane was
    formatted anew for each constant. The lanes stay in ``constant`` for folding."""

    def _get_reference(self) -> str:
        first = self.constant[0]
        return "undef" if first.constant is ir.Undefined else f"splat ({first})"


def constant(t: ir.Type, value: object) -> ir.Constant:
    """A constant of scalar or vector type (a vector constant is a splat)."""
    if isinstance(t, ir.VectorType):
        return Splat(t, [ir.Constant(t.element, value)] * t.count)
    return ir.Constant(t, value)


def undef(t: ir.Type) -> ir.Constant:
    """An undefined value of type ``t`` (scalar or vector)."""
    return constant(t, ir.Undefined)


# LLVM truncates the names of local values (arguments, instructions, blocks) to 1,024
# characters, so two long tensor names sharing a prefix would collide ("redefinition"):
# a long name keeps a prefix and gets a digest of the whole name
LOCAL_NAME_MAX = 240


def local_name(name: str) -> str:
    """``name`` for a local LLVM value: unchanged up to ``LOCAL_NAME_MAX`` characters,
    else a prefix and a digest of the whole name (distinct for distinct names)."""
    if len(name) <= LOCAL_NAME_MAX:
        return name
    digest = hashlib.sha256(name.encode("utf-8", "surrogatepass")).hexdigest()[:16]
    return f"{name[:LOCAL_NAME_MAX - 17]}.{digest}"


def store_atomic(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, ordering: str) -> None:
    """An atomic store through an opaque pointer, as an exchange whose old value is
    unused (llvmlite's ``store_atomic`` wants a typed pointer)."""
    b.atomic_rmw("xchg", ptr, value, ordering)
