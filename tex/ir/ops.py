"""The scalar operator enum ``Op`` and its classification sets (unary, binary, comparison,
float-only, commutative).

Every table that maps operators to behaviour (printing, NumPy, sympy, LLVM, derivatives)
keys on ``Op``. The expression nodes (``tex.ir.expr``) import it from here and re-export
it, so ``from tex.ir.expr import Op`` keeps working.
"""
from __future__ import annotations

import enum

__all__ = ["Op", "UNARY_OPS", "BINARY_OPS", "COMPARE_OPS", "FLOAT_ONLY_OPS", "COMMUTATIVE_OPS"]


class Op(enum.Enum):
    """Every scalar operator; tables elsewhere (printing, NumPy, sympy, LLVM) key on it."""

    # unary
    NEG = "neg"
    NOT = "not"
    EXP = "exp"
    LOG = "log"
    LOG2 = "log2"
    LOG10 = "log10"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SIN = "sin"
    COS = "cos"
    TAN = "tan"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    ERF = "erf"
    ABS = "abs"
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"  # half to even, like numpy.round / LLVM roundeven
    TRUNC = "trunc"
    # binary arithmetic (DIV on integers truncates toward zero, as in C)
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    FLOORDIV = "floordiv"
    FLOORMOD = "floormod"
    POW = "pow"
    MAX = "max"
    MIN = "min"
    # logical (bool operands)
    AND = "and"
    OR = "or"
    # comparisons (bool result)
    EQ = "eq"
    NE = "ne"
    LT = "lt"
    LE = "le"
    GT = "gt"
    GE = "ge"

    def __repr__(self) -> str:
        return f"Op.{self.name}"

    # Members are singletons: identity hashing is C-level and as stable as Enum's own
    # (which hashes the name, randomized per process). Ops are hashed on every node build.
    __hash__ = object.__hash__


UNARY_OPS = frozenset({
    Op.NEG, Op.NOT, Op.EXP, Op.LOG, Op.LOG2, Op.LOG10, Op.SQRT, Op.RSQRT, Op.SIN, Op.COS,
    Op.TAN, Op.TANH, Op.SIGMOID, Op.ERF, Op.ABS, Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC,
})
BINARY_OPS = frozenset({
    Op.ADD, Op.SUB, Op.MUL, Op.DIV, Op.FLOORDIV, Op.FLOORMOD, Op.POW, Op.MAX, Op.MIN,
    Op.AND, Op.OR,
})
COMPARE_OPS = frozenset({Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE})
# transcendental intrinsics: defined on floats only (integer operands are cast to float32)
FLOAT_ONLY_OPS = frozenset({
    Op.EXP, Op.LOG, Op.LOG2, Op.LOG10, Op.SQRT, Op.RSQRT, Op.SIN, Op.COS, Op.TAN, Op.TANH,
    Op.SIGMOID, Op.ERF,
})
COMMUTATIVE_OPS = frozenset({Op.ADD, Op.MUL, Op.MAX, Op.MIN, Op.AND, Op.OR, Op.EQ, Op.NE})
