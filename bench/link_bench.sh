#!/bin/sh
# bench/link_bench.sh — issue 33's "Performance", in one run:
#   catch-up  cluster_bench's catchup step (BENCH_STEPS=catchup: a follower
#             of a one-partition RF-2 topic MIB MiB behind, from its start
#             to its return to the ISR), then a mirror topic MIB MiB behind
#             (one partition, 1 KiB records, a standalone source and a
#             standalone destination), from the INSERT of the mirror topic
#             to its log end being the source's: both MiB/s and the ratio
#             mirror/follower (target >= 0.8).
#   cost      the source's CPU (utime+stime of its sluiced, /proc/PID/stat)
#             per GB while sluice-bench --consume reads the topic and while
#             the mirror copies it: both and the ratio (target <= 1.2).
#   lag       bench/link_lag.py: 10,000 records/s of 1 KiB for 20 s to a
#             mirrored topic, read from the mirror as they come: p50, p99
#             (target p99 <= 500 ms).
# The two standalone brokers flush as cluster_bench's do (examples/
# standalone.properties' log.flush.interval.ms=1000 overridden: left to the
# OS, the default); $FLUSH_MS sets it for both to compare.
# Run it under `flock /tmp/sluice-bench.lock` (the machine is shared; it
# does not take the lock itself: cluster_bench runs inside it).
#
#   bench/link_bench.sh [MIB]    (default 1024; build/ from `make`;
#                                 $LAG_SECS, $LAG_RATE change the lag step)
set -eu
MIB=${1:-1024}
LAG_SECS=${LAG_SECS:-20}
LAG_RATE=${LAG_RATE:-10000}
FLUSH_MS=${FLUSH_MS:-9223372036854775807}
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
        --override log.flush.interval.ms="$FLUSH_MS" \
        --override admin.socket="$TMP/$1/admin.sock" >"$TMP/$1.log" 2>&1 &
    PIDS="$PIDS $!"
    for _ in $(seq 100); do [ -S "$TMP/$1/admin.sock" ] && return; sleep 0.1; done
    echo "sluiced $1 did not start" >&2; cat "$TMP/$1.log" >&2; exit 1
}
sql() { "$B/sluice-sql" --socket "$TMP/$1/admin.sock" -c "$2"; }
now() { date +%s.%N; }
cpu() { awk '{print $14 + $15}' "/proc/$1/stat"; }     # clock ticks
log_end() {   # broker topic
    sql "$1" "SELECT coalesce(sum(log_end_offset), 0) FROM partitions WHERE topic = '$2'" |
        tr -dc 0-9
}

FOLLOWER=$(BENCH_STEPS=catchup "$B/bench/cluster_bench" "$B/sluiced" 0 0 0 "$MIB" 2>&1 |
           grep '^catch-up: follower' || true)
[ -n "$FOLLOWER" ] || { echo "link_bench: cluster_bench's catchup step failed" >&2; exit 1; }

SP=$(port); DP=$(port)
start src "$SP"; SPID=${PIDS# }; start dst "$DP"
sql src "INSERT INTO topics (name, partitions) VALUES ('bench', 1)" >/dev/null
N=$((MIB * 1024))
"$B/sluice-bench" -q -b 127.0.0.1:$SP -t bench --produce -s 1024 -n $N >/dev/null 2>&1
END=$(log_end src bench)
[ "$END" -eq "$N" ] || { echo "link_bench: the source has $END records, not $N" >&2; exit 1; }
BYTES=$(du -sb "$TMP/src/bench-0" | cut -f1)
# The source's gigabyte written back first: the mirror's appends would
# otherwise start with it dirty and meet the kernel's dirty-page throttling
# (vm.dirty_ratio) that the follower, writing first, does not.
sync -f "$TMP/src/bench-0"

c0=$(cpu "$SPID"); t0=$(now)
"$B/sluice-bench" -q -b 127.0.0.1:$SP -t bench --consume -n $N >/dev/null 2>&1
t1=$(now); c1=$(cpu "$SPID")
sql dst "INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '127.0.0.1:$SP')" >/dev/null
c2=$(cpu "$SPID"); t2=$(now)
sql dst "INSERT INTO mirror_topics (topic, link) VALUES ('bench', 'src')" >/dev/null
while [ "$(log_end dst bench)" -lt "$END" ]; do sleep 0.02; done
t3=$(now); c3=$(cpu "$SPID")

# lag: a mirror of a topic being produced to, read from as it comes
sql src "INSERT INTO topics (name, partitions) VALUES ('lag', 1)" >/dev/null
sql dst "INSERT INTO mirror_topics (topic, link) VALUES ('lag', 'src')" >/dev/null
for _ in $(seq 200); do
    [ -n "$(sql dst "SELECT partition FROM partitions WHERE topic = 'lag'" | tr -dc 0-9)" ] &&
        break
    sleep 0.05
done
LAG=$(/usr/bin/python3 bench/link_lag.py 127.0.0.1:$SP 127.0.0.1:$DP lag "$LAG_RATE" 1024 \
      "$LAG_SECS" 2>&1 || true)

python3 - "$MIB" "$BYTES" "$(getconf CLK_TCK)" "$t0" "$t1" "$t2" "$t3" "$c0" "$c1" "$c2" "$c3" \
    "$FOLLOWER" "$LAG" "$FLUSH_MS" <<'PY'
import re, sys
mib, nbytes, hz = int(sys.argv[1]), int(sys.argv[2]), int(sys.argv[3])
t0, t1, t2, t3, c0, c1, c2, c3 = map(float, sys.argv[4:12])
follower, lag, flush = sys.argv[12], sys.argv[13], sys.argv[14]
fm = re.search(r"= (\d+) MB/s \((-?\d+) MB/s from its listening on\)", follower)
f, fl = (float(fm.group(1)) * 1e6 / 2**20, float(fm.group(2)) * 1e6 / 2**20) if fm else (0, 0)
m, c = mib / (t3 - t2), mib / (t1 - t0)
gb = nbytes / 1e9
cc, cm = (c1 - c0) / hz / gb, (c3 - c2) / hz / gb
print("link_bench: %d MiB, one partition, 1 KiB records, log.flush.interval.ms %s; reproduce "
      "with: flock /tmp/sluice-bench.lock sh bench/link_bench.sh %d" % (mib, flush, mib))
print(follower)
print("catch-up: follower %.0f MiB/s (%.0f from its listening on); mirror %.0f MiB/s (%.2f s "
      "from the mirror's INSERT); ratio mirror/follower %.2f (target >= 0.8; %.2f against the "
      "rate from listening)" % (f, fl, m, t3 - t2, m / f if f else 0, m / fl if fl > 0 else 0))
print("cost: source CPU per GB served: to sluice-bench --consume %.2f s (%.0f MiB/s), to the "
      "link %.2f s (%.0f MiB/s); ratio link/consumer %.2f (target <= 1.2)"
      % (cc, c, cm, m, cm / cc if cc else 0))
print(lag.strip())
PY
