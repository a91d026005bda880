"""Compatibility levels of the schema registry (issue 31) with evolving
Avro schemas: each level decides in its direction (Avro's schema
resolution), transitive levels against every live version; a refusal is
Confluent's 409 and the schema is not registered."""
import json

import pytest

from registry_support import call, record_schema, register, start_registry

BASE = record_schema("R", [("id", "long"), ("qty", "int")])
ADD_DEFAULT = record_schema("R", [("id", "long"), ("qty", "int"), ("note", "string", "")])
ADD_NO_DEFAULT = record_schema("R", [("id", "long"), ("qty", "int"), ("note", "string")])
REMOVE = record_schema("R", [("id", "long")])
PROMOTE = record_schema("R", [("id", "long"), ("qty", "long")])
RENAME = {"type": "record", "name": "R", "fields": [
    {"name": "id", "type": "long"}, {"name": "quantity", "type": "int", "aliases": ["qty"]}]}

# change: (BACKWARD, FORWARD, FULL) — new reads old, old reads new, both
MATRIX = {
    "add a field with a default": (ADD_DEFAULT, (True, True, True)),
    "add a field without a default": (ADD_NO_DEFAULT, (False, True, False)),
    "remove a field without a default": (REMOVE, (True, False, False)),
    "promote int to long": (PROMOTE, (True, False, False)),
    "rename with an alias": (RENAME, (True, False, False)),
}


@pytest.fixture
def reg(start_broker):
    return start_registry(start_broker)


def test_each_level_decides_in_its_direction(reg):
    n = 0
    for change, (schema, expect) in MATRIX.items():
        for level, ok in zip(("BACKWARD", "FORWARD", "FULL"), expect):
            n += 1
            s = "m%d" % n
            assert call(reg, "PUT", "/config/" + s, {"compatibility": level})[0] == 200
            assert register(reg, s, BASE)[0] == 200
            st, got = call(reg, "POST", "/compatibility/subjects/%s/versions/latest?verbose=true"
                            % s, {"schema": json.dumps(schema)})
            assert st == 200 and got["is_compatible"] is ok, (change, level, got)
            assert (got["messages"] == []) is ok, got
            assert all("errorType:" in m for m in got["messages"]), got
            st, got = register(reg, s, schema)
            if ok:
                assert st == 200, (change, level, got)
                assert call(reg, "GET", "/subjects/%s/versions" % s) == (200, [1, 2])
            else:
                assert st == 409 and got["error_code"] == 409, (change, level, got)
                assert got["message"].startswith(
                    "Schema being registered is incompatible with an earlier schema for "
                    "subject \"%s\", details: [{errorType:" % s), got
                assert call(reg, "GET", "/subjects/%s/versions" % s) == (200, [1])


def test_transitive_levels_check_every_live_version(reg):
    v1 = record_schema("T", [("id", "long"), ("x", "int")])
    v2 = record_schema("T", [("id", "long")])
    v3 = record_schema("T", [("id", "long"), ("x", "string", "")])   # reads v2, not v1
    for level, ok in (("BACKWARD", True), ("BACKWARD_TRANSITIVE", False)):
        s = "t-" + level.lower()
        call(reg, "PUT", "/config/" + s, {"compatibility": level})
        assert register(reg, s, v1)[0] == 200
        assert register(reg, s, v2)[0] == 200
        assert (register(reg, s, v3)[0] == 200) is ok, level
    # against one given version rather than the latest
    st, got = call(reg, "POST", "/compatibility/subjects/t-backward_transitive/versions/1",
                   {"schema": json.dumps(v3)})
    assert (st, got) == (200, {"is_compatible": False})
    st, got = call(reg, "POST", "/compatibility/subjects/t-backward_transitive/versions/2",
                   {"schema": json.dumps(v3)})
    assert (st, got) == (200, {"is_compatible": True})


def test_default_level_is_backward_and_none_accepts_anything(reg):
    assert register(reg, "d", BASE)[0] == 200
    other = record_schema("R", [("id", "string")])
    st, got = register(reg, "d", other)
    assert st == 409 and "TYPE_MISMATCH" in got["message"], got
    call(reg, "PUT", "/config/d", {"compatibility": "NONE"})
    assert register(reg, "d", other)[0] == 200
    # a soft-deleted version no longer binds the next one
    call(reg, "PUT", "/config/d", {"compatibility": "BACKWARD"})
    call(reg, "DELETE", "/subjects/d/versions/2")
    assert register(reg, "d", ADD_DEFAULT)[0] == 200
