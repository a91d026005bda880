"""Offsets in a transaction (issue 30, Deliver item 3): TxnOffsetCommit's
offsets stay pending in the group coordinator, invisible to OffsetFetch,
SQL's committed_offsets and the lag view, until the transaction's commit
reaches the group's partition; an abort drops them.

The raw-frame tests check what one broker decides alone (KIP-447's member
checks, Kafka's authorization codes, RequireStable's
UNSTABLE_OFFSET_COMMIT, pending rows surviving a SIGKILL).  The end of a
transaction comes from the transaction coordinator (or a WriteTxnMarkers
to the group's partition); the end-to-end checks use confluent-kafka's
send_offsets_to_transaction."""
import os
import re
import signal
import sqlite3
import time

import pytest
from confluent_kafka import Consumer, Producer, TopicPartition

import kafka_raw as kr
from support import ck_conf, create_topic, produce_ok, topic_name, wait_topic
from cluster_support import make_cluster, zk  # noqa: F401  (fixtures)
from test_acls import grant, make_topic, secured  # noqa: F401  (the fixture)
from test_group_api_versions import OFFSET_FETCH, call, parse_fetch_v9
from test_sql import admin_broker, sql
from test_groups import API_SYNC, join_answer, join_two_step, parse_sync_v3, sync_v3

TXN_OFFSET_COMMIT = 28
NONE, INVALID_GROUP_ID, ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID = 0, 24, 22, 25
TOPIC_AUTH, GROUP_AUTH, TXN_ID_AUTH = 29, 30, 53
FENCED_INSTANCE_ID, UNSTABLE_OFFSET_COMMIT = 82, 88
GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}
# The raw-frame tests of what the group coordinator decides alone commit for
# producers no transaction coordinator knows: Kafka's switch for KIP-890's
# verification lets them, as a broker before 3.6 would.
UNVERIFIED = dict(GROUP_OVERRIDES, **{"transaction.partition.verification.enable": "false"})
INVALID_PRODUCER_EPOCH, INVALID_TXN_STATE, INVALID_PRODUCER_ID_MAPPING = 47, 48, 49


def txn_commit_body(v, txn_id, group, pid, epoch, parts, gen=-1, member="", instance=None):
    """TxnOffsetCommit v0-4; parts: [(topic, partition, offset, metadata)]."""
    flex = v >= 3
    topics = {}
    for tp, p, o, md in parts:
        topics.setdefault(tp, []).append(kr.i32(p) + kr.i64(o) + (kr.i32(-1) if v >= 2 else b"") +
                                         kr.vstring(md, flex) + kr.vtags(flex))
    body = kr.vstring(txn_id, flex) + kr.vstring(group, flex) + kr.i64(pid) + kr.i16(epoch)
    if v >= 3:
        body += kr.i32(gen) + kr.vstring(member, flex) + kr.vstring(instance, flex)
    body += kr.varray([kr.vstring(tp, flex) + kr.varray(ps, flex) + kr.vtags(flex)
                       for tp, ps in topics.items()], flex)
    return body + kr.vtags(flex)


def peer_requests(b):
    """The broker's count of calls to other brokers (/metrics)."""
    from support import admin_socket, socket_http
    status, text, _ = socket_http(admin_socket(b), "/metrics")
    assert status == 200
    return int(re.search(r"^sluice_peer_requests_total (\d+)$", text, re.M).group(1))


def txn_commit(c, v, *a, **kw):
    """Every partition's error, in the response's order: [(topic, partition, error)]."""
    flex = v >= 3
    r = c.request_v(TXN_OFFSET_COMMIT, v, txn_commit_body(v, *a, **kw), 3, timeout=10)
    assert r.i32() == 0
    topics = r.vstructs(lambda x: (x.vstring(flex), x.vstructs(lambda y: (y.i32(), y.i16()), flex)),
                        flex)
    r.vtags(flex)
    assert r.remaining() == 0
    return [(t, p, e) for t, ps in topics for p, e in ps]


def fetch_v9(c, group, asked, require_stable):
    """OffsetFetch v9 for one group: [(topic, [(partition, offset, epoch, metadata, error)])], error."""
    def topic(t):
        return kr.vstring(t[0], True) + kr.varray([kr.i32(p) for p in t[1]], True) + kr.vtags(True)
    body = (kr.varray([kr.vstring(group, True) + kr.vstring(None, True) + kr.i32(-1) +
                       kr.varray(asked, True, topic) + kr.vtags(True)], True, lambda x: x) +
            kr.i8(1 if require_stable else 0) + kr.vtags(True))
    [(gid, topics, err)] = parse_fetch_v9(call(c, OFFSET_FETCH, 9, body))
    assert gid == group
    return topics, err


def fetch_v5(c, group, asked):
    body = kr.string(group) + kr.array([kr.string(t) + kr.array([kr.i32(p) for p in ps])
                                        for t, ps in asked])
    r = c.request(OFFSET_FETCH, 5, body)
    assert r.i32() == 0
    topics = r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.i32(),
                                                               y.string(), y.i16()))))
    return topics, r.i16()


def commit_simple(c, group, topic, partition, offset):
    """OffsetCommit v2 for an offsets-only group (generation -1)."""
    body = (kr.string(group) + kr.i32(-1) + kr.string("") + kr.i64(-1) +
            kr.array([kr.string(topic) + kr.array([kr.i32(partition) + kr.i64(offset) +
                                                   kr.string("")])]))
    r = c.request(8, 2, body)
    assert r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16())))) == \
        [(topic, [(partition, 0)])]


def db_rows(b, sql, args=()):
    db = sqlite3.connect(os.path.join(b.data_dir, "sluice.db"))
    try:
        return db.execute(sql, args).fetchall()
    finally:
        db.close()


def test_txn_offsets_stay_pending_unstable_and_survive_sigkill(start_broker):
    """Pending offsets: OffsetFetch (every version) keeps showing the old
    committed offset, RequireStable answers UNSTABLE_OFFSET_COMMIT for the
    pending partitions only, SQL's committed_offsets and lag show none of
    them, and a SIGKILL right after the answers loses none of them."""
    b = admin_broker(start_broker, **UNVERIFIED)
    t = topic_name("txo")
    create_topic(b, t, 3)
    g = topic_name("txg")
    asked = [(t, [0, 1, 2])]
    with kr.Conn(b.port) as c:
        commit_simple(c, g, t, 0, 5)
        # v0 (no leader epoch), v2, and v3 (flexible, no member named): all pending.
        assert txn_commit(c, 0, "tx-a", g, 4000, 0, [(t, 0, 50, "a0")]) == [(t, 0, NONE)]
        assert txn_commit(c, 2, "tx-a", g, 4000, 0, [(t, 1, 60, None), (t, 9, 1, "")]) == \
            [(t, 1, NONE), (t, 9, 3)]
        assert txn_commit(c, 3, "tx-a", g, 4000, 0, [(t, 0, 51, "a1")]) == [(t, 0, NONE)]
        assert fetch_v5(c, g, asked) == \
            ([(t, [(0, 5, -1, "", 0), (1, -1, -1, "", 0), (2, -1, -1, "", 0)])], 0)
        stable = [(t, [(0, -1, -1, "", UNSTABLE_OFFSET_COMMIT), (1, -1, -1, "", UNSTABLE_OFFSET_COMMIT),
                       (2, -1, -1, "", 0)])]
        assert fetch_v9(c, g, asked, True) == (stable, 0)
        assert fetch_v9(c, g, asked, False) == \
            ([(t, [(0, 5, -1, "", 0), (1, -1, -1, "", 0), (2, -1, -1, "", 0)])], 0)
        # Null topics (all committed): the committed partition with a pending one.
        assert fetch_v9(c, g, None, True) == ([(t, [(0, -1, -1, "", UNSTABLE_OFFSET_COMMIT)])], 0)
        # Another group's fetch is not held by this transaction.
        assert fetch_v9(c, "other-" + g, asked, True)[0][0][1][0] == (0, -1, -1, "", 0)
    # What an operator sees: the committed offset only, in the table and the lag.
    assert sql(b, "SELECT partition, offset FROM committed_offsets WHERE group_id = '%s'" % g) == \
        [{"partition": 0, "offset": 5}]
    assert sql(b, "SELECT partition, committed FROM consumer_lag WHERE group_id = '%s'"
               % g) == [{"partition": 0, "committed": 5}]
    rc = b.restart(signal.SIGKILL)
    assert rc == -signal.SIGKILL, rc
    wait_topic(b, t, 3)
    assert db_rows(b, "SELECT topic, partition, producer_id, producer_epoch, offset, metadata "
                      "FROM pending_txn_offsets WHERE group_id = ? ORDER BY partition", (g,)) == \
        [(t, 0, 4000, 0, 51, "a1"), (t, 1, 4000, 0, 60, "")]
    assert db_rows(b, "SELECT partition, offset FROM committed_offsets WHERE group_id = ?",
                   (g,)) == [(0, 5)]
    with kr.Conn(b.port) as c:
        assert fetch_v9(c, g, asked, True) == (stable, 0)
        assert fetch_v5(c, g, [(t, [0])]) == ([(t, [(0, 5, -1, "", 0)])], 0)


def test_a_group_with_only_pending_offsets_is_kept_until_deleted(start_broker):
    """Kafka's retention keeps an Empty group whose offsets are pending in a
    transaction (GroupMetadata.hasOffsets); DeleteGroups takes them along."""
    b = start_broker(dict(UNVERIFIED, **{"offsets.retention.check.interval.ms": "200"}))
    t = topic_name("keep")
    create_topic(b, t, 1)
    g, bare = topic_name("keepg"), topic_name("bare")

    def listed(c):
        r = c.request(16, 2)
        r.i32()
        assert r.i16() == 0
        return {x for x, _ in r.array(lambda x: (x.string(), x.string()))}
    with kr.Conn(b.port) as c:
        assert txn_commit(c, 0, "tx-k", g, 8000, 0, [(t, 0, 3, "")]) == [(t, 0, NONE)]
        # A group holding nothing goes at the next check: the check runs.
        from test_groups import API_JOIN, API_LEAVE, join_v5, parse_join_v5
        j = parse_join_v5(c.request(API_JOIN, 5, join_v5(bare)))
        assert j["err"] == 79
        r = c.request(API_LEAVE, 1, kr.string(bare) + kr.string(j["member"]))
        assert (r.i32(), r.i16()) == (0, 0)
        deadline = time.monotonic() + 5
        while bare in listed(c):
            assert time.monotonic() < deadline, "the retention check never ran"
            time.sleep(0.1)
        time.sleep(0.5)
        assert g in listed(c)
        r = c.request(42, 1, kr.array([kr.string(g)]))
        r.i32()
        assert r.array(lambda x: (x.string(), x.i16())) == [(g, 0)]
    assert db_rows(b, "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?", (g,)) == [(0,)]


def test_txn_offset_commit_checks_the_member_as_kip_447(start_broker):
    """v3+: a generation or member id given is checked against the group
    (ILLEGAL_GENERATION, UNKNOWN_MEMBER_ID, FENCED_INSTANCE_ID); generation
    -1 with no member skips it, as Kafka's validateOffsetCommit; a group
    being rebalanced does not refuse a transactional commit."""
    b = start_broker(UNVERIFIED)
    t = topic_name("k447")
    create_topic(b, t, 1)
    g = topic_name("k447g")
    parts = [(t, 0, 10, "")]
    with kr.Conn(b.port) as c:
        me = join_two_step(c, g, session=30000)
        j = join_answer(c)
        assert (j["err"], j["gen"]) == (0, 1), j
        # CompletingRebalance: a member's ordinary commit would be refused; this is not.
        assert txn_commit(c, 3, "tx", g, 7, 0, parts, gen=1, member=me) == [(t, 0, NONE)]
        assert parse_sync_v3(c.request(API_SYNC, 3, sync_v3(g, 1, me, assignments=[(me, b"A")])))[1] == 0
        assert txn_commit(c, 3, "tx", g, 7, 0, parts, gen=1, member=me) == [(t, 0, NONE)]
        assert txn_commit(c, 4, "tx", g, 7, 0, parts, gen=2, member=me) == [(t, 0, ILLEGAL_GENERATION)]
        assert txn_commit(c, 3, "tx", g, 7, 0, parts, gen=1, member="stranger") == \
            [(t, 0, UNKNOWN_MEMBER_ID)]
        assert txn_commit(c, 3, "tx", g, 7, 0, parts, gen=1, member="") == [(t, 0, UNKNOWN_MEMBER_ID)]
        assert txn_commit(c, 3, "tx", g, 7, 0, parts) == [(t, 0, NONE)]
        assert txn_commit(c, 3, "tx", "no-" + g, 7, 0, parts, gen=1, member=me) == \
            [(t, 0, UNKNOWN_MEMBER_ID)]
        assert txn_commit(c, 3, "tx", "", 7, 0, parts) == [(t, 0, INVALID_GROUP_ID)]
    # A static member: another member id naming its instance is fenced.
    gs = topic_name("k447s")
    body = lambda m: (kr.string(gs) + kr.i32(30000) + kr.i32(10000) + kr.string(m) +
                      kr.string("inst-1") + kr.string("consumer") +
                      kr.array([kr.string("range") + kr.nbytes(b"m")]))
    with kr.Conn(b.port) as c:
        from test_groups import API_JOIN, parse_join_v5
        j = parse_join_v5(c.request(API_JOIN, 5, body(""), timeout=10))
        assert j["err"] == 0, j
        assert txn_commit(c, 3, "tx", gs, 7, 0, parts, gen=j["gen"], member="other",
                          instance="inst-1") == [(t, 0, FENCED_INSTANCE_ID)]
        assert txn_commit(c, 3, "tx", gs, 7, 0, parts, gen=j["gen"], member=j["member"],
                          instance="inst-1") == [(t, 0, NONE)]


def test_txn_offset_commit_authorization_is_kafkas(secured):
    """KafkaApis.handleTxnOffsetCommitRequest: WRITE on the transactional id
    (else TRANSACTIONAL_ID_AUTHORIZATION_FAILED for every partition), then
    READ on the group (GROUP_AUTHORIZATION_FAILED), then READ on each topic
    (TOPIC_AUTHORIZATION_FAILED for that topic's partitions alone)."""
    b = secured
    make_topic(b, "tz-ok", 2)
    make_topic(b, "tz-no")
    grant(b, "TOPIC", "tz-ok", "READ")
    parts = [("tz-ok", 0, 1, ""), ("tz-ok", 1, 2, ""), ("tz-no", 0, 3, "")]
    with kr.Conn(b.port) as c:
        assert txn_commit(c, 3, "tx-z", "gz", 9, 0, parts) == \
            [("tz-ok", 0, TXN_ID_AUTH), ("tz-ok", 1, TXN_ID_AUTH), ("tz-no", 0, TXN_ID_AUTH)]
        grant(b, "TRANSACTIONAL_ID", "tx-z", "WRITE")
        assert txn_commit(c, 3, "tx-z", "gz", 9, 0, parts) == \
            [("tz-ok", 0, GROUP_AUTH), ("tz-ok", 1, GROUP_AUTH), ("tz-no", 0, GROUP_AUTH)]
        grant(b, "GROUP", "gz", "READ")
        # Verified with the transaction coordinator (KIP-890): a real producer
        # of tx-z whose transaction holds the group.
        from test_txn_coordinator import add_offsets, new_producer
        pid, epoch = new_producer(c, "tx-z")
        assert add_offsets(c, "tx-z", pid, epoch, "gz") == (NONE,)
        assert txn_commit(c, 0, "tx-z", "gz", pid, epoch, parts) == \
            [("tz-ok", 0, NONE), ("tz-ok", 1, NONE), ("tz-no", 0, TOPIC_AUTH)]
    assert db_rows(b, "SELECT topic, partition, offset FROM pending_txn_offsets "
                      "WHERE group_id = 'gz' ORDER BY partition") == [("tz-ok", 0, 1), ("tz-ok", 1, 2)]


def test_txn_offset_commit_must_belong_to_the_producers_transaction(start_broker):
    """KIP-890 (Kafka 3.6+): TxnOffsetCommit is verified with the transaction
    coordinator; the group's partition of __consumer_offsets must be in the
    ongoing transaction of that producer id and epoch (AddOffsetsToTxn).
    Else nothing is pending, so RequireStable is not held forever by a
    transaction no marker will ever end."""
    from test_txn_coordinator import add_offsets, add_partitions, end_txn, new_producer
    b = start_broker(GROUP_OVERRIDES)
    t = topic_name("kv")
    create_topic(b, t, 2)
    g = topic_name("kvg")
    tid = topic_name("kvtx")
    parts = [(t, 0, 10, ""), (t, 1, 11, "")]
    asked = [(t, [0, 1])]

    def refused(code):
        return [(t, 0, code), (t, 1, code)]
    with kr.Conn(b.port) as c:
        commit_simple(c, g, t, 0, 5)
        pid, epoch = new_producer(c, tid)
        # No transaction open; a producer id the coordinator never gave this id.
        assert txn_commit(c, 3, tid, g, pid, epoch, parts) == refused(INVALID_TXN_STATE)
        assert txn_commit(c, 3, tid, g, pid + 1000, epoch, parts) == \
            refused(INVALID_PRODUCER_ID_MAPPING)
        assert txn_commit(c, 0, "tx-nobody-" + tid, g, 12345, 0, parts) == \
            refused(INVALID_PRODUCER_ID_MAPPING)
        # A transaction open, but the group never added by AddOffsetsToTxn.
        assert add_partitions(c, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        assert txn_commit(c, 3, tid, g, pid, epoch, parts) == refused(INVALID_TXN_STATE)
        assert txn_commit(c, 3, tid, g, pid, epoch + 1, parts) == refused(INVALID_PRODUCER_EPOCH)
        assert db_rows(b, "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?",
                       (g,)) == [(0,)]
        assert fetch_v9(c, g, asked, True) == \
            ([(t, [(0, 5, -1, "", 0), (1, -1, -1, "", 0)])], 0)
        # Added: accepted, pending until the commit.
        assert add_offsets(c, tid, pid, epoch, g) == (NONE,)
        assert txn_commit(c, 3, tid, g, pid, epoch, parts) == refused(NONE)
        assert fetch_v9(c, g, asked, True)[0][0][1][0][4] == UNSTABLE_OFFSET_COMMIT
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
        deadline = time.monotonic() + 15
        while fetch_v9(c, g, asked, True) != \
                ([(t, [(0, 10, -1, "", 0), (1, 11, -1, "", 0)])], 0):
            assert time.monotonic() < deadline, fetch_v9(c, g, asked, True)
            time.sleep(0.1)


def test_txn_offset_commit_to_a_broker_that_is_not_the_coordinator(make_cluster):
    """In a cluster, a broker that does not lead the group's partition of
    __consumer_offsets answers NOT_COORDINATOR for every partition."""
    from cluster_support import live_brokers, wait_for
    from test_cluster_groups import agreed_coordinator
    cl = make_cluster(3, overrides={"offsets.topic.num.partitions": "3"})
    wait_for(lambda: all(len(live_brokers(x)) == 3 for x in cl.brokers), 20,
             "every broker to list three brokers")
    t = topic_name("txnc")
    create_topic(cl.brokers[0], t, 1)
    g = topic_name("txncg")
    coord = wait_for(lambda: agreed_coordinator(cl.brokers, g), 30, "a coordinator for " + g)
    other = next(x for x in cl.brokers if x.broker_id != coord)
    with kr.Conn(other.port) as c:
        assert txn_commit(c, 3, "tx-c", g, 11, 0, [(t, 0, 4, "")]) == [(t, 0, 16)]



def test_an_ordinary_commit_after_a_transactional_one_keeps_the_later_value(start_broker):
    """Kafka keeps whichever offset was written later (GroupMetadata's
    olderThan): an OffsetCommit written after a pending TxnOffsetCommit is
    not moved back by that transaction's commit; a partition the ordinary
    commit did not touch takes the transaction's offset."""
    from test_txn_coordinator import add_offsets, end_txn, new_producer, until_settled
    b = start_broker(GROUP_OVERRIDES)
    t = topic_name("kl")
    create_topic(b, t, 2)
    g = topic_name("klg")
    tid = topic_name("kltx")
    asked = [(t, [0, 1])]
    with kr.Conn(b.port) as c:
        pid, epoch = new_producer(c, tid)
        assert add_offsets(c, tid, pid, epoch, g) == (NONE,)
        assert txn_commit(c, 3, tid, g, pid, epoch, [(t, 0, 10, ""), (t, 1, 11, "")]) == \
            [(t, 0, NONE), (t, 1, NONE)]
        commit_simple(c, g, t, 0, 20)
        assert fetch_v9(c, g, asked, True)[0][0][1][0][4] == UNSTABLE_OFFSET_COMMIT
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
        deadline = time.monotonic() + 15
        while db_rows(b, "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?",
                      (g,)) != [(0,)]:
            assert time.monotonic() < deadline, "the transaction never completed"
            time.sleep(0.1)
        assert fetch_v9(c, g, asked, True) == \
            ([(t, [(0, 20, -1, "", 0), (1, 11, -1, "", 0)])], 0)
        # A TxnOffsetCommit written after the ordinary one wins again.
        assert until_settled(lambda: add_offsets(c, tid, pid, epoch, g)) == (NONE,)
        commit_simple(c, g, t, 1, 30)
        assert txn_commit(c, 3, tid, g, pid, epoch, [(t, 1, 31, "")]) == [(t, 1, NONE)]
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
        deadline = time.monotonic() + 15
        while fetch_v9(c, g, asked, True) != \
                ([(t, [(0, 20, -1, "", 0), (1, 31, -1, "", 0)])], 0):
            assert time.monotonic() < deadline, fetch_v9(c, g, asked, True)
            time.sleep(0.1)


def test_cluster_txn_offset_commit_is_verified_by_another_brokers_coordinator(make_cluster):
    """The transactional id coordinated by another broker than the group's:
    the group coordinator asks it (AddPartitionsToTxn v4 VerifyOnly) and
    refuses with its answer; once AddOffsetsToTxn added the group, accepted."""
    from cluster_support import live_brokers, wait_for
    from test_cluster_groups import agreed_coordinator
    from test_txn_coordinator import add_offsets, find_coordinator, new_producer
    cl = make_cluster(3, overrides={"offsets.topic.num.partitions": "3",
                                    "transaction.state.log.num.partitions": "3"})
    wait_for(lambda: all(len(live_brokers(x)) == 3 for x in cl.brokers), 20,
             "every broker to list three brokers")
    t = topic_name("txv")
    create_topic(cl.brokers[0], t, 1)
    g = topic_name("txvg")
    coord = wait_for(lambda: agreed_coordinator(cl.brokers, g), 30, "a coordinator for " + g)
    gb = next(x for x in cl.brokers if x.broker_id == coord)
    parts = [(t, 0, 4, "")]

    def txn_coord(tid):
        with kr.Conn(gb.port) as c:
            err, node, _port = find_coordinator(c, tid)
        return (node,) if err == NONE and node >= 0 else None
    tid = None
    for i in range(60):
        cand = "%s-%d" % (topic_name("txvt"), i)
        (node,) = wait_for(lambda: txn_coord(cand), 30, "a coordinator for " + cand)
        if node != coord:
            tid, tb = cand, next(x for x in cl.brokers if x.broker_id == node)
            break
    assert tid, "every transactional id tried is coordinated by the group's coordinator"
    with kr.Conn(tb.port) as tc:
        pid, epoch = new_producer(tc, tid)
    # a broker that is not the group's coordinator answers NOT_COORDINATOR
    # without asking the transaction coordinator first
    if tb.broker_id != coord:
        other = next(x for x in cl.brokers if x.broker_id not in (coord, tb.broker_id))
        sent = peer_requests(other)
        with kr.Conn(other.port) as c:
            assert txn_commit(c, 3, tid, g, pid, epoch, parts) == [(t, 0, 16)]
        assert peer_requests(other) == sent
    with kr.Conn(gb.port) as c:
        assert txn_commit(c, 3, tid, g, pid + 1000, epoch, parts) == \
            [(t, 0, INVALID_PRODUCER_ID_MAPPING)]
        assert txn_commit(c, 3, tid, g, pid, epoch, parts) == [(t, 0, INVALID_TXN_STATE)]
        assert fetch_v9(c, g, [(t, [0])], True) == ([(t, [(0, -1, -1, "", 0)])], 0)
    with kr.Conn(tb.port) as tc:
        assert add_offsets(tc, tid, pid, epoch, g) == (NONE,)
    with kr.Conn(gb.port) as c:
        assert txn_commit(c, 3, tid, g, pid, epoch, parts) == [(t, 0, NONE)]
        assert fetch_v9(c, g, [(t, [0])], True)[0][0][1][0][4] == UNSTABLE_OFFSET_COMMIT

# ---- end to end: needs the transaction coordinator (wt-coord) and markers (wt-part)



def txn_producer(b, txn_id):
    p = Producer(ck_conf(b, **{"transactional.id": txn_id, "transaction.timeout.ms": 10000}))
    p.init_transactions(15)
    return p


def consumer_for(b, group):
    return Consumer(ck_conf(b, **{"group.id": group, "enable.auto.commit": False,
                                  "isolation.level": "read_committed"}))


def send_offsets(b, p, group, topic, offsets, commit):
    """One transaction committing {partition: offset} for group, then its end."""
    cons = consumer_for(b, group)
    try:
        p.begin_transaction()
        p.produce(topic, b"out")
        p.send_offsets_to_transaction([TopicPartition(topic, q, o) for q, o in offsets.items()],
                                      cons.consumer_group_metadata(), 15)
        (p.commit_transaction if commit else p.abort_transaction)(15)
    finally:
        cons.close()


def committed_now(b, group, topic, nparts):
    cons = consumer_for(b, group)
    try:
        got = cons.committed([TopicPartition(topic, q) for q in range(nparts)], timeout=15)
        return {x.partition: x.offset for x in got}
    finally:
        cons.close()


def txn_setup(start_broker, name, nparts):
    """A broker, a topic of nparts partitions, a group id, a transactional producer."""
    b = start_broker(GROUP_OVERRIDES)
    t = topic_name(name)
    create_topic(b, t, nparts)
    return b, t, topic_name(name + "g"), txn_producer(b, name)


def test_send_offsets_to_transaction_commit_makes_them_committed(start_broker):
    b, t, g, p = txn_setup(start_broker, "e2e-commit", 2)
    send_offsets(b, p, g, t, {0: 7, 1: 9}, commit=True)
    assert committed_now(b, g, t, 2) == {0: 7, 1: 9}
    assert db_rows(b, "SELECT partition, offset FROM committed_offsets WHERE group_id = ? "
                      "ORDER BY partition", (g,)) == [(0, 7), (1, 9)]
    assert db_rows(b, "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?", (g,)) == [(0,)]


def test_require_stable_never_answers_what_a_completed_commit_replaced(start_broker):
    """OffsetFetch with RequireStable while the commits' markers land: each
    answer is the offset pending (UNSTABLE_OFFSET_COMMIT) or the newest
    committed one, never the one before it with no error.  The broker read
    the committed rows, then the pending ones, each its own snapshot: a
    completion by the sync worker in between showed neither (it failed a
    CI run: a read_committed consumer saw no offset right after the
    commit)."""
    b, t, g, p = txn_setup(start_broker, "e2e-stable", 1)
    cons = consumer_for(b, g)
    stale = []
    fetches = 0
    try:
        with kr.Conn(b.port) as c:
            for k in range(1, 121):
                p.begin_transaction()
                p.produce(t, b"out")
                p.send_offsets_to_transaction([TopicPartition(t, 0, k)],
                                              cons.consumer_group_metadata(), 15)
                p.commit_transaction(15)
                deadline = time.monotonic() + 15
                while True:
                    fetches += 1
                    [(_, [(_, off, _, _, err)])], top = fetch_v9(c, g, [(t, [0])], True)
                    assert top == 0
                    if err != UNSTABLE_OFFSET_COMMIT:
                        if (off, err) != (k, 0):
                            stale.append((k, off, err))
                        break
                    assert time.monotonic() < deadline, f"round {k} stayed unstable"
    finally:
        cons.close()
    print(f"120 commits, {fetches} fetches, answers older than the commit: {stale}")
    assert stale == []


def test_send_offsets_to_transaction_abort_drops_them(start_broker):
    b, t, g, p = txn_setup(start_broker, "e2e-abort", 1)
    send_offsets(b, p, g, t, {0: 3}, commit=True)
    send_offsets(b, p, g, t, {0: 8}, commit=False)
    assert committed_now(b, g, t, 1) == {0: 3}
    assert db_rows(b, "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?", (g,)) == [(0,)]


def test_pending_offsets_survive_a_restart_before_the_commit(start_broker):
    """SIGKILL between TxnOffsetCommit and EndTxn: the restarted coordinator
    completes the transaction (or its timeout aborts it) and the group sees
    either all of its offsets or none, never a half."""
    b = start_broker(GROUP_OVERRIDES)
    t = topic_name("e2r")
    create_topic(b, t, 2)
    produce_ok(Producer(ck_conf(b)), t, [{"value": b"x"}])
    g = topic_name("e2rg")
    p = txn_producer(b, "e2e-restart")
    cons = consumer_for(b, g)
    p.begin_transaction()
    p.produce(t, b"out")
    p.send_offsets_to_transaction([TopicPartition(t, 0, 4), TopicPartition(t, 1, 5)],
                                  cons.consumer_group_metadata(), 15)
    cons.close()
    p.flush(15)
    b.restart(signal.SIGKILL)
    wait_topic(b, t, 2)
    p2 = txn_producer(b, "e2e-restart")   # fences p, aborting its transaction
    deadline = time.monotonic() + 30
    while db_rows(b, "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?", (g,)) != [(0,)]:
        assert time.monotonic() < deadline, "the pending offsets were never completed"
        time.sleep(0.2)
    assert committed_now(b, g, t, 2) == {0: -1001, 1: -1001}
    send_offsets(b, p2, g, t, {0: 4, 1: 5}, commit=True)
    assert committed_now(b, g, t, 2) == {0: 4, 1: 5}


def cluster_txn(make_cluster, name):
    """A 3-broker cluster, a topic (2 partitions, 3 replicas), a group, its
    coordinator's id, a transactional producer bootstrapped on every broker."""
    from cluster_support import live_brokers, wait_for
    from test_cluster_groups import agreed_coordinator
    from confluent_kafka.admin import NewTopic
    from support import ck_admin
    cl = make_cluster(3, overrides={"offsets.topic.num.partitions": "3",
                                    "group.initial.rebalance.delay.ms": "0"})
    wait_for(lambda: all(len(live_brokers(x)) == 3 for x in cl.brokers), 20,
             "every broker to list three brokers")
    t = topic_name(name)
    ck_admin(cl.brokers[0]).create_topics([NewTopic(t, 2, 3)], operation_timeout=15)[t].result(20)
    g = topic_name(name + "g")
    coord = wait_for(lambda: agreed_coordinator(cl.brokers, g), 30, "a coordinator for " + g)
    p = Producer(ck_conf(cl.brokers[0], **{"bootstrap.servers": cl.bootstrap,
                                           "transactional.id": name}))
    p.init_transactions(30)
    return cl, t, g, coord, p


def kill_coordinator(cl, g, coord):
    """SIGKILLs the group's coordinator; the survivors, once they agree on
    the next one: (its broker, the other survivor)."""
    from cluster_support import wait_for
    from test_cluster_groups import agreed_coordinator
    cl.broker(coord).kill()
    alive = [x for x in cl.brokers if x.broker_id != coord]
    def moved():
        a = agreed_coordinator(alive, g)
        return (a,) if a not in (None, coord) else None
    [new] = wait_for(moved, 60, "a new coordinator for " + g)
    return cl.broker(new), next(x for x in alive if x.broker_id != new)


def test_cluster_committed_txn_offsets_survive_the_group_coordinators_sigkill(make_cluster):
    """Cluster mode: offsets a transaction committed are in the group's
    partition of __consumer_offsets, so the next coordinator serves them."""
    cl, t, g, coord, p = cluster_txn(make_cluster, "txcl")
    send_offsets(cl.brokers[0], p, g, t, {0: 12, 1: 13}, commit=True)
    new, _ = kill_coordinator(cl, g, coord)
    assert committed_now(new, g, t, 2) == {0: 12, 1: 13}


@pytest.mark.parametrize("commit", [True, False], ids=["commit", "abort"])
def test_cluster_open_txn_offsets_survive_the_group_coordinators_sigkill(make_cluster, commit):
    """Cluster mode, Kafka's transactional batch in __consumer_offsets: the
    group coordinator is SIGKILLed between TxnOffsetCommit and the end of
    the transaction; the client's commit (or abort), retried against the
    new coordinators, then makes the offsets committed on the next group
    coordinator and on the follower (or leaves the earlier ones)."""
    from cluster_support import wait_for
    cl, t, g, coord, p = cluster_txn(make_cluster, "txop-" + ("c" if commit else "a"))
    b = cl.brokers[0]
    cons = consumer_for(b, g)
    cons.commit(offsets=[TopicPartition(t, 0, 2), TopicPartition(t, 1, 3)], asynchronous=False)
    p.begin_transaction()
    p.produce(t, b"out")
    p.send_offsets_to_transaction([TopicPartition(t, 0, 12), TopicPartition(t, 1, 13)],
                                  cons.consumer_group_metadata(), 15)
    cons.close()
    p.flush(15)
    new, follower = kill_coordinator(cl, g, coord)
    (p.commit_transaction if commit else p.abort_transaction)(60)
    want = {0: 12, 1: 13} if commit else {0: 2, 1: 3}
    rows = "SELECT partition, offset FROM committed_offsets WHERE group_id = ? ORDER BY partition"
    pending = "SELECT count(*) FROM pending_txn_offsets WHERE group_id = ?"
    # the markers follow EndTxn's answer: wait for them to reach the group
    wait_for(lambda: db_rows(new, rows, (g,)) == sorted(want.items()) and
             db_rows(new, pending, (g,)) == [(0,)], 30, "the new coordinator's offsets")
    assert committed_now(new, g, t, 2) == want
    # the follower's rows follow the log: the batch, then its marker (group_log.c G8)
    wait_for(lambda: db_rows(follower, rows, (g,)) == sorted(want.items()), 30,
             "the follower's committed offsets")
