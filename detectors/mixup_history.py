"""A conversation's history swapped for another's: a request that carries an answer delivered to another session.

A chat or agent client re-sends its conversation with every turn, so a turn's prompt holds the answers its session
was given, the latest one above all (a client that trims its history drops the oldest turns first). A history store
keyed wrongly (by user cohort, by a hash that collides, by a session id reused across tenants) sends a turn with
another conversation's history instead, and the model answers from it: the receiver is shown, and its answer
restates, someone else's conversation (the shape of ChatGPT's March 2023 history leak). Content alone calls this an
echo, since the answer quotes the receiver's own prompt. The ledger sees two more witnesses:

- the prompt holds most of an answer delivered earlier to *another* session (its owner), with uncommon text in it
  beyond what that answer quotes of its own prompt (a document both prompts hold is no witness);
- it holds next to none of the answer its own session was given last.

A conversation forked into a new session has no answer of its own yet, and a user who pastes an answer from another
chat still continues their own: neither is concluded. A client that sends no session id is never judged. Same
tenant: a cross-session finding; another tenant: a cross-tenant one. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from typing import TYPE_CHECKING

import numpy as np

from detectors.printsets import held as _held
from detectors.settings import DetectionSettings

if TYPE_CHECKING:
    from detectors.mixup import Delivery

Innocent = Callable[[np.ndarray], np.ndarray]
Apart = Callable[["Delivery"], bool] | None
# At most this share of its own session's latest answer may be in a prompt whose history was swapped: a client that
# keeps its history keeps the latest answer whole, and the replaced history has none of it.
_OWN_LEFT = 0.25
# The least uncommon evidence each half of a carried exchange (the question, the answer) gives: a chat's first turn is
# a sentence or two ("I'm Norma from Hamburg" and "Nice to meet you, Norma! How is Hamburg today?").
_WEAK = 2


def history(
    s: DetectionSettings,
    current: Delivery,
    own: Delivery | None,
    sketches: tuple[Mapping[int, Iterable[Delivery]], ...],
    innocent: Innocent,
    apart: Apart,
) -> tuple[Delivery, int] | None:
    """(the owner of the history `current`'s prompt carries, the uncommon fingerprints witnessing it), or None.

    `own`: the newest delivery of `current`'s session the ledger holds; `sketches`: deliveries by their smallest output
    fingerprints (an answer carried whole in a prompt has them there): the ledger's window, and the conversations'
    latest answers kept past it (detectors/mixup_tails.py). Only searched when the latest answer of the
    session is missing from the prompt, which a client that keeps its history never does: the cost is nil on a
    healthy service."""
    if own is None or not lost_own(s, current, own):
        return None
    best: tuple[Delivery, int] | None = None
    seen: set[int] = set()
    keys = current.prompt.tolist()
    for sketch in sketches:
        for key in keys if len(sketch) else ():
            for other in sketch.get(key, ()):
                if id(other) in seen or other is own:
                    continue
                seen.add(id(other))
                if apart is not None and not apart(other):
                    continue
                n = carried(s, current, other, own, innocent)
                if n and (best is None or n > best[1]):
                    best = (other, n)
    return best


def lost_own(s: DetectionSettings, current: Delivery, own: Delivery | None) -> bool:
    """Whether `current`'s prompt holds next to none of `own`, its session's latest answer (delivered before it was
    sent, with text enough to tell): False for a new session (or a fork), a turn sent before its session's last
    answer came, or a session whose answers are too short to tell."""
    if own is None or own.ts >= current.sent or own.out.size < s.mixup_min_matches:
        return False
    return bool(_held(own.out, current.prompt).sum() <= _OWN_LEFT * own.out.size)


def carried(s: DetectionSettings, current: Delivery, other: Delivery, own: Delivery, innocent: Innocent) -> int:
    """The uncommon fingerprints witnessing that `current`'s prompt carries `other`'s exchange (delivered to another
    session before `current` was sent), or 0. A history is questions and answers: the prompt must hold most of that
    answer and uncommon text of it beyond what it quotes of its own prompt (a document both prompts hold is no
    witness), and uncommon text of that question which its own session had not sent (`own`'s prompt: the system prompt
    and history the session sends anyway). An answer alone in a prompt is a user pasting text the model also wrote
    elsewhere (a licence, a famous text), or a client that builds its history from stock text."""
    if other.ts >= current.sent or (other.tenant_id, other.session_id) == (current.tenant_id, current.session_id):
        return 0
    answer = other.out[_held(other.out, current.prompt)]
    if answer.size < max(_WEAK, s.mixup_copy_share * other.out.size):
        return 0  # not that answer carried whole: a quote of it, or stock text it shares
    answer = answer[~_held(answer, other.prompt)]
    answer = answer[~innocent(answer)] if answer.size >= _WEAK else answer[:0]
    if answer.size < _WEAK:
        return 0
    question = other.prompt[_held(other.prompt, current.prompt)]
    question = question[~_held(question, own.prompt)]
    question = question[~innocent(question)] if question.size >= _WEAK else question[:0]
    if question.size < _WEAK or answer.size + question.size < s.mixup_min_matches:
        return 0
    return int(answer.size + question.size)
