-- Cluster links and mirror topics (issue 33; daemon/link/link.c,
-- metadata/links.c), standalone's store of record: a link is a source
-- cluster's bootstrap servers and client settings, a mirror topic a local
-- topic that a link fills from a source topic at the source's offsets.
-- Operators read and write them through the views `cluster_links` and
-- `mirror_topics` (admin/sql_surface.c); the secret settings are in
-- `secrets`, which no SQL reader is shown (the authorizer refuses it).
CREATE TABLE cluster_links (
    name              TEXT PRIMARY KEY,
    bootstrap_servers TEXT NOT NULL,                -- host:port[,host:port…]
    config            TEXT NOT NULL DEFAULT '',     -- key=value lines, secrets masked
    secrets           TEXT NOT NULL DEFAULT '',     -- the secret key=value lines
    state             TEXT NOT NULL DEFAULT 'active' CHECK (state IN ('active', 'paused')),
    last_error        TEXT,                         -- NULL: none since the last success
    created_at        INTEGER NOT NULL              -- ms since the epoch
) WITHOUT ROWID;
CREATE TABLE mirror_topics (
    topic        TEXT PRIMARY KEY,                  -- the local (mirror) topic
    link         TEXT NOT NULL REFERENCES cluster_links(name),
    source_topic TEXT NOT NULL,
    state        TEXT NOT NULL DEFAULT 'active'
                 CHECK (state IN ('active', 'paused', 'promoting', 'promoted', 'failed_over',
                                  'failed')),
    last_error   TEXT,
    created_at   INTEGER NOT NULL
) WITHOUT ROWID;
-- The source partitions' log ends as last fetched (the mirror's lag is
-- this minus its own log end) and when the mirror last had all of its
-- source (the lag in time), written on a timer, not per fetch.
CREATE TABLE mirror_partitions (
    topic        TEXT NOT NULL,
    partition    INTEGER NOT NULL,
    source_end   INTEGER NOT NULL,
    caught_up_at INTEGER,                           -- ms since the epoch; NULL: never
    updated_at   INTEGER NOT NULL,
    PRIMARY KEY (topic, partition)
) WITHOUT ROWID;
