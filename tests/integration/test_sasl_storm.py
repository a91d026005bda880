"""Login storms on a SASL_PLAINTEXT listener (issue 18; daemon/security/sec_sasl.c inv. 3,
daemon/net/net_server.c inv. 9): 200 concurrent PLAIN logins (each one's PBKDF2
runs on a worker, not on the event loop) are all answered, right passwords
as their own users and wrong ones with SASL_AUTHENTICATION_FAILED, while an
already authenticated producer keeps being answered; connections that close
while their check is on the worker, and requests pipelined behind a pending
SaslAuthenticate, leave the broker unhurt."""
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import time

import pytest

from conftest import finish_broker
import kafka_raw as kr
from sasl_support import add_user, handshake, sql, start_sasl_broker

# 200 logins at once beside a producer whose latency is measured: alone (conftest.py X2).
pytestmark = pytest.mark.serial

API_SASL_AUTHENTICATE = 36
PLAIN_FAILED = "Authentication failed: Invalid username or password"
USERS = 100

# A separate process (its own GIL): SCRAM login, then one acks=1 Produce
# every 10 ms until the stop file appears; prints "ready" after its first
# answered Produce and, at the end, one JSON list of [sent_at, latency].
STEADY = r"""
import json, os, sys, time
sys.path.insert(0, sys.argv[1])
import kafka_raw as kr
from kafka.scram import ScramClient
port, user, pw, topic, stop = int(sys.argv[2]), sys.argv[3], sys.argv[4], sys.argv[5], sys.argv[6]
c = kr.Conn(port, timeout=30)
r = c.request(17, 1, kr.string("SCRAM-SHA-256"))
assert r.i16() == 0
sc = ScramClient(user, pw, "SCRAM-SHA-256")
r = c.request(36, 1, kr.nbytes(sc.first_message().encode()))
assert r.i16() == 0
r.string()
sc.process_server_first_message(r.nbytes().decode())
r = c.request(36, 1, kr.nbytes(sc.final_message().encode()))
assert r.i16() == 0
c.request(3, 4, kr.metadata_body(4, [topic]))
body = kr.produce_v3_body(topic, 0, kr.README_BATCH, acks=1)
deadline = time.monotonic() + 20
while kr.parse_produce_v3(c.request(0, 3, body, timeout=30))[0][2] != 0:
    assert time.monotonic() < deadline, "topic never became writable"
    time.sleep(0.1)
print("ready", flush=True)
samples = []
while not os.path.exists(stop):
    t = time.monotonic()
    err = kr.parse_produce_v3(c.request(0, 3, body, timeout=30))[0][2]
    assert err == 0, err
    samples.append([t, time.monotonic() - t])
    time.sleep(0.01)
print(json.dumps(samples), flush=True)
"""


@pytest.fixture(scope="module")
def sb():
    d = tempfile.mkdtemp(prefix="sluice-it-storm-")
    b = start_sasl_broker(os.path.join(d, "b"))
    add_user(b, "alice", "alice-secret")
    values = ", ".join("('storm-%d', 'SCRAM-SHA-256', 'pw-%d')" % (i, i) for i in range(USERS))
    st, body = sql(b, "INSERT INTO scram_credentials (name, mechanism, password) VALUES " +
                   values)
    if st != 200:                    # one row per statement then
        for i in range(USERS):
            add_user(b, "storm-%d" % i, "pw-%d" % i, ("SCRAM-SHA-256",))
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def plain_token(user, pw):
    return b"\0" + user.encode() + b"\0" + pw.encode()


def authenticate_frame(conn, token):
    return conn.build(API_SASL_AUTHENTICATE, 1, kr.nbytes(token))


def read_authenticate(conn, corr, timeout=30.0):
    got, r = conn.recv_response(timeout)
    assert got == corr
    return r.i16(), r.string()


class Steady:
    """The STEADY process; stop() returns its samples."""

    def __init__(self, b, topic):
        self.stop_file = os.path.join(b.workdir, "steady-stop-%s" % topic)
        self.proc = subprocess.Popen(
            [sys.executable, "-c", STEADY, os.path.dirname(os.path.abspath(__file__)),
             str(b.port), "alice", "alice-secret", topic, self.stop_file],
            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        line = self.proc.stdout.readline()
        if line.strip() != b"ready":
            self.proc.kill()
            self.proc.wait(10)
            raise AssertionError("steady producer: %r %s" % (line, self.proc.stderr.read()))

    def stop(self):
        open(self.stop_file, "w").close()
        try:
            out, err = self.proc.communicate(timeout=60)
        finally:
            if self.proc.poll() is None:
                self.proc.kill()
                self.proc.wait(10)
        assert self.proc.returncode == 0, err.decode()
        return json.loads(out.decode().strip().splitlines()[-1])

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(10)


def test_plain_login_storm_is_served_while_a_producer_keeps_being_answered(sb):
    # 200 logins at once, in lock step: 100 users' first login, 60 second
    # logins, 30 wrong passwords, 10 unknown users.
    plan = []
    for i in range(200):
        if i < 160:
            plan.append(("storm-%d" % (i % USERS), "pw-%d" % (i % USERS), True))
        elif i < 190:
            plan.append(("storm-%d" % (i % USERS), "not-pw-%d" % i, False))
        else:
            plan.append(("ghost-%d" % i, "pw-%d" % i, False))
    steady = Steady(sb, "storm-steady")
    conns = []
    try:
        time.sleep(1.0)              # the "before" samples
        t0 = time.monotonic()
        for _ in plan:
            conns.append(kr.Conn(sb.port, timeout=30))
        corrs = []
        for c in conns:
            corr, data = c.build(17, 1, kr.string("PLAIN"))
            c.send_raw(data)
            corrs.append(corr)
        for c, corr in zip(conns, corrs):
            got, r = c.recv_response(30)
            assert got == corr and r.i16() == 0
        corrs = []
        for c, (user, pw, _) in zip(conns, plan):
            corr, data = authenticate_frame(c, plain_token(user, pw))
            c.send_raw(data)
            corrs.append(corr)
        answers = [read_authenticate(c, corr) for c, corr in zip(conns, corrs)]
        t1 = time.monotonic()
        time.sleep(0.3)
        samples = steady.stop()
        for c, (user, _, ok), (err, msg) in zip(conns, plan, answers):
            if ok:
                assert err == 0, (user, err, msg)
                # served as an authenticated client
                r = c.request(kr.API_METADATA, 1, kr.metadata_body(1, []))
                assert r.array(lambda rr: (rr.i32(), rr.string(), rr.i32(), rr.string()))
            else:
                assert (err, msg) == (58, PLAIN_FAILED), (user, err, msg)
                assert c.wait_closed(10) == b""
        log = sb.log_text()
        for c, (user, _, ok) in zip(conns, plan):
            line = "SASL PLAIN authentication of User:%s from 127.0.0.1:%d" % (
                user, c.sock.getsockname()[1])
            assert (line in log) == ok, line
    finally:
        steady.kill()
        for c in conns:
            c.close()
    before = [lat for t, lat in samples if t < t0]
    during = [lat for t, lat in samples if t0 <= t < t1]
    storm = t1 - t0
    report = ("storm %.3f s; producer before: %d answers, max %.1f ms; during: %d answers, "
              "max %.1f ms" % (storm, len(before), max(before) * 1e3, len(during),
                               max(during or [0]) * 1e3))
    print(report)
    # A loop that did the logins' PBKDF2s itself would have answered the
    # producer a few times at most, each after most of the storm.
    assert len(before) >= 10, report
    assert len(during) >= 5, report
    assert sorted(during)[int(len(during) * 0.8)] < storm / 4, report
    # The right passwords entered the cache; a wrong one in between does not
    # push them out: the users log in again.
    for i in (0, 1, 2):
        with kr.Conn(sb.port) as c:
            assert handshake(c, "PLAIN")[0] == 0
            corr, data = authenticate_frame(c, plain_token("storm-%d" % i, "pw-%d" % i))
            c.send_raw(data)
            assert read_authenticate(c, corr)[0] == 0


def test_closed_while_the_plain_check_runs_and_requests_behind_it_wait(sb):
    # Closed right after sending the password: the check is on the worker
    # (first logins, wrong passwords, unknown users) when the socket goes.
    for i in range(60):
        c = kr.Conn(sb.port, timeout=30)
        assert handshake(c, "PLAIN")[0] == 0
        user, pw = [("storm-%d" % (i % USERS), "pw-%d" % (i % USERS)),
                    ("storm-%d" % (i % USERS), "nope"), ("ghost-%d" % i, "x")][i % 3]
        _, data = authenticate_frame(c, plain_token(user, pw))
        _, md = c.build(kr.API_METADATA, 1, kr.metadata_body(1, []))
        c.send_raw(data + md)
        if i % 2:                    # reset rather than FIN
            c.sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        c.close()
    time.sleep(0.5)
    assert sb.proc.poll() is None, sb.log_tail()
    # A Metadata pipelined behind a pending SaslAuthenticate: answered after
    # it, as an authenticated request (not refused as "before SASL").
    add_user(sb, "late", "late-pw", ("SCRAM-SHA-512",))   # PLAIN falls back to 512
    with kr.Conn(sb.port, timeout=30) as c:
        assert handshake(c, "PLAIN")[0] == 0
        acorr, data = authenticate_frame(c, plain_token("late", "late-pw"))
        mcorr, md = c.build(kr.API_METADATA, 1, kr.metadata_body(1, []))
        c.send_raw(data + md)
        assert read_authenticate(c, acorr)[0] == 0
        got, r = c.recv_response(30)
        assert got == mcorr
        brokers = r.array(lambda rr: (rr.i32(), rr.string(), rr.i32(), rr.string()))
        assert [p for _, _, p, _ in brokers] == [sb.port]
    # ... and the same behind a wrong password: the answer, then the close,
    # the Metadata never served.
    with kr.Conn(sb.port, timeout=30) as c:
        assert handshake(c, "PLAIN")[0] == 0
        acorr, data = authenticate_frame(c, plain_token("late", "wrong"))
        _, md = c.build(kr.API_METADATA, 1, kr.metadata_body(1, []))
        c.send_raw(data + md)
        assert read_authenticate(c, acorr) == (58, PLAIN_FAILED)
        assert c.wait_closed(10) == b""
    # kafka-python's way (SaslHandshake v0, raw tokens): the deferred answer
    # is an empty raw token; a wrong password just closes.
    with kr.Conn(sb.port, timeout=30) as c:
        assert handshake(c, "PLAIN", version=0)[0] == 0
        c.send_raw(kr.nbytes(plain_token("storm-7", "pw-7")))
        c._fill(4, time.monotonic() + 30)          # an empty token: its length alone
        assert c.buf == b"\0\0\0\0"
        c.buf = b""
        r = c.request(kr.API_METADATA, 1, kr.metadata_body(1, []))
        assert r.array(lambda rr: (rr.i32(), rr.string(), rr.i32(), rr.string()))
    with kr.Conn(sb.port, timeout=30) as c:
        assert handshake(c, "PLAIN", version=0)[0] == 0
        c.send_raw(kr.nbytes(plain_token("storm-8", "bad")))
        assert c.wait_closed(10) == b""
    log = sb.log_text()
    assert "SASL PLAIN authentication of User:late from" in log
    assert sb.proc.poll() is None, sb.log_tail()
