"""sluice-export --schema-registry (issue 32): values that confluent_kafka's
AvroProducer framed (magic 0, schema id, Avro body) land as native Avro
records of the schema registered under their id, read back with Debian's
python3-avro and compared with what was sent, field for field; a new schema
id starts a new file; values not framed, with an unknown id, or whose body
does not decode with its schema land in the envelope, byte for byte."""
import json
import os
import struct
import subprocess

import avro.datafile
import avro.io
import avro.schema
import pytest

from registry_support import call, start_registry
from support import ck_conf, ck_producer, create_topic, produce_ok, topic_name
from test_export import exporter

V1 = {"type": "record", "name": "Order", "namespace": "shop",
      "fields": [{"name": "id", "type": "long"}, {"name": "item", "type": "string"},
                 {"name": "note", "type": ["null", "string"], "default": None}]}
V2 = dict(V1, fields=V1["fields"] + [{"name": "qty", "type": "int", "default": 1}])


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def avro_send(reg, topic, schema, values, partition, user=None):
    """AvroProducer (as user "name:password" if given): [(offset, value)] in
    send order."""
    from confluent_kafka.avro import AvroProducer
    auth = {"schema.registry.basic.auth.credentials.source": "USER_INFO",
            "schema.registry.basic.auth.user.info": user} if user else {}
    p = AvroProducer(ck_conf(reg, **{"schema.registry.url": reg.registry}, **auth),
                     default_value_schema=avro.schema.parse(json.dumps(schema)))
    offs = []
    for v in values:
        p.produce(topic=topic, value=v, partition=partition,
                  on_delivery=lambda e, m: offs.append(None if e else m.offset()))
    assert p.flush(30) == 0
    assert None not in offs and len(offs) == len(values)
    return list(zip(offs, values))


def raw_send(reg, topic, values, partition):
    ms = produce_ok(ck_producer(reg), topic, [{"value": v, "partition": partition} for v in values])
    return [(m.offset(), v) for m, v in zip(ms, values)]


def read_partition(root, topic, p):
    """[(first, last, writer schema, records)] of the partition's files."""
    d = os.path.join(str(root), topic, "partition=%d" % p)
    out = []
    for n in os.listdir(d):
        assert n.endswith(".avro"), n
        _, _, first, last = n[:-len(".avro")].rsplit("+", 3)
        with open(os.path.join(d, n), "rb") as f:
            r = avro.datafile.DataFileReader(f, avro.io.DatumReader())
            schema = json.loads(r.meta["avro.schema"].decode())
            out.append((int(first), int(last), schema, list(r)))
    return sorted(out, key=lambda x: x[0])


def test_registry_framed_values_are_written_natively_one_schema_a_file(reg, tmp_path):
    t = topic_name("exsr")
    create_topic(reg, t, partitions=2)
    v1 = lambda i, p: {"id": i, "item": "w-%d-%d" % (p, i), "note": None if i % 2 else "n%d" % i}
    v2 = lambda i, p: dict(v1(i, p), qty=i * 3)
    exp = {}      # partition -> {offset: ("native", schema name fields, value) | ("env", bytes)}
    for p in (0, 1):
        e = exp[p] = {}
        for off, v in avro_send(reg, t, V1, [v1(i, p) for i in range(20)], p):
            e[off] = ("v1", v)
        plain = [b"plain-%d" % i for i in range(3)] + [b"", b"\x00"]
        for off, v in raw_send(reg, t, plain, p):
            e[off] = ("env", v)
        for off, v in avro_send(reg, t, V2, [v2(i, p) for i in range(20, 35)], p):
            e[off] = ("v2", v)
        st, latest = call(reg, "GET", "/subjects/%s-value/versions/1" % t)
        assert st == 200
        id1 = latest["id"]
        good = b"\x00" + struct.pack(">I", id1) + b"\x02\x06abc\x00"   # id 1, "abc", null
        bad = [b"\x00" + struct.pack(">I", 999999) + b"\x02\x06abc\x00",   # unknown id
               good + b"\x00",                                        # a byte left over
               good[:-2],                                             # cut short
               None]                                                  # a tombstone
        for off, v in raw_send(reg, t, bad, p):
            e[off] = ("env", v)
        for off, v in raw_send(reg, t, [good], p):
            e[off] = ("v1", {"id": 1, "item": "abc", "note": None})
        for off, v in avro_send(reg, t, V1, [v1(i, p) for i in range(40, 50)], p):
            e[off] = ("v1", v)

    p = subprocess.run([exporter(), "--bootstrap", reg.bootstrap, "--topic", t, "--to",
                        str(tmp_path), "--until-end", "--schema-registry", reg.registry],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    for part in (0, 1):
        files = read_partition(tmp_path, t, part)
        got, kinds = {}, []
        for first, last, schema, recs in files:
            if schema["name"] == "Order" or schema.get("namespace") == "shop":
                kind = "v2" if len(schema["fields"]) == 4 else "v1"
                assert [f["name"] for f in schema["fields"]] == \
                    [f["name"] for f in (V2 if kind == "v2" else V1)["fields"]]
                assert len(recs) == last - first + 1, (first, last, len(recs))
                for i, r in enumerate(recs):
                    got[first + i] = (kind, r)
            else:
                for r in recs:
                    assert (r["topic"], r["partition_id"]) == (t, part)
                    got[r["offset"]] = ("env", r["value"])
            kinds.append(kind if schema.get("namespace") == "shop" else "env")
        assert got == exp[part]
        # a file holds one kind; each change of schema id (or to the envelope) a new file
        assert kinds == ["v1", "env", "v2", "env", "v1"], kinds


def test_an_unreachable_registry_fails_the_run_naming_it(reg, tmp_path):
    t = topic_name("exsr-down")
    create_topic(reg, t, partitions=1)
    avro_send(reg, t, V1, [{"id": 1, "item": "x", "note": None}], 0)
    from conftest import free_port
    p = subprocess.run([exporter(), "--bootstrap", reg.bootstrap, "--topic", t, "--to",
                        str(tmp_path), "--until-end", "--schema-registry",
                        "http://127.0.0.1:%d" % free_port()],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 2, p.stderr
    assert b"schema registry" in p.stderr and b"Connection refused" in p.stderr, p.stderr
    assert not [n for _, _, ns in os.walk(str(tmp_path)) for n in ns if n.endswith(".avro")]
    # a usage error for a URL that is not one
    p = subprocess.run([exporter(), "--bootstrap", reg.bootstrap, "--topic", t, "--to",
                        str(tmp_path), "--schema-registry", "127.0.0.1:1"],
                       stderr=subprocess.PIPE, timeout=30)
    assert p.returncode == 1 and b"not an http:// URL" in p.stderr, p.stderr


def test_registry_basic_auth_user_password(start_broker, tmp_path):
    """--schema-registry-user sends Basic credentials (a SCRAM user, as the
    registry authenticates them): right ones export natively, wrong ones
    fail the run with the registry's 401."""
    from conftest import free_port
    from sasl_support import add_user
    # an authorizer makes the registry check credentials; no ACLs: open to all
    reg = start_registry(start_broker, **{
        "admin.listeners": "http://127.0.0.1:%d" % free_port(),
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true"})
    add_user(reg, "exp", "exp-pw")
    t = topic_name("exsr-auth")
    create_topic(reg, t, partitions=1)
    sent = [v for _, v in avro_send(reg, t, V1, [{"id": i, "item": "a%d" % i, "note": None}
                                                  for i in range(5)], 0, "exp:exp-pw")]

    def export(user, out):
        return subprocess.run([exporter(), "--bootstrap", reg.bootstrap, "--topic", t, "--to",
                               str(tmp_path / out), "--until-end", "--schema-registry",
                               reg.registry, "--schema-registry-user", user],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    r = export("exp:wrong", "bad")
    assert r.returncode == 2 and b"HTTP 401" in r.stderr, (r.returncode, r.stderr)
    r = export("exp:exp-pw", "good")
    assert r.returncode == 0, r.stderr
    [(first, last, schema, recs)] = read_partition(tmp_path / "good", t, 0)
    assert schema["name"] == "Order" and recs == sent


RICH = {"type": "record", "name": "Rich", "namespace": "shop", "fields": [
    {"name": "ok", "type": "boolean"}, {"name": "f", "type": "float"},
    {"name": "d", "type": "double"}, {"name": "raw", "type": "bytes"},
    {"name": "md5", "type": {"type": "fixed", "name": "Md5", "size": 4}},
    {"name": "color", "type": {"type": "enum", "name": "Color", "symbols": ["RED", "GREEN"]}},
    {"name": "tags", "type": {"type": "array", "items": "string"}},
    {"name": "nils", "type": {"type": "array", "items": "null"}},
    {"name": "attrs", "type": {"type": "map", "values": ["null", "long"]}},
    {"name": "inner", "type": ["null", {"type": "record", "name": "Inner",
                                        "fields": [{"name": "n", "type": "int"}]}]}]}


def test_every_avro_type_is_recognised_and_written_natively(reg, tmp_path):
    t = topic_name("exsr-rich")
    create_topic(reg, t, partitions=1)
    vals = [{"ok": i % 2 == 0, "f": 0.5 * i, "d": -1.25 * i, "raw": bytes(range(i)),
             "md5": b"\x00\x01\x02" + bytes([i]), "color": "GREEN" if i % 3 else "RED",
             "tags": ["t%d" % k for k in range(i % 4)], "nils": [None] * (i % 3),
             "attrs": {"a%d" % k: (None if k % 2 else k * 1000) for k in range(i % 5)},
             "inner": {"n": -i} if i % 2 else None} for i in range(30)]
    sent = [v for _, v in avro_send(reg, t, RICH, vals, 0)]
    p = subprocess.run([exporter(), "--bootstrap", reg.bootstrap, "--topic", t, "--to",
                        str(tmp_path), "--until-end", "--schema-registry", reg.registry],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    [(first, last, schema, recs)] = read_partition(tmp_path, t, 0)
    assert schema["name"] == "Rich" and (first, last) == (0, 29)
    assert recs == sent
