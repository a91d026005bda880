"""PLAIN against the JAAS users of a listener (daemon/security/sec_sasl.c inv. 6), as
Kafka's PlainServerCallbackHandler: the user_<name>="<password>" options of
listener.name.<listener>.plain.sasl.jaas.config are the listener's PLAIN
users.

What a user checks: alice and bob, listed there, log in with PLAIN from
confluent-kafka (SaslHandshake v1) and kafka-python (v0, raw tokens) and
their messages come back byte for byte; a wrong password, an unknown user,
a user that only has a SCRAM credential, and alice with her SCRAM password
are refused with SASL_AUTHENTICATION_FAILED; SCRAM on the same listener
still uses the SCRAM credentials; a second listener without user_ options
keeps checking PLAIN against the SCRAM credentials (existing setups are
unchanged); the passwords are neither logged nor shown by DescribeConfigs;
a malformed user_ option stops the broker at startup naming the key;
brokers replicate with inter-broker PLAIN checked against the JAAS users.
"""
import os
import shutil
import subprocess
import tempfile
import time
from types import SimpleNamespace

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient, ConfigResource

from cluster_support import make_cluster, zk, zk_missing  # noqa: F401
from conftest import Broker, finish_broker, free_port
import kafka_raw as kr
from sasl_support import SaslBroker, add_user, authenticate, ck_sasl, handshake, kp_sasl
from support import ck_conf, ck_producer, consume, kp_consume, kp_producer, produce_ok, topic_name
from test_sasl import auth_error
import test_sasl_inter_broker as ib

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
ALICE_PW, BOB_PW = "alice-jaas-s3cret", 'bob "quoted" p;w'
JAAS = ('%s required username="alice" password="%s" user_alice="%s" user_bob="%s";'
        % (PLAIN_LOGIN, ALICE_PW, ALICE_PW, BOB_PW.replace('"', '\\"')))
SASL_AUTHENTICATION_FAILED = 58


@pytest.fixture(scope="module")
def jb():
    """SASL_PLAINTEXT with user_alice/user_bob; OTHER (SASL_PLAINTEXT too)
    without user_ options.  SCRAM credentials: alice (another password) and
    carol."""
    wd = tempfile.mkdtemp(prefix="sluice-it-jaas-")
    b = Broker(wd, {"admin.listeners": "http://127.0.0.1:%d" % free_port(),
                    "listener.security.protocol.map":
                        "SASL_PLAINTEXT:SASL_PLAINTEXT,OTHER:SASL_PLAINTEXT",
                    "listener.name.sasl_plaintext.plain.sasl.jaas.config": JAAS})
    b.other_port = free_port()
    lst = "SASL_PLAINTEXT://127.0.0.1:%d,OTHER://127.0.0.1:%d" % (b.port, b.other_port)
    b.overrides.update({"listeners": lst, "advertised.listeners": lst})
    b.start()
    add_user(b, "alice", "alice-scram")
    add_user(b, "carol", "carol-scram")
    b.other = SimpleNamespace(bootstrap="127.0.0.1:%d" % b.other_port, host=b.host,
                              port=b.other_port)
    yield b
    problems = finish_broker(b)
    shutil.rmtree(wd, ignore_errors=True)
    assert not problems, "; ".join(problems)


def plain_v1(port, user, pw):
    """SaslHandshake v1 + SaslAuthenticate: (ErrorCode, ErrorMessage)."""
    with kr.Conn(port) as c:
        assert handshake(c, "PLAIN")[0] == 0
        err, msg, _, _ = authenticate(c, b"\0" + user.encode() + b"\0" + pw.encode())
        if err:
            c.wait_closed(5)
        return err, msg or None


def plain_v0(port, user, pw):
    """SaslHandshake v0 + a raw token (kafka-python's way): True when the
    broker answered the empty token, False when it just closed."""
    with kr.Conn(port) as c:
        assert handshake(c, "PLAIN", version=0)[0] == 0
        c.send_raw(kr.nbytes(b"\0" + user.encode() + b"\0" + pw.encode()))
        try:
            c._fill(4, time.monotonic() + 10)    # the empty token: INT32 0
        except kr.Closed:
            return False
        assert c.buf == b"\0\0\0\0", c.buf
        return True


# Every byte value, keys, an empty value: what goes in comes out.
MSGS = ([{"key": b"k-%d" % i, "value": bytes(range(256)) * (i + 1)} for i in range(5)] +
        [{"key": b"\x00\xff", "value": b""}])


def test_jaas_users_log_in_with_plain_and_their_messages_come_back(jb):
    t = topic_name("jaas-plain")
    produce_ok(ck_producer(jb, **ck_sasl("PLAIN", "alice", ALICE_PW)), t,
               [dict(m, partition=0) for m in MSGS])
    kp = kp_producer(jb, **kp_sasl("PLAIN", "bob", BOB_PW))
    for m in MSGS:
        kp.send(t, key=m["key"], value=m["value"], partition=0).get(timeout=15)
    kp.close()
    want = [(m["key"], m["value"]) for m in MSGS] * 2
    got = consume(jb, t, [0], len(want), timeout=20, **ck_sasl("PLAIN", "bob", BOB_PW))
    assert [(m.key(), m.value() or b"") for m in got] == want
    got = kp_consume(jb, t, [0], len(want), timeout=20, **kp_sasl("PLAIN", "alice", ALICE_PW))
    assert [(r.key, r.value or b"") for r in got] == want
    log = jb.log_text()
    assert "SASL PLAIN authentication of User:alice" in log
    assert "SASL PLAIN authentication of User:bob" in log


@pytest.mark.parametrize("user,pw", [
    ("alice", "wrong"),              # a wrong password
    ("alice", "alice-scram"),        # her SCRAM password: not PLAIN's here
    ("mallory", ALICE_PW),           # an unknown user
    ("carol", "carol-scram"),        # a SCRAM-only user: not a PLAIN user here
    ("alic", ALICE_PW),              # a prefix of a listed name
    ("alice", ALICE_PW + "x"),       # the password and more
])
def test_anyone_else_is_refused(jb, user, pw):
    assert plain_v1(jb.port, user, pw) == (SASL_AUTHENTICATION_FAILED,
                                           "Authentication failed: Invalid username or password")
    assert not plain_v0(jb.port, user, pw)
    e = auth_error(ck_conf(jb, **ck_sasl("PLAIN", user, pw)))
    assert e.code() == KafkaError._AUTHENTICATION, e
    assert "Invalid username or password" in e.str(), e.str()


def test_raw_logins_of_the_listed_users_succeed(jb):
    assert plain_v1(jb.port, "alice", ALICE_PW) == (0, None)
    assert plain_v1(jb.port, "bob", BOB_PW) == (0, None)
    assert plain_v0(jb.port, "bob", BOB_PW)


def test_scram_and_a_listener_without_user_options_keep_the_scram_credentials(jb):
    t = topic_name("jaas-other")
    # SCRAM on the JAAS listener: the SCRAM credential, as before.
    produce_ok(ck_producer(jb, **ck_sasl("SCRAM-SHA-256", "alice", "alice-scram")), t,
               [{"value": b"scram", "partition": 0}])
    # OTHER has no user_ options: PLAIN checks the SCRAM credentials there.
    produce_ok(ck_producer(jb.other, **ck_sasl("PLAIN", "carol", "carol-scram")), t,
               [{"value": b"carol", "partition": 0}])
    assert plain_v1(jb.other_port, "alice", "alice-scram") == (0, None)
    for user, pw in (("alice", ALICE_PW), ("bob", BOB_PW)):
        assert plain_v1(jb.other_port, user, pw)[0] == SASL_AUTHENTICATION_FAILED, user
    got = consume(jb.other, t, [0], 2, timeout=20, **ck_sasl("PLAIN", "carol", "carol-scram"))
    assert [m.value() for m in got] == [b"scram", b"carol"]


def test_jaas_passwords_are_neither_logged_nor_described(jb):
    a = AdminClient(ck_conf(jb, **ck_sasl("PLAIN", "alice", ALICE_PW)))
    res = ConfigResource(ConfigResource.Type.BROKER, str(getattr(jb, "broker_id", 0)))
    entries = a.describe_configs([res], request_timeout=15)[res].result(15)
    for name, e in entries.items():
        assert ALICE_PW not in (e.value or "") and "bob" not in (e.value or ""), name
    assert entries["sasl.jaas.config"].is_sensitive
    assert entries["sasl.jaas.config"].value is None
    # the broker's lines, not the harness's "===== start" line with the command
    log = "\n".join(ln for ln in jb.log_text().splitlines() if not ln.startswith("====="))
    assert "SASL PLAIN authentication of User:alice" in log
    for secret in (ALICE_PW, "quoted", "alice-scram"):
        assert secret not in log, secret


@pytest.mark.parametrize("line,says", [
    (PLAIN_LOGIN + ' required user_="x";', "option user_ names no user"),
    (PLAIN_LOGIN + ' required user_a="" ;', "option user_a has an empty password"),
    (PLAIN_LOGIN + ' required user_a="s3cret" user_a="other";', "option user_a is given twice"),
    (PLAIN_LOGIN + ' required user_a="%s";' % ("p" * 300),
     "option user_a: the password is too long (at most 255 bytes)"),
])
def test_a_malformed_user_option_stops_the_broker_naming_it(tmp_path, line, says):
    b = SaslBroker(str(tmp_path), {"listener.name.sasl_plaintext.plain.sasl.jaas.config": line})
    r = subprocess.run(b.argv(), stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                       stderr=subprocess.STDOUT, cwd=b.workdir, timeout=30)
    out = r.stdout.decode(errors="replace")
    assert r.returncode != 0, out
    assert ("Invalid value for configuration listener.name.sasl_plaintext.plain.sasl.jaas.config: "
            + says) in out, out
    assert "s3cret" not in out and "p" * 50 not in out


@pytest.mark.skipif(bool(zk_missing()), reason="ZooKeeper cannot run")
def test_brokers_replicate_with_plain_checked_against_the_jaas_users(make_cluster):  # noqa: F811
    """The broker user's SCRAM credential in ZooKeeper has another password
    than its JAAS one: replication works only because the leader checks the
    fetchers' PLAIN logins against user_broker."""
    c = ib.sasl_cluster(make_cluster, "SASL_PLAINTEXT", "PLAIN", PLAIN_LOGIN)
    line = ('%s required username="broker" password="jaas-broker-pw" '
            'user_broker="jaas-broker-pw" user_alice="a";' % PLAIN_LOGIN)
    for b in c.brokers:
        b.overrides["listener.name.internal.plain.sasl.jaas.config"] = line
    c.start()
    topic = ib.rf3_topic(c.brokers[0], "sasl-ib-jaas")
    ib.replicate_across_leader_change(c, topic, b"j")
    logs = "\n".join(ln for b in c.brokers for ln in b.log_text().splitlines()
                     if not ln.startswith("====="))
    assert "SASL PLAIN authentication as User:broker succeeded" in logs
    assert "jaas-broker-pw" not in logs
