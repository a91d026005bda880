#!/bin/sh
# Two sluiced binaries, before and after a change, alternated in one run:
# fetch_bench (Fetch MB/s) and rdkafka_produce_bench (librdkafka produce
# msgs/s), ROUNDS times each, then callgrind_requests (instructions per
# request, which the machine's noise does not move).  Prints every figure and
# the after/before ratio of the medians.
#   sh bench/before_after.sh BEFORE_SLUICED AFTER_SLUICED [ROUNDS]
set -eu
[ $# -ge 2 ] || { echo "usage: $0 BEFORE_SLUICED AFTER_SLUICED [ROUNDS]" >&2; exit 2; }
before=$1 after=$2 rounds=${3:-3}
bin=$(cd "$(dirname "$0")/.." && pwd)/build/bench
tmp=$(mktemp -d /tmp/sluice-ba-XXXXXX)
trap 'rm -rf "$tmp"' EXIT
i=0
while [ $i -lt "$rounds" ]; do
    for which in before after; do
        eval b=\$$which
        "$bin/fetch_bench" "$b" 256 2>&1 | sed -n 's/.*passes over .*: \([0-9.]*\) MB\/s.*/\1/p' >> "$tmp/fetch.$which"
        "$bin/rdkafka_produce_bench" "$b" 500000 2>&1 | sed -n 's/^produce  sluice .*s: *\([0-9]*\) msgs\/s.*/\1/p' >> "$tmp/produce.$which"
    done
    i=$((i + 1))
done
median() { sort -n "$1" | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
for m in fetch produce; do
    unit=$( [ $m = fetch ] && echo "MB/s" || echo "msgs/s" )
    echo "$m before: $(tr '\n' ' ' < "$tmp/$m.before")$unit  median $(median "$tmp/$m.before")"
    echo "$m after:  $(tr '\n' ' ' < "$tmp/$m.after")$unit  median $(median "$tmp/$m.after")"
    echo "$m after/before (medians): $(awk -v a="$(median "$tmp/$m.after")" -v b="$(median "$tmp/$m.before")" 'BEGIN {printf "%.3f", a / b}')"
done
"$bin/callgrind_requests" "$before" "$after"
