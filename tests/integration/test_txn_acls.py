"""Transactions under the ACL authorizer (issue 30, item 4), on a SASL broker:
every transaction API checks what Kafka's KafkaApis checks, with Kafka's
codes.  WRITE on the TRANSACTIONAL_ID for InitProducerId, AddPartitionsToTxn,
AddOffsetsToTxn, EndTxn, TxnOffsetCommit and a Produce that names the id;
DESCRIBE on it for FindCoordinator (key type 1) and DescribeTransactions;
ListTransactions lists only the ids the caller may DESCRIBE; an idempotent
InitProducerId needs IDEMPOTENT_WRITE on the cluster or WRITE on a topic.

The principals are real SCRAM logins (raw frames after SaslHandshake +
SaslAuthenticate, so the exact codes show); confluent-kafka's transactional
producer runs the whole path for the user who may and fails for the one
who may not."""
import shutil
import tempfile
import uuid

import pytest
from confluent_kafka import KafkaError, KafkaException, TopicPartition

import kafka_raw as kr
from conftest import finish_broker
from sasl_support import add_user, ck_sasl, scram_login, sql, start_sasl_broker
from support import ck_consumer, ck_producer
from test_txn_coordinator import (FIND_COORDINATOR, NONE, add_offsets, add_partitions,
                                  describe_txns, end_txn, init_pid, list_txns, until_settled)
from test_txn_offsets import txn_commit
from test_txn_partition import batch
from test_txn_verify import produce_txn

TOPIC_AUTHORIZATION_FAILED, CLUSTER_AUTHORIZATION_FAILED = 29, 31
TXN_AUTHZ_FAILED = 53
OPERATION_NOT_ATTEMPTED = 55
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin", "auto.create.topics.enable": "false",
         "transaction.state.log.replication.factor": "1",
         "transaction.state.log.num.partitions": "4"}
TOPIC = "txn-acl-topic"
GROUP = "txn-acl-group"


def grant(b, rtype, name, op, principal, pattern="LITERAL"):
    st, body = sql(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
                      "operation, permission) VALUES ('%s', '%s', '%s', '%s', '%s', 'ALLOW')"
                   % (rtype, name, pattern, principal, op))
    assert st == 200, body


@pytest.fixture(scope="module")
def broker():
    d = tempfile.mkdtemp(prefix="sluice-it-txn-acls-")
    b = start_sasl_broker(d, AUTHZ)
    for user in ("alice", "eve", "admin", "watcher", "idem"):
        add_user(b, user, user + "-pw")
    st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('%s', 2)" % TOPIC)
    assert st == 200, body
    # alice: the transactional ids "alice-*", the topic, the group.
    grant(b, "TRANSACTIONAL_ID", "alice-", "WRITE", "User:alice", pattern="PREFIXED")
    grant(b, "TOPIC", TOPIC, "WRITE", "User:alice")
    grant(b, "TOPIC", TOPIC, "READ", "User:alice")
    grant(b, "GROUP", GROUP, "READ", "User:alice")
    # eve: the topic and the group, but no transactional id at all.
    grant(b, "TOPIC", TOPIC, "WRITE", "User:eve")
    grant(b, "TOPIC", TOPIC, "READ", "User:eve")
    grant(b, "GROUP", GROUP, "READ", "User:eve")
    # watcher: may DESCRIBE alice's ids, nothing else.
    grant(b, "TRANSACTIONAL_ID", "alice-", "DESCRIBE", "User:watcher", pattern="PREFIXED")
    # idem: IDEMPOTENT_WRITE on the cluster, no topic.
    grant(b, "CLUSTER", "kafka-cluster", "IDEMPOTENT_WRITE", "User:idem")
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def login(b, user):
    c = kr.Conn(b.port)
    assert scram_login(c, user, user + "-pw")[0] == 0
    return c


def tid(prefix):
    return prefix + "-" + uuid.uuid4().hex[:8]


def find_coordinator_error(c, key):
    r = c.request(FIND_COORDINATOR, 1, kr.string(key) + kr.i8(1))
    r.i32()
    return r.i16()


def end_offset(b, partition):
    st, rows = sql(b, "SELECT log_end_offset FROM partitions WHERE topic = '%s' AND "
                      "partition = %d" % (TOPIC, partition))
    assert st == 200, rows
    return rows[0]["log_end_offset"]


def open_transaction(c, txn_id):
    """alice's transaction on TOPIC partition 0, open: (pid, epoch)."""
    err, pid, epoch = until_settled(lambda: init_pid(c, txn_id))
    assert err == NONE, err
    assert add_partitions(c, txn_id, pid, epoch, [(TOPIC, [0])]) == [(TOPIC, [(0, NONE)])]
    return pid, epoch


def test_without_write_on_the_transactional_id_every_transaction_api_is_refused(broker):
    b = broker
    mine = tid("alice")
    with login(b, "alice") as a, login(b, "eve") as e:
        pid, epoch = open_transaction(a, mine)
        # eve may write the topic and read the group, not use alice's id.
        assert find_coordinator_error(e, mine) == TXN_AUTHZ_FAILED
        assert init_pid(e, mine) == (TXN_AUTHZ_FAILED, -1, -1)
        assert init_pid(e, tid("eve")) == (TXN_AUTHZ_FAILED, -1, -1)
        assert add_partitions(e, mine, pid, epoch, [(TOPIC, [0, 1])]) == \
            [(TOPIC, [(0, TXN_AUTHZ_FAILED), (1, TXN_AUTHZ_FAILED)])]
        assert add_offsets(e, mine, pid, epoch, GROUP) == (TXN_AUTHZ_FAILED,)
        assert txn_commit(e, 2, mine, GROUP, pid, epoch, [(TOPIC, 0, 5, "")]) == \
            [(TOPIC, 0, TXN_AUTHZ_FAILED)]
        assert end_txn(e, mine, pid, epoch, True) == (TXN_AUTHZ_FAILED,)
        before = end_offset(b, 0)
        assert produce_txn(e, mine, TOPIC, batch([b"eve-1", b"eve-2"], pid, epoch, 0)) == \
            (TXN_AUTHZ_FAILED, -1)
        assert end_offset(b, 0) == before          # nothing stored
        [d] = describe_txns(e, [mine])
        assert (d["error"], d["id"]) == (TXN_AUTHZ_FAILED, mine)
        assert mine not in [t[0] for t in list_txns(e)[2]]
        # alice's own transaction was not touched by any of it: it commits.
        assert produce_txn(a, mine, TOPIC, batch([b"alice-1"], pid, epoch, 0)) == (NONE, before)
        assert until_settled(lambda: add_offsets(a, mine, pid, epoch, GROUP)) == (NONE,)
        assert until_settled(lambda: end_txn(a, mine, pid, epoch, True)) == (NONE,)


def test_describe_is_enough_to_find_describe_and_list_but_not_to_write(broker):
    b = broker
    mine = tid("alice")
    with login(b, "alice") as a, login(b, "watcher") as w:
        pid, epoch = open_transaction(a, mine)
        assert until_settled(lambda: (find_coordinator_error(w, mine),)) == (NONE,)
        [d] = describe_txns(w, [mine])
        assert (d["error"], d["id"], d["state"], d["pid"], d["epoch"], d["topics"]) == \
            (NONE, mine, "Ongoing", pid, epoch, [(TOPIC, [0])])
        assert (mine, pid, "Ongoing") in list_txns(w)[2]
        assert all(t[0].startswith("alice-") for t in list_txns(w)[2])
        # DESCRIBE does not imply WRITE.
        assert init_pid(w, mine) == (TXN_AUTHZ_FAILED, -1, -1)
        assert end_txn(w, mine, pid, epoch, False) == (TXN_AUTHZ_FAILED,)
        assert until_settled(lambda: end_txn(a, mine, pid, epoch, False)) == (NONE,)


def test_add_partitions_needs_write_on_each_topic(broker):
    b = broker
    mine = tid("alice")
    st, body = sql(b, "INSERT INTO topics (name, partitions) VALUES ('txn-acl-closed', 1)")
    assert st == 200, body
    with login(b, "alice") as a:
        err, pid, epoch = until_settled(lambda: init_pid(a, mine))
        assert err == NONE
        got = add_partitions(a, mine, pid, epoch, [(TOPIC, [0]), ("txn-acl-closed", [0])])
        assert sorted(got) == [("txn-acl-closed", [(0, TOPIC_AUTHORIZATION_FAILED)]),
                               (TOPIC, [(0, OPERATION_NOT_ATTEMPTED)])]


def test_an_idempotent_producer_id_needs_idempotent_write_or_a_topic_write(broker):
    b = broker
    with login(b, "watcher") as w, login(b, "idem") as i, login(b, "eve") as e:
        assert init_pid(w, None)[0] == CLUSTER_AUTHORIZATION_FAILED
        assert init_pid(i, None)[0] == NONE
        assert init_pid(e, None)[0] == NONE      # WRITE on a topic (KIP-679)


def test_confluent_kafka_transactions_work_for_the_id_owner_only(broker):
    b = broker
    mine = tid("alice")
    p = ck_producer(b, **ck_sasl("SCRAM-SHA-256", "alice", "alice-pw"),
                    **{"transactional.id": mine})
    p.init_transactions(30)
    p.begin_transaction()
    values = [b"ck-%03d" % i for i in range(20)]
    for v in values:
        p.produce(TOPIC, v, partition=1)
    p.commit_transaction(30)
    c = ck_consumer(b, **ck_sasl("SCRAM-SHA-256", "alice", "alice-pw"),
                    **{"group.id": GROUP, "isolation.level": "read_committed",
                       "auto.offset.reset": "earliest"})
    c.assign([TopicPartition(TOPIC, 1, 0)])
    got = []
    while len(got) < len(values):
        m = c.poll(10)
        assert m is not None, got
        assert m.error() is None, m.error()
        got.append(m.value())
    c.close()
    assert got == values

    q = ck_producer(b, **ck_sasl("SCRAM-SHA-256", "eve", "eve-pw"),
                    **{"transactional.id": tid("eve")})
    with pytest.raises(KafkaException) as ex:
        q.init_transactions(30)
    assert ex.value.args[0].code() == KafkaError.TRANSACTIONAL_ID_AUTHORIZATION_FAILED
