"""Compaction with real clients: keys with many versions written by
confluent-kafka; after the background cleaner has run, each key's newest
value is still there at its original offset (gaps between offsets), read
back by confluent-kafka and kafka-python; tombstones vanish delete.retention.ms
after the compaction that first kept them; compressed batches stay compressed with their codec;
cleanup.policy=compact,delete does both."""
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, TIMESTAMP_CREATE_TIME, TopicPartition
from confluent_kafka.admin import ConfigResource, ConfigSource

from retention_support import fast_broker, metric, wait_for, watermarks
from support import (ck_admin, ck_consumer, ck_producer, consume, create_topic, kp_consume,
                     produce_ok, topic_name)

KEYS, VERSIONS = 40, 15
BASE = {"cleanup.policy": "compact", "segment.bytes": "4096",
        "min.cleanable.dirty.ratio": "0.01", "file.delete.delay.ms": "0"}


def write_versions(b, t, codec="none", keys=KEYS, versions=VERSIONS, tag=b"v"):
    """{key: (newest value, its offset)} and every (key, value) -> offset."""
    p = ck_producer(b, **{"linger.ms": 5, "compression.type": codec, "batch.num.messages": 20})
    msgs = [{"key": b"key%03d" % (i % keys), "value": tag + b"%05d" % i + b"." * 40}
            for i in range(keys * versions)]
    acked = produce_ok(p, t, msgs)
    newest = {}
    for m in acked:
        newest[m.key()] = (m.value(), m.offset())
    return newest, {(m.key(), m.value()): m.offset() for m in acked}


def roll_active(b, t, n=60):
    """Filler under other keys, so the versions above leave the active segment."""
    p = ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 20})
    produce_ok(p, t, [{"key": b"filler%d" % i, "value": b"f" * 80} for i in range(n)])


def check_compacted(got, newest, offsets):
    seen = {}
    last = -1
    for m in got:
        assert m.offset() > last
        last = m.offset()
        if m.key() in newest and m.value() is not None:
            assert offsets[(m.key(), m.value())] == m.offset(), "offset moved"
            seen[m.key()] = (m.value(), m.offset())
    assert seen == newest            # every key's newest value, where it was


@pytest.mark.parametrize("codec", ["none", "lz4", "zstd"])
def test_newest_value_per_key_survives_at_its_offset(start_broker, codec):
    b = fast_broker(start_broker)
    t = topic_name("compact")
    create_topic(b, t, 1, BASE)
    newest, offsets = write_versions(b, t, codec)
    roll_active(b, t)
    wait_for("a compaction", lambda: (metric(b, "sluice_log_cleaner_runs_total", t) or 0) >= 1,
             timeout=20)
    low, high = watermarks(b, t)
    assert (low, high) == (0, KEYS * VERSIONS + 60)
    got = consume(b, t, [0], 1, timeout=20, settle=1.5)
    assert len(got) < KEYS * VERSIONS            # versions are gone
    check_compacted(got, newest, offsets)
    kgot = kp_consume(b, t, [0], len(got), timeout=20)
    assert [(r.offset, r.key, r.value) for r in kgot] == \
        [(m.offset(), m.key(), m.value()) for m in got]
    assert metric(b, "sluice_log_cleaner_records_removed_total", t) > 0
    assert "compacted %s-0:" % t in b.log_text()


def read_log(b, t, timeout=20.0, **conf):
    """Every record from the beginning to the high watermark, once (conf:
    consumer settings, e.g. isolation.level)."""
    high = watermarks(b, t)[1]
    c = ck_consumer(b, **conf)
    try:
        c.assign([TopicPartition(t, 0, OFFSET_BEGINNING)])
        out, deadline = [], time.monotonic() + timeout
        while time.monotonic() < deadline and (not out or out[-1].offset() < high - 1):
            out += [m for m in c.consume(num_messages=1000, timeout=0.2) if not m.error()]
        assert out and out[-1].offset() == high - 1, "read %d records, not to %d" % (len(out), high)
        return out
    finally:
        c.close()


def test_tombstones_vanish_after_delete_retention(start_broker):
    """A tombstone stays delete.retention.ms after the compaction that first
    kept it (Kafka's delete horizon), whatever its own timestamp -- these
    carry a CreateTime an hour old, which the old timestamp rule dropped at
    once -- and then goes with no further writes to the topic."""
    retention = 3.0
    b = fast_broker(start_broker)
    t = topic_name("tomb")
    create_topic(b, t, 1, dict(BASE, **{"delete.retention.ms": "%d" % (retention * 1000)}))
    write_versions(b, t, keys=10, versions=5)
    dead = {b"key%03d" % k for k in range(5)}
    old = int(time.time() * 1000) - 3600 * 1000
    p = ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 20})
    t_tombs = time.monotonic()
    produce_ok(p, t, [{"key": k, "value": None, "timestamp": old} for k in sorted(dead)])
    roll_active(b, t)

    def compacted_with_tombstones():
        got = read_log(b, t)
        tombs = {m.key() for m in got if m.value() is None}
        stale = [m for m in got if m.key() in dead and m.value() is not None]
        return got if tombs and not stale else None
    got = wait_for("a compaction that keeps the tombstones", compacted_with_tombstones,
                   timeout=20)
    tombs = [m for m in got if m.value() is None]
    assert {m.key() for m in tombs} == dead
    assert all(m.timestamp() == (TIMESTAMP_CREATE_TIME, old) for m in tombs)

    def tombstones_gone():
        got = read_log(b, t)
        return got if not [m for m in got if m.value() is None] else None
    got = wait_for("the tombstones to go", tombstones_gone, timeout=retention + 20)
    assert time.monotonic() - t_tombs >= retention      # not before their horizon
    live = {m.key() for m in got if m.key().startswith(b"key")}
    assert live == {b"key%03d" % k for k in range(5, 10)}
    assert "compacted %s-0:" % t in b.log_text()


def test_compact_delete_does_both(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("cd")
    create_topic(b, t, 1, dict(BASE, **{"cleanup.policy": "compact,delete",
                                        "retention.bytes": "6000"}))
    write_versions(b, t)
    roll_active(b, t)
    wait_for("retention", lambda: watermarks(b, t)[0] > 0, timeout=20)
    wait_for("bytes within retention", lambda: b.log_bytes(t) <= 6000 + 4096, timeout=20)
    got = consume(b, t, [0], 1, timeout=20, settle=1.0)
    assert got[-1].offset() == KEYS * VERSIONS + 59


def test_restart_does_not_compact_the_cleaned_part_again(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("ckpt")
    create_topic(b, t, 1, BASE)
    newest, offsets = write_versions(b, t)
    roll_active(b, t)
    wait_for("a compaction", lambda: (metric(b, "sluice_log_cleaner_runs_total", t) or 0) >= 1,
             timeout=20)
    time.sleep(1.0)                  # later ticks find nothing dirty
    b.restart()
    # cleaner-offset-checkpoint: nothing is dirty after the restart, so
    # ticks every 200 ms find nothing to do (it used to re-clean it all).
    time.sleep(2.0)
    assert (metric(b, "sluice_log_cleaner_runs_total", t) or 0) == 0
    check_compacted(consume(b, t, [0], 1, timeout=20, settle=1.0), newest, offsets)
    # New versions past it are cleaned as before.
    newest, offsets2 = write_versions(b, t, tag=b"w")
    offsets.update(offsets2)
    roll_active(b, t)
    wait_for("a compaction", lambda: (metric(b, "sluice_log_cleaner_runs_total", t) or 0) >= 1,
             timeout=20)
    check_compacted(consume(b, t, [0], 1, timeout=20, settle=1.5), newest, offsets)


def test_broker_describe_configs_shows_log_cleaner_keys(start_broker):
    b = start_broker({"log.cleaner.threads": "2",
                      "log.cleaner.io.max.bytes.per.second": "50000000"})
    res = ConfigResource(ConfigResource.Type.BROKER, str(b.broker_id))
    cfg = ck_admin(b).describe_configs([res], request_timeout=10)[res].result(timeout=10)

    def entry(name):
        assert name in cfg, "DescribeConfigs lacks %s" % name
        e = cfg[name]
        return e.value, ConfigSource(e.source) if not isinstance(e.source, ConfigSource) \
            else e.source
    assert entry("log.cleaner.threads") == ("2", ConfigSource.STATIC_BROKER_CONFIG)
    assert entry("log.cleaner.io.max.bytes.per.second") == \
        ("50000000", ConfigSource.STATIC_BROKER_CONFIG)
    # Kafka's defaults, marked as such
    for name, value in (("log.cleaner.enable", "true"),
                        ("log.cleaner.dedupe.buffer.size", "134217728"),
                        ("log.cleaner.backoff.ms", "15000"),
                        ("log.cleaner.min.cleanable.ratio", "0.5")):
        assert entry(name) == (value, ConfigSource.DEFAULT_CONFIG), name
