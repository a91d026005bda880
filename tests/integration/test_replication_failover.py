"""Replication's promise (issue 16): with replication factor 3,
min.insync.replicas=2 and an idempotent acks=all producer, SIGKILLing the
partition's leader again and again (each time restarted) loses no
acknowledged message and duplicates none.

The producer (librdkafka, idempotent, acks=all) sends numbered messages
without pause from a thread while the test kills whichever broker leads,
waits for the controller to move leadership, restarts the dead broker and
waits until it is back in the ISR.  Afterwards every acknowledged message
is read back exactly once, in order; the test prints acknowledged, read,
lost and duplicated.
"""
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

from cluster_support import (leader_and_isr, live_brokers, make_cluster, wait_for, zk,  # noqa: F401
                             zk_missing)
from support import ck_admin, ck_conf, consume, report, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

KILLS = 10
SESSION_MS = 3000


def agreed(brokers, topic):
    views = {leader_and_isr(b, topic) for b in brokers}
    return views.pop() if len(views) == 1 else None


class Sender(threading.Thread):
    """Sends "m<i>" for i = 0, 1, ... until stopped; records what was acked."""

    def __init__(self, cluster, topic):
        super().__init__(daemon=True)
        self.topic = topic
        self.p = Producer(ck_conf(cluster.brokers[0], **{
            "bootstrap.servers": cluster.bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": 120000, "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100}))
        self.acked, self.failed = {}, []
        self.sent = 0
        self.stop = threading.Event()

    def _cb(self, err, msg):
        if err is None:
            self.acked[msg.value()] = msg.offset()
        else:
            self.failed.append((msg.value(), str(err)))

    def run(self):
        while not self.stop.is_set():
            try:
                self.p.produce(self.topic, b"m%06d" % self.sent, partition=0, on_delivery=self._cb)
                self.sent += 1
            except BufferError:
                pass
            self.p.poll(0.002)
        self.p.flush(120)


def tally(s, b, topic):
    """After a stopped Sender: partition 0 read back from b against what was
    acknowledged: (acked [(value, offset)] by offset, messages, values,
    lost values, duplicate count).  The producer may have given up on none."""
    assert not s.failed, "the producer gave up on %d messages, e.g. %s" % (len(s.failed),
                                                                          s.failed[:3])
    acked = sorted(s.acked.items(), key=lambda kv: kv[1])
    got = consume(b, topic, [0], len(acked), timeout=60)
    values = [m.value() for m in got]
    seen = set(values)
    lost = [v for v, _o in acked if v not in seen]
    return acked, got, values, lost, len(values) - len(seen)


def test_leader_sigkilled_again_and_again_loses_and_duplicates_nothing(make_cluster):
    c = make_cluster(3, session_timeout_ms=SESSION_MS,
                     overrides={"replica.lag.time.max.ms": "3000"})
    brokers = c.brokers
    # Every broker registered first (under ASan a broker starts slowly):
    # a replication factor of 3 needs three live brokers.
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in brokers), 30,
             "every broker to list three live brokers")
    t = topic_name("failover")
    fs = ck_admin(brokers[0]).create_topics(
        [NewTopic(t, 1, 3, config={"min.insync.replicas": "2"})], operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: (agreed(brokers, t) or (None, ()))[1] == (1, 2, 3), 30,
             "the ISR of %s to hold all three brokers" % t)

    s = Sender(c, t)
    s.start()
    kills = []
    try:
        for k in range(KILLS):
            wait_for(lambda: len(s.acked) > 200 * (k + 1), 60,
                     "acknowledged messages before kill %d (%d so far)" % (k + 1, len(s.acked)))
            leader, _isr = agreed(brokers, t)
            victim = c.broker(leader)
            rest = [b for b in brokers if b is not victim]
            t0 = time.monotonic()
            victim.kill()
            new_leader = wait_for(lambda: (lambda v: v[0] if v and v[0] not in (-1, leader)
                                           else None)(agreed(rest, t)),
                                  SESSION_MS / 1000 + 15, "a new leader after killing %d" % leader)
            moved = time.monotonic() - t0
            before = len(s.acked)
            wait_for(lambda: len(s.acked) > before, 30,
                     "an acknowledgement from new leader %d" % new_leader)
            victim.restart()
            wait_for(lambda: (agreed(brokers, t) or (None, ()))[1] == (1, 2, 3), 60,
                     "broker %d back in the ISR of %s" % (leader, t))
            kills.append((leader, new_leader, moved))
    finally:
        s.stop.set()
        s.join(150)
    acked, got, values, lost, dups = tally(s, brokers[0], t)
    report("failover x%d: %d sent, %d acknowledged, %d read, %d lost, %d duplicated; "
           "leadership moved after %.1f-%.1f s (session timeout %.0f s)", len(kills), s.sent,
           len(acked), len(values), len(lost), dups, min(m for _a, _b, m in kills),
           max(m for _a, _b, m in kills), SESSION_MS / 1000)
    assert not lost, "%d acknowledged messages lost, e.g. %s" % (len(lost), lost[:5])
    assert dups == 0, "%d messages read twice" % dups
    # In order: the numbers the producer gave them only grow along the log.
    nums = [int(v[1:]) for v in values]
    assert nums == sorted(nums), "messages out of order in the log"
    assert [o for _v, o in acked] == [m.offset() for m in got if m.value() in s.acked][:len(acked)]
