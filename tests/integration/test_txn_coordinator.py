"""The transaction coordinator (issue 30, daemon/txn/): FindCoordinator for
a transactional id, InitProducerId with one (epoch bumps, fencing),
AddPartitionsToTxn, AddOffsetsToTxn and EndTxn with Kafka's error codes,
its state in __transaction_state surviving a crash, and transactions past
their timeout aborted.

Raw frames check the exact codes; confluent-kafka's transactional API
runs the whole path (produce, send_offsets_to_transaction, commit, abort,
read_committed consumers) at the end."""
import signal
import time
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

import kafka_raw as kr
from support import ck_consumer, ck_producer, consume, create_topic, topic_name

FIND_COORDINATOR, INIT_PID, ADD_PARTITIONS, ADD_OFFSETS, END_TXN = 10, 22, 24, 25, 26
NONE = 0
COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR = 14, 15, 16
UNKNOWN_TOPIC_OR_PARTITION = 3
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49
INVALID_TRANSACTION_TIMEOUT, CONCURRENT_TRANSACTIONS = 50, 51
OPERATION_NOT_ATTEMPTED = 55
PRODUCER_FENCED = 90
RETRIABLE = (COORDINATOR_LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE, NOT_COORDINATOR,
             CONCURRENT_TRANSACTIONS)


def txid():
    return "tx-" + uuid.uuid4().hex[:10]


def until_settled(call, timeout=15.0):
    """call() -> tuple whose first item is an error code; retried while it
    is one a client retries (the coordinator loading, a change in flight)."""
    deadline = time.monotonic() + timeout
    while True:
        got = call()
        if got[0] not in RETRIABLE or time.monotonic() > deadline:
            return got
        time.sleep(0.05)


# ---- raw requests (non-flexible versions unless said) ------------------------------------
def find_coordinator(c, key):
    r = c.request(FIND_COORDINATOR, 1, kr.string(key) + kr.i8(1))
    r.i32()
    err, _msg, node, _host, port = r.i16(), r.string(), r.i32(), r.string(), r.i32()
    return err, node, port


def init_pid(c, tid, timeout_ms=60000, version=1):
    r = c.request(INIT_PID, version, kr.string(tid) + kr.i32(timeout_ms))
    r.i32()
    return r.i16(), r.i64(), r.i16()


def init_pid_v4(c, tid, pid, epoch, timeout_ms=60000):
    """KIP-360: the producer says which id and epoch it had."""
    r = c.request_flex(INIT_PID, 4, kr.vstring(tid, True) + kr.i32(timeout_ms) + kr.i64(pid)
                       + kr.i16(epoch) + kr.vtags(True))
    r.i32()
    return r.i16(), r.i64(), r.i16()


def add_partitions(c, tid, pid, epoch, topics, version=1):
    """topics: [(name, [partition])] -> [(name, [(partition, error)])]"""
    body = kr.string(tid) + kr.i64(pid) + kr.i16(epoch) + kr.array(
        [kr.string(t) + kr.array([kr.i32(p) for p in ps]) for t, ps in topics])
    r = c.request(ADD_PARTITIONS, version, body)
    r.i32()
    return r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16()))))


def add_offsets(c, tid, pid, epoch, group, version=1):
    r = c.request(ADD_OFFSETS, version, kr.string(tid) + kr.i64(pid) + kr.i16(epoch) +
                  kr.string(group))
    r.i32()
    return (r.i16(),)


def end_txn(c, tid, pid, epoch, commit, version=1):
    r = c.request(END_TXN, version, kr.string(tid) + kr.i64(pid) + kr.i16(epoch) +
                  kr.i8(1 if commit else 0))
    r.i32()
    return (r.i16(),)


def new_producer(c, tid, timeout_ms=60000):
    err, pid, epoch = until_settled(lambda: init_pid(c, tid, timeout_ms))
    assert err == NONE and pid >= 0, (err, pid, epoch)
    return pid, epoch


# ---- FindCoordinator, InitProducerId --------------------------------------------------
def test_find_coordinator_names_this_broker_once_the_state_topic_is_led(broker):
    with kr.Conn(broker.port) as c:
        err, node, port = until_settled(lambda: find_coordinator(c, "tx-find"))
        assert (err, node, port) == (NONE, broker.broker_id, broker.port)
    assert "creating __transaction_state: 50 partitions, replication factor 1" in \
        broker.log_text()


def test_init_producer_id_bumps_the_epoch_of_a_known_id(broker):
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert epoch == 0
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, 1)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, 2)
        assert until_settled(lambda: init_pid(c, txid()))[1] != pid


def test_init_producer_id_refuses_a_timeout_above_the_maximum(start_broker):
    b = start_broker({"transaction.max.timeout.ms": "60000"})
    with kr.Conn(b.port) as c:
        assert init_pid(c, txid(), timeout_ms=60001) == (INVALID_TRANSACTION_TIMEOUT, -1, -1)
        assert init_pid(c, txid(), timeout_ms=0) == (INVALID_TRANSACTION_TIMEOUT, -1, -1)
        assert until_settled(lambda: init_pid(c, txid(), timeout_ms=60000))[0] == NONE


def test_init_producer_id_v4_checks_the_producers_own_id_and_epoch(broker):
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, _ = new_producer(c, tid)
        assert until_settled(lambda: init_pid_v4(c, tid, pid, 0)) == (NONE, pid, 1)
        # a retry of that bump gets the same answer, not another bump
        assert init_pid_v4(c, tid, pid, 0) == (NONE, pid, 1)
        # an epoch this id never had: fenced
        assert init_pid_v4(c, tid, pid, 7) == (PRODUCER_FENCED, -1, -1)
        assert init_pid_v4(c, tid, pid + 1000, 1) == (PRODUCER_FENCED, -1, -1)


# ---- AddPartitionsToTxn, AddOffsetsToTxn, EndTxn: Kafka's codes ----------------------------
def test_unknown_transactional_id_is_invalid_producer_id_mapping(broker):
    t = topic_name()
    create_topic(broker, t, 1)
    with kr.Conn(broker.port) as c:
        new_producer(c, txid())                     # the state topic is led and loaded
        tid = txid()
        assert until_settled(lambda: end_txn(c, tid, 5, 0, True)) == (INVALID_PRODUCER_ID_MAPPING,)
        assert add_offsets(c, tid, 5, 0, "g") == (INVALID_PRODUCER_ID_MAPPING,)
        assert add_partitions(c, tid, 5, 0, [(t, [0])]) == \
            [(t, [(0, INVALID_PRODUCER_ID_MAPPING)])]


def test_end_txn_without_a_transaction_is_invalid_txn_state(broker):
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert end_txn(c, tid, pid, epoch, True) == (INVALID_TXN_STATE,)
        assert end_txn(c, tid, pid, epoch, False) == (INVALID_TXN_STATE,)
        assert end_txn(c, tid, pid + 1, epoch, True) == (INVALID_PRODUCER_ID_MAPPING,)


def test_add_partitions_names_unknown_ones_and_attempts_none(broker):
    t = topic_name()
    create_topic(broker, t, 2)
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        got = add_partitions(c, tid, pid, epoch, [(t, [0, 5]), ("no-such-topic", [0])])
        assert got == [(t, [(0, OPERATION_NOT_ATTEMPTED), (5, UNKNOWN_TOPIC_OR_PARTITION)]),
                       ("no-such-topic", [(0, UNKNOWN_TOPIC_OR_PARTITION)])]
        # nothing was added: the transaction never began
        assert end_txn(c, tid, pid, epoch, True) == (INVALID_TXN_STATE,)


def test_a_stale_epoch_is_fenced_with_the_code_its_version_knows(broker):
    t = topic_name()
    create_topic(broker, t, 1)
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 1)
        assert add_partitions(c, tid, pid, epoch, [(t, [0])], version=1) == \
            [(t, [(0, INVALID_PRODUCER_EPOCH)])]
        assert add_partitions(c, tid, pid, epoch, [(t, [0])], version=2) == \
            [(t, [(0, PRODUCER_FENCED)])]
        assert add_offsets(c, tid, pid, epoch, "g", version=1) == (INVALID_PRODUCER_EPOCH,)
        assert add_offsets(c, tid, pid, epoch, "g", version=2) == (PRODUCER_FENCED,)
        assert end_txn(c, tid, pid, epoch, True, version=2) == (PRODUCER_FENCED,)


def test_offsets_only_transaction_commits_and_a_retried_end_agrees(broker):
    """AddOffsetsToTxn puts the group's __consumer_offsets partition in the
    transaction; EndTxn commits it (standalone: the group coordinator is
    told directly, no marker partition); a retried EndTxn of the same kind
    succeeds, the other kind is INVALID_TXN_STATE."""
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, "grp") == (NONE,)
        assert add_offsets(c, tid, pid, epoch, "grp") == (NONE,)        # already in: at once
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
        assert until_settled(lambda: end_txn(c, tid, pid, epoch, True)) == (NONE,)
        assert end_txn(c, tid, pid, epoch, False) == (INVALID_TXN_STATE,)
        # complete: the next producer of the id gets the next epoch
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 1)


def test_init_producer_id_fences_an_open_transaction_by_aborting_it(broker):
    tid = txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, "grp") == (NONE,)
        # the open transaction is aborted under epoch + 1; the client retries
        assert init_pid(c, tid) == (CONCURRENT_TRANSACTIONS, -1, -1)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 2)
        assert end_txn(c, tid, pid, epoch, True, version=2) == (PRODUCER_FENCED,)
    assert ("fencing producer id %d epoch %d of transactional id %s" % (pid, epoch, tid)) in \
        broker.log_text()


def test_a_transaction_past_its_timeout_is_aborted(start_broker):
    b = start_broker({"transaction.abort.timed.out.transaction.cleanup.interval.ms": "200"})
    tid = txid()
    with kr.Conn(b.port) as c:
        pid, epoch = new_producer(c, tid, timeout_ms=500)
        assert add_offsets(c, tid, pid, epoch, "grp") == (NONE,)
        deadline = time.monotonic() + 10
        while "aborting transaction %s" % tid not in b.log_text():
            assert time.monotonic() < deadline, "no timeout abort"
            time.sleep(0.1)
        # the abort bumped the epoch: the producer is fenced
        assert until_settled(lambda: end_txn(c, tid, pid, epoch, True, version=2)) == \
            (PRODUCER_FENCED,)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 2)
    line = [x for x in b.log_text().splitlines() if "aborting transaction %s" % tid in x][0]
    assert ("(producer id %d, epoch %d) open for" % (pid, epoch)) in line
    assert line.endswith("ms, past its timeout")


def test_an_idle_transactional_id_expires(start_broker):
    b = start_broker({"transactional.id.expiration.ms": "1000",
                      "transaction.remove.expired.transaction.cleanup.interval.ms": "200"})
    tid = txid()
    with kr.Conn(b.port) as c:
        pid, _ = new_producer(c, tid)
        deadline = time.monotonic() + 10
        while "transactional id %s expired" % tid not in b.log_text():
            assert time.monotonic() < deadline, "no expiry"
            time.sleep(0.1)
        # forgotten, and its tombstone is what a reload finds
        assert until_settled(lambda: (describe_txns(c, [tid])[0]["error"],)) == \
            (TRANSACTIONAL_ID_NOT_FOUND,)
    b.restart(signal.SIGKILL)
    with kr.Conn(b.port) as c:
        assert until_settled(lambda: (describe_txns(c, [tid])[0]["error"],)) == \
            (TRANSACTIONAL_ID_NOT_FOUND,)
        err, pid2, epoch = until_settled(lambda: init_pid(c, tid))
        assert (err, epoch) == (NONE, 0) and pid2 != pid


def add_partitions_v4(c, txns):
    """KIP-890's batched form: txns [(id, pid, epoch, verify_only, [(topic, [p])])]
    -> (top error, [(id, [(topic, [(partition, error)])])])."""
    def txn(t):
        tid, pid, epoch, verify, topics = t
        return (kr.cstring(tid) + kr.i64(pid) + kr.i16(epoch) + kr.i8(1 if verify else 0) +
                kr.carray([kr.cstring(n) + kr.carray([kr.i32(p) for p in ps]) + kr.tags()
                           for n, ps in topics]) + kr.tags())
    r = c.request_flex(ADD_PARTITIONS, 4, kr.carray([txn(t) for t in txns]) + kr.tags())
    r.i32()
    err = r.i16()

    def topic(x):
        return (x.cstring(), x.vstructs(lambda y: (y.i32(), y.i16()), True))
    got = r.vstructs(lambda x: (x.cstring(), x.vstructs(topic, True)), True)
    assert r.tags() == {} and r.remaining() == 0
    return err, got


def test_verify_only_says_which_partitions_are_in_the_transaction(broker):
    """What a partition leader asks before a transactional write (KIP-890):
    AddPartitionsToTxn v4 VerifyOnly adds nothing and answers, per
    partition, NONE when it is in the open transaction, else
    INVALID_TXN_STATE; the batched form without VerifyOnly adds."""
    t = topic_name()
    create_topic(broker, t, 3)
    tid, other = txid(), txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        opid, oepoch = new_producer(c, other)
        assert add_partitions(c, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        assert add_partitions_v4(c, [(tid, pid, epoch, True, [(t, [0, 1])]),
                                     (other, opid, oepoch, False, [(t, [2])])]) == \
            (NONE, [(tid, [(t, [(0, NONE), (1, INVALID_TXN_STATE)])]),
                    (other, [(t, [(2, NONE)])])])
        assert add_partitions_v4(c, [(tid, pid, epoch, True, [(t, [1])]),
                                     (other, opid, oepoch, True, [(t, [2])])]) == \
            (NONE, [(tid, [(t, [(1, INVALID_TXN_STATE)])]), (other, [(t, [(2, NONE)])])])
        assert add_partitions_v4(c, [(tid, pid, epoch + 1, True, [(t, [0])])]) == \
            (NONE, [(tid, [(t, [(0, PRODUCER_FENCED)])])])


def test_state_survives_a_crash(broker):
    """SIGKILL: the new process loads __transaction_state and knows the id,
    its producer id and epoch, and that its transaction committed."""
    tid, open_tid = txid(), txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, "grp") == (NONE,)
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 1)
        opid, oepoch = new_producer(c, open_tid)
        assert add_offsets(c, open_tid, opid, oepoch, "grp") == (NONE,)
    broker.restart(signal.SIGKILL)
    with kr.Conn(broker.port) as c:
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, epoch + 2)
        # still open after the crash: a new producer fences it
        assert until_settled(lambda: end_txn(c, open_tid, opid, oepoch, False)) == (NONE,)
        assert until_settled(lambda: init_pid(c, open_tid)) == (NONE, opid, oepoch + 1)


# ---- DescribeTransactions, ListTransactions (kafka-transactions.sh) -----------------------
DESCRIBE_TXNS, LIST_TXNS = 65, 66
TRANSACTIONAL_ID_NOT_FOUND = 105


def describe_txns(c, ids):
    r = c.request_flex(DESCRIBE_TXNS, 0, kr.carray([kr.cstring(i) for i in ids]) + kr.tags())
    assert r.i32() == 0

    def topic(x):
        return (x.cstring(), x.carray(lambda y: y.i32()))

    def state(x):
        return dict(error=x.i16(), id=x.cstring(), state=x.cstring(), timeout=x.i32(),
                    start=x.i64(), pid=x.i64(), epoch=x.i16(), topics=x.vstructs(topic, True))
    got = r.vstructs(state, True)
    assert r.tags() == {} and r.remaining() == 0
    return got


def list_txns(c, states=(), pids=(), duration=None):
    body = kr.carray([kr.cstring(s) for s in states]) + kr.carray([kr.i64(p) for p in pids])
    version = 0 if duration is None else 1
    if version:
        body += kr.i64(duration)
    r = c.request_flex(LIST_TXNS, version, body + kr.tags())
    assert r.i32() == 0
    err, unknown = r.i16(), r.carray(lambda x: x.cstring())
    got = r.vstructs(lambda x: (x.cstring(), x.i64(), x.cstring()), True)
    assert r.tags() == {} and r.remaining() == 0
    return err, unknown, got


def test_describe_and_list_transactions_show_an_open_one(broker):
    tid, idle = txid(), txid()
    with kr.Conn(broker.port) as c:
        pid, epoch = new_producer(c, tid)
        ipid, _ = new_producer(c, idle)
        before = int(time.time() * 1000)
        assert add_offsets(c, tid, pid, epoch, "grp-d") == (NONE,)
        d, unknown = describe_txns(c, [tid, "never-seen"])
        assert d["start"] >= before - 1000
        d["start"] = None
        assert d == dict(error=NONE, id=tid, state="Ongoing", timeout=60000, start=None,
                         pid=pid, epoch=epoch, topics=[("__consumer_offsets",
                                                        [java_partition("grp-d", 50)])])
        assert (unknown["error"], unknown["id"]) == (TRANSACTIONAL_ID_NOT_FOUND, "never-seen")
        err, unk, got = list_txns(c)
        assert err == NONE and unk == []
        assert {(tid, pid, "Ongoing"), (idle, ipid, "Empty")} <= set(got)
        assert list_txns(c, states=["Ongoing", "Bogus"])[1:] == (["Bogus"], [(tid, pid, "Ongoing")])
        assert list_txns(c, states=["Bogus"])[1:] == (["Bogus"], [])
        assert list_txns(c, pids=[ipid])[2] == [(idle, ipid, "Empty")]
        assert list_txns(c, duration=3600 * 1000)[2] == []
        assert list_txns(c, duration=0)[2] == [(tid, pid, "Ongoing")]


def java_string_hash_partition(s, n):
    h = 0
    for ch in s.encode("utf-16-be").decode("utf-16-be"):
        h = (31 * h + ord(ch)) & 0xFFFFFFFF
    h = h - (1 << 32) if h >= 1 << 31 else h
    return (0 if h == -(1 << 31) else abs(h)) % n


java_partition = java_string_hash_partition


# ---- what confluent-kafka's transactional API sees ----------------------------------------
def test_init_transactions_twice_fences_the_first_producer(broker):
    tid = txid()
    first = ck_producer(broker, **{"transactional.id": tid})
    first.init_transactions(30)
    second = ck_producer(broker, **{"transactional.id": tid})
    second.init_transactions(30)
    cons = ck_consumer(broker, **{"group.id": "g-" + tid})
    try:
        first.begin_transaction()
        with pytest.raises(KafkaException) as e:
            first.send_offsets_to_transaction([TopicPartition("t", 0, 1)],
                                              cons.consumer_group_metadata(), 30)
        assert e.value.args[0].code() == KafkaError._FENCED
        assert e.value.args[0].fatal()
    finally:
        cons.close()


def test_an_empty_transaction_begins_and_commits(broker):
    p = ck_producer(broker, **{"transactional.id": txid()})
    p.init_transactions(30)
    for _ in range(3):
        p.begin_transaction()
        p.commit_transaction(30)
    p.begin_transaction()
    p.abort_transaction(30)


# ---- end to end, once the partition side is in -------------------------------------------


def test_committed_records_are_read_committed(broker):
    t = topic_name()
    create_topic(broker, t, 1)
    p = ck_producer(broker, **{"transactional.id": txid()})
    p.init_transactions(30)
    p.begin_transaction()
    for i in range(5):
        p.produce(t, value=b"c%d" % i, partition=0)
    p.commit_transaction(30)
    got = consume(broker, t, [0], 5, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [b"c%d" % i for i in range(5)]


def test_aborted_records_are_hidden_from_read_committed(broker):
    t = topic_name()
    create_topic(broker, t, 1)
    p = ck_producer(broker, **{"transactional.id": txid()})
    p.init_transactions(30)
    p.begin_transaction()
    p.produce(t, value=b"aborted", partition=0)
    p.flush(30)
    p.abort_transaction(30)
    p.begin_transaction()
    p.produce(t, value=b"kept", partition=0)
    p.commit_transaction(30)
    got = consume(broker, t, [0], 1, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [b"kept"]
    got = consume(broker, t, [0], 2, **{"isolation.level": "read_uncommitted"})
    assert [m.value() for m in got] == [b"aborted", b"kept"]


def test_consume_transform_produce_commits_offsets_with_the_output(broker):
    src, dst = topic_name(), topic_name()
    create_topic(broker, src, 1)
    create_topic(broker, dst, 1)
    plain = ck_producer(broker)
    for i in range(3):
        plain.produce(src, value=b"in%d" % i, partition=0)
    plain.flush(30)
    group = "g-" + txid()
    cons = ck_consumer(broker, **{"group.id": group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed"})
    p = ck_producer(broker, **{"transactional.id": txid()})
    p.init_transactions(30)
    try:
        cons.assign([TopicPartition(src, 0, 0)])
        msgs = []
        deadline = time.monotonic() + 30
        while len(msgs) < 3 and time.monotonic() < deadline:
            m = cons.poll(0.5)
            if m is not None and not m.error():
                msgs.append(m)
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, value=b"out-" + m.value(), partition=0)
        p.send_offsets_to_transaction([TopicPartition(src, 0, 3)],
                                      cons.consumer_group_metadata(), 30)
        p.commit_transaction(30)
        assert cons.committed([TopicPartition(src, 0)], 10)[0].offset == 3
    finally:
        cons.close()
    got = consume(broker, dst, [0], 3, **{"isolation.level": "read_committed"})
    assert [m.value() for m in got] == [b"out-in%d" % i for i in range(3)]
