#!/bin/sh
# Integration tests: real clients (kcat, confluent-kafka, kafka-python)
# against a real sluiced.  `make integration` sets SLUICED to the binary.
#
# pytest's exit 5 ("no tests collected") is a failure here: a suite that
# silently runs nothing must not pass.  The whole run is bounded so a hung
# broker cannot hang `make check`.
set -u
here=$(cd "$(dirname "$0")" && pwd)
: "${SLUICED:=$here/../../build/sluiced}"
export SLUICED
if [ ! -x "$SLUICED" ]; then
    echo "run.sh: sluiced not found at $SLUICED (make build/sluiced)" >&2
    exit 1
fi
# Extra arguments replace the default target (e.g. `sh run.sh -x tests/integration/test_admin.py`).
[ $# -eq 0 ] && set -- "$here"
# Every process of this run carries the mark in its environment (the
# harness passes its own on to what it starts), so what is left at the end
# can be found by PID: /proc/PID/environ.
SLUICE_IT_RUN="run.sh-$$-$(date +%s)"
export SLUICE_IT_RUN
# Three workers side by side (conftest.py X1-X3: a module stays on one
# worker, tests marked serial run alone); SLUICE_IT_JOBS=0 runs everything
# in this one process.  Three on two cores: most tests wait (on a session
# timeout, a SIGKILLed process, a client's backoff) rather than compute;
# a run of the whole suite with three, on the 2-core machine loaded by
# other builds (load 10), passed in 1,096 s where two took 937 s unloaded.
jobs=${SLUICE_IT_JOBS:-3}
[ "$jobs" = 0 ] && par= || par="-n $jobs --dist loadgroup"
PYTHONDONTWRITEBYTECODE=1 timeout -k 10 "${SLUICE_IT_TIMEOUT:-1800}" \
    /usr/bin/python3 -m pytest -v -p no:cacheprovider --durations=20 -rs $par "$@"
rc=$?
case $rc in
    0) ;;
    5) echo "run.sh: pytest collected no tests" >&2; rc=1 ;;
    124|137) echo "run.sh: integration tests timed out" >&2 ;;
esac
# The harness stops what it starts (conftest.py, cluster_support.py C1): a
# process of the run still alive here is a bug of the harness or of a test.
# Listed, killed by PID, and the run fails.  (The scanner does not carry the
# mark, so it does not find itself.)
left=$(env -u SLUICE_IT_RUN /usr/bin/python3 "$here/leftovers.py" "$SLUICE_IT_RUN" $$)
if [ -n "$left" ]; then
    echo "run.sh: processes of this run still alive after it, killed:" >&2
    echo "$left" >&2
    [ $rc -eq 0 ] && rc=1
fi
exit $rc
