"""Exactly-once on a 3-broker cluster (issue 30, Deliver item 7): a
consume-transform-produce loop (confluent-kafka, read_committed group
consumer, transactional producer, offsets sent in each transaction) runs
in a process of its own that is SIGKILLed and restarted with the same
transactional.id every few seconds, while the broker coordinating that
id and the leader of an output partition are SIGKILLed and restarted
too.  At the end a read_committed reader finds every input record's
output exactly once; a read_uncommitted one sees the aborted outputs as
well.

The loop is Loop.SCRIPT, written into the test's tmp dir and run with
the interpreter running the tests.  Its outputs are "VALUE|PARTITION|
OFFSET" of their input, so a lost or a duplicated input shows."""
import os
import random
import signal
import subprocess
import sys
import threading
import time

import pytest
from confluent_kafka import OFFSET_BEGINNING, Consumer, KafkaError, TopicPartition
from confluent_kafka.admin import NewTopic

import kafka_raw as kr
from cluster_support import make_cluster, wait_for, zk, zk_missing  # noqa: F401
from conftest import dies_with_us
from support import ck_admin, ck_conf, ck_producer, produce_ok, report, topic_name
from test_cluster_txn_coordinator import agreed, state_in_sync
from test_txn_coordinator import (NONE, add_partitions, describe_txns, end_txn, init_pid,
                                  list_txns, until_settled)

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

PARTITIONS = 3
N_INPUT = 3000
OVERRIDES = {"transaction.state.log.num.partitions": "3",
             "offsets.topic.num.partitions": "3",
             "group.initial.rebalance.delay.ms": "0"}


class Loop:
    """The consume-transform-produce process, as confluent-kafka's
    eos-transactions example runs it: a fatal error (fenced) ends the
    process (the test starts the next one), an abortable one aborts and
    rewinds the consumer to the group's committed offsets, a retriable
    one retries the commit.  A stop file ends it after its transaction."""

    SCRIPT = r'''
import os, sys, time
from confluent_kafka import Consumer, KafkaException, Producer, TopicPartition

boot, src, dst, group, tid, batch, pause, stop = sys.argv[1:9]
batch, pause = int(batch), float(pause)
common = {"bootstrap.servers": boot, "broker.address.family": "v4",
          "socket.timeout.ms": 10000, "log.connection.close": False}
p = Producer(dict(common, **{"transactional.id": tid, "transaction.timeout.ms": 10000}))
p.init_transactions(60)
c = Consumer(dict(common, **{"group.id": group, "group.instance.id": "eos-loop",
                             "session.timeout.ms": 6000, "isolation.level": "read_committed",
                             "enable.auto.commit": False, "auto.offset.reset": "earliest"}))
c.subscribe([src])
print("started", flush=True)


def rewind():
    parts = c.assignment()
    for tp in c.committed(parts, 30):
        c.seek(TopicPartition(tp.topic, tp.partition, tp.offset if tp.offset >= 0 else -2))


def commit():
    while True:
        try:
            p.commit_transaction(30)
            return
        except KafkaException as e:
            if not e.args[0].retriable():
                raise


while not os.path.exists(stop):
    msgs = [m for m in c.consume(batch, 0.5) if not m.error()]
    if not msgs:
        continue
    try:
        p.begin_transaction()
        for m in msgs:
            p.produce(dst, key=m.key(), partition=m.partition(),
                      value=b"%s|%d|%d" % (m.value(), m.partition(), m.offset()))
        p.flush(30)
        time.sleep(pause)         # the work: a SIGKILL now leaves written records open
        p.send_offsets_to_transaction(c.position(c.assignment()),
                                      c.consumer_group_metadata(), 30)
        commit()
        print("committed", len(msgs), flush=True)
    except KafkaException as e:
        err = e.args[0]
        print("error", err, "fatal" if err.fatal() else "abortable" if
              err.txn_requires_abort() else "other", flush=True)
        if not err.txn_requires_abort():
            sys.exit(3)
        p.abort_transaction(30)
        rewind()
c.close()
p.flush(10)
print("stopped", flush=True)
'''

    def __init__(self, tmp, argv):
        self.path = os.path.join(tmp, "eos_loop.py")
        with open(self.path, "w") as f:
            f.write(self.SCRIPT)
        self.stop_file = os.path.join(tmp, "eos_loop.stop")
        self.log_path = os.path.join(tmp, "eos_loop.log")
        self.argv = [sys.executable, self.path] + [str(a) for a in argv] + [self.stop_file]
        self.proc = None
        self.starts = self.kills = 0
        self.exits = []     # exit statuses of the processes that ended on their own

    def start(self):
        with open(self.log_path, "ab") as log:
            log.write(b"===== start %d\n" % (self.starts + 1))
            log.flush()
            self.proc = subprocess.Popen(dies_with_us(self.argv), stdin=subprocess.DEVNULL,
                                         stdout=log, stderr=subprocess.STDOUT)
        self.starts += 1

    def ensure_running(self):
        if self.proc is None or self.proc.poll() is not None:
            if self.proc is not None:
                self.exits.append(self.proc.returncode)
            self.start()

    def sigkill(self):
        """SIGKILL by PID, waits for it; True if it was running."""
        if self.proc is None or self.proc.poll() is not None:
            return False
        self.proc.send_signal(signal.SIGKILL)
        self.proc.wait(10)
        self.proc = None
        self.kills += 1
        return True

    def stop(self, timeout=40):
        """The stop file, then SIGKILL if it is still running after timeout."""
        open(self.stop_file, "w").close()
        if self.proc is not None:
            try:
                return self.proc.wait(timeout)
            except subprocess.TimeoutExpired:
                self.sigkill()
        return None

    def log_tail(self, n=40):
        try:
            with open(self.log_path, "rb") as f:
                return "\n".join(f.read().decode(errors="replace").splitlines()[-n:])
        except OSError:
            return ""


def leaders(b, topic):
    """{partition: leader} of topic as broker b answers Metadata ({} if it
    does not)."""
    try:
        with kr.Conn(b.port, timeout=3) as c:
            r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False), timeout=3)
        parts = kr.parse_metadata(r, 5)["topics"].get(topic, (None, []))[1]
    except (OSError, ValueError, kr.Closed, kr.Timeout):
        return {}
    return {pid: leader for _e, pid, leader, _r, _isr, _o in parts}


def all_in_sync(b, topic, n):
    with kr.Conn(b.port, timeout=3) as c:
        r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False), timeout=3)
    parts = kr.parse_metadata(r, 5)["topics"].get(topic, (None, []))[1]
    return len(parts) == n and all(len(isr) == 3 and leader >= 0
                                   for _e, _p, leader, _r, isr, _o in parts)


def committed_total(cluster, group, topic):
    """The sum of the group's committed offsets of topic (-1 if unknown)."""
    c = Consumer(ck_conf(cluster, **{"group.id": group, "enable.auto.commit": False}))
    try:
        got = c.committed([TopicPartition(topic, p) for p in range(PARTITIONS)], 10)
        return sum(max(tp.offset, 0) for tp in got)
    except Exception:   # noqa: BLE001 - a broker down: unknown for now
        return -1
    finally:
        c.close()


def read_all(cluster, topic, isolation, timeout=60):
    """Every record of topic's partitions up to their end (the LSO for
    read_committed) as (partition, offset, key, value)."""
    c = Consumer(ck_conf(cluster, **{"group.id": "eos-reader", "enable.auto.commit": False,
                                      "isolation.level": isolation,
                                      "enable.partition.eof": True}))
    try:
        c.assign([TopicPartition(topic, p, OFFSET_BEGINNING) for p in range(PARTITIONS)])
        out, at_end = [], set()
        deadline = time.monotonic() + timeout
        while len(at_end) < PARTITIONS:
            assert time.monotonic() < deadline, "read %d records of %s (%s) in %d s, " \
                "partitions at their end: %s" % (len(out), topic, isolation, timeout, at_end)
            for m in c.consume(1000, 0.2):
                if m.error() is None:
                    out.append((m.partition(), m.offset(), m.key(), m.value()))
                    at_end.discard(m.partition())
                elif m.error().code() == KafkaError._PARTITION_EOF:
                    at_end.add(m.partition())
        return out
    finally:
        c.close()


def started(make_cluster):
    cluster = make_cluster(3, start=False, overrides=OVERRIDES)
    cluster.start()
    wait_for(lambda: agreed(cluster.brokers, "any"), 30, "__transaction_state to be led")
    wait_for(lambda: state_in_sync(cluster.brokers[0]), 30,
             "every partition of __transaction_state to have three replicas in sync")
    return cluster


def make_topics(cluster, *names):
    fs = ck_admin(cluster.brokers[0]).create_topics(
        [NewTopic(t, PARTITIONS, 3, config={"min.insync.replicas": "2"}) for t in names],
        operation_timeout=15)
    for t in names:
        fs[t].result(timeout=20)
    for t in names:
        wait_for(lambda t=t: all_in_sync(cluster.brokers[0], t, PARTITIONS), 30,
                 "%s to have three replicas in sync" % t)


class Runner(threading.Thread):
    """Owns the loop's processes (setpriv's --pdeathsig fires when the
    thread that started a child ends, so one thread starts them all and
    lives until the loop is stopped).  While `chaos` is set it SIGKILLs
    each process 2-4 s after its init_transactions returned (it printed
    "started"), so that every one gets to work before it dies; a process
    that ended on its own is started again at once."""

    def __init__(self, loop):
        super().__init__(daemon=True)
        self.loop = loop
        self.chaos = threading.Event()
        self.finish = threading.Event()
        self.stopped = None       # the last process's exit status
        self.error = None

    def started_count(self):
        try:
            with open(self.loop.log_path, "rb") as f:
                return f.read().count(b"\nstarted\n")
        except OSError:
            return 0

    def run(self):
        rng = random.Random(30)
        loop = self.loop
        up_since, delay = None, rng.uniform(2, 4)
        try:
            while not self.finish.is_set():
                loop.ensure_running()
                if up_since is None and self.started_count() >= loop.starts:
                    up_since = time.monotonic()
                if self.chaos.is_set() and up_since is not None and \
                        time.monotonic() - up_since >= delay:
                    loop.sigkill()
                    up_since, delay = None, rng.uniform(2, 4)
                if loop.proc is None or loop.proc.poll() is not None:
                    up_since = None
                time.sleep(0.05)
            self.stopped = loop.stop()
        except BaseException as e:   # noqa: BLE001 - re-raised by the test
            self.error = e
        finally:
            loop.sigkill()


def bounce(cluster, b, dst, what, progress, done):
    """SIGKILLs broker b, starts it again 2 s later, and waits until every
    partition of dst has its three replicas in sync again."""
    done.append("%s: broker %d SIGKILLed at %d input offsets committed"
                % (what, b.broker_id, progress()))
    b.kill()
    time.sleep(2)
    b.start()
    wait_for(lambda: all_in_sync(b, dst, PARTITIONS), 60,
             "%s to be in sync again after broker %d's restart" % (dst, b.broker_id))


@pytest.mark.serial
def test_exactly_once_through_sigkills_of_the_loop_the_coordinator_and_a_leader(
        make_cluster, tmp_path):
    cluster = started(make_cluster)
    src, dst = topic_name("eos-in"), topic_name("eos-out")
    make_topics(cluster, src, dst)
    acked = produce_ok(ck_producer(cluster), src,
                       [{"key": b"k%05d" % i, "value": b"v%05d" % i} for i in range(N_INPUT)])
    inputs = {(m.partition(), m.offset()): m.value() for m in acked}
    ends = {p: 1 + max(o for q, o in inputs if q == p) for p in range(PARTITIONS)}
    assert len(inputs) == N_INPUT and sum(ends.values()) == N_INPUT

    group, tid = "eos-group", "eos-" + topic_name("tx")
    loop = Loop(str(tmp_path), [cluster.bootstrap, src, dst, group, tid, 50, 0.2])
    runner = Runner(loop)

    def progress():
        return committed_total(cluster, group, src)
    done = []
    try:
        runner.chaos.set()
        runner.start()
        time.sleep(4)
        coord = cluster.broker(wait_for(lambda: agreed(cluster.brokers, tid), 30,
                                        "the coordinator of " + tid))
        bounce(cluster, coord, dst, "coordinator", progress, done)
        time.sleep(3)
        coord = agreed(cluster.brokers, tid)
        lead = wait_for(lambda: leaders(cluster.brokers[0], dst), 30, "output leaders")
        others = [ld for ld in lead.values() if ld >= 0 and ld != coord]
        bounce(cluster, cluster.broker(others[0] if others else lead[0]), dst,
               "output leader", progress, done)
        # the loop's SIGKILLs go on over the first half of the input at least
        wait_for(lambda: runner.error or (loop.kills >= 4 and progress() >= N_INPUT // 2), 90,
                 "4 SIGKILLs of the loop and half of the input committed", interval=0.5)
        runner.chaos.clear()
        killed_at = progress()
        wait_for(lambda: runner.error or progress() == N_INPUT, 60,
                 "the loop to commit every input offset", interval=0.5)
    finally:
        runner.finish.set()
        runner.join(60)
    if runner.error:
        raise runner.error
    assert runner.stopped == 0, loop.log_tail()

    committed = read_all(cluster, dst, "read_committed")
    seen = {}
    for p, _o, key, value in committed:
        v, ip, io = value.split(b"|")
        at = (int(ip), int(io))
        assert inputs.get(at) == v and key == b"k" + v[1:] and p == at[0], (p, key, value)
        seen[at] = seen.get(at, 0) + 1
    lost = sum(1 for at in inputs if at not in seen)
    duplicated = sum(n - 1 for n in seen.values())
    uncommitted = read_all(cluster, dst, "read_uncommitted")
    summary = ("input %d, output %d, lost %d, duplicated %d; read_uncommitted %d; loop started "
               "%d times, SIGKILLed %d, exits %s; committed offsets %d when the kills ended; %s"
               % (N_INPUT, len(committed), lost, duplicated, len(uncommitted), loop.starts,
                  loop.kills, loop.exits, killed_at, "; ".join(done)))
    report("exactly-once chaos: " + summary)
    assert (lost, duplicated) == (0, 0), summary
    assert len(uncommitted) >= len(committed)
    assert set(committed) <= set(uncommitted), "read_committed returned records " \
        "read_uncommitted does not have"
    assert len(done) == 2 and loop.kills >= 4
    # nothing is left open: the id's last transaction is complete, no broker lists one ongoing
    coord = wait_for(lambda: agreed(cluster.brokers, tid), 30, "the coordinator of " + tid)
    with kr.Conn(cluster.broker(coord).port) as c:
        d = describe_txns(c, [tid])[0]
    assert (d["error"], d["state"], d["topics"]) == (NONE, "CompleteCommit", []), d
    for b in cluster.brokers:
        with kr.Conn(b.port) as c:
            assert list_txns(c, states=["Ongoing", "PrepareCommit", "PrepareAbort"])[2] == []


def test_a_commit_of_a_partition_another_broker_leads_completes(make_cluster):
    """The coordinator sends the marker of a partition it does not lead in
    a WriteTxnMarkers to that partition's leader; the transaction is
    complete (the id's next InitProducerId is answered at once) only once
    that leader wrote it."""
    cluster = started(make_cluster)
    tid = "eos-" + topic_name("peer")
    coord = wait_for(lambda: agreed(cluster.brokers, tid), 30, "a coordinator")
    other = next(b.broker_id for b in cluster.brokers if b.broker_id != coord)
    t = topic_name("peer")
    replicas = [other] + [b.broker_id for b in cluster.brokers if b.broker_id != other]
    fs = ck_admin(cluster.brokers[0]).create_topics([NewTopic(t, 1, replica_assignment=[replicas])],
                                                    operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: leaders(cluster.broker(coord), t).get(0) == other, 30,
             "broker %d to lead %s as the coordinator sees it" % (other, t))
    with kr.Conn(cluster.broker(coord).port) as c:
        err, pid, epoch = until_settled(lambda: init_pid(c, tid))
        assert err == NONE
        assert add_partitions(c, tid, pid, epoch, [(t, [0])]) == [(t, [(0, NONE)])]
        assert end_txn(c, tid, pid, epoch, True) == (NONE,)
        assert until_settled(lambda: init_pid(c, tid), timeout=10) == (NONE, pid, epoch + 1)
    assert "markers not written yet" not in cluster.broker(coord).log_text()
