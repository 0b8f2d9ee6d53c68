"""Delivery mix-ups (detectors/mixup.py, ADR 0008 decision 9): a whole response delivered to another tenant is told by
its second witness, not by its content alone. A swapped answer that quotes its own user's document is whole
sentences of that user's text, which content alone calls an echo; the pair of crossed exchanges makes it high."""

from __future__ import annotations

import pickle
import random

import numpy as np
import pytest
from factories import request, response
from hypothesis import given
from hypothesis import strategies as st

from detectors import mixup, mixup_pairs
from detectors.mixup import Delivery, Finding, Innocent, MixupLedger
from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import SEVERITY_RANK, Alert
from schemas.exchange import TextFingerprint
from tests.support.live import observe_now

WORDS = [f"w{i:04d}" for i in range(6000)]


def _settings(**kw: object) -> DetectionSettings:
    base = {"overlap_warmup_docs": 0, "overlap_warmup_s": 0, "fingerprint_key": "mixup-tests"}
    return DetectionSettings.model_validate(base | kw)


def _sentences(rng: random.Random, n: int) -> list[str]:
    return [" ".join(rng.sample(WORDS, rng.randint(12, 20))).capitalize() + "." for _ in range(n)]


def _about(alerts: list[Alert], rid: str) -> list[Alert]:
    return [a for a in alerts if rid in a.request_ids and a.kind == "cross_tenant_contamination"]


def _high(alerts: list[Alert]) -> list[Alert]:
    return [a for a in alerts if SEVERITY_RANK[a.severity] >= SEVERITY_RANK["high"]]


def _world(seed: int, **kw: object) -> tuple[Monitor, dict[str, list[str]], list[Alert]]:
    """Tenants S and R each pasted a document in an earlier turn (answered "Noted."); their answers now quote it."""
    rng = random.Random(seed)
    m = Monitor(_settings(**kw))
    docs = {"S": _sentences(rng, 8), "R": _sentences(rng, 8)}
    alerts: list[Alert] = []
    for i, (tenant, doc) in enumerate(docs.items()):
        alerts += observe_now(m, request(f"{tenant.lower()}1", tenant, 10 + i, text=" ".join(doc)))
        alerts += observe_now(m, response(f"{tenant.lower()}1", tenant, 12 + i, text="Noted."))
    return m, docs, alerts


def _answer(rng: random.Random, doc: list[str]) -> str:
    """An answer to its own user's document: two whole sentences of it between sentences of the model's own."""
    return " ".join([*_sentences(rng, 2), doc[2], doc[5], *_sentences(rng, 3)])


def _turn(m: Monitor, tenant: str, rid: str, ts: float, doc: list[str]) -> list[Alert]:
    history = " ".join(doc) + " Noted. Now summarise it for me."
    return observe_now(m, request(rid, tenant, ts, text=history))


@pytest.mark.parametrize("seed", range(4))
def test_a_swapped_whole_response_that_quotes_its_source_document_is_high_and_names_the_source(seed: int) -> None:
    m, docs, alerts = _world(seed)
    rng = random.Random(100 + seed)
    s_answer, r_answer = _answer(rng, docs["S"]), _answer(rng, docs["R"])
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + _turn(m, "R", "r2", 101, docs["R"])
    # Both in flight: the gateway crosses the two answers.
    alerts += observe_now(m, response("s2", "S", 105, text=r_answer))
    alerts += observe_now(m, response("r2", "R", 106, text=s_answer))
    to_s, to_r = _high(_about(alerts, "s2")), _high(_about(alerts, "r2"))
    assert [a.source_tenant_id for a in to_r] == ["S"]
    assert [a.source_tenant_id for a in to_s] == ["R"]
    assert any("delivery_mixup" in e.figures for a in to_s + to_r for e in a.evidence)
    # Control: content alone calls each of them an echo of whole sentences, a warning at most.
    m, docs, alerts = _world(seed, mixup=False)
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + _turn(m, "R", "r2", 101, docs["R"])
    alerts += observe_now(m, response("s2", "S", 105, text=r_answer)) + observe_now(
        m, response("r2", "R", 106, text=s_answer)
    )
    assert not _high(_about(alerts, "s2")) and not _high(_about(alerts, "r2"))


@pytest.mark.parametrize("seed", range(4))
def test_a_copied_answer_names_its_owner_and_the_owner_is_not_flagged(seed: int) -> None:
    m, docs, alerts = _world(seed)
    rng = random.Random(200 + seed)
    s_answer = _answer(rng, docs["S"])
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + observe_now(m, request("r2", "R", 101, text="What is new today?"))
    # R gets S's answer first (a response cache keyed wrongly), then S gets its own.
    alerts += observe_now(m, response("r2", "R", 104, text=s_answer))
    alerts += observe_now(m, response("s2", "S", 106, text=s_answer))
    assert [a.source_tenant_id for a in _high(_about(alerts, "r2"))] == ["S"]
    assert not _high(_about(alerts, "s2"))  # its own answer: what it shares with R's output is not R's text


def _cached(seed: int, asked: float = 110, **kw: object) -> tuple[list[Alert], Monitor, dict[str, list[str]]]:
    """S's answer is mostly public text (two other tenants pasted it: common), two sentences of S's document and one
    of the model's own; R asks (at `asked`) after S got it (at 106), and a response cache keyed wrongly hands R the
    same answer."""
    m, docs, alerts = _world(seed, **kw)
    rng = random.Random(300 + seed)
    public = _sentences(rng, 6)
    for i, t in enumerate(("P", "Q")):
        alerts += observe_now(m, request(f"{t}1", t, 20 + i, text=" ".join(public)))
        alerts += observe_now(m, response(f"{t}1", t, 22 + i, text="Noted."))
    s_answer = " ".join([*public[:4], docs["S"][2], *_sentences(rng, 1), docs["S"][5]])
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + observe_now(m, response("s2", "S", 106, text=s_answer))
    alerts += observe_now(m, request("r2", "R", asked, text="What is new today?"))
    alerts += observe_now(m, response("r2", "R", asked + 2, text=s_answer))
    return alerts, m, docs


@pytest.mark.parametrize("seed", range(4))
def test_an_answer_delivered_before_the_request_was_sent_is_a_copy_that_names_its_owner(seed: int) -> None:
    alerts, _, _ = _cached(seed)
    assert [a.source_tenant_id for a in _high(_about(alerts, "r2"))] == ["S"]
    assert not _high(_about(alerts, "s2"))  # delivered first: it cannot hold an answer to a prompt sent later
    # Control: without the copy from before, content alone sees a few uncommon sentences of S's text (a warning).
    alerts, _, _ = _cached(seed, mixup_copy_before_s=0)
    assert not _high(_about(alerts, "r2"))


@pytest.mark.parametrize("seed", range(2))
def test_a_copy_told_by_its_quotes_reaches_two_minutes_back(seed: int) -> None:
    # Five minutes after S got it, an answer quoting S's document says whose it is no more (tenants read one public
    # document over minutes): only the very same answer to an unrelated prompt or one response id reach that far
    # (ADR 0034; tests/detectors/test_mixup_identical.py).
    alerts, _, _ = _cached(seed, asked=406)
    assert not any(e.figures.get("delivery_mixup") == "copy" for a in _about(alerts, "r2") for e in a.evidence)


def test_a_text_recited_for_two_tenants_is_no_copy_from_before() -> None:
    # S pasted a text and its answer recites it; later R's model writes the same text unprompted. The shared answer
    # is the quoted text alone, nothing of a model's own: an echo, not an answer handed over again.
    m, docs, alerts = _world(2)
    recital = " ".join(docs["S"][1:6])
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + observe_now(m, response("s2", "S", 106, text=recital))
    alerts += observe_now(m, request("r2", "R", 110, text="What is new today?"))
    alerts += observe_now(m, response("r2", "R", 112, text=recital))
    assert not any("delivery_mixup" in e.figures for a in _about(alerts, "r2") for e in a.evidence)


def test_a_copy_from_before_the_window_is_no_witness() -> None:
    m, docs, alerts = _world(1, mixup_copy_before_s=60)
    s_answer = _answer(random.Random(9), docs["S"])
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + observe_now(m, response("s2", "S", 106, text=s_answer))
    alerts += observe_now(m, request("r2", "R", 200, text="What is new today?"))
    alerts += observe_now(m, response("r2", "R", 202, text=s_answer))
    assert not any("delivery_mixup" in e.figures for a in _about(alerts, "r2") for e in a.evidence)


def _quoting(rng: random.Random, doc: list[str]) -> str:
    """Four whole sentences of `doc`, each between two of the model's own (one way needs twice mixup_min_matches
    fingerprints; content alone calls whole sentences apart an echo)."""
    own = _sentences(rng, 5)
    return " ".join([own[0], doc[1], own[1], doc[3], own[2], doc[5], own[3], doc[7], own[4]])


OWNER_GOT = {"an error": (503, None), "an empty answer": (200, ""), "a few words": (200, "Okay, done.")}


@pytest.mark.parametrize("owner_first", [True, False], ids=["owner first", "owner after"])
@pytest.mark.parametrize("got", list(OWNER_GOT))
@pytest.mark.parametrize("seed", range(3))
def test_a_one_way_misroute_names_the_receiver_that_holds_the_other_prompt_and_only_it(
    seed: int, got: str, owner_first: bool
) -> None:
    # R's answer quotes S's document (whole sentences: an echo to content alone) while S's request is in flight, and
    # S gets next to nothing: an error, an empty answer, a few words. In either order.
    m, docs, alerts = _world(seed)
    rng = random.Random(400 + seed)
    status, text = OWNER_GOT[got]
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + observe_now(m, request("r2", "R", 101, text="Tell me something."))
    quoting = _quoting(rng, docs["S"])
    owner = response("s2", "S", 104 if owner_first else 108, status=status, text=text)
    receiver = response("r2", "R", 105, text=quoting)
    for e in (owner, receiver) if owner_first else (receiver, owner):
        alerts += observe_now(m, e)
    assert [a.source_tenant_id for a in _high(_about(alerts, "r2"))] == ["S"]
    assert not _high(_about(alerts, "s2"))
    assert any(e.figures.get("delivery_mixup") == "misroute" for a in _about(alerts, "r2") for e in a.evidence)


# What S got while R's answer quoted S's document: each leaves S a witness against a misroute, so R's quotes stay
# an echo (a warning at most). A refused request (too long, rate-limited) was never answered, so no answer of it
# can have gone elsewhere; an answer of S's own length, or one quoting S's own document, is S's answer.
OWNER_KEPT: dict[str, tuple[int, object]] = {
    "refused 400": (400, None),
    "refused 413": (413, None),
    "refused 429": (429, None),
    "an answer of its own length": (200, 3),
    "its own answer quoting its document": (200, "own"),
}


@pytest.mark.parametrize("got", list(OWNER_KEPT))
def test_an_echo_while_its_owner_was_refused_or_answered_stays_a_warning(got: str) -> None:
    m, docs, alerts = _world(2)
    rng = random.Random(5)
    status, what = OWNER_KEPT[got]
    text = None
    if what == "own":
        text = " ".join([docs["S"][0], *_sentences(rng, 2), docs["S"][7]])
    elif isinstance(what, int):
        text = " ".join(_sentences(rng, what))
    alerts += _turn(m, "S", "s2", 100, docs["S"]) + observe_now(m, request("r2", "R", 101, text="Tell me something."))
    alerts += observe_now(m, response("s2", "S", 101.2 if status != 200 else 104, status=status, text=text))
    alerts += observe_now(m, response("r2", "R", 105, text=_quoting(rng, docs["S"])))
    found = _about(alerts, "r2")
    assert found and not _high(found)


def test_an_echo_of_a_text_whose_owner_has_nothing_in_flight_stays_a_warning() -> None:
    m, docs, alerts = _world(3)
    rng = random.Random(7)
    # R's answer quotes S's document long after S's exchange ended, and S has no request in flight: an echo.
    alerts += observe_now(m, request("r2", "R", 500, text="Tell me something."))
    alerts += observe_now(m, response("r2", "R", 504, text=_answer(rng, docs["S"])))
    found = _about(alerts, "r2")
    assert found and not _high(found)
    assert not any("delivery_mixup" in e.figures for a in found for e in a.evidence)


def test_two_answers_that_each_relate_to_their_own_prompt_are_no_swap() -> None:
    # Both tenants quote the same vendor template in their prompts and their answers: each output holds text of the
    # other's prompt, but it is its own prompt's text first.
    rng = random.Random(11)
    template = " ".join(_sentences(rng, 4))
    m = Monitor(_settings())
    alerts = observe_now(m, request("s2", "S", 100, text=template + " " + " ".join(_sentences(rng, 3))))
    alerts += observe_now(m, request("r2", "R", 101, text=template + " " + " ".join(_sentences(rng, 3))))
    alerts += observe_now(m, response("s2", "S", 105, text=template + " " + " ".join(_sentences(rng, 2))))
    alerts += observe_now(m, response("r2", "R", 106, text=template + " " + " ".join(_sentences(rng, 2))))
    assert not any("delivery_mixup" in e.figures for a in alerts for e in a.evidence)


def _delivery(i: float, tenant: str = "t") -> Delivery:
    keys = np.arange(10, dtype=np.uint64) + np.uint64(int(i) * 100)
    return Delivery(i, i, f"r{i}", tenant, None, None, keys, keys, set())


def test_the_ledger_is_bounded_by_count_and_by_event_time() -> None:
    s = _settings(mixup_max_deliveries=5, mixup_window_s=50)
    ledger = MixupLedger()
    for i in range(20):
        ledger.add(s, _delivery(float(i)))
    assert ledger.state_size() == 5
    ledger.add(s, _delivery(1000.0))
    assert ledger.state_size() == 1  # the others are older than the window
    small = _settings(mixup_max_prints=45)  # each delivery holds 20 fingerprints (10 out, 10 prompt)
    for i in range(5):
        ledger.add(small, _delivery(2000.0 + i))
    assert ledger.state_size() == 2 and ledger.prints == 40


def test_one_answer_to_two_tenants_that_neither_prompt_explains_concludes_nothing() -> None:
    # The same public text translated for two tenants: identical outputs, neither prompt holds them, and both prompts
    # hold the text they asked about (one question asked twice: ADR 0028).
    s, ledger = _settings(), MixupLedger()
    out, source = np.arange(40, dtype=np.uint64), np.arange(3000, 3030, dtype=np.uint64)
    a = Delivery(10, 5, "a", "A", None, None, out, np.union1d(np.arange(1000, 1040, dtype=np.uint64), source), set())
    b = Delivery(12, 6, "b", "B", None, None, out, np.union1d(np.arange(2000, 2040, dtype=np.uint64), source), set())
    ledger.add(s, a)
    assert ledger.check(s, b, lambda keys: np.zeros(keys.size, dtype=bool)) == []
    # A text they share that is public is no question asked twice: the very same answer to what is left is a copy.
    (f,) = _checked(s, a, b, lambda keys: keys >= 3000)
    assert f.mode == "identical" and f.leaked is b and f.owner is a


def _checked(s: DetectionSettings, first: Delivery, then: Delivery, innocent: Innocent) -> list[Finding]:
    ledger = MixupLedger()
    ledger.add(s, first)
    return ledger.check(s, then, innocent)


def test_the_ledger_copied_as_its_changes_is_the_live_ledger() -> None:
    s = _settings(mixup_max_deliveries=6, mixup_window_s=1e4)
    live = MixupLedger()
    for i in range(4):
        live.add(s, _delivery(float(i)))
    assert live.changes() is None  # never copied: only a whole copy will do
    live.mark()
    copy = pickle.loads(pickle.dumps(live))
    for i in range(4, 9):  # three of the old ones fall out
        live.add(s, _delivery(float(i)))
    changes = live.changes()
    assert changes is not None
    copy.replay(changes)
    assert [d.request_id for d in copy.recent] == [d.request_id for d in live.recent]
    for i in range(9, 20):  # more added than it holds: a whole copy again
        live.add(s, _delivery(float(i)))
    assert live.changes() is None


SMALL = st.lists(st.integers(0, 40), max_size=30)


@given(a=SMALL, b=SMALL, c=SMALL)
def test_the_swap_witness_is_the_same_set_in_either_order(a: list[int], b: list[int], c: list[int]) -> None:
    # pair() computes (A - B) & C as (A & C) - B, the cheap order for the usual pair that shares nothing.
    def keys(v: list[int]) -> np.ndarray:
        return np.unique(np.array(v, dtype=np.uint64))

    ka, kb, kc = keys(a), keys(b), keys(c)
    common, without = mixup_pairs._common, mixup_pairs._without
    assert without(common(ka, kc), kb).tolist() == common(without(ka, kb), kc).tolist()


@given(hashes=st.lists(st.integers(0, 2**64 - 1), max_size=60))
def test_a_prints_keys_are_sorted_and_unique_even_when_a_wire_print_repeats(hashes: list[int]) -> None:
    tp = TextFingerprint(hashes + hashes[: len(hashes) // 2], len(hashes))  # a producer's print may repeat values
    assert mixup._keys(tp).tolist() == sorted(set(hashes))


KEYS = st.lists(st.integers(0, 15), max_size=14).map(lambda v: np.unique(np.array(v, dtype=np.uint64)))


@given(cur=st.tuples(KEYS, KEYS), others=st.lists(st.tuples(KEYS, KEYS), min_size=3, max_size=8))
def test_the_candidate_filter_keeps_every_pair_that_can_be_a_mixup(
    cur: tuple[np.ndarray, np.ndarray], others: list[tuple[np.ndarray, np.ndarray]]
) -> None:
    # The one search over all outputs in flight may only drop pairs `pair` would dismiss (nothing is innocent here,
    # the loosest case).
    s = _settings(mixup_min_matches=2)

    def delivery(i: int, out: np.ndarray, prompt: np.ndarray) -> Delivery:
        return Delivery(float(i), 0.0, f"r{i}", f"t{i}", None, None, out, prompt, set())

    current = delivery(0, *cur)
    ds = [delivery(i + 1, *o) for i, o in enumerate(others)]
    # The content signals name the tenants whose prompts the current output holds text of (the postings hold every
    # prompt in flight): the hint a one-way misroute is asked under.
    named = frozenset(d.tenant_id for d in ds if mixup_pairs._common(current.out, d.prompt).size >= 2)
    kept = mixup_pairs.candidates(s, current, ds, named)
    assert [d.request_id for d in kept] == [d.request_id for d in ds if d in kept]  # order kept
    copies = mixup_pairs.candidates(s, current, ds, frozenset(), copies_only=True)
    for d in ds:
        if mixup_pairs.pair(s, current, d, lambda k: np.zeros(k.size, dtype=bool)) is not None:
            assert d in kept
        if mixup_pairs.pair(s, current, d, lambda k: np.zeros(k.size, dtype=bool), earlier=True) is not None:
            assert d in copies


def test_the_candidate_filter_keeps_a_copy_among_unrelated_deliveries() -> None:
    s = _settings(mixup_min_matches=2)
    answer = np.arange(10, 20, dtype=np.uint64)

    def delivery(i: int, out: np.ndarray, prompt: np.ndarray) -> Delivery:
        return Delivery(float(i), 0.0, f"r{i}", f"t{i}", None, None, out, prompt, set())

    current = delivery(0, answer, np.arange(10, 16, dtype=np.uint64))  # its prompt holds the answer's source
    unrelated = [delivery(i, np.arange(100 * i, 100 * i + 10, dtype=np.uint64), mixup._EMPTY) for i in (1, 2, 4)]
    copy = delivery(3, answer, np.arange(50, 60, dtype=np.uint64))
    ds = [*unrelated[:2], copy, unrelated[2]]
    assert mixup_pairs.pair(s, current, copy, lambda k: np.zeros(k.size, dtype=bool)) is not None
    assert mixup_pairs.candidates(s, current, ds, frozenset()) == [copy]
    assert mixup_pairs.candidates(s, current, ds, frozenset(), copies_only=True) == [copy]


def test_the_copy_sketch_finds_every_exact_copy_a_full_search_finds_after_eviction_and_a_copy() -> None:
    # The sketch is derived from the ledger: after deliveries fell out, and after a checkpoint copy (which leaves it
    # out), it finds the same earlier copies a search of every earlier delivery would.
    s = _settings(mixup_max_deliveries=40, mixup_window_s=1e4, mixup_copy_before_s=1e4)
    rng = np.random.default_rng(3)
    answers = [np.unique(rng.integers(0, 2**63, 30, dtype=np.uint64)) for _ in range(12)]
    ledger = MixupLedger()
    for i in range(100):
        out = answers[i % 12]
        ledger.add(s, Delivery(float(i), float(i), f"r{i}", f"t{i % 7}", None, None, out, mixup._EMPTY, set()))
    restored = pickle.loads(pickle.dumps(ledger))
    for probe in range(12):
        cur = Delivery(200.0, 150.0, "c", "tx", None, None, answers[probe], mixup._EMPTY, set())
        full = [d.request_id for d in reversed(ledger.recent) if (d.out == cur.out).all()]
        assert [d.request_id for d in ledger._earlier(s, cur)] == full
        assert [d.request_id for d in restored._earlier(s, cur)] == full


def test_a_ledger_checkpointed_before_the_sketch_restores_and_finds_copies() -> None:
    # A checkpoint written before stop 46 holds a ledger without the sketch attribute: it restores as it is, the
    # sketch is built from its deliveries when first asked, and later deliveries enter it.
    s = _settings(mixup_window_s=1e4, mixup_copy_before_s=1e4)
    answer = np.arange(100, 140, dtype=np.uint64)
    old = MixupLedger()
    old.add(s, Delivery(1.0, 0.5, "a", "A", None, None, answer, mixup._EMPTY, set()))
    state = {k: v for k, v in old.__dict__.items() if k != "_sketch"}
    restored = MixupLedger.__new__(MixupLedger)
    restored.__dict__.update(state)  # what unpickling does for a class without __setstate__
    assert not hasattr(restored, "_sketch")
    restored.add(s, Delivery(2.0, 1.5, "b", "B", None, None, answer + np.uint64(1000), mixup._EMPTY, set()))
    cur = Delivery(9.0, 5.0, "c", "C", None, None, answer, mixup._EMPTY, set())
    assert [d.request_id for d in restored._earlier(s, cur)] == ["a"]
    cur2 = Delivery(9.0, 5.0, "d", "D", None, None, answer + np.uint64(1000), mixup._EMPTY, set())
    assert [d.request_id for d in restored._earlier(s, cur2)] == ["b"]
