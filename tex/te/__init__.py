"""User-facing builders: placeholder, compute, reduce_axis, reducers, intrinsics.

As TVM's ``te`` module, it also offers ``create_schedule``, ``thread_axis`` (from
``tex.schedule``) and ``gradient`` (from ``tex.autodiff``), so that ``from tex import te``
ports TVM code; those live in lower layers and are imported at first use (module
``__getattr__``, PEP 562), never when this module loads.
"""
from ..ir import tensor
from ..ir.tensor import Tensor
from ..tvm_names import missing
from .extern import call_packed, extern
from .intrin import (
    abs,
    ceil,
    cos,
    erf,
    exp,
    extreme_value,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    log2,
    log10,
    max_value,
    min_value,
    power,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    sqrt,
    tan,
    tanh,
    trunc,
    truncdiv,
)
from .operation import (
    check_shape,
    compute,
    const,
    placeholder,
    reduce_axis,
    size_var,
    symbolic_extent,
    var,
)
from .reducers import Reducer, all, any, comm_reducer, max, min, prod, sum
from .scan import scan
from .specialize import free_vars, shape_vars, specialize

__all__ = [
    "abs", "ceil", "cos", "erf", "exp", "extreme_value", "floor", "floordiv", "floormod",
    "if_then_else", "log",
    "log2", "log10", "max_value", "min_value", "power", "round", "rsqrt", "select", "sigmoid",
    "sin", "sqrt", "tan", "tanh", "trunc", "truncdiv", "check_shape", "compute", "const",
    "placeholder", "reduce_axis", "var", "size_var", "Reducer", "all", "any", "comm_reducer", "max",
    "min", "prod", "sum", "Tensor", "tensor", "extern", "call_packed", "scan",
    "symbolic_extent", "specialize", "shape_vars", "free_vars",
]

# TVM's te names that live in lower layers
_LAZY = ("create_schedule", "thread_axis", "gradient")


def __getattr__(name: str) -> object:
    """The names of ``_LAZY``, imported at first use."""
    if name in ("create_schedule", "thread_axis"):
        from .. import schedule
        return getattr(schedule, name)
    if name == "gradient":
        from .. import autodiff
        return autodiff.gradient
    raise missing("tex.te", name, [*globals(), *_LAZY])


def __dir__() -> list[str]:
    return sorted({*globals(), *_LAZY})
