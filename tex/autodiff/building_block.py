"""The building block of reverse mode: the adjoint contribution along one edge.

``DiffBuildingBlock(out, inp, head)`` returns ``A[pre, p] = sum_o head[pre, o] *
d out[o] / d inp[p]`` as a tensor expression *without* the Jacobian: each read
``inp[g(o, k)]`` of the body is differentiated on its own (a sum of deltas is split into
one term per read, so ``A[i,j] + A[j,i]`` gives two plain reads), and the Kronecker delta
``[g(o, k) == p]`` is solved for the summation variables by ``tex.arith.solve_domain``:
what is left is a loop over exactly the points where the delta is non-zero.

Per body kind:
- elementwise: the unknowns are the output indices ``o``;
- ``sum`` reductions: the unknowns are ``o`` and the reduce axes ``k``; ``where=``
  conditions and ``init=`` values are kept (init is differentiated elementwise);
- selections (``max``, ``min``, and tuple reducers whose combiner picks one of its
  operands, like argmax): the gradient goes to the selected element only. A small integer
  tensor ``<out>_argsel[o]`` holds the first (lowest flat index) reduction point whose
  values equal the result, and the derivative is the elementwise one at that point. If
  ``init`` won (no point equals the result), the gradient goes to the init value;
- products (a combiner that is one multiplication, as ``prod``): each factor's product of
  the others, from ``product_factors`` (a count of the zero factors and the product of
  the non-zero ones, one pass with two accumulators), exact with zeros;
- any other commutative reducer (user-defined ones): forward mode inside the
  combiner (``jacobian.py``: the combiner is extended with one derivative slot per value
  slot), giving the Jacobian ``J[o, p]``, which is then contracted with the head. Correct
  for every reducer; its cost is ``|out| * |inp| * |k|``.

A contribution with no term at all (integer values, a read that never hits ``inp``) is
the symbolic ``Zero``; ``DiffBuildingBlock``, the public fdiff, makes it a zero tensor.

Heads that are cheap elementwise tensors (the identity head of a full Jacobian, a head that
just reads another tensor, a gated read) are inlined into the contribution, so their
conditions (``pre == o`` for the identity) are solved with the rest.
"""
from __future__ import annotations

import math
from collections.abc import Sequence

from .. import te
from ..arith import Analyzer, Bounds, Interval, dom_of, normalize_dom, range_interval
from ..arith.extent import at_hint
from ..arith.phases import Phase, split_phases
from ..arith.solve import box_of, solve_domain
from ..dtype import boolean, int32
from ..ir import fold
from ..ir.expr import (
    Binary,
    Cast,
    CommReducer,
    Const,
    Expr,
    IterVar,
    Op,
    Range,
    Reduce,
    Select,
    TensorRead,
    Unary,
    Var,
)
from ..ir.tensor import ComputeOp, PlaceholderOp, Tensor
from ..ir.verify import check_compute_body
from ..ir.visit import collect_vars, evaluate_bottom_up, post_order, rewrite, substitute
from ..topi.reduce import arg_reducer
from .builders import (
    Zero,
    fresh_names,
    grad_name,
    identity_head,
    make_compute,
    new_axes,
    read_inlined,
    reads_of,
)
from .cost import iteration_count
from .derivative import partials
from .jacobian import generic_jacobian, literal_jacobian

__all__ = ["DiffBuildingBlock", "Jacobian", "building_block"]


# --------------------------------------------------------------------------------------
# guards and lifted conditions
# --------------------------------------------------------------------------------------

def guarded_and(guard: Expr, cond: Expr) -> Expr:
    """``guard && cond`` where the tensor reads of ``cond`` happen only where ``guard``
    holds (``&&`` does not guard reads; ``select`` does)."""
    if isinstance(guard, Const):
        return cond if guard.value else guard
    return fold.binary(Op.AND, guard, fold.select(guard, cond, Const(False, boolean)))


def guard_reads(cond: Expr, dom: dict[Var, Range]) -> Expr:
    """``cond`` (a conjunction, after solving) with no tensor read outside its tensor.

    Two kinds of read can fall outside:

    * a read at a data-dependent index (``C_argsel[a, R_argsel[] // 2 - 2 * a]``, or an
      ``argsel`` holding the ``init`` sentinel where no point matched a NaN) that interval
      bounds over ``dom`` cannot prove in range: it becomes ``select(in range, read, 0)``.
      Where it is out of range, the other conditions are false or an enclosing ``select``
      discards it, so the value there does not matter;
    * a read at an affine index that the read-free atoms keep in range
      (``argsel[p - k] == k`` with ``0 <= p - k``): the atoms that read are evaluated
      only where the read-free ones hold, through ``select`` (``&&`` does not guard
      reads)."""
    bounds = Bounds(dom)

    def local(node: Expr) -> Expr | None:
        if not isinstance(node, TensorRead) or not any(
                isinstance(n, TensorRead) for ix in node.indices for n in post_order(ix)):
            return None
        ranges: list[Expr] = []
        for ix, n in zip(node.indices, node.tensor.shape):
            iv = bounds(ix)
            if iv.lo < 0:
                ranges.append(fold.compare(Op.GE, ix, Const(0, ix.dtype)))
            if iv.hi >= n:
                ranges.append(fold.compare(Op.LT, ix, Const(n, ix.dtype)))
        if not ranges:
            return None
        return fold.select(fold.conjoin(ranges), node, Const(0, node.dtype))

    cond = rewrite(cond, local)
    atoms = fold.conjuncts(cond)
    reads = [any(isinstance(n, TensorRead) for n in post_order(a)) for a in atoms]
    free = [a for a, r in zip(atoms, reads) if not r]
    reading = [a for a, r in zip(atoms, reads) if r]
    if not reading or not free:
        return cond
    return guarded_and(fold.conjoin(free), fold.conjoin(reading))


def _lift_through(e: Expr) -> tuple[Expr, ...]:
    """The operands ``_lift`` looks through in ``e`` (what its lifted form is made of)."""
    match e:
        case Select(_, a, b) if _is_zero(b):
            return (a,)
        case Select(_, a, b) if _is_zero(a):
            return (b,)
        case Binary(Op.MUL | Op.ADD | Op.SUB, a, b):
            return (a, b)
        case Binary(Op.DIV, a, _) | Unary(Op.NEG, a):
            return (a,)
        case Cast(_, a) if a.dtype.is_float:
            return (a,)
    return ()


def _lift(e: Expr) -> tuple[list[Expr], Expr]:
    """``e`` as ``select(c1 && c2 ..., v, 0)``: its non-zeroness conditions and value.
    Looks through products, quotients (numerator), negation and float casts; the terms
    of a sum keep the conditions they do not share as a select around their value.
    Iterative and memoized per node: a Horner polynomial of degree 1,000 (a chain that
    deep) or a shared sub-expression costs one visit per node."""
    memo: dict[Expr, tuple[list[Expr], Expr]] = {}
    return evaluate_bottom_up(e, memo, _lift_through, lambda node: _lift_node(node, memo))


def _lift_node(e: Expr, memo: dict[Expr, tuple[list[Expr], Expr]]
               ) -> tuple[list[Expr], Expr]:
    """One step of ``_lift``: ``e``'s lifted form from its operands' (in ``memo``)."""
    match e:
        case Select(c, a, b) if _is_zero(b):
            inner_c, v = memo[a]
            return [c, *inner_c], v
        case Select(c, a, b) if _is_zero(a):
            inner_c, v = memo[b]
            return [fold.logical_not(c), *inner_c], v
        case Binary(Op.MUL, a, b):
            ca, va = memo[a]
            cb, vb = memo[b]
            if ca or cb or va is not a or vb is not b:
                return ca + cb, fold.binary(Op.MUL, va, vb)
        case Binary(Op.DIV, a, b):
            ca, va = memo[a]
            if ca or va is not a:
                return ca, fold.binary(Op.DIV, va, b)
        case Binary(Op.ADD | Op.SUB as op, a, b):
            # the conditions both sides carry (a select's derivative multiplies each term
            # of a product rule by the same [c]) hold for the sum
            ca, va = memo[a]
            cb, vb = memo[b]
            common = [c for c in ca if any(c is d for d in cb)]  # nodes are interned

            def rest(conds: list[Expr], v: Expr) -> Expr:
                left = [c for c in conds if not any(c is d for d in common)]
                return fold.select(fold.conjoin(left), v, Const(0, v.dtype)) if left else v
            if ca or cb:
                # a side's own conditions guard its reads through a select (a product
                # [c] * head[l] would read head where c is false)
                return common, fold.binary(op, rest(ca, va), rest(cb, vb))
        case Unary(Op.NEG, a):
            ca, va = memo[a]
            if ca or va is not a:
                return ca, fold.unary(Op.NEG, va)
        case Cast(dtype, a) if a.dtype.is_float:
            ca, va = memo[a]
            if ca or va is not a:
                return ca, fold.cast(dtype, va)
    return [], e


def _is_zero(e: Expr) -> bool:
    return isinstance(e, Const) and e.value == 0


# --------------------------------------------------------------------------------------
# terms: one (unknowns, equations, conditions, value) problem per read
# --------------------------------------------------------------------------------------

class _Edge:
    """Shared state while building the summand of one edge ``out -> inp``."""

    def __init__(self, out: Tensor, inp: Tensor, head: Tensor) -> None:
        self.out, self.inp, self.head = out, inp, head
        n_pre = head.ndim - out.ndim
        self.prefix = head.shape[:n_pre]
        self.shape = self.prefix + inp.shape
        op = out.op
        taken = {iv.var.name for iv in [*op.axis, *op.reduce_axis]}  # type: ignore[attr-defined]
        self.names = fresh_names(len(self.shape), taken)
        self.axis = new_axes(self.names, self.shape)
        self.pre = [iv.var for iv in self.axis[:n_pre]]
        self.p = [iv.var for iv in self.axis[n_pre:]]
        self.terms: list[Expr] = []
        self.tensors: list[Tensor] = []  # contribution tensors (reductions)
        self.count = 0
        self.steps: list[str] = []  # what the zero elimination did, for tex.autodiff.report

    def step(self, text: str) -> None:
        if text not in self.steps:
            self.steps.append(text)

    def head_at(self, o: Sequence[Expr]) -> Expr:
        return read_inlined(self.head, [*self.pre, *o])

    def add_term(self, unknowns: Sequence[IterVar], read: TensorRead, value: Expr,
                 conditions: Sequence[Expr]) -> None:
        """``sum_{unknowns: read.indices == p, conditions} value``."""
        lifted, value = _lift(value)
        if _is_zero(value):
            return
        eqs = [fold.binary(Op.SUB, ix, p) for ix, p in zip(read.indices, self.p)]
        solved = solve_domain(unknowns, eqs, [*conditions, *lifted], dom_of(self.axis))
        if solved is None:
            self.step(f"a read {read} never hits '{self.inp.name}': dropped")
            return  # provably no point: the read never hits inp
        gone = [v.name for v in solved.substitution]
        if gone:
            self.step(f"delta solved for {', '.join(gone)}")
        value = substitute(value, solved.substitution)
        dom = {**dom_of(self.axis), **dom_of(solved.axes)}
        value = Analyzer(dom).rewrite(value)
        if not solved.axes:
            self.step("no reduction left (a gather)")
            self.terms.append(fold.select(self._guard(solved.outer, dom), value,
                                          Const(0.0, value.dtype)))
            return
        self.step("sum over " + ", ".join(f"{iv.var.name} ({iv.dom.extent})"
                                          for iv in solved.axes))
        # The sum is computed over the gradient indices it uses (a read at a constant index
        # under a broadcast, C[i, j] = P[0], uses none of P's) and within the box the
        # outer conditions allow (p < 2), then selected into the gradient: |box| x |inner|
        # + |grad| iterations instead of |grad| x |inner|.
        used = set(collect_vars(value)) | set(collect_vars(solved.inner))
        ax = [iv for iv in self.axis if iv.var in used]
        # (an axis of symbolic extent is kept whole: its box would be the int bounds of
        # its extent, which hold for every size and fit none)
        symbolic = {iv.var for iv in ax if not isinstance(iv.dom.extent, int)}
        box = box_of(solved.outer, {iv.var: Interval(0, iv.dom.extent - 1) for iv in ax
                                    if iv.var not in symbolic})
        if box is None:
            self.step(f"a read {read} never hits '{self.inp.name}': dropped")
            return
        box.update((iv.var, range_interval(iv.dom)) for iv in ax if iv.var in symbolic)
        # a box of the gradient's size (dropped axes of extent 1) saves nothing
        used_axes = {iv.var for iv in ax}
        whole = all(iv.var in symbolic or (box[iv.var].lo == 0 and
                                           box[iv.var].hi == iv.dom.extent - 1) for iv in ax) \
            and all(isinstance(iv.dom.extent, int) and iv.dom.extent == 1
                    for iv in self.axis if iv.var not in used_axes)
        if whole:
            ax = list(self.axis)
            box = {iv.var: range_interval(iv.dom) for iv in ax}
            cond = fold.binary(Op.AND, solved.outer, solved.inner)
            outside: Expr | None = None
        else:  # the outer atoms on dropped axes go outside; those the box enforces go
            kept = {iv.var for iv in ax}
            outer_in = [a for a in fold.conjuncts(solved.outer) if set(collect_vars(a)) <= kept]
            outside = fold.conjoin([a for a in fold.conjuncts(solved.outer)
                                    if not set(collect_vars(a)) <= kept])
            cond = Analyzer({**normalize_dom(dom), **box}).rewrite(
                fold.conjoin([*outer_in, solved.inner]))
        self.count += 1
        name = grad_name(f"{self.inp.name}_grad_{self.out.name}")
        if self.count > 1:
            name += f"_{self.count}"
        inner_axes = solved.axes
        if self._by_phase(name, ax, box, inner_axes, value, cond, outside, dom):
            return
        cond = self._guard(cond, dom)

        def body(v: tuple[Expr, ...]) -> Expr:
            m = {iv.var: fold.binary(Op.ADD, x, Const(box[iv.var].lo, int32))
                 for iv, x in zip(ax, v)}
            return te.sum(substitute(value, m), axis=list(inner_axes),
                          where=substitute(cond, m))

        if whole:
            t = make_compute(name, self.shape, body, self.names)
            self.tensors.append(t)
            self.terms.append(TensorRead(t, self.axis_vars()))
            return
        t = make_compute(name + "_sum", [iv.dom.extent if iv.var in symbolic else
                                         box[iv.var].hi - box[iv.var].lo + 1 for iv in ax],
                         body, [iv.var.name for iv in ax])
        self.step(f"summed over the box {t.shape} of the indices it uses")
        at = [fold.binary(Op.SUB, iv.var, Const(box[iv.var].lo, int32)) for iv in ax]
        self.terms.append(fold.select(self._guard(solved.outer, dom), TensorRead(t, at),
                                      Const(0.0, value.dtype)))

    def _by_phase(self, name: str, ax: list[IterVar], box: dict[Var, Interval],
                  inner_axes: Sequence[IterVar], value: Expr, cond: Expr,
                  outer: Expr | None, dom: dict[Var, Range]) -> bool:
        """The sum computed per stride phase of the gradient axes (``phases.py``), when
        that iterates less than one sum over the box; returns whether it did. ``outer``:
        the conditions on the axes the sum does not use (None: it uses them all)."""
        if any(not isinstance(iv.dom.extent, int) for iv in (*ax, *inner_axes)):
            return False  # (the phase split counts iterations: concrete extents only)
        boxed = [IterVar(iv.var, Range(box[iv.var].lo, box[iv.var].hi - box[iv.var].lo + 1))
                 for iv in ax]
        split = split_phases(boxed, inner_axes, value, cond)
        if split is None:
            return False
        single = math.prod(iv.dom.extent for iv in boxed) * \
            math.prod(iv.dom.extent for iv in inner_axes)
        # a sum over the whole gradient is the gradient itself; the phases need a merge
        merge = math.prod(self.shape) if outer is None else 0
        # each phase is one more stage to schedule and run: worth it when it saves a tenth
        if 10 * (split.iterations() + merge) > 9 * single:
            return False
        self.step(f"split by stride phase ({' x '.join(map(str, split.moduli))}): "
                  f"{len(split.phases)} dense sums")

        def make(ph: Phase) -> Tensor:
            pcond = self._guard(ph.cond, dom_of(ph.grid, ph.reduce))

            def body(v: tuple[Expr, ...]) -> Expr:
                m = {g.var: x for g, x in zip(ph.grid, v)}
                return te.sum(substitute(ph.value, m), axis=list(ph.reduce),
                              where=substitute(pcond, m))

            return make_compute(f"{name}_phase{split.suffix(ph)}",
                                [g.dom.extent for g in ph.grid], body,
                                [g.var.name for g in ph.grid])

        # the phase's own sum checks the conditions on its axes (``outer``)
        term, _ = split.merge(ax, Const(0.0, value.dtype), make,
                              cond=lambda ph: self._guard(ph.cond, dom_of(ph.grid, ph.reduce)),
                              where=None if outer is None else self._guard(outer, dom))
        self.terms.append(term)
        return True

    def _guard(self, cond: Expr, dom: dict[Var, Range]) -> Expr:
        guarded = guard_reads(cond, dom)
        if guarded is not cond:
            self.step("data-dependent reads guarded")
        return guarded

    def axis_vars(self) -> list[Expr]:
        return [iv.var for iv in self.axis]

    def result(self) -> Tensor | Zero:
        name = grad_name(f"{self.inp.name}_grad_{self.out.name}")
        dtype = self.head.dtype
        if not self.terms:
            return Zero(tuple(self.shape), dtype)
        if len(self.terms) == 1 and len(self.tensors) == 1:
            return self.tensors[0]
        only = self.terms[0] if len(self.terms) == 1 else None
        if isinstance(only, TensorRead) and only.tensor is self.head and \
                only.tensor.shape == self.shape and \
                only.dtype is dtype and \
                all(a is b for a, b in zip(only.indices, self.axis_vars())):
            return only.tensor  # the head passes through unchanged (z in x + z)
        terms, ax = self.terms, self.axis
        named = [t for t in self.tensors if t.name == name]
        if named:  # that sum is one part of the gradient now: the name goes to the whole
            first = named[0]
            op: ComputeOp = first.op  # type: ignore[assignment]
            part = ComputeOp(f"{name}_1", list(op.axis), list(op.body), tag=op.tag).output(0)

            def rename(n: Expr) -> Expr | None:
                return TensorRead(part, n.indices) if isinstance(n, TensorRead) and \
                    n.tensor is first else None
            terms = [rewrite(t, rename) for t in terms]

        def body(v: tuple[Expr, ...]) -> Expr:
            m = {iv.var: x for iv, x in zip(ax, v)}
            acc: Expr | None = None
            for t in terms:
                t = fold.cast(dtype, substitute(t, m))
                acc = t if acc is None else fold.binary(Op.ADD, acc, t)
            return acc  # type: ignore[return-value]

        return make_compute(name, self.shape, body, self.names)


def _note_split(edge: _Edge, n: int) -> None:
    if n > 1:
        edge.step(f"{n} reads of '{edge.inp.name}' differentiated separately (a sum of deltas "
                  "split)")


def _elementwise_terms(edge: _Edge, unknowns: Sequence[IterVar], expr: Expr,
                       weight: Expr, conditions: Sequence[Expr]) -> None:
    parts = partials(expr, reads_of(edge.inp))
    _note_split(edge, len(parts))
    for read, d in parts.items():
        edge.add_term(unknowns, read, fold.binary(Op.MUL, weight, d), conditions)


def _is_selection(c: CommReducer) -> bool:
    """Whether every result slot is one of its two operands (max, min, argmax...)."""
    for i, (r, x, y) in enumerate(zip(c.result, c.lhs, c.rhs)):
        if c.slot_combines(i, Op.MAX) or c.slot_combines(i, Op.MIN):
            continue
        if isinstance(r, Select) and {id(r.a), id(r.b)} == {id(x), id(y)}:
            continue
        return False
    return True


def _flat_index(axes: Sequence[IterVar]) -> Expr:
    flat: Expr = Const(0, int32)
    for iv in axes:
        flat = fold.binary(Op.ADD, fold.binary(Op.MUL, flat, Const(iv.dom.extent, int32)),
                           fold.binary(Op.SUB, iv.var, Const(iv.dom.min, int32)))
    return flat


_NONE = 2**31 - 1  # "no reduction point was selected": init won


def _extreme(c: CommReducer) -> Op | None:
    """``GT`` for a one-slot ``max`` combiner, ``LT`` for ``min``, else None."""
    if c.is_single(Op.MAX):
        return Op.GT
    return Op.LT if c.is_single(Op.MIN) else None


# (index, value) reducers keeping the first extreme; index identity INT32_MAX == _NONE
_ARG_REDUCERS = {Op.GT: arg_reducer("argsel_max", Op.GT), Op.LT: arg_reducer("argsel_min", Op.LT)}


def selection_index(out: Tensor) -> Tensor:
    """``<out>_argsel[o]``: the flat index of the first reduction point whose values equal
    the result of the selection reduction producing ``out`` (``2**31 - 1``: none, init won).

    For ``max``/``min`` it is one pass, an (index, value) argmax/argmin of the source that
    does not read ``out`` (ties: the lowest index; against ``init``: the point); for other
    selection reducers (several slots) it is the first point equal to every slot of
    ``out``."""
    op = out.op
    body = op.body
    red: Reduce = body[0]
    axis = op.axis
    fresh = [te.reduce_axis((iv.dom.min, iv.dom.stop), name=iv.var.name) for iv in red.axis]
    rename = {iv.var: f.var for iv, f in zip(red.axis, fresh)}
    out_names = [iv.var.name for iv in axis]
    better = _extreme(red.combiner)
    if better is not None:
        new_axis = new_axes(out_names, out.shape)
        m = {**rename, **{iv.var: n.var for iv, n in zip(axis, new_axis)}}
        init = None if not red.init else (Const(_NONE, int32), substitute(red.init[0], m))
        cond = substitute(red.condition, m)
        bodies = _ARG_REDUCERS[better]((_flat_index(fresh), substitute(red.source[0], m)),
                                       axis=fresh, where=cond, init=init)
        check_compute_body(f"{op.name}_argsel", new_axis, list(bodies))
        return ComputeOp(f"{op.name}_argsel", new_axis, list(bodies), tag="argsel").output(0)
    equal: Expr = Const(True, boolean)
    for vi, src in enumerate(red.source):
        equal = fold.binary(Op.AND, equal, fold.compare(Op.EQ, src, TensorRead(
            op.output(vi), [iv.var for iv in axis])))
    # the reads of the comparison happen only where the reduction's condition holds
    match = guarded_and(red.condition, equal)

    def fbody(v: tuple[Expr, ...]) -> Expr:
        m = {**rename, **{iv.var: x for iv, x in zip(axis, v)}}
        return te.min(_flat_index(fresh), axis=fresh, where=substitute(match, m),
                      init=Const(_NONE, int32))

    return make_compute(f"{op.name}_argsel", out.shape, fbody, out_names, tag="argsel")


# --------------------------------------------------------------------------------------
# the building block
# --------------------------------------------------------------------------------------

def _check_edge(out: Tensor, inp: Tensor, head: Tensor, what: str) -> None:
    for name, t in (("out", out), ("inp", inp), ("head", head)):
        if not isinstance(t, Tensor):
            raise TypeError(f"{what}: {name} must be a Tensor, got {type(t).__name__} {t!r}")
    if not isinstance(out.op, ComputeOp) or inp not in out.op.input_tensors:
        raise ValueError(f"{what}: '{inp.name}' is not a direct input of '{out.name}'")
    nd = out.ndim
    if head.ndim < nd or head.shape[head.ndim - nd:] != out.shape:
        raise ValueError(f"{what}: head shape {head.shape} must end with the shape "
                         f"{out.shape} of '{out.name}'")


def DiffBuildingBlock(out: Tensor, inp: Tensor, head: Tensor) -> Tensor:  # noqa: N802
    """The adjoint contribution of ``out`` to its direct input ``inp``: ``A[pre, p] =
    sum_o head[pre, o] * d out[o] / d inp[p]``, shape ``head.shape[:-out.ndim] +
    inp.shape``, with the Jacobian's zeros removed (the default ``fdiff``)."""
    got = building_block(out, inp, head)[0]
    return got.materialize(grad_name(f"{inp.name}_grad_{out.name}")) if isinstance(got, Zero) \
        else got


def building_block(out: Tensor, inp: Tensor, head: Tensor
                   ) -> tuple[Tensor | Zero, list[str]]:
    """``DiffBuildingBlock``, with a ``Zero`` where no point of ``inp`` contributes (a cut
    path: integer values, floor, a read that never hits), and the steps of the zero
    elimination that fired (in order, for ``tex.autodiff.report``)."""
    _check_edge(out, inp, head, "DiffBuildingBlock")
    edge = _Edge(out, inp, head)
    if not out.dtype.is_float or not inp.dtype.is_float:
        edge.step("integer values: no gradient")
        return edge.result(), edge.steps
    op: ComputeOp = out.op  # type: ignore[assignment]
    body = op.body[out.value_index]
    o_axes = list(op.axis)
    h = edge.head_at([iv.var for iv in o_axes])
    if not isinstance(body, Reduce):
        # a derivative that mentions the body itself (exp, tanh, sigmoid, sqrt...) reads
        # the forward value instead of recomputing it
        saved = {body: TensorRead(out, [iv.var for iv in o_axes])}
        parts = partials(body, reads_of(inp))
        _note_split(edge, len(parts))
        for read, d in parts.items():
            edge.add_term(o_axes, read, fold.binary(Op.MUL, h, substitute(d, saved)), [])
        return edge.result(), edge.steps
    red = body
    vi = red.value_index
    combiner = red.combiner
    if combiner.is_single(Op.ADD):
        _elementwise_terms(edge, [*o_axes, *red.axis], red.source[0], h, [red.condition])
        if red.init:
            _elementwise_terms(edge, o_axes, red.init[0], h, [])
    elif not red.init and math.prod(iv.dom.extent for iv in red.axis) == 1:
        # any reducer over one point (a 1x1 pooling window, a product over an extent-1
        # axis) gives the point itself, combined with the identity: no argsel, no passes
        edge.step("reduction over a single point: the point itself")
        _elementwise_terms(edge, [*o_axes, *red.axis], red.source[vi], h, [red.condition])
    elif _is_selection(combiner):
        index = selection_index(out)
        edge.step("selection: the gradient goes to the point " +
                  ("a one-pass argmax/argmin picks" if index.op.num_outputs == 2 else
                   "equal to the result"))
        sel = TensorRead(index, [iv.var for iv in o_axes])
        picked = fold.compare(Op.EQ, _flat_index(red.axis), sel)
        _elementwise_terms(edge, [*o_axes, *red.axis], red.source[vi], h,
                           [red.condition, picked])
        if red.init:
            _elementwise_terms(edge, o_axes, red.init[vi], h,
                               [fold.compare(Op.EQ, sel, Const(_NONE, int32))])
        gathered = edge.result()
        scattered = _scatter_selection(out, inp, head, red, sel)
        if scattered is not None and isinstance(gathered, Tensor) and \
                at_hint(iteration_count(scattered[0])) < at_hint(iteration_count(gathered)):
            return scattered
        return gathered, edge.steps
    elif combiner.is_single(Op.MUL) and out.dtype.is_float:
        zeros, nonzero = product_factors(out)
        edge.step("product: the other factors from a count of zeros and the product of "
                  "the non-zero factors (one pass, two accumulators)")
        at = [iv.var for iv in o_axes]
        z, nz = TensorRead(zeros, at), TensorRead(nonzero, at)
        src = red.source[0]
        zero = Const(0.0, src.dtype)
        no_zero = fold.compare(Op.EQ, z, Const(0, int32))
        # the product of the factors other than this one: exact when some are 0
        others = fold.select(no_zero, fold.binary(Op.DIV, nz, src), fold.select(
            fold.binary(Op.AND, fold.compare(Op.EQ, z, Const(1, int32)),
                        fold.compare(Op.EQ, src, zero)), nz, zero))
        if red.init:
            others = fold.binary(Op.MUL, others, red.init[0])
        _elementwise_terms(edge, [*o_axes, *red.axis], src, fold.binary(Op.MUL, h, others),
                           [red.condition])
        if red.init:
            _elementwise_terms(edge, o_axes, red.init[0],
                               fold.binary(Op.MUL, h, fold.select(no_zero, nz, zero)), [])
    else:
        edge.step("any reducer: forward mode in the combiner (a Jacobian |out| x |inp| x "
                  "|reduction|)")
        return _generic_reduce(edge, out, red), edge.steps
    return edge.result(), edge.steps


def _unravel(axes: Sequence[IterVar], flat: Expr) -> dict[Var, Expr]:
    """The point of ``axes`` at row-major position ``flat`` (``_flat_index`` inverted).
    Unlike ``topi.utils.unravel``, the first digit is reduced too: the point stays provably
    in range even at the "none selected" index, so its scatter needs no range guard."""
    out: dict[Var, Expr] = {}
    stride = 1
    for iv in reversed(axes):
        digit = fold.binary(Op.FLOORDIV, flat, Const(stride, int32)) if stride > 1 else flat
        if stride * iv.dom.extent < 2**31 - 1:
            digit = fold.binary(Op.FLOORMOD, digit, Const(iv.dom.extent, int32))
        out[iv.var] = fold.binary(Op.ADD, digit, Const(iv.dom.min, int32))
        stride *= iv.dom.extent
    return out


def _scatter_selection(out: Tensor, inp: Tensor, head: Tensor, red: Reduce, sel: Expr
                       ) -> tuple[Tensor, list[str]] | None:
    """A selection's gradient the other way round: every output point sends its head to
    the point its argsel picked (the reduction axes replaced by the decoded index), a
    scatter (``tex.ir.scatter``) of |out| updates after an init of the gradient, where
    the gather visits every window that covers each input point. None when the result
    is not one tensor."""
    edge = _Edge(out, inp, head)
    op: ComputeOp = out.op  # type: ignore[assignment]
    o_axes = list(op.axis)
    h = edge.head_at([iv.var for iv in o_axes])
    vi = red.value_index
    point = _unravel(red.axis, sel)
    edge.step("selection: the head scattered to the point a one-pass argmax/argmin picks")
    _elementwise_terms(edge, o_axes, substitute(red.source[vi], point), h,
                       [fold.compare(Op.NE, sel, Const(_NONE, int32)),
                        substitute(red.condition, point)])
    if red.init:
        _elementwise_terms(edge, o_axes, red.init[vi], h,
                           [fold.compare(Op.EQ, sel, Const(_NONE, int32))])
    res = edge.result()
    return (res, edge.steps) if isinstance(res, Tensor) else None


def product_factors(out: Tensor) -> tuple[Tensor, Tensor]:
    """``<out>_factors``' two outputs, from one pass: how many factors of the product
    reduction producing ``out`` are 0, and the product of the others (init not included).
    The product of all factors but one is then ``nonzero / x`` without zeros, ``nonzero``
    at the only zero, and 0 with two or more."""
    op = out.op
    red: Reduce = op.body[out.value_index]  # type: ignore[assignment]
    names = [iv.var.name for iv in op.axis]
    src = red.source[0]
    zero = Const(0.0, src.dtype)

    is_zero = fold.compare(Op.EQ, src, zero)
    # one pass, two slots: the count of zeros and the product of the other factors
    axis = new_axes(names, out.shape)
    fresh = [te.reduce_axis((iv.dom.min, iv.dom.stop), name=iv.var.name) for iv in red.axis]
    m = {**{iv.var: f.var for iv, f in zip(red.axis, fresh)},
         **{iv.var: n.var for iv, n in zip(op.axis, axis)}}
    slots = (fold.select(is_zero, Const(1, int32), Const(0, int32)),
             fold.select(is_zero, Const(1.0, src.dtype), src))
    bodies = _ZEROS_AND_PRODUCT(tuple(substitute(e, m) for e in slots), axis=fresh,
                                where=substitute(red.condition, m))
    check_compute_body(f"{op.name}_factors", axis, list(bodies))
    factors = ComputeOp(f"{op.name}_factors", axis, list(bodies), tag="product_factors")
    return factors.output(0), factors.output(1)


def _zeros_and_product(acc: tuple[Expr, Expr], new: tuple[Expr, Expr]
                       ) -> tuple[Expr, Expr]:
    return (fold.binary(Op.ADD, acc[0], new[0]), fold.binary(Op.MUL, acc[1], new[1]))


_ZEROS_AND_PRODUCT = te.comm_reducer(
    _zeros_and_product, lambda count, value: (te.const(0, count), te.const(1, value)),
    name="zeros_and_product")


# --------------------------------------------------------------------------------------
# the general reducer: forward mode inside the combiner
# --------------------------------------------------------------------------------------


def _generic_reduce(edge: _Edge, out: Tensor, red: Reduce) -> Tensor | Zero:
    jac = generic_jacobian(out, edge.inp, red)
    op: ComputeOp = out.op  # type: ignore[assignment]
    o_axes = list(op.axis)
    if not o_axes:
        value = fold.binary(Op.MUL, edge.head_at([]), TensorRead(jac, edge.p))
        edge.terms.append(value)
        return edge.result()
    fresh = [te.reduce_axis((0, iv.dom.extent), name=iv.var.name) for iv in o_axes]
    pre, p = edge.pre, edge.p

    def body(v: tuple[Expr, ...]) -> Expr:
        m = dict(zip(pre + p, v))
        o = [f.var for f in fresh]
        hv = substitute(edge.head_at(o), m)
        return te.sum(fold.binary(Op.MUL, hv, TensorRead(jac, [*o, *v[len(pre):]])),
                      axis=fresh)

    return make_compute(grad_name(f"{edge.inp.name}_grad_{out.name}"), edge.shape, body, edge.names)


# --------------------------------------------------------------------------------------
# Jacobian
# --------------------------------------------------------------------------------------

def Jacobian(out: Tensor, inp: Tensor, optimize: bool = True) -> Tensor:  # noqa: N802
    """``J[o, p] = d out[o] / d inp[p]``, shape ``out.shape + inp.shape``, for a direct
    input ``inp`` of ``out``.

    With ``optimize`` (default) the zeros are removed (the building block with the
    identity head); without, the Jacobian is built literally: every read of ``inp``
    becomes a Kronecker delta ``[g(o, k) == p]`` (the form TVM starts from; for tests and
    for teaching).
    """
    if not isinstance(out, Tensor) or not isinstance(inp, Tensor):
        raise TypeError("Jacobian: out and inp must be Tensors")
    if not isinstance(optimize, bool):
        raise TypeError(f"Jacobian: optimize must be a bool (True or False), got "
                        f"{type(optimize).__name__} {optimize!r}")
    if isinstance(out.op, PlaceholderOp) or inp not in out.op.input_tensors:
        raise ValueError(f"Jacobian: '{inp.name}' is not a direct input of '{out.name}'")
    if not out.dtype.is_float:
        raise TypeError(f"Jacobian: '{out.name}' has dtype {out.dtype}; only float "
                        "tensors are differentiable")
    if optimize:
        return DiffBuildingBlock(out, inp, identity_head(out))
    return literal_jacobian(out, inp)
