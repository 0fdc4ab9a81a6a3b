"""Neural-network operators (``tex.topi.nn``), built directly from ``tex.te``.

Signatures follow TVM's ``topi.nn``; see API.md §2.
"""
from .activation import leaky_relu, log_softmax, relu, softmax
from .conv import conv2d
from .dense import batch_matmul, dense
from .loss import cross_entropy, cross_entropy_with_logits
from .norm import batch_norm, layer_norm
from .pooling import pool, pool2d
from .transform import flatten, pad

__all__ = [
    "batch_matmul", "batch_norm", "conv2d", "cross_entropy", "cross_entropy_with_logits",
    "dense", "flatten", "layer_norm", "leaky_relu", "log_softmax", "pad", "pool", "pool2d",
    "relu", "softmax",
]
