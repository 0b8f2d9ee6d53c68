#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs crosstalk with its test and benchmark extras.
# Idempotent: a second run only re-installs when pyproject.toml changed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CROSSTALK_VENV:-$ROOT/.venv}"
PY="${PYTHON3:-python3}"
if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
stamp="$VENV/.crosstalk-installed"
if [ ! -f "$stamp" ] || [ "$ROOT/pyproject.toml" -nt "$stamp" ]; then
  echo "bootstrap: installing crosstalk and its dependencies into $VENV" >&2
  "$VENV/bin/python" -m pip install --quiet --upgrade pip
  "$VENV/bin/python" -m pip install --quiet -e "$ROOT[test,rocksdb,bench]"
  touch "$stamp"
fi
