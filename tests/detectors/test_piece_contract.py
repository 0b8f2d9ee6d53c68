"""One check over every piece of the core's state that a snapshot copies as its changes (detectors/signals/base.py
`Piece`): the front's deduper and waiting halves, and what each domain's detectors declare. A copy taken at a mark,
brought forward by the live piece's packed changes (pickled, as a snapshot stores them), is the live piece; with
nothing changed the pack is empty. The shell (streams/kafka/pieces.py) relies on this and knows no piece's type."""

from __future__ import annotations

import ast
import hashlib
import io
import pickle
from collections import deque
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from factories import TEXTS, canary, request, response

from detectors.canaries import CanaryRegistry
from detectors.fingerprint import Fingerprinter
from detectors.front import front_pieces
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings

ROOT = Path(__file__).resolve().parents[2]
S = DetectionSettings(fingerprint_key="piece-contract-key", canary_tenants=["probe-*"])


def _traffic(start: int, n: int) -> Iterator[Any]:
    for i in range(start, start + n):
        if i % 13 == 0:  # a probe plants a marker (a new one, or one planted before, earlier: its time moves back)
            token = hashlib.sha256(str(i // 26).encode()).hexdigest()[:16]
            yield canary("probe-a", f"CTK-CANARY-{token}", float(i) - (5.0 if i % 26 else 0.0))
        tenant, ts = f"t{i % 5}", float(i)
        text = f"{TEXTS[i % len(TEXTS)]} note {i} for {tenant}"
        yield request(f"r{i}", tenant, ts, text=text)
        if i % 7:  # every seventh request waits for its response
            yield response(f"r{i}", tenant, ts + 0.5, domain=f"d{i % 2}", text=f"{TEXTS[(i + 1) % len(TEXTS)]} {i}")
        if i % 11 == 0:  # a response whose request never came
            yield response(f"lost{i}", tenant, ts + 0.2, domain="d0", text=TEXTS[i % len(TEXTS)])


def _pieces(m: Monitor) -> dict[str, Any]:
    out: dict[str, Any] = {"-".join(name): piece for name, piece in front_pieces(m.joiner, m.dedup).items()}
    for name, dm in m.domains.items():
        out |= {f"{key}:{name}": piece for key, piece in dm.pieces().items()}
    return out


# What a piece keeps to find its own changes (since the mark, the last changes found, a derived sketch): the trail a
# copy restarts at its next mark, not the state a copy must equal.
TRAIL = {"_mark", "_popped", "_since", "_log", "_log_fps", "_touched", "_touched_n", "_seen", "_delta", "_sketch"}


def _plain(x: Any) -> Any:
    """A piece's state as plain values, whatever objects share it (pickle bytes differ with the sharing)."""
    if x is None or isinstance(x, (bool, int, float, str, bytes)):
        return x
    if isinstance(x, type):
        return x.__qualname__
    if isinstance(x, Fingerprinter):
        return "the process's fingerprinter"
    if isinstance(x, np.ndarray):
        return ("array", x.dtype.str, x.shape, x.tobytes())
    if isinstance(x, np.generic):
        return x.item()
    if isinstance(x, (list, tuple, deque)):
        return [_plain(v) for v in x]
    if isinstance(x, dict):
        return [(_plain(k), _plain(v)) for k, v in x.items() if k not in TRAIL]
    if isinstance(x, (set, frozenset)):
        return sorted(repr(_plain(v)) for v in x)
    reduced = x.__reduce_ex__(4)
    items = [list(r) if r is not None and not isinstance(r, (dict, tuple)) else r for r in reduced[3:5]]
    return (type(x).__qualname__, _plain(reduced[1:3]), _plain(items))


def _copy(obj: Any) -> Any:
    """A pickled copy, with the process's fingerprinter left out by name as a snapshot leaves it (the shell's
    persistent ids: it holds the key) and supplied again on load."""
    fingerprinters: dict[str, Fingerprinter] = {}

    def out(o: object) -> str | None:
        if isinstance(o, Fingerprinter):
            fingerprinters["fpr"] = o
            return "fpr"
        return None

    buf = io.BytesIO()
    pickler = pickle.Pickler(buf, protocol=pickle.HIGHEST_PROTOCOL)
    pickler.persistent_id = out  # type: ignore[method-assign]
    pickler.dump(obj)
    unpickler = pickle.Unpickler(io.BytesIO(buf.getvalue()))
    unpickler.persistent_load = fingerprinters.__getitem__  # type: ignore[method-assign]
    return unpickler.load()


def _same(a: Any, b: Any) -> bool:
    return bool(_plain(a) == _plain(b))


def _live() -> Monitor:
    m = Monitor(S)
    for event in _traffic(0, 300):
        m.observe(event)
    return m


KINDS = sorted(_pieces(_live()))


@pytest.mark.parametrize("name", KINDS)
def test_a_marked_copy_plus_the_packed_changes_is_the_live_piece(name: str) -> None:
    m = _live()
    piece = _pieces(m)[name]
    piece.mark()
    copy = _copy(piece)
    assert not piece.pack(piece.changes()), "nothing changed since the mark: the pack is empty"
    for event in _traffic(300, 60):
        m.observe(event)
    changes = piece.changes()
    if changes is None:  # only a whole copy will do (allowed, e.g. a record that rotated), and says so
        assert name.split(":")[0] in ("sp", "ms"), f"{name}: marked, yet only a whole copy will do"
        return
    assert not _same(copy, piece), f"{name}: nothing changed, or the copy is not a copy"
    packed = pickle.loads(pickle.dumps(piece.pack(changes)))
    copy.replay(copy.unpack(packed))
    assert _same(copy, piece)


def test_every_kind_of_piece_is_checked() -> None:
    assert {k.split(":")[0] for k in KINDS} >= {"dd", "wait-request", "wait-response", "can", "ix", "sp", "ms", "mx"}


def test_the_shell_that_stores_pieces_names_none_of_their_types() -> None:
    # Before the pieces packed their own changes, pieces.py imported the index, the spread record, the ledger and the
    # deduper, and dispatched on each type to pack and replay them.
    tree = ast.parse((ROOT / "streams" / "kafka" / "pieces.py").read_text(encoding="utf-8"))
    imported = {a.name for n in ast.walk(tree) if isinstance(n, ast.ImportFrom) for a in n.names}
    assert not imported & {"ContentIndex", "Doc", "TenantSpread", "SpreadChanges", "MixupLedger", "Deduper"}


def _registry(n: int) -> CanaryRegistry:
    from detectors.monitor import make_fingerprinter

    return CanaryRegistry(make_fingerprinter(S), max_markers=n)


def _plant(reg: CanaryRegistry, i: int, ts: float) -> None:
    reg.register("probe-a", f"CTK-CANARY-{hashlib.sha256(str(i).encode()).hexdigest()[:16]}", None, ts)


def test_markers_evicted_past_those_held_at_the_mark_take_a_whole_copy() -> None:
    live = _registry(5)
    for i in range(3):
        _plant(live, i, float(i))
    live.mark()
    copy = _copy(live)
    for i in range(3, 7):  # 4 new: the bound evicts the 2 oldest, both held at the mark
        _plant(live, i, float(i))
    _plant(live, 2, -1.0)  # planted again, earlier: the marker keeps its place, with the earlier time
    changes = live.changes()
    assert changes is not None and changes[0] == 2
    copy.replay(copy.unpack(pickle.loads(pickle.dumps(live.pack(changes)))))
    assert _same(copy, live) and copy.state_size() == live.state_size() == 5
    for i in range(7, 20):  # more evicted than were held at the mark: some of the new went too
        _plant(live, i, float(i))
    assert live.changes() is None
    assert _copy(live).changes() is None  # a copy holds the markers, not the trail
