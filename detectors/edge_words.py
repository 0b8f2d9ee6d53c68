"""What a producer that keeps text at the edge sends with each print besides its fingerprints: the names a tool check
reads (detectors/toolcalls.py, ADR 0019) and the identifiers the mix-up ledgers read (detectors/identifiers.py, ADR
0027), keyed as the monitor keys them. The gateway producer, the OTLP bridge and LiteLLM's file output attach them
through this one call, so a new kind of word is added in one place."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from detectors.identifiers import Identifiers
from detectors.toolcalls import ToolNames

if TYPE_CHECKING:
    from detectors.fingerprint import Fingerprinter
    from schemas.events import Fingerprint


class EdgeWords:
    """The keyed words of a text, attached to its wire print (`attach`)."""

    __slots__ = ("ids", "tools")

    def __init__(self, fingerprinter: Fingerprinter, tools: bool = True, identifiers: bool = True) -> None:
        self.tools = ToolNames.of(fingerprinter) if tools else None
        self.ids = Identifiers.of(fingerprinter) if identifiers else None

    def attach(self, fp: Fingerprint, text: str, prompt: bool) -> Fingerprint:
        """`fp` (made at the edge from `text`, a prompt or an output) with the text's tool names and identifiers;
        a kind the text holds too many of to know is left out (the monitor then treats it as unknown)."""
        update: dict[str, Any] = {}
        if self.tools is not None and (names := self.tools.names(text, prompt)) is not None:
            update["tools"] = sorted(names)
        if self.ids is not None and (ids := self.ids(text)) is not None:
            update["identifiers"] = sorted(ids)
        return fp.model_copy(update=update) if update else fp
