"""Golden files for generated code: any change in what tex generates is a reviewable diff.

For every gradient of ``test_autodiff_ops.py``'s op list (small shapes) and every
WORKLOADS.md workload (forward and gradient, benchmark shapes), ``tests/golden/`` holds:

* the printed program (the gradient DAG ``differentiate`` built);
* the lowered loop nest with the default schedule and with ``auto_schedule``;
* a hash of the LLVM IR each of the two compiles to (unoptimized, triple and data layout
  left out: the IR text itself would be megabytes).

Scheduling and code generation depend on the machine (vector width, cores, caches), so the
files are made for one fixed machine, ``GOLDEN_CPU``/``GOLDEN_HOST`` (a 2-core AVX2+FMA
x86-64), whatever the host: they are byte-identical on every machine and in CI.

The IR text is llvmlite's printing of what tex builds, so a new llvmlite version may
change the hashes alone (the loop nests stay): regenerate them then, and say so.

A refactoring must leave every file unchanged. A change meant to alter generated code
regenerates them with ``TEX_UPDATE_GOLDEN=1 python -m pytest tests/test_golden.py`` and the
commit shows the diff (as tinygrad's process replay does for its kernels).
"""
from __future__ import annotations

import hashlib
import re
import sys
from pathlib import Path

import numpy as np
import pytest

import tex
from tex.codegen import CodegenOptions, HostTarget, emit_llvm
from tex.ir import format_program
from tex.lower import LoweredFunc
from tex.lower.legalize import legalize
from tex.schedule import auto_schedule, create_schedule
from tex.target import CPUInfo

from test_autodiff_ops import CASES, Case, make_inputs, seed_of

sys.path.insert(0, str(Path(__file__).parent.parent / "benchmarks"))
import workloads  # noqa: E402  (benchmarks/ is not a package)

GOLDEN_CPU = CPUInfo("golden-avx2", vector_bits=256, cores=2, l1d_bytes=32 * 1024,
                     l2_bytes=512 * 1024, l3_bytes=16 * 1024 * 1024, fma=True)
GOLDEN_HOST = HostTarget("x86_64-unknown-linux-gnu", "golden-avx2", "+avx,+avx2,+fma",
                         data_layout="", vector_bits=256)


def slug(name: str) -> str:
    """A file name for a case id: ``add-(3, 1, 4)-()`` -> ``add-3_1_4-0d``."""
    text = re.sub(r"[^A-Za-z0-9_.+-]+", "_", name.replace("()", "0d"))
    return re.sub(r"_*-_*", "-", text).strip("_")


def ir_hash(func: LoweredFunc) -> str:
    """sha256 of the LLVM IR ``tex.build`` would compile ``func`` to, on ``GOLDEN_HOST``;
    the triple and data layout lines are left out."""
    text = emit_llvm(legalize(func, "llvm"), CodegenOptions(), GOLDEN_HOST)[0]
    kept = [line for line in text.splitlines()
            if not line.startswith(("target triple", "target datalayout", "; ModuleID"))]
    return hashlib.sha256("\n".join(kept).encode()).hexdigest()[:16]


def report(title: str, outputs: list[tex.Tensor], args: list[tex.Tensor]) -> str:
    """The golden text of one program: printed DAG, two loop nests, two IR hashes."""
    args = list(dict.fromkeys(args))  # a gradient may be its head: pass it once
    parts = [f"# {title}", "", "## program", format_program(*outputs)]
    hashes = []
    for name, sch in (("default schedule", create_schedule([o.op for o in outputs])),
                      ("auto_schedule", auto_schedule(outputs, GOLDEN_CPU))):
        func = tex.lower(sch, args)
        parts += ["", f"## lowered: {name}", str(func).rstrip("\n")]
        hashes.append(f"{name}: {ir_hash(func)}")
    parts += ["", "## llvm ir sha256", *hashes]
    return "\n".join(parts) + "\n"


def test_case_file_names_are_unique() -> None:
    names = [slug(c.id) for c in CASES]
    assert len(names) == len(set(names))


@pytest.mark.parametrize("case_", CASES, ids=[c.id for c in CASES])
def test_autodiff_op_gradient(case_: Case, golden) -> None:
    holders, _ = make_inputs(case_.inputs, np.random.default_rng(seed_of(case_.id)))
    out = case_.build(*holders)
    wrt = [h for h, i in zip(holders, case_.inputs) if i.diff]
    head = tex.placeholder(out.shape, out.dtype, name="head")
    grads = list(tex.differentiate(out, wrt, head=head))
    text = report(f"gradient of test_autodiff_ops case {case_.id!r} with respect to "
                  + ", ".join(w.name for w in wrt), grads, [*holders, head, *grads])
    golden(f"autodiff/{slug(case_.id)}.txt", text)


@pytest.mark.parametrize("name", list(workloads.WORKLOADS))
def test_workload(name: str, golden) -> None:
    w = workloads.WORKLOADS[name]()
    grads = list(tex.differentiate(w.loss, w.wrt))
    forward = report(f"workload {name}: forward", [w.forward], [*w.inputs, w.forward])
    gradient = report(f"workload {name}: loss and gradients with respect to "
                      + ", ".join(t.name for t in w.wrt),
                      [w.loss, *grads], [*w.placeholders, w.loss, *grads])
    golden(f"workloads/{name}.txt", forward + "\n" + gradient)
