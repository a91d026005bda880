"""Produce and consume with each client: every message comes back, byte
for byte, at the offset it was acknowledged with, in order per partition,
on the partition Java's murmur2 partitioner picks for its key."""
import time
from collections import defaultdict

import pytest

from support import (ck_consumer, ck_producer, consume, create_topic, java_partition, kcat,
                     kp_consume, kp_producer, murmur2, produce, produce_ok,
                     topic_name)

PARTITIONS = 6


def test_murmur2_matches_the_java_client_vectors():
    vectors = {b"21": 0xC5F2F8EC, b"foo": 0x23A256D0, b"key1": 0x01B38BC4,
               b"hello world": 0x48D0C363}
    for key, h in vectors.items():
        assert murmur2(key) == h, key
    assert [java_partition(k, 3) for k in vectors] == [0, 2, 2, 1]
    assert [java_partition(k, 6) for k in vectors] == [0, 2, 2, 1]


def keyed_messages(n, nkeys=257):
    """n messages over nkeys keys; values carry a sequence number and
    binary bytes of varying length, with a few empty and null values."""
    fixed = [b"21", b"foo", b"key1", b"hello world", b""]
    out = []
    for i in range(n):
        k = i % nkeys
        key = fixed[k] if k < len(fixed) else b"key-%d" % k
        if i % 997 == 5:
            value = None                               # tombstone
        elif i % 991 == 7:
            value = b""
        else:
            value = b"%07d|" % i + bytes((i * 7 + j) & 0xFF for j in range(i % 300))
        out.append((i, key, value))
    return out


def seq_of(value):
    return int(value.split(b"|", 1)[0]) if value else None


def check_consumed(sent, acked, got, partitions):
    """sent: [(i, key, value)]; acked: {i: (partition, offset)} from the
    producer; got: [(partition, offset, key, value)] in consumption order."""
    assert len(got) == len(sent), "consumed %d messages, produced %d" % (len(got), len(sent))
    by_part = defaultdict(list)
    for p, off, key, value in got:
        by_part[p].append((off, key, value))
    for p, recs in by_part.items():
        assert [r[0] for r in recs] == list(range(len(recs))), \
            "partition %d offsets are not 0..%d in order" % (p, len(recs) - 1)
    stored = {(p, off): (key, value) for p, off, key, value in got}
    for i, key, value in sent:
        p, off = acked[i]
        assert p == java_partition(key, partitions), \
            "message %d key %r went to partition %d, murmur2 says %d" % (i, key, p, java_partition(key, partitions))
        assert stored.get((p, off)) == (key, value), \
            "message %d acked at %d/%d, broker returned %r" % (i, p, off, stored.get((p, off)))
    # per-key order: sequence numbers grow along each partition
    last = {}
    for p, off, key, value in sorted(got):
        s = seq_of(value)
        if s is not None:
            assert s > last.get(key, -1), "key %r out of order at %d/%d" % (key, p, off)
            last[key] = s


def test_confluent_10000_keyed_messages_round_trip_on_murmur2_partitions(broker):
    t = topic_name("ck10k")
    create_topic(broker, t, PARTITIONS)
    sent = keyed_messages(10000)
    producer = ck_producer(broker, **{"partitioner": "murmur2_random", "linger.ms": 20})
    reports = produce(producer, t, [{"key": k, "value": v} for _, k, v in sent], timeout=90)
    errs = [str(e) for e, _ in reports if e is not None]
    assert not errs, "%d produce errors, first %s" % (len(errs), errs[:3])
    acked = {i: (m.partition(), m.offset()) for (i, _, _), (_, m) in zip(sent, reports)}
    assert len(acked) == len(sent)
    msgs = consume(broker, t, range(PARTITIONS), len(sent), timeout=60)
    got = [(m.partition(), m.offset(), m.key(), m.value()) for m in msgs]
    check_consumed(sent, acked, got, PARTITIONS)


def test_kafka_python_keyed_messages_round_trip_on_murmur2_partitions(broker):
    t = topic_name("kp")
    create_topic(broker, t, PARTITIONS)
    sent = keyed_messages(3000, nkeys=101)
    producer = kp_producer(broker, linger_ms=10)
    try:
        futures = [(i, producer.send(t, key=k, value=v)) for i, k, v in sent]
        producer.flush(timeout=60)
        acked = {}
        for i, f in futures:
            md = f.get(timeout=30)
            acked[i] = (md.partition, md.offset)
    finally:
        producer.close(timeout=10)
    recs = kp_consume(broker, t, range(PARTITIONS), len(sent), timeout=60)
    got = [(r.partition, r.offset, r.key, r.value) for r in recs]
    check_consumed(sent, acked, got, PARTITIONS)


def test_messages_from_one_client_are_read_by_the_other(broker):
    t = topic_name("cross")
    create_topic(broker, t, 2)
    ck_vals = [b"from-librdkafka-%d" % i for i in range(50)]
    produce_ok(ck_producer(broker), t, [{"value": v, "partition": 0} for v in ck_vals])
    kp_vals = [b"from-kafka-python-%d" % i for i in range(50)]
    p = kp_producer(broker)
    try:
        for v in kp_vals:
            p.send(t, value=v, partition=1)
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    recs = kp_consume(broker, t, [0], 50)
    assert [r.value for r in recs] == ck_vals
    msgs = consume(broker, t, [1], 50)
    assert [m.value() for m in msgs] == kp_vals


def test_acks_0_and_acks_1_messages_are_stored(broker):
    t = topic_name("acks")
    create_topic(broker, t, 1)
    # acks=0 gets no response; the connection must stay usable afterwards.
    produce(ck_producer(broker, acks=0), t, [{"value": b"zero-%d" % i} for i in range(100)])
    produce_ok(ck_producer(broker, acks=1), t, [{"value": b"one-%d" % i} for i in range(100)])
    msgs = consume(broker, t, [0], 200)
    assert [m.value() for m in msgs] == [b"zero-%d" % i for i in range(100)] + [b"one-%d" % i for i in range(100)]
    assert [m.offset() for m in msgs] == list(range(200))


def test_kcat_produce_and_consume_round_trip(broker):
    t = topic_name("kcat")
    create_topic(broker, t, 1)
    lines = ["k%d:value %d with spaces & symbols <>|%%" % (i, i) for i in range(200)]
    p = kcat(broker, ["-P", "-t", t, "-p", "0", "-K", ":"], input_bytes=("\n".join(lines) + "\n").encode())
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    p = kcat(broker, ["-C", "-t", t, "-p", "0", "-o", "beginning", "-e", "-q",
                      "-f", "%o %k:%s\\n"])
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    out = p.stdout.decode().splitlines()
    assert out == ["%d %s" % (i, line) for i, line in enumerate(lines)]


@pytest.mark.parametrize("n", [1, 3])
def test_consumer_starting_mid_log_gets_the_rest(broker, n):
    """Fetch from an offset inside a batch: the client skips the records
    before it, the broker may return the whole batch."""
    t = topic_name("mid")
    create_topic(broker, t, 1)
    vals = [b"m%03d" % i for i in range(100)]
    produce_ok(ck_producer(broker, **{"linger.ms": 50}), t, [{"value": v} for v in vals])
    start = 37 * n
    msgs = consume(broker, t, [0], 100 - start, offsets={0: start})
    assert [(m.offset(), m.value()) for m in msgs] == list(enumerate(vals))[start:]


def test_concurrent_producers_to_one_partition_get_unique_contiguous_offsets(broker):
    import threading
    t = topic_name("conc")
    create_topic(broker, t, 1)
    n, writers = 2000, 4
    results = {}

    def run(w):
        p = ck_producer(broker, **{"linger.ms": 1})
        results[w] = produce_ok(p, t, [{"key": b"w%d" % w, "value": b"w%d-%05d" % (w, i)} for i in range(n)])

    threads = [threading.Thread(target=run, args=(w,)) for w in range(writers)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(90)
    assert sorted(results) == list(range(writers))
    acked = sorted(m.offset() for ms in results.values() for m in ms)
    assert acked == list(range(n * writers)), "acknowledged offsets are not unique and contiguous"
    got = consume(broker, t, [0], n * writers, timeout=60)
    assert [m.offset() for m in got] == list(range(n * writers))
    for w in range(writers):
        mine = [m.value() for m in got if m.key() == b"w%d" % w]
        assert mine == [b"w%d-%05d" % (w, i) for i in range(n)], "producer %d's order was not kept" % w


def test_fetch_out_of_range_resets_per_auto_offset_reset(broker):
    t = topic_name("oor")
    create_topic(broker, t, 1)
    produce_ok(ck_producer(broker), t, [{"value": b"r%d" % i} for i in range(10)])
    got = consume(broker, t, [0], 10, offsets={0: 500}, **{"auto.offset.reset": "earliest"})
    assert [(m.offset(), m.value()) for m in got] == [(i, b"r%d" % i) for i in range(10)]
    # 'latest' from an out-of-range offset waits for new messages only
    from confluent_kafka import TopicPartition
    c = ck_consumer(broker, **{"auto.offset.reset": "latest"})
    try:
        c.assign([TopicPartition(t, 0, 500)])
        deadline = time.monotonic() + 1.5
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            assert m is None or m.error(), "got old message %r after reset to latest" % (m.value(),)
        produce_ok(ck_producer(broker), t, [{"value": b"new"}])
        m = None
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            m = c.poll(0.1)
            if m is not None and not m.error():
                break
        assert m is not None and not m.error() and (m.offset(), m.value()) == (10, b"new")
    finally:
        c.close()


def test_fetch_every_advertised_version_answers_in_its_layout(broker):
    """Fetch v4-v11 through a raw client: each version's response has exactly
    that version's fields (v5 LogStartOffset, v7 ErrorCode/SessionId, v11
    PreferredReadReplica), and its Records are the batch that was produced."""
    import kafka_raw as kr
    t = topic_name("fv")
    create_topic(broker, t)
    batch = kr.record_batch([(b"k", b"fetched-by-every-version", [], 0)], int(time.time() * 1000))
    with kr.Conn(broker.port) as c:
        (res,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch)))
        assert res[2] == 0, res
        for v in range(4, 12):
            body = kr.i32(-1) + kr.i32(0) + kr.i32(1) + kr.i32(1 << 20) + kr.i8(0)
            if v >= 7:
                body += kr.i32(0) + kr.i32(-1)                # no session
            part = kr.i32(0) + (kr.i32(-1) if v >= 9 else b"") + kr.i64(0)
            part += (kr.i64(-1) if v >= 5 else b"") + kr.i32(1 << 20)
            body += kr.array([kr.string(t) + kr.array([part])])
            if v >= 7:
                body += kr.array([])                          # ForgottenTopicsData
            if v >= 11:
                body += kr.string("")                         # RackId
            r = c.request(kr.API_FETCH, v, body)
            assert r.i32() == 0                               # ThrottleTimeMs
            if v >= 7:
                assert (r.i16(), r.i32()) == (0, 0), v        # ErrorCode, SessionId
            assert r.i32() == 1 and r.string() == t and r.i32() == 1, v
            assert (r.i32(), r.i16(), r.i64(), r.i64()) == (0, 0, 1, 1), v  # index, error, HW, LSO
            if v >= 5:
                assert r.i64() == 0, v                        # LogStartOffset
            assert r.i32() == 0, v                            # AbortedTransactions
            if v >= 11:
                assert r.i32() == -1, v                       # PreferredReadReplica
            records = r.nbytes()
            assert len(records) == len(batch) and b"fetched-by-every-version" in records, v
            assert r.remaining() == 0, v
