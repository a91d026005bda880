"""SASL principals under the ACL authorizer: the principal a SCRAM or PLAIN
login names (User:alice) is the one the ACLs are checked against, so two
users of the same broker see and touch different things, super.users may do
everything, and a user without DESCRIBE does not see the topic at all; the
admin endpoint takes the same users (HTTP Basic) by their rights on the
cluster."""
import base64
import json
import shutil
import tempfile
import urllib.error
import urllib.request

import pytest
from confluent_kafka import KafkaError
from confluent_kafka.admin import AdminClient
from kafka.admin import (ACL, ACLOperation, ACLPermissionType, ACLResourcePatternType,
                         KafkaAdminClient, ResourcePattern, ResourceType)
from kafka.errors import ClusterAuthorizationFailedError

from conftest import finish_broker
from sasl_support import add_user, ck_sasl, kcat_sasl, kp_sasl, sql, start_sasl_broker
from support import ck_conf, ck_producer, consume, kcat, produce, produce_ok

AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin", "auto.create.topics.enable": "false"}


def grant(b, rtype, name, op, principal, perm="ALLOW", pattern="LITERAL"):
    st, body = sql(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
                      "operation, permission) VALUES ('%s', '%s', '%s', '%s', '%s', '%s')"
                   % (rtype, name, pattern, principal, op, perm))
    assert st == 200, body


@pytest.fixture(scope="module")
def broker():
    d = tempfile.mkdtemp(prefix="sluice-it-sasl-acls-")
    b = start_sasl_broker(d, AUTHZ)
    for user in ("alice", "bob", "admin"):
        add_user(b, user, user + "-pw")
    st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('alice-orders', 2)")
    assert st == 200, body
    st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('shared-log', 1)")
    assert st == 200, body
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def who(user, mech="SCRAM-SHA-256"):
    return ck_sasl(mech, user, user + "-pw")


def topics_seen(b, user):
    a = AdminClient(ck_conf(b, **who(user)))
    return set(t for t in a.list_topics(timeout=10).topics if not t.startswith("__"))


def test_each_sasl_user_gets_what_its_acls_allow(broker):
    b = broker
    grant(b, "TOPIC", "alice-", "WRITE", "User:alice", pattern="PREFIXED")
    grant(b, "TOPIC", "alice-", "READ", "User:alice", pattern="PREFIXED")
    grant(b, "GROUP", "alice-group", "READ", "User:alice")
    grant(b, "TOPIC", "shared-log", "READ", "User:bob")
    grant(b, "TOPIC", "shared-log", "READ", "User:alice")
    grant(b, "TOPIC", "shared-log", "WRITE", "User:alice", perm="DENY")

    # alice, with SCRAM-SHA-256: writes and reads her topic, in order, byte for byte.
    msgs = [{"value": b"order-%04d" % i + bytes(range(i % 50)), "partition": i % 2}
            for i in range(200)]
    produce_ok(ck_producer(b, **who("alice")), "alice-orders", msgs)
    got = consume(b, "alice-orders", [0, 1], 200, **who("alice"), **{"group.id": "alice-group"})
    for p in (0, 1):
        assert [m.value() for m in got if m.partition() == p] == \
            [m["value"] for m in msgs if m["partition"] == p]
    # ... and with PLAIN, the same principal: the same rights.
    produce_ok(ck_producer(b, **who("alice", "PLAIN")), "alice-orders",
               [{"value": b"plain", "partition": 0}])

    # bob: no WRITE on alice-orders (TOPIC_AUTHORIZATION_FAILED for each message) and no
    # DESCRIBE either, so his Metadata does not list it; shared-log he may read only.
    reports = produce(ck_producer(b, **who("bob"), **{"message.timeout.ms": 10000}),
                      "alice-orders", [{"value": b"x", "partition": 0}], timeout=20)
    assert [e.code() if e else None for e, _ in reports] == \
        [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert topics_seen(b, "bob") == {"shared-log"}
    assert topics_seen(b, "alice") == {"alice-orders", "shared-log"}
    assert topics_seen(b, "admin") == {"alice-orders", "shared-log"}

    # A DENY over a prefixed ALLOW: alice's write to shared-log is refused, her read is not.
    reports = produce(ck_producer(b, **who("alice"), **{"message.timeout.ms": 10000}),
                      "shared-log", [{"value": b"y"}], timeout=20)
    assert [e.code() if e else None for e, _ in reports] == \
        [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    # The super user writes anywhere; bob and alice read it.
    produce_ok(ck_producer(b, **who("admin", "SCRAM-SHA-512")), "shared-log",
               [{"value": b"from-admin-%d" % i} for i in range(5)])
    for user in ("bob", "alice"):
        got = consume(b, "shared-log", [0], 5, **who(user), **{"group.id": "g-" + user})
        assert [m.value() for m in got] == [b"from-admin-%d" % i for i in range(5)], user

    # kcat as bob, reading alice's topic: refused with the topic named.
    p = kcat(b, kcat_sasl("SCRAM-SHA-256", "bob", "bob-pw") +
             ["-C", "-t", "alice-orders", "-p", "0", "-o", "beginning", "-e", "-q"])
    assert b"order-" not in p.stdout
    assert b"authoriz" in p.stderr.lower(), p.stderr


def test_only_a_principal_with_cluster_alter_manages_acls(broker):
    b = broker
    acl = ACL("User:bob", "*", ACLOperation.WRITE, ACLPermissionType.ALLOW,
              ResourcePattern(ResourceType.TOPIC, "bob-", ACLResourcePatternType.PREFIXED))

    def create_as(user):
        a = KafkaAdminClient(bootstrap_servers=[b.bootstrap], request_timeout_ms=10000,
                             api_version_auto_timeout_ms=10000,
                             **kp_sasl("SCRAM-SHA-512", user, user + "-pw"))
        try:
            return a.create_acls([acl])
        finally:
            a.close()

    refused = create_as("alice")
    assert not refused["succeeded"] and len(refused["failed"]) == 1, refused
    assert refused["failed"][0][1] is ClusterAuthorizationFailedError, refused
    made = create_as("admin")
    assert len(made["succeeded"]) == 1 and not made["failed"], made
    st, rows = sql(b, "SELECT principal, operation, permission FROM acls "
                      "WHERE resource_name = 'bob-' AND pattern_type = 'PREFIXED'")
    assert st == 200 and rows == [{"principal": "User:bob", "operation": "WRITE",
                                   "permission": "ALLOW"}], rows


def http_as(b, path, body=None, user=None, password=None):
    """(status, text) of one admin request with Basic credentials."""
    req = urllib.request.Request("http://%s%s" % (b.admin, path),
                                 data=body.encode() if body is not None else None,
                                 method="POST" if body is not None else "GET")
    if user is not None:
        cred = base64.b64encode(("%s:%s" % (user, password)).encode()).decode()
        req.add_header("Authorization", "Basic " + cred)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode()
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode()


def test_admin_endpoint_takes_sasl_users_by_their_cluster_rights(broker):
    b = broker
    add_user(b, "carol", "carol-pw", mechanisms=("SCRAM-SHA-512",))
    grant(b, "CLUSTER", "kafka-cluster", "DESCRIBE", "User:carol")
    # carol may read (SQL and /metrics) but not write.
    st, text = http_as(b, "/sql?format=json", "SELECT name FROM topics ORDER BY name",
                       "carol", "carol-pw")
    assert st == 200 and json.loads(text) == [{"name": "alice-orders"}, {"name": "shared-log"}], text
    st, text = http_as(b, "/metrics", None, "carol", "carol-pw")
    assert st == 200 and "sluice_" in text
    st, text = http_as(b, "/sql", "INSERT INTO topics (name, partitions) VALUES ('carols', 1)",
                       "carol", "carol-pw")
    assert st == 400 and "needs ALTER on the cluster" in text, (st, text)
    # alice has no right on the cluster: 403 naming what is needed.
    st, text = http_as(b, "/sql", "SELECT 1", "alice", "alice-pw")
    assert st == 403 and "User:alice" in text and "DESCRIBE" in text, (st, text)
    # A wrong password or an unknown user: 401.
    for user, pw in (("carol", "wrong"), ("nobody", "x"), ("", "x")):
        st, text = http_as(b, "/sql", "SELECT 1", user, pw)
        assert st == 401, (user, st, text)
    # The super user writes; the topic exists afterwards.
    st, text = http_as(b, "/sql", "INSERT INTO topics (name, partitions) VALUES ('by-admin', 1)",
                       "admin", "admin-pw")
    assert st == 200, text
    st, text = http_as(b, "/sql?format=json", "SELECT name FROM topics WHERE name = 'by-admin'",
                       "carol", "carol-pw")
    assert st == 200 and json.loads(text) == [{"name": "by-admin"}], text


def test_admin_basic_logins_at_once_each_get_their_answer(broker):
    """Basic logins are checked on a worker (a PBKDF2 per first or wrong
    password): many at once, right and wrong mixed, each gets its own
    answer, and clients that hang up mid-check hurt nobody."""
    import socket
    import threading
    b = broker
    add_user(b, "dave", "dave-pw", mechanisms=("SCRAM-SHA-256",))
    grant(b, "CLUSTER", "kafka-cluster", "DESCRIBE", "User:dave")
    host, port = b.admin.rsplit(":", 1)
    # Hang-ups: a wrong password (never cached, so always a worker's check)
    # sent and the socket closed at once.
    for i in range(20):
        cred = base64.b64encode(("dave:gone-%d" % i).encode()).decode()
        s = socket.create_connection((host, int(port)), timeout=10)
        s.sendall(("GET /metrics HTTP/1.1\r\nHost: x\r\nAuthorization: Basic %s\r\n\r\n"
                   % cred).encode())
        s.close()
    results = {}

    def one(i):
        right = i % 3 == 0
        st, text = http_as(b, "/sql?format=json", "SELECT %d AS n" % i, "dave",
                           "dave-pw" if right else "wrong-%d" % i)
        results[i] = (right, st, text)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(60)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert len(results) == 60, sorted(results)
    for i, (right, st, text) in sorted(results.items()):
        if right:
            assert st == 200 and json.loads(text) == [{"n": i}], (i, st, text)
        else:
            assert st == 401 and "invalid user name or password" in text, (i, st, text)
    st, text = http_as(b, "/metrics", None, "dave", "dave-pw")
    assert st == 200 and "sluice_" in text
