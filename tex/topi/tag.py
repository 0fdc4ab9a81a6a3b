"""Op tags, TVM's ``topi.tag``: the string in ``T.op.tag`` that says what kind of op made ``T``.

Generic kinds, from the most to the least specific (as in TVM):

- ``ELEMWISE`` ("elemwise"): ``out[idx] = f(x[idx], ...)`` over one shape: unary ops, a
  tensor with a scalar (``topi.add(A, 2.0)``), casts, fills, ``elemwise_sum``;
- ``BROADCAST`` ("broadcast"): each output axis maps in order to an input axis or to none
  (``topi.add(A, B)`` of two tensors, ``broadcast_to``, ``where``);
- ``INJECTIVE`` ("injective"): each output point reads one input point (reshape, transpose,
  take, concatenate, ``"injective,pad"`` for ``nn.pad``);
- ``COMM_REDUCE`` / ``COMM_REDUCE_IDX``: commutative reductions (``sum``; ``argmax``).

Other ops carry their own tag (``"conv2d_nchw"``, ``"pool_max"``, ``"matmul"``, ...). A
composed tag puts the generic kind first (``"injective,pad"``), so the predicates below test
prefixes, as TVM's do.
"""
from __future__ import annotations

__all__ = [
    "BROADCAST",
    "COMM_REDUCE",
    "COMM_REDUCE_IDX",
    "ELEMWISE",
    "INJECTIVE",
    "MATMUL",
    "is_broadcast",
    "is_injective",
]

ELEMWISE = "elemwise"
BROADCAST = "broadcast"
INJECTIVE = "injective"
COMM_REDUCE = "comm_reduce"
COMM_REDUCE_IDX = "comm_reduce_idx"
MATMUL = "matmul"  # tex's contractions (tensordot, matmul, einsum); TVM has no generic one


def is_broadcast(tag: str) -> bool:
    """Whether ``tag`` marks an elementwise or broadcast op (a composed tag counts by its
    first part: ``"elemwise,relu"``)."""
    return isinstance(tag, str) and tag.startswith((ELEMWISE, BROADCAST))


def is_injective(tag: str) -> bool:
    """Whether ``tag`` marks an elementwise, broadcast or injective op (what a schedule may
    inline into its consumer)."""
    return isinstance(tag, str) and tag.startswith((ELEMWISE, BROADCAST, INJECTIVE))
