"""Cluster links: consumer offsets synced and mirror topics picked by
filters (issue 33 Deliver 1's filters and 3; daemon/link/link_sync.c).
Two standalone brokers, a source and a destination, as test_link.py.

What a user checks: a confluent_kafka group that consumed and committed on
the source, stopped, then resumed on the destination after the mirror
failed over, re-reads nothing past one sync interval and skips nothing; a
group active on the destination keeps its own offsets; a committed offset
past what the mirror holds is clamped to the mirror's log end; filters
mirror the matching source topics, later ones too, and leave excluded,
internal and locally existing ones alone; bad filter settings are refused.
"""
import json
import os
import re
import socket
import sqlite3
import struct
import threading
import time

from confluent_kafka import TopicPartition

import kafka_raw as kr
from support import admin_socket, ck_consumer, create_topic, socket_http, topic_name
from test_link import (assert_same, batches, fill, link_source, mirror, mirror_state, pair,
                       rows, sql, sql_ok, until)

assert pair                       # the fixture, imported for the tests below

GROUP_FILTER = json.dumps({"groupFilters": [
    {"name": "grp-", "patternType": "PREFIXED", "filterType": "INCLUDE"},
    {"name": "grp-no", "patternType": "PREFIXED", "filterType": "EXCLUDE"}]})
SYNC = ("consumer.offset.sync.enable=true\nconsumer.offset.sync.ms=1000\n"
        "consumer.offset.group.filters=%s\n" % GROUP_FILTER)


def committed(b, group, topic):
    return dict(rows(sql_ok(b, "SELECT partition, \"offset\" FROM committed_offsets WHERE "
                               "group_id = '%s' AND topic = '%s'" % (group, topic))))


def link_row(dest):
    got = sql_ok(dest, "SELECT offsets_synced_at, groups_synced, sync_error, topics_skipped "
                       "FROM cluster_links WHERE name = 'src'")
    return rows(got)[0]


def metrics(b):
    st, text, _ = socket_http(admin_socket(b), "/metrics")
    assert st == 200
    return text


def rounds(b):
    m = re.search(r'sluice_link_offset_sync_rounds_total\{link="src"\} (\d+)', metrics(b))
    return int(m.group(1)) if m else 0


def consume(b, group, topic, n=None, commit_each=True, timeout=30, pace=0.0, times=None):
    """Messages (partition, offset, value) a group consumes: n of them or all
    there are; each committed synchronously when commit_each."""
    c = ck_consumer(b, **{"group.id": group})
    c.subscribe([topic])
    got, deadline, idle = [], time.monotonic() + timeout, 0
    while time.monotonic() < deadline and (n is None or len(got) < n):
        m = c.poll(0.5)
        if m is None:
            idle += 1
            if n is None and idle >= 6 and got:
                break
            continue
        assert not m.error(), m.error()
        idle = 0
        got.append((m.partition(), m.offset(), m.value()))
        if times is not None:
            times.append(time.monotonic())
        if commit_each:
            c.commit(offsets=[TopicPartition(topic, m.partition(), m.offset() + 1)],
                     asynchronous=False)
        if pace:
            time.sleep(pace)
    c.close()
    return got


def test_a_group_fails_over_and_resumes_at_the_synced_offsets(pair):
    src, dest = pair
    t, group = topic_name("osync"), "grp-" + topic_name("g")
    create_topic(src, t, partitions=2)
    fill(src, t, 2, 300)
    link_source(dest, src, config=SYNC)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, 2)

    # the group consumes part of it on the source, committing each message,
    # about 100 per second (the sync runs every second meanwhile)
    times = []
    first = consume(src, group, t, n=180, pace=0.01, times=times)
    rate = (len(times) - 1) / (times[-1] - times[0])      # messages per second
    # fails over at once: the last sync may be up to an interval old
    st, got = sql(dest, "UPDATE mirror_topics SET state = 'failed_over' WHERE topic = '%s'" % t)
    assert st == 200, got
    synced_at, groups, error, _ = link_row(dest)
    assert synced_at > 0 and groups >= 1 and error is None
    second = consume(dest, group, t)
    everything = set()                   # every offset the mirror holds
    for p in range(2):
        _, hw = batches(dest, t, p)
        everything |= {(p, o) for o in range(hw)}
    one = {(p, o) for p, o, _ in first}
    two = {(p, o) for p, o, _ in second}
    reread, skipped = len(one & two), len(everything - one - two)
    print("re-read %d, skipped %d (of %d; about %.0f consumed per second on the source, "
          "consumer.offset.sync.ms=1000)" % (reread, skipped, len(everything), rate))
    assert skipped == 0
    # at most one sync interval's worth (1 s), plus the round's own time: a
    # round asks every source broker (ListGroups, FindCoordinator, then
    # OffsetFetch on each coordinator), up to a second on a loaded machine
    # (88 re-read at ~56/s was seen beside an ASan build); no sync at all
    # would re-read all 180
    assert reread <= rate * 2.0 + 1
    # every message back, byte for byte, from the two halves together
    values = {(p, o): v for p, o, v in first + second}
    assert len(values) == len(everything)
    text = metrics(dest)
    assert re.search(r'sluice_link_offset_sync_rounds_total\{link="src"\} [1-9]', text)
    assert re.search(r'sluice_link_offset_sync_offsets_total\{link="src"\} [1-9]', text)

    # failed over: the destination's own offsets from now on, not the source's
    consume(src, "grp-other", t, n=10)
    mine = committed(dest, group, t)
    consume(src, group, t, n=1)            # moves the source's, nothing here
    time.sleep(2.5)
    assert committed(dest, group, t) == mine


def test_an_active_group_here_and_an_offset_past_the_mirror_are_not_synced(pair):
    src, dest = pair
    t = topic_name("oact")
    active, ahead, excluded = "grp-" + t, "grp-ahead-" + t, "grp-no-" + t
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 100)
    link_source(dest, src, config=SYNC)
    assert mirror(dest, t)[0] == 200
    assert_same(src, dest, t, 1)

    # a member of `active` on the destination (reading the mirror) commits 5
    c = ck_consumer(dest, **{"group.id": active})
    c.subscribe([t])
    until(lambda: c.poll(0.2) is not None, 20, "a message of the mirror")
    c.commit(offsets=[TopicPartition(t, 0, 5)], asynchronous=False)
    # the source's group of that name, and an excluded one, commit 60
    consume(src, active, t, n=60)
    consume(src, excluded, t, n=60)
    # the mirror paused; the source gets more; `ahead` commits past the mirror
    assert sql(dest, "UPDATE mirror_topics SET state = 'paused' WHERE topic = '%s'" % t)[0] == 200
    mirror_end = batches(dest, t, 0)[1]
    fill(src, t, 1, 50, start=100)
    consume(src, ahead, t)
    assert committed(src, ahead, t) == {0: 150}
    until(lambda: committed(dest, ahead, t) == {0: mirror_end}, 15, "clamped to the mirror")

    r0 = rounds(dest)
    deadline = time.monotonic() + 15
    while rounds(dest) < r0 + 2 and time.monotonic() < deadline:
        c.poll(0.2)                        # stays a member
    assert rounds(dest) >= r0 + 2
    assert committed(dest, active, t) == {0: 5}
    assert committed(dest, excluded, t) == {}
    assert re.search(r'sluice_link_offset_sync_skipped_active_total\{link="src"\} [1-9]',
                     metrics(dest))
    c.close()
    # once it left, the source's 60 arrive
    until(lambda: committed(dest, active, t) == {0: 60}, 15, "synced after the member left")


class FrameProxy:
    """A TCP proxy to b's Kafka port, frame by frame, that every connection
    of the link goes through (broker addresses in answers point here):
    caps {api key: max} lowers those in ApiVersions v2 answers; refuse {api
    key: version}: a request of that version or later closes the
    connection (as Kafka does with one it does not support); close_on: api
    keys whose requests close it (a source dropping the connection);
    swap {api key: (old, new)} replaces bytes in that api's answers.
    self.asked counts requests by (api key, version)."""

    def __init__(self, b, caps=None, refuse=None, close_on=(), swap=None):
        host, port = b.bootstrap.rsplit(":", 1)
        self.target = (host, int(port))
        self.caps, self.refuse, self.close_on = caps or {}, refuse or {}, close_on
        self.swap, self.asked, self.closed, self.swaps = swap or {}, {}, 0, 0
        self.lsn = socket.socket()
        self.lsn.bind(("127.0.0.1", 0))
        self.lsn.listen(16)
        self.lsn.settimeout(0.5)
        self.port = self.lsn.getsockname()[1]
        self.bootstrap = "127.0.0.1:%d" % self.port
        self.addr = (host.encode() + struct.pack(">i", int(port)),
                     b"127.0.0.1" + struct.pack(">i", self.port))
        self.stop, self.socks = False, []
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while not self.stop:
            try:
                c, _ = self.lsn.accept()
            except OSError:
                continue
            s = socket.create_connection(self.target, timeout=10)
            self.socks += [c, s]
            out = {}                     # correlation id -> (api key, version)
            threading.Thread(target=self.requests, args=(c, s, out), daemon=True).start()
            threading.Thread(target=self.answers, args=(s, c, out), daemon=True).start()

    @staticmethod
    def frame(sock):
        return kr.recv_exact(sock, struct.unpack(">i", kr.recv_exact(sock, 4))[0])

    def requests(self, c, s, out):
        try:
            while True:
                body = self.frame(c)
                key, ver, corr = struct.unpack_from(">hhi", body)
                self.asked[(key, ver)] = self.asked.get((key, ver), 0) + 1
                if key in self.close_on or ver >= self.refuse.get(key, 1 << 15):
                    self.closed += 1
                    break
                out[corr] = (key, ver)
                s.sendall(struct.pack(">i", len(body)) + body)
        except OSError:
            pass
        c.close()
        s.close()

    def answers(self, s, c, out):
        try:
            while True:
                body = bytearray(self.frame(s))
                key, ver = out.pop(struct.unpack_from(">i", body)[0], (-1, -1))
                if key == 18 and ver == 2:       # ApiVersions v2: corr, error, [key min max]
                    for i in range(struct.unpack_from(">i", body, 6)[0]):
                        k, lo, hi = struct.unpack_from(">hhh", body, 10 + 6 * i)
                        if k in self.caps:
                            struct.pack_into(">hhh", body, 10 + 6 * i, k, lo, min(hi, self.caps[k]))
                body = bytes(body).replace(*self.addr)
                if key in self.swap and self.swap[key][0] in body:
                    self.swaps += 1
                    body = body.replace(*self.swap[key])
                c.sendall(struct.pack(">i", len(body)) + body)
        except OSError:
            pass
        c.close()
        s.close()

    def close(self):
        self.stop = True
        self.lsn.close()
        for x in self.socks:
            x.close()


def test_an_offset_fetch_answer_for_a_group_not_asked_is_dropped(pair):
    """A source whose OffsetFetch answer names a group the round did not
    ask about (a proxy, every connection of the link through it, renames
    the asked group in OffsetFetch answers, nowhere else) writes nothing
    for it (link_sync.c S7); another group's answer is synced as usual."""
    src, dest = pair
    t = topic_name("oasked")
    asked, other, fine = "grp-a" + t, "grp-z" + t, "grp-b" + t    # the same length
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 20)
    consume(src, asked, t, n=5)
    consume(src, fine, t, n=6)
    proxy = FrameProxy(src, swap={9: (asked.encode(), other.encode())})
    try:
        link_source(dest, proxy, config=SYNC)
        assert mirror(dest, t)[0] == 200
        assert_same(src, dest, t, 1)
        until(lambda: committed(dest, fine, t) == {0: 6}, 30, "the other group synced")
        until(lambda: rounds(dest) >= 3, 30, "three sync rounds")
        assert proxy.swaps >= 2
        assert committed(dest, other, t) == {}
        assert committed(dest, asked, t) == {}
    finally:
        proxy.close()


def synced_through(pair, prefix, **proxy_args):
    """Three groups of a source reached through FrameProxy(proxy_args) are
    all synced, with no error; the proxy, closed, is returned."""
    src, dest = pair
    t = topic_name(prefix)
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 40)
    groups = ["grp-%s-%d" % (t, i) for i in range(3)]
    for i, g in enumerate(groups):
        consume(src, g, t, n=5 + 3 * i)
    proxy = FrameProxy(src, **proxy_args)
    try:
        link_source(dest, proxy, config=SYNC)
        assert mirror(dest, t)[0] == 200
        assert_same(src, dest, t, 1)
        until(lambda: [committed(dest, g, t) for g in groups] == [{0: 5}, {0: 8}, {0: 11}],
              30, "every group synced")
        until(lambda: link_row(dest)[2] in (None, ""), 15, "a round without error")
    finally:
        proxy.close()
    return proxy


def test_a_kafka_2x_source_is_synced(pair):
    """A source older than Kafka 3.0 (a proxy lowers ApiVersions to
    FindCoordinator v3, OffsetFetch v7, ListGroups v3 and closes the
    connection on a newer request, as Kafka 2.x does): every group is
    synced, one OffsetFetch v7 per group (link_sync.c S8)."""
    proxy = synced_through(pair, "k2x", caps={10: 3, 9: 7, 16: 3},
                           refuse={10: 4, 9: 8, 16: 4})
    assert proxy.closed == 0, proxy.asked
    assert proxy.asked.get((9, 7), 0) >= 3, proxy.asked
    assert proxy.asked.get((16, 3), 0) >= 1, proxy.asked


def test_a_failing_admin_connection_is_the_syncs_error_not_the_links(pair):
    """The source closes every connection that asks ListGroups (the sync's
    admin connections): the sync says so (sync_error) while the link's
    last_error stays clear, its mirroring being fine (link_conn.c)."""
    src, dest = pair
    t = topic_name("admfail")
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 20)
    consume(src, "grp-" + t, t, n=5)
    proxy = FrameProxy(src, close_on=(16,))
    try:
        link_source(dest, proxy, config=SYNC.replace("sync.ms=1000", "sync.ms=300"))
        assert mirror(dest, t)[0] == 200
        assert_same(src, dest, t, 1)
        seen, end = set(), time.monotonic() + 5
        while time.monotonic() < end:
            seen.add(rows(sql_ok(dest, "SELECT last_error FROM cluster_links"))[0][0])
            time.sleep(0.05)
        assert proxy.closed >= 2
        assert seen <= {None, ""}, seen
        assert "closed" in (link_row(dest)[2] or ""), link_row(dest)
        fill(src, t, 1, 10, start=20)          # mirroring goes on meanwhile
        assert_same(src, dest, t, 1)
        assert rows(sql_ok(dest, "SELECT last_error FROM cluster_links"))[0][0] in (None, "")
    finally:
        proxy.close()


def test_filters_pick_source_topics_now_and_later(pair):
    src, dest = pair
    pre = topic_name("af") + "-"
    one, later, skip, local, other = (pre + "one", pre + "later", pre + "skip", pre + "local",
                                      topic_name("zz"))
    for name in (one, skip, local, other):
        create_topic(src, name, partitions=2)
        fill(src, name, 2, 40)
    create_topic(dest, local, partitions=1)
    filters = json.dumps({"topicFilters": [
        {"name": pre, "patternType": "PREFIXED", "filterType": "INCLUDE"},
        {"name": skip, "patternType": "LITERAL", "filterType": "EXCLUDE"}]})
    link_source(dest, src, config="auto.create.mirror.topics.enable=true\n"
                                  "auto.create.mirror.topics.filters=%s\n"
                                  "metadata.max.age.ms=500\n" % filters)
    until(lambda: mirror_state(dest, one), 15, "the matching topic mirrored")
    assert_same(src, dest, one, 2)
    create_topic(src, later, partitions=3)
    fill(src, later, 3, 60)
    until(lambda: mirror_state(dest, later), 15, "a topic created later mirrored")
    assert_same(src, dest, later, 3)
    got = rows(sql_ok(dest, "SELECT topic, link, source_topic FROM mirror_topics ORDER BY 1"))
    assert got == sorted([(one, "src", one), (later, "src", later)])
    # the normal local topic is left alone and reported
    assert link_row(dest)[3] == local
    assert rows(sql_ok(dest, "SELECT partitions FROM topics WHERE name = '%s'" % local)) == [(1,)]
    # a mirror of a source topic that is missing says so, with every topic asked for
    ghost = topic_name("ghost")
    assert mirror(dest, ghost)[0] == 200
    until(lambda: "does not exist on the source" in str(mirror_state(dest, ghost)), 15,
          "the missing source topic reported")


def test_every_topic_filter_leaves_confluent_internal_topics_alone(pair):
    """topicFilters [{"name": "*"}] mirrors the source's topics but not its
    _confluent-* internal ones (link_sync.c S3)."""
    src, dest = pair
    normal, internal = topic_name("every"), "_confluent-" + topic_name("metrics")
    for name in (normal, internal):
        create_topic(src, name, partitions=1)
        fill(src, name, 1, 5)
    every = json.dumps({"topicFilters": [{"name": "*", "patternType": "LITERAL",
                                          "filterType": "INCLUDE"}]})
    link_source(dest, src, config="auto.create.mirror.topics.enable=true\n"
                                  "auto.create.mirror.topics.filters=%s\n"
                                  "metadata.max.age.ms=300\n" % every)
    until(lambda: mirror_state(dest, normal), 15, "the normal topic mirrored")
    assert_same(src, dest, normal, 1)
    time.sleep(1.5)                      # several Metadata rounds
    got = rows(sql_ok(dest, "SELECT topic FROM mirror_topics"))
    assert got == [(normal,)], got


def test_bad_sync_settings_are_refused(pair):
    src, dest = pair
    cases = [
        ("consumer.offset.group.filters={\"groupFilters\": [", "is not JSON"),
        ("consumer.offset.group.filters={\"groupFilters\": [{\"name\": \"a\", "
         "\"patternType\": \"REGEX\"}]}", "unknown patternType 'REGEX'"),
        ("auto.create.mirror.topics.filters={\"topicFilters\": [{\"name\": \"a\", "
         "\"filterType\": \"MAYBE\"}]}", "unknown filterType 'MAYBE'"),
        ("auto.create.mirror.topics.filters={\"groupFilters\": []}", "must be {\"topicFilters\""),
        ("consumer.offset.sync.ms=5", "consumer.offset.sync.ms=5: 100 to"),
        ("consumer.offset.sync.enable=yes", "true or false"),
        ("acl.filters={\"aclFilters\": {}}", "acl.filters must be {\"aclFilters\""),
        ("acl.filters={\"aclFilters\": [{\"resourceFilter\": {\"resourceType\": "
         "\"cluster\"}}]}", "filter 1: resourceType CLUSTER: only the ACLs of topics and groups"),
        ("acl.filters={\"aclFilters\": [{}, {\"accessFilter\": {\"operation\": "
         "\"juggle\"}}]}", "filter 2: unknown operation 'juggle'"),
        ("acl.filters={\"aclFilters\": [{\"resourceFilter\": {\"patternType\": "
         "\"prefixed\"}}]}", "patternType prefixed: only LITERAL ACLs are synced"),
        ("acl.filters={\"aclFilters\": [{\"accessFilter\": {\"principal\": 7}}]}",
         "\"principal\" must be a string"),
        ("acl.sync.ms=0", "acl.sync.ms=0: 100 to"),
    ]
    for cfg, want in cases:
        st, got = sql(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
                            "('bad', '%s', '%s')" % (src.bootstrap, cfg.replace("'", "''")))
        assert st == 400 and want in json.loads(got)["error"], (cfg, got)
    assert rows(sql_ok(dest, "SELECT name FROM cluster_links")) == []


AUTHORIZER = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer"}


def grant(b, rtype, name, op, principal="User:ANONYMOUS"):
    sql_ok(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
              "operation, permission) VALUES ('%s', '%s', 'LITERAL', '%s', '%s', 'ALLOW')"
           % (rtype, name, principal, op))


def grant_all(b, grants):
    for rtype, name, op, who in grants:
        grant(b, rtype, name, op, who)


def acls(b, *names):
    return sorted(rows(sql_ok(b, "SELECT resource_type, resource_name, principal, operation "
                                 "FROM acls WHERE resource_name IN (%s)"
                              % ", ".join("'%s'" % n for n in names))))


def test_acls_of_mirrored_topics_and_synced_groups_are_copied(start_broker):
    src = start_broker(dict(AUTHORIZER, **{"super.users": "User:ANONYMOUS"}))
    dest = start_broker(dict(AUTHORIZER))          # nobody super: the ACLs decide
    t, other = topic_name("acl"), topic_name("notmirrored")
    group, unpicked = "grp-" + t, "other-" + t
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 30)
    create_topic(src, other, partitions=1)
    grant_all(src, [("TOPIC", t, "READ", "User:ANONYMOUS"), ("TOPIC", t, "WRITE", "User:bob"),
                    ("TOPIC", t, "READ", "User:dave"), ("GROUP", group, "READ", "User:ANONYMOUS"),
                    ("GROUP", unpicked, "READ", "User:ANONYMOUS"),
                    ("TOPIC", other, "READ", "User:ANONYMOUS")])
    # local ACLs of the mirror's name: one of its own, one equal to a source's
    grant(dest, "TOPIC", t, "DESCRIBE", "User:carol")
    grant(dest, "TOPIC", t, "READ", "User:dave")
    link_source(dest, src, config="acl.sync.enable=true\nacl.sync.ms=500\n"
                                  "consumer.offset.group.filters=%s\n" % GROUP_FILTER)
    assert mirror(dest, t)[0] == 200
    want = sorted([("TOPIC", t, "User:ANONYMOUS", "READ"), ("TOPIC", t, "User:bob", "WRITE"),
                   ("TOPIC", t, "User:dave", "READ"), ("TOPIC", t, "User:carol", "DESCRIBE"),
                   ("GROUP", group, "User:ANONYMOUS", "READ")])
    until(lambda: acls(dest, t, group, unpicked, other) == want, 20, "the ACLs synced")

    # the synced READ ACLs let a consumer of the destination read the mirror
    assert_same(src, dest, t, 1)
    got = consume(dest, group, t, n=30, commit_each=False)
    assert [v for _, _, v in got] == [v for _, _, v in consume(src, "x-" + t, t, n=30,
                                                               commit_each=False)]

    # removed at the source: removed here, but never a local one
    sql_ok(src, "DELETE FROM acls WHERE resource_name = '%s' AND principal IN "
                "('User:bob', 'User:dave')" % t)
    want = [w for w in want if w[2] != "User:bob"]
    until(lambda: acls(dest, t, group, unpicked, other) == want, 20, "the removal synced")
    time.sleep(1.5)
    assert acls(dest, t, group, unpicked, other) == want
    assert re.search(r'sluice_link_acls_synced_total\{link="src"\} 3\b', metrics(dest))
    assert re.search(r'sluice_link_acls_removed_total\{link="src"\} 1\b', metrics(dest))


def test_a_wildcard_group_acl_of_the_source_is_never_copied(start_broker):
    """A source's LITERAL '*' GROUP ACL, with the common groupFilters
    [{"name": "*"}], is no grant over every local group here (link_sync.c S6)."""
    src = start_broker(dict(AUTHORIZER, **{"super.users": "User:ANONYMOUS"}))
    dest = start_broker(dict(AUTHORIZER))
    t = topic_name("aclwild")
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 3)
    grant(src, "GROUP", "*", "READ", "User:eve")
    grant(src, "TOPIC", "*", "READ", "User:eve")
    grant(src, "TOPIC", t, "READ", "User:eve")
    every = json.dumps({"groupFilters": [{"name": "*", "patternType": "LITERAL",
                                          "filterType": "INCLUDE"}]})
    link_source(dest, src, config="acl.sync.enable=true\nacl.sync.ms=300\n"
                                  "consumer.offset.group.filters=%s\n" % every)
    assert mirror(dest, t)[0] == 200
    until(lambda: acls(dest, t) == [("TOPIC", t, "User:eve", "READ")], 20,
          "the topic ACL synced")
    time.sleep(1.5)
    assert acls(dest, "*") == [], acls(dest, "*")


def test_a_revoked_acl_is_removed_once_applying_works_again(start_broker):
    """The source revokes an ACL while this broker cannot change its ACLs
    (a trigger refuses deletions): sync_error says so, and the ACL goes
    once the deletion works again, never staying for good as a local one."""
    src = start_broker(dict(AUTHORIZER, **{"super.users": "User:ANONYMOUS"}))
    dest = start_broker(dict(AUTHORIZER))
    t = topic_name("aclrev")
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 3)
    grant(src, "TOPIC", t, "READ", "User:bob")
    grant(src, "TOPIC", t, "WRITE", "User:bob")
    link_source(dest, src, config="acl.sync.enable=true\nacl.sync.ms=300\n")
    assert mirror(dest, t)[0] == 200
    both = [("TOPIC", t, "User:bob", "READ"), ("TOPIC", t, "User:bob", "WRITE")]
    until(lambda: acls(dest, t) == both, 20, "the ACLs synced")
    def on_file(stmt):                   # the SQL surface refuses schema changes
        db = sqlite3.connect(os.path.join(dest.data_dir, "sluice.db"), timeout=10)
        try:
            db.execute(stmt)
            db.commit()
        finally:
            db.close()
    on_file("CREATE TRIGGER hold_acls BEFORE DELETE ON acls BEGIN "
            "SELECT RAISE(ABORT, 'held by the test'); END")
    sql_ok(src, "DELETE FROM acls WHERE resource_name = '%s' AND operation = 'WRITE'" % t)
    until(lambda: "cannot change the ACLs here" in (link_row(dest)[2] or ""), 20,
          "the failed removal in sync_error")
    assert acls(dest, t) == both
    on_file("DROP TRIGGER hold_acls")
    until(lambda: acls(dest, t) == both[:1], 20, "the removal retried")
    until(lambda: not link_row(dest)[2], 20, "sync_error cleared")


def test_acl_filters_pick_only_the_acls_they_name(start_broker):
    """acl.filters (Confluent's JSON) narrows what acl.sync.enable copies:
    only the ACLs one of its filters matches (link_sync.c S10)."""
    src = start_broker(dict(AUTHORIZER, **{"super.users": "User:ANONYMOUS"}))
    dest = start_broker(dict(AUTHORIZER))
    t, u = topic_name("aclf"), topic_name("aclg")
    group = "grp-" + t
    for x in (t, u):
        create_topic(src, x, partitions=1)
        fill(src, x, 1, 3)
    grant_all(src, [("TOPIC", t, "READ", "User:bob"), ("TOPIC", t, "WRITE", "User:bob"),
                    ("TOPIC", t, "READ", "User:amy"), ("TOPIC", u, "READ", "User:bob"),
                    ("GROUP", group, "READ", "User:bob"), ("GROUP", group, "READ", "User:amy")])
    filters = json.dumps({"aclFilters": [
        {"resourceFilter": {"resourceType": "topic", "name": t, "patternType": "literal"},
         "accessFilter": {"principal": "User:bob", "host": "*", "operation": "read",
                          "permissionType": "allow"}},
        {"resourceFilter": {"resourceType": "group", "patternType": "any"},
         "accessFilter": {"principal": "User:amy", "operation": "any"}}]})
    link_source(dest, src, config="acl.sync.enable=true\nacl.sync.ms=300\n"
                                  "consumer.offset.group.filters=%s\nacl.filters=%s\n"
                                  % (GROUP_FILTER, filters))
    for x in (t, u):
        assert mirror(dest, x)[0] == 200
    want = [("GROUP", group, "User:amy", "READ"), ("TOPIC", t, "User:bob", "READ")]
    until(lambda: acls(dest, t, u, group) == want, 20, "the filtered ACLs synced")
    time.sleep(1.5)                      # several rounds: nothing else comes
    assert acls(dest, t, u, group) == want
    assert re.search(r'sluice_link_acls_synced_total\{link="src"\} 2\b', metrics(dest))


def test_sixteen_confluent_acl_filters_fit_in_a_links_config(start_broker):
    """acl.filters with its 16 filters (LK_FILTERS_MAX) as Confluent writes
    them, and 16 group filters, fit in a link's config (a line was limited
    to 1023 bytes: 6 such filters); the last filter picks what is synced."""
    src = start_broker(dict(AUTHORIZER, **{"super.users": "User:ANONYMOUS"}))
    dest = start_broker(dict(AUTHORIZER))
    t = topic_name("acl16")
    create_topic(src, t, partitions=1)
    fill(src, t, 1, 3)
    grant_all(src, [("TOPIC", t, "READ", "User:bob"), ("TOPIC", t, "WRITE", "User:bob")])
    one = {"resourceFilter": {"resourceType": "topic", "name": "", "patternType": "literal"},
           "accessFilter": {"principal": "User:service-account-%02d", "host": "*",
                            "operation": "read", "permissionType": "allow"}}
    fs = [json.loads(json.dumps(one).replace("%02d", "%02d" % i)) for i in range(16)]
    for i, f in enumerate(fs):
        f["resourceFilter"]["name"] = "%s-other-topic-%02d" % (t, i)
    fs[-1]["resourceFilter"]["name"], fs[-1]["accessFilter"]["principal"] = t, "User:bob"
    acl_filters = json.dumps({"aclFilters": fs})
    group_filters = json.dumps({"groupFilters": [
        {"name": "grp-%s-%02d" % (t, i), "patternType": "PREFIXED", "filterType": "INCLUDE"}
        for i in range(16)]})
    assert len(acl_filters) > 3000 and len(group_filters) > 1024
    link_source(dest, src, config="acl.sync.enable=true\nacl.sync.ms=300\n"
                                  "consumer.offset.group.filters=%s\nacl.filters=%s\n"
                                  % (group_filters, acl_filters))
    assert mirror(dest, t)[0] == 200
    want = [("TOPIC", t, "User:bob", "READ")]
    until(lambda: acls(dest, t) == want, 20, "the last filter's ACL synced")
    got = rows(sql_ok(dest, "SELECT config FROM cluster_links WHERE name = 'src'"))[0][0]
    assert acl_filters in got and group_filters in got


def test_a_source_without_batched_find_coordinator_is_asked_one_group_at_a_time(pair):
    """A source whose ApiVersions says FindCoordinator v3 at most (Kafka
    before 3.0; a proxy lowers the broker's answer): the link asks it one
    group per FindCoordinator v3 and syncs every group (link_sync.c S8)."""
    proxy = synced_through(pair, "ofc3", caps={10: 3})    # FindCoordinator <= v3
    assert proxy.asked.get((10, 3), 0) >= 3, proxy.asked
    assert proxy.asked.get((10, 4), 0) == 0, proxy.asked
