"""Profile one built program with ``perf``: the share of the samples, and of a call's time,
that each outlined loop nest, parallel loop body and helper of the JIT code takes.

``perf`` cannot name code MCJIT emitted, so this script writes a perf map
(``/tmp/perf-<pid>.map``: ``START SIZE NAME`` in hex, one line per function): the object
code of the function (one object file, or one per part of a split module,
``tex.codegen.split``) is read back from the disk compile cache, the function symbols of
each object are listed from its ELF symbol table, and each object's code section is placed
at the address the engine loaded it to, found from the engine's addresses of the section's
exported functions (the entry, or the nests another part calls); every symbol of the
section, internal ones included, is mapped relative to that. The entry's mapped address is
checked against the address tex calls.

Then the function runs in a loop for ``--seconds`` while ``perf record`` samples this
process (started here, enabled only around the loop through its control FIFO), and
``perf report`` is summarized: per symbol the samples, their share, the share of the
measured time per call, and for tex's functions the tensors they take (their parameters in
the unoptimized IR; a parallel body also names the nest that runs it).

    python benchmarks/profile_nests.py resnet_28                  # fwd + bwd of a model layer
    python benchmarks/profile_nests.py bert --fwd --threads 1 --seconds 10
    python benchmarks/profile_nests.py --workload conv2d          # a WORKLOADS.md program
    python benchmarks/profile_nests.py resnet_28 --map-only       # the map, a loop, your own perf

Without a usable ``perf`` (not installed, ``perf_event_paranoid`` too strict, refused by
the kernel), the script says so and exits with status 2; ``--map-only`` needs no ``perf``.
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import gc
import os
import re
import select
import shutil
import signal
import struct
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

PERF_FREQ = 999  # samples per second per thread
DEFAULT_SECONDS, DEFAULT_MAP_ONLY_SECONDS = 5.0, 30.0
PERF_START_TIMEOUT_S = 60.0  # perf reads the process's maps before it acknowledges
PERF_STOP_TIMEOUT_S = 120.0  # to write its data once interrupted
DEFAULT_DATA = HERE / "results" / "profile.data"


class ProfileError(Exception):
    """What stops a profile, said to the user without a traceback (exit status 2)."""


# ---------------------------------------------------------------------------------------
# the program


def describe(name: str, workload: bool, fwd: bool) -> str:
    return f"{'workload' if workload else 'layer'} {name}, " \
           f"{'forward' if fwd else 'forward + backward'}"


def build_program(name: str, workload: bool, fwd: bool, small: bool
                  ) -> tuple[Any, list[np.ndarray]]:
    """The built function (the forward, or the loss and every gradient in one function,
    as ``run.py`` and ``models.py`` time them) of a model layer or a workload, and its
    arguments: random inputs (valid indices for integer placeholders) and output buffers."""
    # imported here, not with this module: --threads sets TEX_NUM_THREADS before tex loads
    from model_layers import LAYERS

    import tex

    from workloads import WORKLOADS, random_arrays

    table = WORKLOADS if workload else LAYERS
    if name not in table:
        raise ProfileError(f"unknown {'workload' if workload else 'layer'} {name!r}; "
                           f"choose from {', '.join(table)}")
    threads = tex.debug.current().num_threads or "the OpenMP default number of"
    print(f"building {describe(name, workload, fwd)} ({threads} "
          f"thread{'' if threads == 1 else 's'})...", flush=True)
    if workload:
        w = WORKLOADS[name](small=small)
        arrays = random_arrays(w)
    else:
        w = LAYERS[name].build(small)
        arrays = LAYERS[name].arrays(w)
    outs = [w.forward] if fwd else [w.loss, *tex.differentiate(w.loss, w.wrt)]
    f = tex.build(outs, name=f"{name}_{'fwd' if fwd else 'fb'}")
    args = []
    for a in f.args:
        if any(a is t for t in outs):
            args.append(np.zeros([int(n) for n in a.shape], a.dtype.numpy))
        else:
            args.append(arrays[a.name])
    return f, args


# ---------------------------------------------------------------------------------------
# the object code and where it was loaded


def loaded_objects(f: Any) -> list[bytes]:
    """The object files the engine of ``f`` loaded (one, or one per part of a split
    module), as the disk cache holds them.

    tex keeps no object code once loaded (``jit_compile`` drops it) and exposes the disk
    cache entry only by its cache key; for a built function, only the in-process cache
    (``CACHE._items``: key -> kernel) knows that key. That private mapping is read here,
    and nowhere else in this script."""
    from tex.runtime.diskcache import DISK
    from tex.runtime.jit import CACHE

    if not DISK.enabled:
        raise ProfileError("the disk compile cache is off (TEX_CACHE_DIR=none or "
                           "TEX_CACHE_SIZE=0): the object code is read back from it")
    key = next((k for k, kernel in list(CACHE._items.items()) if kernel is f._kernel), None)
    if key is None:
        raise ProfileError(f"'{f.name}' is not in the in-process compile cache "
                           "(TEX_JIT_CACHE=0?): its cache key is needed to read its object "
                           "code back")
    sections = DISK.get(key)
    if sections is None:
        raise ProfileError(f"the disk cache holds no object code for '{f.name}'")
    # "object", then "object.1", ... (tex.runtime.jit: one section per part)
    names = sorted((n for n in sections if n == "object" or n.startswith("object.")),
                   key=lambda n: int(n.partition(".")[2] or 0))
    return [sections[n] for n in names]


@dataclass(frozen=True)
class ElfSection:
    name: str
    type: int
    flags: int
    offset: int  # in the file
    size: int
    link: int
    info: int
    entsize: int


@dataclass(frozen=True)
class ElfFunction:
    name: str
    offset: int  # in its section
    size: int
    section: int  # index
    exported: bool  # not local: the engine can give its address


SHT_SYMTAB, STT_FUNC, STB_LOCAL = 2, 2, 0
SHN_LORESERVE = 0xFF00


def elf_sections(obj: bytes) -> list[ElfSection]:
    """The section headers of a 64-bit little-endian ELF object."""
    if obj[:4] != b"\x7fELF" or obj[4] != 2 or obj[5] != 1:
        raise ProfileError("the object code is not a 64-bit little-endian ELF file")
    (shoff,) = struct.unpack_from("<Q", obj, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", obj, 0x3A)
    raw = [struct.unpack_from("<IIQQQQIIQQ", obj, shoff + k * shentsize)
           for k in range(shnum)]
    names = raw[shstrndx][4]
    return [ElfSection(_cstr(obj, names + h[0]), h[1], h[2], h[4], h[5], h[6], h[7], h[9])
            for h in raw]


def _cstr(data: bytes, at: int) -> str:
    return data[at:data.index(b"\0", at)].decode()


def elf_functions(obj: bytes) -> list[ElfFunction]:
    """The functions an ELF object defines, from its symbol table."""
    sections = elf_sections(obj)
    out = []
    for s in sections:
        if s.type != SHT_SYMTAB:
            continue
        names = sections[s.link].offset
        for at in range(s.offset, s.offset + s.size, s.entsize):
            name, info, _, shndx, value, size = struct.unpack_from("<IBBHQQ", obj, at)
            if info & 0xF == STT_FUNC and 0 < shndx < SHN_LORESERVE:
                out.append(ElfFunction(_cstr(obj, names + name), value, size, shndx,
                                       info >> 4 != STB_LOCAL))
    return out


@dataclass(frozen=True)
class MappedSymbol:
    start: int
    size: int
    name: str
    part: int  # which object (a split module has one per part)


def symbol_map(f: Any) -> tuple[list[MappedSymbol], list[str]]:
    """Every function of ``f``'s machine code at its address in this process, sorted, and
    the names that could not be placed (a code section exporting no function)."""
    engine, entry = f._kernel.engine, f._kernel.name
    mapped, unplaced = [], []
    for part, obj in enumerate(loaded_objects(f)):
        functions = elf_functions(obj)
        for section in sorted({fn.section for fn in functions}):
            here = [fn for fn in functions if fn.section == section]
            bases = set()
            for fn in here:
                address = engine.get_function_address(fn.name) if fn.exported else 0
                if address:
                    bases.add(address - fn.offset)
            if len(bases) > 1:
                raise ProfileError(f"part {part} of '{entry}': the exported functions of "
                                   "one code section were loaded at inconsistent addresses")
            if not bases:
                unplaced += [fn.name for fn in here]
                continue
            (base,) = bases
            mapped += [MappedSymbol(base + fn.offset, fn.size, fn.name, part) for fn in here]
    at_entry = [s.start for s in mapped if s.name == entry]
    if at_entry != [f._kernel.address]:
        raise ProfileError(f"the entry '{entry}' maps to {at_entry}, not to the address "
                           f"tex calls ({f._kernel.address:#x})")
    return sorted(mapped, key=lambda s: s.start), unplaced


def write_perf_map(symbols: list[MappedSymbol], path: Path | None = None) -> Path:
    """Write ``symbols`` as perf's map of this process's JIT code (``/tmp/perf-<pid>.map``,
    which ``perf report`` reads for this process's anonymous executable memory)."""
    path = path or Path(f"/tmp/perf-{os.getpid()}.map")
    path.write_text("".join(f"{s.start:x} {s.size:x} {s.name}\n" for s in symbols))
    return path


# ---------------------------------------------------------------------------------------
# what each function touches (from the unoptimized IR)

_DEFINE = re.compile(r'define [^@]*@"([^"]+)"\((.*)')
_PARAM = re.compile(r'(ptr|i\d+|half|float|double)\b[^,%]*%"([^"]+)"')
_NOT_TENSORS = {"tex.errors", "closure"}


def function_tensors(raw_ir: str) -> dict[str, str]:
    """Per function of the module, the tensors it takes (its pointer parameters, the error
    record and closures aside); a parallel loop body also names the function that runs it
    (``in <nest>``), and a function run more than once a call (identical loops share one
    outlined function) says how many times (``x10 per call``: its time is theirs)."""
    params: dict[str, list[str]] = {}
    bodies: dict[str, list[str]] = {}
    current = None
    for line in raw_ir.splitlines():
        m = _DEFINE.match(line)
        if m:
            current = m.group(1)
            params[current] = [name for kind, name in _PARAM.findall(m.group(2))
                               if kind == "ptr" and name not in _NOT_TENSORS]
            bodies[current] = []
        elif current is not None:
            bodies[current].append(line)
    # refs[f][g]: how many times g's code names f (a call, or a body stored in a closure)
    refs: dict[str, dict[str, int]] = {f: {} for f in params}
    for g, lines in bodies.items():
        for ln in lines:
            for f in re.findall(r'@"([^"]+)"', ln):
                if f in refs and f != g:
                    refs[f][g] = refs[f].get(g, 0) + 1
    runs: dict[str, int] = {}
    for f in params:  # outlined functions are defined after their callers' first use
        stack = [f]
        while stack:
            top = stack[-1]
            todo = [g for g in refs[top] if g not in runs]
            if todo:
                stack.extend(todo)
                continue
            runs[top] = sum(k * runs[g] for g, k in refs[top].items()) or 1
            stack.pop()
    out = {}
    for name, tensors in params.items():
        text = " ".join(tensors)
        if name.endswith(".body"):
            users = list(refs[name])
            text = f"(in {', '.join(users)}) {text}" if users else text
        if runs[name] > 1:  # one outlined function shared by identical loops
            text = f"x{runs[name]} per call: {text}"
        out[name] = text
    return out


# ---------------------------------------------------------------------------------------
# perf


def perf_problem() -> str | None:
    """Why ``perf record`` cannot sample this process, or None when it should."""
    if shutil.which("perf") is None:
        return ("perf is not installed (Debian/Ubuntu: linux-perf or linux-tools-$(uname -r))"
                "; --map-only writes the map for a profiler of your choice")
    paranoid_file = Path("/proc/sys/kernel/perf_event_paranoid")
    if not paranoid_file.exists():
        return "this kernel has no perf events (no /proc/sys/kernel/perf_event_paranoid)"
    paranoid = int(paranoid_file.read_text().split()[0])
    if paranoid > 2 and os.geteuid() != 0:
        return (f"kernel.perf_event_paranoid is {paranoid}: unprivileged processes may not "
                "use perf events (sudo sysctl kernel.perf_event_paranoid=2, or run as root)")
    version = subprocess.run(["perf", "--version"], capture_output=True, text=True)
    if version.returncode != 0:
        return f"perf does not run: {(version.stderr or version.stdout).strip()}"
    return None


def _perf_failed(proc: subprocess.Popen, what: str) -> ProfileError:
    proc.kill()
    _, err = proc.communicate()
    return ProfileError(f"perf record {what} (exit status {proc.returncode}):\n"
                        f"{err.decode(errors='replace').strip()}")


def _command(ctl: int, ack: int, proc: subprocess.Popen, command: str) -> None:
    """Send ``command`` to perf's control FIFO and wait for its acknowledgement."""
    os.write(ctl, command.encode() + b"\n")
    deadline = time.monotonic() + PERF_START_TIMEOUT_S
    while time.monotonic() < deadline:
        if select.select([ack], [], [], 0.1)[0]:
            data = os.read(ack, 64)
            if data.startswith(b"ack"):
                return
            if not data:  # perf closed its end: it exited
                raise _perf_failed(proc, f"stopped before '{command}' was acknowledged")
        if proc.poll() is not None:
            raise _perf_failed(proc, f"exited before '{command}' was acknowledged")
    raise _perf_failed(proc, f"did not acknowledge '{command}' in {PERF_START_TIMEOUT_S} s")


def record(loop: Callable[[], float], data: Path) -> float:
    """Run ``loop`` (returning seconds per call) under ``perf record -p <this process>``,
    the events enabled only while it runs; returns what ``loop`` returned."""
    data.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix="tex-profile-") as tmp:
        ctl_path, ack_path = Path(tmp, "ctl"), Path(tmp, "ack")
        os.mkfifo(ctl_path)
        os.mkfifo(ack_path)
        # opened before perf opens them, neither blocking: perf's write end of the ack FIFO
        # then finds a reader, and its exit shows as end of file there
        ack = os.open(ack_path, os.O_RDONLY | os.O_NONBLOCK)
        ctl = os.open(ctl_path, os.O_RDWR)
        proc = subprocess.Popen(
            ["perf", "record", "-F", str(PERF_FREQ), "-p", str(os.getpid()), "-o", str(data),
             "-D", "-1", "--control", f"fifo:{ctl_path},{ack_path}"],
            stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        try:
            _command(ctl, ack, proc, "enable")
            per_call = loop()
            _command(ctl, ack, proc, "disable")
            proc.send_signal(signal.SIGINT)
            try:
                _, err = proc.communicate(timeout=PERF_STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                raise _perf_failed(proc, f"did not stop in {PERF_STOP_TIMEOUT_S:g} s") from None
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
            os.close(ctl)
            os.close(ack)
    if proc.returncode not in (0, -signal.SIGINT) or not data.exists():
        raise ProfileError(f"perf record failed (exit status {proc.returncode}):\n"
                           f"{err.decode(errors='replace').strip()}")
    return per_call


def report(data: Path) -> dict[str, int]:
    """Samples per symbol name (``perf report``; copies of one function added up)."""
    proc = subprocess.run(
        ["perf", "report", "--stdio", "--no-children", "--sort", "symbol", "-F", "sample,sym",
         "-q", "-t", "|", "-i", str(data)], capture_output=True, text=True)
    if proc.returncode != 0:
        raise ProfileError(f"perf report failed (exit status {proc.returncode}):\n"
                           f"{proc.stderr.strip()}")
    samples: dict[str, int] = {}
    for line in proc.stdout.splitlines():
        cells = line.split("|")
        if len(cells) < 2 or not cells[0].strip().isdigit():
            continue
        name = re.sub(r"^\[.\]\s*", "", cells[1].strip())
        samples[name] = samples.get(name, 0) + int(cells[0])
    return samples


# ---------------------------------------------------------------------------------------
# the table


def kind_of(name: str, entry: str) -> str:
    """What a function of tex's code is: the entry, a nest (outlined loop nest), a body
    (a parallel loop's), a wrapper (OpenMP's, shared by bodies of one closure type) or a
    helper (vector math...)."""
    if name == entry:
        return "entry"
    m = re.fullmatch(re.escape(entry) + r"\.(nest|par\d+\.body|wrapper)\d*", name)
    if m:
        return "body" if m.group(1).startswith("par") else m.group(1)
    return "helper"


def table(samples: dict[str, int], tex_names: set[str], entry: str,
          tensors: dict[str, str], per_call_s: float, top: int) -> str:
    """The ``top`` symbols by samples as a Markdown table, then tex's total."""
    total = sum(samples.values()) or 1
    head = ["symbol", "kind", "samples", "share", "ms/call", "tensors"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for name, n in sorted(samples.items(), key=lambda kv: -kv[1])[:top]:
        kind = kind_of(name, entry) if name in tex_names else "other"
        cells = [f"`{name}`", kind, str(n), f"{100 * n / total:.1f}%",
                 f"{1e3 * per_call_s * n / total:.3f}", tensors.get(name, "")]
        lines.append("| " + " | ".join(cells) + " |")
    in_tex = sum(n for name, n in samples.items() if name in tex_names)
    lines.append(f"\n{total} samples, {100 * in_tex / total:.1f}% in tex's code; "
                 f"{len(samples)} symbols, {min(top, len(samples))} shown")
    return "\n".join(lines)


# ---------------------------------------------------------------------------------------


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("name", help="a layer of model_layers.LAYERS (resnet_28, bert, ...), "
                        "or with --workload a program of workloads.WORKLOADS")
    parser.add_argument("--workload", action="store_true",
                        help="NAME is a WORKLOADS.md program, not a model layer")
    parser.add_argument("--fwd", action="store_true",
                        help="the forward only (default: the loss and every gradient)")
    parser.add_argument("--seconds", type=float, default=None,
                        help=f"how long the function runs (default {DEFAULT_SECONDS:g}; "
                        f"{DEFAULT_MAP_ONLY_SECONDS:g} with --map-only)")
    parser.add_argument("--threads", type=int, default=None,
                        help="tex's threads (TEX_NUM_THREADS; default: tex's)")
    parser.add_argument("--small", action="store_true", help="tiny shapes (smoke runs)")
    parser.add_argument("--map-only", action="store_true",
                        help="write the perf map and run the loop, printing the PID, for a "
                        "perf (or other profiler) you attach yourself")
    parser.add_argument("--top", type=int, default=15, help="rows of the table")
    parser.add_argument("--data", type=Path, default=DEFAULT_DATA,
                        help="perf's data file (default: benchmarks/results/profile.data)")
    args = parser.parse_args(argv)
    if args.threads is not None and args.threads < 1:
        parser.error("--threads must be at least 1")
    if args.seconds is not None and args.seconds < 0:
        parser.error("--seconds must not be negative")
    if args.seconds is None:
        args.seconds = DEFAULT_MAP_ONLY_SECONDS if args.map_only else DEFAULT_SECONDS
    return args


def profile(args: argparse.Namespace) -> None:
    if not args.map_only:
        problem = perf_problem()
        if problem is not None:
            raise ProfileError(problem)
    if args.threads is not None:
        if "tex" in sys.modules:
            raise ProfileError("--threads must be set before tex is imported")
        os.environ["TEX_NUM_THREADS"] = str(args.threads)
    f, call_args = build_program(args.name, args.workload, args.fwd, args.small)
    symbols, unplaced = symbol_map(f)
    path = write_perf_map(symbols)
    parts = len({s.part for s in symbols})
    print(f"perf map: {path} ({len(symbols)} functions in {parts} object"
          f"{'s' if parts > 1 else ''}; entry {f._kernel.name} at {f._kernel.address:#x})")
    if unplaced:
        print(f"not mapped (no exported function in their section): {', '.join(unplaced)}")
    f(*call_args)  # the first call: OpenMP's threads start, the pages are touched
    # what the build left (IR, sympy's caches) is never collected again: the collection
    # mean_call_time starts with then scans nothing while perf records
    gc.collect()
    gc.freeze()

    def loop() -> float:
        return mean_call_time(lambda: f(*call_args), args.seconds)

    if args.map_only:
        print(f"PID {os.getpid()}: running {f.name} for {args.seconds:g} s; attach with\n"
              f"  perf record -F {PERF_FREQ} -p {os.getpid()} -o perf.data\n"
              f"then: perf report -i perf.data --no-children --sort symbol", flush=True)
        per_call = loop()
        print(f"{per_call * 1e3:.3f} ms per call; {path} is kept for perf report")
        return
    per_call = record(loop, args.data)
    samples = report(args.data)
    tensors = function_tensors(f.get_source("ll.raw"))
    print(f"\n{describe(args.name, args.workload, args.fwd)}: {per_call * 1e3:.3f} ms per "
          f"call over {args.seconds:g} s (perf data {args.data}, map {path})\n")
    print(table(samples, {s.name for s in symbols}, f._kernel.name, tensors, per_call,
                args.top))


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    try:
        profile(args)
    except ProfileError as err:
        print(f"profile_nests.py: {err}", file=sys.stderr)
        return 2
    return 0


if __name__ == "__main__":
    sys.exit(main())
