"""Reads that cross segment files, as clients see them: one Fetch goes on
from segment to segment (up to 16 of them) up to the high watermark, small fetches page
through every segment boundary, the messages table pages by offset and by
timestamp across segments (reading only what it returns), and ListOffsets
by time finds records in later segments, compressed or not."""
import os

import kafka_raw as kr
from support import ck_producer, create_topic, kp_consumer, produce_ok, topic_name
from test_sql import admin_broker, messages_bytes_read, sql

T0 = 1700000000000
N = 300
SEGMENT = {"segment.bytes": "4096"}     # about fifteen one-record batches each


def value(i):
    return b"value-%03d-" % i + b"s" * 200


def produce_one_batch_each(b, t):
    """Partition 0: N single-record uncompressed batches, record i at
    T0 + 1000 * i, so the log rolls every few kilobytes."""
    with kr.Conn(b.port, timeout=10) as c:
        for i in range(N):
            batch = kr.record_batch([(b"k%d" % i, value(i), [], 0)], T0 + 1000 * i)
            (res,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3,
                                                   kr.produce_v3_body(t, 0, batch)))
            assert res[2] == 0 and res[3] == i, res


def segment_files(b, t, partition=0):
    d = os.path.join(b.data_dir, "%s-%d" % (t, partition))
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def batches(records):
    """(BaseOffset, LastOffsetDelta) of each whole batch in a Fetch's records."""
    whole = list(kr.walk_batches(records))
    assert sum(len(x.raw) for x in whole) == len(records), "partial batch sent"
    return [(x.base, x.last_delta) for x in whole]


def fetch(b, t, offset, partition_max_bytes=1 << 20):
    with kr.Conn(b.port, timeout=10) as c:
        (res,) = kr.parse_fetch_v4(c.request(kr.API_FETCH, 4, kr.fetch_v4_body(
            t, 0, offset, 0, partition_max_bytes=partition_max_bytes), timeout=10))
    assert res[2] == 0, res
    return res[3], batches(res[4])


def test_one_fetch_goes_on_across_segments_to_the_high_watermark(start_broker):
    b = start_broker()
    t = topic_name("segfetch")
    create_topic(b, t, 1, config=SEGMENT)
    produce_one_batch_each(b, t)
    per_segment = N // len(segment_files(b, t))
    assert per_segment < 20
    for start in (0, 1, 137, N - 1):
        # A response holds ranges of up to 16 segments: whole ones after the
        # first, contiguous, never past the high watermark.
        hw, got = fetch(b, t, start)
        assert hw == N
        bases = [base for base, _ in got]
        assert bases == list(range(start, start + len(bases))), start
        assert len(bases) >= min(N - start, 10 * per_segment), start
        off = start + len(bases)
        while off < N:
            _, more = fetch(b, t, off)
            assert more and more[0][0] == off
            off = more[-1][0] + more[-1][1] + 1
        assert off == N
    hw, got = fetch(b, t, N)
    assert (hw, got) == (N, [])


def test_small_fetches_page_through_every_segment_boundary(start_broker):
    b = start_broker()
    t = topic_name("segpage")
    create_topic(b, t, 1, config=SEGMENT)
    produce_one_batch_each(b, t)
    seen, off = [], 0
    while off < N:
        _, got = fetch(b, t, off, partition_max_bytes=700)   # two batches or so
        assert got, "no progress at offset %d" % off
        seen += [base for base, _ in got]
        off = got[-1][0] + got[-1][1] + 1
    assert seen == list(range(N))


def test_messages_table_pages_by_offset_and_time_across_segments(start_broker):
    b = admin_broker(start_broker)
    t = topic_name("segsql")
    create_topic(b, t, 1, config=SEGMENT)
    produce_one_batch_each(b, t)
    where = "topic='%s' AND partition=0" % t
    rows = sql(b, "SELECT offset, key, timestamp FROM messages WHERE %s" % where)
    assert [(r["offset"], r["key"], r["timestamp"]) for r in rows] == \
        [(i, "k%d" % i, T0 + 1000 * i) for i in range(N)]
    everything = messages_bytes_read(b)
    for lo in (0, 14, 15, 16, 140, 290):
        before = messages_bytes_read(b)
        rows = sql(b, "SELECT offset, value FROM messages WHERE %s AND offset >= %d LIMIT 5"
                      % (where, lo))
        assert [r["offset"] for r in rows] == list(range(lo, min(lo + 5, N)))
        assert rows[0]["value"] == value(lo).decode()
        # The .index seek: a few segments' worth at most, not the log.
        assert messages_bytes_read(b) - before < everything / 10, lo
    for i in (3, 150, 299):
        before = messages_bytes_read(b)
        rows = sql(b, "SELECT offset, timestamp FROM messages WHERE %s AND timestamp >= %d "
                      "LIMIT 3" % (where, T0 + 1000 * i - 500))
        assert [r["offset"] for r in rows] == list(range(i, min(i + 3, N)))
        # Each older segment costs index searches and a few headers.
        assert messages_bytes_read(b) - before < everything / 4, i
    rows = sql(b, "SELECT count(*) AS n FROM messages WHERE %s AND offset < 100 "
                  "AND offset >= 50" % where)
    assert rows[0]["n"] == 50


def test_list_offsets_by_time_finds_records_in_later_segments(start_broker):
    from kafka import TopicPartition as KTP
    b = start_broker()
    t = topic_name("segtime")
    create_topic(b, t, 2, config=SEGMENT)
    produce_one_batch_each(b, t)
    # Partition 1: compressed batches of about ten records.
    p = ck_producer(b, **{"compression.type": "zstd", "linger.ms": 100,
                          "batch.num.messages": 10})
    produce_ok(p, t, [{"value": value(i), "partition": 1, "timestamp": T0 + 1000 * i}
                      for i in range(N)])
    assert len(segment_files(b, t, 1)) > 1
    kc = kp_consumer(b)
    try:
        for partition in (0, 1):
            tp = KTP(t, partition)
            for i in (0, 17, 150, 299):
                r = kc.offsets_for_times({tp: T0 + 1000 * i - 500})[tp]
                assert (r.offset, r.timestamp) == (i, T0 + 1000 * i), (partition, i)
            assert kc.offsets_for_times({tp: T0 + 1000 * N})[tp] is None
    finally:
        kc.close()
