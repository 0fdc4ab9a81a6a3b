"""``te.scan``: recurrences over time (TVM's ``te.scan``).

``scan(init, update, state_placeholder)`` makes a ``ScanOp``. Each state is a placeholder of
the output's shape ``(T, ...)``; ``init`` gives its first rows, ``update`` (computed from
the state at earlier rows and any other tensors) every later row::

    X = te.placeholder((m, n))
    s_state = te.placeholder((m, n))
    s_init = te.compute((1, n), lambda _, i: X[0, i])
    s_update = te.compute((m, n), lambda t, i: s_state[t - 1, i] + X[t, i])
    s_scan = te.scan(s_init, s_update, s_state)          # cumulative sums of X's rows

The operations between the states and the updates (the body) run once per step, each
computing its row ``t``; everything else they read is computed before. Checked here, so a
recurrence never reads what is not computed yet: a body operation reads a state only at
rows provably before its own (``t - 1``, ``t - 2``...), another body operation only at
its own row ``t``, and the inits read no state.
"""
from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from ..arith import can_prove
from ..ir.expr import IterVar, Range, TensorRead, Var
from ..ir.tensor import ComputeOp, Operation, PlaceholderOp, ScanOp, Tensor
from ..ir.visit import post_order, topo_sort_ops

__all__ = ["scan", "scan_body"]


def _as_list(value: Any, what: str, name: str) -> list[Tensor]:
    items = list(value) if isinstance(value, (list, tuple)) else [value]
    for k, t in enumerate(items):
        if not isinstance(t, Tensor):
            raise TypeError(f"scan '{name}': {what} {k} must be a Tensor, got "
                            f"{type(t).__name__} {t!r}")
    return items


def scan_body(update: Sequence[Tensor], states: Sequence[Tensor]) -> list[Operation]:
    """The operations the updates depend on that depend on a state (producers first)."""
    state_ops = {s.op for s in states}
    inside: set[Operation] = set()
    body: list[Operation] = []
    for op in topo_sort_ops(list(update)):
        if op in state_ops:
            continue
        if any(t.op in state_ops or t.op in inside for t in op.input_tensors):
            inside.add(op)
            body.append(op)
    return body


def scan(init: Any, update: Any, state_placeholder: Any, inputs: Any = None,
         name: str = "scan", tag: str = "", attrs: Mapping[str, Any] | None = None) -> Any:
    """The recurrence of ``update`` over the first axis, started from ``init`` (module
    docstring); lists for several states. Returns the output tensor (a list for several),
    each of its state's shape and dtype.

    ``inputs`` (TVM's hint of the tensors the body reads) is checked to be tensors and
    otherwise not needed. Raises ``TypeError``/``ValueError`` naming the state, tensor or
    read at fault."""
    if not isinstance(name, str) or not name:
        raise TypeError(f"scan: name must be a non-empty string, got {name!r}")
    inits = _as_list(init, "init", name)
    updates = _as_list(update, "update", name)
    states = _as_list(state_placeholder, "state_placeholder", name)
    hints = _as_list(inputs, "input", name) if inputs is not None else []
    if not (len(inits) == len(updates) == len(states)):
        raise ValueError(f"scan '{name}': {len(inits)} inits, {len(updates)} updates and "
                         f"{len(states)} states; give one of each per state")
    if len({s.op for s in states}) != len(states):
        raise ValueError(f"scan '{name}': a state placeholder is given twice")
    steps = None
    init_len = None
    for k, (i, u, s) in enumerate(zip(inits, updates, states)):
        where = f"scan '{name}', state {k} ('{s.name}')"
        if not isinstance(s.op, PlaceholderOp):
            raise TypeError(f"{where}: the state must be a placeholder (te.placeholder of the "
                            f"output's shape), got the computed tensor '{s.name}'")
        if not s.shape:
            raise ValueError(f"{where}: a state needs a time axis (shape (T, ...))")
        if u.shape != s.shape or u.dtype != s.dtype:
            raise ValueError(f"{where}: the update '{u.name}' is {u.dtype}{list(u.shape)}, the "
                             f"state {s.dtype}{list(s.shape)}; they must agree")
        if i.ndim != s.ndim or i.shape[1:] != s.shape[1:] or i.dtype != s.dtype:
            raise ValueError(f"{where}: the init '{i.name}' is {i.dtype}{list(i.shape)}; it "
                             f"must be {s.dtype}[rows, {', '.join(map(str, s.shape[1:]))}]"
                             .replace("[rows, ]", "[rows]"))
        if steps is None:
            steps, init_len = s.shape[0], i.shape[0]
        elif s.shape[0] != steps or i.shape[0] != init_len:
            raise ValueError(f"{where}: {s.shape[0]} steps from {i.shape[0]} initial rows; "
                             f"state 0 has {steps} from {init_len}")
    assert steps is not None and init_len is not None
    if not isinstance(init_len, int) or init_len < 1 or \
            isinstance(steps, int) and init_len > steps:
        raise ValueError(f"scan '{name}': the inits have {init_len} rows for {steps} steps; "
                         "give at least one and at most all")
    state_ops = {s.op for s in states}
    for i in inits:
        if any(op in state_ops for op in topo_sort_ops([i])):
            raise ValueError(f"scan '{name}': the init '{i.name}' depends on a state "
                             "placeholder; an init is computed before the first step")
    body = scan_body(updates, states)
    for op in body:
        _check_body_op(op, name, steps, init_len, state_ops, set(body))
    axis = IterVar(Var(f"{name}.idx"), Range(init_len, steps - init_len))
    op = ScanOp(name, axis, inits, updates, states, hints, body, tag, dict(attrs or {}))
    return op.output(0) if len(states) == 1 else list(op.outputs)


def _check_body_op(op: Operation, name: str, steps: int, init_len: int,
                   state_ops: set[Operation], body: set[Operation]) -> None:
    """A body operation computes row ``t`` at step ``t``: a compute whose first axis is
    time, reading states at earlier rows and other body operations at row ``t``."""
    where = f"scan '{name}': '{op.name}' (computed at each step)"
    if not isinstance(op, ComputeOp):
        raise TypeError(f"{where} must be a te.compute, got {type(op).__name__}")
    if not op.axis or op.axis[0].dom.extent != steps:
        raise ValueError(f"{where} has shape {op.shape}; its first axis must be the time "
                         f"axis, of the {steps} steps")
    t = op.axis[0].var
    dom = {iv.var: iv.dom for iv in (*op.axis, *op.reduce_axis)}
    dom[t] = Range(init_len, steps - init_len)
    for node in post_order(*op.body):
        if not isinstance(node, TensorRead):
            continue
        src = node.tensor.op
        if src in state_ops:
            row = node.indices[0]
            if not can_prove(row <= t - 1, dom):
                raise ValueError(f"{where} reads the state '{node.tensor.name}' at row {row}, "
                                 f"not provably before its own row {t.name}; a step reads "
                                 f"the state at earlier rows only ({t.name} - 1, ...)")
        elif src in body:
            row = node.indices[0]
            if not can_prove(row == t, dom):
                raise ValueError(f"{where} reads '{node.tensor.name}' at row {row}; at each "
                                 f"step the body reads its own row {t.name} of what the step "
                                 "computes (earlier rows of a recurrence live in the state)")
