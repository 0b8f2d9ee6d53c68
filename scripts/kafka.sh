#!/usr/bin/env bash
# Single-node Apache Kafka (KRaft, combined broker+controller) on loopback, for development and tests.
#
#   scripts/kafka.sh up|down|status|logs|fetch   (fetch: only the jars, as scripts/kafka-cluster.sh needs them)
#
# Jars come from Maven Central via Maven (no Docker, no tarball download), cached in .kafka/libs.
# Env: KAFKA_PORT (19092), KAFKA_CONTROLLER_PORT (19093), KAFKA_HOME (<repo>/.kafka),
#      KAFKA_VERSION (4.1.1), KAFKA_HEAP (-Xmx1g -Xms256m), KAFKA_READY_TIMEOUT (90 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_HOME="${KAFKA_HOME:-$ROOT/.kafka}"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
KAFKA_PORT="${KAFKA_PORT:-19092}"
KAFKA_CONTROLLER_PORT="${KAFKA_CONTROLLER_PORT:-19093}"
KAFKA_HEAP="${KAFKA_HEAP:--Xmx1g -Xms256m}"
KAFKA_READY_TIMEOUT="${KAFKA_READY_TIMEOUT:-90}"
LIBS="$KAFKA_HOME/libs"
DATA="$KAFKA_HOME/data-$KAFKA_PORT"
CONF="$KAFKA_HOME/server-$KAFKA_PORT.properties"
LOG="$KAFKA_HOME/server-$KAFKA_PORT.log"
PIDFILE="$KAFKA_HOME/kafka-$KAFKA_PORT.pid"
# The probe needs kafka-python: the project's venv has it (a python3 from PATH usually does not).
PYTHON="${PYTHON:-${CROSSTALK_VENV:-$ROOT/.venv}/bin/python}"

log() { printf 'kafka.sh: %s\n' "$*" >&2; }

running_pid() {
  [ -f "$PIDFILE" ] || return 1
  local pid
  pid="$(cat "$PIDFILE")"
  [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null && echo "$pid"
}

fetch_jars() {
  local stamp="$LIBS/.complete-$KAFKA_VERSION"
  [ -f "$stamp" ] && return 0
  log "resolving Kafka $KAFKA_VERSION jars from Maven Central into $LIBS"
  local tmp
  tmp="$(mktemp -d)"
  cat >"$tmp/pom.xml" <<EOF
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>local.crosstalk</groupId>
  <artifactId>kafka-runtime</artifactId>
  <version>1</version>
  <packaging>pom</packaging>
  <dependencies>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka_2.13</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.apache.kafka</groupId><artifactId>kafka-tools</artifactId><version>$KAFKA_VERSION</version></dependency>
    <dependency><groupId>org.slf4j</groupId><artifactId>slf4j-reload4j</artifactId><version>1.7.36</version></dependency>
  </dependencies>
</project>
EOF
  rm -rf "$LIBS"
  mkdir -p "$LIBS"
  mvn -q -f "$tmp/pom.xml" dependency:copy-dependencies -DoutputDirectory="$LIBS" -DincludeScope=runtime
  rm -rf "$tmp"
  touch "$stamp"
}

write_config() {
  mkdir -p "$KAFKA_HOME"
  cat >"$KAFKA_HOME/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.controller=WARN
log4j.logger.kafka.log.LogCleaner=WARN
EOF
  cat >"$CONF" <<EOF
process.roles=broker,controller
node.id=1
controller.quorum.bootstrap.servers=127.0.0.1:$KAFKA_CONTROLLER_PORT
listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
advertised.listeners=PLAINTEXT://127.0.0.1:$KAFKA_PORT,CONTROLLER://127.0.0.1:$KAFKA_CONTROLLER_PORT
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$DATA
num.partitions=1
default.replication.factor=1
min.insync.replicas=1
offsets.topic.replication.factor=1
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=1
transaction.state.log.min.isr=1
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=1
share.coordinator.state.topic.min.isr=1
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
log.retention.hours=24
log.segment.bytes=67108864
log.cleaner.dedupe.buffer.size=16777216
message.max.bytes=8388608
EOF
}

format_storage() {
  [ -f "$DATA/meta.properties" ] && return 0
  log "formatting KRaft storage in $DATA"
  java -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" -cp "$LIBS/*" kafka.tools.StorageTool format --standalone --ignore-formatted \
    -t "$(java -cp "$LIBS/*" kafka.tools.StorageTool random-uuid)" -c "$CONF" >/dev/null
}

# Ready = the broker answers a metadata request (ApiVersions + Metadata) on the client port: with
# the venv's kafka-python when there is one, else with Kafka's own tool from the jars.
probe() {
  if [ -x "$PYTHON" ] && "$PYTHON" -c "import kafka" >/dev/null 2>&1; then
    "$PYTHON" - "$1" <<'EOF' >/dev/null 2>&1
import sys
from kafka import KafkaAdminClient
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=3000)
admin.describe_cluster()
admin.close()
EOF
  else
    timeout 20 java -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" -cp "$LIBS/*" \
      org.apache.kafka.tools.BrokerApiVersionsCommand --bootstrap-server "$1" >/dev/null 2>&1
  fi
}

cmd_up() {
  if pid="$(running_pid)"; then
    log "already running (pid $pid) on 127.0.0.1:$KAFKA_PORT"
    return 0
  fi
  local t0=$SECONDS
  fetch_jars
  write_config
  format_storage
  log "starting Kafka $KAFKA_VERSION on 127.0.0.1:$KAFKA_PORT (controller $KAFKA_CONTROLLER_PORT)"
  # setsid: the broker outlives this shell and gets no SIGINT from the terminal that started it.
  # shellcheck disable=SC2086
  setsid java $KAFKA_HEAP -XX:+UseG1GC -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$KAFKA_HOME/log4j.properties" \
    -cp "$LIBS/*" kafka.Kafka "$CONF" >"$LOG" 2>&1 </dev/null &
  echo $! >"$PIDFILE"
  local deadline=$((SECONDS + KAFKA_READY_TIMEOUT))
  until probe "127.0.0.1:$KAFKA_PORT"; do
    if ! running_pid >/dev/null; then
      log "broker exited during startup; last log lines:"
      tail -n 40 "$LOG" >&2
      rm -f "$PIDFILE"
      return 1
    fi
    if [ $SECONDS -ge $deadline ]; then
      log "not ready after ${KAFKA_READY_TIMEOUT}s; last log lines:"
      tail -n 40 "$LOG" >&2
      return 1
    fi
    sleep 0.5
  done
  log "ready on 127.0.0.1:$KAFKA_PORT after $((SECONDS - t0))s (pid $(cat "$PIDFILE"), log $LOG)"
}

cmd_down() {
  local pid
  if ! pid="$(running_pid)"; then
    log "not running"
    rm -f "$PIDFILE"
    return 0
  fi
  log "stopping pid $pid"
  kill -TERM "$pid"
  local deadline=$((SECONDS + 30))
  while kill -0 "$pid" 2>/dev/null; do
    if [ $SECONDS -ge $deadline ]; then
      log "still alive after 30s; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
      break
    fi
    sleep 0.2
  done
  rm -f "$PIDFILE"
  log "stopped"
}

cmd_status() {
  local pid
  if pid="$(running_pid)"; then
    if probe "127.0.0.1:$KAFKA_PORT"; then
      echo "running (pid $pid), ready on 127.0.0.1:$KAFKA_PORT"
      return 0
    fi
    echo "running (pid $pid), NOT answering on 127.0.0.1:$KAFKA_PORT"
    return 1
  fi
  echo "stopped"
  return 3
}

cmd_logs() {
  [ -f "$LOG" ] || { log "no log at $LOG"; return 1; }
  tail -n "${LINES:-100}" "$LOG"
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down ;;
  status) cmd_status ;;
  logs) cmd_logs ;;
  fetch) fetch_jars ;;
  *) echo "usage: $0 up|down|status|logs|fetch" >&2; exit 2 ;;
esac
