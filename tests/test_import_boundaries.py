"""What a module pulls in when imported, checked in a fresh interpreter (this process has imported everything).

A gateway that only publishes events installs and loads the producer library, not the Faust runtime,
OpenTelemetry or an HTTP client; the functional core never reaches back into the shell.
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _top_level_modules_after(statement: str) -> set[str]:
    code = f"import sys\n{statement}\nprint('\\n'.join(sorted({{m.split('.')[0] for m in sys.modules}})))"
    proc = subprocess.run([sys.executable, "-c", code], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr
    return set(proc.stdout.split())


@pytest.mark.parametrize(
    ("statement", "forbidden"),
    [
        ("import streams.producer", {"faust", "mode", "opentelemetry", "httpx", "aiohttp"}),
        ("import detectors.monitor", {"streams", "faust", "kafka", "aiokafka", "opentelemetry", "httpx"}),
        ("import schemas.events, schemas.alert", {"detectors", "streams", "numpy"}),
    ],
)
def test_import_pulls_in_nothing_forbidden(statement: str, forbidden: set[str]) -> None:
    loaded = _top_level_modules_after(statement)
    assert statement.split()[1].split(".")[0] in loaded  # the import itself happened
    assert not loaded & forbidden, f"`{statement}` imports {sorted(loaded & forbidden)}"
