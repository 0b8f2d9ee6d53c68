"""What one probe's answer means: the prober's findings, computed from figures only (no I/O).

- `canary_leak`: another identity's marker in this identity's output (names both, by keyed marker id).
- `overlong_accepted`: a prompt above the advertised window, or above the prefill pool when its size
  is known, answered 2xx.
- `token_accounting_mismatch`: usage.prompt_tokens off from what was sent by more than the tolerance.
- `impossible_prefill`: time to first token implying a prefill faster than any hardware.
Any finding is exit code 1.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from detectors.signals import registry
from streams.settings import ProbeSettings


@dataclass
class ProbeResult:
    request_id: str
    tenant: str
    rung: str
    sent_tokens: int
    phase: str = "ladder"  # ladder | confirm | primer
    status: int | None = None  # None: no HTTP answer
    error: str | None = None  # one line, never the prompt
    usage_prompt_tokens: int | None = None
    usage_output_tokens: int | None = None
    ttft_s: float | None = None
    duration_s: float | None = None
    foreign_markers: list[tuple[str, str]] = field(default_factory=list)  # (owner tenant, marker id)
    skipped: str | None = None  # why not sent (budget)
    cut: str | None = None  # why an accepted answer was not read to its end (deadline, byte cap)

    @property
    def accepted(self) -> bool:
        return self.status is not None and 200 <= self.status < 300


@dataclass(frozen=True)
class Finding:
    kind: str
    tenant: str  # the identity that got the suspect answer
    request_id: str
    sent_tokens: int
    detail: str
    source_tenant: str | None = None
    marker_id: str | None = None


def judge(r: ProbeResult, s: ProbeSettings, window: int, pool: int | None) -> list[Finding]:
    if not r.accepted:
        return []
    out: list[Finding] = []
    for owner, marker_id in r.foreign_markers:
        out.append(
            Finding(
                "canary_leak",
                r.tenant,
                r.request_id,
                r.sent_tokens,
                f"{r.tenant}'s output contains canary marker {marker_id} planted by {owner}",
                source_tenant=owner,
                marker_id=marker_id,
            )
        )
    limit, what = (pool, "prefill pool") if pool is not None and pool < window else (window, "advertised window")
    if r.sent_tokens > limit:
        out.append(
            Finding(
                "overlong_accepted",
                r.tenant,
                r.request_id,
                r.sent_tokens,
                f"{r.sent_tokens:,}-token prompt above the {what} ({limit:,}) answered {r.status}",
            )
        )
    if r.usage_prompt_tokens is not None and r.sent_tokens >= s.accounting_min_tokens:
        ratio = r.usage_prompt_tokens / r.sent_tokens
        if ratio < 1 / s.accounting_tolerance or ratio > s.accounting_tolerance:
            out.append(
                Finding(
                    "token_accounting_mismatch",
                    r.tenant,
                    r.request_id,
                    r.sent_tokens,
                    f"sent ~{r.sent_tokens:,} prompt tokens, "
                    f"endpoint reported usage.prompt_tokens={r.usage_prompt_tokens:,}",
                )
            )
    if r.ttft_s is not None and r.sent_tokens >= s.ttft_min_tokens:
        rate = r.sent_tokens / r.ttft_s if r.ttft_s > 0 else float("inf")
        if rate > s.max_prefill_tokens_per_s:
            out.append(
                Finding(
                    "impossible_prefill",
                    r.tenant,
                    r.request_id,
                    r.sent_tokens,
                    f"first token after {r.ttft_s * 1000:.1f} ms for {r.sent_tokens:,} tokens "
                    f"(> {s.max_prefill_tokens_per_s:,.0f} tokens/s)",
                )
            )
    return out


def suspicious(findings: list[Finding]) -> bool:
    """Whether an answer shows the placeholder mechanism (worth a two-identity confirmation)."""
    mechanism = registry.mechanism_signals()  # as the monitor's verdict declares them
    return any(f.kind in mechanism for f in findings)
