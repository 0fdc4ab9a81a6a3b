"""Contention: how much slower tex and PyTorch run while another process keeps one core busy
(issue 23, "graceful under contention").

For every WORKLOADS.md workload, tex's auto-scheduled forward and gradient and PyTorch
eager's (built and checked against NumPy as ``run.py`` does) are timed in two phases:
*quiet* and *busy*, where a child process spins in a Python loop pinned to one core
(``--core``, default the last core this process may use). One busy process serves the whole
run, stopped (SIGSTOP) in the quiet phase and continued (SIGCONT) in the busy one, so each
variant is timed in both phases back to back, the order alternating between repetitions:
what the rest of the machine does then weighs on both alike. Per variant, the table gives
the median time of each phase and the slowdown, the median of the busy / quiet ratios of
the pairs; the last column is tex's slowdown over PyTorch's (> 1: tex degrades more). A
first table gives the cost of one fork/join: a 64-element parallel loop on 2 threads minus
the same on 1 thread (no region), per call, quiet and busy.

The busy process is killed at the end, at exit, and by the kernel when this process dies
(a parent-death signal; elsewhere than Linux it watches its parent).

    python benchmarks/contention.py                   # every workload, PyTorch too
    python benchmarks/contention.py --only dense softmax --repeat 7
    python benchmarks/contention.py --quick           # tiny shapes, one short repetition

Writes ``benchmarks/results/contention.json``. ``TEX_NUM_THREADS`` sets tex's threads, and
``GOMP_SPINCOUNT``/``OMP_WAIT_POLICY`` the OpenMP runtime's waiting, for tex and PyTorch
alike (they share libgomp; unset: tex's default, ``tex.runtime.openmp``).
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import atexit
import os
import signal
import statistics
import subprocess
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import frameworks
import numpy as np
import run

import tex
from tex.runtime.openmp import DEFAULT_SPINCOUNT, wait_policy
from tex.schedule import create_schedule

from workloads import WORKLOADS, random_arrays, write_results

DEFAULT_OUTPUT = HERE / "results" / "contention.json"
PHASES = ("quiet", "busy")
REPEAT = 9

# the competing process: pinned to one core, spinning; it dies with the benchmark (the
# kernel's parent-death signal on Linux, else by watching its parent between loops)
BUSY_LOOP = """\
import ctypes, os, signal, sys
parent = os.getppid()
if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG: works while stopped too
os.sched_setaffinity(0, {int(sys.argv[1])})
print("ready", flush=True)
while os.getppid() == parent:
    for _ in range(200_000):
        pass
"""


class BusyCore:
    """A child process spinning on ``core`` while the ``with`` block runs; ``pause()`` and
    ``resume()`` stop and continue it (SIGSTOP/SIGCONT: no start-up between phases, so a
    quiet and a busy measurement can be taken a moment apart)."""

    running: set[subprocess.Popen] = set()  # killed at exit, whatever happened

    def __init__(self, core: int) -> None:
        self.core = core
        self.proc: subprocess.Popen | None = None

    def __enter__(self) -> BusyCore:
        self.proc = subprocess.Popen([sys.executable, "-c", BUSY_LOOP, str(self.core)],
                                     stdout=subprocess.PIPE, text=True)
        BusyCore.running.add(self.proc)
        if self.proc.stdout is None or self.proc.stdout.readline().strip() != "ready":
            self.__exit__()
            raise RuntimeError(f"the busy process could not be pinned to core {self.core}")
        return self

    def __exit__(self, *exc: object) -> None:
        if self.proc is not None:
            _kill(self.proc)
            self.proc = None

    def pause(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGSTOP)

    def resume(self) -> None:
        assert self.proc is not None
        self.proc.send_signal(signal.SIGCONT)

    def set(self, phase: str) -> None:
        """Spin in the "busy" phase, stay stopped in the "quiet" one."""
        self.resume() if phase == "busy" else self.pause()


def _kill(proc: subprocess.Popen) -> None:
    proc.kill()  # SIGKILL ends a stopped process too
    proc.wait()
    if proc.stdout is not None:
        proc.stdout.close()
    BusyCore.running.discard(proc)


@atexit.register
def _kill_all() -> None:
    for proc in list(BusyCore.running):
        _kill(proc)


def default_core() -> int:
    """The last core this process may run on."""
    return max(os.sched_getaffinity(0))


def paired_times(fns: dict[str, Callable[[], Any]], core: int, repeat: int,
                 min_time: float) -> dict[str, dict[str, list[float]]]:
    """Seconds per call of each function, quiet and busy, ``repeat`` times: each function
    is timed in both phases back to back (the order alternating), so the load of the rest of
    the machine is nearly the same in the two."""
    times: dict[str, dict[str, list[float]]] = {k: {p: [] for p in PHASES} for k in fns}
    for fn in fns.values():  # warm-up
        fn()
    with BusyCore(core) as busy:
        for rep in range(repeat):
            for key, fn in fns.items():
                for phase in PHASES if rep % 2 == 0 else PHASES[::-1]:
                    busy.set(phase)
                    time.sleep(0.002)  # let the scheduler see the change
                    times[key][phase].append(mean_call_time(fn, min_time))
    return times


def summarize(times: dict[str, dict[str, list[float]]]) -> dict[str, dict[str, float]]:
    """Per function: the median time of each phase, and ``slowdown``, the median of the
    busy / quiet ratios of the pairs."""
    return {k: {"quiet": statistics.median(d["quiet"]), "busy": statistics.median(d["busy"]),
                "slowdown": statistics.median(b / q for q, b in zip(d["quiet"], d["busy"]))}
            for k, d in times.items()}


# --------------------------------------------------------------------------------------
# fork/join cost


def forkjoin_kernels() -> tuple[Any, Any, np.ndarray, np.ndarray]:
    """A 64-element parallel loop built for 1 thread (no region: the body is called
    directly) and for 2 threads, and its arrays."""
    n = 64
    A = tex.placeholder((n,), name="A")
    B = tex.compute((n,), lambda i: A[i] * 2.0 + 1.0, name="B")
    s = create_schedule(B.op)
    s[B].parallel(B.op.axis[0])
    kernels = []
    for threads in (1, 2):
        with tex.debug.config(num_threads=threads):
            kernels.append(tex.build(s, [A, B], name=f"forkjoin{threads}"))
    return kernels[0], kernels[1], np.ones(n, np.float32), np.empty(n, np.float32)


def forkjoin(core: int, repeat: int, min_time: float) -> dict[str, dict[str, float]]:
    """Seconds per call of the 1- and 2-thread kernels, quiet and busy (medians)."""
    one, two, a, b = forkjoin_kernels()
    times = paired_times({"1": lambda: one(a, b), "2": lambda: two(a, b)}, core, repeat,
                         min_time)
    return {p: {k: statistics.median(d[p]) for k, d in times.items()} for p in PHASES}


# --------------------------------------------------------------------------------------
# workloads


def variants(name: str, settings: run.Settings, row: dict[str, Any]) -> list[run.Variant]:
    """tex (auto) and PyTorch eager, forward and gradient, built and checked."""
    w = WORKLOADS[name](small=settings.small)
    arrays = random_arrays(w, seed=0)
    ref = run.reference(w, arrays)
    found = run.tex_variants(w, arrays, ref, row, settings)
    if settings.torch is not None:
        found += run.framework_variants("torch", w, arrays, ref, row, settings)
    return found


# --------------------------------------------------------------------------------------
# tables


def _ms(t: float | None) -> str:
    return f"{t * 1e3:.3f}" if t is not None else "-"


def _x(r: float | None) -> str:
    return f"{r:.2f}" if r is not None else "-"


def forkjoin_table(fj: dict[str, dict[str, float]]) -> str:
    lines = run.markdown_head(["phase", "1 thread us/call", "2 threads us/call",
                               "fork/join us"])
    for phase in PHASES:
        one, two = fj[phase]["1"], fj[phase]["2"]
        lines.append(f"| {phase} | {one * 1e6:.1f} | {two * 1e6:.1f} | "
                     f"{(two - one) * 1e6:.1f} |")
    return "\n".join(lines)


def table(rows: list[dict[str, Any]]) -> str:
    head = ["workload", "kind", "tex quiet ms", "tex busy ms", "tex slowdown",
            "torch quiet ms", "torch busy ms", "torch slowdown", "tex/torch slowdown"]
    lines = run.markdown_head(head)
    for r in rows:
        if "error" in r:
            lines.append(run.error_row(r, len(head)))
            continue
        m = r.get("median_s", {})
        sd = {k: d["slowdown"] for k, d in m.items()}
        for kind in run.KINDS:
            tex_k, torch_k = f"tex_{kind}", f"torch_{kind}"
            ratio = (sd[tex_k] / sd[torch_k]) if tex_k in sd and torch_k in sd else None
            cells = [r["name"], kind, _ms(m.get(tex_k, {}).get("quiet")),
                     _ms(m.get(tex_k, {}).get("busy")), _x(sd.get(tex_k)),
                     _ms(m.get(torch_k, {}).get("quiet")), _ms(m.get(torch_k, {}).get("busy")),
                     _x(sd.get(torch_k)), _x(ratio)]
            lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


# --------------------------------------------------------------------------------------


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes, one short repetition (a smoke run)")
    run.add_timing_arguments(parser, REPEAT, f"quiet/busy pairs, median (default {REPEAT})")
    parser.add_argument("--core", type=int, default=None,
                        help="the core the busy process spins on (default: the last one)")
    parser.add_argument("--no-torch", action="store_true", help="skip PyTorch")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    core = default_core() if args.core is None else args.core
    if core not in os.sched_getaffinity(0):
        parser.error(f"--core {core} is not one of this process's cores "
                     f"{sorted(os.sched_getaffinity(0))}")
    repeat, min_time = (1, 0.002) if args.quick else (args.repeat, args.min_time)
    torch = None if args.no_torch else frameworks.torch_module()
    settings = run.Settings(small=args.quick, timed=True, repeat=repeat, min_time=min_time,
                            hand=False, torch=torch)
    threads = run.tex_threads()
    waiting = {"tex": f"tex's default GOMP_SPINCOUNT={DEFAULT_SPINCOUNT}",
               "environment": f"GOMP_SPINCOUNT={os.environ.get('GOMP_SPINCOUNT', '(unset)')}, "
                              f"OMP_WAIT_POLICY={os.environ.get('OMP_WAIT_POLICY', '(unset)')}"
               }.get(wait_policy(), wait_policy())
    print(f"busy process on core {core}; tex on {threads} threads; libgomp waiting: "
          f"{waiting}", flush=True)

    fj = forkjoin(core, repeat, min_time)
    print("\nfork/join of one parallel region (64 elements; medians)\n")
    print(forkjoin_table(fj), flush=True)

    rows: list[dict[str, Any]] = []
    failed = False
    for name in args.only or list(WORKLOADS):
        row: dict[str, Any] = {"name": name}
        try:
            found = variants(name, settings, row)
            row["median_s"] = summarize(paired_times({v.name: v.fn for v in found}, core,
                                                     repeat, min_time))
        except Exception as exc:  # report it and go on with the other workloads
            traceback.print_exc()
            row = {"name": name, "error": f"{type(exc).__name__}: {exc}".splitlines()[0][:300]}
        failed |= "error" in row or bool(row.get("errors"))
        rows.append(row)
        print(f"  {name}: {'ERROR' if 'error' in row else 'done'}", flush=True)

    print(f"\nslowdown with a busy process on core {core} (medians of {repeat} busy / quiet "
          "pairs; tex/torch slowdown > 1: tex degrades more)\n")
    print(table(rows))
    write_results(args.output, "contention", {
        "quick": args.quick, "repeat": repeat, "min_time": min_time, "core": core,
        "tex_threads": threads, "torch": frameworks.version_of(torch),
        "wait_policy": wait_policy(), "GOMP_SPINCOUNT": os.environ.get("GOMP_SPINCOUNT"),
        "OMP_WAIT_POLICY": os.environ.get("OMP_WAIT_POLICY"), "forkjoin_s": fj}, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
