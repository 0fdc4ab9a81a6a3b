"""Run the WORKLOADS.md benchmarks: tex-compiled forward and gradient against NumPy (and
PyTorch when installed), in one process, interleaved.

For every workload:

* **tex forward**: the forward tensor built with the default schedule
  (``tex.build([forward])``), and with a hand schedule from ``schedules.py`` where one exists;
* **tex gradient**: one compiled function computing the loss ``sum(forward * H)`` and every
  gradient of ``wrt`` (what ``loss.backward()`` computes), default schedule and hand
  schedule;
* **NumPy**: the forward, and the forward plus hand-written gradients, from
  ``workloads.py``;
* **PyTorch** (CPU autograd, when importable): forward, and forward + ``backward()``.

Each repetition runs every variant once (interleaved, so a slow period of the machine hits
all of them), after a warm-up; a repetition around which two-thread scaling collapsed (the
second core taken away, checked with a small tex kernel) is dropped and run again. The
tables give medians of ``--repeat`` repetitions, the
gradient / forward ratio, and tex / NumPy and tex / torch ratios. Compile time is
``differentiate`` + schedule + ``build`` for the gradient, measured on the first (cold)
build. Every tex output is checked against NumPy before timing.

    python benchmarks/run.py                 # WORKLOADS.md shapes
    python benchmarks/run.py --quick         # tiny shapes, checks only (run by the tests)
    python benchmarks/run.py --only dense conv2d --repeat 9

JSON goes to ``benchmarks/results/run.json``.
"""
from __future__ import annotations

import os

# OpenBLAS workers spin after each call and steal the core tex runs on next (WORKLOADS.md)
os.environ.setdefault("OPENBLAS_THREAD_TIMEOUT", "1")
# and libgomp's idle threads spin for a while after each parallel loop of tex's
os.environ.setdefault("GOMP_SPINCOUNT", "10000")

import argparse  # noqa: E402
import statistics  # noqa: E402
import sys  # noqa: E402
import time  # noqa: E402
import traceback  # noqa: E402
from collections.abc import Callable  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import Any  # noqa: E402

import numpy as np  # noqa: E402

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
for p in (str(ROOT), str(HERE)):
    if p not in sys.path:
        sys.path.insert(0, p)

import schedules  # noqa: E402
from workloads import WORKLOADS, Workload, random_arrays, write_results  # noqa: E402

import tex  # noqa: E402
from tex.schedule import create_schedule  # noqa: E402

DEFAULT_OUTPUT = HERE / "results" / "run.json"
RTOL, ATOL = 2e-3, 2e-3

try:  # optional
    import torch
except ImportError:  # pragma: no cover - depends on the environment
    torch = None


class Variant:
    """One timed thing: ``fn()`` runs it once."""

    def __init__(self, name: str, fn: Callable[[], Any]) -> None:
        self.name = name
        self.fn = fn
        self.times: list[float] = []

    def time_once(self, min_time: float) -> None:
        """Run at least once and for ``min_time`` seconds; record the mean time per call."""
        n, start = 0, time.perf_counter()
        while True:
            self.fn()
            n += 1
            elapsed = time.perf_counter() - start
            if elapsed >= min_time:
                break
        self.times.append(elapsed / n)

    @property
    def median(self) -> float:
        return statistics.median(self.times)


class CoreProbe:
    """Two-thread scaling of a compute-bound tex kernel (WORKLOADS.md: the second core is
    sometimes unavailable for a while; repetitions around which it collapsed are dropped).
    """

    MIN_SCALING = 1.5
    _instance: CoreProbe | None = None

    def __init__(self) -> None:
        A = tex.placeholder((64,), name="A")
        k = tex.reduce_axis((0, 8192), name="k")
        T = tex.compute((64,), lambda i: tex.sum(tex.sin(A[i] + k.astype("float32")), axis=k),
                        name="probe")
        s = create_schedule(T.op)
        s[T].parallel(T.op.axis[0])
        with tex.debug.config(num_threads=1):
            self.one = tex.build(s, [A, T], name="probe1")
        with tex.debug.config(num_threads=2):
            self.two = tex.build(s, [A, T], name="probe2")
        self.a = np.zeros(64, np.float32)
        self.out = np.empty(64, np.float32)

    @classmethod
    def get(cls) -> CoreProbe:
        if cls._instance is None:
            cls._instance = cls()
        return cls._instance

    def scaling(self) -> float:
        """Time on one thread / time on two threads (about 2 when both cores are free)."""
        t1 = min(self._time(self.one) for _ in range(6))
        t2 = min(self._time(self.two) for _ in range(6))
        return t1 / t2

    def _time(self, f: Any) -> float:
        start = time.perf_counter()
        f(self.a, self.out)
        return time.perf_counter() - start


def _close(name: str, got: np.ndarray, want: np.ndarray) -> None:
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(got, want, rtol=RTOL, atol=ATOL * scale,
                               err_msg=f"{name} differs from NumPy")


def _tex_gradient(w: Workload, hand: bool) -> tuple[Any, list[tex.Tensor], float]:
    """Differentiate, schedule and build the gradient function; returns it, its output
    tensors (loss first) and the compile time."""
    t0 = time.perf_counter()
    grads = list(tex.differentiate(w.loss, w.wrt))
    outs = [w.loss, *grads]
    if hand:
        s = schedules.HAND[w.name].gradient(w, grads)
    else:
        s = create_schedule([t.op for t in outs])
    f = tex.build(s, [*w.placeholders, *outs], name=f"{w.name}_grad")
    return f, outs, time.perf_counter() - t0


def _tex_forward(w: Workload, hand: bool) -> Any:
    if hand:
        s = schedules.HAND[w.name].forward(w)
    else:
        s = create_schedule(w.forward.op)
    return tex.build(s, [*w.inputs, w.forward], name=f"{w.name}_fwd")


def bench_one(name: str, small: bool, repeat: int, min_time: float,
              timed: bool) -> dict[str, Any]:
    w = WORKLOADS[name](small=small)
    arrays = random_arrays(w, seed=0)
    ins = [arrays[t.name] for t in w.inputs]
    head = arrays["H"]
    wide = {k: v.astype(np.float64) for k, v in arrays.items()}
    ref_fwd = w.numpy_forward(wide)
    ref_grads = w.numpy_grad(wide)
    ref_loss = float(np.sum(ref_fwd * wide["H"]))

    row: dict[str, Any] = {"name": name, "shapes": {t.name: list(t.shape) for t in w.inputs},
                           "wrt": [t.name for t in w.wrt]}
    variants: list[Variant] = []
    has_hand = name in schedules.HAND

    for hand in ([False, True] if has_hand else [False]):
        tag = "hand" if hand else "default"
        f_fwd = _tex_forward(w, hand)
        out = np.empty(w.forward.shape, np.float32)
        f_fwd(*ins, out)
        _close(f"{name} tex forward ({tag})", out, ref_fwd)
        variants.append(Variant(f"tex_fwd_{tag}", lambda f=f_fwd, o=out: f(*ins, o)))

        f_grad, outs, compile_s = _tex_gradient(w, hand)
        bufs = [np.empty(t.shape, np.float32) for t in outs]
        f_grad(*ins, head, *bufs)
        _close(f"{name} tex loss ({tag})", bufs[0].reshape(()), np.asarray(ref_loss))
        for t, b, r in zip(w.wrt, bufs[1:], ref_grads):
            _close(f"{name} tex d{t.name} ({tag})", b, r)
        variants.append(Variant(f"tex_grad_{tag}",
                                lambda f=f_grad, b=bufs: f(*ins, head, *b)))
        row[f"compile_s_{tag}"] = compile_s

    variants.append(Variant("numpy_fwd", lambda: w.numpy_forward(arrays)))
    variants.append(Variant("numpy_grad", lambda: (w.numpy_forward(arrays),
                                                   w.numpy_grad(arrays))))
    if torch is not None:
        variants.extend(_torch_variants(w, arrays))

    if timed:
        for v in variants:  # warm-up
            v.time_once(0.0)
        probe = CoreProbe.get()
        dropped = 0
        done = 0
        scalings: list[float] = []
        while done < repeat:
            before = probe.scaling()
            for v in variants:
                v.time_once(min_time)
            after = probe.scaling()
            scalings.append(round(min(before, after), 2))
            if min(before, after) < CoreProbe.MIN_SCALING and dropped < 3 * repeat:
                # the second core was taken away around this repetition: drop it
                dropped += 1
                for v in variants:
                    v.times.pop()
                time.sleep(0.5)
                continue
            done += 1
        row["median_s"] = {v.name: v.median for v in variants}
        row["all_s"] = {v.name: v.times for v in variants}
        row["dropped_repetitions"] = dropped
        row["two_thread_scaling"] = scalings
    row["check"] = "ok"
    return row


def _torch_variants(w: Workload, arrays: dict[str, np.ndarray]) -> list[Variant]:
    """PyTorch autograd on the same data, when the workload has a torch formulation."""
    build = schedules.TORCH.get(w.name)
    if build is None or torch is None:
        return []
    tensors = {k: torch.from_numpy(v) for k, v in arrays.items()}
    fwd = build(w, tensors)

    def grad() -> None:
        leaves = {k: v.detach().requires_grad_(k in {t.name for t in w.wrt})
                  for k, v in tensors.items()}
        loss = (build(w, leaves) * leaves["H"]).sum()
        loss.backward()

    del fwd
    return [Variant("torch_fwd", lambda: build(w, tensors)), Variant("torch_grad", grad)]


def _ratio(a: float | None, b: float | None) -> str:
    return f"{a / b:.2f}" if a and b else "-"


def markdown(rows: list[dict[str, Any]]) -> str:
    head = ["workload", "tex fwd ms", "tex grad ms", "grad/fwd", "hand fwd ms",
            "hand grad ms", "numpy fwd ms", "numpy grad ms", "tex/numpy grad",
            "torch grad ms", "tex/torch grad", "compile s"]
    lines = ["| " + " | ".join(head) + " |", "|" + "---|" * len(head)]
    for r in rows:
        if "error" in r:
            lines.append(f"| {r['name']} | ERROR: {r['error']} |" + " |" * (len(head) - 2))
            continue
        m = r.get("median_s", {})

        def ms(key: str, m: dict = m) -> str:
            return f"{m[key] * 1e3:.3f}" if key in m else "-"

        best_grad = min((m[k] for k in ("tex_grad_default", "tex_grad_hand") if k in m),
                        default=None)
        cells = [r["name"], ms("tex_fwd_default"), ms("tex_grad_default"),
                 _ratio(m.get("tex_grad_default"), m.get("tex_fwd_default")),
                 ms("tex_fwd_hand"), ms("tex_grad_hand"), ms("numpy_fwd"), ms("numpy_grad"),
                 _ratio(best_grad, m.get("numpy_grad")), ms("torch_grad"),
                 _ratio(best_grad, m.get("torch_grad")),
                 f"{r.get('compile_s_default', 0):.2f}"]
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--quick", action="store_true",
                        help="tiny shapes; build and check every variant, no timing")
    parser.add_argument("--repeat", type=int, default=5, help="timed repetitions (median)")
    parser.add_argument("--min-time", type=float, default=0.05,
                        help="seconds per timed repetition of one variant")
    parser.add_argument("--only", nargs="+", choices=list(WORKLOADS), metavar="NAME")
    parser.add_argument("--output", type=Path, default=DEFAULT_OUTPUT)
    args = parser.parse_args(argv)
    rows: list[dict[str, Any]] = []
    failed = False
    for name in args.only or list(WORKLOADS):
        try:
            row = bench_one(name, args.quick, args.repeat, args.min_time, not args.quick)
        except Exception as exc:  # report it and go on with the other workloads
            failed = True
            traceback.print_exc()
            row = {"name": name, "error": f"{type(exc).__name__}: {exc}".splitlines()[0]}
        rows.append(row)
        print(f"  {name}: {'ERROR' if 'error' in row else 'done'}", flush=True)
    threads = tex.debug.current().num_threads or os.cpu_count()
    print(f"\ntex vs NumPy{' and PyTorch' if torch is not None else ''}, float32, "
          f"{threads} threads, medians of {args.repeat} interleaved repetitions\n")
    print(markdown(rows))
    write_results(args.output, "run", {"quick": args.quick, "repeat": args.repeat,
                                       "torch": getattr(torch, "__version__", None)}, rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
