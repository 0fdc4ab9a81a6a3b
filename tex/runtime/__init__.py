"""Running compiled code: the JIT and its in-process cache (``jit.py``), the disk cache
(``diskcache.py``), OpenMP (``openmp.py``), the allocator of kernels' temporaries
(``workspace.py``), the callable built function with its argument checks
(``module.py``), TVM's device and array spellings (``ndarray.py``: ``tex.nd``) and shared
libraries of built functions (``library.py``: ``export_library``, ``load_module``)."""
from . import ndarray
from .diskcache import disk_cache_stats
from .jit import CACHE, Kernel, cache_key, clear_cache, jit_compile
from .library import load_module
from .module import BuiltFunction
from .openmp import load_openmp

__all__ = ["BuiltFunction", "CACHE", "Kernel", "cache_key", "clear_cache", "disk_cache_stats",
           "jit_compile", "load_module", "load_openmp", "ndarray"]
