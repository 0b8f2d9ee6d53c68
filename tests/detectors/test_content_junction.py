"""Runs that are no page (issue 10 false alarms, docs/adr/0004 "junctions"): where two innocent texts meet, and
k-grams two texts share by chance in different places; and the one-page guarantee that must survive both rules."""

from __future__ import annotations

from factories import request, response
from hypothesis import given, settings
from hypothesis import strategies as st

from detectors.index import ContentIndex, Overlap
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from tests.support.live import observe_now

# Fingerprints are plain integers here: the index sees nothing else.
SRC_TEXT = list(range(1, 101))  # the source's text: fingerprints 1..100 in order
OWN_TEXT = [500 + i for i in range(50)]  # the receiver's own prompt
NOVEL = [9001, 9002, 9003, 9004, 9005, 9006]  # the output's own text: nobody holds these
STOCK_A, STOCK_B = [700, 701, 702, 703], [800, 801, 802, 803]  # two stock phrases, common in the window
SEAM = [750, 751, 752]  # the k-grams where A meets B: held by the tenants that wrote A and B in a row


def _index() -> ContentIndex:
    idx = ContentIndex(900.0, 10_000, 1_000_000, 3)
    for i, t in enumerate(("c1", "c2", "c3")):  # three tenants make each stock phrase common
        idx.add(t, None, f"c{i}", float(i), STOCK_A + STOCK_B)
    return idx


def _query(idx: ContentIndex, out: list[int], junction: tuple[int, int] = (0, 0), in_order: int = 0) -> Overlap:
    return idx.query("rx", "rx-s", out, set(OWN_TEXT), long_run=3, junction=junction, in_order=in_order)


def test_the_junction_of_two_stock_phrases_is_no_page() -> None:
    idx = _index()
    idx.add("src", None, "s1", 10.0, [4000, 4001, *STOCK_A, *SEAM, *STOCK_B])  # src wrote A then B
    out = NOVEL[:3] + STOCK_A + SEAM + STOCK_B + NOVEL[3:]
    ov = _query(idx, out, junction=(3, 4))
    assert (ov.run_by_tenant["src"], ov.junctions["src"], ov.long_passages["src"], ov.free_run["src"]) == (3, 1, 0, 0)
    # Control: without the rule it is a free passage of three, which makes a high alert alone.
    off = _query(idx, out, junction=(0, 0))
    assert (off.long_passages["src"], off.free_run["src"]) == (1, 3)


def test_a_page_between_innocent_texts_is_still_a_page() -> None:
    """The same neighbours, but a private page of the source that is not where the source's text goes on: its
    seams are novel fingerprints, so the rule does not apply; and a run long enough to be a whole page whose
    source continues into the stock phrases (>= (P + k - 1) // w = 5) is never a junction."""
    idx = _index()
    idx.add("src", None, "s1", 10.0, SRC_TEXT + STOCK_A + STOCK_B)
    page = SRC_TEXT[40:43]
    ov = _query(idx, NOVEL[:2] + STOCK_A + [9100] + page + [9101] + STOCK_B, junction=(3, 4))
    assert (ov.junctions["src"], ov.long_passages["src"], ov.free_run["src"]) == (0, 1, 3)
    idx.add("src", None, "s2", 11.0, STOCK_A + SRC_TEXT[40:45] + STOCK_B)
    ov = _query(idx, NOVEL[:2] + STOCK_A + SRC_TEXT[40:45] + STOCK_B, junction=(3, 4))
    assert (ov.junctions["src"], ov.long_passages["src"], ov.free_run["src"]) == (0, 1, 5)


def test_one_innocent_side_bounds_the_run_at_three() -> None:
    idx = _index()
    idx.add("src", None, "s1", 10.0, SRC_TEXT[:10] + STOCK_B)  # src's text goes on into stock phrase B
    for n, junction in ((3, 1), (4, 0)):  # a page whose source goes on past one seam gives >= P // w = 4
        ov = _query(idx, NOVEL[:2] + SRC_TEXT[10 - n : 10] + STOCK_B, junction=(3, 4))
        assert (ov.run_by_tenant["src"], ov.junctions["src"]) == (n, junction)


def test_own_text_next_to_a_run_counts_only_when_the_source_holds_it_too() -> None:
    idx = _index()
    idx.add("src", None, "s1", 10.0, SRC_TEXT)
    # The receiver's own prompt text on both sides, but the source never had it: a seam the rule cannot explain.
    ov = _query(idx, OWN_TEXT[:3] + SRC_TEXT[20:23] + OWN_TEXT[3:6], junction=(3, 4))
    assert (ov.junctions["src"], ov.free_run["src"]) == (0, 3)


def test_matches_scattered_over_the_source_text_are_no_page() -> None:
    idx = ContentIndex(900.0, 10_000, 1_000_000, 3)
    idx.add("src", None, "s1", 0.0, SRC_TEXT)
    scattered = _query(idx, [*NOVEL[:2], SRC_TEXT[5], SRC_TEXT[50], SRC_TEXT[90], *NOVEL[2:]], in_order=8)
    assert (scattered.out_of_order["src"], scattered.free_run["src"]) == (1, 0)
    page = _query(idx, NOVEL[:2] + SRC_TEXT[50:53] + NOVEL[2:], in_order=8)
    assert (page.out_of_order["src"], page.free_run["src"]) == (0, 3)
    # A fingerprint the source's text held earlier too (stored at its first occurrence) does not break a page,
    # as long as two of its matches agree on where the page sits.
    idx.add("src", None, "s2", 1.0, [300, 301, 302, 303, 310, 300, 311, 312, 313])
    repeated = _query(idx, [*NOVEL[:2], 310, 300, 311, 312, *NOVEL[2:]], in_order=8)
    assert (repeated.out_of_order["src"], repeated.free_run["src"]) == (0, 4)
    # Long runs are never checked: eight consecutive shared k-grams are no chance.
    long = _query(idx, NOVEL[:2] + [SRC_TEXT[i * 9] for i in range(8)] + NOVEL[2:], in_order=8)
    assert (long.out_of_order["src"], long.free_run["src"]) == (0, 8)


# --- end to end: real text, real fingerprints --------------------------------------------------------------
DISCLAIMER = "The above is for reference only; please check the official announcement for the latest details."
CLOSING = "I hope this helps and if you have any other questions feel free to ask me anytime."
PRIVATE = (
    "Our quarterly reconciliation found that the Lisbon warehouse overstated pallet counts by eleven percent "
    "because the night shift scanned returned crates twice before the auditors arrived on Thursday morning"
)
FILLER = ["zebra", "quartz", "mosaic", "lantern", "orbit", "velvet", "canyon", "harbor", "ember", "falcon", "tundra"]


def _settings(**kw: object) -> DetectionSettings:
    base: dict[str, object] = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "junction-tests"}
    return DetectionSettings.model_validate(base | kw)


def _severest(alerts: list[Alert], tenant: str) -> str:
    return max((a.severity for a in alerts if a.tenant_id == tenant), key=SEVERITY_RANK.__getitem__, default="none")


def _stock_world(m: Monitor) -> list[Alert]:
    alerts: list[Alert] = []
    for i in range(3):  # three tenants paste each stock text (a template), never the two in a row
        for j, text in enumerate((DISCLAIMER, CLOSING)):
            rid = f"c{i}{j}"
            alerts += observe_now(m, request(rid, f"common{i}", i * 10 + j, text=f"Use this footer: {text}"))
            alerts += observe_now(m, response(rid, f"common{i}", i * 10 + j + 1, text="Understood."))
    return alerts


def _two_in_a_row(key: str, junction: bool) -> str:
    # Whole sentences of the source off: the junction rule is what is under test (both are whole sentences).
    m = Monitor(_settings(fingerprint_key=key, overlap_junction=junction, overlap_whole_sentences=False))
    alerts = _stock_world(m)
    # One other tenant's answer put the disclaimer and the closing in a row; so does the receiver's answer.
    alerts += observe_now(m, request("s", "src", 100, text="Is the new tariff in force?"))
    alerts += observe_now(m, response("s", "src", 101, text=f"It starts in May. {DISCLAIMER} {CLOSING}"))
    alerts += observe_now(m, request("r", "rx", 200, text="Can I park downtown on Sundays?"))
    alerts += observe_now(m, response("r", "rx", 201, text=f"Yes, parking is free on Sundays. {DISCLAIMER} {CLOSING}"))
    return _severest(alerts, "rx")


def test_two_public_texts_met_in_a_row_by_two_tenants_stay_silent() -> None:
    keys = [f"k{i}" for i in range(8)]
    assert all(_two_in_a_row(k, True) not in ("high", "critical") for k in keys)
    # Control: under some keys winnowing selects three of the four k-grams where the texts meet, which made a
    # high alert before the rule (the zh disclaimer + closing and quote + closing false highs of issue 10).
    assert any(_two_in_a_row(k, False) == "high" for k in keys)


@settings(max_examples=40, deadline=None)
@given(
    st.sampled_from(["junction-tests", "k2", "k3", "k4", "k5", "k6", "k7", "k8"]),
    st.integers(0, len(PRIVATE.split()) - 16),
    st.integers(1, 6),
    st.booleans(),
)
def test_one_private_page_of_sixteen_units_still_alerts_high(key: str, start: int, host: int, stock: bool) -> None:
    """The guarantee both rules keep: 16 units of one other tenant's private text, between the receiver's own
    text (optionally next to stock text), is a high or critical alert naming the source, with no mechanism."""
    m = Monitor(_settings(fingerprint_key=key))
    alerts = _stock_world(m) if stock else []
    page = " ".join(PRIVATE.split()[start : start + 16])
    alerts += observe_now(m, request("s", "src", 100, text=f"Summarise this note: {PRIVATE}"))
    alerts += observe_now(m, response("s", "src", 101, text="Done."))
    before, after = " ".join(FILLER[:host]), " ".join(FILLER[host:])
    text = f"{DISCLAIMER} {before} {page} {after} {CLOSING}" if stock else f"{before} {page} {after}"
    alerts += observe_now(m, request("r", "rx", 200, text="Tell me a story about the sea."))
    got = observe_now(m, response("r", "rx", 201, text=text))
    assert _severest(got, "rx") in ("high", "critical")
    assert {a.source_tenant_id for a in got if a.tenant_id == "rx"} == {"src"}
