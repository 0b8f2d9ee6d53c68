"""Two answers swapped, told by the token counts they carry (detectors/mixup_counts.py, ADR 0029).

Each response's usage counts the prompt its answer was made for. Where the gateway and the engine count a prompt
alike, two responses in flight together whose counts are each the other request's prompt count got each other's
answer, whatever their texts say. Every scenario also runs through the embedded, direct and staged runners
(tests/parity.py), so the counts travel in the fleet's frames too."""

from __future__ import annotations

from factories import high_on as _high
from factories import private_texts as _texts
from factories import request, response

from detectors.monitor import Monitor
from detectors.settings import DetectionSettings
from schemas.alert import Alert

S = DetectionSettings(overlap_warmup_docs=0, overlap_warmup_s=0, fingerprint_key="counts", fleet_delay_s=30.0)
T0 = 10_000.0
# (request id, tenant, sent, delivered, domain, prompt tokens, usage input tokens, prompt, answer); times from T0.
# A tenth element, a status code other than 200: the request got no answer (no usage, no text).
Event = (
    tuple[str, str, float, float, str, int, int, str, str] | tuple[str, str, float, float, str, int, int, str, str, int]
)


def _run(settings: DetectionSettings, events: list[Event]) -> list[Alert]:
    m = Monitor(settings)
    timeline = []
    for rid, tenant, sent, done, domain, pt, used, prompt, answer, *status in events:
        sent, done = sent + T0, done + T0
        kw = {"session_id": f"{tenant}-s", "text": prompt, "cache_domain": domain}
        timeline.append((sent, request(rid, tenant, sent, tokens=pt, **kw)))
        kw = {"session_id": f"{tenant}-s", "text": answer, "domain": domain, "input_tokens": used}
        if status:
            kw |= {"status": status[0], "text": None, "input_tokens": None}
        timeline.append((done, response(rid, tenant, done, **kw)))
    out: list[Alert] = []
    for _, e in sorted(timeline, key=lambda x: x[0]):
        out += m.observe(e)
    out += m.observe(request("late", "Z", T0 + 4_000.0, text="nothing to see", cache_domain="d9"))
    return out + m.observe(response("late", "Z", T0 + 4_001.0, domain="d9", text="fine thanks"))


def _traffic(alike: bool, n: int = 70) -> list[Event]:
    """n earlier exchanges, half in each pool; their usage counts their prompt to the token (`alike`) or as an engine
    with another tokenizer and a chat template does (1.3 times, plus 25)."""
    out: list[Event] = []
    for i in range(n):
        pt = 120 + 37 * i
        used = pt if alike else int(1.3 * pt) + 25
        out.append(
            (f"w{i}", f"W{i % 7}", -450.0 + 6 * i, -447.0 + 6 * i, f"d{1 + i % 2}", pt, used, *_texts(500 + i, 2))
        )
    return out


def _swap(seed: int, r_domain: str, a_counts: tuple[int, int], r_counts: tuple[int, int]) -> list[Event]:
    prompt_a, prompt_r, answer_a, answer_r = _texts(seed, 4)
    return [
        ("a1", "A", 100.0, 104.0, "d1", *a_counts, prompt_a, answer_r),
        ("r1", "R", 100.4, 104.0, r_domain, *r_counts, prompt_r, answer_a),
    ]


def test_two_responses_whose_usage_counts_the_other_prompt_are_both_high() -> None:
    for r_domain in ("d1", "d2"):  # in one pool, and a gateway crossing two pools' streams
        events = [*_traffic(True), *_swap(3, r_domain, (412, 733), (733, 412))]
        assert _high(_run(S.model_copy(update={"mixup_counts": False}), events), "R") == []
        alerts = _run(S, events)
        (on_r,) = _high(alerts, "R")
        (on_a,) = _high(alerts, "A")
        assert on_r.source_tenant_id == "A" and on_a.source_tenant_id == "R"
        f = on_r.evidence[0].figures
        assert f["delivery_mixup"] == "counts" and f["source_request_ids"] == ["a1"]
        assert on_r.summary.startswith(f"response to tenant R on {r_domain} carries tenant A's answer")
        assert "its usage counts tenant A's prompt, and tenant A's usage this one's (counts)" in on_r.summary


def test_counts_tell_nothing_where_gateway_and_engine_count_apart() -> None:
    # A gateway counting with another tokenizer: counts cross by chance, so the check is off.
    events = [*_traffic(False), *_swap(4, "d2", (412, 733), (733, 412))]
    assert _high(_run(S, events), "R") == [] and _high(_run(S, events), "A") == []
    # Too few exchanges with both counts known to say how this deployment counts.
    events = [*_traffic(True, n=20), *_swap(4, "d2", (412, 733), (733, 412))]
    assert _high(_run(S, events), "R") == []


def test_one_way_or_apart_in_time_is_no_swap() -> None:
    # One response counts the other's prompt, the other its own: a coincidence of one number.
    assert _high(_run(S, [*_traffic(True), *_swap(5, "d2", (412, 733), (733, 733))]), "R") == []
    # Two prompts of one size: nothing crosses.
    assert _high(_run(S, [*_traffic(True), *_swap(5, "d2", (412, 412), (412, 412))]), "R") == []
    # Crossed counts, but R was sent after A was answered: no answer was in flight to be crossed.
    a, r = _swap(6, "d2", (412, 733), (733, 412))
    events = [*_traffic(True), a, ("r1", "R", 300.0, 302.0, *r[4:])]
    assert _high(_run(S, events), "R") == []


# --- one way: a response whose usage counts the prompt of a request that lost its answer (ADR 0031) ---------------


def _desync(
    seed: int, cancelled_at: float = 101.5, status: int = 499, r_pt: int = 733, r_domain: str = "d1"
) -> list[Event]:
    """C's client gave up (`status`) after its request went upstream; the pooled connection, its answer unread, went
    to R's request next, and R got C's answer with C's usage (412, C's prompt count)."""
    prompt_c, prompt_r, answer_c = _texts(seed, 3)
    return [
        ("c1", "C", 100.0, cancelled_at, "d1", 412, 0, prompt_c, "", status),
        ("r1", "R", 101.0, 101.7, r_domain, r_pt, 412, prompt_r, answer_c),
    ]


def test_an_answer_whose_usage_counts_a_cancelled_request_is_that_requests() -> None:
    for cancelled_at in (101.5, 103.0):  # the cancellation logged before R's delivery, and after it (a late alert)
        events = [*_traffic(True), *_desync(7, cancelled_at)]
        assert _high(_run(S.model_copy(update={"mixup_counts": False}), events), "R") == []
        (on_r,) = _high(_run(S, events), "R")
        f = on_r.evidence[0].figures
        assert on_r.source_tenant_id == "C" and f["delivery_mixup"] == "counted" and f["source_request_ids"] == ["c1"]
        assert on_r.summary.startswith("response to tenant R on d1 carries tenant C's answer")
        assert "its usage counts tenant C's prompt, not its own; that request lost its own answer" in on_r.summary
        assert on_r.incident_severity == "high"  # one response told by the wire pages at once (ADR 0032)


def test_a_gateways_connection_pool_in_front_of_two_pools_is_told_by_the_fleet() -> None:
    # C was decoded on d1, R on d2: the fleet's digests carry C's prompt count as a lost answer's (frame F5).
    for cancelled_at in (101.5, 103.0):
        (on_r,) = _high(_run(S, [*_traffic(True), *_desync(16, cancelled_at, r_domain="d2")]), "R")
        assert on_r.source_tenant_id == "C" and on_r.cache_domain == "d2"
        assert on_r.evidence[0].figures["delivery_mixup"] == "counted"


def test_the_next_request_in_the_chain_is_the_previous_receivers() -> None:
    # R got C's answer; R's answer, unread, went to Q's request: Q's usage counts R's prompt, R's its own no longer.
    events = [*_traffic(True), *_desync(8)]
    prompt_q = _texts(9, 1)[0]
    events.append(("q1", "Q", 101.2, 101.9, "d1", 305, 733, prompt_q, _texts(10, 1)[0]))
    alerts = _run(S, events)
    (on_q,) = _high(alerts, "Q")
    assert on_q.source_tenant_id == "R" and on_q.evidence[0].figures["delivery_mixup"] == "counted"
    assert [a.source_tenant_id for a in _high(alerts, "R")] == ["C"]


def test_one_number_is_no_witness_without_the_rest() -> None:
    base = _traffic(True)
    # Where gateway and engine count apart, numbers match by chance.
    assert _high(_run(S, [*_traffic(False), *_desync(11)]), "R") == []
    # A refused request (rate-limited, too long) never had an answer to hand over.
    for status in (400, 429):
        assert _high(_run(S, [*base, *_desync(12, status=status)]), "R") == []
    # The other request was answered, and counted its own prompt: R's count matching it is a coincidence.
    c, r = _desync(13)
    assert _high(_run(S, [*base, (*c[:6], 412, c[7], _texts(14, 1)[0]), r]), "R") == []
    # C was sent longer before R than an answer is kept for handing over (mixup_copy_before_s).
    assert _high(_run(S, [*base, ("c1", *c[1:2], -100.0, -99.0, *c[4:]), r]), "R") == []
    # R's own exchanges are off as a rule (a template its gateway does not count): one more off count says nothing.
    own = [
        (f"o{i}", "R", -300.0 + 20 * i, -298.0 + 20 * i, "d1", 300 + i, 340 + i, *_texts(30 + i, 2)) for i in range(3)
    ]
    assert _high(_run(S, [*base, *own, *_desync(15)]), "R") == []
    # Control: the same exchanges with R's own counts alike are a leak.
    alike = [(*o[:6], o[5], *o[7:]) for o in own]
    assert [a.source_tenant_id for a in _high(_run(S, [*base, *alike, *_desync(15)]), "R")] == ["C"]


def test_an_answer_copied_with_its_usage_is_not_a_lost_answers() -> None:
    # B asked 412 tokens and got its own answer, counted alike; a response cache handed that answer, usage and all,
    # to R. C, of another tenant, asked 412 tokens as well and lost its answer: the number fits C too, but R's answer
    # is B's, and so is the count.
    prompt_b, prompt_r, answer_b = _texts(17, 3)
    (c_lost,) = _desync(18)[:1]
    for c_domain in ("d1", "d2"):  # told by the domain's ledger, and by the fleet's
        events = [
            *_traffic(True),
            (*c_lost[:4], c_domain, *c_lost[5:]),
            ("b1", "B", 100.5, 101.6, "d1", 412, 412, prompt_b, answer_b),
            ("r1", "R", 101.0, 101.7, "d1", 733, 412, prompt_r, answer_b),
        ]
        assert {a.source_tenant_id for a in _high(_run(S, events), "R")} == {"B"}


def test_two_answers_crossed_by_their_counts_are_not_a_lost_answers() -> None:
    # R and B crossed answers in one pool (each usage the other's prompt: two numbers); C, in another pool, asked as
    # many tokens as B and lost its answer. R's usage is B's, told twice over; the fleet's ledger must not name C.
    (c_lost,) = _desync(19)[:1]
    events = [*_traffic(True), (*c_lost[:4], "d2", *c_lost[5:]), *_swap(20, "d1", (412, 733), (733, 412))]
    alerts = _run(S, events)
    assert {a.source_tenant_id for a in _high(alerts, "R")} == {"A"}
    assert {a.source_tenant_id for a in _high(alerts, "A")} == {"R"}


def _stock_twice(seed: int, r_domain: str, r_counts: tuple[int, int], alike: bool = True) -> list[Event]:
    """A stock answer (four other tenants got it first, in each pool) delivered to A and, in the same second, to R;
    A's prompt counts 412 tokens, R's 733. `r_counts`: R's gateway count and the usage R's response carries."""
    prompt_a, prompt_r, stock = _texts(70 + seed, 3)
    seen = [(f"s{i}", f"S{i}", 20.0 + 5 * i, 22.0 + 5 * i, f"d{1 + i // 4}", 90 + i, 90 + i, p, stock)
            for i, p in enumerate(_texts(80 + seed, 8))]  # fmt: skip
    return [
        *_traffic(alike),
        *seen,
        ("a1", "A", 100.0, 104.0, "d1", 412, 412, prompt_a, stock),
        ("r1", "R", 100.4, 104.01, r_domain, *r_counts, prompt_r, stock),
    ]


def test_one_stock_answer_with_one_usage_is_the_owners_handed_over() -> None:
    # A misrouted response delivered to two connections: the very same answer, stock text a model writes for many
    # prompts (so no copy rule may rest on it), with the usage counting A's prompt to the token and not R's (ADR 0036).
    for r_domain in ("d1", "d2"):  # one pool, and a gateway in front of two (the fleet's ledger)
        events = _stock_twice(1, r_domain, (733, 412))
        assert _high(_run(S.model_copy(update={"mixup_counts": False}), events), "R") == []
        alerts = _run(S, events)
        (on_r,) = _high(alerts, "R")
        f = on_r.evidence[0].figures
        assert on_r.source_tenant_id == "A" and f["delivery_mixup"] == "usage" and f["source_request_ids"] == ["a1"]
        assert "the very answer tenant A was given, with its usage: it counts tenant A's prompt (usage)" in on_r.summary
        assert on_r.incident_severity in ("high", "critical")  # told by the wire, as a mechanism is: it pages at once
        assert _high(alerts, "A") == []  # the owner got its own answer


def test_one_stock_answer_with_usages_of_their_own_or_counts_apart_is_no_witness() -> None:
    # Two tenants given one stock reply, each usage its own prompt's: the model wrote it twice, nobody's data moved.
    assert _high(_run(S, _stock_twice(2, "d1", (733, 733))), "R") == []
    # A deployment whose gateway counts with another tokenizer: one usage equal to one count is a coincidence there.
    assert _high(_run(S, _stock_twice(2, "d1", (733, 412), alike=False)), "R") == []


def test_one_stock_answer_served_again_later_with_its_usage_is_the_earlier_owners() -> None:
    # A response cache keyed without the tenant: A's stock answer, usage and all, served to R a minute later. The
    # earlier delivery is the owner; its usage says so too.
    events = _stock_twice(3, "d1", (733, 412))
    a, r = events[-2], events[-1]
    events[-1] = ("r1", "R", 160.0, 161.0, *r[4:])
    (on_r,) = _high(_run(S, events), "R")
    assert on_r.source_tenant_id == "A" and on_r.evidence[0].figures["delivery_mixup"] == "usage"
    # The same count the other way round (R's usage A's own prompt count, A's R's): the earlier delivery cannot have
    # received a later request's answer, so nothing is concluded about A.
    events[-2] = (*a[:5], 733, 412, *a[7:])
    events[-1] = ("r1", "R", 160.0, 161.0, r[4], 412, 412, *r[7:])
    assert _high(_run(S, events), "A") == []
