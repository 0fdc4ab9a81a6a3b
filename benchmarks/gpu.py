"""The WORKLOADS.md benchmarks on an NVIDIA GPU: tex (``auto_schedule(target="cuda")``)
against PyTorch CUDA eager, in one process, interleaved.

Per workload: ``fwd`` (the forward) and ``grad`` (one call computing the loss
``sum(forward * H)`` and every gradient, what ``loss.backward()`` after the forward
computes). tex's functions get device arrays (``__cuda_array_interface__``, no copies: torch
CUDA tensors when torch has CUDA, else buffers allocated through tex's own driver), so only
kernels and launch overhead are timed. Every variant is checked against NumPy (float64,
hand-written gradients) before anything is timed. Times are medians of ``--repeat``
repetitions of at least ``--min-time`` seconds, each call followed by a device
synchronization (a tex call synchronizes before returning; torch's calls are followed by
``torch.cuda.synchronize()``).

    python benchmarks/gpu.py                        # WORKLOADS.md shapes (needs a GPU)
    python benchmarks/gpu.py --only dense softmax --repeat 9
    python benchmarks/gpu.py --simulate             # no GPU: tiny shapes, run on tex's
                                                    # GPU simulator and checked, not timed
    python benchmarks/gpu.py --build-only           # no GPU: WORKLOADS.md shapes built,
                                                    # assembled by ptxas when installed

Prints a markdown table; JSON goes to ``benchmarks/results/gpu.json``. Exit status 1 when a
check fails, 2 when no GPU is available (without ``--simulate``).
"""
from __future__ import annotations

from bench_env import HERE, mean_call_time  # first: the threading environment and sys.path

# isort: split
import argparse
import statistics
import sys
import time
import traceback
from collections.abc import Callable
from pathlib import Path
from typing import Any

import frameworks
import numpy as np
import schedules

import tex
from tex.codegen.ptx import assemble
from tex.runtime.cuda import CudaFunction, get_driver
from tex.schedule import auto_schedule

from workloads import WORKLOADS, Workload, random_arrays, write_results

RTOL, ATOL = 2e-3, 2e-4


class DeviceBuffer:
    """Device memory from tex's driver, shaped like a NumPy array (when torch has no CUDA)."""

    def __init__(self, host: np.ndarray) -> None:
        self.driver = get_driver()
        self.shape, self.dtype = host.shape, host.dtype
        self.ptr = self.driver.alloc(host.nbytes)
        self.driver.to_device(self.ptr, host.ctypes.data, host.nbytes)
        self.__cuda_array_interface__ = {"shape": host.shape, "typestr": host.dtype.str,
                                         "data": (self.ptr, False), "version": 3}

    def numpy(self) -> np.ndarray:
        out = np.empty(self.shape, self.dtype)
        self.driver.to_host(out.ctypes.data, self.ptr, out.nbytes)
        return out

    def __del__(self) -> None:
        try:
            self.driver.free(self.ptr)
        except Exception:  # noqa: BLE001 - interpreter shutdown
            pass


def _torch_cuda() -> Any | None:
    torch = frameworks.torch_module()
    if torch is not None and torch.cuda.is_available():
        return torch
    return None


def _host(x: Any) -> np.ndarray:
    return x.numpy() if isinstance(x, DeviceBuffer) else frameworks.to_numpy(x)


def _close(label: str, got: Any, want: np.ndarray) -> None:
    want = np.asarray(want)
    scale = max(1.0, float(np.max(np.abs(want))) if want.size else 1.0)
    np.testing.assert_allclose(np.asarray(_host(got), np.float64).reshape(want.shape), want,
                               rtol=RTOL, atol=ATOL * scale, err_msg=f"{label} differs")


def build_tex(w: Workload) -> tuple[CudaFunction, CudaFunction, list[tex.Tensor], float]:
    """The auto-scheduled CUDA forward and gradient; the gradient's outputs; build time."""
    t0 = time.perf_counter()
    f_fwd = tex.build(auto_schedule([w.forward], target="cuda"), [*w.inputs, w.forward],
                      target="cuda", name=f"{w.name}_fwd")
    outs = [w.loss, *tex.differentiate(w.loss, w.wrt)]
    f_grad = tex.build(auto_schedule(outs, target="cuda"), [*w.placeholders, *outs],
                       target="cuda", name=f"{w.name}_grad")
    return f_fwd, f_grad, outs, time.perf_counter() - t0


def bench_one(name: str, args: argparse.Namespace, torch: Any | None) -> dict[str, Any]:
    w = WORKLOADS[name](small=args.simulate)
    arrays = random_arrays(w, seed=0)
    wide = {k: v.astype(np.float64) for k, v in arrays.items()}
    ref_fwd = w.numpy_forward(wide)
    ref_grads = w.numpy_grad(wide)
    ref_loss = np.asarray(np.sum(ref_fwd * wide["H"]))
    row: dict[str, Any] = {"name": name, "shapes": {t.name: list(t.shape) for t in w.inputs}}
    f_fwd, f_grad, outs, row["build_s"] = build_tex(w)
    row["kernels"] = {"fwd": len(f_fwd.program.kernels), "grad": len(f_grad.program.kernels)}
    if args.build_only:
        row["assembled"] = [assemble(f.get_source("ptx"), args.arch) is not None
                            for f in (f_fwd, f_grad)]
        return row

    if args.simulate:  # NumPy arrays through the simulator: checked, not timed
        y = np.empty(w.forward.shape, np.float32)
        f_fwd.simulate(*[arrays[t.name] for t in w.inputs], y)
        _close(f"{name} tex fwd", y, ref_fwd)
        bufs = [np.empty(t.shape, np.float32) for t in outs]
        f_grad.simulate(*[arrays[t.name] for t in w.placeholders], *bufs)
        for t, got, want in zip(outs, bufs, [ref_loss, *ref_grads]):
            _close(f"{name} tex {t.name}", got, want)
        row["checked"] = ["tex_fwd", "tex_grad"]
        return row

    if torch is not None:
        dev = {k: torch.from_numpy(v).cuda() for k, v in arrays.items()}

        def empty(shape: tuple[int, ...]) -> Any:
            return torch.empty(shape, dtype=torch.float32, device="cuda")
    else:
        dev = {k: DeviceBuffer(v) for k, v in arrays.items()}

        def empty(shape: tuple[int, ...]) -> Any:
            return DeviceBuffer(np.zeros(shape, np.float32))

    y = empty(w.forward.shape)
    fwd_args = [dev[t.name] for t in w.inputs] + [y]
    bufs = [empty(t.shape) for t in outs]
    grad_args = [dev[t.name] for t in w.placeholders] + bufs
    f_fwd(*fwd_args)
    _close(f"{name} tex fwd", y, ref_fwd)
    f_grad(*grad_args)
    for t, got, want in zip(outs, bufs, [ref_loss, *ref_grads]):
        _close(f"{name} tex {t.name}", got, want)
    variants: dict[str, Callable[[], Any]] = {
        "tex_fwd": lambda: f_fwd(*fwd_args), "tex_grad": lambda: f_grad(*grad_args)}

    if torch is not None:
        variants.update(torch_variants(torch, w, dev, ref_fwd, [ref_loss, *ref_grads]))
    row["checked"] = list(variants)
    sync = torch.cuda.synchronize if torch is not None else get_driver().synchronize
    times: dict[str, list[float]] = {k: [] for k in variants}
    for fn in variants.values():  # warm-up
        fn()
    for _ in range(args.repeat):
        for k, fn in variants.items():
            times[k].append(mean_call_time(fn, args.min_time, after=sync))
    row["ms"] = {k: statistics.median(v) * 1e3 for k, v in times.items()}
    return row


def torch_variants(torch: Any, w: Workload, dev: dict[str, Any], ref_fwd: np.ndarray,
                   ref_grad: list[np.ndarray]) -> dict[str, Callable[[], Any]]:
    """PyTorch CUDA eager: the forward and loss.backward(), checked."""
    build = schedules.TORCH[w.name]
    names = [t.name for t in w.inputs]
    wrt = [t.name for t in w.wrt]

    def fwd() -> Any:
        with torch.no_grad():
            return build(w, {n: dev[n] for n in names})

    def grad() -> list[Any]:
        leaves = {n: dev[n].detach().requires_grad_(n in wrt) for n in names}
        loss = (build(w, leaves) * dev["H"]).sum()
        loss.backward()
        return [loss, *[leaves[n].grad for n in wrt]]

    _close(f"{w.name} torch fwd", fwd(), ref_fwd)
    for n, got, want in zip(["loss", *wrt], grad(), ref_grad):
        _close(f"{w.name} torch {n}", got, want)
    return {"torch_fwd": fwd, "torch_grad": grad}


def table(rows: list[dict[str, Any]], device: str) -> str:
    lines = [f"GPU: {device}", "",
             "| workload | tex fwd ms | tex grad ms | torch fwd ms | torch grad ms "
             "| tex/torch fwd | tex/torch grad | tex kernels (fwd, grad) |",
             "|---|---|---|---|---|---|---|---|"]
    for r in rows:
        ms: dict[str, float] = r.get("ms", {})
        cell = {k: f"{v:.3f}" for k, v in ms.items()}.get
        ratio = {k: f"{ms[f'tex_{k}'] / ms[f'torch_{k}']:.2f}" for k in ("fwd", "grad")
                 if f"tex_{k}" in ms and f"torch_{k}" in ms}.get
        kern = r.get("kernels", {})
        lines.append(f"| {r['name']} | {cell('tex_fwd', '-')} | {cell('tex_grad', '-')} | "
                     f"{cell('torch_fwd', '-')} | {cell('torch_grad', '-')} | "
                     f"{ratio('fwd', '-')} | {ratio('grad', '-')} | "
                     f"{kern.get('fwd', '-')}, {kern.get('grad', '-')} |"
                     + (f" ERROR: {r['error']}" if "error" in r else ""))
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", nargs="+", choices=sorted(WORKLOADS), default=None)
    ap.add_argument("--repeat", type=int, default=5)
    ap.add_argument("--min-time", type=float, default=0.2)
    ap.add_argument("--simulate", action="store_true",
                    help="tiny shapes on tex's GPU simulator: checks only, no GPU needed")
    ap.add_argument("--build-only", action="store_true",
                    help="WORKLOADS.md shapes built (and assembled by ptxas), not run")
    ap.add_argument("--arch", default="sm_90", help="ptxas -arch for --build-only")
    ap.add_argument("--no-torch", action="store_true")
    ap.add_argument("--output", type=Path, default=HERE / "results" / "gpu.json")
    args = ap.parse_args(argv)
    names = args.only or list(WORKLOADS)
    torch = None
    device = "simulated (tex.runtime.gpusim)" if args.simulate else "none (--build-only)"
    if not (args.simulate or args.build_only):
        try:
            driver = get_driver()
        except RuntimeError as err:
            print(f"no GPU: {err}\n(run with --simulate to check the kernels without one)")
            return 2
        device = f"{driver.name} (sm_{driver.capability[0]}{driver.capability[1]}, " \
                 f"{driver.sm_count} SMs, {driver.binding} binding)"
        torch = None if args.no_torch else _torch_cuda()
    rows, failed = [], False
    for name in names:
        print(f"[gpu] {name} ...", flush=True)
        try:
            rows.append(bench_one(name, args, torch))
        except Exception as err:  # noqa: BLE001 - reported, next workload
            traceback.print_exc()
            rows.append({"name": name, "error": f"{type(err).__name__}: {err}"})
            failed = True
    print(table(rows, device))
    write_results(args.output, "gpu", {"device": device, "simulate": args.simulate,
                                       "build_only": args.build_only,
                                       "torch": None if torch is None else torch.__version__},
                  rows)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
