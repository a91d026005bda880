"""The core's cluster view as clients and operators see it (issue 14): a
stored cluster id, stable topic ids, replicas from the view (manual
assignments kept), the replicas table in SQL, and SQL config writes taking
the same path as the Kafka admin APIs."""
import re

import kafka_raw as kr
from confluent_kafka.admin import ConfigResource, NewTopic
from confluent_kafka import KafkaError, KafkaException

from support import ck_admin, create_topic, produce_ok, ck_producer, topic_name
from test_sql import ab, admin_broker, sql, sql_error  # noqa: F401 (ab: fixture)


def cluster_id(b):
    with kr.Conn(b.port) as c:
        r = c.request(kr.API_METADATA, 2, kr.metadata_body(2, [], True))
        return kr.parse_metadata(r, 2)["cluster_id"]


def test_cluster_id_is_kafkas_form_stored_once_and_own_to_each_cluster(start_broker):
    a = start_broker()
    first = cluster_id(a)
    assert re.fullmatch(r"[A-Za-z0-9_-]{22}", first), first
    assert not first.startswith("-")
    assert ck_admin(a).list_topics(timeout=10).cluster_id == first   # librdkafka's view
    a.restart()
    assert cluster_id(a) == first, "the cluster id must survive a restart"
    b = start_broker()
    assert cluster_id(b) != first, "a new data directory is a new cluster"


def test_topic_ids_are_uuids_that_survive_a_restart(start_broker):
    b = admin_broker(start_broker)
    t = topic_name("tid")
    create_topic(b, t, 2)
    before = sql(b, "SELECT hex(topic_id) AS id FROM main.topics WHERE name = '%s'" % t)[0]["id"]
    assert len(before) == 32 and before[12] == "4", before       # version-4 UUID
    b.restart()
    after = sql(b, "SELECT hex(topic_id) AS id FROM main.topics WHERE name = '%s'" % t)[0]["id"]
    assert after == before


def test_manual_assignment_is_stored_and_answered_from_the_view(ab):
    broker = ab
    t = topic_name("assign")
    me = broker.broker_id
    fs = ck_admin(broker).create_topics([NewTopic(t, num_partitions=3, replica_assignment=[[me], [me], [me]])])
    fs[t].result(timeout=15)
    rows = sql(broker, "SELECT partition, position, broker_id, in_isr, is_leader, alive "
                       "FROM partition_replicas WHERE topic = '%s' ORDER BY partition" % t)
    assert rows == [{"partition": p, "position": 0, "broker_id": me, "in_isr": 1,
                     "is_leader": 1, "alive": 1} for p in range(3)]
    parts = sql(broker, "SELECT partition, leader, replicas, isr, leader_epoch FROM partitions "
                        "WHERE topic = '%s' ORDER BY partition" % t)
    assert parts == [{"partition": p, "leader": me, "replicas": str(me), "isr": str(me),
                      "leader_epoch": 0} for p in range(3)]
    md = ck_admin(broker).list_topics(t, timeout=10).topics[t]
    assert {p: (m.leader, m.replicas, m.isrs) for p, m in md.partitions.items()} == \
        {p: (me, [me], [me]) for p in range(3)}
    # A broker the view does not know is refused, naming it.
    bad = topic_name("assign")
    fs = ck_admin(broker).create_topics([NewTopic(bad, num_partitions=1, replica_assignment=[[me + 7]])])
    try:
        fs[bad].result(timeout=15)
        raise AssertionError("an assignment to an unknown broker was accepted")
    except KafkaException as e:
        err = e.args[0]
        assert err.code() == KafkaError.INVALID_REPLICA_ASSIGNMENT, err
        assert "broker %d" % (me + 7) in err.str(), err.str()
    assert not sql(broker, "SELECT 1 FROM topics WHERE name = '%s'" % bad)


def test_partitions_view_shows_the_recovery_point_the_log_keeps(start_broker):
    b = admin_broker(start_broker, **{"log.flush.interval.messages": "1",
                                      "log.flush.offset.checkpoint.interval.ms": "100"})
    t = topic_name("rp")
    create_topic(b, t, 1)
    produce_ok(ck_producer(b), t, [{"value": b"m%d" % i} for i in range(5)])
    b.restart()          # a clean stop saves every bookmark
    row = sql(b, "SELECT recovery_point, log_end_offset FROM partitions WHERE topic = '%s'" % t)[0]
    assert row == {"recovery_point": 5, "log_end_offset": 5}, row


def test_sql_config_writes_take_the_same_path_and_words_as_alter_configs(ab):
    broker = ab
    t = topic_name("cfgpath")
    create_topic(broker, t, 1)
    # The same bad value through SQL and through IncrementalAlterConfigs.
    e_sql = sql_error(broker, "UPDATE topic_configs SET value = 'abc' WHERE topic = '%s' "
                              "AND name = 'retention.ms'" % t)
    res = ConfigResource("topic", t, set_config={"retention.ms": "abc"})
    try:
        ck_admin(broker).alter_configs([res])[res].result(timeout=15)
        raise AssertionError("a bad retention.ms was accepted")
    except KafkaException as e:
        e_api = e.args[0].str()
    assert e_sql.startswith("INVALID_CONFIG: "), e_sql
    assert e_sql[len("INVALID_CONFIG: "):] in e_api, (e_sql, e_api)
    # A good one through SQL is what DescribeConfigs then shows, as an override.
    sql(broker, "UPDATE topic_configs SET value = '3600000' WHERE topic = '%s' "
                "AND name = 'retention.ms'" % t)
    res = ConfigResource("topic", t)
    cfg = ck_admin(broker).describe_configs([res])[res].result(timeout=15)
    assert cfg["retention.ms"].value == "3600000"
    # Setting a second key keeps the first (SQL writes a row, not the whole set).
    sql(broker, "UPDATE topic_configs SET value = 'compact' WHERE topic = '%s' "
                "AND name = 'cleanup.policy'" % t)
    cfg = ck_admin(broker).describe_configs([res])[res].result(timeout=15)
    assert (cfg["retention.ms"].value, cfg["cleanup.policy"].value) == ("3600000", "compact")
    # A key the broker does not know is refused by name, and nothing changes.
    e = sql_error(broker, "INSERT INTO topic_configs(topic, name, value) "
                          "VALUES ('%s', 'no.such', '1')" % t)
    assert e.startswith("INVALID_CONFIG: ") and "no.such" in e, e
    cfg = ck_admin(broker).describe_configs([res])[res].result(timeout=15)
    assert (cfg["retention.ms"].value, cfg["cleanup.policy"].value) == ("3600000", "compact")


def test_sql_topic_with_more_replicas_than_brokers_is_refused(ab):
    broker = ab
    t = topic_name("rf")
    e = sql_error(broker, "INSERT INTO topics(name, partitions, replication_factor) "
                          "VALUES ('%s', 1, 2)" % t)
    assert e == "INVALID_REPLICATION_FACTOR: Replication factor: 2 larger than available " \
                "brokers: 1.", e
    assert not sql(broker, "SELECT 1 FROM topics WHERE name = '%s'" % t)
