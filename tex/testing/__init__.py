"""Testing helpers: ``evaluate``, the NumPy reference interpreter for tensor DAGs."""
from .interpreter import OutOfBoundsError, evaluate

__all__ = ["OutOfBoundsError", "evaluate"]
