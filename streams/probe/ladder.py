"""Prompt sizes to probe, and the prompts themselves.

Token counting (stated, since the prober has no tokenizer of the endpoint's model): a prompt is built
from whitespace-separated words, and the prober counts **one token per word**. The filler words are
short common English words, which BPE tokenizers encode as one token each (with the leading space);
a canary marker costs a real tokenizer ~15-20 tokens instead of 1, and one sits every `marker_every`
(64) words, so a real endpoint reports up to ~1.3x the prober's count. Accounting is flagged only
beyond `accounting_tolerance` (2x) either way, which this approximation stays well inside, while a
one-token placeholder for a 10,000-word prompt is off by 10,000x.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

# The largest context window the probe believes: 16.8 M tokens, above every advertised window today (10 M).
# Prompts are sized from the window; a larger claim (an endpoint advertising 10^15) is refused, not probed.
MAX_WINDOW = 2**24

# Shared by every identity on purpose: real tenants share system prompts, and an engine whose prefix
# cache confuses prompts that merely start alike (prefix-collision) is found exactly this way.
PREAMBLE = "You are a helpful assistant. Read the notes below and repeat them back verbatim."
_FILLER_TEXT = (
    "the of and to in is it you that he was for on are as with his they at be this from have or by one had not "
    "but what all were when we there can an your which their said if do will each about how up out them then she "
    "many some so these would other into has more her two like him see time could no make than first been its who "
    "now people my made over did down only way find use may water long little very after words called just where "
    "most know get through back much go good new write our me man too any day same right look think also around "
    "another came come work three word must because does part even place well such here take why things help put "
    "years different away again off went old number great tell men say small every found still between name "
    "should home big give air line set own under read last never us left end along while might next sound below "
    "saw something thought both few those always looked show large often together asked house world going want"
)
_FILLER = _FILLER_TEXT.split()


@dataclass(frozen=True)
class Rung:
    tokens: int
    label: str


def ladder(window: int, fractions: list[float], pool: int | None = None) -> list[Rung]:
    """Sizes from well below the (suspected) prefill pool to above the advertised window, ascending.

    With a known pool size: 1/8 and 1/2 of it, just below and above it, halfway to the window, just
    below and above the window. Without: the configured fractions of the window.
    """
    if pool is not None and 0 < pool < window:
        rungs = [
            Rung(pool // 8, "pool/8"),
            Rung(pool // 2, "pool/2"),
            Rung(int(pool * 0.9), "0.9 pool"),
            Rung(int(pool * 1.1), "1.1 pool"),
            Rung((pool + window) // 2, "(pool+window)/2"),
            Rung(int(window * 0.98), "0.98 window"),
            Rung(int(window * 1.05) + 1, "1.05 window"),
        ]
    else:
        rungs = [Rung(max(1, int(window * f)), f"{f:g} window") for f in sorted(fractions)]
    seen: set[int] = set()
    out = []
    for r in sorted(rungs, key=lambda r: r.tokens):
        if r.tokens >= 16 and r.tokens not in seen:
            seen.add(r.tokens)
            out.append(r)
    return out


def build_prompt(tokens: int, marker: str, nonce: str, marker_every: int) -> str:
    """A prompt of exactly `tokens` words: the shared preamble, a per-request nonce (so no two probes
    share more than the preamble), then filler with the identity's marker every `marker_every` words."""
    words = PREAMBLE.split()
    head = [*words, f"probe-{nonce}", marker]
    if tokens <= len(head):
        return " ".join(head[:tokens])
    rng = random.Random(nonce)
    body = rng.choices(_FILLER, k=tokens - len(head))
    for i in range(marker_every - len(head) % marker_every, len(body), marker_every):
        body[i] = marker
    return " ".join(head) + " " + " ".join(body)


def count_tokens(text: str) -> int:
    """The prober's token count of a prompt it built (see the module docstring)."""
    return len(text.split())
