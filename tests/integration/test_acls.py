"""ACLs (issue 18 item 4): Kafka's authorizer model as clients see it.

Until SASL and TLS land every client is User:ANONYMOUS, so the matrix
grants and denies that principal; an ACL for another principal
(User:alice) must not let it in.  ACLs are seeded through SQL (an
operator's path, not the Kafka authorizer's), then managed with
kafka-python's admin client (CreateAcls / DescribeAcls / DeleteAcls), and
each denial is checked with the exact error confluent-kafka (librdkafka),
kafka-python and kcat report."""
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition
from confluent_kafka.admin import ConfigResource, NewPartitions, NewTopic
from kafka.admin import (ACL, ACLFilter, ACLOperation, ACLPermissionType,
                         ACLResourcePatternType, KafkaAdminClient, ResourcePattern,
                         ResourcePatternFilter, ResourceType)
from kafka.errors import (GroupAuthorizationFailedError, InvalidRequestError, KafkaTimeoutError,
                          SecurityDisabledError)

import kafka_raw as kr
from cluster_support import make_cluster, wait_equal, zk  # noqa: F401
from support import ck_admin, ck_consumer, ck_producer, kcat, produce, produce_ok
from test_sql import admin_broker, sql, sql_error

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
ME = "User:ANONYMOUS"


def grant(b, rtype, name, op, perm="ALLOW", principal=ME, pattern="LITERAL"):
    sql(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
           "operation, permission) VALUES ('%s', '%s', '%s', '%s', '%s', '%s')"
           % (rtype, name, pattern, principal, op, perm))


def make_topic(b, name, partitions=1):
    sql(b, "INSERT INTO topics (name, partitions) VALUES ('%s', %d)" % (name, partitions))


def kp_admin(b):
    return KafkaAdminClient(bootstrap_servers=[b.bootstrap], request_timeout_ms=10000,
                            api_version_auto_timeout_ms=10000)


def acl_call(b, method, *args):
    """One kafka-python admin call (create_acls, describe_acls, delete_acls)."""
    a = kp_admin(b)
    try:
        return getattr(a, method)(*args)
    finally:
        a.close()


def allow(op, rtype, name, principal=ME, pattern=ACLResourcePatternType.LITERAL,
          perm=ACLPermissionType.ALLOW, host="*"):
    return ACL(principal, host, op, perm, ResourcePattern(rtype, name, pattern))


def any_filter(rtype=ResourceType.ANY, name=None, pattern=ACLResourcePatternType.ANY):
    return ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                     ResourcePatternFilter(rtype, name, pattern))


def delivery_errors(b, topic, n=1, **kw):
    try:
        reports = produce(ck_producer(b, **kw), topic, [{"value": b"v%d" % i} for i in range(n)],
                          timeout=20)
    except KafkaException as e:
        # librdkafka had the broker's verdict on the topic from a Metadata
        # answer before produce() (a slow machine): it refuses at once.
        return [e.args[0].code()] * n
    return [err.code() if err else None for err, _ in reports]


def init_producer_id_error(b):
    """InitProducerId v0 without a transactional id (what an idempotent
    producer sends first): its ErrorCode."""
    with kr.Conn(b.port) as c:
        r = c.request(22, 0, kr.string(None) + kr.i32(60000))
        r.i32()                                       # ThrottleTimeMs
        return r.i16()


def meta_topics(b):
    return set(ck_admin(b).list_topics(timeout=10).topics)


@pytest.fixture
def secured(start_broker):
    """Authorizer on, nobody super; ANONYMOUS may manage ACLs on the cluster."""
    b = admin_broker(start_broker, **AUTHORIZER, **{"auto.create.topics.enable": "false"})
    for op in ("ALTER", "DESCRIBE"):
        grant(b, "CLUSTER", "kafka-cluster", op)
    return b


def test_acl_matrix_data_path(secured):
    b = secured
    for t in ("acl-lit", "acl-none", "acl-deny", "pre-x", "acl-alice", "acl-ronly"):
        make_topic(b, t)
    assert init_producer_id_error(b) == 31     # no WRITE anywhere yet: CLUSTER_AUTHORIZATION_FAILED
    made = acl_call(b, "create_acls", [
        allow(ACLOperation.WRITE, ResourceType.TOPIC, "acl-lit"),
        allow(ACLOperation.READ, ResourceType.TOPIC, "acl-lit"),
        allow(ACLOperation.ALL, ResourceType.TOPIC, "pre-", pattern=ACLResourcePatternType.PREFIXED),
        # DENY wins over ALLOW: ALL allowed, WRITE denied
        allow(ACLOperation.ALL, ResourceType.TOPIC, "acl-deny"),
        allow(ACLOperation.WRITE, ResourceType.TOPIC, "acl-deny", principal="User:*",
              perm=ACLPermissionType.DENY),
        # another principal's grant is not ours
        allow(ACLOperation.ALL, ResourceType.TOPIC, "acl-alice", principal="User:alice"),
        # READ implies DESCRIBE, not WRITE
        allow(ACLOperation.READ, ResourceType.TOPIC, "acl-ronly"),
        allow(ACLOperation.READ, ResourceType.GROUP, "g-ok", host="127.0.0.1"),
    ])
    assert made["failed"] == [] and len(made["succeeded"]) == 8

    # Metadata: all-topics listing shows only what DESCRIBE allows
    assert meta_topics(b) == {"acl-lit", "acl-deny", "pre-x", "acl-ronly"}
    md = ck_admin(b).list_topics(topic="acl-none", timeout=10).topics["acl-none"]
    assert md.error.code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    listing = kcat(b, ["-L"]).stdout.decode()
    assert "acl-lit" in listing and "acl-none" not in listing and "acl-alice" not in listing

    # Produce: WRITE (literal, prefixed), denied by DENY, by READ-only, by no ACL
    assert delivery_errors(b, "acl-lit", 2) == [None, None]
    assert delivery_errors(b, "pre-x") == [None]
    assert delivery_errors(b, "acl-deny") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert delivery_errors(b, "acl-ronly") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    assert delivery_errors(b, "acl-alice") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    from kafka import KafkaProducer
    # kafka-python 2.0.2 retries a TOPIC_AUTHORIZATION_FAILED Metadata answer
    # until max.block.ms (its own behaviour), then gives up
    p = KafkaProducer(bootstrap_servers=[b.bootstrap], max_block_ms=2000, acks="all")
    try:
        with pytest.raises(KafkaTimeoutError):
            p.send("acl-none", b"x").get(timeout=10)
    finally:
        p.close(timeout=5)
    k = kcat(b, ["-P", "-t", "acl-none"], input_bytes=b"x\n", timeout=20)
    assert b"Topic authorization failed" in k.stderr, k.stderr

    # Idempotent producer: IDEMPOTENT_WRITE on the cluster, or (Kafka 3,
    # KIP-679) WRITE on any topic, which ANONYMOUS now has
    assert init_producer_id_error(b) == 0
    assert delivery_errors(b, "acl-lit", **{"enable.idempotence": True}) == [None]

    # Fetch with a group: READ on the group and the topic
    c = ck_consumer(b, **{"group.id": "g-ok"})
    try:
        c.assign([TopicPartition("acl-lit", 0, 0)])
        got = []
        deadline = time.monotonic() + 20
        while len(got) < 3 and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and not m.error():
                got.append(m.value())
        assert got == [b"v0", b"v1", b"v0"]
        c.commit(offsets=[TopicPartition("acl-lit", 0, 3)], asynchronous=False)
        with pytest.raises(KafkaException) as e:          # group allowed, topic not
            c.commit(offsets=[TopicPartition("acl-none", 0, 1)], asynchronous=False)
        assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    finally:
        c.close()
    c = ck_consumer(b, **{"group.id": "g-bad"})
    try:
        c.subscribe(["acl-lit"])
        deadline = time.monotonic() + 20
        err = None
        while err is None and time.monotonic() < deadline:
            m = c.poll(0.5)
            if m is not None and m.error():
                err = m.error().code()
        assert err == KafkaError.GROUP_AUTHORIZATION_FAILED
    finally:
        c.close()
    # the allowed topic takes kafka-python's and kcat's records too
    p = KafkaProducer(bootstrap_servers=[b.bootstrap], max_block_ms=10000, acks="all")
    try:
        assert p.send("acl-lit", b"kp").get(timeout=10).offset == 3
    finally:
        p.close(timeout=5)
    k = kcat(b, ["-P", "-t", "acl-lit"], input_bytes=b"kc\n", timeout=20)
    assert k.returncode == 0, k.stderr
    # DeleteGroups needs DELETE on the group; DescribeGroups DESCRIBE (READ implies it)
    assert acl_call(b, "delete_consumer_groups", ["g-ok"]) == \
        [("g-ok", GroupAuthorizationFailedError)]
    assert [g.group for g in acl_call(b, "describe_consumer_groups", ["g-ok"])] == ["g-ok"]
    # Fetch of a topic without READ: TOPIC_AUTHORIZATION_FAILED for its
    # partitions alone
    with kr.Conn(b.port) as conn:
        conn.send(kr.API_FETCH, 11, kr.fetch_v11_body([("acl-alice", 0, 0), ("acl-lit", 0, 0)], 0))
        _, r = conn.recv_response(10)
        _, parts = kr.parse_fetch_v11(r)
        assert [(p[0], p[2]) for p in parts] == [("acl-alice", 29), ("acl-lit", 0)]


def test_acl_matrix_admin_apis(secured):
    b = secured
    make_topic(b, "adm-t")
    make_topic(b, "adm-t2")
    grant(b, "TOPIC", "adm-t", "DESCRIBE")
    ad = ck_admin(b)
    # CREATE: neither cluster nor topic → denied; on the topic → created
    fs = ad.create_topics([NewTopic("adm-new", 1, 1)], request_timeout=10)
    with pytest.raises(KafkaException) as e:
        fs["adm-new"].result(15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(b, "TOPIC", "adm-new", "CREATE")
    ad.create_topics([NewTopic("adm-new", 1, 1)], request_timeout=10)["adm-new"].result(15)
    # DescribeConfigs: DESCRIBE_CONFIGS (ALTER_CONFIGS implies it); AlterConfigs: ALTER_CONFIGS
    res = ConfigResource("topic", "adm-t")
    with pytest.raises(KafkaException) as e:
        ad.describe_configs([res])[res].result(15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(b, "TOPIC", "adm-t", "ALTER_CONFIGS")
    assert "retention.ms" in ad.describe_configs([res])[res].result(15)
    res2 = ConfigResource("topic", "adm-t", set_config={"retention.ms": "60000"})
    ad.alter_configs([res2])[res2].result(15)
    # CreatePartitions: ALTER
    with pytest.raises(KafkaException) as e:
        ad.create_partitions([NewPartitions("adm-t", 2)])["adm-t"].result(15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    # DeleteTopics: DELETE
    with pytest.raises(KafkaException) as e:
        ad.delete_topics(["adm-t"], request_timeout=10)["adm-t"].result(15)
    assert e.value.args[0].code() == KafkaError.TOPIC_AUTHORIZATION_FAILED
    grant(b, "TOPIC", "adm-t", "DELETE")
    ad.delete_topics(["adm-t"], request_timeout=10)["adm-t"].result(15)
    # Replica fetch and replica OffsetForLeaderEpoch need CLUSTER_ACTION
    with kr.Conn(b.port) as c:
        c.send(kr.API_FETCH, 11, kr.fetch_v11_body([("adm-new", 0, 0)], 0, replica_id=7))
        _, r = c.recv_response(10)
        _, parts = kr.parse_fetch_v11(r)
        assert [p[2] for p in parts] == [29]              # TOPIC_AUTHORIZATION_FAILED
    oe = kr.offset_for_leader_epoch(b.port, 3, [("adm-new", [(0, -1, 0)])], replica_id=7)
    assert oe[("adm-new", 0)][0] == 31                    # CLUSTER_AUTHORIZATION_FAILED
    oe = kr.offset_for_leader_epoch(b.port, 3, [("adm-t2", [(0, -1, 0)])], replica_id=-1)
    assert oe[("adm-t2", 0)][0] == 29                     # a consumer: DESCRIBE on the topic


def test_acl_apis_sql_and_restart(secured):
    b = secured
    ok = acl_call(b, "create_acls", [
        allow(ACLOperation.WRITE, ResourceType.TOPIC, "keep"),
        allow(ACLOperation.READ, ResourceType.GROUP, "grp-", perm=ACLPermissionType.DENY,
              pattern=ACLResourcePatternType.PREFIXED),
        allow(ACLOperation.READ, ResourceType.TOPIC, "x", principal="bad-principal"),
    ])
    assert len(ok["succeeded"]) == 2
    assert [e for _, e in ok["failed"]] == [InvalidRequestError]
    acls, _ = acl_call(b, "describe_acls",
                       any_filter(ResourceType.TOPIC, "keep", ACLResourcePatternType.MATCH))
    assert [(x.principal, x.operation, x.permission_type) for x in acls] == \
        [(ME, ACLOperation.WRITE, ACLPermissionType.ALLOW)]
    rows = sql(b, "SELECT resource_type, resource_name, pattern_type, principal, host, "
                  "operation, permission FROM acls WHERE resource_type <> 'CLUSTER' ORDER BY id")
    assert rows == [
        {"resource_type": "TOPIC", "resource_name": "keep", "pattern_type": "LITERAL",
         "principal": ME, "host": "*", "operation": "WRITE", "permission": "ALLOW"},
        {"resource_type": "GROUP", "resource_name": "grp-", "pattern_type": "PREFIXED",
         "principal": ME, "host": "*", "operation": "READ", "permission": "DENY"}]
    assert "invalid" in sql_error(b, "INSERT INTO acls (resource_type, resource_name, principal, "
                                     "operation, permission) VALUES "
                                     "('TOPIC', 'x', 'User:a', 'FLY', 'ALLOW')").lower()
    assert "DELETE of the old row" in sql_error(b, "UPDATE acls SET host = '1.2.3.4'")
    make_topic(b, "keep")
    assert delivery_errors(b, "keep") == [None]
    # DELETE through SQL takes effect at once (the cache is invalidated)
    sql(b, "DELETE FROM acls WHERE resource_name = 'keep'")
    assert delivery_errors(b, "keep") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    sql(b, "INSERT INTO acls (resource_type, resource_name, principal, operation, permission) "
           "VALUES ('TOPIC', 'keep', '%s', 'WRITE', 'ALLOW')" % ME)
    b.restart()
    assert delivery_errors(b, "keep") == [None]                     # survived the restart
    res = acl_call(b, "delete_acls", [any_filter(ResourceType.GROUP)])
    assert [x.resource_pattern.resource_name for x, _ in res[0][1]] == ["grp-"]
    assert sql(b, "SELECT count(*) AS n FROM acls WHERE resource_type = 'GROUP'") == [{"n": 0}]


def test_super_users_everyone_and_off(start_broker):
    # super.users (semicolon-separated): everything, with no ACL at all
    b = start_broker(dict(AUTHORIZER, **{"super.users": "User:admin; User:ANONYMOUS"}))
    assert delivery_errors(b, "su-t") == [None]                     # auto-created too
    assert acl_call(b, "create_acls", [allow(ACLOperation.READ, ResourceType.TOPIC, "su-t",
                                             principal="User:alice")])["failed"] == []
    assert delivery_errors(b, "su-t") == [None]
    # allow.everyone.if.no.acl.found: open where no ACL names the resource
    b2 = admin_broker(start_broker, **AUTHORIZER, **{"allow.everyone.if.no.acl.found": "true"})
    assert delivery_errors(b2, "open-t") == [None]
    grant(b2, "TOPIC", "open-t", "READ", principal="User:alice")
    assert delivery_errors(b2, "open-t") == [KafkaError.TOPIC_AUTHORIZATION_FAILED]
    acls, _ = acl_call(b2, "describe_acls", any_filter())   # no cluster ACL: open to all
    assert [x.principal for x in acls] == ["User:alice"]
    # no authorizer: the ACL APIs answer SECURITY_DISABLED, as Kafka's
    b3 = start_broker()
    with pytest.raises(SecurityDisabledError):
        acl_call(b3, "describe_acls", any_filter())

def test_cluster_acl_made_on_broker_1_is_enforced_on_broker_3(make_cluster):
    """Every broker is User:ANONYMOUS on PLAINTEXT, replica fetchers too, so
    the cluster-wide ALL (CLUSTER_ACTION among it) keeps replication going;
    the topic's own ACL is the one under test."""
    c = make_cluster(3, overrides=dict(AUTHORIZER))
    b1, b3 = c.broker(1), c.broker(3)
    b1.sql("INSERT INTO acls (resource_type, resource_name, principal, operation, permission) "
           "VALUES ('CLUSTER', 'kafka-cluster', '%s', 'ALL', 'ALLOW')" % ME)
    b1.sql("INSERT INTO topics (name, partitions, replication_factor) VALUES ('guarded', 1, 3)")

    def listed_on_3():
        md = kr.Conn(b3.port)
        with md as conn:
            r = conn.request(kr.API_METADATA, 1, kr.metadata_body(1, ["guarded"], False))
            return kr.parse_metadata(r, 1)["topics"]["guarded"][0]      # its error
    wait_equal(listed_on_3, 29, 20, "broker 3 to deny DESCRIBE on guarded")
    assert acl_call(b1, "create_acls",
                    [allow(ACLOperation.WRITE, ResourceType.TOPIC, "guarded")])["failed"] == []
    wait_equal(listed_on_3, 0, 20, "broker 3 to apply the ACL made on broker 1")
    assert b3.sql("SELECT resource_name, operation FROM acls WHERE resource_type = 'TOPIC'") == \
        [{"resource_name": "guarded", "operation": "WRITE"}]
    assert produce_ok(ck_producer(b3), "guarded", [{"value": b"x"}], timeout=30)[0].offset() == 0
    b3.sql("DELETE FROM acls WHERE resource_name = 'guarded'")        # from broker 3 too
    wait_equal(lambda: b1.sql("SELECT count(*) AS n FROM acls WHERE resource_type = 'TOPIC'"),
               [{"n": 0}], 20, "broker 1 to drop the ACL deleted on broker 3")


def test_offset_fetch_without_describe_is_kafkas_group_or_topic_error(secured):
    """OffsetFetch as KafkaApis.handleOffsetFetchRequest answers it: without
    DESCRIBE on the group, GROUP_AUTHORIZATION_FAILED (30) for each
    partition asked (v0-1), as the top-level error with no topics (v2-7),
    as the group's error (v8+); with the group allowed but not the topic,
    TOPIC_AUTHORIZATION_FAILED (29) for that topic's partitions alone."""
    from test_group_api_versions import OFFSET_FETCH, call, fetch_body_v0, fetch_body_v9, parse_fetch_v9
    b = secured
    make_topic(b, "of-t")
    make_topic(b, "of-ok")
    grant(b, "TOPIC", "of-ok", "DESCRIBE")
    grant(b, "GROUP", "g-desc", "DESCRIBE")
    asked = [("of-t", [0]), ("of-ok", [0])]

    def v1(c, group):
        body = kr.string(group) + kr.array([kr.string(t) + kr.array([kr.i32(p) for p in ps])
                                            for t, ps in asked])
        r = call(c, OFFSET_FETCH, 1, body)
        got = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.string(),
                                                                y.i16()))))
        assert r.remaining() == 0
        return got

    def v5(c, group):
        body = kr.string(group) + kr.array([kr.string(t) + kr.array([kr.i32(p) for p in ps])
                                            for t, ps in asked])
        r = call(c, OFFSET_FETCH, 5, body)
        assert r.i32() == 0
        topics = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.i32(),
                                                                   y.string(), y.i16()))))
        err = r.i16()
        assert r.remaining() == 0
        return topics, err

    with kr.Conn(b.port) as c:
        assert v1(c, "g-none") == [("of-t", [(0, -1, "", 30)]), ("of-ok", [(0, -1, "", 30)])]
        assert v5(c, "g-none") == ([], 30)
        assert parse_fetch_v9(call(c, OFFSET_FETCH, 9, fetch_body_v9([("g-none", asked)]))) == \
            [("g-none", [], 30)]
        # The group allowed: the topic without DESCRIBE is refused alone.
        assert v1(c, "g-desc") == [("of-t", [(0, -1, "", 29)]), ("of-ok", [(0, -1, "", 0)])]
        assert v5(c, "g-desc") == ([("of-t", [(0, -1, -1, "", 29)]),
                                    ("of-ok", [(0, -1, -1, "", 0)])], 0)
        assert parse_fetch_v9(call(c, OFFSET_FETCH, 9, fetch_body_v9([
            ("g-desc", asked), ("g-none", None)]))) == \
            [("g-desc", [("of-t", [(0, -1, -1, "", 29)]), ("of-ok", [(0, -1, -1, "", 0)])], 0),
             ("g-none", [], 30)]
    # What a client sees: kafka-python's committed() for a group it may
    # not describe (its FindCoordinator is refused first, as by Kafka).
    from kafka import TopicPartition as KTP
    from support import kp_consumer
    cons = kp_consumer(b, group_id="g-none")
    try:
        with pytest.raises(GroupAuthorizationFailedError):
            cons.committed(KTP("of-ok", 0))
    finally:
        cons.close()


def test_kafkas_codes_for_transactional_ids_loggers_configs_and_topic_ids(secured):
    """The rest of the matrix where Kafka's KafkaApis answered otherwise:
    FindCoordinator for a transactional id without DESCRIBE on it
    (TRANSACTIONAL_ID_AUTHORIZATION_FAILED, before any coordinator
    question); DescribeConfigs and AlterConfigs of a broker's loggers
    without the cluster's right (CLUSTER_AUTHORIZATION_FAILED, before the
    type is found unsupported); CreateTopics v5+ answering configs and
    counts only to whom may DESCRIBE_CONFIGS the topic (else
    TopicConfigErrorCode 29); Metadata v12 and DeleteTopics v6 naming by
    id a topic one may not describe (29, its name left null, not
    UNKNOWN_TOPIC_ID)."""
    from test_admin_api_versions import (ALTER_CONFIGS, CREATE_TOPICS, DELETE_TOPICS,
                                         DESCRIBE_CONFIGS, create_body, delete_v6)
    from test_admin_api_versions import call as admin_call
    from test_data_path_versions import metadata_v12
    from test_group_api_versions import call as group_call
    b = secured
    make_topic(b, "hid-t")
    hid = bytes.fromhex(sql(b, "SELECT hex(topic_id) AS id FROM main.topics "
                               "WHERE name = 'hid-t'")[0]["id"])
    grant(b, "TOPIC", "cfg-", "CREATE", pattern="PREFIXED")
    grant(b, "TOPIC", "cfg-seen", "DESCRIBE_CONFIGS")
    with kr.Conn(b.port) as c:
        r = group_call(c, 10, 1, kr.string("tx-1") + kr.i8(1))       # FindCoordinator v1
        assert r.i32() == 0
        assert r.i16() == 53                                         # TRANSACTIONAL_ID_AUTHORIZATION_FAILED
        for api, body in ((DESCRIBE_CONFIGS, kr.array([kr.i8(8) + kr.string(str(b.broker_id))
                                                       + kr.array(None)]) + kr.i8(0)),
                          (ALTER_CONFIGS, kr.array([kr.i8(8) + kr.string(str(b.broker_id))
                                                    + kr.array([])]) + kr.i8(0))):
            r = admin_call(c, api, 1, body)
            assert r.i32() == 0
            res = r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string()))
            assert res == [(31, "Authorization failed.", 8, str(b.broker_id))], (api, res)

        r = admin_call(c, CREATE_TOPICS, 7, create_body(7, [("cfg-hidden", 2, 1, {}),
                                                            ("cfg-seen", 2, 1, {})]))
        assert r.i32() == 0

        def topic(x):
            name, tid, err, _msg, parts, rf = (x.vstring(True), x.uuid(), x.i16(),
                                               x.vstring(True), x.i32(), x.i16())
            configs = x.vstructs(lambda y: (y.vstring(True), y.vstring(True), y.i8(), y.i8(),
                                            y.i8()), True)
            tags = x.vtags(True)
            cfg_err = int.from_bytes(tags[0], "big", signed=True) if 0 in tags else 0
            return name, tid != bytes(16), err, parts, rf, len(configs) > 0, cfg_err
        assert r.varray(topic, True) == [("cfg-hidden", True, 0, -1, -1, False, 29),
                                         ("cfg-seen", True, 0, 2, 1, True, 0)]

        got = metadata_v12(c, [(hid, None)])["topics"]
        assert [(t["error"], t["name"], t["id"]) for t in got] == [(29, None, hid)]
        assert delete_v6(c, [(None, hid)]) == [(None, hid, 29, None)]
    assert "hid-t" in {r["name"] for r in sql(b, "SELECT name FROM topics")}
    # What a client sees: librdkafka's transactional producer fails at once
    # with Kafka's fatal code instead of retrying to its timeout.
    p = ck_producer(b, **{"transactional.id": "tx-1"})
    with pytest.raises(KafkaException) as e:
        p.init_transactions(10)
    assert e.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
