"""Automatic differentiation of tensor expressions.

``differentiate`` (reverse mode, with ``fdiff``/``override`` hooks), ``jvp`` (forward
mode), ``Jacobian`` and ``DiffBuildingBlock`` (one edge), ``iteration_count`` (the static
cost measure). Gradients are ordinary tensor expressions: print, schedule, build or
differentiate them again.

``grad_program`` / ``GradProgram`` (forward and backward as two compiled programs with a
tape) compile, so they live in ``tex.program``, below ``tex.build``; they are reached here
through the module ``__getattr__`` at first use (PEP 562), never imported at import time.
"""
from .builders import identity_head
from .building_block import DiffBuildingBlock, Jacobian
from .cost import iteration_count
from .derivative import RULES, DifferentiationError, partials, tangent
from .forward import jvp
from .report import GradientReport, report
from .reverse import DifferentiationResult, differentiate, gradient

__all__ = [
    "RULES", "DiffBuildingBlock", "DifferentiationError", "DifferentiationResult",
    "GradientReport", "Jacobian", "differentiate", "grad_program", "gradient", "identity_head",
    "iteration_count", "jvp", "partials", "report", "tangent",
]

_LAZY = ("GradProgram", "grad_program")


def __getattr__(name: str) -> object:
    """``grad_program`` and ``GradProgram`` from ``tex.program``, imported at first use."""
    if name in _LAZY:
        from .. import program
        return getattr(program, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
