"""Zero-padded copies for the window-bound guards of sums: gradients' and inlined pads'.

The zero elimination of ``tex.autodiff`` turns a padded convolution's gradient into a
reduction over the points where the window lies inside the input::

    dK[o, c, r, s] = sum(H[n, o, h, w] * D[n, c, h + r - 1, w + s - 1],
                         where=h + r > 0 && h + r < 33 && s + w > 0 && s + w < 33)

The guard is exact but expensive once vectorized: it varies across the lanes at every
border, so the loads are masked and the accumulators blended. The forward computed the
same products on a zero-padded copy of ``D`` (``topi.nn.pad``), so a reduction of products
in which one factor is the guarded read can read a zero-padded copy instead and drop the
guard's conjuncts that only check that read's bounds: ``P[n, c, h + r, w + s]`` with
``P = pad(D, 1)``. The padded points then add ``0 * H`` where the guard skipped them,
which is what the forward's padding computed (and what PyTorch's and TVM's gradients
compute). The other reads of the body must stay in bounds without the dropped conjuncts.

A forward written over ``topi.nn.pad`` (a depthwise convolution as TVM's topi writes it)
has the pad inlined into its sum as a factor ``select(bounds, X[..], 0)``: the same guard,
spelled as a multiplication by 0. It is taken as one when every check that can fail is one
of ``X``'s bounds (the padded read multiplies by the same 0: nothing changes, ``NaN * 0``
included), so the sum's vector loop reads a copy instead of masking every load.
"""
from __future__ import annotations

from collections.abc import Sequence

from ..arith import Analyzer, range_interval
from ..arith.extent import as_extent, at_hint
from ..ir import fold
from ..ir.expr import (
    Binary,
    Compare,
    Const,
    Expr,
    IterVar,
    Op,
    Range,
    Reduce,
    Select,
    TensorRead,
    Var,
)
from ..ir.tensor import ComputeOp, Tensor
from ..ir.visit import collect_vars, post_order
from .inline import Inliner
from .schedule import Schedule, Stage

__all__ = ["PadCache", "existing_pads", "pad_guarded_reads"]

# a padded copy may be at most this much larger than the tensor it copies
_MAX_GROWTH = 2.0


# padded copies already made, per (tensor, phase stride): (copy, pads before, pads after)
PadCache = dict[tuple[Tensor, int], list[tuple[Tensor, tuple[int, ...], tuple[int, ...]]]]


def pad_guarded_reads(s: Schedule, stage: Stage, lane_var: Var | None = None,
                      shared: PadCache | None = None) -> list[Tensor]:
    """Rewrite ``stage`` (a sum of products under a guard) to read zero-padded copies of
    the reads whose bounds the guard checks, dropping those checks; returns the copies'
    tensors (new stages, before ``stage``, to be scheduled), or ``[]`` when nothing
    applies. Call before other primitives on ``stage``.

    With ``lane_var`` (the variable the stage will be vectorized along), only reads with a
    check that varies along it are padded: a check that does not is a branch around the
    vector loop, cheaper than the work a padded read adds where it skipped points.

    With ``shared`` (one dict for the calls on one schedule), a copy made for an earlier
    stage is read again where its pads cover this stage's (the stride phases of one
    gradient all read the head: one padded copy, not one per phase); new copies are
    added to it."""
    op = stage.op
    if op.num_outputs != 1 or stage.relations or not isinstance(op, ComputeOp):
        return []
    body = Inliner(s).expand(op.body[0])
    if not isinstance(body, Reduce) or len(body.source) != 1 or body.combiner.name != "sum":
        return []
    src = body.source[0]
    parts = [] if isinstance(body.condition, Const) else fold.conjuncts(body.condition)
    # a factor ``select(c, X[..], 0)`` (a zero pad inlined into a forward's sum of
    # products: a depthwise convolution written over ``topi.nn.pad``) guards the sum as a
    # ``where=c`` would, except that it multiplies by 0 where a where skips (NaN * 0):
    # every check of ``c`` must then be dropped for a padded read (which multiplies by
    # the same 0), or nothing changes
    hoisted: dict[Expr, Expr] = {
        f: f.a for f in _factors(src) if isinstance(f, Select) and
        isinstance(f.b, Const) and f.b.value == 0 and isinstance(f.a, TensorRead)}
    dom = {iv.var: range_interval(iv.dom) for iv in (*op.axis, *body.axis)}
    norm = Analyzer()
    ranged = Analyzer(dom)
    must_drop = set()
    for f in hoisted:
        for c in fold.conjuncts(f.cond):
            decided = ranged.rewrite(c)
            if not (isinstance(decided, Const) and decided.value):  # (true everywhere: no guard)
                must_drop.add(len(parts))
                parts.append(c)
    if hoisted:
        src = _replace_reads(src, hoisted)
    if not parts:
        return []
    keys = [_range_key(norm, c) for c in parts]

    dropped: set[int] = set()
    replace: dict[Expr, Expr] = {}
    created: list[tuple[Tensor, tuple[int, ...], tuple[int, ...]]] = []
    made: list[tuple[tuple[Tensor, int], tuple[Tensor, tuple[int, ...], tuple[int, ...]]]] = []
    reused: set[Tensor] = set()
    for f in _factors(src):
        if not isinstance(f, TensorRead) or f in replace or not f.tensor.shape:
            continue
        plan = _pad_plan(f, keys, norm, ranged)
        if plan is None:
            continue
        before, after, used = plan
        if lane_var is not None and not any(
                lane_var in collect_vars(parts[i]) for i in used):
            continue
        size = _prod(f.tensor.shape)
        grown = _prod(n + a + b for n, a, b in zip(f.tensor.shape, before, after))
        if grown > _MAX_GROWTH * size:
            continue
        shifted = [fold.binary(Op.ADD, e, b) if b else e for e, b in zip(f.indices, before)]
        m = _phase_stride(shifted[-1], norm)
        covering = [(c, b, a) for c, b, a in (shared or {}).get((f.tensor, m), [])
                    if all(x >= y for x, y in zip(b, before)) and
                    all(x >= y for x, y in zip(a, after)) and _computed_before(s, c, stage)]
        if covering:  # read the copy made for another stage, at its offsets
            padded, before, _ = covering[0]
            reused.add(padded)
            shifted = [fold.binary(Op.ADD, e, b) if b else e
                       for e, b in zip(f.indices, before)]
        else:
            padded = _pad_tensor(f.tensor, before, after, m)
            created.append((padded, before, after))
            made.append(((f.tensor, m), (padded, before, after)))
        if m > 1:  # the copy keeps the phases of its last axis apart: [.., phase, x // m]
            last = shifted[-1]
            shifted = [*shifted[:-1],
                       ranged.rewrite(fold.binary(Op.FLOORMOD, last, fold.const(m, last.dtype))),
                       ranged.rewrite(fold.binary(Op.FLOORDIV, last, fold.const(m, last.dtype)))]
        replace[f] = TensorRead(padded, shifted)
        dropped |= used
    if not replace or not must_drop <= dropped:
        return []
    new_src = _replace_reads(src, replace)
    rest = [c for i, c in enumerate(parts) if i not in dropped]
    # every other read must stay in bounds without the dropped conjuncts: over the whole
    # domain, or by a conjunct that is kept
    kept = [k for i, k in enumerate(keys) if i not in dropped and k is not None]
    copies = {p for p, _, _ in created} | reused
    for node in post_order(new_src):
        if isinstance(node, TensorRead) and node.tensor not in copies \
                and not _in_bounds(node, ranged, norm, kept):
            return []
    cond = fold.conjoin(rest)
    new_body = Reduce(body.combiner, [new_src], body.axis, cond, body.init, body.value_index)
    for padded, _, _ in created:
        pst = Stage(padded.op, s)
        s.insert_stage(pst, stage)
    if shared is not None:
        for key, entry in made:
            shared.setdefault(key, []).append(entry)
    s.replace_op(stage, ComputeOp(op.name, op.axis, [new_body], op.tag, op.attrs))
    return [p for p, _, _ in created]


def existing_pads(s: Schedule) -> PadCache:
    """The zero-padded copies ``s`` computes already (root stages: ``topi.nn.pad``'s, a
    convolution's ``pad_temp``), as ``pad_guarded_reads`` keys its own: a gradient that
    needs the padded input of the forward's convolution reads the forward's copy instead
    of making another (a ResNet block's two inputs, MobileNet's expanded activation:
    15 MB written and read again per copy)."""
    found: PadCache = {}
    norm = Analyzer()
    for st in s.stages:
        op = st.op
        if st.attach_type == "root" and isinstance(op, ComputeOp) and op.num_outputs == 1 \
                and not op.reduce_axis:
            plan = _zero_pad_of(op, norm)
            if plan is not None:
                t, before, after = plan
                found.setdefault((t, 1), []).append((op.output(0), before, after))
    return found


def _zero_pad_of(op: ComputeOp, norm: Analyzer
                 ) -> tuple[Tensor, tuple[int, ...], tuple[int, ...]] | None:
    """``(X, before, after)`` when ``op`` is ``X`` zero-padded by those widths (its body
    ``select(the bounds of X, X[ax - before], 0)``, every check there and no other), else
    None."""
    body = op.body[0]
    if not isinstance(body, Select) or not isinstance(body.b, Const) or body.b.value != 0 \
            or not isinstance(body.a, TensorRead):
        return None
    read = body.a
    t = read.tensor
    if t.dtype != op.output(0).dtype or len(read.indices) != len(op.axis):
        return None
    before: list[int] = []
    after: list[int] = []
    for e, iv, n in zip(read.indices, op.axis, t.shape):
        lf = norm.try_linear(norm.rewrite(e))
        if lf is None or list(lf.terms.items()) != [(iv.var, 1)] or iv.dom.min != 0:
            return None
        b = -lf.const
        a = as_extent(iv.dom.extent - n - b)
        if b < 0 or not isinstance(a, int) or a < 0:
            return None
        before.append(b)
        after.append(a)
    checks = _bound_checks(read.indices, t.shape, [b > 0 for b in before],
                           [a > 0 for a in after])
    have = {_range_key(norm, c) for c in fold.conjuncts(body.cond)}
    want = {_range_key(norm, c) for c in checks}
    if not any(before) and not any(after) or None in have or have != want:
        return None
    return t, tuple(before), tuple(after)


def _computed_before(s: Schedule, copy: Tensor, stage: Stage) -> bool:
    """Whether ``copy``'s stage runs before ``stage`` (a copy made here is inserted before
    its first reader; one the program computed may come after a gradient's stage)."""
    order = {st.op: k for k, st in enumerate(s.stages)}
    at = order.get(copy.op)
    return at is not None and at < order[stage.op]


def _pad_plan(read: TensorRead, keys: list[tuple | None], norm: Analyzer, ranged: Analyzer
              ) -> tuple[tuple[int, ...], tuple[int, ...], set[int]] | None:
    """Pads before/after each dimension of ``read``'s tensor so that its index always lands
    in the copy, and the conjuncts (positions) that only check those bounds; None when a
    dimension may leave the tensor without such a check, or nothing needs a pad."""
    before, after, used = [], [], set()
    for e, n in zip(read.indices, read.tensor.shape):
        b = _index_bounds(e, ranged)
        if b is None:
            return None
        lo_pad = max(0, -b[0])
        if isinstance(n, int):
            hi_pad = max(0, b[1] - (n - 1))
        elif ranged.at_most(e, n - 1):
            hi_pad = 0
        else:
            return None  # (a pad past a symbolic extent: not planned)
        for need, op, bound in ((lo_pad, Op.GE, 0), (hi_pad, Op.LT, n)):
            if not need:
                continue
            want = _range_key(norm, Compare(op, e, fold.const(bound, e.dtype)))
            hits = [i for i, k in enumerate(keys) if k is not None and k == want]
            if not hits:
                return None
            used.update(hits)
        before.append(lo_pad)
        after.append(hi_pad)
    if not any(before) and not any(after):
        return None
    return tuple(before), tuple(after), used


def _range_key(an: Analyzer, c: Expr) -> tuple | None:
    """A comparison normalized to (linear part, lo, hi), equal for equivalent comparisons."""
    if not (isinstance(c, Compare) and c.a.dtype.is_int and c.op in
            (Op.LT, Op.LE, Op.GT, Op.GE)):
        return None
    con = an.constraint(c.op, an.rewrite(c.a), an.rewrite(c.b))  # integer operands
    if isinstance(con, bool) or con.kind != "range":
        return None
    return (con.key, con.lo, con.hi)


def _pad_tensor(t: Tensor, before: tuple[int, ...], after: tuple[int, ...], m: int = 1
                ) -> Tensor:
    """The zero-padded copy; with ``m > 1`` its last axis is stored by phase:
    ``copy[.., x % m, x // m]`` (a stride-``m`` read of it becomes contiguous)."""
    ext = [n + b + a for n, b, a in zip(t.shape, before, after)]
    shape = ext[:-1] + ([m, -(-ext[-1] // m)] if m > 1 else ext[-1:])
    axes = [IterVar(Var(f"ax{d}", kind="axis"), Range(0, n)) for d, n in enumerate(shape)]
    coords: list[Expr] = [iv.var for iv in axes]
    if m > 1:  # position = x2 * m + phase
        phase, x2 = coords[-2], coords[-1]
        coords = [*coords[:-2], fold.binary(Op.ADD, fold.binary(
            Op.MUL, x2, fold.const(m, x2.dtype)), phase)]
    src = [fold.binary(Op.SUB, x, b) if b else x for x, b in zip(coords, before)]
    # (stored by phase, the last axis may also run past the end)
    checks = _bound_checks(src, t.shape, [b > 0 for b in before],
                           [a > 0 or (m > 1 and d == len(src) - 1)
                            for d, a in enumerate(after)])
    value = fold.select(fold.conjoin(checks), TensorRead(t, src), fold.const(0, t.dtype))
    return ComputeOp(f"{t.name}.pad", axes, [value], tag="pad").output(0)


def _bound_checks(src: Sequence[Expr], shape: Sequence[int], low: Sequence[bool],
                  high: Sequence[bool]) -> list[Expr]:
    """The checks a zero-padded copy's read ``X[src]`` needs: ``src[d] >= 0`` where
    ``low[d]``, ``src[d] < shape[d]`` where ``high[d]`` (``_pad_tensor`` makes them,
    ``_zero_pad_of`` recognizes them)."""
    checks: list[Expr] = []
    for x, n, lo, hi in zip(src, shape, low, high):
        if lo:
            checks.append(fold.compare(Op.GE, x, fold.const(0, x.dtype)))
        if hi:
            checks.append(fold.compare(Op.LT, x, fold.const(n, x.dtype) if isinstance(n, int)
                                       else fold.cast(x.dtype, n)))
    return checks


def _phase_stride(e: Expr, an: Analyzer) -> int:
    """``m`` when the index ``e`` moves by ``m`` (2 to 4) along one variable and by 1 along
    the others (a strided window: ``2*w + s``), else 1."""
    lf = an.try_linear(an.rewrite(e))
    if lf is None:
        return 1
    coefs = sorted(abs(c) for c in lf.terms.values())
    if len(coefs) >= 2 and 2 <= coefs[-1] <= 4 and coefs[-2] == 1 and \
            all(isinstance(v, Var) for v in lf.terms):
        return coefs[-1]
    return 1


def _in_bounds(read: TensorRead, an: Analyzer, norm: Analyzer, kept: list[tuple]) -> bool:
    """Whether every index of ``read`` stays in its dimension: over the whole domain, or,
    on a side where it may not, because a ``kept`` conjunct (normalized) implies it."""
    for e, n in zip(read.indices, read.tensor.shape):
        b = _index_bounds(e, an)
        if b is None:
            return False
        high = b[1] > n - 1 if isinstance(n, int) else not an.at_most(e, n - 1)
        for bad, op, bound in ((b[0] < 0, Op.GE, 0), (high, Op.LT, n)):
            if not bad:
                continue
            limit = fold.const(bound, e.dtype) if isinstance(bound, int) else \
                fold.cast(e.dtype, bound)
            want = _range_key(norm, fold.compare(op, e, limit))
            if want is None or not any(k[0] == want[0] and k[1] >= want[1] and k[2] <= want[2]
                                       for k in kept):
                return False
    return True


def _index_bounds(e: Expr, an: Analyzer) -> tuple[int, int] | None:
    """The smallest and largest value of the index ``e`` over ``an``'s domains."""
    b = an.try_bounds(an.rewrite(e))
    if b is None or b.lo is None or b.hi is None:
        return None
    return int(b.lo), int(b.hi)


def _factors(e: Expr) -> list[Expr]:
    if isinstance(e, Binary) and e.op is Op.MUL:
        return _factors(e.a) + _factors(e.b)
    return [e]


def _replace_reads(e: Expr, mapping: dict[Expr, Expr]) -> Expr:
    if e in mapping:
        return mapping[e]
    if isinstance(e, Binary) and e.op is Op.MUL:
        a, b = _replace_reads(e.a, mapping), _replace_reads(e.b, mapping)
        return fold.binary(Op.MUL, a, b)
    return e


def _prod(xs) -> int:  # type: ignore[no-untyped-def]
    n = 1
    for x in xs:
        n *= at_hint(x)  # (a symbolic extent: at the default hint)
    return n

