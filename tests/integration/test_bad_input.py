"""Bad input on the wire gets a Kafka error or a closed connection, never a
crash, and after every case a normal client still works (DESIGN.md,
"Guarantees")."""
import random
import struct

import pytest

import kafka_raw as kr
from support import (assert_serves, ck_producer, consume, create_topic,
                     produce_ok, topic_name)

UNSUPPORTED_VERSION = 35
INVALID_TOPIC_EXCEPTION = 17
CORRUPT_MESSAGE = 2
UNKNOWN_TOPIC_OR_PARTITION = 3


def assert_closed_without_answer(c, what, timeout=5.0):
    try:
        got = c.wait_closed(timeout)
    except kr.Timeout as e:
        pytest.fail("%s: the broker kept the connection open (%s)" % (what, e))
    assert got == b"", "%s: the broker answered %r before closing" % (what, got[:64])


def test_frame_over_socket_request_max_bytes_closes_the_connection(broker):
    with kr.Conn(broker.port) as c:
        # a 2 GB length prefix, then the start of a header
        c.send_raw(struct.pack(">i", 0x7FFFFFF0) + kr.request_header(kr.API_METADATA, 1, 1))
        assert_closed_without_answer(c, "2 GB frame")
    assert_serves(broker, "a 2 GB length prefix")


def test_frame_just_over_a_configured_limit_closes_the_connection(start_broker):
    b = start_broker({"socket.request.max.bytes": str(1024 * 1024)})
    with kr.Conn(b.port) as c:
        c.send_raw(struct.pack(">i", 1024 * 1024 + 1) + kr.request_header(kr.API_METADATA, 1, 1))
        assert_closed_without_answer(c, "frame of socket.request.max.bytes + 1")
    assert_serves(b, "an oversized frame")


@pytest.mark.parametrize("length", [-1, 0, 3], ids=["negative", "zero", "shorter-than-header"])
def test_frame_with_impossible_length_closes_the_connection(broker, length):
    with kr.Conn(broker.port) as c:
        c.send_raw(struct.pack(">i", length) + b"\x00" * max(length, 0))
        assert_closed_without_answer(c, "length prefix %d" % length)
    assert_serves(broker, "length prefix %d" % length)


@pytest.mark.parametrize("api_key", [999, 0x7FFF, -5, 67])
def test_unknown_api_key_closes_the_connection(broker, api_key):
    with kr.Conn(broker.port) as c:
        c.send(api_key, 0, b"")
        assert_closed_without_answer(c, "API key %d" % api_key)
    assert_serves(broker, "unknown API key %d" % api_key)


def test_unsupported_version_of_another_api_closes_the_connection(broker):
    with kr.Conn(broker.port) as c:
        c.send(kr.API_METADATA, 99, kr.metadata_body(1, []), flexible=True)
        assert_closed_without_answer(c, "Metadata v99")
    assert_serves(broker, "Metadata v99")


def test_api_versions_v0_lists_the_supported_apis(broker):
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_API_VERSIONS, 0)
        err, apis = kr.parse_api_versions_v0(r)
    assert err == 0
    assert apis[kr.API_API_VERSIONS][0] == 0 and apis[kr.API_API_VERSIONS][1] >= 2
    # hard lower bounds (protocol/README.md §8): clients break without them
    assert apis[kr.API_PRODUCE][0] == 0 and apis[kr.API_PRODUCE][1] >= 7, apis[kr.API_PRODUCE]
    assert apis[kr.API_FETCH][0] <= 4 and apis[kr.API_FETCH][1] >= 10, apis[kr.API_FETCH]
    assert apis[kr.API_METADATA][0] == 0 and apis[kr.API_METADATA][1] >= 4
    assert apis[kr.API_LIST_OFFSETS][0] <= 1 <= apis[kr.API_LIST_OFFSETS][1]
    assert_serves(broker, "ApiVersions v0")


def test_api_versions_v3_answers_with_a_compact_body(broker):
    with kr.Conn(broker.port) as c:
        corr = c.send(kr.API_API_VERSIONS, 3, kr.api_versions_v3_body())
        got, r = c.recv_response()
    assert got == corr
    # The broker serves v3 (protocol/README.md §7.3): an UNSUPPORTED_VERSION
    # in a v0 body here would cost librdkafka a round trip per connection.
    assert r.i16() == 0
    n = r.uvarint() - 1
    apis = {}
    for _ in range(n):
        k, lo, hi = r.i16(), r.i16(), r.i16()
        assert r.uvarint() == 0  # per-entry tagged fields
        apis[k] = (lo, hi)
    r.i32()  # throttle
    assert apis.get(kr.API_API_VERSIONS) == (0, 4)


def test_api_versions_v99_is_unsupported_version_in_a_v0_body(broker):
    with kr.Conn(broker.port) as c:
        corr = c.send(kr.API_API_VERSIONS, 99, kr.api_versions_v3_body())
        got, r = c.recv_response()
        assert got == corr
        err, apis = kr.parse_api_versions_v0(r)
        assert err == UNSUPPORTED_VERSION
        assert kr.API_API_VERSIONS in apis, "the error body must list ApiVersions' range: %s" % apis
        assert apis[kr.API_API_VERSIONS][1] >= 0
        # the connection stays usable: the client retries with v0 on it
        r = c.request(kr.API_API_VERSIONS, 0)
        assert kr.parse_api_versions_v0(r)[0] == 0
    assert_serves(broker, "ApiVersions v99")


def test_metadata_with_a_huge_array_count_and_no_bytes_closes_the_connection(broker):
    with kr.Conn(broker.port) as c:
        c.send(kr.API_METADATA, 1, kr.i32(1000000))
        assert_closed_without_answer(c, "Metadata v1 claiming 1000000 topics")
    assert_serves(broker, "a truncated Metadata request")


def test_truncated_produce_closes_the_connection(broker):
    t = topic_name("trunc")
    create_topic(broker, t, 1)
    body = kr.produce_v3_body(t, 0, kr.README_BATCH)
    with kr.Conn(broker.port) as c:
        c.send(kr.API_PRODUCE, 3, body[:len(body) - 30])
        assert_closed_without_answer(c, "Produce v3 cut short")
    # nothing of it was stored: the next message gets offset 0
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"after"}])
    assert msgs[0].offset() == 0
    assert_serves(broker, "a truncated Produce request")


def test_http_request_closes_the_connection(broker):
    with kr.Conn(broker.port) as c:
        c.send_raw(b"GET / HTTP/1.1\r\nHost: localhost\r\n\r\n")
        assert_closed_without_answer(c, "an HTTP request")
    assert_serves(broker, "an HTTP request")


def test_random_garbage_never_kills_the_broker(broker):
    """Frames with real API keys and versions but random bodies: the broker
    may answer (if the bytes happen to parse) or close; it must not die."""
    rng = random.Random(20240601)
    apis = [(0, 3), (0, 7), (1, 4), (1, 11), (2, 1), (3, 0), (3, 4), (18, 3), (19, 3), (32, 1)]
    for i in range(60):
        key, ver = apis[i % len(apis)]
        body = bytes(rng.randrange(256) for _ in range(rng.randrange(0, 200)))
        with kr.Conn(broker.port) as c:
            try:
                c.send(key, ver, body, flexible=(key == 18 and ver >= 3))
                try:
                    c.recv_frame(timeout=2)
                except (kr.Closed, kr.Timeout):
                    pass
            except OSError:
                pass
        broker.assert_alive()
    # plus raw bytes with no framing at all
    for i in range(10):
        with kr.Conn(broker.port) as c:
            try:
                c.send_raw(bytes(rng.randrange(256) for _ in range(rng.randrange(1, 5000))))
                c.wait_closed(0.3)
            except (kr.Timeout, OSError):
                pass
        broker.assert_alive()
    assert_serves(broker, "random garbage")


@pytest.mark.parametrize("version", [1, 4])
def test_metadata_auto_create_with_invalid_topic_name_is_invalid_topic_exception(broker, version):
    for bad in ("bad name", "..", "x" * 250, "sl/ash"):
        with kr.Conn(broker.port) as c:
            r = c.request(kr.API_METADATA, version, kr.metadata_body(version, [bad], allow_auto_create=True))
            md = kr.parse_metadata(r, version)
        assert md["topics"].get(bad, (None,))[0] == INVALID_TOPIC_EXCEPTION, \
            "Metadata v%d for %r: %s" % (version, bad, md["topics"])
    assert_serves(broker, "Metadata for invalid topic names")


def test_produce_with_bad_crc_is_corrupt_message_and_nothing_is_stored(broker):
    t = topic_name("crc")
    create_topic(broker, t, 1)
    bad = bytearray(kr.README_BATCH)
    bad[-1] ^= 0x01  # last header value byte: covered by the CRC
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, bytes(bad)))
        (res,) = kr.parse_produce_v3(r)
    assert res[:3] == (t, 0, CORRUPT_MESSAGE), res
    # a good batch still goes in at offset 0
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, kr.README_BATCH))
        (res,) = kr.parse_produce_v3(r)
    assert res[:4] == (t, 0, 0, 0), res
    (m,) = consume(broker, t, [0], 1)
    assert (m.key(), m.value(), m.headers(), m.timestamp()[1]) == (b"k", b"hi", [("h", b"v")], 1700000000000)
    assert_serves(broker, "a bad CRC")


def test_produce_with_bad_magic_or_counts_is_rejected(broker):
    t = topic_name("magic")
    create_topic(broker, t, 1)
    good = kr.record_batch([(b"k", b"v", [], 0), (b"k2", b"v2", [], 1)], 1700000000000)
    cases = {}
    b1 = bytearray(good)
    b1[16] = 1                            # magic 1 in a v2 layout
    cases["magic 1"] = bytes(b1)
    # lastOffsetDelta says 5 records, count says 2 (CRC recomputed to match)
    b2 = bytearray(good)
    b2[23:27] = struct.pack(">i", 5)
    b2[17:21] = struct.pack(">I", kr.crc32c(bytes(b2[21:])))
    cases["lastOffsetDelta mismatch"] = bytes(b2)
    b3 = bytearray(good)
    b3[8:12] = struct.pack(">i", len(good) - 12 + 40)   # batchLength past the end
    cases["batchLength too long"] = bytes(b3)
    # attribute bit 6 (delete horizon) is set only by compaction, never by a client
    b4 = bytearray(good)
    b4[22] |= 0x40
    b4[17:21] = struct.pack(">I", kr.crc32c(bytes(b4[21:])))
    cases["delete-horizon attribute"] = bytes(b4)
    # control batches (transaction markers) are the broker's too
    b5 = bytearray(good)
    b5[22] |= 0x20
    b5[17:21] = struct.pack(">I", kr.crc32c(bytes(b5[21:])))
    cases["control attribute"] = bytes(b5)
    for what, batch in cases.items():
        with kr.Conn(broker.port) as c:
            try:
                r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch))
                (res,) = kr.parse_produce_v3(r)
                assert res[2] != 0, "%s was accepted: %s" % (what, res)
            except kr.Closed:
                pass  # closing is an acceptable answer to a malformed request
        broker.assert_alive()
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, good))
        (res,) = kr.parse_produce_v3(r)
    assert res[2:4] == (0, 0), "after rejected batches a good one lands at offset 0: %s" % (res,)
    got = consume(broker, t, [0], 2)
    assert [(m.offset(), m.key(), m.value()) for m in got] == [(0, b"k", b"v"), (1, b"k2", b"v2")]
    assert_serves(broker, "malformed batches")


def test_produce_to_unknown_topic_is_unknown_topic_or_partition(start_broker):
    b = start_broker({"auto.create.topics.enable": "false"})
    with kr.Conn(b.port) as c:
        r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body("no-such-topic", 0, kr.README_BATCH))
        (res,) = kr.parse_produce_v3(r)
    assert res[:3] == ("no-such-topic", 0, UNKNOWN_TOPIC_OR_PARTITION), res
    assert_serves(b, "Produce to an unknown topic")


def test_produce_with_invalid_acks_is_invalid_required_acks(broker):
    t = topic_name("acks")
    create_topic(broker, t, 1)
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, kr.README_BATCH, acks=2))
        (res,) = kr.parse_produce_v3(r)
    assert res[:3] == (t, 0, 21), "acks=2: %s (want INVALID_REQUIRED_ACKS 21)" % (res,)
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"after"}])
    assert msgs[0].offset() == 0, "the acks=2 batch was stored"
    assert_serves(broker, "acks=2")


def test_produce_v2_with_a_v2_batch_is_stored(broker):
    """Produce v0-v2 carry magic 0/1 message sets, but Kafka does not check
    the magic below v3 (clients that sent the wrong one kept working), so
    a batch v2 in a Produce v2 is stored as it is."""
    t = topic_name("v2")
    create_topic(broker, t, 1)
    body = kr.i16(-1) + kr.i32(10000) + kr.array([kr.string(t) + kr.array([kr.i32(0) + kr.nbytes(kr.README_BATCH)])])
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_PRODUCE, 2, body)
        assert r.i32() == 1 and r.string() == t and r.i32() == 1
        assert (r.i32(), r.i16(), r.i64(), r.i64()) == (0, 0, 0, -1)
        assert r.i32() == 0 and r.remaining() == 0    # ThrottleTimeMs
    msgs = produce_ok(ck_producer(broker), t, [{"value": b"after"}])
    assert msgs[0].offset() == 1, "the Produce v2 batch was stored at 0"
    assert_serves(broker, "Produce v2")


# Group requests with a null where the schema allows none (the generated
# decoder is Kafka's: such a request fails to parse and the connection
# closes), each beside the same request without the null, which is answered.
_G = kr.string("nulls-group")
GROUP_NULLS = {
    "JoinGroup v5, null protocol metadata": (11, 5, lambda x: (
        _G + kr.i32(6000) + kr.i32(6000) + kr.string("") + kr.string(None) +
        kr.string("consumer") + kr.array([kr.string("range") + kr.nbytes(x)])), b"m"),
    "SyncGroup v3, null assignments": (14, 3, lambda x: (
        _G + kr.i32(1) + kr.string("m") + kr.string(None) + kr.array(x)), []),
    "Heartbeat v3, null group id": (12, 3, lambda x: (
        kr.string(x) + kr.i32(1) + kr.string("m") + kr.string(None)), "nulls-group"),
    "LeaveGroup v1, null member id": (13, 1, lambda x: _G + kr.string(x), "m"),
    "OffsetCommit v7, null topics": (8, 7, lambda x: (
        _G + kr.i32(-1) + kr.string("") + kr.string(None) + kr.array(x)), []),
    "OffsetFetch v1, null topics (all topics only from v2)": (9, 1, lambda x: (
        _G + kr.array(x)), []),
    "DescribeGroups v4, null groups": (15, 4, lambda x: kr.array(x) + kr.i8(0), []),
    "DeleteGroups v1, null group name": (42, 1, lambda x: kr.array([kr.string(x)]), "g"),
    "FindCoordinator v2, null key": (10, 2, lambda x: kr.string(x) + kr.i8(0), "g"),
}


def test_group_requests_with_a_forbidden_null_close_the_connection(broker):
    for what, (api, v, body, valid) in GROUP_NULLS.items():
        with kr.Conn(broker.port) as c:
            c.request(api, v, body(valid))            # answered
        with kr.Conn(broker.port) as c:
            c.send(api, v, body(None))
            assert_closed_without_answer(c, what)
    assert_serves(broker, "group requests with forbidden nulls")
