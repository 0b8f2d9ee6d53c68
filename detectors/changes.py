"""What the pieces whose changes are already plain data share: their stored form is the changes themselves.

A piece (detectors/signals/base.py `Piece`) packs its changes for storage. For the deduper, the waiting halves, the
mix-up ledger and the markers, the changes are (how many left the front, what came): numbers, strings, events and
arrays, stored as they are, or as () when nothing changed.
"""

from __future__ import annotations

from typing import Any


class StoredAsIs:
    __slots__ = ()

    @staticmethod
    def pack(changes: tuple[Any, Any]) -> tuple[Any, Any] | tuple[()]:
        """`changes()` as stored: themselves, or () when nothing left and nothing came."""
        return changes if changes[0] or changes[1] else ()

    @staticmethod
    def unpack(packed: Any) -> Any:
        return packed
