-- Views offered to operators (sluice-sql, /sql).  Re-created at every
-- md_open after migrations, so a change here needs no migration: keep each
-- one as DROP VIEW IF EXISTS + CREATE VIEW.  A migration that alters a
-- column used here must drop the view first (SQLite refuses otherwise).

-- Per partition of every topic: where its log stands (this broker's
-- bookmarks, NULL where it hosts no replica) and who holds it.
DROP VIEW IF EXISTS topic_partitions;
CREATE VIEW topic_partitions AS
SELECT p.topic, p.partition, p.leader, p.leader_epoch,
       (SELECT group_concat(broker_id, ',') FROM
          (SELECT broker_id FROM partition_replicas r
            WHERE r.topic = p.topic AND r.partition = p.partition
            ORDER BY position)) AS replicas,
       (SELECT group_concat(broker_id, ',') FROM
          (SELECT broker_id FROM partition_replicas r
            WHERE r.topic = p.topic AND r.partition = p.partition AND r.in_isr
            ORDER BY position)) AS isr,
       l.log_start_offset, l.high_watermark,
       l.high_watermark - l.log_start_offset AS messages,
       l.recovery_point, t.replication_factor
  FROM partitions p JOIN topics t ON t.name = p.topic
  LEFT JOIN local_logs l ON l.topic = p.topic AND l.partition = p.partition;

-- Consumer lag: how far each group's committed offset trails the high
-- watermark (what kafka-consumer-groups --describe shows as LAG).
DROP VIEW IF EXISTS consumer_lag;
CREATE VIEW consumer_lag AS
SELECT o.group_id, o.topic, o.partition, o.offset AS committed_offset,
       l.high_watermark AS log_end_offset,
       max(l.high_watermark - o.offset, 0) AS lag,
       o.commit_time_ms
  FROM committed_offsets o
  JOIN local_logs l ON l.topic = o.topic AND l.partition = o.partition;
