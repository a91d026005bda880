"""Client-side helpers shared by the integration tests: configured
confluent-kafka (librdkafka) and kafka-python clients, produce-and-wait,
consume-from-beginning by manual assignment (no consumer group needed),
and the "does the broker still serve a normal client" check.

Every call here is bounded in time; a helper that gives up says what it
got so far.
"""
import http.client
import os
import socket
import subprocess
import time
import uuid

from confluent_kafka import (OFFSET_BEGINNING, Consumer, KafkaError,
                             KafkaException, Producer, TopicPartition)
from confluent_kafka.admin import AdminClient, NewTopic

KCAT = "kcat"


FIGURES = []   # "test: figure" lines, printed at the end of the run (conftest)


def report(fmt, *args):
    """Prints a measured figure and keeps it for the run's summary."""
    line = fmt % args if args else fmt
    # "path::test[param]@group (call)": the group is run.sh's (conftest.py X1)
    test = os.environ.get("PYTEST_CURRENT_TEST", "").split(" ")[0].rsplit("::", 1)[-1]
    test = test[:test.rfind("@")] if test.rfind("@") > test.rfind("]") else test
    FIGURES.append("%s: %s" % (test, line) if test else line)
    print(line, flush=True)


def least_disturbed(measure, ok, tries=5):
    """Timing checks on a shared machine: measure() -> figures (a fresh
    baseline and the measurement, taken together), again until ok(figures)
    holds, at most tries times; returns the figures of the last try, for
    the test to assert on.  A cost the code under test adds every time (what
    such a check is after: a commit held for the linger, a wait that is too
    long) fails every try; a load spike from the other processes on the
    machine does not come back each time."""
    for n in range(1, tries + 1):
        figures = measure()
        if ok(figures):
            break
    if n > 1:
        report("timing held on try %d of %d", n, tries)
    return figures


def topic_name(prefix="t"):
    return "%s-%s" % (prefix, uuid.uuid4().hex[:10])


# ---- murmur2 (Java's Utils.murmur2, protocol/README.md §9) ------------------------
def murmur2(data):
    m = 0x5BD1E995
    r = 24
    length = len(data)
    h = (0x9747B28C ^ length) & 0xFFFFFFFF
    for i in range(length // 4):
        k = int.from_bytes(data[4 * i:4 * i + 4], "little")
        k = (k * m) & 0xFFFFFFFF
        k ^= k >> r
        k = (k * m) & 0xFFFFFFFF
        h = (h * m) & 0xFFFFFFFF
        h ^= k
    tail = length & ~3
    extra = length % 4
    if extra >= 3:
        h ^= data[tail + 2] << 16
    if extra >= 2:
        h ^= data[tail + 1] << 8
    if extra >= 1:
        h ^= data[tail]
        h = (h * m) & 0xFFFFFFFF
    h ^= h >> 13
    h = (h * m) & 0xFFFFFFFF
    h ^= h >> 15
    return h


def java_partition(key, num_partitions):
    return (murmur2(key) & 0x7FFFFFFF) % num_partitions


# ---- confluent-kafka -------------------------------------------------------------
def ck_conf(b, **kw):
    conf = {
        "bootstrap.servers": b.bootstrap,
        "broker.address.family": "v4",
        "socket.timeout.ms": 10000,
        "log.connection.close": False,
    }
    conf.update(kw)
    return conf


def ck_producer(b, **kw):
    conf = {"acks": "all", "message.timeout.ms": 30000}
    conf.update(kw)
    return Producer(ck_conf(b, **conf))


def ck_admin(b):
    """One AdminClient per broker, kept alive with it: a client that is
    garbage-collected while a request is in flight never resolves its
    futures."""
    a = getattr(b, "_ck_admin", None)
    if a is None:
        a = b._ck_admin = AdminClient(ck_conf(b))
    return a


def ck_consumer(b, **kw):
    conf = {"group.id": "sluice-it", "enable.auto.commit": False,
            "enable.auto.offset.store": False, "auto.offset.reset": "earliest",
            "enable.partition.eof": False}
    conf.update(kw)
    return Consumer(ck_conf(b, **conf))


def produce(producer, topic, messages, timeout=60.0):
    """messages: iterable of dicts with value and optionally key, partition,
    headers, timestamp.  Waits for every delivery report; returns them as
    (err, msg) in the order the messages were produced."""
    reports = {}
    n = 0
    for m in messages:
        kwargs = dict(m)
        kwargs.setdefault("value", None)

        def done(err, msg, i=n):
            reports[i] = (err, msg)
        while True:
            try:
                producer.produce(topic, on_delivery=done, **kwargs)
                break
            except BufferError:
                producer.poll(0.05)
        n += 1
        producer.poll(0)
    deadline = time.monotonic() + timeout
    while len(reports) < n and time.monotonic() < deadline:
        producer.flush(min(1.0, max(0.0, deadline - time.monotonic())))
    errs = [str(e) for e, _ in reports.values() if e is not None]
    assert len(reports) == n, (
        "only %d of %d delivery reports within %.0f s; errors: %s"
        % (len(reports), n, timeout, errs[:5]))
    return [reports[i] for i in range(n)]


def produce_ok(producer, topic, messages, timeout=60.0):
    """produce() and assert that every message was acknowledged."""
    reports = produce(producer, topic, messages, timeout)
    errs = [(str(e), m.partition(), m.value()[:40] if m.value() else None)
            for e, m in reports if e is not None]
    assert not errs, "%d of %d produce requests failed, first: %s" % (len(errs), len(reports), errs[:5])
    return [m for _, m in reports]


def consume(b, topic, partitions, count, timeout=30.0, settle=0.5, offsets=None, **kw):
    """Assigns partitions (from the beginning, or from offsets {p: off}) and
    reads until count messages arrived; then waits `settle` seconds more to
    catch extra (duplicate) messages.  Returns the messages."""
    c = ck_consumer(b, **kw)
    try:
        tps = [TopicPartition(topic, p, (offsets or {}).get(p, OFFSET_BEGINNING)) for p in partitions]
        c.assign(tps)
        out, errors = [], []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            for m in c.consume(num_messages=1000, timeout=0.2):
                if m.error():
                    errors.append(m.error())
                else:
                    out.append(m)
        if len(out) == count and settle:
            end = time.monotonic() + settle
            while time.monotonic() < end:
                for m in c.consume(num_messages=1000, timeout=0.1):
                    if not m.error():
                        out.append(m)
        assert len(out) >= count, (
            "consumed %d of %d messages within %.0f s; consumer errors: %s"
            % (len(out), count, timeout, [str(e) for e in errors[:5]]))
        return out
    finally:
        c.close()


def create_topic(b, name, partitions=1, config=None, timeout=15.0):
    fs = ck_admin(b).create_topics(
        [NewTopic(name, num_partitions=partitions, replication_factor=1, config=config or {})],
        operation_timeout=timeout, request_timeout=timeout)
    fs[name].result(timeout=timeout)
    wait_topic(b, name, partitions)


def wait_topic(b, name, partitions, timeout=10.0):
    """Until the broker's metadata shows the topic with all partitions led."""
    p = ck_producer(b)
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        md = p.list_topics(name, timeout=5)
        t = md.topics.get(name)
        last = t
        if t is not None and t.error is None and len(t.partitions) == partitions and \
                all(pm.leader >= 0 and pm.error is None for pm in t.partitions.values()):
            return md
        time.sleep(0.1)
    raise AssertionError("topic %s not ready with %d partitions: %r" % (name, partitions, last))


def assert_serves(b, what=""):
    """A normal client still works: metadata, then one message produced and read back."""
    b.assert_alive()
    md = ck_admin(b).list_topics(timeout=10)
    assert b.broker_id in md.brokers, "metadata after %s lists brokers %s" % (what, md.brokers)
    t = topic_name("alive")
    create_topic(b, t, 1)
    value = ("still serving after %s" % what).encode()
    msgs = produce_ok(ck_producer(b), t, [{"key": b"k", "value": value}], timeout=20)
    assert msgs[0].offset() == 0
    got = consume(b, t, [0], 1, timeout=20, settle=0)
    assert [(m.key(), m.value(), m.offset()) for m in got] == [(b"k", value, 0)]
    b.assert_alive()


def err_code(exc):
    """The KafkaError code inside a confluent KafkaException (or a KafkaError)."""
    if isinstance(exc, KafkaException):
        exc = exc.args[0]
    assert isinstance(exc, KafkaError), "not a KafkaError: %r" % (exc,)
    return exc.code()


# ---- kafka-python ---------------------------------------------------------------
def kp_common(b):
    return dict(bootstrap_servers=[b.bootstrap], request_timeout_ms=15000,
                api_version_auto_timeout_ms=10000)


def kp_producer(b, **kw):
    from kafka import KafkaProducer
    conf = kp_common(b)
    conf.update(acks="all", max_block_ms=15000)
    conf.update(kw)
    return KafkaProducer(**conf)


def kp_consumer(b, **kw):
    from kafka import KafkaConsumer
    conf = kp_common(b)
    conf.update(group_id=None, enable_auto_commit=False, consumer_timeout_ms=1000,
                auto_offset_reset="earliest")
    conf.update(kw)
    return KafkaConsumer(**conf)


def kp_consume(b, topic, partitions, count, timeout=30.0, **kw):
    """kafka-python: assign + seek_to_beginning, read count records."""
    from kafka import TopicPartition as KTP
    c = kp_consumer(b, **kw)
    try:
        tps = [KTP(topic, p) for p in partitions]
        c.assign(tps)
        c.seek_to_beginning(*tps)
        out = []
        deadline = time.monotonic() + timeout
        while len(out) < count and time.monotonic() < deadline:
            batch = c.poll(timeout_ms=500, max_records=2000)
            for recs in batch.values():
                out.extend(recs)
        # a short extra poll catches duplicates
        if len(out) == count:
            for recs in c.poll(timeout_ms=300).values():
                out.extend(recs)
        assert len(out) >= count, "kafka-python consumed %d of %d within %.0f s" % (len(out), count, timeout)
        return out
    finally:
        c.close()


# ---- kcat ------------------------------------------------------------------------
def kcat(b, args, input_bytes=None, timeout=30):
    cmd = [KCAT, "-b", b.bootstrap, "-X", "broker.address.family=v4"] + list(args)
    p = subprocess.run(cmd, input=input_bytes, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    return p


# ---- kafkajs (Node.js; make deps installs it into tests/node) -----------------------------
NODE_MODULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "node", "node_modules")


def kafkajs(b, script, timeout=60, **env):
    """Runs a Node.js script with kafkajs loadable (require("kafkajs")) and
    BOOTSTRAP set to b's; its stdout's last line is parsed as JSON and
    returned.  A failing script fails the test with its output."""
    import json
    e = dict(os.environ, NODE_PATH=os.path.abspath(NODE_MODULES), BOOTSTRAP=b.bootstrap,
             KAFKAJS_NO_PARTITIONER_WARNING="1", **{k: str(v) for k, v in env.items()})
    p = subprocess.run(["node", "-e", script], env=e, stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    out = p.stdout.decode()
    assert p.returncode == 0, "node exited %d:\n%s\n%s" % (p.returncode, out[-3000:],
                                                          p.stderr.decode()[-3000:])
    return json.loads(out.strip().splitlines()[-1])


# ---- the admin socket ----------------------------------------------------------------
def admin_socket(b):
    """The path of b's admin socket (admin.socket's default)."""
    return os.path.join(b.data_dir, "admin.sock")


class UnixHTTPConnection(http.client.HTTPConnection):
    def __init__(self, path, timeout):
        super().__init__("localhost", timeout=timeout)
        self.unix_path = path

    def connect(self):
        s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        s.settimeout(self.timeout)
        try:
            s.connect(self.unix_path)
        except OSError:
            s.close()
            raise
        self.sock = s


def socket_http(path, url, body=None, headers=None, timeout=30):
    """(status, text, headers) of one admin request over the Unix socket
    at path: the operator's way in once an authorizer guards the TCP one."""
    c = UnixHTTPConnection(path, timeout)
    try:
        c.request("POST" if body is not None else "GET", url,
                  body=body.encode() if body is not None else None, headers=headers or {})
        r = c.getresponse()
        return r.status, r.read().decode(), dict(r.headers)
    finally:
        c.close()
