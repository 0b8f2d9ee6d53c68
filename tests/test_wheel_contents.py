"""What the wheel ships: the product's packages, and nothing of the tests or their support in tests/support (issue 41),
which no module of the product may import."""

from __future__ import annotations

import ast
import subprocess
import sys
import tomllib
import zipfile
from pathlib import Path

import pytest
from setuptools import find_packages

ROOT = Path(__file__).resolve().parent.parent


def _shipped() -> list[str]:
    find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    return find_packages(str(ROOT), include=find["include"], exclude=find.get("exclude", ()))


def test_the_wheel_ships_the_product_and_not_its_test_support() -> None:
    shipped = _shipped()
    assert {"schemas", "detectors", "detectors.signals", "streams", "streams.kafka", "streams.cli"} <= set(shipped)
    assert not [p for p in shipped if p == "tests" or p.startswith(("tests.", "streams.testing"))]


def test_no_shipped_module_imports_the_test_support() -> None:
    offenders = []
    for package in _shipped():
        for path in (ROOT / package.replace(".", "/")).glob("*.py"):
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                names = [node.module or ""] if isinstance(node, ast.ImportFrom) else []
                if isinstance(node, ast.ImportFrom) and node.module == "streams":
                    names += [f"streams.{a.name}" for a in node.names]
                names += [a.name for a in node.names] if isinstance(node, ast.Import) else []
                if any(n == "tests" or n.startswith("tests.") for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []


@pytest.mark.slow
def test_the_built_wheel_holds_no_test_support(tmp_path: Path) -> None:
    # The package list alone is not enough (setuptools can copy files as a package's data): build the wheel, read it.
    cmd = [sys.executable, "-m", "pip", "wheel", str(ROOT), "--no-deps", "-q", "-w"]  # the build-system it declares
    subprocess.run([*cmd, str(tmp_path)], check=True, capture_output=True, timeout=600)
    (wheel,) = tmp_path.glob("crosstalk-*.whl")
    names = zipfile.ZipFile(wheel).namelist()
    assert not [n for n in names if n.startswith(("tests/", "streams/testing/"))]
    assert "streams/kafka/worker.py" in names and "streams/report/templates/report.html.j2" in names
