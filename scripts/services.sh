#!/usr/bin/env bash
# Makes sure the real servers the test suite talks to are up, starting only those that do not answer.
#
#   PostgreSQL   127.0.0.1:5432
#   MariaDB      127.0.0.1:3306
#   Redis        127.0.0.1:6379
#   Redis Cluster, 3 masters, 127.0.0.1:7000-7002 (files under <repo>/.services/redis-cluster/)
#   ZooKeeper    127.0.0.1:2181, standalone (installed from the Debian package `zookeeper` when
#                missing; files under <repo>/.services/zookeeper/)
#
# Idempotent: when everything answers it only runs a few pings (well under a second). After the
# cluster nodes were killed it restarts them from their nodes.conf; a cluster whose files are lost or
# inconsistent is reset and created again (its data is test data: nothing is persisted).
# Waits are bounded (SIMBA_SERVICES_WAIT seconds, default 30) and end with a clear error.
# It never stops anything: the servers it starts keep running for the next run.
set -euo pipefail

ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
SERVICES_DIR="$ROOT/.services"
CLUSTER_DIR="$SERVICES_DIR/redis-cluster"
# The tests expect 7000-7002; SIMBA_CLUSTER_PORTS only serves to try this script on other ports.
read -r -a CLUSTER_PORTS <<<"${SIMBA_CLUSTER_PORTS:-7000 7001 7002}"
# Failure detection and recovery of a restarted master take about 2 x this.
CLUSTER_NODE_TIMEOUT_MS=2000
WAIT_SECONDS="${SIMBA_SERVICES_WAIT:-30}"

log() { printf 'services: %s\n' "$*" >&2; }
die() {
  printf 'services: error: %s\n' "$*" >&2
  exit 1
}

# wait_until SECONDS COMMAND...: run COMMAND every 0.2 s until it succeeds (0) or SECONDS pass (1).
wait_until() {
  local deadline=$((SECONDS + $1))
  shift
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || return 1
    sleep 0.2
  done
}

require() {
  command -v "$1" >/dev/null 2>&1 || die "$1 is not installed (needed to $2)"
}

# --- PostgreSQL (127.0.0.1:5432) ----------------------------------------------------------------

postgres_up() { pg_isready -q -h 127.0.0.1 -p 5432; }

ensure_postgres() {
  postgres_up && return 0
  require pg_ctlcluster "start PostgreSQL"
  local version
  version="$(ls /etc/postgresql 2>/dev/null | sort -V | tail -n 1)"
  [[ -n "$version" ]] || die "PostgreSQL does not answer on 127.0.0.1:5432 and /etc/postgresql has no cluster"
  log "starting PostgreSQL $version"
  # Right after a kill, a stale postmaster.pid makes the start fail for ~2 s: retry until the deadline.
  local deadline=$((SECONDS + WAIT_SECONDS)) output=""
  until output="$(pg_ctlcluster --skip-systemctl-redirect "$version" main start 2>&1)" || postgres_up; do
    ((SECONDS < deadline)) || die "PostgreSQL did not start within ${WAIT_SECONDS}s: $output"
    sleep 0.5
  done
  wait_until "$WAIT_SECONDS" postgres_up || die "PostgreSQL started but does not answer on 127.0.0.1:5432 within ${WAIT_SECONDS}s"
}

# --- MariaDB (127.0.0.1:3306) -------------------------------------------------------------------

mariadb_up() { mariadb -uroot -h127.0.0.1 -P3306 --connect-timeout=2 -e 'select 1'; }

ensure_mariadb() {
  mariadb_up >/dev/null 2>&1 && return 0
  require start-stop-daemon "start MariaDB"
  log "starting MariaDB"
  start-stop-daemon --start --oknodo --background --exec /usr/sbin/mariadbd
  wait_until "$WAIT_SECONDS" mariadb_up || die "MariaDB does not answer on 127.0.0.1:3306 within ${WAIT_SECONDS}s"
}

# --- Redis (127.0.0.1:6379) ---------------------------------------------------------------------

redis_up() { [[ "$(redis-cli -h 127.0.0.1 -p "$1" ping 2>/dev/null)" == "PONG" ]]; }

ensure_redis() {
  redis_up 6379 && return 0
  require redis-server "start Redis"
  log "starting Redis on 6379"
  mkdir -p /var/lib/redis /var/log/redis
  redis-server --daemonize yes --bind 127.0.0.1 -::1 --port 6379 --save "" --appendonly no \
    --dir /var/lib/redis --logfile /var/log/redis/ci.log
  wait_until "$WAIT_SECONDS" redis_up 6379 || die "Redis does not answer on 127.0.0.1:6379 within ${WAIT_SECONDS}s"
}

# --- Redis Cluster (3 masters, 127.0.0.1:7000-7002) ---------------------------------------------

# cluster_field PORT FIELD: the value of FIELD in `CLUSTER INFO` of the node on PORT (empty if down).
cluster_field() {
  redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null | tr -d '\r' | sed -n "s/^$2://p"
}

# One CLUSTER INFO per node: this runs on every `npm test`, so it stays cheap.
cluster_node_ok() {
  local info
  info="$(redis-cli -h 127.0.0.1 -p "$1" cluster info 2>/dev/null)" || return 1
  info="${info//$'\r'/}"$'\n'
  [[ "$info" == *"cluster_state:ok"$'\n'* && "$info" == *"cluster_known_nodes:${#CLUSTER_PORTS[@]}"$'\n'* ]]
}

cluster_ok() {
  local port
  for port in "${CLUSTER_PORTS[@]}"; do cluster_node_ok "$port" || return 1; done
}

# A node that knows only itself and serves no slot: a fresh node, or one whose nodes.conf was lost.
cluster_node_fresh() {
  [[ "$(cluster_field "$1" cluster_known_nodes)" == "1" && "$(cluster_field "$1" cluster_slots_assigned)" == "0" ]]
}

start_cluster_node() {
  local port=$1 dir="$CLUSTER_DIR/$1"
  mkdir -p "$dir"
  log "starting Redis Cluster node on $port (${dir#"$ROOT"/})"
  # nodes.conf is kept across restarts: a restarted node rejoins with its identity and slots.
  redis-server --port "$port" --bind 127.0.0.1 --daemonize yes \
    --dir "$dir" --pidfile "$dir/redis.pid" --logfile "$dir/redis.log" \
    --cluster-enabled yes --cluster-config-file nodes.conf --cluster-node-timeout "$CLUSTER_NODE_TIMEOUT_MS" \
    --save "" --appendonly no ||
    die "redis-server failed to start on port $port (see $dir/redis.log)"
}

create_cluster() {
  local port nodes=()
  for port in "${CLUSTER_PORTS[@]}"; do nodes+=("127.0.0.1:$port"); done
  log "creating the Redis Cluster on ${nodes[*]}"
  local output
  output="$(redis-cli --cluster create "${nodes[@]}" --cluster-replicas 0 --cluster-yes 2>&1)" ||
    die "redis-cli --cluster create failed:
$output"
}

# Forget a broken cluster: empty every node and reset it to a fresh node (keeps the processes).
reset_cluster() {
  local port
  log "resetting the Redis Cluster nodes (state lost or inconsistent)"
  for port in "${CLUSTER_PORTS[@]}"; do
    redis-cli -h 127.0.0.1 -p "$port" flushall >/dev/null 2>&1 || true
    redis-cli -h 127.0.0.1 -p "$port" cluster reset hard >/dev/null ||
      die "CLUSTER RESET HARD failed on port $port"
  done
}

ensure_redis_cluster() {
  cluster_ok && return 0
  require redis-server "start the Redis Cluster"
  local port fresh=0 configured=0
  for port in "${CLUSTER_PORTS[@]}"; do
    redis_up "$port" || start_cluster_node "$port"
  done
  for port in "${CLUSTER_PORTS[@]}"; do
    wait_until "$WAIT_SECONDS" redis_up "$port" ||
      die "Redis Cluster node on port $port does not answer within ${WAIT_SECONDS}s (see $CLUSTER_DIR/$port/redis.log)"
    if cluster_node_fresh "$port"; then fresh=$((fresh + 1)); else configured=$((configured + 1)); fi
  done

  if ((configured == 0)); then
    create_cluster
  elif ((fresh > 0)); then
    # Some nodes remember the cluster, others do not: start over.
    reset_cluster
    create_cluster
  else
    # Every node remembers the cluster (e.g. restarted after a kill): let them find each other again.
    log "waiting for the Redis Cluster to recover"
    if ! wait_until "$WAIT_SECONDS" cluster_ok; then
      reset_cluster
      create_cluster
    fi
  fi
  wait_until "$WAIT_SECONDS" cluster_ok ||
    die "the Redis Cluster on ports ${CLUSTER_PORTS[*]} did not reach cluster_state:ok within ${WAIT_SECONDS}s (logs in $CLUSTER_DIR/<port>/redis.log)"
  log "Redis Cluster ok on ports ${CLUSTER_PORTS[*]}"
}

# --- ZooKeeper (standalone, 127.0.0.1:2181; files under <repo>/.services/zookeeper/) ------------

ZK_DIR="$SERVICES_DIR/zookeeper"
ZK_PORT="${SIMBA_ZK_PORT:-2181}"
ZK_JARS=(/usr/share/java/zookeeper.jar /usr/share/java/slf4j-log4j12.jar /usr/share/java/log4j-1.2.jar)

# `ruok` over bash's /dev/tcp (no netcat needed): the server answers `imok` when it serves.
zookeeper_up() {
  local reply
  reply="$(timeout 2 bash -c "exec 3<>/dev/tcp/127.0.0.1/$1 && printf ruok >&3 && cat <&3" 2>/dev/null)" || true
  [[ "$reply" == "imok" ]]
}

zookeeper_installed() {
  local jar
  for jar in "${ZK_JARS[@]}"; do [[ -f "$jar" ]] || return 1; done
  command -v java >/dev/null 2>&1
}

# The Debian package (ZooKeeper 3.8 on Debian 12), installed once; `zookeeperd` is not needed (it
# only adds a systemd unit). On a fresh machine the package lists are fetched first.
install_zookeeper() {
  local sudo=()
  if ((EUID != 0)); then
    command -v sudo >/dev/null 2>&1 || die "ZooKeeper is not installed and installing it needs root (apt-get install zookeeper)"
    sudo=(sudo -n)
  fi
  require apt-get "install ZooKeeper"
  log "installing ZooKeeper (Debian package zookeeper)"
  local output
  if ! apt-cache show zookeeper >/dev/null 2>&1; then
    output="$("${sudo[@]}" apt-get update 2>&1)" || die "apt-get update failed:
$output"
  fi
  output="$(DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends zookeeper 2>&1)" || {
    # Stale package lists (a mirror moved on): fetch them again once.
    "${sudo[@]}" apt-get update >/dev/null 2>&1 || true
    output="$(DEBIAN_FRONTEND=noninteractive "${sudo[@]}" apt-get install -y --no-install-recommends zookeeper 2>&1)" ||
      die "apt-get install zookeeper failed:
$output"
  }
  zookeeper_installed || die "the zookeeper package is installed but ${ZK_JARS[*]} or java is missing"
}

write_zookeeper_config() {
  mkdir -p "$ZK_DIR/conf" "$ZK_DIR/data"
  # tickTime 500 ms: sessions of 1..60 s (the tests use short ones); forceSync=no: test data only.
  cat >"$ZK_DIR/conf/zoo.cfg" <<EOF
tickTime=500
minSessionTimeout=1000
maxSessionTimeout=60000
dataDir=$ZK_DIR/data
clientPort=$ZK_PORT
clientPortAddress=127.0.0.1
maxClientCnxns=0
admin.enableServer=false
forceSync=no
preAllocSize=4096
EOF
  cat >"$ZK_DIR/conf/log4j.properties" <<EOF
log4j.rootLogger=INFO, FILE
log4j.appender.FILE=org.apache.log4j.RollingFileAppender
log4j.appender.FILE.File=$ZK_DIR/zookeeper.log
log4j.appender.FILE.MaxFileSize=10MB
log4j.appender.FILE.MaxBackupIndex=1
log4j.appender.FILE.layout=org.apache.log4j.PatternLayout
log4j.appender.FILE.layout.ConversionPattern=%d{ISO8601} - %-5p [%t:%C{1}@%L] - %m%n
EOF
}

ensure_zookeeper() {
  zookeeper_up "$ZK_PORT" && return 0
  zookeeper_installed || install_zookeeper
  # A server of ours that is starting (or hung) still owns the port: wait for it, never start a second.
  local pid=""
  [[ -f "$ZK_DIR/zookeeper.pid" ]] && pid="$(cat "$ZK_DIR/zookeeper.pid" 2>/dev/null || true)"
  if [[ -n "$pid" ]] && kill -0 "$pid" 2>/dev/null && grep -q ZooKeeperServerMain "/proc/$pid/cmdline" 2>/dev/null; then
    log "waiting for the ZooKeeper server already started (pid $pid)"
  else
    write_zookeeper_config
    log "starting ZooKeeper on 127.0.0.1:$ZK_PORT (${ZK_DIR#"$ROOT"/})"
    # setsid: its own session, so it outlives this script and the test run, like the Redis servers.
    setsid java -Xms64m -Xmx512m -XX:+UseSerialGC \
      -Dzookeeper.admin.enableServer=false -Dzookeeper.4lw.commands.whitelist=ruok,srvr,stat,mntr \
      -Dlog4j.configuration="file:$ZK_DIR/conf/log4j.properties" \
      -cp "$ZK_DIR/conf:$(IFS=:; echo "${ZK_JARS[*]}")" \
      org.apache.zookeeper.server.ZooKeeperServerMain "$ZK_DIR/conf/zoo.cfg" \
      </dev/null >>"$ZK_DIR/zookeeper.out" 2>&1 &
    echo $! >"$ZK_DIR/zookeeper.pid"
    disown $! 2>/dev/null || true
  fi
  wait_until "$WAIT_SECONDS" zookeeper_up "$ZK_PORT" ||
    die "ZooKeeper does not answer on 127.0.0.1:$ZK_PORT within ${WAIT_SECONDS}s (see $ZK_DIR/zookeeper.log and zookeeper.out)"
  log "ZooKeeper ok on 127.0.0.1:$ZK_PORT"
}

# The Redis backend grants nothing for one lock-delay when it finds its boot markers missing (a store
# that lost its state). The test servers are ours and start empty with nobody holding anything, so
# their markers (prefix simba, both modes) are created here without a delay; existing ones are kept.
redis_boot_markers() {
  node --import tsx "$ROOT/scripts/redis-boot-markers.ts" || die "could not create the Redis boot markers"
}

main() {
  require redis-cli "check Redis"
  require pg_isready "check PostgreSQL"
  require mariadb "check MariaDB"
  ensure_postgres
  ensure_mariadb
  ensure_redis
  ensure_redis_cluster
  redis_boot_markers
  ensure_zookeeper
}

main "$@"
