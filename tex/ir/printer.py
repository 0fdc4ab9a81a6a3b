"""Readable printing of expressions, tensors and whole programs.

    T[i, j] = sum(X[i, k] * W[j, k], k in [0, 100))

Constants print bare for the default dtypes (``2`` is int32, ``2.0`` float32) and with
their dtype otherwise (``float64(2.0)``). Parentheses follow operator precedence (as in
Python; ``&&``, ``||`` and ``!`` are the logical operators), so the text reads unambiguously.
"""
from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from typing import Any

from .expr import (
    Binary,
    Cast,
    Compare,
    Const,
    Expr,
    IterVar,
    Op,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from .tensor import (
    ComputeOp,
    ExternBuffer,
    ExternOp,
    Operation,
    PlaceholderOp,
    ScanOp,
    Tensor,
)

__all__ = ["format_expr", "format_exprs", "shared_subexpressions", "binding_names",
           "format_tensor", "format_op", "format_program", "INFIX", "PREC"]

# infix symbol and precedence (higher binds tighter) of each operator that prints infix
INFIX: dict[Op, tuple[str, int]] = {
    Op.OR: ("||", 1), Op.AND: ("&&", 2),
    Op.EQ: ("==", 4), Op.NE: ("!=", 4), Op.LT: ("<", 4), Op.LE: ("<=", 4),
    Op.GT: (">", 4), Op.GE: (">=", 4),
    Op.ADD: ("+", 5), Op.SUB: ("-", 5),
    Op.MUL: ("*", 6), Op.DIV: ("/", 6), Op.FLOORDIV: ("//", 6), Op.FLOORMOD: ("%", 6),
    Op.POW: ("**", 8),
}
PREC_NOT, PREC_NEG, PREC_ATOM = 3, 7, 9
PREC = {op: p for op, (_, p) in INFIX.items()}
# operators printed as calls: max(a, b), exp(x)
CALL_NAMES: dict[Op, str] = {op: op.value for op in Op if op not in INFIX}
_RIGHT_ASSOC = {Op.POW}


def _format_const(c: Const) -> str:
    v = c.value
    if c.dtype.is_bool:
        return "True" if v else "False"
    if c.dtype.is_float:
        if math.isnan(v):
            text = "nan"
        elif math.isinf(v):
            text = "inf" if v > 0 else "-inf"
        else:  # the shortest text that reads back to the same value of this dtype
            text = str(c.dtype.numpy.type(v)) if c.dtype.bits < 64 else repr(float(v))
        return text if c.dtype.name == "float32" and math.isfinite(v) else \
            f"{c.dtype.name}({text})"
    return str(v) if c.dtype.name == "int32" else f"{c.dtype.name}({v})"


def _const_prec(c: Const) -> int:
    # a negative literal binds like unary minus: (-1) ** 2 keeps its parentheses
    if not c.dtype.is_bool and c.value < 0 and c.dtype.name in ("int32", "float32"):
        return PREC_NEG
    return PREC_ATOM


# A DAG whose tree (every shared node printed where it occurs) has more nodes than this
# prints its big shared sub-expressions once, as named bindings: text stays linear in the
# DAG (a chain of 40 inlined leaky_relu is a 40-node DAG and a 2^40-node tree).
_TREE_BUDGET = 4096
# shared sub-expressions smaller than this (in tree nodes) are printed where they occur
_SHARE_MIN = 8
_SIZE_CAP = 1 << 62


def _sizes(roots: tuple[Expr, ...]) -> tuple[list[Expr], dict[Expr, int], dict[Expr, int]]:
    """Post-order nodes, tree size (capped) and parent count of each."""
    from .visit import post_order
    nodes = list(post_order(*roots))
    size: dict[Expr, int] = {}
    refs: dict[Expr, int] = {}
    for node in nodes:
        n = 1
        for k in node.children():
            n += size[k]
            refs[k] = refs.get(k, 0) + 1
        size[node] = min(n, _SIZE_CAP)
    return nodes, size, refs


def shared_subexpressions(*roots: Expr) -> set[Expr]:
    """The nodes to print once, as bindings: none when the expressions print small as
    trees; otherwise every non-trivial node with more than one parent."""
    _, size, refs = _sizes(roots)
    return _shared(roots, size, refs)


def _shared(roots: Sequence[Expr], size: dict[Expr, int], refs: dict[Expr, int]) -> set[Expr]:
    if sum(size[r] for r in roots) <= _TREE_BUDGET:
        return set()
    return {n for n, c in refs.items() if c > 1 and size[n] >= _SHARE_MIN}


def format_exprs(roots: list[Expr], names: Iterable[str]) -> tuple[list[tuple[str, str]],
                                                                     list[str]]:
    """The expressions as text, sharing sub-expressions: ``(bindings, texts)`` where each
    binding ``(name, text)`` (named from ``names``, in order of use, children first)
    defines a shared sub-expression that the texts and later bindings refer to by name.
    Iterative: no recursion, whatever the depth; a node's text is dropped once its last
    parent is printed (a deep unshared chain keeps O(depth) text alive, not O(depth^2))."""
    nodes, size, refs = _sizes(tuple(roots))
    shared = _shared(roots, size, refs)
    keep = set(roots)
    text: dict[Expr, tuple[str, int]] = {}
    bindings: list[tuple[str, str]] = []
    fresh = iter(names)

    def wrap(child: Expr, min_prec: int) -> str:
        s, p = text[child]
        return f"({s})" if p < min_prec else s

    for node in nodes:
        text[node] = _format_node(node, text, wrap)
        if node in shared:
            name = next(fresh)
            bindings.append((name, text[node][0]))
            text[node] = (name, PREC_ATOM)
        for k in node.children():
            refs[k] -= 1
            if refs[k] == 0 and k not in keep:
                del text[k]
    return bindings, [text[r][0] for r in roots]


def binding_names(prefix: str = "%") -> Iterable[str]:
    """``%0, %1, ...``: names no variable can have."""
    k = 0
    while True:
        yield f"{prefix}{k}"
        k += 1


def format_expr(root: Expr) -> str:
    """The expression as readable, precedence-aware text (iterative). Shared subtrees are
    printed where they occur, unless that would make the text much bigger than the DAG:
    then big shared ones are named once (``let %0 = ...; <expression over %0>``)."""
    bindings, (body,) = format_exprs([root], binding_names())
    return "".join(f"let {name} = {value}; " for name, value in bindings) + body


def _format_node(node: Expr, text: dict, wrap) -> tuple[str, int]:  # type: ignore[type-arg]
    match node:
        case Const():
            return _format_const(node), _const_prec(node)
        case Var(name):
            return name, PREC_ATOM
        case TensorRead(tensor, indices):
            return f"{tensor.name}[{', '.join(text[i][0] for i in indices)}]", PREC_ATOM
        case Unary(Op.NEG, a):
            return f"-{wrap(a, PREC_NEG + 1)}", PREC_NEG
        case Unary(Op.NOT, a):
            return f"!{wrap(a, PREC_ATOM)}", PREC_NOT
        case Unary(op, a):
            return f"{CALL_NAMES[op]}({text[a][0]})", PREC_ATOM
        case Binary(op, a, b) | Compare(op, a, b) if op in INFIX:
            sym, p = INFIX[op]
            if op in _RIGHT_ASSOC:
                left_min, right_min = p + 1, p
            elif op in COMPARE_LIKE:
                left_min = right_min = p + 1
            else:  # left-associative: a - (b - c) keeps its parentheses
                left_min, right_min = p, p + 1
            return f"{wrap(a, left_min)} {sym} {wrap(b, right_min)}", p
        case Binary(op, a, b):
            return f"{CALL_NAMES[op]}({text[a][0]}, {text[b][0]})", PREC_ATOM
        case Select(c, a, b):
            return f"select({text[c][0]}, {text[a][0]}, {text[b][0]})", PREC_ATOM
        case Cast(dtype, a):
            return f"{dtype.name}({text[a][0]})", PREC_ATOM
        case Reduce():
            return _format_reduce(node, text), PREC_ATOM
    raise TypeError(f"cannot print {type(node).__name__}")


COMPARE_LIKE = {Op.EQ, Op.NE, Op.LT, Op.LE, Op.GT, Op.GE}


def _format_axes(axes: Iterable[IterVar]) -> str:
    return ", ".join(f"{iv.var.name} in {iv.dom}" for iv in axes)


def _format_reduce(r: Reduce, text: dict) -> str:  # type: ignore[type-arg]
    src = ", ".join(text[s][0] for s in r.source)
    if len(r.source) > 1:
        src = f"({src})"
    parts = [src, _format_axes(r.axis)]
    if not (isinstance(r.condition, Const) and r.condition.value is True):
        parts.append(f"where={text[r.condition][0]}")
    if r.init:
        init = ", ".join(text[i][0] for i in r.init)
        parts.append(f"init={init if len(r.init) == 1 else f'({init})'}")
    out = f"{r.combiner.name}({', '.join(parts)})"
    return out if len(r.source) == 1 else f"{out}[{r.value_index}]"


def format_op(op: Operation) -> str:
    """One line per output: ``T[i, j] = body`` or ``X = placeholder(shape, dtype)``."""
    if isinstance(op, PlaceholderOp):
        return f"{op.name} = placeholder({op.shape}, {op.dtype.name})"
    if isinstance(op, ExternOp):
        return format_extern(op)
    if isinstance(op, ScanOp):
        return format_scan(op)
    assert isinstance(op, ComputeOp)
    idx = ", ".join(iv.var.name for iv in op.axis)
    lines = []
    for t in op.outputs:
        lhs = f"{t.name}[{idx}]" if op.axis else f"{t.name}[]"
        body = op.output_body(t.value_index)
        lines.append(f"{lhs} = {format_expr(body)}")
    return "\n".join(lines)


def format_extern_arg(op: ExternOp, a: Any) -> str:
    """One argument of an extern call: a buffer by its tensor's name, a scalar expression,
    a string literal."""
    if isinstance(a, ExternBuffer):
        return op.buffer_tensor(a).name
    if isinstance(a, str):
        return repr(a)
    return format_expr(a)


def format_extern(op: ExternOp) -> str:
    """``C = extern name(A, B, C, False)``: the outputs and the call."""
    outs = ", ".join(t.name for t in op.outputs)
    args = ", ".join(format_extern_arg(op, a) for a in op.call.args)
    return f"{outs} = extern {op.call.func_name}({args})"


def format_scan(op: ScanOp) -> str:
    """``S = scan(init S_init, update S_update, state S_state) over t in [1, 10)``, then
    the body's equations indented."""
    parts = [f"init {i.name}, update {u.name}, state {s.name}"
             for i, u, s in zip(op.init, op.update, op.state_placeholder)]
    outs = ", ".join(t.name for t in op.outputs)
    ax = op.scan_axis
    lines = [f"{outs} = scan({'; '.join(parts)}) over {ax.var.name} in "
             f"[{ax.dom.min}, {ax.dom.min + ax.dom.extent})"]
    lines.extend("  " + line for b in op.body_ops for line in format_op(b).split("\n"))
    return "\n".join(lines)


def format_tensor(t: Tensor) -> str:
    """The defining equation of the tensor (of its output, for a multi-output op)."""
    op = t.op
    if isinstance(op, (PlaceholderOp, ExternOp, ScanOp)):
        return format_op(op)
    assert isinstance(op, ComputeOp)
    idx = ", ".join(iv.var.name for iv in op.axis)
    lhs = f"{t.name}[{idx}]" if op.axis else f"{t.name}[]"
    return f"{lhs} = {format_expr(op.output_body(t.value_index))}"


def format_program(*tensors: Tensor) -> str:
    """Every operation the tensors depend on, producers first, with shapes and dtypes."""
    from .visit import topo_sort_ops
    lines = []
    for op in topo_sort_ops(tensors):
        if isinstance(op, PlaceholderOp):
            lines.append(format_op(op))
            continue
        shapes = ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in op.outputs)
        lines.append(f"# {shapes}")
        lines.append(format_op(op))
    return "\n".join(lines)
