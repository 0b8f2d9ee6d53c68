"""Hostile HTTP peers for the OTLP receiver's tests and bench/otlp_hostile.py: gzip bombs, slowloris,
and the receiver's memory as the kernel sees it. Loopback only; every loop is bounded."""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import sys
import time
import zlib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def rss_mib(pid: int, field: str = "VmRSS") -> float:
    """A process's resident memory (VmRSS) or its peak so far (VmHWM), in MiB."""
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def bomb_body(mib: int) -> bytes:
    """A gzip body that inflates to `mib` MiB of zeros (about 1 KB on the wire per MiB)."""
    c = zlib.compressobj(9, zlib.DEFLATED, 31)
    chunk = b"\0" * (1 << 20)
    return b"".join([*(c.compress(chunk) for _ in range(mib)), c.flush()])


def _varint(n: int) -> bytes:
    out = bytearray()
    while n > 0x7F:
        out.append(n & 0x7F | 0x80)
        n >>= 7
    return bytes([*out, n])


def pb_field(tag: int, body: bytes) -> bytes:
    """One length-delimited protobuf field: `tag` is the key byte ((field << 3) | 2)."""
    return bytes([tag]) + _varint(len(body)) + body


def pb_request(spans: bytes) -> bytes:
    """An ExportTraceServiceRequest of one resource and one scope holding `spans` (encoded span fields)."""
    return pb_field(0x0A, pb_field(0x12, spans))


def empty_spans_proto(n: int) -> bytes:
    """Issue 42: `n` empty spans (`\\x12\\x00` each) in one request, 2 bytes a span before gzip."""
    return pb_request(b"\x12\x00" * n)


def empty_spans_json(n: int) -> bytes:
    """The same in OTLP/JSON: `n` `{}` spans."""
    return b'{"resourceSpans":[{"scopeSpans":[{"spans":[' + b",".join([b"{}"] * n) + b"]}]}]}"


def post_raw(
    port: int, body: bytes, headers: dict[str, str], timeout: float = 120, path: str = "/v1/traces"
) -> tuple[int, bytes]:
    """One POST on its own connection; (status, first bytes of the answer). Status 0: no HTTP answer."""
    head = f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Length: {len(body)}\r\nConnection: close\r\n"
    head += "".join(f"{k}: {v}\r\n" for k, v in headers.items()) + "\r\n"
    data = b""
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as s:
        with contextlib.suppress(OSError):  # the receiver may answer and close before the body is sent
            s.sendall(head.encode() + body)
        with contextlib.suppress(OSError):
            data = s.recv(4096)
    try:
        return int(data.split()[1]), data
    except (IndexError, ValueError):
        return 0, data


def closed_by_peer(sock: socket.socket, drip: bytes | None, within_s: float) -> bool:
    """Drip `drip` every half second (slowloris) until the peer closes the connection or `within_s` passes;
    True if it closed. Whatever the peer answers before closing (a 408) is read and ignored."""
    sock.settimeout(0.5)
    end = time.monotonic() + within_s
    while time.monotonic() < end:
        try:
            if drip:
                sock.sendall(drip)
            if sock.recv(4096) == b"":
                return True
        except TimeoutError:
            continue
        except OSError:  # reset: closed as well
            return True
    return False


def start_receiver(
    port: int, env_extra: dict[str, str], tree: Path = ROOT, rejects: str = os.devnull
) -> subprocess.Popen[bytes]:
    """`crosstalk otlp --to jsonl` (events discarded) of source tree `tree` on 127.0.0.1:`port`."""
    env = {
        **os.environ,
        "CROSSTALK_OTLP__PORT": str(port),
        "CROSSTALK_DETECTION__FINGERPRINT_KEY": os.environ.get("CROSSTALK_DETECTION__FINGERPRINT_KEY", "attack-key"),
        "PYTHONPATH": str(tree),
        **env_extra,
    }
    cmd = [sys.executable, "-m", "streams.cli", "otlp", "--to", "jsonl", "--events-out", os.devnull]
    proc = subprocess.Popen([*cmd, "--rejects", rejects], env=env, cwd=tree, stderr=subprocess.DEVNULL)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=1):
                return proc
        except OSError:
            if proc.poll() is not None:
                break
            time.sleep(0.2)
    proc.kill()
    raise RuntimeError("the OTLP receiver did not start")


def stop_receiver(proc: subprocess.Popen[bytes]) -> None:
    proc.send_signal(signal.SIGTERM)
    try:
        proc.wait(30)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)
