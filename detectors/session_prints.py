"""Session-incremental fingerprinting: a turn that re-sends its history costs only its new text.

Agent and chat sessions send their whole history with every turn, so fingerprinting each turn from
scratch costs the square of the session's length. `SessionPrints` remembers, per session, what it needs
to continue the previous turn's fingerprints — never the text:

* a keyed digest of the previous text's UTF-8 bytes up to
  a cut `c`, its last space or newline (a separator: no unit crosses it, so the units before it cannot change
  whatever follows);
* the last k - 1 unit hashes and the last w - 1 k-gram hashes before the cut, the number of units, and
  the fingerprints selected by the windows that lie before the cut, in order (a list, and a sorted numpy copy).

The digest is the one pass over the whole history that a continued turn still makes. With the native
extension (detectors/_winnow.c) it is a polynomial hash modulo 2**61 - 1 at a secret point derived from the
fingerprint key (~7 GB/s; two different texts collide for a negligible share of points), sealed with keyed
blake2b; without it, keyed SHA-256 (~1 GB/s). Either way it reveals nothing about the text without the key.

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

try:
    import detectors._winnow as _winnow
except ImportError:  # no native extension: keyed SHA-256 instead
    _winnow = None  # type: ignore[assignment]

_P61 = (1 << 61) - 1


@dataclass(slots=True)
class _State:
    cut: int  # UTF-8 bytes of the previous text covered by the state (up to its last space or newline)
    digest: bytes  # keyed digest of those characters
    units: int  # units before the cut
    unit_tail: np.ndarray  # the last k - 1 unit hashes before the cut
    kgram_tail: np.ndarray  # the last w - 1 k-gram hashes before the cut
    # Fingerprints of the windows before the cut, in order of first selection: the first `nsel` items of
    # `selected`. The list is the one handed out in the last TextFingerprint (frozen; nothing mutates its
    # list in place), which may go on past the cut: sharing it saves a copy of the whole list every turn.
    selected: list[int]
    nsel: int
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

    def _digests(self, data: memoryview, a: int, b: int) -> tuple[bytes, bytes]:
        """Keyed digests of data[:a] and data[:b] (a <= b), in one pass. The key is read from the
        fingerprinter each time, so no copy of it (or of anything derived from it) ends up in a snapshot."""
        key = self.fp._key
        if _winnow is not None:
            point = hashlib.blake2b(b"ctk-session-point", key=key, digest_size=8).digest()
            ha, hb = _winnow.prefix_digests(data, int.from_bytes(point, "little") % (_P61 - 1) + 1, a, b)
            return _seal(key, ha, a), _seal(key, hb, b)
        h = hashlib.sha256(b"ctk-session\0" + key)
        h.update(data[:a])
        first = h.digest()
        h.update(data[a:b])
        return first, h.digest()

    def fingerprint_text(self, session: str, text: str) -> TextFingerprint:
        """`Fingerprinter.fingerprint_text(text)`, reusing the previous text of `session` if `text` continues it."""
        fp = self.fp
        data = memoryview(text.encode("utf-8", "surrogatepass"))
        state = self._states.pop(session, None)
        if state is not None:
            self._prints -= state.nsel
            c = state.cut
            if len(data) > c and data[c] in _SEPARATORS:
                cut = _last_separator(data)  # >= c: the state for the next turn is digested in the same pass
                before, now = self._digests(data, c, cut)
                if before == state.digest:
                    self.reused_bytes += c
                    return self._continue(session, data, state, cut, now)
        wh = fp.text_hashes(text)
        kg = fp.kgram_hashes(wh)
        selected = fp._selected(kg)
        self._remember(session, data, wh, kg)
        return TextFingerprint.model_construct(hashes=selected, words=wh.shape[0])

    def _continue(self, session: str, data: memoryview, state: _State, cut: int, digest: bytes) -> TextFingerprint:
        fp = self.fp
        k, w = fp.k, fp.w
        new_units = fp.text_hashes(_text(data, state.cut))
        units = np.concatenate([state.unit_tail, new_units])
        new_kg = fp.kgram_hashes(units)  # the k-grams that end past the cut
        kg = np.concatenate([state.kgram_tail, new_kg])
        total_units = state.units + new_units.shape[0]
        # The windows that reach past the cut, in order; consecutive windows mostly share their minimum.
        mins = _window_minima(kg, w)
        new, new_at, new_pos = _fresh(mins, _changes(mins), state.ordered)
        hashes = state.selected[: state.nsel]  # the one copy of the list a turn makes
        hashes += new.tolist()
        self._remember_continued(session, data, state, new_units, kg, (new, new_at, new_pos), hashes, cut, digest)
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
        digest = self._digests(data, cut, cut)[1]
        self._store(session, digest, cut, units, wh[:units], kg[:nkg], (selected, len(selected)), ordered)

    def _remember_continued(
        self,
        session: str,
        data: memoryview,
        state: _State,
        new_units: np.ndarray,
        kg: np.ndarray,
        fresh: tuple[np.ndarray, np.ndarray, np.ndarray],
        hashes: list[int],
        cut: int,
        digest: bytes,
    ) -> None:
        """State for the next turn after a continued pass (kg: the previous tail and the new k-grams; fresh:
        the values first selected in this turn with their first window and place in `state.ordered`; hashes: the
        list handed out (the state's selection, then `fresh`'s values in the same order); cut: the
        text's last separator, digest: of the text up to it), without touching the part before the previous cut."""
        fp = self.fp
        w = fp.w
        if cut <= state.cut:
            self._states[session] = state  # nothing new before a separator: keep the old state
            self._prints += state.nsel
            return
        after = fp.text_hashes(_text(data, cut)).shape[0]  # units after the new cut
        units = state.units + new_units.shape[0] - after
        # Units, k-grams and windows before the new cut, counted within the continued arrays.
        joined_units = np.concatenate([state.unit_tail, new_units])
        unit_tail = joined_units[: joined_units.shape[0] - after]
        nkg = kg.shape[0] - after  # kg starts w - 1 k-grams before the old cut's k-grams end
        nwin = max(nkg - w + 1, 0)
        new, new_at, new_pos = fresh
        before = new_at < nwin  # first selected by a window that lies before the new cut
        new, new_pos = new[before], new_pos[before]  # a prefix of the turn's new values (ordered by window)
        nsel = state.nsel + new.shape[0]
        # Their places in the sorted array are known (from the membership test): one insertion pass.
        order = np.argsort(new)
        ordered = np.insert(state.ordered, new_pos[order], new[order])
        self._store(session, digest, cut, units, unit_tail, kg[:nkg], (hashes, nsel), ordered)

    def _store(
        self,
        session: str,
        digest: bytes,
        cut: int,
        units: int,
        unit_tail: np.ndarray,
        kgrams: np.ndarray,
        selection: tuple[list[int], int],
        ordered: np.ndarray,
    ) -> None:
        fp = self.fp
        selected, nsel = selection
        if nsel > self.max_prints_per_session:
            return
        k1 = fp.k - 1
        st = _State(
            cut=cut,
            digest=digest,
            units=units,
            unit_tail=unit_tail[unit_tail.shape[0] - k1 :].copy() if k1 else unit_tail[:0].copy(),
            kgram_tail=kgrams[kgrams.shape[0] - (fp.w - 1) :].copy() if fp.w > 1 else kgrams[:0].copy(),
            selected=selected,
            nsel=nsel,
            ordered=ordered,
        )
        self._states[session] = st
        self._prints += nsel
        while self._states and (len(self._states) > self.max_sessions or self._prints > self.max_prints_total):
            _, old = self._states.popitem(last=False)
            self._prints -= old.nsel

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


_SEPARATORS = (0x20, 0x0A)  # a space or newline: no unit crosses it


def _seal(key: bytes, value: int, length: int) -> bytes:
    """The polynomial hash keyed once more (a PRF of it), so that equal-looking digests cannot be checked
    against guessed texts without the key."""
    msg = value.to_bytes(8, "little") + length.to_bytes(8, "little")
    return hashlib.blake2b(msg, key=key, digest_size=16, person=b"ctk-session").digest()


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
    # In numpy: a list of Python ints >= 2**63 back into a uint64 array costs ~0.3 µs per value.
    _, first = np.unique(values, return_index=True)
    first.sort()
    return values[first]


def _fresh(mins: np.ndarray, at: np.ndarray, ordered: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The window minima at positions `at`, each value once in order of first appearance, that are not in the
    sorted array `ordered`; with the window each first appears in and its insertion place in `ordered`."""
    values = mins[at]
    _, first = np.unique(values, return_index=True)
    first.sort()
    values, at = values[first], at[first]
    if not ordered.shape[0]:
        return values, at, np.zeros(values.shape[0], dtype=np.intp)
    # Sorted keys search faster (each search starts where the previous one ended).
    order = np.argsort(values)
    pos = np.empty(values.shape[0], dtype=np.intp)
    pos[order] = np.searchsorted(ordered, values[order])
    found = ordered[np.minimum(pos, ordered.shape[0] - 1)] == values
    keep = ~found
    return values[keep], at[keep], pos[keep]


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
