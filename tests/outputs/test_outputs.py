"""Every event output (streams/outputs/, and the embedded runner's) under the same checks, then each one's own.

An output takes a batch of wire events (models, or their JSON objects) in order and returns what it refused; it keeps
dead letters where it keeps them; close() lets go of what it opened and nothing else."""

from __future__ import annotations

import io
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import pytest
from factories import request, response

from streams.embedded.output import EmbeddedOutput
from streams.inputs.otlp_receiver import OtlpReceiver
from streams.outputs import FunctionOutput, JsonlOutput, Letter, NullOutput, Output, Refused, ValidatedOutput
from streams.outputs.otlp import OtlpOutput
from streams.settings import Settings

SETTINGS = Settings(detection={"fingerprint_key": "outputs-tests"})


def _pair(rid: str, ts: float = 100.0) -> list[Any]:
    return [request(rid, "acme", ts, text="a prompt"), response(rid, "acme", ts + 1, text="an answer")]


def _jsonl() -> JsonlOutput:
    return JsonlOutput(io.BytesIO(), io.BytesIO())


def _embedded() -> EmbeddedOutput:
    return EmbeddedOutput(SETTINGS, io.BytesIO(), io.BytesIO())


class _ServedOtlp(OtlpOutput):
    """An OtlpOutput with a `crosstalk otlp` receiver of its own on loopback, stopped on close."""

    def __init__(self) -> None:
        self.receiver = OtlpReceiver(SETTINGS, FunctionOutput(lambda ev: None))
        super().__init__(f"http://127.0.0.1:{self.receiver.start_in_thread()}/v1/traces")

    def close(self) -> None:
        super().close()
        self.receiver.stop_thread()


MAKERS: dict[str, Callable[[], Output]] = {
    "jsonl": _jsonl,
    "function": lambda: FunctionOutput(lambda ev: None),
    "null": NullOutput,
    "validated": lambda: ValidatedOutput(_jsonl(), SETTINGS),
    "embedded": _embedded,
    "otlp": _ServedOtlp,
}


@pytest.mark.parametrize("name", sorted(MAKERS))
def test_every_output_takes_models_and_objects_and_refuses_none_of_a_valid_batch(name: str) -> None:
    out = MAKERS[name]()
    assert isinstance(out, Output)
    models = _pair("r-1")
    objects = [orjson.loads(m.model_dump_json(exclude_none=True)) for m in _pair("r-2")]
    assert out.send(models) == []
    assert out.send(objects) == []
    assert out.send([]) == []
    out.dead_letter(Letter("test", {"reason": "not_otlp"}, "not_otlp", "a record that was not a span"))
    out.flush()
    out.close()


def test_jsonl_writes_one_line_per_event_in_order_and_dead_letters_apart() -> None:
    events, rejects = io.BytesIO(), io.BytesIO()
    out = JsonlOutput(events, rejects)
    pair = _pair("r-1")
    out.send([pair[0], orjson.loads(pair[1].model_dump_json())])
    out.dead_letter(Letter("otlp-http", {"trace_id": "ab"}, "no_tenant", "no tenant attribute"))
    out.close()
    lines = [orjson.loads(x) for x in events.getvalue().splitlines()]
    assert [(x["type"], x["request_id"]) for x in lines] == [("request", "r-1"), ("response", "r-1")]
    assert None not in lines[0].values()  # None fields left out, as the wire contract writes them
    assert set(lines[0]) < set(pair[0].model_dump())
    assert orjson.loads(rejects.getvalue()) == {"source": "otlp-http", "trace_id": "ab"}
    assert not events.closed  # the caller's stream stays the caller's


def test_jsonl_to_a_path_appends_and_closes_its_file(tmp_path: Path) -> None:
    path = tmp_path / "sub" / "events.jsonl"
    for rid in ("a", "b"):
        out = JsonlOutput(str(path))
        out.send(_pair(rid)[:1])
        out.close()
    assert [orjson.loads(x)["request_id"] for x in path.read_bytes().splitlines()] == ["a", "b"]


def test_validated_sends_only_valid_events_and_counts_both(capsys: pytest.CaptureFixture[str]) -> None:
    got: list[Any] = []
    out = ValidatedOutput(FunctionOutput(got.append), SETTINGS, "crosstalk test")
    good = orjson.loads(_pair("r-1")[0].model_dump_json())
    bad = dict(good, ts="yesterday")
    out.send([good, bad])
    assert got == [good]
    assert out.counts["request"] == 1
    assert [k for k in out.counts if k.startswith("invalid:")] and sum(out.counts.values()) == 2
    assert "crosstalk test: event not sent" in capsys.readouterr().err


def test_the_embedded_output_refuses_what_its_core_refuses_and_names_the_event() -> None:
    alerts, rejects = io.BytesIO(), io.BytesIO()
    out = EmbeddedOutput(SETTINGS, alerts, rejects)
    pair = _pair("r-1")
    assert out.send(pair) == []
    (refused,) = out.send(pair[:1])  # the same event again
    assert isinstance(refused, Refused) and refused.reason == "duplicate" and refused.event.request_id == "r-1"
    out.dead_letter(Letter("otlp-http", {"trace_id": "ab"}, "no_tenant", "no tenant attribute"))
    out.close()
    reasons = [orjson.loads(x)["reason"] for x in rejects.getvalue().splitlines()]
    assert reasons == ["duplicate", "no_tenant"]
