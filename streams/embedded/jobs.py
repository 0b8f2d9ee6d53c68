"""`crosstalk replay --jobs N`: one replay split across N processes by cache domain, with the alerts of one.

Cache domains are independent: a domain's verdicts read only its own index, records and incidents. What is shared
is event time (orphaned halves, idle domains and incidents move with it), the joins of request and response, the
duplicate ids and the canary markers. So every job reads every line, in the same event-time order as one process
would, and runs the same Monitor over all of them, but:
* it judges only its own domains (`Monitor(owns=...)`, CRC-32 of the domain modulo N), which is where the work is;
* it judges other jobs' exchanges not at all, but its fleet record learns them (`DomainTable.hear`, detectors/fleet.py:
  what the model writes is learned over every domain), so a job pays reading, decoding, fingerprinting and joining
  for all events but detection for its own only. With the fleet record off (`common_min_sessions = 0`) it validates
  other jobs' events without their text, never fingerprinted.
Event time, joins, duplicates, markers and the fleet record therefore move in every job exactly as in one process (at
the default `domain_lateness_s` of 0), and each domain sees
the same exchanges in the same order: the alerts are those of `--jobs 1` (tests/embedded/test_jobs.py).

A request is judged where its response's domain is (`Exchange.cache_domain`): the parent reads the input once before
the jobs start (`prepass.py`; regular files only: stdin or a pipe cannot be read twice) for the requests whose
response names another domain than they do; such a request keeps its text in both domains' jobs (it is judged in
its own if its response comes too late).

Each line's rejects are written by one job (its domain's; job 0 for what names none or cannot be decoded). The
parent merges the jobs' alerts in input order (the index of the event that raised them, the same in every job), hands
them to the sinks, and shows one progress bar: the slowest job's position in the input.
"""

from __future__ import annotations

import heapq
import multiprocessing as mp
import os
import time
import traceback
import zlib
from collections import Counter
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field, replace
from queue import Empty
from typing import Any

import orjson

from detectors.incidents import Incident
from schemas.alert import Alert, IncidentResolved, Lead
from schemas.events import Event, parse_event
from schemas.exchange import Exchange
from streams.embedded.prepass import moved_requests, not_rereadable
from streams.embedded.runner import EmbeddedRunner, RunResult
from streams.inputs.files import LineReader, Parsed, Rejects, in_event_time_order
from streams.settings import Settings
from streams.sinks.base import ByteOut, Sink, SinkSet

TEXT_FIELDS = ("prompt_text", "output_text")
_DOMAIN_EVENTS = ("request", "response", "cache_stats")
_BATCH_S = 0.2  # a job reports at most this often (and at the end)
_FLUSH = float("inf")  # the index of the end of input: alerts of the final flush come last
# Counters every job counts alike (each sees every event): taken from job 0, not summed.
_GLOBAL_COUNTERS = ("events.", "exchanges", "orphans.", "late")
# State sizes every job holds alike.
_GLOBAL_STATE = ("pending_joins", "dedup_ids", "canaries")


def job_of(domain: str, jobs: int) -> int:
    return zlib.crc32(domain.encode()) % jobs


class Partition:
    """Which job owns (writes the rejects of) a line, and which jobs fingerprint its text."""

    def __init__(self, job: int, jobs: int, moved: dict[str, str], max_bytes: int, keep_text: bool = False) -> None:
        self.job = job
        self.jobs = jobs
        self.moved = moved
        self.max_bytes = max_bytes
        # The fleet record learns every domain's exchanges (detectors/fleet.py): then every job fingerprints all text.
        self.keep_text = keep_text
        self._owns: dict[str, bool] = {}

    def owns(self, domain: str) -> bool:
        got = self._owns.get(domain)
        if got is None:
            if len(self._owns) > 100_000:  # junk domains: the map is a cache
                self._owns.clear()
            got = self._owns[domain] = job_of(domain, self.jobs) == self.job
        return got

    def _domains(self, obj: dict[str, Any]) -> tuple[str | None, str | None]:
        """(the domain that owns the line, another domain whose job needs its text too)."""
        kind = obj.get("type")
        if kind not in _DOMAIN_EVENTS:
            return None, None
        dom = obj.get("cache_domain")
        dom = dom if type(dom) is str else None
        if kind == "request":
            rid = obj.get("request_id")
            judged = self.moved.get(rid) if type(rid) is str else None
            if judged is not None:
                return judged, dom  # an orphan request is judged in its own domain
        return dom, None

    def owner(self, raw: bytes) -> int:
        try:
            obj = orjson.loads(raw)
        except orjson.JSONDecodeError:
            return 0
        if type(obj) is not dict:
            return 0
        dom, _ = self._domains(obj)
        return 0 if dom is None else job_of(dom, self.jobs)

    def parse(self, line: bytes) -> Event:
        """parse_event, except that another job's event is validated without its text (the same decision: a text
        is valid when it is a string or null; anything else is left to the full validation)."""
        try:
            obj = orjson.loads(line)
        except orjson.JSONDecodeError:
            return parse_event(line, max_bytes=self.max_bytes)
        if type(obj) is not dict:
            return parse_event(line, max_bytes=self.max_bytes)
        texts = [f for f in TEXT_FIELDS if obj.get(f) is not None]
        if self.keep_text or not texts or any(type(obj[f]) is not str for f in texts):
            return parse_event(line, max_bytes=self.max_bytes)
        dom, also = self._domains(obj)
        if (dom is not None and self.owns(dom)) or (also is not None and self.owns(also)):
            return parse_event(line, max_bytes=self.max_bytes)
        for f in texts:
            del obj[f]
        return parse_event(orjson.dumps(obj), max_bytes=self.max_bytes)


class _JobRejects(Rejects):
    """A job's rejects: only the lines it owns (`Partition.owner`), written into the job's outbox."""

    part: Partition

    def add(self, source: str, line: int | None, reason: str, detail: str, raw: bytes, **kw: Any) -> None:
        if self.part.owner(raw) == self.part.job:
            super().add(source, line, reason, detail, raw, **kw)


class _Lines:
    def __init__(self) -> None:
        self.lines: list[bytes] = []

    def write(self, data: bytes) -> int:
        self.lines.append(data)
        return len(data)

    def flush(self) -> None:
        pass


class _Outbox(Sink):
    """What a job's runner hands its sinks, kept for the parent with where one process would have emitted it: the
    index of the input event that raised it, then the order one process gives what one event raises in several
    domains (orphaned halves by event time and request id, as the join releases them; at the end of input, the
    domains' own flushes by name)."""

    def __init__(self, exchanges: bool) -> None:
        self.exchanges = exchanges
        self.pending: list[tuple[tuple[Any, ...], str, Any]] = []
        self.items: list[tuple[float, tuple[Any, ...], str, Any]] = []
        self.types: Counter[str] = Counter()
        self.reject_reasons: list[tuple[str, str]] = []
        self._orphans: dict[int, tuple[float, str]] = {}  # id(alert) -> its orphan exchange's (ts, request_id)

    def on_event(self, type: str) -> None:
        self.types[type] += 1

    def on_exchange(self, exchange: Exchange, alerts: list[Alert]) -> None:
        key: tuple[Any, ...] = (0, exchange.ts, exchange.request_id) if exchange.orphan else (1, 0.0, "")
        for alert in alerts:
            if exchange.orphan:
                self._orphans[id(alert)] = key[1:]
        if self.exchanges:  # the fingerprints stay here: no sink reads them
            bare = replace(exchange, prompt_print=None, output_print=None)
            self.pending.append(((0, *key), "exchange", (bare, alerts)))

    def on_alert(self, alert: Alert) -> None:
        orphan = self._orphans.pop(id(alert), None)
        key = (0, *orphan) if orphan is not None else (1, 0.0, alert.cache_domain)
        self.pending.append(((1, *key), "alert", alert))

    def on_resolved(self, resolution: IncidentResolved) -> None:
        self.pending.append(((2,), "resolved", resolution))

    def on_reject(self, reason: str, detail: str) -> None:
        self.reject_reasons.append((reason, detail))

    def on_lead(self, lead: Lead) -> None:
        # After the event's alerts, as one process emits them; its domains' leads by name.
        self.pending.append(((3, lead.cache_domain), "lead", lead))

    def seal(self, seq: float) -> None:
        if not self.pending:  # most events raise nothing
            self._orphans.clear()
            return
        # Within one event, the domains' alerts by name, as one process emits them (runner.py `one_events_order`).
        self.items += [(seq, key, kind, item) for key, kind, item in self.pending]
        self.pending = []
        self._orphans.clear()


@dataclass
class _Done:
    events: Counter[str]
    rejects: Counter[str]
    counters: Counter[str]
    state_size: dict[str, int]
    bytes_in: int
    lines_in: int
    input_errors: list[str]
    interrupted: bool
    incidents: list[Incident]
    cpu_s: float  # the job's own CPU time


@dataclass
class _Job:
    process: Any
    seq: float = float("-inf")  # every input event up to this index is done
    bytes: int = 0
    done: _Done | None = None
    error: str | None = None
    types: Counter[str] = field(default_factory=Counter)


def _run_job(
    job: int, jobs: int, settings: Settings, paths: list[str], fmt: str, moved: dict[str, str], now: float | None,
    run_id: str, exchanges: bool, queue: Any, leads: bool = False,
) -> None:  # fmt: skip
    try:
        _job_body(job, jobs, settings, paths, fmt, moved, now, run_id, exchanges, queue, leads)
    except BaseException:  # the parent must hear of it, whatever it is
        queue.put(("error", job, traceback.format_exc()))


def _job_body(
    job: int, jobs: int, settings: Settings, paths: list[str], fmt: str, moved: dict[str, str], now: float | None,
    run_id: str, exchanges: bool, queue: Any, leads: bool = False,
) -> None:  # fmt: skip
    part = Partition(job, jobs, moved, settings.ingest.max_event_bytes, settings.detection.common_min_sessions > 0)
    outbox = _Outbox(exchanges)
    lines = _Lines()
    runner = EmbeddedRunner(settings, [outbox], owns=part.owns)
    if leads:
        runner.record_leads()
    rejects = _JobRejects(lines, listener=outbox.on_reject, run_id=run_id)
    rejects.part = part
    runner.rejects = rejects
    decode = None
    if fmt == "otlp-json":
        from streams.inputs.otlp import otlp_json_decoder

        decode = otlp_json_decoder(settings)
    skew = settings.detection.max_future_skew_s
    readers = [
        LineReader(p, rejects, settings.ingest.max_event_bytes, runner._progress, decode, max_skew_s=skew, now=now,
                   stop=runner._stop, parse=part.parse if decode is None else None)
        for p in paths
    ]  # fmt: skip
    runner._readers = readers
    last = time.monotonic()

    def send(seq: float) -> None:
        queue.put(("batch", job, seq, runner._progress["bytes"], outbox.items, lines.lines, outbox.reject_reasons,
                   outbox.types))  # fmt: skip
        outbox.items, lines.lines, outbox.reject_reasons, outbox.types = [], [], [], Counter()

    def tagged(parsed: Iterator[Parsed]) -> Iterator[Parsed]:
        nonlocal last
        for p in parsed:
            yield p
            outbox.seal(p.seq)
            if time.monotonic() - last >= _BATCH_S:
                last = time.monotonic()
                send(p.seq)

    ordered = in_event_time_order(readers, settings.ingest.reorder_lateness_s, runner.result.counters)
    result = runner.run_parsed(tagged(ordered))
    outbox.seal(_FLUSH)
    send(_FLUSH)
    queue.put(("done", job, _Done(result.events, result.rejects, result.counters, result.state_size,
                                  result.bytes_in, result.lines_in, result.input_errors, result.interrupted,
                                  runner.monitor.incidents(), time.process_time())))  # fmt: skip


def _merge_counters(dones: list[_Done]) -> Counter[str]:
    out: Counter[str] = Counter()
    for i, d in enumerate(dones):
        for key, n in d.counters.items():
            if key.startswith(_GLOBAL_COUNTERS):
                if i == 0:
                    out[key] = n
            else:
                out[key] += n
    return out


def _merge_state(dones: list[_Done]) -> dict[str, int]:
    out: Counter[str] = Counter()
    for i, d in enumerate(dones):
        for key, n in d.state_size.items():
            if key in _GLOBAL_STATE:
                if i == 0:
                    out[key] = n
            else:
                out[key] += n
    return dict(out)


class JobsError(RuntimeError):
    """A job failed: its traceback, or how it ended."""


class Jobs:
    """A replay split into `jobs` processes. `start()` forks them: call it before anything starts a thread (sinks,
    a progress bar), as a forked child holds only the thread that forked it. Then `run()` merges what they send."""

    def __init__(self, settings: Settings, paths: list[str], jobs: int, format: str = "jsonl") -> None:
        if "-" in paths:
            raise ValueError("--jobs needs files: standard input can be read only once")
        once = not_rereadable(paths)
        if once is not None:  # the pre-pass would drain a pipe and leave the jobs nothing (issue 42)
            raise ValueError(f"--jobs needs regular files: {once} can be read only once")
        self.settings, self.paths, self.jobs, self.format = settings, paths, jobs, format
        self.run_id = Rejects(None).run_id
        self.started = time.perf_counter()
        self.queue: Any = None
        self.state: list[_Job] = []

    def start(self, exchanges: bool, leads: bool = False) -> None:
        """`exchanges`: whether a sink reads the evaluated exchanges (OpenTelemetry spans); else only alerts come.
        `leads`: whether the jobs keep the core's leads for the sinks' `on_lead` (a replay's --leads-out)."""
        max_bytes = self.settings.ingest.max_event_bytes
        moved = moved_requests(self.paths, max_bytes) if self.format == "jsonl" else {}
        now = time.time() if self.settings.ingest.replay_wall_clock else None
        ctx = mp.get_context("fork")  # the jobs share the parent's imports and the map of moved requests
        self.queue = ctx.Queue(maxsize=64)
        for j in range(self.jobs):
            args = (
                j,
                self.jobs,
                self.settings,
                self.paths,
                self.format,
                moved,
                now,
                self.run_id,
                exchanges,
                self.queue,
                leads,
            )
            proc = ctx.Process(target=_run_job, args=args, name=f"crosstalk-replay-job-{j}", daemon=True)
            self.state.append(_Job(proc))
            proc.start()

    def run(
        self, sinks: list[Sink], rejects_out: ByteOut | None = None, on_progress: Callable[[int], None] | None = None
    ) -> RunResult:
        """Merge the jobs' output into one run's: alerts in input order to the sinks, rejects to `rejects_out`."""
        result = RunResult()
        sinkset = SinkSet(sinks, result.counters)
        state, queue = self.state, self.queue
        procs = [s.process for s in state]
        heap: list[tuple[float, tuple[Any, ...], int, int, str, Any]] = []
        n = 0

        def release(upto: float) -> None:
            while heap and heap[0][0] <= upto:
                *_, kind, item = heapq.heappop(heap)
                _hand(sinkset, result, kind, item)

        try:
            while any(s.done is None for s in state):
                try:
                    msg = _receive(queue, state)
                except KeyboardInterrupt:
                    # Ctrl-C reached the jobs too: each ends its input there, flushes and reports as one run does.
                    continue
                if msg[0] == "error":
                    raise JobsError(f"replay job {msg[1]} failed:\n{msg[2]}")
                job = state[msg[1]]
                if msg[0] == "done":
                    job.done = msg[2]
                    continue
                _, j, seq, nbytes, items, lines, reasons, types = msg
                for item_seq, key, kind, item in items:
                    n += 1
                    heapq.heappush(heap, (item_seq, key, j, n, kind, item))
                if rejects_out is not None:
                    for line in lines:
                        rejects_out.write(line)
                for reason, detail in reasons:
                    sinkset.on_reject(reason, detail)
                if j == 0:
                    for typ, count in types.items():
                        for _ in range(count):
                            sinkset.on_event(typ)
                job.seq, job.bytes = seq, nbytes
                release(min(s.seq for s in state))
                if on_progress is not None:
                    on_progress(min(s.bytes for s in state))
        finally:
            for p in procs:
                if p.is_alive() and any(s.done is None or s.error for s in state):
                    p.terminate()
                p.join()
        release(_FLUSH)
        sinkset.close()
        if rejects_out is not None:
            rejects_out.flush()
        dones = [s.done for s in state if s.done is not None]
        first = dones[0]
        result.events = first.events
        result.rejects = sum((d.rejects for d in dones), Counter())
        result.counters.update(_merge_counters(dones))
        result.state_size = _merge_state(dones)
        result.state_size["jobs"] = self.jobs
        result.bytes_in, result.lines_in, result.input_errors = first.bytes_in, first.lines_in, first.input_errors
        result.interrupted = any(d.interrupted for d in dones)
        result.run_id = self.run_id
        result.merged_incidents = sorted(
            (i for d in dones for i in d.incidents), key=lambda i: (i.first_ts, i.incident_id)
        )
        result.jobs_cpu_s = [d.cpu_s for d in dones]
        result.seconds = time.perf_counter() - self.started
        if on_progress is not None:
            on_progress(result.bytes_in)
        return result


def _hand(sinks: SinkSet, result: RunResult, kind: str, item: Any) -> None:
    """One item a job kept, to the sinks, as one process would have handed it."""
    if kind == "alert":
        result.alerts.append(item)
        sinks.on_alert(item)
    elif kind == "exchange":
        sinks.on_exchange(*item)
    elif kind == "lead":
        sinks.on_lead(item)
    else:
        sinks.on_resolved(item)


def _receive(queue: Any, state: list[_Job]) -> tuple[Any, ...]:
    """The next message; a job that died without a word (killed, out of memory) is an error, not a hang."""
    while True:
        try:
            return queue.get(timeout=1.0)  # type: ignore[no-any-return,unused-ignore]
        except Empty:
            for j, s in enumerate(state):
                if s.done is None and not s.process.is_alive() and queue.empty():
                    raise JobsError(f"replay job {j} ended with exit code {s.process.exitcode}") from None


def default_jobs() -> int:
    return len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
