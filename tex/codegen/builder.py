"""``FoldingBuilder``: an llvmlite ``IRBuilder`` that folds integer instructions whose
operands are constants.

The emitters substitute constants for unrolled loop variables and splat them into vectors,
so index arithmetic on constants (``mul i32 0, 48``, ``add <8 x i32> zeroinitializer,
<0, 1, ..., 7>``, ``extractelement`` of a constant vector) used to reach LLVM as
instructions: a third of a convolution gradient's IR, which every LLVM pass then walked
until InstCombine folded it. Folded here, the IR is smaller and LLVM's pipeline and
code generation faster, with the same machine code.

Folded (scalars and vectors of integers, ``i1`` included): ``add``, ``sub``, ``mul``,
``and``, ``or``, ``xor`` of two constants (wrapping at the width: what LLVM computes, and
for a ``nsw``/``nuw`` overflow, which makes poison, one of the values poison may take);
``x + 0``, ``x - 0``, ``x * 1`` (x itself); ``sext``/``zext``/``trunc``, signed and
unsigned ``icmp`` and ``extractelement`` of constants; ``select`` on a constant scalar
condition. Float arithmetic is never folded (its rounding belongs to LLVM and the target).
"""
from __future__ import annotations

import operator
from collections.abc import Callable

import llvmlite.ir as ir

from .irtypes import Splat

__all__ = ["FoldingBuilder", "int_values"]

_ICMP: dict[str, Callable[[int, int], bool]] = {
    "==": operator.eq, "!=": operator.ne, "<": operator.lt, "<=": operator.le,
    ">": operator.gt, ">=": operator.ge}


def _wrap(value: int, width: int, signed: bool = True) -> int:
    """``value`` modulo 2**width, as a signed (two's complement: an i1 true is -1) or an
    unsigned number."""
    v = value & ((1 << width) - 1)
    if signed and v >> (width - 1):
        v -= 1 << width
    return v


def int_values(v: ir.Value) -> list[int] | None:
    """The lane values (one for a scalar) of an integer constant, as signed numbers; None
    for anything else (an instruction, undef, a float or an aggregate)."""
    if not isinstance(v, ir.Constant):
        return None
    t = v.type
    vector = isinstance(t, ir.VectorType)
    elem = t.element if vector else t
    if not isinstance(elem, ir.IntType):
        return None
    c = v.constant
    if c is None:  # zeroinitializer
        return [0] * (t.count if vector else 1)
    if not vector:
        return [_wrap(int(c), elem.width)] if isinstance(c, int) else None
    if not isinstance(c, (list, tuple)):
        return None
    out: list[int] = []
    for e in c:
        x = e.constant if isinstance(e, ir.Constant) else e
        if not isinstance(x, int):  # undef lanes
            return None
        out.append(_wrap(x, elem.width))
    return out


def _scalar(t: ir.IntType, value: int) -> ir.Constant:
    """An integer constant, printed signed (an i1 as false/true)."""
    if t.width == 1:
        return ir.Constant(t, bool(value & 1))
    return ir.Constant(t, _wrap(value, t.width))


def _make(t: ir.Type, values: list[int]) -> ir.Constant:
    """The constant of type ``t`` (scalar or vector of integers) with these lane values."""
    if isinstance(t, ir.VectorType):
        if all(x == values[0] for x in values):
            return Splat(t, [_scalar(t.element, values[0])] * t.count)
        return ir.Constant(t, [_scalar(t.element, x) for x in values])
    return _scalar(t, values[0])


def _is(values: list[int] | None, k: int) -> bool:
    return values is not None and all(x == k for x in values)


def _folding(method: str, op: Callable[[int, int], int], unit: int | None = None,
             commutes: bool = True) -> Callable[..., ir.Value]:
    """The ``IRBuilder`` binary-op method ``method`` folding ``op`` on constants (and ``x op
    unit`` to ``x``) before building the instruction."""

    def build(self: FoldingBuilder, lhs: ir.Value, rhs: ir.Value, name: str = "",
              flags: tuple = ()) -> ir.Value:
        v = self._fold_arith(op, lhs, rhs, unit, commutes)
        if v is not None:
            return v
        return getattr(ir.IRBuilder, method)(self, lhs, rhs, name, flags)  # type: ignore

    build.__name__ = method
    return build


class FoldingBuilder(ir.IRBuilder):
    """``IRBuilder`` folding integer instructions on constants (see the module docstring);
    every other instruction is built as usual."""

    def _fold2(self, op: Callable[[int, int], int], lhs: ir.Value, rhs: ir.Value
               ) -> ir.Constant | None:
        if lhs.type != rhs.type:
            return None  # llvmlite raises its own error
        a, b = int_values(lhs), int_values(rhs)
        if a is None or b is None:
            return None
        return _make(lhs.type, [op(x, y) for x, y in zip(a, b)])

    def _fold_arith(self, op: Callable[[int, int], int], lhs: ir.Value, rhs: ir.Value,
                    unit: int | None, commutes: bool) -> ir.Value | None:
        """``op`` folded on constants, or the other operand where one is ``unit`` (on the
        right; on either side for a commutative ``op``); None: an instruction is needed."""
        folded = self._fold2(op, lhs, rhs)
        if folded is not None or unit is None or lhs.type != rhs.type:
            return folded
        if _is(int_values(rhs), unit):
            return lhs
        if commutes and _is(int_values(lhs), unit):
            return rhs
        return None

    add = _folding("add", operator.add, 0, commutes=True)
    sub = _folding("sub", operator.sub, 0, commutes=False)
    mul = _folding("mul", operator.mul, 1, commutes=True)
    and_ = _folding("and_", operator.and_)
    or_ = _folding("or_", operator.or_)
    xor = _folding("xor", operator.xor)

    def _fold_cast(self, value: ir.Value, typ: ir.Type, signed: bool) -> ir.Constant | None:
        vals = int_values(value)
        elem = typ.element if isinstance(typ, ir.VectorType) else typ
        if vals is None or not isinstance(elem, ir.IntType):
            return None
        src = value.type.element if isinstance(value.type, ir.VectorType) else value.type
        # int_values reads lanes as signed: zext reinterprets them as unsigned first
        return _make(typ, vals if signed else [_wrap(x, src.width, False) for x in vals])

    def sext(self, value: ir.Value, typ: ir.Type, name: str = "") -> ir.Value:
        folded = self._fold_cast(value, typ, signed=True)
        return folded if folded is not None else super().sext(value, typ, name)

    def zext(self, value: ir.Value, typ: ir.Type, name: str = "") -> ir.Value:
        folded = self._fold_cast(value, typ, signed=False)
        return folded if folded is not None else super().zext(value, typ, name)

    def trunc(self, value: ir.Value, typ: ir.Type, name: str = "") -> ir.Value:
        folded = self._fold_cast(value, typ, signed=True)
        return folded if folded is not None else super().trunc(value, typ, name)

    def _fold_icmp(self, cmpop: str, lhs: ir.Value, rhs: ir.Value, signed: bool
              ) -> ir.Constant | None:
        a, b = int_values(lhs), int_values(rhs)
        if a is None or b is None or lhs.type != rhs.type or cmpop not in _ICMP:
            return None
        width = (lhs.type.element if isinstance(lhs.type, ir.VectorType) else lhs.type).width
        if not signed:
            a = [_wrap(x, width, False) for x in a]
            b = [_wrap(x, width, False) for x in b]
        t = ir.IntType(1)
        out = [int(_ICMP[cmpop](x, y)) for x, y in zip(a, b)]
        return _make(ir.VectorType(t, lhs.type.count) if isinstance(lhs.type, ir.VectorType)
                     else t, out)

    def icmp_signed(self, cmpop: str, lhs: ir.Value, rhs: ir.Value, name: str = ""
                    ) -> ir.Value:
        folded = self._fold_icmp(cmpop, lhs, rhs, signed=True)
        return folded if folded is not None else super().icmp_signed(cmpop, lhs, rhs, name)

    def icmp_unsigned(self, cmpop: str, lhs: ir.Value, rhs: ir.Value, name: str = ""
                      ) -> ir.Value:
        folded = self._fold_icmp(cmpop, lhs, rhs, signed=False)
        return folded if folded is not None else super().icmp_unsigned(cmpop, lhs, rhs, name)

    def extract_element(self, vector: ir.Value, idx: ir.Value, name: str = "") -> ir.Value:
        vals, k = int_values(vector), int_values(idx)
        if vals is not None and k is not None and 0 <= k[0] < len(vals):
            return _make(vector.type.element, [vals[k[0]]])
        return super().extract_element(vector, idx, name)

    def select(self, cond: ir.Value, lhs: ir.Value, rhs: ir.Value, name: str = "",
               flags: tuple = ()) -> ir.Value:
        c = int_values(cond)
        if c is not None and len(c) == 1 and not isinstance(cond.type, ir.VectorType) \
                and lhs.type == rhs.type:
            return lhs if c[0] else rhs
        return super().select(cond, lhs, rhs, name, flags)
