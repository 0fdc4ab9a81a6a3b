"""The tensor DAG as a networkx graph, and as Graphviz DOT text.

Nodes are operations (``PlaceholderOp``/``ComputeOp``) with attributes ``name``,
``kind``, ``shape`` and ``dtype``; an edge runs producer -> consumer.
"""
from __future__ import annotations

import networkx as nx

from .printer import format_op
from .tensor import ComputeOp, PlaceholderOp, Tensor
from .visit import topo_sort_ops

__all__ = ["graph", "to_dot"]


def _check(tensors: tuple[Tensor, ...], fn: str) -> None:
    if not tensors:
        raise ValueError(f"{fn}: give at least one tensor")
    for t in tensors:
        if not isinstance(t, Tensor):
            raise TypeError(f"{fn}: expected Tensor arguments, got {type(t).__name__} {t!r}")


def graph(*tensors: Tensor) -> nx.DiGraph:
    """The DAG of operations the tensors depend on (edges producer -> consumer).

    Example
    -------
    >>> g = tex.graph(L)
    >>> [g.nodes[op]["name"] for op in nx.topological_sort(g)]
    """
    _check(tensors, "graph")
    g = nx.DiGraph()
    for op in topo_sort_ops(tensors):
        kind = "placeholder" if isinstance(op, PlaceholderOp) else "compute"
        out = op.output(0)
        g.add_node(op, name=op.name, kind=kind, shape=out.shape, dtype=out.dtype.name)
        if isinstance(op, ComputeOp):
            for t in op.input_tensors:
                g.add_edge(t.op, op, tensor=t.name)
    return g


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def to_dot(*tensors: Tensor, name: str = "tex") -> str:
    """Graphviz DOT text of the DAG: placeholders as ellipses, computes as boxes whose
    label is the defining equation; deterministic node ids (n0, n1, ... in topological order).
    """
    _check(tensors, "to_dot")
    ops = topo_sort_ops(tensors)
    ids = {op: f"n{i}" for i, op in enumerate(ops)}
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;",
             '  node [fontname="monospace", fontsize=10];']
    for op in ops:
        if isinstance(op, PlaceholderOp):
            label = f"{op.name}\n{op.dtype.name}{list(op.shape)}"
            lines.append(f"  {ids[op]} [shape=ellipse, label={_quote(label)}];")
        else:
            shapes = ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in op.outputs)
            label = f"{format_op(op)}\n{shapes}"
            lines.append(f"  {ids[op]} [shape=box, label={_quote(label)}];")
    for op in ops:
        if isinstance(op, ComputeOp):
            for t in op.input_tensors:
                lines.append(f"  {ids[t.op]} -> {ids[op]};")
    lines.append("}")
    return "\n".join(lines) + "\n"
