"""Pictures: to_dot's styles and edge labels, tex.viz.save with and without Graphviz, and the
notebook representations."""
from __future__ import annotations

import re
from pathlib import Path

import pytest

import tex
from tex import topi
from tex.viz import DAG, find_dot, save


def dense_grad() -> tuple[tex.Tensor, list[tex.Tensor]]:
    X = tex.placeholder((4, 5), "float32", name="X")
    W = tex.placeholder((3, 5), "float32", name="W")
    B = tex.placeholder((3,), "float32", name="B")
    L = topi.sum(topi.tanh(topi.nn.dense(X, W, B)))
    return L, list(tex.differentiate(L, [W, B]))


def _node_lines(dot: str) -> dict[str, str]:
    """label's first line -> the node's attribute text."""
    out = {}
    for line in dot.splitlines():
        m = re.match(r'\s+n\d+ \[(.*), label="([^"\\]*)', line)
        if m:
            out[m.group(2)] = m.group(1)
    return out


def test_dot_styles_kinds_and_labels_edges_with_shapes() -> None:
    L, (dW, dB) = dense_grad()
    dot = tex.to_dot(L, dW, dB)
    nodes = _node_lines(dot)
    assert "shape=ellipse" in nodes["X"] and "#dbe9f6" in nodes["X"]
    fwd = next(v for k, v in nodes.items() if k.startswith("T_dense["))
    assert "shape=box" in fwd and "#f4f4f4" in fwd and "penwidth" not in fwd
    grads = [v for k, v in nodes.items() if k.startswith(("W_grad", "B_grad"))]
    assert len(grads) == 2 and all("#fde3c8" in g and "penwidth=2.5" in g for g in grads)
    # every edge carries the shape of its tensor: X (4x5) into the dense, W (3x5) too
    edges = re.findall(r'n\d+ -> n\d+ \[label="(\[[0-9, ]*\])"\];', dot)
    assert edges and "[4, 5]" in edges and "[3, 5]" in edges
    assert len(edges) == dot.count("->")
    assert dot == tex.to_dot(L, dW, dB)  # deterministic


def test_save_writes_dot_text(tmp_path: Path) -> None:
    L, _ = dense_grad()
    out = save(L, tmp_path / "graph.dot")
    assert out == tmp_path / "graph.dot"
    assert out.read_text() == tex.to_dot(L)


def test_save_without_graphviz_falls_back_to_dot(tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("TEX_DOT", "none")
    L, _ = dense_grad()
    out = save([L], tmp_path / "graph.svg")
    assert out == tmp_path / "graph.dot" and out.read_text().startswith('digraph "tex"')
    assert not (tmp_path / "graph.svg").exists()
    assert DAG(L)._repr_svg_() is None  # Jupyter then shows _repr_html_


@pytest.mark.skipif(find_dot() is None, reason="Graphviz's dot is not installed")
def test_save_renders_svg_with_graphviz(tmp_path: Path) -> None:
    L, grads = dense_grad()
    out = save([L, *grads], tmp_path / "graph.svg")
    assert out == tmp_path / "graph.svg"
    svg = out.read_text()
    assert svg.lstrip().startswith("<?xml") and "<svg" in svg
    assert "W_grad" in svg and "#fde3c8" in svg
    assert "<svg" in DAG(L, *grads)._repr_svg_()


def test_bad_input(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    L, _ = dense_grad()
    with pytest.raises(ValueError, match=r"unknown picture format '\.jpeg'"):
        save(L, tmp_path / "g.jpeg")
    with pytest.raises(TypeError, match="expected a Tensor"):
        save("L", tmp_path / "g.dot")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="expected a Tensor"):
        DAG()
    monkeypatch.setenv("TEX_DOT", str(tmp_path / "no-such-dot"))
    with pytest.raises(RuntimeError, match="running Graphviz"):
        save(L, tmp_path / "g.svg")


def test_notebook_representations() -> None:
    L, (dW, _) = dense_grad()
    html = dW._repr_html_()
    assert html.startswith("<pre>W_grad") and "float32[3, 5]" in html
    page = DAG(L)._repr_html_()
    assert "T_dense" in page and "&lt;" not in page.split("T_dense")[0]
    assert str(DAG(L)) == tex.to_dot(L) and repr(DAG(L, dW)) == f"DAG({L.name}, {dW.name})"
