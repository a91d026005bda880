"""Metadata as clients see it: brokers, topics, partitions, leaders, the
controller, and topic auto-creation through Metadata requests."""
import json
import time

import kafka_raw as kr
from support import (assert_serves, ck_admin, ck_producer, create_topic, kcat, kp_consumer,
                     produce_ok, topic_name, wait_topic)

UNKNOWN_TOPIC_OR_PARTITION = 3
LEADER_NOT_AVAILABLE = 5


def raw_metadata(b, version, topics, allow_auto_create=True):
    with kr.Conn(b.port) as c:
        r = c.request(kr.API_METADATA, version, kr.metadata_body(version, topics, allow_auto_create))
        return kr.parse_metadata(r, version)


def test_kcat_lists_the_broker_and_topics(broker):
    t = topic_name("kcat")
    create_topic(broker, t, 3)
    p = kcat(broker, ["-L", "-J"])
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    md = json.loads(p.stdout)
    brokers = {bk["id"]: bk["name"] for bk in md["brokers"]}
    assert brokers == {broker.broker_id: "127.0.0.1:%d" % broker.port}
    topics = {tp["topic"]: tp for tp in md["topics"]}
    assert t in topics, "kcat -L topics: %s" % sorted(topics)
    parts = sorted(topics[t]["partitions"], key=lambda x: x["partition"])
    assert [x["partition"] for x in parts] == [0, 1, 2]
    assert all(x["leader"] == broker.broker_id for x in parts)
    # the plain listing operators read
    p = kcat(broker, ["-L"])
    out = p.stdout.decode()
    assert p.returncode == 0
    assert "broker %d at 127.0.0.1:%d" % (broker.broker_id, broker.port) in out
    assert 'topic "%s" with 3 partitions' % t in out


def test_confluent_list_topics_shows_partitions_leader_replicas_isr(broker):
    t = topic_name("ck")
    create_topic(broker, t, 4)
    md = ck_admin(broker).list_topics(timeout=10)
    assert set(md.brokers) == {broker.broker_id}
    bm = md.brokers[broker.broker_id]
    assert (bm.host, bm.port) == ("127.0.0.1", broker.port)
    tm = md.topics[t]
    assert tm.error is None
    assert sorted(tm.partitions) == [0, 1, 2, 3]
    for pm in tm.partitions.values():
        assert pm.error is None
        assert pm.leader == broker.broker_id
        assert pm.replicas == [broker.broker_id]
        assert pm.isrs == [broker.broker_id]


def test_kafka_python_consumer_topics_lists_created_topics(broker):
    t1, t2 = topic_name("kp"), topic_name("kp")
    create_topic(broker, t1, 1)
    create_topic(broker, t2, 3)
    c = kp_consumer(broker)
    try:
        topics = c.topics()
        assert {t1, t2} <= topics, topics
        assert c.partitions_for_topic(t2) == {0, 1, 2}
    finally:
        c.close()


def test_metadata_v0_empty_list_means_all_topics(broker):
    t = topic_name("v0")
    create_topic(broker, t, 2)
    md = raw_metadata(broker, 0, [])
    assert md["brokers"] == [(broker.broker_id, "127.0.0.1", broker.port, None)]
    assert t in md["topics"]
    err, parts = md["topics"][t]
    assert err == 0 and sorted(p[1] for p in parts) == [0, 1]


def test_metadata_v1_empty_list_means_no_topics_and_null_means_all(broker):
    t = topic_name("v1")
    create_topic(broker, t, 1)
    assert raw_metadata(broker, 1, [])["topics"] == {}
    assert t in raw_metadata(broker, 1, None)["topics"]


def test_controller_id_names_the_broker(broker):
    md = ck_admin(broker).list_topics(timeout=10)
    assert md.controller_id == broker.broker_id
    for v in (1, 2, 3, 4, 5):
        raw = raw_metadata(broker, v, [])
        assert raw["controller_id"] == broker.broker_id, "Metadata v%d" % v
        assert raw["brokers"] == [(broker.broker_id, "127.0.0.1", broker.port, None)], "Metadata v%d" % v


def wait_auto_created(b, t, version=4):
    """Kafka answers the creating request with LEADER_NOT_AVAILABLE or 0; a
    retry soon after must show the topic."""
    deadline = time.monotonic() + 10
    while True:
        md = raw_metadata(b, version, [t], allow_auto_create=True)
        err, parts = md["topics"].get(t, (None, None))
        if err == 0 and parts:
            return parts
        assert err in (0, LEADER_NOT_AVAILABLE), "Metadata error %s for auto-created %s" % (err, t)
        assert time.monotonic() < deadline, "topic %s never became available" % t
        time.sleep(0.1)


def test_metadata_request_auto_creates_topic_when_enabled(start_broker):
    b = start_broker({"auto.create.topics.enable": "true", "num.partitions": "3"})
    t = topic_name("auto")
    parts = wait_auto_created(b, t)
    assert sorted(p[1] for p in parts) == [0, 1, 2], "num.partitions=3 applies to auto-created topics"
    assert all(p[0] == 0 and p[2] == b.broker_id for p in parts)
    assert t in ck_admin(b).list_topics(timeout=10).topics


def test_producer_to_unknown_topic_auto_creates_it(start_broker):
    b = start_broker({"auto.create.topics.enable": "true", "num.partitions": "2"})
    t = topic_name("autoprod")
    msgs = produce_ok(ck_producer(b), t, [{"value": b"first", "partition": 1}], timeout=20)
    assert (msgs[0].partition(), msgs[0].offset()) == (1, 0)
    wait_topic(b, t, 2)


def test_metadata_v1_auto_creates_topic_when_enabled(broker):
    t = topic_name("autov1")
    parts = wait_auto_created(broker, t, version=1)
    assert len(parts) == 1


def test_metadata_does_not_create_topic_when_disabled(start_broker):
    b = start_broker({"auto.create.topics.enable": "false"})
    t = topic_name("noauto")
    for v in (1, 4):
        md = raw_metadata(b, v, [t], allow_auto_create=True)
        assert md["topics"].get(t, (None,))[0] == UNKNOWN_TOPIC_OR_PARTITION, md["topics"]
    time.sleep(0.2)
    assert t not in ck_admin(b).list_topics(timeout=10).topics
    assert t not in raw_metadata(b, 1, None)["topics"]


def test_metadata_v4_without_allow_auto_create_does_not_create(broker):
    t = topic_name("noallow")
    md = raw_metadata(broker, 4, [t], allow_auto_create=False)
    assert md["topics"].get(t, (None,))[0] == UNKNOWN_TOPIC_OR_PARTITION, md["topics"]
    time.sleep(0.2)
    assert t not in raw_metadata(broker, 1, None)["topics"]


def test_the_example_standalone_config_serves_clients(start_broker):
    """examples/standalone.properties (what `make run` uses), with only the
    port and data directory moved for the test."""
    b = start_broker(config="examples/standalone.properties")
    assert b.broker_id == 0
    md = ck_admin(b).list_topics(timeout=10)
    assert set(md.brokers) == {0} and md.controller_id == 0
    assert_serves(b, "starting from examples/standalone.properties")
