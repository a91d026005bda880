"""Real serializers through the schema registry and the broker (issue 31):
confluent-kafka's AvroProducer / AvroConsumer and kafkajs with
@kafkajs/confluent-schema-registry register their schemas, encode with
Confluent's wire format, and read every record back, field for field."""
import io
import json
import struct

import avro.io
import avro.schema
import pytest

from registry_support import call, start_registry
from support import ck_conf, create_topic, kafkajs, topic_name

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"},
                    {"name": "item", "type": "string"},
                    {"name": "qty", "type": "int"},
                    {"name": "note", "type": ["null", "string"], "default": None}]}
KEY = {"type": "string"}


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def test_avro_producer_and_consumer_round_trip(reg):
    from confluent_kafka.avro import AvroConsumer, AvroProducer
    topic = topic_name("orders")
    create_topic(reg, topic, partitions=1)
    vs = avro.schema.parse(json.dumps(ORDER))
    ks = avro.schema.parse(json.dumps(KEY))
    p = AvroProducer(ck_conf(reg, **{"schema.registry.url": reg.registry}),
                     default_key_schema=ks, default_value_schema=vs)
    sent = [{"id": i, "item": "widget-%d" % i, "qty": i * 3,
             "note": None if i % 2 else "n%d" % i} for i in range(50)]
    for v in sent:
        p.produce(topic=topic, key="k%d" % v["id"], value=v)
    assert p.flush(30) == 0
    # registered under TopicNameStrategy's subjects, one id each
    assert call(reg, "GET", "/subjects") == (200, sorted([topic + "-key", topic + "-value"]))
    st, latest = call(reg, "GET", "/subjects/%s-value/versions/latest" % topic)
    assert st == 200 and latest["version"] == 1
    c = AvroConsumer(ck_conf(reg, **{"group.id": "g-" + topic, "auto.offset.reset": "earliest",
                                      "schema.registry.url": reg.registry}))
    c.subscribe([topic])
    got, raw_ids = [], set()
    for _ in range(300):
        m = c.poll(0.2)
        if m is None or m.error():
            continue
        got.append((m.key(), m.value()))
        if len(got) == len(sent):
            break
    c.close()
    assert got == [("k%d" % v["id"], v) for v in sent]
    # the bytes on the wire: magic 0, the value subject's id, Avro binary
    from confluent_kafka import Consumer, TopicPartition
    rc = Consumer(ck_conf(reg, **{"group.id": "raw-" + topic}))
    rc.assign([TopicPartition(topic, 0, 0)])
    m = None
    for _ in range(100):
        m = rc.poll(0.2)
        if m is not None and not m.error():
            break
    rc.close()
    magic, sid = struct.unpack(">bI", m.value()[:5])
    assert magic == 0 and sid == latest["id"]
    dec = avro.io.DatumReader(vs).read(avro.io.BinaryDecoder(io.BytesIO(m.value()[5:])))
    assert dec == sent[0]


SCRIPT = r"""
const { Kafka, logLevel } = require("kafkajs");
const { SchemaRegistry, SchemaType } = require("@kafkajs/confluent-schema-registry");
const kafka = new Kafka({ clientId: "sr-js", brokers: [process.env.BOOTSTRAP],
                          logLevel: logLevel.NOTHING });
const registry = new SchemaRegistry({ host: process.env.REGISTRY });
const topic = process.env.TOPIC;
const schema = process.env.SCHEMA;

(async () => {
  const { id } = await registry.register({ type: SchemaType.AVRO, schema },
                                         { subject: topic + "-value" });
  const again = await registry.getRegistryId(topic + "-value", 1);
  const p = kafka.producer();
  await p.connect();
  const sent = [];
  for (let i = 0; i < 20; i++)
    sent.push({ id: i, item: "js-" + i, qty: i, note: i % 3 ? null : "x" + i });
  await p.send({ topic, messages: await Promise.all(sent.map(async v =>
    ({ value: await registry.encode(id, v) }))) });
  await p.disconnect();
  const c = kafka.consumer({ groupId: "g-" + topic, maxWaitTimeInMs: 200 });
  await c.connect();
  await c.subscribe({ topic, fromBeginning: true });
  const got = [];
  await c.run({ eachMessage: async ({ message }) => {
    got.push({ head: [...message.value.subarray(0, 5)],
               value: await registry.decode(message.value) });
  }});
  const deadline = Date.now() + 20000;
  while (got.length < sent.length && Date.now() < deadline)
    await new Promise(r => setTimeout(r, 100));
  await c.disconnect();
  console.log(JSON.stringify({ id, again, sent, got }));
})().catch(e => { console.error(e); process.exit(1); });
"""


def test_kafkajs_confluent_schema_registry_registers_encodes_decodes(reg):
    topic = topic_name("js")
    create_topic(reg, topic, partitions=1)
    out = kafkajs(reg, SCRIPT, timeout=90, REGISTRY=reg.registry, TOPIC=topic,
                  SCHEMA=json.dumps(ORDER))
    assert out["id"] == 1 and out["again"] == 1
    assert [g["value"] for g in out["got"]] == out["sent"]
    assert all(g["head"] == [0, 0, 0, 0, 1] for g in out["got"])
    st, got = call(reg, "GET", "/schemas/ids/1")
    assert st == 200 and json.loads(got["schema"]) == ORDER
