"""tex: a compiler for differentiable tensor expressions."""
from . import (
    autodiff,
    build,
    contrib,
    debug,
    dtype,
    error,
    ir,
    lower,
    schedule,
    te,
    testing,
    tir,
    topi,
    viz,
)
from .autodiff import differentiate, gradient
from .error import TVMError
from .ir import Tensor, graph, to_dot
from .ir.expr import Expr, IterVar
from .ir.printer import format_program as PrintTensorRecursively
from .runtime import ndarray as nd
from .runtime.ndarray import cpu, cuda, device, gpu
from .schedule import create_schedule, thread_axis
from .te import (
    abs,
    all,
    any,
    ceil,
    comm_reducer,
    compute,
    const,
    cos,
    erf,
    exp,
    floor,
    floordiv,
    floormod,
    if_then_else,
    log,
    log2,
    log10,
    max,
    max_value,
    min,
    min_value,
    placeholder,
    power,
    prod,
    reduce_axis,
    round,
    rsqrt,
    select,
    sigmoid,
    sin,
    size_var,
    sqrt,
    sum,
    tan,
    tanh,
    trunc,
    truncdiv,
    var,
)
from .te.extern import (
    extern,
    get_global_func,
    list_global_func_names,
    register_func,
    remove_global_func,
)
from .te.scan import scan
from .te.specialize import free_vars, shape_vars, specialize
from .tvm_names import tex_getattr as __getattr__

__version__ = "0.1.0"
