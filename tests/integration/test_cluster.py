"""Cluster mode (issue 15) as a Kafka user and an operator check it: three
brokers on a real ZooKeeper look like one Kafka cluster from every broker,
in Metadata and in SQL; data goes in through one broker and out through
another; and the cluster rides out a dead controller, a dead broker, a
ZooKeeper outage and an expired session.  A bad zookeeper.connect stops
startup with a clear message; a standalone broker needs no ZooKeeper.

Per-broker views are read with our own Metadata and DescribeConfigs
requests (kafka_raw), since a client library answers from whichever
broker it likes.  Times (metadata propagation, controller failover, ...)
are printed with support.report and listed at the end of the run.
"""
import collections
import os
import random
import subprocess
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import (ClusterBroker, cluster, make_cluster, timed,  # noqa: F401
                             wait_equal, wait_for, zk, zk_missing)
from conftest import free_port
from support import (assert_serves, ck_admin, ck_producer, consume, kp_consume, kp_producer,
                     produce, produce_ok, report, topic_name)

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

LEADER_NOT_AVAILABLE = 5
NOT_LEADER_OR_FOLLOWER = 6
MESSAGE_TOO_LARGE = 10
API_DESCRIBE_CONFIGS = 32
TCP_LISTEN = "0A"      # /proc/net/tcp's st column
ALL = {1, 2, 3}


# ---- one broker's own view ---------------------------------------------------------
def metadata(b, topics=None, timeout=5.0):
    """Metadata v5 from broker b itself: dict with brokers {id: (host, port, rack)},
    controller_id and topics {name: (err, {partition: (err, leader, replicas, isr)})}."""
    with kr.Conn(b.port, timeout=timeout) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, topics, False), timeout=timeout)
        m = kr.parse_metadata(r, 5)
    return {"brokers": {n: (h, p, rack) for n, h, p, rack in m["brokers"]},
            "controller_id": m["controller_id"],
            "topics": {t: (err, {pid: (perr, leader, list(reps), list(isr))
                                 for perr, pid, leader, reps, isr, _off in parts})
                       for t, (err, parts) in m["topics"].items()}}


def partitions_seen(b, topic):
    """{partition: (err, leader, replicas, isr)} as broker b answers, {} when unknown."""
    err, parts = metadata(b, [topic])["topics"].get(topic, (None, {}))
    return parts if err == 0 else {}


def led_everywhere(brokers, topic, n):
    """The partition map when every broker in brokers gives the same one,
    with n partitions all led; else None."""
    maps = [partitions_seen(b, topic) for b in brokers]
    first = maps[0]
    if len(first) != n or any(m != first for m in maps):
        return None
    if any(err != 0 or leader < 0 for err, leader, _r, _i in first.values()):
        return None
    return first


def controller_agreed(brokers, alive_ids):
    """The controller id every broker in brokers names, once each lists
    exactly alive_ids as its brokers; else None."""
    views = [metadata(b) for b in brokers]
    ids = {v["controller_id"] for v in views}
    if any(set(v["brokers"]) != set(alive_ids) for v in views) or len(ids) != 1:
        return None
    cid = ids.pop()
    return cid if cid in alive_ids else None


def wait_formed(c, alive=None, timeout=None):
    alive = [b for b in c.brokers if b.alive()] if alive is None else alive
    ids = {b.broker_id for b in alive}
    return wait_for(lambda: controller_agreed(alive, ids),
                    timeout or c.session_timeout_s + 10,
                    "brokers %s to list each other and agree on a controller" % sorted(ids))


def create(b, name, partitions, config=None, timeout=15.0, request_timeout=None):
    """CreateTopics through broker b (RF 1); raises KafkaException on an error."""
    request_timeout = request_timeout or timeout
    fs = ck_admin(b).create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=timeout, request_timeout=request_timeout)
    fs[name].result(timeout=request_timeout + 5)


def formed_with_topic(c, prefix, partitions):
    """Waits for the cluster to form, creates a topic through broker 1 and
    waits for every broker to give its leaders: (controller id, topic,
    partition map)."""
    controller = wait_formed(c)
    t = topic_name(prefix)
    create(c.brokers[0], t, partitions)
    parts = wait_for(lambda: led_everywhere(c.brokers, t, partitions), 10,
                     "every broker to give the leaders of %s" % t)
    return controller, t, parts


def create_once_possible(b, name, partitions, within):
    """Retries CreateTopics through b (a broker still catching up may refuse
    it) until it succeeds; returns the seconds it took."""
    def created():
        try:
            create(b, name, partitions, timeout=5)
            return True
        except KafkaException as e:
            if e.args[0].code() == KafkaError.TOPIC_ALREADY_EXISTS:   # an earlier try did it
                return True
            raise
    took, _ = timed(created, within, "CreateTopics of %s through broker %d" % (name, b.broker_id))
    return took


def describe_topic_config(b, topic, key):
    """DescribeConfigs v0 for one topic key, answered by broker b itself."""
    body = kr.array([kr.i8(2) + kr.string(topic) + kr.array([kr.string(key)])])
    with kr.Conn(b.port) as c:
        r = c.request(API_DESCRIBE_CONFIGS, 0, body)
    r.i32()  # throttle
    out = {}
    for _ in range(r.i32()):
        err = r.i16()
        msg = r.string()
        r.i8()
        r.string()
        for _ in range(r.i32()):
            name, value = r.string(), r.string()
            r.i8(), r.i8(), r.i8()  # read_only, is_default, is_sensitive
            out[name] = value
        assert err == 0, "DescribeConfigs on broker %d: %d %s" % (b.broker_id, err, msg)
    return out.get(key)


def raw_produce(b, topic, partition, value):
    """The error code broker b answers a Produce of one record with."""
    batch = kr.record_batch([(None, value, [], 0)], int(time.time() * 1000))
    with kr.Conn(b.port) as c:
        r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(topic, partition, batch, acks=1))
    return kr.parse_produce_v3(r)[0][2]


def sql_broker_rows(b):
    return b.sql("select id, host, port, alive, is_controller from brokers order by id")


def payloads(n, partitions, seed):
    rnd = random.Random(seed)
    return [{"key": b"k%d" % i, "value": bytes(rnd.getrandbits(8) for _ in range(rnd.randint(1, 300))),
             "partition": i % partitions} for i in range(n)]


def by_partition(msgs, get):
    out = collections.defaultdict(list)
    for m in msgs:
        p, k, v = get(m)
        out[p].append((k, v))
    return dict(out)


def sent_by_partition(sent):
    return by_partition(sent, lambda m: (m["partition"], m["key"], m["value"]))


def ck_by_partition(msgs):
    return by_partition(msgs, lambda m: (m.partition(), m.key(), m.value()))


# ---- topics, metadata and SQL seen alike from every broker ---------------------------
def test_topic_created_on_broker1_is_seen_on_every_broker_in_metadata_and_sql(cluster):
    b1, b3 = cluster.brokers[0], cluster.brokers[2]
    controller = wait_formed(cluster)
    t = topic_name("everywhere")
    t0 = time.monotonic()
    create(b1, t, 6)
    took, _ = timed(lambda: led_everywhere([b3], t, 6), 10, "topic %s on broker 3" % t)
    report("metadata propagation: created on broker 1, led on broker 3 after %.0f ms "
           "(%.0f ms from the CreateTopics call)", took * 1000, (time.monotonic() - t0) * 1000)
    parts = wait_for(lambda: led_everywhere(cluster.brokers, t, 6), 10,
                     "all brokers to give the same leaders for %s" % t)

    for b in cluster.brokers:
        m = metadata(b)
        assert m["brokers"] == {x.broker_id: ("127.0.0.1", x.port, None) for x in cluster.brokers}, \
            "broker %d lists %s" % (b.broker_id, m["brokers"])
        assert m["controller_id"] == controller, "broker %d names controller %s, not %s" % (
            b.broker_id, m["controller_id"], controller)
    for p, (_err, leader, replicas, isr) in parts.items():
        assert leader in ALL and replicas == [leader] and isr == [leader], (p, leader, replicas, isr)
    assert sorted(collections.Counter(l for _e, l, _r, _i in parts.values()).values()) == [2, 2, 2], \
        "leaders not spread evenly: %s" % parts

    # True leaders: the leader takes the write and holds the log; the others refuse it.
    for p, (_err, leader, _r, _i) in parts.items():
        for b in cluster.brokers:
            want = 0 if b.broker_id == leader else NOT_LEADER_OR_FOLLOWER
            assert raw_produce(b, t, p, b"p%d" % p) == want, \
                "Produce to partition %d (leader %d) on broker %d" % (p, leader, b.broker_id)
            assert os.path.isdir(b.partition_dir(t, p)) == (b.broker_id == leader), \
                "broker %d and the log of partition %d (leader %d)" % (b.broker_id, p, leader)

    # SQL shows the whole cluster on every broker, the same on each (the
    # mirror may write SQLite a moment after Metadata answers).
    epochs = None
    for b in cluster.brokers:
        wait_equal(lambda b=b: sql_broker_rows(b), [
            {"id": x.broker_id, "host": "127.0.0.1", "port": x.port, "alive": 1,
             "is_controller": int(x.broker_id == controller)} for x in cluster.brokers],
            5, "select * from brokers on broker %d" % b.broker_id)
        query = ("select partition, leader, replicas, isr, leader_epoch from partitions "
                 "where topic = '%s' order by partition" % t)
        wait_equal(lambda b=b: [(r["partition"], r["leader"], r["replicas"], r["isr"])
                                for r in b.sql(query)],
                   [(p, parts[p][1], str(parts[p][1]), str(parts[p][1])) for p in range(6)],
                   5, "the partitions of %s in SQL on broker %d" % (t, b.broker_id))
        e = [r["leader_epoch"] for r in b.sql(query)]
        assert all(x is not None and x >= 0 for x in e), e
        assert epochs is None or e == epochs, "leader epochs differ between brokers"
        epochs = e
        assert b.sql("select count(*) as n from topics where name = '%s'" % t) == [{"n": 1}]


def test_produce_through_broker3_consume_through_broker2_every_message_in_order(cluster):
    b2, b3 = cluster.brokers[1:]
    _c, t, _p = formed_with_topic(cluster, "thru", 3)
    sent = payloads(600, 3, seed=15)
    produce_ok(ck_producer(b3), t, sent[:300])
    kp = kp_producer(b3)
    try:
        futures = [kp.send(t, key=m["key"], value=m["value"], partition=m["partition"])
                   for m in sent[300:]]
        kp.flush(timeout=30)
        for f in futures:
            f.get(timeout=10)
    finally:
        kp.close(timeout=5)
    want = sent_by_partition(sent)
    got = consume(b2, t, [0, 1, 2], len(sent), timeout=30)
    assert len(got) == len(sent), "%d messages back, %d sent" % (len(got), len(sent))
    assert ck_by_partition(got) == want, "confluent-kafka through broker 2 read other bytes or order"
    kgot = kp_consume(b2, t, [0, 1, 2], len(sent), timeout=30)
    assert len(kgot) == len(sent)
    assert by_partition(kgot, lambda r: (r.partition, r.key, r.value)) == want, \
        "kafka-python through broker 2 read other bytes or order"


def test_config_altered_through_sql_on_one_broker_applies_on_the_leader(cluster):
    _c, t, parts = formed_with_topic(cluster, "cfg", 1)
    leader = cluster.broker(parts[0][1])
    other = next(b for b in cluster.brokers if b is not leader)
    # Before: a 5000-byte record is fine.
    produce_ok(ck_producer(other), t, [{"value": b"x" * 5000, "partition": 0}], timeout=20)
    t0 = time.monotonic()
    other.sql("update topic_configs set value = '1000' where topic = '%s' "
              "and name = 'max.message.bytes'" % t)
    for b in cluster.brokers:
        wait_for(lambda b=b: describe_topic_config(b, t, "max.message.bytes") == "1000", 10,
                 "DescribeConfigs on broker %d to show max.message.bytes=1000" % b.broker_id)
        wait_equal(lambda b=b: b.sql("select value, source from topic_configs where topic = '%s' "
                                     "and name = 'max.message.bytes'" % t),
                   [{"value": "1000", "source": "topic"}], 5,
                   "max.message.bytes of %s in SQL on broker %d" % (t, b.broker_id))
    report("config propagation: SQL update on broker %d seen by DescribeConfigs on all brokers "
           "after %.0f ms", other.broker_id, (time.monotonic() - t0) * 1000)
    # The leader enforces it, whichever broker the client bootstrapped from.
    assert raw_produce(leader, t, 0, b"y" * 5000) == MESSAGE_TOO_LARGE
    reports = produce(ck_producer(other), t, [{"value": b"z" * 5000, "partition": 0}], timeout=20)
    err = reports[0][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, err
    produce_ok(ck_producer(other), t, [{"value": b"small", "partition": 0}], timeout=20)


# ---- failures --------------------------------------------------------------------------
@pytest.mark.serial
def test_controller_sigkill_another_takes_over_within_session_timeout(cluster):
    old_id = wait_formed(cluster)
    old = cluster.broker(old_id)
    rest = [b for b in cluster.brokers if b is not old]
    rest_ids = {b.broker_id for b in rest}
    old.kill()
    t0 = time.monotonic()
    new_id = wait_for(lambda: controller_agreed(rest, rest_ids), cluster.session_timeout_s + 5,
                      "a new controller among brokers %s" % sorted(rest_ids))
    took = time.monotonic() - t0
    report("controller failover: broker %d SIGKILLed, broker %d controller on both survivors "
           "after %.2f s (session timeout %.0f s)", old_id, new_id, took, cluster.session_timeout_s)
    assert took <= cluster.session_timeout_s + 2, "failover took %.1f s" % took
    # Topics can be created again, through a broker that is not the new controller.
    via = next((b for b in rest if b.broker_id != new_id), rest[0])
    t = topic_name("after-failover")
    create_once_possible(via, t, 4, 15)
    report("controller failover: CreateTopics answered %.2f s after the SIGKILL", time.monotonic() - t0)
    parts = wait_for(lambda: led_everywhere(rest, t, 4), 10, "%s led on both survivors" % t)
    assert {l for _e, l, _r, _i in parts.values()} <= rest_ids, "a partition went to the dead broker"
    # The old controller comes back as a plain broker.
    old.start()
    assert wait_formed(cluster) == new_id


def test_broker_sigkill_takes_its_rf1_partitions_offline_until_it_returns(cluster):
    controller, t, parts = formed_with_topic(cluster, "offline", 6)
    victim = next(b for b in reversed(cluster.brokers) if b.broker_id != controller)
    rest = [b for b in cluster.brokers if b is not victim]
    theirs = sorted(p for p, (_e, l, _r, _i) in parts.items() if l == victim.broker_id)
    assert theirs, "broker %d leads nothing of %s" % (victim.broker_id, parts)
    sent = payloads(120, 6, seed=5)
    produce_ok(ck_producer(rest[0]), t, sent)
    victim.kill()

    def offline_everywhere():
        for b in rest:
            seen = partitions_seen(b, t)
            if victim.broker_id in metadata(b)["brokers"]:
                return False
            for p in range(6):
                err, leader = seen[p][0], seen[p][1]
                if p in theirs and (err, leader) != (LEADER_NOT_AVAILABLE, -1):
                    return False
                if p not in theirs and (err, leader) != (0, parts[p][1]):
                    return False
        return True
    took, _ = timed(offline_everywhere, cluster.session_timeout_s + 5,
                    "partitions %s of broker %d offline on the others" % (theirs, victim.broker_id))
    report("broker %d SIGKILLed: its %d partitions offline on the others after %.2f s",
           victim.broker_id, len(theirs), took)
    # The other partitions carry on.
    more = [{"key": b"more", "value": b"m%d" % p, "partition": p} for p in range(6) if p not in theirs]
    produce_ok(ck_producer(rest[0]), t, more, timeout=20)
    t0 = time.monotonic()
    victim.start()
    wait_for(lambda: led_everywhere(cluster.brokers, t, 6) == parts, 20,
             "partitions %s back with broker %d" % (theirs, victim.broker_id))
    report("broker %d restarted: its partitions led again everywhere %.2f s after its start",
           victim.broker_id, time.monotonic() - t0)
    got = consume(rest[1], t, list(range(6)), len(sent) + len(more), timeout=30)
    assert ck_by_partition(got) == sent_by_partition(sent + more)


def test_zookeeper_stopped_and_restarted_under_a_running_cluster(cluster, zk):
    b1, b2, b3 = cluster.brokers
    controller, t, _p = formed_with_topic(cluster, "zkdown", 3)
    sent = payloads(60, 3, seed=6)
    produce_ok(ck_producer(b3), t, sent[:30])
    zk.stop()
    down = time.monotonic()
    # Data keeps flowing on existing partitions.
    produce_ok(ck_producer(b3), t, sent[30:], timeout=20)
    got = consume(b2, t, [0, 1, 2], 60, timeout=20)
    assert ck_by_partition(got) == sent_by_partition(sent)
    # A metadata change gets the broker's error (one of Kafka's codes), not
    # a hang the client has to time out, and not a success.
    t2 = topic_name("zkdown-new")
    t0 = time.monotonic()
    with pytest.raises(KafkaException) as e:
        create(b1, t2, 1, timeout=5, request_timeout=20)
    took = time.monotonic() - t0
    err = e.value.args[0]
    report("ZooKeeper down: CreateTopics refused after %.2f s with %s", took, err.name())
    assert err.code() > 0, "no answer from the broker, the client gave up: %s" % err
    assert took < 12, "CreateTopics took %.1f s to fail" % took
    assert all(b.alive() for b in cluster.brokers)
    zk.start()
    report("ZooKeeper was down %.1f s", time.monotonic() - down)
    took = create_once_possible(b1, t2, 2, 30)
    report("ZooKeeper back: CreateTopics succeeded after %.2f s", took)
    wait_for(lambda: led_everywhere(cluster.brokers, t2, 2), 10, "%s led everywhere" % t2)
    assert wait_formed(cluster) == controller, "the sessions survived, so the controller should"
    produce_ok(ck_producer(b2), t2, [{"value": b"after", "partition": 1}])
    assert [m.value() for m in consume(b3, t2, [1], 1, timeout=20)] == [b"after"]


def test_sigstopped_broker_past_its_session_reregisters_and_serves(cluster):
    controller, t, parts = formed_with_topic(cluster, "expiry", 3)
    # The controller is the worst case: it must not go on acting as one.
    victim = cluster.broker(controller)
    rest = [b for b in cluster.brokers if b is not victim]
    theirs = [p for p, (_e, l, _r, _i) in parts.items() if l == victim.broker_id]
    sent = payloads(30, 3, seed=7)
    produce_ok(ck_producer(rest[0]), t, sent)
    victim.sigstop()
    t0 = time.monotonic()
    new_id = wait_for(lambda: controller_agreed(rest, {b.broker_id for b in rest}),
                      cluster.session_timeout_s + 5,
                      "the others to drop paused broker %d" % victim.broker_id)
    report("broker %d SIGSTOPped: dropped by the others after %.2f s (session timeout %.0f s)",
           victim.broker_id, time.monotonic() - t0, cluster.session_timeout_s)
    for b in rest:
        wait_for(lambda b=b: all(partitions_seen(b, t)[p][:2] == (LEADER_NOT_AVAILABLE, -1)
                                 for p in theirs), 5,
                 "partitions %s offline on broker %d" % (theirs, b.broker_id))
    victim.sigcont()
    t0 = time.monotonic()
    took, _ = timed(lambda: controller_agreed(cluster.brokers, ALL) == new_id
                    and led_everywhere(cluster.brokers, t, 3) == parts,
                    cluster.session_timeout_s + 10,
                    "broker %d to re-register, with one controller (%d) and its partitions back"
                    % (victim.broker_id, new_id))
    report("broker %d SIGCONTed: registered again and leading its partitions after %.2f s",
           victim.broker_id, took)
    for b in cluster.brokers:
        wait_equal(lambda b=b: [(r["id"], r["alive"], r["is_controller"]) for r in sql_broker_rows(b)],
                   [(i, 1, int(i == new_id)) for i in (1, 2, 3)], 5,
                   "select * from brokers on broker %d" % b.broker_id)
    assert "expired" in victim.log_text().lower(), "the broker should say its session expired"
    more = [{"value": b"after-expiry-%d" % p, "partition": p} for p in range(3)]
    produce_ok(ck_producer(victim), t, more, timeout=20)
    got = consume(rest[1], t, [0, 1, 2], len(sent) + len(more), timeout=20)
    assert by_partition(got, lambda m: (m.partition(), None, m.value())) == \
        by_partition(sent + more, lambda m: (m["partition"], None, m["value"]))


# ---- startup -----------------------------------------------------------------------------
def start_expecting_exit(tmp_path, connect, timeout_ms):
    wd = tmp_path / ("b-%s" % free_port())
    wd.mkdir()
    b = ClusterBroker(str(wd), 1, connect, 6000, {"zookeeper.connection.timeout.ms": str(timeout_ms)})
    t0 = time.monotonic()
    try:
        p = subprocess.run(b.argv(), capture_output=True, text=True, timeout=timeout_ms / 1000 + 15,
                           cwd=str(wd))
    except subprocess.TimeoutExpired:
        raise AssertionError("sluiced with zookeeper.connect=%s still runs after %.0f s"
                             % (connect, timeout_ms / 1000 + 15))
    return p.returncode, p.stdout + p.stderr, time.monotonic() - t0


def test_bad_zookeeper_connect_is_a_clear_startup_error(tmp_path):
    nobody = "127.0.0.1:%d/sluice" % free_port()
    rc, out, took = start_expecting_exit(tmp_path, nobody, 2000)
    report("zookeeper.connect with nobody listening: exit %d after %.2f s", rc, took)
    assert rc != 0 and took < 2 + 5, (rc, took, out)
    assert "zookeeper.connect" in out and nobody.split("/")[0] in out, out
    for bad in ("127.0.0.1", "127.0.0.1:2181,", "127.0.0.1:2181//x"):
        rc, out, took = start_expecting_exit(tmp_path, bad, 2000)
        assert rc != 0 and took < 5, (bad, rc, took, out)
        assert "zookeeper.connect" in out, out


def own_connections(pid):
    """(local port, remote port, state) of every TCP socket process pid holds."""
    inodes = set()
    for fd in os.listdir("/proc/%d/fd" % pid):
        try:
            link = os.readlink("/proc/%d/fd/%s" % (pid, fd))
        except OSError:
            continue
        if link.startswith("socket:["):
            inodes.add(link[8:-1])
    out = []
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        with open(table) as f:
            for line in f.readlines()[1:]:
                col = line.split()
                if col[9] in inodes:
                    out.append((int(col[1].rsplit(":", 1)[1], 16), int(col[2].rsplit(":", 1)[1], 16),
                                col[3]))
    return out


def test_standalone_broker_needs_nothing_of_zookeeper(start_broker):
    b = start_broker({"zookeeper.session.timeout.ms": "6000"})
    assert_serves(b, "a start without zookeeper.connect")
    assert "(standalone)" in b.log_text()
    md = metadata(b)
    assert md["brokers"] == {b.broker_id: ("127.0.0.1", b.port, None)}
    assert md["controller_id"] == b.broker_id
    # It reaches out to nothing: every TCP socket is a listener (Kafka,
    # admin) or a connection a client made to one.
    conns = own_connections(b.proc.pid)
    listening = {local for local, _remote, state in conns if state == TCP_LISTEN}
    assert b.port in listening, conns
    assert all(local in listening for local, _remote, _state in conns), \
        "connections from the broker to elsewhere: %s" % conns


# ---- placement -------------------------------------------------------------------------
def test_replicas_spread_over_racks_when_brokers_have_them(make_cluster):
    """broker.rack: Kafka's rack-aware assignment puts a partition's replicas
    on different racks (two racks of two brokers, replication factor 2),
    and leaders still spread over every broker."""
    c = make_cluster(4, start=False)
    racks = {1: "r1", 2: "r1", 3: "r2", 4: "r2"}
    for b in c.brokers:
        b.overrides["broker.rack"] = racks[b.broker_id]
    c.start()
    wait_formed(c)
    t = topic_name("racks")
    fs = ck_admin(c.brokers[0]).create_topics([NewTopic(t, num_partitions=8, replication_factor=2)],
                                              operation_timeout=15)
    fs[t].result(timeout=20)
    parts = wait_for(lambda: (lambda m: m if len(m) == 8 and all(l >= 0 for _e, l, _r, _i in m.values())
                              else None)(partitions_seen(c.brokers[3], t)), 10, "%s led" % t)
    for p, (_err, leader, replicas, _isr) in parts.items():
        assert len(replicas) == 2 and replicas[0] == leader, (p, leader, replicas)
        assert {racks[r] for r in replicas} == {"r1", "r2"}, \
            "partition %d has replicas %s, both on one rack" % (p, replicas)
    assert sorted(collections.Counter(l for _e, l, _r, _i in parts.values()).values()) == [2, 2, 2, 2], \
        "leaders not spread over the four brokers: %s" % parts
    m = metadata(c.brokers[1])
    assert {i: rack for i, (_h, _p, rack) in m["brokers"].items()} == racks


def test_topic_created_as_a_broker_leaves_is_placed_on_those_registered(cluster):
    """A CreateTopics that the controller reads before it has seen a broker
    leave must not place partitions on that broker (RF 1: they would never
    be led).  The controller is paused (SIGSTOP, well within its session)
    while another broker stops and while the request reaches it, so that
    when it runs again the request and the news of the departure are both
    waiting; librdkafka's AdminClient sends CreateTopics to the controller."""
    controller = wait_formed(cluster)
    creator = cluster.broker(controller)
    victim = next(b for b in cluster.brokers if b.broker_id != controller)
    rest = [b for b in cluster.brokers if b is not victim]
    admin = ck_admin(creator)
    admin.list_topics(timeout=10)                 # connected to the controller first
    t = topic_name("leaving")
    creator.sigstop()
    try:
        victim.stop()                             # SIGTERM: its registration goes at once
        fs = admin.create_topics([NewTopic(t, num_partitions=6, replication_factor=1)],
                                 operation_timeout=15, request_timeout=20)
        time.sleep(0.5)                           # the request is in the controller's socket
    finally:
        creator.sigcont()
    fs[t].result(timeout=25)
    parts = wait_for(lambda: led_everywhere(rest, t, 6), 10,
                     "every partition of %s led by broker %s" % (t, [b.broker_id for b in rest]))
    placed = sorted({r for _e, _l, reps, _i in parts.values() for r in reps})
    raced = "placing it again" in creator.log_text()
    report("topic created while broker %d left: placed on %s (%s)", victim.broker_id, placed,
           "the departure was seen only after the request" if raced else
           "the departure was seen before the request")
    assert victim.broker_id not in placed
