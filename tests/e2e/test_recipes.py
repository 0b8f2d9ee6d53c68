"""docs/connect.md shows the tested files and install lines as they are (tests/support/recipes.py)."""

from __future__ import annotations

import tomllib
from pathlib import Path

import pytest

from tests.support.recipes import ROOT, includes, pip_requirements, recipe


def _extra(name: str) -> list[str]:
    return tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"][name]


@pytest.mark.parametrize("path", sorted(includes()))
def test_an_included_file_is_shown_verbatim(path: str) -> None:
    assert (ROOT / path).read_text() == includes()[path], f"docs/connect.md shows an old {path}"


def test_the_documents_include_what_the_recipe_tests_run() -> None:
    assert {"deploy/otel-collector.yaml", "deploy/litellm-config.yaml"} <= set(includes())


def test_the_client_install_line_is_the_tested_extra() -> None:
    # The gateway's client libraries: the same set crosstalk[otel-client] installs, which the tests run with.
    assert sorted(pip_requirements(recipe("otel-install"))) == sorted(_extra("otel-client"))


def test_the_doc_includes_a_file_that_exists(tmp_path: Path) -> None:
    from tests.support.recipes import includes as read

    doc = tmp_path / "d.md"
    doc.write_text("<!-- include: deploy/nope.yaml -->\n```yaml\na: 1\n```\n")
    assert read(doc) == {"deploy/nope.yaml": "a: 1\n"}
