"""OtlpOutput: a producer's calls as GenAI spans to `crosstalk otlp`'s real receiver on loopback, which maps them
back to the same events (text fingerprinted by the receiver)."""

from __future__ import annotations

from typing import Any

import httpx
import orjson
import pytest
from factories import request, response

from schemas.events import Request, Response
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.outputs import FunctionOutput
from streams.outputs.otlp import OtlpOutput
from streams.settings import Settings
from tests.support.workerproc import free_port

SECRET = "the merger memo says initech pays forty dollars a share, closing the week after the audit finishes"


@pytest.fixture
def served() -> Any:
    events: list[Any] = []
    receiver = OtlpReceiver(Settings(), FunctionOutput(events.append))
    port = receiver.start_in_thread()
    yield f"http://127.0.0.1:{port}/v1/traces", events, receiver
    receiver.stop_thread()


def test_a_call_comes_back_as_the_same_request_and_response(served: Any) -> None:
    url, events, _ = served
    req = request("r-1", "acme", 100.0, tokens=812, text=SECRET, max_output_tokens=256, cache_domain="d1")
    resp = response("r-1", "acme", 101.5, text="Noted.", response_id="chatcmpl-7", finish_reason="stop")
    out = OtlpOutput(url)
    try:
        assert out.send([req, orjson.loads(resp.model_dump_json(exclude_none=True))]) == []
        assert out.send([req, resp]) == []  # the same call again: the same span ids (the core drops duplicates)
    finally:
        out.close()
    got_req, got_resp = events[:2]
    assert isinstance(got_req, Request) and isinstance(got_resp, Response)
    assert (got_req.request_id, got_req.tenant_id, got_req.prompt_tokens) == ("r-1", "acme", 812)
    assert (got_req.session_id, got_req.max_output_tokens, got_req.cache_domain) == ("acme-s1", 256, "d1")
    assert got_req.prompt_fingerprint is not None and got_req.prompt_text is None  # the receiver fingerprinted it
    assert (got_resp.status_code, got_resp.response_id, got_resp.finish_reason) == (200, "chatcmpl-7", "stop")
    assert got_resp.ttft_ms == pytest.approx(400.0) and got_resp.duration_ms == pytest.approx(1500.0)
    assert got_resp.usage is not None and got_resp.usage.input_tokens == 2_000
    assert [e.event_id for e in events[2:]] == [e.event_id for e in events[:2]]


def test_an_unpaired_half_is_refused_and_a_receiver_away_raises(served: Any) -> None:
    url, events, _ = served
    out = OtlpOutput(url)
    try:
        [refused] = out.send([request("r-2", "acme", 100.0)])
        assert refused.reason == "unpaired" and events == []
    finally:
        out.close()
    away = OtlpOutput(f"http://127.0.0.1:{free_port()}/v1/traces", retries=1)
    with pytest.raises(httpx.TransportError):
        away.send([request("r-3", "acme", 100.0), response("r-3", "acme", 101.0)])
    away.close()


def test_the_receivers_refusal_comes_back_as_refused() -> None:
    """A sender's token allows acme only: its call for globex is refused by the receiver, and the output says so."""
    token = "t" * 24
    settings = Settings(otlp={"tokens": [{"sender": "litellm", "token": token, "tenants": ["acme"]}]})
    events: list[Any] = []
    receiver = OtlpReceiver(settings, FunctionOutput(events.append))
    port = receiver.start_in_thread()
    out = OtlpOutput(f"http://127.0.0.1:{port}/v1/traces", token=token)
    try:
        assert out.send([request("r-5", "acme", 100.0), response("r-5", "acme", 101.0)]) == []
        [refused] = out.send([request("r-6", "globex", 100.0), response("r-6", "globex", 101.0)])
    finally:
        out.close()
        receiver.stop_thread()
    assert refused.reason == "receiver_refused" and "tenant_not_allowed" in refused.detail
    assert [e.request_id for e in events] == ["litellm/r-5", "litellm/r-5"]
