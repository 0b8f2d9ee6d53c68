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
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from itertools import islice
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from detectors.mixup import Delivery, Finding
    from schemas.exchange import Exchange

_RECENT = 64  # deliveries read for the regime, newest first
_MIN_KNOWN = 32  # of them with both counts known, at least
_EXACT = 0.9  # share of those whose two counts agree to the token

Counts = tuple[int, int]  # (the gateway's count of the prompt, the engine's input tokens in its usage)
# The findings whose two deliveries each got the other's answer: both are raised, each naming the other.
BOTH_WAYS = frozenset({"swap", "counts"})


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
    out = []
    for o in others:
        theirs = getattr(o, "counts", None)
        if theirs is None or theirs[0] == mine[0] or any(o is x for x in swapped):
            continue
        # A late digest (the fleet's) is checked against later deliveries: the two must have been in flight together.
        if mine[1] == theirs[0] and theirs[1] == mine[0] and o.sent <= current.ts and current.sent <= o.ts:
            out.append(o)
    return out if out and counting_alike(recent) else []
