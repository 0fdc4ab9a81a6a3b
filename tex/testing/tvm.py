"""TVM's ``tvm.testing`` helpers under their TVM names, so that TVM's unit tests port by
renaming ``tvm.testing`` to ``tex.testing``: ``check_numerical_grads``, ``device_enabled``,
``enabled_targets``, ``requires_cuda``/``requires_gpu``/``uses_gpu`` and ``assert_allclose``.

They keep TVM's semantics (``python/tvm/testing/utils.py``, v0.8-v0.14) where a ported test
can observe them: the arguments, defaults, what passes and what fails. tex's own gradient
check is ``check_grad`` (``gradcheck.py``); ``check_numerical_grads`` is the looser TVM one,
for code that computes its gradients itself.

Nothing here imports below ``tex.testing``'s row at import time, and pytest is imported only
when a ``requires_*`` mark is applied (tex does not depend on pytest). Whether a CUDA device
is usable is asked of ``tex.runtime`` inside ``device_enabled`` alone, at its first call for
``"cuda"`` (``LAZY_IMPORTS`` in ``tests/test_layout.py``).
"""
from __future__ import annotations

import math
from collections.abc import Callable, Mapping, Sequence
from typing import Any

import numpy as np

from ..target import TARGET_KINDS

__all__ = ["assert_allclose", "check_numerical_grads", "device_enabled", "enabled_targets",
           "requires_cuda", "requires_gpu", "uses_gpu"]


# --------------------------------------------------------------------------------------------
# Comparing arrays


def assert_allclose(actual: Any, desired: Any, rtol: float = 1e-7, atol: float = 1e-7) -> None:
    """``numpy.testing.assert_allclose`` with TVM's defaults (``rtol=1e-7, atol=1e-7``),
    after checking that the two shapes are equal (no broadcasting, as TVM's). ``actual``
    and ``desired`` are not interchangeable: the bound is ``atol + rtol * |desired|``."""
    actual = np.asanyarray(actual)
    desired = np.asanyarray(desired)
    if actual.shape != desired.shape:
        raise AssertionError(f"assert_allclose: actual has shape {actual.shape}, desired "
                             f"has shape {desired.shape}")
    np.testing.assert_allclose(actual, desired, rtol=rtol, atol=atol, verbose=True)


# --------------------------------------------------------------------------------------------
# Numerical gradients


def check_numerical_grads(function: Callable[..., Any],
                          input_values: Sequence[np.ndarray] | Mapping[str, np.ndarray],
                          grad_values: Sequence[np.ndarray] | Mapping[str, np.ndarray],
                          function_value: Any = None, delta: float = 1e-3, atol: float = 1e-2,
                          rtol: float = 0.1) -> None:
    """Check gradients of a scalar ``function`` computed some other way (``grad_values``)
    against finite differences, input by input, with TVM's criteria.

    ``input_values`` is a list (``function(*values)``) or a dict (``function(**values)``) of
    NumPy arrays; ``grad_values`` the same kind, for every input to check: a list may be
    shorter than ``input_values`` (the first ones are checked, the rest are held fixed, as
    an integer index array would be), a dict names a subset. ``function`` returns a scalar.

    Each partial derivative is a central difference with step ``delta`` (the step actually
    taken after rounding to the input's dtype, in float64); where it disagrees with the
    given element (``|num - grad| > atol + rtol * |num|``), the five-point estimate from
    the steps ``delta`` and ``delta / 2`` replaces it. An input passes when, over all its
    elements, ``||num - grad|| <= atol * sqrt(n) + rtol * ||num||`` (2-norms, ``n`` its
    size): single elements may disagree. Otherwise an ``AssertionError`` names the input,
    its worst element (index, both values), how many elements disagree and the two sides
    of the inequality. A wrong shape is an ``AssertionError``; a non-finite numerical or
    given gradient a ``ValueError`` naming the input; a non-float input with a gradient to
    check a ``TypeError``.

    ``function_value`` (``function`` at ``input_values``) is accepted as TVM's signature
    has it; central differences do not need it.
    """
    del function_value  # TVM's one-sided differences start from it; central ones do not
    if isinstance(input_values, Mapping):
        names = list(input_values)
        values = [np.asarray(input_values[n]) for n in names]
        if not isinstance(grad_values, Mapping):
            raise TypeError("check_numerical_grads: input_values is a dict, so grad_values "
                            f"must be one too (got {type(grad_values).__name__})")
        unknown = [k for k in grad_values if k not in input_values]
        if unknown:
            raise ValueError(f"check_numerical_grads: grad_values has {unknown}, which "
                             f"input_values does not have (its keys: {names})")
        checked = [(names.index(k), grad_values[k]) for k in grad_values]
        labels = [f"input {n!r}" for n in names]

        def call(vals: list[np.ndarray]) -> Any:
            return function(**dict(zip(names, vals)))
    else:
        values = [np.asarray(v) for v in input_values]
        if isinstance(grad_values, Mapping):
            raise TypeError("check_numerical_grads: input_values is a list, so grad_values "
                            "must be one too (got a dict)")
        grads = list(grad_values)
        if len(grads) > len(values):
            raise ValueError(f"check_numerical_grads: {len(grads)} gradients for "
                             f"{len(values)} inputs")
        checked = list(enumerate(grads))
        labels = [f"input {i}" for i in range(len(values))]

        def call(vals: list[np.ndarray]) -> Any:
            return function(*vals)

    for index, grad in checked:
        _check_input(call, values, index, np.asarray(grad), labels[index], delta, atol, rtol)


def _scalar(value: Any, label: str) -> float:
    arr = np.asarray(value)
    if arr.size != 1:
        raise ValueError(f"check_numerical_grads: the function must return a scalar; it "
                         f"returned an array of shape {arr.shape} (perturbing {label})")
    return float(arr.reshape(()))


def _check_input(call: Callable[[list[np.ndarray]], Any], values: list[np.ndarray],
                 index: int, grad: np.ndarray, label: str, delta: float, atol: float,
                 rtol: float) -> None:
    """One input of ``check_numerical_grads``: its numerical gradient, then TVM's test."""
    x = values[index]
    if grad.shape != x.shape:
        raise AssertionError(f"check_numerical_grads: the gradient of {label} has shape "
                             f"{grad.shape}, expected {x.shape} (the input's)")
    if not np.issubdtype(x.dtype, np.floating):
        raise TypeError(f"check_numerical_grads: {label} has dtype {x.dtype}; only float "
                        "inputs can be perturbed (pass the gradients of the float inputs "
                        "only, the integer ones last)")
    flat = x.reshape(-1)

    def difference(j: int, step: float) -> float:
        """Central difference along element ``j``, divided by the step really taken."""
        plus, minus = flat.copy(), flat.copy()
        plus[j] += step
        minus[j] -= step
        taken = float(plus[j]) - float(minus[j])
        if taken == 0.0:
            raise ValueError(f"check_numerical_grads: delta={step} does not change element "
                             f"{np.unravel_index(j, x.shape)} = {flat[j]} of {label} "
                             f"({x.dtype}); use a larger delta")
        vals = list(values)
        vals[index] = plus.reshape(x.shape)
        f_plus = _scalar(call(vals), label)
        vals[index] = minus.reshape(x.shape)
        f_minus = _scalar(call(vals), label)
        return (f_plus - f_minus) / taken

    given = grad.astype(np.float64).reshape(-1)
    numerical = np.empty(flat.size, np.float64)
    for j in range(flat.size):
        estimate = difference(j, delta)
        if not abs(estimate - given[j]) <= atol + rtol * abs(estimate):
            # Richardson extrapolation of the two central differences: error O(delta^4)
            estimate = (4.0 * difference(j, delta / 2) - estimate) / 3.0
        numerical[j] = estimate

    for what, arr in (("numerical", numerical), ("given", given)):
        bad = np.flatnonzero(~np.isfinite(arr))
        if bad.size:
            where = np.unravel_index(int(bad[0]), x.shape)
            raise ValueError(f"check_numerical_grads: the {what} gradient of {label} is not "
                             f"finite at {len(bad)} of {flat.size} elements, first at "
                             f"{tuple(int(i) for i in where)}: {arr[bad[0]]}")

    error = np.abs(numerical - given)
    excess = error - (atol + rtol * np.abs(numerical))
    dist = float(np.sqrt(np.sum(error**2)))
    bound = atol * math.sqrt(flat.size) + rtol * float(np.sqrt(np.sum(numerical**2)))
    if dist > bound:
        worst = int(np.argmax(excess))
        where = tuple(int(i) for i in np.unravel_index(worst, x.shape))
        raise AssertionError(
            f"check_numerical_grads: the gradient of {label} (shape {x.shape}) differs from "
            f"finite differences: ||numerical - given|| = {dist:.6g} > atol * sqrt(n) + "
            f"rtol * ||numerical|| = {bound:.6g} (atol={atol}, rtol={rtol}, n={flat.size}); "
            f"{int(np.sum(excess > 0))} of {flat.size} elements disagree; worst at {where}: "
            f"given {given[worst]:.6g}, numerical {numerical[worst]:.6g}")


# --------------------------------------------------------------------------------------------
# Targets and devices


# target kind -> the Device when it is usable, else None (probed once, by device_enabled)
_PROBED: dict[str, Any] = {}

# The target strings enabled_targets tries, in order (TVM's DEFAULT_TEST_TARGETS, cut to the
# machines tex compiles for: "nvptx" is tex's "cuda").
TEST_TARGETS = ("llvm", "cuda")


def device_enabled(target: str) -> bool:
    """Whether tests should run on ``target`` (a target string; only its first word counts):
    True for ``"llvm"``/``"cpu"`` (the host), for ``"cuda"``/``"nvptx"`` whether a CUDA
    device is usable here (the driver loads and finds device 0), False for every other
    name (``"opencl"``, ``"metal"``, ``"rocm"``, ``"vulkan"``...: tex has no such backend).
    The answer is probed once per process."""
    if not isinstance(target, str):
        raise TypeError(f"device_enabled: target must be a target string such as 'llvm' or "
                        f"'cuda', got {type(target).__name__} {target!r}")
    words = target.split()
    kind = TARGET_KINDS.get(words[0].lower()) if words else None
    if kind is None:
        return False
    if kind not in _PROBED:
        # tex.runtime is below tex.testing's row: reached here only, at the first probe
        from ..runtime.ndarray import device
        dev = device(kind, 0)
        _PROBED[kind] = dev if dev.exist else None
    return _PROBED[kind] is not None


def enabled_targets() -> list[tuple[str, Any]]:
    """``(target, device)`` for every target ``device_enabled`` accepts, of ``"llvm"`` and
    ``"cuda"``: always the host CPU, and the first CUDA GPU when one is usable."""
    return [(t, _PROBED[TARGET_KINDS[t]]) for t in TEST_TARGETS if device_enabled(t)]


class _Requirement:
    """A test decorator as TVM's ``requires_*`` marks: skip unless ``check()`` is true, and
    mark the test ``gpu`` (tex's marker for tests needing a GPU)."""

    def __init__(self, name: str, check: Callable[[], bool], reason: str) -> None:
        self.name = name
        self.check = check
        self.reason = reason

    def __call__(self, test: Any) -> Any:
        import pytest  # only where a test suite applies the mark

        skip = pytest.mark.skipif(not self.check(), reason=self.reason)
        return skip(pytest.mark.gpu(test))

    def __repr__(self) -> str:
        return f"tex.testing.{self.name}"


def _cuda_usable() -> bool:
    return device_enabled("cuda")


requires_cuda = _Requirement("requires_cuda", _cuda_usable,
                             "needs a usable CUDA device (no NVIDIA driver or GPU here)")
# the only GPUs tex runs on are NVIDIA ones
requires_gpu = _Requirement("requires_gpu", _cuda_usable,
                            "needs a GPU: tex runs on NVIDIA GPUs through CUDA, and none is "
                            "usable here")


def uses_gpu(test: Any) -> Any:
    """TVM's mark for a test that runs on the CPU and, when one is present, also on a GPU
    (it checks ``device_enabled`` itself): it needs no skip, so the test is returned as it
    is (tex's ``gpu`` marker means "skip without a GPU", which this test must not be)."""
    return test
