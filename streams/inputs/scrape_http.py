"""Bounded HTTP reads for `crosstalk scrape` and the probe's pool lookup: a body is streamed, fed on in
pieces, and cut at a byte cap; the caller bounds the time (asyncio.timeout: httpx's own timeout is per
read, and a peer dripping one byte every few seconds never trips it).

A scrape asks for `Accept-Encoding: identity` (Prometheus client libraries compress only when asked), so
the cap counts what crosses the wire; an answer compressed all the same is refused unread (`compressed`):
its decoded size could be a thousand times its size on the wire.
"""

from __future__ import annotations

from collections.abc import Callable

import httpx
import orjson

from streams.inputs.engine_metrics import NEEDED, ExpositionFilter

MODELS_MAX_BYTES = 2**20  # a /v1/models answer listing thousands of models is still far below this


class FetchError(Exception):
    """A read that did not give a body: `reason` is a failure label (unreachable, http_error, too_large,
    compressed)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _declared_length(headers: httpx.Headers) -> int | None:
    raw = headers.get("content-length", "")
    return int(raw) if raw.isdigit() and len(raw) < 20 else None


async def fetch(client: httpx.AsyncClient, url: str, max_bytes: int, feed: Callable[[bytes], None]) -> None:
    """GET url, handing each received piece of the body to `feed`; FetchError past max_bytes or on failure."""
    try:
        async with client.stream("GET", url, headers={"Accept-Encoding": "identity"}) as r:
            if not r.is_success:
                raise FetchError("http_error", f"GET {url}: HTTP {r.status_code}")
            declared = _declared_length(r.headers)
            if declared is not None and declared > max_bytes:
                raise FetchError("too_large", f"GET {url}: Content-Length {declared:,} over the {max_bytes:,}-byte cap")
            encoding = r.headers.get("content-encoding", "identity").strip().lower()
            if encoding not in ("", "identity"):
                # Its decoded size is not what crosses the wire (a gzip bomb): not read.
                raise FetchError("compressed", f"GET {url}: {encoding[:20]} answer although identity was asked for")
            got = 0
            async for chunk in r.aiter_raw():
                got += len(chunk)
                if got > max_bytes:
                    raise FetchError("too_large", f"GET {url}: body over the {max_bytes:,}-byte cap")
                feed(chunk)
    except (httpx.HTTPError, httpx.InvalidURL, httpx.StreamError) as exc:
        raise FetchError("unreachable", f"GET {url}: {type(exc).__name__}: {exc}"[:300]) from None


async def fetch_exposition(client: httpx.AsyncClient, url: str, engine: str, max_bytes: int) -> str:
    """The lines of `engine`'s needed metric families from url's exposition text (MetricsError when bad)."""
    keep = ExpositionFilter(NEEDED[engine])
    await fetch(client, url, max_bytes, keep.feed)
    return keep.text()


async def fetch_json(client: httpx.AsyncClient, url: str, max_bytes: int = MODELS_MAX_BYTES) -> object:
    """A small JSON document (orjson: a nesting bomb is a JSONDecodeError, not a RecursionError)."""
    body = bytearray()
    await fetch(client, url, max_bytes, body.extend)
    return orjson.loads(body)
