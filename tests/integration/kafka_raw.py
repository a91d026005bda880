"""Raw Kafka frames over a plain socket, for the tests that must say exactly
what goes on the wire (bad input, pipelining, long-poll timing).

The classic encodings, and the flexible ones: compact strings, bytes and
arrays, tagged-field sections, request header v2 and response header v1,
picked per version (the v* helpers, Conn.request_v) or always compact (the
c* helpers, tags, Conn.request_flex).
Every read has a deadline: a test never hangs on a silent broker.
"""
import collections
import os
import socket
import struct
import time

API_PRODUCE = 0
API_FETCH = 1
API_LIST_OFFSETS = 2
API_METADATA = 3
API_API_VERSIONS = 18
API_OFFSET_FOR_LEADER_EPOCH = 23


class Closed(Exception):
    """The broker closed (or reset) the connection."""


class Timeout(Exception):
    """Nothing (or not enough) arrived before the deadline."""


# ---- encoding ---------------------------------------------------------------
def recv_exact(sock, n):
    """Exactly n bytes from a blocking socket; ConnectionError if it closes
    first (a fake broker's or proxy's reads)."""
    out = b""
    while len(out) < n:
        got = sock.recv(n - len(out))
        if not got:
            raise ConnectionError("closed")
        out += got
    return out


def i8(v):
    return struct.pack(">b", v)


def i16(v):
    return struct.pack(">h", v)


def i32(v):
    return struct.pack(">i", v)


def i64(v):
    return struct.pack(">q", v)


def string(s):
    """STRING / NULLABLE_STRING (None -> -1)."""
    if s is None:
        return i16(-1)
    b = s.encode() if isinstance(s, str) else s
    return i16(len(b)) + b


def nbytes(b):
    """BYTES / NULLABLE_BYTES (None -> -1)."""
    if b is None:
        return i32(-1)
    return i32(len(b)) + b


def array(items, enc=lambda x: x):
    """ARRAY of already-encoded items (or encoded with enc); None -> -1."""
    if items is None:
        return i32(-1)
    return i32(len(items)) + b"".join(enc(x) for x in items)


def uvarint(n):
    out = bytearray()
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out.append(b | 0x80)
        else:
            out.append(b)
            return bytes(out)


def varint(n):
    return uvarint((n << 1) ^ (n >> 63))


# Version-aware forms: flex=True writes the compact encoding (protocol/README.md §4).
def vstring(s, flex):
    """STRING / NULLABLE_STRING, classic or COMPACT (None -> null)."""
    if not flex:
        return string(s)
    if s is None:
        return uvarint(0)
    b = s.encode() if isinstance(s, str) else s
    return uvarint(len(b) + 1) + b


def vbytes(b, flex):
    if not flex:
        return nbytes(b)
    if b is None:
        return uvarint(0)
    return uvarint(len(b) + 1) + b


def varray(items, flex, enc=lambda x: x):
    """ARRAY / COMPACT_ARRAY of items (encoded with enc); None -> null."""
    if not flex:
        return array(items, enc)
    if items is None:
        return uvarint(0)
    return uvarint(len(items) + 1) + b"".join(enc(x) for x in items)


def vtags(flex):
    """An empty tagged-field section where the version has one."""
    return b"\x00" if flex else b""


def cstring(s):
    """COMPACT_(NULLABLE_)STRING (None -> 0)."""
    return vstring(s, True)


def cbytes(b):
    """COMPACT_(NULLABLE_)BYTES / records (None -> 0)."""
    return vbytes(b, True)


def carray(items):
    """COMPACT_ARRAY of already-encoded items; None -> 0."""
    return varray(items, True)


def tags(fields=()):
    """TAGGED_FIELDS: [(tag, encoded value)], tags ascending."""
    out = uvarint(len(fields))
    for tag, value in fields:
        out += uvarint(tag) + uvarint(len(value)) + value
    return out



def request_header(api_key, api_version, corr, client_id="sluice-it", flexible=False):
    h = i16(api_key) + i16(api_version) + i32(corr) + string(client_id)
    if flexible:
        h += b"\x00"  # empty tagged-field section (header v2)
    return h


def frame(payload):
    return i32(len(payload)) + payload


# ---- decoding ---------------------------------------------------------------
class Reader:
    """Cursor over a response body; raises ValueError on a short read."""

    def __init__(self, data, pos=0):
        self.data = data
        self.pos = pos

    def take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise ValueError("short read: want %d at %d of %d" % (n, self.pos, len(self.data)))
        b = self.data[self.pos:self.pos + n]
        self.pos += n
        return b

    def i8(self):
        return struct.unpack(">b", self.take(1))[0]

    def i16(self):
        return struct.unpack(">h", self.take(2))[0]

    def i32(self):
        return struct.unpack(">i", self.take(4))[0]

    def i64(self):
        return struct.unpack(">q", self.take(8))[0]

    def string(self):
        n = self.i16()
        return None if n < 0 else self.take(n).decode()

    def nbytes(self):
        n = self.i32()
        return None if n < 0 else self.take(n)

    def array(self, fn):
        n = self.i32()
        if n < 0:
            return None
        return [fn(self) for _ in range(n)]

    def uvarint(self):
        shift = 0
        out = 0
        while True:
            b = self.take(1)[0]
            out |= (b & 0x7F) << shift
            if not b & 0x80:
                return out
            shift += 7

    def varint(self):
        u = self.uvarint()
        return (u >> 1) ^ -(u & 1)

    def remaining(self):
        return len(self.data) - self.pos

    def uuid(self):
        return self.take(16)

    def vstring(self, flex):
        if not flex:
            return self.string()
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1).decode()

    def vbytes(self, flex):
        if not flex:
            return self.nbytes()
        n = self.uvarint()
        return None if n == 0 else self.take(n - 1)

    def varray(self, fn, flex):
        if not flex:
            return self.array(fn)
        n = self.uvarint()
        return None if n == 0 else [fn(self) for _ in range(n - 1)]

    def vstructs(self, fn, flex):
        """An array of structs: fn reads one's fields, then its tagged
        section (flexible versions) is read past."""
        def one(x):
            out = fn(x)
            x.vtags(flex)
            return out
        return self.varray(one, flex)

    def vtags(self, flex):
        """Reads a tagged-field section: {tag: raw bytes} ({} when not flex)."""
        out = {}
        if flex:
            for _ in range(self.uvarint()):
                tag = self.uvarint()
                out[tag] = self.take(self.uvarint())
        return out

    def cstring(self):
        return self.vstring(True)

    def cbytes(self):
        return self.vbytes(True)

    def carray(self, fn):
        return self.varray(fn, True)

    def tags(self):
        """{tag: raw bytes} of a TAGGED_FIELDS section."""
        return self.vtags(True)



# ---- connection -------------------------------------------------------------
class Conn:
    def __init__(self, port, host="127.0.0.1", timeout=5.0):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        self.sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.buf = b""
        self.next_corr = 1

    def close(self):
        try:
            self.sock.close()
        except OSError:
            pass

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send_raw(self, data):
        self.sock.sendall(data)

    def build(self, api_key, api_version, body, corr=None, flexible=None, client_id="sluice-it"):
        """Returns (corr, framed bytes) without sending."""
        if corr is None:
            corr = self.next_corr
            self.next_corr += 1
        if flexible is None:
            flexible = api_key == API_API_VERSIONS and api_version >= 3
        return corr, frame(request_header(api_key, api_version, corr, client_id, flexible) + body)

    def send(self, api_key, api_version, body=b"", corr=None, flexible=None):
        corr, data = self.build(api_key, api_version, body, corr, flexible)
        self.sock.sendall(data)
        return corr

    def _fill(self, n, deadline):
        while len(self.buf) < n:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("waited for %d bytes, have %d" % (n, len(self.buf)))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                raise Timeout("waited for %d bytes, have %d" % (n, len(self.buf)))
            except (ConnectionResetError, BrokenPipeError) as e:
                raise Closed("connection reset: %s" % e)
            if not chunk:
                raise Closed("EOF with %d buffered bytes" % len(self.buf))
            self.buf += chunk

    def recv_frame(self, timeout=5.0):
        """One response frame, without its length prefix."""
        deadline = time.monotonic() + timeout
        self._fill(4, deadline)
        (n,) = struct.unpack(">i", self.buf[:4])
        if n < 4 or n > 256 * 1024 * 1024:
            raise ValueError("implausible response length %d" % n)
        self._fill(4 + n, deadline)
        payload = self.buf[4:4 + n]
        self.buf = self.buf[4 + n:]
        return payload

    def recv_response(self, timeout=5.0):
        """(correlation id, Reader positioned at the body) for a header-v0 response."""
        payload = self.recv_frame(timeout)
        r = Reader(payload)
        return r.i32(), r

    def request(self, api_key, api_version, body=b"", timeout=5.0):
        corr = self.send(api_key, api_version, body)
        got, r = self.recv_response(timeout)
        if got != corr:
            raise AssertionError("correlation id %d, expected %d" % (got, corr))
        return r

    def request_v(self, api_key, api_version, body, first_flexible, timeout=5.0):
        """A request at any version: header v2 and a response header with
        its tagged section from first_flexible on.  Returns the body Reader."""
        flex = api_version >= first_flexible
        corr = self.send(api_key, api_version, body, flexible=flex)
        got, r = self.recv_response(timeout)
        if got != corr:
            raise AssertionError("correlation id %d, expected %d" % (got, corr))
        if flex:
            r.vtags(True)
        return r

    def request_flex(self, api_key, api_version, body, timeout=5.0):
        """A flexible version: request header v2, response header v1 (its
        tagged section must be empty)."""
        corr = self.send(api_key, api_version, body, flexible=True)
        got, r = self.recv_response(timeout)
        if got != corr:
            raise AssertionError("correlation id %d, expected %d" % (got, corr))
        assert r.tags() == {}, "response header tags"
        return r

    def wait_closed(self, timeout=5.0):
        """Waits for EOF/reset.  Returns the bytes received before the close
        (b"" when the broker answered nothing); raises Timeout if the
        connection is still open at the deadline."""
        deadline = time.monotonic() + timeout
        got = self.buf
        self.buf = b""
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                raise Timeout("connection still open after %.1f s (received %d bytes)"
                              % (timeout, len(got)))
            self.sock.settimeout(left)
            try:
                chunk = self.sock.recv(65536)
            except socket.timeout:
                continue
            except (ConnectionResetError, BrokenPipeError):
                return got
            if not chunk:
                return got
            got += chunk


# ---- request bodies and response parsers --------------------------------------
def api_versions_v0_body():
    return b""


def api_versions_v3_body(name="sluice-it", version="1.0"):
    def cstr(s):
        b = s.encode()
        return uvarint(len(b) + 1) + b
    return cstr(name) + cstr(version) + b"\x00"


def parse_api_versions_v0(r):
    """(error_code, {api_key: (min, max)}) from a v0-shaped body."""
    err = r.i16()
    apis = r.array(lambda x: (x.i16(), x.i16(), x.i16()))
    return err, {k: (lo, hi) for k, lo, hi in (apis or [])}


def metadata_body(version, topics, allow_auto_create=True):
    """Metadata v0-v5.  topics=None: all topics (v1+)."""
    if topics is None:
        body = array([] if version == 0 else None)
    else:
        body = array([string(t) for t in topics])
    if version >= 4:
        body += i8(1 if allow_auto_create else 0)
    return body


def parse_metadata(r, version):
    """Returns dict with brokers, controller_id, topics {name: (err, [partition tuples])}."""
    out = {}
    if version >= 3:
        out["throttle_time_ms"] = r.i32()

    def broker(x):
        node = x.i32()
        host = x.string()
        port = x.i32()
        rack = x.string() if version >= 1 else None
        return node, host, port, rack

    out["brokers"] = r.array(broker)
    out["cluster_id"] = r.string() if version >= 2 else None
    out["controller_id"] = r.i32() if version >= 1 else None

    def partition(x):
        err = x.i16()
        pid = x.i32()
        leader = x.i32()
        replicas = x.array(lambda y: y.i32())
        isr = x.array(lambda y: y.i32())
        offline = x.array(lambda y: y.i32()) if version >= 5 else None
        return err, pid, leader, replicas, isr, offline

    def topic(x):
        err = x.i16()
        name = x.string()
        internal = x.i8() if version >= 1 else 0
        parts = x.array(partition)
        return name, err, internal, parts

    topics = r.array(topic)
    out["topics"] = {name: (err, parts) for name, err, _internal, parts in topics}
    return out


def produce_v3_body(topic, partition, records, acks=-1, timeout_ms=10000):
    return (string(None) + i16(acks) + i32(timeout_ms) +
            array([string(topic) + array([i32(partition) + nbytes(records)])]))


def per_partition(r, fn):
    """A classic [topic [partition]] answer: [(topic,) + fn(r)], fn reading
    one partition's fields into a tuple."""
    out = []
    for _ in range(r.i32()):
        t = r.string()
        for _ in range(r.i32()):
            out.append((t,) + fn(r))
    return out


def parse_produce_v3(r):
    """[(topic, partition, error, base_offset, log_append_time)]"""
    out = per_partition(r, lambda x: (x.i32(), x.i16(), x.i64(), x.i64()))
    r.i32()  # throttle
    return out


def fetch_v4_body(topic, partition, offset, max_wait_ms, min_bytes=1,
                  max_bytes=1 << 20, partition_max_bytes=1 << 20):
    return (i32(-1) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0) +
            array([string(topic) + array([i32(partition) + i64(offset) + i32(partition_max_bytes)])]))


def _fetch_partitions(r, version):
    """The topics of a Fetch v4-v11 response: [(topic, partition, error,
    high_watermark, log_start (None before v5), records bytes)]."""
    def partition(x):
        p, err, hw = x.i32(), x.i16(), x.i64()
        x.i64()  # last stable offset
        log_start = x.i64() if version >= 5 else None
        x.array(lambda y: (y.i64(), y.i64()))  # aborted transactions
        if version >= 11:
            x.i32()  # preferred read replica
        return p, err, hw, log_start, x.nbytes()
    return per_partition(r, partition)


def parse_fetch_v4(r):
    """[(topic, partition, error, high_watermark, records bytes)]"""
    r.i32()  # throttle
    return [(t, p, err, hw, records) for t, p, err, hw, _ls, records in _fetch_partitions(r, 4)]


def fetch_v11_body(partitions, max_wait_ms, replica_id=-1, min_bytes=1,
                   max_bytes=1 << 20, partition_max_bytes=1 << 20):
    """Fetch v11 as a follower sends it (ReplicaId = its broker id).
    partitions: [(topic, partition, fetch_offset)] (CurrentLeaderEpoch -1,
    LogStartOffset -1), grouped by topic in the order given."""
    topics = []
    for t, p, off in partitions:
        if not topics or topics[-1][0] != t:
            topics.append((t, []))
        topics[-1][1].append(i32(p) + i32(-1) + i64(off) + i64(-1) + i32(partition_max_bytes))
    return (i32(replica_id) + i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0) +
            i32(0) + i32(-1) +                    # SessionId, SessionEpoch: no session
            array([string(t) + array(ps) for t, ps in topics]) +
            array([]) + string(""))               # ForgottenTopicsData, RackId


def parse_fetch_v11(r):
    """(error, [(topic, partition, error, high_watermark, log_start, records bytes)])"""
    r.i32()  # throttle
    err = r.i16()
    r.i32()  # session id
    return err, _fetch_partitions(r, 11)


def produce_v11_body(topic, partition, batch, acks=-1, timeout_ms=10000):
    """Produce v11 (flexible): one batch to one partition, no transactional id."""
    return (cstring(None) + i16(acks) + i32(timeout_ms) + carray(
        [cstring(topic) + carray([i32(partition) + cbytes(batch) + tags()]) + tags()]) + tags())


def parse_produce_v11_full(r):
    """[(topic, partition, error, base offset, [(batch index, message)],
    error message)], every field read; no tags, no leader hints."""
    topics = r.carray(lambda x: (x.cstring(), x.carray(lambda y: (
        y.i32(), y.i16(), y.i64(), y.i64(), y.i64(),
        y.carray(lambda z: (z.i32(), z.cstring(), z.tags())), y.cstring(), y.tags())), x.tags()))
    assert r.i32() == 0 and r.tags() == {} and r.remaining() == 0     # throttle, no NodeEndpoints
    out = []
    for t, parts, ttags in topics:
        assert ttags == {}
        for p, err, base, _append_time, _log_start, rec_errs, msg, ptags in parts:
            assert ptags == {} and all(z[2] == {} for z in rec_errs)
            out.append((t, p, err, base, [(z[0], z[1]) for z in rec_errs], msg))
    return out


def parse_produce_v11(r):
    """[(topic, partition, error, base offset)]: the record errors and the
    error message must be empty on success."""
    out = []
    for t, p, err, base, rec_errs, msg in parse_produce_v11_full(r):
        assert rec_errs == [] and (err != 0 or msg is None)
        out.append((t, p, err, base))
    return out


def fetch_v17_body(partitions, max_wait_ms, min_bytes=1, max_bytes=1 << 20):
    """Fetch v17 as a consumer sends it, topics by id: partitions
    [(topic_id, partition, fetch_offset)] grouped by id in the order given."""
    topics = []
    for tid, p, off in partitions:
        if not topics or topics[-1][0] != tid:
            topics.append((tid, []))
        topics[-1][1].append(i32(p) + i32(-1) + i64(off) + i32(-1) + i64(-1) + i32(max_bytes) +
                             tags())
    return (i32(max_wait_ms) + i32(min_bytes) + i32(max_bytes) + i8(0) + i32(0) + i32(-1) +
            carray([tid + carray(ps) + tags() for tid, ps in topics]) +
            carray([]) + cstring("") + tags())


def parse_fetch_v17(r):
    """[(topic id, [(partition, error, high watermark, records)])], every
    field read (no session, no aborted transactions, no leader hints)."""
    assert r.i32() == 0 and (r.i16(), r.i32()) == (0, 0)   # throttle, error, session
    topics = r.carray(lambda x: (x.uuid(), x.carray(lambda y: (
        y.i32(), y.i16(), y.i64(), y.i64(), y.i64(),
        y.carray(lambda z: (z.i64(), z.i64())), y.i32(), y.cbytes(), y.tags())), x.tags()))
    assert r.tags() == {} and r.remaining() == 0
    out = []
    for tid, parts, ttags in topics:
        assert ttags == {}
        for p in parts:
            assert p[5] == [] and p[6] == -1 and p[8] == {}
        out.append((tid, [(p[0], p[1], p[2], p[7]) for p in parts]))
    return out


# ---- RecordBatch v2 -------------------------------------------------------------
def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def record_bytes(offset_delta, key, value, headers=(), ts_delta=0):
    """One record of a v2 batch (VARINT length first)."""
    rec = i8(0) + varint(ts_delta) + varint(offset_delta)
    rec += varint(-1) if key is None else varint(len(key)) + key
    rec += varint(-1) if value is None else varint(len(value)) + value
    rec += varint(len(headers))
    for hk, hv in headers:
        hk = hk.encode()
        rec += varint(len(hk)) + hk
        rec += varint(-1) if hv is None else varint(len(hv)) + hv
    return varint(len(rec)) + rec


def raw_batch(records_area, count, base_timestamp, max_timestamp=None, attributes=0,
              last_offset_delta=None, leader_epoch=-1):
    """A v2 batch around any records area (compressed or not, well formed
    or not), with a valid CRC-32C."""
    if max_timestamp is None:
        max_timestamp = base_timestamp
    if last_offset_delta is None:
        last_offset_delta = count - 1
    after_crc = (i16(attributes) + i32(last_offset_delta) + i64(base_timestamp) +
                 i64(max_timestamp) + i64(-1) + i16(-1) + i32(-1) + i32(count) + records_area)
    crc = crc32c(after_crc)
    rest = i32(leader_epoch) + i8(2) + struct.pack(">I", crc) + after_crc
    return i64(0) + i32(len(rest)) + rest


def record_batch(records, base_timestamp, leader_epoch=-1):
    """An uncompressed v2 batch.  records: [(key, value, [(hkey, hval)], ts_delta)]."""
    body = b"".join(record_bytes(i, key, value, headers, ts_delta)
                    for i, (key, value, headers, ts_delta) in enumerate(records))
    return raw_batch(body, len(records), base_timestamp,
                     base_timestamp + max(r[3] for r in records), leader_epoch=leader_epoch)


class Batch(collections.namedtuple(
        "Batch", "base last_delta crc attrs magic pid epoch seq count raw")):
    """One v2 batch as stored and served: its header fields and its bytes."""
    __slots__ = ()

    @property
    def ident(self):
        """(BaseOffset, LastOffsetDelta, CRC): what says two logs hold the
        same batch at the same place."""
        return self.base, self.last_delta, self.crc


def walk_batches(data):
    """Each whole v2 batch in data (a Fetch's records or a segment file's
    bytes), in order, as a Batch; stops at a batch cut short (a Fetch's
    size limit) or at a zero length (a segment's preallocated tail)."""
    pos = 0
    while pos + 61 <= len(data):
        base, length = struct.unpack_from(">qi", data, pos)
        if length <= 0 or pos + 12 + length > len(data):
            return
        magic, crc, attrs, last_delta = struct.unpack_from(">bIhi", data, pos + 16)
        pid, epoch, seq, count = struct.unpack_from(">qhii", data, pos + 43)
        yield Batch(base, last_delta, crc, attrs, magic, pid, epoch, seq, count,
                    bytes(data[pos:pos + 12 + length]))
        pos += 12 + length


def segment_batches(directory):
    """[Batch] of every .log segment file in a partition's directory, read
    straight from disk, in file name (base offset) order."""
    out = []
    for name in sorted(f for f in os.listdir(directory) if f.endswith(".log")):
        with open(os.path.join(directory, name), "rb") as f:
            out.extend(walk_batches(f.read()))
    return out


class FetchError(AssertionError):
    """A Fetch answered with an error code (top level or the partition's):
    an AssertionError, as a test's own check of the code would raise."""

    def __init__(self, code, what):
        super().__init__("%s: error %d" % (what, code))
        self.code = code


def fetch_batches(port, topic, partition, start=0, timeout=10.0):
    """Every batch of the partition from offset start up to the high
    watermark, by raw Fetch v11 as a consumer (read_uncommitted):
    ([Batch], high watermark).  FetchError if the broker answers an error
    (it does not lead the partition, has no such partition...)."""
    out, offset = [], start
    with Conn(port, timeout=timeout) as c:
        while True:
            r = c.request(API_FETCH, 11, fetch_v11_body([(topic, partition, offset)], 0),
                          timeout=timeout)
            err, parts = parse_fetch_v11(r)
            (_, _, perr, hw, _, recs), = parts
            if err or perr:
                raise FetchError(err or perr, "Fetch %s-%d at %d from port %d"
                                 % (topic, partition, offset, port))
            got = 0
            for b in walk_batches(recs or b""):
                out.append(b)
                offset = b.base + b.last_delta + 1
                got += 1
            if offset >= hw or got == 0:
                return out, hw


def batch_records(raw):
    """[(offset, key, value, [(header key, header value)])] of an
    uncompressed v2 batch (its bytes), offsets absolute; None for a null
    key, value or header value."""
    base, = struct.unpack_from(">q", raw, 0)
    count, = struct.unpack_from(">i", raw, 57)
    rd = Reader(raw, 61)

    def nullable():
        n = rd.varint()
        return rd.take(n) if n >= 0 else None
    out = []
    for _ in range(count):
        rd.varint()                      # record length
        rd.i8()                          # attributes
        rd.varint()                      # timestamp delta
        offset = base + rd.varint()
        key, value = nullable(), nullable()
        headers = [(rd.take(rd.varint()).decode(), nullable()) for _ in range(rd.varint())]
        out.append((offset, key, value, headers))
    return out


def fetch_records(port, topic, partition, end=None, max_bytes=4 << 20, timeout=10.0):
    """Every record from offset 0 up to end (the high watermark when None),
    by raw Fetch v4 (uncompressed batches): [(offset, key, value,
    headers)].  Asserts what a torn or doubled log would break: every
    batch served whole enough to go on, its CRC right, offsets only
    growing."""
    out, off = [], 0
    with Conn(port, timeout=timeout) as c:
        while end is None or off < end:
            (res,) = parse_fetch_v4(c.request(API_FETCH, 4, fetch_v4_body(
                topic, partition, off, 0, max_bytes=max_bytes, partition_max_bytes=max_bytes),
                timeout=timeout))
            assert res[2] == 0, "fetch %s-%d at %d: error %d" % (topic, partition, off, res[2])
            high = res[3] if end is None else end
            if off >= high:
                break
            data = res[4] or b""
            assert data, "fetch %s-%d at %d below %d returned nothing" % (topic, partition, off,
                                                                          high)
            whole = list(walk_batches(data))
            assert whole, "partial batch served at %s-%d %d" % (topic, partition, off)
            for b in whole:
                assert b.crc == crc32c(b.raw[21:]), \
                    "torn or damaged batch served at %s-%d %d" % (topic, partition, b.base)
                for r in batch_records(b.raw):
                    assert not out or r[0] > out[-1][0], \
                        "offset %d served after %d" % (r[0], out[-1][0])
                    out.append(r)
                off = b.base + b.last_delta + 1
    return out


# protocol/README.md §10's vector: one record, key "k", value "hi", header h=v,
# CreateTime 1700000000000.
README_BATCH = bytes.fromhex(
    "0000000000000000" "0000003f" "ffffffff"
    "02" "3ac2e82b" "0000" "00000000"
    "0000018bcfe56800" "0000018bcfe56800"
    "ffffffffffffffff" "ffff" "ffffffff"
    "00000001"
    "1a000000" "02" "6b" "04" "6869" "02" "02" "68" "02" "76")


# ---- OffsetForLeaderEpoch (API 23), v0-4; v4 is flexible -------------------------
def offset_for_leader_epoch_body(version, topics, replica_id=-1):
    """topics: [(name, [(partition, current_leader_epoch, leader_epoch)])];
    current_leader_epoch goes out from v2, replica_id from v3."""
    flex = version >= 4

    def count(n):
        return uvarint(n + 1) if flex else i32(n)

    def name(s):
        b = s.encode()
        return (uvarint(len(b) + 1) + b) if flex else string(s)

    tags = b"\x00" if flex else b""
    out = i32(replica_id) if version >= 3 else b""
    out += count(len(topics))
    for t, parts in topics:
        out += name(t) + count(len(parts))
        for p, current, epoch in parts:
            out += i32(p) + (i32(current) if version >= 2 else b"") + i32(epoch) + tags
        out += tags
    return out + tags


def parse_offset_for_leader_epoch(r, version):
    """{(topic, partition): (error, leader_epoch, end_offset)}; leader_epoch
    is None for v0, which lacks it."""
    flex = version >= 4

    def count():
        return r.uvarint() - 1 if flex else r.i32()

    def name():
        if not flex:
            return r.string()
        n = r.uvarint() - 1
        return r.take(n).decode()

    def tags():
        if flex:
            for _ in range(r.uvarint()):
                r.uvarint()
                r.take(r.uvarint())

    if flex:
        tags()                      # response header v1
    if version >= 2:
        r.i32()                     # ThrottleTimeMs
    out = {}
    for _ in range(count()):
        t = name()
        for _ in range(count()):
            err, p = r.i16(), r.i32()
            epoch = r.i32() if version >= 1 else None
            end = r.i64()
            tags()
            out[(t, p)] = (err, epoch, end)
        tags()
    tags()
    return out


def offset_for_leader_epoch(port, version, topics, replica_id=-1, timeout=5.0):
    with Conn(port, timeout=timeout) as c:
        corr = c.send(API_OFFSET_FOR_LEADER_EPOCH, version,
                      offset_for_leader_epoch_body(version, topics, replica_id),
                      flexible=version >= 4)
        got, r = c.recv_response(timeout)
        if got != corr:
            raise AssertionError("correlation id %d, expected %d" % (got, corr))
        return parse_offset_for_leader_epoch(r, version)
