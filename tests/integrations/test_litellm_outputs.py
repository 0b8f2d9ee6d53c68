"""The LiteLLM callback's outputs besides Kafka (`litellm.output`): `otlp` to crosstalk otlp's receiver, which needs no
fingerprint key, and `jsonl`, a file of fingerprinted events for `crosstalk replay`."""

from __future__ import annotations

import asyncio
from pathlib import Path
from typing import Any

import orjson
import pytest

pytest.importorskip("litellm")

from factories import request, response

from streams.inputs.otlp_receiver import OtlpReceiver
from streams.integrations.litellm import CrosstalkLogger
from streams.outputs import FunctionOutput
from streams.settings import Settings
from tests.support.workerproc import free_port

TEXT = "a prompt about the acme quarterly figures that only acme should ever see again"


def _pair(rid: str) -> list[dict[str, Any]]:
    return [
        orjson.loads(request(rid, "acme", 100.0, text=TEXT, cache_domain="d1").model_dump_json(exclude_none=True)),
        orjson.loads(
            response(rid, "acme", 101.0, text="the answer repeats " + TEXT, response_id="chatcmpl-1").model_dump_json()
        ),
    ]


def test_otlp_output_needs_no_key_and_reaches_the_receiver() -> None:
    events: list[Any] = []
    receiver = OtlpReceiver(Settings(), FunctionOutput(events.append))
    port = receiver.start_in_thread()
    logger = CrosstalkLogger(
        Settings(litellm={"output": "otlp", "otlp_url": f"http://127.0.0.1:{port}/v1/traces", "guard": False})
    )
    try:
        logger._publish(_pair("c-1"))
        assert logger.flush(30)
    finally:
        logger.close()
        receiver.stop_thread()
    assert logger.counters["published.request"] == logger.counters["published.response"] == 1
    assert [e.type for e in events] == ["request", "response"] and events[1].response_id == "chatcmpl-1"
    assert events[0].prompt_fingerprint is not None  # fingerprinted by the receiver, with its key


def test_a_receiver_away_is_counted_not_raised() -> None:
    url = f"http://127.0.0.1:{free_port()}/v1/traces"
    logger = CrosstalkLogger(Settings(litellm={"output": "otlp", "otlp_url": url, "guard": False}))
    try:
        logger._publish(_pair("c-2"))
        assert logger.flush(60)
    finally:
        logger.close()
    assert logger.counters["publish_error"] == 1 and not logger.counters["published.request"]


def test_jsonl_output_fingerprints_with_the_configured_key(tmp_path: Path) -> None:
    path = tmp_path / "events.jsonl"
    with pytest.raises(ValueError, match="events_path"):
        CrosstalkLogger(Settings(detection={"fingerprint_key": "k" * 32}, litellm={"output": "jsonl"}))
    settings = Settings(
        detection={"fingerprint_key": "k" * 32}, litellm={"output": "jsonl", "events_path": str(path), "guard": False}
    )
    logger = CrosstalkLogger(settings)
    try:
        logger._publish(_pair("c-3"))
        assert logger.flush(30)
    finally:
        logger.close()
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert [e["type"] for e in lines] == ["request", "response"]
    assert "prompt_text" not in lines[0] and lines[0]["prompt_fingerprint"]["hashes"]
    assert "output_text" not in lines[1] and lines[1]["output_fingerprint"]["hashes"]


def test_a_tool_call_through_litellm_reaches_the_tool_check(tmp_path: Path) -> None:
    # The callback writes the declared functions (the request's `tools`) with the prompt, and the answer's tool calls
    # as the line a tool check reads; the file output keeps text at the edge and sends the keyed names instead.
    import litellm

    from streams.embedded.runner import EmbeddedRunner

    path = tmp_path / "events.jsonl"
    settings = Settings(
        detection={"fingerprint_key": "k" * 32}, litellm={"output": "jsonl", "events_path": str(path), "guard": False}
    )
    logger = CrosstalkLogger(settings)
    tools = [{"type": "function", "function": {"name": "lookup_order", "parameters": {"type": "object"}}}]

    async def call(content: str, name: str, session: str, with_tools: bool) -> None:
        fn = {"name": name, "arguments": '{"id": "f4a5c4"}'}
        await litellm.acompletion(
            model="openai/glm-sim",
            messages=[{"role": "user", "content": content}],
            mock_tool_calls=[{"id": f"call_{session}", "type": "function", "function": fn}],
            user="acme",
            metadata={"session_id": session},
            **({"tools": tools} if with_tools else {}),
        )

    async def calls() -> None:
        for i in range(3):  # the agent's own sessions, each declaring what it calls
            await call("where is my order?", "lookup_order", f"s{i}", True)
        await call("translate 'Guten Tag' to English", "get_ticket", "s9", False)
        for _ in range(200):  # the callbacks run as background tasks after each call
            if logger.counters["queued"] >= 8:
                break
            await asyncio.sleep(0.05)

    litellm.callbacks = [logger]
    try:
        asyncio.run(calls())
        assert logger.flush(30)
    finally:
        litellm.callbacks = []
        logger.close()
    lines = [orjson.loads(x) for x in path.read_bytes().splitlines()]
    assert len(lines) == 8 and all("prompt_text" not in e and "output_text" not in e for e in lines)
    assert all(e["output_fingerprint"]["tools"] for e in lines if e["type"] == "response")  # every answer is a call
    result = EmbeddedRunner(Settings(detection={"fingerprint_key": "k" * 32})).run_files([str(path)])
    found = [a for a in result.alerts if any(e.name == "undeclared_tool_call" for e in a.evidence)]
    assert [a.tenant_id for a in found] == ["acme"] and found[0].severity in ("high", "critical")
