"""Schema validation in cluster mode (issue 31): each partition's leader
checks produced records against its own copy of the registry (replicated
from _schemas), so a schema registered through any broker is accepted by
every leader once that copy has it, and a record that does not carry a
registered id is refused by every leader."""
from cluster_support import make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_conf, consume, topic_name
from test_registry_cluster import reg_cluster, register_anywhere  # noqa: F401
from test_registry_validation import (CORRUPT_MESSAGE, INVALID_RECORD, ORDER, encode,
                                      raw_produce_version, wire)


def deliver(p, topic, partition, value):
    """The delivery error code of one value (None: stored)."""
    got = []
    p.produce(topic, value=value, partition=partition,
              on_delivery=lambda err, msg: got.append(err.code() if err else None))
    p.flush(30)
    return got[0] if got else "undelivered"


def test_every_leader_checks_with_its_copy_of_the_registry(reg_cluster):
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    c = reg_cluster
    t = topic_name("svc")
    fs = ck_admin(c.brokers[0]).create_topics([NewTopic(
        t, num_partitions=3, replication_factor=3,
        config={"confluent.value.schema.validation": "true"})], request_timeout=15)
    for f in fs.values():
        f.result(timeout=30)
    _, sid = register_anywhere(c, t + "-value", ORDER)
    p = Producer(ck_conf(c.brokers[0], **{"bootstrap.servers": c.bootstrap, "retries": 0}))
    good = [wire(sid, encode(ORDER, {"id": i, "item": "p%d" % i})) for i in range(3)]
    for part in range(3):
        # each leader's copy takes a tail turn (200 ms) and replication to have it
        wait_for(lambda part=part: deliver(p, t, part, good[part]) is None, 15,
                 "partition %d's leader to accept schema id %d" % (part, sid))
    # librdkafka 2.0 sends Produce v7: CORRUPT_MESSAGE, as Kafka answers it
    refused = INVALID_RECORD if raw_produce_version() >= 8 else CORRUPT_MESSAGE
    for part in range(3):
        assert deliver(p, t, part, b"no schema id") == refused
        assert deliver(p, t, part, wire(sid + 100, b"")) == refused
    for part in range(3):
        got = consume(c.brokers[0], t, [part], 1)
        assert [m.value() for m in got] == [good[part]]


def test_a_broker_still_reading_schemas_answers_produce_retriably(make_cluster):
    """A broker with no replica of _schemas reads it from its leader after a
    restart; until it has what the leader had, a record whose id it does not
    know yet is refused with NOT_ENOUGH_REPLICAS (retriable, while its GETs
    answer 50003), not INVALID_RECORD: a producer's retry is stored once the
    broker caught up, byte for byte."""
    import json
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    from cluster_support import cl_zk_get, leader_and_isr
    from conftest import free_port
    from test_registry_cluster import get
    c = make_cluster(4, start=False, session_timeout_ms=30000)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    c.start()
    # the controller stays up: the outsider (no _schemas replica) leads the
    # topic again after its restart while _schemas' leader is stopped
    ctl = json.loads(cl_zk_get(c.zk_connect, "/controller")[0])["brokerid"]
    ids = sorted(b.broker_id for b in c.brokers)
    out = c.broker(max(i for i in ids if i != ctl))
    lead = c.broker(min(i for i in ids if i not in (ctl, out.broker_id)))
    third = next(i for i in ids if i not in (ctl, out.broker_id, lead.broker_id))
    t = topic_name("svb")
    fs = ck_admin(c.brokers[0]).create_topics([
        NewTopic("_schemas", num_partitions=1, replica_assignment=[[lead.broker_id, third, ctl]],
                 config={"cleanup.policy": "compact"}),
        NewTopic(t, num_partitions=1, replica_assignment=[[out.broker_id]],
                 config={"confluent.value.schema.validation": "true"})], request_timeout=15)
    for f in fs.values():
        f.result(timeout=30)
    _, sid = register_anywhere(c, t + "-value", ORDER)
    wait_for(lambda: (leader_and_isr(out, "_schemas") or (-1,))[0] == lead.broker_id, 15,
             "_schemas-0 led by broker %d" % lead.broker_id)
    good = [wire(sid, encode(ORDER, {"id": i, "item": "p%d" % i})) for i in range(2)]
    p0 = Producer(ck_conf(out, **{"bootstrap.servers": c.bootstrap, "retries": 0}))
    wait_for(lambda: deliver(p0, t, 0, good[0]) is None, 15, "the outsider to accept it")
    out.stop()
    lead.sigstop()
    try:
        out.start()
        wait_for(lambda: (leader_and_isr(out, t) or (-1,))[0] == out.broker_id, 20,
                 "the restarted outsider to lead %s" % t)
        st, body = get(out, "/schemas/ids/%d" % sid)
        assert st == 500 and body["error_code"] == 50003, body    # still reading _schemas
        p1 = Producer(ck_conf(out, **{"bootstrap.servers": c.bootstrap, "retries": 0}))
        assert deliver(p1, t, 0, good[1]) == 19                 # NOT_ENOUGH_REPLICAS
        got = []
        p2 = Producer(ck_conf(out, **{"bootstrap.servers": c.bootstrap,
                                      "message.timeout.ms": 60000, "retry.backoff.ms": 200}))
        p2.produce(t, value=good[1], partition=0,
                   on_delivery=lambda err, msg: got.append(err.code() if err else None))
        p2.poll(1.0)
        assert got == []                                        # retrying, not refused
    finally:
        lead.sigcont()
    p2.flush(60)
    assert got == [None]
    assert [m.value() for m in consume(out, t, [0], 2)] == good
