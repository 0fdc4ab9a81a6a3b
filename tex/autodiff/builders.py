"""Small builders shared by reverse and forward mode: fresh axes and names, computes,
the identity head, zeros (the symbolic ``Zero`` and the tensor), and cheap-to-inline
tests."""
from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from ..dtype import DType, boolean, int32
from ..ir import fold
from ..ir.expr import Const, Expr, IterVar, Op, Range, Reduce, TensorRead, Var
from ..ir.tensor import ComputeOp, Tensor
from ..ir.verify import check_compute_body
from ..ir.visit import post_order, substitute
from ..topi.utils import index_names

__all__ = ["INLINE_MAX_NODES", "Zero", "fresh_names", "grad_name", "identity_head", "is_cheap",
           "make_compute", "new_axes", "read_inlined", "reads_of", "zero_tensor"]


# an elementwise head with at most this many nodes and one float read is inlined
INLINE_MAX_NODES = 48

def new_axes(names: Sequence[str], shape: Sequence[int]) -> list[IterVar]:
    """Fresh data-parallel axes (an IterVar belongs to one op)."""
    return [IterVar(Var(n, int32, kind="axis"), Range(0, d)) for n, d in zip(names, shape)]

def make_compute(name: str, shape: Sequence[int], body_fn, names: Sequence[str] | None = None,
                 tag: str = "gradient") -> Tensor:
    """A compute tensor from ``body_fn(axis_vars) -> Expr`` (checked like te.compute)."""
    names = list(names) if names is not None else index_names(len(shape))
    axis = new_axes(names, shape)
    body = body_fn(tuple(iv.var for iv in axis))
    check_compute_body(name, axis, [body])
    return ComputeOp(name, axis, [body], tag=tag).output(0)

_NAME_POOL = ("p", "q", "r", "s", "t", "u", "v", "w", "i", "j", "k", "l", "m", "n")

def grad_name(name: str) -> str:
    """A tensor name usable as an identifier (multi-output tensors are named ``op.v1``)."""
    return name.replace(".", "_")

def fresh_names(n: int, taken: set[str]) -> list[str]:
    """``n`` readable index names, avoiding ``taken`` (the forward op's variable names,
    so a printed gradient never shows two different variables with one name)."""
    out: list[str] = []
    pool = [c for c in _NAME_POOL if c not in taken]
    extra = 0
    while len(out) < n:
        if pool:
            out.append(pool.pop(0))
        else:
            name = f"i{extra}"
            extra += 1
            if name not in taken:
                out.append(name)
    return out

def identity_head(out: Tensor) -> Tensor:
    """``I[pre, o] = (pre == o)``: the head whose vector-Jacobian product is the Jacobian."""
    n = out.ndim
    names = [f"{c}0" for c in index_names(n)] + index_names(n) if n else []

    def body(v: tuple[Expr, ...]) -> Expr:
        cond: Expr = Const(True, boolean)
        for a, b in zip(v[:n], v[n:]):
            cond = fold.binary(Op.AND, cond, fold.compare(Op.EQ, a, b))
        return fold.select(cond, Const(1.0, out.dtype), Const(0.0, out.dtype))

    return make_compute(grad_name(f"{out.name}_identity"), out.shape + out.shape, body, names,
                        tag="identity")

def zero_tensor(shape: Sequence[int], dtype: DType, name: str) -> Tensor:
    """A tensor of zeros (built only where a caller needs a real tensor)."""
    return make_compute(name, shape, lambda v: Const(0.0, dtype), tag="zeros")

@dataclass(frozen=True)
class Zero:
    """A symbolic zero adjoint contribution (as JAX's ``Zero``): no tensor is built for
    it, and the adjoint loop skips it. ``materialize`` makes the tensor where one must
    exist (``DiffBuildingBlock``'s result, a gradient the caller asked for)."""

    shape: tuple[int, ...]
    dtype: DType

    def materialize(self, name: str) -> Tensor:
        return zero_tensor(self.shape, self.dtype, name)

def is_cheap(t: Tensor) -> bool:
    """Whether ``t`` is an elementwise compute small enough to inline into a consumer: at
    most ``INLINE_MAX_NODES`` nodes and one read of a float tensor with an index (a 0-d
    tensor's value, such as a scalar loss's head, is loaded once, as a constant)."""
    op = t.op
    if not isinstance(op, ComputeOp) or op.num_outputs != 1:
        return False
    body = op.body[0]
    if isinstance(body, Reduce):
        return False
    n = 0
    float_reads = 0
    for node in post_order(body):
        n += 1
        if isinstance(node, TensorRead) and node.dtype.is_float and node.indices:
            float_reads += 1
    return n <= INLINE_MAX_NODES and float_reads <= 1

def read_inlined(t: Tensor, indices: Sequence[Expr]) -> Expr:
    """``t[indices]``, with the body of ``t`` substituted when it is cheap."""
    if is_cheap(t):
        op = t.op
        return substitute(op.body[0], {iv.var: ix for iv, ix in zip(op.axis, indices)})
    return TensorRead(t, indices)

def reads_of(inp: Tensor) -> Callable[[Expr], bool]:
    """A test for the reads of ``inp`` (the leaves ``partials``/``tangent`` take)."""
    return lambda n: isinstance(n, TensorRead) and n.tensor is inp
