"""Time ``tex.autodiff.grad_program`` (forward and backward joined by a tape) per tape policy.

For the layernorm and softmax workloads of ``workloads.py`` (loss ``sum(forward * H)``), a
program is built per policy: ``tapes="auto"`` (save the reductions: softmax's max and sum,
layer norm's statistics), ``"none"`` (save nothing; the backward recomputes from the
inputs) and ``"all"`` (save every intermediate the gradient reads). Each program is checked
against the NumPy hand-written gradients (float64), then timed, interleaved across policies:
``prog.forward(feed)``, ``prog.backward(tape)`` and both in a row (what a training step
costs), each repetition the mean over at least ``--min-time`` seconds of calls, the median
of ``--repeat`` repetitions reported. Each call allocates its results (the API returns
fresh arrays), and that is timed. For scale, ``fused`` is one function computing the loss
and every gradient (``tex.build([loss, *grads])``, as ``run.py`` times it), its outputs
also allocated per call.

Columns: the saved tensors, the tape's bytes (saved intermediates; the inputs the backward
reads are carried by reference and cost nothing), the times, and the backward program's
iteration count (``plan.backward_iterations``).

    python benchmarks/tape.py                 # WORKLOADS.md shapes
    python benchmarks/tape.py --quick         # tiny shapes, checks only
    python benchmarks/tape.py --only softmax --repeat 9

Prints a markdown table and writes ``benchmarks/results/tape.json``. Exit status 1 when a
check fails.
"""
from __future__ import annotations

from bench_env import HERE, ROOT, mean_call_time  # first: the threading environment and sys.path

# isort: split

import argparse
import os
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tex

from workloads import WORKLOADS, Workload, random_arrays, write_results

DEFAULT_OUTPUT = HERE / "results" / "tape.json"
NAMES = ("layernorm", "softmax")
POLICIES = ("auto", "none", "all")
RTOL, ATOL = 2e-3, 2e-3


def _close(what: str, got: np.ndarray, want: np.ndarray) -> None:
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(np.asarray(got, np.float64), want, rtol=RTOL,
                               atol=ATOL * scale, err_msg=f"{what} differs from NumPy")


class Timed:
    """One timed call: ``fn()``; ``times`` holds the mean time per call of each repetition."""

    def __init__(self, fn: Callable[[], Any]) -> None:
        self.fn = fn
        self.times: list[float] = []

    def run(self, min_time: float) -> None:
        self.times.append(mean_call_time(self.fn, min_time))

    @property
    def median(self) -> float:
        return statistics.median(self.times)


def _program_variants(w: Workload, feed: dict[tex.Tensor, np.ndarray], tapes: str,
                      want: list[np.ndarray], row: dict[str, Any]) -> dict[str, Timed]:
    t0 = time.perf_counter()
    prog = tex.autodiff.grad_program(w.loss, wrt=w.wrt, tapes=tapes, name=f"{w.name}_{tapes}")
    row["build_s"] = time.perf_counter() - t0
    plan = prog.plan
    row.update(saved=plan.saved, recomputed=plan.recomputed, tape_bytes=plan.tape_bytes,
               input_bytes=plan.input_bytes, forward_iterations=plan.forward_iterations,
               backward_iterations=plan.backward_iterations, plan=plan.as_dict())
    out, tape = prog.forward(feed)
    if sum(tape[k].nbytes for k in plan.saved) != plan.tape_bytes:
        raise AssertionError(f"{w.name} tapes={tapes}: the tape's arrays do not add up to "
                             f"plan.tape_bytes={plan.tape_bytes}")
    _close(f"{w.name} tapes={tapes} loss", out, want[0])
    for t, g, r in zip(w.wrt, prog.backward(tape), want[1:]):
        _close(f"{w.name} tapes={tapes} d{t.name}", g, r)

    def step() -> None:
        prog.backward(prog.forward(feed)[1])

    return {"fwd": Timed(lambda: prog.forward(feed)), "bwd": Timed(lambda: prog.backward(tape)),
            "fwd+bwd": Timed(step)}


def _fused_variant(w: Workload, feed: dict[tex.Tensor, np.ndarray], want: list[np.ndarray],
                   row: dict[str, Any]) -> Timed:
    grads = list(tex.differentiate(w.loss, w.wrt))
    outs = [w.loss, *grads]
    t0 = time.perf_counter()
    f = tex.build(outs, name=f"{w.name}_fused")
    row["build_s"] = time.perf_counter() - t0
    inputs = [feed[a] for a in f.args if a not in outs]

    def call() -> list[np.ndarray]:
        bufs = [np.empty(t.shape, t.dtype.numpy) for t in outs]
        f(*inputs, *bufs)
        return bufs

    got = call()
    for name, g, r in zip(["loss"] + [f"d{t.name}" for t in w.wrt], got, want):
        _close(f"{w.name} fused {name}", g, r)
    row["backward_iterations"] = tex.autodiff.iteration_count(*outs)
    return Timed(call)


def bench_one(name: str, args: argparse.Namespace) -> list[dict[str, Any]]:
    w = WORKLOADS[name](small=args.quick)
    arrays = random_arrays(w, seed=0)
    feed = {t: arrays[t.name] for t in w.placeholders}
    wide = {k: v.astype(np.float64) for k, v in arrays.items()}
    fwd = w.numpy_forward(wide)
    want = [np.asarray(np.sum(fwd * wide["H"])), *w.numpy_grad(wide)]
    shapes = {t.name: list(t.shape) for t in w.inputs}
    rows: list[dict[str, Any]] = []
    timed: list[tuple[dict[str, Any], dict[str, Timed]]] = []
    for tapes in POLICIES:
        row: dict[str, Any] = {"name": name, "tapes": tapes, "shapes": shapes}
        timed.append((row, _program_variants(w, feed, tapes, want, row)))
        rows.append(row)
    if args.fused:
        row = {"name": name, "tapes": "fused", "shapes": shapes}
        timed.append((row, {"fwd+bwd": _fused_variant(w, feed, want, row)}))
        rows.append(row)
    for row in rows:
        row["check"] = "ok"
    if args.quick:
        return rows
    everything = [v for _, vs in timed for v in vs.values()]
    for v in everything:  # warm-up
        v.run(0.0)
    for _ in range(args.repeat):  # interleaved: a slow period hits every variant
        for v in everything:
            v.run(args.min_time)
    for row, vs in timed:
        row["ms"] = {k: v.median * 1e3 for k, v in vs.items()}
        row["ms_all"] = {k: [t * 1e3 for t in v.times] for k, v in vs.items()}
    return rows


def markdown(rows: list[dict[str, Any]], timed: bool) -> str:
    head = ["workload", "tapes", "saved", "tape bytes", "bwd iterations"]
    if timed:
        head += ["fwd ms", "bwd ms", "fwd+bwd ms"]
    head.append("check")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | {r.get('tapes', '')} | ERROR: {r['error']} |")
            continue
        fused = r["tapes"] == "fused"
        saved = "(one call)" if fused else ", ".join(r["saved"]) or "-"
        cells = [r["name"], r["tapes"], saved,
                 "-" if fused else f"{r['tape_bytes']:,}",
                 f"{r['backward_iterations']:,}"]
        if timed:
            ms = r.get("ms", {})
            cells += [f"{ms[k]:.3f}" if k in ms else "-" for k in ("fwd", "bwd", "fwd+bwd")]
        cells.append(r["check"])
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes, check against NumPy only (nothing timed)")
    parser.add_argument("--repeat", type=int, default=7,
                        help="repetitions (default 7); medians are reported")
    parser.add_argument("--min-time", type=float, default=0.05,
                        help="seconds of calls per repetition (default 0.05)")
    parser.add_argument("--only", nargs="+", choices=NAMES, metavar="NAME",
                        help=f"workloads (default: {', '.join(NAMES)})")
    parser.add_argument("--fused", action=argparse.BooleanOptionalAction, default=True,
                        help="also time the single fused loss-and-gradients function")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"JSON results file (default {DEFAULT_OUTPUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")

    rows: list[dict[str, Any]] = []
    failed = False
    for name in args.only or list(NAMES):
        try:
            rows += bench_one(name, args)
        except Exception as exc:  # report it, go on with the other workloads
            failed = True
            traceback.print_exc()
            rows.append({"name": name, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]})

    size = "small (--quick) shapes, checks only" if args.quick else (
        f"WORKLOADS.md shapes, median of {args.repeat} repetitions of >= {args.min_time} s")
    threads = tex.debug.current().num_threads or len(os.sched_getaffinity(0))
    print(f"tex.autodiff.grad_program, float32, {size}, {threads} thread(s)\n")
    print(markdown(rows, not args.quick))
    write_results(args.output, "tape", {"quick": args.quick, "repeat": args.repeat,
                                        "min_time": args.min_time, "threads": threads}, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
