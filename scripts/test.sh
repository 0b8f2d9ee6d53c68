#!/usr/bin/env bash
# The full test suite: installs into .venv, starts a real Kafka broker (KRaft, from Maven Central jars)
# on loopback, runs pytest (Kafka tests included), stops the broker. Extra args go to pytest.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$ROOT"
bash scripts/bootstrap.sh
# A real Prometheus Alertmanager for tests/sinks/test_alertmanager.py, built once (~5 min) into .tools/bin.
GO="$(command -v go || echo /usr/local/go/bin/go)"
if [ ! -x "$ROOT/.tools/bin/alertmanager" ] && [ -x "$GO" ]; then
  GOBIN="$ROOT/.tools/bin" "$GO" install github.com/prometheus/alertmanager/cmd/alertmanager@v0.28.1 \
    >/tmp/crosstalk-alertmanager-build.log 2>&1 || { tail -20 /tmp/crosstalk-alertmanager-build.log >&2; }
fi
# A real OpenTelemetry Collector for tests/e2e/test_collector.py (deploy/otel-collector.yaml): built once (~6-8 min)
# with the Collector builder (ocb) from deploy/otelcol-builder.yaml into .tools/bin; rebuilt when the manifest changes.
OCB_VERSION=0.165.0
OTELCOL="$ROOT/.tools/bin/otelcol-crosstalk"
if [ -x "$GO" ] && { [ ! -x "$OTELCOL" ] || [ "$ROOT/deploy/otelcol-builder.yaml" -nt "$OTELCOL" ]; }; then
  (
    set -e
    [ -x "$ROOT/.tools/bin/ocb-$OCB_VERSION" ] || {
      GOBIN="$ROOT/.tools/bin" "$GO" install "go.opentelemetry.io/collector/cmd/builder@v$OCB_VERSION"
      mv "$ROOT/.tools/bin/builder" "$ROOT/.tools/bin/ocb-$OCB_VERSION"
    }
    cd "$ROOT"
    PATH="$(dirname "$GO"):$PATH" "$ROOT/.tools/bin/ocb-$OCB_VERSION" --config deploy/otelcol-builder.yaml
    cp "$ROOT/.tools/otelcol-build/otelcol-crosstalk" "$OTELCOL"
  ) >/tmp/crosstalk-otelcol-build.log 2>&1 || { tail -20 /tmp/crosstalk-otelcol-build.log >&2; }
fi
VENV="${CROSSTALK_VENV:-$ROOT/.venv}"
export PYTHON="$VENV/bin/python"
# The editable install compiles the native fingerprinting loop (detectors/_winnow.c) in place; rebuild it
# when a C source is newer than the built module (tests compare it with the pure path, and in CI require it).
so="$(ls "$ROOT"/detectors/_winnow.*.so 2>/dev/null | head -1 || true)"
if [ -n "$so" ] && [ -n "$(find "$ROOT/detectors" -maxdepth 1 -name '_winnow*.[ch]' -newer "$so")" ]; then
  "$VENV/bin/python" -m pip install --quiet --no-deps -e "$ROOT"
fi
export KAFKA_PORT="${KAFKA_PORT:-19092}"
export CROSSTALK_KAFKA__BOOTSTRAP="${CROSSTALK_KAFKA__BOOTSTRAP:-127.0.0.1:$KAFKA_PORT}"
started=0
if ! bash scripts/kafka.sh status >/dev/null 2>&1; then
  bash scripts/kafka.sh up
  started=1
fi
cleanup() { if [ "$started" = 1 ]; then bash scripts/kafka.sh down || true; fi; }
trap cleanup EXIT
"$VENV/bin/ruff" check .
"$VENV/bin/ruff" format --check .
"$VENV/bin/python" -m mypy  # config in pyproject.toml: strict on schemas/ and detectors/, basic on streams/
"$VENV/bin/python" -m pytest "$@"
