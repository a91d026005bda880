"""SASL on a SASL_PLAINTEXT listener (daemon/security/sec_sasl.c): kcat, confluent-kafka
and kafka-python log in with PLAIN, SCRAM-SHA-256 and SCRAM-SHA-512 and get
every message back in order; wrong passwords, unknown users, unsupported
mechanisms and requests before authentication are refused while another
client keeps producing; credentials are managed through SQL and the Kafka
admin APIs and never readable; sessions expire without re-authentication
(connections.max.reauth.ms, KIP-368)."""
import hashlib
import hmac
import os
import shutil
import tempfile
import threading
import time
import urllib.request
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError, Producer
from kafka.scram import ScramClient

from conftest import finish_broker, free_port
import kafka_raw as kr
from sasl_support import (add_user, authenticate, ck_sasl, handshake, kcat_sasl, kp_sasl,
                          scram_login, sql, start_sasl_broker)
from support import ck_conf, ck_producer, consume, kcat, kp_consume, kp_producer, produce_ok, topic_name

MECHS = ["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]
FAILED_MSG = ("Authentication failed during authentication due to invalid credentials "
              "with SASL mechanism %s")

API_DESCRIBE_USER_SCRAM = 50
API_ALTER_USER_SCRAM = 51


@pytest.fixture(scope="module")
def sasl_dir():
    d = tempfile.mkdtemp(prefix="sluice-it-sasl-")
    yield d
    shutil.rmtree(d, ignore_errors=True)


def _broker(sasl_dir, name, overrides=None):
    wd = os.path.join(sasl_dir, name)
    os.makedirs(wd)
    b = start_sasl_broker(wd, overrides)
    add_user(b, "alice", "alice-secret")
    return b


@pytest.fixture(scope="module")
def sb(sasl_dir):
    b = _broker(sasl_dir, "main")
    yield b
    problems = finish_broker(b)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def ck_sasl_conf(mech, user="alice", pw="alice-secret"):
    return ck_sasl(mech, user, pw)


@pytest.mark.parametrize("mech", MECHS)
def test_every_client_produces_and_consumes_over_sasl(sb, mech):
    t = topic_name("sasl")
    p = kcat(sb, ["-P", "-t", t] + kcat_sasl(mech, "alice", "alice-secret"),
             input_bytes=b"".join(b"kcat-%d\n" % i for i in range(10)))
    assert p.returncode == 0, p.stderr.decode()
    produce_ok(ck_producer(sb, **ck_sasl_conf(mech)), t,
               [{"value": b"ck-%d" % i} for i in range(10)])
    kp = kp_producer(sb, **kp_sasl(mech, "alice", "alice-secret"))
    for i in range(10):
        kp.send(t, b"kp-%d" % i).get(timeout=15)
    kp.close()
    want = ([b"kcat-%d" % i for i in range(10)] + [b"ck-%d" % i for i in range(10)] +
            [b"kp-%d" % i for i in range(10)])
    got = consume(sb, t, [0], len(want), timeout=20, **ck_sasl_conf(mech))
    assert [m.value() for m in got] == want
    got = kp_consume(sb, t, [0], len(want), timeout=20, **kp_sasl(mech, "alice", "alice-secret"))
    assert [r.value for r in got] == want
    p = kcat(sb, ["-C", "-t", t, "-e", "-q", "-f", "%s\\n"] + kcat_sasl(mech, "alice", "alice-secret"))
    assert p.returncode == 0, p.stderr.decode()
    assert p.stdout.split(b"\n")[:-1] == want


class SteadyProducer(threading.Thread):
    """A well-behaved client producing one message every 20 ms until stopped."""

    def __init__(self, b, topic):
        super().__init__(daemon=True)
        self.b, self.topic = b, topic
        self.stop = threading.Event()
        self.sent = 0
        self.errors = []

    def run(self):
        p = ck_producer(self.b, **ck_sasl_conf("SCRAM-SHA-256"))

        def report(err, msg):
            if err is not None:
                self.errors.append(err)
        while not self.stop.is_set():
            p.produce(self.topic, b"steady-%d" % self.sent, on_delivery=report)
            self.sent += 1
            p.poll(0.02)
        assert p.flush(20) == 0


def auth_error(conf, timeout=10.0):
    """A confluent-kafka producer with conf; returns its first error."""
    errors = []
    p = Producer(dict(conf, error_cb=errors.append))
    deadline = time.monotonic() + timeout
    while not errors and time.monotonic() < deadline:
        p.poll(0.1)
    assert errors, "no error within %.0f s" % timeout
    return errors[0]


def metrics(b):
    with urllib.request.urlopen("http://%s/metrics" % b.admin, timeout=10) as r:
        return r.read().decode()


def metric(text, name, mech):
    for line in text.splitlines():
        if line.startswith('%s{mechanism="%s"}' % (name, mech)):
            return int(line.split()[-1])
    raise AssertionError("no %s for %s" % (name, mech))


def test_refused_logins_are_clean_and_others_keep_producing(sb):
    t = topic_name("steady")
    before = metrics(sb)
    steady = SteadyProducer(sb, t)
    steady.start()
    try:
        # wrong password, unknown user: Kafka's error and message, per mechanism
        for mech in ("SCRAM-SHA-256", "SCRAM-SHA-512"):
            for user, pw in (("alice", "wrong"), ("mallory", "whatever")):
                e = auth_error(ck_conf(sb, **ck_sasl_conf(mech, user, pw)))
                assert e.code() == KafkaError._AUTHENTICATION, e
                assert FAILED_MSG % mech in e.str(), e.str()
        e = auth_error(ck_conf(sb, **ck_sasl_conf("PLAIN", "alice", "wrong")))
        assert e.code() == KafkaError._AUTHENTICATION, e
        assert "Invalid username or password" in e.str(), e.str()
        # the raw exchange: error 58, then the broker closes
        with kr.Conn(sb.port) as c:
            err, msg, _, _ = scram_login(c, "alice", "wrong", "SCRAM-SHA-512")
            assert (err, msg) == (58, FAILED_MSG % "SCRAM-SHA-512")
            c.wait_closed(5)
        # SaslHandshake v0 (kafka-python's way): raw tokens; a wrong proof just closes
        with kr.Conn(sb.port) as c:
            assert handshake(c, "SCRAM-SHA-256", version=0) == (0, MECHS)
            sc = ScramClient("alice", "wrong", "SCRAM-SHA-256")
            c.send_raw(kr.nbytes(sc.first_message().encode()))
            sc.process_server_first_message(c.recv_frame().decode())
            c.send_raw(kr.nbytes(sc.final_message().encode()))
            assert c.wait_closed(5) == b""
        # unsupported mechanism: error 33 with the enabled list, then closed
        with kr.Conn(sb.port) as c:
            assert handshake(c, "GSSAPI") == (33, MECHS)
            c.wait_closed(5)
        # a request before authentication closes the connection (ILLEGAL_SASL_STATE)
        with kr.Conn(sb.port) as c:
            c.send(kr.API_METADATA, 1, kr.metadata_body(1, None))
            assert c.wait_closed(5) == b""
        # ... also after a handshake, before the exchange finished
        with kr.Conn(sb.port) as c:
            assert handshake(c, "SCRAM-SHA-256")[0] == 0
            c.send(kr.API_METADATA, 1, kr.metadata_body(1, None))
            assert c.wait_closed(5) == b""
        # SaslAuthenticate without a handshake: ILLEGAL_SASL_STATE (34), closed
        with kr.Conn(sb.port) as c:
            assert authenticate(c, b"n,,n=alice,r=abc")[0] == 34
            c.wait_closed(5)
        time.sleep(0.3)
    finally:
        steady.stop.set()
        steady.join(30)
    assert not steady.is_alive() and not steady.errors, steady.errors
    got = consume(sb, t, [0], steady.sent, timeout=20, **ck_sasl_conf("SCRAM-SHA-256"))
    assert [m.value() for m in got] == [b"steady-%d" % i for i in range(steady.sent)]
    log = sb.log_text()
    assert "before SASL authentication; closing (ILLEGAL_SASL_STATE" in log
    assert "SASL mechanism GSSAPI from" in log
    after = metrics(sb)
    assert (metric(after, "sluice_failed_authentication_total", "SCRAM-SHA-512") -
            metric(before, "sluice_failed_authentication_total", "SCRAM-SHA-512")) >= 3
    assert (metric(after, "sluice_successful_authentication_total", "SCRAM-SHA-256") >
            metric(before, "sluice_successful_authentication_total", "SCRAM-SHA-256"))


def test_sql_manages_users_and_cannot_read_credentials(sb):
    for stmt in ("SELECT salt FROM main.users", "SELECT stored_key FROM users",
                 "SELECT * FROM main.users", "SELECT hex(server_key) FROM main.users"):
        st, body = sql(sb, stmt)
        assert st == 400 and "is a credential and cannot be read" in body["error"], (stmt, body)
    st, body = sql(sb, "INSERT INTO scram_credentials (name, mechanism, password, iterations) "
                       "VALUES ('bob', 'SCRAM-SHA-512', 'bob-pw', 8192)")
    assert st == 200, body
    st, rows = sql(sb, "SELECT name, mechanism, iterations, password FROM scram_credentials "
                       "WHERE name = 'bob'")
    assert rows == [{"name": "bob", "mechanism": "SCRAM-SHA-512", "iterations": 8192,
                     "password": None}]
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "bob", "bob-pw", "SCRAM-SHA-512")[0] == 0
    assert plain_login(sb, "bob", "bob-pw") == 0        # checked against SCRAM-SHA-512's keys
    assert plain_login(sb, "bob", "bob-pw") == 0        # again: the verified-login cache
    # a new password replaces the old, for SCRAM and PLAIN (cache included)
    st, body = sql(sb, "UPDATE scram_credentials SET password = 'bob-pw2' WHERE name = 'bob'")
    assert st == 200, body
    assert plain_login(sb, "bob", "bob-pw") == 58
    assert plain_login(sb, "bob", "bob-pw2") == 0
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "bob", "bob-pw", "SCRAM-SHA-512")[0] == 58
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "bob", "bob-pw2", "SCRAM-SHA-512")[0] == 0
    st, body = sql(sb, "INSERT INTO scram_credentials (name, mechanism, password, iterations) "
                       "VALUES ('eve', 'SCRAM-SHA-256', 'x', 100)")
    assert st == 400 and "UNACCEPTABLE_CREDENTIAL" in body["error"], body
    st, body = sql(sb, "INSERT INTO scram_credentials (name, mechanism, password) "
                       "VALUES ('eve', 'MD5', 'x')")
    assert st == 400 and "UNSUPPORTED_SASL_MECHANISM" in body["error"], body
    st, body = sql(sb, "DELETE FROM scram_credentials WHERE name = 'bob'")
    assert st == 200, body
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "bob", "bob-pw2", "SCRAM-SHA-512")[0] == 58


def plain_login(b, user, pw):
    """PLAIN over SaslHandshake v1 + SaslAuthenticate: the ErrorCode."""
    with kr.Conn(b.port) as c:
        assert handshake(c, "PLAIN")[0] == 0
        return authenticate(c, b"\0" + user.encode() + b"\0" + pw.encode())[0]


def _scram_keys(mech, password, salt, iterations):
    h = "sha256" if mech == 1 else "sha512"
    return hashlib.pbkdf2_hmac(h, password.encode(), salt, iterations)


def _alter(c, deletions, upsertions):
    body = kr.carray([kr.cstring(n) + kr.i8(m) + kr.tags() for n, m in deletions])
    body += kr.carray([kr.cstring(n) + kr.i8(m) + kr.i32(it) + kr.cbytes(s) +
                       kr.cbytes(sp) + kr.tags() for n, m, it, s, sp in upsertions])
    r = c.request_flex(API_ALTER_USER_SCRAM, 0, body + kr.tags())
    r.i32()
    out = {}
    for _ in range(r.uvarint() - 1):
        user, err, msg = r.cstring(), r.i16(), r.cstring()
        r.tags()
        out[user] = (err, msg)
    return out


def _describe(c, users):
    body = kr.carray(None if users is None else [kr.cstring(u) + kr.tags() for u in users])
    r = c.request_flex(API_DESCRIBE_USER_SCRAM, 0, body + kr.tags())
    r.i32()
    assert r.i16() == 0
    r.cstring()
    out = {}
    for _ in range(r.uvarint() - 1):
        user, err = r.cstring(), r.i16()
        r.cstring()
        infos = []
        for _ in range(r.uvarint() - 1):
            infos.append((r.i8(), r.i32()))
            r.tags()
        r.tags()
        out[user] = (err, infos)
    return out


def test_alter_and_describe_user_scram_credentials(sb):
    salt = os.urandom(16)
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "alice", "alice-secret")[0] == 0
        got = _alter(c, [], [("carol", 1, 4096, salt, _scram_keys(1, "carol-pw", salt, 4096)),
                             ("dave", 2, 100, salt, _scram_keys(2, "d", salt, 100)),
                             ("erin", 1, 4096, salt, b"x" * 32),
                             ("erin", 2, 4096, salt, b"x" * 64)])
        assert got["carol"] == (0, None)
        assert got["dave"][0] == 93 and "iterations" in got["dave"][1]      # UNACCEPTABLE_CREDENTIAL
        assert got["erin"][0] == 92                                          # DUPLICATE_RESOURCE
        d = _describe(c, ["carol", "alice", "nobody"])
        assert d["carol"] == (0, [(1, 4096)])
        assert d["alice"] == (0, [(1, 4096), (2, 4096)])
        assert d["nobody"][0] == 91                                          # RESOURCE_NOT_FOUND
        assert set(_describe(c, None)) >= {"alice", "carol"}
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "carol", "carol-pw")[0] == 0
        assert _alter(c, [("carol", 1)], []) == {"carol": (0, None)}
        assert _alter(c, [("carol", 1)], [])["carol"][0] == 91
    with kr.Conn(sb.port) as c:
        assert scram_login(c, "carol", "carol-pw")[0] == 58


def test_session_expires_without_reauthentication(sasl_dir):
    b = _broker(sasl_dir, "reauth", {"connections.max.reauth.ms": "1500"})
    add_user(b, "bob", "bob-pw", ("SCRAM-SHA-256",))
    try:
        t = topic_name("reauth")
        # not re-authenticated: served within the session, closed after it
        with kr.Conn(b.port) as c:
            err, _, _, life = scram_login(c, "alice", "alice-secret")
            assert (err, life) == (0, 1500)
            c.request(kr.API_METADATA, 1, kr.metadata_body(1, [t]))
            time.sleep(1.7)
            c.send(kr.API_METADATA, 1, kr.metadata_body(1, [t]))
            assert c.wait_closed(5) == b""
        # re-authenticated within the session: served past the first one's end
        with kr.Conn(b.port) as c:
            assert scram_login(c, "alice", "alice-secret")[0] == 0
            time.sleep(0.9)
            assert scram_login(c, "alice", "alice-secret", "SCRAM-SHA-512")[0] == 0
            time.sleep(0.9)
            c.request(kr.API_METADATA, 1, kr.metadata_body(1, [t]))
            # re-authenticating as someone else is refused
            assert scram_login(c, "bob", "bob-pw")[0] == 58
            c.wait_closed(5)
        assert "expired (connections.max.reauth.ms=1500) without re-authentication" in b.log_text()
        assert metric(metrics(b), "sluice_successful_reauthentication_total", "SCRAM-SHA-512") == 1
        # librdkafka (no KIP-368 in 2.0.2) reconnects when closed: nothing lost
        p = ck_producer(b, **ck_sasl_conf("SCRAM-SHA-256"))
        for i in range(30):
            p.produce(t, b"r-%d" % i)
            p.poll(0.1)
        assert p.flush(20) == 0
        got = consume(b, t, [0], 30, timeout=20, **ck_sasl_conf("SCRAM-SHA-256"))
        assert [m.value() for m in got] == [b"r-%d" % i for i in range(30)]
    finally:
        problems = finish_broker(b)
        assert not problems, "; ".join(problems)


# ---- cluster mode: credentials through ZooKeeper's /config/users --------------------
from cluster_support import make_cluster, registered_ids, wait_for, zk, zk_missing  # noqa: E402,F401


@pytest.mark.skipif(zk_missing(), reason="ZooKeeper is not installed")
def test_credentials_made_on_broker_1_work_on_broker_3(make_cluster):
    c = make_cluster(3, start=False)
    b1, b3 = c.broker(1), c.broker(3)
    # broker 3 gets a SASL_PLAINTEXT listener beside its PLAINTEXT one (the
    # inter-broker listener, through which the others list it)
    b3.sasl_port = free_port()
    lst = "PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d" % (b3.port, b3.sasl_port)
    b3.overrides.update({"listeners": lst, "advertised.listeners": lst})
    for b in c.brokers:
        b.start()
    wait_for(lambda: registered_ids(b1) == {1, 2, 3}, 30, "broker 1 to list brokers 1-3")

    def login(user, pw, mech="SCRAM-SHA-256"):
        with kr.Conn(b3.sasl_port) as conn:
            return scram_login(conn, user, pw, mech)[0]
    assert login("zed", "zed-pw") == 58
    b1.sql("INSERT INTO scram_credentials (name, mechanism, password) "
           "VALUES ('zed', 'SCRAM-SHA-256', 'zed-pw'), ('zed', 'SCRAM-SHA-512', 'zed-pw')")
    # One row is one publish of /config/users/zed: broker 3 may read the znode
    # between the two and accept SCRAM-SHA-256 a moment before SCRAM-SHA-512.
    wait_for(lambda: login("zed", "zed-pw") == 0
             and login("zed", "zed-pw", "SCRAM-SHA-512") == 0, 20, "broker 3 to accept zed")
    assert login("zed", "wrong") == 58
    rows = c.broker(2).sql("SELECT name, mechanism FROM scram_credentials WHERE name = 'zed'")
    assert [(r["name"], r["mechanism"]) for r in rows] == [("zed", "SCRAM-SHA-256"),
                                                            ("zed", "SCRAM-SHA-512")]
    b1.sql("DELETE FROM scram_credentials WHERE name = 'zed' AND mechanism = 'SCRAM-SHA-256'")
    wait_for(lambda: login("zed", "zed-pw") == 58, 20, "broker 3 to forget zed's SCRAM-SHA-256")
    assert login("zed", "zed-pw", "SCRAM-SHA-512") == 0
    assert "applied from ZooKeeper" in b3.log_text()


def test_enabled_mechanisms_are_the_only_ones_offered(sasl_dir):
    b = _broker(sasl_dir, "only512", {"sasl.enabled.mechanisms": "SCRAM-SHA-512,GSSAPI"})
    try:
        for mech in ("PLAIN", "SCRAM-SHA-256", "GSSAPI"):
            with kr.Conn(b.port) as c:
                assert handshake(c, mech) == (33, ["SCRAM-SHA-512"]), mech
                c.wait_closed(5)
        with kr.Conn(b.port) as c:
            assert scram_login(c, "alice", "alice-secret", "SCRAM-SHA-512")[0] == 0
            c.request(kr.API_METADATA, 1, kr.metadata_body(1, []))
    finally:
        problems = finish_broker(b)
        assert not problems, "; ".join(problems)


# ---- SASL_SSL: SCRAM inside TLS (the listener's protocol from main's listeners) ----
def test_scram_over_sasl_ssl_with_every_client(sasl_dir):
    from conftest import Broker
    from tls_support import add_ssl_listener, make_certs, on_ssl, ssl_overrides
    certs = make_certs(os.path.join(sasl_dir, "certs"))
    wd = os.path.join(sasl_dir, "sasl_ssl")
    os.makedirs(wd)
    admin = free_port()
    o = dict(ssl_overrides(certs, client_auth="none"),
             **{"admin.listeners": "http://127.0.0.1:%d" % admin})
    b = add_ssl_listener(Broker(wd, o), certs, name="SASL_SSL")
    b.start()
    try:
        add_user(b, "alice", "alice-secret")
        sb = on_ssl(b)
        ck = dict(ck_sasl_conf("SCRAM-SHA-512"), **{"security.protocol": "SASL_SSL",
                                                     "ssl.ca.location": certs.ca.crt})
        kp = dict(kp_sasl("SCRAM-SHA-512", "alice", "alice-secret"),
                  security_protocol="SASL_SSL", ssl_cafile=certs.ca.crt)
        t = topic_name("saslssl")
        p = kcat(sb, ["-P", "-t", t, "-X", "security.protocol=SASL_SSL",
                      "-X", "ssl.ca.location=" + certs.ca.crt] +
                 kcat_sasl("SCRAM-SHA-512", "alice", "alice-secret")[2:],
                 input_bytes=b"".join(b"kcat-%d\n" % i for i in range(5)))
        assert p.returncode == 0, p.stderr.decode()
        produce_ok(ck_producer(sb, **ck), t, [{"value": b"ck-%d" % i} for i in range(5)])
        kpp = kp_producer(sb, **kp)
        for i in range(5):
            kpp.send(t, b"kp-%d" % i).get(timeout=15)
        kpp.close()
        want = ([b"kcat-%d" % i for i in range(5)] + [b"ck-%d" % i for i in range(5)] +
                [b"kp-%d" % i for i in range(5)])
        assert [m.value() for m in consume(sb, t, [0], 15, timeout=20, **ck)] == want
        assert [r.value for r in kp_consume(sb, t, [0], 15, timeout=20, **kp)] == want
        # a wrong password inside TLS: refused the same way
        e = auth_error(ck_conf(sb, **dict(ck, **{"sasl.password": "wrong"})))
        assert e.code() == KafkaError._AUTHENTICATION and FAILED_MSG % "SCRAM-SHA-512" in e.str()
    finally:
        problems = finish_broker(b)
        assert not problems, "; ".join(problems)


# ---- listener.name.<listener>.sasl.enabled.mechanisms ------------------------------
def test_each_listener_offers_its_own_mechanisms(sasl_dir):
    """SCRAM-SHA-256 only on the first listener, PLAIN only on OTHER: each
    SaslHandshake answers with its listener's list, and real clients log in
    on the listener that offers their mechanism and are refused on the other."""
    from conftest import Broker
    wd = os.path.join(sasl_dir, "per_listener")
    os.makedirs(wd)
    b = Broker(wd, {"admin.listeners": "http://127.0.0.1:%d" % free_port(),
                    "listener.security.protocol.map":
                        "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
                    "sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-256,SCRAM-SHA-512",
                    "listener.name.sasl_plaintext.sasl.enabled.mechanisms": "SCRAM-SHA-256",
                    "listener.name.OTHER.sasl.enabled.mechanisms": "PLAIN"})
    b.other_port = free_port()
    lst = "SASL_PLAINTEXT://127.0.0.1:%d,OTHER://127.0.0.1:%d" % (b.port, b.other_port)
    b.overrides.update({"listeners": lst, "advertised.listeners": lst})
    b.start()
    try:
        add_user(b, "alice", "alice-secret")
        other = SimpleNamespace(bootstrap="127.0.0.1:%d" % b.other_port, host=b.host,
                                port=b.other_port)
        for port, mech, offered in ((b.port, "PLAIN", ["SCRAM-SHA-256"]),
                                    (b.port, "SCRAM-SHA-512", ["SCRAM-SHA-256"]),
                                    (b.other_port, "SCRAM-SHA-256", ["PLAIN"])):
            with kr.Conn(port) as c:
                assert handshake(c, mech) == (33, offered), (port, mech)
                c.wait_closed(5)
        t = topic_name("perlistener")
        produce_ok(ck_producer(b, **ck_sasl_conf("SCRAM-SHA-256")), t, [{"value": b"scram"}])
        p = kcat(other, ["-P", "-t", t] + kcat_sasl("PLAIN", "alice", "alice-secret"),
                 input_bytes=b"plain\n")
        assert p.returncode == 0, p.stderr.decode()
        want = [b"scram", b"plain"]
        assert [m.value() for m in consume(other, t, [0], 2, timeout=20,
                                           **ck_sasl_conf("PLAIN"))] == want
        assert [m.value() for m in consume(b, t, [0], 2, timeout=20,
                                           **ck_sasl_conf("SCRAM-SHA-256"))] == want
        for view, mech in ((b, "PLAIN"), (b, "SCRAM-SHA-512"), (other, "SCRAM-SHA-256")):
            e = auth_error(ck_conf(view, **ck_sasl_conf(mech)))
            assert e.code() == KafkaError._AUTHENTICATION, (view.port, mech, e)
            assert "Unsupported SASL mechanism" in e.str(), (view.port, mech, e.str())
        p = kcat(other, ["-L", "-m", "5"] + kcat_sasl("SCRAM-SHA-256", "alice", "alice-secret"))
        assert p.returncode != 0
    finally:
        problems = finish_broker(b)
        assert not problems, "; ".join(problems)
