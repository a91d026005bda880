"""Replication, the leader's side (issue 16): a follower fetches with
ReplicaId = its broker id and the leader tracks it — the high watermark
follows the ISR's smallest log end, the follower joins the ISR once it
caught up and leaves it after replica.lag.time.max.ms without catching
up, acks=all waits for the ISR, min.insync.replicas refuses or flags
what the ISR cannot guarantee.

The followers here are raw Fetch v11 requests (kafka_raw) that pose as
brokers 2 and 3.  The real brokers 2 and 3 are stopped once the topic is
created, so no real replica fetcher (daemon/replication/repl_fetcher.c, another branch)
fetches alongside the fake one: every assertion holds with it merged.
"""
import re
import time

import pytest
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import (LEFT_GRACE_S, leader_and_isr, make_cluster, wait_equal,  # noqa: F401
                             wait_for, zk, zk_missing)
from support import ck_admin, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

NONE = 0
NOT_LEADER_OR_FOLLOWER = 6
REQUEST_TIMED_OUT = 7
NOT_ENOUGH_REPLICAS = 19
NOT_ENOUGH_REPLICAS_AFTER_APPEND = 20
LAG_MS = 3000
# The fake follower 2 is in the ISR while the real broker 2 is down: when
# broker 1 dies or restarts, every ISR member went down, and the controller
# waits this long for the others before electing the longest log of those
# back (daemon/cluster/cluster_recovery.c).
RECOVERY_WAIT_MS = 2000


def metadata_isr(b, topic):
    got = leader_and_isr(b, topic)
    return list(got[1]) if got else None


def sql_isr(b, topic):
    rows = b.sql("select isr from partitions where topic = '%s' and partition = 0" % topic)
    return rows[0]["isr"] if rows else None


def batch(n, tag=b"v"):
    now = int(time.time() * 1000)
    return kr.record_batch([(None, tag + b"%d" % i, [], 0) for i in range(n)], now)


def produce(conn, topic, n, acks, timeout_ms=10000, wait=5.0):
    """(error, base offset) of one batch of n records to partition 0."""
    r = conn.request(kr.API_PRODUCE, 3, kr.produce_v3_body(topic, 0, batch(n), acks, timeout_ms),
                     timeout=wait)
    (_t, _p, err, base, _lat), = kr.parse_produce_v3(r)
    return err, base


def replica_fetch(conn, topic, offset, replica_id=2, max_wait_ms=0, wait=5.0):
    """(error, high watermark, records bytes) of a follower's fetch of partition 0."""
    r = conn.request(kr.API_FETCH, 11,
                     kr.fetch_v11_body([(topic, 0, offset)], max_wait_ms, replica_id),
                     timeout=wait)
    top, parts = kr.parse_fetch_v11(r)
    assert top == NONE
    (_t, _p, err, hw, _ls, records), = parts
    return err, hw, records or b""


def consumer_fetch(conn, topic, offset):
    """(error, high watermark, records bytes) of a consumer's fetch."""
    r = conn.request(kr.API_FETCH, 4, kr.fetch_v4_body(topic, 0, offset, 0))
    (_t, _p, err, hw, records), = kr.parse_fetch_v4(r)
    return err, hw, records or b""


def list_offsets_latest(conn, topic):
    body = kr.i32(-1) + kr.array([kr.string(topic) + kr.array([kr.i32(0) + kr.i64(-1)])])
    r = conn.request(kr.API_LIST_OFFSETS, 1, body)
    r.i32()
    r.string()
    r.i32()
    r.i32()
    err = r.i16()
    r.i64()
    return err, r.i64()


def records_in(data):
    """Record count of the batches in data (RecordBatch v2: count at byte 57)."""
    n, at = 0, 0
    while at + 61 <= len(data):
        size = int.from_bytes(data[at + 8:at + 12], "big")
        n += int.from_bytes(data[at + 57:at + 61], "big")
        at += 12 + size
    return n


@pytest.fixture
def led_by_one(make_cluster):
    """A 3-broker cluster (replica.lag.time.max.ms = LAG_MS) and a function
    making an RF-3 topic on replicas [1, 2, 3], led by broker 1, then
    stopping brokers 2 and 3 (once per cluster: the topic is made while
    they live).  Returns (broker 1, new_topic)."""
    c = make_cluster(3, overrides={"replica.lag.time.max.ms": str(LAG_MS),
                                   "leader.recovery.wait.ms": str(RECOVERY_WAIT_MS)})
    one = c.broker(1)

    def new_topic(config=None):
        t = topic_name("repl")
        fs = ck_admin(one).create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[1, 2, 3]],
                                                   config=config or {})])
        fs[t].result(30)
        wait_for(lambda: (leader_and_isr(one, t) or (None,))[0] == 1, 30, "%s led by 1" % t)
        for i in (2, 3):
            if c.broker(i).alive():
                c.broker(i).stop()
        # A new partition's ISR is all its live replicas; 2 and 3 leave it
        # as they shut down, and a fetch posing as them is taken back only
        # once they are no longer leaving (LEFT_GRACE_S).
        wait_equal(lambda: metadata_isr(one, t), [1], LAG_MS / 1000 + 10,
                   "topic %s with ISR [1]" % t)
        time.sleep(LEFT_GRACE_S)
        return t

    new_topic.cluster = c
    return one, new_topic


def join_isr(one, t, conn, follower=2):
    """Fetches as follower up to the leader's log end until the ISR has it."""
    end = None
    for _ in range(3):
        with kr.Conn(one.port) as c:
            _e, end = list_offsets_latest(c, t)
        err, _hw, _rec = replica_fetch(conn, t, end, follower)
        assert err == NONE
        try:
            wait_for(lambda: follower in (metadata_isr(one, t) or []), 5,
                     "follower %d in the ISR" % follower)
            return end
        except AssertionError:
            continue
    raise AssertionError("follower %d never joined the ISR of %s" % (follower, t))


def with_follower_in_isr(one, t, p, f):
    """One record written (acks=1), then follower 2 fetched to the end and is in the ISR."""
    assert produce(p, t, 1, acks=1) == (NONE, 0)
    return join_isr(one, t, f)


def test_follower_fetches_to_log_end_joins_isr_and_holds_high_watermark(led_by_one):
    one, new_topic = led_by_one
    t = new_topic()
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f, kr.Conn(one.port) as cons:
        assert produce(p, t, 3, acks=1) == (NONE, 0)
        # A broker that is not a replica gets Kafka's answer.
        assert replica_fetch(f, t, 0, replica_id=7)[0] == NOT_LEADER_OR_FOLLOWER
        # From offset 0: all three records; ISR [1], so HW = log end = 3.
        err, hw, rec = replica_fetch(f, t, 0)
        assert (err, hw, records_in(rec)) == (NONE, 3, 3)
        assert metadata_isr(one, t) == [1]     # behind the HW at that fetch: not yet
        # Fetching at the log end = caught up: joins the ISR, in ZooKeeper and so
        # in every view (Metadata and SQL alike).
        err, hw, rec = replica_fetch(f, t, 3)
        assert (err, hw, rec) == (NONE, 3, b"")
        wait_equal(lambda: metadata_isr(one, t), [1, 2], 10, "ISR grew to [1, 2]")
        wait_equal(lambda: sql_isr(one, t), "1,2", 10, "SQL shows ISR 1,2")
        wait_for(lambda: "ISR [1] -> [1,2] (follower 2 caught up)" in one.log_text(), 5,
                 "the ISR change logged")

        # With 2 in the ISR the HW waits for it: an append moves the log end only.
        assert produce(p, t, 2, acks=1) == (NONE, 3)
        assert consumer_fetch(cons, t, 3) == (NONE, 3, b"")
        # Between the HW and the log end a consumer gets nothing, not
        # OFFSET_OUT_OF_RANGE (as Kafka: it may have read there from a leader
        # before this one).
        assert consumer_fetch(cons, t, 4) == (NONE, 3, b"")
        assert list_offsets_latest(cons, t) == (NONE, 3)
        # The follower reads past the HW, up to the log end, and is told the HW.
        err, hw, rec = replica_fetch(f, t, 3)
        assert (err, hw, records_in(rec)) == (NONE, 3, 2)
        # Reporting log end 5 moves the HW: consumers see the records.
        err, hw, _rec = replica_fetch(f, t, 5)
        assert (err, hw) == (NONE, 5)
        err, hw, rec = consumer_fetch(cons, t, 3)
        assert (err, hw, records_in(rec)) == (NONE, 5, 2)
        assert list_offsets_latest(cons, t) == (NONE, 5)


@pytest.mark.serial
def test_replica_fetch_long_poll_wakes_on_append(led_by_one):
    one, new_topic = led_by_one
    t = new_topic()
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f:
        with_follower_in_isr(one, t, p, f)
        # Caught up, the follower's fetch waits up to MaxWaitMs; with 2 in the
        # ISR the append leaves the HW where it is, yet the fetch must wake.
        max_wait_s = 8.0
        f.send(kr.API_FETCH, 11, kr.fetch_v11_body([(t, 0, 1)], int(max_wait_s * 1000), 2))
        time.sleep(0.3)
        start = time.monotonic()
        assert produce(p, t, 2, acks=1) == (NONE, 1)
        _corr, r = f.recv_response(timeout=5.0)
        took = time.monotonic() - start
        _top, ((_t, _p, err, hw, _ls, rec),) = kr.parse_fetch_v11(r)
        assert (err, hw, records_in(rec)) == (NONE, 1, 2)
        # Woken by the append, not answered at MaxWaitMs: well before it
        # (a figure of the same request, not of the machine's speed).
        assert took < max_wait_s / 2, \
            "the append woke the follower's fetch only after %.2f s" % took


@pytest.mark.serial
def test_acks_all_waits_for_the_isr_and_times_out(led_by_one):
    one, new_topic = led_by_one
    t = new_topic()
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f:
        # ISR [1]: acks=all is answered at once, like acks=1.
        assert produce(p, t, 1, acks=-1) == (NONE, 0)
        end = join_isr(one, t, f)
        assert end == 1
        # ISR [1, 2]: the answer waits until follower 2 has the batch.
        corr = p.send(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch(2), -1, 20000))
        with pytest.raises(kr.Timeout):
            p.recv_response(timeout=0.7)
        err, hw, rec = replica_fetch(f, t, 1)           # reads them: not yet
        assert (err, hw, records_in(rec)) == (NONE, 1, 2)
        with pytest.raises(kr.Timeout):
            p.recv_response(timeout=0.3)
        assert replica_fetch(f, t, 3)[:2] == (NONE, 3)  # has them: answered
        got, r = p.recv_response(timeout=5.0)
        assert got == corr
        assert [(e, b) for _t, _p, e, b, _l in kr.parse_produce_v3(r)] == [(NONE, 1)]
        # Nobody fetches it within the request's timeout: REQUEST_TIMED_OUT
        # (the timeout is well inside replica.lag.time.max.ms, so 2 stays).
        assert replica_fetch(f, t, 3)[0] == NONE
        start = time.monotonic()
        err, _base = produce(p, t, 1, acks=-1, timeout_ms=800)
        took = time.monotonic() - start
        assert err == REQUEST_TIMED_OUT
        assert 0.6 < took < 2.5, took
        assert metadata_isr(one, t) == [1, 2]


@pytest.mark.serial
def test_min_insync_replicas_and_a_lagging_follower(led_by_one):
    one, new_topic = led_by_one
    t = new_topic({"min.insync.replicas": "2"})
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f:
        # ISR [1] < min.insync.replicas 2: acks=all is refused, nothing appended;
        # acks=1 is not affected.
        assert produce(p, t, 1, acks=-1) == (NOT_ENOUGH_REPLICAS, -1)
        with_follower_in_isr(one, t, p, f)
        # ISR [1, 2]: acks=all goes through once 2 has it.
        corr = p.send(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch(1), -1, 20000))
        time.sleep(0.2)
        assert replica_fetch(f, t, 2)[:2] == (NONE, 2)
        got, r = p.recv_response(timeout=5.0)
        assert got == corr and [e for _t, _p, e, _b, _l in kr.parse_produce_v3(r)] == [NONE]
        # Follower 2 stops fetching while an acks=all produce waits for it:
        # after replica.lag.time.max.ms it leaves the ISR, the HW moves on
        # without it, and the produce learns the ISR is too small now.
        start = time.monotonic()
        err, _base = produce(p, t, 1, acks=-1, timeout_ms=20000, wait=LAG_MS / 1000 + 10)
        took = time.monotonic() - start
        assert err == NOT_ENOUGH_REPLICAS_AFTER_APPEND
        assert LAG_MS / 1000 - 0.5 < took < LAG_MS / 1000 + 5, took
        wait_equal(lambda: metadata_isr(one, t), [1], 10, "ISR shrank to [1]")
        wait_equal(lambda: sql_isr(one, t), "1", 10, "SQL shows ISR 1")
        assert re.search(r"ISR \[1,2\] -> \[1\] \(follower 2 not caught up for \d+ ms\)",
                         one.log_text())
        assert produce(p, t, 1, acks=-1) == (NOT_ENOUGH_REPLICAS, -1)


def test_waiting_acks_all_survives_its_client_leaving_and_is_answered_at_shutdown(led_by_one):
    one, new_topic = led_by_one
    t = new_topic()
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f:
        with_follower_in_isr(one, t, p, f)
        # A producer that leaves while its acks=all produce waits: the wait is
        # dropped with the connection; the follower's next fetch moves the HW
        # and wakes nobody that is gone.
        gone = kr.Conn(one.port)
        gone.send(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch(1), -1, 20000))
        time.sleep(0.3)
        gone.close()
        time.sleep(0.2)
        assert replica_fetch(f, t, 2)[:2] == (NONE, 2)
        # Shutdown answers a waiting acks=all produce (REQUEST_TIMED_OUT: not
        # known to be replicated) instead of leaving it hanging.
        p.send(kr.API_PRODUCE, 3, kr.produce_v3_body(t, 0, batch(1), -1, 20000))
        time.sleep(0.3)
        start = time.monotonic()
        assert one.stop() == 0
        _corr, r = p.recv_response(timeout=5.0)
        assert [e for _t, _p, e, _b, _l in kr.parse_produce_v3(r)] == [REQUEST_TIMED_OUT]
        assert time.monotonic() - start < 10


def test_controller_elects_the_follower_the_leader_added_to_the_isr(led_by_one):
    one, new_topic = led_by_one
    c = new_topic.cluster
    t = new_topic()
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f:
        with_follower_in_isr(one, t, p, f)
    # The leader dies at once (within replica.lag.time.max.ms, so 2 is still
    # in the ISR), and broker 2 comes back while 1's session runs out: the
    # controller elects 2, the live ISR member (registered after the ISR
    # listed it: after leader.recovery.wait.ms without 1), ISR [2].
    one.kill()
    two = c.broker(2)
    two.start()
    wait_equal(lambda: leader_and_isr(two, t), (2, (2,)), 30,
               "broker 2 leads %s with ISR [2]" % t)


def test_restarted_leader_alone_serves_nothing_until_it_leads_the_isr_alone(led_by_one):
    one, new_topic = led_by_one
    t = new_topic()
    with kr.Conn(one.port) as p, kr.Conn(one.port) as f:
        with_follower_in_isr(one, t, p, f)
        assert produce(p, t, 2, acks=1) == (NONE, 1)   # HW 1, log end 3
    one.restart()
    # Every member of the ISR [1, 2] went down.  Broker 1 does not lead on
    # its own word (its log may be an old copy): nothing is served until the
    # controller, after leader.recovery.wait.ms without broker 2, elects it
    # at a new leader epoch with ISR [1]; then the high watermark is its log
    # end.  Never served above what the ISR had.
    with kr.Conn(one.port) as cons:
        errs = []
        deadline = time.monotonic() + RECOVERY_WAIT_MS / 1000 + 30
        while time.monotonic() < deadline:
            err, hw, _rec = consumer_fetch(cons, t, 0)
            if err == NONE:
                break
            errs.append(err)
            time.sleep(0.1)
        assert err == NONE and hw == 3, (err, hw)
        assert set(errs) <= {NOT_LEADER_OR_FOLLOWER}, errs
    assert metadata_isr(one, t) == [1]
    assert "came back within leader.recovery.wait.ms" in one.log_text()
