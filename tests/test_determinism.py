"""Determinism: the same program prints the same text every time, in every process.

For four programs (a dense layer with softmax cross-entropy, a strided convolution, a
select with floordiv/floormod indices whose gradient carries sympy-simplified conditions,
a max pool) the texts compared byte for byte are: the forward equations, the gradient's
equations (``tex.differentiate``), the lowered loop nest of the auto-scheduled gradient
(``tex.lower``), the optimized LLVM IR (``get_source("ll")``) and the PTX
(``target="cuda"``). Across processes they are compared by sha256: this file run as a
script prints the digests, once with ``PYTHONHASHSEED=0`` and once with ``12345``, so
that any iteration over sets or dicts of hashed objects (strings, sympy symbols) would
come out in another order; within one process, building again after clearing the compile
cache must give the same texts as well.
"""
from __future__ import annotations

import difflib
import hashlib
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

import tex
from tex import topi
from tex.ir.printer import format_program
from tex.runtime.diskcache import DISK
from tex.runtime.jit import clear_cache
from tex.schedule import auto_schedule

ROOT = Path(__file__).resolve().parent.parent
KINDS = ("forward", "gradient", "lower", "ll", "ptx")
SEEDS = ("0", "12345")


def _texts(name: str, loss: tex.Tensor, wrt: list[tex.Tensor]) -> dict[str, str]:
    grads = list(tex.differentiate(loss, wrt))
    outs = [loss, *grads]
    f = tex.build(outs, name=name)
    return {
        f"{name}.forward": format_program(loss),
        f"{name}.gradient": format_program(*grads),
        f"{name}.lower": str(tex.lower(auto_schedule(outs), f.args, name=name)),
        f"{name}.ll": f.get_source("ll"),
        f"{name}.ptx": tex.build(outs, target="cuda", name=name).get_source("ptx"),
    }


def program_texts() -> dict[str, str]:
    """Every text of every program, built from scratch (new tensors)."""
    out: dict[str, str] = {}
    X = tex.placeholder((8, 32), name="X")
    W = tex.placeholder((10, 32), name="W")
    B = tex.placeholder((10,), name="B")
    T = tex.placeholder((8, 10), name="T")
    out |= _texts("dense_ce", topi.nn.cross_entropy_with_logits(topi.nn.dense(X, W, B), T),
                  [W, B])

    D = tex.placeholder((1, 2, 7, 7), name="D")
    K = tex.placeholder((3, 2, 3, 3), name="K")
    C = topi.nn.conv2d(D, K, 2, 1)
    out |= _texts("conv", topi.sum(C * C), [D, K])

    A = tex.placeholder((12, 10), name="A")
    E = tex.compute((6, 10), lambda i, j: tex.if_then_else(
        tex.all(i * 2 + j % 3 < 11, j // 2 >= 1),
        A[tex.floordiv(i * 5 + j, 5), tex.floormod(j + 3, 10)], 0.0) * A[i * 2, j], name="E")
    out |= _texts("cond", topi.sum(E), [A])

    P = tex.placeholder((2, 3, 8, 8), name="P")
    M = topi.nn.pool2d(P, (3, 3), (2, 2), (1, 1), (1, 1, 1, 1), "max")
    out |= _texts("maxpool", topi.sum(M * M), [P])
    return out


def digests(texts: dict[str, str]) -> dict[str, str]:
    return {k: hashlib.sha256(v.encode()).hexdigest() for k, v in texts.items()}


def _run_with_seeds() -> dict[str, dict]:
    """Run this file as a script under each hash seed (concurrently); seed -> its report."""
    procs = {}
    for seed in SEEDS:
        # TEX_CACHE_DIR=none: each process compiles (a disk hit would hide a difference)
        env = dict(os.environ, PYTHONHASHSEED=seed, TEX_CACHE_DIR="none",
                   PYTHONPATH=os.pathsep.join([str(ROOT), os.environ.get("PYTHONPATH", "")]))
        procs[seed] = subprocess.Popen([sys.executable, __file__], env=env, cwd=ROOT,
                                       stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                       text=True)
    reports = {}
    for seed, proc in procs.items():
        out, err = proc.communicate(timeout=300)
        assert proc.returncode == 0, f"PYTHONHASHSEED={seed}: exit {proc.returncode}\n{err}"
        reports[seed] = json.loads(out)
    return reports


@pytest.fixture(scope="module")
def reports() -> dict[str, dict]:
    return _run_with_seeds()


def _check_content(texts: dict[str, str]) -> None:
    """The texts are the real thing (not empty or error strings)."""
    assert sorted(texts) == sorted(f"{p}.{k}" for p in ("dense_ce", "conv", "cond", "maxpool")
                                   for k in KINDS)
    for name, text in texts.items():
        kind = name.split(".")[1]
        marker = {"forward": "placeholder(", "gradient": "_grad", "lower": "func ",
                  "ll": "define void @", "ptx": ".entry "}[kind]
        assert marker in text, (name, text[:300])
    # the gradient of the select has simplified floormod conditions
    assert "% 10" in texts["cond.gradient"] and "where=" in texts["cond.gradient"]


def test_same_texts_across_processes_and_hash_seeds(reports: dict[str, dict]) -> None:
    a, b = (reports[s] for s in SEEDS)
    assert a["str_hash"] != b["str_hash"], "the hash seeds did not take effect"
    assert len(a["digests"]) == 4 * len(KINDS)
    differ = sorted(k for k in a["digests"] if a["digests"][k] != b["digests"].get(k))
    assert differ == [], f"texts differ between PYTHONHASHSEED={SEEDS[0]} and {SEEDS[1]}"


def test_same_texts_when_built_again_in_this_process(reports: dict[str, dict],
                                                    monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(DISK, "directory", None)  # compile again, not load from disk
    first = program_texts()
    _check_content(first)
    clear_cache()
    second = program_texts()
    for key in first:
        if first[key] != second[key]:
            diff = "\n".join(difflib.unified_diff(first[key].splitlines(),
                                                  second[key].splitlines(), lineterm="",
                                                  n=1))
            pytest.fail(f"{key} differs when built again:\n{diff[:4000]}")
    # and this process (its own hash seed, other tests run before) agrees with the others
    mine = digests(first)
    differ = sorted(k for k in mine if mine[k] != reports[SEEDS[0]]["digests"][k])
    assert differ == [], "texts differ between this process and a fresh one"


if __name__ == "__main__":
    json.dump({"digests": digests(program_texts()), "str_hash": hash("tex")}, sys.stdout)
