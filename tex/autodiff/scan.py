"""Reverse and forward mode through a scan: the adjoint recurrence as a scan backward in
time, the tangents as a scan forward in time (``scan_tangents``).

A scan ``O[t] = U(O[t-1], ..., D)[t]`` for ``t >= n0`` (``O[:n0]`` its init) has
``Λ[t] = G[t] + Σ_{t' > t} (∂U[t']/∂O[t])ᵀ Λ[t']`` as the adjoint of its output, given the
head ``G``. ``scan_contributions`` builds it from tex's own differentiation of one step:

1. **The step, recomputed.** Each body operation ``B`` becomes ``F_B[r] = B[r + n0]``
   (``r`` over the ``R = T - n0`` steps), its state reads made reads of a placeholder
   ``P`` standing for the output: a DAG of ordinary computes, differentiated with respect
   to ``P`` and the body's outside inputs ``D`` under a head ``H`` (``R`` rows; ``H[r]``
   will be ``Λ[r + n0]``). Zero elimination turns ``dP[t]`` into a gather over the steps
   that read row ``t``: reads of ``H`` at rows after ``t`` only.
2. **The backward scan.** Its state is ``Λ`` reversed (``Q[q] = Λ[T-1-q]``), its init the
   head's last row (no step reads the last output row), its update ``G[T-1-q] + dP[T-1-q]``.
   Every gradient operation that depends on ``H`` is re-indexed into it: an operation read
   at row ``a - q`` (a constant offset from its reader's row, or ``dP``'s ``T-1-q``) becomes
   a body operation at row ``q``, its reads of ``H`` reads of ``Q`` (at earlier rows: the
   step is causal), of ``P`` reads of the forward output; the others (the forward values
   ``F``) are computed before it.
3. **The contributions**: ``Λ[:n0]`` to the inits, and ``dD`` with ``H = Λ[n0:]`` and
   ``P = O`` to the outside inputs, an ordinary gradient program after the backward scan.

Each output's adjoint is propagated on its own (the recurrence is linear in the heads), so a
scan of ``K`` states builds ``K`` backward scans. A head with a prefix (a Jacobian of a
non-scalar output) is refused, as is a step whose reads of its own operations are not at
constant row offsets.
"""
from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence

from ..arith import simplify
from ..ir import fold
from ..ir.expr import Const, Expr, IterVar, Op, Range, Reduce, TensorRead, Var
from ..ir.tensor import ComputeOp, Operation, PlaceholderOp, ScanOp, Tensor
from ..ir.visit import post_order, rewrite, topo_sort_ops
from ..te import compute, placeholder
from ..te.scan import scan
from .builders import Zero, fresh_names, grad_name, new_axes
from .derivative import DifferentiationError

__all__ = ["scan_contributions", "scan_tangents"]

ReadFn = Callable[[TensorRead], "Expr | None"]


def scan_contributions(t: Tensor, deps: Sequence[Tensor], adj: Tensor,
                       differentiate: Callable[..., Sequence[Tensor]]
                       ) -> dict[Tensor, Tensor | Zero]:
    """The contributions of the scan output ``t`` (adjoint ``adj``) to ``deps`` (inputs of
    its scan): see the module docstring. ``differentiate``: ``tex.differentiate``."""
    op = t.op
    assert isinstance(op, ScanOp)
    if adj.shape != t.shape:
        raise DifferentiationError(
            f"differentiate: the head of the scan output '{t.name}' has shape {adj.shape}; "
            f"through a scan only a head of the output's shape {t.shape} is supported "
            "(differentiate a scalar loss, or one output element at a time)")
    steps, n0 = t.shape[0], op.init_len
    _constant_steps(op, "differentiate")
    name = grad_name(op.name)
    heads = [adj if k == t.value_index else None for k in range(op.num_outputs)]
    step = _Step(op, name) if steps > n0 else None
    if step is None:  # no step: the outputs are their inits
        lam = heads
    else:
        lam = _adjoint_recurrence(op, step, heads, name, differentiate)
    out: dict[Tensor, Tensor | Zero] = {}
    # an update computed before the scan (it reads no state) gives the rows from n0 on
    copied = {u: k for k, u in enumerate(op.update) if u.op not in op.body_ops}
    outside = [d for d in deps if d not in op.init and d not in copied]
    for d in deps:
        if d in copied:
            lk = lam[copied[d]]
            out[d] = Zero(d.shape, adj.dtype) if lk is None else compute(
                d.shape, lambda t_, *i, lk=lk: _select_or_zero(t_ >= n0, lk[(t_, *i)]),
                name=f"{name}_{grad_name(d.name)}_grad", tag="gradient")
    for d in deps:
        if d in op.init:
            k = op.init.index(d)
            lk = lam[k]
            out[d] = Zero(d.shape, adj.dtype) if lk is None else compute(
                d.shape, lambda *i, lk=lk: lk[i], name=f"{name}_{grad_name(d.name)}_grad",
                tag="gradient")
    if outside and step is not None:
        out.update(_outside_gradients(op, step, lam, outside, name, differentiate))
    for d in outside:
        out.setdefault(d, Zero(d.shape, adj.dtype))
    return out


def scan_tangents(op: ScanOp, tan: Mapping[Tensor, Tensor],
                  jvp: Callable[..., Tensor]) -> list[Tensor]:
    """Forward mode through a scan: the tangents of its outputs, given ``tan`` (the
    tangents of tensors it reads; ``jvp``: ``tex.autodiff.jvp``). They are a scan of
    their own: ``Ṡ[t] = (∂U/∂S) Ṡ[<t] + (∂U/∂D) Ḋ`` from the inits' tangents, its step the
    tangent of one recomputed step re-indexed from ``r`` to ``t = r + n0``."""
    steps, n0 = op.shapes[0][0], op.init_len
    _constant_steps(op, "jvp")
    name = grad_name(op.name)
    zero = [compute(s, lambda *i, d=d: fold.const(0, d), name=f"{name}_zero{k}",
                    tag="gradient") for k, (s, d) in enumerate(zip(op.shapes, op.dtypes))]
    inits = []
    for k, init in enumerate(op.init):
        ti = tan.get(init)
        inits.append(ti if ti is not None else compute(
            init.shape, lambda *i, d=op.dtypes[k]: fold.const(0, d),
            name=f"{name}_tinit{k}", tag="gradient"))
    if steps == n0:
        return inits
    step = _Step(op, name)
    TP = [placeholder(s, d, name=f"{name}_tstate{k}")
          for k, (s, d) in enumerate(zip(op.shapes, op.dtypes))]
    outside = [d for d in op.input_tensors if d in tan and d not in op.init]
    TS = [placeholder(s, d, name=f"{name}_tan{k}")
          for k, (s, d) in enumerate(zip(op.shapes, op.dtypes))]
    dU = [None if u is None else jvp(u, [*step.P, *outside], [*TP, *(tan[d] for d in outside)])
          for u in step.updates]
    made = [g for g in dU if g is not None]
    if step.rows == 1:
        # one step: it reads the inits' tangents only, so no recurrence (zero elimination
        # may drop a one-row time axis the tangent scan would index; as in the adjoint)
        known = [compute(s, lambda t, *i, ti=ti: _select_or_zero(t < n0, ti[(t % n0, *i)]),
                         name=f"{name}_tknown{k}", tag="gradient")
                 for k, (s, ti) in enumerate(zip(op.shapes, inits))]
        table = {**{p.op: x for p, x in zip(TP, known)},
                 **{p.op: o for p, o in zip(step.P, op.outputs)}}
        outs1 = []
        for k, (u, g, ti) in enumerate(zip(op.update, dU, inits)):
            last = tan.get(u, zero[k]) if g is None else _rewritten([g], table, set()).get(g, g)
            at = (lambda t: t) if g is None else (lambda t: t - n0)
            outs1.append(compute(op.shapes[k], lambda t, *i, ti=ti, last=last, at=at:
                                 fold.select(t < n0, ti[(t % n0, *i)], last[(at(t), *i)]),
                                 name=f"{name}_{k}_tangent", tag="gradient"))
        return outs1
    dep = _depending([made], set(TP))
    forward = _rewritten(made, {p.op: o for p, o in zip(step.P, op.outputs)}, dep)
    # a state tangent's row e is the tangent scan's own row e
    fwd = _Reindexer(steps, 1, lambda e: e, dict(zip(TP, TS)),
                     dict(zip(step.P, op.outputs)), forward, dep, "tan")
    updates = []
    for k, (u, g) in enumerate(zip(op.update, dU)):
        shape = op.shapes[k]
        if g is None:  # an update computed before the scan: its tangent's rows are copied
            tu = tan.get(u, zero[k])
            updates.append(compute(shape, lambda *i, tu=tu: tu[i], name=f"{name}_tupd{k}",
                                   tag="gradient"))
            continue
        part = fwd.at(g, -n0) if g.op in dep else forward.get(g, g)
        own = g.op in dep

        def body(t: Var, *i: Var, part: Tensor = part, own: bool = own) -> Expr:
            if own:
                return TensorRead(part, (t, *i))
            return _select_or_zero(t >= n0, TensorRead(part, (t - n0, *i)))

        updates.append(compute(shape, body, name=f"{name}_tupd{k}", tag="gradient"))
    outs = scan(inits, updates, TS, name=f"{name}_tangent")
    return outs if isinstance(outs, list) else [outs]


def _constant_steps(op: ScanOp, who: str) -> None:
    """A ``DifferentiationError`` for a scan over a symbolic number of steps: the adjoint
    and tangent recurrences are re-indexed by the step count (its other axes may be
    symbolic)."""
    steps = op.shapes[0][0]
    if not isinstance(steps, int):
        raise DifferentiationError(
            f"{who}: the scan '{op.name}' runs {steps} steps, a symbolic count; its "
            "derivative needs a constant number of steps (tex.specialize(outputs, "
            "{...: steps}) fixes it; the other dimensions may stay symbolic)")


class _Step:
    """One step of the scan as ordinary computes over its ``R`` steps (``F``), reading
    placeholders ``P`` for the outputs."""

    def __init__(self, op: ScanOp, name: str) -> None:
        self.op = op
        self.n0 = op.init_len
        self.rows = op.shapes[0][0] - self.n0
        self.P = [placeholder(s.shape, s.dtype, name=f"{name}_state{k}")
                  for k, s in enumerate(op.state_placeholder)]
        state = dict(zip(op.state_placeholder, self.P))
        made: dict[Tensor, Tensor] = {}
        n0 = self.n0

        def read(node: TensorRead) -> Expr | None:
            if node.tensor in state:
                return TensorRead(state[node.tensor], node.indices)
            if node.tensor in made:  # another body operation, at the same step
                return TensorRead(made[node.tensor], (fold.binary(Op.SUB, node.indices[0],
                                                                  fold.const(n0)),
                                                      *node.indices[1:]))
            return None

        for b in op.body_ops:
            assert isinstance(b, ComputeOp)
            new = _reindexed(b, f"{b.name}_step", self.rows,
                            lambda r: fold.binary(Op.ADD, r, fold.const(n0)), None, read)
            made.update(zip(b.outputs, new.outputs))
        self.updates = [made.get(u) for u in op.update]


def _adjoint_recurrence(op: ScanOp, step: _Step, heads: Sequence[Tensor | None], name: str,
                        differentiate: Callable[..., Sequence[Tensor]]
                        ) -> list[Tensor | None]:
    """``Λ`` per output (None for an output no head reaches)."""
    steps, n0, rows = op.shapes[0][0], step.n0, step.rows
    K = op.num_outputs
    H = [placeholder((rows, *s[1:]), d, name=f"{name}_head{k}")
         for k, (s, d) in enumerate(zip(op.shapes, op.dtypes))]
    # dP[k] = sum over the updates j of d U_j / d P_k under the head H_j
    dP: list[list[Tensor]] = [[] for _ in range(K)]
    for j, u in enumerate(step.updates):
        if u is None:
            continue  # an update computed outside the body: it reads no state
        grads = differentiate(u, step.P, H[j])
        for k, g in enumerate(grads):
            dP[k].append(g)
    G = [h if h is not None else compute(s, lambda *i, d=d: fold.const(0, d),
                                         name=f"{name}_zero{k}", tag="gradient")
         for k, (h, s, d) in enumerate(zip(heads, op.shapes, op.dtypes))]
    Q = [placeholder(s, d, name=f"{name}_adj{k}") for k, (s, d) in
         enumerate(zip(op.shapes, op.dtypes))]
    if rows == 1:
        # one step (the last row): nothing follows it, so its head is the given one and
        # the adjoint is that step's gradient added to the head, no recurrence (with one
        # row, zero elimination may drop the time axis the backward scan would index)
        last = [compute((1, *s[1:]), lambda _, *i, g=g: g[(steps - 1, *i)],
                        name=f"{name}_head{k}", tag="gradient")
                for k, (g, s) in enumerate(zip(G, op.shapes))]
        table = {**{h.op: x for h, x in zip(H, last)},
                 **{p.op: o for p, o in zip(step.P, op.outputs)}}
        lam1: list[Tensor | None] = []
        for k in range(K):
            parts = [_rewritten([g], table, set()).get(g, g) for g in dP[k]]
            Gk = G[k]
            lam1.append(compute(op.shapes[k], lambda *i, Gk=Gk, parts=parts: _sum(
                [Gk[i], *(p[i] for p in parts)]), name=f"{name}_{k}_grad" if K > 1
                else f"{name}_grad", tag="gradient"))
        return lam1
    dep_h = _depending(dP, set(H))
    # the forward values, reading the outputs themselves
    forward = _rewritten([g for gs in dP for g in gs], {p.op: o for p, o in
                                                         zip(step.P, op.outputs)}, dep_h)
    # H[e] is Λ[e + n0], the backward scan's row T-1-n0-e
    rev = _Reindexer(steps, -1, lambda e: fold.binary(Op.SUB, fold.const(steps - 1 - n0), e),
                     dict(zip(H, Q)), dict(zip(step.P, op.outputs)), forward, dep_h, "rev")
    inits, updates = [], []
    for k in range(K):
        shape = op.shapes[k]
        parts = [rev.at(g, steps - 1) for g in dP[k] if g.op in dep_h]
        others = [forward.get(g, g) for g in dP[k] if g.op not in dep_h]
        Gk = G[k]
        inits.append(compute((1, *shape[1:]), lambda _, *i, Gk=Gk: Gk[(steps - 1, *i)],
                             name=f"{name}_adj{k}_init", tag="gradient"))

        def body(q: Var, *i: Var, Gk: Tensor = Gk, parts: list = parts,
                 others: list = others) -> Expr:
            acc: Expr = Gk[(steps - 1 - q, *i)]
            for p in parts:
                acc = fold.binary(Op.ADD, acc, TensorRead(p, (q, *i)))
            for o in others:  # (reads no head: zero, or a constant gradient)
                acc = fold.binary(Op.ADD, acc, TensorRead(o, (steps - 1 - q, *i)))
            return acc

        updates.append(compute(shape, body, name=f"{name}_adj{k}_update", tag="gradient"))
    outs = scan(inits, updates, Q, name=f"{name}_adjoint")
    outs = outs if isinstance(outs, list) else [outs]
    lam: list[Tensor | None] = []
    for k, o in enumerate(outs):
        lam.append(compute(o.shape, lambda t_, *i, o=o: o[(steps - 1 - t_, *i)],
                           name=f"{name}_{k}_grad" if K > 1 else f"{name}_grad",
                           tag="gradient"))
    return lam


def _outside_gradients(op: ScanOp, step: _Step, lam: Sequence[Tensor | None],
                       outside: Sequence[Tensor], name: str,
                       differentiate: Callable[..., Sequence[Tensor]]
                       ) -> dict[Tensor, Tensor | Zero]:
    """``dD``: the steps' gradients with respect to the outside inputs, under the heads
    ``Λ[n0:]``, reading the forward outputs."""
    n0 = step.n0
    found: dict[Tensor, list[Tensor]] = {}
    for j, u in enumerate(step.updates):
        lj = lam[j]
        if u is None or lj is None:
            continue
        head = compute(u.shape, lambda r, *i, lj=lj: lj[(r + n0, *i)],
                       name=f"{name}_head{j}", tag="gradient")
        for d, g in zip(outside, differentiate(u, list(outside), head)):
            found.setdefault(d, []).append(g)
    table = {p.op: o for p, o in zip(step.P, op.outputs)}
    result: dict[Tensor, Tensor | Zero] = {}
    for d, gs in found.items():
        gs = [_rewritten([g], table, set()).get(g, g) for g in gs]
        result[d] = gs[0] if len(gs) == 1 else compute(
            d.shape, lambda *i, gs=gs: _sum([g[i] for g in gs]),
            name=f"{name}_{grad_name(d.name)}_grad", tag="gradient")
    return result


def _select_or_zero(cond: Expr, a: Expr) -> Expr:
    """``cond ? a : 0`` (a zero of ``a``'s dtype)."""
    return fold.select(cond, a, fold.const(0, a.dtype))


def _and(a: Expr, b: Expr) -> Expr:
    return fold.binary(Op.AND, a, b)


def _sum(values: Sequence[Expr]) -> Expr:
    acc = values[0]
    for v in values[1:]:
        acc = fold.binary(Op.ADD, acc, v)
    return acc


def _depending(roots: Sequence[Sequence[Tensor]], sources: set[Tensor]) -> set[Operation]:
    """The operations of the DAG of ``roots`` that read one of ``sources``, directly or
    not."""
    found: set[Operation] = set()
    src_ops = {s.op for s in sources}
    for o in topo_sort_ops([g for gs in roots for g in gs]):
        if any(x.op in src_ops or x.op in found for x in o.input_tensors):
            found.add(o)
    return found


def _rewritten(tensors: Sequence[Tensor], table: Mapping[Operation, Tensor],
               skip: set[Operation]) -> dict[Tensor, Tensor]:
    """The operations of ``tensors``' DAG (but ``skip``) rebuilt to read ``table[op]``
    where they read a placeholder ``op`` of it: old tensor -> new tensor, for those that
    changed."""
    new: dict[Tensor, Tensor] = {}

    def read(node: TensorRead) -> Expr | None:
        src = node.tensor
        if src.op in table:
            return TensorRead(table[src.op], node.indices)
        if src in new:
            return TensorRead(new[src], node.indices)
        return None

    for o in topo_sort_ops(list(tensors)):
        if o in skip or isinstance(o, PlaceholderOp):
            continue
        if not any(x.op in table or x in new for x in o.input_tensors):
            continue
        if not isinstance(o, ComputeOp):
            raise DifferentiationError(f"differentiate: the gradient of a scan step holds "
                                       f"'{o.name}', a {type(o).__name__}")
        bodies = [rewrite(b, lambda n: read(n) if isinstance(n, TensorRead) else None)
                  for b in o.body]
        made = ComputeOp(o.name, o.axis, bodies, o.tag, o.attrs)
        new.update(zip(o.outputs, made.outputs))
    return new


class _Reindexer:
    """The operations that depend on a recurrence's own values (the head of a backward
    scan, the state tangents of a forward one), re-indexed into that scan's steps:
    ``at(Y, a)`` is ``Y'`` with ``Y'[q] = Y[a + sign * q]`` (zero where that is not a row
    of ``Y``); their reads of ``heads[H][e]`` become reads of the scan's state at
    ``head_row(e)``."""

    def __init__(self, steps: int, sign: int, head_row: Callable[[Expr], Expr],
                 heads: Mapping[Tensor, Tensor], outputs: Mapping[Tensor, Tensor],
                 forward: Mapping[Tensor, Tensor], depending: set[Operation],
                 suffix: str) -> None:
        self.steps, self.sign, self.head_row = steps, sign, head_row
        self.heads = heads  # H_j -> Q_j
        self.outputs = outputs  # P_k -> O_k
        self.forward = forward  # forward value -> the same reading the outputs
        self.depending = depending
        self.suffix = suffix
        self.made: dict[tuple[Tensor, int], Tensor] = {}

    def at(self, y: Tensor, a: int) -> Tensor:
        key = (y, a)
        got = self.made.get(key)
        if got is not None:
            return got
        # (an explicit worklist: a chain of gradient operations is walked without recursion)
        pending: list[tuple[Operation, int]] = [(y.op, a)]
        order: list[tuple[Operation, int]] = []
        seen: set[tuple[Operation, int]] = set()
        while pending:
            o, off = pending.pop()
            if (o, off) in seen or (o.output(0), off) in self.made:
                continue
            seen.add((o, off))
            order.append((o, off))
            if not isinstance(o, ComputeOp):
                raise DifferentiationError(f"differentiate: the gradient of a scan step holds "
                                           f"'{o.name}', a {type(o).__name__}")
            row = o.axis[0].var
            for node in post_order(*o.body):
                if isinstance(node, TensorRead) and node.tensor.op in self.depending:
                    pending.append((node.tensor.op, off + _offset(node, row, o)))
        # producers first (the walk met each consumer first, but a producer read by two
        # of them may have come before the second)
        rank = {o: k for k, o in enumerate(topo_sort_ops([o.output(0) for o, _ in order]))}
        for o, off in sorted(order, key=lambda p: rank[p[0]]):
            self._make(o, off)
        return self.made[key]

    def _make(self, o: ComputeOp, a: int) -> None:
        if (o.output(0), a) in self.made:
            return
        row = o.axis[0].var

        def read(node: TensorRead) -> Expr | None:
            src = node.tensor
            if src in self.heads:
                return TensorRead(self.heads[src], (simplify(self.head_row(node.indices[0])),
                                                    *node.indices[1:]))
            if src in self.outputs:
                return TensorRead(self.outputs[src], node.indices)
            if src.op in self.depending:
                return None  # rewritten below, from the reindexed reader's own row
            new = self.forward.get(src)
            return None if new is None else TensorRead(new, node.indices)

        def own_row(node: TensorRead, q: Var) -> Expr | None:
            if node.tensor.op in self.depending:
                c = _offset(node, row, o)
                dst = self.made[(node.tensor.op.output(node.tensor.value_index), a + c)] \
                    if node.tensor.op.num_outputs == 1 else \
                    self.made[(node.tensor.op.output(0), a + c)].op.output(
                        node.tensor.value_index)
                return TensorRead(dst, (q, *node.indices[1:]))
            return None

        op_ = Op.SUB if self.sign < 0 else Op.ADD
        new = _reindexed(o, f"{o.name}_{self.suffix}", self.steps,
                        lambda q: fold.binary(op_, fold.const(a), q),
                        o.axis[0].dom.extent, read, own_row)
        for out in new.outputs:
            self.made[(o.output(out.value_index), a)] = out


def _offset(node: TensorRead, row: Var, reader: ComputeOp) -> int:
    """The constant ``c`` of a read at row ``row + c`` (DifferentiationError otherwise)."""
    diff = fold.binary(Op.SUB, node.indices[0], row)
    diff = simplify(diff)
    if not isinstance(diff, Const):
        raise DifferentiationError(
            f"differentiate through a scan: '{reader.name}' reads '{node.tensor.name}' at row "
            f"{node.indices[0]}, not at a constant offset from its own row {row.name}; the "
            "backward scan needs each step's gradient at fixed offsets")
    return int(diff.value)


def _reindexed(o: ComputeOp, name: str, rows: int, row_of: Callable[[Var], Expr],
              guard_rows: int | None, read: ReadFn,
              own_row: Callable[[TensorRead, Var], Expr | None] | None = None) -> ComputeOp:
    """``o`` over ``rows`` rows with fresh axes: its first axis variable replaced by
    ``row_of(new row)``. Reads are rewritten twice: ``own_row(read, new row)`` on the
    original body (reads that come out at the new row), then ``read`` once the variables are
    replaced (None: kept). With ``guard_rows``, zero where ``row_of(new row)`` is outside
    ``[0, guard_rows)``."""
    names = fresh_names(len(o.axis), {iv.var.name for iv in o.reduce_axis})
    axis = new_axes(names, (rows, *(iv.dom.extent for iv in o.axis[1:])))
    q = axis[0].var
    dom = {iv.var: iv.dom for iv in (*axis, *o.reduce_axis)}
    mapping: dict[Expr, Expr] = {o.axis[0].var: row_of(q)}
    mapping.update((old.var, new.var) for old, new in zip(o.axis[1:], axis[1:]))
    red_new = [IterVar(Var(iv.var.name, iv.var.dtype, kind="reduce"),
                       Range(iv.dom.min, iv.dom.extent)) for iv in o.reduce_axis]
    mapping.update((old.var, new.var) for old, new in zip(o.reduce_axis, red_new))
    guard: Expr | None = None
    if guard_rows is not None:
        r = row_of(q)
        guard = simplify(_and(fold.compare(Op.GE, r, fold.const(0)),
                              fold.compare(Op.LT, r, fold.const(guard_rows))), dom)
        if isinstance(guard, Const) and guard.value:
            guard = None

    def tidy_read(n: TensorRead) -> Expr:
        ix = [simplify(i, dom) for i in n.indices]
        return n if all(a is b for a, b in zip(ix, n.indices)) else TensorRead(n.tensor, ix)

    def moved(e: Expr) -> Expr:
        if own_row is not None:
            e = rewrite(e, lambda n: own_row(n, q) if isinstance(n, TensorRead) else None)
        e = rewrite(e, lambda n: mapping.get(n) if isinstance(n, Var) else None)
        e = rewrite(e, lambda n: tidy_read(n) if isinstance(n, TensorRead) else None)
        return rewrite(e, lambda n: read(n) if isinstance(n, TensorRead) else None)

    bodies = []
    for b in o.body:
        if isinstance(b, Reduce):
            cond = moved(b.condition)
            if guard is not None:
                if not (b.combiner.is_single(Op.ADD) and not b.init):
                    raise DifferentiationError(
                        f"differentiate through a scan: the step's gradient holds the "
                        f"reduction '{o.name}', which is not a plain sum")
                cond = _and(guard, cond)
            bodies.append(Reduce(b.combiner, [moved(x) for x in b.source], red_new, cond,
                                 [moved(x) for x in b.init], b.value_index))
        else:
            e = moved(b)
            if guard is not None and not (isinstance(e, Const) and e.value == 0):
                e = fold.select(guard, e, fold.const(0, e.dtype))
            bodies.append(e)
    return ComputeOp(name, axis, bodies, tag="gradient")
