"""The host CPU as LLVM sees it, and LLVM's O3 pipeline for it.

``host_target()`` initializes LLVM's native target on first use and describes the host:
triple, CPU name, features (which decide the vector width) and data layout.
``host_cpu_info()`` is the same host as the auto-scheduler sees it; ``tex.target.cpu_info``
imports it when first asked (``tex.target`` sits at the bottom of the import rows and
never imports a backend at import; llvmlite belongs to ``tex.codegen``).
``optimize`` parses, verifies and optimizes IR text; ``run_default_pipeline`` runs LLVM's
default module pipeline without leaking it; ``declared_externals`` lists the functions a
module calls but does not define. Every use of LLVM holds ``LLVM_LOCK``.
"""
from __future__ import annotations

import functools
import threading
from dataclasses import dataclass

import llvmlite.binding as llvm
from llvmlite.binding.newpassmanagers import NewPassManager

from ..debug import InternalError, timed
from ..target import CPUInfo, with_caches

__all__ = ["HostTarget", "LLVM_LOCK", "host_target", "host_cpu_info", "optimize",
           "run_default_pipeline", "declared_externals"]


@dataclass(frozen=True)
class HostTarget:
    """The host CPU as LLVM sees it."""

    triple: str
    cpu: str
    features: str
    data_layout: str
    vector_bits: int  # widest SIMD register: 128 (SSE), 256 (AVX), 512 (AVX-512)

    def target_machine(self, jit: bool = False) -> llvm.TargetMachine:
        """A fresh O3 target machine (an execution engine takes ownership of its own)."""
        target = llvm.Target.from_triple(self.triple)
        return target.create_target_machine(cpu=self.cpu, features=self.features, opt=3,
                                            codemodel="jitdefault", jit=jit)


# LLVM's global context is not thread-safe and llvmlite releases the GIL: every parse,
# optimization, code emission and JIT load in tex holds this lock
LLVM_LOCK = threading.RLock()


@functools.cache
def host_target() -> HostTarget:
    """The host CPU (LLVM's native target initialized on first use)."""
    with LLVM_LOCK:
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        triple = llvm.get_process_triple()
        cpu = llvm.get_host_cpu_name()
        feats = llvm.get_host_cpu_features()
        features = feats.flatten()
        if feats.get("avx512f"):
            bits = 512
        elif feats.get("avx"):
            bits = 256
        else:
            bits = 128
        tm = llvm.Target.from_triple(triple).create_target_machine(
            cpu=cpu, features=features, opt=3, codemodel="jitdefault")
        return HostTarget(triple, cpu, features, str(tm.target_data), bits)


@functools.cache
def host_cpu_info() -> CPUInfo:
    """The host as the auto-scheduler sees it: LLVM's features decide the vector width."""
    host = host_target()
    fma = "+fma" in host.features.split(",")
    return with_caches(host.cpu, host.vector_bits, fma)


def optimize(text: str, host: HostTarget | None = None,
             context: llvm.ContextRef | None = None, reduced: bool = False
             ) -> llvm.ModuleRef:
    """Parse (into ``context``, default LLVM's global one), verify and optimize (O3 for the
    host) LLVM IR text. ``reduced``: LLVM's O1 pipeline without its vectorizers and
    unroller, for a module whose O3 compile crashed or never finished
    (``tex.codegen.jobs.compile_guarded``): tex's own vector code stays vectorized."""
    host = host or host_target()
    with LLVM_LOCK:
        try:
            with timed("llvm.parse"):
                mod = llvm.parse_assembly(text, context=context)
                mod.verify()
        except RuntimeError as err:
            raise InternalError(f"generated LLVM IR does not verify: {err}", text) from None
        pto = llvm.create_pipeline_tuning_options(speed_level=1 if reduced else 3)
        pto.loop_vectorization = not reduced
        pto.slp_vectorization = not reduced
        pto.loop_unrolling = not reduced
        with timed("llvm.opt"):
            run_default_pipeline(mod, host.target_machine(), pto)
        return mod


def run_default_pipeline(mod: llvm.ModuleRef, tm: llvm.TargetMachine,
                         pto: llvm.PipelineTuningOptions) -> None:
    """Run LLVM's default per-module pipeline (``pto``'s speed level) on ``mod``, then free
    the pipeline.

    llvmlite (0.44 to 0.50 at least) never frees a ``ModulePassManager``: the no-op
    ``ObjectRef._dispose`` comes before ``NewPassManager._dispose`` in its MRO, so every
    optimization leaked its O3 pipeline (73 KB after a small kernel, 400 KB after a dense
    gradient, for good). It is disposed here explicitly; ``detach`` keeps ``__del__`` (and
    a future llvmlite that fixes the MRO) from freeing it twice. A fresh ``PassBuilder``
    per run: a reused one collects instrumentation callbacks from every run, each later
    run slower (each builder still leaks its callbacks object, about 1.5 KB).
    """
    pb = llvm.create_pass_builder(tm, pto)
    mpm = pb.getModulePassManager()
    try:
        mpm.run(mod, pb)
    finally:
        NewPassManager._dispose(mpm)
        mpm.detach()


def declared_externals(mod: llvm.ModuleRef) -> list[str]:
    """The external functions ``mod`` declares (intrinsics aside)."""
    return [fn.name for fn in mod.functions
            if fn.is_declaration and not fn.name.startswith("llvm.")]
