"""How widely a fingerprint has been seen, over a horizon much longer than the leak window.

Public text (licences, news, quotes, a RAG passage) is common across the world but rare in any
15-minute window: two tenants may be the only ones quoting it today. The window index cannot tell
that apart from a leak; this record can, because it remembers every (fingerprint, tenant) pair for
days in a fixed amount of memory.

Structure: Bloom filters (bit arrays, `hashes` probes each, double hashing of a 64-bit key).
- `pairs` holds (fingerprint, tenant) pairs: a pair not yet in it is a new tenant for that fingerprint;
- `level[1..L]` hold fingerprints seen by at least 1, 2, ..., L distinct tenants (L = `levels`, 3 unless a
  reader needs to count further): a new pair promotes its fingerprint one level. `tenants(h)` is the highest
  level holding h (0..L, L meaning "L or more").
Two generations: inserts go to the current one; when it has taken `capacity` inserts (or `epoch_s`
of event time passed) it becomes the previous one and a fresh one starts. A query reads both, and a
pair met again is copied forward with its fingerprint's level, so content in steady use never ages
out; content unseen for two generations is forgotten.

Error bound, for a filter of m bits with n inserts and h probes: false-positive rate
f = (1 - e^(-h n / m))^h. With the defaults (m = 2^23 bits, n <= 600,000 per generation, h = 4) f <= 0.5 %.
A false positive can only (a) count a tenant twice as once (the pair looked seen: undercount, at most f
per pair), or (b) put a fingerprint one level too high (overcount, at most f per level). (b) can hide
a leaked fingerprint as common; (a) can make a common one look one tenant rarer. Both are bounded by
f per fingerprint, and a leak is a run of several fingerprints, so a verdict needs several errors.
Memory: (L + 1) filters x 2 generations x m/8 bytes = 8 MiB per record with the defaults, allocated on the
first text, never more.

Checkpoints copy the record whole once, then only the bytes that changed: after `mark()` the record notes
the byte offsets it sets in the current generation (bits are only ever set, until a rotation starts a new
generation), and `changes()` gives their current values, which `apply()` writes into the copy taken at the
mark. The note is bounded (offsets for half a filter's bytes); past it, or after a rotation, a whole copy is needed.
"""

from __future__ import annotations

import hashlib
from typing import NamedTuple

import numpy as np

try:
    import detectors._winnow as _winnow
except ImportError:  # built without a C compiler: the numpy path, the same bits
    _winnow = None  # type: ignore[assignment]

# Whether the native loops (detectors/_winnow_spread.h) are there: one C pass per call instead of ~15 numpy passes on
# small arrays, the same bits and answers (property-tested against this module's numpy path).
NATIVE = _winnow is not None and hasattr(_winnow, "spread_add")
_M1 = np.uint64(0x9E3779B97F4A7C15)
_M2 = np.uint64(0xC2B2AE3D27D4EB4F)
_S33 = np.uint64(33)
_S29 = np.uint64(29)
LEVELS = 3  # distinct tenants are counted up to "3 or more" unless a record asks for more
MAX_LEVELS = 8  # as the native loops (SPREAD_MAX_LEVELS)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64 finaliser: fingerprints are keyed hashes already, but pair keys need spreading."""
    x = (x ^ (x >> _S33)) * _M1
    x = (x ^ (x >> _S29)) * _M2
    return x ^ (x >> _S33)


def _keys(hashes: list[int] | np.ndarray) -> list[int] | np.ndarray:
    """What the native loops take: a list of ints as it is, an array as contiguous uint64 (as np.asarray would)."""
    if isinstance(hashes, np.ndarray):
        return np.ascontiguousarray(hashes, dtype=np.uint64)
    return hashes if isinstance(hashes, list) else list(hashes)


class _Generation:
    __slots__ = ("bits", "inserts", "started")

    def __init__(self, nbytes: int, started: float, levels: int = LEVELS) -> None:
        # Row 0: pairs; rows 1..levels: fingerprints by level.
        self.bits = np.zeros((levels + 1, nbytes), dtype=np.uint8)
        self.inserts = 0
        self.started = started


class SpreadChanges(NamedTuple):
    """The current generation's bytes changed since a mark: its insert count and, per row, (offsets, values)."""

    inserts: int
    rows: list[tuple[int, np.ndarray, np.ndarray]]


class TenantSpread:
    # Use the native loops where built (`NATIVE`); False runs the numpy path. A class default, so that snapshots from
    # before it existed restore with it.
    native = True
    levels = LEVELS  # likewise: records pickled before levels were a choice count to 3

    def __init__(
        self,
        bits_log2: int = 23,
        probes: int = 4,
        capacity: int = 600_000,
        epoch_s: float = 3 * 86400.0,
        *,
        native: bool = True,
        levels: int = LEVELS,
    ):
        if not 10 <= bits_log2 <= 34:
            raise ValueError("bits_log2 must be within 10..34")
        if not 1 <= levels <= MAX_LEVELS:
            raise ValueError(f"levels must be within 1..{MAX_LEVELS}")
        self.levels = levels
        if not 1 <= probes <= 16:
            raise ValueError("probes must be within 1..16")
        self.native = native
        self.bits_log2 = bits_log2
        self.probes = probes
        self.capacity = capacity
        self.epoch_s = epoch_s
        self._mask = np.uint64((1 << bits_log2) - 1)
        self._cur: _Generation | None = None
        self._old: _Generation | None = None
        self._tenant_keys: dict[str, np.uint64] = {}
        self.rotations = 0
        # Since mark(): (row, byte offsets) set in the current generation; None when not recording.
        self._touched: list[tuple[int, np.ndarray]] | None = None
        self._touched_n = 0

    # --- hashing ------------------------------------------------------------------------------
    def _tenant_key(self, tenant_id: str) -> np.uint64:
        key = self._tenant_keys.get(tenant_id)
        if key is None:
            if len(self._tenant_keys) > 100_000:  # bounded: recomputing is cheap, the map is a cache
                self._tenant_keys.clear()
            raw = int.from_bytes(hashlib.blake2b(tenant_id.encode(), digest_size=8).digest(), "little")
            key = np.uint64((raw * int(_M2)) & 0xFFFFFFFFFFFFFFFF)
            self._tenant_keys[tenant_id] = key
        return key

    def _positions(self, keys: np.ndarray) -> np.ndarray:
        """probes x n bit positions (Kirsch-Mitzenmacher double hashing)."""
        mixed = _mix(keys)
        a = mixed & self._mask
        b = ((mixed >> np.uint64(32)) | np.uint64(1)) & self._mask
        i = np.arange(self.probes, dtype=np.uint64)[:, None]
        return (a[None, :] + i * b[None, :]) & self._mask

    @staticmethod
    def _test(row: np.ndarray, pos: np.ndarray) -> np.ndarray:
        byte = row[pos >> np.uint64(3)]
        return np.all((byte >> (pos & np.uint64(7)).astype(np.uint8)) & 1, axis=0).astype(bool)

    def _set(self, row: int, pos: np.ndarray) -> None:
        assert self._cur is not None
        flat = pos.ravel()
        offsets = flat >> np.uint64(3)
        np.bitwise_or.at(self._cur.bits[row], offsets, (1 << (flat & np.uint64(7))).astype(np.uint8))
        if self._touched is not None:
            self._touched.append((row, offsets.astype(np.uint32)))
            self._touched_n += offsets.size
            if self._touched_n > self._cur.bits.shape[1] // 2:  # 4-byte offsets: at most 2 rows of memory
                self._touched = None

    @staticmethod
    def _levels(gen: _Generation | None, fpos: np.ndarray) -> np.ndarray:
        if gen is None:
            return np.zeros(fpos.shape[1], dtype=np.int8)
        # All level rows in one gather: levels x probes x n bits, a level holds h when all its probes are set.
        byte = gen.bits[1:, fpos >> np.uint64(3)]
        held = np.all((byte >> (fpos & np.uint64(7)).astype(np.uint8)) & 1, axis=1)
        # Levels are nested (a fingerprint at level 3 is also at 1 and 2), so the count of rows holding it is its
        # level; a false positive in a higher row alone adds at most one, as the bound in the docstring says.
        return held.sum(axis=0, dtype=np.int8)

    # --- the record ---------------------------------------------------------------------------
    def _rotate(self, ts: float) -> None:
        cur = self._cur
        if cur is None:
            self._cur = _Generation(1 << (self.bits_log2 - 3), ts, self.levels)
            self._touched = None
        elif cur.inserts >= self.capacity or ts - cur.started >= self.epoch_s:
            self._old, self._cur = cur, _Generation(1 << (self.bits_log2 - 3), ts, self.levels)
            self.rotations += 1
            self._touched = None

    def add(self, tenant_id: str, hashes: list[int] | np.ndarray, ts: float) -> None:
        """Record that `tenant_id` had a text with these fingerprints at event time `ts`."""
        if len(hashes) == 0:
            return
        self._rotate(ts)
        cur, old = self._cur, self._old
        assert cur is not None
        if self.native and NATIVE:
            self._add_native(cur, old, hashes, tenant_id)
            return
        # A text's fingerprints are unique already; a repeat within one call would read the same level twice and
        # set the same bits, so it could not promote twice.
        fp = np.asarray(hashes, dtype=np.uint64)
        pairs = fp ^ self._tenant_key(tenant_id)
        ppos = self._positions(pairs)
        in_cur = self._test(cur.bits[0], ppos)
        if in_cur.all():
            return
        in_old = self._test(old.bits[0], ppos) if old is not None else np.zeros_like(in_cur)
        todo = ~in_cur
        fpos = self._positions(fp[todo])
        level = np.maximum(self._levels(cur, fpos), self._levels(old, fpos))
        # A new tenant promotes the fingerprint; a pair known only to the old generation is copied
        # forward at its level, so text in steady use is never forgotten.
        new_level = np.where(in_old[todo], np.maximum(level, 1), np.minimum(level + 1, self.levels))
        self._set(0, ppos[:, todo])
        for lvl in range(1, self.levels + 1):
            sel = new_level >= lvl
            if sel.any():
                self._set(lvl, fpos[:, sel])
        cur.inserts += int(todo.sum())

    def _add_native(
        self, cur: _Generation, old: _Generation | None, hashes: list[int] | np.ndarray, tenant: str
    ) -> None:
        """`add` in one C pass (detectors/_winnow_spread.h): the same bits, inserts and noted offsets."""
        note = self._touched is not None
        nbytes = cur.bits.shape[1]
        todo, rows = _winnow.spread_add(
            cur.bits, None if old is None else old.bits, _keys(hashes), int(self._tenant_key(tenant)), nbytes,
            int(self._mask), self.probes, note,
        )  # fmt: skip
        if not todo:
            return
        cur.inserts += todo
        if rows is not None and self._touched is not None:
            for row, raw in enumerate(rows):
                if raw:
                    offsets = np.frombuffer(raw, dtype=np.uint32)
                    self._touched.append((row, offsets))
                    self._touched_n += offsets.size
            if self._touched_n > nbytes // 2:  # as `_set`: 4-byte offsets, at most 2 rows of memory
                self._touched = None

    def tenants(self, hashes: list[int] | np.ndarray) -> np.ndarray:
        """Distinct tenants that had each fingerprint over the horizon (0..levels, levels meaning that many or more)."""
        if self.native and NATIVE and self._cur is not None:
            old = self._old
            levels = _winnow.spread_levels(
                self._cur.bits, None if old is None else old.bits, _keys(hashes), self._cur.bits.shape[1],
                int(self._mask), self.probes,
            )  # fmt: skip
            return np.frombuffer(levels, dtype=np.int8)
        fp = np.asarray(hashes, dtype=np.uint64)
        if self._cur is None or fp.size == 0:
            return np.zeros(fp.size, dtype=np.int8)
        fpos = self._positions(fp)
        return np.maximum(self._levels(self._cur, fpos), self._levels(self._old, fpos))

    def had(self, tenant_id: str, hashes: list[int] | np.ndarray) -> np.ndarray:
        """Whether `tenant_id` itself had each fingerprint before (over the horizon)."""
        if self.native and NATIVE and self._cur is not None:
            old = self._old
            had = _winnow.spread_had(
                self._cur.bits, None if old is None else old.bits, _keys(hashes), int(self._tenant_key(tenant_id)),
                self._cur.bits.shape[1], int(self._mask), self.probes,
            )  # fmt: skip
            return np.frombuffer(had, dtype=np.bool_)
        fp = np.asarray(hashes, dtype=np.uint64)
        if self._cur is None or fp.size == 0:
            return np.zeros(fp.size, dtype=bool)
        ppos = self._positions(fp ^ self._tenant_key(tenant_id))
        seen = self._test(self._cur.bits[0], ppos)
        if self._old is not None:
            seen |= self._test(self._old.bits[0], ppos)
        return seen

    def tag(self, label: str, hashes: list[int] | np.ndarray, ts: float) -> None:
        """Note a property of these fingerprints (`label`, e.g. authored in a prompt) without counting a tenant: only
        the pair row is set, with a key no tenant id can have, so levels and `tenants()` are untouched."""
        if len(hashes) == 0:
            return
        self._rotate(ts)
        cur = self._cur
        assert cur is not None
        if self.native and NATIVE:  # one C pass (detectors/_winnow_spread.h): the same bits, inserts and note
            note = self._touched is not None
            fresh, raw = _winnow.spread_tag(
                cur.bits, _keys(hashes), int(self._tenant_key("\x00" + label)), cur.bits.shape[1], int(self._mask),
                self.probes, note,
            )  # fmt: skip
            cur.inserts += fresh
            if raw and self._touched is not None:
                offsets = np.frombuffer(raw, dtype=np.uint32)
                self._touched.append((0, offsets))
                self._touched_n += offsets.size
                if self._touched_n > cur.bits.shape[1] // 2:  # as `_set`
                    self._touched = None
            return
        pos = self._positions(np.asarray(hashes, dtype=np.uint64) ^ self._tenant_key("\x00" + label))
        new = ~self._test(cur.bits[0], pos)
        if new.any():
            self._set(0, pos[:, new])
            cur.inserts += int(new.sum())

    def tagged(self, label: str, hashes: list[int] | np.ndarray) -> np.ndarray:
        """Whether each fingerprint was tagged `label` (over the horizon; false positives at the pair rate)."""
        return self.had("\x00" + label, hashes)

    def false_positive_rate(self) -> float:
        """The current generation's bound f = (1 - e^(-h n / m))^h for the fullest filter (pairs)."""
        if self._cur is None:
            return 0.0
        m = float(1 << self.bits_log2)
        return float((1.0 - np.exp(-self.probes * self._cur.inserts / m)) ** self.probes)

    # --- incremental copies ----------------------------------------------------------------------
    def mark(self) -> None:
        """Start noting changes afresh: `changes()` is relative to the state at this call."""
        self._touched = [] if self._cur is not None else None
        self._touched_n = 0

    def changes(self) -> SpreadChanges | None:
        """The current generation's changed bytes since `mark()`; None if only a whole copy will do (never
        marked, nothing recorded yet, a rotation since, or more changes than the note holds)."""
        if self._touched is None or self._cur is None:
            return None
        cur = self._cur
        rows = []
        for row in range(self.levels + 1):
            parts = [offsets for r, offsets in self._touched if r == row]
            if parts:
                # A bitmap over the row instead of np.unique: linear, and the row is a fixed, small size.
                seen = np.zeros(cur.bits.shape[1], dtype=bool)
                for offsets in parts:
                    seen[offsets] = True
                offsets = np.flatnonzero(seen).astype(np.uint32)
                rows.append((row, offsets, cur.bits[row, offsets]))
        return SpreadChanges(cur.inserts, rows)

    def replay(self, changes: SpreadChanges) -> None:
        """Write `changes()` taken from another record into a copy of it as it was at its mark."""
        if self._cur is None:
            raise ValueError("spread changes applied to a record without a generation")
        for row, offsets, values in changes.rows:
            self._cur.bits[row, offsets] = values
        self._cur.inserts = changes.inserts

    @staticmethod
    def pack(changes: SpreadChanges) -> tuple[int, list[tuple[int, np.ndarray, np.ndarray]]] | tuple[()]:
        """`changes()` as stored: each row's offsets as their gaps (sorted offsets: small numbers, about a byte each
        compressed), or () when no bit was set (then no insert was counted either)."""
        if not changes.rows:
            return ()
        return changes.inserts, [
            (row, np.diff(offsets, prepend=np.uint32(0)), vals) for row, offsets, vals in changes.rows
        ]

    @staticmethod
    def unpack(packed: tuple[int, list[tuple[int, np.ndarray, np.ndarray]]]) -> SpreadChanges:
        inserts, rows = packed
        return SpreadChanges(inserts, [(row, np.cumsum(gaps, dtype=np.uint64), vals) for row, gaps, vals in rows])

    def __getstate__(self) -> dict[str, object]:
        state = self.__dict__.copy()
        state["_touched"] = None  # what changed since a mark is not part of a copy
        state["_touched_n"] = 0
        state["_tenant_keys"] = {}  # a cache of hashes, recomputed on use
        return state

    def state_size(self) -> dict[str, int]:
        gens = [g for g in (self._cur, self._old) if g is not None]
        return {
            "spread_bytes": sum(g.bits.nbytes for g in gens),
            "spread_inserts": sum(g.inserts for g in gens),
        }
