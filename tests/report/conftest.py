"""Fixtures of the report tests: a simulated incident and a clean run, made with the real CLI; a real Chromium."""

from __future__ import annotations

import os
import shutil
from pathlib import Path
from typing import Any

import orjson
import pytest

from .report_fixtures import CHROMEDRIVER, CHROMIUM, Run, crosstalk

# A pinned key, so the runs' figures are known: the 240-s runs never warm up and their content findings are held
# and judged at the end of input, so which of them stand can depend on the key (before the stdlib-code profile
# stopped copying its tenants' comments, 4 of 9 keys gave the clean run one false high; ADR 0004).
KEY = {"CROSSTALK_DETECTION__FINGERPRINT_KEY": "a"}


def _simulate(dir: Path, *flags: str) -> Run:
    crosstalk("simulate", "--out", str(dir), "--seed", "7", "--duration", "240", *flags)
    events = dir / "events.jsonl"
    alerts = dir / "alerts.jsonl"
    replay = ("replay", str(events), "--alerts-out", str(alerts), "--rejects", str(dir / "rejects.jsonl"), "--quiet")
    crosstalk(*replay, env=KEY)
    return Run(dir, events, alerts, orjson.loads((dir / "labels.json").read_bytes()))


@pytest.fixture(scope="session")
def incident(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = _simulate(tmp_path_factory.mktemp("incident"), "--fault-at", "80")
    assert run.contaminated, "the simulated incident must contaminate responses"
    return run


@pytest.fixture(scope="session")
def clean(tmp_path_factory: pytest.TempPathFactory) -> Run:
    run = _simulate(tmp_path_factory.mktemp("clean"), "--no-fault")
    assert not run.contaminated
    return run


@pytest.fixture(scope="session")
def browser_paths() -> tuple[str, str]:
    """Debian's chromium and its chromedriver; a skip locally without them, a failure on CI (CI=true)."""
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not (Path(p).exists() or shutil.which(p))]
    if missing:
        msg = f"{', '.join(missing)} missing: apt-get install -y chromium chromium-driver (.ci/run does)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(msg, pytrace=False)
        pytest.skip(msg)
    return CHROMIUM, CHROMEDRIVER


@pytest.fixture
def browser(browser_paths: tuple[str, str], request: pytest.FixtureRequest) -> Any:
    """A real headless Chromium driven through chromedriver (selenium), console logged at every level."""
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    javascript = getattr(request, "param", True)
    opts = webdriver.ChromeOptions()
    opts.binary_location = browser_paths[0]
    for arg in (
        "--headless=new",
        "--no-sandbox",
        "--disable-gpu",
        "--disable-dev-shm-usage",
        "--window-size=1400,1800",
    ):
        opts.add_argument(arg)
    opts.set_capability("goog:loggingPrefs", {"browser": "ALL"})
    if not javascript:
        opts.add_experimental_option("prefs", {"profile.managed_default_content_settings.javascript": 2})
    driver = webdriver.Chrome(service=Service(executable_path=browser_paths[1]), options=opts)
    try:
        yield driver
    finally:
        driver.quit()
