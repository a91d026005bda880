"""sluice-export (issue 32) against a real sluiced: topics land as Avro Object
Container Files under DIR/<topic>/partition=<p>/<topic>+<p>+<first>+<last>.avro,
read back here with Debian's python3-avro.  What a user checks: the union of
the files is the topic's content, each record once, in offset order per
partition, every byte equal (keys, values, null ones, headers, registry-framed
values); a run killed at random points and run again loses and duplicates
nothing and leaves no temporary file; aborted transactions are not exported;
a second run with nothing new writes nothing; SIGTERM completes the open files."""
import io
import lzma
import os
import random
import signal
import struct
import subprocess
import time

import avro.datafile
import avro.io
import avro.schema
import pytest

from confluent_kafka import TopicPartition

from support import ck_consumer, ck_producer, create_topic, produce_ok, topic_name
from conftest import sluiced_path
from retention_support import delete_records

TOOLS = os.path.dirname(sluiced_path())


def exporter():
    p = os.path.join(TOOLS, "sluice-export")
    if not os.access(p, os.X_OK):
        pytest.fail("%s not built (make all)" % p)
    return p


def export_args(b, topic, root, *args):
    return [exporter(), "--bootstrap", b.bootstrap, "--topic", topic, "--to", str(root)] + list(args)


def run_export(b, topic, root, *args, timeout=120, expect=0):
    p = subprocess.run(export_args(b, topic, root, *args), stdout=subprocess.PIPE,
                       stderr=subprocess.PIPE, timeout=timeout)
    assert p.returncode == expect, "exit %d\nstdout: %s\nstderr: %s" % (
        p.returncode, p.stdout.decode(errors="replace"), p.stderr.decode(errors="replace"))
    return p


def mixed_records(n, partitions=3, seed=1):
    """Plain bytes, null keys and values, headers (a null header value too),
    values in the registry's wire format (magic 0, schema id, Avro body)."""
    rnd = random.Random(seed)
    out = []
    for i in range(n):
        m = {"partition": i % partitions}
        if i % 5:
            m["key"] = b"k-%d-" % i + bytes(rnd.randrange(256) for _ in range(i % 7))
        if i % 7 == 0:
            m["value"] = None
        elif i % 4 == 0:
            m["value"] = b"\x00" + struct.pack(">i", 1 + i % 3) + bytes([2 * (i % 60)]) + b"avro"
        else:
            m["value"] = bytes(rnd.randrange(256) for _ in range(rnd.randrange(0, 300)))
        if i % 3 == 0:
            m["headers"] = [("h", b"\x00\xffv%d" % i), ("empty", b""), ("nul", None)]
        out.append(m)
    return out


def norm_headers(hs):
    return [(k, v) for k, v in (hs or [])]


def expected_of(sent):
    """{partition: {offset: (key, value, headers)}} from what was produced
    (the records) and where it landed (their delivery reports)."""
    exp = {}
    for rec, m in sent:
        exp.setdefault(m.partition(), {})[m.offset()] = (
            rec.get("key"), rec.get("value"), norm_headers(rec.get("headers")))
    return exp


def send(producer, topic, recs):
    """produce_ok, returning (record, delivery report) pairs."""
    return list(zip(recs, produce_ok(producer, topic, recs)))


def read_ocf(f):
    """The records of an Avro Object Container File.  Python's avro reads
    every codec but xz; for xz the container is walked here as the Avro
    specification lays it out (header, then blocks of count, size, data,
    sync marker), each block an .xz stream that the standard library's
    lzma opens, its records decoded by avro's own DatumReader."""
    head = f.read(4)
    f.seek(0)
    assert head == b"Obj\x01", head
    data = f.read()
    f.seek(0)
    src = io.BytesIO(data[4:])
    dec = avro.io.BinaryDecoder(src)
    meta = {}
    while True:
        n = dec.read_long()
        if n == 0:
            break
        if n < 0:
            dec.read_long()
            n = -n
        for _ in range(n):
            k = dec.read_utf8()
            meta[k] = dec.read_bytes()
    if meta.get("avro.codec", b"null") != b"xz":
        return list(avro.datafile.DataFileReader(f, avro.io.DatumReader()))
    sync = src.read(16)
    reader = avro.io.DatumReader(avro.schema.parse(meta["avro.schema"].decode()))
    recs = []
    while src.tell() < len(data) - 4:
        count, size = dec.read_long(), dec.read_long()
        block = lzma.decompress(src.read(size), format=lzma.FORMAT_XZ)
        assert src.read(16) == sync, "sync marker after a block"
        bd = avro.io.BinaryDecoder(io.BytesIO(block))
        recs += [reader.read(bd) for _ in range(count)]
    return recs


def read_tree(root, topic, layout="partition"):
    """Every file under root/topic: {partition: [(offset, key, value, headers)]}
    in file order (by first offset), checking names against contents and,
    with layout "time", each record's timestamp against its dt=/hour= dir."""
    got, files = {}, {}
    tdir = os.path.join(str(root), topic)
    for d, _, names in os.walk(tdir):
        tmp = [n for n in names if n.endswith(".tmp")]
        assert not tmp, "temporary files left: %s" % tmp
        for n in names:
            assert n.endswith(".avro"), n
            t, fp, first, last = n[:-len(".avro")].rsplit("+", 3)
            assert t == topic, n
            p = int(fp)
            rel = os.path.relpath(d, tdir).split(os.sep)
            if layout == "partition":
                assert rel == ["partition=%d" % p], (rel, n)
            else:
                assert len(rel) == 2 and rel[0].startswith("dt=") and rel[1].startswith("hour="), rel
            files.setdefault(p, []).append((int(first), int(last), os.path.join(d, n), rel))
    for p, fl in files.items():
        for first, last, path, rel in sorted(fl):
            with open(path, "rb") as f:
                recs = read_ocf(f)
            assert recs, "empty file %s" % path
            assert (recs[0]["offset"], recs[-1]["offset"]) == (first, last), path
            for r in recs:
                assert (r["topic"], r["partition_id"]) == (topic, p)
                if layout == "time":
                    when = time.strftime("dt=%Y-%m-%d/hour=%H", time.gmtime(r["timestamp"] / 1000))
                    assert when == "/".join(rel), (path, r["offset"], r["timestamp"])
                got.setdefault(p, []).append(
                    (r["offset"], r["key"], r["value"],
                     [(h["key"], h["value"]) for h in r["headers"]]))
    return got


def assert_exact(exp, got):
    """Prints expected, read, lost, duplicated; asserts each record once, in
    offset order, bytes equal."""
    n_exp = sum(len(v) for v in exp.values())
    n_got = sum(len(v) for v in got.values())
    lost, dup, wrong, order = [], [], [], []
    for p in sorted(set(exp) | set(got)):
        e, g = exp.get(p, {}), got.get(p, [])
        offs = [r[0] for r in g]
        if offs != sorted(offs):
            order.append(p)
        seen = set()
        for off, k, v, h in g:
            if off in seen:
                dup.append((p, off))
            seen.add(off)
            if off not in e or e[off] != (k, v, h):
                wrong.append((p, off))
        lost += [(p, off) for off in e if off not in seen]
    print("expected %d, read %d, lost %d, duplicated %d, unexpected or different %d"
          % (n_exp, n_got, len(lost), len(dup), len(wrong)))
    assert not lost and not dup and not wrong and not order, (
        "lost %s dup %s wrong %s out of order in %s" % (lost[:5], dup[:5], wrong[:5], order))
    assert n_exp == n_got


def test_until_end_exports_every_record_once_byte_for_byte(broker, tmp_path):
    b, t = broker, topic_name("exp")
    create_topic(b, t, partitions=3)
    msgs = send(ck_producer(b), t, mixed_records(600))
    exp = expected_of(msgs)
    out = run_export(b, t, tmp_path, "--until-end", "--max-records", "70", "--codec", "deflate")
    assert_exact(exp, read_tree(tmp_path, t))
    summary = out.stdout.decode()
    assert "total: " in summary and " 600 record(s)" in summary, summary
    files = sorted(os.listdir(os.path.join(str(tmp_path), t, "partition=0")))
    assert len(files) == 3, files                        # 200 records, 70 a file

    # Nothing new: nothing written, the tree unchanged.
    before = {d: sorted(os.listdir(os.path.join(str(tmp_path), t, d)))
              for d in os.listdir(os.path.join(str(tmp_path), t))}
    out = run_export(b, t, tmp_path, "--until-end")
    assert "total: 0 file(s), 0 record(s)" in out.stdout.decode(), out.stdout.decode()
    after = {d: sorted(os.listdir(os.path.join(str(tmp_path), t, d)))
             for d in os.listdir(os.path.join(str(tmp_path), t))}
    assert before == after

    # New records: the next run takes exactly those.
    more = send(ck_producer(b), t, mixed_records(90, seed=2))
    run_export(b, t, tmp_path, "--until-end", "--codec", "snappy")
    for p, recs in expected_of(more).items():
        exp[p].update(recs)
    assert_exact(exp, read_tree(tmp_path, t))


@pytest.mark.parametrize("codec", ["null", "snappy", "xz", "zstandard"])
def test_each_codec_reads_back(broker, tmp_path, codec):
    b, t = broker, topic_name("codec")
    create_topic(b, t, partitions=1)
    rnd = random.Random(7)
    # mixed records, then 4 KiB values: several 1 MiB blocks in one file
    recs = mixed_records(500, partitions=1) + [
        {"partition": 0, "value": bytes(rnd.randrange(256) for _ in range(64)) * 64}
        for _ in range(700)]
    msgs = send(ck_producer(b), t, recs)
    run_export(b, t, tmp_path, "--until-end", "--codec", codec)
    assert_exact(expected_of(msgs), read_tree(tmp_path, t))
    (name,) = os.listdir(os.path.join(str(tmp_path), t, "partition=0"))
    with open(os.path.join(str(tmp_path), t, "partition=0", name), "rb") as f:
        head = f.read(4096)
    assert b"avro.codec" + bytes([2 * len(codec)]) + codec.encode() in head, head[:200]


def count_files(root, topic):
    n = 0
    for _d, _, names in os.walk(os.path.join(str(root), topic)):
        n += sum(1 for name in names if name.endswith(".avro"))
    return n


def test_sigkill_at_random_points_then_resume_is_exact(broker, tmp_path):
    """Each round adds 600 records (30 files of 20) and kills the exporter
    after a random number (1..25) of new files: mid-write, mid-rename or
    between a rename and its commit, wherever that lands."""
    b, t = broker, topic_name("kill")
    create_topic(b, t, partitions=3)
    rnd = random.Random(7)
    sent, kills = [], 0
    for rnd_no in range(12):
        sent += send(ck_producer(b), t, mixed_records(600, seed=100 + rnd_no))
        target = count_files(tmp_path, t) + rnd.randint(1, 25)
        p = subprocess.Popen(export_args(b, t, tmp_path, "--until-end", "--max-records", "20",
                                         "--parallel", "2", "-q"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        deadline = time.monotonic() + 30
        while p.poll() is None and time.monotonic() < deadline and count_files(tmp_path, t) < target:
            time.sleep(0.005)
        if p.poll() is None:
            p.kill()
            kills += 1
        _, err = p.communicate(timeout=30)
        assert p.returncode in (0, -signal.SIGKILL), err.decode(errors="replace")
    print("killed %d of 12 runs" % kills)
    assert kills >= 10, "the exporter finished before the kill too often (%d kills)" % kills
    run_export(b, t, tmp_path, "--until-end", "--max-records", "20")
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def test_the_files_not_the_group_say_where_a_partition_resumes(broker, tmp_path):
    """A commit lost to a kill between a rename and its commit, made
    deterministic: the group's offsets are moved back to 0 after a run; the
    next run still resumes after the files (writes nothing) and commits
    the files' offsets again."""
    b, t = broker, topic_name("lost")
    create_topic(b, t, partitions=3)
    sent = send(ck_producer(b), t, mixed_records(300, seed=12))
    run_export(b, t, tmp_path, "--until-end", "--max-records", "40")
    c = ck_consumer(b, **{"group.id": "sluice-export-" + t})
    try:
        c.commit(offsets=[TopicPartition(t, p, 0) for p in range(3)], asynchronous=False)
        out = run_export(b, t, tmp_path, "--until-end", "--max-records", "40")
        assert "total: 0 file(s), 0 record(s)" in out.stdout.decode(), out.stdout.decode()
        got = c.committed([TopicPartition(t, p) for p in range(3)], timeout=10)
    finally:
        c.close()
    assert_exact(expected_of(sent), read_tree(tmp_path, t))
    ends = {p: max(recs) + 1 for p, recs in expected_of(sent).items()}
    assert {tp.partition: tp.offset for tp in got} == ends


def test_aborted_transactions_are_not_exported(broker, tmp_path):
    b, t = broker, topic_name("txn")
    create_topic(b, t, partitions=3)
    p = ck_producer(b, **{"transactional.id": "exp-" + t})
    p.init_transactions(30)
    committed = []
    for i, commit in enumerate([True, False, True, False, True]):
        p.begin_transaction()
        recs = [{"partition": j % 3, "key": b"t%d" % i, "value": b"txn %d rec %d" % (i, j)}
                for j in range(30)]
        msgs = send(p, t, recs)
        if commit:
            p.commit_transaction(30)
            committed += msgs
        else:
            p.abort_transaction(30)
    plain = send(ck_producer(b), t, mixed_records(60, seed=4))
    # A transaction still open: --until-end stops at the last stable offset.
    p.begin_transaction()
    produce_ok(p, t, [{"partition": j % 3, "value": b"open %d" % j} for j in range(9)])
    run_export(b, t, tmp_path, "--until-end", "--max-records", "25", timeout=60)
    p.abort_transaction(30)
    assert_exact(expected_of(committed + plain), read_tree(tmp_path, t))
    # The aborted tail adds nothing on the next run.
    run_export(b, t, tmp_path, "--until-end")
    assert_exact(expected_of(committed + plain), read_tree(tmp_path, t))


def test_sigterm_in_continuous_mode_completes_the_open_file(broker, tmp_path):
    b, t = broker, topic_name("follow")
    create_topic(b, t, partitions=1)
    proc = subprocess.Popen(export_args(b, t, tmp_path, "--max-records", "100"),
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        msgs = send(ck_producer(b), t, mixed_records(250, partitions=1, seed=5))
        pdir = os.path.join(str(tmp_path), t, "partition=0")
        deadline = time.monotonic() + 30
        while time.monotonic() < deadline:
            if os.path.isdir(pdir) and len([n for n in os.listdir(pdir) if n.endswith(".avro")]) >= 2:
                break
            time.sleep(0.1)
        time.sleep(1.5)                      # the last 50 are read by now
        proc.send_signal(signal.SIGTERM)
        out, err = proc.communicate(timeout=30)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == 0, err.decode(errors="replace")
    assert "1 record(s)" not in out.decode()
    assert_exact(expected_of(msgs), read_tree(tmp_path, t))
    assert len(os.listdir(pdir)) == 3


def test_usage_and_runtime_errors_have_their_exit_codes(broker, tmp_path):
    p = subprocess.run([exporter(), "--topic", "x", "--to", str(tmp_path)],
                       stderr=subprocess.PIPE, timeout=30)
    assert p.returncode == 1 and b"--bootstrap is required" in p.stderr
    p = subprocess.run(export_args(broker, "x", tmp_path, "--codec", "lz4"),
                       stderr=subprocess.PIPE, timeout=30)
    assert p.returncode == 1 and b"--codec" in p.stderr
    # Avro C's "lzma" (raw LZMA2) is no codec of the Avro specification
    p = subprocess.run(export_args(broker, "x", tmp_path, "--codec", "lzma"),
                       stderr=subprocess.PIPE, timeout=30)
    assert p.returncode == 1 and b"xz or zstandard" in p.stderr, p.stderr
    t = topic_name("ro")
    create_topic(broker, t, partitions=1)
    produce_ok(ck_producer(broker), t, mixed_records(5, partitions=1))
    # The topic's directory is a file: the partition, the path and the cause.
    with open(os.path.join(str(tmp_path), t), "w") as f:
        f.write("not a directory")
    p = run_export(broker, t, tmp_path, "--until-end", expect=2)
    assert b"%s [0]" % t.encode() in p.stderr and b"Not a directory" in p.stderr, p.stderr


def test_dry_run_writes_nothing(broker, tmp_path):
    b, t = broker, topic_name("dry")
    create_topic(b, t, partitions=2)
    produce_ok(ck_producer(b), t, mixed_records(10, partitions=2))
    out = run_export(b, t, tmp_path, "--until-end", "--dry-run").stdout.decode()
    assert "would export %s [0]: offsets 0..4 (up to 5 records)" % t in out, out
    assert "would export %s [1]: offsets 0..4" % t in out, out
    assert not os.path.exists(os.path.join(str(tmp_path), t))


def test_records_removed_before_the_export_are_reported_as_a_gap(broker, tmp_path):
    b, t = broker, topic_name("gap")
    create_topic(b, t, partitions=1)
    first = send(ck_producer(b), t, mixed_records(30, partitions=1, seed=6))
    run_export(b, t, tmp_path, "--until-end")
    later = send(ck_producer(b), t, mixed_records(70, partitions=1, seed=7))
    low, err = delete_records(b, t, 0, 60)
    assert (low, err) == (60, 0)
    out = run_export(b, t, tmp_path, "--until-end")
    err = out.stderr.decode()
    assert "gap: %s [0]: offsets 30..59 (30 records)" % t in err, err
    assert "gap of 30 record(s)" in out.stdout.decode(), out.stdout.decode()
    exp = expected_of(first + [(r, m) for r, m in later if m.offset() >= 60])
    assert_exact(exp, read_tree(tmp_path, t))


def wait_exported(root, topic, count, timeout=60):
    """Until the complete files hold count records (or the deadline)."""
    deadline = time.monotonic() + timeout
    n = -1
    while time.monotonic() < deadline:
        try:
            n = sum(len(v) for v in read_tree(root, topic).values())
        except AssertionError:       # a .tmp being written: look again
            n = -1
        if n >= count:
            return n
        time.sleep(0.3)
    return n


def start_member(b, topic, root, group, max_interval_ms):
    """A continuous exporter in group (a fleet member): files of 50 records
    or max_interval_ms, a 6 s session."""
    args = ["--group", group, "--max-records", "50", "--max-interval", str(max_interval_ms),
            "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500"]
    return subprocess.Popen(export_args(b, topic, root, *args), stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE)


def test_two_exporters_in_a_group_split_then_one_is_killed_and_the_other_takes_over(
        broker, tmp_path):
    b, t = broker, topic_name("fleet")
    create_topic(b, t, partitions=4)
    group = "fleet-" + t
    a = start_member(b, t, tmp_path, group, 500)
    c = start_member(b, t, tmp_path, group, 500)
    try:
        sent = send(ck_producer(b), t, mixed_records(800, partitions=4, seed=8))
        assert wait_exported(tmp_path, t, 800) == 800
        a.kill()
        a.communicate(timeout=30)
        sent += send(ck_producer(b), t, mixed_records(800, partitions=4, seed=9))
        got = wait_exported(tmp_path, t, 1600, timeout=90)
        assert got == 1600, "the survivor exported %d of 1600" % got
        c.send_signal(signal.SIGTERM)
        out, err = c.communicate(timeout=30)
    finally:
        for p in (a, c):
            if p.poll() is None:
                p.kill()
                p.communicate()
    assert c.returncode == 0, err.decode(errors="replace")
    # The survivor wrote every partition's later files (it owned them all).
    lines = [l for l in out.decode().splitlines() if l.startswith(t)]
    assert len(lines) == 4 and all(" 0 record(s)" not in l for l in lines), out.decode()
    # ... and not those the killed one had written before: they shared the topic.
    total = int(out.decode().split("total: ")[1].split(" file(s), ")[1].split(" ")[0])
    print("the survivor exported %d of 1600 records" % total)
    assert 800 <= total < 1600, out.decode()
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def test_layout_time_places_each_record_by_its_timestamp(broker, tmp_path):
    b, t = broker, topic_name("hours")
    create_topic(b, t, partitions=2)
    base = 1767225600000 - 3600000                      # 2025-12-31 23:00 UTC
    recs = mixed_records(300, partitions=2, seed=10)
    for i, r in enumerate(recs):                         # three hours, interleaved
        r["timestamp"] = base + (i // 7 % 3) * 3600000 + i
    sent = send(ck_producer(b), t, recs)
    # Killed twice on the way, then run to the end: resumes across the tree.
    for delay in (0.3, 0.6):
        p = subprocess.Popen(export_args(b, t, tmp_path, "--until-end", "--layout", "time",
                                         "--max-records", "5", "-q"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        time.sleep(delay)
        p.kill()
        p.communicate(timeout=30)
    run_export(b, t, tmp_path, "--until-end", "--layout", "time", "--max-records", "5")
    assert sorted(os.listdir(os.path.join(str(tmp_path), t))) == ["dt=2025-12-31", "dt=2026-01-01"]
    assert_exact(expected_of(sent), read_tree(tmp_path, t, layout="time"))


@pytest.fixture
def small_fs(tmp_path):
    d = str(tmp_path / "small")
    os.makedirs(d)
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=1m", "tmpfs", d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        pytest.skip("cannot mount a small tmpfs (needs root): %s" % r.stderr.strip())
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], capture_output=True)


def test_a_full_disk_stops_with_a_clear_error_and_a_rerun_after_freeing_completes(
        broker, small_fs):
    b, t = broker, topic_name("full")
    create_topic(b, t, partitions=1)
    recs = [{"partition": 0, "key": b"%d" % i, "value": bytes([i % 256]) * 4096}
            for i in range(600)]                          # 2.4 MB into 1 MiB
    sent = send(ck_producer(b), t, recs)
    p = run_export(b, t, small_fs, "--until-end", "--max-records", "100", expect=2)
    err = p.stderr.decode()
    assert "%s [0]" % t in err and "No space left on device" in err, err
    assert ".avro.tmp" in err, err                        # names the file
    r = subprocess.run(["mount", "-o", "remount,size=16m", small_fs], capture_output=True, text=True)
    assert r.returncode == 0, r.stderr
    run_export(b, t, small_fs, "--until-end", "--max-records", "100")
    assert_exact(expected_of(sent), read_tree(small_fs, t))


def test_two_exporters_in_a_group_until_end_both_exit_and_the_union_is_exact(broker, tmp_path):
    b, t = broker, topic_name("fleet-end")
    create_topic(b, t, partitions=4)
    sent = send(ck_producer(b), t, mixed_records(2000, partitions=4, seed=13))
    args = ["--group", "fe-" + t, "--until-end", "--max-records", "50"]
    ps = [subprocess.Popen(export_args(b, t, tmp_path, *args), stdout=subprocess.PIPE,
                           stderr=subprocess.PIPE) for _ in range(2)]
    outs = []
    try:
        for p in ps:
            out, err = p.communicate(timeout=90)
            assert p.returncode == 0, err.decode(errors="replace")
            outs.append(out.decode())
    finally:
        for p in ps:
            if p.poll() is None:
                p.kill()
                p.communicate()
    totals = [int(o.split("total: ")[1].split(" file(s), ")[1].split(" ")[0]) for o in outs]
    print("records per exporter: %s" % totals)
    assert sum(totals) == 2000, outs
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def test_jsonl_format_keeps_every_byte(broker, tmp_path):
    import json
    b, t = broker, topic_name("jsonl")
    create_topic(b, t, partitions=2)
    sent = send(ck_producer(b), t, mixed_records(200, partitions=2, seed=14))
    run_export(b, t, tmp_path, "--until-end", "--format", "jsonl", "--max-records", "30")

    def raw(v):                          # one code point per byte
        return None if v is None else v.encode("latin-1")
    got = {}
    for d, _, names in os.walk(os.path.join(str(tmp_path), t)):
        for n in sorted(names, key=lambda n: int(n.rsplit("+", 2)[1])):
            assert n.endswith(".jsonl"), n
            with open(os.path.join(d, n), encoding="ascii") as f:
                for line in f:
                    r = json.loads(line)
                    got.setdefault(r["partition_id"], []).append(
                        (r["offset"], raw(r["key"]), raw(r["value"]),
                         [(h["key"], raw(h["value"])) for h in r["headers"]]))
    assert_exact(expected_of(sent), got)


def test_a_header_key_holding_a_nul_byte_keeps_every_byte(broker, tmp_path):
    """Header keys are length-prefixed on the wire: one with a NUL byte inside
    (kafka-python sends it whole) comes back whole, in Avro and in JSON lines
    (libsluice's sl_header carries key_len)."""
    import json
    from support import kp_producer
    b, t = broker, topic_name("nulkey")
    create_topic(b, t, partitions=1)
    hs = [("a\x00b", b"v\x00"), ("\x00", b""), ("tail\x00", b"z")]
    p = kp_producer(b)
    p.send(t, value=b"x", headers=hs, partition=0).get(timeout=15)
    p.close()
    run_export(b, t, tmp_path / "avro", "--until-end")
    got = read_tree(tmp_path / "avro", t)
    assert got[0] == [(0, None, b"x", hs)], got
    run_export(b, t, tmp_path / "jsonl", "--until-end", "--format", "jsonl",
               "-X", "group.id=jsonl-" + t)    # its own group: it starts afresh
    (path,) = [os.path.join(d, n) for d, _, ns in os.walk(tmp_path / "jsonl") for n in ns
               if n.endswith(".jsonl")]
    with open(path, encoding="ascii") as f:
        r = json.loads(f.read())
    assert [(h["key"], h["value"].encode("latin-1")) for h in r["headers"]] == hs, r


def test_from_a_timestamp_or_the_end_on_the_first_run(broker, tmp_path):
    b, t = broker, topic_name("from")
    create_topic(b, t, partitions=1)
    base = 1767225600000
    recs = mixed_records(100, partitions=1, seed=15)
    for i, r in enumerate(recs):
        r["timestamp"] = base + i * 1000
    sent = send(ck_producer(b), t, recs)
    run_export(b, t, tmp_path / "ts", "--until-end", "--from", str(base + 60 * 1000))
    assert_exact(expected_of([(r, m) for r, m in sent if m.offset() >= 60]),
                 read_tree(tmp_path / "ts", t))
    # --from end: nothing now; what comes later is exported by the next run.
    out = run_export(b, t, tmp_path / "end", "--until-end", "--from", "end",
                     "-X", "group.id=end-" + t)
    assert "total: 0 file(s)" in out.stdout.decode()
    later = send(ck_producer(b), t, mixed_records(10, partitions=1, seed=16))
    run_export(b, t, tmp_path / "end", "--until-end", "-X", "group.id=end-" + t)
    assert_exact(expected_of(later), read_tree(tmp_path / "end", t))


def test_topic_regex_exports_every_matching_topic_and_no_other(broker, tmp_path):
    b, stem = broker, topic_name("rx")
    exp = {}
    prod = ck_producer(b)
    for name, parts in (("a", 2), ("b", 1), ("other", 1)):
        t = "%s-%s" % (stem, name) if name != "other" else "%s_other" % stem
        create_topic(b, t, partitions=parts)
        exp[t] = expected_of(send(prod, t, mixed_records(50, partitions=parts, seed=len(name))))
    p = subprocess.run([exporter(), "--bootstrap", b.bootstrap, "--topic-regex",
                        stem + "-(a|b)", "--to", str(tmp_path), "--until-end"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
    assert p.returncode == 0, p.stderr
    # (hidden: the partitions' locks, DIR/.sluice-export-locks, which readers skip)
    assert sorted(n for n in os.listdir(str(tmp_path)) if n[0] != ".") == [stem + "-a", stem + "-b"]
    for t in (stem + "-a", stem + "-b"):
        assert_exact(exp[t], read_tree(tmp_path, t))
    assert "total: 3 file(s), 100 record(s)" in p.stdout.decode(), p.stdout.decode()
    # the whole name must match: a prefix of a topic is not a match
    p = subprocess.run([exporter(), "--bootstrap", b.bootstrap, "--topic-regex", stem,
                        "--to", str(tmp_path), "--until-end"],
                       stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 2 and b"no topic matches" in p.stderr, (p.returncode, p.stderr)
    p = subprocess.run([exporter(), "--bootstrap", b.bootstrap, "--topic-regex", "(",
                        "--to", str(tmp_path)], stderr=subprocess.PIPE, timeout=60)
    assert p.returncode == 1 and b"not a valid extended regex" in p.stderr, p.stderr


def peak_rss_kib(argv, timeout):
    """Runs argv; (exit status, its peak resident size in KiB: the kernel's
    VmHWM at exit, as wait4's ru_maxrss reports it), bounded in time."""
    env = dict(os.environ)        # under ASan: no quarantine keeping freed memory
    env["ASAN_OPTIONS"] = ":".join(filter(None, [env.get("ASAN_OPTIONS"), "quarantine_size_mb=0"]))
    p = subprocess.Popen(argv, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, env=env)
    deadline = time.time() + timeout
    while True:
        pid, status, ru = os.wait4(p.pid, os.WNOHANG)
        if pid:
            p.returncode = os.waitstatus_to_exitcode(status)
            return p.returncode, ru.ru_maxrss, p.stderr.read()
        if time.time() > deadline:
            p.kill()
            pytest.fail("%s ran over %d s" % (argv[0], timeout))
        time.sleep(0.05)


def test_resident_memory_stays_bounded_by_the_fetch_sizes(broker, tmp_path):
    """Exporting 200 MiB of one partition, the exporter's peak RSS exceeds
    that of a 1 MiB export by no more than what its settings let it hold:
    the consumer's queue (queued.max.messages.kbytes) plus one fetch in
    flight (fetch.max.bytes), once more for the frame it decodes from, and
    the Avro block with its encoded copy (2 x 4 MiB)."""
    b = broker
    queued_kib, fetch_max = 8192, 4 << 20
    settings = ["-X", "queued.max.messages.kbytes=%d" % queued_kib,
                "-X", "fetch.max.bytes=%d" % fetch_max, "--max-bytes", str(64 << 20)]
    bound_kib = queued_kib + 2 * fetch_max // 1024 + 2 * 4096
    peaks = {}
    for mib in (1, 200):
        t = topic_name("exmem")
        create_topic(b, t, partitions=1)
        out = subprocess.run([os.path.join(TOOLS, "sluice-bench"), "-q", "-b", b.bootstrap,
                              "-t", t, "-n", str(mib * 1024), "-s", "1024", "-a", "1"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, timeout=120)
        assert out.returncode == 0, out.stderr
        rc, peaks[mib], err = peak_rss_kib(export_args(b, t, tmp_path / str(mib), "--until-end",
                                                       "-q", *settings), timeout=300)
        assert rc == 0, err
        n = sum(len([f for f in fs if f.endswith(".avro")])
                for _, _, fs in os.walk(str(tmp_path / str(mib))))
        assert n == (1 if mib == 1 else 4), n      # 200 MiB in files of 64 MiB
    print("peak RSS: 1 MiB export %d KiB, 200 MiB export %d KiB, bound +%d KiB"
          % (peaks[1], peaks[200], bound_kib))
    assert peaks[200] <= peaks[1] + bound_kib, peaks


def lock_pids(root, t, parts):
    out = {}
    for p in range(parts):
        try:
            with open(os.path.join(str(root), ".sluice-export-locks", "%s+%d.lock" % (t, p))) as f:
                out[p] = f.read().strip()
        except OSError:
            out[p] = None
    return out


def wait_locks(root, t, parts, pred, timeout=60):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        l = lock_pids(root, t, parts)
        if pred(l):
            return l
        time.sleep(0.1)
    raise AssertionError("locks: %s" % lock_pids(root, t, parts))


def test_final_commit_of_a_partition_given_back_is_not_stale(broker, tmp_path):
    """Member A exports both partitions and commits 100; member C joins,
    takes one, exports and commits 200, and stops: the partition goes back
    to A, which then stops too.  A's final commit must not send the group
    back to the 100 it committed while it owned the partition before (a run
    into a fresh tree would export 100..199 again)."""
    b, t = broker, topic_name("stale")
    create_topic(b, t, partitions=2)
    group = "stale-" + t
    a = start_member(b, t, tmp_path, group, 300)
    c = None
    try:
        sent = send(ck_producer(b), t, mixed_records(200, partitions=2, seed=3))
        assert wait_exported(tmp_path, t, 200) == 200
        c = start_member(b, t, tmp_path, group, 300)
        l = wait_locks(tmp_path, t, 2, lambda l: str(c.pid) in l.values() and str(a.pid) in l.values())
        print("split: %s (a=%d c=%d)" % (l, a.pid, c.pid))
        sent += send(ck_producer(b), t, mixed_records(200, partitions=2, seed=4))
        assert wait_exported(tmp_path, t, 400) == 400
        time.sleep(1)
        c.send_signal(signal.SIGTERM)
        _, cerr = c.communicate(timeout=30)
        assert c.returncode == 0, cerr.decode()
        l = wait_locks(tmp_path, t, 2, lambda l: all(v == str(a.pid) for v in l.values()))
        print("back: %s" % l)
        time.sleep(2)
        a.send_signal(signal.SIGTERM)
        _, aerr = a.communicate(timeout=30)
        assert a.returncode == 0, aerr.decode()
    finally:
        for p in (a, c):
            if p is not None and p.poll() is None:
                p.kill()
                p.communicate()
    k = ck_consumer(b, **{"group.id": group})
    try:
        got = k.committed([TopicPartition(t, p) for p in range(2)], timeout=10)
    finally:
        k.close()
    got = {tp.partition: tp.offset for tp in got}
    print("committed: %s" % got)
    assert got == {0: 200, 1: 200}, got
