"""SQL writes to the schema registry in cluster mode (issue 31, Deliver 5):
INSERT INTO subjects and DELETE FROM subjects on a broker that does not lead
_schemas-0 take the REST API's path, so they are forwarded to the leader's
registry, written once, and seen by every broker's REST API and SQL; a
restart of the whole cluster keeps them."""
import json

from cluster_support import make_cluster, wait_for, zk  # noqa: F401
from registry_support import record_schema
from test_registry_cluster import get, reg_cluster, register_anywhere, schemas_leader  # noqa: F401

S1 = json.dumps(record_schema("Sq", [("id", "long")]))
S2 = json.dumps(record_schema("Sq", [("id", "long"), ("note", "string", "")]))
BAD = json.dumps(record_schema("Sq", [("id", "boolean")]))


def quoted(text):
    return "'" + text.replace("'", "''") + "'"


def rows(b, query):
    return [tuple(r.values()) for r in b.sql(query)]


def test_sql_writes_on_a_follower_land_on_the_leader_and_everywhere(reg_cluster):
    c = reg_cluster
    register_anywhere(c, "rest-value", record_schema("R", [("r", "int")]))   # id 1
    leader = schemas_leader(c)
    f1, f2 = [b for b in c.brokers if b is not leader]
    # registered through SQL on a follower: the leader allocates the id
    assert f1.sql("INSERT INTO subjects (subject, schema) VALUES ('sq-value', %s)"
                  % quoted(S1)) == []
    for b in c.brokers:
        wait_for(lambda b=b: get(b, "/subjects/sq-value/versions") == (200, [1]), 15,
                 "broker %d to serve sq-value" % b.broker_id)
    assert get(leader, "/subjects/sq-value/versions/1")[1]["id"] == 2
    # the same schema under another subject, through the other follower: same id
    f2.sql("INSERT INTO subjects (subject, schema) VALUES ('sq2-value', %s)" % quoted(S1))
    f2.sql("INSERT INTO subjects (subject, schema) VALUES ('sq-value', %s)" % quoted(S2))
    assert get(leader, "/subjects/sq2-value/versions/1")[1]["id"] == 2
    assert get(leader, "/subjects/sq-value/versions/2")[1]["id"] == 3
    # the leader's compatibility verdict comes back to the follower's statement
    err = f1.sql_error("INSERT INTO subjects (subject, schema) VALUES ('sq-value', %s)"
                       % quoted(BAD))
    assert "schema registry error_code 409: Schema being registered is incompatible" in err, err
    # every broker's SQL mirror shows the same rows
    want = [("sq-value", 1, 2, 0), ("sq-value", 2, 3, 0), ("sq2-value", 1, 2, 0)]
    q = ("SELECT subject, version, schema_id, deleted FROM subjects "
         "WHERE subject LIKE 'sq%' ORDER BY 1, 2")
    for b in c.brokers:
        wait_for(lambda b=b: rows(b, q) == want, 15,
                 "broker %d's subjects to show the SQL writes" % b.broker_id)
    # deletes through SQL on a follower: soft, then permanent
    f1.sql("DELETE FROM subjects WHERE subject = 'sq2-value'")
    wait_for(lambda: get(leader, "/subjects")[1] == ["rest-value", "sq-value"], 15,
             "the soft delete on the leader")
    # (a follower's mirror follows the leader's log: the row reads deleted there soon)
    wait_for(lambda: rows(f2, q)[2:] == [("sq2-value", 1, 2, 1)], 15, "f2's mirror")
    f2.sql("DELETE FROM subjects WHERE subject = 'sq2-value' AND deleted")
    want = want[:2]
    for b in c.brokers:
        wait_for(lambda b=b: get(b, "/subjects?deleted=true") ==
                 (200, ["rest-value", "sq-value"]) and rows(b, q) == want, 15,
                 "broker %d to drop sq2-value" % b.broker_id)
    # a restart of every broker keeps what SQL wrote
    for b in c.brokers:
        b.stop()
    for b in c.brokers:
        b.start()
    for b in c.brokers:
        wait_for(lambda b=b: get(b, "/subjects/sq-value/versions") == (200, [1, 2]) and
                 rows(b, q) == want, 60, "broker %d to reload the registry" % b.broker_id)
