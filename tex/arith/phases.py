"""Polyphase splitting of a gradient sum: one sum per residue class of its strided axes.

The adjoint of a strided window (a convolution or a pooling with stride ``s``) reads the
head at ``(p + a) // s`` and selects taps with ``(p + a) % s``: which taps hit an input
point ``p`` depends on its phase ``p mod s``. As one sum over a rectangular domain, every
point iterates the taps of the phase that has the most, and with a dilation sharing a
factor with the stride some phases have none at all (stride 2, dilation 2: the odd rows)::

    dX[p] = sum(H[h + (p + 1) // 2 - 1] * W[(p + 1) % 2 - 2*h + 1], h in [0, 2),
                where=h * 2 < (p + 1) % 2 + 2 && ...)

Written ``p = m*t + phase`` for each phase, the divisions become affine in ``t`` and the
remainders constants: every phase is a dense sum over just its own taps (the reduction
axes tightened to the taps its conditions allow), over just the rows ``t`` some tap hits,
and a phase whose conditions are false is dropped. The gradient then selects its phase::

    dX[p] = select(p % 2 == 0, dX_phase0[p // 2], dX_phase1[(p - 1) // 2])

This is the polyphase transposed convolution that cuDNN and hand-written backward passes
use. ``split_phases`` plans it; the caller (``building_block``) decides, by iteration
count, whether the phases beat the single sum.
"""
from __future__ import annotations

import itertools
import math
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from ..dtype import boolean
from ..ir import fold
from ..ir.expr import Binary, Const, Expr, IterVar, Op, Range, TensorRead, Var
from ..ir.visit import collect_vars, post_order, substitute
from . import Analyzer, Interval, range_interval
from .extent import at_hint
from .solve import box_of

if TYPE_CHECKING:
    from ..ir.tensor import Tensor

__all__ = ["Phase", "split_phases"]

# Residue classes are enumerated: beyond these the split would make too many tensors.
MAX_MODULUS = 16
MAX_PHASES = 64


@dataclass(frozen=True)
class Phase:
    """One residue class: ``axes[i] = moduli[i] * (t_i + lo_i) + residues[i]`` for the
    strided axes, ``axes[i] = t_i + lo_i`` for the others, ``t_i in [0, extents[i])``.

    ``value`` and ``cond`` are over the new variables ``grid`` (one per axis, in order)
    and the tightened reduction axes ``reduce``: the phase's tensor is
    ``sum(value, axis=reduce, where=cond)`` over ``grid``."""

    residues: tuple[int, ...]
    lows: tuple[int, ...]
    grid: tuple[IterVar, ...]
    reduce: tuple[IterVar, ...]
    value: Expr
    cond: Expr

    def iterations(self) -> int:
        """Its sum's iterations; none for a phase without taps to sum (a gather: it is
        read in place by the select that merges the phases)."""
        if not self.reduce:
            return 0
        # (a symbolic extent counts at the schedulers' default hint: this is a cost)
        return math.prod(at_hint(iv.dom.extent) for iv in self.grid) * \
            math.prod(at_hint(iv.dom.extent) for iv in self.reduce)


@dataclass(frozen=True)
class PhaseSplit:
    """The phases of one sum, and the moduli of its axes (1 for an axis not split)."""

    axes: tuple[IterVar, ...]
    moduli: tuple[int, ...]
    phases: tuple[Phase, ...]

    def iterations(self) -> int:
        return sum(ph.iterations() for ph in self.phases)

    def index(self, ph: Phase, i: int) -> Expr:
        """The index of ``ph``'s tensor along axis ``i`` at the gradient point."""
        v = self.axes[i].var
        m = self.moduli[i]
        if m == 1:
            return fold.binary(Op.SUB, v, Const(ph.lows[i], v.dtype))
        return fold.binary(Op.SUB, fold.binary(Op.FLOORDIV, v, Const(m, v.dtype)),
                           Const(ph.lows[i], v.dtype))

    def suffix(self, ph: Phase) -> str:
        """A name for ``ph``: its residues on the split axes (``1_0``)."""
        return "_".join(str(r) for r, m in zip(ph.residues, self.moduli) if m > 1)

    def merge(self, full: Sequence[IterVar], zero: Const,
              make: Callable[[Phase], Tensor], cond: Callable[[Phase], Expr] | None = None,
              where: Expr | None = None) -> tuple[Expr, list[Tensor]]:
        """The gradient at a point of ``full`` from its phase: ``make(ph)`` is the tensor
        of a phase that sums taps (read at ``index``); a phase without taps is a gather,
        its value read in place (under ``cond(ph)``, default its own condition). ``where``
        is also required of every phase. Returns the merged expression and the tensors
        made, in the order made (the last phase first: the selects nest from it)."""
        term: Expr = zero
        made: list[Tensor] = []
        for ph in reversed(self.phases):
            at = [self.index(ph, i) for i in range(len(full))]
            sel = self.selects(ph, full)
            if where is not None:
                sel = fold.binary(Op.AND, where, sel)
            if not ph.reduce:  # every tap fixed: read in place by the merge
                m = {g.var: x for g, x in zip(ph.grid, at)}
                c = ph.cond if cond is None else cond(ph)
                term = fold.select(sel, substitute(fold.select(c, ph.value, zero), m), term)
                continue
            t = make(ph)
            made.append(t)
            term = fold.select(sel, TensorRead(t, at), term)
        return term, made

    def selects(self, ph: Phase, full: Sequence[IterVar]) -> Expr:
        """The condition under which a point of the gradient (its axes ``full``, which
        ``axes`` may narrow) belongs to ``ph``'s tensor: its residues, and its position
        within the phase's rows."""
        out: Expr = Const(True, boolean)
        for i, iv in enumerate(full):
            v, m = iv.var, self.moduli[i]
            r = ph.residues[i]
            first = m * ph.lows[i] + r
            last = first + m * (ph.grid[i].dom.extent - 1)
            if m > 1:
                out = fold.binary(Op.AND, out, fold.compare(
                    Op.EQ, fold.binary(Op.FLOORMOD, v, Const(m, v.dtype)), Const(r, v.dtype)))
            # the first and last points of the axis in this residue class need no bound
            lo, hi = iv.dom.min, iv.dom.min + iv.dom.extent - 1
            if first > lo + (r - lo) % m:
                out = fold.binary(Op.AND, out, fold.compare(Op.GE, v, Const(first, v.dtype)))
            if last < hi - (hi - r) % m:
                out = fold.binary(Op.AND, out, fold.compare(Op.LE, v, Const(last, v.dtype)))
        return out


def moduli_of(exprs: Sequence[Expr], axes: Sequence[IterVar],
              taps: Sequence[IterVar] = ()) -> list[int]:
    """Per axis, the lcm of the constant divisors ``m > 1`` of the floor divisions and
    remainders whose dividend is affine in that axis alone, or in that axis and the
    variables of ``taps`` (1 where there are none)."""
    index = {iv.var: i for i, iv in enumerate(axes)}
    tap_vars = {iv.var for iv in taps}
    out = [1] * len(axes)
    seen: set[int] = set()
    for e in exprs:
        for n in post_order(e):
            if id(n) in seen or not (isinstance(n, Binary) and
                                     n.op in (Op.FLOORDIV, Op.FLOORMOD)):
                continue
            seen.add(id(n))
            if not (isinstance(n.b, Const) and isinstance(n.b.value, int) and n.b.value > 1):
                continue
            vs = [v for v in collect_vars(n.a) if v not in tap_vars]
            if len(vs) != 1 or vs[0] not in index:
                continue
            i = index[vs[0]]
            out[i] = math.lcm(out[i], n.b.value)
    return out


def split_phases(axes: Sequence[IterVar], reduce: Sequence[IterVar], value: Expr,
                 cond: Expr, taps: bool = False) -> PhaseSplit | None:
    """The phases of ``sum(value, axis=reduce, where=cond)`` over ``axes`` (see the module
    doc), or None when no axis is strided (or the split would be too large).

    ``taps``: the strided divisions may also hold reduction axes (a transposed convolution
    written as a gather, ``X[(y + pad - ky) // s]`` where ``(y + pad - ky) % s == 0``);
    within a phase, a tap axis whose remainder the conditions then fix is stepped by the
    stride (``ky = s*k + q`` for the one ``q`` left), so the phase sums its taps only."""
    moduli = moduli_of([value, cond], axes, reduce if taps else ())
    # (an axis of symbolic extent is not split: its phases would have symbolic extents)
    moduli = [m if m <= MAX_MODULUS and isinstance(iv.dom.extent, int) and m < iv.dom.extent
              else 1 for m, iv in zip(moduli, axes)]
    if all(m == 1 for m in moduli) or math.prod(moduli) > MAX_PHASES:
        return None
    phases: list[Phase] = []
    for residues in itertools.product(*(range(m) for m in moduli)):
        ph = _phase(axes, reduce, value, cond, moduli, residues, taps)
        if ph is not None:
            phases.append(ph)
    return PhaseSplit(tuple(axes), tuple(moduli), tuple(phases))


def _phase(axes: Sequence[IterVar], reduce: Sequence[IterVar], value: Expr, cond: Expr,
           moduli: Sequence[int], residues: Sequence[int], taps: bool = False
           ) -> Phase | None:
    """One residue class, its reduction axes and rows tightened; None when empty."""
    t_vars = [Var(f"{iv.var.name}_t" if m > 1 else iv.var.name, iv.var.dtype, kind="axis")
              for iv, m in zip(axes, moduli)]
    sub: dict[Var, Expr] = {}
    t_dom: dict[Var, Interval] = {}
    # an axis of symbolic extent is never split (split_phases): it stays whole in the phase
    whole: dict[Var, IterVar] = {}
    for iv, m, r, t in zip(axes, moduli, residues, t_vars):
        if not isinstance(iv.dom.extent, int) or not isinstance(iv.dom.min, int):
            whole[t] = iv
            t_dom[t] = range_interval(iv.dom)
            sub[iv.var] = t
            continue
        lo, hi = iv.dom.min, iv.dom.min + iv.dom.extent - 1
        # p = m t + r within [lo, hi]: t in [ceil((lo - r) / m), floor((hi - r) / m)]
        tlo, thi = -((r - lo) // m), (hi - r) // m
        if tlo > thi:
            return None
        t_dom[t] = Interval(tlo, thi)
        sub[iv.var] = t if m == 1 else fold.binary(
            Op.ADD, fold.binary(Op.MUL, t, Const(m, t.dtype)), Const(r, t.dtype))
    if taps:
        stepped = _step_taps(reduce, value, cond, sub, t_dom)
        if stepped is None:
            return None
        reduce, value, cond = stepped
    r_dom = {iv.var: range_interval(iv.dom) for iv in reduce}
    an = Analyzer({**t_dom, **r_dom})
    p_cond = an.rewrite(substitute(cond, sub))
    if isinstance(p_cond, Const) and not p_cond.value:
        return None
    # the taps this phase can use: the reduction axes' box under its conditions
    r_box = box_of(p_cond, r_dom, exists=t_dom)
    if r_box is None:
        return None
    # the rows some tap hits: the grid's box under the conditions, taps existential
    g_box = box_of(p_cond, {t: d for t, d in t_dom.items() if t not in whole}, exists=r_box)
    if g_box is None:
        return None
    g_box.update((t, Interval(iv.dom.min, iv.dom.min)) for t, iv in whole.items())  # (lo)
    grid = tuple(IterVar(Var(t.name, t.dtype, kind="axis"),
                         Range(0, whole[t].dom.extent) if t in whole else
                         Range(0, g_box[t].hi - g_box[t].lo + 1)) for t in t_vars)
    shift: dict[Var, Expr] = {}
    for t, g in zip(t_vars, grid):
        shift[t] = fold.binary(Op.ADD, g.var, Const(g_box[t].lo, t.dtype))
    full = {v: substitute(e, shift) for v, e in sub.items()}
    red: list[IterVar] = []
    for iv in reduce:  # a tap axis left with one point is a constant
        b = r_box[iv.var]
        if b.lo == b.hi:
            full[iv.var] = Const(b.lo, iv.var.dtype)
            continue
        r = IterVar(Var(iv.var.name, iv.var.dtype, kind="reduce"), Range(0, b.hi - b.lo + 1))
        red.append(r)
        full[iv.var] = fold.binary(Op.ADD, r.var, Const(b.lo, iv.var.dtype))
    new_dom = {iv.var: range_interval(Range(0, iv.dom.extent)) for iv in (*grid, *red)}
    an = Analyzer(new_dom)
    new_cond = an.rewrite(substitute(cond, full))
    if isinstance(new_cond, Const) and not new_cond.value:
        return None
    return Phase(tuple(residues), tuple(g_box[t].lo for t in t_vars), grid, tuple(red),
                 an.rewrite(substitute(value, full)), new_cond)


def _step_taps(reduce: Sequence[IterVar], value: Expr, cond: Expr, sub: dict[Var, Expr],
               t_dom: dict[Var, Interval]
               ) -> tuple[list[IterVar], Expr, Expr] | None:
    """The reduction axes of one phase (``sub``: its axes' substitution) with each tap axis
    that a strided division holds stepped by the divisor, ``k = m*k2 + q``, when the phase's
    conditions leave exactly one ``q``; the value and condition rewritten over them. None
    when no tap of some such axis is left (the phase is empty)."""
    r_dom = {r.var: range_interval(r.dom) for r in reduce}
    an = Analyzer({**t_dom, **r_dom})  # (m*t + r + a - k) % m is (r + a - k) % m
    moduli = moduli_of([an.rewrite(substitute(value, sub)), an.rewrite(substitute(cond, sub))],
                       reduce)
    out: list[IterVar] = []
    for iv, m in zip(reduce, moduli):
        lo, n = iv.dom.min, iv.dom.extent
        if m == 1 or m > MAX_MODULUS:
            out.append(iv)
            continue
        live: list[int] = []
        for q in range(min(m, n)):
            k2 = Var(iv.var.name, iv.var.dtype, kind="reduce")
            step = {iv.var: fold.binary(Op.ADD, fold.binary(Op.MUL, k2, Const(m, k2.dtype)),
                                        Const(lo + q, k2.dtype))}
            dom = {**t_dom, **r_dom, k2: Interval(0, max(0, (n - q - 1) // m))}
            dom.pop(iv.var)
            c = Analyzer(dom).rewrite(substitute(substitute(cond, step), sub))
            if not (isinstance(c, Const) and not c.value):
                live.append(q)
        if not live:
            return None
        if len(live) > 1:
            out.append(iv)  # several residues of the tap hit this phase: left as it is
            continue
        q = live[0]
        k2 = IterVar(Var(iv.var.name, iv.var.dtype, kind="reduce"), Range(0, (n - q - 1) // m + 1))
        step = {iv.var: fold.binary(Op.ADD, fold.binary(Op.MUL, k2.var, Const(m, k2.var.dtype)),
                                    Const(lo + q, k2.var.dtype))}
        value, cond = substitute(value, step), substitute(cond, step)
        out.append(k2)
    return out, value, cond
