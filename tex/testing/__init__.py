"""Testing helpers: ``evaluate``, the NumPy reference interpreter for tensor DAGs,
``check_grad``, symbolic gradients checked against finite differences, and TVM's
``tvm.testing`` helpers under their names (``tvm.py``)."""
from .gradcheck import check_grad
from .interpreter import OutOfBoundsError, evaluate
from .tvm import (
    assert_allclose,
    check_numerical_grads,
    device_enabled,
    enabled_targets,
    requires_cuda,
    requires_gpu,
    uses_gpu,
)

__all__ = ["OutOfBoundsError", "assert_allclose", "check_grad", "check_numerical_grads",
           "device_enabled", "enabled_targets", "evaluate", "requires_cuda", "requires_gpu",
           "uses_gpu"]
