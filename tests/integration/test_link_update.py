"""Changing a cluster link's settings in place: UPDATE cluster_links SET
config, bootstrap_servers (issue 33 Deliver 1; daemon/link/link.c K16, K13;
daemon/cluster/cluster_links.c L5, L8).

What a user checks: the source's SCRAM password is rotated while a producer
writes to a mirrored topic; the link's last_error names the refused login;
an UPDATE of the link's config with the new password makes mirroring go on:
every source batch is in the mirror at the same offsets, byte for byte,
nothing twice, the mirror's state unchanged; an UPDATE that writes the
config back as SELECT shows it ([hidden] for the password) keeps the
password; a bad UPDATE gets INSERT's error text and the link runs on; the
passwords are never shown by SQL nor logged.
"""
import os
import re
import secrets
import socket
import sqlite3
import struct
import threading
import time
from types import SimpleNamespace

import pytest

from confluent_kafka import Producer

from sasl_support import add_user, ck_sasl
from conftest import Broker, free_port
from support import ck_admin, ck_conf, create_topic, topic_name
from cluster_support import cl_zk_get, make_cluster, wait_for, zk  # noqa: F401
from test_link import (assert_same, batches, fill, mirror, mirror_state, mirrored, pair,  # noqa: F401,E501
                       rows, sql, sql_ok, until)
from test_link_dest_cluster import leaders

MECH = "SCRAM-SHA-256"


def scram_source(tmp_path):
    """A source with a SASL_PLAINTEXT SCRAM listener, which the link uses
    (sessions end every 2 s, connections.max.reauth.ms: a rotated password
    shows within that), and a PLAINTEXT one the test reads batches from."""
    port = free_port()
    src = Broker(str(tmp_path / "src"), {
        "admin.listeners": "http://127.0.0.1:%d" % free_port(),
        "sasl.enabled.mechanisms": MECH,
        "connections.max.reauth.ms": "2000"})
    lst = "PLAINTEXT://127.0.0.1:%d,SASL_PLAINTEXT://127.0.0.1:%d" % (src.port, port)
    src.overrides["listeners"] = lst
    src.overrides["advertised.listeners"] = lst
    src.sasl_bootstrap = "127.0.0.1:%d" % port
    os.makedirs(src.workdir, exist_ok=True)
    return src.start()


@pytest.fixture
def scram(tmp_path):
    """The SCRAM source with users alice (the link's, password pw1) and
    writer (the test's producer), killed at the end."""
    src = scram_source(tmp_path)
    try:
        ns = SimpleNamespace(src=src, pw1="pw1-" + secrets.token_hex(8),
                             pw2="pw2-" + secrets.token_hex(8), wpw="w-" + secrets.token_hex(8))
        add_user(src, "alice", ns.pw1, mechanisms=(MECH,))
        add_user(src, "writer", ns.wpw, mechanisms=(MECH,))
        yield ns
    finally:
        src.kill()


def source_topic(src, prefix, partitions):
    t = topic_name(prefix)
    sql_ok(src, "INSERT INTO topics (name, partitions) VALUES ('%s', %d)" % (t, partitions))
    return t


def link_config(password, *extra):
    return "\n".join(("security.protocol=SASL_PLAINTEXT", "sasl.mechanism=" + MECH,
                      "sasl.username=alice", "sasl.password=" + password,
                      "reconnect.backoff.ms=200", "reconnect.backoff.max.ms=1000") + extra)


def quoted(s):
    return "'%s'" % s.replace("'", "''")


def last_error(dest, link="s"):
    return rows(sql_ok(dest, "SELECT last_error FROM cluster_links WHERE name = '%s'"
                       % link))[0][0]


class Writer(threading.Thread):
    """A producer (user writer) on the source until stopped; counts acks."""

    def __init__(self, src, topic, password, partitions=2):
        super().__init__(daemon=True)
        self.partitions = partitions
        conf = ck_conf(src, **ck_sasl(MECH, "writer", password), **{"linger.ms": 5})
        conf["bootstrap.servers"] = src.sasl_bootstrap
        self.p = Producer(conf)
        self.topic, self.stop, self.acked, self.failed = topic, threading.Event(), 0, 0

    def _done(self, err, _msg):
        if err:
            self.failed += 1
        else:
            self.acked += 1

    def run(self):
        i = 0
        while not self.stop.is_set():
            self.p.produce(self.topic, value=b"m%d " % i * (1 + i % 7), partition=i % self.partitions,
                           on_delivery=self._done)
            self.p.poll(0)
            i += 1
            self.stop.wait(0.005)
        assert self.p.flush(30) == 0

    def end(self):
        self.stop.set()
        self.join(40)
        assert not self.is_alive()


def select_everything(dest):
    """Every column of every link view, as text."""
    return "".join(str(sql_ok(dest, "SELECT * FROM %s" % v))
                   for v in ("cluster_links", "mirror_topics", "mirror_partitions"))


def test_a_rotated_scram_password_is_updated_in_place_and_mirroring_goes_on(
        start_broker, scram):
    src, pw1, pw2, wpw = scram.src, scram.pw1, scram.pw2, scram.wpw
    w = None
    try:
        t = source_topic(src, "upd", 2)
        dest = start_broker()
        sql_ok(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
                     "('s', '%s', %s)" % (src.sasl_bootstrap, quoted(link_config(pw1))))
        assert mirror(dest, t, link="s")[0] == 200
        w = Writer(src, t, wpw)
        w.start()
        until(lambda: batches(dest, t, 0)[1] > 20, 30, "mirroring under the first password")

        # the source's password changes: the link's next login is refused
        sql_ok(src, "UPDATE scram_credentials SET password = '%s' WHERE name = 'alice'" % pw2)
        until(lambda: last_error(dest), 20, "the refused login in last_error")
        err = last_error(dest)
        assert "authentication as User:alice failed" in err, err
        stalled = batches(dest, t, 0)[1]

        # the operator updates the link with the new password
        assert sql(dest, "UPDATE cluster_links SET config = %s WHERE name = 's'"
                   % quoted(link_config(pw2)))[0] == 200
        until(lambda: batches(dest, t, 0)[1] > stalled + 20, 30, "mirroring again")
        until(lambda: last_error(dest) is None, 20, "last_error cleared")
        assert mirror_state(dest, t)[0] == "active"

        # written back as SELECT shows it: the password kept, a setting added
        shown = rows(sql_ok(dest, "SELECT config FROM cluster_links WHERE name = 's'"))[0][0]
        assert "sasl.password=[hidden]" in shown and pw2 not in shown, shown
        assert sql(dest, "UPDATE cluster_links SET config = %s WHERE name = 's'"
                   % quoted(shown + "\nfetch.max.wait.ms=100"))[0] == 200
        until(lambda: re.search(r"cluster link s updated through SQL: settings changed: "
                                r"fetch\.max\.wait\.ms;", dest.log_text()), 10, "its log line")
        mark = batches(dest, t, 1)[1]
        until(lambda: batches(dest, t, 1)[1] > mark + 20, 30, "mirroring with [hidden] kept")
        assert last_error(dest) is None

        # bad UPDATEs: INSERT's texts, and the link runs on
        for col, bad in (("config", quoted(shown + "\nno.such.setting=1")),
                         ("bootstrap_servers", "'nohost'"),
                         ("config", quoted(shown + "\nssl.key.password=[hidden]"))):
            st, upd = sql(dest, "UPDATE cluster_links SET %s = %s WHERE name = 's'" % (col, bad))
            assert st != 200, upd
            if "no.such" in bad or "nohost" in bad:
                boot, cfg = (bad, quoted(shown)) if col == "bootstrap_servers" else \
                    ("'%s'" % src.sasl_bootstrap, bad)
                st2, ins = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, "
                                     "config) VALUES ('other', %s, %s)" % (boot, cfg))
                assert st2 != 200
                msg = re.search(r"cluster_links\.[^\"]*", str(upd)).group(0)
                assert msg in str(ins), (upd, ins)
            else:
                assert "stores none for ssl.key.password" in str(upd), upd
        st, upd = sql(dest, "UPDATE cluster_links SET name = 'renamed' WHERE name = 's'")
        assert st != 200 and "keeps its name" in str(upd), upd
        mark = batches(dest, t, 0)[1]
        until(lambda: batches(dest, t, 0)[1] > mark + 20, 30, "the link running on")

        w.end()
        print("acked by the source: %d, failed: %d" % (w.acked, w.failed))
        w = None
        assert_same(src, dest, t, 2)        # same offsets, byte for byte, nothing twice
        assert mirror_state(dest, t)[0] == "active"
        assert last_error(dest) is None
        everything = select_everything(dest)
        log = dest.log_text()
        for pw in (pw1, pw2):
            assert pw not in everything and pw not in log
        assert len(re.findall(r"cluster link s updated through SQL", log)) == 2, log[-3000:]
    finally:
        if w:
            w.stop.set()


# ---- cluster destination -------------------------------------------------------------
ENCODER = {"password.encoder.secret": "cluster-encoder-secret",
           "default.replication.factor": "3"}


def cluster_rows(b, stmt):
    return [tuple(r.values()) for r in b.sql(stmt)]


def test_an_update_through_one_broker_reaches_every_mirror_leader(make_cluster, scram):  # noqa: F811,E501
    """A 3-broker destination, the mirror's 6 partitions led by all three;
    the source's password rotated, the link updated through broker 1: every
    broker's link logs in again and copies on, each mirror partition holds
    the source's batches at the same offsets, no mirror was dropped."""
    src, pw1, pw2, wpw = scram.src, scram.pw1, scram.pw2, scram.wpw
    w = None
    try:
        t = source_topic(src, "updc", 6)
        dest = make_cluster(3, overrides=ENCODER)
        b1, b2, b3 = dest.brokers
        b2.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('s', '%s', "
               "%s)" % (src.sasl_bootstrap, quoted(link_config(pw1))))
        wait_for(lambda: all(b.sql("SELECT name FROM cluster_links") for b in dest.brokers),
                 20, "the link everywhere")
        b3.sql("INSERT INTO mirror_topics (topic, link) VALUES ('%s', 's')" % t)
        wait_for(lambda: len(leaders(b1, t)) == 6 and
                 all(l >= 1 for l, _r in leaders(b1, t).values()), 30, "6 partitions led")
        lead = {p: l for p, (l, _r) in leaders(b1, t).items()}
        assert set(lead.values()) == {1, 2, 3}, lead      # every broker copies some
        w = Writer(src, t, wpw, partitions=6)
        w.start()

        def copied_past(n):
            return all(batches(dest.broker(lead[p]), t, p)[1] > n for p in range(6))
        wait_for(lambda: copied_past(5), 40, "every partition mirrored by its leader")

        sql_ok(src, "UPDATE scram_credentials SET password = '%s' WHERE name = 'alice'" % pw2)
        wait_for(lambda: all(cluster_rows(b, "SELECT last_error FROM cluster_links")[0][0]
                             for b in dest.brokers), 20, "every broker's login refused")
        stalled = max(batches(dest.broker(lead[p]), t, p)[1] for p in range(6))
        b1.sql("UPDATE cluster_links SET config = %s WHERE name = 's'"
               % quoted(link_config(pw2)))
        wait_for(lambda: copied_past(stalled + 10), 40, "every leader copying again")
        wait_for(lambda: all(cluster_rows(b, "SELECT last_error FROM cluster_links") ==
                             [(None,)] for b in dest.brokers), 20, "last_error cleared")
        w.end()
        w = None
        for p in range(6):
            want, hw = batches(src, t, p)
            b = dest.broker(lead[p])
            wait_for(lambda b=b, p=p, hw=hw: batches(b, t, p)[1] == hw, 30, "%s-%d" % (t, p))
            got, _ = batches(b, t, p)
            assert [g.ident for g in got] == [x.ident for x in want]
            assert [g.raw for g in got] == [x.raw for x in want]
        for b in dest.brokers:
            assert cluster_rows(b, "SELECT state FROM mirror_topics") == [("active",)]
            log = b.log_text()
            assert "its row went or changed" not in log, b.broker_id
            assert pw1 not in log and pw2 not in log
            if b is not b1:
                assert "cluster link s: its settings changed on another broker" in log
    finally:
        if w:
            w.stop.set()


def test_a_reseal_at_start_does_not_bring_back_a_link_deleted_meanwhile(make_cluster, scram):  # noqa: F811,E501
    """Broker 3 stopped; the link deleted through broker 1; broker 3's row
    made plain as an older Sluice stored it; broker 3 started: its reseal
    does not make the znode again, and the link stays deleted everywhere."""
    src = scram.src
    dest = make_cluster(3, overrides=ENCODER)
    b1, b2, b3 = dest.brokers
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('s', '%s', "
           "%s)" % (src.sasl_bootstrap, quoted(link_config("pw"))))
    wait_for(lambda: all(b.sql("SELECT name FROM cluster_links") for b in dest.brokers),
             20, "the link everywhere")
    b3.stop()
    b1.sql("DELETE FROM cluster_links WHERE name = 's'")
    wait_for(lambda: not b2.sql("SELECT name FROM cluster_links"), 20, "deleted on 2")
    db = sqlite3.connect(os.path.join(b3.data_dir, "sluice.db"))
    db.execute("UPDATE cluster_links SET secrets = 'sasl.password=pw\n' WHERE name = 's'")
    db.commit()
    db.close()
    b3.start()
    time.sleep(3)                               # a reseal's write lands, if any
    path = "/sluice/cluster_links/s"
    for b in dest.brokers:
        wait_for(lambda b=b: not b.sql("SELECT name FROM cluster_links"), 15,
                 "broker %d: no link" % b.broker_id)
    assert cl_zk_get(dest.zk_connect, path) is None
    log = b3.log_text()
    assert "secret settings sealed with password.encoder.secret" in log
    print("broker 3's row dropped by: %s" % ("the reseal (cluster_links.c L8)"
                                             if "dropped here, not published" in log
                                             else "the session's resync (L2)"))


# ---- issue 33 review: what an UPDATE may keep, the source's cluster id (link.c K16, K18) --
@pytest.fixture
def fake_source():
    """A listener that records every request frame it gets and answers only
    SaslHandshake (mechanisms [PLAIN]): a host an UPDATE could point a
    link at to collect its password.  Closed at the end."""
    ls = socket.socket()
    ls.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    ls.bind(("127.0.0.1", 0))
    ls.listen(4)
    ls.settimeout(0.5)
    got, stop = [], threading.Event()

    def one(c):
        with c:
            c.settimeout(5)
            while not stop.is_set():
                hdr = c.recv(4, socket.MSG_WAITALL)
                if len(hdr) < 4:
                    return
                body = c.recv(struct.unpack(">i", hdr)[0], socket.MSG_WAITALL)
                got.append(body)
                key, _ver, corr = struct.unpack(">hhi", body[:8])
                if key != 17:                    # SaslHandshake: error 0, [PLAIN]
                    return
                resp = struct.pack(">ihi", corr, 0, 1) + struct.pack(">h", 5) + b"PLAIN"
                c.sendall(struct.pack(">i", len(resp)) + resp)

    def serve():
        while not stop.is_set():
            try:
                c, _ = ls.accept()
            except OSError:
                continue
            try:
                one(c)
            except OSError:
                pass
    th = threading.Thread(target=serve, daemon=True)
    th.start()
    try:
        yield SimpleNamespace(bootstrap="127.0.0.1:%d" % ls.getsockname()[1], got=got)
    finally:
        stop.set()
        th.join(10)
        ls.close()


def test_a_kept_password_never_goes_where_the_update_moves_the_link(start_broker, scram,
                                                                      fake_source):
    """An ALTER holder who cannot read a link's secrets moves its bootstrap
    to a host of its own and its mechanism to PLAIN, keeping
    sasl.password=[hidden]: refused, naming the rule, and the host never
    gets a byte of the password; the same UPDATE with a password given is
    taken (the host then gets that one: the listener does see them)."""
    src, pw1 = scram.src, scram.pw1
    dest = start_broker()
    sql_ok(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
                 "('s', '%s', %s)" % (src.sasl_bootstrap, quoted(link_config(pw1))))
    shown = rows(sql_ok(dest, "SELECT config FROM cluster_links WHERE name = 's'"))[0][0]
    assert "sasl.password=[hidden]" in shown and pw1 not in shown, shown
    evil = shown.replace("sasl.mechanism=" + MECH, "sasl.mechanism=PLAIN")
    rule = "sasl.password must be given again when bootstrap_servers"
    for boot, cfg, what in ((fake_source.bootstrap, evil, "bootstrap_servers"),
                            (fake_source.bootstrap, shown, "bootstrap_servers"),
                            (src.sasl_bootstrap, evil, "sasl.mechanism"),
                            (src.sasl_bootstrap,
                             shown.replace("SASL_PLAINTEXT", "SASL_SSL"), "security.protocol"),
                            (src.sasl_bootstrap, shown + "\nssl.ca.location=/etc/hostname",
                             "ssl.ca.location"),
                            (src.sasl_bootstrap,
                             shown + "\nssl.endpoint.identification.algorithm=",
                             "ssl.endpoint.identification.algorithm")):
        st, txt = sql(dest, "UPDATE cluster_links SET bootstrap_servers = '%s', config = %s "
                            "WHERE name = 's'" % (boot, quoted(cfg)))
        print("UPDATE (%s changed): %s %s" % (what, st, txt))
        assert st != 200 and rule in str(txt) and "(%s changes here)" % what in str(txt), txt
    assert rows(sql_ok(dest, "SELECT bootstrap_servers FROM cluster_links")) == \
        [(src.sasl_bootstrap,)]
    time.sleep(3)                               # a connection there would have come by now
    print("frames at the fake host after the refused UPDATEs: %d" % len(fake_source.got))
    assert not any(pw1.encode() in g for g in fake_source.got)

    given = "pw-given-" + secrets.token_hex(4)
    st, txt = sql(dest, "UPDATE cluster_links SET bootstrap_servers = '%s', config = %s "
                        "WHERE name = 's'" % (fake_source.bootstrap,
                                              quoted(evil.replace("sasl.password=[hidden]",
                                                                  "sasl.password=" + given))))
    assert st == 200, txt
    until(lambda: any(given.encode() in g for g in fake_source.got), 20,
          "the given password at the host the UPDATE named")
    assert not any(pw1.encode() in g for g in fake_source.got)
    assert pw1 not in dest.log_text() and given not in dest.log_text()


def cluster_id(b):
    return ck_admin(b).list_topics(timeout=10).cluster_id


def test_bootstrap_moved_to_another_cluster_fetches_nothing_from_it(pair, start_broker):
    """The reviewer's scenario: a mirror of 60 records; its link's
    bootstrap_servers changed to another cluster holding a topic of the
    same name (10 records, then 5 more): the mirror keeps its 60 records,
    byte for byte, nothing cut nor appended, last_error names both
    cluster ids, also after a restart of the destination (the id is
    stored); bootstrap_servers pointed back: it goes on, every source
    batch at the same offsets."""
    src, dest, t = mirrored(pair, "mv", 1, 60)
    before, hw_a = batches(dest, t, 0)
    id_a = cluster_id(src)
    until(lambda: rows(sql_ok(dest, "SELECT source_cluster_id FROM cluster_links")) ==
          [(id_a,)], 10, "the source's cluster id recorded")
    other = start_broker()                      # another cluster, same topic name
    create_topic(other, t, partitions=1)
    fill(other, t, 1, 10)
    id_b = cluster_id(other)
    assert id_a and id_b and id_a != id_b
    mark = len(dest.log_text())
    assert sql(dest, "UPDATE cluster_links SET bootstrap_servers = '%s' WHERE name = 'src'"
               % other.bootstrap)[0] == 200
    want = "the source at %s is cluster %s, the link was made for cluster %s" % (
        other.bootstrap, id_b, id_a)
    until(lambda: want in (last_error(dest, "src") or ""), 20, "last_error naming both ids")
    fill(other, t, 1, 5, start=100)
    fill(src, t, 1, 7, start=200)               # the source goes on meanwhile
    time.sleep(5)                               # several reconnects to the other cluster
    after, hw = batches(dest, t, 0)
    print("mirror end before: %d, after: %d; last_error: %s" % (hw_a, hw, last_error(dest, "src")))
    assert hw == hw_a and [b.raw for b in after] == [b.raw for b in before]
    assert mirror_state(dest, t)[0] == "active"
    log = dest.log_text()[mark:]
    assert "cut from" not in log, log
    assert log.count(want) == 1, log           # logged once, retried with backoff

    dest.stop()                                 # the binding survives a restart
    mark = len(dest.log_text())
    dest.start()
    time.sleep(4)
    again, hw = batches(dest, t, 0)
    assert hw == hw_a and [b.raw for b in again] == [b.raw for b in before]
    assert want in (last_error(dest, "src") or "")
    assert "bound to source cluster" not in dest.log_text()[mark:]

    assert sql(dest, "UPDATE cluster_links SET bootstrap_servers = '%s' WHERE name = 'src'"
               % src.bootstrap)[0] == 200
    until(lambda: last_error(dest, "src") is None, 20, "last_error cleared")
    assert_same(src, dest, t, 1)                # 67 records, the source's, same offsets
    assert batches(dest, t, 0)[1] == hw_a + 7
    assert mirror_state(dest, t)[0] == "active"


def test_a_link_made_again_while_a_broker_was_down_is_bound_there_to_its_new_source(
        make_cluster, start_broker):  # noqa: F811
    """cluster_links.c L10: the source cluster id is the link's znode's.
    A link bound to cluster A, deleted and made again under the same name
    for cluster B while broker 3 was down: broker 3 takes B's binding (it
    kept A's, refused B as "another cluster" and mirrored nothing, with no
    way out through SQL)."""
    a, bsrc = start_broker(), start_broker()
    id_a, id_b = cluster_id(a), cluster_id(bsrc)
    assert id_a != id_b
    dest = make_cluster(3)
    b1, b2, b3 = dest.brokers
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('s', '%s', '')"
           % a.bootstrap)
    wait_for(lambda: all(cluster_rows(b, "SELECT source_cluster_id FROM cluster_links") ==
                         [(id_a,)] for b in dest.brokers), 30, "bound to A everywhere")
    b3.stop()
    b1.sql("DELETE FROM cluster_links WHERE name = 's'")
    b1.sql("INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES ('s', '%s', '')"
           % bsrc.bootstrap)
    wait_for(lambda: cluster_rows(b1, "SELECT source_cluster_id FROM cluster_links") ==
             [(id_b,)], 30, "broker 1 bound to B")
    b3.start()
    q = "SELECT bootstrap_servers, source_cluster_id, last_error FROM cluster_links"
    wait_for(lambda: all(cluster_rows(b, q) == [(bsrc.bootstrap, id_b, None)]
                         for b in dest.brokers), 30, "every broker bound to B, no error")
    for b in dest.brokers:
        print(b.broker_id, cluster_rows(b, q))
