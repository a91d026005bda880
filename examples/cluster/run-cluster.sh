#!/bin/sh
# `make run-cluster`: ZooKeeper (data in a fresh temp dir) and three
# brokers on loopback, in the foreground; Ctrl-C stops them all.
#
#   ZooKeeper   127.0.0.1:2181   brokers under the chroot /sluice
#   broker 1    127.0.0.1:9092   admin (SQL) 127.0.0.1:9644
#   broker 2    127.0.0.1:9093   admin (SQL) 127.0.0.1:9645
#   broker 3    127.0.0.1:9094   admin (SQL) 127.0.0.1:9646
#
# ZooKeeper's data lives in a temp dir for one run, so every run is a new
# cluster: the brokers' data (./data/cluster/broker-N) and the logs
# (./data/cluster/*.log) of the previous run are cleared at the start, since
# brokers holding topics their new ZooKeeper never heard of would belong to
# another cluster.
# Every process is stopped by the PID this script started (SIGTERM, then
# SIGKILL after 10 s), whatever ends the script.
#
# LINKED=1 (`make run-cluster LINKED=1`) also starts a second cluster, a
# disaster-recovery copy of the first (README "Several clusters"): three
# brokers on the same ZooKeeper under the chroot /sluice-dr, and a cluster
# link 'main' from it to the first cluster:
#
#   dr broker 1 127.0.0.1:9192   admin (SQL) 127.0.0.1:9744
#   dr broker 2 127.0.0.1:9193   admin (SQL) 127.0.0.1:9745
#   dr broker 3 127.0.0.1:9194   admin (SQL) 127.0.0.1:9746
set -u
cd "$(dirname "$0")/../.."
here=examples/cluster
: "${SLUICED:=build/sluiced}"
: "${SLUICE_SQL:=build/sluice-sql}"
ZK_PORT=2181
KAFKA_PORTS="9092 9093 9094"
ADMIN_PORTS="9644 9645 9646"
: "${LINKED:=}"
DR_PORTS="9192 9193 9194"
DR_ADMIN_PORTS="9744 9745 9746"
[ -n "$LINKED" ] && [ "$LINKED" != 0 ] || { LINKED=; DR_PORTS=; DR_ADMIN_PORTS=; }

for f in "$SLUICED" "$SLUICE_SQL"; do
    [ -x "$f" ] || { echo "run-cluster: $f not built (make $f)" >&2; exit 1; }
done

# 0 when something accepts connections on 127.0.0.1:$1.
port_busy() {
    python3 -c 'import socket,sys
s = socket.socket()
s.settimeout(0.5)
sys.exit(0 if s.connect_ex(("127.0.0.1", int(sys.argv[1]))) == 0 else 1)' "$1"
}
for p in $ZK_PORT $KAFKA_PORTS $ADMIN_PORTS $DR_PORTS $DR_ADMIN_PORTS; do
    if port_busy "$p"; then
        echo "run-cluster: 127.0.0.1:$p is already in use (another run-cluster or make run?)" >&2
        exit 1
    fi
done

tmp=$(mktemp -d "${TMPDIR:-/tmp}/sluice-zk-XXXXXX")
if [ -d data/cluster ]; then
    echo "run-cluster: a new cluster: clearing the previous run's data/cluster"
    rm -rf data/cluster
fi
mkdir -p data/cluster
pids=""          # "name:pid" of everything started, ZooKeeper first
done_=0
sleeper=""       # the wait loop's sleep

stop_all() {
    [ "$done_" = 1 ] && return
    done_=1
    trap - INT TERM EXIT
    echo
    echo "run-cluster: stopping"
    # Brokers first (newest first), ZooKeeper last: a broker that loses
    # ZooKeeper before it stops would only log the outage.
    rev=""
    for e in $pids; do rev="$e $rev"; done
    for e in $rev; do
        name=${e%%:*}; pid=${e#*:}
        if ! kill -TERM "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null
            echo "run-cluster: $name (pid $pid) had already stopped"
            continue
        fi
        i=0
        while kill -0 "$pid" 2>/dev/null && [ $i -lt 100 ]; do sleep 0.1; i=$((i + 1)); done
        if kill -0 "$pid" 2>/dev/null; then
            echo "run-cluster: $name (pid $pid) ignored SIGTERM for 10 s: SIGKILL"
            kill -KILL "$pid" 2>/dev/null
        fi
        wait "$pid" 2>/dev/null
        echo "run-cluster: $name (pid $pid) stopped"
    done
    [ -n "$sleeper" ] && kill "$sleeper" 2>/dev/null
    rm -rf "$tmp"
}
on_signal() { stop_all; exit 130; }
trap on_signal INT TERM
trap stop_all EXIT

fail() {
    echo "run-cluster: $1" >&2
    [ -n "${2:-}" ] && { echo "----- last lines of $2 -----" >&2; tail -20 "$2" >&2; }
    exit 1
}

# ---- ZooKeeper -------------------------------------------------------------------
{ cat "$here/zookeeper.cfg"; echo "dataDir=$tmp/data"; } > "$tmp/zoo.cfg"
zklog=data/cluster/zookeeper.log
sh "$here/zookeeper-server.sh" "$tmp/zoo.cfg" "$tmp" > "$zklog" 2>&1 &
zkpid=$!
pids="zookeeper:$zkpid"
# Serving once srvr names a mode: imok alone comes before the database is loaded.
python3 -c 'import socket, sys, time
def ask(w):
    try:
        with socket.create_connection(("127.0.0.1", int(sys.argv[1])), timeout=0.5) as s:
            s.sendall(w.encode()); out = b""
            while True:
                c = s.recv(4096)
                if not c: return out.decode(errors="replace")
                out += c
    except OSError:
        return ""
end = time.monotonic() + 30
while time.monotonic() < end:
    if ask("ruok") == "imok" and "Mode: " in ask("srvr"): sys.exit(0)
    time.sleep(0.1)
sys.exit(1)' "$ZK_PORT" || fail "ZooKeeper did not start within 30 s" "$zklog"
kill -0 "$zkpid" 2>/dev/null || fail "ZooKeeper exited" "$zklog"

# ---- brokers ---------------------------------------------------------------------
# each_broker PREFIX "PORTS" "ADMIN_PORTS" CMD: CMD NAME I KAFKA_PORT ADMIN_PORT
# for broker I of a cluster (NAME is PREFIX followed by I).
each_broker() {
    eb_i=0
    for eb_kp in $2; do
        eb_i=$((eb_i + 1))
        "$4" "$1$eb_i" "$eb_i" "$eb_kp" "$(echo $3 | cut -d' ' -f$eb_i)"
    done
}
# start_broker NAME I KAFKA_PORT ADMIN_PORT: broker I's properties; the
# second cluster's (LINKED=1, dr-*) with its own ports, data, chroot and no
# schema registry.
start_broker() {
    sb_name=$1 sb_kp=$3 sb_ap=$4
    mkdir -p "data/cluster/$sb_name"
    set -- -c "$here/broker$2.properties"
    case $sb_name in
    dr-*) set -- "$@" \
              --override listeners=PLAINTEXT://127.0.0.1:$sb_kp \
              --override advertised.listeners=PLAINTEXT://127.0.0.1:$sb_kp \
              --override log.dirs=./data/cluster/$sb_name \
              --override admin.listeners=http://127.0.0.1:$sb_ap \
              --override schema.registry.listeners=none \
              --override zookeeper.connect=127.0.0.1:$ZK_PORT/sluice-dr ;;
    esac
    "$SLUICED" "$@" > "data/cluster/$sb_name.log" 2>&1 &
    pids="$pids $sb_name:$!"
}
# pid_of NAME: its pid (of $pids)
pid_of() {
    echo "$pids" | tr ' ' '\n' | sed -n "s/^$1://p"
}
# until_listening NAME I KAFKA_PORT ADMIN_PORT: waits for NAME to listen
until_listening() {
    pid=$(pid_of "$1")
    n=0
    until port_busy "$3"; do
        kill -0 "$pid" 2>/dev/null || fail "$1 exited during startup" "data/cluster/$1.log"
        n=$((n + 1))
        [ $n -lt 300 ] || fail "$1 not listening on $3 within 30 s" "data/cluster/$1.log"
        sleep 0.1
    done
}
# show_broker NAME I KAFKA_PORT ADMIN_PORT: its line of the banner
show_broker() {
    printf '  %-10s 127.0.0.1:%s  admin 127.0.0.1:%s  pid %s  log data/cluster/%s.log\n' \
        "$(echo "${1%-*}" | tr - ' ') $2" "$3" "$4" "$(pid_of "$1")" "$1"
}
each_broker broker- "$KAFKA_PORTS" "$ADMIN_PORTS" start_broker
each_broker dr-broker- "$DR_PORTS" "$DR_ADMIN_PORTS" start_broker
each_broker broker- "$KAFKA_PORTS" "$ADMIN_PORTS" until_listening
each_broker dr-broker- "$DR_PORTS" "$DR_ADMIN_PORTS" until_listening
if [ -n "$LINKED" ]; then
    ap=$(echo $DR_ADMIN_PORTS | cut -d' ' -f1)
    bs=$(echo $KAFKA_PORTS | sed 's/\([0-9]*\)/127.0.0.1:\1/g; s/ /,/g')
    n=0
    until "$SLUICE_SQL" -b "127.0.0.1:$ap" -c \
          "INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('main', '$bs')" \
          > data/cluster/link.out 2>&1; do
        n=$((n + 1))
        [ $n -lt 100 ] || fail "the cluster link could not be created" data/cluster/link.out
        sleep 0.3             # the second cluster's controller is being elected
    done
fi

cat <<EOF

Sluice cluster running (Ctrl-C stops everything):
  ZooKeeper  127.0.0.1:$ZK_PORT  pid $zkpid  chroot /sluice  log $zklog  data $tmp/data
EOF
each_broker broker- "$KAFKA_PORTS" "$ADMIN_PORTS" show_broker
if [ -n "$LINKED" ]; then
    echo
    echo "Second cluster (ZooKeeper chroot /sluice-dr), linked to the first as 'main':"
    each_broker dr-broker- "$DR_PORTS" "$DR_ADMIN_PORTS" show_broker
    cat <<EOF

Mirror a topic of the first cluster into the second (same offsets), watch it,
fail it over and produce to it there:
  echo k:v | kcat -b 127.0.0.1:9092 -P -t clicks -K:
  $SLUICE_SQL -b 127.0.0.1:9744 -c "insert into mirror_topics (topic, link) values ('clicks', 'main')"
  $SLUICE_SQL -b 127.0.0.1:9744 -c "select topic, state, lag, last_error from mirror_topics"
  kcat -b 127.0.0.1:9192 -C -t clicks -e -f '%p %o %k %s\\n'
  echo x:y | kcat -b 127.0.0.1:9192 -P -t clicks -K:     # refused: a mirror takes no producer
  $SLUICE_SQL -b 127.0.0.1:9745 -c "update mirror_topics set state = 'failed_over' where topic = 'clicks'"
  echo x:y | kcat -b 127.0.0.1:9192 -P -t clicks -K: -X enable.idempotence=true   # taken now
EOF
fi
cat <<EOF

Try:
  kcat -b 127.0.0.1:9092 -L
  $SLUICE_SQL -b 127.0.0.1:9644 -c "select * from brokers"
  $SLUICE_SQL -b 127.0.0.1:9645 -c "select topic, partition, leader, replicas, isr from partitions"
  kill <pid of a broker>      # then watch the leaders move in the partitions table
  $SLUICED -c $here/broker2.properties   # brings broker 2 back (stop it yourself)
EOF

# Wait for Ctrl-C, saying when a process dies meanwhile (killing a
# broker is part of the tour; ZooKeeper dying is not).
reported=""
while :; do
    for e in $pids; do
        name=${e%%:*}; pid=${e#*:}
        case " $reported " in *" $pid "*) continue ;; esac
        if ! kill -0 "$pid" 2>/dev/null; then
            wait "$pid" 2>/dev/null; rc=$?
            echo "run-cluster: $name (pid $pid) exited with status $rc"
            reported="$reported $pid"
        fi
    done
    sleep 1 &
    sleeper=$!
    wait $sleeper 2>/dev/null
done
