"""Splitting one module's LLVM IR text into parts that LLVM optimizes and compiles apart.

A large compiled function is one entry plus many outlined functions (``parallel.py``: loop
nests, parallel bodies and their wrappers) that only call each other: LLVM's work on them is
independent, so parts of the module can be optimized and turned into object code in
separate processes (``tex.codegen.jobs``), and the objects loaded together into one engine.

``split_text(text, parts)`` places the entry (the first definition) and every ``noinline``
function (outlined nests, parallel bodies and their wrappers, the bounds-check report)
once: in module order, cut into at most ``parts`` contiguous runs of about equal size
(characters of IR text), the entry in the first. Every other function (vector math
helpers, ``ipow``: what LLVM may inline) is *attached*: copied, internal, into each
part that uses it, so that splitting never keeps LLVM from inlining it. Each part's text is
the module header, every external declaration of the module, a declaration for each
function placed in another part that it refers to, its own definitions and the module's
metadata (branch weights). A function another part refers to loses ``internal`` linkage in
its own part (the object exports it; names are unique within the module, and each kernel's
objects go into an engine of their own, so they never clash); the others stay internal.

A module can also go out while it is emitted (``tex.codegen.llvm``): ``part_text`` makes a
part of the functions emitted whole so far (each exported, as its callers come later), and
``split_text(text, parts, placed)`` splits the rest of the finished module, declaring the
functions those parts placed.

The input is llvmlite's rendering: a header, then top-level ``declare`` lines and ``define``
blocks (``define ...`` line, ``{`` ... ``}``), then metadata lines. Text of any other shape
(global variables, attribute groups, names with escapes) is not split: ``split_text``
returns None and the caller compiles the module whole.
"""
from __future__ import annotations

import re
from dataclasses import dataclass

__all__ = ["Split", "split_text", "part_text", "declaration"]

# a global name as llvmlite prints it: @"quoted" or @plain
_GLOBAL = re.compile(r'@("[^"\\]*"|[-\w.$]+)')
_DEFINE = re.compile(r"define (?:internal |private )?")


@dataclass(frozen=True)
class Split:
    """The parts of a split module: their texts, and the functions each exports or keeps
    (the copies of attached functions aside)."""

    texts: tuple[str, ...]
    defined: tuple[frozenset[str], ...]

    @property
    def all_defined(self) -> frozenset[str]:
        """The functions some part defines (never external symbols of the process)."""
        return frozenset().union(*self.defined)


@dataclass
class _Function:
    """One function definition of the module text."""

    name: str
    define: str  # its ``define ...`` line
    body: str  # the lines after it, ``{`` to ``}``
    refs: frozenset[str]  # the global names it refers to (itself aside)


def _declaration(define: str) -> str:
    """The ``declare`` line of the function whose ``define`` line is ``define``."""
    return _DEFINE.sub("declare ", define, count=1)


def _name(token: str) -> str:
    """The name of a global written ``"name"`` or ``name``."""
    return token[1:-1] if token.startswith('"') else token


def _parse(text: str) -> tuple[list[str], list[str], list[_Function], list[str]] | None:
    """The header lines, declaration lines, function definitions and metadata lines of
    ``text``; None when it holds anything else at top level."""
    lines = text.split("\n")
    header: list[str] = []
    declares: list[str] = []
    functions: list[_Function] = []
    metadata: list[str] = []
    k = 0
    while k < len(lines) and not lines[k].startswith(("declare ", "define ")):
        line = lines[k]
        if line and not line.startswith(("; ModuleID", "target ", "source_filename")):
            return None
        header.append(line)
        k += 1
    while k < len(lines):
        line = lines[k]
        if line.startswith("declare "):
            declares.append(line)
            k += 1
        elif line.startswith("define "):
            m = _GLOBAL.search(line)
            if m is None or "\\" in line:
                return None
            end = k + 1  # llvmlite ends every definition with a line "}"
            while end < len(lines) and lines[end] != "}":
                if lines[end].startswith(("define ", "declare ")):
                    return None
                end += 1
            if end == len(lines):
                return None
            body = "\n".join(lines[k + 1:end + 1])
            name = _name(m.group(1))
            refs = frozenset(_name(t) for t in _GLOBAL.findall(body)) - {name}
            functions.append(_Function(name, line, body, refs))
            k = end + 1
        elif line.startswith("!"):
            metadata.append(line)
            k += 1
        elif not line.strip():
            k += 1
        else:
            return None  # a global variable, attributes: keep the module whole
    return header, declares, functions, metadata


def _cuts(sizes: list[int], parts: int) -> list[int]:
    """Start indices of at most ``parts`` contiguous runs of about equal total size."""
    total = sum(sizes)
    starts = [0]
    acc = 0
    for i, n in enumerate(sizes):
        if acc >= total * len(starts) / parts and i > starts[-1] and len(starts) < parts:
            starts.append(i)
        acc += n
    return starts


def _attached(f: _Function, entry: str) -> bool:
    """Whether ``f`` goes with its callers rather than in a part of its own: every function
    LLVM may inline (vector math helpers, ``ipow``, parallel-loop wrappers) is copied,
    internal, into each part that uses it, so splitting never keeps LLVM from inlining
    it; the entry and the ``noinline`` outlined functions are placed once."""
    return f.name != entry and "noinline" not in f.define.rsplit(")", 1)[-1].split()


def _closure(names: set[str], by_name: dict[str, _Function], attached: set[str]
             ) -> set[str]:
    """``names`` and the attached functions they use, directly or through each other."""
    out = set(names)
    stack = list(names)
    while stack:
        for r in by_name[stack.pop()].refs:
            if r in attached and r not in out:
                out.add(r)
                stack.append(r)
    return out


def _render(parsed: tuple[list[str], list[str], list[_Function], list[str]],
            names: set[str], foreign: set[str], exported: set[str]) -> str:
    """The text of the part holding the functions ``names``: the header, the declarations,
    one for each function of ``foreign`` it refers to, its definitions (those in
    ``exported`` without ``internal``), the metadata."""
    header, declares, functions, metadata = parsed
    by_name = {f.name: f for f in functions}
    out = [*header, *declares]
    refs = sorted({r for n in names for r in by_name[n].refs if r in foreign})
    out += [_declaration(by_name[r].define) for r in refs]
    for f in functions:
        if f.name in names:
            define = _DEFINE.sub("define ", f.define, count=1) if f.name in exported \
                else f.define
            out += ["", define, f.body]
    out += metadata
    return "\n".join(out) + "\n"


def split_text(text: str, parts: int, placed: frozenset[str] = frozenset()) -> Split | None:
    """``text`` (one module, as llvmlite prints it) in at most ``parts`` parts (see the
    module docstring); None when it cannot be split or has fewer than two functions.

    ``placed``: functions some part compiled apart already holds (``part_text``): they are
    placed in no part here, and a part calling one declares it. With ``placed``, one part
    is a split too (the rest of a module streamed out part by part)."""
    parsed = _parse(text)
    if parsed is None:
        return None
    functions = parsed[2]
    if parts < 1 or not functions:
        return None
    entry = functions[0].name
    attached = {f.name for f in functions if _attached(f, entry)}
    roots = [f for f in functions if f.name not in attached and f.name not in placed]
    starts = _cuts([len(f.body) for f in roots], parts) if roots else []
    if len(starts) < (1 if placed else 2):
        return None
    runs = [roots[a:b] for a, b in zip(starts, [*starts[1:], len(roots)])]
    part_of = {f.name: p for p, run in enumerate(runs) for f in run}
    part_of.update((name, -1) for name in placed)  # a part of no index here
    by_name = {f.name: f for f in functions}
    # each part's functions: its roots and the attached functions they use
    members = [_closure({f.name for f in run}, by_name, attached) for run in runs]
    # the roots some other part calls (or passes to GOMP_parallel)
    exported = {r for p, names in enumerate(members) for n in names for r in by_name[n].refs
                if part_of.get(r, p) != p}
    texts = [_render(parsed, names, {r for r, q in part_of.items() if q != p}, exported)
             for p, names in enumerate(members)]
    return Split(tuple(texts), tuple(frozenset(f.name for f in run) for run in runs))


def part_text(text: str, place: frozenset[str]) -> str | None:
    """One part of a module still being emitted: ``text`` holds the module's declarations
    so far (one for each function an earlier part placed), the functions of ``place`` and
    the attached functions emitted so far (the entry, unfinished, is left out); the part
    places ``place`` and copies the attached functions they use. Each function of
    ``place`` is exported: a function emitted later (its caller) may call it from another
    part. None when ``text`` cannot be split (see ``split_text``)."""
    parsed = _parse(text)
    if parsed is None:
        return None
    functions = parsed[2]
    by_name = {f.name: f for f in functions}
    if not place or not place <= by_name.keys():
        return None
    attached = {f.name for f in functions if f.name not in place and _attached(f, "")}
    members = _closure(set(place), by_name, attached)
    declared = {_name(m.group(1)) for line in parsed[1] if (m := _GLOBAL.search(line))}
    if any(r not in members and r not in declared for n in members for r in by_name[n].refs):
        return None  # it calls a function not emitted whole yet
    return _render(parsed, members, set(), set(place))


def declaration(function: str) -> str:
    """The ``declare`` line of a function whose definition (as llvmlite prints it) is
    ``function``."""
    return _declaration(function.split("\n", 1)[0])
