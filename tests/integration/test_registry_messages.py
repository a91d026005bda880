"""Typed messages in SQL (issue 31, Deliver 5): the `messages` table's
key_schema_id, value_schema_id, key_json and value_json decode records in
Confluent's wire format with the registry's schema, so json_extract reads
their fields; bytes that are not in that format, an id nobody registered, a
body that does not decode give NULL, never an error.  Avro with a union, an
array, a map, an enum, bytes and a reference to another subject's schema; a
JSON Schema body as its text; Protobuf NULL (no decoder)."""
import io
import json
import struct

import avro.io
import avro.schema
import pytest

from registry_support import register, start_registry
from support import (admin_socket, ck_conf, ck_producer, create_topic, produce_ok,
                     socket_http, topic_name)

ORDER = {"type": "record", "name": "Order", "namespace": "shop",
         "fields": [{"name": "id", "type": "long"},
                    {"name": "amount", "type": "double"},
                    {"name": "note", "type": ["null", "string"], "default": None},
                    {"name": "tags", "type": {"type": "array", "items": "string"}},
                    {"name": "attrs", "type": {"type": "map", "values": "int"}},
                    {"name": "state", "type": {"type": "enum", "name": "State",
                                               "symbols": ["NEW", "PAID"]}},
                    {"name": "raw", "type": "bytes"}]}
KEY = {"type": "record", "name": "OrderKey", "namespace": "shop",
       "fields": [{"name": "shop", "type": "string"}]}


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def sql(b, stmt):
    st, text, _ = socket_http(admin_socket(b), "/sql?format=json", body=stmt)
    assert st == 200, text
    return [list(r.values()) if isinstance(r, dict) else list(r) for r in json.loads(text)]


def encode(schema, value):
    out = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(
        value, avro.io.BinaryEncoder(out))
    return out.getvalue()


def wire(sid, body):
    return struct.pack(">bI", 0, sid) + body


def order(i):
    return {"id": i, "amount": i * 2.5, "note": None if i % 2 else "n%d" % i,
            "tags": ["t%d" % k for k in range(i % 3)], "attrs": {"a": i},
            "state": "PAID" if i % 2 else "NEW", "raw": b"\x01\x02"}


def as_json(v):
    """What value_json holds for an order: a union's plain value, bytes as
    the code points of the same numbers (Avro's JSON encoding of bytes)."""
    return dict(v, raw=v["raw"].decode("latin-1"))


def test_avro_values_and_keys_read_as_json_with_their_schema_ids(reg):
    from confluent_kafka.avro import AvroProducer
    t = topic_name("typed")
    create_topic(reg, t, 1)
    p = AvroProducer(ck_conf(reg, **{"schema.registry.url": reg.registry}),
                     default_key_schema=avro.schema.parse(json.dumps(KEY)),
                     default_value_schema=avro.schema.parse(json.dumps(ORDER)))
    sent = [order(i) for i in range(20)]
    for v in sent:
        p.produce(topic=t, partition=0, key={"shop": "s%d" % (v["id"] % 3)}, value=v)
    assert p.flush(30) == 0
    vid = register(reg, t + "-value", ORDER)[1]["id"]
    kid = register(reg, t + "-key", KEY)[1]["id"]
    # then what no schema reads: plain bytes, an unknown id, a body that
    # does not decode under a known id, a null value
    bad = [b"plain text", wire(999999, b"\x02"), wire(vid, b"\xff\xff"), None]
    q = ck_producer(reg)
    produce_ok(q, t, [{"value": v, "partition": 0} for v in bad])

    rows = sql(reg, "SELECT offset, key_schema_id, value_schema_id, key_json, value_json "
                    "FROM messages WHERE topic = '%s' ORDER BY offset" % t)
    assert len(rows) == len(sent) + len(bad)
    for (off, ks, vs, kj, vj), v in zip(rows, sent):
        assert (ks, vs) == (kid, vid), off
        assert json.loads(kj) == {"shop": "s%d" % (v["id"] % 3)}
        assert json.loads(vj) == as_json(v), off
    assert [r[1:] for r in rows[len(sent):]] == [
        [None, None, None, None], [None, None, None, None],
        [None, vid, None, None], [None, None, None, None]]
    # fields by json_extract, as the README's example
    got = sql(reg, "SELECT json_extract(value_json, '$.id'), json_extract(value_json, '$.amount'),"
                   " json_extract(value_json, '$.note'), json_extract(value_json, '$.tags[0]')"
                   " FROM messages WHERE topic = '%s' AND json_extract(value_json, '$.amount') > 40"
                   " ORDER BY offset" % t)
    want = [[v["id"], v["amount"], v["note"], (v["tags"] or [None])[0]]
            for v in sent if v["amount"] > 40]
    assert got == want and len(want) == 3


def test_references_json_schema_and_protobuf(reg):
    money = {"type": "record", "name": "Money", "namespace": "fin",
             "fields": [{"name": "cents", "type": "long"}, {"name": "ccy", "type": "string"}]}
    assert register(reg, "money", money)[0] == 200
    pay = {"type": "record", "name": "Payment", "namespace": "fin",
           "fields": [{"name": "to", "type": "string"}, {"name": "sum", "type": "fin.Money"}]}
    st, got = register(reg, "payment", pay,
                       references=[{"name": "fin.Money", "subject": "money", "version": 1}])
    assert st == 200, got
    pid = got["id"]
    inline = dict(pay, fields=[pay["fields"][0], {"name": "sum", "type": money}])
    value = {"to": "bob", "sum": {"cents": 1250, "ccy": "EUR"}}
    st, got = register(reg, "js", '{"type":"object","properties":{"a":{"type":"integer"}}}',
                       schemaType="JSON")
    assert st == 200, got
    jid = got["id"]
    st, got = register(reg, "pb", 'syntax = "proto3"; message M { int32 a = 1; }',
                       schemaType="PROTOBUF")
    assert st == 200, got
    pbid = got["id"]
    t = topic_name("typed2")
    create_topic(reg, t, 1)
    produce_ok(ck_producer(reg), t, [
        {"value": wire(pid, encode(inline, value)), "partition": 0},
        {"value": wire(jid, b'{"a": 7}'), "partition": 0},
        {"value": wire(pbid, b"\x00\x08\x07"), "partition": 0},
        {"value": wire(jid, b"not JSON at all"), "partition": 0}])
    rows = sql(reg, "SELECT value_schema_id, value_json FROM messages WHERE topic = '%s' "
                    "ORDER BY offset" % t)
    assert rows[0][0] == pid and json.loads(rows[0][1]) == value
    assert rows[1] == [jid, '{"a": 7}']
    assert rows[2] == [pbid, None]
    assert rows[3] == [jid, None]                 # a JSON Schema body that is not JSON
    # so json_extract over the whole topic works, row by row
    assert sql(reg, "SELECT json_extract(value_json, '$.a') FROM messages WHERE topic = '%s' "
                    "ORDER BY offset" % t) == [[None], [7], [None], [None]]
    assert sql(reg, "SELECT json_extract(value_json, '$.sum.cents') FROM messages "
                    "WHERE topic = '%s' AND offset = 0" % t) == [[1250]]
