"""Freed heap memory handed back to the system, for the processes that run for days (issue 42, the soak).

CPython gives every allocation above 512 bytes to the C allocator. glibc's malloc serves a large block from its
heap once the block's size is under its mmap threshold, and that threshold rises to the largest block freed so far
(up to 32 MiB): a worker that pickles, compresses and sends checkpoints of several MiB ends up with all of them on
the heap, and memory freed in the middle of a heap stays resident. Python's own accounting (tracemalloc) sees the
live objects only, and stays flat while the process grows.

`tune()` fixes both thresholds (blocks of `threshold` bytes or more are mapped on their own and unmapped when freed;
a heap top over it is given back), `trim()` asks glibc to give back every free page (`malloc_trim(0)`). Both are
no-ops, returning False, where the C library is not glibc (musl, macOS).
"""

from __future__ import annotations

import ctypes
import sys
from typing import Any

M_TRIM_THRESHOLD = -1  # glibc's mallopt parameters (malloc.h)
M_MMAP_THRESHOLD = -3
_NOT_LOADED: Any = object()
_libc: Any = _NOT_LOADED


def _glibc() -> Any:
    global _libc
    if _libc is _NOT_LOADED:
        _libc = None
        if sys.platform.startswith("linux"):
            try:
                libc = ctypes.CDLL("libc.so.6")
                if hasattr(libc, "malloc_trim") and hasattr(libc, "mallopt"):
                    _libc = libc
            except OSError:
                pass
    return _libc


def tune(threshold: int = 128 << 10) -> bool:
    """Fixed mmap and trim thresholds of `threshold` bytes (glibc's dynamic mmap threshold off)."""
    libc = _glibc()
    if libc is None:
        return False
    return bool(libc.mallopt(M_MMAP_THRESHOLD, threshold)) and bool(libc.mallopt(M_TRIM_THRESHOLD, threshold))


def trim() -> bool:
    """Give every free page of the heaps back to the system; True if glibc released any."""
    libc = _glibc()
    return bool(libc is not None and libc.malloc_trim(0))
