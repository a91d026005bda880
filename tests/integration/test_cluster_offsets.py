"""Group state survives its coordinator (issue 16, item 5): in cluster mode
a group's committed offsets are records in the replicated internal topic
__consumer_offsets, and its coordinator is the leader of the group's
partition of it.  A commit is answered once its record is replicated, so
when the coordinator is SIGKILLed the partition's new leader loads the
commits and the group resumes from them: it re-reads only what it had not
committed, and loses nothing.  The new coordinator's SQL shows the
offsets.
"""
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import live_brokers, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from test_cluster_groups import agreed_coordinator, find_coordinator
from test_groups import API_JOIN, API_LEAVE, join_v5, parse_join_v5
from support import ck_admin, ck_conf, ck_producer, produce_ok, report, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

API_DELETE_GROUPS = 42
COORDINATOR_NOT_AVAILABLE = 15
MEMBER_ID_REQUIRED = 79
SESSION_MS = 3000
N = 4000
PARTS = 2


def java_hash(s):
    """Java's String.hashCode: over UTF-16 code units, 32-bit wrap-around."""
    units = s.encode("utf-16-be")
    h = 0
    for i in range(0, len(units), 2):
        h = (31 * h + int.from_bytes(units[i:i + 2], "big")) & 0xFFFFFFFF
    return h - (1 << 32) if h >= 1 << 31 else h


def offsets_leaders(b):
    """{partition: leader} of __consumer_offsets as broker b answers Metadata."""
    with kr.Conn(b.port, timeout=3) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, ["__consumer_offsets"], False),
                      timeout=3)
    parts = kr.parse_metadata(r, 5)["topics"].get("__consumer_offsets", (None, []))[1]
    return {pid: leader for _err, pid, leader, _reps, _isr, _off in parts}


def committed_rows(b, group):
    rows = b.sql("select topic, partition, offset from committed_offsets "
                 "where group_id = '%s' order by partition" % group)
    return {r["partition"]: r["offset"] for r in rows}


def test_group_resumes_from_committed_offsets_after_coordinator_sigkill(make_cluster):
    cluster = make_cluster(3, session_timeout_ms=SESSION_MS, overrides={
        "offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"})
    brokers = cluster.brokers
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in brokers), 20,
             "every broker to list three brokers")
    t = topic_name("offsets")
    fs = ck_admin(brokers[0]).create_topics(
        [NewTopic(t, PARTS, 3, config={"min.insync.replicas": "2"})], operation_timeout=15)
    fs[t].result(timeout=20)
    values = [b"m%05d" % i for i in range(N)]
    produce_ok(ck_producer(brokers[0], **{"bootstrap.servers": cluster.bootstrap,
                                          "acks": "all"}),
               t, [{"value": v, "partition": i % PARTS} for i, v in enumerate(values)])

    group = "resume-group"
    coord_id = wait_for(lambda: agreed_coordinator(brokers, group), 30,
                        "every broker to name the coordinator of %s" % group)
    coord = cluster.broker(coord_id)
    # Kafka's rule: the leader of partition abs(hashCode) % partitions, for
    # non-ASCII ids too (UTF-16 code units, a surrogate pair for the emoji).
    leaders = offsets_leaders(brokers[0])
    assert len(leaders) == 3, leaders
    for g in (group, "gr\u00fcppe-\u00e9t\u00e9", "emoji-\U0001F600", "x" * 200):
        h = java_hash(g)
        want = leaders[(0 if h == -(1 << 31) else abs(h)) % 3]
        got = wait_for(lambda: agreed_coordinator(brokers, g), 10, "the coordinator of %r" % g)
        assert got == want, "group %r: coordinator %d, leader of its partition %d" % (g, got, want)
    # A group deleted on the same coordinator stays deleted after the kill
    # (DeleteGroups writes Kafka's tombstones into the partition).
    part = lambda g: (0 if java_hash(g) == -(1 << 31) else abs(java_hash(g))) % 3  # noqa: E731
    gone = next(g for g in ("gone-%d" % i for i in range(100)) if part(g) == part(group))
    simple = Consumer(ck_conf(brokers[0], **{"bootstrap.servers": cluster.bootstrap,
                                             "group.id": gone, "enable.auto.commit": False}))
    try:
        simple.commit(offsets=[TopicPartition(t, 0, 7)], asynchronous=False)
    finally:
        simple.close()
    assert committed_rows(coord, gone) == {0: 7}
    with kr.Conn(coord.port, timeout=5) as conn:
        r = conn.request(API_DELETE_GROUPS, 1, kr.array([kr.string(gone)]), timeout=5)
        r.i32()
        assert dict(r.array(lambda x: (x.string(), x.i16()))) == {gone: 0}
    assert committed_rows(coord, gone) == {}

    # Three members join and leave first, so the group's generation is one
    # a new group would not have: after the kill the new coordinator must
    # have loaded it (Kafka's GroupMetadata record).
    with kr.Conn(coord.port, timeout=10) as conn:
        for _ in range(3):
            j = parse_join_v5(conn.request(API_JOIN, 5, join_v5(group)))
            assert j["err"] == MEMBER_ID_REQUIRED, j
            j = parse_join_v5(conn.request(API_JOIN, 5, join_v5(group, member=j["member"]),
                                           timeout=10))
            assert j["err"] == 0, j
            assert conn.request(API_LEAVE, 0, kr.string(group) + kr.string(j["member"])).i16() == 0

    def consumer():
        c = Consumer(ck_conf(brokers[0], **{
            "bootstrap.servers": cluster.bootstrap, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 6000, "heartbeat.interval.ms": 500,
            "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100}))
        c.subscribe([t])
        return c

    c = consumer()
    seen = {}                          # (partition, offset) -> times read
    first_after = {}                   # partition -> first offset read after the kill
    after_kill = []                    # (partition, offset) read after the kill
    committed = {}                     # partition -> offset, as acknowledged

    def commit():
        pos = {}
        for (p, o) in seen:
            pos[p] = max(pos.get(p, 0), o + 1)
        try:
            res = c.commit(offsets=[TopicPartition(t, p, o) for p, o in pos.items()],
                           asynchronous=False)
        except KafkaException:
            return False               # the coordinator is moving: retried later
        for tp in res:
            if tp.error is None:
                committed[tp.partition] = max(committed.get(tp.partition, 0), tp.offset)
        return True

    def read(count, timeout):
        got = 0
        deadline = time.monotonic() + timeout
        while got < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=min(50, count - got), timeout=0.2):
                if m.error():
                    continue
                k = (m.partition(), m.offset())
                seen[k] = seen.get(k, 0) + 1
                if killed:
                    first_after.setdefault(k[0], k[1])
                    after_kill.append(k)
                got += 1
            if got and got % 50 == 0:
                commit()
        return got

    killed = False
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and not (
                len(seen) >= N // 4 and all(any(k[0] == p for k in seen) for p in range(PARTS))):
            read(50, 1)
        assert len({k[0] for k in seen}) == PARTS, "read %d before the kill" % len(seen)
        # A second member joins and leaves (two rebalances), so the group's
        # generation is one a new group would not have: the new coordinator
        # must load it.  What it reads it does not commit: read again later.
        assert commit(), "commit before the rebalances"
        other = consumer()
        try:
            deadline = time.monotonic() + 30
            while time.monotonic() < deadline and not other.assignment():
                other.consume(num_messages=1, timeout=0.2)
                read(1, 0.2)
        finally:
            other.close()
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(c.assignment()) < PARTS:
            read(1, 0.2)
        assert commit(), "commit before the kill"
        at_kill = dict(committed)
        gen_before = wait_for(lambda: (coord.sql(
            "select generation from consumer_groups where group_id = '%s' and state = 'Stable'"
            % group) or [None])[0], 20, "the group to be Stable")["generation"]
        assert gen_before >= 4, gen_before
        gen_before = wait_for(lambda: (coord.sql(
            "select generation from consumer_groups where group_id = '%s' and state = 'Stable'"
            % group) or [None])[0], 20, "the group to be Stable")["generation"]
        assert gen_before >= 3, gen_before
        read(40, 10)                   # uncommitted: read again after the kill
        coord.kill()
        killed = True
        rest = [b for b in brokers if b is not coord]
        t0 = time.monotonic()
        new_id = wait_for(lambda: (lambda n: n if n not in (None, coord_id) else None)(
            agreed_coordinator(rest, group)), SESSION_MS / 1000.0 + 20,
            "another broker to coordinate %s" % group)
        new = cluster.broker(new_id)
        moved_s = time.monotonic() - t0
        loaded = wait_for(lambda: (lambda r: r if r and all(
            r.get(p, -1) >= o for p, o in at_kill.items()) else None)(committed_rows(new, group)),
            10, "the new coordinator's SQL to show the commits made before the kill")
        row = new.sql("select protocol_type, generation from consumer_groups "
                      "where group_id = '%s'" % group)
        assert row and row[0]["protocol_type"] == "consumer" and \
            row[0]["generation"] >= gen_before, \
            "the group on its new coordinator: %s (generation %d before)" % (row, gen_before)
        row = new.sql("select protocol_type, generation from consumer_groups "
                      "where group_id = '%s'" % group)
        assert row and row[0]["protocol_type"] == "consumer" and \
            row[0]["generation"] >= gen_before, \
            "the group on its new coordinator: %s (generation %d before)" % (row, gen_before)
        # A new member of the group has no position of its own: it starts
        # where the group committed, which only the new coordinator knows.
        c.close()
        c = consumer()
        deadline = time.monotonic() + 90
        while time.monotonic() < deadline:
            read(N, 1)
            done = all((p, o) in seen for p in range(PARTS) for o in range(N // PARTS))
            if done and commit() and all(committed.get(p) == N // PARTS for p in range(PARTS)):
                break
        final = committed_rows(new, group)
        assert committed_rows(new, gone) == {}, "the deleted group %s came back" % gone
    finally:
        c.close()
    want = {(p, o) for p in range(PARTS) for o in range(N // PARTS)}
    lost = want - set(seen)
    reread = {k: n - 1 for k, n in seen.items() if n > 1}
    # After the kill nothing committed before it may come again.
    bad_rereads = {k for k in after_kill if k[1] < at_kill.get(k[0], 0)}
    report("coordinator %d SIGKILLed, broker %d coordinates after %.2f s; committed before the "
           "kill %s at generation %d (loaded there: %s); read %d, lost %d, re-read %d (after the kill, of committed: %d); "
           "resumed at %s; final committed %s", coord_id, new_id, moved_s, at_kill, gen_before, loaded, len(seen),
           len(lost), sum(reread.values()), len(bad_rereads), first_after, final)
    assert not lost, "lost %d messages, e.g. %s" % (len(lost), sorted(lost)[:5])
    assert not bad_rereads, "re-read committed messages: %s" % sorted(bad_rereads)[:5]
    assert final == {p: N // PARTS for p in range(PARTS)}, final
    resumed = {p: o for p, o in at_kill.items() if o < N // PARTS}
    assert {p: first_after.get(p) for p in resumed} == resumed, \
        "after the kill the group read first %s, committed %s" % (first_after, at_kill)


def test_no_coordinator_until_enough_brokers_for_the_offsets_topic(make_cluster):
    """As Kafka: __consumer_offsets is created only once
    offsets.topic.replication.factor brokers live; until then every group's
    FindCoordinator answers COORDINATOR_NOT_AVAILABLE, and then it works."""
    cluster = make_cluster(3, start=False, overrides={"offsets.topic.num.partitions": "2"})
    b1, b2, b3 = cluster.brokers
    b1.start()
    b2.start()
    wait_for(lambda: all(len(live_brokers(b)) == 2 for b in (b1, b2)), 20,
             "two brokers to see each other")
    for _ in range(5):
        assert {find_coordinator(b, "early")[0] for b in (b1, b2)} == {COORDINATOR_NOT_AVAILABLE}
        time.sleep(0.2)
    assert offsets_leaders(b1) == {}, "__consumer_offsets was created with two brokers"
    b3.start()
    node = wait_for(lambda: agreed_coordinator(cluster.brokers, "early"), 30,
                    "a coordinator once the third broker lives")
    assert node in (1, 2, 3)
    assert len(offsets_leaders(b3)) == 2
