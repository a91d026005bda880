-- The cluster id of a link's source (daemon/link/link.c K18), recorded
-- from the source's Metadata at the link's first connection: a source
-- answering with another id (bootstrap_servers changed to another cluster)
-- is not mirrored from.  Each broker's own (cluster mode records it per
-- broker, not in ZooKeeper).  NULL: not known yet, or the source gives none.
ALTER TABLE cluster_links ADD COLUMN source_cluster_id TEXT;
