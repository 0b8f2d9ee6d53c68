"""Malformed JSON in a CROSSTALK_* list variable, or a port another process holds, ends a command with one
line on stderr and exit 5, as bad settings do (issue 42: both printed a traceback, the port one with exit 1)."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest

from streams.cli.main import EXIT_CONFIG

ROOT = Path(__file__).resolve().parents[2]
SECRET = "hunter2-not-shown"


def crosstalk(*args: str, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "streams.cli", *args],
        cwd=ROOT, env={**os.environ, "CROSSTALK_DETECTION__FINGERPRINT_KEY": "k", **env},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def one_line(proc: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in proc.stderr, proc.stderr[-2000:]
    [line] = [x for x in proc.stderr.splitlines() if x.startswith("crosstalk: error:")]
    return line


@pytest.mark.slow  # CLI runs as subprocesses
@pytest.mark.parametrize(
    ("name", "value", "field"),
    [
        ("CROSSTALK_LITELLM__TENANT_FROM", "[end_user", "litellm"),
        ("CROSSTALK_SCRAPE__TARGETS", "[{", "scrape"),
        ("CROSSTALK_WEBHOOKS__RECEIVERS", f'[{{"name": "x", "url": "http://h/", "secret": "{SECRET}"', "webhooks"),
    ],
)
def test_malformed_json_in_a_list_variable_is_one_line_and_exit_5(name: str, value: str, field: str) -> None:
    proc = crosstalk("settings", **{name: value})
    assert proc.returncode == EXIT_CONFIG
    line = one_line(proc)
    assert field in line and SECRET not in proc.stderr


@pytest.mark.slow  # CLI runs as subprocesses
def test_a_port_in_use_is_one_line_and_exit_5() -> None:
    with socket.create_server(("127.0.0.1", 0)) as held:
        port = held.getsockname()[1]
        proc = crosstalk("otlp", "--port", str(port))
    assert proc.returncode == EXIT_CONFIG
    assert "address already in use" in one_line(proc).lower()
