"""Evidence in words: each signal of an alert as one sentence a security lead can read aloud.

`name_of` decides how another tenant is named (the operator's report names them; a tenant's own
notification may pseudonymise them), and `private=False` leaves out figures that belong to another
tenant (their request and session ids).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

NameOf = Callable[[str | None], str]


def _n(value: Any) -> str:
    if isinstance(value, bool) or value is None:
        return str(value)
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        return f"{value:,.0f}" if abs(value) >= 100 else f"{value:.3g}"
    return str(value)


def _pct(value: Any) -> str:
    try:
        return f"{float(value) * 100:.0f} %"
    except (TypeError, ValueError):
        return str(value)


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
        if name == "overlong_accepted":
            return (
                f"The prompt had {_n(f['prompt_tokens'])} tokens, {_n(f['excess_tokens'])} more than the prefill "
                f"pool holds ({_n(f['prefill_capacity_tokens'])}), yet it was answered with HTTP {f['status_code']}."
            )
        if name == "token_accounting_mismatch":
            normal = f.get("normal_ratio")
            usual = (
                f" Its usual count for this model and tenant is {_pct(normal)} of the gateway's."
                if isinstance(normal, int | float)
                else ""
            )
            return (
                f"The gateway counted {_n(f['gateway_prompt_tokens'])} prompt tokens; the engine reported "
                f"{_n(f['engine_input_tokens'])}.{usual}"
            )
        if name == "impossible_prefill":
            return (
                f"The first token came after {_n(f['ttft_ms'])} ms for {_n(f['prompt_tokens'])} prompt tokens: "
                f"{_n(f['implied_tokens_per_s'])} tokens/s, above the plausible {_n(f['bound_tokens_per_s'])} tokens/s."
            )
        if name == "cache_pressure":
            return f"The prefill KV cache was {_pct(f['used_share'])} full at the time."
        if name == "capacity_gap":
            return (
                f"The advertised context window ({_n(f['context_window'])} tokens) is larger than the prefill pool "
                f"({_n(f['prefill_capacity_tokens'])}) by {_n(f['gap_tokens'])} tokens: prompts in that gap "
                "cannot be prefilled whole."
            )
        if name == "canary_leak":
            return (
                f"A canary marker (id {f.get('marker_id', '?')}) planted by {name_of(source_tenant_id)} appeared "
                "in this response."
            )
        if name in ("cross_tenant_contamination", "cross_session_contamination"):
            matched = (
                f"{_n(f['matched_fingerprints'])} of the response's {_n(f['output_fingerprints'])} text "
                f"fingerprints ({_pct(f['matched_share'])}, longest run {_n(f['longest_run'])})"
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
    parts = ", ".join(f"{_plain(k)} = {_n(v) if not isinstance(v, list) else _ids(v)}" for k, v in shown.items())
    return f"{_plain(name).capitalize()}: {parts}." if parts else f"{_plain(name).capitalize()}."
