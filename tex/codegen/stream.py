"""Streaming a module's finished functions to LLVM while the rest is still being emitted.

Emitting a large function's LLVM IR in Python (llvmlite) takes as long as a third of
LLVM's work on it, and once the entry function has emitted an outlined function
(``ModuleEmitter.on_outlined``), every function but the entry is finished. A ``Streamer``
then renders the functions finished since the last time and, once they hold
``CHUNK_INSTRUCTIONS`` instructions or more, makes them a part (``split.stream_part``: the
outlined ``noinline`` functions, all exported, with the inlinable helpers they use) and
hands it to a background thread (``jobs.Background``) that optimizes it and emits its
object code while Python emits the rest; a finished outlined function of more than
``MAX_STREAMED_INSTRUCTIONS`` stops the streaming (its part would hold up the end). Each
function is rendered once: ``whole_text`` puts the same strings together into the
module's text, as ``str(module)`` would.

``finish()`` stops the thread after the part under way: the parts it compiled and the
parts it did not (never started, or failed); ``placed`` names the functions the streamed
parts hold (the rest of the module is split around them: ``split_text(..., placed)``).
"""
from __future__ import annotations

import llvmlite.ir as ir

from .jobs import Background, PartResult
from .split import declaration, stream_part

__all__ = ["Streamer", "CHUNK_INSTRUCTIONS", "MAX_STREAMED_INSTRUCTIONS"]

# instructions of finished functions per streamed part (about 60 KB of IR text): small, so
# that the part under way when emission ends, which the children wait for (no fork while a
# thread is inside LLVM), is short
CHUNK_INSTRUCTIONS = 800
# a finished outlined function larger than this stops the streaming: it and the rest go to
# the parallel queue, where the largest parts start first
MAX_STREAMED_INSTRUCTIONS = 1500


def _instructions(fn: ir.Function) -> int:
    """How many instructions ``fn`` has."""
    return sum(len(b.instructions) for b in fn.blocks)


class Streamer:
    """Ships the finished functions of ``module`` (all but ``entry``) to a background
    compile, a part at a time."""

    def __init__(self, module: ir.Module, entry: ir.Function) -> None:
        self.module = module
        self.entry = entry
        self.rendered: dict[str, str] = {}  # global name -> its text, each rendered once
        self.placed: set[str] = set()  # the functions some streamed part places
        self.background = Background()
        self.parts = 0
        self._seen = 0  # globals of the module looked at so far
        self._waiting: list[ir.Function] = []  # finished, not streamed yet
        self._size = 0  # their instructions
        # text shapes ``whole_text`` does not rebuild: never streamed
        self.enabled = not module.get_identified_types() and not module.namedmetadata

    def outlined(self) -> None:
        """The hook (``ModuleEmitter.on_outlined``): every function but the entry is
        finished; stream them once they are enough."""
        if not self.enabled:
            return
        values = list(self.module.globals.values())
        for g in values[self._seen:]:
            if isinstance(g, ir.Function) and g is not self.entry and not g.is_declaration:
                n = _instructions(g)
                if n > MAX_STREAMED_INSTRUCTIONS and "noinline" in g.attributes:
                    self.enabled = False  # what streamed already stays valid: it never
                    return  # calls a function finished after it
                self._waiting.append(g)
                self._size += n
        self._seen = len(values)
        if self._size >= CHUNK_INSTRUCTIONS:
            self._ship()

    def _text(self, g: ir.GlobalValue) -> str:
        text = self.rendered.get(g.name)
        if text is None:
            text = self.rendered[g.name] = str(g)
        return text

    def _header(self) -> list[str]:
        m = self.module
        return [f'; ModuleID = "{m.name}"', f'target triple = "{m.triple}"',
                f'target datalayout = "{m.data_layout}"', ""]

    def _ship(self) -> None:
        """Stream the waiting functions as one part."""
        roots = frozenset(f.name for f in self._waiting if "noinline" in f.attributes)
        lines = self._header()
        for g in self.module.globals.values():
            if g is self.entry or (isinstance(g, ir.Function) and g.is_declaration):
                if g is not self.entry:
                    lines.append(self._text(g))
            elif g.name in self.placed:  # placed before: a declaration is enough
                lines.append(declaration(self._text(g).split("\n", 1)[0]))
            elif g.name in roots or "noinline" not in getattr(g, "attributes", ()):
                lines.append(self._text(g))
        lines += [str(md) for md in self.module.metadata]
        text = stream_part("\n".join(lines), roots, self.entry.name) if roots else None
        if text is None:
            self.enabled = False  # keep the module whole from here on
            return
        self.background.submit(self.parts, text)
        self.parts += 1
        self.placed |= roots
        self._waiting, self._size = [], 0

    def whole_text(self) -> str:
        """The module's text, as ``str(module)`` prints it (each function rendered once)."""
        lines = self._header() + [self._text(g) for g in self.module.globals.values()]
        return "\n".join(lines + [str(md) for md in self.module.metadata])

    def finish(self) -> tuple[dict[int, PartResult], list[tuple[int, str]]]:
        """Stop the background compile after the part under way (``Background.stop``)."""
        return self.background.stop()
