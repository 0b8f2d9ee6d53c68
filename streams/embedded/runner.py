"""The embedded runner: events from files (or a generator) through the detection core to sinks, in-process.

Same core as the Faust workers; no broker. Used by `crosstalk replay` and `crosstalk demo`.
"""

from __future__ import annotations

import logging
import time
from collections import Counter
from collections.abc import Callable, Iterable, Iterator
from dataclasses import dataclass, field

from detectors.back import new_holds
from detectors.front import weak_canaries
from detectors.incidents import Incident
from detectors.monitor import Monitor, Observed
from detectors.ordering import FUTURE_TS, EventClock
from detectors.pipeline import whole
from schemas.alert import Alert, IncidentResolved
from schemas.events import Event, EventError
from streams.inputs.corpus import load_public
from streams.inputs.files import LineReader, Parsed, Rejects, StopFlag, in_event_time_order
from streams.settings import Settings
from streams.sinks.base import ByteOut, Sink, SinkSet

log = logging.getLogger("crosstalk.embedded")
HOLD_LOG = (
    "domain %s is cold: %d content-only finding(s) held, judged %.0f s after their response (%d waiting, %d in all)"
)


@dataclass
class RunResult:
    events: Counter[str] = field(default_factory=Counter)
    rejects: Counter[str] = field(default_factory=Counter)
    warnings: Counter[str] = field(default_factory=Counter)  # events kept with a part dropped (weak_canary)
    alerts: list[Alert] = field(default_factory=list)
    counters: Counter[str] = field(default_factory=Counter)
    state_size: dict[str, int] = field(default_factory=dict)
    bytes_in: int = 0
    seconds: float = 0.0
    monitor: Monitor | None = None
    lines_in: int = 0  # non-blank input lines read (files only): each one processed or rejected
    input_errors: list[str] = field(default_factory=list)  # inputs that ended early (truncated gzip, ...)
    interrupted: bool = False  # stopped by SIGINT; what was read was processed and flushed
    run_id: str = ""  # also on every line this run wrote to the rejects file
    merged_incidents: list[Incident] | None = None  # a run split into jobs (streams/embedded/jobs.py): theirs
    jobs_cpu_s: list[float] = field(default_factory=list)  # and each job's CPU time

    @property
    def events_total(self) -> int:
        return sum(self.events.values())

    def incidents(self) -> list[Incident]:
        if self.monitor is not None:
            return self.monitor.incidents()
        return list(self.merged_incidents or [])


class EmbeddedRunner:
    _refused: tuple[str, str] | None = None  # the last reject (reason, detail): feed_checked reads it
    _leads = False  # whether the core keeps its leads for the sinks (`record_leads`)

    def __init__(
        self,
        settings: Settings,
        sinks: Iterable[Sink] = (),
        rejects_out: ByteOut | None = None,
        on_progress: Callable[[int], None] | None = None,
        owns: Callable[[str], bool] | None = None,
    ) -> None:
        """`owns`: the cache domains this runner judges (a job of a split replay, streams/embedded/jobs.py)."""
        self.settings = settings
        self.result = RunResult()
        # A failing sink is counted in the run's counters (sink_errors.*) and does not stop the run.
        self.sinks = SinkSet(sinks, self.result.counters)
        self.rejects = Rejects(rejects_out, listener=self.sinks.on_reject)
        self.monitor = whole(settings.detection, public=load_public(settings), owns=owns)
        self.result.monitor = self.monitor
        self._progress = Counter[str]()
        self._readers: list[LineReader] = []
        self._stop = StopFlag()
        self._wall_clock = time.time
        self._live_clock = EventClock(settings.detection.max_future_skew_s)
        # What the rejects file keeps of a refused live event (no line came with it): the event re-encoded,
        # unless the live source says less (the OTLP receiver: ids, a size and a hash; streams.embedded.output)
        self.evidence: Callable[[Event], bytes] = lambda event: event.model_dump_json().encode()
        self._on_progress = on_progress
        self._holds_logged: dict[str, int] = {}  # cache domain -> its holds logged so far (`tick`)
        self.sinks.set_state_size_source(self.monitor.state_size)

    def _emit(self, observed: Observed) -> None:
        """Exchanges first, then alerts: the order in which the sinks heard of them when the core called
        back mid-observe."""
        sinks = self.sinks
        for exchange, alerts in observed.evaluated:
            sinks.on_exchange(exchange, alerts)
        for alert in observed.alerts if len(observed.alerts) < 2 else one_events_order(observed):
            self.result.alerts.append(alert)
            sinks.on_alert(alert)
        if self._leads:
            for lead in self.monitor.take_leads():
                sinks.on_lead(lead)

    def record_leads(self) -> None:
        """Have the core keep what it judges below an alert, for the sinks' `on_lead` (a replay's --leads-out)."""
        self.monitor.record_leads()
        self._leads = True

    def _tell_resolved(self, resolutions: list[IncidentResolved]) -> None:
        for resolution in resolutions:
            self.sinks.on_resolved(resolution)

    def feed(self, event: Event, source: str = "-", line: int | None = None, raw: bytes | None = None) -> list[Alert]:
        """One validated event from a live source (demo, OTLP receiver) through the core; a reject goes to
        the rejects file. Live, event time is bounded by the wall clock: an event more than
        `detection.max_future_skew_s` ahead of it is rejected (`future_ts`) and moves nothing."""
        detail = self._live_clock.admit(event.ts, self._wall_clock())
        if detail is not None:
            self.reject(source, line, FUTURE_TS, detail, raw if raw is not None else self.evidence(event))
            return []
        return self._observe(event, source, line, raw)

    def feed_checked(self, event: Event, source: str = "-") -> tuple[str, str] | None:
        """feed(), returning what the core refused of the event as (reason, detail), or None if it took it:
        a live source (the OTLP receiver) tells its sender which spans were not taken, and why."""
        self._refused = None
        self.feed(event, source)
        return self._refused

    def _observe(self, event: Event, source: str, line: int | None, raw: bytes | None = None) -> list[Alert]:
        try:
            observed = self.monitor.observe_evaluated(event)
        except EventError as exc:
            self.reject(source, line, exc.reason, exc.detail, raw if raw is not None else self.evidence(event))
            return []
        except Exception as exc:  # a bug must not stop a replay of millions of lines: dead-letter, count, go on
            raw = raw if raw is not None else self.evidence(event)
            self.reject(source, line, "internal_error", f"{type(exc).__name__}: {exc}", raw)
            return []
        self.result.events[event.type] += 1
        weak = weak_canaries(event, self.result.counters)
        if weak is not None:
            self.rejects.warn(source, line, "weak_canary", weak, event.event_id)
        self.sinks.on_event(event.type)
        self._emit(observed)
        if observed.resolved:
            self._tell_resolved(observed.resolved)
        return observed.alerts

    def tick(self, now: float) -> list[Alert]:
        """The live runner's clock (UNIX s; the OTLP receiver calls it about once a second): exchanges waiting for a
        later instant and held findings due by `now` come out with no further input (`Monitor.tick`, issue 40), and
        each new hold is logged once."""
        observed = self.monitor.tick_evaluated(now)
        alerts = observed.alerts
        if alerts or observed.evaluated:
            self._emit(observed)
        self._log_holds()
        return alerts

    def _log_holds(self) -> None:
        hold_s = self.settings.detection.overlap_hold_s
        for name, new, waiting, total in new_holds(self.monitor.domains, self._holds_logged):
            log.info(HOLD_LOG, name, new, hold_s, waiting, total)

    def reject(self, source: str, line: int | None, reason: str, detail: str, raw: bytes) -> None:
        self._refused = (reason, detail)
        self.rejects.add(source, line, reason, detail, raw)

    def run_files(self, paths: list[str], format: str = "jsonl") -> RunResult:
        """Replay files in event-time order; returns once all input is processed and flushed.

        format: jsonl (crosstalk events) or otlp-json (OTLP/JSON trace exports, one per line; lines that
        are crosstalk events pass through, e.g. engine cache_stats next to the spans)."""
        decode = None
        if format == "otlp-json":
            from streams.inputs.otlp import otlp_json_decoder

            decode = otlp_json_decoder(self.settings)
        max_bytes = self.settings.ingest.max_event_bytes
        # No log line comes from the future: the wall clock bounds event time in replay too (the
        # shell reads it, once; ingest.replay_wall_clock=false turns that bound off).
        now = self._wall_clock() if self.settings.ingest.replay_wall_clock else None
        skew = self.settings.detection.max_future_skew_s
        readers = [
            LineReader(p, self.rejects, max_bytes, self._progress, decode, max_skew_s=skew, now=now, stop=self._stop)
            for p in paths
        ]
        self._readers = readers
        return self.run_parsed(
            in_event_time_order(readers, self.settings.ingest.reorder_lateness_s, self.result.counters)
        )

    def run_parsed(self, parsed: Iterator[Parsed]) -> RunResult:
        start = time.perf_counter()
        last_report = 0
        try:
            for p in parsed:  # judged by the readers already (event time included)
                self._observe(p.event, p.source, p.line)
                if self._on_progress is not None and self._progress["bytes"] - last_report >= 1 << 20:
                    last_report = self._progress["bytes"]
                    self._on_progress(last_report)
        except KeyboardInterrupt:
            # Ctrl-C ends the input, not the run: the readers stop at their next line, the re-sorting
            # buffers drain, and what was read is flushed and reported like a normal end.
            self._stop.set()
            try:
                for p in parsed:
                    self._observe(p.event, p.source, p.line)
            except KeyboardInterrupt:
                pass  # a second Ctrl-C: stop draining, still flush the core
        self.result.interrupted = self._stop.is_set
        return self.finish(start)

    def finish(self, start: float) -> RunResult:
        self._emit(self.monitor.flush_evaluated())
        self._tell_resolved(self.monitor.drain_resolved(self.monitor.watermark))
        self.sinks.close()
        self.rejects.close()
        r = self.result
        r.rejects = self.rejects.counts
        r.warnings = self.rejects.warnings
        r.counters.update(self.monitor.counters)
        r.state_size = self.monitor.state_size()
        r.bytes_in = self._progress["bytes"]
        r.run_id = self.rejects.run_id
        for reader in self._readers:
            r.lines_in += reader.lines
            r.input_errors += reader.errors
        r.seconds = time.perf_counter() - start
        if self._on_progress is not None:
            self._on_progress(r.bytes_in)
        return r


def one_events_order(observed: Observed) -> list[Alert]:
    """What one event raised, in one order that `replay --jobs` gives too (streams/embedded/jobs.py `_Outbox`): the
    alerts of orphaned halves by event time and request id (as the join releases them), then the rest by cache domain,
    each domain's in the order it raised them. One event can release several domains' exchanges of one instant."""
    orphans = {id(a): (ex.ts, ex.request_id) for ex, alerts in observed.evaluated if ex.orphan for a in alerts}

    def key(alert: Alert) -> tuple[int, float, str]:
        orphan = orphans.get(id(alert))
        return (0, *orphan) if orphan is not None else (1, 0.0, alert.cache_domain)

    return sorted(observed.alerts, key=key)
