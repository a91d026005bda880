"""Cluster links on a destination that is a Sluice cluster (issue 33;
daemon/link/link.c K6, K9, K10; daemon/cluster/cluster_links.c): a
standalone source and a 3-broker destination cluster on its own ZooKeeper
chroot.

What a user checks: a link and its mirror topics created through SQL on
one destination broker show in SQL on every one; the mirror topics get
the source's partition counts and replication factor 3 inside the
destination; a producer to a mirror is refused by every broker (the
leader of each partition it is sent to); the destination leader of a
mirror partition SIGKILLed while a producer runs on the source, restarted,
and at the end every mirror partition holds exactly the source's batches
at the same offsets — (base offset, last offset delta, CRC) of every batch,
by raw Fetch from the leader and read from the segment files of every
replica; a mirror promoted (source up) and another failed over (source
SIGKILLed) take idempotent producers whose ids come from every destination
broker: every acknowledged message is read back once, and no local producer
gets an id of the source's (link.c K7, K12; cluster_producer_ids.c
PB4-PB7: the cluster's producer id floor), not even from a broker that was
paused while the floor went up and the mirror failed over (PB8); a broker down while mirrors
and links change (a link deleted and created again with another source)
catches up at its restart; bad SQL is refused with the reason on any broker.
"""
import json
import struct
import threading
import time

from confluent_kafka import Producer

import kafka_raw as kr
from cluster_support import cl_zk_get, make_cluster, wait_for, zk  # noqa: F401
from support import ck_conf, consume, create_topic, produce_ok, topic_name
from test_cluster_producer_ids import init_pid
from test_idempotence import idem_batch

INVALID_REQUEST = 42


def sql_rows(b, q):
    return [tuple(r.values()) for r in b.sql(q)]


def leaders(b, topic):
    """{partition: leader} as broker b answers Metadata ({} if it does not)."""
    try:
        with kr.Conn(b.port, timeout=3) as c:
            r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False), timeout=3)
        m = kr.parse_metadata(r, 5)
    except (OSError, ValueError, AssertionError):
        return {}
    terr, parts = m["topics"].get(topic, (None, []))
    return {pid: (leader, len(reps)) for _e, pid, leader, reps, _isr, _o in parts}


def fetched(port, topic, partition, pids=False):
    """[(base offset, last offset delta, crc)] of every batch up to the high
    watermark, by raw Fetch v11 as a consumer (pids: and its producer id and
    partition leader epoch); None unless this broker answers for it (it
    leads it)."""
    try:
        got = kr.fetch_batches(port, topic, partition)[0]
    except kr.FetchError:
        return None
    if not pids:
        return [x.ident for x in got]
    return [x.ident + (x.pid, struct.unpack_from(">i", x.raw, 12)[0]) for x in got]


def stored(b, topic, partition):
    """[(base offset, last offset delta, crc)] of every batch in the replica's
    segment files on broker b, read from disk."""
    return [x.ident for x in kr.segment_batches(b.partition_dir(topic, partition))]


class SourceProducer(threading.Thread):
    """Keyed messages with headers to every partition of the topics, small
    batches, until stopped."""

    def __init__(self, src, topics):
        super().__init__(daemon=True)
        self.p = Producer(ck_conf(src, **{"linger.ms": 5, "batch.num.messages": 7}))
        self.topics, self.n, self.failed = topics, 0, []
        self.halt = threading.Event()

    def run(self):
        while not self.halt.is_set():
            for t, parts in self.topics:
                for _ in range(5):
                    self.p.produce(t, key=b"k%d" % (self.n % 11), value=b"v%d " % self.n * 3,
                                   partition=self.n % parts, headers=[("i", b"%d" % self.n)],
                                   on_delivery=lambda e, m: e and self.failed.append(e))
                    self.n += 1
            self.p.poll(0)
            time.sleep(0.02)
        assert self.p.flush(30) == 0

    def stop(self):
        self.halt.set()
        self.join(60)


def produce_refused(b, topic, partition):
    batch = kr.record_batch([(b"k", b"x", [], 0)], int(time.time() * 1000))
    err, _, msg = kr.produce_batch(b.port, topic, partition, batch)
    return err, msg


def test_a_cluster_destination_mirrors_through_a_leader_kill(
        make_cluster, start_broker):  # noqa: F811
    src = start_broker()
    # mirror topics get the destination's default.replication.factor
    # a link with a secret setting needs password.encoder.secret in cluster
    # mode (link.c K4; test_link_secrets.py)
    dest = make_cluster(3, overrides={"default.replication.factor": "3",
                                      "password.encoder.secret": "it-encoder-secret"})
    b1, b2, b3 = dest.brokers
    ta, tb = topic_name("cla"), topic_name("clb")
    create_topic(src, ta, partitions=3)
    create_topic(src, tb, partitions=2)
    parts = {ta: 3, tb: 2}
    prod = SourceProducer(src, [(ta, 3), (tb, 2)])
    prod.start()
    try:
        b2.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('src', '%s', "
               "'sasl.password=not-used-here\nclient.id=lc')" % src.bootstrap)
        b2.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % ta)
        # another broker takes writes on the link once it applied it
        wait_for(lambda: sql_rows(b3, "SELECT name FROM cluster_links") == [("src",)], 20,
                 "broker 3 to apply the link")
        b3.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % tb)

        # SQL on every destination broker shows the link and the mirrors;
        # the secret setting masked, its column refused
        for b in dest.brokers:
            wait_for(lambda b=b: sql_rows(b, "SELECT name, bootstrap_servers, config FROM "
                                             "cluster_links") ==
                     [("src", src.bootstrap, "sasl.password=[hidden]\nclient.id=lc\n")], 20,
                     "broker %d to show the link" % b.broker_id)
            wait_for(lambda b=b: sorted(sql_rows(b, "SELECT topic, link, source_topic, state "
                                                    "FROM mirror_topics")) ==
                     sorted([(ta, "src", ta, "active"), (tb, "src", tb, "active")]), 20,
                     "broker %d to show the mirrors" % b.broker_id)
            assert "secrets" in str(b.sql_error("SELECT secrets FROM main.cluster_links"))

        # the mirror topics: the source's partition counts, RF 3, led on the cluster
        for t, n in parts.items():
            wait_for(lambda t=t, n=n: len(leaders(b1, t)) == n and
                     all(l >= 1 and r == 3 for l, r in leaders(b1, t).values()), 30,
                     "%s created with %d partitions, RF 3" % (t, n))
            wait_for(lambda t=t: all(fetched(dest.broker(l).port, t, p)
                                     for p, (l, _r) in leaders(b1, t).items()), 30,
                     "%s to hold batches on every partition" % t)

        # every broker refuses producers to a mirror (the partitions it leads)
        refusers = set()
        for t, n in parts.items():
            for p, (l, _r) in leaders(b1, t).items():
                err, msg = produce_refused(dest.broker(l), t, p)
                assert err == INVALID_REQUEST and "promote it first" in msg, (l, t, p, err, msg)
                refusers.add(l)
        assert refusers == {1, 2, 3}

        # SIGKILL the leader of ta-0 mid-mirroring; a new leader goes on; restart it
        victim = dest.broker(leaders(b1, ta)[0][0])
        other = next(b for b in dest.brokers if b is not victim)
        before = len(fetched(victim.port, ta, 0))
        victim.kill()
        wait_for(lambda: leaders(other, ta).get(0, (-1,))[0] not in (-1, victim.broker_id),
                 30, "a new leader of %s-0" % ta)
        new = dest.broker(leaders(other, ta)[0][0])
        wait_for(lambda: len(fetched(new.port, ta, 0) or []) > before + 3, 30,
                 "the new leader to go on mirroring %s-0" % ta)
        victim.start()
    finally:
        prod.stop()
    assert prod.failed == [] and prod.n > 0

    # every mirror partition: exactly the source's batches at the same offsets,
    # on the leader (raw Fetch) and in every replica's segment files
    for t, n in parts.items():
        for p in range(n):
            want = fetched(src.port, t, p)
            assert want, (t, p)

            def same(t=t, p=p, want=want):
                lead = leaders(b1, t).get(p, (-1,))[0]
                return lead >= 1 and fetched(dest.broker(lead).port, t, p) == want and \
                    all(stored(b, t, p) == want for b in dest.brokers)
            wait_for(same, 60, "%s-%d identical to the source on every replica" % (t, p))

    # the mirrors stay active and read-only on every broker
    for b in dest.brokers:
        assert sql_rows(b, "SELECT topic, state FROM mirror_topics ORDER BY topic") == \
            sorted([(ta, "active"), (tb, "active")]), b.broker_id
    for q, (l, _r) in leaders(b1, ta).items():
        err, msg = produce_refused(dest.broker(l), ta, q)
        assert err == INVALID_REQUEST and "promote it first" in msg, (q, err, msg)

    # DELETE on one broker ends both mirrors on every broker, then the link
    for t in (ta, tb):
        b2.sql("DELETE FROM mirror_topics WHERE topic = '%s'" % t)
    for b in dest.brokers:
        wait_for(lambda b=b: sql_rows(b, "SELECT topic FROM mirror_topics") == [], 20,
                 "broker %d to drop the mirrors" % b.broker_id)
    b3.sql("DELETE FROM cluster_links WHERE name = 'src'")
    for b in dest.brokers:
        wait_for(lambda b=b: sql_rows(b, "SELECT name FROM cluster_links") == [], 20,
                 "broker %d to drop the link" % b.broker_id)


def test_a_broker_that_missed_the_changes_catches_up_and_bad_sql_is_refused(
        make_cluster, start_broker):  # noqa: F811
    src = start_broker()
    dest = make_cluster(3)
    b1, b2, b3 = dest.brokers
    t, normal = topic_name("clm"), topic_name("cln")
    create_topic(src, t, partitions=1)
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src.bootstrap)
    b1.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % t)
    wait_for(lambda: sql_rows(b3, "SELECT topic FROM mirror_topics") == [(t,)], 20,
             "broker 3 to show the mirror")

    # bad SQL gets a clear error on any broker
    err = b2.sql_error("INSERT INTO mirror_topics (topic, link) VALUES ('x%s', 'nope')" % t)
    assert "unknown cluster link 'nope'" in str(err), err
    b2.sql("INSERT INTO topics (name, partitions, replication_factor) VALUES ('%s', 1, 3)"
           % normal)
    wait_for(lambda: sql_rows(b3, "SELECT name FROM topics WHERE name = '%s'" % normal), 20,
             "broker 3 to see the normal topic")
    err = b3.sql_error("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % normal)
    assert "already exists as a normal topic" in str(err), err
    err = b2.sql_error("DELETE FROM cluster_links WHERE name = 'src'")
    assert "has 1 mirror topics" in str(err), err

    # broker 3 down while the mirror and the link go and another link comes
    b3.stop()
    b1.sql("DELETE FROM mirror_topics WHERE topic = '%s'" % t)
    wait_for(lambda: sql_rows(b1, "SELECT topic FROM mirror_topics") == [], 20, "mirror gone")
    b1.sql("DELETE FROM cluster_links WHERE name = 'src'")
    b2.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src2', '%s')"
           % src.bootstrap)
    b3.start()
    wait_for(lambda: sql_rows(b3, "SELECT name FROM cluster_links") == [("src2",)] and
             sql_rows(b3, "SELECT topic FROM mirror_topics") == [], 30,
             "broker 3 to catch up with the changes it missed")
    assert "mirror topic %s: its row went" % t in b3.log_text() or \
        "cluster link src deleted from ZooKeeper" in b3.log_text()


def states(b):
    return dict(sql_rows(b, "SELECT topic, state FROM mirror_topics"))


def test_promoted_and_failed_over_mirrors_take_producers_with_ids_of_their_own(
        make_cluster, start_broker):  # noqa: F811
    """link.c K7, K12 in cluster mode: the source's idempotent producers have
    ids 0, 1000 and 2000 (a standalone broker reserves a block of 1000 per
    life), the very ids the destination's three brokers' first blocks in
    /latest_producer_id_block start with.  Copying them raises the cluster's
    floor (/sluice/producer_id_floor) and every broker drops what it holds
    below it, so after a promotion (source up) and a failover (source
    SIGKILLed) no broker hands out a source's id, and idempotent producers
    bootstrapped at each destination broker have every acknowledged message
    read back exactly once (a producer taken for the source's would have its
    first batches dropped as duplicates).  One partition each: a broker that
    leads no mirror partition learns the floor from ZooKeeper's watch."""
    src = start_broker()
    dest = make_cluster(3, overrides={"default.replication.factor": "3"})
    b1, b2, b3 = dest.brokers
    ta, tb = topic_name("clp"), topic_name("clf")
    for t in (ta, tb):                   # one partition each: a broker leads none
        create_topic(src, t, partitions=1)
    sent = {ta: [], tb: []}
    for life in range(3):
        if life:
            src.restart()
        p = Producer(ck_conf(src, **{"enable.idempotence": True}))
        for t in (ta, tb):
            v = b"source %d %s" % (life, t.encode())
            p.produce(t, value=v, partition=0)
            sent[t].append(v)
        assert p.flush(30) == 0
    src_batches = [x for t in (ta, tb) for x in fetched(src.port, t, 0, True)]
    src_pids, src_epoch = {x[3] for x in src_batches}, max(x[4] for x in src_batches)
    print("source producer ids:", sorted(src_pids))
    assert src_pids == {0, 1000, 2000}, src_pids
    want = {(t, 0): fetched(src.port, t, 0) for t in (ta, tb)}

    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src.bootstrap)
    for t in (ta, tb):
        b1.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % t)

    def mirrored(t, q):
        lead = leaders(b1, t).get(q, (-1,))[0]
        return lead >= 1 and fetched(dest.broker(lead).port, t, q) == want[(t, q)]
    for t, q in want:
        wait_for(lambda t=t, q=q: mirrored(t, q), 60, "%s-%d mirrored" % (t, q))

    # promoted with the source up, failed over with it SIGKILLed
    b2.sql("UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % ta)
    for b in dest.brokers:
        wait_for(lambda b=b: states(b).get(ta) == "promoted", 30,
                 "broker %d to show %s promoted" % (b.broker_id, ta))
    src.kill()
    b3.sql("UPDATE mirror_topics SET state = 'failed_over' WHERE topic = '%s'" % tb)
    for b in dest.brokers:
        wait_for(lambda b=b: states(b).get(tb) == "failed_over", 30,
                 "broker %d to show %s failed over" % (b.broker_id, tb))

    # idempotent producers bootstrapped at each broker, to both topics
    for b in dest.brokers:
        pr = Producer(ck_conf(b, **{"enable.idempotence": True, "acks": "all",
                                    "message.timeout.ms": 30000}))
        for t in (ta, tb):
            msgs = [{"value": b"dest %d %s %d" % (b.broker_id, t.encode(), i),
                     "partition": 0} for i in range(30)]
            produce_ok(pr, t, msgs)
            sent[t] += [m["value"] for m in msgs]
    for t in (ta, tb):
        got = [m.value() for m in consume(b1, t, [0], len(sent[t]), timeout=30)]
        acked, read = len(sent[t]), len(got)
        lost = len(set(sent[t]) - set(got))
        dup = read - len(set(got))
        print("%s: acknowledged %d, read %d, lost %d, duplicated %d" % (t, acked, read, lost,
                                                                         dup))
        assert lost == 0 and dup == 0 and read == acked, t
        # the source's batches unchanged at their offsets, then only local ids,
        # under leader epochs of the destination's above the source's (link.c K14)
        for q in (0,):
            lead = leaders(b1, t)[q][0]
            batches = fetched(dest.broker(lead).port, t, q, True)
            assert [x[:3] for x in batches[:len(want[(t, q)])]] == want[(t, q)], (t, q)
            mine = {x[3] for x in batches[len(want[(t, q)]):]}
            assert mine and all(pid > max(src_pids) for pid in mine), (t, q, mine)
            epochs = {x[4] for x in batches[len(want[(t, q)]):]}
            assert min(epochs) > src_epoch, (t, q, epochs, src_epoch)

    # every broker's InitProducerId: a fresh id of its own, above the source's
    local = {}
    for b in dest.brokers:
        with kr.Conn(b.port) as c:
            pid, _epoch, _ = init_pid(b, c)
        local[b.broker_id] = pid
    print("InitProducerId on brokers 1, 2, 3:", local)
    assert all(pid > max(src_pids) for pid in local.values()), local

    # the floor, as ZooKeeper holds it: a block 0..floor-1 of ids kept out
    floor = cl_zk_get(dest.zk_connect, "/sluice/producer_id_floor")
    assert floor, "no producer id floor in ZooKeeper"
    doc = json.loads(floor[0])
    print("producer id floor:", doc)
    assert int(doc["block_end"]) >= max(src_pids), doc


def test_a_broker_paused_through_a_failover_hands_out_no_source_id(
        make_cluster, start_broker):  # noqa: F811
    """cluster_producer_ids.c PB8, daemon/producer_ids.c P1 (issue 33, review finding one): broker
    X, neither the mirror partition's leader nor the controller, has handed
    out id N-1 (its next is N).  X is SIGSTOPped (well inside its ZooKeeper
    session) while the source writes an idempotent batch with producer id N,
    the leader mirrors it (raising the floor above N) and the mirror fails
    over.  X's InitProducerId, sent while it is paused and answered after it
    resumes, must not be N: a local producer with N has its first batch
    acknowledged by the leader and then dropped as a duplicate of the
    source's.  Checked as a user does: the local batch is read back."""
    src = start_broker()
    dest = make_cluster(3)
    t = topic_name("pz")
    create_topic(src, t, partitions=1)
    b1 = dest.brokers[0]
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src.bootstrap)
    b1.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % t)
    wait_for(lambda: leaders(b1, t).get(0, (-1,))[0] >= 1, 30, "a leader")
    lead = leaders(b1, t)[0][0]
    ctrl = json.loads(cl_zk_get(dest.zk_connect, "/controller")[0])["brokerid"]
    x = [b for b in dest.brokers if b.broker_id not in (lead, ctrl)][0]
    leader = dest.broker(lead)
    with kr.Conn(x.port) as c:
        pid0, _epoch, _ = init_pid(x, c)
    victim = pid0 + 1                    # the next id broker x hands out
    print("leader", lead, "controller", ctrl, "paused", x.broker_id, "next id", victim)
    err, _, msg = kr.produce_batch(src.port, t, 0, kr.record_batch(
        [(b"k", b"warm", [], 0)], int(time.time() * 1000)))
    assert err == 0, (err, msg)
    wait_for(lambda: len(fetched(leader.port, t, 0, True) or []) == 1, 30, "warm-up mirrored")
    got = {}

    def ask():
        with kr.Conn(x.port, timeout=20) as c:
            got["r"] = init_pid(x, c)
    x.sigstop()
    th = None
    try:
        err, _, msg = kr.produce_batch(src.port, t, 0, idem_batch([b"source"], victim, 0, 0))
        assert err == 0, (err, msg)
        wait_for(lambda: any(b[3] == victim for b in (fetched(leader.port, t, 0, True) or [])),
                 5, "the source's batch mirrored")
        leader.sql("UPDATE mirror_topics SET state = 'failed_over' WHERE topic = '%s'" % t)
        wait_for(lambda: states(leader).get(t) == "failed_over", 5, "failed over")
        th = threading.Thread(target=ask)
        th.start()
        time.sleep(0.1)                  # the request is in X's socket before it resumes
    finally:
        x.sigcont()
    if th:
        th.join(30)
    floor = json.loads(cl_zk_get(dest.zk_connect, "/sluice/producer_id_floor")[0])
    pid, epoch, _ = got["r"]
    print("floor %s; InitProducerId on broker %d after the failover: id %d epoch %d"
          % (floor, x.broker_id, pid, epoch))
    assert pid > int(floor["block_end"]), (pid, floor)
    wait_for(lambda: states(x).get(t) == "failed_over", 30, "broker %d failed over" % x.broker_id)
    err, base, msg = kr.produce_batch(leader.port, t, 0, idem_batch([b"local"], pid, epoch, 0))
    batches = fetched(leader.port, t, 0, True)
    print("local batch: error %d base offset %s; leader's batches (base, delta, crc, pid, "
          "epoch): %s" % (err, base, batches))
    assert err == 0, (err, msg)
    acked = 1
    read = sum(1 for b in batches if b[3] == pid)
    print("acknowledged %d, read %d, lost %d" % (acked, read, acked - read))
    assert read == acked and [b[3] for b in batches][-2:] == [victim, pid], batches


def test_a_link_recreated_while_a_broker_was_down_reaches_it(make_cluster, start_broker):  # noqa: F811
    """cluster_links.c L5: the row is compared whole, not by name."""
    src_a = start_broker()
    src_b = start_broker()
    dest = make_cluster(3)
    b1, b2, b3 = dest.brokers
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src_a.bootstrap)
    wait_for(lambda: sql_rows(b3, "SELECT name, bootstrap_servers FROM cluster_links")
             == [("src", src_a.bootstrap)], 20, "broker 3 to show the link")
    b3.stop()
    b1.sql("DELETE FROM cluster_links WHERE name = 'src'")
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src_b.bootstrap)
    wait_for(lambda: sql_rows(b2, "SELECT name, bootstrap_servers FROM cluster_links")
             == [("src", src_b.bootstrap)], 20, "broker 2 to show the new link")
    b3.start()
    wait_for(lambda: sql_rows(b3, "SELECT name, bootstrap_servers FROM cluster_links")
             == [("src", src_b.bootstrap)], 30, "broker 3 to take the recreated link")
    assert "cluster link src replaced from ZooKeeper" in b3.log_text()


def test_a_link_created_on_two_brokers_at_once_ends_the_same_everywhere(
        make_cluster, start_broker):  # noqa: F811
    """cluster_links.c L5: an INSERT is published create-only; the second
    creator takes the first's row (or its INSERT is refused if it saw it)."""
    src_a = start_broker()
    src_b = start_broker()
    dest = make_cluster(3)
    b1, b2, _b3 = dest.brokers
    errs = []

    def insert(b, src):
        try:
            b.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('twice', '%s')"
                  % src.bootstrap)
        except Exception as e:  # the second one, when it saw the first's row
            errs.append(str(e))
    ts = [threading.Thread(target=insert, args=(b, s)) for b, s in ((b1, src_a), (b2, src_b))]
    for t in ts:
        t.start()
    for t in ts:
        t.join(30)
    assert all("already exists" in e for e in errs), errs

    def same():
        rows = [sql_rows(b, "SELECT name, bootstrap_servers FROM cluster_links")
                for b in dest.brokers]
        return len(rows[0]) == 1 and all(r == rows[0] for r in rows) and \
            rows[0][0][1] in (src_a.bootstrap, src_b.bootstrap)
    wait_for(same, 30, "every broker to keep the same link")


def promoted_with_a_source_pid(make_cluster, start_broker, prefix):  # noqa: F811
    """A 3-broker destination whose brokers each handed out an idempotent
    producer id (the first blocks start at 0, 1000, 2000) BEFORE the mirror
    copied the source's producer 0 (link.c K7's floor keeps only later ids
    apart), the mirror of one partition promoted on every broker.  Returns
    (dest, topic, the source's batches with their pid and epoch, that pid)."""
    src = start_broker()
    dest = make_cluster(3, overrides={"default.replication.factor": "3"})
    t = topic_name(prefix)
    create_topic(src, t, partitions=1)
    local = {}
    for b in dest.brokers:
        with kr.Conn(b.port) as c:
            local[b.broker_id] = init_pid(b, c)[0]
    p = Producer(ck_conf(src, **{"enable.idempotence": True}))
    p.produce(t, value=b"source 0", partition=0)
    assert p.flush(30) == 0
    want = fetched(src.port, t, 0, True)
    src_pid = want[0][3]
    assert src_pid in local.values(), (src_pid, local)      # the scenario
    b1 = dest.brokers[0]
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src.bootstrap)
    b1.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % t)
    wait_for(lambda: lead_of(dest, t) and fetched(lead_of(dest, t).port, t, 0, True) == want,
             60, "mirrored")
    b1.sql("UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    for b in dest.brokers:
        wait_for(lambda b=b: states(b).get(t) == "promoted", 30,
                 "broker %d to show %s promoted" % (b.broker_id, t))
    return dest, t, want, src_pid


def lead_of(dest, t, asked=None):
    """The destination broker that leads t-0 as asked (a live broker) tells."""
    asked = asked or next(b for b in dest.brokers if b.alive())
    lead = leaders(asked, t).get(0, (-1,))[0]
    return dest.broker(lead) if lead >= 1 else None


def fresh_epoch_landed(dest, t, source_epoch):
    """link.c K14: the state znode's leader epoch is above the source's."""
    got = cl_zk_get(dest.zk_connect, "/brokers/topics/%s/partitions/0/state" % t)
    return got and json.loads(got[0])["leader_epoch"] > source_epoch


def write_locally(dest, t, src_pid, want, n=4, pause_at=None):
    """The destination's producer src_pid writes t-0 from sequence 0, one
    record a batch, through its leader (retrying NOT_LEADER: link.c K14):
    each batch must be appended (not answered as a duplicate of the
    source's batch with the same sequences, nor refused) and read back
    once.  Returns the local batches (with pid and epoch) as fetched."""
    sent, acked = [b"dest %d" % i for i in range(n)], []
    for i, v in enumerate(sent):
        if i == pause_at:
            time.sleep(3)
        deadline = time.monotonic() + 30
        while True:
            lead = lead_of(dest, t)
            err, base, msg = (kr.produce_batch(lead.port, t, 0, idem_batch([v], src_pid, 0, i))
                              if lead else (6, -1, "no leader"))
            if err != 6 or time.monotonic() > deadline:     # NOT_LEADER: link.c K14
                break
            time.sleep(0.2)
        assert err == 0, (v, err, msg)
        acked.append((v, base))
    hw = kr.fetch_batches(lead_of(dest, t).port, t, 0)[1]
    got = [m.value() for m in consume(lead_of(dest, t), t, [0], hw, timeout=30)][len(want):]
    lost = [v for v, _ in acked if v not in got]
    dup = len(got) - len(set(got))
    print("acknowledged %d (at %s), read %d, lost %d, duplicated %d"
          % (len(acked), [o for _, o in acked], len(got), len(lost), dup))
    assert not lost and not dup and got == sent, (acked, got)
    mine = fetched(lead_of(dest, t).port, t, 0, True)[len(want):]
    assert [x[3] for x in mine] == [src_pid] * n and min(x[4] for x in mine) > want[0][4]
    return mine


def test_a_local_producer_given_a_source_producers_id_first_is_not_judged_by_its_batches(
        make_cluster, start_broker):  # noqa: F811
    """link.c K17 in cluster mode, on the leader that made the fresh epoch
    (promoted_with_a_source_pid): the destination's producer 0 writes the
    promoted partition from sequence 0; every batch is appended and read back
    once.  The fresh epoch is taken once (link.c K14): a batch 3 s later
    carries the same one."""
    dest, t, want, src_pid = promoted_with_a_source_pid(make_cluster, start_broker, "clq")
    mine = write_locally(dest, t, src_pid, want, pause_at=3)
    assert len({x[4] for x in mine}) == 1, mine


def test_a_new_leader_knows_where_local_batches_start(make_cluster, start_broker):  # noqa: F811
    """link.c K17 on a broker that did not make the fresh epoch: the leader
    that raised it (link.c K14) is SIGKILLed before any local batch; the new
    leader reads the first local epoch from ZooKeeper, so the source's
    producer 0 does not judge the local producer 0's batches there."""
    dest, t, want, src_pid = promoted_with_a_source_pid(make_cluster, start_broker, "clk")
    wait_for(lambda: fresh_epoch_landed(dest, t, want[0][4]), 30, "the fresh epoch")
    old = lead_of(dest, t)
    time.sleep(1)                        # its duty done: the first local epoch written
    old.kill()
    other = next(b for b in dest.brokers if b is not old)
    wait_for(lambda: lead_of(dest, t, other) not in (None, old), 30, "a new leader of %s-0" % t)
    print("leader %d SIGKILLed, %d leads" % (old.broker_id, lead_of(dest, t, other).broker_id))
    write_locally(dest, t, src_pid, want)
    old.start()


def test_every_broker_restarted_knows_where_local_batches_start(
        make_cluster, start_broker):  # noqa: F811
    """link.c K17 after a restart of every destination broker once the
    mirror was promoted and the fresh epoch raised: whoever leads reads the
    first local epoch from ZooKeeper before it takes a local batch."""
    dest, t, want, src_pid = promoted_with_a_source_pid(make_cluster, start_broker, "clr")
    wait_for(lambda: fresh_epoch_landed(dest, t, want[0][4]), 30, "the fresh epoch")
    time.sleep(1)
    for b in dest.brokers:
        b.stop()
    for b in dest.brokers:
        b.start()
    wait_for(lambda: lead_of(dest, t) is not None, 60, "a leader of %s-0" % t)
    print("every broker restarted, %d leads" % lead_of(dest, t).broker_id)
    write_locally(dest, t, src_pid, want)


def _send_local(dest, t, v, pid, seq, other):
    """(error, base, message) of one idempotent batch of producer pid at seq,
    through whichever broker leads t-0 (asked of other), retried while no
    broker leads it."""
    deadline = time.monotonic() + 30
    while True:
        lead = lead_of(dest, t, other)
        r = (kr.produce_batch(lead.port, t, 0, idem_batch([v], pid, 0, seq))
             if lead else (6, -1, "no leader"))
        if r[0] != 6 or time.monotonic() > deadline:
            return r
        time.sleep(0.2)


def test_a_new_leader_after_local_batches_judges_a_retry_by_them(make_cluster,
                                                                 start_broker):  # noqa: F811
    """link.c K17 with local batches already written under the first leader's
    epoch, that leader SIGKILLed: the new leader's local start is F's entry
    (from ZooKeeper), not its own log end, so the producer's retry of its
    last batch is a duplicate and its next sequence goes on (taking the log
    end for the local start appended the retry twice)."""
    dest, t, want, src_pid = promoted_with_a_source_pid(make_cluster, start_broker, "k17r")
    wait_for(lambda: fresh_epoch_landed(dest, t, want[0][4]), 30, "the fresh epoch")
    mine = write_locally(dest, t, src_pid, want, n=2)
    old = lead_of(dest, t)
    other = next(b for b in dest.brokers if b is not old)
    ends = stored(old, t, 0)[-1:]
    wait_for(lambda: all(stored(b, t, 0)[-1:] == ends for b in dest.brokers if b is not old),
             30, "the followers hold the local batches")
    old.kill()
    wait_for(lambda: lead_of(dest, t, other) not in (None, old), 30, "a new leader")
    r1 = _send_local(dest, t, b"dest 1", src_pid, 1, other)    # a retry of the last batch
    r2 = _send_local(dest, t, b"dest 2", src_pid, 2, other)    # the next one
    lead = lead_of(dest, t, other)
    hw = kr.fetch_batches(lead.port, t, 0)[1]
    got = [m.value() for m in consume(lead, t, [0], hw, timeout=30)][len(want):]
    print("first leader's local batches %r; retry -> %r, next -> %r; local log %r"
          % (mine, r1, r2, got))
    assert r1[0] == 0 and r2[0] == 0, (r1, r2)
    assert got == [b"dest 0", b"dest 1", b"dest 2"], got
