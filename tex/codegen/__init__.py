"""Code generation: loop IR -> LLVM IR -> optimized module (``llvm.py`` for the host CPU)."""
from .llvm import CodegenOptions, CompiledModule, compile_llvm, emit_llvm, host_target

__all__ = ["CodegenOptions", "CompiledModule", "compile_llvm", "emit_llvm", "host_target"]
