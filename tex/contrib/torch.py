"""The PyTorch bridge: tex-compiled functions called on torch tensors, differentiable by
``torch.autograd`` to any order.

    fn = tex.contrib.torch.function(Y, [X, W, B])   # compiles the forward now
    y = fn(x, w, b)           # torch tensors in, a torch tensor out (a tuple for several)
    y.sum().backward()        # the gradients run tex-compiled code too

How a call runs:

- **Forward**: one kernel built by ``tex.build(auto_schedule(outputs), [*inputs, *outputs])``.
  Inputs reach it as NumPy views of the tensors' own memory (``Tensor.numpy()`` shares the
  storage), outputs are allocated with ``torch.empty`` and written in place by the kernel: no
  data is copied, except that a non-contiguous input is first made contiguous (the kernels
  read dense row-major buffers).
- **Backward** computes vector-Jacobian products. The heads torch passes (one per float
  output ``Y_k``) become placeholders ``H_k``; the gradients are those of the scalar
  ``L = sum_k sum(Y_k * H_k)`` with respect to the inputs torch asks for
  (``ctx.needs_input_grad``). One reverse sweep over ``L`` shares the adjoints of the
  intermediates between the outputs (differentiating each output on its own would walk the
  shared part once per output), and ``L``'s adjoint of ``Y_k`` folds to ``H_k``, so no
  extra work is left. The gradient tensors are compiled into *another bridged function* of
  ``(inputs..., heads...)``, built on first use and cached per pattern of requested
  inputs. Since backward calls a bridged function, it is itself differentiable: double
  backward (``gradgradcheck``) and higher orders build their gradient functions the same
  way, lazily.
- Integer and bool outputs are marked non-differentiable; integer inputs get ``None``
  gradients.

Cost: a gradient function recomputes the forward intermediates it reads (there is no tape
between forward and backward; ``tex.autodiff.grad_program`` is the tool for that).

Targets: ``"llvm"`` (the CPU) takes CPU tensors. ``"cuda"`` takes CUDA tensors on device 0,
used in place through ``__cuda_array_interface__`` (tex's ``CudaFunction`` accepts them;
torch's current stream is synchronized before the kernels run, and the call returns after
they finished), or CPU tensors, which tex copies to the GPU and back.

Not supported: ``torch.func`` transforms (``vmap``, ``grad``, ``jacrev``): torch refuses an
autograd Function without ``setup_context``, and the kernels could not read functorch's
wrapped tensors anyway.
"""
from __future__ import annotations

import re
import threading
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

try:
    import torch
except ImportError as e:  # pragma: no cover - depends on the environment
    raise ImportError("tex.contrib.torch needs PyTorch (pip install torch)") from e

from .. import topi
from ..arith.extent import extent_value, extent_vars
from ..autodiff import differentiate
from ..build import build
from ..ir.tensor import PlaceholderOp, Tensor
from ..ir.visit import topo_sort_ops
from ..schedule import auto_schedule
from ..target import resolve_target, target_kind
from ..te import compute, placeholder
from ..te.specialize import bind_shape_vars, shape_vars

__all__ = ["function", "TorchFunction"]

# tex dtype name -> torch dtype (every dtype of tex.dtype has one)
TORCH_DTYPES: dict[str, torch.dtype] = {
    "float16": torch.float16, "float32": torch.float32, "float64": torch.float64,
    "int8": torch.int8, "int16": torch.int16, "int32": torch.int32, "int64": torch.int64,
    "uint8": torch.uint8, "bool": torch.bool,
}


@dataclass(frozen=True)
class _ArgSpec:
    """What one argument of the callable must be."""

    position: int
    name: str
    shape: tuple[int, ...]
    dtype: torch.dtype

    def where(self) -> str:
        return f"argument {self.position} ('{self.name}')"

    def describe(self) -> str:
        return f"{self.name}: {self.dtype}[{', '.join(map(str, self.shape))}]"


def _ident(text: str) -> str:
    """``text`` made a valid function name: ``T.v0`` -> ``T_v0``."""
    text = re.sub(r"\W", "_", text)
    return text if text and not text[0].isdigit() else f"f_{text}"


def _is_cuda(target: str) -> bool:
    return target_kind(target, "function") == "cuda"


def _check_tensors(value: Any, what: str) -> tuple[list[Tensor], bool]:
    """``value`` as a list of tex tensors, and whether it was a single tensor."""
    if isinstance(value, Tensor):
        return [value], True
    if isinstance(value, (list, tuple)):
        for k, t in enumerate(value):
            if not isinstance(t, Tensor):
                raise TypeError(f"function: {what}[{k}] must be a tex Tensor, got "
                                f"{type(t).__name__} {t!r}")
        return list(value), False
    raise TypeError(f"function: {what} must be a tex Tensor or a list of them, got "
                    f"{type(value).__name__} {value!r}")


def _check_inputs(inputs: list[Tensor]) -> None:
    seen: set[Tensor] = set()
    for k, t in enumerate(inputs):
        if not isinstance(t.op, PlaceholderOp):
            raise TypeError(f"function: inputs[{k}] '{t.name}' is computed, not a placeholder; "
                            "inputs are the placeholders the callable takes, in order")
        if t in seen:
            raise ValueError(f"function: placeholder '{t.name}' appears twice in inputs")
        seen.add(t)


def _check_closed(outputs: list[Tensor], inputs: list[Tensor]) -> None:
    """Every placeholder the outputs read is an input."""
    known = {t.op for t in inputs}
    names = [t.name for t in inputs]
    for op in topo_sort_ops(outputs):
        if isinstance(op, PlaceholderOp) and op not in known:
            raise ValueError(f"function: the outputs depend on placeholder '{op.name}', which "
                             f"is not among inputs {names}; add it to inputs")


def _copy(t: Tensor) -> Tensor:
    """A computed copy of ``t``: ``T_copy[i, j] = T[i, j]``."""
    return compute(t.shape, lambda *i: t[i], name=f"{t.name}_copy")  # type: ignore[no-any-return]


def _kernel_outputs(outputs: list[Tensor]) -> list[Tensor]:
    """The outputs as a built function can write them: a placeholder (an input passed
    through, or a gradient that is a head) or a repeated tensor becomes a computed copy,
    so every output owns its buffer."""
    seen: set[Tensor] = set()
    result = []
    for t in outputs:
        if isinstance(t.op, PlaceholderOp) or t in seen:
            t = _copy(t)
        seen.add(t)
        result.append(t)
    return result


def _vjp_loss(outputs: list[Tensor], heads: list[Tensor]) -> Tensor:
    """``sum_k sum(Y_k * H_k)`` (at least one output): its gradient is the sum of the
    vector-Jacobian products."""
    widest = max((t.dtype for t in outputs), key=lambda d: d.bits)
    terms = []
    for y, h in zip(outputs, heads):
        term = topi.sum(topi.multiply(y, h))
        if term.dtype != widest:  # float32 and float64 outputs: add in the wider one
            term = topi.cast(term, widest.name)
        terms.append(term)
    loss = terms[0]
    for term in terms[1:]:
        loss = topi.add(loss, term)
    return loss


class _TexAutograd(torch.autograd.Function):
    """Runs a ``TorchFunction``'s kernel; its backward runs the bridged gradient function.

    Each ``TorchFunction`` subclasses this under its own name, so ``y.grad_fn`` shows which
    tex function made ``y``. ``apply(bridge, device, *tensors)``.
    """

    @staticmethod
    def forward(ctx: Any, bridge: TorchFunction, device: torch.device,  # type: ignore[override]
                *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        outs = bridge._run(device, args)
        ctx.bridge = bridge
        ctx.save_for_backward(*args)
        frozen = [o for o, t in zip(outs, bridge.outputs) if not t.dtype.is_float]
        if frozen:
            ctx.mark_non_differentiable(*frozen)
        return outs

    @staticmethod
    def backward(ctx: Any, *heads: torch.Tensor) -> tuple[torch.Tensor | None, ...]:
        bridge: TorchFunction = ctx.bridge
        wanted = ctx.needs_input_grad[2:]  # after (bridge, device)
        mask = tuple(bool(w) and t.dtype.is_float for w, t in zip(wanted, bridge.inputs))
        grads: list[torch.Tensor | None] = [None] * len(mask)
        if any(mask) and bridge.differentiable:
            float_heads = [h for h, t in zip(heads, bridge.outputs) if t.dtype.is_float]
            # a bridged call: when torch records this backward (create_graph=True), the
            # gradient function's own backward gives the second derivatives
            computed = iter(bridge.gradient(mask)(*ctx.saved_tensors, *float_heads))
            grads = [next(computed) if m else None for m in mask]
        return (None, None, *grads)


class TorchFunction:
    """A tex computation callable on torch tensors; see ``function``.

    Attributes
    ----------
    outputs, inputs : tuple of Tensor
        The tex tensors computed, and the placeholders in call order.
    name : str
        The kernel's name (gradient functions append ``_grad``).
    target : str
    kernel : BuiltFunction or CudaFunction
        The compiled forward; it is called with NumPy views of the tensors (CPU) or the
        CUDA tensors themselves.
    gradients : dict
        The gradient functions built so far: ``{mask: TorchFunction}``, where ``mask`` says
        which inputs each differentiates with respect to (read-only view).
    """

    def __init__(self, outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
                 target: str = "llvm", name: str | None = None, *,
                 always_tuple: bool = False, hint: Mapping[Any, int] | None = None) -> None:
        if not isinstance(always_tuple, bool):
            raise TypeError(f"function: always_tuple must be a bool (True or False), got "
                            f"{type(always_tuple).__name__} {always_tuple!r}")
        outs, single = _check_tensors(outputs, "outputs")
        if not outs:
            raise ValueError("function: outputs is empty; pass the tensors to compute")
        ins, _ = _check_tensors(inputs, "inputs")
        _check_inputs(ins)
        _check_closed(outs, ins)
        self.outputs: tuple[Tensor, ...] = tuple(outs)
        self.inputs: tuple[Tensor, ...] = tuple(ins)
        target = resolve_target(target, "function")  # a Target's text
        self.target = target
        self.name = _ident(outs[0].name) if name is None else name
        self._single = single and not always_tuple
        self._cuda = _is_cuda(target)
        # symbolic shapes: one build serves every size; the outputs' shape variables must
        # come from the inputs' shapes (the outputs are allocated from them)
        self._symbolic = any(not isinstance(d, int) for t in (*outs, *ins) for d in t.shape)
        self.hint = dict(hint or {})
        if self._symbolic:
            known = set(shape_vars(ins))
            for t in outs:
                missing = [v.name for v in extent_vars(*t.shape) if v not in known]
                if missing:
                    raise ValueError(f"function: output '{t.name}' of shape {t.shape} uses "
                                     f"the shape variable '{missing[0]}', which no input's "
                                     "shape has; the outputs are sized from the inputs")
        results = _kernel_outputs(outs)
        self.kernel = build(auto_schedule(results, target=target, hint=self.hint),
                            [*ins, *results], target=target, name=self.name)
        self._in_specs = tuple(_ArgSpec(k, t.name, t.shape, TORCH_DTYPES[t.dtype.name])
                               for k, t in enumerate(ins))
        self._out_specs = tuple((t.shape, TORCH_DTYPES[t.dtype.name]) for t in outs)
        self._gradients: dict[tuple[bool, ...], TorchFunction] = {}
        self._lock = threading.Lock()
        self.autograd_function: type[torch.autograd.Function] = type(
            self.name, (_TexAutograd,), {"__doc__": f"The tex function {self.name}."})

    # -- calling ----------------------------------------------------------------------------
    def __call__(self, *args: torch.Tensor) -> torch.Tensor | tuple[torch.Tensor, ...]:
        """Run on torch tensors (one per input, in order); returns the outputs."""
        device = self._check_args(args)
        outs = self.autograd_function.apply(self, device, *args)
        return outs[0] if self._single else tuple(outs)

    def _signature(self) -> str:
        return ", ".join(s.describe() for s in self._in_specs)

    def _check_args(self, args: Sequence[Any]) -> torch.device:
        """Count, type, dtype, shape and device of every argument; the outputs' device."""
        if len(args) != len(self._in_specs):
            raise TypeError(f"{self.name}() takes {len(self._in_specs)} tensors "
                            f"({self._signature()}) but {len(args)} were given")
        device: torch.device | None = None
        for spec, t in zip(self._in_specs, args):
            where = f"{self.name}: {spec.where()}"
            if not isinstance(t, torch.Tensor):
                raise TypeError(f"{where} must be a torch.Tensor of {spec.dtype}"
                                f"{list(spec.shape)}, got {type(t).__name__}"
                                " (convert with torch.as_tensor)")
            if t.layout != torch.strided:
                raise TypeError(f"{where} has layout {t.layout}; only dense (strided) tensors "
                                "are supported (use .to_dense())")
            if t.dtype != spec.dtype:
                raise TypeError(f"{where} must have dtype {spec.dtype}, got {t.dtype} "
                                f"(convert with .to({spec.dtype}))")
            if not self._symbolic and tuple(t.shape) != spec.shape:
                raise ValueError(f"{where} must have shape {spec.shape}, got {tuple(t.shape)}")
            dev = t.device
            if dev.type == "cuda" and self._cuda:
                if dev.index not in (None, 0):
                    raise ValueError(f"{where} is on {dev}; tex runs CUDA code on device 0 "
                                     "(set CUDA_VISIBLE_DEVICES to choose the GPU)")
            elif dev.type != "cpu":
                raise ValueError(f"{where} is on device {dev}, but {self.name} was built for "
                                 f"target {self.target!r}, which takes CPU tensors"
                                 + (" (move it with .cpu(), or build with target='cuda')"
                                    if dev.type == "cuda" else " (move it with .cpu())"))
            if device is None:
                device = dev
            elif dev.type != device.type:
                raise ValueError(f"{where} is on {dev} but earlier arguments are on {device}; "
                                 "pass all tensors on one device")
        if self._symbolic:
            self._sizes(args)  # the shapes agree (a ValueError naming the arguments)
        return device if device is not None else torch.device("cpu")

    def _sizes(self, args: Sequence[torch.Tensor]) -> dict[Any, int]:
        """The shape variables' values at these arguments (checked across them)."""
        return bind_shape_vars(list(self.inputs),
                               {t: tuple(a.shape) for t, a in zip(self.inputs, args)},
                               {}, self.name)

    def _view(self, t: torch.Tensor) -> Any:
        """What the kernel reads for ``t``: its memory, without a copy when it is dense."""
        t = t.detach()  # .numpy() refuses tensors that require grad; detach shares memory
        if not t.is_contiguous():
            t = t.contiguous()  # the one copy: kernels read dense row-major buffers
        if t.device.type == "cuda":
            return t  # used in place through __cuda_array_interface__
        a = t.numpy()
        # torch and NumPy agree on contiguity except for odd strides of size-1 dimensions
        return a if a.flags.c_contiguous else np.ascontiguousarray(a)

    def _run(self, device: torch.device, args: Sequence[torch.Tensor]
             ) -> tuple[torch.Tensor, ...]:
        """Run the kernel: outputs allocated on ``device`` and written in place."""
        arrays = [self._view(t) for t in args]
        sizes = self._sizes(args) if self._symbolic else {}
        outs = tuple(torch.empty([d if isinstance(d, int) else extent_value(d, sizes)
                                  for d in shape], dtype=dtype, device=device)
                     for shape, dtype in self._out_specs)
        if device.type == "cuda":
            # tex launches on the driver's default stream: finish torch's work first
            torch.cuda.current_stream(device).synchronize()
            self.kernel(*arrays, *outs)
        else:
            self.kernel(*arrays, *(o.numpy() for o in outs))
        return outs

    # -- gradients --------------------------------------------------------------------------
    @property
    def differentiable(self) -> bool:
        """Whether some output is a float tensor (only those carry gradients)."""
        return any(t.dtype.is_float for t in self.outputs)

    @property
    def gradients(self) -> dict[tuple[bool, ...], TorchFunction]:
        return dict(self._gradients)

    def gradient(self, mask: Sequence[bool]) -> TorchFunction:
        """The bridged function of ``(inputs..., heads...)`` returning the vector-Jacobian
        products for the inputs where ``mask`` is true, in input order (a tuple). There is
        one head per float output, shaped like it. Built on first use, then cached.

        Raises
        ------
        ValueError
            ``mask`` has the wrong length, selects no input or an integer input, or no
            output is a float tensor.
        """
        key = tuple(bool(m) for m in mask)
        if len(key) != len(self.inputs):
            raise ValueError(f"{self.name}.gradient: mask has {len(key)} entries for "
                             f"{len(self.inputs)} inputs")
        with self._lock:
            fn = self._gradients.get(key)
            if fn is None:
                fn = self._gradients[key] = self._build_gradient(key)
        return fn

    def _build_gradient(self, mask: tuple[bool, ...]) -> TorchFunction:
        wrt = [t for t, m in zip(self.inputs, mask) if m]
        if not wrt:
            raise ValueError(f"{self.name}.gradient: mask selects no input")
        for t in wrt:
            if not t.dtype.is_float:
                raise ValueError(f"{self.name}.gradient: input '{t.name}' has dtype {t.dtype}; "
                                 "only float inputs have gradients")
        outs = [t for t in self.outputs if t.dtype.is_float]
        if not outs:
            raise ValueError(f"{self.name}.gradient: no output is a float tensor")
        heads = [placeholder(t.shape, t.dtype.name, name=f"{_ident(t.name)}_head")
                 for t in outs]
        grads = list(differentiate(_vjp_loss(outs, heads), wrt))
        grads = [g if g.dtype == t.dtype else topi.cast(g, t.dtype.name)
                 for g, t in zip(grads, wrt)]
        return TorchFunction(grads, [*self.inputs, *heads], self.target, f"{self.name}_grad",
                             always_tuple=True, hint=self.hint)

    def __repr__(self) -> str:
        return (f"TorchFunction({self.name!r}, inputs={[t.name for t in self.inputs]}, "
                f"outputs={[t.name for t in self.outputs]}, target={self.target!r})")


def function(outputs: Tensor | Sequence[Tensor], inputs: Tensor | Sequence[Tensor],
             target: str = "llvm", name: str | None = None,
             hint: Mapping[Any, int] | None = None) -> TorchFunction:
    """Compile tex tensors into a function of torch tensors, differentiable by autograd.

    Parameters
    ----------
    outputs : Tensor or list of Tensor
        What to compute. A single tensor makes the callable return one torch tensor; a
        list makes it return a tuple.
    inputs : Tensor or list of Tensor
        The placeholders, in the order the callable takes them. Every placeholder the
        outputs depend on must be here; others are allowed (their gradients are zero).
    target : str
        ``"llvm"`` (CPU tensors) or ``"cuda"`` (CUDA tensors on device 0, or CPU tensors
        copied to the GPU and back).
    name : str, optional
        The kernel's name (default: the first output's); gradient kernels append ``_grad``.
    hint : dict, optional
        With symbolic shapes (``tex.size_var`` dimensions, a variable batch): the sizes the
        kernels are tuned for (``auto_schedule(hint=)``). One build serves every size; the
        shape variables are read from the arguments' shapes.

    Returns
    -------
    TorchFunction
        ``fn(*tensors)``: each argument must have its placeholder's dtype and shape (no
        implicit conversion); outputs are new tensors on the arguments' device. Backward
        (any order) runs tex-compiled gradients, built when first needed.

    Raises
    ------
    TypeError
        ``outputs``/``inputs`` are not tex tensors, or an input is not a placeholder.
    ValueError
        A placeholder the outputs read is missing from ``inputs`` (named), or one is
        repeated; or the kernel cannot be built for ``target``.

    Example
    -------
    >>> Y = topi.nn.dense(X, W, B)
    >>> fn = tex.contrib.torch.function(Y, [X, W, B])
    >>> y = fn(x, w, b); y.sum().backward()
    """
    return TorchFunction(outputs, inputs, target, name, hint=hint)
