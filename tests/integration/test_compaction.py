"""Compaction with real clients: keys with many versions written by
confluent-kafka; after the background cleaner has run, each key's newest
value is still there at its original offset (gaps between offsets), read
back by confluent-kafka and kafka-python; tombstones vanish once older than
delete.retention.ms; compressed batches stay compressed with their codec;
cleanup.policy=compact,delete does both."""
import pytest

from retention_support import fast_broker, metric, wait_for, watermarks
from support import (ck_producer, consume, create_topic, kp_consume, produce_ok,
                     topic_name)

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


def test_tombstones_vanish_after_delete_retention(start_broker):
    b = fast_broker(start_broker)
    t = topic_name("tomb")
    create_topic(b, t, 1, dict(BASE, **{"delete.retention.ms": "3000"}))
    newest, offsets = write_versions(b, t, keys=10, versions=5)
    p = ck_producer(b, **{"linger.ms": 0, "batch.num.messages": 20})
    produce_ok(p, t, [{"key": b"key%03d" % k, "value": None} for k in range(5)])
    roll_active(b, t)
    wait_for("a compaction", lambda: (metric(b, "sluice_log_cleaner_runs_total", t) or 0) >= 1,
             timeout=20)
    got = consume(b, t, [0], 1, timeout=20, settle=1.5)
    keys = {m.key() for m in got if m.value() is None}
    assert keys == {b"key%03d" % k for k in range(5)}    # young tombstones stay
    assert not [m for m in got if m.key() in keys and m.value() is not None]
    # Dirty again, later than delete.retention.ms (3 s): a pass drops them (a
    # slow machine may need one more pass for its plan time to be late
    # enough).
    for _ in range(3):
        runs = metric(b, "sluice_log_cleaner_runs_total", t)
        roll_active(b, t, 60)
        wait_for("another compaction",
                 lambda: metric(b, "sluice_log_cleaner_runs_total", t) > runs, timeout=20)
        got = consume(b, t, [0], 1, timeout=20, settle=1.5)
        if not [m for m in got if m.value() is None]:
            break
    assert not [m for m in got if m.value() is None]      # gone for good
    live = {m.key() for m in got if m.key().startswith(b"key")}
    assert live == {b"key%03d" % k for k in range(5, 10)}


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
