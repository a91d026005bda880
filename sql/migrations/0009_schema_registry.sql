-- The schema registry's mirror (issue 31; daemon/registry/sr_mirror.c,
-- metadata/schemas.c): what the compacted _schemas topic holds, written by
-- the broker each time it applies records of it and rebuilt from the topic
-- on start, so a row never says more than the topic.  Operators read it
-- through the views `schemas` and `subjects` (admin/sql_surface.c).
CREATE TABLE registry_schemas (
    id          INTEGER PRIMARY KEY,            -- the schema id of the wire format
    schema_type TEXT NOT NULL,                  -- AVRO, JSON, PROTOBUF
    schema      TEXT NOT NULL,                  -- as the registry serves it
    refs        TEXT NOT NULL DEFAULT '[]'      -- Confluent's references, JSON
);
CREATE TABLE registry_versions (
    subject   TEXT NOT NULL,
    version   INTEGER NOT NULL,
    schema_id INTEGER NOT NULL,
    deleted   INTEGER NOT NULL DEFAULT 0 CHECK (deleted IN (0, 1)),   -- soft-deleted
    PRIMARY KEY (subject, version)
) WITHOUT ROWID;
CREATE TABLE registry_configs (
    subject       TEXT PRIMARY KEY,             -- '' the registry's own
    compatibility TEXT,                         -- NULL: not set here
    mode          TEXT
) WITHOUT ROWID;
