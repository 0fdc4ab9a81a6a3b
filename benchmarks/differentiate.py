"""Time ``tex.differentiate`` on the benchmark workloads and count gradient iterations.

For every workload of ``workloads.py``: the median wall time of ``tex.differentiate(loss,
wrt)`` over ``--repeat`` runs, each on a fresh build of the workload (built outside the
timed region, so no tensor is shared between runs), and the static cost of the unscheduled
programs (``tex.autodiff.iteration_count``): the forward, the gradients (everything they
need from the placeholders, forward intermediates included), the hand-written gradient's
count, and the ratios gradient / hand-written and gradient / forward.

``--quick`` uses the tiny shapes and also checks the gradients numerically: the reference
interpreter (``tex.testing.evaluate``) against the NumPy hand-written gradients.

Prints a markdown table and writes JSON to ``benchmarks/results/differentiate.json``.
Exit status 1 when a numerical check fails or a workload cannot be differentiated.

    python benchmarks/differentiate.py            # full WORKLOADS.md shapes
    python benchmarks/differentiate.py --quick    # tiny shapes + numerical check
"""
from __future__ import annotations

from bench_env import HERE, ROOT  # first: the threading environment and sys.path

# isort: split
import argparse
import gc
import statistics
import sys
import time
import traceback
from pathlib import Path
from typing import Any

import numpy as np

import tex
import tex.testing
from tex.autodiff import iteration_count

from workloads import WORKLOADS, Workload, random_arrays, write_results

DEFAULT_OUTPUT = HERE / "results" / "differentiate.json"
RTOL = 1e-3
ATOL = 1e-4


def check_numerically(w: Workload, grads: Any, seed: int = 0) -> float:
    """Evaluate forward and gradients with the reference interpreter and compare them with
    the NumPy implementation (computed in float64 from the same float32 data). Returns the
    largest relative error seen; raises AssertionError on a mismatch."""
    arrays = random_arrays(w, seed)
    feed = {t: arrays[t.name] for t in w.placeholders}
    got = tex.testing.evaluate([w.forward, *grads], feed)
    wide = {k: v.astype(np.float64) for k, v in arrays.items()}
    want = [w.numpy_forward(wide), *w.numpy_grad(wide)]
    names = ["forward"] + [f"d{t.name}" for t in w.wrt]
    worst = 0.0
    for name, g, r in zip(names, got, want):
        r = np.asarray(r)
        if g.shape != r.shape:
            raise AssertionError(f"{w.name}: {name} has shape {g.shape}, NumPy {r.shape}")
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{w.name}: {name} differs from NumPy")
        scale = max(float(np.max(np.abs(r))), 1e-30)
        worst = max(worst, float(np.max(np.abs(g - r))) / scale)
    return worst


def bench_one(name: str, small: bool, repeat: int, check: bool) -> dict[str, Any]:
    build = WORKLOADS[name]
    times: list[float] = []
    grads = w = None
    for _ in range(repeat):
        w = build(small=small)  # fresh placeholders and DAG: nothing cached across runs
        gc.collect()
        t0 = time.perf_counter()
        grads = tex.differentiate(w.loss, w.wrt)
        times.append(time.perf_counter() - t0)
    assert w is not None and grads is not None
    fwd = iteration_count(w.forward)
    grad = iteration_count(*grads)
    hand = w.handwritten_iterations
    row: dict[str, Any] = {
        "name": name,
        "shapes": {t.name: list(t.shape) for t in w.inputs},
        "wrt": [t.name for t in w.wrt],
        "differentiate_s": {"median": statistics.median(times), "first": times[0],
                            "min": min(times), "all": times},
        "forward_iterations": fwd,
        "gradient_iterations": grad,
        "handwritten_iterations": hand,
        "gradient_over_handwritten": grad / hand,
        "gradient_over_forward": grad / fwd,
        "gradient_tensors": len({t.op for t in grads}),
    }
    if check:
        row["max_rel_error"] = check_numerically(w, grads)
        row["check"] = "ok"
    return row


def markdown(rows: list[dict[str, Any]], check: bool) -> str:
    head = ["workload", "differentiate ms (median)", "first run ms", "forward iters",
            "gradient iters", "hand-written iters", "grad / hand", "grad / fwd"]
    if check:
        head.append("NumPy check")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            cells = [r["name"], "ERROR: " + r["error"]] + [""] * (len(head) - 2)
        else:
            t = r["differentiate_s"]
            cells = [r["name"], f"{t['median'] * 1e3:.1f}", f"{t['first'] * 1e3:.1f}",
                     f"{r['forward_iterations']:,}", f"{r['gradient_iterations']:,}",
                     f"{r['handwritten_iterations']:,}",
                     f"{r['gradient_over_handwritten']:.3f}",
                     f"{r['gradient_over_forward']:.3f}"]
            if check:
                cells.append(r.get("check", "") + (f" ({r['max_rel_error']:.1e})"
                                                   if "max_rel_error" in r else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes, and check the gradients against NumPy")
    parser.add_argument("--repeat", type=int, default=5,
                        help="differentiate runs per workload (default 5); the median is "
                             "reported")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), metavar="NAME",
                        help=f"workloads to run (default all: {', '.join(WORKLOADS)})")
    parser.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                        help="check gradients against NumPy with the reference interpreter "
                             "(default: only with --quick; slow at full size)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"JSON results file (default {DEFAULT_OUTPUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    check = args.quick if args.check is None else args.check

    rows: list[dict[str, Any]] = []
    failed = False
    for name in args.only or list(WORKLOADS):
        try:
            row = bench_one(name, args.quick, args.repeat, check)
        except Exception as exc:  # report it, go on with the other workloads
            failed = True
            traceback.print_exc()
            row = {"name": name, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        rows.append(row)

    size = "small (--quick) shapes" if args.quick else "WORKLOADS.md shapes"
    print(f"tex.differentiate on {size}, float32, median of {args.repeat} fresh builds\n")
    print(markdown(rows, check))
    above = [r["name"] for r in rows
             if "error" not in r and r["gradient_iterations"] > r["handwritten_iterations"]]
    if above:
        print("\ngradient iterations above the hand-written count: " + ", ".join(
            f"{n} ({next(r for r in rows if r['name'] == n)['gradient_over_handwritten']:.2f}x)"
            for n in above))

    write_results(args.output, "differentiate",
                  {"quick": args.quick, "repeat": args.repeat, "checked": check}, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
