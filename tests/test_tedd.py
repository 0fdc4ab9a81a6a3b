"""tex.contrib.tedd (TVM's TEDD): the dataflow graph, schedule tree and iteration-variable
relationship graph of CPU and GPU schedules as DOT text, checked for their nodes, edges and
labels and for well-formed DOT (balanced braces, edges between declared nodes and ports,
HTML labels that parse as XML; Graphviz itself where it is installed), and TVM's keywords:
dot_file_path, output_dot_string, show_svg with and without Graphviz."""
from __future__ import annotations

import re
import stat
import sys
import types
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest

import tex
from tex import topi
from tex.contrib import tedd
from tex.viz import find_dot, render

VIZ = (tedd.viz_dataflow_graph, tedd.viz_schedule_tree, tedd.viz_itervar_relationship_graph)

# --------------------------------------------------------------------------------------------
# a small DOT reader: enough to check the structure of what tedd writes (one statement a line)

_EDGE = re.compile(r"^\s*(\w+)(?::(\w+))?(?::(?:n|ne|e|se|s|sw|w|nw|c|_))? -> "
                   r"(\w+)(?::(\w+))?(?::(?:n|ne|e|se|s|sw|w|nw|c|_))?\s*(\[.*\])?;$")
_NODE = re.compile(r"^\s*(\w+) \[(.*)\];$")


def _skeleton(line: str) -> tuple[str, list[str]]:
    """``line`` with its quoted strings replaced by ``""`` and its HTML strings by ``<>``,
    and the HTML strings' contents."""
    out: list[str] = []
    html: list[str] = []
    i = 0
    while i < len(line):
        c = line[i]
        if c == '"':
            j = i + 1
            while line[j] != '"':
                j += 2 if line[j] == "\\" else 1
            out.append('""')
            i = j + 1
        elif c == "<":
            depth, j = 0, i
            while True:
                depth += {"<": 1, ">": -1}.get(line[j], 0)
                j += 1
                if depth == 0:
                    break
            html.append(line[i + 1:j - 1])
            out.append("<>")
            i = j
        else:
            out.append(c)
            i += 1
    return "".join(out), html


def parse_dot(text: str) -> dict[str, object]:
    """The nodes (id -> the ports of its label, its line, its label's text, its title: the
    first bold text, else the label) and edges ``(tail, tail port, head, head port,
    attributes)`` of ``text``, after checking that it is one digraph with balanced braces and
    brackets, HTML labels that are well-formed XML, and edges between declared nodes and
    ports."""
    lines = text.splitlines()
    assert re.match(r'^digraph "[^"]*" \{$', lines[0]) and lines[-1] == "}", text[:200]
    depth = 0
    nodes: dict[str, tuple[set[str], str, str, str]] = {}
    found: list[tuple[str, str | None, str, str | None, str]] = []
    texts: list[str] = []  # the text of every HTML label (nodes', clusters')
    for line in lines:
        skel, labels = _skeleton(line)
        depth += skel.count("{") - skel.count("}")
        assert depth >= 0 and skel.count("[") == skel.count("]"), line
        ports: set[str] = set()
        words: list[str] = []
        title = ""
        for label in labels:
            root = ET.fromstring(f"<L>{label}</L>")  # raises on bad escaping or nesting
            ports |= {e.attrib["PORT"] for e in root.iter() if "PORT" in e.attrib}
            words += [t.strip() for t in root.itertext() if t.strip()]
            texts.append("".join(root.itertext()))
            bold = root.find(".//B")
            title = title or ("".join(bold.itertext()) if bold is not None else "")
        m = _EDGE.match(line)
        if m:
            found.append((m.group(1), m.group(2), m.group(3), m.group(4), m.group(5) or ""))
            continue
        m = _NODE.match(skel)
        if m and m.group(1) not in ("node", "edge", "graph"):
            words += re.findall(r'label="((?:[^"\\]|\\.)*)"', line)
            text_ = " ".join(words)
            nodes[m.group(1)] = (ports, line, text_, title or text_)
    assert depth == 0, "unbalanced braces"
    for tail, tport, head, hport, _ in found:
        for node, port in ((tail, tport), (head, hport)):
            assert node in nodes, f"edge to undeclared node {node}"
            assert port is None or port in nodes[node][0], f"no port {port} on {node}"
    return {"nodes": nodes, "edges": found, "texts": texts}


def label_of(graph: dict[str, object], node: str) -> str:
    return graph["nodes"][node][2]  # type: ignore[index,no-any-return]


def node_named(graph: dict[str, object], title: str) -> str:
    """The id of the one node titled ``title``."""
    found = [n for n, v in graph["nodes"].items() if v[3] == title]  # type: ignore[attr-defined]
    assert len(found) == 1, (title, found)
    return found[0]


def loop_names(graph: dict[str, object], prefix: str) -> dict[str, str]:
    """Iteration variable name -> node id, for the nodes whose id starts with ``prefix``."""
    out = {}
    for n in graph["nodes"]:  # type: ignore[attr-defined]
        m = re.match(r"^(?:\d+ )?(\S+) \(", label_of(graph, n))
        if n.startswith(prefix) and m:
            out[m.group(1)] = n
    return out


def edges(graph: dict[str, object]) -> list[tuple[str, str | None, str, str | None, str]]:
    return graph["edges"]  # type: ignore[return-value]


def check_with_graphviz(dot: str, *names: str) -> None:
    """Graphviz accepts ``dot`` and draws ``names`` (skipped without Graphviz)."""
    if find_dot() is None:
        return
    svg = render(dot, "svg").decode()
    for name in names:
        assert name in svg


# --------------------------------------------------------------------------------------------
# schedules


def cpu_schedule() -> tuple[tex.schedule.Schedule, dict[str, object]]:
    """B = 2A inlined into C = sum_k B*A (computed at D's outer loop, k split and fused),
    D = C + 1 split, reordered, parallel outer and vectorized inner."""
    A = tex.placeholder((64, 128), name="A")
    B = tex.compute((64, 128), lambda i, j: A[i, j] * 2, name="B")
    k = tex.reduce_axis((0, 128), name="k")
    C = tex.compute((64,), lambda i: tex.sum(B[i, k] * A[i, k], axis=k), name="C")
    D = tex.compute((64, 8), lambda i, j: C[i] + j, name="D")
    s = tex.create_schedule(D.op)
    s[B].compute_inline()
    i, j = D.op.axis
    io, ii = s[D].split(i, factor=8)
    s[D].reorder(io, j, ii)
    s[C].compute_at(s[D], j)
    s[D].parallel(io)
    s[D].vectorize(ii)
    ko, ki = s[C].split(k, nparts=4)
    kf = s[C].fuse(ko, ki)
    s[C].unroll(kf)
    return s, {"A": A, "B": B, "C": C, "D": D, "io": io, "ii": ii, "j": j}


def gpu_schedule() -> tex.schedule.Schedule:
    """A dense product on a GPU: A read through shared memory at the reduction's outer
    loop, rows over blocks and threads (built only, never run)."""
    A = tex.placeholder((64, 32), name="A")
    W = tex.placeholder((16, 32), name="W")
    k = tex.reduce_axis((0, 32), name="k")
    C = tex.compute((64, 16), lambda i, j: tex.sum(A[i, k] * W[j, k], axis=k), name="C")
    s = tex.create_schedule(C.op)
    AA = s.cache_read(A, "shared", [C])
    i, j = C.op.axis
    bx, tx = s[C].split(i, factor=16)
    s[C].bind(bx, tex.thread_axis("blockIdx.x"))
    s[C].bind(tx, tex.thread_axis("threadIdx.x"))
    ko, _ = s[C].split(k, factor=8)
    s[AA].compute_at(s[C], ko)
    return s


# --------------------------------------------------------------------------------------------
# the three graphs


def test_dataflow_graph_nodes_edges_and_labels() -> None:
    s, _ = cpu_schedule()
    dot = tedd.viz_dataflow_graph(s, output_dot_string=True)
    assert isinstance(dot, str)
    g = parse_dot(dot)
    a, b, c, d = (node_named(g, n) for n in "ABCD")
    assert "placeholder" in label_of(g, a) and "float32[64, 128]" in label_of(g, a)
    assert "inlined" in label_of(g, b) and "compute_at D.j" in label_of(g, c)
    assert "Scope: global" in label_of(g, d) and "output" in label_of(g, d)
    assert "float32[64]" in label_of(g, c) and "float32[64, 8]" in label_of(g, d)
    flow = {(t, h) for t, _, h, _, _ in edges(g)}
    assert flow == {(a, b), (b, c), (a, c), (c, d)}
    # each edge leaves its producer's output port and enters one input port of the consumer
    assert all(tp == "O0" and hp is not None and hp.startswith("I") for _, tp, _, hp, _ in
               edges(g))
    assert dot == tedd.viz_dataflow_graph(s, output_dot_string=True)  # deterministic
    check_with_graphviz(dot, "placeholder", "compute_at D.j")


def test_schedule_tree_loops_annotations_and_attach_points() -> None:
    s, ax = cpu_schedule()
    dot = tedd.viz_schedule_tree(s, output_dot_string=True)
    g = parse_dot(dot)
    b, c, d = (node_named(g, n) for n in "BCD")
    # D's loops outer first after the reorder, each with its kind and range
    text = label_of(g, d)
    pos = [text.index(w) for w in ("i.outer (parallel)", "j (serial)", "i.inner (vectorize)")]
    assert pos == sorted(pos) and "range(min=0, ext=8)" in text
    assert "D[i, j] = " in text
    assert "k.outer.k.inner.fused (unroll)" in label_of(g, c)
    assert "range(min=0, ext=128)" in label_of(g, c)
    tree = {(t, tp, h, hp) for t, tp, h, hp, _ in edges(g)}
    # C hangs under D's loop j (position 1), D under ROOT, B inlined into C (dashed)
    assert (c, "stage", d, "L1") in tree and (d, "stage", "ROOT", None) in tree
    inline = [e for e in edges(g) if e[0] == b]
    assert [(e[2], e[3]) for e in inline] == [(c, "stage")] and "dashed" in inline[0][4]
    assert "style=dashed" in g["nodes"][b][1]  # type: ignore[index]
    assert "legend" in g["nodes"]  # type: ignore[operator]
    check_with_graphviz(dot, "ROOT", "i.outer (parallel)")


def test_itervar_relationship_graph_split_fuse_and_leaves() -> None:
    s, _ = cpu_schedule()
    dot = tedd.viz_itervar_relationship_graph(s, output_dot_string=True)
    g = parse_dot(dot)
    assert dot.count("subgraph cluster_S") == 3  # B, C, D
    split_d = next(n for n in g["nodes"] if n.startswith("S2_r"))  # type: ignore[attr-defined]
    assert label_of(g, split_d) == "split\\nfactor=8"
    named = loop_names(g, "S2_iv")
    # the parent is no longer a loop (no position); outer/inner are, at positions 0 and 2
    assert label_of(g, named["i"]).startswith("i (axis)")
    assert label_of(g, named["i.outer"]).startswith("0 i.outer (parallel)")
    assert label_of(g, named["i.inner"]).startswith("2 i.inner (vectorize)")
    assert label_of(g, named["j"]).startswith("1 j (serial)")
    rel = {(t, h, attrs) for t, _, h, _, attrs in edges(g)}
    assert (named["i"], split_d, "") in rel
    assert (split_d, named["i.outer"], '[label="outer"]') in rel
    assert (split_d, named["i.inner"], '[label="inner"]') in rel
    # C: k split in 4 parts, the two parts fused; the fused loop is C's loop 1
    rels_c = sorted(n for n in g["nodes"] if n.startswith("S1_r"))  # type: ignore[attr-defined]
    assert [label_of(g, n) for n in rels_c] == ["split\\nnparts=4", "fuse"]
    fuse = rels_c[1]
    into_fuse = sorted(attrs for _, h, attrs in rel if h == fuse)
    assert into_fuse == ['[label="inner"]', '[label="outer"]']
    fused = next(h for t, h, _ in rel if t == fuse)
    assert label_of(g, fused).startswith("1 k.outer.k.inner.fused (unroll)")
    check_with_graphviz(dot, "split", "fuse")


def test_gpu_schedule_bindings_and_shared_stage() -> None:
    s = gpu_schedule()
    flow = parse_dot(tedd.viz_dataflow_graph(s, output_dot_string=True))
    shared = node_named(flow, "A.shared")
    assert "Scope: shared" in label_of(flow, shared) and "compute_at C.k.outer" in \
        label_of(flow, shared)
    tree_dot = tedd.viz_schedule_tree(s, output_dot_string=True)
    tree = parse_dot(tree_dot)
    c = node_named(tree, "C")
    text = label_of(tree, c)
    assert "i.outer (blockIdx.x)" in text and "i.inner (threadIdx.x)" in text
    assert "k.outer (reduce)" in text and "k.inner (reduce)" in text
    shared = node_named(tree, "A.shared")
    # attached at C's loop k.outer: position 3 (i.outer, i.inner, j, k.outer, k.inner)
    assert (shared, "stage", c, "L3") in {(t, tp, h, hp) for t, tp, h, hp, _ in edges(tree)}
    ivs = parse_dot(tedd.viz_itervar_relationship_graph(s, output_dot_string=True))
    assert any("(threadIdx.x)" in label_of(ivs, n) for n in ivs["nodes"])  # type: ignore
    check_with_graphviz(tree_dot, "blockIdx.x")


def test_singleton_and_a_conv_relu_like_the_tvm_tutorial(tmp_path: Path) -> None:
    """TVM's tutorial flow on tex's conv2d + bias + relu, with normalize() in between."""
    A = tex.placeholder((1, 4, 8, 8), name="A")
    W = tex.placeholder((4, 4, 3, 3), name="W")
    bias = tex.placeholder((4, 1, 1), name="bias")
    conv = topi.nn.conv2d(A, W, 1, 1)
    relu = topi.nn.relu(topi.add(conv, bias))
    s = tex.create_schedule(relu.op)
    for st in s.stages:
        if st.op is not relu.op and st.op is not conv.op:
            st.compute_inline()
    one = s[relu].fuse()
    n, c, h, w = relu.op.axis
    s[conv].compute_at(s[relu], h)
    assert tedd.viz_dataflow_graph(s, dot_file_path=str(tmp_path / "dfg.dot")) is None
    tedd.viz_schedule_tree(s, dot_file_path=tmp_path / "scheduletree.dot")
    s = s.normalize()
    tedd.viz_schedule_tree(s, dot_file_path=tmp_path / "scheduletree2.dot")
    tedd.viz_itervar_relationship_graph(s, dot_file_path=tmp_path / "itervar.dot")
    for name in ("dfg", "scheduletree", "scheduletree2", "itervar"):
        g = parse_dot((tmp_path / f"{name}.dot").read_text())
        assert g["edges"]
    ivs = parse_dot((tmp_path / "itervar.dot").read_text())
    single = [n for n in ivs["nodes"] if label_of(ivs, n) == "singleton"]  # type: ignore
    assert len(single) == 1
    head = next(h for t, _, h, _, _ in edges(ivs) if t == single[0])
    assert label_of(ivs, head).startswith(f"0 {one.name} (serial)")
    flow = parse_dot((tmp_path / "dfg.dot").read_text())
    for p in ("A", "W", "bias"):
        assert "placeholder" in label_of(flow, node_named(flow, p))


def test_labels_are_escaped() -> None:
    A = tex.placeholder((4,), name='in"<&>{x}')
    B = tex.compute((4,), lambda i: A[i] + 1, name='out"<&>{}\\')
    s = tex.create_schedule(B.op)
    for fn in VIZ:
        dot = fn(s, output_dot_string=True)
        assert isinstance(dot, str)
        g = parse_dot(dot)  # braces balanced outside the labels, labels are XML
        assert any('out"<&>{}\\' in t for t in g["texts"])  # type: ignore[attr-defined]
        check_with_graphviz(dot)


# --------------------------------------------------------------------------------------------
# TVM's keywords and bad input


def test_dot_file_path_and_return_values(tmp_path: Path) -> None:
    s, _ = cpu_schedule()
    for fn in VIZ:
        path = tmp_path / f"{fn.__name__}.dot"
        assert fn(s, dot_file_path=str(path)) is None
        text = fn(s, dot_file_path=path, output_dot_string=True)
        assert text == path.read_text() and text.startswith("digraph ")
        assert fn(s) is None  # nothing asked: nothing written, nothing returned


def test_show_svg_without_graphviz_returns_the_dot_text(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEX_DOT", "none")
    s, _ = cpu_schedule()
    for fn in VIZ:
        path = tmp_path / "g.dot"
        with pytest.warns(UserWarning, match="Graphviz's 'dot' was not found"):
            out = fn(s, show_svg=True, dot_file_path=path)
        assert out == path.read_text() == fn(s, output_dot_string=True)


def test_show_svg_renders_through_dot(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """With a ``dot`` (here a stand-in script), show_svg returns the SVG outside IPython;
    with output_dot_string too, the DOT text (as TVM)."""
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\ncat > /dev/null\necho '<svg>drawn</svg>'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TEX_DOT", str(fake))
    s, _ = cpu_schedule()
    for fn in VIZ:
        assert fn(s, show_svg=True) == "<svg>drawn</svg>\n"
        assert fn(s, show_svg=True, output_dot_string=True).startswith("digraph ")


def test_show_svg_displays_inside_ipython(tmp_path: Path,
                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Inside IPython (here a stand-in module) the SVG is displayed, not returned."""
    fake = tmp_path / "dot"
    fake.write_text("#!/bin/sh\ncat > /dev/null\necho '<svg>drawn</svg>'\n")
    fake.chmod(fake.stat().st_mode | stat.S_IEXEC)
    monkeypatch.setenv("TEX_DOT", str(fake))
    shown: list[object] = []
    ipython = types.ModuleType("IPython")
    ipython.get_ipython = lambda: object()  # type: ignore[attr-defined]
    display = types.ModuleType("IPython.display")
    display.SVG = lambda text: ("SVG", text)  # type: ignore[attr-defined]
    display.display = shown.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "IPython", ipython)
    monkeypatch.setitem(sys.modules, "IPython.display", display)
    s, _ = cpu_schedule()
    assert tedd.viz_schedule_tree(s, show_svg=True) is None
    assert shown == [("SVG", "<svg>drawn</svg>\n")]


def test_bad_input() -> None:
    s, ax = cpu_schedule()
    for fn in VIZ:
        with pytest.raises(TypeError, match=r"sch must be a tex Schedule.*got Tensor"):
            fn(ax["D"])  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="sch must be a tex Schedule.*got NoneType"):
            fn(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="dot_file_path must be a str or a path"):
            fn(s, dot_file_path=3)  # type: ignore[arg-type]


def test_reachable_after_import_tex() -> None:
    assert tex.contrib.tedd is tedd
    assert tedd.__doc__ is not None and tedd.__doc__.startswith("TEDD")
