"""TLS listeners (issue 18, items 1, 2 and 5's TLS half) as Kafka users see
them: kcat, confluent-kafka and kafka-python produce and consume over SSL
with every message back, byte for byte and in order, on a broker that
listens on PLAINTEXT and SSL at once; ssl.client.auth=required takes a
client certificate of the truststore's CA (its subject becomes the
principal, logged by the broker) and refuses a missing, untrusted or
expired one, a plaintext client and a stalled handshake, each cleanly,
while another client keeps producing; the admin endpoint serves /sql over
https; a cluster replicates RF 3 over an SSL inter-broker listener; and a
follower cuts off a (fake) TLS leader sending bytes it did not ask for.

Certificates are made by tls_support.make_certs with the openssl command.
"""
import os
import random
import shutil
import socket
import ssl
import struct
import tempfile
import threading
import time
import urllib.request

import pytest

from cluster_support import (cl_zk_get, cl_zk_set, leader_and_isr, make_cluster,  # noqa: F401
                             wait_for, zk, zk_missing)
from conftest import Broker, finish_broker, free_port
from support import (consume, ck_admin, ck_producer, kcat, kp_consume, kp_producer, produce_ok,
                     topic_name)
from tls_support import (add_ssl_listener, certs, ck_ssl, kcat_ssl, kp_ssl, on_ssl, read_frame,
                         rss_mib, serve, ssl_overrides)


@pytest.fixture
def tls_broker(certs):
    """Factory: tls_broker(client_auth=..., **overrides) -> a started broker
    with PLAINTEXT (b.bootstrap) and SSL (b.ssl_bootstrap) listeners."""
    made = []
    tmp = tempfile.mkdtemp(prefix="sluice-it-tls-")

    def make(client_auth="requested", **extra):
        wd = os.path.join(tmp, "b%d" % len(made))
        os.makedirs(wd)
        o = ssl_overrides(certs, client_auth)
        o.update(extra)
        b = add_ssl_listener(Broker(wd, o), certs)
        made.append(b)
        return b.start()

    try:
        yield make
    finally:
        problems = [p for b in made for p in finish_broker(b)]
        tails = "\n".join(b.log_tail() for b in made)
        if os.environ.get("SLUICE_IT_KEEP") != "1":
            shutil.rmtree(tmp, ignore_errors=True)
        if problems:
            pytest.fail("; ".join(problems) + "\n" + tails, pytrace=False)


def values(msgs):
    return [m.value() for m in msgs]


def kcat_lines(b, certs, topic, n, cert=None):
    p = kcat(on_ssl(b), kcat_ssl(certs, cert) + ["-C", "-t", topic, "-o", "beginning",
                                                  "-c", str(n), "-e", "-q"], timeout=30)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout.decode().splitlines()


def test_kcat_confluent_kafka_python_over_ssl_byte_for_byte(tls_broker, certs):
    b = tls_broker()
    ssl_b = on_ssl(b)
    # Metadata answers each client with its own listener's endpoint.
    md = kcat(ssl_b, kcat_ssl(certs) + ["-L"], timeout=20).stdout.decode()
    assert "broker %d at %s" % (b.broker_id, b.ssl_bootstrap) in md, md
    md = kcat(b, ["-L"], timeout=20).stdout.decode()
    assert "broker %d at %s" % (b.broker_id, b.bootstrap) in md, md

    # kcat produces lines; all three clients read them back over SSL.
    lines_topic = topic_name("tls-lines")
    lines = ["line %d %s" % (i, "x" * (i % 97)) for i in range(300)]
    p = kcat(ssl_b, kcat_ssl(certs) + ["-P", "-t", lines_topic],
             input_bytes=("\n".join(lines) + "\n").encode(), timeout=30)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    assert kcat_lines(b, certs, lines_topic, len(lines)) == lines
    want = [s.encode() for s in lines]
    assert values(consume(ssl_b, lines_topic, [0], len(lines), **ck_ssl(certs))) == want
    assert [r.value for r in kp_consume(ssl_b, lines_topic, [0], len(lines),
                                        **kp_ssl(certs))] == want

    # confluent-kafka and kafka-python produce binary values (some larger
    # than a TLS record, so fetch answers span many records and partial
    # writes); both read everything back over SSL, and over PLAINTEXT.
    rnd = random.Random(18)
    topic = topic_name("tls-bin")
    ck_vals = [rnd.randbytes(rnd.choice((1, 100, 5000, 70000))) for _ in range(200)]
    kp_vals = [rnd.randbytes(rnd.choice((1, 300, 20000))) for _ in range(200)]
    produce_ok(ck_producer(ssl_b, **ck_ssl(certs, certs.client)), topic,
               [{"value": v} for v in ck_vals])
    kp = kp_producer(ssl_b, **kp_ssl(certs, certs.client))
    for v in kp_vals:
        kp.send(topic, v, partition=0)
    kp.flush(30)
    kp.close()
    want = ck_vals + kp_vals
    assert values(consume(ssl_b, topic, [0], len(want), **ck_ssl(certs, certs.client))) == want
    assert [r.value for r in kp_consume(ssl_b, topic, [0], len(want), **kp_ssl(certs))] == want
    assert values(consume(b, topic, [0], len(want))) == want
    assert "authenticated as User:CN=alice,O=Acme" in b.log_text()


def test_handshake_dribbled_in_small_pieces_is_served(tls_broker, certs):
    """A ClientHello that arrives a few bytes at a time (TCP may split it
    anywhere) is a TLS client like any other, not a plaintext one."""
    b = tls_broker()
    ctx = ssl.create_default_context(cafile=certs.ca.crt)
    inc, out = ssl.MemoryBIO(), ssl.MemoryBIO()
    tls = ctx.wrap_bio(inc, out, server_hostname="127.0.0.1")
    s = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
    try:
        first = True
        while True:
            try:
                tls.do_handshake()
                break
            except ssl.SSLWantReadError:
                pending = out.read()
                step = 7 if first else len(pending) or 1
                for i in range(0, len(pending), step):
                    s.sendall(pending[i:i + step])
                    if first:
                        time.sleep(0.005)
                first = False
                data = s.recv(65536)
                assert data, "the broker closed a handshake that came in pieces"
                inc.write(data)
        s.sendall(out.read())
        # ApiVersions v0, correlation id 7, null client id: answered.
        tls.write(b"\x00\x00\x00\x0a\x00\x12\x00\x00\x00\x00\x00\x07\xff\xff")
        s.sendall(out.read())
        got = b""
        while len(got) < 8:
            try:
                got += tls.read(65536)
            except ssl.SSLWantReadError:
                data = s.recv(65536)
                assert data, "closed before the answer"
                inc.write(data)
        assert got[4:8] == b"\x00\x00\x00\x07"
    finally:
        s.close()
    assert "plaintext (non-TLS) client" not in b.log_text()


class SteadyProducer(threading.Thread):
    """Produces one message every 20 ms on PLAINTEXT until stopped; every
    one must be acknowledged."""

    def __init__(self, b, topic):
        super().__init__(daemon=True)
        self.p = ck_producer(b, **{"linger.ms": 0})
        self.topic, self.sent, self.acked, self.errors = topic, [], [], []
        self.halt = threading.Event()

    def run(self):
        def done(err, msg):
            (self.errors if err else self.acked).append(err or msg.value())
        i = 0
        while not self.halt.is_set():
            v = b"steady-%d" % i
            self.p.produce(self.topic, v, partition=0, on_delivery=done)
            self.sent.append(v)
            self.p.poll(0.02)
            i += 1
        self.p.flush(30)

    def progress(self, timeout=10):
        """Waits for acknowledgements made after this call."""
        n = len(self.acked)
        wait_for(lambda: len(self.acked) > n + 3, timeout, "the steady producer to go on")


def refused(b, certs, cert, *extra):
    """A kcat metadata request over SSL with cert fails."""
    p = kcat(on_ssl(b), kcat_ssl(certs, cert) + ["-L", "-m", "3"] + list(extra), timeout=20)
    return p.returncode != 0


def test_client_auth_required_refuses_cleanly_while_others_produce(tls_broker, certs):
    b = tls_broker(client_auth="required", **{"ssl.handshake.timeout.ms": "1500"})
    steady_topic = topic_name("steady")
    ck_admin(b)        # the topic appears with the first produce (auto-create)
    steady = SteadyProducer(b, steady_topic)
    steady.start()
    try:
        steady.progress()
        # A certificate of the CA: served, and its subject is the principal.
        topic = topic_name("mtls")
        vals = [b"v%d" % i for i in range(50)]
        produce_ok(ck_producer(on_ssl(b), **ck_ssl(certs, certs.client)), topic,
                   [{"value": v} for v in vals])
        assert values(consume(on_ssl(b), topic, [0], len(vals),
                              **ck_ssl(certs, certs.client))) == vals
        wait_for(lambda: "authenticated as User:CN=alice,O=Acme" in b.log_text(), 5,
                 "the principal in the log")

        assert refused(b, certs, None)                       # no certificate
        wait_for(lambda: "peer did not return a certificate" in b.log_text(), 5,
                 "the missing certificate in the log")
        steady.progress()
        assert refused(b, certs, certs.untrusted)            # another CA's
        wait_for(lambda: "unable to get local issuer certificate" in b.log_text(), 5,
                 "the untrusted certificate in the log")
        steady.progress()
        assert refused(b, certs, certs.expired)              # expired
        wait_for(lambda: "certificate has expired" in b.log_text(), 5,
                 "the expired certificate in the log")
        steady.progress()
        # A plaintext Kafka client on the TLS port.
        assert kcat(on_ssl(b), ["-L", "-m", "3"], timeout=20).returncode != 0
        wait_for(lambda: "plaintext (non-TLS) client" in b.log_text(), 5,
                 "the plaintext client in the log")
        steady.progress()
        # A handshake that stalls after its first bytes is closed at the
        # deadline; meanwhile the others are served.
        s = socket.create_connection(("127.0.0.1", b.ssl_port), timeout=10)
        s.sendall(b"\x16\x03\x01\x02\x00\x01")              # half a ClientHello
        t0 = time.monotonic()
        steady.progress()
        assert s.recv(100) == b""
        took = time.monotonic() - t0
        s.close()
        assert took < 8, took
        assert "not done in ssl.handshake.timeout.ms=1500" in b.log_text()
    finally:
        steady.halt.set()
        steady.join(40)
    assert not steady.errors, steady.errors[:3]
    assert steady.acked == steady.sent
    assert values(consume(b, steady_topic, [0], len(steady.sent))) == steady.sent


def test_inline_pem_keystore_and_truststore(tls_broker, certs):
    """Kafka's inline PEM forms instead of files: the chain, the key and
    the trusted CAs as values; a client certificate is still checked."""
    def text(p):
        with open(p) as f:
            return f.read()
    b = tls_broker(client_auth="required", **{
        "ssl.keystore.location": "", "ssl.truststore.location": "",
        "ssl.keystore.certificate.chain": text(certs.server.crt),
        "ssl.keystore.key": text(certs.server.key),
        "ssl.truststore.certificates": text(certs.ca.crt)})
    p = kcat(on_ssl(b), kcat_ssl(certs, certs.client) + ["-L", "-m", "10"], timeout=20)
    assert p.returncode == 0 and b"broker %d at %s" % (b.broker_id, b.ssl_bootstrap.encode()) \
        in p.stdout, p.stderr
    assert refused(b, certs, certs.untrusted)


def test_admin_sql_over_https(tls_broker, certs):
    b = tls_broker(**{"admin.listeners": "https://127.0.0.1:%d" % free_port()})
    port = b.admin_port
    ctx = ssl.create_default_context(cafile=certs.ca.crt)
    req = urllib.request.Request("https://127.0.0.1:%d/sql?format=csv" % port,
                                 data=b"SELECT 40 + 2 AS answer", method="POST")
    with urllib.request.urlopen(req, context=ctx, timeout=10) as r:
        assert r.status == 200
        assert r.read().decode().split() == ["answer", "42"]
    with urllib.request.urlopen("https://127.0.0.1:%d/metrics" % port, context=ctx,
                                timeout=10) as r:
        assert r.status == 200 and b"sluice" in r.read()
    # Plain HTTP to the https port gets no answer.
    with pytest.raises(Exception):
        urllib.request.urlopen("http://127.0.0.1:%d/healthz" % port, timeout=5).read()
    assert b.proc.poll() is None


@pytest.mark.skipif(bool(zk_missing()), reason="ZooKeeper cannot run")
def test_cluster_replicates_rf3_over_ssl_inter_broker_listener(make_cluster, certs):  # noqa: F811
    o = ssl_overrides(certs, "required")
    o.update({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
              "inter.broker.listener.name": "INTERNAL"})
    c = make_cluster(3, start=False, overrides=o)
    for b in c.brokers:
        add_ssl_listener(b, certs, name="INTERNAL")
    c.start()
    b1 = c.brokers[0]
    topic = topic_name("tls-rf3")
    from confluent_kafka.admin import NewTopic
    fs = ck_admin(b1).create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                              config={"min.insync.replicas": "3"})])
    fs[topic].result(20)
    vals = [b"r%d-" % i + b"z" * (i % 500) for i in range(300)]
    # acks=all with min.insync.replicas=3: acknowledged only once both
    # followers fetched it, over the INTERNAL (SSL) listener.
    produce_ok(ck_producer(b1), topic, [{"value": v, "partition": 0} for v in vals])
    for b in c.brokers:
        assert values(consume(b, topic, [0], len(vals))) == vals
    logs = "\n".join(b.log_text() for b in c.brokers)
    ports = {b.ssl_port for b in c.brokers}
    connected = [p for p in ports if "connected to 127.0.0.1:%d" % p in logs]
    assert connected, "no replica fetcher connected to an INTERNAL port:\n" + logs[-3000:]
    assert "authenticated as User:CN=localhost,O=Sluice" in logs
    # A client of the INTERNAL listener is given every broker's INTERNAL
    # endpoint (from their registrations), one of PLAINTEXT their PLAINTEXT one.
    md = kcat(on_ssl(b1), kcat_ssl(certs, certs.client) + ["-L"], timeout=20).stdout.decode()
    for b in c.brokers:
        assert "broker %d at 127.0.0.1:%d" % (b.broker_id, b.ssl_port) in md, md
    md = kcat(b1, ["-L"], timeout=20).stdout.decode()
    for b in c.brokers:
        assert "broker %d at 127.0.0.1:%d" % (b.broker_id, b.port) in md, md
    # Every listener is in the registration, Kafka's form.
    rows = b1.sql("SELECT id, endpoints FROM brokers ORDER BY id")
    for row, b in zip(rows, c.brokers):
        assert row["endpoints"] == "PLAINTEXT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d" % (
            b.port, b.ssl_port), row


@pytest.mark.skipif(bool(zk_missing()), reason="ZooKeeper cannot run")
def test_follower_cuts_off_a_tls_leader_sending_unasked_bytes(make_cluster, certs):  # noqa: F811
    """repl_frame.h RF5 on the replica fetcher's TLS path: a leader (a fake
    TLS peer at the leader's INTERNAL endpoint in ZooKeeper) answers the
    follower's Fetch with an error, which leaves no request out for
    replica.fetch.backoff.ms, and then 300 MiB nobody asked for.
    The follower fails the connection at the first bytes (logged), its
    RSS stays bounded, and it connects again; with the real endpoint back
    it follows the leader again."""
    o = ssl_overrides(certs, "required")
    o.update({"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:SSL",
              "inter.broker.listener.name": "INTERNAL", "replica.fetch.backoff.ms": "3000"})
    c = make_cluster(2, start=False, overrides=o)
    for b in c.brokers:
        add_ssl_listener(b, certs, name="INTERNAL")
    c.start()
    b1, b2 = c.brokers
    topic = topic_name("tls-unasked")
    from confluent_kafka.admin import NewTopic
    fs = ck_admin(b1).create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[b1.broker_id,
                                                                          b2.broker_id]])])
    fs[topic].result(20)
    wait_for(lambda: leader_and_isr(b1, topic) == (b1.broker_id, (1, 2)), 30, "ISR 1,2")

    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ctx.load_cert_chain(certs.server.crt, certs.server.key)
    state = {"conns": 0, "apis": [], "flooded": 0}

    def leader(raw):
        state["conns"] += 1
        try:
            raw.settimeout(20)
            s = ctx.wrap_socket(raw, server_side=True)
            body = read_frame(s)
            api, ver, corr = struct.unpack(">hhi", body[:8])
            state["apis"].append((api, ver))
            if api != 1 or state["flooded"]:
                return                                    # a reconnection: held
            # Fetch v11: throttle, ErrorCode UNKNOWN_SERVER_ERROR, session 0, no topics
            resp = struct.pack(">iihii", corr, 0, -1, 0, 0)
            time.sleep(3)                                 # the follower settled (no kicks)
            s.sendall(struct.pack(">i", len(resp)) + resp)
            time.sleep(0.3)                               # nothing out: its backoff
            chunk = b"\x7f" * (1 << 20)
            for _ in range(300):
                s.sendall(chunk)
                state["flooded"] += 1
        except OSError as e:                              # the follower closed: expected
            state.setdefault("err", repr(e))

    port, _accepted, close = serve(leader)
    path = "/brokers/ids/%d" % b1.broker_id
    real = cl_zk_get(c.zk_connect, path)[0]
    fake = real.replace(b"INTERNAL://127.0.0.1:%d" % b1.ssl_port,
                        b"INTERNAL://127.0.0.1:%d" % port)
    assert fake != real, real
    try:
        b2.stop()
        cl_zk_set(c.zk_connect, path, fake)
        r0 = None
        b2.start()
        r0 = rss_mib(b2.proc.pid)
        wait_for(lambda: state["conns"] >= 2, 40, "the follower to connect again")
        r1 = rss_mib(b2.proc.pid)
        log = [x for x in b2.log_text().splitlines() if "replica fetcher" in x or
               "unasked" in x or "no request out" in x]
        print("fake leader: %r; follower RSS %s -> %s MiB; %s" % (state, r0, r1, log[-4:]))
        assert state["apis"][0] == (1, 11), state
        assert state["flooded"] < 300, "the follower read 300 MiB nobody asked for"
        assert r1 - r0 < 64, (r0, r1)
        assert any("bytes with no request out" in x for x in log), log
    finally:
        cl_zk_set(c.zk_connect, path, real)
        close()
    b2.stop()                                             # the real endpoint again
    b2.start()
    produce_ok(ck_producer(b1), topic, [{"value": b"after", "partition": 0}])
    assert values(consume(b2, topic, [0], 1)) == [b"after"]
