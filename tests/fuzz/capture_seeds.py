#!/usr/bin/python3
"""Regenerates the seed corpora in tests/fuzz/corpus/ from real traffic.

    /usr/bin/python3 tests/fuzz/capture_seeds.py BUILD/sluiced

Starts sluiced on a temporary directory behind a small TCP proxy that
writes every request frame (length prefix stripped) to
corpus/fuzz_d_request/, drives it with kcat, confluent-kafka (producer,
consumer group with commits, admin) and kafka-python, then takes:
  - fuzz_kp_batch: each RecordBatch found in the captured Produce frames
    (every codec the clients send: none, gzip, snappy, lz4, zstd);
  - fuzz_seg_recover: the partition .log files the broker wrote, behind
    the harness's 3-byte prefix (see fuzz_seg_recover.c), plus torn and
    two-segment variants;
  - fuzz_d_config: examples/*.properties and the test harness's config;
  - fuzz_sql_authorizer: operator statements from the admin docs/tests.
With --txn it drives only a confluent-kafka transactional producer
(commits, aborts, offsets in a transaction) and takes:
  - fuzz_txn_records: every control batch (marker) of the data partition
    and every __transaction_state record, in the harness's layouts (see
    fuzz_txn_records.c);
  - fuzz_seg_recover: each segment holding an aborted transaction, .log
    and .txnindex behind the harness's prefix with bit 5 (see
    fuzz_seg_recover.c).
Files are named by content hash, so rerunning only adds what is new.
"""
import hashlib
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
CORPUS = os.path.join(HERE, "corpus")


def save(target, data):
    d = os.path.join(CORPUS, target)
    os.makedirs(d, exist_ok=True)
    name = hashlib.sha1(data).hexdigest()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def free_port():
    s = socket.socket()
    s.bind(("127.0.0.1", 0))
    p = s.getsockname()[1]
    s.close()
    return p


class Proxy:
    """Forwards client→broker, recording each request frame."""

    def __init__(self, upstream):
        self.upstream = upstream
        self.frames = []
        self.lock = threading.Lock()
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)
        self.port = self.sock.getsockname()[1]
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        while True:
            try:
                c, _ = self.sock.accept()
            except OSError:
                return
            u = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self.up, args=(c, u), daemon=True).start()
            threading.Thread(target=self.down, args=(u, c), daemon=True).start()

    def up(self, c, u):
        buf = b""
        try:
            while True:
                d = c.recv(65536)
                if not d:
                    break
                u.sendall(d)
                buf += d
                while len(buf) >= 4:
                    (n,) = struct.unpack(">i", buf[:4])
                    if len(buf) < 4 + n:
                        break
                    with self.lock:
                        self.frames.append(buf[4:4 + n])
                    buf = buf[4 + n:]
        except OSError:
            pass
        for s in (u, c):
            try:
                s.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass

    def down(self, u, c):
        try:
            while True:
                d = u.recv(65536)
                if not d:
                    break
                c.sendall(d)
        except OSError:
            pass


def drive(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, ConfigResource, NewPartitions, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    fs = a.create_topics([NewTopic("seed-a", 3, 1, config={"retention.ms": "3600000"}),
                          NewTopic("seed-b", 1, 1)])
    for f in fs.values():
        f.result(15)
    a.create_partitions([NewPartitions("seed-b", 2)])["seed-b"].result(15)
    r = ConfigResource(ConfigResource.Type.TOPIC, "seed-a")
    a.describe_configs([r])[r].result(15)
    r.set_config("cleanup.policy", "delete")
    a.alter_configs([r])[r].result(15)
    for codec in ("none", "gzip", "snappy", "lz4", "zstd"):
        p = Producer({"bootstrap.servers": bootstrap, "compression.codec": codec,
                      "linger.ms": 5})
        for i in range(30):
            p.produce("seed-a", key=b"k%d" % i, value=(b"value-%d-" % i) * (i % 7 + 1),
                      headers=[("h", b"v%d" % i)] if i % 3 == 0 else None)
        p.flush(15)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "seed-group",
                  "auto.offset.reset": "earliest", "enable.auto.commit": False})
    c.subscribe(["seed-a"])
    got = 0
    deadline = time.time() + 20
    while got < 150 and time.time() < deadline:
        m = c.poll(0.5)
        if m is not None and not m.error():
            got += 1
            if got % 20 == 0:
                c.commit(m, asynchronous=False)
    c.committed([TopicPartition("seed-a", 0)], timeout=10)
    c.offsets_for_times([TopicPartition("seed-a", 0, 0)], timeout=10)
    c.close()
    try:
        a.list_groups(timeout=10)
    except Exception:            # older/newer client API: the seed is optional
        pass
    a.delete_topics(["seed-b"])["seed-b"].result(15)
    # kcat: metadata, produce, consume from a group, offsets query
    host = bootstrap
    subprocess.run(["kcat", "-b", host, "-L"], capture_output=True, timeout=20)
    subprocess.run(["kcat", "-b", host, "-P", "-t", "seed-k", "-z", "lz4"],
                   input=b"one\ntwo\nthree\n", capture_output=True, timeout=20)
    subprocess.run(["kcat", "-b", host, "-C", "-t", "seed-k", "-e", "-o", "beginning"],
                   capture_output=True, timeout=20)
    subprocess.run(["kcat", "-b", host, "-G", "kcat-group", "-e", "seed-k"],
                   capture_output=True, timeout=30)
    subprocess.run(["kcat", "-b", host, "-Q", "-t", "seed-k:0:-1"], capture_output=True, timeout=20)
    # kafka-python: older API versions and its own encodings
    import kafka
    kp = kafka.KafkaProducer(bootstrap_servers=host, compression_type="gzip")
    for i in range(10):
        kp.send("seed-p", key=b"k", value=b"kafka-python %d" % i)
    kp.flush(15)
    kp.close()
    kc = kafka.KafkaConsumer("seed-p", bootstrap_servers=host, group_id="kp-group",
                             auto_offset_reset="earliest", consumer_timeout_ms=3000)
    for _ in kc:
        pass
    kc.commit()
    kc.close()


def drive_txn(bootstrap):
    from confluent_kafka import Consumer, Producer, TopicPartition
    from confluent_kafka.admin import AdminClient, NewTopic
    a = AdminClient({"bootstrap.servers": bootstrap})
    for f in a.create_topics([NewTopic("seed-t", 1, 1)]).values():
        f.result(15)
    p = Producer({"bootstrap.servers": bootstrap, "transactional.id": "seed-txn",
                  "linger.ms": 5})
    p.init_transactions(30)
    c = Consumer({"bootstrap.servers": bootstrap, "group.id": "seed-txn-group",
                  "enable.auto.commit": False})
    for rnd in range(6):
        p.begin_transaction()
        for i in range(5):
            p.produce("seed-t", key=b"k%d" % i, value=b"round-%d-%d" % (rnd, i), partition=0)
        if rnd % 3 == 1:
            p.send_offsets_to_transaction([TopicPartition("seed-t", 0, rnd)],
                                          c.consumer_group_metadata(), 30)
        if rnd % 2:
            p.abort_transaction(30)
        else:
            p.commit_transaction(30)
    c.close()


def log_batches(raw):
    """(batch bytes, attributes, records area) of each whole batch in a .log."""
    pos = 0
    while pos + 61 <= len(raw):
        length = struct.unpack_from(">i", raw, pos + 8)[0]
        end = pos + 12 + length
        if length < 49 or end > len(raw):
            return
        yield raw[pos:end], struct.unpack_from(">h", raw, pos + 21)[0], raw[pos + 61:end]
        pos = end


def varint(b, pos):
    shift = v = 0
    while True:
        x = b[pos]
        pos += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return (v >> 1) ^ -(v & 1), pos


def records(area):
    """(key, value or None) of each record of an uncompressed batch."""
    pos = 0
    while pos < len(area):
        length, pos = varint(area, pos)
        end = pos + length
        q = pos + 1                                   # Attributes
        _, q = varint(area, q)                        # TimestampDelta
        _, q = varint(area, q)                        # OffsetDelta
        klen, q = varint(area, q)
        key = area[q:q + max(klen, 0)]
        q += max(klen, 0)
        vlen, q = varint(area, q)
        yield key, (area[q:q + vlen] if vlen >= 0 else None)
        pos = end


def save_txn(data):
    n = 0
    for root, _, files in os.walk(data):
        part = os.path.basename(root)
        for name in sorted(files):
            if not name.endswith(".log"):
                continue
            path = os.path.join(root, name)
            with open(path, "rb") as fh:
                raw = fh.read()
            for batch, attrs, area in log_batches(raw):
                if part.startswith("seed-t-") and attrs & 0x20:
                    save("fuzz_txn_records", b"\x00" + batch)
                    n += 1
                elif part.startswith("__transaction_state-") and not attrs & 0x07:
                    for key, value in records(area):
                        save("fuzz_txn_records", b"\x01" + bytes([value is None]) +
                             struct.pack(">H", len(key)) + key + (value or b""))
                        n += 1
            idx = path[:-len(".log")] + ".txnindex"
            if part.startswith("seed-t-") and os.path.exists(idx) and len(raw) < 60000:
                with open(idx, "rb") as fh:
                    tx = fh.read()
                save("fuzz_seg_recover", bytes([32, len(raw) >> 8, len(raw) & 0xFF]) + raw + tx)
                save("fuzz_seg_recover", bytes([32, len(raw) >> 8, len(raw) & 0xFF]) + raw +
                     tx[:len(tx) - 5])                                # a torn entry
                n += 2
    return n


def batches_in_produce(frame):
    """RecordBatches of a Produce v3+ frame, by walking its fields."""
    out = []
    try:
        key, ver = struct.unpack(">hh", frame[:4])
        if key != 0 or ver < 3:
            return out
        pos = 8
        (n,) = struct.unpack(">h", frame[pos:pos + 2]); pos += 2 + max(n, 0)   # client id
        (n,) = struct.unpack(">h", frame[pos:pos + 2]); pos += 2 + max(n, 0)   # transactional id
        pos += 6                                                              # acks, timeout
        (nt,) = struct.unpack(">i", frame[pos:pos + 4]); pos += 4
        for _ in range(nt):
            (n,) = struct.unpack(">h", frame[pos:pos + 2]); pos += 2 + n
            (np_,) = struct.unpack(">i", frame[pos:pos + 4]); pos += 4
            for _ in range(np_):
                pos += 4
                (n,) = struct.unpack(">i", frame[pos:pos + 4]); pos += 4
                rec = frame[pos:pos + max(n, 0)]; pos += max(n, 0)
                at = 0
                while at + 12 <= len(rec):
                    (bl,) = struct.unpack(">i", rec[at + 8:at + 12])
                    out.append(rec[at:at + 12 + bl])
                    at += 12 + bl
    except struct.error:
        pass
    return out


def main():
    args = [a for a in sys.argv[1:] if a != "--txn"]
    sluiced = os.path.abspath(args[0] if args else os.path.join(REPO, "build", "sluiced"))
    work = tempfile.mkdtemp(prefix="sluice-seeds-")
    port = free_port()
    proxy = Proxy(port)
    bootstrap = "127.0.0.1:%d" % proxy.port
    data = os.path.join(work, "data")
    proc = subprocess.Popen([sluiced, "--override", "listeners=PLAINTEXT://127.0.0.1:%d" % port,
                             "--override", "advertised.listeners=PLAINTEXT://%s" % bootstrap,
                             "--override", "log.dirs=" + data,
                             "--override", "group.initial.rebalance.delay.ms=0",
                             "--override", "log.segment.bytes=4096"],
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        for _ in range(100):
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                time.sleep(0.05)
        if "--txn" in sys.argv:
            drive_txn(bootstrap)
        else:
            drive(bootstrap)
    finally:
        proc.terminate()
        proc.wait(10)
    if "--txn" in sys.argv:
        print("captured %d transaction seeds" % save_txn(data))
        shutil.rmtree(work, ignore_errors=True)
        return
    with proxy.lock:
        frames = list(proxy.frames)
    seen = set()
    for f in frames:
        k = (f[:4], len(f) // 64)     # a few of each API/version/size class
        if k in seen:
            continue
        seen.add(k)
        save("fuzz_d_request", f)
        save("fuzz_kp_request", f)
    nb = 0
    for f in frames:
        for b in batches_in_produce(f):
            save("fuzz_kp_batch", b)
            nb += 1
    nlog = 0
    for root, _, files in os.walk(data):
        for name in sorted(files):
            if not name.endswith(".log"):
                continue
            with open(os.path.join(root, name), "rb") as fh:
                raw = fh.read()[:16384]
            if not raw:
                continue
            save("fuzz_seg_recover", b"\x00\x00\x00" + raw)
            save("fuzz_seg_recover", b"\x00\x00\x00" + raw[:len(raw) - 7])     # torn tail
            half = len(raw) // 2
            save("fuzz_seg_recover", bytes([3, half >> 8, half & 0xFF]) + raw + raw)
            nlog += 1
    for p in [os.path.join(REPO, "examples", n) for n in os.listdir(os.path.join(REPO, "examples"))
              if n.endswith(".properties")]:
        with open(p, "rb") as fh:
            save("fuzz_d_config", fh.read())
    print("captured %d frames (%d kept), %d batches, %d log files" %
          (len(frames), len(seen), nb, nlog))
    shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    main()
