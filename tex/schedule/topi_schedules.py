"""TVM's per-target topi schedules: ``topi.generic``, ``topi.x86`` and ``topi.cuda``.

In TVM each ``schedule_*`` of these modules takes ``outs`` (a tensor or a list of tensors)
and returns a schedule hand-written for one operator on one kind of machine. tex has one
scheduler for every DAG, so each of them here is ``auto_schedule(outs, target)`` for the
target its namespace stands for:

- ``topi.generic``: the target of the innermost ``with tex.target.Target(...)`` block,
  else ``"llvm"`` (TVM's generic schedules once dispatched on that target too);
- ``topi.x86``: the same, but a CPU target only (a CUDA target in scope is a ValueError);
- ``topi.cuda``: the target in scope when it is a CUDA one (its ``-arch``), else
  ``"cuda"``; TVM's CUDA schedules are meant to run inside ``with Target("cuda"):``.

``tex.topi`` sits above ``tex.schedule`` in the import rows, so ``tex/topi/__init__.py``
reaches ``NAMESPACES`` only inside its module ``__getattr__``, at first use. A TVM schedule
name a namespace lacks (Winograd, NCHWc, int8, cuDNN, ...) raises an ``AttributeError``
saying to use ``tex.schedule.auto_schedule`` (``tex.tvm_names``).
"""
from __future__ import annotations

import types
from collections.abc import Callable, Sequence
from typing import Any

from ..ir.tensor import Tensor
from ..target import Target, resolve_target, target_kind
from ..topi.nn import batch_matmul, conv2d_nchw, conv2d_nhwc, dense
from ..tvm_names import INSTEAD, missing
from .auto import auto_schedule
from .schedule import Schedule

__all__ = ["NAMESPACES", "TESTING", "TopiTargetModule", "cuda", "dispatch", "generic",
           "get_broadcast_schedule", "get_conv2d_nchw_implement", "get_elemwise_schedule",
           "get_injective_schedule", "get_reduce_schedule", "x86"]

# schedule name -> what it schedules (its docstring), for every namespace
COMMON: dict[str, str] = {
    "schedule_injective": "injective operators (element-wise maps, broadcasts, reshapes, "
                          "transposes, pads)",
    "schedule_elemwise": "element-wise operators",
    "schedule_broadcast": "broadcasting operators",
    "schedule_reduce": "reductions (topi.sum, topi.max, topi.argmax, ...)",
    "schedule_softmax": "topi.nn.softmax or topi.nn.log_softmax",
    "schedule_pool": "topi.nn.pool2d",
    "schedule_adaptive_pool": "adaptive pooling (in tex: topi.nn.pool2d, or a reduction "
                              "over the windows)",
    "schedule_dense": "topi.nn.dense",
    "schedule_batch_matmul": "topi.nn.batch_matmul",
    "schedule_conv2d_nchw": "topi.nn.conv2d_nchw",
    "schedule_conv2d_nhwc": "topi.nn.conv2d_nhwc",
    "schedule_conv2d_hwcn": "topi.nn.conv2d_hwcn",
    "schedule_depthwise_conv2d_nchw": "a depthwise NCHW convolution (in tex: a "
                                      "tex.compute)",
    "schedule_extern": "the operators following an external call (in tex: any DAG)",
    "schedule_concatenate": "topi.concatenate",
}
# TVM's further names in each module, for operators tex has
EXTRA: dict[str, dict[str, str]] = {
    "generic": {
        "schedule_depthwise_conv2d_nhwc": "a depthwise NHWC convolution (in tex: a "
                                          "tex.compute)",
        "schedule_pool_grad": "a pooling gradient (tex.differentiate of topi.nn.pool2d)",
    },
    "x86": {
        "schedule_dense_nopack": "topi.nn.dense",
        "schedule_dense_pack": "topi.nn.dense",
        "schedule_concatenate_cpu": "topi.concatenate",
    },
    "cuda": {
        "schedule_depthwise_conv2d_nhwc": "a depthwise NHWC convolution (in tex: a "
                                          "tex.compute)",
        "schedule_pool_grad": "a pooling gradient (tex.differentiate of topi.nn.pool2d)",
    },
}
# the schedules that take TVM's ``layout`` argument after ``outs``
TAKES_LAYOUT = frozenset({"schedule_pool", "schedule_adaptive_pool"})


def _outputs(outs: Any, what: str) -> list[Tensor]:
    """``outs`` as a list of tensors (TVM's schedules take one tensor or a list)."""
    if isinstance(outs, Tensor):
        return [outs]
    if isinstance(outs, (list, tuple)) and outs and all(isinstance(t, Tensor) for t in outs):
        return list(outs)
    raise TypeError(f"{what}: outs must be a Tensor or a non-empty list of Tensors, got "
                    f"{type(outs).__name__} {outs!r}")


def _generic_target(what: str, name: str) -> str:
    """The target in scope, else ``"llvm"``."""
    return resolve_target(None, what)


def _x86_target(what: str, name: str) -> str:
    """The target in scope, else ``"llvm"``; a CPU target only."""
    text = resolve_target(None, what)
    if target_kind(text, what) != "llvm":
        raise ValueError(f"{what}: the target in scope is {text!r} (the innermost 'with "
                         "tex.target.Target(...)' block), but topi.x86 schedules are for a "
                         f"CPU target ('llvm'); use tex.topi.cuda.{name}(outs) or "
                         f"tex.schedule.auto_schedule(outs, {text!r})")
    return text


def _cuda_target(what: str, name: str) -> str:
    """The target in scope when it is a CUDA one, else ``"cuda"``."""
    current = Target.current()
    if current is not None and target_kind(current.text, what) == "cuda":
        return current.text
    return "cuda"


PickTarget = Callable[[str, str], str]
TARGETS: dict[str, tuple[PickTarget, str]] = {
    "generic": (_generic_target, "the target in scope ('with tex.target.Target(...)'), "
                                 "else 'llvm'"),
    "x86": (_x86_target, "the CPU target in scope, else 'llvm' (a CUDA target in scope is "
                         "a ValueError)"),
    "cuda": (_cuda_target, "the CUDA target in scope, else 'cuda'"),
}


def _docstring(module: str, name: str, what: str, on: str, layout: bool) -> str:
    """The docstring of one schedule function."""
    layout_doc = ("\n    layout : str, optional\n        The data layout (TVM's argument; "
                  "tex reads the layout from the DAG).") if layout else ""
    return (f"TVM's ``{module.removeprefix('tex.')}.{name}``: a schedule for {what}.\n\n"
            f"    ``tex.schedule.auto_schedule(outs, target)``; target: {on}.\n\n"
            "    Parameters\n    ----------\n    outs : Tensor or list of Tensor\n"
            f"        The outputs to compute.{layout_doc}\n\n"
            "    Returns\n    -------\n    Schedule\n")


def _schedule_function(module: str, name: str, what: str, pick: PickTarget,
                       on: str) -> Callable[..., Schedule]:
    """``module.name``: ``auto_schedule`` of ``outs`` for the target ``pick`` gives."""
    where = f"{module}.{name}"
    if name in TAKES_LAYOUT:
        def schedule(outs: Tensor | Sequence[Tensor], layout: str | None = None) -> Schedule:
            if layout is not None and not isinstance(layout, str):
                raise TypeError(f"{where}: layout must be a string such as 'NCHW', got "
                                f"{type(layout).__name__} {layout!r}")
            tensors = _outputs(outs, where)
            return auto_schedule(tensors, pick(where, name))
    else:
        def schedule(outs: Tensor | Sequence[Tensor]) -> Schedule:  # type: ignore[misc]
            tensors = _outputs(outs, where)
            return auto_schedule(tensors, pick(where, name))
    schedule.__name__ = schedule.__qualname__ = name
    schedule.__module__ = __name__
    schedule.__doc__ = _docstring(module, name, what, on, name in TAKES_LAYOUT)
    return schedule


def _default_schedule(module: str) -> Callable[..., Schedule]:
    """TVM's ``topi.generic.default.default_schedule(outs, auto_inline)``."""
    where = f"{module}.default_schedule"

    def default_schedule(outs: Tensor | Sequence[Tensor], auto_inline: bool = False
                         ) -> Schedule:
        """TVM's default schedule: ``tex.schedule.auto_schedule(outs, target)`` with the
        target in scope, else ``'llvm'``. ``auto_inline`` is accepted for TVM's code;
        ``auto_schedule`` decides what to inline itself."""
        tensors = _outputs(outs, where)
        return auto_schedule(tensors, _generic_target(where, "default_schedule"))

    return default_schedule


class TopiTargetModule(types.ModuleType):
    """A namespace of TVM's per-target schedules (``tex.topi.cuda``, ...). A name it lacks
    raises an ``AttributeError`` saying what to use (``tex.tvm_names``), and any other
    ``schedule_*`` name one saying to use ``tex.schedule.auto_schedule``."""

    def __init__(self, name: str, doc: str, functions: dict[str, Any]) -> None:
        super().__init__(name, doc)
        self.__dict__.update(functions)
        self.__all__ = sorted(functions)

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__"):
            raise AttributeError(name)
        error = missing(self.__name__, name, self.__all__)
        if name.startswith("schedule_") and name not in INSTEAD.get(self.__name__, {}):
            base, sep, close = str(error).partition("; did you mean")
            raise AttributeError(f"{base}; use tex.schedule.auto_schedule(outs, target), "
                                 f"which schedules any DAG{sep}{close}")
        raise error

    def __dir__(self) -> list[str]:
        return sorted({*self.__all__, "__doc__", "__name__"})

    def __repr__(self) -> str:
        return f"<tex namespace {self.__name__!r}: TVM's per-target topi schedules>"


def _namespace(short: str) -> TopiTargetModule:
    """``tex.topi.<short>``: every schedule of ``COMMON`` and ``EXTRA[short]``."""
    module = f"tex.topi.{short}"
    pick, on = TARGETS[short]
    functions: dict[str, Any] = {
        name: _schedule_function(module, name, what, pick, on)
        for name, what in {**COMMON, **EXTRA[short]}.items()}
    if short in ("cuda", "x86"):
        # TVM's per-target computes: tex's computes serve every target (the schedule is
        # where targets differ)
        functions.update(conv2d_nchw=conv2d_nchw, conv2d_nhwc=conv2d_nhwc, dense=dense,
                         batch_matmul=batch_matmul)
    if short == "generic":
        functions["default_schedule"] = _default_schedule(module)
        # TVM keeps it in topi.generic.default
        functions["default"] = types.SimpleNamespace(
            default_schedule=functions["default_schedule"])
    doc = (f"TVM's ``topi.{short}`` schedules: each is tex.schedule.auto_schedule(outs, "
           f"target); target: {on}.")
    return TopiTargetModule(module, doc, functions)


generic = _namespace("generic")
x86 = _namespace("x86")
cuda = _namespace("cuda")
NAMESPACES: dict[str, TopiTargetModule] = {"generic": generic, "x86": x86, "cuda": cuda}


# TVM's topi.testing dispatch: a target's keys ("cpu"; "cuda", "gpu") pick a namespace
_BY_KEY = {"cpu": "x86", "gpu": "cuda", "cuda": "cuda"}


def dispatch(target: Any, dispatch_map: dict[str, Any]) -> Any:
    """The entry of ``dispatch_map`` for ``target``'s first key it has, else its
    ``"generic"`` entry (TVM's ``topi.testing.dispatch``)."""
    keys = Target(target).keys if not isinstance(target, Target) else target.keys
    for key in keys:
        if key in dispatch_map:
            return dispatch_map[key]
    return dispatch_map["generic"]


def _per_key(schedule: str) -> dict[str, Any]:
    """``{"generic": generic.<schedule>, "cpu": x86.<schedule>, "gpu": cuda.<schedule>}``."""
    table = {"generic": getattr(generic, schedule)}
    table.update((key, getattr(NAMESPACES[ns], schedule)) for key, ns in _BY_KEY.items())
    return table


def get_injective_schedule(target: Any) -> Callable[..., Schedule]:
    """The injective schedule for ``target`` (TVM's ``topi.testing`` helper)."""
    return dispatch(target, _per_key("schedule_injective"))


def get_broadcast_schedule(target: Any) -> Callable[..., Schedule]:
    """The broadcast schedule for ``target`` (TVM's ``topi.testing`` helper)."""
    return dispatch(target, _per_key("schedule_broadcast"))


def get_elemwise_schedule(target: Any) -> Callable[..., Schedule]:
    """The elementwise schedule for ``target`` (TVM's ``topi.testing`` helper)."""
    return dispatch(target, _per_key("schedule_elemwise"))


def get_reduce_schedule(target: Any) -> Callable[..., Schedule]:
    """The reduction schedule for ``target`` (TVM's ``topi.testing`` helper)."""
    return dispatch(target, _per_key("schedule_reduce"))


def get_conv2d_nchw_implement(target: Any) -> tuple[Callable[..., Tensor],
                                                    Callable[..., Schedule]]:
    """``(topi.nn.conv2d_nchw, its schedule for target)`` (TVM's ``topi.testing`` helper)."""
    return dispatch(target, {key: (conv2d_nchw, fn)
                             for key, fn in _per_key("schedule_conv2d_nchw").items()})


# the topi.testing names tex.topi.testing reaches here at first use
TESTING = {f.__name__: f for f in (dispatch, get_injective_schedule, get_broadcast_schedule,
                                   get_elemwise_schedule, get_reduce_schedule,
                                   get_conv2d_nchw_implement)}
