"""Operating a replicated cluster (issue 16, items 4 and 7): controlled
shutdown and a rolling restart, a dead broker leaving the ISRs it was in,
preferred-leader election (automatic and ElectLeaders), and what SQL and
/metrics show of it all.

Every cluster here has three brokers and a topic with replication factor
3 and min.insync.replicas=2.
"""
import json
import re
import time
import urllib.request

import pytest
from confluent_kafka import Producer
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import (leader_and_isr, live_brokers, make_cluster, wait_for, zk,  # noqa: F401
                             cl_zk_get, zk_missing)
from support import ck_admin, ck_conf, report, topic_name
from test_data_path_versions import metadata_v12
from test_replication_failover import Sender, agreed, tally

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

SESSION_MS = 3000
API_ELECT_LEADERS = 43
NOT_CONTROLLER, INVALID_REQUEST, UNKNOWN_TOPIC_OR_PARTITION = 41, 42, 3
ELECTION_NOT_NEEDED = 84


def rf3_cluster(make_cluster, partitions=1, **overrides):
    o = {"replica.lag.time.max.ms": "3000"}
    o.update(overrides)
    c = make_cluster(3, session_timeout_ms=SESSION_MS, overrides=o)
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "every broker to list three live brokers")
    t = topic_name("ops")
    fs = ck_admin(c.brokers[0]).create_topics(
        [NewTopic(t, partitions, 3, config={"min.insync.replicas": "2"})], operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 30,
             "the ISR of %s to hold all three brokers" % t)
    return c, t


def replicas_of(b, topic):
    with kr.Conn(b.port, timeout=3) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False), timeout=3)
    parts = kr.parse_metadata(r, 5)["topics"][topic][1]
    return {pid: list(reps) for _e, pid, _l, reps, _i, _o in parts}


def metrics(b):
    """{name{labels}: value} of b's /metrics ({} when b does not answer)."""
    try:
        with urllib.request.urlopen("http://%s/metrics" % b.admin, timeout=5) as r:
            text = r.read().decode()
    except OSError:
        return {}
    out = {}
    for line in text.splitlines():
        m = re.match(r"^([a-zA-Z_:][a-zA-Z0-9_:]*)(\{[^}]*\})? (\S+)$", line)
        if m:
            out[m.group(1) + (m.group(2) or "")] = float(m.group(3))
    return out


def metric(b, name):
    return metrics(b).get(name)


def log_of(b):
    with open(b.log_path, "rb") as f:
        return f.read().decode(errors="replace")


def active_controller(c):
    return wait_for(lambda: next((b for b in c.brokers if metric(
        b, "kafka_controller_kafkacontroller_activecontrollercount") == 1), None), 10,
        "the active controller")


def controller_follows(c, prefix):
    """A new RF-3 topic led by a broker that is not the controller, with
    the controller its second replica, all three in the ISR:
    (controller, leader, the third broker, topic)."""
    ctl = active_controller(c)
    lead, other = [b for b in c.brokers if b is not ctl]
    t = topic_name(prefix)
    ck_admin(lead).create_topics([NewTopic(t, 1, replica_assignment=[
        [lead.broker_id, ctl.broker_id, other.broker_id]])])[t].result(15)
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 30,
             "all three in the ISR of %s" % t)
    return ctl, lead, other, t


# ---- controlled shutdown ------------------------------------------------------------

def test_rolling_restart_under_load_loses_nothing_and_needs_no_unretried_error(make_cluster):
    c, t = rf3_cluster(make_cluster, **{"leader.imbalance.check.interval.seconds": "1"})
    brokers = c.brokers
    s = Sender(c, t)
    errors = []
    s.p = Producer(ck_conf(brokers[0], **{
        "bootstrap.servers": c.bootstrap, "enable.idempotence": True, "acks": "all",
        "message.timeout.ms": 120000, "linger.ms": 5,
        "topic.metadata.refresh.interval.ms": 1000, "retry.backoff.ms": 100,
        "error_cb": lambda e: errors.append(str(e))}))
    s.start()
    stops = []
    try:
        for b in brokers:
            wait_for(lambda: len(s.acked) > 300 * (len(stops) + 1), 60,
                     "acknowledged messages before stopping broker %d" % b.broker_id)
            led_before = (agreed(brokers, t) or (None,))[0]
            t0 = time.monotonic()
            rc = b.stop()
            took = time.monotonic() - t0
            assert rc == 0, "broker %d exited with %s" % (b.broker_id, rc)
            # It saw itself lead nothing and out of every ISR before it exited.
            assert "controlled shutdown: no leadership or ISR place left" in log_of(b), \
                "broker %d stopped before its leadership and ISR places moved" % b.broker_id
            rest = [x for x in brokers if x is not b]
            v = wait_for(lambda: (lambda v: v if v and v[0] not in (-1, b.broker_id) and
                                  b.broker_id not in v[1] else None)(agreed(rest, t)), 5,
                         "the others to agree broker %d leads nothing and is out of the ISR"
                         % b.broker_id)
            before = len(s.acked)
            wait_for(lambda: len(s.acked) > before, 30, "acknowledgements without broker %d"
                     % b.broker_id)
            b.start()
            wait_for(lambda: (agreed(brokers, t) or (None, ()))[1] == (1, 2, 3), 60,
                     "broker %d back in the ISR of %s" % (b.broker_id, t))
            stops.append((b.broker_id, led_before == b.broker_id, took))
    finally:
        s.stop.set()
        s.join(150)
    acked, _got, values, lost, dups = tally(s, brokers[0], t)
    report("rolling restart of 3 (SIGTERM, controlled shutdown): %d sent, %d acknowledged, "
           "%d read, %d lost, %d duplicated; stops took %s", s.sent, len(acked), len(values),
           len(lost), dups, ", ".join("%d%s %.2f s" % (i, " (leader)" if led else "", took)
                                      for i, led, took in stops))
    assert not lost, "%d acknowledged messages lost, e.g. %s" % (len(lost), lost[:5])
    assert dups == 0, "%d messages read twice" % dups
    nums = [int(v[1:]) for v in values]
    assert nums == sorted(nums), "messages out of order in the log"
    # A stopped broker refuses connections (librdkafka reports that and
    # reconnects); anything else would be an error the producer saw.
    others = [e for e in errors if "_TRANSPORT" not in e]
    assert not others, "the producer reported errors: %s" % others[:5]


def test_controlled_shutdown_off_stops_without_asking(make_cluster):
    c, t = rf3_cluster(make_cluster, **{"controlled.shutdown.enable": "false"})
    leader, _isr = agreed(c.brokers, t)
    b = c.broker(leader)
    assert b.stop() == 0
    assert "controlled shutdown" not in log_of(b)


@pytest.mark.serial
def test_controlled_shutdown_gives_up_after_its_retries_when_the_controller_stands_still(
        make_cluster):
    c, _t = rf3_cluster(make_cluster, **{"controlled.shutdown.max.retries": "2",
                                         "controlled.shutdown.retry.backoff.ms": "500"})
    ctl, lead, other, t = controller_follows(c, "stuck")
    assert agreed(c.brokers, t)[0] == lead.broker_id
    ctl.sigstop()                  # a follower that fetches nothing, a controller that acts not
    try:
        t0 = time.monotonic()
        assert lead.stop() == 0
        took = time.monotonic() - t0
    finally:
        ctl.sigcont()
    text = log_of(lead)
    assert "not moved after 2 attempt(s) (controlled.shutdown.max.retries); stopping anyway" \
        in text
    # Two attempts of 0.5 s each (its followers were level: nothing was
    # produced since the stopped one's last fetch), then the drain.
    assert 0.9 < took < 6, took
    wait_for(lambda: (lambda v: v and v[0] not in (-1, lead.broker_id))(
        agreed([ctl, other], t)), 30, "another leader once the controller runs again")


# ---- a dead broker leaves the ISRs it was in ---------------------------------------------

def test_dead_follower_leaves_the_isr_without_waiting_for_the_lag_time(make_cluster):
    # replica.lag.time.max.ms 30 s: only the controller can take it out sooner.
    c, t = rf3_cluster(make_cluster, **{"replica.lag.time.max.ms": "30000"})
    leader, _isr = agreed(c.brokers, t)
    victim = next(b for b in c.brokers if b.broker_id != leader)
    rest = [b for b in c.brokers if b is not victim]
    lead = c.broker(leader)
    assert metric(lead, "kafka_server_replicamanager_underreplicatedpartitions") == 0
    # An RF-1 topic on the victim goes offline with it.
    solo = topic_name("solo")
    ck_admin(lead).create_topics([NewTopic(solo, 1, replica_assignment=[[victim.broker_id]])]
                                 )[solo].result(15)
    wait_for(lambda: (leader_and_isr(lead, solo) or (None,))[0] == victim.broker_id, 15,
             "%s led by %d" % (solo, victim.broker_id))
    # Each replica's log end and lag, as the leader knows them.
    p = Producer(ck_conf(lead, **{"acks": "all", "message.timeout.ms": 10000}))
    for i in range(20):
        p.produce(t, b"m%d" % i, partition=0)
    p.flush(15)
    q = ("SELECT broker_id, is_leader, in_isr, log_end_offset, lag FROM partition_replicas "
         "WHERE topic = '%s' ORDER BY broker_id" % t)
    level = [(b.broker_id, int(b.broker_id == leader), 1, 20, 0) for b in c.brokers]
    wait_for(lambda: [tuple(r.values()) for r in lead.sql(q)] == level, 10,
             "every replica at 20 with lag 0 in the leader's SQL (%s)" % lead.sql(q))
    # A follower knows its own log end; its leader's view of the others is the leader's.
    mine = {r["broker_id"]: r for r in victim.sql(q)}
    assert mine[victim.broker_id]["log_end_offset"] == 20
    assert mine[leader]["log_end_offset"] is None and mine[leader]["lag"] is None
    assert metric(lead, "kafka_server_replicafetchermanager_maxlag") == 0
    t0 = time.monotonic()
    victim.kill()
    want = tuple(sorted(b.broker_id for b in rest))
    wait_for(lambda: (agreed(rest, t) or (None, ()))[1] == want, SESSION_MS / 1000 + 10,
             "broker %d out of the ISR" % victim.broker_id)
    took = time.monotonic() - t0
    report("dead follower out of the ISR after %.1f s (session timeout %.0f s, "
           "replica.lag.time.max.ms 30 s)", took, SESSION_MS / 1000)
    assert took < 20
    assert agreed(rest, t)[0] == leader, "the leader must not change for a follower"
    assert "broker %d leaves the ISR (broker gone)" % victim.broker_id in log_of(
        active_controller(c))
    # acks=all goes on with two in the ISR.
    res = []
    p.produce(t, b"after", partition=0, on_delivery=lambda e, m: res.append(e))
    p.flush(15)
    assert res == [None]
    # The dead follower's lag grows; the live one's stays 0.
    lagging = [(leader, 1, 1, 21, 0), (victim.broker_id, 0, 0, 20, 1)] + [
        (b.broker_id, 0, 1, 21, 0) for b in rest if b.broker_id != leader]
    wait_for(lambda: sorted(tuple(r.values()) for r in lead.sql(q)) == sorted(lagging), 5,
             "the dead follower's lag of 1 in the leader's SQL (%s)" % lead.sql(q))
    assert metric(lead, "kafka_server_replicafetchermanager_maxlag") == 1
    assert sum(metric(b, "kafka_server_replicamanager_isrshrinks_total") for b in rest) >= 1
    # Offline: no live leader, on every broker's SQL; counted by the controller.
    for b in rest:
        assert b.sql("SELECT offline, under_replicated FROM partitions WHERE topic = '%s'"
                     % solo) == [{"offline": 1, "under_replicated": 0}]
    assert sum(metric(b, "kafka_controller_kafkacontroller_offlinepartitionscount")
               for b in rest) == 1
    # What SQL and /metrics show.
    for b in rest:
        row = b.sql("SELECT under_replicated, offline, isr FROM partitions "
                    "WHERE topic = '%s'" % t)[0]
        assert (row["under_replicated"], row["offline"]) == (1, 0), row
    assert metric(lead, "kafka_server_replicamanager_underreplicatedpartitions") == 1
    victim.start()
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 60,
             "broker %d back in the ISR" % victim.broker_id)
    assert metric(lead, "kafka_server_replicamanager_isrexpands_total") >= 1
    wait_for(lambda: sum(metric(b, "kafka_controller_kafkacontroller_offlinepartitionscount")
                         for b in c.brokers) == 0, 15, "no offline partition")
    wait_for(lambda: metric(lead, "kafka_server_replicamanager_underreplicatedpartitions") == 0,
             10, "no under-replicated partition on the leader")


def test_a_stopped_follower_leaves_the_isr_every_time(make_cluster):
    """SIGTERM to a follower, several times: each time the others agree
    within a few seconds that it is out of the ISR (controlled shutdown,
    or its registration gone), never only after replica.lag.time.max.ms
    (30 s here, so acks=all producers would stall that long)."""
    c, t = rf3_cluster(make_cluster, **{"replica.lag.time.max.ms": "30000"})
    leader, _isr = agreed(c.brokers, t)
    # A second topic led by each follower in turn: a follower that leads
    # something hands that over first, one that leads nothing does not.
    followers = [b for b in c.brokers if b.broker_id != leader]
    led = topic_name("led")
    ck_admin(c.broker(leader)).create_topics([NewTopic(led, 1, replica_assignment=[
        [followers[0].broker_id, leader, followers[1].broker_id]])])[led].result(15)
    wait_for(lambda: (agreed(c.brokers, led) or (None, ()))[1] == (1, 2, 3), 30,
             "all three in the ISR of %s" % led)
    took = []
    for rnd in range(6):
        victim = followers[rnd % 2]
        rest = [b for b in c.brokers if b is not victim]
        want = tuple(sorted(b.broker_id for b in rest))
        t0 = time.monotonic()
        assert victim.stop() == 0
        wait_for(lambda: all((agreed(rest, x) or (None, ()))[1] == want for x in (t, led)), 5,
                 "round %d: broker %d out of the ISRs of %s and %s" % (
                     rnd, victim.broker_id, t, led))
        took.append(time.monotonic() - t0)
        victim.start()
        wait_for(lambda: all((agreed(c.brokers, x) or (None, ()))[1] == (1, 2, 3)
                             for x in (t, led)), 60,
                 "round %d: broker %d back in the ISRs" % (rnd, victim.broker_id))
    report("stopped follower out of the ISR after %s s", ", ".join("%.1f" % x for x in took))


def test_dead_controller_leaves_the_isrs_it_followed_in(make_cluster):
    """The broker that dies is the controller: the next one, once elected,
    takes it out of the ISRs."""
    c, _t = rf3_cluster(make_cluster, **{"replica.lag.time.max.ms": "30000"})
    ctl, lead, other, t = controller_follows(c, "ctl")
    ctl.kill()
    want = tuple(sorted((lead.broker_id, other.broker_id)))
    wait_for(lambda: agreed([lead, other], t) == (lead.broker_id, want),
             SESSION_MS / 1000 + 10, "controller %d out of the ISR" % ctl.broker_id)


# ---- preferred-leader election -----------------------------------------------------------

def elect_leaders(b, version, topics, election_type=0):
    """ElectLeaders v0/v1 (topics: {name: [partitions]} or None for all):
    (top-level error or None for v0, {(topic, partition): error})."""
    body = b""
    if version >= 1:
        body += kr.i8(election_type)
    body += kr.array(None if topics is None else [
        kr.string(t) + kr.array(ps, kr.i32) for t, ps in topics.items()])
    body += kr.i32(10000)
    with kr.Conn(b.port, timeout=5) as c:
        r = c.request(API_ELECT_LEADERS, version, body, timeout=5)
    r.i32()                                        # ThrottleTimeMs
    top = r.i16() if version >= 1 else None
    out = {}
    for t, parts in r.array(lambda r: (r.string(), r.array(
            lambda r: (r.i32(), r.i16(), r.string())))):
        for pid, err, _msg in parts:
            out[(t, pid)] = err
    return top, out


def elect_leaders_v2(b, topics, election_type=0, timeout_ms=10000):
    """ElectLeaders v2 (flexible) in raw frames, every field of the answer
    read: (ErrorCode, {(topic, partition): (error, message)})."""
    body = kr.i8(election_type) + kr.carray(
        [kr.cstring(t) + kr.carray([kr.i32(p) for p in ps]) + kr.tags()
         for t, ps in topics.items()]) + kr.i32(timeout_ms) + kr.tags()
    with kr.Conn(b.port, timeout=timeout_ms / 1000 + 5) as c:
        r = c.request_flex(API_ELECT_LEADERS, 2, body, timeout=timeout_ms / 1000 + 5)
    assert r.i32() == 0                            # ThrottleTimeMs
    top = r.i16()
    results = r.carray(lambda x: (x.cstring(), x.carray(
        lambda y: (y.i32(), y.i16(), y.cstring(), y.tags())), x.tags()))
    assert r.tags() == {} and r.remaining() == 0
    out = {}
    for t, parts, ttags in results:
        assert ttags == {}
        for pid, err, msg, ptags in parts:
            assert ptags == {}
            out[(t, pid)] = (err, msg)
    return top, out


def state_znode(c, t, p=0):
    """Partition p's state znode in ZooKeeper, as JSON."""
    got = cl_zk_get(c.zk_connect, "/brokers/topics/%s/partitions/%d/state" % (t, p))
    return json.loads(got[0]) if got else None


def metadata_leader_epoch(b, t):
    """(leader, leader epoch) of partition 0 in b's Metadata v12."""
    with kr.Conn(b.port, timeout=5) as conn:
        (mt,) = metadata_v12(conn, [(None, t)])["topics"]
    (part,) = mt["partitions"]
    return part[2], part[3]


def move_leadership_away(c, t):
    """Kills partition 0's leader (its preferred replica), waits for another
    to lead, restarts it and waits until it is back in the ISR.  Returns
    (preferred, the leader meanwhile)."""
    prefer = replicas_of(c.brokers[0], t)[0][0]
    assert agreed(c.brokers, t)[0] == prefer, "a new partition is led by its first replica"
    victim = c.broker(prefer)
    rest = [b for b in c.brokers if b is not victim]
    victim.kill()
    other = wait_for(lambda: (lambda v: v[0] if v and v[0] not in (-1, prefer) else None)(
        agreed(rest, t)), SESSION_MS / 1000 + 15, "a new leader after killing %d" % prefer)
    victim.start()
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 60,
             "broker %d back in the ISR" % prefer)
    return prefer, other


def test_leadership_goes_back_to_the_preferred_replica_once_it_is_in_the_isr(make_cluster):
    c, t = rf3_cluster(make_cluster, **{"leader.imbalance.check.interval.seconds": "1"})
    prefer, other = move_leadership_away(c, t)
    t0 = time.monotonic()
    wait_for(lambda: (agreed(c.brokers, t) or (None,))[0] == prefer, 15,
             "broker %d to lead again (auto.leader.rebalance.enable)" % prefer)
    report("preferred replica %d led again %.1f s after rejoining the ISR "
           "(leader.imbalance.check.interval.seconds 1)", prefer, time.monotonic() - t0)
    logs = "".join(log_of(b) for b in c.brokers)
    assert "leader %d -> %d" % (other, prefer) in logs and "(preferred replica)" in logs


def test_elect_leaders_moves_leadership_to_the_preferred_replica(make_cluster):
    c, t = rf3_cluster(make_cluster, **{"auto.leader.rebalance.enable": "false"})
    prefer, other = move_leadership_away(c, t)
    time.sleep(2)
    assert agreed(c.brokers, t)[0] == other, "no election without auto.leader.rebalance"
    ctl = active_controller(c)
    not_ctl = next(b for b in c.brokers if b is not ctl)
    # Only the controller elects; the others send the client to it.
    assert elect_leaders(not_ctl, 1, {t: [0]}) == (NOT_CONTROLLER, {(t, 0): NOT_CONTROLLER})
    # UNCLEAN is refused (not served yet); unknown partitions are named.
    assert elect_leaders(ctl, 1, {t: [0]}, election_type=1)[1] == {(t, 0): INVALID_REQUEST}
    assert elect_leaders(ctl, 1, {t: [7], "no-such-topic": [0]})[1] == {
        (t, 7): UNKNOWN_TOPIC_OR_PARTITION, ("no-such-topic", 0): UNKNOWN_TOPIC_OR_PARTITION}
    assert elect_leaders_v2(not_ctl, {t: [0]}) == (NOT_CONTROLLER,
                                                   {(t, 0): (NOT_CONTROLLER, None)})
    before = state_znode(c, t)
    assert metadata_leader_epoch(ctl, t) == (other, before["leader_epoch"])
    # v2 on the wire; answered once ZooKeeper holds the election, so the
    # state znode and the controller's own Metadata show it at once.
    assert elect_leaders_v2(ctl, {t: [0]}) == (0, {(t, 0): (0, None)})
    after = state_znode(c, t)
    assert after["leader"] == prefer and after["leader_epoch"] == before["leader_epoch"] + 1
    assert metadata_leader_epoch(ctl, t) == (prefer, after["leader_epoch"])
    wait_for(lambda: (agreed(c.brokers, t) or (None,))[0] == prefer, 10,
             "broker %d to lead after ElectLeaders" % prefer)
    assert agreed(c.brokers, t)[1] == (1, 2, 3)
    # Metadata's LeaderEpoch is the state znode's on every broker
    for b in c.brokers:
        wait_for(lambda: metadata_leader_epoch(b, t) == (prefer, after["leader_epoch"]), 10,
                 "broker %d to answer leader epoch %d" % (b.broker_id, after["leader_epoch"]))
    # Done: nothing to elect.  v0, and a null list (every partition) leaves
    # out those that need no election.
    assert elect_leaders(ctl, 0, {t: [0]}) == (None, {(t, 0): ELECTION_NOT_NEEDED})
    assert elect_leaders(ctl, 1, None) == (0, {})


def test_elect_leaders_standalone_needs_no_election(start_broker):
    b = start_broker()
    t = topic_name("elect")
    ck_admin(b).create_topics([NewTopic(t, 2, 1)])[t].result(15)
    assert elect_leaders(b, 1, {t: [0, 1, 5]}) == (0, {
        (t, 0): ELECTION_NOT_NEEDED, (t, 1): ELECTION_NOT_NEEDED,
        (t, 5): UNKNOWN_TOPIC_OR_PARTITION})
    # A null topic name is not in the schema: the connection closes, unanswered.
    with kr.Conn(b.port, timeout=5) as c:
        c.send(API_ELECT_LEADERS, 1, kr.i8(0) + kr.array([kr.string(None) + kr.array(
            [0], kr.i32)]) + kr.i32(1000))
        assert c.wait_closed(5) == b""
