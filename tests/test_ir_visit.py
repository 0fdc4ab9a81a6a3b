"""Walks and rewrites: post-order, the rewrite driver, substitution, topological order."""
import pytest

import tex
from tex.debug import InternalError
from tex.ir import (
    Binary,
    Op,
    RuleTable,
    Unary,
    collect_reads,
    collect_vars,
    fixed_point_rewrite,
    for_ops,
    post_order,
    rewrite,
    substitute,
    topo_sort_ops,
)


def test_post_order_visits_shared_nodes_once():
    i = tex.var("i")
    shared = i + 1
    e = shared * shared
    nodes = list(post_order(e))
    assert nodes.count(shared) == 1 and nodes[-1] is e
    assert nodes.index(i) < nodes.index(shared) < nodes.index(e)


def test_rewrite_and_substitute():
    i, j = tex.var("i"), tex.var("j")
    e = (i + 1) * (i + 2)
    assert str(substitute(e, {i: j * 2})) == "(j * 2 + 1) * (j * 2 + 2)"
    # raw constructors keep `* 1`; a rule set removes it
    raw = Binary(Op.MUL, i, tex.const(1))
    drop_one = RuleTable("drop_one", {Binary: [
        lambda n: n.a if n.op is Op.MUL and n.b is tex.const(1) else None]})
    assert rewrite(Binary(Op.ADD, raw, raw), drop_one) is Binary(Op.ADD, i, i)


def test_fixed_point_rewrite_is_linear():
    """A rule producing new sub-terms on a long chain: the driver must not re-walk
    memoized subtrees (this was quadratic)."""
    n = 3000
    variables = [tex.var(f"v{k}") for k in range(n)]
    e = variables[0]
    for v in variables[1:]:
        e = Binary(Op.ADD, e, v)
    calls = 0

    def rule(node):
        nonlocal calls
        calls += 1
        if node.op is Op.ADD:  # a + b -> a - (-b)
            return Binary(Op.SUB, node.a, Unary(Op.NEG, node.b))
        return None

    out = fixed_point_rewrite(e, RuleTable("sub", {Binary: [rule]}))
    assert str(out).startswith("v0 - -v1 - -v2")
    assert calls <= 3 * n


def test_rule_table_offers_a_rule_only_its_operators():
    """A rule marked ``for_ops`` is offered only nodes with those operators, after the
    rules listed before it; extra call arguments reach every rule."""
    i, j = tex.var("i"), tex.var("j")
    seen = []

    def anything(n, tag):
        seen.append((tag, n.op))
        return None

    @for_ops(Op.MUL)
    def mul_to_add(n, tag):
        seen.append((tag, "mul rule"))
        return Binary(Op.ADD, n.a, n.b)

    table = RuleTable("t", {Binary: [anything, mul_to_add]})
    assert table.rules_for(Binary, Op.ADD) == (anything,)
    assert table.rules_for(Binary, Op.MUL) == (anything, mul_to_add)
    assert table.rules_for(Unary, Op.NEG) == ()
    assert table(Binary(Op.SUB, i, j), "x") is None
    assert table(Binary(Op.MUL, i, j), "y") is Binary(Op.ADD, i, j)
    assert seen == [("x", Op.SUB), ("y", Op.MUL), ("y", "mul rule")]
    bound = RuleTable.merged("both", [table, RuleTable("u", {Unary: [anything]})]).bound("z")
    assert bound.name == "both" and bound(Unary(Op.NEG, i)) is None
    assert seen[-1] == ("z", Op.NEG)


def test_runaway_rules_raise_internal_error():
    i = tex.var("i")
    flip = RuleTable("flip", {Binary: [lambda n: Binary(n.op, n.b, n.a)]})
    with pytest.raises(InternalError, match="fixed point"):
        fixed_point_rewrite(Binary(Op.ADD, i, tex.var("j")), flip)


def test_collect_and_topo_sort():
    A = tex.placeholder((4,), name="A")
    B = tex.compute((4,), lambda i: A[i] * 2.0, name="B")
    C = tex.compute((4,), lambda i: A[i] + B[i], name="C")
    D = tex.compute((4,), lambda i: C[i] - B[i], name="D")
    assert [op.name for op in topo_sort_ops([D])] == ["A", "B", "C", "D"]
    body = D.op.body[0]
    assert [r.tensor.name for r in collect_reads(body)] == ["C", "B"]
    assert [v.name for v in collect_vars(body)] == ["i"]
    with pytest.raises(TypeError, match="expected a Tensor"):
        topo_sort_ops([D.op])


def test_deep_chain_of_tensors():
    """Topological sort is iterative: a 3000-deep chain of computes works."""
    t = tex.placeholder((2,), name="x")
    for k in range(3000):
        t = tex.compute((2,), lambda i, t=t: t[i] + 1.0, name=f"c{k}")
    ops = topo_sort_ops([t])
    assert len(ops) == 3001 and ops[0].name == "x" and ops[-1].name == "c2999"
