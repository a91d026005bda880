"""Where new partitions go and how they start (issue 28): a new partition's
ISR is every live assigned replica, so acks=all succeeds the moment
CreateTopics or CreatePartitions answers (kafka-python with retries=0), and
with broker.rack on every broker Kafka's rack-aware assignment fills every
replica slot, __consumer_offsets included, so consumer groups work."""
import collections

from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewPartitions, NewTopic

from cluster_support import cluster, make_cluster, wait_for, zk  # noqa: F401 (fixtures)
from support import ck_admin, ck_consumer, ck_producer, kp_common, kp_producer, produce_ok, topic_name
from test_cluster import led_everywhere, partitions_seen, wait_formed

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
