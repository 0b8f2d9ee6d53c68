"""scripts/bootstrap.sh and scripts/demo.sh as written, with a stand-in interpreter in the venv that records what
pip was asked to install (no package index is reached): the demo installs crosstalk alone, the test script the
development set, each once until pyproject.toml changes (issue 40: the demo installed the LiteLLM proxy,
selenium and the benchmark tools to run a simulation)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

from tests.support.recipes import ROOT

STUB = """#!/bin/sh
echo "$@" >> "$(dirname "$0")/../calls"
"""


@pytest.fixture
def venv(tmp_path: Path) -> Path:
    v = tmp_path / "venv"
    (v / "bin").mkdir(parents=True)
    for name in ("python", "crosstalk"):
        (v / "bin" / name).write_text(STUB)
        (v / "bin" / name).chmod(0o755)
    return v


def _run(script: str, venv: Path, *args: str) -> list[str]:
    calls = venv / "calls"
    before = calls.read_text().splitlines() if calls.exists() else []
    env = {**os.environ, "CROSSTALK_VENV": str(venv)}
    out = subprocess.run(["bash", str(ROOT / "scripts" / script), *args], env=env, capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    return (calls.read_text().splitlines() if calls.exists() else [])[len(before) :]


def _installs(calls: list[str]) -> list[str]:
    return [c.split("-e ", 1)[1] for c in calls if c.startswith("-m pip install --quiet -e ")]


def test_the_demo_installs_crosstalk_alone_then_runs_it(venv: Path) -> None:
    calls = _run("demo.sh", venv, "--duration", "60")
    assert _installs(calls) == [str(ROOT)]  # no [test,rocksdb,bench]: no LiteLLM proxy, no selenium
    assert calls[-1] == "demo --duration 60"
    assert _installs(_run("demo.sh", venv)) == []  # stamped: the second demo starts at once


def test_the_test_script_set_is_the_development_set_and_covers_the_demo(venv: Path) -> None:
    assert _installs(_run("bootstrap.sh", venv)) == [f"{ROOT}[test,rocksdb,bench]"]
    assert _installs(_run("bootstrap.sh", venv)) == []
    assert _installs(_run("bootstrap.sh", venv, "core")) == []  # the development set holds the core
    assert (venv / ".crosstalk-installed").exists()  # the stamp other tools wait for keeps its name


def test_a_changed_pyproject_installs_again(venv: Path) -> None:
    assert _installs(_run("bootstrap.sh", venv, "core")) == [str(ROOT)]
    stamp = venv / ".crosstalk-installed-core"
    past = (ROOT / "pyproject.toml").stat().st_mtime - 60
    os.utime(stamp, (past, past))
    assert _installs(_run("bootstrap.sh", venv, "core")) == [str(ROOT)]


def test_an_unknown_set_is_refused(venv: Path) -> None:
    env = {**os.environ, "CROSSTALK_VENV": str(venv)}
    out = subprocess.run(["bash", str(ROOT / "scripts/bootstrap.sh"), "all"], env=env, capture_output=True, text=True)
    assert out.returncode == 2 and "unknown set 'all'" in out.stderr
