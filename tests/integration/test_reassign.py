"""Online expansion (issue 16 item 6): partition reassignments through
AlterPartitionReassignments / ListPartitionReassignments (raw frames: the
confluent-kafka here has no admin call for them) and through SQL's
UPDATE partitions SET replicas.

  - a partition moved onto a fourth broker started later, then off one
    of its old replicas, while an idempotent acks=all producer sends:
    every acknowledged message read back once, in order;
  - a topic's replication factor raised from 1 to 3; the reassignment
    listed while in progress (follower.replication.throttled.rate keeps
    it there) and gone once done; the throttled copy takes longer than
    the same copy unthrottled;
  - a cancel, the error cases, and the SQL path;
  - a partition moved to another broker with leader.replication.throttled.rate
    set on its leader alone: slower than the same move unthrottled, and
    every message on the new replica afterwards.
"""
import time

import pytest
from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic

import kafka_raw as kr
from cluster_support import (make_cluster, registered_ids, wait_equal, wait_for, zk,  # noqa: F401
                             zk_missing)
from support import ck_admin, ck_producer, consume, report, topic_name
from test_replication_failover import Sender, agreed, tally
from test_replication_ops import replicas_of

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

API_ALTER, API_LIST = 45, 46
NONE, UNKNOWN_TOPIC_OR_PARTITION, INVALID_REPLICA_ASSIGNMENT = 0, 3, 39
NO_REASSIGNMENT_IN_PROGRESS = 85
THROTTLE = "follower.replication.throttled.rate"
LEADER_THROTTLE = "leader.replication.throttled.rate"


def alter(b, moves, timeout_ms=20000):
    """moves {(topic, partition): target list, or None to cancel} ->
    (top-level error, {(topic, partition): (error, message)})."""
    by_topic = {}
    for (t, p), reps in moves.items():
        by_topic.setdefault(t, []).append((p, reps))
    body = kr.i32(timeout_ms) + kr.carray([
        kr.cstring(t) + kr.carray([
            kr.i32(p) + kr.carray(None if reps is None else [kr.i32(x) for x in reps]) + kr.tags()
            for p, reps in ps]) + kr.tags()
        for t, ps in by_topic.items()]) + kr.tags()
    with kr.Conn(b.port, timeout=timeout_ms / 1000 + 5) as c:
        r = c.request_flex(API_ALTER, 0, body, timeout=timeout_ms / 1000 + 5)
    r.i32()
    top = r.i16()
    r.cstring()
    out = {}
    for t, parts in r.vstructs(lambda r: (r.cstring(), r.vstructs(
            lambda r: (r.i32(), r.i16(), r.cstring()), True)), True):
        for p, err, msg in parts:
            out[(t, p)] = (err, msg)
    return top, out


def listed(b, topics=None):
    """ListPartitionReassignments ({topic: [partitions]} or None for all) ->
    {(topic, partition): (replicas, adding, removing)}."""
    body = kr.i32(10000) + kr.carray(None if topics is None else [
        kr.cstring(t) + kr.carray([kr.i32(p) for p in ps]) + kr.tags()
        for t, ps in topics.items()]) + kr.tags()
    with kr.Conn(b.port, timeout=10) as c:
        r = c.request_flex(API_LIST, 0, body, timeout=10)
    r.i32()
    assert r.i16() == NONE
    r.cstring()
    out = {}
    ids = lambda r: r.carray(lambda r: r.i32())  # noqa: E731
    for t, parts in r.vstructs(lambda r: (r.cstring(), r.vstructs(
            lambda r: (r.i32(), ids(r), ids(r), ids(r)), True)), True):
        for p, reps, add, rem in parts:
            out[(t, p)] = (reps, add, rem)
    return out


def set_throttle(b, rate, key=THROTTLE):
    """A replication throttle (the follower's unless key says) on broker b,
    bytes/s (0: none); AlterConfigs: the broker's other dynamic keys go."""
    res = ConfigResource("BROKER", str(b.broker_id), set_config={key: str(rate)})
    for f in ck_admin(b).alter_configs([res]).values():
        f.result(timeout=15)


def fill(c, t, n, size=1000, batches=1):
    """n messages of size bytes to partition 0, in at least `batches` batches."""
    p = ck_producer(c.brokers[0], **{"bootstrap.servers": c.bootstrap, "linger.ms": 20})
    for i in range(n):
        p.produce(t, b"x" * size, partition=0)
        if i % 500 == 0:
            p.poll(0)
        if (i + 1) % max(1, n // batches) == 0:
            assert p.flush(60) == 0
    assert p.flush(60) == 0


def wait_replicas(c, t, want, timeout=60):
    """Until the reassignment of t-0 onto want is done: every live broker
    shows those replicas, all in the ISR, and lists no reassignment."""
    live = [b for b in c.brokers if b.proc]
    wait_for(lambda: all(replicas_of(b, t).get(0) == want for b in live) and
             (agreed(live, t) or (None, ()))[1] == tuple(sorted(want)) and
             not any(listed(b, {t: [0]}) for b in live), timeout,
             "every broker to show %s-0 done on replicas %s" % (t, want))


def test_partition_moves_onto_a_fourth_broker_under_load_losing_nothing(make_cluster):
    c = make_cluster(4, start=False, session_timeout_ms=3000,
                     overrides={"replica.lag.time.max.ms": "3000"})
    b1, b2, b3, b4 = c.brokers
    for b in (b1, b2, b3):
        b.start()
    wait_for(lambda: all(registered_ids(b) == {1, 2, 3} for b in (b1, b2, b3)), 30,
             "brokers 1-3 to list each other")
    t = topic_name("move")
    ck_admin(b1).create_topics([NewTopic(t, 1, replica_assignment=[[1, 2, 3]],
                                         config={"min.insync.replicas": "2"})])[t].result(20)
    wait_for(lambda: (agreed(c.brokers[:3], t) or (None, ()))[1] == (1, 2, 3), 30,
             "the ISR of %s to hold brokers 1-3" % t)
    s = Sender(c, t)
    s.start()
    try:
        wait_for(lambda: len(s.acked) > 300, 30, "acknowledged messages before the move")
        b4.start()                                  # the new broker, online
        wait_for(lambda: all(registered_ids(b) == {1, 2, 3, 4} for b in c.brokers), 30,
                 "every broker to list broker 4")
        # Broker 1 (the leader) leaves, 4 joins: leadership must move too.
        top, res = alter(b3, {(t, 0): [2, 3, 4]})
        assert (top, res) == (NONE, {(t, 0): (NONE, None)})
        wait_replicas(c, t, [2, 3, 4])
        before = len(s.acked)
        wait_for(lambda: len(s.acked) > before + 300, 30, "acknowledgements after the move")
    finally:
        s.stop.set()
        s.join(150)
    assert listed(b2) == {}
    leader, isr = agreed(c.brokers, t)
    assert leader in (2, 3, 4) and isr == (2, 3, 4)
    acked, got, values, lost, dups = tally(s, b2, t)
    report("reassignment onto broker 4 under load: %d sent, %d acknowledged, %d read, "
           "%d lost, %d duplicated", s.sent, len(acked), len(values), len(lost), dups)
    assert not lost, "%d acknowledged messages lost, e.g. %s" % (len(lost), lost[:5])
    assert dups == 0, "%d messages read twice" % dups
    nums = [int(v[1:]) for v in values]
    assert nums == sorted(nums), "messages out of order in the log"
    # The old replica's log is gone from broker 1.
    wait_for(lambda: b1.sql("SELECT size_bytes FROM partitions WHERE topic = '%s'" % t)
             == [{"size_bytes": None}], 10, "broker 1 to drop its replica of %s" % t)


def timed_rf_raise(c, t, target):
    t0 = time.monotonic()
    top, res = alter(c.brokers[0], {(t, 0): target})
    assert (top, res) == (NONE, {(t, 0): (NONE, None)})
    return t0


def test_replication_factor_from_1_to_3_listed_throttled_cancelled_and_by_sql(make_cluster):
    c = make_cluster(3)
    b1, b2, b3 = c.brokers
    fast, slow, gone = topic_name("rf-fast"), topic_name("rf-slow"), topic_name("rf-cancel")
    fs = ck_admin(b1).create_topics([NewTopic(x, 1, replica_assignment=[[1]])
                                     for x in (fast, slow, gone)])
    for f in fs.values():
        f.result(20)
    for x in (fast, slow):
        fill(c, x, 3000)                            # ~3 MB each

    # Errors, per partition, as Kafka's.
    top, res = alter(b2, {(fast, 0): [1, 1], (fast, 7): [1], ("no-such-topic", 0): [1],
                          (gone, 0): [1, 99]})
    assert top == NONE
    assert res[(fast, 0)][0] == INVALID_REPLICA_ASSIGNMENT
    assert res[(fast, 7)][0] == UNKNOWN_TOPIC_OR_PARTITION
    assert res[("no-such-topic", 0)][0] == UNKNOWN_TOPIC_OR_PARTITION
    assert res[(gone, 0)][0] == INVALID_REPLICA_ASSIGNMENT and "99" in res[(gone, 0)][1]
    assert alter(b2, {(fast, 0): None})[1][(fast, 0)][0] == NO_REASSIGNMENT_IN_PROGRESS

    # Unthrottled: RF 1 -> 3.
    t0 = timed_rf_raise(c, fast, [1, 2, 3])
    wait_replicas(c, fast, [1, 2, 3])
    unthrottled = time.monotonic() - t0
    assert agreed(c.brokers, fast)[1] == (1, 2, 3)

    # Throttled (500 kB/s on the new followers): listed while in progress,
    # on any broker, and shown by SQL.
    for b in (b2, b3):
        set_throttle(b, 500000)
    t0 = timed_rf_raise(c, slow, [1, 2, 3])
    want = {(slow, 0): ([1, 2, 3], [2, 3], [])}
    assert listed(b1, {slow: [0], fast: [0]}) == want
    wait_equal(lambda: listed(b3), want, 5, "broker 3 to list the reassignment")
    row, = b2.sql("SELECT replicas, adding_replicas, removing_replicas FROM partitions "
                  "WHERE topic = '%s'" % slow)
    assert row == {"replicas": "1,2,3", "adding_replicas": "2,3", "removing_replicas": None}
    wait_replicas(c, slow, [1, 2, 3], timeout=60)
    throttled = time.monotonic() - t0
    wait_for(lambda: listed(b1) == {}, 10, "no reassignment listed once done")
    report("RF 1 -> 3 of ~3 MB: %.2f s unthrottled, %.2f s at %s=500000 (%.1fx)",
           unthrottled, throttled, THROTTLE, throttled / unthrottled)
    assert throttled > 1.5 * unthrottled, "the throttle did not slow the copy down"

    # Cancel (the throttle, now 1 byte/s, keeps it in progress): back to [1].
    for b in (b2, b3):
        set_throttle(b, 1)
    fill(c, gone, 10, batches=5)
    assert alter(b3, {(gone, 0): [2, 3]})[1][(gone, 0)][0] == NONE
    wait_equal(lambda: listed(b2, {gone: [0]}), {(gone, 0): ([2, 3, 1], [2, 3], [1])}, 5,
               "broker 2 to list the reassignment of %s" % gone)
    assert alter(b2, {(gone, 0): None})[1][(gone, 0)] == (NONE, None)
    wait_for(lambda: listed(b1) == {}, 5, "no reassignment listed after the cancel")
    wait_replicas(c, gone, [1])
    assert agreed(c.brokers, gone) == (1, (1,))

    # SQL: the same write (and its errors) through UPDATE partitions.
    for b in (b2, b3):
        set_throttle(b, 0)
    b2.sql("UPDATE partitions SET replicas = '1,3' WHERE topic = '%s' AND partition = 0" % gone)
    wait_replicas(c, gone, [1, 3])
    assert "INVALID_REPLICA_ASSIGNMENT" in b1.sql_error(
        "UPDATE partitions SET replicas = '1,1' WHERE topic = '%s'" % gone)
    assert "NO_REASSIGNMENT_IN_PROGRESS" in b1.sql_error(
        "UPDATE partitions SET replicas = NULL WHERE topic = '%s'" % gone)
    assert "read-only" in b1.sql_error(
        "UPDATE partitions SET leader = 3 WHERE topic = '%s'" % gone)


def test_standalone_advertises_both_and_holds_every_partition_already(start_broker):
    b = start_broker()
    with kr.Conn(b.port) as c:
        err, apis = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0,
                                                       kr.api_versions_v0_body()))
    assert err == NONE and apis[API_ALTER] == (0, 0) and apis[API_LIST] == (0, 0)
    t = topic_name("solo")
    ck_admin(b).create_topics([NewTopic(t, 1, 1)])[t].result(10)
    (me,), = replicas_of(b, t).values()
    _top, res = alter(b, {(t, 0): [me], (t, 1): [me]})
    assert res == {(t, 0): (NONE, None), (t, 1): (UNKNOWN_TOPIC_OR_PARTITION, res[(t, 1)][1])}
    assert alter(b, {(t, 0): [me, me + 1]})[1][(t, 0)][0] == INVALID_REPLICA_ASSIGNMENT
    assert alter(b, {(t, 0): None})[1][(t, 0)][0] == NO_REASSIGNMENT_IN_PROGRESS
    assert listed(b) == {}


def test_leader_throttle_alone_slows_a_move_and_every_message_arrives(make_cluster):
    c = make_cluster(2)
    b1, b2 = c.brokers
    fast, slow = topic_name("lt-fast"), topic_name("lt-slow")
    fs = ck_admin(b1).create_topics([NewTopic(x, 1, replica_assignment=[[1]])
                                     for x in (fast, slow)])
    for f in fs.values():
        f.result(20)
    n = 2000                                        # ~2 MB each, numbered
    p = ck_producer(b1, **{"bootstrap.servers": c.bootstrap, "linger.ms": 20})
    for x in (fast, slow):
        for i in range(n):
            p.produce(x, b"%06d" % i + b"x" * 994, partition=0)
            if i % 500 == 0:
                p.poll(0)
    assert p.flush(60) == 0

    t0 = timed_rf_raise(c, fast, [2])               # unthrottled: 1 -> 2
    wait_replicas(c, fast, [2], timeout=30)
    unthrottled = time.monotonic() - t0

    # Only the leader (broker 1) throttles; the follower does not.
    set_throttle(b1, 500000, key=LEADER_THROTTLE)
    try:
        t0 = timed_rf_raise(c, slow, [2])
        wait_replicas(c, slow, [2], timeout=30)
        throttled = time.monotonic() - t0
    finally:
        set_throttle(b1, 0, key=LEADER_THROTTLE)
    report("move of ~2 MB: %.2f s unthrottled, %.2f s at %s=500000 on the leader (%.1fx)",
           unthrottled, throttled, LEADER_THROTTLE, throttled / unthrottled)
    assert throttled > 1.5 * unthrottled, "the leader throttle did not slow the copy down"
    for x in (fast, slow):                          # all there, on broker 2 alone
        got = [m.value()[:6] for m in consume(b2, x, [0], n, timeout=30)]
        assert got == [b"%06d" % i for i in range(n)], "%s: messages lost or repeated" % x


def test_both_throttles_from_the_properties_and_described_dynamic_once_set(start_broker):
    b = start_broker(overrides={LEADER_THROTTLE: "123456"})
    res = ConfigResource("BROKER", str(b.broker_id))

    def described():
        cs = ck_admin(b).describe_configs([res])[res].result(timeout=15)
        return {k: (cs[k].value, cs[k].source, cs[k].is_read_only)
                for k in (LEADER_THROTTLE, THROTTLE)}
    got = described()
    assert got[LEADER_THROTTLE] == ("123456", ConfigSource.STATIC_BROKER_CONFIG.value, False)
    assert got[THROTTLE] == ("9223372036854775807", ConfigSource.DEFAULT_CONFIG.value, False)
    set_res = ConfigResource("BROKER", str(b.broker_id),
                             set_config={LEADER_THROTTLE: "2000000", THROTTLE: "3000000"})
    for f in ck_admin(b).alter_configs([set_res]).values():
        f.result(timeout=15)
    dyn = ConfigSource.DYNAMIC_BROKER_CONFIG.value
    assert described() == {LEADER_THROTTLE: ("2000000", dyn, False),
                           THROTTLE: ("3000000", dyn, False)}
