"""Contractions: tensordot, matmul and einsum.

Each is one sum over a product of reads, with one reduce axis per contracted dimension:

    T_matmul[i, j] = sum(A[i, k] * B[k, j], k in [0, 5))

Outputs are named ``T_<op>`` (``name=`` overrides) and tagged ``MATMUL``. Importing this
module installs ``A @ B`` on tensors (``matmul``).
"""
from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from .. import te
from ..dtype import int32
from ..ir.expr import Const, Expr
from ..ir.tensor import Tensor, register_tensor_operators
from .tag import MATMUL
from .utils import (
    Index,
    broadcast_indices,
    broadcast_shape,
    check_tensor,
    compute_nd,
    int_list,
    is_int,
    normalize_axis_one,
    reduce_axes,
)

__all__ = ["einsum", "einsum_labels", "matmul", "tensordot"]


def _contract(shape: Sequence[int], reduce_extents: Sequence[int],
              factors: Callable[[Index, Index], list[Expr]], name: str,
              names: Sequence[str] | None = None,
              reduce_names: Sequence[str] | None = None) -> Tensor:
    """``T[idx] = sum(prod(factors(idx, ks)), ks)`` (no sum when nothing is contracted)."""
    def body(idx: Index) -> Expr:
        ks = reduce_axes(reduce_extents, reduce_names)
        terms = factors(idx, tuple(k.var for k in ks))
        out = terms[0]
        for t in terms[1:]:
            out = out * t
        return te.sum(out, axis=ks) if ks else out  # type: ignore[no-any-return]

    return compute_nd(shape, body, name, MATMUL, names)


def _tensordot_axes(a: Tensor, b: Tensor, axes: Any) -> tuple[list[int], list[int]]:
    op = "topi.tensordot"
    if is_int(axes):
        n = int(axes)
        if not 0 <= n <= min(a.ndim, b.ndim):
            raise ValueError(f"{op}: axes={n} needs 0 <= axes <= min(a.ndim, b.ndim) = "
                             f"{min(a.ndim, b.ndim)} (shapes {a.shape} and {b.shape})")
        return list(range(a.ndim - n, a.ndim)), list(range(n))
    if not isinstance(axes, (list, tuple)) or len(axes) != 2:
        raise TypeError(f"{op}: axes must be an int or a pair of axis lists, got {axes!r}")
    a_axes = [normalize_axis_one(d, a.ndim, op) for d in int_list(axes[0], op, "axes[0]")]
    b_axes = [normalize_axis_one(d, b.ndim, op) for d in int_list(axes[1], op, "axes[1]")]
    if len(a_axes) != len(b_axes):
        raise ValueError(f"{op}: axes {axes!r} pair {len(a_axes)} axes of a with "
                         f"{len(b_axes)} axes of b")
    if len(set(a_axes)) != len(a_axes) or len(set(b_axes)) != len(b_axes):
        raise ValueError(f"{op}: axes {axes!r} repeat an axis")
    return a_axes, b_axes


def tensordot(a: Tensor, b: Tensor, axes: Any = 2, name: str | None = None) -> Tensor:
    """The sum of products over paired axes of ``a`` and ``b`` (``numpy.tensordot``).

    Parameters
    ----------
    a, b : Tensor
    axes : int or (sequence of int, sequence of int)
        ``N``: the last N axes of ``a`` with the first N of ``b``; or the two lists of
        axes to pair.
    name : str, optional
        Output name (default ``T_tensordot``).

    Returns
    -------
    Tensor
        Shape: the free axes of ``a``, then those of ``b``.

    Raises
    ------
    ValueError
        Paired axes differ in extent, repeat, or are out of range.
    """
    op = "topi.tensordot"
    check_tensor(a, op, "a")
    check_tensor(b, op, "b")
    a_axes, b_axes = _tensordot_axes(a, b, axes)
    for da, db in zip(a_axes, b_axes):
        if a.shape[da] != b.shape[db]:
            raise ValueError(f"{op}: axis {da} of a (shape {a.shape}) and axis {db} of b "
                             f"(shape {b.shape}) differ in extent")
    a_free = [d for d in range(a.ndim) if d not in a_axes]
    b_free = [d for d in range(b.ndim) if d not in b_axes]

    def place(ndim: int, free: list[int], contracted: list[int], free_idx: Index,
              ks: Index) -> Index:
        src: list[Expr] = [Const(0, int32)] * ndim
        for d, ix in zip(free, free_idx):
            src[d] = ix
        for d, k in zip(contracted, ks):
            src[d] = k
        return tuple(src)

    def factors(idx: Index, ks: Index) -> list[Expr]:
        n = len(a_free)
        return [a[place(a.ndim, a_free, a_axes, idx[:n], ks)],
                b[place(b.ndim, b_free, b_axes, idx[n:], ks)]]

    shape = (*(a.shape[d] for d in a_free), *(b.shape[d] for d in b_free))
    return _contract(shape, [a.shape[d] for d in a_axes], factors, name or "T_tensordot")


def matmul(a: Tensor, b: Tensor, name: str | None = None) -> Tensor:
    """The matrix product with NumPy's ``matmul`` semantics.

    A 1-D ``a`` is a row vector and a 1-D ``b`` a column vector (that axis is removed
    from the result); leading (batch) axes broadcast.

    Parameters
    ----------
    a, b : Tensor
        At least 1-D; the last axis of ``a`` pairs with the second-to-last of ``b`` (the
        only axis of a 1-D ``b``).
    name : str, optional
        Output name (default ``T_matmul``).

    Returns
    -------
    Tensor
        ``T[..., i, j] = sum(a[..., i, k] * b[..., k, j], k)``.

    Raises
    ------
    ValueError
        A 0-d operand, contracted extents differ, or batch shapes do not broadcast.
    """
    op = "topi.matmul"
    check_tensor(a, op, "a")
    check_tensor(b, op, "b")
    for arg, t in (("a", a), ("b", b)):
        if t.ndim == 0:
            raise ValueError(f"{op}: argument '{arg}' ('{t.name}') is 0-d; matmul needs "
                             "at least 1-D operands (use topi.multiply for scalars)")
    a_shape = (1, *a.shape) if a.ndim == 1 else a.shape
    b_shape = (*b.shape, 1) if b.ndim == 1 else b.shape
    if a_shape[-1] != b_shape[-2]:
        raise ValueError(f"{op}: shapes {a.shape} and {b.shape} do not match: the last "
                         f"axis of a ({a_shape[-1]}) must equal the "
                         f"{'only' if b.ndim == 1 else 'second-to-last'} axis of b "
                         f"({b_shape[-2]})")
    batch = broadcast_shape(a_shape[:-2], b_shape[:-2], op=op)
    nb = len(batch)
    rows = (a_shape[-2],) if a.ndim > 1 else ()
    cols = (b_shape[-1],) if b.ndim > 1 else ()

    def factors(idx: Index, ks: Index) -> list[Expr]:
        (k,) = ks
        batch_idx, rest = idx[:nb], idx[nb:]
        i, j = rest[:len(rows)], rest[len(rows):]
        a_idx = (*broadcast_indices(batch_idx, a.shape[:-2]), *i, k) if a.ndim > 1 else (k,)
        b_idx = (*broadcast_indices(batch_idx, b.shape[:-2]), k, *j) if b.ndim > 1 else (k,)
        return [a[a_idx], b[b_idx]]

    return _contract((*batch, *rows, *cols), [a_shape[-1]], factors, name or "T_matmul")


_ELLIPSIS = "..."


def _split_term(term: str, subscripts: str) -> list[str]:
    """A term as a list of labels: one letter each, ``...`` as one ``_ELLIPSIS`` item."""
    op = "topi.einsum"
    if term.count(_ELLIPSIS) > 1 or term.replace(_ELLIPSIS, "").count(".") > 0:
        raise ValueError(f"{op}: subscripts {subscripts!r}: each term may hold one '...' "
                         "and no other '.'")
    labels: list[str] = []
    rest = term
    while rest:
        if rest.startswith(_ELLIPSIS):
            labels.append(_ELLIPSIS)
            rest = rest[3:]
            continue
        c, rest = rest[0], rest[1:]
        if not (c.isascii() and c.isalpha()):
            raise ValueError(f"{op}: subscripts {subscripts!r} contain {c!r}; use "
                             "letters a-z, A-Z, '...', ',' and '->'")
        labels.append(c)
    return labels


def einsum_labels(subscripts: Any, operands: Sequence[Tensor]
                  ) -> tuple[list[list[str]], list[str], dict[str, int]]:
    """Input terms and output term as label lists, and the extent of every label.

    ``...`` expands to labels ``...0, ...1`` for the broadcast dimensions (aligned at the
    right, extent-1 dimensions broadcasting, as in NumPy); without ``->`` the output is
    the ``...`` dimensions followed by the letters used once, alphabetically.
    """
    op = "topi.einsum"
    if not isinstance(subscripts, str):
        raise TypeError(f"{op}: subscripts must be a string such as 'ij,jk->ik', got "
                        f"{type(subscripts).__name__} {subscripts!r}")
    spec = subscripts.replace(" ", "")
    lhs, arrow, rhs = spec.partition("->")
    if "->" in rhs:
        raise ValueError(f"{op}: subscripts {subscripts!r} contain '->' twice")
    raw_terms = [_split_term(t, subscripts) for t in lhs.split(",")]
    if len(raw_terms) != len(operands):
        raise ValueError(f"{op}: subscripts {subscripts!r} name {len(raw_terms)} operands, "
                         f"{len(operands)} were given")
    # expand each '...' into the operand's broadcast dimensions, aligned at the right
    ell_shapes: list[tuple[int, ...]] = []
    for p, (term, t) in enumerate(zip(raw_terms, operands)):
        named = len(term) - (1 if _ELLIPSIS in term else 0)
        if _ELLIPSIS in term and t.ndim < named or _ELLIPSIS not in term and t.ndim != named:
            raise ValueError(f"{op}: term {''.join(term)!r} has {named} letters but operand "
                             f"{p} ('{t.name}') has {t.ndim} dimensions {t.shape}")
        if _ELLIPSIS in term:
            start = term.index(_ELLIPSIS)
            ell_shapes.append(t.shape[start:start + t.ndim - named])
    ell = broadcast_shape(*ell_shapes, op=op) if ell_shapes else ()
    ell_labels = [f"{_ELLIPSIS}{d}" for d in range(len(ell))]
    extent = dict(zip(ell_labels, ell))
    terms: list[list[str]] = []
    for p, (term, t) in enumerate(zip(raw_terms, operands)):
        labels = list(term)
        if _ELLIPSIS in term:
            start = term.index(_ELLIPSIS)
            m = t.ndim - (len(term) - 1)
            labels[start:start + 1] = ell_labels[len(ell) - m:]
        for c, e in zip(labels, t.shape):
            if c.startswith(_ELLIPSIS):
                continue  # broadcast dimensions may be 1 here and larger elsewhere
            if extent.setdefault(c, e) != e:
                raise ValueError(f"{op}: letter {c!r} has extents {extent[c]} and {e} "
                                 f"(operand {p}, '{t.name}', shape {t.shape})")
        terms.append(labels)
    letters = [c for term in terms for c in term if not c.startswith(_ELLIPSIS)]
    if arrow:
        out_raw = _split_term(rhs, subscripts)
        if ell and _ELLIPSIS not in out_raw:
            raise ValueError(f"{op}: the inputs of {subscripts!r} have '...' dimensions "
                             f"{ell} but the output has no '...' to receive them")
        out: list[str] = []
        for c in out_raw:
            out.extend(ell_labels if c == _ELLIPSIS else [c])
    else:  # implicit output: the '...' dimensions, then the letters used once, sorted
        out = ell_labels + sorted(c for c in set(letters) if letters.count(c) == 1)
    for c in out:
        if out.count(c) > 1:
            raise ValueError(f"{op}: output subscripts {rhs!r} repeat {c!r}")
        if c not in extent:
            raise ValueError(f"{op}: output subscript {c!r} of {subscripts!r} does not "
                             "appear in any input")
    return terms, out, extent


def einsum(subscripts: str, *operands: Tensor, name: str | None = None) -> Tensor:
    """Einstein summation (``numpy.einsum``).

    Each letter names an axis; letters missing from the output are summed (one reduce
    axis per letter, named after it); a letter repeated within one operand takes its
    diagonal. ``...`` stands for broadcast leading dimensions (extent-1 dimensions
    broadcast, as in NumPy). Without ``->`` the output is the ``...`` dimensions, then the
    letters used once, alphabetically.

    Parameters
    ----------
    subscripts : str
        E.g. ``"ij,jk->ik"``, ``"bij,bjk->bik"``, ``"ii->i"``, ``"ij->"``, ``"i,i"``,
        ``"...ij,...jk->...ik"``.
    *operands : Tensor
        One per input term; a letter must have one extent everywhere.
    name : str, optional
        Output name (default ``T_einsum``).

    Returns
    -------
    Tensor
        Its index variables are named by the output letters (``e0, e1, ...`` for ``...``
        dimensions): ``T_einsum[i, k] = sum(A[i, j] * B[j, k], j in [0, 3))``.

    Raises
    ------
    TypeError
        ``subscripts`` is not a string or an operand is not a tensor.
    ValueError
        Malformed subscripts, wrong operand count or rank, inconsistent extents.
    """
    op = "topi.einsum"
    for p, t in enumerate(operands):
        check_tensor(t, op, f"operands[{p}]")
    if not operands:
        raise ValueError(f"{op}: needs at least one operand")
    terms, out, extent = einsum_labels(subscripts, operands)
    summed = [c for c in dict.fromkeys(c for term in terms for c in term) if c not in out]

    def factors(idx: Index, ks: Index) -> list[Expr]:
        var = {**dict(zip(out, idx)), **dict(zip(summed, ks))}
        reads = []
        for term, t in zip(terms, operands):
            # a broadcast ('...') dimension of extent 1 reads index 0
            index = tuple(Const(0, int32) if t.shape[d] == 1 and extent[c] > 1 else var[c]
                          for d, c in enumerate(term))
            reads.append(t[index])
        return reads

    def readable(label: str) -> str:
        return "e" + label[len(_ELLIPSIS):] if label.startswith(_ELLIPSIS) else label

    return _contract([extent[c] for c in out], [extent[c] for c in summed], factors,
                     name or "T_einsum", names=[readable(c) for c in out],
                     reduce_names=[readable(c) for c in summed])


register_tensor_operators({"matmul": matmul})
