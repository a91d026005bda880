"""A cluster link's truncation check by leader epoch (daemon/link/link_conn.c
C1, C5; issue 33) against a fake single-broker source (node 1) whose log and
leader epochs each test sets: it speaks Metadata v8, DescribeConfigs v2,
OffsetForLeaderEpoch v3 and Fetch v11.  What each test checks is what a user
sees: the mirror's batches, byte for byte, and mirror_topics.last_error."""
import socket
import struct
import threading
import time

import kafka_raw as kr
from kafka_raw import i8, i16, i32, i64, string
from support import ck_producer
from test_link import batches, sql_ok, until

TOPIC = "epochs"


def batch(base, epoch, value):
    b = kr.record_batch([(b"k", value, [], 0)], 1700000000000, leader_epoch=epoch)
    return i64(base) + b[8:]


class FakeSource:
    """One partition; log: (offset, leader epoch, batch bytes)."""

    def __init__(self):
        self.lock = threading.Lock()
        self.epoch = 1
        self.log = [(o, 1, batch(o, 1, b"old %d" % o)) for o in range(10)]
        self.hold_oe = 0.0
        self.start = 0
        self.seen = []
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(16)
        self.port = self.sock.getsockname()[1]
        self.stop = False
        threading.Thread(target=self.accept, daemon=True).start()

    def accept(self):
        self.sock.settimeout(0.2)
        while not self.stop:
            try:
                c, _ = self.sock.accept()
            except socket.timeout:
                continue
            threading.Thread(target=self.serve, args=(c,), daemon=True).start()

    def serve(self, c):
        c.settimeout(60)
        try:
            while not self.stop:
                hdr = self.recv(c, 4)
                n, = struct.unpack(">i", hdr)
                r = kr.Reader(self.recv(c, n))
                api, ver, corr = r.i16(), r.i16(), r.i32()
                r.string()
                body = self.answer(api, ver, r)
                payload = i32(corr) + body
                c.sendall(i32(len(payload)) + payload)
        except (OSError, ValueError, ConnectionError):
            pass
        finally:
            c.close()

    recv = staticmethod(kr.recv_exact)

    def end(self):
        return self.log[-1][0] + 1 if self.log else 0

    def epoch_end(self, want):
        if want == self.log[-1][1]:
            return want, self.end()
        floor = [e for _o, e, _b in self.log if e <= want]
        higher = [o for o, e, _b in self.log if e > want]
        if not higher:
            return -1, -1
        return (max(floor) if floor else want), higher[0]

    def answer(self, api, ver, r):
        if api == 3:                                     # Metadata v8
            with self.lock:
                ep = self.epoch
            topic = (i16(0) + string(TOPIC) + i8(0) +
                     kr.array([i16(0) + i32(0) + i32(1) + i32(ep) + kr.array([i32(1)]) +
                               kr.array([i32(1)]) + kr.array([])]) + i32(0))
            return (i32(0) + kr.array([i32(1) + string("127.0.0.1") + i32(self.port) +
                                       i16(-1)]) + i16(-1) + i32(1) + kr.array([topic]) +
                    i32(0))
        if api == 32:                                    # DescribeConfigs v2
            return i32(0) + kr.array([i16(0) + i16(-1) + i8(2) + string(TOPIC) +
                                      kr.array([])])
        if api == 23:                                    # OffsetForLeaderEpoch v3
            r.i32()
            r.i32()
            r.string()
            r.i32()
            _part, cur, want = r.i32(), r.i32(), r.i32()
            with self.lock:
                self.seen.append(("oe", cur, want))
                err = 74 if cur < self.epoch else 0
                le, eo = self.epoch_end(want)
                hold, self.hold_oe = self.hold_oe, 0.0
            time.sleep(hold)                             # answered late, computed now
            return i32(0) + kr.array([string(TOPIC) + kr.array([i16(err) + i32(0) + i32(le) +
                                                                 i64(eo)])])
        if api == 1:                                     # Fetch v11
            r.i32()
            wait = r.i32()
            r.i32(); r.i32(); r.i8(); r.i32(); r.i32()
            r.i32()
            r.string()
            r.i32()
            _part, cur, off = r.i32(), r.i32(), r.i64()
            with self.lock:
                self.seen.append(("fetch", cur, off))
                end = self.end()
                err = 74 if cur < self.epoch else 75 if cur > self.epoch else \
                    1 if off > end or off < self.start else 0
                start = self.start
                recs = b"".join(b for o, _e, b in self.log if o >= off) if not err else b""
            if not err and not recs:
                time.sleep(min(wait, 300) / 1000.0)
            part = (i32(0) + i16(err) + i64(end) + i64(end) + i64(start) + i32(-1) + i32(-1) +
                    i32(len(recs)) + recs)
            return i32(0) + i16(0) + i32(0) + kr.array([string(TOPIC) + kr.array([part])])
        raise ValueError("api %d" % api)


def mirror(dest, src):
    """A link to src and its mirror topic, waited for: the first 10."""
    sql_ok(dest, "INSERT INTO cluster_links (name, bootstrap_servers, config) VALUES "
           "('fake', '127.0.0.1:%d', 'metadata.max.age.ms=300\nreconnect.backoff.ms=100\n"
           "reconnect.backoff.max.ms=1000')" % src.port)
    sql_ok(dest, "INSERT INTO mirror_topics (topic, link) VALUES ('%s', 'fake')" % TOPIC)
    until(lambda: batches(dest, TOPIC, 0)[1] == 10, 30, "the first 10 mirrored")


def test_a_stale_offset_for_leader_epoch_answer_does_not_end_the_check(start_broker):
    """An answer asked under leader epoch 2 but arriving after Metadata moved
    the partition to epoch 3 (an unclean election that cut the source's log
    at 5) must not end the check: the mirror is cut at 5, not appended to."""
    src = FakeSource()
    dest = start_broker()
    mirror(dest, src)
    with src.lock:                 # a clean election: epoch 2, same log; its answer late
        src.hold_oe = 3.0
        src.epoch = 2
    until(lambda: any(s[0] == "oe" and s[1] == 2 for s in src.seen), 10, "the epoch-2 check")
    time.sleep(0.5)
    with src.lock:                 # meanwhile an unclean one: cut at 5, epoch 3's batches
        src.epoch = 3
        src.log = src.log[:5] + [(o, 3, batch(o, 3, b"new %d" % o)) for o in range(5, 15)]
    until(lambda: batches(dest, TOPIC, 0)[1] >= 15, 30, "the mirror at 15")
    time.sleep(1)
    got, hw = batches(dest, TOPIC, 0)
    src.stop = True
    assert [(g.base, g.raw) for g in got] == [(o, b) for o, _e, b in src.log] and hw == 15, \
        "mirror diverged from its source: %s; requests %s" % (
            [(g.base, g.raw[-6:]) for g in got], src.seen[-14:])


def test_a_source_with_no_epoch_as_high_as_the_mirrors(start_broker):
    """The source topic recreated (epoch 0, 3 messages) under a mirror at
    epoch 5 (10 messages): OffsetForLeaderEpoch answers UNDEFINED (-1, -1).
    The mirror keeps its 10, says why in last_error, and asks at most once
    per reconnect.backoff.max.ms (1 s here), not in a loop."""
    src = FakeSource()
    src.log = [(o, 5, batch(o, 5, b"old %d" % o)) for o in range(10)]
    src.epoch = 5
    dest = start_broker()
    mirror(dest, src)
    before = batches(dest, TOPIC, 0)[0]
    with src.lock:
        src.epoch = 0
        src.log = [(o, 0, batch(o, 0, b"new %d" % o)) for o in range(3)]
    until(lambda: sql_ok(dest, "SELECT last_error FROM mirror_topics")[0]["last_error"], 15,
          "the mirror's error")
    n0 = len(src.seen)
    time.sleep(4)
    n = len(src.seen) - n0
    st = sql_ok(dest, "SELECT state, last_error FROM mirror_topics")[0]
    got, hw = batches(dest, TOPIC, 0)
    src.stop = True
    assert "was the source topic recreated?" in st["last_error"], st
    assert "no leader epoch <= 5" in st["last_error"], st
    assert [(g.base, g.raw) for g in got] == [(g.base, g.raw) for g in before] and hw == 10
    assert n <= 12, "%d requests to the source in 4 s: %s" % (n, src.seen[-12:])


def _two_epochs_mirrored(start_broker):
    """A source with epochs 0 (offsets 0-4) and 3 (5-9), mirrored at a new
    destination: (source, destination)."""
    src = FakeSource()
    src.log = [(o, 0 if o < 5 else 3, batch(o, 0 if o < 5 else 3, b"m %d" % o))
               for o in range(10)]
    src.epoch = 3
    dest = start_broker()
    mirror(dest, src)
    return src, dest


def test_a_restart_of_the_destination_keeps_the_mirror(start_broker):
    """Source epochs 0 (offsets 0-4) and 3 (5-9), its log start then moved
    to 8 (retention).  The destination restarts: the mirror must still hold
    0-9 (nothing of it left the source's log by epoch), none of it cut and
    copied again."""
    src, dest = _two_epochs_mirrored(start_broker)
    before = batches(dest, TOPIC, 0)[0]
    with src.lock:
        src.start = 8
        src.log = src.log[8:]
    n0 = len(src.seen)
    dest.stop()
    dest.start()
    until(lambda: len(src.seen) > n0 + 3, 20, "requests after the restart")
    time.sleep(1)
    got, hw = batches(dest, TOPIC, 0)
    cut = [ln[-200:] for ln in dest.log_text().splitlines() if "cut from" in ln or "restarts" in ln]
    src.stop = True
    assert [(g.base, g.raw) for g in got] == [(g.base, g.raw) for g in before] and hw == 10, \
        "mirror after restart: %s hw %d; %s; requests %s" % ([g.base for g in got], hw, cut,
                                                            src.seen[n0:n0 + 6])
    assert not cut, "%s; requests %s" % (cut, src.seen[n0:n0 + 6])     # nothing copied again


def test_a_restart_of_the_destination_cuts_nothing(start_broker):
    """Every source batch at leader epoch 2 (a source partition whose
    leader changed before its first write): a destination restart must not
    cut the mirror (its log is the source's)."""
    src = FakeSource()
    src.log = [(o, 2, batch(o, 2, b"m %d" % o)) for o in range(10)]
    src.epoch = 2
    dest = start_broker()
    mirror(dest, src)
    n0 = len(src.seen)
    dest.stop()
    dest.start()
    until(lambda: len(src.seen) > n0 + 3, 20, "requests after the restart")
    time.sleep(1)
    cut = [ln[-170:] for ln in dest.log_text().splitlines() if "cut from" in ln]
    src.stop = True
    assert not cut, "%s; requests %s" % (cut, src.seen[n0:n0 + 4])


def _epochs(dest):
    """(base offset, PartitionLeaderEpoch) of every batch of the mirror."""
    got, hw = batches(dest, TOPIC, 0)
    return [(g.base, struct.unpack(">i", g.raw[12:16])[0]) for g in got], hw


def _end_for(dest, epoch):
    """OffsetForLeaderEpoch v3 as a consumer asks it: (epoch, end offset)."""
    got = kr.offset_for_leader_epoch(dest.port, 3, [(TOPIC, [(0, -1, epoch)])])
    err, le, end = got[(TOPIC, 0)]
    assert err == 0, err
    return le, end


def test_a_promoted_mirror_appends_under_a_fresh_epoch_standalone(start_broker):
    """link.c K14 standalone: source epochs 0 (offsets 0-4) and 3 (5-9).
    After the promotion the local batches carry leader epoch 4 (above the
    source's), and the epoch history still answers the source's epochs with
    the source's end offsets (a consumer's truncation check after a
    failover), before and after a restart of the destination."""
    src, dest = _two_epochs_mirrored(start_broker)
    sql_ok(dest, "UPDATE mirror_topics SET state = 'promoted' WHERE topic = '%s'" % TOPIC)
    until(lambda: sql_ok(dest, "SELECT state FROM mirror_topics")[0]["state"] == "promoted",
          20, "promoted")
    src.stop = True
    source = [(o, e) for o, e, _b in src.log]
    p = ck_producer(dest, **{"linger.ms": 0})

    def produce(values):
        for v in values:
            p.produce(TOPIC, value=v, partition=0)
            assert p.flush(15) == 0

    def check(hw):
        got, end = _epochs(dest)
        assert end == hw and got[:10] == source, got
        assert [e for _o, e in got[10:]] == [4] * (hw - 10), got
        assert _end_for(dest, 0) == (0, 5)
        assert _end_for(dest, 2) == (0, 5)
        assert _end_for(dest, 3) == (3, 10)
        assert _end_for(dest, 4) == (4, hw)

    produce([b"local %d" % i for i in range(3)])
    check(13)
    dest.stop()
    dest.start()
    check(13)
    p = ck_producer(dest, **{"linger.ms": 0})
    produce([b"later %d" % i for i in range(2)])
    check(15)
