"""Automatic differentiation of tensor expressions.

``differentiate`` (reverse mode, with ``fdiff``/``override`` hooks), ``jvp`` (forward
mode), ``Jacobian`` and ``DiffBuildingBlock`` (one edge), ``iteration_count`` (the static
cost measure). Gradients are ordinary tensor expressions: print, schedule, build or
differentiate them again.
"""
from .cost import iteration_count
from .derivative import RULES, DifferentiationError, partials, tangent
from .forward import jvp
from .reverse import DifferentiationResult, differentiate
from .vjp import DiffBuildingBlock, Jacobian, identity_head

__all__ = [
    "RULES", "DiffBuildingBlock", "DifferentiationError", "DifferentiationResult", "Jacobian",
    "differentiate", "identity_head", "iteration_count", "jvp", "partials", "tangent",
]
