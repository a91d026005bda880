"""A full disk takes its replica out at once (issue 28, item 3): broker
3's log.dirs is a 4 MiB tmpfs that fills while an acks=all producer runs
against an RF 3, min.insync.replicas=2 partition that broker 3 follows
(led by broker 1) or leads, or follows while it is the controller itself.  Broker 3 marks its log directory offline at
the first ENOSPC (logged once, in words), tells the controller through
/log_dir_event_notification, and the controller takes it out of the ISR
(and gives its leadership to broker 1): the producer never waits for
replica.lag.time.max.ms (30 s here, so the old behaviour's ~28 s stall
fails the test), nothing acknowledged is lost, and broker 3's SQL and
/metrics show the directory offline.  Restarted with space, broker 3
catches up and rejoins the ISR.  Needs root for mount(8).

"skewed": broker 3's registration says it registered an hour from now (its
own wall clock, as a broker whose clock is ahead writes it); the controller
must still act on the notification, which it orders against the
registration by ZooKeeper's zxids (cl_logdirs.c G4), not by that clock."""
import json
import os
import re
import signal
import subprocess
import time

import pytest
from confluent_kafka.admin import NewTopic

from cluster_support import (leader_and_isr, make_cluster, wait_for, zk,  # noqa: F401
                             cl_zk_create, zk_delete, cl_zk_get, zk_missing, cl_zk_set)
from support import ck_admin, ck_producer, consume, topic_name
from test_disk_full import small_fs  # noqa: F401
from test_sql import http

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

# Times the gap between acknowledgements and the ISR shrink: alone (conftest.py X2).
pytestmark = pytest.mark.serial

LAG_MS = 30000
VALUE_BYTES = 4096
RATE = 400                     # messages a second: the 4 MiB fill in ~3 s
AFTER_SHRINK_S = 4.0           # producing on after the ISR shrank
STAMP = re.compile(r"^\[(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d),(\d{3})\]")


def log_time(line):
    """A broker log line's timestamp (local time, as bk_log writes it)."""
    m = STAMP.match(line)
    return time.mktime(time.strptime(m.group(1), "%Y-%m-%d %H:%M:%S")) + int(m.group(2)) / 1000.0


def lines_with(b, *words):
    return [ln for ln in b.log_text().splitlines() if all(w in ln for w in words)]


# small_fs first: unmounted after the cluster stopped, not under it
def skew_registration(c, broker_id, ahead_ms):
    """Rewrites broker_id's registration timestamp ahead_ms into the future
    and makes every broker read the registrations again (a child of
    /brokers/ids that names no broker comes and goes)."""
    path = "/brokers/ids/%d" % broker_id
    reg = json.loads(cl_zk_get(c.zk_connect, path)[0])
    skewed = int(reg["timestamp"]) + ahead_ms
    reg["timestamp"] = str(skewed)
    cl_zk_set(c.zk_connect, path, json.dumps(reg).encode())
    cl_zk_create(c.zk_connect, "/brokers/ids/not-a-broker")
    zk_delete(c.zk_connect, "/brokers/ids/not-a-broker")
    for b in c.brokers:
        wait_for(lambda b=b: b.sql("select registered_at from brokers where id = %d"
                                   % broker_id) == [{"registered_at": skewed}], 20,
                 "broker %d to read the skewed registration" % b.broker_id)


@pytest.mark.parametrize("role", ["follower", "leader", "controller", "skewed"])
def test_full_disk_leaves_isr_at_once_and_loses_nothing(small_fs, make_cluster, role):
    c = make_cluster(3, start=False, overrides={"replica.lag.time.max.ms": str(LAG_MS),
                                                "offsets.topic.num.partitions": "1"})
    b1, b2, b3 = c.brokers
    b3.data_dir = os.path.join(small_fs, "data")
    os.makedirs(b3.data_dir)
    if role == "controller":
        c.brokers = [b3, b1, b2]                 # started first: it wins /controller
    c.start()
    c.brokers = [b1, b2, b3]
    if role == "controller":
        wait_for(lambda: b1.sql("select id from brokers where is_controller") == [{"id": 3}],
                 20, "broker 3 to be the controller")
    t = topic_name("full")
    if role == "skewed":
        skew_registration(c, 3, 3600 * 1000)
    replicas = [3, 1, 2] if role == "leader" else [1, 2, 3]
    ck_admin(b1).create_topics([NewTopic(t, num_partitions=1, replica_assignment=[replicas],
                                         config={"min.insync.replicas": "2"})],
                               operation_timeout=15)[t].result(timeout=20)
    wait_for(lambda: leader_and_isr(b1, t) == (replicas[0], (1, 2, 3)), 20,
             "ISR 1,2,3 led by %d" % replicas[0])

    p = ck_producer(b1, **{"bootstrap.servers": c.bootstrap, "linger.ms": 5,
                           "message.timeout.ms": 3 * LAG_MS, "enable.idempotence": True})
    acks, errors = [], []

    def report(err, msg):
        if err is None:
            acks.append((time.monotonic(), msg.value()))
        else:
            errors.append(str(err))

    start = time.monotonic()
    shrink_seen = None                           # wall clock, Metadata from broker 1
    next_check, i = 0.0, 0
    while time.monotonic() - start < 60:
        now = time.monotonic()
        while i < (now - start) * RATE:
            v = (b"%08d:" % i) * (VALUE_BYTES // 9)
            p.produce(t, value=v, partition=0, on_delivery=report)
            i += 1
        p.poll(0.005)
        if shrink_seen is None and now >= next_check:
            next_check = now + 0.05
            li = leader_and_isr(b1, t)
            if li and 3 not in li[1] and li[0] == 1:
                shrink_seen = time.time()
                shrink_mono = now
        if shrink_seen is not None and now - shrink_mono > AFTER_SHRINK_S:
            break
    assert p.flush(3 * LAG_MS / 1000) == 0, "messages still unacknowledged"
    assert shrink_seen is not None, "broker 3 never left the ISR within 60 s"
    # and it stays out while its directory is offline (it fetches nothing)
    assert leader_and_isr(b1, t) == (1, (1, 2)), leader_and_isr(b1, t)

    # the longest wait between two acknowledgements, while producing
    times = [a[0] for a in acks]
    gap = max(b - a for a, b in zip(times, times[1:]))
    # nothing acknowledged lost: read everything back from broker 1
    acked = [v for _t, v in acks]
    got = [m.value() for m in consume(b1, t, [0], len(set(acked)), timeout=60, settle=1.0)]
    lost = set(acked) - set(got)
    dup = len(got) - len(set(got))
    print("acknowledged %d, read %d, lost %d, duplicated %d, produce errors %d; longest "
          "acknowledgement gap %.3f s (replica.lag.time.max.ms %d)"
          % (len(acked), len(got), len(lost), dup, len(errors), gap, LAG_MS))

    # broker 3 said what happened, once, in words
    failed = lines_with(b3, "log directory", "failed: No space left on device")
    assert len(failed) == 1, failed
    assert "partition %s-0" % t in failed[0] and b3.data_dir in failed[0], failed[0]
    assert not lines_with(b3, "cannot append"), lines_with(b3, "cannot append")[:3]
    # the time from broker 3's first ENOSPC to the controller's ISR write and
    # to broker 1's Metadata showing the shrink
    fault = log_time(failed[0])
    written = [log_time(ln) for b in c.brokers for ln in
               lines_with(b, "broker 3 leaves the ISR (its log directory failed)") +
               lines_with(b, "leader 3 -> 1", "(log directory of broker 3 failed)")]
    assert written, "no controller took broker 3 out of the ISR for its log directory"
    print("broker 3 as %s: first ENOSPC -> ISR shrink written by the controller: %.3f s; "
          "-> seen in broker 1's Metadata: %.3f s (polled every 50 ms)"
          % (role, min(written) - fault, shrink_seen - fault))

    assert not lost, "acknowledged but not read back: %d" % len(lost)
    assert gap < 2.0, "producer stalled %.1f s (issue 28: a couple of seconds at most)" % gap
    assert min(written) - fault <= 1.0

    rows = b3.sql("select path, state, error, failures from log_dirs")
    assert len(rows) == 1 and rows[0]["state"] == "offline", rows
    assert rows[0]["path"] == b3.data_dir and "No space left on device" in rows[0]["error"], rows
    body = http(b3, "/metrics")[1]
    assert "kafka_log_logmanager_offlinelogdirectorycount 1" in body
    assert b2.sql("select state from log_dirs") == [{"state": "online"}]

    # given space (the tmpfs grows) and restarted, broker 3 catches up and
    # rejoins the ISR
    r = subprocess.run(["mount", "-o", "remount,size=64m", small_fs], capture_output=True,
                       text=True)
    assert r.returncode == 0, r.stderr
    b3.restart(signal.SIGTERM)
    wait_for(lambda: (leader_and_isr(b1, t) or (0, ()))[1] == (1, 2, 3), 60,
             "broker 3 back in the ISR after its restart")
    assert b3.sql("select state from log_dirs") == [{"state": "online"}]
