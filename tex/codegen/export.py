"""Position-independent object code of optimized LLVM IR, for shared libraries.

A built function's code is loaded by MCJIT (``tex.runtime.jit``) from objects made for
that (``jobs.compile_part``); a shared library (``tex.runtime.library``) needs objects a
dynamic linker can place anywhere. ``pic_objects`` makes them from the optimized IR the
build kept (``CompiledModule.parts_opt`` or ``llvm_ir_opt``): LLVM parses and emits each
text again with a position-independent target machine for the host, no pipeline run (the
IR is optimized already), on a compile worker (``jobs.guarded``), as every LLVM job of tex.
``string_constant_ir`` makes a module with one function returning a constant string (the
library's description).
"""
from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import llvmlite.binding as llvm

from . import jobs
from .host import LLVM_LOCK, host_target

__all__ = ["linked_object", "pic_linked_object", "pic_object", "pic_objects",
           "string_constant_ir"]


def _pic_machine(host: Any, reduced: bool) -> llvm.TargetMachine:
    """The host's target machine for position-independent code (-O1 when ``reduced``;
    ``host``: ``host_target()``, asked outside the LLVM lock)."""
    return llvm.Target.from_triple(host.triple).create_target_machine(
        cpu=host.cpu, features=host.features, opt=1 if reduced else 3, reloc="pic",
        codemodel="default")


def pic_object(text: str, reduced: bool = False) -> bytes:
    """``text`` (optimized IR) as a position-independent object file for the host, in this
    process (``reduced``: code generation at -O1, when -O3's crashed)."""
    host = host_target()
    with LLVM_LOCK:
        context = llvm.create_context()
        try:
            mod = llvm.parse_assembly(text, context=context)
            try:
                mod.verify()
                return bytes(_pic_machine(host, reduced).emit_object(mod))
            finally:
                mod.close()
        finally:
            context.close()


def linked_object(texts: Sequence[str], reduced: bool = False) -> bytes:
    """The modules ``texts`` linked into one (LLVM's linker: private symbols renamed apart)
    and emitted as one position-independent object, in this process (``reduced``: code
    generation at -O1)."""
    host = host_target()
    with LLVM_LOCK:
        context = llvm.create_context()
        try:
            mods = [llvm.parse_assembly(t, context=context) for t in texts]
            try:
                main = mods[0]
                for other in mods[1:]:
                    main.link_in(other, preserve=True)
                main.verify()
                return bytes(_pic_machine(host, reduced).emit_object(main))
            finally:
                for m in mods:
                    m.close()
        finally:
            context.close()


def pic_linked_object(texts: Sequence[str]) -> bytes:
    """``linked_object`` on a compile worker (LLVM can neither crash nor hang this
    process)."""
    return jobs.guarded((__name__, "linked_object"), (list(texts),),  # type: ignore
                        "\n".join(texts), "a linked module for an object file")


def pic_objects(texts: Sequence[str]) -> list[bytes]:
    """``pic_object`` of every text, each on a compile worker (LLVM can neither crash nor
    hang this process)."""
    return [jobs.guarded((__name__, "pic_object"), (t,), t, "a module for a shared library")
            for t in texts]


def string_constant_ir(symbol: str, value: str) -> str:
    """A module defining ``ptr @symbol()``, which returns ``value`` (UTF-8, NUL-ended)."""
    data = value.encode() + b"\0"
    body = "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:02X}"
                   for b in data)
    return (f'@"{symbol}.data" = private unnamed_addr constant [{len(data)} x i8] '
            f'c"{body}"\n\n'
            f'define ptr @"{symbol}"() {{\n  ret ptr @"{symbol}.data"\n}}\n')
