"""Cold compile time per program and per phase: differentiate + auto_schedule + build.

For every program (the nine WORKLOADS.md workloads, the five ``workloads.MODELS`` and the
real layers of ``model_layers.LAYERS``: ResNet blocks, a BERT encoder layer, ...), each
repetition takes a fresh workload (new placeholders), forgets every compiled
kernel (in-process and on disk: ``TEX_CACHE_DIR`` points at a fresh temporary directory
for the whole run) and sympy's memo, then times, under ``tex.debug.timings()``:

* the gradient program: ``differentiate(loss, wrt)``, ``auto_schedule([loss, *grads])`` and
  ``tex.build`` of the loss and all gradients in one function (the issue-23 target:
  <= 1 s median, <= 2 s max over the programs);
* the forward: ``auto_schedule([forward])`` and its ``tex.build``.

The table gives, per program, the median over ``--repeat`` repetitions of the gradient's
total (wall clock, and the CPU time: steadier when other processes share the
machine) and of each phase (``lower`` with its passes, ``legalize``, ``llvm.emit``: building
the LLVM IR in Python, ``llvm.print``: its text, ``llvm.split``: cutting a large module
into parts, ``llvm.parse``, ``llvm.opt``: LLVM's optimization pipeline, ``llvm.codegen``:
machine code (these three of a module compiled whole, its worker's timings relayed),
``llvm.wait``: waiting for the parts of a split module compiled by the workers,
``llvm.link``: loading the parts' objects), then the forward's total, and the number
of lines of the gradient's unoptimized LLVM IR. The CPU column counts this process and
its compile workers: above the wall clock when they ran at once.

    python benchmarks/compile_time.py                     # every program, 3 repetitions
    python benchmarks/compile_time.py --only attention cnn --repeat 5
    python benchmarks/compile_time.py --small             # tiny shapes (smoke run)

JSON goes to ``benchmarks/results/compile_time.json``. Compile time depends on the load of
the machine: compare runs made side by side.
"""
from __future__ import annotations

import os
import tempfile

# the disk cache is read at import: point it at an empty directory before tex loads
os.environ["TEX_CACHE_DIR"] = tempfile.mkdtemp(prefix="tex-compile-time-")

from bench_env import HERE  # noqa: E402  (the threading environment and sys.path)

# isort: split

import argparse  # noqa: E402
import gc  # noqa: E402
import shutil  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

from model_layers import LAYERS  # noqa: E402

import tex  # noqa: E402
from tex import debug  # noqa: E402
from tex.codegen import jobs  # noqa: E402
from tex.runtime import jit  # noqa: E402
from tex.schedule import auto_schedule  # noqa: E402

from workloads import MODELS, WORKLOADS, Workload, write_results  # noqa: E402

DEFAULT_OUTPUT = HERE / "results" / "compile_time.json"
# the phases in the table, in pipeline order (others are summed under "other")
PHASES = ("differentiate", "auto_schedule", "lower", "legalize", "llvm.emit", "llvm.print",
          "llvm.split", "llvm.parse", "llvm.opt", "llvm.codegen", "llvm.wait", "llvm.link")


# the model layers of models.py (ResNet blocks, BERT, ...), but for a name MODELS has already
PROGRAMS: dict[str, Callable[..., Workload]] = {
    **WORKLOADS, **MODELS,
    **{name: layer.build for name, layer in LAYERS.items() if name not in MODELS}}


def _forget_compiled() -> None:
    """Every compiled kernel forgotten (in-process and on disk), and sympy's memo."""
    jit.clear_cache(disk=True)
    if "sympy" in sys.modules:
        from sympy.core.cache import clear_cache

        clear_cache()


def _phases(t: debug.Timings, total: float) -> dict[str, float]:
    """Seconds per phase of ``PHASES`` (runs summed; a phase run inside another, such as
    the print of each function emitted whole inside ``llvm.emit``, or the passes of each
    nest a build lowers while it emits, counted once: for itself; a pass ``lower.*``
    counts as ``lower``), and the rest as ``other``."""
    out = dict.fromkeys(PHASES, 0.0)
    stack: list[tuple[int, str | None]] = []  # the phases open at a row: depth, name
    for name, depth, s in t.rows:
        while stack and stack[-1][0] >= depth:
            stack.pop()
        if name.startswith("lower."):
            name = "lower"
        if name in out:
            out[name] += s
            owner = next((p for _, p in reversed(stack) if p is not None), None)
            if owner is not None:
                out[owner] -= s
        stack.append((depth, name if name in out else None))
    out["other"] = max(0.0, total - sum(out.values()))
    return out


def _cpu_seconds() -> float:
    """CPU seconds of this process, of its children that have ended (compile workers
    stopped) and of the compile workers running (``tex.codegen.jobs``: they live on between
    compiles)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system + \
        sum(_process_cpu_seconds(pid) for pid in jobs.worker_pids())


def _process_cpu_seconds(pid: int) -> float:
    """CPU seconds of process ``pid`` so far (0 when it is gone)."""
    try:
        fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    except OSError:
        return 0.0
    # after the command: state, ppid, ... utime and stime are fields 14 and 15 of the line
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def compile_once(build: Callable[..., Workload], small: bool) -> dict[str, Any]:
    """One cold compile of the gradient program, then of the forward."""
    w = build(small=small)
    _forget_compiled()
    gc.collect()
    with debug.timings() as t:
        start, cpu = time.perf_counter(), _cpu_seconds()
        grads = list(tex.differentiate(w.loss, w.wrt))
        outs = [w.loss, *grads]
        f = tex.build(auto_schedule(outs, target="llvm"), [*w.placeholders, *outs],
                      name=f"{w.name}_grad")
        grad_s, cpu_s = time.perf_counter() - start, _cpu_seconds() - cpu
    with debug.timings():
        start = time.perf_counter()
        tex.build(auto_schedule([w.forward], target="llvm"), [*w.inputs, w.forward],
                  name=f"{w.name}_fwd")
        fwd_s = time.perf_counter() - start
    return {"grad_s": grad_s, "cpu_s": cpu_s, "phases": _phases(t, grad_s), "fwd_s": fwd_s,
            "ir_lines": f.get_source("ll.raw").count("\n")}


def measure(name: str, repeat: int, small: bool) -> dict[str, Any]:
    """The medians of ``repeat`` cold compiles of program ``name``."""
    runs = [compile_once(PROGRAMS[name], small) for _ in range(repeat)]
    med = statistics.median
    return {"name": name, "grad_s": med(r["grad_s"] for r in runs),
            "grad_s_all": [r["grad_s"] for r in runs], "cpu_s": med(r["cpu_s"] for r in runs),
            "phases": {p: med(r["phases"][p] for r in runs) for p in runs[0]["phases"]},
            "fwd_s": med(r["fwd_s"] for r in runs), "ir_lines": runs[0]["ir_lines"]}


def table(rows: list[dict[str, Any]]) -> str:
    """The rows as a Markdown table, and a closing line with the median and the maximum."""
    phases = [*PHASES, "other"]
    head = ["program", "grad s", "CPU s", *phases, "fwd s", "IR lines"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        cells = [r["name"], f"{r['grad_s']:.2f}", f"{r['cpu_s']:.2f}",
                 *(f"{r['phases'][p]:.2f}" for p in phases),
                 f"{r['fwd_s']:.2f}", str(r["ir_lines"])]
        lines.append("| " + " | ".join(cells) + " |")
    totals = [r["grad_s"] for r in rows]
    lines.append(f"\ngradient compile: median {statistics.median(totals):.2f} s, max "
                 f"{max(totals):.2f} s ({max(rows, key=lambda r: r['grad_s'])['name']})")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--only", nargs="+", choices=list(PROGRAMS), metavar="NAME",
                        help=f"programs to compile (of {', '.join(PROGRAMS)})")
    parser.add_argument("--repeat", type=int, default=3, help="cold compiles per program")
    parser.add_argument("--small", action="store_true", help="tiny shapes (smoke run)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    # one untimed build first: LLVM's target and tex's imports are initialized once
    compile_once(WORKLOADS["sumsq"], small=True)
    rows = []
    for name in args.only or list(PROGRAMS):
        rows.append(measure(name, args.repeat, args.small))
        print(f"  {name}: {rows[-1]['grad_s']:.2f} s", flush=True)
    print(table(rows))
    write_results(args.output, "compile_time", {"repeat": args.repeat, "small": args.small},
                  rows)
    shutil.rmtree(os.environ["TEX_CACHE_DIR"], ignore_errors=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
