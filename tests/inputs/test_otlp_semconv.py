"""The GenAI attributes of open-telemetry/semantic-conventions-genai read beyond the first mapping:
gen_ai.response.id (onto the response event and the alert, to find the answer in engine logs by chatcmpl-...),
error.type (a failed call's status and class) and gen_ai.provider.name (the domain of last resort)."""

from __future__ import annotations

import random

import orjson

from detectors.monitor import make_fingerprinter
from schemas.alert import Alert
from schemas.events import Response
from streams.embedded.runner import EmbeddedRunner
from streams.inputs.otlp import SpanMapper
from streams.inputs.otlp_decode import STATUS_ERROR, Span
from streams.settings import Settings
from streams.sinks.formats import Notification, render_alertmanager

SECRET = "the board approved the sale of the northern plant to initech for ninety million on friday in secret"
KEY = {"fingerprint_key": "k" * 32}


def attrs(tenant: str, prompt: str, answer: str, **more: object) -> dict[str, object]:
    def msgs(role: str, text: str) -> str:
        return orjson.dumps([{"role": role, "parts": [{"type": "text", "content": text}]}]).decode()

    return {
        "gen_ai.operation.name": "chat",
        "gen_ai.provider.name": "openai",
        "gen_ai.request.model": "glm-5.3",
        "gen_ai.usage.input_tokens": 30,
        "gen_ai.usage.output_tokens": 20,
        "crosstalk.tenant_id": tenant,
        "crosstalk.cache_domain": "glm53-pd-1",
        "gen_ai.input.messages": msgs("user", prompt),
        "gen_ai.output.messages": msgs("assistant", answer),
        **more,
    }


def mapper(**otlp: object) -> SpanMapper:
    s = Settings(otlp=otlp, detection=KEY)
    return SpanMapper(s.otlp, make_fingerprinter(s.detection))


def span(a: dict[str, object], sid: str = "cd" * 8, t: int = 10**18, status: int = 0) -> Span:
    return Span("ab" * 16, sid, "chat glm-5.3", t, t + 10**9, a, {}, status_code=status)


def test_response_id_and_error_type_reach_the_response_event() -> None:
    _, resp = mapper().map_span(span(attrs("acme", "hi", "ok", **{"gen_ai.response.id": "chatcmpl-9x"})))
    assert isinstance(resp, Response) and resp.response_id == "chatcmpl-9x" and resp.error_type is None
    assert resp.status_code == 200
    failed = attrs("acme", "hi", "ok", **{"error.type": "429"})
    _, resp = mapper().map_span(span(failed))
    assert isinstance(resp, Response) and resp.status_code == 429 and resp.error_type == "429"
    # A class, not a code, on a span whose status was left unset: still a failed call.
    _, resp = mapper().map_span(span(attrs("acme", "hi", "ok", **{"error.type": "openai.APITimeoutError"})))
    assert isinstance(resp, Response) and resp.status_code == 500 and resp.error_type == "openai.APITimeoutError"
    # The HTTP status, when the span has it, wins over error.type.
    both = attrs("acme", "hi", "ok", **{"error.type": "timeout", "http.response.status_code": 504})
    _, resp = mapper().map_span(span(both, status=STATUS_ERROR))
    assert isinstance(resp, Response) and resp.status_code == 504


def test_the_provider_is_the_domain_of_last_resort() -> None:
    a = attrs("acme", "hi", "ok")
    del a["crosstalk.cache_domain"]
    req, _ = mapper().map_span(span(a))
    assert req.cache_domain == "openai"
    out = mapper(cache_domain_from_provider=False).map_spans([span(a)])
    assert [r.reason for r in out.rejects] == ["no_cache_domain"]


def test_the_alert_names_the_leaked_responses_id_for_the_engine_logs() -> None:
    m = mapper()
    victim = attrs("globex", "anything new?", SECRET, **{"gen_ai.response.id": "chatcmpl-leak42"})
    events = m.map_span(span(attrs("acme", SECRET, "noted", **{"gen_ai.response.id": "chatcmpl-a1"})))
    events += m.map_span(span(victim, sid="ce" * 8, t=10**18 + 5 * 10**9))
    runner = EmbeddedRunner(
        Settings(detection={**KEY, "overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}),
        [],
    )
    for ev in events:
        runner.feed_checked(ev, "test")
    runner.finish(0.0)
    leak = next(a for a in runner.result.alerts if a.kind == "cross_tenant_contamination")
    assert isinstance(leak, Alert) and leak.response_id == "chatcmpl-leak42" and leak.tenant_id == "globex"
    assert orjson.loads(leak.model_dump_json())["response_id"] == "chatcmpl-leak42"
    body = render_alertmanager(Notification("oncall", leak.group_key, "firing", [leak]), "http://crosstalk")
    assert body[0]["annotations"]["response_id"] == "chatcmpl-leak42"
    # Alertmanager routes on labels: the incident's severity as of this alert (ADR 0018), fixed when it is raised.
    assert body[0]["labels"]["incident_severity"] == leak.incident_severity
    assert leak.incident_severity in ("warning", "high", "critical")


def test_an_agents_tool_call_its_prompt_never_declared_alerts_from_spans() -> None:
    # semconv: the call is a tool_call part of gen_ai.output.messages, the declared functions the opt-in
    # gen_ai.tool.definitions; the bridge fingerprints at the edge and sends the keyed names with the prints.
    m = mapper()
    defs = orjson.dumps([{"type": "function", "name": "lookup_order", "parameters": {}}]).decode()

    def call(name: str) -> str:
        parts = [{"type": "tool_call", "id": f"c-{name}", "name": name, "arguments": {"id": "f4a5c4"}}]
        return orjson.dumps([{"role": "assistant", "parts": parts}]).decode()

    events = []
    for i in range(3):  # the agent's own sessions, each declaring what it calls
        a = attrs(
            "acme", "where is my order?", "", **{"gen_ai.tool.definitions": defs, "gen_ai.conversation.id": f"s{i}"}
        )
        a["gen_ai.output.messages"] = call("lookup_order")
        events += m.map_span(span(a, sid=f"{i:02d}" * 8, t=10**18 + i * 10**9))
    a = attrs("acme", "translate 'Guten Tag' to English", "", **{"gen_ai.conversation.id": "s9"})
    a["gen_ai.output.messages"] = call("get_ticket")
    events += m.map_span(span(a, sid="ff" * 8, t=10**18 + 9 * 10**9))
    assert all("prompt_text" not in e and "output_text" not in e for e in events)  # text stays at the edge
    runner = EmbeddedRunner(Settings(detection=KEY), [])
    for ev in events:
        runner.feed_checked(ev, "test")
    runner.finish(0.0)
    found = [a for a in runner.result.alerts if any(e.name == "undeclared_tool_call" for e in a.evidence)]
    assert len(found) == 1 and found[0].severity in ("high", "critical") and found[0].tenant_id == "acme"


def test_an_answer_quoting_its_own_tool_response_names_no_other_tenant() -> None:
    # semconv: what a tool returned is a tool_call_response part of gen_ai.input.messages. Before, the bridge read
    # no text of it, so an answer quoting it looked as if it came from the one other tenant that had the text.
    rng = random.Random(3)
    words = [f"w{i:04d}" for i in range(5000)]
    manual = [" ".join(rng.sample(words, 15)).capitalize() + "." for _ in range(8)]
    page = " ".join(" ".join(manual[2:6]).split()[5:-5])
    answer = f"Here is what it says. {page} Anything else?"

    def victims_of(tool_text: str) -> list[str]:
        m = mapper()
        a = attrs("globex", "what does the manual say?", answer, **{"gen_ai.conversation.id": "g1"})
        parts = [{"type": "tool_call_response", "id": "c1", "response": {"manual": tool_text}}]
        a["gen_ai.input.messages"] = orjson.dumps(
            [{"role": "user", "parts": [{"type": "text", "content": "what does the manual say?"}]},
             {"role": "tool", "parts": parts}]
        ).decode()  # fmt: skip
        events = m.map_span(span(attrs("acme", "Summarise:\n" + " ".join(manual), "Noted.")))
        events += m.map_span(span(a, sid="ce" * 8, t=10**18 + 5 * 10**9))
        runner = EmbeddedRunner(Settings(detection={**KEY, "overlap_warmup_docs": 0, "overlap_warmup_s": 0.0}), [])
        for ev in events:
            runner.feed_checked(ev, "test")
        runner.finish(0.0)
        return [
            a.severity
            for a in runner.result.alerts
            if a.kind == "cross_tenant_contamination" and a.tenant_id == "globex"
        ]

    assert victims_of(" ".join(manual)) == []
    # Control: the tool returned something else, so the page came from acme's prompt alone: a high alert.
    assert any(s in ("high", "critical") for s in victims_of("no manual found"))


def test_openai_and_anthropic_content_parts_in_spans_read_as_the_contract_reads_them() -> None:
    # One reader of a message's content parts for spans and for logged message lists (schemas/messages.py): before,
    # the bridge read OpenTelemetry's `{"type": "text", "content"}` parts only, and a span whose instrumentation
    # logged OpenAI's `{"type": "text", "text"}` parts or Anthropic's tool_use blocks carried no prompt text.
    def read(messages: list[dict[str, object]]) -> object:
        a = attrs("acme", "unused", "unused")
        a["gen_ai.input.messages"] = orjson.dumps(messages).decode()
        (req,) = [e for e in mapper().map_span(span(a)) if e.type == "request"]
        return req.prompt_fingerprint  # type: ignore[union-attr]

    semconv = read([{"role": "user", "parts": [{"type": "text", "content": SECRET}]}])
    assert semconv is not None
    assert read([{"role": "user", "content": [{"type": "text", "text": SECRET}]}]) == semconv
    call = {"type": "tool_use", "id": "t1", "name": "transfer_funds", "input": {"to": "initech"}}
    with_call = read([{"role": "user", "content": [{"type": "text", "text": SECRET}]},
                      {"role": "assistant", "content": [call]}])  # fmt: skip
    assert with_call not in (None, semconv)  # the call is read as its one JSON line, beside the text
