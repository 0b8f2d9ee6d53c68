"""Hostile peers against `crosstalk otlp` (issue 25): memory and /health under gzip bombs and slowloris.

Starts the receiver as a child process on loopback (`--to jsonl`, output discarded), then
  bombs      N concurrent POSTs of a gzip body that inflates to --bomb-mib MiB (default 1 GiB each)
  slowloris  N connections that drip one header byte a second and never finish a request
  big        one batch of --spans spans (mapping must not block /health)
and samples the receiver's RSS (/proc/<pid>/status: VmRSS every 50 ms, VmHWM at the end), the
latency of GET /health while the attack runs, and (slowloris) how many connections the receiver
still holds open at the end. Prints one JSON object per scenario.

    python bench/otlp_hostile.py bombs --n 16
    python bench/otlp_hostile.py slowloris --n 200 --seconds 40
    python bench/otlp_hostile.py big --spans 29000

Traffic goes to 127.0.0.1 only; every loop is bounded in count and time.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import gzip
import json
import os
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:
    sys.path.insert(0, str(ROOT))


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


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


def start_receiver(port: int, env_extra: dict[str, str], tree: Path = ROOT) -> subprocess.Popen[bytes]:
    env = {
        **os.environ,
        "CROSSTALK_OTLP__PORT": str(port),
        "CROSSTALK_DETECTION__FINGERPRINT_KEY": os.environ.get("CROSSTALK_DETECTION__FINGERPRINT_KEY", "bench-key"),
        **env_extra,
    }
    tmp = tempfile.mkdtemp(prefix="otlp-hostile-")
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--to", "jsonl", "--events-out", os.devnull]
    proc = subprocess.Popen(
        [*cmd, "--rejects", f"{tmp}/rejects.jsonl"],
        env={**env, "PYTHONPATH": str(tree)},
        cwd=tree,
        stderr=subprocess.DEVNULL,
    )
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            time.sleep(0.2)
    proc.kill()
    raise SystemExit("receiver did not start")


TOKEN: str | None = None  # --token: sent as a bearer token with every POST


def post_raw(port: int, body: bytes, headers: dict[str, str], timeout: float = 120) -> int:
    if TOKEN:
        headers = {**headers, "Authorization": f"Bearer {TOKEN}"}
    head = f"POST /v1/traces HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        with contextlib.suppress(OSError):  # the receiver may answer 413 and close before the body is sent
            s.sendall(head.encode() + body)
        data = s.recv(200)
    try:
        return int(data.split()[1])
    except (IndexError, ValueError):
        return 0


def bomb_body(mib: int) -> bytes:
    c = zlib.compressobj(9, zlib.DEFLATED, 31)  # gzip wrapper
    chunk = b"\0" * (1 << 20)
    return b"".join([*(c.compress(chunk) for _ in range(mib)), c.flush()])


def scenario_bombs(port: int, pid: int, n: int, body: bytes, mib: int) -> dict[str, Any]:
    statuses: list[int] = []

    def one() -> None:
        statuses.append(post_raw(port, body, {"Content-Type": "application/json", "Content-Encoding": "gzip"}))

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
    from streams.testing.otlp import export_request, span_of

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
    status = post_raw(port, body, {"Content-Type": "application/json", "Content-Encoding": "gzip"})
    return {"spans": spans, "status": status, "wire_bytes": len(body), "post_s": round(time.monotonic() - t0, 2)}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("scenario", choices=["bombs", "slowloris", "big"])
    p.add_argument("--n", type=int, default=16)
    p.add_argument("--bomb-mib", type=int, default=1024)
    p.add_argument("--seconds", type=float, default=40.0)
    p.add_argument("--spans", type=int, default=29_000)
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
    body = bomb_body(a.bomb_mib) if a.scenario == "bombs" else big_body(a.spans) if a.scenario == "big" else b""
    try:
        time.sleep(1.0)
        idle = rss_mib(proc.pid)
        sampler = Sampler(proc.pid, port)
        sampler.start()
        if a.scenario == "bombs":
            row = scenario_bombs(port, proc.pid, n, body, a.bomb_mib)
        elif a.scenario == "slowloris":
            row = scenario_slowloris(port, proc.pid, n, min(a.seconds, 600))
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
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(30)
        except subprocess.TimeoutExpired:
            proc.kill()


if __name__ == "__main__":
    main()
