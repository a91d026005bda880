"""The schema registry mirrored into the broker's SQLite (issue 31): SQL's
`schemas` and `subjects` show what the REST API shows, after writes,
deletions and a restart, and refuse writes with a reason."""
import json

import pytest

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
    st, text = sql(reg, "DELETE FROM subjects")
    assert st == 400 and "read-only here" in text
