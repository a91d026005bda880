"""Message size limits: a 1 MiB message round-trips where the limit allows
it; a message over the limit is refused with MESSAGE_TOO_LARGE and the
broker goes on serving."""
import pytest
from confluent_kafka import KafkaError

from support import (assert_serves, ck_producer, consume, create_topic,
                     kp_consume, kp_producer, produce, produce_ok, topic_name)

MIB = 1024 * 1024
# Client-side limits set well above the broker's, so it is the broker that
# decides.
BIG_CLIENT = {"message.max.bytes": 10 * MIB, "batch.size": 10 * MIB}
BIG_CONSUMER = {"fetch.max.bytes": 20 * MIB, "max.partition.fetch.bytes": 20 * MIB,
                "receive.message.max.bytes": 30 * MIB}


def big_value(n, seed):
    return bytes((i * 31 + seed) & 0xFF for i in range(n))


def round_trip_1mib(b, t):
    value = big_value(MIB, 7)
    msgs = produce_ok(ck_producer(b, **BIG_CLIENT), t, [{"key": b"big", "value": value},
                                                        {"key": b"small", "value": b"after"}])
    assert [m.offset() for m in msgs] == [0, 1]
    got = consume(b, t, [0], 2, **BIG_CONSUMER)
    assert got[0].value() == value, "1 MiB value came back different (len %d)" % len(got[0].value() or b"")
    assert got[1].value() == b"after"
    recs = kp_consume(b, t, [0], 2, max_partition_fetch_bytes=20 * MIB, fetch_max_bytes=20 * MIB)
    assert recs[0].value == value


def test_1mib_message_round_trips_with_broker_message_max_bytes_raised(start_broker):
    b = start_broker({"message.max.bytes": str(2 * MIB)})
    t = topic_name("big")
    create_topic(b, t, 1)
    round_trip_1mib(b, t)


def test_1mib_message_round_trips_with_topic_max_message_bytes_raised(broker):
    t = topic_name("bigtopic")
    create_topic(broker, t, 1, {"max.message.bytes": str(2 * MIB)})
    round_trip_1mib(broker, t)


def test_message_over_the_limit_is_message_too_large_and_broker_goes_on(broker):
    t = topic_name("toolarge")
    create_topic(broker, t, 1, {"max.message.bytes": str(MIB // 2)})
    reports = produce(ck_producer(broker, **BIG_CLIENT), t,
                      [{"value": big_value(MIB // 2 + 10000, 1)}], timeout=30)
    err = reports[0][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, \
        "producing over max.message.bytes gave %r" % (err,)
    # the same client then produces normally, and nothing of the rejected one was stored
    p = ck_producer(broker, **BIG_CLIENT)
    msgs = produce_ok(p, t, [{"value": b"fits"}])
    assert msgs[0].offset() == 0, "the rejected message took an offset"
    assert [m.value() for m in consume(broker, t, [0], 1)] == [b"fits"]
    assert_serves(broker, "MESSAGE_TOO_LARGE")


def test_default_limit_refuses_a_1_5mib_message(broker):
    """Kafka's default message.max.bytes is 1048588."""
    t = topic_name("default")
    create_topic(broker, t, 1)
    reports = produce(ck_producer(broker, **BIG_CLIENT), t, [{"value": big_value(3 * MIB // 2, 2)}], timeout=30)
    err = reports[0][0]
    assert err is not None and err.code() == KafkaError.MSG_SIZE_TOO_LARGE, repr(err)
    assert_serves(broker, "MESSAGE_TOO_LARGE at the default limit")


def test_kafka_python_message_over_the_limit_is_message_size_too_large_error(broker):
    from kafka.errors import MessageSizeTooLargeError
    t = topic_name("kptoolarge")
    create_topic(broker, t, 1, {"max.message.bytes": str(MIB // 2)})
    p = kp_producer(broker, max_request_size=10 * MIB, batch_size=10 * MIB, retries=0)
    try:
        fut = p.send(t, value=big_value(MIB // 2 + 10000, 3), partition=0)
        with pytest.raises(MessageSizeTooLargeError):
            fut.get(timeout=30)
        assert p.send(t, value=b"ok", partition=0).get(timeout=15).offset == 0
    finally:
        p.close(timeout=10)
    assert_serves(broker, "kafka-python MESSAGE_TOO_LARGE")


def test_fetch_smaller_than_the_first_batch_still_returns_that_whole_batch(broker):
    """KIP-74: a fetch limit below the first batch's size must not stall a consumer."""
    import kafka_raw as kr
    t = topic_name("kip74")
    create_topic(broker, t, 1)
    value = big_value(100000, 5)
    produce_ok(ck_producer(broker), t, [{"value": value}, {"value": b"second"}])
    with kr.Conn(broker.port) as c:
        r = c.request(kr.API_FETCH, 4, kr.fetch_v4_body(t, 0, 0, max_wait_ms=100, max_bytes=100,
                                                        partition_max_bytes=100))
        (res,) = kr.parse_fetch_v4(r)
    assert res[2] == 0
    records = res[4] or b""
    assert len(records) >= 61, "Fetch with max_bytes=100 returned %d bytes" % len(records)
    (batch_len,) = __import__("struct").unpack(">i", records[8:12])
    assert len(records) >= 12 + batch_len, "the first batch (%d bytes) was cut to %d" % (12 + batch_len, len(records))
    assert value in records[:12 + batch_len]
    # and librdkafka with a small per-partition fetch size gets through
    got = consume(broker, t, [0], 2, **{"fetch.message.max.bytes": 1000})
    assert [m.value() for m in got] == [value, b"second"]
