"""tex.arith.solve_domain, checked against brute-force enumeration."""
from __future__ import annotations

import itertools

import numpy as np
import pytest

import tex
from tex.arith import Interval
from tex.arith.solve import solve_domain
from tex.ir.expr import IterVar, Range, Var
from tex.ir.visit import substitute


def _iv(name, lo, hi):
    return IterVar(Var(name, "int32", kind="reduce"), Range(lo, hi - lo))


def _value(e, env):
    """Evaluate an integer/bool expression at one point with the reference semantics."""
    from tex.arith import simplify
    from tex.ir.expr import Const
    r = simplify(substitute(e, {v: tex.const(x) for v, x in env.items()}), use_sympy=False)
    assert isinstance(r, Const), r
    return r.value


def _brute(unknowns, eqs, conds, env):
    pts = set()
    ranges = [range(iv.dom.min, iv.dom.stop) for iv in unknowns]
    for xs in itertools.product(*ranges):
        full = {**env, **{iv.var: x for iv, x in zip(unknowns, xs)}}
        if all(_value(e, full) == 0 for e in eqs) and all(_value(c, full) for c in conds):
            pts.add(xs)
    return pts


def _solved_points(sol, unknowns, env):
    if sol is None:
        return set()
    if not _value(sol.outer, env):
        return set()
    pts = set()
    for ds in itertools.product(*[range(a.dom.min, a.dom.stop) for a in sol.axes]):
        full = {**env, **{a.var: d for a, d in zip(sol.axes, ds)}}
        if not _value(sol.inner, full):
            continue
        pt = tuple(_value(sol.substitution[iv.var], full) for iv in unknowns)
        assert pt not in pts, "a point is visited twice"
        pts.add(pt)
    return pts


def _check(unknowns, eqs, conds, params, samples):
    sol = solve_domain(unknowns, eqs, conds, params)
    for env in samples:
        assert _solved_points(sol, unknowns, env) == _brute(unknowns, eqs, conds, env), env
    return sol


def test_dense_delta_is_a_point():
    j, k = _iv("j", 0, 4), _iv("k", 0, 5)
    p, q = Var("p"), Var("q")
    sol = _check([j, k], [j.var - p, k.var - q], [], {p: Interval(0, 3), q: Interval(0, 4)},
                 [{p: 1, q: 2}, {p: 3, q: 0}])
    assert sol.axes == [] and sol.substitution[j.var] is p and sol.substitution[k.var] is q


def test_strided_window_is_shifted_to_the_taps_that_hit():
    h, r = _iv("h", 0, 8), _iv("r", 0, 5)
    y = Var("y")
    sol = _check([h, r], [h.var * 2 + r.var - y], [], {y: Interval(0, 18)},
                 [{y: v} for v in range(19)])
    assert len(sol.axes) == 1 and sol.axes[0].dom.extent == 3  # ceil(5 / 2) taps


def test_reshape_divmod_equations():
    i, j = _iv("i", 0, 5), _iv("j", 0, 3)
    p, q = Var("p"), Var("q")
    a = i.var * 3 + j.var
    sol = _check([i, j], [a // 5 - p, a % 5 - q], [], {p: Interval(0, 2), q: Interval(0, 4)},
                 [{p: x, q: z} for x in range(3) for z in range(5)])
    assert sol.axes == []


def test_non_unit_coefficients_need_euclid_and_divisibility():
    a, b = _iv("a", 0, 6), _iv("b", 0, 6)
    y = Var("y")
    _check([a, b], [a.var * 2 + b.var * 3 - y], [], {y: Interval(0, 30)},
           [{y: v} for v in range(0, 31, 3)])
    _check([a, b], [a.var * 2 + b.var * 4 - y], [], {y: Interval(0, 30)},
           [{y: v} for v in range(0, 31, 5)])


def test_conditions_and_infeasible():
    i, k = _iv("i", 0, 6), _iv("k", 0, 4)
    p = Var("p")
    _check([i, k], [i.var - k.var - p], [k.var > 1, (i.var % 2) == 0], {p: Interval(0, 5)},
           [{p: v} for v in range(6)])
    assert solve_domain([i], [i.var - 10], [], {}) is None
    assert solve_domain([i], [i.var * 2 - 3], [], {}) is None


@pytest.mark.parametrize("seed", range(8))
def test_random_affine_systems(seed):
    rng = np.random.default_rng(seed)
    xs = [_iv(f"x{n}", 0, int(rng.integers(2, 5))) for n in range(3)]
    p = Var("p")
    coefs = rng.integers(-3, 4, size=3)
    eq = sum((int(c) * x.var for c, x in zip(coefs, xs)), start=tex.const(0)) - p
    conds = [xs[0].var <= xs[1].var + int(rng.integers(0, 2))]
    _check(xs, [eq], conds, {p: Interval(-12, 12)}, [{p: v} for v in range(-12, 13, 2)])


def test_solve_domain_memo_stays_bounded() -> None:
    """solve_domain's memo keys problems by canonical variables (one per slot and name):
    a long session with ever new axis names must not grow either table without bound."""
    import tex.arith.solve as solve_module

    for n in range(solve_module._CANONICAL_MAX + 200):
        k = tex.reduce_axis((0, 4), name=f"k{n}")
        res = solve_module.solve_domain([k], [k.var - 1], [], {})
        assert res is not None and not res.axes  # k = 1: solved, nothing left to sum
    assert len(solve_module._CANONICAL) <= solve_module._CANONICAL_MAX
    assert len(solve_module._SOLVED) <= solve_module._SOLVED_MAX
