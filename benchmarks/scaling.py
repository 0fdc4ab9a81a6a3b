"""How compile time and memory grow with the program: differentiate, auto_schedule, lower
and build against program length.

Families (each a program ``out`` of one 64-element float32 input ``A``; the timed program
is the training step ``[loss, dA]`` with ``loss = sum(out)``):

- ``chain``: ``n`` element-wise stages, each reading the previous one once (all inlined by
  ``auto_schedule`` into one expression ``n`` deep);
- ``select``: one compute holding ``n`` nested ``if_then_else``, both sides of each using
  the inner value (a DAG of depth ``n``; its tree is exponential);
- ``guarded``: one compute holding ``n`` nested ``if_then_else`` whose two sides share the
  inner value, level ``k`` reading ``A[j - k % 64]`` where ``j - k % 64 >= 0`` (the
  read-bounds analysis and lazy selects of shared values);
- ``leaky``: ``n`` chained ``topi.nn.leaky_relu`` (each reads its input twice), inlined: a
  shared DAG ``n`` deep;
- ``stored``: the ``chain`` with the default schedule (every stage a temporary, one nested
  allocation per stage);
- ``attached``: the ``chain`` with each stage computed at the loop of the stage reading it
  (``compute_at``): one loop, a nest of stages as deep as the chain;
- ``shifted``: ``n`` stages each reading the previous one at a rotated index
  (``x[(j + 1) % 64]``): one delta system per stage for ``differentiate``, an index
  expression ``n`` deep once inlined;
- ``topi``: ``n`` rounds of ``topi.sum`` (a reduction over the whole vector) broadcast back
  into element-wise topi ops (about four stages a round; each reduction is rfactored).

Per size: the seconds of each phase (``differentiate``, ``auto_schedule``, ``lower``,
``build`` with a cold compile cache; the minimum of ``--repeat`` runs, each on a fresh
build of the program) and the peak of Python allocations over the phases
(tracemalloc, in a second, untimed run: LLVM's own memory is not counted). The built
function is checked against ``tex.testing.evaluate``. Under each table, the growth
exponent of each phase between the two largest sizes (``log(t2/t1) / log(n2/n1)``: 1 is
linear, 2 quadratic).

    python benchmarks/scaling.py                  # sizes up to 2,000 stages
    python benchmarks/scaling.py --quick          # tiny sizes, checks only
    python benchmarks/scaling.py --only chain select
    python benchmarks/scaling.py --max-n 100      # sizes up to 100 only

Prints markdown tables and writes ``benchmarks/results/scaling.json``. Exit status 1 when
a check fails.
"""
from __future__ import annotations

from bench_env import HERE  # first: the threading environment and sys.path

# isort: split

import argparse
import math
import sys
import time
import traceback
import tracemalloc
from collections.abc import Callable
from pathlib import Path

import numpy as np

import tex
from tex import topi
from tex.ir.tensor import ComputeOp
from tex.runtime.jit import clear_cache
from tex.schedule import Schedule, auto_schedule

from workloads import write_results

DEFAULT_OUTPUT = HERE / "results" / "scaling.json"
SIZE = 64
PHASES = ("differentiate", "auto_schedule", "lower", "build")


def chain(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((SIZE,), name="A")
    x = A
    for i in range(n):
        x = tex.compute((SIZE,), lambda j, x=x, i=i: x[j] * 0.999 + 0.001 * (i % 3),
                        name=f"s{i}")
    return A, x


def select(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((SIZE,), name="A")

    def body(j):  # type: ignore[no-untyped-def]
        x = A[j]
        e = x
        for _ in range(n):
            e = tex.if_then_else(e > 0.5, e * e, e * x + 0.1)
        return e

    return A, tex.compute((SIZE,), body, name="nested")


def guarded(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((SIZE,), name="A")

    def body(j):  # type: ignore[no-untyped-def]
        e = tex.const(0.0)
        for k in range(n):  # level k reads A[j - k % SIZE] where that is in bounds
            e = tex.if_then_else(j - k % SIZE >= 0, e + A[j - k % SIZE] * 0.5, e)
        return e

    return A, tex.compute((SIZE,), body, name="guarded")


def leaky(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((SIZE,), name="A")
    x = A
    for i in range(n):
        x = topi.nn.leaky_relu(x if i % 2 == 0 else x * -1.0, 0.5)
    return A, x


def shifted(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((SIZE,), name="A")
    x = A
    for i in range(n):
        x = tex.compute((SIZE,), lambda j, x=x: x[(j + 1) % SIZE] * 0.999, name=f"r{i}")
    return A, x


def topi_rounds(n: int) -> tuple[tex.Tensor, tex.Tensor]:
    A = tex.placeholder((SIZE,), name="A")
    x = A
    for _ in range(n):
        m = topi.sum(x)
        x = topi.nn.relu(x - m * (0.5 / SIZE)) * 0.5 + m * 0.001
    return A, x


def automatic(outs: list[tex.Tensor], out: tex.Tensor) -> Schedule:
    return auto_schedule(outs)


def default(outs: list[tex.Tensor], out: tex.Tensor) -> Schedule:
    return tex.create_schedule([t.op for t in outs])


def attached(outs: list[tex.Tensor], out: tex.Tensor) -> Schedule:
    """The default schedule, each stage of the forward chain ending in ``out`` computed at
    the first loop of the stage reading it."""
    s = default(outs, out)
    chain = [out]
    while isinstance(chain[-1].op.input_tensors[0].op, ComputeOp):
        chain.append(chain[-1].op.input_tensors[0])
    for cons, prod in zip(chain, chain[1:]):
        s[prod].compute_at(s[cons], cons.op.axis[0])
    return s


Scheduler = Callable[[list[tex.Tensor], tex.Tensor], Schedule]
FAMILIES: dict[str, tuple[Callable[[int], tuple[tex.Tensor, tex.Tensor]], Scheduler,
                          tuple[int, ...], tuple[int, ...]]] = {
    # name: (builder, scheduler, sizes, quick sizes)
    "chain": (chain, automatic, (10, 30, 100, 300, 1000, 2000), (10, 20)),
    "select": (select, automatic, (5, 10, 20, 40, 80, 160), (5, 10)),
    "guarded": (guarded, automatic, (5, 10, 20, 40, 80, 160), (5, 10)),
    "leaky": (leaky, automatic, (5, 10, 20, 40, 80, 160), (5, 10)),
    "stored": (chain, default, (10, 30, 100, 200, 400), (10, 20)),
    "attached": (chain, attached, (10, 30, 100, 300, 1000, 2000), (10, 20)),
    "shifted": (shifted, automatic, (10, 30, 100, 300, 1000), (10, 20)),
    "topi": (topi_rounds, automatic, (5, 10, 20, 40, 80), (3, 6)),
}


def run_once(family: str, n: int, timed: bool) -> dict:
    """Every phase once; seconds per phase when ``timed``, else the peak allocation."""
    build_fn, scheduler, _, _ = FAMILIES[family]
    A, out = build_fn(n)
    loss = topi.sum(out)
    seconds: dict[str, float] = {}
    peak = 0
    state: dict = {}

    def phase(name: str, fn: Callable[[], object]) -> None:
        nonlocal peak
        if not timed:
            tracemalloc.start()
        t0 = time.perf_counter()
        state[name] = fn()
        seconds[name] = time.perf_counter() - t0
        if not timed:
            peak = max(peak, tracemalloc.get_traced_memory()[1])
            tracemalloc.stop()

    phase("differentiate", lambda: tex.differentiate(loss, [A]))
    (grad,) = state["differentiate"]
    outs = [loss, grad]
    phase("auto_schedule", lambda: scheduler(outs, out))
    s = state["auto_schedule"]
    phase("lower", lambda: tex.lower(s, [A, *outs]))
    clear_cache()
    phase("build", lambda: tex.build(s, [A, *outs]))
    f = state["build"]
    a = np.random.default_rng(n).uniform(-1.0, 1.0, SIZE).astype("float32")
    got = [np.zeros((), "float32"), np.zeros(SIZE, "float32")]
    f(a, *got)
    want = tex.testing.evaluate(outs, {A: a})
    for name, g, w in zip(("loss", "grad"), got, want):
        np.testing.assert_allclose(g, w, rtol=1e-3, atol=1e-4,
                                   err_msg=f"{family} n={n}: {name} differs from evaluate")
    return {"seconds": seconds} if timed else {"peak_bytes": peak}


def exponent(rows: list[dict], key: Callable[[dict], float]) -> float | None:
    """Growth exponent between the two largest sizes."""
    if len(rows) < 2:
        return None
    a, b = rows[-2], rows[-1]
    ya, yb = key(a), key(b)
    if ya <= 0 or yb <= 0:
        return None
    return math.log(yb / ya) / math.log(b["n"] / a["n"])


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--quick", action="store_true", help="tiny sizes, checks only")
    parser.add_argument("--only", nargs="+", choices=sorted(FAMILIES), default=None)
    parser.add_argument("--repeat", type=int, default=3,
                        help="timed runs per size (fresh program each); the minimum is kept")
    parser.add_argument("--max-n", type=int, default=None,
                        help="skip the sizes above this (to compare with a slower version)")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    failed = False
    results = []
    for family in args.only or FAMILIES:
        _, scheduler, sizes, quick_sizes = FAMILIES[family]
        rows: list[dict] = []
        print(f"\n### {family} ({scheduler.__name__} schedule)\n")
        print("| n | " + " | ".join(f"{p} s" for p in PHASES) + " | peak MB |")
        print("|---|" + "---|" * (len(PHASES) + 1))
        for n in (quick_sizes if args.quick else sizes):
            if args.max_n is not None and n > args.max_n:
                continue
            try:
                runs = [run_once(family, n, timed=True)["seconds"]
                        for _ in range(1 if args.quick else max(1, args.repeat))]
                row = {"n": n, "seconds": {p: min(r[p] for r in runs) for p in PHASES},
                       **run_once(family, n, timed=False)}
            except Exception:  # noqa: BLE001 - reported, the other sizes still run
                failed = True
                print(f"| {n} | ERROR |")
                traceback.print_exc()
                break
            rows.append(row)
            cells = " | ".join(f"{row['seconds'][p]:.3f}" for p in PHASES)
            print(f"| {n} | {cells} | {row['peak_bytes'] / 1e6:.1f} |", flush=True)
        slopes = {p: exponent(rows, lambda r, p=p: r["seconds"][p]) for p in PHASES}
        slopes["peak"] = exponent(rows, lambda r: r["peak_bytes"])
        print("| growth exponent | " + " | ".join(
            "-" if slopes[k] is None else f"{slopes[k]:.2f}" for k in (*PHASES, "peak")) + " |")
        results.append({"name": family, "schedule": scheduler.__name__, "rows": rows,
                        "growth_exponent": slopes})
    write_results(args.output, "scaling", {"quick": args.quick}, results)
    if failed:
        print("ERROR: a check failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
