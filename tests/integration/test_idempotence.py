"""The idempotent producer (issue 4, part 4): InitProducerId hands out
producer ids; per partition and producer the broker remembers the last
five batches, acknowledges a resent one with its original offset without
appending it again, refuses gaps (OUT_OF_ORDER_SEQUENCE_NUMBER) and fenced
epochs (INVALID_PRODUCER_EPOCH), and still knows all that after a restart,
clean or not.

Resends are injected with raw frames (kafka_raw), so the test says exactly
which batch went on the wire twice."""
import os
import signal
import struct
import time

import pytest

import kafka_raw as kr
from support import ck_producer, consume, create_topic, produce_ok, topic_name

API_INIT_PRODUCER_ID = 22
NONE = 0
OUT_OF_ORDER_SEQUENCE_NUMBER = 45
INVALID_PRODUCER_EPOCH = 47


# ---- raw helpers --------------------------------------------------------------------
def init_producer_id(conn, transactional_id=None, version=1):
    """(error, producer id, epoch)"""
    r = conn.request(API_INIT_PRODUCER_ID, version, kr.string(transactional_id) + kr.i32(60000))
    r.i32()  # throttle
    return r.i16(), r.i64(), r.i16()


def idem_batch(values, pid, epoch, seq, ts=1700000000000):
    """An uncompressed v2 batch with ProducerId/ProducerEpoch/BaseSequence set."""
    body = b""
    for i, v in enumerate(values):
        rec = kr.i8(0) + kr.varint(0) + kr.varint(i) + kr.varint(-1)
        rec += kr.varint(len(v)) + v + kr.varint(0)
        body += kr.varint(len(rec)) + rec
    after_crc = (kr.i16(0) + kr.i32(len(values) - 1) + kr.i64(ts) + kr.i64(ts) +
                 kr.i64(pid) + kr.i16(epoch) + kr.i32(seq) + kr.i32(len(values)) + body)
    rest = kr.i32(-1) + kr.i8(2) + struct.pack(">I", kr.crc32c(after_crc)) + after_crc
    return kr.i64(0) + kr.i32(len(rest)) + rest


def produce_v7(conn, topic, batch, partition=0):
    """(error, base offset, log start offset) of the one partition."""
    r = conn.request(kr.API_PRODUCE, 7, kr.produce_v3_body(topic, partition, batch, acks=-1))
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    err, base = r.i16(), r.i64()
    r.i64()  # log append time
    log_start = r.i64()
    return err, base, log_start


def log_end(conn, topic, partition=0):
    """ListOffsets v1, latest."""
    body = kr.i32(-1) + kr.array([kr.string(topic) + kr.array([kr.i32(partition) + kr.i64(-1)])])
    r = conn.request(kr.API_LIST_OFFSETS, 1, body)
    r.i32()
    r.string()
    r.i32()
    r.i32()
    assert r.i16() == 0
    r.i64()  # timestamp
    return r.i64()


def values(prefix, n):
    return [b"%s-%d" % (prefix, i) for i in range(n)]


@pytest.fixture
def raw_topic(broker):
    t = topic_name("idem")
    create_topic(broker, t, 1)
    conn = kr.Conn(broker.port)
    yield broker, t, conn
    conn.close()


# ---- a real idempotent client ------------------------------------------------------
def test_idempotent_confluent_producer_10000_messages_exactly_once_in_order(broker):
    t = topic_name("idem-ck")
    create_topic(broker, t, 2)
    p = ck_producer(broker, **{"enable.idempotence": True, "linger.ms": 5,
                               "batch.num.messages": 500})
    msgs = [{"value": b"m-%05d" % i, "partition": i % 2} for i in range(10000)]
    acked = produce_ok(p, t, msgs, timeout=90)
    p.flush(10)
    for part in (0, 1):
        offs = [m.offset() for m in acked if m.partition() == part]
        assert offs == list(range(5000)), "partition %d offsets not 0..4999 in order" % part
    got = consume(broker, t, [0, 1], 10000, timeout=60, settle=1.0)
    assert len(got) == 10000, "%d messages read back (duplicates?)" % len(got)
    for part in (0, 1):
        vals = [m.value() for m in got if m.partition() == part]
        assert vals == [b"m-%05d" % i for i in range(part, 10000, 2)]
    assert "InitProducerId" not in broker.log_text() or "refused" not in broker.log_text()


# ---- InitProducerId ----------------------------------------------------------------
def test_init_producer_id_hands_out_distinct_ids_with_epoch_0(broker):
    with kr.Conn(broker.port) as c:
        got = [init_producer_id(c, version=v) for v in (0, 1, 1)]
    assert all(err == NONE and epoch == 0 and pid >= 0 for err, pid, epoch in got), got
    assert len({pid for _, pid, _ in got}) == 3


def test_init_producer_id_ids_never_repeat_after_restart(broker):
    with kr.Conn(broker.port) as c:
        before = init_producer_id(c)[1]
    broker.restart(signal.SIGKILL)
    with kr.Conn(broker.port) as c:
        after = init_producer_id(c)[1]
    assert after > before


def test_transactional_id_is_the_transaction_coordinators(broker):
    """A transactional id goes to the coordinator (daemon/txn/, its own
    tests in test_txn_coordinator.py): retriable codes while its state
    topic is created and loaded, then a producer id with epoch 0."""
    deadline = time.monotonic() + 15
    with kr.Conn(broker.port) as c:
        while True:
            err, pid, epoch = init_producer_id(c, "my-txn")
            if err not in (14, 15, 16) or time.monotonic() > deadline:   # load, not available
                break
            time.sleep(0.05)
    assert (err, epoch) == (NONE, 0) and pid >= 0


# ---- sequence rules --------------------------------------------------------------------
def test_resent_batch_is_acknowledged_with_its_offset_and_appended_once(raw_topic):
    broker, t, c = raw_topic
    err, pid, epoch = init_producer_id(c)
    assert err == NONE
    first = idem_batch(values(b"a", 3), pid, epoch, 0)
    assert produce_v7(c, t, first)[:2] == (NONE, 0)
    assert produce_v7(c, t, idem_batch(values(b"b", 2), pid, epoch, 3))[:2] == (NONE, 3)
    # the first batch again, as a retry after a lost response: same offset, not appended
    assert produce_v7(c, t, first)[:2] == (NONE, 0)
    assert log_end(c, t) == 5
    assert produce_v7(c, t, idem_batch(values(b"c", 1), pid, epoch, 5))[:2] == (NONE, 5)
    got = consume(broker, t, [0], 6, settle=0.5)
    assert [m.value() for m in got] == values(b"a", 3) + values(b"b", 2) + values(b"c", 1)


def test_only_the_last_five_batches_are_remembered(raw_topic):
    broker, t, c = raw_topic
    _, pid, epoch = init_producer_id(c)
    batches = [idem_batch([b"x%d" % i], pid, epoch, i) for i in range(7)]
    for i, b in enumerate(batches):
        assert produce_v7(c, t, b)[:2] == (NONE, i)
    for i in range(2, 7):                      # the last five: duplicates
        assert produce_v7(c, t, batches[i])[:2] == (NONE, i)
    # an older one is neither a known duplicate nor in sequence
    assert produce_v7(c, t, batches[0])[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert log_end(c, t) == 7


def test_sequence_gap_is_out_of_order(raw_topic):
    broker, t, c = raw_topic
    _, pid, epoch = init_producer_id(c)
    assert produce_v7(c, t, idem_batch(values(b"a", 2), pid, epoch, 0))[0] == NONE
    err, base, _ = produce_v7(c, t, idem_batch(values(b"gap", 1), pid, epoch, 5))
    assert (err, base) == (OUT_OF_ORDER_SEQUENCE_NUMBER, -1)
    assert log_end(c, t) == 2
    # the producer carries on in sequence
    assert produce_v7(c, t, idem_batch(values(b"b", 1), pid, epoch, 2))[:2] == (NONE, 2)


def test_old_epoch_is_fenced_and_new_epoch_starts_at_zero(raw_topic):
    broker, t, c = raw_topic
    _, pid, _ = init_producer_id(c)
    assert produce_v7(c, t, idem_batch([b"e0"], pid, 0, 0))[0] == NONE
    # a new epoch must start at sequence 0
    assert produce_v7(c, t, idem_batch([b"e1"], pid, 1, 1))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
    assert produce_v7(c, t, idem_batch([b"e1"], pid, 1, 0))[:2] == (NONE, 1)
    # the old epoch is fenced now
    assert produce_v7(c, t, idem_batch([b"zombie"], pid, 0, 1))[0] == INVALID_PRODUCER_EPOCH
    assert log_end(c, t) == 2


def test_unknown_producer_is_accepted_at_any_sequence(raw_topic):
    """Kafka >= 2.5 (KIP-360): state may be gone (retention, expiry)."""
    broker, t, c = raw_topic
    _, pid, epoch = init_producer_id(c)
    assert produce_v7(c, t, idem_batch([b"late"], pid, epoch, 42))[:2] == (NONE, 0)
    assert produce_v7(c, t, idem_batch([b"next"], pid, epoch, 43))[:2] == (NONE, 1)


def test_producers_are_tracked_independently(raw_topic):
    broker, t, c = raw_topic
    _, p1, _ = init_producer_id(c)
    _, p2, _ = init_producer_id(c)
    b1 = idem_batch([b"p1-0"], p1, 0, 0)
    b2 = idem_batch([b"p2-0"], p2, 0, 0)
    assert produce_v7(c, t, b1)[:2] == (NONE, 0)
    assert produce_v7(c, t, b2)[:2] == (NONE, 1)
    assert produce_v7(c, t, b1)[:2] == (NONE, 0)
    assert produce_v7(c, t, b2)[:2] == (NONE, 1)
    assert produce_v7(c, t, idem_batch([b"p2-1"], p2, 0, 1))[:2] == (NONE, 2)
    assert log_end(c, t) == 3


def test_plain_batches_are_untouched_by_producer_state(raw_topic):
    broker, t, c = raw_topic
    plain = kr.record_batch([(None, b"v", [], 0)], 1700000000000)
    assert produce_v7(c, t, plain)[:2] == (NONE, 0)
    assert produce_v7(c, t, plain)[:2] == (NONE, 1)     # no producer id: appended again


# ---- across restarts ---------------------------------------------------------------------
@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGKILL], ids=["sigterm", "sigkill"])
def test_duplicate_of_last_batch_detected_after_restart(start_broker, sig):
    # segment.bytes small: the producer's batches span several segments
    broker = start_broker()
    t = topic_name("idem-restart")
    create_topic(broker, t, 1, {"segment.bytes": "1024"})
    with kr.Conn(broker.port) as c:
        _, pid, epoch = init_producer_id(c)
        _, other, _ = init_producer_id(c)
        batches = [idem_batch([b"r-%03d-" % i + b"x" * 100], pid, epoch, i) for i in range(30)]
        for i, b in enumerate(batches):
            assert produce_v7(c, t, b)[:2] == (NONE, i)
        # another producer's batch last, so the retry is not simply the log's tail
        assert produce_v7(c, t, idem_batch([b"other"], other, 0, 0))[:2] == (NONE, 30)
    if sig == signal.SIGKILL:
        # no snapshot at all (a periodic one may exist): the state must come
        # back from the batch headers alone
        broker.stop(signal.SIGKILL)
        d = broker.partition_dir(t)
        for f in os.listdir(d):
            if f.endswith(".snapshot"):
                os.unlink(os.path.join(d, f))
        broker.start()
        assert "producer state rebuilt from 31 batch headers" in broker.log_text()
    else:
        assert broker.restart(sig) == 0
        assert "producer state rebuilt" not in broker.log_text()
    with kr.Conn(broker.port) as c:
        for i in (29, 27, 25):
            assert produce_v7(c, t, batches[i])[:2] == (NONE, i), "retry of batch %d" % i
        assert produce_v7(c, t, idem_batch([b"gap"], pid, epoch, 40))[0] == OUT_OF_ORDER_SEQUENCE_NUMBER
        assert log_end(c, t) == 31
        assert produce_v7(c, t, idem_batch([b"r-030"], pid, epoch, 30))[:2] == (NONE, 31)
    # and once more, the other way round, with state that came back from the first restart
    broker.restart(signal.SIGKILL if sig == signal.SIGTERM else signal.SIGTERM)
    with kr.Conn(broker.port) as c:
        assert produce_v7(c, t, idem_batch([b"r-030"], pid, epoch, 30))[:2] == (NONE, 31)
        assert log_end(c, t) == 32
