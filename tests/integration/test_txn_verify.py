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
