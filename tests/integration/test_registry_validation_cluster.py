"""Schema validation in cluster mode (issue 31): each partition's leader
checks produced records against its own copy of the registry (replicated
from _schemas), so a schema registered through any broker is accepted by
every leader once that copy has it, and a record that does not carry a
registered id is refused by every leader."""
from cluster_support import make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_conf, consume, topic_name
from test_registry_cluster import reg_cluster, register_anywhere  # noqa: F401
from test_registry_validation import (CORRUPT_MESSAGE, INVALID_RECORD, ORDER, encode,
                                      raw_produce_version, wire)


def deliver(p, topic, partition, value):
    """The delivery error code of one value (None: stored)."""
    got = []
    p.produce(topic, value=value, partition=partition,
              on_delivery=lambda err, msg: got.append(err.code() if err else None))
    p.flush(30)
    return got[0] if got else "undelivered"


def test_every_leader_checks_with_its_copy_of_the_registry(reg_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    c = reg_cluster
    t = topic_name("svc")
    fs = ck_admin(c.brokers[0]).create_topics([NewTopic(
        t, num_partitions=3, replication_factor=3,
        config={"confluent.value.schema.validation": "true"})], request_timeout=15)
    for f in fs.values():
        f.result(timeout=30)
    _, sid = register_anywhere(c, t + "-value", ORDER)
    p = Producer(ck_conf(c.brokers[0], **{"bootstrap.servers": c.bootstrap, "retries": 0}))
    good = [wire(sid, encode(ORDER, {"id": i, "item": "p%d" % i})) for i in range(3)]
    for part in range(3):
        # each leader's copy takes a tail turn (200 ms) and replication to have it
        wait_for(lambda part=part: deliver(p, t, part, good[part]) is None, 15,
                 "partition %d's leader to accept schema id %d" % (part, sid))
    # librdkafka 2.0 sends Produce v7: CORRUPT_MESSAGE, as Kafka answers it
    refused = INVALID_RECORD if raw_produce_version() >= 8 else CORRUPT_MESSAGE
    for part in range(3):
        assert deliver(p, t, part, b"no schema id") == refused
        assert deliver(p, t, part, wire(sid + 100, b"")) == refused
    for part in range(3):
        got = consume(c.brokers[0], t, [part], 1)
        assert [m.value() for m in got] == [good[part]]
