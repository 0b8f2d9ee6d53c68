"""The probe's HTTP client: the official `openai` SDK over an httpx client whose transport caps every answer.

The SDK reads whatever the endpoint sends: a /models answer or an error body whole, an SSE event line
whole. A hostile or broken endpoint (a 10 GB Content-Length, a 200 MB SSE event, an endless stream) must
cost the probe at most `probe.max_response_bytes` per answer. The transport refuses a declared length
over the cap before reading, counts the bytes as they arrive and ends the read past it, and asks for
uncompressed answers (a compressed one is refused: its decoded size is not what crosses the wire). Time
is bounded by the caller (`asyncio.timeout`), since httpx's timeout is per read.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any, cast

import httpx
import openai


class ResponseTooLarge(httpx.ReadError):
    """An answer over the byte cap (a ReadError, so that the SDK treats it as a failed read, not a bug)."""


class _CappedStream(httpx.AsyncByteStream):
    def __init__(self, inner: httpx.AsyncByteStream, max_bytes: int, request: httpx.Request) -> None:
        self._inner, self._max, self._request = inner, max_bytes, request

    async def __aiter__(self) -> AsyncIterator[bytes]:
        got = 0
        async for chunk in self._inner:
            got += len(chunk)
            if got > self._max:
                raise ResponseTooLarge(
                    f"answer over the {self._max:,}-byte cap: not read further", request=self._request
                )
            yield chunk

    async def aclose(self) -> None:
        await self._inner.aclose()


class CappedTransport(httpx.AsyncBaseTransport):
    def __init__(self, max_bytes: int, inner: httpx.AsyncBaseTransport | None = None) -> None:
        self.max_bytes = max_bytes
        self._inner = inner or httpx.AsyncHTTPTransport()

    async def handle_async_request(self, request: httpx.Request) -> httpx.Response:
        request.headers["Accept-Encoding"] = "identity"
        resp = await self._inner.handle_async_request(request)
        raw = resp.headers.get("content-length", "")
        declared = int(raw) if raw.isdigit() and len(raw) < 20 else None
        encoding = resp.headers.get("content-encoding", "identity").strip().lower()
        problem = None
        if declared is not None and declared > self.max_bytes:
            problem = f"answer of {declared:,} bytes (Content-Length) over the {self.max_bytes:,}-byte cap: not read"
        elif encoding not in ("", "identity"):
            problem = f"answer compressed ({encoding[:20]}) although identity was asked for: not read"
        if problem is not None:
            await resp.aclose()
            raise ResponseTooLarge(problem, request=request)
        assert isinstance(resp.stream, httpx.AsyncByteStream)
        return httpx.Response(
            resp.status_code,
            headers=resp.headers,
            stream=_CappedStream(resp.stream, self.max_bytes, request),
            extensions=resp.extensions,
            request=request,
        )

    async def aclose(self) -> None:
        await self._inner.aclose()


def client(base_url: str, api_key: str, timeout_s: float, max_bytes: int) -> openai.AsyncOpenAI:
    """An SDK client whose every answer is capped at max_bytes (timeout_s: httpx's, per connect and read)."""
    http = httpx.AsyncClient(transport=CappedTransport(max_bytes), timeout=timeout_s)
    # The SDK takes an httpx client in every version (openai 2+ also its own httpx2's; typed as that one).
    return openai.AsyncOpenAI(
        base_url=base_url, api_key=api_key, max_retries=0, timeout=timeout_s, http_client=cast(Any, http)
    )


def too_large(exc: BaseException) -> ResponseTooLarge | None:
    """The cap's error behind an SDK exception (APIConnectionError wraps it), if that is what it is."""
    seen: BaseException | None = exc
    for _ in range(4):
        if seen is None:
            return None
        if isinstance(seen, ResponseTooLarge):
            return seen
        seen = seen.__cause__ or seen.__context__
    return None
