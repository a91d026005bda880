"""Producer ids unique across a cluster (issue 30): in cluster mode each
broker reserves blocks of 1000 ids in ZooKeeper's /latest_producer_id_block
as Kafka's ZkProducerIdManager does (daemon/cluster/cluster_producer_ids.c),
so InitProducerId never hands out the same id twice, on two brokers or
after a restart, and the znode is the one Kafka's tools read."""
import json
import signal
import time

import kafka_raw as kr
from cluster_support import cl_zk_get, make_cluster, registered_ids, wait_for, zk  # noqa: F401
from retention_support import metric
from support import ck_producer, create_topic, produce_ok, topic_name
from test_idempotence import init_producer_id

NONE = 0
COORDINATOR_LOAD_IN_PROGRESS = 14        # retriable: a block is being reserved
BLOCK = 1000


def init_pid(b, conn, tries=100):
    """(producer id, epoch) from broker b, asking again while its block is
    being reserved, as clients do; the errors met on the way."""
    retried = 0
    for _ in range(tries):
        err, pid, epoch = init_producer_id(conn)
        if err != COORDINATOR_LOAD_IN_PROGRESS:
            assert err == NONE, "broker %d: InitProducerId error %d" % (b.broker_id, err)
            return pid, epoch, retried
        retried += 1
        time.sleep(0.1)
    raise AssertionError("broker %d: no producer id after %d tries" % (b.broker_id, tries))


def ids_from(c, n):
    """n producer ids asked from the brokers in turn: {broker id: [ids]}."""
    got = {b.broker_id: [] for b in c.brokers}
    conns = {b.broker_id: kr.Conn(b.port) for b in c.brokers}
    try:
        for i in range(n):
            b = c.brokers[i % len(c.brokers)]
            pid, epoch, _ = init_pid(b, conns[b.broker_id])
            assert epoch == 0
            got[b.broker_id].append(pid)
    finally:
        for conn in conns.values():
            conn.close()
    return got


def znode(c):
    data, _version = cl_zk_get(c.zk_connect, "/latest_producer_id_block")
    return data


def test_ids_are_unique_across_brokers_and_restarts(make_cluster):
    c = make_cluster(3)
    first = ids_from(c, 300)
    every = [p for ids in first.values() for p in ids]
    assert len(every) == 300 and len(set(every)) == 300
    # each broker gives from its own block of 1000 (0.., 1000.., 2000..)
    blocks = {bid: {p // BLOCK for p in ids} for bid, ids in first.items()}
    assert all(len(bs) == 1 for bs in blocks.values()), blocks
    assert sorted(b for bs in blocks.values() for b in bs) == [0, 1, 2]
    raw = znode(c)
    doc = json.loads(raw)
    assert list(doc) == ["version", "broker", "block_start", "block_end"], raw
    assert doc["version"] == 1 and doc["broker"] in (1, 2, 3)
    assert doc["block_start"] == "2000" and doc["block_end"] == "2999", raw
    assert raw == json.dumps(doc, separators=(",", ":")).encode()

    for b in c.brokers:                   # the whole cluster down, then up
        b.stop(signal.SIGKILL)
    for b in c.brokers:
        b.start()
    ids = {b.broker_id for b in c.brokers}
    for b in c.brokers:
        wait_for(lambda b=b: registered_ids(b) == ids, 30, "broker %d to list the others" %
                 b.broker_id)
    again = [p for ids in ids_from(c, 30).values() for p in ids]
    assert len(set(again)) == 30
    assert not set(again) & set(every)
    assert min(again) >= 3 * BLOCK       # the blocks of the first lives are skipped
    assert json.loads(znode(c))["block_end"] == "5999"


def test_next_block_is_reserved_before_the_current_one_runs_out(make_cluster):
    c = make_cluster(1)
    b = c.brokers[0]
    with kr.Conn(b.port) as conn:
        got = [init_pid(b, conn) for _ in range(899)]
        assert json.loads(znode(c))["block_end"] == "999"     # 89.9 %: nothing yet
        got.append(init_pid(b, conn))                         # the 900th: 90 %
        wait_for(lambda: json.loads(znode(c))["block_end"] == "1999", 10,
                 "the next block in /latest_producer_id_block")
        got += [init_pid(b, conn) for _ in range(150)]
    assert [pid for pid, _, _ in got] == list(range(BLOCK + 50))
    # crossing into the block reserved ahead made no client wait (only the
    # very first id may have, while the first block was reserved)
    waited = [i for i, (_, _, r) in enumerate(got) if r and i > 0]
    assert waited == [], waited
    assert "reserved 1000..1999" in b.log_text()


def test_idempotent_client_produces_on_a_cluster(make_cluster):
    c = make_cluster(3)
    t = topic_name()
    create_topic(c.brokers[0], t, partitions=3)
    p = ck_producer(c.brokers[0], **{"enable.idempotence": True})
    msgs = [b"m-%03d" % i for i in range(100)]
    got = produce_ok(p, t, [{"value": m} for m in msgs])
    assert sorted(m.value() for m in got) == msgs
    # no transaction here: no broker called another (repl_peer.c's counters)
    for b in c.brokers:
        assert metric(b, "sluice_peer_requests_total") == 0
        assert metric(b, "sluice_peer_requests_failed_total") == 0
