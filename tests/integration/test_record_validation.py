"""Every record of a produced batch is validated before it is acknowledged
(protocol/validate.c, Kafka's LogValidator): a batch with a valid CRC-32C
whose records a consumer could not read, or which break the topic's rules,
is refused whole with CORRUPT_MESSAGE, INVALID_RECORD or INVALID_TIMESTAMP
(and on Produce v8+ an ErrorMessage and RecordErrors naming the record);
nothing of it is stored, the connection carries on, and a consumer of the
partition reads every good message byte for byte."""
import gzip
import time

import pytest

import kafka_raw as kr
from support import assert_serves, consume, create_topic, kcat, topic_name

CORRUPT_MESSAGE = 2
INVALID_TIMESTAMP = 32
UNSUPPORTED_COMPRESSION_TYPE = 76     # zstd before Produce v7
INVALID_RECORD = 87

HOUR_MS = 3600 * 1000
GZIP, SNAPPY, LZ4, ZSTD = 1, 2, 3, 4


def rec(i, key=b"key", value=None, ts_delta=0):
    return kr.record_bytes(i, key, value if value is not None else b"value-%d-" % i + b"x" * 24,
                           ts_delta=ts_delta)


def wrong_length(i, by):
    """Record i with its length field off by `by`."""
    r = rec(i)
    n = len(r) - 1                     # the length varint is one byte here
    return kr.varint(n + by) + r[1:]


# name: (topic config, batch(now), v3 error, v11 error, message part, record index or None)
CASES = {
    "gzip-attribute-over-plain-bytes":
        ({}, lambda now: kr.raw_batch(rec(0) + rec(1), 2, now, attributes=GZIP),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "gzip records do not decompress", None),
    "snappy-attribute-over-plain-bytes":
        ({}, lambda now: kr.raw_batch(rec(0) + rec(1), 2, now, attributes=SNAPPY),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "Batch: snappy records do not decompress", None),
    "lz4-attribute-over-plain-bytes":
        ({}, lambda now: kr.raw_batch(rec(0) + rec(1), 2, now, attributes=LZ4),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "lz4 records do not decompress", None),
    "zstd-attribute-over-plain-bytes":
        ({}, lambda now: kr.raw_batch(rec(0) + rec(1), 2, now, attributes=ZSTD),
         UNSUPPORTED_COMPRESSION_TYPE, CORRUPT_MESSAGE, "zstd records do not decompress", None),
    "valid-gzip-of-garbage":
        ({}, lambda now: kr.raw_batch(gzip.compress(kr.varint(1000) + b"garbage " * 40), 2, now,
                                      attributes=GZIP),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "Record 0 in batch: length 1000 runs past the batch end", 0),
    "record-length-too-long":
        ({}, lambda now: kr.raw_batch(rec(0) + wrong_length(1, 100), 2, now),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "Record 1 in batch: length 141 runs past the batch end", 1),
    "record-length-too-short":
        ({}, lambda now: kr.raw_batch(rec(0) + wrong_length(1, -3) + rec(2), 3, now),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "Record 1 in batch: fields do not fill its length 38", 1),
    "record-count-too-small-in-gzip":
        ({}, lambda now: kr.raw_batch(gzip.compress(rec(0) + rec(1) + rec(2)), 2, now,
                                      attributes=GZIP),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "bytes after the last of RecordsCount 2 records", None),
    "record-count-too-large-in-gzip":
        ({}, lambda now: kr.raw_batch(gzip.compress(rec(0) + rec(1)), 3, now, attributes=GZIP),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "Record 2 in batch: missing", 2),
    "offset-delta-out-of-order":
        ({}, lambda now: kr.raw_batch(rec(0) + rec(2) + rec(1), 3, now),
         CORRUPT_MESSAGE, INVALID_RECORD, "Record 1 in batch: OffsetDelta 2, expected 1", 1),
    "truncated-varint":
        ({}, lambda now: kr.raw_batch(rec(0) + rec(1) + b"\xff\xff", 3, now),
         CORRUPT_MESSAGE, CORRUPT_MESSAGE, "Record 2 in batch: length varint truncated", 2),
    "null-key-on-compacted-topic":
        ({"cleanup.policy": "compact"},
         lambda now: kr.raw_batch(rec(0) + rec(1, key=None), 2, now),
         CORRUPT_MESSAGE, INVALID_RECORD,
         "Record 1 in batch: Compacted topic cannot accept message without key", 1),
    # Kafka's LogValidator: InvalidRecordException, no INVALID_RECORD before v8
    "control-batch-from-a-client":
        ({}, lambda now: kr.raw_batch(rec(0), 1, now, attributes=0x20),
         CORRUPT_MESSAGE, INVALID_RECORD, "Clients are not allowed to write control records", None),
    "delete-horizon-from-a-client":
        ({}, lambda now: kr.raw_batch(rec(0), 1, now, attributes=0x40),
         CORRUPT_MESSAGE, INVALID_RECORD, "delete horizon", None),
    # the batch's BaseTimestamp and MaxTimestamp are both now: only the
    # record itself is out of range
    "timestamp-too-old":
        ({"message.timestamp.before.max.ms": str(HOUR_MS)},
         lambda now: kr.raw_batch(rec(0) + rec(1, ts_delta=-2 * HOUR_MS), 2, now),
         INVALID_TIMESTAMP, INVALID_TIMESTAMP, "Record 1 in batch: timestamp", 1),
    "timestamp-too-new":
        ({"message.timestamp.difference.max.ms": str(HOUR_MS)},
         lambda now: kr.raw_batch(rec(0) + rec(1, ts_delta=2 * HOUR_MS), 2, now, now),
         INVALID_TIMESTAMP, INVALID_TIMESTAMP, "Record 1 in batch: timestamp", 1),
}


def good_batch(first, now):
    """Two well-formed records, keys good-<first>, good-<first+1>."""
    recs = [(b"good-%d" % (first + i), b"payload-%d-\x00\xff" % (first + i) + bytes(range(40)), [], 0)
            for i in range(2)]
    return kr.record_batch(recs, now), recs


def produce_v3(c, t, batch, partition=0):
    (res,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3,
                                           kr.produce_v3_body(t, partition, batch)))
    return res[2], res[3]


@pytest.mark.parametrize("case", list(CASES))
def test_poison_batch_is_refused_whole_and_consumers_read_on(broker, case):
    config, make, err_v3, err_v11, message, index = CASES[case]
    t = topic_name("val")
    create_topic(broker, t, 1, config)
    now = int(time.time() * 1000)
    first, first_recs = good_batch(0, now)
    poison = make(now)
    with kr.Conn(broker.port) as c:
        assert produce_v3(c, t, first) == (0, 0)
        # Produce v3: no INVALID_RECORD before v8, no message
        assert produce_v3(c, t, poison) == (err_v3, -1), case
        # Produce v11: the record and the fault are named
        r = c.request_flex(kr.API_PRODUCE, 11, kr.produce_v11_body(t, 0, poison))
        ((_, _, err, base, rec_errs, msg),) = kr.parse_produce_v11_full(r)
        assert (err, base) == (err_v11, -1), (case, msg)
        assert msg is not None and message in msg, (case, msg)
        if index is None:
            assert rec_errs == [], (case, rec_errs)
        else:
            assert rec_errs == [(index, msg)], (case, rec_errs)
        # nothing was stored: the next good batch lands right after the first
        second, second_recs = good_batch(2, now)
        assert produce_v3(c, t, second) == (0, 2), case
    got = consume(broker, t, [0], 4)
    want = first_recs + second_recs
    assert [(m.offset(), m.key(), m.value()) for m in got] == \
        [(i, k, v) for i, (k, v, _, _) in enumerate(want)], case
    assert_serves(broker, case)


def test_one_poison_partition_does_not_stop_the_others(broker):
    """Two partitions in one request: the poison one is refused, the good
    one appended; the connection stays open."""
    t = topic_name("val")
    create_topic(broker, t, 2)
    now = int(time.time() * 1000)
    good, good_recs = good_batch(0, now)
    poison = kr.raw_batch(rec(0) + wrong_length(1, 100), 2, now)
    body = (kr.cstring(None) + kr.i16(-1) + kr.i32(10000) + kr.carray(
        [kr.cstring(t) + kr.carray([kr.i32(0) + kr.cbytes(poison) + kr.tags(),
                                    kr.i32(1) + kr.cbytes(good) + kr.tags()]) + kr.tags()]) +
        kr.tags())
    with kr.Conn(broker.port) as c:
        res = kr.parse_produce_v11_full(c.request_flex(kr.API_PRODUCE, 11, body))
        assert [(p, err, base) for _, p, err, base, _, _ in res] == \
            [(0, CORRUPT_MESSAGE, -1), (1, 0, 0)], res
        # same connection, still served; partition 0 kept nothing
        assert produce_v3(c, t, good, partition=1) == (0, 2)
        assert produce_v3(c, t, good, partition=0) == (0, 0)
    got = consume(broker, t, [1], 4)
    assert [m.value() for m in got] == [v for _, v, _, _ in good_recs] * 2


def test_null_key_is_fine_on_a_delete_topic_and_old_timestamps_without_a_bound(broker):
    """The rules follow the topic: no bound, no compaction, no refusal."""
    t = topic_name("val")
    create_topic(broker, t, 1)
    now = int(time.time() * 1000)
    batch = kr.raw_batch(rec(0, key=None) + rec(1, ts_delta=-10 * 365 * 24 * HOUR_MS), 2, now)
    with kr.Conn(broker.port) as c:
        assert produce_v3(c, t, batch) == (0, 0)
    got = consume(broker, t, [0], 2)
    assert [m.key() for m in got] == [None, b"key"]


@pytest.mark.parametrize("codec", ["gzip", "snappy", "lz4", "zstd"])
def test_kcat_compressed_batches_are_accepted_and_read_back(broker, codec):
    """Real clients' compressed batches pass validation: kcat -z, keyed
    lines (-K:), onto a compacted topic so keys are checked too."""
    t = topic_name("val")
    create_topic(broker, t, 1, {"cleanup.policy": "compact",
                                "message.timestamp.difference.max.ms": str(HOUR_MS)})
    lines = [b"k%03d:%s" % (i, (b"value %d " % i) * (1 + i % 20)) for i in range(300)]
    p = kcat(broker, ["-P", "-t", t, "-p", "0", "-K:", "-z", codec, "-X", "linger.ms=50"],
             b"\n".join(lines) + b"\n")
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    got = consume(broker, t, [0], len(lines))
    assert [m.key() + b":" + m.value() for m in got] == lines


@pytest.mark.parametrize("codec", [0, GZIP, ZSTD])
def test_create_time_batch_header_is_set_from_its_records(broker, codec):
    """On a CreateTime topic the batch's MaxTimestamp and timestamp type
    are what its records say, as Kafka's LogValidator sets them: a client's
    LogAppendTime bit or a MaxTimestamp years ahead would otherwise steer
    every consumer's timestamps, time-based retention and lookups."""
    import struct
    t = topic_name("val")
    create_topic(broker, t, 1)
    now = int(time.time() * 1000)
    future = now + 10 * 365 * 24 * HOUR_MS
    LOG_APPEND_TIME = 0x08
    area = rec(0) + rec(1, ts_delta=5)
    if codec == GZIP:
        area = gzip.compress(area)
    elif codec == ZSTD:
        import zstandard
        area = zstandard.ZstdCompressor().compress(area)
    batch = kr.raw_batch(area, 2, now, max_timestamp=future,
                         attributes=LOG_APPEND_TIME | codec)
    with kr.Conn(broker.port) as c:
        r = c.request_flex(kr.API_PRODUCE, 11, kr.produce_v11_body(t, 0, batch))
        assert [(err, base) for _, _, err, base, _, _ in kr.parse_produce_v11_full(r)] == [(0, 0)]
        ((_, _, err, _, stored),) = kr.parse_fetch_v4(
            c.request(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, 0)))
    assert err == 0 and len(stored) > 61
    # BaseOffset 8, BatchLength 4, LeaderEpoch 4, Magic 1, Crc 4, then the
    # CRC'd part: Attributes 2, LastOffsetDelta 4, BaseTimestamp 8, MaxTimestamp 8
    (attrs,) = struct.unpack(">h", stored[21:23])
    (max_ts,) = struct.unpack(">q", stored[35:43])
    (crc,) = struct.unpack(">I", stored[17:21])
    assert attrs & LOG_APPEND_TIME == 0 and attrs & 7 == codec, attrs
    assert max_ts == now + 5, (max_ts, now)
    assert crc == kr.crc32c(stored[21:]), "the stored batch's CRC is not its bytes'"
    got = consume(broker, t, [0], 2)
    assert [m.timestamp() for m in got] == [(1, now), (1, now + 5)]
