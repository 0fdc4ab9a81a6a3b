"""Fully connected layers: ``dense`` (X·Wᵀ + B) and ``batch_matmul``, as in TVM's topi."""
from __future__ import annotations

from typing import Any

from ... import te
from ...ir.expr import Expr
from ...ir.tensor import Tensor
from ..utils import broadcast_indices, broadcast_shape
from .transform import check_bool, check_ndim, check_same_dtype, out_dtype_of

__all__ = ["batch_matmul", "dense"]


def dense(data: Tensor, weight: Tensor, bias: Tensor | None = None,
          out_dtype: Any = None) -> Tensor:
    """A fully connected layer: ``Y[i, j] = sum_k X[i, k] * W[j, k] (+ B[j])``.

    The weight is stored (out_features, in_features), as in TVM and PyTorch.

    Parameters
    ----------
    data : Tensor
        2-D ``(n, k)``.
    weight : Tensor
        2-D ``(m, k)``.
    bias : Tensor, optional
        1-D ``(m,)``, added in a second compute.
    out_dtype : str, optional
        Accumulation and output dtype (default: the inputs' dtype).

    Returns
    -------
    Tensor
        ``(n, m)``: ``T_dense``, or ``T_add`` (which reads ``T_dense``) with a bias.

    Raises
    ------
    TypeError
        An argument is not a Tensor.
    ValueError
        Wrong ranks, mismatched inner or bias extents, differing dtypes.

    Example
    -------
    >>> X = tex.placeholder((32, 100), name="X")
    >>> W = tex.placeholder((10, 100), name="W")
    >>> print(topi.nn.dense(X, W))
    T_dense[i, j] = sum(X[i, k] * W[j, k], k in [0, 100))
    """
    op = "topi.nn.dense"
    data = check_ndim(data, op, "data", 2, "(n, k)")
    weight = check_ndim(weight, op, "weight", 2, "(m, k)")
    args = {"data": data, "weight": weight}
    if bias is not None:
        args["bias"] = check_ndim(bias, op, "bias", 1, "(m,)")
    check_same_dtype(op, **args)
    (n, k_), (m, kw) = data.shape, weight.shape
    if kw != k_:
        raise ValueError(f"{op}: data has {k_} features but weight expects {kw} "
                         f"(data {data.shape}, weight {weight.shape}; weight is (m, k))")
    if bias is not None and bias.shape != (m,):
        raise ValueError(f"{op}: bias must have shape ({m},) to match weight {weight.shape}, "
                         f"got {bias.shape}")
    dtype = out_dtype_of(out_dtype, data.dtype, op)
    k = te.reduce_axis((0, k_), name="k")
    out = te.compute(
        (n, m),
        lambda i, j: te.sum(data[i, k].astype(dtype) * weight[j, k].astype(dtype), axis=k),
        name="T_dense", tag="dense")
    if bias is None:
        return out
    return te.compute((n, m), lambda i, j: out[i, j] + bias[j].astype(dtype), name="T_add",
                      tag="broadcast")


def batch_matmul(tensor_a: Tensor, tensor_b: Tensor, transpose_a: bool = False,
                 transpose_b: bool = True, out_dtype: Any = None) -> Tensor:
    """Batched matrix product; by default ``C[b] = A[b] · B[b]ᵀ`` (TVM's convention).

    Parameters
    ----------
    tensor_a : Tensor
        3-D ``(batch, M, K)``, or ``(batch, K, M)`` with ``transpose_a``.
    tensor_b : Tensor
        3-D ``(batch, N, K)`` when ``transpose_b`` (the default), else ``(batch, K, N)``.
    transpose_a, transpose_b : bool
        Whether the operand is stored transposed. ``transpose_b=False`` gives ``A · B``.
    out_dtype : str, optional
        Accumulation and output dtype (default: the inputs' dtype).

    Returns
    -------
    Tensor
        ``T_batch_matmul_NT`` (letters: transposition of A, of B) of shape
        ``(batch, M, N)``; a batch extent of 1 broadcasts against the other.

    Raises
    ------
    TypeError
        An argument is not a Tensor.
    ValueError
        Not 3-D, batch extents that differ and are not 1, mismatched K, differing dtypes.

    Example
    -------
    >>> A = tex.placeholder((32, 128, 64), name="A")
    >>> B = tex.placeholder((32, 64, 128), name="B")
    >>> topi.nn.batch_matmul(A, B, transpose_b=False).shape
    (32, 128, 128)
    """
    op = "topi.nn.batch_matmul"
    transpose_a = check_bool(transpose_a, op, "transpose_a")
    transpose_b = check_bool(transpose_b, op, "transpose_b")
    lhs = check_ndim(tensor_a, op, "tensor_a", 3,
                     "(batch, K, M)" if transpose_a else "(batch, M, K)")
    rhs = check_ndim(tensor_b, op, "tensor_b", 3,
                     "(batch, N, K)" if transpose_b else "(batch, K, N)")
    check_same_dtype(op, tensor_a=lhs, tensor_b=rhs)
    (batch_a, a1, a2), (batch_b, b1, b2) = lhs.shape, rhs.shape
    m, ka = (a2, a1) if transpose_a else (a1, a2)
    n, kb = (b1, b2) if transpose_b else (b2, b1)
    if ka != kb:
        raise ValueError(f"{op}: the reduced extents differ: tensor_a {lhs.shape} has K={ka}, "
                         f"tensor_b {rhs.shape} has K={kb} (transpose_a={transpose_a}, "
                         f"transpose_b={transpose_b})")
    (batch,) = broadcast_shape((batch_a,), (batch_b,), op=op)
    dtype = out_dtype_of(out_dtype, lhs.dtype, op)
    k = te.reduce_axis((0, ka), name="k")

    def fcompute(b: Expr, i: Expr, j: Expr) -> Expr:
        # a batch extent of 1 broadcasts: that operand always reads batch 0
        (b_lhs,) = broadcast_indices((b,), (batch_a,))
        (b_rhs,) = broadcast_indices((b,), (batch_b,))
        x = lhs[b_lhs, k, i] if transpose_a else lhs[b_lhs, i, k]
        y = rhs[b_rhs, j, k] if transpose_b else rhs[b_rhs, k, j]
        return te.sum(x.astype(dtype) * y.astype(dtype), axis=k)

    name = f"T_batch_matmul_{'T' if transpose_a else 'N'}{'T' if transpose_b else 'N'}"
    return te.compute((batch, m, n), fcompute, name=name, tag="batch_matmul")
