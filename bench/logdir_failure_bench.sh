#!/bin/sh
# Time from a replica's first ENOSPC to its leader's ISR shrink (issue 28,
# "Performance": target <= 1 s), as tests/integration/test_cluster_disk_full.py
# measures it: three brokers on a real ZooKeeper, broker 3's log.dirs on a
# 4 MiB tmpfs filled by an acks=all producer (400 msgs/s of 4 KiB), broker 3
# following or leading the partition.  Two figures per run: broker 3's log
# line naming the fault to the controller's log line writing the ISR
# without it (same clock, ms resolution), and to the test seeing the shrink
# in broker 1's Metadata (polled every 50 ms, so up to 50 ms late).
#
#   sh bench/logdir_failure_bench.sh [runs]       (default 3; needs root)
#       sluiced from $SLUICED, default build/sluiced
#
# Prints each run's lines, then min / median / max of both figures and the
# longest gap between two acknowledgements.
set -eu
runs=${1:-3}
here=$(cd "$(dirname "$0")/.." && pwd)
SLUICED=${SLUICED:-$here/build/sluiced}
export SLUICED
# one pytest process: the figures are printed with -s, which xdist workers swallow
SLUICE_IT_JOBS=0
export SLUICE_IT_JOBS
out=$(mktemp)
trap 'rm -f "$out"' EXIT
i=0
while [ "$i" -lt "$runs" ]; do
    i=$((i + 1))
    sh "$here/tests/integration/run.sh" "$here/tests/integration/test_cluster_disk_full.py" \
        -s 2>&1 | grep -E "acknowledgement gap|ENOSPC ->|passed|failed" | tee -a "$out"
done
python3 - "$out" <<'PY'
import re, statistics, sys
text = open(sys.argv[1]).read()
def stats(name, xs):
    if xs:
        print("%-44s runs %2d  min %.3f s  median %.3f s  max %.3f s"
              % (name, len(xs), min(xs), statistics.median(xs), max(xs)))
written = [float(x) for x in re.findall(r"written by the controller: ([\d.]+) s", text)]
seen = [float(x) for x in re.findall(r"seen in broker 1's Metadata: ([\d.]+) s", text)]
gaps = [float(x) for x in re.findall(r"acknowledgement gap ([\d.]+) s", text)]
stats("ENOSPC -> ISR shrink written (target <= 1 s)", written)
stats("ENOSPC -> ISR shrink in leader's Metadata", seen)
stats("longest acknowledgement gap", gaps)
PY
