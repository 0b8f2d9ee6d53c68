"""Whole sentences of the source (detectors/sentences.py, ADR 0008 decision 8): a content-only match that touches only
output sentences which are whole sentences of the source's text is what a model writing a text it knows produces,
and is a warning; a page cut where a token count fell is still high; a mechanism still makes either critical."""

from __future__ import annotations

import random
import textwrap
from itertools import pairwise

import pytest
from factories import request, response
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter, sentences_of
from detectors.monitor import Monitor
from detectors.sentences import MAX_SENTENCES, Sentences, split_sentences, whole
from detectors.session_prints import SessionPrints
from detectors.settings import DetectionSettings
from detectors.tokens import words_of
from schemas.alert import SEVERITY_RANK, Alert
from schemas.events import Fingerprint
from tests.support.live import observe_now

WORDS = [f"w{i:04d}" for i in range(6000)]
FP = Fingerprinter("whole-sentence-tests", 5, 4)
NATIVE = FP.sentence_prints
PURE = Sentences(None, FP._bytes_hash, FP.word_hashes)  # the reference: the path without the extension


def _settings(**kw: object) -> DetectionSettings:
    base = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "whole-sentence-tests"}
    return DetectionSettings.model_validate(base | kw)


def _sentences(rng: random.Random, n: int, end: str = ".") -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.randint(12, 20))).capitalize() + end for _ in range(n)]


def _receive(m: Monitor, own: list[str], carried: str) -> Alert | None:
    """R asks, and its answer carries `carried` between lines of its own sentences: the cross-tenant alert, if any."""
    out = f"{' '.join(own[:3])}\n{carried}\n{' '.join(own[3:])}"
    observe_now(m, request("r1", "R", 10, text="Tell me something."))
    alerts = [a for a in observe_now(m, response("r1", "R", 11, text=out)) if a.kind == "cross_tenant_contamination"]
    return alerts[0] if alerts else None


def _echo(alert: Alert | None) -> bool:
    """Whether the alert is the whole-sentence echo: a warning that says so."""
    return alert is not None and alert.severity == "warning" and alert.evidence[0].figures["whole_sentences"] is True


def _high(alert: Alert | None) -> bool:
    return alert is not None and SEVERITY_RANK[alert.severity] >= SEVERITY_RANK["high"]


def _leak(seed: int, mode: str, **kw: object) -> Alert | None:
    """Tenant S pastes a text of sentences; R's answer then carries some of it inside its own sentences: `whole` two
    whole sentences, `page` a page cut mid-sentence at both ends, `lines` two whole lines without a full stop,
    `closers` two whole sentences of a text whose sentences end in a stop and a closing bracket or quote; `wrapped`
    two whole sentences on one line of a text S pasted hard-wrapped at 50 columns, `wrapped-page` a page cut
    mid-sentence out of that text."""
    rng = random.Random(seed)
    end = "" if mode == "lines" else "."
    src = _sentences(rng, 8, end)
    if mode == "closers":
        src = [f'"{s}"' if i % 2 else f"({s})" for i, s in enumerate(src)]
    own = _sentences(rng, 6)
    m = Monitor(_settings(**kw))
    pasted = ("\n" if mode == "lines" else " ").join(src)
    observe_now(m, request("s1", "S", 1, text=textwrap.fill(pasted, 50) if mode.startswith("wrapped") else pasted))
    observe_now(m, response("s1", "S", 2, text="Noted."))
    if mode in ("page", "wrapped-page"):
        words = " ".join(src[2:6]).split()
        carried = " ".join(words[5:-5])  # starts and ends inside a sentence
    else:
        carried = ("\n" if mode == "lines" else " ").join(src[3:5])
    return _receive(m, own, carried)


@pytest.mark.parametrize("seed", range(4))
def test_whole_sentences_of_another_tenant_are_a_warning_and_a_cut_page_stays_high(seed: int) -> None:
    assert _echo(_leak(seed, "whole"))
    # Control: the same answer is high without the rule, so the rule is what made it a warning.
    assert _high(_leak(seed, "whole", overlap_whole_sentences=False))
    page = _leak(seed, "page")
    assert _high(page) and page is not None
    assert "whole_sentences" not in page.evidence[0].figures
    # Lines without a full stop (code, a list, a paragraph cut off) are no sentences: a page of them stays high.
    assert _high(_leak(seed, "lines"))
    # Sentences that end in `.)` or `."` are sentences too: the cut comes after the closer.
    closed = _leak(seed, "closers")
    assert closed is not None and closed.severity == "warning"


@pytest.mark.parametrize("seed", range(4))
def test_a_hard_wrapped_text_echoed_on_one_line_is_whole_sentences_and_a_page_of_it_stays_high(seed: int) -> None:
    # A sentence wrapped at another width, or not at all, is the same sentence: its line breaks do not cut it when
    # the next line goes on in lowercase. A page cut out of the wrapped text still starts and ends mid-sentence.
    assert _echo(_leak(seed, "wrapped"))
    assert _high(_leak(seed, "wrapped-page"))


def test_a_line_break_cuts_unless_a_wrapped_sentence_goes_on_in_lowercase() -> None:
    text = "The quick brown fox jumps\nover the lazy dog. A list item\nNext item\n  indented and lowercase.\n\nend"
    assert split_sentences(text) == [
        "The quick brown fox jumps\nover the lazy dog.",
        "A list item",
        "Next item\n  indented and lowercase.",
        "end",
    ]
    for prints in (NATIVE, PURE):
        one_line = prints.source_hashes("The quick brown fox jumps over the lazy dog.")[0]
        assert prints.source_hashes(text)[0][:1] == one_line
        assert prints.source_hashes("The quick brown\nfox jumps over the\n lazy dog.")[0] == one_line


def _quoted_back(seed: int, mode: str) -> Alert | None:
    """Tenant S pastes sentences and its answer quotes them back as models do ("Your text says: ..."), its last
    sentence without the full stop; the answer, the newer text, is what the postings name. R's answer then carries
    `whole`: two of the sentences, the last of them with its stop, or `page`: a page cut mid-sentence out of the
    quote."""
    rng = random.Random(seed)
    src = _sentences(rng, 8)
    m = Monitor(_settings())
    observe_now(m, request("s1", "S", 1, text="Here is a public text, please explain it:\n" + " ".join(src)))
    observe_now(m, response("s1", "S", 2, text="Your text says:\n" + " ".join(src[2:6])[:-1] + "\n\nAnything else?"))
    carried = " ".join(" ".join(src[2:6]).split()[5:-5]) if mode == "page" else " ".join(src[4:6])
    own = _sentences(rng, 6)
    return _receive(m, own, carried)


@pytest.mark.parametrize("seed", range(4))
def test_whole_sentences_are_asked_of_the_prompt_an_answer_quoted(seed: int) -> None:
    """The echo of sentences a source's answer quoted without their last stop is still whole sentences of that
    source's exchange (its prompt holds them whole); a page cut out of the answer stays high."""
    assert _echo(_quoted_back(seed, "whole"))
    assert _high(_quoted_back(seed, "page"))


def test_a_stop_followed_by_ascii_closers_ends_its_sentence_after_them() -> None:
    text = 'He said "Go home." Then he left. (See above.) Next one!'
    assert split_sentences(text) == ['He said "Go home."', "Then he left.", "(See above.)", "Next one!"]
    for prints in (NATIVE, PURE):
        assert prints.source_hashes(text)[0][1:3] == prints.source_hashes("Then he left. See above.")[0]


def test_the_pieces_and_which_are_sentences() -> None:
    text = "Hello there. Version 3.14 is out!Yes\nQuote: «Fin.» 東京です。次は? example.com works"
    assert split_sentences(text) == [
        "Hello there.",
        "Version 3.14 is out!Yes",
        "Quote: «Fin.",
        "» 東京です。",  # a closer cut off before a non-ASCII character: the sentence after it hashes with it
        "次は?",
        "example.com works",
    ]
    for prints in (NATIVE, PURE):
        sp = prints.output_print(text, len(words_of(text)))
        assert sp is not None
        hashes, ends = sp
        assert ends == [2, 8, 10, 14, 16, 19] and [bool(h) for h in hashes] == [True, False, True, True, True, False]
        # A source keeps the sentences proper alone, the same hashes; re-spaced and re-cased it hashes the same.
        assert prints.source_hashes(text)[0] == [h for h in hashes if h]
        assert prints.source_hashes("HELLO   there.")[0] == hashes[:1]


PARTS = ["alpha", "Beta", "東京", "です。", "ｆｕｌｌ", "x.y", "end.", "ok!", "\n", "  ", "“q.”", "\u200b", "?", "。」"]
PARTS += ["»", "3.14", "Ünïcode.", "\t", "\u3000", "!\u200b", "ｱｲｳ", "한국어.", ")", '."', ".\n"]


@settings(max_examples=150, deadline=None)
@given(st.lists(st.tuples(st.sampled_from(PARTS), st.sampled_from(["", " "])), max_size=60))
def test_the_native_pass_is_the_reference_and_its_units_are_the_texts(parts: list[tuple[str, str]]) -> None:
    text = "".join(a + b for a, b in parts)
    words = len(words_of(text))
    sp = NATIVE.output_print(text, words)
    assert sp == PURE.output_print(text, words)
    assert sp is not None
    hashes, ends = sp
    assert ends is not None and len(hashes) == len(ends) and all(a < b for a, b in pairwise(ends))
    assert (ends[-1] if ends else 0) == words
    # Resuming at the last piece gives the same hashes as a pass over the whole text.
    full, resume, before = NATIVE.source_hashes(text)
    assert (full, resume, before) == PURE.source_hashes(text)
    assert full[:before] + NATIVE.source_hashes(text, resume)[0] == full


def test_whole_asks_every_touched_sentence_and_stays_inside_the_print() -> None:
    sp = ([11, 22, 0, 44], [5, 12, 20, 30])
    assert whole(sp, 5, 11, {22})
    assert whole(sp, 0, 11, {11, 22})
    assert not whole(sp, 4, 11, {22})  # touches the first sentence too
    assert not whole(sp, 12, 19, {0, 22})  # a line, not a sentence: never whole
    assert not whole(sp, 25, 31, {44})  # past the print's last sentence
    assert not whole(([11], None), 0, 3, {11})  # a source's print has no positions


def test_a_bomb_of_sentences_is_bounded() -> None:
    text = "a. " * (3 * MAX_SENTENCES)
    for prints in (NATIVE, PURE):
        assert len(prints.source_hashes(text)[0]) == MAX_SENTENCES
        sp = prints.output_print(text, len(words_of(text)))
        assert sp is not None and len(sp[0]) == MAX_SENTENCES


def test_a_session_continues_its_sentences_as_a_full_pass_makes_them() -> None:
    fp = Fingerprinter("whole-sentence-tests", 5, 4)
    sessions = SessionPrints(fp, min_cut=64)
    rng = random.Random(3)
    parts = ["alpha", "beta.", "東京です。", "次は？", "gamma!", "\n", "delta", "x.y"]
    text = ""
    for _ in range(120):
        text += " " + " ".join(rng.choice(parts) for _ in range(rng.randint(1, 25)))
        assert sentences_of(sessions.fingerprint_text("s", text)) == sentences_of(fp.fingerprint_text(text, ends=False))


def test_the_wire_carries_the_print_and_refuses_a_bad_one() -> None:
    fp = Fingerprinter("whole-sentence-tests", 5, 4)
    wire = fp.fingerprint("One sentence here. And another one there! A line")
    assert wire.sentences is not None and wire.sentence_ends == [3, 7, 9] and wire.sentences[2] == 0
    back = fp.from_wire(Fingerprint.model_validate_json(wire.model_dump_json()))
    assert sentences_of(back) == (wire.sentences, wire.sentence_ends)
    base = wire.model_dump()
    for bad in (
        {"sentences": None, "sentence_ends": [3, 6]},  # ends without sentences
        {"sentences": [1, 2], "sentence_ends": [3]},
        {"sentences": [1, 2], "sentence_ends": [3, 3]},
        {"sentences": [1, 2], "sentence_ends": [3, 99]},  # past the text
        {"sentences": [-1, 2], "sentence_ends": [3, 6]},
        {"sentences": [2**64, 2], "sentence_ends": [3, 6]},
    ):
        with pytest.raises(ValueError, match="sentence"):
            Fingerprint.model_validate(base | bad)
