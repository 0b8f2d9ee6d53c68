"""A stateful stage's partition state cut into named pieces, each copied whole or as its changes.

A domain partition is cut into
    ("part",)        the DomainState without its domains: watermarks, held items, positions, activity
    ("dm", name)     one DomainMonitor without its content index and long-horizon record
    (key, name)      each piece its detectors declare (`DomainMonitor.pieces()`, detectors/signals/base.py
                     `HasPieces`); today the overlap detector's
                     ("ix", name)  its ContentIndex: whole, or the texts inserted and dropped since the last copy
                     ("sp", name)  its TenantSpread: whole, or the bytes set since the last copy
                     ("ms", name)  its model's session record (a TenantSpread keyed by session): likewise
                     and the mix-up ledger ("mx", name): whole, or the deliveries it gained and lost
    ("dd",)          the event-id deduper: whole, or how many ids left the front and the ids that came
    ("wait", half)   the Joiner's halves waiting for their other half (half: "request", "response"):
                     whole, or the keys that left and the halves that came (detectors/waiting.py)
    ("can",)         the planted markers: whole, or how many were evicted and the markers set since
and a join partition is ("dd",), its two ("wait", half), ("can",) and ("join",), the rest of it. A direct partition
(streams/kafka/direct.py) is a domain partition whose ("part",) holds the Monitor, its deduper and waiting
halves cut out as ("dd",) and ("wait", half), its markers as ("can",): the deduper holds
every event id of its window, which grows with the window, not with what changed. The join stage's pieces (dd,
wait, can) are the core's declaration (`front_pieces`), as a domain's are its own; every piece copied as its changes
describes them itself (detectors/signals/base.py `Piece`: changes, mark, replay, pack, unpack), so this file knows
none of their types. Pickle persistent ids
make the cuts: where the partition pickles a DomainMonitor it writes the monitor's name, where a monitor
pickles its index it writes
("ix", name), and so on; `assemble` puts the same objects back in those places. The persistent ids also
keep out what is not state (settings with the fingerprint key, the fingerprinter, the public corpus, the
worker's counters): the process supplies them again on load.

Pure: bytes in, bytes out. Where pieces are stored and which copy a checkpoint takes is checkpoint.py's.
"""

from __future__ import annotations

import io
import pickle
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from typing import Any

from detectors.pipeline import (
    DetectionSettings,
    DomainMonitor,
    Fingerprinter,
    PublicSet,
    front_pieces,
    make_fingerprinter,
    upgrade,
)
from streams.kafka.direct import DirectState
from streams.kafka.stages import DomainState, JoinState

State = JoinState | DomainState
Name = tuple[str, ...]
PART: Name = ("part",)
JOIN: Name = ("join",)
DEDUP: Name = ("dd",)
WAIT_REQ: Name = ("wait", "request")
WAIT_RESP: Name = ("wait", "response")
# Pieces always copied whole; every other piece (the deduper, the waiting halves and what each domain's detectors
# declare through `DomainMonitor.pieces()`) can be copied as its changes since the last copy.
WHOLE = ("part", "join", "dm")


def incremental(name: Name) -> bool:
    return name[0] not in WHOLE


def _front_of(state: Any) -> dict[Name, Any]:
    """The join stage's pieces the core declares (`front_pieces`: dedup ids, waiting halves, markers), if the state
    holds a join stage (a join partition, or a direct one's Monitor)."""
    if isinstance(state, JoinState):
        return front_pieces(state.joiner, state.dedup)
    if isinstance(state, DirectState):
        return front_pieces(state.monitor.joiner, state.monitor.dedup)
    return {}


def parts(state: State) -> Iterator[tuple[Name, Any]]:
    """Every piece of the state with the live object it copies; children before their parent (the order
    `assemble` needs)."""
    yield from _front_of(state).items()
    if isinstance(state, JoinState):
        yield JOIN, state
        return
    for name, dm in state.table.domains.items():
        for key, piece in dm.pieces().items():
            yield (key, name), piece
        yield ("dm", name), dm
    yield PART, state


def _pickle(obj: Any, cut: Callable[[object], Any]) -> bytes:
    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = cut  # type: ignore[method-assign]
    pickler.dump(obj)
    return buf.getvalue()


def _dumps(obj: Any) -> bytes:
    return pickle.dumps(obj, protocol=pickle.HIGHEST_PROTOCOL)


def pack(name: Name, raw: bytes, whole: bool) -> bytes:
    """The stored form of a piece's pickle: compressed, except an index's changes (keyed hashes are random bytes:
    zlib would spend most of the checkpoint's time to save a sixth of it). Apart from `whole` and `changes`
    because it is most of a checkpoint's CPU (a busy domain's index: ~60 ms to pickle, ~330 ms to compress) and,
    unlike the pickling, needs no consistent point of the state: the checkpointer runs it off the event loop
    (zlib releases the GIL)."""
    if name[0] == "ix" and not whole:
        return raw
    return zlib.compress(raw, 1)


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
    """A whole copy of one piece (a pickle; `pack` gives its stored form), with its child pieces and the
    process's objects left out by name."""
    if name in (PART, JOIN):
        front = {id(piece): name for name, piece in _front_of(obj).items()}

        def cut(o: object) -> Any:
            if isinstance(o, DomainMonitor):
                return ("dm", o.cache_domain)
            return front.get(id(o)) or process_id(o, counters)

    elif name[0] == "dm":
        own = {id(piece): (key, name[1]) for key, piece in obj.pieces().items()}

        def cut(o: object) -> Any:
            return own.get(id(o)) or process_id(o, counters)

    elif name[0] in ("wait", "can"):
        # Halves hold events and fingerprints, the markers their registry's fingerprinter: the process supplies it.
        def cut(o: object) -> Any:
            return process_id(o, counters)

    elif incremental(name):
        # Plain data (numbers, strings, arrays): no persistent ids needed, and without the per-object callback
        # pickling runs at C speed (an index holds millions of ints).
        return _dumps(obj)
    else:

        def cut(o: object) -> Any:
            return process_id(o, counters)

    return _pickle(obj, cut)


def changes(name: Name, obj: Any) -> bytes | None:
    """The piece's changes since its last `mark` (a pickle of its own pack; `pack` here gives its stored form), b""
    if there are none, None if only a whole copy will do. Every piece packs its own (detectors/signals/base.py
    `Piece`): this file knows none of their types."""
    if not incremental(name):
        return None
    delta = obj.changes()
    if delta is None:
        return None
    packed = obj.pack(delta)
    return _dumps(packed) if packed else b""


def mark(name: Name, obj: Any) -> None:
    """The piece was copied: its changes count from here."""
    if incremental(name):
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

    for name, blobs in pieces.items():  # the children first: their parents name them
        if not incremental(name):
            continue
        obj = load(blobs[0])
        if name[0] == "wait":
            obj = upgrade(obj)  # stored as a plain dict before the halves copied themselves
        if len(blobs) > 1 and not callable(getattr(obj, "replay", None)):
            raise TypeError(f"piece {name}: {type(obj).__name__} has changes but cannot replay them")
        for blob in blobs[1:]:
            obj.replay(obj.unpack(load(blob)))
        known[name] = obj
    for name, blobs in pieces.items():
        if name[0] == "dm":
            dm = load(blobs[0])
            if not isinstance(dm, DomainMonitor):
                raise TypeError(f"piece {name} is not a DomainMonitor")
            dm.attach(public)  # a snapshot never holds the process's corpus
            known[name] = dm
    top = pieces.get(PART) or pieces.get(JOIN)
    if top is None:
        raise ValueError("no partition piece")
    state = load(top[0])
    if not isinstance(state, (JoinState, DomainState)):
        raise TypeError(f"not a stage snapshot: {type(state).__name__}")
    return state
