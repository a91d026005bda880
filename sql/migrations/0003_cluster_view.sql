-- Cluster facts apart from this broker's bookmarks (issue 14).
--
-- Before: one `partitions` row held both what the cluster agrees on
-- (leader, epoch, replicas and ISR as comma-joined text) and what only
-- this broker knows about its own copy of the log (log start, recovery
-- point, high watermark).  In cluster mode the first kind comes from
-- ZooKeeper and is the same on every broker; the second is per broker and
-- exists only where a replica is hosted.  So:
--
--   partitions          topic, partition, leader, leader_epoch   (cluster)
--   partition_replicas  one row per replica: position in the preference
--                       order (0 = preferred leader), broker, in ISR  (cluster)
--   local_logs          log start, recovery point, high watermark of the
--                       logs this broker hosts                 (this broker)
--   cluster             the cluster id, generated once (md_cluster_id)
--
-- Operators read the `partitions` view of the SQL surface, which keeps its
-- columns (replicas and isr as "1,2,3"), so nothing they use changes.
DROP VIEW IF EXISTS topic_partitions;
DROP VIEW IF EXISTS consumer_lag;

CREATE TABLE partition_replicas (
    topic     TEXT    NOT NULL,
    partition INTEGER NOT NULL,
    position  INTEGER NOT NULL CHECK (position >= 0),
    broker_id INTEGER NOT NULL CHECK (broker_id >= 0),
    in_isr    INTEGER NOT NULL DEFAULT 1 CHECK (in_isr IN (0, 1)),
    PRIMARY KEY (topic, partition, broker_id),
    UNIQUE (topic, partition, position),
    FOREIGN KEY (topic, partition) REFERENCES partitions (topic, partition)
        ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

-- "1,2,3" → one row per id, in order; ISR membership from the isr text.
WITH RECURSIVE split(topic, partition, isr, position, rest, id) AS (
    SELECT topic, partition, isr, -1, replicas || ',', NULL FROM partitions
    UNION ALL
    SELECT topic, partition, isr, position + 1,
           substr(rest, instr(rest, ',') + 1),
           CAST(substr(rest, 1, instr(rest, ',') - 1) AS INTEGER)
      FROM split WHERE rest <> ''
)
INSERT INTO partition_replicas (topic, partition, position, broker_id, in_isr)
SELECT topic, partition, position, id,
       instr(',' || isr || ',', ',' || id || ',') > 0
  FROM split WHERE position >= 0 AND id IS NOT NULL;

CREATE TABLE local_logs (
    topic            TEXT    NOT NULL,
    partition        INTEGER NOT NULL,
    log_start_offset INTEGER NOT NULL DEFAULT 0,
    recovery_point   INTEGER NOT NULL DEFAULT 0,
    high_watermark   INTEGER NOT NULL DEFAULT 0,
    PRIMARY KEY (topic, partition),
    FOREIGN KEY (topic, partition) REFERENCES partitions (topic, partition)
        ON DELETE CASCADE
) STRICT, WITHOUT ROWID;

INSERT INTO local_logs (topic, partition, log_start_offset, recovery_point,
                        high_watermark)
SELECT topic, partition, log_start_offset, recovery_point, high_watermark
  FROM partitions;

ALTER TABLE partitions DROP COLUMN replicas;
ALTER TABLE partitions DROP COLUMN isr;
ALTER TABLE partitions DROP COLUMN log_start_offset;
ALTER TABLE partitions DROP COLUMN recovery_point;
ALTER TABLE partitions DROP COLUMN high_watermark;

CREATE TABLE cluster (
    id         INTEGER PRIMARY KEY CHECK (id = 0),
    cluster_id TEXT    NOT NULL CHECK (length(cluster_id) BETWEEN 1 AND 64),
    created_at INTEGER NOT NULL
) STRICT;
