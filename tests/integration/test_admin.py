"""Topic administration through the admin clients users actually run:
confluent-kafka's AdminClient (librdkafka) and kafka-python's
KafkaAdminClient.  Errors must be the Kafka codes those clients map to
their exceptions."""
import time

import pytest
from confluent_kafka import KafkaError, KafkaException
from confluent_kafka.admin import (ConfigResource, ConfigSource, NewPartitions,
                                   NewTopic)

import kafka_raw as kr
from conftest import free_port
from support import (ck_admin, ck_producer, consume, create_topic, err_code,
                     produce_ok, topic_name, wait_topic)

T = 15  # seconds for any admin round trip


def ck_create(b, name, partitions=1, config=None, replication_factor=1, validate_only=False):
    fs = ck_admin(b).create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=replication_factor,
                  config=config or {})],
        operation_timeout=T, request_timeout=T, validate_only=validate_only)
    return fs[name].result(timeout=T)


def ck_create_error(b, name, **kw):
    with pytest.raises(KafkaException) as ei:
        ck_create(b, name, **kw)
    return err_code(ei.value)


def ck_describe(b, topic):
    res = ConfigResource(ConfigResource.Type.TOPIC, topic)
    fs = ck_admin(b).describe_configs([res], request_timeout=T)
    return fs[res].result(timeout=T)


def source(entry):
    s = entry.source
    return s if isinstance(s, ConfigSource) else ConfigSource(s)


def topic_names(b):
    return set(ck_admin(b).list_topics(timeout=10).topics)


def wait_gone(b, t, timeout=10):
    deadline = time.monotonic() + timeout
    while t in topic_names(b):
        assert time.monotonic() < deadline, "deleted topic %s still listed" % t
        time.sleep(0.1)


# ---- confluent-kafka AdminClient ------------------------------------------------------
def test_create_topic_with_partitions_and_configs(broker):
    t = topic_name("create")
    ck_create(broker, t, 5, {"retention.ms": "3600000", "cleanup.policy": "compact"})
    md = wait_topic(broker, t, 5)
    assert sorted(md.topics[t].partitions) == [0, 1, 2, 3, 4]
    cfg = ck_describe(broker, t)
    assert cfg["retention.ms"].value == "3600000"
    assert cfg["cleanup.policy"].value == "compact"


def test_describe_configs_shows_overrides_as_dynamic_topic_config_and_defaults(broker):
    t = topic_name("describe")
    ck_create(broker, t, 1, {"retention.ms": "3600000"})
    cfg = ck_describe(broker, t)
    e = cfg["retention.ms"]
    assert (e.value, source(e), e.is_default) == ("3600000", ConfigSource.DYNAMIC_TOPIC_CONFIG, False)
    # Kafka's defaults, marked as such
    for name, value in (("segment.bytes", "1073741824"), ("cleanup.policy", "delete"),
                        ("retention.bytes", "-1"), ("min.insync.replicas", "1"),
                        ("message.timestamp.type", "CreateTime"),
                        ("compression.type", "producer")):
        assert name in cfg, "DescribeConfigs lacks %s (has %s)" % (name, sorted(cfg))
        e = cfg[name]
        assert e.value == value, "%s = %r" % (name, e.value)
        assert source(e) == ConfigSource.DEFAULT_CONFIG, "%s source %s" % (name, source(e))
        assert e.is_default, name


def test_describe_configs_shows_broker_level_setting_as_static_broker_config(start_broker):
    b = start_broker({"log.segment.bytes": "16777216"})
    t = topic_name("brokercfg")
    create_topic(b, t, 1)
    e = ck_describe(b, t)["segment.bytes"]
    assert e.value == "16777216"
    assert source(e) == ConfigSource.STATIC_BROKER_CONFIG
    assert not e.is_default


def ck_describe_broker(b):
    res = ConfigResource(ConfigResource.Type.BROKER, str(b.broker_id))
    fs = ck_admin(b).describe_configs([res], request_timeout=T)
    return fs[res].result(timeout=T)


# Keys DescribeConfigs once left out although the parser took them, and
# keys of every type of the parser's table (daemon/broker_config.c).
BROKER_KEYS_ONCE_MISSING = (
    "connection.max.queued.bytes", "admin.listeners", "admin.token", "admin.sql.timeout.ms",
    "admin.sql.max.rows", "group.initial.rebalance.delay.ms", "group.min.session.timeout.ms",
    "group.max.session.timeout.ms", "offsets.retention.minutes",
    "offsets.retention.check.interval.ms", "offset.metadata.max.bytes",
    "offsets.commit.linger.ms", "log.dir", "log.retention.hours", "log.retention.minutes",
    "log.roll.hours", "log.roll.jitter.hours")


def test_broker_describe_configs_lists_every_key_with_the_running_value(start_broker):
    port = free_port()
    overrides = {"connection.max.queued.bytes": "1048576", "admin.sql.max.rows": "77",
                 "admin.listeners": "http://127.0.0.1:%d" % port, "admin.token": "s3cret-token",
                 "group.min.session.timeout.ms": "1500", "offsets.retention.minutes": "99",
                 "offsets.commit.linger.ms": "17", "log.retention.hours": "3",
                 "log.cleaner.enable": "false", "default.replication.factor": "1",
                 "log.segment.bytes": "16777216"}
    b = start_broker(overrides)
    cfg = ck_describe_broker(b)
    for name in BROKER_KEYS_ONCE_MISSING:
        assert name in cfg, "broker DescribeConfigs lacks %s" % name
    for name, value in overrides.items():
        e = cfg[name]
        if name == "admin.token":
            continue
        assert e.value == value, "%s = %r, the broker runs with %r" % (name, e.value, value)
        if name != "default.replication.factor":          # the default itself
            assert source(e) == ConfigSource.STATIC_BROKER_CONFIG, (name, source(e))
        # the topic defaults' broker keys can change at runtime (dynamic
        # broker configs); the rest is read-only, as in Kafka
        assert e.is_read_only == (name != "log.segment.bytes"), name
    # log.retention.hours=3 is what the broker runs with under the ms key too
    assert cfg["log.retention.ms"].value == "10800000"
    assert (cfg["offsets.commit.linger.ms"].value, cfg["group.max.session.timeout.ms"].value,
            source(cfg["group.max.session.timeout.ms"])) == \
        ("17", "1800000", ConfigSource.DEFAULT_CONFIG)
    # The secret never leaves the broker.
    tok = cfg["admin.token"]
    assert tok.value is None and tok.is_sensitive, (tok.value, tok.is_sensitive)
    assert sorted(n for n, e in cfg.items() if e.is_sensitive) == \
        ["admin.token", "password.encoder.old.secret", "password.encoder.secret",
         "sasl.jaas.config", "ssl.key.password", "ssl.keystore.key"]         # PASSWORD keys

    # Everything described is a key the parser takes, with a value it takes:
    # a broker started with all of them as overrides describes the same.
    own = {"listeners", "advertised.listeners", "log.dirs", "log.dir", "admin.listeners"}
    fed = {n: e.value for n, e in cfg.items() if e.value is not None and n not in own}
    fed["admin.listeners"] = "http://127.0.0.1:%d" % free_port()
    b2 = start_broker(fed)
    cfg2 = ck_describe_broker(b2)
    assert sorted(cfg2) == sorted(cfg)
    diff = {n: (cfg[n].value, cfg2[n].value) for n in fed
            if n != "admin.listeners" and cfg2[n].value != cfg[n].value}
    assert not diff, diff


def test_validate_only_create_does_not_create(broker):
    t = topic_name("validate")
    ck_create(broker, t, 3, {"retention.ms": "1000"}, validate_only=True)
    time.sleep(0.3)
    assert t not in topic_names(broker)
    # ...but validation still rejects what a real create would
    assert ck_create_error(broker, "a b", validate_only=True) == KafkaError.TOPIC_EXCEPTION
    assert ck_create_error(broker, topic_name("vbad"), config={"retention.ms": "abc"},
                           validate_only=True) == KafkaError.INVALID_CONFIG


def test_delete_topic_removes_it_and_the_name_can_be_reused_empty(broker):
    t = topic_name("delete")
    create_topic(broker, t, 2)
    produce_ok(ck_producer(broker), t, [{"value": b"old-%d" % i, "partition": i % 2} for i in range(10)])
    fs = ck_admin(broker).delete_topics([t], operation_timeout=T, request_timeout=T)
    fs[t].result(timeout=T)
    wait_gone(broker, t)
    create_topic(broker, t, 1)
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"new"}])
    assert msgs[0].offset() == 0, "a re-created topic starts at offset 0"
    got = consume(broker, t, [0], 1)
    assert [m.value() for m in got] == [b"new"]


def test_delete_unknown_topic_is_unknown_topic_or_partition(broker):
    t = topic_name("nosuch")
    fs = ck_admin(broker).delete_topics([t], operation_timeout=T, request_timeout=T)
    with pytest.raises(KafkaException) as ei:
        fs[t].result(timeout=T)
    assert err_code(ei.value) == KafkaError.UNKNOWN_TOPIC_OR_PART


def test_alter_configs_replaces_overrides_and_reads_back(broker):
    t = topic_name("alter")
    ck_create(broker, t, 1, {"cleanup.policy": "compact"})
    res = ConfigResource(ConfigResource.Type.TOPIC, t,
                         set_config={"retention.ms": "86400000", "max.message.bytes": "2000000"})
    fs = ck_admin(broker).alter_configs([res], request_timeout=T)
    fs[res].result(timeout=T)
    cfg = ck_describe(broker, t)
    assert cfg["retention.ms"].value == "86400000"
    assert source(cfg["retention.ms"]) == ConfigSource.DYNAMIC_TOPIC_CONFIG
    assert cfg["max.message.bytes"].value == "2000000"
    # AlterConfigs (non-incremental) replaces the whole set: the earlier
    # override is gone and the default shows again.
    assert cfg["cleanup.policy"].value == "delete"
    assert source(cfg["cleanup.policy"]) == ConfigSource.DEFAULT_CONFIG


def test_alter_configs_with_bad_value_is_invalid_config_and_changes_nothing(broker):
    t = topic_name("alterbad")
    ck_create(broker, t, 1, {"retention.ms": "3600000"})
    res = ConfigResource(ConfigResource.Type.TOPIC, t,
                         set_config={"retention.ms": "7200000", "segment.bytes": "not-a-number"})
    fs = ck_admin(broker).alter_configs([res], request_timeout=T)
    with pytest.raises(KafkaException) as ei:
        fs[res].result(timeout=T)
    assert err_code(ei.value) == KafkaError.INVALID_CONFIG
    assert ck_describe(broker, t)["retention.ms"].value == "3600000"


def incremental_alter(b, topic, ops, validate_only=False):
    """IncrementalAlterConfigs v0 over a raw connection: no Debian client
    sends it (confluent-kafka 1.7 has no incremental_alter_configs, and
    librdkafka 2.0.2 / kafka-python 2.0.2 never use the API), but Java
    tooling does.  ops: [(name, op, value)], op 0 SET, 1 DELETE.
    Returns (error_code, error_message)."""
    body = kr.array([kr.i8(2) + kr.string(topic) +
                     kr.array([kr.string(n) + kr.i8(op) + kr.string(v) for n, op, v in ops])])
    body += kr.i8(1 if validate_only else 0)
    with kr.Conn(b.port) as c:
        r = c.request(44, 0, body)
    r.i32()
    (res,) = r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))
    assert res[2:] == (2, topic), res
    return res[0], res[1]


def test_incremental_alter_configs_sets_and_deletes_single_overrides(broker):
    with kr.Conn(broker.port) as c:
        _, apis = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0))
    # The broker always serves it (daemon/api/api_configs.c); confluent-kafka 1.7
    # has no incremental_alter_configs, hence the raw request below.
    assert 44 in apis, "IncrementalAlterConfigs is not advertised"
    t = topic_name("incr")
    ck_create(broker, t, 1, {"cleanup.policy": "compact", "retention.ms": "1000"})
    assert incremental_alter(broker, t, [("retention.ms", 0, "5000")]) == (0, None)
    cfg = ck_describe(broker, t)
    assert cfg["retention.ms"].value == "5000"
    assert cfg["cleanup.policy"].value == "compact", "SET of one key must keep the other overrides"
    assert incremental_alter(broker, t, [("cleanup.policy", 1, None)]) == (0, None)
    cfg = ck_describe(broker, t)
    assert (cfg["cleanup.policy"].value, source(cfg["cleanup.policy"])) == ("delete", ConfigSource.DEFAULT_CONFIG)
    assert cfg["retention.ms"].value == "5000"
    # validate_only changes nothing; a bad value is INVALID_CONFIG and changes nothing
    assert incremental_alter(broker, t, [("retention.ms", 0, "7000")], validate_only=True)[0] == 0
    err, _ = incremental_alter(broker, t, [("retention.ms", 0, "9000"), ("segment.bytes", 0, "lots")])
    assert err == KafkaError.INVALID_CONFIG
    assert ck_describe(broker, t)["retention.ms"].value == "5000"


def test_create_partitions_grows_the_topic(broker):
    t = topic_name("grow")
    create_topic(broker, t, 2)
    fs = ck_admin(broker).create_partitions([NewPartitions(t, 5)], operation_timeout=T, request_timeout=T)
    fs[t].result(timeout=T)
    wait_topic(broker, t, 5)
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"p%d" % p, "partition": p} for p in range(5)])
    assert sorted((m.partition(), m.offset()) for m in msgs) == [(p, 0) for p in range(5)]


def test_create_partitions_cannot_shrink(broker):
    t = topic_name("shrink")
    create_topic(broker, t, 3)
    fs = ck_admin(broker).create_partitions([NewPartitions(t, 2)], operation_timeout=T, request_timeout=T)
    with pytest.raises(KafkaException) as ei:
        fs[t].result(timeout=T)
    assert err_code(ei.value) == KafkaError.INVALID_PARTITIONS
    wait_topic(broker, t, 3)


@pytest.mark.parametrize("name", ["a b", "..", ".", "x" * 250, "slash/name", "ünïcode"],
                         ids=["space", "dotdot", "dot", "250chars", "slash", "non-ascii"])
def test_invalid_topic_name_is_invalid_topic_exception(broker, name):
    assert ck_create_error(broker, name) == KafkaError.TOPIC_EXCEPTION
    assert name not in topic_names(broker)


def test_longest_legal_topic_name_is_accepted(broker):
    t = "y" * 249
    ck_create(broker, t, 1)
    wait_topic(broker, t, 1)
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"v"}])
    assert msgs[0].offset() == 0


@pytest.mark.parametrize("config", [{"retention.ms": "abc"}, {"cleanup.policy": "shred"},
                                    {"no.such.config": "1"}, {"min.insync.replicas": "0"}],
                         ids=["not-a-number", "bad-enum", "unknown-key", "out-of-range"])
def test_bad_config_value_is_invalid_config(broker, config):
    t = topic_name("badcfg")
    assert ck_create_error(broker, t, config=config) == KafkaError.INVALID_CONFIG
    assert t not in topic_names(broker)


def test_duplicate_topic_is_topic_already_exists(broker):
    t = topic_name("dup")
    ck_create(broker, t, 2)
    assert ck_create_error(broker, t, partitions=3) == KafkaError.TOPIC_ALREADY_EXISTS
    wait_topic(broker, t, 2)


def test_zero_partitions_is_invalid_partitions(broker):
    assert ck_create_error(broker, topic_name("zero"), partitions=0) == KafkaError.INVALID_PARTITIONS


def test_replication_factor_above_broker_count_is_invalid_replication_factor(broker):
    assert ck_create_error(broker, topic_name("rf3"), replication_factor=3) == \
        KafkaError.INVALID_REPLICATION_FACTOR


# ---- kafka-python KafkaAdminClient -----------------------------------------------------
@pytest.fixture
def kp_admin(broker):
    from kafka import KafkaAdminClient
    a = KafkaAdminClient(bootstrap_servers=[broker.bootstrap], request_timeout_ms=15000,
                         api_version_auto_timeout_ms=10000)
    yield a
    a.close()


def kp_describe(admin, topic):
    from kafka.admin import ConfigResource as KCR, ConfigResourceType
    resps = admin.describe_configs([KCR(ConfigResourceType.TOPIC, topic)])
    (res,) = [r for resp in resps for r in resp.resources]
    err, _msg, _type, name, entries = res
    assert err == 0 and name == topic
    # v1/v2 entry: name, value, read_only, source (v2), is_sensitive, synonyms
    return {e[0]: (e[1], e[3]) for e in entries}


def test_kafka_python_admin_create_describe_alter_delete(broker, kp_admin):
    from kafka.admin import ConfigResource as KCR, ConfigResourceType, NewPartitions as KNP
    from kafka.admin import NewTopic as KNT
    t = topic_name("kpadmin")
    kp_admin.create_topics([KNT(t, 3, 1, topic_configs={"retention.ms": "7200000"})], timeout_ms=15000)
    wait_topic(broker, t, 3)
    cfg = kp_describe(kp_admin, t)
    assert cfg["retention.ms"] == ("7200000", ConfigSource.DYNAMIC_TOPIC_CONFIG.value)
    assert cfg["segment.bytes"] == ("1073741824", ConfigSource.DEFAULT_CONFIG.value)

    resp = kp_admin.alter_configs([KCR(ConfigResourceType.TOPIC, t, configs={"retention.ms": "60000"})])
    assert [r[0] for r in resp.resources] == [0]
    assert kp_describe(kp_admin, t)["retention.ms"][0] == "60000"

    kp_admin.create_partitions({t: KNP(total_count=4)}, timeout_ms=15000)
    wait_topic(broker, t, 4)

    kp_admin.delete_topics([t], timeout_ms=15000)
    wait_gone(broker, t)


def test_kafka_python_admin_validate_only_does_not_create(broker, kp_admin):
    from kafka.admin import NewTopic as KNT
    t = topic_name("kpvalid")
    kp_admin.create_topics([KNT(t, 2, 1)], timeout_ms=15000, validate_only=True)
    time.sleep(0.3)
    assert t not in topic_names(broker)


def test_kafka_python_admin_errors(broker, kp_admin):
    from kafka.admin import NewTopic as KNT
    from kafka.errors import (InvalidConfigurationError, InvalidTopicError,
                              TopicAlreadyExistsError)
    t = topic_name("kperr")
    kp_admin.create_topics([KNT(t, 1, 1)], timeout_ms=15000)
    with pytest.raises(TopicAlreadyExistsError):
        kp_admin.create_topics([KNT(t, 1, 1)], timeout_ms=15000)
    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics([KNT("a b", 1, 1)], timeout_ms=15000)
    with pytest.raises(InvalidTopicError):
        kp_admin.create_topics([KNT("z" * 250, 1, 1)], timeout_ms=15000)
    with pytest.raises(InvalidConfigurationError):
        kp_admin.create_topics([KNT(topic_name("kpbad"), 1, 1, topic_configs={"retention.ms": "abc"})],
                               timeout_ms=15000)
