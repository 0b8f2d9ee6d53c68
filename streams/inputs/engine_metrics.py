"""Engine KV-cache metrics (Prometheus exposition text) -> absolute pool capacity and use, per engine.

Pure: text in, numbers out. Parsed with prometheus_client's own parser (the library both engines
use to expose them). The names, checked against the engines' sources (docs/adr/0005-telemetry-inputs.md):

SGLang (python/sglang/srt/metrics/collector.py, metrics_collector.py; v0.4 - v0.5):
  capacity  ``sglang:max_total_num_tokens``   gauge, tokens the KV pool holds
  used      ``sglang:num_used_tokens``        gauge, tokens in use; else ``sglang:token_usage`` (0-1) x capacity
  window    ``sglang:context_len``            gauge (when /v1/models gives no max_model_len)

  reuse     ``sglang:cache_hit_rate``         gauge 0-1, the last prefill batch's cached share; and the counters
            ``sglang:cached_tokens_total`` / ``sglang:prompt_tokens_total`` (tokens, since start)
  pools     ``sglang:swa_token_usage``, ``sglang:mamba_usage`` (0-1, hybrid models' other pools)
  hand-off  ``sglang:num_{prefill_prealloc,prefill_inflight,decode_prealloc,decode_transfer}_queue_reqs``,
            ``sglang:kv_transfer_latency_ms``; with ``sglang:utilization`` (-1 on a prefill server) they give
            the role (`sglang_role`)

vLLM (vllm/v1/metrics/loggers.py, vllm/config/cache.py; V1 engine, >= 0.8):
  capacity  ``vllm:cache_config_info``        info gauge (value 1), one label per CacheConfig field: the
            engine's own group-aware ``kv_cache_size_tokens`` when it is there (hybrid models: the product
            below is wrong), else ``num_gpu_blocks`` x ``block_size``
  used      ``vllm:kv_cache_usage_perc``      gauge 0-1 (>= 0.10); ``vllm:gpu_cache_usage_perc`` before (deprecated)
  reuse     ``vllm:prefix_cache_hits_total`` / ``vllm:prefix_cache_queries_total`` counters, in tokens
  window    /v1/models ``max_model_len``

The reuse, pool and hand-off figures are optional: one that is missing is None, one that is nonsense is
None with a note (`PoolReading.dropped`), and neither costs the capacity reading.

Several series of one metric (data-parallel ranks, engines) are separate pools: a prompt must fit
into one of them, so the reading is conservative: the smallest capacity and the highest used share.
"""

from __future__ import annotations

import math
from collections import defaultdict
from dataclasses import dataclass, replace
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

Labels = tuple[tuple[str, str], ...]
# Bounds of a believable token count (capacity, window, used): 2^40 is 1.1 T tokens, a thousand times the
# largest KV pool or context window any engine reports today. Past it, or not a whole number, the reading
# is nonsense (+Inf, 1e308, NaN, a capacity of 0.5) and must never become a published limit.
MAX_TOKENS = 2**40
# The metric families each engine mapping reads: only their lines are kept from a streamed body.
# Counters (tokens since the engine started) are bounded as the contract bounds counts.
MAX_COUNT = 2**53
SGLANG_PREFILL_QUEUES = ("sglang:num_prefill_prealloc_queue_reqs", "sglang:num_prefill_inflight_queue_reqs")
SGLANG_DECODE_QUEUES = ("sglang:num_decode_prealloc_queue_reqs", "sglang:num_decode_transfer_queue_reqs")
_SGLANG_COUNTERS = ("sglang:cached_tokens", "sglang:prompt_tokens")
_VLLM_COUNTERS = ("vllm:prefix_cache_hits", "vllm:prefix_cache_queries")
NEEDED = {
    "sglang": frozenset(
        {
            "sglang:max_total_num_tokens",
            "sglang:num_used_tokens",
            "sglang:token_usage",
            "sglang:context_len",
            "sglang:cache_hit_rate",
            "sglang:swa_token_usage",
            "sglang:mamba_usage",
            "sglang:utilization",
            "sglang:kv_transfer_latency_ms",
            *SGLANG_PREFILL_QUEUES,
            *SGLANG_DECODE_QUEUES,
            *_SGLANG_COUNTERS,
            *(f"{c}_total" for c in _SGLANG_COUNTERS),
        }
    ),
    "vllm": frozenset(
        {
            "vllm:cache_config_info",
            "vllm:kv_cache_usage_perc",
            "vllm:gpu_cache_usage_perc",
            *_VLLM_COUNTERS,
            *(f"{c}_total" for c in _VLLM_COUNTERS),
        }
    ),
}


@dataclass(frozen=True, slots=True)
class PoolReading:
    capacity_tokens: int
    used_tokens: int
    model: str | None = None
    context_window: int | None = None
    series: int = 1  # pools (label sets) the reading summarises
    # Optional figures (None: not exposed by this engine or version).
    prefix_cache_hits: int | None = None  # tokens served from the prefix cache, since start
    prefix_cache_queries: int | None = None  # tokens looked up in it, since start
    cache_hit_rate: float | None = None  # SGLang: the last prefill batch's cached share
    swa_usage: float | None = None
    mamba_usage: float | None = None
    handoff_queue_reqs: int | None = None  # PD: requests waiting in the prefill->decode hand-off queues
    kv_transfer_latency_ms: float | None = None
    role: str | None = None  # derived from the engine's own metrics (sglang_role), None: they do not tell
    dropped: tuple[str, ...] = ()  # optional figures that were nonsense, with why


class MetricsError(ValueError):
    """The exposition text parses but lacks what the engine mapping needs, or holds a value that is no token
    count; `reason` is a short label (unparseable, missing_metric, no_capacity, too_large)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason
        self.detail = detail


def _show(value: object) -> str:
    if isinstance(value, int) and value.bit_length() > 64:
        return f"an integer of {value.bit_length()} bits"  # str() of a huge int is itself a hazard
    return repr(value)[:40]


def tokens(name: str, value: float, *, minimum: int = 0, reason: str = "unparseable") -> int:
    """A whole token count in minimum..MAX_TOKENS, else MetricsError(reason) naming the value."""
    if isinstance(value, bool):
        ok = False
    elif isinstance(value, int):
        ok = minimum <= value <= MAX_TOKENS
    else:
        ok = isinstance(value, float) and math.isfinite(value) and value.is_integer()
        ok = ok and minimum <= value <= MAX_TOKENS
    if not ok:
        raise MetricsError(reason, f"{name} {_show(value)} is not a whole token count in {minimum}..2^40")
    return int(value)


def used_count(name: str, value: float) -> float:
    """Tokens in use: finite, 0..2^40 (a fraction is tolerated: it only rounds the published use)."""
    if not math.isfinite(value) or not 0 <= value <= MAX_TOKENS:
        raise MetricsError("unparseable", f"{name} {_show(value)} is not a token count in 0..2^40")
    return value


def share(name: str, value: float) -> float:
    """A usage share: finite and not negative; above 1 (a transient overcommit) counts as full."""
    if not math.isfinite(value) or value < 0:
        raise MetricsError("unparseable", f"{name} {_show(value)} is not a usage share")
    return min(value, 1.0)


def _as_float(value: float) -> float:
    try:
        return float(value)
    except OverflowError:  # the parser gives a 400-digit integer as an int: past every bound all the same
        return math.inf if value > 0 else -math.inf


def samples(text: str) -> dict[str, list[tuple[dict[str, str], float]]]:
    """Sample name -> [(labels, value)]; raises MetricsError(reason=unparseable) on bad exposition text."""
    out: dict[str, list[tuple[dict[str, str], float]]] = defaultdict(list)
    try:
        for fam in text_string_to_metric_families(text):
            for s in fam.samples:
                out[s.name].append((dict(s.labels), _as_float(s.value)))
    except (ValueError, IndexError, TypeError, KeyError, AttributeError) as exc:
        # prometheus_client's parser raises these on malformed lines (fuzzed: tests/inputs/test_scrape_fuzz.py)
        raise MetricsError("unparseable", f"exposition text: {exc}"[:300]) from None
    return out


class ExpositionFilter:
    """Keeps, from exposition text fed in pieces as it streams in, the lines of the families a mapping reads.

    An engine's /metrics is mostly histograms the mappings never read; keeping only the needed lines keeps
    the memory of a scrape flat whatever the body's size (the body's size is capped by the caller). A line
    longer than `max_line` is dropped unread if it belongs to no needed family, and makes the text
    unparseable if it does (a label set of 64 KiB is no engine's).
    """

    def __init__(self, names: frozenset[str], max_line: int = 65536) -> None:
        self.names = names
        self.max_line = max_line
        self._keep: list[bytes] = []
        self._partial = b""
        self._skipping = False  # inside an overlong line of another family: drop until its end
        self.error: MetricsError | None = None

    def _wanted(self, line: bytes) -> bool:
        if line.startswith(b"#"):
            parts = line.split(None, 3)
            if len(parts) < 3 or parts[1] not in (b"HELP", b"TYPE"):
                return False  # a comment the parser ignores
            return parts[2].decode("utf-8", "replace") in self.names
        head = line.split(b"{", 1)[0].split(None, 1)
        return bool(head) and head[0].decode("utf-8", "replace") in self.names

    def feed(self, chunk: bytes) -> None:
        if self.error is not None:
            return
        lines = (self._partial + chunk).split(b"\n")
        self._partial = lines.pop()
        for i, line in enumerate(lines):
            if self._skipping and i == 0:
                self._skipping = False
                continue
            if self._wanted(line):
                if len(line) > self.max_line:
                    self.error = MetricsError("unparseable", f"a line of {len(line):,} bytes in a needed family")
                    return
                self._keep.append(line)
        if len(self._partial) > self.max_line:
            if self._skipping or not self._wanted(self._partial[: self.max_line]):
                self._skipping, self._partial = True, b""
            else:
                self.error = MetricsError("unparseable", f"a line of over {self.max_line:,} bytes in a needed family")

    def text(self) -> str:
        """The kept lines; raises the MetricsError met on the way."""
        if self.error is not None:
            raise self.error
        tail = [] if self._skipping or not self._wanted(self._partial) else [self._partial]
        return (b"\n".join([*self._keep, *tail]) + b"\n").decode("utf-8", "replace")


def _pool_key(labels: dict[str, str], drop: tuple[str, ...] = ()) -> Labels:
    return tuple(sorted((k, v) for k, v in labels.items() if k not in drop))


def _combine(pools: list[tuple[int, float]], model: str | None, window: int | None) -> PoolReading:
    """(capacity, used share) per pool -> the conservative reading: smallest capacity, highest used share."""
    pools = [(c, u) for c, u in pools if c > 0]
    if not pools:
        raise MetricsError("no_capacity", "every pool reports capacity 0 (engine not initialised yet?)")
    capacity = min(c for c, _ in pools)
    used_share = max(u for _, u in pools)
    return PoolReading(capacity, round(used_share * capacity), model, window, len(pools))


Samples = dict[str, list[tuple[dict[str, str], float]]]


class _Extras:
    """The optional figures of one reading: a nonsense value makes its figure None and leaves a note."""

    def __init__(self, s: Samples) -> None:
        self.s = s
        self.dropped: list[str] = []

    def _values(self, name: str) -> list[float] | None:
        got = self.s.get(name)
        return [v for _, v in got] if got else None

    def share(self, name: str) -> float | None:
        """The highest share over the series (a prompt must fit the fullest pool)."""
        values = self._values(name)
        if values is None:
            return None
        if not all(math.isfinite(v) and 0 <= v <= 1 for v in values):
            self.dropped.append(f"{name}: not a share in 0..1")
            return None
        return max(values)

    def count(self, *names: str) -> int | None:
        """The sum over the series of the first of `names` exposed (a counter's name with or without _total)."""
        values = next((v for v in map(self._values, names) if v is not None), None)
        if values is None:
            return None
        total = math.fsum(values) if all(math.isfinite(v) for v in values) else math.nan
        if not (0 <= total <= MAX_COUNT and float(total).is_integer()):
            self.dropped.append(f"{names[0]}: not a count in 0..2^53")
            return None
        return int(total)

    def amount(self, name: str) -> float | None:
        """The highest non-negative finite value over the series."""
        values = self._values(name)
        if values is None:
            return None
        if not all(math.isfinite(v) and 0 <= v <= 1e12 for v in values):
            self.dropped.append(f"{name}: not a finite non-negative amount")
            return None
        return max(values)


def sglang_role(s: Samples) -> str | None:
    """The role an SGLang server shows in its own metrics, or None when they do not tell.

    A prefill server of a PD pair sets ``sglang:utilization`` to -1 and is the only one with requests in the
    prefill prealloc (bootstrap) or inflight queues; a decode server is the only one with requests in the decode
    prealloc or transfer queues. A unified server has none of these, and neither has a decode server that has
    not been handed a request yet: an idle decode server is indistinguishable from a unified one, so its role
    comes from the settings or from what it showed before (the scraper remembers). Evidence of both roles at
    once is no role (None). The ``engine_type`` label is no help: SGLang writes "unified" whatever the mode."""
    busy = [any(v > 0 for _, v in s.get(name, ())) for name in (*SGLANG_PREFILL_QUEUES, *SGLANG_DECODE_QUEUES)]
    prefill = any(busy[:2]) or any(v == -1 for _, v in s.get("sglang:utilization", ()))
    decode = any(busy[2:])
    if prefill == decode:
        return None
    return "prefill" if prefill else "decode"


def sglang_reading(text: str) -> PoolReading:
    s = samples(text)
    caps = s.get("sglang:max_total_num_tokens")
    if not caps:
        raise MetricsError("missing_metric", "sglang:max_total_num_tokens not exposed (is --enable-metrics on?)")
    used = {_pool_key(lb): used_count("sglang:num_used_tokens", v) for lb, v in s.get("sglang:num_used_tokens", [])}
    usage = {_pool_key(lb): share("sglang:token_usage", v) for lb, v in s.get("sglang:token_usage", [])}
    pools: list[tuple[int, float]] = []
    for labels, value in caps:
        cap = tokens("sglang:max_total_num_tokens", value)
        key = _pool_key(labels)
        if key in used:
            pools.append((cap, min(used[key] / cap, 1.0) if cap else 0.0))
        elif key in usage:
            pools.append((cap, usage[key]))
        elif len(caps) == 1 and (used or usage):  # differently labelled but unambiguous
            only = next(iter(used.values())) / cap if used and cap else next(iter(usage.values()), 0.0)
            pools.append((cap, min(only, 1.0)))
        else:
            raise MetricsError("missing_metric", "neither sglang:num_used_tokens nor sglang:token_usage")
    model = caps[0][0].get("model_name")
    window = s.get("sglang:context_len")
    base = _combine(pools, model, tokens("sglang:context_len", window[0][1], minimum=1) if window else None)
    x = _Extras(s)
    queues = [x.count(name) for name in (*SGLANG_PREFILL_QUEUES, *SGLANG_DECODE_QUEUES)]
    shown = [q for q in queues if q is not None]
    return replace(
        base,
        prefix_cache_hits=x.count("sglang:cached_tokens_total", "sglang:cached_tokens"),
        prefix_cache_queries=x.count("sglang:prompt_tokens_total", "sglang:prompt_tokens"),
        cache_hit_rate=x.share("sglang:cache_hit_rate"),
        swa_usage=x.share("sglang:swa_token_usage"),
        mamba_usage=x.share("sglang:mamba_usage"),
        handoff_queue_reqs=sum(shown) if shown else None,
        kv_transfer_latency_ms=x.amount("sglang:kv_transfer_latency_ms"),
        role=sglang_role(s),
        dropped=tuple(x.dropped),
    )


def _int_label(labels: dict[str, str], name: str) -> int | None:
    """A count carried as a label; None while vLLM writes "None" (before the KV cache is profiled)."""
    raw = labels.get(name)
    if raw is None or raw.strip() in ("None", ""):
        return None
    try:
        value = float(raw)
    except ValueError:
        raise MetricsError("unparseable", f"cache_config_info {name}={raw[:40]!r} is not a number") from None
    return tokens(f"cache_config_info {name}", value)


def vllm_reading(text: str) -> PoolReading:
    s = samples(text)
    infos = s.get("vllm:cache_config_info")
    if not infos:
        raise MetricsError("missing_metric", "vllm:cache_config_info not exposed")
    usage_name = "vllm:kv_cache_usage_perc" if "vllm:kv_cache_usage_perc" in s else "vllm:gpu_cache_usage_perc"
    usage = s.get(usage_name)
    if not usage:
        raise MetricsError("missing_metric", "neither vllm:kv_cache_usage_perc nor vllm:gpu_cache_usage_perc")
    by_engine = {lb.get("engine", ""): share(usage_name, v) for lb, v in usage}
    pools: list[tuple[int, float]] = []
    for labels, _ in infos:
        engine = labels.get("engine", "")
        pools.append((_vllm_capacity(labels), by_engine.get(engine, max(by_engine.values()))))
    model = usage[0][0].get("model_name")
    x = _Extras(s)
    return replace(
        _combine(pools, model, None),
        prefix_cache_hits=x.count("vllm:prefix_cache_hits_total", "vllm:prefix_cache_hits"),
        prefix_cache_queries=x.count("vllm:prefix_cache_queries_total", "vllm:prefix_cache_queries"),
        dropped=tuple(x.dropped),
    )


def _vllm_capacity(labels: dict[str, str]) -> int:
    """One engine's pool in tokens: vLLM's own group-aware `kv_cache_size_tokens` (vllm/config/cache.py: the
    product "can be wrong for hybrid models where requests occupy multiple KV cache groups"), else, from
    versions without it, num_gpu_blocks x block_size."""
    own = _int_label(labels, "kv_cache_size_tokens")
    if own is not None:
        return own
    blocks, block_size = _int_label(labels, "num_gpu_blocks"), _int_label(labels, "block_size")
    if blocks is None or block_size is None:
        raise MetricsError("no_capacity", "cache_config_info has no kv_cache_size_tokens or num_gpu_blocks yet")
    return tokens("num_gpu_blocks x block_size", blocks * block_size)


READERS = {"sglang": sglang_reading, "vllm": vllm_reading}


def max_model_len(models_json: Any, model: str | None = None) -> tuple[str | None, int | None]:
    """(model id, max_model_len) from an OpenAI-style /v1/models answer (vLLM and SGLang both add the field).

    No field: (id, None). A field that is no token count in 1..2^40 (1e300, "inf", true): MetricsError, so
    that the caller counts it instead of taking the window on trust."""
    data = models_json.get("data") if isinstance(models_json, dict) else None
    if not isinstance(data, list) or not data:
        return None, None
    entry = next((m for m in data if isinstance(m, dict) and m.get("id") == model), None) if model else None
    entry = entry or (data[0] if isinstance(data[0], dict) else {})
    model_id = entry.get("id")
    model_id = model_id[:256] if isinstance(model_id, str) else None
    n = entry.get("max_model_len")
    if n is None:
        return model_id, None
    if isinstance(n, bool) or not isinstance(n, int | float):
        raise MetricsError("models_unparseable", f"max_model_len {str(n)[:40]!r} is not a number")
    return model_id, tokens("max_model_len", n, minimum=1, reason="models_unparseable")
