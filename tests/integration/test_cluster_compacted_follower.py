"""A follower copies a log its leader compacted while it was away
(segments/log.c L7, daemon/replication/repl_fetcher.c): a compacted topic,
RF 3; one follower is stopped before anything is written, the leader's
cleaner removes the batch at offset 0 and many after it, the follower comes
back with log end 0, and the leader's answer to its Fetch at 0 starts
further on.

What a user checks: the follower catches up and rejoins the ISR, and once
it leads (the other two stopped) it serves exactly the batches the leader
served: (BaseOffset, LastOffsetDelta, CRC) of every batch, and the records.
"""
import time

from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import leader_and_isr, make_cluster, wait_for, zk  # noqa: F401
from retention_support import FAST, metric
from support import ck_admin, ck_producer, consume, produce_ok, report, topic_name
from test_compaction import BASE, KEYS, VERSIONS, roll_active, write_versions

MID = 30


def batch_ids(b, t):
    """[(BaseOffset, LastOffsetDelta, CRC)] of every batch of t-0 up to the
    high watermark, by raw Fetch v11 from broker b (its leader), and that
    high watermark."""
    got, hw = kr.fetch_batches(b.port, t, 0)
    return [x.ident for x in got], hw


def test_a_follower_copies_a_log_compacted_while_it_was_away(make_cluster):
    c = make_cluster(3, overrides=dict(FAST, **{"replica.lag.time.max.ms": "3000"}))
    b1, b2, b3 = c.brokers
    t = topic_name("cgap")
    ck_admin(b1).create_topics([NewTopic(t, 1, replica_assignment=[[1, 2, 3]], config=BASE)],
                               operation_timeout=15)[t].result(timeout=20)
    wait_for(lambda: leader_and_isr(b1, t) == (1, (1, 2, 3)), 30, "leader 1, ISR 1,2,3")
    b3.stop()
    wait_for(lambda: leader_and_isr(b1, t) == (1, (1, 2)), 30, "broker 3 out of the ISR")

    # Two rounds of versions of the same keys around records under keys of
    # their own: the first round goes whole (a gap from 0), the middle stays,
    # the second round keeps its newest (a gap inside the log).
    write_versions(b1, t)
    produce_ok(ck_producer(b1, **{"linger.ms": 5, "batch.num.messages": 10}), t,
               [{"key": b"mid%d" % i, "value": b"m" * 50} for i in range(MID)])
    write_versions(b1, t, tag=b"w")
    roll_active(b1, t)
    wait_for(lambda: (metric(b1, "sluice_log_cleaner_runs_total", t) or 0) >= 1, 30,
             "the leader's cleaner to run")

    def settled():                   # the first round gone, and nothing more to clean
        a = batch_ids(b1, t)
        time.sleep(1.0)
        return a if a[0][0][0] == KEYS * VERSIONS and batch_ids(b1, t) == a else None
    want, hw = wait_for(settled, 30, "the leader's batches to stop changing")
    assert hw == 2 * KEYS * VERSIONS + MID + 60
    assert want[0][0] == KEYS * VERSIONS
    gaps = sum(1 for x, y in zip(want, want[1:]) if y[0] > x[0] + x[1] + 1)
    assert gaps >= 1
    n = hw - sum(lod + 1 for _, lod, _ in want)           # offsets the leader has no batch for
    count = sum(x.count for x in kr.fetch_batches(b1.port, t, 0)[0])
    records = consume(b1, t, [0], count, timeout=20, settle=0.5)
    assert len(records) == count
    records = [(m.offset(), m.key(), m.value()) for m in records]

    t0 = time.monotonic()
    b3.start()
    wait_for(lambda: leader_and_isr(b1, t) == (1, (1, 2, 3)), 60,
             "broker 3 to catch up and rejoin the ISR")
    rejoined = time.monotonic() - t0
    assert "cannot append" not in b3.log_text()

    # Broker 3 leads once the other two are gone; it serves what 1 served.
    b1.stop()
    wait_for(lambda: (leader_and_isr(b2, t) or (0,))[0] in (2, 3), 30, "a new leader")
    b2.stop()
    wait_for(lambda: leader_and_isr(b3, t) == (3, (3,)), 30, "broker 3 to lead alone")
    got, ghw = batch_ids(b3, t)
    assert ghw == hw
    assert got == want
    mine = consume(b3, t, [0], len(records), timeout=20, settle=1.0)
    assert [(m.offset(), m.key(), m.value()) for m in mine] == records
    report("compacted follower: %d batches, first at %d, %d gaps, %d offsets without a "
           "batch; rejoined the ISR in %.1f s", len(want), want[0][0], gaps, n, rejoined)
