"""Running compiled code: the JIT and its cache (``jit.py``), OpenMP (``openmp.py``) and the
callable built function with its argument checks (``module.py``)."""
from .jit import CACHE, Kernel, cache_key, clear_cache, jit_compile
from .module import BuiltFunction
from .openmp import load_openmp

__all__ = ["BuiltFunction", "CACHE", "Kernel", "cache_key", "clear_cache", "jit_compile",
           "load_openmp"]
