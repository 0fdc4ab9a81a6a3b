"""Results of compiler calls kept on disk by their inputs (``tex.diskstore.RESULTS``), so
that a second process skips ``differentiate`` and ``auto_schedule``.

``SavedCall.open(what, inputs, codecs)`` encodes a call's inputs (``tex.ir.codec``: the
DAG by structure, names included) and keys the entry by their SHA-256 and ``what``; the
store adds tex's source fingerprint, so a changed tex never reads an older one's entries.
``load()`` gives the result decoded onto the caller's own input objects, or None: absent,
or unreadable (an entry that does not decode is deleted and counted as corrupt, and the
caller computes the result again; nothing here raises). ``save(result)`` stores a result
that encodes (one reaching an object no codec covers is not stored).

Nothing is looked up or kept while IR dumps are on (``TEX_DUMP``): a found result would
skip the passes whose dumps were asked for. Calls whose result depends on more than their
inputs' structure (a user's Python
callable, the host's CPU) put that in ``what`` or do not open an entry.
"""
from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from typing import Any

from .. import diskstore
from ..debug import current, timed
from .codec import Codec, Encoding, Unencodable, decode, encode

__all__ = ["SavedCall"]


class SavedCall:
    """One call's entry: its inputs encoded and its key."""

    def __init__(self, what: str, inputs: Encoding, codecs: Mapping[type, Codec],
                 key: str) -> None:
        self.what = what
        self.inputs = inputs
        self.codecs = codecs
        self.key = key
        # after load() found or save() stored the result: the inputs' and the result's
        # objects, numbered as in the entry (the key and these decide them); a later key may
        # be made against them, walking only what is new (tex.schedule.key.front_text)
        self.full: Encoding | None = None

    @classmethod
    def open(cls, what: str, inputs: Any, codecs: Mapping[type, Codec]) -> SavedCall | None:
        """The entry of a call of ``what`` on ``inputs``; None when the disk cache is off
        or the inputs do not encode."""
        if not diskstore.RESULTS.enabled or current().dump:
            return None  # off; or the passes' dumps were asked for, and a hit has none
        with timed(f"{what}.key"):
            try:
                enc = encode(inputs, codecs)
            except Unencodable:
                return None
            text = json.dumps([what, enc.records, enc.value], separators=(",", ":"))
            key = f"{what}:" + hashlib.sha256(text.encode()).hexdigest()
        return cls(what, enc, codecs, key)

    def load(self) -> Any | None:
        """The saved result, decoded onto the inputs' objects; None when there is none."""
        with timed(f"{self.what}.load"):
            sections = diskstore.RESULTS.get(self.key)
            if sections is None:
                return None
            try:
                records, value = json.loads(sections["result"])
                result, objects = decode(records, value, self.codecs, self.inputs.objects)
            except Exception:  # noqa: BLE001 - any malformed entry is a miss, never a crash
                diskstore.RESULTS.discard(self.key)
                return None
            self.full = Encoding(objects)
            return result

    def save(self, result: Any) -> None:
        """Store ``result`` (nothing when it does not encode)."""
        with timed(f"{self.what}.save"):
            try:
                enc = encode(result, self.codecs, self.inputs)
            except Unencodable:
                return
            data = json.dumps([enc.records, enc.value], separators=(",", ":"))
            diskstore.RESULTS.put(self.key, {"result": data.encode()})
            self.full = enc
