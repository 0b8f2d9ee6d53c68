"""The test engine's HTTP shell: an OpenAI-compatible server (aiohttp) around `EngineCore`.

Endpoints: `POST /v1/chat/completions` (streaming SSE and not, `stream_options.include_usage`),
`GET /v1/models` (with `max_model_len`, as vLLM and SGLang advertise the window), `GET /metrics`
(SGLang's names, see metrics.py), `GET /health`, and `POST /admin/mode {"mode": ...}` (a "deploy").
The tenant is the bearer token (API key). Optionally every request/response of non-probe traffic and
the pools' cache_stats are emitted as crosstalk events, as an instrumented gateway and engine would;
requests marked `X-Crosstalk-Probe: 1` are left out because the prober reports its own.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import threading
import time
import uuid
from collections import Counter
from collections.abc import Callable
from typing import Any

import orjson
from aiohttp import web

from streams.sim.serving.core import EngineConfig, EngineCore, Job, Mode, Rejected
from streams.sim.serving.metrics import SglangCollector, TtftHistogram, exposition

EventCallback = Callable[[dict[str, Any]], None]
PROBE_HEADER = "X-Crosstalk-Probe"
MAX_OUTPUT_TOKENS = 4096
STREAM_CHUNK_TOKENS = 8


def _error(status: int, message: str, code: str, kind: str = "invalid_request_error") -> web.Response:
    body = {"error": {"message": message, "type": kind, "param": None, "code": code}}
    return web.json_response(body, status=status)


def _prompt_text(messages: Any) -> str:
    """The text of all messages, as the toy tokenizer sees it; ValueError on a malformed list."""
    if not isinstance(messages, list) or not messages:
        raise ValueError("'messages' must be a non-empty list")
    parts = []
    for m in messages:
        if not isinstance(m, dict):
            raise ValueError("each message must be an object")
        content = m.get("content")
        if isinstance(content, str):
            parts.append(content)
        elif isinstance(content, list):
            parts.extend(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
        elif content is not None:
            raise ValueError("message content must be a string or a list of parts")
    return "\n".join(parts)


class LiveEngine:
    def __init__(
        self,
        config: EngineConfig,
        mode: Mode = "fixed",
        *,
        on_event: EventCallback | None = None,
        stats_interval_s: float = 1.0,
    ) -> None:
        self.config = config
        self.core = EngineCore(config, mode)
        self.on_event = on_event
        self.stats_interval_s = stats_interval_s
        self.ttft = TtftHistogram()
        self.queued: dict[str, int] = {"prefill": 0}
        self.collector = SglangCollector(self.core, self.ttft, self.queued)
        self.role_collectors = {r: SglangCollector(self.core, self.ttft, self.queued, r) for r in ("prefill", "decode")}
        self.requests_by_tenant: Counter[str] = Counter()  # every chat request received, answered or not
        self.tokens_by_tenant: Counter[str] = Counter()  # prompt tokens received (engine tokens)
        self.leaks: list[tuple[str, frozenset[str]]] = []  # ground truth: (receiver, tenants whose pages it read)
        self._cond: asyncio.Condition | None = None
        self._seq = itertools.count(1)
        self._runner: web.AppRunner | None = None
        self._stats_task: asyncio.Task[None] | None = None
        self.base_url = ""

    # --- lifecycle ---------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=64 * 1024 * 1024)
        app.router.add_post("/v1/chat/completions", self.chat)
        app.router.add_get("/v1/models", self.models)
        app.router.add_get("/metrics", self.metrics)
        app.router.add_get("/metrics/{role}", self.metrics)
        app.router.add_get("/health", self.health)
        app.router.add_post("/admin/mode", self.admin_mode)
        return app

    async def start(self, host: str = "127.0.0.1", port: int = 0) -> str:
        self._cond = asyncio.Condition()
        self._runner = web.AppRunner(self.app(), access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, host, port)
        await site.start()
        server = site._server
        sockets = server.sockets if isinstance(server, asyncio.Server) else []
        bound = sockets[0].getsockname()[1] if sockets else port
        self.base_url = f"http://{host}:{bound}/v1"
        if self.on_event is not None:
            self.emit_stats()
            self._stats_task = asyncio.create_task(self._stats_loop())
        return self.base_url

    async def stop(self) -> None:
        if self._stats_task is not None:
            self._stats_task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._stats_task
        if self._runner is not None:
            await self._runner.cleanup()

    def set_mode(self, mode: Mode) -> None:
        self.core.set_mode(mode)

    # --- events ------------------------------------------------------------------------------------
    def _emit(self, event: dict[str, Any]) -> None:
        if self.on_event is not None:
            self.on_event(event)

    def emit_stats(self) -> None:
        core, c = self.core, self.config
        now = time.time()
        n = next(self._seq)
        for role, pool_cap, used in (
            ("prefill", core.prefill.capacity_tokens, core.prefill_used_tokens()),
            ("decode", core.decode.capacity_tokens, core.decode_used_tokens()),
        ):
            self._emit(
                {
                    "type": "cache_stats",
                    "event_id": f"eng-stats-{uuid.uuid4().hex[:12]}-{n}-{role}",
                    "ts": now,
                    "cache_domain": c.cache_domain,
                    "role": role,
                    "capacity_tokens": pool_cap,
                    "used_tokens": used,
                    "model": c.model,
                    "context_window": c.context_window,
                }
            )

    async def _stats_loop(self) -> None:
        while True:
            await asyncio.sleep(self.stats_interval_s)
            self.emit_stats()

    # --- handlers ----------------------------------------------------------------------------------
    async def health(self, request: web.Request) -> web.Response:
        return web.json_response({"status": "ok", "mode": self.core.mode})

    async def models(self, request: web.Request) -> web.Response:
        c = self.config
        card = {
            "id": c.model,
            "object": "model",
            "created": 0,
            "owned_by": "crosstalk-sim",
            "root": c.model,
            "max_model_len": c.context_window,
        }
        return web.json_response({"object": "list", "data": [card]})

    async def metrics(self, request: web.Request) -> web.Response:
        role = request.match_info.get("role")
        collector = self.collector if role is None else self.role_collectors.get(role)
        if collector is None:
            return _error(404, f"no {role} server here: /metrics, /metrics/prefill or /metrics/decode", "not_found")
        return web.Response(body=exposition(collector), content_type="text/plain", charset="utf-8")

    async def admin_mode(self, request: web.Request) -> web.Response:
        try:
            body = await request.json()
            self.set_mode(body["mode"])
        except (ValueError, KeyError, TypeError) as exc:
            return _error(400, f"bad mode request: {exc}", "bad_mode")
        return web.json_response({"mode": self.core.mode})

    def _tenant(self, request: web.Request) -> str | None:
        auth = request.headers.get("Authorization", "")
        if not auth.startswith("Bearer ") or not auth[7:].strip():
            return None
        return auth[7:].strip()[:128]

    async def chat(self, request: web.Request) -> web.StreamResponse:
        tenant = self._tenant(request)
        if tenant is None:
            return _error(401, "missing bearer API key", "invalid_api_key", "authentication_error")
        self.requests_by_tenant[tenant] += 1
        try:
            body = orjson.loads(await request.read())
            if not isinstance(body, dict):
                raise ValueError("the body must be a JSON object")
            text = _prompt_text(body.get("messages"))
            max_tokens = int(body.get("max_completion_tokens") or body.get("max_tokens") or 64)
            if not 1 <= max_tokens <= MAX_OUTPUT_TOKENS:
                raise ValueError(f"max_tokens must be within 1..{MAX_OUTPUT_TOKENS}")
        except (ValueError, TypeError, orjson.JSONDecodeError) as exc:
            return _error(400, str(exc), "invalid_request")
        tokens = text.split()
        self.tokens_by_tenant[tenant] += len(tokens)
        stream = bool(body.get("stream"))
        include_usage = stream and bool((body.get("stream_options") or {}).get("include_usage"))
        emit = self.on_event is not None and request.headers.get(PROBE_HEADER) != "1"
        rid = f"chatcmpl-{uuid.uuid4().hex[:24]}"
        t0 = time.time()
        if emit:
            self._emit(
                {
                    "type": "request",
                    "event_id": f"gw-{rid}-q",
                    "ts": t0,
                    "request_id": rid,
                    "tenant_id": tenant,
                    "model": self.config.model,
                    "prompt_tokens": len(tokens),
                    "cache_domain": self.config.cache_domain,
                    "context_window": self.config.context_window,
                    "max_output_tokens": max_tokens,
                    "prompt_text": text,
                }
            )
        try:
            job = await self._admit(tenant, tokens, max_tokens)
        except Rejected as rej:
            self.core.counters.rejected += 1
            if emit:
                self._emit_response(rid, tenant, rej.status, None, t0, None)
            return _error(rej.status, rej.message, rej.code)
        try:
            if job.foreign_owners:
                self.leaks.append((tenant, frozenset(job.foreign_owners)))
            await asyncio.sleep(job.computed_tokens / self.config.prefill_tokens_per_s)
            self._release_prefill(job)
            ttft = time.time() - t0
            self.ttft.observe(ttft)
            if stream:
                resp = await self._stream(request, rid, job, include_usage)
            else:
                await asyncio.sleep(len(job.output) / self.config.decode_tokens_per_s)
                resp = web.json_response(self._completion(rid, job))
        finally:
            await self._finish(job)
        if emit:
            self._emit_response(rid, tenant, 200, job, t0, ttft)
        return resp

    async def _admit(self, tenant: str, tokens: list[str], max_tokens: int) -> Job:
        core = self.core
        core.check(len(tokens))
        assert self._cond is not None
        async with self._cond:
            if not core.can_start(len(tokens), max_tokens):
                self.queued["prefill"] += 1
                try:
                    await self._cond.wait_for(lambda: core.can_start(len(tokens), max_tokens))
                finally:
                    self.queued["prefill"] -= 1
            return core.start(tenant, tokens, max_tokens)

    def _release_prefill(self, job: Job) -> None:
        self.core.prefill_done(job)
        self._notify()

    async def _finish(self, job: Job) -> None:
        self.core.finish(job)
        self._notify()

    def _notify(self) -> None:
        cond = self._cond
        if cond is None:
            return

        async def wake() -> None:
            async with cond:
                cond.notify_all()

        asyncio.get_running_loop().create_task(wake())

    def _usage(self, job: Job) -> dict[str, int]:
        return {
            "prompt_tokens": job.reported_prompt_tokens,
            "completion_tokens": len(job.output),
            "total_tokens": job.reported_prompt_tokens + len(job.output),
        }

    def _completion(self, rid: str, job: Job) -> dict[str, Any]:
        return {
            "id": rid,
            "object": "chat.completion",
            "created": int(time.time()),
            "model": self.config.model,
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": " ".join(job.output)},
                    "finish_reason": job.finish_reason,
                }
            ],
            "usage": self._usage(job),
        }

    async def _stream(self, request: web.Request, rid: str, job: Job, include_usage: bool) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream", "Cache-Control": "no-cache"})
        await resp.prepare(request)
        created = int(time.time())

        def chunk(delta: dict[str, Any], finish: str | None = None, usage: Any = None, choices: bool = True) -> bytes:
            body: dict[str, Any] = {
                "id": rid,
                "object": "chat.completion.chunk",
                "created": created,
                "model": self.config.model,
                "choices": [{"index": 0, "delta": delta, "finish_reason": finish}] if choices else [],
            }
            if usage is not None:
                body["usage"] = usage
            return b"data: " + orjson.dumps(body) + b"\n\n"

        await resp.write(chunk({"role": "assistant", "content": ""}))
        out = job.output
        for i in range(0, len(out), STREAM_CHUNK_TOKENS):
            piece = out[i : i + STREAM_CHUNK_TOKENS]
            await resp.write(chunk({"content": (" " if i else "") + " ".join(piece)}))
            await asyncio.sleep(len(piece) / self.config.decode_tokens_per_s)
        await resp.write(chunk({}, job.finish_reason))
        if include_usage:
            await resp.write(chunk({}, usage=self._usage(job), choices=False))
        await resp.write(b"data: [DONE]\n\n")
        await resp.write_eof()
        return resp

    def _emit_response(
        self, rid: str, tenant: str, status: int, job: Job | None, t0: float, ttft_s: float | None
    ) -> None:
        now = time.time()
        event: dict[str, Any] = {
            "type": "response",
            "event_id": f"gw-{rid}-r",
            "ts": now,
            "request_id": rid,
            "tenant_id": tenant,
            "model": self.config.model,
            "cache_domain": self.config.cache_domain,
            "status_code": status,
            "duration_ms": round((now - t0) * 1000, 3),
        }
        if job is not None:
            event["usage"] = {"input_tokens": job.reported_prompt_tokens, "output_tokens": len(job.output)}
            event["finish_reason"] = job.finish_reason
            event["output_text"] = " ".join(job.output)
            if ttft_s is not None:
                event["ttft_ms"] = round(ttft_s * 1000, 3)
        self._emit(event)


class EngineThread:
    """A LiveEngine on its own event loop in a daemon thread: for tests and callers that are not async."""

    def __init__(self, engine: LiveEngine, host: str = "127.0.0.1", port: int = 0) -> None:
        self.engine = engine
        self.loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self.loop.run_forever, name="crosstalk-engine", daemon=True)
        self._thread.start()
        self.base_url = asyncio.run_coroutine_threadsafe(engine.start(host, port), self.loop).result(timeout=30)

    def call(self, fn: Callable[[], Any]) -> Any:
        """Run fn on the engine's loop (e.g. a mode switch) and return its result."""

        async def run() -> Any:
            return fn()

        return asyncio.run_coroutine_threadsafe(run(), self.loop).result(timeout=30)

    def close(self) -> None:
        if self.loop.is_running():
            asyncio.run_coroutine_threadsafe(self.engine.stop(), self.loop).result(timeout=30)
            self.loop.call_soon_threadsafe(self.loop.stop)
        self._thread.join(timeout=30)
        self.loop.close()

    def __enter__(self) -> EngineThread:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
