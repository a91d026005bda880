"""Retention with real clients: retention.ms and retention.bytes delete
whole old segments on the broker's background check (never the active
one), the log start moves, fetches below it get OFFSET_OUT_OF_RANGE and a
consumer with auto.offset.reset=earliest carries on; a retention change
through AlterConfigs applies without a restart; DeleteRecords (raw frames:
confluent-kafka 1.7 has no delete_records) moves the log start on request;
every deletion shows in the log, /metrics and the SQL partitions table."""
import json
import os
import time
import urllib.request

from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource

import kafka_raw as kr
from retention_support import (API_DELETE_RECORDS, delete_records, fast_broker,
                               fetch_error, metric, wait_for, watermarks)
from support import (ck_admin, ck_consumer, ck_producer, consume, create_topic,
                     produce_ok, topic_name)

OFFSET_OUT_OF_RANGE = 1


def fill(b, t, n, size=200):
    p = ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 1})
    produce_ok(p, t, [{"key": b"k%d" % i, "value": b"x" * size} for i in range(n)])


def files(b, t, suffix):
    return [f for f in os.listdir(b.partition_dir(t)) if f.endswith(suffix)]


def sql_log_start(b, t):
    req = urllib.request.Request("http://%s/sql?format=json" % b.admin, method="POST",
                                 data=("SELECT log_start_offset FROM partitions WHERE topic='%s'" % t).encode())
    with urllib.request.urlopen(req, timeout=10) as r:
        return json.loads(r.read().decode())[0]["log_start_offset"]


def test_time_retention_deletes_old_segments_and_consumers_recover(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("ret-time")
    create_topic(b, t, 1, {"segment.bytes": "4096", "retention.ms": "-1",
                           "file.delete.delay.ms": "1500"})
    fill(b, t, 200)
    low, high = watermarks(b, t)
    assert (low, high) == (0, 200)
    segs = len(files(b, t, ".log"))
    assert segs > 5
    # A consumer parked at offset 0 before retention runs.
    c = ck_consumer(b, **{"auto.offset.reset": "earliest"})
    c.assign([TopicPartition(t, 0, 0)])
    got = [m for m in c.consume(10, timeout=10) if not m.error()]
    assert got and got[0].offset() == 0

    res = ConfigResource("topic", t, set_config={"segment.bytes": "4096", "retention.ms": "500",
                                                 "file.delete.delay.ms": "1500"})
    ck_admin(b).alter_configs([res])[res].result(timeout=10)

    # Segments age out one check after another; the active one stays.
    wait_for("only the active segment left", lambda: len(files(b, t, ".log")) == 1, timeout=15)
    low = watermarks(b, t)[0]
    assert 0 < low < 200
    # The files wait file.delete.delay.ms as *.deleted, then go.
    assert files(b, t, ".log.deleted"), os.listdir(b.partition_dir(t))
    wait_for("*.deleted unlinked", lambda: not files(b, t, ".deleted"), timeout=10)

    assert fetch_error(b, t, 0, 0) == OFFSET_OUT_OF_RANGE
    assert fetch_error(b, t, 0, low) == 0
    # The parked consumer resets to the earliest offset and reads on.
    rest = []
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline and (not rest or rest[-1].offset() < 199):
        rest += [m for m in c.consume(100, timeout=0.5) if not m.error()]
    c.close()
    assert rest and rest[-1].offset() == 199
    # (what librdkafka had prefetched below `low` it may still hand out;
    # what matters is that it got past the gap to the end without error)
    # A fresh consumer from the beginning starts at the log start.
    got = consume(b, t, [0], 200 - low, timeout=20, settle=0)
    assert got[0].offset() == low

    assert metric(b, "sluice_log_segments_deleted_total", t) == segs - 1
    assert metric(b, "sluice_log_bytes_deleted_total", t) > 0
    assert metric(b, "sluice_log_start_offset", t) == low
    wait_for("partitions table log_start_offset", lambda: sql_log_start(b, t) == low, timeout=10)
    assert "segments of %s-0 (retention)" % t in b.log_text()


def test_size_retention_keeps_at_most_retention_bytes(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("ret-bytes")
    create_topic(b, t, 1, {"segment.bytes": "4096", "retention.bytes": "10000",
                           "file.delete.delay.ms": "0"})
    fill(b, t, 300)
    wait_for("size retention", lambda: b.log_bytes(t) <= 10000, timeout=15)
    low, high = watermarks(b, t)
    assert low > 0 and high == 300
    assert len(files(b, t, ".log")) >= 1
    got = consume(b, t, [0], 300 - low, timeout=20, settle=0)
    assert [m.offset() for m in got] == list(range(low, 300))


def test_active_segment_is_never_deleted(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("ret-active")
    create_topic(b, t, 1, {"retention.ms": "100"})     # 1 GiB segments
    fill(b, t, 50)
    time.sleep(1.0)                                   # several checks
    assert watermarks(b, t) == (0, 50)
    assert len(consume(b, t, [0], 50, timeout=20, settle=0)) == 50


def test_truncated_delete_records_closes_the_connection_and_moves_nothing(start_broker):
    # The request is decoded whole before any partition moves: one cut off
    # before its TimeoutMs trims nothing (it used to trim the partitions
    # read before the bad bytes, then close).
    b = fast_broker(start_broker)
    t = topic_name("ret-dr-bad")
    create_topic(b, t, 1)
    fill(b, t, 10)
    body = kr.array([kr.string(t) + kr.array([kr.i32(0) + kr.i64(5)])])   # no TimeoutMs
    with kr.Conn(b.port, timeout=10) as c:
        c.send(API_DELETE_RECORDS, 1, body)
        assert c.wait_closed(5) == b""
    assert watermarks(b, t) == (0, 10)
    assert delete_records(b, t, 0, 5) == (5, 0)


def test_delete_records_moves_log_start(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("ret-dr")
    create_topic(b, t, 1, {"segment.bytes": "4096", "file.delete.delay.ms": "0"})
    fill(b, t, 100)
    assert delete_records(b, t, 0, 42, version=0) == (42, 0)
    assert watermarks(b, t) == (42, 100)
    assert fetch_error(b, t, 0, 41) == OFFSET_OUT_OF_RANGE
    got = consume(b, t, [0], 58, timeout=20, settle=0)
    assert got[0].offset() == 42
    assert delete_records(b, t, 0, 10) == (42, 0)       # never backwards
    assert delete_records(b, t, 0, 101)[1] == OFFSET_OUT_OF_RANGE
    assert delete_records(b, t, 0, -1) == (100, 0)      # -1: high watermark
    assert delete_records(b, "no-such-topic", 0, 1)[1] == 3
    assert metric(b, "sluice_log_segments_deleted_total", t) > 0
    # The new log start survives a restart (saved to SQLite at once).
    b.restart()
    assert watermarks(b, t) == (100, 100)
