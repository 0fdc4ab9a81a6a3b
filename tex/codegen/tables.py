"""Op -> LLVM instruction and intrinsic tables, shared by the CPU and PTX backends.

Names here are llvmlite ``IRBuilder`` method names or LLVM intrinsic base names (the type
suffix, ``.f32``/``.v8f32``, is added when declared). Ops whose code is more than one
instruction (integer division, min/max, ...) have an emitter in ``ops.py``; ops that
``tex.lower.legalize`` always removes are listed in ``LEGALIZED``.
"""
from __future__ import annotations

from ..ir.expr import Op

__all__ = [
    "FLOAT_BINARY", "INT_BINARY", "LOGICAL", "FLOAT_INTRINSICS", "FLOAT_BINARY_INTRINSICS",
    "LIBM_CALLS", "FCMP",
    "ICMP", "INT_IDENTITY_UNARY", "LEGALIZED",
]

# a op b -> one instruction (IRBuilder method)
FLOAT_BINARY: dict[Op, str] = {Op.ADD: "fadd", Op.SUB: "fsub", Op.MUL: "fmul", Op.DIV: "fdiv"}
INT_BINARY: dict[Op, str] = {Op.ADD: "add", Op.SUB: "sub", Op.MUL: "mul"}
LOGICAL: dict[Op, str] = {Op.AND: "and_", Op.OR: "or_"}

# op(x) on floats -> an overloaded LLVM intrinsic
FLOAT_INTRINSICS: dict[Op, str] = {
    Op.EXP: "llvm.exp",
    Op.LOG: "llvm.log",
    Op.LOG2: "llvm.log2",
    Op.LOG10: "llvm.log10",
    Op.SQRT: "llvm.sqrt",
    Op.SIN: "llvm.sin",
    Op.COS: "llvm.cos",
    Op.TAN: "llvm.tan",
    Op.TANH: "llvm.tanh",
    Op.ABS: "llvm.fabs",
    Op.FLOOR: "llvm.floor",
    Op.CEIL: "llvm.ceil",
    Op.TRUNC: "llvm.trunc",
    Op.ROUND: "llvm.roundeven",  # half to even, like numpy.rint
}
FLOAT_BINARY_INTRINSICS: dict[Op, str] = {Op.POW: "llvm.pow"}

# op(x) on floats -> a C library function by bit width (no LLVM intrinsic exists)
LIBM_CALLS: dict[Op, dict[int, str]] = {Op.ERF: {32: "erff", 64: "erf"}}

# comparisons: floats use ordered predicates except !=, which is true on NaN (as NumPy)
FCMP: dict[Op, tuple[str, str]] = {
    Op.EQ: ("fcmp_ordered", "=="),
    Op.NE: ("fcmp_unordered", "!="),
    Op.LT: ("fcmp_ordered", "<"),
    Op.LE: ("fcmp_ordered", "<="),
    Op.GT: ("fcmp_ordered", ">"),
    Op.GE: ("fcmp_ordered", ">="),
}
# integers: icmp_signed for int kinds, icmp_unsigned for uint and bool
ICMP: dict[Op, str] = {Op.EQ: "==", Op.NE: "!=", Op.LT: "<", Op.LE: "<=", Op.GT: ">",
                       Op.GE: ">="}

# floor(i), ceil(i), round(i), trunc(i) on integers are the identity
INT_IDENTITY_UNARY = frozenset({Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC})

# never reach a backend: tex.lower.legalize rewrites them for every target
LEGALIZED = frozenset({Op.SIGMOID, Op.RSQRT})
