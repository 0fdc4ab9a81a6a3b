"""Reverse-mode differentiation of a tensor DAG: ``tex.differentiate``.

Adjoints are accumulated in reverse topological order (an explicit stack, no recursion):
the adjoint of the output is the head; every other tensor's adjoint is the sum of the
contributions (*summands*) its consumers send it, each made by ``fdiff(consumer, tensor,
adjoint of consumer)`` (``DiffBuildingBlock`` by default) or by an ``override``. Only
tensors on a path from the output to a requested input are differentiated.

Afterwards the gradient program is tidied: elementwise gradient tensors that only forward
a value (a read, a gated read, a sum of such) and those consumed by a single elementwise
gradient tensor are inlined into their consumers, so the program holds the tensors a
hand-written gradient would (forward tensors are never touched).
"""
from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from ..debug import dump, should_dump
from ..ir import fold
from ..ir.expr import Cast, Const, Expr, Op, Reduce, Select, TensorRead
from ..ir.printer import format_program
from ..ir.tensor import ComputeOp, PlaceholderOp, Tensor
from ..ir.verify import check_compute_body
from ..ir.visit import post_order, rewrite, substitute, topo_sort_ops
from .derivative import DifferentiationError
from .report import ZeroedPath, conventional_zeros
from .vjp import (
    _ident,
    _is_cheap,
    building_block,
    identity_head,
    make_compute,
    new_axes,
    zero_tensor,
)
from .zeros import zero_adjoints

__all__ = ["differentiate", "DifferentiationResult"]

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
    return op.input_tensors if isinstance(op, ComputeOp) else []


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
    order = _topo(output, override)
    if inputs is None:
        wanted = [t for t in order if isinstance(t.op, PlaceholderOp)]
        single = False
    else:
        single = isinstance(inputs, Tensor)
        if not single and not isinstance(inputs, Iterable):
            raise TypeError(f"differentiate: inputs must be a tex Tensor or a list of them, "
                            f"got {type(inputs).__name__} {inputs!r}")
        wanted = [inputs] if single else list(inputs)  # type: ignore[list-item]
        for i, t in enumerate(wanted):
            _check_tensor(t, f"inputs[{i}]")
    if head is None:
        head = identity_head(output)
    head = _check_tensor(head, "head")
    if not head.dtype.is_float:
        raise TypeError(f"differentiate: head '{head.name}' has dtype {head.dtype}; it must "
                        "be a float tensor")
    nd = output.ndim
    if head.ndim < nd or head.shape[head.ndim - nd:] != output.shape:
        raise ValueError(f"differentiate: head shape {head.shape} must end with the output "
                         f"shape {output.shape} of '{output.name}'")
    prefix = head.shape[:head.ndim - nd]
    user_fdiff = fdiff

    # tensors on a path from the output to a wanted input
    wanted_set = set(wanted)
    needed: set[Tensor] = set()
    for t in order:
        if t in wanted_set or any(d in needed for d in _deps(t, override)):
            needed.add(t)

    zeroed = conventional_zeros(order, needed, wanted)
    if strict:
        cut = [z for z in zeroed if z.cuts_a_float_path]
        if cut:
            raise DifferentiationError(
                "differentiate(strict=True): a float path to an input is zeroed by "
                "convention at " + "; ".join(str(z) for z in cut) +
                " (use strict=False to accept a zero gradient there, or rewrite the op)")
    # adjoints proved identically zero (the max-shift of a stable softmax) are not built
    proved = zero_adjoints(order, output, needed, override=override) \
        if user_fdiff is None else {}
    proved = {t: why for t, why in proved.items()
              if t not in override and not any(t in deps for deps, _ in override.values())}
    steps: dict[tuple[Tensor, Tensor], tuple[str, ...]] = {}
    adjoints: dict[Tensor, Tensor] = {}
    summands: dict[Tensor, dict[Tensor, Tensor]] = {}
    created: list[Tensor] = []
    for t in reversed(order):
        if t not in needed:
            continue
        if t is output:
            adj = head
        else:
            parts = summands.get(t)
            if not parts:
                continue
            adj = _sum_tensors(list(parts.values()), _ident(f"{t.name}_grad"))
            if len(parts) > 1:
                created.append(adj)
        adjoints[t] = adj
        if not t.dtype.is_float:
            continue
        deps = [d for d in dict.fromkeys(_deps(t, override)) if d in needed and d not in proved]
        if not deps:
            continue
        if t in override:
            odeps, fn = override[t]
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
        elif user_fdiff is None:
            view, deps = _through_index_only(t, deps, needed, wanted_set, override)
            deps = [d for d in deps if d not in proved]
            vias = [repr(x.name) for x in t.op.input_tensors  # type: ignore[attr-defined]
                    if x not in view.op.input_tensors]  # type: ignore[attr-defined]
            through = [f"through index-only {', '.join(vias)} (inlined)"] if vias else []
            results = {}
            for d in deps:
                s, fired = building_block(view, d, adj)
                results[d] = _remap_reads(s, view, t)
                steps[(t, d)] = (*through, *fired)
        else:
            results = {d: user_fdiff(t, d, adj) for d in deps}
            steps.update({(t, d): ("user fdiff",) for d in deps})
        for d in deps:
            s = results[d]
            who = f"the override of '{t.name}'" if t in override else "fdiff"
            _check_tensor(s, f"{who} result for '{d.name}'")
            want = adj.shape[:len(adj.shape) - t.ndim] + d.shape
            if s.shape != want:
                raise ValueError(f"differentiate: {who} returned shape {s.shape} for the "
                                 f"adjoint of '{d.name}', expected {want}")
            user = t in override or user_fdiff is not None
            if not s.dtype.is_float or (user and s.dtype is not adj.dtype):
                # the sum of the adjoints casts every part to the first one's dtype: an
                # integer (or narrower) part would silently truncate the gradient
                raise TypeError(f"differentiate: {who} returned dtype {s.dtype} for the "
                                f"adjoint of '{d.name}' ({d.dtype}); an adjoint must have the "
                                f"dtype of the head of '{t.name}', {adj.dtype} (e.g. "
                                f"astype('{adj.dtype}'))")
            if _is_zeros(s):  # a cut path (floor, an integer cast): nothing to propagate
                continue
            summands.setdefault(d, {})[t] = s
            created.append(s)

    result = []
    for t in wanted:
        a = adjoints.get(t)
        if a is None:
            a = zero_tensor(prefix + t.shape, head.dtype, f"{t.name}_grad")
        result.append(a)
    info = DiffInfo(output, tuple(order), steps,
                    {t.name: why for t, why in proved.items()}, tuple(zeroed))
    out = tidy(result, adjoints, summands, set(created) | {head}, info)
    if should_dump("differentiate"):
        dump("differentiate", format_program(*out.result))
    return out


def _is_zeros(t: Tensor) -> bool:
    """Whether ``t`` is a zero tensor made by the building block (tag ``zeros``)."""
    op = t.op
    return isinstance(op, ComputeOp) and op.tag == "zeros" and \
        isinstance(op.body[0], Const) and op.body[0].value == 0


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

    def transparent(d: Tensor) -> bool:
        if d in wanted or d in override:
            return False
        return (d in needed and _index_only(d)) or _index_function(d)

    if not any(transparent(d) for d in op.input_tensors):
        return t, deps
    bodies = list(op.body)
    for _ in range(64):  # chains of reshapes/transposes; bounded for safety
        changed = False
        for i, b in enumerate(bodies):
            nb = _inline_reads(b, {d for d in _reads(b) if transparent(d)}, {})
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
    order = [op for op in topo_sort_ops([s]) if isinstance(op, ComputeOp)]
    for op in order:
        if op is old.op:
            continue
        deps = op.input_tensors
        if not any(d in table or d in memo for d in deps):
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


# --------------------------------------------------------------------------------------
# tidying: inline forwarding and single-use elementwise gradient tensors
# --------------------------------------------------------------------------------------

def _elementwise(t: Tensor) -> bool:
    op = t.op
    return isinstance(op, ComputeOp) and op.num_outputs == 1 and \
        not isinstance(op.body[0], Reduce)


def tidy(result: list[Tensor], adjoints: dict[Tensor, Tensor],
          summands: dict[Tensor, dict[Tensor, Tensor]],
          created: set[Tensor], info: DiffInfo | None = None) -> DifferentiationResult:
    """Inline gradient tensors that are cheap or used once by an elementwise gradient
    tensor; rebuild the gradient ops (only those ``created`` here) over the survivors."""
    roots = list(dict.fromkeys([*result, *adjoints.values(),
                                *(s for d in summands.values() for s in d.values())]))
    # gradient ops reachable from the roots, producers first
    order: list[Tensor] = []
    seen: set[Tensor] = set()
    stack: list[tuple[Tensor, bool]] = [(t, False) for t in reversed(roots)]
    while stack:
        t, expanded = stack.pop()
        if expanded:
            order.append(t)
            continue
        if t in seen or t not in created:
            continue
        seen.add(t)
        stack.append((t, True))
        for d in reversed(t.op.input_tensors):
            if d in created and d not in seen:
                stack.append((d, False))
    users: dict[Tensor, list[Tensor]] = {}
    for t in order:
        for d in t.op.input_tensors:
            users.setdefault(d, []).append(t)
    keep = set(result)
    inline: set[Tensor] = set()
    for t in order:
        if t in keep or not _elementwise(t):
            continue
        us = users.get(t, [])
        if _is_cheap(t) or (len(us) == 1 and _elementwise(us[0])):
            inline.add(t)
    # an inlined tensor is rebuilt only when the result names it (a root); its readers
    # expand its original body, so a chain of n inlined tensors costs O(n), not O(n^2)
    roots_set = set(roots)
    new: dict[Tensor, Tensor] = {}
    rebuilt: dict[ComputeOp, ComputeOp] = {}  # one new op for all outputs of a tuple op
    memo: dict[Expr, Expr] = {}
    for t in order:
        op: ComputeOp = t.op  # type: ignore[assignment]
        if t in inline and t not in roots_set:
            continue
        if not any(d in inline or d in new for d in op.input_tensors):
            new[t] = t
            continue
        if op not in rebuilt:
            rebuilt[op] = _rebuild(op, [_inline_reads(b, inline, new, memo) for b in op.body])
        new[t] = rebuilt[op].output(t.value_index)
    remap = lambda x: new.get(x, x)  # noqa: E731
    return DifferentiationResult(
        [remap(t) for t in result],
        {k: remap(v) for k, v in adjoints.items()},
        {k: {c: remap(s) for c, s in d.items()} for k, d in summands.items()}, info)


def _inline_reads(body: Expr, inline: set[Tensor], new: dict[Tensor, Tensor],
                  memo: dict[Expr, Expr] | None = None) -> Expr:
    """``body`` with every read of an ``inline`` tensor replaced by that tensor's original
    body at the read's indices (expanded in turn, with an explicit stack) and every read of
    a rebuilt tensor redirected to its new version. ``memo`` (node -> expanded node) is
    shared by all calls of one tidy: an expansion depends only on the node."""
    memo = {} if memo is None else memo
    if body in memo:
        return memo[body]
    # (node, state, instance): 0 visit the children, 1 rebuild the node, 2 the node is a
    # read of an inlined tensor whose instance has been expanded
    stack: list[tuple[Expr, int, Expr | None]] = [(body, 0, None)]
    while stack:
        node, state, instance = stack.pop()
        if state == 2:
            memo[node] = memo[instance]  # type: ignore[index]
            continue
        if node in memo:
            continue
        if state == 0:
            stack.append((node, 1, None))
            stack.extend((c, 0, None) for c in reversed(node.children()) if c not in memo)
            continue
        kids = node.children()
        out = node.with_children([memo[k] for k in kids]) if kids else node
        if isinstance(out, TensorRead):
            t = out.tensor
            if t in inline:
                op: ComputeOp = t.op  # type: ignore[assignment]
                m = {iv.var: ix for iv, ix in zip(op.axis, out.indices) if iv.var is not ix}
                inst = substitute(op.body[0], m)
                if inst in memo:
                    memo[node] = memo[inst]
                else:
                    stack.append((node, 2, inst))
                    stack.append((inst, 0, None))
                continue
            if new.get(t, t) is not t:
                out = TensorRead(new[t], out.indices)
        memo[node] = out
    return memo[body]


def _rebuild(op: ComputeOp, bodies: list[Expr]) -> ComputeOp:
    """``op`` with new bodies (``op`` itself when none changed), on fresh axes (IterVars
    belong to one op); every output of a tuple op is rebuilt together."""
    if all(b is o for b, o in zip(bodies, op.body)):
        return op
    axis = new_axes([iv.var.name for iv in op.axis], [iv.dom.extent for iv in op.axis])
    m = {old.var: new.var for old, new in zip(op.axis, axis)}
    bodies = [substitute(b, m) for b in bodies]
    check_compute_body(op.name, axis, bodies)
    return ComputeOp(op.name, axis, bodies, tag=op.tag)
