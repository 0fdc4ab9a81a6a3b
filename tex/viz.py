"""Pictures of tensor DAGs: ``save`` renders ``tex.to_dot`` with Graphviz, and ``DAG``
shows as SVG in Jupyter.

Graphviz's ``dot`` (https://graphviz.org) is optional: found on ``PATH`` or through
``$TEX_DOT`` (a path, or ``none`` to disable). Without it ``save`` writes the DOT text
(next to the requested path, with the ``.dot`` suffix) and says so in its return value, and
``DAG`` displays as HTML text.
"""
from __future__ import annotations

import html
import os
import shutil
import subprocess
from pathlib import Path

from . import debug
from .ir.graph import to_dot
from .ir.printer import format_program
from .ir.tensor import Tensor

__all__ = ["find_dot", "render", "save", "DAG", "FORMATS"]

# suffix -> Graphviz output format
FORMATS: dict[str, str] = {".svg": "svg", ".png": "png", ".pdf": "pdf"}
_TIMEOUT_S = 60


def find_dot() -> str | None:
    """Path of Graphviz's ``dot``: ``$TEX_DOT`` (``none`` disables), else ``PATH``."""
    env = debug.env("TEX_DOT")
    if env is not None:
        return None if env.strip().lower() in ("", "none", "0") else env
    return shutil.which("dot")


def render(dot_text: str, fmt: str = "svg") -> bytes:
    """``dot_text`` rendered by Graphviz in ``fmt`` (svg, png, pdf).

    Raises
    ------
    RuntimeError
        No ``dot`` found, or Graphviz rejected the text (its message included).
    """
    dot = find_dot()
    if dot is None:
        raise RuntimeError("Graphviz's 'dot' was not found (install graphviz, or set TEX_DOT "
                           "to its path); tex.to_dot gives the DOT text")
    try:
        proc = subprocess.run([dot, f"-T{fmt}"], input=dot_text.encode(), capture_output=True,
                              timeout=_TIMEOUT_S, check=False)
    except (OSError, subprocess.TimeoutExpired) as err:
        raise RuntimeError(f"running Graphviz ({dot}) failed: {err}") from None
    if proc.returncode != 0:
        raise RuntimeError(f"Graphviz ({dot} -T{fmt}) failed: "
                           f"{proc.stderr.decode(errors='replace').strip()}")
    return proc.stdout


def _tensors(tensors: Tensor | list[Tensor] | tuple[Tensor, ...], fn: str) -> tuple[Tensor, ...]:
    ts = (tensors,) if isinstance(tensors, Tensor) else tuple(tensors)
    if not ts or not all(isinstance(t, Tensor) for t in ts):
        raise TypeError(f"{fn}: expected a Tensor or a non-empty list of Tensors, got "
                        f"{tensors!r}")
    return ts


def save(tensors: Tensor | list[Tensor] | tuple[Tensor, ...], path: str | os.PathLike[str],
         name: str = "tex") -> Path:
    """Write a picture of the DAG ``tensors`` depend on; returns the path written.

    The suffix of ``path`` picks the format: ``.svg``, ``.png`` or ``.pdf`` through
    Graphviz, ``.dot`` for the DOT text. When Graphviz is missing, the DOT text is written
    to ``path`` with its suffix replaced by ``.dot``, and that path is returned.

    Raises
    ------
    ValueError
        An unknown suffix.
    RuntimeError
        Graphviz is installed but failed.
    """
    ts = _tensors(tensors, "tex.viz.save")
    out = Path(path)
    suffix = out.suffix.lower()
    if suffix != ".dot" and suffix not in FORMATS:
        raise ValueError(f"tex.viz.save: unknown picture format {out.suffix!r} in {str(out)!r}; "
                         f"expected one of {', '.join(['.dot', *FORMATS])}")
    text = to_dot(*ts, name=name)
    if suffix != ".dot" and find_dot() is not None:
        out.write_bytes(render(text, FORMATS[suffix]))
        return out
    out = out.with_suffix(".dot")
    out.write_text(text)
    return out


class DAG:
    """The DAG of ``tensors`` for notebooks: SVG through Graphviz (``_repr_svg_``), the
    program text otherwise (``_repr_html_``); ``str`` is the DOT text."""

    def __init__(self, *tensors: Tensor, name: str = "tex") -> None:
        self.tensors = _tensors(tensors, "tex.viz.DAG")
        self.name = name

    def to_dot(self) -> str:
        return to_dot(*self.tensors, name=self.name)

    def _repr_svg_(self) -> str | None:
        if find_dot() is None:
            return None  # Jupyter falls back to _repr_html_
        return render(self.to_dot(), "svg").decode()

    def _repr_html_(self) -> str:
        return f"<pre>{html.escape(format_program(*self.tensors))}</pre>"

    def __str__(self) -> str:
        return self.to_dot()

    def __repr__(self) -> str:
        return f"DAG({', '.join(t.name for t in self.tensors)})"
