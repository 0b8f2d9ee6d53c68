"""What the worker reads of an input message besides its value: its headers, and how a fetched batch is sliced."""

from __future__ import annotations

from typing import Any

from schemas.events import NDJSON_CONTENT_TYPE
from streams.routing import PLACED

# The direct stage reads a fetched batch in slices of about this many bytes of input, sending each slice's alerts before
# reading the next: a fetch of 500 text-rich events took ~0.3 s to read, and the first event's alert waited for all
# of it (the text-rich p99 at the edge of the sustained rate). Bytes stand for the time a slice takes: text costs
# by its size, and batched text-free messages are many events each.
SLICE_BYTES = 256 << 10


def slices(ms: list[Any], limit: int) -> list[list[Any]]:
    """`ms` in order, cut into runs of at most `limit` bytes of value (a longer message is a run of its own)."""
    runs: list[list[Any]] = []
    run: list[Any] = []
    size = 0
    for m in ms:
        n = len(m.value or b"")
        if run and size + n > limit:
            runs.append(run)
            run, size = [], 0
        run.append(m)
        size += n
    if run:
        runs.append(run)
    return runs


def is_placed(headers: Any) -> bool:
    if not headers:
        return False
    items = headers.items() if isinstance(headers, dict) else headers
    return any(k == PLACED for k, _ in items)


def is_ndjson(headers: Any) -> bool:
    if not headers:
        return False
    items = headers.items() if isinstance(headers, dict) else headers
    return any(k.lower() == "content-type" and bytes(v).split(b";")[0].strip() == NDJSON_CONTENT_TYPE for k, v in items)
