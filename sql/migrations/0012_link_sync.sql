-- Cluster links' sync state (issue 33 Deliver 1's filters and 3;
-- daemon/link/link_sync.c, metadata/links.c): consumer offsets synced from
-- the source every consumer.offset.sync.ms, and the source topics that
-- auto.create.mirror.topics.filters picked but a normal local topic of the
-- same name keeps from being mirrored.  Shown by the view cluster_links.
ALTER TABLE cluster_links ADD COLUMN offsets_synced_at INTEGER;     -- ms since the epoch; NULL: never
ALTER TABLE cluster_links ADD COLUMN groups_synced INTEGER NOT NULL DEFAULT 0;  -- the last round's
ALTER TABLE cluster_links ADD COLUMN sync_error TEXT;               -- NULL: the last round went well
ALTER TABLE cluster_links ADD COLUMN topics_skipped TEXT;           -- comma-separated; NULL: none
-- The ACLs a link copied from its source (acl.sync.enable): the only ones
-- it ever removes (when the source removed them); an ACL made here is
-- never in it.  acl: resource type, name, pattern type, principal, host,
-- operation and permission, tab-separated, as in acls.
CREATE TABLE link_acls (
    link TEXT NOT NULL,
    acl  TEXT NOT NULL,
    PRIMARY KEY (link, acl)
) WITHOUT ROWID;
