"""Cluster harness: a real Apache ZooKeeper server (the Debian package's
jar, run in the foreground on a free loopback port with its own data
directory) and brokers in cluster mode pointed at it.

    def test_x(cluster):          # 3 brokers, ids 1..3, own chroot, started
        b1, b2, b3 = cluster.brokers
        cluster.sql(b2, "select * from brokers")
        b1.kill(); b1.start()
    def test_y(zk, tmp_path):     # the module's ZooKeeper, for own clusters
        c = Cluster(zk, n=2, workdir=str(tmp_path)); c.start()

One ZooKeeper serves a whole module (fixture `zk`); each test's cluster
lives under its own chroot, so tests do not see each other's znodes.

What always holds:
  C1  every process started here is killed by PID: by the fixtures'
      finalizers, else at the session's end or the interpreter's exit
      (conftest._live), else by the kernel when pytest itself dies
      (setpriv --pdeathsig: the `timeout` of run.sh kills pytest with
      SIGTERM, which runs no finalizer).
  C2  every wait is bounded and says what it waited for (wait_for).
  C3  a failing test shows the tail of every broker's log and of
      ZooKeeper's (conftest's report hook reads conftest._live).
"""
import os
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
import uuid

import pytest

import conftest
import kafka_raw as kr
from conftest import Broker, ProcessLog, dies_with_us, finish_broker, free_port
from test_sql import sql as http_sql, sql_error as http_sql_error

# Starts the Debian package's server in the foreground (exec: same PID);
# make run-cluster uses it too.
ZK_SERVER = os.path.join(conftest.REPO, "examples", "cluster", "zookeeper-server.sh")
ZK_JAR = "/usr/share/java/zookeeper.jar"
ZK_START_TIMEOUT_S = 30.0
SESSION_TIMEOUT_MS = 6000                  # short, for the failure tests
# A broker that shut down stays "leaving" for a replica fetch's longest wait
# (replica.fetch.wait.max.ms, 500 by default) and a second more (cluster_leaders.c
# L6): a leader takes no fetch in its name back into an ISR until then.  A
# test whose raw fetches pose as a stopped broker waits this out first.
LEFT_GRACE_S = 0.5 + 1.0 + 0.2


def zk_missing():
    """Why ZooKeeper cannot run here, or None."""
    if not shutil.which("java"):
        return "java not found (make deps installs zookeeper, which needs default-jre)"
    if not os.path.exists(ZK_JAR):
        return "%s not found (make deps installs zookeeper)" % ZK_JAR
    return None


def wait_for(pred, timeout, what, interval=0.1):
    """Polls pred() until it returns something true and returns that; after
    timeout seconds raises, naming what was awaited and what pred last
    returned or raised."""
    deadline = time.monotonic() + timeout
    last = None
    while True:
        try:
            got = pred()
            if got:
                return got
            last = got
        except Exception as e:   # noqa: BLE001 - reported below
            last = e
        if time.monotonic() >= deadline:
            raise AssertionError("timed out after %.1f s waiting for %s (last: %r)"
                                 % (timeout, what, last))
        time.sleep(interval)


def wait_equal(get, want, timeout, what, interval=0.1):
    """Polls get() until it returns want; else raises with what it last got."""
    box = []

    def same():
        box[:] = [get()]
        return box[0] == want
    try:
        wait_for(same, timeout, what, interval)
    except AssertionError as e:
        raise AssertionError("%s\n  want: %r\n  got:  %r" % (e, want, box[0] if box else None))


def leader_and_isr(b, topic):
    """(leader, sorted ISR tuple) of partition 0 as broker b answers
    Metadata, or None (no answer, or no such partition there)."""
    try:
        with kr.Conn(b.port, timeout=3) as c:
            r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [topic], False), timeout=3)
        m = kr.parse_metadata(r, 5)
    except (OSError, ValueError):
        return None
    parts = m["topics"].get(topic, (None, []))[1]
    for _err, pid, leader, _reps, isr, _off in parts:
        if pid == 0:
            return leader, tuple(sorted(isr))
    return None


def live_brokers(b):
    """The broker ids broker b's Metadata lists ([] when it does not answer)."""
    try:
        with kr.Conn(b.port, timeout=3) as c:
            r = c.request(kr.API_METADATA, 5, kr.metadata_body(5, [], False), timeout=3)
        return [n for n, _h, _p, _r in kr.parse_metadata(r, 5)["brokers"]]
    except (OSError, ValueError):
        return []


def _zk_call(connect, op, path, timeout, tail=b"\0"):
    """One request of ZooKeeper's own wire protocol on a session of its
    own: (error code, reply body after the reply header).  connect:
    host:port with an optional chroot ("127.0.0.1:2181/sluice-it-ab12");
    tail: the request's fields after the path (default: watch false)."""
    hostport, _, chroot = connect.partition("/")
    host, port = hostport.rsplit(":", 1)
    full = (("/" + chroot if chroot else "") + path).encode()

    def send(s, payload):
        s.sendall(struct.pack(">i", len(payload)) + payload)

    def recv(s):
        return kr.recv_exact(s, struct.unpack(">i", kr.recv_exact(s, 4))[0])

    with socket.create_connection((host, int(port)), timeout=timeout) as s:
        # ConnectRequest: protocolVersion, lastZxidSeen, timeOut, sessionId, passwd
        send(s, struct.pack(">iqiqi", 0, 0, 10000, 0, 16) + bytes(16))
        recv(s)
        # xid 1, op; path, watch false
        send(s, struct.pack(">iii", 1, op, len(full)) + full + tail)
        r = recv(s)
        _xid, _zxid, err = struct.unpack(">iqi", r[:16])
        send(s, struct.pack(">ii", 2, -11))            # closeSession
        return err, r[16:]


def cl_zk_get(connect, path, timeout=5.0):
    """(data bytes, version) of one znode, or None when it does not exist,
    read with ZooKeeper's own protocol, so a test sees what the brokers
    wrote without a client library."""
    err, r = _zk_call(connect, 4, path, timeout)           # getData
    if err == -101:                                        # ZNONODE
        return None
    assert err == 0, "getData %s: ZooKeeper error %d" % (path, err)
    n = struct.unpack(">i", r[:4])[0]
    data = r[4:4 + n] if n >= 0 else None
    stat = r[4 + max(n, 0):]
    return data, struct.unpack(">i", stat[32:36])[0]       # after czxid, mzxid, ctime, mtime


def cl_zk_create(connect, path, data=b"", timeout=5.0):
    """Creates path (and its missing parents, empty) with data, open to
    all (world:anyone, every permission); an existing path is left as it
    is.  Lets a test put what an operator would (Kafka's /config/users
    credentials) before the brokers start."""
    parts = [p for p in path.split("/") if p]
    for i in range(1, len(parts) + 1):
        sub = "/" + "/".join(parts[:i])
        d = data if i == len(parts) else b""
        acl = struct.pack(">ii", 1, 31) + struct.pack(">i", 5) + b"world" + \
            struct.pack(">i", 6) + b"anyone"
        err, _ = _zk_call(connect, 1, sub, timeout,
                          struct.pack(">i", len(d)) + d + acl + struct.pack(">i", 0))
        assert err in (0, -110), "create %s: ZooKeeper error %d" % (sub, err)   # -110: exists


def cl_zk_set(connect, path, data, timeout=5.0):
    """Replaces path's data (any version), as another client could."""
    err, _ = _zk_call(connect, 5, path, timeout,
                      struct.pack(">i", len(data)) + data + struct.pack(">i", -1))
    assert err == 0, "setData %s: ZooKeeper error %d" % (path, err)


def zk_read_only(connect, path, timeout=5.0):
    """Sets path's ACL to world:anyone READ: every write to it then fails
    (NOAUTH), as a test's way of making a broker's write fail."""
    acl = struct.pack(">ii", 1, 1) + struct.pack(">i", 5) + b"world" + \
        struct.pack(">i", 6) + b"anyone"
    err, _ = _zk_call(connect, 7, path, timeout, acl + struct.pack(">i", -1))
    assert err == 0, "setACL %s: ZooKeeper error %d" % (path, err)


def zk_delete(connect, path, timeout=5.0):
    """Deletes path (any version); True if it existed.  Lets a test take a
    broker's registration away as its session's end would."""
    err, _ = _zk_call(connect, 2, path, timeout, struct.pack(">i", -1))
    assert err in (0, -101), "delete %s: ZooKeeper error %d" % (path, err)
    return err == 0


def cl_zk_children(connect, path, timeout=5.0):
    """The sorted child names of a znode ([] when it does not exist)."""
    err, r = _zk_call(connect, 8, path, timeout)           # getChildren
    if err == -101:
        return []
    assert err == 0, "getChildren %s: ZooKeeper error %d" % (path, err)
    count, pos, out = struct.unpack(">i", r[:4])[0], 4, []
    for _ in range(max(count, 0)):
        n = struct.unpack(">i", r[pos:pos + 4])[0]
        out.append(r[pos + 4:pos + 4 + n].decode())
        pos += 4 + n
    return sorted(out)

def timed(pred, timeout, what, interval=0.05):
    """wait_for, returning (seconds it took, pred's value)."""
    t0 = time.monotonic()
    got = wait_for(pred, timeout, what, interval)
    return time.monotonic() - t0, got


def _pid_gone(proc):
    return proc is None or proc.poll() is not None


def proc_state(pid):
    """The process's state letter (R, S, T, ...), or None once it is gone."""
    try:
        with open("/proc/%d/stat" % pid) as f:
            return f.read().rsplit(")", 1)[1].split()[0]
    except OSError:
        return None


class Pausable:
    """SIGSTOP/SIGCONT for a class holding its Popen in self.proc."""
    stopped = False

    def sigstop(self):
        """Returns once every thread has stopped (a JVM takes a moment)."""
        self.proc.send_signal(signal.SIGSTOP)
        self.stopped = True
        wait_for(lambda: proc_state(self.proc.pid) in ("T", None), 5,
                 "pid %d to stop" % self.proc.pid, interval=0.01)

    def sigcont(self):
        if self.alive():
            self.proc.send_signal(signal.SIGCONT)
        self.stopped = False


# ---- ZooKeeper --------------------------------------------------------------------
class ZooKeeper(Pausable, ProcessLog):
    """One standalone ZooKeeper server.  restart() keeps the port and the
    data dir, so the sessions it had survive when clients reconnect within
    their timeout."""

    log_title = "zookeeper"

    def __init__(self, workdir):
        self.workdir = workdir
        self.data_dir = os.path.join(workdir, "data")
        os.makedirs(self.data_dir, exist_ok=True)
        self.cfg = os.path.join(workdir, "zoo.cfg")
        self.log_path = os.path.join(workdir, "zookeeper.log")
        self.port = free_port()
        self.proc = None
        self.starts = 0
        self.served = False      # answered imok once: clients know the port
        self._log = None

    @property
    def label(self):
        return "zookeeper 127.0.0.1:%d" % self.port

    @property
    def connect(self):
        return "127.0.0.1:%d" % self.port

    def _write_cfg(self):
        with open(self.cfg, "w") as f:
            f.write("# generated by tests/integration/cluster_support.py\n"
                    "tickTime=500\n"
                    "initLimit=10\nsyncLimit=5\n"
                    "dataDir=%s\n"
                    "clientPort=%d\n"
                    "clientPortAddress=127.0.0.1\n"
                    "minSessionTimeout=1000\n"
                    "maxSessionTimeout=60000\n"
                    "admin.enableServer=false\n"
                    "4lw.commands.whitelist=*\n" % (self.data_dir, self.port))

    def argv(self):
        return dies_with_us(["sh", ZK_SERVER, self.cfg, self.workdir])

    def start(self):
        for attempt in range(conftest.BIND_RETRIES + 1):
            self._write_cfg()
            self.starts += 1
            mark = b"\n===== start %d\n" % self.starts
            self._log = open(self.log_path, "ab")
            self._log.write(mark)
            self._log.flush()
            self.proc = subprocess.Popen(self.argv(), stdin=subprocess.DEVNULL, stdout=self._log,
                                         stderr=subprocess.STDOUT, cwd=self.workdir)
            self.stopped = False
            if self not in conftest._live:
                conftest._live.append(self)
            try:
                wait_for(lambda: self.serving() or self.proc.poll() is not None,
                         ZK_START_TIMEOUT_S, "%s to serve" % self.label)
            except AssertionError as e:
                self.kill()
                raise AssertionError("%s\n%s" % (e, self.log_tail()))
            if self.proc.poll() is None:
                self.served = True
                return self
            self._close_log()
            this_start = self.log_text().rsplit(mark.decode(), 1)[-1]
            # A port taken since free_port() just means another port, as
            # long as no client knows this one yet.
            if self.served or "Address already in use" not in this_start \
                    or attempt == conftest.BIND_RETRIES:
                break
            old, self.port = self.port, free_port()
            self.log_note("port %d was taken by another process: retrying on %d" % (old, self.port))
        raise AssertionError("ZooKeeper exited with %s during startup\n%s"
                             % (self.proc.returncode, self.log_tail()))

    def four(self, word, timeout=1.0):
        """A four-letter command's answer ("" when none came)."""
        try:
            with socket.create_connection(("127.0.0.1", self.port), timeout=timeout) as s:
                s.sendall(word.encode())
                out = b""
                while True:
                    chunk = s.recv(65536)
                    if not chunk:
                        return out.decode(errors="replace")
                    out += chunk
        except OSError:
            return ""

    def ruok(self):
        return self.four("ruok", timeout=0.5) == "imok"

    def serving(self):
        """imok comes as soon as the port is open, before the database is
        loaded (srvr then says "not currently serving requests"): ready is
        both, from a port this process listens on (another program may
        have taken it: conftest.py P3)."""
        return self.port in conftest.listening_ports(self.proc.pid) and self.ruok() \
            and "Mode: " in self.four("srvr", timeout=0.5)

    def alive(self):
        return not _pid_gone(self.proc)

    def stop(self, timeout=10.0):
        """SIGTERM, then SIGKILL after timeout.  Returns the exit status."""
        if _pid_gone(self.proc):
            return self.proc.returncode if self.proc else None
        self.sigcont()
        self.proc.terminate()
        try:
            self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.kill()
        self._close_log()
        return self.proc.returncode

    def kill(self):
        if not _pid_gone(self.proc):
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass
        self.stopped = False
        self._close_log()

    def restart(self):
        """Stops (SIGTERM) and starts again on the same port and data dir."""
        self.stop()
        return self.start()

    def ensure_running(self):
        """Back to serving, whatever an earlier (failed) test left."""
        if self.stopped:
            self.sigcont()
        if not self.alive() or not self.serving():
            self.kill()
            self.start()

    def _close_log(self):
        if self._log:
            self._log.close()
            self._log = None


# ---- brokers in cluster mode ------------------------------------------------------
class ClusterBroker(Pausable, Broker):
    """A sluiced of a Cluster: conftest.Broker plus an admin listener, its
    place in the cluster, and SIGSTOP/SIGCONT."""

    def __init__(self, workdir, broker_id, zk_connect, session_timeout_ms, overrides=None):
        o = {"broker.id": str(broker_id),
             "admin.listeners": "http://127.0.0.1:%d" % free_port(),
             "zookeeper.connect": zk_connect,
             "zookeeper.session.timeout.ms": str(session_timeout_ms)}
        o.update(overrides or {})
        super().__init__(workdir, o)
        # A restarted broker may wait for its previous session's znode to
        # expire before it listens.
        self.start_timeout = conftest.START_TIMEOUT_S + session_timeout_ms / 1000.0

    @property
    def label(self):
        return "sluiced broker %d %s (admin %s)" % (self.broker_id, self.bootstrap, self.admin)

    def _start_once(self):
        self.stopped = False
        return super()._start_once()

    def stop(self, sig=signal.SIGTERM, timeout=conftest.STOP_TIMEOUT_S):
        if self.stopped:
            self.sigcont()      # a stopped process never handles SIGTERM
        return super().stop(sig, timeout)

    def kill(self):
        super().kill()          # SIGKILL works on a stopped process too
        self.stopped = False
        if self._log:
            self._log.close()
            self._log = None

    def sql(self, query):
        """Rows as dicts, through the admin endpoint sluice-sql talks to."""
        return http_sql(self, query)

    def sql_error(self, query):
        return http_sql_error(self, query)


def registered_ids(b, timeout=5.0):
    """The broker ids b's Metadata lists (None if it does not answer)."""
    try:
        with kr.Conn(b.port, timeout=timeout) as c:
            r = c.request(kr.API_METADATA, 1, kr.metadata_body(1, [], False), timeout=timeout)
            return {n for n, _h, _p, _rack in kr.parse_metadata(r, 1)["brokers"]}
    except (OSError, ConnectionError, AssertionError):
        return None


class Cluster:
    """n brokers (ids 1..n) on one ZooKeeper under their own chroot."""

    def __init__(self, zk, workdir, n=3, chroot=None, session_timeout_ms=SESSION_TIMEOUT_MS,
                 overrides=None):
        self.zk = zk
        self.workdir = workdir
        self.chroot = chroot or "/sluice-it-%s" % uuid.uuid4().hex[:8]
        self.session_timeout_ms = session_timeout_ms
        self.zk_connect = "%s%s" % (zk.connect, self.chroot)
        self.brokers = []
        for i in range(1, n + 1):
            wd = os.path.join(workdir, "broker-%d" % i)
            os.makedirs(wd)
            self.brokers.append(ClusterBroker(wd, i, self.zk_connect, session_timeout_ms,
                                              overrides))

    @property
    def session_timeout_s(self):
        return self.session_timeout_ms / 1000.0

    def broker(self, broker_id):
        return next(b for b in self.brokers if b.broker_id == broker_id)

    def start(self):
        """Starts every broker and returns once each lists all of them in
        its Metadata: a broker serves before its registration reaches the
        others, and a test that then names it in a replica assignment would
        get INVALID_REPLICA_ASSIGNMENT on a loaded machine."""
        for b in self.brokers:
            b.start()
        ids = {b.broker_id for b in self.brokers}
        for b in self.brokers:
            wait_for(lambda b=b: registered_ids(b) == ids, 30,
                     "broker %d to list brokers %s" % (b.broker_id, sorted(ids)))
        return self

    @property
    def bootstrap(self):
        return ",".join(b.bootstrap for b in self.brokers)

    def sql(self, b, query):
        return b.sql(query)

    def close(self):
        """Stops every broker; returns the problems conftest.finish_broker
        found (died on its own, sanitizer reports)."""
        problems = []
        for b in self.brokers:
            if b.stopped:
                b.sigcont()
            problems += ["broker %d: %s" % (b.broker_id, p) for p in finish_broker(b)]
        return problems


# ---- fixtures ---------------------------------------------------------------------
@pytest.fixture(scope="module")
def zk():
    why = zk_missing()
    if why:
        pytest.skip("ZooKeeper cannot run: " + why)
    wd = tempfile.mkdtemp(prefix="sluice-zk-")
    z = ZooKeeper(wd)
    try:
        z.start()
        yield z
    finally:
        z.kill()
        if os.environ.get("SLUICE_IT_KEEP") != "1":
            shutil.rmtree(wd, ignore_errors=True)


@pytest.fixture
def make_cluster(zk, request):
    """Factory: make_cluster(n=3, **kw) -> a started Cluster with its own chroot."""
    made = []
    tmp = tempfile.mkdtemp(prefix="sluice-cluster-")

    def make(n=3, start=True, **kw):
        zk.ensure_running()
        c = Cluster(zk, os.path.join(tmp, "c%d" % len(made)), n=n, **kw)
        made.append(c)
        return c.start() if start else c

    try:
        yield make
    finally:
        problems = []
        for c in made:
            problems += c.close()
        if os.environ.get("SLUICE_IT_KEEP") != "1":
            shutil.rmtree(tmp, ignore_errors=True)
        if problems:
            pytest.fail("; ".join(problems) + "\n" + "\n".join(
                b.log_tail() for c in made for b in c.brokers) + "\n" + zk.log_tail(),
                pytrace=False)


@pytest.fixture
def cluster(make_cluster):
    return make_cluster(3)
