"""Schedules: a record of how to run each operation of a tensor DAG.

A ``Schedule`` holds one ``Stage`` per compute operation. A stage keeps every iteration
variable it has ever had (``all_iter_vars``), the current loop order (``leaf_iter_vars``),
the relations that link them (``Split``: ``parent = outer * factor + inner``; ``Fuse``:
``fused = outer * extent(inner) + inner``), per-variable annotations (parallel, vectorize,
unroll, a GPU thread binding) and where the stage is computed (its attach point: at the
root, inlined into its consumers, or inside a loop of another stage).

Primitives validate their arguments and append to the record; nothing is computed here.
``tex.lower`` interprets the record (bound inference, loop nests). Errors are ``ValueError``
(a wrong argument value: an axis of another stage, an already split axis, a cycle) or
``TypeError`` (a wrong argument type) and name the stage and the axis.

The relations and thread axes are defined in ``axes.py``. Primitives that rewrite the DAG
live in their own modules (``cache.py``, ``rfactor.py``, ``pad.py``, ``phase.py``) and
edit the schedule through its public methods: ``Stage.check_leaf`` (an axis argument
checked), ``Schedule.insert_stage``, ``replace_op``, ``redirect_reads`` and
``move_attached``; ``consumers`` and ``reads`` answer dataflow questions.

Example
-------
>>> s = tex.create_schedule(C.op)
>>> io, ii = s[C].split(C.op.axis[0], factor=8)
>>> s[C].reorder(io, C.op.axis[1], ii)
>>> s[C].parallel(io); s[C].vectorize(ii)
"""
from __future__ import annotations

import contextlib
import heapq
import math
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arith.extent import as_extent
from ..error import ScheduleError
from ..ir.expr import IterVar, Range, Reduce, TensorRead, Var
from ..ir.saved import SavedCall
from ..ir.tensor import ComputeOp, ExternOp, Operation, PlaceholderOp, ScanOp, Tensor
from ..ir.visit import rewrite, topo_sort_ops
from ..tir import StringImm
from .axes import (
    PARALLEL,
    SERIAL,
    THREAD,
    UNROLL,
    VECTORIZE,
    Fuse,
    Relation,
    Singleton,
    Split,
    ThreadAxis,
)

__all__ = ["IterVarAttr", "Schedule", "Stage", "create_schedule", "split_parts"]

SCOPES = ("global", "shared", "local")


def check_scope(scope: Any, what: str) -> str:
    """``scope`` if it is one of ``SCOPES``, else a TypeError/ValueError naming ``what``."""
    if not isinstance(scope, str):
        raise TypeError(f"{what}: scope must be a string ({', '.join(SCOPES)}), got "
                        f"{type(scope).__name__} {scope!r}")
    if scope not in SCOPES:
        raise ScheduleError(f"{what}: unknown scope {scope!r}; expected one of {', '.join(SCOPES)}")
    return scope


def _new_iter_var(name: str, extent: int, kind: str) -> IterVar:
    return IterVar(Var(name, kind=kind), Range(0, extent))


def _is_reduce(iv: IterVar) -> bool:
    return iv.kind == "reduce"


def _position(loops: Sequence[IterVar], iv: IterVar) -> int:
    """The index of ``iv`` in ``loops``, by identity (``==`` on axes builds a comparison
    expression: ``list.index`` paid for one per loop passed over)."""
    for k, v in enumerate(loops):
        if v is iv:
            return k
    raise ScheduleError(f"axis '{iv.name}' is not among the loops")


@dataclass(frozen=True)
class IterVarAttr:
    """A loop's annotations as TVM's ``IterVarAttr``: ``iter_type`` (an ``IterVar``
    constant), ``bind_thread`` (its ``ThreadAxis`` or None) and its pragmas."""

    iter_type: int
    bind_thread: ThreadAxis | None
    pragma_keys: tuple[str, ...]
    pragma_values: tuple[Any, ...]


# annotation kind -> TVM's iter_type
_ITER_TYPES = {UNROLL: IterVar.Unrolled, VECTORIZE: IterVar.Vectorized,
               PARALLEL: IterVar.Parallelized, THREAD: IterVar.ThreadIndex}


class Stage:
    """How one operation is computed: loop structure, annotations and attach point."""

    def __init__(self, op: ComputeOp, schedule: Schedule) -> None:
        self.schedule = schedule
        self._op: ComputeOp | None = None
        self.op = op
        self.origin_op: ComputeOp = op
        self.all_iter_vars: list[IterVar] = [*op.axis, *op.reduce_axis]
        self.leaf_iter_vars: list[IterVar] = [*op.axis, *op.reduce_axis]
        self.relations: list[Relation] = []
        self.annotations: dict[IterVar, str] = {}
        self.bindings: dict[IterVar, ThreadAxis] = {}
        # "root" | "inline" | "scope" | "scan" (a scan's body, computed at each of its
        # steps: attach_stage is the scan, attach_ivar its scan_axis)
        self.attach_type = "root"
        self._attach_stage: Stage | None = None
        self.attach_ivar: IterVar | None = None
        self.scope = "global"
        self.is_output = False
        self.pragmas: dict[IterVar, list[tuple[str, Any]]] = {}
        self.store_predicate: Any = None  # (set_store_predicate)

    @property
    def op(self) -> ComputeOp:
        """The operation this stage computes now (rebuilt on first use after a producer's
        operation was replaced: ``Schedule._install``). Every stale stage before this one
        is rebuilt first: rebuilding one above could make this one stale again."""
        sch = self.schedule
        if sch._stale and sch._first_stale() <= sch._position.get(self, _FIRST):
            sch._refresh(self)
        return self._op  # type: ignore[return-value]

    @op.setter
    def op(self, new: ComputeOp) -> None:
        # keeps the schedule's index of the stages reading each operation
        sch = self.schedule
        if self._op is not None:
            for t in self._op.input_tensors:
                sch._readers.get(t.op, {}).pop(self, None)
            scan = sch.scan_body.get(self)
            if scan is not None and new is not self._op:
                sch._mark_stale(scan)  # rebuilt over its body's current operations
        for t in new.input_tensors:
            sch._readers.setdefault(t.op, {})[self] = None
        self._op = new
        sch.stage_map[new] = self

    @property
    def attach_stage(self) -> Stage | None:
        """The stage at whose loop this one is computed (None unless attach_type is
        "scope")."""
        return self._attach_stage

    @attach_stage.setter
    def attach_stage(self, parent: Stage | None) -> None:
        # keeps the schedule's index of attached stages, so that finding the stages computed
        # at a stage's loops does not scan every stage (compute_inline of n stages was
        # quadratic)
        index = self.schedule._attached
        if self._attach_stage is not None:
            index[self._attach_stage].pop(self, None)
        if parent is not None:
            index.setdefault(parent, {})[self] = None
        self._attach_stage = parent

    # -- helpers ------------------------------------------------------------------------
    @property
    def name(self) -> str:
        return self.op.name

    def __repr__(self) -> str:
        return f"Stage({self.op.name}, {' '.join(iv.name for iv in self.leaf_iter_vars)})"

    def check_leaf(self, iv: Any, primitive: str) -> IterVar:
        """``iv`` checked to be a current loop of this stage (``primitive``: the caller,
        named in the errors)."""
        if not isinstance(iv, IterVar):
            raise TypeError(f"{primitive} on stage '{self.name}': expected an IterVar "
                            f"(e.g. {self.name}.op.axis[0]), got {type(iv).__name__} {iv!r}")
        if any(iv is v for v in self.leaf_iter_vars):
            return iv
        self.refuse_loopless(primitive)
        if any(iv is v for v in self.all_iter_vars):
            raise ScheduleError(f"{primitive} on stage '{self.name}': axis '{iv.name}' has already "
                                "been split or fused; use the axes that split/fuse returned")
        raise ScheduleError(f"{primitive} on stage '{self.name}': axis '{iv.name}' is not an axis "
                            f"of this stage (its axes are "
                            f"{', '.join(v.name for v in self.leaf_iter_vars)})")

    def refuse_loopless(self, primitive: str) -> None:
        """A ``ScheduleError`` when this stage is an extern call (it has no loops: it runs
        once, at the root, after its inputs are computed in full) or a scan (its one loop
        is its steps; schedule the stages of its body)."""
        if isinstance(self._op, ExternOp):
            raise ScheduleError(f"{primitive} on stage '{self.name}': '{self.name}' is an extern "
                                "call (te.extern); it has no loops to schedule and is computed "
                                "once, at the root")
        if isinstance(self._op, ScanOp):
            raise ScheduleError(f"{primitive} on stage '{self.name}': '{self.name}' is a scan "
                                "(te.scan); its loop is its time steps, computed at the root "
                                "in order; schedule the stages of its body (its update) instead")

    @property
    def scan(self) -> Stage | None:
        """The scan whose steps compute this stage (a stage of its body, or one computed at
        a loop of such a stage), else None."""
        at: Stage | None = self
        seen = 0
        while at is not None and at.attach_type == "scope" and seen <= len(self.schedule.stages):
            at = at.attach_stage
            seen += 1
        if at is not None and at.attach_type == "scan":
            return at.attach_stage
        return None

    def _replace_leaf(self, old: Sequence[IterVar], new: Sequence[IterVar]) -> None:
        """Replace the loops ``old`` by ``new`` (outer first). Stages computed at one of
        the ``old`` loops move to the innermost new loop (a split's inner loop, the fused
        loop): computing "at ``i``" means once per value of ``i``, inside every loop that
        enumerates it, so the region each computes stays what one value of ``i`` reads."""
        pos = min(_position(self.leaf_iter_vars, v) for v in old)
        leaves = [v for v in self.leaf_iter_vars if not any(v is o for o in old)]
        leaves[pos:pos] = new
        self.leaf_iter_vars = leaves
        self.all_iter_vars.extend(new)
        for st in self.schedule._attached.get(self, ()):
            if any(st.attach_ivar is v for v in old):
                st.attach_ivar = new[-1]

    # -- loop structure ---------------------------------------------------------------------
    def split(self, parent: IterVar, factor: int | None = None,
              nparts: int | None = None, *, tail: str = "guard") -> tuple[IterVar, IterVar]:
        """Split ``parent`` into ``(outer, inner)`` with ``inner`` of extent ``factor``
        (or ``outer`` of extent exactly ``nparts``, as in TVM: ``inner`` then has extent
        ``ceil(extent / nparts)``, and outer iterations past the end do nothing;
        ``tex.schedule.split_parts`` makes only as many outer iterations as cover the extent).

        When the factor does not divide the extent, ``tail="guard"`` (the default, as TVM)
        guards the points of the last tile past the end; ``tail="shift"`` shifts the last
        tile inwards so that it ends at the extent (whole tiles, no guard, the overlap
        computed twice). ``"shift"`` needs a data-parallel axis of a stage whose tiles
        compute their points from scratch: lowering refuses it when a reduction loop of
        the stage encloses the outer loop (a point would be accumulated twice)."""
        parent = self.check_leaf(parent, "split")
        if tail not in ("guard", "shift"):
            raise ScheduleError(f"split of '{parent.name}' in stage '{self.name}': tail must be "
                                f"'guard' or 'shift', got {tail!r}")
        if tail == "shift" and parent.kind == "reduce":
            raise ScheduleError(f"split of '{parent.name}' in stage '{self.name}': "
                                "tail='shift' computes the overlap of the last two tiles twice, "
                                "which a reduction axis would sum twice; use tail='guard'")
        if (factor is None) == (nparts is None):
            raise ScheduleError(f"split of '{parent.name}' in stage '{self.name}': give exactly "
                                "one of factor= and nparts=")
        value = factor if factor is not None else nparts
        what = "factor" if factor is not None else "nparts"
        if isinstance(value, (bool, np.bool_)) or not isinstance(value, (int, np.integer)):
            raise TypeError(f"split of '{parent.name}' in stage '{self.name}': {what} must be a "
                            f"positive int, got {type(value).__name__} {value!r}")
        value = int(value)
        if factor is not None:
            factor = value
        if value <= 0:
            raise ScheduleError(f"split of '{parent.name}' in stage '{self.name}': {what} must be "
                                f"positive, got {value}")
        extent = parent.dom.extent
        if not isinstance(extent, int):  # symbolic: the tail is guarded, or shifted
            inner_ext = factor if factor is not None else as_extent((extent + value - 1) // value)
            outer_ext = as_extent((extent + factor - 1) // factor) if factor is not None \
                else value
        elif factor is not None:
            inner_ext = min(factor, extent)
            outer_ext = math.ceil(extent / inner_ext)
        else:
            inner_ext = math.ceil(extent / value)
            outer_ext = value
        kind = parent.kind
        outer = _new_iter_var(f"{parent.name}.outer", outer_ext, kind)
        inner = _new_iter_var(f"{parent.name}.inner", inner_ext, kind)
        self.relations.append(Split(parent, outer, inner, inner_ext, tail,
                                    None if factor is not None else outer_ext))
        self._replace_leaf([parent], [outer, inner])
        return outer, inner

    def tile(self, x_parent: IterVar, y_parent: IterVar, x_factor: int,
             y_factor: int) -> tuple[IterVar, IterVar, IterVar, IterVar]:
        """Split two axes and order the loops ``x.outer, y.outer, x.inner, y.inner``."""
        xo, xi = self.split(x_parent, factor=x_factor)
        yo, yi = self.split(y_parent, factor=y_factor)
        self.reorder(xo, yo, xi, yi)
        return xo, yo, xi, yi

    def reorder(self, *order: IterVar) -> None:
        """Put the given loops in this order, in the positions they occupy together."""
        if len(order) == 1 and isinstance(order[0], (list, tuple)):
            order = tuple(order[0])
        ivs = [self.check_leaf(iv, "reorder") for iv in order]
        if len(set(ivs)) != len(ivs):
            raise ScheduleError(f"reorder on stage '{self.name}': an axis appears twice in "
                                f"({', '.join(v.name for v in ivs)})")
        positions = sorted(_position(self.leaf_iter_vars, v) for v in ivs)
        leaves = list(self.leaf_iter_vars)
        for pos, iv in zip(positions, ivs):
            leaves[pos] = iv
        self.leaf_iter_vars = leaves

    def fuse(self, *ivs: IterVar) -> IterVar:
        """Fuse adjacent loops (outer first) into one; returns the fused axis. With no
        axes (TVM's ``fuse()``), a new outermost loop of extent 1 (a ``Singleton``)."""
        if len(ivs) == 1 and isinstance(ivs[0], (list, tuple)):
            ivs = tuple(ivs[0])
        if not ivs:
            self.refuse_loopless("fuse")
            single = _new_iter_var("singleton", 1, "axis")
            self.relations.append(Singleton(single))
            self.leaf_iter_vars = [single, *self.leaf_iter_vars]
            self.all_iter_vars.append(single)
            return single
        checked = [self.check_leaf(iv, "fuse") for iv in ivs]
        if len(checked) == 1:
            return checked[0]
        pos = [_position(self.leaf_iter_vars, v) for v in checked]
        if any(b != a + 1 for a, b in zip(pos, pos[1:])):
            raise ScheduleError(f"fuse on stage '{self.name}': axes "
                                f"{', '.join(v.name for v in checked)} must be adjacent loops, "
                                "outer first (reorder them first)")
        kinds = {_is_reduce(v) for v in checked}
        if len(kinds) > 1:
            raise ScheduleError(f"fuse on stage '{self.name}': cannot fuse a reduction axis with "
                                "a data-parallel axis")
        acc = checked[0]
        for inner in checked[1:]:
            fused = _new_iter_var(f"{acc.name}.{inner.name}.fused",
                                  acc.dom.extent * inner.dom.extent, acc.kind)
            self.relations.append(Fuse(acc, inner, fused))
            self._replace_leaf([acc, inner], [fused])
            acc = fused
        return acc

    # -- annotations ------------------------------------------------------------------------
    def _annotate(self, iv: IterVar, kind: str, primitive: str) -> None:
        iv = self.check_leaf(iv, primitive)
        previous = self.annotations.get(iv, SERIAL)
        if previous not in (SERIAL, kind):
            raise ScheduleError(f"{primitive} on stage '{self.name}': axis '{iv.name}' is already "
                                f"marked {previous}")
        self.annotations[iv] = kind

    def parallel(self, iv: IterVar) -> None:
        """Run the iterations of this loop on all cores."""
        iv = self.check_leaf(iv, "parallel")
        if _is_reduce(iv):
            raise ScheduleError(f"parallel on stage '{self.name}': '{iv.name}' is a reduction "
                                "axis; its iterations accumulate into the same element (use "
                                "rfactor to parallelize a reduction)")
        self._annotate(iv, PARALLEL, "parallel")

    def vectorize(self, iv: IterVar) -> None:
        """Run this loop's iterations as SIMD lanes (the innermost loop, usually)."""
        iv = self.check_leaf(iv, "vectorize")
        if _is_reduce(iv):
            raise ScheduleError(f"vectorize on stage '{self.name}': '{iv.name}' is a reduction "
                                "axis; vectorize a data-parallel axis (reorder it innermost)")
        self._annotate(iv, VECTORIZE, "vectorize")

    def unroll(self, iv: IterVar) -> None:
        """Repeat the loop body instead of looping."""
        self._annotate(iv, UNROLL, "unroll")

    def bind(self, iv: IterVar, thread: ThreadAxis) -> None:
        """Bind a loop to a GPU thread index (lowered by the CUDA target)."""
        iv = self.check_leaf(iv, "bind")
        if not isinstance(thread, ThreadAxis):
            raise TypeError(f"bind on stage '{self.name}': expected tex.thread_axis(...), got "
                            f"{type(thread).__name__}")
        if thread.extent is not None and iv.dom.extent > thread.extent:
            raise ScheduleError(f"bind on stage '{self.name}': loop '{iv.name}' runs "
                                f"{iv.dom.extent} times, more than the {thread.extent} of "
                                f"thread axis {thread.tag} (its dom)")
        for other, t in self.bindings.items():
            if t.tag == thread.tag and other is not iv and thread.tag != "vthread":
                raise ScheduleError(f"bind on stage '{self.name}': {thread.tag} is already "
                                    f"bound to '{other.name}'")
        self._annotate(iv, THREAD, "bind")
        self.bindings[iv] = thread

    def pragma(self, iv: IterVar, pragma_type: str, pragma_value: Any = None) -> None:
        """TVM's loop pragma. ``"unroll"`` and ``"vectorize"`` are ``unroll``/``vectorize``
        (as in TVM); any other is recorded (``pragmas``, shown by ``iter_var_attrs``) and not
        acted on: tex decides how parallel loops launch and how far to unroll by itself."""
        iv = self.check_leaf(iv, "pragma")
        if not isinstance(pragma_type, str) or not pragma_type:
            raise TypeError(f"pragma on stage '{self.name}': the pragma type must be a "
                            f"non-empty str, got {pragma_type!r}")
        if pragma_type == "unroll":
            self.unroll(iv)
            return
        if pragma_type == "vectorize":
            self.vectorize(iv)
            return
        if pragma_type in ("import_c", "import_llvm"):
            raise ScheduleError(f"pragma on stage '{self.name}': '{pragma_type}' links "
                                "external code into a loop, which tex does not do")
        self.pragmas.setdefault(iv, []).append((pragma_type, pragma_value))

    @property
    def iter_var_attrs(self) -> dict[IterVar, IterVarAttr]:
        """TVM's view of the loop annotations: per annotated or pragma'd leaf, its
        ``iter_type`` (``tex.schedule.IterVar.Unrolled``, ...), ``bind_thread`` and pragmas."""
        out: dict[IterVar, IterVarAttr] = {}
        for iv in self.leaf_iter_vars:
            kind = self.annotations.get(iv)
            pragmas = self.pragmas.get(iv, [])
            if kind is None and not pragmas:
                continue
            thread = self.bindings.get(iv)
            out[iv] = IterVarAttr(_ITER_TYPES.get(kind, IterVar.CommReduce
                                                  if _is_reduce(iv) else IterVar.DataPar),
                                  thread, tuple(StringImm(k) for k, _ in pragmas),
                                  tuple(StringImm(v) if isinstance(v, str) else v
                                        for _, v in pragmas))
        return out

    # -- attach points ----------------------------------------------------------------------
    def compute_inline(self) -> None:
        """Substitute this operation's body into its consumers (no buffer)."""
        if self.is_output:
            raise ScheduleError(f"compute_inline: '{self.name}' is an output of the schedule; "
                                "outputs must be stored")
        self.refuse_loopless("compute_inline")
        for reader in self.schedule._readers.get(self.op, ()):
            if isinstance(reader.op, ExternOp):
                raise ScheduleError(f"compute_inline: '{self.name}' is read by the extern call "
                                    f"'{reader.name}', which needs it stored in full")
        body = self.op.body
        if isinstance(body[0], Reduce):
            raise ScheduleError(f"compute_inline: '{self.name}' is a reduction; only element-wise "
                                "computations can be inlined (use compute_at instead)")
        if len(body) > 1:
            raise ScheduleError(f"compute_inline: '{self.name}' has {len(body)} outputs; only "
                                "single-output computations can be inlined")
        self._detach()
        self.attach_type = "inline"

    def compute_root(self) -> None:
        """Compute this operation fully, in its own loop nest (the default). A stage of a
        scan's body goes back to computing its row at each step."""
        self._detach()
        scan = self.schedule.scan_body.get(self)
        if scan is not None:
            self.attach_type = "scan"
            self.attach_stage = scan
            self.attach_ivar = scan.op.scan_axis
            return
        self.attach_type = "root"

    def compute_at(self, parent: Stage, iv: IterVar) -> None:
        """Compute the part of this operation that ``parent`` needs inside ``parent``'s loop
        ``iv`` (the region is found by bound inference when lowering).

        The attach point follows later loop changes of ``parent``: if ``iv`` is split, this
        stage is computed at the inner loop; if fused, at the fused loop (once per value
        of ``iv`` either way)."""
        if not isinstance(parent, Stage):
            raise TypeError(f"compute_at on stage '{self.name}': expected a Stage (s[T]), got "
                            f"{type(parent).__name__}")
        if parent.schedule is not self.schedule:
            raise ScheduleError(f"compute_at on stage '{self.name}': stage '{parent.name}' belongs "
                                "to another schedule")
        if parent is self:
            raise ScheduleError(f"compute_at: stage '{self.name}' cannot be attached to itself")
        self.refuse_loopless("compute_at")
        for reader in self.schedule._readers.get(self.op, ()):
            if isinstance(reader.op, ExternOp):
                raise ScheduleError(f"compute_at: '{self.name}' is read by the extern call "
                                    f"'{reader.name}', which needs it computed in full at the "
                                    "root")
        parent.check_leaf(iv, f"compute_at of '{self.name}'")
        if parent.attach_type == "inline":
            raise ScheduleError(f"compute_at on stage '{self.name}': stage '{parent.name}' is "
                                "inlined and has no loops")
        own_scan = self.schedule.scan_body.get(self)
        if own_scan is not None and parent.scan is not own_scan:
            raise ScheduleError(f"compute_at: '{self.name}' is computed at each step of the scan "
                                f"'{own_scan.name}'; attach it to a stage of that scan's body, "
                                f"not to '{parent.name}'")
        if self._computes_inside(parent):
            raise ScheduleError(f"compute_at: attaching '{self.name}' to '{parent.name}' makes "
                                "a cycle (that stage is already computed inside "
                                f"'{self.name}')")
        inside = [parent, *self.schedule._attached_within(parent)]
        if not any(self.schedule.reads(c, self) for c in inside):
            raise ScheduleError(f"compute_at: stage '{parent.name}' does not read '{self.name}' "
                                "(directly, through inlined stages, or through stages computed at "
                                f"its loops); attach '{self.name}' to a stage that consumes it")
        self.attach_type = "scope"
        self.attach_stage = parent
        self.attach_ivar = iv

    def _computes_inside(self, other: Stage) -> bool:
        """Whether ``other`` is computed at a loop of this stage, directly or through
        stages computed there. Walked from both ends in step, up from ``other`` and down
        from this stage, so that a chain of compute_at built in either order costs what
        the shorter walk does (one walk alone made a 2,000-stage chain quadratic)."""
        up: Stage | None = other
        down = [self]
        while True:
            if up is None:
                return False
            if up is self:
                return True
            up = up.attach_stage
            if not down:
                return False
            kids = self.schedule._attached.get(down.pop(), ())
            if other in kids:
                return True
            down.extend(kids)

    def _detach(self) -> None:
        for other in self.schedule._attached.get(self, ()):
            raise ScheduleError(f"stage '{other.name}' is computed at a loop of '{self.name}'; "
                                f"call compute_root on '{other.name}' first")
        self.attach_stage = None
        self.attach_ivar = None

    def set_store_predicate(self, predicate: Any) -> None:
        """Store this stage's values only where ``predicate`` (a bool expression over its
        loop and axis variables) holds; the stages computed inside it run as before
        (TVM's: a cross-thread reduction stored by thread 0)."""
        self.refuse_loopless("set_store_predicate")
        from ..ir.expr import as_expr

        pred = as_expr(predicate, f"set_store_predicate on stage '{self.name}'")
        if not pred.dtype.is_bool:
            raise TypeError(f"set_store_predicate on stage '{self.name}': the predicate must be "
                            f"a condition (bool), got {pred} of dtype {pred.dtype}")
        self.store_predicate: Any = pred

    # -- reductions ------------------------------------------------------------------------
    def set_scope(self, scope: str) -> None:
        """Memory scope of this stage's buffer: "global", "shared" or "local"."""
        self.scope = check_scope(scope, f"set_scope on stage '{self.name}'")


_GAP = 1 << 16  # between the order keys of consecutive stages (Schedule._positions)
_FIRST, _LAST = -(1 << 62), 1 << 62  # keys before and after every stage


class Schedule:
    """Stages for every compute operation of a DAG (``s[tensor]`` gives one)."""

    def __init__(self, outputs: Sequence[Operation]) -> None:
        self.outputs: list[Operation] = list(outputs)
        self.stages: list[Stage] = []
        self.stage_map: dict[Operation, Stage] = {}
        # operation -> the stages whose current operation reads it (Stage.op)
        self._readers: dict[Operation, dict[Stage, None]] = {}
        # stages reading a replaced output, to rebuild at their next use; the replacements
        # (old output -> newer output; Schedule._install); stage -> position in ``stages``
        self._stale: set[Stage] = set()
        # (order key, id, stage) of the stale stages; entries of stages no longer stale
        # are dropped when they reach the top (rebuilt when the keys are renumbered)
        self._stale_heap: list[tuple[int, int, Stage]] = []
        self._renamed: dict[Tensor, Tensor] = {}
        self._position: dict[Stage, int] = {}
        self._defer = 0  # > 0 inside deferred_rewrites()
        # stage -> the stages attached at its loops (an ordered set; Stage.attach_stage)
        self._attached: dict[Stage, dict[Stage, None]] = {}
        # the disk cache entry auto_schedule found this schedule in or stored it under
        # (tex.ir.saved): the build keys the schedule against it (tex.schedule.key)
        self.saved: SavedCall | None = None
        # the stages of each scan's body -> the scan's stage
        self.scan_body: dict[Stage, Stage] = {}
        for op in topo_sort_ops([op.output(0) for op in self.outputs]):
            if isinstance(op, PlaceholderOp):
                continue
            if op in self.stage_map:
                self._refuse_outside_read(op)
            stage = Stage(op, self)
            if isinstance(op, ScanOp):
                self._add_scan_body(op, stage)
            self.stages.append(stage)
            self.stage_map[op] = stage
        for op in self.outputs:
            if not isinstance(op, PlaceholderOp):
                self.stage_map[op].is_output = True

    def _add_scan_body(self, op: ScanOp, scan: Stage) -> None:
        """A stage per operation of ``op``'s body, computed at each step of ``scan``."""
        for b in op.body_ops:
            if b in self.stage_map:
                if self.stage_map[b] in self.scan_body:
                    raise ScheduleError(f"schedule: '{b.name}' belongs to the body of two "
                                        f"scans (the second is '{op.name}'); a state "
                                        "placeholder belongs to one scan")
                self._refuse_outside_read(b, op)
            st = Stage(b, self)  # type: ignore[arg-type]
            st.attach_type = "scan"
            st.attach_stage = scan
            st.attach_ivar = op.scan_axis
            self.stages.append(st)
            self.stage_map[b] = st
            self.scan_body[st] = scan

    def _refuse_outside_read(self, b: Operation, scan: ScanOp | None = None) -> None:
        """A ``ScheduleError``: ``b``, an operation of a scan's body (computed one row per
        step, reading the scan's state), is also read outside that scan."""
        if scan is None:
            scan = self.scan_body[self.stage_map[b]].op  # type: ignore[assignment]
        assert scan is not None
        raise ScheduleError(f"schedule: '{b.name}' is computed at each step of the scan "
                            f"'{scan.name}' (it reads the scan's state) and is also read "
                            f"outside it; read the scan's output '{scan.output(0).name}' "
                            "instead")

    def extern_ops(self) -> list[ExternOp]:
        """The extern calls of this schedule in stage order (a built function numbers its
        calls so)."""
        return [st.op for st in self.stages if isinstance(st.op, ExternOp)]

    def normalize(self) -> Schedule:
        """TVM's loop normalization: every loop of a tex schedule already starts at 0, so
        the schedule is returned as it is."""
        return self

    def __getitem__(self, key: Tensor | Operation) -> Stage:
        op = key.op if isinstance(key, Tensor) else key
        if not isinstance(op, Operation):
            raise TypeError(f"schedule[...] expects a Tensor or an Operation, got "
                            f"{type(key).__name__}")
        stage = self.stage_map.get(op)
        if stage is not None:
            return stage
        if isinstance(op, PlaceholderOp):
            raise ScheduleError(f"schedule: '{op.name}' is a placeholder (an input); it has no "
                                "stage to schedule")
        raise ScheduleError(f"schedule: '{op.name}' is not part of this schedule (its outputs are "
                            f"{', '.join(o.name for o in self.outputs)})")

    def __repr__(self) -> str:
        return f"Schedule({', '.join(s.name for s in self.stages)})"

    # -- the whole record as plain values (tex.schedule.saved keeps it on disk) -------------
    def snapshot(self) -> tuple[Any, ...]:
        """This schedule's record as a tuple of IR objects, relations and plain values:
        the outputs, one tuple per stage (``SNAPSHOT_FIELDS``, the attach stage as its
        position) and the other operations ``stage_map`` knows (replaced ones: the
        tensors the user holds), each with its stage's position. ``restored`` makes an
        equal schedule of it."""
        self._refresh_all()
        pos = {st: k for k, st in enumerate(self.stages)}
        stages = []
        for st in self.stages:
            row = [getattr(st, f) for f in SNAPSHOT_FIELDS]
            row[SNAPSHOT_FIELDS.index("attach_stage")] = \
                None if st.attach_stage is None else pos[st.attach_stage]
            stages.append(tuple(row))
        aliases = tuple((op, pos[st]) for op, st in self.stage_map.items() if st.op is not op)
        return tuple(self.outputs), tuple(stages), aliases

    @classmethod
    def restored(cls, outputs: Sequence[Operation], stages: Sequence[Sequence[Any]],
                 aliases: Sequence[tuple[Operation, int]]) -> Schedule:
        """The schedule ``snapshot`` recorded (its stages' operations as they are now:
        nothing is stale)."""
        sch = cls([])
        sch.outputs = list(outputs)
        made = []
        for row in stages:
            state = dict(zip(SNAPSHOT_FIELDS, row, strict=True))
            st = Stage(state["op"], sch)
            st.origin_op = state["origin_op"]
            st.all_iter_vars = list(state["all_iter_vars"])
            st.leaf_iter_vars = list(state["leaf_iter_vars"])
            st.relations = list(state["relations"])
            st.annotations = dict(state["annotations"])
            st.bindings = dict(state["bindings"])
            st.attach_type = state["attach_type"]
            st.attach_ivar = state["attach_ivar"]
            st.scope = state["scope"]
            st.is_output = state["is_output"]
            st.pragmas = {iv: list(p) for iv, p in state["pragmas"].items()}
            st.store_predicate = state["store_predicate"]
            sch.stages.append(st)
            made.append(st)
        for st, row in zip(made, stages):
            k = row[SNAPSHOT_FIELDS.index("attach_stage")]
            st.attach_stage = None if k is None else made[k]
        for st in made:
            if st.attach_type == "scan" and st.attach_stage is not None:
                sch.scan_body[st] = st.attach_stage
        for op, k in aliases:
            st = made[k]
            sch.stage_map[op] = st
            sch._renamed.update((t, n) for t, n in zip(op.outputs, st.op.outputs) if t is not n)
        return sch

    # -- dataflow queries --------------------------------------------------------------------
    def consumers(self, producer: Stage) -> list[Stage]:
        """The stages, not inlined, that read ``producer``'s outputs directly or through
        inlined stages, in dataflow order. Proportional to the readers, not to the
        schedule: lowering asks it once per attached stage."""
        self._refresh_all()
        found: dict[Stage, None] = {}
        seen: set[Stage] = set()
        stack = [producer.op]
        while stack:
            for st in self._readers.get(stack.pop(), ()):
                if st in seen:
                    continue
                seen.add(st)
                if st.attach_type == "inline":
                    stack.append(st.op)
                else:
                    found[st] = None
        pos = self._positions()
        return sorted(found, key=lambda st: pos.get(st, _FIRST))

    def reads(self, consumer: Stage, producer: Stage) -> bool:
        """Whether ``consumer`` reads ``producer``'s outputs, directly or through inlined
        stages."""
        wanted = set(producer.op.outputs)
        stack = list(consumer.op.input_tensors)
        seen: set[Tensor] = set()
        while stack:
            t = stack.pop()
            if t in seen:
                continue
            seen.add(t)
            if t in wanted:
                return True
            st = self.stage_map.get(t.op)
            if st is not None and st.attach_type == "inline":
                stack.extend(st.op.input_tensors)
        return False

    def _attached_within(self, parent: Stage) -> list[Stage]:
        """Stages computed at loops of ``parent``, directly or through other such stages."""
        found: dict[Stage, None] = {}
        frontier = [parent]
        while frontier:
            node = frontier.pop()
            for st in self._attached.get(node, ()):
                if st not in found:
                    found[st] = None
                    frontier.append(st)
        return list(found)

    # -- editing the DAG (the primitives of cache.py, rfactor.py, pad.py, phase.py) ---------
    def insert_stage(self, stage: Stage, before: Stage | None) -> None:
        """Add the new ``stage`` (``Stage(op, schedule)``) to ``stages`` just before
        ``before`` (at the end when None): producers come before their readers."""
        idx = len(self.stages) if before is None else self.stages.index(before)
        self.stages.insert(idx, stage)
        self.stage_map[stage._op] = stage  # type: ignore[index]
        pos = self._position
        if not pos:
            return  # numbered at the next use
        lo = pos[self.stages[idx - 1]] if idx > 0 else None
        hi = pos[self.stages[idx + 1]] if idx + 1 < len(self.stages) else None
        if lo is not None and hi is not None and hi - lo < 2:
            self._position = {}  # the gap is used up: renumbered at the next use
        elif lo is not None:
            pos[stage] = lo + _GAP if hi is None else (lo + hi) // 2
        else:
            pos[stage] = 0 if hi is None else hi - _GAP

    def replace_op(self, stage: Stage, new_op: ComputeOp) -> None:
        """Make ``stage`` compute ``new_op`` (same outputs, rewritten body); stages reading
        the old op's outputs are rewritten to read the new ones (and so on downstream).
        The old op stays a key of ``stage_map``, so tensors the user holds still work."""
        self._install([(stage, new_op)])

    def redirect_reads(self, readers: Iterable[Stage], old: Tensor, new: Tensor) -> None:
        """Make the stages ``readers`` read ``new`` where they read ``old`` (cache_read)."""
        updates = []
        for st in readers:
            op = st.op
            if isinstance(op, ScanOp):
                raise ScheduleError(f"cache_read: the scan '{op.name}' reads '{old.name}' through "
                                    "its inits or body; give the body's stages as readers")
            rebuilt = _reading(op, {old: new})
            if rebuilt is not op:
                updates.append((st, rebuilt))
        self._install(updates)

    def move_attached(self, stage: Stage, new: Stage, loops: dict[IterVar, IterVar]) -> None:
        """After ``new`` took over the computation of ``stage`` (cache_write, rfactor): the
        stages computed at a loop of ``stage`` that ``loops`` maps to a loop of ``new`` are
        computed there instead (``new`` now reads them). Attachments at loops without a
        counterpart stay (``tex.lower`` names a reader computed outside the loop)."""
        for st in list(self._attached.get(stage, ())):
            if st.attach_ivar in loops:
                st.attach_stage = new
                st.attach_ivar = loops[st.attach_ivar]

    # -- stale stages, rebuilt for replaced operations at their next use -------------------
    def _install(self, updates: list[tuple[Stage, ComputeOp]]) -> None:
        """Give each stage of ``updates`` its new op; the stages reading a replaced output
        are marked stale and rebuilt at their next use (``Stage.op``), and theirs in turn:
        each stage is rebuilt once per change above it that it sees, never recursively,
        and a reduction rfactored stage after stage does not rebuild everything below it
        each time (eagerly, rfactoring a chain of n reductions would rebuild n^2 stages).
        ``Stage.op`` rebuilds every stale stage before the
        one asked for, so an operation read is never made stale by a rebuild above it."""
        for stage, new_op in updates:
            old = stage.op
            stage.op = new_op
            self._renamed.update(zip(old.outputs, new_op.outputs))
            for r in self._readers.get(old, ()):
                self._mark_stale(r)
            self._stale.discard(stage)

    @contextlib.contextmanager
    def deferred_rewrites(self) -> Iterator[Schedule]:
        """A block of primitives after which every stage is up to date (rebuilt for the
        operations the primitives replaced: rfactor, cache_write, ...). Stages are
        rebuilt at their next use in any case (``_install``); this settles them all."""
        self._defer += 1
        try:
            yield self
        finally:
            self._defer -= 1
            if not self._defer:
                self._refresh_all()

    def _refresh_all(self) -> None:
        if self._stale:
            self._refresh(self.stages[-1])

    def _mark_stale(self, st: Stage) -> None:
        if st not in self._stale:
            self._stale.add(st)
            heapq.heappush(self._stale_heap, (self._positions().get(st, _FIRST), id(st), st))

    def _first_stale(self) -> int:
        """The smallest order key of a stale stage (``_LAST`` when none)."""
        self._positions()  # renumbering rebuilds the heap
        heap = self._stale_heap
        while heap and heap[0][2] not in self._stale:
            heapq.heappop(heap)
        return heap[0][0] if heap else _LAST

    def _final(self, t: Tensor) -> Tensor:
        """The newest replacement of ``t`` (``t`` itself when none)."""
        path = []
        while t in self._renamed:
            path.append(t)
            t = self._renamed[t]
        for p in path[:-1]:  # path compression
            self._renamed[p] = t
        return t

    def _refresh(self, target: Stage) -> None:
        """Rebuild the stale stages up to ``target`` (producers first: ``stages`` is in
        dataflow order), each reading the newest outputs of its producers."""
        pos = self._positions()
        limit = pos.get(target, _LAST)
        heap = self._stale_heap
        while heap and heap[0][0] <= limit:
            _, _, st = heapq.heappop(heap)
            if st not in self._stale:
                continue
            self._stale.discard(st)
            op = st._op
            assert op is not None
            if isinstance(op, ScanOp):
                new = self._scan_now(op)
            else:
                mapping = {t: self._final(t) for t in op.input_tensors if t in self._renamed}
                if not mapping:
                    continue
                new = _reading(op, mapping)
            if new is op:
                continue
            st.op = new
            self._renamed.update(zip(op.outputs, new.outputs))
            for r in self._readers.get(op, ()):
                self._mark_stale(r)

    def _scan_now(self, op: ScanOp) -> ScanOp:
        """``op`` over the current operations of the stages computed at its steps (its
        body's, and those a primitive added there: an rfactor's partial sums) and the
        newest versions of its inits (itself when nothing changed)."""
        scan = self.stage_map[op]
        body = [st.op for st in self.stages if st.scan is scan]
        init = [self._final(t) for t in op.init]
        if len(body) == len(op.body_ops) and all(a is b for a, b in zip(body, op.body_ops)) \
                and all(a is b for a, b in zip(init, op.init)):
            return op
        update = [self.stage_map[u.op].op.output(u.value_index) if u.op in self.stage_map
                  else self._final(u) for u in op.update]
        return ScanOp(op.name, op.scan_axis, init, update, op.state_placeholder, op.inputs,
                      body, op.tag, op.attrs)

    def _positions(self) -> dict[Stage, int]:
        """An order key per stage, increasing along ``stages``, with gaps of ``_GAP``: an
        inserted stage takes a key between its neighbours', so the keys are renumbered
        only when a gap is used up (renumbering at every insertion made a program of n
        rfactored reductions quadratic)."""
        if not self._position:
            self._position = pos = {st: k * _GAP for k, st in enumerate(self.stages)}
            self._stale_heap = [(pos.get(st, _FIRST), id(st), st) for st in self._stale]
            heapq.heapify(self._stale_heap)
        return self._position

    # -- primitives that rewrite the DAG (their own modules) ---------------------------------
    def cache_read(self, tensor: Tensor, scope: str, readers: Sequence[Tensor | Operation]
                   ) -> Tensor:
        """A copy of ``tensor`` in ``scope`` read by ``readers`` instead of ``tensor``.

        Returns the new tensor (schedule it like any other, e.g. compute_at)."""
        from .cache import cache_read
        return cache_read(self, tensor, scope, readers)

    def cache_write(self, tensor: Tensor, scope: str) -> Tensor:
        """Compute ``tensor`` into a ``scope`` buffer, then copy it out.

        The stage of ``tensor`` keeps its axes (``tensor.op.axis`` stays usable with
        ``s[tensor]``); the returned tensor's stage owns the computation, with fresh spatial
        axes and the original reduction axes."""
        from .cache import cache_write
        return cache_write(self, tensor, scope)

    def rfactor(self, tensor: Tensor, axis: IterVar, factor_axis: int = 0) -> Tensor:
        """Turn the reduction axis ``axis`` of ``tensor`` into a data-parallel axis of a new
        tensor of partial results (inserted at dimension ``factor_axis``); ``tensor`` then
        reduces those partial results. Returns the new tensor."""
        from .rfactor import rfactor
        return rfactor(self, tensor, axis, factor_axis)


# the attributes of a Stage in Schedule.snapshot, in order
SNAPSHOT_FIELDS = ("op", "origin_op", "all_iter_vars", "leaf_iter_vars", "relations",
                   "annotations", "bindings", "attach_type", "attach_stage", "attach_ivar",
                   "scope", "is_output", "pragmas", "store_predicate")


def _replace_tensors(e: Any, mapping: Mapping[Tensor, Tensor]) -> Any:
    def fn(node: Any) -> Any:
        if isinstance(node, TensorRead) and node.tensor in mapping:
            return TensorRead(mapping[node.tensor], node.indices)
        return None
    return rewrite(e, fn)


def _reading(op: Any, mapping: Mapping[Tensor, Tensor]) -> Any:
    """``op`` reading ``mapping[t]`` wherever it read ``t`` (``op`` itself when it reads none
    of them): a compute's body rewritten, an extern's inputs replaced."""
    if isinstance(op, ExternOp):
        if not any(t in mapping for t in op.inputs):
            return op
        return op.with_inputs([mapping.get(t, t) for t in op.inputs])
    body = [_replace_tensors(e, mapping) for e in op.body]
    if all(a is b for a, b in zip(body, op.body)):
        return op
    return ComputeOp(op.name, op.axis, body, op.tag, op.attrs)


def split_parts(stage: Stage, parent: IterVar, parts: int, tail: str = "guard"
                ) -> tuple[IterVar, IterVar]:
    """Split ``parent`` into about ``parts`` equal outer iterations, no more than cover it:
    ``ceil(extent / p)`` each, with ``p = min(parts, extent)``, and as many as that takes
    (``split(nparts=)`` keeps exactly ``nparts``, as TVM's, even when some do nothing)."""
    extent = parent.dom.extent
    if not isinstance(extent, int):  # symbolic: exactly ``parts`` (some may be empty)
        return stage.split(parent, nparts=parts, tail=tail)
    return stage.split(parent, factor=math.ceil(extent / max(1, min(parts, extent))),
                       tail=tail)


def create_schedule(ops: Operation | Tensor | Sequence[Operation | Tensor]) -> Schedule:
    """A schedule for the DAG ending in ``ops``: one root stage per compute, loops in the
    order of the axes (reductions innermost).

    Parameters
    ----------
    ops : Operation, Tensor or a list of them
        The outputs.

    Example
    -------
    >>> s = tex.create_schedule([dW.op, dB.op])
    """
    items = ops if isinstance(ops, (list, tuple)) else [ops]
    if not items:
        raise ScheduleError("create_schedule: give at least one output operation")
    out: list[Operation] = []
    for item in items:
        op = item.op if isinstance(item, Tensor) else item
        if not isinstance(op, Operation):
            raise TypeError(f"create_schedule: expected Operations or Tensors, got "
                            f"{type(item).__name__}")
        if op not in out:
            out.append(op)
    return Schedule(out)
