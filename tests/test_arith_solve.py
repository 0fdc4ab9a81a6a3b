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


def _unravel(flat, shape):
    """The digits of ``flat`` in ``shape`` as reshape writes them: ``flat // s % n``."""
    digits, stride = [], 1
    for k in reversed(range(len(shape))):
        d = flat if stride == 1 else flat // stride
        digits.append(d if k == 0 else d % shape[k])
        stride *= shape[k]
    return digits[::-1]


@pytest.mark.parametrize("seed", range(12))
def test_random_reshapes_solve_to_one_point(seed: int) -> None:
    """The index map of any reshape (out shape -> flat -> in shape) read back: every
    digit of the flat position fixed, so the unknowns (the output's indices) are one
    point per input position (no summation axis), or none when a digit is out of range
    (the parameters are sampled beyond the input's shape too)."""
    rng = np.random.default_rng(seed)
    n = int(rng.choice([6, 8, 12, 24]))
    def shape_of(total):  # a random factorization of total
        dims, rest = [], total
        while rest > 1 and len(dims) < 3:
            d = int(rng.choice([f for f in range(1, rest + 1) if rest % f == 0]))
            dims.append(d)
            rest //= d
        return [*dims, rest] if rest > 1 or not dims else dims
    out_shape, in_shape = shape_of(n), shape_of(n)
    outs = [_iv(f"o{k}", 0, d) for k, d in enumerate(out_shape)]
    flat = tex.const(0)
    for iv, d in zip(outs, out_shape):
        flat = flat * d + iv.var
    ps = [Var(f"p{k}") for k in range(len(in_shape))]
    eqs = [dig - p for dig, p in zip(_unravel(flat, in_shape), ps)]
    params = {p: Interval(-1, d) for p, d in zip(ps, in_shape)}
    samples = [dict(zip(ps, pt)) for pt in itertools.product(
        *[range(-1, d + 1) for d in in_shape])][:60]
    sol = _check(outs, eqs, [], params, samples)
    assert sol is not None and sol.axes == [], (out_shape, in_shape, sol)


def test_flat_sum_of_digits_is_one_point_and_respects_divisibility() -> None:
    """sum(ck * xk) == y with c(k+1) = ck * dk (a flattened position), also with a common
    factor g: one point, where y // ck % dk are the digits; none when g does not divide
    y or y is past the last position."""
    a, b, c = _iv("a", 0, 3), _iv("b", 0, 2), _iv("c", 0, 4)
    y = Var("y")
    for g in (1, 2):
        sol = _check([a, b, c], [(a.var + b.var * 3 + c.var * 6) * g - y], [],
                     {y: Interval(-2, 26 * g)}, [{y: v} for v in range(-2, 26 * g + 1)])
        assert sol.axes == []


def test_a_delta_on_its_own_is_solved_before_a_sum_of_digits() -> None:
    """A selection gradient: k0 == p, k1 == q and the picked flat index 2*k0 + k1 == s.
    The deltas fix the unknowns; the flat index stays one condition on the parameters
    (not three digit conditions)."""
    k0, k1 = _iv("k0", 0, 3), _iv("k1", 0, 2)
    p, q, sv = Var("p"), Var("q"), Var("s")
    sol = _check([k0, k1], [k0.var - p, k1.var - q, k0.var * 2 + k1.var - sv], [],
                 {p: Interval(0, 2), q: Interval(0, 1), sv: Interval(0, 5)},
                 [{p: x, q: z, sv: w} for x in range(3) for z in range(2) for w in range(6)])
    assert sol.axes == [] and str(sol.outer).count("==") == 1, sol.outer


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


@pytest.mark.parametrize("seed", range(40))
def test_box_of_with_existential_variables_contains_every_witnessed_point(seed: int) -> None:
    """``box_of(cond, dom, exists=...)`` bounds the points of ``dom`` for which some
    values of the existential variables satisfy ``cond``: never smaller than that set,
    and tight on single two-variable atoms (a window ``lo <= t - c*h <= hi``)."""
    from tex.arith.solve import box_of
    from tex.ir import fold
    rng = np.random.default_rng(seed)
    t, h = Var("t", "int32"), Var("h", "int32")
    dom = {t: Interval(0, int(rng.integers(3, 12)))}
    exists = {h: Interval(0, int(rng.integers(0, 4)))}
    c = int(rng.choice([-3, -2, -1, 1, 2, 3]))
    lo, hi = sorted(int(v) for v in rng.integers(-6, 10, size=2))
    diff = t - h * c
    cond = fold.binary(tex.ir.expr.Op.AND, diff >= lo, diff <= hi)
    found = box_of(cond, dom, exists=exists)
    hit = [tv for tv in range(dom[t].lo, dom[t].hi + 1)
           if any(lo <= tv - c * hv <= hi for hv in range(exists[h].lo, exists[h].hi + 1))]
    if not hit:  # the band misses the domain: no box at all
        assert found is None
        return
    assert found is not None
    assert found[t].lo <= min(hit) and max(hit) <= found[t].hi
    if abs(c) == 1:  # a unit slope: the projection of the band is an interval, exactly
        assert (found[t].lo, found[t].hi) == (min(hit), max(hit))
