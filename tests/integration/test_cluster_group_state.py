"""Group state in __consumer_offsets across a coordinator's death (issue 16,
leftovers), as Kafka's GroupCoordinator keeps it:

- the leader's SyncGroup stores the group (generation, protocol, leader,
  members with their assignments) as a GroupMetadata record and the
  SyncGroup answers wait until it is replicated (acks=all), so the next
  coordinator loads the group Stable with its members: their heartbeats
  are accepted in the same generation, no rebalance;
- a store that cannot be replicated fails the SyncGroup (REBALANCE_IN_PROGRESS
  for a timeout) and the group rebalances;
- a coordinator killed in the middle of a rebalance: the consumers rejoin
  under the new one and carry on, losing nothing, re-reading only what was
  not committed (at least once);
- expired offsets (offsets.retention.minutes, here an OffsetCommit v2
  retention), OffsetDelete and DeleteGroups write tombstones, so the next
  coordinator, whose own retention has not run, does not bring them back;
- every replica of a __consumer_offsets partition keeps its SQLite rows of
  the partition's groups as its log says, so SQL on any broker shows the
  coordinator's offsets and groups, before and after a failover.
"""
import time

import pytest
from confluent_kafka import Consumer, KafkaException, TopicPartition
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import live_brokers, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from test_cluster_groups import agreed_coordinator
from test_groups import (API_DESCRIBE, API_JOIN, API_SYNC, heartbeat, join_v5, parse_commit,
                         parse_join_v5, parse_sync_v3, sync_v3)
from support import ck_admin, ck_conf, ck_producer, produce_ok, report, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

API_OFFSET_COMMIT, API_OFFSET_FETCH, API_DELETE_GROUPS, API_OFFSET_DELETE = 8, 9, 42, 47
API_LIST_GROUPS = 16
NOT_COORDINATOR, LOAD_IN_PROGRESS, COORDINATOR_NOT_AVAILABLE = 16, 14, 15
REBALANCE_IN_PROGRESS, MEMBER_ID_REQUIRED = 27, 79
ZK_SESSION_MS = 3000
# The first rebalance waits for both wire members (Kafka's initial delay).
JOIN_BOTH = {"group.initial.rebalance.delay.ms": "1000"}


def start_cluster(make_cluster, per_broker=None, zk_session_ms=ZK_SESSION_MS, **overrides):
    o = {"offsets.topic.num.partitions": "3", "group.initial.rebalance.delay.ms": "0"}
    o.update(overrides)
    cluster = make_cluster(3, start=False, session_timeout_ms=zk_session_ms, overrides=o)
    for b in cluster.brokers:
        b.overrides.update((per_broker or {}).get(b.broker_id, {}))
    cluster.start()
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in cluster.brokers), 20,
             "every broker to list three brokers")
    # __consumer_offsets exists once a group is asked about; a kill before
    # its followers caught up would leave a partition without a leader.
    wait_for(lambda: agreed_coordinator(cluster.brokers, "any"), 30, "__consumer_offsets")
    wait_for(lambda: offsets_in_sync(cluster.brokers[0]), 30,
             "every partition of __consumer_offsets to have its three replicas in sync")
    return cluster


def offsets_in_sync(b):
    with kr.Conn(b.port, timeout=3) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, ["__consumer_offsets"], False),
                      timeout=3)
    parts = kr.parse_metadata(r, 5)["topics"].get("__consumer_offsets", (None, []))[1]
    return len(parts) == 3 and all(len(isr) == 3 for _e, _p, _l, _r, isr, _o in parts)


def coordinated_by(brokers, want, prefix):
    """A group id coordinated by broker want (None: any), and its coordinator."""
    for i in range(300):
        g = "%s-%d" % (prefix, i)
        c = wait_for(lambda: agreed_coordinator(brokers, g), 30, "a coordinator for %s" % g)
        if want is None or c == want:
            return g, c
    raise AssertionError("no group of broker %s" % want)


def ready(b, group):
    """Waits until b answers group requests (its partition loaded)."""
    def check():
        e = offset_fetch(b, group, "none-such")[1]
        return None if e in (LOAD_IN_PROGRESS, NOT_COORDINATOR, COORDINATOR_NOT_AVAILABLE) \
            else True
    wait_for(check, 20, "broker %d to coordinate %s" % (b.broker_id, group))


def offset_fetch(b, group, topic, partitions=(0,)):
    """({partition: offset}, top-level error) of an OffsetFetch v2 on b."""
    body = kr.string(group) + kr.array([kr.string(topic) + kr.array(
        [kr.i32(p) for p in partitions])])
    with kr.Conn(b.port, timeout=5) as c:
        r = c.request(API_OFFSET_FETCH, 2, body, timeout=5)
    out = {}
    for _t, ps in r.array(lambda x: (x.string(), x.array(
            lambda y: (y.i32(), y.i64(), y.string(), y.i16())))):
        for p, off, _md, _err in ps:
            out[p] = off
    return out, r.i16()


def describe(b, group):
    """DescribeGroups v0: (error, state, protocol type, protocol, {member: assignment})."""
    with kr.Conn(b.port, timeout=5) as c:
        r = c.request(API_DESCRIBE, 0, kr.array([kr.string(group)]), timeout=5)
    g = r.array(lambda x: (x.i16(), x.string(), x.string(), x.string(), x.string(), x.array(
        lambda y: (y.string(), y.string(), y.string(), y.nbytes(), y.nbytes()))))[0]
    return g[0], g[2], g[3], g[4], {m[0]: m[4] for m in g[5]}


def join_group(conns, group, session=20000):
    """Every connection joins as a member (JoinGroup v5, MEMBER_ID_REQUIRED
    first).  [(conn, JoinGroup answer)], the leader's first."""
    ids = []
    for c in conns:
        j = parse_join_v5(c.request(API_JOIN, 5, join_v5(group, session=session)))
        assert j["err"] == MEMBER_ID_REQUIRED, j
        ids.append(j["member"])
    for c, mid in zip(conns, ids):
        c.send(API_JOIN, 5, join_v5(group, member=mid, session=session))
    answers = [(c, parse_join_v5(c.recv_response(timeout=15)[1])) for c in conns]
    assert all(a["err"] == 0 for _c, a in answers), answers
    return sorted(answers, key=lambda ca: ca[1]["leader"] != ca[1]["member"])


def sync_all(pairs, group, asg, timeout=15):
    """The followers' SyncGroups, then the leader's with asg: each
    (error, assignment) in pairs' order."""
    (lconn, lead), rest = pairs[0], pairs[1:]
    for c, a in rest:
        c.send(API_SYNC, 3, sync_v3(group, a["gen"], a["member"]))
    time.sleep(0.2)                    # the followers wait first, as usual
    lconn.send(API_SYNC, 3, sync_v3(group, lead["gen"], lead["member"], assignments=asg.items()))
    return [parse_sync_v3(c.recv_response(timeout=timeout)[1])[1:] for c, _a in pairs]


def new_coordinator(cluster, group, dead_id):
    rest = [b for b in cluster.brokers if b.broker_id != dead_id]
    new_id = wait_for(lambda: (lambda n: n if n not in (None, dead_id) else None)(
        agreed_coordinator(rest, group)), ZK_SESSION_MS / 1000.0 + 20,
        "another broker to coordinate %s" % group)
    new = cluster.broker(new_id)
    ready(new, group)
    return new


def test_synced_group_survives_coordinator_sigkill_stable_with_its_members(make_cluster):
    cluster = start_cluster(make_cluster, **JOIN_BOTH)
    group, coord_id = coordinated_by(cluster.brokers, None, "synced")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    conns = [kr.Conn(coord.port, timeout=15) for _ in range(2)]
    try:
        pairs = join_group(conns, group)
        lead, follow = pairs[0][1], pairs[1][1]
        gen = lead["gen"]
        asg = {lead["member"]: b"assignment-of-the-leader", follow["member"]: b"and-the-follower"}
        assert sync_all(pairs, group, asg) == [(0, asg[lead["member"]]),
                                               (0, asg[follow["member"]])]
    finally:
        for c in conns:
            c.close()
    assert describe(coord, group) == (0, "Stable", "consumer", "range", asg)

    # Right after the rebalance, no commit yet: the coordinator dies.
    t0 = time.monotonic()
    coord.kill()
    new = new_coordinator(cluster, group, coord_id)
    moved = time.monotonic() - t0
    # Kafka's loadGroup: Stable, the generation, the members and their
    # assignments; their heartbeats are accepted without a rebalance, and a
    # SyncGroup of that generation answers the stored assignment.
    assert describe(new, group) == (0, "Stable", "consumer", "range", asg)
    with kr.Conn(new.port, timeout=10) as c:
        for mid in asg:
            assert heartbeat(c, group, gen, mid) == 0, mid
        for mid, a in asg.items():
            assert parse_sync_v3(c.request(API_SYNC, 3, sync_v3(group, gen, mid)))[1:] == (0, a)
        assert heartbeat(c, group, gen + 1, lead["member"]) == 22   # ILLEGAL_GENERATION
    rows = new.sql("select state, generation, protocol, leader from consumer_groups "
                   "where group_id = '%s'" % group)
    assert rows == [{"state": "Stable", "generation": gen, "protocol": "range",
                     "leader": lead["member"]}], rows
    members = new.sql("select member_id from group_members where group_id = '%s' "
                      "order by member_id" % group)
    assert [m["member_id"] for m in members] == sorted(asg), members
    report("coordinator %d SIGKILLed right after the rebalance: broker %d has generation %d "
           "Stable with both members after %.2f s", coord_id, new.broker_id, gen, moved)


def test_sync_group_waits_for_replication_and_fails_the_rebalance_when_it_cannot(make_cluster):
    """The followers of the group's partition stopped: the leader's
    SyncGroup is not answered until offsets.commit.timeout.ms has passed,
    then every waiting SyncGroup gets REBALANCE_IN_PROGRESS (Kafka's
    mapping of REQUEST_TIMED_OUT) and the group rebalances."""
    # A ZooKeeper session longer than the pause: the stopped brokers stay
    # in the ISR, so nothing but their return replicates the record.
    cluster = start_cluster(make_cluster, zk_session_ms=15000,
                            **{"offsets.commit.timeout.ms": "2500"}, **JOIN_BOTH)
    group, coord_id = coordinated_by(cluster.brokers, None, "unreplicated")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    others = [b for b in cluster.brokers if b is not coord]
    conns = [kr.Conn(coord.port, timeout=15) for _ in range(2)]
    try:
        pairs = join_group(conns, group)
        lead = pairs[0][1]
        asg = {a["member"]: b"x" for _c, a in pairs}
        for b in others:
            b.sigstop()
        try:
            t0 = time.monotonic()
            got = sync_all(pairs, group, asg)
            waited = time.monotonic() - t0
        finally:
            for b in others:
                b.sigcont()
        assert got == [(REBALANCE_IN_PROGRESS, b""), (REBALANCE_IN_PROGRESS, b"")], got
        assert waited >= 2.0, "answered after %.2f s" % waited
        err, state, _pt, _p, _m = describe(coord, group)
        assert (err, state) == (0, "PreparingRebalance"), (err, state)
        # Replicated again: the members rejoin and the next generation is stored.
        for c, a in pairs:
            c.send(API_JOIN, 5, join_v5(group, member=a["member"], session=20000))
        again = sorted(((c, parse_join_v5(c.recv_response(timeout=15)[1])) for c, _a in pairs),
                       key=lambda ca: ca[1]["leader"] != ca[1]["member"])
        assert all(a["err"] == 0 and a["gen"] == lead["gen"] + 1 for _c, a in again), again
        asg = {a["member"]: b"y-" + a["member"].encode() for _c, a in again}
        want = [(0, asg[a["member"]]) for _c, a in again]
        assert sync_all(again, group, asg) == want
    finally:
        for c in conns:
            c.close()
    report("SyncGroup without replication: REBALANCE_IN_PROGRESS after %.2f s; next generation "
           "stored", waited)


def test_coordinator_killed_mid_rebalance_consumers_rejoin_and_lose_nothing(make_cluster):
    cluster = start_cluster(make_cluster)
    brokers = cluster.brokers
    t = topic_name("midreb")
    parts, n = 4, 2000
    fs = ck_admin(brokers[0]).create_topics(
        [NewTopic(t, parts, 3, config={"min.insync.replicas": "2"})], operation_timeout=15)
    fs[t].result(timeout=20)
    values = [b"v%05d" % i for i in range(n)]
    produce_ok(ck_producer(brokers[0], **{"bootstrap.servers": cluster.bootstrap, "acks": "all"}),
               t, [{"value": v, "partition": i % parts} for i, v in enumerate(values)])
    group, coord_id = coordinated_by(brokers, None, "midreb")
    coord = cluster.broker(coord_id)

    def consumer():
        c = Consumer(ck_conf(brokers[0], **{
            "bootstrap.servers": cluster.bootstrap, "group.id": group,
            "enable.auto.commit": False, "auto.offset.reset": "earliest",
            "session.timeout.ms": 10000, "heartbeat.interval.ms": 300,
            "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100}))
        c.subscribe([t])
        return c

    seen = {}                          # (partition, offset) -> times read
    committed = {}                     # partition -> offset acknowledged
    killed = []
    after = []                         # (partition, offset) read after the kill

    def poll(c, budget=0.2):
        for m in c.consume(num_messages=50, timeout=budget):
            if m.error():
                continue
            k = (m.partition(), m.offset())
            seen[k] = seen.get(k, 0) + 1
            if killed:
                after.append(k)
        pos = {}
        for (p, o) in seen:
            pos[p] = max(pos.get(p, 0), o + 1)
        mine = {tp.partition for tp in c.assignment()}
        offs = [TopicPartition(t, p, o) for p, o in pos.items() if p in mine]
        if not offs:
            return
        try:
            for tp in c.commit(offsets=offs, asynchronous=False):
                if tp.error is None:
                    committed[tp.partition] = max(committed.get(tp.partition, 0), tp.offset)
        except KafkaException:
            pass                       # rebalancing or moving: later

    c1 = consumer()
    c2 = None
    try:
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline and len(seen) < n // 4:
            poll(c1)
        assert len(seen) >= n // 4, "read %d before the rebalance" % len(seen)
        at_kill = dict(committed)
        # A second member joins: the group rebalances; kill the coordinator
        # in the middle (Preparing or Completing, as its SQL shows).
        c2 = consumer()
        state = None
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline:
            c2.consume(num_messages=1, timeout=0.05)
            rows = coord.sql("select state from consumer_groups where group_id = '%s'" % group)
            state = rows[0]["state"] if rows else None
            if state in ("PreparingRebalance", "CompletingRebalance"):
                break
        assert state in ("PreparingRebalance", "CompletingRebalance"), state
        at_kill = dict(committed)
        coord.kill()
        killed.append(True)
        t0 = time.monotonic()
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            poll(c1, 0.1)
            poll(c2, 0.1)
            if all(committed.get(p) == n // parts for p in range(parts)) and \
                    c1.assignment() and c2.assignment():
                break
        took = time.monotonic() - t0
        both = (len(c1.assignment()), len(c2.assignment()))
    finally:
        c1.close()
        if c2:
            c2.close()
    want = {(p, o) for p in range(parts) for o in range(n // parts)}
    lost = want - set(seen)
    reread = sum(k - 1 for k in seen.values())
    bad = {k for k in after if k[1] < at_kill.get(k[0], 0)}
    report("coordinator %d SIGKILLed in %s: done %.2f s later; read %d, lost %d, re-read %d "
           "(of offsets committed before the kill: %d); assignments then %s", coord_id, state,
           took, len(seen), len(lost), reread, len(bad), both)
    assert not lost, "lost %d, e.g. %s" % (len(lost), sorted(lost)[:5])
    assert not bad, "re-read committed messages: %s" % sorted(bad)[:5]
    assert committed == {p: n // parts for p in range(parts)}, committed
    assert both[0] + both[1] == parts and min(both) > 0, both


def offset_commit_v2(b, group, topic, offsets, retention_ms):
    """A simple consumer's OffsetCommit v2 (generation -1) with a retention."""
    body = (kr.string(group) + kr.i32(-1) + kr.string("") + kr.i64(retention_ms) +
            kr.array([kr.string(topic) + kr.array(
                [kr.i32(p) + kr.i64(o) + kr.string("") for p, o in offsets.items()])]))
    with kr.Conn(b.port, timeout=10) as c:
        return parse_commit(c.request(API_OFFSET_COMMIT, 2, body, timeout=10), 2)


def test_expired_deleted_and_offset_deleted_offsets_stay_gone_after_failover(make_cluster):
    """The coordinator (broker 1) checks retention every 200 ms; the others
    only every hour, so what the next coordinator shows comes from the log:
    without tombstones it would load the offsets back."""
    cluster = start_cluster(make_cluster, per_broker={
        1: {"offsets.retention.check.interval.ms": "200"},
        2: {"offsets.retention.check.interval.ms": "3600000"},
        3: {"offsets.retention.check.interval.ms": "3600000"}})
    brokers = cluster.brokers
    t = topic_name("tomb")
    fs = ck_admin(brokers[0]).create_topics([NewTopic(t, 2, 3)], operation_timeout=15)
    fs[t].result(timeout=20)
    coord = cluster.broker(1)
    expiring, _ = coordinated_by(brokers, 1, "expiring")
    deleted, _ = coordinated_by(brokers, 1, "deleted")
    od, _ = coordinated_by(brokers, 1, "offdel")
    kept, _ = coordinated_by(brokers, 1, "kept")
    for g in (expiring, deleted, od, kept):
        ready(coord, g)
    assert offset_commit_v2(coord, expiring, t, {0: 11, 1: 12}, 1500) == {(t, 0): 0, (t, 1): 0}
    for g, offs in ((deleted, {0: 21}), (od, {0: 31, 1: 32}), (kept, {0: 41, 1: 42})):
        assert offset_commit_v2(coord, g, t, offs, -1) == {(t, p): 0 for p in offs}
    assert offset_fetch(coord, expiring, t, (0, 1)) == ({0: 11, 1: 12}, 0)
    with kr.Conn(coord.port, timeout=5) as c:
        r = c.request(API_DELETE_GROUPS, 1, kr.array([kr.string(deleted)]), timeout=5)
        r.i32()
        assert r.array(lambda x: (x.string(), x.i16())) == [(deleted, 0)]
        body = kr.string(od) + kr.array([kr.string(t) + kr.array([kr.i32(0)])])
        r = c.request(API_OFFSET_DELETE, 0, body, timeout=5)
        assert r.i16() == 0
        r.i32()
        assert r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16()))))[0] == \
            (t, [(0, 0)])
    # Expired on the coordinator: its SQL and OffsetFetch no longer have them.
    wait_for(lambda: not coord.sql("select 1 from committed_offsets where group_id = '%s'"
                                   % expiring), 15, "the offsets of %s to expire" % expiring)
    assert offset_fetch(coord, expiring, t, (0, 1)) == ({0: -1, 1: -1}, 0)
    time.sleep(0.5)                    # the tombstones reach the followers

    coord.kill()
    new = new_coordinator(cluster, expiring, 1)
    for g in (deleted, od, kept):
        ready(new, g)
    sql = lambda g: {r["partition"]: r["offset"] for r in new.sql(  # noqa: E731
        "select partition, offset from committed_offsets where group_id = '%s'" % g)}
    assert sql(kept) == {0: 41, 1: 42}, "the new coordinator has not loaded the offsets"
    assert offset_fetch(new, kept, t, (0, 1)) == ({0: 41, 1: 42}, 0)
    assert offset_fetch(new, expiring, t, (0, 1)) == ({0: -1, 1: -1}, 0)
    assert sql(expiring) == {}
    assert offset_fetch(new, deleted, t, (0,)) == ({0: -1}, 0)
    assert sql(deleted) == {}
    assert offset_fetch(new, od, t, (0, 1)) == ({0: -1, 1: 32}, 0)
    assert sql(od) == {1: 32}
    groups = {r["group_id"] for r in new.sql("select group_id from consumer_groups")}
    assert expiring not in groups and deleted not in groups, groups


def committed_sql(b, group):
    return {r["partition"]: r["offset"] for r in b.sql(
        "select partition, offset from committed_offsets where group_id = '%s'" % group)}


def test_reloaded_coordinator_keeps_only_what_the_log_says(make_cluster):
    """Broker 1 stores a commit in its SQLite that never reaches the log
    of the others (its followers stopped: REQUEST_TIMED_OUT), dies, and
    follows the next leader, which truncates that record away.  When it
    leads the partition again (the controller's preferred-leader check)
    its load replaces its rows of the partition's groups with the log's:
    the lost commit does not come back in OffsetFetch or SQL."""
    # The followers stop for ~2 s: a ZooKeeper session longer than that
    # keeps them in the cluster; their fetches wait at most 200 ms, so
    # none is pending at the leader when the commit is appended.
    cluster = start_cluster(make_cluster, zk_session_ms=8000, **{
        "offsets.commit.timeout.ms": "1000", "replica.fetch.wait.max.ms": "200",
        "leader.imbalance.check.interval.seconds": "1",
        "leader.imbalance.per.broker.percentage": "0"})
    brokers = cluster.brokers
    t = topic_name("reload")
    fs = ck_admin(brokers[0]).create_topics([NewTopic(t, 2, 3)], operation_timeout=15)
    fs[t].result(timeout=20)
    group, _ = coordinated_by(brokers, 1, "reload")
    coord = cluster.broker(1)
    others = [b for b in brokers if b is not coord]
    ready(coord, group)
    # the first commit may time out (1 s here) while the new partition's
    # followers catch up on a loaded machine: retried, as clients do
    wait_for(lambda: offset_commit_v2(coord, group, t, {0: 7}, -1) == {(t, 0): 0}, 30,
             "the first commit to be replicated")
    for b in others:
        b.sigstop()
    try:
        time.sleep(0.6)                # their pending fetches answered, into the void
        got = offset_commit_v2(coord, group, t, {1: 99}, -1)
        lost_sql = committed_sql(coord, group)
        coord.kill()                   # before its followers could fetch it
    finally:
        for b in others:
            b.sigcont()
    assert got == {(t, 1): 7}, got     # REQUEST_TIMED_OUT
    assert lost_sql == {0: 7, 1: 99}, lost_sql   # stored here, not replicated
    new = new_coordinator(cluster, group, 1)
    assert offset_fetch(new, group, t, (0, 1)) == ({0: 7, 1: -1}, 0)
    assert offset_commit_v2(new, group, t, {0: 8}, -1) == {(t, 0): 0}

    coord.start()
    wait_for(lambda: agreed_coordinator(brokers, group) == 1, 60,
             "broker 1 to lead the group's partition again")
    ready(coord, group)
    assert offset_fetch(coord, group, t, (0, 1)) == ({0: 8, 1: -1}, 0)
    assert committed_sql(coord, group) == {0: 8}
    report("broker 1 coordinates %s again: its reload dropped the commit the log lost", group)


def list_groups(b):
    """ListGroups v0 on b: {group id: protocol type}."""
    with kr.Conn(b.port, timeout=5) as c:
        r = c.request(API_LIST_GROUPS, 0, b"", timeout=5)
    assert r.i16() == 0
    return dict(r.array(lambda x: (x.string(), x.string())))


def test_static_member_replaced_without_rebalance_is_stored_for_the_next_coordinator(
        make_cluster):
    """Kafka's updateStaticMemberAndRebalance stores the group with the new
    member id before answering its JoinGroup: after a failover, the new id
    heartbeats in the same generation (no UNKNOWN_MEMBER_ID, no rejoin), the
    old one is fenced.  The old coordinator, restarted, holds no group it
    does not coordinate (ListGroups)."""
    cluster = start_cluster(make_cluster)
    group, coord_id = coordinated_by(cluster.brokers, None, "static")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    with kr.Conn(coord.port, timeout=10) as c, kr.Conn(coord.port, timeout=10) as c2:
        j = parse_join_v5(c.request(API_JOIN, 5, join_v5(group, instance="inst-1",
                                                          session=20000), timeout=10))
        assert j["err"] == 0 and j["gen"] == 1, j
        old = j["member"]
        assert parse_sync_v3(c.request(API_SYNC, 3, sync_v3(
            group, 1, old, "inst-1", [(old, b"mine")]), timeout=10))[1:] == (0, b"mine")
        j = parse_join_v5(c2.request(API_JOIN, 5, join_v5(group, instance="inst-1",
                                                           session=20000), timeout=10))
        new = j["member"]
        assert (j["err"], j["gen"], j["leader"], j["members"]) == (0, 1, old, []), j
        assert new != old
    assert describe(coord, group) == (0, "Stable", "consumer", "range", {new: b"mine"})

    coord.kill()
    nc = new_coordinator(cluster, group, coord_id)
    assert describe(nc, group) == (0, "Stable", "consumer", "range", {new: b"mine"})
    with kr.Conn(nc.port, timeout=10) as c:
        assert heartbeat(c, group, 1, new, "inst-1") == 0
        assert heartbeat(c, group, 1, old, "inst-1") == 82     # FENCED_INSTANCE_ID
        assert parse_sync_v3(c.request(API_SYNC, 3, sync_v3(group, 1, new, "inst-1")))[1:] \
            == (0, b"mine")
    assert group in list_groups(nc)

    coord.start()
    wait_for(lambda: offsets_in_sync(nc), 30, "the restarted broker back in the ISRs")
    assert agreed_coordinator(cluster.brokers, group) == nc.broker_id
    assert group not in list_groups(coord), "a group of broker %d listed by broker %d" % (
        nc.broker_id, coord_id)
    report("static member %s stored at its replacement: broker %d accepts its heartbeats "
           "after the failover", new, nc.broker_id)


def test_static_member_replacement_that_cannot_be_stored_keeps_the_old_id(make_cluster):
    """The followers of the group's partition stopped: the replacement's
    JoinGroup waits offsets.commit.timeout.ms, then gets
    REBALANCE_IN_PROGRESS (Kafka's mapping of REQUEST_TIMED_OUT) with no
    member id, and the member keeps its old id (Kafka reverts it)."""
    cluster = start_cluster(make_cluster, zk_session_ms=15000,
                            **{"offsets.commit.timeout.ms": "1500"})
    group, coord_id = coordinated_by(cluster.brokers, None, "static-unstored")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    others = [b for b in cluster.brokers if b is not coord]
    with kr.Conn(coord.port, timeout=10) as c, kr.Conn(coord.port, timeout=10) as c2:
        j = parse_join_v5(c.request(API_JOIN, 5, join_v5(group, instance="inst-1",
                                                          session=20000), timeout=10))
        old = j["member"]
        assert parse_sync_v3(c.request(API_SYNC, 3, sync_v3(
            group, 1, old, "inst-1", [(old, b"mine")]), timeout=10))[1:] == (0, b"mine")
        for b in others:
            b.sigstop()
        try:
            t0 = time.monotonic()
            j = parse_join_v5(c2.request(API_JOIN, 5, join_v5(group, instance="inst-1",
                                                               session=20000), timeout=10))
            waited = time.monotonic() - t0
        finally:
            for b in others:
                b.sigcont()
        assert (j["err"], j["member"]) == (REBALANCE_IN_PROGRESS, ""), j
        assert waited >= 1.2, "answered after %.2f s" % waited
        assert heartbeat(c, group, 1, old, "inst-1") == 0
    assert describe(coord, group) == (0, "Stable", "consumer", "range", {old: b"mine"})



def members_of(b, group):
    return set(describe(b, group)[4])


def two_static_members(c1, c2, group):
    """inst-1 on c1 and inst-2 on c2 join and sync (generation 1, assigned
    b"one" and b"two"): their member ids."""
    for c, inst in ((c1, "inst-1"), (c2, "inst-2")):
        c.send(API_JOIN, 5, join_v5(group, instance=inst, session=20000))
    js = [parse_join_v5(c.recv_response(timeout=15)[1]) for c in (c1, c2)]
    assert all(j["err"] == 0 and j["gen"] == 1 for j in js), js
    ids = js[0]["member"], js[1]["member"]
    pairs = sorted(zip((c1, c2), js), key=lambda ca: ca[1]["leader"] != ca[1]["member"])
    asg = dict(zip(ids, (b"one", b"two")))
    assert sync_all(pairs, group, asg) == [(0, asg[a["member"]]) for _c, a in pairs]
    return ids


def replace_both(coord, group, others, n1, n2, old1, old2, resume_before_answers=True):
    """With the followers stopped, inst-1 rejoins on n1 (an empty member
    id), then, once it holds a new id (its record not replicated), inst-2
    on n2: both JoinGroup answers, and the seconds inst-1's took."""
    def answers():
        j1 = parse_join_v5(n1.recv_response(timeout=15)[1])
        waited = time.monotonic() - t0
        return [j1, parse_join_v5(n2.recv_response(timeout=15)[1])], waited
    for b in others:
        b.sigstop()
    try:
        t0 = time.monotonic()
        n1.send(API_JOIN, 5, join_v5(group, instance="inst-1", session=20000))
        wait_for(lambda: old1 not in members_of(coord, group), 10, "inst-1's new id")
        n2.send(API_JOIN, 5, join_v5(group, instance="inst-2", session=20000))
        wait_for(lambda: old2 not in members_of(coord, group), 10, "inst-2's new id")
        if not resume_before_answers:
            return answers()
    finally:
        for b in others:
            b.sigcont()
    return answers()


def test_two_static_members_replaced_at_once_are_both_stored(make_cluster):
    """Two static members rejoin with new ids while the first one's record
    is still being replicated (the followers stopped a moment): as Kafka,
    each replacement is its own storeGroup of the group as it is, so both
    JoinGroups are answered with their new ids, no rebalance, and the
    record the next coordinator loads holds both new ids (their heartbeats
    accepted in the same generation, the old ids fenced)."""
    cluster = start_cluster(make_cluster, zk_session_ms=15000, **JOIN_BOTH)
    group, coord_id = coordinated_by(cluster.brokers, None, "static-two")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    others = [b for b in cluster.brokers if b is not coord]
    with kr.Conn(coord.port, timeout=10) as c1, kr.Conn(coord.port, timeout=10) as c2, \
            kr.Conn(coord.port, timeout=10) as n1, kr.Conn(coord.port, timeout=10) as n2:
        old1, old2 = two_static_members(c1, c2, group)
        (j1, j2), _waited = replace_both(coord, group, others, n1, n2, old1, old2)
        assert (j1["err"], j1["gen"], j1["members"]) == (0, 1, []), j1
        assert (j2["err"], j2["gen"], j2["members"]) == (0, 1, []), j2
        new1, new2 = j1["member"], j2["member"]
        assert new1 not in (old1, old2, "") and new2 not in (old1, old2, "", new1)
        assert heartbeat(c1, group, 1, old1, "inst-1") == 82      # FENCED_INSTANCE_ID
        assert heartbeat(c2, group, 1, old2, "inst-2") == 82
        assert heartbeat(n1, group, 1, new1, "inst-1") == 0
        assert heartbeat(n2, group, 1, new2, "inst-2") == 0
    want = (0, "Stable", "consumer", "range", {new1: b"one", new2: b"two"})
    assert describe(coord, group) == want

    coord.kill()
    nc = new_coordinator(cluster, group, coord_id)
    assert describe(nc, group) == want
    with kr.Conn(nc.port, timeout=10) as c:
        assert heartbeat(c, group, 1, new1, "inst-1") == 0
        assert heartbeat(c, group, 1, new2, "inst-2") == 0
        assert heartbeat(c, group, 1, old1, "inst-1") == 82
        assert heartbeat(c, group, 1, old2, "inst-2") == 82
    report("static members %s and %s, replaced at once, both stored: broker %d accepts "
           "their heartbeats after the failover", new1, new2, nc.broker_id)


def test_two_static_members_replaced_at_once_unstored_both_keep_their_old_ids(make_cluster):
    """As above, but the followers stay stopped past offsets.commit.timeout.ms:
    each replacement fails on its own, after waiting for its record
    (REBALANCE_IN_PROGRESS, no member id, the second's not undoing the
    first's), and each member goes back to its old id, the group Stable as
    before."""
    cluster = start_cluster(make_cluster, zk_session_ms=15000,
                            **dict(JOIN_BOTH, **{"offsets.commit.timeout.ms": "1500"}))
    group, coord_id = coordinated_by(cluster.brokers, None, "static-two-unstored")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    others = [b for b in cluster.brokers if b is not coord]
    with kr.Conn(coord.port, timeout=10) as c1, kr.Conn(coord.port, timeout=10) as c2, \
            kr.Conn(coord.port, timeout=10) as n1, kr.Conn(coord.port, timeout=10) as n2:
        old1, old2 = two_static_members(c1, c2, group)
        js, waited = replace_both(coord, group, others, n1, n2, old1, old2,
                                  resume_before_answers=False)
        assert [(j["err"], j["member"]) for j in js] == [(REBALANCE_IN_PROGRESS, "")] * 2, js
        assert waited >= 1.2, "inst-1 answered after %.2f s" % waited
        assert heartbeat(c1, group, 1, old1, "inst-1") == 0
        assert heartbeat(c2, group, 1, old2, "inst-2") == 0
    assert describe(coord, group) == (0, "Stable", "consumer", "range",
                                      {old1: b"one", old2: b"two"})


def group_rows(b, group):
    """(consumer_groups row, member ids) of group in b's SQL."""
    rows = b.sql("select state, generation, protocol_type, protocol, leader from "
                 "consumer_groups where group_id = '%s'" % group)
    members = b.sql("select member_id, client_id, host, session_timeout_ms, "
                    "rebalance_timeout_ms from group_members where group_id = '%s' "
                    "order by member_id" % group)
    return rows, members


def lag_sql(b, group):
    return {r["partition"]: (r["committed"], r["lag"]) for r in b.sql(
        "select partition, committed, lag from consumer_lag where group_id = '%s'" % group)}


def all_show(brokers, what, fn, want, timeout=15):
    """Waits until fn(b) == want on every broker, one after the other."""
    for b in brokers:
        wait_for(lambda: fn(b) == want, timeout,
                 "broker %d's SQL to show %s %r (has %r)" % (b.broker_id, what, want, fn(b)))


def test_every_replica_sql_shows_the_coordinators_offsets_and_groups_through_a_failover(
        make_cluster):
    """Each replica of a __consumer_offsets partition keeps its SQLite rows
    of the partition's groups as its log says (group_log.c G6): the SQL of
    every broker shows the coordinator's commits, its group rows and an
    OffsetDelete; after the coordinator is SIGKILLed and restarted, every
    broker's SQL shows the commits of the next coordinator, none the old."""
    cluster = start_cluster(make_cluster)
    brokers = cluster.brokers
    t = topic_name("rows")
    fs = ck_admin(brokers[0]).create_topics([NewTopic(t, 2, 3)], operation_timeout=15)
    fs[t].result(timeout=20)
    produce_ok(ck_producer(brokers[0], **{"bootstrap.servers": cluster.bootstrap}), t,
               [{"value": b"m%d" % i, "partition": i % 2} for i in range(20)])
    group, coord_id = coordinated_by(brokers, None, "rows")
    members, _ = coordinated_by(brokers, coord_id, "rows-members")
    coord = cluster.broker(coord_id)
    ready(coord, group)
    ready(coord, members)
    # A burst of commits, larger offsets first: a follower's job keeps one
    # row per partition, the last record's (group_log.c row_slot).
    for k in range(30):
        assert offset_commit_v2(coord, group, t, {0: 100 + k, 1: 200 + k}, -1) == \
            {(t, 0): 0, (t, 1): 0}
    assert offset_commit_v2(coord, group, t, {0: 5, 1: 6}, -1) == {(t, 0): 0, (t, 1): 0}
    with kr.Conn(coord.port, timeout=15) as c:
        (_c, j), = join_group([c], members, session=600000)
        assert sync_all([(c, j)], members, {j["member"]: b"mine"}) == [(0, b"mine")]
    t0 = time.monotonic()
    all_show(brokers, "the commits", lambda b: committed_sql(b, group), {0: 5, 1: 6})
    seen = time.monotonic() - t0
    all_show(brokers, "the lag", lambda b: lag_sql(b, group), {0: (5, 5), 1: (6, 4)})
    want_group = ([{"state": "Stable", "generation": j["gen"], "protocol_type": "consumer",
                    "protocol": "range", "leader": j["member"]}], group_rows(coord, members)[1])
    assert group_rows(coord, members)[0] == want_group[0]
    assert [m["member_id"] for m in want_group[1]] == [j["member"]]
    all_show(brokers, "the group", lambda b: group_rows(b, members), want_group)

    # OffsetDelete: its tombstone removes the row on the followers too.
    with kr.Conn(coord.port, timeout=5) as c:
        body = kr.string(group) + kr.array([kr.string(t) + kr.array([kr.i32(0)])])
        r = c.request(API_OFFSET_DELETE, 0, body, timeout=5)
        assert r.i16() == 0
    all_show(brokers, "the OffsetDelete", lambda b: committed_sql(b, group), {1: 6})

    coord.kill()
    rest = [b for b in brokers if b is not coord]
    new = new_coordinator(cluster, group, coord_id)
    assert offset_commit_v2(new, group, t, {0: 9, 1: 10}, -1) == {(t, 0): 0, (t, 1): 0}
    all_show(rest, "the new coordinator's commits", lambda b: committed_sql(b, group),
             {0: 9, 1: 10})
    coord.start()
    t1 = time.monotonic()
    all_show(brokers, "the new coordinator's commits", lambda b: committed_sql(b, group),
             {0: 9, 1: 10}, timeout=30)
    restarted = time.monotonic() - t1
    all_show(brokers, "the lag", lambda b: lag_sql(b, group), {0: (9, 1), 1: (10, 0)})
    all_show(brokers, "the group", lambda b: group_rows(b, members), want_group)
    assert agreed_coordinator(brokers, group) == new.broker_id
    report("followers' SQL showed the commits %.2f s after they were answered; broker %d, "
           "SIGKILLed and restarted, showed the next coordinator's %.2f s after its start",
           seen, coord_id, restarted)
