"""Fetch long-polling and request ordering on one connection.

Timings are compared within the run, not with fixed milliseconds: a woken
Fetch must answer closer to the moment the produce was acknowledged (its
baseline: how fast this broker, on this machine, now takes data in) than
to the end of its MaxWaitMs; a Fetch that times out must wait as much
longer as its MaxWaitMs is longer."""
import time

from confluent_kafka import OFFSET_BEGINNING, TopicPartition

import kafka_raw as kr
from support import ck_consumer, ck_producer, create_topic, produce_ok, topic_name


def test_waiting_consumer_gets_a_new_message_promptly(broker):
    t = topic_name("lp")
    create_topic(broker, t, 1)
    c = ck_consumer(broker, **{"fetch.wait.max.ms": 5000})
    p = ck_producer(broker)
    p.list_topics(t, timeout=10)  # connect before the clock starts
    try:
        wait = 5.0                              # fetch.wait.max.ms
        c.assign([TopicPartition(t, 0, OFFSET_BEGINNING)])
        start = time.monotonic()
        while time.monotonic() - start < 1.0:   # the consumer is now waiting
            m = c.poll(0.1)
            assert m is None or m.error(), "unexpected message %r" % (m.value(),)
        produced_at = time.monotonic()
        produce_ok(p, t, [{"value": b"wake up"}])
        acked = time.monotonic() - produced_at
        got = None
        while got is None and time.monotonic() - produced_at < 10:
            m = c.poll(0.05)
            if m is not None and not m.error():
                got = m
        latency = time.monotonic() - produced_at
        assert got is not None and got.value() == b"wake up", "no message within 10 s"
        assert latency - acked < wait / 2, (
            "message reached the waiting consumer %.2f s after it was produced, acknowledged "
            "after %.2f s (fetch.wait.max.ms=5000: the broker did not wake the fetch)"
            % (latency, acked))
    finally:
        c.close()


def test_kafka_python_waiting_consumer_gets_a_new_message_promptly(broker):
    from kafka import KafkaConsumer, TopicPartition as KTP
    t = topic_name("lpkp")
    create_topic(broker, t, 1)
    c = KafkaConsumer(bootstrap_servers=[broker.bootstrap], group_id=None, enable_auto_commit=False,
                      fetch_max_wait_ms=5000, request_timeout_ms=15000, api_version_auto_timeout_ms=10000)
    p = ck_producer(broker)
    p.list_topics(t, timeout=10)
    try:
        tp = KTP(t, 0)
        c.assign([tp])
        c.seek_to_beginning(tp)
        start = time.monotonic()
        while time.monotonic() - start < 1.0:
            assert not c.poll(timeout_ms=100)
        produced_at = time.monotonic()
        produce_ok(p, t, [{"value": b"wake up"}])
        acked = time.monotonic() - produced_at
        recs = []
        while not recs and time.monotonic() - produced_at < 10:
            recs = [r for rs in c.poll(timeout_ms=50).values() for r in rs]
        latency = time.monotonic() - produced_at
        assert [r.value for r in recs] == [b"wake up"]
        assert latency - acked < 5.0 / 2, ("kafka-python consumer (fetch_max_wait_ms=5000) got "
                                           "the message %.2f s after it was produced, "
                                           "acknowledged after %.2f s" % (latency, acked))
    finally:
        c.close()


def test_fetch_on_an_empty_partition_waits_max_wait_ms(broker):
    t = topic_name("wait")
    create_topic(broker, t, 1)
    took = {}
    with kr.Conn(broker.port) as c:
        for wait_ms in (500, 1500):
            start = time.monotonic()
            r = c.request(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, max_wait_ms=wait_ms), timeout=10)
            took[wait_ms] = time.monotonic() - start
            (res,) = kr.parse_fetch_v4(r)
            assert res[:4] == (t, 0, 0, 0), res
            assert not res[4], "records from an empty partition: %r" % res[4]
    for wait_ms, s in took.items():
        assert s >= 0.8 * wait_ms / 1000, "Fetch with MaxWaitMs=%d answered after %.2f s" % (wait_ms, s)
    # 1 s more MaxWaitMs is about 1 s more waiting: the wait is the request's,
    # not a fixed one or a multiple (the same machine's overheads cancel).
    extra = took[1500] - took[500]
    assert 0.5 <= extra <= 1.5, "MaxWaitMs 500 vs 1500: answered after %.2f s vs %.2f s" \
        % (took[500], took[1500])


def test_fetch_returns_as_soon_as_data_arrives(broker):
    t = topic_name("arrive")
    create_topic(broker, t, 1)
    p = ck_producer(broker)
    p.list_topics(t, timeout=10)
    with kr.Conn(broker.port) as c:
        corr = c.send(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, max_wait_ms=10000))
        time.sleep(0.5)
        produced_at = time.monotonic()
        produce_ok(p, t, [{"key": b"k", "value": b"arrived"}])
        acked = time.monotonic() - produced_at
        got, r = c.recv_response(timeout=12)
        latency = time.monotonic() - produced_at
        assert got == corr
        (res,) = kr.parse_fetch_v4(r)
    assert res[2:4] == (0, 1), res
    assert res[4] and b"arrived" in res[4]
    assert latency - acked < 10.0 / 4, ("a Fetch waiting 10 s answered %.2f s after the data "
                                        "was produced, acknowledged after %.2f s" % (latency, acked))


def test_pipelined_requests_are_answered_in_order(broker):
    with kr.Conn(broker.port) as c:
        reqs = [c.build(kr.API_API_VERSIONS, 0, b"", corr=11),
                c.build(kr.API_METADATA, 1, kr.metadata_body(1, None), corr=12),
                c.build(kr.API_API_VERSIONS, 0, b"", corr=13),
                c.build(kr.API_METADATA, 0, kr.metadata_body(0, []), corr=14),   # kafka-python's probe
                c.build(kr.API_API_VERSIONS, 3, kr.api_versions_v3_body(), corr=15)]
        c.send_raw(b"".join(data for _, data in reqs))
        order = []
        for _ in reqs:
            corr, r = c.recv_response(timeout=5)
            order.append(corr)
            if corr in (11, 13):
                assert kr.parse_api_versions_v0(r)[0] == 0
            elif corr == 12:
                assert kr.parse_metadata(r, 1)["controller_id"] == broker.broker_id
            elif corr == 14:
                assert kr.parse_metadata(r, 0)["brokers"][0][0] == broker.broker_id
    assert order == [11, 12, 13, 14, 15]


def test_request_behind_a_waiting_fetch_is_answered_after_it(broker):
    t = topic_name("order")
    create_topic(broker, t, 1)
    with kr.Conn(broker.port) as c:
        _, fetch = c.build(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, max_wait_ms=1000), corr=21)
        _, apiv = c.build(kr.API_API_VERSIONS, 0, b"", corr=22)
        _, md = c.build(kr.API_METADATA, 1, kr.metadata_body(1, [t]), corr=23)
        start = time.monotonic()
        c.send_raw(fetch + apiv + md)
        first, _ = c.recv_response(timeout=10)
        took = time.monotonic() - start
        second, _ = c.recv_response(timeout=5)
        third, _ = c.recv_response(timeout=5)
    assert [first, second, third] == [21, 22, 23]
    assert took >= 0.8, "the Fetch was answered after %.2f s, before its MaxWaitMs" % took


def test_many_connections_waiting_at_once_all_wake(broker):
    t = topic_name("many")
    create_topic(broker, t, 1)
    p = ck_producer(broker)
    p.list_topics(t, timeout=10)
    conns = [kr.Conn(broker.port) for _ in range(20)]
    try:
        for c in conns:
            c.send(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, max_wait_ms=10000))
        time.sleep(0.3)
        produced_at = time.monotonic()
        produce_ok(p, t, [{"value": b"for everyone"}])
        acked = time.monotonic() - produced_at
        for c in conns:
            _, r = c.recv_response(timeout=5)
            (res,) = kr.parse_fetch_v4(r)
            assert res[2] == 0 and b"for everyone" in (res[4] or b"")
        latency = time.monotonic() - produced_at
        assert latency - acked < 10.0 / 4, ("20 Fetches waiting 10 s all answered %.2f s after the "
                                            "produce, acknowledged after %.2f s" % (latency, acked))
    finally:
        for c in conns:
            c.close()
