"""The operator library (``tex.topi``): broadcasting elementwise ops, reductions, shape
transforms and contractions, and ``topi.nn``. Every op is built from ``tex.te`` builders
and returns ordinary tensors; names and signatures follow TVM's topi (API.md §2).

Importing this package also installs the Python operators on tensors (``A + B``, ``-A``,
``A @ B``, ``A.astype``). ``gradient_cost`` holds the hand-written gradient cost of every
differentiable op, the reference tex's gradients are held to. As in TVM, ``topi.tag`` holds
the op tags, ``topi.utils`` ``get_const_tuple``/``get_const_int``, and ``topi.testing`` NumPy
references under TVM's names; a TVM topi name tex lacks raises an ``AttributeError`` that
says what to use (``tex.tvm_names``).
"""
from typing import Any

from ..tvm_names import missing
from . import gradient_cost, nn, tag, testing, utils
from .broadcast import (
    abs,
    add,
    astype,
    broadcast_to,
    cast,
    ceil,
    clip,
    cos,
    divide,
    elemwise_sum,
    equal,
    erf,
    exp,
    floor,
    floor_divide,
    floor_mod,
    full,
    full_like,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log2,
    log10,
    logical_and,
    logical_not,
    logical_or,
    maximum,
    minimum,
    multiply,
    negative,
    not_equal,
    ones_like,
    power,
    round,
    rsqrt,
    sigmoid,
    sin,
    sqrt,
    subtract,
    tan,
    tanh,
    trunc,
    where,
    zeros_like,
)
from .contract import einsum, matmul, tensordot
from .gather import take
from .join import concatenate, split, stack
from .reduce import (
    all,
    any,
    argmax,
    argmin,
    logsumexp,
    max,
    mean,
    min,
    prod,
    sum,
)
from .tag import BROADCAST, COMM_REDUCE, COMM_REDUCE_IDX, ELEMWISE, INJECTIVE, MATMUL
from .transform import expand_dims, flip, reshape, squeeze, transpose

__all__ = [
    "BROADCAST",
    "COMM_REDUCE",
    "COMM_REDUCE_IDX",
    "ELEMWISE",
    "INJECTIVE",
    "MATMUL",
    "abs",
    "add",
    "all",
    "any",
    "argmax",
    "argmin",
    "astype",
    "broadcast_to",
    "cast",
    "ceil",
    "clip",
    "concatenate",
    "cos",
    "divide",
    "einsum",
    "elemwise_sum",
    "equal",
    "erf",
    "exp",
    "expand_dims",
    "flip",
    "floor",
    "floor_divide",
    "floor_mod",
    "full",
    "full_like",
    "gradient_cost",
    "greater",
    "greater_equal",
    "less",
    "less_equal",
    "log",
    "log2",
    "log10",
    "logical_and",
    "logical_not",
    "logical_or",
    "logsumexp",
    "matmul",
    "max",
    "maximum",
    "mean",
    "min",
    "minimum",
    "multiply",
    "negative",
    "nn",
    "not_equal",
    "ones_like",
    "power",
    "prod",
    "reshape",
    "round",
    "rsqrt",
    "sigmoid",
    "sin",
    "split",
    "sqrt",
    "squeeze",
    "stack",
    "subtract",
    "sum",
    "tag",
    "take",
    "tan",
    "tanh",
    "tensordot",
    "testing",
    "transpose",
    "trunc",
    "utils",
    "where",
    "zeros_like",
]


def __getattr__(name: str) -> Any:
    """TVM's per-target schedules (``topi.generic``, ``topi.x86``, ``topi.cuda``), imported
    at first use; any other TVM topi name tex lacks: an AttributeError saying what to use."""
    if name in ("generic", "x86", "cuda"):
        # they return tex.schedule.auto_schedule, a row below tex.topi (tests/test_layout.py)
        from ..schedule.topi_schedules import NAMESPACES
        globals()[name] = NAMESPACES[name]
        return NAMESPACES[name]
    raise missing("tex.topi", name, __all__)
