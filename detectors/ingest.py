"""The pipeline's first stage, declared once: an event's text -> its prints and canary keys, and the text dropped.

    ingest  (here)              text -> prints (fingerprints) + token keys of its hex words; markers -> plants
    join    (detectors/front.py) admission, pairing, canaries
    judge   (detectors/back.py)  routing, domain signals, verdict, time, resolve, expire

Every runner takes an event's text through `Ingest` and nowhere else: the embedded Monitor and the direct Kafka
stage chain it before the join in one process (`Front.join`); the staged topology runs it on its ingest workers
(streams/kafka/ingest.py) and sends what comes out, text-free, to the join partitions. So the two cannot disagree on
which words were fingerprinted, which were scanned for markers, or which fingerprint wins when a sender gives both.

Ingest holds no detection state: its fingerprinter and canary keys are fixed by the settings' key, and the session
cache it may use gives exactly the prints a full pass gives (detectors/session_prints.py).
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.canaries import CanaryRegistry
from detectors.fingerprint import Fingerprinter
from detectors.identifiers import Identifiers
from detectors.session_prints import SessionPrints
from detectors.toolcalls import ToolNames
from schemas.events import Canary, Event, Request, Response
from schemas.exchange import TextFingerprint


@dataclass(slots=True, frozen=True)
class Plant:
    """A canary marker planted at event time `ts`, known by its keyed hashes only."""

    event_id: str  # the canary event's id, or the request's whose markers these are
    ts: float
    token_key: int  # keyed hash of the marker's random part: what outputs are scanned for
    marker_id: str  # keyed id of the whole marker: what alerts carry
    tenant_id: str
    session_id: str | None


@dataclass(slots=True)
class Printed:
    """What ingest makes of one event: the event without its text (and without its markers), the prints of the text
    it dropped, the token keys of that text's hex words, and the markers it plants."""

    event: Event
    # Of the dropped text; None without text, or when the sender gave a fingerprint too (the given one wins, and
    # the join decodes it: `Fingerprinter.from_wire`).
    prints: TextFingerprint | None = None
    # The text's hex words as keyed hashes, in text order (`CanaryRegistry.token_keys`), or None when not scanned.
    # A response's text is scanned only when its prints come from it; a request's whenever it has text (the markers
    # a receiver re-sends are its own context: `join.unexplained`).
    keys: list[int] | None = None
    plants: list[Plant] = field(default_factory=list)


class Ingest:
    """Text to prints and keys. `scan_always`: scan every text for hex words (the staged ingest, which cannot know
    whether a marker is planted yet); otherwise only while `keys` holds a marker (in one process the registry is the
    join's, so an empty one means no text can hold a marker, and the scan is skipped)."""

    __slots__ = ("fingerprinter", "ids", "keys", "scan_always", "sessions", "tools")

    def __init__(
        self,
        fingerprinter: Fingerprinter,
        keys: CanaryRegistry,
        sessions: SessionPrints | None = None,
        *,
        scan_always: bool = False,
        tools: bool = True,
        identifiers: bool = True,
    ) -> None:
        self.fingerprinter = fingerprinter
        self.keys = keys
        self.sessions = sessions
        self.scan_always = scan_always
        # The names a prompt holds and the functions an output calls, keyed (detectors/toolcalls.py, ADR 0019).
        self.tools = ToolNames.of(fingerprinter) if tools else None
        # The identifiers a text holds, keyed (detectors/identifiers.py, ADR 0027).
        self.ids = Identifiers.of(fingerprinter) if identifiers else None

    def __call__(self, event: Event) -> Printed:
        if isinstance(event, Response):
            return self._response(event)
        if isinstance(event, Request):
            return self._request(event)
        if isinstance(event, Canary):
            return Printed(event, plants=self._plants(event, [event.marker]))
        return Printed(event)

    def _scan(self) -> bool:
        return self.scan_always or bool(self.keys.state_size())

    def _request(self, req: Request) -> Printed:
        text = req.prompt_text
        if text is None and not req.canaries:
            return Printed(req)
        tp: TextFingerprint | None = None
        keys: list[int] | None = None
        if text is not None:
            if self._scan():
                keys = self.keys.token_keys(text)
            if req.prompt_fingerprint is None:
                sessions = self.sessions
                if sessions is not None and req.session_id is not None:
                    tp = sessions.fingerprint_text(f"{req.tenant_id}\0{req.session_id}", text)
                else:
                    tp = self.fingerprinter.fingerprint_text(text, ends=False)  # a source: sentence hashes suffice
                if self.tools is not None:
                    tp.tools = self.tools.declared(text)
                if self.ids is not None:
                    tp.ids = self.ids(text)
        plants = self._plants(req, req.canaries) if req.canaries else []
        stripped = req.model_copy(update={"prompt_text": None, "canaries": []})
        return Printed(stripped, tp, keys, plants)

    def _response(self, resp: Response) -> Printed:
        text = resp.output_text
        if text is None:
            return Printed(resp)
        if resp.output_fingerprint is not None:  # a given fingerprint wins; only text printed here is scanned
            return Printed(resp.model_copy(update={"output_text": None}))
        # fingerprint_text works on the folded bytes without building the word list (2x faster than fingerprinting
        # words_of); the marker scan cuts words only from a text that can hold a marker.
        tp = self.fingerprinter.fingerprint_text(text)
        if self.tools is not None:
            tp.tools = self.tools.calls(text)
        if self.ids is not None:
            tp.ids = self.ids(text)
        keys = self.keys.token_keys(text) if self._scan() else None
        return Printed(resp.model_copy(update={"output_text": None}), tp, keys)

    def _plants(self, event: Canary | Request, markers: list[str]) -> list[Plant]:
        out = []
        for marker in markers:
            keyed = self.keys.keyed(marker)
            if keyed is not None:
                out.append(Plant(event.event_id, event.ts, *keyed, event.tenant_id, event.session_id))
        return out
