"""Where new partitions go and how they start (issue 28): a new partition's
ISR is every live assigned replica, so acks=all succeeds the moment
CreateTopics or CreatePartitions answers (kafka-python with retries=0), and
with broker.rack on every broker Kafka's rack-aware assignment fills every
replica slot, __consumer_offsets included, so consumer groups work."""
import collections
import time

import pytest

from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

import kafka_raw as kr
from cluster_support import cluster, leader_and_isr, make_cluster, wait_for, zk  # noqa: F401
from support import ck_admin, ck_consumer, ck_producer, kp_common, kp_producer, produce_ok, topic_name
from test_cluster import led_everywhere, wait_formed
from test_replication_lead import batch, consumer_fetch, produce

MIN_ISR = {"min.insync.replicas": "2"}


def kp_admin(b):
    from kafka import KafkaAdminClient
    return KafkaAdminClient(**kp_common(b))


def test_acks_all_right_after_create_topics_and_create_partitions(cluster):
    """RF 3, min.insync.replicas=2: the first acks=all produce after
    CreateTopics (kafka-python admin) and after CreatePartitions is
    acknowledged, with no retry to hide a NOT_ENOUGH_REPLICAS."""
    from kafka.admin import NewPartitions, NewTopic as KNewTopic
    wait_formed(cluster)
    b = cluster.brokers[0]
    admin = kp_admin(b)
    producer = kp_producer(b, retries=0, request_timeout_ms=20000)
    try:
        for i in range(4):
            t = topic_name("insync%d" % i)
            admin.create_topics([KNewTopic(t, 3, 3, topic_configs=MIN_ISR)], timeout_ms=15000)
            md = producer.send(t, value=b"first", partition=i % 3).get(timeout=30)
            assert (md.partition, md.offset) == (i % 3, 0)
        admin.create_partitions({t: NewPartitions(5)}, timeout_ms=15000)
        # kafka-python refuses a partition its metadata lacks: a producer
        # started now asks for the topic's metadata afresh.
        grown = kp_producer(b, retries=0, request_timeout_ms=20000)
        try:
            for p in (3, 4):
                md = grown.send(t, value=b"grown", partition=p).get(timeout=30)
                assert (md.partition, md.offset) == (p, 0)
        finally:
            grown.close()
    finally:
        producer.close()
        admin.close()
    # Every new partition was created in sync: ISR = all three replicas.
    parts = wait_for(lambda: led_everywhere(cluster.brokers, t, 5), 10, "%s led" % t)
    for p, (_err, _leader, replicas, isr) in parts.items():
        assert sorted(isr) == sorted(replicas) and len(replicas) == 3, (p, replicas, isr)


def test_acks_all_right_after_auto_create_sql_create_and_first_group_commit(make_cluster):
    """Brokers defaulting to RF 3 and min.insync.replicas=2: a topic
    auto-created by kafka-python's first send, five made by SQL, and
    __consumer_offsets made by a group's first FindCoordinator all take an
    acks=all write (a produce with retries=0, a commit) at once.  The
    previous binary refused a SQL-made topic's first write in every run."""
    c = make_cluster(3, overrides={"default.replication.factor": "3",
                                   "min.insync.replicas": "2"})
    wait_formed(c)
    b = c.brokers[1]
    producer = kp_producer(b, retries=0, request_timeout_ms=20000)
    try:
        auto = topic_name("auto")
        md = producer.send(auto, value=b"first").get(timeout=30)
        assert md.offset == 0
        for i in range(5):
            made = topic_name("sqlmade%d" % i)
            b.sql("INSERT INTO topics (name, partitions, replication_factor) "
                  "VALUES ('%s', 2, 3)" % made)
            md = producer.send(made, value=b"first", partition=1).get(timeout=30)
            assert (md.partition, md.offset) == (1, 0)
    finally:
        producer.close()
    cons = ck_consumer(b, **{"group.id": topic_name("firstcommit")})
    try:
        # COORDINATOR_LOAD_IN_PROGRESS is Kafka's retriable "the coordinator's
        # partition of __consumer_offsets, made by this very FindCoordinator,
        # is still loading" (seen under ASan beside another test); any other
        # refusal fails here as before.
        deadline = time.monotonic() + 20
        while True:
            try:
                cons.commit(offsets=[TopicPartition(auto, 0, 1)], asynchronous=False)
                break
            except KafkaException as e:
                if (e.args[0].code() != KafkaError.COORDINATOR_LOAD_IN_PROGRESS
                        or time.monotonic() > deadline):
                    raise
                time.sleep(0.2)
        assert [tp.offset for tp in cons.committed([TopicPartition(auto, 0)], timeout=20)] == [1]
    finally:
        cons.close()
    for t in (auto, made):
        parts = wait_for(lambda t=t: led_everywhere(c.brokers, t, 2 if t == made else 1), 10,
                         "%s led" % t)
        assert all(len(r) == 3 for _e, _l, r, _i in parts.values()), parts


def test_followers_in_the_isr_that_never_fetched_hold_the_high_watermark(make_cluster):
    """The followers of a new partition are in its ISR before their first
    fetch: until they fetch, the leader serves nothing of what it appended
    (the high watermark stays 0) and an acks=all produce waits; once they
    fetch, both move.  The followers are SIGSTOPped before the topic is
    made, within their (long) session, so they stay live and assigned."""
    c = make_cluster(3, session_timeout_ms=30000)
    ctl = wait_formed(c)
    leader = c.broker(ctl)
    others = [b for b in c.brokers if b is not leader]
    ids = [ctl] + [b.broker_id for b in others]
    t = topic_name("unfetched")
    for b in others:
        b.sigstop()
    try:
        ck_admin(leader).create_topics([NewTopic(t, num_partitions=1, replica_assignment=[ids])],
                                       operation_timeout=20)[t].result(timeout=30)
        wait_for(lambda: leader_and_isr(leader, t) == (ctl, tuple(ids)), 20,
                 "%s led by %d with ISR %s" % (t, ctl, ids))
        with kr.Conn(leader.port) as p, kr.Conn(leader.port) as cons:
            assert produce(p, t, 2, acks=1) == (0, 0)
            for _ in range(3):
                assert consumer_fetch(cons, t, 0)[:3] == (0, 0, b"")
                time.sleep(0.2)
            corr = p.send(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch(1), -1, 20000))
            with pytest.raises(kr.Timeout):
                p.recv_response(timeout=0.5)
            for b in others:
                b.sigcont()
            got, r = p.recv_response(timeout=15)
            assert got == corr
            assert [(e, base) for _t, _p, e, base, _l in kr.parse_produce_v3(r)] == [(0, 2)]
            wait_for(lambda: consumer_fetch(cons, t, 0)[1] == 3, 10, "the high watermark at 3")
    finally:
        for b in others:
            b.sigcont()


def rack_cluster(make_cluster):
    c = make_cluster(3, start=False)
    racks = {1: "rack-c", 2: "rack-a", 3: "rack-b"}
    for b in c.brokers:
        b.overrides["broker.rack"] = racks[b.broker_id]
    c.start()
    wait_formed(c)
    return c, racks


def assert_spread(c, racks, t, n):
    parts = wait_for(lambda: led_everywhere(c.brokers, t, n), 20, "every partition of %s led" % t)
    for p, (_err, leader, replicas, _isr) in parts.items():
        assert sorted(replicas) == [1, 2, 3] and replicas[0] == leader, (t, p, replicas)
        assert {racks[r] for r in replicas} == set(racks.values()), (t, p, replicas)
    leaders = collections.Counter(l for _e, l, _r, _i in parts.values())
    assert max(leaders.values()) - min(leaders.values()) <= 1, (t, leaders)


def test_rack_aware_rf3_topics_and_consumer_offsets(make_cluster):
    """Three brokers on three racks: RF 3 topics of 12 and 50 partitions by
    CreateTopics and by SQL, and 5 partitions added by CreatePartitions,
    get every replica slot filled, one per rack,
    and a consumer group (whose coordinator needs __consumer_offsets, 50
    partitions of RF 3) subscribes, consumes, commits and reads its
    committed offsets back."""
    c, racks = rack_cluster(make_cluster)
    b = c.brokers[0]
    for n in (12, 50):
        t = topic_name("racks%d" % n)
        fs = ck_admin(b).create_topics([NewTopic(t, num_partitions=n, replication_factor=3)],
                                       operation_timeout=20)
        fs[t].result(timeout=30)
        assert_spread(c, racks, t, n)
        if n == 12:                               # grown later: the same spread
            ck_admin(b).create_partitions([NewPartitions(t, 17)], operation_timeout=20)[t] \
                .result(timeout=30)
            assert_spread(c, racks, t, 17)
        s = "sqlracks%d" % n
        c.brokers[1].sql("INSERT INTO topics (name, partitions, replication_factor) "
                         "VALUES ('%s', %d, 3)" % (s, n))
        assert_spread(c, racks, s, n)

    t = topic_name("rackgroup")
    ck_admin(b).create_topics([NewTopic(t, num_partitions=3, replication_factor=3)],
                              operation_timeout=20)[t].result(timeout=30)
    p = ck_producer(b, acks="all")
    produce_ok(p, t, [{"value": b"m%d" % i, "partition": i % 3} for i in range(30)])
    g = topic_name("rackgroup")
    cons = ck_consumer(b, **{"group.id": g})
    try:
        cons.subscribe([t])
        got = []
        deadline_polls = 120
        while len(got) < 30 and deadline_polls:
            deadline_polls -= 1
            m = cons.poll(1.0)
            if m is not None and not m.error():
                got.append(m)
                cons.store_offsets(message=m)
        assert len(got) == 30, "consumed %d of 30" % len(got)
        cons.commit(asynchronous=False)
        committed = cons.committed([TopicPartition(t, i) for i in range(3)], timeout=20)
        assert {tp.partition: tp.offset for tp in committed} == {0: 10, 1: 10, 2: 10}
    finally:
        cons.close()
    assert_spread(c, racks, "__consumer_offsets", 50)
