"""Hypothesis strategies for random programs over a symbolic batch ``n`` (``tex.size_var``),
for ``tests/test_fuzz_symbolic.py``.

A program starts from 1-2 placeholders of shape ``(n, d)`` (``d`` in 1..5) and takes 1-5
steps, each drawing one template that keeps the batch symbolic:

* ``map``: a unary intrinsic of ``fuzz_programs.UNARY`` of a tensor, or ``+ - *`` of two
  tensors of one shape, or of a tensor and a fresh ``(d,)`` weight (broadcast);
* ``row``: ``sum``/``max`` over the row, kept as ``(n, 1)``, broadcast against the tensor;
* ``dense``: ``topi.nn.dense`` with a fresh ``(e, d)`` weight: ``(n, e)``;
* ``softmax`` over the row;
* ``shift``: ``T[i, j] = A[i + s, j]`` where ``i + s < n`` (else 0), ``s`` in 1..2, or the
  reversal ``A[n - 1 - i, j]``;
* ``column``: the sum over the batch, ``(d,)``, added back to every row;
* ``reshape``: flattened to ``(n * d,)`` and back, or to ``(n, d // k, k)`` and back;
* ``resample``: every other row (``((n + 1) // 2, d)``), then each of those rows twice.

The output is the last tensor, of shape ``(n, d)``. ``feed(prog, n)`` gives seeded data at
batch ``n``.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

import tex
from tex import topi

from fuzz_programs import UNARY, Program

Draw = Callable[[st.SearchStrategy[Any]], Any]


@dataclass(eq=False)
class SymbolicProgram(Program):
    """A generated program over the batch variable ``n``."""

    n: Any = None
    templates: list[str] = field(default_factory=list)


def _width(t: tex.Tensor) -> int:
    return int(t.shape[1])


def _step(draw: Draw, prog: SymbolicProgram, x: tex.Tensor) -> tex.Tensor:
    n = prog.n
    d = _width(x)
    kind = draw(st.sampled_from(["map", "map", "row", "dense", "softmax", "shift", "column",
                                 "reshape", "resample"]))
    prog.templates.append(kind)
    if kind == "map":
        how = draw(st.sampled_from(["unary", "pair", "weight"]))
        if how == "unary":
            f = UNARY[draw(st.sampled_from(sorted(UNARY)))]
            return tex.compute((n, d), lambda i, j: f(x[i, j]), name=f"M{len(prog.computes)}")
        other = draw(st.sampled_from([t for t in (*prog.inputs, *prog.computes)
                                      if t.ndim == 2 and t.shape[0] is n and t.shape[1] == d
                                      and t is not x] or [x]))
        if how == "weight":
            other = prog.placeholder((d,))
        op = draw(st.sampled_from([topi.add, topi.subtract, topi.multiply]))
        return op(x, other)
    if kind == "row":
        r = (topi.sum if draw(st.booleans()) else topi.max)(x, axis=1, keepdims=True)
        return topi.multiply(x, topi.tanh(r))
    if kind == "dense":
        e = draw(st.integers(1, 5))
        return topi.nn.dense(x, prog.placeholder((e, d)))
    if kind == "softmax":
        return topi.nn.softmax(x)
    if kind == "shift":
        if draw(st.booleans()):
            s = draw(st.integers(1, 2))
            return tex.compute((n, d), lambda i, j: tex.if_then_else(
                i + s < n, x[i + s, j], tex.const(0.0, prog.dtype)), name=f"S{len(prog.computes)}")
        return tex.compute((n, d), lambda i, j: x[n - 1 - i, j], name=f"R{len(prog.computes)}")
    if kind == "resample":  # every other row, then each row twice: (n + 1) // 2 between
        down = tex.compute(((n + 1) // 2, d), lambda i, j: x[2 * i, j],
                           name=f"D{len(prog.computes)}")
        return tex.compute((n, d), lambda i, j: down[i // 2, j], name=f"U{len(prog.computes)}")
    if kind == "column":
        c = topi.sum(x, axis=0)
        return topi.add(x, topi.tanh(c))
    # reshape
    if d > 1 and d % 2 == 0 and draw(st.booleans()):
        return topi.reshape(topi.reshape(x, (n, d // 2, 2)), (n, d))
    return topi.reshape(topi.reshape(x, (-1,)), (n, d))


@st.composite
def symbolic_programs(draw: Draw, dtypes: tuple[str, ...] = ("float64",),
                      max_steps: int = 5) -> SymbolicProgram:
    """A random program over ``n = tex.size_var("n")`` (module docstring)."""
    prog = SymbolicProgram(draw(st.sampled_from(dtypes)), n=tex.size_var("n"))
    x = prog.placeholder((prog.n, draw(st.integers(1, 5))))
    if draw(st.booleans()):
        prog.placeholder((prog.n, _width(x)))
    for _ in range(draw(st.integers(1, max_steps))):
        x = _step(draw, prog, x)
        prog.computes.append(x)
    return prog


def feed(prog: SymbolicProgram, n: int, seed: int = 0) -> dict[tex.Tensor, np.ndarray]:
    """Seeded standard-normal data for every placeholder at batch ``n``."""
    rng = np.random.default_rng(seed)
    return {p: rng.standard_normal(tuple(n if d is prog.n else d for d in p.shape))
            .astype(prog.dtype) for p in prog.inputs}
