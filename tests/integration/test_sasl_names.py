"""SCRAM user names as Kafka allows them (issue 18 leftovers): any name but
an empty, over-long or not-UTF-8 one.  A client escapes ',' as =2C and '='
as =3D in its SCRAM client-first message (librdkafka does; kafka-python's
ScramClient does not, so the raw exchange is given the escaped name); in
cluster mode the znode is /config/users/<name> sanitized as Kafka's
Sanitizer writes it (al%2Cice%3Dx%20y), which other brokers read back."""
import shutil
import tempfile

import pytest
from confluent_kafka import KafkaError

import kafka_raw as kr
from cluster_support import (make_cluster, registered_ids, wait_for, zk, cl_zk_children,  # noqa: F401
                             cl_zk_get, zk_missing)
from conftest import finish_broker, free_port
from sasl_support import (add_user, authenticate, ck_sasl, handshake, scram_login, sql,
                          start_sasl_broker)
from support import ck_conf, ck_producer, produce, produce_ok

ODD = "al,ice=x y"
ODD_SASLNAME = "al=2Cice=3Dx y"
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin", "auto.create.topics.enable": "false"}


def plain_login(port, user, pw):
    with kr.Conn(port) as c:
        assert handshake(c, "PLAIN")[0] == 0
        return authenticate(c, b"\0" + user.encode() + b"\0" + pw.encode())[0]


def scram_raw(port, saslname, pw, mech="SCRAM-SHA-256"):
    with kr.Conn(port) as c:
        return scram_login(c, saslname, pw, mech)[0]


@pytest.fixture(scope="module")
def broker():
    d = tempfile.mkdtemp(prefix="sluice-it-sasl-names-")
    b = start_sasl_broker(d, AUTHZ)
    add_user(b, ODD, "odd-pw")
    add_user(b, "admin", "admin-pw")
    for stmt in ("INSERT INTO topics (name, partitions) VALUES ('odd-topic', 1)",
                 "INSERT INTO acls (resource_type, resource_name, principal, operation, "
                 "permission) VALUES ('TOPIC', 'odd-topic', 'User:%s', 'WRITE', 'ALLOW')" % ODD):
        st, body = sql(b, stmt)
        assert st == 200, body
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def test_odd_user_logs_in_with_scram_and_plain(broker):
    assert scram_raw(broker.port, ODD_SASLNAME, "odd-pw") == 0
    assert scram_raw(broker.port, ODD_SASLNAME, "odd-pw", "SCRAM-SHA-512") == 0
    assert scram_raw(broker.port, ODD_SASLNAME, "wrong") == 58     # SASL_AUTHENTICATION_FAILED
    assert scram_raw(broker.port, "al,ice=x y", "odd-pw") != 0    # unescaped: malformed
    assert plain_login(broker.port, ODD, "odd-pw") == 0
    assert plain_login(broker.port, ODD, "wrong") == 58
    st, rows = sql(broker, "SELECT name, mechanism FROM scram_credentials WHERE name = '%s'"
                   % ODD)
    assert rows == [{"name": ODD, "mechanism": "SCRAM-SHA-256"},
                    {"name": ODD, "mechanism": "SCRAM-SHA-512"}]


@pytest.mark.parametrize("mech", ["SCRAM-SHA-256", "PLAIN"])
def test_odd_user_is_its_acl_principal(broker, mech):
    """librdkafka escapes the name itself; the ACL for User:al,ice=x y lets
    it write, and admin's nothing-granted neighbour is refused."""
    p = ck_producer(broker, **ck_sasl(mech, ODD, "odd-pw"))
    assert produce_ok(p, "odd-topic", [{"value": b"x"}], timeout=30)[0].topic() == "odd-topic"
    assert "SASL %s" % mech in broker.log_text()
    assert "User:%s" % ODD in broker.log_text()
    add_user(broker, "al,ice", "other-pw", mechanisms=("SCRAM-SHA-256",))
    p2 = ck_producer(broker, **ck_sasl("SCRAM-SHA-256", "al,ice", "other-pw"))
    (err, _m), = produce(p2, "odd-topic", [{"value": b"y"}], timeout=20)
    assert err.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED


def test_only_unusable_names_are_refused(broker):
    st, body = sql(broker, "INSERT INTO scram_credentials (name, mechanism, password) VALUES "
                           "('', 'SCRAM-SHA-256', 'pw')")
    assert st == 400 and "Username must not be empty" in body["error"], body
    st, body = sql(broker, "INSERT INTO scram_credentials (name, mechanism, password) VALUES "
                           "('%s', 'SCRAM-SHA-256', 'pw')" % ("n" * 256))
    assert st == 400 and "Username is longer than 255 bytes" in body["error"], body
    st, body = sql(broker, "INSERT INTO scram_credentials (name, mechanism, password) VALUES "
                           "(CAST(x'61ff62' AS TEXT), 'SCRAM-SHA-256', 'pw')")
    assert st == 400 and "Username is not valid UTF-8" in body["error"], body
    for name in ("n" * 255, "*/%+\u00e9\u263a"):
        st, body = sql(broker, "INSERT INTO scram_credentials (name, mechanism, password) "
                               "VALUES ('%s', 'SCRAM-SHA-256', 'pw')" % name)
        assert st == 200, body
        assert plain_login(broker.port, name, "pw") == 0


@pytest.mark.skipif(bool(zk_missing()), reason="ZooKeeper cannot run")
def test_odd_user_znode_is_sanitized_and_read_by_other_brokers(make_cluster):
    c = make_cluster(2, start=False)
    b1, b2 = c.broker(1), c.broker(2)
    sasl_port = free_port()
    plain_argv = b2.argv

    def with_sasl():
        out = []
        for a in plain_argv():
            if a.startswith(("listeners=PLAINTEXT://", "advertised.listeners=PLAINTEXT://")):
                a += ",SASL_PLAINTEXT://127.0.0.1:%d" % sasl_port
            out.append(a)
        return out
    b2.argv = with_sasl
    for b in c.brokers:
        b.start()
    wait_for(lambda: registered_ids(b1) == {1, 2}, 30, "broker 1 to list brokers 1-2")
    b1.sql("INSERT INTO scram_credentials (name, mechanism, password) "
           "VALUES ('%s', 'SCRAM-SHA-256', 'odd-pw')" % ODD)
    wait_for(lambda: scram_raw(sasl_port, ODD_SASLNAME, "odd-pw") == 0, 20,
             "broker 2 to accept %s" % ODD)
    assert plain_login(sasl_port, ODD, "odd-pw") == 0
    assert cl_zk_children(c.zk_connect, "/config/users") == ["al%2Cice%3Dx%20y"]
    assert b"SCRAM-SHA-256" in cl_zk_get(c.zk_connect, "/config/users/al%2Cice%3Dx%20y")[0]
    notes = [cl_zk_get(c.zk_connect, "/config/changes/" + n)[0]
             for n in cl_zk_children(c.zk_connect, "/config/changes")]
    assert b'{"version":2,"entity_path":"users/al%2Cice%3Dx%20y"}' in notes
    b1.sql("DELETE FROM scram_credentials WHERE name = '%s'" % ODD)
    wait_for(lambda: scram_raw(sasl_port, ODD_SASLNAME, "odd-pw") == 58, 20,
             "broker 2 to forget %s" % ODD)
    assert b2.sql("SELECT name FROM scram_credentials") == []
