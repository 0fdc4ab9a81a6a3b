"""Every tutorial script runs to completion and prints something.

Each ``tutorials/*.py`` runs in a fresh interpreter (``sys.executable``) from the repository
root with ``TEX_TUTORIAL_SMALL=1``, which a tutorial may read to pick small sizes; each must
finish in a few seconds.
"""
from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
TUTORIALS = sorted((ROOT / "tutorials").glob("*.py"))
TIMEOUT_S = 120  # generous for slow CI machines; the scripts take a few seconds


def test_tutorials_exist():
    assert TUTORIALS, f"no tutorial scripts under {ROOT / 'tutorials'}"


@pytest.mark.parametrize("script", TUTORIALS, ids=[p.name for p in TUTORIALS])
def test_tutorial_runs(script: Path):
    env = dict(os.environ, TEX_TUTORIAL_SMALL="1")
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(ROOT), env.get("PYTHONPATH")]))
    proc = subprocess.run([sys.executable, str(script)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=TIMEOUT_S)
    assert proc.returncode == 0, (
        f"{script.name} exited with status {proc.returncode}\n"
        f"--- stdout ---\n{proc.stdout[-4000:]}\n--- stderr ---\n{proc.stderr[-4000:]}")
    assert proc.stdout.strip(), f"{script.name} printed nothing"
