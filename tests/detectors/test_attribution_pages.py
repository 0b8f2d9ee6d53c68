"""Pages that stay one passage, origins that stay attributable (issue 10, attribution targets).

- A source's run goes on over fingerprints explained as common that the source's text holds too (`bridge`).
- The receiver's own other session, sharing scattered vocabulary with the output, does not hide another tenant's
  page (`Overlap.prefers_tenant`).
- A flagged output is still learned as the receiver's text outside the leaked pages (`Overlap.foreign_free`), so a
  later page of the receiver's own answer, leaked elsewhere, names the receiver; the leaked part never does.
"""

from __future__ import annotations

import random

import pytest
from factories import request, response

from detectors.index import ContentIndex, unit_tokens
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

KEYS = [f"attribution-pages-key-{i}" for i in range(6)]
HIGH = SEVERITY_RANK["high"]


def _index() -> ContentIndex:
    return ContentIndex(window_s=900, max_docs=1_000, max_fingerprints=100_000, common_min_tenants=3)


# --- runs bridge over common fingerprints the source holds -------------------------------------------------
def test_a_page_with_common_kgrams_in_it_stays_one_passage() -> None:
    idx = _index()
    idx.add("A", "sa", "ra", 0, list(range(1, 31)))
    for t in ("B", "C", "D"):  # 5 and 9 are stock phrases: three tenants had them in the window
        idx.add(t, f"s{t}", f"r{t}", 1, [5, 9, 1_000 + ord(t)])
    out = [500, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 501]
    ov = idx.query("V", "sv", out, set(), bridge=3)
    assert (ov.passages["A"], ov.long_passages["A"], ov.run_by_tenant["A"]) == (1, 1, 9)
    assert ov.common == 2 and ov.evidence["A"] == 9  # bridged fingerprints are no evidence
    # Control: without bridging the page falls apart into three runs, which look like scattered vocabulary.
    ov0 = idx.query("V", "sv", out, set(), bridge=0)
    assert (ov0.passages["A"], ov0.run_by_tenant["A"]) == (3, 4)
    # The passage spans 11 fingerprints, bridged ones included: 11 gaps of (w + 1) / 2 units and one k - 1 edge.
    assert ov.leaked_tokens("A") == pytest.approx(11 * 2.5 + 4)


def test_only_common_kgrams_the_source_holds_are_bridged_and_only_a_few_in_a_row() -> None:
    idx = _index()
    idx.add("A", "sa", "ra", 0, list(range(1, 31)))
    # 777 is explained as common over the long horizon, but A's text never had it: a seam, not A's text.
    out = [1, 2, 3, 777, 4, 5, 6]
    ov = idx.query("V", "sv", out, set(), explained=[0, 0, 0, 3, 0, 0, 0], bridge=3)
    assert (ov.passages["A"], ov.run_by_tenant["A"]) == (2, 3)
    # Held by A and explained (public corpus), but four in a row: wider than `bridge`.
    out = [1, 2, 3, 10, 11, 12, 13, 4, 5, 6]
    ov = idx.query("V", "sv", out, set(), explained=[0, 0, 0, 2, 2, 2, 2, 0, 0, 0], bridge=3)
    assert (ov.passages["A"], ov.run_by_tenant["A"]) == (2, 3)
    ov = idx.query("V", "sv", out, set(), explained=[0, 0, 0, 2, 2, 2, 2, 0, 0, 0], bridge=4)
    assert (ov.passages["A"], ov.run_by_tenant["A"]) == (1, 6)
    # A k-gram of the receiver's own prompt that A's text does not hold is a seam: the page ends there.
    ov = idx.query("V", "sv", [1, 2, 3, 999, 5, 6], {999}, bridge=3)
    assert ov.passages["A"] == 2
    # One that A's text holds too is shared by two holders, as if both had it in the window: bridged, no evidence
    # (short k-grams of a language both write; the page goes on through them).
    ov = idx.query("V", "sv", [1, 2, 3, 4, 5, 6], {4}, bridge=3)
    assert (ov.passages["A"], ov.run_by_tenant["A"], ov.own_prompt) == (1, 5, 1)
    # Likewise one the receiver had over the long horizon (explained 1), if A holds it.
    ov = idx.query("V", "sv", [1, 2, 3, 4, 5, 6], set(), explained=[0, 0, 0, 1, 0, 0], bridge=3)
    assert (ov.passages["A"], ov.run_by_tenant["A"], ov.own_history) == (1, 5, 1)
    ov = idx.query("V", "sv", [1, 2, 3, 999, 5, 6], set(), explained=[0, 0, 0, 1, 0, 0], bridge=3)
    assert ov.passages["A"] == 2


# --- unit classes ---------------------------------------------------------------------------------------
def test_units_weigh_by_class_not_by_each_texts_own_ratio() -> None:
    # Character units (Han, Kana...) ~1 token; word units at the word ratio, whatever each text's own noisy count.
    assert unit_tokens(0.7) == unit_tokens(1.0) == 1.0
    assert unit_tokens(1.3) == unit_tokens(1.9) == unit_tokens(3.0) == 1.3
    idx = _index()
    idx.add("Z", "sz", "z0", 0, list(range(1, 41)), tokens_per_unit=1.0)  # a Chinese text: 40 matched units
    idx.add("E", "se", "e0", 0, list(range(100, 134)), tokens_per_unit=1.4)  # an English one: 34
    ov = idx.query("V", "sv", [*range(1, 41), 999, *range(100, 134)], set())
    assert ov.ranked_tenants()[0] == "E"  # 34 words are more tokens than 40 characters
    # Two texts of one class: their own ratios (1.4 against 2.2) do not decide, the passages' lengths do.
    idx.add("C", "sc", "c0", 0, list(range(200, 241)), tokens_per_unit=1.4)
    idx.add("D", "sd", "d0", 0, list(range(300, 334)), tokens_per_unit=2.2)
    ov = idx.query("V", "sv", [*range(200, 241), 999, *range(300, 334)], set())
    assert ov.ranked_tenants()[0] == "C"


# --- the receiver's other session does not hide another tenant's page ---------------------------------------
def test_scattered_own_session_vocabulary_does_not_hide_a_page_of_another_tenant() -> None:
    idx = _index()
    idx.add("V", "s0", "v0", 0, list(range(1_000, 1_100)))  # the receiver's other session
    idx.add("A", "sa", "a0", 1, list(range(2_000, 2_100)))
    scattered = [x for i in range(20) for x in (1_000 + 3 * i, 9_000 + i)]  # 20 single matches, never a run of 2
    out = scattered + list(range(2_010, 2_022))  # and a page of A: a run of 12
    ov = idx.query("V", "s1", out, set())
    (sess, n), (tenant, m) = ov.best_session(), ov.best_tenant()  # type: ignore[misc]
    assert (sess, n, tenant, m) == ("s0", 20, "A", 12)  # more session matches than tenant matches...
    assert ov.prefers_tenant("A", "s0")  # ...but only the tenant's are a page
    # A long passage of the receiver's own other session (15 in a row) beside the page does not hide it either: the two
    # explain different parts of the output (ADR 0004 log, 2026-12-05).
    ov = idx.query("V", "s1", list(range(1_020, 1_035)) + list(range(2_010, 2_022)), set())
    assert ov.prefers_tenant("A", "s0")
    # Control: where the receiver's other session holds the same passage, its longer run is the origin.
    both = _index()
    both.add("V", "s0", "v0", 0, [*range(1_020, 1_035), *range(2_010, 2_022)])
    both.add("A", "sa", "a0", 1, list(range(2_000, 2_100)))
    ov = both.query("V", "s1", list(range(1_020, 1_035)) + list(range(2_010, 2_022)), set())
    assert not ov.prefers_tenant("A", "s0")
    # Without a long run on either side the counts decide, as before.
    ov = idx.query("V", "s1", [*scattered, 2_050, 9_999, 2_060], set())
    assert not ov.prefers_tenant("A", "s0")


# --- end to end --------------------------------------------------------------------------------------------
def _words(seed: int, n: int) -> list[str]:
    rng = random.Random(seed)
    return ["".join(rng.choice("bcdfghjklmnpqrstvwxz") + rng.choice("aeiou") for _ in range(3)) for _ in range(n)]


def _t(words: list[str]) -> str:
    return " ".join(words)


def _monitor(key: str) -> Monitor:
    return Monitor(DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key=key))


def _run(m: Monitor, events: list) -> list[Alert]:
    return [a for e in events for a in observe_now(m, e)]


def _exchange(rid: str, tenant: str, ts: float, prompt: str, output: str) -> list:
    return [request(rid, tenant, ts, text=prompt), response(rid, tenant, ts + 1, text=output)]


@pytest.mark.parametrize("key", KEYS)
def test_a_flagged_output_still_holds_the_receivers_own_answer(key: str) -> None:
    a, own_v, own_w, own_x = _words(11, 120), _words(12, 80), _words(13, 60), _words(14, 40)
    m = _monitor(key)
    events = _exchange("a1", "A", 0, _t(a), "Noted.")
    # V's answer holds a page of A between V's own text: flagged, named A.
    events += _exchange("v1", "V", 20, "Summarise my notes.", _t(own_v[:20] + a[50:80] + own_v[20:80]))
    first = _run(m, events)
    assert [(x.source_tenant_id, SEVERITY_RANK[x.severity] >= HIGH) for x in first] == [("A", True)]
    # Later a page of V's own answer (never in any prompt) leaks to W: V is its origin.
    events = _exchange("w1", "W", 40, "Hello.", _t(own_w[:20] + own_v[35:65] + own_w[20:60]))
    (alert,) = _run(m, events)
    assert alert.source_tenant_id == "V" and SEVERITY_RANK[alert.severity] >= HIGH
    # The page V got from A was not learned as V's: A's page leaking again names A alone.
    events = _exchange("x1", "X", 60, "Hi.", _t(own_x[:20] + a[52:78] + own_x[20:40]))
    (alert,) = _run(m, events)
    assert alert.source_tenant_id == "A"
    (signal,) = [s for s in alert.evidence if s.name == "cross_tenant_contamination"]
    assert "V" not in signal.figures["other_sources"]


_KANA = "あいうえおかきくけこさしすせそたちつてとなにぬねのはひふへほまみむめもやゆよらりるれろわをん"
_KANJI = "日本語文章会社東京大阪技術開発研究所報告資料計画予算担当部長課長営業製品品質管理顧客対応"


def _japanese(seed: int, n: int, stock: str, every: int) -> str:
    """`n` characters of kanji and kana (no two tenants share a clause), with a stock phrase every `every`."""
    rng = random.Random(seed)
    out: list[str] = []
    while len(out) < n:
        out += [rng.choice(_KANJI) if rng.random() < 0.4 else rng.choice(_KANA) for _ in range(every)]
        out.append(stock)
    return "".join(out)


@pytest.mark.parametrize("key", KEYS)
def test_a_japanese_fragment_cut_mid_clause_is_attributed(key: str) -> None:
    stock = "よろしくお願いします"  # a stock phrase several tenants wrote in the window: common, no evidence
    m = _monitor(key)
    events: list = []
    for i, t in enumerate(("B", "C", "D")):
        events += _exchange(f"{t}1", t, i, f"{stock}。" + _japanese(20 + i, 60, "。", 12), "はい。")
    source = _japanese(30, 400, stock, 9)
    events += _exchange("j1", "J", 10, "資料をまとめてください。\n" + source, "承知しました。")
    at = source.index(stock, 100) - 7  # a 24-character fragment around the stock phrase, cut mid-clause
    fragment = source[at : at + 24]
    own = _japanese(40, 120, "。", 15)
    events += _exchange("r1", "R", 30, "報告書について教えてください。", own[:50] + fragment + own[50:])
    (alert,) = _run(m, events)
    assert alert.source_tenant_id == "J" and SEVERITY_RANK[alert.severity] >= HIGH


# --- a page's length is not its rarity ------------------------------------------------------------------------
def test_a_longer_page_another_tenant_once_had_still_outweighs_a_shorter_rare_one() -> None:
    """Long-horizon rarity weighs a match as evidence (one other tenant ever had it: 1/2), but the page is as long
    either way: the source that put more of the output stays the origin (docs/adr/0004, "information")."""
    idx = _index()
    idx.add("A", "sa", "ra", 0, list(range(1, 41)))  # A's page: once seen by one other tenant over the horizon
    idx.add("B", "sb", "rb", 1, list(range(101, 141)))  # B's page: never seen elsewhere
    out = [500, *range(1, 13), 501, *range(101, 109), 502]
    rarity = [0.5 if 1 <= h <= 40 else 1.0 for h in out]
    ov = idx.query("V", "sv", out, set(), [0] * len(out), rarity)
    assert (ov.run_by_tenant["A"], ov.run_by_tenant["B"]) == (12, 8)
    assert ov.evidence["A"] == 6 and ov.evidence["B"] == 8  # A is weaker evidence per match ...
    assert ov.leaked_tokens("A") > ov.leaked_tokens("B")  # ... but the longer page
    assert ov.ranked_tenants()[0] == "A"


# --- a source with no evidence of its own is not named (issue 39, the demo under one key in 40) -----------------
def test_a_source_whose_passages_are_all_shared_text_takes_no_naming_place() -> None:
    idx = _index()
    idx.add("A", "sa", "ra", 0, list(range(100, 110)))
    idx.add("B", "sb", "rb", 0, list(range(200, 208)))
    idx.add("C", "sc", "rc", 0, list(range(300, 303)))
    idx.add("Z", "sz", "rz", 0, list(range(400, 406)))
    out = [*range(100, 110), 1, *range(200, 208), 2, *range(400, 406), 3, *range(300, 303)]
    # Z's six fingerprints are text other tenants had too, over the long horizon (weight 0); the others are rare.
    rarity = [0.0 if 400 <= h < 406 else 1.0 for h in out]
    ov = idx.query("V", "sv", out, set(), [0] * len(out), rarity, long_run=3)
    assert ov.ranked_tenants()[:3] == ["A", "B", "Z"]  # Z's run is longer than C's: ranked above it
    assert ov.long_evidence["Z"] == 0.0 and ov.long_evidence["C"] == 3.0
    assert ov.named_sources() == ["A", "B", "C"]  # three places: the one source that proves nothing takes none
    # Only shared text: the ranking is kept, as before (the conclusion needs a source).
    only = idx.query("V", "sv", list(range(400, 406)), set(), [0] * 6, [0.0] * 6, long_run=3)
    assert only.named_sources() == ["Z"]
