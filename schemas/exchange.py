"""An Exchange: a request joined with its response, text replaced by fingerprints.

A wire type: the join stage hands it to the per-domain stage (in Kafka it crosses the internal
domain topic) and sinks receive it, so it lives with the other wire types and is exported as JSON
Schema. It never carries raw prompt or output text.
"""

from __future__ import annotations

from collections.abc import Sequence
from collections.abc import Set as AbstractSet
from typing import Any, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import Request, Response


class TextFingerprint(BaseModel):
    """Winnowing fingerprints of one text: unique selected keyed hashes plus its length in words."""

    model_config = ConfigDict(frozen=True)

    hashes: list[int]
    words: int


class CanaryHit(BaseModel):
    model_config = ConfigDict(frozen=True)

    marker_id: str = Field(description="keyed hash of the marker; the marker itself is never repeated")
    owner_tenant_id: str
    owner_session_id: str | None = None


class Exchange(BaseModel):
    model_config = ConfigDict(frozen=True)

    ts: float = Field(description="event time at which the pair became complete (or was given up on)")
    request: Request | None = Field(description="text fields removed")
    response: Response | None = Field(description="text fields removed")
    prompt_print: TextFingerprint | None = None
    output_print: TextFingerprint | None = None
    canary_hits: list[CanaryHit] = Field(default_factory=list)
    orphan: Literal["no_request", "no_response"] | None = None

    @property
    def request_id(self) -> str:
        half = self.response or self.request
        assert half is not None
        return half.request_id

    @property
    def tenant_id(self) -> str:
        half = self.response or self.request
        assert half is not None
        return half.tenant_id

    @property
    def session_id(self) -> str | None:
        if self.response is not None and self.response.session_id:
            return self.response.session_id
        return self.request.session_id if self.request is not None else None

    @property
    def cache_domain(self) -> str | None:
        # Read once per exchange on the hot path; each field read of a model is a slow attribute lookup.
        response = self.response
        if response is not None:
            return response.cache_domain
        request = self.request
        return request.cache_domain if request is not None else None

    @property
    def traceparent(self) -> str | None:
        for half in (self.response, self.request):
            if half is not None and half.traceparent:
                return half.traceparent
        return None


_M = TypeVar("_M", bound=BaseModel)
_new = object.__new__
# BaseModel's own slot descriptors: setting through them skips an attribute lookup per call.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__
_FIELDS = ("ts", "request", "response", "prompt_print", "output_print", "canary_hits", "orphan")
_PAIR_SET = frozenset(_FIELDS[:-1])  # the fields a joined pair sets; `orphan` keeps its default
_PAIR_FIELDS_SET = set(_PAIR_SET)  # shared by every joined() exchange: never changed (see joined)
if tuple(Exchange.model_fields) != _FIELDS:
    # joined() below fills __dict__ by hand: a new Exchange field must be added there too.
    raise RuntimeError("Exchange fields changed: update schemas.exchange.joined")


def trusted(cls: type[_M], values: dict[str, Any], fields_set: AbstractSet[str] | None = None) -> _M:
    """`cls(**values)` without validation, for values validated before or built by crosstalk itself (the
    join's parts, the workers' own internal records). `values` becomes the model's __dict__ as given: the
    caller passes every field, in field order. `fields_set` defaults to every key of `values`."""
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields_set(obj, set(values if fields_set is None else fields_set))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


def joined(
    ts: float,
    request: Request,
    response: Response,
    prompt_print: TextFingerprint | None,
    output_print: TextFingerprint | None,
    canary_hits: Sequence[CanaryHit],
) -> Exchange:
    """What `Exchange(ts=, request=, response=, prompt_print=, output_print=, canary_hits=)` builds.

    The join hands over parts that are already model instances, so validation only re-checks their
    types, yet it was a fifth of a text-free event's cost. This skips it (the model stays frozen and
    serialises alike); `model_construct` would not help, it walks every field in Python.
    """
    # trusted(), inlined (a call less per exchange): same keys in the same (field) order, same fields_set,
    # and a fresh list as validation makes.
    obj = _new(Exchange)
    _set_dict(
        obj,
        {
            "ts": float(ts),
            "request": request,
            "response": response,
            "prompt_print": prompt_print,
            "output_print": output_print,
            "canary_hits": list(canary_hits) if canary_hits else [],
            "orphan": None,
        },
    )
    # One fields_set for every pair, not a copy each: a frozen model never changes its own (pydantic adds to
    # it only on assignment, which a frozen model refuses; model_copy and pickling give the copy its own).
    _set_fields_set(obj, _PAIR_FIELDS_SET)
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj
