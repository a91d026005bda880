"""Cluster links' secrets at rest, and compare-and-set on the link and
mirror znodes (issue 33 Deliver 1; daemon/security/sec_pwenc.c,
daemon/link/link.c K4, daemon/cluster/cluster_links.c L6, L7).

What a user checks: a standalone link to a SASL source with
sasl.password mirrors, and the password's bytes are in no file of the
destination's data directory (the SQLite file, its WAL, the segments) nor
its log, before and after a restart, after which the link still logs in;
a row stored plain by an older Sluice still logs in and is sealed at start
(no file holds it then); a broker started with another
password.encoder.secret names the problem in the log and in
cluster_links.last_error and serves on, and password.encoder.old.secret
brings the link back; on a 3-broker destination cluster the password is in
no znode and no broker's data directory, and every broker's link logs in
(each leads a mirror partition and copies it); a cluster without
password.encoder.secret refuses a link with a secret, naming the setting;
an operator's state change racing a terminal state written to ZooKeeper
never leaves that terminal state anywhere, nor a promoting one (link.c K11); an
UPDATE racing another broker's DELETE does not bring the mirror back; a
changed password.encoder.iterations keeps the link's password readable; a
password.encoder.secret under 16 characters is refused at start.
"""
import os
import secrets
import threading
import time

import pytest
from confluent_kafka import Producer

from cluster_support import cl_zk_children, cl_zk_get, cl_zk_set, make_cluster, wait_for, zk  # noqa: F401,E501
from sasl_support import SaslBroker, ck_sasl
from conftest import BrokerDied, free_port
from support import ck_conf, create_topic, topic_name
from test_link import PLAIN_LOGIN, batches, link_source, mirror, rows, sql_ok, until

SECRET_ERR = "password.encoder.secret"


def sasl_source(tmp_path, password):
    """A standalone SASL_PLAINTEXT source whose PLAIN user alice has password."""
    port = free_port()
    src = SaslBroker(str(tmp_path / "src"), {
        "admin.listeners": "http://127.0.0.1:%d" % port,
        "sasl.enabled.mechanisms": "PLAIN",
        "listener.name.sasl_plaintext.plain.sasl.jaas.config":
            '%s required user_alice="%s";' % (PLAIN_LOGIN, password)})
    os.makedirs(src.workdir, exist_ok=True)
    return src.start()


def link_config(password):
    return ("security.protocol=SASL_PLAINTEXT\nsasl.mechanism=PLAIN\nsasl.username=alice\n"
            "sasl.password=%s\nreconnect.backoff.ms=200\nreconnect.backoff.max.ms=1000"
            % password)


def source_topic(src, password, partitions=1, n=10):
    t = topic_name("sec")
    sql_ok(src, "INSERT INTO topics (name, partitions) VALUES ('%s', %d)" % (t, partitions))
    produce(src, password, t, partitions, 0, n)
    return t


def produce(src, password, t, partitions, start, n):
    p = Producer(ck_conf(src, **ck_sasl("PLAIN", "alice", password)))
    for i in range(start, start + n):
        p.produce(t, value=b"m%d" % i, partition=i % partitions)
    assert p.flush(30) == 0


def files_holding(root, needle):
    """Every file under root whose bytes contain needle."""
    out = []
    for d, _dirs, names in os.walk(root):
        for name in names:
            path = os.path.join(d, name)
            try:
                with open(path, "rb") as f:
                    if needle in f.read():
                        out.append(path)
            except OSError:
                pass
    return out


def assert_nowhere(b, password):
    pw = password.encode()
    names = sorted(os.listdir(b.data_dir))
    assert "sluice.db" in names, names
    assert files_holding(b.data_dir, pw) == [], "the password is stored as given"
    assert pw not in b.log_text().encode()


def sasl_mirror(start_broker, src, pw, overrides=None):
    """A standalone destination (with overrides) whose link 's' to the
    SASL source src mirrors a new 10-message topic; (dest, topic)."""
    dest = start_broker(overrides) if overrides else start_broker()
    t = source_topic(src, pw)
    link_source(dest, src, name="s", config=link_config(pw))
    assert mirror(dest, t, link="s")[0] == 200
    until(lambda: batches(dest, t, 0)[1] == 10, 30, "mirrored over SASL")
    return dest, t


def test_a_standalone_link_password_is_in_no_file_and_logs_in_after_a_restart(
        start_broker, tmp_path):
    pw = "pw-" + secrets.token_hex(12)
    src = sasl_source(tmp_path, pw)
    try:
        dest, t = sasl_mirror(start_broker, src, pw)
        assert_nowhere(dest, pw)
        key = os.path.join(dest.data_dir, "password-encoder.key")
        assert os.stat(key).st_mode & 0o777 == 0o600       # sec_pwenc.c P5
        dest.restart()
        produce(src, pw, t, 1, 10, 5)
        until(lambda: batches(dest, t, 0)[1] == 15, 30, "mirrored over SASL after a restart")
        assert rows(sql_ok(dest, "SELECT last_error FROM cluster_links")) == [(None,)]
        assert_nowhere(dest, pw)

        # a row an older Sluice stored plain: it logs in, and is sealed at start
        import sqlite3
        dest.stop()
        db = sqlite3.connect(os.path.join(dest.data_dir, "sluice.db"))
        db.execute("UPDATE cluster_links SET secrets = ? WHERE name = 's'",
                   ("sasl.password=%s\n" % pw,))
        db.commit()
        db.close()
        assert files_holding(dest.data_dir, pw.encode())       # it is there now
        dest.start()
        produce(src, pw, t, 1, 15, 5)
        until(lambda: batches(dest, t, 0)[1] == 20, 30, "mirrored from a plain row")
        assert "secret settings sealed with password.encoder.secret" in dest.log_text()
        assert_nowhere(dest, pw)
    finally:
        src.kill()


def test_a_wrong_encoder_secret_is_named_and_the_old_secret_brings_the_link_back(
        start_broker, tmp_path):
    pw = "pw-" + secrets.token_hex(12)
    src = sasl_source(tmp_path, pw)
    try:
        dest, t = sasl_mirror(start_broker, src, pw,
                              {"password.encoder.secret": "first-encoder-secret"})
        assert not os.path.exists(os.path.join(dest.data_dir, "password-encoder.key"))

        dest.overrides["password.encoder.secret"] = "second-encoder-secret"
        dest.restart()
        err = rows(sql_ok(dest, "SELECT last_error FROM cluster_links"))[0][0]
        assert SECRET_ERR in (err or ""), err
        assert "cluster link s: its stored settings are refused (cannot decrypt" in \
            dest.log_text()
        t2 = topic_name("serves")                   # the broker serves on
        create_topic(dest, t2, partitions=1)
        assert dest.alive()

        # the old secret opens it; it is sealed again with the new one
        dest.overrides["password.encoder.old.secret"] = "first-encoder-secret"
        dest.restart()
        produce(src, pw, t, 1, 10, 5)
        until(lambda: batches(dest, t, 0)[1] == 15, 30, "mirrored with the old secret given")
        del dest.overrides["password.encoder.old.secret"]
        dest.restart()
        produce(src, pw, t, 1, 15, 5)
        until(lambda: batches(dest, t, 0)[1] == 20, 30, "mirrored under the new secret alone")
        assert_nowhere(dest, pw)
    finally:
        src.kill()


def znodes(connect, path):
    """(path, data) of every znode under path (connect without a chroot)."""
    got = cl_zk_get(connect, path)
    out = [(path, got[0] if got else None)]
    for child in cl_zk_children(connect, path):
        out += znodes(connect, path + "/" + child)
    return out


def leaders_of(b, topic):
    from test_link_dest_cluster import leaders
    return leaders(b, topic)


def test_cluster_znodes_hold_no_password_and_every_broker_logs_in(make_cluster, tmp_path):  # noqa: F811,E501
    pw = "pw-" + secrets.token_hex(12)
    src = sasl_source(tmp_path, pw)
    try:
        dest = make_cluster(3, overrides={"password.encoder.secret": "cluster-encoder-secret",
                                          "default.replication.factor": "3"})
        b1, b2, b3 = dest.brokers
        t = source_topic(src, pw, partitions=6, n=60)
        b2.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('s', '%s', "
               "'%s')" % (src.bootstrap, link_config(pw)))
        wait_for(lambda: b3.sql("SELECT name FROM cluster_links"), 20, "broker 3 to apply it")
        b3.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 's')" % t)
        wait_for(lambda: len(leaders_of(b1, t)) == 6 and
                 all(l >= 1 for l, _r in leaders_of(b1, t).values()), 30,
                 "the mirror's 6 partitions led")
        lead = {p: l for p, (l, _r) in leaders_of(b1, t).items()}
        assert set(lead.values()) == {1, 2, 3}, lead      # every broker copies one

        def copied():
            return all(batches(dest.broker(lead[p]), t, p)[1] == 10 for p in range(6))
        wait_for(copied, 40, "every partition mirrored by its leader")
        for b in dest.brokers:
            assert [tuple(r.values()) for r in b.sql("SELECT last_error FROM cluster_links")] \
                == [(None,)], b.broker_id
            assert files_holding(b.data_dir, pw.encode()) == [], b.broker_id
            assert pw not in b.log_text()
        hostport, _, chroot = dest.zk_connect.partition("/")
        nodes = znodes(hostport, "/" + chroot)      # the cluster's whole tree
        link = [d for p, d in nodes if p.endswith("/cluster_links/s")]
        assert link and b"sluice-pwenc:v2:" in link[0], nodes
        assert [p for p, d in nodes if d and pw.encode() in d] == []

        # a restarted broker opens the row again and copies on
        victim = dest.broker(lead[0])
        victim.restart()
        produce(src, pw, t, 6, 60, 6)
        wait_for(lambda: all(batches(dest.broker(l), t, p)[1] == 11
                             for p, (l, _r) in leaders_of(b1, t).items()), 40,
                 "mirrored after a restart")
    finally:
        src.kill()


def test_a_cluster_without_encoder_secret_refuses_a_link_with_a_secret(
        make_cluster, start_broker):  # noqa: F811
    src = start_broker()
    dest = make_cluster(3)
    b1, b2, b3 = dest.brokers
    err = b1.sql_error("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
                       "('s', '%s', 'sasl.password=x')" % src.bootstrap)
    assert "cluster mode needs password.encoder.secret" in str(err), err
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('src', '%s', "
           "'client.id=no-secret')" % src.bootstrap)    # a link without secrets is fine
    for b in dest.brokers:
        wait_for(lambda b=b: b.sql("SELECT name FROM cluster_links"), 20, "the link everywhere")


def mirror_states(dest, t):
    return [tuple(r.values()) for b in dest.brokers for r in
            b.sql("SELECT state FROM mirror_topics WHERE topic = '%s'" % t)]


def new_mirror(dest, src, prefix):
    """A 1-partition source topic mirrored (created on broker 2), active on
    every broker; its name."""
    t = topic_name(prefix)
    create_topic(src, t, partitions=1)
    wait_for(lambda: all(b.sql("SELECT name FROM cluster_links") for b in dest.brokers), 20,
             "the link everywhere")
    dest.brokers[1].sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'src')" % t)
    wait_for(lambda: mirror_states(dest, t) == [("active",)] * 3, 20, "the mirror everywhere")
    return t


def race_round(dest, t, meanwhile, operator_sql):
    """Broker 1 stopped, meanwhile() changes the mirror t elsewhere (its
    watch event reaches broker 1), then ZooKeeper stopped and broker 1 let
    go: operator_sql sent to it is taken there (it cannot read the change
    yet) and written when ZooKeeper runs again, as a change made at the
    same time on another broker.  "taken", or "refused: ..." when broker 1
    refused it (it saw the change first, or, for a terminal state, which
    waits for ZooKeeper (link.c K15), the cluster held another)."""
    b1 = dest.brokers[0]
    out = []

    def operator():
        try:
            b1.sql(operator_sql % t)
            out.append("taken")
        except AssertionError as e:
            out.append("refused: %s" % str(e)[-160:])
    b1.sigstop()
    try:
        meanwhile()
        time.sleep(0.2)
        dest.zk.sigstop()
        b1.sigcont()
        th = threading.Thread(target=operator, daemon=True)
        th.start()
        th.join(1.0)                                # a terminal state waits for ZooKeeper
    finally:
        b1.sigcont()
        dest.zk.sigcont()
    th.join(30)
    return out[0] if out else "no answer"


def set_znode_state(dest, t, state):
    path = "/sluice/mirror_topics/" + t
    data, _v = cl_zk_get(dest.zk_connect, path)
    return lambda: cl_zk_set(dest.zk_connect, path, data.replace(b'"active"',
                                                               b'"%s"' % state.encode()))


def race_rounds(make_cluster, start_broker, rounds, zk_state, operator_state, ends):  # noqa: F811,E501
    """A 3-broker destination with a link; rounds of race_round, each on a
    new mirror: ZooKeeper's zk_state (set on the znode) against an
    operator's operator_state on broker 1.  ends(znode, states) says when
    the round is over as it must be.  The outcomes of the operator's
    statements, and the cluster."""
    src = start_broker()
    dest = make_cluster(3)
    dest.brokers[0].sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', "
                        "'%s')" % src.bootstrap)
    outcomes = []
    for rnd in range(rounds):
        t = new_mirror(dest, src, "%s%d" % (zk_state[:4], rnd))
        path = "/sluice/mirror_topics/" + t
        outcomes.append(race_round(dest, t, set_znode_state(dest, t, zk_state),
                                   "UPDATE mirror_topics SET state = '%s' WHERE topic = '%%s'"
                                   % operator_state))
        time.sleep(1)                               # the write, or the retries, land

        def settled():
            zs = cl_zk_get(dest.zk_connect, path)[0]
            states = mirror_states(dest, t)
            return ends(zs, states, t), (zs, states)
        try:
            wait_for(lambda: settled()[0], 15, "round %d: %s against %s settled"
                     % (rnd, operator_state, zk_state))
        except AssertionError:
            raise AssertionError("round %d: %s (the operator's '%s' per round: %s)"
                                 % (rnd, settled()[1], operator_state, outcomes))
    print("the operator's '%s' per round: %s" % (operator_state, outcomes))
    return outcomes, dest


def test_an_operator_change_racing_a_terminal_state_never_leaves_it(
        make_cluster, start_broker):  # noqa: F811
    # Each round: broker 1 stopped, the mirror's znode set to 'failed' (as
    # the controller does when creation fails), then ZooKeeper stopped and
    # broker 1 let go: an operator's 'paused' sent to it is taken there (it
    # cannot read 'failed' yet) and written when ZooKeeper runs again, as
    # a change made at the same time on another broker.  It must not
    # overwrite 'failed' (link.c K13, cluster_links.c L6): the znode and
    # every broker end 'failed'.
    outcomes, _ = race_rounds(make_cluster, start_broker, 3, "failed", "paused",
                              lambda zs, st, t: b'"failed"' in zs and st == [("failed",)] * 3)
    assert outcomes.count("taken") >= 2, outcomes   # the race happened


def test_an_operator_pause_racing_promoting_never_takes_it_back(make_cluster, start_broker):  # noqa: F811,E501
    # The review's second serious finding: broker 1's 'paused', taken while
    # it could not see ZooKeeper's 'promoting', was written over it (and a
    # retry wrote the JSON of its first try).  cluster_links.c L6 applies
    # the whole state machine at each try: 'promoting' goes on to promoted
    # or failed_over only (link.c K11), so broker 1 takes 'promoting'
    # instead; every broker ends promoting or promoted (the empty source is
    # caught up at once), all the same.
    def ends(zs, st, t):
        return (b'"paused"' not in zs and len(set(st)) == 1 and
                st[0][0] in ("promoting", "promoted") and ('"%s"' % st[0][0]).encode() in zs)
    outcomes, _ = race_rounds(make_cluster, start_broker, 2, "promoting", "paused", ends)
    assert "taken" in outcomes, outcomes            # the race happened


def test_an_update_racing_a_delete_does_not_bring_the_mirror_back(make_cluster, start_broker):  # noqa: F811,E501
    # The review's second minor finding: with ZooKeeper stopped, broker 1 takes an UPDATE
    # (its read of the znode waits) and broker 2 a DELETE of the same
    # mirror (its delete waits); ZooKeeper let go answers broker 1's read,
    # deletes, and broker 1's write finds no znode: its retry created it
    # again from the row it had read first.  cluster_links.c L8: only an
    # INSERT creates; the mirror stays deleted on every broker.
    src = start_broker()
    dest = make_cluster(3)
    b1, b2, b3 = dest.brokers
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers) VALUES ('src', '%s')"
           % src.bootstrap)
    for rnd in range(2):
        t = new_mirror(dest, src, "del%d" % rnd)
        path = "/sluice/mirror_topics/" + t
        dest.zk.sigstop()
        try:
            b1.sql("UPDATE mirror_topics SET state = 'paused' WHERE topic = '%s'" % t)
            b2.sql("DELETE FROM mirror_topics WHERE topic = '%s'" % t)
        finally:
            dest.zk.sigcont()
        time.sleep(3)                               # broker 1's write lands, if any

        def settled():
            return cl_zk_get(dest.zk_connect, path) is None and mirror_states(dest, t) == []
        try:
            wait_for(settled, 15, "round %d: deleted everywhere" % rnd)
        except AssertionError:
            raise AssertionError("round %d: znode %s, rows %s"
                                 % (rnd, cl_zk_get(dest.zk_connect, path),
                                    mirror_states(dest, t)))


def test_a_changed_iteration_count_keeps_every_link_secret(start_broker, tmp_path):
    # The review's first minor finding: password.encoder.iterations is in
    # each sealed value (sec_pwenc.c P7), so a broker restarted with another
    # count still opens the link's password, logs in, and seals it again
    # with the new count.
    pw = "pw-" + secrets.token_hex(12)
    src = sasl_source(tmp_path, pw)
    try:
        dest, t = sasl_mirror(start_broker, src, pw)
        dest.overrides["password.encoder.iterations"] = "8192"
        dest.restart()
        produce(src, pw, t, 1, 10, 5)
        until(lambda: batches(dest, t, 0)[1] == 15, 30, "mirrored after the count changed")
        assert rows(sql_ok(dest, "SELECT last_error FROM cluster_links")) == [(None,)]
        assert "cluster link s: secret settings sealed with password.encoder.secret" in \
            dest.log_text()
        assert_nowhere(dest, pw)
    finally:
        src.kill()


def test_a_short_encoder_secret_is_refused_at_start(start_broker):
    # sec_pwenc.c P8: under 16 characters, the broker does not start, and
    # says why.
    b = start_broker()
    b.stop()
    b.overrides["password.encoder.secret"] = "too-short"
    with pytest.raises(BrokerDied):
        b.start()
    b.expect_dead = True                            # its exit was the point
    assert "password.encoder.secret is shorter than 16 characters" in b.log_text()


def test_two_terminal_states_racing_end_in_one_everywhere(make_cluster, start_broker):  # noqa: F811,E501
    # The review's first serious finding: broker 1 took an operator's
    # 'failed_over' (ABORT markers, epochs) while ZooKeeper held the
    # controller's 'promoted', and never left it: brokers [failed_over,
    # promoted, promoted] for good.  link.c K15: a terminal state is taken
    # only once ZooKeeper holds it, so broker 1's statement answers that
    # the cluster has it 'promoted', and every broker (and the znode) ends
    # 'promoted'; broker 1 never acted on 'failed_over'.
    outcomes, dest = race_rounds(
        make_cluster, start_broker, 2, "promoted", "failed_over",
        lambda zs, st, t: b'"promoted"' in zs and st == [("promoted",)] * 3)
    assert ": active -> failed_over" not in dest.brokers[0].log_text(), \
        "broker 1 acted on a state the cluster never held"
    assert all(o.startswith("refused") for o in outcomes), outcomes
    assert any("has it promoted already" in o for o in outcomes), outcomes
