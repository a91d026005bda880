"""Disk full (issue 8): with log.dirs on a 4 MiB tmpfs, produces fill it;
the partition then answers KAFKA_STORAGE_ERROR, every acknowledged message
reads back intact, metadata writes that hit the full disk (SQLite lives in
the same directory) get an error instead of a crash, and once space is
freed writes resume by themselves at the next offset; a restart keeps it
all.  Needs root for mount(8); skipped with the reason otherwise."""
import os
import shutil
import signal
import subprocess
import tempfile
import time

import pytest

import kafka_raw as kr
from support import assert_serves, consume

KAFKA_STORAGE_ERROR = 56


@pytest.fixture
def small_fs():
    d = tempfile.mkdtemp(prefix="sluice-full-")
    r = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=4m", "tmpfs", d],
                       capture_output=True, text=True)
    if r.returncode != 0:
        os.rmdir(d)
        pytest.skip("cannot mount a small tmpfs (needs root): %s" % r.stderr.strip())
    try:
        yield d
    finally:
        subprocess.run(["umount", "-l", d], capture_output=True)
        shutil.rmtree(d, ignore_errors=True)


def produce_raw(port, topic, value, ts):
    batch = kr.record_batch([(b"k", value, [], 0)], ts)
    with kr.Conn(port) as c:
        (res,) = kr.parse_produce_v3(c.request(kr.API_PRODUCE, 3,
                                               kr.produce_v3_body(topic, 0, batch, acks=1)))
    return res[2], res[3]


def fetch_all(port, topic, end):
    """{offset: value} read with raw Fetch v4, checking each batch's CRC."""
    return {o: v for o, _k, v, _h in kr.fetch_records(port, topic, 0, end, max_bytes=1 << 20)}


def test_full_disk_is_storage_error_then_writes_resume_when_space_is_freed(start_broker, small_fs):
    # Ballast that the test frees later, as an operator would.
    ballast = os.path.join(small_fs, "ballast")
    with open(ballast, "wb") as f:
        f.write(b"\0" * (1024 * 1024))
    data = os.path.join(small_fs, "data")
    b = start_broker({"log.dirs": data, "log.flush.interval.messages": "1"})
    b.data_dir = data
    t = "full"
    with kr.Conn(b.port) as c:
        kr.parse_metadata(c.request(kr.API_METADATA, 4, kr.metadata_body(4, [t])), 4)
    time.sleep(0.2)
    ts = int(time.time() * 1000)
    acked = {}
    value_n = 0
    errors = []
    for i in range(400):                      # 400 x 16 KiB > 4 MiB
        v = (b"%06d-" % i) * 2300             # ~16 KiB, mostly unique
        err, off = produce_raw(b.port, t, v, ts + i)
        if err == 0:
            acked[off] = v
            value_n = i + 1
        else:
            errors.append(err)
            if len(errors) >= 3:
                break
    print("disk full after %d acknowledged messages; then errors %s" % (len(acked), errors))
    assert acked, "nothing could be written at all"
    assert errors and set(errors) == {KAFKA_STORAGE_ERROR}, errors
    b.assert_alive()
    # reads of what was written still work, byte for byte
    end = max(acked) + 1
    assert fetch_all(b.port, t, end) == acked
    # metadata writes on the full disk: an error (or success), never a crash
    with kr.Conn(b.port) as c:
        kr.parse_metadata(c.request(kr.API_METADATA, 4, kr.metadata_body(4, ["other-topic"])), 4)
    b.assert_alive()
    # free space; the next produce after the retry backoff goes in at the end
    os.unlink(ballast)
    time.sleep(1.2)
    err, off = produce_raw(b.port, t, b"after the disk was freed", ts)
    assert (err, off) == (0, end), "after freeing space: error %d at offset %d (end %d)" % (err, off, end)
    acked[off] = b"after the disk was freed"
    assert "takes writes again" in b.log_text()
    # and all of it survives a restart
    assert b.restart(signal.SIGTERM) in (0, 1)
    assert fetch_all(b.port, t, off + 1) == acked
    got = consume(b, t, [0], len(acked), timeout=30)
    assert {m.offset(): m.value() for m in got} == acked
    b.assert_alive()
