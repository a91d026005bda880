"""Clients pinned to old protocol versions, as deployed code still pins
them: kafka-python with api_version=(0, 10) sends Produce v2 / Fetch v2
with magic 1 message sets, with (0, 8, 2) Produce v0 / Fetch v0 with
magic 0.  The broker up-converts their messages to record batches v2 on
write and down-converts on read; every message must come back in order,
byte for byte, to the old client and to a current one, and /metrics
counts the conversions."""
import re
import urllib.request

import pytest

from conftest import free_port
from support import consume, create_topic, kp_consume, kp_producer, topic_name


def old_messages(n):
    out = []
    for i in range(n):
        key = None if i % 7 == 3 else b"k%d" % (i % 5)
        value = b"" if i % 11 == 4 else b"%05d|" % i + bytes((i * 13 + j) & 0xFF for j in range(i % 200))
        out.append((key, value))
    return out


def metrics_value(admin, name):
    with urllib.request.urlopen("http://%s/metrics" % admin, timeout=10) as r:
        text = r.read().decode()
    m = re.search(r"^%s (\S+)$" % re.escape(name), text, re.M)
    return float(m.group(1)) if m else None


@pytest.fixture
def admin_broker(start_broker):
    port = free_port()
    b = start_broker({"admin.listeners": "http://127.0.0.1:%d" % port})
    return b


@pytest.mark.parametrize("api_version,codec", [
    ((0, 10), None), ((0, 10), "gzip"), ((0, 10), "snappy"), ((0, 10), "lz4"),
    ((0, 8, 2), None), ((0, 8, 2), "gzip"), ((0, 8, 2), "snappy"),
])
def test_kafka_python_pinned_old_versions_produce_and_consume(admin_broker, api_version, codec):
    b = admin_broker
    t = topic_name("old")
    create_topic(b, t, 1)
    msgs = old_messages(300)
    p = kp_producer(b, api_version=api_version, compression_type=codec, linger_ms=20)
    try:
        futs = [p.send(t, key=k, value=v, partition=0) for k, v in msgs]
        p.flush(timeout=30)
        offsets = [f.get(timeout=30).offset for f in futs]
    finally:
        p.close(timeout=10)
    assert offsets == list(range(len(msgs)))
    assert metrics_value(b.admin, "sluice_produce_up_converted_total") >= 1

    # Back to the old client (down-converted) ...
    got = kp_consume(b, t, [0], len(msgs), timeout=30, api_version=api_version)
    assert [(r.offset, r.key, r.value) for r in got] == \
        [(i, k, v) for i, (k, v) in enumerate(msgs)]
    if api_version == (0, 10):
        assert all(r.timestamp > 0 for r in got)       # magic 1 keeps CreateTime
    else:
        assert all(r.timestamp in (-1, None) for r in got)  # magic 0 has none
    assert metrics_value(b.admin, "sluice_fetch_down_converted_total") >= 1
    assert metrics_value(b.admin, "sluice_fetch_down_converted_bytes_total") > 0

    # ... and to a current one (record batches v2, zero copy).
    got = consume(b, t, [0], len(msgs), timeout=30)
    assert [(m.offset(), m.key(), m.value()) for m in got] == \
        [(i, k, v) for i, (k, v) in enumerate(msgs)]


def test_old_consumer_reads_what_a_current_producer_wrote(admin_broker):
    b = admin_broker
    t = topic_name("oldread")
    create_topic(b, t, 1)
    msgs = old_messages(200)
    p = kp_producer(b, compression_type="gzip", linger_ms=20)
    try:
        for k, v in msgs:
            p.send(t, key=k, value=v, partition=0, headers=[("h", b"x")])
        p.flush(timeout=30)
    finally:
        p.close(timeout=10)
    for api_version in ((0, 10), (0, 8, 2)):
        got = kp_consume(b, t, [0], len(msgs), timeout=30, api_version=api_version)
        assert [(r.offset, r.key, r.value) for r in got] == \
            [(i, k, v) for i, (k, v) in enumerate(msgs)]
