"""Configuration from the environment, IR dumps, and the internal-error type.

Environment variables (read once, at import):

- ``TEX_DEBUG=<level>``: 0 silent (default); 1 pass names and times; 2 also dumps every pass.
- ``TEX_DUMP=<pass,pass|all>`` (``TEX_DUMP=1`` means all): print the IR after these passes.
- ``TEX_DUMP_DIR=<dir>``: write dumps to files in this directory instead of stderr.
- ``TEX_NUM_THREADS=<n>``: threads for parallel loops of built CPU functions (0 or absent:
  the OpenMP default, all cores unless ``OMP_NUM_THREADS`` says otherwise).

Tests override the configuration with ``with tex.debug.config(dump="all"): ...``;
the override is a ``contextvars`` value, so it never leaks between threads or tests.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
from collections.abc import Iterator
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

__all__ = ["Config", "config", "current", "dump", "should_dump", "InternalError",
           "OutOfBoundsError"]


class InternalError(RuntimeError):
    """A broken invariant inside tex: this is a bug in tex, not a user mistake."""

    def __init__(self, message: str, ir: object = None) -> None:
        text = f"internal error (this is a bug in tex, please report it): {message}"
        if ir is not None:
            text += f"\n--- IR ---\n{ir}"
        super().__init__(text)


class OutOfBoundsError(IndexError, ValueError):
    """A tensor read outside its shape at a point where the read is used (a program bug).

    Raised by ``tex.testing.evaluate`` and by built functions' run-time bounds checks
    (defined here, at the bottom of the layers, so that both can raise it)."""


@dataclass(frozen=True)
class Config:
    """Debug settings; immutable, replaced as a whole by ``config(...)``."""

    debug: int = 0
    dump: frozenset[str] = frozenset()
    dump_dir: str | None = None
    num_threads: int = 0  # parallel loops of built CPU functions; 0 = all cores


def _parse_dump(value: str) -> frozenset[str]:
    parts = {p.strip() for p in value.split(",") if p.strip()}
    if parts & {"1", "all", "ALL", "true"}:
        return frozenset({"all"})
    return frozenset(parts)


def _from_env() -> Config:
    level = os.environ.get("TEX_DEBUG", "0").strip() or "0"
    try:
        debug = int(level)
    except ValueError:
        debug = 1
    dump = _parse_dump(os.environ.get("TEX_DUMP", ""))
    if debug >= 2 and not dump:
        dump = frozenset({"all"})
    threads = os.environ.get("TEX_NUM_THREADS", "0").strip() or "0"
    try:
        num_threads = max(0, int(threads))
    except ValueError:
        num_threads = 0
    return Config(debug=debug, dump=dump, dump_dir=os.environ.get("TEX_DUMP_DIR") or None,
                  num_threads=num_threads)


_ENV_CONFIG = _from_env()
_CONFIG: contextvars.ContextVar[Config] = contextvars.ContextVar("tex_config", default=_ENV_CONFIG)


def current() -> Config:
    """The configuration in effect here."""
    return _CONFIG.get()


@contextlib.contextmanager
def config(**changes: Any) -> Iterator[Config]:
    """Temporarily change settings: ``with config(dump="all", debug=1): ...``."""
    if "dump" in changes and isinstance(changes["dump"], str):
        changes["dump"] = _parse_dump(changes["dump"])
    elif "dump" in changes:
        changes["dump"] = frozenset(changes["dump"])
    token = _CONFIG.set(replace(_CONFIG.get(), **changes))
    try:
        yield _CONFIG.get()
    finally:
        _CONFIG.reset(token)


def should_dump(pass_name: str) -> bool:
    """Whether the IR after ``pass_name`` is to be printed."""
    dump = current().dump
    return "all" in dump or pass_name in dump


def dump(pass_name: str, ir: object, *, force: bool = False) -> None:
    """Print ``ir`` under a header naming the pass (to stderr or TEX_DUMP_DIR)."""
    if not (force or should_dump(pass_name)):
        return
    text = f"=== {pass_name} ===\n{ir}\n"
    directory = current().dump_dir
    if directory:
        path = Path(directory)
        path.mkdir(parents=True, exist_ok=True)
        with open(path / f"{pass_name}.txt", "a", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stderr.write(text)
