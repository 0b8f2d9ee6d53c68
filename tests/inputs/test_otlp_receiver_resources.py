"""Issue 25: the OTLP receiver's memory and time under hostile peers, through real HTTP connections.

Gzip bombs are inflated only up to the body limit and the memory is given back; a peer that drips its
request head or body is cut off; mapping a batch does not hold up /health; bytes in flight are bounded
(503, which exporters retry). No test asserts a duration: a slow peer is given a generous bound."""

from __future__ import annotations

import gzip
import io
import socket
import threading
import zlib
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import httpx
import orjson
import pytest
from conftest import wait_for
from otlp_hostile import good_span

from streams.inputs.otlp_http import OtlpReceiver
from streams.outputs import JsonlOutput
from streams.outputs.base import Produced, Refused
from streams.settings import Settings
from tests.support.otlp import export_request
from tests.support.otlp_attacks import bomb_body, closed_by_peer, post_raw, rss_mib, start_receiver, stop_receiver
from tests.support.workerproc import free_port

GZIP_JSON = {"Content-Type": "application/json", "Content-Encoding": "gzip"}


@pytest.mark.slow  # a receiver process and 16 bombs
def test_sixteen_concurrent_gzip_bombs_stay_bounded_and_memory_is_given_back(tmp_path: Path) -> None:
    bomb = bomb_body(256)  # 256 KB on the wire, 256 MiB inflated; the limit is the default 16 MiB
    port = free_port()
    proc = start_receiver(port, {}, rejects=str(tmp_path / "rejects.jsonl"))
    try:
        idle = rss_mib(proc.pid)
        statuses: list[int] = []
        threads = [
            threading.Thread(target=lambda: statuses.append(post_raw(port, bomb, GZIP_JSON)[0])) for _ in range(16)
        ]
        for t in threads:
            t.start()
        for t in threads:
            t.join(120)
        # refused for size, or (over the shared in-flight budget) told to come back later
        assert len(statuses) == 16 and set(statuses) <= {413, 503} and 413 in statuses
        assert httpx.get(f"http://127.0.0.1:{port}/health", timeout=30).status_code == 200
        peak = rss_mib(proc.pid, "VmHWM")

        def settled() -> bool:  # the trim after the last bomb is put off by up to a second
            return rss_mib(proc.pid) < idle + 64

        wait_for(settled, 30, what=f"RSS back near idle ({idle:.0f} MiB), now {rss_mib(proc.pid):.0f} MiB")
    finally:
        stop_receiver(proc)
    # before: 1.9 GB peak for these 16 bombs, 1.1 GB still resident after
    assert peak < idle + 256, f"peak {peak:.0f} MiB, idle {idle:.0f} MiB"


class BlockingOutput(JsonlOutput):
    """Holds the mapping thread inside output.send until released."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), io.BytesIO())
        self.entered = threading.Event()
        self.release = threading.Event()

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        self.entered.set()
        assert self.release.wait(60)
        return super().send(events)


def _blocked(settings: Settings) -> Any:
    output = BlockingOutput()
    receiver = OtlpReceiver(settings, output)
    receiver.start_in_thread()
    yield receiver, output
    output.release.set()
    receiver.stop_thread()


@pytest.fixture
def blocked() -> Any:
    yield from _blocked(Settings())


@pytest.fixture
def blocked_small_budget() -> Any:
    yield from _blocked(Settings(otlp={"max_body_bytes": 1 << 20, "max_inflight_bytes": 1 << 20}))


def test_health_answers_while_a_batch_is_being_mapped(blocked: Any) -> None:
    receiver, output = blocked
    url = f"http://127.0.0.1:{receiver.port}"
    answers: list[int] = []
    body = orjson.dumps(export_request([good_span("r-1")]))
    poster = threading.Thread(
        target=lambda: answers.append(httpx.post(f"{url}/v1/traces", content=body, headers=GZIP_JSON | {
            "Content-Encoding": "identity"}, timeout=60).status_code)
    )  # fmt: skip
    poster.start()
    assert output.entered.wait(30)
    # the batch is in the middle of its mapping: before, it held the event loop and /health waited for it
    assert httpx.get(f"{url}/health", timeout=10).text == "ok"
    assert httpx.get(f"{url}/counters", timeout=10).status_code == 200
    output.release.set()
    poster.join(60)
    assert answers == [200]


def test_bytes_in_flight_are_bounded_with_a_retryable_503(blocked_small_budget: Any) -> None:
    receiver, output = blocked_small_budget
    url = f"http://127.0.0.1:{receiver.port}/v1/traces"
    # each body is under the 1 MiB limit, two together are over the 1 MiB in-flight budget
    pad = {"key": "pad", "value": {"stringValue": "x" * 600_000}}
    span = good_span("r-big")
    span["attributes"].append(pad)
    body = orjson.dumps(export_request([span]))
    first: list[int] = []
    t = threading.Thread(
        target=lambda: first.append(httpx.post(url, content=body, headers={"content-type": "application/json"},
                                               timeout=60).status_code)
    )  # fmt: skip
    t.start()
    assert output.entered.wait(30)  # the first body is held by the mapping
    second = httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30)
    assert second.status_code == 503 and second.headers["Retry-After"] == "1"
    output.release.set()
    t.join(60)
    assert first == [200]
    # once the first is done its bytes are free again
    assert httpx.post(url, content=body, headers={"content-type": "application/json"}, timeout=30).status_code == 200
    assert receiver.counters["rejects.busy"] == 1


@pytest.fixture
def quick_timeouts() -> Any:
    settings = Settings(otlp={"header_timeout_s": 1.0, "body_timeout_s": 1.0})
    receiver = OtlpReceiver(settings, JsonlOutput(io.BytesIO(), io.BytesIO()))
    receiver.start_in_thread()
    yield receiver
    receiver.stop_thread()


def test_slowloris_head_is_cut_off(quick_timeouts: OtlpReceiver) -> None:
    socks = [socket.create_connection(("127.0.0.1", quick_timeouts.port)) for _ in range(20)]
    try:
        for s in socks:
            s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Drip: ")
        # dripping a byte every half second does not keep a connection that never finishes its head
        assert closed_by_peer(socks[0], b"a", within_s=30)
        assert all(closed_by_peer(s, None, within_s=30) for s in socks[1:])
    finally:
        for s in socks:
            s.close()
    assert httpx.get(f"http://127.0.0.1:{quick_timeouts.port}/health").status_code == 200


def test_slow_body_gets_408_and_the_connection_is_closed(quick_timeouts: OtlpReceiver) -> None:
    with socket.create_connection(("127.0.0.1", quick_timeouts.port)) as s:
        s.sendall(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n")
        s.sendall(b"Content-Length: 1000\r\n\r\n{")
        s.settimeout(30)
        answer = s.recv(4096)
        assert answer.startswith(b"HTTP/1.1 408")
        assert closed_by_peer(s, b" ", within_s=30)
    assert quick_timeouts.counters["rejects.body_timeout"] == 1


def test_encodings_multi_member_gzip_deflate_truncated_and_unknown() -> None:
    events = io.BytesIO()
    receiver = OtlpReceiver(Settings(), JsonlOutput(events, io.BytesIO()))
    port = receiver.start_in_thread()
    try:
        body = orjson.dumps(export_request([good_span("r-gz")]))
        half = len(body) // 2
        two_members = gzip.compress(body[:half]) + gzip.compress(body[half:])
        assert post_raw(port, two_members, GZIP_JSON)[0] == 200
        deflated = zlib.compress(orjson.dumps(export_request([good_span("r-deflate")])))
        assert post_raw(port, deflated, GZIP_JSON | {"Content-Encoding": "deflate"})[0] == 200
        assert post_raw(port, gzip.compress(body)[:-12], GZIP_JSON)[0] == 400
        assert post_raw(port, b"\x1f\x8b garbage", GZIP_JSON)[0] == 400
        assert post_raw(port, body, GZIP_JSON | {"Content-Encoding": "br"})[0] == 415
    finally:
        receiver.stop_thread()
    ids = [orjson.loads(x)["request_id"] for x in events.getvalue().splitlines()]
    assert ids == ["r-gz", "r-gz", "r-deflate", "r-deflate"]


class FailingOutput(JsonlOutput):
    """An output that cannot take events once (a broker away, a full disk)."""

    def __init__(self) -> None:
        super().__init__(io.BytesIO(), io.BytesIO())
        self.fail = True

    def send(self, events: Sequence[Produced]) -> list[Refused]:
        if self.fail:
            self.fail = False
            raise OSError("no space left on device")
        return super().send(events)


def test_a_failing_output_is_a_retryable_503_not_a_500() -> None:
    output = FailingOutput()
    receiver = OtlpReceiver(Settings(), output)
    port = receiver.start_in_thread()
    try:
        body = orjson.dumps(export_request([good_span("r-retry")]))
        url = f"http://127.0.0.1:{port}/v1/traces"
        first = httpx.post(url, content=body, headers={"content-type": "application/json"})
        assert first.status_code == 503 and "Retry-After" in first.headers
        assert httpx.post(url, content=body, headers={"content-type": "application/json"}).status_code == 200
    finally:
        receiver.stop_thread()
    assert [orjson.loads(x)["request_id"] for x in output.out.getvalue().splitlines()] == ["r-retry", "r-retry"]
    assert receiver.counters["rejects.output_failed"] == 1
