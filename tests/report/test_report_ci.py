"""The browser the report tests need: present and working, and on CI its absence fails the run."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest

from .report_fixtures import ROOT

# slow: runs a pytest subprocess that builds a report
pytestmark = pytest.mark.slow


def test_chromium_runs(browser_paths: tuple[str, str]) -> None:
    chromium, driver = browser_paths
    for exe, name in ((chromium, "Chromium"), (driver, "ChromeDriver")):
        out = subprocess.run([exe, "--version"], capture_output=True, text=True, timeout=60)
        assert out.returncode == 0 and name in out.stdout, out.stderr


def _pytest_without_browser(ci: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "CI": ci, "CROSSTALK_TEST_CHROMIUM": "/nonexistent/chromium"}
    return subprocess.run(
        [
            sys.executable,
            "-m",
            "pytest",
            "-q",
            "-p",
            "no:cacheprovider",
            "tests/report/test_report_ci.py::test_chromium_runs",
        ],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=300,
    )


def test_missing_browser_fails_on_ci_and_skips_elsewhere() -> None:
    on_ci = _pytest_without_browser("true")
    # Named among what is missing (the driver too, on a machine without Chromium at all).
    assert on_ci.returncode == 1 and "1 error" in on_ci.stdout
    assert re.search(r"/nonexistent/chromium(, \S+)? missing", on_ci.stdout), on_ci.stdout
    local = _pytest_without_browser("")
    assert local.returncode == 0 and "1 skipped" in local.stdout, local.stdout
