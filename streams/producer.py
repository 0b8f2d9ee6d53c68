"""Publishing events to the input topic: the `GatewayProducer` library, and `produce_file` behind
`crosstalk produce FILE` (streams/cli/produce.py). Also the Kafka clients the shell builds (producer, admin).

Keys decide co-location: request/response by request_id, cache_stats by cache_domain, canary by
tenant. The workers re-key anyway (a producer in another language may get this wrong), but keying
right at the source saves the repartition hop its skew.

With kafka.topology=direct the workers do not re-key: every event is keyed by its cache domain (a
request without one by its response's), canary events go to every partition, and a batch holds the
events of one partition only (streams/kafka/direct.py).
"""

from __future__ import annotations

import time
import zlib
from collections import Counter, OrderedDict
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import Any

import orjson
from kafka import KafkaAdminClient, KafkaProducer
from pydantic import BaseModel

from detectors.edge_words import EdgeWords
from detectors.fingerprint import Fingerprinter
from detectors.settings import DetectionSettings
from schemas.events import NDJSON_CONTENT_TYPE, Event, EventError, Fingerprint, Request, Response, parse_event
from streams.io import bounded_lines, open_binary
from streams.routing import PLACED, domain_key, input_partition_of, routing_key
from streams.settings import KafkaSettings, Settings, load_settings


def make_producer(k: KafkaSettings, **overrides: Any) -> KafkaProducer:
    cfg: dict[str, Any] = {
        "bootstrap_servers": k.bootstrap.split(","),
        "acks": "all",
        "linger_ms": 20,
        "max_request_size": min(k.max_message_bytes, 8 * 1024 * 1024),
        # No retry count: kafka-python retries until delivery_timeout_ms (120 s). Ten retries were spent in about a
        # second while a killed broker's partitions waited ~10 s for a new leader (NotLeaderForPartition), and
        # those events were lost (issue 42, bench/bench_cluster.py: 44 sends in one run).
        # One in-flight request per connection keeps per-partition order across retries.
        "max_in_flight_requests_per_connection": 1,
    }
    cfg.update(overrides)
    return KafkaProducer(**cfg)


def admin_client(bootstrap: str, timeout_s: float = 10.0) -> KafkaAdminClient:
    return KafkaAdminClient(bootstrap_servers=bootstrap.split(","), request_timeout_ms=int(timeout_s * 1000))


# --- producer library for gateways ----------------------------------------------------------------


class GatewayProducer:
    """Validate, fingerprint at the edge, publish; the text itself never leaves the gateway.

    Usage:
        gp = GatewayProducer(settings)
        gp.publish({"type": "request", ...}, traceparent="00-...")   # dict or schemas Event
        gp.flush()

    With kafka.topology=direct every event is keyed by its cache domain: a request that names none is
    held (at most `max_held`, oldest first out) until its response names it, then both go to that
    domain's partition; canary events go to every partition. A request given up on (the bound, or
    `close()`) is sent keyed by its request_id and counted (`counts["unpaired"]`).
    """

    max_held = 10_000

    def __init__(
        self,
        settings: Settings | None = None,
        *,
        producer: KafkaProducer | None = None,
        send_text: bool = False,
        packed: bool = True,
    ) -> None:
        """`packed`: fingerprints in their base64 form (`Fingerprint.hashes_b64`), which a monitor decodes in one pass
        (docs/textrich.md, target 2); False sends JSON lists, for monitors older than the packed form."""
        self.settings = settings or load_settings()
        det: DetectionSettings = self.settings.detection
        self.topic = self.settings.kafka.input_topic
        self.fingerprinter = Fingerprinter(det.fingerprint_key, det.k, det.w)
        # The names a tool check reads (ADR 0019), keyed as the monitor keys them: they go with the print.
        self.words = EdgeWords(self.fingerprinter, det.tool_calls, det.mixup_identifiers)
        self.send_text = send_text  # True only where the monitor is trusted to see raw text
        self.packed = packed
        self.max_bytes = self.settings.ingest.max_event_bytes
        self._producer = producer or make_producer(self.settings.kafka)
        self.counts: Counter[str] = Counter()
        self.direct = self.settings.kafka.topology == "direct"
        self._held: OrderedDict[str, tuple[bytes, list[tuple[str, bytes]]]] = OrderedDict()  # direct: waiting requests

    def _fingerprint(self, text: str, prompt: bool) -> Fingerprint:
        fp = self.fingerprinter.fingerprint(text, self.packed)
        return self.words.attach(fp, text, prompt)

    def prepare(self, event: Mapping[str, Any] | Event) -> tuple[Event, bytes]:
        """Validate and replace text by fingerprints; raises EventError for an invalid event."""
        raw = orjson.dumps(event.model_dump(mode="json") if isinstance(event, BaseModel) else dict(event))
        ev = parse_event(raw, max_bytes=self.max_bytes)
        if not self.send_text:
            if isinstance(ev, Request) and ev.prompt_text is not None:
                ev = ev.model_copy(
                    update={"prompt_fingerprint": self._fingerprint(ev.prompt_text, True), "prompt_text": None}
                )
            elif isinstance(ev, Response) and ev.output_text is not None:
                # Canary scanning needs the words; where text cannot leave the gateway, canaries are
                # matched through their fingerprints by the overlap detector instead.
                ev = ev.model_copy(
                    update={"output_fingerprint": self._fingerprint(ev.output_text, False), "output_text": None}
                )
            raw = ev.model_dump_json(exclude_none=True).encode()
        return ev, raw

    def publish(self, event: Mapping[str, Any] | Event, traceparent: str | None = None) -> Any:
        """Send one event (None when a direct-topology request is held for its response's domain)."""
        ev, raw = self.prepare(event)
        tp = traceparent or ev.traceparent
        headers = [("traceparent", tp.encode())] if tp else []
        self.counts[ev.type] += 1
        if not self.direct:
            return self._producer.send(self.topic, key=routing_key(ev).encode(), value=raw, headers=headers)
        if ev.type == "canary":
            # A copy on every partition, marked as placed: a direct worker copies an unmarked one itself.
            placed = [*headers, (PLACED, b"1")]
            futures = [
                self._producer.send(self.topic, value=raw, headers=placed, partition=q)
                for q in sorted(self._producer.partitions_for(self.topic) or {0})
            ]
            return futures[-1]
        key = domain_key(ev)
        if isinstance(ev, Request) and key is None:
            self._held[ev.request_id] = (raw, headers)
            while len(self._held) > self.max_held:
                rid, (held_raw, held_headers) = self._held.popitem(last=False)
                self._give_up(rid, held_raw, held_headers)
            return None
        assert key is not None
        if isinstance(ev, Response):
            held = self._held.pop(ev.request_id, None)
            if held is not None:
                self._producer.send(self.topic, key=key.encode(), value=held[0], headers=held[1])
        return self._producer.send(self.topic, key=key.encode(), value=raw, headers=headers)

    def _give_up(self, request_id: str, raw: bytes, headers: list[tuple[str, bytes]]) -> None:
        self.counts["unpaired"] += 1
        self._producer.send(self.topic, key=request_id.encode(), value=raw, headers=headers)

    def flush(self, timeout_s: float | None = None) -> None:
        self._producer.flush(timeout=timeout_s)

    def close(self) -> None:
        while self._held:
            rid, (raw, headers) = self._held.popitem(last=False)
            self._give_up(rid, raw, headers)
        self._producer.flush()
        self._producer.close()


# --- publishing a file ---------------------------------------------------------------------------


@dataclass
class ProduceResult:
    sent: Counter[str] = field(default_factory=Counter)
    bad_lines: Counter[str] = field(default_factory=Counter)
    seconds: float = 0.0
    input_error: str | None = None  # the input ended early (truncated gzip, ...): what was read was sent
    # Messages the cluster did not take in the end (error name -> count), e.g. no leader until the delivery timeout:
    # counted, never silently dropped.
    failed: Counter[str] = field(default_factory=Counter)


# Per batched message. Kafka's and librdkafka's (kcat, confluent-kafka) defaults cap a message at
# 1,000,000 bytes (message.max.bytes); staying under it with room for headers and the record
# overhead lets any consumer and any producer tool with default settings handle our batches.
BATCH_BYTES = 900_000


@dataclass
class Lines:
    """Non-blank lines of a file, read in bounded memory (streams.inputs.files.bounded_lines); a line
    over `max_bytes` is yielded as None (and counted by the caller); an input that ends early is noted
    in `error` instead of raising."""

    path: str
    max_bytes: int
    error: str | None = None

    def __iter__(self) -> Iterator[bytes | None]:
        lineno = 0
        try:
            with open_binary(self.path) as f:
                for raw, size in bounded_lines(f, self.max_bytes):
                    lineno += 1
                    if size > self.max_bytes:
                        yield None
                        continue
                    line = raw.rstrip(b"\r\n")
                    if line.strip():
                        yield line
        except (EOFError, OSError, zlib.error) as exc:
            self.error = f"{self.path}: input ended early after line {lineno} ({type(exc).__name__}: {exc})"


def iter_lines(path: str, max_bytes: int = 4 * 1024 * 1024) -> Iterator[bytes]:
    """The non-blank lines of a file, oversized ones left out."""
    return (line for line in Lines(path, max_bytes) if line is not None)


def produce_file(
    path: str,
    k: KafkaSettings,
    *,
    rate: float | None = None,
    max_bytes: int = 4 * 1024 * 1024,
    send_bad: bool = True,
    producer: KafkaProducer | None = None,
    progress: Any = None,
    batch: int = 1,
    batch_bytes: int = BATCH_BYTES,
    domains: dict[str, str] | None = None,
) -> ProduceResult:
    """Publish every line; bad lines are counted and (send_bad) published too, keyless, so the
    workers dead-letter them with their reason: nothing is dropped silently on the way in.

    batch > 1 puts up to that many lines into one message (newline-separated, content-type
    application/x-ndjson, no key: the workers route each event themselves), and at most `batch_bytes`
    (a single larger event goes alone). Each Kafka message costs a worker far more than one event
    does, so batches raise a worker's rate several times over. Oversized lines (over `max_bytes`) are
    counted and not sent: the worker would only dead-letter them, and the topic may refuse them. `domains`
    (direct topology): the response domain of each request id, when the file is one part of a longer log
    (`response_domains` of the whole log); read from the file itself otherwise."""
    own = producer is None
    prod = producer or make_producer(k)
    res = ProduceResult()
    start = time.monotonic()
    n = 0
    direct = k.topology == "direct"
    if domains is None:  # given: the file is a part of a longer log, whose responses may come in a later part
        domains = response_domains(path, max_bytes) if direct else {}
    parts = len(prod.partitions_for(k.input_topic) or ()) or k.input_partitions if direct else 0
    sender = _Counted(prod, res.failed)
    batches = _Batches(sender, k.input_topic, batch, batch_bytes)
    try:
        lines = Lines(path, max_bytes)
        for line in lines:
            if line is None:
                res.bad_lines["oversized"] += 1
                continue
            routed = _route(line, max_bytes, direct, domains, parts, res)
            if routed is None and not send_bad:
                continue
            key, headers, targets = routed or (None, [], None)
            if targets is not None and batch > 1:  # direct: one partition's lines per message, marked placed
                for q in targets:
                    batches.add(line, q)
            elif targets is not None:
                placed = [*headers, (PLACED, b"1")]  # a direct worker copies an unmarked canary itself
                for q in targets:
                    sender.send(k.input_topic, key=key, partition=q, value=line, headers=placed)
            elif batch > 1:
                batches.add(line, None)
            else:
                sender.send(k.input_topic, key=key, value=line, headers=headers)
            n += 1
            if progress is not None:
                progress(len(line))
            if rate:
                # Pace against the schedule, not per message: sleeps add up to the target rate.
                ahead = n / rate - (time.monotonic() - start)
                if ahead > 0:
                    time.sleep(ahead)
        batches.send_all()
        prod.flush()
        res.input_error = lines.error
    finally:
        if own:
            prod.close()
    res.seconds = time.monotonic() - start
    return res


class _Counted:
    """A producer whose sends each count their failure (the error's name) once the client gives up on them."""

    def __init__(self, prod: KafkaProducer, failed: Counter[str]) -> None:
        self.prod, self.failed = prod, failed

    def send(self, topic: str, **kw: Any) -> Any:
        fut = self.prod.send(topic, **kw)
        if fut is not None:  # a stand-in producer may return none
            fut.add_errback(lambda exc: self.failed.update([type(exc).__name__]))
        return fut


_Routed = tuple[bytes | None, list[tuple[str, bytes]], list[int] | None]


def _route(
    line: bytes, max_bytes: int, direct: bool, domains: dict[str, str], parts: int, res: ProduceResult
) -> _Routed | None:
    """(key, headers, the partitions a direct line goes to) of a valid line, counted by type; None for a bad line,
    counted by its reason (sent keyless, if at all, so that a worker dead-letters it)."""
    try:
        ev = parse_event(line, max_bytes=max_bytes)
    except EventError as exc:
        res.bad_lines[exc.reason] += 1
        return None
    targets: list[int] | None = None
    if direct:
        key, targets = direct_placement(ev, domains, parts)
    else:
        key = routing_key(ev).encode()
    headers = [("traceparent", ev.traceparent.encode())] if ev.traceparent else []
    res.sent[ev.type] += 1
    return key, headers, targets


def direct_placement(ev: Event, domains: dict[str, str], parts: int) -> tuple[bytes, list[int]]:
    """(key, partitions) of an event for the direct topology: its domain's partition (a request by its response's
    domain, from `domains`), a canary on every partition."""
    dk = domain_key(ev, domains)
    key = (dk if dk is not None else routing_key(ev)).encode()
    return key, list(range(parts)) if ev.type == "canary" else [input_partition_of(key, parts)]


class _Batches:
    """Lines gathered into NDJSON messages of at most `batch` lines and `batch_bytes` bytes (a larger line goes
    alone): one stream of unkeyed messages (`partition` None: the workers route each event), or one per partition
    (direct: sent to that partition, marked placed)."""

    def __init__(self, prod: KafkaProducer | _Counted, topic: str, batch: int, batch_bytes: int) -> None:
        self.prod, self.topic, self.batch, self.batch_bytes = prod, topic, batch, batch_bytes
        self.groups: dict[int | None, list[bytes]] = {}
        self.sizes: dict[int | None, int] = {}  # bytes of each group's message so far (lines and newlines)

    def add(self, line: bytes, partition: int | None) -> None:
        if partition in self.groups and self.sizes[partition] + len(line) + 1 > self.batch_bytes:
            self.send(partition)
        lines = self.groups.setdefault(partition, [])
        lines.append(line)
        self.sizes[partition] = self.sizes.get(partition, 0) + len(line) + 1
        if len(lines) >= self.batch:
            self.send(partition)

    def send(self, partition: int | None) -> None:
        lines = self.groups.pop(partition, [])
        self.sizes.pop(partition, None)
        if not lines:
            return
        headers = [("content-type", NDJSON_CONTENT_TYPE)]
        if partition is None:
            self.prod.send(self.topic, key=None, value=b"\n".join(lines), headers=headers)
        else:
            headers.append((PLACED, b"1"))
            self.prod.send(self.topic, key=None, partition=partition, value=b"\n".join(lines), headers=headers)

    def send_all(self) -> None:
        for partition in list(self.groups):
            self.send(partition)


def response_domains(path: str, max_bytes: int) -> dict[str, str]:
    """request_id -> cache_domain of every response in the file: where a request that names no domain goes
    in the direct topology (a first pass; a live gateway knows the domain when it publishes the pair)."""
    out: dict[str, str] = {}
    for line in iter_lines(path, max_bytes):
        try:
            d = orjson.loads(line)
        except orjson.JSONDecodeError:
            continue
        if isinstance(d, dict) and d.get("type") == "response":
            rid, dom = d.get("request_id"), d.get("cache_domain")
            if isinstance(rid, str) and isinstance(dom, str):
                out[rid] = dom
    return out
