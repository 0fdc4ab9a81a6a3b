"""Time ``tex.differentiate`` and count gradient iterations: the benchmark workloads, model
layers, and TVM's test list.

Three groups of rows:

* ``workloads``: the nine of ``workloads.WORKLOADS`` (WORKLOADS.md);
* ``models``: the model layers of ``workloads.MODELS`` (group norm through reshape,
  multi-head attention, a CNN with flatten, an embedding bag, product pooling);
* ``tvm``: TVM's test list (``tvm_list.CASES``): the programs TVM's autodiff published
  iteration counts for, at exactly those shapes, differentiated as TVM's test does (a ones
  head, ``topi.full_like(out, 1.0)``).

Per row: the median wall time of ``tex.differentiate`` over ``--repeat`` runs, each on a
fresh build (built outside the timed region, so no tensor is shared between runs), and the
static cost of the unscheduled programs (``tex.autodiff.iteration_count``): the forward,
the gradients (everything they need from the placeholders, forward intermediates
included), the hand-written gradient's count and TVM's published count (``—`` where there
is none: the workloads and models), and the ratios tex / hand-written, tex / TVM and
gradient / forward. For the TVM rows ``tex / TVM`` compares the ones-head counts (TVM's
measure) and ``tex / hand`` tex's count with a placeholder head (a general
vector-Jacobian product, what the hand-written formula counts): see ``tvm_list.py``.

``--quick`` uses the tiny shapes (the TVM rows have only their own) and also checks the
gradients numerically: the reference interpreter (``tex.testing.evaluate``) against NumPy
(hand-written gradients; for the TVM rows, of the ones head).

Prints markdown tables and writes JSON to ``benchmarks/results/differentiate.json``.
Exit status 1 when a numerical check fails or a row cannot be differentiated.

    python benchmarks/differentiate.py            # full shapes
    python benchmarks/differentiate.py --quick    # tiny shapes + numerical check
    python benchmarks/differentiate.py --groups models tvm
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
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

import tex
import tex.testing
from tex.autodiff import iteration_count

from tvm_list import CASES, TvmCase
from workloads import MODELS, WORKLOADS, Workload, random_arrays, write_results

DEFAULT_OUTPUT = HERE / "results" / "differentiate.json"
RTOL = 1e-3
ATOL = 1e-4
DASH = "—"

GROUPS: dict[str, dict[str, Callable[..., Any]]] = {
    "workloads": WORKLOADS, "models": MODELS, "tvm": CASES}
TITLES = {"workloads": "WORKLOADS.md workloads", "models": "Models",
          "tvm": "TVM's test list (ones head, as TVM's test; TVM: autodiff-dev counts)"}


def check_numerically(w: Workload | TvmCase, grads: Any, seed: int = 0) -> float:
    """Evaluate forward and gradients with the reference interpreter and compare them with
    the NumPy implementation (computed in float64 from the same float32 data; integer
    index data as is). Returns the largest relative error seen; raises AssertionError on a
    mismatch."""
    arrays = random_arrays(w, seed)
    feed = {t: arrays[t.name] for t in w.placeholders}
    got = tex.testing.evaluate([w.forward, *grads], feed)
    wide = {k: v.astype(np.float64) if v.dtype.kind == "f" else v for k, v in arrays.items()}
    want = [w.numpy_forward(wide), *w.numpy_grad(wide)]
    names = ["forward"] + [f"d{t.name}" for t in w.wrt]
    worst = 0.0
    for name, g, r in zip(names, got, want, strict=True):
        r = np.asarray(r)
        if g.shape != r.shape:
            raise AssertionError(f"{w.name}: {name} has shape {g.shape}, NumPy {r.shape}")
        np.testing.assert_allclose(g, r, rtol=RTOL, atol=ATOL,
                                   err_msg=f"{w.name}: {name} differs from NumPy")
        scale = max(float(np.max(np.abs(r))), 1e-30)
        worst = max(worst, float(np.max(np.abs(g - r))) / scale)
    return worst


def _timed(build: Callable[[], Any], diff: Callable[[Any], Any], repeat: int
           ) -> tuple[Any, Any, list[float]]:
    """``repeat`` fresh builds, each differentiated once under the clock."""
    times: list[float] = []
    w = grads = None
    for _ in range(repeat):
        w = build()  # fresh placeholders and DAG: nothing cached across runs
        gc.collect()
        t0 = time.perf_counter()
        grads = diff(w)
        times.append(time.perf_counter() - t0)
    return w, grads, times


def _row(name: str, group: str, w: Any, grads: Any, times: list[float], check: bool,
         general: int | None = None) -> dict[str, Any]:
    """The row of one workload, model or TVM case. ``general``: for a TVM case, tex's count
    with a placeholder head, the basis of tex / hand (``grads`` are of the ones head)."""
    fwd = iteration_count(w.forward)
    grad = iteration_count(*grads)
    hand = w.handwritten_iterations
    tvm = w.tvm_iterations
    row: dict[str, Any] = {
        "name": name,
        "group": group,
        "shapes": {t.name: list(t.shape) for t in w.inputs},
        "wrt": [t.name for t in w.wrt],
        "differentiate_s": {"median": statistics.median(times), "first": times[0],
                            "min": min(times), "all": times},
        "forward_iterations": fwd,
        "gradient_iterations": grad,
        "handwritten_iterations": hand,
        "tvm_iterations": tvm,
        "tex_over_hand": (grad if general is None else general) / hand,
        "tex_over_tvm": None if tvm is None else grad / tvm,
        "gradient_over_forward": grad / fwd,
        "gradient_tensors": len({t.op for t in grads}),
    }
    if general is None:
        row["gradient_over_handwritten"] = grad / hand  # the earlier name of tex_over_hand
    else:
        row.update({"program": w.program, "gradient_iterations_head": general,
                    "tvm_iterations_v1": w.tvm_iterations_v1})
    if check:
        row["max_rel_error"] = check_numerically(w, grads)
        row["check"] = "ok"
    return row


def bench_workload(name: str, group: str, small: bool, repeat: int, check: bool
                   ) -> dict[str, Any]:
    """A workload or model: ``differentiate(sum(forward * H), wrt)``."""
    build = GROUPS[group][name]
    w, grads, times = _timed(lambda: build(small=small),
                             lambda w: tex.differentiate(w.loss, w.wrt), repeat)
    return _row(name, group, w, grads, times, check)


def bench_tvm(name: str, repeat: int, check: bool) -> dict[str, Any]:
    """A program of TVM's test list: ``differentiate(out, wrt, full_like(out, 1))`` timed
    and counted (TVM's measure), and once more with a placeholder head for tex / hand."""
    c, grads, times = _timed(CASES[name], lambda c: tex.differentiate(c.forward, c.wrt, c.head),
                             repeat)
    head = tex.placeholder(c.forward.shape, c.forward.dtype, name="H")
    general = iteration_count(*tex.differentiate(c.forward, c.wrt, head))
    return _row(name, "tvm", c, grads, times, check, general)


def _fmt_ratio(x: float | None) -> str:
    return DASH if x is None else f"{x:.3f}"


def _fmt_int(x: int | None) -> str:
    return DASH if x is None else f"{x:,}"


def markdown(rows: list[dict[str, Any]], check: bool, tvm: bool = False) -> str:
    """One table: the workload/model columns, or (``tvm``) the TVM list's, which show both
    tex counts (ones head and placeholder head)."""
    if tvm:
        head = ["program", "differentiate ms (median)", "forward iters",
                "tex iters (ones head)", "TVM iters", "tex / TVM", "tex iters (head H)",
                "hand-written iters", "tex / hand"]
    else:
        head = ["workload", "differentiate ms (median)", "first run ms", "forward iters",
                "gradient iters", "hand-written iters", "TVM iters", "tex / hand",
                "tex / TVM", "grad / fwd"]
    if check:
        head.append("NumPy check")
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            cells = [r["name"], "ERROR: " + r["error"]] + [""] * (len(head) - 2)
        else:
            t = r["differentiate_s"]
            if tvm:
                cells = [r["name"], f"{t['median'] * 1e3:.1f}",
                         f"{r['forward_iterations']:,}", f"{r['gradient_iterations']:,}",
                         _fmt_int(r["tvm_iterations"]), _fmt_ratio(r["tex_over_tvm"]),
                         f"{r['gradient_iterations_head']:,}",
                         f"{r['handwritten_iterations']:,}", _fmt_ratio(r["tex_over_hand"])]
            else:
                cells = [r["name"], f"{t['median'] * 1e3:.1f}", f"{t['first'] * 1e3:.1f}",
                         f"{r['forward_iterations']:,}", f"{r['gradient_iterations']:,}",
                         f"{r['handwritten_iterations']:,}", _fmt_int(r["tvm_iterations"]),
                         _fmt_ratio(r["tex_over_hand"]), _fmt_ratio(r["tex_over_tvm"]),
                         f"{r['gradient_over_forward']:.3f}"]
            if check:
                cells.append(r.get("check", "") + (f" ({r['max_rel_error']:.1e})"
                                                   if "max_rel_error" in r else ""))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def _notes(rows: list[dict[str, Any]]) -> list[str]:
    ok = [r for r in rows if "error" not in r]
    notes = []
    above = [r for r in ok if r["tex_over_hand"] > 1]
    if above:
        notes.append("tex above the hand-written count: " + ", ".join(
            f"{r['name']} ({r['tex_over_hand']:.2f}x)" for r in above))
    worse = [r for r in ok if r["tex_over_tvm"] is not None and r["tex_over_tvm"] > 1]
    if worse:
        notes.append("tex above TVM's count: " + ", ".join(
            f"{r['name']} ({r['tex_over_tvm']:.2f}x)" for r in worse))
    return notes


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    every = [n for names in GROUPS.values() for n in names]
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes, and check the gradients against NumPy")
    parser.add_argument("--repeat", type=int, default=None,
                        help="differentiate runs per row (default 5, 1 with --quick); the "
                             "median is reported")
    parser.add_argument("--groups", nargs="+", choices=list(GROUPS), default=list(GROUPS),
                        help="row groups to run (default all: workloads models tvm)")
    parser.add_argument("--only", nargs="+", choices=every, metavar="NAME",
                        help="rows to run, of any group (default: every row of --groups)")
    parser.add_argument("--check", action=argparse.BooleanOptionalAction, default=None,
                        help="check gradients against NumPy with the reference interpreter "
                             "(default: only with --quick; slow at full size)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT,
                        help=f"JSON results file (default {DEFAULT_OUTPUT.relative_to(ROOT)})")
    args = parser.parse_args(argv)
    repeat = args.repeat if args.repeat is not None else (1 if args.quick else 5)
    if repeat < 1:
        parser.error("--repeat must be at least 1")
    check = args.quick if args.check is None else args.check

    rows: dict[str, list[dict[str, Any]]] = {}
    failed = False
    for group in args.groups:
        names = [n for n in GROUPS[group] if args.only is None or n in args.only]
        for name in names:
            try:
                if group == "tvm":
                    row = bench_tvm(name, repeat, check)
                else:
                    row = bench_workload(name, group, args.quick, repeat, check)
            except Exception as exc:  # report it, go on with the other rows
                failed = True
                traceback.print_exc()
                row = {"name": name, "group": group,
                       "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
            rows.setdefault(group, []).append(row)

    size = "small (--quick) shapes" if args.quick else "full shapes"
    print(f"tex.differentiate on {size}, float32, median of {repeat} fresh builds")
    for group, group_rows in rows.items():
        print(f"\n### {TITLES[group]}\n")
        print(markdown(group_rows, check, tvm=group == "tvm"))
        for note in _notes(group_rows):
            print(f"\n{note}")

    write_results(args.output, "differentiate",
                  {"quick": args.quick, "repeat": repeat, "checked": check,
                   "groups": list(rows)},
                  [r for group_rows in rows.values() for r in group_rows])
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
