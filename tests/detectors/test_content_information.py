"""Evidence weighed by information (issue 10 false alarms, docs/adr/0004 "information"): a run of matches counts as a
page only if runs that long are not expected by chance at the rate the source's text meets the rest of the output.
Kana-heavy text shares many short k-grams with any text in the same language; words, Han characters, and a page of
another script do not. The guarantees: a source that shares nothing else with the output keeps the 16-unit page;
one that does needs `required_run` matches, i.e. a page of required_run * w + k - 1 units, and gets high with it."""

from __future__ import annotations

from factories import request, response
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.index import ContentIndex, Overlap
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from detectors.signals.overlap import OverlapDetector
from detectors.signals.pages import required_run
from schemas.alert import SEVERITY_RANK, Alert
from schemas.exchange import Exchange, TextFingerprint
from tests.support.live import observe_now

PAGE = list(range(1, 101))  # the source's private text: fingerprints 1..100 in order
VOCAB = list(range(600, 800))  # short k-grams of a language both the source and the receiver write
STOCK = [900, 901, 902, 903]  # boilerplate: common in the window (three tenants)
NOVEL = iter(range(10_000, 10**9))  # the output's own text: nobody holds these


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "information-tests"}
    return DetectionSettings.model_validate(base | kw)


def _index() -> ContentIndex:
    idx = ContentIndex(900.0, 10_000, 1_000_000, 3)
    for i, t in enumerate(("c1", "c2", "c3")):
        idx.add(t, None, f"c{i}", float(i), STOCK)
    return idx


def test_chance_counts_what_the_source_holds_outside_its_runs() -> None:
    idx = _index()
    idx.add("src", None, "s1", 10.0, [*VOCAB, *PAGE, *STOCK])  # writes the language, and the private page
    idx.add("rx", "rx-s", "r0", 11.0, VOCAB)  # the receiver writes the same language
    idx.add("other", None, "o1", 12.0, list(range(5000, 5100)))  # an unrelated source with a page of its own
    novel = [next(NOVEL) for _ in range(20)]
    out = [*VOCAB[:10], *novel[:10], *STOCK, *PAGE[40:45], *novel[10:], 5050, 5051, 5052]
    ov = idx.query("rx", "rx-s", out, set(), long_run=3)
    assert (ov.free_run["src"], ov.free_run["other"]) == (5, 3)
    # Outside src's run: 10 vocabulary k-grams it holds (the receiver too), 20 novel, 3 of "other"; the stock phrase
    # is everybody's and not counted.
    assert ov.chance["src"] == (10, 33)
    assert ov.chance["other"] == (0, 35)


@settings(max_examples=200, deadline=None)
@given(st.integers(0, 400), st.integers(0, 400), st.sampled_from([0.01, 0.05, 0.1, 1.0]))
def test_required_run_is_the_shortest_run_not_expected_by_chance(held: int, extra: int, alpha: float) -> None:
    s = _settings(overlap_chance_alpha=alpha)
    n = held + extra
    need = required_run(s, Overlap(chance={"src": (held, n)}), "src")
    assert s.overlap_high_run <= need <= s.overlap_chance_max_run
    if held == 0:
        assert need == s.overlap_high_run  # nothing else shared: the one-page guarantee is untouched
        return
    p = held / (n + 1)
    assert need == s.overlap_chance_max_run or n * p**need <= alpha
    if need > s.overlap_high_run:
        assert n * p ** (need - 1) > alpha  # the shortest such run
    more = required_run(s, Overlap(chance={"src": (held + 1, n + 1)}), "src")
    assert more >= need  # more chance sharing never lowers the bar
    off = required_run(_settings(overlap_chance_alpha=0), Overlap(chance={"src": (held, n)}), "src")
    assert off == s.overlap_high_run


def _exchange(rid: str, tenant: str, ts: float, prompt: list[int], out: list[int]) -> Exchange:
    return Exchange(
        ts=ts,
        request=request(rid, tenant, ts),
        response=response(rid, tenant, ts + 1),
        prompt_print=TextFingerprint(hashes=prompt, words=len(prompt) + 4),
        output_print=TextFingerprint(hashes=out, words=len(out) + 4),
    )


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 60), st.integers(20, 120), st.integers(3, 9))
def test_a_page_alerts_high_exactly_when_its_run_is_not_expected_by_chance(shared: int, own: int, run: int) -> None:
    """The receiver's answer holds `shared` k-grams of a language the source writes too (the receiver wrote them
    before: its own context), `own` novel ones, and a private page of the source giving `run` consecutive matches with
    novel seams. High (or critical) if and only if run >= required_run; required_run is overlap_high_run when nothing
    else is shared, and may exceed the strong run where much is."""
    s = _settings()
    det = OverlapDetector(s)
    det.index.add("src", "src-s", "s1", 1.0, [*VOCAB, *PAGE])
    det.index.add("rx", "rx-s1", "r0", 2.0, VOCAB)  # the same session: its own context
    novel = [next(NOVEL) for _ in range(own)]
    half = own // 2
    out = [*VOCAB[:shared], *novel[:half], *PAGE[30 : 30 + run], *novel[half:]]
    ex = _exchange("rx1", "rx", 10.0, [], out)
    signals = det.observe(ex)
    assert len(signals) == 1
    sig = signals[0]
    need = sig.figures["required_run"]
    assert sig.source_tenant_id == "src"
    if shared == 0:
        assert need == s.overlap_high_run
    paged = SEVERITY_RANK[sig.severity] >= SEVERITY_RANK["high"]
    # A strong run is no exception: where chance explains it (need above the strong run), it is no page either.
    assert paged == (run >= need)


# --- end to end: real text, real fingerprints --------------------------------------------------------------
# Japanese of a small, shared vocabulary (katakana loanwords, stock phrases), as tenants of one language write it.
JA = [
    "本日のミーティングではプロジェクトのスケジュールとマーケティングのプランについて説明いたします。",
    "コミュニケーションを大切にしながらチームのメンバーとスケジュールを確認してください。",
    "先ほど申し上げた通り、マーケティングのプランはプロジェクトのメンバー全員で確認いたします。",
    "ご質問ありがとうございます。コミュニケーションのツールについては後ほど説明いたします。",
]
PRIVATE = (
    "Our quarterly reconciliation found that the Lisbon warehouse overstated pallet counts by eleven percent "
    "because the night shift scanned returned crates twice before the auditors arrived on Thursday morning"
)


def _severest(alerts: list[Alert], tenant: str) -> str:
    return max((a.severity for a in alerts if a.tenant_id == tenant), key=SEVERITY_RANK.__getitem__, default="none")


@settings(max_examples=30, deadline=None)
@given(
    st.sampled_from(["information-tests", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]),
    st.integers(0, len(PRIVATE.split()) - 16),
    st.integers(0, len(JA)),
)
def test_a_page_of_another_script_in_a_japanese_answer_keeps_the_sixteen_unit_guarantee(
    key: str, start: int, cut: int
) -> None:
    """Japanese tenants hold much of the receiver's Japanese answer; a page of 16 English words of a tenant writing
    English shares none of it, so it still alerts high naming that tenant."""
    m = Monitor(_settings(fingerprint_key=key))
    alerts: list[Alert] = []
    for i, t in enumerate(("ja1", "ja2")):
        alerts += observe_now(m, request(f"j{i}", t, 10 + i, text="".join(JA[i:] + JA[:i])))
        alerts += observe_now(m, response(f"j{i}", t, 20 + i, text="承知しました。"))
    alerts += observe_now(m, request("s", "src", 100, text=f"Summarise this note: {PRIVATE}"))
    alerts += observe_now(m, response("s", "src", 101, text="Done."))
    page = " ".join(PRIVATE.split()[start : start + 16])
    answer = "".join(JA[:cut]) + f" {page} " + "".join(JA[cut:])
    # The receiver's answer re-states its own Japanese material, which the Japanese tenants hold as well.
    alerts += observe_now(m, request("r", "rx", 200, text="会議の内容を教えてください。" + "".join(reversed(JA))))
    got = observe_now(m, response("r", "rx", 201, text=answer))
    assert _severest(got, "rx") in ("high", "critical")
    assert {a.source_tenant_id for a in got if a.tenant_id == "rx"} == {"src"}


def test_a_run_chance_explains_is_no_page_however_long() -> None:
    """Two tenants writing one kana-rich language: half of the output's other fingerprints are in the source's text
    anyway. A run of 9 is then expected by chance in an output of 180 (180 * 0.5^9 = 0.35), strong run or not; the run
    needed is the shortest chance does not explain (12), capped at `overlap_chance_max_run`."""
    s = _settings()
    ov = Overlap(chance={"src": (90, 180)})
    assert required_run(s, ov, "src") == 12 > s.overlap_strong_matches
    assert required_run(_settings(overlap_chance_max_run=10), ov, "src") == 10
    # A source that shares nothing else with the output keeps the one-page guarantee.
    assert required_run(s, Overlap(chance={"src": (0, 180)}), "src") == s.overlap_high_run
