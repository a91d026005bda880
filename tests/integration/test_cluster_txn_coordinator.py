"""The transaction coordinator on a 3-broker cluster (issue 30, daemon/txn/):
every broker names the same coordinator for a transactional id (the
leader of its partition of __transaction_state, replication factor 3,
min.isr 2), the others answer NOT_COORDINATOR, and a change is answered
only once replicated, so the coordinator's SIGKILL loses nothing: the
next leader loads the id with its producer id, epoch and open
transaction, and fences it as Kafka does.  A commit
of data partitions whose markers go to other brokers (WriteTxnMarkers
through peer calls) completes across a coordinator failover."""
import time

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import live_brokers, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_consumer, ck_producer
from test_txn_coordinator import (ADD_PARTITIONS, CONCURRENT_TRANSACTIONS, END_TXN, NONE,
                                  NOT_COORDINATOR, add_offsets, add_partitions, describe_txns,
                                  end_txn, find_coordinator, init_pid, until_settled)

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

OVERRIDES = {"transaction.state.log.num.partitions": "3"}


def agreed(brokers, tid):
    """The coordinator every live broker names for tid, or None."""
    answers = set()
    for b in brokers:
        try:
            with kr.Conn(b.port, timeout=3) as c:
                answers.add(find_coordinator(c, tid)[:2])
        except (OSError, kr.Closed, kr.Timeout):
            return None
    if len(answers) != 1:
        return None
    err, node = answers.pop()
    return node if err == NONE else None


def state_in_sync(b):
    with kr.Conn(b.port, timeout=3) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, ["__transaction_state"], False),
                      timeout=3)
    parts = kr.parse_metadata(r, 5)["topics"].get("__transaction_state", (None, []))[1]
    return len(parts) == 3 and all(len(isr) == 3 for _e, _p, _l, _r, isr, _o in parts)


def started(make_cluster):
    cluster = make_cluster(3, start=False, overrides=OVERRIDES)
    cluster.start()
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in cluster.brokers), 20,
             "every broker to list three brokers")
    wait_for(lambda: agreed(cluster.brokers, "any"), 30, "__transaction_state to be led")
    wait_for(lambda: state_in_sync(cluster.brokers[0]), 30,
             "every partition of __transaction_state to have three replicas in sync")
    return cluster


def open_transaction(cluster, tid):
    """An id with epoch 1 and an open transaction; (coordinator, pid)."""
    coord = cluster.broker(wait_for(lambda: agreed(cluster.brokers, tid), 30, "a coordinator"))
    for b in cluster.brokers:
        if b is not coord:
            with kr.Conn(b.port) as c:
                assert init_pid(c, tid) == (NOT_COORDINATOR, -1, -1)
    with kr.Conn(coord.port) as c:
        err, pid, epoch = until_settled(lambda: init_pid(c, tid))
        assert (err, epoch) == (NONE, 0)
        assert until_settled(lambda: init_pid(c, tid)) == (NONE, pid, 1)
        assert add_offsets(c, tid, pid, 1, "grp") == (NONE,)
    return coord, pid


def failover(cluster, coord, tid):
    coord.kill()
    rest = [b for b in cluster.brokers if b is not coord]
    new = wait_for(lambda: (lambda n: n if n not in (None, coord.broker_id) else None)(
        agreed(rest, tid)), 30, "a new coordinator")
    return cluster.broker(new)


def describe_settled(b, tid):
    with kr.Conn(b.port) as c:
        deadline = time.monotonic() + 15
        while True:
            d = describe_txns(c, [tid])[0]
            if d["error"] not in (14, 15, 16) or time.monotonic() > deadline:
                return d


def test_the_next_coordinator_loads_an_open_transaction_and_fences_it(make_cluster):
    """The open transaction holds only a __consumer_offsets partition of a
    topic no group created yet: no pending offset can be anywhere, so its
    abort needs no marker and completes here already."""
    cluster = started(make_cluster)
    tid = "tx-cluster"
    coord, pid = open_transaction(cluster, tid)
    new = failover(cluster, coord, tid)
    d = describe_settled(new, tid)
    assert (d["error"], d["state"], d["pid"], d["epoch"]) == (NONE, "Ongoing", pid, 1)
    assert [t for t, _ in d["topics"]] == ["__consumer_offsets"]
    with kr.Conn(new.port) as c:
        assert init_pid(c, tid) == (CONCURRENT_TRANSACTIONS, -1, -1)
        # PrepareAbort (epoch 2) waits for the ISR to drop the dead broker
        assert until_settled(lambda: init_pid(c, tid), timeout=60) == (NONE, pid, 3)
    d = describe_settled(new, tid)
    assert (d["state"], d["pid"], d["epoch"], d["topics"]) == ("Empty", pid, 3, [])
    assert "fencing producer id %d epoch 1 of transactional id %s" % (pid, tid) in \
        new.log_text()


def test_a_commit_of_data_partitions_completes_after_failover(make_cluster):
    cluster = started(make_cluster)
    fs = ck_admin(cluster.brokers[0]).create_topics([NewTopic("data", 3, 3)])
    fs["data"].result(timeout=15)
    wait_for(lambda: agreed(cluster.brokers, "data-check") is not None, 10, "the cluster")
    tid = "tx-cluster-2"
    coord = cluster.broker(wait_for(lambda: agreed(cluster.brokers, tid), 30, "a coordinator"))
    with kr.Conn(coord.port) as c:
        err, pid, epoch = until_settled(lambda: init_pid(c, tid))
        assert err == NONE
        assert add_partitions(c, tid, pid, epoch, [("data", [0, 1, 2])]) == \
            [("data", [(0, NONE), (1, NONE), (2, NONE)])]
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
    new = failover(cluster, coord, tid)
    with kr.Conn(new.port) as c:
        assert until_settled(lambda: init_pid(c, tid), timeout=60) == (NONE, pid, epoch + 1)


def test_markers_reach_the_partitions_other_brokers_lead(make_cluster):
    """A commit's markers go to every partition, those led by the two
    brokers that are not the coordinator through WriteTxnMarkers: the
    producer's next transaction goes through (AddPartitionsToTxn answers
    CONCURRENT_TRANSACTIONS until the last marker is written) and a
    read_committed consumer reads both transactions, in order, from each
    partition (the LSO stays at the first unmarked record otherwise)."""
    cluster = started(make_cluster)
    b0 = cluster.brokers[0]
    ck_admin(b0).create_topics([NewTopic("spread", 3, 3)])["spread"].result(timeout=15)

    def leaders():
        parts = ck_admin(b0).list_topics("spread", timeout=5).topics["spread"].partitions
        ids = [parts[p].leader for p in sorted(parts)]
        return ids if len(ids) == 3 and min(ids) > 0 else None
    assert len(set(wait_for(leaders, 20, "spread to be led"))) == 3
    p = ck_producer(b0, **{"transactional.id": "tx-spread"})
    p.init_transactions(30)
    for t in range(2):
        p.begin_transaction()
        for part in range(3):
            p.produce("spread", b"t%d-p%d" % (t, part), partition=part)
        p.commit_transaction(30)
    c = ck_consumer(b0, **{"isolation.level": "read_committed"})
    c.assign([TopicPartition("spread", part, 0) for part in range(3)])
    got = {0: [], 1: [], 2: []}
    deadline = time.monotonic() + 30
    while sum(map(len, got.values())) < 6 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got[m.partition()].append(m.value())
    c.close()
    assert got == {part: [b"t0-p%d" % part, b"t1-p%d" % part] for part in range(3)}


def test_the_next_transaction_waits_for_markers_sent_to_other_brokers(make_cluster):
    """AddPartitionsToTxn pipelined right behind EndTxn on the coordinator's
    connection is read while the commit markers are on their way to the
    partitions' leaders (WriteTxnMarkers) and before CompleteCommit is
    replicated: it waits for them and succeeds in that one request, where
    it would have been answered CONCURRENT_TRANSACTIONS (txn_park.c); of
    five rounds at least three so (the park lasts 1 s: markers slower than
    that, on a loaded machine, get 51 and a retry, as a client would)."""
    cluster = started(make_cluster)
    b0 = cluster.brokers[0]
    ck_admin(b0).create_topics([NewTopic("piped", 3, 3)])["piped"].result(timeout=15)
    tid = "tx-piped"
    coord = wait_for(lambda: agreed(cluster.brokers, tid), 30, "a coordinator for tx-piped")
    b = cluster.broker(coord)
    parts = [("piped", [0, 1, 2])]
    want = [("piped", [(0, NONE), (1, NONE), (2, NONE)])]
    with kr.Conn(b.port, timeout=15) as c:
        err, pid, epoch = until_settled(lambda: init_pid(c, tid), timeout=30)
        assert err == NONE
        got = wait_for(lambda: (lambda r: r if r == want else None)(
            add_partitions(c, tid, pid, epoch, parts)), 20, "piped to be added")
        assert got == want
        at_once = 0
        for rnd in range(5):
            e_corr = c.send(END_TXN, 1, kr.string(tid) + kr.i64(pid) + kr.i16(epoch) +
                            kr.i8(1))
            a_corr = c.send(ADD_PARTITIONS, 1, kr.string(tid) + kr.i64(pid) +
                            kr.i16(epoch) + kr.array([kr.string("piped") + kr.array(
                                [kr.i32(p) for p in range(3)])]))
            got, r = c.recv_response(15)
            assert got == e_corr
            r.i32()
            assert r.i16() == NONE, "EndTxn, round %d" % rnd
            got, r = c.recv_response(15)
            assert got == a_corr
            r.i32()
            res = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16()))))
            if res == want:
                at_once += 1
                continue
            # markers slower than the park's 1 s (the first round opens the
            # coordinator's connections to the other brokers; a loaded
            # machine): CONCURRENT_TRANSACTIONS, which a client retries
            assert res == [("piped", [(0, 51), (1, 51), (2, 51)])], \
                "AddPartitionsToTxn, round %d: %r" % (rnd, res)
            got = wait_for(lambda: (lambda r: r if r == want else None)(
                add_partitions(c, tid, pid, epoch, parts)), 20, "round %d retried" % rnd)
            assert got == want
        # without the park every round is answered 51: the markers take
        # longer than reading the next request
        assert at_once >= 3, "%d of 5 rounds answered NONE at once" % at_once
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
