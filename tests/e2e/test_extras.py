"""Without an optional extra, its command says which extra to install (issue 26: `crosstalk report --alerts …`
answered "unrecognized arguments", and --help showed no options)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
# Run the CLI as if jinja2 were not installed: an import of it fails as a missing package's would.
WITHOUT_JINJA2 = (
    "import sys; sys.modules['jinja2'] = None; from streams.cli.main import main; sys.exit(main(sys.argv[1:]))"
)


def cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", WITHOUT_JINJA2, *args], cwd=ROOT, capture_output=True, text=True, timeout=120
    )


def test_a_command_whose_extra_is_missing_names_the_extra() -> None:
    out = cli("report", "--alerts", "alerts.jsonl", "--out", "r.html")
    assert out.returncode == 2
    assert "unrecognized arguments" not in out.stderr
    assert "crosstalk report: unavailable: it needs jinja2" in out.stderr
    assert "pip install 'crosstalk[report]'" in out.stderr


def test_its_help_names_the_extra() -> None:
    out = cli("report", "--help")
    assert out.returncode == 0 and "pip install 'crosstalk[report]'" in out.stdout
    listing = cli("--help")
    assert "crosstalk[report]" in listing.stdout


def test_the_probe_is_in_the_default_install() -> None:
    import tomllib

    deps = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["dependencies"]
    assert any(d.startswith("openai") for d in deps)
