"""Cluster links and mirror topics, standalone destination (issue 33;
daemon/link/link.c, link_conn.c): two standalone brokers, a source and a
destination; a link on the destination, created through SQL, mirrors
source topics into mirror topics.

What a user checks: every mirror partition holds exactly the source's
batches at the same offsets — each batch byte for byte (offset, CRC,
producer id, sequence, timestamps), read with raw Fetches — for keyed
messages with headers in several batches, a compacted topic, and a
transactional producer that commits and aborts; pause stops the copy and
active resumes it; a producer is refused with a clear error until the
mirror is promoted, and writes after; a partition added at the source is
followed; a SASL source with the wrong password shows the error in
cluster_links.last_error and one log line, not a retry storm; SIGKILL of
the destination mid-copy resumes exactly; bad SQL gets a clear error and
secrets are never readable through SQL.
"""
import json
import os
import re
import signal
import time

import pytest
from confluent_kafka import KafkaError, KafkaException, Producer
from confluent_kafka.admin import NewPartitions

import kafka_raw as kr
from sasl_support import SaslBroker, ck_sasl
from conftest import free_port
from support import admin_socket, ck_admin, ck_conf, ck_producer, consume, create_topic, produce_ok
from support import socket_http
from support import topic_name
from retention_support import delete_records, watermarks

PLAIN_LOGIN = "org.apache.kafka.common.security.plain.PlainLoginModule"
INVALID_REQUEST = 42
UNKNOWN_TOPIC_OR_PARTITION = 3
OFFSET_OUT_OF_RANGE = 1


def sql(b, stmt):
    st, text, _ = socket_http(admin_socket(b), "/sql?format=json", body=stmt)
    return st, (json.loads(text or "[]") if st == 200 else text)


def sql_ok(b, stmt):
    st, got = sql(b, stmt)
    assert st == 200, got
    return got


def rows(got):
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in got]


def until(fn, timeout=30.0, what="condition"):
    deadline = time.monotonic() + timeout
    while True:
        v = fn()
        if v:
            return v
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.1)


def batches(b, topic, partition, start=0):
    """Every batch of the partition, from offset start up to the high watermark,
    through raw Fetch v11 (read_uncommitted): ([kafka_raw.Batch], high
    watermark); ([], -1) while the mirror is not created (restarted) yet."""
    try:
        return kr.fetch_batches(b.port, topic, partition, start)
    except kr.FetchError as e:
        if e.code == UNKNOWN_TOPIC_OR_PARTITION or (e.code == OFFSET_OUT_OF_RANGE and start):
            return [], -1
        raise


def link_source(dest, src, name="src", config=None):
    cfg = "" if config is None else ", '%s'" % config.replace("'", "''")
    sql_ok(dest, "INSERT INTO cluster_links (name, bootstrap_servers%s) VALUES ('%s', '%s'%s)"
           % (", config" if config is not None else "", name, src.bootstrap, cfg))


def mirror(dest, topic, link="src", source=None, state=None):
    cols, vals = ["topic", "link"], [topic, link]
    if source:
        cols.append("source_topic"); vals.append(source)
    if state:
        cols.append("state"); vals.append(state)
    return sql(dest, "INSERT INTO mirror_topics (%s) VALUES (%s)"
               % (", ".join(cols), ", ".join("'%s'" % v for v in vals)))


def mirror_state(dest, topic):
    got = rows(sql_ok(dest, "SELECT state, last_error, lag FROM mirror_topics WHERE topic = '%s'"
                      % topic))
    return got[0] if got else None


def assert_same(src, dest, topic, partitions):
    """Waits until every mirror partition reached the source's high
    watermark, then compares every batch byte for byte."""
    for p in range(partitions):
        want, hw = batches(src, topic, p)
        until(lambda: batches(dest, topic, p)[1] >= hw, 60, "%s-%d mirrored" % (topic, p))
        got, dhw = batches(dest, topic, p)
        assert dhw == hw
        assert [g.ident for g in got] == [w.ident for w in want]
        assert [g.raw for g in got] == [w.raw for w in want]     # byte for byte


def fill(src, topic, partitions, n, start=0):
    p = ck_producer(src, **{"linger.ms": 5, "batch.num.messages": 7})
    msgs = [(("k%d" % (i % 13)).encode(), ("value %d " % i).encode() * (1 + i % 5),
             i % partitions, [("h", str(i).encode()), ("n", b"\x00\x01")])
            for i in range(start, start + n)]
    for k, v, part, h in msgs:
        p.produce(topic, key=k, value=v, partition=part, headers=h)
    assert p.flush(30) == 0
    return msgs


def mirrored(pair, prefix, partitions, n, config=None):
    """A source topic with n messages, mirrored at the destination, caught up."""
    src, dest = pair
    t = topic_name(prefix)
    create_topic(src, t, partitions=partitions)
    fill(src, t, partitions, n)
    link_source(dest, src, config=config)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, partitions)
    return src, dest, t


@pytest.fixture
def pair(start_broker):
    src = start_broker()
    dest = start_broker()
    return src, dest


def test_mirror_holds_the_source_batches_at_the_same_offsets(pair):
    src, dest = pair
    plain, compacted, txn = topic_name("plain"), topic_name("comp"), topic_name("txn")
    create_topic(src, plain, partitions=3)
    create_topic(src, compacted, partitions=2, config={"cleanup.policy": "compact",
                                                       "segment.bytes": "4096"})
    create_topic(src, txn, partitions=2)
    fill(src, plain, 3, 300)
    fill(src, compacted, 2, 200)
    tp = Producer(ck_conf(src, **{"transactional.id": "link-tx", "linger.ms": 2}))
    tp.init_transactions(30)
    for commit in (True, False, True):
        tp.begin_transaction()
        for i in range(20):
            tp.produce(txn, key=b"t%d" % i, value=b"v%d" % i, partition=i % 2)
        tp.flush(30)
        (tp.commit_transaction if commit else tp.abort_transaction)(30)

    link_source(dest, src)
    for t in (plain, compacted, txn):
        st, got = mirror(dest, t)
        assert st == 200, got
    # more while it mirrors
    fill(src, plain, 3, 200, start=300)
    assert_same(src, dest, plain, 3)
    assert_same(src, dest, compacted, 2)
    assert_same(src, dest, txn, 2)
    # the source's partition count and its topic overrides
    got = rows(sql_ok(dest, "SELECT topic, partitions FROM (SELECT name AS topic, partitions "
                            "FROM topics) WHERE topic IN ('%s', '%s') ORDER BY 1"
                      % (plain, compacted)))
    assert sorted(got) == sorted([(plain, 3), (compacted, 2)])
    got = rows(sql_ok(dest, "SELECT value FROM topic_configs WHERE topic = '%s' AND "
                            "name = 'cleanup.policy'" % compacted))
    assert got == [("compact",)]
    # a read_committed consumer of the mirror sees the committed 40, not the aborted 20
    from confluent_kafka import Consumer
    c = Consumer(ck_conf(dest, **{"group.id": "g-" + txn, "isolation.level": "read_committed",
                                  "auto.offset.reset": "earliest"}))
    c.subscribe([txn])
    seen, deadline = [], time.monotonic() + 30
    while len(seen) < 40 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.value())
    time.sleep(1)
    m = c.poll(0.5)
    c.close()
    assert len(seen) == 40 and m is None
    # lag in SQL and /metrics
    until(lambda: mirror_state(dest, plain) == ("active", None, 0), 10, "lag 0 in SQL")
    st, text, _ = socket_http(admin_socket(dest), "/metrics")
    assert st == 200
    assert re.search(r'sluice_link_mirror_lag_messages\{link="src",topic="%s",partition="0",'
                     r'state="active"\} 0' % plain, text)
    assert re.search(r'sluice_link_mirror_lag_ms\{link="src",topic="%s",partition="0"\} 0\n'
                     % plain, text)
    assert rows(sql_ok(dest, "SELECT lag_ms FROM mirror_topics WHERE topic = '%s'" % plain)) \
        == [(0,)]


def test_pause_resume_refuse_and_promote(pair):
    src, dest, t = mirrored(pair, "pr", 2, 50)

    # a producer to the mirror is refused with the reason
    p = ck_producer(dest, **{"message.timeout.ms": 5000, "retries": 0})
    errs = []
    p.produce(t, value=b"nope", partition=0, on_delivery=lambda e, m: errs.append(e))
    p.flush(10)
    assert len(errs) == 1 and errs[0] is not None
    assert errs[0].code() == KafkaError.INVALID_REQUEST, errs[0]
    with kr.Conn(dest.port) as c:
        r = c.request_flex(kr.API_PRODUCE, 11, kr.produce_v11_body(t, 0, _one_batch()))
        (_, _, err, _, _, msg), = kr.parse_produce_v11_full(r)
        assert err == INVALID_REQUEST and "promote it first" in msg, (err, msg)
    # partitions follow the source's until promoted: CreatePartitions and
    # SQL refused (a destination partition the link does not know once
    # crashed the promotion's epoch store)
    f, = ck_admin(dest).create_partitions([NewPartitions(t, 3)]).values()
    e = f.exception(15)
    assert e is not None and "is a mirror topic" in str(e), e
    st, text = sql(dest, "UPDATE topics SET partitions = 3 WHERE name = '%s'" % t)
    assert st != 200 and "is a mirror topic" in str(text), text

    # paused: nothing more comes; active: it resumes where it stopped
    sql_ok(dest, "UPDATE mirror_topics SET state = 'paused' WHERE topic = '%s'" % t)
    assert mirror_state(dest, t)[0] == "paused"
    time.sleep(1.0)                               # an in-flight fetch lands or is dropped
    before = [batches(dest, t, i)[1] for i in range(2)]
    fill(src, t, 2, 40, start=50)
    time.sleep(2.0)
    assert [batches(dest, t, i)[1] for i in range(2)] == before
    sql_ok(dest, "UPDATE mirror_topics SET state = 'active' WHERE topic = '%s'" % t)
    assert_same(src, dest, t, 2)

    # promote: caught up, then writable and no longer mirrored
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    until(lambda: mirror_state(dest, t)[0] == "promoted", 20, "promoted")
    ends = [batches(dest, t, i)[1] for i in range(2)]
    produce_ok(ck_producer(dest), t, [{"key": b"k", "value": b"after promotion", "partition": 0}])
    fill(src, t, 2, 10, start=90)                 # not copied any more
    time.sleep(1.5)
    assert [batches(dest, t, i)[1] for i in range(2)] == [ends[0] + 1, ends[1]]
    st, text = sql(dest, "UPDATE mirror_topics SET state = 'active' WHERE topic = '%s'" % t)
    assert st != 200 and "no longer mirrors" in str(text)
    sql_ok(dest, "UPDATE topics SET partitions = 3 WHERE name = '%s'" % t)   # its own now
    # a promoted mirror's row goes, the topic stays
    sql_ok(dest, "DELETE FROM mirror_topics WHERE topic = '%s'" % t)
    assert mirror_state(dest, t) is None
    assert [batches(dest, t, i)[1] for i in range(2)] == [ends[0] + 1, ends[1]]
    log = dest.log_text()
    for change in ("active -> paused", "paused -> active", "active -> promoting",
                   "promoting -> promoted"):
        assert len(re.findall(r"mirror topic %s .*: %s" % (re.escape(t), change), log)) == 1, change


def _one_batch():
    return kr.record_batch([(b"k", b"x", [], 0)], int(time.time() * 1000))


def test_partitions_and_configs_added_at_the_source_follow_then_failover(pair):
    src, dest, t = mirrored(pair, "grow", 1, 30, config="metadata.max.age.ms=500")
    from confluent_kafka.admin import AdminClient, NewPartitions
    a = AdminClient(ck_conf(src))
    for f in a.create_partitions([NewPartitions(t, 3)]).values():
        f.result(15)
    fill(src, t, 3, 60, start=30)
    until(lambda: rows(sql_ok(dest, "SELECT partitions FROM topics WHERE name = '%s'" % t))
          == [(3,)], 20, "3 partitions on the mirror")
    assert_same(src, dest, t, 3)
    # a config changed at the source follows
    sql_ok(src, "INSERT INTO topic_configs (topic, name, value) VALUES ('%s', 'retention.ms', "
                "'3600000')" % t)
    until(lambda: rows(sql_ok(dest, "SELECT value FROM topic_configs WHERE topic = '%s' AND "
                                    "name = 'retention.ms'" % t)) == [("3600000",)], 20,
          "retention.ms synced")
    # a mirror whose topic an operator deletes says so instead of stalling
    t2 = topic_name("gone")
    create_topic(src, t2, partitions=1)
    assert mirror(dest, t2)[0] == 200
    until(lambda: rows(sql_ok(dest, "SELECT name FROM topics WHERE name = '%s'" % t2)), 15,
          "the mirror created")
    sql_ok(dest, "DELETE FROM topics WHERE name = '%s'" % t2)
    until(lambda: (mirror_state(dest, t2) or ("",))[0] == "failed", 15, "failed")
    assert "was deleted" in mirror_state(dest, t2)[1]
    sql_ok(dest, "UPDATE mirror_topics SET state = 'failed_over' WHERE topic = '%s'" % t)
    assert mirror_state(dest, t)[0] == "failed_over"
    produce_ok(ck_producer(dest), t, [{"key": b"k", "value": b"after failover", "partition": 2}])


def test_bad_sql_gets_a_clear_error_and_secrets_stay_hidden(pair):
    src, dest = pair
    create_topic(dest, "taken", partitions=1)
    st, text = mirror(dest, "m1", link="nolink")
    assert st != 200 and "unknown cluster link 'nolink'" in str(text)
    link_source(dest, src, config="security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                "sasl.jaas.config=%s required username=\"u\" password=\"hunter2\";"
                % PLAIN_LOGIN, name="secret")
    link_source(dest, src)
    st, text = mirror(dest, "taken")
    assert st != 200 and "already exists as a normal topic" in str(text)
    st, text = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) "
                         "VALUES ('bad', '%s', 'no.such.setting=1')" % src.bootstrap)
    assert st != 200 and "unknown setting 'no.such.setting'" in str(text)
    st, text = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers) VALUES "
                         "('bad', 'nocolon')")
    assert st != 200 and "host:port" in str(text)
    st, text = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) "
                         "VALUES ('bad', '%s', 'security.protocol=KERBEROS')" % src.bootstrap)
    assert st != 200 and "not supported" in str(text)
    st, text = sql(dest, "UPDATE mirror_topics SET state = 'sideways' WHERE topic = 'x'")
    assert st == 200                                    # no row: nothing to do
    # the password: masked in config, never readable
    got = rows(sql_ok(dest, "SELECT config FROM cluster_links WHERE name = 'secret'"))
    assert "hunter2" not in str(got) and "[hidden]" in got[0][0]
    st, text = sql(dest, "SELECT secrets FROM main.cluster_links")
    assert st != 200 and "cannot be read" in str(text)
    assert "hunter2" not in dest.log_text()
    # a mirror its link cannot create yet (no such source topic) is not
    # auto-created as a normal topic by a client's Metadata meanwhile
    assert mirror(dest, "notyet")[0] == 200
    until(lambda: "does not exist on the source" in str(mirror_state(dest, "notyet")), 15,
          "the source topic reported missing")
    with kr.Conn(dest.port) as c:
        r = c.request(kr.API_METADATA, 4, kr.metadata_body(4, ["notyet"], allow_auto_create=True))
        assert "notyet" not in str(rows(sql_ok(dest, "SELECT name FROM topics")))
    # a link with mirror topics is not deleted under them
    t = topic_name("keep")
    create_topic(src, t, partitions=1)
    assert mirror(dest, t)[0] == 200
    st, text = sql(dest, "DELETE FROM cluster_links WHERE name = 'src'")
    assert st != 200 and "has 2 mirror topics" in str(text)
    until(lambda: rows(sql_ok(dest, "SELECT name FROM topics WHERE name = '%s'" % t)), 15,
          "the mirror created")
    sql_ok(dest, "DELETE FROM mirror_topics WHERE topic IN ('%s', 'notyet')" % t)
    # a mirror not promoted goes with its topic
    assert rows(sql_ok(dest, "SELECT name FROM topics WHERE name = '%s'" % t)) == []
    sql_ok(dest, "DELETE FROM cluster_links WHERE name = 'src'")
    assert rows(sql_ok(dest, "SELECT name FROM cluster_links")) == [("secret",)]


def test_wrong_credentials_are_reported_without_a_retry_storm(start_broker, tmp_path):
    jaas = '%s required user_alice="right";' % PLAIN_LOGIN
    port = free_port()
    src = SaslBroker(str(tmp_path / "src"), {
        "admin.listeners": "http://127.0.0.1:%d" % port,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config": jaas})
    os.makedirs(src.workdir, exist_ok=True)
    src.start()
    try:
        dest = start_broker()
        link_source(dest, src, config="security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\n"
                    "sasl.username=alice\nsasl.password=wrong\nreconnect.backoff.ms=200\n"
                    "reconnect.backoff.max.ms=2000")
        until(lambda: rows(sql_ok(dest, "SELECT last_error FROM cluster_links"))[0][0], 15,
              "last_error")
        got = rows(sql_ok(dest, "SELECT last_error FROM cluster_links"))[0][0]
        assert "SASL PLAIN authentication as User:alice failed" in got, got
        time.sleep(6)
        log = dest.log_text()
        assert len(re.findall(r"cluster link src: SASL PLAIN authentication", log)) == 1, \
            log[-3000:]
        # backoff doubling to 2 s: about 6 logins in 6 s, not hundreds
        logins = len(re.findall(r"SASL PLAIN authentication from \S+ failed", src.log_text()))
        assert 2 <= logins <= 12, logins
        # the right password (in sasl.jaas.config, Kafka's form) mirrors
        t = topic_name("sasl")
        st, text, _ = socket_http(admin_socket(src), "/sql?format=json",
                                  body="INSERT INTO topics (name, partitions) VALUES ('%s', 1)" % t)
        assert st == 200, text
        p = Producer(ck_conf(src, **ck_sasl("PLAIN", "alice", "right")))
        for i in range(10):
            p.produce(t, value=b"m%d" % i, partition=0)
        assert p.flush(30) == 0
        link_source(dest, src, name="good", config="security.protocol=SASL_PLAINTEXT\n"
                    "sasl.mechanism=PLAIN\nsasl.jaas.config=%s required username=\"alice\" "
                    "password=\"right\";" % PLAIN_LOGIN)
        assert mirror(dest, t, link="good")[0] == 200
        until(lambda: batches(dest, t, 0)[1] == 10, 20, "mirrored over SASL")
        assert rows(sql_ok(dest, "SELECT last_error FROM cluster_links WHERE name = 'good'")) \
            == [(None,)]
        # the secret comes back from SQLite after a restart
        dest.restart()
        for i in range(10, 15):
            p.produce(t, value=b"m%d" % i, partition=0)
        assert p.flush(30) == 0
        until(lambda: batches(dest, t, 0)[1] == 15, 20, "mirrored over SASL after a restart")
    finally:
        src.kill()


def test_sigkill_of_the_destination_resumes_exactly(pair):
    src, dest = pair
    t = topic_name("kill")
    create_topic(src, t, partitions=2)
    fill(src, t, 2, 400)
    link_source(dest, src, config="max.partition.fetch.bytes=2048")
    assert mirror(dest, t)[0] == 200
    until(lambda: batches(dest, t, 0)[1] > 0, 20, "mirroring started")
    fill(src, t, 2, 400, start=400)
    dest.restart(sig=signal.SIGKILL)
    fill(src, t, 2, 100, start=800)
    assert_same(src, dest, t, 2)


def _loop_wakeups(pid):
    """Context switches of the loop thread (the main one): each wait for an
    event that returns is one, so a timer re-armed every millisecond shows
    as thousands a second."""
    with open("/proc/%d/task/%d/status" % (pid, pid)) as f:
        return sum(int(l.split()[1]) for l in f
                   if l.startswith(("voluntary_ctxt_switches", "nonvoluntary_ctxt_switches")))


def test_an_idle_link_and_a_promoted_mirror_leave_the_loop_asleep(pair):
    src, dest = pair
    link_source(dest, src, name="idle")
    t = topic_name("quiet")
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 10)
    link_source(dest, src)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, 1)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    until(lambda: mirror_state(dest, t)[0] == "promoted", 20, "promoted")
    time.sleep(6)                 # past metadata.max.age.ms (5 s) after the last Metadata
    before = _loop_wakeups(dest.proc.pid)
    time.sleep(4)
    woke = _loop_wakeups(dest.proc.pid) - before
    assert woke < 200, "the loop woke %d times in 4 s with nothing to do" % woke


def test_promoting_after_a_pause_waits_for_a_fresh_answer(pair):
    """Issue 33 review 1: the last answer before a pause is stale; what the
    source got meanwhile must be in the mirror before it is promoted."""
    src, dest, t = mirrored(pair, "pp", 2, 20)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'paused' WHERE topic = '%s'" % t)
    time.sleep(1.0)
    fill(src, t, 2, 30, start=20)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    until(lambda: mirror_state(dest, t)[0] == "promoted", 20, "promoted")
    for p in range(2):
        want, hw = batches(src, t, p)
        got, dhw = batches(dest, t, p)
        assert dhw == hw
        assert [g.raw for g in got] == [w.raw for w in want]


def test_a_transaction_on_the_destination_cannot_touch_a_mirror(pair):
    """Issue 33 review 2: AddPartitionsToTxn refuses a mirror partition, so
    no abort marker of the destination's coordinator lands in the mirror
    (its offsets would no longer be the source's and it would stop)."""
    src, dest = pair
    t, other = topic_name("tm"), topic_name("tn")
    create_topic(src, t, partitions=1)
    create_topic(dest, other, partitions=1)
    fill(src, t, 1, 10)
    link_source(dest, src)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, 1)
    tp = Producer(ck_conf(dest, **{"transactional.id": "tx-" + t, "linger.ms": 2,
                                   "message.timeout.ms": 10000}))
    tp.init_transactions(30)
    tp.begin_transaction()
    errs = []
    tp.produce(other, value=b"fine", partition=0)
    tp.produce(t, value=b"into the mirror", partition=0, on_delivery=lambda e, m: errs.append(e))
    tp.flush(15)
    with pytest.raises(KafkaException) as e:
        tp.commit_transaction(15)
    assert "INVALID_REQUEST" in str(e.value) or e.value.args[0].code() == \
        KafkaError.INVALID_REQUEST, e.value
    try:
        tp.abort_transaction(15)
    except KafkaException:
        pass                                      # fatal in some clients: nothing more to do
    assert errs and errs[0] is not None
    # the mirror holds only the source's batches and still follows it
    fill(src, t, 1, 10, start=10)
    assert_same(src, dest, t, 1)
    assert mirror_state(dest, t)[:2] == ("active", None)


@pytest.mark.parametrize("cut", ["batch", "inside"])
def test_a_source_whose_log_start_moved_is_mirrored_from_there(pair, cut):
    """Issue 33 review 4: the empty mirror restarts its log at the source's
    log start (DeleteRecords there), as a Kafka follower does, on a batch
    boundary or inside a batch (then at that batch's base)."""
    src, dest = pair
    t = topic_name("ls")
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 40)
    all_batches, _ = batches(src, t, 0)
    assert len(all_batches) >= 4
    at = all_batches[2].base + (0 if cut == "batch" else 1)
    low, err = delete_records(src, t, 0, at)
    assert (low, err) == (at, 0)
    link_source(dest, src)
    assert mirror(dest, t)[0] == 200
    base = all_batches[2].base
    want, hw = batches(src, t, 0, start=at)
    until(lambda: batches(dest, t, 0, start=base)[1] >= hw, 30, "mirrored from the log start")
    got, dhw = batches(dest, t, 0, start=base)
    assert dhw == hw and [g.raw for g in got] == [w.raw for w in want]
    assert watermarks(dest, t)[0] == base
    fill(src, t, 1, 10, start=40)                 # and it goes on from there
    want, hw = batches(src, t, 0, start=at)
    until(lambda: batches(dest, t, 0, start=base)[1] >= hw, 30, "the next ones")
    assert [g.raw for g in batches(dest, t, 0, start=base)[0]] == [w.raw for w in want]
    assert mirror_state(dest, t)[:2] == ("active", None)
    assert len(re.findall("the mirror's log restarts there", dest.log_text())) == 1


def test_producer_ids_of_the_source_are_never_handed_out_after_promotion(pair):
    """Issue 33 review 3: both brokers start their producer ids at the same
    place; the mirror carries the source's producer state, so a producer
    of the destination with a source's id would be taken for a duplicate
    (acknowledged, dropped).  Every record of the new producer is stored."""
    src, dest = pair
    t = topic_name("pid")
    create_topic(src, t, partitions=1)
    p = ck_producer(src, **{"enable.idempotence": True, "linger.ms": 2})
    for i in range(20):
        p.produce(t, value=b"source %d" % i, partition=0)
        p.flush(10)                               # one batch each: sequences 0..19
    link_source(dest, src)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, 1)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    until(lambda: mirror_state(dest, t)[0] == "promoted", 20, "promoted")
    src_pids = {b.pid for b in batches(src, t, 0)[0]}
    q = ck_producer(dest, **{"enable.idempotence": True, "linger.ms": 2})
    for i in range(20):
        q.produce(t, value=b"dest %d" % i, partition=0)
        q.flush(10)
    got, hw = batches(dest, t, 0)
    assert hw == 40
    new = got[20:]
    assert len(new) == 20 and not {b.pid for b in new} & src_pids, (src_pids, new[0][:5])
    assert [b.seq for b in new] == list(range(20))


def _idempotent(b, errors):
    return ck_producer(b, **{"enable.idempotence": True, "linger.ms": 2,
                             "error_cb": lambda e: errors.append(e)})


def _one_by_one(p, topic, values, acked):
    """Each value a batch of its own (sequences 0, 1, ... of this producer
    in the partition); acknowledged values into acked."""
    def done(err, msg):
        if err is None:
            acked.append(msg.value())
    for v in values:
        p.produce(topic, value=v, partition=0, on_delivery=done)
        p.flush(15)


def test_a_local_producer_given_a_source_producers_id_first_is_not_judged_by_its_batches(pair):
    """Issue 33, link.c K17: the destination hands producer ids 0 and 1 to
    two idempotent producers of its own (they write a local topic) BEFORE
    the mirror copies the source's producers 0 and 1 (link.c K7's floor keeps only
    later ids apart).  After the promotion the same two producer instances
    write the promoted topic, sequences from 0 — the first before a
    restart of the destination, the second after it.  Were the source's
    producer state to judge them, their first batches would be taken for
    the source's (acknowledged, dropped) or refused as out of order: every
    acknowledged record must be read back exactly once, none refused."""
    src, dest = pair
    t, local = topic_name("pq"), topic_name("pl")
    create_topic(src, t, partitions=1)
    create_topic(dest, local, partitions=1)
    errors, acked = [], []
    q = [_idempotent(dest, errors), None]
    _one_by_one(q[0], local, [b"q0 local"], [])
    q[1] = _idempotent(dest, errors)              # the second id, after the first
    _one_by_one(q[1], local, [b"q1 local"], [])
    s0 = _idempotent(src, [])
    _one_by_one(s0, t, [b"s0 %d" % i for i in range(3)], [])     # seq (0,0), (1,1), (2,2)
    s1 = _idempotent(src, [])
    _one_by_one(s1, t, [b"s1 %d" % i for i in range(3)], [])
    link_source(dest, src)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, 1)
    local_pids = [b.pid for b in batches(dest, local, 0)[0]]
    src_pids = sorted({b.pid for b in batches(src, t, 0)[0]})
    assert sorted(local_pids) == src_pids, "the scenario needs the same ids: %s %s" % (
        local_pids, src_pids)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    until(lambda: mirror_state(dest, t)[0] == "promoted", 20, "promoted")
    sent = [b"q0 %d" % i for i in range(5)]
    _one_by_one(q[0], t, sent, acked)
    dest.stop()
    dest.start()
    more = [b"q1 %d" % i for i in range(5)]
    _one_by_one(q[1], t, more, acked)
    sent += more
    hw = batches(dest, t, 0)[1]
    got = [m.value() for m in consume(dest, t, [0], hw, timeout=30)][6:]
    read = [v for v in got if v in sent]
    lost = [v for v in acked if v not in read]
    dup = len(read) - len(set(read))
    print("acknowledged %d of %d, read %d, lost %d, duplicated %d; client errors %s"
          % (len(acked), len(sent), len(read), len(lost), dup, [str(e) for e in errors]))
    assert not [e for e in errors if e.fatal()], [str(e) for e in errors]
    assert sorted(acked) == sorted(sent), "refused: %s" % sorted(set(sent) - set(acked))
    assert not lost and not dup and read == sent, (lost, read)
    for p in q:
        p.flush(5)


def test_a_failed_mirror_does_not_block_a_normal_topic_of_its_name(pair):
    """Issue 33 review 6: only active, paused and promoting mirrors refuse
    producers; a failed one (its topic deleted) leaves the name free."""
    src, dest, t = mirrored(pair, "fm", 1, 5)
    sql_ok(dest, "DELETE FROM topics WHERE name = '%s'" % t)
    until(lambda: (mirror_state(dest, t) or ("",))[0] == "failed", 15, "failed")
    create_topic(dest, t, partitions=1)
    produce_ok(ck_producer(dest), t, [{"key": b"k", "value": b"a normal topic", "partition": 0}])
    got, hw = batches(dest, t, 0)
    assert hw == 1 and b"a normal topic" in got[0].raw


def test_fetch_sizes_beyond_the_frame_limit_are_refused(pair):
    """Issue 33 review 7: a fetch.max.bytes whose answer cannot fit the
    link's 256 MiB frame limit made the link reconnect forever."""
    src, dest = pair
    for k in ("fetch.max.bytes", "max.partition.fetch.bytes"):
        st, text = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) "
                             "VALUES ('big', '%s', '%s=300000000')" % (src.bootstrap, k))
        assert st != 200 and "%s=300000000: 1 to 267386880" % k in str(text), text
    assert rows(sql_ok(dest, "SELECT name FROM cluster_links")) == []
    mirrored(pair, "fb", 1, 20, config="fetch.max.bytes=267386880\n"
                                       "max.partition.fetch.bytes=1000")


def _read_committed(b, topic, want, timeout=20):
    from confluent_kafka import Consumer
    c = Consumer(ck_conf(b, **{"group.id": "g-" + topic, "isolation.level": "read_committed",
                               "auto.offset.reset": "earliest"}))
    c.subscribe([topic])
    seen, deadline = [], time.monotonic() + timeout
    while len(seen) < want and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen.append(m.value())
    c.close()
    return seen


def _open_transaction(src, t, tid):
    tp = Producer(ck_conf(src, **{"transactional.id": tid, "linger.ms": 2}))
    tp.init_transactions(30)
    tp.begin_transaction()
    for i in range(5):
        tp.produce(t, value=b"open %d" % i, partition=0)
    tp.flush(30)
    return tp


def test_promote_waits_for_open_source_transactions_and_failover_aborts_them(pair):
    """Issue 33 review 5: no coordinator here knows the source's producer, so
    a transaction open at promotion would hang read_committed consumers:
    promoting waits until the source ends it; failing over aborts it."""
    src, dest, t = mirrored(pair, "ot", 1, 10)
    tp = _open_transaction(src, t, "open-" + t)
    assert_same(src, dest, t, 1)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % t)
    time.sleep(2.0)
    assert mirror_state(dest, t)[0] == "promoting"
    tp.commit_transaction(30)
    until(lambda: mirror_state(dest, t)[0] == "promoted", 20, "promoted")
    want = _read_committed(src, t, 15)
    assert len(want) == 15 and _read_committed(dest, t, 15) == want

    # failover with a transaction still open: aborted here, consumers go on
    t2 = topic_name("of")
    create_topic(src, t2, partitions=1)
    fill(src, t2, 1, 10)
    assert mirror(dest, t2)[0] == 200
    tp2 = _open_transaction(src, t2, "open-" + t2)
    assert_same(src, dest, t2, 1)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'failed_over' WHERE topic = '%s'" % t2)
    produce_ok(ck_producer(dest), t2, [{"value": b"after failover", "partition": 0}])
    seen = _read_committed(dest, t2, 11)
    assert len(seen) == 11 and seen[-1] == b"after failover"
    assert not [v for v in seen if v.startswith(b"open ")]
    assert re.search(r"mirror topic %s .*-> failed_over: .*1 open transaction of the source "
                     r"aborted" % re.escape(t2), dest.log_text())
    tp2.abort_transaction(30)
