"""Transactions on the partition side (issue 30, Deliver item 2): transactional
batches, COMMIT/ABORT markers written with WriteTxnMarkers, the last stable
offset, the aborted-transaction index, read_committed Fetch and ListOffsets,
DescribeProducers, and all of it again after a SIGKILL.

The transactional batches and markers go out as raw frames (kafka_raw), so
the test says exactly which records belong to which transaction; the readers
are real clients (confluent-kafka, librdkafka's read_committed)."""
import json
import os
import re
import signal
import struct
import time

import pytest

import kafka_raw as kr
from support import admin_socket, consume, create_topic, socket_http, topic_name

API_INIT_PRODUCER_ID = 22
API_WRITE_TXN_MARKERS = 27
API_DESCRIBE_PRODUCERS = 61
NONE = 0
INVALID_PRODUCER_EPOCH = 47
INVALID_TXN_STATE = 48
TRANSACTION_COORDINATOR_FENCED = 52
TOPIC_AUTHORIZATION_FAILED = 29
CLUSTER_AUTHORIZATION_FAILED = 31
ATTR_TRANSACTIONAL = 0x10


# ---- raw helpers --------------------------------------------------------------------
def init_producer_id(conn):
    """(producer id, epoch) of a new idempotent producer."""
    r = conn.request(API_INIT_PRODUCER_ID, 1, kr.string(None) + kr.i32(60000))
    r.i32()
    err, pid, epoch = r.i16(), r.i64(), r.i16()
    assert err == NONE
    return pid, epoch


def batch(values, pid=-1, epoch=-1, seq=-1, transactional=True, ts=1700000000000):
    """An uncompressed v2 batch; transactional sets attribute bit 4."""
    body = b""
    for i, v in enumerate(values):
        rec = kr.i8(0) + kr.varint(0) + kr.varint(i) + kr.varint(-1)
        rec += kr.varint(len(v)) + v + kr.varint(0)
        body += kr.varint(len(rec)) + rec
    attrs = ATTR_TRANSACTIONAL if transactional else 0
    after_crc = (kr.i16(attrs) + kr.i32(len(values) - 1) + kr.i64(ts) + kr.i64(ts) +
                 kr.i64(pid) + kr.i16(epoch) + kr.i32(seq) + kr.i32(len(values)) + body)
    rest = kr.i32(-1) + kr.i8(2) + struct.pack(">I", kr.crc32c(after_crc)) + after_crc
    return kr.i64(0) + kr.i32(len(rest)) + rest


# The batches here are of producers no coordinator knows (the markers are
# written by hand): the Produce names a transactional id, as Kafka requires
# of a transactional batch, and the brokers run without KIP-890
# verification (NO_VERIFY), which would ask the id's coordinator.
RAW_TXN_ID = "txnp-raw"
NO_VERIFY = {"transaction.partition.verification.enable": "false"}


def produce(conn, topic, records, txn_id=RAW_TXN_ID):
    """(error, base offset) of Produce v7 to partition 0."""
    body = (kr.string(txn_id) + kr.i16(-1) + kr.i32(10000) +
            kr.array([kr.string(topic) + kr.array([kr.i32(0) + kr.nbytes(records)])]))
    r = conn.request(kr.API_PRODUCE, 7, body)
    assert r.i32() == 1
    r.string()
    assert r.i32() == 1
    r.i32()
    return r.i16(), r.i64()


def write_marker(conn, topic, pid, epoch, commit, coordinator_epoch=0, partitions=(0,)):
    """WriteTxnMarkers v0 for one marker: [(topic, partition, error)]."""
    body = kr.array([kr.i64(pid) + kr.i16(epoch) + kr.i8(1 if commit else 0) +
                     kr.array([kr.string(topic) + kr.array([kr.i32(p) for p in partitions])]) +
                     kr.i32(coordinator_epoch)])
    r = conn.request(API_WRITE_TXN_MARKERS, 0, body, timeout=40)
    out = []
    assert r.i32() == 1
    assert r.i64() == pid
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            out.append((t, r.i32(), r.i16()))
    assert r.remaining() == 0
    return out


def list_latest(conn, topic, isolation):
    """ListOffsets v2 LATEST for partition 0 at the isolation level."""
    body = kr.i32(-1) + kr.i8(isolation) + kr.array(
        [kr.string(topic) + kr.array([kr.i32(0) + kr.i64(-1)])])
    r = conn.request(kr.API_LIST_OFFSETS, 2, body)
    r.i32()
    assert r.i32() == 1 and r.string() == topic and r.i32() == 1
    assert r.i32() == 0 and r.i16() == NONE
    r.i64()
    return r.i64()


def describe_producers(conn, topic):
    """DescribeProducers v0 (flexible), partition 0:
    [(pid, epoch, last sequence, coordinator epoch, current txn start)]."""
    body = kr.carray([kr.cstring(topic) + kr.carray([kr.i32(0)]) + kr.tags()]) + kr.tags()
    r = conn.request_flex(API_DESCRIBE_PRODUCERS, 0, body)
    r.i32()
    assert r.uvarint() - 1 == 1 and r.cstring() == topic
    assert r.uvarint() - 1 == 1
    assert r.i32() == 0 and r.i16() == NONE
    r.cstring()
    out = []
    for _ in range(r.uvarint() - 1):
        pid, epoch, seq = r.i64(), r.i32(), r.i32()
        r.i64()  # last timestamp
        out.append((pid, epoch, seq, r.i32(), r.i64()))
        assert r.tags() == {}
    assert r.tags() == {} and r.tags() == {} and r.tags() == {}
    assert r.remaining() == 0
    return out


def sql(broker, query):
    """Rows as dicts, over the admin socket."""
    status, body, _ = socket_http(admin_socket(broker), "/sql?format=json", query)
    assert status == 200, body
    return json.loads(body)


def stable_and_hw(broker, topic):
    """SQL partitions: (last_stable_offset, high_watermark)."""
    (row,) = sql(broker, "select last_stable_offset, high_watermark from partitions "
                         "where topic = '%s'" % topic)
    return row["last_stable_offset"], row["high_watermark"]


def sql_producers(broker, topic):
    return [(r["producer_id"], r["producer_epoch"], r["last_sequence"],
             r["coordinator_epoch"], r["current_txn_start_offset"])
            for r in sql(broker, "select * from producers where topic = '%s'" % topic)]


def txn_metrics(broker, topic):
    """/metrics over the admin socket: (LSO lag, open transactions) of partition 0."""
    status, text, _ = socket_http(admin_socket(broker), "/metrics")
    assert status == 200
    got = []
    for name in ("sluice_last_stable_offset_lag", "sluice_partition_open_transactions"):
        m = re.search(r'^%s\{topic="%s",partition="0"\} (\d+)$' % (name, topic), text, re.M)
        got.append(int(m.group(1)) if m else None)
    return tuple(got)


def read(broker, topic, count, isolation, settle=1.5):
    msgs = consume(broker, topic, [0], count, timeout=30, settle=settle,
                   **{"isolation.level": isolation})
    return [m.value() for m in msgs]


def vals(prefix, n):
    return [b"%s-%d" % (prefix, i) for i in range(n)]


@pytest.fixture
def broker(start_broker):
    return start_broker(NO_VERIFY)


@pytest.fixture
def txn_topic(broker):
    t = topic_name("txnp")
    create_topic(broker, t, 1)
    conn = kr.Conn(broker.port)
    yield broker, t, conn
    conn.close()


# ---- committed, aborted, open ----------------------------------------------------------
def test_read_committed_returns_committed_records_only_and_survives_sigkill(txn_topic):
    broker, t, c = txn_topic
    pid, epoch = init_producer_id(c)
    # transaction 1: committed
    assert produce(c, t, batch(vals(b"c1", 3), pid, epoch, 0)) == (NONE, 0)
    assert write_marker(c, t, pid, epoch, True) == [(t, 0, NONE)]          # offset 3
    # transaction 2: aborted, with a plain record of another producer inside it
    assert produce(c, t, batch(vals(b"ab", 2), pid, epoch, 3)) == (NONE, 4)
    assert produce(c, t, batch([b"plain-0"], transactional=False)) == (NONE, 6)
    assert write_marker(c, t, pid, epoch, False) == [(t, 0, NONE)]         # offset 7
    # transaction 3: committed
    assert produce(c, t, batch(vals(b"c3", 2), pid, epoch, 5)) == (NONE, 8)
    assert write_marker(c, t, pid, epoch, True) == [(t, 0, NONE)]          # offset 10
    committed = vals(b"c1", 3) + [b"plain-0"] + vals(b"c3", 2)
    everything = vals(b"c1", 3) + vals(b"ab", 2) + [b"plain-0"] + vals(b"c3", 2)
    assert list_latest(c, t, 1) == list_latest(c, t, 0) == 11

    assert read(broker, t, len(committed), "read_committed") == committed
    assert read(broker, t, len(everything), "read_uncommitted") == everything

    broker.restart(signal.SIGKILL)
    with kr.Conn(broker.port) as c2:
        assert list_latest(c2, t, 1) == list_latest(c2, t, 0) == 11
        # the producer's sequence goes on where it was (state rebuilt)
        assert produce(c2, t, batch(vals(b"c4", 1), pid, epoch, 7)) == (NONE, 11)
        assert write_marker(c2, t, pid, epoch, True) == [(t, 0, NONE)]
    assert read(broker, t, len(committed) + 1, "read_committed") == committed + [b"c4-0"]
    assert read(broker, t, len(everything) + 1, "read_uncommitted") == everything + [b"c4-0"]


def test_open_transaction_holds_the_lso_until_it_commits_also_across_a_restart(txn_topic):
    broker, t, c = txn_topic
    pid, epoch = init_producer_id(c)
    assert produce(c, t, batch([b"before"], transactional=False)) == (NONE, 0)
    assert produce(c, t, batch(vals(b"open", 2), pid, epoch, 0)) == (NONE, 1)
    assert produce(c, t, batch([b"after"], transactional=False)) == (NONE, 3)
    assert list_latest(c, t, 0) == 4
    assert list_latest(c, t, 1) == 1            # the LSO: the open transaction's start
    assert stable_and_hw(broker, t) == (1, 4)
    assert sql_producers(broker, t) == [(pid, epoch, 1, None, 1)]
    status, body, _ = socket_http(admin_socket(broker), "/sql?format=json",
                                  "delete from producers where topic = '%s'" % t)
    assert status == 400 and "producers is read-only" in body, body
    assert txn_metrics(broker, t) == (3, 1)
    assert describe_producers(c, t) == [(pid, epoch, 1, -1, 1)]
    assert read(broker, t, 1, "read_committed") == [b"before"]
    assert read(broker, t, 4, "read_uncommitted") == [b"before", b"open-0", b"open-1", b"after"]

    broker.restart(signal.SIGKILL)
    with kr.Conn(broker.port) as c2:
        assert list_latest(c2, t, 1) == 1
        assert read(broker, t, 1, "read_committed") == [b"before"]
        # a non-transactional batch from the producer inside its transaction
        assert produce(c2, t, batch([b"x"], pid, epoch, 2, transactional=False)) == \
            (INVALID_TXN_STATE, -1)
        assert write_marker(c2, t, pid, epoch, True, coordinator_epoch=3) == [(t, 0, NONE)]
        assert list_latest(c2, t, 1) == list_latest(c2, t, 0) == 5
        assert stable_and_hw(broker, t) == (5, 5)
        assert sql_producers(broker, t) == [(pid, epoch, 1, 3, None)]
        assert txn_metrics(broker, t) == (0, 0)
        assert describe_producers(c2, t) == [(pid, epoch, 1, 3, -1)]
    assert read(broker, t, 4, "read_committed") == [b"before", b"open-0", b"open-1", b"after"]


# ---- bad input --------------------------------------------------------------------------
def test_markers_and_batches_with_an_older_epoch_are_refused_with_kafkas_codes(txn_topic):
    broker, t, c = txn_topic
    pid, epoch = init_producer_id(c)
    assert produce(c, t, batch(vals(b"a", 2), pid, epoch, 0)) == (NONE, 0)
    # the coordinator fences the producer: ABORT with the bumped epoch
    assert write_marker(c, t, pid, epoch + 1, False, coordinator_epoch=2) == [(t, 0, NONE)]
    assert write_marker(c, t, pid, epoch, True, coordinator_epoch=2) == \
        [(t, 0, INVALID_PRODUCER_EPOCH)]
    assert write_marker(c, t, pid, epoch + 1, True, coordinator_epoch=1) == \
        [(t, 0, TRANSACTION_COORDINATOR_FENCED)]
    assert produce(c, t, batch(vals(b"z", 1), pid, epoch, 2)) == (INVALID_PRODUCER_EPOCH, -1)
    # the new epoch starts its sequence at 0
    assert produce(c, t, batch(vals(b"n", 1), pid, epoch + 1, 0)) == (NONE, 3)
    assert write_marker(c, t, pid, epoch + 1, True, coordinator_epoch=2) == [(t, 0, NONE)]
    assert write_marker(c, t, pid, epoch, True, partitions=(7,)) == \
        [(t, 7, 3)]                                  # UNKNOWN_TOPIC_OR_PARTITION
    assert read(broker, t, 1, "read_committed") == [b"n-0"]


def test_lost_index_and_snapshots_are_rebuilt_from_the_log(txn_topic):
    """As after a power cut that kept the log but not the unsynced
    .txnindex and snapshot files: the restart replays the log's batch
    headers and markers and rebuilds both."""
    broker, t, c = txn_topic
    pid, epoch = init_producer_id(c)
    assert produce(c, t, batch(vals(b"ab", 2), pid, epoch, 0)) == (NONE, 0)
    assert write_marker(c, t, pid, epoch, False) == [(t, 0, NONE)]          # 2
    assert produce(c, t, batch(vals(b"ok", 2), pid, epoch, 2)) == (NONE, 3)
    assert write_marker(c, t, pid, epoch, True) == [(t, 0, NONE)]           # 5
    assert produce(c, t, batch([b"open"], pid, epoch, 4)) == (NONE, 6)
    c.close()
    broker.kill()
    d = broker.partition_dir(t)
    gone = [f for f in os.listdir(d) if f.endswith((".txnindex", ".snapshot"))]
    assert any(f.endswith(".txnindex") for f in gone), os.listdir(d)
    for f in gone:
        os.unlink(os.path.join(d, f))
    broker.start()
    assert any(f.endswith(".txnindex") for f in os.listdir(d))
    with kr.Conn(broker.port) as c2:
        assert list_latest(c2, t, 1) == 6
        assert describe_producers(c2, t) == [(pid, epoch, 4, 0, 6)]
    assert read(broker, t, 2, "read_committed") == vals(b"ok", 2)


def snapshot_offsets(d):
    return sorted(int(f.split(".")[0]) for f in os.listdir(d) if f.endswith(".snapshot"))


def test_a_failed_index_write_holds_the_snapshot_back_and_a_restart_rebuilds_the_entry(txn_topic):
    """The ABORT's .txnindex write fails (its path is a directory: EISDIR,
    as EMFILE or EIO would): the entry is served from memory, no producer
    snapshot passes the marker (txnindex.c X3), so a restart replays it
    and read_committed still hides the aborted records; once the path is
    writable again the index is rewritten, synced and the snapshot moves
    on."""
    broker, t, c = txn_topic
    d = broker.partition_dir(t)
    index = os.path.join(d, "%020d.txnindex" % 0)
    pid, epoch = init_producer_id(c)
    now = int(time.time() * 1000)         # no roll by time: one segment, base 0
    assert produce(c, t, batch(vals(b"ab", 2), pid, epoch, 0, ts=now)) == (NONE, 0)
    os.mkdir(index)
    assert write_marker(c, t, pid, epoch, False) == [(t, 0, NONE)]          # 2
    assert produce(c, t, batch(vals(b"ok", 2), pid, epoch, 2, ts=now)) == (NONE, 3)
    assert write_marker(c, t, pid, epoch, True) == [(t, 0, NONE)]           # 5
    assert read(broker, t, 2, "read_committed") == vals(b"ok", 2)
    time.sleep(11)                        # two maintenance ticks (main.c, 5 s)
    assert all(o <= 2 for o in snapshot_offsets(d)), sorted(os.listdir(d))
    broker.restart(signal.SIGKILL)
    assert os.path.isdir(index)           # unreadable at open: replayed from 0
    with kr.Conn(broker.port) as c2:
        assert list_latest(c2, t, 1) == 6
    assert read(broker, t, 2, "read_committed") == vals(b"ok", 2)
    assert read(broker, t, 4, "read_uncommitted") == vals(b"ab", 2) + vals(b"ok", 2)
    os.rmdir(index)
    deadline = time.time() + 30
    while time.time() < deadline and not (os.path.isfile(index) and
                                          any(o >= 6 for o in snapshot_offsets(d))):
        time.sleep(0.5)
    assert os.path.getsize(index) == 34, os.listdir(d)
    assert any(o >= 6 for o in snapshot_offsets(d)), os.listdir(d)
    broker.restart(signal.SIGKILL)
    assert read(broker, t, 2, "read_committed") == vals(b"ok", 2)


def test_write_txn_markers_needs_cluster_action_and_describe_producers_read(start_broker):
    """With an authorizer: WriteTxnMarkers is for brokers (CLUSTER_ACTION on
    the cluster), DescribeProducers needs READ on the topic; Kafka's codes."""
    b = start_broker({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    t = topic_name("txnauth")
    sql(b, "INSERT INTO topics (name, partitions) VALUES ('%s', 1)" % t)
    with kr.Conn(b.port) as c:
        assert write_marker(c, t, 5, 0, True) == [(t, 0, CLUSTER_AUTHORIZATION_FAILED)]
        body = kr.carray([kr.cstring(t) + kr.carray([kr.i32(0)]) + kr.tags()]) + kr.tags()
        r = c.request_flex(API_DESCRIBE_PRODUCERS, 0, body)
        r.i32()
        assert r.uvarint() - 1 == 1 and r.cstring() == t and r.uvarint() - 1 == 1
        assert (r.i32(), r.i16()) == (0, TOPIC_AUTHORIZATION_FAILED)
    sql(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
           "operation, permission) VALUES ('CLUSTER', 'kafka-cluster', 'LITERAL', "
           "'User:ANONYMOUS', 'CLUSTER_ACTION', 'ALLOW')")
    sql(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
           "operation, permission) VALUES ('TOPIC', '%s', 'LITERAL', "
           "'User:ANONYMOUS', 'READ', 'ALLOW')" % t)
    with kr.Conn(b.port) as c:
        assert write_marker(c, t, 5, 0, True, coordinator_epoch=2) == [(t, 0, NONE)]
        assert describe_producers(c, t) == [(5, 0, -1, 2, -1)]


def test_marker_for_a_consumer_offsets_partition_completes_the_groups_offsets(txn_topic):
    """Standalone, group offsets live in SQLite and no __consumer_offsets log
    exists: the marker goes to the group coordinator (gc_txn_complete) alone,
    next to an ordinary partition's marker in the same request."""
    broker, t, c = txn_topic
    pid, epoch = init_producer_id(c)
    assert produce(c, t, batch([b"x"], pid, epoch, 0)) == (NONE, 0)
    body = kr.array([kr.i64(pid) + kr.i16(epoch) + kr.i8(1) +
                     kr.array([kr.string(t) + kr.array([kr.i32(0)]),
                               kr.string("__consumer_offsets") + kr.array([kr.i32(3)])]) +
                     kr.i32(0)])
    r = c.request(API_WRITE_TXN_MARKERS, 0, body, timeout=40)
    assert r.i32() == 1 and r.i64() == pid
    got = []
    for _ in range(r.i32()):
        name = r.string()
        for _ in range(r.i32()):
            got.append((name, r.i32(), r.i16()))
    assert got == [(t, 0, NONE), ("__consumer_offsets", 3, NONE)]
    assert read(broker, t, 1, "read_committed") == [b"x"]
