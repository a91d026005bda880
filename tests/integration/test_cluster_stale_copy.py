"""A stale replica never wins (issue 28, item 4): after a whole-cluster
SIGKILL, a broker that comes back first on an old copy of its data
directory must not lead the partitions it shares with brokers holding the
real data, even though ZooKeeper still lists it in every ISR and it wins
the controller.  The controller compares the returning ISR members' log
ends (each broker publishes them in /broker_log_ends/<id> before it
registers) and elects the longest, waiting leader.recovery.wait.ms for the
others to return (daemon/cluster/cluster_recovery.c).

A broker that registers anew while the controller still sees it alive (a
bounce: a new registration czxid) leaves every ISR it was in, even when a
later write to the partition's state makes it look current (cl_leaders.c
L7, Kafka's broker epochs of KIP-380).

Each test prints acknowledged, read, lost and duplicated.
"""
import json
import re
import shutil
import time

import pytest
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import (live_brokers, make_cluster, wait_for, zk,  # noqa: F401
                             cl_zk_children, zk_delete, cl_zk_get, zk_missing, zk_read_only,
                             cl_zk_set)
from support import ck_admin, ck_producer, consume, produce_ok, report, topic_name

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

SESSION_MS = 3000
PARTS = 3
# Each broker leads one partition; broker 1 (the one restarted on the old
# copy) is in every ISR.
ASSIGNMENT = [[1, 2, 3], [2, 3, 1], [3, 1, 2]]


def values(prefix, n):
    return [{"value": b"%s-%05d" % (prefix, i), "partition": i % PARTS} for i in range(n)]


def states(b, t):
    """{partition: (leader, sorted ISR)} as broker b answers Metadata, or None."""
    try:
        with kr.Conn(b.port, timeout=3) as c:
            r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [t], False), timeout=3)
        parts = kr.parse_metadata(r, 5)["topics"].get(t, (None, []))[1]
    except (OSError, ValueError):
        return None
    return {pid: (leader, tuple(sorted(isr))) for _e, pid, leader, _r, isr, _o in parts}


def all_led(brokers, t):
    """The partitions' states once every broker agrees and each partition
    has a live leader; else None."""
    views = [states(b, t) for b in brokers]
    if any(v is None or len(v) != PARTS for v in views) or \
            any(v != views[0] for v in views):
        return None
    ids = {b.broker_id for b in brokers}
    return views[0] if all(s[0] in ids for s in views[0].values()) else None


def cluster(make_cluster, wait_ms):
    c = make_cluster(3, session_timeout_ms=SESSION_MS,
                     overrides={"leader.recovery.wait.ms": str(wait_ms)})
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "every broker to list three live brokers")
    return c


def create(c, t):
    fs = ck_admin(c.brokers[0]).create_topics(
        [NewTopic(t, PARTS, replica_assignment=ASSIGNMENT, config={"min.insync.replicas": "2"})],
        operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: (lambda s: s and all(v[1] == (1, 2, 3) for v in s.values()))(
        all_led(c.brokers, t)), 30, "every ISR of %s to hold all three brokers" % t)


def copy_data_dir(b, dst):
    """A crash-consistent copy of b's data directory: taken while b is
    stopped (SIGSTOP, well inside the session timeout)."""
    b.sigstop()
    try:
        # The admin socket is no file to copy (a new one is made at start).
        shutil.copytree(b.data_dir, dst, symlinks=True,
                        ignore=shutil.ignore_patterns("admin.sock"))
    finally:
        b.sigcont()


def replace_data_dir(b, src):
    shutil.rmtree(b.data_dir)
    shutil.copytree(src, b.data_dir, symlinks=True)


def read_all(brokers, t, count):
    """Every message of t; fewer than count (lost ones) are read too, for
    the report."""
    kw = {"bootstrap.servers": ",".join(b.bootstrap for b in brokers)}
    try:
        got = consume(brokers[0], t, list(range(PARTS)), count, timeout=60, **kw)
    except AssertionError:
        got = consume(brokers[0], t, list(range(PARTS)), 1, timeout=10, settle=3, **kw)
    return [m.value() for m in got]


def this_start(b):
    """b's log since its last start."""
    return b.log_text().rsplit("\n===== start ", 1)[-1]


def sessions_ended(c):
    """Waits for the killed brokers' registrations to expire: a broker 1
    registered while ZooKeeper still lists the others only leaves their
    ISRs as a restarted member (cl_recovery.c R6), and nobody compares
    logs (nor can it lead alone once they are gone)."""
    wait_for(lambda: not cl_zk_children(c.zk_connect, "/brokers/ids"), 30,
             "the killed brokers' registrations to expire")


def tally(acked, got):
    seen = set(got)
    lost = [v for v in acked if v not in seen]
    return lost, len(got) - len(seen)


def forge_log_ends(c, broker_id, t):
    """Puts in /broker_log_ends/<id> what an earlier run could have left
    there (another session, logs longer than anyone's) and makes the
    broker's own write of it fail (read-only): the controller must not
    take that text for the broker's logs now (cl_recovery.c R3)."""
    path = "/broker_log_ends/%d" % broker_id
    text = b"sluice-log-ends 2 1\n" + b"".join(
        b"999 999999 999999 %d %s\n" % (p, t.encode()) for p in range(PARTS))
    cl_zk_set(c.zk_connect, path, text)
    zk_read_only(c.zk_connect, path)


@pytest.mark.parametrize("publish", ["published", "write-failed"])
def test_stale_copy_restarted_first_does_not_win(make_cluster, tmp_path, publish):
    c = cluster(make_cluster, 30000)
    x, rest = c.broker(1), [c.broker(2), c.broker(3)]
    t = topic_name("stale")
    create(c, t)
    p = ck_producer(c.brokers[0], **{"bootstrap.servers": c.bootstrap, "linger.ms": 5})
    first = values(b"first", 600)
    produce_ok(p, t, first)
    old = str(tmp_path / "broker-1-old")
    copy_data_dir(x, old)
    second = values(b"second", 3000)
    produce_ok(p, t, second)
    p.flush(10)
    del p
    # The high watermarks reach each broker's SQLite (every 5 s at most):
    # the controller names the stale copy by its log ending below them.
    time.sleep(6)
    for b in c.brokers:
        b.kill()
    replace_data_dir(x, old)
    if publish == "write-failed":
        forge_log_ends(c, 1, t)
    sessions_ended(c)

    x.start()                                     # alone: it wins the controller
    wait_for(lambda: "this broker (1) is the controller" in this_start(x), 30,
             "broker 1, on the old copy, to be the controller")
    time.sleep(1.5)                               # time enough to elect itself
    stale_led = all_led([x], t)
    t0 = time.monotonic()
    for b in rest:
        b.start()
    # The view shows broker 1's old leaderships until the controller writes
    # new ones: wait for those writes (or, on the old code, for any leader).
    elected = [re.compile(r"partition %s-%d: [^\n]* leads at leader epoch" % (t, p))
               for p in range(PARTS)]
    wait_for(lambda: all(e.search(this_start(x)) for e in elected)
             or (stale_led and all_led(c.brokers, t)), 30, "the controller's elections")
    took = time.monotonic() - t0

    acked = [m["value"] for m in first + second]
    got = read_all(c.brokers, t, len(acked))
    # Read after the reads: until the elections' writes reach every broker,
    # all agree on the old state (broker 1 leading, held).
    led = wait_for(lambda: all_led(c.brokers, t), 30, "a leader for every partition")
    lost, dups = tally(acked, got)
    report("stale copy restarted first: acknowledged %d (acks=all), read %d, lost %d, "
           "duplicated %d; leaders %s elected %.2f s after the others' start",
           len(acked), len(got), len(lost), dups,
           ",".join("%d:%d" % (pid, s[0]) for pid, s in sorted(led.items())), took)
    assert not lost, "%d acknowledged messages lost, first %r" % (len(lost), lost[:5])
    assert stale_led is None, "broker 1 led on its stale copy: %r" % (stale_led,)
    assert "waiting up to 30000 ms" in this_start(x), "the controller did not wait"
    assert sorted(got) == sorted(acked)
    assert all(s[0] != 1 for s in led.values()), \
        "the stale broker 1 was elected: %r" % (led,)
    logs = "".join(b.log_text() for b in c.brokers)
    assert "its data directory is older than what the cluster recorded" in logs
    assert "an unclean leader election" not in logs and "are lost" not in logs, \
        "a replica truncated committed data"
    if publish == "write-failed":
        assert "cannot write /broker_log_ends/1" in this_start(x)
        assert "/broker_log_ends/1 names ZooKeeper session 0x1," in this_start(x)
    # Broker 1 catches up from the new leaders and is taken back into the ISRs.
    wait_for(lambda: (lambda s: s and all(v[1] == (1, 2, 3) for v in s.values()))(
        all_led(c.brokers, t)), 60, "broker 1 back in every ISR")


def test_stale_copy_alone_leads_after_the_wait(make_cluster, tmp_path):
    """The others never return: after leader.recovery.wait.ms the stale
    broker leads with what it has, and says so."""
    wait_ms = 3000
    c = cluster(make_cluster, wait_ms)
    x = c.broker(1)
    t = topic_name("alone")
    create(c, t)
    p = ck_producer(c.brokers[0], **{"bootstrap.servers": c.bootstrap, "linger.ms": 5})
    first = values(b"first", 300)
    produce_ok(p, t, first)
    old = str(tmp_path / "broker-1-old")
    copy_data_dir(x, old)
    produce_ok(p, t, values(b"second", 300))
    del p
    for b in c.brokers:
        b.kill()
    replace_data_dir(x, old)
    sessions_ended(c)
    x.start()
    t0 = time.monotonic()
    alone = {p: (1, (1,)) for p in range(PARTS)}
    wait_for(lambda: all_led([x], t) == alone, wait_ms / 1000 + 30,
             "broker 1 to lead alone (ISR [1])")
    took = time.monotonic() - t0
    assert "came back within leader.recovery.wait.ms" in this_start(x)
    got = read_all([x], t, len(first))
    lost, dups = tally([m["value"] for m in first], got)
    report("stale copy alone: led %.2f s after its start (leader.recovery.wait.ms=%d); of the %d "
           "messages its copy had, read %d, lost %d, duplicated %d", took, wait_ms,
           len(first), len(got), len(lost), dups)
    assert took >= wait_ms / 1000 * 0.5 and not lost and not dups


def zk_json(c, path):
    got = cl_zk_get(c.zk_connect, path)
    return json.loads(got[0]) if got and got[0] else None


@pytest.mark.serial
def test_bounced_follower_leaves_the_isr(make_cluster):
    """Follower F restarts and registers anew while the controller is
    stopped (so it never sees F's registration gone), and the leader then
    writes the state (it takes the stopped controller out of the ISR),
    which makes F's registration older than the state.  The controller,
    once back, still takes F out of the ISR: F's log proved nothing at its
    restart (on the old code F stayed, and a later failover could elect it
    without comparing logs)."""
    c = make_cluster(3, session_timeout_ms=15000,
                     overrides={"replica.lag.time.max.ms": "2000"})
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "every broker to list three live brokers")
    ctl = wait_for(lambda: (zk_json(c, "/controller") or {}).get("brokerid"), 30,
                   "a controller")
    lead, f = [b.broker_id for b in c.brokers if b.broker_id != ctl]
    t = topic_name("bounce")
    state = "/brokers/topics/%s/partitions/0/state" % t
    ck_admin(c.broker(lead)).create_topics(
        [NewTopic(t, 1, replica_assignment=[[lead, f, ctl]])], operation_timeout=15)[t] \
        .result(timeout=20)
    wait_for(lambda: sorted((zk_json(c, state) or {}).get("isr", [])) == sorted([lead, f, ctl]),
             30, "the ISR to hold all three brokers")
    p = ck_producer(c.broker(lead), **{"bootstrap.servers": c.bootstrap})
    produce_ok(p, t, [{"value": b"m-%d" % i} for i in range(100)])
    del p

    c.broker(ctl).sigstop()
    t0 = time.monotonic()
    c.broker(f).kill()
    assert zk_delete(c.zk_connect, "/brokers/ids/%d" % f)
    c.broker(f).start()
    # The leader takes the stopped controller out; F stays (it caught up).
    st = wait_for(lambda: (lambda s: s if s and ctl not in s["isr"] else None)(
        zk_json(c, state)), 10, "the leader to take broker %d out of the ISR" % ctl)
    paused = time.monotonic() - t0
    c.broker(ctl).sigcont()
    assert st["leader"] == lead and f in st["isr"], st
    assert paused < c.session_timeout_s * 0.8, "the controller's session may have expired"

    left = re.compile(r"partition %s-0: broker %d leaves the ISR \(it registered" % (t, f))
    wait_for(lambda: left.search(c.broker(ctl).log_text()), 20,
             "the controller to take the bounced broker %d out of the ISR" % f)
    wait_for(lambda: sorted((zk_json(c, state) or {}).get("isr", [])) == sorted([lead, f, ctl]),
             30, "brokers %d and %d back in the ISR" % (f, ctl))
    report("bounced follower: controller stopped %.2f s; broker %d left the ISR and "
           "rejoined", paused, f)
