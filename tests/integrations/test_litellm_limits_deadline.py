"""The guard's GET /limits is bounded as a whole, head included (issue 42).

httpx's timeouts are per read: a server that drips its status line and headers a byte at a time never
trips them, and the first read of /limits never ended (no log line, no counter; every guarded request
waited `limits_first_wait_s` behind it). The server here drips its head for as long as the test runs.
"""

from __future__ import annotations

import logging
import socket
import threading
from collections.abc import Iterator

import pytest

pytest.importorskip("litellm")

from streams.integrations.litellm_limits import LimitsClient
from streams.settings import Settings


class HeadDripper:
    """A TCP server on loopback that answers every connection with a response head, one byte at a time,
    never finishing it (until stop())."""

    def __init__(self, every_s: float = 0.3) -> None:
        self.stop_ = threading.Event()
        self.every_s = every_s
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.connections = 0
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        self.sock.settimeout(0.2)
        while not self.stop_.is_set():
            try:
                conn, _ = self.sock.accept()
            except OSError:
                continue
            self.connections += 1
            threading.Thread(target=self._drip, args=(conn,), daemon=True).start()

    def _drip(self, conn: socket.socket) -> None:
        head = b"HTTP/1.1 200 OK\r\n" + b"X-Slow: " + b"a" * 100_000
        try:
            conn.recv(65536)
            for i in range(len(head)):
                if self.stop_.wait(self.every_s):
                    break
                conn.sendall(head[i : i + 1])
        except OSError:
            pass  # the client gave up and closed: what the deadline is for
        finally:
            conn.close()

    def close(self) -> None:
        self.stop_.set()
        self.sock.close()


@pytest.fixture
def dripper() -> Iterator[HeadDripper]:
    d = HeadDripper()
    yield d
    d.close()


def test_a_dripping_response_head_ends_at_the_deadline_logged_and_counted(
    dripper: HeadDripper, caplog: pytest.LogCaptureFixture
) -> None:
    settings = Settings(
        detection={"fingerprint_key": "k"},
        litellm={"limits_url": f"http://127.0.0.1:{dripper.port}/limits", "limits_timeout_s": 1.0},
    )
    client = LimitsClient(settings)
    done = threading.Event()

    def read() -> None:
        client.refresh_now()
        done.set()

    with caplog.at_level(logging.WARNING, logger="crosstalk.litellm"):
        threading.Thread(target=read, daemon=True).start()
        # Before the fix this waited for as long as the server dripped: here, the whole test.
        assert done.wait(60), "the /limits read outlived its deadline"
    assert not dripper.stop_.is_set() and dripper.connections == 1  # still dripping when the read gave up
    assert client.counters["limits.fetch_timeout"] == 1 and client.counters["limits.fetch_error"] == 0
    # Only this client's line: a guard that an earlier test left polling a server now gone logs to the same logger.
    url = f"127.0.0.1:{dripper.port}/limits"
    [line] = [m for r in caplog.records if "unavailable" in (m := r.getMessage()) and url in m]
    assert "limits_timeout_s" in line
    assert client.wait_first(0)  # the first read is over: requests no longer wait for it
    client.close()
