"""ACLs in cluster mode (issue 18 leftovers): ZooKeeper is the one path.

CreateAcls / DeleteAcls (and SQL on the acls view) are answered only once
the versioned write of Kafka's /kafka-acl/<Type>/<name> (with its
/kafka-acl-changes notice) is confirmed and read back; a write ZooKeeper
does not take leaves no ACL anywhere and answers an error; two brokers
writing the same resource at once both keep their ACLs."""
import json
import time
import threading

import pytest

import kafka_raw as kr
from cluster_support import make_cluster, wait_equal, zk, cl_zk_get, zk_missing  # noqa: F401

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}
TOPIC, GROUP, LITERAL, READ, WRITE, ALLOW = 2, 3, 3, 3, 4, 3
CLUSTER_ACL = ("INSERT INTO acls (resource_type, resource_name, principal, operation, "
               "permission) VALUES ('CLUSTER', 'kafka-cluster', 'User:ANONYMOUS', 'ALL', "
               "'ALLOW')")


def create_acls(b, creations, timeout=20.0):
    """CreateAcls v1 [(type, name, principal, op)] (LITERAL, host *, ALLOW):
    [(ErrorCode, ErrorMessage)]."""
    body = kr.array(creations, lambda c: kr.i8(c[0]) + kr.string(c[1]) + kr.i8(LITERAL) +
                    kr.string(c[2]) + kr.string("*") + kr.i8(c[3]) + kr.i8(ALLOW))
    with kr.Conn(b.port, timeout=timeout) as conn:
        r = conn.request(30, 1, body, timeout=timeout)
        r.i32()                                             # ThrottleTimeMs
        return r.array(lambda r: (r.i16(), r.string()))


def delete_acls(b, name, timeout=20.0):
    """DeleteAcls v1, one filter: every ACL of TOPIC name: (ErrorCode,
    [(ErrorCode, Principal)])."""
    body = kr.array([0], lambda _: kr.i8(TOPIC) + kr.string(name) + kr.i8(LITERAL) +
                    kr.string(None) + kr.string(None) + kr.i8(1) + kr.i8(1))
    with kr.Conn(b.port, timeout=timeout) as conn:
        r = conn.request(31, 1, body, timeout=timeout)
        r.i32()

        def acl(r):
            code, _msg = r.i16(), r.string()
            r.i8(), r.string(), r.i8()                      # type, name, pattern
            principal = r.string()
            r.string(), r.i8(), r.i8()                      # host, op, perm
            return code, principal
        (res,) = r.array(lambda r: (r.i16(), r.string(), r.array(acl)))
        return res[0], res[2]


def topic_principals(b, name):
    return sorted(row["principal"] for row in
                  b.sql("SELECT principal FROM acls WHERE resource_type = 'TOPIC' AND "
                        "resource_name = '%s'" % name))


def znode_principals(c, name):
    got = cl_zk_get(c.zk_connect, "/kafka-acl/Topic/" + name)
    return sorted(a["principal"] for a in json.loads(got[0])["acls"]) if got else []


@pytest.fixture
def acl_cluster(make_cluster):
    c = make_cluster(2, overrides=dict(AUTHORIZER))
    c.broker(1).sql(CLUSTER_ACL)
    wait_equal(lambda: len(c.broker(2).sql("SELECT * FROM acls")), 1, 20,
               "broker 2 to read the cluster ACL")
    return c


def test_create_acls_answers_once_read_back_from_zookeeper(acl_cluster):
    c = acl_cluster
    b1 = c.broker(1)
    assert create_acls(b1, [(TOPIC, "t1", "User:alice", READ),
                            (TOPIC, "t1", "User:alice", WRITE),
                            (TOPIC, "t2", "User:bob", READ)]) == [(0, None)] * 3
    # answered: this broker's table and ZooKeeper's znodes already have them
    assert topic_principals(b1, "t1") == ["User:alice", "User:alice"]
    assert znode_principals(c, "t1") == ["User:alice", "User:alice"]
    assert znode_principals(c, "t2") == ["User:bob"]
    data, _v = cl_zk_get(c.zk_connect, "/kafka-acl/Topic/t2")
    assert json.loads(data) == {"version": 1, "acls": [
        {"principal": "User:bob", "permissionType": "Allow", "operation": "Read",
         "host": "*"}]}
    code, matched = delete_acls(b1, "t1")
    assert (code, matched) == (0, [(0, "User:alice"), (0, "User:alice")])
    assert topic_principals(b1, "t1") == [] and cl_zk_get(c.zk_connect, "/kafka-acl/Topic/t1") is None
    # SQL takes the same path
    b1.sql("DELETE FROM acls WHERE resource_name = 't2'")
    assert topic_principals(b1, "t2") == [] and cl_zk_get(c.zk_connect, "/kafka-acl/Topic/t2") is None


def test_acl_write_zookeeper_refuses_leaves_no_acl(acl_cluster):
    c = acl_cluster
    b1, b2 = c.broker(1), c.broker(2)
    c.zk.stop()
    try:
        res = create_acls(b1, [(TOPIC, "lost", "User:carol", READ)])
        assert res[0][0] == 7, res                          # REQUEST_TIMED_OUT
        assert "ZooKeeper" in res[0][1]
        assert topic_principals(b1, "lost") == []
        err = b1.sql_error("INSERT INTO acls (resource_type, resource_name, principal, "
                           "operation, permission) VALUES ('TOPIC', 'lost', 'User:carol', "
                           "'READ', 'ALLOW')")
        assert "ZooKeeper" in err, err
        assert topic_principals(b1, "lost") == []
    finally:
        c.zk.ensure_running()
    # nothing of it shows up once ZooKeeper is back, on either broker
    wait_equal(lambda: create_acls(b1, [(TOPIC, "after", "User:dave", READ)]), [(0, None)],
               30, "broker 1 to write ACLs again")
    wait_equal(lambda: topic_principals(b2, "after"), ["User:dave"], 20, "broker 2 has it")
    assert topic_principals(b1, "lost") == topic_principals(b2, "lost") == []
    assert cl_zk_get(c.zk_connect, "/kafka-acl/Topic/lost") is None


def test_concurrent_create_acls_on_two_brokers_all_survive(acl_cluster):
    """Ten CreateAcls on each broker at once, all for the same topic: each
    broker's versioned writes race the other's (BADVERSION, read, again)."""
    c = acl_cluster
    results, threads = {}, []

    def one(b, who):
        results[who] = create_acls(b, [(TOPIC, "shared", who, READ)], timeout=60)

    for i in range(10):
        for b in c.brokers:
            who = "User:b%d-%d" % (b.broker_id, i)
            threads.append(threading.Thread(target=one, args=(b, who)))
    for t in threads:
        t.start()
    for t in threads:
        t.join(90)
    want = sorted("User:b%d-%d" % (n, i) for n in (1, 2) for i in range(10))
    assert sorted(results) == want
    assert all(r == [(0, None)] for r in results.values()), results
    assert znode_principals(c, "shared") == want
    for b in c.brokers:
        wait_equal(lambda b=b: topic_principals(b, "shared"), want, 20,
                   "broker %d to have all 20" % b.broker_id)


def test_expired_change_notices_are_purged_and_a_new_broker_has_everything(make_cluster):
    """change.notification.expiration.ms=1500: the notices of the first
    round (ACLs, a prefixed ACL, a user, a broker default) are deleted once
    a later change is processed; a broker started afterwards reads every
    entity znode and has it all."""
    from test_broker_dynamic_configs import describe_default, incremental_default
    from cluster_support import registered_ids, wait_for, cl_zk_children
    c = make_cluster(3, start=False, overrides=dict(AUTHORIZER, **{
        "change.notification.expiration.ms": "1500"}))
    b1, b2, b3 = c.brokers
    for b in (b1, b2):
        b.start()
    wait_for(lambda: registered_ids(b1) == {1, 2}, 30, "brokers 1 and 2 registered")
    b1.sql(CLUSTER_ACL)
    assert create_acls(b1, [(TOPIC, "kept", "User:erin", READ)]) == [(0, None)]
    b1.sql("INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
           "operation, permission) VALUES ('TOPIC', 'pre-', 'PREFIXED', 'User:erin', "
           "'WRITE', 'ALLOW')")
    b1.sql("INSERT INTO scram_credentials (name, mechanism, password) "
           "VALUES ('frank', 'SCRAM-SHA-256', 'frank-pw')")
    assert incremental_default(b1, "message.max.bytes", "2000") == [(0, None, 4, "")]
    folders = ("/kafka-acl-changes", "/kafka-acl-extended-changes", "/config/changes")
    old = {f: cl_zk_children(c.zk_connect, f) for f in folders}
    assert len(old["/kafka-acl-changes"]) == 2 and len(old["/kafka-acl-extended-changes"]) == 1
    assert len(old["/config/changes"]) == 2, old
    time.sleep(2.0)
    # a later change of each kind: processing it purges what expired
    assert create_acls(b2, [(TOPIC, "late", "User:gina", READ)]) == [(0, None)]
    b2.sql("INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
           "operation, permission) VALUES ('TOPIC', 'late-', 'PREFIXED', 'User:gina', "
           "'READ', 'ALLOW')")
    b2.sql("INSERT INTO scram_credentials (name, mechanism, password) "
           "VALUES ('gina', 'SCRAM-SHA-256', 'gina-pw')")
    for f in folders:
        wait_for(lambda f=f: not set(old[f]) & set(cl_zk_children(c.zk_connect, f)), 20,
                 "the expired notices of %s deleted" % f)
        assert len(cl_zk_children(c.zk_connect, f)) == 1, f       # the young one stays
    assert "expired change notice(s) deleted" in b1.log_text() + b2.log_text()
    b3.start()
    wait_for(lambda: registered_ids(b1) == {1, 2, 3}, 30, "broker 3 registered")
    want = [("CLUSTER", "kafka-cluster", "User:ANONYMOUS"), ("TOPIC", "kept", "User:erin"),
            ("TOPIC", "late", "User:gina"), ("TOPIC", "late-", "User:gina"),
            ("TOPIC", "pre-", "User:erin")]
    wait_equal(lambda: sorted((r["resource_type"], r["resource_name"], r["principal"])
                              for r in b3.sql("SELECT * FROM acls")), want, 20,
               "broker 3 to read every ACL")
    wait_equal(lambda: sorted(r["name"] for r in
                              b3.sql("SELECT name FROM scram_credentials")), ["frank", "gina"],
               20, "broker 3 to read every user")
    wait_equal(lambda: describe_default(b3).get("message.max.bytes", (None,))[0], "2000", 20,
               "broker 3 to read the broker default")


def test_acl_with_a_long_resource_name_is_stored_whole(acl_cluster):
    """A group name of 1500 bytes (Kafka allows any): its znode path is
    longer than any fixed buffer the write or the resync used, and both
    brokers must show the name whole (it was cut at 1023 bytes, and read
    past the path's buffer)."""
    c = acl_cluster
    b1, b2 = c.broker(1), c.broker(2)
    name = "g" * 1400 + "-end-of-a-long-group-name" + "h" * 75
    assert create_acls(b1, [(GROUP, name, "User:hana", READ)]) == [(0, None)]
    got = cl_zk_get(c.zk_connect, "/kafka-acl/Group/" + name)
    assert got and [a["principal"] for a in json.loads(got[0])["acls"]] == ["User:hana"]
    for b in (b1, b2):
        wait_equal(lambda b=b: [(r["resource_name"], r["principal"]) for r in
                                b.sql("SELECT resource_name, principal FROM acls WHERE "
                                      "resource_type = 'GROUP'")],
                   [(name, "User:hana")], 20, "broker %d to have the whole name" % b.broker_id)


def test_shutdown_with_acl_writes_waiting_frees_them(make_cluster):
    """ZooKeeper frozen mid-write: CreateAcls from 12 clients wait on it
    (one writing, the rest queued behind it, cluster_acls.c K5); SIGTERM then stops the
    broker cleanly (exit 0), each client gets an error or a close, and a
    SANITIZE=1 build reports no leak of the waiting writes."""
    c = make_cluster(1, overrides=dict(AUTHORIZER, **{"controlled.shutdown.enable": "false"}))
    b = c.broker(1)
    b.sql(CLUSTER_ACL)
    got = []

    def send(i):
        try:
            got.append(create_acls(b, [(TOPIC, "pending-%d" % i, "User:erin", READ)],
                                   timeout=30))
        except Exception as e:                              # the close is an answer too
            got.append(e)
    c.zk.sigstop()
    try:
        threads = [threading.Thread(target=send, args=(i,), daemon=True) for i in range(12)]
        for t in threads:
            t.start()
        time.sleep(1.5)
        assert all(t.is_alive() for t in threads) and not got, got   # waiting for ZooKeeper
        rc = b.stop(timeout=30)
        for t in threads:
            t.join(10)
        assert not any(t.is_alive() for t in threads)
    finally:
        c.zk.sigcont()
    text = b.log_text()
    assert rc == 0, "exit status %s\n%s" % (rc, b.log_tail())
    for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
        assert marker not in text, b.log_tail()
    assert len(got) == 12
    assert all(isinstance(g, Exception) or g[0][0] != 0 for g in got), got
