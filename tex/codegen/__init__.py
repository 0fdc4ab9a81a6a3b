"""Code generation: loop IR -> LLVM IR -> optimized module (``llvm.py`` drives the host CPU,
``ptx.py`` NVIDIA GPUs)."""
from .host import HostTarget, host_target
from .llvm import CompiledModule, compile_llvm, compile_nests, emit_llvm
from .module import CodegenOptions

__all__ = ["CodegenOptions", "CompiledModule", "HostTarget", "compile_llvm", "compile_nests",
           "emit_llvm", "host_target"]
