"""Authorized operations (issue 18 leftovers): Metadata v8+
IncludeTopicAuthorizedOperations / IncludeClusterAuthorizedOperations (the
cluster's v8-10) and DescribeGroups v3+ IncludeAuthorizedOperations answer
Kafka's bit field: bit 1 << AclOperation code for each operation the
resource type supports that the principal may do, implied ones included
(READ implies DESCRIBE, ALTER_CONFIGS implies DESCRIBE_CONFIGS);
INT32_MIN when not asked for; every supported operation without an
authorizer.  Checked with raw frames over a SCRAM login."""
import shutil
import tempfile

import pytest
from confluent_kafka.admin import AdminClient

import kafka_raw as kr
from conftest import finish_broker
from sasl_support import add_user, scram_login, sql, start_sasl_broker

AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin", "auto.create.topics.enable": "false"}
NOT_ASKED = -2147483648
READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, CLUSTER_ACTION = 3, 4, 5, 6, 7, 8, 9
DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE = 10, 11, 12


def bits(*ops):
    return sum(1 << o for o in ops)


ALL_TOPIC = bits(READ, WRITE, CREATE, DELETE, ALTER, DESCRIBE, DESCRIBE_CONFIGS, ALTER_CONFIGS)
ALL_CLUSTER = bits(CREATE, CLUSTER_ACTION, DESCRIBE_CONFIGS, ALTER_CONFIGS, IDEMPOTENT_WRITE,
                   ALTER, DESCRIBE)
ALL_GROUP = bits(READ, DESCRIBE, DELETE)


def metadata_v8(conn, topics, cluster_ops, topic_ops):
    """({topic: (ErrorCode, TopicAuthorizedOperations)}, ClusterAuthorizedOperations)."""
    body = (kr.array([kr.string(t) for t in topics]) + kr.i8(0) + kr.i8(int(cluster_ops)) +
            kr.i8(int(topic_ops)))
    r = conn.request(kr.API_METADATA, 8, body)
    r.i32()                                                  # ThrottleTimeMs
    r.array(lambda x: (x.i32(), x.string(), x.i32(), x.string()))
    r.string(), r.i32()                                      # ClusterId, ControllerId

    def partition(x):
        x.i16(), x.i32(), x.i32(), x.i32()
        x.array(lambda y: y.i32()), x.array(lambda y: y.i32()), x.array(lambda y: y.i32())

    def topic(x):
        err, name, _internal = x.i16(), x.string(), x.i8()
        x.array(partition)
        return name, (err, x.i32())
    topics_out = dict(r.array(topic))
    return topics_out, r.i32()


def describe_group_v3(conn, group, include):
    """(ErrorCode, GroupState, AuthorizedOperations) of one group."""
    r = conn.request(15, 3, kr.array([kr.string(group)]) + kr.i8(int(include)))
    r.i32()

    def g(x):
        err, _gid, state, _ptype, _pdata = x.i16(), x.string(), x.string(), x.string(), x.string()
        x.array(lambda m: (m.string(), m.string(), m.string(), m.nbytes(), m.nbytes()))
        return err, state, x.i32()
    (res,) = r.array(g)
    return res


def login(b, user):
    conn = kr.Conn(b.port, timeout=10)
    assert scram_login(conn, user, user + "-pw")[0] == 0
    return conn


@pytest.fixture(scope="module")
def broker():
    d = tempfile.mkdtemp(prefix="sluice-it-authz-ops-")
    b = start_sasl_broker(d, AUTHZ)
    for user in ("alice", "admin"):
        add_user(b, user, user + "-pw")
    for stmt in ("INSERT INTO topics (name, partitions) VALUES ('ops-t', 1)",
                 "INSERT INTO topics (name, partitions) VALUES ('ops-hidden', 1)"):
        st, body = sql(b, stmt)
        assert st == 200, body
    for rtype, name, op in (("TOPIC", "ops-t", "READ"), ("TOPIC", "ops-t", "ALTER_CONFIGS"),
                            ("CLUSTER", "kafka-cluster", "ALTER"),
                            ("CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE"),
                            ("GROUP", "ops-g", "READ")):
        st, body = sql(b, "INSERT INTO acls (resource_type, resource_name, principal, "
                          "operation, permission) VALUES ('%s', '%s', 'User:alice', '%s', "
                          "'ALLOW')" % (rtype, name, op))
        assert st == 200, body
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def test_metadata_authorized_operations_of_an_acl_principal(broker):
    with login(broker, "alice") as c:
        topics, cluster = metadata_v8(c, ["ops-t", "ops-hidden", "ops-none"], True, True)
        assert topics == {
            "ops-t": (0, bits(READ, DESCRIBE, ALTER_CONFIGS, DESCRIBE_CONFIGS)),
            "ops-hidden": (29, NOT_ASKED),                   # TOPIC_AUTHORIZATION_FAILED
            "ops-none": (29, NOT_ASKED),
        }
        assert cluster == bits(ALTER, DESCRIBE, IDEMPOTENT_WRITE)
        topics, cluster = metadata_v8(c, ["ops-t"], False, False)
        assert (topics, cluster) == ({"ops-t": (0, NOT_ASKED)}, NOT_ASKED)
        topics, cluster = metadata_v8(c, ["ops-t"], True, False)
        assert topics["ops-t"][1] == NOT_ASKED and cluster != NOT_ASKED


def test_metadata_authorized_operations_of_a_super_user(broker):
    with login(broker, "admin") as c:
        topics, cluster = metadata_v8(c, ["ops-t", "ops-none"], True, True)
        # a topic it may describe but that does not exist still gets its bits (Kafka's)
        assert topics == {"ops-t": (0, ALL_TOPIC), "ops-none": (3, ALL_TOPIC)}
        assert cluster == ALL_CLUSTER


def test_describe_groups_authorized_operations(broker):
    with login(broker, "alice") as c:
        assert describe_group_v3(c, "ops-g", True) == (0, "Dead", bits(READ, DESCRIBE))
        assert describe_group_v3(c, "ops-g", False) == (0, "Dead", NOT_ASKED)
        assert describe_group_v3(c, "other-g", True) == (30, "", NOT_ASKED)
    with login(broker, "admin") as c:
        assert describe_group_v3(c, "ops-g", True) == (0, "Dead", ALL_GROUP)


def test_without_authorizer_every_supported_operation(start_broker):
    b = start_broker()
    with kr.Conn(b.port, timeout=10) as c:
        c.request(19, 0, kr.array([kr.string("open-t") + kr.i32(1) + kr.i16(1) +
                                   kr.array([]) + kr.array([])]) + kr.i32(10000))
        topics, cluster = metadata_v8(c, ["open-t"], True, True)
        assert topics == {"open-t": (0, ALL_TOPIC)} and cluster == ALL_CLUSTER
        assert describe_group_v3(c, "open-g", True) == (0, "Dead", ALL_GROUP)


def test_confluent_describe_topics_include_authorized_operations(broker):
    if not hasattr(AdminClient, "describe_topics"):
        pytest.skip("confluent-kafka here has no describe_topics "
                    "(include_authorized_operations needs 2.3+)")
    from confluent_kafka import TopicCollection
    from sasl_support import ck_sasl
    from support import ck_conf
    a = AdminClient(ck_conf(broker, **ck_sasl("SCRAM-SHA-256", "alice", "alice-pw")))
    d = a.describe_topics(TopicCollection(["ops-t"]),
                          include_authorized_operations=True)["ops-t"].result(timeout=20)
    assert sorted(op.name for op in d.authorized_operations) == \
        ["ALTER_CONFIGS", "DESCRIBE", "DESCRIBE_CONFIGS", "READ"]
    cl = a.describe_cluster(include_authorized_operations=True).result(timeout=20)
    assert sorted(op.name for op in cl.authorized_operations) == \
        ["ALTER", "DESCRIBE", "IDEMPOTENT_WRITE"]
