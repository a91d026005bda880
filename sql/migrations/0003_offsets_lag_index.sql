-- Consumer lag reads, for every partition, the offsets committed to it
-- (daemon/sql_surface.c: consumer_lag scans partitions and, per partition,
-- the committed offsets by (topic, partition)).  The index on (topic,
-- partition) alone made that a lookup of the table's row for every
-- committed offset, to fetch `offset`: 50,000 B-tree searches for 1,000
-- partitions x 50 groups.  With `offset` in the index the index covers the
-- query: one search per partition, then a sequential run of entries.
--
-- It replaces committed_offsets_topic (whose prefix it keeps, for topic
-- deletion and lookups by partition).  The price: a commit that moves an
-- offset also moves one index entry (an UPDATE of an indexed column).
DROP INDEX IF EXISTS committed_offsets_topic;
CREATE INDEX committed_offsets_topic_offset ON committed_offsets (topic, partition, offset);
