"""scripts/kafka.sh status probes the broker with the project's venv or Kafka's own tool, not PATH's python3."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.kafka


def _status(env_extra: dict[str, str]) -> subprocess.CompletedProcess[str]:
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHON", "VIRTUAL_ENV", "CROSSTALK_VENV")}
    # A PATH without the venv: `python3` there has no kafka-python, as on a fresh shell.
    env["PATH"] = os.pathsep.join(p for p in env.get("PATH", "").split(os.pathsep) if ".venv" not in p)
    env.update(env_extra)
    return subprocess.run(
        ["bash", str(ROOT / "scripts" / "kafka.sh"), "status"], env=env, capture_output=True, text=True, timeout=120
    )


def test_status_sees_the_running_broker_from_a_plain_shell(kafka_bootstrap: str) -> None:
    if not (ROOT / ".kafka").exists():
        pytest.skip("the broker was not started by scripts/kafka.sh")
    port = kafka_bootstrap.rsplit(":", 1)[1]
    out = _status({"KAFKA_PORT": port})
    assert out.returncode == 0 and "ready on" in out.stdout, out.stdout + out.stderr


def test_status_falls_back_to_kafkas_own_tool_without_kafka_python(kafka_bootstrap: str) -> None:
    if not (ROOT / ".kafka").exists():
        pytest.skip("the broker was not started by scripts/kafka.sh")
    python3 = shutil.which("python3", path="/usr/bin:/bin") or "/nonexistent"
    port = kafka_bootstrap.rsplit(":", 1)[1]
    out = _status({"KAFKA_PORT": port, "PYTHON": python3})  # a python without kafka-python
    assert out.returncode == 0 and "ready on" in out.stdout, out.stdout + out.stderr
