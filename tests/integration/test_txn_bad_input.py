"""Hostile sizes in the transactions APIs (issue 30 review, "bounds"):
DescribeProducers listing one partition many times, ListTransactions with a
huge ProducerIdFilters array, WriteTxnMarkers without CLUSTER_ACTION.  The
broker answers each with Kafka's codes, in memory bounded by the request
and without holding the event loop, and keeps serving."""
import struct
import time
import uuid

import kafka_raw as kr
from support import assert_serves, create_topic, least_disturbed, report, topic_name

API_INIT_PRODUCER_ID = 22
API_WRITE_TXN_MARKERS = 27
API_DESCRIBE_PRODUCERS = 61
API_LIST_TRANSACTIONS = 66
NONE = 0
INVALID_REQUEST = 42
CLUSTER_AUTHORIZATION_FAILED = 31
RETRIABLE = (14, 15, 16, 51)


def peak_rss_kib(b):
    """VmHWM: the most the broker has held, so a spike that is freed
    again before we look still counts."""
    with open("/proc/%d/status" % b.proc.pid) as f:
        for line in f:
            if line.startswith("VmHWM:"):
                return int(line.split()[1])
    raise AssertionError("no VmHWM")


def init_pid(c, tid=None):
    r = c.request(API_INIT_PRODUCER_ID, 1, kr.string(tid) + kr.i32(60000))
    r.i32()
    return r.i16(), r.i64(), r.i16()


def idempotent_batch(pid, epoch):
    """One record, non-transactional, sequence 0."""
    rec = kr.i8(0) + kr.varint(0) + kr.varint(0) + kr.varint(-1) + kr.varint(1) + b"x" + kr.varint(0)
    body = kr.varint(len(rec)) + rec
    ts = 1700000000000
    after_crc = (kr.i16(0) + kr.i32(0) + kr.i64(ts) + kr.i64(ts) + kr.i64(pid) + kr.i16(epoch)
                 + kr.i32(0) + kr.i32(1) + body)
    rest = kr.i32(-1) + kr.i8(2) + struct.pack(">I", kr.crc32c(after_crc)) + after_crc
    return kr.i64(0) + kr.i32(len(rest)) + rest


def describe_producers(c, topic, indexes, timeout=60):
    """[(partition, error, [producer id])] of DescribeProducers v0."""
    body = kr.carray([kr.cstring(topic) + kr.carray([kr.i32(i) for i in indexes]) + kr.tags()])
    r = c.request_flex(API_DESCRIBE_PRODUCERS, 0, body + kr.tags(), timeout=timeout)
    r.i32()
    assert r.uvarint() - 1 == 1 and r.cstring() == topic
    out = []
    for _ in range(r.uvarint() - 1):
        part, err = r.i32(), r.i16()
        r.cstring()
        pids = []
        for _ in range(r.uvarint() - 1):
            pids.append(r.i64())
            r.i32(), r.i32(), r.i64(), r.i32(), r.i64()
            assert r.tags() == {}
        assert r.tags() == {}
        out.append((part, err, pids))
    assert r.tags() == {} and r.tags() == {} and r.remaining() == 0
    return out


def test_describe_producers_answers_duplicate_indexes_in_bounded_memory(broker):
    """Kafka's admin client asks each partition once; a request naming one
    partition thousands of times gets the producers once (the first time)
    and INVALID_REQUEST for the repeats, in memory of the order of the
    request, not repeats x producers."""
    t = topic_name("dpdup")
    create_topic(broker, t, 1)
    producers, repeats = 100, 20000
    with kr.Conn(broker.port) as c:
        pids = []
        for _ in range(producers):
            err, pid, epoch = init_pid(c)
            assert err == NONE
            r = c.request(kr.API_PRODUCE, 7, kr.produce_v3_body(t, 0, idempotent_batch(pid, epoch),
                                                                acks=-1))
            assert r.i32() == 1
            pids.append(pid)
        assert sorted(describe_producers(c, t, [0])[0][2]) == sorted(pids)
        before = peak_rss_kib(broker)
        got = describe_producers(c, t, [0] * repeats + [7, 7])
        grew = peak_rss_kib(broker) - before
    # a copy of the 100 producers per repeat is ~75 MiB (arena and response)
    request_kib = repeats * 4 // 1024
    report("DescribeProducers x%d: peak RSS grew %d KiB (request %d KiB)", repeats, grew,
           request_kib)
    assert got[0][0:2] == (0, NONE) and sorted(got[0][2]) == sorted(pids)
    assert all(g == (0, INVALID_REQUEST, []) for g in got[1:repeats]), got[1]
    assert got[repeats][0] == 7 and got[repeats][1] != NONE and got[repeats + 1][1] == INVALID_REQUEST
    assert grew < 64 * request_kib + 4096, grew
    assert_serves(broker, "after DescribeProducers with duplicates")


def list_transactions_body(states, pids):
    return (kr.carray([kr.cstring(s) for s in states]) + kr.carray([kr.i64(p) for p in pids])
            + kr.tags())


def list_transactions(c, body):
    """ListTransactions v0 of an encoded body: (error, unknown states, [(id, pid, state)])."""
    r = c.request_flex(API_LIST_TRANSACTIONS, 0, body, timeout=120)
    assert r.i32() == 0
    err, unknown = r.i16(), r.carray(lambda x: x.cstring())
    got = r.vstructs(lambda x: (x.cstring(), x.i64(), x.cstring()), True)
    assert r.tags() == {} and r.remaining() == 0
    return err, unknown, got


def test_list_transactions_with_many_producer_id_filters_answers_promptly(broker):
    """Each id is looked up among the filters, not compared with all of
    them: a ListTransactions with 400k filters over 3000 ids costs about
    what decoding it costs (the same filters with only an unknown state,
    answered before any id is looked at)."""
    ids = 3000
    with kr.Conn(broker.port) as c:
        made = []
        for k in range(ids):
            tid = "tx-bnd-%s-%d" % (uuid.uuid4().hex[:6], k)
            deadline = time.monotonic() + 15
            while True:
                err, pid, _ = init_pid(c, tid)
                if err not in RETRIABLE or time.monotonic() > deadline:
                    break
                time.sleep(0.05)
            assert err == NONE, err
            made.append((tid, pid))
        pid0 = made[0][1]
        filters = [10 ** 12 + k for k in range(400000)] + [pid0]

        decode_only = list_transactions_body(["Bogus"], filters)
        full_walk = list_transactions_body([], filters)

        def measure():
            t0 = time.monotonic()
            assert list_transactions(c, decode_only)[1:] == (["Bogus"], [])
            base = time.monotonic() - t0
            t0 = time.monotonic()
            err, unknown, got = list_transactions(c, full_walk)
            full = time.monotonic() - t0
            assert (err, unknown, got) == (NONE, [], [(made[0][0], pid0, "Empty")])
            return base, full

        base, full = least_disturbed(measure, lambda f: f[1] < 4 * f[0] + 0.1)
    report("ListTransactions with %d filters over %d ids: %.3f s (decode only: %.3f s)",
           len(filters), ids, full, base)
    assert full < 4 * base + 0.1, (full, base)


def test_write_txn_markers_without_cluster_action_is_refused_for_every_partition(start_broker):
    b = start_broker({"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"})
    t = topic_name("wmbig")
    n = 50000
    body = kr.array([kr.i64(5) + kr.i16(0) + kr.i8(1) +
                     kr.array([kr.string(t) + kr.array([kr.i32(p) for p in range(n)])]) +
                     kr.i32(0)])
    with kr.Conn(b.port) as c:
        r = c.request(API_WRITE_TXN_MARKERS, 0, body, timeout=30)
        assert r.i32() == 1 and r.i64() == 5 and r.i32() == 1 and r.string() == t
        assert r.i32() == n
        got = [(r.i32(), r.i16()) for _ in range(n)]
        assert r.remaining() == 0
    assert got == [(p, CLUSTER_AUTHORIZATION_FAILED) for p in range(n)]
    with kr.Conn(b.port) as c:           # no ACLs here: only the connection itself
        c.request(kr.API_API_VERSIONS, 0, b"")
    b.assert_alive()
