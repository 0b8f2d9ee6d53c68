"""The exchange, its prints and its canary hits are plain slotted dataclasses inside the process (issue 27):
built without validation, read at the cost of a slot, pickled compactly into snapshots, and written as JSON by
pydantic (`EXCHANGE_ADAPTER`) where they leave the process, in the form the exported schema describes.
"""

from __future__ import annotations

import copy
import dataclasses
import pickle

import orjson
import pytest
from pydantic import BaseModel, ConfigDict

from schemas.events import Request, Response
from schemas.exchange import EXCHANGE_ADAPTER, CanaryHit, Exchange, TextFingerprint

REQUEST = Request(
    type="request",
    event_id="e1",
    ts=1787817600.0,
    request_id="r1",
    tenant_id="acme",
    model="m",
    prompt_tokens=12,
    session_id="s1",
)
RESPONSE = Response.model_validate(
    {
        "type": "response",
        "event_id": "e2",
        "ts": 1787817600.5,
        "request_id": "r1",
        "tenant_id": "acme",
        "model": "m",
        "cache_domain": "pd-1",
        "status_code": 200,
        "usage": {"input_tokens": 12, "output_tokens": 3},
    }
)
PRINT = TextFingerprint(hashes=[3, 5, 8], words=12)
HIT = CanaryHit(marker_id="m1", owner_tenant_id="globex")


class _OldPrint(BaseModel):
    """What TextFingerprint was before issue 27 (a frozen pydantic model with positions riding in its __dict__)."""

    model_config = ConfigDict(frozen=True)
    hashes: list[int]
    words: int


@pytest.mark.parametrize(
    ("prompt", "output", "hits"),
    [(None, None, []), (PRINT, None, [HIT]), (None, PRINT, [])],
    ids=["text-free", "prompt+hit", "output"],
)
def test_an_exchange_is_plain_and_leaves_the_process_as_the_schema_says(
    prompt: TextFingerprint | None, output: TextFingerprint | None, hits: list[CanaryHit]
) -> None:
    ex = Exchange(1787817600.5, REQUEST, RESPONSE, prompt, output, hits)
    assert not isinstance(ex, BaseModel) and not hasattr(ex, "__dict__")  # slots: no per-object dict
    assert (ex.request_id, ex.tenant_id, ex.session_id, ex.cache_domain) == ("r1", "acme", "s1", "pd-1")
    data = orjson.loads(EXCHANGE_ADAPTER.dump_json(ex))
    assert data["request"] == orjson.loads(REQUEST.model_dump_json())
    assert data["canary_hits"] == [{"marker_id": "m1", "owner_tenant_id": "globex", "owner_session_id": None}] * len(
        hits
    )
    assert EXCHANGE_ADAPTER.validate_python(data) == ex  # validation from its JSON gives it back
    assert pickle.loads(pickle.dumps(ex)) == ex
    assert copy.deepcopy(ex) == ex


def test_positions_and_sentences_ride_along_uncompared_and_unserialised() -> None:
    tp = TextFingerprint([3, 5, 8], 12, [0, 4, 9], ([77], [12]))
    assert tp == PRINT  # not compared: the same text's print with or without them
    assert orjson.loads(EXCHANGE_ADAPTER.dump_json(Exchange(1.0, REQUEST, None, tp, None)))["prompt_print"] == {
        "hashes": [3, 5, 8],
        "words": 12,
    }
    back = pickle.loads(pickle.dumps(tp))  # but kept in snapshots
    assert (back.positions, back.sentences) == ([0, 4, 9], ([77], [12]))
    moved = dataclasses.replace(Exchange(1.0, REQUEST, RESPONSE, tp, None), canary_hits=[HIT])
    assert moved.prompt_print is tp and moved.canary_hits == [HIT]


def test_a_checkpoint_pickled_while_these_were_pydantic_models_restores() -> None:
    """A snapshot written by the previous version holds pydantic state ({"__dict__": ..., ...}); positions rode in
    the model's __dict__. Pickled here under the old class's form and restored into the new class."""
    old = _OldPrint(hashes=[3, 5, 8], words=12)
    old.__dict__["positions"] = [0, 4, 9]
    state = old.__getstate__()
    tp = TextFingerprint.__new__(TextFingerprint)
    tp.__setstate__(state)
    assert tp == PRINT and tp.positions == [0, 4, 9] and tp.sentences is None
    hit = CanaryHit.__new__(CanaryHit)
    hit.__setstate__({"__dict__": {"marker_id": "m1", "owner_tenant_id": "globex", "owner_session_id": None}})
    assert hit == HIT and hash(hit) == hash(HIT)
    with pytest.raises(ValueError):
        TextFingerprint.__new__(TextFingerprint).__setstate__(([1], 2))  # a tuple of the wrong length is refused
