#!/bin/sh
# bench/link_bench.sh — a mirror topic catching up with a source topic far
# behind (issue 33, "Performance"), against a consumer's read of the same
# data on the same machine in the same run: two standalone sluiced on free
# loopback ports, a topic of MIB MiB (1 KiB records, 4 partitions) produced
# to the source first, then
#   consume   sluice-bench --consume of the whole topic from the source
#   mirror    a cluster link and a mirror topic on the destination, timed
#             from the INSERT until every mirror partition's log end is
#             the source's
# Each printed as MiB/s; the ratio mirror/consume.  Run it under
# `flock /tmp/sluice-bench.lock` (the machine is shared).
#
#   bench/link_bench.sh [MIB]        (default 512; build/ from `make`)
set -eu
MIB=${1:-512}
B=${BUILD:-build}
TMP=$(mktemp -d /tmp/sluice-link-bench.XXXXXX)
PIDS=""
cleanup() { for p in $PIDS; do kill "$p" 2>/dev/null || true; done; wait 2>/dev/null || true
            rm -rf "$TMP"; }
trap cleanup EXIT INT TERM

port() { python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'; }

start() {   # name port
    mkdir -p "$TMP/$1"
    "$B/sluiced" -c examples/standalone.properties \
        --override listeners=PLAINTEXT://127.0.0.1:$2 \
        --override advertised.listeners=PLAINTEXT://127.0.0.1:$2 \
        --override log.dirs="$TMP/$1" --override admin.listeners=none \
        --override admin.socket="$TMP/$1/admin.sock" >"$TMP/$1.log" 2>&1 &
    PIDS="$PIDS $!"
    for _ in $(seq 100); do [ -S "$TMP/$1/admin.sock" ] && return; sleep 0.1; done
    echo "sluiced $1 did not start" >&2; cat "$TMP/$1.log" >&2; exit 1
}
sql() { "$B/sluice-sql" --socket "$TMP/$1/admin.sock" -c "$2"; }
now() { date +%s.%N; }

SP=$(port); DP=$(port)
start src "$SP"; start dst "$DP"
sql src "INSERT INTO topics (name, partitions) VALUES ('bench', 4)" >/dev/null
N=$((MIB * 1024))
"$B/sluice-bench" -q -b 127.0.0.1:$SP -t bench --produce -s 1000 -n $N >/dev/null 2>&1
END=$(sql src "SELECT sum(log_end_offset) FROM partitions WHERE topic = 'bench'" | tr -dc 0-9)

t0=$(now)
"$B/sluice-bench" -q -b 127.0.0.1:$SP -t bench --consume -n $N >/dev/null 2>&1
t1=$(now)
sql dst "INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '127.0.0.1:$SP')" >/dev/null
t2=$(now)
sql dst "INSERT INTO mirror_topics (topic, link) VALUES ('bench', 'src')" >/dev/null
while :; do
    GOT=$(sql dst "SELECT coalesce(sum(log_end_offset), 0) FROM partitions WHERE topic = 'bench'" | tr -dc 0-9)
    [ "${GOT:-0}" -ge "$END" ] && break
    sleep 0.05
done
t3=$(now)
python3 - "$MIB" "$t0" "$t1" "$t2" "$t3" <<'EOF'
import sys
mib, t0, t1, t2, t3 = int(sys.argv[1]), *map(float, sys.argv[2:])
c, m = mib / (t1 - t0), mib / (t3 - t2)
print("link_bench: %d MiB, 4 partitions, 1 KiB records" % mib)
print("consume  %.0f MiB/s (%.2f s)" % (c, t1 - t0))
print("mirror   %.0f MiB/s (%.2f s)" % (m, t3 - t2))
print("ratio mirror/consume %.2f" % (m / c))
EOF
