"""Testing helpers: ``evaluate``, the NumPy reference interpreter for tensor DAGs, and
``check_grad``, symbolic gradients checked against finite differences."""
from .gradcheck import check_grad
from .interpreter import OutOfBoundsError, evaluate

__all__ = ["OutOfBoundsError", "check_grad", "evaluate"]
