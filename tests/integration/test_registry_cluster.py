"""The schema registry in cluster mode (issue 31): _schemas is replicated
like any topic (replication factor 3); the leader of its partition 0 is the
one writer, and the other brokers forward writes to it; every broker serves
what it replicated; the registry survives SIGKILL of that leader; a broker
that was down catches up."""
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


def register_anywhere(c, subject, schema, timeout=60):
    """Registers through the first live broker that answers 200 (any: the
    others forward to the leader), retrying while _schemas is created or its
    leadership moves; returns (that broker, id)."""
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
    wait_for(attempt, timeout, "a registration of %s" % subject, interval=0.5)
    return got["r"]


def schemas_leader(c):
    """The broker leading _schemas-0 with all three in sync, as Metadata says."""
    got = {}

    def find():
        for b in c.brokers:
            li = b.alive() and leader_and_isr(b, "_schemas")
            if li and li[0] >= 0 and len(li[1]) == 3:
                got["b"] = c.broker(li[0])
                return True
        return False
    wait_for(find, 30, "_schemas-0 to have a leader and three in sync")
    return got["b"]


@pytest.fixture
def reg_cluster(make_cluster):
    c = make_cluster(3, start=False)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    return c.start()


def test_registered_on_the_leader_served_by_every_broker_and_after_its_sigkill(reg_cluster):
    c = reg_cluster
    _, sid = register_anywhere(c, "ev-value", S1)
    assert sid == 1
    leader = schemas_leader(c)
    # a write to a follower is forwarded to the leader's registry and answered
    others = [b for b in c.brokers if b is not leader]
    assert register(others[0], "fw-value", S1) == (200, {"id": 1})   # same schema, same id
    assert register(others[1], "fw-value", S1) == (200, {"id": 1})
    st, body = register(others[1], "other-value", record_schema("O", [("o", "int")]))
    assert (st, body) == (200, {"id": 2}), body
    st, body = register(others[0], "other-value", record_schema("O", [("o", "string")]))
    assert st == 409 and body["error_code"] == 409, body        # the leader's verdict
    for b in c.brokers:
        wait_for(lambda b=b: get(b, "/schemas/ids/2")[0] == 200, 10,
                 "broker %d to serve schema 1" % b.broker_id)
        assert get(b, "/subjects/ev-value/versions") == (200, [1])
    # SIGKILL the _schemas leader: another takes over, keeps every id, writes
    leader.kill()
    rest = [b for b in c.brokers if b is not leader]
    _, sid2 = register_anywhere(c, "ev-value", S2)
    assert sid2 == 3
    new = next(b for b in rest if (leader_and_isr(b, "_schemas") or (-1,))[0] == b.broker_id)
    for b in rest:
        wait_for(lambda b=b: get(b, "/subjects/ev-value/versions") == (200, [1, 2]), 10,
                 "broker %d to serve both versions" % b.broker_id)
    # the killed broker comes back and catches up through replication
    leader.start()
    wait_for(lambda: get(leader, "/subjects/ev-value/versions") == (200, [1, 2]), 60,
             "the restarted broker to catch up")
    assert get(leader, "/schemas/ids/3")[1] == get(new, "/schemas/ids/3")[1]
    # and the restarted broker, now a follower, forwards too
    st, body = register(leader, "late-value", record_schema("L", [("l", "int")]))
    assert (st, body) == (200, {"id": 4}), body


def test_a_forward_in_flight_is_answered_when_the_leader_stops(reg_cluster):
    """A write forwarded to a leader that stops answering (SIGSTOP) gets an
    answer within the forward timeout (15 s), also when leadership moves
    meanwhile and the next write replaces the connection it waits on
    (libevent frees a connection's requests without calling them back)."""
    import json
    import threading
    import time
    c = reg_cluster
    register_anywhere(c, "ev-value", S1)
    leader = schemas_leader(c)
    others = [b for b in c.brokers if b is not leader]
    for b in others:
        assert register(b, "ev-value", S1) == (200, {"id": 1})   # their connections are up
    got = {}

    def stuck_write(b):
        t0 = time.monotonic()
        try:
            r = requests.post(url(b, "/subjects/stuck-value/versions"),
                              data=json.dumps({"schema": json.dumps(S2)}),
                              headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                              timeout=40)
            got[b.broker_id] = (r.status_code, r.json(), time.monotonic() - t0)
        except requests.RequestException as e:
            got[b.broker_id] = (None, repr(e), time.monotonic() - t0)
    leader.sigstop()
    try:
        threads = [threading.Thread(target=stuck_write, args=(b,)) for b in others]
        for t in threads:
            t.start()
        # leadership moves once the stopped broker's session expires; the next
        # write to the broker that does not lead then forwards to the new leader,
        # on a new connection
        moved = {}

        def find():
            li = leader_and_isr(others[0], "_schemas") or (-1,)
            moved["to"] = li[0]
            return li[0] in [b.broker_id for b in others]
        wait_for(find, 30, "_schemas-0 to move")
        other = next(b for b in others if b.broker_id != moved["to"])
        st, body = register(other, "after-value", S1)
        for t in threads:
            t.join(45)
        assert not any(t.is_alive() for t in threads)
        for b in others:
            st1, body1, secs = got[b.broker_id]
            assert st1 == 500 and body1["error_code"] == 50003 and secs < 20, got
        # the write that replaced the connection is answered too: by the new leader
        # (200), or refused while its ISR shrinks (50002/50003), never left hanging
        assert (st, body) == (200, {"id": 1}) or (st == 500 and body["error_code"] in
                                                   (50002, 50003)), (st, body)
    finally:
        leader.sigcont()


def test_a_broker_without_a_replica_of_schemas_serves_reads(make_cluster):
    """Four brokers, _schemas with replication factor 3: the broker with no
    replica reads the topic from its leader as a consumer would, and serves
    every id and subject (and SQL's schemas) right after a registration made
    elsewhere."""
    import json
    c = make_cluster(4, start=False)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    c.start()
    _, sid = register_anywhere(c, "ev-value", S1)
    got = {}

    def three_in_sync():
        li = leader_and_isr(c.brokers[0], "_schemas")
        got["li"] = li
        return bool(li) and li[0] >= 0 and len(li[1]) == 3
    wait_for(three_in_sync, 30, "_schemas-0 to have three in sync")
    leader, isr = got["li"]
    outsider = next(b for b in c.brokers if b.broker_id not in isr)
    replica = next(b for b in c.brokers if b.broker_id in isr and b.broker_id != leader)
    wait_for(lambda: get(outsider, "/schemas/ids/%d" % sid)[0] == 200, 10,
             "the broker without a replica to serve schema %d" % sid)
    assert get(outsider, "/schemas/ids/%d" % sid) == get(c.broker(leader), "/schemas/ids/%d" % sid)
    # a registration on another broker is served by it shortly after
    st, body = register(replica, "late-value", S2)
    assert st == 200, body
    sid2 = body["id"]
    wait_for(lambda: get(outsider, "/schemas/ids/%d" % sid2)[0] == 200, 5,
             "the broker without a replica to serve schema %d" % sid2)
    served = {i: get(c.broker(leader), "/schemas/ids/%d" % i)[1]["schema"] for i in (sid, sid2)}
    assert get(outsider, "/schemas/ids/%d" % sid2) == (200, {"schema": served[sid2]})
    assert json.loads(served[sid2]) == S2
    assert get(outsider, "/subjects") == (200, ["ev-value", "late-value"])
    assert get(outsider, "/subjects/late-value/versions/1")[1]["id"] == sid2
    rows = outsider.sql("SELECT id, schema FROM schemas ORDER BY id")
    assert [(r["id"], r["schema"]) for r in rows] == [(sid, served[sid]),
                                                      (sid2, served[sid2])]
    # and it forwards writes like any broker that does not lead
    st, body = register(outsider, "out-value", S1)
    assert (st, body) == (200, {"id": sid}), body



def test_writes_are_forwarded_to_an_https_leader(make_cluster, tmp_path):
    """schema.registry.listeners=https:// on every broker: a follower forwards
    a write to the leader's registry over TLS (verified with the truststore)
    and relays its answer."""
    import json
    from tls_support import make_certs, ssl_overrides
    certs = make_certs(str(tmp_path))
    c = make_cluster(3, start=False)
    for b in c.brokers:
        b.overrides.update(ssl_overrides(certs, "none"))
        b.overrides["schema.registry.listeners"] = "https://127.0.0.1:%d" % free_port()
    c.start()

    def post(b, subject, schema):
        r = requests.post(url(b, "/subjects/%s/versions" % subject),
                          data=json.dumps({"schema": json.dumps(schema)}),
                          headers={"Content-Type": "application/vnd.schemaregistry.v1+json"},
                          verify=certs.ca.crt, timeout=15)
        return r.status_code, r.json()

    def first():
        return any(b.alive() and post(b, "tls-value", S1)[0] == 200 for b in c.brokers)
    wait_for(first, 60, "a first registration", interval=0.5)
    leader = schemas_leader(c)
    for b in c.brokers:
        if b is not leader:
            assert post(b, "tls-value", S1) == (200, {"id": 1})
            assert post(b, "tls-%d-value" % b.broker_id, S1) == (200, {"id": 1})
    r = requests.get(url(leader, "/subjects"), verify=certs.ca.crt, timeout=15)
    assert sorted(r.json()) == sorted(["tls-value"] + ["tls-%d-value" % b.broker_id
                                                       for b in c.brokers if b is not leader])


def test_concurrent_writes_through_a_fresh_follower_are_all_answered(reg_cluster):
    """8 writes at once through a follower that has not forwarded yet: each
    asks for the leader's registry URL, and every answer but the first finds
    the connection the others were sent on; none is closed under them (a
    false 50003 "moved to another leader") and all 8 are registered."""
    import threading
    c = reg_cluster
    first, sid = register_anywhere(c, "ev-value", S1)
    leader = schemas_leader(c)
    tried = c.brokers[:c.brokers.index(first) + 1]
    fresh = [b for b in c.brokers if b is not leader and b not in tried]
    if not fresh:                                # every follower forwarded: start one anew
        fresh = [next(b for b in c.brokers if b is not leader)]
        fresh[0].stop()
        fresh[0].start()
        wait_for(lambda: get(fresh[0], "/subjects/ev-value/versions") == (200, [1]), 60,
                 "the restarted follower to catch up")
    f = fresh[0]
    go = threading.Barrier(8)
    got = {}

    def write(i):
        go.wait(10)
        try:
            got[i] = register(f, "c%d-value" % i, S1)
        except requests.RequestException as e:
            got[i] = (None, repr(e))
    threads = [threading.Thread(target=write, args=(i,)) for i in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(40)
    assert got == {i: (200, {"id": sid}) for i in range(8)}
    st, subjects = get(leader, "/subjects")
    assert st == 200 and sorted(subjects) == sorted(["ev-value"] + ["c%d-value" % i
                                                                    for i in range(8)])


def test_a_leader_registry_address_this_broker_cannot_connect_to_is_answered_once(
        make_cluster):
    """The leader's registry URL names a host this broker cannot resolve
    ("[::1]" as written in the listener, brackets and all): libevent answers
    the forward inside evhttp_make_request.  Each write is answered 50003
    once, the follower keeps serving (no use of the freed forward, no second
    answer: the cluster's teardown fails the test if a broker died).  Should
    sr_forward.c's url_answered learn to strip an IPv6 literal's brackets,
    this test needs another name that does not resolve."""
    c = make_cluster(3, start=False)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://[::1]:%d" % free_port()
    c.start()
    register_anywhere(c, "ev-value", S1)         # only the leader answers 200
    leader = schemas_leader(c)
    for b in c.brokers:
        if b is leader:
            continue
        for i in range(3):
            st, body = register(b, "f%d-value" % i, S2)
            assert st == 500 and body["error_code"] == 50003, body
            assert "leader (broker %d)" % leader.broker_id in body["message"], body
        wait_for(lambda b=b: get(b, "/subjects/ev-value/versions") == (200, [1]), 10,
                 "broker %d to serve ev-value" % b.broker_id)
        assert b.alive()
    assert get(leader, "/subjects") == (200, ["ev-value"])


def test_a_broker_without_a_replica_starts_over_when_schemas_is_made_again(make_cluster):
    """_schemas deleted and made again, shorter than what the broker without
    a replica applied: its leader answers OFFSET_OUT_OF_RANGE past its log
    start, and that broker drops what it held and reads the new log from its
    start (it used to stall there, serving the old registry forever)."""
    import json
    from confluent_kafka import Producer
    from confluent_kafka.admin import NewTopic
    from support import ck_admin, ck_conf
    c = make_cluster(4, start=False)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    c.start()
    register_anywhere(c, "ev-value", S1)
    register_anywhere(c, "ev-value", S2)
    register_anywhere(c, "more-value", record_schema("M", [("m", "int")]))
    li = leader_and_isr(c.brokers[0], "_schemas")
    outsider = next(b for b in c.brokers if b.broker_id not in li[1])
    wait_for(lambda: get(outsider, "/subjects") == (200, ["ev-value", "more-value"]), 10,
             "the broker without a replica to serve both subjects")
    others = [b.broker_id for b in c.brokers if b is not outsider]
    admin = ck_admin(outsider)
    for f in admin.delete_topics(["_schemas"], request_timeout=15).values():
        f.result(timeout=30)

    def made_again():
        fs = admin.create_topics([NewTopic("_schemas", num_partitions=1,
                                           replica_assignment=[others[:3]],
                                           config={"cleanup.policy": "compact"})],
                                 request_timeout=15)
        try:
            fs["_schemas"].result(timeout=15)
            return True
        except Exception:                        # still being deleted
            return False
    wait_for(made_again, 30, "_schemas to be made again", interval=0.5)
    new = {"type": "record", "name": "N", "fields": [{"name": "n", "type": "long"}]}
    p = Producer(ck_conf(outsider, **{"bootstrap.servers": c.bootstrap, "acks": "all"}))
    key = json.dumps({"keytype": "SCHEMA", "subject": "new-value", "version": 1, "magic": 1})
    val = json.dumps({"subject": "new-value", "version": 1, "id": 1,
                      "schema": json.dumps(new), "deleted": False})
    p.produce("_schemas", key=key.encode(), value=val.encode(), partition=0)
    assert p.flush(30) == 0
    wait_for(lambda: get(outsider, "/subjects") == (200, ["new-value"]), 20,
             "the broker without a replica to read _schemas again")
    st, body = get(outsider, "/schemas/ids/1")
    assert st == 200 and json.loads(body["schema"]) == new, body
    assert get(outsider, "/subjects/ev-value/versions")[0] == 404
    rows = outsider.sql("SELECT subject, version, schema_id FROM subjects ORDER BY 1, 2")
    assert [(r["subject"], r["version"], r["schema_id"]) for r in rows] == [
        ("new-value", 1, 1)], rows                 # the SQL mirror rewritten too
