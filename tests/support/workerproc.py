"""A `crosstalk worker` run as a child process, with its own web port and data dir.

Used by the Kafka tests and the Kafka benchmark (and handy in operators' scripts): start, read the
/counters endpoint, stop gracefully (SIGTERM, then SIGKILL), or kill outright.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Sequence
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]


def kafka_env(bootstrap: str, app_id: str) -> dict[str, str]:
    """Settings env for a worker whose topics are named after its app id (one isolated pipeline)."""
    return {
        "CROSSTALK_KAFKA__BOOTSTRAP": bootstrap,
        "CROSSTALK_DETECTION__FINGERPRINT_KEY": os.environ.get("CROSSTALK_DETECTION__FINGERPRINT_KEY", "harness-key"),
        "CROSSTALK_KAFKA__APP_ID": app_id,
        "CROSSTALK_KAFKA__INPUT_TOPIC": f"{app_id}.events",
        "CROSSTALK_KAFKA__ALERTS_TOPIC": f"{app_id}.alerts",
        "CROSSTALK_KAFKA__DEADLETTER_TOPIC": f"{app_id}.deadletter",
        # The tests written for the staged topology keep it; a test of the direct one (the default) says so.
        "CROSSTALK_KAFKA__TOPOLOGY": "staged",
    }


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


class WorkerProcess:
    def __init__(self, env: dict[str, str], data_dir: Path, log_path: Path, loglevel: str = "info") -> None:
        """`env`: settings for the worker (CROSSTALK_KAFKA__*, ...) on top of this process's environment."""
        self.port = free_port()
        self.log_path = log_path
        data_dir.mkdir(parents=True, exist_ok=True)
        full_env = {**os.environ, **env}
        full_env["CROSSTALK_KAFKA__WEB_PORT"] = str(self.port)
        full_env["CROSSTALK_KAFKA__DATA_DIR"] = str(data_dir)
        full_env.pop("CROSSTALK_CONFIG", None)
        self._log = log_path.open("ab")
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "streams.kafka.worker", "--loglevel", loglevel],
            cwd=ROOT,
            env=full_env,
            stdout=self._log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )

    def counters(self) -> dict[str, Any] | None:
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/counters", timeout=2) as r:
                return json.loads(r.read())
        except Exception:
            return None  # not up yet, or gone

    def ready(self) -> bool:
        """/ready answers 200: partitions assigned and consuming (not merely the web server up)."""
        try:
            with urllib.request.urlopen(f"http://127.0.0.1:{self.port}/ready", timeout=2) as r:
                return bool(r.status == 200)
        except Exception:
            return False

    def alive(self) -> bool:
        return self.proc.poll() is None

    def kill(self) -> None:
        if self.alive():
            self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(timeout=30)

    def stop(self, timeout_s: float = 30.0) -> int | None:
        if self.alive():
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=timeout_s)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(timeout=10)
        self._log.close()
        return self.proc.returncode

    def _log_lines(self) -> list[str]:
        try:
            return self.log_path.read_text(errors="replace").splitlines()
        except OSError:
            return []

    def log_tail(self, n: int = 40) -> str:
        return "\n".join(self._log_lines()[-n:])

    def log_warnings(self, n: int = 60) -> str:
        """The log's last `n` warnings and errors: what a failed broker test needs to tell a rewind, a stall or an
        orphaned exchange from a lost one (Faust's INFO lines of a rebalance fill any tail)."""
        return "\n".join([ln for ln in self._log_lines() if "[WARNING]" in ln or "[ERROR]" in ln][-n:])


def wait_up(workers: Sequence[WorkerProcess], timeout_s: float) -> None:
    """Until every worker's /counters answers; a worker that exits meanwhile raises with its log tail."""
    deadline = time.monotonic() + timeout_s
    while True:
        for w in workers:
            if not w.alive():
                raise RuntimeError(f"worker exited:\n{w.log_tail()}")
        if all(w.counters() is not None for w in workers):
            return
        if time.monotonic() > deadline:
            raise TimeoutError(f"workers not up after {timeout_s}s")
        time.sleep(0.1)
