"""``check_grad``: the symbolic gradient of a tensor DAG checked against finite differences.

The analytic side is ``tex.autodiff.differentiate(out, inputs, head)`` evaluated with the
reference interpreter; the numeric side is central differences of the scalar function

    f(x) = sum(head * out(x))

whose gradient with respect to an input is exactly the vector-Jacobian product that
``differentiate`` computes for that ``head``. By default (``precision="float64"``) both
sides run on a float64 copy of the DAG (``tex.testing.widen``: float placeholders and
computations re-typed, narrowing casts and casts to integers kept, integer tensors
unchanged), at data representable in the original dtypes: float32 finite differences are
noise at about 1e-4 relative, float64 ones are accurate to about 1e-10, so the default
tolerances check a float32 program's gradient, not its rounding. ``precision="native"``
evaluates the DAG as written, in its own dtypes.

Two details keep the differences accurate:

* ``f(x + d) - f(x - d)`` is summed as ``sum(head * (out(x + d) - out(x - d)))`` in float64,
  so every output element that does not depend on the perturbed entries cancels exactly,
  rounding error included.
* The step divided by is the step actually taken, ``x_plus - x_minus`` after rounding to the
  input's dtype, not the nominal ``2 * eps``.
"""
from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..arith.extent import bind_extent
from ..dtype import DType
from ..ir.expr import Var
from ..ir.feed import resolve_feed
from ..ir.tensor import PlaceholderOp, Tensor, TensorSlice
from ..ir.visit import topo_sort_ops
from ..te import placeholder
from ..te.specialize import free_vars
from .interpreter import bind_feed, evaluate, feed_sizes
from .widen import float64_copy

__all__ = ["check_grad", "PRECISIONS"]

# "float64": both sides on a float64 copy of the DAG (default); "native": in its own dtypes
PRECISIONS = ("float64", "native")

# Default finite-difference step per input dtype (about the cube root of the dtype's machine
# epsilon, the step that balances truncation and rounding error of central differences).
DEFAULT_EPS: dict[str, float] = {"float64": 1e-6, "float32": 1e-3, "float16": 1e-2}

# Random directions tried for an input with more than ``max_points`` elements.
NUM_DIRECTIONS = 3

HEAD_NAME = "check_grad_head"


def check_grad(out: Tensor, inputs: Tensor | Sequence[Tensor],
               data: Mapping[Tensor | str, np.ndarray] | None = None,
               head: np.ndarray | None = None, *, rtol: float = 1e-4, atol: float = 1e-5,
               eps: float | None = None, max_points: int = 64, seed: int = 0,
               precision: str = "float64", fdiff: Any = None,
               override: Mapping[Tensor, Any] | None = None) -> None:
    """Check ``tex.autodiff.differentiate`` against central finite differences.

    The gradient ``differentiate(out, inputs, head)``, evaluated with the reference
    interpreter, is compared input by input with central differences of
    ``f(x) = sum(head * out(x))`` (the method: the module docstring). A value passes when
    ``|analytic - numeric| <= atol + rtol * |numeric|`` (NaN never passes). Returns None.

    Parameters
    ----------
    out : Tensor
        A float tensor (any shape, 0-d included).
    inputs : Tensor or sequence of Tensor
        The float placeholders to differentiate with respect to.
    data : Mapping, optional
        Placeholder (or its name) -> ``np.ndarray`` of its shape and dtype. A placeholder
        without an entry gets seeded random data: standard normal floats, integers in
        ``[0, 3)`` (pass data for index tensors needing another range), random bools. Pass
        data where random values leave the domain (``log``, ``sqrt``) or sit on a kink.
    head : np.ndarray or placeholder Tensor, optional
        The output gradient, of ``out.shape`` (cast to ``out``'s dtype); a placeholder
        stands for its array in ``data``. Default: seeded standard normal.
    rtol, atol : float
        Relative and absolute tolerance.
    eps : float, optional
        The finite-difference step. Default by the dtype of the evaluated input
        (``DEFAULT_EPS``): 1e-6 for float64, 1e-3 for float32, 1e-2 for float16.
    max_points : int
        Inputs with at most this many elements are checked element by element (two
        evaluations per element); larger ones along 3 seeded random directions ``t``
        (``<grad, t>`` against the difference along ``t``): raise it to locate a wrong element.
    seed : int
        Seeds the random data, head and directions.
    precision : str
        ``"float64"`` (default): both sides on a float64 copy of the DAG (``widen.py``), at
        data representable in its own dtypes, so float32 programs pass the default
        tolerances; ``"native"``: in its own dtypes (noisy for float32: loosen the tolerances).
        An extern call (``te.extern``) runs in its own dtypes either way.
    fdiff, override : optional
        Passed to ``differentiate`` (on the float64 copy, the override's tensors are their
        copies: the functions get float64 tensors).

    Raises
    ------
    TypeError
        ``out`` is not a float Tensor; an input is not a float placeholder; ``data`` is not
        a mapping (and ``evaluate``'s errors for bad keys or values).
    ValueError
        ``head`` is not of ``out.shape``; no inputs; ``out`` is not finite at the data;
        ``eps`` is too small to change an entry of an input; ``eps``/``max_points`` out of
        range; an unknown ``precision``.
    AssertionError
        The gradients disagree: the message names the input, the worst element (or
        direction), both values and the largest absolute and relative errors.

    Example
    -------
    >>> X = tex.placeholder((3, 4), "float64", name="X")
    >>> Y = tex.placeholder((4,), "float64", name="Y")
    >>> Z = tex.compute((3, 4), lambda i, j: X[i, j] * X[i, j] + tex.sin(Y[j]), name="Z")
    >>> check_grad(Z, [X, Y])  # random X, Y and head; raises AssertionError when wrong
    """
    _check_out(out)
    inputs = _check_inputs(inputs)
    options = _check_options(precision, eps, max_points, rtol, atol)
    data, bound = _shape_binding(out, inputs, _check_data(data))
    if isinstance(head, Tensor):
        head = _head_from_data(head, data)
    rng = np.random.default_rng(seed)
    head_arr = _make_head(out, head, rng, bound)
    feed: dict[Any, Any] = _make_feed(out, inputs, data, rng, bound)
    feed.update(bound)  # evaluate binds the shape variables from these (and the arrays)
    if precision == "float64" and not _all_float64([out, *inputs]):
        twin = float64_copy([out, *inputs, *(override or {})])
        out, inputs, feed = _float64_twin(out, inputs, feed, twin)
        if override:
            override = {twin[t]: ([twin[d] for d in deps], fn)
                        for t, (deps, fn) in override.items()}
    _check_finite(out, feed)
    grads = _analytic(out, inputs, feed, head_arr, fdiff, override)
    dir_rng = np.random.default_rng([seed, 1])
    for inp, grad in zip(inputs, grads):
        _check_input(out, inp, feed, head_arr, grad, options, dir_rng)
    return None


# --------------------------------------------------------------------------------------
# Argument checks
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class _Options:
    """The numeric options of one ``check_grad`` call, validated."""

    rtol: float
    atol: float
    eps: float | None
    max_points: int


def _check_options(precision: Any, eps: Any, max_points: Any, rtol: Any, atol: Any
                   ) -> _Options:
    """The options as ``_Options``, or the ValueError/TypeError naming the bad one."""
    if not isinstance(precision, str) or precision not in PRECISIONS:
        raise ValueError(f"check_grad: precision must be one of {', '.join(map(repr, PRECISIONS))}"
                         f", got {precision!r}")
    if eps is not None and not (isinstance(eps, (int, float)) and math.isfinite(eps)
                                and eps > 0):
        raise ValueError(f"check_grad: eps must be a positive float, got {eps!r}")
    if not isinstance(max_points, int) or max_points < 0:
        raise ValueError(f"check_grad: max_points must be an int >= 0, got {max_points!r}")
    for what, tol in (("rtol", rtol), ("atol", atol)):
        if isinstance(tol, (bool, np.bool_)) or not isinstance(tol, (int, float, np.number)):
            raise TypeError(f"check_grad: {what} must be a number, got {type(tol).__name__} "
                            f"{tol!r}")
        if not (math.isfinite(tol) and tol >= 0):
            raise ValueError(f"check_grad: {what} must be finite and >= 0, got {tol!r}")
    return _Options(rtol, atol, eps, max_points)


def _check_data(data: Any) -> Mapping[Any, Any]:
    """``data`` itself when it is a mapping (``{}`` for None)."""
    if data is None:
        return {}
    if not isinstance(data, Mapping):
        raise TypeError(f"check_grad: data must be a mapping {{placeholder: ndarray}}, got "
                        f"{type(data).__name__}")
    return data


def _describe(value: Any) -> str:
    if isinstance(value, TensorSlice):
        return f"a slice of tensor '{value.name}'"
    if isinstance(value, Tensor):
        return f"the computed tensor '{value.name}'"
    return f"{type(value).__name__} {value!r}"


def _check_out(out: Any) -> None:
    if not isinstance(out, Tensor):
        raise TypeError(f"check_grad: out must be a Tensor, got {_describe(out)}")
    if not out.dtype.is_float:
        raise TypeError(f"check_grad: out '{out.name}' has dtype {out.dtype}; only a float "
                        "tensor can be differentiated")


def _check_inputs(inputs: Any) -> list[Tensor]:
    if isinstance(inputs, Tensor):
        inputs = [inputs]
    elif isinstance(inputs, (list, tuple)):
        inputs = list(inputs)
    else:
        raise TypeError(f"check_grad: inputs must be a placeholder Tensor or a list of them, "
                        f"got {_describe(inputs)}")
    if not inputs:
        raise ValueError("check_grad: no inputs to check")
    for i, inp in enumerate(inputs):
        if not isinstance(inp, Tensor) or not isinstance(inp.op, PlaceholderOp):
            raise TypeError(f"check_grad: inputs[{i}] is {_describe(inp)}; gradients are "
                            "checked with respect to placeholders (tex.placeholder)")
        if not inp.dtype.is_float:
            kind = "boolean" if inp.dtype.is_bool else "integer"
            raise TypeError(f"check_grad: cannot differentiate with respect to {kind} tensor "
                            f"'{inp.name}' (dtype {inp.dtype}); pass it in data instead")
    return inputs


def _head_from_data(head: Tensor, data: Mapping[Any, Any]) -> Any:
    """The array of a placeholder head, looked up in ``data`` (by tensor or name)."""
    if not isinstance(head.op, PlaceholderOp):
        raise TypeError(f"check_grad: head must be a numpy.ndarray or a placeholder whose "
                        f"array is in data, got {_describe(head)}")
    for key in (head, head.name):
        if key in data:
            return data[key]
    raise ValueError(f"check_grad: head is the placeholder '{head.name}' but data has no "
                     f"array for it; add {{{head.name}: ndarray}} to data")


def _shape_binding(out: Tensor, inputs: Sequence[Tensor], data: Mapping[Any, Any]
                   ) -> tuple[Mapping[Any, Any], dict[Var, int]]:
    """``data`` without its ``{var: int}`` entries, and the values of the DAG's shape
    variables: those entries and what the arrays' shapes say (``{}`` when the DAG's shapes
    are all ints)."""
    tensors = [out, *inputs]
    if not free_vars(tensors):
        return data, {}
    ops = topo_sort_ops(tensors)
    placeholders = [op.output(0) for op in ops if isinstance(op, PlaceholderOp)]
    bound, _, rest = feed_sizes(tensors, placeholders, data, "check_grad", "data")
    return rest, bound


def _concrete(shape: Sequence[Any], bound: Mapping[Var, int] | None) -> tuple[int, ...]:
    return tuple(int(bind_extent(d, bound or {})) for d in shape)


def _make_head(out: Tensor, head: Any, rng: np.random.Generator,
               bound: Mapping[Var, int] | None = None) -> np.ndarray:
    """The head as float64 holding values exactly representable in ``out``'s dtype."""
    shape = _concrete(out.shape, bound)
    if head is None:
        head = rng.standard_normal(shape)
    elif not isinstance(head, np.ndarray):
        raise TypeError(f"check_grad: head must be a numpy.ndarray of shape {shape}, got "
                        f"{type(head).__name__}")
    if head.shape != shape:
        raise ValueError(f"check_grad: head has shape {head.shape} but '{out.name}' has shape "
                         f"{shape}; they must match")
    return np.asarray(head).astype(out.dtype.numpy).astype(np.float64)


def _random_data(dtype: DType, shape: tuple[int, ...], rng: np.random.Generator) -> np.ndarray:
    if dtype.is_float:
        return rng.standard_normal(shape).astype(dtype.numpy)
    if dtype.is_bool:
        return rng.integers(0, 2, size=shape).astype(np.bool_)
    return rng.integers(0, 3, size=shape).astype(dtype.numpy)


def _make_feed(out: Tensor, inputs: Sequence[Tensor], data: Mapping[Any, Any],
               rng: np.random.Generator, bound: Mapping[Var, int] | None = None
               ) -> dict[Tensor, np.ndarray]:
    """Every placeholder of the DAG (and every input) -> its checked array."""
    ops = topo_sort_ops([out, *inputs])
    names = {key for key in data if isinstance(key, str)}
    merged: dict[Any, Any] = dict(data)
    for op in ops:
        if isinstance(op, PlaceholderOp):
            tensor = op.output(0)
            if tensor not in data and op.name not in names:
                merged[tensor] = _random_data(op.dtype, _concrete(op.shape, bound), rng)
    if bound:  # (bind_feed checks the shapes of concrete placeholders)
        return {t: a for t, a in resolve_feed(
            [op.output(0) for op in ops if isinstance(op, PlaceholderOp)], merged,
            "check_grad").items()}
    return bind_feed(ops, merged)


# --------------------------------------------------------------------------------------
# The evaluated DAG and its symbolic gradient
# --------------------------------------------------------------------------------------

def _all_float64(tensors: Sequence[Tensor]) -> bool:
    """Whether every float tensor of the DAG is float64 already (then it is its own twin)."""
    return all(t.dtype.name == "float64" for op in topo_sort_ops(tensors)
               for t in op.outputs if t.dtype.is_float)


def _differentiate(out: Tensor, inputs: list[Tensor], head: Tensor, **options: Any
                   ) -> Sequence[Tensor]:
    """``tex.autodiff.differentiate(out, inputs, head, **options)``, imported on first use
    so that ``tex.testing`` imports (and its other helpers work) without ``tex.autodiff``."""
    from ..autodiff import differentiate

    return differentiate(out, inputs, head, **options)  # type: ignore[no-any-return]


def _float64_twin(out: Tensor, inputs: list[Tensor], feed: dict[Tensor, np.ndarray],
                  twin: Mapping[Tensor, Tensor]
                  ) -> tuple[Tensor, list[Tensor], dict[Tensor, np.ndarray]]:
    """The same point on the float64 twin ``twin`` of the DAG (``widen.float64_copy``): its
    output, its inputs and the feed with every re-typed placeholder's data converted."""
    feed = {twin.get(t, t): a.astype(twin[t].dtype.numpy) if t in twin else a
            for t, a in feed.items()}
    return twin[out], [twin[t] for t in inputs], feed


def _check_finite(out: Tensor, feed: Mapping[Tensor, np.ndarray]) -> None:
    """A ValueError naming the first non-finite element of ``out`` at the data, if any:
    finite differences there would be meaningless."""
    value = np.asarray(evaluate(out, feed), dtype=np.float64)
    if not np.isfinite(value).all():
        bad = tuple(int(i) for i in np.argwhere(~np.isfinite(value))[0])
        at = f"{out.name}{list(bad)}" if bad else out.name
        raise ValueError(f"check_grad: '{out.name}' is not finite at the data "
                         f"({at} = {value[bad]}); finite differences need "
                         "a point inside the function's domain: pass data")


def _analytic(out: Tensor, inputs: list[Tensor], feed: Mapping[Tensor, np.ndarray],
              head: np.ndarray, fdiff: Any = None,
              override: Mapping[Tensor, Any] | None = None) -> list[np.ndarray]:
    """The symbolic gradients, one per input, evaluated at the data with ``head``; an
    AssertionError when ``differentiate`` returns the wrong number or shapes."""
    head_tensor = placeholder(out.shape, out.dtype, name=HEAD_NAME)
    given = {k: v for k, v in (("fdiff", fdiff), ("override", override)) if v}
    grads = list(_differentiate(out, inputs, head_tensor, **given))
    if len(grads) != len(inputs):
        raise AssertionError(f"check_grad: differentiate returned {len(grads)} gradients for "
                             f"{len(inputs)} inputs")
    for inp, g in zip(inputs, grads):
        if not isinstance(g, Tensor) or g.shape != inp.shape:
            got = f"shape {g.shape}" if isinstance(g, Tensor) else type(g).__name__
            raise AssertionError(f"check_grad: differentiate returned a gradient of {got} for "
                                 f"'{inp.name}' of shape {inp.shape}")
    with_head = {**feed, head_tensor: head.astype(out.dtype.numpy)}
    return evaluate(grads, with_head)  # type: ignore[return-value]  # a list for a list


# --------------------------------------------------------------------------------------
# Finite differences
# --------------------------------------------------------------------------------------

def _delta_f(out: Tensor, inp: Tensor, feed: Mapping[Tensor, np.ndarray], head: np.ndarray,
             plus: np.ndarray, minus: np.ndarray) -> float:
    """``f(plus) - f(minus)`` with ``f(x) = sum(head * out(x))``, summed in float64 over the
    element-wise differences so that unaffected outputs cancel exactly."""
    hi = np.asarray(evaluate(out, {**feed, inp: plus}), dtype=np.float64)
    lo = np.asarray(evaluate(out, {**feed, inp: minus}), dtype=np.float64)
    return float(np.sum(head * (hi - lo)))


def _numeric_grad(out: Tensor, inp: Tensor, feed: Mapping[Tensor, np.ndarray],
                  head: np.ndarray, eps: float) -> np.ndarray:
    """The gradient of ``sum(head * out)`` with respect to ``inp`` by central differences,
    element by element: a float64 array of ``inp.shape``.

    ``feed`` maps placeholder Tensors (``inp`` among them) to arrays; ``head`` has
    ``out.shape``.
    """
    x = feed[inp]
    dtype = x.dtype
    head = np.asarray(head, dtype=np.float64)
    grad = np.empty(x.shape, dtype=np.float64)
    for index in np.ndindex(*x.shape):
        plus, minus = x.copy(), x.copy()
        plus[index] = dtype.type(float(x[index]) + eps)
        minus[index] = dtype.type(float(x[index]) - eps)
        step = float(plus[index]) - float(minus[index])
        if step == 0:
            raise ValueError(f"check_grad: eps={eps} does not change '{inp.name}'{list(index)} "
                             f"= {x[index]} in {dtype}; use a larger eps")
        grad[index] = _delta_f(out, inp, feed, head, plus, minus) / step
    return grad


def _directional(out: Tensor, inp: Tensor, feed: Mapping[Tensor, np.ndarray],
                 head: np.ndarray, grad: np.ndarray, eps: float,
                 directions: Sequence[np.ndarray]) -> tuple[np.ndarray, np.ndarray]:
    """Directional derivatives of ``sum(head * out)`` along each direction ``t``:
    ``(analytic, numeric)``, two float64 arrays of ``len(directions)``.

    With ``x_plus``/``x_minus`` the input's data plus/minus ``eps * t`` rounded to its dtype
    and ``d = x_plus - x_minus`` the step actually taken: ``analytic[k] = <grad, d> / (2 eps)``
    and ``numeric[k] = (f(x_plus) - f(x_minus)) / (2 eps)``, so both sides see the same
    perturbation. ``grad`` has ``inp.shape``; ``feed`` and ``head`` as for ``_numeric_grad``.
    """
    x = feed[inp]
    x64 = x.astype(np.float64)
    head = np.asarray(head, dtype=np.float64)
    grad = np.asarray(grad, dtype=np.float64)
    analytic = np.empty(len(directions))
    numeric = np.empty(len(directions))
    for k, t in enumerate(directions):
        plus = (x64 + eps * t).astype(x.dtype)
        minus = (x64 - eps * t).astype(x.dtype)
        step = plus.astype(np.float64) - minus.astype(np.float64)
        if not step.any():
            raise ValueError(f"check_grad: eps={eps} does not change '{inp.name}' in "
                             f"{x.dtype}; use a larger eps")
        analytic[k] = float(np.sum(grad * step)) / (2 * eps)
        numeric[k] = _delta_f(out, inp, feed, head, plus, minus) / (2 * eps)
    return analytic, numeric


# --------------------------------------------------------------------------------------
# Comparison
# --------------------------------------------------------------------------------------

def _check_input(out: Tensor, inp: Tensor, feed: Mapping[Tensor, np.ndarray],
                 head: np.ndarray, grad: np.ndarray, options: _Options,
                 dir_rng: np.random.Generator) -> None:
    """Compare the analytic gradient of one input with finite differences: element by
    element up to ``max_points`` elements, else along ``NUM_DIRECTIONS`` random directions
    drawn from ``dir_rng``."""
    g = np.asarray(grad, dtype=np.float64)
    step = options.eps if options.eps is not None else DEFAULT_EPS[inp.dtype.name]
    what = f"the gradient of '{out.name}' with respect to '{inp.name}'"
    size = feed[inp].size
    if size <= options.max_points:
        numeric = _numeric_grad(out, inp, feed, head, step)
        _assert_close(what, g, numeric, options.rtol, options.atol)
        return
    directions = [dir_rng.standard_normal(feed[inp].shape) for _ in range(NUM_DIRECTIONS)]
    analytic, numeric = _directional(out, inp, feed, head, g, step, directions)
    note = (f"(<grad, t>; '{inp.name}' has {size} elements > max_points="
            f"{options.max_points}; raise max_points to check element by element)")
    _assert_close(what, analytic, numeric, options.rtol, options.atol, directions=note)


def _assert_close(what: str, analytic: np.ndarray, numeric: np.ndarray, rtol: float,
                  atol: float, directions: str | None = None) -> None:
    """Raise AssertionError unless ``|analytic - numeric| <= atol + rtol * |numeric|``
    everywhere; the message names the worst point: an index of the input, or, when
    ``directions`` (a note for the message) is given, the random direction (1-based) of a
    1-d array of directional derivatives."""
    analytic = np.asarray(analytic, dtype=np.float64)
    numeric = np.asarray(numeric, dtype=np.float64)
    with np.errstate(all="ignore"):
        err = np.abs(analytic - numeric)
        ok = err <= atol + rtol * np.abs(numeric)
        if ok.all():
            return
        # worst point: the largest excess over the tolerance (NaN counts as worst)
        excess = np.where(np.isnan(err), np.inf, err - (atol + rtol * np.abs(numeric)))
        worst = np.unravel_index(int(np.argmax(excess)), analytic.shape)
        worst = tuple(int(i) for i in worst)
        rel = np.where(numeric != 0, err / np.abs(numeric), np.where(err == 0, 0, np.inf))
        max_abs = float(np.nanmax(err)) if not np.isnan(err).all() else math.nan
        max_rel = float(np.nanmax(rel)) if not np.isnan(rel).all() else math.nan
    if directions is None:
        where = f"at index {worst}"
    else:
        where = f"along random direction {worst[0] + 1} of {analytic.size} {directions}"
    n_bad = int((~ok).sum())
    raise AssertionError(
        f"check_grad: {what} is wrong {where}: analytic {float(analytic[worst]):.10g}, "
        f"numeric (finite differences) {float(numeric[worst]):.10g}; {n_bad} of {ok.size} "
        f"values out of tolerance; max abs error {max_abs:.3g}, max rel error {max_rel:.3g} "
        f"(rtol={rtol}, atol={atol})")
