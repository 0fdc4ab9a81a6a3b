"""TEDD, TVM's tensor-expression debug display, for tex schedules: the dataflow graph, the
schedule tree and the iteration-variable relationship graph as Graphviz DOT text.

The three functions take a ``Schedule`` and TVM's keywords (``show_svg``, ``dot_file_path``,
``output_dot_string``), so that code written for ``tvm.contrib.tedd`` runs on tex:

- ``viz_dataflow_graph``: one node per placeholder and per stage, its input tensors on the
  left and its outputs (name, dtype, shape) on the right; an edge runs from each tensor to
  the stages that read it.
- ``viz_schedule_tree``: each stage with its loops, outer first (name, kind: serial,
  reduction, parallel, vectorize, unroll or the GPU thread it is bound to, and range),
  under ``ROOT``, or under the loop of the stage it is computed at (``compute_at``);
  inlined stages are drawn dashed, with a dashed edge to the stages they are inlined into.
- ``viz_itervar_relationship_graph``: per stage, every iteration variable it has had, the
  relations between them (``split`` with its factor or ``nparts``, ``fuse``, ``singleton``)
  and which are the current loops (their position in the loop order).

Ranges are the extents the schedule records: TVM infers the smaller ranges of a stage
computed at a loop of another (``InferBound``), tex shows the extents of its axes.

The text is generated here, without Graphviz; labels are escaped (HTML-like labels for the
tables, quoted strings elsewhere). ``show_svg=True`` renders it with Graphviz's ``dot``
(``tex.viz.find_dot``); without it the DOT text is returned instead, with a warning.

Example
-------
>>> from tex.contrib import tedd
>>> tedd.viz_schedule_tree(s, dot_file_path="/tmp/scheduletree.dot")
>>> print(tedd.viz_dataflow_graph(s, output_dot_string=True))
"""
from __future__ import annotations

import os
import warnings
from collections.abc import Iterable
from pathlib import Path
from typing import Any

from ..ir.expr import IterVar
from ..ir.printer import format_op
from ..ir.tensor import ExternOp, Operation, PlaceholderOp, Tensor
from ..schedule import Schedule, Stage
from ..schedule.axes import PARALLEL, THREAD, UNROLL, VECTORIZE, Fuse, Singleton, Split
from ..viz import find_dot, render

__all__ = ["LOOP_KINDS", "viz_dataflow_graph", "viz_itervar_relationship_graph",
           "viz_schedule_tree"]

# loop kind -> (legend text, fill colour of its index cell)
LOOP_KINDS: dict[str, tuple[str, str]] = {
    "serial": ("data parallel, serial", "#FFFFFF"),
    "reduce": ("reduction", "#F9D9A8"),
    PARALLEL: ("parallel", "#F2B5AE"),
    VECTORIZE: ("vectorize", "#A9D3F0"),
    UNROLL: ("unroll", "#D5BDE3"),
    THREAD: ("bound to a GPU thread", "#8CBCE0"),
}
_WRAP = 56  # characters per line of a compute's text in the schedule tree
_FONT = 'fontname="Helvetica", fontsize=11'


# --------------------------------------------------------------------------------------------
# text


def _quoted(text: str) -> str:
    """``text`` as a DOT double-quoted string."""
    return '"' + text.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n") + '"'


def _html(text: str) -> str:
    """``text`` escaped for a DOT HTML-like label (newlines become line breaks)."""
    out = text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;")
    out = out.replace('"', "&quot;")
    return out.replace("\n", '<BR ALIGN="LEFT"/>')


def _wrapped(text: str, width: int = _WRAP) -> str:
    """``text`` broken into lines of at most ``width`` characters, escaped for HTML."""
    lines = []
    for line in text.splitlines() or [""]:
        lines.extend(line[k:k + width] for k in range(0, max(len(line), 1), width))
    return '<BR ALIGN="LEFT"/>'.join(_html(line) for line in lines) + '<BR ALIGN="LEFT"/>'


def _shape(t: Tensor) -> str:
    return f"{t.dtype.name}[{', '.join(str(n) for n in t.shape)}]"


def _range(iv: IterVar) -> str:
    return f"range(min={iv.dom.min}, ext={iv.dom.extent})"


def _loop_kind(stage: Stage, iv: IterVar) -> tuple[str, str]:
    """``(kind, text)`` of a loop of ``stage``: a ``LOOP_KINDS`` key and what to print."""
    kind = stage.annotations.get(iv)
    if kind == THREAD:
        thread = stage.bindings.get(iv)
        return THREAD, thread.tag if thread is not None else "thread"
    if kind in (PARALLEL, VECTORIZE, UNROLL):
        return kind, kind
    return ("reduce", "reduce") if iv.kind == "reduce" else ("serial", "serial")


def _leaf_position(stage: Stage, iv: IterVar) -> int:
    """The position of ``iv`` in the loop order (outermost 0), -1 when it is not a loop."""
    for k, v in enumerate(stage.leaf_iter_vars):
        if v is iv:
            return k
    return -1


def _attach_text(stage: Stage) -> str:
    if stage.attach_type == "inline":
        return "inlined"
    if stage.attach_type == "scope" and stage.attach_stage is not None:
        ivar = stage.attach_ivar.name if stage.attach_ivar is not None else "?"
        return f"compute_at {stage.attach_stage.name}.{ivar}"
    return "root"


def _table(rows: Iterable[str], border: int = 0) -> str:
    return (f'<TABLE BORDER="{border}" CELLBORDER="1" CELLSPACING="0" CELLPADDING="4">'
            + "".join(rows) + "</TABLE>")


def _legend(lines: list[str]) -> None:
    rows = [f'<TR><TD BGCOLOR="{colour}" WIDTH="16"> </TD>'
            f'<TD ALIGN="LEFT">{_html(text)}</TD></TR>' for text, colour in LOOP_KINDS.values()]
    lines += ["  subgraph cluster_legend {", '    label="loop kinds"; style=dashed;',
              f"    legend [shape=none, margin=0, label=<{_table(rows)}>];", "  }"]


def _header(name: str, rankdir: str) -> list[str]:
    return [f"digraph {_quoted(name)} {{", f"  rankdir={rankdir};", f"  graph [{_FONT}];",
            f"  node [{_FONT}];", f"  edge [{_FONT}];"]


# --------------------------------------------------------------------------------------------
# arguments and output


def _check(sch: Any, dot_file_path: Any, fn: str) -> Schedule:
    if not isinstance(sch, Schedule):
        raise TypeError(f"tedd.{fn}: sch must be a tex Schedule (tex.create_schedule(...)), "
                        f"got {type(sch).__name__} {sch!r:.80}")
    if not isinstance(dot_file_path, (str, os.PathLike)):
        raise TypeError(f"tedd.{fn}: dot_file_path must be a str or a path ('' writes no "
                        f"file), got {type(dot_file_path).__name__}")
    return sch


def _shown_in_notebook(svg: str) -> bool:
    """Display ``svg`` when running inside IPython (a notebook, a console); False when
    IPython is not installed or not running."""
    try:
        from IPython import get_ipython  # type: ignore[import-not-found,unused-ignore]
        from IPython.display import SVG, display  # type: ignore[import-not-found,unused-ignore]
    except ImportError:
        return False
    if get_ipython() is None:
        return False
    display(SVG(svg))
    return True


def _emit(dot: str, fn: str, show_svg: bool, dot_file_path: str | os.PathLike[str],
          output_dot_string: bool) -> str | None:
    """TVM's outputs of one graph: the file, the picture, the returned text."""
    if os.fspath(dot_file_path):
        Path(dot_file_path).write_text(dot)
    if show_svg:
        if find_dot() is None:
            warnings.warn(f"tedd.{fn}: Graphviz's 'dot' was not found (install graphviz, or "
                          "set TEX_DOT to its path), so no SVG was made; the DOT text is "
                          "returned instead", stacklevel=3)
            return dot
        svg = render(dot, "svg").decode()
        if not _shown_in_notebook(svg) and not output_dot_string:
            return svg
    return dot if output_dot_string else None


# --------------------------------------------------------------------------------------------
# the dataflow graph


def _dataflow_dot(sch: Schedule) -> str:
    stages = list(sch.stages)
    stage_ids = {st: f"S{k}" for k, st in enumerate(stages)}
    # operations read but without a stage (placeholders), in order of first read
    inputs: dict[Operation, str] = {}
    for st in stages:
        for t in st.op.input_tensors:
            if sch.stage_map.get(t.op) is None and t.op not in inputs:
                inputs[t.op] = f"P{len(inputs)}"

    def node_of(op: Operation) -> str:
        st = sch.stage_map.get(op)
        return stage_ids[st] if st is not None else inputs[op]

    lines = _header("dataflow", "LR")
    lines.append('  node [shape=none, margin=0];')
    for op, nid in inputs.items():
        kind = "placeholder" if isinstance(op, PlaceholderOp) else "outside the schedule"
        lines.append(f"  {nid} [label=<{_node_table(op, [], kind, '#DBE9F6')}>];")
    for st in stages:
        kind = f"Scope: {st.scope}<BR/>{_html(_attach_text(st))}"
        if isinstance(st.op, ExternOp):
            kind += f"<BR/>extern {_html(st.op.call.func_name)}"
        if st.is_output:
            kind += "<BR/>output"
        colour = "#EEEEEE" if st.attach_type == "inline" else "#F4F4F4"
        table = _node_table(st.op, st.op.input_tensors, kind, colour, st.is_output)
        lines.append(f"  {stage_ids[st]} [label=<{table}>];")
    for st in stages:
        for k, t in enumerate(st.op.input_tensors):
            lines.append(f"  {node_of(t.op)}:O{t.value_index}:e -> {stage_ids[st]}:I{k}:w;")
    lines.append("}")
    return "\n".join(lines) + "\n"


def _node_table(op: Operation, reads: list[Tensor], kind: str, colour: str,
                bold: bool = False) -> str:
    """A dataflow node: the tensors read (ports ``I<k>``) | name and kind | the outputs
    (ports ``O<k>``)."""
    ins = [f'<TR><TD PORT="I{k}">{_html(t.name)}</TD></TR>' for k, t in enumerate(reads)]
    outs = [f'<TR><TD PORT="O{k}">{_html(t.name)}<BR/>{_html(_shape(t))}</TD></TR>'
            for k, t in enumerate(op.outputs)]
    cells = []
    if ins:
        cells.append(f"<TD>{_table(ins)}</TD>")
    cells.append(f'<TD BGCOLOR="{colour}"><B>{_html(op.name)}</B><BR/>{kind}</TD>')
    cells.append(f"<TD>{_table(outs)}</TD>")
    return _table([f"<TR>{''.join(cells)}</TR>"], border=2 if bold else 0)


def viz_dataflow_graph(sch: Schedule, show_svg: bool = False,
                       dot_file_path: str | os.PathLike[str] = "",
                       output_dot_string: bool = False) -> str | None:
    """The dataflow graph of ``sch``: placeholders and stages, edges producer -> consumer.

    Parameters
    ----------
    sch : Schedule
        The schedule to draw.
    show_svg : bool
        Render with Graphviz: displayed in IPython when it runs, else the SVG text is
        returned. Without Graphviz, the DOT text is returned and a warning says so.
    dot_file_path : str or path
        Where to write the DOT text ('' writes nothing).
    output_dot_string : bool
        Return the DOT text.

    Returns
    -------
    str or None
        The DOT text (``output_dot_string``), the SVG text (``show_svg`` outside IPython),
        else None.

    Raises
    ------
    TypeError
        ``sch`` is not a Schedule, or ``dot_file_path`` not a str or path.
    """
    sch = _check(sch, dot_file_path, "viz_dataflow_graph")
    return _emit(_dataflow_dot(sch), "viz_dataflow_graph", show_svg, dot_file_path,
                 output_dot_string)


# --------------------------------------------------------------------------------------------
# the schedule tree


def _schedule_tree_dot(sch: Schedule) -> str:
    stages = list(sch.stages)
    ids = {st: f"S{k}" for k, st in enumerate(stages)}
    lines = _header("schedule_tree", "BT")
    lines.append('  node [shape=none, margin=0];')
    lines.append('  ROOT [shape=oval, margin="0.1", label="ROOT"];')
    for st in stages:
        head = (f"<B>{_html(st.name)}</B><BR/>Scope: {_html(st.scope)}<BR/>"
                f"{_html(_attach_text(st))}")
        if st.is_output:
            head += "<BR/>output"
        rows = [f'<TR><TD COLSPAN="2" PORT="stage" BGCOLOR="#D9D9D9">{head}</TD></TR>']
        for k, iv in enumerate(st.leaf_iter_vars):
            kind, text = _loop_kind(st, iv)
            rows.append(f'<TR><TD PORT="L{k}" BGCOLOR="{LOOP_KINDS[kind][1]}">{k}</TD>'
                        f'<TD ALIGN="LEFT" BALIGN="LEFT">{_html(iv.name)} ({_html(text)})<BR/>'
                        f"{_html(_range(iv))}</TD></TR>")
        rows.append(f'<TR><TD COLSPAN="2" ALIGN="LEFT" BALIGN="LEFT">'
                    f"{_wrapped(format_op(st.op))}</TD></TR>")
        style = ", style=dashed" if st.attach_type == "inline" else ""
        lines.append(f"  {ids[st]} [label=<{_table(rows)}>{style}];")
    for st in stages:
        parent = st.attach_stage
        if st.attach_type == "scope" and parent is not None and parent in ids:
            k = _leaf_position(parent, st.attach_ivar) if st.attach_ivar is not None else -1
            port = f"L{k}" if k >= 0 else "stage"
            lines.append(f"  {ids[st]}:stage -> {ids[parent]}:{port};")
        elif st.attach_type == "inline":
            into = [c for c in sch.consumers(st) if c in ids]
            for c in into:
                lines.append(f'  {ids[st]}:stage -> {ids[c]}:stage [style=dashed, '
                             f'label="inlined"];')
            if not into:
                lines.append(f'  {ids[st]}:stage -> ROOT [style=dashed, label="inlined"];')
        else:
            lines.append(f"  {ids[st]}:stage -> ROOT;")
    _legend(lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def viz_schedule_tree(sch: Schedule, show_svg: bool = False,
                      dot_file_path: str | os.PathLike[str] = "",
                      output_dot_string: bool = False) -> str | None:
    """The schedule tree of ``sch``: each stage's loops and where it is computed (under
    ``ROOT``, at a loop of another stage, or inlined). Keywords and result as
    ``viz_dataflow_graph``.

    Raises
    ------
    TypeError
        ``sch`` is not a Schedule, or ``dot_file_path`` not a str or path.
    """
    sch = _check(sch, dot_file_path, "viz_schedule_tree")
    return _emit(_schedule_tree_dot(sch), "viz_schedule_tree", show_svg, dot_file_path,
                 output_dot_string)


# --------------------------------------------------------------------------------------------
# the iteration-variable relationship graph


def _relation_label(rel: Split | Fuse | Singleton) -> str:
    if isinstance(rel, Split):
        text = f"split\nnparts={rel.nparts}" if rel.nparts is not None else \
            f"split\nfactor={rel.factor}"
        return text + ("\ntail=shift" if rel.tail == "shift" else "")
    return "fuse" if isinstance(rel, Fuse) else "singleton"


def _relation_vars(rel: Split | Fuse | Singleton) -> tuple[IterVar, ...]:
    if isinstance(rel, Split):
        return rel.parent, rel.outer, rel.inner
    if isinstance(rel, Fuse):
        return rel.outer, rel.inner, rel.fused
    return (rel.iter,)


def _itervar_graph_dot(sch: Schedule) -> str:
    lines = _header("itervar_relationship", "TB")
    for s, st in enumerate(sch.stages):
        ids: dict[int, str] = {}  # id(IterVar) -> node id (== on IterVars builds expressions)
        order: list[IterVar] = []
        for iv in [*st.all_iter_vars, *(v for rel in st.relations for v in _relation_vars(rel))]:
            if id(iv) not in ids:
                ids[id(iv)] = f"S{s}_iv{len(ids)}"
                order.append(iv)
        lines += [f"  subgraph cluster_S{s} {{",
                  f'    label=<<B>{_html(st.name)}</B>>; style=rounded; color="#888888";',
                  "    node [shape=none, margin=0];"]
        lines += [f"    {ids[id(iv)]} [label=<{_itervar_table(st, iv)}>];" for iv in order]
        edges: list[str] = []
        for r, rel in enumerate(st.relations):
            rid = f"S{s}_r{r}"
            lines.append(f'    {rid} [shape=box, style="rounded,filled", fillcolor="#EEEEEE", '
                         f"label={_quoted(_relation_label(rel))}];")
            nodes = [ids[id(v)] for v in _relation_vars(rel)]
            if isinstance(rel, Split):  # parent -> split -> outer, inner
                edges += [f"    {nodes[0]} -> {rid};", f'    {rid} -> {nodes[1]} [label="outer"];',
                          f'    {rid} -> {nodes[2]} [label="inner"];']
            elif isinstance(rel, Fuse):  # outer, inner -> fuse -> fused
                edges += [f'    {nodes[0]} -> {rid} [label="outer"];',
                          f'    {nodes[1]} -> {rid} [label="inner"];', f"    {rid} -> {nodes[2]};"]
            else:  # singleton -> its loop
                edges.append(f"    {rid} -> {nodes[0]};")
        lines += edges + ["  }"]
    _legend(lines)
    lines.append("}")
    return "\n".join(lines) + "\n"


def _itervar_table(stage: Stage, iv: IterVar) -> str:
    """An iteration variable: its loop position (blank when it is no longer a loop), name,
    kind and range; loops have a bold border."""
    pos = _leaf_position(stage, iv)
    kind, text = _loop_kind(stage, iv)
    if pos < 0:
        text = "reduce" if iv.kind == "reduce" else "axis"
        kind = "reduce" if iv.kind == "reduce" else "serial"
    index = str(pos) if pos >= 0 else " "
    font = ("", "") if pos >= 0 else ('<FONT COLOR="#777777">', "</FONT>")
    row = (f'<TR><TD BGCOLOR="{LOOP_KINDS[kind][1]}">{index}</TD>'
           f'<TD ALIGN="LEFT" BALIGN="LEFT">{font[0]}{_html(iv.name)} ({_html(text)})<BR/>'
           f"{_html(_range(iv))}{font[1]}</TD></TR>")
    return _table([row], border=2 if pos >= 0 else 0)


def viz_itervar_relationship_graph(sch: Schedule, show_svg: bool = False,
                                   dot_file_path: str | os.PathLike[str] = "",
                                   output_dot_string: bool = False) -> str | None:
    """The iteration variables of each stage of ``sch`` and the split, fuse and singleton
    relations between them; the current loops have a bold border and their position in
    the loop order. Keywords and result as ``viz_dataflow_graph``.

    Raises
    ------
    TypeError
        ``sch`` is not a Schedule, or ``dot_file_path`` not a str or path.
    """
    sch = _check(sch, dot_file_path, "viz_itervar_relationship_graph")
    return _emit(_itervar_graph_dot(sch), "viz_itervar_relationship_graph", show_svg,
                 dot_file_path, output_dot_string)
