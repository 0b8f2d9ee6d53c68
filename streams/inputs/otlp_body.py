"""Reading an OTLP/HTTP request body with bounded memory and time (streams.inputs.otlp_receiver).

aiohttp's own decompression is off: it inflated a gzip bomb chunk by chunk without bound, so that 16
concurrent 1 MB bombs held 2 GB before any size check could refuse them. Here the body is inflated as
it streams with zlib's max_length, so no request ever holds more than `limit` + one chunk, and the
bytes buffered by all requests together stay under a shared budget (beyond it: 503, which OTLP
exporters retry with backoff).
"""

from __future__ import annotations

import asyncio
import ctypes
import ctypes.util
import time
import zlib
from typing import Any

CHUNK = 64 * 1024
BIG = 1 << 20  # a request that buffered this much is worth giving memory back after


def _libc_trim() -> Any:
    try:
        return ctypes.CDLL(ctypes.util.find_library("c") or "libc.so.6").malloc_trim
    except (OSError, AttributeError):  # not glibc: nothing to call, the allocator keeps what it keeps
        return None


_MALLOC_TRIM = _libc_trim()


class BodyError(Exception):
    """The body cannot be taken; `status` is the HTTP answer, `reason` the counter."""

    def __init__(self, status: int, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.status = status
        self.reason = reason
        self.detail = detail


def too_large(limit: int) -> BodyError:
    return BodyError(413, "oversized", f"body larger than {limit} bytes")


class Inflater:
    """gzip (members one after another, as RFC 1952 allows) or zlib-wrapped deflate, inflated into `out`
    never beyond `limit` bytes: zlib's max_length stops each step at the room left, and at STEP bytes, so
    that the caller can let the event loop run between steps (inflating 16 MiB takes ~80 ms of CPU)."""

    STEP = 1 << 20

    def __init__(self, encoding: str, out: bytearray, limit: int) -> None:
        self.wbits = 31 if encoding in ("gzip", "x-gzip") else 15
        self.d: Any = zlib.decompressobj(self.wbits)
        self.out = out
        self.limit = limit
        self.pending = b""  # compressed input not inflated yet

    def step(self) -> int:
        """Inflate some of `pending` (at most STEP bytes out); returns the bytes added to `out`."""
        try:
            room = min(self.limit - len(self.out) + 1, self.STEP)  # >= 1: max_length 0 would mean no limit
            piece = self.d.decompress(self.pending, room)
            self.out += piece
            if len(self.out) > self.limit:
                raise too_large(self.limit)
            self.pending = self.d.unconsumed_tail
            if self.d.eof and not self.pending and self.d.unused_data:
                # the next gzip member (or trailing garbage, which zlib then refuses)
                self.pending = self.d.unused_data
                self.d = zlib.decompressobj(self.wbits)
        except zlib.error:
            raise BodyError(400, "bad_encoding", "the body is not valid for its Content-Encoding") from None
        return len(piece)

    def finish(self) -> None:
        if not self.d.eof:
            raise BodyError(400, "bad_encoding", "the compressed body ends early")


class Budget:
    """Bytes buffered by all requests being read or mapped; one event loop thread takes and returns them.

    When the last big body is let go, the allocator is asked to hand its free pages back (glibc keeps freed
    heap, and raises its mmap threshold after big frees, so 16 bombs in a row left ~1 GB resident)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self.used = 0
        self.big_since_trim = False
        self._last_trim = 0.0

    def release(self, big: bool) -> None:
        """A request has ended; `big`: it buffered BIG bytes or more (or was refused for size)."""
        self.big_since_trim |= big
        now = time.monotonic()
        if self.big_since_trim and self.used == 0 and now - self._last_trim > 0.5 and _MALLOC_TRIM is not None:
            self.big_since_trim = False
            self._last_trim = now
            _MALLOC_TRIM(0)

    def take(self, n: int) -> None:
        if self.used + n > self.limit:
            raise BodyError(503, "busy", "too many request bytes in flight; retry later")
        self.used += n

    def give(self, n: int) -> None:
        self.used -= n


async def read_body(content: Any, encoding: str, limit: int, timeout_s: float, budget: Budget) -> bytearray:
    """The whole (inflated) body of a request from its aiohttp StreamReader `content`. BodyError for a body
    over `limit`, an unknown or broken encoding, one not read whole within `timeout_s` (408), or a full
    budget (503). On success the caller owns `len(result)` bytes of the budget and must give them back."""
    encoding = encoding.strip().lower()
    if encoding not in ("", "identity", "gzip", "x-gzip", "deflate"):
        raise BodyError(415, "bad_encoding", f"Content-Encoding {encoding[:32]!r} is not gzip, deflate or identity")
    out = bytearray()
    inflater = Inflater(encoding, out, limit) if encoding not in ("", "identity") else None
    wire = held = 0
    try:
        async with asyncio.timeout(timeout_s):
            while chunk := await content.read(CHUNK):
                wire += len(chunk)
                if wire > limit:
                    raise too_large(limit)
                if inflater is None:
                    out += chunk
                    budget.take(len(chunk))
                    held += len(chunk)
                    continue
                inflater.pending = chunk
                while inflater.pending:
                    added = inflater.step()
                    budget.take(added)
                    held += added
                    await asyncio.sleep(0)  # /health and the other requests between steps
        if inflater is not None:
            inflater.finish()
    except TimeoutError:
        budget.give(held)
        raise BodyError(408, "body_timeout", f"body not received within {timeout_s:g} s") from None
    except BaseException:
        budget.give(held)
        raise
    return out
