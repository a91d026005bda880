"""The schema registry mirrored into the broker's SQLite (issue 31): SQL's
`schemas` and `subjects` show what the REST API shows, after writes,
deletions and a restart; INSERT INTO subjects registers and DELETE FROM
subjects deletes through the registry's own REST path (the same ids, the
same compatibility verdicts and messages), and the other writes are refused
with a reason."""
import json
import os
import resource
import socket

import pytest

import support

from registry_support import call, record_schema, register, start_registry
from support import admin_socket, socket_http


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def sql(b, stmt):
    st, text, _ = socket_http(admin_socket(b), "/sql?format=json", body=stmt)
    return st, (json.loads(text) if st == 200 else text)


def test_sql_shows_what_the_api_shows(reg):
    v1 = record_schema("P", [("id", "long")])
    v2 = record_schema("P", [("id", "long"), ("tag", "string", "")])
    assert register(reg, "p-value", v1) == (200, {"id": 1})
    assert register(reg, "p-value", v2) == (200, {"id": 2})
    assert register(reg, "q-value", v1) == (200, {"id": 1})
    call(reg, "PUT", "/config/q-value", {"compatibility": "FULL"})
    call(reg, "DELETE", "/subjects/p-value/versions/1")

    def rows():
        st, got = sql(reg, "SELECT subject, version, schema_id, deleted, compatibility, mode "
                           "FROM subjects ORDER BY 1, 2")
        assert st == 200, got
        return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in got]

    want = [("p-value", 1, 1, 1, "BACKWARD", "READWRITE"),
            ("p-value", 2, 2, 0, "BACKWARD", "READWRITE"),
            ("q-value", 1, 1, 0, "FULL", "READWRITE")]
    assert rows() == want
    st, got = sql(reg, "SELECT id, schema_type, schema FROM schemas ORDER BY id")
    assert st == 200
    got = [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in got]
    assert got == [(1, "AVRO", call(reg, "GET", "/schemas/ids/1")[1]["schema"]),
                   (2, "AVRO", call(reg, "GET", "/schemas/ids/2")[1]["schema"])]
    st, got = sql(reg, "SELECT json_extract(schema, '$.fields[1].name') AS f FROM schemas "
                       "WHERE id = 2")
    assert st == 200 and [list(r.values())[0] if isinstance(r, dict) else r[0]
                          for r in got] == ["tag"]
    # a permanent delete leaves no row behind; schema 2 goes with its last version
    call(reg, "DELETE", "/subjects/p-value")
    call(reg, "DELETE", "/subjects/p-value?permanent=true")
    want = [want[2]]
    assert rows() == want
    st, got = sql(reg, "SELECT id FROM schemas")
    assert st == 200 and len(got) == 1
    # rebuilt from _schemas on start
    reg.restart()
    assert rows() == want
    st, text = sql(reg, "UPDATE subjects SET version = 3")
    assert st == 400 and "only compatibility and mode" in text, text
    st, text = sql(reg, "INSERT INTO schemas (schema) VALUES ('\"int\"')")
    assert st == 400 and "registered under a subject" in text, text


def rows_of(got):
    return [tuple(r.values()) if isinstance(r, dict) else tuple(r) for r in got]


def sql_ok(b, stmt):
    st, got = sql(b, stmt)
    assert st == 200, got
    return rows_of(got)


def quoted(text):
    return "'" + text.replace("'", "''") + "'"


def test_insert_into_subjects_registers_as_the_api_does(reg):
    v1 = json.dumps(record_schema("Pay", [("id", "long")]))
    v2 = json.dumps(record_schema("Pay", [("id", "long"), ("cur", "string", "EUR")]))
    bad = json.dumps(record_schema("Pay", [("id", "string")]))
    # the REST API registers v1 under one subject; SQL under another: one id
    assert register(reg, "rest-value", v1) == (200, {"id": 1})
    assert sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('pay-value', %s)"
                  % quoted(v1)) == []
    assert call(reg, "GET", "/subjects/pay-value/versions/1") == (200, {
        "subject": "pay-value", "version": 1, "id": 1,
        "schema": call(reg, "GET", "/schemas/ids/1")[1]["schema"]})
    # the same schema again: no new version, as the API answers its id
    sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('pay-value', %s)" % quoted(v1))
    assert call(reg, "GET", "/subjects/pay-value/versions") == (200, [1])
    # an evolution the level allows: version 2, a new id, read back by SQL at once
    sql_ok(reg, "INSERT INTO subjects (subject, schema, schema_type) VALUES "
                "('pay-value', %s, 'AVRO')" % quoted(v2))
    assert call(reg, "GET", "/subjects/pay-value/versions/latest")[1]["id"] == 2
    assert sql_ok(reg, "SELECT version, schema_id, deleted FROM subjects WHERE "
                       "subject = 'pay-value' ORDER BY version") == [(1, 1, 0), (2, 2, 0)]
    # incompatible: the statement fails with Confluent's text, nothing registered
    st, text = sql(reg, "INSERT INTO subjects (subject, schema) VALUES ('pay-value', %s)"
                   % quoted(bad))
    assert st == 400, text
    assert json.loads(text)["error"].startswith(
        'INVALID_REQUEST: schema registry error_code 409: Schema being registered is '
        'incompatible with an earlier schema for subject "pay-value", details: '
        "[{errorType:'TYPE_MISMATCH'"), text
    assert call(reg, "GET", "/subjects/pay-value/versions") == (200, [1, 2])
    assert call(reg, "GET", "/schemas/ids/3")[0] == 404
    # invalid: the parser's reason, 42201
    st, text = sql(reg, "INSERT INTO subjects (subject, schema) VALUES ('pay-value', "
                        "'{\"type\": \"record\"}')")
    assert st == 400 and "error_code 42201: Invalid schema" in text, text
    # JSON Schema with references given as Confluent's JSON
    assert sql_ok(reg, "INSERT INTO subjects (subject, schema, schema_type) VALUES "
                       "('js', '{\"type\": \"object\"}', 'JSON')") == []
    assert call(reg, "GET", "/subjects/js/versions/1")[1]["schemaType"] == "JSON"
    ref = json.dumps([{"name": "Pay", "subject": "pay-value", "version": 2}])
    user = json.dumps({"type": "record", "name": "User", "fields": [
        {"name": "p", "type": "Pay"}]})
    sql_ok(reg, "INSERT INTO subjects (subject, schema, \"references\") VALUES "
                "('user-value', %s, %s)" % (quoted(user), quoted(ref)))
    got = call(reg, "GET", "/subjects/user-value/versions/1")[1]
    assert got["references"] == json.loads(ref), got
    assert sql_ok(reg, "SELECT \"references\" FROM subjects WHERE subject = 'user-value'"
                  ) == [(json.dumps(json.loads(ref), separators=(",", ":")),)]
    # columns the registry assigns, and bad references, are refused
    st, text = sql(reg, "INSERT INTO subjects (subject, schema, version) VALUES "
                        "('pay-value', %s, 7)" % quoted(v2))
    assert st == 400 and "the registry assigns version" in text, text
    st, text = sql(reg, "INSERT INTO subjects (subject, schema, \"references\") VALUES "
                        "('x', %s, 'nope')" % quoted(v1))
    assert st == 400 and "references must be a JSON array" in text, text
    # kept across a restart (they are records of _schemas)
    reg.restart()
    assert call(reg, "GET", "/subjects") == (200, ["js", "pay-value", "rest-value",
                                                   "user-value"])
    assert call(reg, "GET", "/subjects/pay-value/versions") == (200, [1, 2])


def test_delete_from_subjects_is_soft_then_permanent(reg):
    v1 = json.dumps(record_schema("D", [("id", "long")]))
    v2 = json.dumps(record_schema("D", [("id", "long"), ("n", "int", 0)]))
    for v in (v1, v2):
        sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('d-value', %s)" % quoted(v))
        sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('e-value', %s)" % quoted(v))
    # one version, soft: REST agrees
    st, got = sql(reg, "DELETE FROM subjects WHERE subject = 'd-value' AND version = 1")
    assert st == 200, got
    assert call(reg, "GET", "/subjects/d-value/versions") == (200, [2])
    assert call(reg, "GET", "/subjects/d-value/versions?deleted=true") == (200, [1, 2])
    # the whole subject, soft: the live versions only
    sql_ok(reg, "DELETE FROM subjects WHERE subject = 'e-value' AND NOT deleted")
    assert call(reg, "GET", "/subjects")[1] == ["d-value"]
    assert call(reg, "GET", "/subjects?deleted=true")[1] == ["d-value", "e-value"]
    assert sql_ok(reg, "SELECT version, deleted FROM subjects WHERE subject = 'e-value' "
                       "ORDER BY 1") == [(1, 1), (2, 1)]
    # then permanent: what was soft-deleted goes, the rest stays
    sql_ok(reg, "DELETE FROM subjects WHERE deleted")
    assert call(reg, "GET", "/subjects?deleted=true")[1] == ["d-value"]
    assert call(reg, "GET", "/subjects/d-value/versions?deleted=true") == (200, [2])
    assert sql_ok(reg, "SELECT subject, version, deleted FROM subjects ORDER BY 1, 2") == [
        ("d-value", 2, 0)]
    # a version another schema references may not go: the registry's 42206
    ref = json.dumps([{"name": "D", "subject": "d-value", "version": 2}])
    user = json.dumps({"type": "record", "name": "U", "fields": [{"name": "d", "type": "D"}]})
    sql_ok(reg, "INSERT INTO subjects (subject, schema, \"references\") VALUES ('u', %s, %s)"
           % (quoted(user), quoted(ref)))
    st, text = sql(reg, "DELETE FROM subjects WHERE subject = 'd-value'")
    assert st == 400 and "error_code 42206: One or more references exist" in text, text
    assert call(reg, "GET", "/subjects/d-value/versions") == (200, [2])
    # what is gone stays gone after a restart
    reg.restart()
    assert call(reg, "GET", "/subjects?deleted=true")[1] == ["d-value", "u"]
    assert call(reg, "GET", "/subjects/d-value/versions?deleted=true") == (200, [2])


def test_delete_of_every_version_is_the_subjects_delete(reg):
    """A DELETE matching every version of a subject is Confluent's DELETE
    /subjects/{s}: soft while a version is live (already soft-deleted ones
    stay soft, the subject's level goes with it), permanent after."""
    v1 = json.dumps(record_schema("M", [("id", "long")]))
    v2 = json.dumps(record_schema("M", [("id", "long"), ("n", "int", 0)]))
    for v in (v1, v2):
        sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('m-value', %s)" % quoted(v))
    assert call(reg, "PUT", "/config/m-value", {"compatibility": "FULL"})[0] == 200
    sql_ok(reg, "DELETE FROM subjects WHERE subject = 'm-value' AND version = 1")
    # v1 soft-deleted, v2 live: the subject's soft delete, v1 not escalated
    st, got = sql(reg, "DELETE FROM subjects WHERE subject = 'm-value'")
    assert st == 200, got
    assert call(reg, "GET", "/subjects/m-value/versions?deleted=true") == (200, [1, 2])
    assert call(reg, "GET", "/subjects/m-value/versions")[0] == 404
    assert call(reg, "GET", "/config/m-value")[1]["error_code"] == 40408
    # the same statement again: every version soft-deleted, so permanently
    sql_ok(reg, "DELETE FROM subjects WHERE subject = 'm-value'")
    assert call(reg, "GET", "/subjects?deleted=true") == (200, [])
    assert sql_ok(reg, "SELECT count(*) FROM subjects") == [(0,)]
    st, text = sql(reg, "DELETE FROM subjects WHERE subject = 'm-value'")
    assert st == 200, text                                   # nothing matched



def test_delete_naming_a_version_never_deletes_the_whole_subject(reg):
    """WHERE version = 1 matching every version this broker's mirror shows
    (the only one here; on a lagging follower, all it knows of) deletes
    that version, not the subject: the subject's level stays (a subject's
    delete would take it), and run again it purges that version only."""
    v1 = json.dumps(record_schema("W", [("id", "long")]))
    sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('w-value', %s)" % quoted(v1))
    assert call(reg, "PUT", "/config/w-value", {"compatibility": "FULL"})[0] == 200
    for stmt in ("DELETE FROM subjects WHERE subject = 'w-value' AND version = 1",
                 "DELETE FROM subjects WHERE schema_id = 1"):
        sql_ok(reg, stmt)
        assert call(reg, "GET", "/config/w-value") == (200, {"compatibilityLevel": "FULL"})
    assert call(reg, "GET", "/subjects/w-value/versions?deleted=true")[0] == 404
    assert reg.log_text().count("deleted w-value version 1 through SQL") == 2
    assert "deleted subject w-value" not in reg.log_text()

def test_sluice_sql_registers_and_shows_a_decoded_message_readably(reg):
    """The shell registers through SQL; a table keeps value_json compact and
    whole on its line; \\x (expanded display, line mode) pretty-prints it."""
    import io
    import struct
    import subprocess

    import avro.io
    import avro.schema

    from support import ck_producer, create_topic, produce_ok, topic_name
    from test_sluice_sql import shell_path

    t = topic_name("readable")
    schema = {"type": "record", "name": "Order", "fields": [
        {"name": "id", "type": "long"}, {"name": "note", "type": "string"},
        {"name": "tags", "type": {"type": "array", "items": "string"}},
        {"name": "empty", "type": {"type": "map", "values": "int"}}]}
    shell = [shell_path(), "--socket", admin_socket(reg), "-c"]

    def sh(script):
        r = subprocess.run(shell + [script], capture_output=True, text=True, timeout=30)
        assert r.returncode == 0, r.stderr
        return r.stdout

    sh("INSERT INTO subjects (subject, schema) VALUES ('%s-value', %s);"
       % (t, quoted(json.dumps(schema))))
    sid = call(reg, "GET", "/subjects/%s-value/versions/1" % t)[1]["id"]
    value = {"id": 7, "note": "a, b: {c}", "tags": ["x", "y"], "empty": {}}
    out = io.BytesIO()
    avro.io.DatumWriter(avro.schema.parse(json.dumps(schema))).write(
        value, avro.io.BinaryEncoder(out))
    create_topic(reg, t, 1)
    produce_ok(ck_producer(reg), t, [{"value": struct.pack(">bI", 0, sid) + out.getvalue(),
                                      "partition": 0}])
    compact = sql_ok(reg, "SELECT value_json FROM messages WHERE topic = '%s'" % t)[0][0]
    assert json.loads(compact) == value
    # a table: the value whole, as SQL holds it, on the row's one line
    lines = sh("SELECT offset, value_json FROM messages WHERE topic = '%s';" % t).splitlines()
    assert lines[0].split() == ["offset", "value_json"] and len(lines) == 3, lines
    assert lines[2] == "     0  " + compact, lines
    # expanded: one value a line, the JSON pretty-printed under its label
    text = sh("\\x\nSELECT offset, value_json FROM messages WHERE topic = '%s';" % t)
    assert text.startswith("Expanded display is on.\n"), text
    want = json.dumps(value, indent=2).replace("\n", "\n" + " " * 13)
    assert text.splitlines()[1:] == ["    offset = 0"] + ("value_json = " + want).splitlines()
    assert "\n                 \"x\",\n" in text                  # nested: two more


def test_update_subjects_sets_the_level_once_per_subject(reg):
    """UPDATE subjects SET compatibility / mode is PUT /config/{s} (/mode/{s})
    once per subject, whatever the rows it matched; NULL clears the
    subject's own; the registry's checks and messages apply."""
    v1 = json.dumps(record_schema("L", [("id", "long")]))
    v2 = json.dumps(record_schema("L", [("id", "long"), ("n", "int", 0)]))
    for v in (v1, v2):
        sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('l-value', %s)" % quoted(v))
    sql_ok(reg, "INSERT INTO subjects (subject, schema) VALUES ('k-value', %s)" % quoted(v1))
    st, got = socket_http(admin_socket(reg), "/sql?format=json", body=(
        "UPDATE subjects SET compatibility = 'FULL' WHERE subject = 'l-value'"))[:2]
    assert st == 200, got
    assert call(reg, "GET", "/config/l-value") == (200, {"compatibilityLevel": "FULL"})
    assert call(reg, "GET", "/config/k-value")[1]["error_code"] == 40408    # untouched
    assert sql_ok(reg, "SELECT subject, version, compatibility, mode FROM subjects "
                       "ORDER BY 1, 2") == [("k-value", 1, "BACKWARD", "READWRITE"),
                                            ("l-value", 1, "FULL", "READWRITE"),
                                            ("l-value", 2, "FULL", "READWRITE")]
    # one record per subject, not per row: _schemas holds the two registrations,
    # k-value's, and one config record
    n = sql_ok(reg, "SELECT count(*) FROM messages WHERE topic = '_schemas'")[0][0]
    assert n == 4, n
    # the level now decides: a change FULL refuses, with the registry's 409
    bad = json.dumps(record_schema("L", [("id", "long"), ("n", "int", 0), ("m", "int")]))
    st, text = sql(reg, "INSERT INTO subjects (subject, schema) VALUES ('l-value', %s)"
                   % quoted(bad))
    assert st == 400 and "error_code 409" in text, text
    # mode, and a level the registry does not know
    sql_ok(reg, "UPDATE subjects SET mode = 'READONLY' WHERE subject = 'k-value'")
    assert call(reg, "GET", "/mode/k-value") == (200, {"mode": "READONLY"})
    st, text = sql(reg, "INSERT INTO subjects (subject, schema) VALUES ('k-value', %s)"
                   % quoted(v2))
    assert st == 400 and "error_code 42205: Subject k-value is in read-only mode" in text, text
    st, text = sql(reg, "UPDATE subjects SET compatibility = 'SIDEWAYS'")
    assert st == 400 and "error_code 42203: Invalid compatibility level" in text, text
    # NULL clears the subject's own: the registry's level applies again
    sql_ok(reg, "UPDATE subjects SET compatibility = NULL, mode = NULL")
    assert call(reg, "GET", "/config/l-value")[1]["error_code"] == 40408
    assert call(reg, "GET", "/mode/k-value")[1]["error_code"] == 40409
    assert sql_ok(reg, "SELECT DISTINCT compatibility, mode FROM subjects") == [
        ("BACKWARD", "READWRITE")]


def test_sql_writes_without_a_registry_say_so(start_broker):
    b = start_broker(overrides={"schema.registry.listeners": "none"})
    st, text = sql(b, "INSERT INTO subjects (subject, schema) VALUES ('x', '\"int\"')")
    assert st == 400 and ("INVALID_REQUEST: the schema registry is not running on this "
                          "broker (schema.registry.listeners)") in text, text


def lowest_free_fd(pid):
    used = {int(f) for f in os.listdir("/proc/%d/fd" % pid)}
    return next(n for n in range(len(used) + 1) if n not in used)


def test_sql_write_when_the_registry_cannot_be_called_fails_cleanly(reg):
    """The registry's own listener cannot be called (socket() fails with
    EMFILE, so libevent answers inside evhttp_make_request, sr_sql.c Q1):
    the statement fails with the registry's 50003, and the broker goes on:
    later writes register, and it stops cleanly."""
    v1 = json.dumps(record_schema("Fd", [("id", "long")]))
    v2 = json.dumps(record_schema("Fd", [("id", "long"), ("n", "string", "")]))
    conn = support.UnixHTTPConnection(admin_socket(reg), 30)   # accepted before the limit
    try:
        def run(stmt):
            conn.request("POST", "/sql?format=json", body=stmt.encode())
            r = conn.getresponse()
            return r.status, r.read().decode()
        assert run("SELECT 1")[0] == 200
        pid = reg.proc.pid
        old = resource.prlimit(pid, resource.RLIMIT_NOFILE)
        resource.prlimit(pid, resource.RLIMIT_NOFILE, (lowest_free_fd(pid), old[1]))
        try:
            st, text = run("INSERT INTO subjects (subject, schema) VALUES ('fd-value', %s)"
                           % quoted(v1))
        finally:
            resource.prlimit(pid, resource.RLIMIT_NOFILE, old)
        assert st == 400 and ("UNKNOWN_SERVER_ERROR: schema registry error_code 50003: the "
                              "schema registry did not answer") in text, text
        for schema, want in ((v1, [1]), (v2, [1, 2])):
            st, text = run("INSERT INTO subjects (subject, schema) VALUES ('fd-value', %s)"
                           % quoted(schema))
            assert st == 200, text
            assert call(reg, "GET", "/subjects/fd-value/versions") == (200, want)
        st, text = run("DELETE FROM subjects WHERE subject = 'fd-value'")
        assert st == 200, text
        assert call(reg, "GET", "/subjects/fd-value/versions")[0] == 404
    finally:
        conn.close()
    assert reg.stop(timeout=20) == 0


def test_an_empty_subject_is_refused_not_registered_elsewhere(reg):
    """INSERT ... VALUES ('', ...) once built /subjects//versions, which the
    router read as /subjects/versions: a lookup under a subject named
    "versions", 200, nothing registered.  Now the statement fails, and the
    REST path with an empty segment is 404."""
    v1 = json.dumps(record_schema("E", [("id", "long")]))
    assert register(reg, "versions", v1) == (200, {"id": 1})   # a subject named so
    st, text = sql(reg, "INSERT INTO subjects (subject, schema) VALUES ('', %s)" % quoted(v1))
    assert st == 400 and "subjects.subject must be a subject's name" in text, text
    st, got = call(reg, "POST", "/subjects//versions", {"schema": v1})
    assert st == 404, got
    st, got = call(reg, "GET", "/subjects//versions")
    assert st == 404, got
    assert call(reg, "GET", "/subjects") == (200, ["versions"])
    assert call(reg, "GET", "/subjects/versions/versions") == (200, [1])
    assert sql_ok(reg, "SELECT subject, version FROM subjects") == [("versions", 1)]


def test_a_failing_mirror_is_rewritten_after_a_backoff_and_logged_once(reg):
    """A mirror job that fails (here a trigger refuses its INSERT, as a full
    disk would) is not retried in a loop: one WARN line, the whole rewrite
    tried again after 1, 2, 4 … s, the registry serving from memory
    meanwhile; once the cause is gone SQL shows the registry again and one
    line says the mirror is whole."""
    import sqlite3
    import time
    from cluster_support import wait_for
    db = sqlite3.connect(os.path.join(reg.data_dir, "sluice.db"), timeout=10)
    db.execute("CREATE TRIGGER fail_mirror BEFORE INSERT ON registry_versions BEGIN "
               "SELECT RAISE(ABORT, 'the test refuses this'); END")
    db.commit()
    try:
        v1 = json.dumps(record_schema("B", [("id", "long")]))
        assert register(reg, "b-value", v1) == (200, {"id": 1})
        assert call(reg, "GET", "/subjects/b-value/versions") == (200, [1])
        time.sleep(2.5)
        assert reg.log_text().count("cannot update its SQL mirror") == 1, reg.log_text()
        assert sql_ok(reg, "SELECT subject FROM subjects") == []
    finally:
        db.execute("DROP TRIGGER fail_mirror")
        db.commit()
        db.close()
    wait_for(lambda: sql_ok(reg, "SELECT subject, version FROM subjects") == [("b-value", 1)],
             20, "the mirror to be rewritten")
    assert "its SQL mirror is whole again" in reg.log_text()
    assert reg.log_text().count("cannot update its SQL mirror") == 1


@pytest.mark.parametrize("host", ["localhost", "0.0.0.0", "[::1]"])
def test_sql_writes_call_the_registry_on_its_bound_address(start_broker, host):
    """SQL's writes call this broker's registry on the listening socket's
    own numeric address (sr_sql.c Q2): a host name is not looked up on the
    loop, a wildcard is called on its loopback, IPv6 too."""
    from conftest import free_port
    if host == "[::1]" and not socket.has_ipv6:
        pytest.skip("no IPv6")
    b = start_registry(start_broker, **{
        "schema.registry.listeners": "http://%s:%d" % (host, free_port())})
    b.registry = b.registry.replace("0.0.0.0", "127.0.0.1")
    v1 = json.dumps(record_schema("H", [("id", "long")]))
    sql_ok(b, "INSERT INTO subjects (subject, schema) VALUES ('h-value', %s)" % quoted(v1))
    assert call(b, "GET", "/subjects/h-value/versions") == (200, [1])
    sql_ok(b, "DELETE FROM subjects WHERE subject = 'h-value'")
    assert call(b, "GET", "/subjects/h-value/versions")[0] == 404
