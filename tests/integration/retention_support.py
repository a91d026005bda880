"""Helpers shared by test_retention, test_compaction and test_flush: a
broker with an admin port and fast retention/cleaner timers, /metrics
parsing, watermarks, raw DeleteRecords."""
import re
import time
import urllib.request

import kafka_raw as kr
from conftest import free_port
from confluent_kafka import TopicPartition
from support import ck_consumer

API_DELETE_RECORDS = 21
FAST = {"log.retention.check.interval.ms": "200", "log.cleaner.backoff.ms": "200"}


def fast_broker(start_broker, **extra):
    port = free_port()
    o = {"admin.listeners": "http://127.0.0.1:%d" % port}
    o.update(FAST)
    o.update(extra)
    b = start_broker(o)
    return b


def metrics(b):
    with urllib.request.urlopen("http://%s/metrics" % b.admin, timeout=10) as r:
        return r.read().decode()


def metric(b, name, topic=None, partition=0):
    """The value of one sample (the partition's when topic is given)."""
    text = metrics(b)
    if topic is None:
        pat = r"^%s(?:\{[^}]*\})? (\S+)$" % re.escape(name)
    else:
        pat = r'^%s\{topic="%s",partition="%d"\} (\S+)$' % (re.escape(name), re.escape(topic), partition)
    m = re.search(pat, text, re.M)
    return float(m.group(1)) if m else None


def watermarks(b, topic, partition=0):
    c = ck_consumer(b)
    try:
        return c.get_watermark_offsets(TopicPartition(topic, partition), timeout=10, cached=False)
    finally:
        c.close()


def wait_for(what, fn, timeout=20.0, every=0.1):
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        last = fn()
        if last:
            return last
        time.sleep(every)
    raise AssertionError("timed out waiting for %s (last: %r)" % (what, last))


def delete_records(b, topic, partition, offset, version=1):
    """Raw DeleteRecords: (low watermark, error code)."""
    body = (kr.array([kr.string(topic) + kr.array([kr.i32(partition) + kr.i64(offset)])]) +
            kr.i32(5000))
    with kr.Conn(b.port, timeout=10) as c:
        r = c.request(API_DELETE_RECORDS, version, body)
        r.i32()                                       # throttle
        out = []
        for _ in range(r.i32()):
            r.string()
            for _ in range(r.i32()):
                r.i32()
                low = r.i64()
                err = r.i16()
                out.append((low, err))
    return out[0]


def fetch_error(b, topic, partition, offset):
    with kr.Conn(b.port, timeout=10) as c:
        (res,) = kr.parse_fetch_v4(c.request(kr.API_FETCH, 4, kr.fetch_v4_body(
            topic, partition, offset, 0), timeout=10))
    return res[2]
