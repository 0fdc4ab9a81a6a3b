"""Forward and backward as two compiled programs joined by a tape: ``grad_program``.

    prog = tex.autodiff.grad_program(L, wrt=[W, B], tapes="auto")
    print(prog.plan)                          # what is saved, what is recomputed
    out, tape = prog.forward({X: x, W: w, B: b})
    dW, dB = prog.backward(tape)              # head = ones; backward(tape, head=h)

The gradient is ``tex.differentiate(L, wrt, head)`` with ``head`` a placeholder of the
loss's shape. It reads forward intermediates (softmax's maximum and sum, a layer norm's
statistics, a matmul's output...). Each one the backward reads is either *saved* (the
forward program also outputs it, and the backward reads it from the tape) or *recomputed*
(it stays a compute in the backward program, which then reads its own inputs: saved
tensors, other recomputed ones, placeholders). Deciding walks the forward DAG consumers
first, from the tensors the gradient reads:

    needed = forward tensors read by the gradient's own tensors
    for t in needed, consumers before producers:
        saved(t)? -> a placeholder of the backward program, its producers not needed for it
        else      -> recomputed; its compute inputs become needed

So a tensor whose consumers are all saved is not needed at all ("unused" in the plan).
The backward program is the gradient DAG with every saved tensor replaced by a new
placeholder of its shape, dtype and (tape) name, and every operation above one rebuilt to
read it (``_rewrite``).

The tape is a dict ``name -> ndarray``: the saved intermediates (fresh arrays written by
the forward) and the placeholders the backward program reads (the caller's arrays fed to
``forward``, by reference, not copied: do not modify them in place before calling
``backward``). ``GradProgram.plan`` lists both; ``backward(tape)`` needs nothing else.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from .arith.extent import as_extent, at_hint, extent_value
from .autodiff import differentiate, iteration_count
from .autodiff.cost import op_iterations
from .build import build
from .ir.expr import Expr, TensorRead
from .ir.feed import resolve_feed
from .ir.tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor
from .ir.visit import placeholders_of, rewrite, topo_sort_ops
from .te import compute, placeholder
from .te.specialize import bind_shape_vars

__all__ = ["AUTO_SAVE_RATIO", "GradProgram", "Plan", "PlanRow", "TAPES", "grad_program"]

TAPES = ("auto", "none", "all")

# "auto" saves a tensor whose operation iterates over more than this many points per output
# element (a reduction over more than one point: a max, a sum, a matmul, a convolution).
AUTO_SAVE_RATIO = 1

SAVED, RECOMPUTED, UNUSED = "saved", "recomputed", "unused"


# --------------------------------------------------------------------------------------
# the plan
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class PlanRow:
    """One forward intermediate the gradient depends on.

    ``status``: ``"saved"`` (in the tape), ``"recomputed"`` (a compute of the backward
    program) or ``"unused"`` (the backward does not read it: every consumer that would
    need it is saved). ``iterations``: its operation's own points (output points x
    reduction points), what recomputing it costs once its inputs are there;
    ``iterations_from_inputs``: ``tex.autodiff.iteration_count`` of it (from the
    placeholders). ``read_by_backward``: False for a tensor saved on request that the
    backward program does not read.
    """

    name: str
    key: str
    shape: tuple[int, ...]
    dtype: str
    status: str
    nbytes: int
    iterations: int
    iterations_from_inputs: int
    read_by_backward: bool = True

    @property
    def per_element(self) -> float:
        """Iterations of its operation per output element (1 for elementwise)."""
        size = math.prod(at_hint(d) for d in self.shape) if self.shape else 1
        return at_hint(self.iterations) / size  # (symbolic: at the default hint)


@dataclass(frozen=True)
class InputRow:
    """A placeholder the backward program reads, carried in the tape by reference."""

    name: str
    key: str
    shape: tuple[int, ...]
    dtype: str
    nbytes: int


@dataclass(frozen=True)
class Plan:
    """What ``grad_program`` saves and recomputes; ``str(plan)`` is a table.

    Fields: ``tapes`` (the policy as given: ``"auto"``, ``"none"``, ``"all"`` or
    ``"list"``), ``rows`` (``PlanRow`` per forward intermediate, producers first),
    ``inputs`` (``InputRow`` per placeholder the backward reads), ``saved`` and
    ``recomputed`` (tape keys / names), ``tape_keys`` (every key of the tape: saved, then
    inputs), ``tape_bytes`` (the saved intermediates), ``input_bytes`` (the inputs carried
    by reference), ``forward_iterations`` (the loss and the saved tensors) and
    ``backward_iterations`` (the backward program: the gradient's own tensors and the
    recomputed ones), ``recompute_iterations`` (the part of it spent recomputing forward
    operations).
    """

    loss: str
    wrt: tuple[str, ...]
    tapes: str
    rows: tuple[PlanRow, ...]
    inputs: tuple[InputRow, ...]
    forward_iterations: int
    backward_iterations: int
    recompute_iterations: int

    @property
    def saved(self) -> list[str]:
        return [r.key for r in self.rows if r.status == SAVED]

    @property
    def recomputed(self) -> list[str]:
        return [r.name for r in self.rows if r.status == RECOMPUTED]

    @property
    def tape_keys(self) -> list[str]:
        return self.saved + [r.key for r in self.inputs]

    @property
    def tape_bytes(self) -> int:
        return sum(r.nbytes for r in self.rows if r.status == SAVED)

    @property
    def input_bytes(self) -> int:
        return sum(r.nbytes for r in self.inputs)

    def row(self, name: str) -> PlanRow:
        """The row of the intermediate with this name or tape key."""
        for r in self.rows:
            if name in (r.key, r.name):
                return r
        raise KeyError(f"plan: no intermediate named {name!r}; rows: "
                       f"{', '.join(r.key for r in self.rows) or '(none)'}")

    def as_dict(self) -> dict[str, Any]:
        """The plan as JSON-friendly data."""
        return {
            "loss": self.loss, "wrt": list(self.wrt), "tapes": self.tapes,
            "rows": [{k: _json(v) for k, v in r.__dict__.items()} for r in self.rows],
            "inputs": [{k: _json(v) for k, v in r.__dict__.items()} for r in self.inputs],
            "saved": self.saved, "recomputed": self.recomputed, "tape_keys": self.tape_keys,
            "tape_bytes": _json(self.tape_bytes), "input_bytes": _json(self.input_bytes),
            "forward_iterations": _json(self.forward_iterations),
            "backward_iterations": _json(self.backward_iterations),
            "recompute_iterations": _json(self.recompute_iterations),
        }

    def __str__(self) -> str:
        head = ("tensor", "shape", "dtype", "status", "bytes", "iterations", "per elem")
        table = [head]
        for r in self.rows:
            status = r.status if r.read_by_backward else f"{r.status} (not read)"
            name = r.name if r.key == r.name else f"{r.name} as {r.key}"
            table.append((name, _shape(r.shape), r.dtype, status,
                          _count(r.nbytes) if r.status == SAVED else "-",
                          _count(r.iterations), f"{r.per_element:g}"))
        widths = [max(len(row[c]) for row in table) for c in range(len(head))]
        right = {4, 5, 6}

        def fmt(row: Sequence[str]) -> str:
            return "  ".join(v.rjust(w) if c in right else v.ljust(w)
                             for c, (v, w) in enumerate(zip(row, widths))).rstrip()

        lines = [f"grad_program plan: d {self.loss} / d [{', '.join(self.wrt)}], "
                 f"tapes={self.tapes!r}", fmt(head),
                 fmt(["-" * w for w in widths])]
        lines += [fmt(row) for row in table[1:]] or ["(the gradient reads no intermediate)"]
        saved = self.saved
        lines.append(f"tape: {len(saved)} saved intermediate(s), {_count(self.tape_bytes)} bytes"
                     + (f" ({', '.join(saved)})" if saved else ""))
        if self.inputs:
            ins = ", ".join(f"{r.name if r.key == r.name else f'{r.name} as {r.key}'}"
                            f"{_shape(r.shape)}" for r in self.inputs)
            lines.append(f"      + inputs the backward reads, by reference: {ins} "
                         f"({_count(self.input_bytes)} bytes)")
        else:
            lines.append("      + no inputs (the backward reads no placeholder)")
        lines.append(f"iterations: forward {_count(self.forward_iterations)}; backward "
                     f"{_count(self.backward_iterations)} (recomputing {len(self.recomputed)} "
                     f"tensor(s): {_count(self.recompute_iterations)})")
        return "\n".join(lines)


def _shape(shape: tuple[int, ...]) -> str:
    return "(" + ", ".join(map(str, shape)) + ("," if len(shape) == 1 else "") + ")"


# --------------------------------------------------------------------------------------
# the program
# --------------------------------------------------------------------------------------

class GradProgram:
    """A compiled forward program (the loss and the saved intermediates) and a compiled
    backward program (the gradients from the tape and a head); see ``grad_program``.

    Attributes: ``loss``, ``wrt``, ``plan``, ``forward_function`` and
    ``backward_function`` (the built functions), ``backward_tensors`` (the gradients as
    tensors of the backward DAG), ``head`` (its head placeholder), ``saved`` (tape key ->
    forward tensor) and ``inputs`` (tape key -> placeholder the backward reads).
    """

    def __init__(self, loss: Tensor, wrt: list[Tensor], plan: Plan,
                 feeds: list[Tensor], saved: dict[str, Tensor], inputs: dict[str, Tensor],
                 saved_placeholders: dict[str, Tensor], head: Tensor,
                 grads: list[Tensor], target: str, name: str) -> None:
        self.loss = loss
        self.wrt = wrt
        self.plan = plan
        self.feeds = feeds  # the forward's placeholders, in call order
        self.saved = saved
        self.inputs = inputs
        self.saved_placeholders = saved_placeholders
        self.head = head
        self.backward_tensors = grads
        self.target = target
        # symbolic shapes: the arrays of each call give the shape variables
        self._symbolic = any(not isinstance(d, int) for t in (*feeds, loss, *grads)
                             for d in t.shape)
        # the forward: the loss, then every saved tensor other than the loss (a saved loss
        # is copied from the output)
        self._fwd_outputs = [loss] + [t for t in dict.fromkeys(saved.values()) if t is not loss]
        self.forward_function = build(self._fwd_outputs, [*feeds, *self._fwd_outputs],
                                      target=target, name=f"{name}_forward")
        # the backward: distinct gradient tensors (a repeated wrt entry computes once)
        # arguments: the tape's entries (inputs, then saved tensors), the head, the outputs
        self._bwd_outputs = list(dict.fromkeys(grads))
        self._tape_args = [*inputs.items(), *saved_placeholders.items()]
        self.backward_function = build(
            self._bwd_outputs, [*(t for _, t in self._tape_args), head, *self._bwd_outputs],
            target=target, name=f"{name}_backward")

    def __repr__(self) -> str:
        return (f"GradProgram(d {self.loss.name} / d [{', '.join(t.name for t in self.wrt)}], "
                f"tapes={self.plan.tapes!r}, saved={self.plan.saved})")

    # -- forward ----------------------------------------------------------------------
    def forward(self, feed: Mapping[Tensor | str, Any]) -> tuple[np.ndarray, dict[str, Any]]:
        """Run the forward program.

        Parameters
        ----------
        feed : Mapping
            Placeholder -> ``np.ndarray`` of its shape and dtype, for every placeholder the
            loss depends on (a key may also be the placeholder's name when no other
            placeholder of the loss has it; a placeholder keyed both ways must get the same
            array).

        Returns
        -------
        out : np.ndarray
            The loss (0-d for a scalar loss), freshly allocated.
        tape : dict
            Tape key -> array: the saved intermediates (fresh arrays) and the placeholders
            the backward reads (the arrays of ``feed``, not copied).

        Raises
        ------
        TypeError
            ``feed`` is not a mapping; a key is not a placeholder (or name); a value is not
            an array of the placeholder's dtype.
        ValueError
            A placeholder of the loss has no entry; a key is not an input of the loss; a
            placeholder is fed by tensor and by name with different arrays; an array has the
            wrong shape.
        """
        values = self._bind_feed(feed)
        sizes = self._sizes(values, "forward")
        bufs = [np.empty(_concrete(t, sizes), t.dtype.numpy) for t in self._fwd_outputs]
        self.forward_function(*(values[t] for t in self.feeds), *bufs)
        out = bufs[0]
        by_tensor = dict(zip(self._fwd_outputs, bufs))
        tape: dict[str, Any] = {}
        for key, t in self.saved.items():
            tape[key] = out.copy() if t is self.loss else by_tensor[t]
        for key, t in self.inputs.items():
            tape[key] = values[t]
        return out, tape

    def _bind_feed(self, feed: Any) -> dict[Tensor, np.ndarray]:
        """Every forward placeholder -> its checked, C-contiguous array from ``feed``
        (keys resolved by ``tex.ir.feed.resolve_feed``, strictly: every key must be an
        input of the loss)."""
        if not isinstance(feed, Mapping):
            raise TypeError(f"forward: feed must be a mapping {{placeholder: ndarray}}, got "
                            f"{type(feed).__name__}")
        given = resolve_feed(self.feeds, feed, "forward", f"the loss '{self.loss.name}'",
                             strict=True)
        sizes = self._sizes({t: a for t, a in given.items() if isinstance(a, np.ndarray)},
                            "forward")
        values = {t: _check_array("forward", f"placeholder '{t.name}'", given[t], t, sizes)
                  for t in self.feeds if t in given}
        missing = [t.name for t in self.feeds if t not in values]
        if missing:
            raise ValueError(f"forward: no data for placeholder(s) {', '.join(missing)} of "
                             f"the loss '{self.loss.name}'")
        return values

    # -- backward ---------------------------------------------------------------------
    def backward(self, tape: Mapping[str, Any], head: Any = None) -> list[np.ndarray]:
        """Run the backward program: the gradients of the loss with respect to ``wrt``.

        Parameters
        ----------
        tape : Mapping
            The tape from ``forward`` (tape key -> array).
        head : np.ndarray, optional
            The loss's gradient, of the loss's shape (0-d for a scalar loss); default ones.
            Cast to the loss's dtype when it is another float or integer dtype.

        Returns
        -------
        list of np.ndarray
            One fresh array per ``wrt`` entry, of its shape.

        Raises
        ------
        TypeError
            ``tape`` is not a mapping; an entry or ``head`` is not an array of the right
            dtype.
        ValueError
            The tape lacks an entry or has one the program does not know; an entry or
            ``head`` has the wrong shape.
        """
        if not isinstance(tape, Mapping):
            raise TypeError(f"backward: tape must be the dict returned by forward, got "
                            f"{type(tape).__name__}")
        expected = dict(self._tape_args)
        missing = [k for k in expected if k not in tape]
        if missing:
            raise ValueError(f"backward: the tape has no entry {', '.join(map(repr, missing))} "
                             f"(expected keys: {', '.join(expected)}); pass the tape that "
                             "forward returned")
        unknown = [k for k in tape if k not in expected]
        if unknown:
            raise ValueError(f"backward: unexpected tape entr{'y' if len(unknown) == 1 else 'ies'}"
                             f" {', '.join(map(repr, unknown))} (expected keys: "
                             f"{', '.join(expected) or 'none'}); is it another program's tape?")
        sizes = self._sizes({t: tape[k] for k, t in self._tape_args
                             if isinstance(tape[k], np.ndarray)}, "backward")
        args = [_check_array("backward", f"tape entry '{k}'", tape[k], t, sizes)
                for k, t in self._tape_args]
        bufs = [np.empty(_concrete(t, sizes), t.dtype.numpy) for t in self._bwd_outputs]
        self.backward_function(*args, self._head_array(head, sizes), *bufs)
        result = dict(zip(self._bwd_outputs, bufs))
        seen: set[int] = set()
        grads = []
        for t in self.backward_tensors:
            g = result[t]
            grads.append(g.copy() if id(g) in seen else g)  # a repeated wrt: own array
            seen.add(id(g))
        return grads

    def _sizes(self, arrays: Mapping[Tensor, np.ndarray], who: str) -> dict[Any, int]:
        """The shape variables' values at these arrays (symbolic shapes; else none)."""
        if not self._symbolic:
            return {}
        return bind_shape_vars(list(arrays), {t: a.shape for t, a in arrays.items()}, {},
                               who)

    def _head_array(self, head: Any, sizes: Mapping[Any, int] | None = None) -> np.ndarray:
        t = self.loss
        shape = _concrete(t, sizes or {})
        if head is None:
            return np.ones(shape, t.dtype.numpy)
        arr = np.asarray(head)
        if arr.shape != shape:
            raise ValueError(f"backward: head has shape {arr.shape}, expected the loss "
                             f"'{t.name}''s shape {shape}")
        if arr.dtype != t.dtype.numpy:
            if arr.dtype.kind not in "fiu":
                raise TypeError(f"backward: head has dtype {arr.dtype}, expected "
                                f"{t.dtype.name} (the loss '{t.name}''s dtype)")
            arr = arr.astype(t.dtype.numpy)
        return _contiguous(arr)


def _count(x: Any) -> str:
    """A count for a table: ``1,024``, or a symbolic one's expression."""
    return f"{x:,}" if isinstance(x, int) else str(as_extent(x))


def _json(x: Any) -> Any:
    """A plan's value as JSON: ints and strings as they are, expressions as text."""
    if isinstance(x, Expr):
        return str(x)
    if isinstance(x, tuple):
        return [_json(v) for v in x]
    return x


def _concrete(t: Tensor, sizes: Mapping[Any, int]) -> tuple[int, ...]:
    """``t``'s shape at these values of the shape variables."""
    if not sizes:
        return tuple(t.shape)
    return tuple(d if isinstance(d, int) else extent_value(d, sizes) for d in t.shape)


def _check_array(where: str, what: str, value: Any, t: Tensor,
                 sizes: Mapping[Any, int] | None = None) -> np.ndarray:
    """``value`` as a C-contiguous array of ``t``'s shape (at ``sizes``, a symbolic one)
    and dtype, or a clear error."""
    if not isinstance(value, np.ndarray):
        raise TypeError(f"{where}: {what} must be a numpy.ndarray of {t.dtype.name}"
                        f"{list(t.shape)}, got {type(value).__name__}")
    if value.dtype != t.dtype.numpy:
        raise TypeError(f"{where}: {what} has dtype {value.dtype}, expected {t.dtype.name}")
    shape = _concrete(t, sizes or {})
    if value.shape != shape:
        raise ValueError(f"{where}: {what} has shape {value.shape}, expected {shape}")
    return _contiguous(value)


def _contiguous(a: np.ndarray) -> np.ndarray:
    """``a``, or a C-contiguous copy (``np.ascontiguousarray`` would make a 0-d array 1-d)."""
    return a if a.flags.c_contiguous else a.copy(order="C")


# --------------------------------------------------------------------------------------
# grad_program
# --------------------------------------------------------------------------------------

def grad_program(loss: Tensor, wrt: Sequence[Tensor] | Tensor | None = None,
                 tapes: str | Sequence[Tensor] = "auto", target: str = "llvm",
                 name: str | None = None, fdiff: Any = None,
                 override: Mapping[Tensor, Any] | None = None) -> GradProgram:
    """Compile the forward and the backward of ``loss`` as two programs joined by a tape.

    Parameters
    ----------
    loss : Tensor
        A float compute tensor (any shape; the head has its shape).
    wrt : list of Tensor or Tensor, optional
        The placeholders to differentiate with respect to (default: every placeholder of
        the loss). One the loss does not depend on gets zeros.
    tapes : str or list of Tensor
        Which forward intermediates the forward saves for the backward:

        * ``"auto"``: a tensor whose operation costs more than ``AUTO_SAVE_RATIO`` (1)
          iteration per output element, i.e. a reduction (softmax's max and sum, a layer
          norm's statistics, a matmul or convolution output); elementwise tensors are
          recomputed in the backward from their (saved, recomputed or input) operands.
        * ``"none"``: nothing; the backward recomputes every intermediate from the inputs.
        * ``"all"``: every intermediate the gradient reads directly; nothing is recomputed.
        * a list of tensors: exactly those (each a compute tensor of the loss's DAG; one
          the backward then does not read is saved all the same, marked in the plan).
    target : str
        Passed to ``tex.build`` for both programs (default ``"llvm"``).
    name : str, optional
        Prefix of the built functions' names (default: the loss's name).
    fdiff, override : optional
        As ``tex.differentiate`` takes them (an extern call on the path to ``wrt`` needs
        its derivative from one of them).

    Returns
    -------
    GradProgram
        ``.plan``; ``.forward(feed) -> (out, tape)``; ``.backward(tape, head=None) ->
        [gradient per wrt]``. The tape carries the saved intermediates and, by reference,
        the placeholders the backward reads (``plan.inputs``), so ``backward(tape)`` needs
        nothing else. Tape keys are tensor names; a name used by two tape tensors gets a
        suffix (``T_add``, ``T_add_1``), placeholders keeping theirs first.

    Raises
    ------
    TypeError
        ``loss`` is not a float compute tensor; a ``wrt`` or ``tapes`` entry is not a
        Tensor; ``tapes`` is neither a string nor a list.
    ValueError
        An unknown ``tapes`` string; a ``tapes`` tensor that is not an intermediate of the
        loss's DAG (a placeholder, or a tensor the loss does not depend on); a ``wrt`` entry
        that is not a placeholder; an empty ``wrt``.

    Example
    -------
    >>> prog = tex.autodiff.grad_program(L, wrt=[W, B], tapes="auto")
    >>> out, tape = prog.forward({X: x, W: w, B: b})
    >>> dW, dB = prog.backward(tape)
    """
    _check_loss(loss)
    fwd_ops = topo_sort_ops([loss])
    feeds = placeholders_of([loss])
    wrt_list = _check_wrt(wrt, feeds, loss)
    policy, requested = _check_tapes(tapes, fwd_ops)

    head = placeholder(loss.shape, loss.dtype, name="head")
    grads = list(differentiate(loss, wrt_list, head, fdiff=fdiff, override=override))
    cut = _cut(grads, fwd_ops, feeds, policy, requested)
    plan = _make_plan(loss, wrt_list, policy if requested is None else "list", cut)
    return GradProgram(loss, wrt_list, plan, feeds, {cut.keys[t]: t for t in cut.saved},
                       cut.inputs, {cut.keys[t]: ph for t, ph in cut.saved.items()}, head,
                       cut.grads, target, name or loss.name)


def _check_loss(loss: Any) -> None:
    """A TypeError unless ``loss`` is a float compute tensor."""
    if not isinstance(loss, Tensor):
        raise TypeError(f"grad_program: loss must be a tex Tensor, got {type(loss).__name__}")
    if isinstance(loss.op, PlaceholderOp):
        raise TypeError(f"grad_program: loss '{loss.name}' is a placeholder; it must be "
                        "computed from the inputs")
    if not loss.dtype.is_float:
        raise TypeError(f"grad_program: loss '{loss.name}' has dtype {loss.dtype}; only a "
                        "float tensor can be differentiated")


def _check_wrt(wrt: Any, feeds: list[Tensor], loss: Tensor) -> list[Tensor]:
    """``wrt`` as a non-empty list of placeholders (``feeds``, the loss's placeholders, for
    None)."""
    if wrt is None:
        return list(feeds)
    wrt_list = [wrt] if isinstance(wrt, Tensor) else list(wrt)
    if not wrt_list:  # nothing to differentiate: the backward would have no outputs
        names = ", ".join(repr(t.name) for t in feeds)
        raise ValueError(f"grad_program: wrt is empty; pass the placeholders of "
                         f"'{loss.name}' to differentiate with respect to, or "
                         f"wrt=None for all of them ({names})")
    for i, t in enumerate(wrt_list):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad_program: wrt[{i}] must be a Tensor, got "
                            f"{type(t).__name__} {t!r}")
        if not isinstance(t.op, PlaceholderOp):
            raise ValueError(f"grad_program: wrt[{i}] '{t.name}' is a computed tensor; "
                             "differentiate with respect to placeholders")
    return wrt_list


def _check_tapes(tapes: Any, fwd_ops: list[Operation]) -> tuple[str, set[Tensor] | None]:
    """The policy name and, for a list, the requested tensors (validated)."""
    if isinstance(tapes, str):
        if tapes not in TAPES:
            raise ValueError(f"grad_program: unknown tapes={tapes!r}; use 'auto', 'none', "
                             "'all' or a list of intermediate tensors")
        return tapes, None
    if isinstance(tapes, Tensor) or not isinstance(tapes, (list, tuple, set, frozenset)):
        raise TypeError(f"grad_program: tapes must be 'auto', 'none', 'all' or a list of "
                        f"tensors, got {type(tapes).__name__} {tapes!r}"
                        + (f" (write [{tapes.name}])" if isinstance(tapes, Tensor) else ""))
    ops = {id(op) for op in fwd_ops}
    requested: set[Tensor] = set()
    for i, t in enumerate(tapes):
        if not isinstance(t, Tensor):
            raise TypeError(f"grad_program: tapes[{i}] must be a Tensor, got "
                            f"{type(t).__name__} {t!r}")
        if isinstance(t.op, PlaceholderOp):
            raise ValueError(f"grad_program: tapes[{i}] '{t.name}' is a placeholder, not an "
                             "intermediate (the inputs the backward reads are in the tape "
                             "anyway)")
        if id(t.op) not in ops:
            raise ValueError(f"grad_program: tapes[{i}] '{t.name}' is not an intermediate of "
                             "the loss's DAG (the loss does not depend on it)")
        requested.add(t)
    return "list", requested


@dataclass(frozen=True)
class _Cut:
    """The gradient DAG cut from the forward along the tape (what ``_cut`` decides)."""

    fwd_compute: list[Operation]  # the forward's compute operations, producers first
    status: dict[Tensor, str]  # forward tensor -> saved | recomputed (read by the backward)
    closure: dict[Tensor, str]  # the same under "none": every tensor the plan lists
    keys: dict[Tensor, str]  # tape key of every forward placeholder and saved tensor
    saved: dict[Tensor, Tensor]  # saved forward tensor -> its backward placeholder
    grads: list[Tensor]  # the gradients, as tensors of the backward DAG
    inputs: dict[str, Tensor]  # tape key -> forward placeholder the backward reads
    read_back: set[Tensor]  # the saved tensors the backward reads


def _cut(grads: list[Tensor], fwd_ops: list[Operation], feeds: list[Tensor], policy: str,
         requested: set[Tensor] | None) -> _Cut:
    """Decide what the forward saves (``_decide``), key the tape, and rebuild the gradient
    DAG to read each saved tensor from a placeholder named by its tape key."""
    fwd_set = {id(op) for op in fwd_ops if not isinstance(op, PlaceholderOp)}
    fwd_compute = [op for op in fwd_ops if id(op) in fwd_set]
    status = _decide(grads, fwd_compute, fwd_set, policy, requested)
    # the closure under "none": the rows of the plan
    closure = _decide(grads, fwd_compute, fwd_set, "none", set())
    saved_tensors = [t for op in fwd_compute for t in op.outputs if status.get(t) == SAVED]
    keys = _tape_keys([*feeds, *saved_tensors])
    saved_ph = {t: placeholder(t.shape, t.dtype, name=keys[t]) for t in saved_tensors}
    new_grads = [_materialize(g) for g in _rewrite(grads, saved_ph)]
    # what the backward program reads
    bwd_ops = topo_sort_ops(new_grads)
    read = {op.output(0) for op in bwd_ops if isinstance(op, PlaceholderOp)}
    return _Cut(fwd_compute, status, closure, keys, saved_ph, new_grads,
                {keys[t]: t for t in feeds if t in read},
                {t for t, ph in saved_ph.items() if ph in read})


def _tape_keys(tensors: list[Tensor]) -> dict[Tensor, str]:
    """A distinct tape key per tensor: its name, else ``name_1``, ``name_2``...; earlier
    tensors (placeholders come first) keep their names."""
    taken: set[str] = set()
    keys: dict[Tensor, str] = {}
    for t in tensors:
        key, n = t.name, 0
        while key in taken:
            n += 1
            key = f"{t.name}_{n}"
        taken.add(key)
        keys[t] = key
    return keys


def _make_plan(loss: Tensor, wrt: list[Tensor], tapes: str, cut: _Cut) -> Plan:
    """The plan of a cut: a row per forward tensor of the closure, the inputs the backward
    reads, and the iteration counts."""
    rows = []
    recompute = 0
    for op in cut.fwd_compute:
        own = op_iterations(op)
        if any(cut.status.get(t) == RECOMPUTED for t in op.outputs):
            recompute += own  # a multi-output operation runs once
        for t in op.outputs:
            st = cut.status.get(t) or (UNUSED if t in cut.closure else None)
            if st is None:
                continue
            rows.append(PlanRow(t.name, cut.keys.get(t, t.name), t.shape, t.dtype.name, st,
                                t.size * t.dtype.itemsize, own, iteration_count(t),
                                st != SAVED or t in cut.read_back))
    return Plan(loss.name, tuple(t.name for t in wrt), tapes, tuple(rows),
                tuple(InputRow(t.name, k, t.shape, t.dtype.name, t.size * t.dtype.itemsize)
                      for k, t in cut.inputs.items()),
                iteration_count(loss, *cut.saved), iteration_count(*cut.grads), recompute)


def _auto_saves(t: Tensor) -> bool:
    """The "auto" rule: save a tensor costing more than AUTO_SAVE_RATIO points per element."""
    op = t.op
    if isinstance(op, (ExternOp, ScanOp)):
        return True  # an unknown cost, or a serial recurrence: never run it twice
    assert isinstance(op, ComputeOp)
    # (symbolic extents: compared at the default hint)
    return at_hint(op_iterations(op)) > AUTO_SAVE_RATIO * max(1, at_hint(as_extent(t.size)))


def _decide(grads: list[Tensor], fwd_compute: list[Operation], fwd_set: set[int],
            policy: str, requested: set[Tensor] | None) -> dict[Tensor, str]:
    """Forward tensor -> "saved" | "recomputed" (absent: not read by the backward).

    Walks the forward operations consumers first from the tensors the gradient's own
    operations read; a recomputed operation makes its compute inputs needed."""
    needed: set[Tensor] = set()
    for op in topo_sort_ops(grads):
        if id(op) in fwd_set or isinstance(op, PlaceholderOp):
            continue
        needed.update(d for d in op.input_tensors if id(d.op) in fwd_set)
    # a gradient that is itself a forward tensor (never made by differentiate, but cheap
    # to allow) is read by the backward program as an output
    needed.update(g for g in grads if id(g.op) in fwd_set)
    status: dict[Tensor, str] = {}
    for op in reversed(fwd_compute):
        recompute = False
        for t in op.outputs:
            if requested is not None and t in requested:
                status[t] = SAVED
            elif t not in needed:
                continue
            elif policy == "all" or (policy == "auto" and _auto_saves(t)):
                status[t] = SAVED
            else:
                status[t] = RECOMPUTED
                recompute = True
        if recompute:
            for t in op.outputs:  # the whole operation runs again
                status.setdefault(t, RECOMPUTED)
            needed.update(d for d in op.input_tensors if id(d.op) in fwd_set)
    return status


def _rewrite(grads: list[Tensor], replace: dict[Tensor, Tensor]) -> list[Tensor]:
    """The gradient DAG with each key of ``replace`` read as its value (a placeholder);
    operations above a replaced tensor are rebuilt, the others kept."""
    table: dict[Tensor, Tensor] = dict(replace)

    def redirect(node: Expr) -> Expr | None:
        if isinstance(node, TensorRead):
            new = table.get(node.tensor)
            if new is not None:
                return TensorRead(new, node.indices)
        return None

    for op in topo_sort_ops(grads):
        if isinstance(op, PlaceholderOp) or all(t in replace for t in op.outputs):
            continue
        if not any(d in table for d in op.input_tensors):
            continue
        if isinstance(op, (ExternOp, ScanOp)):
            moved = op.with_inputs([table.get(d, d) for d in op.inputs]) \
                if isinstance(op, ExternOp) else op.replaced(table)
            for old, new in zip(op.outputs, moved.outputs):
                table.setdefault(old, new)
            continue
        memo: dict[Expr, Expr] = {}
        bodies = [rewrite(b, redirect, memo) for b in op.body]
        new_op = ComputeOp(op.name, op.axis, bodies, tag=op.tag, attrs=op.attrs)
        for old, new in zip(op.outputs, new_op.outputs):
            table.setdefault(old, new)
    return [table.get(g, g) for g in grads]


def _materialize(g: Tensor) -> Tensor:
    """A compute copy of a gradient that is a placeholder (a built function's outputs are
    computes)."""
    if not isinstance(g.op, PlaceholderOp):
        return g
    return compute(g.shape, lambda *i: g[tuple(i)], name=f"{g.name}_copy")
