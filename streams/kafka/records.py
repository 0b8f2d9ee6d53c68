"""The compact records of the workers' internal topics: events validated once, at ingest.

An input event is validated by the ingest stage and nowhere else. What crosses the internal topics is
the validated model's fields (its own __dict__, one orjson call), rebuilt on the other side without
validation: the decoded object becomes the model's __dict__ as it is. Every stage after ingest reads
records that only the workers write. A record
holds no raw text: prompts and outputs were fingerprinted at ingest (the wire `Fingerprint` form), and
canary markers travel as their keyed hashes (`Plant`, detectors/ingest.py: what the core's ingest makes of them).

    event record     [type, {field: value, nested models as objects}, token_keys|null]
    plant record     [event_id, ts, token_key, marker_id, tenant_id, session_id]
    exchange record  [ts, request|null, response|null, prompt_print|null, output_print|null,
                      [[marker_id, owner_tenant_id, owner_session_id], ...], orphan|null]
    print            [words, hashes, positions] (positions: k-gram offsets, docs/adr/0004 "coverage";
                      [words, hashes] where unknown, and in records written before them);
                     [words, hashes, positions|null, sentence hashes, sentence ends|null] with the
                      whole-sentence print (detectors/sentences.py)
                     [..., sentence hashes|null, sentence ends|null, names] with the keyed names of a
                      tool check (docs/adr/0019)

Objects, not arrays of values in field order (records of the previous layout still decode): orjson
turns a JSON object into the dict a model keeps its fields in, where an array had to be zipped with
the field names per model; that zip and its dict cost more than the ~2x bytes of the keys (issue 16).

Rebuilding skips pydantic's validation, the cost the records exist to avoid (a model built here is
equal to, and serialises like, the validated one; tests/kafka/test_records.py checks it).
"""

from __future__ import annotations

from collections.abc import Callable
from collections.abc import Set as AbstractSet
from typing import Any

import orjson
from pydantic import BaseModel

from detectors.pipeline import Plant, positions_of, sentences_of
from schemas.events import CacheStats, Canary, Fingerprint, Request, Response, Usage
from schemas.exchange import CanaryHit, Exchange, TextFingerprint

_new = object.__new__
# BaseModel's own slot descriptors: setting through them skips an attribute lookup per call.
_set_dict = BaseModel.__dict__["__dict__"].__set__
_set_fields_set = BaseModel.__dict__["__pydantic_fields_set__"].__set__
_set_extra = BaseModel.__dict__["__pydantic_extra__"].__set__
_set_private = BaseModel.__dict__["__pydantic_private__"].__set__


def _trusted(cls: type[BaseModel], values: dict[str, Any], fields_set: AbstractSet[str]) -> Any:
    """`cls(**values)` without validation: an event the ingest validated, rebuilt from the record it wrote (the
    events stay the wire's pydantic models through every stage, for the sinks and the alerts that quote them).
    `values` becomes the model's __dict__ as given: every field, in field order."""
    obj = _new(cls)
    _set_dict(obj, values)
    _set_fields_set(obj, set(fields_set))
    _set_extra(obj, None)
    _set_private(obj, None)
    return obj


class RecordError(ValueError):
    """An internal record this version cannot read (a bug, or a foreign writer to an internal topic)."""


_FIELDS: dict[type[BaseModel], tuple[str, ...]] = {
    cls: tuple(cls.model_fields) for cls in (Request, Response, CacheStats, Canary, Usage, Fingerprint)
}
# Fields holding a nested model, by position: an object in a record (an array in the previous layout).
_NESTED: dict[type[BaseModel], tuple[tuple[int, type[BaseModel]], ...]] = {
    Request: ((_FIELDS[Request].index("prompt_fingerprint"), Fingerprint),),
    Response: (
        (_FIELDS[Response].index("usage"), Usage),
        (_FIELDS[Response].index("output_fingerprint"), Fingerprint),
    ),
}
_BY_TYPE: dict[str, type[BaseModel]] = {"request": Request, "response": Response, "cache_stats": CacheStats}
# Optional fields added to a class after records of it were written, last in field order, default None: a record
# from before (on a topic, or in a snapshot, during an upgrade) lacks them and decodes with None, as the wire does.
_ADDED: dict[type[BaseModel], tuple[str, ...]] = {
    Fingerprint: ("positions", "sentences", "sentence_ends", "hashes_b64", "positions_b64", "tools", "identifiers"),
    Response: ("response_id", "error_type"),
    Usage: ("cached_input_tokens",),
    CacheStats: (
        "prefix_cache_hits_total",
        "prefix_cache_queries_total",
        "cache_hit_rate",
        "swa_usage",
        "mamba_usage",
        "handoff_queue_reqs",
        "kv_transfer_latency_ms",
        "role_source",
    ),
}
if any(_FIELDS[cls][-len(added) :] != added for cls, added in _ADDED.items()):
    raise RuntimeError("fields added to a record class must come last: update records._ADDED")


def _builder(cls: type[BaseModel]) -> Callable[[list[Any]], Any]:
    """A builder of one class from the previous layout (field values in field order), so that records
    written before an upgrade and still on the topics or held in a snapshot decode."""
    fields = _FIELDS[cls]
    n = len(fields)
    all_fields = frozenset(fields)
    nested = _NESTED.get(cls, ())
    name = cls.__name__

    oldest = n - len(_ADDED.get(cls, ()))

    def build(values: list[Any]) -> Any:
        if len(values) != n:
            if not oldest <= len(values) < n:
                raise RecordError(f"{name} record has {len(values)} fields, expected {n}")
            values = [*values, *[None] * (n - len(values))]  # written before the last added fields
        for i, sub in nested:
            if values[i] is not None:
                values[i] = _BUILDERS[sub](values[i])
        return _trusted(cls, dict(zip(fields, values, strict=False)), all_fields)  # lengths checked above

    return build


_BUILDERS: dict[type[BaseModel], Callable[[list[Any]], Any]] = {cls: _builder(cls) for cls in _FIELDS}


def _object_builder(cls: type[BaseModel]) -> Callable[[Any], Any]:
    """A builder of one class from its fields as a JSON object: the decoded dict becomes its __dict__."""
    fields = frozenset(_FIELDS[cls])
    n = len(fields)
    nested = tuple((_FIELDS[cls][i], sub) for i, sub in _NESTED.get(cls, ()))
    added = _ADDED.get(cls, ())
    name = cls.__name__

    def build(values: Any) -> Any:
        if type(values) is not dict:
            if type(values) is list:  # the previous layout (records written before an upgrade)
                return _BUILDERS[cls](values)
            raise RecordError(f"{name} record is a {type(values).__name__}")
        # The count, as the array layout checked it: comparing the names would cost a third of a build.
        if len(values) != n:
            # Written before the last added fields (a suffix of `added`): they are last in field order, as the model
            # keeps them, and None.
            missing = added[len(added) - (n - len(values)) :] if n - len(added) <= len(values) < n else ()
            if not missing or any(f in values for f in missing):
                raise RecordError(f"{name} record has {len(values)} fields, expected {n}")
            for f in missing:
                values[f] = None
        for field_name, sub in nested:
            v = values[field_name]
            if v is not None:
                values[field_name] = _OBJECT_BUILDERS[sub](v)
        return _trusted(cls, values, fields)

    return build


_OBJECT_BUILDERS: dict[type[BaseModel], Callable[[Any], Any]] = {cls: _object_builder(cls) for cls in _FIELDS}


def _fields_of(model: Any) -> dict[str, Any]:
    """orjson's `default` for the nested models of a record (Usage, Fingerprint): their fields."""
    if isinstance(model, BaseModel):
        return model.__dict__
    raise TypeError(f"{type(model).__name__} in a record")


# --- events (ingest -> join) ------------------------------------------------------------------------


def event_record(event: Request | Response | CacheStats, token_keys: list[int] | None = None) -> bytes:
    """`event` must be text-free (ingest fingerprints and strips text before); `token_keys` are the keyed
    hashes of an output's hex-looking words, which a canary scan looks up (CanaryRegistry.token_keys)."""
    return orjson.dumps([event.type, event.__dict__, token_keys], default=_fields_of)


def event_from_record(raw: bytes) -> tuple[Request | Response | CacheStats, list[int] | None]:
    try:
        kind, values, anchors = orjson.loads(raw)
        return _OBJECT_BUILDERS[_BY_TYPE[kind]](values), anchors
    except RecordError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"malformed event record: {type(exc).__name__}: {exc}") from None


# --- canary plants (ingest -> every join partition) ---------------------------------------------------


def plant_record(p: Plant) -> bytes:
    return orjson.dumps([p.event_id, p.ts, p.token_key, p.marker_id, p.tenant_id, p.session_id])


def plant_from_record(raw: bytes) -> Plant:
    try:
        event_id, ts, token_key, marker_id, tenant_id, session_id = orjson.loads(raw)
        return Plant(str(event_id), float(ts), int(token_key), str(marker_id), str(tenant_id), session_id)
    except (orjson.JSONDecodeError, TypeError, ValueError) as exc:
        raise RecordError(f"malformed plant record: {type(exc).__name__}: {exc}") from None


# --- exchanges (join -> domain) -------------------------------------------------------------------------


def _print_values(tp: TextFingerprint | None) -> list[Any] | None:
    if tp is None:
        return None
    # The k-gram positions where known (docs/adr/0004, "coverage"): the domain stage judges runs as the
    # embedded monitor does. Records from before them have [words, hashes] only.
    pos = positions_of(tp)
    sp = sentences_of(tp)
    if tp.ids is not None:  # the identifiers the ledger reads (docs/adr/0027), after the names
        names = None if tp.tools is None else sorted(tp.tools)
        return [tp.words, tp.hashes, pos, *(sp or (None, None)), names, sorted(tp.ids)]
    if tp.tools is not None:  # the names a tool check reads (docs/adr/0019)
        return [tp.words, tp.hashes, pos, *(sp or (None, None)), sorted(tp.tools)]
    if sp is not None:
        return [tp.words, tp.hashes, pos, sp[0], sp[1]]
    return [tp.words, tp.hashes] if pos is None else [tp.words, tp.hashes, pos]


def _print_of(values: list[Any] | None) -> TextFingerprint | None:
    if values is None:
        return None
    if len(values) == 2:
        words, hashes = values
        return TextFingerprint(hashes, words)
    tools = ids = None
    if len(values) == 7:
        *values, ids = values
    if len(values) == 6:
        *values, tools = values
    if len(values) == 5:
        words, hashes, positions, sentences, ends = values
        if sentences is not None and ends is not None and len(sentences) != len(ends):
            raise RecordError(f"print record has {len(ends)} sentence ends for {len(sentences)} sentences")
    else:
        words, hashes, positions = values
        sentences = None
    if positions is not None and len(positions) != len(hashes):
        raise RecordError(f"print record has {len(positions)} positions for {len(hashes)} hashes")
    names = None if tools is None else frozenset(tools)
    tp = TextFingerprint(hashes, words, positions, None if sentences is None else (sentences, ends), names)
    tp.ids = None if ids is None else frozenset(ids)
    return tp


def exchange_record(ex: Exchange) -> bytes:
    req, resp = ex.request, ex.response
    return orjson.dumps(
        [
            ex.ts,
            None if req is None else req.__dict__,
            None if resp is None else resp.__dict__,
            _print_values(ex.prompt_print),
            _print_values(ex.output_print),
            [[h.marker_id, h.owner_tenant_id, h.owner_session_id] for h in ex.canary_hits],
            ex.orphan,
        ],
        default=_fields_of,
    )


def exchange_from_record(raw: bytes) -> Exchange:
    try:
        ts, req, resp, pprint, oprint, hits, orphan = orjson.loads(raw)
        if orphan not in _ORPHANS:
            raise RecordError(f"exchange record has orphan {orphan!r}")
        return Exchange(
            float(ts),
            None if req is None else _OBJECT_BUILDERS[Request](req),
            None if resp is None else _OBJECT_BUILDERS[Response](resp),
            _print_of(pprint),
            _print_of(oprint),
            [CanaryHit(str(m), str(t), None if s is None else str(s)) for m, t, s in hits],
            orphan,
        )
    except RecordError:
        raise
    except (orjson.JSONDecodeError, KeyError, TypeError, ValueError) as exc:
        raise RecordError(f"malformed exchange record: {type(exc).__name__}: {exc}") from None


_ORPHANS = (None, "no_request", "no_response")
