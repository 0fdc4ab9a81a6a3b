"""The tensor DAG as a networkx graph, and as Graphviz DOT text.

Nodes are operations (``PlaceholderOp``/``ComputeOp``/``ExternOp``/``ScanOp``) with
attributes ``name``, ``kind``, ``shape`` and ``dtype``; an edge runs producer -> consumer.
"""
from __future__ import annotations

import networkx as nx

from .printer import format_op
from .tensor import ExternOp, PlaceholderOp, ScanOp, Tensor
from .visit import topo_sort_ops

__all__ = ["graph", "to_dot", "DOT_STYLES"]


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
        kind = "placeholder" if isinstance(op, PlaceholderOp) else \
            "extern" if isinstance(op, ExternOp) else \
            "scan" if isinstance(op, ScanOp) else "compute"
        out = op.output(0)
        g.add_node(op, name=op.name, kind=kind, shape=out.shape, dtype=out.dtype.name)
        if not isinstance(op, PlaceholderOp):
            for t in op.input_tensors:
                g.add_edge(t.op, op, tensor=t.name)
    return g


def _quote(text: str) -> str:
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


# node styles by kind: inputs, forward computes, gradient computes (tag "gradient", set by
# tex.differentiate), and the tensors asked for (a bold border on top of their kind)
DOT_STYLES: dict[str, str] = {
    "placeholder": 'shape=ellipse, style=filled, fillcolor="#dbe9f6", color="#4a7ab5"',
    "compute": 'shape=box, style="rounded,filled", fillcolor="#f4f4f4", color="#666666"',
    "gradient": 'shape=box, style="rounded,filled", fillcolor="#fde3c8", color="#c2692a"',
    "extern": 'shape=box3d, style=filled, fillcolor="#e4f2e0", color="#4c8a3f"',
    "scan": 'shape=box, style="rounded,filled,bold", fillcolor="#ece4f4", color="#6f4c9b"',
}


def _kind(op: object) -> str:
    if isinstance(op, PlaceholderOp):
        return "placeholder"
    if isinstance(op, ExternOp):
        return "extern"
    if isinstance(op, ScanOp):
        return "scan"
    return "gradient" if getattr(op, "tag", "") == "gradient" else "compute"


def to_dot(*tensors: Tensor, name: str = "tex") -> str:
    """Graphviz DOT text of the DAG, deterministic (node ids n0, n1, ... in topological
    order). Placeholders are blue ellipses, computes grey boxes labelled with their defining
    equation, gradient tensors (made by ``tex.differentiate``) orange boxes, extern calls
    green 3-d boxes, scans purple boxes with their bodies; the tensors
    given have a bold border; each edge is labelled with the shape of the tensor it carries.
    ``tex.viz.save`` renders it.
    """
    _check(tensors, "to_dot")
    ops = topo_sort_ops(tensors)
    ids = {op: f"n{i}" for i, op in enumerate(ops)}
    roots = {t.op for t in tensors}
    lines = [f"digraph {_quote(name)} {{", "  rankdir=TB;",
             '  node [fontname="monospace", fontsize=10];',
             '  edge [fontname="monospace", fontsize=9, color="#555555"];']
    for op in ops:
        if isinstance(op, PlaceholderOp):
            label = f"{op.name}\n{op.dtype.name}{list(op.shape)}"
        else:
            shapes = ", ".join(f"{t.dtype.name}{list(t.shape)}" for t in op.outputs)
            label = f"{format_op(op)}\n{shapes}"
        bold = ", penwidth=2.5" if op in roots else ""
        lines.append(f"  {ids[op]} [{DOT_STYLES[_kind(op)]}{bold}, label={_quote(label)}];")
    for op in ops:
        if not isinstance(op, PlaceholderOp):
            for t in dict.fromkeys(op.input_tensors):
                lines.append(f"  {ids[t.op]} -> {ids[op]} [label={_quote(str(list(t.shape)))}];")
    lines.append("}")
    return "\n".join(lines) + "\n"
