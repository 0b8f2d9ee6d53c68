"""Session-incremental fingerprinting: a turn that re-sends its history costs only its new text.

Agent and chat sessions send their whole history with every turn, so fingerprinting each turn from
scratch costs the square of the session's length. `SessionPrints` remembers, per session, what it needs
to continue the previous turn's fingerprints — never the text:

* a keyed digest (SHA-256 of the fingerprint key and the text) of the previous text's UTF-8 bytes up to
  a cut `c`, its last space or newline (a separator: no unit crosses it, so the units before it cannot change
  whatever follows);
* the last k - 1 unit hashes and the last w - 1 k-gram hashes before the cut, the number of units, and
  the fingerprints selected by the windows that lie before the cut, in order (a list, and a sorted numpy copy).

A new text whose first `c` bytes have the same digest and whose byte `c` is a space or newline
continues the previous one: only the text after the cut is cut into units and hashed, and only the k-grams and
windows that reach past the cut are computed. The result is exactly `Fingerprinter.fingerprint_text`'s
(property-tested). Anything else (an edited history, a new session) is a full pass, which then becomes
the session's new state. Memory is bounded per session (`max_prints_per_session` fingerprints; longer
sessions are not cached) and in total (`max_prints_total`, ~56 bytes each, so ~220 MB by default; least
recently used sessions are dropped first).
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.fingerprint import Fingerprinter
from schemas.exchange import TextFingerprint


@dataclass(slots=True)
class _State:
    cut: int  # UTF-8 bytes of the previous text covered by the state (up to its last space or newline)
    digest: bytes  # keyed digest of those characters
    units: int  # units before the cut
    unit_tail: np.ndarray  # the last k - 1 unit hashes before the cut
    kgram_tail: np.ndarray  # the last w - 1 k-gram hashes before the cut
    selected: list[int]  # fingerprints of the windows before the cut, in order of first selection
    ordered: np.ndarray  # the same, sorted (membership tests)


class SessionPrints:
    def __init__(
        self,
        fingerprinter: Fingerprinter,
        *,
        max_sessions: int = 100_000,
        max_prints_per_session: int = 500_000,
        max_prints_total: int = 4_000_000,
        min_cut: int = 2_048,
    ) -> None:
        self.fp = fingerprinter
        self.max_sessions = max_sessions
        self.max_prints_per_session = max_prints_per_session
        self.max_prints_total = max_prints_total
        self.min_cut = min_cut  # shorter texts are cheap: no state for them
        self._states: OrderedDict[str, _State] = OrderedDict()
        self._prints = 0
        self.reused_bytes = 0  # bytes not re-fingerprinted thanks to the state (a counter)

    def _digest(self, data: memoryview, start: int, cut: int, h: _Hash | None = None) -> _Hash:
        """The keyed digest state of data[:cut], given `h`, that of data[:start] (None: from scratch)."""
        # Keyed (the key goes first), so a state reveals nothing about the text. SHA-256 runs at ~2 GB/s on
        # CPUs with SHA extensions, twice BLAKE2b's speed in CPython: this digest is the one pass over the
        # whole history that a continued turn still makes. The key is read from the fingerprinter each
        # time, so no copy of it can end up in a snapshot.
        h = hashlib.sha256(b"ctk-session\0" + self.fp._key) if h is None else h.copy()
        h.update(data[start:cut])
        return h

    def fingerprint_text(self, session: str, text: str) -> TextFingerprint:
        """`Fingerprinter.fingerprint_text(text)`, reusing the previous text of `session` if `text` continues it."""
        fp = self.fp
        data = memoryview(text.encode("utf-8", "surrogatepass"))
        state = self._states.pop(session, None)
        if state is not None:
            self._prints -= len(state.selected)
            c = state.cut
            if len(data) > c and data[c] in _SEPARATORS:
                h = self._digest(data, 0, c)
                if h.digest() == state.digest:
                    self.reused_bytes += c
                    return self._continue(session, data, state, h)
        wh = fp.text_hashes(text)
        kg = fp.kgram_hashes(wh)
        selected = fp._selected(kg)
        self._remember(session, data, wh, kg)
        return TextFingerprint.model_construct(hashes=selected, words=wh.shape[0])

    def _continue(self, session: str, data: memoryview, state: _State, h: _Hash) -> TextFingerprint:
        fp = self.fp
        k, w = fp.k, fp.w
        new_units = fp.text_hashes(_text(data, state.cut))
        units = np.concatenate([state.unit_tail, new_units])
        new_kg = fp.kgram_hashes(units)  # the k-grams that end past the cut
        kg = np.concatenate([state.kgram_tail, new_kg])
        total_units = state.units + new_units.shape[0]
        # The windows that reach past the cut, in order; consecutive windows mostly share their minimum.
        mins = _window_minima(kg, w)
        at = _changes(mins)
        new = _not_in(_first_seen(mins[at]), state.ordered)
        hashes = state.selected + new.tolist()
        self._remember_continued(session, data, state, new_units, kg, mins, at, h)
        assert total_units - k + 1 >= w  # the state always holds a whole window
        return TextFingerprint.model_construct(hashes=hashes, words=total_units)

    def _remember(self, session: str, data: memoryview, wh: np.ndarray, kg: np.ndarray) -> None:
        """State for the next turn after a full pass: everything before the text's last space or newline."""
        cut = _last_separator(data)
        if cut < self.min_cut:
            return
        fp = self.fp
        units = wh.shape[0] - fp.text_hashes(_text(data, cut)).shape[0]
        nkg = max(units - fp.k + 1, 0)
        if nkg - fp.w + 1 < 1:
            return
        mins = _window_minima(kg[:nkg], fp.w)
        first = _first_seen(mins[_changes(mins)])
        selected = first.tolist()
        ordered = np.sort(first)
        self._store(session, self._digest(data, 0, cut), cut, units, wh[:units], kg[:nkg], selected, ordered)

    def _remember_continued(
        self,
        session: str,
        data: memoryview,
        state: _State,
        new_units: np.ndarray,
        kg: np.ndarray,
        mins: np.ndarray,
        at: np.ndarray,
        h: _Hash,
    ) -> None:
        """State for the next turn after a continued pass (kg: the previous tail and the new k-grams; mins:
        their windows; at: where the minimum changes), without touching the part before the previous cut."""
        fp = self.fp
        w = fp.w
        cut = _last_separator(data)
        if cut <= state.cut:
            self._states[session] = state  # nothing new before a separator: keep the old state
            self._prints += len(state.selected)
            return
        after = fp.text_hashes(_text(data, cut)).shape[0]  # units after the new cut
        units = state.units + new_units.shape[0] - after
        # Units, k-grams and windows before the new cut, counted within the continued arrays.
        joined_units = np.concatenate([state.unit_tail, new_units])
        unit_tail = joined_units[: joined_units.shape[0] - after]
        nkg = kg.shape[0] - after  # kg starts w - 1 k-grams before the old cut's k-grams end
        nwin = max(nkg - w + 1, 0)
        new = _not_in(_first_seen(mins[at[at < nwin]]), state.ordered)
        selected = state.selected + new.tolist()
        # Both parts are sorted: the stable sort (timsort) merges them in linear time.
        ordered = np.sort(np.concatenate([state.ordered, np.sort(new)]), kind="stable")
        digest = self._digest(data, state.cut, cut, h)
        self._store(session, digest, cut, units, unit_tail, kg[:nkg], selected, ordered)

    def _store(
        self,
        session: str,
        h: _Hash,
        cut: int,
        units: int,
        unit_tail: np.ndarray,
        kgrams: np.ndarray,
        selected: list[int],
        ordered: np.ndarray,
    ) -> None:
        fp = self.fp
        if len(selected) > self.max_prints_per_session:
            return
        k1 = fp.k - 1
        st = _State(
            cut=cut,
            digest=h.digest(),
            units=units,
            unit_tail=unit_tail[unit_tail.shape[0] - k1 :].copy() if k1 else unit_tail[:0].copy(),
            kgram_tail=kgrams[kgrams.shape[0] - (fp.w - 1) :].copy() if fp.w > 1 else kgrams[:0].copy(),
            selected=selected,
            ordered=ordered,
        )
        self._states[session] = st
        self._prints += len(selected)
        while self._states and (len(self._states) > self.max_sessions or self._prints > self.max_prints_total):
            _, old = self._states.popitem(last=False)
            self._prints -= len(old.selected)

    def __getstate__(self) -> dict[str, Any]:
        """Pickled (a Kafka join snapshot) without the sessions: a cache, whose loss costs one full pass
        per session, is not worth snapshot bytes."""
        state = {name: getattr(self, name) for name in self.__dict__}
        state["_states"] = OrderedDict()
        state["_prints"] = 0
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.__dict__.update(state)

    def state_size(self) -> int:
        """Fingerprints held for all sessions (~56 bytes each: a Python int in the list that is handed out
        again next turn, its list slot, and 8 bytes in the sorted array; plus a small part per session)."""
        return self._prints


_Hash = Any
_SEPARATORS = (0x20, 0x0A)  # a space or newline: no unit crosses it


def _last_separator(data: memoryview) -> int:
    b = data.obj
    assert isinstance(b, bytes)
    return max(b.rfind(b" "), b.rfind(b"\n"))


def _text(data: memoryview, start: int) -> str:
    """The text from byte `start` (a separator, so a character boundary) on."""
    return bytes(data[start:]).decode("utf-8", "surrogatepass")


def _changes(mins: np.ndarray) -> np.ndarray:
    """Positions where the window minimum differs from the previous window's (and the first)."""
    change = np.empty(mins.shape[0], dtype=bool)
    if mins.shape[0]:
        change[0] = True
        np.not_equal(mins[1:], mins[:-1], out=change[1:])
    return change.nonzero()[0]


def _first_seen(values: np.ndarray) -> np.ndarray:
    """Each value once, in order of first appearance."""
    return np.array(list(dict.fromkeys(values.tolist())), dtype=np.uint64)


def _not_in(values: np.ndarray, ordered: np.ndarray) -> np.ndarray:
    """The values (in their order) that are not in the sorted array `ordered`."""
    if not ordered.shape[0] or not values.shape[0]:
        return values
    pos = np.searchsorted(ordered, values)
    pos[pos == ordered.shape[0]] = 0
    return values[ordered[pos] != values]


def _window_minima(kg: np.ndarray, w: int) -> np.ndarray:
    """min(kg[i : i + w]) for every full window, in order (kg.shape[0] >= w)."""
    mins = kg
    span = 1
    while span * 2 <= w:
        mins = np.minimum(mins[:-span], mins[span:])
        span *= 2
    m = kg.shape[0] - w + 1
    if span < w:
        mins = np.minimum(mins[:m], mins[w - span : w - span + m])
    return mins[:m]
