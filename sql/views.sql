-- Views offered to operators (sluice-sql, /sql).  Re-created at every
-- md_open after migrations, so a change here needs no migration: keep each
-- one as DROP VIEW IF EXISTS + CREATE VIEW.  A migration that alters a
-- column used here must drop the view first (SQLite refuses otherwise).

-- Per partition of every topic: where its log stands.
DROP VIEW IF EXISTS topic_partitions;
CREATE VIEW topic_partitions AS
SELECT p.topic, p.partition, p.leader, p.leader_epoch, p.replicas, p.isr,
       p.log_start_offset, p.high_watermark,
       p.high_watermark - p.log_start_offset AS messages,
       p.recovery_point, t.replication_factor
  FROM partitions p JOIN topics t ON t.name = p.topic;

-- Consumer lag: how far each group's committed offset trails the high
-- watermark (what kafka-consumer-groups --describe shows as LAG).
DROP VIEW IF EXISTS consumer_lag;
CREATE VIEW consumer_lag AS
SELECT o.group_id, o.topic, o.partition, o.offset AS committed_offset,
       p.high_watermark AS log_end_offset,
       max(p.high_watermark - o.offset, 0) AS lag,
       o.commit_time_ms
  FROM committed_offsets o
  JOIN partitions p ON p.topic = o.topic AND p.partition = o.partition;
