"""Records checked against the schema registry on produce (issue 31,
daemon/registry/sr_validate.c): a topic with confluent.value.schema.validation
(or .key.) takes a record only if its value (key) is magic byte 0 + the id
of a schema registered under its subject (TopicNameStrategy,
RecordNameStrategy, TopicRecordNameStrategy), and with
sluice.value.schema.validation.level=decode only if its Avro body decodes.
A refused batch is refused whole with INVALID_RECORD and (Produce v8+) a
RecordErrors entry naming the record and the reason; nothing of it is
stored, other partitions and topics carry on."""
import gzip
import io
import json
import struct
import time

import avro.io
import avro.schema
import pytest

import kafka_raw as kr
from registry_support import call, register, start_registry
from support import admin_socket, ck_admin, ck_conf, consume, create_topic, socket_http, topic_name

INVALID_RECORD = 87
CORRUPT_MESSAGE = 2
INVALID_CONFIG = 40

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"}]}
USER = {"type": "record", "name": "User", "namespace": "people",
        "fields": [{"name": "name", "type": "string"}]}
VALIDATE = {"confluent.value.schema.validation": "true"}


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def encode(schema, datum):
    out = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(datum, avro.io.BinaryEncoder(out))
    return out.getvalue()


def wire(sid, body):
    return b"\x00" + struct.pack(">I", sid) + body


def reg_id(b, subject, schema):
    st, body = register(b, subject, schema)
    assert st == 200, body
    return body["id"]


def produce_v11(b, topic, values, keys=None, partition=0, codec=0):
    """One batch of values (keys) in Produce v11: (error, base, record errors, message)."""
    now = int(time.time() * 1000)
    keys = keys or [b"k"] * len(values)
    if codec:
        area = b"".join(kr.record_bytes(i, k, v) for i, (k, v) in enumerate(zip(keys, values)))
        batch = kr.raw_batch(gzip.compress(area), len(values), now, attributes=codec)
    else:
        batch = kr.record_batch([(k, v, [], 0) for k, v in zip(keys, values)], now)
    with kr.Conn(b.port) as c:
        r = c.request_flex(kr.API_PRODUCE, 11, kr.produce_v11_body(topic, partition, batch))
    ((_, _, err, base, rec_errs, msg),) = kr.parse_produce_v11_full(r)
    return err, base, rec_errs, msg


def refused(b, topic, values, index, part, **kw):
    """values are refused whole, record index named with part in the message."""
    err, base, rec_errs, msg = produce_v11(b, topic, values, **kw)
    assert (err, base) == (INVALID_RECORD, -1), msg
    assert msg and msg.startswith("Record %d in batch: " % index) and part in msg, msg
    assert rec_errs == [(index, msg)]
    return msg


def accepted(b, topic, values, base, **kw):
    err, got_base, rec_errs, msg = produce_v11(b, topic, values, **kw)
    assert (err, got_base, rec_errs, msg) == (0, base, [], None)


def stored(b, topic, n, partition=0):
    return [m.value() for m in consume(b, topic, [partition], n)]


def raw_produce_version():
    """The Produce version librdkafka sends: v7 before 2.4 (v10 with KIP-951 on)."""
    import confluent_kafka
    major, minor = (int(x) for x in confluent_kafka.libversion()[0].split(".")[:2])
    return 7 if (major, minor) < (2, 4) else 10


def test_avro_producer_works_and_a_plain_producer_is_refused(reg):
    from confluent_kafka import Producer
    from confluent_kafka.avro import AvroProducer
    t = topic_name("sv")
    create_topic(reg, t, 1, VALIDATE)
    p = AvroProducer(ck_conf(reg, **{"schema.registry.url": reg.registry}),
                     default_value_schema=avro.schema.parse(json.dumps(ORDER)))
    sent = [{"id": i, "item": "w%d" % i} for i in range(20)]
    for v in sent:
        p.produce(topic=t, value=v)
    assert p.flush(30) == 0
    sid = call(reg, "GET", "/subjects/%s-value/versions/latest" % t)[1]["id"]
    assert stored(reg, t, 20) == [wire(sid, encode(ORDER, v)) for v in sent]
    # a plain producer: no magic byte, an unknown id, another subject's id
    other = reg_id(reg, topic_name("other") + "-value", USER)
    errors = []

    def dr(err, msg):
        errors.append(err.code() if err else None)
    raw = Producer(ck_conf(reg, **{"retries": 0, "linger.ms": 0}))
    for v in (b"plain text", wire(9999, b"\x02"), wire(other, encode(USER, {"name": "x"}))):
        raw.produce(t, value=v, on_delivery=dr)
        raw.flush(30)
    # librdkafka 2.0 sends Produce v7: before v8 Kafka has no INVALID_RECORD
    # on the wire and answers CORRUPT_MESSAGE, as we do (v11 below gets 87)
    assert errors == [INVALID_RECORD if raw_produce_version() >= 8 else CORRUPT_MESSAGE] * 3
    # nothing of them was stored: the next good record follows the AvroProducer's
    accepted(reg, t, [wire(sid, encode(ORDER, {"id": 99, "item": "z"}))], 20)


def test_record_errors_name_the_record_and_the_reason(reg):
    t = topic_name("sv")
    create_topic(reg, t, 2, VALIDATE)
    sid = reg_id(reg, t + "-value", ORDER)
    other = reg_id(reg, topic_name("other") + "-value", USER)
    good = [wire(sid, encode(ORDER, {"id": i, "item": "g"})) for i in range(3)]
    refused(reg, t, good[:1] + [b"nope"] + good[1:], 1,
            "value is not in the schema registry's format (magic byte 0")
    refused(reg, t, good + [b"\x01" + good[0][1:]], 3, "magic byte 0")
    refused(reg, t, [wire(4242, b"")], 0, "value's schema id 4242 is unknown")
    refused(reg, t, good[:2] + [wire(other, b"\x02x")], 2,
            "value's schema id %d is not registered under subject %s-value" % (other, t))
    # compressed batches are walked the same way
    refused(reg, t, good + [b"\x00\x00"], 3, "magic byte 0", codec=1)
    accepted(reg, t, good, 0, codec=1)
    # /metrics counts the refusals (one per refused batch: the walk stops there)
    st, text, _ = socket_http(admin_socket(reg), "/metrics")
    assert st == 200 and "\nsluice_schema_registry_validation_refusals_total 5\n" in text
    # a tombstone passes, as Confluent Server lets it
    accepted(reg, t, [None, good[0]], 3)
    assert stored(reg, t, 5) == good + [None, good[0]]
    # nothing stored in partition 1 by the refusals above; it takes good ones
    accepted(reg, t, good, 0, partition=1)


def test_a_bad_partition_does_not_stop_the_others_in_one_request(reg):
    t, plain = topic_name("sv"), topic_name("plain")
    create_topic(reg, t, 2, VALIDATE)
    create_topic(reg, plain, 1)
    sid = reg_id(reg, t + "-value", ORDER)
    now = int(time.time() * 1000)
    good = kr.record_batch([(b"k", wire(sid, encode(ORDER, {"id": 1, "item": "a"})), [], 0)], now)
    bad = kr.record_batch([(b"k", b"raw bytes", [], 0)], now)
    body = (kr.cstring(None) + kr.i16(-1) + kr.i32(10000) + kr.carray(
        [kr.cstring(t) + kr.carray([kr.i32(0) + kr.cbytes(bad) + kr.tags(),
                                    kr.i32(1) + kr.cbytes(good) + kr.tags()]) + kr.tags(),
         kr.cstring(plain) + kr.carray([kr.i32(0) + kr.cbytes(bad) + kr.tags()]) + kr.tags()])
        + kr.tags())
    with kr.Conn(reg.port) as c:
        res = kr.parse_produce_v11_full(c.request_flex(kr.API_PRODUCE, 11, body))
    assert [(tp, p, err, base) for tp, p, err, base, _, _ in res] == \
        [(t, 0, INVALID_RECORD, -1), (t, 1, 0, 0), (plain, 0, 0, 0)]
    assert stored(reg, plain, 1) == [b"raw bytes"]
    # before v8 there is no INVALID_RECORD: CORRUPT_MESSAGE, as Kafka answers
    with kr.Conn(reg.port) as c:
        (r3,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, bad)))
    assert r3[2:4] == (CORRUPT_MESSAGE, -1)


def test_level_decode_checks_the_avro_body(reg):
    t = topic_name("sv")
    create_topic(reg, t, 1, dict(VALIDATE, **{"sluice.value.schema.validation.level": "decode"}))
    sid = reg_id(reg, t + "-value", ORDER)
    good = [wire(sid, encode(ORDER, {"id": i, "item": "item-%d" % i})) for i in range(5)]
    accepted(reg, t, good, 0)
    # a body cut short, one with bytes left over, a string length past the end
    refused(reg, t, good[:2] + [good[2][:-3]], 2, "value does not decode with schema id %d" % sid)
    refused(reg, t, [good[0] + b"\x00"], 0, "does not decode")
    refused(reg, t, [wire(sid, b"\x02\x7f")], 0, "does not decode")
    accepted(reg, t, good[:1], 5, codec=1)
    assert stored(reg, t, 6) == good + good[:1]
    # level id takes the same bad body: only the id is checked
    t2 = topic_name("sv")
    create_topic(reg, t2, 1, VALIDATE)
    sid2 = reg_id(reg, t2 + "-value", ORDER)
    accepted(reg, t2, [wire(sid2, b"\x02\x7f")], 0)


@pytest.mark.parametrize("strategy", ["RecordNameStrategy", "TopicRecordNameStrategy"])
def test_strategies(reg, strategy):
    t = topic_name("sv")
    create_topic(reg, t, 1, dict(VALIDATE, **{
        "confluent.value.subject.name.strategy":
            "io.confluent.kafka.serializers.subject." + strategy}))
    subject = "shop.Order" if strategy == "RecordNameStrategy" else t + "-shop.Order"
    sid = reg_id(reg, subject, ORDER)
    # the same schema under the topic's own subject does not count here
    uid = reg_id(reg, t + "-value", USER)
    v = wire(sid, encode(ORDER, {"id": 1, "item": "a"}))
    accepted(reg, t, [v], 0)
    want = "people.User" if strategy == "RecordNameStrategy" else t + "-people.User"
    refused(reg, t, [v, wire(uid, b"\x02x")], 1,
            "value's schema id %d is not registered under subject %s" % (uid, want))


def test_key_validation_and_topic_name_strategy_default(reg):
    t = topic_name("sv")
    create_topic(reg, t, 1, {"confluent.key.schema.validation": "true",
                             "confluent.key.subject.name.strategy": "TopicNameStrategy"})
    kid = reg_id(reg, t + "-key", {"type": "string"})
    key = wire(kid, encode({"type": "string"}, "order-1"))
    # values are not checked; keys are, a null key passes
    accepted(reg, t, [b"any value"], 0, keys=[key])
    accepted(reg, t, [b"v"], 1, keys=[None])
    refused(reg, t, [b"v", b"v"], 1, "key is not in the schema registry's format",
            keys=[key, b"plain-key"])
    vid = reg_id(reg, t + "-value", ORDER)
    refused(reg, t, [b"v"], 0, "key's schema id %d is not registered under subject %s-key"
            % (vid, t), keys=[wire(vid, b"")])


def test_alter_configs_turns_validation_on_and_off_at_once(reg):
    """kafka-configs' way (AlterConfigs through confluent-kafka's AdminClient):
    the next produce after the answer follows the new setting."""
    from confluent_kafka.admin import ConfigResource
    t = topic_name("sv")
    create_topic(reg, t, 1)
    accepted(reg, t, [b"free text"], 0)
    a = ck_admin(reg)

    def alter(value):
        res = ConfigResource(ConfigResource.Type.TOPIC, t,
                             set_config={"confluent.value.schema.validation": value})
        for f in a.alter_configs([res]).values():
            f.result(timeout=15)
    alter("true")
    refused(reg, t, [b"free text"], 0, "magic byte 0")
    desc = a.describe_configs([ConfigResource(ConfigResource.Type.TOPIC, t)])
    entries = list(desc.values())[0].result(timeout=15)
    assert entries["confluent.value.schema.validation"].value == "true"
    assert entries["confluent.value.subject.name.strategy"].value == \
        "io.confluent.kafka.serializers.subject.TopicNameStrategy"
    assert entries["sluice.value.schema.validation.level"].value == "id"
    st, text, _ = socket_http(admin_socket(reg), "/sql?format=json", body=(
        "SELECT name, value FROM topic_configs WHERE topic = '%s' AND name LIKE '%%schema%%' "
        "ORDER BY name" % t))
    assert st == 200, text
    rows = [tuple(r.values()) for r in json.loads(text)]
    assert rows == [("confluent.key.schema.validation", "false"),
                    ("confluent.value.schema.validation", "true"),
                    ("sluice.key.schema.validation.level", "id"),
                    ("sluice.value.schema.validation.level", "id")]
    alter("false")
    accepted(reg, t, [b"free text"], 1)


def test_bad_config_values_are_refused(reg):
    from confluent_kafka.admin import NewTopic
    a = ck_admin(reg)
    for name, value in (("confluent.value.schema.validation", "yes"),
                        ("confluent.key.subject.name.strategy", "MyStrategy"),
                        ("sluice.value.schema.validation.level", "full")):
        f = a.create_topics([NewTopic(topic_name("sv"), 1, 1, config={name: value})])
        with pytest.raises(Exception) as e:
            list(f.values())[0].result(timeout=15)
        assert e.value.args[0].code() == INVALID_CONFIG
        assert name in e.value.args[0].str()


def test_a_schema_registered_after_the_topic_is_accepted_at_once(reg):
    t = topic_name("sv")
    create_topic(reg, t, 1, VALIDATE)
    refused(reg, t, [wire(1000, b"")], 0, "unknown")
    for i in range(3):                        # each new version counts as soon as answered
        schema = dict(ORDER, fields=ORDER["fields"] + [
            {"name": "f%d" % j, "type": "int", "default": 0} for j in range(i)])
        sid = reg_id(reg, t + "-value", schema)
        accepted(reg, t, [wire(sid, b"")], i)
    # a soft-deleted version still counts (its id is still served), as in Confluent
    st, _ = call(reg, "DELETE", "/subjects/%s-value/versions/3" % t)
    assert st == 200
    accepted(reg, t, [wire(sid, b"")], 3)
    # a permanently deleted subject does not
    assert call(reg, "DELETE", "/subjects/%s-value" % t)[0] == 200
    assert call(reg, "DELETE", "/subjects/%s-value?permanent=true" % t)[0] == 200
    refused(reg, t, [wire(sid, b"")], 0, "value's schema id %d is" % sid)


def test_a_record_longer_than_the_window_is_checked(reg):
    """A compressed record longer than the validator's 256 KiB window streams
    by: its id is checked (its body is not decoded: sr_validate.c); an
    uncompressed one is decoded whole at level decode."""
    t = topic_name("sv")
    create_topic(reg, t, 1, dict(VALIDATE, **{"sluice.value.schema.validation.level": "decode",
                                             "max.message.bytes": "2000000"}))
    sid = reg_id(reg, t + "-value", {"type": "string"})
    big = wire(sid, encode({"type": "string"}, "x" * 300000))
    accepted(reg, t, [big], 0, codec=1)
    refused(reg, t, [b"\x01" + big[1:]], 0, "magic byte 0", codec=1)
    refused(reg, t, [wire(sid + 1, big[5:])], 0, "schema id %d is unknown" % (sid + 1), codec=1)
    accepted(reg, t, [big], 1)
    refused(reg, t, [big[:-1]], 0, "does not decode")
    assert stored(reg, t, 2) == [big, big]
