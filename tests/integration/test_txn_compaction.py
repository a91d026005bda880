"""A compacted transactional topic (issue 30, Deliver items 2 and 7): a
confluent-kafka transactional producer commits and aborts rounds of values
over the same keys; once the background cleaner has run, read_committed and
read_uncommitted readers alike see each key's latest committed value and
never an aborted one; the markers of transactions whose records all went
are stamped with a delete horizon and, delete.retention.ms later, leave the
log (segments/cleaner.c X3), which the raw batches of the partition show,
and the readers still read the same.  The newest batch of each live producer
stays even when none of its records does, as a batch with no records
(cleaner.c X5, Kafka's RETAIN_EMPTY), so that a producer state rebuilt from
the log still knows the producer."""
import os
import re
import time
import uuid

import kafka_raw as kr
from retention_support import fast_broker, metric, wait_for, watermarks
from support import ck_producer, create_topic, produce_ok, topic_name
from test_compaction import read_log

KEYS = [b"key%02d" % k for k in range(10)]
# the producer's last round commits: its newest batch then holds live values
# (a last batch left without records stays, empty: the second test)
COMMITS = {0: True, 1: True, 2: False, 3: True, 4: False, 5: True, 6: False, 7: True}
LAST_COMMITTED = 7
RETENTION_S = 3.0
ATTR_CONTROL, ATTR_DELETE_HORIZON = 0x20, 0x40


def value(rnd, key):
    return b"r%d-" % rnd + key + b"." * 40


def write_rounds(b, t):
    """One transaction per round over every key (plus a key only aborted
    rounds write), committed or aborted as COMMITS says.  Returns the time
    just before the last round's end, which its marker follows."""
    p = ck_producer(b, **{"transactional.id": "compact-" + uuid.uuid4().hex,
                          "linger.ms": 5})
    p.init_transactions(30)
    t_last = None
    for rnd, commit in sorted(COMMITS.items()):
        p.begin_transaction()
        for k in KEYS:
            p.produce(t, key=k, value=value(rnd, k), partition=0)
        if not commit:
            p.produce(t, key=b"aborted-only", value=value(rnd, b"aborted-only"), partition=0)
        p.flush(30)
        t_last = time.monotonic()              # the round's marker comes after this
        if commit:
            p.commit_transaction(30)
        else:
            p.abort_transaction(30)
    return t_last


def roll_active(b, t, tag, n=60):
    """Filler under other keys, so the rounds leave the active segment."""
    p = ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 20})
    produce_ok(p, t, [{"key": b"filler-%s-%d" % (tag, i), "value": b"f" * 80}
                      for i in range(n)])


def read_all(b, t, isolation):
    """Every record a consumer at this isolation level gets, start to end."""
    return read_log(b, t, **{"isolation.level": isolation})


def round_values(got):
    """{key: [values in log order]} of the round keys (filler left out)."""
    seen = {}
    for m in got:
        if not m.key().startswith(b"filler"):
            seen.setdefault(m.key(), []).append(m.value())
    return seen


def compacted(got):
    """Each key once, its latest committed value; no aborted value."""
    return round_values(got) == {k: [value(LAST_COMMITTED, k)] for k in KEYS}


def batches(b, t):
    """(base offset, attributes) of every batch in the partition."""
    return [(h["base"], h["attrs"]) for h in headers(b, t)]


def headers(b, t):
    """The header of every batch in the partition (base, attrs, pid, epoch,
    seq, delta, count), from a raw read_uncommitted Fetch walked to the
    high watermark."""
    got, _ = kr.fetch_batches(b.port, t, 0)
    return [dict(base=x.base, attrs=x.attrs, pid=x.pid, epoch=x.epoch, seq=x.seq,
                 delta=x.last_delta, count=x.count) for x in got]


def markers(b, t):
    """(every marker's offset, those stamped with a delete horizon)."""
    ms = [(off, a) for off, a in batches(b, t) if a & ATTR_CONTROL]
    return [off for off, _ in ms], [off for off, a in ms if a & ATTR_DELETE_HORIZON]


def test_compacted_transactional_topic_keeps_committed_values_and_sheds_empty_markers(
        start_broker):
    b = fast_broker(start_broker)
    t = topic_name("txncompact")
    create_topic(b, t, 1, {"cleanup.policy": "compact", "segment.bytes": "4096",
                           "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0",
                           "delete.retention.ms": "%d" % (RETENTION_S * 1000)})
    t_last = write_rounds(b, t)
    before, _ = markers(b, t)
    assert len(before) == len(COMMITS)                     # one marker per round
    roll_active(b, t, b"a")             # also: the log ends in a record, not a marker
    for isolation in ("read_committed", "read_uncommitted"):
        got = wait_for("a compaction (%s)" % isolation,
                       lambda: compacted(read_all(b, t, isolation)), timeout=30)
        assert got
    assert (metric(b, "sluice_log_cleaner_runs_total", t) or 0) >= 1

    # Every round's marker is still there; those of the transactions that
    # have no record left (every round but the last committed one) carry a
    # delete horizon, the last committed one does not.
    keep = before[LAST_COMMITTED]
    stamped_all = (before, [off for off in before if off != keep])
    got = wait_for("the empty transactions' markers stamped",
                   lambda: markers(b, t) in (stamped_all, ([keep], [])), timeout=30)
    assert got

    def shed():
        return markers(b, t) == ([keep], [])
    wait_for("the empty transactions' markers to go", shed, timeout=RETENTION_S + 30)
    assert time.monotonic() - t_last >= RETENTION_S        # not before their horizon
    removed = re.findall(r"compacted %s-0: .* and (\d+) transaction markers past" % t,
                         b.log_text())
    assert sum(map(int, removed)) == len(COMMITS) - 1, removed
    for isolation in ("read_committed", "read_uncommitted"):
        assert compacted(read_all(b, t, isolation)), isolation

    # A restart loads the same log: the same markers, the same values.
    b.restart()
    assert markers(b, t) == ([keep], [])
    for isolation in ("read_committed", "read_uncommitted"):
        assert compacted(read_all(b, t, isolation)), isolation
    # No aborted transaction has a record left, so no index entry either
    # (cleaner.c X4): the .txnindex files are gone.  Losing the producer
    # snapshots too (a power cut) replays the cleaned log from its start
    # to the same state: no transaction left open (read_committed reads to
    # the high watermark), no index entry invented, the same markers.
    d = b.partition_dir(t)
    assert not [f for f in os.listdir(d) if f.endswith(".txnindex")], os.listdir(d)
    b.kill()
    for f in os.listdir(d):
        if f.endswith((".snapshot", ".txnindex")):
            os.unlink(os.path.join(d, f))
    b.start()
    assert markers(b, t) == ([keep], [])
    for isolation in ("read_committed", "read_uncommitted"):
        assert compacted(read_all(b, t, isolation)), isolation
    assert not [f for f in os.listdir(d) if f.endswith(".txnindex")], os.listdir(d)


def test_a_producers_newest_batch_stays_without_its_records(start_broker):
    """Producer A writes every key once, producer B overwrites them: once
    compacted, A's batch has no record left, yet stays as a header with no
    records (same offsets, producer id, epoch, sequence), so that after a
    power cut that loses the producer snapshots the state replayed from the
    log still has A with its epoch and last sequence (DescribeProducers,
    what kafka-transactions.sh shows) -- Kafka's cleaner does the same.
    Every reader (confluent-kafka at both isolation levels, kafka-python)
    reads B's values and nothing else across the empty batch."""
    from test_txn_partition import describe_producers
    from kafka import KafkaConsumer, TopicPartition as KpTp
    b = fast_broker(start_broker)
    t = topic_name("lastbatch")
    create_topic(b, t, 1, {"cleanup.policy": "compact", "segment.bytes": "4096",
                           "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"})
    for tag in (b"old-", b"new-"):
        p = ck_producer(b, **{"enable.idempotence": True, "linger.ms": 100,
                              "compression.type": "gzip"})
        produce_ok(p, t, [{"key": k, "value": tag + k, "partition": 0} for k in KEYS])
    first = headers(b, t)
    a = first[0]
    assert a["count"] == len(KEYS) and a["pid"] >= 0, first     # one batch each
    roll_active(b, t, b"a")

    def compacted_to_new(isolation):
        got = read_all(b, t, isolation)
        return {m.key(): [m.value()] for m in got if not m.key().startswith(b"filler")} == \
            {k: [b"new-" + k] for k in KEYS}
    for isolation in ("read_committed", "read_uncommitted"):
        assert wait_for("a compaction (%s)" % isolation,
                        lambda: compacted_to_new(isolation), timeout=30)
    kept = [h for h in headers(b, t) if h["base"] == a["base"]]
    assert kept == [dict(a, count=0, attrs=a["attrs"] & ~0x07)], (kept, a)   # uncompressed
    before = [x for x in describe_producers_of(b, t, describe_producers) if x[0] == a["pid"]]
    assert before and before[0][1:3] == (a["epoch"], a["seq"] + a["delta"]), before

    d = b.partition_dir(t)
    b.kill()
    for f in os.listdir(d):
        if f.endswith(".snapshot"):
            os.unlink(os.path.join(d, f))
    b.start()
    after = [x for x in describe_producers_of(b, t, describe_producers) if x[0] == a["pid"]]
    assert after and after[0][:3] == before[0][:3], (before, after)
    for isolation in ("read_committed", "read_uncommitted"):
        assert compacted_to_new(isolation), isolation
    high = watermarks(b, t)[1]
    c = KafkaConsumer(bootstrap_servers="127.0.0.1:%d" % b.port, enable_auto_commit=False,
                      consumer_timeout_ms=5000)
    try:
        tp = KpTp(t, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        got, deadline = [], time.monotonic() + 30
        while time.monotonic() < deadline and (not got or got[-1].offset < high - 1):
            for recs in c.poll(timeout_ms=500).values():
                got += recs
        assert {m.key: m.value for m in got if not m.key.startswith(b"filler")} == \
            {k: b"new-" + k for k in KEYS}
        assert got[-1].offset == high - 1
    finally:
        c.close()


def describe_producers_of(b, t, describe_producers):
    with kr.Conn(b.port) as c:
        return describe_producers(c, t)
