"""Configuration from the environment, IR dumps, and the internal-error type.

Environment variables (read once, at import):

- ``TEX_DEBUG=<level>``: 0 silent (default); 1 prints a table of the seconds each compile
  phase took (differentiate, auto_schedule, lower and its passes, legalize, LLVM IR
  emission, LLVM optimization, machine code) to stderr after each outermost phase; 2 also
  dumps every pass.
- ``TEX_DUMP=<pass,pass|all>`` (``TEX_DUMP=1`` means all): print the IR after these passes.
- ``TEX_DUMP_DIR=<dir>``: write dumps to files in this directory instead of stderr.
- ``TEX_NUM_THREADS=<n>``: threads for parallel loops of built CPU functions, a positive
  integer (absent: the OpenMP default, all cores unless ``OMP_NUM_THREADS`` says otherwise).
  Anything else ("abc", "0", "-3", "") is a ValueError at import. Values above
  ``MAX_THREADS_PER_CORE`` (4) times ``os.cpu_count()`` are clamped to that, with a
  ``RuntimeWarning``: libgomp crashes or exits the process with tens of thousands. Without
  TEX_NUM_THREADS, an ``OMP_NUM_THREADS`` above that maximum is clamped the same way.
- ``GOMP_SPINCOUNT=<n>`` / ``OMP_WAIT_POLICY=active|passive``: how long libgomp's threads
  spin before they sleep, waiting at the end of a parallel loop or for the next one. Neither
  set, tex gives libgomp ``GOMP_SPINCOUNT=1000`` (``tex.runtime.openmp.DEFAULT_SPINCOUNT``;
  libgomp's own default, 300 000, keeps a core busy for milliseconds after every parallel
  loop and makes kernels 10x slower when another process uses a core). Read by libgomp when
  it is loaded, at ``import tex``, or earlier by a library that loaded it before (PyTorch):
  ``tex.runtime.openmp.wait_policy()`` says which applied.

Every environment variable tex reads is listed in ``ENVIRONMENT`` and read through
``env(name)``, here; a module that needs one (the JIT cache size, the CUDA binding and
toolkit, Graphviz) parses its value where the meaning lives.

``with tex.debug.timings() as t: ...`` collects the same table without printing it
(``t.table()``, ``t.seconds("llvm.opt")``); phases are marked in the code with
``with debug.timed("name"):`` (or ``@debug.timed("name")``), which costs a context-variable
read when neither is on.

Tests override the configuration with ``with tex.debug.config(dump="all"): ...``;
the override is a ``contextvars`` value, so it never leaks between threads or tests.
"""
from __future__ import annotations

import contextlib
import contextvars
import os
import sys
import time
import warnings
from collections.abc import Iterator, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

__all__ = ["Config", "config", "current", "dump", "should_dump", "InternalError",
           "MAX_THREADS_PER_CORE", "max_threads", "OutOfBoundsError", "ENVIRONMENT", "env",
           "Timings", "timings", "timed", "relay_timings", "environment_set"]

# every environment variable tex reads -> what it sets (read only through ``env``)
ENVIRONMENT: dict[str, str] = {
    "TEX_DEBUG": "0 silent (default); 1 a table of seconds per compile phase on stderr; "
                 "2 also dumps every pass",
    "TEX_DUMP": "passes whose IR is printed (comma-separated, or all / 1)",
    "TEX_DUMP_DIR": "write the dumps to files in this directory instead of stderr",
    "TEX_NUM_THREADS": "threads for the parallel loops of built CPU functions",
    "OMP_NUM_THREADS": "libgomp's thread count (clamped like TEX_NUM_THREADS)",
    "GOMP_SPINCOUNT": "spins of an idle libgomp thread before it sleeps (tex's default: 1000)",
    "OMP_WAIT_POLICY": "libgomp's waiting: active or passive (set: tex's default is not used)",
    "TEX_COMPILE_JOBS": "compile workers compiling the parts of a large module at once "
                        "(1: every module whole)",
    "TEX_COMPILE_GUARD": "0: LLVM compiles in this process, without a deadline (read at "
                         "import; default 1: in compile workers, killed and retried with a "
                         "reduced pipeline when it crashes or runs past its deadline)",
    "TEX_JIT_CACHE": "entries of the in-process compile cache, read at import (0: none)",
    "TEX_CACHE_DIR": "the disk compile cache's directory ('' or 'none': no disk cache)",
    "TEX_CACHE_VERIFY": "1: a build found by its schedule's key (before lowering) lowers "
                        "anyway and raises InternalError unless the lowered function's key "
                        "matches (a check of that key; slow)",
    "TEX_CACHE_SIZE": "the disk compile cache's bound in MB, read at import (0: none)",
    "TEX_CACHE_RESULTS": "0: differentiate and auto_schedule keep no results in the disk "
                         "cache (read at import; default 1)",
    "TEX_WORKSPACE_CACHE_MB": "bytes (MB) of kernels' freed temporaries kept for reuse, read "
                              "at the first build (0: none; default 1024)",
    "XDG_CACHE_HOME": "the user's cache directory (the disk compile cache's default parent)",
    "TEX_CUDA_BINDING": "the CUDA driver binding: auto, cuda-python or ctypes",
    "TEX_CUDA_SIMULATE": "1: a CUDA function called where no CUDA driver opens runs on "
                         "tex's GPU simulator (slow; for tests and tutorials without a GPU)",
    "TEX_LIBDEVICE": "path of libdevice.10.bc ('none': no libdevice)",
    "CUDA_HOME": "a CUDA toolkit root searched for libdevice",
    "CUDA_PATH": "a CUDA toolkit root searched for libdevice",
    "TEX_DOT": "path of Graphviz's dot ('none': no pictures)",
    "CC": "the C compiler export_library links shared libraries with (default cc)",
}


def env(name: str) -> str | None:
    """The value of the environment variable ``name`` (None: unset); ``name`` must be
    listed in ``ENVIRONMENT``."""
    if name not in ENVIRONMENT:
        raise InternalError(f"environment variable {name} is read but not listed in "
                            "tex.debug.ENVIRONMENT")
    return os.environ.get(name)


@contextlib.contextmanager
def environment_set(name: str, value: str) -> Iterator[None]:
    """The environment variable ``name`` (listed in ``ENVIRONMENT``) set to ``value`` for the
    block only: for a C library that reads it while being loaded (libgomp), without
    changing what child processes and later readers see."""
    if name not in ENVIRONMENT:
        raise InternalError(f"environment variable {name} is set but not listed in "
                            "tex.debug.ENVIRONMENT")
    before = os.environ.get(name)
    os.environ[name] = value
    try:
        yield
    finally:
        if before is None:
            del os.environ[name]
        else:
            os.environ[name] = before


def count_setting(name: str, value: str | None, default: int, unit: str = "") -> int:
    """``value``, the environment variable ``name`` (read with ``env``), as a non-negative
    integer; ``default`` when it is unset or empty, and when it is malformed (with a
    ``RuntimeWarning`` naming the variable)."""
    value = (value or "").strip()
    if not value:
        return default
    try:
        n = int(value)
    except ValueError:
        n = -1
    if n < 0:
        import warnings  # only on this path: debug.py sits below everything
        warnings.warn(f"tex: {name}={value!r} is not a non-negative integer{unit}; using "
                      f"{default}", RuntimeWarning, stacklevel=3)
        return default
    return n

MAX_THREADS_PER_CORE = 4  # TEX_NUM_THREADS is clamped to this many threads per core


class InternalError(RuntimeError):
    """A broken invariant inside tex: this is a bug in tex, not a user mistake."""

    def __init__(self, message: str, ir: object = None) -> None:
        text = f"internal error (this is a bug in tex, please report it): {message}"
        if ir is not None:
            text += f"\n--- IR ---\n{ir}"
        super().__init__(text)

    @classmethod
    def relayed(cls, message: str) -> InternalError:
        """The InternalError another process raised (a compiling child), its message
        as it was there."""
        err = cls.__new__(cls)
        RuntimeError.__init__(err, message)
        return err


class OutOfBoundsError(IndexError, ValueError):
    """A tensor read outside its shape at a point where the read is used (a program bug).

    Raised by ``tex.testing.evaluate`` and by built functions' run-time bounds checks
    (defined here, at the bottom of the layers, so that both can raise it)."""

    @classmethod
    def from_kernel(cls, func: str, violation: str) -> OutOfBoundsError:
        """The error of a built function ``func`` whose kernel recorded ``violation`` (a
        check's description of the index that failed it), on the CPU or the GPU."""
        return cls(f"{func}: {violation}. The call ran to the end with every out-of-bounds "
                   "read giving 0 (outputs are written accordingly); fix the index data, or "
                   "clip it (topi.take(mode='clip'))")


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


def max_threads() -> int:
    """The most threads a parallel loop may use: ``MAX_THREADS_PER_CORE`` per core."""
    return MAX_THREADS_PER_CORE * (os.cpu_count() or 1)


def _clamp_threads(n: int, source: str) -> int:
    top = max_threads()
    if n > top:
        warnings.warn(f"tex: {source} is {n}; using {top} threads ({MAX_THREADS_PER_CORE} per "
                      f"core on {os.cpu_count() or 1} cores), the most tex allows",
                      RuntimeWarning, stacklevel=3)
        return top
    return n


def _parse_threads(text: str) -> int:
    """TEX_NUM_THREADS as a positive thread count (clamped), else a ValueError."""
    try:
        n = int(text.strip())
    except ValueError:
        n = 0
    if n < 1:
        raise ValueError(f"TEX_NUM_THREADS={text!r} is not a positive integer; set it to the "
                         f"number of threads for parallel loops (1 to {max_threads()}), or "
                         "unset it for the OpenMP default")
    return _clamp_threads(n, f"TEX_NUM_THREADS={text.strip()}")


def _omp_default() -> int:
    """0 (the OpenMP default), unless OMP_NUM_THREADS asks libgomp for more threads than
    ``max_threads()`` (it segfaults with 100000): then that maximum, passed explicitly."""
    first = (env("OMP_NUM_THREADS") or "").split(",")[0].strip()
    if first.isdigit() and int(first) > max_threads():
        return _clamp_threads(int(first), f"OMP_NUM_THREADS={first}")
    return 0


def _from_env() -> Config:
    level = (env("TEX_DEBUG") or "0").strip() or "0"
    try:
        debug = int(level)
    except ValueError:
        debug = 1
    dump = _parse_dump(env("TEX_DUMP") or "")
    if debug >= 2 and not dump:
        dump = frozenset({"all"})
    threads = env("TEX_NUM_THREADS")
    num_threads = _omp_default() if threads is None else _parse_threads(threads)
    return Config(debug=debug, dump=dump, dump_dir=env("TEX_DUMP_DIR") or None,
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
    if "num_threads" in changes:
        n = changes["num_threads"]
        if isinstance(n, bool) or not isinstance(n, int) or n < 0:
            raise ValueError(f"config: num_threads must be a non-negative int (0: the OpenMP "
                             f"default), got {type(n).__name__} {n!r}")
        changes["num_threads"] = _clamp_threads(n, "num_threads")
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
        try:
            path.mkdir(parents=True, exist_ok=True)
        except (FileExistsError, NotADirectoryError):
            raise ValueError(f"TEX_DUMP_DIR={directory!r} is not a directory (a file is in "
                             "the way); point it at a directory (created when missing), or "
                             "unset it to dump to stderr") from None
        with open(path / f"{pass_name}.txt", "a", encoding="utf-8") as f:
            f.write(text)
    else:
        sys.stderr.write(text)


@dataclass
class Timings:
    """Seconds per compile phase: one row per phase run, in the order the phases began,
    with its nesting depth (``lower.simplify`` runs inside ``lower``)."""

    rows: list[tuple[str, int, float]] = field(default_factory=list)  # (phase, depth, s)
    _depth: int = field(default=0, repr=False)  # phases open now

    def seconds(self, phase: str) -> float:
        """The total seconds of every run of ``phase``."""
        return sum(s for name, _, s in self.rows if name == phase)

    def totals(self) -> dict[str, float]:
        """Seconds per phase name (runs summed), in the order the phases first began."""
        out: dict[str, float] = {}
        for name, _, s in self.rows:
            out[name] = out.get(name, 0.0) + s
        return out

    def table(self) -> str:
        """The rows as text, nested phases indented under their parent; runs of one phase
        in a row are one line (``llvm.print (x12)``: each function printed as it is
        emitted)."""
        merged: list[tuple[str, int, float, int]] = []  # (phase, depth, s, runs)
        for n, d, s in self.rows:
            if merged and merged[-1][:2] == (n, d):
                merged[-1] = (n, d, merged[-1][2] + s, merged[-1][3] + 1)
            else:
                merged.append((n, d, s, 1))
        names = [f"{'  ' * d + n}{f' (x{k})' if k > 1 else ''}" for n, d, _, k in merged]
        width = max(map(len, names), default=5)
        lines = [f"{'phase':<{width}}  seconds"]
        lines += [f"{name:<{width}}  {s:7.3f}" for name, (_, _, s, _) in zip(names, merged)]
        return "\n".join(lines)


# the table phases are recorded in here (None: not collecting), per thread and task
_TIMINGS: contextvars.ContextVar[Timings | None] = contextvars.ContextVar("tex_timings",
                                                                          default=None)


@contextlib.contextmanager
def timings() -> Iterator[Timings]:
    """Collect the seconds of every phase run inside the block: ``with timings() as t:``."""
    record = Timings()
    token = _TIMINGS.set(record)
    try:
        yield record
    finally:
        _TIMINGS.reset(token)


def relay_timings(rows: Sequence[tuple[str, int, float]]) -> None:
    """Add the rows of phases another process timed (a compile worker:
    ``tex.codegen.jobs``) to the table being collected, nested in the phases open here."""
    record = _TIMINGS.get()
    if record is not None:
        record.rows.extend((name, record._depth + depth, s) for name, depth, s in rows)


@contextlib.contextmanager
def timed(phase: str) -> Iterator[None]:
    """Time the block (or, as a decorator, each call) as ``phase`` when timings are being
    collected (``timings()``), or printed (``TEX_DEBUG=1``: the table of an outermost
    phase goes to stderr when it ends)."""
    record = _TIMINGS.get()
    printing = record is None and _CONFIG.get().debug >= 1
    if record is None and not printing:
        yield
        return
    token = None
    if record is None:
        record = Timings()
        token = _TIMINGS.set(record)
    row = len(record.rows)
    record.rows.append((phase, record._depth, 0.0))
    record._depth += 1
    start = time.perf_counter()
    try:
        yield
    finally:
        record._depth -= 1
        record.rows[row] = (phase, record._depth, time.perf_counter() - start)
        if token is not None:
            _TIMINGS.reset(token)
            sys.stderr.write(f"tex: compile time\n{record.table()}\n")
