"""Hostile peers against `crosstalk otlp` (issue 25): memory and /health under gzip bombs and slowloris.

Starts the receiver as a child process on loopback (`--to jsonl`, output discarded), then
  bombs      N concurrent POSTs of a gzip body that inflates to --bomb-mib MiB (default 1 GiB each)
  slowloris  N connections that drip one header byte a second and never finish a request
  big        one batch of --spans spans (mapping must not block /health)
  amplify    one gzip'd body of --spans empty spans, protobuf (`\\x12\\x00` each) or --json (`{}` each):
             a few KB on the wire that decode to millions of objects (issue 42)
and samples the receiver's RSS (/proc/<pid>/status: VmRSS every 50 ms, VmHWM at the end), the
latency of GET /health while the attack runs, and (slowloris) how many connections the receiver
still holds open at the end. Prints one JSON object per scenario.

    python bench/otlp_hostile.py bombs --n 16
    python bench/otlp_hostile.py slowloris --n 200 --seconds 40
    python bench/otlp_hostile.py big --spans 29000
    python bench/otlp_hostile.py amplify --spans 8388576 [--json]

Traffic goes to 127.0.0.1 only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import gzip
import json
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))

from tests.support.otlp_attacks import (  # noqa: E402
    bomb_body,
    empty_spans_json,
    empty_spans_proto,
    post_raw,
    rss_mib,
    start_receiver,
    stop_receiver,
)
from tests.support.workerproc import free_port  # noqa: E402


class Sampler(threading.Thread):
    """RSS of the receiver every 50 ms, and /health's latency every 200 ms (timeout 30 s)."""

    def __init__(self, pid: int, port: int) -> None:
        super().__init__(daemon=True)
        self.pid, self.port = pid, port
        self.rss: list[float] = []
        self.health_ms: list[float] = []
        self.health_failed = 0
        self.stop_flag = threading.Event()

    def run(self) -> None:
        last_health = 0.0
        while not self.stop_flag.is_set():
            self.rss.append(rss_mib(self.pid))
            now = time.monotonic()
            if now - last_health >= 0.2:
                last_health = now
                self.health_ms.append(self._health())
            time.sleep(0.05)

    def _health(self) -> float:
        t0 = time.monotonic()
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=30) as s:
                s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
                s.recv(100)
        except OSError:
            self.health_failed += 1
        return (time.monotonic() - t0) * 1000


TOKEN: str | None = None  # --token: sent as a bearer token with every POST


def post(port: int, body: bytes, headers: dict[str, str], timeout: float = 120) -> int:
    if TOKEN:
        headers = {**headers, "Authorization": f"Bearer {TOKEN}"}
    return post_raw(port, body, headers, timeout)[0]


def scenario_bombs(port: int, pid: int, n: int, body: bytes, mib: int) -> dict[str, Any]:
    statuses: list[int] = []

    def one() -> None:
        statuses.append(post(port, body, {"Content-Type": "application/json", "Content-Encoding": "gzip"}))

    threads = [threading.Thread(target=one) for _ in range(n)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(180)
    time.sleep(2.0)  # memory given back?
    return {"bombs": n, "inflates_to_mib": mib, "wire_bytes": len(body), "statuses": sorted(set(statuses))}


async def _slowloris(port: int, n: int, seconds: float) -> tuple[int, int]:
    """n connections that drip a never-ending header; returns (opened, still open at the end)."""
    conns: list[tuple[asyncio.StreamReader, asyncio.StreamWriter]] = []
    for _ in range(n):
        try:
            conns.append(await asyncio.open_connection("127.0.0.1", port))
        except OSError:
            break
    for _, w in conns:
        w.write(b"POST /v1/traces HTTP/1.1\r\nHost: x\r\nX-Drip: ")
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        for _, w in conns:
            if not w.is_closing():
                try:
                    w.write(b"a")
                    await w.drain()
                except (ConnectionError, OSError):
                    w.close()
        await asyncio.sleep(1.0)
    still = 0
    for r, w in conns:
        try:
            w.write(b"a")
            await w.drain()
            data = await asyncio.wait_for(r.read(1), 0.2)
            still += data != b""
        except TimeoutError:
            still += 1  # nothing to read yet and not closed: the server still holds it
        except (ConnectionError, OSError):
            pass
        w.close()
    return len(conns), still


def scenario_slowloris(port: int, pid: int, n: int, seconds: float) -> dict[str, Any]:
    opened, still = asyncio.run(_slowloris(port, n, seconds))
    return {"connections": opened, "seconds": seconds, "still_open_at_end": still}


def big_body(spans: int) -> bytes:
    from tests.support.otlp import export_request, span_of

    batch = []
    for i in range(spans):
        rid = f"big-{i}"
        batch.append(
            span_of(
                {"request_id": rid, "model": "m", "tenant_id": "acme", "prompt_tokens": 5, "ts": 1.7e9 + i / 1000},
                {"model": "m", "cache_domain": "d1", "status_code": 200, "ts": 1.7e9 + i / 1000 + 0.5},
            )
        )
    return gzip.compress(json.dumps(export_request(batch)).encode())


def scenario_big(port: int, pid: int, spans: int, body: bytes) -> dict[str, Any]:
    t0 = time.monotonic()
    status = post(port, body, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    return {"spans": spans, "status": status, "wire_bytes": len(body), "post_s": round(time.monotonic() - t0, 2)}


def scenario_amplify(port: int, pid: int, spans: int, body: bytes, json_body: bool) -> dict[str, Any]:
    ctype = "application/json" if json_body else "application/x-protobuf"
    t0 = time.monotonic()
    status = post(port, body, {"Content-Type": ctype, "Content-Encoding": "gzip"}, timeout=600)
    return {"empty_spans": spans, "json": json_body, "status": status, "wire_bytes": len(body),
            "post_s": round(time.monotonic() - t0, 2)}  # fmt: skip


def _body(a: argparse.Namespace) -> bytes:
    if a.scenario == "bombs":
        return bomb_body(a.bomb_mib)
    if a.scenario == "big":
        return big_body(a.spans)
    if a.scenario == "amplify":
        return gzip.compress((empty_spans_json if a.json else empty_spans_proto)(a.spans), 9)
    return b""


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario", choices=["bombs", "slowloris", "big", "amplify"])
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--bomb-mib", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--spans", type=int, default=29_000)
    p.add_argument("--json", action="store_true", help="amplify: OTLP/JSON instead of protobuf")
    p.add_argument("--env", action="append", default=[], help="KEY=VALUE for the receiver (settings)")
    p.add_argument("--token", help="bearer token to send (the receiver's otlp.tokens via --env)")
    p.add_argument("--tree", type=Path, default=ROOT, help="run the receiver of this source tree (a before/after)")
    a = p.parse_args()
    global TOKEN
    TOKEN = a.token
    n = min(a.n, 1000)
    port = free_port()
    proc = start_receiver(port, dict(kv.split("=", 1) for kv in a.env), a.tree)
    # The attack's payload is built before the clock starts: building it takes CPU from the receiver.
    body = _body(a)
    try:
        time.sleep(1.0)
        idle = rss_mib(proc.pid)
        sampler = Sampler(proc.pid, port)
        sampler.start()
        if a.scenario == "bombs":
            row = scenario_bombs(port, proc.pid, n, body, a.bomb_mib)
        elif a.scenario == "slowloris":
            row = scenario_slowloris(port, proc.pid, n, min(a.seconds, 600))
        elif a.scenario == "amplify":
            row = scenario_amplify(port, proc.pid, a.spans, body, a.json)
        else:
            row = scenario_big(port, proc.pid, a.spans, body)
        sampler.stop_flag.set()
        sampler.join(35)
        row.update(
            rss_idle_mib=round(idle),
            rss_peak_mib=round(rss_mib(proc.pid, "VmHWM")),
            rss_after_mib=round(rss_mib(proc.pid)),
            health_max_ms=round(max(sampler.health_ms, default=0)),
            health_failed=sampler.health_failed,
            receiver_alive=proc.poll() is None,
        )
        print(json.dumps({"scenario": a.scenario, **row}))
    finally:
        stop_receiver(proc)


if __name__ == "__main__":
    main()
