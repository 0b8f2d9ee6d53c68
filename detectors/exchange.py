"""An Exchange: a request joined with its response, text replaced by fingerprints.

This is what the join stage hands to the per-domain stage (in Kafka: the message on the
domain topic). It never carries raw prompt or output text.
"""

from __future__ import annotations

from typing import Literal

from pydantic import BaseModel, ConfigDict, Field

from schemas.events import Request, Response


class TextPrint(BaseModel):
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
    prompt_print: TextPrint | None = None
    output_print: TextPrint | None = None
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
        if self.response is not None:
            return self.response.cache_domain
        return self.request.cache_domain if self.request is not None else None

    @property
    def traceparent(self) -> str | None:
        for half in (self.response, self.request):
            if half is not None and half.traceparent:
                return half.traceparent
        return None
