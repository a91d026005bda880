"""sluice-export (issue 32): one writer per partition.  Two runs that overlap
(a slow cron run and the next one) and a group member paused long enough to
lose its partition then resumed must not duplicate or lose a record: the
partition's lock (DIR/.sluice-export-locks/) keeps the second writer out
until the first lets go."""
import os
import random
import signal
import subprocess
import time

import kafka_raw as kr

from test_export import (export_args, mixed_records, send, expected_of, read_tree,
                         assert_exact, run_export)
from support import ck_producer, create_topic, topic_name


def test_a_run_overlapping_a_running_one_exits_2_naming_the_partition_and_the_holder(
        broker, tmp_path):
    b, t = broker, topic_name("ovl")
    create_topic(b, t, partitions=1)
    sent = []
    for s in range(4):
        sent += send(ck_producer(b), t, mixed_records(3000, partitions=1, seed=80 + s))
    args = ("--until-end", "--max-records", "500", "-q")
    a = subprocess.Popen(export_args(b, t, tmp_path, *args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    pdir = os.path.join(str(tmp_path), t, "partition=0")
    deadline = time.monotonic() + 30
    while not (os.path.isdir(pdir) and os.listdir(pdir)) and time.monotonic() < deadline:
        time.sleep(0.001)
    a.send_signal(signal.SIGSTOP)            # the previous cron run, slow, mid-file
    try:
        sent += send(ck_producer(b), t, mixed_records(100, partitions=1, seed=90))
        c = subprocess.run(export_args(b, t, tmp_path, *args), capture_output=True, timeout=60)
        err = c.stderr.decode()
        assert c.returncode == 2, err
        assert "%s [0]" % t in err and "pid %d" % a.pid in err, err
    finally:
        a.send_signal(signal.SIGCONT)
    out, err = a.communicate(timeout=120)
    assert a.returncode == 0, err.decode()
    # The next run exports what arrived meanwhile; all exactly once.
    p = subprocess.run(export_args(b, t, tmp_path, *args), capture_output=True, timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def test_a_paused_group_member_that_lost_its_partition_does_not_duplicate_or_lose(
        broker, tmp_path):
    b, t = broker, topic_name("zomb")
    create_topic(b, t, partitions=1)
    group = "z-" + t
    args = ["--group", group, "--max-records", "100", "--max-interval", "100000",
            "-X", "session.timeout.ms=6000", "-X", "heartbeat.interval.ms=500", "-q"]
    a = subprocess.Popen(export_args(b, t, tmp_path, *args), stdout=subprocess.PIPE,
                         stderr=subprocess.PIPE)
    c = None
    try:
        time.sleep(4)
        sent = send(ck_producer(b), t, mixed_records(250, partitions=1, seed=60))
        time.sleep(3)                    # A: 2 files and 50 records in an open .tmp
        a.send_signal(signal.SIGSTOP)
        c = subprocess.Popen(export_args(b, t, tmp_path, *args), stdout=subprocess.PIPE,
                             stderr=subprocess.PIPE)
        time.sleep(12)                   # A's session expires, C is assigned, waits
        sent += send(ck_producer(b), t, mixed_records(30, partitions=1, seed=61))
        time.sleep(2)
        a.send_signal(signal.SIGCONT)    # A learns it lost the partition, lets go
        time.sleep(10)
    finally:
        a.send_signal(signal.SIGCONT)
        for p in (a, c):
            if p:
                p.send_signal(signal.SIGTERM)
        for p in (a, c):
            if p:
                out, err = p.communicate(timeout=60)
                print(p.returncode, err.decode()[-800:])
    assert a.returncode == 0 and c.returncode == 0
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def _export_while_the_broker_dies(b, t, tmp_path, *extra):
    create_topic(b, t, partitions=2)
    for s in range(3):
        send(ck_producer(b), t, mixed_records(3000, partitions=2, seed=95 + s))
    p = subprocess.Popen(export_args(b, t, tmp_path, "--until-end", "--max-records", "50",
                                     "-X", "max.partition.fetch.bytes=2048",
                                     "-X", "fetch.max.bytes=2048",
                                     "-X", "queued.max.messages.kbytes=1", *extra),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pdir = os.path.join(str(tmp_path), t, "partition=0")
    deadline = time.monotonic() + 30
    while not (os.path.isdir(pdir) and os.listdir(pdir)) and time.monotonic() < deadline:
        time.sleep(0.001)
    b.kill()
    return p


def test_until_end_with_the_broker_gone_fails_after_the_stall_timeout(broker, tmp_path):
    t = topic_name("gone")
    p = _export_while_the_broker_dies(broker, t, tmp_path, "--stall-timeout", "4000",
                                      "-X", "request.timeout.ms=40000")
    t0 = time.monotonic()
    out, err = p.communicate(timeout=60)
    err = err.decode()
    assert p.returncode == 2, err[-2000:]
    took = time.monotonic() - t0
    print("exit 2 after %.1f s" % took)
    # the stall (4 s), not also a commit still out waited for up to
    # request.timeout.ms (40 s): the files are the authority on restart
    assert took < 20, "exit %.1f s after the broker died" % took
    assert "no progress for 4000 ms" in err and "%s [0]" % t in err, err[-2000:]


def test_sigterm_before_the_end_of_until_end_exits_3(broker, tmp_path):
    b, t = broker, topic_name("term")
    create_topic(b, t, partitions=1)
    sent = []
    for s in range(3):
        sent += send(ck_producer(b), t, mixed_records(3000, partitions=1, seed=95 + s))
    p = subprocess.Popen(export_args(b, t, tmp_path, "--until-end", "--max-records", "50",
                                     "-X", "max.partition.fetch.bytes=2048",
                                     "-X", "fetch.max.bytes=2048",
                                     "-X", "queued.max.messages.kbytes=1"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    pdir = os.path.join(str(tmp_path), t, "partition=0")
    deadline = time.monotonic() + 30
    while not (os.path.isdir(pdir) and os.listdir(pdir)) and time.monotonic() < deadline:
        time.sleep(0.001)
    p.send_signal(signal.SIGTERM)
    out, err = p.communicate(timeout=60)
    assert p.returncode == 3, err.decode()[-2000:]
    assert "stopped by a signal before the end" in err.decode()
    # what was written is complete; a rerun goes on to the end, exactly
    p = subprocess.run(export_args(b, t, tmp_path, "--until-end", "-q"), capture_output=True,
                       timeout=120)
    assert p.returncode == 0, p.stderr.decode()
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def test_a_corrupt_batch_stops_the_export_naming_the_partition_and_offset(broker, tmp_path):
    import glob
    import struct
    b, t = broker, topic_name("bad")
    create_topic(b, t, partitions=1)
    for i in range(3):                           # three batches of 5 records
        batch = kr.record_batch([(None, b"v%d-%d" % (i, j), [], 0) for j in range(5)],
                                int(time.time() * 1000))
        assert kr.produce_batch(b.port, t, 0, batch) == (0, 5 * i, None)
    (log,) = glob.glob(os.path.join(b.partition_dir(t), "*.log"))
    with open(log, "r+b") as f:                  # the second batch claims 1000 records
        data = f.read()
        pos = 12 + struct.unpack(">i", data[8:12])[0]
        assert struct.unpack(">q", data[pos:pos + 8])[0] == 5
        f.seek(pos + 57)
        f.write(struct.pack(">i", 1000))
    p = subprocess.run(export_args(b, t, tmp_path, "--until-end"), capture_output=True,
                       timeout=60)
    err = p.stderr.decode()
    assert p.returncode == 2, err
    assert "%s [0]: offset 5:" % t in err, err


def test_a_completed_file_refused_its_name_stops_the_run_and_the_files_behind_it(
        broker, tmp_path):
    """sluice-export.c X3: the finisher renames a worker's completed files
    while the worker writes the next ones.  A file already holding one of
    the offsets (a stray copy put into the tree) refuses the rename of
    40..59; the files read after it (60..79, 80..99, queued or open) are
    given up: exit 2 naming the partition and the temporary file, no .tmp
    left.  Once the stray file is gone a rerun completes exactly."""
    b, t = broker, topic_name("refused")
    create_topic(b, t, partitions=1)
    sent = send(ck_producer(b), t, mixed_records(20, partitions=1, seed=31))
    pdir = os.path.join(str(tmp_path), t, "partition=0")
    first = "%s+0+0+19.avro" % t
    p = subprocess.Popen(export_args(b, t, tmp_path, "--max-records", "20"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        deadline = time.monotonic() + 30
        while not (os.path.isdir(pdir) and first in os.listdir(pdir)):
            assert time.monotonic() < deadline and p.poll() is None, "no first file"
            time.sleep(0.01)
        stray = os.path.join(pdir, "%s+0+50+50.avro" % t)
        with open(stray, "wb") as f:
            f.write(b"a stray copy")
        sent += send(ck_producer(b), t, mixed_records(80, partitions=1, seed=32))
        out, err = p.communicate(timeout=30)
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    err = err.decode()
    assert p.returncode == 2, err[-2000:]
    assert "%s [0]" % t in err and "offsets 40..59 are in a file there already" in err, err
    assert ".%s+0+40." % t in err and ".avro.tmp not renamed" in err, err  # names the file
    names = os.listdir(pdir)
    print("left after the failure: %s" % sorted(names))
    assert not [n for n in names if n.endswith(".tmp")], names
    assert "%s+0+60+79.avro" % t not in names and "%s+0+80+99.avro" % t not in names, names
    os.unlink(stray)
    r = subprocess.run(export_args(b, t, tmp_path, "--until-end", "--max-records", "20", "-q"),
                       capture_output=True, timeout=120)
    assert r.returncode == 0, r.stderr.decode()
    assert_exact(expected_of(sent), read_tree(tmp_path, t))


def test_sigkill_with_a_full_finisher_queue_then_resume_is_exact(broker, tmp_path):
    """Files of 1..3 records keep the finisher's queue (sluice-export.c X1-X5)
    full: SIGKILLs at random moments land in its rename loop as often as in
    the worker; after them one resuming run is exact."""
    b, t = broker, topic_name("killq")
    create_topic(b, t, partitions=2)
    rnd = random.Random(11)
    sent = []
    for r in range(8):
        sent += send(ck_producer(b), t, mixed_records(300, partitions=2, seed=200 + r))
        p = subprocess.Popen(export_args(b, t, tmp_path, "--until-end", "--max-records",
                                         str(rnd.randint(1, 3)), "-q"),
                             stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        time.sleep(rnd.uniform(0.2, 1.5))
        if p.poll() is None:
            p.kill()
        _, err = p.communicate(timeout=30)
        assert p.returncode in (0, -signal.SIGKILL), err.decode(errors="replace")
    run_export(b, t, tmp_path, "--until-end", "--max-records", "2")
    assert_exact(expected_of(sent), read_tree(tmp_path, t))
