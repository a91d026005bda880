"""KIP-890 partition verification (issue 30, item 2;
transaction.partition.verification.enable, default true): a transactional
batch for a partition its producer has not added to its ongoing transaction
is refused with Kafka's codes (INVALID_TXN_STATE; a stale epoch
INVALID_PRODUCER_EPOCH) and nothing is stored, so no stray write opens a
transaction nobody ends and holds the LSO; with the key off such a batch is
accepted, Kafka's behaviour before KIP-890.  confluent-kafka's
transactions go on working (only the first batch of a partition in a
transaction is checked).

Here the broker is its own coordinator (txn_verify_partition answers at
once); test_txn_verify_cluster.py has the leader ask another broker."""
import pytest

import kafka_raw as kr
from support import ck_producer, consume, create_topic, topic_name
from test_txn_coordinator import (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, NONE,
                                  add_partitions, end_txn, init_pid, new_producer, txid,
                                  until_settled)
from test_txn_partition import batch, read, sql


def produce_txn(c, txn_id, topic, records, partition=0):
    """Produce v7 naming a transactional id, acks=-1: (error, base offset)."""
    body = (kr.string(txn_id) + kr.i16(-1) + kr.i32(10000) +
            kr.array([kr.string(topic) + kr.array([kr.i32(partition) + kr.nbytes(records)])]))
    r = c.request(kr.API_PRODUCE, 7, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    return r.i16(), r.i64()


def offsets(broker, topic, partition):
    """(last_stable_offset, high_watermark, log_end_offset) of one partition."""
    (row,) = sql(broker, "SELECT last_stable_offset, high_watermark, log_end_offset FROM "
                         "partitions WHERE topic = '%s' AND partition = %d" % (topic, partition))
    return row["last_stable_offset"], row["high_watermark"], row["log_end_offset"]


def test_a_batch_for_a_partition_not_in_the_transaction_is_refused(broker):
    t = topic_name("txver")
    create_topic(broker, t, 2)
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert add_partitions(c, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        # partition 1 was never added: refused, nothing stored, the LSO not held
        assert produce_txn(c, tid, t, batch([b"stray"], pid, epoch, 0), 1) == \
            (INVALID_TXN_STATE, -1)
        assert offsets(broker, t, 1) == (0, 0, 0)
        # partition 0 was: its batches go in (the second is not asked again)
        assert produce_txn(c, tid, t, batch([b"a-0", b"a-1"], pid, epoch, 0), 0) == (NONE, 0)
        assert produce_txn(c, tid, t, batch([b"a-2"], pid, epoch, 2), 0) == (NONE, 2)
        assert offsets(broker, t, 0) == (0, 3, 3)
        assert until_settled(lambda: end_txn(c, tid, pid, epoch, True)) == (NONE,)
        # a late batch after the commit would open a transaction nobody ends
        assert produce_txn(c, tid, t, batch([b"late"], pid, epoch, 3), 0) == \
            (INVALID_TXN_STATE, -1)
        assert offsets(broker, t, 0) == (4, 4, 4)      # 3 records + the commit marker
        # a new producer of the id (epoch bumped): the old epoch is refused
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 1)
        assert add_partitions(c, tid, pid, epoch + 1, [(t, [1])]) == [(t, [(1, NONE)])]
        assert produce_txn(c, tid, t, batch([b"old"], pid, epoch, 0), 1) == \
            (INVALID_PRODUCER_EPOCH, -1)
        assert produce_txn(c, tid, t, batch([b"b-0"], pid, epoch + 1, 0), 1) == (NONE, 0)
        assert until_settled(lambda: end_txn(c, tid, pid, epoch + 1, True)) == (NONE,)
    assert read(broker, t, 3, "read_committed") == [b"a-0", b"a-1", b"a-2"]


def test_with_the_key_off_a_stray_batch_is_accepted_and_holds_the_lso(start_broker):
    b = start_broker({"transaction.partition.verification.enable": "false"})
    t = topic_name("txveroff")
    create_topic(b, t, 1)
    tid = txid()
    with kr.Conn(b.port) as c:
        pid, epoch = new_producer(c, tid)
        assert produce_txn(c, tid, t, batch([b"stray"], pid, epoch, 0), 0) == (NONE, 0)
        # what KIP-890 prevents: a transaction the coordinator does not know of
        assert offsets(b, t, 0) == (0, 1, 1)


def test_confluent_kafka_transactions_still_work(broker):
    t = topic_name("txverck")
    create_topic(broker, t, 2)
    p = ck_producer(broker, **{"transactional.id": txid()})
    p.init_transactions(30)
    sent = {0: [], 1: []}
    for n in range(3):                       # each transaction asks again, once per partition
        p.begin_transaction()
        for i in range(10):
            v = b"t%d-%02d" % (n, i)
            p.produce(t, v, partition=i % 2)
            sent[i % 2].append(v)
        p.commit_transaction(30)
    for part in (0, 1):
        got = consume(broker, t, [part], len(sent[part]), timeout=30,
                      **{"isolation.level": "read_committed"})
        assert [m.value() for m in got] == sent[part]


TXN_ID_AUTHZ_FAILED, CORRUPT_MESSAGE, INVALID_RECORD = 53, 2, 87


def produce_parts(c, txn_id, parts, acks=-1, version=7):
    """Produce naming txn_id (None: null) to [(topic, partition, records)];
    [(topic, partition, error, base offset)] (acks=0: nothing is read)."""
    by_topic = {}
    for topic, partition, records in parts:
        by_topic.setdefault(topic, []).append(kr.i32(partition) + kr.nbytes(records))
    body = (kr.string(txn_id) + kr.i16(acks) + kr.i32(10000) +
            kr.array([kr.string(t) + kr.array(ps) for t, ps in by_topic.items()]))
    if acks == 0:
        c.send(kr.API_PRODUCE, version, body)
        return None
    r = c.request(kr.API_PRODUCE, version, body)
    out = []
    for _ in range(r.i32()):
        topic = r.string()
        for _ in range(r.i32()):
            partition, err, base = r.i32(), r.i16(), r.i64()
            r.i64(), r.i64()                          # LogAppendTime, LogStartOffset
            if version >= 8:
                r.array(lambda x: (x.i32(), x.string()))
                r.string()
            out.append((topic, partition, err, base))
    return out


def test_a_transactional_batch_needs_a_transactional_id(broker):
    """Kafka's KafkaApis: records holding a transactional batch in any
    partition, with a null TransactionalId, refuse the whole request with
    TRANSACTIONAL_ID_AUTHORIZATION_FAILED; before, a made-up producer id
    opened a transaction no coordinator knows and held the LSO forever."""
    t = topic_name("txvernull")
    create_topic(broker, t, 2)
    stray = batch([b"stray"], 424242, 0, 0)
    with kr.Conn(broker.port) as c:
        assert produce_parts(c, None, [(t, 0, stray)]) == [(t, 0, TXN_ID_AUTHZ_FAILED, -1)]
        # a plain first partition does not let a transactional second one in
        assert produce_parts(c, None, [(t, 0, batch([b"plain"], transactional=False)),
                                       (t, 1, stray)]) == \
            [(t, 0, TXN_ID_AUTHZ_FAILED, -1), (t, 1, TXN_ID_AUTHZ_FAILED, -1)]
        assert offsets(broker, t, 0) == (0, 0, 0)
        assert offsets(broker, t, 1) == (0, 0, 0)
    with kr.Conn(broker.port) as c:
        # acks=0: refused too, and told by the connection's close (as Kafka)
        produce_parts(c, None, [(t, 0, stray)], acks=0)
        with pytest.raises(kr.Closed):
            c.recv_frame()
    assert offsets(broker, t, 0) == (0, 0, 0)
    with kr.Conn(broker.port) as c:
        # the LSO is not held: new data is read committed
        assert produce_parts(c, None, [(t, 0, batch([b"after"], transactional=False))]) == \
            [(t, 0, NONE, 0)]
    assert offsets(broker, t, 0) == (1, 1, 1)
    assert read(broker, t, 1, "read_committed") == [b"after"]


def test_one_batch_per_partition(broker):
    """Kafka's ProduceRequest.validateRecords (v3+): a partition's records
    are exactly one batch, so a transactional batch cannot follow another
    (of another producer, or a plain one) unverified.  Nothing is stored."""
    t = topic_name("txvertwo")
    create_topic(broker, t, 1)
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert add_partitions(c, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        two = [batch([b"mine"], pid, epoch, 0), batch([b"other"], 424242, 0, 0)]
        assert produce_parts(c, tid, [(t, 0, two[0] + two[1])]) == [(t, 0, CORRUPT_MESSAGE, -1)]
        assert produce_parts(c, tid, [(t, 0, batch([b"plain"], transactional=False) + two[1])],
                             version=8) == [(t, 0, INVALID_RECORD, -1)]
        assert offsets(broker, t, 0) == (0, 0, 0)
        # one batch: in, and the transaction commits as usual
        assert produce_parts(c, tid, [(t, 0, two[0])]) == [(t, 0, NONE, 0)]
        assert until_settled(lambda: end_txn(c, tid, pid, epoch, True)) == (NONE,)
    assert read(broker, t, 1, "read_committed") == [b"mine"]
