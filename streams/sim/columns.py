"""The whole evaluation's figures (scripts/evaluate_all.py): its table's columns, and issue 39's targets among them.

Time to detect is judged per leak episode (streams/sim/episodes.py): warm episodes against the 60-s target, every one
flagged high; cold ones reported beside it and bounded in the README. A run's first leak to its first high alert
(`delay_s`) is kept as it was measured before, for the before column, and judged no more.
"""

from __future__ import annotations

# (figure, label, higher is worse, kind): kind "rate" = count / clean_2xx, "per10k", "share", "s", "n" (a count)
COLUMNS: list[tuple[str, str, bool, str]] = [
    ("false_high", "false high+ (≤ 0.05 %)", True, "rate"),
    ("false_warning", "false warning+ (≤ 0.3 %)", True, "rate"),
    ("false_incidents", "false incidents /10k (≤ 1)", True, "per10k"),
    ("false_incidents_by_alert", "…counted by alert severity", True, "per10k"),
    ("unpaged_incidents", "leak incidents not paged", True, "n"),
    ("incident_delay_s", "delay, first leak alert → incident high", True, "s"),
    ("exposure", "exposure (≥ 97 %)", False, "share"),
    ("content_only", "content-only (≥ 95 %)", False, "share"),
    ("class:whole_response", "whole response (≥ 95 %)", False, "share"),
    ("class:worst", "the worst leak class (≥ 95 %)", False, "share"),
    ("class:prefix_collision", "prefix-cache collision", False, "share"),
    ("class:spliced_page", "spliced page", False, "share"),
    ("class:cross_session", "cross-session", False, "share"),
    ("class:stale_kv_abort", "stale KV after an abort", False, "share"),
    ("class:misroute", "misrouted whole response", False, "share"),
    ("class:swap", "two whole responses swapped", False, "share"),
    ("class:interleave", "interleaved stream chunks", False, "share"),
    ("class:page_splice", "spliced page (v2)", False, "share"),
    ("class:stale_kv", "stale KV (v2)", False, "share"),
    ("class:placeholder_stale_kv", "stale KV behind a placeholder (v3, v4)", False, "share"),
    ("class:connection_desync", "a pooled connection's answer read by the next request (v3)", False, "share"),
    ("class:response_cache_collision", "a response cache not scoped per tenant (v3)", False, "share"),
    ("class:stream_interleave", "two streams' chunks interleaved (v3)", False, "share"),
    ("class:prefix_hash_collision", "prefix-cache hash collision (v3)", False, "share"),
    ("class:pd_kv_misdelivery", "KV transfer to the wrong decode slot (v3)", False, "share"),
    ("class:session_history_mixup", "another session's history (v3)", False, "share"),
    ("class:prefix_block_shared", "prefix-cache blocks shared across tenants (v4)", False, "share"),
    ("class:stream_splice", "another stream's tokens spliced in (v4)", False, "share"),
    ("class:response_cache_unscoped", "a response cache without tenant scope (v4)", False, "share"),
    ("class:conversation_key_collision", "another session's conversation loaded (v4)", False, "share"),
    ("class:draft_slot_bleed", "a speculative draft slot not reset (v4)", False, "share"),
    ("class:tool_result_misroute", "another tenant's tool result (v4)", False, "share"),
    ("class:batch_offset_shift", "batch results joined by offset (v4)", False, "share"),
    ("class:kv_handoff_mismatch", "KV handed to the wrong decode request (v4)", False, "share"),
    ("attribution", "attribution (≥ 95 %)", False, "share"),
    ("attribution_cjk_source", "CJK-source attribution (within 3 points)", False, "share"),
    ("attribution_cjk_receiver", "CJK-receiver attribution (within 3 points)", False, "share"),
    ("delay_s", "delay, a run's first leak → first high", True, "s"),
    ("ttd_warm_s", "time to detect, warm episode (≤ 60 s)", True, "s"),
    ("episodes_warm_missed", "warm episodes never flagged high (0)", True, "n"),
    ("ttd_cold_s", "time to detect, cold episode (bounded)", True, "s"),
    ("episodes_cold_missed", "cold episodes never flagged high", True, "n"),
    ("late_warm_s", "longest wait of a flagged leak for its alert, warm", True, "s"),
    ("late_cold_s", "longest wait of a flagged leak for its alert, cold", True, "s"),
    ("ttp_warm_s", "time to page, warm episode (incident high)", True, "s"),
    ("episodes_warm_unpaged", "warm episodes never paged", True, "n"),
    ("ttp_cold_s", "time to page, cold episode", True, "s"),
    ("episodes_cold_unpaged", "cold episodes never paged", True, "n"),
]

# The targets (issue 39): (figure, bound, higher is worse).
TARGETS = {"false_high": 0.0005, "false_warning": 0.003, "false_incidents": 1.0, "exposure": 0.97,
           "content_only": 0.95, "class:whole_response": 0.95, "class:misroute": 0.95, "class:swap": 0.95,
           "class:worst": 0.95, "attribution": 0.95,
           "ttd_warm_s": 60.0, "episodes_warm_missed": 0.0}  # fmt: skip

# Targets relative to another figure of the same profile: "attribution ≥ 95 %, with CJK receivers and CJK sources
# each within 3 points" (issue 39), each worst-of figure against the profile's worst-of attribution.
RELATIVE = {"attribution_cjk_source": ("attribution", 0.03), "attribution_cjk_receiver": ("attribution", 0.03)}
