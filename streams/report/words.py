"""Evidence in words: each signal of an alert as one sentence a security lead can read aloud.

`name_of` decides how another tenant is named (the operator's report names them; a tenant's own
notification may pseudonymise them), and `private=False` leaves out figures that belong to another
tenant (their request and session ids).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from detectors.signals.registry import raises_of
from detectors.signals.words import n, pct  # the formats every signal's declared words share

NameOf = Callable[[str | None], str]


def _ids(ids: Any, limit: int = 6) -> str:
    ids = [str(i) for i in (ids or [])]
    head = ", ".join(ids[:limit])
    return head + (f" and {len(ids) - limit} more" if len(ids) > limit else "")


def _plain(name: str) -> str:
    return name.replace("_", " ")


def describe(
    name: str,
    figures: dict[str, Any],
    source_tenant_id: str | None,
    *,
    name_of: NameOf,
    private: bool = True,
) -> str:
    """One sentence for one signal. Unknown signals fall back to 'name: figure = value, …'."""
    f = figures
    try:
        declared = raises_of(name)
        if declared is not None and declared.report is not None:  # the signal's own words, where it is registered
            return declared.report(f)
        if name == "cache_pressure":
            return f"The prefill KV cache was {pct(f['used_share'])} full at the time."
        if name == "capacity_gap":
            return (
                f"The advertised context window ({n(f['context_window'])} tokens) is larger than the prefill pool "
                f"({n(f['prefill_capacity_tokens'])}) by {n(f['gap_tokens'])} tokens: prompts in that gap "
                "cannot be prefilled whole."
            )
        if name == "canary_leak":
            return (
                f"A canary marker (id {f.get('marker_id', '?')}) planted by {name_of(source_tenant_id)} appeared "
                "in this response."
            )
        if name in ("cross_tenant_contamination", "cross_session_contamination"):
            matched = (
                f"{n(f['matched_fingerprints'])} of the response's {n(f['output_fingerprints'])} text "
                f"fingerprints ({pct(f['matched_share'])}, longest run {n(f['longest_run'])})"
            )
            if name == "cross_tenant_contamination":
                origin = f"recent prompts or outputs of {name_of(source_tenant_id)}"
            else:
                origin = "another session of the same tenant"
                if private and f.get("source_session_id"):
                    origin += f" ({f['source_session_id']})"
            text = f"{matched} match {origin}"
            if private and f.get("source_request_ids"):
                text += f", from request {_ids(f['source_request_ids'])}"
            if f.get("corroborated"):
                text += "; corroborated by the serving-path signals"
            elif f.get("whole_sentences"):
                text += (
                    "; only whole sentences of that text, as a model writes a text it knows: a lead, not a disclosure"
                )
            return text + "."
    except (KeyError, TypeError):
        pass  # figures of another version: the generic sentence below still says everything
    shown = {k: v for k, v in f.items() if private or k not in ("source_request_ids", "source_session_id")}
    parts = ", ".join(f"{_plain(k)} = {n(v) if not isinstance(v, list) else _ids(v)}" for k, v in shown.items())
    return f"{_plain(name).capitalize()}: {parts}." if parts else f"{_plain(name).capitalize()}."
