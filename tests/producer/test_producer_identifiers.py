"""A gateway that keeps text at the edge sends the keyed numbers with each print (ADR 0027): the monitor then finds an
answer to another request's prompt from the fingerprints alone, as it does from the text."""

from __future__ import annotations

from pathlib import Path

from factories import edge_printed, private_texts

from streams.embedded.runner import EmbeddedRunner
from streams.producer import GatewayProducer
from streams.settings import Settings


def _events() -> list[dict]:
    words_a, words_r, answer, other = private_texts(21, 4)
    turns = [  # (request id, tenant, sent, delivered, prompt, answer)
        ("r1", "R", 0.0, 3.0, f"{words_r} Summarise the release notes of version 4.2.", f"{answer} Order 38713357 "
         "is refunded to DE44500105175407324931."),
        ("a1", "A", 0.5, 4.0, f"{words_a} My order 38713357 was charged twice from DE44500105175407324931.",
         f"{other} We are looking into it."),
    ]  # fmt: skip
    out: list[dict] = []
    for rid, tenant, sent, done, prompt, output in turns:
        ts = 1_780_000_000.0
        out.append({"type": "request", "event_id": f"q-{rid}", "ts": ts + sent, "request_id": rid, "tenant_id": tenant,
                    "model": "m", "prompt_tokens": 40, "prompt_text": prompt, "cache_domain": "d1"})  # fmt: skip
        out.append({"type": "response", "event_id": f"r-{rid}", "ts": ts + done, "request_id": rid, "tenant_id": tenant,
                    "model": "m", "cache_domain": "d1", "status_code": 200, "output_text": output})  # fmt: skip
    return sorted(out, key=lambda e: e["ts"])


def _answered_elsewhere(path: Path, s: Settings) -> set[tuple[str, str | None]]:
    result = EmbeddedRunner(s).run_files([str(path)])
    assert not result.rejects
    return {
        (r, a.source_tenant_id)
        for a in result.alerts
        if any(e.figures.get("delivery_mixup") == "identifiers" for e in a.evidence)
        for r in a.request_ids
    }


def test_edge_prints_carry_the_numbers_and_alert_as_the_text_does(tmp_path: Path) -> None:
    s = Settings.model_validate({"detection": {"fingerprint_key": "edge-identifiers"}})
    gp = GatewayProducer(s, producer=object())  # type: ignore[arg-type]  # prepare() sends nothing
    events = _events()
    prints, text_path, wire_path = edge_printed(gp, events, tmp_path)
    for e, fp in zip(events, prints, strict=True):
        numbers = {"r-r1": 2, "q-a1": 2}.get(e["event_id"], 0)  # known on every print, none on two of them
        assert fp is not None and fp.identifiers is not None and len(fp.identifiers) == numbers, e["event_id"]
    wire = wire_path.read_bytes()
    assert b"38713357" not in wire and b"DE44500105175407324931" not in wire  # keyed: no number leaves the gateway
    assert _answered_elsewhere(text_path, s) == {("r1", "A")}
    assert _answered_elsewhere(wire_path, s) == {("r1", "A")}
