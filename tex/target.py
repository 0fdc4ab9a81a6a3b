"""What the auto-scheduler needs to know about a machine: vector width, cores, caches.

``CPUInfo`` is plain data. The host's values come from a *probe* registered by the code
generator that owns the target (``tex.codegen.llvm`` registers LLVM's view of the host CPU:
its features decide the vector width), so this module, at the bottom of the import rows,
never imports a backend. Cache sizes are read from Linux's sysfs when present. Without a
registered probe (a backend not imported yet) a conservative 128-bit host is assumed.
"""
from __future__ import annotations

import functools
import os
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

__all__ = ["CPUInfo", "cpu_info", "register_probe"]


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


# target kind -> probe; filled by backends at their import (one entry per backend)
_PROBES: dict[str, Callable[[], CPUInfo]] = {}


def register_probe(kind: str, probe: Callable[[], CPUInfo]) -> None:
    """Let a backend describe the host for target ``kind`` (e.g. ``"llvm"``)."""
    _PROBES[kind] = probe


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


@functools.cache
def _fallback() -> CPUInfo:
    return with_caches("generic", 128, False)


def cpu_info(target: str = "llvm") -> CPUInfo:
    """The machine behind ``target`` (``"llvm"``: the host CPU)."""
    key = target.strip().split()[0].lower() if isinstance(target, str) and target.strip() \
        else "llvm"
    key = {"cpu": "llvm"}.get(key, key)
    probe = _PROBES.get(key)
    return probe() if probe is not None else _fallback()
