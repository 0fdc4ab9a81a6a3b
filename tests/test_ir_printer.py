"""Printing of expressions, tensors and programs (golden), and the DAG view."""
import networkx as nx
import pytest

import tex
from tex.ir import format_program


def _program():
    """A small dense layer + stable softmax + argmax, written with tex.te only."""
    X = tex.placeholder((4, 8), name="X")
    W = tex.placeholder((3, 8), name="W")
    B = tex.placeholder((3,), name="B")
    k = tex.reduce_axis((0, 8), name="k")
    T = tex.compute((4, 3), lambda i, j: tex.sum(X[i, k] * W[j, k], axis=k), name="T")
    Y = tex.compute((4, 3), lambda i, j: T[i, j] + B[j], name="Y")
    r = tex.reduce_axis((0, 3), name="r")
    m = tex.compute((4,), lambda i: tex.max(Y[i, r], axis=r), name="m")
    e = tex.compute((4, 3), lambda i, j: tex.exp(Y[i, j] - m[i]), name="e")
    s = tex.compute((4,), lambda i: tex.sum(e[i, r], axis=r), name="s")
    p = tex.compute((4, 3), lambda i, j: e[i, j] / s[i], name="p")
    P = tex.compute((4, 10), lambda i, j: tex.if_then_else(
        tex.all(j >= 1, j < 9), X[i, tex.min(j - 1, 7)], 0.0), name="pad")
    return X, W, B, T, Y, m, p, P


def test_program_golden(golden):
    *_, p, P = _program()
    golden("program_dense_softmax.txt", format_program(p, P) + "\n")


def test_dot_golden(golden):
    *_, p, P = _program()
    golden("program_dense_softmax.dot", tex.to_dot(p, P))


def test_graph_structure():
    X, W, B, T, Y, m, p, P = _program()
    g = tex.graph(p)
    assert isinstance(g, nx.DiGraph)
    names = [g.nodes[op]["name"] for op in nx.topological_sort(g)]
    assert set(names) == {"X", "W", "B", "T", "Y", "m", "e", "s", "p"}
    assert g.has_edge(X.op, T.op) and g.has_edge(T.op, Y.op) and g.has_edge(Y.op, m.op)
    assert not g.has_edge(X.op, Y.op)
    assert g.nodes[T.op]["kind"] == "compute" and g.nodes[X.op]["kind"] == "placeholder"
    assert g.nodes[T.op]["shape"] == (4, 3)
    assert nx.is_directed_acyclic_graph(g)
    assert g.in_degree(p.op) == 2 and g.out_degree(p.op) == 0
    g2 = tex.graph(p, P)
    assert g2.number_of_nodes() == 10


def test_graph_errors():
    with pytest.raises(ValueError, match="at least one tensor"):
        tex.graph()
    with pytest.raises(TypeError, match="expected Tensor"):
        tex.to_dot("X")


@pytest.mark.parametrize("build,text", [
    (lambda i, j, x: (i + j) * 2, "(i + j) * 2"),
    (lambda i, j, x: i - (j - 1), "i - (j - 1)"),
    (lambda i, j, x: i - j - 1, "i - j - 1"),
    (lambda i, j, x: (i // 2) % 3, "i // 2 % 3"),
    (lambda i, j, x: i // (j % 3), "i // (j % 3)"),
    (lambda i, j, x: -(i + j), "-(i + j)"),
    (lambda i, j, x: x ** 2 ** x, "x ** 2.0 ** x"),
    (lambda i, j, x: (x ** 2) ** x, "(x ** 2.0) ** x"),
    (lambda i, j, x: (-x) ** 2, "(-x) ** 2.0"),
    (lambda i, j, x: tex.all(i < j, tex.any(i == 0, j == 0)), "i < j && (i == 0 || j == 0)"),
    (lambda i, j, x: ~(x < 1.0), "!(x < 1.0)"),
    (lambda i, j, x: (i < j) == (j < i), "(i < j) == (j < i)"),
    (lambda i, j, x: tex.exp(x) * tex.sigmoid(-x), "exp(x) * sigmoid(-x)"),
    (lambda i, j, x: x.astype("float64") + 1, "float64(x) + float64(1.0)"),
    (lambda i, j, x: i.astype("int64") * 3, "int64(i) * int64(3)"),
    (lambda i, j, x: tex.if_then_else(i > 0, x, 1.0), "select(i > 0, x, 1.0)"),
    (lambda i, j, x: i / j, "i / j"),
    (lambda i, j, x: x + tex.const(float("inf")), "x + float32(inf)"),
    (lambda i, j, x: tex.max(x, -1.0), "max(x, -1.0)"),
    (lambda i, j, x: x - -1.0, "x - -1.0"),
    (lambda i, j, x: tex.const(True, "bool"), "True"),
])
def test_expression_printing(build, text):
    i, j, x = tex.var("i"), tex.var("j"), tex.var("x", "float32")
    assert str(build(i, j, x)) == text


def test_reprs():
    X = tex.placeholder((2, 3), name="X")
    assert repr(X) == "Tensor(name='X', shape=(2, 3), dtype=float32)"
    assert str(X) == "X = placeholder((2, 3), float32)"
    k = tex.reduce_axis((1, 5), name="k")
    assert repr(k) == "IterVar(k, [1, 5), reduce_axis)"
    assert repr(tex.var("i") + 1) == "Binary(i + 1)"
