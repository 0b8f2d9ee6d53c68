"""docs/evaluation-seeds.md is what scripts/evaluate_seeds.py renders from docs/evaluation.json, and the
script writes it there by default: the generated tables and the figures beside them cannot drift apart."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "scripts" / "evaluate_seeds.py"


@pytest.mark.slow
def test_the_per_seed_tables_are_rendered_from_the_json(tmp_path: Path) -> None:
    md = tmp_path / "seeds.md"
    subprocess.run(
        [sys.executable, str(SCRIPT), "--from-json", "--md", str(md), "--plot", str(tmp_path / "p.png")],
        cwd=ROOT,
        check=True,
        capture_output=True,
    )
    assert md.read_text(encoding="utf-8") == (ROOT / "docs" / "evaluation-seeds.md").read_text(encoding="utf-8")
    assert (tmp_path / "p.png").stat().st_size > 0


def test_the_script_writes_the_generated_file_not_the_hand_written_one() -> None:
    source = SCRIPT.read_text(encoding="utf-8")
    assert 'default=ROOT / "docs/evaluation-seeds.md"' in source
    assert "written by scripts/evaluate_seeds.py" not in (ROOT / "docs" / "evaluation.md").read_text(encoding="utf-8")
