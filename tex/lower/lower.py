"""``lower``: a schedule and its arguments -> a loop nest over flat buffers (``LoweredFunc``).

How a schedule becomes loops (as in TVM's ScheduleOps + InferBound, on static shapes):
check the arguments, give every tensor its storage, build the nests, run the passes.

1. **Arguments** are checked: tensors (placeholders read, computed outputs) and ``tex.var``
   scalars, each once; every placeholder the computation reads must be one.
2. **Storage** (``storage.py``): every tensor lives in a 1-D buffer. Arguments are
   parameters, other root stages are allocated around the whole body, attached ones
   inside their loop (``nest.py``).
3. **Bounds of reads** (``bounds_check.py``, before any nest is built): a read out of
   bounds, unguarded, with an exact (affine) index range, is a ``ValueError``; a read not
   proven in bounds is wrapped in a run-time check (``select(ok, read, report)``), reads
   of inlined stages included (their checks wrap the inlined value).
4. **Loop nests** (``nest.py``), one per root stage, in the schedule's order. Every stage
   marked ``compute_inline`` is substituted into its readers (``tex.schedule.inline``):
   ``T[i] = A[i] * 2; C[i] = T[i + 1]`` gives ``C[i] = A[i + 1] * 2``. Each remaining
   stage iterates over its leaf loops; the root axes are rebuilt from them by inverting
   split and fuse (``relations.py``), split remainders guarded. A stage computed at a loop
   of another computes the region bound inference gives (``bound.py``) at the start of
   that loop's body. The innermost part is the body of the stage's kind (``body.py``):
   element-wise stores, a reduction, a reduction across GPU threads, or a scatter.
5. **Passes** (``passes.py``): the named list ``PASSES``, in order, on one root stage's
   nest at a time (``StagedFunc.passed``: no pass looks across nests); ``stage`` stops
   before them, so that ``tex.build`` can compile the first nests while it lowers the
   next.
"""
from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from .. import debug
from ..error import ScheduleError
from ..ir.expr import TensorRead, Var
from ..ir.tensor import PlaceholderOp, ScanOp, Tensor
from ..ir.visit import placeholders_of, post_order
from ..schedule import Schedule, create_schedule
from ..te.specialize import shape_vars
from .bounds_check import is_report
from .nest import NestBuilder
from .passes import PASSES
from .stmt import (
    Allocate,
    BufferParam,
    For,
    LetStmt,
    LoweredFunc,
    Param,
    ScalarParam,
    Seq,
    Stmt,
    Store,
    make_buffer,
    stmt_exprs,
    walk_stmts,
)
from .storage import Names, Storage, buffer_size
from .structure import renamed, structure

__all__ = ["lower", "stage", "StagedFunc"]


def lower(sch: Schedule | Tensor | Sequence[Tensor], args: Sequence[Tensor | Var] | None = None,
          name: str = "main", binds: Mapping[Tensor, Any] | None = None,
          simple_mode: bool = False) -> LoweredFunc:
    """Lower a schedule to a loop nest.

    Parameters
    ----------
    sch : Schedule, or Tensor(s)
        The schedule (tensors get a default schedule).
    args : list of Tensor or tex.var
        The function's arguments in order: placeholders it reads, tensors it writes, and
        scalar variables. Computed tensors in ``args`` are outputs.
        Default (tensors only): the placeholders they read, then the tensors.
    name : str
        The function name.
    binds : None
        TVM's tensor-to-buffer bindings: tex has no buffer objects, so only ``None`` or an
        empty mapping is accepted (a ``ValueError`` otherwise).
    simple_mode : bool
        Accepted for TVM's spelling: the printed loop nest is always the plain form.

    Returns
    -------
    LoweredFunc
        ``print()`` shows the loop nest.

    Raises
    ------
    TypeError, ValueError
        Bad args (not tensors, duplicates, a placeholder the computation reads is missing,
        an inlined tensor listed as an output, a free variable not passed); a read out of
        bounds at some point of its domain, unguarded; an argument computed at a parallel
        loop whose iterations would not write it exactly once.
    """
    if binds:
        raise ValueError("lower: binds= (TVM's tensor-to-buffer bindings) is not supported: "
                         "tex gives every argument a dense row-major buffer of its own")
    if not isinstance(simple_mode, bool):
        raise TypeError(f"lower: simple_mode must be a bool, got {simple_mode!r}")
    with debug.timed("lower"):
        staged = stage(sch, args, name)
        shown = [p for p, _ in PASSES if debug.should_dump(f"lower.{p}")]
        trace: dict[str, list[Stmt]] | None = {p: [] for p in shown} if shown else None
        func = staged.function([staged.passed(nest, trace) for nest in staged.nests])
        for pass_name in shown:
            assert trace is not None
            debug.dump(f"lower.{pass_name}", staged.function(trace[pass_name]))
        return func


@dataclass(frozen=True)
class StagedFunc:
    """A schedule lowered up to its passes: the function's parameters, the buffers
    allocated around its body (``temps``, outermost first) and the loop nest of each root
    stage (``nests``), which ``passed`` runs through ``PASSES`` one at a time (a build
    compiles the first nests while the next are lowered: ``tex.build``)."""

    name: str
    params: tuple[Param, ...]
    temps: tuple[Tensor, ...]
    nests: tuple[Stmt, ...]
    # structure of a nest passed already -> its buffers and variables, and what the passes
    # made of it (``passed``)
    _done: dict[str, tuple[list[Tensor | Var], Stmt]] = field(
        default_factory=dict, compare=False, repr=False)

    def passed(self, nest: Stmt, trace: dict[str, list[Stmt]] | None = None) -> Stmt:
        """``nest`` after ``PASSES`` (each pass sees a function of this nest alone: no pass
        looks across nests); ``trace`` collects what the passes named in it give.

        A nest of the same structure as one passed before (``tex.lower.structure``: the
        same statements and expressions over other buffers and loop variables of the same
        types and shapes; a ResNet block's two convolutions, their gradients and batch
        norms, a transformer's Q, K and V projections) is that nest's result renamed: the
        passes look at nothing else (half of a ResNet block's nests, 0.17 s of passes)."""
        named: list[Tensor | Var] = []
        key = None
        if trace is None:
            key = structure(nest, named=named)
            # (with the variables' names: the simplifier orders the terms of a sum by them)
            key += "\n" + " ".join(v.name for v in named if isinstance(v, Var))
        hit = self._done.get(key) if key is not None else None
        if hit is not None:
            again = _renamed_result(*hit, named)
            if again is not None:
                return again
        func = LoweredFunc(self.name, self.params, nest)
        for pass_name, fn in PASSES:
            with debug.timed(f"lower.{pass_name}"):
                func = fn(func)
            if trace is not None and pass_name in trace:
                trace[pass_name].append(func.body)
        if key is not None:
            self._done[key] = (named, func.body)
        return func.body

    def function(self, nests: Sequence[Stmt]) -> LoweredFunc:
        """The function of these nests (in order; those left empty dropped), inside the
        allocations of ``temps``. Each nest stays one statement of the body's sequence:
        the code generator takes the ranges of a nest's loops from that nest alone."""
        kept = [n for n in nests if not (isinstance(n, Seq) and not n.body)]
        if not kept:
            return LoweredFunc(self.name, self.params, Seq(()))
        body: Stmt = kept[0] if len(kept) == 1 else Seq(tuple(kept))
        for buf in reversed(self.temps):
            body = Allocate(buf, "global", body)
        return LoweredFunc(self.name, self.params, body)


def _renamed_result(named: list[Tensor | Var], result: Stmt, now: list[Tensor | Var]
                    ) -> Stmt | None:
    """``result`` (what the passes made of a nest whose buffers and variables were
    ``named``) for a nest of the same structure over ``now``: each of ``named`` replaced by
    its counterpart, each variable the passes introduced by a fresh copy (a peeled loop's);
    None where the passes introduced a buffer or ``renamed`` cannot rename."""
    mapping: dict[Tensor | Var, Tensor | Var] = dict(zip(named, now))
    # (a variable the passes introduced copies one of the nest's and has its name)
    names = {a.name: b.name for a, b in zip(named, now) if isinstance(a, Var)}

    def fresh(v: Var) -> Var:
        return Var(names.get(v.name, v.name), v.dtype, v.kind)

    for st in walk_stmts(result):
        if isinstance(st, (Allocate, Store)) and st.buffer not in mapping:
            return None
        if isinstance(st, (For, LetStmt)) and st.var not in mapping:
            mapping[st.var] = fresh(st.var)
        for e in stmt_exprs(st):
            for node in post_order(e):
                if isinstance(node, Var) and node not in mapping:
                    mapping[node] = fresh(node)
                elif isinstance(node, TensorRead) and node.tensor not in mapping:
                    return None
    return renamed(result, mapping)


def stage(sch: Schedule | Tensor | Sequence[Tensor], args: Sequence[Tensor | Var] | None = None,
          name: str = "main") -> StagedFunc:
    """``lower`` up to its passes (the arguments checked, the storage given, the reads
    checked, the nests built): raises what ``lower`` raises for bad input."""
    sch, arg_list = _checked_arguments(sch, args, name)
    with debug.timed("lower.schedule_ops"):
        names = Names()
        params, storage, scalars = _argument_storage(sch, arg_list, names)
        temps, nests = _nests(sch, storage, names, scalars)
        staged = StagedFunc(name, tuple(params), tuple(temps), tuple(nests))
    if debug.should_dump("lower.schedule_ops"):
        debug.dump("lower.schedule_ops", staged.function(staged.nests))
    return staged


def _checked_arguments(sch: Any, args: Any, name: Any) -> tuple[Schedule, list[Tensor | Var]]:
    """The schedule (a default one for tensors) and the argument list, checked."""
    if not isinstance(sch, Schedule):
        iterable = isinstance(sch, Iterable) and not isinstance(sch, (str, bytes))
        tensors = [sch] if isinstance(sch, Tensor) else list(sch) if iterable else None
        if tensors is None or not all(isinstance(t, Tensor) for t in tensors):
            raise TypeError(f"lower: expected a Schedule or a list of Tensors, got "
                            f"{type(sch).__name__} {sch!r}")
        if args is None:
            args = [*placeholders_of(tensors), *tensors]
        sch = create_schedule([t.op for t in tensors])
    if args is None:
        raise TypeError("lower: args is required with a Schedule (the argument list)")
    if not isinstance(name, str):
        raise TypeError(f"lower: name must be a string, got {type(name).__name__} {name!r}")
    if not name.isidentifier():
        raise ValueError(f"lower: name must be an identifier, got {name!r}")
    return sch, _check_args(args)


def _check_args(args: Any) -> list[Tensor | Var]:
    if isinstance(args, (Tensor, Var)):
        args = [args]
    if isinstance(args, (str, bytes)) or not isinstance(args, Iterable):
        raise TypeError(f"lower: args must be a list of tensors (and tex.var scalars), got "
                        f"{type(args).__name__}")
    args = list(args)
    out: list[Tensor | Var] = []
    for pos, a in enumerate(args):
        if not isinstance(a, (Tensor, Var)):
            raise TypeError(f"lower: args[{pos}] is {type(a).__name__} {a!r}; expected a "
                            "Tensor or a tex.var")
        if isinstance(a, Var) and a.kind not in ("var", "size"):
            raise TypeError(f"lower: args[{pos}] '{a.name}' is a loop variable, not a tex.var")
        if any(a is b for b in out):
            raise ValueError(f"lower: args[{pos}] '{a.name}' appears twice in args")
        out.append(a)
    return out


def _argument_storage(sch: Schedule, arg_list: Sequence[Tensor | Var], names: Names
                      ) -> tuple[list[Param], dict[Tensor, Storage], set[Var]]:
    """The function's parameters, the storage of the tensor arguments (a buffer each,
    named in ``names``) and the scalar arguments."""
    storage: dict[Tensor, Storage] = {}
    params: list[Param] = []
    scalars: set[Var] = set()
    for a in arg_list:
        if isinstance(a, Var):
            params.append(ScalarParam(a))
            scalars.add(a)
            continue
        tensor = a
        is_output = not isinstance(a.op, PlaceholderOp)
        if is_output:
            st = sch.stage_map.get(a.op)
            if st is None:
                raise ValueError(f"lower: '{a.name}' is in args but not computed by this "
                                 "schedule")
            tensor = st.op.output(a.value_index)
        buf = make_buffer(names.fresh(a.name), buffer_size(a), a.dtype)
        storage[tensor] = Storage(buf, tuple(a.shape))
        params.append(BufferParam(buf, a, is_output))
    # the shape variables the caller does not pass: taken from the arrays at the call
    tensors = [a for a in arg_list if isinstance(a, Tensor)]
    tensors += [t for st in sch.stages for t in st.op.outputs]
    for v in shape_vars(tensors):
        if v not in scalars:
            params.append(ScalarParam(v, derived=True))
            scalars.add(v)
    return params, storage, scalars


def _nests(sch: Schedule, storage: dict[Tensor, Storage], names: Names, scalars: set[Var]
           ) -> tuple[list[Tensor], list[Stmt]]:
    """The buffers of the root stages that are not arguments (added to ``storage``) and
    the loop nests of the root stages in order; reads checked first."""
    builder = NestBuilder(sch, storage, names, scalars)
    builder.check_reads()
    # a scan's states, read by its steps as its outputs
    states = {s: st for st in sch.stages if isinstance(st.op, ScanOp)
              for s in st.op.state_placeholder}
    # placeholders read by the computation must be arguments
    for st in sch.stages:
        if st.attach_type == "inline":
            continue
        for e in builder.body_of(st):
            for node in post_order(e):
                if isinstance(node, TensorRead) and isinstance(node.tensor.op, PlaceholderOp) \
                        and node.tensor not in storage and not is_report(node.tensor):
                    scan = states.get(node.tensor)
                    if scan is None:
                        raise ValueError(f"lower: '{st.name}' reads the placeholder "
                                         f"'{node.tensor.name}', which is not in args")
                    if st.scan is not scan:
                        raise ScheduleError(
                            f"lower: '{st.name}' reads the state '{node.tensor.name}' of the "
                            f"scan '{scan.name}' but is not computed at its steps (leave it "
                            f"in the scan's body, or compute_at a stage of that body)")
    temps: list[Tensor] = []
    parts: list[Stmt] = []

    def store(t: Tensor) -> None:
        if t not in storage:
            buf = make_buffer(names.fresh(t.name), buffer_size(t), t.dtype)
            storage[t] = Storage(buf, tuple(t.shape))
            temps.append(buf)

    for st in sch.stages:
        if isinstance(st.op, ScanOp):
            # an init computed at the root writes the first rows of its output in place:
            # the same flat indices (row-major, the same trailing extents)
            for init, out in zip(st.op.init, st.op.outputs):
                store(out)
                producer = sch.stage_map.get(init.op)
                if producer is not None and producer.attach_type == "root" and \
                        init.op.num_outputs == 1 and init not in storage:
                    storage[init] = Storage(storage[out].buffer, tuple(init.shape))
    for st in sch.stages:
        # an inlined stage whose output is an argument is substituted into its readers and
        # also stored (as TVM's tutorials expect the argument to hold it: never left unset)
        stored = st.attach_type == "root" or st.attach_type == "inline" and any(
            t in storage for t in st.op.outputs)
        if not stored:
            continue
        for t in st.op.outputs:
            store(t)
        parts.append(builder.root_nest(st, storage))
    return temps, parts
