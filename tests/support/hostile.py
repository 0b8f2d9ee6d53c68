"""Hostile HTTP peers on loopback, for the scraper's and the prober's resource limits (issue 25).

One aiohttp server; the first path segment picks the behaviour, so that `http://127.0.0.1:PORT/<mode>` is a
scrape target (`/<mode>/metrics`, `/<mode>/v1/models`) and `http://127.0.0.1:PORT/<mode>/v1` a probe base URL
(`/<mode>/v1/models`, `/<mode>/v1/chat/completions`). Bodies are generated as they are sent, from one reused
chunk: the server itself never holds a large body (in-process tests measure the client's memory).

Scrape modes (`/<mode>/metrics`):
  ok        a valid SGLang exposition text (capacity 681,280)
  drip      200, then one byte every `drip_s` seconds, forever
  endless   valid-looking metric lines forever, at most `rate` bytes per second
  big       `big_bytes` bytes with a Content-Length: the valid text first, then filler histogram lines
  gzip      Content-Encoding: gzip whatever was asked, `big_bytes` of filler lines compressed (a bomb)
Probe modes (`/<mode>/v1/chat/completions`; /models advertises `window`, 10^15 for `hugewindow`):
  ok          a short SSE answer
  endless-sse SSE token chunks forever
  slow-sse    one SSE token every `drip_s` seconds, forever
  big-event   one SSE event of `big_bytes` bytes, then [DONE]
  huge-length 200 with Content-Length 10 GB, SSE token chunks as fast as the client reads
  echo-upper  400 whose message quotes the prompt upper-cased
  echo-bare   400 whose message quotes the markers' random parts without their prefix (and cut short)
"""

from __future__ import annotations

import asyncio
import re
import threading
import zlib
from collections import Counter
from typing import Any

import orjson
from aiohttp import web

from tests.support.engines import sglang_text

_FILLER_LINE = b'sglang:e2e_request_latency_seconds_bucket{le="0.1",model_name="glm-5.3",tp_rank="0"} 1.0\n'
_MARKER = re.compile(r"[A-Za-z][A-Za-z0-9-]*-([0-9a-f]{24,})")


def _sse(obj: dict[str, Any]) -> bytes:
    return b"data: " + orjson.dumps(obj) + b"\n\n"


def _chunk(content: str, finish: str | None = None) -> bytes:
    choice = {"index": 0, "delta": {"content": content}, "finish_reason": finish}
    return _sse({"id": "c", "object": "chat.completion.chunk", "created": 0, "model": "m", "choices": [choice]})


class HostileServer:
    """The server on a background event loop; `sent[mode]` counts the body bytes written per mode."""

    def __init__(
        self,
        *,
        drip_s: float = 3.0,
        rate: int = 5_000_000,
        big_bytes: int = 300 * 2**20,
        window: int = 8192,
        port: int = 0,
    ) -> None:
        self.drip_s, self.rate, self.big_bytes, self.window = drip_s, rate, big_bytes, window
        self.sent: Counter[str] = Counter()
        self.prompts: list[str] = []
        self._bomb_body: bytes | None = None
        self._loop = asyncio.new_event_loop()
        self._runner: web.AppRunner | None = None
        threading.Thread(target=self._loop.run_forever, name="hostile-http", daemon=True).start()
        self.port = asyncio.run_coroutine_threadsafe(self._boot(port), self._loop).result(10)
        self.base = f"http://127.0.0.1:{self.port}"

    def url(self, mode: str) -> str:
        return f"{self.base}/{mode}"

    def close(self) -> None:
        if self._runner is not None:
            asyncio.run_coroutine_threadsafe(self._runner.cleanup(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)

    def __enter__(self) -> HostileServer:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    async def _boot(self, port: int) -> int:
        app = web.Application()
        app.router.add_get("/{mode}/metrics", self._metrics)
        app.router.add_get("/{mode}/v1/models", self._models)
        app.router.add_post("/{mode}/v1/chat/completions", self._chat)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, "127.0.0.1", port)
        await site.start()
        return int(site._server.sockets[0].getsockname()[1])  # type: ignore[union-attr]

    async def _write(self, resp: web.StreamResponse, mode: str, data: bytes) -> None:
        try:
            await resp.write(data)
        except ConnectionError:  # the client stopped reading, as it should: end this handler quietly
            raise asyncio.CancelledError from None
        self.sent[mode] += len(data)

    # --- scrape targets ---------------------------------------------------------------------------------
    async def _metrics(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        head = sglang_text(681_280, 612_000).encode()
        if mode == "ok":
            return web.Response(body=head, content_type="text/plain")
        if mode == "gzip":
            body = await asyncio.get_running_loop().run_in_executor(None, self._bomb)
            return await self._write_all(request, mode, body, {"Content-Encoding": "gzip"})
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4"})
        if mode == "big":
            resp.content_length = self.big_bytes
        await resp.prepare(request)
        if mode == "drip":
            while True:
                await self._write(resp, mode, b"#")
                await asyncio.sleep(self.drip_s)
        block = _FILLER_LINE * (65536 // len(_FILLER_LINE))
        if mode == "big":
            await self._write(resp, mode, head)
            left = self.big_bytes - len(head)
            while left > 0:
                piece = block[:left]
                await self._write(resp, mode, piece)
                left -= len(piece)
            return resp
        await self._write(resp, mode, head)  # endless
        while True:
            await self._write(resp, mode, block)
            await asyncio.sleep(len(block) / self.rate)

    def _bomb(self) -> bytes:
        if self._bomb_body is None:
            z = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip framing
            block = _FILLER_LINE * (2**20 // len(_FILLER_LINE))
            parts = [z.compress(sglang_text(681_280, 612_000).encode())]
            parts += [z.compress(block) for _ in range(self.big_bytes // len(block))]
            self._bomb_body = b"".join([*parts, z.flush()])
        return self._bomb_body

    async def _write_all(
        self, request: web.Request, mode: str, body: bytes, headers: dict[str, str]
    ) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/plain; version=0.0.4", **headers})
        resp.content_length = len(body)
        await resp.prepare(request)
        await self._write(resp, mode, body)
        await resp.write_eof()
        return resp

    async def _models(self, request: web.Request) -> web.Response:
        mode = request.match_info["mode"]
        window = 10**15 if mode == "hugewindow" else self.window
        card = {"id": "m", "object": "model", "owned_by": "hostile", "max_model_len": window}
        return web.json_response({"object": "list", "data": [card]})

    # --- probe endpoints --------------------------------------------------------------------------------
    async def _chat(self, request: web.Request) -> web.StreamResponse:
        mode = request.match_info["mode"]
        body = await request.json()
        prompt = str(body["messages"][0]["content"])
        self.prompts.append(prompt[:4096])
        if mode in ("echo-upper", "echo-bare"):
            if mode == "echo-upper":
                quoted = prompt.split("verbatim.", 1)[-1][:600].upper()  # past the shared preamble
            else:
                # the random parts bare, and cut to 12 digits upper-cased
                quoted = " ".join(f"{r} {r[:12].upper()}" for r in {m.group(1) for m in _MARKER.finditer(prompt)})
            msg = f"prompt rejected by policy: {quoted}"
            return web.json_response({"error": {"message": msg, "type": "invalid_request_error"}}, status=400)
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        if mode == "huge-length":
            resp.content_length = 10 * 10**9
        await resp.prepare(request)
        if mode in ("ok", "hugewindow"):
            for word in ("hello", " world"):
                await self._write(resp, mode, _chunk(word))
            await self._write(resp, mode, _chunk("", "stop") + b"data: [DONE]\n\n")
            return resp
        if mode == "big-event":
            await self._big_event(resp, mode)
            return resp
        token = _chunk(" tok")
        while True:  # endless-sse, slow-sse, huge-length
            await self._write(resp, mode, token * (1 if mode == "slow-sse" else 64))
            await asyncio.sleep(self.drip_s if mode == "slow-sse" else 0.001)

    async def _big_event(self, resp: web.StreamResponse, mode: str) -> None:
        """One `data:` line of big_bytes: a chunk whose delta content is that many letters."""
        head, tail = _chunk("@@").split(b"@@")
        await self._write(resp, mode, head)
        block = b"a" * 65536
        left = self.big_bytes
        while left > 0:
            piece = block[:left]
            await self._write(resp, mode, piece)
            left -= len(piece)
        await self._write(resp, mode, tail + b"data: [DONE]\n\n")


def main() -> None:
    """`python -m tests.support.hostile [--big-bytes N] ...`: print the base URL, serve until killed (the RSS
    measurements run the server in a process of its own)."""
    import argparse
    import time

    p = argparse.ArgumentParser()
    p.add_argument("--drip-s", type=float, default=3.0)
    p.add_argument("--rate", type=int, default=5_000_000)
    p.add_argument("--big-bytes", type=int, default=300 * 2**20)
    a = p.parse_args()
    srv = HostileServer(drip_s=a.drip_s, rate=a.rate, big_bytes=a.big_bytes)
    print(srv.base, flush=True)
    try:
        while True:
            time.sleep(3600)
    finally:
        srv.close()


if __name__ == "__main__":
    main()
