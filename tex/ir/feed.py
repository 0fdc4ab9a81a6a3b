"""Feed mappings resolved to placeholders: the one rule for ``{placeholder or name: value}``.

The reference interpreter (``tex.testing.interpreter.bind_feed``, behind ``evaluate`` and
``check_grad``) and compiled gradient programs (``GradProgram.forward``) take their data as a
mapping keyed by placeholder tensors or by the placeholders' names. ``resolve_feed`` is the
rule both follow:

* a Tensor key must be a placeholder (TypeError otherwise); any other key that is not a str
  is a TypeError;
* a str key stands for the placeholder of that name; it is ambiguous (ValueError) when
  several placeholders of the DAG have that name and one of them needs it;
* a placeholder fed both by tensor and by name must get the same object both times (then
  it is one feed, not two); different objects are a ValueError;
* ``strict=True`` (a compiled program, whose feed must mean exactly its inputs) also rejects
  a Tensor key that is not one of the placeholders and a name that does not name exactly one
  of them; ``strict=False`` (the interpreter) ignores entries the DAG does not use.

Values are returned as given: each caller checks them its own way (the interpreter wants
an ndarray of the exact dtype; a compiled program also makes it C-contiguous), and
reports placeholders that got no value (absent from the result).
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from typing import Any

from .tensor import PlaceholderOp, Tensor, TensorSlice

__all__ = ["resolve_feed"]


def resolve_feed(placeholders: Sequence[Tensor], feed: Mapping[Any, Any], who: str,
                 dag: str = "this DAG", strict: bool = False) -> dict[Tensor, Any]:
    """Placeholder -> its value in ``feed``, for each of ``placeholders`` that has one.

    Parameters
    ----------
    placeholders : sequence of Tensor
        The placeholder tensors of the DAG, in the order errors should follow.
    feed : Mapping
        Keys: placeholder tensors or their names; values: anything (not checked here).
    who : str
        The caller named at the start of error messages (``"evaluate"``, ``"forward"``).
    dag : str
        How messages name the DAG (``"this DAG"``, ``"the loss 'L'"``).
    strict : bool
        Reject keys that do not name exactly one of ``placeholders``.

    Returns
    -------
    dict
        Placeholder -> value; a placeholder without an entry is absent.

    Raises
    ------
    TypeError
        A key is a computed tensor, or neither a Tensor nor a str.
    ValueError
        A placeholder is fed by tensor and by name with different objects; a name that a
        placeholder needs is shared by several placeholders; with ``strict``, a key that is
        not one of ``placeholders`` or a name that does not name exactly one.
    """
    count = Counter(t.name for t in placeholders)
    by_tensor, by_name = _split_keys(placeholders, count, feed, who, dag, strict)
    values: dict[Tensor, Any] = {}
    for t in placeholders:
        if t in by_tensor:
            value = by_tensor[t]
            if t.name in by_name and by_name[t.name] is not value:
                raise ValueError(f"{who}: placeholder '{t.name}' is fed twice, by tensor and "
                                 "by name, with different arrays; keep one entry")
        elif t.name in by_name:
            if count[t.name] > 1:
                raise ValueError(_ambiguous(who, dag, t.name, count[t.name]))
            value = by_name[t.name]
        else:
            continue
        values[t] = value
    return values


def _split_keys(placeholders: Sequence[Tensor], count: Counter[str], feed: Mapping[Any, Any],
                who: str, dag: str, strict: bool
                ) -> tuple[dict[Tensor, Any], dict[str, Any]]:
    """The feed's entries keyed by tensor and by name, each key checked (in feed order)."""
    members = set(placeholders)
    by_tensor: dict[Tensor, Any] = {}
    by_name: dict[str, Any] = {}
    for key, value in feed.items():
        if isinstance(key, Tensor):
            if not isinstance(key.op, PlaceholderOp):
                raise TypeError(f"{who}: feed key '{key.name}' is a computed tensor; only "
                                f"placeholders take data ({who} computes the others)")
            if strict and key not in members:
                raise ValueError(f"{who}: feed key '{key.name}' is not an input of {dag} "
                                 f"(inputs: {_names(placeholders)})")
            by_tensor[key] = value
        elif isinstance(key, str):
            if strict and count[key] == 0:
                raise ValueError(f"{who}: feed key {key!r} names no placeholder of {dag} "
                                 f"(inputs: {_names(placeholders)})")
            if strict and count[key] > 1:
                raise ValueError(_ambiguous(who, dag, key, count[key]))
            by_name[key] = value
        else:
            raise TypeError(f"{who}: feed keys must be placeholder Tensors or their names, "
                            f"got {_describe(key)}")
    return by_tensor, by_name


def _ambiguous(who: str, dag: str, name: str, n: int) -> str:
    return (f"{who}: {n} placeholders of {dag} are named '{name}', so the feed key "
            f"'{name}' is ambiguous; use the placeholder Tensors as keys")


def _names(placeholders: Sequence[Tensor]) -> str:
    return ", ".join(t.name for t in placeholders) or "none"


def _describe(value: Any) -> str:
    if isinstance(value, TensorSlice):
        return f"a slice of tensor '{value.name}' (index it fully, or pass the tensor itself)"
    return f"{type(value).__name__} {value!r}"
