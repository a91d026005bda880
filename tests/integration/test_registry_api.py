"""The schema registry's REST API (issue 31), endpoint by endpoint, against
Confluent's documented answers: status, error_code and message."""
import json
import subprocess

import pytest
import requests

from registry_support import call, record_schema, register, start_registry

V1 = record_schema("Order", [("id", "long")])
V1_TEXT = json.dumps(V1, separators=(",", ":"))


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def test_same_schema_under_two_subjects_keeps_one_id(reg):
    assert register(reg, "orders-value", V1) == (200, {"id": 1})
    # spaces and all: the same schema
    assert register(reg, "audit-value", json.dumps(V1, indent=2)) == (200, {"id": 1})
    assert register(reg, "orders-value", V1) == (200, {"id": 1})       # no new version
    assert call(reg, "GET", "/subjects/orders-value/versions") == (200, [1])
    assert call(reg, "GET", "/subjects") == (200, ["audit-value", "orders-value"])
    assert call(reg, "GET", "/subjects?subjectPrefix=orders") == (200, ["orders-value"])
    v2 = record_schema("Order", [("id", "long"), ("note", "string", "")])
    assert register(reg, "orders-value", v2) == (200, {"id": 2})
    assert call(reg, "GET", "/subjects/orders-value/versions") == (200, [1, 2])


def test_schema_by_id(reg):
    register(reg, "a-value", V1)
    register(reg, "b-value", V1)
    st, got = call(reg, "GET", "/schemas/ids/1")
    assert st == 200 and json.loads(got["schema"]) == V1 and "schemaType" not in got
    st, raw = call(reg, "GET", "/schemas/ids/1/schema")
    assert st == 200 and raw == V1
    assert call(reg, "GET", "/schemas/ids/1/versions") == (
        200, [{"subject": "a-value", "version": 1}, {"subject": "b-value", "version": 1}])
    assert call(reg, "GET", "/schemas/ids/1/subjects") == (200, ["a-value", "b-value"])
    assert call(reg, "GET", "/schemas/ids/1?subject=a-value")[0] == 200
    assert call(reg, "GET", "/schemas/ids/1?subject=zzz") == (
        404, {"error_code": 40403, "message": "Schema 1 not found"})
    assert call(reg, "GET", "/schemas/ids/7") == (
        404, {"error_code": 40403, "message": "Schema 7 not found"})
    assert call(reg, "GET", "/schemas/types") == (200, ["JSON", "PROTOBUF", "AVRO"])


def test_subject_versions_latest_and_schema(reg):
    register(reg, "s", V1)
    st, got = call(reg, "GET", "/subjects/s/versions/latest")
    assert st == 200 and got == {"subject": "s", "version": 1, "id": 1, "schema": V1_TEXT}
    assert call(reg, "GET", "/subjects/s/versions/1") == (200, got)
    assert call(reg, "GET", "/subjects/s/versions/-1") == (200, got)
    assert call(reg, "GET", "/subjects/s/versions/1/schema") == (200, V1)
    assert call(reg, "GET", "/subjects/s/versions/2") == (
        404, {"error_code": 40402, "message": "Version 2 not found."})
    for bad in ("0", "x", "2147483648"):
        assert call(reg, "GET", "/subjects/s/versions/" + bad) == (422, {
            "error_code": 42202,
            "message": "The specified version '%s' is not a valid version id. Allowed values "
                       "are between [1, 2^31-1] and the string \"latest\"" % bad})
    assert call(reg, "GET", "/subjects/none/versions") == (
        404, {"error_code": 40401, "message": "Subject 'none' not found."})
    assert call(reg, "GET", "/subjects/none/versions/1") == (
        404, {"error_code": 40401, "message": "Subject 'none' not found."})


def test_lookup_under_a_subject(reg):
    register(reg, "s", V1)
    st, got = call(reg, "POST", "/subjects/s", {"schema": json.dumps(V1, indent=1)})
    assert st == 200 and got == {"subject": "s", "version": 1, "id": 1, "schema": V1_TEXT}
    other = record_schema("Other", [("x", "int")])
    assert call(reg, "POST", "/subjects/s", {"schema": json.dumps(other)}) == (
        404, {"error_code": 40403, "message": "Schema not found"})
    assert call(reg, "POST", "/subjects/t", {"schema": json.dumps(V1)}) == (
        404, {"error_code": 40401, "message": "Subject 't' not found."})


def test_soft_then_permanent_delete_of_a_subject(reg):
    register(reg, "s", V1)
    register(reg, "s", record_schema("Order", [("id", "long"), ("n", "int", 0)]))
    assert call(reg, "DELETE", "/subjects/s?permanent=true") == (404, {
        "error_code": 40405,
        "message": "Subject 's' was not deleted first before being permanently deleted"})
    assert call(reg, "DELETE", "/subjects/s") == (200, [1, 2])
    assert call(reg, "GET", "/subjects") == (200, [])
    assert call(reg, "GET", "/subjects?deleted=true") == (200, ["s"])
    assert call(reg, "GET", "/subjects/s/versions")[1]["error_code"] == 40401
    assert call(reg, "GET", "/subjects/s/versions?deleted=true") == (200, [1, 2])
    assert call(reg, "GET", "/subjects/s/versions/1?deleted=true")[0] == 200
    assert call(reg, "DELETE", "/subjects/s") == (404, {
        "error_code": 40404,
        "message": "Subject 's' was soft deleted.Set permanent=true to delete permanently"})
    assert call(reg, "GET", "/schemas/ids/1")[0] == 200        # soft: still served by id
    assert call(reg, "DELETE", "/subjects/s?permanent=true") == (200, [1, 2])
    assert call(reg, "GET", "/subjects?deleted=true") == (200, [])
    assert call(reg, "GET", "/schemas/ids/1")[1]["error_code"] == 40403
    # registered again: versions start over, the id is a new one (never reused)
    assert register(reg, "s", V1) == (200, {"id": 3})
    assert call(reg, "GET", "/subjects/s/versions") == (200, [1])


def test_delete_of_a_version(reg):
    register(reg, "s", V1)
    register(reg, "s", record_schema("Order", [("id", "long"), ("n", "int", 0)]))
    assert call(reg, "DELETE", "/subjects/s/versions/1?permanent=true") == (404, {
        "error_code": 40407,
        "message": "Subject 's' Version 1 was not deleted first before being permanently "
                   "deleted"})
    assert call(reg, "DELETE", "/subjects/s/versions/1") == (200, 1)
    assert call(reg, "DELETE", "/subjects/s/versions/1") == (404, {
        "error_code": 40406,
        "message": "Subject 's' Version 1 was soft deleted.Set permanent=true to delete "
                   "permanently"})
    assert call(reg, "GET", "/subjects/s/versions") == (200, [2])
    assert call(reg, "DELETE", "/subjects/s/versions/1?permanent=true") == (200, 1)
    assert call(reg, "GET", "/subjects/s/versions?deleted=true") == (200, [2])
    assert call(reg, "DELETE", "/subjects/s/versions/latest") == (200, 2)
    assert call(reg, "DELETE", "/subjects/s/versions/9")[1]["error_code"] == 40402


def test_config_global_and_per_subject(reg):
    assert call(reg, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})
    assert call(reg, "PUT", "/config", {"compatibility": "full_transitive"}) == (
        200, {"compatibility": "FULL_TRANSITIVE"})
    assert call(reg, "GET", "/config") == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert call(reg, "GET", "/config/s") == (404, {
        "error_code": 40408,
        "message": "Subject 's' does not have subject-level compatibility configured"})
    assert call(reg, "GET", "/config/s?defaultToGlobal=true") == (
        200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert call(reg, "PUT", "/config/s", {"compatibility": "NONE"}) == (
        200, {"compatibility": "NONE"})
    assert call(reg, "GET", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert call(reg, "PUT", "/config/s", {"compatibility": "SIDEWAYS"}) == (422, {
        "error_code": 42203,
        "message": "Invalid compatibility level. Valid values are none, backward, forward, "
                   "full, backward_transitive, forward_transitive, and full_transitive"})
    assert call(reg, "DELETE", "/config/s") == (200, {"compatibilityLevel": "NONE"})
    assert call(reg, "GET", "/config/s")[1]["error_code"] == 40408
    assert call(reg, "DELETE", "/config") == (200, {"compatibilityLevel": "FULL_TRANSITIVE"})
    assert call(reg, "GET", "/config") == (200, {"compatibilityLevel": "BACKWARD"})


def test_mode_readonly_and_import(reg):
    assert call(reg, "GET", "/mode") == (200, {"mode": "READWRITE"})
    assert call(reg, "PUT", "/mode", {"mode": "IMPORT"}) == (200, {"mode": "IMPORT"})
    # IMPORT: explicit ids and versions, as a migration from another registry
    assert register(reg, "s", V1, id=42, version=3) == (200, {"id": 42})
    st, got = call(reg, "GET", "/subjects/s/versions/3")
    assert st == 200 and got["id"] == 42
    assert register(reg, "t", record_schema("X", [("x", "int")]), id=42)[1]["error_code"] \
        == 42205
    assert call(reg, "PUT", "/mode", {"mode": "READWRITE"}) == (200, {"mode": "READWRITE"})
    assert call(reg, "PUT", "/mode", {"mode": "IMPORT"}) == (422, {
        "error_code": 42205, "message": "Cannot import since found existing subjects"})
    # ids continue past the imported ones
    assert register(reg, "u", record_schema("Y", [("y", "int")])) == (200, {"id": 43})
    assert register(reg, "u", record_schema("Y", [("y", "int")]), id=7)[1]["error_code"] \
        == 42205
    assert call(reg, "PUT", "/mode/u", {"mode": "READONLY"}) == (200, {"mode": "READONLY"})
    assert call(reg, "GET", "/mode/u") == (200, {"mode": "READONLY"})
    assert call(reg, "GET", "/mode/s") == (404, {
        "error_code": 40409, "message": "Subject 's' does not have subject-level mode "
                                        "configured"})
    assert register(reg, "u", record_schema("Y", [("y", "int"), ("z", "int", 0)])) == (422, {
        "error_code": 42205, "message": "Subject u is in read-only mode"})
    assert call(reg, "PUT", "/mode", {"mode": "SOMETIMES"})[1]["error_code"] == 42204
    assert call(reg, "DELETE", "/mode/u") == (200, {"mode": "READONLY"})
    assert register(reg, "u", record_schema("Y", [("y", "int"), ("z", "int", 0)]))[0] == 200


def test_references(reg):
    money = {"type": "record", "name": "Money", "namespace": "shop",
             "fields": [{"name": "cents", "type": "long"}]}
    assert register(reg, "money", money) == (200, {"id": 1})
    order = {"type": "record", "name": "Order", "namespace": "shop",
             "fields": [{"name": "total", "type": "shop.Money"}]}
    refs = [{"name": "shop.Money", "subject": "money", "version": 1}]
    assert register(reg, "order", order, references=refs) == (200, {"id": 2})
    st, got = call(reg, "GET", "/schemas/ids/2")
    assert st == 200 and got["references"] == refs
    assert call(reg, "GET", "/subjects/order/versions/1")[1]["references"] == refs
    assert call(reg, "GET", "/subjects/money/versions/1/referencedby") == (200, [2])
    assert call(reg, "DELETE", "/subjects/money") == (422, {
        "error_code": 42206,
        "message": "One or more references exist to the schema "
                   "{magic=1,keytype=SCHEMA,subject=money,version=1}."})
    bad = [{"name": "shop.Money", "subject": "money", "version": 9}]
    assert register(reg, "order", order, references=bad)[1]["error_code"] == 42201


def test_bad_input_gets_confluents_errors_and_the_broker_keeps_serving(reg):
    assert call(reg, "POST", "/subjects/s/versions", raw="{not json") [0] == 400
    assert call(reg, "POST", "/subjects/s/versions", raw="[1,2]")[0] == 400
    assert call(reg, "POST", "/subjects/s/versions", {"schema": ""}) == (
        422, {"error_code": 42201, "message": "Empty schema"})
    st, got = call(reg, "POST", "/subjects/s/versions", {"schema": "{\"type\": "})
    assert st == 422 and got["error_code"] == 42201 and got["message"].startswith(
        "Invalid schema")
    assert call(reg, "POST", "/subjects/s/versions",
                {"schema": "{}", "schemaType": "XML"}) == (
        422, {"error_code": 42201, "message": "Invalid schema type XML"})
    assert call(reg, "GET", "/nowhere") == (404, {"error_code": 404,
                                                  "message": "HTTP 404 Not Found"})
    assert call(reg, "GET", "/subjects/s/versions/1/what") == (
        404, {"error_code": 404, "message": "HTTP 404 Not Found"})
    assert call(reg, "PATCH", "/subjects") == (
        405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
    assert call(reg, "PUT", "/subjects/s/versions") == (
        405, {"error_code": 405, "message": "HTTP 405 Method Not Allowed"})
    assert call(reg, "GET", "/subjects/a%01b/versions") == (
        422, {"error_code": 42208, "message": "Invalid subject a\x01b"})
    # a body over the 16 MiB bound: refused before it is read whole
    st, _ = call(reg, "POST", "/subjects/s/versions", raw=b"x" * (17 << 20))
    assert st == 413
    # curl, as an operator would
    out = subprocess.run(["curl", "-s", "-m", "10", reg.registry + "/schemas/ids/99"],
                         stdout=subprocess.PIPE, timeout=15).stdout
    assert json.loads(out) == {"error_code": 40403, "message": "Schema 99 not found"}
    assert register(reg, "s", V1) == (200, {"id": 1})
    reg.assert_alive()


def test_json_and_protobuf_are_kept_byte_exact_and_need_level_none(reg):
    js = '{"type": "object",  "properties": {"a": {"type": "string"}}}'
    assert register(reg, "j", js, schemaType="JSON") == (200, {"id": 1})
    st, got = call(reg, "GET", "/schemas/ids/1")
    assert st == 200 and got == {"schemaType": "JSON", "schema": js}
    js2 = '{"type": "object"}'
    st, got = register(reg, "j", js2, schemaType="JSON")
    assert st == 409 and "set the subject's level to NONE" in got["message"]
    assert call(reg, "PUT", "/config/j", {"compatibility": "NONE"})[0] == 200
    assert register(reg, "j", js2, schemaType="JSON") == (200, {"id": 2})
    proto = 'syntax = "proto3";\nmessage M { string a = 1; }\n'
    assert register(reg, "p", proto, schemaType="PROTOBUF") == (200, {"id": 3})
    assert call(reg, "GET", "/schemas/ids/3/schema") == (200, proto)


def test_restart_keeps_every_subject_version_id_setting_and_deletion(reg):
    register(reg, "a", V1)
    register(reg, "a", record_schema("Order", [("id", "long"), ("n", "int", 0)]))
    register(reg, "b", V1)
    call(reg, "PUT", "/config/a", {"compatibility": "FORWARD"})
    call(reg, "PUT", "/mode/b", {"mode": "READONLY"})
    call(reg, "DELETE", "/subjects/a/versions/1")
    before = [call(reg, "GET", p) for p in (
        "/subjects?deleted=true", "/subjects/a/versions?deleted=true", "/schemas/ids/1",
        "/schemas/ids/2", "/config/a", "/mode/b", "/subjects/b/versions/1",
        "/schemas/ids/1/versions?deleted=true")]
    reg.restart()
    after = [call(reg, "GET", p) for p in (
        "/subjects?deleted=true", "/subjects/a/versions?deleted=true", "/schemas/ids/1",
        "/schemas/ids/2", "/config/a", "/mode/b", "/subjects/b/versions/1",
        "/schemas/ids/1/versions?deleted=true")]
    assert after == before
    assert call(reg, "GET", "/subjects/a/versions") == (200, [2])
    call(reg, "DELETE", "/mode/b")
    assert register(reg, "c", record_schema("New", [("q", "int")])) == (200, {"id": 3})


def test_schemas_topic_holds_confluents_records(reg):
    from support import ck_conf
    from confluent_kafka import Consumer, TopicPartition
    register(reg, "s", V1)
    call(reg, "PUT", "/config/s", {"compatibility": "NONE"})
    c = Consumer(ck_conf(reg, **{"group.id": "x", "enable.auto.commit": False}))
    c.assign([TopicPartition("_schemas", 0, 0)])
    got = []
    for _ in range(50):
        m = c.poll(0.2)
        if m is not None and not m.error():
            got.append((json.loads(m.key()), json.loads(m.value())))
        if len(got) == 2:
            break
    c.close()
    assert got == [
        ({"keytype": "SCHEMA", "subject": "s", "version": 1, "magic": 1},
         {"subject": "s", "version": 1, "id": 1, "schema": V1_TEXT, "deleted": False}),
        ({"keytype": "CONFIG", "subject": "s", "magic": 0}, {"compatibilityLevel": "NONE"}),
    ]


def test_invalid_avro_is_refused_with_the_parsers_reason(reg):
    st, got = register(reg, "s", {"type": "record", "fields": []})
    assert st == 422 and got["error_code"] == 42201, got
    assert "name" in got["message"].lower(), got
    st, got = register(reg, "s", {"type": "nosuchtype"})
    assert st == 422 and got["error_code"] == 42201, got
    # deep nesting: refused, the broker keeps serving
    deep = '{"type":"array","items":' * 500 + '"int"' + '}' * 500
    st, got = register(reg, "s", deep)
    assert st == 422 and got["error_code"] == 42201, got
    assert register(reg, "s", V1) == (200, {"id": 1})


def test_attribute_order_and_whitespace_give_the_same_id(reg):
    assert register(reg, "s", V1) == (200, {"id": 1})
    reordered = '{ "fields" : [ {"type": "long", "name": "id"} ], "name": "Order",' \
                ' "type": "record" }'
    assert register(reg, "t", reordered) == (200, {"id": 1})
    assert call(reg, "GET", "/schemas/ids/1/schema") == (200, V1)


def test_concurrent_writes_queue_and_get_distinct_ids_and_versions(reg):
    """One write in flight at a time (sr_log.c R1): parallel registrations
    of different schemas under one subject all succeed, each with its own
    id and version; clients that hang up while queued change nothing else."""
    import socket
    from concurrent.futures import ThreadPoolExecutor
    assert call(reg, "PUT", "/config/par", {"compatibility": "NONE"})[0] == 200
    schemas = [record_schema("P%d" % i, [("f", "long")]) for i in range(24)]
    host, port = reg.registry.split("//")[1].split(":")
    body = json.dumps({"schema": json.dumps(record_schema("Gone", [("g", "int")]))}).encode()
    quitters = []
    for _ in range(5):                  # a POST, then the client is gone
        s = socket.create_connection((host, int(port)), timeout=5)
        s.sendall(b"POST /subjects/par/versions HTTP/1.1\r\nHost: x\r\nContent-Type: "
                  b"application/json\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body))
        quitters.append(s)
    with ThreadPoolExecutor(8) as ex:
        futs = [ex.submit(register, reg, "par", sc) for sc in schemas]
        for s in quitters:
            s.close()
        got = [f.result() for f in futs]
    assert all(st == 200 for st, _ in got), got
    ids = sorted(b["id"] for _, b in got)
    assert len(set(ids)) == len(schemas)
    st, versions = call(reg, "GET", "/subjects/par/versions")
    assert st == 200 and versions == list(range(1, len(versions) + 1))
    assert len(versions) in (len(schemas), len(schemas) + 1)   # the quitters' one schema
    for sc, (_, b) in zip(schemas, got):
        st, x = call(reg, "GET", "/schemas/ids/%d" % b["id"])
        assert st == 200 and json.loads(x["schema"]) == sc
    reg.assert_alive()


def test_hostile_paths_and_names(reg):
    assert call(reg, "GET", "/subjects/%s/versions" % ("s" * 5000))[1]["error_code"] == 42208
    # a subject with a slash, encoded: one segment
    assert register(reg, "a%2Fb", V1) == (200, {"id": 1})
    assert call(reg, "GET", "/subjects") == (200, ["a/b"])
    assert call(reg, "GET", "/" + "/".join(["x"] * 50))[0] == 404
    assert call(reg, "GET", "/schemas/ids/-1")[1]["error_code"] == 40403
    assert call(reg, "GET", "/schemas/ids/99999999999")[1]["error_code"] == 40403
    assert call(reg, "PUT", "/config", raw="null")[0] == 400
    assert call(reg, "PUT", "/config", {"compatibility": 7})[1]["error_code"] == 42203
    assert call(reg, "POST", "/subjects/s/versions", {"schema": 7})[1]["error_code"] == 42201
    assert call(reg, "POST", "/subjects/s/versions",
                {"schema": json.dumps(V1), "references": "x"})[1]["error_code"] == 42201
    reg.assert_alive()


def test_https_listener_serves_with_the_brokers_tls_settings(start_broker, tmp_path):
    """schema.registry.listeners=https:// binds through the admin endpoint's
    listener code (daemon/net/net_http.c) with the ssl.* settings."""
    from conftest import free_port
    from tls_support import make_certs, ssl_overrides
    certs = make_certs(str(tmp_path))
    o = ssl_overrides(certs, "none")
    o["schema.registry.listeners"] = "https://127.0.0.1:%d" % free_port()
    b = start_broker(o)
    url = b.overrides["schema.registry.listeners"]
    r = requests.post(url + "/subjects/s/versions", data=json.dumps({"schema": V1_TEXT}),
                      headers={"Content-Type": "application/json"}, verify=certs.ca.crt,
                      timeout=15)
    assert (r.status_code, r.json()) == (200, {"id": 1})
    r = requests.get(url + "/schemas/ids/1", verify=certs.ca.crt, timeout=15)
    assert r.status_code == 200 and r.json() == {"schema": V1_TEXT}
    assert r.headers["Content-Type"] == "application/vnd.schemaregistry.v1+json"
    with pytest.raises(requests.exceptions.SSLError):
        requests.get(url + "/schemas/ids/1", verify=True, timeout=15)


def test_a_record_another_writer_put_in_schemas_is_applied_before_an_id_is_chosen(reg):
    """A SCHEMA record produced straight into _schemas (any Kafka client can,
    as with Confluent's registry) takes its id: a registration right after
    it gets the next id, never the same one for another schema."""
    from support import ck_producer, produce_ok
    register(reg, "first", V1)                                 # id 1, _schemas exists
    foreign = '"string"'
    produce_ok(ck_producer(reg), "_schemas", [{
        "key": json.dumps({"keytype": "SCHEMA", "subject": "other", "version": 1,
                           "magic": 1}).encode(),
        "value": json.dumps({"subject": "other", "version": 1, "id": 2, "schema": foreign,
                             "deleted": False}).encode(), "partition": 0}])
    mine = record_schema("Mine", [("m", "long")])
    st, got = register(reg, "mine", mine)
    assert st == 200 and got["id"] != 2, got
    assert call(reg, "GET", "/schemas/ids/%d" % got["id"])[1]["schema"] == json.dumps(
        mine, separators=(",", ":"))
    assert call(reg, "GET", "/schemas/ids/2") == (200, {"schema": foreign})


def test_reference_versions_out_of_range_and_the_last_version(reg):
    money = {"type": "record", "name": "Money", "fields": [{"name": "c", "type": "long"}]}
    assert register(reg, "money", money)[0] == 200
    order = {"type": "record", "name": "Order", "fields": [{"name": "t", "type": "Money"}]}
    for v in (4294967297, 0, -2):
        st, got = register(reg, "order", order,
                           references=[{"name": "Money", "subject": "money", "version": v}])
        assert (st, got["error_code"]) == (422, 42201), (v, got)
    # IMPORT at the last version there is: nothing can follow it
    call(reg, "PUT", "/config/big", {"compatibility": "NONE"})
    assert call(reg, "PUT", "/mode/big", {"mode": "IMPORT"})[0] == 200
    assert register(reg, "big", V1, id=500, version=2147483647) == (200, {"id": 500})
    assert call(reg, "PUT", "/mode/big", {"mode": "READWRITE"})[0] == 200
    st, got = register(reg, "big", record_schema("Z", [("z", "int")]))
    assert (st, got["error_code"]) == (422, 42202), got
    assert call(reg, "GET", "/subjects/big/versions") == (200, [2147483647])


def test_long_messages_with_non_ascii_text_stay_valid_json(reg):
    """An error message cut at its length limit keeps whole UTF-8
    characters, wherever the cut falls: the answer is Confluent's 422 with a
    JSON body, not a 500."""
    for prefix in ("", "a", "ab"):
        st, got = register(reg, "u8", prefix + "é" * 1200)
        assert st == 422 and isinstance(got, dict) and got["error_code"] == 42201, (st, got)
