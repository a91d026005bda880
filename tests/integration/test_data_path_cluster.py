"""The data-path versions in cluster mode: a broker that does not lead a
partition answers Produce v11 and Fetch v17 NOT_LEADER_OR_FOLLOWER with
the partition's CurrentLeader and the leader's NodeEndpoints (KIP-951);
the leader serves a follower that names itself in Fetch v15+'s
ReplicaState tagged field (the top-level ReplicaId is gone there)."""
import struct
import time

import pytest
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import LEFT_GRACE_S, make_cluster, wait_equal, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

NOT_LEADER_OR_FOLLOWER = 6


def metadata_v12(b, t):
    """(topic id, leader, leader epoch as answered, isr) of partition 0."""
    with kr.Conn(b.port) as c:
        body = kr.carray([bytes(16) + kr.cstring(t) + kr.tags()]) + kr.i8(0) + kr.i8(0) + kr.tags()
        r = c.request_flex(kr.API_METADATA, 12, body)
        r.i32()
        r.carray(lambda x: (x.i32(), x.cstring(), x.i32(), x.cstring(), x.tags()))
        r.cstring(), r.i32()
        (tp,) = r.carray(lambda x: (x.i16(), x.cstring(), x.uuid(), x.i8(), x.carray(lambda y: (
            y.i16(), y.i32(), y.i32(), y.i32(), y.carray(lambda z: z.i32()),
            y.carray(lambda z: z.i32()), y.carray(lambda z: z.i32()), y.tags())), x.i32(), x.tags()))
    if tp[0] != 0:
        return None
    (p,) = tp[4]
    return tp[2], p[2], p[3], p[5]


def fetch_v17(b, tid, offset, replica_state=None, max_wait_ms=0):
    part = kr.i32(0) + kr.i32(-1) + kr.i64(offset) + kr.i32(-1) + kr.i64(-1) + kr.i32(1 << 20) + kr.tags()
    top_tags = []
    if replica_state is not None:
        top_tags.append((1, kr.i32(replica_state) + kr.i64(-1) + kr.tags()))   # ReplicaState
    body = (kr.i32(max_wait_ms) + kr.i32(1) + kr.i32(1 << 20) + kr.i8(0) + kr.i32(0) + kr.i32(-1) +
            kr.carray([tid + kr.carray([part]) + kr.tags()]) + kr.carray([]) + kr.cstring("") +
            kr.tags(top_tags))
    with kr.Conn(b.port) as c:
        r = c.request_flex(kr.API_FETCH, 17, body)
        r.i32()
        assert (r.i16(), r.i32()) == (0, 0)
        (ft,) = r.carray(lambda x: (x.uuid(), x.carray(lambda y: (
            y.i32(), y.i16(), y.i64(), y.i64(), y.i64(), y.carray(lambda z: (z.i64(), z.i64())),
            y.i32(), y.cbytes(), y.tags())), x.tags()))
        top = r.tags()
        assert r.remaining() == 0
    return ft, top


def endpoints(raw):
    """NodeEndpoints (tag 0 of the response) from its raw bytes."""
    r = kr.Reader(raw)
    out = r.carray(lambda x: (x.i32(), x.cstring(), x.i32(), x.cstring(), x.tags()))
    assert r.remaining() == 0
    return out


def leader_and_epoch(raw):
    r = kr.Reader(raw)
    out = (r.i32(), r.i32(), r.tags())
    assert r.remaining() == 0
    return out


def test_non_leader_answers_with_the_current_leader_and_its_endpoint(make_cluster):
    c = make_cluster(2)
    one, two = c.broker(1), c.broker(2)
    t = topic_name("hint")
    ck_admin(one).create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[1]])])[t].result(30)
    wait_for(lambda: (metadata_v12(two, t) or (0, -1))[1] == 1, 30, "broker 2 sees %s led by 1" % t)
    tid, _leader, _epoch, _isr = metadata_v12(two, t)
    batch = kr.record_batch([(b"k", b"v", [], 0)], int(time.time() * 1000))

    # Produce v11 to broker 2
    body = kr.cstring(None) + kr.i16(1) + kr.i32(5000) + kr.carray(
        [kr.cstring(t) + kr.carray([kr.i32(0) + kr.cbytes(batch) + kr.tags()]) + kr.tags()]) + kr.tags()
    with kr.Conn(two.port) as conn:
        r = conn.request_flex(kr.API_PRODUCE, 11, body)
        (tr,) = r.carray(lambda x: (x.cstring(), x.carray(lambda y: (
            y.i32(), y.i16(), y.i64(), y.i64(), y.i64(),
            y.carray(lambda z: None), y.cstring(), y.tags())), x.tags()))
        assert r.i32() == 0
        top = r.tags()
        assert r.remaining() == 0
    (p,) = tr[1]
    assert p[:5] == (0, NOT_LEADER_OR_FOLLOWER, -1, -1, -1)
    leader_id, leader_epoch, _ = leader_and_epoch(p[7][0])             # CurrentLeader, tag 0
    assert leader_id == 1 and leader_epoch >= 0
    assert endpoints(top[0]) == [(1, "127.0.0.1", one.port, None, {})]

    # Fetch v17 (by topic id) to broker 2
    ft, top = fetch_v17(two, tid, 0)
    (fp,) = ft[1]
    assert fp[:2] == (0, NOT_LEADER_OR_FOLLOWER) and fp[7] == b""
    assert leader_and_epoch(fp[8][1])[:2] == (1, leader_epoch)       # CurrentLeader, tag 1
    assert endpoints(top[0]) == [(1, "127.0.0.1", one.port, None, {})]

    # The leader itself: no hint, the batch stored by a Produce v11 there
    with kr.Conn(one.port) as conn:
        r = conn.request_flex(kr.API_PRODUCE, 11, body)
        (tr,) = r.carray(lambda x: (x.cstring(), x.carray(lambda y: (
            y.i32(), y.i16(), y.i64(), y.i64(), y.i64(),
            y.carray(lambda z: None), y.cstring(), y.tags())), x.tags()))
        assert tr[1][0][:3] == (0, 0, 0) and tr[1][0][7] == {}
    ft, top = fetch_v17(one, tid, 0)
    assert top == {} and ft[1][0][1] == 0 and len(ft[1][0][7]) == len(batch)


def test_leader_serves_a_follower_named_in_replica_state(make_cluster):
    """Brokers 2 and 3 hold replicas but are stopped once the topic exists;
    a raw Fetch v17 poses as follower 2 through ReplicaState: it reads to
    the log end (past the HW) and joins the ISR, as a v11 follower does."""
    c = make_cluster(3, overrides={"replica.lag.time.max.ms": "3000"})
    one = c.broker(1)
    t = topic_name("rs")
    ck_admin(one).create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[1, 2, 3]])])[t].result(30)
    wait_for(lambda: (metadata_v12(one, t) or (0, -1))[1] == 1, 30, "%s led by 1" % t)
    for i in (2, 3):
        c.broker(i).stop()
    wait_equal(lambda: (metadata_v12(one, t) or (0, 0, 0, None))[3], [1], 15, "ISR [1]")
    time.sleep(LEFT_GRACE_S)                  # 2 may join again once it is not leaving
    tid = metadata_v12(one, t)[0]
    with kr.Conn(one.port) as p:
        r = p.request(kr.API_PRODUCE, 3, kr.produce_v3_body(
            t, 0, kr.record_batch([(None, b"r%d" % i, [], 0) for i in range(3)],
                                  int(time.time() * 1000)), acks=1))
        assert kr.parse_produce_v3(r)[0][2:4] == (0, 0)
    # not a replica: Kafka's answer
    ft, _ = fetch_v17(one, tid, 0, replica_state=7)
    assert ft[1][0][1] == NOT_LEADER_OR_FOLLOWER
    # follower 2: everything up to the log end, then caught up -> ISR [1, 2]
    ft, _ = fetch_v17(one, tid, 0, replica_state=2)
    (fp,) = ft[1]
    assert fp[1:3] == (0, 3)
    assert struct.unpack(">i", fp[7][57:61])[0] == 3                 # RecordsCount
    ft, _ = fetch_v17(one, tid, 3, replica_state=2)
    assert ft[1][0][1:3] == (0, 3) and ft[1][0][7] == b""
    wait_equal(lambda: metadata_v12(one, t)[3], [1, 2], 10, "ISR grew to [1, 2]")
    # without ReplicaState a v17 fetch is a consumer's: bounded by the HW
    with kr.Conn(one.port) as p:
        r = p.request(kr.API_PRODUCE, 3, kr.produce_v3_body(
            t, 0, kr.record_batch([(None, b"late", [], 0)], int(time.time() * 1000)), acks=1))
        assert kr.parse_produce_v3(r)[0][2:4] == (0, 3)
    ft, _ = fetch_v17(one, tid, 3)
    assert ft[1][0][1:3] == (0, 3) and ft[1][0][7] == b""           # HW still 3
    ft, _ = fetch_v17(one, tid, 3, replica_state=2)
    assert ft[1][0][1:3] == (0, 3) and len(ft[1][0][7]) > 0          # the follower reads it
