"""A stateful stage's partition state cut into named pieces, each copied whole or as its changes.

A domain partition is cut into
    ("part",)        the DomainState without its domains: watermarks, held items, positions, activity
    ("dm", name)     one DomainMonitor without its content index and long-horizon record
    ("ix", name)     its ContentIndex: whole, or the texts inserted and dropped since the last copy
    ("sp", name)     its TenantSpread: whole, or the bytes set since the last copy
    ("dd",)          the event-id deduper: whole, or how many ids left the front and the ids that came
and a join partition is ("dd",) and ("join",), the rest of it. A direct partition (streams/kafka/direct.py)
is a domain partition whose ("part",) holds the Monitor, its deduper cut out as ("dd",): the deduper holds
every event id of its window, which grows with the window, not with what changed. Pickle persistent ids
make the cuts: where the partition pickles a DomainMonitor it writes the monitor's name, where a monitor
pickles its index it writes
("ix", name), and so on; `assemble` puts the same objects back in those places. The persistent ids also
keep out what is not state (settings with the fingerprint key, the fingerprinter, the public corpus, the
worker's counters): the process supplies them again on load.

Pure: bytes in, bytes out. Where pieces are stored and which copy a checkpoint takes is checkpoint.py's.
"""

from __future__ import annotations

import contextlib
import io
import pickle
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import fields
from typing import Any

import numpy as np

from detectors.commonness import SpreadChanges, TenantSpread
from detectors.dedup import Deduper
from detectors.domain import DomainMonitor
from detectors.fingerprint import Fingerprinter
from detectors.index import ContentIndex, Doc
from detectors.monitor import make_fingerprinter
from detectors.public import PublicSet
from detectors.settings import DetectionSettings
from streams.kafka.direct import DirectState
from streams.kafka.stages import DomainState, JoinState

State = JoinState | DomainState
Name = tuple[str, ...]
PART: Name = ("part",)
JOIN: Name = ("join",)
DEDUP: Name = ("dd",)
# Pieces that can be copied as their changes since the last copy; the others are always copied whole.
INCREMENTAL = ("ix", "sp", "dd")


def _dedup_of(state: Any) -> Deduper | None:
    """The partition's event-id deduper: it grows with the dedup window, not with what changed."""
    if isinstance(state, JoinState):
        return state.dedup
    return state.monitor.dedup if isinstance(state, DirectState) else None


def parts(state: State) -> Iterator[tuple[Name, Any]]:
    """Every piece of the state with the live object it copies; children before their parent (the order
    `assemble` needs)."""
    dedup = _dedup_of(state)
    if dedup is not None:
        yield DEDUP, dedup
    if isinstance(state, JoinState):
        yield JOIN, state
        return
    for name, dm in state.table.domains.items():
        yield ("ix", name), dm.overlap.index
        yield ("sp", name), dm.overlap.spread
        yield ("dm", name), dm
    yield PART, state


def _pickle(obj: Any, cut: Callable[[object], Any]) -> bytes:
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = cut  # type: ignore[method-assign]
    pickler.dump(obj)
    return zlib.compress(buf.getvalue(), 1)


def process_id(obj: object, counters: Counter[str]) -> str | None:
    """What a state pickle names instead of storing: the process supplies it again on load."""
    if isinstance(obj, Fingerprinter):
        return "fingerprinter"
    if isinstance(obj, DetectionSettings):
        return "settings"
    if isinstance(obj, PublicSet):  # the operator's corpus is the process's, loaded from its file
        return "public"
    if obj is counters:
        return "counters"
    return None


def whole(name: Name, obj: Any, counters: Counter[str]) -> bytes:
    """A whole copy of one piece, with its child pieces and the process's objects left out by name."""
    if name in (PART, JOIN):
        dedup = _dedup_of(obj)

        def cut(o: object) -> Any:
            if isinstance(o, DomainMonitor):
                return ("dm", o.cache_domain)
            if o is dedup and dedup is not None:
                return DEDUP
            return process_id(o, counters)

    elif name[0] == "dm":
        index, spread = obj.overlap.index, obj.overlap.spread

        def cut(o: object) -> Any:
            if o is index:
                return ("ix", name[1])
            if o is spread:
                return ("sp", name[1])
            return process_id(o, counters)

    elif name[0] in INCREMENTAL:
        # Plain data (numbers, strings, arrays): no persistent ids needed, and without the per-object callback
        # pickling runs at C speed (an index holds millions of ints).
        assert isinstance(obj, (ContentIndex, TenantSpread, Deduper))
        return zlib.compress(pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL), 1)
    else:

        def cut(o: object) -> Any:
            return process_id(o, counters)

    return _pickle(obj, cut)


def _pack_docs(ops: list[Doc | int]) -> list[Any]:
    """Index changes with each Doc's fingerprints as one uint64 array (8 bytes each, no per-int pickling)."""
    out: list[Any] = []
    for op in ops:
        if isinstance(op, Doc):
            state = {f.name: getattr(op, f.name) for f in fields(Doc)}
            with contextlib.suppress(OverflowError, TypeError, ValueError):  # not 64-bit unsigned: kept as the list
                state["hashes"] = np.asarray(op.hashes, dtype=np.uint64)
            out.append(state)
        else:
            out.append(op)
    return out


def _unpack_docs(packed: list[Any]) -> list[Doc | int]:
    out: list[Doc | int] = []
    for op in packed:
        if isinstance(op, dict):
            hashes = op["hashes"]
            out.append(Doc(**{**op, "hashes": hashes.tolist() if isinstance(hashes, np.ndarray) else hashes}))
        else:
            out.append(op)
    return out


def _pack_spread(delta: SpreadChanges) -> tuple[int, list[tuple[int, np.ndarray, np.ndarray]]]:
    # Offsets are sorted: their gaps are small numbers, which compress to about a byte each.
    return delta.inserts, [(row, np.diff(offsets, prepend=np.uint32(0)), values) for row, offsets, values in delta.rows]


def _unpack_spread(packed: tuple[int, list[tuple[int, np.ndarray, np.ndarray]]]) -> SpreadChanges:
    inserts, rows = packed
    return SpreadChanges(inserts, [(row, np.cumsum(gaps, dtype=np.uint64), values) for row, gaps, values in rows])


def changes(name: Name, obj: Any) -> bytes | None:
    """The piece's changes since its last `mark`, b"" if there are none, None if only a whole copy will do."""
    if name[0] not in INCREMENTAL:
        return None
    if isinstance(obj, Deduper):
        ids = obj.changes()
        if ids is None:
            return None
        return zlib.compress(pickle.dumps(ids, protocol=pickle.HIGHEST_PROTOCOL), 1) if ids[0] or ids[1] else b""
    assert isinstance(obj, (ContentIndex, TenantSpread))
    delta = obj.changes()
    if delta is None:
        return None
    # No bit set means no insert counted either (a rotation makes changes() None).
    if not (delta.rows if isinstance(delta, SpreadChanges) else delta):
        return b""
    if isinstance(delta, SpreadChanges):
        return zlib.compress(pickle.dumps(_pack_spread(delta), protocol=pickle.HIGHEST_PROTOCOL), 1)
    # Keyed hashes are random bytes: zlib would spend most of the checkpoint's time to save a sixth of it.
    return pickle.dumps(_pack_docs(delta), protocol=pickle.HIGHEST_PROTOCOL)


def mark(name: Name, obj: Any) -> None:
    """The piece was copied: its changes count from here."""
    if name[0] in INCREMENTAL:
        obj.mark()


def assemble(
    pieces: dict[Name, list[bytes]],
    settings: DetectionSettings,
    counters: Counter[str],
    public: PublicSet | None = None,
) -> State:
    """The state from each piece's whole copy followed by its changes, in order."""
    known: dict[Any, Any] = {
        "fingerprinter": make_fingerprinter(settings),
        "settings": settings,
        "counters": counters,
        "public": public,
    }

    def load(blob: bytes) -> Any:
        # A pickle starts with its PROTO opcode (0x80), a zlib stream never does (0x78 at level 1).
        unpickler = pickle.Unpickler(io.BytesIO(blob if blob[:1] == b"\x80" else zlib.decompress(blob)))
        unpickler.persistent_load = known.__getitem__  # type: ignore[method-assign]
        return unpickler.load()

    for kind in ("ix", "sp", "dd"):
        for name, blobs in pieces.items():
            if name[0] != kind:
                continue
            obj = load(blobs[0])
            for blob in blobs[1:]:
                if isinstance(obj, ContentIndex):
                    obj.replay(_unpack_docs(load(blob)))
                elif isinstance(obj, TenantSpread):
                    obj.apply(_unpack_spread(load(blob)))
                elif isinstance(obj, Deduper):
                    obj.replay(load(blob))
            known[name] = obj
    for name, blobs in pieces.items():
        if name[0] == "dm":
            dm = load(blobs[0])
            if not isinstance(dm, DomainMonitor):
                raise TypeError(f"piece {name} is not a DomainMonitor")
            dm.overlap.public = public  # pickled as None (OverlapDetector.__getstate__)
            known[name] = dm
    top = pieces.get(PART) or pieces.get(JOIN)
    if top is None:
        raise ValueError("no partition piece")
    state = load(top[0])
    if not isinstance(state, (JoinState, DomainState)):
        raise TypeError(f"not a stage snapshot: {type(state).__name__}")
    return state
