#!/usr/bin/python3
"""Writes tests/unit/sch_avro_fixtures.h from python3-avro (Debian's; the
reference implementation's Python port):
  - Avro bodies it encoded, each with its schema and the JSON that
    sch_avro_to_json must give for it (records as objects, a union as its
    branch's plain value, bytes and fixed as one code point per byte);
  - random schemas of every kind of type (floats aside: to_json writes a
    float's shortest decimal, Python its double) with random data encoded,
    and the JSON python3-avro's reader gives for them;
  - pairs of random evolving record schemas (seeded, so the file is
    reproducible) with the verdict of avro.compatibility's
    ReaderWriterCompatibilityChecker (a port of Java's SchemaCompatibility),
    which sch_avro_compatible must match; pairs it refuses to parse are
    left out.
Regenerate: /usr/bin/python3 tests/unit/sch_fixtures.py > tests/unit/sch_avro_fixtures.h
"""
import io
import json
import sys

import random

import avro.io
import avro.schema
from avro.compatibility import ReaderWriterCompatibilityChecker, SchemaCompatibilityType

SCHEMA = {
    "type": "record", "name": "Order", "namespace": "shop",
    "fields": [
        {"name": "id", "type": "long"},
        {"name": "amount", "type": "double"},
        {"name": "qty", "type": "int"},
        {"name": "ratio", "type": "float"},
        {"name": "paid", "type": "boolean"},
        {"name": "nothing", "type": "null"},
        {"name": "note", "type": "string"},
        {"name": "blob", "type": "bytes"},
        {"name": "status", "type": {"type": "enum", "name": "Status",
                                    "symbols": ["NEW", "PAID", "SHIPPED"]}},
        {"name": "hash", "type": {"type": "fixed", "name": "H4", "size": 4}},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "attrs", "type": {"type": "map", "values": "long"}},
        {"name": "coupon", "type": ["null", "string"], "default": None},
        {"name": "next", "type": ["null", "Order"], "default": None},
    ],
}

def order(i, nxt=None):
    return {
        "id": -(2 ** 40) - i if i % 2 else 2 ** 62 + i,
        "amount": 12.5 + i * 0.25,
        "qty": -7 * i,
        "ratio": 0.75,
        "paid": bool(i % 2),
        "nothing": None,
        "note": "caf\u00e9 \"quoted\" \\ \n\t\u2603 %d" % i,
        "blob": bytes([0, 1, 0x22, 0x5c, 0x7f, 0x80, 0xff, i & 0xff]),
        "status": ["NEW", "PAID", "SHIPPED"][i % 3],
        "hash": bytes([0xde, 0xad, 0xbe, i & 0xff]),
        "tags": ["t%d" % k for k in range(i % 4)],
        "attrs": {"k%d" % k: k * 1000 - 5 for k in range(i % 3)},
        "coupon": None if i % 2 else "SAVE%d" % i,
        "next": nxt,
    }

def as_json(v):
    if isinstance(v, bytes):
        return v.decode("latin-1")
    if isinstance(v, dict):
        return {k: as_json(x) for k, x in v.items()}
    if isinstance(v, list):
        return [as_json(x) for x in v]
    return v

def encode(schema, datum):
    out = io.BytesIO()
    avro.io.DatumWriter(schema).write(datum, avro.io.BinaryEncoder(out))
    return out.getvalue()

def c_str(b):
    return '"' + "".join("\\x%02x" % c for c in b) + '"'

PRIMS = ["null", "boolean", "int", "long", "float", "double", "bytes", "string"]
FIELDS = ["a", "b", "c", "d"]

def rtype(rnd, depth):
    r = rnd.random()
    if depth > 2 or r < 0.45:
        return rnd.choice(PRIMS)
    if r < 0.55:
        return {"type": "array", "items": rtype(rnd, depth + 1)}
    if r < 0.62:
        return {"type": "map", "values": rtype(rnd, depth + 1)}
    if r < 0.75:
        return rnd.sample(PRIMS, rnd.randint(1, 3))
    if r < 0.82:
        syms = rnd.sample(["A", "B", "C", "D"], rnd.randint(1, 4))
        e = {"type": "enum", "name": rnd.choice(["E", "E2"]), "symbols": syms}
        if rnd.random() < 0.3:
            e["default"] = syms[0]
        return e
    if r < 0.88:
        return {"type": "fixed", "name": rnd.choice(["F", "F2"]), "size": rnd.choice([2, 4])}
    return record(rnd, depth + 1, rnd.choice(["Inner", "Inner2"]))

def default_for(t):
    if isinstance(t, list):
        return default_for(t[0])
    if isinstance(t, dict):
        return {"array": [], "map": {}, "enum": t.get("symbols", [""])[0],
                "fixed": "a" * t.get("size", 0)}.get(t["type"])
    return {"null": None, "boolean": True, "int": 1, "long": 2, "float": 1.5, "double": 2.5,
            "bytes": "x", "string": "s"}[t]

def record(rnd, depth, name):
    fields = []
    for i in range(rnd.randint(0, 3)):
        t = rtype(rnd, depth)
        f = {"name": rnd.choice(FIELDS) + str(i), "type": t}
        if rnd.random() < 0.4:
            d = default_for(t)
            if d is not None or t == "null" or (isinstance(t, list) and t[0] == "null"):
                f["default"] = d
        if rnd.random() < 0.15:
            f["aliases"] = [rnd.choice(FIELDS) + str(rnd.randint(0, 2))]
        fields.append(f)
    r = {"type": "record", "name": name, "fields": fields}
    if rnd.random() < 0.1:
        r["aliases"] = [rnd.choice(["R", "Inner", "Inner2"])]
    return r

def compat_pairs(n):
    rnd = random.Random(31)
    out = []
    while len(out) < n:
        a = record(rnd, 0, "R")
        b = record(rnd, 0, "R")
        if rnd.random() < 0.4:  # an evolution of a: one field's type changed
            b = json.loads(json.dumps(a))
            if b["fields"]:
                f = rnd.choice(b["fields"])
                f["type"] = rtype(rnd, 1)
                f.pop("default", None)
        ta, tb = json.dumps(a, separators=(",", ":")), json.dumps(b, separators=(",", ":"))
        try:
            ra, rb = avro.schema.parse(ta), avro.schema.parse(tb)
        except Exception:
            continue
        res = ReaderWriterCompatibilityChecker().get_compatibility(ra, rb)
        out.append((ta, tb, int(res.compatibility == SchemaCompatibilityType.compatible)))
    return out

def random_schema(rnd, depth, names):
    r = rnd.random()
    prims = [p for p in PRIMS if p != "float"]
    if depth > 3 or r < 0.4:
        return rnd.choice(prims)
    if r < 0.5:
        return {"type": "array", "items": random_schema(rnd, depth + 1, names)}
    if r < 0.6:
        return {"type": "map", "values": random_schema(rnd, depth + 1, names)}
    if r < 0.72:
        return rnd.sample(prims, rnd.randint(1, 4))
    names.append(len(names))
    n = len(names)
    if r < 0.8:
        return {"type": "enum", "name": "E%d" % n, "symbols": rnd.sample(list("ABCDEFG"), rnd.randint(1, 5))}
    if r < 0.86:
        return {"type": "fixed", "name": "F%d" % n, "size": rnd.randint(0, 5)}
    return {"type": "record", "name": "R%d" % n,
            "fields": [{"name": "f%d" % i, "type": random_schema(rnd, depth + 1, names)}
                       for i in range(rnd.randint(0, 4))]}

def random_datum(rnd, t):
    if isinstance(t, list):
        return random_datum(rnd, rnd.choice(t))
    if isinstance(t, dict):
        k = t["type"]
        if k == "array":
            return [random_datum(rnd, t["items"]) for _ in range(rnd.randint(0, 4))]
        if k == "map":
            return {"k%d%s" % (i, rnd.choice(["", "\u00e9", "\n"])): random_datum(rnd, t["values"])
                    for i in range(rnd.randint(0, 3))}
        if k == "enum":
            return rnd.choice(t["symbols"])
        if k == "fixed":
            return bytes(rnd.randrange(256) for _ in range(t["size"]))
        return {f["name"]: random_datum(rnd, f["type"]) for f in t["fields"]}
    return {
        "null": lambda: None,
        "boolean": lambda: rnd.random() < 0.5,
        "int": lambda: rnd.randint(-2 ** 31, 2 ** 31 - 1),
        "long": lambda: rnd.choice([rnd.randint(-2 ** 63, 2 ** 63 - 1), rnd.randint(-1000, 1000)]),
        "double": lambda: rnd.choice([rnd.uniform(-1e12, 1e12), rnd.randint(-100, 100) / 8.0]),
        "bytes": lambda: bytes(rnd.randrange(256) for _ in range(rnd.randint(0, 6))),
        "string": lambda: "".join(rnd.choice(["a", "\u00e9", '"', "\\", "\u2603", "\x01"])
                                  for _ in range(rnd.randint(0, 6))),
    }[t]()

def random_bodies(n):
    rnd = random.Random(5)
    out = []
    while len(out) < n:
        t = random_schema(rnd, 0, [])
        text = json.dumps(t, separators=(",", ":"))
        schema = avro.schema.parse(text)
        try:
            body = encode(schema, random_datum(rnd, t))
        except Exception:
            continue
        # The expected value is what the reader decodes (the writer picks a
        # union's branch by the datum).
        back = avro.io.DatumReader(schema).read(avro.io.BinaryDecoder(io.BytesIO(body)))
        out.append((text, body, json.dumps(as_json(back)).encode()))
    return out

def main():
    text = json.dumps(SCHEMA)
    schema = avro.schema.parse(text)
    data = [order(0), order(1), order(2, order(3, order(4))), order(5)]
    w = sys.stdout.write
    w("/* Generated by tests/unit/sch_fixtures.py with python3-avro %s: do not edit. */\n"
      % getattr(avro, "__version__", "?"))
    w("static const char sch_fx_schema[] = %s;\n" % json.dumps(text))
    w("static const struct { const char *body; size_t len; const char *json; } sch_fx[] = {\n")
    for d in data:
        body = encode(schema, d)
        want = json.dumps(as_json(d)).encode()
        w("    {%s, %d,\n     %s},\n" % (c_str(body), len(body), c_str(want)))
    w("};\n")
    w("/* random schemas and data: schema, body, length, JSON */\n")
    w("static const struct { const char *schema, *body; size_t len; const char *json; } sch_fx_random[] = {\n")
    for text, body, want in random_bodies(150):
        w("    {%s,\n     %s, %d,\n     %s},\n" % (json.dumps(text), c_str(body), len(body), c_str(want)))
    w("};\n")
    w("/* reader, writer, python3-avro's verdict (1 compatible) */\n")
    w("static const struct { const char *reader, *writer; int compatible; } sch_fx_compat[] = {\n")
    for r, wr, v in compat_pairs(300):
        w("    {%s,\n     %s, %d},\n" % (json.dumps(r), json.dumps(wr), v))
    w("};\n")

main()
