"""Index arithmetic: interval bounds, fast rewrite rules, the sympy bridge, simplification.

``bounds`` gives interval bounds of integer expressions; ``simplify`` and ``prove`` apply the
rules of ``rules.py`` (canonical linear forms, division by constants, comparisons, min/max,
select, &&/||) and fall back to sympy (``sympy_bridge.py``, the only sympy import in tex)
where the rules are stuck. ``float_is_zero`` asks sympy whether a float expression is
identically zero (for the autodiff's zero proofs).
"""
from .bounds import (
    Bounds,
    Interval,
    SymbolicInterval,
    bounds,
    dom_of,
    normalize_dom,
    range_interval,
)
from .linear import LinearForm
from .rules import Analyzer
from .simplifier import can_prove, node_count, prove, simplify
from .sympy_bridge import SympyBridge, from_sympy, to_sympy
from .sympy_float import float_is_zero

__all__ = [
    "Analyzer", "Bounds", "Interval", "LinearForm", "SympyBridge", "bounds", "can_prove",
    "dom_of", "float_is_zero", "range_interval", "SymbolicInterval", "from_sympy",
    "node_count", "normalize_dom", "prove", "simplify",
    "to_sympy",
]
