"""The flush policy: flush.messages / flush.ms fdatasync a partition on
the flusher thread; the recovery point saved in SQLite (data_dir/sluice.db,
table local_logs) advances only to what was flushed; a topic without flush
settings does not fsync per message (counted in /metrics)."""
import os
import sqlite3
import time

from retention_support import fast_broker, metric, wait_for
from support import ck_producer, create_topic, produce_ok, topic_name


def saved_recovery_point(b, t):
    db = sqlite3.connect("file:%s?mode=ro" % os.path.join(b.data_dir, "sluice.db"), uri=True)
    try:
        row = db.execute("SELECT recovery_point FROM local_logs WHERE topic = ? AND partition = 0",
                         (t,)).fetchone()
        return row[0] if row else None
    finally:
        db.close()


def produce_one_by_one(b, t, n):
    p = ck_producer(b, **{"linger.ms": 0})
    for i in range(n):
        produce_ok(p, t, [{"value": b"m%d" % i}])


def test_flush_messages_1_recovery_point_tracks_log_end(start_broker):
    b = fast_broker(start_broker, **{"log.flush.offset.checkpoint.interval.ms": "200"})
    t = topic_name("flush1")
    create_topic(b, t, 1, {"flush.messages": "1"})
    produce_one_by_one(b, t, 30)
    wait_for("recovery point 30 in /metrics",
             lambda: metric(b, "sluice_log_recovery_point", t) == 30, timeout=10)
    assert metric(b, "sluice_log_flushes_total", t) >= 1
    wait_for("recovery point 30 in SQLite", lambda: saved_recovery_point(b, t) == 30, timeout=10)


def test_no_flush_settings_no_fsync_per_message(start_broker):
    b = fast_broker(start_broker, **{"log.flush.offset.checkpoint.interval.ms": "200"})
    t = topic_name("noflush")
    create_topic(b, t, 1)
    before = metric(b, "sluice_fsync_duration_seconds_count")
    produce_one_by_one(b, t, 50)
    time.sleep(1.5)
    assert metric(b, "sluice_log_flushes_total", t) == 0
    assert metric(b, "sluice_fsync_duration_seconds_count") - before < 5
    # Nothing flushed: the recovery point SQLite keeps stays where it was.
    assert (saved_recovery_point(b, t) or 0) == 0


def test_flush_ms_broker_default_flushes_within_the_interval(start_broker):
    b = fast_broker(start_broker, **{"log.flush.interval.ms": "300",
                                     "log.flush.scheduler.interval.ms": "100",
                                     "log.flush.offset.checkpoint.interval.ms": "200"})
    t = topic_name("flushms")
    create_topic(b, t, 1)
    produce_one_by_one(b, t, 20)
    wait_for("flush.ms flush", lambda: metric(b, "sluice_log_recovery_point", t) == 20, timeout=5)
    n = metric(b, "sluice_log_flushes_total", t)
    assert 1 <= n < 20                       # by time, not per message
    wait_for("recovery point in SQLite", lambda: saved_recovery_point(b, t) == 20, timeout=10)
