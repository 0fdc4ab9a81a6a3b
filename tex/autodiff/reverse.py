"""Reverse-mode differentiation of a tensor DAG: ``tex.differentiate``.

``differentiate`` reads as its three steps:

1. ``_check_args``: the arguments, checked (``_Request``).
2. ``_plan``: a frozen ``_Plan``: the tensors the output depends on in topological order
   (an explicit stack, no recursion), those on a path to a requested input, the paths
   zero by convention (``report.conventional_zeros``) and the adjoints proved identically
   zero (``zero_proofs``).
3. ``_adjoint_loop``: for each needed tensor in reverse order, its adjoint is the sum of
   the contributions its consumers sent (the head for the output); then one of three
   contribution functions gives its inputs' contributions: ``_by_override`` (the user's
   ``override``), ``_by_user_fdiff`` (the user's ``fdiff``) or ``_by_building_block`` (the
   default, with zero elimination). A contribution that is zero is the symbolic ``Zero``
   and is dropped; a zero tensor is built only for a requested input nothing reached.

The gradient program is then tidied (``tidy``): the gradient tensors a hand-written
gradient would not hold are inlined (forward tensors are never touched).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..debug import dump, should_dump, timed
from ..ir import fold
from ..ir.codec import IR_CODECS, Codec
from ..ir.expr import Binary, Cast, Const, Expr, Op, Reduce, Select, TensorRead
from ..ir.printer import format_program
from ..ir.saved import SavedCall
from ..ir.tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor
from ..ir.visit import post_order, rewrite, topo_sort_ops
from .builders import Zero, grad_name, identity_head, make_compute
from .building_block import building_block
from .derivative import DifferentiationError
from .report import ZeroedPath, conventional_zeros
from .scan import scan_contributions
from .tidy import inline_reads, tidy
from .zero_proofs import zero_adjoints

__all__ = ["differentiate", "DifferentiationResult", "gradient"]

FDiff = Callable[[Tensor, Tensor, Tensor], Tensor]
Override = Mapping[Tensor, tuple[Sequence[Tensor], Callable[..., Sequence[Tensor]]]]


@dataclass(frozen=True)
class DiffInfo:
    """How a result was made, for ``tex.autodiff.report``: the forward tensors (producers
    first), the zero-elimination steps per edge ``(consumer, input)``, the adjoints proved
    zero (tensor name -> reason) and the places zeroed by convention."""

    output: Tensor
    order: tuple[Tensor, ...]
    steps: dict[tuple[Tensor, Tensor], tuple[str, ...]] = field(default_factory=dict)
    proved_zero: dict[str, str] = field(default_factory=dict)
    zeroed: tuple[ZeroedPath, ...] = ()


class DifferentiationResult(Sequence[Tensor]):
    """The gradients, in the order of ``inputs`` (a list-like), plus ``adjoints``
    (tensor -> adjoint, intermediates included), ``adjoint_summands`` (tensor ->
    {consumer: contribution}) and ``info`` (what was done, for ``tex.autodiff.report``)."""

    def __init__(self, result: list[Tensor], adjoints: dict[Tensor, Tensor],
                 summands: dict[Tensor, dict[Tensor, Tensor]],
                 info: DiffInfo | None = None) -> None:
        self.result = result
        self.adjoints = adjoints
        self.adjoint_summands = summands
        self.info = info

    def __getitem__(self, i: Any) -> Any:
        return self.result[i]

    def __len__(self) -> int:
        return len(self.result)

    def __iter__(self) -> Iterator[Tensor]:
        return iter(self.result)

    def __repr__(self) -> str:
        return f"DifferentiationResult({[t.name for t in self.result]})"


def _check_tensor(t: Any, what: str) -> Tensor:
    if not isinstance(t, Tensor):
        raise TypeError(f"differentiate: {what} must be a tex Tensor, got {type(t).__name__} "
                        f"{t!r}")
    return t


def _deps(t: Tensor, override: Override) -> list[Tensor]:
    if t in override:
        return list(override[t][0])
    op = t.op
    return op.input_tensors


def _topo(output: Tensor, override: Override) -> list[Tensor]:
    """Tensors the output depends on (itself included), producers first.

    A depth-first walk with an explicit stack of (tensor, remaining dependencies); a
    dependency that is still on the stack closes a cycle (possible only through
    ``override`` entries), a ValueError naming the tensors on it."""
    order: list[Tensor] = []
    done: set[Tensor] = set()
    on_path: set[Tensor] = {output}
    stack: list[tuple[Tensor, Iterator[Tensor]]] = [(output, iter(_deps(output, override)))]
    while stack:
        t, rest = stack[-1]
        d = next(rest, None)
        if d is None:
            stack.pop()
            on_path.discard(t)
            done.add(t)
            order.append(t)
        elif d in on_path:
            path = [u for u, _ in stack]
            cycle = [*path[path.index(d):], d]
            raise ValueError("differentiate: override forms a cycle: "
                             + " -> ".join(repr(u.name) for u in cycle)
                             + "; an override's dependencies must be computed before the "
                             "tensor it differentiates (list its actual inputs)")
        elif d not in done:
            on_path.add(d)
            stack.append((d, iter(_deps(d, override))))
    return order


@timed("differentiate")
def differentiate(output: Tensor, inputs: Sequence[Tensor] | Tensor | None = None,
                  head: Tensor | None = None, fdiff: FDiff | None = None,
                  override: Override | None = None, strict: bool = False
                  ) -> DifferentiationResult:
    """Reverse-mode gradients of ``output`` with respect to ``inputs``.

    Parameters
    ----------
    output : Tensor
        A float tensor.
    inputs : list of Tensor, optional
        The tensors to differentiate with respect to (default: every placeholder the
        output depends on). One the output does not depend on gets a zero tensor.
    head : Tensor, optional
        Shape ``prefix + output.shape``; the gradients then have shape ``prefix +
        input.shape`` (a vector-Jacobian product). Default: the identity, giving the full
        Jacobian ``output.shape + input.shape`` (for a scalar output, the gradient).
    fdiff : callable, optional
        ``fdiff(out, inp, head) -> adjoint contribution of inp`` for every edge (default
        ``tex.autodiff.DiffBuildingBlock``).
    override : dict, optional
        ``{tensor: (deps, fn)}``: differentiate ``tensor`` as a function of ``deps`` with
        ``fn(tensor, deps, head) -> [adjoint contribution per dep]``.
    strict : bool
        Raise ``DifferentiationError`` instead of silently zeroing a float path through a
        piecewise-constant op (floor/round, a cast to an integer, a comparison that decides
        a value on its own, an integer tensor computed from floats). ``report`` lists them.

    Returns
    -------
    DifferentiationResult
        List-like of the gradients; ``.adjoints``, ``.adjoint_summands``.

    Raises
    ------
    TypeError
        ``output``, an input, or ``head`` is not a Tensor; ``output`` or ``head`` is not
        a float tensor; an override or fdiff returns an adjoint whose dtype is not the
        head's.
    ValueError
        ``head``'s shape does not end with ``output.shape``; an override or fdiff returns
        the wrong number or shape of adjoints; the overrides form a cycle.
    DifferentiationError
        ``strict=True`` and a float path to an input is zeroed by convention.

    Example
    -------
    >>> dW, dB = tex.differentiate(L, [W, B])
    """
    req = _check_args(output, inputs, head, fdiff, override, strict)
    # a second process finds the result on disk (tex.ir.saved); a user's fdiff or
    # override is Python code whose result the DAG's structure does not decide
    saved = SavedCall.open("differentiate", (output, req.wanted, head, strict), CODECS) \
        if fdiff is None and not req.override else None
    packed = saved.load() if saved is not None else None
    if packed is not None:
        out = _unpack(packed)
    else:
        out = _differentiate(req, strict)
        if saved is not None:
            saved.save(_pack(out))
    if should_dump("differentiate"):
        dump("differentiate", format_program(*out.result))
    return out


# how a result is kept on disk: the IR's nodes and the report's zeroed paths
CODECS: dict[type, Codec] = {**IR_CODECS, ZeroedPath: Codec(("tensor", "what", "kind"),
                                                            ZeroedPath)}


def gradient(output: Tensor, inputs: Sequence[Tensor] | Tensor,
             head: Tensor | None = None) -> list[Tensor]:
    """TVM's ``te.gradient``: the gradients of ``output`` with respect to ``inputs``, as a
    list (``differentiate`` with the default ``fdiff``; ``head`` as there)."""
    return list(differentiate(output, inputs, head))


def _pack(out: DifferentiationResult) -> tuple:
    info = out.info
    assert info is not None
    return (out.result, out.adjoints, out.adjoint_summands, info.output, info.order,
            info.steps, info.proved_zero, info.zeroed)


def _unpack(packed: tuple) -> DifferentiationResult:
    result, adjoints, summands, output, order, steps, proved, zeroed = packed
    return DifferentiationResult(list(result), dict(adjoints), dict(summands),
                                 DiffInfo(output, tuple(order), dict(steps), dict(proved),
                                          tuple(zeroed)))


def _differentiate(req: _Request, strict: bool) -> DifferentiationResult:
    """``differentiate``'s work, on checked arguments."""
    plan = _plan(req)
    if strict:
        _refuse_cut_paths(plan)
    adjoints, summands, created, steps = _adjoint_loop(req, plan)
    # a real zero tensor only for an input the caller asked for that nothing reached
    result = [adjoints[t] if t in adjoints else
              Zero(req.prefix + t.shape, req.head.dtype).materialize(f"{t.name}_grad")
              for t in plan.wanted]
    roots = [*result, *adjoints.values(), *(s for d in summands.values() for s in d.values())]
    new = tidy(roots, keep=result, created={*created, req.head})
    remap = lambda x: new.get(x, x)  # noqa: E731
    info = DiffInfo(req.output, plan.order, steps, {t.name: why for t, why in plan.proved.items()},
                    plan.zeroed)
    return DifferentiationResult(
        [remap(t) for t in result], {k: remap(v) for k, v in adjoints.items()},
        {k: {c: remap(s) for c, s in d.items()} for k, d in summands.items()}, info)


# --------------------------------------------------------------------------------------
# arguments and plan
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Request:
    """The checked arguments of one call (``wanted`` None: every placeholder)."""

    output: Tensor
    wanted: tuple[Tensor, ...] | None
    head: Tensor
    fdiff: FDiff | None
    override: Mapping[Tensor, tuple[Sequence[Tensor], Callable[..., Sequence[Tensor]]]]

    @property
    def prefix(self) -> tuple[int, ...]:
        """The head's leading dimensions (empty for a gradient; ``output.shape`` for a
        Jacobian)."""
        return tuple(self.head.shape[:self.head.ndim - self.output.ndim])


def _check_args(output: Any, inputs: Any, head: Any, fdiff: Any, override: Any,
                strict: Any) -> _Request:
    output = _check_tensor(output, "output")
    if not output.dtype.is_float:
        raise TypeError(f"differentiate: output '{output.name}' has dtype {output.dtype}; "
                        "only float tensors can be differentiated")
    if fdiff is not None and not callable(fdiff):
        raise TypeError(f"differentiate: fdiff must be a callable fdiff(out, inp, head), got "
                        f"{type(fdiff).__name__} {fdiff!r}")
    if not isinstance(strict, bool):
        raise TypeError(f"differentiate: strict must be a bool, got {type(strict).__name__} "
                        f"{strict!r}")
    if override is not None and not isinstance(override, Mapping):
        raise TypeError(f"differentiate: override must be a dict {{tensor: (deps, fn)}}, got "
                        f"{type(override).__name__} {override!r}")
    override = dict(override or {})
    for t, entry in override.items():
        _check_tensor(t, "an override key")
        if not (isinstance(entry, (tuple, list)) and len(entry) == 2 and callable(entry[1])
                and isinstance(entry[0], (tuple, list))):
            raise TypeError(f"differentiate: override of '{t.name}' must be (deps, fn) with "
                            f"deps a list of tensors, got {entry!r}")
        for d in entry[0]:
            _check_tensor(d, f"a dependency in the override of '{t.name}'")
    wanted = None
    if inputs is not None:
        if not isinstance(inputs, (Tensor, Iterable)):
            raise TypeError(f"differentiate: inputs must be a tex Tensor or a list of them, "
                            f"got {type(inputs).__name__} {inputs!r}")
        wanted = (inputs,) if isinstance(inputs, Tensor) else tuple(inputs)
        for i, t in enumerate(wanted):
            _check_tensor(t, f"inputs[{i}]")
    head = _check_tensor(identity_head(output) if head is None else head, "head")
    if not head.dtype.is_float:
        raise TypeError(f"differentiate: head '{head.name}' has dtype {head.dtype}; it must "
                        "be a float tensor")
    nd = output.ndim
    if head.ndim < nd or head.shape[head.ndim - nd:] != output.shape:
        raise ValueError(f"differentiate: head shape {head.shape} must end with the output "
                         f"shape {output.shape} of '{output.name}'")
    return _Request(output, wanted, head, fdiff, override)


@dataclass(frozen=True)
class _Plan:
    """What is differentiated, decided before any adjoint is built."""

    order: tuple[Tensor, ...]  # every tensor the output depends on, producers first
    wanted: tuple[Tensor, ...]  # the inputs whose gradients are returned
    needed: frozenset[Tensor]  # on a path from the output to a wanted input
    zeroed: tuple[ZeroedPath, ...]  # float paths zero by convention (floor, integer casts)
    proved: Mapping[Tensor, str]  # adjoints proved identically zero -> why


def _plan(req: _Request) -> _Plan:
    order = _topo(req.output, req.override)
    wanted = req.wanted if req.wanted is not None else \
        tuple(t for t in order if isinstance(t.op, PlaceholderOp))
    wanted_set = set(wanted)
    needed: set[Tensor] = set()
    for t in order:
        if t in wanted_set or any(d in needed for d in _deps(t, req.override)):
            needed.add(t)
    zeroed = conventional_zeros(order, needed, list(wanted))
    # adjoints proved identically zero (the max-shift of a stable softmax) are not built;
    # an overridden tensor and its declared dependencies are the user's to differentiate
    proved = zero_adjoints(order, req.output, needed, override=req.override) \
        if req.fdiff is None else {}
    overridden = {d for deps, _ in req.override.values() for d in deps}
    proved = {t: why for t, why in proved.items()
              if t not in req.override and t not in overridden}
    return _Plan(tuple(order), tuple(wanted), frozenset(needed), tuple(zeroed), proved)


def _refuse_cut_paths(plan: _Plan) -> None:
    cut = [z for z in plan.zeroed if z.cuts_a_float_path]
    if cut:
        raise DifferentiationError(
            "differentiate(strict=True): a float path to an input is zeroed by "
            "convention at " + "; ".join(str(z) for z in cut) +
            " (use strict=False to accept a zero gradient there, or rewrite the op)")


# --------------------------------------------------------------------------------------
# the adjoint loop
# --------------------------------------------------------------------------------------

Contributions = dict[Tensor, "Tensor | Zero"]
Steps = dict[tuple[Tensor, Tensor], tuple[str, ...]]


def _adjoint_loop(req: _Request, plan: _Plan) -> tuple[
        dict[Tensor, Tensor], dict[Tensor, dict[Tensor, Tensor]], list[Tensor], Steps]:
    """Adjoints in reverse order: each tensor's adjoint is the sum of the contributions
    its consumers sent; then its inputs' contributions are asked of the override, the
    user's fdiff or the building block. Returns the adjoints, the contributions per
    tensor and consumer, the tensors built here (for ``tidy``) and the steps per edge."""
    steps: Steps = {}
    adjoints: dict[Tensor, Tensor] = {}
    summands: dict[Tensor, dict[Tensor, Tensor]] = {}
    created: list[Tensor] = []
    for t in reversed(plan.order):
        if t not in plan.needed:
            continue
        if t is req.output:
            adj = req.head
        else:
            parts = summands.get(t)
            if not parts:
                continue  # every contribution was Zero
            adj = _sum_tensors(list(parts.values()), grad_name(f"{t.name}_grad"))
            if len(parts) > 1:
                created.append(adj)
        adjoints[t] = adj
        deps = [d for d in dict.fromkeys(_deps(t, req.override))
                if d in plan.needed and d not in plan.proved]
        if not t.dtype.is_float or not deps:
            continue
        if isinstance(t.op, ExternOp) and t not in req.override and req.fdiff is None:
            raise DifferentiationError(
                f"differentiate: '{t.name}' is an extern call (te.extern) on the path to "
                f"the inputs; tex cannot see inside it: give its derivative with "
                f"override={{{t.name}: ([{', '.join(d.name for d in t.op.input_tensors)}], "
                "fn)} (fn(out, inputs, head) returns one adjoint per input) or fdiff=")
        contribute = _by_override if t in req.override else \
            _by_user_fdiff if req.fdiff is not None else \
            _by_scan if isinstance(t.op, ScanOp) else _by_building_block
        for d, s in contribute(t, deps, adj, req, plan, steps).items():
            if isinstance(s, Zero):
                continue  # a cut path (floor, an integer cast): nothing to propagate
            summands.setdefault(d, {})[t] = s
            created.append(s)
    return adjoints, summands, created, steps


def _by_override(t: Tensor, deps: list[Tensor], adj: Tensor, req: _Request, plan: _Plan,
                 steps: Steps) -> Contributions:
    """``override[t] = (deps, fn)``: ``fn(t, deps, adj)`` gives one adjoint per dep."""
    odeps, fn = req.override[t]
    got = fn(t, list(odeps), adj)
    if isinstance(got, Tensor) or not isinstance(got, Iterable):
        raise TypeError(f"differentiate: the override of '{t.name}' must return a list "
                        f"of adjoints (one per dependency), got {type(got).__name__}")
    got = list(got)
    if len(got) != len(odeps):
        raise ValueError(f"differentiate: the override of '{t.name}' returned "
                         f"{len(got)} adjoints for {len(odeps)} dependencies")
    results = dict(zip(odeps, got))
    steps.update({(t, d): ("user override",) for d in odeps})
    return {d: _users(t, d, results[d], adj, f"the override of '{t.name}'") for d in deps}


def _by_user_fdiff(t: Tensor, deps: list[Tensor], adj: Tensor, req: _Request, plan: _Plan,
                   steps: Steps) -> Contributions:
    """The user's ``fdiff(t, d, adj)`` per dependency."""
    assert req.fdiff is not None
    steps.update({(t, d): ("user fdiff",) for d in deps})
    return {d: _users(t, d, req.fdiff(t, d, adj), adj, "fdiff") for d in deps}


def _by_scan(t: Tensor, deps: list[Tensor], adj: Tensor, req: _Request, plan: _Plan,
             steps: Steps) -> Contributions:
    """A scan output's contributions: the adjoint recurrence as a backward scan
    (``tex.autodiff.scan``)."""
    got = scan_contributions(t, deps, adj, differentiate)
    steps.update({(t, d): ("reverse-time scan",) for d in deps})
    return {d: got[d] for d in deps}


def _by_building_block(t: Tensor, deps: list[Tensor], adj: Tensor, req: _Request,
                       plan: _Plan, steps: Steps) -> Contributions:
    """The building block with zero elimination, through ``t``'s index-only producers."""
    wanted = set(plan.wanted)
    view, deps = _through_index_only(t, deps, plan.needed, wanted, req.override)
    deps = [d for d in deps if d not in plan.proved]
    vias = [repr(x.name) for x in t.op.input_tensors  # type: ignore[attr-defined]
            if x not in view.op.input_tensors]  # type: ignore[attr-defined]
    through = [f"through index-only {', '.join(vias)} (inlined)"] if vias else []
    results: Contributions = {}
    for d in deps:
        s, fired = building_block(view, d, adj)
        if not isinstance(s, Zero):
            _check_shape(t, d, s, adj, "fdiff")
            s = _remap_reads(s, view, t)
        results[d] = s
        steps[(t, d)] = (*through, *fired)
    return results


def _users(t: Tensor, d: Tensor, s: Any, adj: Tensor, who: str) -> Tensor | Zero:
    """A contribution from user code, checked; a constant-zero tensor counts as Zero."""
    _check_tensor(s, f"{who} result for '{d.name}'")
    _check_shape(t, d, s, adj, who)
    if s.dtype is not adj.dtype:
        # the sum of the adjoints casts every part to the first one's dtype: an
        # integer (or narrower) part would silently truncate the gradient
        raise TypeError(f"differentiate: {who} returned dtype {s.dtype} for the "
                        f"adjoint of '{d.name}' ({d.dtype}); an adjoint must have the "
                        f"dtype of the head of '{t.name}', {adj.dtype} (e.g. "
                        f"astype('{adj.dtype}'))")
    op = s.op
    if isinstance(op, ComputeOp) and isinstance(op.body[s.value_index], Const) and \
            op.body[s.value_index].value == 0:  # type: ignore[attr-defined]
        return Zero(s.shape, s.dtype)
    return s


def _check_shape(t: Tensor, d: Tensor, s: Tensor, adj: Tensor, who: str) -> None:
    want = adj.shape[:len(adj.shape) - t.ndim] + d.shape
    if s.shape != want:
        raise ValueError(f"differentiate: {who} returned shape {s.shape} for the "
                         f"adjoint of '{d.name}', expected {want}")
    if not s.dtype.is_float:
        raise TypeError(f"differentiate: {who} returned dtype {s.dtype} for the "
                        f"adjoint of '{d.name}' ({d.dtype}); an adjoint must have the "
                        f"dtype of the head of '{t.name}', {adj.dtype} (e.g. "
                        f"astype('{adj.dtype}'))")


def _index_only(t: Tensor) -> bool:
    """Whether ``t`` only moves values of one tensor around: pad, reshape, transpose,
    broadcast, flip, casts (an elementwise body whose float nodes are one read, casts,
    constants and selects)."""
    op = t.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1 or len(op.input_tensors) != 1:
        return False
    body = op.body[0]
    if isinstance(body, Reduce) or not body.dtype.is_float:
        return False
    reads = 0
    for node in post_order(body):
        if not node.dtype.is_float:
            continue
        if isinstance(node, TensorRead):
            reads += 1
        elif not isinstance(node, (Select, Cast, Const)):
            return False
    return reads == 1


def _unravels(bodies: Sequence[Expr]) -> bool:
    """Whether ``bodies`` read through ``//`` or ``%`` of an index (reshape, flatten): seen
    through each other, two of them nest one unravelling inside another, which the
    solver reads back one level at a time; apart, each gradient is one exact read, and
    tidying composes them."""
    return any(isinstance(n, Binary) and n.op in (Op.FLOORDIV, Op.FLOORMOD)
               for r in post_order(*bodies) if isinstance(r, TensorRead)
               for ix in r.indices for n in post_order(ix))


def _index_function(t: Tensor) -> bool:
    """An integer tensor computed from its indices alone (``idx[j] = j * 2``): inlined,
    its reads become index arithmetic the equation solver can use (take/gather with
    indices known at compile time)."""
    op = t.op
    return isinstance(op, ComputeOp) and op.num_outputs == 1 and t.dtype.is_integral and \
        not op.input_tensors and not isinstance(op.body[0], Reduce)


def _through_index_only(t: Tensor, deps: list[Tensor], needed: set[Tensor],
                        wanted: set[Tensor], override: Override
                        ) -> tuple[Tensor, list[Tensor]]:
    """``t`` with its index-only producers inlined, and the dependencies of that view.

    Differentiating through a pad or reshape directly (instead of materializing the
    adjoint of the padded tensor) keeps the gradient on the input's own domain: a padded
    convolution's data gradient iterates over the data, not over the padded data."""
    op = t.op
    if not isinstance(op, ComputeOp):
        return t, deps

    def transparent(d: Tensor, unravelling: bool) -> bool:
        if d in wanted or d in override:
            return False
        # one unravelling (reshape, flatten) seen through another would nest them
        return (d in needed and _index_only(d) and not (unravelling and _unravels(d.op.body))) \
            or _index_function(d)

    if not any(transparent(d, _unravels(op.body)) for d in op.input_tensors):
        return t, deps
    bodies = list(op.body)
    for _ in range(64):  # chains of reshapes/transposes; bounded for safety
        changed = False
        for i, b in enumerate(bodies):
            unravelling = _unravels([b])
            nb = inline_reads(b, {d for d in _reads(b) if transparent(d, unravelling)}, {})
            if nb is not b:
                bodies[i] = nb
                changed = True
        if not changed:
            break
    view = ComputeOp(op.name, op.axis, bodies, tag=op.tag, attrs=op.attrs)
    new_deps = [d for d in view.input_tensors if d in needed]
    return view.output(t.value_index), new_deps


def _reads(e: Expr) -> set[Tensor]:
    return {n.tensor for n in post_order(e) if isinstance(n, TensorRead)}


def _remap_reads(s: Tensor, old: Tensor, new: Tensor) -> Tensor:
    """``s`` with reads of the view ``old``'s outputs redirected to ``new``'s op (the
    same values): gradients read the forward tensors the user built."""
    if old is new:
        return s
    table = {o: n for o, n in zip(old.op.outputs, new.op.outputs)}
    memo: dict[Tensor, Tensor] = {}
    order = [op for op in topo_sort_ops([s]) if not isinstance(op, PlaceholderOp)]
    for op in order:
        if op is old.op:
            continue
        deps = op.input_tensors
        if not any(d in table or d in memo for d in deps):
            continue
        if isinstance(op, ExternOp):
            nop: Operation = op.with_inputs([table.get(d) or memo.get(d) or d for d in deps])
            memo.update(zip(op.outputs, nop.outputs))
            continue
        if isinstance(op, ScanOp):
            nop = op.replaced({d: table.get(d) or memo[d] for d in deps
                               if d in table or d in memo})
            memo.update(zip(op.outputs, nop.outputs))
            continue
        def fn(node: Expr) -> Expr | None:
            if isinstance(node, TensorRead):
                tgt = table.get(node.tensor) or memo.get(node.tensor)
                if tgt is not None:
                    return TensorRead(tgt, node.indices)
            return None
        bodies = [rewrite(b, fn) for b in op.body]
        nop = ComputeOp(op.name, op.axis, bodies, tag=op.tag, attrs=op.attrs)
        for a, b in zip(op.outputs, nop.outputs):
            memo[a] = b
    return memo.get(s, s)


def _sum_tensors(parts: list[Tensor], name: str) -> Tensor:
    if len(parts) == 1:
        return parts[0]
    shape, dtype = parts[0].shape, parts[0].dtype

    def body(v: tuple[Expr, ...]) -> Expr:
        acc: Expr | None = None
        for p in parts:
            r = fold.cast(dtype, TensorRead(p, v))
            acc = r if acc is None else fold.binary(Op.ADD, acc, r)
        return acc  # type: ignore[return-value]

    return make_compute(name, shape, body)
