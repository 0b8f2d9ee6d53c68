"""Helpers of the report tests: runs of the real CLI and what the simulator's labels say about them."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from dataclasses import dataclass
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
# Debian's packages (.ci/run installs them); overridable to test what happens without them.
CHROMIUM = os.environ.get("CROSSTALK_TEST_CHROMIUM", "/usr/bin/chromium")
CHROMEDRIVER = os.environ.get("CROSSTALK_TEST_CHROMEDRIVER", "/usr/bin/chromedriver")


def crosstalk(*args: str, env: dict[str, str] | None = None) -> subprocess.CompletedProcess[str]:
    """The real command line, as a user runs it."""
    proc = subprocess.run(
        [sys.executable, "-c", "import sys; from streams.cli.main import main; sys.exit(main(sys.argv[1:]))", *args],
        cwd=ROOT,
        env={**os.environ, **(env or {})},
        capture_output=True,
        text=True,
        timeout=600,
    )
    assert proc.returncode == 0, f"crosstalk {' '.join(args)} failed:\n{proc.stdout}\n{proc.stderr}"
    return proc


@dataclass
class Run:
    dir: Path
    events: Path
    alerts: Path
    labels: dict[str, Any]

    @property
    def contaminated(self) -> list[dict[str, Any]]:
        return [r for r in self.labels["responses"] if r["contaminated"]]

    def received_by_tenant(self) -> Counter[str]:
        return Counter(r["tenant_id"] for r in self.contaminated)

    def owner_of(self) -> dict[str, str]:
        """request id -> tenant, for every response in the labels."""
        return {r["request_id"]: r["tenant_id"] for r in self.labels["responses"]}

    def tenants(self) -> list[str]:
        meta = self.labels["meta"]
        return [*meta.get("tenants", []), *meta.get("probes", [])]

    def report(self, out: Path, *extra: str, env: dict[str, str] | None = None) -> str:
        crosstalk(
            "report", "--alerts", str(self.alerts), "--events", str(self.events), "--out", str(out), *extra, env=env
        )
        return out.read_text(encoding="utf-8")
