"""User-facing builders: placeholder, compute, reduce_axis, reducers, intrinsics."""
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
from .operation import check_shape, compute, const, placeholder, reduce_axis, var
from .reducers import Reducer, all, any, comm_reducer, max, min, prod, sum

__all__ = [
    "abs", "ceil", "cos", "erf", "exp", "extreme_value", "floor", "floordiv", "floormod",
    "if_then_else", "log",
    "log2", "log10", "max_value", "min_value", "power", "round", "rsqrt", "select", "sigmoid",
    "sin", "sqrt", "tan", "tanh", "trunc", "truncdiv", "check_shape", "compute", "const",
    "placeholder", "reduce_axis", "var", "Reducer", "all", "any", "comm_reducer", "max",
    "min", "prod", "sum",
]
