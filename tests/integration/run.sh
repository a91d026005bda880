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
PYTHONDONTWRITEBYTECODE=1 timeout -k 10 "${SLUICE_IT_TIMEOUT:-1800}" \
    /usr/bin/python3 -m pytest -v -p no:cacheprovider --durations=10 -rs "$@"
rc=$?
case $rc in
    0) ;;
    5) echo "run.sh: pytest collected no tests" >&2; rc=1 ;;
    124|137) echo "run.sh: integration tests timed out" >&2 ;;
esac
exit $rc
