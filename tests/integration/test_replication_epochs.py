"""Leader epochs and truncation (issue 16, item 3): a replica that comes
back finds where its log leaves its new leader's with OffsetForLeaderEpoch
and truncates exactly there, so a tail only it had is never served, and a
replica whose data directory was wiped copies everything again.

The divergent tail is made for real: the followers are SIGSTOPped, the
leader takes acks=1 writes that only it has, is SIGKILLed, the followers
go on, one of them is elected and takes new writes at the same offsets,
and the old leader is started again.  Afterwards the replicas' segment
files are identical byte for byte (the divergent offsets hold the new
leader's batches on every broker), every acks=all message is read back
once and in order, and the test prints acknowledged, read, lost and
duplicated.
"""
import os
import shutil
import time
import types

import pytest
from confluent_kafka.admin import ConfigResource, NewTopic

import kafka_raw as kr
from cluster_support import (live_brokers, make_cluster, timed, wait_for, zk,  # noqa: F401
                             zk_missing)
from support import ck_admin, ck_producer, consume, produce_ok, report, topic_name
from test_replication_failover import agreed
from test_replication_follow import assert_identical_replicas, create, local_ends

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

SESSION_MS = 3000
FENCED_LEADER_EPOCH = 74


def values(prefix, n):
    return [{"value": b"%s-%05d" % (prefix, i), "partition": 0} for i in range(n)]


def level(brokers, t, want=None):
    """The log end all replicas on brokers agree on (and want, if given)."""
    ends = {local_ends(b, t).get(0, (None, None))[1] for b in brokers}
    if len(ends) != 1 or None in ends:
        return None
    end = ends.pop()
    return end if want is None or end == want else None


def checkpoint(b, t):
    with open(os.path.join(b.partition_dir(t, 0), "leader-epoch-checkpoint")) as f:
        lines = f.read().split("\n")
    assert lines[0] == "0" and lines[-1] == "", lines
    entries = [tuple(int(x) for x in ln.split(" ")) for ln in lines[2:-1]]
    assert int(lines[1]) == len(entries), lines
    return entries


def three_brokers(make_cluster, lag_ms):
    """Three brokers, each listing all three (a replication factor of 3
    needs three live brokers)."""
    c = make_cluster(3, session_timeout_ms=SESSION_MS,
                     overrides={"replica.lag.time.max.ms": str(lag_ms)})
    wait_for(lambda: all(len(live_brokers(b)) == 3 for b in c.brokers), 30,
             "every broker to list three live brokers")
    return c


def check_read(brokers, t, acked_all):
    """Every acks=all message once and in order, nothing else."""
    got = [m.value() for m in consume(brokers[0], t, [0], len(acked_all), timeout=30,
                                      **{"bootstrap.servers": ",".join(b.bootstrap
                                                                       for b in brokers)})]
    seen = set(got)
    lost = [v for v in acked_all if v not in seen]
    dups = len(got) - len(seen)
    return got, lost, dups


def test_killed_leader_with_a_divergent_tail_truncates_it_on_return(make_cluster):
    c = three_brokers(make_cluster, lag_ms=30000)
    t = topic_name("diverge")
    fs = ck_admin(c.brokers[0]).create_topics(
        [NewTopic(t, 1, 3, config={"min.insync.replicas": "1"})], operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 30,
             "the ISR of %s to hold all three brokers" % t)
    old_epoch = 0

    pre = values(b"pre", 300)
    produce_ok(ck_producer(c.brokers[0], **{"bootstrap.servers": c.bootstrap}), t, pre)
    wait_for(lambda: level(c.brokers, t, 300), 20, "every replica at 300")

    leader_id = agreed(c.brokers, t)[0]
    old = c.broker(leader_id)
    rest = [b for b in c.brokers if b is not old]
    # The tail only the old leader gets: its followers are stopped (well
    # inside the session timeout and replica.lag.time.max.ms, so they stay
    # registered and in the ISR), acks=1 answers without them.  A fetch
    # each follower sent before it stopped is still answered with the
    # first acks=1 batches (they wait in its socket until SIGCONT); the
    # second round reaches the old leader alone.
    for b in rest:
        b.sigstop()
    try:
        tail = values(b"tail", 80)
        p1 = ck_producer(old, acks=1, **{"linger.ms": 0})
        produce_ok(p1, t, tail[:40], timeout=10)
        produce_ok(p1, t, tail[40:], timeout=10)
        tail_end = local_ends(old, t)[0][1]
        assert tail_end == 380, tail_end
        old.kill()
    finally:
        for b in rest:
            b.sigcont()
    new_id = wait_for(lambda: (lambda v: v[0] if v and v[0] not in (-1, leader_id) else None)(
        agreed(rest, t)), SESSION_MS / 1000 + 20, "a new leader after killing %d" % leader_id)
    new = c.broker(new_id)
    diverge = local_ends(new, t)[0][1]   # the new leader's log end: the divergence
    assert 300 <= diverge <= 340, diverge

    # The new leader's epoch starts at its log end: asked for the old epoch
    # (as the returning replica asks), it answers that offset; a request
    # carrying the old epoch as its current one is fenced.
    oe = wait_for(lambda: (lambda r: r if r[(t, 0)][0] == 0 else None)(
        kr.offset_for_leader_epoch(new.port, 3, [(t, [(0, -1, old_epoch)])])),
        10, "OffsetForLeaderEpoch answered by the new leader")
    assert oe[(t, 0)] == (0, old_epoch, diverge), oe
    fenced = kr.offset_for_leader_epoch(new.port, 3, [(t, [(0, old_epoch, old_epoch)])])
    assert fenced[(t, 0)][0] == FENCED_LEADER_EPOCH, fenced

    after = values(b"new", 100)
    produce_ok(ck_producer(new, **{"bootstrap.servers": ",".join(b.bootstrap for b in rest)}),
               t, after)
    old.start()
    end = diverge + len(after)
    took, _ = timed(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3)
                    and level(c.brokers, t, end), 60,
                    "broker %d back in the ISR of %s with every replica at %d"
                    % (leader_id, t, end))
    assert "log end 380 truncated to %d" % diverge in old.log_text(), \
        "the returning leader did not cut its tail at the divergence"

    acked_all = [m["value"] for m in pre + after]
    kept = [m["value"] for m in tail[:diverge - 300]]   # acks=1, reached a follower
    got, lost, dups = check_read(c.brokers, t, acked_all + kept)
    report("divergent tail: acks=all acknowledged %d, read %d, lost %d, duplicated %d; of "
           "%d acks=1 messages %d reached the new leader and %d, only the killed leader's "
           "(offsets %d-379), were truncated; its replica level again %.2f s after its "
           "restart", len(acked_all), len(got), len(lost), dups, len(tail), len(kept),
           380 - diverge, diverge, took)
    assert not lost and not dups
    assert got == [m["value"] for m in pre] + kept + [m["value"] for m in after], \
        "not in order, or other messages among them"

    for b in c.brokers:
        b.stop()
    # Byte for byte: offsets 300-399 hold the new leader's batches everywhere.
    assert_identical_replicas(c, t, 1)
    # The same history on every replica, as far as the log goes (stopping
    # the brokers one by one moved leadership on: an epoch with no batch).
    hist = {b.broker_id: [e for e in checkpoint(b, t) if e[1] < end] for b in c.brokers}
    assert len({tuple(h) for h in hist.values()}) == 1, hist
    assert hist[leader_id][0] == (0, 0) and hist[leader_id][-1][1] == diverge, hist


def test_replica_with_wiped_data_dir_rejoins_and_copies_everything(make_cluster):
    c = three_brokers(make_cluster, lag_ms=2000)
    t = topic_name("wiped")
    create(c, t, 1, replica_assignment=[[1, 2, 3]])
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 30,
             "the ISR of %s to hold all three brokers" % t)
    p = ck_producer(c.brokers[0], **{"bootstrap.servers": c.bootstrap, "linger.ms": 5})
    first = values(b"a", 1500)
    produce_ok(p, t, first)
    wiped = c.broker(3)
    wiped.kill()
    for name in os.listdir(wiped.data_dir):
        path = os.path.join(wiped.data_dir, name)
        if os.path.isdir(path):
            shutil.rmtree(path)
        else:
            os.unlink(path)
    # acks=all waits for the ISR: the dead replica leaves it first.
    wait_for(lambda: (agreed(c.brokers[:2], t) or (None, ()))[1] == (1, 2), 30,
             "broker 3 out of the ISR of %s" % t)
    second = values(b"b", 1500)
    produce_ok(p, t, second)
    t0 = time.monotonic()
    wiped.start()
    wait_for(lambda: level(c.brokers, t, 3000), 60, "the wiped replica to copy all 3000")
    took = time.monotonic() - t0
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2, 3), 30,
             "broker 3 back in the ISR of %s" % t)
    acked_all = [m["value"] for m in first + second]
    got, lost, dups = check_read(c.brokers, t, acked_all)
    report("wiped replica: acknowledged %d, read %d, lost %d, duplicated %d; all %d bytes "
           "copied again %.2f s after its start", len(acked_all), len(got), len(lost), dups,
           c.brokers[0].log_bytes(t), took)
    assert not lost and not dups and got == acked_all
    for b in c.brokers:
        b.stop()
    assert_identical_replicas(c, t, 1)


def test_unclean_election_only_when_enabled_and_the_loss_is_logged(make_cluster):
    """Topic on brokers 1 and 2 (broker 3 is only there to be the
    controller when both die).  Broker 2 dies, leaves the ISR, and misses
    acks=all writes broker 1 alone acknowledged; then broker 1 dies and 2
    comes back.  With unclean.leader.election.enable=false (the default)
    the partition stays offline; once the topic enables it, broker 2 leads,
    and broker 1, back, cuts what it had above broker 2's log and logs
    those committed offsets as lost."""
    c = three_brokers(make_cluster, lag_ms=1500)
    b1, b2, b3 = c.brokers
    t = topic_name("unclean")
    create(c, t, 1, replica_assignment=[[1, 2]])
    wait_for(lambda: (agreed(c.brokers, t) or (None, ()))[1] == (1, 2), 30,
             "the ISR of %s to hold brokers 1 and 2" % t)
    p = ck_producer(b1, **{"bootstrap.servers": b1.bootstrap})
    both = values(b"both", 200)
    produce_ok(p, t, both)
    wait_for(lambda: level([b1, b2], t, 200), 20, "both replicas at 200")
    b2.kill()
    wait_for(lambda: (agreed([b1, b3], t) or (None, ()))[1] == (1,), 30,
             "broker 2 out of the ISR")
    only1 = values(b"only1", 50)                 # acks=all with the ISR {1}
    produce_ok(p, t, only1)
    b1.kill()
    b2.start()
    wait_for(lambda: (agreed([b2, b3], t) or (None,))[0] == -1, SESSION_MS / 1000 + 20,
             "the partition offline after broker 1 died")
    time.sleep(2)                                # broker 2 alive, not in the ISR
    assert agreed([b2, b3], t)[0] == -1, "elected out of the ISR with unclean election off"

    res = ConfigResource(ConfigResource.Type.TOPIC, t,
                         set_config={"unclean.leader.election.enable": "true"})
    ck_admin(b3).alter_configs([res], request_timeout=15)[res].result(timeout=20)
    wait_for(lambda: (agreed([b2, b3], t) or (None,))[0] == 2, 20,
             "broker 2 elected uncleanly")
    ctl_logs = b2.log_text() + b3.log_text()
    assert "unclean leader election" in ctl_logs, "the controller did not log it"
    after = values(b"after", 30)
    produce_ok(ck_producer(b2, **{"bootstrap.servers": b2.bootstrap}), t, after)
    b1.start()
    wait_for(lambda: level(c.brokers[:2], t, 230), 60, "broker 1 level with broker 2 at 230")
    assert "offsets 200 to 249 were committed" in b1.log_text(), \
        "the returning replica did not log the committed offsets it lost"
    want = [m["value"] for m in both + after]
    got, _lost, dups = check_read([b1, b2, b3], t, want)
    lost = [m["value"] for m in only1 if m["value"] not in set(got)]
    report("unclean election: acknowledged %d (acks=all), read %d, lost %d (all %d "
           "acknowledged by broker 1 alone, as unclean election allows), duplicated %d",
           len(both) + len(only1) + len(after), len(got), len(lost), len(only1), dups)
    assert got == want and dups == 0 and len(lost) == len(only1)
    for b in c.brokers:
        b.stop()
    assert_identical_replicas(types.SimpleNamespace(brokers=[b1, b2]), t, 1)
