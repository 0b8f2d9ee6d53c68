"""LiteLLM integration: a callback that publishes request/response events, and a guard against over-long prompts.

    # LiteLLM proxy config.yaml
    litellm_settings:
      callbacks: streams.integrations.litellm.proxy_handler_instance

    # or the SDK / Router
    litellm.callbacks = [CrosstalkLogger()]

Callback (async_log_success_event / async_log_failure_event): one `request` event (the gateway's own
prompt-token count from litellm.token_counter, tenant from key/team/user per `litellm.tenant_from`) and
one `response` event (status, the engine's usage, finish reason, TTFT when streaming), published with
streams.producer.GatewayProducer: text is fingerprinted at the edge unless `litellm.send_text`.

Guard (async_pre_call_hook on the proxy, async_pre_call_deployment_hook in the SDK and Router): rejects a
prompt longer than the current prefill capacity of its cache domain with HTTP 400
(ContextWindowExceededError: what clients already handle for too-long prompts). Capacities come from
`crosstalk scrape` (GET /limits and/or the compacted limits topic); a limit older than
`litellm.limits_max_age_s` is not enforced (or, with `fail_closed`, the request is refused with 503).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import queue
import threading
import time
from collections import Counter
from typing import Any

import httpx
import litellm
import orjson
from litellm.integrations.custom_logger import CustomLogger

from streams.redact import protect_client_logs, redact_text, redact_url
from streams.settings import LiteLLMSettings, Settings, load_settings

log = logging.getLogger("crosstalk.litellm")
protect_client_logs()

# tenant_from value -> (field of the proxy's UserAPIKeyAuth, key of LiteLLM's request/standard-logging metadata)
_TENANT_FIELDS = {
    "team": ("team_id", "user_api_key_team_id"),
    "key": ("api_key", "user_api_key_hash"),  # the proxy keeps the key hashed: the tenant id is the hash
    "key_alias": ("key_alias", "user_api_key_alias"),
    "user": ("user_id", "user_api_key_user_id"),
    "end_user": ("end_user_id", "user_api_key_end_user_id"),
    "org": ("org_id", "user_api_key_org_id"),
}


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, list):  # OpenAI content parts
        return "\n".join(p.get("text", "") for p in content if isinstance(p, dict) and p.get("type") == "text")
    return ""


def prompt_text(messages: Any) -> str | None:
    parts = [_text(m.get("content")) for m in messages or () if isinstance(m, dict)]
    parts = [p for p in parts if p]
    return "\n".join(parts) if parts else None


def _ts(value: Any, default: float) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return default


class LimitsClient:
    """Current prefill capacities by cache domain, from GET /limits and/or the limits topic, with their age."""

    def __init__(self, settings: Settings) -> None:
        self.s: LiteLLMSettings = settings.litellm
        self.settings = settings
        self._limits: dict[str, dict[str, Any]] = {}
        self._fetched = float("-inf")
        self._lock = asyncio.Lock()
        self.counters: Counter[str] = Counter()
        self._consumer_thread: threading.Thread | None = None
        self._stop = threading.Event()
        if self.s.limits_from_kafka:
            self._start_consumer()

    def _start_consumer(self) -> None:
        from kafka import KafkaConsumer

        consumer = KafkaConsumer(
            self.settings.scrape.limits_topic,
            bootstrap_servers=self.settings.kafka.bootstrap.split(","),
            group_id=None,  # every gateway reads the whole compacted topic
            auto_offset_reset="earliest",
            enable_auto_commit=False,
        )

        def loop() -> None:
            try:
                while not self._stop.is_set():
                    for records in consumer.poll(timeout_ms=500).values():
                        for r in records:
                            try:
                                rec = orjson.loads(r.value)
                                self._limits[r.key.decode()] = rec
                                self.counters["limits.kafka"] += 1
                            except (orjson.JSONDecodeError, AttributeError):
                                self.counters["limits.bad_record"] += 1
            finally:
                consumer.close()

        self._consumer_thread = threading.Thread(target=loop, name="crosstalk-limits", daemon=True)
        self._consumer_thread.start()

    async def refresh(self, now: float) -> None:
        if self.s.limits_url is None or now - self._fetched < self.s.limits_refresh_s:
            return
        async with self._lock:
            if now - self._fetched < self.s.limits_refresh_s:
                return
            self._fetched = now
            try:
                async with httpx.AsyncClient(timeout=2.0) as client:
                    r = await client.get(self.s.limits_url)
                    r.raise_for_status()
                    domains = r.json().get("domains", {})
                for domain, rec in domains.items():
                    cur = self._limits.get(domain)
                    if cur is None or rec.get("ts", 0) >= cur.get("ts", 0):
                        self._limits[domain] = rec
                self.counters["limits.http"] += 1
            except (httpx.HTTPError, ValueError, AttributeError) as exc:
                self.counters["limits.http_error"] += 1
                log.warning("crosstalk limits from %s unavailable: %s", redact_url(self.s.limits_url), redact_text(exc))

    async def get(self, domain: str, now: float) -> dict[str, Any] | None:
        """The domain's limit if fresher than limits_max_age_s, else None."""
        await self.refresh(now)
        rec = self._limits.get(domain)
        if rec is None:
            return None
        if now - float(rec.get("ts", 0)) > self.s.limits_max_age_s:
            self.counters["limits.stale"] += 1
            return None
        return rec

    def close(self) -> None:
        self._stop.set()
        if self._consumer_thread is not None:
            self._consumer_thread.join(5)


class CrosstalkLogger(CustomLogger):
    def __init__(self, settings: Settings | None = None, producer: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings or load_settings()
        self.s = self.settings.litellm
        if not self.s.send_text and not self.settings.detection.fingerprint_key.configured:
            # A random key's fingerprints would be rejected by every worker (fingerprint_params).
            raise ValueError(
                "crosstalk LiteLLM callback: no fingerprint key configured; set detection.fingerprint_key "
                "or CROSSTALK_DETECTION__FINGERPRINT_KEY (the secret the workers use)"
            )
        self._producer = producer
        self._queue: queue.SimpleQueue[Any] = queue.SimpleQueue()
        self._thread: threading.Thread | None = None
        self.limits = LimitsClient(self.settings) if self.s.guard else None
        self.counters: Counter[str] = Counter()

    # --- shared helpers ---

    def _start_publisher(self) -> None:
        """Publishing runs on its own thread: a Kafka send may block (metadata, full buffer) and LiteLLM's
        event loop must never wait for the monitor."""
        if self._thread is not None:
            return
        from streams.producer import GatewayProducer

        def loop() -> None:
            gp = GatewayProducer(self.settings, producer=self._producer, send_text=self.s.send_text)
            try:
                while True:
                    item = self._queue.get()
                    if item is None:
                        break
                    if isinstance(item, threading.Event):  # a flush marker
                        gp.flush()
                        item.set()
                        continue
                    try:
                        gp.publish(item)
                        self.counters[f"published.{item['type']}"] += 1
                    except Exception as exc:  # a monitoring failure must never fail the user's call
                        self.counters["publish_error"] += 1
                        log.warning("crosstalk: %s event not published: %s", item.get("type"), exc)
            finally:
                gp.close()

        self._thread = threading.Thread(target=loop, name="crosstalk-publisher", daemon=True)
        self._thread.start()

    def cache_domain(self, model: str | None) -> str:
        """cache_domains[model], also without a provider prefix ("openai/glm-5.3" -> "glm-5.3")."""
        for name in (model, model.split("/", 1)[-1] if model else None):
            if name and name in self.s.cache_domains:
                return self.s.cache_domains[name]
        return self.s.default_cache_domain or model or "unknown"

    def tenant_of(self, auth: Any = None, metadata: dict[str, Any] | None = None) -> str | None:
        for source in self.s.tenant_from:
            field, meta_key = _TENANT_FIELDS[source]
            value = getattr(auth, field, None) if auth is not None else None
            if not value and metadata:
                value = metadata.get(meta_key)
            if value:
                return str(value)
        return None

    # --- guard ---

    async def check(self, model: str | None, messages: Any, domain: str | None = None) -> None:
        """Raise ContextWindowExceededError (HTTP 400) if the prompt exceeds its domain's prefill capacity."""
        if self.limits is None:
            return
        domain = domain or self.cache_domain(model)
        now = time.time()
        limit = await self.limits.get(domain, now)
        if limit is None:
            self.counters["guard.no_limit"] += 1
            if self.s.fail_closed:
                raise litellm.ServiceUnavailableError(
                    message=f"crosstalk guard: no current prefill capacity known for cache domain {domain}",
                    model=model or "",
                    llm_provider="crosstalk",
                )
            return
        capacity = int(limit["prefill_capacity_tokens"]) - self.s.headroom_tokens
        tokens = litellm.token_counter(model=model or "", messages=messages)
        if tokens > capacity:
            self.counters["guard.rejected"] += 1
            window = limit.get("context_window")
            raise litellm.ContextWindowExceededError(
                message=(
                    f"crosstalk guard: prompt of {tokens} tokens exceeds the current prefill capacity of "
                    f"{capacity} tokens of cache domain {domain}"
                    + (f" (advertised context window {window})" if window else "")
                    + "; shorten the prompt"
                ),
                model=model or "",
                llm_provider="crosstalk",
            )
        self.counters["guard.passed"] += 1

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> Any:
        if data.get("messages"):
            await self.check(data.get("model"), data["messages"])
        return data

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict | None:
        if self.s.guard and kwargs.get("messages"):
            await self.check(kwargs.get("model"), kwargs["messages"])
        return None

    # --- events ---

    def _events(self, kwargs: dict[str, Any], response_obj: Any, start: Any, end: Any, status: int) -> list[dict]:
        slo = kwargs.get("standard_logging_object") or {}
        call_type = str(kwargs.get("call_type") or slo.get("call_type") or "acompletion")
        if "completion" not in call_type:  # embeddings, images, audio: no prompt/answer text to compare
            self.counters[f"events.skipped.{call_type}"] += 1
            return []
        meta = dict(slo.get("metadata") or {})
        meta.update((kwargs.get("litellm_params") or {}).get("metadata") or {})
        tenant = self.tenant_of(None, meta)
        if tenant is None:
            self.counters["events.no_tenant"] += 1
            log.warning(
                "crosstalk: no tenant (%s) on call %s: not published", self.s.tenant_from, kwargs.get("litellm_call_id")
            )
            return []
        model = slo.get("model_group") or kwargs.get("model") or slo.get("model") or "unknown"
        messages = kwargs.get("messages") or slo.get("messages")
        rid = str(kwargs.get("litellm_call_id") or slo.get("id"))
        t0 = _ts(start, time.time())
        t1 = _ts(end, t0)
        domain = self.cache_domain(model)
        req: dict[str, Any] = {
            "type": "request",
            "event_id": f"litellm:{rid}:req",
            "ts": t0,
            "request_id": rid,
            "tenant_id": tenant,
            "model": model,
            "prompt_tokens": litellm.token_counter(model=model, messages=messages or []),
            "cache_domain": domain,
        }
        session = slo.get("session_id") or meta.get("session_id")
        if session:
            req["session_id"] = str(session)
        max_tokens = (kwargs.get("optional_params") or {}).get("max_tokens")
        if isinstance(max_tokens, int):
            req["max_output_tokens"] = max_tokens
        text = prompt_text(messages)
        if text is not None:
            req["prompt_text"] = text
        resp: dict[str, Any] = {
            "type": "response",
            "event_id": f"litellm:{rid}:resp",
            "ts": t1,
            "request_id": rid,
            "tenant_id": tenant,
            "model": model,
            "cache_domain": domain,
            "status_code": status,
            "duration_ms": max(0.0, (t1 - t0) * 1000.0),
        }
        if session:
            resp["session_id"] = str(session)
        usage = getattr(response_obj, "usage", None)
        if usage is not None:
            resp["usage"] = {"input_tokens": usage.prompt_tokens, "output_tokens": usage.completion_tokens}
        choices = getattr(response_obj, "choices", None) or []
        if choices:
            resp["finish_reason"] = choices[0].finish_reason
            out = getattr(getattr(choices[0], "message", None), "content", None)
            if isinstance(out, str):
                resp["output_text"] = out
        if kwargs.get("stream") and kwargs.get("completion_start_time") is not None:
            resp["ttft_ms"] = max(0.0, (_ts(kwargs["completion_start_time"], t0) - t0) * 1000.0)
        return [req, resp]

    def _publish(self, events: list[dict]) -> None:
        if events:
            self._start_publisher()
        for ev in events:
            self.counters["queued"] += 1
            self._queue.put(ev)

    async def async_log_success_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        self._publish(self._events(kwargs, response_obj, start_time, end_time, 200))

    async def async_log_failure_event(self, kwargs: Any, response_obj: Any, start_time: Any, end_time: Any) -> None:
        exc = kwargs.get("exception")
        status = getattr(exc, "status_code", None)
        self._publish(self._events(kwargs, None, start_time, end_time, status if isinstance(status, int) else 500))

    def flush(self, timeout_s: float = 30.0) -> bool:
        """Wait until everything queued so far is handed to Kafka and acknowledged."""
        if self._thread is None:
            return True
        done = threading.Event()
        self._queue.put(done)
        return done.wait(timeout_s)

    def close(self) -> None:
        if self._thread is not None:
            self._queue.put(None)
            self._thread.join(30)
            self._thread = None
        if self.limits is not None:
            self.limits.close()


def _proxy_instance() -> CrosstalkLogger | None:
    try:
        return CrosstalkLogger()
    except Exception as exc:  # e.g. no broker at import time: LiteLLM must still start
        log.error("crosstalk LiteLLM callback disabled: %s", exc)
        return None


def __getattr__(name: str) -> Any:
    # `callbacks: streams.integrations.litellm.proxy_handler_instance` in the proxy config; built on first use
    # so that importing this module (tests, the SDK) does not connect to Kafka.
    if name == "proxy_handler_instance":
        inst = globals().get("_instance")
        if inst is None:
            inst = globals()["_instance"] = _proxy_instance()
        return inst
    raise AttributeError(name)
