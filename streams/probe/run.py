"""One probe cycle against an OpenAI-compatible endpoint, with the official `openai` SDK as the client.

1. Read the advertised window from `/v1/models` (`max_model_len`, as vLLM and SGLang report it; or
   `context_window` / `context_length`), unless given.
2. Plant a fresh canary marker per identity and register it (canary events).
3. Walk the ladder of prompt sizes; at each rung every identity sends at once (so there are other
   tenants' pages to leak), streaming, to measure the time to first token.
4. If an answer shows the placeholder mechanism (over-capacity 2xx, accounting, TTFT), confirm it the
   way the researcher did with two accounts: identity B sends a small prompt, then A resends the
   suspect size, and A's output is searched for B's marker.
Every probe becomes request/response events (prompt as keyed fingerprint, canaries listed) for the
monitor, so its alerts, webhooks and traces are the same as for real traffic.
"""

from __future__ import annotations

import asyncio
import itertools
import secrets
import sys
import time
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlparse

import httpx
import openai
import orjson

from detectors.fingerprint import Fingerprinter
from streams.outputs import NullOutput, Output, ValidatedOutput
from streams.probe import http as probe_http
from streams.probe.budget import Budget
from streams.probe.identities import Identity, MarkerBook
from streams.probe.judge import Finding, ProbeResult, judge, suspicious
from streams.probe.ladder import MAX_WINDOW, Rung, build_prompt, count_tokens, ladder
from streams.settings import Settings

PROBE_HEADER = "X-Crosstalk-Probe"  # lets an instrumented engine leave probes to the prober's own events
_WINDOW_FIELDS = ("max_model_len", "context_window", "context_length", "max_context_length", "max_input_tokens")


class CouldNotProbe(Exception):
    """The endpoint could not be probed (down, refused the identities, advertised nothing usable)."""


@dataclass
class CycleReport:
    base_url: str
    model: str | None = None
    window: int | None = None
    pool: int | None = None
    rungs: list[Rung] = field(default_factory=list)
    results: list[ProbeResult] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    budget: Budget | None = None
    events: Counter[str] = field(default_factory=Counter)
    error: str | None = None
    seconds: float = 0.0

    @property
    def answered(self) -> int:
        """Probes the endpoint accepted (2xx): without any, nothing was tested."""
        return sum(r.accepted for r in self.results)

    @property
    def skipped(self) -> int:
        return sum(r.skipped is not None for r in self.results)

    @property
    def cut(self) -> int:
        """Answers accepted but cut short (the per-answer deadline or byte cap): not fully judged."""
        return sum(r.cut is not None for r in self.results)

    @property
    def exit_code(self) -> int:
        if self.findings:
            return 1  # a leak or an unsafe acceptance outranks an incomplete run
        if self.error is not None or self.answered == 0 or self.skipped or self.cut:
            return 2
        return 0

    @property
    def verdict(self) -> str:
        if self.findings:
            kinds = sorted({f.kind for f in self.findings})
            return "LEAK / UNSAFE ACCEPTANCE FOUND: " + ", ".join(kinds)
        if self.error is not None:
            return f"could not probe: {self.error}"
        if self.answered == 0:
            statuses = sorted({str(r.status) for r in self.results if r.status is not None}) or ["none"]
            return f"could not probe: no probe was accepted (HTTP {', '.join(statuses)})"
        if self.skipped:
            return f"incomplete: {self.skipped} probes skipped by the budget (raise --max-tokens / --max-requests)"
        if self.cut:
            return f"incomplete: {self.cut} answers cut short (probe.timeout_s / probe.max_response_bytes)"
        return "clean: no leak, no unsafe acceptance"


def _window_of(card: Any) -> int | None:
    extra = getattr(card, "model_extra", None) or {}
    for name in _WINDOW_FIELDS:
        value = extra.get(name, getattr(card, name, None))
        if isinstance(value, int) and not isinstance(value, bool) and value > 0:
            return value
    return None


def _one_line(exc: BaseException, book: MarkerBook) -> str:
    text = str(getattr(exc, "message", None) or exc)
    return book.redact(" ".join(text.split()))[:200]


class Prober:
    def __init__(
        self,
        settings: Settings,
        base_url: str,
        identities: list[Identity],
        *,
        model: str | None = None,
        window: int | None = None,
        pool: int | None = None,
        output: Output | None = None,
        cache_domain: str | None = None,
        in_process: bool = False,
        on_result: Callable[[ProbeResult, int], None] | None = None,
    ) -> None:
        if len(identities) < 2:
            raise ValueError("a cross-tenant probe needs at least two identities")
        if len({i.tenant for i in identities}) != len(identities):
            raise ValueError("probe identities must be distinct tenants")
        self.settings = settings
        self.s = settings.probe
        self.base_url = base_url.rstrip("/")
        self.identities = identities
        self.model = model
        self.window = window
        self.pool = pool
        det = settings.detection
        self.fingerprinter = Fingerprinter(det.fingerprint_key, det.k, det.w)
        # Prompt fingerprints are only worth sending when the monitor shares the key; without a configured
        # key this process's random one would make them rejects (fingerprint_params) anywhere else.
        self.send_fingerprints = in_process or det.fingerprint_key.configured
        self.book = MarkerBook(self.fingerprinter)
        # Prompts leave as keyed fingerprints only; outputs leave as text, because the monitor's canary scan reads
        # words (they are short: at most `max_output_tokens`).
        self.output = ValidatedOutput(output or NullOutput(), settings)
        self.cache_domain = cache_domain or self.s.cache_domain or urlparse(self.base_url).netloc or self.base_url
        self._seq = itertools.count(1)
        self.run_id = ""
        self.on_result = on_result  # progress: each finished probe, with the number planned so far
        self.fingerprints_left_out = 0  # request events sent without their prompt fingerprint (too large)

    # --- the cycle ---------------------------------------------------------------------------------
    async def run_cycle(self) -> CycleReport:
        s = self.s
        start = time.perf_counter()
        self.run_id = secrets.token_hex(4)
        report = CycleReport(self.base_url, pool=self.pool)
        budget = report.budget = Budget(s.max_requests, s.max_tokens, s.rate_per_s)
        clients = {
            i.tenant: probe_http.client(self.base_url, i.api_key, s.timeout_s, s.max_response_bytes)
            for i in self.identities
        }
        before = Counter(self.output.counts)
        try:
            async with asyncio.timeout(s.deadline_s):  # whatever the endpoint does, the cycle ends
                await self._cycle(clients, report, budget)
        except CouldNotProbe as exc:
            report.error = str(exc)
            report.findings = self._judge(report)
        except TimeoutError:
            report.error = f"the cycle's deadline ({s.deadline_s:g} s, probe.deadline_s) passed before it was done"
            report.findings = self._judge(report)
        finally:
            for c in clients.values():
                await c.close()
            report.events = Counter(self.output.counts) - before
            report.seconds = time.perf_counter() - start
        return report

    async def _cycle(self, clients: dict[str, openai.AsyncOpenAI], report: CycleReport, budget: Budget) -> None:
        report.model, report.window = await self._discover(clients[self.identities[0].tenant])
        self._emit_pool(report)
        self._plant()
        report.rungs = ladder(report.window, self.s.ladder, self.pool)
        for rung in report.rungs:
            batch = await asyncio.gather(
                *(self._send(clients, i, rung.tokens, rung.label, "ladder", report, budget) for i in self.identities)
            )
            report.results.extend(batch)
            self._progress(report, batch)
            self._check_reachable(batch)
        report.findings = self._judge(report)
        await self._confirm(clients, report, budget)
        report.findings = self._judge(report)

    async def _discover(self, client: openai.AsyncOpenAI) -> tuple[str, int]:
        try:
            async with asyncio.timeout(self.s.timeout_s):
                page = await client.models.list()
        except TimeoutError:
            raise CouldNotProbe(
                f"GET {self.base_url}/models: no complete answer within {self.s.timeout_s:g} s"
            ) from None
        except openai.APIConnectionError as exc:
            if (big := probe_http.too_large(exc)) is not None:
                raise CouldNotProbe(f"GET {self.base_url}/models: {big}") from None
            raise CouldNotProbe(
                f"{self.base_url} is unreachable ({_one_line(exc.__cause__ or exc, self.book)})"
            ) from None
        except openai.APIStatusError as exc:
            raise CouldNotProbe(f"GET {self.base_url}/models answered {exc.status_code}") from None
        except Exception as exc:  # the SDK on a non-OpenAI answer (HTML, plain text): not a crash, exit 2
            raise CouldNotProbe(f"GET {self.base_url}/models: unreadable answer ({type(exc).__name__})") from None
        cards = list(page.data)
        card = next((c for c in cards if c.id == self.model), None) if self.model else (cards[0] if cards else None)
        if card is None and self.model is None:
            raise CouldNotProbe(f"{self.base_url}/models lists no model; pass --model and --window")
        model = self.model or card.id  # type: ignore[union-attr]
        window = self.window or (_window_of(card) if card is not None else None)
        if window is None:
            raise CouldNotProbe(f"{self.base_url}/models advertises no context window for {model}; pass --window")
        if window > MAX_WINDOW:
            # Prompts are built from the window: 10^15 would be a prompt no budget should even build.
            raise CouldNotProbe(
                f"context window of {window:,} tokens for {model} is beyond what the probe believes "
                f"({MAX_WINDOW:,}); pass --window"
            )
        return model, window

    def _plant(self) -> None:
        now = time.time()
        for ident in self.identities:
            marker = self.book.plant(ident.tenant, self.s.marker_prefix)
            self.output.send(
                [
                    {
                        "type": "canary",
                        "event_id": f"probe-{self.run_id}-canary-{ident.tenant}",
                        "ts": now,
                        "tenant_id": ident.tenant,
                        "marker": marker,
                    }
                ]
            )

    def _progress(self, report: CycleReport, batch: list[ProbeResult]) -> None:
        if self.on_result is not None:
            planned = max(len(report.results), len(report.rungs) * len(self.identities))
            for r in batch:
                self.on_result(r, planned)

    def _check_reachable(self, batch: list[ProbeResult]) -> None:
        for r in batch:
            if r.status in (401, 403):
                raise CouldNotProbe(f"the endpoint refused identity {r.tenant} ({r.status}): check its API key")
        sent = [r for r in batch if r.skipped is None]
        if sent and all(r.status is None for r in sent):
            raise CouldNotProbe(f"{self.base_url} stopped answering ({sent[0].error})")

    def _judge(self, report: CycleReport) -> list[Finding]:
        if report.window is None:
            return []
        return [f for r in report.results for f in judge(r, self.s, report.window, self.pool)]

    async def _confirm(self, clients: dict[str, openai.AsyncOpenAI], report: CycleReport, budget: Budget) -> None:
        """Two-identity confirmation of the placeholder mechanism at the smallest suspect size."""
        assert report.window is not None
        suspect = [r for r in report.results if suspicious(judge(r, self.s, report.window, self.pool))]
        if not suspect:
            return
        size = min(r.sent_tokens for r in suspect)
        label = next(r.rung for r in suspect if r.sent_tokens == size)
        primer_size = report.rungs[0].tokens
        ids = self.identities
        for k, victim in enumerate(ids):
            receiver = ids[(k + 1) % len(ids)]
            primer = await self._send(clients, victim, primer_size, report.rungs[0].label, "primer", report, budget)
            report.results.append(primer)
            confirm = await self._send(clients, receiver, size, label, "confirm", report, budget)
            report.results.append(confirm)
            self._progress(report, [primer, confirm])
            self._check_reachable([primer, confirm])

    # --- one probe ---------------------------------------------------------------------------------
    async def _send(
        self,
        clients: dict[str, openai.AsyncOpenAI],
        ident: Identity,
        tokens: int,
        rung: str,
        phase: str,
        report: CycleReport,
        budget: Budget,
    ) -> ProbeResult:
        s = self.s
        rid = f"probe-{self.run_id}-{next(self._seq)}"
        result = ProbeResult(rid, ident.tenant, rung, tokens, phase)
        # The budget first: a prompt is built only once its tokens are paid for (an advertised window of
        # 10^15 must never become a prompt being built).
        if not budget.reserve(tokens + s.max_output_tokens):
            result.skipped = "budget"
            return result
        text = build_prompt(tokens, self.book.current(ident.tenant), secrets.token_hex(8), s.marker_every)
        result.sent_tokens = sent = count_tokens(text)
        await budget.pace()
        self._emit_request(rid, ident, text, sent, report)
        t0 = time.monotonic()
        parts: list[str] = []
        finish = await self._answer(clients[ident.tenant], text, report, result, parts, t0)
        del text  # only its fingerprint travels on
        result.duration_s = time.monotonic() - t0
        output = "".join(parts)
        result.foreign_markers = self.book.foreign(ident.tenant, output)
        if result.status is not None:
            self._emit_response(result, output, finish, report.model)
        return result

    async def _answer(
        self,
        client: openai.AsyncOpenAI,
        text: str,
        report: CycleReport,
        result: ProbeResult,
        parts: list[str],
        t0: float,
    ) -> str | None:
        """Send the probe and read its answer within probe.timeout_s (all of it, not per read) and the byte
        cap; an answer cut short keeps its status and what arrived, marked `cut`. Returns finish_reason."""
        s = self.s
        finish: str | None = None
        try:
            async with asyncio.timeout(s.timeout_s):
                stream = await client.chat.completions.create(
                    model=report.model or "",
                    messages=[{"role": "user", "content": text}],
                    max_tokens=s.max_output_tokens,
                    stream=True,
                    stream_options={"include_usage": True},
                    extra_headers={PROBE_HEADER: "1"},
                )
                result.status = stream.response.status_code
                async for chunk in stream:
                    if chunk.usage is not None:
                        result.usage_prompt_tokens = chunk.usage.prompt_tokens
                        result.usage_output_tokens = chunk.usage.completion_tokens
                    for choice in chunk.choices:
                        if choice.delta is not None and choice.delta.content:
                            if result.ttft_s is None:
                                result.ttft_s = time.monotonic() - t0
                            parts.append(choice.delta.content)
                        finish = choice.finish_reason or finish
        except TimeoutError:
            why = f"no complete answer within {s.timeout_s:g} s (probe.timeout_s)"
        except openai.APIStatusError as exc:
            result.status = exc.status_code
            result.error = _one_line(exc, self.book)
            return finish
        except (openai.APIConnectionError, openai.APITimeoutError, httpx.HTTPError) as exc:
            big = probe_http.too_large(exc)
            why = str(big) if big else _one_line(exc.__cause__ or exc, self.book) or type(exc).__name__
        except Exception as exc:  # an answer the SDK cannot read: reported with the probe, the run goes on
            why = f"{type(exc).__name__}: {_one_line(exc, self.book)}"
        else:
            return finish
        self._cut(result, why)
        return finish

    @staticmethod
    def _cut(result: ProbeResult, why: str) -> None:
        """An answer that started (a status) and did not end is cut; one that never started, failed."""
        if result.status is None:
            result.error = why
        else:
            result.cut = result.error = why

    # --- events ------------------------------------------------------------------------------------
    def _emit_request(self, rid: str, ident: Identity, text: str, sent: int, report: CycleReport) -> None:
        event: dict[str, Any] = {
            "type": "request",
            "event_id": f"{rid}-q",
            "ts": time.time(),
            "request_id": rid,
            "tenant_id": ident.tenant,
            "model": report.model or "",
            "prompt_tokens": sent,
            "cache_domain": self.cache_domain,
            "max_output_tokens": self.s.max_output_tokens,
            "canaries": [self.book.current(ident.tenant)],
        }
        if self.send_fingerprints:
            fingerprint = self._prompt_fingerprint(text, sent)
            if fingerprint is not None:
                event["prompt_fingerprint"] = fingerprint
        if report.window is not None:
            event["context_window"] = report.window
        self.output.send([event])

    def _prompt_fingerprint(self, text: str, tokens: int) -> dict[str, Any] | None:
        """The prompt's fingerprint, or None when it cannot travel: more hashes than the contract takes (a window
        of millions of tokens), or an event over `ingest.max_event_bytes`. The request still goes out without it
        (issue 42: such requests were not sent at all, so a replay of the events saw only orphaned answers and
        not the overlong acceptance the probe itself judged). The prober's prompts are filler and markers: their
        fingerprints matter little, their sizes and the markers (in `canaries`) are the judgement."""
        try:
            fingerprint = self.fingerprinter.fingerprint(text).model_dump(mode="json")
        except ValueError:  # pydantic's ValidationError: past the contract's bound on hashes
            fingerprint = None
        room = self.settings.ingest.max_event_bytes - 4096  # the rest of the request event is well under this
        if fingerprint is not None and len(orjson.dumps(fingerprint)) <= room:
            return fingerprint
        self.fingerprints_left_out += 1
        if self.fingerprints_left_out == 1:
            print(
                f"crosstalk probe: prompts of {tokens:,} tokens and more go out without their fingerprint "
                "(larger than ingest.max_event_bytes allows); their sizes and markers are sent",
                file=sys.stderr,
            )
        return None

    def _emit_pool(self, report: CycleReport) -> None:
        """What the probe knows of the pool (--metrics-url, --pool-tokens) as the domain's cache_stats, so that
        the monitor fed these events can judge overlong acceptance too (issue 26: probe -> replay gave no
        overlong_accepted). A size, not a reading of use: used_tokens is 0."""
        if not self.pool:
            return
        event: dict[str, Any] = {
            "type": "cache_stats",
            "event_id": f"probe-{self.run_id}-pool",
            "ts": time.time(),
            "cache_domain": self.cache_domain,
            "role": "prefill",
            "capacity_tokens": self.pool,
            "used_tokens": 0,
        }
        if report.model:
            event["model"] = report.model
        if report.window is not None:
            event["context_window"] = report.window
        self.output.send([event])

    def _emit_response(self, r: ProbeResult, output: str, finish: str | None, model: str | None) -> None:
        event: dict[str, Any] = {
            "type": "response",
            "event_id": f"{r.request_id}-r",
            "ts": time.time(),
            "request_id": r.request_id,
            "tenant_id": r.tenant,
            "model": model or "",
            "cache_domain": self.cache_domain,
            "status_code": r.status,
            "duration_ms": round((r.duration_s or 0.0) * 1000, 3),
        }
        if r.accepted:
            event["output_text"] = output
            event["finish_reason"] = finish
            if r.usage_prompt_tokens is not None:
                event["usage"] = {"input_tokens": r.usage_prompt_tokens, "output_tokens": r.usage_output_tokens}
            if r.ttft_s is not None:
                event["ttft_ms"] = round(r.ttft_s * 1000, 3)
        self.output.send([event])

    def close(self) -> None:
        self.output.close()
