#!/usr/bin/env bash
# Creates .venv (Python >= 3.11) and installs crosstalk into it, with the extras a job runs:
#   bash scripts/bootstrap.sh        the development set: the test, rocksdb and bench extras (scripts/test.sh, make)
#   bash scripts/bootstrap.sh core   crosstalk alone: what `crosstalk demo` runs (scripts/demo.sh)
# Idempotent: each set has its stamp in the venv and is installed again only when pyproject.toml is newer
# than it; the development set holds the core one, so after it `core` installs nothing.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="${CROSSTALK_VENV:-$ROOT/.venv}"
PY="${PYTHON3:-python3}"
case "${1:-dev}" in
  dev) spec="$ROOT[test,rocksdb,bench]"; stamp="$VENV/.crosstalk-installed" ;;
  core) spec="$ROOT"; stamp="$VENV/.crosstalk-installed-core" ;;
  *) echo "bootstrap: unknown set '$1' (dev or core)" >&2; exit 2 ;;
esac
fresh() { [ -f "$1" ] && [ ! "$ROOT/pyproject.toml" -nt "$1" ]; }
if fresh "$stamp" || fresh "$VENV/.crosstalk-installed"; then
  exit 0
fi
if [ ! -x "$VENV/bin/python" ]; then
  echo "bootstrap: creating $VENV" >&2
  "$PY" -m venv "$VENV"
fi
echo "bootstrap: installing crosstalk${spec#"$ROOT"} into $VENV" >&2
"$VENV/bin/python" -m pip install --quiet --upgrade pip
# setuptools warns on every build that [tool.setuptools.ext-modules] (the optional native loop) is
# experimental: a note for whoever edits pyproject.toml, not for someone running the demo. A failed build
# still reports its error.
PYTHONWARNINGS=ignore "$VENV/bin/python" -m pip install --quiet -e "$spec"
touch "$stamp"
