"""SASL between brokers (issue 18 item 1): replica fetchers log in to the
leader's SASL_PLAINTEXT / SASL_SSL inter-broker listener like any client
(sasl.mechanism.inter.broker.protocol, the broker's JAAS line), under an
authorizer whose super user is the broker's principal.

What a user checks: an RF 3 topic with min.insync.replicas=2 takes acks=all
writes through a client listener, every message comes back byte for byte
after the leader is killed (so a follower had them), the ISR is full again
once the killed broker is back (it logged in again); a broker with a wrong
inter-broker password never joins the ISR, logs why (the leader's message),
and the other two keep acknowledging acks=all; a client on the PLAINTEXT
listener pretending to be replica 2 gets TOPIC_AUTHORIZATION_FAILED (what
Kafka answers a follower Fetch without CLUSTER_ACTION) and
CLUSTER_AUTHORIZATION_FAILED for OffsetForLeaderEpoch with a ReplicaId.

The broker user's SCRAM credential is put in ZooKeeper's /config/users
(Kafka's layout) before the brokers start, as an operator's kafka-configs
would; PLAIN checks the password against the same stored credential.
"""
import base64
import hashlib
import hmac
import json
import os
import time

import pytest

import kafka_raw as kr
from cluster_support import (leader_and_isr, make_cluster, wait_for, zk, cl_zk_create,  # noqa: F401
                             zk_missing)
from conftest import free_port
from sasl_support import sql
from support import ck_admin, ck_producer, consume, produce_ok, topic_name
from tls_support import certs, ssl_overrides

pytestmark = pytest.mark.skipif(bool(zk_missing()), reason="ZooKeeper cannot run")

BROKER_USER, BROKER_PW = "broker", "broker-secret"
N = 300
SCRAM_LOGIN = "org.apache.kafka.common.security.scram.ScramLoginModule"
PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31


def scram_cred(password, mech, iterations=4096):
    """Kafka's /config/users value of one mechanism."""
    h = {"SCRAM-SHA-256": hashlib.sha256, "SCRAM-SHA-512": hashlib.sha512}[mech]
    salt = os.urandom(24)
    salted = hashlib.pbkdf2_hmac(h().name, password.encode(), salt, iterations)
    client_key = hmac.new(salted, b"Client Key", h).digest()
    b64 = lambda b: base64.b64encode(b).decode()   # noqa: E731
    return "salt=%s,stored_key=%s,server_key=%s,iterations=%d" % (
        b64(salt), b64(h(client_key).digest()), b64(hmac.new(salted, b"Server Key", h).digest()),
        iterations)


def put_user(c, name, password):
    cfg = {m: scram_cred(password, m) for m in ("SCRAM-SHA-256", "SCRAM-SHA-512")}
    cl_zk_create(c.zk.connect, "%s/config/users/%s" % (c.chroot, name),
              json.dumps({"version": 1, "config": cfg}).encode())


def jaas(module, password=BROKER_PW, user=BROKER_USER):
    return '%s required username="%s" password="%s";' % (module, user, password)


def sasl_cluster(make_cluster, proto, mechanism, module, extra=None, passwords=None):  # noqa: F811
    """3 brokers, not started: PLAINTEXT for clients, INTERNAL (proto) for
    replication, the authorizer on with the broker user as super user."""
    o = {"listener.security.protocol.map": "PLAINTEXT:PLAINTEXT,INTERNAL:" + proto,
         "inter.broker.listener.name": "INTERNAL",
         "sasl.mechanism.inter.broker.protocol": mechanism,
         "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:" + BROKER_USER,
         "allow.everyone.if.no.acl.found": "true",
         "replica.fetch.backoff.ms": "500"}
    o.update(extra or {})
    c = make_cluster(3, start=False, overrides=o)
    for i, b in enumerate(c.brokers):
        b.int_port = free_port()
        lst = "PLAINTEXT://127.0.0.1:%d,INTERNAL://127.0.0.1:%d" % (b.port, b.int_port)
        b.overrides["listeners"] = lst
        b.overrides["advertised.listeners"] = lst
        pw = (passwords or {}).get(b.broker_id, BROKER_PW)
        b.overrides["listener.name.internal.%s.sasl.jaas.config" % mechanism.lower()] = \
            jaas(module, pw)
    put_user(c, BROKER_USER, BROKER_PW)
    return c


def rf3_topic(b, prefix):
    topic = topic_name(prefix)
    from confluent_kafka.admin import NewTopic
    fs = ck_admin(b).create_topics([NewTopic(topic, num_partitions=1, replication_factor=3,
                                              config={"min.insync.replicas": "2"})])
    fs[topic].result(20)
    return topic


def vals(tag, n=N):
    return [b"%s-%d-" % (tag, i) + bytes([i & 0xff, 0, 0xfe]) + b"q" * (i % 400)
            for i in range(n)]


def live(c, exclude=()):
    return [b for b in c.brokers if b.broker_id not in exclude]


def isr_is(c, topic, want, exclude=()):
    def ok():
        for b in live(c, exclude):
            li = leader_and_isr(b, topic)
            if not li or li[1] != tuple(sorted(want)):
                return False
        return True
    return ok


def replicate_across_leader_change(c, topic, tag):
    """acks=all N, all back byte for byte after the leader dies and again
    once it is back in the ISR (it logged in to the new leader)."""
    b1 = c.brokers[0]
    wait_for(isr_is(c, topic, {1, 2, 3}), 30, "ISR 1,2,3 of %s" % topic)
    first = vals(tag + b"a")
    produce_ok(ck_producer(b1), topic, [{"value": v, "partition": 0} for v in first])
    wait_for(isr_is(c, topic, {1, 2, 3}), 30, "ISR full after produce")
    leader = leader_and_isr(b1, topic)[0]
    c.broker(leader).kill()
    rest = live(c, (leader,))
    wait_for(lambda: (leader_and_isr(rest[0], topic) or (leader,))[0] not in (leader, -1), 30,
             "a new leader of %s" % topic)
    for b in rest:
        assert [m.value() for m in consume(b, topic, [0], len(first))] == first
    second = vals(tag + b"b")
    produce_ok(ck_producer(rest[0]), topic, [{"value": v, "partition": 0} for v in second])
    c.broker(leader).start()
    wait_for(isr_is(c, topic, {1, 2, 3}), 45, "the restarted broker %d back in the ISR" % leader)
    for b in c.brokers:
        assert [m.value() for m in consume(b, topic, [0], 2 * N)] == first + second
    return leader


def test_scram_sha512_inter_broker_over_sasl_plaintext_with_authorizer(make_cluster):  # noqa: F811
    c = sasl_cluster(make_cluster, "SASL_PLAINTEXT", "SCRAM-SHA-512", SCRAM_LOGIN,
                     extra={"connections.max.reauth.ms": "3000"})
    c.start()
    topic = rf3_topic(c.brokers[0], "sasl-ib-scram")
    replicate_across_leader_change(c, topic, b"s")
    # KIP-368: the leaders' sessions last 3 s; the followers log in again
    # on the same connection and stay in the ISR through several lifetimes.
    time.sleep(7)
    produce_ok(ck_producer(c.brokers[0]), topic, [{"value": b"after-reauth", "partition": 0}])
    wait_for(isr_is(c, topic, {1, 2, 3}), 20, "ISR full after re-authentications")
    logs = "\n".join(b.log_text() for b in c.brokers)
    assert "SASL SCRAM-SHA-512 authentication as User:broker succeeded" in logs
    assert "SASL SCRAM-SHA-512 re-authentication of User:broker" in logs, logs[-4000:]


def test_pretend_replica_without_cluster_action_is_refused(make_cluster):  # noqa: F811
    c = sasl_cluster(make_cluster, "SASL_PLAINTEXT", "SCRAM-SHA-256", SCRAM_LOGIN)
    c.start()
    b1 = c.brokers[0]
    topic = rf3_topic(b1, "sasl-ib-authz")
    produce_ok(ck_producer(b1), topic, [{"value": b"x%d" % i, "partition": 0} for i in range(5)])
    # An ACL on the cluster: allow.everyone.if.no.acl.found no longer lets
    # User:ANONYMOUS (the PLAINTEXT listener) have CLUSTER_ACTION.
    st, body = sql(b1, "INSERT INTO acls (resource_type, resource_name, pattern_type, "
                       "principal, operation, permission) VALUES ('CLUSTER', 'kafka-cluster', "
                       "'LITERAL', 'User:ops', 'ALTER', 'ALLOW')")
    assert st == 200, body
    leader = leader_and_isr(b1, topic)[0]
    lb = c.broker(leader)
    fake = next(i for i in (1, 2, 3) if i != leader)

    def refused():
        with kr.Conn(lb.port, timeout=10) as conn:
            r = conn.request(kr.API_FETCH, 11, kr.fetch_v11_body([(topic, 0, 0)], 0,
                                                                  replica_id=fake))
            err, parts = kr.parse_fetch_v11(r)
        return err == 0 and [(p[0], p[1], p[2], p[5]) for p in parts] == [
            (topic, 0, TOPIC_AUTHORIZATION_FAILED, b"")]
    wait_for(refused, 15, "a pretend replica fetch refused once the ACL reached broker %d"
             % leader)
    # The same Fetch as a consumer (ReplicaId -1) reads: topics have no ACL.
    with kr.Conn(lb.port, timeout=10) as conn:
        r = conn.request(kr.API_FETCH, 11, kr.fetch_v11_body([(topic, 0, 0)], 0))
        err, parts = kr.parse_fetch_v11(r)
    assert err == 0 and parts[0][2] == 0 and parts[0][5], parts
    ans = kr.offset_for_leader_epoch(lb.port, 3, [(topic, [(0, -1, 0)])], replica_id=fake)
    assert ans[(topic, 0)][0] == CLUSTER_AUTHORIZATION_FAILED, ans
    # The real followers (User:broker, a super user) are unaffected.
    produce_ok(ck_producer(b1), topic, [{"value": b"y%d" % i, "partition": 0} for i in range(5)])
    wait_for(isr_is(c, topic, {1, 2, 3}), 20, "ISR full with the cluster ACL")


def test_plain_inter_broker_over_sasl_ssl(make_cluster, certs):  # noqa: F811
    c = sasl_cluster(make_cluster, "SASL_SSL", "PLAIN", PLAIN_LOGIN,
                     extra=ssl_overrides(certs, "none"))
    c.start()
    topic = rf3_topic(c.brokers[0], "sasl-ib-plain-ssl")
    replicate_across_leader_change(c, topic, b"p")
    logs = "\n".join(b.log_text() for b in c.brokers)
    assert "SASL PLAIN authentication as User:broker succeeded" in logs
    ports = {b.int_port for b in c.brokers}
    assert any("connected to 127.0.0.1:%d" % p in logs for p in ports), logs[-3000:]


def test_wrong_inter_broker_password_stays_out_of_isr(make_cluster):  # noqa: F811
    # A new partition's ISR starts with every live replica, 3 included (as
    # Kafka's): it leaves after replica.lag.time.max.ms without a fetch.
    c = sasl_cluster(make_cluster, "SASL_PLAINTEXT", "SCRAM-SHA-512", SCRAM_LOGIN,
                     extra={"replica.lag.time.max.ms": "3000"},
                     passwords={3: "not-the-password"})
    c.start()
    b1 = c.brokers[0]
    from confluent_kafka.admin import NewTopic
    topic = topic_name("sasl-ib-wrong")
    # Leaders 1 and 2 only (broker 3 follows), so 3 can never be in sync.
    fs = ck_admin(b1).create_topics([NewTopic(topic, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                              config={"min.insync.replicas": "2"})])
    fs[topic].result(20)
    wait_for(lambda: "SASL SCRAM-SHA-512 authentication as User:broker failed"
             in c.broker(3).log_text(), 20, "broker 3 to log its failed login")
    for b in c.brokers:
        wait_for(lambda b=b: (leader_and_isr(b, topic) or (0, ()))[1] == (1, 2), 30,
                 "ISR 1,2 on broker %d" % b.broker_id)
    msgs = vals(b"w")
    produce_ok(ck_producer(b1), topic, [{"value": v, "partition": 0} for v in msgs])
    for b in c.brokers[:2]:
        assert [m.value() for m in consume(b, topic, [0], N)] == msgs
    time.sleep(2)
    assert leader_and_isr(b1, topic)[1] == (1, 2)
    log3 = c.broker(3).log_text()
    fails = [l for l in log3.splitlines() if "authentication as User:broker failed" in l]
    # The leader's own words, and one line per attempt, backed off (not a spin).
    assert "Authentication failed during authentication due to invalid credentials with " \
           "SASL mechanism SCRAM-SHA-512" in fails[0], fails[0]
    assert "broker 1" in fails[0] and "reconnecting in 500 ms" in fails[0], fails[0]
    assert len(fails) < 60, len(fails)
