"""The other frameworks ``run.py`` compares tex with: PyTorch eager (CPU autograd),
``torch.compile`` and JAX (``jax.jit``), each when importable.

For a workload and its data (``arrays``: placeholder names to float32 NumPy arrays, the head
``"H"`` included), ``torch_impl(w, arrays, compile=False|True)`` and ``jax_impl(w, arrays)``
return an ``Impl``: ``fwd()`` computes the forward, ``grad()`` one call computing the loss
``sum(forward * H)`` and the gradients with respect to ``w.wrt`` (for torch, the forward
then ``loss.backward()``; for JAX, ``jax.jit(jax.value_and_grad(loss, argnums))``). Both
block until the result is ready and return it; ``to_numpy`` converts it for the checks.

The PyTorch formulations are ``schedules.TORCH``; the JAX ones are ``JAX`` below (the
convolutions are ``jax.lax.conv_general_dilated``, the max-pool ``jax.lax.reduce_window``).
"""
from __future__ import annotations

import importlib
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import numpy as np

__all__ = ["JAX", "Impl", "jax_impl", "jax_module", "to_numpy", "torch_compiled_graphs",
           "torch_impl", "torch_module", "version_of"]

EPS = 1e-5  # layer norm


def torch_module() -> Any:
    """``torch``, or None when it cannot be imported."""
    try:
        return importlib.import_module("torch")
    except Exception:  # ImportError, or a broken install
        return None


def jax_module() -> Any:
    """``jax`` (with ``jax.numpy`` loaded), or None when it cannot be imported."""
    try:
        jax = importlib.import_module("jax")
        importlib.import_module("jax.numpy")
        return jax
    except Exception:
        return None


def version_of(module: Any) -> str | None:
    return getattr(module, "__version__", None) if module is not None else None


@dataclass
class Impl:
    """One framework's forward and gradient on one workload's data."""

    fwd: Callable[[], Any]
    grad: Callable[[], Any]  # returns (loss, [gradients in wrt order])
    info: dict[str, Any] = field(default_factory=dict)


def to_numpy(x: Any) -> np.ndarray:
    """A torch tensor or a JAX array as a NumPy array."""
    if hasattr(x, "detach"):
        return x.detach().cpu().numpy()
    return np.asarray(x)


# --------------------------------------------------------------------------------------
# PyTorch (eager and torch.compile)
# --------------------------------------------------------------------------------------


def torch_impl(w: Any, arrays: dict[str, np.ndarray], compile: bool = False,
               build: Callable[[Any, dict], Any] | None = None) -> Impl:
    """PyTorch on ``w``: eager, or both functions through ``torch.compile`` (default
    inductor backend). Compilation happens on the first call of ``fwd``/``grad``; call
    ``torch._dynamo.reset()`` before building a new workload's compiled functions.
    ``build(w, tensors)`` is the forward (default ``schedules.TORCH[w.name]``)."""
    import torch

    if build is None:
        from schedules import TORCH
        build = TORCH[w.name]
    in_names = [t.name for t in w.inputs]
    wrt = [t.name for t in w.wrt]
    tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
    ins = [tensors[n] for n in in_names]

    def forward(*args: Any) -> Any:
        return build(w, dict(zip(in_names, args)))

    def loss_of(*args: Any) -> Any:
        *xs, h = args
        return (build(w, dict(zip(in_names, xs))) * h).sum()

    if compile:
        forward = torch.compile(forward)
        loss_of = torch.compile(loss_of)

    def fwd() -> Any:
        with torch.no_grad():
            return forward(*ins)

    def grad() -> tuple[Any, list[Any]]:
        leaves = [t.detach().requires_grad_(n in wrt) for n, t in zip(in_names, ins)]
        loss = loss_of(*leaves, tensors["H"])
        loss.backward()
        by_name = dict(zip(in_names, leaves))
        return loss, [by_name[n].grad for n in wrt]

    return Impl(fwd, grad)


def torch_compiled_graphs() -> int | None:
    """Graphs torch.compile has produced since the last ``torch._dynamo.reset()`` (0 means
    every call fell back to eager), or None when the counter is not available."""
    try:
        from torch._dynamo.utils import counters
    except Exception:
        return None
    return int(counters["stats"]["unique_graphs"])


# --------------------------------------------------------------------------------------
# JAX
# --------------------------------------------------------------------------------------


def _j_dense(t: dict) -> Any:
    return t["X"] @ t["W"].T + t["B"]


def _j_conv(stride: int, pad: int) -> Callable[[dict], Any]:
    def f(t: dict) -> Any:
        import jax
        return jax.lax.conv_general_dilated(
            t["data"], t["kernel"], window_strides=(stride, stride),
            padding=[(pad, pad), (pad, pad)], dimension_numbers=("NCHW", "OIHW", "NCHW"))
    return f


def _j_maxpool(t: dict) -> Any:
    import jax
    import jax.numpy as jnp
    return jax.lax.reduce_window(t["data"], -jnp.inf, jax.lax.max, (1, 1, 2, 2), (1, 1, 2, 2),
                                 "VALID")


def _j_softmax(t: dict) -> Any:
    import jax
    return jax.nn.softmax(t["x"], axis=-1)


def _j_layernorm(t: dict) -> Any:
    import jax
    x = t["x"]
    mean = x.mean(axis=-1, keepdims=True)
    var = ((x - mean) ** 2).mean(axis=-1, keepdims=True)
    return (x - mean) * jax.lax.rsqrt(var + EPS) * t["gamma"] + t["beta"]


def _j_elementwise(t: dict) -> Any:
    import jax
    import jax.numpy as jnp
    return jnp.tanh(t["x"] * t["y"] + t["z"]) * jax.nn.sigmoid(t["x"])


def _j_bmm(t: dict) -> Any:
    return t["A"] @ t["B"]


def _j_sumsq(t: dict) -> Any:
    return (t["x"] * t["x"]).sum(axis=1)


JAX: dict[str, Callable[[dict], Any]] = {
    "dense": _j_dense, "conv2d": _j_conv(1, 1), "maxpool2d": _j_maxpool,
    "softmax": _j_softmax, "layernorm": _j_layernorm, "elementwise": _j_elementwise,
    "batch_matmul": _j_bmm, "sumsq": _j_sumsq, "conv2d_strided": _j_conv(2, 2),
}


def jax_impl(w: Any, arrays: dict[str, np.ndarray],
             fn: Callable[[dict], Any] | None = None) -> Impl:
    """``jax.jit`` of the forward and of ``jax.value_and_grad(loss, argnums=wrt)``; the
    data is put on the (CPU) device once. Compilation happens on the first call.
    ``fn(arrays_by_name)`` is the forward (default ``JAX[w.name]``)."""
    import jax
    import jax.numpy as jnp

    f = fn if fn is not None else JAX[w.name]
    in_names = [t.name for t in w.inputs]
    argnums = tuple(in_names.index(t.name) for t in w.wrt)
    ins = [jax.device_put(arrays[n]) for n in in_names]
    head = jax.device_put(arrays["H"])

    def forward(*xs: Any) -> Any:
        return f(dict(zip(in_names, xs)))

    def loss(*args: Any) -> Any:
        *xs, h = args
        return jnp.sum(forward(*xs) * h)

    jfwd = jax.jit(forward)
    jgrad = jax.jit(jax.value_and_grad(loss, argnums=argnums))

    def fwd() -> Any:
        return jfwd(*ins).block_until_ready()

    def grad() -> tuple[Any, list[Any]]:
        value, grads = jax.block_until_ready(jgrad(*ins, head))
        return value, list(grads)

    return Impl(fwd, grad)
