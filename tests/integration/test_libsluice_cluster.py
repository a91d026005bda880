"""libsluice against a 3-broker cluster: a synchronous commit made while the
group coordinator's broker is dead (SIGKILLed) asks again who coordinates
and commits there, within the failover time, instead of waiting out
request.timeout.ms on the dead broker."""
import ctypes as C
import time

from confluent_kafka.admin import NewTopic

import libsluice_ctypes as lsc
from cluster_support import cluster, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, report, topic_name
from test_cluster_groups import agreed_coordinator


def test_a_sync_commit_finds_the_new_coordinator_when_its_broker_dies(cluster):
    brokers = cluster.brokers
    t = topic_name("lscoord")
    fs = ck_admin(brokers[0]).create_topics([NewTopic(t, 1, 3)], operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: agreed_coordinator(brokers, "g0"), 30, "a coordinator for any group")
    group = "lsc-" + t
    coord = cluster.broker(wait_for(lambda: agreed_coordinator(brokers, group), 30,
                                    "a coordinator for " + group))
    lib = lsc.lib()
    lib.sl_consumer_commit.argtypes = [C.c_void_p, C.POINTER(lsc.TP), C.c_int, C.c_int]
    c = lsc.Consumer(lib, {"bootstrap.servers": cluster.bootstrap, "group.id": group,
                           "enable.auto.commit": "false", "request.timeout.ms": "30000",
                           "log_level": "3"})
    try:
        def commit(off):
            arr = (lsc.TP * 1)(lsc.TP(t.encode(), 0, off, 0))
            t0 = time.monotonic()
            rc = lib.sl_consumer_commit(c.h, arr, 1, 0)
            return rc, arr[0].err, time.monotonic() - t0
        assert commit(10)[:2] == (0, 0)
        coord.kill()
        rc, err, took = commit(20)
        report("coordinator %d SIGKILLed: the next sync commit returned %d after %.2f s",
               coord.broker_id, rc, took)
        assert (rc, err) == (0, 0), lib.sl_err_name(rc)
        assert took < cluster.session_timeout_s + 10, took       # request.timeout.ms: 30 s
        assert c.committed([(t, 0)]) == [20]
    finally:
        c.close()
