"""Harness: each test gets its own sluiced on a free loopback port with a
fresh data directory, and the process is always killed in teardown.

    def test_x(broker):                     # default overrides
    def test_y(start_broker):               # custom overrides
        b = start_broker({"auto.create.topics.enable": "false"})

The binary comes from $SLUICED (set by `make integration`), else
build/sluiced in the repository.  Each start's stderr/stdout goes to a
file beside (not inside) the data directory; failures quote its tail.
"""
import atexit
import ctypes
import fcntl
import os
import random
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, HERE)

BROKER_ID = 1
START_TIMEOUT_S = 10.0
STOP_TIMEOUT_S = 10.0
TEST_TIMEOUT_S = int(os.environ.get("SLUICE_IT_TEST_TIMEOUT", "150"))

# Every process a test started and that may still run: Brokers, and the
# ZooKeeper servers of tests/integration/cluster_support.py.  Each has
# label, log_path, log_tail(n), alive() and kill(); failures quote their
# logs, and the session's end (or the interpreter's) kills what is left.
_live = []
LEAKED = []    # what the end of a module found still running (see pytest_runtest_teardown)


@atexit.register
def _kill_leftovers():
    for p in list(_live):
        p.kill()


def dies_with_us(argv):
    """The child gets SIGKILL when pytest dies, however it dies (run.sh's
    `timeout` sends SIGTERM, which runs no finalizer)."""
    return ["setpriv", "--pdeathsig", "KILL", "--"] + argv if shutil.which("setpriv") else argv


def sluiced_path():
    p = os.environ.get("SLUICED") or os.path.join(REPO, "build", "sluiced")
    return os.path.abspath(p)


# ---- ports ---------------------------------------------------------------------
# Every listener a test starts (brokers, their admin and extra listeners,
# ZooKeeper) binds a port free_port() handed out, some time later:
#   P1  the ports come from outside the kernel's ephemeral range
#       (ip_local_port_range), so no outgoing connection on the machine
#       is given one of them meanwhile;
#   P2  a port is handed out once per machine while this process lives:
#       each is reserved by a lock on byte PORT of PORT_LOCK (fcntl record
#       locks, dropped by the kernel when the process ends), which every
#       run of this harness, from any worktree, honours;
#   P3  a port another program binds anyway (it does not know of P2) is
#       caught at startup (Broker.start, cluster_support.ZooKeeper.start):
#       a process that never served moves to another port, a few times,
#       saying so in its log; a restarted one keeps its port (its clients
#       know it) and fails with the bind error.
PORT_LOCK = os.path.join(tempfile.gettempdir(), "sluice-it-ports.lock")


def _port_range():
    """The larger stretch of [10000, 65535] outside the ephemeral range
    (below 10000 live the well-known defaults: ZooKeeper's 2181, Kafka's
    9092)."""
    try:
        with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
            lo, hi = (int(x) for x in f.read().split())
    except (OSError, ValueError):
        lo, hi = 32768, 60999                       # Linux's default
    best = max((10000, lo - 1), (hi + 1, 65535), key=lambda r: r[1] - r[0])
    return best if best[1] - best[0] >= 1000 else (10000, 65535)


def _bindable(port):
    """Nobody has port on any IPv4 address (no SO_REUSEADDR: a port with
    connections lingering in TIME_WAIT counts as taken too)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    try:
        s.bind(("0.0.0.0", port))
        return True
    except OSError:
        return False
    finally:
        s.close()


class _PortAllocator:
    def __init__(self):
        self.lo, self.hi = _port_range()
        self.fd = None          # never closed: closing any fd of the file drops every lock
        self.next = None
        self.held = set()

    def take(self):
        if self.fd is None:
            self.fd = os.open(PORT_LOCK, os.O_RDWR | os.O_CREAT, 0o666)
            self.next = random.Random(os.getpid() ^ time.time_ns()).randint(self.lo, self.hi)
        n = self.hi - self.lo + 1
        for _ in range(n):
            port = self.next
            self.next = self.lo + (port + 1 - self.lo) % n
            if port in self.held:
                continue
            try:
                fcntl.lockf(self.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, port)
            except OSError:
                continue                            # another run holds it
            if _bindable(port):
                self.held.add(port)
                return port
            fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, port)
        raise RuntimeError("free_port: every port in %d-%d is taken" % (self.lo, self.hi))


_ports = _PortAllocator()


def free_port():
    """A loopback port nobody listens on, reserved for this run (P1-P3)."""
    return _ports.take()


def listening_ports(pid):
    """The TCP ports process pid listens on (empty once it is gone): its
    socket inodes (/proc/PID/fd) in LISTEN state in /proc/net/tcp{,6}."""
    fd_dir = "/proc/%d/fd" % pid
    inodes = set()
    try:
        names = os.listdir(fd_dir)
    except OSError:
        return set()
    for name in names:
        try:
            target = os.readlink(os.path.join(fd_dir, name))
        except OSError:
            continue
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    ports = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        try:
            with open(table) as f:
                rows = f.read().splitlines()[1:]
        except OSError:
            continue
        for row in rows:
            f = row.split()
            if len(f) > 9 and f[3] == "0A" and f[9] in inodes:
                ports.add(int(f[1].rsplit(":", 1)[1], 16))
    return ports


def taken_port(message):
    """The port of a "cannot listen on [NAME://]HOST:PORT" (sluiced's bind
    errors, the main and the admin listeners'), or None."""
    m = re.search(r"cannot listen on (?:\w+://)?[^\s:]*:(\d+)", message)
    return int(m.group(1)) if m else None


BIND_RETRIES = 5


BASE_PROPERTIES = """\
# generated by tests/integration/conftest.py
broker.id=%d
num.partitions=1
default.replication.factor=1
auto.create.topics.enable=true
delete.topic.enable=true
schema.registry.listeners=none
""" % BROKER_ID


def _property(path, key, default):
    with open(path) as f:
        for line in f:
            k, sep, v = line.strip().partition("=")
            if sep and k.strip() == key:
                return v.strip()
    return default


class BrokerDied(Exception):
    pass


class ProcessLog:
    """The output file (self.log_path) of a process a test started."""
    log_title = "sluiced"

    def log_text(self):
        try:
            with open(self.log_path, "rb") as f:
                return f.read().decode(errors="replace")
        except OSError:
            return ""

    def log_note(self, text):
        """A line of the harness's own in the log (and on stderr, which a
        failing test's report shows)."""
        with open(self.log_path, "ab") as f:
            f.write(b"===== %s\n" % text.encode())
        sys.stderr.write("%s: %s\n" % (self.label, text))

    def log_tail(self, n=60):
        lines = self.log_text().splitlines()
        return "----- %s output (last %d lines) -----\n%s" % (
            self.log_title, min(n, len(lines)), "\n".join(lines[-n:]))


class Broker(ProcessLog):
    """One sluiced process; restart() keeps the port and the data dir."""

    start_timeout = None   # seconds to wait for the listener; None: START_TIMEOUT_S

    def __init__(self, workdir, overrides=None, config=None):
        self.binary = sluiced_path()
        self.workdir = workdir
        self.data_dir = os.path.join(workdir, "data")
        os.makedirs(self.data_dir)
        self.port = free_port()
        self.host = "127.0.0.1"
        self.bootstrap = "%s:%d" % (self.host, self.port)
        if config is None:
            config = os.path.join(workdir, "broker.properties")
            with open(config, "w") as f:
                f.write(BASE_PROPERTIES)
        self.config = config
        self.overrides = dict(overrides or {})
        self.broker_id = int(self.overrides.get("broker.id", _property(config, "broker.id", BROKER_ID)))
        self.proc = None
        self.starts = 0
        self.served = False        # listened once: clients know its ports
        self.expect_dead = False   # set while we are the ones stopping it
        self.log_path = os.path.join(workdir, "broker.log")
        self._log = None

    @property
    def label(self):
        return "sluiced %s" % self.bootstrap

    @property
    def admin(self):
        """host:port of the admin endpoint (from the admin.listeners
        override; 0.0.0.0 is reached on 127.0.0.1), or None."""
        m = re.match(r"\w+://([^:,/]*):(\d+)", self.overrides.get("admin.listeners", ""))
        if not m:
            return None
        return "%s:%s" % (m.group(1) if m.group(1) not in ("", "0.0.0.0") else "127.0.0.1",
                          m.group(2))

    @property
    def admin_port(self):
        return int(self.admin.rsplit(":", 1)[1]) if self.admin else None

    def listen_ports(self):
        """Every port the command line tells sluiced to listen on (its
        listeners, admin.listeners and schema.registry.listeners)."""
        argv = self.argv()
        ports = set()
        for i, a in enumerate(argv[1:], 1):
            if argv[i - 1] == "--override" and a.startswith(("listeners=", "admin.listeners=",
                                                             "schema.registry.listeners=")):
                ports.update(int(p) for p in re.findall(r"://[^,/]*:(\d+)", a))
        return ports

    def rebind(self, old, new):
        """Moves a listener from port old to port new before the first
        start: in the overrides, and in attributes naming it (an int *port,
        a "host:port" string; helpers such as tls_support's ssl_port)."""
        pat = re.compile(r"(?<=:)%d(?!\d)" % old)
        self.overrides = {k: pat.sub(str(new), v) for k, v in self.overrides.items()}
        for k, v in list(vars(self).items()):
            if isinstance(v, int) and not isinstance(v, bool) and v == old and k.endswith("port"):
                setattr(self, k, new)
            elif isinstance(v, str) and re.fullmatch(r"[\w.-]+:%d" % old, v):
                setattr(self, k, pat.sub(str(new), v))

    # -- process control ------------------------------------------------------------
    def argv(self):
        args = [self.binary, "-c", self.config,
                "--override", "listeners=PLAINTEXT://%s:%d" % (self.host, self.port),
                "--override", "advertised.listeners=PLAINTEXT://%s:%d" % (self.host, self.port),
                "--override", "log.dirs=%s" % self.data_dir]
        for k, v in self.overrides.items():
            args += ["--override", "%s=%s" % (k, v)]
        return args

    def start(self):
        if not os.access(self.binary, os.X_OK):
            pytest.fail("sluiced binary not found or not executable: %s "
                        "(set SLUICED or run `make build/sluiced`)" % self.binary)
        for attempt in range(BIND_RETRIES + 1):
            try:
                return self._start_once()
            except BrokerDied:
                # P3: a port taken since free_port() just means another one,
                # as long as nobody was told this one (never served).
                old = taken_port(self.log_text().rsplit("\n===== start ", 1)[-1])
                if self.served or old is None or attempt == BIND_RETRIES:
                    raise
                new = free_port()
                self.log_note("port %d was taken by another process: retrying on %d" % (old, new))
                self.rebind(old, new)

    def _start_once(self):
        self.starts += 1
        self._log = open(self.log_path, "ab")
        self._log.write(b"\n===== start %d: %s\n" % (self.starts, " ".join(self.argv()).encode()))
        self._log.flush()
        self.proc = subprocess.Popen(dies_with_us(self.argv()), stdin=subprocess.DEVNULL,
                                     stdout=self._log, stderr=subprocess.STDOUT,
                                     cwd=self.workdir)
        self.expect_dead = False
        if self not in _live:
            _live.append(self)
        self._wait_listening()
        return self

    def _wait_listening(self):
        """Until the process itself listens on every port of its command
        line: a connection that succeeds may reach another program that
        took the port (P3), and the listeners bind one after another."""
        limit = START_TIMEOUT_S if self.start_timeout is None else self.start_timeout
        deadline = time.monotonic() + limit
        want = self.listen_ports()
        while True:
            rc = self.proc.poll()
            if rc is not None:
                raise BrokerDied("sluiced exited with %s during startup\n%s"
                                 % (rc, self.log_tail()))
            if want <= listening_ports(self.proc.pid):
                self.served = True
                return
            if time.monotonic() > deadline:
                self.kill()
                raise BrokerDied("sluiced did not listen on %s within %.0f s\n%s"
                                 % (", ".join(map(str, sorted(want))), limit, self.log_tail()))
            time.sleep(0.05)

    def stop(self, sig=signal.SIGTERM, timeout=STOP_TIMEOUT_S):
        """Sends sig and waits; SIGKILLs after timeout.  Returns the exit
        status (negative = killed by that signal), or None if it had to be
        killed after ignoring sig."""
        if self.proc is None:
            return None
        self.expect_dead = True
        rc = self.proc.poll()
        if rc is None:
            try:
                self.proc.send_signal(sig)
            except ProcessLookupError:
                pass
            try:
                rc = self.proc.wait(timeout=timeout)
            except subprocess.TimeoutExpired:
                self.kill()
                rc = None
        if self._log:
            self._log.close()
            self._log = None
        return rc

    def kill(self):
        if self.proc is not None and self.proc.poll() is None:
            self.expect_dead = True
            self.proc.kill()
            try:
                self.proc.wait(timeout=10)
            except subprocess.TimeoutExpired:
                pass

    def restart(self, sig=signal.SIGTERM):
        """Stops with sig (SIGTERM: graceful, SIGKILL: crash) and starts again
        on the same port and data dir.  Returns the old process's exit status."""
        rc = self.stop(sig)
        self.start()
        return rc

    # -- diagnostics ----------------------------------------------------------------
    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def assert_alive(self):
        rc = self.proc.poll() if self.proc else None
        if rc is not None:
            raise AssertionError("sluiced died (exit status %s)\n%s" % (rc, self.log_tail()))

    def partition_dir(self, topic, partition=0):
        return os.path.join(self.data_dir, "%s-%d" % (topic, partition))

    def log_bytes(self, topic, partition=0):
        """Bytes of the partition's segment files.  Retention deletes them
        while this reads (a listed file may be gone when it is measured):
        a vanished one counts 0, as it would a moment later."""
        d = self.partition_dir(topic, partition)
        total = 0
        for f in os.listdir(d):
            if f.endswith(".log"):
                try:
                    total += os.path.getsize(os.path.join(d, f))
                except FileNotFoundError:
                    pass
        return total


def finish_broker(b):
    """Teardown: the broker must not have died on its own, and must not have
    reported memory errors (SANITIZE=1 builds)."""
    problems = []
    # Drop the cached client (support.ck_admin) while the broker is still
    # up, so it does not linger reconnecting to a dead port.
    b.__dict__.pop("_ck_admin", None)
    if b.proc is not None and not b.expect_dead and b.proc.poll() is not None:
        problems.append("sluiced died during the test (exit status %s)" % b.proc.returncode)
    b.stop(signal.SIGTERM, timeout=5)
    b.kill()
    text = b.log_text()
    for marker in ("ERROR: AddressSanitizer", "runtime error:", "ERROR: LeakSanitizer"):
        if marker in text:
            problems.append("sanitizer report in sluiced output (%s)" % marker)
    return problems


@pytest.fixture
def start_broker(request):
    """Factory: start_broker(overrides=None, config=None) -> started Broker."""
    made = []
    tmp = tempfile.mkdtemp(prefix="sluice-it-")

    def make(overrides=None, config=None):
        if config is not None and not os.path.isabs(config):
            config = os.path.join(REPO, config)
        wd = os.path.join(tmp, "b%d" % len(made))
        os.makedirs(wd)
        b = Broker(wd, overrides, config)
        made.append(b)
        return b.start()

    try:
        yield make
    finally:
        problems = []
        for b in made:
            problems += finish_broker(b)
        failed = getattr(request.node, "rep_call", None)
        keep = os.environ.get("SLUICE_IT_KEEP") == "1"
        if problems:
            tails = "\n".join(b.log_tail() for b in made)
            if not keep:
                shutil.rmtree(tmp, ignore_errors=True)
            pytest.fail("; ".join(problems) + "\n" + tails, pytrace=False)
        if not keep:
            shutil.rmtree(tmp, ignore_errors=True)
        elif failed is not None and failed.failed:
            print("kept %s" % tmp)


@pytest.fixture
def broker(start_broker):
    return start_broker()


# ---- side by side (run.sh: pytest-xdist, -n 3 --dist loadgroup) -----------------
#   X1  a module with module-scoped fixtures (a ZooKeeper, a SASL broker)
#       is one unit of work, run by one worker in file order, so that they
#       start once; any other test is a unit of its own (the workers end
#       together);
#   X2  tests marked `serial` (they compare timings, or load the machine:
#       floods, storms, valgrind) form one unit, handed out first, and each
#       runs alone: a run-wide lock that every other test holds shared
#       and a serial test exclusive, from setup to teardown.  A turnstile
#       in front of it keeps the workers' shared holds from starving it
#       (_RunLock);
#   X3  ports need nothing more: free_port() reserves each port for the
#       process that took it (P2), so two workers never get the same one.
SERIAL_LOCK_ENV = "SLUICE_IT_SERIAL_LOCK"
_TURNSTILE, _RUNNING = 0, 1          # bytes of the lock file


def pytest_configure(config):
    config.addinivalue_line(
        "markers", "serial: runs alone, never beside another test (X2); "
        "for tests that compare timings or load the machine")
    if getattr(config.option, "numprocesses", None) and "PYTEST_XDIST_WORKER" not in os.environ:
        fd, path = tempfile.mkstemp(prefix="sluice-it-serial-")
        os.close(fd)
        os.environ[SERIAL_LOCK_ENV] = path   # the workers inherit it
        config.add_cleanup(lambda: os.unlink(path))


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items):
    if "PYTEST_XDIST_WORKER" not in os.environ:
        return
    for item in items:
        if _serial(item):
            item.add_marker(pytest.mark.xdist_group("serial"))
        elif _module_fixtures(item):
            item.add_marker(pytest.mark.xdist_group(item.module.__name__))
    # The serial unit first, then the modules with clusters (the longest):
    # what is left for the end are short units, which even out the workers.
    items.sort(key=lambda item: (not _serial(item), "zk" not in item.fixturenames))


def _module_fixtures(item):
    return any(d.scope != "function"
               for defs in item._fixtureinfo.name2fixturedefs.values() for d in defs)


def _serial(item):
    return item is not None and item.get_closest_marker("serial") is not None


class _RunLock:
    """The turnstile is taken by every test on its way in; a serial test
    keeps it while it runs, and hands it to the next one when that is
    serial too, so that the serial tests run back to back while the other
    worker waits, rather than taking turns with it."""

    def __init__(self):
        self.fd = None
        self.turnstile = False       # held since the last serial test

    def hold(self, exclusive):
        path = os.environ.get(SERIAL_LOCK_ENV)
        if path is None or "PYTEST_XDIST_WORKER" not in os.environ:
            return False
        if self.fd is None:
            self.fd = os.open(path, os.O_RDWR)
        if not self.turnstile:
            fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, _TURNSTILE)
        if exclusive:
            self.turnstile = True
            fcntl.lockf(self.fd, fcntl.LOCK_EX, 1, _RUNNING)
        else:
            self._leave_turnstile()
            fcntl.lockf(self.fd, fcntl.LOCK_SH, 1, _RUNNING)
        return True

    def release(self, next_exclusive):
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, _RUNNING)
        if not next_exclusive:
            self._leave_turnstile()

    def _leave_turnstile(self):
        fcntl.lockf(self.fd, fcntl.LOCK_UN, 1, _TURNSTILE)
        self.turnstile = False


_run_lock = _RunLock()


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
    held = _run_lock.hold(_serial(item))
    try:
        yield
    finally:
        if held:
            _run_lock.release(_serial(item) and _serial(nextitem))


# ---- attach broker output to failures, and a per-test time limit ---------------
@pytest.hookimpl(hookwrapper=True, tryfirst=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    rep = outcome.get_result()
    setattr(item, "rep_" + rep.when, rep)
    _carry_summary(rep)
    if rep.when == "call" and rep.failed:
        for b in _live:
            if os.path.exists(b.log_path):
                rep.sections.append((b.label, b.log_tail(80)))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_call(item):
    # pytest-timeout is not installed: a backstop so one stuck test cannot
    # eat the whole run.  Client calls in the tests carry their own
    # (shorter) timeouts; this only fires when one of them is ignored.
    # In the main thread a SIGALRM fails the test.  An xdist worker may run
    # tests in another thread (execnet 1.9), where no signal handler can be
    # set: there a timer raises the same error in the test's thread (at its
    # next Python instruction: a blocking call returns first).
    if threading.current_thread() is not threading.main_thread():
        watchdog = threading.Timer(TEST_TIMEOUT_S, _raise_in, (threading.get_ident(),))
        watchdog.daemon = True
        watchdog.start()
        try:
            yield
        finally:
            watchdog.cancel()
        return

    def on_alarm(signum, frame):
        raise TestTimedOut()
    old = signal.signal(signal.SIGALRM, on_alarm)
    signal.alarm(TEST_TIMEOUT_S)
    try:
        yield
    finally:
        signal.alarm(0)
        signal.signal(signal.SIGALRM, old)


class TestTimedOut(TimeoutError):
    __test__ = False

    def __init__(self):
        super().__init__("test exceeded %d s" % TEST_TIMEOUT_S)


def _raise_in(thread_id):
    ctypes.pythonapi.PyThreadState_SetAsyncExc(ctypes.c_ulong(thread_id),
                                               ctypes.py_object(TestTimedOut))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    yield
    if nextitem is None or nextitem.module is not item.module:
        # The module's fixtures (none lives longer) are finalized: a process
        # still running was never stopped.  Killed here by PID and reported
        # (in this teardown's report, pytest_runtest_makereport below); the
        # run fails (pytest_sessionfinish).
        for p in list(_live):
            if p.alive():
                _leaked_here.append("%s (pid %d), still running after %s"
                                    % (p.label, p.proc.pid, item.nodeid))
                p.kill()
    # Only the current test's brokers belong in its failure report.
    for b in list(_live):
        if not b.alive():
            _live.remove(b)


# ---- the run's summary: measured figures, leaked processes -----------------------
# Both travel in the test reports (user_properties), so that the process
# printing the summary sees them whether the tests ran in it or in xdist
# workers (run.sh -n 2).
_leaked_here = []  # found by this process since its last report
FIGURES_SEEN = []  # every report's, in the process printing the summary
LEAKED = []


def _carry_summary(rep):
    from support import FIGURES
    rep.user_properties += [("sluice_figure", f) for f in FIGURES]
    rep.user_properties += [("sluice_leaked", x) for x in _leaked_here]
    del FIGURES[:], _leaked_here[:]


def pytest_runtest_logreport(report):
    for key, value in report.user_properties:
        if key == "sluice_figure":
            FIGURES_SEEN.append(value)
        elif key == "sluice_leaked":
            LEAKED.append(value)


def pytest_terminal_summary(terminalreporter):
    # Figures the tests measured (support.report), shown even when they
    # pass: pytest keeps a passing test's own output to itself.
    if FIGURES_SEEN:
        terminalreporter.section("measured")
        for line in FIGURES_SEEN:
            terminalreporter.write_line(line)
    if LEAKED:
        terminalreporter.section("processes no test stopped (killed)", red=True)
        for line in LEAKED:
            terminalreporter.write_line(line)


def pytest_sessionfinish(session, exitstatus):
    for b in _live:
        b.kill()
    if LEAKED and session.exitstatus == 0:
        session.exitstatus = 1
