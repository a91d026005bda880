"""The harness's ports (conftest P1-P3): free_port() hands out ports outside
the ephemeral range, once per machine while a run lives, and a process
whose port another program took before it bound it moves to another one
(a restarted one does not: its clients know the port)."""
import fcntl
import socket
import subprocess
import sys

import pytest

import conftest
import kafka_raw as kr
from cluster_support import ZooKeeper, zk_missing
from conftest import Broker, BrokerDied, finish_broker, free_port, listening_ports


def squat(port):
    """Another program listening on port (as one that knows nothing of conftest.py P2)."""
    s = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    # SO_REUSEADDR: a connection of ours lingering in TIME_WAIT on the
    # port must not stop us; it does not let a second listener bind.
    s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    s.bind(("127.0.0.1", port))
    s.listen(1)
    return s


def test_free_port_hands_out_distinct_ports_outside_the_ephemeral_range():
    with open("/proc/sys/net/ipv4/ip_local_port_range") as f:
        lo, hi = (int(x) for x in f.read().split())
    ports = [free_port() for _ in range(300)]
    assert len(set(ports)) == len(ports)
    inside = [p for p in ports if lo <= p <= hi]
    assert not inside, "ports in the ephemeral range %d-%d: %s" % (lo, hi, inside[:10])
    for p in ports[:20]:
        squat(p).close()            # nobody had it


def test_a_port_handed_out_is_not_handed_to_another_run():
    p = free_port()
    # Another run whose only candidate is p finds it reserved; once this
    # run's reservation goes (a run that ended), it gets p.
    child = ("import sys; sys.path.insert(0, %r); import conftest\n"
             "conftest._ports.lo = conftest._ports.hi = %d\n"
             "try:\n    print(conftest.free_port())\n"
             "except RuntimeError as e:\n    print(e)\n") % (conftest.HERE, p)
    out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                         timeout=30)
    assert out.stdout.strip() == "free_port: every port in %d-%d is taken" % (p, p), out
    fcntl.lockf(conftest._ports.fd, fcntl.LOCK_UN, 1, p)
    try:
        out = subprocess.run([sys.executable, "-c", child], capture_output=True, text=True,
                             timeout=30)
        assert out.stdout.strip() == str(p), out
    finally:
        fcntl.lockf(conftest._ports.fd, fcntl.LOCK_EX | fcntl.LOCK_NB, 1, p)


def test_broker_moves_off_ports_taken_before_its_first_start(tmp_path):
    b = Broker(str(tmp_path), {"admin.listeners": "http://127.0.0.1:%d" % free_port()})
    old_port, old_admin = b.port, b.admin_port
    squatters = [squat(old_port), squat(old_admin)]
    try:
        b.start()
        assert b.port not in (old_port, old_admin) and b.admin_port not in (old_port, old_admin)
        assert b.bootstrap == "127.0.0.1:%d" % b.port
        assert {b.port, b.admin_port} <= listening_ports(b.proc.pid)
        with kr.Conn(b.port, timeout=10) as c:
            m = kr.parse_metadata(c.request(kr.API_METADATA, 1, kr.metadata_body(1, [], False),
                                            timeout=10), 1)
        assert [(n, p) for n, _h, p, _r in m["brokers"]] == [(b.broker_id, b.port)]
        log = b.log_text()
        for old in (old_port, old_admin):
            assert "port %d was taken by another process: retrying on" % old in log, log
        # A restart keeps the ports: this one's is taken now, so it fails.
        b.stop()
        squatters.append(squat(b.port))
        with pytest.raises(BrokerDied, match="cannot listen on PLAINTEXT://127.0.0.1:%d" % b.port):
            b.start()
    finally:
        for s in squatters:
            s.close()
        b.expect_dead = True
        finish_broker(b)


@pytest.mark.skipif(bool(zk_missing()), reason="ZooKeeper cannot run")
def test_zookeeper_moves_off_a_port_taken_before_its_first_start(tmp_path):
    zk = ZooKeeper(str(tmp_path))
    old = zk.port
    s = squat(old)
    try:
        zk.start()
        assert zk.port != old and zk.port in listening_ports(zk.proc.pid)
        assert zk.serving()
        assert "port %d was taken by another process: retrying on %d" % (old, zk.port) \
            in zk.log_text()
    finally:
        s.close()
        zk.kill()
        assert not zk.alive()
