"""The schema registry with an authorizer (issue 31, Deliver 6): every
request authenticated as the admin endpoint does it (Basic of a SCRAM
user, the TLS client certificate on an https listener, Bearer admin.token
as super-user, else User:ANONYMOUS) and authorised by Kafka-style ACLs on
the SUBJECT resource (daemon/registry/sr_auth.c):

  READ              fetch a subject's versions and schemas, look a schema
                    up (POST /subjects/{s}), /compatibility; GET
                    /schemas/ids/{id} needs READ on a subject holding it
  WRITE             register
  DELETE            delete subjects and versions
  ALTER_CONFIGS     PUT/DELETE /config/{s}, /mode/{s} (DESCRIBE_CONFIGS: GET)
  CLUSTER's         /config and /mode

Wrong credentials: 401 {"error_code": 40101}; no right: 403 (40301), 401
for ANONYMOUS.  GET /subjects lists only what the principal may see."""
import base64
import json
import shutil
import tempfile

import avro.schema
import pytest
import requests

from cluster_support import make_cluster, zk  # noqa: F401 (fixtures)
from conftest import finish_broker, free_port
from registry_support import CTYPE, TIMEOUT, record_schema
from sasl_support import add_user, ck_sasl, kp_sasl, sql, start_sasl_broker
from support import admin_socket, ck_conf, socket_http, topic_name
from tls_support import certs, ssl_overrides  # noqa: F401 (fixture)

TOKEN = "sr-admin-token"
AUTHZ = {"authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
         "super.users": "User:admin", "auto.create.topics.enable": "false",
         "admin.token": TOKEN}
V1 = record_schema("Order", [("id", "int")])
V2 = record_schema("Order", [("id", "int"), ("note", "string", "")])

# user → [(resource type, name, pattern, operation, permission)]
ACLS = {
    "reader": [("SUBJECT", "orders-value", "LITERAL", "READ", "ALLOW")],
    "writer": [("SUBJECT", "orders-value", "LITERAL", "WRITE", "ALLOW")],
    "deleter": [("SUBJECT", "orders-value", "LITERAL", "DELETE", "ALLOW")],
    "configer": [("SUBJECT", "orders-value", "LITERAL", "ALTER_CONFIGS", "ALLOW")],
    "team": [("SUBJECT", "team-", "PREFIXED", "ALL", "ALLOW"),
             ("SUBJECT", "team-locked", "LITERAL", "WRITE", "DENY")],
    "producer": [("SUBJECT", "avro-", "PREFIXED", "WRITE", "ALLOW"),
                 ("TOPIC", "avro-", "PREFIXED", "WRITE", "ALLOW")],
    "noschema": [("TOPIC", "avro-", "PREFIXED", "WRITE", "ALLOW")],
    "nobody": [],
    # SQL's writes to subjects (sr_sql.c Q3); their CLUSTER ACLs for SQL
    # itself: SQL_USERS
    "sqlwriter": [("SUBJECT", "sql-", "PREFIXED", "WRITE", "ALLOW")],
    "sqldeleter": [("SUBJECT", "sql-", "PREFIXED", "DELETE", "ALLOW")],
    "sqlalter": [],
}
# SQL itself needs DESCRIBE (read) or ALTER (write) on the cluster
SQL_USERS = {"sqlwriter": "DESCRIBE", "sqldeleter": "DESCRIBE", "sqlalter": "ALTER"}


def add_acl(b, principal, res, name, pat, op, perm):
    st, body = sql(b, "INSERT INTO acls (resource_type, resource_name, pattern_type, "
                      "principal, operation, permission) VALUES ('%s', '%s', '%s', '%s', "
                      "'%s', '%s')" % (res, name, pat, principal, op, perm))
    assert st == 200, body


def req(b, method, path, body=None, user=None, password=None, token=None, base=None,
        **kw):
    """(status, JSON or text, headers) of one registry request."""
    h = {"Content-Type": CTYPE, "Accept": CTYPE}
    if user is not None:
        h["Authorization"] = "Basic " + base64.b64encode(
            ("%s:%s" % (user, password if password is not None else user + "-pw")).encode()
        ).decode()
    if token is not None:
        h["Authorization"] = "Bearer " + token
    r = requests.request(method, (base or b.registry) + path, headers=h, timeout=TIMEOUT,
                         data=json.dumps(body) if body is not None else None, **kw)
    try:
        return r.status_code, r.json(), r.headers
    except ValueError:
        return r.status_code, r.text, r.headers


def register(b, subject, schema, **who):
    return req(b, "POST", "/subjects/%s/versions" % subject,
               {"schema": json.dumps(schema)}, **who)


def sql_as(b, stmt, user=None, token=None, headers=None):
    """(status, text) of one statement on b's admin listener, as user (Basic)
    or the token."""
    h = dict(headers or {})
    if user is not None:
        h["Authorization"] = "Basic " + base64.b64encode(
            ("%s:%s-pw" % (user, user)).encode()).decode()
    if token is not None:
        h["Authorization"] = "Bearer " + token
    r = requests.post("http://%s/sql?format=json" % b.admin, data=stmt.encode(), headers=h,
                      timeout=TIMEOUT)
    return r.status_code, r.text


def metric(b, name):
    st, text, _ = socket_http(admin_socket(b), "/metrics")
    assert st == 200, text
    for line in text.splitlines():
        if line.startswith(name + " "):
            return int(float(line.split()[1]))
    raise AssertionError("no %s in /metrics" % name)


@pytest.fixture(scope="module")
def sr():
    d = tempfile.mkdtemp(prefix="sluice-it-registry-acl-")
    o = dict(AUTHZ)
    o["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    b = start_sasl_broker(d, o)
    b.registry = b.overrides["schema.registry.listeners"]
    for user in ["admin"] + list(ACLS):
        add_user(b, user, user + "-pw")
    for user, acls in ACLS.items():
        for a in acls:
            add_acl(b, "User:" + user, *a)
    # The super-user's token registers what the tests read.
    for s, sch in (("orders-value", V1), ("other-value", V1), ("team-a-value", V1)):
        st, got, _ = register(b, s, sch, token=TOKEN)
        assert st == 200, got
    yield b
    problems = finish_broker(b)
    shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems) + "\n" + b.log_tail()


def test_no_or_wrong_credentials_are_401_in_confluents_shape(sr):
    before = metric(sr, "sluice_schema_registry_auth_failures_total")
    cases = [dict(), dict(user="reader", password="wrong"), dict(user="ghost"),
             dict(token="not-the-token")]
    for who in cases:
        for method, path, body in (("GET", "/subjects/orders-value/versions", None),
                                   ("GET", "/subjects", None),
                                   ("POST", "/subjects/orders-value/versions",
                                    {"schema": json.dumps(V2)})):
            st, got, hdrs = req(sr, method, path, body, **who)
            assert st == 401, (who, path, st, got)
            assert got["error_code"] == 40101 and got["message"], got
            assert "Basic" in hdrs.get("WWW-Authenticate", ""), hdrs
    st, got, _ = req(sr, "GET", "/subjects/orders-value/versions", user="reader",
                     password="wrong")
    assert "invalid user name or password" in got["message"], got
    assert metric(sr, "sluice_schema_registry_auth_failures_total") - before == 13
    # nothing was registered
    assert req(sr, "GET", "/subjects/orders-value/versions", token=TOKEN)[1] == [1]


def test_token_is_a_super_user(sr):
    st, got, _ = req(sr, "GET", "/subjects", token=TOKEN)
    assert st == 200 and got == ["orders-value", "other-value", "team-a-value"], got
    st, got, _ = req(sr, "GET", "/config", token=TOKEN)
    assert st == 200 and got == {"compatibilityLevel": "BACKWARD"}, got


def test_a_user_without_acls_sees_nothing_and_may_do_nothing(sr):
    before = metric(sr, "sluice_schema_registry_authorization_refusals_total")
    st, got, _ = req(sr, "GET", "/subjects", user="nobody")
    assert st == 200 and got == [], got
    st, sid, _ = req(sr, "GET", "/subjects/orders-value/versions/1", token=TOKEN)
    refused = [("GET", "/subjects/orders-value/versions", None),
               ("GET", "/subjects/orders-value/versions/1", None),
               ("POST", "/subjects/orders-value", {"schema": json.dumps(V1)}),
               ("POST", "/subjects/orders-value/versions", {"schema": json.dumps(V2)}),
               ("DELETE", "/subjects/orders-value/versions/1", None),
               ("GET", "/schemas/ids/%d" % sid["id"], None),
               ("GET", "/config/orders-value", None),
               ("PUT", "/config", {"compatibility": "NONE"})]
    for method, path, body in refused:
        st, got, _ = req(sr, method, path, body, user="nobody")
        assert st == 403 and got["error_code"] == 40301, (path, st, got)
        assert "User:nobody is not authorized" in got["message"], got
    assert metric(sr, "sluice_schema_registry_authorization_refusals_total") - before == \
        len(refused)
    assert req(sr, "GET", "/subjects/orders-value/versions", token=TOKEN)[1] == [1]


def test_read_only_user_fetches_but_does_not_write(sr):
    st, got, _ = req(sr, "GET", "/subjects", user="reader")
    assert st == 200 and got == ["orders-value"], got
    st, got, _ = req(sr, "GET", "/subjects/orders-value/versions", user="reader")
    assert st == 200 and got == [1], got
    st, latest, _ = req(sr, "GET", "/subjects/orders-value/versions/latest", user="reader")
    assert st == 200 and json.loads(latest["schema"]) == V1, latest
    st, got, _ = req(sr, "POST", "/subjects/orders-value", {"schema": json.dumps(V1)},
                     user="reader")
    assert st == 200 and got["id"] == latest["id"] and got["version"] == 1, got
    st, got, _ = req(sr, "GET", "/schemas/ids/%d" % latest["id"], user="reader")
    assert st == 200 and json.loads(got["schema"]) == V1, got
    # the id is also other-value's: only what the reader may read is listed
    st, got, _ = req(sr, "GET", "/schemas/ids/%d/subjects" % latest["id"], user="reader")
    assert st == 200 and got == ["orders-value"], got
    st, got, _ = req(sr, "GET", "/schemas/ids/%d/subjects" % latest["id"], token=TOKEN)
    assert st == 200 and got == ["orders-value", "other-value", "team-a-value"], got
    st, got, _ = req(sr, "POST", "/compatibility/subjects/orders-value/versions/latest",
                     {"schema": json.dumps(V2)}, user="reader")
    assert st == 200 and got == {"is_compatible": True}, got
    for method, path, body in (("POST", "/subjects/orders-value/versions",
                                {"schema": json.dumps(V2)}),
                               ("DELETE", "/subjects/orders-value", None),
                               ("GET", "/config/orders-value", None),
                               ("GET", "/subjects/other-value/versions", None)):
        st, got, _ = req(sr, method, path, body, user="reader")
        assert st == 403 and got["error_code"] == 40301, (path, st, got)


def test_write_user_registers_then_delete_user_deletes(sr):
    st, got, _ = register(sr, "orders-value", V2, user="writer")
    assert st == 200 and "id" in got, got
    v2_id = got["id"]
    # WRITE is not READ
    st, got, _ = req(sr, "GET", "/subjects/orders-value/versions", user="writer")
    assert st == 403, got
    st, got, _ = register(sr, "other-value", V2, user="writer")
    assert st == 403 and "WRITE subject 'other-value'" in got["message"], got
    st, got, _ = req(sr, "DELETE", "/subjects/orders-value/versions/2", user="writer")
    assert st == 403, got
    st, got, _ = req(sr, "DELETE", "/subjects/orders-value/versions/2", user="deleter")
    assert st == 200 and got == 2, got
    st, got, _ = register(sr, "orders-value", V2, user="deleter")
    assert st == 403, got
    st, got, _ = req(sr, "GET", "/subjects/orders-value/versions", token=TOKEN)
    assert st == 200 and got == [1], got
    st, got, _ = req(sr, "GET", "/subjects/orders-value/versions?deleted=true", token=TOKEN)
    assert got == [1, 2] and v2_id, got


def test_alter_configs_user_sets_the_subjects_level_only(sr):
    st, got, _ = req(sr, "PUT", "/config/orders-value", {"compatibility": "FULL"},
                     user="configer")
    assert st == 200 and got == {"compatibility": "FULL"}, got
    st, got, _ = req(sr, "GET", "/config/orders-value", user="configer")   # implied
    assert st == 200 and got == {"compatibilityLevel": "FULL"}, got
    st, got, _ = req(sr, "PUT", "/mode/orders-value", {"mode": "READONLY"}, user="configer")
    assert st == 200, got
    st, got, _ = req(sr, "DELETE", "/mode/orders-value", user="configer")
    assert st == 200, got
    st, got, _ = req(sr, "DELETE", "/config/orders-value", user="configer")
    assert st == 200, got
    for method, path, body in (("PUT", "/config", {"compatibility": "NONE"}),
                               ("GET", "/mode", None),
                               ("PUT", "/config/other-value", {"compatibility": "NONE"})):
        st, got, _ = req(sr, method, path, body, user="configer")
        assert st == 403 and got["error_code"] == 40301, (path, got)
    assert req(sr, "GET", "/config", token=TOKEN)[1] == {"compatibilityLevel": "BACKWARD"}


def test_prefixed_acl_and_deny_over_allow(sr):
    st, got, _ = register(sr, "team-b-value", V1, user="team")
    assert st == 200, got
    st, got, _ = req(sr, "GET", "/subjects", user="team")
    assert st == 200 and got == ["team-a-value", "team-b-value"], got
    st, got, _ = register(sr, "team-locked", V1, user="team")
    assert st == 403, got
    st, got, _ = register(sr, "teams-value", V1, user="team")     # not the prefix "team-"
    assert st == 403, got
    st, got, _ = req(sr, "DELETE", "/subjects/team-b-value", user="team")
    assert st == 200 and got == [1], got


def test_anonymous_gets_what_an_acl_grants(sr):
    st, got, _ = register(sr, "public-value", V1, token=TOKEN)
    assert st == 200, got
    assert req(sr, "GET", "/subjects/public-value/versions")[0] == 401
    assert req(sr, "GET", "/schemas/types")[0] == 401
    add_acl(sr, "User:ANONYMOUS", "SUBJECT", "public-", "PREFIXED", "READ", "ALLOW")
    try:
        st, got, _ = req(sr, "GET", "/subjects/public-value/versions")
        assert st == 200 and got == [1], got
        st, got, _ = req(sr, "GET", "/subjects")
        assert st == 200 and got == ["public-value"], got
        assert req(sr, "GET", "/schemas/types")[0] == 200
        st, got, _ = register(sr, "public-value", V2)
        assert st == 401 and got["error_code"] == 40101, got
    finally:
        st, body = sql(sr, "DELETE FROM acls WHERE principal = 'User:ANONYMOUS'")
        assert st == 200, body


def test_subject_acls_in_sql_and_not_in_kafkas_acl_api(sr):
    st, rows = sql(sr, "SELECT resource_name, pattern_type, operation FROM acls WHERE "
                       "resource_type = 'SUBJECT' AND principal = 'User:team' ORDER BY 1")
    assert st == 200 and rows == [
        {"resource_name": "team-", "pattern_type": "PREFIXED", "operation": "ALL"},
        {"resource_name": "team-locked", "pattern_type": "LITERAL", "operation": "WRITE"}], rows
    st, body = sql(sr, "INSERT INTO acls (resource_type, resource_name, principal, operation, "
                       "permission) VALUES ('SUBJECTS', 'x', 'User:a', 'READ', 'ALLOW')")
    assert st != 200, body
    from kafka.admin import (ACLFilter, ACLOperation, ACLPermissionType,
                             ACLResourcePatternType, KafkaAdminClient, ResourcePatternFilter,
                             ResourceType)
    a = KafkaAdminClient(bootstrap_servers=[sr.bootstrap], request_timeout_ms=10000,
                         api_version_auto_timeout_ms=10000,
                         **kp_sasl("SCRAM-SHA-256", "admin", "admin-pw"))
    try:
        acls, err = a.describe_acls(ACLFilter(None, None, ACLOperation.ANY, ACLPermissionType.ANY,
                                              ResourcePatternFilter(ResourceType.ANY, None,
                                                                    ACLResourcePatternType.ANY)))
    finally:
        a.close()
    # the producers' TOPIC ACLs only: a Kafka client does not know SUBJECT
    assert sorted((x.principal, x.resource_pattern.resource_type) for x in acls) == \
        [("User:noschema", ResourceType.TOPIC), ("User:producer", ResourceType.TOPIC)], acls


def test_kafkas_create_acls_refuses_the_subject_type_as_any_unknown_one(sr):
    """CreateAcls v1 from a Kafka client with type 100 (SUBJECT's number)
    gets what type 50 gets (Kafka's answer to a type it does not know), and
    nothing is made."""
    import kafka_raw as kr
    from sasl_support import scram_login

    def create(rtype):
        body = kr.array([0], lambda _: kr.i8(rtype) + kr.string("k-value") + kr.i8(3) +
                        kr.string("User:kafka") + kr.string("*") + kr.i8(3) + kr.i8(3))
        with kr.Conn(sr.port, timeout=20) as conn:
            assert scram_login(conn, "admin", "admin-pw")[0] == 0
            r = conn.request(30, 1, body, timeout=20)
            r.i32()                                             # ThrottleTimeMs
            return r.array(lambda r: (r.i16(), r.string()))
    assert create(100) == create(50) == [(42, "Invalid resource type")]   # INVALID_REQUEST
    st, rows = sql(sr, "SELECT count(*) AS n FROM acls WHERE principal = 'User:kafka'")
    assert rows == [{"n": 0}], rows


def test_avro_producer_with_basic_auth_user_info(sr):
    from confluent_kafka.avro import AvroProducer
    from confluent_kafka.avro.error import ClientError
    topic = "avro-" + topic_name("orders")
    st, body = sql(sr, "INSERT INTO topics (name, partitions) VALUES ('%s', 1)" % topic)
    assert st == 200, body
    vs = avro.schema.parse(json.dumps(V1))

    def producer(user):
        return AvroProducer(ck_conf(sr, **ck_sasl("SCRAM-SHA-256", user, user + "-pw"), **{
            "schema.registry.url": sr.registry,
            "schema.registry.basic.auth.credentials.source": "USER_INFO",
            "schema.registry.basic.auth.user.info": "%s:%s-pw" % (user, user)}),
            default_value_schema=vs)
    p = producer("producer")
    reports = []
    for i in range(5):
        p.produce(topic=topic, value={"id": i},
                  on_delivery=lambda err, msg: reports.append((err, msg.offset())))
    assert p.flush(30) == 0
    assert reports == [(None, i) for i in range(5)], reports    # every one acknowledged
    st, got, _ = req(sr, "GET", "/subjects/%s-value/versions" % topic, token=TOKEN)
    assert st == 200 and got == [1], got
    st, body = sql(sr, "SELECT value_json FROM messages WHERE topic = '%s' ORDER BY offset"
                   % topic)
    assert st == 200 and [json.loads(r["value_json"]) for r in body] == \
        [{"id": i} for i in range(5)], body
    # a user who may write the topic but not register the subject
    q = producer("noschema")
    other = topic.replace("orders", "other")
    with pytest.raises(ClientError) as e:
        q.produce(topic=other, value={"id": 1})
    assert "40301" in str(e.value) and "User:noschema is not authorized to WRITE subject " \
        "'%s-value'" % other in str(e.value), e.value


def test_allow_everyone_if_no_acl_found_applies_to_subjects(start_broker):
    """With allow.everyone.if.no.acl.found a subject no ACL names is open
    (an authorizer once kept the registry off instead); one an ACL names
    is not."""
    b = start_broker(overrides={
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "true",
        "schema.registry.listeners": "http://127.0.0.1:%d" % free_port()})
    b.registry = b.overrides["schema.registry.listeners"]
    st, got, _ = register(b, "open-value", V1)
    assert st == 200 and got == {"id": 1}, got
    add_acl(b, "User:someone", "SUBJECT", "closed-", "PREFIXED", "WRITE", "ALLOW")
    st, got, _ = register(b, "closed-value", V1)
    assert st == 401 and got["error_code"] == 40101, got
    assert req(b, "GET", "/subjects")[1] == ["open-value"]


def test_client_certificate_is_the_principal_on_https(certs):  # noqa: F811
    d = tempfile.mkdtemp(prefix="sluice-it-registry-acl-tls-")
    o = dict(AUTHZ)
    o.update(ssl_overrides(certs, "requested"))
    o["schema.registry.listeners"] = "https://127.0.0.1:%d" % free_port()
    b = start_sasl_broker(d, o)
    try:
        base = b.overrides["schema.registry.listeners"]
        ca = certs.ca.crt
        mine = (certs.client.crt, certs.client.key)
        for s in ("alice-value", "bob-value"):
            st, got, _ = register(b, s, V1, token=TOKEN, base=base, verify=ca)
            assert st == 200, got
        st, got, _ = req(b, "GET", "/subjects/alice-value/versions", base=base, verify=ca,
                         cert=mine)
        assert st == 403 and "User:CN=alice,O=Acme is not authorized" in got["message"], got
        add_acl(b, "User:CN=alice,O=Acme", "SUBJECT", "alice-value", "LITERAL", "READ", "ALLOW")
        st, got, _ = req(b, "GET", "/subjects/alice-value/versions", base=base, verify=ca,
                         cert=mine)
        assert st == 200 and got == [1], got
        st, got, _ = req(b, "GET", "/subjects", base=base, verify=ca, cert=mine)
        assert st == 200 and got == ["alice-value"], got
        st, got, _ = req(b, "GET", "/subjects/bob-value/versions", base=base, verify=ca,
                         cert=mine)
        assert st == 403, got
        st, got, _ = req(b, "GET", "/subjects/alice-value/versions", base=base, verify=ca)
        assert st == 401 and got["error_code"] == 40101, got
    finally:
        problems = finish_broker(b)
        shutil.rmtree(d, ignore_errors=True)
    assert not problems, "; ".join(problems)


# ---- SQL's writes: the statement's principal on SUBJECT ACLs (sr_sql.c Q3) ---------------
def versions_as_admin(b, subject):
    st, got, _ = req(b, "GET", "/subjects/%s/versions" % subject, token=TOKEN)
    return got if st == 200 else st


def insert(subject, schema):
    return "INSERT INTO subjects (subject, schema) VALUES ('%s', '%s')" % (
        subject, json.dumps(schema).replace("'", "''"))


@pytest.fixture
def sql_users(sr):
    for user, op in SQL_USERS.items():
        add_acl(sr, "User:" + user, "CLUSTER", "kafka-cluster", "LITERAL", op, "ALLOW")
    yield
    st, body = sql(sr, "DELETE FROM acls WHERE resource_type = 'CLUSTER' AND principal IN (%s)"
                   % ", ".join("'User:%s'" % u for u in SQL_USERS))
    assert st == 200, body


def test_sql_writes_are_checked_as_the_principals_rest_request(sr, sql_users):
    """INSERT/DELETE/UPDATE subjects need WRITE/DELETE/ALTER_CONFIGS on the
    subject, as POST, DELETE and PUT /config would for the same user: the
    cluster's ALTER (every other SQL write) does not stand in for them,
    and the cluster's DESCRIBE (read-only SQL) does not keep them out."""
    st, text = sql_as(sr, insert("sql-value", V1), user="sqlalter")
    assert st == 400 and ("schema registry error_code 40301: User:sqlalter is not "
                          "authorized to WRITE subject 'sql-value'") in text, text
    assert versions_as_admin(sr, "sql-value") == 404              # nothing registered
    st, text = sql_as(sr, insert("sql-value", V1), user="sqlwriter")
    assert st == 200, text
    assert versions_as_admin(sr, "sql-value") == [1]
    st, got, _ = req(sr, "GET", "/subjects/sql-value/versions/1", token=TOKEN)
    assert json.loads(got["schema"]) == V1, got
    # the same schema by REST under another subject: the same id
    st, other, _ = register(sr, "orders-value", V1, token=TOKEN)
    assert st == 200 and other["id"] == got["id"], (other, got)
    st, text = sql_as(sr, insert("orders-value", V2), user="sqlwriter")   # not sql-*
    assert st == 400 and "not authorized to WRITE subject 'orders-value'" in text, text
    st, text = sql_as(sr, "DELETE FROM subjects WHERE subject = 'sql-value'", user="sqlwriter")
    assert st == 400 and ("error_code 40301: User:sqlwriter is not authorized to DELETE "
                          "subject 'sql-value'") in text, text
    st, text = sql_as(sr, "UPDATE subjects SET compatibility = 'NONE' "
                          "WHERE subject = 'sql-value'", user="sqlwriter")
    assert st == 400 and "not authorized to ALTER_CONFIGS subject 'sql-value'" in text, text
    assert req(sr, "GET", "/config/sql-value", token=TOKEN)[1]["error_code"] == 40408
    assert versions_as_admin(sr, "sql-value") == [1]               # still there
    st, text = sql_as(sr, "DELETE FROM subjects WHERE subject = 'sql-value'", user="sqldeleter")
    assert st == 200, text
    assert versions_as_admin(sr, "sql-value") == 404               # soft-deleted
    st, got, _ = req(sr, "GET", "/subjects/sql-value/versions?deleted=true", token=TOKEN)
    assert st == 200 and got == [1], got
    # the token's SQL is the super-user's, as over REST; so is root's on the
    # admin socket (which has no login to send)
    st, text = sql_as(sr, "DELETE FROM subjects WHERE subject = 'sql-value'", token=TOKEN)
    assert st == 200, text
    st, got, _ = req(sr, "GET", "/subjects/sql-value/versions?deleted=true", token=TOKEN)
    assert st == 404, got
    st, body = sql(sr, insert("sql-value", V2))
    assert st == 200, body
    assert versions_as_admin(sr, "sql-value") == [1]               # a new subject again
    st, got, _ = req(sr, "GET", "/subjects/sql-value/versions/1", token=TOKEN)
    assert json.loads(got["schema"]) == V2, got


def test_sql_principal_header_from_a_network_client_is_401(sr, sql_users):
    """The header SQL's writes carry is accepted only with this process's
    secret: a client that sends one, naming the super-user, is refused
    (401) and registers nothing, with or without a valid login."""
    before = metric(sr, "sluice_schema_registry_auth_failures_total")
    body = json.dumps({"schema": json.dumps(V1)})
    for value in ("0" * 64 + " 127.0.0.1 User:admin", "0" * 64 + " 127.0.0.1",
                  "User:admin"):
        for auth in (None, "Basic " + base64.b64encode(b"writer:writer-pw").decode()):
            h = {"Content-Type": CTYPE, "X-Sluice-SQL-Principal": value}
            if auth:
                h["Authorization"] = auth
            r = requests.post(sr.registry + "/subjects/forged-value/versions", data=body,
                              headers=h, timeout=TIMEOUT)
            assert r.status_code == 401 and r.json()["error_code"] == 40101, (value, r.text)
    assert metric(sr, "sluice_schema_registry_auth_failures_total") == before + 6
    assert versions_as_admin(sr, "forged-value") == 404
    # sent to the admin endpoint, it does not change whose SQL write it is
    st, text = sql_as(sr, insert("orders-value", V2), user="sqlwriter",
                      headers={"X-Sluice-SQL-Principal": "0" * 64 + " 127.0.0.1 User:admin"})
    assert st == 400 and "not authorized to WRITE subject 'orders-value'" in text, text


# ---- cluster mode: a follower checks before it forwards ------------------------------
def test_follower_checks_the_write_then_the_leader_checks_the_forwarded_login(make_cluster):
    """A write to a broker that does not lead _schemas is authorised there:
    refused (403) without reaching the leader, or forwarded with the
    client's login, which the leader authenticates and checks again."""
    from cluster_support import leader_and_isr, wait_equal, wait_for, zk_missing
    if zk_missing():
        pytest.skip("ZooKeeper cannot run: " + zk_missing())
    o = dict(AUTHZ)
    c = make_cluster(3, start=False, overrides=o)
    for b in c.brokers:
        b.overrides["schema.registry.listeners"] = "http://127.0.0.1:%d" % free_port()
    c.start()
    for b in c.brokers:
        b.registry = b.overrides["schema.registry.listeners"]
    b1 = c.broker(1)
    # brokers talk PLAINTEXT, as User:ANONYMOUS: the cluster is theirs
    b1.sql("INSERT INTO acls (resource_type, resource_name, principal, operation, permission) "
           "VALUES ('CLUSTER', 'kafka-cluster', 'User:ANONYMOUS', 'ALL', 'ALLOW')")
    b1.sql("INSERT INTO acls (resource_type, resource_name, principal, operation, permission) "
           "VALUES ('TOPIC', '_schemas', 'User:ANONYMOUS', 'DESCRIBE', 'ALLOW')")  # Metadata
    for user in ("alice", "bob"):
        b1.sql("INSERT INTO scram_credentials (name, mechanism, password) VALUES "
               "('%s', 'SCRAM-SHA-256', '%s-pw')" % (user, user))
    b1.sql("INSERT INTO acls (resource_type, resource_name, pattern_type, principal, "
           "operation, permission) VALUES ('SUBJECT', 'ok-', 'PREFIXED', 'User:alice', 'ALL', "
           "'ALLOW')")
    for b in c.brokers:
        wait_equal(lambda b=b: len(b.sql("SELECT * FROM acls")), 3, 30,
                   "broker %d to read the ACLs" % b.broker_id)
        wait_equal(lambda b=b: len(b.sql("SELECT name FROM scram_credentials")), 2, 30,
                   "broker %d to read the users" % b.broker_id)

    def first_registration():
        for b in c.brokers:
            if register(b, "ok-value", V1, token=TOKEN)[0] == 200:
                return True
        return False
    wait_for(first_registration, 60, "_schemas to take a first registration", interval=0.5)
    leader = None

    def find_leader():
        nonlocal leader
        for b in c.brokers:
            li = leader_and_isr(b, "_schemas")
            if li and li[0] >= 0 and len(li[1]) == 3:
                leader = c.broker(li[0])
                return True
        return False
    wait_for(find_leader, 30, "_schemas-0 to have a leader and three in sync")
    follower = next(b for b in c.brokers if b is not leader)
    before = metric(leader, "sluice_schema_registry_requests_total")
    st, got, _ = register(follower, "ok-value", V2, user="bob")
    assert st == 403 and got["error_code"] == 40301, got
    st, got, _ = register(follower, "ok-value", V2, user="alice", password="wrong")
    assert st == 401 and got["error_code"] == 40101, got
    assert metric(leader, "sluice_schema_registry_requests_total") == before   # never forwarded
    st, got, _ = register(follower, "ok-value", V2, user="alice")
    assert st == 200 and "id" in got, got
    assert metric(leader, "sluice_schema_registry_requests_total") == before + 1
    for b in c.brokers:
        wait_for(lambda b=b: req(b, "GET", "/subjects/ok-value/versions", user="alice")[1]
                 == [1, 2], 10, "broker %d to serve version 2" % b.broker_id)
    # SQL on the follower (sr_sql.c Q4): checked there as the statement's
    # principal; forwarded with the SQL client's own login to an https
    # leader only
    for user in ("alice", "bob"):
        b1.sql("INSERT INTO acls (resource_type, resource_name, principal, operation, "
               "permission) VALUES ('CLUSTER', 'kafka-cluster', 'User:%s', 'DESCRIBE', "
               "'ALLOW')" % user)
    for b in c.brokers:
        wait_equal(lambda b=b: len(b.sql("SELECT * FROM acls")), 5, 30,
                   "broker %d to read the SQL users' ACLs" % b.broker_id)
    v3 = record_schema("Order", [("id", "int"), ("note", "string", ""), ("qty", "int", 0)])
    before = metric(leader, "sluice_schema_registry_requests_total")
    st, text = sql_as(follower, insert("ok-value", v3), user="bob")
    assert st == 400 and ("error_code 40301: User:bob is not authorized to WRITE subject "
                          "'ok-value'") in text, text
    assert metric(leader, "sluice_schema_registry_requests_total") == before   # never forwarded
    # no login to forward (here User:ANONYMOUS, as a TLS certificate or the
    # admin socket would be): refused on the follower, naming the leader
    err = follower.sql_error(insert("ok-value", v3))
    assert ("run it on broker %d" % leader.broker_id) in err, err
    assert metric(leader, "sluice_schema_registry_requests_total") == before
    # a login to forward, but the leader's registry is plain http: alice's
    # password is not sent there in clear; refused, naming the leader
    st, text = sql_as(follower, insert("ok-value", v3), user="alice")
    assert st == 400 and ("is not sent there in clear (sr_sql.c Q4); run it on broker %d"
                          % leader.broker_id) in text, text
    assert metric(leader, "sluice_schema_registry_requests_total") == before
    st, text = sql_as(leader, insert("ok-value", v3), user="alice")
    assert st == 200, text
    assert metric(leader, "sluice_schema_registry_requests_total") == before + 1
    for b in c.brokers:
        wait_for(lambda b=b: req(b, "GET", "/subjects/ok-value/versions", user="alice")[1]
                 == [1, 2, 3], 10, "broker %d to serve version 3" % b.broker_id)
    st, got, _ = req(leader, "GET", "/subjects/ok-value/versions/3", user="alice")
    assert st == 200 and json.loads(got["schema"]) == v3, got


def test_a_reference_to_a_subject_one_may_not_read_is_not_found(sr):
    """A schema's references are read with the caller's rights: a subject it
    may not READ answers exactly as one that does not exist (its schema
    would show through a compatibility answer, and another error would say
    it exists).  'team' may do ALL on team-*, nothing on orders-value."""
    st, got, _ = register(sr, "orders-value", V2, token=TOKEN)
    assert st == 200, got
    ref = {"schema": json.dumps({"type": "record", "name": "Wrap",
                                 "fields": [{"name": "o", "type": "Order"}]}),
           "references": [{"name": "Order", "subject": "%s", "version": 1}]}
    answers = {}
    for target in ("orders-value", "no-such-subject-value"):
        body = dict(ref, references=[dict(ref["references"][0], subject=target)])
        st, got, _ = req(sr, "POST", "/subjects/team-wrap-value/versions", body,
                         user="team")
        answers[target] = (st, got["error_code"], got["message"].replace(target, "S"))
    assert answers["orders-value"] == answers["no-such-subject-value"], answers
    assert answers["orders-value"][:2] == (422, 42201), answers
    # The super-user's token reads it, so the reference itself is fine.
    body = dict(ref, references=[dict(ref["references"][0], subject="orders-value")])
    st, got, _ = req(sr, "POST", "/subjects/team-wrap-value/versions", body, token=TOKEN)
    assert st == 200, got


def test_a_name_that_is_no_subject_is_422_not_500(sr):
    """Names checked before rights: one that is not UTF-8, or a long one cut
    mid-character in the 403's text, was a 500 "out of memory"."""
    for path in ("/subjects/%FF/versions", "/subjects/" + "a" * 399 + "%C3%A9b/versions"):
        st, got, _ = req(sr, "GET", path, user="nobody")
        assert st in (403, 404, 422), (path, st, got)
        assert st != 500 and isinstance(got, dict) and "error_code" in got, (path, st, got)
    st, got, _ = req(sr, "GET", "/subjects/%FF/versions", user="nobody")
    assert (st, got["error_code"]) == (422, 42208), got
