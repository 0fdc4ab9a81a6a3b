"""Tensors and the operations that produce them.

``PlaceholderOp`` is an input; ``ComputeOp`` defines every element of its outputs by an
expression over its axes (one body per output); ``ExternOp`` has its outputs written by a
function outside tex (``te.extern``: a ``PackedCall`` over ``ExternBuffer`` views of its
inputs and outputs); ``ScanOp`` is a recurrence over its outputs' first axis
(``te.scan``). A ``Tensor`` is one output of an operation. Operations and tensors are
unique, immutable objects (hash is identity), so they serve as dict keys in every pass; the
DAG is given by ``op.input_tensors``.

Builders with argument checking live in ``tex.te``; the constructors here check only
internal invariants.
"""
from __future__ import annotations

import html
import itertools
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import Any

from ..debug import InternalError
from ..dtype import DType, as_dtype
from .expr import Const, Expr, IterVar, Reduce, TensorRead, as_expr

__all__ = ["Operation", "PlaceholderOp", "ComputeOp", "ExternOp", "ExternBuffer", "PackedCall",
           "ScanOp", "Shape",
           "Tensor", "TensorSlice",
           "TENSOR_OPERATORS", "register_tensor_operators"]

# Python operators on whole tensors (A + B, -A, A.astype) dispatch to the broadcasting
# topi ops through this table, which tex.topi fills once at import.
TENSOR_OPERATORS: dict[str, Callable[..., Any]] = {}


def register_tensor_operators(table: dict[str, Callable[..., Any]]) -> None:
    """Install the whole-tensor operator implementations (called by tex.topi at import)."""
    TENSOR_OPERATORS.update(table)


class Shape(tuple):  # type: ignore[type-arg]
    """A tensor's shape: a tuple of extents, each an int or (a symbolic extent) an integer
    expression over ``tex.var``/``tex.size_var``, that, as TVM's shape arrays, also
    concatenates with lists (``A.shape[:1] + [4]``, ``[2] + A.shape``) and slices to a
    ``Shape``."""

    __slots__ = ()

    def __getitem__(self, key: Any) -> Any:
        got = tuple.__getitem__(self, key)
        return Shape(got) if isinstance(key, slice) else got

    def __add__(self, other: Any) -> Any:
        if isinstance(other, (tuple, list)):
            return Shape((*self, *other))
        return NotImplemented

    def __radd__(self, other: Any) -> Any:
        if isinstance(other, (tuple, list)):
            return Shape((*other, *self))
        return NotImplemented

    def __reduce__(self) -> Any:
        return (Shape, (tuple(self),))

    def __repr__(self) -> str:
        # symbolic extents print as expressions: (n, 128), not (Var(n), 128)
        return "(" + ", ".join(str(d) for d in self) + ("," if len(self) == 1 else "") + ")"

    __str__ = __repr__

    @property
    def is_symbolic(self) -> bool:
        """Whether an extent is an expression (over ``tex.var``/``tex.size_var``)."""
        return not all(isinstance(d, int) for d in self)


class Operation:
    """Base of PlaceholderOp, ComputeOp, ExternOp and ScanOp."""

    __slots__ = ("name", "tag", "attrs", "_outputs", "__weakref__")
    name: str
    tag: str
    attrs: dict[str, Any]

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError(f"{type(self).__name__} is immutable")

    def _init(self, **fields: Any) -> None:
        for k, v in fields.items():
            object.__setattr__(self, k, v)

    @property
    def num_outputs(self) -> int:
        return len(self._outputs)

    def output(self, index: int) -> Tensor:
        """The ``index``-th output tensor."""
        if not 0 <= index < len(self._outputs):
            raise IndexError(f"operation '{self.name}' has {len(self._outputs)} outputs, "
                             f"no output {index}")
        return self._outputs[index]

    @property
    def outputs(self) -> tuple[Tensor, ...]:
        return self._outputs

    @property
    def input_tensors(self) -> list[Tensor]:
        return []

    def __str__(self) -> str:
        from .printer import format_op
        return format_op(self)

    def __reduce__(self) -> Any:
        raise TypeError("tex operations cannot be pickled")


# A monotonic key, not state: it orders placeholders as the user created them (API.md §4:
# ``tex.build(tensors)`` takes the placeholders in creation order) and changes no result.
_CREATION_ORDER = itertools.count()


class PlaceholderOp(Operation):
    """An input tensor, fed with data when the program runs."""

    __slots__ = ("shape", "dtype", "seq")
    shape: tuple[int, ...]
    dtype: DType
    seq: int  # creation order: only used to order a built function's default arguments

    def __init__(self, name: str, shape: Sequence[int], dtype: DType,
                 seq: int | None = None) -> None:
        """``seq``: the creation order to take (a copy made by ``specialize`` keeps its
        original's place among the arguments)."""
        self._init(name=name, tag="", attrs={}, shape=Shape(shape), dtype=as_dtype(dtype),
                   seq=next(_CREATION_ORDER) if seq is None else seq)
        self._init(_outputs=(Tensor(self, 0),))

    def __repr__(self) -> str:
        return f"PlaceholderOp({self.name}, {self.shape}, {self.dtype})"


class ComputeOp(Operation):
    """``out[axis] = body`` for every point of the axes' domain."""

    __slots__ = ("axis", "reduce_axis", "_body", "_inputs", "_shape")
    axis: tuple[IterVar, ...]
    reduce_axis: tuple[IterVar, ...]

    def __init__(self, name: str, axis: Sequence[IterVar], body: Sequence[Expr],
                 tag: str = "", attrs: dict[str, Any] | None = None, *,
                 inputs: Sequence[Tensor] | None = None) -> None:
        """``inputs``: the tensors ``body`` reads in order of first appearance, when the
        caller knows them (``tex.ir.codec`` decodes an equal operation's): the body is then
        not walked for them."""
        body = tuple(body)
        if not body:
            raise InternalError(f"compute '{name}' without a body")
        reduce_axis: tuple[IterVar, ...] = ()
        if isinstance(body[0], Reduce):
            reduce_axis = body[0].axis
        axis = tuple(axis)
        # the shape is read for every TensorRead made and every index checked: kept
        self._init(name=name, tag=tag, attrs=dict(attrs or {}), axis=axis,
                   reduce_axis=reduce_axis, _body=body,
                   _shape=Shape(iv.dom.extent for iv in axis))
        self._init(_inputs=tuple(_collect_inputs(body) if inputs is None else inputs))
        self._init(_outputs=tuple(Tensor(self, i) for i in range(len(body))))

    @property
    def body(self) -> list[Expr]:
        """One expression per output (a fresh list, as TVM returns)."""
        return list(self._body)

    def output_body(self, value_index: int) -> Expr:
        """The expression of output ``value_index`` (``body[value_index]``, without copying
        the list)."""
        return self._body[value_index]

    @property
    def shape(self) -> tuple[int, ...]:
        return self._shape  # type: ignore[no-any-return]

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._inputs)

    def __repr__(self) -> str:
        return f"ComputeOp({self.name}, {self.shape})"


class ExternBuffer:
    """What ``te.extern``'s ``fcompute(ins, outs)`` gets for each input and output (TVM's
    ``Buffer``): its ``name``, ``shape``, ``dtype``, and where it sits (``role``: "in" or
    "out", ``index`` among those)."""

    __slots__ = ("name", "shape", "dtype", "role", "index")

    def __init__(self, name: str, shape: Sequence[int], dtype: DType, role: str,
                 index: int) -> None:
        object.__setattr__(self, "name", name)
        object.__setattr__(self, "shape", Shape(shape))
        object.__setattr__(self, "dtype", as_dtype(dtype))
        object.__setattr__(self, "role", role)
        object.__setattr__(self, "index", index)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("ExternBuffer is immutable")

    @property
    def ndim(self) -> int:
        return len(self.shape)  # type: ignore[attr-defined]

    def __repr__(self) -> str:
        return f"ExternBuffer({self.name}, {self.shape}, {self.dtype})"  # type: ignore


class PackedCall:
    """A call of a function outside tex (``tir.call_packed``): ``func`` is a name given to
    ``tex.register_func``, a Python callable (gets ``NDArray`` views of the buffers and
    Python numbers) or a ctypes function (gets data pointers and numbers); ``args`` are
    ``ExternBuffer``s, scalar expressions and strings, in call order."""

    __slots__ = ("func", "args")

    def __init__(self, func: Any, args: Sequence[Any]) -> None:
        object.__setattr__(self, "func", func)
        object.__setattr__(self, "args", tuple(args))

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("PackedCall is immutable")

    @property
    def func_name(self) -> str:
        """The function's name as printed: the registered name, or the callable's."""
        f = self.func  # type: ignore[attr-defined]
        if isinstance(f, str):
            return f
        return str(getattr(f, "__qualname__", None) or getattr(f, "__name__", None)
                   or type(f).__name__)

    def __repr__(self) -> str:
        return f"PackedCall({self.func_name}, {len(self.args)} args)"  # type: ignore


class ExternOp(Operation):
    """Outputs written whole by one call of a function outside tex (``te.extern``): it
    reads every element of each input and writes every element of each output. Its
    inputs are computed in full before the call; it has no loops to schedule."""

    __slots__ = ("inputs", "shapes", "dtypes", "call", "in_buffers", "out_buffers")
    inputs: tuple[Tensor, ...]
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[DType, ...]
    call: PackedCall
    in_buffers: tuple[ExternBuffer, ...]
    out_buffers: tuple[ExternBuffer, ...]

    axis: tuple[IterVar, ...] = ()  # (class attributes: a stage over it has no loops)
    reduce_axis: tuple[IterVar, ...] = ()

    def __init__(self, name: str, inputs: Sequence[Tensor], in_buffers: Sequence[ExternBuffer],
                 out_buffers: Sequence[ExternBuffer], call: PackedCall, tag: str = "",
                 attrs: dict[str, Any] | None = None) -> None:
        if len(inputs) != len(in_buffers) or not out_buffers:
            raise InternalError(f"extern '{name}': {len(inputs)} inputs, {len(in_buffers)} "
                                f"input buffers, {len(out_buffers)} outputs")
        self._init(name=name, tag=tag, attrs=dict(attrs or {}), inputs=tuple(inputs),
                   in_buffers=tuple(in_buffers), out_buffers=tuple(out_buffers),
                   shapes=tuple(b.shape for b in out_buffers),
                   dtypes=tuple(b.dtype for b in out_buffers), call=call)
        self._init(_outputs=tuple(Tensor(self, i) for i in range(len(out_buffers))))

    @property
    def shape(self) -> tuple[int, ...]:
        """The first output's shape (``Tensor.shape`` reads each output's own)."""
        return self.shapes[0]

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self.inputs)

    def with_inputs(self, inputs: Sequence[Tensor]) -> ExternOp:
        """The same call over other input tensors (of the same shapes and dtypes)."""
        inputs = tuple(inputs)
        for old, new in zip(self.inputs, inputs, strict=True):
            if old.shape != new.shape or old.dtype != new.dtype:
                raise InternalError(f"extern '{self.name}': input '{old.name}' replaced by "
                                    f"'{new.name}' of another shape or dtype")
        return ExternOp(self.name, inputs, self.in_buffers, self.out_buffers, self.call,
                        self.tag, self.attrs)

    @property
    def input_placeholders(self) -> tuple[ExternBuffer, ...]:
        """TVM's name of ``in_buffers``."""
        return self.in_buffers

    @property
    def output_placeholders(self) -> tuple[ExternBuffer, ...]:
        """TVM's name of ``out_buffers``."""
        return self.out_buffers

    def buffer_tensor(self, buf: ExternBuffer) -> Tensor:
        """The tensor behind one of this operation's buffers."""
        return self.inputs[buf.index] if buf.role == "in" else self._outputs[buf.index]

    def __repr__(self) -> str:
        return f"ExternOp({self.name}, {self.shapes})"


class ScanOp(Operation):
    """A recurrence over time, the first axis (``te.scan``): output ``k`` holds
    ``init[k]`` in its first ``init_len`` rows, then row ``t`` of ``update[k]`` for each
    ``t`` of ``scan_axis`` (``[init_len, T)``) in increasing order, where the update reads
    ``state_placeholder[k]`` (at earlier rows only) as the output so far.

    ``body_ops`` holds the operations computed at each step: those between the state
    placeholders and the updates (every one depends on a state); the operations they read
    otherwise are computed before the scan. The body is the scan's own, as an expression is
    a compute's: ``input_tensors`` are the inits and the tensors the body reads from
    outside, so a walk of the DAG sees neither the body nor the state placeholders."""

    __slots__ = ("scan_axis", "init", "update", "state_placeholder", "inputs", "body_ops",
                 "shapes", "dtypes", "_reads")
    scan_axis: IterVar
    init: tuple[Tensor, ...]
    update: tuple[Tensor, ...]
    state_placeholder: tuple[Tensor, ...]
    inputs: tuple[Tensor, ...]
    body_ops: tuple[Operation, ...]  # producers first
    shapes: tuple[tuple[int, ...], ...]
    dtypes: tuple[DType, ...]

    axis: tuple[IterVar, ...] = ()  # (class attributes: a stage over it has no loops)
    reduce_axis: tuple[IterVar, ...] = ()

    def __init__(self, name: str, scan_axis: IterVar, init: Sequence[Tensor],
                 update: Sequence[Tensor], state_placeholder: Sequence[Tensor],
                 inputs: Sequence[Tensor], body_ops: Sequence[Operation], tag: str = "",
                 attrs: dict[str, Any] | None = None) -> None:
        if not (len(init) == len(update) == len(state_placeholder) >= 1):
            raise InternalError(f"scan '{name}': {len(init)} inits, {len(update)} updates, "
                                f"{len(state_placeholder)} states")
        body_set = set(body_ops)
        reads: dict[Tensor, None] = dict.fromkeys(init)
        # an update that reads no state is computed before the scan (its rows are copied)
        reads.update((u, None) for u in update if u.op not in body_set)
        for op in body_ops:
            for t in op.input_tensors:
                if t.op not in body_set and t not in state_placeholder:
                    reads.setdefault(t, None)
        self._init(name=name, tag=tag, attrs=dict(attrs or {}), scan_axis=scan_axis,
                   init=tuple(init), update=tuple(update),
                   state_placeholder=tuple(state_placeholder), inputs=tuple(inputs),
                   body_ops=tuple(body_ops), shapes=tuple(s.shape for s in state_placeholder),
                   dtypes=tuple(s.dtype for s in state_placeholder), _reads=tuple(reads))
        self._init(_outputs=tuple(Tensor(self, i) for i in range(len(state_placeholder))))

    @property
    def shape(self) -> tuple[int, ...]:
        """The first output's shape (``Tensor.shape`` reads each output's own)."""
        return self.shapes[0]

    @property
    def init_len(self) -> int:
        """The rows the inits fill."""
        return self.init[0].shape[0]

    @property
    def input_tensors(self) -> list[Tensor]:
        return list(self._reads)

    def replaced(self, mapping: Mapping[Tensor, Tensor]) -> ScanOp:
        """The same recurrence reading ``mapping[t]`` wherever it read ``t`` (an init, or a
        tensor its body reads from outside; same shapes and dtypes): the body operations
        that read one are rebuilt (itself when none is read)."""
        from .visit import rewrite

        if not any(t in mapping for t in self.input_tensors):
            return self
        table: dict[Tensor, Tensor] = dict(mapping)
        body: list[Operation] = []
        for op in self.body_ops:
            if not any(t in table for t in op.input_tensors):
                body.append(op)
                continue
            assert isinstance(op, ComputeOp)

            def moved(n: Expr) -> Expr | None:
                if isinstance(n, TensorRead) and n.tensor in table:
                    return TensorRead(table[n.tensor], n.indices)
                return None

            new = ComputeOp(op.name, op.axis, [rewrite(b, moved) for b in op.body], op.tag,
                            op.attrs)
            table.update(zip(op.outputs, new.outputs))
            body.append(new)
        return ScanOp(self.name, self.scan_axis, [table.get(t, t) for t in self.init],
                      [table.get(t, t) for t in self.update], self.state_placeholder,
                      [table.get(t, t) for t in self.inputs], body, self.tag, self.attrs)

    def __repr__(self) -> str:
        return f"ScanOp({self.name}, {self.shapes})"


def _collect_inputs(body: Sequence[Expr]) -> list[Tensor]:
    """Tensors read by the body, in order of first appearance (deterministic)."""
    from .visit import post_order
    seen: dict[Tensor, None] = {}
    for node in post_order(*body):
        if isinstance(node, TensorRead):
            seen.setdefault(node.tensor, None)
    return list(seen)


class Tensor:
    """One output of an operation: ``shape``, ``dtype``, ``name``; ``T[i, j]`` reads it."""

    __slots__ = ("op", "value_index", "__weakref__")
    op: Operation
    value_index: int
    _is_tex_tensor = True  # lets scalar-expression operators defer to ours
    __array_ufunc__ = None  # NumPy scalars defer to our reflected operators (np.float32(2) * A)

    def __init__(self, op: Operation, value_index: int) -> None:
        object.__setattr__(self, "op", op)
        object.__setattr__(self, "value_index", value_index)

    def __setattr__(self, name: str, value: Any) -> None:
        raise AttributeError("Tensor is immutable")

    # -- properties -------------------------------------------------------------------
    @property
    def shape(self) -> tuple[int, ...]:
        op = self.op
        if op.__class__ is ExternOp or op.__class__ is ScanOp:  # outputs of their own shapes
            return op.shapes[self.value_index]  # type: ignore[attr-defined,no-any-return]
        return op.shape  # type: ignore[attr-defined,no-any-return]

    @property
    def ndim(self) -> int:
        return len(self.shape)

    @property
    def size(self) -> int:
        """The number of elements (an expression when the shape is symbolic)."""
        n = 1
        for d in self.shape:
            n = d * n if isinstance(d, Expr) else n * d
        return n

    @property
    def dtype(self) -> DType:
        op = self.op
        if isinstance(op, PlaceholderOp):
            return op.dtype
        if op.__class__ is ExternOp or op.__class__ is ScanOp:
            return op.dtypes[self.value_index]  # type: ignore[attr-defined,no-any-return]
        return op._body[self.value_index].dtype  # type: ignore[attr-defined,no-any-return]

    @property
    def name(self) -> str:
        if self.op.num_outputs == 1:
            return self.op.name
        return f"{self.op.name}.v{self.value_index}"

    # -- indexing -----------------------------------------------------------------------
    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        if len(indices) > self.ndim:
            raise ValueError(f"tensor '{self.name}' has {self.ndim} dimensions "
                             f"{self.shape} but was indexed with {len(indices)} indices")
        if len(indices) < self.ndim:
            return TensorSlice(self, tuple(_index_expr(self, d, ix)
                                           for d, ix in enumerate(indices)))
        return TensorRead(self, [_index_expr(self, d, ix) for d, ix in enumerate(indices)])

    def __call__(self, *indices: Any) -> Expr:
        """``T(i, j)`` is the same as ``T[i, j]`` (TVM spelling)."""
        if len(indices) != self.ndim:
            raise ValueError(f"tensor '{self.name}' has {self.ndim} dimensions "
                             f"{self.shape} but was called with {len(indices)} indices")
        return self[tuple(indices)]  # type: ignore[no-any-return]

    def __iter__(self) -> Iterator[Any]:
        raise TypeError(f"tensor '{self.name}' is not iterable; index it with T[i, j]")

    def __len__(self) -> int:
        if not self.shape:
            raise TypeError(f"len() of 0-d tensor '{self.name}'")
        return self.shape[0]

    def __bool__(self) -> bool:
        return True

    # -- whole-tensor arithmetic, dispatched to topi --------------------------------------
    def _apply(self, key: str, *args: Any) -> Any:
        fn = TENSOR_OPERATORS.get(key)
        if fn is None:
            raise InternalError(f"tensor operator {key} not registered (is tex.topi imported?)")
        return fn(*args)

    def __add__(self, o: Any) -> Tensor:
        return self._apply("add", self, o)  # type: ignore[no-any-return]

    def __radd__(self, o: Any) -> Tensor:
        return self._apply("add", o, self)  # type: ignore[no-any-return]

    def __sub__(self, o: Any) -> Tensor:
        return self._apply("subtract", self, o)  # type: ignore[no-any-return]

    def __rsub__(self, o: Any) -> Tensor:
        return self._apply("subtract", o, self)  # type: ignore[no-any-return]

    def __mul__(self, o: Any) -> Tensor:
        return self._apply("multiply", self, o)  # type: ignore[no-any-return]

    def __rmul__(self, o: Any) -> Tensor:
        return self._apply("multiply", o, self)  # type: ignore[no-any-return]

    def __truediv__(self, o: Any) -> Tensor:
        return self._apply("divide", self, o)  # type: ignore[no-any-return]

    def __rtruediv__(self, o: Any) -> Tensor:
        return self._apply("divide", o, self)  # type: ignore[no-any-return]

    def __floordiv__(self, o: Any) -> Tensor:
        return self._apply("floor_divide", self, o)  # type: ignore[no-any-return]

    def __rfloordiv__(self, o: Any) -> Tensor:
        return self._apply("floor_divide", o, self)  # type: ignore[no-any-return]

    def __mod__(self, o: Any) -> Tensor:
        return self._apply("floor_mod", self, o)  # type: ignore[no-any-return]

    def __rmod__(self, o: Any) -> Tensor:
        return self._apply("floor_mod", o, self)  # type: ignore[no-any-return]

    def __pow__(self, o: Any) -> Tensor:
        return self._apply("power", self, o)  # type: ignore[no-any-return]

    def __rpow__(self, o: Any) -> Tensor:
        return self._apply("power", o, self)  # type: ignore[no-any-return]

    def __neg__(self) -> Tensor:
        return self._apply("negative", self)  # type: ignore[no-any-return]

    def __matmul__(self, o: Any) -> Tensor:
        return self._apply("matmul", self, o)  # type: ignore[no-any-return]

    def astype(self, dtype: Any) -> Tensor:
        """This tensor converted elementwise to ``dtype``."""
        return self._apply("astype", self, dtype)  # type: ignore[no-any-return]

    # -- printing -------------------------------------------------------------------------
    def __str__(self) -> str:
        from .printer import format_tensor
        return format_tensor(self)

    def __repr__(self) -> str:
        return f"Tensor(name={self.name!r}, shape={self.shape}, dtype={self.dtype.name})"

    def _repr_html_(self) -> str:
        """Jupyter: the tensor's equation, shape and dtype (``tex.viz.DAG`` draws the DAG)."""
        from .printer import format_tensor
        return (f"<pre>{html.escape(format_tensor(self))}</pre>"
                f"<small>{self.dtype.name}{list(self.shape)}</small>")

    def __reduce__(self) -> Any:
        raise TypeError("tex tensors cannot be pickled")


class TensorSlice:
    """``T[i]`` of a tensor with more dimensions: index it further, ``T[i][j]``."""

    __slots__ = ("tensor", "indices")

    def __init__(self, tensor: Tensor, indices: tuple[Expr, ...]) -> None:
        self.tensor = tensor
        self.indices = indices

    @property
    def name(self) -> str:
        return self.tensor.name

    @property
    def shape(self) -> tuple[int, ...]:
        return self.tensor.shape[len(self.indices):]

    def __getitem__(self, indices: Any) -> Any:
        if not isinstance(indices, tuple):
            indices = (indices,)
        return self.tensor[(*self.indices, *indices)]

    def __repr__(self) -> str:
        return f"TensorSlice({self.tensor.name}[{', '.join(map(str, self.indices))}, ...])"

    def partial_index_error(self) -> TypeError:
        """The error for using this partial read as a value: how many indices it needs."""
        t, k = self.tensor, len(self.indices)
        given = ", ".join(map(str, self.indices))
        more = ", ".join(f"j{d}" for d in range(k, t.ndim))
        return TypeError(
            f"'{t.name}[{given}]' indexes {k} of the {t.ndim} dimensions of '{t.name}' (shape "
            f"{t.shape}): '{t.name}' needs {t.ndim} indices to give a value, e.g. "
            f"{t.name}[{given}, {more}]")

    def _refuse(self, *_: Any) -> Any:
        raise self.partial_index_error()

    # arithmetic on a partial read is a mistake (A[i] * 2.0 on a 2-D A): say so, not
    # Python's "unsupported operand type(s)"
    __add__ = __radd__ = __sub__ = __rsub__ = __mul__ = __rmul__ = _refuse
    __truediv__ = __rtruediv__ = __floordiv__ = __rfloordiv__ = _refuse
    __mod__ = __rmod__ = __pow__ = __rpow__ = __and__ = __rand__ = __or__ = __ror__ = _refuse
    __lt__ = __le__ = __gt__ = __ge__ = __neg__ = __pos__ = __abs__ = __invert__ = _refuse
    __bool__ = __float__ = __int__ = __index__ = astype = _refuse


def _index_expr(tensor: Tensor, dim: int, index: Any) -> Expr:
    """Check one index: an integer expression, in bounds when constant."""
    if isinstance(index, slice):
        raise TypeError(f"tensor '{tensor.name}': slices are not supported as indices "
                        f"(dimension {dim}); index with expressions or use topi ops")
    if isinstance(index, float):
        raise TypeError(f"tensor '{tensor.name}': index {index!r} in dimension {dim} is a "
                        "float; indices must be integer expressions")
    e = as_expr(index, f"index {dim} of tensor '{tensor.name}'")
    if not e.dtype.is_integral or e.dtype.is_bool:
        raise TypeError(f"tensor '{tensor.name}': index {e} in dimension {dim} has dtype "
                        f"{e.dtype}; indices must be integer expressions (use "
                        "x.astype('int32') to convert)")
    extent = tensor.shape[dim]
    if isinstance(e, Const) and (e.value < 0 or isinstance(extent, int) and e.value >= extent):
        raise ValueError(f"tensor '{tensor.name}': constant index {e.value} is out of bounds "
                         f"for dimension {dim} of extent {tensor.shape[dim]}")
    return e
