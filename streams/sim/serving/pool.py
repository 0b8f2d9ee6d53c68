"""Paged KV pools of the test engine, and the prefill side's prefix cache.

A page holds `page_size` tokens' KV of one tenant. Freeing a page does not clear it (no real engine
zeroes KV memory), so a page read without being written first yields whatever request used it last:
that is the stale state every leak in this engine comes from. Free pages are reused most recently
freed first, in the order they were used, as a LIFO free list in a paged allocator does.
"""

from __future__ import annotations

from collections import OrderedDict, deque
from dataclasses import dataclass, field


@dataclass(slots=True)
class Page:
    tokens: tuple[str, ...] = ()
    owner: str | None = None  # the tenant whose KV was written here last


class PagedPool:
    def __init__(self, capacity_tokens: int, page_size: int) -> None:
        if page_size < 1 or capacity_tokens < page_size:
            raise ValueError("a pool needs at least one page")
        self.page_size = page_size
        self.num_pages = capacity_tokens // page_size
        self.pages = [Page() for _ in range(self.num_pages)]
        self.free: deque[int] = deque(range(self.num_pages))

    @property
    def capacity_tokens(self) -> int:
        return self.num_pages * self.page_size

    def pages_for(self, tokens: int) -> int:
        return max(1, -(-tokens // self.page_size))

    def alloc(self, n: int) -> list[int]:
        if n > len(self.free):
            raise MemoryError(f"{n} pages requested, {len(self.free)} free")
        free = self.free
        return [free.popleft() for _ in range(n)]

    def release(self, ids: list[int]) -> None:
        # Pushed back so that the next alloc() gets them first and in the same order.
        self.free.extendleft(reversed(ids))

    def write(self, ids: list[int], tokens: list[str], owner: str, start: int = 0) -> None:
        ps = self.page_size
        for j, pid in enumerate(ids):
            page = self.pages[pid]
            page.tokens = tuple(tokens[start + j * ps : start + (j + 1) * ps])
            page.owner = owner

    def copy_from(self, ids: list[int], src: list[Page]) -> None:
        """KV transfer: page contents of another pool into these pages."""
        for pid, page in zip(ids, src, strict=True):
            dst = self.pages[pid]
            dst.tokens = page.tokens
            dst.owner = page.owner

    def read(self, ids: list[int]) -> list[Page]:
        return [self.pages[pid] for pid in ids]

    @property
    def used_pages(self) -> int:
        return self.num_pages - len(self.free)


@dataclass(slots=True)
class CacheEntry:
    tokens: tuple[str, ...]  # the full-page prefix these pages hold
    pages: list[int]
    owner: str
    pins: int = 0
    dropped: bool = False  # replaced under its key while pinned: released when unpinned
    hits: int = field(default=0)


class PrefixCache:
    """Finished prompts' pages kept for reuse (SGLang's radix cache, flattened to whole prompts).

    `key_tokens=None` is the correct cache: a new prompt reuses an entry's pages only for full pages
    whose tokens are equal. `key_tokens=K` is the prefix-collision bug: entries are looked up by the
    first K tokens only, and a hit serves the entry's pages for as much of the new prompt as they
    cover, whatever those pages hold (a page-table mix-up between prompts that merely start alike).
    """

    def __init__(self, pool: PagedPool, key_tokens: int | None, max_entries: int = 256) -> None:
        self.pool = pool
        self.key_tokens = key_tokens
        self.max_entries = max_entries
        self.entries: OrderedDict[object, CacheEntry] = OrderedDict()
        self._next = 0

    def _key(self, tokens: list[str] | tuple[str, ...]) -> object:
        if self.key_tokens is None:
            self._next += 1
            return self._next
        return tuple(tokens[: self.key_tokens])

    def lookup(self, tokens: list[str]) -> tuple[CacheEntry | None, int]:
        """The entry to reuse and how many of its pages serve the new prompt."""
        ps = self.pool.page_size
        full = len(tokens) // ps
        if full == 0:
            return None, 0
        if self.key_tokens is not None:
            if len(tokens) < self.key_tokens:
                return None, 0
            entry = self.entries.get(tuple(tokens[: self.key_tokens]))
            if entry is None:
                return None, 0
            return entry, min(len(entry.pages), full)
        best: tuple[CacheEntry | None, int] = (None, 0)
        for entry in reversed(self.entries.values()):
            n = 0
            limit = min(full, len(entry.pages))
            while n < limit and entry.tokens[n * ps : (n + 1) * ps] == tuple(tokens[n * ps : (n + 1) * ps]):
                n += 1
            if n > best[1]:
                best = (entry, n)
        return best

    def touch(self, entry: CacheEntry) -> None:
        for key, e in self.entries.items():
            if e is entry:
                self.entries.move_to_end(key)
                return

    def insert(self, tokens: list[str], pages: list[int], owner: str) -> CacheEntry:
        key = self._key(tokens)
        old = self.entries.pop(key, None)
        if old is not None:
            self._drop(old)
        entry = CacheEntry(tuple(tokens[: len(pages) * self.pool.page_size]), pages, owner)
        self.entries[key] = entry
        while len(self.entries) > self.max_entries and self.evict_one():
            pass
        return entry

    def _drop(self, entry: CacheEntry) -> None:
        if entry.pins:
            entry.dropped = True
        else:
            self.pool.release(entry.pages)

    def unpin(self, entry: CacheEntry) -> None:
        entry.pins -= 1
        if entry.pins == 0 and entry.dropped:
            entry.dropped = False
            self.pool.release(entry.pages)

    def evictable_pages(self) -> int:
        return sum(len(e.pages) for e in self.entries.values() if not e.pins)

    def evict_one(self) -> bool:
        for key, entry in self.entries.items():  # least recently used first
            if not entry.pins:
                del self.entries[key]
                self.pool.release(entry.pages)
                return True
        return False

    def make_room(self, pages: int) -> bool:
        while len(self.pool.free) < pages:
            if not self.evict_one():
                return False
        return True
