"""The op checklist: every ``Op`` walked through every per-op table, exclusions written down.

Adding an operator to ``tex.ir.ops.Op`` makes this file fail, table by table, until the
operator has a rule in each (printing, NumPy semantics, derivative, sympy, interval bounds,
legalization and LLVM emission, PTX/libdevice, the auto-scheduler's cost model) or an
exclusion here that says why it needs none. An exclusion that a table has since covered
fails too, so the lists stay true.
"""
from __future__ import annotations

from collections.abc import Callable

import pytest

from tex.arith.bounds import BINARY_BOUNDS, UNARY_BOUNDS
from tex.arith.sympy_bridge import (
    SYMPY_BINARY,
    SYMPY_BOOL_COMPARE,
    SYMPY_COMPARE,
    SYMPY_UNARY,
)
from tex.arith.sympy_float import SYMPY_FLOAT_BINARY, SYMPY_FLOAT_UNARY
from tex.autodiff.derivative import RULES
from tex.codegen import tables
from tex.codegen.ops import covered_ops
from tex.codegen.ptx import LIBDEVICE_UNARY
from tex.ir import BINARY_OPS, COMPARE_OPS, FLOAT_ONLY_OPS, UNARY_OPS, Op, RuleTable
from tex.ir.printer import CALL_NAMES, INFIX
from tex.ir.semantics import NUMPY_BINARY, NUMPY_UNARY
from tex.lower.legalize import TARGET_RULES
from tex.schedule.auto import OP_COST

LOGICAL = frozenset({Op.NOT, Op.AND, Op.OR})


def _why(ops: frozenset[Op] | set[Op], reason: str) -> dict[Op, str]:
    return {op: reason for op in ops}


def _marked(table: RuleTable) -> set[Op]:
    """The operators a rule table's ``for_ops`` rules handle."""
    return {op for rules in table.rules.values() for r in rules for op in getattr(r, "ops", ())}


def _llvm() -> set[Op]:
    """Ops the CPU backend emits (both for floats and integers where binary) or that
    legalization rewrites before it."""
    cov = covered_ops()
    both = cov["float binary"] & cov["int binary"]
    return set(cov["unary"]) | set(both) | set(cov["compare"]) | set(cov["legalized"])


# NVPTX lowers these LLVM intrinsics and instructions natively; the other float math of
# the CPU backend (llvm.exp, llvm.sin, erf ... and pow) must go to libdevice
_NVPTX_NATIVE = frozenset({Op.SQRT, Op.ABS, Op.FLOOR, Op.CEIL, Op.TRUNC, Op.ROUND})


def _ptx() -> set[Op]:
    """Ops whose float math the PTX backend can run: libdevice, pow (its own call), the
    natively lowered intrinsics, and every op the CPU emitter handles with plain
    instructions (the PTX emitter inherits them)."""
    math = set(tables.FLOAT_INTRINSICS) | set(tables.LIBM_CALLS) | \
        set(tables.FLOAT_BINARY_INTRINSICS)
    plain = _llvm() - math
    return plain | (math & (set(LIBDEVICE_UNARY) | _NVPTX_NATIVE | {Op.POW}))


# table -> (the ops it covers, the ops it leaves out on purpose and why)
CHECKLIST: dict[str, tuple[Callable[[], set[Op]], dict[Op, str]]] = {
    "printer (tex.ir.printer)": (lambda: set(INFIX) | set(CALL_NAMES), {}),
    "semantics (tex.ir.semantics)": (lambda: set(NUMPY_UNARY) | set(NUMPY_BINARY), {}),
    "derivative (tex.autodiff.derivative.RULES)": (
        lambda: set(RULES),
        _why(COMPARE_OPS, "a comparison is bool-valued: its derivative is zero by "
                          "convention (report.conventional_zeros lists the cut)")),
    "sympy, integer (tex.arith.sympy_bridge)": (
        lambda: set(SYMPY_UNARY) | set(SYMPY_BINARY) | set(SYMPY_COMPARE),
        _why(FLOAT_ONLY_OPS, "float-only: never in an integer index or condition")),
    "sympy, float (tex.arith.sympy_float)": (
        lambda: set(SYMPY_FLOAT_UNARY) | set(SYMPY_FLOAT_BINARY),
        {**_why(LOGICAL | COMPARE_OPS, "bool-valued: a float expression's conditions "
                                       "are kept (select) or opaque boolean symbols"),
         **_why({Op.ROUND, Op.TRUNC, Op.FLOORDIV, Op.FLOORMOD},
                "no exact real-number rewrite sympy can use: an opaque real atom")}),
    "interval bounds (tex.arith.bounds)": (
        lambda: set(UNARY_BOUNDS) | set(BINARY_BOUNDS) | set(COMPARE_OPS) | {Op.POW},
        _why(FLOAT_ONLY_OPS, "float-only: intervals are of integer and bool expressions")),
    "LLVM: emitted or legalized (tex.codegen, tex.lower.legalize)": (_llvm, {}),
    "PTX: native, inherited or libdevice (tex.codegen.ptx)": (_ptx, {}),
    "cost model (tex.schedule.auto.OP_COST)": (
        lambda: set(OP_COST),
        _why(set(Op) - FLOAT_ONLY_OPS - {Op.POW, Op.DIV},
             "about one multiply-add when vectorized: the model's default cost")),
}


@pytest.mark.parametrize("table", list(CHECKLIST))
def test_every_op_is_in_every_table(table: str) -> None:
    covered, excluded = CHECKLIST[table]
    have = covered()
    missing = set(Op) - have - set(excluded)
    assert not missing, (f"{table}: no rule for {sorted(o.name for o in missing)}; add one, "
                         "or an exclusion with its reason in tests/test_op_tables.py")
    stale = have & set(excluded)
    assert not stale, (f"{table}: {sorted(o.name for o in stale)} are covered now; remove "
                       "their exclusion")


def test_op_kinds_partition_the_enum() -> None:
    assert UNARY_OPS | BINARY_OPS | COMPARE_OPS == set(Op)
    assert not (UNARY_OPS & BINARY_OPS or UNARY_OPS & COMPARE_OPS or BINARY_OPS & COMPARE_OPS)
    assert FLOAT_ONLY_OPS <= UNARY_OPS


def test_legalized_ops_have_rules_for_every_target() -> None:
    """What the backends expect legalized (tables.LEGALIZED) has a rule in every target's
    legalization table, and the backends have no emitter of their own for it."""
    for target, table in TARGET_RULES.items():
        assert tables.LEGALIZED <= _marked(table), target
    assert not tables.LEGALIZED & set(covered_ops()["unary"])


def test_bool_comparisons_have_sympy_rules() -> None:
    assert set(SYMPY_BOOL_COMPARE) == set(SYMPY_COMPARE) == COMPARE_OPS
