"""The keyed words a producer attaches at the edge (detectors/edge_words.py) are the ones ingest reads from text."""

from __future__ import annotations

from detectors.edge_words import EdgeWords
from detectors.fingerprint import Fingerprinter
from detectors.identifiers import Identifiers
from detectors.toolcalls import ToolNames

PROMPT = 'tools: [{"name": "lookup_order"}] my order 38713357, call +1-989-449-4163'
OUTPUT = '{"tool_calls": [{"function": {"name": "lookup_order", "arguments": "{\\"id\\": 38713357}"}}]}'


def test_an_edge_print_carries_what_the_monitor_would_read_from_the_text() -> None:
    fp = Fingerprinter("edge-key", 5, 4)
    words = EdgeWords(fp)
    for text, prompt in ((PROMPT, True), (OUTPUT, False)):
        edge = fp.from_wire(words.attach(fp.fingerprint(text), text, prompt))
        assert edge.tools == ToolNames.of(fp).names(text, prompt) and edge.tools
        assert edge.ids == Identifiers.of(fp)(text)
    assert fp.from_wire(words.attach(fp.fingerprint(PROMPT), PROMPT, True)).ids is not None


def test_each_kind_is_keyed_apart_and_can_be_left_out() -> None:
    fp = Fingerprinter("edge-key", 5, 4)
    # One word, two kinds: different keys, so a name can never match a number.
    assert ToolNames.of(fp).keyed("38713357") != Identifiers.of(fp).keyed("38713357")
    assert Identifiers.of(fp).keyed("38713357") != Identifiers.of(Fingerprinter("other", 5, 4)).keyed("38713357")
    plain = fp.fingerprint(PROMPT)
    off = EdgeWords(fp, tools=False, identifiers=False).attach(plain, PROMPT, True)
    assert off == plain and off.tools is None and off.identifiers is None
    only_ids = EdgeWords(fp, tools=False).attach(plain, PROMPT, True)
    assert only_ids.tools is None and only_ids.identifiers
