"""An Exchange: a request joined with its response, text replaced by fingerprints.

A type inside the process, not one read from outside: the join builds it from events validated at ingest,
the domain stage and the sinks read it, and in the staged topology it crosses the internal domain topic as a
record only the workers write (streams/kafka/records.py). So it is a plain slotted dataclass, built and read
at the cost of a Python object, not a pydantic model read through workarounds (issue 27, docs/adr/0011).
pydantic still gives its JSON form where it leaves the process (`EXCHANGE_ADAPTER`: sinks, the JSON Schema
export). It never carries raw prompt or output text.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Annotated, Any, ClassVar, Literal

from pydantic import Field, TypeAdapter

from schemas.events import Request, Response


def _state(obj: Any) -> tuple[Any, ...]:
    return tuple(getattr(obj, name) for name in obj.__slots__)


def _restore(obj: Any, state: Any) -> None:
    """Restore a pickled value: the tuple `_state` writes or, from a checkpoint written while these were pydantic
    models, pydantic's {"__dict__": fields, ...} (a field it lacks, such as `positions`, is None)."""
    if isinstance(state, dict):
        values = state.get("__dict__") or {}
        state = tuple(values.get(name) for name in obj.__slots__)
    # A tuple written before the fields added since (`_added`, always last) lacks them: None.
    missing = len(obj.__slots__) - len(state)
    if 0 < missing <= len(getattr(obj, "_added", ())):
        state = (*state, *(None,) * missing)
    for name, value in zip(obj.__slots__, state, strict=True):
        object.__setattr__(obj, name, value)


class _Plain:
    """Pickled as a tuple of its fields (snapshots hold exchanges and prints), and restored from the pydantic
    form of checkpoints written before."""

    __slots__ = ()
    __getstate__ = _state
    __setstate__ = _restore


@dataclass(slots=True)
class TextFingerprint(_Plain):
    """Winnowing fingerprints of one text: unique selected keyed hashes plus its length in words.

    `positions` (the k-gram offset of each hash at its first selection) and `sentences` (the whole-sentence
    print) are known where this process fingerprinted the text or a wire fingerprint carried them; they are not
    compared and not in the exchange's JSON (docs/adr/0004, "coverage"; docs/adr/0008, decision 8). `tools` are
    keyed hashes of names where ingest read the text (detectors/toolcalls.py): of a prompt, its name-like words (a
    frozenset, None when unknown); of an output, the functions it calls (a frozenset, None when it calls none). `ids`:
    keyed hashes of the text's identifiers (detectors/identifiers.py; a frozenset, None when unknown)."""

    hashes: list[int]
    words: int
    positions: Annotated[list[int] | None, Field(exclude=True)] = field(default=None, compare=False, repr=False)
    sentences: Annotated[Any, Field(exclude=True)] = field(default=None, compare=False, repr=False)
    tools: Annotated[Any, Field(exclude=True)] = field(default=None, compare=False, repr=False)
    ids: Annotated[Any, Field(exclude=True)] = field(default=None, compare=False, repr=False)

    _added: ClassVar[tuple[str, ...]] = ("tools", "ids")  # fields added after prints were first pickled (`_restore`)


@dataclass(slots=True, frozen=True)
class CanaryHit:
    marker_id: str = field(metadata={"description": "keyed hash of the marker; the marker itself is never repeated"})
    owner_tenant_id: str
    owner_session_id: str | None = None

    # In the class's own body: a frozen dataclass replaces inherited ones with its own (which know no pydantic form).
    __getstate__ = _state
    __setstate__ = _restore


@dataclass(slots=True)
class Exchange(_Plain):
    """Treated as immutable once built (a copy with changes: `dataclasses.replace`)."""

    ts: float = field(metadata={"description": "event time at which the pair became complete (or was given up on)"})
    request: Request | None = field(metadata={"description": "text fields removed"})
    response: Response | None = field(metadata={"description": "text fields removed"})
    prompt_print: TextFingerprint | None = None
    output_print: TextFingerprint | None = None
    canary_hits: list[CanaryHit] = field(default_factory=list)
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
        response = self.response
        if response is not None:
            return response.cache_domain
        request = self.request
        return request.cache_domain if request is not None else None

    @property
    def response_id(self) -> str | None:
        # getattr: a response restored from a snapshot taken before the field existed has no such attribute.
        return getattr(self.response, "response_id", None) if self.response is not None else None

    @property
    def traceparent(self) -> str | None:
        for half in (self.response, self.request):
            if half is not None and half.traceparent:
                return half.traceparent
        return None


# The exchange's JSON form and JSON Schema, where it leaves the process.
EXCHANGE_ADAPTER: TypeAdapter[Exchange] = TypeAdapter(Exchange)
