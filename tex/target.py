"""What the auto-scheduler needs to know about a machine: vector width, cores, caches.

``CPUInfo`` is plain data. ``cpu_info("llvm")`` always describes the real host, whatever
was imported before: its vector width is what the code generator targets, LLVM's view of
the host CPU's features, and llvmlite belongs to ``tex.codegen``. So ``cpu_info`` imports
the probe, ``tex.codegen.host.host_cpu_info``, when first called: the one upward import of
this module, never at import time (this module sits at the bottom of the import rows;
``tests/test_layout.py`` sanctions exactly this import in ``LAZY_IMPORTS``). Cache sizes
are read from Linux's sysfs when present.

``Target`` is TVM's target object over the same strings: accepted wherever a target string
is (``target_kind`` and ``resolve_target`` read its text), with ``.kind.name``, ``.host``,
``.attrs`` and ``.keys``, and a context manager: inside ``with Target("cuda"):`` a call
given no target (``auto_schedule``, ``build``) uses it (``Target.current()``; a context
variable, so threads and tasks each see their own).
"""
from __future__ import annotations

import contextvars
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

__all__ = ["CPUInfo", "cpu_info", "cuda", "host_cores", "with_caches", "CudaTarget",
           "parse_cuda_target", "KNOWN_CUDA_ARCHS", "TARGET_KINDS", "target_kind", "Target",
           "TargetKind", "resolve_target"]

# a target string's first word -> the kind of machine: the one parser of target strings
TARGET_KINDS = {"llvm": "llvm", "cpu": "llvm", "cuda": "cuda", "nvptx": "cuda"}


def target_kind(target: Any, what: str) -> str:
    """``"llvm"`` or ``"cuda"`` for a target string (``"llvm"``, ``"cpu"``, ``"cuda"``,
    ``"cuda -arch=sm_90"``, ``"nvptx"``; a CUDA target's options are checked here).
    ``what`` (the caller) names the errors: a TypeError for a non-string, a ValueError for
    an unknown target."""
    if isinstance(target, Target):
        target = target.text
    if not isinstance(target, str):
        raise TypeError(f"{what}: target must be a string such as 'llvm' or a "
                        f"tex.target.Target, got {type(target).__name__} {target!r}")
    key = target.strip().split()[0].lower() if target.strip() else ""
    kind = TARGET_KINDS.get(key)
    if kind is None:
        raise ValueError(f"{what}: unknown target {target!r}; known targets: "
                         f"{', '.join(sorted(TARGET_KINDS))} (e.g. 'cuda -arch=sm_90')")
    if kind == "cuda":
        parse_cuda_target(target)  # options checked early
    return kind


def resolve_target(target: Any, what: str) -> str:
    """The target string a call uses: ``target`` itself (a string), a ``Target``'s text, or
    for ``None`` the innermost ``with Target(...)`` block's, else ``"llvm"``; its kind
    checked as ``target_kind`` does."""
    if target is None:
        current = Target.current()
        target = current.text if current is not None else "llvm"
    elif isinstance(target, Target):
        target = target.text
    target_kind(target, what)
    return str(target)


@dataclass(frozen=True)
class TargetKind:
    """A target's kind, as TVM's ``target.kind``: ``name`` is ``"llvm"``, ``"cuda"`` or
    ``"nvptx"``."""

    name: str


# TVM's target kinds by the first word tex accepts
_KIND_NAMES = {"llvm": "llvm", "cpu": "llvm", "cuda": "cuda", "nvptx": "nvptx"}
_CURRENT_TARGETS: contextvars.ContextVar[tuple[Target, ...]] = contextvars.ContextVar(
    "tex_targets", default=())


class Target:
    """A compilation target as TVM spells one: ``Target("llvm")``,
    ``Target("cuda -arch=sm_90", host="llvm")``, ``Target(target="cuda", host="llvm")``,
    or a dict ``{"kind": "cuda", "arch": "sm_90"}``.

    ``str(t)`` is its target string, which every tex function taking a target accepts;
    ``kind.name``, ``host`` (a CUDA target's host, ``llvm`` by default; None for the CPU),
    ``attrs`` (its options: ``{"arch": "sm_80"}``) and ``keys``. ``with t:`` makes it the
    target of calls given none (``Target.current()``)."""

    def __init__(self, target: Any, host: Any = None) -> None:
        if isinstance(target, Target):
            host = target.host if host is None else host
            target = target.text
        elif isinstance(target, dict):
            target = _from_dict(target)
        kind = target_kind(target, "Target")
        words = target.split()
        self.text = " ".join(words)
        self.kind = TargetKind(_KIND_NAMES[words[0].lower()])
        attrs: dict[str, str] = {}
        for w in words[1:]:
            key, _, value = w.lstrip("-").partition("=")
            attrs[key] = value
        if kind == "cuda":
            attrs = {"arch": parse_cuda_target(self.text).arch, **{
                k: v for k, v in attrs.items() if k not in ("arch", "mcpu")}}
            self.keys: tuple[str, ...] = ("cuda", "gpu")
            self.host: Target | None = Target(host if host is not None else "llvm")
            if self.host.kind.name != "llvm":
                raise ValueError(f"Target: the host of {self.text!r} must be a CPU target "
                                 f"('llvm'), got {self.host.text!r}")
        else:
            self.keys = ("cpu",)
            self.host = None if host is None else Target(host)
        self.attrs = attrs

    @property
    def arch(self) -> str | None:
        """A CUDA target's architecture (``"sm_80"``); None for the CPU."""
        return self.attrs.get("arch") if self.kind.name != "llvm" else None

    @staticmethod
    def current(allow_none: bool = True) -> Target | None:
        """The target of the innermost ``with Target(...)`` block (None outside one, or a
        ``ValueError`` when ``allow_none`` is False)."""
        stack = _CURRENT_TARGETS.get()
        if stack:
            return stack[-1]
        if not allow_none:
            raise ValueError("Target.current: no target is in scope (use 'with "
                             "tex.target.Target(...):')")
        return None

    def __enter__(self) -> Target:
        _CURRENT_TARGETS.set((*_CURRENT_TARGETS.get(), self))
        return self

    def __exit__(self, *exc: Any) -> None:
        stack = _CURRENT_TARGETS.get()
        if stack and stack[-1] is self:
            _CURRENT_TARGETS.set(stack[:-1])

    def __str__(self) -> str:
        return self.text

    def __repr__(self) -> str:
        host = f", host={self.host.text!r}" if self.host is not None else ""
        return f"Target({self.text!r}{host})"

    def __eq__(self, other: object) -> bool:
        if isinstance(other, Target):
            return self.text == other.text and self.host == other.host
        return NotImplemented

    def __hash__(self) -> int:
        return hash(self.text)


def cuda(model: str = "unknown", arch: str | None = None,
         options: str | list[str] | None = None) -> Target:
    """TVM's ``tvm.target.cuda()``: a CUDA target (``arch="sm_80"``; ``model`` names the GPU
    in TVM and changes nothing here; ``options``: more ``-key=value`` words)."""
    words = ["cuda"]
    if arch is not None:
        words.append(f"-arch={arch}")
    if options:
        words += [options] if isinstance(options, str) else list(options)
    return Target(" ".join(words))


def _from_dict(config: dict[str, Any]) -> str:
    """A target string from TVM's dict form (``{"kind": "cuda", "arch": "sm_80"}``)."""
    kind = config.get("kind")
    if not isinstance(kind, str):
        raise ValueError(f"Target: a dict target needs a 'kind' string, got {config!r}")
    opts = [f"-{k}={v}" for k, v in config.items() if k not in ("kind", "host", "keys")]
    return " ".join([kind, *opts])


@dataclass(frozen=True)
class CPUInfo:
    """A CPU as the auto-scheduler sees it."""

    name: str
    vector_bits: int  # widest SIMD register: 128 (SSE/NEON), 256 (AVX2), 512 (AVX-512)
    cores: int
    l1d_bytes: int = 32 * 1024
    l2_bytes: int = 1024 * 1024
    l3_bytes: int = 8 * 1024 * 1024
    fma: bool = False

    def lanes(self, bits: int = 32) -> int:
        """Elements of ``bits`` bits in one vector register."""
        return max(1, self.vector_bits // bits)


def _cache_size(level: int, kind: str) -> int | None:
    """A cache size from sysfs (``/sys/devices/system/cpu/cpu0/cache``), in bytes."""
    root = Path("/sys/devices/system/cpu/cpu0/cache")
    try:
        for d in root.glob("index*"):
            if (d / "level").read_text().strip() != str(level):
                continue
            if (d / "type").read_text().strip() not in kind:
                continue
            text = (d / "size").read_text().strip().upper()
            scale = {"K": 1024, "M": 1024 * 1024}.get(text[-1:], 1)
            return int(text.rstrip("KM")) * scale
    except (OSError, ValueError):
        return None
    return None


def host_cores() -> int:
    """The cores this process may run on."""
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except (AttributeError, OSError):  # pragma: no cover - not Linux
        return max(1, os.cpu_count() or 1)


def with_caches(name: str, vector_bits: int, fma: bool) -> CPUInfo:
    """A ``CPUInfo`` for the host with the given vector unit and sysfs's cache sizes."""
    return CPUInfo(
        name=name, vector_bits=vector_bits, cores=host_cores(),
        l1d_bytes=_cache_size(1, ("Data", "Unified")) or 32 * 1024,
        l2_bytes=_cache_size(2, ("Unified", "Data")) or 1024 * 1024,
        l3_bytes=_cache_size(3, ("Unified", "Data")) or 8 * 1024 * 1024,
        fma=fma)


def cpu_info(target: str = "llvm") -> CPUInfo:
    """The CPU behind ``target``: ``"llvm"`` (alias ``"cpu"``, the default) is the host.

    Raises
    ------
    ValueError
        A target with no CPU to describe (e.g. ``"cuda"``).
    """
    if target_kind(target, "cpu_info") != "llvm":
        raise ValueError(f"cpu_info: target {target!r} has no CPU to describe; expected "
                         "'llvm' (the host CPU)")
    return _host_cpu_info()


def _host_cpu_info() -> CPUInfo:
    """The host as LLVM sees it (``tex.codegen.host``, imported at the first call)."""
    from .codegen.host import host_cpu_info  # the sanctioned lazy import (module docstring)
    return host_cpu_info()


# --------------------------------------------------------------------------------------
# NVIDIA GPUs
# --------------------------------------------------------------------------------------

@dataclass(frozen=True)
class CudaTarget:
    """An NVIDIA GPU as the compiler sees it: its compute capability (``sm_80``) and what
    one thread block may use."""

    arch: str = "sm_80"
    max_threads_per_block: int = 1024
    max_shared_bytes: int = 48 * 1024  # static shared memory per block
    warp_size: int = 32
    sm_count: int = 108  # for the auto-scheduler's grid sizes (an A100; H100 has 132)

    @property
    def capability(self) -> tuple[int, int]:
        """``(8, 0)`` for ``sm_80``."""
        digits = self.arch[3:].rstrip("af")
        return int(digits[:-1]), int(digits[-1])

    def __str__(self) -> str:
        return f"cuda -arch={self.arch}"


# the architectures LLVM's NVPTX backend (LLVM 22, llvmlite 0.50) generates code for; it
# ignores any other name with a warning and emits PTX for a default one, so tex refuses them
KNOWN_CUDA_ARCHS: tuple[str, ...] = (
    "sm_50", "sm_52", "sm_53", "sm_60", "sm_61", "sm_62", "sm_70", "sm_72", "sm_75",
    "sm_80", "sm_86", "sm_87", "sm_88", "sm_89", "sm_90", "sm_90a",
    "sm_100", "sm_100a", "sm_100f", "sm_101", "sm_101a", "sm_101f", "sm_103", "sm_103a",
    "sm_103f", "sm_110", "sm_110a", "sm_110f", "sm_120", "sm_120a", "sm_120f",
    "sm_121", "sm_121a", "sm_121f",
)


def parse_cuda_target(target: str) -> CudaTarget:
    """``"cuda"``, ``"cuda -arch=sm_90"`` (also ``nvptx``) -> ``CudaTarget``.

    Raises
    ------
    ValueError
        An option other than ``-arch=sm_XY``, or an architecture not in
        ``KNOWN_CUDA_ARCHS``.
    """
    words = target.split()
    if not words or words[0].lower() not in ("cuda", "nvptx", "ptx"):
        raise ValueError(f"not a CUDA target: {target!r}")
    arch = "sm_80"
    for w in words[1:]:
        key, _, value = w.partition("=")
        if key in ("-arch", "-mcpu", "--arch") and value:
            arch = value.strip()
        else:
            raise ValueError(f"target {target!r}: unknown option {w!r}; expected "
                             "-arch=sm_XY (e.g. 'cuda -arch=sm_90')")
    if arch not in KNOWN_CUDA_ARCHS:
        raise ValueError(f"target {target!r}: -arch must be sm_50 or newer and an "
                         f"architecture LLVM knows ({', '.join(KNOWN_CUDA_ARCHS)}; e.g. "
                         f"'cuda -arch=sm_90'), got {arch!r}")
    return CudaTarget(arch)
