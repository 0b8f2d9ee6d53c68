"""A run's evidence in the units it covers (issue 10 false alarms, docs/adr/0004 "coverage").

Winnowing turns a shared passage into a run of consecutive matched fingerprints, but a run of 3 matches can be three
overlapping k-grams of one 7-unit passage (one katakana word, an 8-word stock phrase of code comments) as well as a
16-unit page. Where the monitor fingerprints the text itself it knows each fingerprint's position, hence the units a
run covers. The guarantees: every page of need * w + k - 1 units covers at least need * w + k - 1 - 2 (w - 1) units
(10 at the defaults) and keeps its high alert; a shared passage shorter than that never makes one alone."""

from __future__ import annotations

from factories import request, response
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.fingerprint import Fingerprinter, positions_of
from detectors.index import Overlap
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from detectors.signals.pages import min_cover, page_run
from detectors.winnowing import kgram_hashes
from schemas.alert import SEVERITY_RANK, Alert
from schemas.exchange import TextFingerprint
from tests.support.live import observe_now
from tests.support.stockphrases import passage_words

KEY = "coverage-tests"


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": KEY}
    return DetectionSettings.model_validate(base | kw)


@settings(max_examples=150, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c", "the", "f", "ジャ", "ム", "中文", "x1", "ok"]), max_size=80),
    st.sampled_from([(5, 4), (3, 2), (8, 3), (2, 1)]),
)
def test_positions_are_each_fingerprints_selection_and_equal_on_both_paths(
    words: list[str], kw: tuple[int, int]
) -> None:
    """The k-gram at each reported position is the fingerprint, chosen as a window minimum (the rightmost one in the
    first window that selects it); the native and the pure path report the same positions."""
    k, w = kw
    text = " ".join(words)
    native, pure = Fingerprinter(KEY, k, w), Fingerprinter(KEY, k, w, native=False)
    a, b = native.fingerprint_text(text), pure.fingerprint_text(text)
    assert a == b and positions_of(a) == positions_of(b)
    pos = positions_of(a)
    assert pos is not None and len(pos) == len(a.hashes)
    kg = kgram_hashes(pure.text_hashes(text), k).tolist()
    for h, p in zip(a.hashes, pos, strict=True):
        assert kg[p] == h
        # some window of w k-grams around p (clipped to the text) has h as its minimum
        assert any(min(kg[s : s + w]) == h for s in range(max(0, p - w + 1), p + 1) if kg[s : s + w])


def test_fingerprints_without_positions_keep_the_count_rule() -> None:
    """Fingerprints from the wire (or a session print) carry no positions: a run is judged by its matches alone."""
    tp = TextFingerprint(hashes=[1, 2, 3], words=7)
    assert positions_of(tp) is None
    s = _settings()
    ov = Overlap(free_runs={"src": [(3, 0)]})
    assert page_run(s, ov, "src", 3) == (3, 0)
    assert page_run(s, Overlap(free_runs={"src": [(3, 3)]}), "src", 3) == (0, 0)  # 3 k-grams, 7 units: no page
    assert page_run(s, Overlap(free_runs={"src": [(3, 6), (4, 9)]}), "src", 3) == (4, 13)


def _severest(alerts: list[Alert], tenant: str) -> str:
    return max((a.severity for a in alerts if a.tenant_id == tenant), key=SEVERITY_RANK.__getitem__, default="none")


def _shared_passage(seed: int, length: int, coverage: bool = True) -> tuple[str, set[str | None]]:
    """A receiver's answer holding `length` consecutive words of a source's recent prompt between its own words:
    the severest alert for the receiver, and the sources its alerts name."""
    src_text, answer = passage_words(seed, length)
    m = Monitor(_settings(overlap_coverage=coverage))
    observe_now(m, request("s", "src", 10, text=" ".join(src_text)))
    observe_now(m, response("s", "src", 11, text="noted"))
    observe_now(m, request("r", "rx", 20, text="tell me something"))
    got = observe_now(m, response("r", "rx", 21, text=" ".join(answer)))
    return _severest(got, "rx"), {a.source_tenant_id for a in got if a.tenant_id == "rx"}


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 10**6), st.integers(16, 40))
def test_every_page_of_sixteen_units_still_alerts_high(seed: int, length: int) -> None:
    assert _shared_passage(seed, length) in (("high", {"src"}), ("critical", {"src"}))


@settings(max_examples=80, deadline=None)
@given(st.integers(0, 10**6), st.integers(1, 9))
def test_a_shared_passage_shorter_than_any_page_covers_never_alerts_high(seed: int, length: int) -> None:
    s = _settings()
    assert min_cover(s, s.overlap_high_run) == 10  # 16 - 2 * (4 - 1)
    assert _shared_passage(seed, length)[0] not in ("high", "critical")


def test_without_coverage_such_passages_did_alert() -> None:
    """The rule is what silences them: with it off, short shared passages that winnowing turned into a run of 3
    alert high (the false alarms of docs/adr/0004, "coverage")."""
    loud = [seed for seed in range(300) if _shared_passage(seed, 8, coverage=False)[0] in ("high", "critical")]
    assert loud, "no 8-word passage made a run of 3: the test cannot show the rule"
    assert all(_shared_passage(seed, 8)[0] not in ("high", "critical") for seed in loud)
