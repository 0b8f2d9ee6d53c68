"""The packed wire fingerprint (`hashes_b64`, `positions_b64`): the same print as the JSON lists, decoded in one pass
(docs/textrich.md, issue 43 target 2). Read back exactly; anything malformed is an invalid event with a reason; and a
monitor alerts on packed edge prints as on the lists."""

from __future__ import annotations

import base64
from pathlib import Path
from typing import Any

import orjson
import pytest

from schemas.events import EventError, Fingerprint, pack, parse_event, unpack
from schemas.export import schemas
from streams.embedded.runner import EmbeddedRunner
from streams.producer import GatewayProducer

# The positions tests' text and response event: the packed form must read back as their lists do.
from tests.schemas.test_fingerprint_positions import FPR, TEXT, _event
from tests.support.stockphrases import settings, traffic


def _print(ev: bytes) -> Fingerprint:
    parsed = parse_event(ev)
    fp = getattr(parsed, "output_fingerprint", None)
    assert isinstance(fp, Fingerprint)
    return fp


def test_a_packed_print_reads_back_as_the_lists() -> None:
    lists = FPR.fingerprint(TEXT).model_dump(mode="json", exclude_none=True)
    packed = FPR.fingerprint(TEXT, packed=True).model_dump(mode="json", exclude_none=True)
    assert "hashes_b64" in packed and "positions_b64" in packed and "hashes" not in packed
    assert len(orjson.dumps(packed)) < len(orjson.dumps(lists))
    got = _print(_event(packed))
    assert got.hashes == lists["hashes"] and got.positions == lists["positions"]
    assert got.sentences == lists.get("sentences") and got.hashes_b64 is None and got.positions_b64 is None
    # Read once, it serialises as the lists: a stage that re-sends it sends one form.
    assert orjson.loads(got.model_dump_json(exclude_none=True)) == lists


@pytest.mark.parametrize("values", [[], [0], [1, 2**64 - 1, 12_345]])
def test_pack_and_unpack_are_inverse_at_the_edges_of_the_range(values: list[int]) -> None:
    assert unpack(pack(values, "Q"), "Q", "h") == values
    assert base64.b64decode(pack([1], "Q")) == (1).to_bytes(8, "little")  # little-endian on every machine


BAD: dict[str, tuple[dict[str, Any], str]] = {
    "not base64": ({"hashes_b64": "@@@@"}, "not standard base64"),
    "a partial hash": ({"hashes_b64": base64.b64encode(b"\x01" * 12).decode()}, "whole number of 8-byte"),
    "a partial position": (
        {"hashes_b64": pack([1, 2], "Q"), "positions_b64": base64.b64encode(b"\x00" * 6).decode()},
        "whole number of 4-byte",
    ),
    "both forms": ({"hashes_b64": pack([1], "Q"), "hashes": [1]}, "not both"),
    "packed hashes, listed positions": ({"hashes_b64": pack([1], "Q"), "positions": [0]}, "not both"),
    "positions alone": ({"hashes": [1], "positions_b64": pack([0], "I")}, "without hashes_b64"),
    "a position per hash": ({"hashes_b64": pack([1, 2], "Q"), "positions_b64": pack([0], "I")}, "one per hash"),
    "positions going back": ({"hashes_b64": pack([1, 2], "Q"), "positions_b64": pack([3, 1], "I")}, "increasing"),
    "past the text": ({"hashes_b64": pack([1], "Q"), "positions_b64": pack([7], "I")}, "past the text"),
}


@pytest.mark.parametrize("case", list(BAD))
def test_a_malformed_packed_print_is_an_invalid_event_with_its_reason(case: str) -> None:
    fields, reason = BAD[case]
    fp = {"k": 5, "w": 4, "key_id": FPR.key_id, "words": 10, **fields}
    with pytest.raises(EventError, match=reason):
        parse_event(_event(fp))


def test_a_packed_print_holds_at_most_a_million_hashes_as_the_list_does() -> None:
    # Past the event size limit anyway (4 MiB by default); the model's own bound holds for a larger limit.
    fp = {"k": 5, "w": 4, "key_id": FPR.key_id, "words": 10, "hashes_b64": "A" * 10_666_680}
    with pytest.raises(ValueError, match="at most 10666668 characters"):
        Fingerprint.model_validate_json(orjson.dumps(fp))
    fp["hashes_b64"] = pack([1] * 1_000_001, "Q")[:10_666_668]  # the largest string: 1,000,000 hashes and a half
    with pytest.raises(ValueError, match=r"whole number|more than 1,000,000"):
        Fingerprint.model_validate_json(orjson.dumps(fp))


def test_a_print_past_the_limit_is_never_packed_so_validation_refuses_it_as_before(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    # A packed print is built without validation; one with more hashes than a print may hold goes through the lists,
    # whose validation refuses it at the producer (the OTLP receiver's text_too_long), not downstream.
    import detectors.fingerprint as module

    monkeypatch.setattr(module, "MAX_HASHES", 3)
    fp = FPR.fingerprint(TEXT, packed=True)
    assert len(fp.hashes) > 3 and fp.hashes_b64 is None


def test_the_json_schema_names_the_packed_fields() -> None:
    fp = schemas()["response"]["$defs"]["Fingerprint"]
    assert {"hashes_b64", "positions_b64"} <= set(fp["properties"]) and "hashes" not in fp.get("required", [])


def test_packed_edge_prints_alert_as_the_listed_ones(tmp_path: Path) -> None:
    # The gateway library's two forms of the same traffic, judged by the embedded runner: the same alerts.
    events = traffic(tmp_path, sim=False)
    s = settings()
    runs = {}
    for packed in (True, False):
        gateway = GatewayProducer(s, producer=object(), packed=packed)
        path = tmp_path / f"edge-{packed}.jsonl"
        path.write_bytes(b"\n".join(gateway.prepare(e)[1] for e in events) + b"\n")
        assert (b"hashes_b64" in path.read_bytes()) is packed
        result = EmbeddedRunner(s).run_files([str(path)])
        assert not result.rejects
        runs[packed] = [(a.alert_id, a.severity, a.tenant_id) for a in result.alerts]
    assert runs[True] == runs[False] and any(sev in ("high", "critical") for _, sev, _ in runs[True])
