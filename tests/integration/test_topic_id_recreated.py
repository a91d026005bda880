"""A topic deleted and re-created under the same name has a new topic id,
and requests that name the old id get Kafka's answers (issue 17, item 2),
in raw frames: Fetch v17 by the old id is UNKNOWN_TOPIC_ID (the id no
topic has now), Metadata v12 by the old id the same, while the name
answers the new id; a Fetch v17 waiting on the old id when its topic is
deleted and another created under its name in the same loop turn is
answered INCONSISTENT_TOPIC_ID (the name now belongs to a topic with
another id)."""
import time

import kafka_raw as kr
from test_admin_api_versions import CREATE_TOPICS, DELETE_TOPICS, call, create_body, \
    delete_v6, parse_create_v7
from test_data_path_versions import metadata_v12

NONE = 0
UNKNOWN_TOPIC_ID = 100
INCONSISTENT_TOPIC_ID = 103


def fetch_v17_body(topic_id, offset, max_wait_ms):
    return kr.fetch_v17_body([(topic_id, 0, offset)], max_wait_ms)


parse_fetch_v17 = kr.parse_fetch_v17


def flex_response(c, timeout=5.0):
    """The next response's body, after its (empty) header tags."""
    _corr, r = c.recv_response(timeout)
    assert r.tags() == {}
    return r


def create_v7(c, name):
    (made,) = parse_create_v7(call(c, CREATE_TOPICS, 7, create_body(7, [(name, 1, 1, {})])))
    assert made["error"] == NONE and made["id"] != bytes(16)
    return made["id"]


def produce_v11(c, name, value):
    batch = kr.record_batch([(None, value, [], 0)], int(time.time() * 1000))
    (res,) = kr.parse_produce_v11(c.request_flex(kr.API_PRODUCE, 11,
                                                 kr.produce_v11_body(name, 0, batch)))
    assert res[2] == NONE
    return batch


def test_old_topic_id_after_recreation_is_unknown(broker):
    name = "recreated-a"
    with kr.Conn(broker.port) as c:
        old = create_v7(c, name)
        produce_v11(c, name, b"old")
        (ft,) = parse_fetch_v17(c.request_flex(kr.API_FETCH, 17, fetch_v17_body(old, 0, 0)))
        assert ft[0] == old and ft[1][0][:3] == (0, NONE, 1)
        assert delete_v6(c, [(None, old)]) == [(name, old, NONE, None)]
        new = create_v7(c, name)
        assert new != old
        batch = produce_v11(c, name, b"new")
        # the old id: no topic has it
        got = parse_fetch_v17(c.request_flex(kr.API_FETCH, 17, fetch_v17_body(old, 0, 0)))
        assert got == [(old, [(0, UNKNOWN_TOPIC_ID, -1, b"")])]
        by_id = metadata_v12(c, [(old, None)])["topics"]
        assert [(t["error"], t["name"], t["id"]) for t in by_id] == [(UNKNOWN_TOPIC_ID, None, old)]
        # the name answers the new id, and the new id the new topic's record
        (mt,) = metadata_v12(c, [(None, name)])["topics"]
        assert (mt["error"], mt["name"], mt["id"]) == (NONE, name, new)
        ((tid, ((p, err, hw, records),)),) = parse_fetch_v17(
            c.request_flex(kr.API_FETCH, 17, fetch_v17_body(new, 0, 0)))
        assert (tid, p, err, hw) == (new, 0, NONE, 1)
        assert len(records) == len(batch) and records[:12] == batch[:12] and \
            records[16:] == batch[16:]


def test_fetch_waiting_on_an_id_whose_name_is_recreated_is_inconsistent(broker):
    name = "recreated-b"
    with kr.Conn(broker.port) as admin, kr.Conn(broker.port) as waiter:
        old = create_v7(admin, name)
        produce_v11(admin, name, b"old")
        # waits at the log end (offset 1) for up to 20 s
        waiter.send(kr.API_FETCH, 17, fetch_v17_body(old, 1, 20000), flexible=True)
        time.sleep(0.3)
        # delete and re-create in one write: the broker reads both in one
        # loop turn, so the waiting fetch looks at its topic again only
        # once the name belongs to the new topic
        delete = kr.varray([(None, old)], True,
                           lambda e: kr.vstring(e[0], True) + e[1] + kr.vtags(True)) \
            + kr.i32(10000) + kr.vtags(True)
        _c, d = admin.build(DELETE_TOPICS, 6, delete, flexible=True)
        _c, cr = admin.build(CREATE_TOPICS, 7, create_body(7, [(name, 1, 1, {})]), flexible=True)
        admin.send_raw(d + cr)
        t0 = time.monotonic()
        got = parse_fetch_v17(flex_response(waiter, 10))
        assert time.monotonic() - t0 < 5, "answered at the deletion, not at MaxWaitMs"
        assert got == [(old, [(0, INCONSISTENT_TOPIC_ID, -1, b"")])]
        r = flex_response(admin)
        assert r.i32() == 0
        assert r.vstructs(lambda x: (x.vstring(True), x.uuid(), x.i16(), x.vstring(True)),
                          True) == [(name, old, NONE, None)]
        (made,) = parse_create_v7(flex_response(admin))
        assert made["name"] == name and made["error"] == NONE and made["id"] != old
