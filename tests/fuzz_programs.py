"""Hypothesis strategies that build random, well-formed tex programs (``tests/test_fuzz.py``).

A program is a DAG of 1-6 computes over 1-3 placeholders (more appear when a step asks for
a fresh operand). Every step draws one template:

* ``general``: any output shape; the body is a random expression tree over reads of earlier
  tensors. Each read index is drawn from a menu of maps that stay in bounds by construction:
  constants, ``i + c``, ``a*i + c`` (strides), ``n - 1 - i`` (reversal), ``i + j``
  (windows), ``i // q`` and ``i % q``. Leaves are reads and constants; inner nodes are
  ``+ - *``, a safe division, binary ``max``/``min``, ``if_then_else`` on an index
  condition, and intrinsics on their safe domains (``log(1 + x*x)``, ``sqrt(1 + x*x)``,
  ``exp(tanh(x))``...);
* ``reduce``: the same, under ``sum``/``max``/``min`` over 1-2 reduction axes, sometimes with
  a ``where=`` index condition;
* ``pad``: a shifted read guarded by an in-range condition (zero padding);
* ``gather`` (only in ``gather_programs``, last): a read through an integer placeholder,
  fed in range or with one value out of range;
* ``shifted`` (only in ``shifted_programs``, last): reads shifted by -1..1 per dimension,
  possibly out of range, unguarded or under a condition;
* topi ops: broadcasting binary ops against a fresh placeholder of a broadcast-compatible
  shape, ``transpose``, ``reshape``, ``sum``/``max`` with ``keepdims``, ``concatenate``.

Values stay bounded (intrinsics squash, divisions are by ``2 + tanh``), so float64 finite
differences are accurate. A program records whether all its indices are affine (no
``//``/``%``), which the cost property needs. ``repr`` prints every equation, so a failing
example hypothesis shrinks is readable as is.
"""
from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np
from hypothesis import strategies as st

import tex
from tex import topi

Draw = Callable[[st.SearchStrategy[Any]], Any]

MAX_EXTENT = 7
# Uniform choices: st.integers favours its small end while it generates, which kept most
# programs at a few points; sampled_from draws uniformly and still shrinks to the front.
EXTENTS = st.sampled_from(range(1, MAX_EXTENT + 1))


@dataclass(eq=False)
class Program:
    """A generated program: its placeholders (creation order), computes and output."""

    dtype: str
    inputs: list[tex.Tensor] = field(default_factory=list)
    computes: list[tex.Tensor] = field(default_factory=list)
    affine: bool = True
    selects: bool = False  # has a max/min reduction
    templates: list[str] = field(default_factory=list)
    # integer placeholders read as indices (``gather``): the extent they index
    indices: dict[tex.Tensor, int] = field(default_factory=dict)

    @property
    def out(self) -> tex.Tensor:
        return self.computes[-1]

    def pool(self) -> list[tex.Tensor]:
        return [*self.inputs, *self.computes]

    def placeholder(self, shape: tuple[int, ...]) -> tex.Tensor:
        t = tex.placeholder(shape, self.dtype, name=f"P{len(self.inputs)}")
        self.inputs.append(t)
        return t

    def used_inputs(self) -> list[tex.Tensor]:
        """The placeholders ``out`` reads (directly or not), in creation order."""
        ops = set(tex.graph(self.out).nodes)
        return [p for p in self.inputs if p.op in ops]

    def _repr_pretty_(self, p: Any, cycle: bool) -> None:
        """Hypothesis prints falsifying examples with IPython's protocol: the equations."""
        p.text(repr(self))

    def __repr__(self) -> str:
        lines = [f"Program({self.dtype}, templates={self.templates}, affine={self.affine}, "
                 f"selects={self.selects})"]
        lines += [f"  {p.name}{list(p.shape)}" for p in self.inputs]
        lines += [f"  {t}" for t in self.computes]
        return "\n".join(lines)


# -- index maps ------------------------------------------------------------------------------
def _index(draw: Draw, prog: Program, loops: list[tuple[Any, int]], extent: int) -> Any:
    """An index expression over ``loops`` ((var, extent) pairs) within ``[0, extent)``."""
    options: list[tuple[str, Callable[[], Any]]] = [("const", lambda: draw(
        st.integers(0, extent - 1)))]
    for v, n in loops:
        if n <= extent:
            options.append(("shift", lambda v=v, n=n: v + draw(st.integers(0, extent - n))))
            options.append(("reverse", lambda v=v, n=n: (n - 1 - v) + draw(
                st.integers(0, extent - n))))
        for a in (2, 3):
            if a * (n - 1) < extent:
                options.append(("stride", lambda v=v, n=n, a=a: a * v + draw(
                    st.integers(0, extent - 1 - a * (n - 1)))))
        for q in (2, 3):
            if (n - 1) // q < extent:
                options.append(("floordiv", lambda v=v, q=q: tex.floordiv(v, q)))
            if q <= extent:
                options.append(("floormod", lambda v=v, q=q: tex.floormod(v, q)))
    for (v, n), (w, m) in zip(loops, loops[1:]):
        if n + m - 2 < extent:
            options.append(("window", lambda v=v, w=w: v + w))
    kind, make = draw(st.sampled_from(options))
    if kind in ("floordiv", "floormod"):
        prog.affine = False
    return make()


def _read(draw: Draw, prog: Program, t: tex.Tensor, loops: list[tuple[Any, int]]) -> Any:
    if t.ndim == 0:
        return t()
    return t[tuple(_index(draw, prog, loops, n) for n in t.shape)]


# -- expressions -----------------------------------------------------------------------------
# Unary intrinsics, each composed so that it is smooth on the whole real line.
UNARY: dict[str, Callable[[Any], Any]] = {
    "neg": lambda x: -x,
    "square": lambda x: x * x,
    "tanh": tex.tanh,
    "sigmoid": tex.sigmoid,
    "sin": tex.sin,
    "cos": tex.cos,
    "erf": tex.erf,
    "exp_tanh": lambda x: tex.exp(tex.tanh(x)),
    "log1p_sq": lambda x: tex.log(1.0 + x * x),
    "sqrt1p_sq": lambda x: tex.sqrt(1.0 + x * x),
    "rsqrt1p_sq": lambda x: tex.rsqrt(1.0 + x * x),
    "pow_sq": lambda x: tex.power(1.0 + x * x, 0.75),
    "abs": tex.abs,
}

BINARY: dict[str, Callable[[Any, Any], Any]] = {
    "add": lambda a, b: a + b,
    "sub": lambda a, b: a - b,
    "mul": lambda a, b: a * b,
    "div": lambda a, b: a / (2.0 + tex.tanh(b)),
    "max": tex.max,
    "min": tex.min,
}


def _condition(draw: Draw, loops: list[tuple[Any, int]]) -> Any:
    """A non-trivial condition on the loop variables."""
    v, n = draw(st.sampled_from(loops))
    kind = draw(st.sampled_from(["lt", "ge", "even", "sum"]))
    if kind == "even":
        return tex.floormod(v, 2) == 0
    if kind == "sum" and len(loops) > 1:
        w, m = loops[-1] if loops[0][0] is v else loops[0]
        return v + w < draw(st.integers(1, max(1, n + m - 2)))
    c = draw(st.integers(0, max(0, n - 1)))
    return v < c if kind == "lt" else v >= c


def _expr(draw: Draw, prog: Program, loops: list[tuple[Any, int]], depth: int) -> Any:
    if depth == 0 or draw(st.integers(0, 3)) == 0:
        if draw(st.integers(0, 7)) == 0:
            return tex.const(draw(st.sampled_from([0.5, -1.25, 2.0])), prog.dtype)
        return _read(draw, prog, _pick(draw, prog), loops)
    kind = draw(st.sampled_from(["unary", "binary", "binary", "select"] if loops else
                                ["unary", "binary"]))
    if kind == "unary":
        return UNARY[draw(st.sampled_from(sorted(UNARY)))](_expr(draw, prog, loops, depth - 1))
    a = _expr(draw, prog, loops, depth - 1)
    b = _expr(draw, prog, loops, depth - 1)
    if kind == "select":
        return tex.if_then_else(_condition(draw, loops), a, b)
    return BINARY[draw(st.sampled_from(sorted(BINARY)))](a, b)


# -- templates -------------------------------------------------------------------------------
def _pick(draw: Draw, prog: Program, min_ndim: int = 0) -> tex.Tensor:
    """An earlier tensor of at least ``min_ndim`` dimensions, the newest compute half the
    time (so that programs chain instead of leaving dead branches); a fresh placeholder when
    none fits."""
    fits = [t for t in prog.pool() if t.ndim >= min_ndim]
    if not fits:
        return prog.placeholder(_shape(draw, max(min_ndim, 1)))
    if fits[-1] in prog.computes and draw(st.booleans()):
        return fits[-1]
    return draw(st.sampled_from(fits))


def _shape(draw: Draw, min_ndim: int = 0) -> tuple[int, ...]:
    ndim = draw(st.sampled_from(range(min_ndim, 4)))
    return tuple(draw(EXTENTS) for _ in range(ndim))


def _name(prog: Program) -> str:
    return f"C{len(prog.computes)}"


def general(draw: Draw, prog: Program) -> tex.Tensor:
    shape = _shape(draw)

    def body(*ivs: Any) -> Any:
        return _expr(draw, prog, list(zip(ivs, shape)), 2)
    return tex.compute(shape, body, name=_name(prog))


def reduce(draw: Draw, prog: Program) -> tex.Tensor:
    shape = _shape(draw)
    name = _name(prog)
    extents = [draw(EXTENTS) for _ in range(draw(st.integers(1, 2)))]
    ks = [tex.reduce_axis((0, n), name=f"k{name}_{d}") for d, n in enumerate(extents)]
    reducer = draw(st.sampled_from([tex.sum, tex.sum, tex.max, tex.min]))
    prog.selects |= reducer is not tex.sum
    # a where= condition may leave a reduction empty: only sum has a finite identity
    where = reducer is tex.sum and draw(st.integers(0, 2)) == 0

    def body(*ivs: Any) -> Any:
        loops = list(zip(ivs, shape)) + [(k.var, n) for k, n in zip(ks, extents)]
        e = _expr(draw, prog, loops, 2)
        cond = _condition(draw, loops[len(shape):] + loops[:len(shape)]) if where else None
        return reducer(e, axis=ks, where=cond)
    return tex.compute(shape, body, name=name)


def pad(draw: Draw, prog: Program) -> tex.Tensor:
    src = _pick(draw, prog, 1)
    before = [draw(st.integers(0, 2)) for _ in src.shape]
    after = [draw(st.integers(0, 2)) for _ in src.shape]
    shape = tuple(b + n + a for b, n, a in zip(before, src.shape, after))

    def body(*ivs: Any) -> Any:
        inside = tex.all(*[tex.all(v >= b, v < b + n) for v, b, n in zip(ivs, before, src.shape)])
        return tex.if_then_else(inside, src[tuple(v - b for v, b in zip(ivs, before))], 0.0)
    return tex.compute(shape, body, name=_name(prog))


def broadcast(draw: Draw, prog: Program) -> tex.Tensor:
    a = _pick(draw, prog)
    # b's shape: a trailing part of a's, some dims replaced by 1 (or the other way round)
    keep = draw(st.integers(0, a.ndim))
    bshape = tuple(1 if draw(st.booleans()) else n for n in a.shape[a.ndim - keep:])
    b = prog.placeholder(bshape)
    op = draw(st.sampled_from([topi.add, topi.subtract, topi.multiply, topi.maximum,
                               topi.minimum]))
    return op(b, a) if draw(st.booleans()) else op(a, b)


def transpose(draw: Draw, prog: Program) -> tex.Tensor:
    a = _pick(draw, prog, 2)
    return topi.transpose(a, draw(st.permutations(range(a.ndim))))


def reshape(draw: Draw, prog: Program) -> tex.Tensor:
    a = _pick(draw, prog)
    size = int(np.prod(a.shape))
    shape: list[int] = []
    while size > 1 and len(shape) < 3:
        d = draw(st.sampled_from([f for f in range(1, size + 1) if size % f == 0]))
        shape.append(d)
        size //= d
    if size > 1:
        shape.append(size)
    prog.affine = False
    return topi.reshape(a, tuple(shape))


def topi_reduce(draw: Draw, prog: Program) -> tex.Tensor:
    a = _pick(draw, prog, 1)
    axes = draw(st.sets(st.integers(0, a.ndim - 1), min_size=1))
    op = draw(st.sampled_from([topi.sum, topi.max, topi.min]))
    prog.selects |= op is not topi.sum
    return op(a, axis=tuple(sorted(axes)), keepdims=draw(st.booleans()))


def concatenate(draw: Draw, prog: Program) -> tex.Tensor:
    a = _pick(draw, prog, 1)
    axis = draw(st.integers(0, a.ndim - 1))
    others = [t for t in prog.pool() if t.ndim == a.ndim and all(
        m == n for d, (m, n) in enumerate(zip(t.shape, a.shape)) if d != axis)]
    b = draw(st.sampled_from(others))
    return topi.concatenate([a, b], axis=axis)


TEMPLATES: dict[str, Callable[[Draw, Program], tex.Tensor]] = {
    "general": general,
    "reduce": reduce,
    "pad": pad,
    "broadcast": broadcast,
    "transpose": transpose,
    "reshape": reshape,
    "topi_reduce": topi_reduce,
    "concatenate": concatenate,
}


def gather(draw: Draw, prog: Program) -> tex.Tensor:
    """``C[idx] = f(src[.., I[idx] + c, ..])``: one dimension of an earlier tensor read
    through a fresh integer placeholder ``I`` (int32 or int64; ``feed`` fills it in range,
    ``feed(bad=...)`` puts one value out of range), the read sometimes under an
    ``if_then_else`` on the loop variables."""
    src = _pick(draw, prog, 1)
    d = draw(st.integers(0, src.ndim - 1))
    shape = _shape(draw, 1)
    index = tex.placeholder(shape, draw(st.sampled_from(["int32", "int64"])),
                            name=f"I{len(prog.inputs)}")
    shift = draw(st.integers(0, 1)) if src.shape[d] > 1 else 0
    prog.inputs.append(index)
    prog.indices[index] = src.shape[d] - shift
    guarded = draw(st.booleans())

    def body(*ivs: Any) -> Any:
        loops = list(zip(ivs, shape))
        idx = [_index(draw, prog, loops, n) for n in src.shape]
        ix = index[ivs]
        idx[d] = ix + shift if shift else ix
        read = src[tuple(idx)]
        value = UNARY[draw(st.sampled_from(sorted(UNARY)))](read)
        if guarded:
            return tex.if_then_else(_condition(draw, loops), value, 0.5)
        return value
    return tex.compute(shape, body, name=_name(prog))


def shifted(draw: Draw, prog: Program) -> tex.Tensor:
    """``C[i] = f(src[i + s])`` over ``src``'s shape with shifts ``s`` in ``[-1, 1]`` per
    dimension, possibly out of range, the read unguarded, under a random condition or
    under the condition that keeps it in range (only in ``shifted_programs``, last)."""
    src = _pick(draw, prog, 1)
    shifts = [draw(st.integers(-1, 1)) for _ in src.shape]
    guard = draw(st.sampled_from(["none", "random", "exact"]))

    def body(*ivs: Any) -> Any:
        loops = list(zip(ivs, src.shape))
        read = src[tuple(v + s for v, s in zip(ivs, shifts))]
        value = UNARY[draw(st.sampled_from(sorted(UNARY)))](read)
        if guard == "random":
            return tex.if_then_else(_condition(draw, loops), value, 0.5)
        if guard == "exact":
            inside = tex.all(*[tex.all(v + s >= 0, v + s < n)
                               for v, s, n in zip(ivs, shifts, src.shape)])
            return tex.if_then_else(inside, value, 0.5)
        return value
    return tex.compute(src.shape, body, name=_name(prog))


@st.composite
def shifted_programs(draw: Draw, dtypes: tuple[str, ...] = ("float64",),
                     max_steps: int = 3) -> Program:
    """A random program (``programs``) ending with a ``shifted`` step."""
    prog = draw(programs(dtypes, max_steps))
    prog.templates.append("shifted")
    prog.computes.append(shifted(draw, prog))
    return prog


@st.composite
def gather_programs(draw: Draw, dtypes: tuple[str, ...] = ("float64",),
                    max_steps: int = 3) -> Program:
    """A random program (``programs``) ending with a ``gather`` step."""
    prog = draw(programs(dtypes, max_steps))
    prog.templates.append("gather")
    prog.computes.append(gather(draw, prog))
    return prog


@st.composite
def programs(draw: Draw, dtypes: tuple[str, ...] = ("float64",), max_steps: int = 6) -> Program:
    """A random program (see the module docstring)."""
    prog = Program(draw(st.sampled_from(dtypes)))
    for _ in range(draw(st.integers(1, 2))):
        prog.placeholder(_shape(draw))
    for _ in range(draw(st.sampled_from(range(1, max_steps + 1)))):
        kind = draw(st.sampled_from(sorted(TEMPLATES)))
        prog.templates.append(kind)
        prog.computes.append(TEMPLATES[kind](draw, prog))
    return prog


def feed(prog: Program, seed: int = 0, bad: int | None = None
         ) -> dict[tex.Tensor, np.ndarray]:
    """Seeded standard-normal data for every placeholder; index placeholders in range,
    but for one element set to ``bad`` (clipped to the dtype) when given."""
    rng = np.random.default_rng(seed)
    out = {}
    for p in prog.inputs:
        n = prog.indices.get(p)
        if n is None:
            out[p] = rng.standard_normal(p.shape).astype(prog.dtype)
            continue
        values = rng.integers(0, n, p.shape).astype(p.dtype.numpy)
        if bad is not None:
            info = np.iinfo(p.dtype.numpy)
            values.flat[rng.integers(0, values.size)] = min(max(bad, info.min), info.max)
        out[p] = values
    return out
