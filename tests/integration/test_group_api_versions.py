"""The group APIs at the lowest and the highest version Kafka defines, in
raw frames written here (kafka_raw's v* helpers: compact encodings and
tagged sections for the flexible versions), every field of each answer
checked: FindCoordinator v0/v6, JoinGroup v0/v9, SyncGroup v0/v5,
Heartbeat v0/v4, LeaveGroup v0/v5, DescribeGroups v0/v5, ListGroups v0/v5,
DeleteGroups v0/v2, OffsetCommit v0/v1/v9, OffsetFetch v0/v9 (batched
groups), OffsetDelete v0."""
import struct
import time

import pytest

import kafka_raw as kr
from support import create_topic

FIND_COORDINATOR, JOIN, HEARTBEAT, LEAVE, SYNC = 10, 11, 12, 13, 14
DESCRIBE_GROUPS, LIST_GROUPS, DELETE_GROUPS = 15, 16, 42
OFFSET_COMMIT, OFFSET_FETCH, OFFSET_DELETE = 8, 9, 47
FIRST_FLEX = {FIND_COORDINATOR: 3, JOIN: 6, HEARTBEAT: 4, LEAVE: 4, SYNC: 4,
              DESCRIBE_GROUPS: 5, LIST_GROUPS: 3, DELETE_GROUPS: 2,
              OFFSET_COMMIT: 8, OFFSET_FETCH: 6, OFFSET_DELETE: 99}

NONE, UNKNOWN_TOPIC_OR_PARTITION, ILLEGAL_GENERATION = 0, 3, 22
UNKNOWN_MEMBER_ID, REBALANCE_IN_PROGRESS = 25, 27
NON_EMPTY_GROUP, GROUP_ID_NOT_FOUND = 68, 69
MEMBER_ID_REQUIRED, GROUP_SUBSCRIBED_TO_TOPIC, COORDINATOR_LOAD_IN_PROGRESS = 79, 86, 14

GROUP_OVERRIDES = {"group.initial.rebalance.delay.ms": "0"}


def call(c, api, v, body):
    return c.request_v(api, v, body, FIRST_FLEX[api])


def subscription(topics):
    """ConsumerProtocolSubscription v0: version, topics, user data."""
    return kr.i16(0) + kr.array([kr.string(t) for t in topics]) + kr.nbytes(b"")


def done(r, flex):
    """The body's own tagged section, and nothing after it."""
    r.vtags(flex)
    assert r.remaining() == 0


# ---- requests ------------------------------------------------------------------
def join_body(v, group, member="", instance=None, topics=("t",), session_ms=10000):
    f = v >= 6
    b = kr.vstring(group, f) + kr.i32(session_ms)
    if v >= 1:
        b += kr.i32(session_ms)                       # RebalanceTimeoutMs
    b += kr.vstring(member, f)
    if v >= 5:
        b += kr.vstring(instance, f)
    b += kr.vstring("consumer", f)
    b += kr.varray([("range", subscription(topics))], f,
                   lambda p: kr.vstring(p[0], f) + kr.vbytes(p[1], f) + kr.vtags(f))
    if v >= 8:
        b += kr.vstring("testing", f)                 # Reason
    return b + kr.vtags(f)


def parse_join(r, v):
    f = v >= 6
    out = {}
    if v >= 2:
        out["throttle"] = r.i32()
    out["error"] = r.i16()
    out["generation"] = r.i32()
    if v >= 7:
        out["protocol_type"] = r.vstring(f)
    out["protocol"] = r.vstring(f)
    out["leader"] = r.vstring(f)
    if v >= 9:
        out["skip_assignment"] = r.i8()
    out["member"] = r.vstring(f)

    def member(x):
        mid = x.vstring(f)
        inst = x.vstring(f) if v >= 5 else None
        meta = x.vbytes(f)
        x.vtags(f)
        return mid, inst, meta
    out["members"] = r.varray(member, f)
    done(r, f)
    return out


def sync_body(v, group, generation, member, assignments, ptype=None, pname=None):
    f = v >= 4
    b = kr.vstring(group, f) + kr.i32(generation) + kr.vstring(member, f)
    if v >= 3:
        b += kr.vstring(None, f)                      # GroupInstanceId
    if v >= 5:
        b += kr.vstring(ptype, f) + kr.vstring(pname, f)
    b += kr.varray(assignments, f,
                   lambda a: kr.vstring(a[0], f) + kr.vbytes(a[1], f) + kr.vtags(f))
    return b + kr.vtags(f)


def join_and_sync(c, group, topics=("t",)):
    """One member through JoinGroup v9 (MEMBER_ID_REQUIRED first) and
    SyncGroup v5; returns (member id, generation)."""
    deadline = time.monotonic() + 30
    # a new coordinator may still load (14), or, named by the view before its
    # replica has turned leader, answer NOT_COORDINATOR (16) for a moment:
    # clients retry both
    while True:
        first = parse_join(call(c, JOIN, 9, join_body(9, group, topics=topics)), 9)
        if first["error"] not in (COORDINATOR_LOAD_IN_PROGRESS, 16) or \
                time.monotonic() > deadline:
            break
        time.sleep(0.1)
    assert first["error"] == MEMBER_ID_REQUIRED and first["member"]
    j = parse_join(call(c, JOIN, 9, join_body(9, group, first["member"], topics=topics)), 9)
    assert j["error"] == NONE
    r = call(c, SYNC, 5, sync_body(5, group, j["generation"], j["member"],
                                   [(j["member"], b"\x00\x01")], "consumer", "range"))
    assert r.i32() == 0 and r.i16() == NONE
    return j["member"], j["generation"]


def commit_body(v, group, topic, offsets, generation=-1, member=""):
    f = v >= 8
    b = kr.vstring(group, f)
    if v >= 1:
        b += kr.i32(generation) + kr.vstring(member, f)
    if v >= 7:
        b += kr.vstring(None, f)                      # GroupInstanceId
    if 2 <= v <= 4:
        b += kr.i64(-1)                               # RetentionTimeMs

    def part(p):
        idx, off = p
        x = kr.i32(idx) + kr.i64(off)
        if v >= 6:
            x += kr.i32(7)                            # CommittedLeaderEpoch
        if v == 1:
            x += kr.i64(1700000000000)                # CommitTimestamp
        return x + kr.vstring("m%d" % idx, f) + kr.vtags(f)
    b += kr.varray([topic], f, lambda t: kr.vstring(t, f) + kr.varray(offsets, f, part)
                   + kr.vtags(f))
    return b + kr.vtags(f)


def parse_commit(r, v):
    f = v >= 8
    if v >= 3:
        assert r.i32() == 0
    topics = r.varray(lambda x: (x.vstring(f), x.varray(
        lambda y: (y.i32(), y.i16(), y.vtags(f))[:2], f), x.vtags(f))[:2], f)
    done(r, f)
    return topics


def fetch_body_v0(group, topic, parts):
    return kr.string(group) + kr.array([kr.string(topic) + kr.array([kr.i32(p) for p in parts])])


def fetch_body_v9(groups):
    """groups: [(group id, None | [(topic, [partitions])])]."""
    def topic(t):
        return kr.vstring(t[0], True) + kr.varray([kr.i32(p) for p in t[1]], True) + kr.vtags(True)

    def group(g):
        return (kr.vstring(g[0], True) + kr.vstring(None, True) + kr.i32(-1)
                + kr.varray(g[1], True, topic) + kr.vtags(True))
    return kr.varray(groups, True, group) + kr.i8(0) + kr.vtags(True)


def parse_fetch_v9(r):
    assert r.i32() == 0

    def part(x):
        return (x.i32(), x.i64(), x.i32(), x.vstring(True), x.i16())

    def topic(x):
        return (x.vstring(True), x.vstructs(part, True))

    def group(x):
        return (x.vstring(True), x.vstructs(topic, True), x.i16())
    groups = r.vstructs(group, True)
    done(r, True)
    return groups


# ---- FindCoordinator ------------------------------------------------------------
def test_find_coordinator_v0_and_batched_v6(broker):
    with kr.Conn(broker.port) as c:
        r = call(c, FIND_COORDINATOR, 0, kr.string("g"))
        assert (r.i16(), r.i32(), r.string(), r.i32()) == (NONE, broker.broker_id,
                                                            broker.host, broker.port)
        assert r.remaining() == 0
        body = kr.i8(0) + kr.varray([kr.vstring("g1", True), kr.vstring("g2", True)], True) \
            + kr.vtags(True)
        r = call(c, FIND_COORDINATOR, 6, body)
        assert r.i32() == 0

        def coord(x):
            return (x.vstring(True), x.i32(), x.vstring(True), x.i32(), x.i16(), x.vstring(True))
        got = r.vstructs(coord, True)
        done(r, True)
        assert got == [(k, broker.broker_id, broker.host, broker.port, NONE, None)
                       for k in ("g1", "g2")]
        # a transactional id (KeyType 1): COORDINATOR_NOT_AVAILABLE while
        # __transaction_state is created (daemon/txn/), then this broker
        for _ in range(300):
            r = call(c, FIND_COORDINATOR, 6, kr.i8(1) + kr.varray([kr.vstring("tx", True)], True)
                     + kr.vtags(True))
            r.i32()
            (key, node, host, port, err, msg), = r.vstructs(coord, True)
            done(r, True)
            if err != 15:
                break
            time.sleep(0.05)
        assert (key, node, host, port, err, msg) == ("tx", broker.broker_id, broker.host,
                                                     broker.port, NONE, None)


# ---- JoinGroup, SyncGroup, Heartbeat, LeaveGroup ---------------------------------
def test_join_sync_heartbeat_leave_v0(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    with kr.Conn(b.port) as c:
        j = parse_join(call(c, JOIN, 0, join_body(0, "g0")), 0)
        assert j["error"] == NONE and j["generation"] == 1 and j["protocol"] == "range"
        assert j["leader"] == j["member"] and j["member"].startswith("sluice-it-")
        assert j["members"] == [(j["member"], None, subscription(["t"]))]
        r = call(c, SYNC, 0, sync_body(0, "g0", 1, j["member"], [(j["member"], b"A")]))
        assert (r.i16(), r.nbytes(), r.remaining()) == (NONE, b"A", 0)
        r = call(c, HEARTBEAT, 0, kr.string("g0") + kr.i32(1) + kr.string(j["member"]))
        assert (r.i16(), r.remaining()) == (NONE, 0)
        r = call(c, HEARTBEAT, 0, kr.string("g0") + kr.i32(5) + kr.string(j["member"]))
        assert r.i16() == ILLEGAL_GENERATION
        r = call(c, LEAVE, 0, kr.string("g0") + kr.string(j["member"]))
        assert (r.i16(), r.remaining()) == (NONE, 0)
        r = call(c, LEAVE, 0, kr.string("g0") + kr.string(j["member"]))
        assert r.i16() == UNKNOWN_MEMBER_ID


def test_join_sync_heartbeat_leave_newest_versions(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    with kr.Conn(b.port) as c:
        first = parse_join(call(c, JOIN, 9, join_body(9, "g9")), 9)
        assert first == {"throttle": 0, "error": MEMBER_ID_REQUIRED, "generation": -1,
                         "protocol_type": None, "protocol": None, "leader": "",
                         "skip_assignment": 0, "member": first["member"], "members": []}
        mid = first["member"]
        j = parse_join(call(c, JOIN, 9, join_body(9, "g9", mid)), 9)
        assert j == {"throttle": 0, "error": NONE, "generation": 1, "protocol_type": "consumer",
                     "protocol": "range", "leader": mid, "skip_assignment": 0, "member": mid,
                     "members": [(mid, None, subscription(["t"]))]}
        # SyncGroup v5 names the protocol it expects; a wrong one is refused
        r = call(c, SYNC, 5, sync_body(5, "g9", 1, mid, [(mid, b"A")], "consumer", "roundrobin"))
        assert (r.i32(), r.i16()) == (0, 23)
        r = call(c, SYNC, 5, sync_body(5, "g9", 1, mid, [(mid, b"A")], "consumer", "range"))
        assert (r.i32(), r.i16(), r.vstring(True), r.vstring(True), r.vbytes(True)) == \
            (0, NONE, "consumer", "range", b"A")
        done(r, True)
        hb = kr.vstring("g9", True) + kr.i32(1) + kr.vstring(mid, True) + kr.vstring(None, True) \
            + kr.vtags(True)
        r = call(c, HEARTBEAT, 4, hb)
        assert (r.i32(), r.i16()) == (0, NONE)
        done(r, True)

        # LeaveGroup v5: several members at once, each answered
        def ident(m):
            return kr.vstring(m[0], True) + kr.vstring(m[1], True) + kr.vstring("bye", True) \
                + kr.vtags(True)
        body = kr.vstring("g9", True) + kr.varray([(mid, None), ("nobody", None)], True, ident) \
            + kr.vtags(True)
        r = call(c, LEAVE, 5, body)
        assert (r.i32(), r.i16()) == (0, NONE)

        def resp(x):
            return (x.vstring(True), x.vstring(True), x.i16())
        assert r.vstructs(resp, True) == [(mid, None, NONE), ("nobody", None, UNKNOWN_MEMBER_ID)]
        done(r, True)
        r = call(c, LEAVE, 5, kr.vstring("no-such-group", True)
                 + kr.varray([("m", None)], True, ident) + kr.vtags(True))
        assert (r.i32(), r.i16(), r.vstructs(resp, True)) == (0, NONE, [("m", None, UNKNOWN_MEMBER_ID)])


# ---- DescribeGroups, ListGroups, DeleteGroups ------------------------------------
def test_describe_list_delete_groups_v0(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    with kr.Conn(b.port) as c:
        mid, _ = join_and_sync(c, "live")
        r = call(c, DESCRIBE_GROUPS, 0, kr.array([kr.string("live")]))
        (err, gid, state, ptype, pdata, members), = r.array(lambda x: (
            x.i16(), x.string(), x.string(), x.string(), x.string(),
            x.array(lambda y: (y.string(), y.string(), y.string(), y.nbytes(), y.nbytes()))))
        assert (err, gid, state, ptype, pdata) == (NONE, "live", "Stable", "consumer", "range")
        assert members == [(mid, "sluice-it", "/127.0.0.1", subscription(["t"]), b"\x00\x01")]
        assert r.remaining() == 0
        r = call(c, LIST_GROUPS, 0, b"")
        assert r.i16() == NONE
        assert r.array(lambda x: (x.string(), x.string())) == [("live", "consumer")]
        assert r.remaining() == 0
        r = call(c, DELETE_GROUPS, 0, kr.array([kr.string("live"), kr.string("nope")]))
        assert r.i32() == 0
        assert r.array(lambda x: (x.string(), x.i16())) == [("live", NON_EMPTY_GROUP),
                                                            ("nope", GROUP_ID_NOT_FOUND)]
        assert r.remaining() == 0


def test_describe_list_delete_groups_newest_versions(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    create_topic(b, "t")
    with kr.Conn(b.port) as c, kr.Conn(b.port) as c2:
        mid, _ = join_and_sync(c, "live")
        # an offsets-only group: Empty
        call(c2, OFFSET_COMMIT, 2, commit_body(2, "simple", "t", [(0, 1)]))
        body = kr.varray([kr.vstring("live", True), kr.vstring("gone", True)], True) + kr.i8(1) \
            + kr.vtags(True)
        r = call(c2, DESCRIBE_GROUPS, 5, body)
        assert r.i32() == 0

        def member(y):
            return (y.vstring(True), y.vstring(True), y.vstring(True), y.vstring(True),
                   y.vbytes(True), y.vbytes(True))

        def group(x):
            return (x.i16(), x.vstring(True), x.vstring(True), x.vstring(True), x.vstring(True),
                   x.vstructs(member, True), x.i32())
        live, gone = r.vstructs(group, True)
        done(r, True)
        ops = (1 << 3) | (1 << 6) | (1 << 8)
        assert live == (NONE, "live", "Stable", "consumer", "range",
                        [(mid, None, "sluice-it", "/127.0.0.1", subscription(["t"]), b"\x00\x01")],
                        ops)
        assert gone == (NONE, "gone", "Dead", "", "", [], ops)

        def listed(x):
            return (x.vstring(True), x.vstring(True), x.vstring(True), x.vstring(True))

        def list_groups(states, types):
            body = kr.varray([kr.vstring(s, True) for s in states], True) \
                + kr.varray([kr.vstring(t, True) for t in types], True) + kr.vtags(True)
            r = call(c2, LIST_GROUPS, 5, body)
            assert (r.i32(), r.i16()) == (0, NONE)
            got = sorted(r.vstructs(listed, True))
            done(r, True)
            return got
        assert list_groups([], []) == [("live", "consumer", "Stable", "classic"),
                                       ("simple", "", "Empty", "classic")]
        assert list_groups(["stable"], []) == [("live", "consumer", "Stable", "classic")]
        assert list_groups(["Empty", "Dead"], ["Classic"]) == [("simple", "", "Empty", "classic")]
        assert list_groups([], ["consumer"]) == []
        r = call(c2, DELETE_GROUPS, 2, kr.varray([kr.vstring("simple", True)], True)
                 + kr.vtags(True))
        assert r.i32() == 0

        def result(x):
            return (x.vstring(True), x.i16())
        assert r.vstructs(result, True) == [("simple", NONE)]
        done(r, True)
        assert list_groups([], []) == [("live", "consumer", "Stable", "classic")]


# ---- OffsetCommit, OffsetFetch ----------------------------------------------------
def test_offset_commit_v0_v1_and_fetch_v0(broker):
    create_topic(broker, "oc", partitions=2)
    with kr.Conn(broker.port) as c:
        r = call(c, OFFSET_COMMIT, 0, commit_body(0, "old", "oc", [(0, 5), (1, 9), (7, 1)]))
        assert parse_commit(r, 0) == [("oc", [(0, NONE), (1, NONE),
                                              (7, UNKNOWN_TOPIC_OR_PARTITION)])]
        r = call(c, OFFSET_FETCH, 0, fetch_body_v0("old", "oc", [0, 1, 2]))
        got = r.array(lambda x: (x.string(), x.array(
            lambda y: (y.i32(), y.i64(), y.string(), y.i16()))))
        assert got == [("oc", [(0, 5, "m0", NONE), (1, 9, "m1", NONE), (2, -1, "", NONE)])]
        assert r.remaining() == 0
        # v1: generation -1 and a client commit timestamp (a simple consumer)
        r = call(c, OFFSET_COMMIT, 1, commit_body(1, "old", "oc", [(0, 6)]))
        assert parse_commit(r, 1) == [("oc", [(0, NONE)])]
        # v1 from a member with a wrong generation of a group that does not exist
        r = call(c, OFFSET_COMMIT, 1, commit_body(1, "nobody", "oc", [(0, 6)], 3, "m"))
        assert parse_commit(r, 1) == [("oc", [(0, ILLEGAL_GENERATION)])]
        r = call(c, OFFSET_FETCH, 1, fetch_body_v0("old", "oc", [0]))
        assert r.array(lambda x: (x.string(), x.array(
            lambda y: (y.i32(), y.i64(), y.string(), y.i16())))) == [("oc", [(0, 6, "m0", NONE)])]


def test_offset_commit_v9_and_batched_offset_fetch_v9(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    create_topic(b, "oc", partitions=2)
    with kr.Conn(b.port) as c:
        mid, gen = join_and_sync(c, "member-group", topics=["oc"])
        r = call(c, OFFSET_COMMIT, 9, commit_body(9, "member-group", "oc", [(0, 11)], gen, mid))
        assert parse_commit(r, 9) == [("oc", [(0, NONE)])]
        r = call(c, OFFSET_COMMIT, 9, commit_body(9, "member-group", "oc", [(1, 1)], gen + 1, mid))
        assert parse_commit(r, 9) == [("oc", [(1, ILLEGAL_GENERATION)])]
        r = call(c, OFFSET_COMMIT, 8, commit_body(8, "simple", "oc", [(0, 3), (1, 4)]))
        assert parse_commit(r, 8) == [("oc", [(0, NONE), (1, NONE)])]
        # null topics: every committed offset; a list: those asked for
        r = call(c, OFFSET_FETCH, 9, fetch_body_v9([
            ("simple", None), ("member-group", [("oc", [0, 1])]), ("empty", None),
            ("simple", [])]))
        assert parse_fetch_v9(r) == [
            ("simple", [("oc", [(0, 3, 7, "m0", NONE), (1, 4, 7, "m1", NONE)])], NONE),
            ("member-group", [("oc", [(0, 11, 7, "m0", NONE), (1, -1, -1, "", NONE)])], NONE),
            ("empty", [], NONE),
            ("simple", [], NONE)]


@pytest.mark.parametrize("version", [2, 5, 6, 7])
def test_offset_fetch_null_topics_means_all(broker, version):
    """Below v8 a null topic list asks for every committed offset (v2-5
    classic, v6-7 compact null)."""
    create_topic(broker, "oa", partitions=2)
    with kr.Conn(broker.port) as c:
        call(c, OFFSET_COMMIT, 2, commit_body(2, "ga", "oa", [(0, 3), (1, 4)]))
        f = version >= 6
        body = kr.vstring("ga", f) + kr.varray(None, f)
        if version >= 7:
            body += kr.i8(1)                            # RequireStable
        r = call(c, OFFSET_FETCH, version, body + kr.vtags(f))
        if version >= 3:
            assert r.i32() == 0

        def part(x):
            return (x.i32(), x.i64(), x.i32() if version >= 5 else None, x.vstring(f), x.i16())

        def topic(x):
            return (x.vstring(f), x.vstructs(part, f))
        e = -1 if version >= 5 else None              # committed with v2: no epoch
        assert r.vstructs(topic, f) == [("oa", [(0, 3, e, "m0", NONE), (1, 4, e, "m1", NONE)])]
        assert r.i16() == NONE
        done(r, f)


# ---- OffsetDelete -------------------------------------------------------------------
def offset_delete(c, group, topics):
    body = kr.string(group) + kr.array([kr.string(t) + kr.array([kr.i32(p) for p in ps])
                                        for t, ps in topics])
    r = call(c, OFFSET_DELETE, 0, body)
    out = (r.i16(), r.i32(), r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i16())))))
    assert r.remaining() == 0
    return out


def test_offset_delete_v0(start_broker):
    b = start_broker(GROUP_OVERRIDES)
    create_topic(b, "od", partitions=2)
    create_topic(b, "other", partitions=1)
    with kr.Conn(b.port) as c, kr.Conn(b.port) as c2:
        call(c, OFFSET_COMMIT, 2, commit_body(2, "idle", "od", [(0, 3), (1, 4)]))
        assert offset_delete(c, "idle", [("od", [0, 5]), ("nope", [0])]) == (NONE, 0, [
            ("od", [(0, NONE), (5, UNKNOWN_TOPIC_OR_PARTITION)]),
            ("nope", [(0, UNKNOWN_TOPIC_OR_PARTITION)])])
        r = call(c, OFFSET_FETCH, 1, fetch_body_v0("idle", "od", [0, 1]))
        assert r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.string(),
                                                                  y.i16())))) == \
            [("od", [(0, -1, "", NONE), (1, 4, "m1", NONE)])]
        assert offset_delete(c, "no-such-group", [("od", [0])]) == (GROUP_ID_NOT_FOUND, 0, [])
        # an active consumer group keeps the offsets of topics it subscribes to
        mid, gen = join_and_sync(c2, "active", topics=["od"])
        r = call(c2, OFFSET_COMMIT, 2, commit_body(2, "active", "od", [(0, 8)], gen, mid))
        r = call(c2, OFFSET_COMMIT, 2, commit_body(2, "active", "other", [(0, 9)], gen, mid))
        assert offset_delete(c, "active", [("od", [0]), ("other", [0])]) == (NONE, 0, [
            ("od", [(0, GROUP_SUBSCRIBED_TO_TOPIC)]), ("other", [(0, NONE)])])
        r = call(c, OFFSET_FETCH, 1, fetch_body_v0("active", "od", [0]))
        assert r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.string(),
                                                                  y.i16())))) == \
            [("od", [(0, 8, "m0", NONE)])]


def test_api_versions_advertises_the_group_ranges(broker):
    with kr.Conn(broker.port) as c:
        err, apis = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0))
    assert err == 0
    want = {OFFSET_COMMIT: (0, 9), OFFSET_FETCH: (0, 9), FIND_COORDINATOR: (0, 6),
            JOIN: (0, 9), HEARTBEAT: (0, 4), LEAVE: (0, 5), SYNC: (0, 5),
            DESCRIBE_GROUPS: (0, 5), LIST_GROUPS: (0, 5), DELETE_GROUPS: (0, 2),
            OFFSET_DELETE: (0, 0)}
    assert {k: apis.get(k) for k in want} == want
