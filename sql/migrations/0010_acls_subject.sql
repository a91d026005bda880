-- The SUBJECT resource type (issue 31): ACLs on the schema registry's
-- subjects (daemon/security/sec_authz.h's BK_RES_SUBJECT).  SQLite cannot
-- change a CHECK in place: the table is rebuilt with the same rows.
CREATE TABLE acls_new (
    id            INTEGER PRIMARY KEY,
    resource_type TEXT NOT NULL
                  CHECK (resource_type IN ('TOPIC', 'GROUP', 'CLUSTER',
                         'TRANSACTIONAL_ID', 'DELEGATION_TOKEN', 'USER', 'SUBJECT')),
    resource_name TEXT NOT NULL,
    pattern_type  TEXT NOT NULL CHECK (pattern_type IN ('LITERAL', 'PREFIXED')),
    principal     TEXT NOT NULL,
    host          TEXT NOT NULL DEFAULT '*',
    operation     TEXT NOT NULL
                  CHECK (operation IN ('ALL', 'READ', 'WRITE', 'CREATE',
                         'DELETE', 'ALTER', 'DESCRIBE', 'CLUSTER_ACTION',
                         'DESCRIBE_CONFIGS', 'ALTER_CONFIGS',
                         'IDEMPOTENT_WRITE', 'CREATE_TOKENS',
                         'DESCRIBE_TOKENS')),
    permission    TEXT NOT NULL CHECK (permission IN ('ALLOW', 'DENY')),
    UNIQUE (resource_type, resource_name, pattern_type, principal, host,
            operation, permission)
) STRICT;
INSERT INTO acls_new SELECT * FROM acls;
DROP TABLE acls;
ALTER TABLE acls_new RENAME TO acls;
