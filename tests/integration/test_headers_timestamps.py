"""Record headers and timestamps as users see them: headers (null values,
repeated keys, binary values) and CreateTime come back unchanged; a
LogAppendTime topic stamps broker time; ListOffsets finds offsets by time
and the watermarks."""
import time

from confluent_kafka import (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME,
                             TopicPartition)

from support import (ck_consumer, ck_producer, consume, create_topic,
                     kp_consume, kp_consumer, kp_producer, produce_ok,
                     topic_name)

HEADERS = [("trace-id", b"abc123"), ("dup", b"first"), ("dup", b"second"),
           ("null-value", None), ("empty", b""), ("binary", bytes(range(256))),
           ("dup", b"third")]


def now_ms():
    return int(time.time() * 1000)


def test_headers_round_trip_with_null_values_and_duplicate_keys(broker):
    t = topic_name("hdr")
    create_topic(broker, t, 1)
    produce_ok(ck_producer(broker), t, [
        {"key": b"with", "value": b"v1", "headers": HEADERS},
        {"key": b"without", "value": b"v2"},
        {"key": b"one", "value": b"v3", "headers": [("only", b"x")]},
    ])
    got = consume(broker, t, [0], 3)
    assert got[0].headers() == HEADERS
    assert got[1].headers() in (None, [])
    assert got[2].headers() == [("only", b"x")]
    # kafka-python reads the same headers
    recs = kp_consume(broker, t, [0], 3)
    assert recs[0].headers == HEADERS
    assert recs[1].headers == []


def test_kafka_python_headers_round_trip(broker):
    t = topic_name("kphdr")
    create_topic(broker, t, 1)
    hdrs = [("a", b"1"), ("a", b"2"), ("b", b"\x00\xff")]
    p = kp_producer(broker)
    try:
        p.send(t, value=b"v", headers=hdrs, partition=0).get(timeout=15)
    finally:
        p.close(timeout=10)
    assert consume(broker, t, [0], 1)[0].headers() == hdrs
    assert kp_consume(broker, t, [0], 1)[0].headers == hdrs


def test_create_time_timestamps_round_trip(broker):
    t = topic_name("ts")
    create_topic(broker, t, 1)
    stamps = [1, 1500000000000, now_ms() - 3600 * 1000, 1700000000000, now_ms() + 60000]
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"%d" % ts, "timestamp": ts} for ts in stamps])
    assert [m.timestamp() for m in msgs] == [(TIMESTAMP_CREATE_TIME, ts) for ts in stamps]
    got = consume(broker, t, [0], len(stamps))
    assert [m.timestamp() for m in got] == [(TIMESTAMP_CREATE_TIME, ts) for ts in stamps]
    recs = kp_consume(broker, t, [0], len(stamps))
    assert [(r.timestamp_type, r.timestamp) for r in recs] == [(0, ts) for ts in stamps]


def test_log_append_time_topic_returns_broker_time(broker):
    t = topic_name("lat")
    create_topic(broker, t, 1, {"message.timestamp.type": "LogAppendTime"})
    client_ts = 1000000000000  # 2001: far from now
    before = now_ms()
    msgs = produce_ok(ck_producer(broker), t,
                      [{"value": b"v%d" % i, "timestamp": client_ts + i} for i in range(5)])
    after = now_ms()
    # the produce response carries the append time
    for m in msgs:
        ttype, ts = m.timestamp()
        assert ttype == TIMESTAMP_LOG_APPEND_TIME and before - 1000 <= ts <= after + 1000, m.timestamp()
    got = consume(broker, t, [0], 5)
    for m in got:
        ttype, ts = m.timestamp()
        assert ttype == TIMESTAMP_LOG_APPEND_TIME, "timestamp type %d, want LogAppendTime" % ttype
        assert before - 1000 <= ts <= after + 1000, "timestamp %d not broker time (%d..%d)" % (ts, before, after)
    recs = kp_consume(broker, t, [0], 5)
    assert all(r.timestamp_type == 1 and before - 1000 <= r.timestamp <= after + 1000 for r in recs)


T0 = 1600000000000


def produce_timeline(b, t):
    """Partition 0: ten single-message batches at T0, T0+1s, ...;
    partition 1: the same ten timestamps inside one batch."""
    p = ck_producer(b)
    for i in range(10):
        produce_ok(p, t, [{"value": b"p0-%d" % i, "partition": 0, "timestamp": T0 + 1000 * i}])
    p1 = ck_producer(b, **{"linger.ms": 200})
    msgs = produce_ok(p1, t, [{"value": b"p1-%d" % i, "partition": 1, "timestamp": T0 + 1000 * i}
                             for i in range(10)])
    assert [m.offset() for m in msgs] == list(range(10))


def ck_offset_for_time(c, t, partition, ts):
    (tp,) = c.offsets_for_times([TopicPartition(t, partition, ts)], timeout=10)
    assert tp.error is None, tp.error
    return tp.offset


def test_offsets_for_times_gives_first_offset_at_or_after_the_time(broker):
    t = topic_name("oft")
    create_topic(broker, t, 2)
    produce_timeline(broker, t)
    c = ck_consumer(broker)
    try:
        for partition in (0, 1):
            where = "partition %d (%s)" % (partition, "separate batches" if partition == 0 else "one batch")
            assert ck_offset_for_time(c, t, partition, T0 - 5000) == 0, where
            assert ck_offset_for_time(c, t, partition, T0) == 0, where
            assert ck_offset_for_time(c, t, partition, T0 + 3000) == 3, where
            assert ck_offset_for_time(c, t, partition, T0 + 3500) == 4, where
            assert ck_offset_for_time(c, t, partition, T0 + 9000) == 9, where
            assert ck_offset_for_time(c, t, partition, T0 + 9001) == -1, where
    finally:
        c.close()
    from kafka import TopicPartition as KTP
    kc = kp_consumer(broker)
    try:
        for partition in (0, 1):
            tp = KTP(t, partition)
            r = kc.offsets_for_times({tp: T0 + 3500})[tp]
            assert (r.offset, r.timestamp) == (4, T0 + 4000)
            assert kc.offsets_for_times({tp: T0 + 20000})[tp] is None
    finally:
        kc.close()


def test_watermarks_earliest_and_latest(broker):
    t = topic_name("wm")
    create_topic(broker, t, 2)
    produce_ok(ck_producer(broker), t, [{"value": b"x%d" % i, "partition": 0} for i in range(25)])
    c = ck_consumer(broker)
    try:
        assert c.get_watermark_offsets(TopicPartition(t, 0), timeout=10, cached=False) == (0, 25)
        assert c.get_watermark_offsets(TopicPartition(t, 1), timeout=10, cached=False) == (0, 0)
    finally:
        c.close()
    from kafka import TopicPartition as KTP
    kc = kp_consumer(broker)
    try:
        tps = [KTP(t, 0), KTP(t, 1)]
        assert kc.beginning_offsets(tps) == {tps[0]: 0, tps[1]: 0}
        assert kc.end_offsets(tps) == {tps[0]: 25, tps[1]: 0}
    finally:
        kc.close()
