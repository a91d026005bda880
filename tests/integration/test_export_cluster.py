"""sluice-export against a 3-broker cluster whose partition leader is
SIGKILLed mid-export: the files still hold the topic exactly (each record
once, bytes equal), read back with python3-avro."""
import os
import subprocess
import time

from confluent_kafka.admin import NewTopic

from cluster_support import make_cluster, wait_for, zk, zk_missing  # noqa: F401
from support import ck_admin, ck_producer, topic_name
from test_cluster_txn_eos import all_in_sync, leaders
from test_export import assert_exact, expected_of, exporter, mixed_records, read_tree, send


def test_a_leader_killed_mid_export_changes_nothing_in_the_files(make_cluster, tmp_path):
    cluster = make_cluster(3)
    t = topic_name("exc")
    fs = ck_admin(cluster.brokers[0]).create_topics(
        [NewTopic(t, 3, 3, config={"min.insync.replicas": "2"})], operation_timeout=15)
    fs[t].result(timeout=20)
    wait_for(lambda: all_in_sync(cluster.brokers[0], t, 3), 30, "three replicas in sync")
    sent = send(ck_producer(cluster.brokers[0], **{"bootstrap.servers": cluster.bootstrap}),
                t, mixed_records(6000, seed=11))
    victim = leaders(cluster.brokers[0], t)[0]
    p = subprocess.Popen([exporter(), "--bootstrap", cluster.bootstrap, "--topic", t,
                          "--to", str(tmp_path), "--until-end", "--max-records", "20"],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        pdir = os.path.join(str(tmp_path), t, "partition=0")
        wait_for(lambda: os.path.isdir(pdir) and any(n.endswith(".avro") for n in os.listdir(pdir)),
                 30, "the first file of partition 0")
        running = p.poll() is None
        cluster.broker(victim).kill()
        try:
            out, err = p.communicate(timeout=120)
        except subprocess.TimeoutExpired:
            p.kill()
            out, err = p.communicate()
            files = sum(len(os.listdir(os.path.join(str(tmp_path), t, d)))
                        for d in os.listdir(os.path.join(str(tmp_path), t)))
            raise AssertionError("the export hung (%d files); stderr: %s" % (
                files, err.decode(errors="replace")[-3000:]))
    finally:
        if p.poll() is None:
            p.kill()
            p.communicate()
    assert running, "the export ended before the leader was killed"
    assert p.returncode == 0, err.decode(errors="replace")
    assert_exact(expected_of(sent), read_tree(tmp_path, t))
