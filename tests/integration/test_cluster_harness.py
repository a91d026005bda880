"""The cluster harness itself (cluster_support.py): a real ZooKeeper that
starts, stops, restarts on its port with its data, pauses and resumes;
cluster brokers on ports and data dirs of their own that answer SQL; and
every process gone, by PID, once a cluster is closed."""
import os
import subprocess
import time

from cluster_support import make_cluster, proc_state as state, wait_for, zk  # noqa: F401
from test_sluice_sql import shell_path


def test_zookeeper_stops_restarts_on_its_port_pauses_and_resumes(zk):
    assert zk.serving()
    assert "Mode: standalone" in zk.four("srvr")
    port, pid = zk.port, zk.proc.pid
    zk.sigstop()
    assert state(pid) == "T" and not zk.ruok()
    zk.sigcont()
    wait_for(zk.serving, 5, "ZooKeeper to answer again after SIGCONT")
    assert zk.stop() is not None and state(pid) is None and not zk.ruok()
    zk.start()
    assert zk.port == port and zk.proc.pid != pid and zk.serving()
    assert os.listdir(os.path.join(zk.data_dir, "version-2")), "the data dir was not kept"
    zk.kill()
    assert state(zk.proc.pid) is None
    zk.ensure_running()
    assert zk.port == port and zk.serving()


def test_cluster_brokers_have_own_ports_and_dirs_and_are_killed_by_pid(make_cluster, zk):
    c = make_cluster(3)
    assert [b.broker_id for b in c.brokers] == [1, 2, 3]
    ports = [b.port for b in c.brokers] + [b.admin_port for b in c.brokers]
    assert len(set(ports)) == 6 and zk.port not in ports
    assert len({b.data_dir for b in c.brokers}) == 3
    for b in c.brokers:
        assert "zookeeper.connect=127.0.0.1:%d%s" % (zk.port, c.chroot) in " ".join(b.argv())
        assert c.sql(b, "select 1 as one") == [{"one": 1}]
        r = subprocess.run([shell_path(), "-b", b.admin, "--format", "csv", "-c",
                            "select count(*) from brokers where id = %d" % b.broker_id],
                           capture_output=True, text=True, timeout=30)
        assert r.returncode == 0 and r.stdout.splitlines()[-1] == "1", (r.stdout, r.stderr)
    b1, b2, b3 = c.brokers
    b2.sigstop()
    assert state(b2.proc.pid) == "T"
    b2.sigcont()
    assert c.sql(b2, "select 2 as two") == [{"two": 2}]
    # A clean stop (in cluster mode its session ends with it, so the same
    # broker id can register again at once), then a start on the same ports.
    old = b3.proc.pid
    assert b3.stop() == 0 and state(old) is None
    b3.start()
    assert b3.proc.pid != old and c.sql(b3, "select 3 as three") == [{"three": 3}]
    old = b2.proc.pid
    b2.kill()
    assert state(old) is None and b2.proc.returncode == -9
    # Closing kills every PID, a paused broker's too, without waiting out its stop timeout.
    pids = [b.proc.pid for b in c.brokers]
    b1.sigstop()
    t0 = time.monotonic()
    assert c.close() == []
    assert time.monotonic() - t0 < 10
    assert [state(p) for p in pids] == [None, None, None]
