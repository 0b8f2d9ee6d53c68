"""Session-incremental fingerprinting: a turn that re-sends its history costs only its new text.

Agent and chat sessions send their whole history with every turn, so fingerprinting each turn from
scratch costs the square of the session's length. `SessionPrints` remembers, per session, what it needs
to continue the previous turn's fingerprints — never the text:

* a keyed digest of the previous text's UTF-8 bytes up to
  a cut `c`, its last space or newline (a separator: no unit crosses it, so the units before it cannot change
  whatever follows);
* the last k - 1 unit hashes and the last w - 1 k-gram hashes before the cut, the number of units, and
  the fingerprints selected by the windows that lie before the cut, in order (a list), and as a set for
  membership: with the native extension a hash set in C (`_winnow.Selection`), which a turn extends with
  its new windows' minima in one C loop (no copy, sort or search of the session's whole selection);
  without it a sorted numpy array.

The digest is the one pass over the whole history that a continued turn still makes (an ASCII text is
digested in place, without encoding it); the other O(history) step is the copy of the selection's list
into the TextFingerprint handed out, whose size is the output's. With the native
extension (detectors/_winnow.c) it is a polynomial hash modulo 2**61 - 1 at a secret point derived from the
fingerprint key (~7 GB/s; two different texts collide for a negligible share of points), sealed with keyed
blake2b; without it, keyed SHA-256 (~1 GB/s). Either way it reveals nothing about the text without the key.

A new text whose first `c` bytes have the same digest and whose byte `c` is a space or newline
continues the previous one: only the text after the cut is cut into units and hashed, and only the k-grams and
windows that reach past the cut are computed. The result is exactly `Fingerprinter.fingerprint_text`'s
(property-tested). Anything else (an edited history, a new session) is a full pass, which then becomes
the session's new state. Memory is bounded per session (`max_prints_per_session` fingerprints; longer
sessions are not cached) and in total (`max_prints_total`; ~56 bytes each for the list and its ints, plus
8 bytes (numpy) or 16-32 bytes (the C hash set, at most half full) for the membership set, so at most
~350 MB at this class's defaults; least recently used sessions are dropped first). A monitor sizes it by its
settings (`session_cache_prints`, `session_cache_sessions`: ~70 MB); a Kafka worker's monitors share one.
"""

from __future__ import annotations

import hashlib
from collections import OrderedDict
from dataclasses import dataclass
from typing import Any

import numpy as np

from detectors.fingerprint import Fingerprinter
from detectors.sentences import MAX_SENTENCES
from detectors.settings import DetectionSettings
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
    # The same values as a set: a C hash set (native), extended in place by each continued turn, or a
    # sorted numpy array (without the extension).
    seen: Any
    # The sentences' hashes so far (detectors/sentences.py): where the text's last piece starts (characters, UTF-8
    # bytes), how many hashes come before it (final), and the hashes.
    sent: tuple[int, int, int, list[int]] | None = None


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

    def _digests(self, data: str | bytes, a: int, b: int) -> tuple[bytes, bytes]:
        """Keyed digests of data[:a] and data[:b] (a <= b), in one pass. The key is read from the
        fingerprinter each time, so no copy of it (or of anything derived from it) ends up in a snapshot."""
        key = self.fp._key
        if _winnow is not None:
            point = hashlib.blake2b(b"ctk-session-point", key=key, digest_size=8).digest()
            ha, hb = _winnow.prefix_digests(data, int.from_bytes(point, "little") % (_P61 - 1) + 1, a, b)
            return _seal(key, ha, a), _seal(key, hb, b)
        assert isinstance(data, bytes)  # str only with the extension
        view = memoryview(data)
        h = hashlib.sha256(b"ctk-session\0" + key)
        h.update(view[:a])
        first = h.digest()
        h.update(view[a:b])
        return first, h.digest()

    def fingerprint_text(self, session: str, text: str) -> TextFingerprint:
        """`Fingerprinter.fingerprint_text(text)`, reusing the previous text of `session` if `text` continues it."""
        tp, prior = self._fingerprint(session, text)
        if self.fp.sentences and tp.words:
            self._sentences(session, text, prior, tp)
        return tp

    def _sentences(self, session: str, text: str, prior: _State | None, tp: TextFingerprint) -> None:
        """The hashes of the sentences of `text` onto `tp` (a prompt's print: detectors/sentences.py), continuing the
        previous turn's where the text continues it up to that turn's last piece; kept with the session's new state
        for the next turn."""
        hashes: list[int] = []
        start = 0
        if prior is not None and prior.sent is not None:
            at_char, at_byte, before, old = prior.sent
            if at_byte <= prior.cut + 1:  # the digest vouched for the text before the cut, and the cut's separator
                hashes, start = old[:before], at_char
        new, resume, before = self.fp.sentence_prints.source_hashes(text, start)
        kept = len(hashes)
        hashes += new[: MAX_SENTENCES - kept]
        before = min(len(hashes), kept + before)
        tp.sentences = (hashes, None)
        state = self._states.get(session)
        if state is not None:
            at_byte = resume if text.isascii() else len(text[:resume].encode("utf-8", "surrogatepass"))
            state.sent = (resume, at_byte, before, hashes)

    def _fingerprint(self, session: str, text: str) -> tuple[TextFingerprint, _State | None]:
        """The fingerprints of `text`, and the session's previous state if the text continued it."""
        fp = self.fp
        # An ASCII str is its own UTF-8 (the C digest reads it in place); anything else is encoded once.
        data: str | bytes = text if _winnow is not None and text.isascii() else text.encode("utf-8", "surrogatepass")
        state = self._states.pop(session, None)
        if state is not None:
            self._prints -= state.nsel
            c = state.cut
            if len(data) > c and _is_separator(data, c):
                cut = _last_separator(data)  # >= c: the state for the next turn is digested in the same pass
                before, now = self._digests(data, c, cut)
                if before == state.digest:
                    self.reused_bytes += c
                    return self._continue(session, data, state, cut, now), state
        wh = fp.text_hashes(text)
        kg = fp.kgram_hashes(wh)
        plan = self._plan(data, wh)
        if plan is not None and _winnow is not None:
            # One native pass selects the whole text and keeps the windows before the cut as the state's set: the
            # state's selection is the first `kept` values of the text's (windows before the cut come first).
            cut, units, nkg = plan
            seen = _winnow.Selection()
            selected: list[int] = []
            kept = seen.extend(kg, fp.w, nkg - fp.w + 1, selected)
            digest = self._digests(data, cut, cut)[1]
            self._store(session, digest, cut, units, wh[:units], kg[:nkg], (selected, kept), seen)
        else:
            selected = fp._selected(kg)
            if plan is not None:
                self._remember(data, wh, kg, plan, session)
        return TextFingerprint(selected, wh.shape[0]), None

    def _continue(self, session: str, data: str | bytes, state: _State, cut: int, digest: bytes) -> TextFingerprint:
        fp = self.fp
        k, w = fp.k, fp.w
        new_units = fp.text_hashes(_text(data, state.cut))
        units = np.concatenate([state.unit_tail, new_units])
        kg = np.concatenate([state.kgram_tail, fp.kgram_hashes(units)])  # + the k-grams that end past the cut
        total_units = state.units + new_units.shape[0]
        assert total_units - k + 1 >= w  # the state always holds a whole window
        # What lies before the new cut (the text's last separator), counted within the continued arrays.
        moved = cut > state.cut  # else nothing new before a separator: the old state stays
        after = fp.text_hashes(_text(data, cut)).shape[0] if moved else 0  # units after the new cut
        nkg = kg.shape[0] - after  # kg starts w - 1 k-grams before the old cut's k-grams end
        nwin = max(nkg - w + 1, 0) if moved else 0  # the new windows that lie before the new cut
        hashes = state.selected[: state.nsel]  # the one copy of the list a turn makes (the output's size)
        if isinstance(state.seen, np.ndarray):
            kept, seen = _extend_sorted(state.seen, kg, w, nwin, hashes)
        else:  # the windows reaching past the cut, their minima deduplicated against the set, in C
            kept, seen = state.seen.extend(kg, w, nwin, hashes), state.seen
        if moved:
            unit_tail = units[: units.shape[0] - after]
            selection = (hashes, state.nsel + kept)
            self._store(session, digest, cut, total_units - after, unit_tail, kg[:nkg], selection, seen)
        else:
            self._states[session] = state
            self._prints += state.nsel
        return TextFingerprint(hashes, total_units)

    def _plan(self, data: str | bytes, wh: np.ndarray) -> tuple[int, int, int] | None:
        """Where the state for the next turn ends after a full pass: (cut, the units before it, the k-grams before
        it), everything before the text's last space or newline; None when no state is kept."""
        cut = _last_separator(data)
        if cut < self.min_cut:
            return None
        fp = self.fp
        units = wh.shape[0] - fp.text_hashes(_text(data, cut)).shape[0]
        nkg = max(units - fp.k + 1, 0)
        if nkg - fp.w + 1 < 1:
            return None
        return cut, units, nkg

    def _remember(
        self, data: str | bytes, wh: np.ndarray, kg: np.ndarray, plan: tuple[int, int, int], session: str
    ) -> None:
        """State for the next turn after a full pass without the extension (`_plan`)."""
        fp = self.fp
        cut, units, nkg = plan
        mins = _window_minima(kg[:nkg], fp.w)
        first = _first_seen(mins[_changes(mins)])
        selected = first.tolist()
        seen = np.sort(first)
        digest = self._digests(data, cut, cut)[1]
        self._store(session, digest, cut, units, wh[:units], kg[:nkg], (selected, len(selected)), seen)

    def _store(
        self,
        session: str,
        digest: bytes,
        cut: int,
        units: int,
        unit_tail: np.ndarray,
        kgrams: np.ndarray,
        selection: tuple[list[int], int],
        seen: Any,
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
            seen=seen,
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
        again next turn and its list slot; plus 16-32 bytes in the C hash set or 8 in the sorted array; plus a
        small part per session)."""
        return self._prints


def session_cache(settings: DetectionSettings, fingerprinter: Fingerprinter) -> SessionPrints:
    """The session cache the settings size (`session_cache_prints`, `session_cache_sessions`)."""
    return SessionPrints(
        fingerprinter,
        max_sessions=settings.session_cache_sessions,
        max_prints_total=settings.session_cache_prints,
        max_prints_per_session=min(500_000, settings.session_cache_prints),
    )


_SEPARATORS = (0x20, 0x0A)  # a space or newline: no unit crosses it


def _is_separator(data: str | bytes, i: int) -> bool:
    if isinstance(data, str):
        return data[i] in " \n"
    return data[i] in _SEPARATORS


def _seal(key: bytes, value: int, length: int) -> bytes:
    """The polynomial hash keyed once more (a PRF of it), so that equal-looking digests cannot be checked
    against guessed texts without the key."""
    msg = value.to_bytes(8, "little") + length.to_bytes(8, "little")
    return hashlib.blake2b(msg, key=key, digest_size=16, person=b"ctk-session").digest()


def _last_separator(data: str | bytes) -> int:
    if isinstance(data, str):
        return max(data.rfind(" "), data.rfind("\n"))
    return max(data.rfind(b" "), data.rfind(b"\n"))


def _text(data: str | bytes, start: int) -> str:
    """The text from byte `start` (a separator, so a character boundary) on."""
    if isinstance(data, str):
        return data[start:]
    return data[start:].decode("utf-8", "surrogatepass")


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


def _extend_sorted(ordered: np.ndarray, kg: np.ndarray, w: int, commit: int, out: list[int]) -> tuple[int, np.ndarray]:
    """`_winnow.Selection.extend` on a sorted array (the path without the extension): the window minima of
    kg not in `ordered`, each once in order, appended to `out`; those first selected by one of the first
    `commit` windows go into the returned sorted array too (how many: the count returned)."""
    mins = _window_minima(kg, w)
    new, new_at, new_pos = _fresh(mins, _changes(mins), ordered)
    out += new.tolist()
    before = new_at < commit  # a prefix of the new values (ordered by window)
    new, new_pos = new[before], new_pos[before]
    # Their places in the sorted array are known (from the membership test): one insertion pass.
    order = np.argsort(new)
    return new.shape[0], np.insert(ordered, new_pos[order], new[order])


def _window_minima(kg: np.ndarray, w: int) -> np.ndarray:
    """min(kg[i : i + w]) for every full window, in order (none when kg is shorter than a window)."""
    if kg.shape[0] < w:
        return kg[:0]
    mins = kg
    span = 1
    while span * 2 <= w:
        mins = np.minimum(mins[:-span], mins[span:])
        span *= 2
    m = kg.shape[0] - w + 1
    if span < w:
        mins = np.minimum(mins[:m], mins[w - span : w - span + m])
    return mins[:m]
