"""The tensor-expression IR: scalar expression nodes, tensors and operations, walks,
printing, verification and the DAG view."""
from .expr import (
    Binary,
    Cast,
    CommReducer,
    Compare,
    Const,
    Expr,
    ExprOp,
    IterVar,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
    as_expr,
    const_value,
    is_const,
)
from .graph import graph, to_dot
from .ops import BINARY_OPS, COMPARE_OPS, FLOAT_ONLY_OPS, UNARY_OPS, Op
from .printer import format_expr, format_op, format_program, format_tensor
from .scatter import ScatterForm, scatter_form
from .tensor import ComputeOp, Operation, PlaceholderOp, Tensor, TensorSlice
from .visit import (
    RuleTable,
    collect_reads,
    collect_vars,
    fixed_point_rewrite,
    for_ops,
    post_order,
    rewrite,
    substitute,
    topo_sort_ops,
)

__all__ = [
    "BINARY_OPS", "COMPARE_OPS", "FLOAT_ONLY_OPS", "UNARY_OPS", "Binary", "Cast",
    "CommReducer", "Compare", "Const", "Expr", "ExprOp", "IterVar", "Op", "Range", "Reduce",
    "Select", "TensorRead", "Unary", "Var", "as_expr", "const_value", "is_const", "graph",
    "to_dot", "format_expr", "format_op", "format_program", "format_tensor", "ComputeOp",
    "Operation", "PlaceholderOp", "Tensor", "TensorSlice", "RuleTable", "for_ops", "collect_reads",
    "collect_vars", "fixed_point_rewrite", "post_order", "rewrite", "substitute",
    "topo_sort_ops", "ScatterForm", "scatter_form",
]
