"""The README's configuration examples are valid settings, and its commands exist."""

from __future__ import annotations

import os
import re
from pathlib import Path

import pytest

from streams.cli.main import build_parser
from streams.settings import load_settings

README = (Path(__file__).resolve().parents[2] / "README.md").read_text(encoding="utf-8")


@pytest.mark.parametrize("block", re.findall(r"```toml\n(.*?)```", README, flags=re.S))
def test_every_toml_example_loads(block: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    for var in [v for v in os.environ if v.startswith("CROSSTALK_")]:
        monkeypatch.delenv(var)
    cfg = tmp_path / "example.toml"
    cfg.write_text(block, encoding="utf-8")
    load_settings(cfg)  # raises on unknown keys or bad values


def test_every_crosstalk_subcommand_in_the_readme_exists() -> None:
    named = set(re.findall(r"`crosstalk (\w+)", README)) | set(re.findall(r"^crosstalk (\w+)", README, flags=re.M))
    choices = set(build_parser()._subparsers._group_actions[0].choices)  # type: ignore[union-attr]
    assert named and named <= choices, named - choices
