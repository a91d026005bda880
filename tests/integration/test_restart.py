"""Durability across restarts: a clean stop keeps everything; a crash
(SIGKILL) keeps every acknowledged message at its acknowledged offset,
and the log is served cleanly up to its recovered end."""
import os
import resource
import signal
import subprocess
import threading
import time

from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource

from support import (assert_serves, ck_admin, ck_consumer, ck_producer, consume,
                     create_topic, produce_ok, topic_name, wait_topic)


def test_sigterm_restart_keeps_every_message(broker):
    t = topic_name("term")
    create_topic(broker, t, 3, {"retention.ms": "604800000"})
    vals = [b"msg-%05d-" % i + bytes([i & 0xFF]) * (i % 50) for i in range(3000)]
    msgs = produce_ok(ck_producer(broker, acks="all"), t,
                      [{"key": b"k%d" % (i % 37), "value": v, "partition": i % 3} for i, v in enumerate(vals)])
    acked = {(m.partition(), m.offset()): (m.key(), m.value()) for m in msgs}

    rc = broker.restart(signal.SIGTERM)
    assert rc == 0, "sluiced exited with %s on SIGTERM (want a clean 0)\n%s" % (rc, broker.log_tail())

    wait_topic(broker, t, 3)
    got = consume(broker, t, [0, 1, 2], len(vals), timeout=60)
    assert {(m.partition(), m.offset()): (m.key(), m.value()) for m in got} == acked
    assert len(got) == len(vals)
    # topic configs survive too, and new messages continue the offsets
    res = ConfigResource(ConfigResource.Type.TOPIC, t)
    cfg = ck_admin(broker).describe_configs([res], request_timeout=15)[res].result(timeout=15)
    assert cfg["retention.ms"].value == "604800000"
    m = produce_ok(ck_producer(broker), t, [{"value": b"after-restart", "partition": 0}])[0]
    assert m.offset() == 1000


def test_sigkill_mid_produce_keeps_every_acknowledged_message(broker):
    t = topic_name("kill")
    create_topic(broker, t, 3)
    acked = {}            # (partition, offset) -> value
    failed = []
    stop = threading.Event()
    lock = threading.Lock()

    def on_delivery(err, msg):
        with lock:
            if err is None:
                acked[(msg.partition(), msg.offset())] = msg.value()
            else:
                failed.append(err)

    producer = ck_producer(broker, acks="all", **{"linger.ms": 2, "message.timeout.ms": 5000,
                                                  "retries": 0, "reconnect.backoff.max.ms": 100})

    def run():
        i = 0
        while not stop.is_set():
            v = b"v-%07d-" % i + b"x" * (i % 200)
            try:
                producer.produce(t, value=v, partition=i % 3, on_delivery=on_delivery)
                i += 1
            except BufferError:
                pass
            producer.poll(0.001 if i % 100 == 0 else 0)

    th = threading.Thread(target=run, daemon=True)
    th.start()
    deadline = time.monotonic() + 10
    while len(acked) < 20000 and time.monotonic() < deadline:
        time.sleep(0.01)
    n_before_kill = len(acked)
    assert n_before_kill > 0, "no message was acknowledged before the kill: %s" % failed[:3]
    broker.stop(signal.SIGKILL)
    time.sleep(0.3)
    stop.set()
    th.join(10)
    assert not th.is_alive()
    producer.purge()
    producer.flush(10)
    with lock:
        acked_now = dict(acked)
        n_failed = len(failed)
    print("acked before kill: %d, at kill: %d, failed/purged: %d" % (n_before_kill, len(acked_now), n_failed))
    # A test-validity check, not a broker one: the kill must land mid-produce.
    assert n_failed > 0, "no message was in flight at the kill; the test did not exercise a crash mid-produce"
    broker.start()   # same port, same data dir

    wait_topic(broker, t, 3)
    c = ck_consumer(broker)
    try:
        hw = {p: c.get_watermark_offsets(TopicPartition(t, p), timeout=10, cached=False) for p in range(3)}
    finally:
        c.close()
    for p in range(3):
        top = max([o for (pp, o) in acked_now if pp == p], default=-1)
        assert hw[p][0] == 0 and hw[p][1] > top, \
            "partition %d recovered to %s, but offset %d was acknowledged" % (p, hw[p], top)
    total = sum(h for _, h in hw.values())
    got = consume(broker, t, [0, 1, 2], total, timeout=60)
    stored = {}
    for m in got:
        assert (m.partition(), m.offset()) not in stored, "offset %d/%d served twice" % (m.partition(), m.offset())
        stored[(m.partition(), m.offset())] = m.value()
    for p in range(3):
        offs = sorted(o for (pp, o) in stored if pp == p)
        assert offs == list(range(hw[p][1])), "partition %d does not read back as 0..%d" % (p, hw[p][1] - 1)
    missing = [(k, v[:12]) for k, v in acked_now.items() if stored.get(k) != v]
    assert not missing, "%d of %d acknowledged messages lost or changed after SIGKILL, e.g. %s" % (
        len(missing), len(acked_now), missing[:5])
    # The log goes on from its recovered end.
    m = produce_ok(ck_producer(broker), t, [{"value": b"after-crash", "partition": 0}])[0]
    assert m.offset() == hw[0][1]
    assert_serves(broker, "a SIGKILL restart")


def test_small_segments_roll_and_read_back_across_restarts(start_broker):
    b = start_broker({"log.segment.bytes": "65536", "log.flush.interval.messages": "100"})
    t = topic_name("roll")
    create_topic(b, t, 1)
    vals = [b"seg-%05d-" % i + bytes([i & 0xFF]) * 200 for i in range(3000)]
    msgs = produce_ok(ck_producer(b, **{"linger.ms": 5, "batch.num.messages": 50}), t,
                      [{"value": v, "timestamp": 1600000000000 + i} for i, v in enumerate(vals)])
    assert [m.offset() for m in msgs] == list(range(len(vals)))
    import os
    logs = sorted(f for f in os.listdir(b.partition_dir(t)) if f.endswith(".log"))
    assert len(logs) >= 5, "3000 x 210 bytes with log.segment.bytes=65536 rolled into only %s" % logs

    def check_all(when):
        got = consume(b, t, [0], len(vals), timeout=60)
        assert [(m.offset(), m.value()) for m in got] == list(enumerate(vals)), when
        # reads that start inside later segments, and a time lookup there
        for start in (1234, 2999):
            got = consume(b, t, [0], len(vals) - start, offsets={0: start}, settle=0)
            assert [m.offset() for m in got] == list(range(start, len(vals))), when
        c = ck_consumer(b)
        try:
            (tp,) = c.offsets_for_times([TopicPartition(t, 0, 1600000000000 + 2500)], timeout=10)
            assert tp.offset == 2500, "%s: offsets_for_times in a later segment gave %d" % (when, tp.offset)
        finally:
            c.close()

    check_all("before restart")
    assert b.restart(signal.SIGTERM) == 0
    check_all("after SIGTERM restart")
    b.restart(signal.SIGKILL)
    check_all("after SIGKILL restart")
    m = produce_ok(ck_producer(b), t, [{"value": b"next"}])[0]
    assert m.offset() == len(vals)


def _segment_logs(broker, t):
    return sorted(f for f in os.listdir(broker.partition_dir(t)) if f.endswith(".log"))


def _open_files_in(pid, d):
    """Names of the files of directory d that process pid holds open."""
    names = []
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            target = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if os.path.dirname(target) == d:
            names.append(os.path.basename(target))
    return sorted(names)


def test_restart_does_not_roll_a_segment_of_old_timestamps(broker):
    """segment.ms counts as Kafka's does: from the segment's first batch
    timestamp to the newest one appended, never from the wall clock at a
    restart (which rolled every partition of old data at once)."""
    t = topic_name("oldts")
    create_topic(broker, t, 1, {"segment.ms": "60000"})
    old = 1700000000000                      # 2023: far older than segment.ms
    p = ck_producer(broker)
    produce_ok(p, t, [{"value": b"a", "partition": 0, "timestamp": old}])
    broker.restart(signal.SIGTERM)
    wait_topic(broker, t, 1)
    p = ck_producer(broker)
    produce_ok(p, t, [{"value": b"b", "partition": 0, "timestamp": old + 1000}])
    assert _segment_logs(broker, t) == ["%020d.log" % 0]
    # 60 s of batch time later than the first batch, and a little more: a roll
    m = produce_ok(p, t, [{"value": b"c", "partition": 0, "timestamp": old + 60001}])[0]
    assert _segment_logs(broker, t) == ["%020d.log" % 0, "%020d.log" % m.offset()]
    got = consume(broker, t, [0], 3)
    assert [(x.value(), x.timestamp()[1]) for x in got] == [
        (b"a", old), (b"b", old + 1000), (b"c", old + 60001)]


def test_closed_segments_hold_only_their_log_fd_and_still_serve(broker):
    """After a restart, a partition of several segments holds the .log of
    each open (sendfile needs it) but the indexes of the active one only."""
    t = topic_name("fds")
    create_topic(broker, t, 1, {"segment.bytes": "4096"})
    vals = [b"%04d-" % i + b"x" * 300 for i in range(60)]
    produce_ok(ck_producer(broker, **{"linger.ms": 0, "batch.num.messages": 1}), t,
               [{"value": v, "partition": 0} for v in vals])
    broker.restart(signal.SIGTERM)
    wait_topic(broker, t, 1)
    logs = _segment_logs(broker, t)
    assert len(logs) >= 4, logs
    held = _open_files_in(broker.proc.pid, broker.partition_dir(t))
    active = logs[-1][:-len(".log")]
    assert sorted(f for f in held if not f.endswith(".log")) == [active + ".index",
                                                                 active + ".timeindex"], held
    assert sorted(f for f in held if f.endswith(".log")) == logs, held
    # Lookups in the closed segments go through their indexes' mappings.
    got = consume(broker, t, [0], len(vals))
    assert [m.value() for m in got] == vals
    got = consume(broker, t, [0], len(vals) - 25, offsets={0: 25}, settle=0)
    assert [(m.offset(), m.value()) for m in got] == list(enumerate(vals))[25:]


def test_broker_without_enough_fds_refuses_to_start_with_one_clear_line(start_broker):
    """Out of descriptors while opening partitions: the broker says so and
    exits, rather than serving some partitions and not others."""
    b = start_broker()
    t = topic_name("nofd")
    create_topic(b, t, 200)
    produce_ok(ck_producer(b), t, [{"value": b"v", "partition": i} for i in range(200)])
    assert b.stop() == 0

    def low_limit():
        resource.setrlimit(resource.RLIMIT_NOFILE, (256, 256))

    with open(b.log_path, "ab") as log:
        proc = subprocess.Popen(b.argv(), stdin=subprocess.DEVNULL, stdout=log,
                                stderr=subprocess.STDOUT, cwd=b.workdir, preexec_fn=low_limit)
    try:
        rc = proc.wait(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait(timeout=10)
    assert rc == 1, "sluiced exited with %s\n%s" % (rc, b.log_tail())
    lines = [ln for ln in b.log_text().splitlines() if "out of file descriptors" in ln]
    assert len(lines) == 1, b.log_tail()
    assert "RLIMIT_NOFILE 256" in lines[0] and t in lines[0], lines[0]
