"""The schema registry's side of the integration tests (issue 31): a broker
with its registry on a port of its own, and bounded HTTP calls to it."""
import json

import requests

from conftest import free_port

CTYPE = "application/vnd.schemaregistry.v1+json"
TIMEOUT = 15


def start_registry(start_broker, **overrides):
    """A standalone broker whose registry listens on a free port; .registry
    is its base URL."""
    port = free_port()
    o = {"schema.registry.listeners": "http://127.0.0.1:%d" % port}
    o.update(overrides)
    b = start_broker(overrides=o)
    # the harness may have moved the port (conftest.py P3): read it back
    b.registry = b.overrides["schema.registry.listeners"]
    return b


def call(b, method, path, body=None, raw=None, headers=None):
    """(status, parsed JSON or text) of one request to b's registry."""
    h = {"Content-Type": CTYPE, "Accept": CTYPE}
    h.update(headers or {})
    data = raw if raw is not None else (json.dumps(body) if body is not None else None)
    r = requests.request(method, b.registry + path, data=data, headers=h, timeout=TIMEOUT)
    try:
        return r.status_code, r.json()
    except ValueError:
        return r.status_code, r.text


def register(b, subject, schema, **extra):
    body = {"schema": schema if isinstance(schema, str) else json.dumps(schema)}
    body.update(extra)
    return call(b, "POST", "/subjects/%s/versions" % subject, body)


def record_schema(name, fields):
    """An Avro record schema: fields as (name, type) or (name, type, default)."""
    fs = []
    for f in fields:
        d = {"name": f[0], "type": f[1]}
        if len(f) > 2:
            d["default"] = f[2]
        fs.append(d)
    return {"type": "record", "name": name, "fields": fs}
