"""Real clients at both ends of the group APIs' version ranges:
kafka-python pinned to old broker versions (OffsetCommit v2/v1/v0 and
OffsetFetch v1/v0, kafka/coordinator/consumer.py) commits and reads back
its offsets; librdkafka's consumer-group admin calls (through ctypes:
rdkafka_admin.py) list a group's committed offsets for all partitions,
list and describe groups with their real states, and delete a group's
offsets."""
import time

import pytest
from confluent_kafka import TopicPartition as CkTopicPartition

import rdkafka_admin
from support import ck_consumer, ck_producer, create_topic, produce_ok, topic_name

GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


@pytest.mark.parametrize("api_version", [(0, 10), (0, 8, 2), (0, 8, 1)])
def test_kafka_python_pinned_to_an_old_version_commits_and_fetches_offsets(broker, api_version):
    from kafka import KafkaConsumer, TopicPartition
    from kafka.structs import OffsetAndMetadata
    t = topic_name("old")
    create_topic(broker, t, partitions=2)
    group = "kp-%s" % "-".join(map(str, api_version))
    tps = [TopicPartition(t, 0), TopicPartition(t, 1)]
    c = KafkaConsumer(bootstrap_servers=[broker.bootstrap], group_id=group,
                      api_version=api_version, enable_auto_commit=False,
                      request_timeout_ms=15000, session_timeout_ms=10000,
                      consumer_timeout_ms=1000)
    try:
        c.assign(tps)
        c.commit({tps[0]: OffsetAndMetadata(5, "five"), tps[1]: OffsetAndMetadata(7, "")})
        got = c._coordinator.fetch_committed_offsets(tps)
        assert {tp: (o.offset, o.metadata) for tp, o in got.items()} == \
            {tps[0]: (5, "five"), tps[1]: (7, "")}
    finally:
        c.close()
    # the same offsets through a current client (OffsetFetch at its version)
    ck = ck_consumer(broker, **{"group.id": group})
    try:
        got = ck.committed([CkTopicPartition(t, 0), CkTopicPartition(t, 1)], timeout=15)
        assert [(p.partition, p.offset) for p in got] == [(0, 5), (1, 7)]
    finally:
        ck.close()


def wait_stable_member(b, group, topic, timeout=30.0):
    """A confluent-kafka consumer subscribed to topic, polled until it owns
    its partitions (the group is Stable)."""
    c = ck_consumer(b, **{"group.id": group, "session.timeout.ms": 10000})
    c.subscribe([topic])
    deadline = time.monotonic() + timeout
    while not c.assignment():
        assert time.monotonic() < deadline, "consumer got no assignment"
        c.poll(0.2)
    return c


def test_librdkafka_group_admin_calls(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    t = topic_name("adm")
    create_topic(b, t, partitions=3)
    produce_ok(ck_producer(b), t, [{"value": b"v%d" % i, "partition": i % 3} for i in range(6)])
    # an Empty group with committed offsets, and a Stable one
    idle = ck_consumer(b, **{"group.id": "idle"})
    idle.commit(offsets=[CkTopicPartition(t, 0, 2), CkTopicPartition(t, 1, 1),
                         CkTopicPartition(t, 2, 2)], asynchronous=False)
    idle.close()
    live = wait_stable_member(b, "live", t)
    try:
        live.commit(offsets=[CkTopicPartition(t, 0, 1)], asynchronous=False)
        with rdkafka_admin.Admin(b.bootstrap) as a:
            # all partitions (no list): every committed offset comes back
            assert a.list_group_offsets("idle") == {"idle": (0, [(t, 0, 2, 0), (t, 1, 1, 0),
                                                                 (t, 2, 2, 0)])}
            assert a.list_group_offsets("idle", [(t, 1)]) == {"idle": (0, [(t, 1, 1, 0)])}
            groups, errors = a.list_groups()
            assert errors == 0
            assert groups == {"idle": ("Empty", True), "live": ("Stable", False)}
            d = a.describe_groups(["idle", "live"])
            assert d["idle"][:3] == (0, "Empty", 0)
            assert d["live"][:3] == (0, "Stable", 1) and d["live"][3] == "range"
            # OffsetDelete: the Empty group's offsets go, partition by partition
            assert a.delete_group_offsets("idle", [(t, 0), (t, 2)]) == \
                {"idle": (0, [(t, 0, -1001, 0), (t, 2, -1001, 0)])}     # no offset in the answer
            assert a.list_group_offsets("idle") == {"idle": (0, [(t, 1, 1, 0)])}
            # an active group subscribed to the topic keeps them
            got = a.delete_group_offsets("live", [(t, 0)])
            assert got == {"live": (0, [(t, 0, -1001, 86)])}         # GROUP_SUBSCRIBED_TO_TOPIC
            assert a.list_group_offsets("live", [(t, 0)]) == {"live": (0, [(t, 0, 1, 0)])}
    finally:
        live.close()
