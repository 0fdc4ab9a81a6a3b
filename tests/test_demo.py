"""The demo and the README example run and check themselves."""
import re
from pathlib import Path

from tex.__main__ import main

ROOT = Path(__file__).resolve().parent.parent


def test_demo_runs(capsys, tmp_path):
    dot = tmp_path / "dag.dot"
    assert main(["demo", "--out", str(dot)]) == 0
    out = capsys.readouterr().out
    assert "XW[i, j] = sum(X[i, k] * W[j, k], k in [0, 256))" in out  # the program
    assert "W_grad" in out and "B_grad" in out  # the gradient expressions
    assert "func dense_ce_grad(" in out and "parallel for" in out  # the loop nest
    for line in ("  L: max |tex - numpy|", " dW: max |tex - numpy|", " dB: max |tex - numpy|"):
        assert line in out and "MISMATCH" not in out
    assert "loss + gradients  : tex" in out and "numpy" in out
    assert [f"[{k}/6] done in" in out for k in range(1, 7)] == [True] * 6  # progress lines
    assert f"the forward+backward DAG: {dot}" in out
    assert "OK: demo finished" in out
    text = dot.read_text()
    assert text.startswith('digraph "dense_cross_entropy"') and "#fde3c8" in text


def test_demo_picture_is_svg_or_dot_text(capsys, tmp_path, monkeypatch):
    """Without Graphviz the picture falls back to DOT text next to the requested .svg."""
    from tex.demo import _save_picture, build_model
    from tex.viz import find_dot

    m = build_model(n=2, d_in=3, classes=2)
    svg = tmp_path / "dag.svg"
    got = _save_picture([m["L"]], str(svg))
    if find_dot() is None:
        assert got == tmp_path / "dag.dot"
    else:
        assert got == svg and "<svg" in svg.read_text()
    monkeypatch.setenv("TEX_DOT", "none")
    got = _save_picture([m["L"]], str(tmp_path / "other.svg"))
    assert got == tmp_path / "other.dot" and got.read_text().startswith("digraph")


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
