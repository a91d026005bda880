"""KIP-890 verification on a 3-broker cluster: the partition's leader is
not the transaction coordinator, so it asks the coordinator
(AddPartitionsToTxn v4 VerifyOnly, a peer call) before the first
transactional batch of a partition is appended: a partition never added is
refused with INVALID_TXN_STATE and nothing is stored, one added is written,
only the first batch of a partition asks, and the coordinator unreachable
is NOT_ENOUGH_REPLICAS, which clients retry."""
import json
import re

import pytest
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import admin_socket, ck_admin, consume, socket_http, topic_name
from test_cluster_txn_coordinator import agreed, started
from test_txn_coordinator import (INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, NONE, add_partitions,
                                  init_pid, until_settled)
from test_txn_partition import batch
from test_txn_verify import produce_parts, produce_txn

NOT_ENOUGH_REPLICAS = 19

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

def leaders(b, topic):
    with kr.Conn(b.port, timeout=3) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False), timeout=3)
    parts = kr.parse_metadata(r, 5)["topics"].get(topic, (None, []))[1]
    return {pid: leader for _err, pid, leader, _reps, _isr, _off in parts}


def log_end(b, topic, partition):
    status, body, _ = socket_http(admin_socket(b), "/sql?format=json",
                                  "SELECT log_end_offset FROM partitions WHERE topic = '%s' "
                                  "AND partition = %d" % (topic, partition))
    assert status == 200, body
    return json.loads(body)[0]["log_end_offset"]


def test_the_leader_asks_the_coordinator_on_another_broker(make_cluster):
    c = started(make_cluster)
    tid = next(t for t in ("tx-verify-%d" % i for i in range(100))
               if agreed(c.brokers, t) == 1)          # coordinated by broker 1
    t = topic_name("txvc")
    fs = ck_admin(c.brokers[0]).create_topics(
        [NewTopic(t, 3, replica_assignment=[[2, 3, 1], [2, 1, 3], [2, 3, 1]])],
        operation_timeout=15)
    fs[t].result(timeout=20)
    b1, b2 = c.broker(1), c.broker(2)
    wait_for(lambda: leaders(b2, t) == {0: 2, 1: 2, 2: 2}, 30, "broker 2 to lead the partitions")
    with kr.Conn(b1.port, timeout=30) as coord, kr.Conn(b2.port, timeout=30) as leader:
        err, pid, epoch = until_settled(lambda: init_pid(coord, tid))
        assert err == NONE
        assert add_partitions(coord, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        assert produce_txn(leader, tid, t, batch([b"stray"], pid, epoch, 0), 1) == \
            (INVALID_TXN_STATE, -1)
        assert log_end(b2, t, 1) == 0
        assert produce_txn(leader, tid, t, batch([b"in-0", b"in-1"], pid, epoch, 0), 0) == \
            (NONE, 0)
        assert produce_txn(leader, tid, t, batch([b"in-2"], pid, epoch, 2), 0) == (NONE, 2)
        # another producer's id and epoch are refused by the coordinator's answer
        assert produce_txn(leader, tid, t, batch([b"old"], pid, epoch + 1, 0), 1) == \
            (INVALID_PRODUCER_EPOCH, -1)
        assert log_end(b2, t, 1) == 0
    # acks=0 asks the coordinator too: a partition never added is refused
    # (the client hears it by its connection's close, as Kafka tells acks=0
    # producers), one just added is written after the coordinator's answer
    with kr.Conn(b2.port, timeout=30) as leader:
        produce_parts(leader, tid, [(t, 2, batch([b"stray"], pid, epoch, 0))], acks=0)
        with pytest.raises(kr.Closed):
            leader.recv_frame()
    assert log_end(b2, t, 2) == 0
    with kr.Conn(b1.port, timeout=30) as coord, kr.Conn(b2.port, timeout=30) as leader:
        assert add_partitions(coord, tid, pid, epoch, [(t, [2])]) == [(t, [(2, NONE)])]
        produce_parts(leader, tid, [(t, 2, batch([b"quiet"], pid, epoch, 0))], acks=0)
        # the connection goes on after it: the next request is answered
        assert produce_txn(leader, tid, t, batch([b"in-3"], pid, epoch, 3), 0) == (NONE, 3)
    assert log_end(b2, t, 2) == 1
    got = consume(b2, t, [2], 1, timeout=30, **{"isolation.level": "read_uncommitted"})
    assert [m.value() for m in got] == [b"quiet"]
    got = consume(b2, t, [0], 4, timeout=30, **{"isolation.level": "read_uncommitted"})
    assert [m.value() for m in got] == [b"in-0", b"in-1", b"in-2", b"in-3"]
    status, text, _ = socket_http(admin_socket(b2), "/metrics")
    sent = re.search(r"^sluice_peer_requests_total (\d+)$", text, re.M)
    assert status == 200 and int(sent.group(1)) >= 1    # the verification went to broker 1

    # the coordinator killed: until another broker leads its partition of
    # __transaction_state, the leader cannot ask and answers a retriable code
    b1.kill()
    with kr.Conn(b2.port, timeout=30) as leader:
        assert produce_txn(leader, tid, t, batch([b"stray"], pid, epoch, 0), 1) == \
            (NOT_ENOUGH_REPLICAS, -1)
        # ... and once a new coordinator loaded the id, its answer
        wait_for(lambda: produce_txn(leader, tid, t, batch([b"stray"], pid, epoch, 0), 1) ==
                 (INVALID_TXN_STATE, -1), 60, "the new coordinator's answer")
        assert log_end(b2, t, 1) == 0
