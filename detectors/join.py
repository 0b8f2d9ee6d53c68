"""Join request and response by request_id, in either order, with a bounded wait (event time).

The halves come text-free: ingest (detectors/ingest.py) fingerprinted their text and dropped it before the join.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from detectors.canaries import CanaryRegistry
from detectors.fingerprint import Fingerprinter
from detectors.ingest import Plant
from detectors.settings import DetectionSettings
from detectors.waiting import Waiting, upgrade
from schemas.events import EventError, Request, Response
from schemas.exchange import CanaryHit, Exchange, TextFingerprint


@dataclass(slots=True)
class _Half:
    event: Request | Response
    deadline: float
    text_print: TextFingerprint | None
    canary_hits: Sequence[CanaryHit]  # _NO_HITS (shared, never changed) or a list; snapshots hold lists


_NO_HITS: tuple[CanaryHit, ...] = ()  # one empty value for every half without hits, instead of a list each
# _Half(...) without the call of its __init__ (a Python-level call from C costs as much again as filling the
# slots): for the request's half, one per exchange.
_new = object.__new__


_COPIES = frozenset({"_request_wait_s", "_response_wait_s", "_max_pending"})  # of the settings, never pickled


class Joiner:
    def __init__(self, settings: DetectionSettings, canaries: CanaryRegistry) -> None:
        self.settings = settings
        self.canaries = canaries
        self.fingerprinter: Fingerprinter = canaries.fingerprinter
        self._requests = Waiting()  # request id -> _Half, in arrival order: a piece of its own (detectors/waiting.py)
        self._responses = Waiting()
        self.orphans = {"no_request": 0, "no_response": 0}

    # The settings, with the figures read per half copied to plain attributes (a settings model's attribute
    # read is slow). Setting them refreshes the copies; a snapshot holds `settings` only, as before the
    # copies existed, and restoring one makes them.
    @property
    def settings(self) -> DetectionSettings:
        return self._settings

    @settings.setter
    def settings(self, settings: DetectionSettings) -> None:
        self._settings = settings
        self._request_wait_s = settings.request_wait_s
        self._response_wait_s = settings.response_wait_s
        self._max_pending = settings.max_pending_joins

    def __getstate__(self) -> dict[str, Any]:
        # Keys as (and in the order) the plain attribute pickled them.
        return {("settings" if k == "_settings" else k): v for k, v in self.__dict__.items() if k not in _COPIES}

    def __setstate__(self, state: dict[str, Any]) -> None:
        state = dict(state)
        self.settings = state.pop("settings")  # first, as __init__ does: the attributes keep their order
        state.pop("sessions", None)  # a snapshot from when the join fingerprinted text: its (empty) session cache
        self.__dict__.update(state)
        self._requests = upgrade(self._requests)  # plain dicts in a snapshot from before they copied themselves
        self._responses = upgrade(self._responses)

    def check(self, event: Request | Response) -> None:
        """Reject (EventError) what the join could not use, before any state changes."""
        fp = event.prompt_fingerprint if isinstance(event, Request) else event.output_fingerprint
        if fp is not None:
            why = self.fingerprinter.check(fp)
            if why is not None:
                raise EventError("fingerprint_params", why)

    def observe_request(
        self,
        req: Request,
        tp: TextFingerprint | None = None,
        keys: list[int] | None = None,
        plants: Sequence[Plant] = (),
    ) -> list[Exchange]:
        """Join a request half that ingest has taken the text and markers of (`Ingest`): `tp` its prompt's prints,
        `keys` its hex words' token keys, `plants` its markers. A given fingerprint is decoded here."""
        prompt_hits: Sequence[CanaryHit] = _NO_HITS
        stripped = req  # nothing to strip: no copy on the hot path of text-free traffic
        if req.prompt_fingerprint is not None:
            tp = self.fingerprinter.from_wire(req.prompt_fingerprint)
            stripped = req.model_copy(update={"prompt_fingerprint": None})
        if keys and self.canaries.state_size():
            # Markers the receiver sends itself (its history re-sending an answer that carried one): an output
            # repeating them is its own context, not a new leak (the first one was judged when it happened).
            prompt_hits = self.canaries.scan_keys(keys)
        if plants:  # after the scan: a probe's own marker in its prompt is not its own context
            for p in plants:
                self.plant(p)
        rid = req.request_id
        ts = req.ts
        resp = self._responses.pop(rid, None)
        if resp is not None:
            rts = resp.event.ts
            return [_exchange(stripped, tp, resp, rts if rts > ts else ts, prompt_hits)]
        requests = self._requests
        if rid in requests:
            return []  # a second request with the same id: keep the first (event ids differ, ids clash)
        half: _Half = _new(_Half)
        half.event = stripped
        half.deadline = ts + self._request_wait_s
        half.text_print = tp
        half.canary_hits = prompt_hits  # of a request: the markers its own prompt holds
        requests[rid] = half
        if len(requests) + len(self._responses) > self._max_pending:
            return self._enforce_bound()
        return []

    def observe_response(
        self, resp: Response, tp: TextFingerprint | None = None, keys: list[int] | None = None
    ) -> list[Exchange]:
        """Join a response half that ingest has taken the text of (`Ingest`): `tp` its output's prints, `keys` its
        hex words' token keys. A given fingerprint is decoded here."""
        hits: Sequence[CanaryHit] = _NO_HITS
        stripped = resp
        ts = resp.ts
        if resp.output_fingerprint is not None:
            tp = self.fingerprinter.from_wire(resp.output_fingerprint)
            stripped = resp.model_copy(update={"output_fingerprint": None})
        if keys and self.canaries.state_size():
            hits = self.canaries.scan_keys(keys)
        rid = resp.request_id
        req = self._requests.pop(rid, None)
        if req is not None:
            # The pair completes now: build it straight from the parts, no _Half for the response.
            qev = req.event
            assert isinstance(qev, Request)
            qts = qev.ts
            left = unexplained(hits, req.canary_hits)
            return [Exchange(ts if ts > qts else qts, qev, stripped, req.text_print, tp, left)]
        responses = self._responses
        if rid in responses:
            return []
        responses[rid] = _Half(stripped, ts + self._response_wait_s, tp, hits)
        if len(self._requests) + len(responses) > self._max_pending:
            return self._enforce_bound()
        return []

    def _orphan(self, half: _Half, ts: float) -> Exchange:
        if isinstance(half.event, Request):
            self.orphans["no_response"] += 1
            return Exchange(
                ts=ts, request=half.event, response=None, prompt_print=half.text_print, orphan="no_response"
            )
        self.orphans["no_request"] += 1
        return Exchange(
            ts=ts,
            request=None,
            response=half.event,
            output_print=half.text_print,
            canary_hits=list(half.canary_hits),
            orphan="no_request",
        )

    def advance(self, ts: float) -> list[Exchange]:
        """Give up on halves whose wait has passed at event time `ts`; they come out as orphans."""
        out: list[Exchange] = []
        for pending in (self._responses, self._requests):
            # Insertion order is close to event-time order; a late straggler waits a little longer.
            while pending:
                rid, half = next(iter(pending.items()))
                if half.deadline > ts:
                    break
                del pending[rid]
                out.append(self._orphan(half, half.deadline))
        out.sort(key=lambda e: (e.ts, e.request_id))
        return out

    def flush(self) -> list[Exchange]:
        """End of input: every waiting half becomes an orphan."""
        return self.advance(float("inf"))

    def _enforce_bound(self) -> list[Exchange]:
        out = []
        while len(self._requests) + len(self._responses) > self._max_pending:
            pending = self._requests if len(self._requests) >= len(self._responses) else self._responses
            _, half = pending.popitem(last=False)
            out.append(self._orphan(half, half.event.ts))
        return out

    def take_request(self, request_id: str) -> tuple[Request, TextFingerprint | None] | None:
        """The waiting request half of `request_id`, taken out (its text already replaced by its fingerprints):
        the direct topology re-routes it with its response when both came to another domain's partition."""
        half = self._requests.pop(request_id, None)
        if half is None:
            return None
        assert isinstance(half.event, Request)
        return half.event, half.text_print

    def waiting(self) -> tuple[Waiting, Waiting]:
        """The halves waiting for their other half, (requests, responses): pieces a checkpoint copies whole or as
        their changes (detectors/waiting.py). Copy them; never change them."""
        return self._requests, self._responses

    def plant(self, p: Plant) -> bool:
        """A marker known by its keyed hashes (what ingest made of it), as `CanaryRegistry.register_keyed`."""
        return self.canaries.register_keyed(p.token_key, p.marker_id, p.tenant_id, p.session_id, p.ts)

    def marker_hits(
        self, keys: list[int], prompt_keys: list[int] | None, until: float, prompt_until: float
    ) -> list[CanaryHit]:
        """This Joiner's canary step on token keys taken where the text was (the staged ingest keeps no text): the
        output's markers, less those its own prompt re-sent (`unexplained`), each scanned as of its text's event
        time (a scan that waited for the watermark may know markers planted after the text)."""
        hits = self.canaries.scan_keys(keys, until)
        if hits and prompt_keys:
            hits = unexplained(hits, self.canaries.scan_keys(prompt_keys, prompt_until))
        return hits

    def state_size(self) -> int:
        return len(self._requests) + len(self._responses)


def _exchange(
    req: Request, prompt: TextFingerprint | None, resp: _Half, ts: float, prompt_hits: Sequence[CanaryHit]
) -> Exchange:
    assert isinstance(resp.event, Response)
    return Exchange(ts, req, resp.event, prompt, resp.text_print, unexplained(resp.canary_hits, prompt_hits))


def unexplained(hits: Sequence[CanaryHit], prompt_hits: Sequence[CanaryHit]) -> list[CanaryHit]:
    """The output's marker hits less those its own prompt holds (the receiver re-sending an answer that carried a
    marker: its own context, judged when it first leaked): a new list, the exchange's own (a half's hits are the
    shared `_NO_HITS` or a list a snapshot holds). The one step for every runner: the Joiner here, and the staged
    join stage, which scans the keys its ingest took of both texts once the watermark passed the exchange."""
    if not hits or not prompt_hits:
        return list(hits)
    own = {h.marker_id for h in prompt_hits}
    return [h for h in hits if h.marker_id not in own]
