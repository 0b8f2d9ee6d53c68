#!/usr/bin/env bash
# Fresh machine -> crosstalk catching a simulated GLM-5.3-style incident, in-process, no broker.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
bash "$ROOT/scripts/bootstrap.sh" core   # crosstalk alone: the demo needs none of the extras
exec "${CROSSTALK_VENV:-$ROOT/.venv}/bin/crosstalk" demo "$@"
