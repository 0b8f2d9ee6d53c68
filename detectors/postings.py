"""The content index's postings in the native extension (detectors/_winnow_index.h), as `ContentIndex` uses them.

Where the extension is built, one table holds both of the index's maps (`_single`: fingerprint -> the doc id of its
one owner; `_multi`: fingerprint -> {tenant: doc id} where several tenants had it): 16 bytes a slot and a short
owner list per shared fingerprint, instead of dict entries, int objects and a dict per shared fingerprint; the
per-fingerprint loops of inserting and dropping a text run in C. The answers, owner order included, are the dicts'
(tests/detectors/test_native_index.py); `ContentIndex(native=False)` runs the dicts. Pure glue: no I/O, no clock.
"""

from __future__ import annotations

from array import array
from collections.abc import Iterable
from dataclasses import dataclass, fields
from typing import Any

import numpy as np


@dataclass(slots=True)
class Doc:
    """One text of a domain's content index (detectors/index.py): whose, when, and its fingerprints."""

    doc_id: int
    tenant_id: str
    session_id: str | None
    request_id: str
    ts: float
    # The text's fingerprints in text order, each once: a list, or native uint64 once in the native postings.
    hashes: list[int] | array[int]
    # Model tokens per unit of this text (the engine's own count over the fingerprinter's units): what a
    # matched unit of it weighs when outputs mixing several sources are attributed. 1.0 when unknown.
    tpu: float = 1.0
    # Its whole-sentence hashes (detectors/sentences.py), 8 bytes each; None when unknown.
    sentences: array[int] | None = None

    def __setstate__(self, state: Any) -> None:
        # Docs pickled before `sentences` existed (in a snapshot or a change record) lack it: unknown.
        self.sentences = None
        values = state[1] if isinstance(state, tuple) else dict(zip(_DOC_FIELDS, state, strict=False))
        for name, value in values.items():
            object.__setattr__(self, name, value)


_DOC_FIELDS = tuple(f.name for f in fields(Doc))

try:
    from detectors._winnow import Postings as _Postings
    from detectors._winnow import first_positions as _first_native
except ImportError:  # built without a C compiler (or an older build): the pure path, the same postings
    _Postings = None  # type: ignore[assignment,misc,unused-ignore]
    _first_native = None  # type: ignore[assignment,unused-ignore]

NATIVE = _Postings is not None
first_native = _first_native


def native_table() -> Any:
    """A fresh native table (only where `NATIVE`)."""
    assert _Postings is not None
    return _Postings()


def first_positions(hashes: Iterable[int], needed: list[int]) -> list[int]:
    """The first index of each needed value in `hashes`, or -1 (the pure path of the native `first_positions`)."""
    where: dict[int, int] = {}
    for p, h in enumerate(hashes):
        where.setdefault(h, p)
    return [where.get(h, -1) for h in needed]


class Owners:
    """`ContentIndex._multi` over the native table: the fingerprints several tenants had, read through it (`get(h)`
    is {tenant: doc id} as the pure path's dict holds it)."""

    __slots__ = ("_table", "get")

    def __init__(self, table: Any) -> None:
        self._table = table
        self.get = table.owners

    def __len__(self) -> int:
        return int(self._table.multi)

    def __contains__(self, h: object) -> bool:
        return bool(self._table.has_owners(h))

    def items(self) -> list[tuple[int, dict[str, int]]]:
        return list(self._table.owner_items())

    def __reduce__(self) -> tuple[Any, ...]:
        return (restore_owners, (self._table,))


class Restored(dict[int, int]):
    """A native table unpickled without the extension: the pure path's `_single`, with its `_multi` beside it."""

    multi: dict[int, dict[str, int]]


def owners_of(table: Any) -> Any:
    """`_multi` for a table: the view over a native one."""
    return Owners(table)


def restore_postings(state: tuple[Any, ...]) -> Any:
    """Unpickle a native table (its `__reduce__` names this function): as the native table where it is built, else
    as the pure path's two dicts (`Restored`; `ContentIndex.__setstate__` takes the `_single` dict from it)."""
    if _Postings is not None:
        table = _Postings()
        table.__setstate__(state)
        return table
    _bits, _slots, keys, vals, owners, base, tenants = state
    single = Restored()
    single.multi = {}
    listed = iter(np.frombuffer(owners, dtype=np.int64).tolist())
    hashes, docs_of = np.frombuffer(keys, dtype=np.uint64).tolist(), np.frombuffer(vals, dtype=np.int64).tolist()
    for h, doc in zip(hashes, docs_of, strict=True):
        if doc >= 0:
            single[h] = doc
        else:
            docs = [next(listed) for _ in range(next(listed))]
            single.multi[h] = {tenants[d - base]: d for d in docs}
    return single


def restore_owners(table: Any) -> Any:
    return table.multi if isinstance(table, Restored) else Owners(table)
