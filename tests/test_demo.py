"""The demo and the README example run and check themselves."""
import re
from pathlib import Path

from tex.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def test_demo_runs(capsys, tmp_path):
    dot = tmp_path / "dag.dot"
    assert main(["demo", "--dot", str(dot)]) == 0
    out = capsys.readouterr().out
    assert "T[i, j] = sum(X[i, k] * W[j, k], k in [0, 100))" in out
    assert "OK: demo finished" in out
    assert dot.read_text().startswith('digraph "dense"')


def test_readme_example_runs():
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```python\n(.*?)```", text, flags=re.S)
    assert blocks, "README.md has no python example"
    for code in blocks:
        exec(compile(code, "README.md", "exec"), {})


def test_readme_quick_start_has_two_commands():
    text = (ROOT / "README.md").read_text()
    section = text.split("## Quick start", 1)[1]
    block = re.search(r"```(?:sh|bash)\n(.*?)```", section, flags=re.S).group(1)
    commands = [line for line in block.splitlines() if line.strip()]
    assert len(commands) == 2
    assert "python -m tex demo" in commands[0]
    assert "pytest" in commands[1] and ".[test]" in commands[1]
