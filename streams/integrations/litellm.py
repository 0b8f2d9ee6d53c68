"""LiteLLM integration: a callback that publishes request/response events, and a guard against over-long prompts.

    # LiteLLM proxy config.yaml
    litellm_settings:
      callbacks: streams.integrations.litellm.proxy_handler_instance

    # or the SDK / Router
    litellm.callbacks = [CrosstalkLogger()]

Callback (async_log_success_event / async_log_failure_event): one `request` event (the gateway's own
prompt-token count from litellm.token_counter, tenant per `litellm.tenant_from`: by default the request's
`user` field or its metadata's `tenant_id`, which need no LiteLLM database) and one `response` event
(status, the engine's usage, finish reason, TTFT when streaming), published with
streams.producer.GatewayProducer: text is fingerprinted at the edge unless `litellm.send_text`.

Guard (async_pre_call_hook on the proxy, async_pre_call_deployment_hook in the SDK and Router): rejects a
prompt (chat `messages`, completions `prompt`, Responses API `input`) longer than the current prefill
capacity of its cache domain with HTTP 400 (ContextWindowExceededError: what clients already handle for
too-long prompts), and publishes the refused call as a request and a 400 response. Capacities come from
`crosstalk scrape` (GET /limits and/or the compacted limits topic; streams/integrations/litellm_limits.py);
a limit older than `litellm.limits_max_age_s` is not enforced, logged and counted (or, with `fail_closed`,
the request is refused with 503). A model mapped to no domain is checked per `litellm.unmapped_models`.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import queue
import threading
import time
import uuid
from collections import Counter
from typing import Any

import litellm
from litellm.integrations.custom_logger import CustomLogger

from schemas.messages import tool_calls_line
from streams.integrations.litellm_limits import DECISIONS, LimitsClient
from streams.integrations.litellm_prompt import is_generation, prompt_text, prompt_tokens, request_text
from streams.redact import protect_client_logs
from streams.settings import Settings, load_settings

__all__ = ["CrosstalkLogger", "LimitsClient", "prompt_text"]

log = logging.getLogger("crosstalk.litellm")
protect_client_logs()

# tenant_from value -> (field of the proxy's UserAPIKeyAuth, key of LiteLLM's request/standard-logging metadata)
_TENANT_FIELDS = {  # the virtual-key fields: they need LiteLLM's database (keys made by /key/generate)
    "team": ("team_id", "user_api_key_team_id"),
    "key": ("api_key", "user_api_key_hash"),  # the proxy keeps the key hashed: the tenant id is the hash
    "key_alias": ("key_alias", "user_api_key_alias"),
    "user": ("user_id", "user_api_key_user_id"),
    "org": ("org_id", "user_api_key_org_id"),
}


def _tool_calls(calls: Any) -> str | None:
    """A message's `tool_calls` (LiteLLM's objects or dicts) as the line a tool check reads (schemas/messages.py)."""
    if not calls:
        return None
    as_dicts = [c if isinstance(c, dict) else getattr(c, "model_dump", lambda: None)() for c in list(calls)]
    return tool_calls_line([c for c in as_dicts if isinstance(c, dict)])


def _ts(value: Any, default: float) -> float:
    if isinstance(value, dt.datetime):
        return value.timestamp()
    if isinstance(value, int | float):
        return float(value)
    return default


class CrosstalkLogger(CustomLogger):
    def __init__(self, settings: Settings | None = None, producer: Any = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.settings = settings or load_settings()
        self.s = self.settings.litellm
        if self.s.output == "otlp":
            pass  # the text goes to the receiver, which fingerprints it with its own key
        elif self.s.output == "jsonl" and not self.s.events_path:
            raise ValueError("crosstalk LiteLLM callback: litellm.output = 'jsonl' needs litellm.events_path")
        elif not self.s.send_text and not self.settings.detection.fingerprint_key.configured:
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

        def loop() -> None:
            output = self._output()
            try:
                while True:
                    item = self._queue.get()
                    if item is None:
                        break
                    if isinstance(item, threading.Event):  # a flush marker
                        output.flush()
                        item.set()
                        continue
                    try:  # one call's request and response together (the OTLP output makes them one span)
                        refused = output.send(item)
                        self.counters.update(f"published.{ev['type']}" for ev in item)
                        self.counters.update(f"refused.{r.reason}" for r in refused)
                    except Exception as exc:  # a monitoring failure must never fail the user's call
                        self.counters["publish_error"] += 1
                        log.warning("crosstalk: call %s not published: %s", item[0].get("request_id"), exc)
            finally:
                output.close()

        self._thread = threading.Thread(target=loop, name="crosstalk-publisher", daemon=True)
        self._thread.start()

    def _output(self) -> Any:
        """The events' way out (`litellm.output`): the Kafka input topic, `crosstalk otlp`, or a JSONL file."""
        from streams.outputs import KafkaOutput

        if self.s.output == "otlp":
            from streams.outputs.otlp import OtlpOutput

            token = self.s.otlp_token.get_secret_value() if self.s.otlp_token is not None else None
            return OtlpOutput(str(self.s.otlp_url), token, service_name="litellm")
        if self.s.output == "jsonl":
            return _FingerprintedJsonl(self.settings, str(self.s.events_path))
        return KafkaOutput(self.settings, producer=self._producer, send_text=self.s.send_text)

    def _mapped_domain(self, model: str | None) -> str | None:
        """cache_domains[model], also without a provider prefix ("openai/glm-5.3" -> "glm-5.3"), else
        default_cache_domain, else None."""
        for name in (model, model.split("/", 1)[-1] if model else None):
            if name and name in self.s.cache_domains:
                return self.s.cache_domains[name]
        return self.s.default_cache_domain

    def cache_domain(self, model: str | None) -> str:
        return self._mapped_domain(model) or model or "unknown"

    def tenant_of(self, auth: Any = None, metadata: dict[str, Any] | None = None, end_user: Any = None) -> str | None:
        """The first of `tenant_from` that is present. end_user: the request's `user` field (the proxy's
        end_user_id); metadata: the request metadata's `tenant_metadata_field`; both need no database."""
        metadata = metadata or {}
        for source in self.s.tenant_from:
            if source == "end_user":
                value = getattr(auth, "end_user_id", None) or metadata.get("user_api_key_end_user_id") or end_user
            elif source == "metadata":
                value = metadata.get(self.s.tenant_metadata_field)
            else:
                field, meta_key = _TENANT_FIELDS[source]
                value = (getattr(auth, field, None) if auth is not None else None) or metadata.get(meta_key)
            if isinstance(value, str | int) and not isinstance(value, bool) and str(value):
                return str(value)
        return None

    # --- guard ---

    def _decided(self, decision: str) -> None:
        self.counters[f"guard.{decision}"] += 1
        DECISIONS.labels(decision).inc()

    def _refuse_unavailable(self, model: str | None, why: str) -> None:
        msg = f"crosstalk guard: {why}"
        raise litellm.ServiceUnavailableError(message=msg, model=model or "", llm_provider="crosstalk")

    def _limit_for(self, model: str | None, domain: str | None, now: float) -> tuple[str, dict[str, Any] | None]:
        assert self.limits is not None
        mapped = domain or self._mapped_domain(model)
        if mapped is not None:
            return mapped, self.limits.get(mapped, now)
        # A model alias in no mapping (issue 25: it passed unchecked).
        self._decided("unmapped")
        if self.s.unmapped_models == "fail_closed":
            self._refuse_unavailable(model, f"model {model!r} maps to no cache domain (litellm.cache_domains)")
        if self.s.unmapped_models == "strictest":
            found = self.limits.strictest(now)
            if found is not None:
                return found
        return str(model or "unknown"), None

    async def check(
        self, model: str | None, messages: Any = None, domain: str | None = None, data: dict[str, Any] | None = None
    ) -> None:
        """Raise ContextWindowExceededError (HTTP 400) if the prompt exceeds its domain's prefill capacity."""
        if self.limits is None:
            return
        data = data if data is not None else {"messages": messages}
        tokens = prompt_tokens(model, data)
        if tokens is None:
            return
        if not self.limits._first.is_set():
            # Only until the first read is over, and never longer than this: then the last known limits serve.
            await asyncio.to_thread(self.limits.wait_first, self.s.limits_first_wait_s)
        now = time.time()
        domain, limit = self._limit_for(model, domain, now)
        if limit is None:
            self._decided("no_limit")
            if self.s.fail_closed:
                self._refuse_unavailable(model, f"no current prefill capacity known for cache domain {domain}")
            return
        capacity = int(limit["prefill_capacity_tokens"]) - self.s.headroom_tokens
        if tokens > capacity:
            self._decided("rejected")
            window = limit.get("context_window")
            raise litellm.ContextWindowExceededError(
                message=(
                    f"crosstalk guard: prompt of {tokens} tokens exceeds the current prefill capacity of "
                    f"{capacity} tokens of cache domain {domain}"
                    + (f" (advertised context window {window})" if isinstance(window, int) else "")
                    + "; shorten the prompt"
                ),
                model=model or "",
                llm_provider="crosstalk",
            )
        self._decided("passed")

    async def _guard(self, data: dict[str, Any], call_type: Any, auth: Any = None) -> None:
        if not self.s.guard or self.limits is None or not is_generation(call_type):
            return
        try:
            await self.check(data.get("model"), data=data)
        except (litellm.ContextWindowExceededError, litellm.ServiceUnavailableError) as exc:
            self._publish_refusal(data, auth, exc)
            raise

    async def async_pre_call_hook(self, user_api_key_dict: Any, cache: Any, data: dict, call_type: Any) -> Any:
        await self._guard(data, call_type, user_api_key_dict)
        return data

    async def async_pre_call_deployment_hook(self, kwargs: dict[str, Any], call_type: Any) -> dict | None:
        await self._guard(kwargs, call_type)
        return None

    def _publish_refusal(self, data: dict[str, Any], auth: Any, exc: Exception) -> None:
        """A refused call is a request and its 4xx/5xx response, like any other: the operator sees what was refused."""
        meta = dict(data.get("metadata") or {})
        meta.update(data.get("litellm_metadata") or {})
        tenant = self.tenant_of(auth, meta, data.get("user"))
        if tenant is None:
            self.counters["events.no_tenant"] += 1
            return
        model = str(data.get("model") or "unknown")
        rid = str(data.get("litellm_call_id") or uuid.uuid4())
        now = time.time()
        domain = self._mapped_domain(model) or model
        req: dict[str, Any] = {
            "type": "request",
            "event_id": f"litellm:{rid}:req",
            "ts": now,
            "request_id": rid,
            "tenant_id": tenant,
            "model": model,
            "prompt_tokens": prompt_tokens(model, data) or 0,
            "cache_domain": domain,
        }
        text = request_text(data)
        if text is not None:
            req["prompt_text"] = text
        status = getattr(exc, "status_code", None)
        resp = {
            "type": "response",
            "event_id": f"litellm:{rid}:resp",
            "ts": now,
            "request_id": rid,
            "tenant_id": tenant,
            "model": model,
            "cache_domain": domain,
            "status_code": status if isinstance(status, int) else 400,
            "duration_ms": 0.0,
        }
        self.counters["events.refused"] += 1
        self._publish([req, resp])

    # --- events ---

    def _events(self, kwargs: dict[str, Any], response_obj: Any, start: Any, end: Any, status: int) -> list[dict]:
        slo = kwargs.get("standard_logging_object") or {}
        call_type = str(kwargs.get("call_type") or slo.get("call_type") or "acompletion")
        if "completion" not in call_type:  # embeddings, images, audio: no prompt/answer text to compare
            self.counters[f"events.skipped.{call_type}"] += 1
            return []
        meta = dict(slo.get("metadata") or {})
        meta.update((kwargs.get("litellm_params") or {}).get("metadata") or {})
        end_user = slo.get("end_user") or kwargs.get("user") or (kwargs.get("optional_params") or {}).get("user")
        tenant = self.tenant_of(None, meta, end_user)
        if tenant is None:
            self.counters["events.no_tenant"] += 1
            if self.counters["events.no_tenant"] % 1000 == 1:  # the first, then every 1000th: heard, not a flood
                log.warning(
                    "crosstalk: no tenant (tenant_from %s) on call %s: not published (%d calls so far); send "
                    "`user` or metadata.%s, or use virtual keys (LiteLLM's database) with team/key",
                    self.s.tenant_from,
                    kwargs.get("litellm_call_id"),
                    self.counters["events.no_tenant"],
                    self.s.tenant_metadata_field,
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
            "prompt_tokens": prompt_tokens(model, {"messages": messages, "prompt": kwargs.get("prompt")}) or 0,
            "cache_domain": domain,
        }
        session = slo.get("session_id") or meta.get("session_id")
        if session:
            req["session_id"] = str(session)
        max_tokens = (kwargs.get("optional_params") or {}).get("max_tokens")
        if isinstance(max_tokens, int):
            req["max_output_tokens"] = max_tokens
        # The declared functions with the messages: a tool check reads their names in the prompt (docs/adr/0019).
        tools = (kwargs.get("optional_params") or {}).get("tools") or kwargs.get("tools")
        text = request_text({"messages": messages, "prompt": kwargs.get("prompt"), "tools": tools})
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
        response_id = getattr(response_obj, "id", None)
        if isinstance(response_id, str) and response_id:
            resp["response_id"] = response_id[:256]  # the provider's id (chatcmpl-...): the engine's logs
        choices = getattr(response_obj, "choices", None) or []
        if choices:
            resp["finish_reason"] = choices[0].finish_reason
            message = getattr(choices[0], "message", None)
            out = getattr(message, "content", None)
            calls = _tool_calls(getattr(message, "tool_calls", None))  # what a tool check reads (docs/adr/0019)
            text = "\n".join(t for t in (out if isinstance(out, str) else None, calls) if t)
            if text:
                resp["output_text"] = text
        if kwargs.get("stream") and kwargs.get("completion_start_time") is not None:
            resp["ttft_ms"] = max(0.0, (_ts(kwargs["completion_start_time"], t0) - t0) * 1000.0)
        return [req, resp]

    def _publish(self, events: list[dict]) -> None:
        if events:
            self._start_publisher()
            self.counters["queued"] += len(events)
            self._queue.put(events)

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


class _FingerprintedJsonl:
    """`litellm.output = "jsonl"`: the events as JSON Lines, text fingerprinted here with the configured key (as
    KafkaOutput does), for `crosstalk replay` with the same key."""

    def __init__(self, settings: Settings, path: str) -> None:
        from detectors.edge_words import EdgeWords
        from detectors.monitor import make_fingerprinter
        from streams.outputs import JsonlOutput

        self.out = JsonlOutput(path)
        self.fp = make_fingerprinter(settings.detection)
        self.words = EdgeWords(self.fp)  # the tool names and identifiers the monitor reads go with the print

    def send(self, events: list[dict[str, Any]]) -> list[Any]:
        from schemas.events import Request, parse_event_obj

        models = []
        for ev in events:
            model = parse_event_obj(ev)
            text_field, print_field = ("prompt_text", "prompt_fingerprint")
            if not isinstance(model, Request):
                text_field, print_field = ("output_text", "output_fingerprint")
            text = getattr(model, text_field, None)
            if text is not None:
                fp = self.words.attach(self.fp.fingerprint(text), text, text_field == "prompt_text")
                model = model.model_copy(update={print_field: fp, text_field: None})
            models.append(model)
        return self.out.send(models)

    def flush(self) -> None:
        self.out.flush()

    def close(self) -> None:
        self.out.close()


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
