"""Cluster links from a multi-broker source (issue 33, Deliver 2;
daemon/link/link_conn.c C4, C5): the source is a real 3-broker Sluice
cluster on ZooKeeper, the destination a standalone broker whose link lists
all three bootstrap servers.  The link fetches each partition from its
source leader (one connection per leading broker), follows the leaders as
they move, and follows the source's truncations by leader epoch.

What a user checks: while a producer (acks=all, idempotent) writes to
three RF-3 topics (one compacted) and the source's partition leaders are
SIGKILLed twice (and restarted), every mirror partition ends up holding
exactly the source's batches at the same offsets — (baseOffset,
lastOffsetDelta, CRC) and the bytes of every batch, from raw Fetches of
both sides — partitions added at the source are followed, and every
acknowledged message reads back from the mirror once (acknowledged,
mirrored, lost, duplicated printed).  After an unclean election at the
source cut its log, the mirror is cut at the same place and holds the new
leader's batches there.
"""
import re
import threading
import time

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic

import kafka_raw as kr
from conftest import free_port
from cluster_support import live_brokers, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_conf, ck_producer, consume, produce_ok, report, topic_name
from test_link import batches, link_source, mirror, mirror_state, sql_ok
from test_replication_failover import agreed

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

SESSION_MS = 3000
LINK_CONFIG = "metadata.max.age.ms=1000\nreconnect.backoff.ms=200\nreconnect.backoff.max.ms=2000"


def source_cluster(make_cluster):
    c = make_cluster(3, session_timeout_ms=SESSION_MS,
                     overrides={"replica.lag.time.max.ms": "3000"})
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "every source broker to list three live brokers")
    return c


def leaders(c, topic):
    """{partition: leader id} as a live source broker answers Metadata."""
    for b in c.brokers:
        try:
            with kr.Conn(b.port, timeout=3) as conn:
                r = conn.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False),
                                 timeout=3)
            parts = kr.parse_metadata(r, 5)["topics"].get(topic, (None, []))[1]
            return {pid: leader for _e, pid, leader, _r, _i, _o in parts}
        except (OSError, ValueError, ConnectionError):
            continue
    return {}


def source_batches(c, topic, p):
    """Every batch of the source partition, from its leader."""
    def once():
        lead = leaders(c, topic).get(p, -1)
        if lead < 0:
            return None
        try:
            return batches(c.broker(lead), topic, p)
        except (AssertionError, OSError, ConnectionError):
            return None                  # leadership moved meanwhile
    return wait_for(once, 30, "a batch listing of %s-%d from its source leader" % (topic, p))


def shape(bs):
    """(baseOffset, lastOffsetDelta, CRC) of each batch, and its bytes."""
    return [b.ident for b in bs], [b.raw for b in bs]


def assert_mirror_is_source(c, dest, topic, partitions):
    for p in range(partitions):
        want, hw = source_batches(c, topic, p)
        wait_for(lambda: batches(dest, topic, p)[1] >= hw, 90,
                 "%s-%d mirrored up to the source's %d" % (topic, p, hw))
        got, dhw = batches(dest, topic, p)
        assert dhw == hw, (topic, p, dhw, hw)
        assert shape(got)[0] == shape(want)[0], (topic, p)
        assert shape(got)[1] == shape(want)[1], (topic, p)     # byte for byte


class Sender(threading.Thread):
    """Writes unique keyed values round-robin over the topics' partitions
    until stopped; records what was acknowledged."""

    def __init__(self, c, topics, parts):
        super().__init__(daemon=True)
        self.topics, self.parts = topics, parts
        self.p = Producer(ck_conf(c.brokers[0], **{
            "bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
            "message.timeout.ms": 120000, "linger.ms": 5,
            "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100}))
        self.acked, self.failed, self.sent = set(), [], 0
        self.stop = threading.Event()

    def _cb(self, err, msg):
        if err is None:
            self.acked.add((msg.topic(), msg.value()))
        else:
            self.failed.append((msg.value(), str(err)))

    def run(self):
        while not self.stop.is_set():
            t = self.topics[self.sent % len(self.topics)]
            v = b"v%07d" % self.sent
            try:
                self.p.produce(t, key=v, value=v, partition=(self.sent // 3) % self.parts[t],
                               on_delivery=self._cb)
                self.sent += 1
            except BufferError:
                pass
            self.p.poll(0.001 if self.sent % 50 else 0.02)
        self.p.flush(120)


def test_source_leaders_killed_the_mirror_holds_the_source_batches(make_cluster,
                                                                           start_broker):
    c = source_cluster(make_cluster)
    dest = start_broker()
    ts = [topic_name("lc-a"), topic_name("lc-b"), topic_name("lc-compact")]
    configs = [{"min.insync.replicas": "2"}, {"min.insync.replicas": "2"},
               {"min.insync.replicas": "2", "cleanup.policy": "compact"}]
    fs = ck_admin(c.brokers[0]).create_topics(
        [NewTopic(t, 3, 3, config=cfg) for t, cfg in zip(ts, configs)], operation_timeout=15)
    for t in ts:
        fs[t].result(timeout=20)
        wait_for(lambda t=t: len(leaders(c, t)) == 3 and min(leaders(c, t).values()) > 0, 30,
                 "%s led on every partition" % t)
    s = Sender(c, ts, {t: 3 for t in ts})
    s.start()
    try:
        link_source(dest, c, config=LINK_CONFIG)
        for t in ts:
            assert mirror(dest, t)[0] == 200
        wait_for(lambda: all(batches(dest, t, 0)[1] > 0 for t in ts), 60, "mirroring started")
        # Twice SIGKILL, then a controlled shutdown (SIGTERM): its leaders
        # move while it still answers, NOT_LEADER_OR_FOLLOWER / FENCED.
        for round_, how in enumerate(("kill", "kill", "stop")):
            lead = {}
            for t in ts:
                for _p, b in leaders(c, t).items():
                    if b > 0:
                        lead[b] = lead.get(b, 0) + 1
            victim = c.broker(max(lead, key=lead.get))
            before = sum(batches(dest, t, p)[1] for t in ts for p in range(3))
            getattr(victim, how)()
            wait_for(lambda: all(victim.broker_id not in leaders(c, t).values() for t in ts),
                     SESSION_MS / 1000 + 30, "leaders moved off broker %d" % victim.broker_id)
            # The mirror goes on from the new leaders while the old one is down.
            wait_for(lambda: sum(batches(dest, t, p)[1] for t in ts for p in range(3)) > before,
                     60, "mirroring from the new leaders (round %d)" % round_)
            victim.start()
            wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
                     "broker %d back" % victim.broker_id)
        # Partitions added at the source are followed.
        fs = ck_admin(c.brokers[0]).create_partitions([NewPartitions(ts[0], 5)],
                                                      operation_timeout=15)
        fs[ts[0]].result(timeout=20)
        wait_for(lambda: len(leaders(c, ts[0])) == 5 and min(leaders(c, ts[0]).values()) > 0,
                 30, "5 partitions of %s led" % ts[0])
        added = [{"key": b"added-%d" % i, "value": b"added-%d" % i, "partition": 3 + i % 2}
                 for i in range(40)]
        produce_ok(ck_producer(c.brokers[0], **{"bootstrap.servers": c.bootstrap}), ts[0],
                   added)
        s.acked.update((ts[0], m["value"]) for m in added)
        time.sleep(1)
    finally:
        s.stop.set()
        s.join(150)
    assert not s.failed, "the producer gave up on %d, e.g. %s" % (len(s.failed), s.failed[:3])
    parts = {ts[0]: 5, ts[1]: 3, ts[2]: 3}
    for t in ts:
        assert_mirror_is_source(c, dest, t, parts[t])
    assert batches(dest, ts[0], 3)[1] == 20 and batches(dest, ts[0], 4)[1] == 20, \
        "the added partitions are not mirrored"
    got = []
    for t in ts:
        n = sum(batches(dest, t, p)[1] for p in range(parts[t]))
        got += [(t, m.value()) for m in consume(dest, t, list(range(parts[t])), n, timeout=60)]
    seen = set(got)
    lost = [a for a in s.acked if a not in seen]
    report("source leaders SIGKILLed twice and stopped once: acknowledged %d (acks=all), mirrored %d, lost %d, "
           "duplicated %d", len(s.acked), len(got), len(lost), len(got) - len(seen))
    assert not lost and len(got) == len(seen)
    for t in ts:
        assert mirror_state(dest, t)[0] == "active"
        assert not mirror_state(dest, t)[1], mirror_state(dest, t)
    # No retry storm: the dead brokers' errors are logged once each (and
    # cleared once), not per retry.
    lines = [ln for ln in dest.log_text().splitlines() if "cluster link src: " in ln]
    moved = [ln for ln in dest.log_text().splitlines() if "the source answered" in ln]
    report("link log lines over three leader losses: %d; partition errors: %s", len(lines),
           sorted({ln.split("answered ")[-1] for ln in moved}))
    assert len(lines) <= 36, "\n".join(lines)


def test_an_unclean_election_at_the_source_cuts_the_mirror_where_the_logs_part(make_cluster,
                                                                                start_broker):
    """The source's broker 1 alone takes writes (its follower, broker 2, is
    down) that the mirror copies; broker 1 dies, broker 2 is elected
    uncleanly and takes other writes at the same offsets.  The mirror
    finds where it leaves the source's log by leader epoch, cuts there, and
    then holds exactly the source's batches."""
    c = source_cluster(make_cluster)
    b1, b2, b3 = c.brokers
    dest = start_broker()
    t = topic_name("lc-unclean")
    fs = ck_admin(b1).create_topics([NewTopic(t, 1, replica_assignment=[[1, 2]])],
                                    operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2), 30,
             "the ISR of %s to hold brokers 1 and 2" % t)
    p = ck_producer(b1, **{"bootstrap.servers": b1.bootstrap})
    produce_ok(p, t, [{"value": b"both-%03d" % i, "partition": 0} for i in range(200)])
    link_source(dest, c, config=LINK_CONFIG)
    assert mirror(dest, t)[0] == 200
    b2.kill()
    wait_for(lambda: (agreed([b1, b3], t) or (None, ()))[1] == (1,), 30, "broker 2 out of the ISR")
    produce_ok(p, t, [{"value": b"only1-%03d" % i, "partition": 0} for i in range(50)])
    wait_for(lambda: batches(dest, t, 0)[1] == 250, 30, "the mirror has broker 1's tail")
    b1.kill()
    b2.start()
    wait_for(lambda: (agreed([b2, b3], t) or (None,))[0] == -1, SESSION_MS / 1000 + 20,
             "the partition offline after broker 1 died")
    res = ConfigResource(ConfigResource.Type.TOPIC, t,
                         set_config={"unclean.leader.election.enable": "true"})
    ck_admin(b3).alter_configs([res], request_timeout=15)[res].result(timeout=20)
    wait_for(lambda: (agreed([b2, b3], t) or (None,))[0] == 2, SESSION_MS / 1000 + 30,
             "broker 2 elected uncleanly")
    after = [{"value": b"after-%03d" % i, "partition": 0} for i in range(30)]
    produce_ok(ck_producer(b2, **{"bootstrap.servers": b2.bootstrap}), t, after)
    want, hw = batches(b2, t, 0)
    assert hw == 230
    wait_for(lambda: shape(batches(dest, t, 0)[0]) == shape(want), 60,
             "the mirror cut at 200 and holding broker 2's batches")
    assert batches(dest, t, 0)[1] == 230
    cut = re.findall(r"cut from (\d+) to (\d+) where it leaves source topic", dest.log_text())
    assert cut == [("250", "200")], cut
    got = [m.value() for m in consume(dest, t, [0], 230, timeout=30)]
    report("unclean election at the source: mirror cut from %s to %s, then %d messages "
           "(200 both + 30 after), %d of broker 1's lost tail left", cut[0][0], cut[0][1],
           len(got), sum(v.startswith(b"only1") for v in got))
    assert got == [b"both-%03d" % i for i in range(200)] + [m["value"] for m in after]
    sql_ok(dest, "SELECT 1")


def test_bootstrap_servers_are_tried_in_turn(start_broker):
    """The first bootstrap server refuses connections: the link goes on to
    the next one and mirrors; its error was stored and then cleared."""
    src, dest = start_broker(), start_broker()
    t = topic_name("lc-boot")
    produce_ok(ck_producer(src), t, [{"value": b"m%d" % i, "partition": 0} for i in range(30)])
    dead = "127.0.0.1:%d" % free_port()
    sql_ok(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
           "('src', '%s,%s', 'reconnect.backoff.ms=100')" % (dead, src.bootstrap))
    assert mirror(dest, t)[0] == 200
    wait_for(lambda: batches(dest, t, 0)[1] == 30, 30, "mirrored through the second server")
    assert shape(batches(dest, t, 0)[0]) == shape(batches(src, t, 0)[0])
    assert "%s: Connection refused" % dead in dest.log_text()
    wait_for(lambda: not sql_ok(dest, "SELECT last_error FROM cluster_links")[0]["last_error"],
             10, "the link's error cleared")
