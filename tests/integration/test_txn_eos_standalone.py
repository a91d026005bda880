"""Exactly-once guarantees on one broker, as confluent-kafka's
transactional API sees them (issue 30, Deliver item 7): a zombie producer
(the previous holder of a transactional.id) is fenced and nothing it
wrote becomes visible to read_committed; an open transaction holds the
last stable offset, so read_committed sees nothing past its first record
until it commits, or until its transaction.timeout.ms aborts it, after
which the records behind it are readable and its own are not.

The raw codes of the same cases are test_txn_coordinator.py's and
test_txn_partition.py's."""
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, KafkaError, KafkaException, TopicPartition

import kafka_raw as kr
from support import ck_consumer, ck_producer, create_topic, produce_ok, topic_name
from test_txn_coordinator import txid
from test_txn_partition import list_latest


def values(b, topic, isolation, want, quiet=1.5, timeout=30):
    """The values of partition 0 from the start: read until want records
    arrived (or timeout), then for `quiet` seconds more, so that a record
    that should not be there has the time to show."""
    c = ck_consumer(b, **{"isolation.level": isolation, "group.id": "reader-" + txid()})
    try:
        c.assign([TopicPartition(topic, 0, OFFSET_BEGINNING)])
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < want and time.monotonic() < deadline:
            out += [m.value() for m in c.consume(100, 0.2) if m.error() is None]
        end = time.monotonic() + quiet
        while time.monotonic() < end:
            out += [m.value() for m in c.consume(100, 0.1) if m.error() is None]
        return out
    finally:
        c.close()


def txn_producer(b, tid, **kw):
    p = ck_producer(b, **dict({"transactional.id": tid}, **kw))
    p.init_transactions(30)
    return p


def fenced(call):
    with pytest.raises(KafkaException) as e:
        call()
    err = e.value.args[0]
    return err.code(), err.fatal()


def test_a_zombie_is_fenced_and_nothing_it_wrote_is_read_committed(broker):
    t = topic_name("zombie")
    create_topic(broker, t, 1)
    tid = txid()
    zombie = txn_producer(broker, tid)
    zombie.begin_transaction()
    produce_ok(zombie, t, [{"value": b"zombie-%d" % i, "partition": 0} for i in range(3)])
    # the restarted instance: its init_transactions aborts the zombie's transaction
    live = txn_producer(broker, tid)
    live.begin_transaction()
    produce_ok(live, t, [{"value": b"live-%d" % i, "partition": 0} for i in range(2)])
    live.commit_transaction(30)
    # the zombie's next write to the partition and its commit fail, fatally
    zombie.produce(t, value=b"zombie-late", partition=0)
    assert fenced(lambda: zombie.commit_transaction(30)) == (KafkaError._FENCED, True)
    assert values(broker, t, "read_committed", 2) == [b"live-0", b"live-1"]
    assert values(broker, t, "read_uncommitted", 5) == \
        [b"zombie-0", b"zombie-1", b"zombie-2", b"live-0", b"live-1"]


def open_transaction(b, t, timeout_ms):
    """A transaction with two records in t, left open; then two records
    of an idempotent producer behind it."""
    p = txn_producer(b, txid(), **{"transaction.timeout.ms": timeout_ms,
                                   "message.timeout.ms": min(timeout_ms, 30000),
                                   "socket.timeout.ms": min(timeout_ms, 10000)})
    p.begin_transaction()
    produce_ok(p, t, [{"value": b"open-%d" % i, "partition": 0} for i in range(2)])
    produce_ok(ck_producer(b, **{"enable.idempotence": True}), t,
               [{"value": b"after-%d" % i, "partition": 0} for i in range(2)])
    return p


def stable_and_end(b, t):
    """(LSO, high watermark) of partition 0: ListOffsets LATEST at
    read_committed and at read_uncommitted."""
    with kr.Conn(b.port) as c:
        return list_latest(c, t, 1), list_latest(c, t, 0)


def test_an_open_transaction_holds_read_committed_until_it_commits(broker):
    t = topic_name("lso")
    create_topic(broker, t, 1)
    p = open_transaction(broker, t, 60000)
    assert stable_and_end(broker, t) == (0, 4)
    assert values(broker, t, "read_committed", 0, quiet=2) == []
    assert values(broker, t, "read_uncommitted", 4) == [b"open-0", b"open-1", b"after-0",
                                                        b"after-1"]
    p.commit_transaction(30)
    assert stable_and_end(broker, t) == (5, 5)          # the COMMIT marker is offset 4
    assert values(broker, t, "read_committed", 4) == [b"open-0", b"open-1", b"after-0",
                                                      b"after-1"]


def test_an_open_transaction_holds_read_committed_until_its_timeout_aborts_it(start_broker):
    b = start_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    t = topic_name("lso")
    create_topic(b, t, 1)
    started = time.monotonic()
    p = open_transaction(b, t, 6000)
    assert stable_and_end(b, t) == (0, 4)
    assert values(b, t, "read_committed", 0, quiet=1) == []
    assert time.monotonic() - started < 6, "the check ran past the timeout: it proves nothing"
    assert values(b, t, "read_committed", 2, quiet=1) == [b"after-0", b"after-1"]
    assert time.monotonic() - started >= 6
    assert stable_and_end(b, t) == (5, 5)               # the ABORT marker is offset 4
    assert values(b, t, "read_uncommitted", 4) == [b"open-0", b"open-1", b"after-0",
                                                   b"after-1"]
    assert "aborting transaction" in b.log_text()
    code, fatal = fenced(lambda: p.commit_transaction(30))
    assert code in (KafkaError._FENCED, KafkaError.PRODUCER_FENCED,
                    KafkaError.INVALID_PRODUCER_EPOCH), code
