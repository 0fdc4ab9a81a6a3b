"""NumPy reference implementations under TVM's ``topi.testing`` names, to check compiled ops.

Every function here is pure NumPy (no tex expression is built or evaluated), written for
tex, and keeps TVM's signature, so ``tvm.topi.testing.conv2d_nchw_python(...)`` ports as
``tex.topi.testing.conv2d_nchw_python(...)``:

- ``conv2d_nchw_python``, ``conv2d_nhwc_python``, ``conv2d_hwcn_python``,
  ``depthwise_conv2d_python_nchw``, ``depthwise_conv2d_python_nhwc``, ``dilate_python``
  (``conv.py``);
- ``poolnd_python`` (``pool.py``);
- ``softmax_python``, ``log_softmax_python`` (``softmax.py``);
- ``dense``, ``batch_matmul`` (``matmul.py``).

TVM's schedule helpers (``dispatch``, ``get_injective_schedule``, ``get_broadcast_schedule``,
``get_elemwise_schedule``, ``get_reduce_schedule``, ``get_conv2d_nchw_implement``) pick
``topi.generic``/``x86``/``cuda`` schedules by the target's keys; they live with those
(``tex.schedule.topi_schedules``, a lower layer) and are imported at first use. Any other
TVM name this module lacks raises an ``AttributeError`` saying what to use
(``tex.tvm_names``).
"""
from typing import Any

from ...tvm_names import missing
from .conv import (
    conv2d_hwcn_python,
    conv2d_nchw_python,
    conv2d_nhwc_python,
    depthwise_conv2d_python_nchw,
    depthwise_conv2d_python_nhwc,
    dilate_python,
)
from .matmul import batch_matmul, dense
from .pool import poolnd_python
from .softmax import log_softmax_python, softmax_python

__all__ = [
    "batch_matmul",
    "conv2d_hwcn_python",
    "conv2d_nchw_python",
    "conv2d_nhwc_python",
    "dense",
    "depthwise_conv2d_python_nchw",
    "depthwise_conv2d_python_nhwc",
    "dilate_python",
    "log_softmax_python",
    "poolnd_python",
    "softmax_python",
]


def __getattr__(name: str) -> Any:
    """TVM's schedule helpers (imported at first use); any other TVM ``topi.testing`` name
    tex lacks: an AttributeError saying what to use."""
    if name in _SCHEDULE_HELPERS:
        # they return tex.schedule's schedules, a row below tex.topi (tests/test_layout.py)
        from ...schedule.topi_schedules import TESTING
        return TESTING[name]
    raise missing("tex.topi.testing", name, [*__all__, *_SCHEDULE_HELPERS])


_SCHEDULE_HELPERS = ("dispatch", "get_injective_schedule", "get_broadcast_schedule",
                     "get_elemwise_schedule", "get_reduce_schedule",
                     "get_conv2d_nchw_implement")
