#!/usr/bin/env bash
# A 3-node Apache Kafka cluster (KRaft) on loopback, for the fault tests of issue 42 (bench/bench_cluster.py).
#
#   scripts/kafka-cluster.sh up|down|status|fetch
#   scripts/kafka-cluster.sh kill N      # SIGKILL node N (1..3), as a crash would
#   scripts/kafka-cluster.sh start N     # start node N again (its log dir is kept)
#   scripts/kafka-cluster.sh stop N      # SIGTERM node N (a clean shutdown)
#   scripts/kafka-cluster.sh bootstrap   # prints 127.0.0.1:29092,127.0.0.1:29093,127.0.0.1:29094
#
# Each node is a combined broker+controller (process.roles=broker,controller): three voters of one static
# KRaft quorum (controller.quorum.voters), so losing any one node keeps both a controller majority and two
# in-sync replicas. Separate controllers would take three more JVMs on a two-core machine for no extra
# coverage of what crosstalk sees (a client only ever talks to brokers).
# Cluster defaults: default.replication.factor=3, min.insync.replicas=2, internal topics (consumer offsets,
# transactions) RF 3 / min ISR 2. Workers create their topics with kafka.replication_factor (set it to 3:
# CROSSTALK_KAFKA__REPLICATION_FACTOR=3); every crosstalk producer sends with acks=all.
#
# Jars: the same Maven Central jars as scripts/kafka.sh (fetched by it into .kafka/libs).
# Env: CLUSTER_PORT_BASE (29092: client ports 29092..29094), CLUSTER_CONTROLLER_BASE (29192),
#      CLUSTER_HOME (/tmp/crosstalk-kafka-cluster: configs, log dirs, logs, pids), KAFKA_HEAP (-Xmx512m -Xms128m),
#      KAFKA_READY_TIMEOUT (120 s).
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
KAFKA_HOME="${KAFKA_HOME:-$ROOT/.kafka}"
KAFKA_VERSION="${KAFKA_VERSION:-4.1.1}"
LIBS="$KAFKA_HOME/libs"
CLUSTER_HOME="${CLUSTER_HOME:-/tmp/crosstalk-kafka-cluster}"
PORT_BASE="${CLUSTER_PORT_BASE:-29092}"
CTRL_BASE="${CLUSTER_CONTROLLER_BASE:-29192}"
KAFKA_HEAP="${KAFKA_HEAP:--Xmx512m -Xms128m}"
KAFKA_READY_TIMEOUT="${KAFKA_READY_TIMEOUT:-120}"
NODES=(1 2 3)
PYTHON="${PYTHON:-${CROSSTALK_VENV:-$ROOT/.venv}/bin/python}"

log() { printf 'kafka-cluster.sh: %s\n' "$*" >&2; }

port() { echo $((PORT_BASE + $1 - 1)); }
ctrl_port() { echo $((CTRL_BASE + $1 - 1)); }
pidfile() { echo "$CLUSTER_HOME/node-$1.pid"; }
conf() { echo "$CLUSTER_HOME/node-$1.properties"; }
datadir() { echo "$CLUSTER_HOME/data-$1"; }
logfile() { echo "$CLUSTER_HOME/node-$1.log"; }

bootstrap() {
  local out="" n
  for n in "${NODES[@]}"; do out="${out:+$out,}127.0.0.1:$(port "$n")"; done
  echo "$out"
}

# Alive = exists and is not a zombie: a killed node whose parent is gone waits as a zombie until init reaps it,
# and kill -0 still succeeds on it.
alive() {
  kill -0 "$1" 2>/dev/null || return 1
  [ "$(awk '{print $3}' "/proc/$1/stat" 2>/dev/null)" != "Z" ]
}

running_pid() {
  local f
  f="$(pidfile "$1")"
  [ -f "$f" ] || return 1
  local pid
  pid="$(cat "$f")"
  [ -n "$pid" ] && alive "$pid" && echo "$pid"
}

fetch_jars() {
  [ -f "$LIBS/.complete-$KAFKA_VERSION" ] && return 0
  KAFKA_HOME="$KAFKA_HOME" KAFKA_VERSION="$KAFKA_VERSION" bash "$ROOT/scripts/kafka.sh" fetch
}

write_config() {
  local n=$1 voters="" m
  for m in "${NODES[@]}"; do voters="${voters:+$voters,}$m@127.0.0.1:$(ctrl_port "$m")"; done
  mkdir -p "$CLUSTER_HOME"
  cat >"$CLUSTER_HOME/log4j.properties" <<'EOF'
log4j.rootLogger=INFO, stdout
log4j.appender.stdout=org.apache.log4j.ConsoleAppender
log4j.appender.stdout.layout=org.apache.log4j.PatternLayout
log4j.appender.stdout.layout.ConversionPattern=[%d] %p %m (%c)%n
log4j.logger.kafka.request.logger=WARN
log4j.logger.state.change.logger=WARN
log4j.logger.org.apache.kafka.controller=WARN
log4j.logger.kafka.log.LogCleaner=WARN
EOF
  cat >"$(conf "$n")" <<EOF
process.roles=broker,controller
node.id=$n
controller.quorum.voters=$voters
listeners=PLAINTEXT://127.0.0.1:$(port "$n"),CONTROLLER://127.0.0.1:$(ctrl_port "$n")
advertised.listeners=PLAINTEXT://127.0.0.1:$(port "$n"),CONTROLLER://127.0.0.1:$(ctrl_port "$n")
listener.security.protocol.map=PLAINTEXT:PLAINTEXT,CONTROLLER:PLAINTEXT
controller.listener.names=CONTROLLER
inter.broker.listener.name=PLAINTEXT
log.dirs=$(datadir "$n")
num.partitions=1
default.replication.factor=3
min.insync.replicas=2
offsets.topic.replication.factor=3
offsets.topic.num.partitions=4
transaction.state.log.replication.factor=3
transaction.state.log.min.isr=2
transaction.state.log.num.partitions=4
share.coordinator.state.topic.replication.factor=3
share.coordinator.state.topic.min.isr=2
group.initial.rebalance.delay.ms=0
auto.create.topics.enable=false
delete.topic.enable=true
unclean.leader.election.enable=false
log.retention.hours=24
log.segment.bytes=67108864
log.cleaner.dedupe.buffer.size=16777216
message.max.bytes=8388608
replica.fetch.max.bytes=33554432
EOF
}

format_storage() {
  local n=$1 id=$2
  [ -f "$(datadir "$n")/meta.properties" ] && return 0
  java -Dlog4j.configuration="file:$CLUSTER_HOME/log4j.properties" -cp "$LIBS/*" kafka.tools.StorageTool format \
    --ignore-formatted -t "$id" -c "$(conf "$n")" >/dev/null
}

# Ready = the node answers a metadata request on its own client port (see probe() in scripts/kafka.sh).
probe() {
  "$PYTHON" - "$1" <<'EOF' >/dev/null 2>&1
import sys
from kafka import KafkaAdminClient
admin = KafkaAdminClient(bootstrap_servers=sys.argv[1], request_timeout_ms=3000)
admin.describe_cluster()
admin.close()
EOF
}

launch() {
  local n=$1
  if pid="$(running_pid "$n")"; then
    log "node $n already running (pid $pid)"
    return 0
  fi
  # setsid: the node outlives this shell and gets no SIGINT from the terminal that started it.
  # shellcheck disable=SC2086
  setsid java $KAFKA_HEAP -XX:+UseG1GC -XX:ActiveProcessorCount=1 -Djava.awt.headless=true \
    -Dlog4j.configuration="file:$CLUSTER_HOME/log4j.properties" \
    -cp "$LIBS/*" kafka.Kafka "$(conf "$n")" >>"$(logfile "$n")" 2>&1 </dev/null &
  echo $! >"$(pidfile "$n")"
  log "node $n starting on 127.0.0.1:$(port "$n") (pid $!, log $(logfile "$n"))"
}

wait_ready() {
  local deadline=$((SECONDS + KAFKA_READY_TIMEOUT)) n
  for n in "$@"; do
    until probe "127.0.0.1:$(port "$n")"; do
      if ! running_pid "$n" >/dev/null; then
        log "node $n exited during startup; last log lines:"
        tail -n 30 "$(logfile "$n")" >&2
        return 1
      fi
      if [ $SECONDS -ge $deadline ]; then
        log "node $n not ready after ${KAFKA_READY_TIMEOUT}s; last log lines:"
        tail -n 30 "$(logfile "$n")" >&2
        return 1
      fi
      sleep 0.5
    done
  done
}

cmd_up() {
  local t0=$SECONDS n id
  fetch_jars
  mkdir -p "$CLUSTER_HOME"
  if [ -f "$CLUSTER_HOME/cluster.id" ]; then
    id="$(cat "$CLUSTER_HOME/cluster.id")"
  else
    id="$(java -cp "$LIBS/*" kafka.tools.StorageTool random-uuid 2>/dev/null)"
    echo "$id" >"$CLUSTER_HOME/cluster.id"
  fi
  for n in "${NODES[@]}"; do
    write_config "$n"
    format_storage "$n" "$id"
  done
  # All three at once: a node alone has no controller quorum and waits for the others.
  for n in "${NODES[@]}"; do launch "$n"; done
  wait_ready "${NODES[@]}"
  log "ready: $(bootstrap) after $((SECONDS - t0))s (home $CLUSTER_HOME)"
}

stop_node() {
  local n=$1 sig=$2 pid
  if ! pid="$(running_pid "$n")"; then
    log "node $n not running"
    rm -f "$(pidfile "$n")"
    return 0
  fi
  kill "-$sig" "$pid"
  local deadline=$((SECONDS + 60))
  while alive "$pid"; do
    if [ $SECONDS -ge $deadline ]; then
      log "node $n still alive after 60s; SIGKILL"
      kill -KILL "$pid" 2>/dev/null || true
    fi
    sleep 0.2
  done
  rm -f "$(pidfile "$n")"
  log "node $n stopped ($sig)"
}

cmd_down() {
  local n
  # In parallel: the last node standing of a quorum waits long for the others in a controlled shutdown.
  for n in "${NODES[@]}"; do stop_node "$n" TERM & done
  wait
  if [ "${1:-}" = "--wipe" ]; then
    rm -rf "$CLUSTER_HOME"
    log "wiped $CLUSTER_HOME"
  fi
}

cmd_status() {
  local n rc=0 pid
  for n in "${NODES[@]}"; do
    if pid="$(running_pid "$n")"; then
      if probe "127.0.0.1:$(port "$n")"; then
        echo "node $n: running (pid $pid), ready on 127.0.0.1:$(port "$n")"
      else
        echo "node $n: running (pid $pid), NOT answering on 127.0.0.1:$(port "$n")"
        rc=1
      fi
    else
      echo "node $n: stopped"
      rc=3
    fi
  done
  return $rc
}

node_arg() {
  case "${1:-}" in
    1 | 2 | 3) echo "$1" ;;
    *) echo "usage: $0 kill|start|stop N (N in 1..3)" >&2; exit 2 ;;
  esac
}

case "${1:-}" in
  up) cmd_up ;;
  down) cmd_down "${2:-}" ;;
  status) cmd_status ;;
  fetch) fetch_jars ;;
  bootstrap) bootstrap ;;
  kill) stop_node "$(node_arg "${2:-}")" KILL ;;
  stop) stop_node "$(node_arg "${2:-}")" TERM ;;
  start) n="$(node_arg "${2:-}")"; launch "$n"; wait_ready "$n" ;;
  *) echo "usage: $0 up|down [--wipe]|status|fetch|bootstrap|kill N|start N|stop N" >&2; exit 2 ;;
esac
