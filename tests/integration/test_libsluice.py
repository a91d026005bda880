"""libsluice (through its tools, sluice-produce and sluice-consume, which use
only the public API) against a real sluiced: byte-exact round trips with
keys, headers and zstd; interop both ways with kcat; a producer that keeps
going across a broker restart without losing or duplicating; a consumer
group of three libsluice consumers and one confluent-kafka consumer."""
import json
import os
import signal
import subprocess
import time

import pytest

from support import create_topic, ck_conf, ck_consumer, kcat, topic_name
from conftest import sluiced_path
import kafka_raw as kr
import libsluice_ctypes as lsc

TOOLS = os.path.dirname(sluiced_path())


def tool(name):
    p = os.path.join(TOOLS, name)
    if not os.access(p, os.X_OK):
        pytest.fail("%s not built (make %s)" % (p, p))
    return p


def produce(b, topic, lines, *args, timeout=60):
    """Runs sluice-produce with lines (bytes, no newline) on stdin."""
    p = subprocess.run([tool("sluice-produce"), "-b", b.bootstrap, "-t", topic, "-q"] + list(args),
                       input=b"".join(l + b"\n" for l in lines), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p


def consume(b, topic, *args, timeout=60):
    p = subprocess.run([tool("sluice-consume"), "-b", b.bootstrap, "-t", topic, "-e", "-q"] +
                       list(args), stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                       timeout=timeout)
    assert p.returncode == 0, p.stderr.decode(errors="replace")
    return p.stdout


def stored_codecs(b, topic, partition=0):
    """Codec bits of every batch on disk."""
    return [x.attrs & 7 for x in kr.segment_batches(b.partition_dir(topic, partition))]


def values(n, tag=b""):
    # Every byte but the newline that separates lines, some invalid UTF-8.
    return [b"%s%05d\x00\xff\xfe\x01\t\xc3\xa9 " % (tag, i) + bytes(range(11, 40)) * (i % 5)
            for i in range(n)]


def test_libsluice_roundtrip_byte_exact_with_keys_headers_zstd(broker):
    t = topic_name("lsrt")
    create_topic(broker, t, 1)
    vals = values(500)
    lines = [b"key-%d\x1f" % (i % 7) + v for i, v in enumerate(vals)]
    produce(broker, t, lines, "-z", "zstd", "-K", "\x1f", "-H", "h1=one", "-H", "h2=")
    assert set(stored_codecs(broker, t)) == {4}, "batches not stored as zstd"
    out = consume(broker, t, "-K", "\x1f")
    assert out == b"".join(l + b"\n" for l in lines)
    # Headers and keys through the JSON output (ASCII part only).
    js = [json.loads(l) for l in consume(broker, t, "-J", "-c", "3").decode("latin-1").splitlines()]
    assert [j["headers"] for j in js] == [[["h1", "one"], ["h2", ""]]] * 3
    assert [j["key"] for j in js] == ["key-0", "key-1", "key-2"]
    assert [j["offset"] for j in js] == [0, 1, 2]


def test_kcat_reads_what_libsluice_wrote_zstd(broker):
    t = topic_name("lsk")
    create_topic(broker, t, 1)
    lines = [b"k%d:value %d \xc3\xa9" % (i, i) for i in range(300)]
    produce(broker, t, lines, "-z", "zstd", "-K", ":", "-H", "src=libsluice")
    p = kcat(broker, ["-C", "-t", t, "-e", "-q", "-f", "%k|%s|%h\\n"])
    assert p.returncode == 0, p.stderr
    want = b"".join(b"k%d|value %d \xc3\xa9|src=libsluice\n" % (i, i) for i in range(300))
    assert p.stdout == want


def test_libsluice_reads_what_kcat_wrote_zstd(broker):
    t = topic_name("kls")
    create_topic(broker, t, 1)
    lines = b"".join(b"key%d:kcat value %d\n" % (i, i) for i in range(300))
    p = kcat(broker, ["-P", "-t", t, "-z", "zstd", "-K", ":", "-H", "via=kcat"], input_bytes=lines)
    assert p.returncode == 0, p.stderr
    # librdkafka sends a batch uncompressed when zstd does not make it
    # smaller, as a batch of one or two records cut off by linger.ms on a
    # loaded machine is: so zstd batches, and at most tiny plain ones.
    codecs = stored_codecs(broker, t)
    assert 4 in codecs and set(codecs) <= {0, 4}, codecs
    js = [json.loads(l) for l in consume(broker, t, "-J").decode().splitlines()]
    assert [(j["key"], j["value"], j["offset"]) for j in js] == \
        [("key%d" % i, "kcat value %d" % i, i) for i in range(300)]
    assert all(j["headers"] == [["via", "kcat"]] for j in js)


def test_large_batches_written_in_place_arrive_byte_exact_on_every_partition(broker):
    # ~8 MB uncompressed over 3 partitions: batches of up to batch.size are
    # sent from their own buffers (no copy into the request), several per
    # Produce request; the small send buffer makes writes stop part way
    # through a batch and resume there.
    t = topic_name("lsbig")
    create_topic(broker, t, 3)
    lines = [b"k%d\x1f%07d " % (i % 11, i) + bytes(range(11, 250)) + b"%d" % i
             for i in range(30000)]
    produce(broker, t, lines, "-K", "\x1f", "-X", "linger.ms=20", "-X", "batch.size=262144",
            "-X", "socket.send.buffer.bytes=20000")
    got = consume(broker, t, "-K", "\x1f").split(b"\n")[:-1]      # values hold \r
    assert len(got) == len(lines)
    assert sorted(got) == sorted(lines), "records differ"
    for k in range(11):          # a key's records keep their order
        tag = b"k%d\x1f" % k
        ok = [l for l in got if l.startswith(tag)] == [l for l in lines if l.startswith(tag)]
        assert ok, "key %d out of order" % k


def test_producer_rides_out_a_broker_restart_without_loss_or_duplicates(broker):
    t = topic_name("lsrs")
    create_topic(broker, t, 1)
    n, restart_at = 3000, 1500
    proc = subprocess.Popen([tool("sluice-produce"), "-b", broker.bootstrap, "-t", t,
                             "-X", "linger.ms=1", "-X", "retry.backoff.ms=50",
                             "-X", "reconnect.backoff.max.ms=200", "-X", "log_level=3"],
                            stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)
    try:
        for i in range(n):
            proc.stdin.write(b"msg-%06d\n" % i)
            if i % 100 == 99:
                proc.stdin.flush()
                time.sleep(0.01)
            if i == restart_at:
                proc.stdin.flush()
                time.sleep(0.2)
                broker.restart()
        out, err = proc.communicate(timeout=90)       # closes stdin
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    assert proc.returncode == 0, err.decode(errors="replace")
    got = consume(broker, t).splitlines()
    dups = len(got) - len(set(got))
    assert dups == 0, "%d duplicate(s) after the restart" % dups
    assert got == [b"msg-%06d" % i for i in range(n)]


def test_group_of_three_libsluice_and_one_confluent_consumer(broker):
    t = topic_name("lsgrp")
    parts, n = 8, 4000
    create_topic(broker, t, parts)
    group = "lsg-" + t
    outs, procs, paths = [], [], []
    ck = ck_consumer(broker, **{"group.id": group, "enable.auto.commit": True,
                                "session.timeout.ms": 10000, "heartbeat.interval.ms": 500})
    try:
        for i in range(3):
            # The child appends; the parent reads through its own descriptor
            # (a shared one would share the file offset).
            path = os.path.join(broker.workdir, "member%d.out" % i)
            f = open(path, "ab")
            outs.append(f)
            paths.append(path)
            procs.append(subprocess.Popen(
                [tool("sluice-consume"), "-b", broker.bootstrap, "-t", t, "-g", group, "-J", "-u",
                 "-X", "heartbeat.interval.ms=500", "-X", "session.timeout.ms=10000",
                 "-X", "log_level=5"],
                stdout=f, stderr=subprocess.PIPE))
        ck.subscribe([t])
        got_ck = []
        # Let the group settle with all four members before producing.
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline and len(ck.assignment()) == 0:
            ck.poll(0.2)
        time.sleep(3)
        for _ in range(20):
            ck.poll(0.1)
        assert ck.assignment(), "confluent consumer never got partitions"
        produce(broker, t, [b"%d:v%d" % (i, i) for i in range(n)], "-K", ":")
        seen = {}
        deadline = time.monotonic() + 60
        while time.monotonic() < deadline:
            m = ck.poll(0.2)
            if m is not None and not m.error():
                got_ck.append(m.value())
            per = []
            for path in paths:
                with open(path, "rb") as rf:
                    lines = rf.read().decode().split("\n")[:-1]     # whole lines only
                per.append([json.loads(l)["value"].encode() for l in lines])
            seen = {"ck": got_ck, "ls0": per[0], "ls1": per[1], "ls2": per[2]}
            if sum(len(v) for v in seen.values()) >= n:
                break
        allv = [v for vs in seen.values() for v in vs]
        assert len(set(allv)) == n, "consumed %d distinct of %d: %s" % (
            len(set(allv)), n, {k: len(v) for k, v in seen.items()})
        assert len(allv) == n, "duplicates: %s" % {k: len(v) for k, v in seen.items()}
        assert all(len(v) > 0 for v in seen.values()), \
            "a member got nothing: %s" % {k: len(v) for k, v in seen.items()}
    finally:
        ck.close()
        for p in procs:
            if p.poll() is None:
                p.send_signal(signal.SIGTERM)
        for p in procs:
            try:
                p.wait(timeout=15)
            except subprocess.TimeoutExpired:
                p.kill()
                p.wait()
        for f in outs:
            f.close()


# ---- the admin API, through ctypes on the shared library ------------------------
def test_admin_topics_configs_groups_against_sluiced(broker):
    import ctypes as C
    lib = lsc.lib()
    err = C.create_string_buffer(512)
    conf = lib.sl_conf_new()
    assert lib.sl_conf_set(conf, b"bootstrap.servers", broker.bootstrap.encode(), err, 512) == 0
    assert lib.sl_conf_set(conf, b"log_level", b"3", err, 512) == 0
    a = lib.sl_admin_new(conf, err, 512)
    lib.sl_conf_destroy(conf)
    assert a, err.value
    try:
        t = topic_name("lsadm").encode()
        rc = lib.sl_admin_create_topic(a, t, 3, -1, lsc.kv("retention.ms", "3600000"), 10000, err, 512)
        assert rc == 0, err.value
        rc = lib.sl_admin_create_topic(a, t, 3, -1, None, 10000, err, 512)
        assert rc == 36, "second create: %d %s" % (rc, err.value)   # TOPIC_ALREADY_EXISTS
        assert lib.sl_admin_partition_count(a, t, 10000) == 3
        # list_topics: the new topic, not the internal ones
        names, nn = C.POINTER(C.c_char_p)(), C.c_int()
        assert lib.sl_admin_list_topics(a, C.byref(names), C.byref(nn), 10000, err, 512) == 0, err.value
        listed = [names[i] for i in range(nn.value)]
        lib.sl_admin_groups_free(names, nn)
        assert t in listed and len(set(listed)) == len(listed), listed
        assert not [x for x in listed if x.startswith(b"__")], listed
        # describe: the config set at creation shows, not as a default
        entries, n = C.POINTER(lsc.Entry)(), C.c_int()
        rc = lib.sl_admin_describe_configs(a, 2, t, C.byref(entries), C.byref(n), 10000, err, 512)
        assert rc == 0, err.value
        got = {entries[i].name: (entries[i].value, entries[i].is_default) for i in range(n.value)}
        assert got[b"retention.ms"] == (b"3600000", 0)
        lib.sl_config_entries_free(entries, n)
        rc = lib.sl_admin_alter_configs(a, 2, t, lsc.kv("retention.ms", "7200000"), 10000, err, 512)
        assert rc == 0, err.value
        rc = lib.sl_admin_describe_configs(a, 2, t, C.byref(entries), C.byref(n), 10000, err, 512)
        got = {entries[i].name: entries[i].value for i in range(n.value)}
        assert got[b"retention.ms"] == b"7200000"
        lib.sl_config_entries_free(entries, n)
        # a group with committed offsets shows in list_groups and its offsets
        produce(broker, t.decode(), [b"x%d" % i for i in range(30)], "-p", "1")
        out = subprocess.run([tool("sluice-consume"), "-b", broker.bootstrap, "-t", t.decode(),
                              "-g", "adm-grp", "-c", "30", "-q"], stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE, timeout=60)
        assert out.returncode == 0, out.stderr
        groups, ng = C.POINTER(C.c_char_p)(), C.c_int()
        assert lib.sl_admin_list_groups(a, C.byref(groups), C.byref(ng), 10000, err, 512) == 0, err.value
        assert b"adm-grp" in [groups[i] for i in range(ng.value)]
        tps, nt = C.POINTER(lsc.TP)(), C.c_int()
        assert lib.sl_admin_list_group_offsets(a, b"adm-grp", C.byref(tps), C.byref(nt), 10000,
                                               err, 512) == 0, err.value
        offs = {(tps[i].topic, tps[i].partition): tps[i].offset for i in range(nt.value)}
        assert offs.get((t, 1)) == 30, offs
        assert lib.sl_admin_delete_topic(a, t, 10000, err, 512) == 0, err.value
    finally:
        lib.sl_admin_destroy(a)


def test_an_async_commit_right_before_close_is_not_lost(broker):
    """sl_consumer_commit(async) then at once sl_consumer_close: the commit
    reaches the group (the close waits for it, as librdkafka's does)."""
    import ctypes as C
    from confluent_kafka import Consumer as CkConsumer, TopicPartition
    lib = lsc.lib()
    lib.sl_consumer_commit.argtypes = [C.c_void_p, C.POINTER(lsc.TP), C.c_int, C.c_int]
    t = topic_name("lsac")
    create_topic(broker, t, partitions=1)
    g = "ac-" + t
    check = CkConsumer(ck_conf(broker, **{"group.id": g}))
    try:
        for i in range(5):
            c = lsc.Consumer(lib, {"bootstrap.servers": broker.bootstrap, "group.id": g,
                                   "enable.auto.commit": "false", "log_level": "3"})
            arr = (lsc.TP * 1)(lsc.TP(t.encode(), 0, 100 + i, 0))
            t0 = time.time()
            assert lib.sl_consumer_commit(c.h, arr, 1, 1) == 0
            c.close()
            assert time.time() - t0 < 10
            got = check.committed([TopicPartition(t, 0)], timeout=10)[0].offset
            assert got == 100 + i, "round %d: committed %d" % (i, got)
    finally:
        check.close()
