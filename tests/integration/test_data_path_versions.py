"""Produce, Fetch, ListOffsets, Metadata and ApiVersions at the lowest and
the highest version served, through raw frames (kafka_raw's own writer):
every field of each answer is checked, including topic ids (Metadata v10+,
Fetch v13+) and Kafka's answer to an unknown topic id."""
import struct
import time
import zlib

import kafka_raw as kr
from support import assert_serves, create_topic, topic_name

UNKNOWN_TOPIC_OR_PARTITION = 3
UNKNOWN_TOPIC_ID = 100
INVALID_REQUEST = 42

NEWEST = {0: 11, 1: 17, 2: 10, 3: 12, 18: 4}


def message_v0(offset, key, value):
    """One magic 0 message set entry."""
    body = kr.i8(0) + kr.i8(0) + kr.nbytes(key) + kr.nbytes(value)
    msg = struct.pack(">I", zlib.crc32(body)) + body
    return kr.i64(offset) + kr.i32(len(msg)) + msg


def metadata_v12(c, topics):
    """topics: [(topic_id or None, name or None)] or None (all).  Returns
    the parsed body, every field."""
    body = kr.carray(None if topics is None else
                     [(tid or bytes(16)) + kr.cstring(n) + kr.tags() for tid, n in topics])
    body += kr.i8(0) + kr.i8(0) + kr.tags()       # AllowAutoTopicCreation, IncludeTopicAuthorizedOperations
    r = c.request_flex(kr.API_METADATA, 12, body)
    out = {"throttle": r.i32()}
    out["brokers"] = r.carray(lambda x: (x.i32(), x.cstring(), x.i32(), x.cstring(), x.tags()))
    out["cluster_id"] = r.cstring()
    out["controller"] = r.i32()

    def part(x):
        return (x.i16(), x.i32(), x.i32(), x.i32(), x.carray(lambda y: y.i32()),
                x.carray(lambda y: y.i32()), x.carray(lambda y: y.i32()), x.tags())

    def topic(x):
        return {"error": x.i16(), "name": x.cstring(), "id": x.uuid(), "internal": x.i8(),
                "partitions": x.carray(part), "ops": x.i32(), "tags": x.tags()}

    out["topics"] = r.carray(topic)
    assert r.tags() == {} and r.remaining() == 0
    return out


def test_api_versions_v4_advertises_the_data_path_ranges(broker):
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_API_VERSIONS, 4, kr.api_versions_v3_body(), )
        assert r.i16() == 0
        apis = r.carray(lambda x: (x.i16(), x.i16(), x.i16(), x.tags()))
        assert r.i32() == 0                                    # ThrottleTimeMs
        assert r.tags() == {} and r.remaining() == 0
        got = {k: (lo, hi) for k, lo, hi, t in apis}
        assert all(t == {} for *_, t in apis)
        for key, hi in NEWEST.items():
            assert got[key] == (0, hi), (key, got[key])
        # v0 (the lowest) lists the same table in its classic layout
        err, v0 = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0))
        assert err == 0 and v0 == got


def test_version_above_the_range_closes_with_a_log_line(broker):
    with kr.Conn(broker.port) as c:
        c.send(kr.API_FETCH, 18, b"\x00" * 40, flexible=True)
        assert c.wait_closed() == b""
    deadline = time.monotonic() + 5
    while "unsupported Fetch version 18" not in broker.log_text() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert "unsupported Fetch version 18" in broker.log_text()
    assert_serves(broker, "Fetch v18")


def test_produce_v0_and_fetch_v0_magic_0(broker):
    t = topic_name("v0")
    create_topic(broker, t, 1)
    msgs = [(b"k0", b"first"), (None, b"second"), (b"k2", None), (b"", b"")]
    mset = b"".join(message_v0(i, k, v) for i, (k, v) in enumerate(msgs))
    with kr.Conn(broker.port) as c:
        for base in (0, 4):
            body = kr.i16(1) + kr.i32(10000) + kr.array(
                [kr.string(t) + kr.array([kr.i32(0) + kr.nbytes(mset)])])
            r = c.request(kr.API_PRODUCE, 0, body)
            assert r.i32() == 1 and r.string() == t and r.i32() == 1
            assert (r.i32(), r.i16(), r.i64()) == (0, 0, base)  # Index, ErrorCode, BaseOffset
            assert r.remaining() == 0                           # v0: no ThrottleTimeMs
        # a bad CRC is CORRUPT_MESSAGE, nothing stored
        bad = bytearray(message_v0(0, b"k", b"v"))
        bad[-1] ^= 1
        r = c.request(kr.API_PRODUCE, 0, kr.i16(1) + kr.i32(10000) + kr.array(
            [kr.string(t) + kr.array([kr.i32(0) + kr.nbytes(bytes(bad))])]))
        r.i32(), r.string(), r.i32()
        assert (r.i32(), r.i16(), r.i64()) == (0, 2, -1)

        # Fetch v0 from offset 1: magic 0 messages 1..7, byte for byte.
        body = kr.i32(-1) + kr.i32(0) + kr.i32(1) + kr.array(
            [kr.string(t) + kr.array([kr.i32(0) + kr.i64(1) + kr.i32(1 << 20)])])
        r = c.request(kr.API_FETCH, 0, body)
        assert r.i32() == 1 and r.string() == t and r.i32() == 1
        assert (r.i32(), r.i16(), r.i64()) == (0, 0, 8)        # index, error, HW
        records = r.nbytes()
        assert r.remaining() == 0
        want = b"".join(message_v0(o, *msgs[o % 4]) for o in range(1, 8))
        assert records == want
        # unknown topic
        body = kr.i32(-1) + kr.i32(0) + kr.i32(1) + kr.array(
            [kr.string("no-such-topic") + kr.array([kr.i32(0) + kr.i64(0) + kr.i32(1 << 20)])])
        r = c.request(kr.API_FETCH, 0, body)
        r.i32(), r.string(), r.i32()
        assert (r.i32(), r.i16(), r.i64(), r.nbytes()) == (0, UNKNOWN_TOPIC_OR_PARTITION, -1, b"")


def test_produce_v11_fetch_v17_by_topic_id(broker):
    t = topic_name("v17")
    create_topic(broker, t, 1)
    now = int(time.time() * 1000)
    batch = kr.record_batch([(b"k", b"newest", [("h", b"v")], 0), (None, b"two", [], 5)], now)
    with kr.Conn(broker.port) as c:
        body = kr.cstring(None) + kr.i16(-1) + kr.i32(10000) + kr.carray(
            [kr.cstring(t) + kr.carray([kr.i32(0) + kr.cbytes(batch) + kr.tags()]) + kr.tags()]) + kr.tags()
        r = c.request_flex(kr.API_PRODUCE, 11, body)
        (tr,) = r.carray(lambda x: (x.cstring(), x.carray(lambda y: (
            y.i32(), y.i16(), y.i64(), y.i64(), y.i64(),
            y.carray(lambda z: (z.i32(), z.cstring(), z.tags())), y.cstring(), y.tags())), x.tags()))
        assert tr == (t, [(0, 0, 0, -1, 0, [], None, {})], {})
        assert r.i32() == 0 and r.tags() == {} and r.remaining() == 0

        md = metadata_v12(c, [(None, t)])
        (mt,) = md["topics"]
        tid = mt["id"]
        assert tid != bytes(16) and mt["name"] == t and mt["error"] == 0
        assert md["brokers"] == [(broker.broker_id, "127.0.0.1", broker.port, None, {})]
        assert md["controller"] == broker.broker_id and md["cluster_id"]
        # LeaderEpoch: the partition state's (standalone: 0, never re-elected)
        assert mt["partitions"] == [(0, 0, broker.broker_id, 0, [broker.broker_id],
                                     [broker.broker_id], [], {})]
        assert mt["internal"] == 0 and mt["ops"] == -2147483648 and mt["tags"] == {}
        # by id alone, and an id no topic has
        by_id = metadata_v12(c, [(tid, None), (b"\x01" * 16, None)])["topics"]
        assert by_id[0]["name"] == t and by_id[0]["id"] == tid and by_id[0]["error"] == 0
        assert (by_id[1]["error"], by_id[1]["name"], by_id[1]["id"], by_id[1]["partitions"]) == \
            (UNKNOWN_TOPIC_ID, None, b"\x01" * 16, [])

        def fetch17(topic_id, offset=0):
            part = (kr.i32(0) + kr.i32(-1) + kr.i64(offset) + kr.i32(-1) + kr.i64(-1) +
                    kr.i32(1 << 20) + kr.tags())
            body = (kr.i32(0) + kr.i32(1) + kr.i32(1 << 20) + kr.i8(0) + kr.i32(0) + kr.i32(-1) +
                    kr.carray([topic_id + kr.carray([part]) + kr.tags()]) +
                    kr.carray([]) + kr.cstring("") +
                    kr.tags([(0, kr.cstring("some-cluster"))]))  # ClusterId: not compared
            r = c.request_flex(kr.API_FETCH, 17, body)
            assert r.i32() == 0                                   # ThrottleTimeMs
            assert (r.i16(), r.i32()) == (0, 0)                   # ErrorCode, SessionId
            topics = r.carray(lambda x: (x.uuid(), x.carray(lambda y: (
                y.i32(), y.i16(), y.i64(), y.i64(), y.i64(),
                y.carray(lambda z: (z.i64(), z.i64())), y.i32(), y.cbytes(), y.tags())), x.tags()))
            assert r.tags() == {} and r.remaining() == 0          # no NodeEndpoints
            return topics

        (ft,) = fetch17(tid)
        # TopicId, [index, error, HW, LSO, log start, aborted, preferred read replica, records, tags]
        records = ft[1][0][7]
        assert ft == (tid, [(0, 0, 2, 2, 0, [], -1, records, {})], {})
        # the stored batch: BaseOffset 0 and the broker's leader epoch
        # written in, every byte under the CRC as produced
        assert len(records) == len(batch) and records[:12] == batch[:12]
        assert records[16:] == batch[16:]
        (ft,) = fetch17(b"\x02" * 16)
        assert ft == (b"\x02" * 16, [(0, UNKNOWN_TOPIC_ID, -1, -1, -1, [], -1, b"", {})], {})


def test_list_offsets_v0_and_v10(broker):
    t = topic_name("lo")
    create_topic(broker, t, 1)
    now = int(time.time() * 1000)
    with kr.Conn(broker.port) as c:
        for i, ts in enumerate((now - 3000, now - 1000, now - 2000)):
            b = kr.record_batch([(b"k", b"m%d" % i, [], 0)], ts)
            (res,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, b)))
            assert res[2] == 0 and res[3] == i
        # v0: OldStyleOffsets, at most MaxNumOffsets (one)
        for when, want in ((-1, [3]), (-2, [0])):
            body = kr.i32(-1) + kr.array([kr.string(t) + kr.array(
                [kr.i32(0) + kr.i64(when) + kr.i32(5)])])
            r = c.request(kr.API_LIST_OFFSETS, 0, body)
            assert r.i32() == 1 and r.string() == t and r.i32() == 1
            assert (r.i32(), r.i16(), r.array(lambda x: x.i64())) == (0, 0, want)
            assert r.remaining() == 0
        # v10: latest, earliest, max timestamp, earliest local, pending upload, by time
        # (timestamp, offset, leader epoch): LATEST the leader's epoch, the
        # others the epoch that wrote the offset (0 here), -1 with no offset
        cases = [(-1, (-1, 3, 0)), (-2, (-1, 0, 0)), (-3, (now - 1000, 1, 0)), (-4, (-1, 0, 0)),
                 (-5, (-1, -1, -1)), (now - 2500, (now - 1000, 1, 0)), (now + 60000, (-1, -1, -1))]
        parts = [kr.i32(0) + kr.i32(-1) + kr.i64(when) + kr.tags() for when, _ in cases]
        body = kr.i32(-1) + kr.i8(0) + kr.carray([kr.cstring(t) + kr.carray(parts) + kr.tags()]) + \
            kr.i32(1000) + kr.tags()
        r = c.request_flex(kr.API_LIST_OFFSETS, 10, body)
        assert r.i32() == 0
        (lt,) = r.carray(lambda x: (x.cstring(), x.carray(lambda y: (
            y.i32(), y.i16(), y.i64(), y.i64(), y.i32(), y.tags())), x.tags()))
        assert r.tags() == {} and r.remaining() == 0
        assert lt[0] == t and lt[2] == {}
        assert lt[1] == [(0, 0, ts, off, epoch, {}) for _, (ts, off, epoch) in cases]
        # an epoch newer than the leader's
        body = kr.i32(-1) + kr.i8(0) + kr.carray([kr.cstring(t) + kr.carray(
            [kr.i32(0) + kr.i32(99) + kr.i64(-1) + kr.tags()]) + kr.tags()]) + kr.i32(0) + kr.tags()
        r = c.request_flex(kr.API_LIST_OFFSETS, 10, body)
        r.i32()
        (lt,) = r.carray(lambda x: (x.cstring(), x.carray(lambda y: (
            y.i32(), y.i16(), y.i64(), y.i64(), y.i32(), y.tags())), x.tags()))
        assert lt[1] == [(0, 75, -1, -1, -1, {})]                 # UNKNOWN_LEADER_EPOCH


def test_metadata_v0_and_v12_all_topics(broker):
    t = topic_name("md")
    create_topic(broker, t, 2)
    with kr.Conn(broker.port) as c:
        md0 = kr.parse_metadata(c.request(kr.API_METADATA, 0, kr.metadata_body(0, [])), 0)
        assert md0["brokers"] == [(broker.broker_id, "127.0.0.1", broker.port, None)]
        err, parts = md0["topics"][t]
        assert err == 0 and sorted(p[1] for p in parts) == [0, 1]
        assert all(p[0] == 0 and p[2] == broker.broker_id for p in parts)
        md = metadata_v12(c, None)
        mine = [x for x in md["topics"] if x["name"] == t]
        assert len(mine) == 1 and mine[0]["id"] != bytes(16) and len(mine[0]["partitions"]) == 2
        # below v12 a topic id in the request is INVALID_REQUEST
        body = kr.carray([b"\x01" * 16 + kr.cstring(t) + kr.tags()]) + kr.i8(0) + kr.i8(0) + \
            kr.i8(0) + kr.tags()
        r = c.request_flex(kr.API_METADATA, 10, body)
        r.i32()
        r.carray(lambda x: (x.i32(), x.cstring(), x.i32(), x.cstring(), x.tags()))
        r.cstring(), r.i32()
        (tp,) = r.carray(lambda x: (x.i16(), x.cstring(), x.uuid(), x.i8(),
                                    x.carray(lambda y: None), x.i32(), x.tags()))
        assert tp[0] == INVALID_REQUEST and tp[1] == t
