"""A gateway that keeps text at the edge sends the keyed names with each print (ADR 0019): the monitor then finds a
tool call its prompt never declared from the fingerprints alone, as it does from the text."""

from __future__ import annotations

from pathlib import Path

import orjson
from factories import edge_printed

from streams.embedded.runner import EmbeddedRunner
from streams.producer import GatewayProducer
from streams.settings import Settings

AGENT = 'system: tools: [{"name": "lookup_order", "parameters": {"order_id": "string"}}]\nuser: where is my order?'


def _call(name: str, call_id: str) -> str:
    fn = {"name": name, "arguments": '{"id": "f4a5c4"}'}
    return orjson.dumps({"tool_calls": [{"id": call_id, "type": "function", "function": fn}]}).decode()


def _events() -> list[dict]:
    out: list[dict] = []
    turns = [(f"own{i}", AGENT, _call("lookup_order", f"call_b{i}")) for i in range(3)]
    turns.append(("foreign", "user: translate 'Guten Tag' to English", _call("get_ticket", "call_x")))
    for i, (rid, prompt, output) in enumerate(turns):
        ts = 1_780_000_000.0 + 10 * i
        # Each turn a session of its own: a session's first call of a function is what tells that prompts declare.
        out.append({"type": "request", "event_id": f"q-{rid}", "ts": ts, "request_id": rid, "tenant_id": "B",
                    "model": "m", "prompt_tokens": 40, "prompt_text": prompt, "session_id": f"s-{rid}"})  # fmt: skip
        out.append({"type": "response", "event_id": f"r-{rid}", "ts": ts + 1, "request_id": rid, "tenant_id": "B",
                    "model": "m", "cache_domain": "d1", "status_code": 200, "output_text": output,
                    "session_id": f"s-{rid}"})  # fmt: skip
    return out


def _undeclared(path: Path, s: Settings) -> set[str]:
    result = EmbeddedRunner(s).run_files([str(path)])
    assert not result.rejects
    return {
        r for a in result.alerts if any(e.name == "undeclared_tool_call" for e in a.evidence) for r in a.request_ids
    }


def test_edge_prints_carry_the_names_and_alert_as_the_text_does(tmp_path: Path) -> None:
    s = Settings.model_validate({"detection": {"fingerprint_key": "edge-tools"}})
    gp = GatewayProducer(s, producer=object())  # type: ignore[arg-type]  # prepare() sends nothing
    events = _events()
    prints, text_path, wire_path = edge_printed(gp, events, tmp_path)
    for e, fp in zip(events, prints, strict=True):
        assert fp is not None and fp.tools is not None, e["event_id"]  # known: a prompt's names (maybe none), a call
    wire = wire_path.read_bytes()
    assert b"lookup_order" not in wire and b"get_ticket" not in wire  # keyed: no name leaves the gateway
    assert _undeclared(text_path, s) == {"foreign"}
    assert _undeclared(wire_path, s) == {"foreign"}
