"""`joined()` builds, without validation, the very Exchange that validation builds from the same parts.

The join builds one per request/response pair on the hot path; sinks and the Kafka records then read,
compare, copy and serialise it like any validated model.
"""

from __future__ import annotations

import copy
import pickle

import pytest
from pydantic import ValidationError

from schemas.events import Request, Response
from schemas.exchange import CanaryHit, Exchange, TextFingerprint, joined

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


@pytest.mark.parametrize(
    ("prompt", "output", "hits"),
    [(None, None, ()), (PRINT, None, [HIT]), (None, PRINT, [])],
    ids=["text-free", "prompt+hit", "output"],
)
def test_joined_is_the_validated_exchange(
    prompt: TextFingerprint | None, output: TextFingerprint | None, hits: list[CanaryHit]
) -> None:
    fast = joined(1787817600.5, REQUEST, RESPONSE, prompt, output, hits)
    slow = Exchange(
        ts=1787817600.5,
        request=REQUEST,
        response=RESPONSE,
        prompt_print=prompt,
        output_print=output,
        canary_hits=list(hits),
    )
    assert fast == slow
    assert list(fast.__dict__.items()) == list(slow.__dict__.items())  # same values, same key order
    assert fast.model_fields_set == slow.model_fields_set
    assert fast.model_dump_json() == slow.model_dump_json()
    assert fast.model_dump(exclude_unset=True) == slow.model_dump(exclude_unset=True)
    assert (fast.__pydantic_extra__, fast.__pydantic_private__) == (None, None)
    assert pickle.loads(pickle.dumps(fast)) == slow
    assert (fast.request_id, fast.tenant_id, fast.cache_domain) == ("r1", "acme", "pd-1")
    with pytest.raises(ValidationError):
        fast.ts = 1.0  # type: ignore[misc]  # frozen, as validated


def test_what_joined_exchanges_share_never_changes() -> None:
    """Each has its own canary_hits list; their fields_set is one set, which pydantic never changes for a frozen
    model: a copy with an update, a deep copy or an unpickled one gets its own, and assignment is refused."""
    hits = [HIT]
    a = joined(1.0, REQUEST, RESPONSE, None, None, hits)
    b = joined(2.0, REQUEST, RESPONSE, None, None, hits)
    assert a.canary_hits is not hits and a.canary_hits is not b.canary_hits
    before = set(a.model_fields_set)
    c = a.model_copy(update={"orphan": "no_request"})
    assert "orphan" in c.model_fields_set
    d = copy.deepcopy(b)
    assert d == b and d.canary_hits is not b.canary_hits and d.model_fields_set is not b.model_fields_set
    assert pickle.loads(pickle.dumps(a)).model_fields_set is not a.model_fields_set
    with pytest.raises(ValidationError):
        b.orphan = "no_request"  # type: ignore[misc]
    assert a.model_fields_set == b.model_fields_set == before  # "orphan" never got into the shared set
