"""The operator's view of transactions (issue 30, Operations): the SQL
`transactions` view on the coordinating broker, the operator's abort of a
hanging transaction through it (UPDATE transactions SET state =
'CompleteAbort': the coordinator aborts it as its timeout would: epoch
bumped, markers, the LSO released), and the coordinator's counters on
/metrics (open transactions, commits, aborts, timeout and operator aborts),
with the one log line each abort writes."""
import re
import time

import kafka_raw as kr
from support import admin_socket, ck_producer, create_topic, socket_http, topic_name
from test_txn_coordinator import (INVALID_PRODUCER_EPOCH, NONE, add_partitions, end_txn,
                                  init_pid, new_producer, txid, until_settled)
from test_txn_partition import batch, produce, read, sql

INVALID_TXN_STATE_NAME = "INVALID_TXN_STATE"
FAST_TIMEOUTS = {"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"}


def sql_status(broker, query):
    """(HTTP status, body text) of one statement."""
    status, body, _ = socket_http(admin_socket(broker), "/sql?format=json", query)
    return status, body


def stable_and_hw(broker, topic):
    """partition 0's (last_stable_offset, high_watermark)."""
    (row,) = sql(broker, "SELECT last_stable_offset, high_watermark FROM partitions "
                         "WHERE topic = '%s' AND partition = 0" % topic)
    return row["last_stable_offset"], row["high_watermark"]


def txn_row(broker, tid):
    rows = sql(broker, "SELECT * FROM transactions WHERE transactional_id = '%s'" % tid)
    assert len(rows) <= 1
    return rows[0] if rows else None


def wait_state(broker, tid, state, timeout=15.0):
    deadline = time.monotonic() + timeout
    while True:
        row = txn_row(broker, tid)
        if row and row["state"] == state:
            return row
        assert time.monotonic() < deadline, row
        time.sleep(0.1)


def txn_counters(broker):
    status, text, _ = socket_http(admin_socket(broker), "/metrics")
    assert status == 200
    out = {}
    for name in ("ongoing", "committed_total", "aborted_total", "timeout_aborts_total",
                 "operator_aborts_total"):
        m = re.search(r"^sluice_transactions_%s (\d+)$" % name, text, re.M)
        assert m, name
        out[name] = int(m.group(1))
    return out


def test_the_view_shows_an_open_transaction_and_an_operator_aborts_it(broker):
    t = topic_name("txops")
    create_topic(broker, t, 2)
    tid = txid()
    with kr.Conn(broker.port) as c:
        before_ms = int(time.time() * 1000)
        pid, epoch = new_producer(c, tid, timeout_ms=600000)
        assert add_partitions(c, tid, pid, epoch, [(t, [0, 1])]) == [(t, [(0, NONE), (1, NONE)])]
        assert produce(c, t, batch([b"hang-1", b"hang-2"], pid, epoch, 0), tid) == (NONE, 0)
        row = txn_row(broker, tid)
        assert {k: row[k] for k in ("producer_id", "producer_epoch", "state", "partitions",
                                    "timeout_ms")} == \
            dict(producer_id=pid, producer_epoch=epoch, state="Ongoing",
                 partitions="%s-0,%s-1" % (t, t), timeout_ms=600000)
        assert before_ms <= row["start_time"] <= int(time.time() * 1000)
        assert stable_and_hw(broker, t) == (0, 2)      # the hanging transaction holds the LSO
        assert txn_counters(broker)["ongoing"] == 1
        counted = txn_counters(broker)

        # what the operator may not do, with the reason
        st, body = sql_status(broker, "DELETE FROM transactions WHERE transactional_id = '%s'"
                              % tid)
        assert st != 200 and "UPDATE transactions SET state to CompleteAbort" in body
        st, body = sql_status(broker, "UPDATE transactions SET state = 'CompleteCommit' "
                                      "WHERE transactional_id = '%s'" % tid)
        assert st != 200 and "only UPDATE transactions SET state" in body
        assert txn_row(broker, tid)["state"] == "Ongoing"

        # the abort: as a timeout would, the epoch bumped and the markers written
        st, body = sql_status(broker, "UPDATE transactions SET state = 'CompleteAbort' "
                                      "WHERE transactional_id = '%s'" % tid)
        assert st == 200, body
        row = wait_state(broker, tid, "CompleteAbort")
        assert (row["producer_id"], row["producer_epoch"], row["partitions"],
                row["start_time"]) == (pid, epoch + 1, "", None)
        deadline = time.monotonic() + 10
        while stable_and_hw(broker, t) != (3, 3):       # the abort marker released it
            assert time.monotonic() < deadline, stable_and_hw(broker, t)
            time.sleep(0.1)
        # the hanging producer is fenced; a new one starts from the bumped epoch
        assert until_settled(lambda: end_txn(c, tid, pid, epoch, True)) == \
            (INVALID_PRODUCER_EPOCH,)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 2)
        assert add_partitions(c, tid, pid, epoch + 2, [(t, [0])]) == [(t, [(0, NONE)])]
        assert produce(c, t, batch([b"after"], pid, epoch + 2, 0), tid) == (NONE, 3)
        assert until_settled(lambda: end_txn(c, tid, pid, epoch + 2, True)) == (NONE,)
        # read_committed: the aborted records are not read, the committed one is
        assert read(broker, t, 1, "read_committed") == [b"after"]
        wait_state(broker, tid, "CompleteCommit")

    # an id with nothing open cannot be aborted, and says why
    st, body = sql_status(broker, "UPDATE transactions SET state = 'CompleteAbort' "
                                  "WHERE transactional_id = '%s'" % tid)
    assert st != 200 and INVALID_TXN_STATE_NAME in body and "CompleteCommit" in body
    got = txn_counters(broker)
    assert got["committed_total"] - counted["committed_total"] == 1
    assert (got["ongoing"], got["aborted_total"] - counted["aborted_total"],
            got["operator_aborts_total"] - counted["operator_aborts_total"],
            got["timeout_aborts_total"] - counted["timeout_aborts_total"]) == (0, 1, 1, 0)
    lines = [x for x in broker.log_text().splitlines()
             if "aborting transaction %s " % tid in x]
    assert len(lines) == 1 and lines[0].endswith("at an operator's request (SQL)"), lines


def test_metrics_count_commits_aborts_and_timeouts(start_broker):
    b = start_broker(FAST_TIMEOUTS)
    t = topic_name("txopsm")
    create_topic(b, t, 1)
    start = txn_counters(b)
    p = ck_producer(b, **{"transactional.id": txid()})
    p.init_transactions(30)
    for commit in (True, False, True):
        p.begin_transaction()
        p.produce(t, b"v", partition=0)
        assert p.flush(30) == 0           # written: the abort has markers to write too
        (p.commit_transaction if commit else p.abort_transaction)(30)
    # a producer that disappears: its transaction outlives its timeout
    tid = txid()
    with kr.Conn(b.port) as c:
        pid, epoch = new_producer(c, tid, timeout_ms=1000)
        assert add_partitions(c, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        assert produce(c, t, batch([b"lost"], pid, epoch, 0), tid)[0] == NONE
    wait_state(b, tid, "CompleteAbort")
    deadline = time.monotonic() + 10
    while True:
        got = txn_counters(b)
        delta = {k: got[k] - start[k] for k in got}
        if delta["aborted_total"] >= 2 or time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert delta == dict(ongoing=0, committed_total=2, aborted_total=2,
                         timeout_aborts_total=1, operator_aborts_total=0)
    assert sum("aborting transaction %s " % tid in x and x.endswith("past its timeout")
               for x in b.log_text().splitlines()) == 1
    # the committed values, in order; the aborted and timed-out ones are not read
    assert read(b, t, 2, "read_committed") == [b"v", b"v"]
    # the producer of the aborted one was fenced by the timeout, not by a client
    p2 = ck_producer(b, **{"transactional.id": tid})
    p2.init_transactions(30)
    p2.begin_transaction()
    p2.produce(t, b"after", partition=0)
    p2.commit_transaction(30)
    assert read(b, t, 3, "read_committed") == [b"v", b"v", b"after"]
