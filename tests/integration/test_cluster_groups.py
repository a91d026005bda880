"""Consumer groups in cluster mode (issue 15, item 5; issue 16, item 5):
every broker names the same coordinator for a group, the leader of the
group's partition of __consumer_offsets; the others refuse the group's
requests with NOT_COORDINATOR; when the coordinator dies the partition's
new leader takes the group over, with the offsets it committed (they are
replicated records of that partition), and consumers carry on by
themselves from there.  test_cluster_offsets.py kills a coordinator in the
middle of consumption.
"""
import time

import pytest
from confluent_kafka import Consumer, TopicPartition

import kafka_raw as kr
from cluster_support import cluster, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_conf, ck_producer, produce_ok, report, topic_name
from confluent_kafka.admin import NewTopic

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

API_FIND_COORDINATOR = 10
API_OFFSET_FETCH = 9
NOT_COORDINATOR = 16
COORDINATOR_LOAD_IN_PROGRESS = 14


def find_coordinator(b, group):
    """(error, node id, port) as broker b answers FindCoordinator v0; None
    when it does not answer."""
    try:
        with kr.Conn(b.port, timeout=3) as c:
            r = c.request(API_FIND_COORDINATOR, 0, kr.string(group), timeout=3)
    except (OSError, ValueError):
        return None
    err, node, _host, port = r.i16(), r.i32(), r.string(), r.i32()
    return err, node, port


def offset_fetch_error(b, group, topic):
    """The partition error of an OffsetFetch v1 for (topic, 0) on broker b."""
    body = kr.string(group) + kr.i32(1) + kr.string(topic) + kr.i32(1) + kr.i32(0)
    with kr.Conn(b.port) as c:
        r = c.request(API_OFFSET_FETCH, 1, body)
    # topics[1]: name, partitions[1]: partition, offset, metadata, error
    r.i32(), r.string(), r.i32(), r.i32(), r.i64(), r.string()
    return r.i16()


def agreed_coordinator(brokers, group):
    answers = {find_coordinator(b, group) for b in brokers}
    if len(answers) != 1:
        return None
    a = answers.pop()
    return a[1] if a and a[0] == 0 else None


def group_consume(b, group, topic, count, timeout=30.0):
    """Subscribes as group member, reads count messages, commits them; the values."""
    c = Consumer(ck_conf(b, **{"group.id": group, "enable.auto.commit": False,
                               "auto.offset.reset": "earliest",
                               "session.timeout.ms": 6000, "heartbeat.interval.ms": 500}))
    out = []
    try:
        c.subscribe([topic])
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=count - len(out), timeout=0.2):
                if not m.error():
                    out.append(m)
        assert len(out) == count, "group %s read %d of %d messages through broker %d" % (
            group, len(out), count, b.broker_id)
        c.commit(offsets=[TopicPartition(topic, 0, out[-1].offset() + 1)], asynchronous=False)
        return [m.value() for m in out]
    finally:
        c.close()


def test_group_coordinator_is_agreed_refuses_elsewhere_and_moves_when_it_dies(cluster):
    brokers = cluster.brokers
    t = topic_name("groups")
    fs = ck_admin(brokers[0]).create_topics([NewTopic(t, 1, 1)], operation_timeout=15)
    fs[t].result(timeout=20)
    leader = wait_for(lambda: next((b for b in brokers if find_leader(b, t) == b.broker_id), None),
                      10, "a leader for %s" % t)
    # The first FindCoordinator creates __consumer_offsets (50 partitions,
    # RF 3): until it is led, none is named.
    wait_for(lambda: agreed_coordinator(brokers, "g0"), 30, "a coordinator for any group")
    # A group coordinated by a broker that does not lead the data, so
    # killing the coordinator leaves the partition readable.
    group = next(g for g in ("g%d" % i for i in range(200))
                 if agreed_coordinator(brokers, g) not in (None, leader.broker_id))
    coord = cluster.broker(agreed_coordinator(brokers, group))
    for b in brokers:
        # The coordinator may still be loading its partition (LOAD_IN_PROGRESS).
        err = wait_for(lambda: (lambda e: [e] if e != COORDINATOR_LOAD_IN_PROGRESS else None)(
            offset_fetch_error(b, group, t)), 10, "broker %d to load its partitions" % b.broker_id)[0]
        assert err == (0 if b is coord else NOT_COORDINATOR), \
            "OffsetFetch for %s on broker %d (coordinator %d): error %d" % (
                group, b.broker_id, coord.broker_id, err)

    values = [b"m%03d" % i for i in range(100)]
    produce_ok(ck_producer(leader), t, [{"value": v, "partition": 0} for v in values])
    assert group_consume(leader, group, t, 40) == values[:40]
    rows = coord.sql("select offset from committed_offsets where group_id = '%s'" % group)
    assert rows == [{"offset": 40}], rows

    coord.kill()
    rest = [b for b in brokers if b is not coord]
    t0 = time.monotonic()
    new_id = wait_for(lambda: (lambda n: n if n not in (None, coord.broker_id) else None)(
        agreed_coordinator(rest, group)), cluster.session_timeout_s + 10,
        "another broker to coordinate %s" % group)
    report("group coordinator %d SIGKILLed: broker %d coordinates %s after %.2f s",
           coord.broker_id, new_id, group, time.monotonic() - t0)
    # The new coordinator has the commit (issue 16): the group goes on
    # from offset 40.
    got = group_consume(leader, group, t, 60)
    assert got == values[40:], "the group under its new coordinator read %d messages from %s" % (
        len(got), got[:1])
    new = cluster.broker(new_id)
    rows = new.sql("select offset from committed_offsets where group_id = '%s'" % group)
    assert rows == [{"offset": 100}], "the new coordinator's offsets: %s" % rows

    coord.restart()
    wait_for(lambda: agreed_coordinator(brokers, group) is not None, cluster.session_timeout_s + 10,
             "all three brokers to agree on the coordinator of %s again" % group)
    now = cluster.broker(agreed_coordinator(brokers, group))
    rows = wait_for(lambda: now.sql("select offset from committed_offsets where group_id = '%s'"
                                    % group) or None, 10, "the coordinator's offsets")
    assert rows == [{"offset": 100}], "the coordinator's offsets after the restart: %s" % rows


def find_leader(b, topic):
    with kr.Conn(b.port) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False))
    m = kr.parse_metadata(r, 5)
    parts = m["topics"].get(topic, (None, []))[1]
    return parts[0][2] if parts else None
