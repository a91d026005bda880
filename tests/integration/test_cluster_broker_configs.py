"""Dynamic broker configs in cluster mode (issue 17, item 3): AlterConfigs
and IncrementalAlterConfigs on BROKER resources go to ZooKeeper's
/config/brokers/<default> and /config/brokers/<id> (Kafka's layout, with a
/config/changes/config_change_<seq> notification), are applied on every
broker they concern and described there with their source, and a broker
that restarts takes them from ZooKeeper (its SQLite is its local copy)."""
import json

import pytest
from confluent_kafka.admin import ConfigResource, ConfigSource, NewTopic

from cluster_support import (leader_and_isr, make_cluster, registered_ids, wait_for,  # noqa: F401
                             zk, cl_zk_children, cl_zk_get, zk_missing)
from support import ck_admin, topic_name
from test_broker_dynamic_configs import (MESSAGE_TOO_LARGE, alter_broker, big_message_error,
                                         describe, describe_default, incremental_default,
                                         source)

if zk_missing():
    pytest.skip("ZooKeeper cannot run: " + zk_missing(), allow_module_level=True)

BROKER = ConfigResource.Type.BROKER
DYNAMIC, DEFAULT_DYNAMIC = ConfigSource.DYNAMIC_BROKER_CONFIG, \
    ConfigSource.DYNAMIC_DEFAULT_BROKER_CONFIG


def broker_entry(b, key):
    e = describe(b, BROKER, str(b.broker_id))[key]
    return e.value, source(e)


def znode_config(c, name):
    got = cl_zk_get(c.zk_connect, "/config/brokers/" + name)
    return json.loads(got[0]) if got else None


def notifications(c):
    out = []
    for child in cl_zk_children(c.zk_connect, "/config/changes"):
        data, _v = cl_zk_get(c.zk_connect, "/config/changes/" + child)
        out.append((child, json.loads(data)))
    return out


def test_broker_configs_live_in_zookeeper_and_reach_the_brokers_they_concern(make_cluster):
    c = make_cluster(3)
    b1, b2, b3 = c.brokers
    t = topic_name("dynzk")
    ck_admin(b1).create_topics([NewTopic(t, num_partitions=1, replica_assignment=[[3]])],
                               operation_timeout=15)[t].result(timeout=20)
    wait_for(lambda: (leader_and_isr(b3, t) or (None,))[0] == 3, 20, "%s led by broker 3" % t)
    assert big_message_error(b3, t) == 0

    # the cluster-wide default, set on broker 1: in ZooKeeper once answered
    assert incremental_default(b1, "message.max.bytes", "2000") == [(0, None, 4, "")]
    assert znode_config(c, "<default>") == {"version": 1,
                                            "config": {"message.max.bytes": "2000"}}
    (name, note), = notifications(c)
    assert name.startswith("config_change_") and len(name) == len("config_change_") + 10
    assert note == {"version": 2, "entity_path": "brokers/<default>"}
    assert broker_entry(b1, "message.max.bytes") == ("2000", DEFAULT_DYNAMIC)
    # ... applied on broker 3 (a produce it leads is refused) and described there
    wait_for(lambda: describe_default(b3).get("message.max.bytes") == ("2000", DEFAULT_DYNAMIC),
             15, "broker 3 to show the default set")
    assert broker_entry(b3, "message.max.bytes") == ("2000", DEFAULT_DYNAMIC)
    e = describe(b3, ConfigResource.Type.TOPIC, t)["max.message.bytes"]
    assert (e.value, source(e)) == ("2000", DEFAULT_DYNAMIC)
    assert big_message_error(b3, t) == MESSAGE_TOO_LARGE
    assert c.sql(b3, "SELECT broker_id, name, value, source FROM broker_configs") == [
        {"broker_id": None, "name": "message.max.bytes", "value": "2000",
         "source": "dynamic_default"}]

    # broker 2's own set (a broker resource goes to that broker, as in Kafka)
    alter_broker(b2, "2", {"log.retention.ms": "4321"})
    assert znode_config(c, "2") == {"version": 1, "config": {"log.retention.ms": "4321"}}
    assert notifications(c)[-1][1] == {"version": 2, "entity_path": "brokers/2"}
    assert broker_entry(b2, "log.retention.ms") == ("4321", DYNAMIC)
    assert broker_entry(b2, "message.max.bytes") == ("2000", DEFAULT_DYNAMIC)
    assert broker_entry(b3, "log.retention.ms")[1] not in (DYNAMIC, DEFAULT_DYNAMIC)
    assert broker_entry(b1, "log.retention.ms")[1] not in (DYNAMIC, DEFAULT_DYNAMIC)

    # broker 2 restarts: its own set survives, and a default changed while
    # it was down reaches it from ZooKeeper (not its older local copy)
    b2.stop()
    assert incremental_default(b1, "message.max.bytes", "3000") == [(0, None, 4, "")]
    wait_for(lambda: broker_entry(b3, "message.max.bytes") == ("3000", DEFAULT_DYNAMIC), 15,
             "broker 3 to apply the new default")
    b2.start()
    wait_for(lambda: registered_ids(b1) == {1, 2, 3}, 30, "broker 2 registered again")
    wait_for(lambda: broker_entry(b2, "message.max.bytes") == ("3000", DEFAULT_DYNAMIC), 15,
             "broker 2 to take the default from ZooKeeper")
    assert broker_entry(b2, "log.retention.ms") == ("4321", DYNAMIC)
