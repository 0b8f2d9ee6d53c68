"""Two answers swapped, told by the token counts they carry (ADR 0029).

An engine returns with each answer its `usage`: the input tokens of the prompt *it answered*. A gateway that crosses
two responses (two streams written to each other's connection, a response cache keyed wrongly both ways) delivers
each answer with its usage to the other request, so each response counts the other request's prompt. Where the
deployment's gateway and engine count a prompt alike (the gateway reports the count its engine will make), that is
exact: A's response counts B's prompt, and B's counts A's, to the token, while neither counts its own. Two prompt
counts crossing by chance within one request's lifetime is a coincidence of two exact numbers; the text of the two
answers plays no part (an answer that restates its question quotes nothing either prompt holds, and content and
the copy rules see nothing).

Where the two counts differ as a rule (a gateway counting with another tokenizer than the engine's: LiteLLM's tiktoken
in front of a GLM engine), crossings by chance happen (measured on our simulator and on ext-v2: one pair in a few
thousand responses), so the check runs only while the ledger's recent deliveries count alike: at least `_EXACT` of
the last `_RECENT` with both counts known, and `_MIN_KNOWN` of them. Pure, no state of its own: the regime is read
from the deliveries the ledger holds.

One way (ADR 0031): a response whose usage counts, not its own prompt, the prompt of another tenant's request that got
no answer of its own (it timed out, its client closed the connection, the server failed it) or an answer whose usage
counts some third prompt, sent at most `mixup_copy_before_s` before this request, got that request's answer: a
connection handed back with an answer unread and read by the next request (the redis-py bug behind ChatGPT's March
2023 leak; HTTP keep-alive pools), a chain of them. One number against one number, so it asks more: both tenants' own
recent exchanges count alike (a tenant whose template the gateway does not count is off every time), and the owner's
own exchange lost or miscounted its answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from itertools import islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from detectors.mixup import Delivery, Finding
    from schemas.exchange import Exchange

_RECENT = 64  # deliveries read for the regime, newest first
_MIN_KNOWN = 32  # of them with both counts known, at least
_EXACT = 0.9  # share of those whose two counts agree to the token
_TENANT_RECENT = 256  # deliveries read for one tenant's own regime, newest first
# Client errors after which an answer may exist and be lost: a request timeout, a client that closed the connection.
_LOST = frozenset({408, 499})
# How long before a request another request that lost its answer can have been sent for the request's usage to
# count it (ADR 0031): a pooled connection is handed to the next request within seconds, and the longer the
# window, the more lost requests a count can meet by chance (p·k/w); a cached copy may be older (`_earlier`).
LOST_WITHIN_S = 120.0

Counts = tuple[int, int]  # (the gateway's count of the prompt, the engine's input tokens in its usage)
# The findings whose two deliveries each got the other's answer: both are raised, each naming the other.
BOTH_WAYS = frozenset({"swap", "counts"})


def answered(code: int | None) -> tuple[bool, bool]:
    """(whether a response of status `code` can witness a mix-up, whether its answer was lost): a refused request
    (too long, rate-limited, malformed) had no answer to hand over; a server error, a timeout or a closed connection
    had one, which it lost."""
    failed = code is not None and not 200 <= code <= 299
    if failed and code is not None and code < 500 and code not in _LOST:
        return False, True
    return True, failed


def asked_of(ex: Exchange) -> int | None:
    """The gateway's count of the prompt of an exchange whose answer was lost (`answered`: it had one to lose, and
    delivered none), the count another response's usage can carry (ADR 0031); None otherwise."""
    req, resp = ex.request, ex.response
    if req is None or resp is None or answered(resp.status_code) != (True, True):
        return None
    return req.prompt_tokens


def counts_of(ex: Exchange) -> Counts | None:
    """The exchange's two counts of its prompt; None where either is unknown, or the response failed (it delivered
    no answer whose usage could have crossed)."""
    req, resp = ex.request, ex.response
    if req is None or resp is None or not 200 <= resp.status_code <= 299:
        return None
    usage = resp.usage
    if usage is None or usage.input_tokens is None:
        return None
    return req.prompt_tokens, usage.input_tokens


def counting_alike(recent: Sequence[Delivery]) -> bool:
    """Whether the gateway's counts and the engine's agree to the token on the ledger's recent deliveries."""
    known = alike = 0
    for d in islice(reversed(recent), _RECENT):
        c = getattr(d, "counts", None)  # a delivery pickled before counts has none
        if c is not None:
            known += 1
            alike += c[0] == c[1]
    return known >= _MIN_KNOWN and alike >= _EXACT * known


def crossed(
    current: Delivery, others: Iterable[Delivery], recent: Sequence[Delivery], found: Iterable[Finding]
) -> list[Delivery]:
    """The deliveries of `others` (in flight with `current`, other tenants) whose answer `current` got while it got
    theirs: each response's engine count is the other request's prompt count, and not its own. A swap already `found`
    (told by the texts) is not told again. Empty unless the ledger counts alike (`counting_alike`)."""
    mine = getattr(current, "counts", None)
    if mine is None or mine[0] == mine[1]:
        return []
    swapped = [x for f in found if f.mode == "swap" for x in (f.leaked, f.owner)]
    out = [o for o in others if _crossing(current, o) and all(o is not x for x in swapped)]
    return out if out and counting_alike(recent) else []


def _crossing(a: Delivery, b: Delivery) -> bool:
    """Whether `a`'s usage counts `b`'s prompt and `b`'s counts `a`'s, neither its own, the two in flight together (a
    late digest, the fleet's, is checked against later deliveries)."""
    ca, cb = getattr(a, "counts", None), getattr(b, "counts", None)
    if ca is None or cb is None or ca[0] == ca[1]:
        return False
    return ca[1] == cb[0] and cb[1] == ca[0] and b.sent <= a.ts and a.sent <= b.ts


def usage_copied(a: Delivery, b: Delivery) -> tuple[bool, Delivery | None]:
    """Whether two responses carry one usage (the engine's count equal, the gateway's counts of their prompts not):
    one response handed over twice, its usage with it (ADR 0031); and its owner where the usage says whose (the one
    whose own count it is), else None."""
    ca, cb = getattr(a, "counts", None), getattr(b, "counts", None)
    if ca is None or cb is None or ca[1] != cb[1] or ca[0] == cb[0]:
        return False, None
    return True, a if ca[0] == ca[1] else b if cb[0] == cb[1] else None


def _off(d: Delivery) -> bool:
    c = getattr(d, "counts", None)
    return c is not None and c[0] != c[1]


def _tenant_alike(tenant: str, recent: Sequence[Delivery], besides: tuple[Delivery, ...]) -> bool:
    """Whether `tenant`'s own recent deliveries (other than `besides`) count alike at least as often as not; a tenant
    with none known is taken as the deployment counts."""
    known = off = 0
    for d in islice(reversed(recent), _TENANT_RECENT):
        if d.tenant_id == tenant and getattr(d, "counts", None) is not None and all(d is not b for b in besides):
            known += 1
            off += _off(d)
    return 2 * off <= known


def _lost_pair(leaked: Delivery, owner: Delivery, window_s: float) -> bool:
    """Whether `leaked`'s usage counts `owner`'s prompt, which got no answer of its own, or one counting another
    prompt; `owner` sent up to `window_s` before `leaked` was and before it was answered."""
    if owner.tenant_id == leaked.tenant_id or not (leaked.sent - window_s <= owner.sent <= leaked.ts):
        return False
    used = leaked.counts[1] if leaked.counts is not None else None
    asked: int | None = getattr(owner, "asked", None)  # a delivery pickled before it has none
    if asked is not None:
        return used == asked
    theirs: Counts | None = getattr(owner, "counts", None)
    return theirs is not None and theirs[0] == used and theirs[1] != theirs[0] and leaked.counts != theirs[::-1]


def lost_answers(
    current: Delivery,
    recent: Sequence[Delivery],
    window_s: float,
    found: Iterable[Finding],
    apart: Callable[[Delivery], bool] | None = None,
    one_answer: Callable[[Delivery, Delivery], bool] | None = None,
) -> list[tuple[Delivery, Delivery]]:
    """(receiver, owner) pairs, `current` one of the two, at most one owner per receiver (a lost answer before a
    miscounted one, then the nearest): a receiver whose usage counts the owner's prompt and not its own, the owner's
    own exchange lost or miscounted (the module docstring). A pair already `found` is not told again, nor one whose
    receiver got a copy of another exchange's answer with that exchange's usage (`copied_usage`). Empty unless the
    ledger and both tenants count alike."""
    receiver = _off(current)  # it may have got another's answer; it, or a lost answer, may have lost its own
    if not (receiver or getattr(current, "asked", None) is not None) or not counting_alike(recent):
        return []  # in the alike regime few exchanges are off or lost: the scans below are rare
    told = {(id(f.leaked), id(f.owner)) for f in found} | {(id(f.owner), id(f.leaked)) for f in found}
    pairs: list[tuple[Delivery, Delivery]] = []
    if receiver:  # current as the receiver: owners sent up to window_s before it
        mine = [
            o for o in _since(recent, current.sent - window_s) if o is not current and _lost_pair(current, o, window_s)
        ]
        mine.sort(key=lambda o: getattr(o, "asked", None) is None)  # stable: the nearest first within each
        pairs += [(current, o) for o in mine[:1]]
    for r in _since(recent, current.sent):  # current as the owner: receivers delivered after it was sent
        if r is not current and _off(r) and _lost_pair(r, current, window_s):
            pairs.append((r, current))
    if apart is not None:
        pairs = [(r, o) for r, o in pairs if apart(o if r is current else r)]
    return [
        (r, o)
        for r, o in pairs
        if (id(r), id(o)) not in told
        and _tenant_alike(r.tenant_id, recent, (r, o))
        and _tenant_alike(o.tenant_id, recent, (r, o))
        and not (one_answer is not None and copied_usage(r, o, recent, window_s, one_answer))
    ]


def copied_usage(
    receiver: Delivery,
    owner: Delivery,
    recent: Sequence[Delivery],
    window_s: float,
    one_answer: Callable[[Delivery, Delivery], bool],
) -> bool:
    """Whether `receiver`'s usage is better explained by another tenant's exchange than by `owner`'s lost answer: one
    that counted its own prompt as the receiver's usage does and whose very answer the receiver got (`one_answer`: the
    same output; a response handed over again carries its usage with it), or one in flight with it that crossed counts
    with it (each usage the other's prompt: ADR 0029's swap, two numbers against one). The domain's ledger finds those
    first; the fleet's, pairing only across domains, would otherwise name a lost request elsewhere that happened to ask
    as many tokens. One number names one request only where no other explains it better."""
    for d in _since(recent, receiver.sent - window_s):
        if d is receiver or d is owner or d.tenant_id == receiver.tenant_id or d.sent > receiver.ts:
            continue
        if (usage_copied(receiver, d)[1] is d and one_answer(receiver, d)) or _crossing(receiver, d):
            return True
    return False


def _since(recent: Sequence[Delivery], ts: float) -> Iterable[Delivery]:
    """The deliveries made at `ts` or after, newest first."""
    for d in reversed(recent):
        if d.ts < ts:
            return
        yield d
