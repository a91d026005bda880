"""The schema registry in cluster mode (issue 31): _schemas is replicated
like any topic (replication factor 3); the leader of its partition 0 is the
one writer; every broker serves what it replicated; the registry survives
SIGKILL of that leader; a broker that was down catches up."""
import pytest
import requests

from cluster_support import leader_and_isr, make_cluster, wait_for, zk, zk_missing  # noqa: F401
from conftest import free_port
from registry_support import record_schema

S1 = record_schema("Ev", [("id", "long")])
S2 = record_schema("Ev", [("id", "long"), ("tag", "string", "")])


def url(b, path):
    return b.overrides["schema.registry.listeners"] + path


def get(b, path):
    try:
        r = requests.get(url(b, path), timeout=5)
        return r.status_code, r.json()
    except (requests.RequestException, ValueError):
        return None, None


def register(b, subject, schema):
    import json
    r = requests.post(url(b, "/subjects/%s/versions" % subject),
                      data=json.dumps({"schema": json.dumps(schema)}),
                      headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                      timeout=15)
    return r.status_code, r.json()


def register_on_leader(c, subject, schema, timeout=60):
    """Registers through the leader of _schemas-0 (after the first write
    made the topic), retrying while leadership moves; returns (broker, id)."""
    got = {}

    def attempt():
        for b in c.brokers:
            if not b.alive():
                continue
            st, body = register(b, subject, schema)
            if st == 200:
                got["r"] = (b, body["id"])
                return True
        return False
    wait_for(attempt, timeout, "a registration of %s through the _schemas leader" % subject,
             interval=0.5)
    return got["r"]


@pytest.fixture
def reg_cluster(make_cluster):
    c = make_cluster(3, start=False)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    return c.start()


def test_registered_on_the_leader_served_by_every_broker_and_after_its_sigkill(reg_cluster):
    c = reg_cluster
    leader, sid = register_on_leader(c, "ev-value", S1)
    assert sid == 1
    lead = leader_and_isr(leader, "_schemas")
    assert lead and lead[0] == leader.broker_id and len(lead[1]) == 3, lead
    # a non-leader refuses writes, naming the leader
    other = next(b for b in c.brokers if b is not leader)
    st, body = register(other, "ev-value", S2)
    assert st == 500 and body["error_code"] == 50003, body
    assert "broker %d does" % leader.broker_id in body["message"], body
    for b in c.brokers:
        wait_for(lambda b=b: get(b, "/schemas/ids/1")[0] == 200, 10,
                 "broker %d to serve schema 1" % b.broker_id)
        assert get(b, "/subjects/ev-value/versions") == (200, [1])
    # SIGKILL the _schemas leader: another takes over, keeps every id, writes
    leader.kill()
    rest = [b for b in c.brokers if b is not leader]
    new, sid2 = register_on_leader(c, "ev-value", S2)
    assert new is not leader and sid2 == 2
    for b in rest:
        wait_for(lambda b=b: get(b, "/subjects/ev-value/versions") == (200, [1, 2]), 10,
                 "broker %d to serve both versions" % b.broker_id)
    # the killed broker comes back and catches up through replication
    leader.start()
    wait_for(lambda: get(leader, "/subjects/ev-value/versions") == (200, [1, 2]), 60,
             "the restarted broker to catch up")
    assert get(leader, "/schemas/ids/2")[1] == get(new, "/schemas/ids/2")[1]
