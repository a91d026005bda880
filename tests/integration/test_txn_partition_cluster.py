"""Transactions on the partition side in a 3-broker cluster (issue 30, Deliver
item 2): a marker is answered once the followers have it (acks=all), and the
followers keep the same producer state and aborted-transaction index from the
replicated batches, so after the leader is SIGKILLed the new leader serves
read_committed, the LSO and DescribeProducers exactly as the old one did."""
import signal

import pytest
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import leader_and_isr, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, consume, topic_name
from test_txn_partition import (NO_VERIFY, NONE, batch, describe_producers, list_latest, produce,
                                vals, write_marker)

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

PID = 777_000          # a producer the brokers have not seen: accepted at any sequence


def read(b, topic, count, isolation, settle=1.5):
    msgs = consume(b, topic, [0], count, timeout=30, settle=settle,
                   **{"isolation.level": isolation})
    return [m.value() for m in msgs]


def test_new_leader_after_sigkill_serves_the_same_committed_view(make_cluster):
    c = make_cluster(3, overrides=NO_VERIFY)
    t = topic_name("txnc")
    fs = ck_admin(c.brokers[0]).create_topics(
        [NewTopic(t, 1, replica_assignment=[[1, 2, 3]], config={"min.insync.replicas": "2"})],
        operation_timeout=15)
    fs[t].result(timeout=20)
    b1 = c.broker(1)
    wait_for(lambda: leader_and_isr(b1, t) == (1, (1, 2, 3)), 30, "broker 1 to lead with ISR 1,2,3")
    with kr.Conn(b1.port, timeout=30) as k:
        assert produce(k, t, batch(vals(b"ab", 2), PID, 0, 0)) == (NONE, 0)
        assert write_marker(k, t, PID, 0, False, coordinator_epoch=5) == [(t, 0, NONE)]  # 2
        assert produce(k, t, batch(vals(b"c", 2), PID, 0, 2)) == (NONE, 3)
        assert write_marker(k, t, PID, 0, True, coordinator_epoch=5) == [(t, 0, NONE)]   # 5
        assert produce(k, t, batch([b"open-0"], PID, 0, 4)) == (NONE, 6)
        assert list_latest(k, t, 1) == 6
        assert list_latest(k, t, 0) == 7
    b1.kill()
    b2 = c.broker(2)
    wait_for(lambda: (leader_and_isr(b2, t) or (0,))[0] in (2, 3), 30,
             "a new leader for %s" % t)
    new = c.broker(leader_and_isr(b2, t)[0])
    with kr.Conn(new.port, timeout=30) as k:
        wait_for(lambda: list_latest(k, t, 0) == 7, 15, "the new leader's HW at 7")
        assert list_latest(k, t, 1) == 6
        assert describe_producers(k, t) == [(PID, 0, 4, 5, 6)]
    assert read(new, t, 2, "read_committed") == vals(b"c", 2)
    assert read(new, t, 5, "read_uncommitted") == vals(b"ab", 2) + vals(b"c", 2) + [b"open-0"]
    with kr.Conn(new.port, timeout=30) as k:
        assert write_marker(k, t, PID, 0, True, coordinator_epoch=6) == [(t, 0, NONE)]
        assert list_latest(k, t, 1) == list_latest(k, t, 0) == 8
    assert read(new, t, 3, "read_committed") == vals(b"c", 2) + [b"open-0"]
