"""Neural-network operators (``tex.topi.nn``), built directly from ``tex.te``.

Signatures follow TVM's ``topi.nn``; see API.md §2. ``topi.nn.utils`` holds TVM's
``get_pad_tuple``; a TVM ``topi.nn`` name tex lacks raises an ``AttributeError`` that says
what to use (``tex.tvm_names``).
"""
from typing import Any

from ...tvm_names import missing
from . import utils
from .activation import leaky_relu, log_softmax, relu, softmax
from .conv import conv2d, conv2d_hwcn, conv2d_nchw, conv2d_nhwc
from .dense import batch_matmul, dense
from .loss import cross_entropy, cross_entropy_with_logits
from .norm import batch_norm, layer_norm
from .pooling import pool, pool2d
from .transform import flatten, pad

__all__ = [
    "batch_matmul", "batch_norm", "conv2d", "conv2d_hwcn", "conv2d_nchw", "conv2d_nhwc",
    "cross_entropy", "cross_entropy_with_logits", "dense", "flatten", "layer_norm",
    "leaky_relu", "log_softmax", "pad", "pool", "pool2d", "relu", "softmax", "utils",
]


def __getattr__(name: str) -> Any:
    """A TVM ``topi.nn`` name tex lacks: an AttributeError saying what to use instead."""
    raise missing("tex.topi.nn", name, __all__)
