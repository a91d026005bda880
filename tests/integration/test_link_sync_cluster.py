"""Consumer offset sync with a multi-broker source (issue 33 Deliver 3;
daemon/link/link_sync.c S8): the source is a real 3-broker Sluice cluster
on ZooKeeper, whose groups are coordinated by different brokers; the
destination a standalone broker whose link lists all three bootstrap
servers.

What a user checks: several confluent_kafka groups that consumed part of
a topic on the source (committing each message), whose coordinators are
different source brokers, all have their committed offsets at the
destination; after the mirror fails over each group resumes there and
re-reads nothing, skips nothing, and together with what it read on the
source gets every message back once, bytes equal.  A group coordinator
SIGKILLed at the source: its groups move, the sync finds them at their
new coordinator.
"""
import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

from cluster_support import live_brokers, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_consumer, ck_producer, create_topic, report, topic_name
from test_link import batches, link_source, mirror, sql
from test_cluster_groups import agreed_coordinator
from test_link_sync import SYNC, committed, consume, link_row

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

SESSION_MS = 3000
CONFIG = SYNC + "metadata.max.age.ms=1000\nreconnect.backoff.ms=200\nreconnect.backoff.max.ms=2000"
PARTS, PER_PART = 3, 60


def source_cluster(make_cluster):
    c = make_cluster(3, session_timeout_ms=SESSION_MS)
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "every source broker to list three live brokers")
    return c


def coordinators(c, groups):
    """{group: the source broker coordinating it, as the live ones agree}."""
    live = [b for b in c.brokers if b.alive()]
    return {g: agreed_coordinator(live, g) for g in groups}


def committed_via(c, group, topic):
    """The group's committed offsets as a consumer of c (a broker or a
    cluster) reads them."""
    k = ck_consumer(c, **{"group.id": group, "bootstrap.servers": c.bootstrap})
    try:
        tps = k.committed([TopicPartition(topic, p) for p in range(PARTS)], timeout=15)
    finally:
        k.close()
    return {tp.partition: tp.offset for tp in tps if tp.offset >= 0}


def value(i):
    return b"v%05d-" % i + bytes(range(i % 50))


def test_groups_of_every_source_coordinator_are_synced_and_resume_here(make_cluster,
                                                                        start_broker):
    c = source_cluster(make_cluster)
    dest = start_broker()
    t = topic_name("csync")
    fs = ck_admin(c).create_topics([NewTopic(t, PARTS, 3)], operation_timeout=15)
    fs[t].result(timeout=20)
    p = ck_producer(c)
    for i in range(PARTS * PER_PART):
        p.produce(t, value=value(i), partition=i % PARTS)
    assert p.flush(30) == 0
    # Groups until three have different coordinators (a group's coordinator
    # is its __consumer_offsets partition's leader); each consumes its own
    # share on the source, committing each message.
    groups, first = [], {}
    for i in range(12):
        g = "grp-%s-%d" % (t, i)
        first[g] = consume(c, g, t, n=20 + 7 * i)
        groups.append(g)
        if i >= 2 and len(set(coordinators(c, groups).values())) == 3:
            break
    coord = coordinators(c, groups)
    report("%d groups, coordinated by source brokers %s", len(groups),
           sorted(set(coord.values())))
    assert len(set(coord.values())) >= 2, coord

    link_source(dest, c, config=CONFIG)
    assert mirror(dest, t)[0] == 200
    for part in range(PARTS):
        wait_for(lambda part=part: batches(dest, t, part)[1] == PER_PART, 60,
                 "%s-%d mirrored" % (t, part))
    want = {g: committed_via(c, g, t) for g in groups}
    wait_for(lambda: all(committed(dest, g, t) == want[g] for g in groups), 30,
             "every group's offsets synced: %s" % want)

    # A coordinator dies: its groups move to another source broker; a group
    # it coordinated commits more there and the sync finds it.
    victim = c.broker(coord[groups[0]])
    victim.kill()
    wait_for(lambda: coordinators(c, [groups[0]])[groups[0]] != victim.broker_id,
             SESSION_MS / 1000 + 30, "group %s's coordinator moved" % groups[0])
    first[groups[0]] += consume(c, groups[0], t, n=15)
    want[groups[0]] = committed_via(c, groups[0], t)
    wait_for(lambda: committed(dest, groups[0], t) == want[groups[0]], 30,
             "group %s synced from its new coordinator" % groups[0])
    victim.start()
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "broker %d back" % victim.broker_id)
    wait_for(lambda: link_row(dest)[1:3] == (len(groups), None), 30,
             "a sync round of every group with no error")

    st, got = sql(dest, "UPDATE mirror_topics SET state = 'failed_over' WHERE topic = '%s'" % t)
    assert st == 200, got
    _, synced, error, _ = link_row(dest)
    assert synced == len(groups) and error is None, (synced, error)
    everything = {(part, o): value(o * PARTS + part) for part in range(PARTS)
                  for o in range(PER_PART)}
    reread = skipped = 0
    for g in groups:
        second = consume(dest, g, t)
        one = {(x, o) for x, o, _ in first[g]}
        two = {(x, o) for x, o, _ in second}
        reread += len(one & two)
        skipped += len(set(everything) - one - two)
        # every message back, bytes equal, from the two halves together
        assert {(x, o): v for x, o, v in first[g] + second} == everything, g
    report("%d groups failed over to the destination: re-read %d, skipped %d",
           len(groups), reread, skipped)
    assert skipped == 0 and reread == 0


def test_a_cluster_destination_stores_each_group_through_its_coordinator(make_cluster,
                                                                          start_broker):
    """A 3-broker destination, mirror partitions of replication factor 1:
    each group's coordinator here holds one of the three at most.  Every
    broker runs the link; each stores the groups it coordinates
    (link_sync.c S9), asking the leader of a partition it holds no replica
    of for its high watermark (link_sync.c S11).  A consumer of the
    destination sees every partition's synced offset through any broker,
    and after that coordinator's SIGKILL through its successor."""
    src = start_broker()
    dest = make_cluster(3, session_timeout_ms=SESSION_MS,
                        overrides={"default.replication.factor": "1"})
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in dest.brokers), 30,
             "every destination broker to list three live brokers")
    t = topic_name("dsync")
    create_topic(src, t, partitions=PARTS)
    p = ck_producer(src)
    for i in range(PARTS * PER_PART):
        p.produce(t, value=value(i), partition=i % PARTS)
    assert p.flush(30) == 0
    groups = ["grp-%s-%d" % (t, i) for i in range(4)]
    for i, g in enumerate(groups):       # a part of every partition, as committed
        k = ck_consumer(src, **{"group.id": g})
        k.commit(offsets=[TopicPartition(t, x, 10 + 5 * i + x) for x in range(PARTS)],
                 asynchronous=False)
        k.close()
    want = {g: committed_via(src, g, t) for g in groups}
    assert all(len(w) == PARTS for w in want.values()), want
    b1 = dest.brokers[0]
    link_source(b1, src, config=CONFIG)
    assert mirror(b1, t)[0] == 200

    def seen(b, g):
        return committed_via(b, g, t)

    for b in dest.brokers:
        wait_for(lambda b=b: all(seen(b, g) == want[g] for g in groups), 60,
                 "every group's offsets seen through broker %d: %s" % (b.broker_id, want))
    # link_sync.c S1 through a leader: the mirror paused (it holds PER_PART a partition),
    # the source goes on and a group commits past that; every partition's
    # offset here is clamped to the mirror's end, whichever broker leads it
    def mirrored(x):
        for b in dest.brokers:           # the leader answers
            try:
                if batches(b, t, x)[1] == PER_PART:
                    return True
            except (AssertionError, OSError, ConnectionError, ValueError):
                pass
        return False

    for x in range(PARTS):
        wait_for(lambda x=x: mirrored(x), 60, "%s-%d mirrored" % (t, x))
    st, got = sql(b1, "UPDATE mirror_topics SET state = 'paused' WHERE topic = '%s'" % t)
    assert st == 200, got
    wait_for(lambda: all(sql(b, "SELECT state FROM mirror_topics")[1] == [{"state": "paused"}]
                         for b in dest.brokers), 20, "the mirror paused on every broker")
    for i in range(PARTS * 20):
        p.produce(t, value=value(PARTS * PER_PART + i), partition=i % PARTS)
    assert p.flush(30) == 0
    ahead = groups[-1]
    k = ck_consumer(src, **{"group.id": ahead})
    k.commit(offsets=[TopicPartition(t, x, PER_PART + 10) for x in range(PARTS)],
             asynchronous=False)
    k.close()
    for b in dest.brokers:
        wait_for(lambda b=b: seen(b, ahead) == {x: PER_PART for x in range(PARTS)}, 60,
                 "group %s clamped to the mirror's end through broker %d" % (ahead, b.broker_id))
    want[ahead] = {x: PER_PART for x in range(PARTS)}
    coord = coordinators(dest, groups)
    report("cluster destination: %d groups, coordinated by brokers %s, every partition's "
           "offset seen through each of the 3 brokers", len(groups), sorted(set(coord.values())))
    victim = dest.broker(coord[groups[0]])
    victim.kill()
    rest = [b for b in dest.brokers if b is not victim]
    wait_for(lambda: coordinators(dest, [groups[0]])[groups[0]] not in (None, victim.broker_id),
             SESSION_MS / 1000 + 30, "group %s's coordinator moved" % groups[0])
    for b in rest:
        wait_for(lambda b=b: seen(b, groups[0]) == want[groups[0]], 60,
                 "group %s's offsets through broker %d after its coordinator died"
                 % (groups[0], b.broker_id))
