"""Replication, the follower side (issue 16, first slice): every broker
that hosts a replica of a partition led elsewhere copies it from its
leader with Kafka's Fetch (ReplicaId = its broker.id), batch for batch.

What the tests check, as an operator would: each follower's local log
reaches the leader's log end offset (SQL `partitions` on that broker), and
once the brokers are stopped the replicas' segment files are identical
byte for byte, since followers store the leader's batches as they are,
with the leader's offsets.  A follower killed while producers go on comes
back and catches up to the same bytes.

Catch-up times and bytes replicated are printed with support.report.
"""
import filecmp
import os
import time

import pytest
from confluent_kafka.admin import NewTopic

from cluster_support import make_cluster, timed, wait_for, zk, zk_missing  # noqa: F401
from retention_support import metric
from support import ck_admin, ck_producer, produce_ok, report, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)


def formed(c):
    """Every broker lists all of them."""
    ids = {b.broker_id for b in c.brokers}
    wait_for(lambda: all({int(r["id"]) for r in b.sql("select id from brokers where alive = 1")}
                         == ids for b in c.brokers),
             c.session_timeout_s + 10, "brokers %s to list each other" % sorted(ids))


def create(c, name, partitions, replication_factor=3, replica_assignment=None):
    kw = ({"replica_assignment": replica_assignment} if replica_assignment
          else {"replication_factor": replication_factor})
    fs = ck_admin(c.brokers[0]).create_topics([NewTopic(name, partitions, **kw)],
                                              operation_timeout=15)
    fs[name].result(timeout=20)


def local_ends(b, topic):
    """{partition: (leader, log end offset)} of broker b's own replicas."""
    rows = b.sql("select partition, leader, log_end_offset from partitions where topic = '%s'"
                 % topic)
    return {int(r["partition"]): (int(r["leader"]), r["log_end_offset"]) for r in rows}


def replicas_level(brokers, topic, partitions, want=None):
    """{partition: log end} once the replicas on brokers of each partition
    have the same log end (and, with want, that one); else None."""
    views = [local_ends(b, topic) for b in brokers]
    ends = {}
    for p in range(partitions):
        seen = {v[p][1] for v in views if p in v}
        leader = views[0][p][0] if p in views[0] else -1
        if len(seen) != 1 or None in seen or leader < 0:
            return None
        ends[p] = seen.pop()
        if want is not None and ends[p] != want[p]:
            return None
    return ends


def segment_files(b, topic, partition):
    d = b.partition_dir(topic, partition)
    return sorted(f for f in os.listdir(d) if f.endswith(".log"))


def assert_identical_replicas(c, topic, partitions):
    """After a clean stop: every replica's .log files are the same files
    with the same bytes as the first broker's.  Returns the bytes compared."""
    total = 0
    for p in range(partitions):
        ref = c.brokers[0]
        names = segment_files(ref, topic, p)
        for b in c.brokers[1:]:
            assert segment_files(b, topic, p) == names, (p, b.broker_id)
            for n in names:
                a = os.path.join(ref.partition_dir(topic, p), n)
                o = os.path.join(b.partition_dir(topic, p), n)
                assert filecmp.cmp(a, o, shallow=False), \
                    "partition %d, %s differs between brokers %d and %d (%d vs %d bytes)" % (
                        p, n, ref.broker_id, b.broker_id, os.path.getsize(a), os.path.getsize(o))
        total += ref.log_bytes(topic, p)
    return total


def messages(n, partitions, size=200):
    return [{"value": (b"%08d-" % i) + b"x" * size, "partition": i % partitions}
            for i in range(n)]


def stop_all(c):
    for b in c.brokers:
        b.stop()


def restart_to_catch_up(c, follower, t, parts, ends, interval, caught_up=None):
    """Starts the stopped follower, waits for every replica at ends (then
    calls caught_up()), stops the cluster and compares the replicas:
    (seconds to catch up, bytes)."""
    t0 = time.monotonic()
    follower.start()
    wait_for(lambda: replicas_level(c.brokers, t, parts, ends), 30,
             "restarted broker %d to catch up to %s" % (follower.broker_id, ends),
             interval=interval)
    took = time.monotonic() - t0
    if caught_up:
        caught_up()
    stop_all(c)
    return took, assert_identical_replicas(c, t, parts)


def test_followers_copy_every_batch_of_their_leaders(make_cluster):
    """Six partitions on three brokers: each broker follows two from each
    other broker, in one request per leader."""
    c = make_cluster(3)
    formed(c)
    t, parts, n = topic_name("follow"), 6, 3000
    create(c, t, parts)
    wait_for(lambda: replicas_level(c.brokers, t, parts), 15, "the replicas of %s to open" % t)
    t0 = time.monotonic()
    produce_ok(ck_producer(c.brokers[0], acks=1, **{"linger.ms": 5}), t, messages(n, parts))
    produced_s = time.monotonic() - t0
    want = {p: n // parts for p in range(parts)}
    took, _ = timed(lambda: replicas_level(c.brokers, t, parts, want), 30,
                    "every replica of %s to reach its leader's log end %s" % (t, want))
    stop_all(c)
    copied = assert_identical_replicas(c, t, parts)
    report("replicated %d log bytes (%d messages) to each of 2 followers; followers "
           "level %.2f s after the last acks=1 answer (producing took %.2f s)",
           copied, n, took, produced_s)


def test_killed_follower_catches_up_to_the_same_bytes(make_cluster):
    """Broker 3 follows both partitions and leads none, so killing it moves
    no leader; producers keep going to brokers 1 and 2 meanwhile."""
    c = make_cluster(3)
    formed(c)
    t, parts = topic_name("catchup"), 2
    create(c, t, parts, replica_assignment=[[1, 2, 3], [2, 1, 3]])
    wait_for(lambda: replicas_level(c.brokers, t, parts), 15, "the replicas of %s to open" % t)
    p = ck_producer(c.brokers[0], acks=1, **{"linger.ms": 5})
    produce_ok(p, t, messages(1000, parts))
    wait_for(lambda: replicas_level(c.brokers, t, parts, {0: 500, 1: 500}), 30,
             "every replica of %s at 500" % t)
    follower = c.broker(3)
    follower.kill()
    produce_ok(p, t, messages(2000, parts))
    ends = wait_for(lambda: replicas_level(c.brokers[:2], t, parts, {0: 1500, 1: 1500}), 30,
                    "brokers 1 and 2 to level %s at 1500" % t)
    behind = 2000
    took, copied = restart_to_catch_up(c, follower, t, parts, ends, 0.02)
    report("a follower killed mid-stream caught up %d messages (%d log bytes in all) "
           "%.2f s after its restart began", behind, copied, took)


def test_topic_deleted_and_recreated_under_long_polls_is_followed_afresh(make_cluster):
    """Followers' fetches long-poll when nothing is produced; the topic is
    deleted and created again under the same name meanwhile.  The answers
    in flight for the old topic must not touch the new one: each follower
    ends with the new topic's bytes only, identical to its leader's."""
    c = make_cluster(3)
    formed(c)
    t, parts = topic_name("recreate"), 3
    create(c, t, parts)
    wait_for(lambda: replicas_level(c.brokers, t, parts), 15, "the replicas of %s to open" % t)
    p = ck_producer(c.brokers[0], acks=1)
    produce_ok(p, t, messages(600, parts))
    wait_for(lambda: replicas_level(c.brokers, t, parts, {q: 200 for q in range(parts)}), 30,
             "every replica of %s at 200" % t)
    fs = ck_admin(c.brokers[0]).delete_topics([t], operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: all(not local_ends(b, t) for b in c.brokers), 15,
             "every broker to drop %s" % t)
    create(c, t, parts)
    wait_for(lambda: replicas_level(c.brokers, t, parts), 15, "the new %s to open" % t)
    p = ck_producer(c.brokers[0], acks=1)
    produce_ok(p, t, messages(90, parts, size=50))
    wait_for(lambda: replicas_level(c.brokers, t, parts, {q: 30 for q in range(parts)}), 30,
             "every replica of the new %s at 30" % t)
    for b in c.brokers:
        b.assert_alive()
    stop_all(c)
    assert_identical_replicas(c, t, parts)


def test_follower_catches_up_through_answers_of_many_megabytes(make_cluster):
    """A follower that comes back 24 MiB behind gets answers far larger than
    one socket read (replica.fetch.max.bytes 4 MiB per partition): each is
    read in pieces, the socket waking only once much of the rest is there
    (fetcher.c F8), and the copy must still be the leader's, byte for byte.
    Far behind, the follower asks for the next answer before appending one
    (repl_fetcher.c F10): its /metrics count such fetches, and no answer it had to drop."""
    c = make_cluster(3, overrides={"replica.fetch.max.bytes": "4194304"})
    formed(c)
    t, parts = topic_name("bigcatchup"), 2
    create(c, t, parts, replica_assignment=[[1, 2, 3], [2, 1, 3]])
    wait_for(lambda: replicas_level(c.brokers, t, parts), 15, "the replicas of %s to open" % t)
    follower = c.broker(3)
    follower.kill()
    p = ck_producer(c.brokers[0], acks=1, **{"linger.ms": 5})
    n = 240
    produce_ok(p, t, messages(n, parts, size=100 * 1024))
    want = {q: n // parts for q in range(parts)}
    wait_for(lambda: replicas_level(c.brokers[:2], t, parts, want), 30,
             "brokers 1 and 2 to level %s at %s" % (t, want))
    # Out of the ISR (its session expired), so the high watermark went on
    # without it and it comes back far below it; an ISR member's fetches
    # move the high watermark and never go ahead.
    wait_for(lambda: all("3" not in r["isr"].split(",") for r in c.brokers[0].sql(
        "select isr from partitions where topic = '%s'" % t)), c.session_timeout_s + 30,
             "broker 3 to leave the ISR of %s" % t)
    counted = {}

    def count():
        for name in ("sluice_replica_fetches_ahead_total",
                     "sluice_replica_fetch_answers_dropped_total"):
            counted[name] = metric(follower, name)
    took, copied = restart_to_catch_up(c, follower, t, parts, want, 0.05, count)
    assert counted["sluice_replica_fetches_ahead_total"] >= 1, counted
    assert counted["sluice_replica_fetch_answers_dropped_total"] == 0, counted
    report("a follower 24 MiB behind caught up (%d log bytes in all) %.2f s after its "
           "restart began", copied, took)
