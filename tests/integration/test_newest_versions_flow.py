"""A client that speaks only the newest protocol versions (issue 17, item
7): a whole user's flow in raw frames (kafka_raw's writers), on one broker
and on a 3-broker cluster —

  ApiVersions v4 → Metadata v12 → CreateTopics v7 → Produce v11 →
  Fetch v17 by topic id → FindCoordinator v6 → JoinGroup v9 → SyncGroup v5
  → Heartbeat v4 → OffsetCommit v9 → OffsetFetch v9 → LeaveGroup v5

— every answer read to its last byte, every message fetched back byte for
byte as produced (the broker writes only BaseOffset and the leader epoch,
outside the CRC), the committed offsets read back.  No packaged client
here speaks these versions (librdkafka 2.0.2 stops at Produce v7, Fetch
v11, Metadata v4), so this is the client."""
import time

import pytest

import kafka_raw as kr
from cluster_support import make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import topic_name
from test_admin_api_versions import CREATE_TOPICS, create_body, parse_create_v7
from test_admin_api_versions import call as admin_call
from test_data_path_versions import metadata_v12
from test_group_api_versions import (FIND_COORDINATOR, GROUP_OVERRIDES, HEARTBEAT, LEAVE,
                                     OFFSET_COMMIT, OFFSET_FETCH, call, commit_body, done,
                                     fetch_body_v9, join_and_sync, parse_commit, parse_fetch_v9)

NONE, COORDINATOR_NOT_AVAILABLE = 0, 15
NEWEST = {kr.API_API_VERSIONS: 4, kr.API_METADATA: 12, CREATE_TOPICS: 7, kr.API_PRODUCE: 11,
          kr.API_FETCH: 17, FIND_COORDINATOR: 6, 11: 9, 14: 5, HEARTBEAT: 4,
          OFFSET_COMMIT: 9, OFFSET_FETCH: 9, LEAVE: 5}
PARTITIONS, BATCHES, PER_BATCH = 2, 3, 4


def api_versions_v4(c):
    r = c.request(kr.API_API_VERSIONS, 4, kr.api_versions_v3_body("newest-only", "1"))
    assert r.i16() == NONE
    apis = r.carray(lambda x: (x.i16(), x.i16(), x.i16(), x.tags()))
    assert r.i32() == 0 and r.tags() == {} and r.remaining() == 0
    return {k: (lo, hi) for k, lo, hi, _t in apis}


def leaders(b, t, tid, n):
    """{partition: leader} once Metadata v12 on b shows t (with id tid)
    led everywhere, else None."""
    with kr.Conn(b.port) as c:
        (mt,) = metadata_v12(c, [(None, t)])["topics"]
    if mt["error"] != NONE or len(mt["partitions"]) != n:
        return None
    assert (mt["name"], mt["id"]) == (t, tid)
    got = {p[1]: p[2] for p in mt["partitions"] if p[0] == NONE and p[2] >= 0}
    return got if len(got) == n else None


def find_coordinator_v6(b, group):
    body = kr.i8(0) + kr.varray([kr.vstring(group, True)], True) + kr.vtags(True)
    with kr.Conn(b.port) as c:
        r = call(c, FIND_COORDINATOR, 6, body)
    assert r.i32() == 0
    (key, node, host, port, err, msg), = r.vstructs(
        lambda x: (x.vstring(True), x.i32(), x.vstring(True), x.i32(), x.i16(),
                   x.vstring(True)), True)
    done(r, True)
    assert key == group
    if err == COORDINATOR_NOT_AVAILABLE:          # cluster: __consumer_offsets loading
        return None
    assert (err, msg) == (NONE, None)
    return node, host, port


def newest_flow(brokers):
    by_id = {b.broker_id: b for b in brokers}
    first = brokers[0]
    t = topic_name("newest")
    group = "group-" + t
    with kr.Conn(first.port) as c:
        apis = api_versions_v4(c)
        for key, v in NEWEST.items():
            assert apis[key][1] == v, (key, apis[key])
        md = metadata_v12(c, None)
        assert sorted(x[0] for x in md["brokers"]) == sorted(by_id)
        assert all((x[1], x[2]) == ("127.0.0.1", by_id[x[0]].port) for x in md["brokers"])
        assert md["cluster_id"] and md["controller"] in by_id
        (made,) = parse_create_v7(admin_call(c, CREATE_TOPICS, 7, create_body(
            7, [(t, PARTITIONS, len(brokers), {})])))
        assert (made["name"], made["error"], made["message"], made["partitions"], made["rf"]) == \
            (t, NONE, None, PARTITIONS, len(brokers))
        tid = made["id"]
        assert tid != bytes(16)
    # a client would retry NOT_LEADER_OR_FOLLOWER; this one waits until
    # every broker (each leader too) shows the same leaders
    def agreed():
        views = [leaders(b, t, tid, PARTITIONS) for b in brokers]
        return views[0] if views[0] and all(v == views[0] for v in views) else None
    lead = wait_for(agreed, 30, "%s led, as every broker sees it" % t)

    # Produce v11: BATCHES batches of PER_BATCH records to each partition's leader
    sent = {p: [] for p in range(PARTITIONS)}
    now = int(time.time() * 1000)
    for p in range(PARTITIONS):
        with kr.Conn(by_id[lead[p]].port) as c:
            for i in range(BATCHES):
                recs = [(b"k%d" % j, b"p%d-b%d-r%d" % (p, i, j) * (j + 1), [("h", b"%d" % j)], j)
                        for j in range(PER_BATCH)]
                batch = kr.record_batch(recs, now + i)
                got = kr.parse_produce_v11(c.request_flex(
                    kr.API_PRODUCE, 11, kr.produce_v11_body(t, p, batch), timeout=15))
                assert got == [(t, p, NONE, i * PER_BATCH)]
                sent[p].append(batch)

    # Fetch v17 by topic id: every batch back, byte for byte
    for p in range(PARTITIONS):
        with kr.Conn(by_id[lead[p]].port) as c:
            got = kr.parse_fetch_v17(c.request_flex(
                kr.API_FETCH, 17, kr.fetch_v17_body([(tid, p, 0)], 1000)))
        ((ftid, ((fp, err, hw, records),)),) = got
        assert (ftid, fp, err, hw) == (tid, p, NONE, BATCHES * PER_BATCH)
        pos = 0
        for i, batch in enumerate(sent[p]):
            back = records[pos:pos + len(batch)]
            assert int.from_bytes(back[:8], "big") == i * PER_BATCH       # BaseOffset
            assert back[8:12] == batch[8:12] and back[16:] == batch[16:]
            pos += len(batch)
        assert pos == len(records), "nothing but the batches produced"

    # the group: coordinator, membership, commits, leave
    # as for the leaders: a broker whose view still lags would answer
    # NOT_COORDINATOR (a client finds the coordinator again); wait until
    # every broker names the same one, the coordinator itself included
    def coordinator_agreed():
        views = [find_coordinator_v6(b, group) for b in brokers]
        return views[0] if views[0] and all(v == views[0] for v in views) else None
    coord = wait_for(coordinator_agreed, 30, "a coordinator for the group every broker names")
    node, host, port = coord
    assert (host, port) == ("127.0.0.1", by_id[node].port)
    with kr.Conn(by_id[node].port) as c:
        member, gen = join_and_sync(c, group, topics=[t])
        hb = kr.vstring(group, True) + kr.i32(gen) + kr.vstring(member, True) + \
            kr.vstring(None, True) + kr.vtags(True)
        r = call(c, HEARTBEAT, 4, hb)
        assert (r.i32(), r.i16()) == (0, NONE)
        done(r, True)
        ends = [(p, BATCHES * PER_BATCH - p) for p in range(PARTITIONS)]
        r = call(c, OFFSET_COMMIT, 9, commit_body(9, group, t, ends, gen, member))
        assert parse_commit(r, 9) == [(t, [(p, NONE) for p, _o in ends])]
        r = call(c, OFFSET_FETCH, 9, fetch_body_v9([(group, [(t, list(range(PARTITIONS)))])]))
        assert parse_fetch_v9(r) == [
            (group, [(t, [(p, off, 7, "m%d" % p, NONE) for p, off in ends])], NONE)]
        leave = kr.vstring(group, True) + kr.varray(
            [(member, None)], True, lambda m: kr.vstring(m[0], True) + kr.vstring(m[1], True)
            + kr.vstring("done", True) + kr.vtags(True)) + kr.vtags(True)
        r = call(c, LEAVE, 5, leave)
        assert (r.i32(), r.i16()) == (0, NONE)
        assert r.vstructs(lambda x: (x.vstring(True), x.vstring(True), x.i16()), True) == \
            [(member, None, NONE)]
        done(r, True)
        # the commits outlive the member
        r = call(c, OFFSET_FETCH, 9, fetch_body_v9([(group, None)]))
        assert parse_fetch_v9(r) == [
            (group, [(t, [(p, off, 7, "m%d" % p, NONE) for p, off in ends])], NONE)]


def test_newest_versions_flow_on_one_broker(start_broker):
    newest_flow([start_broker(GROUP_OVERRIDES)])


def test_newest_versions_flow_on_a_cluster(make_cluster):
    if zk_missing():
        pytest.skip("ZooKeeper cannot run: " + zk_missing())
    newest_flow(make_cluster(3, overrides=GROUP_OVERRIDES).brokers)
