"""Dynamic broker configs: AlterConfigs / IncrementalAlterConfigs on BROKER
resources (this broker's id, and "" for the cluster-wide default) for the
keys Kafka reconfigures at runtime (the topic defaults' broker keys),
applied live to every topic, kept across a restart, and described with
their source; a key that cannot change at runtime is refused by name."""
import pytest
from confluent_kafka import KafkaException
from confluent_kafka.admin import ConfigResource, ConfigSource

import kafka_raw as kr
from support import ck_admin, ck_producer, create_topic, err_code, produce, topic_name
from test_sql import admin_broker, sql

T = 15
DESCRIBE_CONFIGS, ALTER_CONFIGS, INCREMENTAL_ALTER = 32, 33, 44
INVALID_REQUEST, MESSAGE_TOO_LARGE = 42, 10


def describe(b, rtype, name):
    res = ConfigResource(rtype, name)
    return ck_admin(b).describe_configs([res], request_timeout=T)[res].result(timeout=T)


def alter_broker(b, name, configs):
    res = ConfigResource(ConfigResource.Type.BROKER, name, set_config=configs)
    return ck_admin(b).alter_configs([res], request_timeout=T)[res].result(timeout=T)


def source(e):
    return e.source if isinstance(e.source, ConfigSource) else ConfigSource(e.source)


def incremental_default(b, key, value, op=0):
    """IncrementalAlterConfigs v1 (flexible) on the default resource ""."""
    f = True
    cfg = kr.vstring(key, f) + kr.i8(op) + kr.vstring(value, f) + kr.vtags(f)
    body = kr.varray([kr.i8(4) + kr.vstring("", f) + kr.varray([cfg], f) + kr.vtags(f)], f) \
        + kr.i8(0) + kr.vtags(f)
    with kr.Conn(b.port) as c:
        r = c.request_v(INCREMENTAL_ALTER, 1, body, 1)
        assert r.i32() == 0
        got = r.vstructs(lambda x: (x.i16(), x.vstring(f), x.i8(), x.vstring(f)), f)
        r.vtags(f)
        return got


def describe_default(b):
    """DescribeConfigs v1 of the default resource "" (confluent-kafka
    refuses an empty name): {name: (value, source)}."""
    body = kr.array([kr.i8(4) + kr.string("") + kr.array(None)]) + kr.i8(0)
    with kr.Conn(b.port) as c:
        r = c.request_v(DESCRIBE_CONFIGS, 1, body, 4)
        assert r.i32() == 0
        (err, _, _, _, entries), = r.array(lambda x: (
            x.i16(), x.string(), x.i8(), x.string(), x.array(lambda y: (
                y.string(), y.string(), y.i8(), y.i8(), y.i8(),
                y.array(lambda z: (z.string(), z.string(), z.i8()))))))
        assert err == 0
        return {n: (v, ConfigSource(src)) for n, v, _, src, _, _ in entries}


def alter_raw(b, name, key, value):
    """AlterConfigs v0 on a BROKER resource: (error, message)."""
    body = kr.array([kr.i8(4) + kr.string(name)
                     + kr.array([kr.string(key) + kr.string(value)])]) + kr.i8(0)
    with kr.Conn(b.port) as c:
        r = c.request_v(ALTER_CONFIGS, 0, body, 2)
        assert r.i32() == 0
        (err, msg, _, _), = r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))
        return err, msg


def big_message_error(b, t):
    (err, _), = produce(ck_producer(b, **{"message.timeout.ms": 10000}), t,
                        [{"value": b"x" * 3000}])
    return err.code() if err is not None else 0


def test_dynamic_broker_config_applies_live_and_survives_restart(start_broker):
    b = admin_broker(start_broker)
    t = topic_name("dyn")
    create_topic(b, t)
    me = str(b.broker_id)
    assert big_message_error(b, t) == 0
    alter_broker(b, me, {"message.max.bytes": "2000"})
    e = describe(b, ConfigResource.Type.BROKER, me)["message.max.bytes"]
    assert (e.value, source(e), e.is_read_only) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG,
                                                   False)
    e = describe(b, ConfigResource.Type.TOPIC, t)["max.message.bytes"]
    assert (e.value, source(e)) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert big_message_error(b, t) == MESSAGE_TOO_LARGE           # live, no restart

    # the cluster-wide default, below this broker's own set
    assert incremental_default(b, "log.retention.ms", "12345") == [(0, None, 4, "")]
    assert incremental_default(b, "message.max.bytes", "5000") == [(0, None, 4, "")]
    assert describe_default(b) == {
        "log.retention.ms": ("12345", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG),
        "message.max.bytes": ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)}
    assert sql(b, "SELECT broker_id, name, value, source FROM broker_configs "
                  "ORDER BY broker_id, name") == [
        {"broker_id": None, "name": "log.retention.ms", "value": "12345",
         "source": "dynamic_default"},
        {"broker_id": None, "name": "message.max.bytes", "value": "5000",
         "source": "dynamic_default"},
        {"broker_id": b.broker_id, "name": "message.max.bytes", "value": "2000",
         "source": "dynamic_broker"}]
    topic = describe(b, ConfigResource.Type.TOPIC, t)
    assert (topic["retention.ms"].value, source(topic["retention.ms"])) == \
        ("12345", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert topic["max.message.bytes"].value == "2000"               # its own set wins

    b.restart()
    e = describe(b, ConfigResource.Type.BROKER, me)["message.max.bytes"]
    assert (e.value, source(e)) == ("2000", ConfigSource.DYNAMIC_BROKER_CONFIG)
    assert describe(b, ConfigResource.Type.TOPIC, t)["retention.ms"].value == "12345"
    assert big_message_error(b, t) == MESSAGE_TOO_LARGE

    # AlterConfigs replaces the whole set: empty, the default shows through
    alter_broker(b, me, {})
    e = describe(b, ConfigResource.Type.TOPIC, t)["max.message.bytes"]
    assert (e.value, source(e)) == ("5000", ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG)
    assert big_message_error(b, t) == 0
    assert incremental_default(b, "message.max.bytes", None, op=1) == [(0, None, 4, "")]
    e = describe(b, ConfigResource.Type.TOPIC, t)["max.message.bytes"]
    assert (e.value, source(e)) == ("1048588", ConfigSource.DEFAULT_CONFIG)


def test_static_broker_key_is_refused_by_name(broker):
    me = str(broker.broker_id)
    with pytest.raises(KafkaException) as ei:
        alter_broker(broker, me, {"log.dirs": "/elsewhere", "log.retention.ms": "1000"})
    assert err_code(ei.value) == INVALID_REQUEST
    assert "Cannot update these configs dynamically: Set(log.dirs)" in str(ei.value)
    e = describe(broker, ConfigResource.Type.BROKER, me)["log.retention.ms"]
    assert source(e) == ConfigSource.DEFAULT_CONFIG                  # nothing changed
    assert alter_raw(broker, "7", "log.retention.ms", "1000") == (
        INVALID_REQUEST, "Unexpected broker id, expected %s or empty string, but received 7" % me)
    (err, msg, _, _), = incremental_default(broker, "log.retention.ms", "-5")
    assert err == 40 and msg                                        # INVALID_CONFIG
