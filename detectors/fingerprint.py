"""Keyed winnowing fingerprints (Schleimer, Wilkerson, Aiken: "Winnowing", SIGMOD 2003), scheme winnow-v2.

Text is cut into units (`detectors.tokens`: words where words are spaced, single characters in Chinese,
Japanese, Korean, Thai...), each NFKC-normalised and case-folded, so re-spaced, re-wrapped, lower-cased
or full-width copies fingerprint the same. Each unit gets a keyed 64-bit hash (blake2b with the secret,
of its normalised UTF-8 bytes), k consecutive unit hashes combine into a k-gram hash, and in every
window of w consecutive k-grams the minimum is selected. Guarantee: any passage of at least
t = k + w - 1 units shared by two texts yields at least one shared fingerprint, because the window lying
inside the passage has the same contents, hence the same selection, in both. Density is about
2 / (w + 1) fingerprints per unit.

Unit hashes are cached: words of at most 24 UTF-8 bytes in an open-addressing table of numpy arrays
keyed by the word's bytes (exact, no Python object per word), looked up for a whole text in a few
vectorised passes; single-character units in a dense table indexed by code point. No path makes a
Python string per unit: ASCII text is split from its folded bytes; text of characters and ASCII words
(Chinese, Japanese, Thai, with English words and numbers) from its UTF-32 code points and their classes;
anything else from its folded UTF-8 bytes (`tokens.Units`). Short texts look up their words, or
space-separated pieces, in bounded dicts instead, since numpy's fixed costs dominate there.

With the optional native extension (`detectors/_winnow.c`, built by `pip install` when a C compiler is
there) one C loop does all of it on the str's code points: units, cached unit hashes, k-grams, window
minima and the selection; new units are still hashed here, in Python (`_bytes_hash`: normalisation and
blake2b), through a callback. Without the extension, or with `native=False`, the numpy path below runs;
both give the same fingerprints (property-tested).

Without the key the hashes reveal nothing about the text, so stored state does not leak it. This module
is also the producer-side helper: gateways fingerprint at the edge with the same parameters and send
`prompt_fingerprint` / `output_fingerprint` instead of text.
"""

from __future__ import annotations

import hashlib
from itertools import chain
from typing import Any

import numpy as np

from detectors.sentences import SentencePrint, Sentences
from detectors.tokens import CHAR, CLASS, FOLD, PAD, SCHEME, SEP, TABLE_END, WORD, Units, normalise, words_of
from detectors.winnowing import kgram_hashes, minima_positions, window_minima
from detectors.wordtable import MIN_BITS, WordTable
from schemas.events import MAX_HASHES, Fingerprint, pack
from schemas.exchange import TextFingerprint

try:
    import detectors._winnow as _winnow
except ImportError:  # built without a C compiler: the pure path, same fingerprints
    _winnow = None  # type: ignore[assignment]

__all__ = [
    "RETIRED_SCHEMES",
    "SCHEME",
    "Fingerprinter",
    "key_id_of",
    "positions_of",
    "sentences_of",
    "wire_sentences",
    "words_of",
]

# Schemes whose fingerprints are refused, with the reason given to the producer.
RETIRED_SCHEMES = {
    "winnow-v1": "scheme winnow-v1 is retired: its units were \\w+ words, so a Chinese, Japanese or Thai clause was "
    "one unit and leaks in those scripts could not be found; fingerprint with winnow-v2 (detectors.fingerprint or "
    "streams.producer of this version)",
}
_WORD_CACHE_MAX = 2_000_000
# Short texts (chat turns) pay mostly fixed numpy costs: below these sizes their words are looked up in a
# plain dict (bytes -> hash, bounded) instead of the vectorised table.
_SHORT_TEXT = 1_024
_SHORT_CACHE_MAX = 100_000
_PIECE_MAX = 64  # bytes
# Native cache bounds: as many words as the numpy table, and their key bytes (words over 256 bytes are
# hashed again each time instead).
_NATIVE_KEY_BYTES_MAX = 64 << 20
_CLASS_BYTES = CLASS.tobytes()
NATIVE = _winnow is not None  # whether the native extension is built and importable


def positions_of(tp: TextFingerprint) -> list[int] | None:
    """The k-gram position (unit offset) of each of `tp.hashes` at its first selection, where this process
    fingerprinted the text (`Fingerprinter.fingerprint_text`) or a wire fingerprint carried them
    (`Fingerprint.positions`, `from_wire`); None for older producers' fingerprints and session prints. Not in the
    exchange's JSON: only wire fingerprints and the workers' records carry them (docs/adr/0004, "coverage")."""
    pos = tp.positions
    return pos if pos is not None and len(pos) == len(tp.hashes) else None


def sentences_of(tp: TextFingerprint) -> SentencePrint | None:
    """The text's whole-sentence print (detectors/sentences.py), where this process fingerprinted the text or a wire
    fingerprint carried it (`Fingerprint.sentences`); None otherwise."""
    sp: SentencePrint | None = tp.sentences
    return sp


# The fields a packed print leaves at their defaults (`Fingerprinter.fingerprint`).
_PACKED_DEFAULTS: dict[str, Any] = {"hashes": [], **dict.fromkeys(("positions", "sentences", "sentence_ends"))}


def wire_sentences(tp: TextFingerprint) -> dict[str, list[int] | None]:
    """`Fingerprint` keyword arguments carrying the whole-sentence print, where known."""
    sp = sentences_of(tp)
    return {} if sp is None else {"sentences": sp[0], "sentence_ends": sp[1]}


def key_id_of(key: str) -> str:
    """A public id of the secret, so fingerprints made with another key can be told apart."""
    return hashlib.blake2b(b"crosstalk-key-id", key=key.encode()[:64], digest_size=6).hexdigest()


# Word-hash table. A word of at most 24 UTF-8 bytes (12 Cyrillic or Greek letters, 8 CJK) is identified
# exactly by its bytes zero-padded to three little-endian 64-bit integers (k0, k1, k2): word bytes are
# never 0 (NUL is not a word character; word lists containing it take the per-word path), so the padding
# cannot be confused with content, and k0 != 0.
_KEY_BYTES = 24
_SPACE = 0x20
_FOLD_ARRAY = np.frombuffer(FOLD, dtype=np.uint8)
_PAD = PAD  # lets an unaligned 8-byte read at any word start + 8 stay inside the buffer
# Masks keeping bytes 0-7 (k0), 8-15 (k1) and 16-23 (k2) of a word of L bytes; index 25 stands for every
# longer word and gives the key (0, 0, 0), which no short word has.
_M0, _M1, _M2 = (
    np.array([(1 << 8 * min(max(n - 8 * i, 0), 8)) - 1 for n in range(_KEY_BYTES + 1)] + [0], dtype=np.uint64)
    for i in range(3)
)
_LONG = _KEY_BYTES + 1


class Fingerprinter(WordTable):
    def __init__(self, key: str, k: int, w: int, *, native: bool = True, sentences: bool = True) -> None:
        if k < 1 or w < 1:
            raise ValueError("k and w must be positive")
        self.k = k
        self.w = w
        # Whole-sentence prints ride along with every text's fingerprints (detectors/sentences.py).
        self.sentences = sentences
        self._key = key.encode()[:64]
        self.key_id = key_id_of(key)
        # Distinct words are few compared with word occurrences; caching their keyed hash is the
        # difference between hashing every occurrence and hashing the vocabulary once. Words of at most
        # 24 bytes live in an open-addressing table of numpy arrays (linear probing, looked up for a whole
        # text at once, 64-128 bytes a word); longer words (well under 1 % of words) in a dict keyed by bytes.
        self._reset_cache()
        # Single-character units (CJK, Thai...) by code point: 1.6 MB, filled as characters are first seen.
        self._cp = np.zeros(TABLE_END, dtype=np.uint64)
        self._hasher = hashlib.blake2b(key=self._key, digest_size=8)
        # The native loop when built (and not turned off: the tests compare both paths).
        self._native = (
            _winnow.Winnower(k, w, _CLASS_BYTES, FOLD, _WORD_CACHE_MAX, _NATIVE_KEY_BYTES_MAX, TextFingerprint)
            if native and _winnow is not None
            else None
        )

    @property
    def sentence_prints(self) -> Sentences:
        """Whole-sentence prints with this fingerprinter's unit hashes (detectors/sentences.py); made per use, so
        that nothing of it is pickled with the fingerprinter."""
        native = self._native if self._native is not None and hasattr(self._native, "sentences") else None
        return Sentences(native, self._bytes_hash, self.word_hashes)

    @property
    def guarantee_units(self) -> int:
        """t: the shortest shared passage, in units, that is certain to share a fingerprint."""
        return self.k + self.w - 1

    @property
    def cached_units(self) -> int:
        """How many distinct words have their keyed hash cached (single characters are in a fixed-size table)."""
        return self._count + len(self._long) + (self._native.cached if self._native is not None else 0)

    @property
    def native(self) -> bool:
        """Whether this fingerprinter runs the native loop."""
        return self._native is not None

    def _reset_cache(self) -> None:
        self._tables(MIN_BITS)
        self._long: dict[bytes, int] = {}
        self._short: dict[bytes, int] = {}
        self._pieces: dict[bytes, tuple[int, ...]] = {}

    def _word_hash(self, word: str) -> int:
        return self._bytes_hash(word.encode("utf-8", "surrogatepass"))

    def _bytes_hash(self, data: bytes) -> int:
        """The keyed hash of a unit given by its bytes as written: that of its normalised form."""
        if not data.isascii():  # (folded ASCII is normalised already)
            data = normalise(data.decode("utf-8", "surrogatepass")).encode("utf-8", "surrogatepass")
        h = self._hasher.copy()  # the keyed state, copied: cheaper than keying a new hash per word
        h.update(data)
        return int.from_bytes(h.digest(), "little")

    def _lookup(self, tb: bytes, n: int, joined: int = -1) -> np.ndarray | None:
        """The keyed hashes of the words of `tb[:n]`: the maximal runs of bytes other than a space (no run
        contains a 0 byte). `tb` continues with at least 24 spaces after `n`. With `joined` >= 0, `tb[:n]`
        is that many words joined by single spaces, and None is returned if it does not split back into
        them (some word was empty or contained a space)."""
        b = np.frombuffer(tb, dtype=np.uint8)
        inword = np.empty(n + 2, dtype=bool)
        inword[0] = False
        np.not_equal(b[: n + 1], _SPACE, out=inword[1:])  # b[n] is padding: the last run ends
        edges = (inword[1:] != inword[:-1]).nonzero()[0]
        starts = edges[0::2]
        ends = edges[1::2]
        if joined >= 0 and (starts.shape[0] != joined or int((ends - starts).sum()) != n - joined + 1):
            return None
        return self._span_hashes(tb, starts, ends)

    def _span_hashes(self, tb: bytes, starts: np.ndarray, ends: np.ndarray, bounded: bool = True) -> np.ndarray:
        """The keyed hashes of the units `tb[starts[i]:ends[i]]` (non-empty, no NUL byte); `tb` continues with
        at least 24 bytes of padding after the last unit."""
        lengths = ends - starts
        # The key: unaligned little-endian 8-byte reads at the unit starts (through a view, no copy).
        u8 = np.ndarray((len(tb) - 7,), dtype="<u8", buffer=tb, strides=(1,))
        cls = np.minimum(lengths, _LONG)
        k0 = u8[starts]
        k0 &= _M0[cls]
        k1 = u8[starts + 8]
        k1 &= _M1[cls]
        k2 = u8[starts + 16]
        k2 &= _M2[cls]
        slot = self._home(k0, k1, k2)
        found = self._tk0[slot] == k0
        found &= self._tk1[slot] == k1
        found &= self._tk2[slot] == k2
        if not found.all():
            missing = self._probe(k0, k1, k2, slot, found)
            if missing.size:
                if bounded and self.cached_units + missing.size > _WORD_CACHE_MAX:
                    self._reset_cache()  # bounded memory: start over, keeping this text's words
                    return self._span_hashes(tb, starts, ends, bounded=False)
                self._add(tb, starts[missing], ends[missing], (k0[missing], k1[missing], k2[missing]))
                slot = self._home(k0, k1, k2)  # the table may have grown
                found = self._tk0[slot] == k0
                found &= self._tk1[slot] == k1
                found &= self._tk2[slot] == k2
                self._probe(k0, k1, k2, slot, found)
        wh = self._tval[slot]
        longs = (lengths > _KEY_BYTES).nonzero()[0]
        if longs.size:
            # Words longer than a key (about 1 % of English words), so far given slot 0's 0: the bytes dict.
            cache = self._long
            pieces = list(map(tb.__getitem__, map(slice, starts[longs].tolist(), ends[longs].tolist())))
            try:
                wh[longs] = list(map(cache.__getitem__, pieces))
            except KeyError:
                for wb in pieces:
                    if wb not in cache:
                        cache[wb] = self._bytes_hash(wb)
                wh[longs] = list(map(cache.__getitem__, pieces))
            if bounded and self.cached_units > _WORD_CACHE_MAX:
                self._reset_cache()
        return wh

    def _char_hashes(self, cps: np.ndarray) -> np.ndarray:
        """The keyed hashes of single-character units (code points below TABLE_END), from the dense table."""
        h = self._cp[cps]
        miss = h == 0  # not computed yet (a true hash of 0 is just recomputed each time)
        if miss.any():
            new = np.unique(cps[miss])
            self._cp[new] = [self._bytes_hash(chr(c).encode("utf-8", "surrogatepass")) for c in new.tolist()]
            h = self._cp[cps]
        return h

    def _unicode_hashes(self, text: str) -> np.ndarray:
        """text_hashes of a non-ASCII text: the units found on its folded UTF-8 bytes, looked up by their
        bytes as written (words) or their code point (single characters)."""
        # Text in scripts without spaces (Chinese or Thai prose, a Japanese chat turn) often has no word at
        # all: then the units are its CHAR code points, found in a few passes over the UTF-32 form.
        cps = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype=np.uint32)
        cls = CLASS[np.minimum(cps, TABLE_END - 1)]
        if cls.max(initial=SEP) <= CHAR and not (cls == WORD).any():
            return self._char_hashes(cps[cls == CHAR])
        wh = self._mixed_hashes(cps, cls)
        if wh is not None:
            return wh
        if len(text) <= _SHORT_TEXT:
            data = text.encode("utf-8", "surrogatepass").translate(FOLD)
            wh = self._piece_hashes(data.split())
            if wh is not None:
                return wh
            return self._units_hashes(Units(data + PAD, len(data)))
        return self._units_hashes(Units.of(text))

    def _mixed_hashes(self, cps: np.ndarray, cls: np.ndarray) -> np.ndarray | None:
        """Text whose words are all ASCII (Chinese or Japanese with English words and numbers in it),
        straight from its code points: the words' folded bytes are laid out one byte per code point, so
        word spans in code points are spans in that buffer. None for anything else (a non-ASCII word, a
        format character): the caller works on the UTF-8 bytes instead."""
        isword = cls == WORD
        wcp = cps[isword]
        if wcp.max(initial=0) >= 0x80 or cls.max(initial=SEP) > CHAR:
            return None
        n = cps.shape[0]
        buf = np.full(n + len(PAD), _SPACE, dtype=np.uint8)
        buf[:n][isword] = _FOLD_ARRAY[wcp]
        edge = np.zeros(n + 2, dtype=bool)
        edge[1:-1] = isword
        edges = (edge[1:] != edge[:-1]).nonzero()[0]
        word_starts, word_ends = edges[0::2], edges[1::2]
        char_at = (cls == CHAR).nonzero()[0]
        mark = np.zeros(n, dtype=np.uint8)  # unit starts: 1 = a word, 2 = a character
        mark[word_starts] = 1
        mark[char_at] = 2
        starts = mark.nonzero()[0]
        ischar = mark[starts] == 2
        out = np.empty(starts.shape[0], dtype=np.uint64)
        out[ischar] = self._char_hashes(cps[char_at])
        out[~ischar] = self._span_hashes(buf.tobytes(), word_starts, word_ends)
        return out

    def _piece_hashes(self, pieces: list[bytes]) -> np.ndarray | None:
        """Short spaced text (German, Russian...): its space-separated pieces of folded bytes, each mapped
        in a bounded dict to the hashes of its units (a word, or a word and punctuation: « », „ “).
        None when a new piece is not such a word: the caller takes the whole-text path."""
        cache = self._pieces
        try:
            parts = list(map(cache.__getitem__, pieces))
        except KeyError:
            missing = [p for p in dict.fromkeys(pieces) if p not in cache]
            # Only words of spaced scripts are worth remembering: a piece with a 3- or 4-byte character
            # (CJK, Thai, Devanagari...) is usually a clause that will not come again.
            if any(len(p) > _PIECE_MAX or max(p) >= 0xE0 for p in missing):
                return None
            # The new pieces, joined by spaces, in one pass; units never cross a space, so each unit
            # belongs to the piece its start falls in.
            joined = b" ".join(missing)
            u = Units(joined + PAD, len(joined))
            if len(u.data) != len(joined) + len(PAD):  # format characters were removed: offsets moved
                return None
            if len(cache) + len(missing) > _SHORT_CACHE_MAX:
                cache.clear()
            lengths = np.fromiter(map(len, missing), dtype=np.intp, count=len(missing))
            first = np.cumsum(lengths + 1) - (lengths + 1)
            owner = np.searchsorted(first, u.starts, side="right") - 1
            counts = np.bincount(owner, minlength=len(missing))
            split = np.split(self._units_hashes(u), np.cumsum(counts)[:-1])
            cache.update(zip(missing, map(tuple, map(np.ndarray.tolist, split)), strict=True))
            parts = list(map(cache.__getitem__, pieces))
        return np.fromiter(chain.from_iterable(parts), dtype=np.uint64)

    def _units_hashes(self, u: Units) -> np.ndarray:
        ischar = u.ischar
        nchar = u.chars.shape[0]
        if nchar == ischar.shape[0]:  # only single characters (or nothing)
            return self._char_hashes(u.chars)
        if nchar == 0:
            return self._span_hashes(u.data, u.starts, u.ends)
        out = np.empty(ischar.shape[0], dtype=np.uint64)
        out[ischar] = self._char_hashes(u.chars)
        isword = ~ischar
        out[isword] = self._span_hashes(u.data, u.starts[isword], u.ends[isword])
        return out

    def word_hashes(self, words: list[str]) -> np.ndarray:
        """The keyed hash of each word (blake2b of its UTF-8 bytes), as uint64, in order."""
        if not words:
            return np.empty(0, dtype=np.uint64)
        # Normalised words are not empty and contain neither spaces nor NUL: joined by spaces, they split
        # back exactly (checked: as many runs as words, and only the joining spaces).
        tb = " ".join(words).encode("utf-8", "surrogatepass")
        if b"\0" not in tb:
            wh = self._lookup(tb + _PAD, len(tb), joined=len(words))
            if wh is not None:
                return wh
        # Not words as words_of makes them: hash each, uncached.
        return np.fromiter(map(self._word_hash, words), dtype=np.uint64, count=len(words))

    def kgram_hashes(self, wh: np.ndarray) -> np.ndarray:
        if wh.shape[0] - self.k + 1 <= 0:
            return np.empty(0, dtype=np.uint64)
        if self._native is not None:  # one C loop instead of ~12 numpy passes (session turns use this)
            return np.frombuffer(self._native.kgrams(np.ascontiguousarray(wh, dtype=np.uint64)), dtype=np.uint64)
        return kgram_hashes(wh, self.k)

    def _selected(self, kg: np.ndarray) -> list[int]:
        w = self.w
        if self._native is not None and kg.shape[0] > w:
            # The native window minima (the session state's own loop): the same values in the same order.
            out: list[int] = []
            _winnow.Selection().extend(kg, w, kg.shape[0] - w + 1, out)
            return out
        return window_minima(kg, w)

    def winnow(self, kg: np.ndarray) -> np.ndarray:
        """Selected fingerprints of a k-gram hash sequence, in text order, each hash once."""
        return np.array(self._selected(kg), dtype=np.uint64)

    def fingerprint_words(self, words: list[str]) -> np.ndarray:
        return self.winnow(self.kgram_hashes(self.word_hashes(words)))

    def _print(self, wh: np.ndarray) -> TextFingerprint:
        kg = self.kgram_hashes(wh)
        selected = self._selected(kg)
        return TextFingerprint(selected, wh.shape[0], minima_positions(kg, self.w, selected))

    def text_hashes(self, text: str) -> np.ndarray:
        """word_hashes(words_of(text)), without making the units (no Python string per unit)."""
        if self._native is not None:
            return np.frombuffer(self._native.hashes(text, self._bytes_hash), dtype=np.uint64)
        if text.isascii():
            # words_of's fast path stops at the folded bytes: their space-separated runs are the words.
            tb = text.encode("ascii").translate(FOLD)
            if len(tb) > _SHORT_TEXT:
                wh = self._lookup(tb + _PAD, len(tb))
                assert wh is not None
                return wh
            words = tb.split()
            short = self._short
            try:
                return np.fromiter(map(short.__getitem__, words), dtype=np.uint64, count=len(words))
            except KeyError:
                wh = self._lookup(tb + _PAD, len(tb))
                assert wh is not None
                if len(short) + len(words) > _SHORT_CACHE_MAX:
                    short.clear()
                short.update(zip(words, wh.tolist(), strict=True))
                return wh
        return self._unicode_hashes(text)

    def fingerprint_text(self, text: str, *, ends: bool = True) -> TextFingerprint:
        """The fingerprints of a text, as a TextFingerprint (what the join keeps instead of the text). With the
        whole-sentence print (detectors/sentences.py): with its pieces' unit ends (`ends`, an output's), or only
        the hashes of its sentences (a prompt's: what a source needs)."""
        native = self._native
        if native is not None:
            tp = native.fingerprint(text, self._bytes_hash)
            assert isinstance(tp, TextFingerprint)  # built with the class: the tuple is its class-less form
        else:
            tp = self._print(self.text_hashes(text))
        if self.sentences and tp.words:
            prints = self.sentence_prints
            sp = prints.output_print(text, tp.words) if ends else (prints.source_hashes(text)[0], None)
            if sp is not None:
                tp.sentences = sp
        return tp

    def fingerprint(self, text: str, packed: bool = False) -> Fingerprint:
        """The wire form, for producers that fingerprint at the edge and never send text; `packed`: the hashes and
        positions as base64 (`hashes_b64`), which a monitor decodes in one pass instead of an int at a time. A
        packed print is built as it goes on the wire, without validation (valid by construction): its `hashes` are
        empty until a reader validates it (`Fingerprint.model_validate`), which unpacks them."""
        tp = self.fingerprint_text(text)
        fields = self.wire_fields(tp, packed and len(tp.hashes) <= MAX_HASHES)  # past it, validation refuses the lists
        if "hashes_b64" not in fields:
            return Fingerprint(**fields)
        return Fingerprint.model_construct(**{**_PACKED_DEFAULTS, **fields})  # all given: no default factory run

    def wire_fields(self, tp: TextFingerprint, packed: bool = False) -> dict[str, Any]:
        """`tp`'s wire fields: hashes, and the positions, sentences, names and identifiers where known (what the stages
        need to judge as the monitor does). `packed`: hashes and positions in base64 (positions past 32 bits stay a
        list)."""
        positions = positions_of(tp)
        prints: dict[str, Any] = {"hashes": tp.hashes, "positions": positions}
        if packed and (not positions or positions[-1] < 2**32):
            prints = {"hashes_b64": pack(tp.hashes, "Q")}
            if positions is not None:
                prints["positions_b64"] = pack(positions, "I")
        return {
            "scheme": SCHEME,
            "k": self.k,
            "w": self.w,
            "key_id": self.key_id,
            "words": tp.words,
            **prints,
            **wire_sentences(tp),
            **({} if tp.tools is None else {"tools": sorted(tp.tools)}),
            **({} if tp.ids is None else {"identifiers": sorted(tp.ids)}),
        }

    def check(self, fp: Fingerprint) -> str | None:
        """Why a precomputed fingerprint cannot be used here, or None if it can."""
        if fp.scheme != SCHEME:
            return RETIRED_SCHEMES.get(fp.scheme, f"scheme {fp.scheme!r} != {SCHEME!r}")
        if (fp.k, fp.w) != (self.k, self.w):
            return f"made with k={fp.k}, w={fp.w}; this monitor uses k={self.k}, w={self.w}"
        if fp.key_id != self.key_id:
            return f"made with key {fp.key_id!r}; this monitor's key is {self.key_id!r}"
        return None

    def from_wire(self, fp: Fingerprint) -> TextFingerprint:
        """The join's form of a wire fingerprint (validated): each hash once, at its first listing. With `positions`
        they ride along as where this process fingerprints the text (`positions_of`); without (an older producer) a
        run is judged by its matches alone (docs/adr/0004, "coverage")."""
        pos = fp.positions
        if pos is None:
            tp = TextFingerprint(hashes=list(dict.fromkeys(fp.hashes)), words=fp.words)
        else:
            first = dict(zip(fp.hashes, pos, strict=True))  # a repeated hash keeps its last position here...
            if len(first) != len(pos):  # ...so, with repeats, keep the first listing's instead
                first = {}
                for h, p in zip(fp.hashes, pos, strict=True):
                    first.setdefault(h, p)
            tp = TextFingerprint(list(first), fp.words, list(first.values()))
        tp.sentences = None if fp.sentences is None else (fp.sentences, fp.sentence_ends)
        tp.tools, tp.ids = (None if x is None else frozenset(x) for x in (fp.tools, fp.identifiers))
        return tp

    def marker_id(self, marker: str) -> str:
        return hashlib.blake2b(" ".join(words_of(marker)).encode(), key=self._key, digest_size=8).hexdigest()
