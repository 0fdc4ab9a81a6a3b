"""What ``differentiate`` did, in a table a user can read: ``tex.autodiff.report(result)``.

For every adjoint contribution (an edge ``consumer -> input`` of the forward DAG) the report
gives the iterations of the gradient tensors made for it (``iteration_count`` of the ops
that are neither forward tensors nor the consumer's own adjoint), the forward op's own
iterations, their ratio, and the steps of the zero elimination that fired (solved deltas,
split sums, argsel, scatter form...). Then every place where a gradient was zeroed by
convention rather than by calculus:

* ``floor``/``ceil``/``round``/``trunc`` of a value that depends on an input;
* a float value cast to an integer or bool, or an integer tensor computed from floats
  (``argmax``, a data-dependent index);
* a comparison of such values that decides a result on its own (a step function
  ``select(x > 0, 1, 0)``, a ``where=`` that gates a sum not otherwise depending on ``x``).
  Comparisons that only pick between branches which carry the gradient (``relu``, ``max``,
  ``clip``) are ordinary piecewise derivatives and are not listed;
* inputs the output does not depend on (their gradient is a zero tensor).

``differentiate(..., strict=True)`` raises ``DifferentiationError`` on the first three
instead of zeroing the path (``conventional_zeros`` is the one place that finds them).
"""
from __future__ import annotations

import sys
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TextIO

from ..ir.expr import Cast, Compare, Expr, Op, Reduce, Select, TensorRead, Unary
from ..ir.printer import format_expr
from ..ir.scatter import scatter_form
from ..ir.tensor import ComputeOp, Operation, Tensor
from ..ir.visit import post_order, topo_sort_ops
from .cost import op_iterations
from .derivative import active_nodes

if TYPE_CHECKING:
    from .reverse import DifferentiationResult

__all__ = ["GradientReport", "ReportRow", "ZeroedPath", "conventional_zeros", "report"]

_STEP_OPS = {Op.FLOOR, Op.CEIL, Op.ROUND, Op.TRUNC}


@dataclass(frozen=True)
class ZeroedPath:
    """A place where the gradient of ``tensor`` with respect to an input is zero by
    convention: ``what`` names the construct (``floor(...)``, ``cast to int32``...)."""

    tensor: str
    what: str
    kind: str  # "step", "integer", "comparison" (a float path cut: strict raises),
    # "unreachable", "integer input" (nothing to cut)

    @property
    def cuts_a_float_path(self) -> bool:
        return self.kind in ("step", "integer", "comparison")

    def __str__(self) -> str:
        return f"'{self.tensor}': {self.what}"


@dataclass(frozen=True)
class ReportRow:
    """One adjoint contribution ``input <- consumer``."""

    input: str
    consumer: str
    iterations: int
    forward: int
    steps: tuple[str, ...]

    @property
    def ratio(self) -> float:
        return self.iterations / self.forward if self.forward else float("inf")


@dataclass
class GradientReport:
    """The cost report of a ``differentiate`` result (``str()`` is the printed table)."""

    output: str
    rows: list[ReportRow] = field(default_factory=list)
    proved_zero: dict[str, str] = field(default_factory=dict)
    zeroed: list[ZeroedPath] = field(default_factory=list)
    gradient_iterations: int = 0
    forward_iterations: int = 0
    backward_iterations: int = 0  # the gradients' own: the forward's tensors on a tape
    reference: int | None = None  # a hand-written backward's, when given

    @property
    def reference_ratio(self) -> float | None:
        """``backward_iterations / reference``, or None without a reference."""
        if self.reference is None:
            return None
        return self.backward_iterations / self.reference if self.reference else float("inf")

    def __str__(self) -> str:
        lines = [f"gradient report for '{self.output}'"]
        w = max([len(f"{r.input} <- {r.consumer}") for r in self.rows] + [20])
        lines.append(f"  {'adjoint':<{w}}  {'iterations':>10}  {'forward':>9}  {'ratio':>6}"
                     "  steps")
        for r in self.rows:
            ratio = f"{r.ratio:6.2f}" if r.forward else "     -"
            lines.append(f"  {r.input + ' <- ' + r.consumer:<{w}}  {r.iterations:>10}  "
                         f"{r.forward:>9}  {ratio}  {'; '.join(r.steps) or '-'}")
        total = self.gradient_iterations / self.forward_iterations \
            if self.forward_iterations else float("inf")
        lines.append(f"  gradients: {self.gradient_iterations} iterations (forward tensors "
                     f"they recompute included), forward: {self.forward_iterations} "
                     f"({total:.2f}x)")
        backward = f"  backward, the forward's tensors on a tape: {self.backward_iterations}"
        if self.reference is not None:
            backward += (f"; hand-written reference: {self.reference} "
                         f"({self.reference_ratio:.2f}x)")
        lines.append(backward)
        if self.proved_zero:
            lines.append("  adjoints proved zero (not computed):")
            lines.extend(f"    '{t}': {why}" for t, why in self.proved_zero.items())
        if self.zeroed:
            lines.append("  zeroed by convention:")
            lines.extend(f"    {z}" for z in self.zeroed)
        else:
            lines.append("  zeroed by convention: none")
        return "\n".join(lines)


# --------------------------------------------------------------------------------------
# conventional zeros
# --------------------------------------------------------------------------------------

def _short(e: Expr) -> str:
    text = format_expr(e)
    return text if len(text) <= 60 else text[:57] + "..."


def _body_zeros(t: Tensor, live: set[Tensor]) -> list[ZeroedPath]:
    op: ComputeOp = t.op  # type: ignore[assignment]
    # float nodes through which a read of a live input flows (the derivative's own notion)
    dep = {n: True for b in op.body for n in active_nodes(
        b, lambda e: isinstance(e, TensorRead) and e.tensor in live)}
    found: list[ZeroedPath] = []
    # comparisons whose select/where carries the gradient anyway: one walk over all the
    # gating conditions (one walk per select was quadratic in nested selects)
    gates: list[Expr] = []
    for b in op.body:
        for n in post_order(b):
            if isinstance(n, Select) and (dep.get(n.a) or dep.get(n.b)):
                gates.append(n.cond)
            if isinstance(n, Reduce) and any(dep.get(s) for s in n.source):
                gates.append(n.condition)
    gated: set[Expr] = {c for c in post_order(*gates) if isinstance(c, Compare)}
    seen: set[str] = set()
    for b in op.body:
        for n in post_order(b):
            z: ZeroedPath | None = None
            if isinstance(n, Unary) and n.op in _STEP_OPS and dep.get(n.a):
                z = ZeroedPath(t.name, f"{_short(n)} (derivative 0)", "step")
            elif isinstance(n, Cast) and not n.dtype.is_float and n.a.dtype.is_float \
                    and dep.get(n.a):
                z = ZeroedPath(t.name, f"{_short(n)}: a float cast to {n.dtype}", "integer")
            elif isinstance(n, Compare) and n.a.dtype.is_float and \
                    (dep.get(n.a) or dep.get(n.b)) and n not in gated:
                z = ZeroedPath(t.name, f"{_short(n)}: a comparison that decides the value "
                               "on its own", "comparison")
            if z is not None and z.what not in seen:
                seen.add(z.what)
                found.append(z)
    return found


def conventional_zeros(order: Sequence[Tensor], needed: set[Tensor],
                       wanted: Iterable[Tensor]) -> list[ZeroedPath]:
    """The places of the forward DAG where a gradient is zero by convention (module
    docstring), in producer-first order, then the wanted inputs the output does not
    depend on. ``order``: the tensors the output depends on, producers first; ``needed``:
    those on a path from the output to a wanted input."""
    found: list[ZeroedPath] = []
    for t in order:
        if t not in needed or not isinstance(t.op, ComputeOp):
            continue
        live = {d for d in t.op.input_tensors if d in needed}
        if not live:
            continue
        if not t.dtype.is_float:
            if any(d.dtype.is_float for d in live):
                found.append(ZeroedPath(t.name, f"integer tensor ({t.dtype}) computed from "
                                        f"{', '.join(repr(d.name) for d in live)}", "integer"))
            continue
        found.extend(_body_zeros(t, live))
    present = set(order)
    for w in wanted:
        if w not in present:
            found.append(ZeroedPath(w.name, "the output does not depend on it: its gradient "
                                    "is a zero tensor", "unreachable"))
        elif not w.dtype.is_float:
            found.append(ZeroedPath(w.name, f"an integer input ({w.dtype}): no gradient",
                                    "integer input"))
    return found


# --------------------------------------------------------------------------------------
# the report
# --------------------------------------------------------------------------------------

def _op_points(op: Operation) -> int:
    return op_iterations(op) if isinstance(op, ComputeOp) else 0


def _ops(tensors: Iterable[Tensor]) -> set[Operation]:
    return set(topo_sort_ops(list(tensors)))


def report(result: DifferentiationResult, file: TextIO | None = sys.stdout,
           reference: int | None = None) -> GradientReport:
    """Print (to ``file``; None: do not print) and return the cost report of a
    ``differentiate`` result: per adjoint contribution its iterations, the forward op's,
    their ratio and the zero-elimination steps that fired; the backward's iterations (the
    forward's tensors on a tape) and, given a hand-written ``reference`` count, their ratio
    to it; adjoints proved zero; every place a gradient was zeroed by convention (module
    docstring).

    ``reference``: e.g. ``tex.topi.gradient_cost.handwritten_gradient_iterations(op,
    *args)`` for a topi op differentiated with respect to all its float tensor arguments.

    Example
    -------
    >>> res = tex.differentiate(loss, [W, B])
    >>> tex.autodiff.report(res)        # doctest: +SKIP
    """
    from .reverse import DifferentiationResult
    if not isinstance(result, DifferentiationResult):
        raise TypeError(f"report: expected the result of tex.differentiate, got "
                        f"{type(result).__name__} {result!r}")
    info: Any = result.info
    forward = _ops([info.output])
    rep = GradientReport(info.output.name, proved_zero=dict(info.proved_zero),
                         zeroed=list(info.zeroed))
    for c in reversed(info.order):
        adj_c = result.adjoints.get(c)
        base = forward | (_ops([adj_c]) if adj_c is not None else set())
        for d, parts in result.adjoint_summands.items():
            s = parts.get(c)
            if s is None:
                continue
            own = _ops([s]) - base
            steps = list(info.steps.get((c, d), ()))
            for op in sorted(own, key=lambda o: o.name):
                if isinstance(op, ComputeOp) and scatter_form(op) is not None:
                    steps.append(f"'{op.name}' lowered as a scatter over its indices")
            rep.rows.append(ReportRow(d.name, c.name, sum(_op_points(o) for o in own),
                                      _op_points(c.op), tuple(steps)))
    gradient_ops = _ops(result.result)
    rep.gradient_iterations = sum(_op_points(o) for o in gradient_ops)
    rep.forward_iterations = sum(_op_points(o) for o in forward)
    rep.backward_iterations = sum(_op_points(o) for o in gradient_ops - forward)
    if reference is not None:
        if isinstance(reference, bool) or not isinstance(reference, int) or reference < 0:
            raise TypeError(f"report: reference must be a non-negative int (iterations), "
                            f"got {type(reference).__name__} {reference!r}")
        rep.reference = reference
    if file is not None:
        print(rep, file=file)
    return rep
