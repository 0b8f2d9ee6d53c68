"""A response that calls a tool its own prompt never names: the answer to another request (docs/adr/0019).

Ingest reads the names (detectors/toolcalls.py): the keyed hashes of the functions an output calls
(`TextFingerprint.tools` of the output print) and of every name-like word of the prompt (the same field of the
prompt print). A model writes a function call only for a function its context declared, and every rendering of a
declaration (a request's `tools`, a system prompt listing them, a ReAct header) writes its name; so a called name
the prompt does not hold is decoded from someone else's context: a misrouted response, a swap, or a cached prefix of
another request. It is a mechanism finding (no source: the name is no one's text), high alone; beside it the content
detector's sources are victims (the verdict's mechanism rule, docs/adr/0008).

Only where the prompts are known to carry declarations. Many producers log a request's messages but not its `tools`
(LiteLLM's messages, OpenTelemetry's `gen_ai.input.messages`): there every tool call reads as undeclared, and judging
them would page on every agent. So the detector learns, per receiving tenant in its domain, how many of the tenant's
own tool calls its prompts declared and how many they did not; it judges a tenant's call only once at least
`tool_calls_min_declared` of them were declared and no more than a quarter as many were not. What counts is each
session's first call of each function: a prompt that re-sends the session's history holds every name called before,
so later calls read as declared whether or not the gateway logs declarations. Every first call counts, a flagged one
too: so a tenant whose gateway stops logging declarations raises at most about a quarter of its declared count before
it is no longer judged. Tenants and first calls are bounded (least recently seen evicted).

Silent (never a signal) when either side is unknown: no prompt text (a producer that sends fingerprints), a prompt
with more than `MAX_NAMES` name-like words, an output that is no tool call or calls only plain-word functions, or a
failed response. A model can hallucinate a function name, and a gateway can cut a prompt before its tool list; both
are stated limits, not tuned away.
"""

from __future__ import annotations

from collections import OrderedDict
from typing import Any

from detectors.settings import DetectionSettings
from detectors.signals.base import DomainFacts
from detectors.signals.words import n
from schemas.alert import Signal
from schemas.exchange import Exchange

__all__ = ["ToolCallDetector", "max_state", "report", "summary"]


_SEEN_PER_TENANT = 4  # first calls remembered, per tenant bound


def max_state(s: DetectionSettings) -> int:
    """The detector's bound (`state_size`): its tenants, and the first calls it remembers for them."""
    return (1 + _SEEN_PER_TENANT) * s.tool_calls_max_tenants


class ToolCallDetector:
    """Per receiving tenant: [declared, undeclared] counts of the first calls of each function in each of its sessions
    (its own 2xx tool calls in this domain)."""

    def __init__(self, settings: DetectionSettings) -> None:
        self.s = settings
        self.tenants: OrderedDict[str, list[int]] = OrderedDict()
        # (tenant, session, called name): the first calls already counted (least recently seen evicted).
        self.seen: OrderedDict[tuple[str, str, int], None] = OrderedDict()

    @staticmethod
    def _sides(ex: Exchange) -> tuple[frozenset[int], frozenset[int]] | None:
        """(calls, prompt names) of a 2xx tool call with both sides known; None otherwise."""
        out, prompt, response = ex.output_print, ex.prompt_print, ex.response
        if out is None or prompt is None or response is None or not 200 <= response.status_code < 300:
            return None
        calls: frozenset[int] | None = out.tools
        declared: frozenset[int] | None = prompt.tools
        if not calls or declared is None:
            return None
        return calls, declared

    def observe(self, ex: Exchange, domain: DomainFacts) -> list[Signal]:
        if not self.s.tool_calls:
            return []
        sides = self._sides(ex)
        if sides is None:
            return []
        calls, declared = sides
        foreign = calls - declared
        if not foreign:
            return []
        record = self.tenants.get(ex.tenant_id)
        if record is None or record[0] < self.s.tool_calls_min_declared or 4 * record[1] > record[0]:
            return []  # this tenant's prompts are not known to carry its declarations
        return [
            Signal(
                name="undeclared_tool_call",
                severity="high",
                score=min(1.0, 0.7 + 0.3 * len(foreign) / len(calls)),
                figures={
                    "tool_calls": len(calls),
                    "undeclared": len(foreign),
                    "prompt_names": len(declared),
                    "declared_before": record[0],
                    "undeclared_before": record[1],
                },
            )
        ]

    def learn(self, ex: Exchange, include_output: bool = True) -> None:
        # A flagged call counts too: were it left out, a tenant whose logging changed would be flagged forever.
        if not self.s.tool_calls:
            return
        sides = self._sides(ex)
        if sides is None:
            return
        calls, declared = sides
        tenant = ex.tenant_id
        tenants, seen = self.tenants, self.seen
        record = tenants.get(tenant)
        if record is None:
            record = tenants[tenant] = [0, 0]
            if len(tenants) > self.s.tool_calls_max_tenants:
                tenants.popitem(last=False)
        else:
            tenants.move_to_end(tenant)
        session = ex.session_id or ""
        for call in sorted(calls):
            # Only a session's first call of a function tells whether the prompts carry declarations: a prompt that
            # re-sends the session's history holds every name called before, declared or not.
            key = (tenant, session, call)
            if key in seen:
                seen.move_to_end(key)
                continue
            seen[key] = None
            if len(seen) > _SEEN_PER_TENANT * self.s.tool_calls_max_tenants:
                seen.popitem(last=False)
            record[0 if call in declared else 1] += 1

    def state_size(self) -> int:
        return len(self.tenants) + len(self.seen)


def summary(f: dict[str, Any]) -> str:
    return f"{f['undeclared']} of {f['tool_calls']} tool calls name no function of the prompt"


def report(f: dict[str, Any]) -> str:
    return (
        f"The response calls {n(f['undeclared'])} of its {n(f['tool_calls'])} functions by a name its own prompt "
        f"never writes ({n(f['prompt_names'])} names in the prompt): a model calls only what its context declares, "
        "so this answer was decoded for another request."
    )
