"""The admin endpoint: POST /sql against the truth made by real clients,
writes visible through the Kafka APIs, refused statements, messages read
back byte for byte as kcat reads them, /metrics after a known workload,
and the bearer-token rule."""
import json
import signal
import subprocess
import time
import urllib.error
import urllib.request

import pytest
from confluent_kafka import TopicPartition
from confluent_kafka.admin import ConfigResource

from conftest import free_port, sluiced_path
from support import (KCAT, admin_socket, ck_admin, ck_consumer, ck_producer, create_topic,
                     produce_ok, socket_http, topic_name, wait_topic)


def admin_broker(start_broker, **extra):
    port = free_port()
    overrides = {"admin.listeners": "http://127.0.0.1:%d" % port}
    overrides.update(extra)
    b = start_broker(overrides)
    return b


def http(b, path, body=None, token=None, fmt=None, headers=None, via_socket=False):
    """(status, text, headers); via_socket: over the admin socket (as root,
    the super-user there) instead of admin.listeners."""
    url = "http://%s%s" % (b.admin, path)
    if fmt:
        url += "?format=" + fmt
    if via_socket:
        return socket_http(admin_socket(b), url[url.index("/", 7):], body, headers)
    req = urllib.request.Request(url, data=body.encode() if body is not None else None,
                                 method="POST" if body is not None else "GET")
    if token:
        req.add_header("Authorization", "Bearer " + token)
    for k, v in (headers or {}).items():
        req.add_header(k, v)
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            return r.status, r.read().decode(), dict(r.headers)
    except urllib.error.HTTPError as e:
        return e.code, e.read().decode(), dict(e.headers)


def operator_way(b, token=None):
    """With an authorizer a request without credentials is User:ANONYMOUS:
    the tests' own statements go through the admin socket, as root."""
    return not token and bool(b.overrides.get("authorizer.class.name"))


def sql(b, stmt, token=None):
    """Rows as a list of dicts; fails the test on an error."""
    status, body, _ = http(b, "/sql", stmt, token=token, fmt="json",
                           via_socket=operator_way(b, token))
    assert status == 200, "%s -> %s %s" % (stmt, status, body)
    return json.loads(body)


def sql_error(b, stmt):
    status, body, _ = http(b, "/sql", stmt, fmt="json", via_socket=operator_way(b))
    assert status == 400, "%s should fail, got %s %s" % (stmt, status, body)
    return json.loads(body)["error"]


@pytest.fixture
def ab(start_broker):
    return admin_broker(start_broker)


def test_healthz_and_formats(ab):
    assert http(ab, "/healthz")[:2] == (200, "ok\n")
    t = topic_name("fmt")
    create_topic(ab, t, 2)
    st, body, _ = http(ab, "/sql", "SELECT name, partitions FROM topics WHERE name='%s'" % t, fmt="csv")
    assert st == 200 and body == "name,partitions\r\n%s,2\r\n" % t
    st, body, _ = http(ab, "/sql", "SELECT name, partitions FROM topics", headers={"Accept": "text/csv"})
    assert body.startswith("name,partitions\r\n")
    st, body, _ = http(ab, "/sql", "SELECT name, partitions FROM topics")
    lines = body.splitlines()
    assert lines[0].split() == ["name", "partitions"] and set(lines[1]) <= {"-", " "}
    assert lines[2].split() == [t, "2"]
    st, body, _ = http(ab, "/sql", "SELECT name FROM topics", fmt="line")
    assert body.strip() == "name = %s" % t
    assert sql(ab, "SELECT 1 AS one, NULL AS n, 'x' AS s") == [{"one": 1, "n": None, "s": "x"}]


def test_tables_match_the_truth(ab):
    t = topic_name("truth")
    create_topic(ab, t, 3, config={"retention.ms": "3600000"})
    msgs = [{"key": b"k%d" % i, "value": b"v%d" % i, "partition": i % 3} for i in range(30)]
    produce_ok(ck_producer(ab), t, msgs)
    assert sql(ab, "SELECT name, partitions, replication_factor, internal FROM topics "
                   "WHERE name='%s'" % t) == [{"name": t, "partitions": 3,
                                                "replication_factor": 1, "internal": 0}]
    parts = sql(ab, "SELECT * FROM partitions WHERE topic='%s' ORDER BY partition" % t)
    assert [p["partition"] for p in parts] == [0, 1, 2]
    for p in parts:
        assert p["log_end_offset"] == 10 and p["high_watermark"] == 10
        assert p["log_start_offset"] == 0 and p["leader"] == ab.broker_id
        assert p["segments"] == 1 and p["size_bytes"] == ab.log_bytes(t, p["partition"])
    cfg = {r["name"]: r for r in sql(ab, "SELECT * FROM topic_configs WHERE topic='%s'" % t)}
    assert cfg["retention.ms"]["value"] == "3600000" and cfg["retention.ms"]["source"] == "topic"
    assert cfg["cleanup.policy"]["source"] == "default"
    b = sql(ab, "SELECT * FROM brokers")
    assert b == [{"id": ab.broker_id, "host": "127.0.0.1", "port": ab.port, "rack": None,
                  "endpoints": "PLAINTEXT://127.0.0.1:%d" % ab.port,
                  "is_controller": 1, "alive": 1, "registered_at": b[0]["registered_at"]}]


def test_consumer_lag_is_high_watermark_minus_committed(ab):
    t = topic_name("lag")
    create_topic(ab, t, 2)
    produce_ok(ck_producer(ab), t, [{"value": b"m%d" % i, "partition": i % 2} for i in range(40)])
    c = ck_consumer(ab, **{"group.id": "halfway"})
    c.subscribe([t])
    seen = 0
    deadline = time.monotonic() + 30
    while seen < 20 and time.monotonic() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            seen += 1
    # Commit half of each partition: offset 10 of 20.
    c.commit(offsets=[TopicPartition(t, 0, 10), TopicPartition(t, 1, 10)], asynchronous=False)
    lag = sql(ab, "SELECT * FROM consumer_lag WHERE group_id='halfway' ORDER BY partition")
    assert lag == [{"group_id": "halfway", "topic": t, "partition": p, "committed": 10,
                    "log_end_offset": 20, "lag": 10} for p in (0, 1)]
    g = sql(ab, "SELECT * FROM consumer_groups WHERE group_id='halfway'")[0]
    assert g["state"] == "Stable" and g["members"] == 1 and g["protocol_type"] == "consumer"
    assigned = sql(ab, "SELECT topic, partition FROM group_assignments WHERE group_id='halfway' "
                       "ORDER BY partition")
    assert assigned == [{"topic": t, "partition": 0}, {"topic": t, "partition": 1}]
    members = sql(ab, "SELECT * FROM group_members WHERE group_id='halfway'")
    assert len(members) == 1 and members[0]["assigned_partitions"] == 2
    # Moving an active group is refused, with Kafka's wording.
    err = sql_error(ab, "UPDATE committed_offsets SET offset=0 WHERE group_id='halfway'")
    assert "inactive" in err and "Stable" in err
    assert "not empty" in sql_error(ab, "DELETE FROM consumer_groups WHERE group_id='halfway'")
    c.close()
    st, _, hdr = http(ab, "/sql", "UPDATE committed_offsets SET offset=3 "
                                  "WHERE group_id='halfway' AND partition=1")
    assert st == 200 and hdr.get("X-Sluice-Changes") == "1"
    c2 = ck_consumer(ab, **{"group.id": "halfway"})
    got = c2.committed([TopicPartition(t, 0), TopicPartition(t, 1)], timeout=10)
    assert [(p.partition, p.offset) for p in got] == [(0, 10), (1, 3)]
    c2.close()
    sql(ab, "DELETE FROM consumer_groups WHERE group_id='halfway'")
    assert sql(ab, "SELECT * FROM consumer_groups WHERE group_id='halfway'") == []
    assert sql(ab, "SELECT * FROM committed_offsets WHERE group_id='halfway'") == []


def test_writes_go_through_the_kafka_admin_paths(ab):
    t = topic_name("w")
    sql(ab, "INSERT INTO topics(name, partitions) VALUES ('%s', 2)" % t)
    wait_topic(ab, t, 2)
    assert "already exists" in sql_error(ab, "INSERT INTO topics(name) VALUES ('%s')" % t)
    assert "illegal" in sql_error(ab, "INSERT INTO topics(name) VALUES ('bad name')")
    # Retention applied live and visible to DescribeConfigs.
    sql(ab, "UPDATE topic_configs SET value='86400000' WHERE topic='%s' AND name='retention.ms'" % t)
    res = ConfigResource("topic", t)
    cfg = ck_admin(ab).describe_configs([res])[res].result(timeout=10)
    assert cfg["retention.ms"].value == "86400000"
    err = sql_error(ab, "UPDATE topic_configs SET value='abc' WHERE topic='%s' "
                        "AND name='retention.ms'" % t)
    assert err.startswith("INVALID_CONFIG") and "retention.ms" in err
    sql(ab, "INSERT INTO topic_configs(topic, name, value) VALUES ('%s', 'cleanup.policy', 'compact')" % t)
    cfg = ck_admin(ab).describe_configs([res])[res].result(timeout=10)
    assert cfg["cleanup.policy"].value == "compact"
    sql(ab, "DELETE FROM topic_configs WHERE topic='%s' AND name='retention.ms'" % t)
    cfg = ck_admin(ab).describe_configs([res])[res].result(timeout=10)
    assert cfg["retention.ms"].value == "604800000"
    # Partitions grow as with CreatePartitions.
    sql(ab, "UPDATE topics SET partitions=4 WHERE name='%s'" % t)
    wait_topic(ab, t, 4)
    assert "only partitions" in sql_error(ab, "UPDATE topics SET replication_factor=3 "
                                              "WHERE name='%s'" % t)
    sql(ab, "DELETE FROM topics WHERE name='%s'" % t)
    md = ck_admin(ab).list_topics(timeout=10)
    assert t not in md.topics or md.topics[t].error is not None
    assert sql(ab, "SELECT * FROM topics WHERE name='%s'" % t) == []


@pytest.mark.parametrize("stmt,why", [
    ("ATTACH DATABASE '/tmp/x.db' AS x", "ATTACH"),
    ("SELECT load_extension('/tmp/x.so')", "load_extension"),
    ("PRAGMA journal_mode=DELETE", "PRAGMA"),
    ("PRAGMA user_version=7", "PRAGMA"),
    ("CREATE TABLE x(a)", "schema changes"),
    ("DROP VIEW topics", "schema changes"),
    ("ALTER TABLE main.topics ADD COLUMN x", "schema changes"),
    ("DELETE FROM main.topics", "read-only"),
    ("INSERT INTO main.committed_offsets VALUES('g','t',0,0,-1,'',0,-1)", "read-only"),
    ("DELETE FROM brokers", "read-only"),
    ("UPDATE partitions SET leader=7", "read-only"),
    ("INSERT INTO consumer_groups(group_id) VALUES ('g')", "only DELETE"),
    ("BEGIN", "transactions"),
    ("VACUUM INTO '/tmp/copy.db'", "only SELECT"),
    ("SELECT sluice_topic_delete('x')", "internal"),
    ("SELECT salt FROM main.users", "credential"),
    ("SELECT printf('%.*c', 100000000, 'x')", "escape the statement time limit"),
    ("SELECT format('%s', 1)", "escape the statement time limit"),
])
def test_refused_statements(ab, stmt, why):
    assert why in sql_error(ab, stmt)


@pytest.mark.serial
def test_time_and_row_limits(start_broker):
    b = admin_broker(start_broker, **{"admin.sql.timeout.ms": "300", "admin.sql.max.rows": "50"})
    # The baseline: a statement that ends at once, on this broker now.
    t0 = time.monotonic()
    assert sql(b, "SELECT 1 AS one") == [{"one": 1}]
    base = time.monotonic() - t0
    t0 = time.monotonic()
    err = sql_error(b, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c) "
                       "SELECT count(*) FROM c")
    took = time.monotonic() - t0
    # Stopped at its 300 ms (not at the 5 s default, nor never): a few
    # times the limit, beyond what any statement costs now.
    assert "admin.sql.timeout.ms" in err and 0.3 <= took < base + 5 * 0.3, (err, took, base)
    assert "admin.sql.max.rows" in sql_error(b, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL "
                                                "SELECT x+1 FROM c LIMIT 100) SELECT x FROM c")
    assert len(sql(b, "WITH RECURSIVE c(x) AS (SELECT 1 UNION ALL SELECT x+1 FROM c LIMIT 50) "
                      "SELECT x FROM c")) == 50
    # The event loop kept serving meanwhile.
    assert http(b, "/healthz")[0] == 200


def kcat_read(b, topic, partition, count):
    out = subprocess.run([KCAT, "-C", "-b", b.bootstrap, "-t", topic, "-p", str(partition),
                          "-o", "beginning", "-c", str(count), "-e", "-f", "%o %k %s\n"],
                         capture_output=True, timeout=30, check=True)
    return out.stdout.decode().splitlines()


@pytest.mark.parametrize("codec", ["none", "gzip", "snappy", "lz4", "zstd"])
def test_messages_match_kcat(ab, codec):
    t = topic_name("msg-" + codec)
    create_topic(ab, t, 1)
    data = "".join("key%d:value-%d-%s\n" % (i, i, "x" * (i % 7)) for i in range(200))
    subprocess.run([KCAT, "-P", "-b", ab.bootstrap, "-t", t, "-p", "0", "-K:", "-z", codec],
                   input=data.encode(), check=True, timeout=30)
    want = kcat_read(ab, t, 0, 200)
    rows = sql(ab, "SELECT offset, key, value FROM messages WHERE topic='%s' AND partition=0" % t)
    assert ["%d %s %s" % (r["offset"], r["key"], r["value"]) for r in rows] == want
    page = sql(ab, "SELECT offset, value FROM messages WHERE topic='%s' AND partition=0 "
                   "AND offset >= 150 LIMIT 10" % t)
    assert [r["offset"] for r in page] == list(range(150, 160))
    assert page[0]["value"] == want[150].split(" ", 2)[2]


def messages_bytes_read(b):
    status, body, _ = http(b, "/metrics")
    assert status == 200
    for line in body.splitlines():
        if line.startswith("sluice_sql_messages_bytes_read_total "):
            return int(line.split()[1])
    raise AssertionError("no sluice_sql_messages_bytes_read_total in /metrics")


def test_messages_stream_an_uncompressed_batch(ab):
    """One ~1 MB uncompressed batch of 1 KiB records with a few 40 KB ones:
    a page at any offset gives the right rows, reading the batch only up to
    the last row it returns, and the big records before it are skipped
    unread."""
    t = topic_name("stream")
    create_topic(ab, t, 1)
    p = ck_producer(ab, **{"linger.ms": 2000, "batch.size": 1000000,
                           "compression.type": "none"})
    sizes = [40000 if i % 100 == 7 else 1000 + i % 13 for i in range(700)]
    values = [("%d:" % i + chr(97 + i % 26) * n).encode() for i, n in enumerate(sizes)]
    produce_ok(p, t, [{"value": v, "key": b"k%d" % i} for i, v in enumerate(values)])
    part = sql(ab, "SELECT size_bytes FROM partitions WHERE topic='%s'" % t)[0]
    assert part["size_bytes"] > sum(sizes)
    for start in (0, 6, 7, 8, 350, 507, 690, 699):
        before = messages_bytes_read(ab)
        rows = sql(ab, "SELECT offset, key, length(value) AS n, substr(value, 1, 12) AS head "
                       "FROM messages WHERE topic='%s' AND partition=0 AND offset >= %d "
                       "LIMIT 10" % (t, start))
        read = messages_bytes_read(ab) - before
        want = list(range(start, min(start + 10, 700)))
        assert [r["offset"] for r in rows] == want
        assert [r["key"] for r in rows] == ["k%d" % i for i in want]
        assert [r["n"] for r in rows] == [len(values[i]) for i in want]
        assert [r["head"] for r in rows] == [values[i][:12].decode() for i in want]
        # Up to the last row, less the skipped big records, plus a 16 KiB
        # read past it and the index search.
        upto = sum(sizes[:want[-1] + 1]) + 30 * (want[-1] + 1)
        skipped = sum(40000 - 16384 for i in range(start) if sizes[i] == 40000)
        assert read < upto - skipped + 16384 + 4096, (start, read, upto, skipped)
    rows = sql(ab, "SELECT offset, length(value) AS n FROM messages WHERE topic='%s'" % t)
    assert [(r["offset"], r["n"]) for r in rows] == [(i, len(v)) for i, v in enumerate(values)]


def test_messages_binary_values_and_headers(ab):
    t = topic_name("bin")
    create_topic(ab, t, 1)
    p = ck_producer(ab)
    produce_ok(p, t, [{"value": bytes([0, 1, 2, 255]), "key": None,
                       "headers": [("h", b"v"), ("h2", None)]}])
    r = sql(ab, "SELECT hex(value) AS v, key, headers, typeof(value) AS ty FROM messages "
                "WHERE topic='%s'" % t)[0]
    assert r["v"] == "000102FF" and r["key"] is None and r["ty"] == "blob"
    assert json.loads(r["headers"]) == [{"key": "h", "value": "v"}, {"key": "h2", "value": None}]


def test_metrics_after_a_known_workload(ab):
    t = topic_name("met")
    create_topic(ab, t, 2)
    produce_ok(ck_producer(ab), t, [{"value": b"x" * 100, "partition": i % 2} for i in range(50)])
    subprocess.run([KCAT, "-C", "-b", ab.bootstrap, "-t", t, "-p", "0", "-o", "beginning",
                    "-c", "25", "-e", "-q"], check=True, timeout=30, capture_output=True)
    st, body, hdr = http(ab, "/metrics")
    assert st == 200 and hdr["Content-Type"].startswith("text/plain")
    values = {}
    for line in body.splitlines():
        if line and not line.startswith("#"):
            name, _, v = line.rpartition(" ")
            values[name] = float(v)
    for p in (0, 1):
        lab = '{topic="%s",partition="%d"}' % (t, p)
        assert values["sluice_partition_messages_in_total" + lab] == 25
        assert values["sluice_log_end_offset" + lab] == 25
        assert values["sluice_log_size_bytes" + lab] == ab.log_bytes(t, p)
        assert values["sluice_log_segments" + lab] == 1
    assert values['sluice_partition_bytes_out_total{topic="%s",partition="0"}' % t] > 2500
    assert values['sluice_requests_total{api="Produce"}'] >= 1
    assert values['sluice_request_duration_seconds_count{api="Produce"}'] == \
        values['sluice_requests_total{api="Produce"}']
    assert values['sluice_request_duration_seconds_bucket{api="Fetch",le="+Inf"}'] >= 1
    assert "sluice_connections" in values and "sluice_fsync_duration_seconds_count" in values
    c = ck_consumer(ab, **{"group.id": "metered"})
    c.commit(offsets=[TopicPartition(t, 0, 5)], asynchronous=False)
    c.close()
    body = http(ab, "/metrics")[1]
    assert 'sluice_consumer_group_lag{group="metered",topic="%s",partition="0"} 20' % t in body


def test_token_required_off_loopback(start_broker, tmp_path):
    # Refused at startup: run it by hand, the fixture would call that a crash.
    out = subprocess.run([sluiced_path(), "--override", "log.dirs=%s" % tmp_path,
                          "--override", "listeners=PLAINTEXT://127.0.0.1:%d" % free_port(),
                          "--override", "admin.listeners=http://0.0.0.0:%d" % free_port()],
                         capture_output=True, timeout=20)
    assert out.returncode != 0 and b"admin.token" in out.stderr
    port = free_port()
    b = start_broker({"admin.listeners": "http://0.0.0.0:%d" % port, "admin.token": "s3cret"})
    st, body, hdr = http(b, "/sql", "SELECT 1")
    assert st == 401 and "Bearer" in hdr.get("WWW-Authenticate", "")
    assert http(b, "/sql", "SELECT 1", token="wrong")[0] == 401
    assert http(b, "/metrics")[0] == 401
    assert sql(b, "SELECT 1 AS x", token="s3cret") == [{"x": 1}]
    assert http(b, "/healthz")[0] == 200


def committed_now(b, group, t, partitions):
    c = ck_consumer(b, **{"group.id": group})
    try:
        got = c.committed([TopicPartition(t, p) for p in partitions], timeout=10)
        return {p.partition: p.offset for p in got}
    finally:
        c.close()


def test_sql_offset_writes_while_consumers_commit_are_ordered_and_kept(ab):
    """An operator's writes to committed_offsets take the path OffsetCommit
    takes: with three connections committing in a loop and two SQL clients
    writing at once, each SQL write is visible to OffsetFetch as soon as it
    is answered, the last one wins on its partition, the committers lose
    nothing, and on a partition everyone writes, OffsetFetch and SQL agree
    on who came last."""
    import threading
    t = topic_name("opc")
    create_topic(ab, t, 6)
    group = "op-and-consumers"
    rounds, writes, errors = 150, 40, []
    shared = 4

    def committer(p):
        c = ck_consumer(ab, **{"group.id": group})      # assign-only: no member
        try:
            for v in range(1, rounds + 1):
                parts = [TopicPartition(t, p, v)]
                if v % 3 == 0:
                    parts.append(TopicPartition(t, shared, 100000 + 1000 * p + v))
                for r in c.commit(offsets=parts, asynchronous=False):
                    if r.error:
                        errors.append((p, v, r.error))
        except Exception as e:                         # noqa: BLE001 - reported below
            errors.append((p, "exception", e))
        finally:
            c.close()

    def operator(p):
        fetcher = ck_consumer(ab, **{"group.id": group})
        try:
            for v in range(1, writes + 1):
                sql(ab, "INSERT INTO committed_offsets(group_id, topic, partition, offset, "
                        "metadata) VALUES('%s', '%s', %d, %d, 'op')" % (group, t, p, v))
                got = fetcher.committed([TopicPartition(t, p)], timeout=10)[0].offset
                if got != v:
                    errors.append("SQL write %d to %d answered, OffsetFetch then saw %d" % (v, p, got))
                if v % 4 == 0:
                    sql(ab, "INSERT INTO committed_offsets(group_id, topic, partition, offset) "
                            "VALUES('%s', '%s', %d, %d)" % (group, t, shared, 10 * v + p))
        except Exception as e:                         # noqa: BLE001 - reported below
            errors.append((p, "exception", e))
        finally:
            fetcher.close()

    threads = [threading.Thread(target=committer, args=(p,)) for p in range(3)]
    threads += [threading.Thread(target=operator, args=(p,)) for p in (3, 5)]
    for th in threads:
        th.start()
    for th in threads:
        th.join(120)
    assert not errors, errors[:5]
    fetched = committed_now(ab, group, t, range(6))
    rows = {r["partition"]: r["offset"] for r in
            sql(ab, "SELECT partition, offset FROM committed_offsets WHERE group_id='%s'" % group)}
    assert fetched == rows, (fetched, rows)
    assert [fetched[p] for p in (0, 1, 2, 3, 5)] == [rounds] * 3 + [writes] * 2
    written = {100000 + 1000 * p + v for p in range(3) for v in range(3, rounds + 1, 3)}
    written |= {10 * v + p for p in (3, 5) for v in range(4, writes + 1, 4)}
    assert fetched[shared] in written


def commit_one(b, group, t, offset):
    c = ck_consumer(b, **{"group.id": group})
    try:
        c.commit(offsets=[TopicPartition(t, 0, offset)], asynchronous=False)
    finally:
        c.close()


def test_sql_offset_write_is_stored_before_it_is_answered(ab):
    """SIGKILL right after the SQL write returns: the restarted broker has
    it (the answer waits for the job that stores it, and its sync)."""
    t = topic_name("opk")
    create_topic(ab, t, 1)
    group = "killed-after-write"
    commit_one(ab, group, t, 5)
    st, _, hdr = http(ab, "/sql", "UPDATE committed_offsets SET offset=77, metadata='moved' "
                                  "WHERE group_id='%s' AND topic='%s'" % (group, t))
    assert st == 200 and hdr.get("X-Sluice-Changes") == "1"
    ab.stop(signal.SIGKILL)
    ab.start()
    assert committed_now(ab, group, t, [0]) == {0: 77}
    assert sql(ab, "SELECT offset, metadata FROM committed_offsets WHERE group_id='%s'"
                   % group) == [{"offset": 77, "metadata": "moved"}]


def test_sql_group_delete_is_stored_before_it_is_answered(ab):
    """DELETE FROM consumer_groups takes DeleteGroups' path: after its
    answer a SIGKILL does not bring the group or its offsets back."""
    t = topic_name("opd")
    create_topic(ab, t, 1)
    group = "deleted-then-killed"
    commit_one(ab, group, t, 5)
    assert sql(ab, "SELECT group_id FROM consumer_groups WHERE group_id='%s'" % group) == \
        [{"group_id": group}]
    st, _, hdr = http(ab, "/sql", "DELETE FROM consumer_groups WHERE group_id='%s'" % group)
    assert st == 200 and hdr.get("X-Sluice-Changes") == "1"
    ab.stop(signal.SIGKILL)
    ab.start()
    assert sql(ab, "SELECT * FROM consumer_groups WHERE group_id='%s'" % group) == []
    assert sql(ab, "SELECT * FROM committed_offsets WHERE group_id='%s'" % group) == []
    assert committed_now(ab, group, t, [0]) == {0: -1001}
