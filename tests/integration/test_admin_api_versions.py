"""The admin APIs at the lowest and the highest version Kafka defines, in
raw frames written here, every field of each answer checked:
CreateTopics v0/v7 (counts, configs and topic id from v5/v7), DeleteTopics
v0/v6 (by topic id), CreatePartitions v0/v3, DescribeConfigs v0/v4,
AlterConfigs v0/v2, IncrementalAlterConfigs v0/v1, DeleteRecords v0/v2,
InitProducerId v0/v5."""
import time

import kafka_raw as kr
from support import ck_producer, create_topic, produce_ok

CREATE_TOPICS, DELETE_TOPICS, DELETE_RECORDS, INIT_PID = 19, 20, 21, 22
DESCRIBE_CONFIGS, ALTER_CONFIGS, CREATE_PARTITIONS, INCREMENTAL_ALTER = 32, 33, 37, 44
FIRST_FLEX = {CREATE_TOPICS: 5, DELETE_TOPICS: 4, DELETE_RECORDS: 2, INIT_PID: 2,
              DESCRIBE_CONFIGS: 4, ALTER_CONFIGS: 2, CREATE_PARTITIONS: 2,
              INCREMENTAL_ALTER: 1}
NONE, UNKNOWN_TOPIC_OR_PARTITION, TOPIC_ALREADY_EXISTS, UNKNOWN_TOPIC_ID = 0, 3, 36, 100
INVALID_REQUEST = 42
RT_TOPIC = 2
ZERO_ID = bytes(16)


def call(c, api, v, body):
    return c.request_v(api, v, body, FIRST_FLEX[api])


def done(r, flex):
    r.vtags(flex)
    assert r.remaining() == 0


def create_body(v, topics, validate_only=False):
    """topics: [(name, partitions, rf, {config: value})]."""
    f = v >= 5

    def topic(t):
        name, parts, rf, cfg = t
        return (kr.vstring(name, f) + kr.i32(parts) + kr.i16(rf) + kr.varray([], f)
                + kr.varray(sorted(cfg.items()), f,
                            lambda kv: kr.vstring(kv[0], f) + kr.vstring(kv[1], f) + kr.vtags(f))
                + kr.vtags(f))
    b = kr.varray(topics, f, topic) + kr.i32(10000)
    if v >= 1:
        b += kr.i8(1 if validate_only else 0)
    return b + kr.vtags(f)


def parse_create_v7(r):
    assert r.i32() == 0

    def config(x):
        return (x.vstring(True), x.vstring(True), x.i8(), x.i8(), x.i8())

    def topic(x):
        return {"name": x.vstring(True), "id": x.uuid(), "error": x.i16(),
               "message": x.vstring(True), "partitions": x.i32(), "rf": x.i16(),
               "configs": x.vstructs(config, True)}
    topics = r.vstructs(topic, True)
    done(r, True)
    return topics


def test_create_topics_v0_and_v7(broker):
    with kr.Conn(broker.port) as c:
        r = call(c, CREATE_TOPICS, 0, create_body(0, [("ct0", 2, 1, {}), ("ct0", 1, 1, {})]))
        assert r.array(lambda x: (x.string(), x.i16())) == [("ct0", INVALID_REQUEST),
                                                            ("ct0", INVALID_REQUEST)]
        assert r.remaining() == 0
        r = call(c, CREATE_TOPICS, 0, create_body(0, [("ct0", 2, 1, {})]))
        assert r.array(lambda x: (x.string(), x.i16())) == [("ct0", NONE)]
        r = call(c, CREATE_TOPICS, 7, create_body(7, [("ct7", 3, 1, {"retention.ms": "12345"}),
                                                      ("ct0", 1, 1, {})]))
        made, dup = parse_create_v7(r)
        assert made["name"] == "ct7" and made["id"] != ZERO_ID
        assert (made["error"], made["message"], made["partitions"], made["rf"]) == \
            (NONE, None, 3, 1)
        configs = {n: (v, ro, src, sens) for n, v, ro, src, sens in made["configs"]}
        assert configs["retention.ms"] == ("12345", 0, 1, 0)          # DYNAMIC_TOPIC_CONFIG
        assert configs["cleanup.policy"] == ("delete", 0, 5, 0)       # DEFAULT_CONFIG
        assert dup["name"] == "ct0" and dup["id"] == ZERO_ID
        assert (dup["error"], dup["partitions"], dup["rf"], dup["configs"]) == \
            (TOPIC_ALREADY_EXISTS, -1, -1, [])
        assert dup["message"] == "Topic 'ct0' already exists."
        # validateOnly: what would be made, nothing made
        r = call(c, CREATE_TOPICS, 7, create_body(7, [("ctv", -1, -1, {})], validate_only=True))
        (v,) = parse_create_v7(r)
        assert (v["name"], v["id"], v["error"], v["partitions"], v["rf"], v["configs"]) == \
            ("ctv", ZERO_ID, NONE, 1, 1, [])


def delete_v6(c, entries):
    body = kr.varray(entries, True, lambda e: kr.vstring(e[0], True) + e[1] + kr.vtags(True)) \
        + kr.i32(10000) + kr.vtags(True)
    r = call(c, DELETE_TOPICS, 6, body)
    assert r.i32() == 0

    def res(x):
        return (x.vstring(True), x.uuid(), x.i16(), x.vstring(True))
    got = r.vstructs(res, True)
    done(r, True)
    return got


def test_delete_topics_v0_and_v6_by_id(broker):
    with kr.Conn(broker.port) as c:
        call(c, CREATE_TOPICS, 7, create_body(7, [("dt1", 1, 1, {}), ("dt2", 1, 1, {})]))
        r = call(c, CREATE_TOPICS, 7, create_body(7, [("dt3", 1, 1, {})]))
        (made,) = parse_create_v7(r)
        r = call(c, DELETE_TOPICS, 0, kr.array([kr.string("dt1"), kr.string("nope")]) + kr.i32(10000))
        assert r.array(lambda x: (x.string(), x.i16())) == [("dt1", NONE),
                                                            ("nope", UNKNOWN_TOPIC_OR_PARTITION)]
        assert r.remaining() == 0
        unknown = b"\x01" * 16
        got = delete_v6(c, [(None, made["id"]), (None, unknown), ("dt2", ZERO_ID),
                            ("dt2", unknown)])
        assert got[0] == ("dt3", made["id"], NONE, None)
        assert got[1] == (None, unknown, UNKNOWN_TOPIC_ID, "This server does not host this topic ID.")
        assert got[2][0] == "dt2" and got[2][1] != ZERO_ID and got[2][2:] == (NONE, None)
        assert got[3] == ("dt2", unknown, INVALID_REQUEST,
                          "You may not specify both topic name and topic id.")
        got = delete_v6(c, [(None, made["id"])])
        assert got == [(None, made["id"], UNKNOWN_TOPIC_ID,
                        "This server does not host this topic ID.")]


def test_create_partitions_v0_and_v3(broker):
    create_topic(broker, "cp", partitions=1)
    with kr.Conn(broker.port) as c:
        body = kr.array([kr.string("cp") + kr.i32(2) + kr.i32(-1)]) + kr.i32(10000) + kr.i8(0)
        r = call(c, CREATE_PARTITIONS, 0, body)
        assert r.i32() == 0
        assert r.array(lambda x: (x.string(), x.i16(), x.string())) == [("cp", NONE, None)]
        assert r.remaining() == 0
        body = kr.varray([kr.vstring("cp", True) + kr.i32(2) + kr.varray(None, True)
                          + kr.vtags(True)], True) + kr.i32(10000) + kr.i8(0) + kr.vtags(True)
        r = call(c, CREATE_PARTITIONS, 3, body)
        assert r.i32() == 0

        def res(x):
            return (x.vstring(True), x.i16(), x.vstring(True))
        (name, err, msg), = r.vstructs(res, True)
        done(r, True)
        assert (name, err) == ("cp", 37) and "2" in msg               # INVALID_PARTITIONS


def test_describe_configs_v0_and_v4(broker):
    create_topic(broker, "dc", config={"retention.ms": "5000"})
    with kr.Conn(broker.port) as c:
        body = kr.array([kr.i8(RT_TOPIC) + kr.string("dc") + kr.array([kr.string("retention.ms")])])
        r = call(c, DESCRIBE_CONFIGS, 0, body)
        assert r.i32() == 0
        got = r.array(lambda x: (x.i16(), x.string(), x.i8(), x.string(), x.array(
            lambda y: (y.string(), y.string(), y.i8(), y.i8(), y.i8()))))
        assert got == [(NONE, None, RT_TOPIC, "dc", [("retention.ms", "5000", 0, 0, 0)])]
        assert r.remaining() == 0
        f = True
        body = kr.varray([kr.i8(RT_TOPIC) + kr.vstring("dc", f)
                          + kr.varray([kr.vstring("retention.ms", f)], f) + kr.vtags(f)], f) \
            + kr.i8(1) + kr.i8(1) + kr.vtags(f)
        r = call(c, DESCRIBE_CONFIGS, 4, body)
        assert r.i32() == 0

        def syn(z):
            return (z.vstring(f), z.vstring(f), z.i8())

        def entry(y):
            return (y.vstring(f), y.vstring(f), y.i8(), y.i8(), y.i8(), y.vstructs(syn, f), y.i8(),
                   y.vstring(f))

        def result(x):
            return (x.i16(), x.vstring(f), x.i8(), x.vstring(f), x.vstructs(entry, f))
        (err, msg, rt, name, entries), = r.vstructs(result, f)
        done(r, f)
        assert (err, msg, rt, name) == (NONE, None, RT_TOPIC, "dc")
        (n, v, ro, src, sens, syns, ctype, doc), = entries
        assert (n, v, ro, src, sens) == ("retention.ms", "5000", 0, 1, 0)
        assert syns == [("retention.ms", "5000", 1), ("log.retention.ms", "604800000", 5)]
        assert ctype == 5 and doc                                    # LONG, documented


def test_alter_configs_v0_v2_and_incremental_v0_v1(broker):
    create_topic(broker, "ac")

    def alter(v, name, value, op=None):
        f = v >= FIRST_FLEX[INCREMENTAL_ALTER if op is not None else ALTER_CONFIGS]
        cfg = kr.vstring(name, f) + (kr.i8(op) if op is not None else b"") \
            + kr.vstring(value, f) + kr.vtags(f)
        body = kr.varray([kr.i8(RT_TOPIC) + kr.vstring("ac", f) + kr.varray([cfg], f)
                          + kr.vtags(f)], f) + kr.i8(0) + kr.vtags(f)
        with kr.Conn(broker.port) as c:
            r = call(c, INCREMENTAL_ALTER if op is not None else ALTER_CONFIGS, v, body)
            assert r.i32() == 0

            def res(x):
                return (x.i16(), x.vstring(f), x.i8(), x.vstring(f))
            got = r.vstructs(res, f)
            done(r, f)
            return got

    def retention():
        with kr.Conn(broker.port) as c:
            body = kr.array([kr.i8(RT_TOPIC) + kr.string("ac")
                             + kr.array([kr.string("retention.ms")])])
            r = call(c, DESCRIBE_CONFIGS, 1, body + kr.i8(0))
            r.i32()
            (_, _, _, _, ((_, v, _, src, _, _),)), = r.array(lambda x: (
                x.i16(), x.string(), x.i8(), x.string(), x.array(lambda y: (
                    y.string(), y.string(), y.i8(), y.i8(), y.i8(),
                    y.array(lambda z: (z.string(), z.string(), z.i8()))))))
            return v, src
    assert alter(0, "retention.ms", "1000") == [(NONE, None, RT_TOPIC, "ac")]
    assert retention() == ("1000", 1)
    assert alter(2, "retention.ms", "2000") == [(NONE, None, RT_TOPIC, "ac")]
    assert retention() == ("2000", 1)
    assert alter(0, "retention.ms", "3000", op=0) == [(NONE, None, RT_TOPIC, "ac")]
    assert retention() == ("3000", 1)
    assert alter(1, "retention.ms", None, op=1) == [(NONE, None, RT_TOPIC, "ac")]
    assert retention() == ("604800000", 5)
    (err, msg, _, _), = alter(1, "no.such.key", "1", op=0)
    assert err == 40 and "no.such.key" in msg                      # INVALID_CONFIG


def test_delete_records_v0_and_v2(broker):
    create_topic(broker, "dr")
    produce_ok(ck_producer(broker), "dr", [{"value": b"%d" % i} for i in range(10)])
    with kr.Conn(broker.port) as c:
        body = kr.array([kr.string("dr") + kr.array([kr.i32(0) + kr.i64(4), kr.i32(3) + kr.i64(1)])]) \
            + kr.i32(10000)
        r = call(c, DELETE_RECORDS, 0, body)
        assert r.i32() == 0
        assert r.array(lambda x: (x.string(), x.array(lambda y: (y.i32(), y.i64(), y.i16())))) \
            == [("dr", [(0, 4, NONE), (3, -1, UNKNOWN_TOPIC_OR_PARTITION)])]
        assert r.remaining() == 0
        f = True
        body = kr.varray([kr.vstring("dr", f) + kr.varray([kr.i32(0) + kr.i64(-1) + kr.vtags(f)], f)
                          + kr.vtags(f)], f) + kr.i32(10000) + kr.vtags(f)
        r = call(c, DELETE_RECORDS, 2, body)
        assert r.i32() == 0

        def part(y):
            return (y.i32(), y.i64(), y.i16())

        def topic(x):
            return (x.vstring(f), x.vstructs(part, f))
        assert r.vstructs(topic, f) == [("dr", [(0, 10, NONE)])]   # -1: the high watermark
        done(r, f)


def test_init_producer_id_v0_and_v5(broker):
    with kr.Conn(broker.port) as c:
        r = call(c, INIT_PID, 0, kr.string(None) + kr.i32(60000))
        throttle, err, pid0, epoch = r.i32(), r.i16(), r.i64(), r.i16()
        assert (throttle, err, epoch, r.remaining()) == (0, NONE, 0, 0) and pid0 >= 0
        # v5 carries the producer's id and epoch (KIP-360): without a
        # transactional id a new id comes back, epoch 0
        body = kr.vstring(None, True) + kr.i32(60000) + kr.i64(pid0) + kr.i16(0) + kr.vtags(True)
        r = call(c, INIT_PID, 5, body)
        throttle, err, pid1, epoch = r.i32(), r.i16(), r.i64(), r.i16()
        done(r, True)
        assert (throttle, err, epoch) == (0, NONE, 0) and pid1 > pid0
        # with one, the transaction coordinator's answer (test_txn_coordinator.py):
        # retriable while __transaction_state is created and loaded, then epoch 0
        for _ in range(300):
            r = call(c, INIT_PID, 5, kr.vstring("tx", True) + kr.i32(60000) + kr.i64(-1)
                     + kr.i16(-1) + kr.vtags(True))
            throttle, err, pid2, epoch = r.i32(), r.i16(), r.i64(), r.i16()
            if err not in (14, 15, 16):
                break
            time.sleep(0.05)
        done(r, True)
        assert (throttle, err, epoch) == (0, NONE, 0) and pid2 > pid1


def test_api_versions_advertises_the_admin_ranges(broker):
    with kr.Conn(broker.port) as c:
        err, apis = kr.parse_api_versions_v0(c.request(kr.API_API_VERSIONS, 0))
    assert err == 0
    want = {CREATE_TOPICS: (0, 7), DELETE_TOPICS: (0, 6), DELETE_RECORDS: (0, 2),
            INIT_PID: (0, 5), DESCRIBE_CONFIGS: (0, 4), ALTER_CONFIGS: (0, 2),
            CREATE_PARTITIONS: (0, 3), INCREMENTAL_ALTER: (0, 1)}
    assert {k: apis.get(k) for k in want} == want
